/* avx512/table.c — the AVX-512 variant's row of the kernel table: its own conversions, f32 dots and attention
 * steps; the matrix products are the avx2 variant's until their VNNI loop nests land. */
#include "avx512.h"

#include "avx2/avx2.h"

/* Weight rows of the f32 types take the 512-bit dot; the quantized ones the avx2 variant's. */
static float dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) return avx512_dot_widened(type, w, xf, n);
    return avx2_dot(type, w, xf, xq, n);
}

static const kern_ops avx512_ops = {
    .name = "avx512",
    .f32_to_f16_row = avx512_f32_to_f16_row,
    .f16_to_f32_row = avx512_f16_to_f32_row,
    .row_q8 = avx512_row_q8,
    .dot_f32 = avx512_dot_f32,
    .dot = dot,
    .matmul = avx2_matmul,
    .packs = avx2_packs,
    .packed_row_bytes = avx2_packed_row_bytes,
    .pack_rows = avx2_pack_rows,
    .panel_row_bytes = avx2_panel_row_bytes,
    .panel_rows = avx2_panel_rows,
    .score_tile_f16 = avx512_score_tile_f16,
    .score_tile_f32 = avx512_score_tile_f32,
    .axpy_rows_f16 = avx512_axpy_rows_f16,
    .axpy_rows_f32 = avx512_axpy_rows_f32,
    .exp = avx512_exp,
    .scale_max = avx512_scale_max,
    .exp_sum_rows = avx512_exp_sum_rows,
};

const kern_ops *kern_avx512_table(void) { return &avx512_ops; }
