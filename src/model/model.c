#include "model/model.h"

#include "constrain/grammar.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/err.h"
#include "base/hugemem.h"
#include "cache/kv.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/traits.h"

static bool type_is_computed(ggml_type t) { return kern_type_traits(t) != NULL; }

int fkv_kernels_select(const char *name, fkv_error *err) {
    char why[200];
    if (kern_select(name, why, sizeof why)) return err_input(err, "%s", why);
    return 0;
}

const char *fkv_kernels_name(void) { return kern_active()->name; }

/* Find a tensor and check its dims exactly: n_dims of them, ne[d] each. */
static const gguf_tensor *find_dims(const gguf_file *f, const char *name, uint32_t n_dims, const uint64_t *ne,
                                    bool required, fkv_error *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        if (required) err_input(err, "%s: required tensor '%s' is missing", f->path, name);
        return NULL;
    }
    bool ok = t->n_dims == n_dims;
    for (uint32_t d = 0; ok && d < n_dims; d++) ok = t->ne[d] == ne[d];
    if (!ok) {
        char want[96], got[96];
        int wl = snprintf(want, sizeof want, "["), gl = snprintf(got, sizeof got, "[");
        for (uint32_t d = 0; d < n_dims; d++)
            wl += snprintf(want + wl, sizeof want - (size_t)wl, "%s%llu", d ? ", " : "", (unsigned long long)ne[d]);
        for (uint32_t d = 0; d < t->n_dims && gl < (int)sizeof got; d++)
            gl += snprintf(got + gl, sizeof got - (size_t)gl, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
        snprintf(want + wl, sizeof want - (size_t)wl, "]");
        if (gl < (int)sizeof got) snprintf(got + gl, sizeof got - (size_t)gl, "]");
        err_input(err, "%s: tensor '%s' has dims %s, but the architecture needs %s", f->path, name, got, want);
        return NULL;
    }
    if (!type_is_computed(t->type)) {
        char names[256];
        err_unsupported(err, "%s: tensor '%s' has type %s, which flatkv does not compute (supported: %s)", f->path, name,
                        ggml_type_name(t->type), model_type_names(names, sizeof names, ", "));
        return NULL;
    }
    return t;
}

/* A matrix [n_in, n_out], or (n_out 0) a vector [n_in]. */
static const gguf_tensor *find_checked(const gguf_file *f, const char *name, uint32_t n_in, uint32_t n_out,
                                       bool required, fkv_error *err) {
    return find_dims(f, name, n_out ? 2 : 1, (const uint64_t[]){n_in, n_out}, required, err);
}

/* The n_out rows of n_in elements of tensor t (of any dims whose product past the first is n_out). */
static void matrix_of(const gguf_tensor *t, uint32_t n_in, uint32_t n_out, ops_matrix *out) {
    *out = (ops_matrix){.type = t->type, .n_in = n_in, .n_out = n_out, .row_bytes = ggml_row_size(t->type, n_in),
                        .data = t->data};
}

static int load_matrix(const gguf_file *f, const char *name, uint32_t n_in, uint32_t n_out, ops_matrix *out,
                       fkv_error *err) {
    const gguf_tensor *t = find_checked(f, name, n_in, n_out, true, err);
    if (!t) return -1;
    matrix_of(t, n_in, n_out, out);
    return 0;
}

/* x > 0 and finite (a NaN is neither). */
static bool positive(float x) { return x > 0.0f && isfinite(x); }

/* A vector [n_in], or (n_out > 1) n_out of them [n_in, n_out] (per-expert biases), copied to f32. */
static float *load_floats(const gguf_file *f, const char *name, uint32_t n_in, uint32_t n_out, fkv_error *err) {
    const gguf_tensor *t = find_dims(f, name, n_out > 1 ? 2 : 1, (const uint64_t[]){n_in, n_out}, true, err);
    if (!t) return NULL;
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_BF16) {
        err_input(err, "%s: tensor '%s' is quantized (%s); a norm, bias or filter must be f32, f16 or bf16", f->path, name,
                  ggml_type_name(t->type));
        return NULL;
    }
    const size_t n = (size_t)n_in * n_out;
    float *v = malloc(sizeof(float) * n);
    if (!v) {
        err_nomem(err, "%s: out of memory copying '%s'", f->path, name);
        return NULL;
    }
    quant_dequantize_row(t->type, t->data, v, n);
    return v;
}

static float *load_vector(const gguf_file *f, const char *name, uint32_t n, fkv_error *err) {
    return load_floats(f, name, n, 1, err);
}

/* The architectures flatkv computes: how each differs from llama's computation and what its converter writes
 * (model_arch in model.h); everything else comes from metadata. Facts from llama.cpp's src/models/<arch>.cpp: qwen3,
 * phi3 and gemma3 rotate halves; smollm3 rotates adjacent pairs and leaves every 4th layer without rope (a constant
 * there, no key); phi3's sliding window is disabled there ("Phi SWA is currently disabled"). qwen3moe is qwen3 with
 * experts, softmax routing, weights renormalised (always: qwen3moe.cpp passes true); glm4moe (glm4-moe.cpp) rotates
 * halves, has q/k/v biases and, in some sizes, q/k norms, normalises the FFN input with post_attention_norm, routes
 * by sigmoid unless expert_gating_func says otherwise, and adds its shared experts unweighted. gpt-oss (openai-moe.cpp):
 * halves, q/k/v and output biases, attention sinks, window layers on even layers (period 2) rotating as the others
 * (YaRN included), softmax over the selected experts' biased logits, biased experts with the clamped SwiGLU. qwen35
 * (qwen35.cpp, delta-net-base.cpp): gated DeltaNet layers and gated attention ones with q/k norms, interleaved M-RoPE
 * (text positions: halves), the FFN's norm stored as post_attention_norm; qwen35moe (qwen35moe.cpp) the same with
 * qwen3moe's routing (softmax, renormalised, no scale: its graph reads no expert_weights_scale) and a shared expert
 * gated by sigmoid. */
static const model_arch archs[] = {
    {.name = "llama", .rms_eps = 1e-5f, .rope_base = 10000.0f},
    {.name = "qwen2", .rope_halves = true, .qkv_bias = true, .rms_eps = 1e-5f, .rope_base = 10000.0f},
    {.name = "qwen3", .rope_halves = true, .qk_norm = true, .rms_eps = 1e-5f, .rope_base = 10000.0f},
    {.name = "smollm3", .nope_step = 4, .rms_eps = 1e-5f, .rope_base = 10000.0f},
    {.name = "phi3", .rope_halves = true, .fused = true, .long_rope = true, .window_ignored = true, .rms_eps = 1e-5f,
     .rope_base = 10000.0f},
    {.name = "gemma3", .rope_halves = true, .qk_norm = true, .post_norms = true, .embd_scale = true, .gelu = true,
     .swa = true, .tied = true, .head_size_keys = true, .rms_eps = 1e-6f, .rope_base = 1000000.0f},
    {.name = "qwen3moe", .rope_halves = true, .qk_norm = true, .experts = true, .gating = OPS_GATE_SOFTMAX,
     .expert_norm = true, .head_size_keys = true, .rms_eps = 1e-6f, .rope_base = 1000000.0f},
    {.name = "glm4moe", .rope_halves = true, .qkv_bias = true, .experts = true, .gating = OPS_GATE_SIGMOID,
     .routing_keys = true, .ffn_post_name = true, .select_bias = true, .head_size_keys = true, .rms_eps = 1e-5f, .rope_base = 1000000.0f},
    {.name = "gpt-oss", .rope_halves = true, .qkv_bias = true, .out_bias = true, .sinks = true, .experts = true,
     .gating = OPS_GATE_SOFTMAX_WEIGHT, .expert_biases = true, .swiglu_oai = true, .ffn_post_name = true, .swa = true,
     .swa_period = 2, .swa_same_rope = true, .yarn = true, .head_size_keys = true, .rms_eps = 1e-5f, .rope_base = 150000.0f},
    {.name = "qwen35", .rope_halves = true, .qk_norm = true, .ffn_post_name = true, .recurrent = true, .attn_gate = true,
     .rope_sections = true, .head_size_keys = true, .rms_eps = 1e-6f, .rope_base = 10000000.0f},
    {.name = "qwen35moe", .rope_halves = true, .qk_norm = true, .ffn_post_name = true, .recurrent = true,
     .attn_gate = true, .rope_sections = true, .experts = true, .gating = OPS_GATE_SOFTMAX, .expert_norm = true,
     .shared_gate = true, .head_size_keys = true, .rms_eps = 1e-6f, .rope_base = 10000000.0f},
};
#define N_ARCHS (sizeof archs / sizeof *archs)

const model_arch *model_arch_find(const char *name, size_t len) {
    for (size_t a = 0; a < N_ARCHS; a++)
        if (strlen(archs[a].name) == len && !memcmp(archs[a].name, name, len)) return &archs[a];
    return NULL;
}

/* name appended to buf[0..cap) at *at, after sep unless it is the first (*at 0); cut at cap, NUL-terminated. */
static void names_put(char *buf, size_t cap, size_t *at, const char *sep, const char *name) {
    if (*at < cap) *at += (size_t)snprintf(buf + *at, cap - *at, "%s%s", *at ? sep : "", name);
}

const char *model_arch_names(char *buf, size_t cap, const char *sep, const char *last) {
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (size_t a = 0; a < N_ARCHS; a++) names_put(buf, cap, &at, a + 1 < N_ARCHS ? sep : last, archs[a].name);
    return buf;
}

/* The lower-case name of type t into name[16], or NULL when t is not computed. */
static const char *type_lower_name(ggml_type t, char name[16]) {
    if (!type_is_computed(t)) return NULL;
    const char *s = ggml_type_name(t);
    size_t i = 0;
    for (; s[i] && i < 15; i++) name[i] = (char)tolower((unsigned char)s[i]);
    name[i] = 0;
    return name;
}

const char *model_type_names(char *buf, size_t cap, const char *sep) {
    size_t at = 0;
    char name[16];
    if (cap) buf[0] = 0;
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (type_lower_name((ggml_type)t, name)) names_put(buf, cap, &at, sep, name);
    return buf;
}

int model_type_by_name(const char *name, ggml_type *type) {
    char lower[16];
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (type_lower_name((ggml_type)t, lower) && !strcmp(name, lower)) {
            *type = (ggml_type)t;
            return 0;
        }
    return -1;
}

/* The most experts a layer may have (llama.cpp's LLAMA_MAX_EXPERTS): a bound on the per-row routing arrays before any
 * tensor's dims confirm the count. */
#define MODEL_MAX_EXPERTS 512

/* The expert keys of an architecture with experts (model_hparams' expert fields). */
static int read_experts(const gguf_file *f, const char *A, model_hparams *hp, fkv_error *err) {
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    const gguf_value *used = gguf_find(f, KEY("expert_used_count"));
    if (used && used->type == GGUF_TYPE_ARRAY)
        return err_unsupported(err, "%s: %s is an array (a count per layer); flatkv reads one count", f->path, key);
    if (gguf_get_u32(f, KEY("expert_count"), &hp->n_expert, err) ||
        gguf_get_u32(f, KEY("expert_used_count"), &hp->n_expert_used, err))
        return -1;
    if (hp->n_expert == 0 || hp->n_expert > MODEL_MAX_EXPERTS)
        return err_input(err, "%s: %s.expert_count is %u; it must be 1 to %d", f->path, A, hp->n_expert,
                         MODEL_MAX_EXPERTS);
    if (hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
        return err_input(err, "%s: %s.expert_used_count is %u; it must be 1 to expert_count (%u)", f->path, A,
                         hp->n_expert_used, hp->n_expert);
    hp->n_ff_exp = hp->hidden / hp->n_expert_used;
    const gguf_value *ff = gguf_find(f, KEY("expert_feed_forward_length"));
    if (ff && ff->type == GGUF_TYPE_ARRAY)
        return err_unsupported(err, "%s: %s is an array (a width per layer); flatkv reads one width", f->path, key);
    if (ff && gguf_get_u32(f, key, &hp->n_ff_exp, err)) return -1;
    if (hp->n_ff_exp == 0 || hp->n_ff_exp > UINT32_MAX / 4)
        return err_input(err, "%s: %s.expert_feed_forward_length %u must be positive and at most 2^30", f->path, A,
                         hp->n_ff_exp);
    uint32_t n_shared = 0;
    if (gguf_find(f, KEY("expert_shared_count")) && gguf_get_u32(f, key, &n_shared, err)) return -1;
    if (n_shared > MODEL_MAX_EXPERTS)
        return err_input(err, "%s: %s is %u; at most %d", f->path, key, n_shared, MODEL_MAX_EXPERTS);
    uint64_t shared = (uint64_t)n_shared * hp->n_ff_exp;
    if (hp->kind.shared_gate) { /* one shared expert of its own width (Qwen3.5's MoE) */
        uint32_t width = hp->hidden;
        if (gguf_find(f, KEY("expert_shared_feed_forward_length")) && gguf_get_u32(f, key, &width, err)) return -1;
        shared = width;
    }
    if (shared > UINT32_MAX / 4 || (hp->kind.shared_gate && !shared))
        return err_input(err, "%s: %s's shared experts are %llu wide; they must be 1 to 2^30", f->path, A,
                         (unsigned long long)shared);
    hp->n_ff_shexp = (uint32_t)shared;
    if (gguf_find(f, KEY("leading_dense_block_count")) && gguf_get_u32(f, key, &hp->n_dense_lead, err)) return -1;
    if (hp->n_dense_lead > hp->n_layers)
        return err_input(err, "%s: %s is %u, more than the %u layers", f->path, key, hp->n_dense_lead, hp->n_layers);
    hp->gating = hp->kind.gating;
    hp->expert_norm = hp->kind.expert_norm;
    hp->expert_scale = 0.0f;
    if (hp->kind.routing_keys) {
        uint32_t gating = 0;
        if (gguf_find(f, KEY("expert_gating_func")) && gguf_get_u32(f, key, &gating, err)) return -1;
        if (gating > OPS_GATE_SOFTMAX_WEIGHT)
            return err_unsupported(err, "%s: %s is %u; flatkv computes 1 (softmax), 2 (sigmoid) and 3 (softmax of "
                                        "the selected)", f->path, key, gating);
        if (gating) hp->gating = (ops_gating)gating;
        if (gguf_find(f, KEY("expert_weights_norm")) && gguf_get_bool(f, key, &hp->expert_norm, err)) return -1;
        if (gguf_find(f, KEY("expert_weights_scale")) && gguf_get_f32(f, key, &hp->expert_scale, err)) return -1;
        if (!isfinite(hp->expert_scale))
            return err_input(err, "%s: %s.expert_weights_scale is not finite", f->path, A);
    }
    /* Grouped selection (DeepSeek-V3) and clamped expert activations are not computed: refused where they act. */
    uint32_t groups = 0;
    if (gguf_find(f, KEY("expert_group_count")) && gguf_get_u32(f, key, &groups, err)) return -1;
    if (groups > 1) return err_unsupported(err, "%s: %s is %u; flatkv computes ungrouped routing", f->path, key, groups);
    if (gguf_find(f, KEY("swiglu_clamp_exp")))
        return err_unsupported(err, "%s: %s is set; flatkv does not compute it", f->path, key);
#undef KEY
    return 0;
}

/* The most taps of a causal convolution (real models: 4): a bound on corrupt files before a state is sized by it. */
#define MODEL_MAX_CONV 64

/* Interleaved M-RoPE (rope.dimension_sections s0..s3, llama.cpp's imrope): rotary pair i takes the position of its
 * sector i % (s0 + s1 + s2 + s3) — the first (time) where sector % 3 == 0 and sector < 3·s0, the second where % 3 == 1
 * and < 3·s1, the third where % 3 == 2 and < 3·s2, else the fourth's. A text token's first three positions are its
 * position and its fourth is 0, so a pair rotates by the position, neox-style, unless its sector falls to the fourth
 * section, where its angle is 0. flatkv computes the first case (the converter's [11, 11, 10, 0] over 64 rotated dims
 * is one) and refuses sections that leave a rotated pair unrotated. */
static int check_sections(const gguf_file *f, const char *A, const model_hparams *hp, fkv_error *err) {
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", A);
    const gguf_value *v;
    if (gguf_get_arr(f, key, -1, &v, err)) return -1;
    int64_t sec[4] = {0}, total = 0;
    if (v->arr.n > 4) return err_input(err, "%s: %s has %llu entries; at most 4", f->path, key, (unsigned long long)v->arr.n);
    for (uint64_t i = 0; i < v->arr.n; i++) {
        sec[i] = gguf_arr_int(v, i);
        if (sec[i] < 0 || sec[i] > OPS_ATTN_MAX_HEAD_DIM)
            return err_input(err, "%s: %s[%llu] is %lld; it must be 0 to %d", f->path, key, (unsigned long long)i,
                             (long long)sec[i], OPS_ATTN_MAX_HEAD_DIM);
        total += sec[i];
    }
    if (total == 0 || total > hp->head_dim)
        return err_input(err, "%s: %s sums to %lld; it must be 1 to the head size %u", f->path, key, (long long)total,
                         hp->head_dim);
    for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
        const int64_t sector = i % total, third = sector % 3;
        if (sector >= 3 * sec[third])
            return err_unsupported(err, "%s: %s leaves rotary pair %u to the fourth section, unrotated for text; "
                                        "flatkv computes sections that rotate every pair", f->path, key, i);
    }
    return 0;
}

/* The gated DeltaNet keys of a recurrent architecture (model_hparams' ssm fields), the layer roles' keys checked. */
static int read_recurrent(const gguf_file *f, const char *A, model_hparams *hp, fkv_error *err) {
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    uint32_t inner;
    if (gguf_get_u32(f, KEY("ssm.conv_kernel"), &hp->n_conv, err) ||
        gguf_get_u32(f, KEY("ssm.state_size"), &hp->ssm_d, err) ||
        gguf_get_u32(f, KEY("ssm.group_count"), &hp->n_k_heads, err) ||
        gguf_get_u32(f, KEY("ssm.time_step_rank"), &hp->n_v_heads, err) ||
        gguf_get_u32(f, KEY("ssm.inner_size"), &inner, err))
        return -1;
    if (hp->n_conv == 0 || hp->n_conv > MODEL_MAX_CONV)
        return err_input(err, "%s: %s.ssm.conv_kernel is %u; it must be 1 to %d", f->path, A, hp->n_conv,
                         MODEL_MAX_CONV);
    if (hp->ssm_d == 0 || hp->ssm_d > OPS_ATTN_MAX_HEAD_DIM)
        return err_input(err, "%s: %s.ssm.state_size is %u; it must be 1 to %d", f->path, A, hp->ssm_d,
                         OPS_ATTN_MAX_HEAD_DIM);
    if (hp->n_k_heads == 0 || hp->n_v_heads == 0 || hp->n_v_heads % hp->n_k_heads ||
        (uint64_t)(2 * (uint64_t)hp->n_k_heads + hp->n_v_heads) * hp->ssm_d > UINT32_MAX / 4)
        return err_input(err, "%s: %s.ssm.time_step_rank %u must be a positive multiple of ssm.group_count %u, and "
                              "their heads of %u fit 2^30 channels", f->path, A, hp->n_v_heads, hp->n_k_heads,
                         hp->ssm_d);
    if ((uint64_t)hp->n_v_heads * hp->ssm_d != inner)
        return err_input(err, "%s: %s.ssm.inner_size is %u, not ssm.time_step_rank %u x ssm.state_size %u", f->path,
                         A, inner, hp->n_v_heads, hp->ssm_d);
    const gguf_value *roles = gguf_find(f, KEY("attention.recurrent_layers"));
    if (roles && (roles->type != GGUF_TYPE_ARRAY || roles->arr.n != (uint64_t)hp->n_layers + hp->n_nextn ||
                  !gguf_type_size(roles->arr.elem_type)))
        return err_input(err, "%s: %s must be an array of a flag per block (%u)", f->path, key,
                         hp->n_layers + hp->n_nextn);
    uint32_t interval = 4;
    if (gguf_find(f, KEY("full_attention_interval")) && gguf_get_u32(f, key, &interval, err)) return -1;
    if (interval == 0) return err_input(err, "%s: %s is 0; every Nth layer is an attention layer, N >= 1", f->path, key);
#undef KEY
    return hp->kind.rope_sections ? check_sections(f, A, hp, err) : 0;
}

/* Whether trunk layer l is a gated DeltaNet layer (model.h's layer roles; read_recurrent checked the keys). */
static bool layer_recurrent(const gguf_file *f, const model_hparams *hp, uint32_t l) {
    char key[96];
    if (!hp->kind.recurrent || l >= hp->n_layers) return false;
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", hp->kind.name);
    const gguf_value *roles = gguf_find(f, key);
    if (roles) return gguf_arr_int(roles, l) != 0;
    uint32_t interval = 4;
    snprintf(key, sizeof key, "%s.full_attention_interval", hp->kind.name);
    if (gguf_find(f, key)) gguf_get_u32(f, key, &interval, NULL);
    return (l + 1) % interval != 0;
}

static int read_hparams(const gguf_file *f, model_hparams *hp, fkv_error *err) {
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch, err)) return -1;
    const model_arch *kind = model_arch_find(arch.ptr, arch.len);
    if (!kind) {
        char names[128];
        return err_unsupported(err, "%s: general.architecture is '%.*s'; flatkv computes %s", f->path,
                               (int)(arch.len > 64 ? 64 : arch.len), arch.ptr,
                               model_arch_names(names, sizeof names, ", ", " and "));
    }
    const char *A = kind->name;
    snprintf(hp->arch, sizeof hp->arch, "%s", A);
    hp->kind = *kind;
    hp->rope_halves = kind->rope_halves;
    hp->qkv_bias = kind->qkv_bias;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    if (gguf_get_u32(f, KEY("context_length"), &hp->n_ctx_train, err) ||
        gguf_get_u32(f, KEY("embedding_length"), &hp->dim, err) ||
        gguf_get_u32(f, KEY("block_count"), &hp->n_layers, err) ||
        gguf_get_u32(f, KEY("feed_forward_length"), &hp->hidden, err) ||
        gguf_get_u32(f, KEY("attention.head_count"), &hp->n_heads, err) ||
        gguf_get_f32(f, KEY("attention.layer_norm_rms_epsilon"), &hp->rms_eps, err))
        return -1;
    hp->n_kv_heads = hp->n_heads;
    if (gguf_find(f, KEY("attention.head_count_kv")) && gguf_get_u32(f, key, &hp->n_kv_heads, err)) return -1;
    if (hp->dim == 0 || hp->n_layers == 0 || hp->hidden == 0 || hp->n_heads == 0 || hp->n_kv_heads == 0 ||
        hp->n_ctx_train == 0)
        return err_input(err, "%s: a %s.* shape key is zero (dim %u, layers %u, hidden %u, heads %u, kv heads "
                       "%u, context %u)", f->path, A, hp->dim, hp->n_layers, hp->hidden, hp->n_heads,
                       hp->n_kv_heads, hp->n_ctx_train);
    /* Sizes the file cannot back are refused before they size anything: every layer needs its tensors (at least 6:
     * two norms, attention in and out, the feed-forward in and out), so block_count is bounded by the tensor count;
     * the others are checked against the tensors' dims when the weights are found (find_checked). */
    if (hp->n_layers > f->n_tensors / 6)
        return err_input(err, "%s: %s.block_count %u is more layers than the file's %llu tensors can hold (each layer "
                              "has at least 6)", f->path, A, hp->n_layers, (unsigned long long)f->n_tensors);
    if (hp->n_heads % hp->n_kv_heads)
        return err_input(err, "%s: %s.attention.head_count (%u) is not a multiple of head_count_kv (%u)", f->path, A,
                       hp->n_heads, hp->n_kv_heads);
    /* The head size is dim / heads unless key_length says otherwise (Qwen3-0.6B: dim 1024, 16 heads of 128);
     * value heads must be as wide as key heads (one head size for attention). */
    hp->head_dim = hp->dim / hp->n_heads;
    if (gguf_find(f, KEY("attention.key_length")) && gguf_get_u32(f, key, &hp->head_dim, err)) return -1;
    uint32_t head_dim_v = hp->dim / hp->n_heads;
    if (gguf_find(f, KEY("attention.value_length")) && gguf_get_u32(f, key, &head_dim_v, err)) return -1;
    if (head_dim_v != hp->head_dim)
        return err_unsupported(err, "%s: %s.attention.value_length %u differs from the key head size %u; flatkv needs "
                                    "them equal", f->path, A, head_dim_v, hp->head_dim);
    if (hp->head_dim == 0 || hp->head_dim % 2 || hp->head_dim > OPS_ATTN_MAX_HEAD_DIM)
        return err_input(err, "%s: head dimension %u must be even, nonzero and at most %d", f->path, hp->head_dim,
                       OPS_ATTN_MAX_HEAD_DIM);
    /* The products that size the attention's rows must fit the 32 bits they are held in (else a wrapped product
     * could match a tensor's dims); the weights' dims then bound them by the file's size. */
    if ((uint64_t)hp->n_heads * hp->head_dim > UINT32_MAX / 4 || (uint64_t)hp->hidden > UINT32_MAX / 4 ||
        (uint64_t)hp->dim > UINT32_MAX / 4)
        return err_input(err, "%s: %s.attention.head_count %u x head size %u, feed_forward_length %u or "
                              "embedding_length %u is too large", f->path, A, hp->n_heads, hp->head_dim, hp->hidden,
                         hp->dim);
    hp->n_rot = hp->head_dim;
    if (gguf_find(f, KEY("rope.dimension_count")) && gguf_get_u32(f, key, &hp->n_rot, err)) return -1;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return err_input(err, "%s: %s.rope.dimension_count %u must be even and at most the head dimension %u", f->path,
                       A, hp->n_rot, hp->head_dim);
    hp->rope_base = 10000.0f;
    if (gguf_find(f, KEY("rope.freq_base")) && gguf_get_f32(f, key, &hp->rope_base, err)) return -1;
    hp->rope_scale = 1.0f;
    const gguf_value *scaling = gguf_find(f, KEY("rope.scaling.type"));
    const bool no_scaling = scaling && scaling->type == GGUF_TYPE_STRING && gguf_str_eq(scaling->str, "none");
    const bool yarn = scaling && scaling->type == GGUF_TYPE_STRING && gguf_str_eq(scaling->str, "yarn");
    if (scaling && !no_scaling && !yarn) {
        /* llama3-type scaling arrives as the rope_freqs.weight tensor (read with the weights). */
        if (scaling->type != GGUF_TYPE_STRING ||
            (!gguf_str_eq(scaling->str, "linear") && !gguf_str_eq(scaling->str, "llama3")))
            return err_unsupported(err, "%s: %s.rope.scaling.type '%.*s' is not supported (none, linear, llama3, "
                                        "yarn)", f->path, A,
                           scaling->type == GGUF_TYPE_STRING ? (int)(scaling->str.len > 32 ? 32 : scaling->str.len) : 0,
                           scaling->type == GGUF_TYPE_STRING ? scaling->str.ptr : "");
    }
    /* As llama.cpp: the type defaults to linear, so a factor applies whenever it is present and the type is not none
     * (0 means none). */
    if (!no_scaling && gguf_find(f, KEY("rope.scaling.factor"))) {
        float factor;
        if (gguf_get_f32(f, key, &factor, err)) return -1;
        if (factor != 0.0f) hp->rope_scale = factor;
    }
    static const char *const refused_keys[] = {"rope.scaling.yarn_log_multiplier", "attention.scale",
                                               "final_logit_softcapping", "attn_logit_softcapping"};
    for (size_t i = 0; i < sizeof refused_keys / sizeof *refused_keys; i++) {
        snprintf(key, sizeof key, "%s.%s", A, refused_keys[i]);
        const gguf_value *v = gguf_find(f, key);
        float x = 0.0f;
        if (v && (v->type != GGUF_TYPE_FLOAT32 || (gguf_get_f32(f, key, &x, err), x != 0.0f)))
            return err_unsupported(err, "%s: %s is set; flatkv does not compute it", f->path, key);
    }
    hp->n_ctx_orig = hp->n_ctx_train;
    if (gguf_find(f, KEY("rope.scaling.original_context_length")) && gguf_get_u32(f, key, &hp->n_ctx_orig, err))
        return -1;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    /* ggml's attn_factor multiplies the rotated pairs' cos and sin: rope.scaling.attn_factor (LongRoPE's converter
     * writes sqrt(1 + ln(scale)/ln(original context))), or YaRN's own yarn_attn_factor. */
    float mscale = 1.0f;
    if (gguf_find(f, KEY("rope.scaling.attn_factor")) && gguf_get_f32(f, key, &mscale, err)) return -1;
    ops_rope_params *g = &hp->rope[MODEL_ROPE_GLOBAL];
    *g = (ops_rope_params){.base = hp->rope_base, .scale = hp->rope_scale, .attn_factor = mscale};
    if (yarn) { /* llama.cpp's defaults: extrapolation mix 1, correction range 32..1 rotations */
        *g = (ops_rope_params){.base = hp->rope_base, .scale = hp->rope_scale, .attn_factor = 1.0f, .ext_factor = 1.0f,
                               .beta_fast = 32.0f, .beta_slow = 1.0f, .n_ctx_orig = hp->n_ctx_orig};
        const struct { const char *key; float *at; } yk[] = {{"rope.scaling.yarn_ext_factor", &g->ext_factor},
            {"rope.scaling.yarn_attn_factor", &g->attn_factor}, {"rope.scaling.yarn_beta_fast", &g->beta_fast},
            {"rope.scaling.yarn_beta_slow", &g->beta_slow}};
        for (size_t i = 0; i < sizeof yk / sizeof *yk; i++) {
            snprintf(key, sizeof key, "%s.%s", A, yk[i].key);
            if (gguf_find(f, key) && gguf_get_f32(f, key, yk[i].at, err)) return -1;
        }
        if (!positive(g->beta_fast) || !positive(g->beta_slow) || !g->n_ctx_orig || !isfinite(g->ext_factor) ||
            !positive(g->attn_factor))
            return err_input(err, "%s: %s's YaRN parameters (beta_fast %g, beta_slow %g, original context %u, "
                                  "ext_factor %g, attn_factor %g) must be positive and finite", f->path, A,
                             (double)g->beta_fast, (double)g->beta_slow, g->n_ctx_orig, (double)g->ext_factor,
                             (double)g->attn_factor);
    }
    hp->rope[MODEL_ROPE_LOCAL] = kind->swa_same_rope ? *g : (ops_rope_params){.base = 10000.0f, .scale = 1.0f,
                                                                               .attn_factor = mscale};
    hp->window = 0;
    if (hp->kind.swa && gguf_find(f, KEY("attention.sliding_window"))) {
        if (gguf_get_u32(f, key, &hp->window, err)) return -1;
        if (gguf_find(f, KEY("rope.freq_base_swa")) && gguf_get_f32(f, key, &hp->rope[MODEL_ROPE_LOCAL].base, err))
            return -1;
    }
    /* A window_ignored architecture's sliding_window is ignored, as llama.cpp does today: attention is full. */
    if (!hp->kind.swa && !hp->kind.window_ignored && gguf_find(f, KEY("attention.sliding_window"))) {
        uint32_t w = 0;
        if (gguf_get_u32(f, key, &w, err)) return -1;
        if (w) return err_unsupported(err, "%s: %s.attention.sliding_window is %u; flatkv computes %s with full "
                                           "attention only",
                              f->path, A, w, A);
    }
    hp->swa_pattern = kind->swa_period ? kind->swa_period : 6;
    if (hp->window && gguf_find(f, KEY("attention.sliding_window_pattern"))) {
        const gguf_value *v = gguf_find(f, key);
        if (v->type == GGUF_TYPE_ARRAY)
            return err_unsupported(err, "%s: %s is an array; flatkv reads it as one period (every Nth layer global)",
                                        f->path,
                           key);
        if (gguf_get_u32(f, key, &hp->swa_pattern, err)) return -1;
    }
    if (gguf_find(f, KEY("nextn_predict_layers")) && gguf_get_u32(f, key, &hp->n_nextn, err)) return -1;
    if (hp->n_nextn >= hp->n_layers)
        return err_input(err, "%s: %s.nextn_predict_layers %u leaves no layers of block_count %u", f->path, A,
                         hp->n_nextn, hp->n_layers);
    hp->n_layers -= hp->n_nextn;
    if ((kind->experts && read_experts(f, A, hp, err)) || (kind->recurrent && read_recurrent(f, A, hp, err))) return -1;
    /* Gemma 3 27B (62 layers: llama.cpp tells it by that) scales queries by 1/sqrt(dim/heads), as gemma_pytorch. */
    if (hp->kind.swa && hp->n_layers == 62) hp->attn_scale = 1.0f / sqrtf((float)(hp->dim / hp->n_heads));
#undef KEY
    if (!positive(hp->rope_scale) || !positive(hp->rope_base) || !(hp->rms_eps >= 0.0f && isfinite(hp->rms_eps)) ||
        !positive(hp->rope[MODEL_ROPE_LOCAL].base) || !positive(mscale))
        return err_input(err, "%s: rope base %g (window layers' %g), rope scale %g, attn_factor %g and rms epsilon %g "
                       "must be positive and finite", f->path, (double)hp->rope_base, (double)hp->rope[MODEL_ROPE_LOCAL].base,
                       (double)hp->rope_scale, (double)mscale, (double)hp->rms_eps);
    return 0;
}

/* The routed experts of layer l (model_experts): each 3-D tensor of exactly the shape the keys give. */
static int load_experts(const gguf_file *f, const model_hparams *hp, uint32_t l, model_experts *E, fkv_error *err) {
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
    const uint32_t dim = hp->dim, ff = hp->n_ff_exp, n = hp->n_expert;
    const gguf_tensor *t;
    if (load_matrix(f, NAME("ffn_gate_inp.weight"), dim, n, &E->router, err)) return -1;
    if (!(t = find_dims(f, NAME("ffn_gate_exps.weight"), 3, (const uint64_t[]){dim, ff, n}, true, err))) return -1;
    matrix_of(t, dim, ff * n, &E->gate);
    if (!(t = find_dims(f, NAME("ffn_up_exps.weight"), 3, (const uint64_t[]){dim, ff, n}, true, err))) return -1;
    matrix_of(t, dim, ff * n, &E->up);
    if (!(t = find_dims(f, NAME("ffn_down_exps.weight"), 3, (const uint64_t[]){ff, dim, n}, true, err))) return -1;
    matrix_of(t, ff, dim * n, &E->down);
    if (gguf_find_tensor(f, NAME("exp_probs_b.bias")) && !(E->select_b = load_vector(f, name, n, err))) return -1;
    if (hp->kind.expert_biases && (!(E->router_b = load_vector(f, NAME("ffn_gate_inp.bias"), n, err)) ||
                                   !(E->gate_b = load_floats(f, NAME("ffn_gate_exps.bias"), ff, n, err)) ||
                                   !(E->up_b = load_floats(f, NAME("ffn_up_exps.bias"), ff, n, err)) ||
                                   !(E->down_b = load_floats(f, NAME("ffn_down_exps.bias"), dim, n, err))))
        return -1;
#undef NAME
    return 0;
}

/* Layer l's feed-forward part: its input norm, and a dense FFN of feed_forward_length, or (an expert layer) its
 * routed experts and any shared experts (a dense FFN n_ff_shexp wide, gated with shared_gate). */
static int load_ffn(const gguf_file *f, const model_hparams *hp, uint32_t l, model_layer *L, fkv_error *err) {
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
    const model_arch *k = &hp->kind;
    if (!(L->ffn_norm = load_vector(f, k->ffn_post_name ? NAME("post_attention_norm.weight") : NAME("ffn_norm.weight"),
                                    hp->dim, err)))
        return -1;
    const bool moe = k->experts && l >= hp->n_dense_lead;
    L->hidden = !moe ? hp->hidden : hp->n_ff_shexp;
    if (moe) {
        if (!(L->moe = calloc(1, sizeof *L->moe))) return err_nomem(err, "%s: out of memory", f->path);
        if (load_experts(f, hp, l, L->moe, err)) return -1;
    }
    if (!L->hidden) return 0;
    const char *sfx = moe ? "_shexp" : "";
    if (moe && k->shared_gate) {
        const gguf_tensor *t = find_checked(f, NAME("ffn_gate_inp_shexp.weight"), hp->dim, 0, true, err);
        if (!t) return -1;
        matrix_of(t, hp->dim, 1, &L->shared_gate);
    }
    if (k->fused) { /* ffn_up holds gate, then up (ggml_swiglu's order: the first half is activated) */
        ops_matrix up;
        if (load_matrix(f, NAME("ffn_up.weight"), hp->dim, 2 * L->hidden, &up, err)) return -1;
        L->w_gate = ops_matrix_rows(&up, 0, L->hidden);
        L->w_up = ops_matrix_rows(&up, L->hidden, L->hidden);
    } else {
        char gate[96], up[96];
        snprintf(gate, sizeof gate, "blk.%u.ffn_gate%s.weight", l, sfx);
        snprintf(up, sizeof up, "blk.%u.ffn_up%s.weight", l, sfx);
        if (load_matrix(f, gate, hp->dim, L->hidden, &L->w_gate, err) ||
            load_matrix(f, up, hp->dim, L->hidden, &L->w_up, err))
            return -1;
    }
    snprintf(name, sizeof name, "blk.%u.ffn_down%s.weight", l, sfx);
#undef NAME
    return load_matrix(f, name, L->hidden, hp->dim, &L->w_down, err);
}

/* Block l's NextN tensors (model_nextn), kept for a drafter. */
static int load_nextn(const gguf_file *f, const model_hparams *hp, uint32_t l, model_nextn *N, fkv_error *err) {
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u.nextn." suffix, l), name)
    if (load_matrix(f, NAME("eh_proj.weight"), 2 * hp->dim, hp->dim, &N->eh_proj, err) ||
        !(N->enorm = load_vector(f, NAME("enorm.weight"), hp->dim, err)) ||
        !(N->hnorm = load_vector(f, NAME("hnorm.weight"), hp->dim, err)) ||
        (gguf_find_tensor(f, NAME("shared_head_norm.weight")) &&
         !(N->head_norm = load_vector(f, name, hp->dim, err))) ||
        (gguf_find_tensor(f, NAME("embed_tokens.weight")) &&
         load_matrix(f, name, hp->dim, hp->n_vocab, &N->embed, err)) ||
        (gguf_find_tensor(f, NAME("shared_head_head.weight")) &&
         load_matrix(f, name, hp->dim, hp->n_vocab, &N->head, err)))
        return -1;
#undef NAME
    return 0;
}

/* Layer l's attention tensors: q, k, v (or one fused attn_qkv), the output, and the biases, norms and sinks its
 * architecture has; with attn_gate, attn_q holds each head's gate after its q. */
static int load_attention(const gguf_file *f, const model_hparams *hp, uint32_t l, model_layer *L, fkv_error *err) {
    const model_arch *k = &hp->kind;
    const uint32_t q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
    if (load_matrix(f, NAME("attn_output.weight"), q_dim, hp->dim, &L->wo, err)) return -1;
    if (k->fused && gguf_find_tensor(f, NAME("attn_qkv.weight"))) {
        ops_matrix qkv;
        if (load_matrix(f, name, hp->dim, q_dim + 2 * kv_dim, &qkv, err)) return -1;
        L->wq = ops_matrix_rows(&qkv, 0, q_dim);
        L->wk = ops_matrix_rows(&qkv, q_dim, kv_dim);
        L->wv = ops_matrix_rows(&qkv, q_dim + kv_dim, kv_dim);
    } else if (load_matrix(f, NAME("attn_q.weight"), hp->dim, k->attn_gate ? 2 * q_dim : q_dim, &L->wq, err) ||
               load_matrix(f, NAME("attn_k.weight"), hp->dim, kv_dim, &L->wk, err) ||
               load_matrix(f, NAME("attn_v.weight"), hp->dim, kv_dim, &L->wv, err)) {
        return -1;
    }
    /* Biases: required by the architectures that have them, taken where a llama file carries them. */
    bool want = hp->qkv_bias || gguf_find_tensor(f, NAME("attn_q.bias"));
    if (gguf_find_tensor(f, NAME("attn_qkv.bias")))
        return err_unsupported(err, "%s: tensor '%s' (a fused q/k/v bias) is not computed by flatkv", f->path, name);
    if (want && (!(L->bq = load_vector(f, NAME("attn_q.bias"), q_dim, err)) ||
                 !(L->bk = load_vector(f, NAME("attn_k.bias"), kv_dim, err)) ||
                 !(L->bv = load_vector(f, NAME("attn_v.bias"), kv_dim, err))))
        return -1;
    /* q/k norms: required by the architectures that have them, taken where a file carries them (GLM-4.5). */
    const bool qk_norm = k->qk_norm || gguf_find_tensor(f, NAME("attn_q_norm.weight"));
    if (qk_norm && (!(L->q_norm = load_vector(f, NAME("attn_q_norm.weight"), hp->head_dim, err)) ||
                    !(L->k_norm = load_vector(f, NAME("attn_k_norm.weight"), hp->head_dim, err))))
        return -1;
    if ((k->out_bias && !(L->bo = load_vector(f, NAME("attn_output.bias"), hp->dim, err))) ||
        (k->sinks && !(L->sinks = load_vector(f, NAME("attn_sinks.weight"), hp->n_heads, err))))
        return -1;
#undef NAME
    return 0;
}

/* Layer l's gated DeltaNet tensors (model_gdn), its part of the state placed at *state_at (which moves past it). */
static int load_gdn(const gguf_file *f, const model_hparams *hp, uint32_t l, model_layer *L, size_t *state_at,
                    fkv_error *err) {
    const uint32_t d = hp->ssm_d, hv = hp->n_v_heads, conv_dim = model_conv_dim(hp), value_dim = hv * d;
    model_gdn *G = L->gdn = calloc(1, sizeof *L->gdn);
    if (!G) return err_nomem(err, "%s: out of memory", f->path);
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
    if (load_matrix(f, NAME("attn_qkv.weight"), hp->dim, conv_dim, &G->qkv, err) ||
        load_matrix(f, NAME("attn_gate.weight"), hp->dim, value_dim, &G->z, err) ||
        load_matrix(f, NAME("ssm_beta.weight"), hp->dim, hv, &G->beta, err) ||
        load_matrix(f, NAME("ssm_alpha.weight"), hp->dim, hv, &G->alpha, err) ||
        load_matrix(f, NAME("ssm_out.weight"), value_dim, hp->dim, &G->out, err) ||
        !(G->conv = load_floats(f, NAME("ssm_conv1d.weight"), hp->n_conv, conv_dim, err)) ||
        !(G->dt_bias = load_vector(f, NAME("ssm_dt.bias"), hv, err)) || !(G->a = load_vector(f, NAME("ssm_a"), hv, err)) ||
        !(G->norm = load_vector(f, NAME("ssm_norm.weight"), d, err)))
        return -1;
#undef NAME
    G->state_at = *state_at;
    *state_at += (size_t)(hp->n_conv - 1) * conv_dim + (size_t)hv * d * d;
    return 0;
}

static int load_weights(fkv_model *m, fkv_error *err) {
    const gguf_file *f = m->file;
    model_hparams *hp = &m->hp;
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    if (!embd) return err_input(err, "%s: required tensor 'token_embd.weight' is missing", f->path);
    if (embd->n_dims != 2 || embd->ne[1] > INT32_MAX)
        return err_input(err, "%s: tensor 'token_embd.weight' must be a matrix [dim, n_vocab]", f->path);
    hp->n_vocab = (uint32_t)embd->ne[1];
    if (load_matrix(f, "token_embd.weight", hp->dim, hp->n_vocab, &m->tok_embd, err)) return -1;
    if (gguf_find_tensor(f, "output.weight")) {
        if (load_matrix(f, "output.weight", hp->dim, hp->n_vocab, &m->output, err)) return -1;
    } else {
        m->output = m->tok_embd;
    }
    if (!(m->output_norm = load_vector(f, "output_norm.weight", hp->dim, err))) return -1;
    /* Per-dimension rotary frequency divisors (Llama-3.1's rope scaling), when the file has them. */
    if (gguf_find_tensor(f, "rope_freqs.weight") && !(m->rope_freqs = load_vector(f, "rope_freqs.weight", hp->n_rot / 2, err)))
        return -1;

    const model_arch *k = &hp->kind;
    if (k->long_rope && gguf_find_tensor(f, "rope_factors_long.weight") &&
        (!(m->rope_long = load_vector(f, "rope_factors_long.weight", hp->n_rot / 2, err)) ||
         !(m->rope_short = load_vector(f, "rope_factors_short.weight", hp->n_rot / 2, err))))
        return -1;
    /* The rotary frequencies are divided by these: a zero, negative or non-finite one has no angle. */
    const struct { const char *name; const float *v; } divisors[] = {
        {"rope_freqs.weight", m->rope_freqs}, {"rope_factors_long.weight", m->rope_long},
        {"rope_factors_short.weight", m->rope_short}};
    for (size_t d = 0; d < sizeof divisors / sizeof *divisors; d++)
        for (uint32_t i = 0; divisors[d].v && i < hp->n_rot / 2; i++)
            if (!positive(divisors[d].v[i]))
                return err_input(err, "%s: tensor '%s': element %u is %g; rotary divisors must be positive and finite",
                               f->path, divisors[d].name, i, (double)divisors[d].v[i]);

    const uint32_t n_blocks = hp->n_layers + hp->n_nextn;
    m->layers = calloc(n_blocks, sizeof *m->layers);
    if (hp->window) m->windows = calloc(n_blocks, sizeof *m->windows);
    if (hp->n_nextn) m->nextn = calloc(hp->n_nextn, sizeof *m->nextn);
    if (!m->layers || (hp->window && !m->windows) || (hp->n_nextn && !m->nextn))
        return err_nomem(err, "%s: out of memory for %u layers", f->path, n_blocks);
    size_t state_at = 0;
    for (uint32_t l = 0; l < n_blocks; l++) {
        model_layer *L = &m->layers[l];
        char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
        if (!(L->attn_norm = load_vector(f, NAME("attn_norm.weight"), hp->dim, err)) || load_ffn(f, hp, l, L, err) ||
            (layer_recurrent(f, hp, l) ? load_gdn(f, hp, l, L, &state_at, err) : load_attention(f, hp, l, L, err)))
            return -1;
        if (k->post_norms && (!(L->post_attn_norm = load_vector(f, NAME("post_attention_norm.weight"), hp->dim, err)) ||
                              !(L->post_ffn_norm = load_vector(f, NAME("post_ffw_norm.weight"), hp->dim, err))))
            return -1;
#undef NAME
        const bool window = hp->window && (hp->swa_pattern == 0 || l % hp->swa_pattern < hp->swa_pattern - 1);
        L->window = window ? hp->window : 0;
        if (m->windows) m->windows[l] = L->window;
        if (l >= hp->n_layers && load_nextn(f, hp, l, &m->nextn[l - hp->n_layers], err)) return -1;
        L->rope = k->nope_step && (l + 1) % k->nope_step == 0 ? MODEL_ROPE_NONE
                  : window                                    ? MODEL_ROPE_LOCAL
                                                              : MODEL_ROPE_GLOBAL;
    }
    /* What sizes the forward's scratch, as the tensors found confirm it: expert widths no layer has (every layer
     * dense) and feed_forward_length where every layer has experts are a key's claim only. A hybrid needs an
     * attention layer: the head sizes are confirmed by its tensors, and the K/V hold its rows. */
    bool experts = false;
    uint32_t n_attention = 0;
    hp->ffn_max = 0;
    for (uint32_t l = 0; l < n_blocks; l++) {
        hp->ffn_max = m->layers[l].hidden > hp->ffn_max ? m->layers[l].hidden : hp->ffn_max;
        experts |= m->layers[l].moe != NULL;
        n_attention += l < hp->n_layers && !m->layers[l].gdn;
    }
    if (!experts) hp->n_expert = hp->n_expert_used = hp->n_ff_exp = hp->n_ff_shexp = 0;
    if (!n_attention)
        return err_unsupported(err, "%s: none of its %u layers is an attention layer; flatkv computes hybrids with one",
                               f->path, hp->n_layers);
    /* The state is d times wider than the tensors that imply it, and every sequence carries one: a file whose
     * tensors overlap could ask for gigabytes. Real models' states are far smaller than their files (Qwen3.5-27B:
     * 150 MB beside 16 GB and more), so a state larger than the file is refused before anything sizes one. */
    if (state_at > f->size / sizeof(float))
        return err_input(err, "%s: its recurrent state would take %zu bytes a sequence, more than the file's %zu",
                         f->path, state_at * sizeof(float), f->size);
    hp->state_floats = state_at;
    return 0;
}

const uint32_t *model_kv_layers(const fkv_model *m, bool windows_apart, uint32_t n_nextn, uint32_t *layer_at,
                                uint32_t counts[2]) {
    bool table = false;
    counts[0] = counts[1] = 0;
    for (uint32_t l = 0; l < m->hp.n_layers + n_nextn; l++) {
        const model_layer *L = &m->layers[l];
        const uint32_t part = windows_apart && L->window > 0;
        layer_at[l] = L->gdn ? KV_NO_ROWS : part << 16 | counts[part]++;
        table |= L->gdn || part;
    }
    return table ? layer_at : NULL;
}

const float *model_rope_divisors(const fkv_model *m, uint32_t n_ctx) {
    if (m->rope_freqs) return m->rope_freqs;
    if (m->rope_long) return n_ctx > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
    return NULL;
}

/* Rows packed or copied per task of the load's team. */
#define PACK_ROWS 64
/* Bytes w takes there, rounded to a cache line: packed (kern_pack_rows) where the kernels take its type so, else
 * its rows as they are. 0 for the tied output matrix, which stays in the mapping as token_embd does (embeddings
 * read its rows one by one). */
static size_t placed_bytes(const fkv_model *m, const ops_matrix *w) {
    if (w == &m->output && w->data == m->tok_embd.data) return 0;
    const size_t rb = kern_packs(w->type, w->n_in) ? kern_packed_row_bytes(w->type, w->n_in) : w->row_bytes;
    return (rb * w->n_out + 63) / 64 * 64;
}

/* w packed or copied into dst; the mapped rows' pages are then dropped from the process (the page cache keeps
 * them), so the copy does not double the resident size. */
static void place_matrix(ops_matrix *w, uint8_t *dst) {
    const bool pack = kern_packs(w->type, w->n_in);
#pragma omp parallel for schedule(dynamic, 1)
    for (uint32_t r0 = 0; r0 < w->n_out; r0 += PACK_ROWS) {
        const uint32_t r1 = w->n_out - r0 < PACK_ROWS ? w->n_out : r0 + PACK_ROWS;
        if (pack)
            kern_pack_rows(w->type, w->data, w->row_bytes, r0, r1, w->n_in, dst);
        else
            memcpy(dst + (size_t)r0 * w->row_bytes, w->data + (size_t)r0 * w->row_bytes,
                   (size_t)(r1 - r0) * w->row_bytes);
    }
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)w->data + page - 1) / page * page,
                    hi = ((uintptr_t)w->data + w->row_bytes * w->n_out) / page * page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED); /* only whole pages of this matrix; a hint */
    w->data = dst;
    if (pack) w->row_bytes = kern_packed_row_bytes(w->type, w->n_in);
    w->packed = pack;
}

/* Where a mixture's routed experts are read from, FLATKV_EXPERTS (the CLI's --experts): "map", the mapped file, in
 * its own layout (a model larger than memory pages its experts in as rows use them); "pack", memory the model owns,
 * packed as the dense layers are, so that decode reads them at the packed tiles' speed (MXFP4: natural rows need a
 * horizontal sum per block, docs/performance.md); "auto" (the default): pack when the model's own weights, experts
 * included, fit in 3/4 of the memory the process has (hugemem_available), else map. */
typedef enum { EXPERTS_AUTO, EXPERTS_MAP, EXPERTS_PACK } experts_place;
#define EXPERTS_MEM_SHARE 0.75

static int experts_place_of_env(const char *path, experts_place *where, fkv_error *err) {
    const char *v = getenv("FLATKV_EXPERTS");
    static const char *const names[] = {[EXPERTS_AUTO] = "auto", [EXPERTS_MAP] = "map", [EXPERTS_PACK] = "pack"};
    *where = EXPERTS_AUTO;
    if (!v || !*v) return 0;
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) {
            *where = (experts_place)i;
            return 0;
        }
    return err_input(err, "%s: FLATKV_EXPERTS must be auto, map or pack, got '%s'", path, v);
}

/* The matrices into memory the model owns: packed where the kernels take them so, copied otherwise; a mixture's
 * experts too when they are placed there (experts_place). The layers' matrices (and an untied output matrix) live in
 * one allocation of huge pages (hugemem.h): a decode step streams all of it, and 2 MB pages spare it the TLB misses of
 * the mapping's 4 KB ones (Q8_0 decode: 0.5B +4%, 110M +9%). */
static int pack_weights(fkv_model *m, fkv_error *err) {
    enum { PER_LAYER = 15, EXPERT_MATRICES = 3 }; /* the experts last */
    experts_place where;
    if (experts_place_of_env(m->file->path, &where, err)) return -1;
    const size_t n = (size_t)PER_LAYER * (m->hp.n_layers + m->hp.n_nextn) + 1;
    ops_matrix **ws = malloc(n * sizeof *ws), none = {0}; /* none: a matrix the layer lacks, placed nowhere */
    if (!ws) return err_nomem(err, "%s: out of memory", m->file->path);
    ws[0] = &m->output;
    for (uint32_t l = 0; l < m->hp.n_layers + m->hp.n_nextn; l++) {
        model_layer *L = &m->layers[l];
        model_gdn *G = L->gdn;
        model_experts *E = L->moe;
        ops_matrix *lw[PER_LAYER] = {&L->wq,   &L->wk,         &L->wv,         &L->wo,          &L->w_gate,
                                     &L->w_up, &L->w_down,     G ? &G->qkv : &none, G ? &G->z : &none,
                                     G ? &G->beta : &none,     G ? &G->alpha : &none, G ? &G->out : &none,
                                     E ? &E->gate : &none,     E ? &E->up : &none,    E ? &E->down : &none};
        memcpy(ws + 1 + PER_LAYER * (size_t)l, lw, sizeof lw);
    }
#define IS_EXPERT(i) ((i) && ((i) - 1) % PER_LAYER >= PER_LAYER - EXPERT_MATRICES)
    size_t dense = 0, experts = 0;
    for (size_t i = 0; i < n; i++) *(IS_EXPERT(i) ? &experts : &dense) += placed_bytes(m, ws[i]);
    const bool place_experts = experts && (where == EXPERTS_PACK ||
                                           (where == EXPERTS_AUTO &&
                                            (double)(dense + experts) <= EXPERTS_MEM_SHARE * (double)hugemem_available()));
    for (size_t i = 0; !place_experts && i < n; i++)
        if (IS_EXPERT(i)) ws[i] = &none;
#undef IS_EXPERT
    const size_t total = dense + (place_experts ? experts : 0);
    if (total) {
        if (!(m->packed = hugemem_alloc(total))) {
            free(ws);
            return err_nomem(err, "%s: out of memory for %zu MB of weights%s", m->file->path, total >> 20,
                             place_experts ? " (FLATKV_EXPERTS=map reads the experts from the file)" : "");
        }
        m->packed_bytes = total;
        m->experts_placed = place_experts;
        uint8_t *at = m->packed;
        for (size_t i = 0; i < n; i++) {
            const size_t bytes = placed_bytes(m, ws[i]);
            if (bytes) place_matrix(ws[i], at);
            at += bytes;
        }
    }
    free(ws);
    return 0;
}

/* The model in the file at path, or (buf not NULL) in buf[0..size), named path in errors. */
static fkv_model *model_load(const char *path, const void *buf, size_t size, fkv_error *err) {
    fkv_model *m = calloc(1, sizeof *m);
    if (!m) {
        err_nomem(err, "%s: out of memory", path);
        return NULL;
    }
    pthread_mutex_init(&m->gvocab_mu, NULL);
    char why[200];
    if (kern_ensure(why, sizeof why)) {
        err_unsupported(err, "%s: %s (FLATKV_KERNELS)", path, why);
        fkv_model_free(m);
        return NULL;
    }
    m->kernels = kern_active()->name;
    m->file = buf ? gguf_open_buffer(buf, size, path, err) : gguf_open(path, err);
    if (!m->file || read_hparams(m->file, &m->hp, err) || load_weights(m, err) ||
        pack_weights(m, err) || !(m->vocab = tok_load(m->file, err))) {
        fkv_model_free(m);
        return NULL;
    }
    if ((uint32_t)tok_n_vocab(m->vocab) != m->hp.n_vocab) {
        err_input(err, "%s: the tokenizer has %d tokens but token_embd.weight has %u rows", path,
                tok_n_vocab(m->vocab), m->hp.n_vocab);
        fkv_model_free(m);
        return NULL;
    }
    gguf_str name;
    const gguf_value *v = gguf_find(m->file, "general.name");
    if (v && v->type == GGUF_TYPE_STRING) {
        name = v->str;
    } else {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        name = (gguf_str){base, strlen(base)};
    }
    m->name = strndup(name.ptr, name.len);
    const gguf_value *tmpl = gguf_find(m->file, "tokenizer.chat_template");
    if (tmpl && tmpl->type == GGUF_TYPE_STRING) m->chat_template = strndup(tmpl->str.ptr, tmpl->str.len);
    if (!m->name || (tmpl && tmpl->type == GGUF_TYPE_STRING && !m->chat_template)) {
        err_nomem(err, "%s: out of memory for the model's name and chat template", path);
        fkv_model_free(m);
        return NULL;
    }
    return m;
}

fkv_model *fkv_model_load(const char *path, fkv_error *err) { return model_load(path, NULL, 0, err); }

fkv_model *model_load_buffer(const void *buf, size_t size, const char *name, fkv_error *err) {
    return model_load(name, buf, size, err);
}

void fkv_model_free(fkv_model *m) {
    if (!m) return;
    grammar_vocab_free(m->gvocab);
    pthread_mutex_destroy(&m->gvocab_mu);
    if (m->layers) {
        for (uint32_t l = 0; l < m->hp.n_layers + m->hp.n_nextn; l++) {
            if (m->layers[l].gdn) {
                free(m->layers[l].gdn->conv);
                free(m->layers[l].gdn->dt_bias);
                free(m->layers[l].gdn->a);
                free(m->layers[l].gdn->norm);
                free(m->layers[l].gdn);
            }
            if (m->layers[l].moe) {
                free(m->layers[l].moe->router_b);
                free(m->layers[l].moe->gate_b);
                free(m->layers[l].moe->up_b);
                free(m->layers[l].moe->down_b);
                free(m->layers[l].moe->select_b);
                free(m->layers[l].moe);
            }
            free(m->layers[l].attn_norm);
            free(m->layers[l].ffn_norm);
            free(m->layers[l].bq);
            free(m->layers[l].bk);
            free(m->layers[l].bv);
            free(m->layers[l].bo);
            free(m->layers[l].sinks);
            free(m->layers[l].q_norm);
            free(m->layers[l].k_norm);
            free(m->layers[l].post_attn_norm);
            free(m->layers[l].post_ffn_norm);
        }
        free(m->layers);
    }
    for (uint32_t i = 0; m->nextn && i < m->hp.n_nextn; i++) {
        free(m->nextn[i].enorm);
        free(m->nextn[i].hnorm);
        free(m->nextn[i].head_norm);
    }
    free(m->nextn);
    free(m->windows);
    hugemem_free(m->packed, m->packed_bytes);
    free(m->output_norm);
    free(m->rope_freqs);
    free(m->rope_short);
    free(m->rope_long);
    free(m->name);
    free(m->chat_template);
    tok_free(m->vocab);
    gguf_close(m->file);
    free(m);
}

int fkv_model_mlock(const fkv_model *m, fkv_error *err) {
    if (mlock(m->file->map, m->file->size)) {
        const int e = errno;
        return err_nomem(err, "%s: cannot lock its %zu MB in memory: %s (the limit is RLIMIT_MEMLOCK: ulimit -l)",
                         m->file->path, m->file->size >> 20, strerror(e));
    }
    if (m->packed && mlock(m->packed, m->packed_bytes)) {
        const int e = errno;
        munlock(m->file->map, m->file->size);
        return err_nomem(err, "%s: cannot lock its %zu MB of packed weights: %s (RLIMIT_MEMLOCK: ulimit -l)",
                         m->file->path, m->packed_bytes >> 20, strerror(e));
    }
    return 0;
}

size_t fkv_model_state_bytes(const fkv_model *m) { return sizeof(float) * m->hp.state_floats; }

fkv_model_info fkv_model_get_info(const fkv_model *m) {
    const model_hparams *hp = &m->hp;
    return (fkv_model_info){hp->n_vocab,  hp->n_ctx_train, hp->dim,     hp->hidden, hp->n_layers,
                            hp->n_heads,  hp->n_kv_heads,  hp->head_dim, m->name,   hp->n_nextn};
}

int fkv_tokenize(const fkv_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                 int32_t *out, int cap, fkv_error *err) {
    return tok_encode(m->vocab, text, len, add_bos && tok_add_bos(m->vocab), parse_special, out, cap, err);
}

int fkv_token_piece(const fkv_model *m, int32_t prev, int32_t id, char *buf, int cap) {
    return tok_piece(m->vocab, prev, id, buf, cap);
}

const char *fkv_model_chat_template(const fkv_model *m) { return m->chat_template; }

int32_t fkv_token_bos(const fkv_model *m) { return tok_bos(m->vocab); }

bool fkv_token_is_eog(const fkv_model *m, int32_t id) { return tok_is_eog(m->vocab, id); }

bool fkv_model_vocab_equal(const fkv_model *a, const fkv_model *b) {
    const uint32_t n = a->hp.n_vocab;
    if (b->hp.n_vocab != n) return false;
    char pa[256], pb[256];
    for (uint32_t id = 0; id < n; id++) {
        const int la = fkv_token_piece(a, -1, (int32_t)id, pa, sizeof pa);
        const int lb = fkv_token_piece(b, -1, (int32_t)id, pb, sizeof pb);
        if (la != lb || (la > 0 && memcmp(pa, pb, (size_t)(la < (int)sizeof pa ? la : (int)sizeof pa))))
            return false;
    }
    return true;
}
