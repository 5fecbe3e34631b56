/* ref.h — the reference kernels: portable C that defines every bit (matmul.h, attn.h and quant.h document the
 * orders).
 *
 * The reference implements every entry of the kernel table (table.h) and every type's row of traits.h, in files named
 * by operation: convert.c (f16 rows, activation quantization), dequantize.c, quantize.c and dot.c (each weight type's
 * three functions), matmul.c, attn.c and table.c. A variant folder (avx2/, avx512/, amx/) names its files the same
 * where it implements the same entries, its functions prefixed with its name.
 */
#ifndef FKV_KERNELS_REF_H
#define FKV_KERNELS_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table.h"

/* convert.c */
void ref_f32_to_f16_row(const float *src, uint16_t *dst, size_t n);
void ref_row_q8(const float *x, block_q8_act *dst, size_t n);

/* dequantize.c, quantize.c and dot.c: each type's row of traits.h (n elements, a multiple of its block) */
#define REF_TYPE(t)                                                                                                \
    void ref_dequantize_##t(const void *src, float *dst, size_t n);                                              \
    void ref_quantize_##t(const float *src, void *dst, size_t n);                                                \
    float ref_dot_w_##t(const void *w, const float *xf, const block_q8_act *xq, size_t n);
REF_TYPE(f32)
REF_TYPE(f16)
REF_TYPE(bf16)
REF_TYPE(q8_0)
REF_TYPE(q4_0)
REF_TYPE(q4_1)
REF_TYPE(q5_0)
REF_TYPE(q5_1)
REF_TYPE(iq4_nl)
REF_TYPE(mxfp4)
REF_TYPE(q2_K)
REF_TYPE(q3_K)
REF_TYPE(q4_K)
REF_TYPE(q5_K)
REF_TYPE(q6_K)
REF_TYPE(iq4_xs)
#undef REF_TYPE

/* dot.c */
float ref_dot_f32(const float *a, const float *b, size_t n);
float ref_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n);

/* matmul.c */
void ref_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy);

/* attn.c */
void ref_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                        size_t out_stride);
void ref_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                        size_t out_stride);
void ref_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const uint16_t *rows,
                       size_t stride, size_t n_rows, size_t n);
void ref_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                       size_t stride, size_t n_rows, size_t n);
void ref_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q, size_t n,
                      float *out, size_t out_stride);
void ref_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                      const uint8_t *vt, size_t n_keys, size_t n);
void ref_exp(float *x, size_t n);
float ref_scale_max(float *s, size_t n, float scale);
void ref_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum);
void ref_attend_lanes_q(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                        struct kern_lane_block *blocks, size_t n_blocks);

/* The reference's table: every entry, the definition of the bits. */
const kern_ops *kern_ref_table(void);

#endif
