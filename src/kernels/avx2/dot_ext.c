/* avx2/dot_ext.c — the variants' block dots of ggml's later types Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K and
 * IQ4_XS (quant.h's orders).
 *
 * One source, two variants, as matmul.c: compiled here with the AVX2 flags (avx2_dot_ext) and included by
 * avx512/dot_ext.c with the AVX-512 flags (avx512_dot_ext), where each block's integer sum is one VNNI vpdpbusd.
 *
 * Exactness: only the exact integer sums per 32-element block are vectorized (any order gives the same integer);
 * every float step after them is the reference's expression, lane for lane, on the same operands (ref/dot_ext.c),
 * so the bytes are the reference's by construction. Q4_1, Q5_0, Q5_1 and Q5_K take one block at a time, its float
 * steps in scalars; IQ4_NL, Q2_K, Q3_K and IQ4_XS take 8 blocks at once (a super-block, or IQ4_NL's group of 8),
 * block k's sums in element k of a vector and the float steps on all 8 lanes at once, element k being lane k.
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include <immintrin.h>

#include "order.h"
#include "simd.h"

/* Σ q[i] · x[i] over 32 bytes, q unsigned (at most 31: a pair's sum stays within int16), x signed; exact. */
static inline int32_t ext_sum_qx(__m256i q, __m256i x) {
    const __m256i s = sums_u8s8(_mm256_setzero_si256(), q, x);
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

/* ---- 8 blocks at once: IQ4_NL, Q2_K, Q3_K, IQ4_XS ---- */

/* Σ w · x for signed w (|w| <= 127) as 8 partial sums: |w| against x carrying w's sign, so maddubs's pair sums stay
 * within 2 · 127 · 127 < 32767, and negating x (never -128: quant.h) cannot overflow. */
static inline __m256i ext_sums_signed(__m256i w, __m256i x) {
    return sums_u8s8(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}

/* The 32 non-linear values of one block of IQ4 nibbles (IQ4_NL's block, an IQ4_XS sub-block), in element order:
 * the nibbles index the 16-byte table. */
static inline __m256i ext_iq4_values(const uint8_t qs[QK / 2]) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ord_iq4_values));
    return _mm256_shuffle_epi8(table, ext_nibbles(qs));
}

/* The scales of IQ4_NL blocks 0..t-1 as f32, +0 for t..7 (nothing past the row is read). */
#define NL_SCALE(k) (short)((k) < t ? w[k].d : 0)
static inline __m256 iq4_nl_scales(const block_iq4_nl *w, int t) {
    return _mm256_cvtph_ps(_mm_setr_epi16(NL_SCALE(0), NL_SCALE(1), NL_SCALE(2), NL_SCALE(3), NL_SCALE(4), NL_SCALE(5),
                                          NL_SCALE(6), NL_SCALE(7)));
}
#undef NL_SCALE

/* IQ4_XS's 8 sub-block scales (ord_iq4_xs_scale), sub-block k's in element k: nibble k of the scales_l word, bits
 * 2k..2k+1 of scales_h above it, less 32. */
static inline __m256i iq4_xs_scales(const block_iq4_xs *w) {
    uint32_t l;
    memcpy(&l, w->scales_l, 4);
    const __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)l), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32(w->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    return _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(15)),
                                            _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4)),
                            _mm256_set1_epi32(32));
}

/* One group of t <= 8 blocks of IQ4_NL (xs false; block k of the group, lane k) or one IQ4_XS super-block (xs;
 * t = 8, sub-block k): s_k = Σ v · x (times ls_k for IQ4_XS), then lane k = fmaf(d_w · d_x, (float)s_k, lane) on the
 * 8 lanes at once. Lanes t..7 get fmaf(+0, +0, lane), which leaves a lane as it is (a lane is never -0: matmul.c's
 * tile_group). */
static inline __attribute__((always_inline)) __m256 iq4_group(bool xs, const void *w, const block_q8_act *x, int t,
                                                              __m256 acc) {
    const block_iq4_xs *sb = w;
    const block_iq4_nl *nl = w;
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++)
        s[k] = k < t ? ext_sums_signed(ext_iq4_values(xs ? sb->qs + QK / 2 * k : nl[k].qs), ext_load_x(&x[k]))
                     : _mm256_setzero_si256();
    __m256i sum = hsum8_epi32x8(s);
    __m256 dw;
    if (xs) {
        sum = _mm256_mullo_epi32(sum, iq4_xs_scales(sb));
        dw = _mm256_set1_ps(_cvtsh_ss(sb->d));
    } else {
        dw = iq4_nl_scales(nl, t);
    }
    return _mm256_fmadd_ps(_mm256_mul_ps(dw, group_xscales(x, t)), _mm256_cvtepi32_ps(sum), acc);
}

/* IQ4_NL (nb blocks) and IQ4_XS (nb / 8 super-blocks): a full group takes a constant t, so no lane is masked. */
static inline __attribute__((always_inline)) float dot_iq4(bool xs, const void *w, const block_q8_act *x, size_t nb) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b += BLOCK_LANES) {
        const void *wg = xs ? (const void *)((const block_iq4_xs *)w + b / BLOCK_LANES)
                            : (const void *)((const block_iq4_nl *)w + b);
        if (xs || nb - b >= BLOCK_LANES)
            acc = iq4_group(xs, wg, x + b, BLOCK_LANES, acc);
        else
            acc = iq4_group(xs, wg, x + b, (int)(nb - b), acc);
    }
    return hsum8(acc);
}

/* Bytes 2k and 2k + 1 of b (k < 8), sign-extended, as element k of even and odd: the scales (or mins) of the two
 * sub-blocks of 16 that activation block k meets. */
static inline void ext_even_odd(__m128i b, __m256i *even, __m256i *odd) {
    const __m128i split = _mm_shuffle_epi8(b, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    *even = _mm256_cvtepi8_epi32(split);
    *odd = _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(split, split));
}

/* Q3_K's 16 scales as signed bytes, scale j in byte j: ord_q3_K_scales on all 16 at once (the low nibbles of bytes
 * 0..7, then their high nibbles; bits 2i..2i+1 of bytes 8..11 above scales 4i..4i+3). Reads the 12 bytes only. */
static inline __m128i q3_K_scales(const uint8_t s[12]) {
    uint32_t hi_bits;
    memcpy(&hi_bits, s + 8, 4);
    const __m128i b = _mm_loadl_epi64((const __m128i *)s);
    const __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(b, _mm_srli_epi16(b, 4)), _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)hi_bits), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

/* Q2_K (q3 false) and Q3_K (q3), one super-block a step. Sub-block k = 4h + j holds bits 2j..2j+1 of qs[32h..] and,
 * for Q3_K, bit k of hmask as its third bit: unsigned u = Q2_K's q (0..3) or Q3_K's q + 4 (0..7), so maddubs's pair
 * sums stay within 2 · 7 · 127. Σ u · x and Σ x are exact per half (quants 0..15, 16..31: one scale each), and
 * Q3_K: s = sc_2k · (Σ_lo u · x - 4 Σ_lo x) + sc_2k+1 · (Σ_hi u · x - 4 Σ_hi x),
 * Q2_K: s = sc_2k · Σ_lo u · x + sc_2k+1 · Σ_hi u · x, t = m_2k · Σ_lo x + m_2k+1 · Σ_hi x,
 * the reference's integers; then its float steps on the 8 lanes at once. */
static inline __attribute__((always_inline)) float dot_q23_K(bool q3, const void *w, const block_q8_act *x,
                                                              size_t nsb) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi8(1), three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    for (size_t sb = 0; sb < nsb; sb++) {
        const block_q2_K *w2 = (const block_q2_K *)w + sb;
        const block_q3_K *w3 = (const block_q3_K *)w + sb;
        const block_q8_act *xg = x + sb * BLOCK_LANES;
        const __m256i hm = q3 ? _mm256_loadu_si256((const __m256i *)w3->hmask) : _mm256_setzero_si256();
        __m256i s[BLOCK_LANES], t[BLOCK_LANES];
        for (int h = 0; h < 2; h++) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)((q3 ? w3->qs : w2->qs) + 32 * h));
            for (int j = 0; j < 4; j++) { /* 16-bit shifts: the masks drop the bits that cross a byte */
                const int k = 4 * h + j;
                __m256i u = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), three);
                if (q3) { /* bit k of hmask to bit 2 */
                    const __m256i hb = k >= 2 ? _mm256_srli_epi16(hm, k - 2) : _mm256_slli_epi16(hm, 2 - k);
                    u = _mm256_or_si256(u, _mm256_and_si256(hb, four));
                }
                const __m256i xv = ext_load_x(&xg[k]);
                s[k] = sums_u8s8(_mm256_setzero_si256(), u, xv);
                t[k] = sums_u8s8(_mm256_setzero_si256(), ones, xv);
            }
        }
        __m256i s_lo, s_hi, t_lo, t_hi, sc_lo, sc_hi;
        half_sums_epi32x8(s, &s_lo, &s_hi);
        half_sums_epi32x8(t, &t_lo, &t_hi);
        const __m256 xd = group_xscales(xg, BLOCK_LANES);
        if (q3) {
            ext_even_odd(q3_K_scales(w3->scales), &sc_lo, &sc_hi);
            s_lo = _mm256_sub_epi32(s_lo, _mm256_slli_epi32(t_lo, 2));
            s_hi = _mm256_sub_epi32(s_hi, _mm256_slli_epi32(t_hi, 2));
            const __m256i si = _mm256_add_epi32(_mm256_mullo_epi32(s_lo, sc_lo), _mm256_mullo_epi32(s_hi, sc_hi));
            acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(w3->d)), xd), _mm256_cvtepi32_ps(si), acc);
            continue;
        }
        const __m128i scales = _mm_loadu_si128((const __m128i *)w2->scales), low = _mm_set1_epi8(15);
        __m256i m_lo, m_hi;
        ext_even_odd(_mm_and_si128(scales, low), &sc_lo, &sc_hi);
        ext_even_odd(_mm_and_si128(_mm_srli_epi16(scales, 4), low), &m_lo, &m_hi);
        const __m256i si = _mm256_add_epi32(_mm256_mullo_epi32(s_lo, sc_lo), _mm256_mullo_epi32(s_hi, sc_hi));
        const __m256i ti = _mm256_add_epi32(_mm256_mullo_epi32(t_lo, m_lo), _mm256_mullo_epi32(t_hi, m_hi));
        const float d = _cvtsh_ss(w2->d), dmin = _cvtsh_ss(w2->dmin);
        const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(si),
                                             _mm256_mul_ps(_mm256_set1_ps(-dmin), _mm256_cvtepi32_ps(ti)));
        acc = _mm256_fmadd_ps(xd, inner, acc);
    }
    return hsum8(acc);
}

/* The dot of a weight row of a later type this file computes; false for the others (the caller takes ref_dot). */
bool VARIANT(dot_ext)(ggml_type type, const void *w, const block_q8_act *xq, size_t n, float *out) {
    switch (type) {
    case GGML_TYPE_Q4_1: *out = dot_min_blocks(false, w, xq, n / QK); break;
    case GGML_TYPE_Q5_0: *out = dot_q5_0(w, xq, n / QK); break;
    case GGML_TYPE_Q5_1: *out = dot_min_blocks(true, w, xq, n / QK); break;
    case GGML_TYPE_IQ4_NL: *out = dot_iq4(false, w, xq, n / QK); break;
    case GGML_TYPE_Q2_K: *out = dot_q23_K(false, w, xq, n / QK_K); break;
    case GGML_TYPE_Q3_K: *out = dot_q23_K(true, w, xq, n / QK_K); break;
    case GGML_TYPE_Q5_K: *out = dot_q5_K(w, xq, n / QK_K); break;
    case GGML_TYPE_IQ4_XS: *out = dot_iq4(true, w, xq, n / QK); break;
    default: return false;
    }
    /* Clean upper state on return: GCC 12 put its own vzeroupper before the last read of an accumulator it kept in
     * ymm28 (vzeroupper leaves ymm16-31 alone; avx512's Q2_K dot), the call returned with the state dirty, and the
     * baseline SSE code after it ran several times slower (the reference dot: 7x, measured). */
    _mm256_zeroupper();
    return true;
}
