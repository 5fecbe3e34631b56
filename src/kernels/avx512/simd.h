/* simd.h — the AVX-512 variant's register helpers: widening loads of 16 lanes, lane masks, the 8-lane combine.
 *
 * A zmm holds twice the lanes of the AVX2 variant's ymm, never a different order (quant.h).
 */
#ifndef FKV_KERNELS_AVX512_SIMD_H
#define FKV_KERNELS_AVX512_SIMD_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "order.h"

/* Keeps v in a register (any of the 32): GCC would otherwise fold its load or broadcast into each of its uses. */
#define PIN(v) __asm__("" : "+v"(v))

/* The element types a row of floats may be stored in; each widens to f32 exactly. */
typedef enum { AVX512_F32, AVX512_F16, AVX512_BF16 } avx512_elem;

/* Elements i .. i+15 of a row of `elem`, widened to f32; lanes outside `live` are +0 and read nothing. */
static inline __attribute__((always_inline)) __m512 avx512_load16(avx512_elem elem, const void *row, size_t i,
                                                                   __mmask16 live) {
    switch (elem) {
    case AVX512_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, (const uint16_t *)row + i));
    case AVX512_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, (const uint16_t *)row + i)), 16));
    default:
        return _mm512_maskz_loadu_ps(live, (const float *)row + i);
    }
}

/* The mask of the first k of 16 lanes (k <= 16). */
static inline __mmask16 avx512_first(size_t k) { return (__mmask16)((1u << k) - 1); }

/* quant.h's 8-lane combine: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)). */
static inline float avx512_sum8(__m256 l) {
    __m128 w = _mm_add_ps(_mm256_castps256_ps128(l), _mm256_extractf128_ps(l, 1)); /* l0+l4 .. l3+l7 */
    w = _mm_add_ps(w, _mm_movehl_ps(w, w));
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)));
}

#endif
