/* avx2/convert.c — the AVX2 variant's f32 → f16 row conversion (F16C, which the reference reproduces exactly) and
 * activation quantization (the reference's operations, eight elements at a time). */
#include "avx2.h"

#include "simd.h"

void avx2_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = ord_f32_to_f16(src[i]);
}

void avx2_row_q8(const float *x, block_q8_act *dst, size_t n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    /* packs interleave 128-bit halves; this puts the four groups of 4 bytes back in element order */
    const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 qmin = _mm256_set1_ps(-127.0f), qmax = _mm256_set1_ps(127.0f);
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            m = _mm256_max_ps(_mm256_and_ps(v[k], abs_mask), m);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        dst[b].d = ord_f16_to_f32(ord_f32_to_f16(d));
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(
                _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], vid), qmin), qmax),
                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)dst[b].qs, _mm256_permutevar8x32_epi32(q8, unshuffle));
    }

}
