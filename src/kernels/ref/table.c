/* ref/table.c — the reference's row of the kernel table: packs nothing, prepares nothing. */
#include "ref.h"

static bool packs_nothing(ggml_type type, size_t n) {
    (void)type, (void)n;
    return false;
}

static size_t no_bytes(size_t n) {
    (void)n;
    return 0;
}

static size_t no_packed_bytes(ggml_type type, size_t n) {
    (void)type, (void)n;
    return 0;
}

static void no_pack(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n, void *dst) {
    (void)type, (void)w, (void)w_row_bytes, (void)r0, (void)r1, (void)n, (void)dst;
}

static void no_panels(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp) {
    (void)xq, (void)n, (void)r0, (void)r1, (void)xp;
}

static const kern_ops ref_ops = {
    .name = "ref",
    .f32_to_f16_row = ref_f32_to_f16_row,
    .f32_to_q8_0_row = ref_quantize_q8_0,
    .row_q8 = ref_row_q8,
    .dot_f32 = ref_dot_f32,
    .dot = ref_dot,
    .matmul = ref_matmul,
    .packs = packs_nothing,
    .packed_row_bytes = no_packed_bytes,
    .pack_rows = no_pack,
    .panel_row_bytes = no_bytes,
    .panel_rows = no_panels,
    .score_tile_f16 = ref_score_tile_f16,
    .score_tile_f32 = ref_score_tile_f32,
    .axpy_rows_f16 = ref_axpy_rows_f16,
    .axpy_rows_f32 = ref_axpy_rows_f32,
    .score_tile_q = ref_score_tile_q,
    .weigh_tile_q = ref_weigh_tile_q,
    .exp = ref_exp,
    .scale_max = ref_scale_max,
    .exp_sum_rows = ref_exp_sum_rows,
    .attend_lanes_q = ref_attend_lanes_q,
};

const kern_ops *kern_ref_table(void) { return &ref_ops; }
