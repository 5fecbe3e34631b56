/* avx2/dot.c — the AVX2 and AVX-512 variants' dot of one weight row with one activation row (the table's dot and
 * dot_f32): F32, F16 and BF16 rows in the f32 dot's 32 lanes; the types the tiles take by their one-row tile (tiles.c);
 * Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K and IQ4_XS, which no tile takes, by the block dots below
 * (matmul.h's orders); any other by the reference.
 *
 * Those block dots take 8 blocks at once: a super-block's 8 sub-blocks (Q2_K, Q3_K, Q5_K, IQ4_XS), or a group of 8
 * consecutive blocks (Q4_1, Q5_0, Q5_1; block b in lane b % 8, a row's last group partial). Block k's
 * exact integer sums land in element k of a vector (hsum8_epi32x8: any order gives the same integer), and the
 * reference's float steps (ref/dot.c) run on all 8 lanes at once, element k being lane k: the same operations on the
 * same operands in the same order, so the bytes are the reference's by construction. No horizontal sum per block, no
 * scalar float step.
 *
 * One source, two variants: compiled here with the AVX2 flags, and included by avx512/dot.c with the AVX-512 flags,
 * where each block's integer sum is one VNNI vpdpbusd and F32, F16 and BF16 rows take that variant's 512-bit dots.
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "layout.h"
#include "ref/ref.h"

/* ---- F32, F16 and BF16 rows ------------------------------------------------------------------------------ */

#if MM_VNNI
/* The avx512 variant's dots of F32, F16 and BF16 rows are its 512-bit ones (avx512/dot.c). */
static inline float float_row_dot(ggml_type type, const void *w, const float *xf, size_t n) {
    return avx512_dot_widened(type, w, xf, n);
}
#else
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

float VARIANT(dot_f32)(const float *a, const float *b, size_t n) { return dot_widened(WIDEN_F32, a, b, n); }

static inline float float_row_dot(ggml_type type, const void *w, const float *xf, size_t n) {
    return dot_widened(type == GGML_TYPE_F16 ? WIDEN_F16 : type == GGML_TYPE_BF16 ? WIDEN_BF16 : WIDEN_F32, w, xf, n);
}
#endif

/* ---- the types no tile takes ------------------------------------------------------------------------------ */

static inline __m256i load_x(const block_q8_act *xb) { return _mm256_loadu_si256((const __m256i *)xb->qs); }

/* Bit e of the 32-bit word, for each element e, as 16 (bit 4): the fifth bits of a Q5_0 / Q5_1 block. AVX-512: the
 * word is the mask of a masked move. */
static inline __m256i fifth_bits(const uint8_t qh4[4]) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(16));
#else
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf); /* byte e holds qh byte e / 8 */
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(16));
#endif
}

/* Bit `from` of every byte of v moved to bit `to`, the byte's other bits clear (16-bit shifts: the mask drops the
 * bits that cross a byte): Q5_K's fifth and Q3_K's third bits. */
static inline __m256i byte_bit(__m256i v, int from, int to) {
    const __m256i at = from >= to ? _mm256_srli_epi16(v, from - to) : _mm256_slli_epi16(v, to - from);
    return _mm256_and_si256(at, _mm256_set1_epi8((char)(1 << to)));
}

/* The two f16 at p + k · stride (a block's d, then its m for Q4_1 / Q5_1, its next two bytes otherwise) of blocks
 * k < t as f32 in element k of *first and *second; +0 for k >= t, and nothing past block t - 1 is read. One 32-bit
 * load a block, split by a shuffle: half the inserts of loading the f16 one by one. */
#define F16_PAIR(k) ((k) < t ? load32(p + (k) * stride) : 0)
static inline int32_t load32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline void f16_pairs(const uint8_t *p, size_t stride, int t, __m256 *first, __m256 *second) {
    const __m256i pairs = _mm256_setr_epi32(F16_PAIR(0), F16_PAIR(1), F16_PAIR(2), F16_PAIR(3), F16_PAIR(4),
                                            F16_PAIR(5), F16_PAIR(6), F16_PAIR(7));
    /* in each 128-bit half: the first f16 of its 4 pairs in 64 bits, the second ones above; then 64-bit pieces in
     * block order */
    const __m256i split = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(pairs, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5,
                                                    8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)),
        _MM_SHUFFLE(3, 1, 2, 0));
    *first = _mm256_cvtph_ps(_mm256_castsi256_si128(split));
    *second = _mm256_cvtph_ps(_mm256_extracti128_si256(split, 1));
}
#undef F16_PAIR

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

/* The weight-side-first step of the types with a min (Q4_1, Q5_1, Q5_K, Q2_K) on 8 lanes:
 * lane = fmaf(d_x, fmaf(d, (float)s, m · (float)t), lane), m being the min's factor as the reference forms it. */
static inline __m256 min_step(__m256 xd, __m256 d, __m256i s, __m256 m, __m256i t, __m256 acc) {
    const __m256 inner = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), _mm256_mul_ps(m, _mm256_cvtepi32_ps(t)));
    return _mm256_fmadd_ps(xd, inner, acc);
}

/* A block's s = Σ q · x and t = Σ x, packed as v = s + 2^18 · t (any partial sums of it added in any order), back
 * apart, exactly: with q <= 31 and |x| <= 127, |s| <= 32 · 31 · 127 = 125984 < 2^17, so s is v's low 18 bits read
 * as signed, and |v| <= 125984 + 2^18 · 32 · 127 < 2^31 never wraps. */
static inline void split_min_sums(__m256i *v, __m256i *t) {
    const __m256i s = _mm256_srai_epi32(_mm256_slli_epi32(*v, 14), 14);
    *t = _mm256_srai_epi32(_mm256_sub_epi32(*v, s), 18);
    *v = s;
}

static inline size_t untiled_block_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_1: return sizeof(block_q4_1);
    case GGML_TYPE_Q5_0: return sizeof(block_q5_0);
    case GGML_TYPE_Q5_1: return sizeof(block_q5_1);
    case GGML_TYPE_Q5_K: return sizeof(block_q5_K);
    default: return sizeof(block_iq4_xs);
    }
}

static inline bool is_super_block(ggml_type type) { return type == GGML_TYPE_Q5_K || type == GGML_TYPE_IQ4_XS; }

/* The quants of block k of a group (sub-block k of a super-block) in element order: unsigned for the types with a
 * min (Q4_1 0..15, Q5_1 and Q5_K 0..31), signed for the others (Q5_0's q - 16, IQ4_XS's values). Q5_K's
 * sub-block 2c holds the low nibbles of qs[32c..], 2c + 1 the high ones; bit k of qh[l] is element l's fifth bit. */
static inline __m256i group_quants(ggml_type type, const void *w, int k) {
    switch (type) {
    case GGML_TYPE_Q4_1: return nibbles32(((const block_q4_1 *)w)[k].qs);
    case GGML_TYPE_Q5_1: {
        const block_q5_1 *b = (const block_q5_1 *)w + k;
        return _mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh));
    }
    case GGML_TYPE_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)w + k;
        return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh)), _mm256_set1_epi8(16));
    }
    case GGML_TYPE_IQ4_XS: return table_values(ord_iq4_values, ((const block_iq4_xs *)w)->qs + QK / 2 * k);
    default: {
        const block_q5_K *b = w;
        const __m256i qs = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * (k / 2)));
        const __m256i nib = _mm256_and_si256(k % 2 ? _mm256_srli_epi16(qs, 4) : qs, _mm256_set1_epi8(15));
        return _mm256_or_si256(nib, byte_bit(_mm256_loadu_si256((const __m256i *)b->qh), k, 4));
    }
    }
}

/* One group of t <= 8 blocks (a super-block: t = 8, its sub-blocks) against activation blocks x[0..t): block k's
 * s_k (and t_k = Σ x for the types with a min) in element k, then the reference's step on the 8 lanes at once:
 * Q5_0:                lane = fmaf(d_w · d_x, (float)s, lane);
 * IQ4_XS:              lane = fmaf(d · d_x, (float)(ls_k · s), lane);
 * Q4_1, Q5_1, Q5_K:    min_step, Q5_K's s being sc_k · s and its m -dmin · (float)m_k.
 * Lanes t..7 get fmaf(+0, +0, lane) (their sums and scales are +0), which leaves a lane as it is (a lane is never -0:
 * tiles.c's tile_group). Unsigned quants are at most 31, signed at most 127 in size: maddubs's pair sums stay within
 * int16 (sums_signed). */
static inline __attribute__((always_inline)) __m256 group_step(ggml_type type, const void *w, const block_q8_act *x,
                                                               int t, __m256 acc) {
    const bool with_min = type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_1 || type == GGML_TYPE_Q5_K;
    const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi8(1);
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++) {
        if (k >= t) {
            s[k] = zero;
            continue;
        }
        const __m256i xv = load_x(&x[k]), q = group_quants(type, w, k);
        /* with a min: s + 2^18 · t in one int32, so one horizontal sum serves both (split_min_sums) */
        s[k] = with_min ? sums_u8s8(_mm256_slli_epi32(sums_u8s8(zero, ones, xv), 18), q, xv) : sums_signed(q, xv);
    }
    __m256i sum = hsum8_epi32x8(s), tx = zero;
    if (with_min) split_min_sums(&sum, &tx);
    const __m256 xd = group_xscales(x, t);
    if (type == GGML_TYPE_IQ4_XS) {
        const block_iq4_xs *sb = w;
        const __m256i si = _mm256_mullo_epi32(sum, iq4_xs_scales(sb));
        return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(sb->d)), xd), _mm256_cvtepi32_ps(si), acc);
    }
    if (type == GGML_TYPE_Q5_K) {
        const block_q5_K *sb = w;
        uint64_t sc, m;
        ord_q4_K_scale_words(sb->scales, &sc, &m);
        const __m256 dm = _mm256_mul_ps(_mm256_set1_ps(-_cvtsh_ss(sb->dmin)), _mm256_cvtepi32_ps(bytes_epi32(m)));
        return min_step(xd, _mm256_set1_ps(_cvtsh_ss(sb->d)), _mm256_mullo_epi32(sum, bytes_epi32(sc)), dm,
                            tx, acc);
    }
    __m256 d, second; /* Q4_1 / Q5_1: d and m; the others: d */
    f16_pairs(w, untiled_block_bytes(type), t, &d, &second);
    if (with_min) return min_step(xd, d, sum, second, tx, acc);
    return _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(sum), acc);
}

/* Q4_1, Q5_0, Q5_1 (nb blocks in groups of 8), Q5_K and IQ4_XS (nb / 8 super-blocks): a full group
 * takes a constant t, so no lane is masked; the lanes combine in matmul.h's tree (hsum8). */
static inline __attribute__((always_inline)) float dot_groups(ggml_type type, const void *w, const block_q8_act *x,
                                                              size_t nb) {
    const size_t bb = untiled_block_bytes(type), gb = is_super_block(type) ? bb : BLOCK_LANES * bb;
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b += BLOCK_LANES) {
        const void *wg = (const uint8_t *)w + b / BLOCK_LANES * gb;
        if (nb - b >= BLOCK_LANES) /* super-blocks always */
            acc = group_step(type, wg, x + b, BLOCK_LANES, acc);
        else
            acc = group_step(type, wg, x + b, (int)(nb - b), acc);
    }
    return hsum8(acc);
}

/* Bytes 2k and 2k + 1 of b (k < 8), sign-extended, as element k of even and odd: the scales (or mins) of the two
 * sub-blocks of 16 that activation block k meets. */
static inline void even_odd(__m128i b, __m256i *even, __m256i *odd) {
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
    const __m256i ones = _mm256_set1_epi8(1), three = _mm256_set1_epi8(3);
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
                if (q3) u = _mm256_or_si256(u, byte_bit(hm, k, 2)); /* bit k of hmask as bit 2 */
                const __m256i xv = load_x(&xg[k]);
                s[k] = sums_u8s8(_mm256_setzero_si256(), u, xv);
                t[k] = sums_u8s8(_mm256_setzero_si256(), ones, xv);
            }
        }
        __m256i s_lo, s_hi, t_lo, t_hi, sc_lo, sc_hi;
        half_sums_epi32x8(s, &s_lo, &s_hi);
        half_sums_epi32x8(t, &t_lo, &t_hi);
        const __m256 xd = group_xscales(xg, BLOCK_LANES);
        if (q3) {
            even_odd(q3_K_scales(w3->scales), &sc_lo, &sc_hi);
            s_lo = _mm256_sub_epi32(s_lo, _mm256_slli_epi32(t_lo, 2));
            s_hi = _mm256_sub_epi32(s_hi, _mm256_slli_epi32(t_hi, 2));
            const __m256i si = _mm256_add_epi32(_mm256_mullo_epi32(s_lo, sc_lo), _mm256_mullo_epi32(s_hi, sc_hi));
            acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(w3->d)), xd), _mm256_cvtepi32_ps(si), acc);
            continue;
        }
        const __m128i scales = _mm_loadu_si128((const __m128i *)w2->scales), low = _mm_set1_epi8(15);
        __m256i m_lo, m_hi;
        even_odd(_mm_and_si128(scales, low), &sc_lo, &sc_hi);
        even_odd(_mm_and_si128(_mm_srli_epi16(scales, 4), low), &m_lo, &m_hi);
        const __m256i si = _mm256_add_epi32(_mm256_mullo_epi32(s_lo, sc_lo), _mm256_mullo_epi32(s_hi, sc_hi));
        const __m256i ti = _mm256_add_epi32(_mm256_mullo_epi32(t_lo, m_lo), _mm256_mullo_epi32(t_hi, m_hi));
        acc = min_step(xd, _mm256_set1_ps(_cvtsh_ss(w2->d)), si, _mm256_set1_ps(-_cvtsh_ss(w2->dmin)), ti, acc);
    }
    return hsum8(acc);
}

/* The dot of a weight row of a type above; false for the others (the caller takes ref_dot). Out of line, as it was
 * when its own file's: a call of its own, returning with the upper state clean (below). */
static __attribute__((noinline)) bool dot_untiled(ggml_type type, const void *w, const block_q8_act *xq, size_t n,
                                                  float *out) {
    switch (type) {
    case GGML_TYPE_Q4_1: *out = dot_groups(GGML_TYPE_Q4_1, w, xq, n / QK); break;
    case GGML_TYPE_Q5_0: *out = dot_groups(GGML_TYPE_Q5_0, w, xq, n / QK); break;
    case GGML_TYPE_Q5_1: *out = dot_groups(GGML_TYPE_Q5_1, w, xq, n / QK); break;
    case GGML_TYPE_Q2_K: *out = dot_q23_K(false, w, xq, n / QK_K); break;
    case GGML_TYPE_Q3_K: *out = dot_q23_K(true, w, xq, n / QK_K); break;
    case GGML_TYPE_Q5_K: *out = dot_groups(GGML_TYPE_Q5_K, w, xq, n / QK); break;
    case GGML_TYPE_IQ4_XS: *out = dot_groups(GGML_TYPE_IQ4_XS, w, xq, n / QK); break;
    default: return false;
    }
    /* Clean upper state on return: GCC 12 put its own vzeroupper before the last read of an accumulator it kept in
     * ymm28 (vzeroupper leaves ymm16-31 alone; avx512's Q2_K dot), the call returned with the state dirty, and the
     * baseline SSE code after it ran several times slower (the reference dot: 7x, measured). */
    _mm256_zeroupper();
    return true;
}

float VARIANT(dot)(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    switch (type) {
    case GGML_TYPE_F32:
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16:
        return float_row_dot(type, w, xf, n);
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_MXFP4:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q6_K:
        return VARIANT(tile_dot)(type, w, xq, n);
    default: {
        float y;
        return dot_untiled(type, w, xq, n, &y) ? y : ref_dot(type, w, xf, xq, n);
    }
    }
}
