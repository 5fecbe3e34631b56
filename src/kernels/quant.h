/* quant.h — the kernel API: conversion, (de)quantization, dot products, matrix products and attention steps.
 *
 * WHY: every matrix product in the model reduces to dot products of one activation row with one weight
 * row. flatkv's central promise (docs/design.md §1) is that a row's bits depend only on the tokens at and
 * before it, so these dot products must give the same bits whatever the caller batches around them.
 *
 * INVARIANT (row invariance by construction): every function here works on ONE row (or one block run)
 * and its result depends only on its inputs — never on how many rows the caller processes, which thread
 * runs it, alignment, or which CPU. Each reduction has ONE fixed order, documented below and defined by the
 * portable reference kernels (ref/); every variant (avx2/, avx512/, amx/: table.h, chosen at start-up by
 * dispatch.h) implements that same order, so they return identical bits. Tests compare every variant the CPU
 * runs with the reference on random inputs of awkward sizes. One exception, outside any real computation: where two
 * NaNs of different payloads meet in one addition or multiply-add, which payload survives is not pinned (compilers
 * may swap a commutative operation's operands); a NaN stays a NaN everywhere.
 *
 * The fixed orders:
 * - f32 dot (quant_dot_f32, and the F16/BF16 weight dots, which widen each element to f32 exactly):
 *   32 lanes; element i is accumulated into lane i % 32 with a fused multiply-add (fmaf), lanes start
 *   at +0.0f. Lanes combine as: v[j] = lane[j] + lane[8+j] + lane[16+j] + lane[24+j] evaluated as
 *   ((lane[j] + lane[8+j]) + (lane[16+j] + lane[24+j])) for j in 0..7, then
 *   ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)).
 *   (This is what four __m256 accumulators and a pairwise horizontal sum give.)
 * - Q8_0 / Q4_0 weight dot with a Q8_0-quantized activation row: per 32-element block b, the integer
 *   sum s_b = Σ w_q[i] · x_q[i] is exact (any order). Blocks accumulate in 8 lanes: lane b % 8 gets
 *   fmaf(d_w[b] * d_x[b], (float)s_b, lane), lanes start at +0.0f, then combine
 *   ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
 * - Q4_K / Q6_K weight dot with a Q8_0-quantized activation row: a 256-element super-block spans 8
 *   activation blocks, and super-block s, sub-block k (elements 32k..32k+31) meets activation block
 *   b = 8s + k, which goes to lane b % 8 = k, lanes starting at +0.0f and combining as for Q8_0.
 *   Q4_K: with the exact integer sums s_b = Σ q[i] · x_q[i] (q in 0..15) and t_b = Σ x_q[i], and the
 *   sub-block's 6-bit scale sc and min m: dm = -dmin * (float)m, then
 *   lane k = fmaf(d_x[b], fmaf(d, (float)(sc * s_b), dm * (float)t_b), lane) — the weight side's terms meet
 *   first, in one fused step, so a product of many rows scales each block once.
 *   Q6_K: s_b = sc[2k] · Σ_{i<16} (q[i]-32) · x_q[i] + sc[2k+1] · Σ_{i>=16} (q[i]-32) · x_q[i], exact, and
 *   lane k = fmaf(d * d_x[b], (float)s_b, lane). Every integer here stays below 2^24, so its conversion
 *   to float is exact.
 * - ggml's later types, each with a Q8_0-quantized activation row, in the same lanes (32-element blocks: block b in lane
 *   b % 8; super-blocks: sub-block k of super-block s meets activation block b = 8s + k, lane k) and the same combine;
 *   every integer sum below is exact (|s_b| < 2^24: IQ4_XS's largest, 32 · 127 · 127 · 32, is 16516096):
 *   Q5_0, IQ4_NL: s_b = Σ w_q[i] · x_q[i] with w_q = q - 16 (Q5_0) or the non-linear value (IQ4_NL), and
 *     lane b % 8 = fmaf(d_w * d_x[b], (float)s_b, lane), as Q4_0.
 *   Q4_1, Q5_1: s_b = Σ q[i] · x_q[i] (q unsigned), t_b = Σ x_q[i]:
 *     lane b % 8 = fmaf(d_x[b], fmaf(d, (float)s_b, m * (float)t_b), lane) — the weight side first, as Q4_K.
 *   Q5_K: Q4_K's order exactly, with q in 0..31.
 *   Q3_K: Q6_K's order exactly, with the 16 scales sc in -32..31 and q in -4..3.
 *   Q2_K: with the sub-blocks' 4-bit scales sc and mins m (two sub-blocks of 16 per activation block),
 *     s_b = sc[2k] · Σ_{i<16} q[i] · x_q[i] + sc[2k+1] · Σ_{i>=16} q[i] · x_q[i],
 *     t_b = m[2k] · Σ_{i<16} x_q[i] + m[2k+1] · Σ_{i>=16} x_q[i], lane k = fmaf(d_x[b], fmaf(d, (float)s_b,
 *     -dmin * (float)t_b), lane).
 *   IQ4_XS: s_b = ls_k · Σ v[i] · x_q[i] (ls_k the sub-block's scale in -32..31, v the non-linear values),
 *     lane k = fmaf(d * d_x[b], (float)s_b, lane), as Q6_K.
 * - Attention scores (quant_score_tile_*, key j of a key-major tile · query q): one fused multiply-add chain
 *   over the elements, s = fmaf(q[d], k_j[d], s) for d = 0, 1, .., n-1 from s = +0.0f. (Keys are stored key-major,
 *   so eight keys fill a register, each lane is one key's whole chain, and a score needs no lane combine.)
 * - Attention scores of quantized keys (quant_score_tile_q: K rows stored as Q8_0 or Q4_0 blocks, the query head
 *   quantized by quant_row_q8): per 32-element block b, the integer sum s_b = Σ q_q[i] · k_q[i] is exact (any order;
 *   k_q = qs for Q8_0, nibble - 8 for Q4_0), and the key's chain runs over the blocks in order,
 *   s = fmaf(d_q[b] * d_k[b], (float)s_b, s) for b = 0, 1, .., n/32 - 1 from s = +0.0f. d_q · d_k is a product of two
 *   f16 values, exact in f32, and |s_b| <= 32 · 127 · 128 converts exactly, so the chain's fmafs are its only
 *   roundings. (One lane per key again; integer units — VNNI — compute s_b however they like.)
 * - Values of quantized rows (quant_axpy_rows_q): element i of row j is dequantized exactly, v = (float)k_q * d (at
 *   most 8 significant bits times an f16), then accumulated as for f16 rows: y[i] = fmaf(a[j], v, y[i]), j in order.
 * - Activation quantization to Q8_0 (quant_row_q8): per block of 32, amax = max |x|, d = amax / 127,
 *   q = nearbyintf(clamp(x * (127/amax), -127, 127)) (round half to even), d = 0 and q = 0 when amax = 0.
 *   The scale kept is d rounded to f16 (to nearest even; held as the float of that f16), as ggml's block_q8_0
 *   stores it, so a Q8_0 product's per-block factors are ggml's own (bench/refcheck: quantized models' greedy
 *   tokens then agree with llama.cpp's for 15-32 of 32 steps, against 2-9 with the f32 scale); d_w · d_x is then
 *   exact in f32 for the f16 weight scales. Activation quants are therefore in [-127, 127], never -128: the weight dots
 *   rely on it (a sign flip of x must not overflow), and require it of any xq they are given.
 *
 * Weight blocks follow ggml's layouts exactly (they are read straight from GGUF files):
 *   block_q8_0 { f16 d; int8 qs[32]; }            x[i] = d * qs[i]
 *   block_q4_0 { f16 d; uint8 qs[16]; }           x[i] = d * ((qs[i] & 15) - 8),
 *                                                 x[i+16] = d * ((qs[i] >> 4) - 8), i in 0..15
 *   block_q4_K { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; }    256 elements, 8 sub-blocks of 32:
 *     sub-block j has 6-bit scale sc_j and min m_j: for j < 4, sc_j = scales[j] & 63, m_j = scales[j+4] & 63;
 *     for j >= 4, sc_j = (scales[j+4] & 15) | (scales[j-4] >> 6) << 4, m_j = (scales[j+4] >> 4) |
 *     (scales[j] >> 6) << 4. Element 64c + l (l < 32) is the low nibble of qs[32c + l] (sub-block 2c),
 *     element 64c + 32 + l its high nibble (sub-block 2c+1); x = (d * sc_j) * q - dmin * m_j.
 *   block_q6_K { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; }  256 elements, 16 sub-blocks of 16:
 *     in half h (elements 128h..), for l < 32: element +l is ql[64h+l] & 15 with bits 0-1 of qh[32h+l] as
 *     bits 4-5; +32+l: ql[64h+32+l] & 15, qh bits 2-3; +64+l: ql[64h+l] >> 4, qh bits 4-5; +96+l:
 *     ql[64h+32+l] >> 4, qh bits 6-7. x[e] = (d * scales[e / 16]) * (q - 32).
 *   The later ones (ggml-common.h; bench/typecheck checks every one against ggml's dequantization, bit for bit):
 *   block_q4_1 { f16 d; f16 m; uint8 qs[16]; }   q as Q4_0's nibbles, x = q * d + m
 *   block_q5_0 { f16 d; uint8 qh[4]; uint8 qs[16]; }   q = nibble (as Q4_0) | bit e of qh (little endian) << 4,
 *                                                 x[e] = (q - 16) * d
 *   block_q5_1 { f16 d; f16 m; uint8 qh[4]; uint8 qs[16]; }   q as Q5_0's, x = q * d + m
 *   block_iq4_nl { f16 d; uint8 qs[16]; }         nibbles as Q4_0's index v = {-127, -104, -83, -65, -49, -35, -22, -10,
 *                                                 1, 13, 25, 38, 53, 69, 89, 113}; x = d * v[nibble]
 *   block_q2_K { uint8 scales[16]; uint8 qs[64]; f16 d; f16 dmin; }   16 sub-blocks of 16: element 128h + 32j + l is
 *     bits 2j..2j+1 of qs[32h + l]; sub-block e/16's scale is the low nibble of scales[e/16], its min the high one;
 *     x = (d * sc) * q - dmin * m.
 *   block_q3_K { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; f16 d; }   element 128h + 32j + l: bits 2j..2j+1 of
 *     qs[32h + l], less 4 unless bit 4h + j of hmask[l] is set (-4..3); 16 scales of 6 bits: the low nibble of
 *     scales[j] (j < 8) or the high nibble of scales[j-8], bits 2(j/4)..+1 of scales[8 + j%4] on top, less 32;
 *     x = (d * sc) * q.
 *   block_q5_K { f16 d; f16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]; }   Q4_K's scales and nibbles, and
 *     bit 2c (low nibble) or 2c+1 (high nibble) of qh[l] as the fifth bit; x = (d * sc_j) * q - dmin * m_j.
 *   block_iq4_xs { f16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]; }   8 sub-blocks of 32, sub-block j's
 *     scale ls = (nibble j%2 of scales_l[j/2] | bits 2j..2j+1 of scales_h << 4) - 32, its 16 bytes of nibbles as
 *     IQ4_NL's; x = (d * ls) * v[nibble].
 *
 * Thread-safety: pure functions.
 */
#ifndef FKV_QUANT_H
#define FKV_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* Scalar conversions (exact where the format allows: f16/bf16 → f32 is exact; f32 → f16 rounds to
 * nearest even, f32 → bf16 rounds to nearest even, NaN stays NaN). */
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);

/* Row conversions. n is any length for F32/F16/BF16; a multiple of the type's block (traits.h) otherwise. */
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
 * The later types (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K, IQ4_XS) use ggml's reference quantizers
 * (quantize_row_*_ref) operation for operation: the same bytes as ggml's from the same floats (bench/typecheck). */
void quant_quantize_row(ggml_type type, const float *src, void *dst, size_t n);

/* Bytes of n elements of `type` (a type of traits.h; n a multiple of its block): n / block elements · block bytes. */
size_t quant_row_bytes(ggml_type type, size_t n);

/* Activation row → Q8_0 blocks (n a multiple of QK). See the fixed order above. */
void quant_row_q8(const float *x, block_q8_act *dst, size_t n);

/* f32 · f32, any n. */
float quant_dot_f32(const float *a, const float *b, size_t n);

/* Weight row of `type` · activation row. For F32/F16/BF16 weights x is f32 (`xf`, n floats); for
 * the quantized types x is the Q8_0-quantized row (`xq`, n/QK blocks). The unused one may be NULL. */
float quant_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n);

/* y[r*ldy + o] = quant_dot(type, w + o*w_row_bytes, xf + r*n, xq + r*(n/QK), n) for r < n_rows, o < n_out,
 * bit for bit (xq: n_rows rows of n/QK blocks). Computed in tiles of several rows × several weight rows, so
 * each weight block loaded serves several activation rows while every output keeps its own fixed-order
 * lanes; with many rows each tile of weight rows is rearranged once per call into a register layout ("panels")
 * and then serves them all, and so are the activation rows: xp holds them so rearranged by quant_panel_rows, or
 * is NULL and quant_matmul rearranges them itself (packed weights take them so at any row count). packed: the rows of w
 * are packed rows (quant_pack_rows, w_row_bytes = quant_packed_row_bytes(n)), with the same results. */
void quant_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                  const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy);

/* Weights packed once, at load, into the kernels' register layout: no call rearranges them again, and a
 * decode step's row products need no horizontal sums per block nor a gather of scattered scales (the
 * natural Q8_0 block keeps its scale between its quants). Q8_0, Q4_0, Q4_K and Q6_K, rows of up to 69 groups of 8 blocks
 * (n <= 17664), in variants that pack: quant_packs says when. The same bytes as the natural rows, to a
 * 32-byte pad per row (the layout is the variant's, per type). quant_pack_rows packs rows [r0, r1) of w (rows w_row_bytes apart) into dst, row r
 * at dst + r · quant_packed_row_bytes(n); dst is aligned to 32 bytes. */
bool quant_packs(ggml_type type, size_t n);
size_t quant_packed_row_bytes(ggml_type type, size_t n);
void quant_pack_rows(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n, void *dst);

/* The activation side of panels, made once for all the products of the same rows (q, k and v; every thread's
 * share of them) instead of once per quant_matmul call; the same for every weight type. quant_panel_rows
 * rearranges rows [r0, r1) of xq (rows of n/QK blocks) into xp, row r at xp + r · quant_panel_row_bytes(n);
 * xp is aligned to 32 bytes. quant_panel_row_bytes is 0 when the variant has no panels (the reference). */
size_t quant_panel_row_bytes(size_t n);
void quant_panel_rows(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp);


/* Attention over a tile of QUANT_KEY_TILE keys for a block of queries at once; query r's vector is at q + r·q_stride,
 * its scores at out + r·out_stride, its weights at a + r·a_stride and its output at y + r·y_stride.
 * quant_score_tile_*: kt holds the tile key-major, element d of key j at kt[d·QUANT_KEY_TILE + j] (d < n); out[j] =
 * the score of key j with q, in the attention order (above), for every j < QUANT_KEY_TILE — slots the caller never
 * filled give values it must ignore. quant_axpy_rows_*: V rows `stride` elements apart; y[i] = fmaf(a[j], row_j[i], y[i])
 * for j = 0, 1, .. n_rows-1 in turn. Each query gets the bits it would get alone from
 * those steps: only the loop nest differs (a key tile's elements are loaded once for up to six queries, a V row's
 * for up to four, y is held in registers). An f16 tile and its exact f32 widening score alike. */
#define QUANT_KEY_TILE 32
void quant_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                          size_t out_stride);
void quant_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                          size_t out_stride);
void quant_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                         const uint16_t *rows, size_t stride, size_t n_rows, size_t n);
void quant_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                         size_t stride, size_t n_rows, size_t n);

/* x[i] = e^x[i] for i < n, in place: one fixed sequence of IEEE operations (order.h's ord_exp1), so every
 * variant gives the same bits (libm's expf is neither vectorized nor pinned to a sequence). k = nearbyintf(x ·
 * log2 e); r = x - k·ln2 in two fused steps (ln2 split hi + lo); p = Σ r^i/i! for i <= 6 by Horner with
 * fused steps; result p · 2^k (2^k built from its bits). Relative error below 2^-22 (about 2 ulp). NaN
 * comes back quiet; x > 88 gives +inf and x < -87.33654 gives +0 (e^x there is below FLT_MIN: flushed). */
void quant_exp(float *x, size_t n);

/* One tile of attention's online softmax, in two steps with fixed orders (8 lanes: element j in lane j % 8, lanes
 * combined as the quantized dots' lanes), in every variant:
 * quant_scale_max:     s[j] *= scale for j < n, returns the largest s[j] (-inf for n = 0; a NaN is never chosen);
 * quant_exp_sum_rows:  for each of n_rows rows s_r = s + r·stride (stride a multiple of 8, n[r] <= stride):
 *                      s_r[j] = e^(s_r[j] - m[r]) by quant_exp for j < n[r], sum[r] = their sum; the row's other
 *                      elements are left unspecified (the rows' exponentials are taken in one pass). */
float quant_scale_max(float *s, size_t n, float scale);
void quant_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum);

/* A K tile of quantized rows (Q8_0 or Q4_0, 32 keys; kv.h stores them so): for each 32-element block of the rows in
 * turn, a section of 32 × the block's bytes — the 32 keys' f16 scales (key j's at byte 2j), then the block's quant
 * bytes in groups of four, group g holding bytes 4g..4g+3 of key 0, of key 1, .., of key 31 (Q8_0: 8 groups, Q4_0:
 * 4, their bytes as in block_q4_0: low nibbles elements 0..15, high nibbles 16..31). So four quants of 16 keys are
 * one 64-byte load, the operand of one VNNI product against four of the query's. */
#define QUANT_KEY_GROUP 4

/* Scores of the quantized key tile kt (type Q8_0 or Q4_0; kt at the section of the head's first block) for n_q query
 * heads of n elements (a multiple of QK), quantized by quant_row_q8: query r's n / QK blocks at q + r·q_stride, its
 * scores at out + r·out_stride (32 floats). The order above. */
void quant_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q,
                        size_t n, float *out, size_t out_stride);
/* quant_axpy_rows_f16's accumulation from n_rows rows of Q8_0 or Q4_0 blocks (type), as for f16 rows: element i of
 * row j is element i % QK of the block at rows + j·row_stride + (i / QK)·block_stride (bytes; n a multiple of QK) —
 * rows of blocks in a run (block_stride a block's bytes), or a quantized V tile's sections (kv.h). */
void quant_axpy_rows_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                       const uint8_t *rows, size_t row_stride, size_t block_stride, size_t n_rows, size_t n);

/* Row conversion f32 → f16 with round-to-nearest-even (KV storage), identical bits in every variant. */
void quant_f32_to_f16_row(const float *src, uint16_t *dst, size_t n);

/* The active kernel variant's name ("ref", "avx2", "avx512", "amx"; dispatch.h). */
const char *quant_kernels(void);

#endif
