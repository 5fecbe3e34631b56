/* fuzz_toolcall.c — the tool-call parser (server/toolcall.c) on arbitrary model output.
 *
 * Input: byte 0 picks the format (Hermes <tool_call> blocks, Llama-3's JSON object, gpt-oss's harmony messages, GLM's
 * <arg_key>/<arg_value> pairs; bit 3: Qwen3-Coder's <function=...> blocks; bit 2 offers a tool whose parameters type
 * GLM's and Qwen3-Coder's values); the rest is the text.
 * Asserts, for what toolcall_parse returns: a non-empty array of {id, type "function", function {name, arguments}}
 * whose arguments are a JSON object or the string the model wrote, and content_len within the text. (Where calls
 * begin while a reply streams is fuzz_reply's.)
 */
#include <stdint.h>

#include "fuzz.h"
#include "toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const toolcall_format formats[] = {TOOLCALL_HERMES, TOOLCALL_LLAMA3, TOOLCALL_HARMONY, TOOLCALL_GLM};
    const toolcall_format f = data[0] & 8 ? TOOLCALL_QWEN3_XML : formats[data[0] & 3];
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    size_t content_len = SIZE_MAX;
    json_t *tools = data[0] & 4 ? json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                                             "{\"properties\": {\"x\": {\"type\": \"string\"}}}}}]", 0, NULL)
                                : NULL;
    json_t *calls = toolcall_parse(f, text, len, "fuzz", tools, &content_len);
    json_decref(tools);
    FUZZ_CHECK(content_len <= len, "content_len %zu of %zu bytes", content_len, len);
    if (!calls) return 0;
    FUZZ_CHECK(json_is_array(calls) && json_array_size(calls) > 0, "calls parsed, but not a non-empty array");
    size_t i;
    const json_t *call;
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        FUZZ_CHECK(json_is_string(json_object_get(call, "id")), "call %zu has no id", i);
        FUZZ_CHECK(json_is_string(json_object_get(call, "type")) &&
                       !strcmp(json_string_value(json_object_get(call, "type")), "function"),
                   "call %zu is not of type function", i);
        FUZZ_CHECK(json_is_string(json_object_get(fn, "name")), "call %zu has no name", i);
        FUZZ_CHECK(json_is_string(json_object_get(fn, "arguments")), "call %zu has no arguments string", i);
    }
    json_decref(calls);
    return 0;
}
