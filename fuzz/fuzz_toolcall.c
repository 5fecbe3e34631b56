/* fuzz_toolcall.c — the tool-call parser (server/toolcall.c) on arbitrary model output.
 *
 * Input: byte 0 picks the format (Hermes <tool_call> blocks or Llama-3's JSON object); the rest is the text.
 * Asserts, for what toolcall_parse returns: a non-empty array of {id, type "function", function {name, arguments}}
 * whose arguments are a JSON object or the string the model wrote, and content_len within the text; and the
 * streaming promise (toolcall.h): for every prefix of the text, toolcall_safe_prefix lets through nothing past the
 * content (content_len), so a client never receives the beginning of a call, or more than the content, as content.
 */
#include <stdint.h>

#include "fuzz.h"
#include "toolcall.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const toolcall_format f = data[0] & 1 ? TOOLCALL_LLAMA3 : TOOLCALL_HERMES;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    size_t content_len = SIZE_MAX;
    json_t *calls = toolcall_parse(f, text, len, "fuzz", &content_len);
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
    /* What the stream may have sent before the calls is content, nothing more: not even the whitespace before them,
     * which toolcall_parse does not count as content (a stream that sent more could never end: http.c). */
    const size_t step = len > 512 ? len / 256 : 1; /* every prefix of short texts, a sample of long ones */
    for (size_t k = 0; k <= len; k += step) {
        size_t safe = toolcall_safe_prefix(f, text, k);
        FUZZ_CHECK(safe <= k && safe <= content_len, "prefix %zu: %zu bytes streamed, but the content is %zu", k,
                   safe, content_len);
    }
    return 0;
}
