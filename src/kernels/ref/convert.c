/* ref/convert.c — the reference conversions between f32 and f16 rows (convert.h), and activation quantization
 * (quant.h).
 *
 * Plain C: these define the bits. Conversions to and from f16 reproduce F16C exactly, NaNs included (order.h), so
 * that a row converted by a vector instruction and one converted element by element hold the same bytes.
 */
#include "ref.h"

#include "order.h"

void ref_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ord_f32_to_f16(src[i]);
}

/* ---- activation quantization ------------------------------------------------------------------- */

void ref_row_q8(const float *x, block_q8_act *dst, size_t n) {
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        /* "a > b ? a : b" rather than fmaxf: a NaN (quiet or signalling) never wins, as the vector max
         * instructions' second operand does, and no libm behaviour enters */
        float amax = 0.0f;
        for (size_t j = 0; j < QK; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f; /* as ggml-cpu computes it (its x86 quantize_row_q8_0) */
        dst[b].d = ord_f16_to_f32(ord_f32_to_f16(d));
        for (size_t j = 0; j < QK; j++) {
            float v = xb[j] * id;
            v = v > -127.0f ? v : -127.0f;
            v = v < 127.0f ? v : 127.0f;
            dst[b].qs[j] = (int8_t)nearbyintf(v);
        }
    }
}
