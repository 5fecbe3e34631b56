#include "toolcall.h"

#include "base/err.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* One OpenAI call from {"name": string, key: object or string}. */
static json_t *call_from(json_t *obj, const char *args_key, const char *id_base, size_t index) {
    json_t *name = json_object_get(obj, "name"), *args = json_object_get(obj, args_key);
    if (!json_is_object(obj) || !json_is_string(name) || (args && !json_is_object(args) && !json_is_string(args)))
        return NULL;
    char *args_text = !args ? strdup("{}") : json_is_string(args) ? strdup(json_string_value(args))
                                                                   : json_dumps(args, JSON_COMPACT);
    char id[96];
    snprintf(id, sizeof id, "call_%s_%zu", id_base, index);
    json_t *call = json_pack("{s:s,s:s,s:{s:O,s:s}}", "id", id, "type", "function", "function", "name", name,
                             "arguments", args_text ? args_text : "{}");
    free(args_text);
    return call;
}

static json_t *parse_hermes(const char *text, size_t len, const char *id_base, size_t *content_len) {
    const char *first = memmem(text, len, OPEN, sizeof OPEN - 1);
    if (!first) return NULL;
    json_t *calls = json_array();
    const char *p = first, *end = text + len;
    while (p < end) {
        while (p < end && is_space(*p)) p++;
        if (p == end) break;
        if ((size_t)(end - p) < sizeof OPEN - 1 || memcmp(p, OPEN, sizeof OPEN - 1)) goto bad;
        p += sizeof OPEN - 1;
        const char *close = memmem(p, (size_t)(end - p), CLOSE, sizeof CLOSE - 1);
        const char *body_end = close ? close : end; /* a final block may stop before its close tag */
        json_t *obj = json_loadb(p, (size_t)(body_end - p), 0, NULL);
        json_t *call = obj ? call_from(obj, "arguments", id_base, json_array_size(calls)) : NULL;
        json_decref(obj);
        if (!call) goto bad;
        json_array_append_new(calls, call);
        p = close ? close + sizeof CLOSE - 1 : end;
    }
    size_t n = (size_t)(first - text);
    while (n && is_space(text[n - 1])) n--;
    *content_len = n;
    return calls;
bad:
    json_decref(calls);
    return NULL;
}

static json_t *parse_llama3(const char *text, size_t len, const char *id_base, size_t *content_len) {
    const char *p = text, *end = text + len;
    while (p < end && is_space(*p)) p++;
    static const char TAG[] = "<|python_tag|>";
    if ((size_t)(end - p) >= sizeof TAG - 1 && !memcmp(p, TAG, sizeof TAG - 1)) p += sizeof TAG - 1;
    if (p == end || *p != '{') return NULL;
    json_t *obj = json_loadb(p, (size_t)(end - p), 0, NULL);
    json_t *call = obj ? call_from(obj, json_object_get(obj, "parameters") ? "parameters" : "arguments", id_base, 0)
                       : NULL;
    json_decref(obj);
    if (!call) return NULL;
    *content_len = 0;
    return json_pack("[o]", call);
}

toolcall_format toolcall_format_of(const chat_template *t) {
    return t->family == CHAT_LLAMA3 ? TOOLCALL_LLAMA3 : TOOLCALL_HERMES;
}

json_t *toolcall_parse(toolcall_format f, const char *text, size_t len, const char *id_base, size_t *content_len) {
    *content_len = len;
    if (!len) return NULL; /* an empty output (text may then be NULL: memmem's arguments must not be) */
    if (f == TOOLCALL_HERMES) return parse_hermes(text, len, id_base, content_len);
    if (f == TOOLCALL_LLAMA3) return parse_llama3(text, len, id_base, content_len);
    return NULL;
}

size_t toolcall_safe_prefix(toolcall_format f, const char *text, size_t len) {
    if (f == TOOLCALL_LLAMA3) {
        /* A reply that opens with "{" (or the python tag) may be a call: hold it all until the end. */
        size_t i = 0;
        while (i < len && is_space(text[i])) i++;
        return i < len && (text[i] == '{' || text[i] == '<') ? 0 : i == len ? 0 : len;
    }
    if (f != TOOLCALL_HERMES) return len;
    /* Stop before "<tool_call>" or before a trailing piece of it still arriving, and before the whitespace in front
     * of either: parse_hermes does not count that whitespace as content, and what was streamed must stay content. */
    const char *open = memmem(text, len, OPEN, sizeof OPEN - 1);
    size_t cut = open ? (size_t)(open - text) : len;
    for (size_t k = sizeof OPEN - 2; !open && k > 0; k--)
        if (len >= k && !memcmp(text + len - k, OPEN, k)) {
            cut = len - k;
            break;
        }
    while (cut && is_space(text[cut - 1])) cut--;
    return cut;
}

/* s as the body of a GBNF literal (quotes and backslashes escaped) appended to out; false when out of memory. */
static bool gbnf_literal(FILE *out, const char *s) {
    for (; *s; s++)
        if (fprintf(out, *s == '"' || *s == '\\' ? "\\%c" : (unsigned char)*s < 0x20 ? "\\x%02x" : "%c",
                    (unsigned char)*s) < 0)
            return false;
    return true;
}

char *toolcall_gbnf(toolcall_format f, const json_t *tools, const char *only, bool parallel, fkv_error *err) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out) {
        err_nomem(err, "out of memory for a tool-call grammar");
        return NULL;
    }
    /* One rule per tool: its call, with its arguments' own rules (prefixed t<i>-). */
    const char *args_key = f == TOOLCALL_LLAMA3 ? "parameters" : "arguments";
    bool ok = true, any = false;
    size_t i;
    const json_t *tool;
    fputs("call ::= ", out);
    json_array_foreach(tools, i, tool) {
        const char *name = json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
        if (only && strcmp(name, only)) continue;
        fprintf(out, "%st%zu-call", any ? " | " : "", i);
        any = true;
    }
    fputs("\n", out);
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function"), *params = json_object_get(fn, "parameters");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (only && strcmp(name, only)) continue;
        char *schema =
            params && json_is_object(params) ? json_dumps(params, JSON_COMPACT) : strdup("{\"type\": \"object\"}");
        char prefix[32];
        snprintf(prefix, sizeof prefix, "t%zu-", i);
        char *args = schema ? fkv_json_schema_gbnf(schema, strlen(schema), prefix, err) : NULL;
        free(schema);
        if (!args) {
            ok = false;
            break;
        }
        fprintf(out, "t%zu-call ::= \"{\\\"name\\\": \\\"", i);
        ok &= gbnf_literal(out, name);
        fprintf(out, "\\\", \\\"%s\\\": \" t%zu-root \"}\"\n%s\n", args_key, i, args);
        free(args);
    }
    if (ok && f == TOOLCALL_HERMES)
        fprintf(out, "block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\nroot ::= block%s\n",
                parallel ? " (\"\\n\" block){0,7}" : "");
    else if (ok)
        fputs("root ::= call\n", out);
    if (fclose(out) || !ok || !any) {
        if (ok && !any) err_input(err, "no tool is named '%s'", only ? only : "");
        free(text);
        return NULL;
    }
    return text;
}
