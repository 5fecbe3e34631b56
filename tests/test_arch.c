/* Architectures beyond llama's defaults: qwen2 (q/k/v biases, rotary pairs taken as halves) and Llama-3.1's
 * per-dimension rotary frequency divisors (rope_freqs.weight) — each checked against an equivalent model
 * flatkv already computes, and for row invariance; qwen3, smollm3, phi3 and gemma3 read as llama.cpp reads them
 * (their numbers against llama.cpp itself: bench/refcheck), their windows restricting exactly the keys they name;
 * the hybrids qwen35 and qwen35moe: their layer roles, the state's size, every part of a layer counting, and hostile
 * files refused by the key or tensor at fault (the gated delta rule's steps: test_ops; resumes only where a state is at
 * hand: test_prefix_cache; speculation: test_spec). Their chunk/thread/resume invariance: test_invariance and
 * test_prefix_cache. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatkv.h"
#include "model/genmodel.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "testutil.h"

#define N_PROMPT 40

static const char *generate(const char *arch, bool rope_freqs, uint64_t seed) {
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 256,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_F32, .seed = seed,
                         .arch = arch, .rope_freqs = rope_freqs};
    fkv_error err = {0};
    if (genmodel_write(&p, path, &err)) fail_msg("%s", err.msg);
    return path;
}

/* Logits of every position of a fixed prompt, prefilled in chunks of `chunk`; the KV digest in *kv. */
static float *all_logits(const char *path, uint32_t chunk, uint64_t *kv) {
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) fail_msg("%s", err.msg);
    uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.n_ctx = 256;
    cp.kv_type = FKV_KV_F32;
    fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
    int32_t ids[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) ids[i] = 3 + (i * 37) % 500;
    float *logits = malloc(sizeof(float) * n_vocab * N_PROMPT);
    for (uint32_t p = 0; p < N_PROMPT; p += chunk) {
        uint32_t n = p + chunk <= N_PROMPT ? chunk : N_PROMPT - p;
        if (fkv_eval(ctx, ids + p, n, p, n, logits + (size_t)p * n_vocab, &err)) fail_msg("%s", err.msg);
    }
    if (kv) *kv = fkv_kv_digest(ctx, N_PROMPT);
    fkv_ctx_free(ctx);
    fkv_model_free(m);
    return logits;
}

/* Copy src to dst as a llama file: qwen2.* keys renamed, the rows of attn_q/attn_k (and their biases)
 * reordered in every head from halves order (i, i + d/2) to adjacent pairs (2i, 2i+1) — the conversion
 * that makes a halves-rotary model an adjacent-pairs one — or, for rope_freqs, the tensor dropped or set
 * to ones. */
typedef enum { AS_LLAMA, DROP_FREQS, UNIT_FREQS } rewrite;

static void rewrite_model(const char *src, const char *dst, rewrite how) {
    fkv_error err = {0};
    gguf_file *f = gguf_open(src, &err);
    assert_non_null(f);
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < f->n_kv; i++) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)f->kv[i].key.len, f->kv[i].key.ptr);
        if (how == AS_LLAMA && !strncmp(key, "qwen2.", 6)) {
            char renamed[256];
            snprintf(renamed, sizeof renamed, "llama.%s", key + 6);
            gguf_writer_set_value(w, renamed, &f->kv[i].value);
        } else {
            gguf_writer_set_value(w, key, &f->kv[i].value);
        }
    }
    if (how == AS_LLAMA) gguf_writer_set_str(w, "general.architecture", "llama");
    const uint32_t head_dim = 32, half = head_dim / 2;
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ti = &f->tensors[t];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        const float *data = ti->data;
        float *copy = malloc(ti->nbytes);
        memcpy(copy, data, ti->nbytes);
        bool rotated = strstr(name, "attn_q.") || strstr(name, "attn_k.");
        if (how == AS_LLAMA && rotated) {
            /* rows (weights) or elements (biases) of each head: new 2i <- old i, new 2i+1 <- old i + half */
            uint64_t row = ti->n_dims == 2 ? ti->ne[0] : 1, n_rows = ti->n_dims == 2 ? ti->ne[1] : ti->ne[0];
            for (uint64_t h = 0; h < n_rows / head_dim; h++)
                for (uint32_t i = 0; i < half; i++) {
                    memcpy(copy + (h * head_dim + 2 * i) * row, data + (h * head_dim + i) * row, sizeof(float) * row);
                    memcpy(copy + (h * head_dim + 2 * i + 1) * row, data + (h * head_dim + i + half) * row,
                           sizeof(float) * row);
                }
        }
        if (!strcmp(name, "rope_freqs.weight")) {
            if (how == DROP_FREQS) {
                free(copy);
                continue;
            }
            if (how == UNIT_FREQS)
                for (uint64_t i = 0; i < ti->ne[0]; i++) copy[i] = 1.0f;
        }
        assert_int_equal(gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, copy, &err), 0);
        free(copy);
    }
    assert_int_equal(gguf_writer_write(w, dst, &err), 0);
    gguf_writer_free(w);
    gguf_close(f);
}

/* Tolerance: the two models multiply the same values, but q·k sums the head's elements in another order
 * after the reordering; float32 rounding of that stays far below 1e-4 of the largest logit. */
static void test_qwen2_equals_llama_with_its_rotary_pairs_reordered(void **state) {
    (void)state;
    const char *qwen = generate("qwen2", false, 21), *llama = tu_tmp_path(".gguf");
    rewrite_model(qwen, llama, AS_LLAMA);
    float *a = all_logits(qwen, N_PROMPT, NULL), *b = all_logits(llama, N_PROMPT, NULL);
    double max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < (size_t)512 * N_PROMPT; i++) {
        if (fabs(b[i]) > max_abs) max_abs = fabs(b[i]);
        if (fabs((double)a[i] - b[i]) > max_diff) max_diff = fabs((double)a[i] - b[i]);
    }
    print_message("qwen2 vs reordered llama: max |diff| %g of max |logit| %g\n", max_diff, max_abs);
    assert_true(max_diff <= 1e-4 * max_abs);
    float *c = all_logits(qwen, 7, NULL);
    assert_memory_equal(a, c, sizeof(float) * 512 * N_PROMPT); /* chunking never changes a bit */
    free(a);
    free(b);
    free(c);
    remove(qwen);
    remove(llama);
}

static void test_qwen2_rows_do_not_depend_on_chunks(void **state) {
    (void)state;
    const char *qwen = generate("qwen2", false, 5);
    uint64_t kv1, kv7;
    float *a = all_logits(qwen, 1, &kv1), *b = all_logits(qwen, 7, &kv7);
    assert_true(kv1 == kv7);
    assert_memory_equal(a, b, sizeof(float) * 512 * N_PROMPT);
    free(a);
    free(b);
    remove(qwen);
}

static void test_rope_freqs_of_one_change_no_bit_and_others_do(void **state) {
    (void)state;
    const char *scaled = generate("llama", true, 9), *unit = tu_tmp_path(".gguf"), *none = tu_tmp_path(".gguf");
    rewrite_model(scaled, unit, UNIT_FREQS);
    rewrite_model(scaled, none, DROP_FREQS);
    float *s = all_logits(scaled, N_PROMPT, NULL), *u = all_logits(unit, N_PROMPT, NULL), *n = all_logits(none, N_PROMPT, NULL);
    assert_memory_equal(u, n, sizeof(float) * 512 * N_PROMPT);
    assert_true(memcmp(s, n, sizeof(float) * 512 * N_PROMPT) != 0);
    free(s);
    free(u);
    free(n);
    remove(scaled);
    remove(unit);
    remove(none);
}


/* Each architecture's file reads into the flags and layer roles llama.cpp gives it. */
static void test_each_architecture_reads_its_layer_roles(void **state) {
    (void)state;
    static const char *const names[] = {"qwen3", "smollm3", "phi3", "gemma3"};
    for (size_t a = 0; a < sizeof names / sizeof *names; a++) {
        const char *path = tu_arch_model(names[a], GGML_TYPE_F32, 3);
        assert_non_null(path);
        fkv_model *m = tu_load_model(path);
        const model_hparams *hp = &m->hp;
        assert_string_equal(hp->arch, names[a]);
        for (uint32_t l = 0; l < hp->n_layers; l++) {
            const model_layer *L = &m->layers[l];
            if (!strcmp(names[a], "smollm3")) /* llama.cpp: use_rope = (il + 1) % 4 != 0 */
                assert_int_equal(L->rope, l == 3 ? MODEL_ROPE_NONE : MODEL_ROPE_GLOBAL);
            else if (!strcmp(names[a], "gemma3")) { /* pattern 2: l % 2 < 1 are window layers */
                assert_int_equal(L->window, l % 2 == 0 ? 20 : 0);
                assert_int_equal(L->rope, l % 2 == 0 ? MODEL_ROPE_LOCAL : MODEL_ROPE_GLOBAL);
            } else {
                assert_int_equal(L->window, 0);
                assert_int_equal(L->rope, MODEL_ROPE_GLOBAL);
            }
            assert_true((L->q_norm != NULL) == (!strcmp(names[a], "qwen3") || !strcmp(names[a], "gemma3")));
        }
        if (!strcmp(names[a], "qwen3")) assert_int_equal(hp->head_dim, 64); /* not dim / heads = 32 */
        if (!strcmp(names[a], "phi3")) {
            assert_int_equal(hp->n_rot, 16);
            assert_non_null(m->rope_short);
            assert_true(model_rope_divisors(m, 256) == m->rope_short);  /* n_ctx_orig 256 */
            assert_true(model_rope_divisors(m, 257) == m->rope_long);
        }
        if (!strcmp(names[a], "gemma3")) {
            assert_true(m->output.data == m->tok_embd.data); /* tied */
            assert_true(hp->rope[MODEL_ROPE_LOCAL].base == 10000.0f && hp->rope[MODEL_ROPE_GLOBAL].base == 1e6f);
        }
        fkv_model_free(m);
        remove(path);
    }
}

/* Logits of every position of ids[0..n) from one prefill of a context of n_ctx positions. */
static float *prompt_logits(const fkv_model *m, const int32_t *ids, uint32_t n, uint32_t n_ctx) {
    fkv_error err = {0};
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.kv_type = FKV_KV_F32;
    fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
    if (!ctx) fail_msg("%s", err.msg);
    uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    float *logits = malloc(sizeof(float) * n_vocab * n);
    if (fkv_eval(ctx, ids, n, 0, n, logits, &err)) fail_msg("%s", err.msg);
    fkv_ctx_free(ctx);
    return logits;
}

/* A gemma3 model whose every layer is a window layer of w (pattern 0), L layers: row p depends only on the tokens
 * in (p - L·(w - 1) - 1, p]. Changing token 0 leaves every row from L·(w - 1) + 1 on bit for bit unchanged, and
 * changes rows before it — the window drops exactly the keys it names, and a dropped key's value weighs exactly 0. */
static void test_a_window_layer_never_sees_a_key_outside_its_window(void **state) {
    (void)state;
    enum { W = 9, LAYERS = 2, N = 80 };
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = LAYERS, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 256,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_F32, .seed = 31,
                         .arch = "gemma3", .head_dim = 32, .window = W};
    fkv_error err = {0};
    if (genmodel_write(&p, path, &err)) fail_msg("%s", err.msg);
    const char *all_local = tu_tmp_path(".gguf");
    {
        gguf_file *f = gguf_open(path, &err);
        gguf_writer *w = gguf_writer_new();
        for (uint64_t i = 0; i < f->n_kv; i++) {
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)f->kv[i].key.len, f->kv[i].key.ptr);
            gguf_writer_set_value(w, key, &f->kv[i].value);
        }
        gguf_writer_set_u32(w, "gemma3.attention.sliding_window_pattern", 0); /* llama.cpp: 0 = every layer */
        for (uint64_t t = 0; t < f->n_tensors; t++) {
            const gguf_tensor *ti = &f->tensors[t];
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
            assert_int_equal(gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, ti->data, &err), 0);
        }
        assert_int_equal(gguf_writer_write(w, all_local, &err), 0);
        gguf_writer_free(w);
        gguf_close(f);
    }
    fkv_model *m = tu_load_model(all_local);
    for (uint32_t l = 0; l < LAYERS; l++) assert_int_equal(m->layers[l].window, W);
    int32_t a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = b[i] = 3 + (i * 53) % 500;
    b[0] = 7;
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab, reach = LAYERS * (W - 1);
    float *la = prompt_logits(m, a, N, 256), *lb = prompt_logits(m, b, N, 256);
    for (uint32_t r = 0; r < N; r++) {
        bool same = !memcmp(la + (size_t)r * n_vocab, lb + (size_t)r * n_vocab, sizeof(float) * n_vocab);
        if (r > reach && !same) fail_msg("row %u changed with token 0, outside its reach of %u", r, reach);
        if (r <= reach && same) fail_msg("row %u did not change with token 0, inside its reach of %u", r, reach);
    }
    free(la);
    free(lb);
    fkv_model_free(m);
    remove(path);
    remove(all_local);
}

/* A window at least as long as the prompt, with the window layers' rope base the global one, computes what full
 * attention computes, bit for bit: the window's walk is the full walk when it covers every key. */
static void test_a_window_covering_every_key_equals_full_attention(void **state) {
    (void)state;
    enum { N = 70 };
    const char *windowed = tu_tmp_path(".gguf"), *full = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 256,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_F32, .seed = 5,
                         .arch = "gemma3", .head_dim = 32, .window = N, .window_pattern = 2};
    fkv_error err = {0};
    if (genmodel_write(&p, windowed, &err)) fail_msg("%s", err.msg);
    p.window = 0;
    p.window_pattern = 0;
    if (genmodel_write(&p, full, &err)) fail_msg("%s", err.msg);
    /* the window layers' base: 10000 unless rope.freq_base_swa says otherwise; make it the global base */
    const char *same_base = tu_tmp_path(".gguf");
    {
        gguf_file *f = gguf_open(windowed, &err);
        gguf_writer *w = gguf_writer_new();
        for (uint64_t i = 0; i < f->n_kv; i++) {
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)f->kv[i].key.len, f->kv[i].key.ptr);
            gguf_writer_set_value(w, key, &f->kv[i].value);
        }
        gguf_writer_set_f32(w, "gemma3.rope.freq_base_swa", 1000000.0f);
        for (uint64_t t = 0; t < f->n_tensors; t++) {
            const gguf_tensor *ti = &f->tensors[t];
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
            assert_int_equal(gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, ti->data, &err), 0);
        }
        assert_int_equal(gguf_writer_write(w, same_base, &err), 0);
        gguf_writer_free(w);
        gguf_close(f);
    }
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = 3 + (i * 29) % 500;
    fkv_model *mw = tu_load_model(same_base), *mf = tu_load_model(full), *m10k = tu_load_model(windowed);
    assert_int_equal(mw->layers[0].window, N);
    assert_int_equal(mf->layers[0].window, 0);
    const size_t bytes = sizeof(float) * fkv_model_get_info(mf).n_vocab * N;
    float *a = prompt_logits(mw, ids, N, 256), *b = prompt_logits(mf, ids, N, 256), *c = prompt_logits(m10k, ids, N, 256);
    assert_memory_equal(a, b, bytes);
    assert_true(memcmp(a, c, bytes) != 0); /* the window layers' own rope base does change the answer */
    free(a);
    free(b);
    free(c);
    fkv_model_free(mw);
    fkv_model_free(mf);
    fkv_model_free(m10k);
    remove(windowed);
    remove(full);
    remove(same_base);
}

/* Phi-3's LongRoPE: contexts up to original_context_length (256 here) rotate with the short factors, longer ones
 * with the long factors — llama.cpp's choice by context size. */
static void test_phi3_takes_long_factors_only_past_the_original_context(void **state) {
    (void)state;
    enum { N = 40 };
    const char *path = tu_arch_model("phi3", GGML_TYPE_F32, 8);
    fkv_model *m = tu_load_model(path);
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = 3 + (i * 31) % 500;
    const size_t bytes = sizeof(float) * fkv_model_get_info(m).n_vocab * N;
    float *a = prompt_logits(m, ids, N, 100), *b = prompt_logits(m, ids, N, 256), *c = prompt_logits(m, ids, N, 512);
    assert_memory_equal(a, b, bytes);
    assert_true(memcmp(a, c, bytes) != 0);
    free(a);
    free(b);
    free(c);
    fkv_model_free(m);
    remove(path);
}

/* Metadata flatkv does not compute is refused with its key named, not computed wrongly. */
static void test_unsupported_metadata_is_refused_by_key(void **state) {
    (void)state;
    static const struct {
        const char *key;
        float value;
    } cases[] = {{"gemma3.final_logit_softcapping", 30.0f}, {"gemma3.rope.scaling.yarn_log_multiplier", 0.1f}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *path = tu_arch_model("gemma3", GGML_TYPE_F32, 2), *bad = tu_tmp_path(".gguf");
        fkv_error err = {0};
        gguf_file *f = gguf_open(path, &err);
        gguf_writer *w = gguf_writer_new();
        for (uint64_t k = 0; k < f->n_kv; k++) {
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)f->kv[k].key.len, f->kv[k].key.ptr);
            gguf_writer_set_value(w, key, &f->kv[k].value);
        }
        gguf_writer_set_f32(w, cases[i].key, cases[i].value);
        for (uint64_t t = 0; t < f->n_tensors; t++) {
            const gguf_tensor *ti = &f->tensors[t];
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
            assert_int_equal(gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, ti->data, &err), 0);
        }
        assert_int_equal(gguf_writer_write(w, bad, &err), 0);
        gguf_writer_free(w);
        gguf_close(f);
        assert_null(fkv_model_load(bad, &err));
        assert_non_null(strstr(err.msg, cases[i].key));
        remove(path);
        remove(bad);
    }
}

/* A prefill that wants only its last row's logits writes that row's final norm into rows of the scratch that another
 * thread may still be reading in its own last residual add; the pass waits for every thread first. Without that
 * barrier, gemma3 (whose post-FFN norm lengthens that last step) gave other bits in about 1 run of 5 on 2 threads. */
static void test_last_row_logits_never_race_the_last_residual_add(void **state) {
    (void)state;
    enum { N = 40, RUNS = 25 };
    const char *path = tu_arch_model("gemma3", GGML_TYPE_F32, 4);
    fkv_model *m = tu_load_model(path);
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = 3 + (i * 41) % 500;
    float *want = malloc(sizeof(float) * n_vocab), *got = malloc(sizeof(float) * n_vocab);
    fkv_error err = {0};
    for (int run = 0; run <= RUNS; run++) {
        fkv_ctx_params cp = fkv_ctx_default_params();
        cp.n_ctx = 64;
        cp.n_threads = run ? 2 : 1;
        fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
        if (!ctx) fail_msg("%s", err.msg);
        if (fkv_eval(ctx, ids, N, 0, 1, run ? got : want, &err)) fail_msg("%s", err.msg);
        if (run && memcmp(want, got, sizeof(float) * n_vocab)) fail_msg("run %d on 2 threads differs from 1 thread", run);
        fkv_ctx_free(ctx);
    }
    free(want);
    free(got);
    fkv_model_free(m);
    remove(path);
}

/* tu_arch_model's hybrids: dim 128, 4 heads of 32 (8 rotated dims), gated DeltaNet heads of d = 16, 8 value heads on
 * 4 key heads, a convolution of 4 taps, attention in layer 3. */
enum { D = 16, HV = 8, HK = 4, CONV_DIM = (2 * HK + HV) * D, TAPS = 4 };

/* An array metadata value of `count` int32 elements. */
#define INT32S(count, ...) (&(const gguf_value){.type = GGUF_TYPE_ARRAY, \
                                                .arr = {.elem_type = GGUF_TYPE_INT32, .n = (count), \
                                                        .raw = (const uint8_t *)(const int32_t[]){__VA_ARGS__}}})

/* ---- hybrids (qwen35, qwen35moe; docs/design.md §5): layer roles, the state's size, hostile files ---- */

/* Three of every four layers are gated DeltaNet layers (full_attention_interval 4), the fourth a gated attention
 * layer with the double-width q; attention.recurrent_layers, where a file has it, decides instead. The state: each
 * recurrent layer's convolution window and d × d state per value head, one buffer. */
static void test_layer_roles_follow_the_interval_or_the_flags(void **state) {
    (void)state;
    char *path = strdup(tu_arch_model("qwen35", GGML_TYPE_F32, 3));
    fkv_model *m = tu_load_model(path);
    const model_hparams *hp = &m->hp;
    assert_int_equal(hp->ssm_d, D);
    assert_int_equal(hp->n_v_heads, HV);
    assert_int_equal(hp->n_k_heads, HK);
    assert_int_equal(hp->n_conv, TAPS);
    assert_int_equal(hp->n_rot, 8); /* a quarter of the head */
    for (uint32_t l = 0; l < 3; l++) {
        assert_non_null(m->layers[l].gdn);
        assert_int_equal(m->layers[l].gdn->state_at, l * ((TAPS - 1) * CONV_DIM + HV * D * D));
    }
    assert_null(m->layers[3].gdn);
    assert_int_equal(m->layers[3].wq.n_out, 2 * 4 * 32);
    assert_int_equal(hp->state_floats, 3 * ((TAPS - 1) * CONV_DIM + HV * D * D));
    assert_int_equal(fkv_model_state_bytes(m), sizeof(float) * hp->state_floats);
    fkv_model_free(m);

    const char *flags = tu_rewritten(path, "qwen35.attention.recurrent_layers", INT32S(4, 1, 1, 1, 0), NULL,
                                     TU_RESHAPE, 0, NULL);
    m = tu_load_model(flags);
    remove(flags);
    assert_true(m->layers[2].gdn && !m->layers[3].gdn);
    fkv_model_free(m);
    /* roles the tensors do not have: refused, naming the tensor the role needs */
    tu_expect_refused(path, "qwen35.attention.recurrent_layers", INT32S(4, 0, 1, 1, 0), NULL, 0, NULL,
                      "blk.0.attn_output.weight");
    tu_expect_refused(path, "qwen35.full_attention_interval", TU_U32(2), NULL, 0, NULL, "blk.1.attn_output.weight");
    remove(path);
    free(path);

    /* qwen35moe: qwen3moe's experts, one shared expert of the expert width gated by a row of dim */
    path = strdup(tu_arch_model("qwen35moe", GGML_TYPE_F32, 3));
    m = tu_load_model(path);
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        assert_non_null(m->layers[l].moe);
        assert_int_equal(m->layers[l].hidden, 64);
        assert_int_equal(m->layers[l].shared_gate.n_out, 1);
        assert_true((m->layers[l].gdn != NULL) == (l != 3));
    }
    fkv_model_free(m);
    remove(path);
    free(path);
}

static void test_hostile_hybrid_files_are_refused_naming_the_key_or_tensor(void **state) {
    (void)state;
    char *path = strdup(tu_arch_model("qwen35moe", GGML_TYPE_F32, 5)); /* its shared expert's width and gate */
    tu_expect_refused(path, "qwen35moe.expert_shared_feed_forward_length", TU_U32(0), NULL, 0, NULL,
                      "shared experts are 0 wide");
    tu_expect_refused(path, NULL, NULL, "blk.0.ffn_gate_inp_shexp.weight", 2, (const uint64_t[]){64, 2},
                      "blk.0.ffn_gate_inp_shexp.weight");
    remove(path);
    free(path);
    path = strdup(tu_arch_model("qwen35", GGML_TYPE_F32, 5));
    tu_expect_refused(path, "qwen35.ssm.conv_kernel", TU_U32(0), NULL, 0, NULL, "qwen35.ssm.conv_kernel is 0");
    tu_expect_refused(path, "qwen35.ssm.conv_kernel", TU_U32(65), NULL, 0, NULL, "qwen35.ssm.conv_kernel is 65");
    tu_expect_refused(path, "qwen35.ssm.conv_kernel", TU_U32(3), NULL, 0, NULL, "blk.0.ssm_conv1d.weight");
    tu_expect_refused(path, "qwen35.ssm.state_size", TU_U32(0), NULL, 0, NULL, "qwen35.ssm.state_size is 0");
    tu_expect_refused(path, "qwen35.ssm.state_size", TU_U32(1u << 20), NULL, 0, NULL, "ssm.state_size is 1048576");
    tu_expect_refused(path, "qwen35.ssm.group_count", TU_U32(3), NULL, 0, NULL, "multiple of ssm.group_count 3");
    tu_expect_refused(path, "qwen35.ssm.time_step_rank", TU_U32(1u << 30), NULL, 0, NULL, "ssm.time_step_rank");
    tu_expect_refused(path, "qwen35.ssm.inner_size", TU_U32(100), NULL, 0, NULL, "qwen35.ssm.inner_size is 100");
    tu_expect_refused(path, "qwen35.full_attention_interval", TU_U32(0), NULL, 0, NULL, "full_attention_interval is 0");
    tu_expect_refused(path, "qwen35.attention.recurrent_layers", INT32S(3, 1, 1, 1), NULL, 0, NULL,
                      "attention.recurrent_layers must be an array of a flag per block (4)");
    tu_expect_refused(path, "qwen35.rope.dimension_sections", INT32S(4, 0, 0, 0, 0), NULL, 0, NULL, "sums to 0");
    tu_expect_refused(path, "qwen35.rope.dimension_sections", INT32S(4, 20, 20, 20, 0), NULL, 0, NULL, "sums to 60");
    tu_expect_refused(path, "qwen35.rope.dimension_sections", INT32S(4, -1, 2, 2, 0), NULL, 0, NULL, "[0] is -1");
    /* sector 3 of 4 falls to the fourth section, which a text token's positions leave unrotated */
    tu_expect_refused(path, "qwen35.rope.dimension_sections", INT32S(4, 1, 1, 1, 1), NULL, 0, NULL,
                      "leaves rotary pair 3");
    /* the same elements in another shape */
    tu_expect_refused(path, NULL, NULL, "blk.0.ssm_a", 2, (const uint64_t[]){4, 2}, "blk.0.ssm_a");
    tu_expect_refused(path, NULL, NULL, "blk.1.attn_qkv.weight", 2, (const uint64_t[]){CONV_DIM, 128},
                      "blk.1.attn_qkv.weight");
    tu_expect_refused(path, NULL, NULL, "blk.1.ssm_conv1d.weight", 2, (const uint64_t[]){CONV_DIM, TAPS},
                      "blk.1.ssm_conv1d.weight");
    tu_expect_refused(path, NULL, NULL, "blk.2.ssm_norm.weight", 2, (const uint64_t[]){8, 2}, "blk.2.ssm_norm");
    tu_expect_refused(path, NULL, NULL, "blk.2.ssm_out.weight", 2, (const uint64_t[]){HV * D / 2, 256},
                      "blk.2.ssm_out.weight");
    tu_expect_refused(path, NULL, NULL, "blk.3.attn_q.weight", 2, (const uint64_t[]){256, 128}, "blk.3.attn_q.weight");
    remove(path);
    free(path);
    /* a state far wider than the weights that imply it (d = 256 over dim 32): more than the file, refused */
    const char *wide = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 32, .hidden = 64, .n_layers = 8, .n_heads = 1, .n_kv_heads = 1, .n_ctx = 64,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_Q8_0, .seed = 1,
                         .arch = "qwen35", .ssm_d = 256, .ssm_v_heads = 16, .ssm_k_heads = 16};
    fkv_error err = {0};
    assert_int_equal(genmodel_write(&p, wide, &err), 0);
    assert_null(fkv_model_load(wide, &err));
    assert_non_null(strstr(err.msg, "its recurrent state would take 26050560 bytes a sequence, more than the file's"));
    /* no attention layer at all: nothing confirms the head sizes, and no layer would keep K/V rows */
    p = (genmodel_params){.dim = 128, .hidden = 256, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 64,
                          .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_F32, .seed = 1,
                          .arch = "qwen35", .attn_interval = 8};
    assert_int_equal(genmodel_write(&p, wide, &err), 0);
    assert_null(fkv_model_load(wide, &err));
    assert_non_null(strstr(err.msg, "none of its 4 layers is an attention layer"));
    remove(wide);
}

/* Every part of both kinds of layer reaches the logits: a zeroed convolution, output gate or output projection of a
 * gated DeltaNet layer, or a zeroed output of the attention layer, changes them. */
static void test_every_part_of_a_hybrid_layer_counts(void **state) {
    (void)state;
    char *path = strdup(tu_arch_model("qwen35", GGML_TYPE_F32, 7));
    float *base = tu_last_logits(path);
    const char *parts[] = {"blk.0.ssm_conv1d.weight", "blk.1.attn_gate.weight", "blk.2.ssm_out.weight",
                           "blk.3.attn_output.weight"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        const char *zeroed = tu_rewritten(path, NULL, NULL, parts[i], TU_ZEROS, 0, NULL);
        float *got = tu_last_logits(zeroed);
        remove(zeroed);
        if (!memcmp(got, base, sizeof(float) * 512)) fail_msg("zeroing %s changed nothing", parts[i]);
        free(got);
    }
    free(base);
    remove(path);
    free(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2_equals_llama_with_its_rotary_pairs_reordered),
        cmocka_unit_test(test_qwen2_rows_do_not_depend_on_chunks),
        cmocka_unit_test(test_rope_freqs_of_one_change_no_bit_and_others_do),
        cmocka_unit_test(test_each_architecture_reads_its_layer_roles),
        cmocka_unit_test(test_a_window_layer_never_sees_a_key_outside_its_window),
        cmocka_unit_test(test_a_window_covering_every_key_equals_full_attention),
        cmocka_unit_test(test_phi3_takes_long_factors_only_past_the_original_context),
        cmocka_unit_test(test_unsupported_metadata_is_refused_by_key),
        cmocka_unit_test(test_last_row_logits_never_race_the_last_residual_add),
        cmocka_unit_test(test_layer_roles_follow_the_interval_or_the_flags),
        cmocka_unit_test(test_hostile_hybrid_files_are_refused_naming_the_key_or_tensor),
        cmocka_unit_test(test_every_part_of_a_hybrid_layer_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
