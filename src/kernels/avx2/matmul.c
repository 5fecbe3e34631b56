/* avx2/matmul.c — the AVX2 and AVX-512 variants' dot products and matrix products: direct register tiles for few
 * rows (decode), panels rearranged into a register layout for many rows (prefill), Q8_0, Q4_0 and K-quant weights
 * packed at load.
 *
 * Every output keeps the reference's lanes (quant.h, ref/matmul.c): block b of a row goes to lane b % 8 through
 * the same multiply and fused multiply-add, integer block sums are exact in any order, so no tile shape, row count
 * or packing changes a bit. Compiled with -ffp-contract=off.
 *
 * One source, two variants: compiled here with the AVX2 flags (functions avx2_*), and included by avx512/matmul.c,
 * which compiles it with the AVX-512 flags and names its functions avx512_* (VARIANT). There the integer dot
 * products are VNNI's vpdpbusd (u8 x s8, four products summed into each int32 lane, no saturation) instead of
 * maddubs/madd/add sequences, Q8_0 and Q4_0 quants are stored 128 above their values in the panel layout, and Q8_0's
 * in the packed one (the variant's own bytes: table.h), and the panel tiles take two weight rows per 512-bit register. The
 * loop nests and every output's float steps are the same; where the code differs it says so (MM_VNNI).
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "dispatch.h"
#include "ref/ref.h"
#include "simd.h"
#include "traits.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define MM_VNNI 1
#else
#define MM_VNNI 0
#endif

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

/* Exact Σ w·x of one Q8_0 block as 8 partial int32 sums. maddubs takes |w| (0..128, unsigned) against
 * x carrying w's sign; x is in [-127, 127] (quant.h), so each 16-bit pair sum is at most 2·128·127 and
 * never saturates, and negating x never overflows. */
static inline __m256i block_sums_q8_0(__m256i wq, __m256i xq) {
    return sums_u8s8(_mm256_setzero_si256(), _mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
}

/* The 32 quants of one Q4_0 block as unsigned bytes 0..15 in element order: bytes 0..15 the low
 * nibbles (elements 0..15), bytes 16..31 the high nibbles (elements 16..31). */
static inline __m256i block_nibbles_q4_0(const block_q4_0 *w) {
    __m128i packed = _mm_loadu_si128((const __m128i *)w->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(15));
}

/* Σ nibble·x of one Q4_0 block as 8 partial int32 sums (nibbles 0..15 unsigned, so maddubs cannot
 * saturate: |15·x + 15·x'| <= 3840). The -8 offset is applied per group, from Σx. */
static inline __m256i block_nibble_sums_q4_0(__m256i nib, __m256i xq) {
    return sums_u8s8(_mm256_setzero_si256(), nib, xq);
}

static inline __m256i block_xsums(__m256i xq) { return sums_u8s8(_mm256_setzero_si256(), _mm256_set1_epi8(1), xq); }

/* r[j] element k ← r[k] element j (32-bit elements): an involution. On the 32 quants of 8 blocks it
 * turns "register k = block k" into "register j = quants 4j..4j+3 of every block, block k in element k",
 * the layout in which a vertical integer sum of 8 registers is 8 block sums, no horizontal step. */
static inline void transpose8_epi32(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

/* The half layout of a row's last group when it holds at most 4 blocks: from r[k] = block k (k < 4) in natural
 * order, register j (j < 4) gets quants 4j..4j+3 of blocks 0..3 in its low 128 bits and quants 16+4j..16+4j+3 in
 * its high 128 bits (a 4 × 4 transpose of 32-bit elements within each 128-bit lane), so 4 registers hold the
 * group and an integer sum leaves block k's two halves in elements k and k+4 (half_fold joins them). */
static inline void transpose4_epi32_lanes(__m256i r[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    r[0] = _mm256_unpacklo_epi64(t0, t2);
    r[1] = _mm256_unpackhi_epi64(t0, t2);
    r[2] = _mm256_unpacklo_epi64(t1, t3);
    r[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* Elements k < 4: s[k] + s[k+4]; elements 4..7: 0. */
static inline __m256i half_fold(__m256i s) {
    return _mm256_add_epi32(_mm256_permute2x128_si256(s, s, 0x80), _mm256_permute2x128_si256(s, s, 0x81));
}


/* Element k: the exact integer sum of weight block k against activation block x[k], k < t <= 8 (for Q4_0
 * before the offset correction); 0 for k >= t (a row's last, partial group: nothing past its end is read). */
static inline __m256i group_sums(ggml_type type, const uint8_t *w, const block_q8_act *x, int t) {
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++) {
        if (k >= t) {
            s[k] = _mm256_setzero_si256();
            continue;
        }
        const __m256i xk = _mm256_loadu_si256((const __m256i *)x[k].qs);
        s[k] = type == GGML_TYPE_Q4_0
                   ? block_nibble_sums_q4_0(block_nibbles_q4_0((const block_q4_0 *)w + k), xk)
                   : block_sums_q8_0(_mm256_loadu_si256((const __m256i *)((const block_q8_0 *)w + k)->qs), xk);
    }
    return hsum8_epi32x8(s);
}

/* Element k: 8·Σx over block k — the Q4_0 offset correction, shared by every weight row. Blocks as in
 * group_sums. Out of line: the direct tiles take it precomputed, and inlined into them it crowds their loop. */
static __attribute__((noinline)) __m256i group_xsum8(const block_q8_act *x, int t) {
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++)
        s[k] = k >= t ? _mm256_setzero_si256() : block_xsums(_mm256_loadu_si256((const __m256i *)x[k].qs));
    return _mm256_slli_epi32(hsum8_epi32x8(s), 3);
}

static inline size_t block_bytes(ggml_type type) {
    return type == GGML_TYPE_Q4_0 ? sizeof(block_q4_0) : sizeof(block_q8_0);
}

static inline uint16_t block_scale(ggml_type type, const uint8_t *w, size_t b) {
    return type == GGML_TYPE_Q4_0 ? ((const block_q4_0 *)w)[b].d : ((const block_q8_0 *)w)[b].d;
}

/* Scales of weight blocks 0..t-1 as f32, +0 for t..7, built in registers (a store then a wide load would
 * stall on forwarding). Lanes t..7 read block t-1's scale, which is inside the row, and are then cleared: with
 * a conditional per lane instead, GCC spilled the 16-bit scales and reloaded them 32 bits wide — a failed
 * store forward that stalled the pack of every partial group (3% of 0.5B prefill). */
#define WSCALE(k) (short)block_scale(type, w, (k) < t ? (k) : t - 1)
static inline __m256 group_wscales(ggml_type type, const uint8_t *w, int t) {
    __m128i s = _mm_setr_epi16(WSCALE(0), WSCALE(1), WSCALE(2), WSCALE(3), WSCALE(4), WSCALE(5), WSCALE(6), WSCALE(7));
    if (t < BLOCK_LANES) s = _mm_and_si128(s, _mm_cmpgt_epi16(_mm_set1_epi16((short)t), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7)));
    return _mm256_cvtph_ps(s);
}
#undef WSCALE

/* Direct tiles, for few rows (decode): 2 × 4 measured best of 1..4 × 1..4 on the 110M shapes. */
#define TILE_ROWS 2 /* activation rows of a register tile */
#define TILE_COLS 4 /* weight rows of a register tile */

/* One group of blocks of a register tile: acc[r][c] gets, in lane k < t, the fused step of block k of weight
 * row c (rows w_row_bytes apart) against block k of activation row r (rows x_stride blocks apart). Q4_0's
 * corrections come from xsum8 (row r's at xsum8[r * xsum8_stride]) when given. Lanes k >= t (a row's last, partial group) get fmaf(+0, +0, lane),
 * which leaves a lane as it is: a lane is never -0 (it starts at +0, and a rounded sum is -0 only when both
 * terms are). */
static inline __attribute__((always_inline)) void tile_group(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                              const block_q8_act *x, size_t x_stride, int t,
                                                              const __m256i *xsum8, size_t xsum8_stride, int R, int C,
                                                              __m256 acc[TILE_ROWS][TILE_COLS]) {
    __m256 dx[TILE_ROWS];
    __m256i corr[TILE_ROWS];
    for (int r = 0; r < R; r++) {
        dx[r] = group_xscales(x + r * x_stride, t);
        if (type == GGML_TYPE_Q4_0) corr[r] = xsum8 ? xsum8[r * xsum8_stride] : group_xsum8(x + r * x_stride, t);
    }
    for (int c = 0; c < C; c++) {
        const __m256 dw = group_wscales(type, w + c * w_row_bytes, t);
        for (int r = 0; r < R; r++) {
            __m256i s = group_sums(type, w + c * w_row_bytes, x + r * x_stride, t);
            if (type == GGML_TYPE_Q4_0) s = _mm256_sub_epi32(s, corr[r]);
            acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[r]), _mm256_cvtepi32_ps(s), acc[r][c]);
        }
    }
}

/* A register tile: y[r*ldy + c] = dot(weight row c, activation row r) for r < R, c < C, each with its
 * own 8-lane accumulator holding exactly the lanes of quant.h's block order — block b of every output
 * goes to lane b % 8, through the same multiply and fused multiply-add as the reference — so the tile
 * shape changes which loads are shared, never an output's bits. x rows are nb blocks apart; xsum8 as in
 * tile_group, a row's groups consecutive. */
static inline __attribute__((always_inline)) void tile_blocks(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                               const block_q8_act *x, size_t nb, const __m256i *xsum8,
                                                               int R, int C, float *y, size_t ldy) {
    const size_t ng = groups_of(nb);
    const size_t bb = block_bytes(type);
    __m256 acc[TILE_ROWS][TILE_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b += BLOCK_LANES) {
        const int t = nb - b < BLOCK_LANES ? (int)(nb - b) : BLOCK_LANES;
        /* the same blocks of the next tile's rows (C rows on): their fetch from memory overlaps this work */
        for (int c = 0; c < C; c++)
            for (size_t off = 0; off < (size_t)t * bb; off += 64)
                prefetch_at(w, (size_t)(C + c) * w_row_bytes + b * bb + off);
        const __m256i *xs = xsum8 ? xsum8 + b / BLOCK_LANES : NULL;
        if (t == BLOCK_LANES) /* a constant t: full groups take no masks */
            tile_group(type, w + b * bb, w_row_bytes, x + b, nb, BLOCK_LANES, xs, ng, R, C, acc);
        else if (t == BLOCK_LANES / 2) /* the half group of rows of 128k + 4 blocks (dim 896): no blocks past 4 */
            tile_group(type, w + b * bb, w_row_bytes, x + b, nb, BLOCK_LANES / 2, xs, ng, R, C, acc);
        else
            tile_group(type, w + b * bb, w_row_bytes, x + b, nb, t, xs, ng, R, C, acc);
    }
    __m256 sums[TILE_ROWS * TILE_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) sums[r * C + c] = acc[r][c];
    store_sums(sums, R, C, y, ldy);
}

static inline float dot_blocks(ggml_type type, const void *w, const block_q8_act *x, size_t nb) {
    float y;
    tile_blocks(type, w, 0, x, nb, NULL, 1, 1, &y, 1);
    return y;
}

#define TILE_CASE(T, R, C)                                                                                     \
    case (R) * 8 + (C):                                                                                        \
        tile_blocks(T, w, w_row_bytes, x, nb, xsum8, R, C, y, ldy);                                           \
        return;
#define TILE_CASES_C(T, C) TILE_CASE(T, 1, C) TILE_CASE(T, 2, C)
#define TILE_CASES(T) TILE_CASES_C(T, 1) TILE_CASES_C(T, 2) TILE_CASES_C(T, 3) TILE_CASES_C(T, 4)

/* One tile with R <= TILE_ROWS, C <= TILE_COLS known at compile time, so acc stays in registers. */
static void tile_dispatch(ggml_type type, const uint8_t *w, size_t w_row_bytes, const block_q8_act *x, size_t nb,
                          const __m256i *xsum8, int R, int C, float *y, size_t ldy) {
    if (type == GGML_TYPE_Q4_0) {
        switch (R * 8 + C) {
            TILE_CASES(GGML_TYPE_Q4_0)
        default:
            return;
        }
    }
    switch (R * 8 + C) {
        TILE_CASES(GGML_TYPE_Q8_0)
    default:
        return;
    }
}

/* K-quants: a super-block is one group of 8 activation blocks, sub-block k in lane k; no tail. */

/* The quants of a K-quant super-block as unsigned bytes, sub-block k (elements 32k..32k+31) in register
 * k in element order: Q4_K 0..15, Q6_K 0..63 (the offset 32 still in). */
static inline void kquant_regs(ggml_type type, const uint8_t *w, __m256i q[BLOCK_LANES]) {
    const __m256i low4 = _mm256_set1_epi8(15);
    if (type == GGML_TYPE_Q4_K) {
        const block_q4_K *b = (const block_q4_K *)w;
        for (int c = 0; c < 4; c++) {
            const __m256i packed = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
            q[2 * c] = _mm256_and_si256(packed, low4);
            q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
        }
        return;
    }
    const block_q6_K *b = (const block_q6_K *)w;
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) { /* 16-bit shifts: the masks drop the bits that cross a byte */
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
        q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
        q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
        q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                       _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
    }
}

/* The activation side of a super-block, the same for every weight row: its 8 blocks' scales; for Q4_K their Σx as f32
 * (exact: at most 32 · 127); for Q6_K 32 · Σx over each block's quants 0..15 and 16..31, what the offset 32 that its
 * quants keep (kquant_regs) adds to their sums. */
typedef struct {
    __m256 d, sum;
    __m256i lo32, hi32;
} kxside;

static inline kxside kquant_xside(ggml_type type, const block_q8_act *xg) {
    kxside xs = {group_xscales(xg, BLOCK_LANES), _mm256_setzero_ps(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i t[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++) t[k] = block_xsums(_mm256_loadu_si256((const __m256i *)xg[k].qs));
    if (type == GGML_TYPE_Q4_K) {
        xs.sum = _mm256_cvtepi32_ps(hsum8_epi32x8(t));
        return xs;
    }
    half_sums_epi32x8(t, &xs.lo32, &xs.hi32);
    xs.lo32 = _mm256_slli_epi32(xs.lo32, 5);
    xs.hi32 = _mm256_slli_epi32(xs.hi32, 5);
    return xs;
}

/* Super-block of Q4_K against activation blocks xr[0..8) (natural order) with their side xs: quant.h's steps on all
 * 8 lanes at once. */
static inline __m256 superblock_q4_K(const block_q4_K *w, const __m256i xr[8], kxside xs, __m256 acc) {
    __m256i q[BLOCK_LANES], s[BLOCK_LANES];
    kquant_regs(GGML_TYPE_Q4_K, (const uint8_t *)w, q);
    for (int k = 0; k < BLOCK_LANES; k++) /* nibbles 0..15: pair sums at most 2 · 15 · 127, no saturation */
        s[k] = sums_u8s8(_mm256_setzero_si256(), q[k], xr[k]);
    uint64_t sc, m;
    ord_q4_K_scale_words(w->scales, &sc, &m);
    const __m256i si = _mm256_mullo_epi32(hsum8_epi32x8(s), bytes_epi32(sc));
    const float d = _cvtsh_ss(w->d), dmin = _cvtsh_ss(w->dmin);
    const __m256 dm = _mm256_mul_ps(_mm256_set1_ps(-dmin), _mm256_cvtepi32_ps(bytes_epi32(m)));
    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(si), _mm256_mul_ps(dm, xs.sum));
    return _mm256_fmadd_ps(xs.d, inner, acc);
}

/* Super-block of Q6_K, as superblock_q4_K. A sub-block's sums of q · x (q in 0..63 unsigned: pair sums at most
 * 2 · 63 · 127, no saturation) lie in the lower 128 bits for its quants 0..15 and the upper for 16..31: summed within
 * each half, less the offset's 32 · Σx (xs), then weighted by the two halves' scales in f32 — each product and their
 * sum an integer below 2^24 (quant.h), so exact and equal to s_b. */
static inline __m256 superblock_q6_K(const block_q6_K *w, const __m256i xr[8], kxside xs, __m256 acc) {
    __m256i q[BLOCK_LANES], s[BLOCK_LANES];
    kquant_regs(GGML_TYPE_Q6_K, (const uint8_t *)w, q);
    for (int k = 0; k < BLOCK_LANES; k++) s[k] = sums_u8s8(_mm256_setzero_si256(), q[k], xr[k]);
    __m256i lo, hi; /* element k: sub-block k's sum over quants 0..15 / 16..31 */
    half_sums_epi32x8(s, &lo, &hi);
    lo = _mm256_sub_epi32(lo, xs.lo32);
    hi = _mm256_sub_epi32(hi, xs.hi32);
    /* scales[2k] and scales[2k + 1] as element k of two vectors */
    const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)w->scales),
                                        _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    const __m256 sc_lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)),
                 sc_hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc)));
    const __m256 sb = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lo), sc_lo), _mm256_mul_ps(_mm256_cvtepi32_ps(hi), sc_hi));
    const float d = _cvtsh_ss(w->d);
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), xs.d), sb, acc);
}

/* One K-quant weight row · one activation row of nsb super-blocks; xs: the row's kquant_xside per super-block, made
 * once for every weight row, or NULL (made here). */
static float dot_kquant(ggml_type type, const void *w, const block_q8_act *x, const kxside *xs, size_t nsb) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t sb = 0; sb < nsb; sb++) {
        const block_q8_act *xg = x + sb * BLOCK_LANES;
        __m256i xr[BLOCK_LANES];
        for (int k = 0; k < BLOCK_LANES; k++) xr[k] = _mm256_loadu_si256((const __m256i *)xg[k].qs);
        const kxside x1 = xs ? xs[sb] : kquant_xside(type, xg);
        acc = type == GGML_TYPE_Q4_K ? superblock_q4_K((const block_q4_K *)w + sb, xr, x1, acc)
                                     : superblock_q6_K((const block_q6_K *)w + sb, xr, x1, acc);
    }
    return hsum8(acc);
}


static inline bool is_kquant(ggml_type type) { return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K; }

/* Bytes of weights per group of 8 activation blocks. */
static inline size_t group_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_K:
        return sizeof(block_q4_K);
    case GGML_TYPE_Q6_K:
        return sizeof(block_q6_K);
    default:
        return BLOCK_LANES * block_bytes(type);
    }
}

/* Panels, for many rows (prefill). The C weight rows of a panel are rearranged once into the interleaved
 * layout of transpose8_epi32 — register j holds quants 4j..4j+3 of 8 blocks, Q4_0 nibbles and K-quant quants
 * as unsigned bytes, scales as f32 — and then serve every activation row; the activation side is rearranged
 * the same way once per call, with its scales and the block sums Σx that offset corrections need. A group of 8 blocks then
 * costs, per (activation row, weight row), one multiply per register and vertical adds, no horizontal
 * reduction, and unsigned quants sum in 16 bits before widening. Integer block sums are exact and each
 * lane gets the reference's float operations, so no tile shape changes a bit. A row whose block count
 * is not a multiple of 8 ends in a group padded on both sides with zero blocks of scale 0:
 * fmaf(+0, +0, lane) leaves a lane as it is, since a lane is never -0 (it starts at +0, and a rounded
 * sum is -0 only when both terms are). When that group holds at most 4 blocks (dim 896: 3 groups and 4
 * blocks) it takes the half layout (transpose4_epi32_lanes): 4 registers instead of 8. */
#define PANEL_ROWS 4 /* activation rows of a register tile, at most */
#define PANEL_COLS 2 /* weight rows of a panel (and of a register tile, but VNNI's: PANEL_PAIRS panels), at most */
#define PANEL_PAIRS 2 /* VNNI: panels of a register tile, at most (panel_tile) */
#define PF_DIST 2        /* panels ahead that packed rows read in place are fetched (fetch_ahead) */
#define PANEL_MIN_ROWS 4    /* below, packing costs more than it saves: direct tiles */
/* Rows packed at load take direct tiles below this: their panels rearrange the weights at every call, which few rows do
 * not repay with VNNI's two-row tiles (1024-wide rows, 2048 outputs from DRAM, 2 threads, 8 rows: Q4_0 134 -> 101 us,
 * Q4_K 159 -> 125, Q6_K 195 -> 158; at 16 the two are even; Zen 5, 768-wide, 32000 outputs, 12 rows still even). Q8_0's
 * panels read the packed rows in place, two weight rows at a time: from how many rows that wins depends on the CPU
 * (dispatch.h's kern_tuning). AVX2's one-row tiles lose from 4 to 6 rows on (forced: Q6_K 4 rows 183 against 227 us). */
#define REARRANGED_PANEL_MIN_ROWS 16 /* VNNI, packed rows of the types whose panels are rearranged per call */
static uint32_t packed_panel_min_rows(ggml_type type) {
#if MM_VNNI
    return type == GGML_TYPE_Q8_0 ? kern_tuning_active()->q8_panel_min_rows : REARRANGED_PANEL_MIN_ROWS;
#else
    (void)type;
    return PANEL_MIN_ROWS;
#endif
}
#define XSUM_MAX_GROUPS 32  /* direct tiles precompute Q4_0's corrections for rows up to 256 blocks */
/* Activation side prepared at a time, on the stack, when the caller has not prepared it (quant_panel_rows): 64
 * rows up to dim 5120 at once. A row prepared in several parts makes every panel of weights be packed again per
 * part; with 96 KB, the 0.5B shape's ffn_down (4864) took 6 parts per 64 rows and ran 20% slower. */
#define PANEL_X_BYTES (448 * 1024)

typedef struct {
    __m256i q[BLOCK_LANES]; /* register j: quants 4j..4j+3 of blocks 0..7 */
    __m256 d;               /* Q8_0, Q4_0: block scales; Q4_K, Q6_K: the super-block's d in every lane */
    __m256 m;               /* Q4_K: -dmin · m per sub-block (rounded once) */
#if MM_VNNI
    /* The scales that weight the 32-bit sums, element k as f32: Q4_K: [0] sub-block k's; Q6_K: [0] and [1] those of
     * quants 0..15 and 16..31 of block k. */
    __m256 sc[2];
#else
    /* The widening madd's multipliers, in both 16-bit halves of element k: Q4_K: [0] sub-block k's scale; Q6_K: [0]
     * and [1] the scales of quants 0..15 and 16..31 of block k. */
    __m256i sc16[2];
    __m256i corr16; /* Q6_K: 32 · those two scales, the halves of element k: the offset's weights */
#endif
} wgroup;

#if MM_VNNI
/* A panel's two weight rows as the VNNI tiles take them, group by group: each of wgroup's registers as [row 0 | row 1],
 * one 512-bit load (a panel of one row: that row in both halves). Pairing them in the tiles took an insert per register
 * and per factor vector, for every tile of activation rows. */
typedef struct {
    __m512i q[BLOCK_LANES];
    __m512 d, m, sc[2];
} wpair;
_Static_assert(2 * sizeof(wgroup) == sizeof(wpair), "wpair: wgroup's registers, two rows side by side");
typedef wpair wpanel_group; /* pk[g]: group g of a panel */
#define PANEL_GROUP_ROWS PANEL_COLS
#else
typedef wgroup wpanel_group; /* pk[g * C + c]: group g of the panel's row c */
#define PANEL_GROUP_ROWS 1
#endif

/* The activation side of a group: what the tiles start their sums from, made once per row (with VNNI, every start the
 * tiles take, in 416 bytes: a larger group made the 4096-wide products of 8B Q4_K_M prefill slower, the rows' side
 * streaming from L2 for every pair of weight rows). */
typedef struct {
    __m256i q[BLOCK_LANES]; /* register j: quants 4j..4j+3 of blocks 0..7, aligned (no split loads) */
    __m256 d;               /* activation scales of blocks 0..7 */
#if MM_VNNI
    __m256i base; /* -128 · Σx per block: where sums of weights stored 128 above their values start (group_regs) */
    /* -32 · Σx over quants 0..15 and 16..31 of each block: where Q6_K's sums of its quants 0..63 start, so they end as
     * Σ (q - 32) · x */
    __m256i q6_lo, q6_hi;
    __m256 t; /* Σx per block as f32: Q4_K's t_b */
#else
    __m256i sum_lo; /* Σx over registers 0..3: quants 0..15 of each block (the half layout: both halves of blocks 0..3) */
    __m256i sum_hi; /* Σx over registers 4..7: quants 16..31 of each block (the half layout: 0) */
    __m256i nib_base; /* -8 · (sum_lo + sum_hi): where sums of packed Q4_0's unsigned nibbles start */
#endif
} xgroup;

/* The starts the packed direct tiles of both variants take: read (VNNI) or made from the block sums (AVX2). */
#if MM_VNNI
static inline __m256i x_nib_base(const xgroup *x) { return _mm256_srai_epi32(x->base, 4); } /* -8 · Σx, exact */
static inline __m256i x_q6_lo(const xgroup *x) { return x->q6_lo; }
static inline __m256i x_q6_hi(const xgroup *x) { return x->q6_hi; }
static inline __m256 x_t(const xgroup *x) { return x->t; }
#else
static inline __m256i x_nib_base(const xgroup *x) { return x->nib_base; }
static inline __m256i x_q6_lo(const xgroup *x) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(x->sum_lo, 5));
}
static inline __m256i x_q6_hi(const xgroup *x) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(x->sum_hi, 5));
}
static inline __m256 x_t(const xgroup *x) { return _mm256_cvtepi32_ps(_mm256_add_epi32(x->sum_lo, x->sum_hi)); }
#endif

/* The quants of a Q8_0 / Q4_0 group of t blocks (t <= 8) in the register layout: transpose8_epi32's, or the half
 * layout when t <= 4; blocks past t are zero. With VNNI both are stored as their values + 128 (Q8_0: w ^ 0x80,
 * 0..255; Q4_0: nibble + 120, 120..135), unsigned, so a block sum is one vpdpbusd against the signed x, started at
 * -128 · Σx (xgroup.base; exact: at most 32 · 255 · 127) — Q8_0's abs/sign pair took two instructions more per
 * register, and Q4_0's own offset a correction per block. Past t they are 128 or 120, against zero blocks of x. */
static inline void group_regs(ggml_type type, const uint8_t *wg, int t, __m256i q[BLOCK_LANES]) {
    for (int k = 0; k < BLOCK_LANES; k++)
        q[k] = k >= t                      ? _mm256_setzero_si256()
               : type == GGML_TYPE_Q4_0 ? block_nibbles_q4_0((const block_q4_0 *)wg + k)
                                        : _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)wg + k)->qs);
    if (t <= BLOCK_LANES / 2)
        transpose4_epi32_lanes(q);
    else
        transpose8_epi32(q);
    for (int j = 0; MM_VNNI && j < BLOCK_LANES; j++)
        q[j] = _mm256_add_epi8(q[j], _mm256_set1_epi8(type == GGML_TYPE_Q4_0 ? 120 : -128));
}

/* Packed rows (quant_pack_rows): group g's quants at g · packed_group_bytes, then every group's side data (the row
 * padded to 32 bytes):
 * - Q8_0: the group's 8 registers of group_regs (a last group of at most 4 blocks: the 4 of the half layout); side:
 *   its 8 scales as f16 (+0 past the row's end).
 * - Q4_0: 4 registers, dword k of register j being dword j of block k's quant bytes (+0 past the row's end), so its
 *   low nibbles are register j of the panel layout and its high nibbles register j + 4 (a last group of at most 4
 *   blocks: 4 × 16 bytes, blocks 0..3's dword j, whose nibbles make register j of the half layout); side as Q8_0's.
 *   The same 18 bytes per block as the natural rows.
 * - Q4_K (a group is a super-block): its panel registers (kquant_regs, transposed) as nibbles, register j in the low
 *   and j + 4 in the high nibbles of 4 registers; side: d and dmin (f16), then the 8 sub-blocks' scales and mins
 *   decoded to bytes (ord_q4_K_scales): 148 bytes per super-block instead of 144, and no 6-bit unpacking per step.
 * - Q6_K (a super-block per group): its panel registers (kquant_regs, transposed; quants 0..63), their low 4 bits as
 *   Q4_K's nibbles, then 2 registers of their high 2 bits, register j's at bits 2 · (j / 2) of register j % 2; side:
 *   d (f16) and the 16 scales as they lie. 210 bytes, as the natural block.
 * Either way a decode step's block sums are vertical, with no horizontal sum per block. */
static inline size_t packed_group_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q8_0:
        return BLOCK_LANES * sizeof(__m256i);
    case GGML_TYPE_Q6_K:
        return (BLOCK_LANES / 2 + 2) * sizeof(__m256i);
    default:
        return BLOCK_LANES / 2 * sizeof(__m256i);
    }
}

static inline size_t packed_side_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_K:
        return 2 * sizeof(uint16_t) + 2 * BLOCK_LANES;
    case GGML_TYPE_Q6_K:
        return sizeof(uint16_t) + 2 * BLOCK_LANES;
    default:
        return BLOCK_LANES * sizeof(uint16_t);
    }
}

static inline size_t packed_scales_at(ggml_type type, size_t nb) {
    const size_t gb = packed_group_bytes(type);
    const size_t last = nb % BLOCK_LANES == 0 ? 0 : half_last_group(nb) ? gb / 2 : gb;
    return nb / BLOCK_LANES * gb + last;
}

static inline size_t packed_row_bytes(ggml_type type, size_t nb) {
    const size_t bytes = packed_scales_at(type, nb) + groups_of(nb) * packed_side_bytes(type);
    return (bytes + sizeof(__m256i) - 1) / sizeof(__m256i) * sizeof(__m256i);
}

/* Group g's side data in a packed row. */
static inline const uint8_t *packed_side(const uint8_t *row, ggml_type type, size_t nb, size_t g) {
    return row + packed_scales_at(type, nb) + g * packed_side_bytes(type);
}

/* Group g's 8 scales of a packed row (quant_pack_rows) as f32. */
static inline __m256 packed_scales(const uint8_t *row, size_t scales_at, size_t g) {
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(row + scales_at + g * BLOCK_LANES * sizeof(uint16_t))));
}

/* The panel registers of a packed Q4_0 or Q4_K group wg as unsigned nibbles 0..15 (the half layout's 4 and 4 zeros
 * when half). */
static inline void packed_nibble_regs(const uint8_t *wg, bool half, __m256i q[BLOCK_LANES]) {
    const __m256i low4 = _mm256_set1_epi8(15);
    for (int j = 0; j < BLOCK_LANES / 2; j++) {
        if (half) {
            const __m128i h = _mm_load_si128((const __m128i *)wg + j);
            q[j] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(h, 4), h), low4);
            q[j + BLOCK_LANES / 2] = _mm256_setzero_si256();
        } else {
            const __m256i p = _mm256_load_si256((const __m256i *)wg + j);
            q[j] = _mm256_and_si256(p, low4);
            q[j + BLOCK_LANES / 2] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
        }
    }
}

/* The panel registers of a packed Q6_K group wg: quants 0..63, the offset 32 still in (kquant_regs). */
static inline void packed_q6_K_regs(const uint8_t *wg, __m256i q[BLOCK_LANES]) {
    packed_nibble_regs(wg, false, q);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    const __m256i h0 = _mm256_load_si256((const __m256i *)wg + BLOCK_LANES / 2);
    const __m256i h1 = _mm256_load_si256((const __m256i *)wg + BLOCK_LANES / 2 + 1);
    for (int j = 0; j < BLOCK_LANES; j++) { /* bits 2 · (j / 2) of h(j % 2) up to bits 4..5 */
        const __m256i h = j % 2 ? h1 : h0;
        const int at = 2 * (j / 2);
        const __m256i hb = at < 4 ? _mm256_slli_epi16(h, 4 - at) : at > 4 ? _mm256_srli_epi16(h, at - 4) : h;
        q[j] = _mm256_or_si256(q[j], _mm256_and_si256(hb, bits45));
    }
}

#if MM_VNNI
/* The AMX variant's tiles read these rows too (avx512.h). */
avx512_packed_layout VARIANT(packed_layout_of)(ggml_type type, size_t n) {
    return (avx512_packed_layout){packed_group_bytes(type), packed_scales_at(type, n / QK), packed_side_bytes(type)};
}
#endif

/* A Q4_K super-block's factors in a panel group: d, dmin, and its sub-blocks' scales and mins as int32 elements. */
static inline void q4_K_factors(wgroup *p, float d, float dmin, __m256i sc, __m256i m) {
    p->d = _mm256_set1_ps(d);
#if MM_VNNI
    p->sc[0] = _mm256_cvtepi32_ps(sc);
#else
    p->sc16[0] = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
#endif
    p->m = _mm256_mul_ps(_mm256_set1_ps(-dmin), _mm256_cvtepi32_ps(m));
}

/* A Q6_K super-block's factors in a panel group: d (f16) and its 16 scales as they lie in the block. */
static inline void q6_K_factors(wgroup *p, uint16_t d, const int8_t scales[16]) {
    p->d = _mm256_set1_ps(_cvtsh_ss(d));
    /* scales[2k], scales[2k+1] (int8) as the 16-bit halves of element k: sign-extended pairs */
    const __m256i pairs = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)scales));
    const __m256i lo = _mm256_srai_epi32(_mm256_slli_epi32(pairs, 16), 16), hi = _mm256_srai_epi32(pairs, 16);
#if MM_VNNI
    p->sc[0] = _mm256_cvtepi32_ps(lo);
    p->sc[1] = _mm256_cvtepi32_ps(hi);
#else
    p->sc16[0] = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(lo, 16));
    p->sc16[1] = _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(hi, 16));
    p->corr16 = _mm256_slli_epi16(pairs, 5);
#endif
}

/* A packed Q4_K super-block's side (packed_side): d, dmin, and its scales and mins as int32 elements. */
static inline void packed_q4_K_side(const uint8_t *side, float *d, float *dmin, __m256i *sc, __m256i *m) {
    uint16_t h[2];
    memcpy(h, side, sizeof h);
    *d = _cvtsh_ss(h[0]);
    *dmin = _cvtsh_ss(h[1]);
    *sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(side + sizeof h)));
    *m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(side + sizeof h + BLOCK_LANES)));
}

/* Group g of weight row c of a panel of C rows into p; packed: the rows are packed Q4_0, Q4_K or Q6_K rows
 * (quant_pack_rows). */
static inline void pack_group(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, int C, size_t nb,
                              size_t ng, size_t g, int c, wgroup *p) {
    const size_t gb = packed ? packed_group_bytes(type) : group_bytes(type);
    const uint8_t *wg = w + c * w_row_bytes + g * gb;
    for (size_t off = 0; off < gb; off += 64) /* the next panel's group: its fetch overlaps this work */
        prefetch_at(wg, (size_t)C * w_row_bytes + off);
    if (packed) { /* the nibbles in the panel layout already (Q4_0's 120 up with VNNI, as group_regs leaves
                   * them); the side as it lies */
        const uint8_t *side = packed_side(w + c * w_row_bytes, type, nb, g);
        if (type == GGML_TYPE_Q6_K) {
            uint16_t d;
            memcpy(&d, side, sizeof d);
            packed_q6_K_regs(wg, p->q);
            q6_K_factors(p, d, (const int8_t *)side + sizeof d);
            return;
        }
        packed_nibble_regs(wg, g + 1 == ng && half_last_group(nb), p->q);
        if (type == GGML_TYPE_Q4_K) {
            float d, dmin;
            __m256i sc, m;
            packed_q4_K_side(side, &d, &dmin, &sc, &m);
            q4_K_factors(p, d, dmin, sc, m);
            return;
        }
        for (int j = 0; MM_VNNI && j < BLOCK_LANES; j++) p->q[j] = _mm256_add_epi8(p->q[j], _mm256_set1_epi8(120));
        p->d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)side));
        return;
    }
    if (type == GGML_TYPE_Q4_K) {
        const block_q4_K *b = (const block_q4_K *)wg;
        int32_t sc[8], m[8];
        ord_q4_K_scales(b->scales, sc, m);
        kquant_regs(type, wg, p->q);
        q4_K_factors(p, _cvtsh_ss(b->d), _cvtsh_ss(b->dmin), _mm256_loadu_si256((const __m256i *)sc),
                     _mm256_loadu_si256((const __m256i *)m));
    } else if (type == GGML_TYPE_Q6_K) {
        const block_q6_K *b = (const block_q6_K *)wg;
        kquant_regs(type, wg, p->q);
        q6_K_factors(p, b->d, b->scales);
    } else {
        const int t = blocks_in_group(nb, g);
        group_regs(type, wg, t, p->q);
        p->d = group_wscales(type, wg, t);
        return;
    }
    transpose8_epi32(p->q);
}

#if MM_VNNI
/* Row c's group into half c of its pair: wgroup's k-th register into the k-th pair's half. */
static inline void pair_store(wpair *dst, const wgroup *src, int c) {
    const __m256i *from = (const __m256i *)src;
    __m256i *to = (__m256i *)dst;
    for (size_t k = 0; k < sizeof(wgroup) / sizeof(__m256i); k++) _mm256_store_si256(to + 2 * k + c, from[k]);
}
#endif

/* The groups of a panel of C weight rows (wpanel_group's layout). */
static void pack_panel(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, int C, size_t nb, size_t ng,
                       wpanel_group *pk) {
    for (size_t g = 0; g < ng; g++)
        for (int c = 0; c < C; c++) {
#if MM_VNNI
            wgroup one = {0}; /* the factors a type does not use: copied, never read */
            pack_group(type, packed, w, w_row_bytes, C, nb, ng, g, c, &one);
            pair_store(&pk[g], &one, c);
            if (C == 1) pair_store(&pk[g], &one, 1);
#else
            pack_group(type, packed, w, w_row_bytes, C, nb, ng, g, c, &pk[g * C + c]);
#endif
        }
}

/* The activation side of rows [0, n_rows) of xq: xp[r * ng + g], a partial last group padded. The same for every
 * weight type, so one preparation serves every product of the rows. */
static void prep_panel_rows(const block_q8_act *xq, size_t nb, size_t ng, uint32_t n_rows, xgroup *xp) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (uint32_t r = 0; r < n_rows; r++)
        for (size_t g = 0; g < ng; g++) {
            const block_q8_act *xg = xq + r * nb + g * BLOCK_LANES;
            const int t = blocks_in_group(nb, g);
            xgroup *p = &xp[r * ng + g];
            __m256i x[BLOCK_LANES];
            p->d = group_xscales(xg, t);
            for (int k = 0; k < BLOCK_LANES; k++)
                x[k] = k < t ? _mm256_loadu_si256((const __m256i *)xg[k].qs) : _mm256_setzero_si256();
            if (t <= BLOCK_LANES / 2)
                transpose4_epi32_lanes(x);
            else
                transpose8_epi32(x);
            for (int j = 0; j < BLOCK_LANES; j++) p->q[j] = x[j];
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256(); /* 16 bits: at most 4 · 2 · 127 */
            for (int j = 0; j < BLOCK_LANES / 2; j++) {
                lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(ones8, x[j]));
                hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(ones8, x[j + BLOCK_LANES / 2]));
            }
            const __m256i sum_lo = _mm256_madd_epi16(lo, ones16), sum_hi = _mm256_madd_epi16(hi, ones16);
            const __m256i sum = _mm256_add_epi32(sum_lo, sum_hi), minus = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
#if MM_VNNI
            p->base = _mm256_slli_epi32(minus, 7);
            p->q6_lo = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum_lo, 5));
            p->q6_hi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum_hi, 5));
            p->t = _mm256_cvtepi32_ps(sum);
#else
            p->sum_lo = sum_lo;
            p->sum_hi = sum_hi;
            p->nib_base = _mm256_slli_epi32(minus, 3);
#endif
        }
}


/* The weight side of a panel of C rows: rearranged per call (pk, wpanel_group's layout) or read where it lies (rows:
 * Q8_0 rows as quant_pack_rows leaves them, row c at rows + c * row_bytes, scales at scales_at). */
typedef struct {
    const wpanel_group *pk;
    const uint8_t *rows;
    size_t row_bytes, scales_at;
} wpanel;

/* Packed Q8_0 rows read in place: row c's registers and scales of group g. */
static inline const __m256i *inplace_regs(const wpanel *wp, size_t g, int c) {
    return (const __m256i *)(wp->rows + c * wp->row_bytes + g * packed_group_bytes(GGML_TYPE_Q8_0));
}

static inline __m256 inplace_scales(const wpanel *wp, size_t g, int c) {
    return packed_scales(wp->rows + c * wp->row_bytes, wp->scales_at, g);
}

#if !MM_VNNI
static inline const __m256i *panel_regs(const wpanel *wp, bool packed, int C, size_t g, int c) {
    return packed ? inplace_regs(wp, g, c) : wp->pk[g * C + c].q;
}

static inline __m256 panel_scales(const wpanel *wp, bool packed, int C, size_t g, int c) {
    return packed ? inplace_scales(wp, g, c) : wp->pk[g * C + c].d;
}
#endif

/* Packed rows read in place (a panel of C rows, then the next, as the rows lie): group g of the panel PF_DIST panels
 * on is fetched while this one's first register tile runs, so a product of few rows streams its weights instead of
 * waiting on every line (110M Q8_0, 9 rows, one thread, 768 x 2048 from DRAM: 275 -> 150 us, about a 1-row step). */
static inline __attribute__((always_inline)) void fetch_ahead(const wpanel *wp, int C, size_t g) {
    const size_t gb = packed_group_bytes(GGML_TYPE_Q8_0);
    for (int c = 0; c < C; c++) {
        const size_t row = (size_t)(PF_DIST * C + c) * wp->row_bytes;
        for (size_t off = 0; off < gb; off += 64) prefetch_at(wp->rows, row + g * gb + off);
        if (g == 0) prefetch_at(wp->rows, row + wp->scales_at);
    }
}

#if MM_VNNI
/* With VNNI, a register tile works two weight rows at a time in zmm registers: register j of rows 0 and 1 side by
 * side, against register j of an activation row in both halves, so one vpdpbusd makes 8 block sums of each row, and
 * an activation row's accumulator holds [row 0 | row 1] from its sums through its lanes' float steps. Each half is
 * the AVX2 tile's vector for that weight row, lane for lane, through the same operations; only the width differs.
 * The float steps and corrections around the sums cost as much as the sums (zmm over registers j and j+1 instead,
 * joined per output: 310 of 504 us for 768x768 Q8_0 at 128 rows), and with 512-bit instructions in flight port 1
 * leaves the vector units, so they too go 16 lanes at a time: 449 us (256-bit VNNI steps: 521; AVX2: 1100). */

/* [a | b] */
static inline __m512i pair_epi32(__m256i a, __m256i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}
static inline __m512 pair_ps(__m256 a, __m256 b) { return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1); }

/* Per half, elements k < 4: s[k] + s[k+4]; elements 4..7: 0 (half_fold on both halves). */
static inline __m512i half_fold2(__m512i s) {
    return _mm512_maskz_add_epi32(0x0f0f, s, _mm512_shuffle_i64x2(s, s, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* The sums of one group for a register tile's rows: s[p][r] = [row 0 | row 1] of pair p, Σ over registers
 * j0 <= j < j0 + n of vpdpbusd(pair p's weight register j, activation row r's register j), in 32 bits, from start[r]
 * (both halves; NULL: 0). Every type's quants are unsigned bytes in the panel layout (Q8_0's and Q4_0's 128 above
 * their values: group_regs; Q6_K's 0..63, their offset 32 still in) against the signed x, so one instruction serves
 * them all, and at most 32 · 255 · 127 per block never overflows. wq[p]: pair p's registers (packed: rows w0 and w1,
 * paired here; one pair).
 * With one pair, even and odd registers go to separate accumulators: one chain of 8 would wait on vpdpbusd's
 * latency. A chain of 4 (Q6_K's halves, each its own chain; the half layout) does not: one accumulator, no add (Q6_K
 * 768 x 2048, 128 rows, one thread: 1755 -> 1705 us); nor do two pairs, whose chains are twice as many. */
static inline __attribute__((always_inline)) void tile_sums(bool packed, int P, const __m512i *const wq[PANEL_PAIRS],
                                                             const __m256i *w0, const __m256i *w1,
                                                             const __m256i *const xr[PANEL_ROWS],
                                                             const __m256i *const start[PANEL_ROWS], int j0, int n,
                                                             __m512i s[PANEL_PAIRS][PANEL_ROWS]) {
    const bool split = P == 1 && n > BLOCK_LANES / 2;
    __m512i odd[PANEL_ROWS];
    for (int r = 0; r < PANEL_ROWS; r++) {
        for (int p = 0; p < P; p++)
            s[p][r] = start ? _mm512_broadcast_i64x4(_mm256_load_si256(start[r])) : _mm512_setzero_si512();
        odd[r] = _mm512_setzero_si512();
    }
    for (int j = j0; j < j0 + n; j++) {
        __m512i w[PANEL_PAIRS];
        for (int p = 0; p < P; p++)
            w[p] = packed ? pair_epi32(_mm256_load_si256(w0 + j), _mm256_load_si256(w1 + j))
                          : _mm512_load_si512(wq[p] + j);
        for (int r = 0; r < PANEL_ROWS; r++) {
            const __m512i x = _mm512_broadcast_i64x4(_mm256_load_si256(xr[r] + j));
            for (int p = 0; p < P; p++) {
                if (split && (j - j0) % 2)
                    odd[r] = _mm512_dpbusd_epi32(odd[r], w[p], x);
                else
                    s[p][r] = _mm512_dpbusd_epi32(s[p][r], w[p], x);
            }
        }
    }
    for (int r = 0; split && r < PANEL_ROWS; r++) s[0][r] = _mm512_add_epi32(s[0][r], odd[r]);
}

/* One register tile: y[r*ldy + c] for r < R, c < C over all ng groups (packed, R and C known at compile time, so
 * the accumulators stay in registers). xp: activation row r's groups at xp + r * ng. C <= 2 * PANEL_COLS: the weight
 * rows of P = ceil(C / 2) consecutive panels (pair p's groups at wp->pk + p * ng; packed: one), each activation
 * register loaded once for all of them — wide rows, whose activation side streams from L2 for every panel, read it
 * half as often. A smaller tile repeats its last row and column (sums it then drops). */
static inline __attribute__((always_inline)) void panel_tile(ggml_type type, bool packed, const wpanel *wp, size_t ng,
                                                              bool half_last, const xgroup *xp, int R, int C, float *y,
                                                              size_t ldy, bool fetch) {
    const int P = (C + PANEL_COLS - 1) / PANEL_COLS;
    __m512 acc[PANEL_PAIRS][PANEL_ROWS];
    for (int p = 0; p < P; p++)
        for (int r = 0; r < R; r++) acc[p][r] = _mm512_setzero_ps();
    for (size_t g = 0; g < ng; g++) {
        /* the weight registers: packed Q8_0's rows paired here, a rearranged panel's as they lie (wpair) */
        const wpair *pp[PANEL_PAIRS];
        const __m512i *wq[PANEL_PAIRS];
        for (int p = 0; p < P; p++) {
            pp[p] = packed ? NULL : &wp->pk[(size_t)p * ng + g];
            wq[p] = packed ? NULL : pp[p]->q;
        }
        const __m256i *w0 = packed ? inplace_regs(wp, g, 0) : NULL, *w1 = packed ? inplace_regs(wp, g, C - 1) : NULL;
        if (packed && fetch) fetch_ahead(wp, C, g);
        __m512 dw[PANEL_PAIRS];
        for (int p = 0; p < P; p++)
            dw[p] = packed ? pair_ps(inplace_scales(wp, g, 0), inplace_scales(wp, g, C - 1)) : pp[p]->d;
        const xgroup *px[PANEL_ROWS];
        const __m256i *xrow[PANEL_ROWS], *base[PANEL_ROWS], *q6_lo[PANEL_ROWS], *q6_hi[PANEL_ROWS];
        for (int r = 0; r < PANEL_ROWS; r++) {
            px[r] = &xp[(r < R ? r : R - 1) * ng + g];
            xrow[r] = px[r]->q;
            base[r] = &px[r]->base;
            q6_lo[r] = &px[r]->q6_lo;
            q6_hi[r] = &px[r]->q6_hi;
        }
        const bool half = half_last && g + 1 == ng; /* 4 registers: the half layout */
        /* Q8_0 and Q4_0: the sums start at -128 · Σx, so they end as Σ w · x (the half layout: block k's halves in
         * elements k and k+4) */
        const __m256i *const *start = type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 ? base : NULL;
        __m512i s[PANEL_PAIRS][PANEL_ROWS], hi[PANEL_PAIRS][PANEL_ROWS];
        if (type == GGML_TYPE_Q6_K) { /* quants 0..15 and 16..31 of each block have their own scales: two sums,
                                       * from -32 · Σx of their halves, so each ends as Σ (q - 32) · x */
            tile_sums(packed, P, wq, w0, w1, xrow, q6_lo, 0, BLOCK_LANES / 2, s);
            tile_sums(packed, P, wq, w0, w1, xrow, q6_hi, BLOCK_LANES / 2, BLOCK_LANES / 2, hi);
        } else if (half) {
            tile_sums(packed, P, wq, w0, w1, xrow, start, 0, BLOCK_LANES / 2, s);
        } else {
            tile_sums(packed, P, wq, w0, w1, xrow, start, 0, BLOCK_LANES, s);
        }
        for (int r = 0; r < R; r++) {
            const __m512 dx = _mm512_broadcast_f32x8(px[r]->d);
            for (int p = 0; p < P; p++) {
                __m512 f; /* block k's exact s_b (quant.h) in f32, for Q4_K sc · s_b: each below 2^24, so exact */
                if (type == GGML_TYPE_Q6_K) {
                    /* each half Σ (q - 32) · x (at most 16 · 32 · 127): times its scale and summed, exactly s_b */
                    f = _mm512_fmadd_ps(pp[p]->sc[1], _mm512_cvtepi32_ps(hi[p][r]),
                                        _mm512_mul_ps(pp[p]->sc[0], _mm512_cvtepi32_ps(s[p][r])));
                } else {
                    f = _mm512_cvtepi32_ps(half ? half_fold2(s[p][r]) : s[p][r]);
                    if (type == GGML_TYPE_Q4_K) /* d · (sc · s) + (-dmin · m) · Σx, then the step below */
                        f = _mm512_fmadd_ps(dw[p], _mm512_mul_ps(pp[p]->sc[0], f),
                                            _mm512_mul_ps(pp[p]->m, _mm512_broadcast_f32x8(px[r]->t)));
                }
                acc[p][r] = type == GGML_TYPE_Q4_K ? _mm512_fmadd_ps(dx, f, acc[p][r])
                                                   : _mm512_fmadd_ps(_mm512_mul_ps(dw[p], dx), f, acc[p][r]);
            }
        }
    }
    for (int p = 0; p < P; p++) { /* pair p's outputs: columns 2p and 2p + 1 */
        const int Cp = C - PANEL_COLS * p < PANEL_COLS ? C - PANEL_COLS * p : PANEL_COLS;
        __m256 sums[PANEL_ROWS * PANEL_COLS];
        for (int r = 0; r < R; r++) {
            sums[r * Cp] = _mm512_castps512_ps256(acc[p][r]);
            if (Cp == PANEL_COLS) sums[r * Cp + 1] = _mm512_extractf32x8_ps(acc[p][r], 1);
        }
        store_sums(sums, R, Cp, y + PANEL_COLS * p, ldy);
    }
}
#else
/* The integer sums of one group for a whole register tile: s[r][c] = the sum over registers j0 <= j < j0 + n of the
 * products of activation row r's register x[r][j] and weight row c's register w_c[j]. TILE_Q8 (Q8_0): 32-bit
 * sums of madd(maddubs(|w|, sign(x, w)), 1). TILE_Q4 (Q4_0, Q4_K; quants 0..15): 16-bit sums of maddubs(w, x),
 * widened to 32 bits (madd with 1) after the last register. TILE_Q4K (Q4_K): as TILE_Q4, but widened by a madd with
 * each weight row's sub-block scales (m0, m1: block k's in both 16-bit halves of element k), so the sums come out as
 * sc · s, exact (at most 63 · 8 · 4 · 15 · 127 < 2^24) and with no multiply of their own.
 * TILE_Q6 (Q6_K; quants 0..63; all 8 registers): registers j and j+1 summed in 16 bits (at most 2 · 2 · 63 · 127),
 * then 32-bit sums of their madd with the weight row's scales of quants 0..15 (registers 0..3: m0, m1) or 16..31
 * (registers 4..7: 32 bytes on): sc · Σq·x over the block, at most 2 · 128 · 16 · 63 · 127 in magnitude. Written in assembly because GCC, at the 16 registers this needs,
 * spilled two sums to the stack and re-read a weight register from memory at every use: the tile then ran
 * at 0.64 ns per block product for Q8_0 and 0.56 for Q4_0. The sums and the ones are operands; ymm9 to ymm15
 * are fixed scratch: the weight registers, their magnitudes (Q8_0), the row and the products. */
typedef enum { TILE_Q8, TILE_Q4, TILE_Q4K, TILE_Q6 } tile_kind;

/* One register step at byte offset o of the weight rows' and the activation rows' registers. */
#define TILE_ROW_Q8(o, x, a, b)                                                                                \
    "vmovdqa " o "(%[" #x "]), %%ymm13\n\t"                                                                    \
    "vpsignb %%ymm9, %%ymm13, %%ymm14\n\t"                                                                     \
    "vpsignb %%ymm10, %%ymm13, %%ymm15\n\t"                                                                    \
    "vpmaddubsw %%ymm14, %%ymm11, %%ymm14\n\t"                                                                 \
    "vpmaddubsw %%ymm15, %%ymm12, %%ymm15\n\t"                                                                 \
    "vpmaddwd %[ones], %%ymm14, %%ymm14\n\t"                                                                   \
    "vpmaddwd %[ones], %%ymm15, %%ymm15\n\t"                                                                   \
    "vpaddd %%ymm14, %[" #a "], %[" #a "]\n\t"                                                                 \
    "vpaddd %%ymm15, %[" #b "], %[" #b "]\n\t"
#define TILE_STEP_Q8(o)                                                                                        \
    "vmovdqa " o "(%[w0]), %%ymm9\n\t"                                                                         \
    "vmovdqa " o "(%[w1]), %%ymm10\n\t"                                                                        \
    "vpabsb %%ymm9, %%ymm11\n\t"                                                                               \
    "vpabsb %%ymm10, %%ymm12\n\t" TILE_ROWS_AT(TILE_ROW_Q8, o)
#define TILE_ROW_Q4(o, x, a, b)                                                                                \
    "vmovdqa " o "(%[" #x "]), %%ymm13\n\t"                                                                    \
    "vpmaddubsw %%ymm13, %%ymm9, %%ymm14\n\t"                                                                  \
    "vpmaddubsw %%ymm13, %%ymm10, %%ymm15\n\t"                                                                 \
    "vpaddw %%ymm14, %[" #a "], %[" #a "]\n\t"                                                                 \
    "vpaddw %%ymm15, %[" #b "], %[" #b "]\n\t"
#define TILE_STEP_Q4(o)                                                                                        \
    "vmovdqa " o "(%[w0]), %%ymm9\n\t"                                                                         \
    "vmovdqa " o "(%[w1]), %%ymm10\n\t" TILE_ROWS_AT(TILE_ROW_Q4, o)
/* Registers j, j+1 (offsets o, o + 32): the weight rows' in ymm9, ymm10 (row 0) and ymm11, ymm12 (row 1); the
 * activation row's from memory. */
/* ms: the byte offset of this step's scales at m0, m1 (quants 0..15 or 16..31 of each block). */
#define TILE_ROW_Q6(o, ms, x, a, b)                                                                            \
    "vpmaddubsw " o "(%[" #x "]), %%ymm9, %%ymm14\n\t"                                                         \
    "vpmaddubsw 32+" o "(%[" #x "]), %%ymm10, %%ymm15\n\t"                                                     \
    "vpaddw %%ymm15, %%ymm14, %%ymm14\n\t"                                                                     \
    "vpmaddwd " ms "(%[m0]), %%ymm14, %%ymm14\n\t"                                                             \
    "vpaddd %%ymm14, %[" #a "], %[" #a "]\n\t"                                                                 \
    "vpmaddubsw " o "(%[" #x "]), %%ymm11, %%ymm14\n\t"                                                        \
    "vpmaddubsw 32+" o "(%[" #x "]), %%ymm12, %%ymm15\n\t"                                                     \
    "vpaddw %%ymm15, %%ymm14, %%ymm14\n\t"                                                                     \
    "vpmaddwd " ms "(%[m1]), %%ymm14, %%ymm14\n\t"                                                             \
    "vpaddd %%ymm14, %[" #b "], %[" #b "]\n\t"
#define TILE_STEP_Q6(o, ms)                                                                                    \
    "vmovdqa " o "(%[w0]), %%ymm9\n\t"                                                                         \
    "vmovdqa 32+" o "(%[w0]), %%ymm10\n\t"                                                                     \
    "vmovdqa " o "(%[w1]), %%ymm11\n\t"                                                                        \
    "vmovdqa 32+" o "(%[w1]), %%ymm12\n\t" TILE_ROWS_AT(TILE_ROW_Q6, o, ms)
/* ROW for the tile's four activation rows, each with its two sums; the step's arguments (offsets) first. */
#define TILE_ROWS_AT(ROW, ...)                                                                                 \
    ROW(__VA_ARGS__, x0, s00, s01) ROW(__VA_ARGS__, x1, s10, s11) ROW(__VA_ARGS__, x2, s20, s21)                   \
        ROW(__VA_ARGS__, x3, s30, s31)
#define WIDEN(a) "vpmaddwd %[ones], %[" #a "], %[" #a "]\n\t"
#define WIDEN_ALL WIDEN(s00) WIDEN(s01) WIDEN(s10) WIDEN(s11) WIDEN(s20) WIDEN(s21) WIDEN(s30) WIDEN(s31)
#define WIDEN_BY(a, m) "vpmaddwd (%[" #m "]), %[" #a "], %[" #a "]\n\t"
#define WIDEN_SCALED                                                                                           \
    WIDEN_BY(s00, m0) WIDEN_BY(s01, m1) WIDEN_BY(s10, m0) WIDEN_BY(s11, m1) WIDEN_BY(s20, m0) WIDEN_BY(s21, m1)     \
        WIDEN_BY(s30, m0) WIDEN_BY(s31, m1)

/* n registers (4 or 8; Q6: 8) from register j0, unrolled: a loop's exit, mispredicted once per group, cost more
 * than its instructions. */
static inline __attribute__((always_inline)) void tile_sums(tile_kind kind, const __m256i *w0, const __m256i *w1,
                                                             const __m256i *m0, const __m256i *m1,
                                                             const __m256i *const xr[PANEL_ROWS], int j0, int n,
                                                             __m256i s[PANEL_ROWS][PANEL_COLS]) {
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
    const __m256i ones = _mm256_set1_epi16(1);
    w0 += j0, w1 += j0;
    const __m256i *x0 = xr[0] + j0, *x1 = xr[1] + j0, *x2 = xr[2] + j0, *x3 = xr[3] + j0;
#define TILE_ASM(body)                                                                                          \
    __asm__(body                                                                                               \
            : [s00] "+x"(s00), [s01] "+x"(s01), [s10] "+x"(s10), [s11] "+x"(s11), [s20] "+x"(s20),             \
              [s21] "+x"(s21), [s30] "+x"(s30), [s31] "+x"(s31)                                                \
            : [w0] "r"(w0), [w1] "r"(w1), [m0] "r"(m0), [m1] "r"(m1), [x0] "r"(x0), [x1] "r"(x1), [x2] "r"(x2),      \
              [x3] "r"(x3), [ones] "x"(ones)                                                                   \
            : "memory", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15")
#define STEPS4(STEP) STEP("0") STEP("32") STEP("64") STEP("96")
#define STEPS8(STEP) STEPS4(STEP) STEP("128") STEP("160") STEP("192") STEP("224")
    if (kind == TILE_Q8 && n == 8) TILE_ASM(STEPS8(TILE_STEP_Q8));
    if (kind == TILE_Q8 && n == 4) TILE_ASM(STEPS4(TILE_STEP_Q8));
    if (kind == TILE_Q4 && n == 8) TILE_ASM(STEPS8(TILE_STEP_Q4) WIDEN_ALL);
    if (kind == TILE_Q4 && n == 4) TILE_ASM(STEPS4(TILE_STEP_Q4) WIDEN_ALL);
    if (kind == TILE_Q4K) TILE_ASM(STEPS8(TILE_STEP_Q4) WIDEN_SCALED);
    if (kind == TILE_Q6) TILE_ASM(TILE_STEP_Q6("0", "0") TILE_STEP_Q6("64", "0") TILE_STEP_Q6("128", "32") TILE_STEP_Q6("192", "32"));
#undef STEPS8
#undef STEPS4
#undef TILE_ASM
#undef WIDEN_SCALED
#undef WIDEN_BY
#undef WIDEN_ALL
#undef WIDEN
#undef TILE_ROWS_AT
#undef TILE_STEP_Q6
#undef TILE_ROW_Q6
#undef TILE_STEP_Q4
#undef TILE_ROW_Q4
#undef TILE_STEP_Q8
#undef TILE_ROW_Q8
    s[0][0] = s00, s[0][1] = s01, s[1][0] = s10, s[1][1] = s11;
    s[2][0] = s20, s[2][1] = s21, s[3][0] = s30, s[3][1] = s31;
}

/* One register tile: y[r*ldy + c] for r < R, c < C over all ng groups (packed, R and C known at compile time, so
 * the accumulators stay in registers). xp: activation row r's groups at xp + r * ng. */
static inline __attribute__((always_inline)) void panel_tile(ggml_type type, bool packed, const wpanel *wp, size_t ng,
                                                              bool half_last, const xgroup *xp, int R, int C, float *y,
                                                              size_t ldy, bool fetch) {
    __m256 acc[PANEL_ROWS][PANEL_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (size_t g = 0; g < ng; g++) {
        const __m256i *w0 = panel_regs(wp, packed, C, g, 0), *w1 = panel_regs(wp, packed, C, g, C - 1);
        if (packed && fetch) fetch_ahead(wp, C, g);
        __m256 dw[PANEL_COLS];
        for (int c = 0; c < C; c++) dw[c] = panel_scales(wp, packed, C, g, c);
        const xgroup *px[PANEL_ROWS];
        for (int r = 0; r < R; r++) px[r] = &xp[r * ng + g];
        const bool half = half_last && g + 1 == ng; /* 4 registers: the half layout */
        /* A smaller tile repeats its last row and column (sums it then drops). */
        const __m256i *xrow[PANEL_ROWS];
        for (int r = 0; r < PANEL_ROWS; r++) xrow[r] = px[r < R ? r : R - 1]->q;
        __m256i s[PANEL_ROWS][PANEL_COLS];
        /* The widening multipliers (K-quants): both rows' scales, their halves 32 bytes apart (Q6_K). */
        const __m256i *m0 = packed ? NULL : wp->pk[g * C].sc16, *m1 = packed ? NULL : wp->pk[g * C + C - 1].sc16;
        if (type == GGML_TYPE_Q6_K) { /* quants 0..15 and 16..31 of each block have their own scales */
            tile_sums(TILE_Q6, w0, w1, m0, m1, xrow, 0, BLOCK_LANES, s);
        } else { /* Q8_0: exact 32-bit sums; Q4_0, Q4_K: quants 0..15, all 8 pair sums (at most 8 · 2 · 15 · 127) in
                  * 16 bits, widened once */
            const tile_kind kind = type == GGML_TYPE_Q8_0 ? TILE_Q8 : type == GGML_TYPE_Q4_K ? TILE_Q4K : TILE_Q4;
            if (half)
                tile_sums(kind, w0, w1, m0, m1, xrow, 0, BLOCK_LANES / 2, s);
            else
                tile_sums(kind, w0, w1, m0, m1, xrow, 0, BLOCK_LANES, s);
        }
        __m256i xsum[PANEL_ROWS]; /* Q4_0, Q4_K: Σx per block; Q6_K: Σx of its halves as the 16-bit halves */
        __m256 xsumf[PANEL_ROWS];
        for (int r = 0; type != GGML_TYPE_Q8_0 && r < R; r++) {
            if (type == GGML_TYPE_Q6_K) { /* each at most 16 · 127 in magnitude */
                xsum[r] = _mm256_or_si256(_mm256_and_si256(px[r]->sum_lo, _mm256_set1_epi32(0xffff)),
                                          _mm256_slli_epi32(px[r]->sum_hi, 16));
                continue;
            }
            xsum[r] = _mm256_add_epi32(px[r]->sum_lo, px[r]->sum_hi);
            if (half) xsum[r] = half_fold(xsum[r]);
            xsumf[r] = _mm256_cvtepi32_ps(xsum[r]);
        }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                const wgroup *pw = packed ? NULL : &wp->pk[g * C + c]; /* K-quants: their scales and mins */
                __m256i si = half ? half_fold(s[r][c]) : s[r][c];
                if (type == GGML_TYPE_Q4_0) si = _mm256_sub_epi32(si, _mm256_slli_epi32(xsum[r], 3));
                /* Q6_K: the sums are sc · Σq·x over both halves; less the offset's 32 · sc · Σx, an exact madd,
                 * they are s_b of quant.h (below 2^24, so its conversion is exact) */
                if (type == GGML_TYPE_Q6_K) si = _mm256_sub_epi32(si, _mm256_madd_epi16(xsum[r], pw->corr16));
                __m256 sf = _mm256_cvtepi32_ps(si); /* Q4_K: sc · s, weighted by the widening madd */
                if (type == GGML_TYPE_Q4_K) /* d · (sc · s) + (-dmin · m) · Σx, then the step below */
                    sf = _mm256_fmadd_ps(dw[c], sf, _mm256_mul_ps(pw->m, xsumf[r]));
                acc[r][c] = type == GGML_TYPE_Q4_K ? _mm256_fmadd_ps(px[r]->d, sf, acc[r][c])
                                                   : _mm256_fmadd_ps(_mm256_mul_ps(dw[c], px[r]->d), sf, acc[r][c]);
            }
    }
    __m256 sums[PANEL_ROWS * PANEL_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) sums[r * C + c] = acc[r][c];
    store_sums(sums, R, C, y, ldy);
}
#endif

/* All register tiles of a panel: rows of xp (groups at xp + r * ng) against its C weight rows, 4 rows at a time and
 * a smaller tile for the last 1 to 3 (R and C known at compile time in each). */
static inline __attribute__((always_inline)) void panel_rows(ggml_type type, bool packed, const wpanel *wp, size_t ng,
                                                              bool half_last, const xgroup *xp, uint32_t rows, int C,
                                                              float *y, size_t ldy) {
    uint32_t r = 0;
    for (; r + PANEL_ROWS <= rows; r += PANEL_ROWS)
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, PANEL_ROWS, C, y + (size_t)r * ldy, ldy, r == 0);
    switch (rows - r) {
    case 1:
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, 1, C, y + (size_t)r * ldy, ldy, r == 0);
        return;
    case 2:
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, 2, C, y + (size_t)r * ldy, ldy, r == 0);
        return;
    case 3:
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, 3, C, y + (size_t)r * ldy, ldy, r == 0);
        return;
    default:
        return;
    }
}

/* C: 1 or PANEL_COLS weight rows; with VNNI and panels rearranged per call, up to PANEL_PAIRS panels' (panels_over's
 * cols). */
#define PANEL_SHAPES(T, packed)                                                                                \
    switch (MM_VNNI && !packed ? C : C == PANEL_COLS ? PANEL_COLS : 1) {                                       \
    case 4: panel_rows(T, packed, wp, ng, half_last, xp, rows, 4, y, ldy); return;                             \
    case 3: panel_rows(T, packed, wp, ng, half_last, xp, rows, 3, y, ldy); return;                             \
    case 2: panel_rows(T, packed, wp, ng, half_last, xp, rows, 2, y, ldy); return;                             \
    default: panel_rows(T, packed, wp, ng, half_last, xp, rows, 1, y, ldy); return;                            \
    }
#define PANEL_TYPE(T)                                                                                          \
    case T:                                                                                                    \
        PANEL_SHAPES(T, false)

/* Read in place when packed at load: Q8_0 only (packed Q4_0 is unpacked into panels by pack_panel). */
static void panel_dispatch(ggml_type type, bool packed, const wpanel *wp, size_t ng, bool half_last, const xgroup *xp,
                           uint32_t rows, int C, float *y, size_t ldy) {
    switch (type) {
    case GGML_TYPE_Q8_0:
        if (packed) {
            PANEL_SHAPES(GGML_TYPE_Q8_0, true)
        }
        PANEL_SHAPES(GGML_TYPE_Q8_0, false)
        PANEL_TYPE(GGML_TYPE_Q4_0)
        PANEL_TYPE(GGML_TYPE_Q4_K)
        PANEL_TYPE(GGML_TYPE_Q6_K)
    default:
        return;
    }
}
#undef PANEL_TYPE
#undef PANEL_SHAPES

/* Groups of the widest row that takes panels (n <= 17664): its packed panel (pk, 53 KB) is on the stack. */
#define PANEL_MAX_GROUPS 69

static bool panel_fits(ggml_type type, bool packed, uint32_t n_rows, size_t ng) {
    const uint32_t from = packed ? packed_panel_min_rows(type) : PANEL_MIN_ROWS;
    return n_rows >= from && ng <= PANEL_MAX_GROUPS;
}

/* Rows of packed panels taken at a time: their activation side stays in L1 while every panel passes over it, and a
 * panel's two weight rows stay there for its tiles (one 4864-wide Q8_0 product: 8% faster than all rows at once). */
#define PANEL_ROW_BLOCK 16
#define PANEL_X_L1 (24 * 1024) /* the activation side of a block of rows against panels rearranged per call */
/* The activation side of the rows one weight pair at a time passes over, where not even a tile's rows fit in L1: more
 * than L2 holds streams from memory for every pair (8B's ffn_down, 14336 wide, 128 rows: 3 MB). A call of more rows
 * goes in passes, each rearranging the weights again. Emerald Rapids (2 MB of L2), avx512, one thread, 128 rows of
 * 14336 against 128 outputs: Q4_K 5780 -> 2530 us, Q6_K 6400 -> 2640; with 512 KB passes 3000 and 3140, and 4864-wide
 * rows (1 MB, one pass at this size) 5% slower. Zen's smaller L2 is not measured. */
#define PANEL_X_L2 (1024 * 1024)

/* Prepared rows xp (rows of them) against every panel of the n_out weight rows: rearranged here, once each (from
 * natural rows, or packed Q4_0 ones), or read where they lie (packed Q8_0, then a block of rows at a time). */
static void panels_over(ggml_type type, bool packed_rows, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                        const xgroup *xp, uint32_t rows, size_t nb, float *y, size_t ldy) {
    const bool packed = packed_rows && type == GGML_TYPE_Q8_0; /* in place */
    const size_t ng = groups_of(nb);
    const bool half_last = half_last_group(nb);
    wpanel_group pk[PANEL_MAX_GROUPS * PANEL_COLS / PANEL_GROUP_ROWS];
    /* Rearranged here: as many panels at a time as pk holds, then blocks of rows whose activation side fits in
     * PANEL_X_L1 bytes pass over them all (VNNI, 110M shapes, 128 rows: 5-10% faster than one panel at a time
     * against all rows; AVX2 as fast); when not even a register tile's rows fit (4864 wide), the latter, 3% faster */
    const size_t row_bytes = ng * sizeof(xgroup), fit = PANEL_X_L1 / row_bytes / PANEL_ROWS * PANEL_ROWS;
    if (!packed && !fit && rows * row_bytes > PANEL_X_L2) { /* in passes of rows that fit, as even as tiles allow */
        const uint32_t most = (uint32_t)(PANEL_X_L2 / row_bytes / PANEL_ROWS * PANEL_ROWS);
        const uint32_t passes = (rows + most - 1) / most;
        const uint32_t per = (rows / passes + PANEL_ROWS - 1) / PANEL_ROWS * PANEL_ROWS;
        for (uint32_t r0 = 0; r0 < rows; r0 += per)
            panels_over(type, packed_rows, w, w_row_bytes, n_out, xp + (size_t)r0 * ng,
                        rows - r0 < per ? rows - r0 : per, nb, y + (size_t)r0 * ldy, ldy);
        return;
    }
    /* weight rows of a register tile: with VNNI, two panels' where pk holds two (panel_tile) */
    const uint32_t cols = MM_VNNI && !packed && PANEL_PAIRS * ng <= PANEL_MAX_GROUPS ? PANEL_PAIRS * PANEL_COLS
                                                                                      : PANEL_COLS;
    const uint32_t span = packed ? n_out : fit ? (uint32_t)(PANEL_MAX_GROUPS / ng) * PANEL_COLS : cols;
    const uint32_t block = packed ? PANEL_ROW_BLOCK : !fit ? rows : fit > PANEL_ROW_BLOCK ? PANEL_ROW_BLOCK : (uint32_t)fit;
    for (uint32_t o0 = 0; o0 < n_out; o0 += span) {
        const uint32_t o1 = n_out - o0 < span ? n_out : o0 + span;
        for (uint32_t o = o0; !packed && o < o1; o += PANEL_COLS)
            pack_panel(type, packed_rows, w + o * w_row_bytes, w_row_bytes,
                       o1 - o < PANEL_COLS ? (int)(o1 - o) : PANEL_COLS, nb, ng,
                       pk + (size_t)(o - o0) / PANEL_GROUP_ROWS * ng);
        for (uint32_t r0 = 0; r0 < rows; r0 += block) {
            const uint32_t nr = rows - r0 < block ? rows - r0 : block;
            for (uint32_t o = o0; o < o1; o += cols) {
                const int C = o1 - o < cols ? (int)(o1 - o) : (int)cols;
                const wpanel wp = {pk + (size_t)(o - o0) / PANEL_GROUP_ROWS * ng, w + o * w_row_bytes, w_row_bytes,
                                   packed_scales_at(type, nb)};
                panel_dispatch(type, packed, &wp, ng, half_last, xp + (size_t)r0 * ng, nr, C,
                               y + (size_t)r0 * ldy + o, ldy);
            }
        }
    }
}

/* With the rows prepared by the caller (xp), all at once; else prepared here, as many whole register tiles of rows
 * at a time as the stack buffer holds. */
static void matmul_panels(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                          const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y, size_t ldy) {
    if (xp) {
        panels_over(type, packed, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy);
        return;
    }
    const size_t ng = groups_of(nb);
    xgroup buf[PANEL_X_BYTES / sizeof(xgroup)];
    const uint32_t chunk = (uint32_t)(PANEL_X_BYTES / (ng * sizeof(xgroup))) / PANEL_ROWS * PANEL_ROWS;
    for (uint32_t r0 = 0; r0 < n_rows; r0 += chunk) {
        const uint32_t rows = n_rows - r0 < chunk ? n_rows - r0 : chunk;
        prep_panel_rows(xq + (size_t)r0 * nb, nb, ng, rows, buf);
        panels_over(type, packed, w, w_row_bytes, n_out, buf, rows, nb, y + (size_t)r0 * ldy, ldy);
    }
}

/* Activation rows of a packed direct tile: each weight register is loaded and unpacked once for them. Two with VNNI's
 * 32 registers; one on AVX2, chosen when its tiles took 4 weight rows whose sums and lanes filled its 16 registers
 * (not measured again since they take one, PACKED_COLS). */
#define PACKED_ROWS (MM_VNNI ? 2 : 1)
/* Weight rows of a packed direct tile: one, so each thread reads the weights as one stream, a row after the other. Four
 * rows side by side (the activation registers loaded once for them) made four streams a group apart, which AMD Zen 4
 * read at a third of its bandwidth: one thread, 110M Q8_0, every product of a decode step from DRAM, 9.5 -> 19 GB/s
 * (the read probe: 32); decode 512 + 128 at 2 threads, avx512: Q8_0 105-110 -> 151 tok/s, Q4_0 199-202 -> 235-238,
 * Q4_K_M 167-173 -> 215-232; avx2: Q8_0 97-101 -> 156-167. */
#define PACKED_COLS 1

/* One group of a packed direct tile: J registers (8, or 4 for a half group), each weight register loaded once for
 * the tile's R activation rows (row r's group at xg + r * x_stride); element k of s[r][c] ends as block k's exact sum
 * (as in the panel tiles; Q4_K: of its quants 0..15, before the scale). Q4_0 and Q4_K: the unsigned nibbles of 4
 * packed registers (of 16 bytes each in a half group) against x, Q4_0's from -8 · Σx. */
static inline __attribute__((always_inline)) void packed_group(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                                const xgroup *xg, size_t x_stride, int R, int J, int C,
                                                                __m256i s[PACKED_ROWS][PACKED_COLS]) {
    if (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_K) {
        __m256i hi[PACKED_ROWS][PACKED_COLS]; /* registers j + 4: a second chain */
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                s[r][c] = type == GGML_TYPE_Q4_0 ? x_nib_base(&xg[r * x_stride]) : _mm256_setzero_si256();
                hi[r][c] = _mm256_setzero_si256();
            }
        const __m256i low4 = _mm256_set1_epi8(15);
        for (int j = 0; j < BLOCK_LANES / 2; j++) {
            __m256i x[PACKED_ROWS], x_hi[PACKED_ROWS];
            for (int r = 0; r < R; r++) {
                x[r] = _mm256_load_si256(&xg[r * x_stride].q[j]);
                x_hi[r] = _mm256_load_si256(&xg[r * x_stride].q[j + BLOCK_LANES / 2]);
            }
            for (int c = 0; c < C; c++) {
                const uint8_t *wc = w + c * w_row_bytes;
                if (J == BLOCK_LANES / 2) {
                    const __m128i h = _mm_load_si128((const __m128i *)wc + j);
                    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(h, 4), h), low4);
                    for (int r = 0; r < R; r++) s[r][c] = sums_u8s8(s[r][c], nib, x[r]);
                } else {
                    const __m256i p = _mm256_load_si256((const __m256i *)wc + j);
                    const __m256i lo = _mm256_and_si256(p, low4), up = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
                    for (int r = 0; r < R; r++) {
                        s[r][c] = sums_u8s8(s[r][c], lo, x[r]);
                        hi[r][c] = sums_u8s8(hi[r][c], up, x_hi[r]);
                    }
                }
            }
        }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) s[r][c] = _mm256_add_epi32(s[r][c], hi[r][c]);
        return;
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
#if MM_VNNI
            s[r][c] = xg[r * x_stride].base; /* the weights are stored 128 up (group_regs) */
#else
            s[r][c] = _mm256_setzero_si256();
#endif
    for (int j = 0; j < J; j++) {
        __m256i x[PACKED_ROWS];
        for (int r = 0; r < R; r++) x[r] = _mm256_load_si256(&xg[r * x_stride].q[j]);
        for (int c = 0; c < C; c++) {
            const __m256i wv = _mm256_load_si256((const __m256i *)(w + c * w_row_bytes) + j);
            for (int r = 0; r < R; r++)
#if MM_VNNI
                s[r][c] = sums_u8s8(s[r][c], wv, x[r]);
#else
                s[r][c] = _mm256_add_epi32(s[r][c], block_sums_q8_0(wv, x[r]));
#endif
        }
    }
}

/* One group of a packed Q6_K direct tile: lo[r][c] and hi[r][c], element k, the sums of sub-block k's quants 0..15
 * and 16..31 less the offset 32 (Σ (q - 32) · x, from xgroup.q6_lo and q6_hi) against activation row r's — registers
 * 0..3 and 4..7. */
static inline __attribute__((always_inline)) void packed_group_q6_K(const uint8_t *w, size_t w_row_bytes,
                                                                     const xgroup *xg, size_t x_stride, int R, int C,
                                                                     __m256i lo[PACKED_ROWS][PACKED_COLS],
                                                                     __m256i hi[PACKED_ROWS][PACKED_COLS]) {
    for (int c = 0; c < C; c++) {
        __m256i q[BLOCK_LANES];
        packed_q6_K_regs(w + c * w_row_bytes, q);
        for (int r = 0; r < R; r++) {
            const xgroup *x = &xg[r * x_stride];
            lo[r][c] = x_q6_lo(x);
            hi[r][c] = x_q6_hi(x);
            for (int j = 0; j < BLOCK_LANES / 2; j++) {
                lo[r][c] = sums_u8s8(lo[r][c], q[j], _mm256_load_si256(&x->q[j]));
                hi[r][c] = sums_u8s8(hi[r][c], q[j + BLOCK_LANES / 2], _mm256_load_si256(&x->q[j + BLOCK_LANES / 2]));
            }
        }
    }
}

/* How far ahead the packed direct tiles fetch: whole rows, at least PACKED_FETCH_BYTES. One row ahead was a few
 * nanoseconds of work ahead for short rows, far less than a DRAM access takes: AMD Zen 5 (family 26), avx512, one
 * thread, one activation row against 32000 768-wide rows from DRAM, 1 / 3 / 6 rows ahead: Q6_K (640-byte rows)
 * 866-1090 / 585-707 / 525-746 us, Q8_0 (816) 862-874 / 829-922 / 670-691, Q4_0 and Q4_K (about 450) unchanged within
 * the noise. Rows of 4 KB and more keep fetching one row ahead, as every row did before. */
#define PACKED_FETCH_BYTES 4096

static inline size_t packed_fetch_rows(size_t w_row_bytes) {
    return w_row_bytes >= PACKED_FETCH_BYTES ? 1 : (PACKED_FETCH_BYTES + w_row_bytes - 1) / w_row_bytes;
}

/* Direct tile on packed rows, for few rows (decode, small batches): R <= PACKED_ROWS prepared activation rows (row
 * r's groups at xg + r * ng) against C <= PACKED_COLS packed weight rows, each output with its 8 lanes in
 * quant.h's block order through its steps, as the panel tiles; the rows packed_fetch_rows tiles on are fetched
 * meanwhile, by every tile (fetching from only the first of the tiles that share these weight rows, a branch in this
 * loop, cost 0.5B Q4_0 decode about 5%). */
static inline __attribute__((always_inline)) void packed_tile(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                               size_t nb, const xgroup *xg, int R, int C, float *y,
                                                               size_t ldy) {
    const size_t ng = groups_of(nb), scales_at = packed_scales_at(type, nb), gb = packed_group_bytes(type);
    const size_t ahead = packed_fetch_rows(w_row_bytes) * C;
    __m256 acc[PACKED_ROWS][PACKED_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (size_t g = 0; g < ng; g++) {
        const bool half = g + 1 == ng && half_last_group(nb);
        const uint8_t *wg = w + g * gb, *side = w + scales_at + g * packed_side_bytes(type);
        for (int c = 0; c < C; c++) { /* and their side data, which lies apart from the quants (0.5B Q4_0 decode:
                                        * 95-99 tok/s without, 103-106 with) */
            for (size_t off = 0; off < gb; off += 64) prefetch_at(wg, (ahead + c) * w_row_bytes + off);
            prefetch_at(side, (ahead + c) * w_row_bytes);
        }
        __m256i s[PACKED_ROWS][PACKED_COLS];
        if (type == GGML_TYPE_Q6_K) { /* each half's sum less the offset (packed_group_q6_K); then as superblock_q6_K */
            __m256i hi[PACKED_ROWS][PACKED_COLS];
            packed_group_q6_K(wg, w_row_bytes, &xg[g], ng, R, C, s, hi);
            const __m128i deal = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
            for (int c = 0; c < C; c++) {
                const uint8_t *side_c = packed_side(w + c * w_row_bytes, type, nb, g);
                uint16_t d;
                memcpy(&d, side_c, sizeof d);
                const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(side_c + sizeof d)), deal);
                const __m256 sc_lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)),
                             sc_hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc)));
                for (int r = 0; r < R; r++) {
                    const xgroup *x = &xg[r * ng + g];
                    const __m256 sb = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s[r][c]), sc_lo),
                                                    _mm256_mul_ps(_mm256_cvtepi32_ps(hi[r][c]), sc_hi));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d)), x->d), sb, acc[r][c]);
                }
            }
            continue;
        }
        if (half)
            packed_group(type, wg, w_row_bytes, &xg[g], ng, R, BLOCK_LANES / 2, C, s);
        else
            packed_group(type, wg, w_row_bytes, &xg[g], ng, R, BLOCK_LANES, C, s);
        if (type == GGML_TYPE_Q4_K) { /* fmaf(d_x, fmaf(d, (float)(sc · s), dm · (float)t), lane), t = Σx */
            for (int c = 0; c < C; c++) {
                float d, dmin;
                __m256i sc, m;
                packed_q4_K_side(packed_side(w + c * w_row_bytes, type, nb, g), &d, &dmin, &sc, &m);
                const __m256 dm = _mm256_mul_ps(_mm256_set1_ps(-dmin), _mm256_cvtepi32_ps(m));
                for (int r = 0; r < R; r++) {
                    const xgroup *x = &xg[r * ng + g];
                    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(d),
                                                         _mm256_cvtepi32_ps(_mm256_mullo_epi32(s[r][c], sc)),
                                                         _mm256_mul_ps(dm, x_t(x)));
                    acc[r][c] = _mm256_fmadd_ps(x->d, inner, acc[r][c]);
                }
            }
            continue;
        }
        for (int c = 0; c < C; c++) {
            const __m256 dw = packed_scales(w + c * w_row_bytes, scales_at, g);
            for (int r = 0; r < R; r++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xg[r * ng + g].d),
                                            _mm256_cvtepi32_ps(half ? half_fold(s[r][c]) : s[r][c]), acc[r][c]);
        }
    }
    __m256 sums[PACKED_ROWS * PACKED_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) sums[r * C + c] = acc[r][c];
    store_sums(sums, R, C, y, ldy);
}

#define PACKED_TILE(R_) packed_tile(type, wo, w_row_bytes, nb, xg, R_, PACKED_COLS, y + (size_t)r * ldy + o, ldy)
_Static_assert(PACKED_COLS == 1, "packed_rows_prepared: a tile of more weight rows needs a smaller one for the last");

/* Few rows against packed rows (xp: the rows prepared): each tile of weight rows against every pair (or row) of
 * activation rows while it is in L1, so the weights stream once. */
static inline __attribute__((always_inline)) void packed_rows_prepared(ggml_type type, const uint8_t *w,
                                                                        size_t w_row_bytes, uint32_t n_out,
                                                                        const xgroup *xp, uint32_t n_rows, size_t nb,
                                                                        float *y, size_t ldy) {
    const size_t ng = groups_of(nb);
    for (uint32_t o = 0; o < n_out; o += PACKED_COLS) {
        const uint8_t *wo = w + o * w_row_bytes;
        uint32_t r = 0;
        for (; r + PACKED_ROWS <= n_rows; r += PACKED_ROWS) {
            const xgroup *xg = xp + (size_t)r * ng;
            PACKED_TILE(PACKED_ROWS);
        }
        for (; r < n_rows; r++) {
            const xgroup *xg = xp + (size_t)r * ng;
            PACKED_TILE(1);
        }
    }
}

/* packed_rows_prepared with a constant type in each call: the types' groups differ in every step. */
static inline __attribute__((always_inline)) void packed_rows_of(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                                  uint32_t n_out, const xgroup *xp, uint32_t n_rows,
                                                                  size_t nb, float *y, size_t ldy) {
    switch (type) {
    case GGML_TYPE_Q4_0: packed_rows_prepared(GGML_TYPE_Q4_0, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    case GGML_TYPE_Q4_K: packed_rows_prepared(GGML_TYPE_Q4_K, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    case GGML_TYPE_Q6_K: packed_rows_prepared(GGML_TYPE_Q6_K, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    default: packed_rows_prepared(GGML_TYPE_Q8_0, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    }
}

/* The same with the rows prepared here, on the stack, PACKED_PREP_ROWS at a time. Out of line, so that its buffer
 * (115 KB) is not in the frame of every product a decode step makes. */
#define PACKED_PREP_ROWS 4
static __attribute__((noinline)) void packed_rows_unprepared(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                             uint32_t n_out, const block_q8_act *xq, uint32_t n_rows,
                                                             size_t nb, float *y, size_t ldy) {
    const size_t ng = groups_of(nb);
    xgroup buf[PACKED_PREP_ROWS * PANEL_MAX_GROUPS];
    for (uint32_t r0 = 0; r0 < n_rows; r0 += PACKED_PREP_ROWS) {
        const uint32_t rows = n_rows - r0 < PACKED_PREP_ROWS ? n_rows - r0 : PACKED_PREP_ROWS;
        prep_panel_rows(xq + (size_t)r0 * nb, nb, ng, rows, buf);
        packed_rows_of(type, w, w_row_bytes, n_out, buf, rows, nb, y + (size_t)r0 * ldy, ldy);
    }
}

#undef PACKED_TILE

/* Every quantized weight type: panels for many rows (packed rows from packed_panel_min_rows),
 * else direct tiles (packed rows, natural Q8_0 and Q4_0) or one output at a time (natural K-quants). */
static void matmul_blocks(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                          const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y, size_t ldy) {
    if (panel_fits(type, packed, n_rows, groups_of(nb))) {
        matmul_panels(type, packed, w, w_row_bytes, n_out, xq, xp, n_rows, nb, y, ldy);
        return;
    }
    if (packed && !xp) {
        packed_rows_unprepared(type, w, w_row_bytes, n_out, xq, n_rows, nb, y, ldy);
        return;
    }
    if (packed) {
        packed_rows_of(type, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy);
        return;
    }
    /* Q4_0's corrections, once per call rather than per tile of weight rows, when they fit on the stack */
    const size_t ng = groups_of(nb);
    __m256i xsum8[(PANEL_MIN_ROWS - 1) * XSUM_MAX_GROUPS];
    const bool pre = type == GGML_TYPE_Q4_0 && n_rows < PANEL_MIN_ROWS && ng <= XSUM_MAX_GROUPS;
    for (uint32_t r = 0; pre && r < n_rows; r++)
        for (size_t g = 0; g < ng; g++) {
            const size_t b = g * BLOCK_LANES;
            xsum8[r * ng + g] = group_xsum8(xq + r * nb + b, nb - b < BLOCK_LANES ? (int)(nb - b) : BLOCK_LANES);
        }
    if (is_kquant(type)) { /* the rows' activation side once for every weight row, when it fits on the stack */
        const size_t nsb = nb / BLOCK_LANES;
        kxside xs[(PANEL_MIN_ROWS - 1) * PANEL_MAX_GROUPS];
        const bool made = n_rows < PANEL_MIN_ROWS && nsb <= PANEL_MAX_GROUPS;
        for (uint32_t r = 0; made && r < n_rows; r++)
            for (size_t sb = 0; sb < nsb; sb++) xs[r * nsb + sb] = kquant_xside(type, xq + r * nb + sb * BLOCK_LANES);
        for (uint32_t o = 0; o < n_out; o++) {
            for (size_t off = 0; off < w_row_bytes; off += 64) /* two rows ahead, as the direct tiles do */
                prefetch_at(w, (o + 2) * w_row_bytes + off);
            for (uint32_t r = 0; r < n_rows; r++)
                y[r * ldy + o] = dot_kquant(type, w + o * w_row_bytes, xq + r * nb, made ? xs + r * nsb : NULL, nsb);
        }
        return;
    }
    for (uint32_t o = 0; o < n_out; o += TILE_COLS) {
        int C = n_out - o < TILE_COLS ? (int)(n_out - o) : TILE_COLS;
        for (uint32_t r = 0; r < n_rows; r += TILE_ROWS) {
            int R = n_rows - r < TILE_ROWS ? (int)(n_rows - r) : TILE_ROWS;
            tile_dispatch(type, w + o * w_row_bytes, w_row_bytes, xq + r * nb, nb, pre ? xsum8 + r * ng : NULL, R, C,
                          y + r * ldy + o, ldy);
        }
    }
}

#if MM_VNNI
/* The avx512 variant's dots of F32, F16 and BF16 rows are its 512-bit ones (avx512/convert.c, with dot_f32). */
static inline float float_row_dot(ggml_type type, const void *w, const float *xf, size_t n) {
    return avx512_dot_widened(type, w, xf, n);
}
#else
float VARIANT(dot_f32)(const float *a, const float *b, size_t n) { return dot_widened(WIDEN_F32, a, b, n); }

static inline float float_row_dot(ggml_type type, const void *w, const float *xf, size_t n) {
    return dot_widened(type == GGML_TYPE_F16 ? WIDEN_F16 : type == GGML_TYPE_BF16 ? WIDEN_BF16 : WIDEN_F32, w, xf, n);
}
#endif

float VARIANT(dot)(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    switch (type) {
    case GGML_TYPE_F32:
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16:
        return float_row_dot(type, w, xf, n);
    case GGML_TYPE_Q8_0:
        return dot_blocks(GGML_TYPE_Q8_0, w, xq, n / QK);
    case GGML_TYPE_Q4_0:
        return dot_blocks(GGML_TYPE_Q4_0, w, xq, n / QK);
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q6_K:
        return dot_kquant(type, w, xq, NULL, n / QK_K);
    default: {
        float y;
        return VARIANT(dot_ext)(type, w, xq, n, &y) ? y : ref_dot(type, w, xf, xq, n); /* dot_ext.c */
    }
    }
}

bool VARIANT(packs)(ggml_type type, size_t n) {
    const bool packed_type =
        type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K;
    return packed_type && n % kern_type_traits(type)->block_elems == 0 && groups_of(n / QK) <= PANEL_MAX_GROUPS;
}

size_t VARIANT(packed_row_bytes)(ggml_type type, size_t n) { return packed_row_bytes(type, n / QK); }

void VARIANT(pack_rows)(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n,
                        void *dst) {
    const size_t nb = n / QK, ng = groups_of(nb), rb = packed_row_bytes(type, nb), gb = packed_group_bytes(type);
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * w_row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)r * rb;
        memset(out, 0, rb);
        for (size_t g = 0; g < ng; g++) {
            const uint8_t *wg = row + g * group_bytes(type);
            const int t = blocks_in_group(nb, g), width = t <= BLOCK_LANES / 2 ? BLOCK_LANES / 2 : BLOCK_LANES;
            uint8_t *side = out + packed_scales_at(type, nb) + g * packed_side_bytes(type);
            if (is_kquant(type)) { /* panel registers j and j + 4 as the nibbles of one; Q6_K's high bits apart */
                __m256i q[BLOCK_LANES];
                kquant_regs(type, wg, q);
                transpose8_epi32(q);
                const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3);
                for (int j = 0; j < BLOCK_LANES / 2; j++)
                    _mm256_store_si256((__m256i *)(out + g * gb) + j,
                                       _mm256_or_si256(_mm256_and_si256(q[j], low4),
                                                       _mm256_slli_epi16(_mm256_and_si256(q[j + BLOCK_LANES / 2], low4), 4)));
                if (type == GGML_TYPE_Q6_K) {
                    for (int h = 0; h < 2; h++) {
                        __m256i bits = _mm256_setzero_si256();
                        for (int j = h; j < BLOCK_LANES; j += 2) /* register j's at bits 2 · (j / 2) */
                            bits = _mm256_or_si256(bits, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q[j], 4), two),
                                                                           2 * (j / 2)));
                        _mm256_store_si256((__m256i *)(out + g * gb) + BLOCK_LANES / 2 + h, bits);
                    }
                    const block_q6_K *b = (const block_q6_K *)wg;
                    memcpy(side, &b->d, sizeof b->d);
                    memcpy(side + sizeof b->d, b->scales, sizeof b->scales);
                    continue;
                }
                const block_q4_K *b = (const block_q4_K *)wg;
                int32_t sc[BLOCK_LANES], m[BLOCK_LANES];
                ord_q4_K_scales(b->scales, sc, m);
                memcpy(side, &b->d, sizeof b->d);
                memcpy(side + sizeof b->d, &b->dmin, sizeof b->dmin);
                for (int k = 0; k < BLOCK_LANES; k++) {
                    side[2 * sizeof(uint16_t) + k] = (uint8_t)sc[k];
                    side[2 * sizeof(uint16_t) + BLOCK_LANES + k] = (uint8_t)m[k];
                }
                continue;
            }
            if (type == GGML_TYPE_Q4_0) { /* dword k of register j: dword j of block k (width blocks a register) */
                uint8_t *at = out + g * gb;
                for (int j = 0; j < BLOCK_LANES / 2; j++)
                    for (int k = 0; k < t; k++)
                        memcpy(at + ((size_t)j * width + k) * 4, ((const block_q4_0 *)wg)[k].qs + 4 * j, 4);
            } else {
                __m256i q[BLOCK_LANES];
                group_regs(type, wg, t, q);
                for (int j = 0; j < width; j++) _mm256_store_si256((__m256i *)(out + g * gb) + j, q[j]);
            }
            for (int k = 0; k < t; k++) {
                const uint16_t d = block_scale(type, wg, (size_t)k);
                memcpy(side + k * sizeof d, &d, sizeof d);
            }
        }
    }
}

size_t VARIANT(panel_row_bytes)(size_t n) { return groups_of(n / QK) * sizeof(xgroup); }

void VARIANT(panel_rows)(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp) {
    const size_t nb = n / QK, ng = groups_of(nb);
    prep_panel_rows(xq + (size_t)r0 * nb, nb, ng, r1 - r0, (xgroup *)xp + (size_t)r0 * ng);
}

void VARIANT(matmul)(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                 const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    if (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || is_kquant(type)) {
        matmul_blocks(type, packed, w, w_row_bytes, n_out, xq, xp, n_rows, n / QK, y, ldy);
        return;
    }
    const bool q8 = kern_wants_q8(type);
    for (uint32_t o = 0; o < n_out; o++)
        for (uint32_t r = 0; r < n_rows; r++)
            y[r * ldy + o] = VARIANT(dot)(type, (const uint8_t *)w + o * w_row_bytes, q8 ? NULL : xf + r * n,
                                      q8 ? xq + r * (n / QK) : NULL, n);
}
