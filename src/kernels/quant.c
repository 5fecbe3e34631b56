/* quant.c — the quantization of quant.h: weight rows by their type's traits row (the reference's), activation rows by
 * the active variant's table (dispatch.h). */
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

void quant_row_q8(const float *x, block_q8_act *dst, size_t n) { kern_active()->row_q8(x, dst, n); }
