/* Chat templates: each family renders what its Jinja source renders (expected strings written from the
 * templates themselves), every family is prefix-stable across turns, and detection from the real template
 * files in ../shared/templates picks the right family. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "testutil.h"

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* Render, asserting success; the caller frees. */
static char *render(const chat_template *t, const chat_message *msgs, size_t n, bool gen) {
    fkv_error err = {{0}};
    char *out = NULL;
    size_t len = 0;
    if (chat_render(t, msgs, n, gen, "<s>", "</s>", &out, &len, &err)) fail_msg("chat_render: %s", err.msg);
    assert_int_equal(len, strlen(out));
    return out;
}

static void expect_render(const chat_template *t, const chat_message *msgs, size_t n, bool gen, const char *want) {
    char *got = render(t, msgs, n, gen);
    assert_string_equal(got, want);
    free(got);
}

static chat_template family(chat_family f) { return (chat_template){f, NULL, false}; }

static chat_template detect_file(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "templates/%s", name);
    char *src = tu_read_file(tu_shared(rel), NULL);
    if (!src) fail_msg("cannot read %s", rel);
    chat_template t = chat_template_detect(src);
    free(src);
    return t;
}

/* --- ChatML, from Qwen-Qwen2.5-7B-Instruct.jinja --- */

static void test_chatml_renders_system_user_assistant_turns_like_qwen(void **state) {
    (void)state;
    chat_template qwen = detect_file("Qwen-Qwen2.5-7B-Instruct.jinja");
    const chat_message msgs[] = {{"system", "You are terse."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
    expect_render(&qwen, msgs, N_OF(msgs), true,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello!<|im_end|>\n"
                  "<|im_start|>user\nBye<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(&qwen, msgs, N_OF(msgs), false,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello!<|im_end|>\n"
                  "<|im_start|>user\nBye<|im_end|>\n");
}

static void test_chatml_inserts_qwens_default_system_only_when_the_template_has_one(void **state) {
    (void)state;
    chat_template qwen = detect_file("Qwen-Qwen2.5-7B-Instruct.jinja");
    const chat_message msgs[] = {{"user", "Hi"}};
    expect_render(&qwen, msgs, 1, true,
                  "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    chat_template plain_chatml = family(CHAT_CHATML);
    expect_render(&plain_chatml, msgs, 1, true, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    /* A system message after the first is an ordinary turn. */
    const chat_message late[] = {{"user", "Hi"}, {"system", "Be brief."}};
    expect_render(&plain_chatml, late, 2, false,
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n");
}

static void test_chatml_wraps_a_run_of_tool_messages_in_one_user_turn(void **state) {
    (void)state;
    chat_template t = family(CHAT_CHATML);
    const chat_message msgs[] = {{"user", "Weather?"}, {"assistant", "Checking."}, {"tool", "sunny"}, {"tool", "warm"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<|im_start|>user\nWeather?<|im_end|>\n"
                  "<|im_start|>assistant\nChecking.<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nwarm\n</tool_response>"
                  "<|im_end|>\n"
                  "<|im_start|>assistant\n");
}

/* --- Llama-2, from meta-llama/Llama-2-7b-chat-hf's chat_template --- */

static void test_llama2_folds_the_system_prompt_into_the_first_instruction(void **state) {
    (void)state;
    chat_template t = family(CHAT_LLAMA2);
    /* The expected string is the one transformers' own chat-template tests give for this template. */
    const chat_message msgs[] = {
        {"system", "You are a friendly chatbot who always responds in the style of a pirate"},
        {"user", "Hello, how are you?"},
        {"assistant", "I'm doing great. How can I help you today?"},
        {"user", "I'd like to show off how chat templating works!"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<s>[INST] <<SYS>>\nYou are a friendly chatbot who always responds in the style of a pirate\n"
                  "<</SYS>>\n\nHello, how are you? [/INST] I'm doing great. How can I help you today? </s>"
                  "<s>[INST] I'd like to show off how chat templating works! [/INST]");
}

static void test_llama2_strips_contents_and_has_no_generation_prompt(void **state) {
    (void)state;
    chat_template t = family(CHAT_LLAMA2);
    const chat_message msgs[] = {{"user", "  hi\n"}, {"assistant", " hello \n"}, {"user", "\tbye "}};
    const char *want = "<s>[INST] hi [/INST] hello </s><s>[INST] bye [/INST]";
    expect_render(&t, msgs, N_OF(msgs), true, want);
    expect_render(&t, msgs, N_OF(msgs), false, want);
    /* The strip applies to the system block and the user text joined: only their outer ends. */
    const chat_message sys[] = {{"system", " S "}, {"user", " u "}};
    expect_render(&t, sys, 2, true, "<s>[INST] <<SYS>>\n S \n<</SYS>>\n\n u [/INST]");
}

static void test_llama2_refuses_roles_that_do_not_alternate(void **state) {
    (void)state;
    chat_template t = family(CHAT_LLAMA2);
    const chat_message two_users[] = {{"user", "a"}, {"user", "b"}};
    const chat_message starts_with_assistant[] = {{"system", "s"}, {"assistant", "a"}};
    fkv_error err = {{0}};
    char *out = NULL;
    assert_int_equal(chat_render(&t, two_users, 2, true, "<s>", "</s>", &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 1"));
    assert_int_equal(chat_render(&t, starts_with_assistant, 2, true, "<s>", "</s>", &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 1 is 'assistant'"));
    assert_null(out);
}

/* --- plain, for base models --- */

static void test_plain_labels_turns_and_ends_with_the_assistant_label(void **state) {
    (void)state;
    chat_template t = family(CHAT_PLAIN);
    const chat_message msgs[] = {{"system", "A story."}, {"user", "a"}, {"assistant", " b"}, {"tool", "t"}, {"user", "c"}};
    expect_render(&t, msgs, N_OF(msgs), true, "A story.\n\nUser: a\nAssistant: b\nTool: t\nUser: c\nAssistant:");
    expect_render(&t, msgs, N_OF(msgs), false, "A story.\n\nUser: a\nAssistant: b\nTool: t\nUser: c\n");
    expect_render(&t, msgs, 0, true, "Assistant:");
}

/* --- prefix stability: rendering(turns 1..k, generation prompt) + reply is a prefix of rendering(1..k+1) --- */

static void expect_prefix_stable(chat_template t, const char *system, const char *const *replies) {
    chat_message msgs[16];
    size_t n = 0;
    if (system) msgs[n++] = (chat_message){"system", system};
    static const char *const users[] = {"Tell me a story.", "Make it shorter.", "Now a poem?", "Thanks!"};
    for (size_t k = 0; k + 1 < N_OF(users); k++) {
        msgs[n++] = (chat_message){"user", users[k]};
        char *asked = render(&t, msgs, n, true);
        msgs[n++] = (chat_message){"assistant", replies[k]};
        msgs[n++] = (chat_message){"user", users[k + 1]};
        char *next = render(&t, msgs, n, true);
        n--; /* the next user message is added again at the top of the loop */
        size_t la = strlen(asked), lr = strlen(replies[k]);
        if (strncmp(next, asked, la) || strncmp(next + la, replies[k], lr))
            fail_msg("turn %zu: '%s' + '%s' is not a prefix of '%s'", k + 1, asked, replies[k], next);
        free(asked);
        free(next);
    }
}

static void test_chatml_is_prefix_stable_for_any_reply(void **state) {
    (void)state;
    const char *const replies[] = {"Once upon a time.", " A cat sat.\n\n", "Roses are red\n"};
    expect_prefix_stable(detect_file("Qwen-Qwen2.5-7B-Instruct.jinja"), NULL, replies);
    expect_prefix_stable(family(CHAT_CHATML), "Be kind.", replies);
}

static void test_llama2_is_prefix_stable_for_replies_a_sentencepiece_model_writes(void **state) {
    (void)state;
    /* The model's first piece carries the space the template puts after " [/INST]". */
    const char *const replies[] = {" Once upon a time.", " A cat sat.", " Roses are red"};
    expect_prefix_stable(family(CHAT_LLAMA2), NULL, replies);
    expect_prefix_stable(family(CHAT_LLAMA2), "Be kind.", replies);
}

static void test_plain_is_prefix_stable_for_any_reply(void **state) {
    (void)state;
    const char *const replies[] = {" Once upon a time.", "A cat sat.\n", "\nRoses are red  "};
    expect_prefix_stable(family(CHAT_PLAIN), NULL, replies);
    expect_prefix_stable(family(CHAT_PLAIN), "Stories for children.", replies);
}

/* --- detection and names --- */

static void test_detection_picks_the_family_of_the_real_templates(void **state) {
    (void)state;
    chat_template t = detect_file("Qwen-Qwen2.5-7B-Instruct.jinja");
    assert_int_equal(t.family, CHAT_CHATML);
    assert_false(t.guessed);
    assert_string_equal(t.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    t = detect_file("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja");
    assert_int_equal(t.family, CHAT_CHATML);
    assert_false(t.guessed);
    assert_null(t.default_system);
    t = detect_file("mistralai-Mistral-Nemo-Instruct-2407.jinja");
    assert_int_equal(t.family, CHAT_LLAMA2);
    assert_false(t.guessed);
    /* Llama-3's header tokens are no family rendered here: the ChatML fallback, flagged. */
    t = detect_file("meta-llama-Llama-3.1-8B-Instruct.jinja");
    assert_int_equal(t.family, CHAT_CHATML);
    assert_true(t.guessed);
}

static void test_detection_of_llama2_plain_and_unknown_sources(void **state) {
    (void)state;
    static const char llama2[] =
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
        "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
        "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
        "{% if loop.index0 == 0 and system_message != false %}"
        "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
        "{% else %}{% set content = message['content'] %}{% endif %}"
        "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
        "{% endfor %}";
    chat_template t = chat_template_detect(llama2);
    assert_int_equal(t.family, CHAT_LLAMA2);
    assert_false(t.guessed);
    t = chat_template_detect(NULL);
    assert_int_equal(t.family, CHAT_PLAIN);
    assert_false(t.guessed);
    t = chat_template_detect("{% for m in messages %}<start_of_turn>{{ m.content }}{% endfor %}");
    assert_int_equal(t.family, CHAT_CHATML);
    assert_true(t.guessed);
    assert_null(t.default_system);
}

static void test_a_template_can_be_chosen_by_name(void **state) {
    (void)state;
    chat_template t;
    fkv_error err = {{0}};
    assert_int_equal(chat_template_by_name("chatml", &t, &err), 0);
    assert_int_equal(t.family, CHAT_CHATML);
    assert_null(t.default_system);
    assert_int_equal(chat_template_by_name("llama2", &t, &err), 0);
    assert_int_equal(t.family, CHAT_LLAMA2);
    assert_int_equal(chat_template_by_name("plain", &t, &err), 0);
    assert_int_equal(t.family, CHAT_PLAIN);
    assert_int_equal(chat_template_by_name("jinja", &t, &err), -1);
    assert_non_null(strstr(err.msg, "'jinja'"));
}

static void test_render_refuses_unknown_roles_and_missing_content(void **state) {
    (void)state;
    chat_template t = family(CHAT_CHATML);
    fkv_error err = {{0}};
    char *out = NULL;
    const chat_message bad_role[] = {{"user", "a"}, {"narrator", "b"}};
    assert_int_equal(chat_render(&t, bad_role, 2, true, NULL, NULL, &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 1 has role 'narrator'"));
    const chat_message no_content[] = {{"user", NULL}};
    assert_int_equal(chat_render(&t, no_content, 1, true, NULL, NULL, &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 0"));
    assert_null(out);
}


/* --- prompt ids: BOS exactly once --- */

static void expect_one_bos(const fkv_model *m, chat_family f, const char *role0) {
    chat_template t = family(f);
    const chat_message msgs[] = {{role0, "Be kind."}, {"user", "Hi"}, {"assistant", " Hello."}, {"user", "<s>Bye"}};
    fkv_error err = {{0}};
    int32_t *ids = NULL;
    uint32_t n = 0;
    if (chat_prompt_ids(m, &t, msgs, N_OF(msgs), &ids, &n, &err)) fail_msg("chat_prompt_ids: %s", err.msg);
    const int32_t bos = fkv_token_bos(m);
    assert_true(n > 2);
    assert_int_equal(ids[0], bos);
    assert_int_not_equal(ids[1], bos);
    /* Control-token texts in the rendering become their ids: LLAMA2's "<s>" between turns, and here the
     * user's literal "<s>" too. */
    int n_bos = 0;
    for (uint32_t i = 0; i < n; i++) n_bos += ids[i] == bos;
    assert_int_equal(n_bos, f == CHAT_LLAMA2 ? 3 : 2);
    free(ids);
}

static void test_prompt_ids_start_with_exactly_one_bos(void **state) {
    (void)state;
    fkv_error err = {{0}};
    fkv_model *m = fkv_model_load(tu_shared("models/stories260K.gguf"), &err);
    if (!m) fail_msg("%s", err.msg);
    expect_one_bos(m, CHAT_LLAMA2, "system"); /* the template writes "<s>": the tokenizer adds none */
    expect_one_bos(m, CHAT_PLAIN, "system");  /* the template writes none: the tokenizer adds it */
    expect_one_bos(m, CHAT_CHATML, "system");
    fkv_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml_renders_system_user_assistant_turns_like_qwen),
        cmocka_unit_test(test_chatml_inserts_qwens_default_system_only_when_the_template_has_one),
        cmocka_unit_test(test_chatml_wraps_a_run_of_tool_messages_in_one_user_turn),
        cmocka_unit_test(test_llama2_folds_the_system_prompt_into_the_first_instruction),
        cmocka_unit_test(test_llama2_strips_contents_and_has_no_generation_prompt),
        cmocka_unit_test(test_llama2_refuses_roles_that_do_not_alternate),
        cmocka_unit_test(test_plain_labels_turns_and_ends_with_the_assistant_label),
        cmocka_unit_test(test_chatml_is_prefix_stable_for_any_reply),
        cmocka_unit_test(test_llama2_is_prefix_stable_for_replies_a_sentencepiece_model_writes),
        cmocka_unit_test(test_plain_is_prefix_stable_for_any_reply),
        cmocka_unit_test(test_detection_picks_the_family_of_the_real_templates),
        cmocka_unit_test(test_detection_of_llama2_plain_and_unknown_sources),
        cmocka_unit_test(test_a_template_can_be_chosen_by_name),
        cmocka_unit_test(test_render_refuses_unknown_roles_and_missing_content),
        cmocka_unit_test(test_prompt_ids_start_with_exactly_one_bos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
