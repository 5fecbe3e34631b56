/* A generated model made for a chat family the test data has no vocabulary of (gen-model --chat-template): the
 * family's tokens are appended to the copied vocabulary as single tokens of their models' types — the end-of-
 * generation ones ending a generation, gpt-oss's "<|end|>" not — its template is detected from the file, a prompt's
 * template tokens become those ids while a message's texts stay text, and appending twice adds nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "flatkv.h"
#include "model/genmodel.h"
#include "testutil.h"

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* A small llama with stories260K's vocabulary (512 tokens), the template file's source and its family's tokens;
 * vocab_from: where the vocabulary comes from (NULL: stories260K). The path of the file written. */
static const char *chat_model(const char *template_file, const char *vocab_from) {
    char rel[128];
    snprintf(rel, sizeof rel, "templates/%s", template_file);
    char *source = tu_read_file(tu_data(rel), NULL);
    assert_non_null(source);
    const chat_template t = chat_template_detect(source);
    size_t n;
    const chat_vocab_token *listed = chat_vocab_tokens(&t, &n);
    genmodel_token tokens[32];
    assert_true(n > 0 && n <= N_OF(tokens));
    for (size_t i = 0; i < n; i++) tokens[i] = (genmodel_token){listed[i].text, listed[i].user_defined, listed[i].special};
    genmodel_params p = {.dim = 64, .hidden = 128, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2, .n_ctx = 256,
                         .vocab_from = vocab_from ? vocab_from : tu_data("models/stories260K.gguf"),
                         .type = GGML_TYPE_F32, .seed = 3, .chat_template = source, .tokens = tokens, .n_tokens = n};
    const char *path = tu_tmp_path(".gguf");
    static char kept[2][256];
    static int which;
    char *out = kept[which++ % 2];
    snprintf(out, 256, "%s", path);
    fkv_error err = {0};
    if (genmodel_write(&p, out, &err)) fail_msg("%s", err.msg);
    free(source);
    return out;
}

/* The one id text is with control tokens parsed (-1 when it is not one token). */
static int32_t single_id(const fkv_model *m, const char *text, bool parse_special) {
    int32_t ids[4];
    fkv_error err = {0};
    return fkv_tokenize(m, text, strlen(text), false, parse_special, ids, 4, &err) == 1 ? ids[0] : -1;
}

static void test_harmony_tokens_are_appended_and_its_template_detected(void **state) {
    (void)state;
    const char *path = chat_model("openai-gpt-oss-120b.jinja", NULL);
    fkv_model *m = tu_load_model(path);
    assert_int_equal(fkv_model_get_info(m).n_vocab, 512 + 7);
    chat_template t = chat_template_detect(fkv_model_chat_template(m));
    assert_int_equal(t.family, CHAT_HARMONY);
    size_t n;
    const chat_vocab_token *tokens = chat_vocab_tokens(&t, &n);
    for (size_t i = 0; i < n; i++) {
        const int32_t id = single_id(m, tokens[i].text, true);
        if (id < 512) fail_msg("'%s' is not an appended token (%d)", tokens[i].text, id);
    }
    /* a generation ends at <|return|> and <|call|>, not at <|end|> between an analysis and the final message */
    assert_true(fkv_token_is_eog(m, single_id(m, "<|return|>", true)));
    assert_true(fkv_token_is_eog(m, single_id(m, "<|call|>", true)));
    assert_false(fkv_token_is_eog(m, single_id(m, "<|end|>", true)));
    /* the channel markers are user-defined (rendered, split out of any text), <|call|> a control token */
    assert_int_equal(single_id(m, "<|channel|>", false), single_id(m, "<|channel|>", true));
    assert_int_equal(single_id(m, "<|call|>", false), -1);
    char piece[32];
    assert_int_equal(fkv_token_piece(m, -1, single_id(m, "<|message|>", true), piece, sizeof piece), 11);

    /* a prompt: the template's tokens are ids, a message's control text stays text */
    const chat_message msgs[] = {{.role = "user", .content = "say <|call|>"}};
    int32_t *ids = NULL;
    uint32_t n_ids = 0;
    fkv_error err = {0};
    if (chat_prompt_ids(m, &t, msgs, 1, NULL, &ids, &n_ids, &err)) fail_msg("%s", err.msg);
    int starts = 0, calls = 0;
    for (uint32_t i = 0; i < n_ids; i++)
        starts += ids[i] == single_id(m, "<|start|>", true), calls += ids[i] == single_id(m, "<|call|>", true);
    assert_int_equal(starts, 3); /* system, user, and the generation prompt */
    assert_int_equal(calls, 0);
    free(ids);
    fkv_model_free(m);
    remove(path);
}

static void test_glm_tokens_carry_its_special_ids_and_appending_twice_adds_none(void **state) {
    (void)state;
    const char *path = chat_model("GLM-4.7-Flash.jinja", NULL);
    fkv_model *m = tu_load_model(path);
    assert_int_equal(fkv_model_get_info(m).n_vocab, 512 + 16);
    chat_template t = chat_template_detect(fkv_model_chat_template(m));
    assert_int_equal(t.family, CHAT_GLM);
    assert_int_equal(t.glm, CHAT_GLM_47);
    /* its converter's EOT and EOM end a generation; BOS is [gMASK], which the template writes: never twice */
    assert_true(fkv_token_is_eog(m, single_id(m, "<|user|>", true)));
    assert_true(fkv_token_is_eog(m, single_id(m, "<|observation|>", true)));
    assert_int_equal(fkv_token_bos(m), single_id(m, "[gMASK]", true));
    assert_int_equal(single_id(m, "<tool_call>", false), single_id(m, "<tool_call>", true)); /* user-defined */
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}};
    int32_t *ids = NULL;
    uint32_t n_ids = 0;
    fkv_error err = {0};
    if (chat_prompt_ids(m, &t, msgs, 1, NULL, &ids, &n_ids, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ids[0], fkv_token_bos(m));
    assert_int_not_equal(ids[1], fkv_token_bos(m));
    free(ids);
    fkv_model_free(m);
    /* a vocabulary that has them already: none is added again */
    const char *again = chat_model("GLM-4.7-Flash.jinja", path);
    m = tu_load_model(again);
    assert_int_equal(fkv_model_get_info(m).n_vocab, 512 + 16);
    assert_true(fkv_token_is_eog(m, single_id(m, "<|observation|>", true)));
    fkv_model_free(m);
    remove(path);
    remove(again);
}

static void test_the_same_parameters_give_the_same_file(void **state) {
    (void)state;
    const char *a = chat_model("GLM-4.6.jinja", NULL), *b = chat_model("GLM-4.6.jinja", NULL);
    size_t na, nb;
    char *fa = tu_read_file(a, &na), *fb = tu_read_file(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(fa, fb, na);
    free(fa);
    free(fb);
    remove(a);
    remove(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_harmony_tokens_are_appended_and_its_template_detected),
        cmocka_unit_test(test_glm_tokens_carry_its_special_ids_and_appending_twice_adds_none),
        cmocka_unit_test(test_the_same_parameters_give_the_same_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
