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
 */
#ifndef FKV_GENMODEL_H
#define FKV_GENMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"

typedef struct {
    uint32_t dim;
    uint32_t hidden;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t n_ctx;
    const char *vocab_from; /* a GGUF holding tokenizer.* metadata */
    ggml_type type;         /* of the matrices (F32, F16, BF16, Q8_0, Q4_0); norms are always F32 */
    bool tied;              /* no output.weight: the output matrix is token_embd */
    const char *arch;       /* "llama" (NULL) or "qwen2" (q/k/v biases, rotary pairs as halves) */
    bool rope_freqs;        /* write rope_freqs.weight (Llama-3.1-style per-dimension frequency divisors) */
    uint64_t seed;
} genmodel_params;

/* Write the model to path. -1 with err naming the bad parameter or file. */
int genmodel_write(const genmodel_params *p, const char *path, fkv_error *err);

#endif
