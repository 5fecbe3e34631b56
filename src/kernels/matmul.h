/* matmul.h — dot products and matrix products: a weight row of any type with an activation row, and many of both.
 *
 * WHY: every matrix product in the model reduces to dot products of one activation row with one weight
 * row. flatkv's central promise (docs/design.md §1) is that a row's bits depend only on the tokens at and
 * before it, so these dot products must give the same bits whatever the caller batches around them.
 *
 * INVARIANT (row invariance by construction): every function here, in attn.h, quant.h and convert.h works on ONE
 * row (or one block run) and its result depends only on its inputs — never on how many rows the caller processes,
 * which thread runs it, alignment, or which CPU. Each reduction has ONE fixed order, documented in these headers and
 * defined by the portable reference kernels (ref/); every variant (avx2/, avx512/, amx/: table.h, chosen at start-up
 * by dispatch.h) implements that same order, so they return identical bits. Tests compare every variant the CPU runs
 * with the reference on random inputs of awkward sizes. One exception, outside any real computation: where two NaNs
 * of different payloads meet in one addition or multiply-add, which payload survives is not pinned (compilers may
 * swap a commutative operation's operands); a NaN stays a NaN everywhere.
 *
 * The fixed orders of the dots (the weight blocks' layouts: types.h; the activation row's quantization: quant.h):
 * - f32 dot (kern_dot_f32, and the F16/BF16 weight dots, which widen each element to f32 exactly):
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
 *   Q5_0, IQ4_NL, MXFP4: s_b = Σ w_q[i] · x_q[i] with w_q = q - 16 (Q5_0), the non-linear value (IQ4_NL) or the
 *     doubled E2M1 value (MXFP4, |w_q| <= 12), and lane b % 8 = fmaf(d_w * d_x[b], (float)s_b, lane), as Q4_0; MXFP4's
 *     d_w is 2^(e - 128) (types.h), exact, so d_w * d_x[b] rounds only where it leaves the normal range.
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
 *
 * Thread-safety: pure functions.
 */
#ifndef FKV_KERNELS_MATMUL_H
#define FKV_KERNELS_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* f32 · f32, any n. */
float kern_dot_f32(const float *a, const float *b, size_t n);

/* Weight row of `type` · activation row. For F32/F16/BF16 weights x is f32 (`xf`, n floats); for
 * the quantized types x is the Q8_0-quantized row (`xq`, n/QK blocks). The unused one may be NULL. */
float kern_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n);

/* y[r*ldy + o] = kern_dot(type, w + o*w_row_bytes, xf + r*n, xq + r*(n/QK), n) for r < n_rows, o < n_out,
 * bit for bit (xq: n_rows rows of n/QK blocks). Computed in tiles of several rows × several weight rows, so
 * each weight block loaded serves several activation rows while every output keeps its own fixed-order
 * lanes; with many rows each tile of weight rows is rearranged once per call into a register layout ("panels")
 * and then serves them all, and so are the activation rows: xp holds them so rearranged by kern_panel_rows, or
 * is NULL and kern_matmul rearranges them itself (packed weights take them so at any row count). packed: the rows of w
 * are packed rows (kern_pack_rows, w_row_bytes = kern_packed_row_bytes(n)), with the same results. */
void kern_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                 const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy);

/* Weights packed once, at load, into the kernels' register layout: no call rearranges them again, and a
 * decode step's row products need no horizontal sums per block nor a gather of scattered scales (the
 * natural Q8_0 block keeps its scale between its quants). Q8_0, Q4_0, Q4_K and Q6_K, rows of up to 69 groups of 8 blocks
 * (n <= 17664), in variants that pack: kern_packs says when. The same bytes as the natural rows, to a
 * 32-byte pad per row (the layout is the variant's, per type). kern_pack_rows packs rows [r0, r1) of w (rows w_row_bytes apart) into dst, row r
 * at dst + r · kern_packed_row_bytes(n); dst is aligned to 32 bytes. */
bool kern_packs(ggml_type type, size_t n);
size_t kern_packed_row_bytes(ggml_type type, size_t n);
void kern_pack_rows(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n, void *dst);

/* The activation side of panels, made once for all the products of the same rows (q, k and v; every thread's
 * share of them) instead of once per kern_matmul call; the same for every weight type. kern_panel_rows
 * rearranges rows [r0, r1) of xq (rows of n/QK blocks) into xp, row r at xp + r · kern_panel_row_bytes(n);
 * xp is aligned to 32 bytes. kern_panel_row_bytes is 0 when the variant has no panels (the reference). */
size_t kern_panel_row_bytes(size_t n);
void kern_panel_rows(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp);

#endif
