/* toolcall.h — function calls in a model's output, as OpenAI `tool_calls`.
 *
 * WHY here: a model asked to use tools answers in its template family's own form — Qwen/Hermes (ChatML)
 * write <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks, Llama-3.1 writes one JSON object
 * {"name": ..., "parameters": {...}} — and OpenAI clients expect `tool_calls` with the arguments as a JSON
 * string. The other APIs reshape these calls (tool_use blocks, function_call items).
 *
 * INVARIANT: output that is not a well-formed call stays text: a malformed call is never an error. Streaming: text
 * that might still become a call is held back (toolcall_safe_prefix), so a client never receives the beginning of a
 * call as content.
 */
#ifndef FKV_TOOLCALL_H
#define FKV_TOOLCALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat/chat.h"
#include "flatkv.h"

typedef enum { TOOLCALL_NONE = 0, TOOLCALL_HERMES = 1, TOOLCALL_LLAMA3 = 2 } toolcall_format;

/* The form calls take in the output of a model rendered with template t (offered tools as chat_render writes them). */
toolcall_format toolcall_format_of(const chat_template *t);

/* The calls in text[0..len): a JSON array of OpenAI tool calls ({id, type: "function", function: {name,
 * arguments}}), ids "call_<id_base>_<i>"; NULL when there is none or the output is not well formed.
 * *content_len: how much of the text before the calls is content. */
json_t *toolcall_parse(toolcall_format f, const char *text, size_t len, const char *id_base, size_t *content_len);

/* GBNF (malloc'd) whose sentences are calls in format f of the tools (an OpenAI tools array): of the one named
 * `only` (NULL: any of them), one call or — parallel, Hermes only — up to 8; each call's arguments valid against its
 * tool's parameters (JSON Schema). toolcall_parse reads every sentence back as those calls. NULL with err (a
 * parameters schema flatkv cannot compile, naming the keyword). */
char *toolcall_gbnf(toolcall_format f, const json_t *tools, const char *only, bool parallel, fkv_error *err);

/* How much of text[0..len) can be streamed as content now: everything before where a call may begin. */
size_t toolcall_safe_prefix(toolcall_format f, const char *text, size_t len);

#endif
