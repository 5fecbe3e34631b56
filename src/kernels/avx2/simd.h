/* simd.h — the AVX2 variant's register helpers: the combine tree of 8 lanes in registers, widening loads, the exact
 * integer sums of quantized blocks.
 *
 * Included by the avx2 files (and by the variants that build on their loop nests); every helper keeps the lane
 * layout of matmul.h, so a register's eight lanes are the reference's eight lanes.
 */
#ifndef FKV_KERNELS_AVX2_SIMD_H
#define FKV_KERNELS_AVX2_SIMD_H

#include <immintrin.h>

#include "order.h"

typedef enum { WIDEN_F32, WIDEN_F16, WIDEN_BF16 } widen_kind;

/* ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)), as combine8. */
static inline float hsum8(__m256 v) {
    __m128 w = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* v0+v4 .. v3+v7 */
    w = _mm_add_ps(w, _mm_movehl_ps(w, w));                                          /* (0+2), (1+3) */
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)));
}

/* out[k] = hsum8(acc[k]) for 8 vectors at once: every add is one of hsum8's tree, only 8 at a time. */
static inline __m256 combine8x8(const __m256 acc[8]) {
    __m256 m[4]; /* k | k+4: (l0+l4, l1+l5, l2+l6, l3+l7) */
    for (int k = 0; k < 4; k++)
        m[k] = _mm256_add_ps(_mm256_permute2f128_ps(acc[k], acc[k + 4], 0x20),
                             _mm256_permute2f128_ps(acc[k], acc[k + 4], 0x31));
    __m256 w[2]; /* 2h, 2h+1 | 2h+4, 2h+5: ((l0+l4)+(l2+l6), (l1+l5)+(l3+l7)) each */
    for (int h = 0; h < 2; h++)
        w[h] = _mm256_add_ps(_mm256_shuffle_ps(m[2 * h], m[2 * h + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(m[2 * h], m[2 * h + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* A register tile's outputs: y[r·ldy + c] = hsum8(acc[r·C + c]) for r < R, c < C; eight of them in rows of two or
 * four at once (combine8x8), the same bits. */
static inline __attribute__((always_inline)) void store_sums(const __m256 *acc, int R, int C, float *y, size_t ldy) {
    if (R * C == 8 && (C == 2 || C == 4)) {
        const __m256 v = combine8x8(acc);
        const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
        if (C == 4) {
            _mm_storeu_ps(y, lo);
            _mm_storeu_ps(y + ldy, hi);
        } else {
            _mm_storel_pi((__m64 *)(void *)y, lo);
            _mm_storeh_pi((__m64 *)(void *)(y + ldy), lo);
            _mm_storel_pi((__m64 *)(void *)(y + 2 * ldy), hi);
            _mm_storeh_pi((__m64 *)(void *)(y + 3 * ldy), hi);
        }
        return;
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[r * ldy + c] = hsum8(acc[r * C + c]);
}

static inline __m256 load8_widened(widen_kind kind, const void *a, size_t i) {
    switch (kind) {
    case WIDEN_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i)));
    case WIDEN_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i))), 16));
    default:
        return _mm256_loadu_ps((const float *)a + i);
    }
}

/* Element e of row j, for load8/load1_widened (and avx512_load16) at *at: rows of f16/f32 elements `stride` elements
 * apart. */
static inline const void *widened_elem_at(widen_kind kind, const void *rows, size_t j, size_t stride, size_t e,
                                          size_t *at) {
    *at = e;
    switch (kind) {
    case WIDEN_F16:
    case WIDEN_BF16: return (const uint16_t *)rows + j * stride;
    default: return (const float *)rows + j * stride;
    }
}

static inline float load1_widened(widen_kind kind, const void *a, size_t i) {
    switch (kind) {
    case WIDEN_F16:
        return _cvtsh_ss(((const uint16_t *)a)[i]);
    case WIDEN_BF16:
        return ord_bf16_to_f32(((const uint16_t *)a)[i]);
    default:
        return ((const float *)a)[i];
    }
}


/* acc + the exact sum of the four products u·s in each 32-bit element (u unsigned bytes, s signed). VNNI (the avx512
 * variant's flags): one vpdpbusd. AVX2: maddubs's 16-bit pair sums, widened by a madd with 1 — exact only while no
 * pair sum passes 32767, which every caller's operands guarantee (their comments say why). */
static inline __m256i sums_u8s8(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* Eight vectors of partial sums whose elements 0..3 and 4..7 cover the quants 0..15 and 16..31 of 8 blocks → lo and
 * hi, whose element k is block k's total over those quants. */
static inline void half_sums_epi32x8(const __m256i s[8], __m256i *lo, __m256i *hi) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    *lo = _mm256_permute2x128_si256(a, b, 0x20);
    *hi = _mm256_permute2x128_si256(a, b, 0x31);
}

/* Eight vectors of partial sums → one vector whose element k is the total of s[k]. */
static inline __m256i hsum8_epi32x8(const __m256i s[8]) {
    __m256i lo, hi;
    half_sums_epi32x8(s, &lo, &hi);
    return _mm256_add_epi32(lo, hi);
}

/* 8 bytes as the 8 elements of a vector of int32. */
static inline __m256i bytes_epi32(uint64_t v) { return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)v)); }

/* Scales of activation blocks 0..t-1, +0 for t..7. */
#define XSCALE(k) ((k) < t ? x[k].d : 0.0f)
static inline __m256 group_xscales(const block_q8_act *x, int t) {
    return _mm256_setr_ps(XSCALE(0), XSCALE(1), XSCALE(2), XSCALE(3), XSCALE(4), XSCALE(5), XSCALE(6), XSCALE(7));
}
#undef XSCALE

/* Keeps v in a register (with AVX-512, any of the 32): the compiler would otherwise fold its load into each of its
 * uses. */
#define PIN(v) __asm__("" : "+v"(v))

/* Prefetch the cache line at p + off into L2, not L1: the weights stream through once, and fetches that each held one
 * of L1's few miss buffers left fewer for the loads themselves (AMD Zen 4, decode 512 + 128 at 2 threads, interleaved:
 * 110M Q8_0 163-173 -> 185-193 tok/s, 8B Q4_K_M 5.7-5.9 -> 6.1-6.8, 110M Q4_K_M and prefill the same). The address may
 * lie past the matrix (the tile after the last): a prefetch never faults, and the sum is formed as an integer, so no
 * out-of-range pointer is ever made. */
static inline __attribute__((always_inline)) void prefetch_at(const void *p, size_t off) {
    _mm_prefetch((const char *)(uintptr_t)((uintptr_t)p + off), _MM_HINT_T2);
}

#endif
