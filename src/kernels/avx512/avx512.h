/* avx512.h — the AVX-512 variant (AVX-512 F/DQ/BW/VL with VNNI): the table entries it implements itself (table.h's
 * signatures; every entry is its own). Every one returns the reference's bytes (matmul.h's INVARIANT). */
#ifndef FKV_KERNELS_AVX512_H
#define FKV_KERNELS_AVX512_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table.h"

/* attn.c */
void avx512_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q,
                         size_t n, float *out, size_t out_stride);
void avx512_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                         const uint8_t *vt, size_t n_keys, size_t n);
void avx512_attend_lanes_q(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                           struct kern_lane_block *blocks, size_t n_blocks);
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
void avx512_f32_to_q8_0_row(const float *x, void *dst, size_t n);
void avx512_row_q8(const float *x, block_q8_act *dst, size_t n);

/* dot.c (its own F32/F16/BF16 dots, then avx2/dot.c compiled with VNNI) */
float avx512_dot_f32(const float *a, const float *b, size_t n);
/* The dot of an F32, F16 or BF16 weight row (any other type is taken as F32) with an f32 row: kern_dot's order. */
float avx512_dot_widened(ggml_type type, const void *w, const float *xf, size_t n);
float avx512_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n);

/* matmul.c (avx2/matmul.c compiled with VNNI, and so are its paths: tiles.c, packed.c, panels.c, panel_tiles.c) */
void avx512_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                   const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy);

/* packed.c */
bool avx512_packs(ggml_type type, size_t n);
size_t avx512_packed_row_bytes(ggml_type type, size_t n);
void avx512_pack_rows(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n, void *dst);
/* Where a packed row of n elements (avx512_pack_rows; the layout is avx2/layout.h's packed_scales_at) keeps its parts,
 * for the AMX variant, which reads the same rows: group g's quants at g · group_bytes, its side data at scales_at +
 * g · side_bytes.
 * - Q8_0: 8 registers of 32 bytes (register j: quants 4j..4j+3 of the group's blocks, block k's in bytes 4k..4k+3,
 *   each stored as its value + 128; a last group of at most 4 blocks in the half layout, 4 registers); side: 8 f16
 *   scales.
 * - Q4_0: 4 registers of 32 bytes (dword k of register j: dword j of block k's quant bytes; a last group of at most 4
 *   blocks: 4 of 16 bytes); side: 8 f16 scales.
 * - Q4_K (a group is a super-block): 4 registers of 32 bytes, whose low nibbles are quants 4j..4j+3 of sub-block k in
 *   dword k of register j and high nibbles those of register j + 4; side: d, dmin (f16), 8 scales, 8 mins (bytes).
 * - Q6_K (a super-block per group): the low 4 bits of its 8 registers as Q4_K's nibbles, then 2 registers of 32 bytes
 *   of their high 2 bits (register j's at bits 2 · (j / 2) of register j % 2); side: d (f16), the 16 scales. */
typedef struct {
    size_t group_bytes, scales_at, side_bytes;
} avx512_packed_layout;
avx512_packed_layout avx512_packed_layout_of(ggml_type type, size_t n);

/* panels.c */
size_t avx512_panel_row_bytes(size_t n);
void avx512_panel_rows(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp);

/* The AVX-512 variant's table. */
const kern_ops *kern_avx512_table(void);

#endif
