/* avx2/dot.c — the AVX2 and AVX-512 variants' dot of one weight row with one activation row: F32, F16 and BF16 rows
 * in the f32 dot's 32 lanes, the types the tiles take by their one-row tile (tiles.c), the later types by their block
 * dots (dot_ext.c), any other by the reference.
 *
 * One source, two variants (avx512/dot.c compiles it with the AVX-512 flags, its F32/F16/BF16 dots 512 bits wide).
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "layout.h"
#include "ref/ref.h"

/* Lane i % 32 lives in acc(i / 8) % 4 at element i % 8. Whole groups of 8 run in registers (after the
 * last full 32, at most three groups remain, going to acc0, acc1, acc2 in turn); the last n % 8
 * elements are added to the spilled lanes with the same fmaf the reference uses. */
static inline __attribute__((always_inline)) float dot_widened(widen_kind kind, const void *a, const float *b,
                                                                size_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + DOT_LANES <= n; i += DOT_LANES) {
        acc0 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(load8_widened(kind, a, i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load8_widened(kind, a, i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load8_widened(kind, a, i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    if (i + 8 <= n) {
        acc0 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc0);
        i += 8;
        if (i + 8 <= n) {
            acc1 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc1);
            i += 8;
            if (i + 8 <= n) {
                acc2 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc2);
                i += 8;
            }
        }
    }
    if (i < n) {
        float lane[DOT_LANES];
        _mm256_storeu_ps(lane, acc0);
        _mm256_storeu_ps(lane + 8, acc1);
        _mm256_storeu_ps(lane + 16, acc2);
        _mm256_storeu_ps(lane + 24, acc3);
        for (; i < n; i++) lane[i % DOT_LANES] = fmaf(load1_widened(kind, a, i), b[i], lane[i % DOT_LANES]);
        acc0 = _mm256_loadu_ps(lane);
        acc1 = _mm256_loadu_ps(lane + 8);
        acc2 = _mm256_loadu_ps(lane + 16);
        acc3 = _mm256_loadu_ps(lane + 24);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

#if MM_VNNI
/* The avx512 variant's dots of F32, F16 and BF16 rows are its 512-bit ones (avx512/convert.c, with dot_f32). */
static inline float float_row_dot(ggml_type type, const void *w, const float *xf, size_t n) {
    return avx512_dot_widened(type, w, xf, n);
}
#else
float VARIANT(dot_f32)(const float *a, const float *b, size_t n) { return dot_widened(WIDEN_F32, a, b, n); }

static inline float float_row_dot(ggml_type type, const void *w, const float *xf, size_t n) {
    return dot_widened(type == GGML_TYPE_F16 ? WIDEN_F16 : type == GGML_TYPE_BF16 ? WIDEN_BF16 : WIDEN_F32, w, xf, n);
}
#endif

float VARIANT(dot)(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    switch (type) {
    case GGML_TYPE_F32:
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16:
        return float_row_dot(type, w, xf, n);
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q6_K:
        return VARIANT(tile_dot)(type, w, xq, n);
    default: {
        float y;
        return VARIANT(dot_ext)(type, w, xq, n, &y) ? y : ref_dot(type, w, xf, xq, n); /* dot_ext.c */
    }
    }
}
