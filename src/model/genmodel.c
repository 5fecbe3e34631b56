#include "model/genmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"
#include "kernels/quant.h"
#include "kernels/traits.h"
#include "model/model.h"

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Element i of tensor `key` in [-1, 1): counter-based, so independent of generation order. */
static float uniform(uint64_t key, uint64_t i) {
    return (float)((double)(splitmix64(key ^ splitmix64(i)) >> 40) / (double)(1ull << 23) - 1.0);
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and every third layer between,
 * are the ones whose attn_v and ffn_down matter most to quality. */
static bool use_more_bits(uint32_t i, uint32_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* llama.cpp's tensor_type_fallback: a type whose block does not divide the row length n_in gives way to a 32-element
 * type (Q2_K/Q3_K: Q4_0, Q4_K: Q5_0, Q5_K: Q5_1, Q6_K: Q8_0, IQ4_XS: IQ4_NL), and to F16 when that does not divide
 * it either. */
static ggml_type fallback_type(ggml_type type, uint32_t n_in) {
    uint32_t block, bytes;
    ggml_type_geometry(type, &block, &bytes);
    if (n_in % block == 0) return type;
    ggml_type to = type;
    switch (type) {
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K: to = GGML_TYPE_Q4_0; break;
    case GGML_TYPE_Q4_K: to = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K: to = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K: to = GGML_TYPE_Q8_0; break;
    case GGML_TYPE_IQ4_XS: to = GGML_TYPE_IQ4_NL; break;
    default: break;
    }
    ggml_type_geometry(to, &block, &bytes);
    return n_in % block == 0 ? to : GGML_TYPE_F16;
}

/* The mixes: the name gen-model gives each (--type, general.name) and its base type (genmodel.h). */
static const struct {
    genmodel_mix mix;
    const char *name;
    ggml_type base;
} mixes[] = {
    {GENMODEL_Q4_K_M, "q4_k_m", GGML_TYPE_Q4_K},
    {GENMODEL_Q5_K_M, "q5_k_m", GGML_TYPE_Q5_K},
    {GENMODEL_Q3_K_M, "q3_k_m", GGML_TYPE_Q3_K},
    {GENMODEL_MXFP4_MOE, "mxfp4_moe", GGML_TYPE_MXFP4},
};
#define N_MIXES (sizeof mixes / sizeof *mixes)

/* The row of mix; N_MIXES for GENMODEL_UNIFORM or a value no row has. */
static size_t mix_row(genmodel_mix mix) {
    size_t i = 0;
    while (i < N_MIXES && mixes[i].mix != mix) i++;
    return i;
}

int genmodel_type_by_name(const char *name, ggml_type *type, genmodel_mix *mix) {
    for (size_t i = 0; i < N_MIXES; i++)
        if (!strcmp(name, mixes[i].name)) {
            *type = mixes[i].base;
            *mix = mixes[i].mix;
            return 0;
        }
    *mix = GENMODEL_UNIFORM;
    return model_type_by_name(name, type);
}

const char *genmodel_type_names(char *buf, size_t cap, const char *sep) {
    model_type_names(buf, cap, sep);
    for (size_t i = 0, at = strlen(buf); i < N_MIXES && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", sep, mixes[i].name);
    return buf;
}

/* The type of matrix `name` with rows of n_in (the mix rules of genmodel.h), read from the name as llama.cpp's
 * llama_tensor_get_type does for llama-shaped models (no experts, no fused qkv). */
static ggml_type matrix_type(const genmodel_params *p, const char *name, uint32_t n_in) {
    if (p->mix == GENMODEL_UNIFORM) return p->type;
    if (p->mix == GENMODEL_MXFP4_MOE) return fallback_type(strstr(name, "_exps.") ? GGML_TYPE_MXFP4 : GGML_TYPE_Q8_0, n_in);
    const ggml_type base = mixes[mix_row(p->mix)].base;
    unsigned layer;
    char role[32];
    if (!strcmp(name, "output.weight") || (p->tied && !strcmp(name, "token_embd.weight")))
        return fallback_type(n_in % QK_K ? GGML_TYPE_Q8_0 : GGML_TYPE_Q6_K, n_in); /* the output's own rule */
    ggml_type type = base;
    if (sscanf(name, "blk.%u.%31s", &layer, role) == 2) {
        const bool more = use_more_bits(layer, p->n_layers);
        if (!strncmp(role, "ffn_down", 8)) strcpy(role, "ffn_down.weight"); /* _exps and _shexp too, as llama.cpp */
        if (!strcmp(role, "attn_v.weight"))
            type = p->mix == GENMODEL_Q3_K_M ? (layer < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K)
                   : more                    ? GGML_TYPE_Q6_K
                                             : base;
        else if (!strcmp(role, "ffn_down.weight"))
            type = p->mix == GENMODEL_Q3_K_M ? (layer < p->n_layers / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K)
                   : more                    ? GGML_TYPE_Q6_K
                                             : base;
        else if (!strcmp(role, "attn_output.weight") && p->mix == GENMODEL_Q3_K_M)
            type = GGML_TYPE_Q4_K;
    }
    return fallback_type(type, n_in);
}

/* What makes a tensor's data: rows of n_in elements center ± spread from the counter-based generator keyed by key,
 * quantized to type. */
typedef struct {
    uint64_t key;
    ggml_type type;
    uint32_t n_in;
    uint64_t n_rows;
    float center, spread;
} tensor_recipe;

/* gguf_fill_fn: the recipe's rows, made when the file is written (a large model is never all in memory) and in
 * parallel (each row depends on its index only, so the bytes do not depend on the threads). */
static int fill_tensor(const void *arg, void *dst, fkv_error *err) {
    const tensor_recipe *r = arg;
    const size_t row_bytes = ggml_row_size(r->type, r->n_in);
    int failed = 0;
#pragma omp parallel
    {
        float *row = malloc(sizeof(float) * r->n_in);
        if (!row) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (uint64_t i = 0; i < r->n_rows; i++) {
            if (!row) continue;
            for (uint32_t j = 0; j < r->n_in; j++)
                row[j] = r->center + r->spread * uniform(r->key, i * r->n_in + j);
            quant_quantize_row(r->type, row, (uint8_t *)dst + i * row_bytes, r->n_in);
        }
        free(row);
    }
    return failed ? err_nomem(err, "gen-model: out of memory generating a tensor") : 0;
}

/* Add tensor `name`: n_mat matrices of n_out rows × n_in (type from matrix_type; n_mat > 1: a 3-D tensor), or an
 * F32 vector of n_in when n_out is 0; center ± spread. f32: an F32 matrix whatever the type (a router). */
static int add_tensors(gguf_writer *w, const genmodel_params *p, const char *name, uint32_t n_in, uint32_t n_out,
                       uint32_t n_mat, bool f32, float center, float spread, fkv_error *err) {
    ggml_type type = n_out && !f32 ? matrix_type(p, name, n_in) : GGML_TYPE_F32;
    uint32_t block, block_bytes;
    ggml_type_geometry(type, &block, &block_bytes);
    if (n_in % block)
        return err_input(err, "gen-model: tensor '%s' has rows of %u elements, not a multiple of %s's block of %u",
                       name, n_in, ggml_type_name(type), block);
    const tensor_recipe r = {splitmix64(p->seed) ^ XXH3_64bits(name, strlen(name)), type, n_in,
                             (uint64_t)(n_out ? n_out : 1) * n_mat, center, spread};
    const uint64_t ne[3] = {n_in, n_out, n_mat};
    return gguf_writer_add_tensor_fill(w, name, type, n_out ? (n_mat > 1 ? 3 : 2) : 1, ne, fill_tensor, &r, sizeof r,
                                       err);
}

static int add_tensor(gguf_writer *w, const genmodel_params *p, const char *name, uint32_t n_in, uint32_t n_out,
                      float center, float spread, fkv_error *err) {
    return add_tensors(w, p, name, n_in, n_out, 1, false, center, spread, err);
}

/* The shared experts' width: --shared-experts times the expert width, at least one expert's with shared_gate. */
static uint32_t shared_width(const genmodel_params *p, const model_arch *a) {
    return (p->n_shared ? p->n_shared : a->shared_gate ? 1 : 0) * p->n_ff_exp;
}

/* Layer l's gated DeltaNet tensors (model.h's model_gdn), as Qwen3.5's converter writes them. */
static int add_gdn(gguf_writer *w, const genmodel_params *p, uint32_t l, fkv_error *err) {
    char t[64];
#define T(suffix) (snprintf(t, sizeof t, "blk.%u." suffix, l), t)
    const uint32_t d = p->ssm_d, hv = p->ssm_v_heads, conv_dim = (2 * p->ssm_k_heads + hv) * d;
    const float s_dim = sqrtf(3.0f / (float)p->dim), s_v = sqrtf(3.0f / (float)(hv * d));
    return add_tensor(w, p, T("attn_qkv.weight"), p->dim, conv_dim, 0.0f, s_dim, err) ||
           add_tensor(w, p, T("attn_gate.weight"), p->dim, hv * d, 0.0f, s_dim, err) ||
           add_tensors(w, p, T("ssm_conv1d.weight"), p->ssm_conv, conv_dim, 1, true, 0.0f, 0.5f, err) ||
           add_tensor(w, p, T("ssm_beta.weight"), p->dim, hv, 0.0f, s_dim, err) ||
           add_tensor(w, p, T("ssm_alpha.weight"), p->dim, hv, 0.0f, s_dim, err) ||
           add_tensor(w, p, T("ssm_dt.bias"), hv, 0, 0.0f, 1.0f, err) ||
           add_tensor(w, p, T("ssm_a"), hv, 0, -2.0f, 1.5f, err) || /* -exp(A_log): decays of every speed */
           add_tensor(w, p, T("ssm_norm.weight"), d, 0, 1.0f, 0.1f, err) ||
           add_tensor(w, p, T("ssm_out.weight"), hv * d, p->dim, 0.0f, s_v, err);
#undef T
}

/* Layer l's FFN input norm and its FFN: dense (feed_forward_length), or routed experts and any shared ones. */
static int add_ffn(gguf_writer *w, const genmodel_params *p, const model_arch *a, uint32_t l, fkv_error *err) {
    char t[64];
#define T(suffix) (snprintf(t, sizeof t, "blk.%u." suffix, l), t)
    if (add_tensor(w, p, a->ffn_post_name ? T("post_attention_norm.weight") : T("ffn_norm.weight"), p->dim, 0, 1.0f,
                   0.1f, err))
        return -1;
    const float s_dim = sqrtf(3.0f / (float)p->dim);
    if (!a->experts || l < p->n_dense_lead) {
        const float s_hidden = sqrtf(3.0f / (float)p->hidden);
        return (a->fused ? add_tensor(w, p, T("ffn_up.weight"), p->dim, 2 * p->hidden, 0.0f, s_dim, err) /* [gate; up] */
                         : add_tensor(w, p, T("ffn_gate.weight"), p->dim, p->hidden, 0.0f, s_dim, err) ||
                               add_tensor(w, p, T("ffn_up.weight"), p->dim, p->hidden, 0.0f, s_dim, err)) ||
               add_tensor(w, p, T("ffn_down.weight"), p->hidden, p->dim, 0.0f, s_hidden, err);
    }
    const uint32_t ff = p->n_ff_exp, sh = shared_width(p, a);
    const float s_ff = sqrtf(3.0f / (float)ff);
    return add_tensors(w, p, T("ffn_gate_inp.weight"), p->dim, p->n_expert, 1, true, 0.0f, s_dim, err) ||
           (a->shared_gate && add_tensor(w, p, T("ffn_gate_inp_shexp.weight"), p->dim, 0, 0.0f, s_dim, err)) ||
           (a->expert_biases &&
            (add_tensor(w, p, T("ffn_gate_inp.bias"), p->n_expert, 0, 0.0f, 0.5f, err) ||
             add_tensors(w, p, T("ffn_gate_exps.bias"), ff, p->n_expert, 1, true, 0.0f, 0.5f, err) ||
             add_tensors(w, p, T("ffn_up_exps.bias"), ff, p->n_expert, 1, true, 0.0f, 0.5f, err) ||
             add_tensors(w, p, T("ffn_down_exps.bias"), p->dim, p->n_expert, 1, true, 0.0f, 0.5f, err))) ||
           (a->select_bias && add_tensor(w, p, T("exp_probs_b.bias"), p->n_expert, 0, 0.0f, 0.05f, err)) ||
           add_tensors(w, p, T("ffn_gate_exps.weight"), p->dim, ff, p->n_expert, false, 0.0f, s_dim, err) ||
           add_tensors(w, p, T("ffn_up_exps.weight"), p->dim, ff, p->n_expert, false, 0.0f, s_dim, err) ||
           add_tensors(w, p, T("ffn_down_exps.weight"), ff, p->dim, p->n_expert, false, 0.0f, s_ff, err) ||
           (sh && (add_tensor(w, p, T("ffn_gate_shexp.weight"), p->dim, sh, 0.0f, s_dim, err) ||
                   add_tensor(w, p, T("ffn_up_shexp.weight"), p->dim, sh, 0.0f, s_dim, err) ||
                   add_tensor(w, p, T("ffn_down_shexp.weight"), sh, p->dim, 0.0f, sqrtf(3.0f / (float)sh), err)));
#undef T
}

/* The vocabulary copied from vocab, with p->tokens it lacks appended (tokenizer.ggml.tokens, token_type and, when the
 * file has them, scores: 0), the special-token keys p->tokens name set to their ids, and p->chat_template as
 * tokenizer.chat_template. The number of tokens appended, or -1 with err. */
static int append_chat_tokens(gguf_writer *w, const gguf_file *vocab, const genmodel_params *p, fkv_error *err) {
    if (p->chat_template) gguf_writer_set_str(w, "tokenizer.chat_template", p->chat_template);
    if (!p->n_tokens) return 0;
    const gguf_value *tokens = gguf_find(vocab, "tokenizer.ggml.tokens"), *types = gguf_find(vocab, "tokenizer.ggml.token_type");
    const gguf_value *scores = gguf_find(vocab, "tokenizer.ggml.scores");
    const size_t n = (size_t)tokens->arr.n, cap = n + p->n_tokens;
    if ((types && (types->type != GGUF_TYPE_ARRAY || types->arr.n != n)) ||
        (scores && (scores->type != GGUF_TYPE_ARRAY || scores->arr.n != n)))
        return err_input(err, "%s: token_type or scores does not have one entry per token", p->vocab_from);
    gguf_str *texts = malloc(sizeof *texts * cap);
    int32_t *type = malloc(sizeof *type * cap);
    float *score = malloc(sizeof *score * cap);
    size_t added = 0;
    int rc = -1;
    if (!texts || !type || !score) {
        err_nomem(err, "gen-model: out of memory for the vocabulary");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        texts[i] = tokens->arr.items[i].str;
        type[i] = types ? (int32_t)gguf_arr_int(types, i) : 1; /* NORMAL */
        score[i] = scores ? (float)gguf_arr_float(scores, i) : 0.0f;
    }
    for (size_t k = 0; k < p->n_tokens; k++) {
        const genmodel_token *t = &p->tokens[k];
        size_t id = 0;
        while (id < n + added && !(texts[id].len == strlen(t->text) && !memcmp(texts[id].ptr, t->text, texts[id].len)))
            id++;
        if (id == n + added) {
            texts[id] = (gguf_str){t->text, strlen(t->text)};
            type[id] = t->user_defined ? 4 : 3; /* USER_DEFINED, CONTROL */
            score[id] = 0.0f;
            added++;
        }
        if (t->special) {
            char key[64];
            snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", t->special);
            gguf_writer_set_u32(w, key, (uint32_t)id);
        }
    }
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", texts, n + added);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type, n + added);
    if (scores) gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, score, n + added);
    rc = (int)added;
out:
    free(texts);
    free(type);
    free(score);
    return rc;
}

/* 0, or -1 with err naming the parameter at fault; a: the architecture p->arch names (NULL: none). */
static int check_params(const genmodel_params *p, const char *arch, const model_arch *a, fkv_error *err) {
    if (!a) {
        char names[128];
        return err_input(err, "gen-model: --arch must be %s, got '%s'",
                         model_arch_names(names, sizeof names, ", ", " or "), arch);
    }
    if (!p->dim || !p->hidden || !p->n_layers || !p->n_heads || !p->n_kv_heads || !p->n_ctx)
        return err_input(err, "gen-model: dim, hidden, layers, heads, kv-heads and ctx must all be positive");
    const uint32_t head_dim = p->head_dim ? p->head_dim : p->dim / p->n_heads;
    if (p->rope_dims && (p->rope_dims % 2 || p->rope_dims > head_dim))
        return err_input(err, "gen-model: --rope-dims %u must be even and at most the head size %u", p->rope_dims,
                       head_dim);
    if ((p->window || p->window_pattern) && !a->swa && !a->window_ignored)
        return err_input(err, "gen-model: --window and --window-pattern are for an architecture whose files have "
                              "attention.sliding_window; %s has none", arch);
    if (!p->head_dim && p->n_heads && (p->dim % p->n_heads || (p->dim / p->n_heads) % 2))
        return err_input(err, "gen-model: dim %u must split into %u heads of an even size (or give --head-dim)", p->dim,
                       p->n_heads);
    if (p->head_dim % 2) return err_input(err, "gen-model: --head-dim %u must be even", p->head_dim);
    if (p->n_heads % p->n_kv_heads)
        return err_input(err, "gen-model: heads %u must be a multiple of kv-heads %u", p->n_heads, p->n_kv_heads);
    if (p->mix != GENMODEL_UNIFORM && mix_row(p->mix) == N_MIXES)
        return err_input(err, "gen-model: unknown type mix %d", (int)p->mix);
    if ((p->n_expert || p->n_expert_used || p->n_ff_exp || p->n_shared || p->n_dense_lead) && !a->experts)
        return err_input(err, "gen-model: --experts, --experts-used, --expert-hidden, --shared-experts and "
                              "--dense-layers are for an architecture with experts; %s has none", arch);
    if (a->experts && (p->n_expert_used > p->n_expert || !p->n_ff_exp || p->n_dense_lead > p->n_layers))
        return err_input(err, "gen-model: --experts-used %u must be at most --experts %u, the expert width positive "
                              "and --dense-layers %u at most the layers", p->n_expert_used, p->n_expert,
                         p->n_dense_lead);
    if ((p->ssm_d || p->ssm_k_heads || p->ssm_v_heads || p->ssm_conv || p->attn_interval) && !a->recurrent)
        return err_input(err, "gen-model: --ssm-state, --ssm-k-heads, --ssm-v-heads, --ssm-conv and --attn-interval "
                              "are for an architecture with gated DeltaNet layers; %s has none", arch);
    if (a->recurrent && (!p->ssm_d || p->ssm_v_heads % p->ssm_k_heads))
        return err_input(err, "gen-model: the gated DeltaNet heads (--ssm-state %u) must be positive and --ssm-v-heads "
                              "%u a multiple of --ssm-k-heads %u", p->ssm_d, p->ssm_v_heads, p->ssm_k_heads);
    if (p->mix == GENMODEL_UNIFORM && !kern_type_traits(p->type))
        return err_unsupported(err, "gen-model: type %s is not one flatkv computes", ggml_type_name(p->type));
    return 0;
}

int genmodel_write(const genmodel_params *params, const char *path, fkv_error *err) {
    genmodel_params pd = *params;
    const genmodel_params *p = &pd;
    const char *arch = p->arch ? p->arch : "llama";
    const model_arch *a = model_arch_find(arch, strlen(arch));
    if (a && a->experts) {
        pd.n_expert = pd.n_expert ? pd.n_expert : 8;
        pd.n_expert_used = pd.n_expert_used ? pd.n_expert_used : 2;
        pd.n_ff_exp = pd.n_ff_exp ? pd.n_ff_exp : pd.hidden / 2;
    }
    const uint32_t head_dim = p->head_dim ? p->head_dim : p->n_heads ? p->dim / p->n_heads : 0;
    if (a && a->recurrent) { /* the defaults of genmodel.h's hybrids */
        pd.ssm_d = pd.ssm_d ? pd.ssm_d : head_dim / 2;
        pd.ssm_v_heads = pd.ssm_v_heads ? pd.ssm_v_heads : 2 * pd.n_heads;
        pd.ssm_k_heads = pd.ssm_k_heads ? pd.ssm_k_heads : pd.ssm_v_heads % 16 ? pd.ssm_v_heads : 16;
        pd.ssm_conv = pd.ssm_conv ? pd.ssm_conv : 4;
        pd.attn_interval = pd.attn_interval ? pd.attn_interval : 4;
        pd.rope_dims = pd.rope_dims ? pd.rope_dims : head_dim / 8 * 2 > 2 ? head_dim / 8 * 2 : 2;
    }
    if (check_params(p, arch, a, err)) return -1;
    gguf_file *vocab = gguf_open(p->vocab_from, err);
    if (!vocab) return -1;
    const gguf_value *tokens = gguf_find(vocab, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GGUF_TYPE_ARRAY || tokens->arr.elem_type != GGUF_TYPE_STRING) {
        err_input(err, "%s: no tokenizer.ggml.tokens array of strings to take the vocabulary from", p->vocab_from);
        gguf_close(vocab);
        return -1;
    }
    uint32_t n_vocab = (uint32_t)tokens->arr.n;
    gguf_writer *w = gguf_writer_new();
    gguf_writer_copy_kv(w, vocab, "tokenizer.", NULL);
    const int added = append_chat_tokens(w, vocab, p, err);
    gguf_close(vocab);
    if (added < 0) {
        gguf_writer_free(w);
        return -1;
    }
    n_vocab += (uint32_t)added;

    char name[128];
    const bool tied = p->tied || a->tied;
    snprintf(name, sizeof name, "flatkv-gen %s d%u h%u l%u %s", a->name, p->dim, p->hidden, p->n_layers,
             p->mix == GENMODEL_UNIFORM ? ggml_type_name(p->type) : mixes[mix_row(p->mix)].name);
    gguf_writer_set_str(w, "general.architecture", a->name);
    gguf_writer_set_str(w, "general.name", name);
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a->name), key)
    gguf_writer_set_u32(w, KEY("context_length"), p->n_ctx);
    gguf_writer_set_u32(w, KEY("embedding_length"), p->dim);
    gguf_writer_set_u32(w, KEY("feed_forward_length"), p->hidden);
    gguf_writer_set_u32(w, KEY("block_count"), p->n_layers + p->n_nextn);
    if (p->n_nextn) gguf_writer_set_u32(w, KEY("nextn_predict_layers"), p->n_nextn);
    if (a->experts) {
        gguf_writer_set_u32(w, KEY("expert_count"), p->n_expert);
        gguf_writer_set_u32(w, KEY("expert_used_count"), p->n_expert_used);
        gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), p->n_ff_exp);
        if (a->shared_gate)
            gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), shared_width(p, a));
        else if (p->n_shared)
            gguf_writer_set_u32(w, KEY("expert_shared_count"), p->n_shared);
        if (p->n_dense_lead) gguf_writer_set_u32(w, KEY("leading_dense_block_count"), p->n_dense_lead);
        if (a->routing_keys) { /* as GLM-4.5's converter writes them */
            gguf_writer_set_u32(w, KEY("expert_gating_func"), (uint32_t)a->gating);
            gguf_writer_set_bool(w, KEY("expert_weights_norm"), true);
            gguf_writer_set_f32(w, KEY("expert_weights_scale"), 1.0f);
        }
    }
    gguf_writer_set_u32(w, KEY("attention.head_count"), p->n_heads);
    gguf_writer_set_u32(w, KEY("attention.head_count_kv"), p->n_kv_heads);
    const uint32_t n_rot = p->rope_dims ? p->rope_dims : head_dim;
    if (a->recurrent) { /* as Qwen3.5's converter writes them */
        gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), p->ssm_conv);
        gguf_writer_set_u32(w, KEY("ssm.state_size"), p->ssm_d);
        gguf_writer_set_u32(w, KEY("ssm.group_count"), p->ssm_k_heads);
        gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), p->ssm_v_heads);
        gguf_writer_set_u32(w, KEY("ssm.inner_size"), p->ssm_v_heads * p->ssm_d);
        gguf_writer_set_u32(w, KEY("full_attention_interval"), p->attn_interval);
    }
    if (a->rope_sections) { /* the rotated pairs in thirds: [11, 11, 10, 0] for 32 of them */
        const int32_t pairs = (int32_t)n_rot / 2, sections[4] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
        gguf_writer_set_arr(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sections, 4);
    }
    if (p->head_dim || a->head_size_keys) {
        gguf_writer_set_u32(w, KEY("attention.key_length"), head_dim);
        gguf_writer_set_u32(w, KEY("attention.value_length"), head_dim);
    }
    gguf_writer_set_u32(w, KEY("rope.dimension_count"), n_rot);
    gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), a->rms_eps);
    gguf_writer_set_f32(w, KEY("rope.freq_base"), p->rope_freqs ? 500000.0f : a->rope_base);
    if (a->swa && p->window) gguf_writer_set_u32(w, KEY("attention.sliding_window"), p->window);
    if (a->swa && p->window_pattern) gguf_writer_set_u32(w, KEY("attention.sliding_window_pattern"), p->window_pattern);
    /* LongRoPE, as Phi-3's converter writes it for a model trained at n_ctx/2 and extended to n_ctx:
     * attn_factor = sqrt(1 + ln(scale) / ln(original context)), scale = n_ctx / original. */
    const uint32_t orig_ctx = p->n_ctx / 2 ? p->n_ctx / 2 : 1;
    if (a->long_rope) {
        gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), orig_ctx);
        const double scale = (double)p->n_ctx / orig_ctx;
        gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"),
                            scale > 1.0 && orig_ctx > 1 ? (float)sqrt(1.0 + log(scale) / log((double)orig_ctx)) : 1.0f);
    }
    if (a->window_ignored) gguf_writer_set_u32(w, KEY("attention.sliding_window"), p->window);
    if (a->yarn) { /* as gpt-oss's converter writes them */
        gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
        gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 32.0f);
        gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 4096);
    }
#undef KEY

    const uint32_t q_dim = p->n_heads * head_dim, kv_dim = p->n_kv_heads * head_dim;
    const float s_dim = sqrtf(3.0f / (float)p->dim);
    /* Embeddings scaled by sqrt(dim) (Gemma 3) are drawn that much smaller, as a trained model's are. */
    int rc = add_tensor(w, p, "token_embd.weight", p->dim, n_vocab, 0.0f, a->embd_scale ? s_dim : 1.0f, err) ||
             add_tensor(w, p, "output_norm.weight", p->dim, 0, 1.0f, 0.1f, err) ||
             (!tied && add_tensor(w, p, "output.weight", p->dim, n_vocab, 0.0f, s_dim, err)) ||
             (p->rope_freqs && add_tensor(w, p, "rope_freqs.weight", n_rot / 2, 0, 4.0f, 3.0f, err)) ||
             (a->long_rope && (add_tensor(w, p, "rope_factors_short.weight", n_rot / 2, 0, 1.1f, 0.1f, err) ||
                              add_tensor(w, p, "rope_factors_long.weight", n_rot / 2, 0, 4.0f, 3.0f, err)));
    for (uint32_t l = 0; l < p->n_layers + p->n_nextn && !rc; l++) {
        char t[64];
#define T(suffix) (snprintf(t, sizeof t, "blk.%u." suffix, l), t)
        const bool gdn = a->recurrent && l < p->n_layers && (l + 1) % p->attn_interval != 0;
        rc = add_tensor(w, p, T("attn_norm.weight"), p->dim, 0, 1.0f, 0.1f, err) ||
             (gdn ? add_gdn(w, p, l, err)
                  : (a->fused ? add_tensor(w, p, T("attn_qkv.weight"), p->dim, q_dim + 2 * kv_dim, 0.0f, s_dim, err)
                              : add_tensor(w, p, T("attn_q.weight"), p->dim, a->attn_gate ? 2 * q_dim : q_dim, 0.0f,
                                           s_dim, err) ||
                                    add_tensor(w, p, T("attn_k.weight"), p->dim, kv_dim, 0.0f, s_dim, err) ||
                                    add_tensor(w, p, T("attn_v.weight"), p->dim, kv_dim, 0.0f, s_dim, err)) ||
                        add_tensor(w, p, T("attn_output.weight"), q_dim, p->dim, 0.0f, sqrtf(3.0f / (float)q_dim),
                                   err)) ||
             add_ffn(w, p, a, l, err) ||
             (a->out_bias && add_tensor(w, p, T("attn_output.bias"), p->dim, 0, 0.0f, 0.5f, err)) ||
             (a->sinks && add_tensor(w, p, T("attn_sinks.weight"), p->n_heads, 0, 0.0f, 2.0f, err)) ||
             (a->qkv_bias && (add_tensor(w, p, T("attn_q.bias"), q_dim, 0, 0.0f, 0.5f, err) ||
                              add_tensor(w, p, T("attn_k.bias"), kv_dim, 0, 0.0f, 0.5f, err) ||
                              add_tensor(w, p, T("attn_v.bias"), kv_dim, 0, 0.0f, 0.5f, err))) ||
             (a->qk_norm && !gdn && (add_tensor(w, p, T("attn_q_norm.weight"), head_dim, 0, 1.0f, 0.1f, err) ||
                                     add_tensor(w, p, T("attn_k_norm.weight"), head_dim, 0, 1.0f, 0.1f, err))) ||
             (a->post_norms && (add_tensor(w, p, T("post_attention_norm.weight"), p->dim, 0, 1.0f, 0.1f, err) ||
                                add_tensor(w, p, T("post_ffw_norm.weight"), p->dim, 0, 1.0f, 0.1f, err))) ||
             (l >= p->n_layers && (add_tensor(w, p, T("nextn.eh_proj.weight"), 2 * p->dim, p->dim, 0.0f,
                                              sqrtf(1.5f / (float)p->dim), err) ||
                                   add_tensor(w, p, T("nextn.enorm.weight"), p->dim, 0, 1.0f, 0.1f, err) ||
                                   add_tensor(w, p, T("nextn.hnorm.weight"), p->dim, 0, 1.0f, 0.1f, err) ||
                                   (p->nextn_embed && add_tensor(w, p, T("nextn.embed_tokens.weight"), p->dim,
                                                                 n_vocab, 0.0f, 1.0f, err)) ||
                                   (p->nextn_head && add_tensor(w, p, T("nextn.shared_head_head.weight"), p->dim,
                                                                n_vocab, 0.0f, s_dim, err))));
#undef T
    }
    if (!rc) rc = gguf_writer_write(w, path, err);
    gguf_writer_free(w);
    return rc ? -1 : 0;
}
