/* simd.h — the AVX-512 variant's register helpers: widening loads of 16 lanes, lane masks, the 8-lane combine.
 *
 * A zmm holds twice the lanes of the AVX2 variant's ymm, never a different order (matmul.h); the 8-lane helpers are
 * the AVX2 variant's (avx2/simd.h).
 */
#ifndef FKV_KERNELS_AVX512_SIMD_H
#define FKV_KERNELS_AVX512_SIMD_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "avx2/simd.h" /* the element types (widen_kind) and where a row's elements lie (widened_elem_at), the 8-lane
                        * combine (hsum8) and PIN, which these files share with the AVX2 variant */

/* Elements i .. i+15 of a row of `elem`, widened to f32; lanes outside `live` are +0 and read nothing. */
static inline __attribute__((always_inline)) __m512 avx512_load16(widen_kind elem, const void *row, size_t i,
                                                                  __mmask16 live) {
    switch (elem) {
    case WIDEN_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, (const uint16_t *)row + i));
    case WIDEN_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, (const uint16_t *)row + i)), 16));
    default:
        return _mm512_maskz_loadu_ps(live, (const float *)row + i);
    }
}

/* The mask of the first k of 16 lanes (k <= 16). */
static inline __mmask16 avx512_first(size_t k) { return (__mmask16)((1u << k) - 1); }

#endif
