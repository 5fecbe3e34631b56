/* avx2/table.c — the AVX2 variant's row of the kernel table. */
#include "avx2.h"

static const kern_ops avx2_ops = {
    .name = "avx2",
    .f32_to_f16_row = avx2_f32_to_f16_row,
    .f32_to_q8_0_row = avx2_f32_to_q8_0_row,
    .row_q8 = avx2_row_q8,
    .dot_f32 = avx2_dot_f32,
    .dot = avx2_dot,
    .matmul = avx2_matmul,
    .packs = avx2_packs,
    .packed_row_bytes = avx2_packed_row_bytes,
    .pack_rows = avx2_pack_rows,
    .panel_row_bytes = avx2_panel_row_bytes,
    .panel_rows = avx2_panel_rows,
    .score_tile_f16 = avx2_score_tile_f16,
    .score_tile_f32 = avx2_score_tile_f32,
    .axpy_rows_f16 = avx2_axpy_rows_f16,
    .axpy_rows_f32 = avx2_axpy_rows_f32,
    .score_tile_q = avx2_score_tile_q,
    .weigh_tile_q = avx2_weigh_tile_q,
    .exp = avx2_exp,
    .scale_max = avx2_scale_max,
    .exp_sum_rows = avx2_exp_sum_rows,
};

const kern_ops *kern_avx2_table(void) { return &avx2_ops; }
