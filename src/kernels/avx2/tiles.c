/* avx2/tiles.c — the AVX2 and AVX-512 variants' products of natural rows (as GGUF files hold them) for few activation
 * rows (decode of weights not packed at load): Q8_0, Q4_0, IQ4_NL and MXFP4 (an expert's rows, read from the file) in
 * direct register tiles of 2 activation rows × 4 weight rows, Q4_K and Q6_K one output at a time over whole
 * super-blocks; and the dot of one such row.
 *
 * Every output keeps the reference's lanes (matmul.h, ref/dot.c): block b of a row goes to lane b % 8 through the
 * same multiply and fused multiply-add, integer block sums are exact in any order, so no tile shape changes a bit.
 * One source, two variants (avx512/tiles.c compiles it with VNNI: sums_u8s8 is one vpdpbusd there).
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "layout.h"

static inline __m256i block_xsums(__m256i xq) { return sums_u8s8(_mm256_setzero_si256(), _mm256_set1_epi8(1), xq); }

/* The offset that a type's quants carry above their values in the sums below, taken back once per block as
 * offset · Σx (shared by every weight row): Q4_0's nibbles are its values + 8, and MXFP4 looks its values up
 * MXFP4_OFFSET above (layout.h), so that both meet the activations as unsigned bytes (no sign step). IQ4_NL's values
 * (-127..113) would not fit a byte so moved, and keep the signed sums. */
static inline int quant_offset(ggml_type type) {
    return type == GGML_TYPE_Q4_0 ? 8 : type == GGML_TYPE_MXFP4 ? MXFP4_OFFSET : 0;
}

/* Element k: the exact integer sum of weight block k against activation block x[k], k < t <= 8, before the offset's
 * correction (quant_offset); 0 for k >= t (a row's last, partial group: nothing past its end is read). */
static inline __m256i group_sums(ggml_type type, const uint8_t *w, const block_q8_act *x, int t) {
    const __m256i zero = _mm256_setzero_si256();
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++) {
        if (k >= t) {
            s[k] = zero;
            continue;
        }
        const __m256i xk = _mm256_loadu_si256((const __m256i *)x[k].qs);
        switch (type) {
        case GGML_TYPE_Q4_0: s[k] = sums_u8s8(zero, block_nibbles_q4_0((const block_q4_0 *)w + k), xk); break;
        case GGML_TYPE_MXFP4:
            s[k] = sums_u8s8(zero, _mm256_shuffle_epi8(mxfp4_table_up(), nibbles32(((const block_mxfp4 *)w)[k].qs)), xk);
            break;
        case GGML_TYPE_IQ4_NL: s[k] = sums_signed(table_block_values(type, w, k), xk); break;
        default: s[k] = block_sums_q8_0(_mm256_loadu_si256((const __m256i *)((const block_q8_0 *)w + k)->qs), xk);
        }
    }
    return hsum8_epi32x8(s);
}

/* Element k: offset · Σx over block k, the correction of quant_offset, shared by every weight row. Blocks as in
 * group_sums. Out of line: the direct tiles take it precomputed, and inlined into them it crowds their loop. */
static __attribute__((noinline)) __m256i group_xcorr(const block_q8_act *x, int t, int offset) {
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++)
        s[k] = k >= t ? _mm256_setzero_si256() : block_xsums(_mm256_loadu_si256((const __m256i *)x[k].qs));
    return _mm256_mullo_epi32(hsum8_epi32x8(s), _mm256_set1_epi32(offset));
}

/* Direct tiles, for few rows (decode): 2 × 4 measured best of 1..4 × 1..4 on the 110M shapes. */
#define TILE_ROWS 2 /* activation rows of a register tile */
#define TILE_COLS 4 /* weight rows of a register tile */

/* One group of blocks of a register tile: acc[r][c] gets, in lane k < t, the fused step of block k of weight
 * row c (rows w_row_bytes apart) against block k of activation row r (rows x_stride blocks apart). The offset's
 * corrections come from xcorr (row r's at xcorr[r * xcorr_stride]) when given. Lanes k >= t (a row's last, partial
 * group) get fmaf(+0, +0, lane), which leaves a lane as it is: a lane is never -0 (it starts at +0, and a rounded sum
 * is -0 only when both terms are). */
static inline __attribute__((always_inline)) void tile_group(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                              const block_q8_act *x, size_t x_stride, int t,
                                                              const __m256i *xcorr, size_t xcorr_stride, int R, int C,
                                                              __m256 acc[TILE_ROWS][TILE_COLS]) {
    __m256 dx[TILE_ROWS];
    __m256i corr[TILE_ROWS] = {0};
    for (int r = 0; r < R; r++) {
        dx[r] = group_xscales(x + r * x_stride, t);
        if (quant_offset(type))
            corr[r] = xcorr ? xcorr[r * xcorr_stride] : group_xcorr(x + r * x_stride, t, quant_offset(type));
    }
    for (int c = 0; c < C; c++) {
        const __m256 dw = group_wscales(type, w + c * w_row_bytes, t);
        for (int r = 0; r < R; r++) {
            __m256i s = group_sums(type, w + c * w_row_bytes, x + r * x_stride, t);
            if (quant_offset(type)) s = _mm256_sub_epi32(s, corr[r]);
            acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[r]), _mm256_cvtepi32_ps(s), acc[r][c]);
        }
    }
}

/* A register tile: y[r*ldy + c] = dot(weight row c, activation row r) for r < R, c < C, each with its
 * own 8-lane accumulator holding exactly the lanes of matmul.h's block order — block b of every output
 * goes to lane b % 8, through the same multiply and fused multiply-add as the reference — so the tile
 * shape changes which loads are shared, never an output's bits. x rows are nb blocks apart; xcorr as in
 * tile_group, a row's groups consecutive. */
static inline __attribute__((always_inline)) void tile_blocks(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                               const block_q8_act *x, size_t nb, const __m256i *xcorr,
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
        const __m256i *xs = xcorr ? xcorr + b / BLOCK_LANES : NULL;
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
        tile_blocks(T, w, w_row_bytes, x, nb, xcorr, R, C, y, ldy);                                           \
        return;
#define TILE_CASES_C(T, C) TILE_CASE(T, 1, C) TILE_CASE(T, 2, C)
#define TILE_CASES(T) TILE_CASES_C(T, 1) TILE_CASES_C(T, 2) TILE_CASES_C(T, 3) TILE_CASES_C(T, 4)

#define TILE_TYPE(T)                                                                                           \
    case T:                                                                                                    \
        switch (R * 8 + C) {                                                                                   \
            TILE_CASES(T)                                                                                      \
        default:                                                                                               \
            return;                                                                                            \
        }

/* One tile with the type, R <= TILE_ROWS and C <= TILE_COLS known at compile time, so acc stays in registers. */
static void tile_dispatch(ggml_type type, const uint8_t *w, size_t w_row_bytes, const block_q8_act *x, size_t nb,
                          const __m256i *xcorr, int R, int C, float *y, size_t ldy) {
    switch (type) {
        TILE_TYPE(GGML_TYPE_Q4_0)
        TILE_TYPE(GGML_TYPE_IQ4_NL)
        TILE_TYPE(GGML_TYPE_MXFP4)
        TILE_TYPE(GGML_TYPE_Q8_0)
    default:
        return;
    }
}

/* K-quants: a super-block is one group of 8 activation blocks, sub-block k in lane k; no tail. */

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

/* Super-block of Q4_K against activation blocks xr[0..8) (natural order) with their side xs: matmul.h's steps on all
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
 * sum an integer below 2^24 (matmul.h), so exact and equal to s_b. */
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

#define XCORR_MAX_GROUPS 32  /* direct tiles precompute the offsets' corrections for rows up to 256 blocks */

float VARIANT(tile_dot)(ggml_type type, const void *w, const block_q8_act *xq, size_t n) {
    switch (type) {
    case GGML_TYPE_Q8_0:
        return dot_blocks(GGML_TYPE_Q8_0, w, xq, n / QK);
    case GGML_TYPE_Q4_0:
        return dot_blocks(GGML_TYPE_Q4_0, w, xq, n / QK);
    case GGML_TYPE_IQ4_NL:
        return dot_blocks(GGML_TYPE_IQ4_NL, w, xq, n / QK);
    case GGML_TYPE_MXFP4:
        return dot_blocks(GGML_TYPE_MXFP4, w, xq, n / QK);
    default:
        return dot_kquant(type, w, xq, NULL, n / QK_K);
    }
}

/* Q8_0, Q4_0, IQ4_NL and MXFP4 in direct tiles, the K-quants one output at a time. */
void VARIANT(matmul_tiles)(ggml_type type, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                           const block_q8_act *xq, uint32_t n_rows, size_t nb, float *y, size_t ldy) {
    /* the offsets' corrections, once per call rather than per tile of weight rows, when they fit on the stack */
    const size_t ng = groups_of(nb);
    __m256i xcorr[(PANEL_MIN_ROWS - 1) * XCORR_MAX_GROUPS];
    const bool pre = quant_offset(type) && n_rows < PANEL_MIN_ROWS && ng <= XCORR_MAX_GROUPS;
    for (uint32_t r = 0; pre && r < n_rows; r++)
        for (size_t g = 0; g < ng; g++) {
            const size_t b = g * BLOCK_LANES;
            xcorr[r * ng + g] =
                group_xcorr(xq + r * nb + b, nb - b < BLOCK_LANES ? (int)(nb - b) : BLOCK_LANES, quant_offset(type));
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
            tile_dispatch(type, w + o * w_row_bytes, w_row_bytes, xq + r * nb, nb, pre ? xcorr + r * ng : NULL, R, C,
                          y + r * ldy + o, ldy);
        }
    }
}
