/* amx/table.c — the AMX variant's row of the kernel table: the avx512 variant's, with the products of many rows of
 * quantized weights (every quantized type but Q2_K) on AMX tiles. Q8_0 weights are packed at load as the avx512
 * variant packs them: decode steps and small batches run its packed tiles unchanged, and the AMX tiles read the
 * packed rows as they read natural ones. */
#include "amx.h"

#include <pthread.h>

#include "avx512/avx512.h"
#include "dispatch.h"

/* Below this many rows a product goes to the avx512 variant's tiles: a tile 16 rows high would be mostly padding. Packed
 * Q8_0, which those tiles read in place, stays there longer (110M Q8_0, a forward of 24 rows: 22.9 ms, on tiles 24.0;
 * of 28 rows: 26.0 and 25.5), and so do the super-block types, whose panels cost more to rearrange: a mixture's experts
 * get few rows each (Qwen3-30B-A3B's shape, Q4_K_M, 4 layers, prefill 512 on 2 threads: 498 tok/s from 16 rows on,
 * 537-552 from 32, 540-552 from 48 or 64; gpt-oss-20b's MXFP4 experts: 59-63 from 16, 58-60 from 32). */
#define AMX_MIN_ROWS 16
#define AMX_MIN_ROWS_Q8 28
#define AMX_MIN_ROWS_K 32

static const kern_ops *avx512(void) { return kern_avx512_table(); }

static bool takes_tiles(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_MXFP4:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K:
    case GGML_TYPE_IQ4_XS: return true;
    default: return false; /* Q2_K: the avx512 variant's dots */
    }
}

static uint32_t min_rows(ggml_type type, bool packed) {
    switch (type) {
    case GGML_TYPE_Q8_0: return packed ? AMX_MIN_ROWS_Q8 : AMX_MIN_ROWS;
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K:
    case GGML_TYPE_IQ4_XS: return AMX_MIN_ROWS_K;
    default: return AMX_MIN_ROWS;
    }
}

static void matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                   const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    if (n_rows >= min_rows(type, packed) && takes_tiles(type)) {
        amx_matmul_rows(type, packed, w, w_row_bytes, n_out, xq, n_rows, n, y, ldy);
        return;
    }
    avx512()->matmul(type, packed, w, w_row_bytes, n_out, xf, xq, xp, n_rows, n, y, ldy);
}

static kern_ops amx_ops;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void fill(void) {
    amx_ops = *avx512();
    amx_ops.name = "amx";
    amx_ops.matmul = matmul;
}

const kern_ops *kern_amx_table(void) {
    pthread_once(&amx_once, fill);
    return &amx_ops;
}
