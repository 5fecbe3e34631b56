/* table.h — the kernel table: one row of function pointers per instruction-set variant, chosen once at start-up.
 *
 * WHY: flatkv's bits are defined once, by the reference kernels (ref/, portable C; matmul.h, attn.h and quant.h
 * document every order). Faster variants (AVX2, AVX-512 with VNNI, AMX) are different loop nests and instructions over
 * the same IEEE operations on the same operands in the same order, so each returns the reference's bytes on every
 * input. A KV block computed on one CPU therefore resumes exactly on any other, and one binary carries every variant:
 * each lives in its own folder, compiled with its own target flags, and is called only through this table after the
 * dispatcher (dispatch.c) has checked that the CPU and the OS allow it.
 *
 * INVARIANT: for every entry and every input, every variant's table->entry(...) gives the bytes of
 * kern_ref_table()->entry(...). Layout-producing entries (pack_rows, panel_rows) are the exception: their
 * bytes are the variant's own, and only the same variant's matmul reads them.
 *
 * Thread-safety: a table never changes once made; kern_select must not run while a model or a forward
 * pass that used the previous variant is alive (weights are packed for the variant that loaded them).
 */
#ifndef FKV_KERNELS_TABLE_H
#define FKV_KERNELS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

struct kern_lane_block; /* attn.h */

typedef struct kern_ops {
    const char *name; /* "ref", "avx2", "avx512", "amx" */

    /* conversions and activation quantization (convert.h, quant.h) */
    void (*f32_to_f16_row)(const float *src, uint16_t *dst, size_t n);
    void (*f32_to_q8_0_row)(const float *src, void *dst, size_t n);
    void (*row_q8)(const float *x, block_q8_act *dst, size_t n);

    /* dot products and matrix products (matmul.h: kern_dot_f32, kern_dot, kern_matmul) */
    float (*dot_f32)(const float *a, const float *b, size_t n);
    float (*dot)(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n);
    void (*matmul)(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                   const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy);

    /* weights packed at load and activation rows prepared once per set of rows (matmul.h); the ref packs nothing
     * and prepares nothing (packs false, panel_row_bytes 0) */
    bool (*packs)(ggml_type type, size_t n);
    size_t (*packed_row_bytes)(ggml_type type, size_t n);
    void (*pack_rows)(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n, void *dst);
    size_t (*panel_row_bytes)(size_t n);
    void (*panel_rows)(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp);

    /* attention over key tiles and its softmax steps (attn.h) */
    void (*score_tile_f16)(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                           size_t out_stride);
    void (*score_tile_f32)(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                           size_t out_stride);
    void (*axpy_rows_f16)(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                          const uint16_t *rows, size_t stride, size_t n_rows, size_t n);
    void (*axpy_rows_f32)(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                          size_t stride, size_t n_rows, size_t n);
    /* the same for K/V rows quantized to Q8_0 or Q4_0 (type): scores from Q8_0 queries, values weighed in integers */
    void (*score_tile_q)(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q,
                         size_t n, float *out, size_t out_stride);
    void (*weigh_tile_q)(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                         const uint8_t *vt, size_t n_keys, size_t n);
    void (*exp)(float *x, size_t n);
    float (*scale_max)(float *s, size_t n, float scale);
    void (*exp_sum_rows)(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum);
    /* a tile's whole softmax step for the blocks of queries in lanes that reach it; NULL where a variant has no fast
     * form of it */
    void (*attend_lanes_q)(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                           struct kern_lane_block *blocks, size_t n_blocks);
} kern_ops;

/* The variants, best last; every x86-64 build holds them all (a build with FKV_SIMD off holds only the ref). */
typedef enum { KERN_REF, KERN_AVX2, KERN_AVX512, KERN_AMX, KERN_COUNT } kern_id;

/* Each variant's table is declared by the variant's own header (ref/ref.h's kern_ref_table, avx2/avx2.h's
 * kern_avx2_table, ...); the dispatcher (dispatch.c) is what includes them all. */

#endif
