/* The llama forward pass against an independent float32 implementation (data/vectors/README.md):
 * prompt ids exact, first-step logits within float32 rounding, greedy ids equal up to the first near-tie. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatkv.h"
#include "testutil.h"

static int32_t argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static json_t *load_vectors(void) {
    json_t *all = json_array();
    FILE *fp = fopen(tu_data("vectors/stories260K-greedy.jsonl"), "r");
    assert_non_null(fp);
    char line[1 << 17];
    while (fgets(line, sizeof line, fp)) {
        json_error_t jerr;
        json_t *v = json_loads(line, 0, &jerr);
        assert_non_null(v);
        json_array_append_new(all, v);
    }
    fclose(fp);
    assert_int_equal(json_array_size(all), 6);
    return all;
}

static void test_stories260k_matches_the_independent_reference(void **state) {
    (void)state;
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(tu_data("models/stories260K.gguf"), &err);
    assert_non_null(m);
    fkv_model_info info = fkv_model_get_info(m);
    assert_int_equal(info.n_vocab, 512);
    assert_int_equal(info.n_layers, 5);
    assert_int_equal(info.n_kv_heads, 4);
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.kv_type = FKV_KV_F32; /* the reference keeps K/V in f32 */
    fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
    assert_non_null(ctx);
    json_t *vectors = load_vectors();
    size_t idx;
    json_t *vec;
    float logits[512];
    json_array_foreach(vectors, idx, vec) {
        const char *prompt = json_string_value(json_object_get(vec, "prompt"));
        json_t *want_ids = json_object_get(vec, "prompt_ids"), *gen = json_object_get(vec, "generated");
        json_t *gaps = json_object_get(vec, "top2_gap"), *first = json_object_get(vec, "first_logits");
        int32_t ids[512];
        int n = fkv_tokenize(m, prompt, strlen(prompt), true, false, ids, 512, &err);
        assert_int_equal(n, (int)json_array_size(want_ids));
        for (int i = 0; i < n; i++) assert_int_equal(ids[i], json_integer_value(json_array_get(want_ids, (size_t)i)));

        assert_int_equal(fkv_eval(ctx, ids, (uint32_t)n, 0, 1, logits, &err), 0);
        /* Tolerance: the reference sums in another order (plain loops, exact softmax); float32 rounding
         * of a 5-layer model stays well inside 1e-4 of the largest logit (vectors/README.md). */
        double max_abs = 0, max_diff = 0;
        for (int i = 0; i < 512; i++) {
            double r = json_number_value(json_array_get(first, (size_t)i));
            if (fabs(r) > max_abs) max_abs = fabs(r);
            if (fabs(r - logits[i]) > max_diff) max_diff = fabs(r - logits[i]);
        }
        if (max_diff > 1e-4 * max_abs) fail_msg("'%s': first logits differ by %g (max |logit| %g)", prompt, max_diff, max_abs);

        /* Greedy ids up to (not including) the first near-tie. */
        size_t n_gen = json_array_size(gen), matched = 0;
        int32_t pos = n;
        for (size_t s = 0; s < n_gen; s++) {
            if (json_number_value(json_array_get(gaps, s)) < 1e-3) break;
            int32_t id = argmax(logits, 512);
            assert_int_equal(id, json_integer_value(json_array_get(gen, s)));
            matched++;
            if (s + 1 == n_gen) break;
            assert_int_equal(fkv_eval(ctx, &id, 1, (uint32_t)pos++, 1, logits, &err), 0);
        }
        print_message("'%.30s...': %zu of %zu greedy ids equal before the first near-tie\n", prompt, matched, n_gen);
    }
    json_decref(vectors);
    fkv_ctx_free(ctx);
    fkv_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k_matches_the_independent_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
