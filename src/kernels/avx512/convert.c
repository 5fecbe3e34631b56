/* avx512/convert.c — row conversions and activation quantization on AVX-512.
 *
 * WHY: the conversion is one exact instruction (vcvtps2ph: the F16C operation, NaNs included, that the reference's
 * conversion reproduces: order.h), 16 lanes a register, a row's tail in masked lanes.
 *
 * INVARIANT: each function returns the bytes of its reference (ref/): the same IEEE operations on the same
 * operands in the same order.
 */
#include "avx512.h"

#include "simd.h"

/* Elements 0..15 of a row, those outside `live` neither read nor written (the tail of a row; whole registers
 * pass the full mask, which the compiler drops). */
static inline __attribute__((always_inline)) void f32_to_f16_16(const float *src, uint16_t *dst, __mmask16 live) {
    const __m512 v = _mm512_maskz_loadu_ps(live, src);
    _mm256_mask_storeu_epi16(dst, live, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

void avx512_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) f32_to_f16_16(src + i, dst + i, 0xffff);
    if (i < n) f32_to_f16_16(src + i, dst + i, avx512_first(n - i));
}

/* A block's amax is the largest |x| that is not NaN, whatever the order it is taken in (vmaxps returns its second
 * operand, the running +0-based max, against a NaN, as the reference's compares do). */
static inline float block_amax(__m512 v0, __m512 v1) {
    return _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps())));
}

/* q = nearbyint(clamp(x·id)), with vmaxps again taking -127 over a NaN product. */
void avx512_row_q8(const float *x, block_q8_act *dst, size_t n) {
    const __m512 qmin = _mm512_set1_ps(-127.0f), qmax = _mm512_set1_ps(127.0f);
    for (size_t b = 0; b < n / QK; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + b * QK), v1 = _mm512_loadu_ps(x + b * QK + 16);
        const float amax = block_amax(v0, v1), d = amax / 127.0f;
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        dst[b].d = ord_f16_to_f32(ord_f32_to_f16(d));
        for (int h = 0; h < 2; h++) {
            const __m512 clamped = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(h ? v1 : v0, id), qmin), qmax);
            const __m512i q = _mm512_cvt_roundps_epi32(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128((__m128i *)(void *)(dst[b].qs + 16 * h), _mm512_cvtepi32_epi8(q));
        }
    }
}

/* roundf(q), half away from zero: the truncation t, one further from zero where the exact remainder q - t reaches
 * ±0.5 (|q| < 2^23, so q - t is exact). A NaN stays NaN. */
static inline __m512 round_half_away(__m512 q) {
    const __m512 t = _mm512_roundscale_ps(q, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), f = _mm512_sub_ps(q, t);
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 up = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, one);
    return _mm512_mask_sub_ps(up, _mm512_cmp_ps_mask(f, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), up, one);
}

/* K/V storage's Q8_0 blocks (ref_quantize_q8_0): d = amax / 127, id = 1 / d, q = roundf(x · id); a NaN product stores
 * 0 (vpmovdb keeps the low byte of the integer indefinite, 0x80000000). */
void avx512_f32_to_q8_0_row(const float *x, void *dst, size_t n) {
    block_q8_0 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + b * QK), v1 = _mm512_loadu_ps(x + b * QK + 16);
        const float d = block_amax(v0, v1) / 127.0f;
        const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        y[b].d = ord_f32_to_f16(d);
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(h ? v1 : v0, id)));
            _mm_storeu_si128((__m128i *)(void *)(y[b].qs + 16 * h), _mm512_cvtepi32_epi8(q));
        }
    }
}
