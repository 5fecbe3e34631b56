/* genmodel.h — models of real shapes with deterministic random weights, of any architecture model.c computes.
 *
 * WHY: speed and scale are measured on models the size of real ones (110M, 0.5B) that cannot ship with
 * the repository; compute cost does not depend on the weight values, so random weights of the right
 * shapes and types are a faithful benchmark load. The tokenizer is copied from a real vocabulary GGUF so
 * that the model reads text. Which tensors and keys a file has is read from its architecture's row of model.c's
 * table (model_arch: the switches, and what the architecture's converter writes), never from its name.
 *
 * INVARIANT: the same parameters give the same file, byte for byte, on every machine: weights come from
 * a counter-based generator keyed by (seed, tensor name, element index), not from call order.
 * Scale: matrices are uniform in ±sqrt(3/n_in) (unit variance preserved through a product), norms are
 * 1 ± 0.1, so activations stay finite through any number of layers.
 *
 * Experts (an architecture with `experts`): ffn_gate_inp (the router) is F32, as llama.cpp's quantizer keeps it;
 * ffn_{gate,up,down}_exps are 3-D [n_in, n_out, n_expert] of the matrices' type (the mix rules read the role's
 * name: ffn_down_exps and ffn_down_shexp follow ffn_down's); exp_probs_b.bias is written where the architecture's
 * converter writes it (select_bias). NextN blocks are whole layers plus their nextn.* tensors.
 *
 * Hybrids (a `recurrent` architecture, qwen35/qwen35moe): layer l is a gated DeltaNet layer unless (l + 1) %
 * attn_interval == 0, written as Qwen3.5's converter writes it (ssm_conv1d F32 [conv_kernel, conv_dim], ssm_a
 * negative, as -exp(A_log)); attention layers have the double-width attn_q (q and gate per head), q/k norms and
 * rope.dimension_sections; the rotated dims default to a quarter of the head (partial_rotary_factor 0.25), the
 * sections to [ceil, round, floor] thirds of the rotated pairs ([11, 11, 10, 0] for 64 dims). The GDN sizes default
 * to how Qwen3.5's published configs (0.8B to 27B, 35B-A3B) relate them to the attention's: heads of d = head_dim / 2,
 * 2·heads value heads, 16 key heads where 16 divides those (every published one), else as many as value heads; a
 * convolution of 4 taps. Its MoE has one shared expert, --shared-experts times the expert width (default 1), gated
 * by ffn_gate_inp_shexp (F32 [dim]).
 * Types: norms, biases and rope_freqs are F32. Matrices are all `type` (GENMODEL_UNIFORM: any type traits.h
 * computes), or follow one of llama.cpp's mixes as llama_tensor_get_type picks them for llama and qwen2 (no experts):
 *   - output.weight, and token_embd.weight when tied (it is then the output matrix): Q6_K, or Q8_0 when its rows
 *     are not whole 256-element super-blocks;
 *   - Q4_K_M (base Q4_K) and Q5_K_M (base Q5_K): blk.i.attn_v.weight and blk.i.ffn_down.weight are Q6_K where
 *     use_more_bits(i, n_layers), else the base, with use_more_bits(i, n) = i < n/8 || i >= 7n/8 ||
 *     (i - n/8) % 3 == 2 (integer division);
 *   - Q3_K_M (base Q3_K): attn_v Q5_K in layers 0 and 1, else Q4_K; ffn_down Q5_K in layers i < n_layers/16, else
 *     Q4_K; attn_output Q4_K;
 *   - every other matrix (token_embd when untied, attn_q/k, ffn_gate/up, and attn_output outside Q3_K_M): the base.
 *   - mxfp4_moe (gpt-oss's published files): every expert tensor MXFP4, every other matrix Q8_0 (output included).
 * Then llama.cpp's fallback, where the chosen type's block does not divide the row length: Q2_K/Q3_K → Q4_0,
 * Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, IQ4_XS → IQ4_NL, and F16 when that does not divide it either (Qwen2-0.5B's
 * dim 896: its attn_q is Q5_0 in Q4_K_M). Under GENMODEL_UNIFORM a row the type's block does not divide is refused,
 * naming the tensor and its row length.
 *
 * Chat: a copied vocabulary may lack the control tokens of the chat template a test needs (gpt-oss's, GLM's, whose
 * vocabularies the test data does not hold). `tokens` are appended to it when it lacks them — with their type, and
 * the special-token keys pointed at them — and `chat_template` becomes tokenizer.chat_template, so that the file's
 * template family is detected from it as from the real model's (chat.h's chat_vocab_tokens lists each family's).
 */
#ifndef FKV_GENMODEL_H
#define FKV_GENMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

/* Which type each matrix gets (see "Types" above). */
typedef enum {
    GENMODEL_UNIFORM, /* every matrix is `type` */
    GENMODEL_Q4_K_M,  /* llama.cpp's Q4_K_M mix of Q4_K and Q6_K; `type` is not used */
    GENMODEL_Q5_K_M,  /* llama.cpp's Q5_K_M mix of Q5_K and Q6_K */
    GENMODEL_Q3_K_M,  /* llama.cpp's Q3_K_M mix of Q3_K, Q4_K, Q5_K and Q6_K */
    GENMODEL_MXFP4_MOE, /* llama.cpp's MXFP4_MOE: experts (3-D tensors) MXFP4, every other matrix Q8_0 */
} genmodel_mix;

/* A token for the vocabulary (see "Chat" above). */
typedef struct {
    const char *text;
    bool user_defined;   /* type USER_DEFINED; else CONTROL */
    const char *special; /* "bos", "eos", "eot", "eom"...: tokenizer.ggml.<special>_token_id is its id; NULL: none */
} genmodel_token;

typedef struct {
    uint32_t dim;
    uint32_t hidden;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;      /* 0: dim / n_heads; else written as attention.key_length and value_length */
    uint32_t n_ctx;
    const char *vocab_from; /* a GGUF holding tokenizer.* metadata */
    ggml_type type;         /* of the matrices under GENMODEL_UNIFORM (any type of traits.h) */
    genmodel_mix mix;       /* GENMODEL_UNIFORM (0) unless set */
    bool tied;              /* no output.weight: the output matrix is token_embd */
    const char *arch;       /* a name of model.c's architecture table (model_arch_find); NULL: "llama". Its row says
                             * which tensors and keys the file has */
    bool rope_freqs;        /* write rope_freqs.weight (Llama-3.1-style per-dimension frequency divisors) */
    uint32_t rope_dims;     /* rope.dimension_count; 0: the head size (partial rotary below it) */
    uint32_t window;        /* attention.sliding_window (an architecture with swa or window_ignored); 0: none */
    uint32_t window_pattern;/* swa: attention.sliding_window_pattern (every Nth layer global); 0: not written (6) */
    /* experts (an architecture with experts; 0: its defaults — 8 experts, 2 used, expert width hidden / 2) */
    uint32_t n_expert;      /* expert_count */
    uint32_t n_expert_used; /* expert_used_count */
    uint32_t n_ff_exp;      /* expert_feed_forward_length */
    uint32_t n_shared;      /* expert_shared_count (glm4moe) */
    uint32_t n_dense_lead;  /* leading_dense_block_count: the first layers' dense FFN (feed_forward_length wide) */
    uint32_t n_nextn;       /* nextn_predict_layers: NextN blocks after the n_layers */
    bool nextn_embed, nextn_head; /* the NextN blocks' own nextn.embed_tokens, nextn.shared_head_head */
    /* gated DeltaNet layers (a recurrent architecture; 0: the defaults above) */
    uint32_t ssm_d;         /* ssm.state_size: the heads' size d */
    uint32_t ssm_k_heads;   /* ssm.group_count */
    uint32_t ssm_v_heads;   /* ssm.time_step_rank */
    uint32_t ssm_conv;      /* ssm.conv_kernel */
    uint32_t attn_interval; /* full_attention_interval: every Nth layer is an attention layer */
    uint64_t seed;
    const char *chat_template;    /* tokenizer.chat_template (a Jinja source); NULL: the vocabulary file's, if any */
    const genmodel_token *tokens; /* appended to the vocabulary where it lacks them (n_tokens of them) */
    size_t n_tokens;
} genmodel_params;

/* The type a --type name gives: a type of model_type_names (every matrix that type), or a mix's name ("q4_k_m",
 * "q5_k_m", "q3_k_m": *type its base type). 0, or -1 for a name that is neither. */
int genmodel_type_by_name(const char *name, ggml_type *type, genmodel_mix *mix);
/* Those names, sep between two, into buf (truncated to cap); returns buf. */
const char *genmodel_type_names(char *buf, size_t cap, const char *sep);

/* Write the model to path. -1 with err naming the bad parameter or file. */
int genmodel_write(const genmodel_params *p, const char *path, fkv_error *err);

#endif
