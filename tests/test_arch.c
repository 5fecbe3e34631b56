/* Architectures beyond llama's defaults: qwen2 (q/k/v biases, rotary pairs taken as halves) and Llama-3.1's
 * per-dimension rotary frequency divisors (rope_freqs.weight) — each checked against an equivalent model
 * flatkv already computes, and for row invariance. */
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
#include "genmodel.h"
#include "gguf.h"
#include "testutil.h"

#define N_PROMPT 40

static const char *generate(const char *arch, bool rope_freqs, uint64_t seed) {
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 256,
                         .vocab_from = tu_shared("models/stories260K.gguf"), .type = GGML_TYPE_F32, .seed = seed,
                         .arch = arch, .rope_freqs = rope_freqs};
    fkv_error err = {{0}};
    if (genmodel_write(&p, path, &err)) fail_msg("%s", err.msg);
    return path;
}

/* Logits of every position of a fixed prompt, prefilled in chunks of `chunk`; the KV digest in *kv. */
static float *all_logits(const char *path, uint32_t chunk, uint64_t *kv) {
    fkv_error err = {{0}};
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
    fkv_error err = {{0}};
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen2_equals_llama_with_its_rotary_pairs_reordered),
        cmocka_unit_test(test_qwen2_rows_do_not_depend_on_chunks),
        cmocka_unit_test(test_rope_freqs_of_one_change_no_bit_and_others_do),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
