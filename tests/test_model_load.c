/* Loading a model refuses what the forward pass could not compute, naming the key or tensor at fault;
 * and accepts the llama variants it can (tied output matrix). */
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

static char base_path[4096];

static int make_base(void **state) {
    (void)state;
    snprintf(base_path, sizeof base_path, "%s", tu_tmp_path(".gguf"));
    genmodel_params p = {.dim = 256, .hidden = 512, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 128,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_Q8_0, .seed = 5,
                         .tied = true};
    fkv_error err = {0};
    return genmodel_write(&p, base_path, &err);
}

static int remove_base(void **state) {
    (void)state;
    remove(base_path);
    return 0;
}

/* An edit of the base model: drop a key or tensor, or replace a tensor's type/dims (its data is zeros). */
typedef struct {
    const char *drop_key;
    const char *set_arch;
    const char *drop_tensor;
    const char *edit_tensor;
    ggml_type edit_type;
    uint64_t edit_ne[2];
    const char *add_tensor_copy_of; /* add output.weight as a copy of this tensor */
    const char *set_f32_key; /* replace a key's value */
    float f32;
} edit;

static const char *write_edited(const edit *e) {
    fkv_error err = {0};
    gguf_file *f = gguf_open(base_path, &err);
    assert_non_null(f);
    gguf_writer *w = gguf_writer_new();
    gguf_writer_copy_kv(w, f, "", e->drop_key);
    if (e->set_arch) gguf_writer_set_str(w, "general.architecture", e->set_arch);
    if (e->set_f32_key) gguf_writer_set_f32(w, e->set_f32_key, e->f32);
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ti = &f->tensors[t];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        if (e->drop_tensor && !strcmp(name, e->drop_tensor)) continue;
        if (e->edit_tensor && !strcmp(name, e->edit_tensor)) {
            size_t bytes = ggml_row_size(e->edit_type, e->edit_ne[0]) * e->edit_ne[1];
            void *zeros = calloc(1, bytes);
            assert_int_equal(gguf_writer_add_tensor(w, name, e->edit_type, 2, e->edit_ne, zeros, &err), 0);
            free(zeros);
            continue;
        }
        assert_int_equal(gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, ti->data, &err), 0);
        if (e->add_tensor_copy_of && !strcmp(name, e->add_tensor_copy_of))
            assert_int_equal(gguf_writer_add_tensor(w, "output.weight", ti->type, ti->n_dims, ti->ne, ti->data, &err), 0);
    }
    const char *path = tu_tmp_path(".gguf");
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    gguf_writer_free(w);
    gguf_close(f);
    return path;
}

/* Loading the edited model fails with a message containing every one of the given fragments. */
static void expect_refused(const edit *e, const char *frag1, const char *frag2) {
    const char *path = write_edited(e);
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    remove(path);
    if (m) {
        fkv_model_free(m);
        fail_msg("the edited model loaded; expected an error about '%s'", frag1);
    }
    if (!strstr(err.msg, frag1) || (frag2 && !strstr(err.msg, frag2)))
        fail_msg("error '%s' does not name '%s' / '%s'", err.msg, frag1, frag2 ? frag2 : "");
}

static void test_the_unedited_base_model_loads(void **state) {
    (void)state;
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(base_path, &err);
    if (!m) fail_msg("%s", err.msg);
    assert_int_equal(fkv_model_get_info(m).n_kv_heads, 2);
    fkv_model_free(m);
}

static void test_a_missing_required_key_is_named(void **state) {
    (void)state;
    expect_refused(&(edit){.drop_key = "llama.block_count"}, "llama.block_count", NULL);
    expect_refused(&(edit){.drop_key = "llama.attention.layer_norm_rms_epsilon"}, "layer_norm_rms_epsilon", NULL);
}

static void test_another_architecture_is_refused_by_name(void **state) {
    (void)state;
    expect_refused(&(edit){.set_arch = "mamba"}, "mamba", "architecture");
}

static void test_a_missing_tensor_is_named(void **state) {
    (void)state;
    expect_refused(&(edit){.drop_tensor = "blk.1.ffn_up.weight"}, "blk.1.ffn_up.weight", "missing");
}

static void test_dims_that_do_not_match_the_architecture_are_named(void **state) {
    (void)state;
    expect_refused(&(edit){.edit_tensor = "blk.0.attn_k.weight", .edit_type = GGML_TYPE_Q8_0, .edit_ne = {256, 256}},
                   "blk.0.attn_k.weight", "[256, 128]");
}

static void test_a_type_flatkv_does_not_compute_is_named(void **state) {
    (void)state;
    expect_refused(&(edit){.edit_tensor = "blk.0.ffn_down.weight", .edit_type = GGML_TYPE_IQ2_XXS, .edit_ne = {512, 256}},
                   "blk.0.ffn_down.weight", "iq2_xxs");
}

static void test_a_vocabulary_that_disagrees_with_the_embedding_is_refused(void **state) {
    (void)state;
    expect_refused(&(edit){.edit_tensor = "token_embd.weight", .edit_type = GGML_TYPE_Q8_0, .edit_ne = {256, 500}},
                   "500", "tokenizer");
}

/* Beside what fuzz/fuzz_model.c found (an absurd finite rope angle): an infinite rope base or epsilon passed the
 * "positive" checks. */
static void test_non_finite_rope_and_norm_values_are_refused(void **state) {
    (void)state;
    expect_refused(&(edit){.set_f32_key = "llama.rope.freq_base", .f32 = INFINITY}, "rope base", "finite");
    expect_refused(&(edit){.set_f32_key = "llama.attention.layer_norm_rms_epsilon", .f32 = INFINITY},
                   "rms epsilon", "finite");
}

static void test_an_unreadable_file_is_named(void **state) {
    (void)state;
    fkv_error err = {0};
    assert_null(fkv_model_load("/nonexistent/model.gguf", &err));
    assert_non_null(strstr(err.msg, "/nonexistent/model.gguf"));
}

/* The base model has no output.weight (tied); the same model with output.weight = token_embd must give
 * byte-identical logits. */
static void test_tied_embeddings_equal_an_explicit_copy(void **state) {
    (void)state;
    const char *untied = write_edited(&(edit){.add_tensor_copy_of = "token_embd.weight"});
    const char *paths[2] = {base_path, untied};
    fkv_error err = {0};
    float logits[2][512];
    int32_t ids[] = {1, 403, 407, 261, 378};
    for (int i = 0; i < 2; i++) {
        fkv_model *m = fkv_model_load(paths[i], &err);
        if (!m) fail_msg("%s", err.msg);
        fkv_ctx *ctx = fkv_ctx_new(m, NULL, &err);
        assert_int_equal(fkv_eval(ctx, ids, 5, 0, 1, logits[i], &err), 0);
        fkv_ctx_free(ctx);
        fkv_model_free(m);
    }
    remove(untied);
    assert_memory_equal(logits[0], logits[1], sizeof logits[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_unedited_base_model_loads),
        cmocka_unit_test(test_a_missing_required_key_is_named),
        cmocka_unit_test(test_another_architecture_is_refused_by_name),
        cmocka_unit_test(test_a_missing_tensor_is_named),
        cmocka_unit_test(test_dims_that_do_not_match_the_architecture_are_named),
        cmocka_unit_test(test_a_type_flatkv_does_not_compute_is_named),
        cmocka_unit_test(test_a_vocabulary_that_disagrees_with_the_embedding_is_refused),
        cmocka_unit_test(test_non_finite_rope_and_norm_values_are_refused),
        cmocka_unit_test(test_an_unreadable_file_is_named),
        cmocka_unit_test(test_tied_embeddings_equal_an_explicit_copy),
    };
    return cmocka_run_group_tests(tests, make_base, remove_base);
}
