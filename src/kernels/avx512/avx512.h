/* avx512.h — the AVX-512 variant (AVX-512 F/DQ/BW/VL with VNNI): the table entries it implements itself (table.h's
 * signatures). Every one returns the reference's bytes (quant.h); the rest of its row are the avx2 variant's. */
#ifndef FKV_KERNELS_AVX512_H
#define FKV_KERNELS_AVX512_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "table.h"

/* attn.c */
void avx512_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                           size_t out_stride);
void avx512_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                           size_t out_stride);
void avx512_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                          const uint16_t *rows, size_t stride, size_t n_rows, size_t n);
void avx512_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                          size_t stride, size_t n_rows, size_t n);
void avx512_exp(float *x, size_t n);
float avx512_scale_max(float *s, size_t n, float scale);
void avx512_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum);

/* convert.c */
void avx512_f32_to_f16_row(const float *src, uint16_t *dst, size_t n);
void avx512_f16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void avx512_row_q8(const float *x, block_q8_act *dst, size_t n);
float avx512_dot_f32(const float *a, const float *b, size_t n);
/* The dot of an F32, F16 or BF16 weight row (any other type is taken as F32) with an f32 row: quant_dot's order. */
float avx512_dot_widened(ggml_type type, const void *w, const float *xf, size_t n);

#endif
