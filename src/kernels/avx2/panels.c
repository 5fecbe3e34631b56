/* avx2/panels.c — the AVX2 and AVX-512 variants' products of many activation rows (prefill): weight rows rearranged
 * into panels, the activation rows prepared once for all of them (panel_rows), and the order in which panels meet
 * rows; the register tiles themselves are panel_tiles.c's.
 *
 * The C weight rows of a panel are rearranged once into the interleaved layout of transpose8_epi32 — register j holds
 * quants 4j..4j+3 of 8 blocks, Q4_0 nibbles and K-quant quants as unsigned bytes, scales as f32 — and then serve every
 * activation row; the activation side is rearranged the same way once per call, with its scales and the block sums Σx
 * that offset corrections need. A group of 8 blocks then costs, per (activation row, weight row), one multiply per
 * register and vertical adds, no horizontal reduction, and unsigned quants sum in 16 bits before widening. Integer
 * block sums are exact and each lane gets the reference's float operations, so no tile shape changes a bit. A row whose
 * block count is not a multiple of 8 ends in a group padded on both sides with zero blocks of scale 0: fmaf(+0, +0,
 * lane) leaves a lane as it is, since a lane is never -0 (it starts at +0, and a rounded sum is -0 only when both terms
 * are). When that group holds at most 4 blocks (dim 896: 3 groups and 4 blocks) it takes the half layout
 * (transpose4_epi32_lanes): 4 registers instead of 8.
 *
 * One source, two variants (avx512/panels.c compiles it with VNNI, whose tiles take two panels' rows per zmm).
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "layout.h"

/* Activation side prepared at a time, on the stack, when the caller has not prepared it (kern_panel_rows): 64
 * rows up to dim 5120 at once. A row prepared in several parts makes every panel of weights be packed again per
 * part; with 96 KB, the 0.5B shape's ffn_down (4864) took 6 parts per 64 rows and ran 20% slower. */
#define PANEL_X_BYTES (448 * 1024)

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

/* Group g of weight row c of a panel of C rows into p; packed: the rows are packed Q4_0, Q4_K or Q6_K rows
 * (kern_pack_rows). */
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
                VARIANT(panel_tiles)(type, packed, &wp, ng, half_last, xp + (size_t)r0 * ng, nr, C,
                                     y + (size_t)r0 * ldy + o, ldy);
            }
        }
    }
}

/* With the rows prepared by the caller (xp), all at once; else prepared here, as many whole register tiles of rows
 * at a time as the stack buffer holds. */
void VARIANT(matmul_panels)(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                            const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y,
                            size_t ldy) {
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

size_t VARIANT(panel_row_bytes)(size_t n) { return groups_of(n / QK) * sizeof(xgroup); }

void VARIANT(panel_rows)(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp) {
    const size_t nb = n / QK, ng = groups_of(nb);
    prep_panel_rows(xq + (size_t)r0 * nb, nb, ng, r1 - r0, (xgroup *)xp + (size_t)r0 * ng);
}
