/* genmodel.h — llama-architecture models of real shapes with deterministic random weights.
 *
 * WHY: speed and scale are measured on models the size of real ones (110M, 0.5B) that cannot ship with
 * the repository; compute cost does not depend on the weight values, so random weights of the right
 * shapes and types are a faithful benchmark load. The tokenizer is copied from a real vocabulary GGUF so
 * that the model reads text.
 *
 * INVARIANT: the same parameters give the same file, byte for byte, on every machine: weights come from
 * a counter-based generator keyed by (seed, tensor name, element index), not from call order.
 * Scale: matrices are uniform in ±sqrt(3/n_in) (unit variance preserved through a product), norms are
 * 1 ± 0.1, so activations stay finite through any number of layers.
 *
 * Types: norms, biases and rope_freqs are F32. Matrices are all `type` (GENMODEL_UNIFORM), or follow
 * llama.cpp's Q4_K_M mix (GENMODEL_Q4_K_M, as llama_tensor_get_type picks it for llama and qwen2):
 *   - output.weight, and token_embd.weight when tied (it is then the output matrix): Q6_K;
 *   - blk.i.attn_v.weight and blk.i.ffn_down.weight: Q6_K where use_more_bits(i, n_layers), else Q4_K,
 *     with use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 (integer division);
 *   - every other matrix (token_embd when untied, attn_q/k/output, ffn_gate/up): Q4_K.
 * Every matrix's row length must be a multiple of its type's block (256 for K-quants): otherwise the
 * write fails naming the tensor and its row length (llama.cpp would fall back to Q5_0/Q8_0 there; flatkv
 * refuses rather than change the mix).
 */
#ifndef FKV_GENMODEL_H
#define FKV_GENMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"

/* Which type each matrix gets (see "Types" above). */
typedef enum {
    GENMODEL_UNIFORM, /* every matrix is `type` */
    GENMODEL_Q4_K_M,  /* llama.cpp's Q4_K_M mix of Q4_K and Q6_K; `type` is not used */
} genmodel_mix;

typedef struct {
    uint32_t dim;
    uint32_t hidden;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;      /* 0: dim / n_heads; else written as attention.key_length and value_length */
    uint32_t n_ctx;
    const char *vocab_from; /* a GGUF holding tokenizer.* metadata */
    ggml_type type;         /* of the matrices under GENMODEL_UNIFORM (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) */
    genmodel_mix mix;       /* GENMODEL_UNIFORM (0) unless set */
    bool tied;              /* no output.weight: the output matrix is token_embd */
    const char *arch;       /* "llama" (NULL), "qwen2", "qwen3", "smollm3", "phi3" or "gemma3" (model.h) */
    bool rope_freqs;        /* write rope_freqs.weight (Llama-3.1-style per-dimension frequency divisors) */
    uint32_t rope_dims;     /* rope.dimension_count; 0: the head size (partial rotary below it) */
    uint32_t window;        /* gemma3 (and phi3): attention.sliding_window; 0: none */
    uint32_t window_pattern;/* gemma3: attention.sliding_window_pattern (every Nth layer global); 0: not written (6) */
    uint64_t seed;
} genmodel_params;

/* Write the model to path. -1 with err naming the bad parameter or file. */
int genmodel_write(const genmodel_params *p, const char *path, fkv_error *err);

#endif
