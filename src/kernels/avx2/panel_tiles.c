/* avx2/panel_tiles.c — the register tiles of the AVX2 and AVX-512 variants' panels (panels.c): up to 4 prepared
 * activation rows against a panel's weight rows, group after group. AVX2: 4 rows × 2 weight rows, the integer sums in
 * assembly (the registers they need are all 16); VNNI (avx512/panel_tiles.c, this source compiled again): the two
 * weight rows of a panel side by side in one zmm, up to two panels a tile.
 *
 * Every output keeps the reference's lanes (matmul.h): each half of a VNNI register is the AVX2 tile's vector for its
 * weight row, through the same operations in the same order, so neither tile shape nor width changes a bit.
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "layout.h"

#define PF_DIST 2        /* panels ahead that packed rows read in place are fetched (fetch_ahead) */

/* Packed Q8_0 rows read in place: row c's registers and scales of group g. */
static inline const __m256i *inplace_regs(const wpanel *wp, size_t g, int c) {
    return (const __m256i *)(wp->rows + c * wp->row_bytes + g * packed_group_bytes(GGML_TYPE_Q8_0));
}

static inline __m256 inplace_scales(const wpanel *wp, size_t g, int c) {
    return packed_scales(GGML_TYPE_Q8_0, wp->rows + c * wp->row_bytes, wp->scales_at, g);
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
                __m512 f; /* block k's exact s_b (matmul.h) in f32, for Q4_K sc · s_b: each below 2^24, so exact */
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
                 * they are s_b of matmul.h (below 2^24, so its conversion is exact) */
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
void VARIANT(panel_tiles)(ggml_type type, bool packed, const wpanel *wp, size_t ng, bool half_last, const xgroup *xp,
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
