/* quant.c — the kernel API of quant.h: each call goes to the active variant's table (dispatch.h), the per-type
 * reference operations to their traits row. */
#include "quant.h"

#include <math.h>

#include "dispatch.h"
#include "traits.h"

void quant_dequantize_row(ggml_type type, const void *src, float *dst, size_t n) {
    const kern_traits *t = kern_type_traits(type);
    if (t) {
        t->dequantize(src, dst, n);
        return;
    }
    for (size_t i = 0; i < n; i++) dst[i] = NAN; /* the loader refuses other types by name: a slip shows */
}

void quant_quantize_row(ggml_type type, const float *src, void *dst, size_t n) {
    const kern_traits *t = kern_type_traits(type);
    if (t) t->quantize(src, dst, n); /* else not a type flatkv writes: the caller chose it */
}

size_t quant_row_bytes(ggml_type type, size_t n) {
    const kern_traits *t = kern_type_traits(type);
    return t ? n / t->block_elems * t->block_bytes : 0;
}

void quant_row_q8(const float *x, block_q8_act *dst, size_t n) { kern_active()->row_q8(x, dst, n); }

float quant_dot_f32(const float *a, const float *b, size_t n) { return kern_active()->dot_f32(a, b, n); }

float quant_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    return kern_active()->dot(type, w, xf, xq, n);
}

void quant_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                  const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    kern_active()->matmul(type, packed, w, w_row_bytes, n_out, xf, xq, xp, n_rows, n, y, ldy);
}

bool quant_packs(ggml_type type, size_t n) { return kern_active()->packs(type, n); }

size_t quant_packed_row_bytes(ggml_type type, size_t n) { return kern_active()->packed_row_bytes(type, n); }

void quant_pack_rows(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n,
                     void *dst) {
    kern_active()->pack_rows(type, w, w_row_bytes, r0, r1, n, dst);
}

size_t quant_panel_row_bytes(size_t n) { return kern_active()->panel_row_bytes(n); }

void quant_panel_rows(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp) {
    kern_active()->panel_rows(xq, n, r0, r1, xp);
}

void quant_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                          size_t out_stride) {
    kern_active()->score_tile_f16(kt, q, q_stride, n_q, n, out, out_stride);
}

void quant_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                          size_t out_stride) {
    kern_active()->score_tile_f32(kt, q, q_stride, n_q, n, out, out_stride);
}

void quant_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const uint16_t *rows,
                         size_t stride, size_t n_rows, size_t n) {
    kern_active()->axpy_rows_f16(y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void quant_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                         size_t stride, size_t n_rows, size_t n) {
    kern_active()->axpy_rows_f32(y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void quant_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q,
                        size_t n, float *out, size_t out_stride) {
    kern_active()->score_tile_q(type, kt, q, q_stride, n_q, n, out, out_stride);
}

void quant_axpy_rows_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                       const uint8_t *rows, size_t row_stride, size_t block_stride, size_t n_rows, size_t n) {
    kern_active()->axpy_rows_q(type, y, y_stride, a, a_stride, n_y, rows, row_stride, block_stride, n_rows, n);
}

void quant_exp(float *x, size_t n) { kern_active()->exp(x, n); }

float quant_scale_max(float *s, size_t n, float scale) { return kern_active()->scale_max(s, n, scale); }

void quant_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum) {
    kern_active()->exp_sum_rows(s, stride, n, m, n_rows, sum);
}

void quant_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) { kern_active()->f32_to_f16_row(src, dst, n); }

const char *quant_kernels(void) { return kern_active()->name; }
