/* Mixtures of experts (docs/design.md §6): a row's routing from its own logits (ops_route), each architecture's
 * expert layers as llama.cpp reads them, experts placed in memory or left in the mapped file, and hostile expert files refused by the
 * key or tensor at fault. Chunk, thread, batch and resume invariance of expert layers: test_invariance,
 * test_engine and test_prefix_cache; the numbers against llama.cpp itself: bench/refcheck. */
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
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/genmodel.h"
#include "model/model.h"
#include "testutil.h"

/* Softmax routing: the k largest probabilities, largest first, weights renormalised to sum 1. */
static void test_softmax_routing_takes_the_largest_and_renormalises(void **state) {
    (void)state;
    float z[6] = {0.5f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f};
    uint32_t sel[3];
    float w[3];
    ops_route(z, 6, NULL, OPS_GATE_SOFTMAX, 3, true, 0.0f, sel, w);
    /* 1 and 4 tie: the lower index first */
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 4);
    assert_int_equal(sel[2], 3);
    assert_true(w[0] == w[1]);
    assert_true(fabsf(w[0] + w[1] + w[2] - 1.0f) < 1e-6f);
    const double e2 = exp(2.0), e15 = exp(1.5);
    assert_true(fabs(w[2] - e15 / (2 * e2 + e15)) < 1e-6);
}

/* Sigmoid routing with a selection bias: the bias chooses, the unbiased probabilities weigh; the scale multiplies. */
static void test_a_selection_bias_chooses_but_never_weighs(void **state) {
    (void)state;
    float z[4] = {3.0f, 0.0f, 1.0f, -2.0f};
    const float bias[4] = {0.0f, 0.0f, 0.0f, 10.0f};
    uint32_t sel[2];
    float w[2];
    ops_route(z, 4, bias, OPS_GATE_SIGMOID, 2, false, 2.5f, sel, w);
    assert_int_equal(sel[0], 3); /* sigmoid(-2) + 10 */
    assert_int_equal(sel[1], 0);
    assert_true(fabsf(w[0] - 2.5f / (1.0f + expf(2.0f))) < 1e-6f);
    assert_true(fabsf(w[1] - 2.5f / (1.0f + expf(-3.0f))) < 1e-6f);
}

/* Softmax of the selected (gpt-oss): the k raw logits chosen, then their own softmax. */
static void test_softmax_of_the_selected_weighs_only_the_k(void **state) {
    (void)state;
    float z[5] = {1.0f, 4.0f, 3.0f, -7.0f, 3.5f};
    uint32_t sel[2];
    float w[2];
    ops_route(z, 5, NULL, OPS_GATE_SOFTMAX_WEIGHT, 2, false, 0.0f, sel, w);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 4);
    assert_true(fabsf(w[0] - 1.0f / (1.0f + expf(-0.5f))) < 1e-6f);
    assert_true(fabsf(w[0] + w[1] - 1.0f) < 1e-6f);
}

/* A NaN logit never displaces a number, and k distinct experts are chosen whatever the logits. */
static void test_routing_chooses_k_distinct_experts_even_from_nans(void **state) {
    (void)state;
    float z[4] = {NAN, 1.0f, NAN, 0.0f};
    uint32_t sel[3];
    float w[3];
    ops_route(z, 4, NULL, OPS_GATE_SIGMOID, 3, false, 0.0f, sel, w);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 3);
    assert_true(sel[2] == 0 || sel[2] == 2);
}

/* qwen3moe: every layer routed, softmax, renormalised; glm4moe: a dense layer 0, shared experts, sigmoid with a
 * selection bias, post_attention_norm before the FFN, its NextN block loaded after the trunk and not counted in it. */
static void test_each_architecture_reads_its_expert_layers(void **state) {
    (void)state;
    const char *path = tu_arch_model("qwen3moe", GGML_TYPE_Q8_0, 3);
    fkv_model *m = tu_load_model(path);
    remove(path);
    assert_int_equal(m->hp.n_expert, 8);
    assert_int_equal(m->hp.n_expert_used, 3);
    assert_int_equal(m->hp.n_ff_exp, 64);
    assert_int_equal(m->hp.gating, OPS_GATE_SOFTMAX);
    assert_true(m->hp.expert_norm);
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        assert_non_null(m->layers[l].moe);
        assert_int_equal(m->layers[l].hidden, 0);
        assert_null(m->layers[l].moe->select_b);
    }
    fkv_model_free(m);

    path = tu_arch_model("glm4moe", GGML_TYPE_Q8_0, 3);
    m = tu_load_model(path);
    remove(path);
    assert_int_equal(m->hp.n_layers, 4);
    assert_int_equal(m->hp.n_nextn, 1);
    assert_int_equal(m->hp.gating, OPS_GATE_SIGMOID);
    assert_null(m->layers[0].moe);
    assert_int_equal(m->layers[0].hidden, 256);
    for (uint32_t l = 1; l < m->hp.n_layers + m->hp.n_nextn; l++) {
        assert_non_null(m->layers[l].moe);
        assert_non_null(m->layers[l].moe->select_b);
        assert_int_equal(m->layers[l].hidden, 64); /* one shared expert of the expert width */
    }
    assert_non_null(m->nextn);
    assert_int_equal(m->nextn[0].eh_proj.n_in, 256);
    assert_true(fkv_model_get_info(m).n_layers == 4);
    fkv_model_free(m);

    /* gpt-oss: biases everywhere, sinks, windows on even layers rotating as the global ones (YaRN) */
    path = tu_arch_model("gpt-oss", GGML_TYPE_Q8_0, 3);
    m = tu_load_model(path);
    remove(path);
    assert_int_equal(m->hp.gating, OPS_GATE_SOFTMAX_WEIGHT);
    assert_false(m->hp.expert_norm);
    assert_true(m->hp.rope[MODEL_ROPE_GLOBAL].ext_factor == 1.0f);
    assert_int_equal(m->hp.rope[MODEL_ROPE_GLOBAL].n_ctx_orig, 4096);
    assert_memory_equal(&m->hp.rope[MODEL_ROPE_LOCAL], &m->hp.rope[MODEL_ROPE_GLOBAL], sizeof(ops_rope_params));
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        const model_layer *L = &m->layers[l];
        assert_int_equal(L->window, l % 2 == 0 ? 20 : 0);
        assert_non_null(L->bo);
        assert_non_null(L->sinks);
        assert_non_null(L->moe->router_b);
        assert_non_null(L->moe->gate_b);
        assert_non_null(L->moe->down_b);
    }
    fkv_model_free(m);
}

/* The experts are placed as FLATKV_EXPERTS says: "map" reads them where the file maps them, never copied; "pack" and
 * "auto" (these few megabytes fit in memory) copy them beside the dense matrices, packed where the variant packs
 * their type; the answers are the same bits (tu_last_logits; and tests/golden.sh, every model, both ways). */
static void test_experts_are_placed_as_flatkv_experts_says(void **state) {
    (void)state;
    const char *path = tu_arch_model("gpt-oss", GGML_TYPE_MXFP4, 5); /* rows of 4 blocks: half groups, packed */
    static const char *const places[] = {"map", "pack", "auto"};
    float *logits[3];
    for (int p = 0; p < 3; p++) {
        setenv("FLATKV_EXPERTS", places[p], 1);
        fkv_model *m = tu_load_model(path);
        assert_int_equal(m->experts_placed, p > 0);
        for (uint32_t l = 0; l < m->hp.n_layers; l++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.ffn_down_exps.weight", l);
            const gguf_tensor *t = gguf_find_tensor(m->file, name);
            const ops_matrix *down = &m->layers[l].moe->down;
            assert_non_null(t);
            assert_int_equal(down->data == t->data, p == 0);
            assert_int_equal(down->packed, p > 0 && kern_packs(down->type, down->n_in));
            assert_int_equal(down->n_out, 128 * 8);
        }
        fkv_model_free(m);
        logits[p] = tu_last_logits(path);
    }
    const uint32_t n_vocab = 512;
    for (int p = 1; p < 3; p++) assert_memory_equal(logits[p], logits[0], n_vocab * sizeof(float));
    for (int p = 0; p < 3; p++) free(logits[p]);
    setenv("FLATKV_EXPERTS", "everywhere", 1);
    fkv_error err = {0};
    assert_null(fkv_model_load(path, &err));
    assert_int_equal(err.code, FKV_E_INPUT);
    assert_non_null(strstr(err.msg, "FLATKV_EXPERTS must be auto, map or pack, got 'everywhere'"));
    unsetenv("FLATKV_EXPERTS");
    remove(path);
}

static void test_hostile_expert_files_are_refused_naming_the_key_or_tensor(void **state) {
    (void)state;
    char *path = strdup(tu_arch_model("glm4moe", GGML_TYPE_F32, 9)); /* tu_tmp_path's slots are reused */
    tu_expect_refused(path, "glm4moe.expert_used_count", TU_U32(0), NULL, 0, NULL, "glm4moe.expert_used_count is 0");
    tu_expect_refused(path, "glm4moe.expert_used_count", TU_U32(9), NULL, 0, NULL, "glm4moe.expert_used_count is 9");
    tu_expect_refused(path, "glm4moe.expert_count", TU_U32(1u << 30), NULL, 0, NULL, "glm4moe.expert_count");
    tu_expect_refused(path, "glm4moe.expert_count", TU_U32(4), NULL, 0, NULL, "blk.1.ffn_gate_inp.weight");
    tu_expect_refused(path, "glm4moe.expert_feed_forward_length", TU_U32(32), NULL, 0, NULL,
                      "blk.1.ffn_gate_exps.weight");
    tu_expect_refused(path, "glm4moe.expert_gating_func", TU_U32(7), NULL, 0, NULL, "glm4moe.expert_gating_func");
    tu_expect_refused(path, "glm4moe.leading_dense_block_count", TU_U32(99), NULL, 0, NULL,
                      "leading_dense_block_count");
    tu_expect_refused(path, "glm4moe.nextn_predict_layers", TU_U32(5), NULL, 0, NULL, "nextn_predict_layers");
    tu_expect_refused(path, "glm4moe.expert_group_count", TU_U32(4), NULL, 0, NULL, "expert_group_count");
    /* the same elements in another shape: a router of the wrong width, experts flattened or regrouped */
    tu_expect_refused(path, NULL, NULL, "blk.2.ffn_gate_inp.weight", 2, (const uint64_t[]){64, 16},
                      "blk.2.ffn_gate_inp");
    tu_expect_refused(path, NULL, NULL, "blk.2.ffn_up_exps.weight", 2, (const uint64_t[]){128, 512},
                      "blk.2.ffn_up_exps.weight");
    tu_expect_refused(path, NULL, NULL, "blk.3.ffn_down_exps.weight", 3, (const uint64_t[]){64, 256, 4},
                      "blk.3.ffn_down_exps.weight");
    tu_expect_refused(path, NULL, NULL, "blk.4.nextn.eh_proj.weight", 2, (const uint64_t[]){128, 256},
                      "blk.4.nextn.eh_proj.weight");
    remove(path);
    free(path);
}

/* A routed layer's output is its experts' (zeroing one layer's expert outputs changes the logits), and a NextN
 * block never runs in the forward pass (zeroing its experts changes nothing). */
static void test_routed_experts_count_and_nextn_blocks_do_not(void **state) {
    (void)state;
    char *path = strdup(tu_arch_model("glm4moe", GGML_TYPE_F32, 21));
    char *no_experts = strdup(tu_rewritten(path, NULL, NULL, "blk.2.ffn_down_exps.weight", TU_ZEROS, 0, NULL));
    char *no_nextn = strdup(tu_rewritten(path, NULL, NULL, "blk.4.ffn_down_exps.weight", TU_ZEROS, 0, NULL));
    float *a = tu_last_logits(path), *b = tu_last_logits(no_experts), *c = tu_last_logits(no_nextn);
    const size_t bytes = sizeof(float) * 512; /* stories260K's vocabulary */
    assert_memory_not_equal(a, b, bytes);
    assert_memory_equal(a, c, bytes);
    free(a);
    free(b);
    free(c);
    remove(path);
    remove(no_experts);
    remove(no_nextn);
    free(path);
    free(no_experts);
    free(no_nextn);
}

/* Gate and up of another type each (a mix may give them different ones): each product takes the rows as its type
 * wants them (f32 or Q8_0), so the answer stays near the all-f32 one (before the fix, the Q8_0 product read rows
 * nobody had written). */
static void test_gate_and_up_of_different_types_each_get_their_rows(void **state) {
    (void)state;
    char *path = strdup(tu_arch_model("qwen3moe", GGML_TYPE_F32, 23));
    const char *mixed = tu_rewritten(path, NULL, NULL, "ffn_up_exps", TU_TO_Q8_0, 0, NULL);
    float *a = tu_last_logits(path), *b = tu_last_logits(mixed);
    float worst = 0.0f;
    for (int i = 0; i < 512; i++) worst = fmaxf(worst, fabsf(a[i] - b[i]));
    if (!(worst < 0.1f)) fail_msg("Q8_0 up beside f32 gate moved a logit by %g", (double)worst);
    free(a);
    free(b);
    remove(path);
    remove(mixed);
    free(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_routing_takes_the_largest_and_renormalises),
        cmocka_unit_test(test_a_selection_bias_chooses_but_never_weighs),
        cmocka_unit_test(test_softmax_of_the_selected_weighs_only_the_k),
        cmocka_unit_test(test_routing_chooses_k_distinct_experts_even_from_nans),
        cmocka_unit_test(test_each_architecture_reads_its_expert_layers),
        cmocka_unit_test(test_experts_are_placed_as_flatkv_experts_says),
        cmocka_unit_test(test_hostile_expert_files_are_refused_naming_the_key_or_tensor),
        cmocka_unit_test(test_routed_experts_count_and_nextn_blocks_do_not),
        cmocka_unit_test(test_gate_and_up_of_different_types_each_get_their_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
