/* Tool calls in model output (server/toolcall.h): the forms of the template families become OpenAI tool_calls;
 * malformed output stays text. (Where calls begin in a reply, and a stream's holding back, are test_reply's.) */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "toolcall.h"

static json_t *parse(toolcall_format f, const char *text, size_t *content_len) {
    return toolcall_parse(f, text, strlen(text), "t", NULL, content_len);
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

static void test_harmony_messages_to_functions_become_calls(void **state) {
    (void)state;
    size_t content;
    /* the recipient in the role's header (as the template writes it) or in the channel's (as the model often does) */
    const char *const forms[] = {
        " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
        "assistant<|channel|>analysis to=functions.get_weather<|message|> {\"city\": \"Paris\"} <|end|>",
    };
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        json_t *calls = parse(TOOLCALL_HARMONY, forms[i], &content);
        if (!calls) fail_msg("'%s' is no call", forms[i]);
        assert_int_equal(json_array_size(calls), 1);
        assert_string_equal(fn(calls, 0, "name"), "get_weather");
        assert_string_equal(fn(calls, 0, "arguments"), "{\"city\":\"Paris\"}");
        assert_int_equal(content, 0);
        json_decref(calls);
    }
}

#define WEATHER "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": " \
                "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, " \
                "\"tags\": {\"type\": \"array\"}}}}}"

static void test_glm_pairs_become_arguments_typed_by_the_tools_schema(void **state) {
    (void)state;
    json_t *tools = json_pack("[o]", json_loads(WEATHER, 0, NULL));
    size_t content;
    /* 4.6's newlines or 4.7's none; a string parameter stays a string even when it reads as JSON */
    const char *text = "I'll look.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>1984</arg_value>\n"
                       "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_weather"
                       "<arg_key>tags</arg_key><arg_value>[\"a\", \"b\"]</arg_value><arg_key>note</arg_key><arg_value>"
                       "rain, maybe</arg_value></tool_call>";
    json_t *calls = toolcall_parse(TOOLCALL_GLM, text, strlen(text), "t", tools, &content);
    assert_non_null(calls);
    assert_int_equal(json_array_size(calls), 2);
    assert_string_equal(fn(calls, 0, "arguments"), "{\"city\":\"1984\",\"days\":3}");
    assert_string_equal(fn(calls, 1, "arguments"), "{\"tags\":[\"a\",\"b\"],\"note\":\"rain, maybe\"}");
    assert_int_equal(content, strlen("I'll look."));
    json_decref(calls);
    /* without the tools, a value that reads as JSON is JSON */
    calls = toolcall_parse(TOOLCALL_GLM, text, strlen(text), "t", NULL, &content);
    assert_string_equal(fn(calls, 0, "arguments"), "{\"city\":1984,\"days\":3}");
    json_decref(calls);
    const char *bare = "<tool_call>now</tool_call>";
    calls = parse(TOOLCALL_GLM, bare, &content);
    assert_string_equal(fn(calls, 0, "name"), "now");
    assert_string_equal(fn(calls, 0, "arguments"), "{}");
    json_decref(calls);
    json_decref(tools);
}

static void test_qwen3_coder_parameters_become_arguments_typed_by_the_tools_schema(void **state) {
    (void)state;
    json_t *tools = json_pack("[o]", json_loads(WEATHER, 0, NULL));
    size_t content;
    const char *text = "Checking.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n1984\n</parameter>\n"
                       "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=write>\n"
                       "<parameter=code>\nif a < b:\n    x = \"\\n\"\n\n</parameter>\n</function>\n</tool_call>";
    json_t *calls = toolcall_parse(TOOLCALL_QWEN3_XML, text, strlen(text), "t", tools, &content);
    assert_non_null(calls);
    assert_int_equal(json_array_size(calls), 2);
    assert_string_equal(fn(calls, 0, "arguments"), "{\"city\":\"1984\",\"days\":3}");
    /* the template's newline on each side is not the value's; the value's own are */
    assert_string_equal(fn(calls, 1, "name"), "write");
    assert_string_equal(fn(calls, 1, "arguments"), "{\"code\":\"if a < b:\\n    x = \\\"\\\\n\\\"\\n\"}");
    assert_int_equal(content, strlen("Checking."));
    json_decref(calls);
    static const char *const bad[] = {
        "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
        "<tool_call>\n<function=>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n</function>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *none = parse(TOOLCALL_QWEN3_XML, bad[i], &content);
        if (none) fail_msg("'%s' parsed as a call", bad[i]);
        assert_int_equal(content, strlen(bad[i]));
    }
    json_decref(tools);
}

static void test_malformed_harmony_and_glm_calls_stay_text(void **state) {
    (void)state;
    static const struct {
        toolcall_format f;
        const char *text;
    } cases[] = {
        {TOOLCALL_HARMONY, "<|channel|>final<|message|>Hello"},
        {TOOLCALL_HARMONY, " to=browser.search<|channel|>commentary<|message|>{}"},
        {TOOLCALL_HARMONY, " to=functions.f<|channel|>commentary json<|message|>[1]"},
        {TOOLCALL_HARMONY, " to=functions.f<|channel|>commentary json"},
        {TOOLCALL_HARMONY, " to=functions.<|channel|>commentary<|message|>{}"},
        {TOOLCALL_GLM, "<tool_call>f<arg_key>x</arg_key><arg_value>1</arg_value>"},
        {TOOLCALL_GLM, "<tool_call>f<arg_key>x</arg_key>1</tool_call>"},
        {TOOLCALL_GLM, "<tool_call></tool_call>"},
        {TOOLCALL_GLM, "<tool_call>f</tool_call> and then words"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t content;
        json_t *calls = parse(cases[i].f, cases[i].text, &content);
        if (calls) fail_msg("case %zu: '%s' parsed as a call", i, cases[i].text);
        assert_int_equal(content, strlen(cases[i].text));
    }
    size_t content;
    assert_null(toolcall_parse(TOOLCALL_GLM, NULL, 0, "t", NULL, &content)); /* an empty output: no text buffer at all */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hermes_blocks_become_tool_calls_after_the_content),
        cmocka_unit_test(test_llama3_json_becomes_one_tool_call),
        cmocka_unit_test(test_malformed_calls_stay_text),
        cmocka_unit_test(test_harmony_messages_to_functions_become_calls),
        cmocka_unit_test(test_glm_pairs_become_arguments_typed_by_the_tools_schema),
        cmocka_unit_test(test_qwen3_coder_parameters_become_arguments_typed_by_the_tools_schema),
        cmocka_unit_test(test_malformed_harmony_and_glm_calls_stay_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
