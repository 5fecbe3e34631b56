/* avx2/matmul.c — the AVX2 and AVX-512 variants' matrix products: which path a call takes. Quantized weights of the
 * types the tiles take (Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K, Q6_K) go, by how many activation rows they meet and how the weights lie, to
 * panels rearranged into a register layout for many rows (prefill: panels.c, panel_tiles.c), to direct register tiles
 * over rows packed at load for few (decode: packed.c), or over natural rows (tiles.c); every other type takes one dot
 * per output (dot.c).
 *
 * Every path keeps the reference's lanes (matmul.h, ref/dot.c): block b of a row goes to lane b % 8 through the same
 * multiply and fused multiply-add, integer block sums are exact in any order, so no path, tile shape, row count or
 * packing changes a bit. Compiled with -ffp-contract=off.
 *
 * One source, two variants: each of these files is compiled here with the AVX2 flags (functions avx2_*), and included
 * by its twin in avx512/, which compiles it with the AVX-512 flags and names its functions avx512_* (VARIANT). There
 * the integer dot products are VNNI's vpdpbusd (u8 x s8, four products summed into each int32 lane, no saturation)
 * instead of maddubs/madd/add sequences, Q8_0 and Q4_0 quants are stored 128 above their values in the panel layout,
 * and Q8_0's in the packed one (the variant's own bytes: table.h), and the panel tiles take two weight rows per 512-bit
 * register. The loop nests and every output's float steps are the same; where the code differs it says so (MM_VNNI).
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "dispatch.h"
#include "layout.h"
#include "traits.h"

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

/* IQ4_NL and MXFP4 have no panels: their direct tiles serve any number of rows (the amx variant takes 16 and more). */
static bool panel_fits(ggml_type type, bool packed, uint32_t n_rows, size_t ng) {
    const uint32_t from = packed ? packed_panel_min_rows(type) : PANEL_MIN_ROWS;
    return !is_table_type(type) && n_rows >= from && ng <= PANEL_MAX_GROUPS;
}

/* Every type the tiles take: panels for many rows (packed rows from packed_panel_min_rows), else direct tiles (packed
 * rows, natural Q8_0, Q4_0, IQ4_NL and MXFP4) or one output at a time (natural K-quants). */
static void matmul_blocks(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                          const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y, size_t ldy) {
    if (panel_fits(type, packed, n_rows, groups_of(nb)))
        VARIANT(matmul_panels)(type, packed, w, w_row_bytes, n_out, xq, xp, n_rows, nb, y, ldy);
    else if (packed)
        VARIANT(matmul_packed)(type, w, w_row_bytes, n_out, xq, xp, n_rows, nb, y, ldy);
    else
        VARIANT(matmul_tiles)(type, w, w_row_bytes, n_out, xq, n_rows, nb, y, ldy);
}

void VARIANT(matmul)(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                 const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    if (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || is_table_type(type) || is_kquant(type)) {
        matmul_blocks(type, packed, w, w_row_bytes, n_out, xq, xp, n_rows, n / QK, y, ldy);
        return;
    }
    const bool q8 = kern_wants_q8(type);
    for (uint32_t o = 0; o < n_out; o++)
        for (uint32_t r = 0; r < n_rows; r++)
            y[r * ldy + o] = VARIANT(dot)(type, (const uint8_t *)w + o * w_row_bytes, q8 ? NULL : xf + r * n,
                                      q8 ? xq + r * (n / QK) : NULL, n);
}
