/* Chat templates: each family renders what its Jinja source renders (expected strings written from the
 * templates themselves), every family is prefix-stable across turns, and detection from the real template
 * files in data/templates picks the right family. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "testutil.h"

#define N_OF(a) (sizeof(a) / sizeof *(a))

/* Render, asserting success; the caller frees. */
static char *render(const chat_template *t, const chat_message *msgs, size_t n, bool gen) {
    fkv_error err = {0};
    char *out = NULL;
    size_t len = 0;
    if (chat_render(t, msgs, n, NULL, gen, NULL, NULL, &out, &len, &err)) fail_msg("chat_render: %s", err.msg);
    assert_int_equal(len, strlen(out));
    return out;
}

static void expect_render(const chat_template *t, const chat_message *msgs, size_t n, bool gen, const char *want) {
    char *got = render(t, msgs, n, gen);
    assert_string_equal(got, want);
    free(got);
}

static chat_template family(chat_family f) { return (chat_template){.family = f}; }

static chat_template named(const char *name) {
    chat_template t;
    fkv_error err = {0};
    if (chat_template_by_name(name, &t, &err)) fail_msg("%s", err.msg);
    return t;
}

/* chat_render's error for msgs, asserting that it fails. */
static void expect_refusal(const chat_template *t, const chat_message *msgs, size_t n, const char *needle) {
    fkv_error err = {0};
    char *out = NULL;
    assert_int_equal(chat_render(t, msgs, n, NULL, true, NULL, NULL, &out, NULL, &err), -1);
    assert_null(out);
    if (!strstr(err.msg, needle)) fail_msg("error '%s' does not name '%s'", err.msg, needle);
}

static chat_template detect_file(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "templates/%s", name);
    char *src = tu_read_file(tu_data(rel), NULL);
    if (!src) fail_msg("cannot read %s", rel);
    chat_template t = chat_template_detect(src);
    free(src);
    return t;
}

/* --- ChatML, from Qwen-Qwen2.5-7B-Instruct.jinja --- */

static void test_chatml_renders_system_user_assistant_turns_like_qwen(void **state) {
    (void)state;
    chat_template qwen = detect_file("Qwen-Qwen2.5-7B-Instruct.jinja");
    const chat_message msgs[] = {{.role = "system", .content = "You are terse."}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!"}, {.role = "user", .content = "Bye"}};
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
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}};
    expect_render(&qwen, msgs, 1, true,
                  "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    chat_template plain_chatml = family(CHAT_CHATML);
    expect_render(&plain_chatml, msgs, 1, true, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    /* A system message after the first is an ordinary turn. */
    const chat_message late[] = {{.role = "user", .content = "Hi"}, {.role = "system", .content = "Be brief."}};
    expect_render(&plain_chatml, late, 2, false,
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n");
}

static void test_chatml_wraps_a_run_of_tool_messages_in_one_user_turn(void **state) {
    (void)state;
    chat_template t = family(CHAT_CHATML);
    const chat_message msgs[] = {{.role = "user", .content = "Weather?"}, {.role = "assistant", .content = "Checking."}, {.role = "tool", .content = "sunny"}, {.role = "tool", .content = "warm"}};
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
        {.role = "system", .content = "You are a friendly chatbot who always responds in the style of a pirate"},
        {.role = "user", .content = "Hello, how are you?"},
        {.role = "assistant", .content = "I'm doing great. How can I help you today?"},
        {.role = "user", .content = "I'd like to show off how chat templating works!"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<s>[INST] <<SYS>>\nYou are a friendly chatbot who always responds in the style of a pirate\n"
                  "<</SYS>>\n\nHello, how are you? [/INST] I'm doing great. How can I help you today? </s>"
                  "<s>[INST] I'd like to show off how chat templating works! [/INST]");
}

static void test_llama2_strips_contents_and_has_no_generation_prompt(void **state) {
    (void)state;
    chat_template t = family(CHAT_LLAMA2);
    const chat_message msgs[] = {{.role = "user", .content = "  hi\n"}, {.role = "assistant", .content = " hello \n"}, {.role = "user", .content = "\tbye "}};
    const char *want = "<s>[INST] hi [/INST] hello </s><s>[INST] bye [/INST]";
    expect_render(&t, msgs, N_OF(msgs), true, want);
    expect_render(&t, msgs, N_OF(msgs), false, want);
    /* The strip applies to the system block and the user text joined: only their outer ends. */
    const chat_message sys[] = {{.role = "system", .content = " S "}, {.role = "user", .content = " u "}};
    expect_render(&t, sys, 2, true, "<s>[INST] <<SYS>>\n S \n<</SYS>>\n\n u [/INST]");
}

static void test_llama2_refuses_roles_that_do_not_alternate(void **state) {
    (void)state;
    chat_template t = family(CHAT_LLAMA2);
    const chat_message two_users[] = {{.role = "user", .content = "a"}, {.role = "user", .content = "b"}};
    const chat_message starts_with_assistant[] = {{.role = "system", .content = "s"}, {.role = "assistant", .content = "a"}};
    fkv_error err = {0};
    char *out = NULL;
    assert_int_equal(chat_render(&t, two_users, 2, NULL, true, "<s>", "</s>", &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 1"));
    assert_int_equal(chat_render(&t, starts_with_assistant, 2, NULL, true, "<s>", "</s>", &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 1 is 'assistant'"));
    assert_null(out);
}

/* --- Llama-3, from meta-llama-Llama-3.1-8B-Instruct.jinja (3.2 and 3.3 render the same without tools) --- */

static void test_llama3_writes_the_dated_system_header_and_ipython_tool_turns(void **state) {
    (void)state;
    chat_template t = detect_file("meta-llama-Llama-3.1-8B-Instruct.jinja");
    const chat_message msgs[] = {{.role = "system", .content = " You are terse.\n"}, {.role = "user", .content = "Weather?"}, {.role = "assistant", .content = "Checking. "},
                                 {.role = "tool", .content = " sunny\n"}, {.role = "user", .content = " Thanks \n"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nChecking.<|eot_id|>"
                  "<|start_header_id|>ipython<|end_header_id|>\n\n sunny\n<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nThanks<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* Without a system message the header is still written, with an empty system text; a later system
     * message is an ordinary turn. */
    const chat_message late[] = {{.role = "user", .content = "Hi"}, {.role = "system", .content = "Be brief."}};
    expect_render(&t, late, 2, false,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>");
}

static void test_llama3_0_has_no_system_header_and_no_ipython_role(void **state) {
    (void)state;
    /* Meta-Llama-3-8B-Instruct's template. */
    chat_template t = chat_template_detect(
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
        "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == "
        "0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}");
    assert_int_equal(t.family, CHAT_LLAMA3);
    assert_null(t.date_string);
    const chat_message msgs[] = {{.role = "system", .content = "S "}, {.role = "user", .content = "U"}, {.role = "tool", .content = " T "}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
                  "<|start_header_id|>tool<|end_header_id|>\n\nT<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render(&t, msgs, 0, false, "");
}

/* --- Mistral --- */

static void test_mistral_nemo_puts_the_system_text_in_the_last_user_message(void **state) {
    (void)state;
    chat_template t = detect_file("mistralai-Mistral-Nemo-Instruct-2407.jinja");
    const chat_message msgs[] = {{.role = "system", .content = "Be terse."}, {.role = "user", .content = " Hi"}, {.role = "assistant", .content = " Hello! "}, {.role = "user", .content = "Bye "}};
    expect_render(&t, msgs, N_OF(msgs), true, "<s>[INST] Hi[/INST] Hello! </s>[INST]Be terse.\n\nBye [/INST]");
    /* Ending with a reply, the conversation has no last user message: the system text is written nowhere. */
    expect_render(&t, msgs, 3, false, "<s>[INST] Hi[/INST] Hello! </s>");
}

static void test_mistral_v3_spaces_the_instruction_and_strips_the_reply(void **state) {
    (void)state;
    /* The lines of Mistral-7B-Instruct-v0.3's template that write turns. */
    chat_template t = chat_template_detect(
        "{%- if loop.last and system_message is defined %}{{- \"[INST] \" + system_message + \"\\n\\n\" + "
        "message[\"content\"] + \"[/INST]\" }}{%- else %}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}"
        "{%- elif message[\"role\"] == \"assistant\" %}{{- \" \" + message[\"content\"]|trim + eos_token}}");
    assert_int_equal(t.family, CHAT_MISTRAL);
    assert_int_equal(t.mistral, CHAT_MISTRAL_V3);
    const chat_message msgs[] = {{.role = "system", .content = "Be terse."}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!\n"}, {.role = "user", .content = "Bye"}};
    expect_render(&t, msgs, N_OF(msgs), true, "<s>[INST] Hi[/INST] Hello!</s>[INST] Be terse.\n\nBye[/INST]");
    chat_template by_name = named("mistral");
    expect_render(&by_name, msgs, N_OF(msgs), false, "<s>[INST] Hi[/INST] Hello!</s>[INST] Be terse.\n\nBye[/INST]");
}

static void test_mistral_v1_closes_with_a_space_and_refuses_a_system_message(void **state) {
    (void)state;
    /* Mistral-7B-Instruct-v0.1's template as first released. */
    chat_template t = chat_template_detect(
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] "
        "== 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
        "roles are supported!') }}{% endif %}{% endfor %}");
    assert_int_equal(t.family, CHAT_MISTRAL);
    assert_int_equal(t.mistral, CHAT_MISTRAL_V1);
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!"}, {.role = "user", .content = "Bye"}};
    expect_render(&t, msgs, N_OF(msgs), true, "<s>[INST] Hi [/INST]Hello!</s>[INST] Bye [/INST]");
    const chat_message sys[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "Hi"}};
    expect_refusal(&t, sys, 2, "message 0 is 'system'");
}

static void test_mistral_refuses_tool_results_and_broken_alternation(void **state) {
    (void)state;
    chat_template t = named("mistral");
    const chat_message tool[] = {{.role = "user", .content = "Weather?"}, {.role = "assistant", .content = "Checking."}, {.role = "tool", .content = "sunny"}};
    expect_refusal(&t, tool, N_OF(tool), "message 2 is a tool result");
    const chat_message two_users[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "a"}, {.role = "user", .content = "b"}};
    expect_refusal(&t, two_users, N_OF(two_users), "message 2 is 'user'");
    const chat_message late_system[] = {{.role = "user", .content = "a"}, {.role = "system", .content = "b"}};
    expect_refusal(&t, late_system, N_OF(late_system), "message 1 is 'system'");
}

/* --- Phi-3, from microsoft-Phi-3.5-mini-instruct.jinja --- */

static void test_phi3_tags_each_turn_and_drops_tool_and_empty_system_messages(void **state) {
    (void)state;
    chat_template t = detect_file("microsoft-Phi-3.5-mini-instruct.jinja");
    const chat_message msgs[] = {{.role = "system", .content = "Be terse."}, {.role = "user", .content = "Hi "}, {.role = "assistant", .content = "Hello!"}, {.role = "tool", .content = "t"},
                                 {.role = "user", .content = "Bye"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<|system|>\nBe terse.<|end|>\n<|user|>\nHi <|end|>\n<|assistant|>\nHello!<|end|>\n"
                  "<|user|>\nBye<|end|>\n<|assistant|>\n");
    const chat_message empty_system[] = {{.role = "system", .content = ""}, {.role = "user", .content = "Hi"}};
    expect_render(&t, empty_system, 2, false, "<|user|>\nHi<|end|>\n<|endoftext|>");
}

/* --- Gemma, from google-gemma-2-2b-it.jinja --- */

static void test_gemma_names_the_assistant_model_and_strips_contents(void **state) {
    (void)state;
    chat_template t = detect_file("google-gemma-2-2b-it.jinja");
    const chat_message msgs[] = {{.role = "user", .content = " Hi\n"}, {.role = "assistant", .content = "Hello! "}, {.role = "user", .content = "Bye"}, {.role = "tool", .content = "t"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                  "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>tool\nt<end_of_turn>\n<start_of_turn>model\n");
    expect_render(&t, msgs, 0, false, "<bos>");
}

static void test_gemma2_refuses_a_system_message_and_gemma3_folds_it_into_the_first_turn(void **state) {
    (void)state;
    chat_template gemma2 = detect_file("google-gemma-2-2b-it.jinja");
    assert_false(gemma2.fold_system);
    const chat_message msgs[] = {{.role = "system", .content = "Be terse. "}, {.role = "user", .content = " Hi"}, {.role = "assistant", .content = "Hello!"}};
    expect_refusal(&gemma2, msgs, N_OF(msgs), "System role not supported");
    const chat_message two_users[] = {{.role = "user", .content = "a"}, {.role = "user", .content = "b"}};
    expect_refusal(&gemma2, two_users, 2, "message 1 is 'user'");
    /* Gemma-3's template prefixes the first turn with the system text and a blank line. */
    chat_template gemma3 = chat_template_detect(
        "{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}"
        "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}");
    assert_int_equal(gemma3.family, CHAT_GEMMA);
    assert_true(gemma3.fold_system);
    expect_render(&gemma3, msgs, N_OF(msgs), false,
                  "<bos><start_of_turn>user\nBe terse. \n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n");
}

/* --- Zephyr, from HuggingFaceH4/zephyr-7b-beta's chat_template --- */

static void test_zephyr_ends_each_turn_with_eos_and_a_newline(void **state) {
    (void)state;
    chat_template t = named("zephyr");
    /* The expected string is the one transformers' own chat-template tests give for this template. */
    const chat_message msgs[] = {
        {.role = "system", .content = "You are a friendly chatbot who always responds in the style of a pirate"},
        {.role = "user", .content = "Hello, how are you?"},
        {.role = "assistant", .content = "I'm doing great. How can I help you today?"},
        {.role = "user", .content = "I'd like to show off how chat templating works!"}};
    expect_render(&t, msgs, N_OF(msgs), false,
                  "<|system|>\nYou are a friendly chatbot who always responds in the style of a pirate</s>\n"
                  "<|user|>\nHello, how are you?</s>\n<|assistant|>\nI'm doing great. How can I help you today?</s>\n"
                  "<|user|>\nI'd like to show off how chat templating works!</s>\n");
    const chat_message tool[] = {{.role = "user", .content = "Hi"}, {.role = "tool", .content = "t"}};
    expect_render(&t, tool, 2, true, "<|user|>\nHi</s>\n<|assistant|>\n");
    expect_render(&t, tool, 0, true, "");
}

/* --- DeepSeek-R1-Distill, from deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja --- */

static void test_deepseek_drops_past_reasoning_and_writes_the_last_system_text_first(void **state) {
    (void)state;
    chat_template t = detect_file("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja");
    const chat_message msgs[] = {{.role = "system", .content = "Old."}, {.role = "user", .content = "2+2?"}, {.role = "assistant", .content = "Hmm.</think>a</think>\n\n4"},
                                 {.role = "system", .content = "New."}, {.role = "user", .content = "3+3?"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<｜begin▁of▁sentence｜>New.<｜User｜>2+2?<｜Assistant｜>\n\n4<｜end▁of▁sentence｜><｜User｜>3+3?"
                  "<｜Assistant｜><think>\n");
}

static void test_deepseek_wraps_tool_outputs_and_has_no_generation_prompt_after_them(void **state) {
    (void)state;
    chat_template t = detect_file("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
    const chat_message msgs[] = {{.role = "user", .content = "Weather?"}, {.role = "tool", .content = "sunny"}, {.role = "tool", .content = "warm"}, {.role = "assistant", .content = "Nice</think>."},
                                 {.role = "user", .content = "More?"}, {.role = "tool", .content = "dry"}};
    expect_render(&t, msgs, N_OF(msgs), true,
                  "<｜begin▁of▁sentence｜><｜User｜>Weather?<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>sunny"
                  "<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>warm<｜tool▁output▁end｜><｜tool▁outputs▁end｜>Nice</think>."
                  "<｜end▁of▁sentence｜><｜User｜>More?\n<｜tool▁output▁begin｜>dry<｜tool▁output▁end｜>"
                  "<｜tool▁outputs▁end｜>");
}

/* --- plain, for base models --- */

static void test_plain_labels_turns_and_ends_with_the_assistant_label(void **state) {
    (void)state;
    chat_template t = family(CHAT_PLAIN);
    const chat_message msgs[] = {{.role = "system", .content = "A story."}, {.role = "user", .content = "a"}, {.role = "assistant", .content = " b"}, {.role = "tool", .content = "t"}, {.role = "user", .content = "c"}};
    expect_render(&t, msgs, N_OF(msgs), true, "A story.\n\nUser: a\nAssistant: b\nTool: t\nUser: c\nAssistant:");
    expect_render(&t, msgs, N_OF(msgs), false, "A story.\n\nUser: a\nAssistant: b\nTool: t\nUser: c\n");
    expect_render(&t, msgs, 0, true, "Assistant:");
}

/* --- prefix stability: rendering(turns 1..k, generation prompt) + reply is a prefix of rendering(1..k+1) --- */

static void expect_prefix_stable(chat_template t, const char *system, const char *const *replies) {
    chat_message msgs[16];
    size_t n = 0;
    if (system) msgs[n++] = (chat_message){.role = "system", .content = system};
    static const char *const users[] = {"Tell me a story.", "Make it shorter.", "Now a poem?", "Thanks!"};
    for (size_t k = 0; k + 1 < N_OF(users); k++) {
        msgs[n++] = (chat_message){.role = "user", .content = users[k]};
        char *asked = render(&t, msgs, n, true);
        msgs[n++] = (chat_message){.role = "assistant", .content = replies[k]};
        msgs[n++] = (chat_message){.role = "user", .content = users[k + 1]};
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
    expect_prefix_stable(detect_file("Qwen3-Coder.jinja"), "Be kind.", replies);
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

static void test_llama3_and_gemma_are_prefix_stable_for_replies_without_outer_whitespace(void **state) {
    (void)state;
    const char *const replies[] = {"Once upon a time.", "A cat sat.", "Roses are red"};
    expect_prefix_stable(detect_file("meta-llama-Llama-3.2-3B-Instruct.jinja"), NULL, replies);
    expect_prefix_stable(detect_file("meta-llama-Llama-3.3-70B-Instruct.jinja"), "Be kind.", replies);
    expect_prefix_stable(detect_file("google-gemma-2-2b-it.jinja"), NULL, replies);
}

static void test_mistral_without_a_system_message_is_prefix_stable(void **state) {
    (void)state;
    const char *const verbatim[] = {"Once upon a time.", " A cat sat.\n", "Roses are red "};
    expect_prefix_stable(detect_file("mistralai-Mistral-Nemo-Instruct-2407.jinja"), NULL, verbatim);
    chat_template v1 = {.family = CHAT_MISTRAL, .mistral = CHAT_MISTRAL_V1};
    expect_prefix_stable(v1, NULL, verbatim);
    const char *const spaced[] = {" Once upon a time.", " A cat sat.", " Roses are red"};
    expect_prefix_stable(named("mistral"), NULL, spaced);
}

static void test_phi3_and_zephyr_are_prefix_stable_for_any_reply(void **state) {
    (void)state;
    const char *const replies[] = {" Once upon a time.", "A cat sat.\n", "\nRoses are red  "};
    expect_prefix_stable(detect_file("microsoft-Phi-3.5-mini-instruct.jinja"), "Be kind.", replies);
    expect_prefix_stable(named("zephyr"), "Be kind.", replies);
    expect_prefix_stable(named("zephyr"), NULL, replies);
}

/* --- continuations: what the template writes after a finished reply (chat_render_continuation) --- */

/* The conversation system (optional), "Tell me a story.", a reply (as the assistant content `reply`, written by the
 * model as `generated`), then next[0..n_next): the whole rendering's text after the reply is the continuation, and
 * when `stable`, the whole rendering is the first prompt + generated + the continuation. */
static void expect_continuation(chat_template t, const char *system, const char *reply, const char *generated,
                                const chat_message *next, size_t n_next, bool stable) {
    chat_message msgs[8];
    size_t n = 0;
    if (system) msgs[n++] = (chat_message){.role = "system", .content = system};
    msgs[n++] = (chat_message){.role = "user", .content = "Tell me a story."};
    char *asked = render(&t, msgs, n, true);
    msgs[n++] = (chat_message){.role = "assistant", .content = reply};
    memcpy(msgs + n, next, sizeof *next * n_next);
    char *whole = render(&t, msgs, n + n_next, true);
    fkv_error err = {0};
    char *cont = NULL;
    size_t len = 0;
    if (chat_render_continuation(&t, system, next, n_next, NULL, NULL, &cont, &len, &err))
        fail_msg("chat_render_continuation: %s", err.msg);
    assert_int_equal(len, strlen(cont));
    const char *at = strstr(whole, reply);
    if (!at || strcmp(at + strlen(reply), cont)) fail_msg("'%s' does not end in the reply and '%s'", whole, cont);
    if (stable) {
        char *expected = malloc(strlen(asked) + strlen(generated) + len + 1);
        sprintf(expected, "%s%s%s", asked, generated, cont);
        assert_string_equal(whole, expected);
        free(expected);
    }
    free(asked);
    free(whole);
    free(cont);
}

static void test_a_continuation_is_what_the_whole_rendering_writes_after_the_reply(void **state) {
    (void)state;
    const chat_message user[] = {{.role = "user", .content = "Make it shorter."}};
    const chat_message tool[] = {{.role = "tool", .content = "sunny"}, {.role = "tool", .content = "warm"}};
    const chat_message two[] = {{.role = "user", .content = "And then?"}, {.role = "assistant", .content = "The end."},
                                {.role = "user", .content = "Thanks!"}};
    const char *r = "Once upon a time.";
    const struct {
        chat_template t;
        const char *system, *generated;
        bool stable;
    } cases[] = {
        {detect_file("Qwen-Qwen2.5-7B-Instruct.jinja"), NULL, NULL, true},
        {family(CHAT_CHATML), "Be kind.", NULL, true},
        {named("qwen3"), NULL, NULL, true},
        {family(CHAT_LLAMA2), "Be kind.", " Once upon a time.", true}, /* a SentencePiece model's first space */
        {detect_file("meta-llama-Llama-3.2-3B-Instruct.jinja"), "Be kind.", NULL, true},
        {named("mistral"), NULL, " Once upon a time.", true},
        {detect_file("mistralai-Mistral-Nemo-Instruct-2407.jinja"), "Be terse.", NULL, false}, /* moves the system */
        {detect_file("microsoft-Phi-3.5-mini-instruct.jinja"), "Be kind.", NULL, true},
        {named("phi4-mini"), NULL, NULL, true},
        {detect_file("google-gemma-2-2b-it.jinja"), NULL, NULL, true},
        {named("gemma3"), "Be kind.", NULL, true},
        {named("zephyr"), "Be kind.", NULL, true},
        {named("smollm3"), "Be brief. /no_think", NULL, true},
        {family(CHAT_PLAIN), "Stories for children.", NULL, true},
        {named("gpt-oss"), "Be kind.", "<|channel|>final<|message|>Once upon a time.", true},
        {named("glm4"), "Be kind.", "\n<think></think>\nOnce upon a time.", true},
        {named("glm4.7"), NULL, NULL, false}, /* the prompt's "<think>" is gone from the past reply */
        {named("qwen3.5"), "Be kind.", NULL, false}, /* so is Qwen3.5's "<think>\n" */
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        const char *generated = cases[i].generated ? cases[i].generated : r;
        expect_continuation(cases[i].t, cases[i].system, r, generated, user, N_OF(user), cases[i].stable);
        expect_continuation(cases[i].t, cases[i].system, r, generated, two, N_OF(two), cases[i].stable);
    }
    /* Tool results after the reply, in the families with a tool form. */
    expect_continuation(family(CHAT_CHATML), NULL, r, r, tool, N_OF(tool), true);
    expect_continuation(detect_file("meta-llama-Llama-3.3-70B-Instruct.jinja"), NULL, r, r, tool, N_OF(tool), true);
    expect_continuation(named("glm4"), NULL, r, "\n<think></think>\nOnce upon a time.", tool, N_OF(tool), true);
    /* Qwen3.5 in a tool loop keeps the reply's block: the prompt's "<think>\n", then what the model wrote */
    expect_continuation(named("qwen3.5"), NULL, r, "\n</think>\n\nOnce upon a time.", tool, N_OF(tool), true);
}

static void test_a_continuation_needs_messages_and_refuses_the_reply_stand_in(void **state) {
    (void)state;
    chat_template t = family(CHAT_CHATML);
    fkv_error err = {0};
    char *out = NULL;
    assert_int_equal(chat_render_continuation(&t, NULL, NULL, 0, NULL, NULL, &out, NULL, &err), -1);
    const chat_message sneaky[] = {{.role = "user", .content = "\x1f" "flatkv:past-reply" "\x1f"}};
    assert_int_equal(chat_render_continuation(&t, NULL, sneaky, 1, NULL, NULL, &out, NULL, &err), -1);
    assert_null(out);
    assert_non_null(strstr(err.msg, "stands for the past reply"));
}

/* Where the rendering of turns 1..2 first differs from turn 1's prompt + reply. */
static size_t divergence(const chat_template *t, const chat_message *msgs, size_t n_first, const char *reply,
                         size_t n_all) {
    char *asked = render(t, msgs, n_first, true);
    char *next = render(t, msgs, n_all, true);
    size_t la = strlen(asked), at = 0;
    while (next[at] && at < la + strlen(reply) && next[at] == (at < la ? asked[at] : reply[at - la])) at++;
    assert_true(at < la + strlen(reply)); /* not a prefix */
    free(asked);
    free(next);
    return at;
}

static void test_mistral_rewrites_history_when_there_is_a_system_message(void **state) {
    (void)state;
    /* The system text moves to the newest user message: reuse breaks inside the first instruction. */
    chat_template t = detect_file("mistralai-Mistral-Nemo-Instruct-2407.jinja");
    const chat_message msgs[] = {{.role = "system", .content = "Be terse."}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!"}, {.role = "user", .content = "Bye"}};
    assert_int_equal(divergence(&t, msgs, 2, "Hello!", 4), strlen("<s>[INST]"));
}

static void test_deepseek_rewrites_history_at_past_replies_with_reasoning(void **state) {
    (void)state;
    /* The prompt ends in "<think>\n"; the same reply in history keeps only what follows "</think>". */
    chat_template t = detect_file("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
    const char reply[] = "The user greets me.\n</think>\n\nHello!";
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = reply}, {.role = "user", .content = "Bye"}};
    assert_int_equal(divergence(&t, msgs, 1, reply, 3),
                     strlen("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>"));
    expect_render(&t, msgs, 3, true,
                  "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>\n\nHello!<｜end▁of▁sentence｜><｜User｜>Bye"
                  "<｜Assistant｜><think>\n");
}


/* --- Qwen3 (llama.cpp's models/templates/Qwen-Qwen3-0.6B.jinja), SmolLM3, Phi-4-mini, Gemma 3 --- */

static chat_template with_thinking_off(chat_template t) {
    t.no_thinking = true;
    return t;
}

static void test_qwen3_keeps_reasoning_only_after_the_last_user_message(void **state) {
    (void)state;
    chat_template t = named("qwen3");
    const chat_message msgs[] = {{.role = "system", .content = "Be kind."}, {.role = "user", .content = "Hi"},
                                 {.role = "assistant", .content = "<think>\nGreeting.\n</think>\n\nHello!"},
                                 {.role = "user", .content = "Bye"}};
    expect_render(&t, msgs, 4, true,
                  "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                  "Hello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    /* the last message, after the last query: its reasoning stays, re-written in the template's form */
    expect_render(&t, msgs, 3, false,
                  "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                  "<think>\nGreeting.\n</think>\n\nHello!<|im_end|>\n");
    chat_template off = with_thinking_off(t);
    expect_render(&off, msgs + 1, 1, true,
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    /* no default system text (Qwen2.5's is not Qwen3's) */
    expect_render(&t, msgs + 1, 1, true, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

static void test_qwen3_keeps_reasoning_through_a_tool_loop_until_the_next_user_message(void **state) {
    (void)state;
    chat_template t = named("qwen3");
    const chat_tool_call call = {"get_weather", "{\"city\": \"Paris\"}"};
    const chat_message msgs[] = {
        {.role = "user", .content = "Weather?"},
        {.role = "assistant", .content = "<think>\nNeed the tool.\n</think>\n\n", .tool_calls = &call, .n_tool_calls = 1},
        {.role = "tool", .content = "{\"t\": 20}"},
        {.role = "assistant", .content = "It is 20."},
        {.role = "user", .content = "Thanks"}};
    expect_render(&t, msgs, 3, true,
                  "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\nNeed the tool.\n</think>\n\n"
                  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
                  "<|im_end|>\n<|im_start|>user\n<tool_response>\n{\"t\": 20}\n</tool_response><|im_end|>\n"
                  "<|im_start|>assistant\n");
    /* A tool response is not a query: the rendering during the loop is prefix-stable... */
    char *asked = render(&t, msgs, 3, true), *next = render(&t, msgs, 4, false);
    assert_true(!strncmp(next, asked, strlen(asked)));
    free(asked);
    free(next);
    /* ...and the next user message drops the loop's reasoning (history rewritten from the first reply on). */
    next = render(&t, msgs, 5, true);
    assert_null(strstr(next, "Need the tool."));
    free(next);
}

/* Qwen3 rewrites history by design: turn k+1 keeps turn k's PROMPT as an exact prefix, but not the reply's
 * reasoning (thinking on) nor the empty think block of the generation prompt (thinking off). */
static void test_qwen3_keeps_each_prompt_and_drops_the_replys_reasoning(void **state) {
    (void)state;
    chat_template t = named("qwen3");
    const char *const plain[] = {"Once upon a time.", "A cat sat.\n", "Roses are red"};
    expect_prefix_stable(t, "Be kind.", plain); /* replies without "</think>" are kept verbatim */
    const char reply[] = "<think>\nA story.\n</think>\n\nOnce upon a time.";
    const chat_message msgs[] = {{.role = "user", .content = "Tell me a story."},
                                 {.role = "assistant", .content = reply},
                                 {.role = "user", .content = "Shorter."}};
    char *asked = render(&t, msgs, 1, true);
    assert_int_equal(divergence(&t, msgs, 1, reply, 3), strlen(asked)); /* the whole prompt is reused */
    free(asked);
    chat_template off = with_thinking_off(t);
    const chat_message quick[] = {{.role = "user", .content = "Tell me a story."},
                                  {.role = "assistant", .content = "Once upon a time."},
                                  {.role = "user", .content = "Shorter."}};
    asked = render(&off, quick, 1, true);
    assert_int_equal(divergence(&off, quick, 1, "Once upon a time.", 3),
                     strlen(asked) - strlen("<think>\n\n</think>\n\n"));
    free(asked);
}

static void test_smollm3_writes_its_metadata_header_and_reasoning_mode(void **state) {
    (void)state;
    chat_template t = named("smollm3");
    const chat_message msgs[] = {{.role = "system", .content = "Be kind. /no_think"}, {.role = "user", .content = "Hi"},
                                 {.role = "assistant", .content = "\nHello!"}, {.role = "tool", .content = "42"},
                                 {.role = "user", .content = "Bye"}};
    expect_render(&t, msgs, 5, true,
                  "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 08 July 2025\n"
                  "Reasoning Mode: /no_think\n\n## Custom Instructions\n\nBe kind.\n\n<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\nHello!<|im_end|>\n"
                  "<|im_start|>user\n42<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n");
    /* no system message: the default text of the mode; "/think" in the system text beats enable_thinking */
    chat_template off = with_thinking_off(t);
    expect_render(&off, msgs + 1, 1, true,
                  "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 08 July 2025\n"
                  "Reasoning Mode: /no_think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named "
                  "SmolLM, trained by Hugging Face.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n");
    const chat_message think[] = {{.role = "system", .content = "/think"}, {.role = "user", .content = "Hi"}};
    char *got = render(&off, think, 2, true);
    assert_non_null(strstr(got, "Reasoning Mode: /think\n\n## Custom Instructions\n\nYou are a helpful AI assistant "
                                "named SmolLM, trained by Hugging Face. Your role"));
    assert_true(strlen(got) > strlen("<|im_start|>assistant\n") &&
                !strcmp(got + strlen(got) - strlen("<|im_end|>\n<|im_start|>assistant\n"),
                        "<|im_end|>\n<|im_start|>assistant\n"));
    free(got);
    /* "/system_override": the system text alone */
    const chat_message over[] = {{.role = "system", .content = "You are X. /system_override"}, {.role = "user", .content = "Hi"}};
    expect_render(&t, over, 2, true,
                  "<|im_start|>system\nYou are X.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\n");
    /* Unsloth's edit (llama.cpp's models/templates copy) has no date line and no override */
    chat_template unsloth = chat_template_detect("{{- \"<|im_start|>system\\n\" -}} {{- \"Reasoning Mode: \" + reasoning_mode }}");
    assert_int_equal(unsloth.family, CHAT_SMOLLM3);
    assert_null(unsloth.date_string);
    got = render(&unsloth, msgs + 1, 1, true);
    assert_non_null(strstr(got, "Knowledge Cutoff Date: June 2025\nReasoning Mode: /think\n"));
    free(got);
}

static void test_smollm3_is_prefix_stable_for_replies_without_leading_newlines(void **state) {
    (void)state;
    const char *const replies[] = {"Once upon a time.", "A cat sat.\n", "Roses are red  "};
    expect_prefix_stable(named("smollm3"), "Be kind.", replies);
    expect_prefix_stable(with_thinking_off(named("smollm3")), NULL, replies);
    expect_prefix_stable(named("smollm3"), "Be kind. /no_think", replies);
    /* Switching the mode between turns rewrites the header: reuse breaks at "Reasoning Mode: /". */
    chat_template t = named("smollm3"), off = with_thinking_off(t);
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}};
    char *a = render(&t, msgs, 1, true), *b = render(&off, msgs, 1, true);
    size_t at = 0;
    while (a[at] == b[at]) at++;
    assert_int_equal(at, strlen("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: "
                                "08 July 2025\nReasoning Mode: /"));
    free(a);
    free(b);
}

static void test_phi4_mini_tags_every_message_without_newlines(void **state) {
    (void)state;
    /* Phi-4-mini-instruct's template (its tokenizer_config.json), without tools */
    chat_template t = chat_template_detect(
        "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is "
        "not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + "
        "'<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}");
    assert_int_equal(t.family, CHAT_PHI3);
    assert_int_equal(t.phi, CHAT_PHI_4_MINI);
    assert_int_equal(detect_file("microsoft-Phi-3.5-mini-instruct.jinja").phi, CHAT_PHI_3);
    const chat_message msgs[] = {{.role = "system", .content = ""}, {.role = "user", .content = "Hi"},
                                 {.role = "assistant", .content = "Hello!"}, {.role = "tool", .content = "42"},
                                 {.role = "user", .content = "Bye"}};
    expect_render(&t, msgs, 5, true,
                  "<|system|><|end|><|user|>Hi<|end|><|assistant|>Hello!<|end|><|tool|>42<|end|><|user|>Bye<|end|>"
                  "<|assistant|>");
    expect_render(&t, msgs + 1, 2, false, "<|user|>Hi<|end|><|assistant|>Hello!<|end|><|endoftext|>");
    const char *const replies[] = {" Once upon a time.", "A cat sat.\n", "\nRoses are red  "};
    expect_prefix_stable(t, "Be kind.", replies);
    expect_prefix_stable(named("phi4-mini"), NULL, replies);
}

static void test_gemma3_folds_the_system_text_and_is_prefix_stable(void **state) {
    (void)state;
    chat_template t = named("gemma3");
    const chat_message msgs[] = {{.role = "system", .content = "Be kind."}, {.role = "user", .content = " Hi "},
                                 {.role = "assistant", .content = "Hello!"}, {.role = "user", .content = "Bye"}};
    expect_render(&t, msgs, 4, true,
                  "<bos><start_of_turn>user\nBe kind.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                  "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
    const char *const replies[] = {"Once upon a time.", "A cat sat.", "Roses are red"};
    expect_prefix_stable(t, "Be kind.", replies);
    expect_prefix_stable(t, NULL, replies);
}

static void test_qwen3_and_smollm3_sources_are_detected(void **state) {
    (void)state;
    chat_template q = chat_template_detect(
        "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}<|im_start|>"
        "{%- if '</think>' in message.content %}");
    assert_int_equal(q.family, CHAT_CHATML);
    assert_true(q.qwen3_thinking);
    assert_null(q.default_system);
    assert_false(detect_file("Qwen-Qwen2.5-7B-Instruct.jinja").qwen3_thinking);
    assert_false(detect_file("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").qwen3_thinking);
    chat_template s = chat_template_detect("<|im_start|>system\nReasoning Mode: ... Today Date: ");
    assert_int_equal(s.family, CHAT_SMOLLM3);
    assert_non_null(s.date_string);
}

/* A message's control-token text stays text; the template's own are tokens (stories260K: <s> 1, </s> 2). */
static void test_prompt_ids_keep_control_token_texts_of_messages_as_text(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    fkv_error err = {0};
    chat_template t = family(CHAT_LLAMA2);
    const chat_message msgs[] = {{.role = "user", .content = "a</s>b"}, {.role = "assistant", .content = "ok"},
                                 {.role = "user", .content = "<s>c"}};
    int32_t *ids = NULL;
    uint32_t n = 0;
    if (chat_prompt_ids(m, &t, msgs, 3, NULL, &ids, &n, &err)) fail_msg("%s", err.msg);
    int n_bos = 0, n_eos = 0;
    for (uint32_t i = 0; i < n; i++) n_bos += ids[i] == 1, n_eos += ids[i] == 2;
    assert_int_equal(n_bos, 2); /* before each instruction */
    assert_int_equal(n_eos, 1); /* after the reply */
    free(ids);
    /* contents without control-token texts: the same ids as tokenizing the whole rendering with parsing on */
    const chat_message clean[] = {{.role = "user", .content = "Once upon"}, {.role = "assistant", .content = "a time"},
                                  {.role = "user", .content = "there was"}};
    if (chat_prompt_ids(m, &t, clean, 3, NULL, &ids, &n, &err)) fail_msg("%s", err.msg);
    char *text = NULL;
    size_t len;
    if (chat_render(&t, clean, 3, NULL, true, "<s>", "</s>", &text, &len, &err)) fail_msg("%s", err.msg);
    int32_t want[256];
    int n_want = fkv_tokenize(m, text, len, false, true, want, 256, &err);
    assert_int_equal(n_want, (int)n);
    assert_memory_equal(ids, want, n * sizeof *ids);
    free(text);
    free(ids);
    fkv_model_free(m);
}

/* --- detection and names --- */

static void test_detection_maps_every_real_template_to_its_family(void **state) {
    (void)state;
    static const struct {
        const char *file;
        chat_family family;
        bool guessed;
    } table[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", CHAT_CHATML, false},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", CHAT_CHATML, false},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", CHAT_CHATML, false},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", CHAT_LLAMA3, false},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", CHAT_LLAMA3, false},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", CHAT_LLAMA3, false},
        /* Llama-3 headers with their own function-calling system text: the closest family, Llama-3.0's form. */
        {"fireworks-ai-llama-3-firefunction-v2.jinja", CHAT_LLAMA3, false},
        {"meetkai-functionary-medium-v3.1.jinja", CHAT_LLAMA3, false},
        {"meetkai-functionary-medium-v3.2.jinja", CHAT_LLAMA3, false},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", CHAT_MISTRAL, false},
        {"microsoft-Phi-3.5-mini-instruct.jinja", CHAT_PHI3, false},
        {"google-gemma-2-2b-it.jinja", CHAT_GEMMA, false},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", CHAT_DEEPSEEK, false},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", CHAT_DEEPSEEK, false},
        /* llama.cpp's rewrite of R1's template (user turns end in EOS there): the closest family. */
        {"llama-cpp-deepseek-r1.jinja", CHAT_DEEPSEEK, false},
        /* Command-R's turn tokens are no family here: the ChatML fallback, flagged. */
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", CHAT_CHATML, true},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", CHAT_CHATML, true},
    };
    for (size_t i = 0; i < N_OF(table); i++) {
        chat_template t = detect_file(table[i].file);
        if (t.family != table[i].family || t.guessed != table[i].guessed)
            fail_msg("%s: family %d guessed %d, want %d %d", table[i].file, t.family, t.guessed, table[i].family,
                     table[i].guessed);
        bool qwen = i == 0;
        if (qwen != (t.default_system != NULL)) fail_msg("%s: default system text", table[i].file);
    }
    assert_string_equal(detect_file("Qwen-Qwen2.5-7B-Instruct.jinja").default_system,
                        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    assert_string_equal(detect_file("meta-llama-Llama-3.2-3B-Instruct.jinja").date_string, "26 Jul 2024");
    assert_null(detect_file("meetkai-functionary-medium-v3.1.jinja").date_string);
    assert_int_equal(detect_file("mistralai-Mistral-Nemo-Instruct-2407.jinja").mistral, CHAT_MISTRAL_TEKKEN);
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
    t = chat_template_detect("{% for m in messages %}<|START_OF_TURN_TOKEN|>{{ m.content }}{% endfor %}");
    assert_int_equal(t.family, CHAT_CHATML);
    assert_true(t.guessed);
    assert_null(t.default_system);
}

static void test_a_template_can_be_chosen_by_name(void **state) {
    (void)state;
    static const struct {
        const char *name;
        chat_family family;
    } names[] = {{"chatml", CHAT_CHATML}, {"llama2", CHAT_LLAMA2}, {"plain", CHAT_PLAIN},
                 {"llama3", CHAT_LLAMA3}, {"mistral", CHAT_MISTRAL}, {"phi3", CHAT_PHI3},
                 {"gemma", CHAT_GEMMA}, {"zephyr", CHAT_ZEPHYR}, {"deepseek", CHAT_DEEPSEEK}};
    chat_template t;
    fkv_error err = {0};
    for (size_t i = 0; i < N_OF(names); i++) {
        assert_int_equal(chat_template_by_name(names[i].name, &t, &err), 0);
        assert_int_equal(t.family, names[i].family);
        assert_null(t.default_system);
        assert_false(t.guessed);
    }
    assert_int_equal(named("llama3").date_string != NULL, true); /* the 3.1+ form */
    assert_int_equal(named("mistral").mistral, CHAT_MISTRAL_V3);
    assert_false(named("gemma").fold_system);
    assert_int_equal(chat_template_by_name("jinja", &t, &err), -1);
    assert_non_null(strstr(err.msg, "'jinja'"));
}

static void test_explicit_bos_and_eos_texts_replace_the_familys_own(void **state) {
    (void)state;
    chat_template t = named("mistral");
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!"}};
    fkv_error err = {0};
    char *out = NULL;
    assert_int_equal(chat_render(&t, msgs, 2, NULL, true, "[BOS]", "[EOS]", &out, NULL, &err), 0);
    assert_string_equal(out, "[BOS][INST] Hi[/INST] Hello![EOS]");
    free(out);
}

static void test_render_refuses_unknown_roles_and_missing_content(void **state) {
    (void)state;
    chat_template t = family(CHAT_CHATML);
    fkv_error err = {0};
    char *out = NULL;
    const chat_message bad_role[] = {{.role = "user", .content = "a"}, {.role = "narrator", .content = "b"}};
    assert_int_equal(chat_render(&t, bad_role, 2, NULL, true, NULL, NULL, &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 1 has role 'narrator'"));
    const chat_message no_content[] = {{.role = "user", .content = NULL}};
    assert_int_equal(chat_render(&t, no_content, 1, NULL, true, NULL, NULL, &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "message 0"));
    assert_null(out);
}


/* --- prompt ids: BOS exactly once --- */

static void expect_one_bos(const fkv_model *m, chat_template t, bool with_system, int n_bos_want) {
    const chat_message msgs[] = {{.role = "system", .content = "Be kind."}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = " Hello."}, {.role = "user", .content = "<s>Bye"}};
    fkv_error err = {0};
    int32_t *ids = NULL;
    uint32_t n = 0;
    if (chat_prompt_ids(m, &t, msgs + !with_system, N_OF(msgs) - !with_system, NULL, &ids, &n, &err))
        fail_msg("chat_prompt_ids: %s", err.msg);
    const int32_t bos = fkv_token_bos(m);
    assert_true(n > 2);
    assert_int_equal(ids[0], bos);
    assert_int_not_equal(ids[1], bos);
    /* The template's control-token texts become their ids (LLAMA2's "<s>" before each instruction); the user's
     * literal "<s>" stays text: a message cannot inject a control token. */
    int n_bos = 0;
    for (uint32_t i = 0; i < n; i++) n_bos += ids[i] == bos;
    if (n_bos != n_bos_want) fail_msg("family %d: %d BOS ids, want %d", t.family, n_bos, n_bos_want);
    free(ids);
}

static void test_prompt_ids_start_with_exactly_one_bos(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    expect_one_bos(m, family(CHAT_LLAMA2), true, 2); /* the template writes "<s>" twice: the tokenizer adds none */
    expect_one_bos(m, named("mistral"), true, 1);     /* "<s>" written once */
    expect_one_bos(m, family(CHAT_PLAIN), true, 1);  /* the template writes none: the tokenizer adds it */
    expect_one_bos(m, family(CHAT_CHATML), true, 1);
    expect_one_bos(m, named("qwen3"), true, 1);
    expect_one_bos(m, named("phi3"), true, 1);
    expect_one_bos(m, named("phi4-mini"), true, 1);
    expect_one_bos(m, named("zephyr"), true, 1);
    expect_one_bos(m, named("smollm3"), true, 1);
    /* Their BOS texts are not this vocabulary's: written as "", and the tokenizer adds the BOS. */
    expect_one_bos(m, named("llama3"), true, 1);
    expect_one_bos(m, named("gemma"), false, 1);
    expect_one_bos(m, named("gemma3"), true, 1);
    expect_one_bos(m, named("deepseek"), true, 1);
    fkv_model_free(m);
}

static void test_prompt_ids_write_eos_texts_only_where_the_vocabulary_has_them(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    fkv_error err = {0};
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello."}, {.role = "user", .content = "Bye"}};
    /* Mistral's "</s>" is this vocabulary's EOS: one EOS id after the reply. */
    chat_template t = named("mistral");
    int32_t *ids = NULL;
    uint32_t n = 0;
    if (chat_prompt_ids(m, &t, msgs, N_OF(msgs), NULL, &ids, &n, &err)) fail_msg("%s", err.msg);
    int n_eog = 0;
    for (uint32_t i = 0; i < n; i++) n_eog += fkv_token_is_eog(m, ids[i]);
    assert_int_equal(n_eog, 1);
    free(ids);
    fkv_model_free(m);
}

/* Tools: the request's `tools` as Qwen2.5's and Llama-3.1's templates render them, and an assistant's tool
 * call and the tool's answer. Expected strings follow the templates' source (tools as json.dumps writes
 * them: ", "/": " separators, indent 4 for Llama-3.1). */
#define WEATHER_TOOL                                                                                          \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather\", " \
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "  \
    "[\"city\"]}}}"

static char *render_tools(const chat_template *t, const chat_message *msgs, size_t n) {
    json_t *tools = json_pack("[o]", json_loads(WEATHER_TOOL, 0, NULL));
    fkv_error err = {0};
    char *out = NULL;
    if (chat_render(t, msgs, n, tools, true, NULL, NULL, &out, NULL, &err)) fail_msg("%s", err.msg);
    json_decref(tools);
    return out;
}

static const chat_tool_call PARIS = {"get_weather", "{\"city\":\"Paris\"}"};

static void test_qwen_renders_tools_calls_and_results_as_its_template(void **state) {
    (void)state;
    chat_template t = chat_template_detect("<|im_start|>You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    const chat_message msgs[] = {{.role = "user", .content = "Weather in Paris?"},
                                 {.role = "assistant", .content = "", .tool_calls = &PARIS, .n_tool_calls = 1},
                                 {.role = "tool", .content = "sunny"}};
    char *got = render_tools(&t, msgs, N_OF(msgs));
    assert_string_equal(got,
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\nYou are provided with function "
        "signatures within <tools></tools> XML tags:\n<tools>\n" WEATHER_TOOL "\n</tools>\n\nFor each function "
        "call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
        "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n");
    free(got);
}

static void test_llama31_renders_tools_in_the_first_user_message(void **state) {
    (void)state;
    chat_template t;
    fkv_error err = {0};
    assert_int_equal(chat_template_by_name("llama3", &t, &err), 0);
    const chat_message msgs[] = {{.role = "user", .content = "Weather in Paris?"},
                                 {.role = "assistant", .content = "", .tool_calls = &PARIS, .n_tool_calls = 1},
                                 {.role = "tool", .content = "sunny"}};
    char *got = render_tools(&t, msgs, N_OF(msgs));
    assert_string_equal(got,
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge "
        "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
        "Given the following functions, please respond with a JSON for a function call with its proper arguments "
        "that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
        "dictionary of argument name and its value}.Do not use variables.\n\n"
        "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        "
        "\"description\": \"Get the weather\",\n        \"parameters\": {\n            \"type\": \"object\",\n   "
        "         \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n     "
        "           }\n            },\n            \"required\": [\n                \"city\"\n            ]\n      "
        "  }\n    }\n}\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
        "<|start_header_id|>ipython<|end_header_id|>\n\nsunny<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    free(got);
}

static void test_tools_with_a_family_without_a_tool_form_are_refused(void **state) {
    (void)state;
    chat_template t = family(CHAT_GEMMA);
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}};
    json_t *tools = json_pack("[o]", json_loads(WEATHER_TOOL, 0, NULL));
    fkv_error err = {0};
    char *out = NULL;
    assert_int_equal(chat_render(&t, msgs, 1, tools, true, NULL, NULL, &out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "gemma"));
    json_decref(tools);
}

/* --- the templates' own renderings: tests/golden/chat_templates.json, which tests/chat/jinja_golden.py writes with
 * Jinja from the template files and checks (ctest: chat_jinja_golden) --- */

/* A golden case's messages as chat_messages (pointing into the case's JSON; calls in *calls). */
static size_t golden_messages(const json_t *list, chat_message *msgs, chat_tool_call *calls, size_t cap_calls) {
    size_t n_calls = 0, i;
    const json_t *m;
    json_array_foreach(list, i, m) {
        const json_t *tc = json_object_get(m, "tool_calls"), *c;
        msgs[i] = (chat_message){.role = json_string_value(json_object_get(m, "role")),
                                 .content = json_string_value(json_object_get(m, "content")),
                                 .reasoning = json_string_value(json_object_get(m, "reasoning_content")),
                                 .tool_calls = calls + n_calls, .n_tool_calls = json_array_size(tc)};
        size_t k;
        json_array_foreach(tc, k, c) {
            assert_true(n_calls < cap_calls);
            const json_t *fn = json_object_get(c, "function");
            calls[n_calls++] = (chat_tool_call){json_string_value(json_object_get(fn, "name")),
                                                json_string_value(json_object_get(fn, "arguments"))};
        }
    }
    return json_array_size(list);
}

static void test_renderings_equal_what_jinja_renders_from_the_templates(void **state) {
    (void)state;
    json_error_t jerr;
    json_t *cases = json_load_file(FKV_SOURCE_DIR "/tests/golden/chat_templates.json", 0, &jerr);
    if (!cases) fail_msg("tests/golden/chat_templates.json: %s", jerr.text);
    size_t i;
    const json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        chat_template t = detect_file(json_string_value(json_object_get(c, "template")));
        const json_t *kwargs = json_object_get(c, "kwargs"), *tools = json_object_get(c, "tools");
        t.no_thinking = json_is_false(json_object_get(kwargs, "enable_thinking"));
        t.reasoning_effort = json_string_value(json_object_get(kwargs, "reasoning_effort"));
        chat_message msgs[16];
        chat_tool_call calls[16];
        assert_true(json_array_size(json_object_get(c, "messages")) <= N_OF(msgs));
        const size_t n = golden_messages(json_object_get(c, "messages"), msgs, calls, N_OF(calls));
        fkv_error err = {0};
        char *out = NULL;
        if (chat_render(&t, msgs, n, json_is_array(tools) ? tools : NULL,
                        json_is_true(json_object_get(c, "add_generation_prompt")), NULL, NULL, &out, NULL, &err))
            fail_msg("%s: %s", name, err.msg);
        const char *want = json_string_value(json_object_get(c, "expected"));
        if (strcmp(out, want)) fail_msg("%s:\n got  '%s'\n want '%s'", name, out, want);
        free(out);
    }
    assert_true(i >= 30);
    json_decref(cases);
}

/* --- gpt-oss (harmony) and GLM --- */

/* expect_prefix_stable where the model writes each reply as generated_fmt makes it (a %s for the reply): the turn's
 * prompt + that is a prefix of the next turn's rendering. */
static void expect_prefix_stable_written(chat_template t, const char *system, const char *const *replies,
                                         const char *generated_fmt) {
    chat_message msgs[16];
    size_t n = 0;
    if (system) msgs[n++] = (chat_message){.role = "system", .content = system};
    static const char *const users[] = {"Tell me a story.", "Make it shorter.", "Now a poem?", "Thanks!"};
    for (size_t k = 0; k + 1 < N_OF(users); k++) {
        msgs[n++] = (chat_message){.role = "user", .content = users[k]};
        char *asked = render(&t, msgs, n, true), generated[256];
        snprintf(generated, sizeof generated, generated_fmt, replies[k]);
        msgs[n++] = (chat_message){.role = "assistant", .content = replies[k]};
        msgs[n++] = (chat_message){.role = "user", .content = users[k + 1]};
        char *next = render(&t, msgs, n, true);
        n--;
        const size_t la = strlen(asked);
        if (strncmp(next, asked, la) || strncmp(next + la, generated, strlen(generated)))
            fail_msg("turn %zu: '%s' + '%s' is not a prefix of '%s'", k + 1, asked, generated, next);
        free(asked);
        free(next);
    }
}

static void test_harmony_and_glm_are_prefix_stable_for_replies_without_reasoning(void **state) {
    (void)state;
    const char *const replies[] = {"Once upon a time.", "A cat sat.", "Roses are red"};
    /* gpt-oss writes its channel header; its <|return|> ends the generation and is never fed. */
    expect_prefix_stable_written(detect_file("openai-gpt-oss-120b.jinja"), NULL, replies, "<|channel|>final<|message|>%s");
    expect_prefix_stable_written(named("gpt-oss"), "Be kind.", replies, "<|channel|>final<|message|>%s");
    /* GLM-4.6 opens an empty think block itself; 4.7 without thinking has it closed by the prompt. */
    chat_template glm46 = detect_file("GLM-4.6.jinja"), glm47 = detect_file("GLM-4.7-Flash.jinja");
    expect_prefix_stable_written(glm46, "Be kind.", replies, "\n<think></think>\n%s");
    glm46.no_thinking = glm47.no_thinking = true;
    expect_prefix_stable_written(glm46, NULL, replies, "\n%s");
    expect_prefix_stable_written(glm47, "Be kind.", replies, "%s");
}

/* A tool loop — the prompt, the model's reasoning and call, the call's result — renders the model's words back as it
 * wrote them when the client returns the reasoning (reasoning_content) and the call: every turn reuses the last. */
static void expect_tool_loop_stable(chat_template t, const char *generated) {
    static const chat_tool_call call = {"get_weather", "{\"city\": \"Paris\"}"};
    const chat_message msgs[] = {{.role = "user", .content = "Weather in Paris?"},
                                 {.role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1,
                                  .reasoning = "I should call the tool."},
                                 {.role = "tool", .content = "sunny"}};
    json_t *tools = json_pack("[o]", json_loads(WEATHER_TOOL, 0, NULL));
    fkv_error err = {0};
    char *asked = NULL, *next = NULL;
    if (chat_render(&t, msgs, 1, tools, true, NULL, NULL, &asked, NULL, &err) ||
        chat_render(&t, msgs, 3, tools, true, NULL, NULL, &next, NULL, &err))
        fail_msg("%s", err.msg);
    if (strncmp(next, asked, strlen(asked)) || strncmp(next + strlen(asked), generated, strlen(generated)))
        fail_msg("'%s' + '%s' is not a prefix of '%s'", asked, generated, next);
    free(asked);
    free(next);
    json_decref(tools);
}

static void test_a_tool_loop_is_prefix_stable_in_harmony_glm_and_the_xml_calls(void **state) {
    (void)state;
    expect_tool_loop_stable(named("gpt-oss"), "<|channel|>analysis<|message|>I should call the tool.<|end|>"
                                              "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                                              "<|message|>{\"city\": \"Paris\"}");
    expect_tool_loop_stable(named("glm4"), "\n<think>I should call the tool.</think>\n<tool_call>get_weather\n"
                                           "<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>");
    expect_tool_loop_stable(named("glm4.7"), "I should call the tool.</think><tool_call>get_weather<arg_key>city"
                                             "</arg_key><arg_value>Paris</arg_value></tool_call>");
    /* Qwen3-Coder has no reasoning: the call as the template writes it, after the prompt's "assistant\n" */
    expect_tool_loop_stable(named("qwen3-coder"), "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                                                  "</parameter>\n</function>\n</tool_call>");
    /* Qwen3.5: the reasoning after the prompt's "<think>\n", then the call */
    expect_tool_loop_stable(named("qwen3.5"), "I should call the tool.\n</think>\n\n<tool_call>\n<function=get_weather>"
                                              "\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>");
}

static void test_harmony_rewrites_history_at_past_reasoning(void **state) {
    (void)state;
    /* A past final answer loses its analysis: reuse breaks right after the reply's "<|start|>assistant". */
    chat_template t = named("gpt-oss");
    const chat_message msgs[] = {{.role = "user", .content = "Hi"},
                                 {.role = "assistant", .content = "Hello!", .reasoning = "Greet back."},
                                 {.role = "user", .content = "Bye"}};
    char *asked = render(&t, msgs, 1, true);
    const size_t at = divergence(&t, msgs, 1, "<|channel|>analysis<|message|>Greet back.<|end|>", 3);
    assert_int_equal(at, strlen(asked) + strlen("<|channel|>"));
    free(asked);
}

static void test_glm_and_qwen35_rewrite_history_at_past_reasoning(void **state) {
    (void)state;
    const chat_message msgs[] = {{.role = "user", .content = "Hi"},
                                 {.role = "assistant", .content = "Hello!", .reasoning = "Greet back."},
                                 {.role = "user", .content = "Bye"}};
    /* 4.6 keeps the reply's "\n<think>" and breaks inside the block; 4.7 drops the prompt's "<think>" too. */
    chat_template t = named("glm4");
    char *asked = render(&t, msgs, 1, true);
    assert_int_equal(divergence(&t, msgs, 1, "\n<think>Greet back.</think>\nHello!", 3),
                     strlen(asked) + strlen("\n<think>"));
    free(asked);
    t = named("glm4.7");
    asked = render(&t, msgs, 1, true);
    /* byte by byte the tags "<think>" and "</think>" share their "<"; token by token they part at once */
    assert_int_equal(divergence(&t, msgs, 1, "Greet back.</think>Hello!", 3), strlen(asked) - strlen("think>"));
    free(asked);
    /* Qwen3.5's reply loses its block too: reuse breaks at the prompt's own "<think>\n". */
    t = named("qwen3.5");
    asked = render(&t, msgs, 1, true);
    assert_int_equal(divergence(&t, msgs, 1, "Greet back.\n</think>\n\nHello!", 3), strlen(asked) - strlen("<think>\n"));
    free(asked);
}

static void test_harmony_and_glm_refuse_what_their_templates_raise_on(void **state) {
    (void)state;
    chat_template t = named("gpt-oss");
    const chat_message orphan[] = {{.role = "user", .content = "Hi"}, {.role = "tool", .content = "sunny"}};
    expect_refusal(&t, orphan, N_OF(orphan), "tool call before it");
    const chat_message tagged[] = {{.role = "user", .content = "Hi"},
                                   {.role = "assistant", .content = "<|channel|>final<|message|>Hello"}};
    expect_refusal(&t, tagged, N_OF(tagged), "<|channel|> tags");
    static const chat_tool_call bad = {"get_weather", "[1, 2]"};
    const chat_message list_args[] = {{.role = "user", .content = "Hi"},
                                      {.role = "assistant", .content = "", .tool_calls = &bad, .n_tool_calls = 1}};
    t = named("glm4");
    expect_refusal(&t, list_args, N_OF(list_args), "JSON object");
    t = named("qwen3.5"); /* no user query; a system message after the first */
    const chat_message wrapped[] = {{.role = "user", .content = " <tool_response>x</tool_response>\n"}};
    expect_refusal(&t, wrapped, N_OF(wrapped), "no user query");
    const chat_message late_system[] = {{.role = "user", .content = "Hi"}, {.role = "system", .content = "Be brief."}};
    expect_refusal(&t, late_system, N_OF(late_system), "at the beginning");
    expect_refusal(&t, list_args, N_OF(list_args), "JSON object");
}

static void test_harmony_glm_and_qwen3_sources_are_detected_with_their_variants(void **state) {
    (void)state;
    chat_template t = detect_file("openai-gpt-oss-120b.jinja");
    assert_int_equal(t.family, CHAT_HARMONY);
    assert_false(t.guessed);
    assert_string_equal(t.date_string, "2025-08-05");
    t = detect_file("GLM-4.6.jinja");
    assert_int_equal(t.family, CHAT_GLM);
    assert_int_equal(t.glm, CHAT_GLM_46);
    t = detect_file("GLM-4.7-Flash.jinja");
    assert_int_equal(t.family, CHAT_GLM);
    assert_int_equal(t.glm, CHAT_GLM_47);
    /* The MoE models' Qwen3 template is Qwen3's; Qwen3-Coder's has no thinking and writes tools as XML. */
    t = detect_file("Qwen-Qwen3-0.6B.jinja");
    assert_int_equal(t.family, CHAT_CHATML);
    assert_true(t.qwen3_thinking);
    t = detect_file("Qwen3-Coder.jinja");
    assert_int_equal(t.family, CHAT_CHATML);
    assert_false(t.qwen3_thinking);
    assert_true(t.qwen3_coder);
    assert_false(t.guessed);
    assert_false(detect_file("Qwen-Qwen2.5-7B-Instruct.jinja").qwen3_coder);
    assert_false(detect_file("Qwen-Qwen3-0.6B.jinja").qwen3_coder);
    t = detect_file("Qwen3.5-4B.jinja"); /* Qwen3's thinking and Qwen3-Coder's calls */
    assert_true(t.family == CHAT_CHATML && t.qwen3_thinking && t.qwen3_coder && !t.guessed);
    assert_int_equal(named("glm4.7").glm, CHAT_GLM_47);
}

/* Every listed token is one of the texts the family's rendering writes, and the families without a vocabulary of
 * their own in the test data list none. */
static void test_the_vocabulary_tokens_of_a_family_are_what_its_template_writes(void **state) {
    (void)state;
    const char *names[] = {"gpt-oss", "glm4.7", "glm4"};
    static const chat_tool_call call = {"f", "{\"x\": 1}"};
    const chat_message msgs[] = {{.role = "system", .content = "S"}, {.role = "user", .content = "U"},
                                 {.role = "assistant", .content = "", .reasoning = "R", .tool_calls = &call,
                                  .n_tool_calls = 1},
                                 {.role = "tool", .content = "T"}, {.role = "assistant", .content = "A"}};
    json_t *tools = json_pack("[o]", json_loads(WEATHER_TOOL, 0, NULL));
    for (size_t i = 0; i < N_OF(names); i++) {
        chat_template t = named(names[i]);
        size_t n;
        const chat_vocab_token *tokens = chat_vocab_tokens(&t, &n);
        assert_true(n > 0);
        fkv_error err = {0};
        char *a = NULL, *b = NULL;
        if (chat_render(&t, msgs, N_OF(msgs), tools, false, NULL, NULL, &a, NULL, &err) ||
            chat_render(&t, msgs, 4, tools, true, NULL, NULL, &b, NULL, &err))
            fail_msg("%s", err.msg);
        for (size_t k = 0; k < n; k++)
            if (!strstr(a, tokens[k].text) && !strstr(b, tokens[k].text) && strcmp(tokens[k].text, "<|constrain|>"))
                fail_msg("%s: '%s' is written nowhere", names[i], tokens[k].text);
        free(a);
        free(b);
    }
    json_decref(tools);
    size_t n = 1;
    chat_template qwen = named("qwen3");
    assert_null(chat_vocab_tokens(&qwen, &n));
    assert_int_equal(n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen_renders_tools_calls_and_results_as_its_template),
        cmocka_unit_test(test_llama31_renders_tools_in_the_first_user_message),
        cmocka_unit_test(test_tools_with_a_family_without_a_tool_form_are_refused),
        cmocka_unit_test(test_chatml_renders_system_user_assistant_turns_like_qwen),
        cmocka_unit_test(test_chatml_inserts_qwens_default_system_only_when_the_template_has_one),
        cmocka_unit_test(test_chatml_wraps_a_run_of_tool_messages_in_one_user_turn),
        cmocka_unit_test(test_llama2_folds_the_system_prompt_into_the_first_instruction),
        cmocka_unit_test(test_llama2_strips_contents_and_has_no_generation_prompt),
        cmocka_unit_test(test_llama2_refuses_roles_that_do_not_alternate),
        cmocka_unit_test(test_llama3_writes_the_dated_system_header_and_ipython_tool_turns),
        cmocka_unit_test(test_llama3_0_has_no_system_header_and_no_ipython_role),
        cmocka_unit_test(test_mistral_nemo_puts_the_system_text_in_the_last_user_message),
        cmocka_unit_test(test_mistral_v3_spaces_the_instruction_and_strips_the_reply),
        cmocka_unit_test(test_mistral_v1_closes_with_a_space_and_refuses_a_system_message),
        cmocka_unit_test(test_mistral_refuses_tool_results_and_broken_alternation),
        cmocka_unit_test(test_phi3_tags_each_turn_and_drops_tool_and_empty_system_messages),
        cmocka_unit_test(test_gemma_names_the_assistant_model_and_strips_contents),
        cmocka_unit_test(test_gemma2_refuses_a_system_message_and_gemma3_folds_it_into_the_first_turn),
        cmocka_unit_test(test_zephyr_ends_each_turn_with_eos_and_a_newline),
        cmocka_unit_test(test_deepseek_drops_past_reasoning_and_writes_the_last_system_text_first),
        cmocka_unit_test(test_deepseek_wraps_tool_outputs_and_has_no_generation_prompt_after_them),
        cmocka_unit_test(test_plain_labels_turns_and_ends_with_the_assistant_label),
        cmocka_unit_test(test_chatml_is_prefix_stable_for_any_reply),
        cmocka_unit_test(test_llama2_is_prefix_stable_for_replies_a_sentencepiece_model_writes),
        cmocka_unit_test(test_plain_is_prefix_stable_for_any_reply),
        cmocka_unit_test(test_llama3_and_gemma_are_prefix_stable_for_replies_without_outer_whitespace),
        cmocka_unit_test(test_mistral_without_a_system_message_is_prefix_stable),
        cmocka_unit_test(test_phi3_and_zephyr_are_prefix_stable_for_any_reply),
        cmocka_unit_test(test_mistral_rewrites_history_when_there_is_a_system_message),
        cmocka_unit_test(test_a_continuation_is_what_the_whole_rendering_writes_after_the_reply),
        cmocka_unit_test(test_a_continuation_needs_messages_and_refuses_the_reply_stand_in),
        cmocka_unit_test(test_deepseek_rewrites_history_at_past_replies_with_reasoning),
        cmocka_unit_test(test_qwen3_keeps_reasoning_only_after_the_last_user_message),
        cmocka_unit_test(test_qwen3_keeps_reasoning_through_a_tool_loop_until_the_next_user_message),
        cmocka_unit_test(test_qwen3_keeps_each_prompt_and_drops_the_replys_reasoning),
        cmocka_unit_test(test_smollm3_writes_its_metadata_header_and_reasoning_mode),
        cmocka_unit_test(test_smollm3_is_prefix_stable_for_replies_without_leading_newlines),
        cmocka_unit_test(test_phi4_mini_tags_every_message_without_newlines),
        cmocka_unit_test(test_gemma3_folds_the_system_text_and_is_prefix_stable),
        cmocka_unit_test(test_qwen3_and_smollm3_sources_are_detected),
        cmocka_unit_test(test_prompt_ids_keep_control_token_texts_of_messages_as_text),
        cmocka_unit_test(test_detection_maps_every_real_template_to_its_family),
        cmocka_unit_test(test_detection_of_llama2_plain_and_unknown_sources),
        cmocka_unit_test(test_a_template_can_be_chosen_by_name),
        cmocka_unit_test(test_explicit_bos_and_eos_texts_replace_the_familys_own),
        cmocka_unit_test(test_render_refuses_unknown_roles_and_missing_content),
        cmocka_unit_test(test_prompt_ids_start_with_exactly_one_bos),
        cmocka_unit_test(test_prompt_ids_write_eos_texts_only_where_the_vocabulary_has_them),
        cmocka_unit_test(test_renderings_equal_what_jinja_renders_from_the_templates),
        cmocka_unit_test(test_harmony_and_glm_are_prefix_stable_for_replies_without_reasoning),
        cmocka_unit_test(test_a_tool_loop_is_prefix_stable_in_harmony_glm_and_the_xml_calls),
        cmocka_unit_test(test_harmony_rewrites_history_at_past_reasoning),
        cmocka_unit_test(test_glm_and_qwen35_rewrite_history_at_past_reasoning),
        cmocka_unit_test(test_harmony_and_glm_refuse_what_their_templates_raise_on),
        cmocka_unit_test(test_harmony_glm_and_qwen3_sources_are_detected_with_their_variants),
        cmocka_unit_test(test_the_vocabulary_tokens_of_a_family_are_what_its_template_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
