/* amx.h — the AMX variant: AMX-INT8 tiles for the prefill products of quantized weights, the avx512 variant for the
 * rest (table.h). The dispatcher has asked the kernel for the tile data (arch_prctl) before any call. */
#ifndef FKV_KERNELS_AMX_H
#define FKV_KERNELS_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table.h"

/* matmul.c: y[r*ldy + o] = the reference dot of weight row o (natural GGUF rows of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * IQ4_NL, MXFP4, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS, w_row_bytes apart, 15 · w_row_bytes < 2^31; or, packed, rows of
 * the avx512 variant's packing) and activation row r of xq (n/QK blocks each), for r < n_rows, o < n_out. */
void amx_matmul_rows(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out,
                     const block_q8_act *xq, uint32_t n_rows, size_t n, float *y, size_t ldy);

/* The AMX variant's table (amx/table.c: the AVX-512 variant's, with products of many rows on AMX tiles). */
const kern_ops *kern_amx_table(void);

#endif
