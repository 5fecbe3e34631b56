/* avx2/dot_ext.c — the variants' block dots of ggml's later types Q5_K, Q4_1, Q5_0 and Q5_1 (quant.h's orders).
 *
 * One source, two variants, as matmul.c: compiled here with the AVX2 flags (avx2_dot_ext) and included by
 * avx512/dot_ext.c with the AVX-512 flags (avx512_dot_ext), where each block's integer sum is one VNNI vpdpbusd.
 *
 * Exactness: only the exact integer sums per 32-element block are vectorized (any order gives the same integer);
 * every float step after them is the reference's expression, lane for lane, on the same operands (ref/dot_ext.c),
 * so the bytes are the reference's by construction. The other later types (Q2_K, Q3_K, IQ4_NL, IQ4_XS) still take
 * the reference dot (VARIANT(dot)'s default).
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include <immintrin.h>

#include "order.h"

/* Σ q[i] · x[i] over 32 bytes, q unsigned (at most 31: a pair's sum stays within int16), x signed; exact. */
static inline int32_t ext_sum_qx(__m256i q, __m256i x) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, x);
#else
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1));
#endif
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtsi128_si32(h);
}

static inline __m256i ext_load_x(const block_q8_act *xb) { return _mm256_loadu_si256((const __m256i *)xb->qs); }

/* The 32 nibbles of a Q4_0-shaped block: element j the low nibble of qs[j], element j + 16 its high nibble. */
static inline __m256i ext_nibbles(const uint8_t qs[QK / 2]) {
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    const __m128i low = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), low), _mm_and_si128(b, low));
}

/* Bit e of the 32-bit word, for each element e, as 16 (bit 4): the fifth bits of a Q5_0 / Q5_1 block. */
static inline __m256i ext_fifth_bits(const uint8_t qh4[4]) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf); /* byte e holds qh byte e / 8 */
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(16));
}

/* Q4_1 and Q5_1 (fifth: the latter, whose fifth bits lie in qh): lane = fmaf(d_x, fmaf(d, (float)s, m · (float)t)). */
static inline __attribute__((always_inline)) float dot_min_blocks(bool fifth, const void *w, const block_q8_act *x,
                                                                   size_t nb) {
    float lane[BLOCK_LANES] = {0};
    const __m256i ones = _mm256_set1_epi8(1);
    for (size_t b = 0; b < nb; b++) {
        const __m256i xv = ext_load_x(&x[b]);
        const block_q4_1 *w4 = (const block_q4_1 *)w + b;
        const block_q5_1 *w5 = (const block_q5_1 *)w + b;
        const __m256i q = fifth ? _mm256_or_si256(ext_nibbles(w5->qs), ext_fifth_bits(w5->qh)) : ext_nibbles(w4->qs);
        const int32_t s = ext_sum_qx(q, xv), t = ext_sum_qx(ones, xv);
        const float d = ord_f16_to_f32(fifth ? w5->d : w4->d), m = ord_f16_to_f32(fifth ? w5->m : w4->m);
        lane[b % BLOCK_LANES] = fmaf(x[b].d, fmaf(d, (float)s, m * (float)t), lane[b % BLOCK_LANES]);
    }
    return ord_combine8(lane);
}

/* Q5_0: Σ (q - 16) · x = Σ q · x - 16 · Σ x, exact. */
static float dot_q5_0(const block_q5_0 *w, const block_q8_act *x, size_t nb) {
    float lane[BLOCK_LANES] = {0};
    const __m256i ones = _mm256_set1_epi8(1);
    for (size_t b = 0; b < nb; b++) {
        const __m256i xv = ext_load_x(&x[b]);
        const __m256i q = _mm256_or_si256(ext_nibbles(w[b].qs), ext_fifth_bits(w[b].qh));
        const int32_t s = ext_sum_qx(q, xv) - 16 * ext_sum_qx(ones, xv);
        lane[b % BLOCK_LANES] = fmaf(ord_f16_to_f32(w[b].d) * x[b].d, (float)s, lane[b % BLOCK_LANES]);
    }
    return ord_combine8(lane);
}

/* Q5_K: sub-block 2c holds the low nibbles of qs[32c..], 2c + 1 the high ones; bits 2c and 2c + 1 of qh[l] their
 * fifth bits. */
static float dot_q5_K(const block_q5_K *w, const block_q8_act *x, size_t nsb) {
    float lane[BLOCK_LANES] = {0};
    const __m256i ones = _mm256_set1_epi8(1), low = _mm256_set1_epi8(15), bit = _mm256_set1_epi8(1);
    for (size_t sb = 0; sb < nsb; sb++) {
        const float d = ord_f16_to_f32(w[sb].d), dmin = ord_f16_to_f32(w[sb].dmin);
        int32_t sc[8], m[8];
        ord_q4_K_scales(w[sb].scales, sc, m);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)w[sb].qh);
        for (int c = 0; c < 4; c++) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)(w[sb].qs + 32 * c));
            const __m256i q[2] = {
                _mm256_or_si256(_mm256_and_si256(qs, low),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), bit), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), low),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), bit), 4)),
            };
            for (int h = 0; h < 2; h++) {
                const int k = 2 * c + h;
                const block_q8_act *xb = &x[sb * BLOCK_LANES + k];
                const __m256i xv = ext_load_x(xb);
                const int32_t s = ext_sum_qx(q[h], xv), t = ext_sum_qx(ones, xv);
                const float dm = -dmin * (float)m[k];
                lane[k] = fmaf(xb->d, fmaf(d, (float)(sc[k] * s), dm * (float)t), lane[k]);
            }
        }
    }
    return ord_combine8(lane);
}

/* The dot of a weight row of a later type this file computes; false for the others (the caller takes ref_dot). */
bool VARIANT(dot_ext)(ggml_type type, const void *w, const block_q8_act *xq, size_t n, float *out) {
    switch (type) {
    case GGML_TYPE_Q4_1: *out = dot_min_blocks(false, w, xq, n / QK); return true;
    case GGML_TYPE_Q5_0: *out = dot_q5_0(w, xq, n / QK); return true;
    case GGML_TYPE_Q5_1: *out = dot_min_blocks(true, w, xq, n / QK); return true;
    case GGML_TYPE_Q5_K: *out = dot_q5_K(w, xq, n / QK_K); return true;
    default: return false;
    }
}
