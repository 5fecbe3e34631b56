/* gen-model's mixes: each matrix gets the type llama.cpp's Q4_K_M, Q5_K_M or Q3_K_M would give it (genmodel.h),
 * with llama.cpp's fallbacks where 256 does not divide a row; the files load and run, the same parameters give the
 * same bytes, and a uniform K-quant refuses a row length it cannot hold, naming the tensor. */
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
#include "testutil.h"

#define N_LAYERS 8

/* use_more_bits(i, 8) written out: i < 1, i >= 7, or (i - 1) % 3 == 2, i.e. layers 0, 3, 6, 7. Listed,
 * not computed, so that the test does not share a formula with the code it checks. */
static const bool MORE_BITS[N_LAYERS] = {true, false, false, true, false, false, true, true};

static genmodel_params q4_k_m_params(void) {
    return (genmodel_params){.dim = 256, .hidden = 512, .n_layers = N_LAYERS, .n_heads = 4, .n_kv_heads = 2,
                             .n_ctx = 256, .vocab_from = tu_data("tokenizers/ggml-vocab-llama-spm.gguf"),
                             .mix = GENMODEL_Q4_K_M, .seed = 11};
}

static const char *write_model(const genmodel_params *p) {
    const char *path = tu_tmp_path(".gguf");
    fkv_error err = {0};
    if (genmodel_write(p, path, &err)) fail_msg("%s", err.msg);
    return path;
}

/* The type the rule of genmodel.h gives tensor `name`. */
static ggml_type expected_type(const char *name, bool tied) {
    unsigned layer;
    char role[64];
    if (!strcmp(name, "output.weight")) return GGML_TYPE_Q6_K;
    if (!strcmp(name, "token_embd.weight")) return tied ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K;
    assert_int_equal(sscanf(name, "blk.%u.%63s", &layer, role), 2);
    assert_true(layer < N_LAYERS);
    if (!strcmp(role, "attn_v.weight") || !strcmp(role, "ffn_down.weight"))
        return MORE_BITS[layer] ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K;
    return GGML_TYPE_Q4_K;
}

/* Checks every tensor of path against the rule; returns the number of matrices seen. */
static int check_types(const char *path, bool tied) {
    fkv_error err = {0};
    gguf_file *f = gguf_open(path, &err);
    if (!f) fail_msg("%s", err.msg);
    int n_matrices = 0;
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ti = &f->tensors[t];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        ggml_type want = ti->n_dims == 1 ? GGML_TYPE_F32 : expected_type(name, tied);
        if (ti->type != want)
            fail_msg("%s: type %s, want %s", name, ggml_type_name(ti->type), ggml_type_name(want));
        n_matrices += ti->n_dims == 2;
    }
    gguf_close(f);
    return n_matrices;
}

static void test_q4_k_m_gives_q6_k_to_output_and_to_attn_v_and_ffn_down_of_use_more_bits_layers(void **state) {
    (void)state;
    genmodel_params p = q4_k_m_params();
    const char *path = write_model(&p);
    /* token_embd, output, and 7 matrices per layer. */
    assert_int_equal(check_types(path, false), 2 + 7 * N_LAYERS);
    remove(path);
}

/* A tied model's token_embd is its output matrix, so llama.cpp gives it the output's type. */
static void test_q4_k_m_gives_q6_k_to_a_tied_token_embedding(void **state) {
    (void)state;
    genmodel_params p = q4_k_m_params();
    p.tied = true;
    const char *path = write_model(&p);
    assert_int_equal(check_types(path, true), 1 + 7 * N_LAYERS);
    remove(path);
}

static void test_a_q4_k_m_model_loads_and_gives_finite_logits(void **state) {
    (void)state;
    genmodel_params p = q4_k_m_params();
    const char *path = write_model(&p);
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) fail_msg("%s", err.msg);
    remove(path); /* the mapping stays valid */
    uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.n_ctx = 64;
    fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
    if (!ctx) fail_msg("%s", err.msg);
    const char *text = "The quick brown fox jumps over the lazy dog.";
    int32_t ids[64];
    int n = fkv_tokenize(m, text, strlen(text), true, false, ids, 64, &err);
    assert_true(n > 4 && n < 64);
    float *logits = malloc(sizeof(float) * n_vocab * 2);
    if (fkv_eval(ctx, ids, (uint32_t)n, 0, 2, logits, &err)) fail_msg("%s", err.msg);
    double sum_sq = 0;
    for (uint32_t i = 0; i < 2 * n_vocab; i++) {
        assert_true(isfinite(logits[i]));
        sum_sq += (double)logits[i] * logits[i];
    }
    assert_true(sum_sq > 0); /* not all zeros: the weights were read */
    free(logits);
    fkv_ctx_free(ctx);
    fkv_model_free(m);
}

static void test_q4_k_m_files_are_byte_identical_for_the_same_parameters(void **state) {
    (void)state;
    genmodel_params p = q4_k_m_params();
    char first[4096];
    snprintf(first, sizeof first, "%s", write_model(&p));
    const char *second = write_model(&p);
    size_t n1, n2;
    char *a = tu_read_file(first, &n1), *b = tu_read_file(second, &n2);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a);
    free(b);
    remove(first);
    remove(second);
}

/* A uniform type keeps its promise (every matrix is that type): a row its block does not divide is refused. */
static void expect_refused(uint32_t dim, uint32_t hidden, const char *tensor, const char *row_length) {
    genmodel_params p = q4_k_m_params();
    p.mix = GENMODEL_UNIFORM;
    p.type = GGML_TYPE_Q4_K;
    p.dim = dim;
    p.hidden = hidden;
    const char *path = tu_tmp_path(".gguf");
    fkv_error err = {0};
    assert_int_equal(genmodel_write(&p, path, &err), -1);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, tensor));
    assert_non_null(strstr(err.msg, row_length));
    assert_null(tu_read_file(path, NULL)); /* nothing written */
}

static void test_a_uniform_k_quant_refuses_rows_that_are_not_whole_256_blocks_naming_the_tensor(void **state) {
    (void)state;
    expect_refused(384, 512, "'token_embd.weight'", "rows of 384 elements");
    expect_refused(256, 640, "'blk.0.ffn_down.weight'", "rows of 640 elements");
}

/* The other mixes and the fallbacks, with llama.cpp's choices listed per tensor role (not computed by the rule's
 * code): `fits` when 256 divides the rows, else the row lengths are 384 (dim) and 640 (hidden), which 32 divides. */
typedef struct {
    genmodel_mix mix;
    bool fits;
} mix_case;

static ggml_type listed_type(mix_case c, const char *name) {
    unsigned layer = 0;
    char role[64] = "";
    sscanf(name, "blk.%u.%63s", &layer, role);
    const bool out = !strcmp(name, "output.weight"), v = !strcmp(role, "attn_v.weight"),
               down = !strcmp(role, "ffn_down.weight"), o = !strcmp(role, "attn_output.weight");
    if (out) return c.fits ? GGML_TYPE_Q6_K : GGML_TYPE_Q8_0;
    switch (c.mix) {
    case GENMODEL_Q5_K_M:
        if ((v || down) && MORE_BITS[layer]) return c.fits ? GGML_TYPE_Q6_K : GGML_TYPE_Q8_0;
        return c.fits ? GGML_TYPE_Q5_K : GGML_TYPE_Q5_1;
    case GENMODEL_Q3_K_M: /* 8 layers: ffn_down's Q5_K layers (i < 8/16) are none */
        if (v && layer < 2) return c.fits ? GGML_TYPE_Q5_K : GGML_TYPE_Q5_1;
        if (v || down || o) return c.fits ? GGML_TYPE_Q4_K : GGML_TYPE_Q5_0;
        return c.fits ? GGML_TYPE_Q3_K : GGML_TYPE_Q4_0;
    default:
        if ((v || down) && MORE_BITS[layer]) return c.fits ? GGML_TYPE_Q6_K : GGML_TYPE_Q8_0;
        return c.fits ? GGML_TYPE_Q4_K : GGML_TYPE_Q5_0;
    }
}

static void expect_listed_types_and_finite_logits(mix_case c) {
    genmodel_params p = q4_k_m_params();
    p.mix = c.mix;
    if (!c.fits) {
        p.dim = 384;
        p.hidden = 640;
    }
    const char *path = write_model(&p);
    fkv_error err = {0};
    gguf_file *f = gguf_open(path, &err);
    if (!f) fail_msg("%s", err.msg);
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ti = &f->tensors[t];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        const ggml_type want = ti->n_dims == 1 ? GGML_TYPE_F32 : listed_type(c, name);
        if (ti->type != want)
            fail_msg("mix %d%s: %s has type %s, want %s", (int)c.mix, c.fits ? "" : " (fallbacks)", name,
                     ggml_type_name(ti->type), ggml_type_name(want));
    }
    gguf_close(f);
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) fail_msg("%s", err.msg);
    remove(path);
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.n_ctx = 32;
    fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
    if (!ctx) fail_msg("%s", err.msg);
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    const int32_t ids[4] = {1, 450, 4996, 17354};
    float *logits = malloc(sizeof(float) * n_vocab);
    if (fkv_eval(ctx, ids, 4, 0, 1, logits, &err)) fail_msg("%s", err.msg);
    double sum_sq = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        assert_true(isfinite(logits[i]));
        sum_sq += (double)logits[i] * logits[i];
    }
    assert_true(sum_sq > 0);
    free(logits);
    fkv_ctx_free(ctx);
    fkv_model_free(m);
}

static void test_q5_k_m_and_q3_k_m_give_llama_cpp_types_and_load(void **state) {
    (void)state;
    expect_listed_types_and_finite_logits((mix_case){GENMODEL_Q5_K_M, true});
    expect_listed_types_and_finite_logits((mix_case){GENMODEL_Q3_K_M, true});
}

static void test_mixes_fall_back_as_llama_cpp_does_where_256_does_not_divide_a_row(void **state) {
    (void)state;
    expect_listed_types_and_finite_logits((mix_case){GENMODEL_Q4_K_M, false});
    expect_listed_types_and_finite_logits((mix_case){GENMODEL_Q5_K_M, false});
    expect_listed_types_and_finite_logits((mix_case){GENMODEL_Q3_K_M, false});
}

/* Rows that 32 does not divide either: llama.cpp writes F16 there. */
static void test_mixes_write_f16_where_no_block_divides_a_row(void **state) {
    (void)state;
    genmodel_params p = q4_k_m_params();
    p.dim = 272; /* 8.5 blocks of 32; 4 heads of 68 */
    p.hidden = 512;
    const char *path = write_model(&p);
    fkv_error err = {0};
    gguf_file *f = gguf_open(path, &err);
    if (!f) fail_msg("%s", err.msg);
    const gguf_tensor *q = gguf_find_tensor(f, "blk.0.attn_q.weight"), *o = gguf_find_tensor(f, "output.weight"),
                      *down = gguf_find_tensor(f, "blk.1.ffn_down.weight");
    assert_int_equal(q->type, GGML_TYPE_F16);
    assert_int_equal(o->type, GGML_TYPE_F16);
    assert_int_equal(down->type, GGML_TYPE_Q4_K); /* rows of 512 */
    gguf_close(f);
    remove(path);
}

/* The architectures' files carry llama.cpp's own key and tensor names (llama-arch.cpp's LLM_KV_* and LLM_TENSOR_*
 * strings: bench/refcheck loads them in llama.cpp), and the options outside an architecture are refused. */
static void test_each_architecture_is_written_with_llama_cpp_names(void **state) {
    (void)state;
    static const struct {
        const char *arch;
        const char *keys[4];
        const char *tensors[5];
        const char *absent;
    } cases[] = {
        {"qwen3", {"qwen3.attention.key_length", "qwen3.attention.value_length"},
         {"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight", "blk.0.attn_q.weight"}, "blk.0.attn_q.bias"},
        {"smollm3", {"smollm3.rope.dimension_count"}, {"blk.3.attn_q.weight", "blk.3.ffn_gate.weight"}, NULL},
        {"phi3", {"phi3.rope.scaling.original_context_length", "phi3.rope.scaling.attn_factor",
                  "phi3.attention.sliding_window", "phi3.rope.dimension_count"},
         {"blk.0.attn_qkv.weight", "blk.0.ffn_up.weight", "rope_factors_short.weight", "rope_factors_long.weight"},
         "blk.0.ffn_gate.weight"},
        {"gemma3", {"gemma3.attention.sliding_window", "gemma3.attention.sliding_window_pattern",
                    "gemma3.attention.key_length"},
         {"blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight", "blk.0.attn_q_norm.weight",
          "blk.0.attn_k_norm.weight"},
         "output.weight"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 256,
                             .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_F32, .seed = 1,
                             .arch = cases[c].arch, .head_dim = 64};
        if (!strcmp(cases[c].arch, "phi3")) p.head_dim = 0, p.rope_dims = 16;
        if (!strcmp(cases[c].arch, "gemma3")) p.window = 16, p.window_pattern = 2;
        const char *path = tu_tmp_path(".gguf");
        fkv_error err = {0};
        if (genmodel_write(&p, path, &err)) fail_msg("%s", err.msg);
        gguf_file *f = gguf_open(path, &err);
        assert_non_null(f);
        for (int k = 0; k < 4 && cases[c].keys[k]; k++)
            if (!gguf_find(f, cases[c].keys[k])) fail_msg("%s: key %s is missing", cases[c].arch, cases[c].keys[k]);
        for (int t = 0; t < 5 && cases[c].tensors[t]; t++)
            if (!gguf_find_tensor(f, cases[c].tensors[t]))
                fail_msg("%s: tensor %s is missing", cases[c].arch, cases[c].tensors[t]);
        if (cases[c].absent) assert_null(gguf_find_tensor(f, cases[c].absent));
        gguf_close(f);
        remove(path);
    }
    genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 256,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_F32, .window = 8};
    fkv_error err = {0};
    assert_int_equal(genmodel_write(&p, tu_tmp_path(".gguf"), &err), -1); /* llama has no window */
    assert_non_null(strstr(err.msg, "--window"));
    p.window = 0;
    p.arch = "gemma2";
    assert_int_equal(genmodel_write(&p, tu_tmp_path(".gguf"), &err), -1);
    assert_non_null(strstr(err.msg, "gemma2"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_k_m_gives_q6_k_to_output_and_to_attn_v_and_ffn_down_of_use_more_bits_layers),
        cmocka_unit_test(test_q4_k_m_gives_q6_k_to_a_tied_token_embedding),
        cmocka_unit_test(test_a_q4_k_m_model_loads_and_gives_finite_logits),
        cmocka_unit_test(test_q4_k_m_files_are_byte_identical_for_the_same_parameters),
        cmocka_unit_test(test_a_uniform_k_quant_refuses_rows_that_are_not_whole_256_blocks_naming_the_tensor),
        cmocka_unit_test(test_q5_k_m_and_q3_k_m_give_llama_cpp_types_and_load),
        cmocka_unit_test(test_mixes_fall_back_as_llama_cpp_does_where_256_does_not_divide_a_row),
        cmocka_unit_test(test_mixes_write_f16_where_no_block_divides_a_row),
        cmocka_unit_test(test_each_architecture_is_written_with_llama_cpp_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
