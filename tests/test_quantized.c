/* Quantized weights: a generated Q8_0 / Q4_0 / Q4_K / Q6_K / MXFP4 model against the same model with its weights
 * dequantized to F32. The weights are then identical in value, so the logits differ only by the Q8_0 quantization of
 * activations that integer dot products need — a bounded, per-row error this test measures. */
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
#include "kernels/quant.h"
#include "testutil.h"

/* Copy src to dst with every tensor dequantized to F32 and all metadata kept. */
static void write_dequantized(const char *src, const char *dst) {
    fkv_error err = {0};
    gguf_file *f = gguf_open(src, &err);
    assert_non_null(f);
    gguf_writer *w = gguf_writer_new();
    gguf_writer_copy_kv(w, f, "", NULL);
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ti = &f->tensors[t];
        uint64_t n = 1;
        for (uint32_t d = 0; d < ti->n_dims; d++) n *= ti->ne[d];
        float *data = malloc(sizeof(float) * n);
        size_t row_bytes = ggml_row_size(ti->type, ti->ne[0]);
        for (uint64_t r = 0; r < n / ti->ne[0]; r++)
            quant_dequantize_row(ti->type, (const uint8_t *)ti->data + r * row_bytes, data + r * ti->ne[0], ti->ne[0]);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        assert_int_equal(gguf_writer_add_tensor(w, name, GGML_TYPE_F32, ti->n_dims, ti->ne, data, &err), 0);
        free(data);
    }
    assert_int_equal(gguf_writer_write(w, dst, &err), 0);
    gguf_writer_free(w);
    gguf_close(f);
}

/* Logits of the last row of a fixed prompt. */
static float *last_logits(const char *path, uint32_t *n_vocab) {
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) fail_msg("%s", err.msg);
    *n_vocab = fkv_model_get_info(m).n_vocab;
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.kv_type = FKV_KV_F32;
    cp.n_ctx = 256;
    fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
    assert_non_null(ctx);
    const char *text = "One day, a little girl named Lily found a needle in her room.";
    int32_t ids[128];
    int n = fkv_tokenize(m, text, strlen(text), true, false, ids, 128, &err);
    assert_true(n > 8 && n < 128);
    float *logits = malloc(sizeof(float) * *n_vocab);
    assert_int_equal(fkv_eval(ctx, ids, (uint32_t)n, 0, 1, logits, &err), 0);
    fkv_ctx_free(ctx);
    fkv_model_free(m);
    return logits;
}

/* ||a - b|| / ||b|| over the logits. */
static double relative_error(ggml_type type, uint32_t hidden) {
    const char *quantized = tu_tmp_path(".gguf"), *dequantized = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 256, .hidden = hidden, .n_layers = 4, .n_heads = 8, .n_kv_heads = 4, .n_ctx = 256,
                         .vocab_from = tu_data("tokenizers/ggml-vocab-llama-spm.gguf"), .type = type, .seed = 3};
    fkv_error err = {0};
    if (genmodel_write(&p, quantized, &err)) fail_msg("%s", err.msg);
    write_dequantized(quantized, dequantized);
    uint32_t n_vocab, n_vocab2;
    float *q = last_logits(quantized, &n_vocab), *f = last_logits(dequantized, &n_vocab2);
    assert_int_equal(n_vocab, n_vocab2);
    double num = 0, den = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        assert_true(isfinite(q[i]));
        num += ((double)q[i] - f[i]) * ((double)q[i] - f[i]);
        den += (double)f[i] * f[i];
    }
    free(q);
    free(f);
    remove(quantized);
    remove(dequantized);
    return sqrt(num / den);
}

/* Bound: Q8_0 activations carry a relative rounding error of about 1/(2*127*sqrt(3)) ≈ 0.2% per element;
 * through 4 layers of random weights it compounds to ~1% of the logits. 3% leaves room for the seed,
 * and still fails on any real mistake (a wrong block layout or scale gives errors near 100%). */
static void expect_logits_within_3_percent(ggml_type type, uint32_t hidden) {
    double e = relative_error(type, hidden);
    print_message("%s relative logits error: %.5f\n", ggml_type_name(type), e);
    assert_true(e > 0 && e < 0.03);
}

static void test_q8_0_logits_stay_within_3_percent_of_f32(void **state) {
    (void)state;
    expect_logits_within_3_percent(GGML_TYPE_Q8_0, 640);
}

static void test_q4_0_logits_stay_within_3_percent_of_f32(void **state) {
    (void)state;
    expect_logits_within_3_percent(GGML_TYPE_Q4_0, 640);
}

/* K-quant rows are whole super-blocks of 256, so the hidden size is 768 here. */
static void test_q4_k_logits_stay_within_3_percent_of_f32(void **state) {
    (void)state;
    expect_logits_within_3_percent(GGML_TYPE_Q4_K, 768);
}

static void test_q6_k_logits_stay_within_3_percent_of_f32(void **state) {
    (void)state;
    expect_logits_within_3_percent(GGML_TYPE_Q6_K, 768);
}

static void test_mxfp4_logits_stay_within_3_percent_of_f32(void **state) {
    (void)state;
    expect_logits_within_3_percent(GGML_TYPE_MXFP4, 640);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_logits_stay_within_3_percent_of_f32),
        cmocka_unit_test(test_q4_0_logits_stay_within_3_percent_of_f32),
        cmocka_unit_test(test_q4_k_logits_stay_within_3_percent_of_f32),
        cmocka_unit_test(test_q6_k_logits_stay_within_3_percent_of_f32),
        cmocka_unit_test(test_mxfp4_logits_stay_within_3_percent_of_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
