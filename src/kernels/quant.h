/* quant.h — quantization: weight rows to and from ggml's block types, and activation rows to Q8_0 for the integer
 * dot products of matmul.h and attn.h.
 *
 * WHY: weights arrive quantized (GGUF) and are dequantized only where a row is read whole (embeddings); the products
 * instead quantize their activation row once, to Q8_0, and take integer sums block by block. That quantization is
 * part of every quantized product's bits, so its rounding is fixed here as the dots' orders are (matmul.h's INVARIANT).
 *
 * Activation quantization to Q8_0 (quant_row_q8): per block of 32, amax = max |x|, d = amax / 127,
 * q = nearbyintf(clamp(x * (127/amax), -127, 127)) (round half to even), d = 0 and q = 0 when amax = 0.
 * The scale kept is d rounded to f16 (to nearest even; held as the float of that f16), as ggml's block_q8_0
 * stores it, so a Q8_0 product's per-block factors are ggml's own (bench/refcheck: quantized models' greedy
 * tokens then agree with llama.cpp's for 15-32 of 32 steps, against 2-9 with the f32 scale); d_w · d_x is then
 * exact in f32 for the f16 weight scales. Activation quants are therefore in [-127, 127], never -128: the weight dots
 * rely on it (a sign flip of x must not overflow), and require it of any xq they are given.
 *
 * Thread-safety: pure functions.
 */
#ifndef FKV_KERNELS_QUANT_H
#define FKV_KERNELS_QUANT_H

#include <stddef.h>

#include "types.h"

/* Weight rows. n is any length for F32/F16/BF16; a multiple of the type's block (traits.h) otherwise. */
void quant_dequantize_row(ggml_type type, const void *src, float *dst, size_t n);
/* Quantize n floats into a weight row of `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) with ggml's reference
 * rounding for Q8_0 (d = amax/127, q = roundf(x/d)) and Q4_0 (d = signed max / -8, q = min(15, (int)(x/d + 8.5))).
 * The K-quants use a simple per-sub-block min/max scaling, not ggml's search, with roundf throughout:
 * Q4_K: per sub-block lo = min(0, min x), hi = max x; m_j = roundf(-lo / dmin), sc_j the smallest integer
 * with 15 * d * sc_j >= hi + dmin * m_j (at most 63), q = clamp(roundf((x + dmin*m_j) / (d*sc_j)), 0, 15);
 * d and dmin are the f16 values at or just above max(scale)/63 and max(-lo)/63, so no scale clamps. Error
 * per element <= d*sc_j/2 + dmin/2. Q6_K: per sub-block of 16, scale = signed max / -32; d is the f16 at
 * or just above max|scale| / 127, sc_j = ±ceil(|scale| / d) (its sign), q = clamp(roundf(x / (d*sc_j)), -32, 31)
 * + 32. Error per element <= d*|sc_j| (half of it except for values that clamp at the +31 end).
 * The later types (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS) use ggml's reference quantizers
 * (quantize_row_*_ref) operation for operation: the same bytes as ggml's from the same floats (bench/typecheck; MXFP4:
 * tests/data/mxfp4_ggml.bin). */
void quant_quantize_row(ggml_type type, const float *src, void *dst, size_t n);

/* Activation row → Q8_0 blocks (n a multiple of QK). Its rounding above. */
void quant_row_q8(const float *x, block_q8_act *dst, size_t n);

#endif
