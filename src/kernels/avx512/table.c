/* avx512/table.c — the AVX-512 variant's row of the kernel table. */
#include "avx512.h"

static const kern_ops avx512_ops = {
    .name = "avx512",
    .f32_to_f16_row = avx512_f32_to_f16_row,
    .f32_to_q8_0_row = avx512_f32_to_q8_0_row,
    .row_q8 = avx512_row_q8,
    .dot_f32 = avx512_dot_f32,
    .dot = avx512_dot,
    .matmul = avx512_matmul,
    .packs = avx512_packs,
    .packed_row_bytes = avx512_packed_row_bytes,
    .pack_rows = avx512_pack_rows,
    .panel_row_bytes = avx512_panel_row_bytes,
    .panel_rows = avx512_panel_rows,
    .score_tile_f16 = avx512_score_tile_f16,
    .score_tile_f32 = avx512_score_tile_f32,
    .axpy_rows_f16 = avx512_axpy_rows_f16,
    .axpy_rows_f32 = avx512_axpy_rows_f32,
    .score_tile_q = avx512_score_tile_q,
    .weigh_tile_q = avx512_weigh_tile_q,
    .attend_lanes_q = avx512_attend_lanes_q,
    .exp = avx512_exp,
    .scale_max = avx512_scale_max,
    .exp_sum_rows = avx512_exp_sum_rows,
};

const kern_ops *kern_avx512_table(void) { return &avx512_ops; }
