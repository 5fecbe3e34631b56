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

/* The content before the first call at first: text up to it, trailing blanks dropped. */
static size_t content_before(const char *text, const char *first) {
    size_t n = (size_t)(first - text);
    while (n && is_space(text[n - 1])) n--;
    return n;
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
    *content_len = content_before(text, first);
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

/* The text between p and the first `end` after it (or the text's end, *found false): [*at, *at + *n). */
static const char *until(const char *p, const char *end_of_text, const char *end, size_t *n, bool *found) {
    const char *hit = memmem(p, (size_t)(end_of_text - p), end, strlen(end));
    *found = hit != NULL;
    *n = (size_t)((hit ? hit : end_of_text) - p);
    return p;
}

/* Whether marker begins at p (the text ends at end_of_text). */
static bool at(const char *p, const char *end_of_text, const char *marker) {
    const size_t m = strlen(marker);
    return (size_t)(end_of_text - p) >= m && !memcmp(p, marker, m);
}

static bool take(const char **p, const char *end_of_text, const char *marker) {
    const size_t m = strlen(marker);
    if ((size_t)(end_of_text - *p) < m || memcmp(*p, marker, m)) return false;
    *p += m;
    return true;
}

static void skip_space(const char **p, const char *end) {
    while (*p < end && is_space(**p)) ++*p;
}

/* One OpenAI call from a name and an arguments object (taken). */
static json_t *call_of(const char *name, size_t name_len, json_t *args, const char *id_base, size_t index) {
    json_t *obj = json_pack("{s:s%,s:o}", "name", name, name_len, "arguments", args);
    json_t *call = obj ? call_from(obj, "arguments", id_base, index) : NULL;
    json_decref(obj);
    return call;
}

/* gpt-oss: messages whose headers name a recipient functions.NAME and whose bodies are the arguments' JSON object,
 * each ended by <|call|> (a generation's end, so seldom text), <|end|> or the text's end; between two, <|start|>. */
static json_t *parse_harmony(const char *text, size_t len, const char *id_base, size_t *content_len) {
    static const char RECIPIENT[] = " to=functions.";
    const char *p = text, *end = text + len;
    json_t *calls = json_array();
    while (p < end) {
        size_t header_len, body_len;
        bool found;
        const char *header = until(p, end, "<|message|>", &header_len, &found);
        const char *to = found ? memmem(header, header_len, RECIPIENT, sizeof RECIPIENT - 1) : NULL;
        if (!to) goto bad;
        const char *name = to + sizeof RECIPIENT - 1, *name_end = name;
        while (name_end < header + header_len && *name_end != ' ' && *name_end != '<') name_end++;
        const char *body = header + header_len + strlen("<|message|>"), *body_end = body;
        while (body_end < end && !(*body_end == '<' && (at(body_end, end, "<|call|>") || at(body_end, end, "<|end|>") ||
                                                        at(body_end, end, "<|start|>"))))
            body_end++;
        body_len = (size_t)(body_end - body);
        json_t *args = json_loadb(body, body_len, 0, NULL);
        json_t *call = name_end > name && json_is_object(args)
                           ? call_of(name, (size_t)(name_end - name), args, id_base, json_array_size(calls))
                           : (json_decref(args), NULL);
        if (!call) goto bad;
        json_array_append_new(calls, call);
        p = body_end;
        if (!take(&p, end, "<|call|>")) take(&p, end, "<|end|>");
        skip_space(&p, end);
        take(&p, end, "<|start|>");
    }
    if (!json_array_size(calls)) goto bad;
    *content_len = 0;
    return calls;
bad:
    json_decref(calls);
    return NULL;
}

/* Whether the parameters of the tool named name (chat's shape) type argument key as a string. */
static bool string_parameter(const json_t *tools, const char *name, size_t name_len, const char *key) {
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *fn = json_object_get(json_array_get(tools, i), "function");
        const char *tool = json_string_value(json_object_get(fn, "name"));
        if (!tool || strlen(tool) != name_len || memcmp(tool, name, name_len)) continue;
        const json_t *prop = json_object_get(json_object_get(json_object_get(fn, "parameters"), "properties"), key);
        const json_t *type = json_object_get(prop, "type");
        return json_is_string(type) && !strcmp(json_string_value(type), "string");
    }
    return false;
}

/* args[key] = value, typed as the XML families write values: JSON where it parses and the tool does not declare the
 * parameter a string, else the text itself. False when out of memory. */
static bool set_typed_arg(json_t *args, const json_t *tools, const char *name, size_t name_len, const char *key,
                          size_t key_len, const char *value, size_t value_len) {
    char *k = strndup(key, key_len);
    if (!k) return false;
    json_t *v = string_parameter(tools, name, name_len, k) ? NULL : json_loadb(value, value_len, JSON_DECODE_ANY, NULL);
    if (!v) v = json_stringn_nocheck(value, value_len);
    const bool set = v && !json_object_set_new(args, k, v);
    free(k);
    return set;
}

/* GLM: <tool_call>NAME then <arg_key>k</arg_key><arg_value>v</arg_value> pairs and </tool_call>, whitespace between
 * the parts. A value is the parameter's string when its schema says string, else its JSON when it parses, else a
 * string. */
static json_t *parse_glm(const char *text, size_t len, const char *id_base, const json_t *tools, size_t *content_len) {
    const char *first = memmem(text, len, OPEN, sizeof OPEN - 1);
    if (!first) return NULL;
    const char *p = first, *end = text + len;
    json_t *calls = json_array(), *args = NULL;
    while (p < end) {
        skip_space(&p, end);
        if (p == end) break;
        if (!take(&p, end, OPEN)) goto bad;
        const char *name = p;
        while (p < end && *p != '<' && *p != '\n') p++;
        const char *name_end = p;
        while (name_end > name && is_space(name_end[-1])) name_end--;
        while (name < name_end && is_space(*name)) name++;
        args = json_object();
        for (;;) {
            skip_space(&p, end);
            if (take(&p, end, CLOSE)) break;
            size_t key_len, value_len;
            bool found;
            if (!take(&p, end, "<arg_key>")) goto bad;
            const char *key = until(p, end, "</arg_key>", &key_len, &found);
            if (!found) goto bad;
            p = key + key_len + strlen("</arg_key>");
            skip_space(&p, end);
            if (!take(&p, end, "<arg_value>")) goto bad;
            const char *value = until(p, end, "</arg_value>", &value_len, &found);
            if (!found) goto bad;
            p = value + value_len + strlen("</arg_value>");
            if (!set_typed_arg(args, tools, name, (size_t)(name_end - name), key, key_len, value, value_len))
                goto bad;
        }
        json_t *call = NULL;
        if (name_end > name) call = call_of(name, (size_t)(name_end - name), args, id_base, json_array_size(calls));
        else json_decref(args);
        args = NULL; /* taken, or freed */
        if (!call) goto bad;
        json_array_append_new(calls, call);
    }
    *content_len = content_before(text, first);
    return calls;
bad:
    json_decref(args);
    json_decref(calls);
    return NULL;
}

/* Qwen3-Coder: <tool_call> blocks, each <function=NAME> with <parameter=KEY> values (the newline that opens and the
 * one that closes each the template's), whitespace between the parts; values typed as GLM's. */
static json_t *parse_qwen3_xml(const char *text, size_t len, const char *id_base, const json_t *tools,
                               size_t *content_len) {
    const char *first = memmem(text, len, OPEN, sizeof OPEN - 1);
    if (!first) return NULL;
    const char *p = first, *end = text + len;
    json_t *calls = json_array(), *args = NULL;
    while (p < end) {
        skip_space(&p, end);
        if (p == end) break;
        if (!take(&p, end, OPEN)) goto bad;
        skip_space(&p, end);
        if (!take(&p, end, "<function=")) goto bad;
        const char *name = p;
        while (p < end && *p != '>' && *p != '<' && *p != '\n') p++;
        const char *name_end = p;
        if (name_end == name || !take(&p, end, ">")) goto bad;
        args = json_object();
        for (;;) {
            skip_space(&p, end);
            if (take(&p, end, "</function>")) break;
            if (!take(&p, end, "<parameter=")) goto bad;
            const char *key = p;
            while (p < end && *p != '>' && *p != '<' && *p != '\n') p++;
            const size_t key_len = (size_t)(p - key);
            size_t value_len;
            bool found;
            if (!key_len || !take(&p, end, ">")) goto bad;
            const char *value = until(p, end, "</parameter>", &value_len, &found);
            if (!found) goto bad;
            p = value + value_len + strlen("</parameter>");
            if (value_len && *value == '\n') value++, value_len--;
            if (value_len && value[value_len - 1] == '\n') value_len--;
            if (!set_typed_arg(args, tools, name, (size_t)(name_end - name), key, key_len, value, value_len))
                goto bad;
        }
        skip_space(&p, end);
        if (!take(&p, end, CLOSE)) goto bad;
        json_t *call = call_of(name, (size_t)(name_end - name), args, id_base, json_array_size(calls));
        args = NULL; /* taken */
        if (!call) goto bad;
        json_array_append_new(calls, call);
    }
    *content_len = content_before(text, first);
    return calls;
bad:
    json_decref(args);
    json_decref(calls);
    return NULL;
}

toolcall_format toolcall_format_of(const chat_template *t) {
    switch (t->family) {
    case CHAT_LLAMA3: return TOOLCALL_LLAMA3;
    case CHAT_HARMONY: return TOOLCALL_HARMONY;
    case CHAT_GLM: return TOOLCALL_GLM;
    default: return t->qwen3_coder ? TOOLCALL_QWEN3_XML : TOOLCALL_HERMES;
    }
}

json_t *toolcall_parse(toolcall_format f, const char *text, size_t len, const char *id_base, const json_t *tools,
                       size_t *content_len) {
    *content_len = len;
    if (!len) return NULL; /* an empty output (text may then be NULL: memmem's arguments must not be) */
    switch (f) {
    case TOOLCALL_HERMES: return parse_hermes(text, len, id_base, content_len);
    case TOOLCALL_LLAMA3: return parse_llama3(text, len, id_base, content_len);
    case TOOLCALL_HARMONY: return parse_harmony(text, len, id_base, content_len);
    case TOOLCALL_GLM: return parse_glm(text, len, id_base, tools, content_len);
    case TOOLCALL_QWEN3_XML: return parse_qwen3_xml(text, len, id_base, tools, content_len);
    default: return NULL;
    }
}

/* c as GBNF writes it in a literal or a class: a newline escaped. */
static const char *gbnf_char(char c, char buf[3]) {
    if (c == '\n') return "\\n";
    buf[0] = c, buf[1] = 0;
    return buf;
}

void toolcall_gbnf_text_without(FILE *out, const char *name, const char *end) {
    /* The automaton of the texts without end: name-i has just read end's first i bytes (name: none). Each byte moves
     * it on — end's next byte one state further, end's first byte back to name-1 (it occurs nowhere else), any other
     * to name — except end's last byte at name-(n-1); every state may end the text. Right recursion only, so a
     * text's length never deepens a parse. */
    const size_t n = strlen(end);
    char b0[3], bi[3];
    const char *first = gbnf_char(end[0], b0);
    fprintf(out, "%s ::= [^%s] %s | \"%s\" %s-1 | \"\"\n", name, first, name, first, name);
    for (size_t i = 1; i < n; i++) {
        const char *next = gbnf_char(end[i], bi);
        fprintf(out, "%s-%zu ::= [^%s%s] %s | \"%s\" %s-1 | ", name, i, first, next, name, first, name);
        if (i + 1 < n) fprintf(out, "\"%s\" %s-%zu | ", next, name, i + 1);
        fputs("\"\"\n", out);
    }
}

/* s as the body of a GBNF literal (quotes and backslashes escaped) appended to out; false when out of memory. */
static bool gbnf_literal(FILE *out, const char *s) {
    for (; *s; s++)
        if (fprintf(out, *s == '"' || *s == '\\' ? "\\%c" : (unsigned char)*s < 0x20 ? "\\x%02x" : "%c",
                    (unsigned char)*s) < 0)
            return false;
    return true;
}

/* The JSON Schema schema (NULL: any object) compiled to GBNF rules named prefix + "root" ... into out (NULL: only
 * compiled, for its refusals). false with err. */
static bool schema_rules(FILE *out, const json_t *schema, const char *prefix, fkv_error *err) {
    char *text = schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{\"type\": \"object\"}");
    char *rules = text ? fkv_json_schema_gbnf(text, strlen(text), prefix, err) : NULL;
    if (!text) err_nomem(err, "out of memory for a tool-call grammar");
    free(text);
    if (!rules) return false;
    if (out) fprintf(out, "%s\n", rules);
    free(rules);
    return true;
}

/* How GLM and Qwen3-Coder write one argument: GBNF around its key and its value, and the value's end as text. */
typedef struct {
    const char *before_key, *between, *after; /* GBNF sequences */
    const char *value_end;                     /* where the reader ends a value */
} xml_pair;
static const xml_pair GLM_PAIR = {"\"<arg_key>\"", "\"</arg_key>\" \"\\n\"? \"<arg_value>\"",
                                  "\"</arg_value>\" \"\\n\"?", "</arg_value>"},
                      CODER_PAIR = {"\"<parameter=\"", "\">\\n\"", "\"\\n</parameter>\\n\"", "\n</parameter>"};

/* GLM's and Qwen3-Coder's arguments of tool i, pairs written as pair says: one per parameter in the order its schema
 * lists them (the required ones always), a string parameter's value as text — one of its enum's; within its minLength
 * and maxLength, characters other than "<" (no tag can begin inside it); else any text without the value's end — and
 * any other's as its JSON. A string's schema is still compiled, its rules unused, so that a keyword flatkv cannot
 * enforce is refused as for the other formats. *text: the unbounded text rule (t<i>-text) is used. */
static bool xml_arguments(FILE *out, size_t i, const json_t *params, const xml_pair *pair, bool *text, fkv_error *err) {
    const json_t *props = json_object_get(params, "properties"), *required = json_object_get(params, "required");
    const json_t *prop;
    const char *key;
    size_t k = 0;
    bool ok = true;
    fprintf(out, "t%zu-args ::=", i);
    json_object_foreach((json_t *)props, key, prop) {
        bool needed = false;
        for (size_t r = 0; r < json_array_size(required); r++)
            needed |= json_is_string(json_array_get(required, r)) && !strcmp(json_string_value(json_array_get(required, r)), key);
        fprintf(out, " t%zu-a%zu%s", i, k++, needed ? "" : "?");
    }
    fputs(k ? "\n" : " \"\"\n", out);
    k = 0;
    json_object_foreach((json_t *)props, key, prop) {
        const json_t *type = json_object_get(prop, "type"), *values = json_object_get(prop, "enum");
        fprintf(out, "t%zu-a%zu ::= %s \"", i, k, pair->before_key);
        ok &= gbnf_literal(out, key);
        fprintf(out, "\" %s t%zu-v%zu %s\n", pair->between, i, k, pair->after);
        if (json_is_string(type) && !strcmp(json_string_value(type), "string")) {
            if (!schema_rules(NULL, prop, "", err)) return false; /* its refusals; its bounds checked */
            fprintf(out, "t%zu-v%zu ::=", i, k);
            size_t v;
            const json_t *value;
            bool listed = false;
            json_array_foreach(values, v, value) {
                if (!json_is_string(value)) continue;
                fprintf(out, "%s\"", listed ? " |" : "");
                ok &= gbnf_literal(out, json_string_value(value));
                fputs("\"", out);
                listed = true;
            }
            const json_t *min = json_object_get(prop, "minLength"), *max = json_object_get(prop, "maxLength");
            if (!listed && json_is_integer(max))
                fprintf(out, " [^<]{%lld,%lld}", json_is_integer(min) ? (long long)json_integer_value(min) : 0LL,
                        (long long)json_integer_value(max));
            else if (!listed && json_is_integer(min))
                fprintf(out, " [^<]{%lld,}", (long long)json_integer_value(min));
            else if (!listed)
                fprintf(out, " t%zu-text", i), *text = true;
            fputs("\n", out);
        } else {
            char prefix[48];
            snprintf(prefix, sizeof prefix, "t%zu-p%zu-", i, k);
            fprintf(out, "t%zu-v%zu ::= %sroot\n", i, k, prefix);
            if (!schema_rules(out, prop, prefix, err)) return false;
        }
        k++;
    }
    return ok;
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
        char prefix[32];
        snprintf(prefix, sizeof prefix, "t%zu-", i);
        if (f == TOOLCALL_GLM || f == TOOLCALL_QWEN3_XML) {
            const bool glm = f == TOOLCALL_GLM;
            bool text = false;
            fprintf(out, "t%zu-call ::= \"%s", i, glm ? "<tool_call>" : "<tool_call>\\n<function=");
            ok &= gbnf_literal(out, name);
            fprintf(out, glm ? "\" \"\\n\"? t%zu-args \"</tool_call>\"\n" : ">\\n\" t%zu-args \"</function>\\n</tool_call>\"\n", i);
            if (!(ok &= xml_arguments(out, i, params, glm ? &GLM_PAIR : &CODER_PAIR, &text, err))) break;
            if (text) {
                char rule[32];
                snprintf(rule, sizeof rule, "t%zu-text", i);
                toolcall_gbnf_text_without(out, rule, glm ? GLM_PAIR.value_end : CODER_PAIR.value_end);
            }
            continue;
        }
        if (f == TOOLCALL_HARMONY) { /* the recipient in the role's header (the template's) or the channel's */
            fprintf(out, "t%zu-call ::= ( \" to=functions.", i);
            ok &= gbnf_literal(out, name);
            fputs("<|channel|>commentary\" | \"<|channel|>commentary to=functions.", out);
            ok &= gbnf_literal(out, name);
            fprintf(out, "\" ) ( \" \" \"<|constrain|>\"? \"json\" )? \"<|message|>\" t%zu-root\n", i);
        } else {
            fprintf(out, "t%zu-call ::= \"{\\\"name\\\": \\\"", i);
            ok &= gbnf_literal(out, name);
            fprintf(out, "\\\", \\\"%s\\\": \" t%zu-root \"}\"\n", args_key, i);
        }
        if (!(ok &= schema_rules(out, params && json_is_object(params) ? params : NULL, prefix, err))) break;
    }
    if (ok && f == TOOLCALL_HERMES)
        fprintf(out, "block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\ncalls ::= block%s\n",
                parallel ? " (\"\\n\" block){0,7}" : "");
    else if (ok && (f == TOOLCALL_GLM || f == TOOLCALL_QWEN3_XML))
        fprintf(out, "calls ::= call%s\n", parallel ? " (\"\\n\"? call){0,7}" : "");
    else if (ok)
        fputs("calls ::= call\n", out);
    if (fclose(out) || !ok || !any) {
        if (ok && !any) err_input(err, "no tool is named '%s'", only ? only : "");
        free(text);
        return NULL;
    }
    return text;
}
