/* attn.h — attention's kernels: a tile of keys scored against a block of queries, values accumulated by their
 * weights, and the online softmax's steps, over K/V rows of f32, f16, or Q8_0 / Q4_0 blocks.
 *
 * WHY: attention is the other reduction of a forward pass; its scores and sums must keep each query's bits whatever
 * other queries, keys or threads share the call, as the dots do (matmul.h's INVARIANT, which holds here too).
 *
 * The fixed orders:
 * - Attention scores (kern_score_tile_*, key j of a key-major tile · query q): one fused multiply-add chain
 *   over the elements, s = fmaf(q[d], k_j[d], s) for d = 0, 1, .., n-1 from s = +0.0f. (Keys are stored key-major,
 *   so eight keys fill a register, each lane is one key's whole chain, and a score needs no lane combine.)
 * - Attention scores of quantized keys (kern_score_tile_q: K rows stored as Q8_0 or Q4_0 blocks, the query head
 *   quantized by quant_row_q8): per 32-element block b, the integer sum s_b = Σ q_q[i] · k_q[i] is exact (any order;
 *   k_q = qs for Q8_0, nibble - 8 for Q4_0), and the key's chain runs over the blocks in order,
 *   s = fmaf(d_q[b] * d_k[b], (float)s_b, s) for b = 0, 1, .., n/32 - 1 from s = +0.0f. d_q · d_k is a product of two
 *   f16 values, exact in f32, and |s_b| <= 32 · 127 · 128 converts exactly, so the chain's fmafs are its only
 *   roundings. (One lane per key again; integer units — VNNI — compute s_b however they like.)
 * - Values of quantized rows (kern_weigh_tile_q: a V tile of Q8_0 or Q4_0 blocks): per query and per 32-element block
 *   of the head, key j's weight a_j times its block's scale d_j, w_j = a_j · d_j (one rounding), for the keys
 *   j < n_keys; W = the largest |w_j|; each w_j quantized against it, w_q[j] = nearbyintf(w_j · (127.0f / W)) in
 *   [-127, 127]; the integer sums S[i] = Σ_j w_q[j] · v_q[j][i] exact (any order: |S| <= 32 · 127 · 128 < 2^24;
 *   v_q = qs for Q8_0, nibble - 8 for Q4_0); then y[i] = fmaf(W / 127.0f, (float)S[i], y[i]), one step per block and
 *   tile. A block whose W is below 2^-120 (127 / W would overflow: its weights vanish) or not finite adds nothing.
 *   (So the values' products run on integer units, a quarter of f32's work; 127 and not 255 so that AVX2's 16-bit
 *   pair sums hold |w_q| · |v_q| twice. The weights' rounding, at most W/254 a key, is of the size of the values'
 *   own, d/2. Weights and scales are finite — exponentials and the scales of stored rows; a NaN is not defined.)
 * - The softmax's tile steps and e^x: below, at kern_exp, kern_scale_max and kern_exp_sum_rows.
 * - The tiles' schedule, windows and sinks (a last softmax step, its exponentials by kern_exp): ops.h's
 *   ops_attention, one code for every variant.
 *
 * Thread-safety: pure functions.
 */
#ifndef FKV_KERNELS_ATTN_H
#define FKV_KERNELS_ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* Attention over a tile of KERN_KEY_TILE keys for a block of queries at once; query r's vector is at q + r·q_stride,
 * its scores at out + r·out_stride, its weights at a + r·a_stride and its output at y + r·y_stride.
 * kern_score_tile_*: kt holds the tile key-major, element d of key j at kt[d·KERN_KEY_TILE + j] (d < n); out[j] =
 * the score of key j with q, in the attention order (above), for every j < KERN_KEY_TILE — slots the caller never
 * filled give values it must ignore. kern_axpy_rows_*: V rows `stride` elements apart; y[i] = fmaf(a[j], row_j[i], y[i])
 * for j = 0, 1, .. n_rows-1 in turn. Each query gets the bits it would get alone from
 * those steps: only the loop nest differs (a key tile's elements are loaded once for up to six queries, a V row's
 * for up to four, y is held in registers). An f16 tile and its exact f32 widening score alike. */
#define KERN_KEY_TILE 32
/* The widest head the kernels take (real models: 64 to 256). */
#define KERN_MAX_HEAD_DIM 256
void kern_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride);
void kern_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride);
void kern_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                        const uint16_t *rows, size_t stride, size_t n_rows, size_t n);
void kern_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                        size_t stride, size_t n_rows, size_t n);

/* x[i] = e^x[i] for i < n, in place: one fixed sequence of IEEE operations (order.h's ord_exp1), so every
 * variant gives the same bits (libm's expf is neither vectorized nor pinned to a sequence). k = nearbyintf(x ·
 * log2 e); r = x - k·ln2 in two fused steps (ln2 split hi + lo); p = Σ r^i/i! for i <= 6 by Horner with
 * fused steps; result p · 2^k (2^k built from its bits). Relative error below 2^-22 (about 2 ulp). NaN
 * comes back quiet; x > 88 gives +inf and x < -87.33654 gives +0 (e^x there is below FLT_MIN: flushed). */
void kern_exp(float *x, size_t n);

/* One tile of attention's online softmax, in two steps with fixed orders (8 lanes: element j in lane j % 8, lanes
 * combined as the quantized dots' lanes), in every variant:
 * kern_scale_max:     s[j] *= scale for j < n, returns the largest s[j] (-inf for n = 0; a NaN is never chosen);
 * kern_exp_sum_rows:  for each of n_rows rows s_r = s + r·stride (stride a multiple of 8, n[r] <= stride):
 *                      s_r[j] = e^(s_r[j] - m[r]) by kern_exp for j < n[r], sum[r] = their sum; the row's other
 *                      elements are left unspecified (the rows' exponentials are taken in one pass). */
float kern_scale_max(float *s, size_t n, float scale);
void kern_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum);

/* A K tile of quantized rows (Q8_0 or Q4_0, 32 keys; kv.h stores them so): for each 32-element block of the rows in
 * turn, a section of 32 × the block's bytes — the 32 keys' f16 scales (key j's at byte 2j), then the block's quant
 * bytes in groups of four, group g holding bytes 4g..4g+3 of key 0, of key 1, .., of key 31 (Q8_0: 8 groups, Q4_0:
 * 4, their bytes as in block_q4_0: low nibbles elements 0..15, high nibbles 16..31). So four quants of 16 keys are
 * one 64-byte load, the operand of one VNNI product against four of the query's. */
#define KERN_KEY_GROUP 4

/* Scores of the quantized key tile kt (type Q8_0 or Q4_0; kt at the section of the head's first block) for n_q query
 * heads of n elements (a multiple of QK), quantized by quant_row_q8: query r's n / QK blocks at q + r·q_stride, its
 * scores at out + r·out_stride (32 floats). The order above. */
void kern_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q,
                       size_t n, float *out, size_t out_stride);
/* A V tile of quantized rows (Q8_0 or Q4_0, 32 positions; kv.h stores them so): for each 32-element block of the rows
 * in turn, a section of 32 × the block's bytes — the 32 positions' f16 scales (position j's at byte 2j), then the
 * block's quant bytes in groups of four positions, group g holding byte b of positions 4g..4g+3 at 4b .. 4b+3 of it
 * (b < the block's quant bytes: Q8_0 32, Q4_0 16 with elements b and b + 16 in its low and high nibble). So four
 * positions' values of 16 elements are one 64-byte load, the operand of one VNNI product against four weights. */

/* Accumulate into y (query r's n elements at y + r·y_stride, n a multiple of QK) the values of the quantized V tile vt
 * (type Q8_0 or Q4_0; vt at the section of the head's first block) weighted by query r's weights a + r·a_stride (keys
 * j < n_keys; the others are not read), in the order above, for n_y queries. */
void kern_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                       const uint8_t *vt, size_t n_keys, size_t n);

/* ---- many queries over quantized K/V, one query a lane --------------------------------------------------------------
 * Prefill attends consecutive rows of a query head together. With a query in each lane of a vector, the steps one query
 * takes over its 32 keys — a maximum, sums, the weights' quantization against their largest — become element-wise
 * steps over KERN_LANES queries, and the integer products take the queries (scores) and the weights (values) as their
 * vector operand, a key's or a value's four quants as the broadcast one. Each query still gets exactly the bits of the
 * orders above taken for it alone: only the layout differs. */
#define KERN_LANES 16

/* A lane block's queries, prepared once for every tile: per 32-element block b of the head and group g of its four
 * elements 4g..4g+3, query r's four quants, each + 128 (unsigned), at qu + ((b·8 + g)·KERN_LANES + r)·4; its scale of
 * block b at dq[b·KERN_LANES + r]. Lanes r >= n_q get quants 0 (stored 128) and scale 0. qu holds n/QK · 512 bytes,
 * dq n/QK · KERN_LANES floats; query r's n / QK blocks at q + r·q_stride. */
void kern_lanes_queries(const block_q8_act *q, size_t q_stride, size_t n_q, size_t n, uint8_t *qu, float *dq);
/* Where quant i (< QK) of block b of lane r's query lies in qu (above). */
static inline size_t kern_lanes_at(size_t b, size_t i, size_t r) {
    return ((b * (QK / KERN_KEY_GROUP) + i / KERN_KEY_GROUP) * KERN_LANES + r) * KERN_KEY_GROUP + i % KERN_KEY_GROUP;
}

/* A lane block: its prepared queries (kern_lanes_queries), this tile's reach of each lane, and the lanes' state. Lane r
 * sees the keys j < keys[r] of the tile (0: the query does not reach it, and its state stays as it is), those j <
 * below[r] with score -inf (under a sliding window). Its state: running maximum m[r], denominator d[r], output
 * accumulator y (element i at y[i·KERN_LANES + r]); at the first tile -inf, +0 and +0. */
typedef struct kern_lane_block {
    const uint8_t *qu;
    const float *dq;
    uint32_t keys[KERN_LANES], below[KERN_LANES];
    float m[KERN_LANES], d[KERN_LANES];
    float *y;
} kern_lane_block;

/* One key tile's step of the online softmax for the queries of n_blocks lane blocks, over the quantized K tile kt and V
 * tile vt (Q8_0 or Q4_0, each at the section of the head's first block; heads of n elements, a multiple of QK). The
 * step, per lane in this order:
 *   s_j = the key's score (kern_score_tile_q), -inf for j < below[r], then kern_scale_max over j < keys[r] → t;
 *   if t > m: c = e^(m - t) (kern_exp), y *= c, d *= c, m = t;
 *   a_j = e^(s_j - m) and their sum (kern_exp_sum_rows, j < keys[r]); d += the sum;
 *   y += the weighed values (kern_weigh_tile_q, keys j < keys[r]).
 * ops_attention's tiles take the same step for queries attended apart (ops.c). The blocks share one call so that a
 * variant rearranges the tile (Q4_0 widened, the sums of its quants) once for all of them. */
void kern_attend_lanes_q(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                         kern_lane_block *blocks, size_t n_blocks);
/* Whether the active variant has kern_attend_lanes_q (else ops_attention attends every query apart). */
bool kern_attend_lanes_available(void);

#endif
