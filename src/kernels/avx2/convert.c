/* avx2/convert.c — the AVX2 variant's f32 → f16 row conversion (F16C, which the reference reproduces exactly),
 * activation quantization and K/V storage's Q8_0 blocks (the reference's operations, eight elements at a time). */
#include "avx2.h"

#include "simd.h"

void avx2_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = ord_f32_to_f16(src[i]);
}

/* A block's 32 values into v, and its amax: the largest |x| that is not NaN, whatever the order (vmaxps returns its
 * second operand, the running +0-based max, against a NaN). */
static inline float block_amax(const float *xb, __m256 v[4]) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(xb + 8 * k);
        m = _mm256_max_ps(_mm256_and_ps(v[k], abs_mask), m);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* Four registers of integers in [-127, 127] as the block's 32 bytes in element order (packs interleave 128-bit halves;
 * the permutation puts the four groups of 4 bytes back). */
static inline void store_quants(const __m256i q[4], int8_t *dst) {
    const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256((__m256i *)(void *)dst, _mm256_permutevar8x32_epi32(q8, unshuffle));
}

void avx2_row_q8(const float *x, block_q8_act *dst, size_t n) {
    const __m256 qmin = _mm256_set1_ps(-127.0f), qmax = _mm256_set1_ps(127.0f);
    for (size_t b = 0; b < n / QK; b++) {
        __m256 v[4];
        const float amax = block_amax(x + b * QK, v), d = amax / 127.0f;
        const __m256 vid = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        dst[b].d = ord_f16_to_f32(ord_f32_to_f16(d));
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(
                _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], vid), qmin), qmax),
                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        store_quants(q, dst[b].qs);
    }
}

/* K/V storage's Q8_0 blocks (ref_quantize_q8_0): d = amax / 127, id = 1 / d, q = roundf(x · id) — the truncation t,
 * one further from zero where the exact remainder x · id - t reaches ±0.5 — and a NaN product stores 0. */
void avx2_f32_to_q8_0_row(const float *x, void *dst, size_t n) {
    block_q8_0 *y = dst;
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), minus_half = _mm256_set1_ps(-0.5f);
    for (size_t b = 0; b < n / QK; b++) {
        __m256 v[4];
        const float d = block_amax(x + b * QK, v) / 127.0f;
        const __m256 vid = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        y[b].d = ord_f32_to_f16(d);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256 p = _mm256_mul_ps(v[k], vid);
            const __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), f = _mm256_sub_ps(p, t);
            __m256 r = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(f, half, _CMP_GE_OQ), one));
            r = _mm256_sub_ps(r, _mm256_and_ps(_mm256_cmp_ps(f, minus_half, _CMP_LE_OQ), one));
            q[k] = _mm256_cvtps_epi32(_mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q))); /* NaN: 0 */
        }
        store_quants(q, y[b].qs);
    }
}
