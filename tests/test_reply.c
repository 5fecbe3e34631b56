/* A reply split as a client receives it (server/reply.h): reasoning apart from content in each family's form, calls
 * apart from both; the same split whether the text comes whole or in pieces cut at any byte, with nothing sent that
 * is later taken back; and the grammars that enforce calls (a reasoning first, as the model writes it) accept what
 * the reader reads back as those calls. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/grammar.h"
#include "reply.h"
#include "toolcall.h"

#define N_OF(a) (sizeof(a) / sizeof *(a))

static const reply_form PLAIN = {REPLY_PLAIN, false, TOOLCALL_NONE};
static const reply_form QWEN3 = {REPLY_THINK, false, TOOLCALL_HERMES};
static const reply_form OPENED = {REPLY_THINK, true, TOOLCALL_NONE}; /* DeepSeek-R1's, GLM-4.7's */
static const reply_form GLM46 = {REPLY_THINK, false, TOOLCALL_GLM};
static const reply_form GLM47 = {REPLY_THINK, true, TOOLCALL_GLM};
static const reply_form HARMONY = {REPLY_HARMONY, false, TOOLCALL_HARMONY};
static const reply_form LLAMA3 = {REPLY_PLAIN, false, TOOLCALL_LLAMA3};
static const reply_form CODER = {REPLY_PLAIN, false, TOOLCALL_QWEN3_XML};
static const reply_form QWEN35 = {REPLY_THINK, true, TOOLCALL_QWEN3_XML}; /* Qwen3.5's: the prompt opened the block */

/* What a reply of text comes to. */
typedef struct {
    const char *reasoning, *content;
    const char *call; /* the first call's name, or NULL for none */
} split;

static void expect_whole(const reply_form *f, const char *text, split want) {
    reply r = {0};
    json_t *calls = NULL;
    assert_int_equal(reply_finish(&r, f, text, strlen(text), "t", NULL, &calls), 0);
    const char *got_r = r.reasoning ? r.reasoning : "", *got_c = r.content ? r.content : "";
    const char *name = json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "name"));
    const bool same_call = want.call ? name && !strcmp(name, want.call) : !name;
    if (strcmp(got_r, want.reasoning) || strcmp(got_c, want.content) || !same_call)
        fail_msg("'%s': reasoning '%s' content '%s' call %s; want '%s' '%s' %s", text, got_r, got_c,
                 name ? name : "none", want.reasoning, want.content, want.call ? want.call : "none");
    json_decref(calls);
    reply_free(&r);
}

/* Read text as it would stream: after every piece of the given cut, and byte by byte; what was split at each step
 * must be a prefix of the whole's (never taken back), and the end must be the whole's. */
static void expect_streamed_like_whole(const reply_form *f, const char *text) {
    const size_t len = strlen(text);
    reply whole = {0};
    json_t *whole_calls = NULL;
    assert_int_equal(reply_finish(&whole, f, text, len, "t", NULL, &whole_calls), 0);
    char *dumped = whole_calls ? json_dumps(whole_calls, 0) : NULL;
    for (size_t step = 1; step <= len + 1; step++) { /* pieces of `step` bytes; len + 1: cut once at every byte */
        for (size_t cut = 0; cut <= (step == len + 1 ? len : 0); cut++) {
            reply r = {0};
            size_t at = 0, sent_r = 0, sent_c = 0;
            while (at < len) {
                at = step == len + 1 ? (at < cut ? cut : len) : (at + step < len ? at + step : len);
                assert_int_equal(reply_read(&r, f, text, at, false), 0);
                /* what was split is a prefix of what the whole text splits into, and only grows */
                assert_true(r.n_reasoning >= sent_r && r.n_content >= sent_c);
                if (r.n_reasoning && (r.n_reasoning > whole.n_reasoning || memcmp(r.reasoning, whole.reasoning, r.n_reasoning)))
                    fail_msg("'%s' cut at %zu (step %zu): reasoning '%s' is not a prefix of '%s'", text, at, step,
                             r.reasoning, whole.reasoning ? whole.reasoning : "");
                if (r.n_content && (r.n_content > whole.n_content || memcmp(r.content, whole.content, r.n_content)))
                    fail_msg("'%s' cut at %zu (step %zu): content '%s' is not a prefix of '%s'", text, at, step,
                             r.content, whole.content ? whole.content : "");
                sent_r = r.n_reasoning, sent_c = r.n_content;
                assert_true(r.read <= at && r.shown <= r.read);
            }
            json_t *calls = NULL;
            assert_int_equal(reply_finish(&r, f, text, len, "t", NULL, &calls), 0);
            assert_int_equal(r.n_reasoning, whole.n_reasoning);
            assert_int_equal(r.n_content, whole.n_content);
            char *d = calls ? json_dumps(calls, 0) : NULL;
            if ((d == NULL) != (dumped == NULL) || (d && strcmp(d, dumped))) fail_msg("'%s': calls differ", text);
            free(d);
            json_decref(calls);
            reply_free(&r);
        }
    }
    free(dumped);
    json_decref(whole_calls);
    reply_free(&whole);
}

static void test_think_blocks_are_reasoning_and_what_follows_is_content(void **state) {
    (void)state;
    expect_whole(&QWEN3, "<think>\nLet me see.\n</think>\n\nIt is 4.", (split){"Let me see.", "It is 4.", NULL});
    expect_whole(&QWEN3, "  \n<think></think>It is 4.  ", (split){"", "It is 4.  ", NULL});
    expect_whole(&QWEN3, "It is 4, not <think>.", (split){"", "It is 4, not <think>.", NULL}); /* no block first */
    expect_whole(&QWEN3, "\n\nIt is 4.", (split){"", "\n\nIt is 4.", NULL});                     /* kept as written */
    expect_whole(&QWEN3, "<think>cut short", (split){"cut short", "", NULL});
    expect_whole(&QWEN3, "<think>a</think>b</think>c", (split){"a", "b</think>c", NULL});
    /* a call after the reasoning; a call's tag inside the reasoning is reasoning */
    expect_whole(&QWEN3, "<think>maybe <tool_call> f</think>\nSure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"
                         "</tool_call>",
                 (split){"maybe <tool_call> f", "Sure.", "f"});
    /* the prompt opened the block: everything up to "</think>" is reasoning */
    expect_whole(&OPENED, "\nLet me see.\n</think>\n\nIt is 4.", (split){"Let me see.", "It is 4.", NULL});
    expect_whole(&OPENED, "all thought", (split){"all thought", "", NULL});
    expect_whole(&QWEN35, "Let me see.\n</think>\n\nSure.\n\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
                 (split){"Let me see.", "Sure.", "now"});
    expect_whole(&PLAIN, " <think>x</think> as written ", (split){"", " <think>x</think> as written ", NULL});
}

static void test_a_malformed_call_and_the_space_before_it_become_content(void **state) {
    (void)state;
    expect_whole(&QWEN3, "Sure.\n\n<tool_call>\n{\"name\": }\n</tool_call>",
                 (split){"", "Sure.\n\n<tool_call>\n{\"name\": }\n</tool_call>", NULL});
    expect_whole(&QWEN3, "Sure.\n\n", (split){"", "Sure.\n\n", NULL});
    expect_whole(&LLAMA3, "  {\"name\": \"f\", \"parameters\": {}}", (split){"", "", "f"});
    expect_whole(&LLAMA3, "  {sunny}", (split){"", "  {sunny}", NULL});
    expect_whole(&LLAMA3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", (split){"", "", "f"});
    expect_whole(&LLAMA3, "<b>bold</b>", (split){"", "<b>bold</b>", NULL});
}

static void test_harmony_channels_are_reasoning_content_and_calls(void **state) {
    (void)state;
    expect_whole(&HARMONY, "<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final"
                           "<|message|>Hello!",
                 (split){"User says hi.", "Hello!", NULL});
    expect_whole(&HARMONY, "<|channel|>final<|message|>Hello!", (split){"", "Hello!", NULL});
    /* a preamble in the commentary channel is for the user; then a call */
    expect_whole(&HARMONY, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary"
                           "<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
                           "<|constrain|>json<|message|>{\"city\": \"Paris\"}",
                 (split){"Need weather.", "Checking.", "get_weather"});
    expect_whole(&HARMONY, " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
                 (split){"", "", "get_weather"});
    /* a model that ignores the format answers in content; a header cut short says nothing */
    expect_whole(&HARMONY, "Hello there.", (split){"", "Hello there.", NULL});
    expect_whole(&HARMONY, "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>fin",
                 (split){"Hm.", "", NULL});
    /* a call to a tool that was not offered as a function stays text */
    expect_whole(&HARMONY, "<|channel|>commentary to=browser.search<|message|>{}",
                 (split){"", "<|channel|>commentary to=browser.search<|message|>{}", NULL});
}

static void test_glm_replies_split_in_both_versions(void **state) {
    (void)state;
    expect_whole(&GLM46, "\n<think>Weather needed.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                         "<arg_value>Paris</arg_value>\n</tool_call>",
                 (split){"Weather needed.", "", "get_weather"});
    expect_whole(&GLM46, "\n<think></think>\nHello!", (split){"", "Hello!", NULL});
    expect_whole(&GLM47, "Weather needed.</think>Let me check.<tool_call>get_weather<arg_key>city</arg_key><arg_value>"
                         "Paris</arg_value></tool_call>",
                 (split){"Weather needed.", "Let me check.", "get_weather"});
}

/* Every split above, read in pieces of every size and cut at every byte, is the whole's. */
static void test_streaming_splits_at_every_byte_as_the_whole(void **state) {
    (void)state;
    static const struct {
        const reply_form *f;
        const char *text;
    } cases[] = {
        {&QWEN3, "<think>\nLet me see.\n</think>\n\nIt is 4."},
        {&QWEN3, "  \n<think> a \n b </think>  It  is\n 4.  "},
        {&QWEN3, "It is 4, not <think>."},
        {&QWEN3, "<thin"},
        {&QWEN3, "Sure.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
        {&QWEN3, "Sure. <tool_c <tool_call>\n{\"name\": }"},
        {&QWEN3, "<think>x</think>\n\n  <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
        {&OPENED, "\n Let me see.\n</think>\n\nIt is 4. </thi"},
        {&LLAMA3, "  {\"name\": \"f\", \"parameters\": {}}"},
        {&LLAMA3, " <|python_t"},
        {&LLAMA3, " <|python_tag|>{\"name\": \"f\", \"parameters\": {}}"},
        {&PLAIN, " Once upon a time <|end|> there was"},
        {&HARMONY, "<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hi!"},
        {&HARMONY, "<|channel|>analysis<|message|>a <|en b<|end|><|start|>assistant<|channel|>commentary<|message|>"
                   "Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"},
        {&HARMONY, "Plain words, <|no|> header."},
        {&HARMONY, "<|channel|>final<|message|>Hello<|start|>assistant<|channel|>final<|message|> again"},
        {&GLM46, "\n<think>Weather needed.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                 "<arg_value>Paris</arg_value>\n</tool_call>"},
        {&GLM47, "Hm.</think>Sure.<tool_call>now</tool_call>"},
        {&CODER, "Sure.\n\n<tool_call>\n<function=now>\n</function>\n</tool_call>"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) expect_streamed_like_whole(cases[i].f, cases[i].text);
}

/* --- grammars --- */

#define WEATHER_TOOLS                                                                                              \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "  \
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}, " \
    "\"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": "      \
    "{\"name\": \"now\", \"parameters\": {}}}]"

/* 1: text is a sentence of the grammar; 0: a beginning of one; -1: refused. */
static int match(const grammar *g, const char *text) {
    fkv_error err = {0};
    grammar_state *s = grammar_state_new(g, &err);
    assert_non_null(s);
    int r = grammar_accept_bytes(s, text, strlen(text)) ? -1 : grammar_complete(s) ? 1 : 0;
    grammar_state_free(s);
    return r;
}

/* The grammar enforcing a call of form f; each of yes[] is a sentence that reads back as a call of `name`, each of
 * no[] is refused or unfinished. */
static void expect_grammar(const reply_form *f, const char *const *yes, size_t n_yes, const char *const *no,
                           size_t n_no, const char *name) {
    json_t *tools = json_loads(WEATHER_TOOLS, 0, NULL);
    fkv_error err = {0};
    char *calls = toolcall_gbnf(f->calls, tools, NULL, true, &err);
    if (!calls) fail_msg("toolcall_gbnf: %s", err.msg);
    char *gbnf = reply_gbnf(f, calls, "calls", NULL);
    grammar *g = grammar_parse(gbnf, strlen(gbnf), &err);
    if (!g) fail_msg("%s\n%s", err.msg, gbnf);
    for (size_t i = 0; i < n_yes; i++) {
        if (match(g, yes[i]) != 1) fail_msg("refused: '%s'\n%s", yes[i], gbnf);
        reply r = {0};
        json_t *got = NULL;
        assert_int_equal(reply_finish(&r, f, yes[i], strlen(yes[i]), "t", tools, &got), 0);
        const json_t *fn = json_object_get(json_array_get(got, 0), "function");
        if (!got || strcmp(json_string_value(json_object_get(fn, "name")), name))
            fail_msg("'%s' does not read back as a call of %s", yes[i], name);
        json_decref(got);
        reply_free(&r);
    }
    for (size_t i = 0; i < n_no; i++)
        if (match(g, no[i]) == 1) fail_msg("accepted: '%s'", no[i]);
    grammar_free(g);
    free(gbnf);
    free(calls);
    json_decref(tools);
}

static void test_enforced_calls_may_follow_the_reasoning_and_read_back(void **state) {
    (void)state;
    const char *const harmony_yes[] = {
        " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
        "<|channel|>analysis<|message|>Weather, so a call. 3 < 4 <<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\",\"days\":2}",
    };
    const char *const harmony_no[] = {
        "<|channel|>final<|message|>Hello",
        "<|channel|>analysis<|message|>a <|end|> b<|end|><|start|>assistant to=functions.get_weather<|channel|>"
        "commentary<|message|>{\"city\": \"P\"}",
        " to=functions.get_weather<|channel|>commentary json<|message|>{\"days\": 2}", /* city is required */
    };
    expect_grammar(&HARMONY, harmony_yes, N_OF(harmony_yes), harmony_no, N_OF(harmony_no), "get_weather");
    const char *const glm46_yes[] = {
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris, TX</arg_value>\n</tool_call>",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a < b </ c</arg_value></tool_call>",
        "\n<think>They want weather.</think>\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>"
        "<arg_key>unit</arg_key><arg_value>c</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    };
    const char *const glm46_no[] = {
        "<tool_call>get_weather<arg_key>unit</arg_key><arg_value>c</arg_value></tool_call>",         /* no city */
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a</arg_value><arg_key>days</arg_key><arg_value>x"
        "</arg_value></tool_call>",                                                                   /* not a number */
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a</arg_value><arg_key>unit</arg_key><arg_value>k"
        "</arg_value></tool_call>",                                                                   /* not in enum */
        "<think>a</think> b</think><tool_call>now</tool_call>",
    };
    expect_grammar(&GLM46, glm46_yes, N_OF(glm46_yes), glm46_no, N_OF(glm46_no), "get_weather");
    const char *const glm47_yes[] = {"Hm, the time.</think><tool_call>now</tool_call>",
                                     "a </thin <</think><tool_call>now</tool_call>"}; /* near misses, to the end */
    const char *const glm47_no[] = {"<tool_call>now</tool_call>"}; /* the prompt opened a block: it must close */
    expect_grammar(&GLM47, glm47_yes, N_OF(glm47_yes), glm47_no, N_OF(glm47_no), "now");
    const char *const qwen3_yes[] = {
        "<think>\nA call.\n</think>\n\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
    };
    const char *const qwen3_no[] = {"Sure. <tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"};
    expect_grammar(&QWEN3, qwen3_yes, 1, qwen3_no, N_OF(qwen3_no), "now");
    expect_grammar(&QWEN3, qwen3_yes + 1, 1, NULL, 0, "get_weather");
    const char *const coder_yes[] = {
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nif a < b:\n  </x>\n\n</parameter>\n<parameter=days>"
        "\n3\n</parameter>\n</function>\n</tool_call>",
    };
    const char *const coder_no[] = {
        "Sure.\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
    };
    expect_grammar(&CODER, coder_yes, N_OF(coder_yes), coder_no, N_OF(coder_no), "get_weather");
    const char *const qwen35_yes[] = {"The weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>"
                                      "\nOslo\n</parameter>\n</function>\n</tool_call>"};
    const char *const qwen35_no[] = {coder_yes[0]}; /* the prompt opened a block: it must close first */
    expect_grammar(&QWEN35, qwen35_yes, N_OF(qwen35_yes), qwen35_no, N_OF(qwen35_no), "get_weather");
}

/* tool_choice auto with a response_format: one grammar takes either a call, read back as one, or the answer as the
 * content (harmony's in its final channel), after the reasoning where the form has it; nothing else. */
static void test_a_composed_grammar_takes_a_call_or_the_answer(void **state) {
    (void)state;
    static const struct {
        const reply_form *f;
        const char *call, *answer, *neither;
    } cases[] = {
        {&QWEN3, "<think>hm</think>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
         "<think>hm</think>\n{\"mood\": \"sad\"}", "<think>hm</think>\nSad."},
        {&LLAMA3, "{\"name\": \"now\", \"parameters\": {}}", "{\"mood\": \"happy\"}", "{\"mood\": \"cross\"}"},
        {&HARMONY, "<|channel|>commentary to=functions.now<|message|>{}",
         "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>{\"mood\": \"sad\"}",
         "<|channel|>final<|message|>sad"},
        {&CODER, "<tool_call>\n<function=now>\n</function>\n</tool_call>", "{\"mood\": \"sad\"}", "<tool_call>"},
    };
    json_t *tools = json_loads(WEATHER_TOOLS, 0, NULL);
    const char schema[] = "{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", \"sad\"]}}, "
                          "\"required\": [\"mood\"]}";
    for (size_t i = 0; i < N_OF(cases); i++) {
        fkv_error err = {0};
        char *calls = toolcall_gbnf(cases[i].f->calls, tools, NULL, true, &err);
        char *answer = jsonschema_to_gbnf(schema, strlen(schema), "answer-", &err);
        if (!calls || !answer) fail_msg("rules: %s", err.msg);
        char *rules = malloc(strlen(calls) + strlen(answer) + 1);
        strcat(strcpy(rules, calls), answer);
        char *gbnf = reply_gbnf(cases[i].f, rules, "calls", "answer-root");
        grammar *g = grammar_parse(gbnf, strlen(gbnf), &err);
        if (!g) fail_msg("%s\n%s", err.msg, gbnf);
        if (match(g, cases[i].call) != 1) fail_msg("refused the call '%s'\n%s", cases[i].call, gbnf);
        if (match(g, cases[i].answer) != 1) fail_msg("refused the answer '%s'\n%s", cases[i].answer, gbnf);
        if (match(g, cases[i].neither) == 1) fail_msg("took '%s'\n%s", cases[i].neither, gbnf);
        reply r = {0};
        json_t *got = NULL;
        assert_int_equal(reply_finish(&r, cases[i].f, cases[i].call, strlen(cases[i].call), "t", tools, &got), 0);
        assert_int_equal(json_array_size(got), 1);
        json_decref(got);
        reply_free(&r);
        grammar_free(g);
        free(gbnf);
        free(rules);
        free(answer);
        free(calls);
    }
    json_decref(tools);
}

static void test_the_reply_form_follows_the_template_and_its_settings(void **state) {
    (void)state;
    chat_template t = {.family = CHAT_GLM, .glm = CHAT_GLM_47};
    reply_form f = reply_form_of(&t, true);
    assert_true(f.reasoning == REPLY_THINK && f.opened && f.calls == TOOLCALL_GLM);
    t.no_thinking = true; /* the prompt closed the block: the reply is the answer alone, no block may open */
    assert_int_equal(reply_form_of(&t, true).reasoning, REPLY_PLAIN);
    t = (chat_template){.family = CHAT_HARMONY};
    f = reply_form_of(&t, false);
    assert_true(f.reasoning == REPLY_HARMONY && f.calls == TOOLCALL_NONE);
    t = (chat_template){.family = CHAT_CHATML};
    assert_int_equal(reply_form_of(&t, true).reasoning, REPLY_PLAIN);
    t.qwen3_thinking = true;
    assert_int_equal(reply_form_of(&t, true).reasoning, REPLY_THINK);
    t.no_thinking = true;
    assert_int_equal(reply_form_of(&t, true).reasoning, REPLY_PLAIN);
    t = (chat_template){.family = CHAT_CHATML, .qwen3_thinking = true, .qwen3_coder = true}; /* Qwen3.5 */
    f = reply_form_of(&t, true);
    assert_true(f.reasoning == REPLY_THINK && f.opened && f.calls == TOOLCALL_QWEN3_XML);
    t.no_thinking = true;
    f = reply_form_of(&t, true);
    assert_true(f.reasoning == REPLY_PLAIN && !f.opened);
    t = (chat_template){.family = CHAT_DEEPSEEK};
    assert_true(reply_form_of(&t, false).opened);
    assert_int_equal(reply_form_of(NULL, true).calls, TOOLCALL_NONE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_think_blocks_are_reasoning_and_what_follows_is_content),
        cmocka_unit_test(test_a_malformed_call_and_the_space_before_it_become_content),
        cmocka_unit_test(test_harmony_channels_are_reasoning_content_and_calls),
        cmocka_unit_test(test_glm_replies_split_in_both_versions),
        cmocka_unit_test(test_streaming_splits_at_every_byte_as_the_whole),
        cmocka_unit_test(test_enforced_calls_may_follow_the_reasoning_and_read_back),
        cmocka_unit_test(test_a_composed_grammar_takes_a_call_or_the_answer),
        cmocka_unit_test(test_the_reply_form_follows_the_template_and_its_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
