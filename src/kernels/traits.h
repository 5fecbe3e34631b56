/* traits.h — one row per element type the kernels compute: its geometry, its activation side, its reference
 * (de)quantization and dot.
 *
 * WHY: the type lists that the loader, the model generator, the products and the kernels each need are one table;
 * adding a type is a row here and its kernels, not an edit in five files (ggml's type_traits is the model).
 *
 * INVARIANT: a type has a row exactly when every kernel variant computes it (the variants fall back to the
 * reference dot for the types they do not tile themselves).
 */
#ifndef FKV_KERNELS_TRAITS_H
#define FKV_KERNELS_TRAITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

typedef struct {
    ggml_type type;
    const char *name;     /* ggml's name: "q8_0" */
    uint32_t block_elems; /* elements per block (1 for F32/F16/BF16) */
    uint32_t block_bytes;
    bool act_q8; /* products take the activation row quantized to Q8_0 (quant_row_q8), else f32 */
    /* the reference: n elements (a multiple of block_elems) of a row */
    void (*dequantize)(const void *src, float *dst, size_t n);
    void (*quantize)(const float *src, void *dst, size_t n);
    float (*dot)(const void *w, const float *xf, const block_q8_act *xq, size_t n);
} kern_traits;

/* The row of type, or NULL when the kernels do not compute it. */
const kern_traits *kern_type_traits(ggml_type type);

/* True when products with weights of type take Q8_0-quantized activations. */
bool kern_wants_q8(ggml_type type);

/* Bytes of n elements of type (n a multiple of its block): n / block elements · block bytes; 0 for a type not here. */
size_t kern_row_bytes(ggml_type type, size_t n);

#endif
