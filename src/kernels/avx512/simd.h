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

/* Elements i .. i+15 of a row of `elem`, widened to f32; lanes outside `live` are +0 and read nothing — but for the
 * quantized rows, whose 16 lanes (i a multiple of 16) lie in one block and are all read. */
static inline __attribute__((always_inline)) __m512 avx512_load16(widen_kind elem, const void *row, size_t i,
                                                                  __mmask16 live) {
    switch (elem) {
    case WIDEN_Q8_0: {
        const block_q8_0 *b = (const block_q8_0 *)row + i / QK;
        const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + i % QK)));
        return _mm512_maskz_mul_ps(live, _mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(b->d)));
    }
    case WIDEN_Q4_0: { /* lanes 0..15 of a block: the low nibbles of its 16 bytes; 16..31: the high ones */
        const block_q4_0 *b = (const block_q4_0 *)row + i / QK;
        __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
        if (i % QK) q = _mm512_srli_epi32(q, 4);
        q = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(15)), _mm512_set1_epi32(8));
        return _mm512_maskz_mul_ps(live, _mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(b->d)));
    }
    case WIDEN_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, (const uint16_t *)row + i));
    case WIDEN_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(live, (const uint16_t *)row + i)), 16));
    default:
        return _mm512_maskz_loadu_ps(live, (const float *)row + i);
    }
}

/* Elements i .. i+31 of a row of `elem`, widened to f32, in v[0] and v[1] (i a multiple of 32: in quantized rows, one
 * block, dequantized with its scale converted once). */
static inline __attribute__((always_inline)) void avx512_load32(widen_kind elem, const void *row, size_t i,
                                                                __m512 v[2]) {
    if (elem != WIDEN_Q8_0 && elem != WIDEN_Q4_0) {
        v[0] = avx512_load16(elem, row, i, 0xffff);
        v[1] = avx512_load16(elem, row, i + 16, 0xffff);
        return;
    }
    __m512i q0, q1;
    uint16_t d;
    if (elem == WIDEN_Q8_0) {
        const block_q8_0 *b = (const block_q8_0 *)row + i / QK;
        q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
        q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + 16)));
        d = b->d;
    } else {
        const block_q4_0 *b = (const block_q4_0 *)row + i / QK;
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs)), eight = _mm512_set1_epi32(8);
        q0 = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(15)), eight);
        q1 = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
        d = b->d;
    }
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(d));
    v[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(q0), scale);
    v[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(q1), scale);
}

/* The mask of the first k of 16 lanes (k <= 16). */
static inline __mmask16 avx512_first(size_t k) { return (__mmask16)((1u << k) - 1); }

#endif
