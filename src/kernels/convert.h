/* convert.h — conversions between f32 and the 16-bit float formats: scalars, and rows of K/V storage (f16, Q8_0).
 *
 * WHY: f16 and bf16 weights, f16 K/V rows and every f16 scale of a quantized block are read through these; a
 * conversion done by a vector instruction (F16C) and one done element by element must give the same bits, so the
 * scalar ones are defined to be F16C's (order.h), NaNs included.
 *
 * INVARIANT: f16/bf16 → f32 is exact; f32 → f16 and f32 → bf16 round to nearest even, NaN stays NaN; a row gives
 * every element the scalar conversion's bits, in every variant.
 *
 * Thread-safety: pure functions.
 */
#ifndef FKV_KERNELS_CONVERT_H
#define FKV_KERNELS_CONVERT_H

#include <stddef.h>
#include <stdint.h>

float kern_f16_to_f32(uint16_t h);
uint16_t kern_f32_to_f16(float f);
float kern_bf16_to_f32(uint16_t h);
uint16_t kern_f32_to_bf16(float f);

/* dst[i] = kern_f32_to_f16(src[i]) for i < n, by the active variant (K/V storage). */
void kern_f32_to_f16_row(const float *src, uint16_t *dst, size_t n);

/* src's n values (a multiple of QK) as Q8_0 blocks at dst, by the active variant (K/V storage): the bytes of
 * quant_quantize_row (ref_quantize_q8_0, ggml's quantize_row_q8_0: d = amax / 127 stored as f16, q = roundf(x / d);
 * a NaN stores 0). */
void kern_f32_to_q8_0_row(const float *src, void *dst, size_t n);

#endif
