/* avx512/dot.c — the AVX-512 variant's dot of one row: its F32, F16 and BF16 rows' own 512-bit dots (below), the rest
 * avx2/dot.c compiled with this folder's flags, its functions named avx512_* (avx2/matmul.c: one source for both).
 *
 * WHY 512 bits for the float rows: a dot's 32 lanes (matmul.h) are exactly two zmm registers, so the tail of a row is
 * masked lanes of the same fused multiply-adds instead of a spill to memory.
 *
 * INVARIANT: each function returns the bytes of its reference (ref/dot.c): the same IEEE operations on the same
 * operands in the same order.
 */
#include "avx512.h"

#include "simd.h"

/* Lane i % 32 is lane i % 16 of acc[(i / 16) % 2]; the last n % 32 elements go to the lanes they reach, the others
 * kept by the mask. The combine is matmul.h's: (lane[j] + lane[8+j]) + (lane[16+j] + lane[24+j]), then the 8-lane
 * tree ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)). */
static inline __attribute__((always_inline)) float dot_widened(widen_kind elem, const void *a, const float *b,
                                                               size_t n) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(avx512_load16(elem, a, i, 0xffff), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(avx512_load16(elem, a, i + 16, 0xffff), _mm512_loadu_ps(b + i + 16), acc1);
    }
    if (i < n) {
        const __mmask16 live0 = avx512_first(n - i < 16 ? n - i : 16);
        const __mmask16 live1 = avx512_first(n - i > 16 ? n - i - 16 : 0);
        acc0 = _mm512_mask3_fmadd_ps(avx512_load16(elem, a, i, live0), _mm512_maskz_loadu_ps(live0, b + i), acc0,
                                     live0);
        acc1 = _mm512_mask3_fmadd_ps(avx512_load16(elem, a, i + 16, live1), _mm512_maskz_loadu_ps(live1, b + i + 16),
                                     acc1, live1);
    }
    const __m256 v = _mm256_add_ps(_mm256_add_ps(_mm512_castps512_ps256(acc0), _mm512_extractf32x8_ps(acc0, 1)),
                                   _mm256_add_ps(_mm512_castps512_ps256(acc1), _mm512_extractf32x8_ps(acc1, 1)));
    return hsum8(v);
}

float avx512_dot_f32(const float *a, const float *b, size_t n) {
    return dot_widened(WIDEN_F32, a, b, n);
}

float avx512_dot_widened(ggml_type type, const void *w, const float *xf, size_t n) {
    return dot_widened(type == GGML_TYPE_F16 ? WIDEN_F16 : type == GGML_TYPE_BF16 ? WIDEN_BF16 : WIDEN_F32, w, xf, n);
}

#define VARIANT(f) avx512_##f
#include "../avx2/dot.c"
