/* model.h — a transformer model of one of the llama family's architectures: hyperparameters and weights, read
 * from a GGUF file.
 *
 * WHY: every architecture of model.c's table (`llama` — Llama 1/2/3, TinyLlama, Mistral-style GQA models, the
 * llama2.c TinyStories models — and its kin) is one computation — RMSNorm, rotary attention, a gated FFN — with a
 * few switches: rotary pairs adjacent or halves, q/k/v biases, per-head q/k norms, post-norms, scaled embeddings,
 * GeGLU for SwiGLU, fused tensors, layers without rope, sliding-window layers with their own rope table. model.c
 * holds one row of switches per architecture (model_arch, facts from llama.cpp's src/models/<arch>.cpp), and the
 * forward pass and gen-model (genmodel.h) read the switches, never the architecture's name. Mixtures of experts
 * (qwen3moe, glm4moe) are the same computation with routed experts in place of the dense FFN (docs/design.md §6);
 * hybrids (qwen35, qwen35moe) replace three of every four attention layers by gated DeltaNet layers (model_gdn),
 * whose state a sequence carries from token to token (docs/design.md §5). This module turns
 * the file into that description and refuses, with the key or tensor named, anything the forward pass could not
 * compute correctly (an unknown architecture, value heads of another size than key heads, logit soft-capping, a
 * YaRN log multiplier, a sliding window where the architecture has none) — so the forward pass itself never checks shapes.
 *
 * INVARIANT: a loaded model's every matrix has exactly the shape the hyperparameters imply (checked
 * tensor by tensor at load), a type flatkv computes (a row of src/kernels/traits.c), and its data inside
 * the mapped file. Norm vectors are copied to f32. The weights are borrowed from the mapping, which the
 * model keeps open until model_free. The layers' matrices and an untied output matrix are copied at load into memory
 * the model owns (on huge pages where the system gives them), packed where the kernels take them so (kern_packs: Q8_0,
 * Q4_0, MXFP4, Q4_K, Q6_K); a mixture's experts too when they fit in memory, or stay in the mapping, never copied, so
 * that a model larger than memory pages them in (FLATKV_EXPERTS: model.c's experts_place). A fused tensor becomes the matrices of its row ranges (attn_qkv: q, k, v;
 * a fused ffn_up: gate, then up), each packed on its own, so the forward pass sees the same matrices as for separate
 * tensors.
 *
 * Layer roles, as llama.cpp derives them: a `recurrent` architecture's layer l is a gated DeltaNet layer where
 * attention.recurrent_layers[l] is true, or, without that array, unless (l + 1) % full_attention_interval == 0
 * (default 4); NextN blocks are attention layers. With `<arch>.attention.sliding_window` W (an architecture with `swa`),
 * layer l is a window layer — its row at p attends to (p - W, p] and rotates with the local table
 * (rope.freq_base_swa, default 10000, unscaled) — unless l % P == P - 1, P = attention.sliding_window_pattern
 * (default 6; 0: every layer is one); the others are global (rope.freq_base, rope scaling). `nope_step` N: layers
 * with (l + 1) % N == 0 have no rope. A `window_ignored` architecture's sliding_window is ignored, as llama.cpp does
 * today. The head size is attention.key_length (default dim / heads) and q_dim = heads · head size may differ from
 * dim. Gemma's norms are used as stored: its converter already wrote weight + 1.
 *
 * Tensor names and shapes (ne[0] is the row length, i.e. the input dimension of a matrix; the switches of
 * model_arch in backquotes):
 *   token_embd.weight [dim, n_vocab]      output_norm.weight [dim]     output.weight [dim, n_vocab]
 *   blk.L.attn_norm.weight [dim]          blk.L.ffn_norm.weight [dim]
 *   blk.L.attn_q.weight [dim, n_heads*head_dim]   blk.L.attn_k/attn_v.weight [dim, n_kv_heads*head_dim]
 *     or (`fused`) blk.L.attn_qkv.weight [dim, (n_heads + 2*n_kv_heads)*head_dim]
 *   blk.L.attn_output.weight [n_heads*head_dim, dim]
 *   blk.L.ffn_gate/ffn_up.weight [dim, hidden]    blk.L.ffn_down.weight [hidden, dim]
 *     or (`fused`) blk.L.ffn_up.weight [dim, 2*hidden], gate rows first
 *   `qkv_bias`: blk.L.attn_q/k/v.bias;  `qk_norm`: blk.L.attn_q_norm/attn_k_norm.weight [head_dim]
 *   `post_norms`: blk.L.post_attention_norm.weight, blk.L.post_ffw_norm.weight [dim]
 *   `long_rope` (optional): rope_factors_short.weight, rope_factors_long.weight [n_rot/2]
 *   optional: rope_freqs.weight [n_rot/2]
 *   `out_bias`: blk.L.attn_output.bias [dim];  `sinks`: blk.L.attn_sinks.weight [n_heads]
 *   `expert_biases`: blk.L.ffn_gate_inp.bias [n_expert], ffn_gate_exps/ffn_up_exps.bias [n_ff_exp, n_expert],
 *     ffn_down_exps.bias [dim, n_expert]
 *   `experts` (layers l >= leading_dense_block_count; the others dense as above):
 *     blk.L.ffn_gate_inp.weight [dim, n_expert]   blk.L.exp_probs_b.bias [n_expert] (optional)
 *     blk.L.ffn_gate_exps/ffn_up_exps.weight [dim, n_ff_exp, n_expert]   blk.L.ffn_down_exps.weight [n_ff_exp, dim, n_expert]
 *     with expert_shared_count S: blk.L.ffn_gate_shexp/ffn_up_shexp.weight [dim, S·n_ff_exp], ffn_down_shexp [S·n_ff_exp, dim]
 *   `ffn_post_name`: the FFN's norm is blk.L.post_attention_norm.weight; q/k biases and norms are taken where present
 *   `attn_gate`: blk.L.attn_q.weight [dim, 2·n_heads·head_dim], each head's q rows then its gate's
 *   `shared_gate`: blk.L.ffn_gate_inp_shexp.weight [dim], the shared expert expert_shared_feed_forward_length wide
 *   `recurrent`, a gated DeltaNet layer (model_gdn; d = ssm.state_size, Hk = ssm.group_count, Hv =
 *     ssm.time_step_rank, conv_dim = 2·Hk·d + Hv·d), in place of the attention tensors:
 *     blk.L.attn_qkv.weight [dim, conv_dim]   blk.L.attn_gate.weight [dim, Hv·d]   blk.L.ssm_out.weight [Hv·d, dim]
 *     blk.L.ssm_conv1d.weight [ssm.conv_kernel, conv_dim]   blk.L.ssm_beta/ssm_alpha.weight [dim, Hv]
 *     blk.L.ssm_dt.bias, blk.L.ssm_a [Hv]   blk.L.ssm_norm.weight [d]
 *   NextN blocks L = n_layers .. block_count - 1: a whole layer plus blk.L.nextn.eh_proj.weight [2·dim, dim],
 *     blk.L.nextn.enorm/hnorm.weight [dim], optional blk.L.nextn.shared_head_norm.weight [dim],
 *     blk.L.nextn.embed_tokens/shared_head_head.weight [dim, n_vocab]
 * output.weight absent means tied embeddings (the output matrix is token_embd).
 *
 * Thread-safety: immutable after model_load.
 */
#ifndef FKV_MODEL_H
#define FKV_MODEL_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "text/tok.h"

/* What distinguishes an architecture: one row per architecture (model.c's table). The switches up to nope_step say
 * how its computation differs from llama's (the loader and the forward pass read them); the rest say what its
 * converter writes into a file, which the loader takes from the file itself and gen-model writes as the converter
 * does. */
typedef struct {
    const char *name;    /* general.architecture */
    bool rope_halves;    /* rotate (x[i], x[i + n_rot/2]) — GGUF's "neox" order — instead of adjacent pairs */
    bool qkv_bias;       /* q, k, v biases (required) */
    bool qk_norm;        /* per-head RMSNorm of q and k before rope (attn_q_norm, attn_k_norm: [head_dim]) */
    bool post_norms;     /* RMSNorm of the attention and FFN outputs before each residual add */
    bool embd_scale;     /* token embeddings times sqrt(dim) */
    bool gelu;           /* GeGLU with tanh GELU instead of SwiGLU */
    bool fused;          /* attn_qkv = [q; k; v] (or separate q/k/v), ffn_up = [gate; up] without ffn_gate */
    bool long_rope;      /* LongRoPE: rope_factors_short/long, rope.scaling.attn_factor, original_context_length */
    bool swa;            /* attention.sliding_window: window layers in attention.sliding_window_pattern */
    bool window_ignored; /* attention.sliding_window is written but attention is full (llama.cpp disables it) */
    uint32_t nope_step;  /* layers l with (l + 1) % nope_step == 0 have no rope (SmolLM3: 4); 0: none */
    bool experts;        /* routed experts (model_experts) in every layer from leading_dense_block_count on */
    ops_gating gating;   /* how router logits become expert weights */
    bool expert_norm;    /* the k weights renormalised to sum 1 */
    bool routing_keys;   /* expert_gating_func, expert_weights_norm and _scale override the two above (GLM-4.5);
                          * other rows compute as their llama.cpp graph does whatever a file says */
    bool ffn_post_name;  /* the FFN's input norm is stored as post_attention_norm (GLM-4.5), not ffn_norm */
    bool select_bias;    /* its converter writes exp_probs_b (the loader takes it wherever a file has it) */
    bool out_bias;       /* attn_output.bias (required) */
    bool sinks;          /* attn_sinks: a learned logit per head in every softmax's denominator (required) */
    bool expert_biases;  /* biases of the router and of each expert's gate, up and down (required) */
    bool swiglu_oai;     /* experts' activation: gpt-oss's clamped SwiGLU (ops_swiglu_oai) instead of SwiGLU */
    uint32_t swa_period; /* the window layers' default attention.sliding_window_pattern (0: 6, llama.cpp's) */
    bool swa_same_rope;  /* window layers rotate as the others (base from rope.freq_base_swa if set, scaling too) */
    bool yarn;           /* its converter writes YaRN scaling (gpt-oss: factor 32 over an original context of 4096) */
    bool recurrent;      /* gated DeltaNet layers (model_gdn, the ssm.* keys) among the attention layers */
    bool attn_gate;      /* attn_q holds each head's q and its gate: the attention output times sigmoid(gate) */
    bool rope_sections;  /* rope.dimension_sections (interleaved M-RoPE); text positions: neox rotation (model.c) */
    bool shared_gate;    /* the shared expert's output times sigmoid(x · ffn_gate_inp_shexp) (Qwen3.5's MoE) */
    bool tied;           /* no output.weight: the output matrix is token_embd */
    bool head_size_keys; /* attention.key_length and value_length are written even when they are dim / heads */
    float rms_eps;       /* attention.layer_norm_rms_epsilon of its models */
    float rope_base;     /* rope.freq_base of its models */
} model_arch;

#define MODEL_ROPE_GLOBAL 0 /* rope.freq_base and scaling: every layer of a model without window layers */
#define MODEL_ROPE_LOCAL 1  /* window layers' own base (rope.freq_base_swa, default 10000), no scaling */
#define MODEL_ROPE_NONE (-1) /* NoPE layers */

/* A layer's routed experts (docs/design.md §6): n_expert matrices of each role, stored as one 3-D tensor per role
 * either placed with the dense matrices, packed, or borrowed from the mapped file in its own layout (so a model larger
 * than memory pages its experts in as they are used; fkv_model.experts_placed says which). Expert e's gate is rows [e·n_ff_exp, (e+1)·n_ff_exp) of `gate` (matrix_rows),
 * likewise up; its down is rows [e·dim, (e+1)·dim) of `down`. */
typedef struct {
    ops_matrix router;     /* ffn_gate_inp [dim, n_expert] */
    float *router_b;       /* [n_expert] added to the logits (expert_biases), or NULL */
    float *gate_b, *up_b;  /* [n_expert][n_ff_exp] added to each expert's gate and up products, or NULL */
    float *down_b;         /* [n_expert][dim] added to each expert's down product, or NULL */
    float *select_b;       /* exp_probs_b [n_expert]: added to p for selection only (GLM-4.5), or NULL */
    ops_matrix gate, up;   /* ffn_gate_exps, ffn_up_exps [dim, n_ff_exp, n_expert] as n_ff_exp·n_expert rows */
    ops_matrix down;       /* ffn_down_exps [n_ff_exp, dim, n_expert] as dim·n_expert rows */
} model_experts;

/* A gated DeltaNet layer (docs/design.md §5), in place of attention. Per token: mix = x·attn_qkv through the causal
 * convolution (ssm_conv1d's taps over the channel's last conv_kernel inputs) and SiLU, split into q, k (Hk heads of d,
 * each L2-normalised) and v (Hv heads of d); value head h reads key head h % Hk; β = sigmoid(x·ssm_beta), g =
 * softplus(x·ssm_alpha + dt_bias)·a; the delta rule (ops_delta_step) on the head's d × d state gives o_h; the output
 * is rmsnorm(o_h)·ssm_norm times silu(z_h), z = x·attn_gate, through ssm_out. The state a sequence carries: the
 * convolution's window and the heads' states (model_hparams.state_floats). */
typedef struct {
    ops_matrix qkv;       /* attn_qkv [dim, conv_dim]: q, k, v before the convolution */
    ops_matrix z;         /* attn_gate [dim, Hv·d] */
    ops_matrix beta, alpha; /* ssm_beta, ssm_alpha [dim, Hv] */
    ops_matrix out;       /* ssm_out [Hv·d, dim] */
    float *conv;          /* ssm_conv1d [conv_kernel, conv_dim]: channel c's taps at conv + c·conv_kernel */
    float *dt_bias, *a;   /* ssm_dt.bias, ssm_a [Hv] (ssm_a = -exp(A_log), as the converter writes it) */
    float *norm;          /* ssm_norm [d] */
    size_t state_at;      /* where its part of a sequence's state starts (floats): the window [conv_dim][conv_kernel
                           * - 1], then the heads' states [Hv][d][d] (ops_delta_step's layout) */
} model_gdn;

typedef struct {
    float *attn_norm; /* [dim] */
    ops_matrix wq, wk, wv, wo; /* from one fused attn_qkv where the file has it (rows q, then k, then v); wq
                                * [dim, 2·q_dim] with attn_gate; none in a gated DeltaNet layer */
    model_gdn *gdn;      /* a gated DeltaNet layer's, or NULL (an attention layer) */
    float *bq, *bk, *bv; /* [q_dim], [kv_dim], [kv_dim] biases added after the products, or NULL */
    float *bo;           /* [dim] attn_output's bias (out_bias), or NULL */
    float *sinks;        /* [n_heads] attention sinks (sinks), or NULL */
    float *q_norm, *k_norm; /* [head_dim] per-head gains (qk_norm), or NULL */
    float *post_attn_norm, *post_ffn_norm; /* [dim] (post_norms), or NULL */
    float *ffn_norm; /* [dim] */
    ops_matrix w_gate, w_up, w_down; /* gate and up: the two halves of a fused ffn_up where the file has it; in an
                                      * expert layer, its shared expert(s) where it has them */
    uint32_t hidden;  /* w_gate's rows: feed_forward_length, the shared experts' width, or 0 (no such FFN) */
    ops_matrix shared_gate; /* ffn_gate_inp_shexp: one row [dim] (shared_gate), or none */
    model_experts *moe; /* routed experts, or NULL (a dense layer) */
    int rope;         /* MODEL_ROPE_GLOBAL, MODEL_ROPE_LOCAL or MODEL_ROPE_NONE */
    uint32_t window;  /* the row at p attends to positions (p - window, p]; 0: to all of 0..p */
} model_layer;

typedef struct {
    char arch[16];    /* general.architecture, one of model.c's table */
    model_arch kind;  /* its row of the table */
    bool rope_halves; /* kind.rope_halves */
    bool qkv_bias;    /* kind.qkv_bias */
    uint32_t n_vocab;
    uint32_t n_ctx_train;
    uint32_t n_ctx_orig;  /* rope.scaling.original_context_length (default n_ctx_train): LongRoPE's long factors
                           * serve contexts longer than this, as llama.cpp chooses them */
    uint32_t dim;
    uint32_t hidden;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;  /* attention.key_length (= value_length), default dim / n_heads */
    uint32_t n_rot;     /* leading dims of each head that are rotated (rope.dimension_count) */
    uint32_t window;    /* attention.sliding_window of the window layers; 0: none */
    uint32_t swa_pattern; /* attention.sliding_window_pattern (default 6): layer l is a window layer unless
                           * l % swa_pattern == swa_pattern - 1 (llama.cpp's set_swa_pattern; 0: all are) */
    float rms_eps;
    float rope_base;
    float rope_scale;   /* linear position scaling: rotary angle uses pos / rope_scale */
    float attn_scale;   /* multiplies each q·k: 1/sqrt(head_dim) (Gemma 3 27B: 1/sqrt(dim/n_heads)) */
    ops_rope_params rope[2]; /* MODEL_ROPE_GLOBAL, MODEL_ROPE_LOCAL: the two rotary tables (ops.h) */
    /* experts (kind.experts; all 0 otherwise) */
    uint32_t n_expert;     /* expert_count */
    uint32_t n_expert_used; /* expert_used_count: k, 1 <= k <= n_expert */
    uint32_t n_ff_exp;     /* expert_feed_forward_length (default feed_forward_length / k) */
    uint32_t n_ff_shexp;   /* the shared experts' width: expert_shared_count · n_ff_exp, or (shared_gate)
                            * expert_shared_feed_forward_length (default feed_forward_length) */
    uint32_t n_dense_lead; /* leading_dense_block_count: layers [0, n) have a dense FFN of feed_forward_length */
    uint32_t n_nextn;      /* nextn_predict_layers: blocks after the n_layers of the trunk (block_count counts them),
                            * loaded into layers[n_layers ..] for a drafter and never run by the forward pass */
    ops_gating gating;
    bool expert_norm;      /* weights divided by their sum (at least 2^-14, llama.cpp's clamp) */
    float expert_scale;    /* expert_weights_scale: weights times it (0 or 1: not scaled) */
    /* gated DeltaNet layers (kind.recurrent; all 0 otherwise) */
    uint32_t n_conv;       /* ssm.conv_kernel: the convolution's taps */
    uint32_t ssm_d;        /* ssm.state_size: a head's key and value size d */
    uint32_t n_k_heads;    /* ssm.group_count: Hk */
    uint32_t n_v_heads;    /* ssm.time_step_rank: Hv, a multiple of Hk (ssm.inner_size = Hv·d) */
    uint32_t ffn_max;      /* the widest FFN hidden row of any layer (model_layer.hidden), as its tensors confirm */
    size_t state_floats;   /* a sequence's recurrent state, one contiguous buffer: every gated DeltaNet layer's
                            * part (model_gdn.state_at); 0 without such layers. The state after position p is a
                            * function of the ids [0, p] alone: what a resume at p + 1 needs beside the K/V rows */
} model_hparams;

/* A NextN (multi-token prediction) block's own tensors, kept for a drafter (blk.{n_layers + i}.nextn.*). */
typedef struct {
    ops_matrix eh_proj;       /* [2·dim, dim]: the [embedding; hidden] concatenation projected to dim */
    float *enorm, *hnorm;     /* [dim] norms of the embedding and of the hidden state */
    float *head_norm;         /* shared_head_norm [dim], or NULL (output_norm) */
    ops_matrix embed, head;   /* embed_tokens, shared_head_head [dim, n_vocab] where the file has them; n_out 0: the
                               * model's token_embd and output serve (llama.cpp's choice) */
} model_nextn;

struct fkv_model {
    gguf_file *file;
    char *name; /* general.name, or the file name */
    model_hparams hp;
    ops_matrix tok_embd;
    ops_matrix output; /* aliases tok_embd when tied */
    float *output_norm;
    float *rope_freqs; /* [n_rot/2] divisors of the rotary frequencies (rope_freqs.weight), or NULL */
    float *rope_short, *rope_long; /* [n_rot/2] LongRoPE divisors (rope_factors_short/long.weight), or NULL */
    model_layer *layers; /* [n_layers + n_nextn] */
    model_nextn *nextn;  /* [n_nextn]: the parts of each NextN block beyond a layer's, or NULL */
    uint32_t *windows; /* [n_layers] each layer's window (model_layer.window), for kv_map_digest; NULL: none has one */
    tok_vocab *vocab;
    char *chat_template; /* tokenizer.chat_template, or NULL */
    void *packed;        /* the matrices' memory, one allocation (pack_weights in model.c; hugemem.h) */
    size_t packed_bytes;
    bool experts_placed; /* the experts are among the packed matrices (else read from the mapping) */
    struct grammar_vocab *gvocab; /* the vocabulary arranged for grammar masks (grammar.h), built at first need */
    pthread_mutex_t gvocab_mu;
    const char *kernels; /* the kernel variant the matrices are laid out for (kern_active()->name at load) */
};

/* Load and validate (see INVARIANT); NULL with err naming the file and the key or tensor at fault. */
fkv_model *fkv_model_load(const char *path, fkv_error *err);
void fkv_model_free(fkv_model *m);
/* The same from a GGUF image in memory (borrowed, not copied: it must outlive the model); name stands for the file
 * in errors and as the default model name. For the fuzzer (fuzz/fuzz_model.c) and tests of hostile files. */
fkv_model *model_load_buffer(const void *buf, size_t size, const char *name, fkv_error *err);

/* The row of the architecture named name[0..len) (general.architecture), or NULL when flatkv does not compute it. */
const model_arch *model_arch_find(const char *name, size_t len);
/* The architectures' names in the table's order, sep between two and last before the last ("llama, qwen2 or
 * gemma3"), into buf (truncated to cap); returns buf. */
const char *model_arch_names(char *buf, size_t cap, const char *sep, const char *last);
/* The element types a model's matrices may have (the rows of src/kernels/traits.c, in ggml's type order) by their
 * names in lower case ("q4_k"), sep between two, into buf (truncated to cap); returns buf. */
const char *model_type_names(char *buf, size_t cap, const char *sep);
/* The type of that lower-case name into *type: 0, or -1 when no such type is computed. */
int model_type_by_name(const char *name, ggml_type *type);


/* A gated DeltaNet layer's channels: q and k (Hk heads of d each), then v (Hv heads of d). */
static inline uint32_t model_conv_dim(const model_hparams *hp) {
    return (2 * hp->n_k_heads + hp->n_v_heads) * hp->ssm_d;
}


/* The K/V layer table (kv_map.layer_at) of m's layers and its first n_nextn NextN blocks (a drafter's, after the
 * trunk) into layer_at (n_layers + n_nextn entries, the caller's): a gated DeltaNet layer keeps no rows (KV_NO_ROWS);
 * a window layer goes to part 1 when windows_apart (a pool of its own), every other one to part 0, each part's layers
 * numbered in order; counts[p]: part p's layers. Returns layer_at, or NULL when every layer is layer l of part 0 (no
 * table needed). */
const uint32_t *model_kv_layers(const fkv_model *m, bool windows_apart, uint32_t n_nextn, uint32_t *layer_at,
                                uint32_t counts[2]);

/* The global rotary table's frequency divisors for a context of n_ctx positions: rope_freqs.weight, or LongRoPE's
 * long factors when n_ctx > n_ctx_orig and its short ones otherwise (llama.cpp's choice), or NULL. */
const float *model_rope_divisors(const fkv_model *m, uint32_t n_ctx);

#endif
