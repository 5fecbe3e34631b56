/* Tool calls in model output (server/toolcall.h): the forms of the template families become OpenAI
 * tool_calls; malformed output stays text; streaming holds back what may still become a call. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "toolcall.h"

static json_t *parse(toolcall_format f, const char *text, size_t *content_len) {
    return toolcall_parse(f, text, strlen(text), "t", content_len);
}

static const char *fn(json_t *calls, size_t i, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_array_get(calls, i), "function"), key));
}

static void test_hermes_blocks_become_tool_calls_after_the_content(void **state) {
    (void)state;
    size_t content;
    json_t *calls = parse(TOOLCALL_HERMES,
                          "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                          "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
                          &content);
    assert_non_null(calls);
    assert_int_equal(json_array_size(calls), 2);
    assert_string_equal(fn(calls, 0, "name"), "get_weather");
    assert_string_equal(fn(calls, 0, "arguments"), "{\"city\":\"Paris\"}");
    assert_string_equal(fn(calls, 1, "name"), "get_time");
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "type")), "function");
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 1), "id")), "call_t_1");
    assert_int_equal(content, strlen("Let me check."));
    json_decref(calls);
    /* A final block cut short of its close tag still counts when its JSON is whole. */
    calls = parse(TOOLCALL_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}", &content);
    assert_non_null(calls);
    assert_int_equal(content, 0);
    json_decref(calls);
}

static void test_llama3_json_becomes_one_tool_call(void **state) {
    (void)state;
    size_t content;
    json_t *calls = parse(TOOLCALL_LLAMA3, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", &content);
    assert_non_null(calls);
    assert_string_equal(fn(calls, 0, "name"), "get_weather");
    assert_string_equal(fn(calls, 0, "arguments"), "{\"city\":\"Oslo\"}");
    assert_int_equal(content, 0);
    json_decref(calls);
    calls = parse(TOOLCALL_LLAMA3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", &content);
    assert_non_null(calls);
    json_decref(calls);
}

static void test_malformed_calls_stay_text(void **state) {
    (void)state;
    static const struct {
        toolcall_format f;
        const char *text;
    } cases[] = {
        {TOOLCALL_HERMES, "no call here"},
        {TOOLCALL_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>"},
        {TOOLCALL_HERMES, "<tool_call>\n{\"arguments\": {}}\n</tool_call>"},
        {TOOLCALL_HERMES, "<tool_call>\n[1, 2]\n</tool_call>"},
        {TOOLCALL_HERMES, "<tool_call>\n{\"name\": \"f\"}\n</tool_call> trailing words"},
        {TOOLCALL_LLAMA3, "The weather is {sunny}."},
        {TOOLCALL_LLAMA3, "{\"name\": 3}"},
        {TOOLCALL_LLAMA3, "{\"name\": \"f\", \"parameters\": {} } and more"},
        {TOOLCALL_NONE, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t content;
        json_t *calls = parse(cases[i].f, cases[i].text, &content);
        if (calls) fail_msg("case %zu: '%s' parsed as a call", i, cases[i].text);
        assert_int_equal(content, strlen(cases[i].text));
    }
}

static void test_streaming_holds_back_what_may_become_a_call(void **state) {
    (void)state;
    /* The whitespace before a call is not content (toolcall_parse's content_len), so it is not streamed either: a
     * stream that had sent it could never end (found by fuzz/fuzz_holdback.c). */
    const char *t = "Sure. <tool_call>\n{\"name\"";
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_HERMES, t, strlen(t)), strlen("Sure."));
    t = "Sure. <tool_c"; /* the tag is still arriving */
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_HERMES, t, strlen(t)), strlen("Sure."));
    t = "Sure.\n\n"; /* a call may follow */
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_HERMES, t, strlen(t)), strlen("Sure."));
    t = "Sure.\n\nIt is";
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_HERMES, t, strlen(t)), strlen(t));
    size_t content;
    t = "Sure.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    json_t *calls = parse(TOOLCALL_HERMES, t, &content);
    assert_non_null(calls);
    for (size_t k = 0; k <= strlen(t); k++) assert_true(toolcall_safe_prefix(TOOLCALL_HERMES, t, k) <= content);
    json_decref(calls);
    /* An empty output (no text buffer at all) has no calls. */
    assert_null(toolcall_parse(TOOLCALL_HERMES, NULL, 0, "t", &content));
    t = "Sure, 3 < 4.";
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_HERMES, t, strlen(t)), strlen(t));
    t = "  {\"name\": \"f\"";
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_LLAMA3, t, strlen(t)), 0);
    t = "It is sunny.";
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_LLAMA3, t, strlen(t)), strlen(t));
    assert_int_equal(toolcall_safe_prefix(TOOLCALL_NONE, t, strlen(t)), strlen(t));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hermes_blocks_become_tool_calls_after_the_content),
        cmocka_unit_test(test_llama3_json_becomes_one_tool_call),
        cmocka_unit_test(test_malformed_calls_stay_text),
        cmocka_unit_test(test_streaming_holds_back_what_may_become_a_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
