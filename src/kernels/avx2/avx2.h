/* avx2.h — the AVX2 variant (AVX2, FMA, F16C): the table entries it implements itself (table.h's signatures). */
#ifndef FKV_KERNELS_AVX2_H
#define FKV_KERNELS_AVX2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table.h"

/* convert.c */
void avx2_f32_to_f16_row(const float *src, uint16_t *dst, size_t n);
void avx2_f32_to_q8_0_row(const float *x, void *dst, size_t n);
void avx2_row_q8(const float *x, block_q8_act *dst, size_t n);

/* dot.c */
float avx2_dot_f32(const float *a, const float *b, size_t n);
float avx2_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n);

/* matmul.c (its paths: tiles.c, packed.c, panels.c, panel_tiles.c; layout.h) */
void avx2_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                 const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy);

/* packed.c */
bool avx2_packs(ggml_type type, size_t n);
size_t avx2_packed_row_bytes(ggml_type type, size_t n);
void avx2_pack_rows(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n, void *dst);

/* panels.c */
size_t avx2_panel_row_bytes(size_t n);
void avx2_panel_rows(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp);

/* attn.c */
void avx2_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q, size_t n,
                       float *out, size_t out_stride);
void avx2_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                       const uint8_t *vt, size_t n_keys, size_t n);
void avx2_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride);
void avx2_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride);
void avx2_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const uint16_t *rows,
                        size_t stride, size_t n_rows, size_t n);
void avx2_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                        size_t stride, size_t n_rows, size_t n);
void avx2_exp(float *x, size_t n);
float avx2_scale_max(float *s, size_t n, float scale);
void avx2_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum);

/* The AVX2 variant's table. */
const kern_ops *kern_avx2_table(void);

#endif
