/* toolcall.h — function calls in a model's output, as OpenAI `tool_calls`.
 *
 * WHY here: a model asked to use tools answers in its template family's own form — Qwen/Hermes (ChatML)
 * write <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks, Llama-3.1 writes one JSON object
 * {"name": ..., "parameters": {...}}, gpt-oss a commentary message to=functions.NAME whose body is the arguments'
 * JSON, GLM <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call> with string values as they
 * are, Qwen3-Coder <tool_call>\n<function=NAME>\n<parameter=k>\nv\n</parameter>\n...</function>\n</tool_call>
 * likewise — and OpenAI clients expect `tool_calls` with the arguments as a JSON string. The other APIs reshape these
 * calls (tool_use blocks, function_call items). Where the calls begin in a reply, and what comes before them, is
 * reply.h's.
 *
 * INVARIANT: output that is not a well-formed call stays text: a malformed call is never an error. A grammar's
 * sentences are calls toolcall_parse reads back.
 */
#ifndef FKV_TOOLCALL_H
#define FKV_TOOLCALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "chat/chat.h"
#include "flatkv.h"

typedef enum {
    TOOLCALL_NONE = 0,
    TOOLCALL_HERMES = 1,
    TOOLCALL_LLAMA3 = 2,
    TOOLCALL_HARMONY = 3,
    TOOLCALL_GLM = 4,
    TOOLCALL_QWEN3_XML = 5,
} toolcall_format;

/* The form calls take in the output of a model rendered with template t (offered tools as chat_render writes them). */
toolcall_format toolcall_format_of(const chat_template *t);

/* The calls in text[0..len): a JSON array of OpenAI tool calls ({id, type: "function", function: {name,
 * arguments}}), ids "call_<id_base>_<i>"; NULL when there is none or the output is not well formed. tools: the tools
 * offered (chat's shape), or NULL; GLM's and Qwen3-Coder's values become JSON strings where the parameter is a string,
 * JSON values elsewhere when they parse as JSON. *content_len: how much of the text before the calls is content. */
json_t *toolcall_parse(toolcall_format f, const char *text, size_t len, const char *id_base, const json_t *tools,
                       size_t *content_len);

/* GBNF rules (malloc'd) whose rule `calls` matches calls in format f of the tools (an OpenAI tools array): of the one
 * named `only` (NULL: any of them), one call or — parallel, Hermes, GLM and Qwen3-Coder — up to 8; each call's arguments valid
 * against its tool's parameters (JSON Schema). Without a root: reply_gbnf puts what may come before them. NULL with
 * err (a parameters schema flatkv cannot compile, naming the keyword). */
char *toolcall_gbnf(toolcall_format f, const json_t *tools, const char *only, bool parallel, fkv_error *err);

/* A GBNF rule `name` (and its helpers name-1, name-2, ...) matching exactly the texts that do not contain end —
 * ASCII without '^', ']', '-' or '\\', whose first byte occurs nowhere else in it — written to out: followed by end,
 * a reader that stops at the first end stops where the grammar's text does. */
void toolcall_gbnf_text_without(FILE *out, const char *name, const char *end);

#endif
