/* ops.h — the operations of a transformer layer over a block of rows, threaded by output.
 *
 * WHY: the forward pass is a sequence of these operations over the n rows of a chunk. They are where
 * threads meet data, so they are where row invariance (docs/design.md §1) is won or lost.
 *
 * INVARIANT: each output element is computed by exactly one thread, by one call of a kernel (matmul.h, attn.h)
 * whose reduction order is fixed; threads split output rows/columns (taken dynamically), never a reduction. So a row's
 * result is the same whatever n_rows, n_threads, or the other rows in the call. Attention for the query
 * at absolute position p walks keys 0..p in tiles of OPS_ATTN_TILE aligned to absolute positions, with
 * one online-softmax schedule that depends on p alone — prefill and decode run the same code.
 *
 * Kernels know nothing of sequences: they see matrices, rows, positions and a view of K/V rows.
 *
 * Threads: called outside a parallel region, ops_matmul, ops_quantize_rows and ops_attention open one of
 * n_threads OpenMP threads (one thread for small work). Called inside an active parallel region, by every
 * thread of the team with the same arguments, they share the work among that team instead and return
 * after a barrier — so a caller can run a whole forward pass in one region (forward.c). The other
 * functions are serial.
 *
 * Thread-safety: pure functions of their arguments.
 */
#ifndef FKV_OPS_H
#define FKV_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn.h"
#include "types.h"

/* The version of the bits' definition (the reference kernels' orders, src/kernels/order.h): part of every disk block's
 * name, so a block computed under other bits is never read. Bump it with any change to tests/golden/digests.txt. */
#define OPS_BITS_VERSION 2 /* 2: quantized V weighed in integers (attn.h) */

#define OPS_ATTN_TILE KERN_KEY_TILE /* 32 */
#define OPS_ATTN_MAX_HEAD_DIM KERN_MAX_HEAD_DIM /* the widest head accepted; a bound on corrupt files */

/* A weight matrix: n_out rows of n_in elements of `type`, row r at data + r * row_bytes; packed: the rows are
 * kern_pack_rows' (matmul.h). */
typedef struct {
    ggml_type type;
    bool packed;
    uint32_t n_in;
    uint32_t n_out;
    size_t row_bytes;
    const uint8_t *data;
} ops_matrix;

/* Rows [r0, r0 + n) of w, as a matrix of their own (a part of a fused tensor; one expert of a 3-D tensor). */
ops_matrix ops_matrix_rows(const ops_matrix *w, uint32_t r0, uint32_t n);

/* True when products with w take Q8_0-quantized activations (quant_row_q8) rather than f32. */
bool ops_matrix_wants_q8(const ops_matrix *w);

/* A set of activation rows as the products take them: x [n][n_in] f32; xq the same rows as Q8_0 blocks
 * [n][n_in/QK] as ops_quantize_rows leaves them (required when a product's matrix wants Q8_0, else ignored); xp NULL,
 * or those rows as kern_panel_rows prepares them (matmul.h), made once for every product of them. */
typedef struct {
    const float *x;
    const block_q8_act *xq;
    const void *xp;
    uint32_t n;
} ops_rows;

/* y[r][o] = W[o] · x[r] for r < rows->n, o < n_out. */
void ops_matmul(const ops_matrix *w, const ops_rows *rows, float *y, int n_threads);

/* One of several products (q, k and v of the same rows; the experts of a layer, each over the rows routed to it):
 * y = W · rows as in ops_matmul. */
typedef struct {
    const ops_matrix *w;
    const ops_rows *rows;
    float *y;
} ops_product;

/* The n_products products computed as one piece of work: threads share all their outputs and meet once, at the
 * end. A product with no rows costs nothing. */
void ops_matmuls(const ops_product *p, int n_products, int n_threads);

/* Rows of x quantized for ops_matmul: xq[r] = quant_row_q8(x[r]). */
void ops_quantize_rows(const float *x, uint32_t n_rows, uint32_t n, block_q8_act *xq, int n_threads);

/* Row r of a matrix of rows: row_r = gain ⊙ x_r / sqrt(mean(x_r²) + eps). out may equal x. */
void ops_rmsnorm(const float *x, const float *gain, uint32_t n_rows, uint32_t n, float eps, float *out);

/* A rotary table's parameters: ggml's rope_ext arguments. Plain RoPE is {.base, .scale = 1, .attn_factor = 1}, the
 * other fields zero; linear scaling sets scale; YaRN sets ext_factor and the fields below it too. */
typedef struct {
    float base;          /* rope.freq_base */
    float scale;         /* rope.scaling.factor: positions are divided by it (ggml's 1 / freq_scale); 1: none */
    float attn_factor;   /* ggml's attn_factor: cos and sin are multiplied by it (1, or rope.scaling.attn_factor) */
    float ext_factor;    /* YaRN's extrapolation mix: 0 off; 1 for rope.scaling.type "yarn" (llama.cpp's default) */
    float beta_fast;     /* YaRN's correction range, in rotations over n_ctx_orig: llama.cpp's defaults 32 and 1 */
    float beta_slow;
    uint32_t n_ctx_orig; /* YaRN: rope.scaling.original_context_length */
} ops_rope_params;

/* Rotary table for row positions pos[0..n_rows): cs[r][2i], cs[r][2i+1] = (a·cos θ, a·sin θ) for i < n_rot/2, cs
 * n_rows × n_rot floats, with w_i = base^(-2i/n_rot) / freq_divisors[i] (divisors NULL: 1). Transcendentals are
 * flatkv's own, in double (the same bits on every machine). Two definitions:
 * - ext_factor 0: θ = (pos/scale)·w_i and a = attn_factor, formed in float as always (the golden digests' bits):
 *   (float)pos / scale times w_i rounded to float, cos and sin of that float rounded to float, then times a in float
 *   (attn_factor 1: the bits of plain cos and sin).
 * - ext_factor e != 0, YaRN (ggml's rope_yarn and rope_yarn_corr_dims): θ = t/scale·(1 - μ_i) + t·μ_i with t =
 *   pos·w_i, μ_i = e·(1 - min(1, max(0, (i - lo) / max(0.001, hi - lo)))), lo = max(0, floor(c(beta_fast))),
 *   hi = min(n_rot - 1, ceil(c(beta_slow))), c(β) = n_rot·ln(n_ctx_orig / (2π·β)) / (2·ln base);
 *   a = attn_factor·(1 + 0.1·ln scale). All of it in double, rounded to float once per element: (float)(a·cos θ).
 *   (An angle rounded to float is up to 1e-2 off at position 2^17; this one stays within 1e-6 of the formula.)
 *   Needs n_ctx_orig, beta_fast and beta_slow > 0 (the loader's to check, as it checks base and scale). */
void ops_rope_table(const uint32_t *pos, uint32_t n_rows, uint32_t n_rot, const ops_rope_params *rp,
                    const float *freq_divisors, float *cs);

/* Rotate adjacent pairs (x[2i], x[2i+1]), i < n_rot/2, of each of n_heads heads of head_dim in each row
 * (GGUF's `llama` convention). x: [n_rows][n_heads*head_dim]. */
void ops_rope(float *x, uint32_t n_rows, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, bool halves,
              const float *cs);

/* The K/V rows of one layer of one sequence (kv_dim elements each, of `type`: F32, F16, or Q8_0 / Q4_0 blocks), in
 * tiles of OPS_ATTN_TILE
 * positions aligned to absolute positions. Contiguous (blocks NULL): the tile of positions [t0, t0 + OPS_ATTN_TILE)
 * starts at k + ops_kv_offset(t0) = k + t0·row_bytes. Paged: at k + blocks[t0 / block_rows]·block_stride +
 * (t0 % block_rows)·row_bytes, with block_rows a multiple of OPS_ATTN_TILE so that a tile never straddles two
 * blocks — the same reads, so the same bits, as contiguous storage. A tile of f16/f32 V is its OPS_ATTN_TILE rows,
 * position t0 + j's at + j·row_bytes; of quantized V, a section per block of the rows, position t0 + j's block at
 * + j·(its bytes) in it (kv.h), so one head's values are the contiguous sections of its blocks. A tile of K is key-major (attn.h's kern_score_tile_*): element e of position t0 + j
 * at element index e·OPS_ATTN_TILE + j, so one head's keys are a contiguous [head_dim][OPS_ATTN_TILE] panel; for the
 * quantized types, a section per block of the rows (attn.h's kern_score_tile_q), so one head's keys are the
 * contiguous sections of its head_dim / 32 blocks. */
typedef struct {
    const uint8_t *k;
    const uint8_t *v;
    size_t row_bytes;
    ggml_type type;
    const uint32_t *blocks;
    uint32_t block_rows;
    size_t block_stride;
} ops_kv_view;

/* Byte offset of position p's V row from view->v; for p a multiple of OPS_ATTN_TILE, of its K tile from view->k. */
size_t ops_kv_offset(const ops_kv_view *view, uint32_t p);

/* Causal attention for query rows r at positions pos[r], each over its own K/V (views[r]; rows of different
 * sequences may share a call — grouped-query: head h uses KV head h / (n_heads/n_kv_heads)). Over quantized K/V
 * (head_dim then a multiple of 32) each query head is quantized first (quant_row_q8) and scored in integers.
 * q: [n_rows][n_heads*head_dim], out likewise. Keys and values for positions 0..pos[r] must already be in
 * views[r]. scale multiplies each q·k. window 0: the query at p attends to keys 0..p; else only to keys in
 * (p - window, p] (a sliding-window layer; llama.cpp's "standard" window): its walk starts at the tile holding
 * p - window + 1, the keys of that tile below it are scored and then given weight 0 — a schedule that depends on p
 * and window alone, so rows stay invariant.
 * sinks: NULL, or n_heads logits, head h's joining its softmax's denominator with no value (gpt-oss's attention
 * sinks). Its bits: after the query's last tile, the online softmax takes one more step, for a key of score σ =
 * sinks[h] (not multiplied by scale) and value 0, as a tile's step is taken: with running max m, sum d and output
 * accumulator y, if σ > m then c = e^(m - σ), y *= c, d *= c, m = σ; then d += e^(σ - m); and out = y · (1/d) as
 * without sinks. e^x is kern_exp (one sequence of IEEE steps in every variant). σ = -inf gives the bits of NULL. */
void ops_attention(const float *q, uint32_t n_rows, const uint32_t *pos, const ops_kv_view *views, uint32_t n_heads,
                   uint32_t n_kv_heads, uint32_t head_dim, float scale, uint32_t window, const float *sinks, float *out,
                   int n_threads);

/* How a row's router logits z (one per expert) become its experts' weights (llama.cpp's expert_gating_func values). */
typedef enum {
    OPS_GATE_SOFTMAX = 1,        /* p = softmax(z) over all experts (Qwen3-MoE) */
    OPS_GATE_SIGMOID = 2,        /* p = sigmoid(z) (GLM-4.5) */
    OPS_GATE_SOFTMAX_WEIGHT = 3, /* p = z; the k selected weights are then the softmax of their logits (gpt-oss) */
} ops_gating;

/* A row's routing (docs/design.md §6), from its own logits alone, in one fixed order:
 *   p[e] by `gating`: softmax: m = max z, p[e] = e^(z[e] - m) (kern_exp), s = Σ p[e] summed in double in expert
 *     order, p[e] = p[e] · (float)(1/s); sigmoid: p[e] = 1 / (1 + e^(-z[e])); softmax of the selected: p = z.
 *   selection: the k largest of v[e] = p[e] + select_b[e] (select_b NULL: v = p), largest first, ties to the lower
 *     expert index (a NaN is never selected over a number) — sel[0..k).
 *   weights: w[s] = p[sel[s]]; softmax of the selected: w = the softmax (as above, over slots) of those k; norm:
 *     t = Σ w[s] in slot order (float), w[s] = w[s] / max(t, 2^-14) (llama.cpp's clamp); scale (not 0 or 1):
 *     w[s] = w[s] · scale.
 * z [n_expert] is overwritten. */
void ops_route(float *z, uint32_t n_expert, const float *select_b, ops_gating gating, uint32_t k, bool norm,
               float scale, uint32_t *sel, float *w);

/* out[i] = Σ_s w[s] · y_s[i] over the k rows y_s = ys[s], i < n, summed in slot order: out = w[0]·y_0, then
 * out += w[s]·y_s (a multiply, then an add: no fused step). */
void ops_weighted_sum(float *out, const float *const *ys, const float *w, uint32_t k, size_t n);

/* gate[i] = silu(gate[i]) * up[i] over n elements, silu(g) = g / (1 + e^-g) with e^x from kern_exp. */
void ops_swiglu(float *gate, const float *up, size_t n);

/* gpt-oss's clamped SwiGLU: g = min(gate[i], 7), u = clamp(up[i], -7, 7), gate[i] = g / (1 + e^(-1.702·g)) ·
 * (u + 1), e^x from kern_exp (llama.cpp's swiglu_oai with its alpha 1.702 and limit 7). */
void ops_swiglu_oai(float *gate, const float *up, size_t n);

/* gate[i] = gelu(gate[i]) * up[i] over n elements, gelu the tanh form: g/2·(1 + tanh(u)), u = sqrt(2/pi)·(g +
 * 0.044715·g³), computed as g / (1 + e^(-2u)) with e^x from kern_exp (the same value; no libm, so the same bits on
 * every machine). */
void ops_geglu(float *gate, const float *up, size_t n);

/* y[i] += x[i] over n elements. */
void ops_add(float *y, const float *x, size_t n);

/* y[i] *= x[i] over n elements. */
void ops_mul(float *y, const float *x, size_t n);

/* x[i] = 1 / (1 + e^-x[i]) over n elements, e^x from kern_exp. */
void ops_sigmoid(float *x, size_t n);

/* x[i] = silu(x[i]) = x[i] / (1 + e^-x[i]) over n elements, e^x from kern_exp (ops_swiglu's activation). */
void ops_silu(float *x, size_t n);

/* x[i] = softplus(x[i]) = ln(1 + e^x[i]) over n elements; x[i] itself above 20 (llama.cpp's threshold) and for a NaN,
 * 0 below -700. e^x and ln in double by ops.c's own sequences of IEEE steps (as the rotary tables'), rounded to float
 * once: libm's logf is not the same code on every CPU. */
void ops_softplus(float *x, size_t n);

/* Each of n_rows rows of n elements divided by its L2 norm: x_r[i] = x_r[i] · (1 / max(sqrt(Σ x_r²), eps)), the sum
 * by kern_dot_f32's order (llama.cpp's ggml_l2_norm, whose sum is in double). */
void ops_l2norm(float *x, uint32_t n_rows, uint32_t n, float eps);

/* One token through a causal depthwise convolution of k taps, channels [c0, c1) of x (the token's input, replaced by
 * the output). Channel c's window holds its last k - 1 inputs, oldest first, at win + c·(k - 1) (win_in NULL: all
 * zero, the start of a sequence), its taps w + c·k; its output is y = Σ_{i<k-1} win[i]·w[i] + x[c]·w[k-1], summed in
 * that order from 0 in float, each product rounded before its add (llama.cpp's ssm_conv). win_out receives the window
 * after the token (its k - 2 newest, then x[c]); it may be win_in. */
void ops_conv_step(const float *win_in, float *win_out, const float *w, uint32_t k, float *x, uint32_t c0,
                   uint32_t c1);

/* One token through one head of a gated delta rule (Qwen3.5's gated DeltaNet): the state S is d × d, stored as d rows
 * of d (row j at s + j·d, its element i S[i][j]: key index i, value index j); s_in NULL is the zero state at the start
 * of a sequence (each row then starts at 0, nothing to decay). With e = e^g (kern_exp), for each row j in order: s_out_j = s_in_j · e (decay), t = s_out_j · k
 * (kern_dot_f32), δ = (v[j] - t) · beta (delta), s_out_j[i] = s_out_j[i] + k[i]·δ for each i (update: a multiply,
 * then an add), o[j] = (s_out_j · q) · scale (readout, kern_dot_f32). Rows are independent of each other, so this
 * is the same as decaying the whole state first, then every delta, every update, every readout. s_out may be s_in. */
void ops_delta_step(const float *s_in, float *s_out, const float *q, const float *k, const float *v, float g,
                    float beta, uint32_t d, float scale, float *o);

#endif
