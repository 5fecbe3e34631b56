/* attn.c — attention's kernels of attn.h: each call goes to the active variant's table (dispatch.h). */
#include "attn.h"

#include "dispatch.h"

void kern_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride) {
    kern_active()->score_tile_f16(kt, q, q_stride, n_q, n, out, out_stride);
}

void kern_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride) {
    kern_active()->score_tile_f32(kt, q, q_stride, n_q, n, out, out_stride);
}

void kern_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const uint16_t *rows,
                        size_t stride, size_t n_rows, size_t n) {
    kern_active()->axpy_rows_f16(y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void kern_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                        size_t stride, size_t n_rows, size_t n) {
    kern_active()->axpy_rows_f32(y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void kern_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q,
                       size_t n, float *out, size_t out_stride) {
    kern_active()->score_tile_q(type, kt, q, q_stride, n_q, n, out, out_stride);
}

void kern_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                       const uint8_t *vt, size_t n_keys, size_t n) {
    kern_active()->weigh_tile_q(type, y, y_stride, a, a_stride, n_y, vt, n_keys, n);
}

void kern_exp(float *x, size_t n) { kern_active()->exp(x, n); }

float kern_scale_max(float *s, size_t n, float scale) { return kern_active()->scale_max(s, n, scale); }

void kern_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum) {
    kern_active()->exp_sum_rows(s, stride, n, m, n_rows, sum);
}

void kern_lanes_queries(const block_q8_act *q, size_t q_stride, size_t n_q, size_t n, uint8_t *qu, float *dq) {
    for (size_t b = 0; b < n / QK; b++)
        for (size_t r = 0; r < KERN_LANES; r++) {
            dq[b * KERN_LANES + r] = r < n_q ? q[r * q_stride + b].d : 0.0f;
            for (size_t i = 0; i < QK; i++)
                qu[kern_lanes_at(b, i, r)] = (uint8_t)((r < n_q ? q[r * q_stride + b].qs[i] : 0) + 128);
        }
}

void kern_attend_lanes_q(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                         kern_lane_block *blocks, size_t n_blocks) {
    kern_active()->attend_lanes_q(type, kt, vt, n, scale, blocks, n_blocks);
}

bool kern_attend_lanes_available(void) { return kern_active()->attend_lanes_q != NULL; }
