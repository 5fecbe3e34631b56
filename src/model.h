/* model.h — a llama-architecture model: hyperparameters and weights, read from a GGUF file.
 *
 * WHY: everything GGUF labels `llama` (and `qwen2`, the same computation with q/k/v biases and rotary
 * pairs taken as halves) (Llama 1/2, TinyLlama, Mistral-style GQA models, the llama2.c
 * TinyStories models) shares one computation whose shapes and constants all come from metadata. This
 * module turns the file into that description and refuses, with the key or tensor named, anything the
 * forward pass could not compute correctly — so the forward pass itself never checks shapes.
 *
 * INVARIANT: a loaded model's every matrix has exactly the shape the hyperparameters imply (checked
 * tensor by tensor at load), a type flatkv computes (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), and its data inside
 * the mapped file. Norm vectors are copied to f32. The weights are borrowed from the mapping, which the
 * model keeps open until model_free; the layers' matrices and an untied output matrix are copied at load into
 * memory the model owns (on huge pages where the system gives them), packed where the kernels take them so
 * (quant_packs: Q8_0, Q4_0, Q4_K, Q6_K).
 *
 * Tensor names and shapes (ne[0] is the row length, i.e. the input dimension of a matrix):
 *   token_embd.weight [dim, n_vocab]      output_norm.weight [dim]     output.weight [dim, n_vocab]
 *   blk.L.attn_norm.weight [dim]          blk.L.ffn_norm.weight [dim]
 *   blk.L.attn_q.weight [dim, n_heads*head_dim]   blk.L.attn_k/attn_v.weight [dim, n_kv_heads*head_dim]
 *   blk.L.attn_output.weight [n_heads*head_dim, dim]
 *   blk.L.ffn_gate/ffn_up.weight [dim, hidden]    blk.L.ffn_down.weight [hidden, dim]
 * output.weight absent means tied embeddings (the output matrix is token_embd).
 *
 * Thread-safety: immutable after model_load.
 */
#ifndef FKV_MODEL_H
#define FKV_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "ops.h"
#include "tok.h"

typedef struct {
    float *attn_norm; /* [dim] */
    ops_matrix wq, wk, wv, wo;
    float *bq, *bk, *bv; /* [q_dim], [kv_dim], [kv_dim] biases added after the products, or NULL */
    float *ffn_norm; /* [dim] */
    ops_matrix w_gate, w_up, w_down;
} model_layer;

typedef struct {
    char arch[16];    /* "llama" or "qwen2" */
    bool rope_halves; /* rotate (x[i], x[i + n_rot/2]) — GGUF's "neox" order — instead of adjacent pairs */
    bool qkv_bias;    /* the architecture has q, k, v biases */
    uint32_t n_vocab;
    uint32_t n_ctx_train;
    uint32_t dim;
    uint32_t hidden;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t n_rot;     /* leading dims of each head that are rotated (llama.rope.dimension_count) */
    float rms_eps;
    float rope_base;
    float rope_scale;   /* linear position scaling: rotary angle uses pos / rope_scale */
} model_hparams;

struct fkv_model {
    gguf_file *file;
    char *name; /* general.name, or the file name */
    model_hparams hp;
    ops_matrix tok_embd;
    ops_matrix output; /* aliases tok_embd when tied */
    float *output_norm;
    float *rope_freqs; /* [n_rot/2] divisors of the rotary frequencies (rope_freqs.weight), or NULL */
    model_layer *layers;
    tok_vocab *vocab;
    char *chat_template; /* tokenizer.chat_template, or NULL */
    void *packed;        /* the matrices' memory, one allocation (pack_weights in model.c) */
    const char *kernels; /* the kernel variant the matrices are laid out for (quant_kernels() at load) */
};

/* Load and validate (see INVARIANT); NULL with err naming the file and the key or tensor at fault. */
fkv_model *fkv_model_load(const char *path, fkv_error *err);
void fkv_model_free(fkv_model *m);

#endif
