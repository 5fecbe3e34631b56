/* chat.c — chat templates written out in C (the contract and each family's rendering: chat.h). */
#include "chat/chat.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/model.h"
#include "text/tok.h"

static const char chat_qwen_default_system[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
static const char chat_llama3_date[] = "26 Jul 2024";
/* SmolLM3's template writes strftime_now("%d %B %Y"): a fixed date keeps the prompt's start stable (see chat.h). */
static const char chat_smollm3_date[] = "08 July 2025";
/* gpt-oss's template writes strftime_now("%Y-%m-%d"): fixed at the release, for the same reason. */
static const char chat_harmony_date[] = "2025-08-05";

/* The templates --chat-template names (chat_template_by_name): one row each. */
static const struct {
    const char *name;
    chat_template t;
} chat_presets[] = {
    {"chatml", {.family = CHAT_CHATML}},
    {"qwen3", {.family = CHAT_CHATML, .qwen3_thinking = true}},
    {"qwen3-coder", {.family = CHAT_CHATML, .qwen3_coder = true}},
    {"qwen3.5", {.family = CHAT_CHATML, .qwen3_thinking = true, .qwen3_coder = true}},
    {"llama2", {.family = CHAT_LLAMA2}},
    {"llama3", {.family = CHAT_LLAMA3, .date_string = chat_llama3_date}},
    {"mistral", {.family = CHAT_MISTRAL, .mistral = CHAT_MISTRAL_V3}},
    {"phi3", {.family = CHAT_PHI3, .phi = CHAT_PHI_3}},
    {"phi4-mini", {.family = CHAT_PHI3, .phi = CHAT_PHI_4_MINI}},
    {"gemma", {.family = CHAT_GEMMA}},
    {"gemma3", {.family = CHAT_GEMMA, .fold_system = true}},
    {"zephyr", {.family = CHAT_ZEPHYR}},
    {"deepseek", {.family = CHAT_DEEPSEEK}},
    {"smollm3", {.family = CHAT_SMOLLM3, .date_string = chat_smollm3_date}},
    {"gpt-oss", {.family = CHAT_HARMONY, .date_string = chat_harmony_date}},
    {"glm4", {.family = CHAT_GLM, .glm = CHAT_GLM_46}},
    {"glm4.7", {.family = CHAT_GLM, .glm = CHAT_GLM_47}},
    {"plain", {.family = CHAT_PLAIN}},
};

/* --- a growing string --- */

/* The rendering, and the spans of it that came from the conversation (contents, tool calls, tool definitions)
 * rather than from the template: those are tokenized with control-token texts kept as text. */
typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
    tok_span *spans;
    size_t n_spans, spans_cap;
} chat_buf;

static void chat_put_n(chat_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = 2 * b->cap + n + 64;
        char *grown = realloc(b->s, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void chat_put(chat_buf *b, const char *s) { chat_put_n(b, s, strlen(s)); }

static bool chat_is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Record span as plain (from the conversation), joined to the last one when it starts where that ends. */
static void chat_span_add(chat_buf *b, tok_span span) {
    if (b->oom || span.len == 0) return;
    if (b->n_spans && b->spans[b->n_spans - 1].off + b->spans[b->n_spans - 1].len == span.off) {
        b->spans[b->n_spans - 1].len += span.len;
        return;
    }
    if (b->n_spans == b->spans_cap) {
        size_t cap = b->spans_cap ? 2 * b->spans_cap : 16;
        tok_span *grown = realloc(b->spans, cap * sizeof *grown);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->spans = grown;
        b->spans_cap = cap;
    }
    b->spans[b->n_spans++] = span;
}

/* Text from the conversation: appended, and its bytes recorded as a plain span. */
static void chat_text_n(chat_buf *b, const char *s, size_t n) {
    size_t start = b->len;
    chat_put_n(b, s, n);
    chat_span_add(b, (tok_span){start, n});
}

static void chat_text(chat_buf *b, const char *s) { chat_text_n(b, s, strlen(s)); }

/* A ChatML turn: "<|im_start|>ROLE\nCONTENT<|im_end|>\n", the content as message text. */
static void chat_chatml_turn(chat_buf *b, const chat_message *m) {
    chat_put(b, "<|im_start|>");
    chat_put(b, m->role);
    chat_put(b, "\n");
    chat_text(b, m->content);
    chat_put(b, "<|im_end|>\n");
}

/* [*s, *s + *n) without ASCII whitespace at either end (Python's str.strip()). */
static void chat_strip(const char **s, size_t *n) {
    while (*n > 0 && chat_is_space((*s)[*n - 1])) --*n;
    while (*n > 0 && chat_is_space(**s)) ++*s, --*n;
}

/* s[0..n) stripped, as conversation text. */
static void chat_text_stripped_n(chat_buf *b, const char *s, size_t n) {
    chat_strip(&s, &n);
    chat_text_n(b, s, n);
}

static void chat_text_stripped(chat_buf *b, const char *s) { chat_text_stripped_n(b, s, strlen(s)); }

/* s without the newlines it begins with (Python's lstrip('\n')). */
static const char *chat_skip_newlines(const char *s) {
    while (*s == '\n') s++;
    return s;
}

static bool chat_role_is(const chat_message *m, const char *role) { return !strcmp(m->role, role); }

/* --- the families: each a render function of one signature and a detect function, then a row of the table --- */

/* What a family's render function writes from: chat_render's arguments, the BOS/EOS texts decided. */
typedef struct {
    const chat_template *t;
    const chat_message *msgs;
    size_t n;
    const json_t *tools;        /* a non-empty array, only for a family and template with a tool form; else NULL */
    bool add_generation_prompt;
    const char *bos, *eos;      /* the texts written for BOS/EOS ("" for none) */
} chat_input;

/* A value as Python's json.dumps writes it (", " and ": " separators; indent > 0: one item a line). */
static void chat_put_json(chat_buf *b, const json_t *v, int indent) {
    char *text = json_dumps(v, JSON_ENCODE_ANY | (indent ? JSON_INDENT(indent) : 0));
    if (!text) {
        b->oom = true;
        return;
    }
    chat_text(b, text);
    free(text);
}

/* A tool call's arguments as the templates' `tojson` writes them: the parsed object re-serialized, or the
 * text as a JSON string when it is not JSON. */
static void chat_put_arguments(chat_buf *b, const char *arguments) {
    json_t *parsed = json_loads(arguments ? arguments : "", JSON_DECODE_ANY, NULL);
    json_t *v = parsed ? parsed : json_string(arguments ? arguments : "");
    chat_put_json(b, v, 0);
    json_decref(v);
}

/* Jinja's truth of a JSON value: absent, null, false, 0, "", [] and {} are false. */
static bool chat_json_truthy(const json_t *v) {
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT: return json_object_size(v) > 0;
    case JSON_ARRAY: return json_array_size(v) > 0;
    case JSON_STRING: return json_string_length(v) > 0;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0.0;
    case JSON_TRUE: return true;
    default: return false;
    }
}

static bool chat_json_is(const json_t *v, const char *s) { return json_is_string(v) && !strcmp(json_string_value(v), s); }

/* Python's str() of a value, as Jinja's join and `+` write it: a string as it is, an integer, True, False, None;
 * other values as JSON (Python would write its own repr; no template here gives them). Conversation text. */
static void chat_put_py_str(chat_buf *b, const json_t *v) {
    char num[32];
    if (json_is_string(v)) chat_text_n(b, json_string_value(v), json_string_length(v));
    else if (json_is_integer(v)) snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v)), chat_text(b, num);
    else if (json_is_boolean(v)) chat_text(b, json_is_true(v) ? "True" : "False");
    else if (!v || json_is_null(v)) chat_text(b, "None");
    else chat_put_json(b, v, 0);
}

/* Whether name is one of the strings of required (a JSON array; anything else holds none). */
static bool chat_json_lists(const json_t *required, const char *name) {
    for (size_t i = 0; i < json_array_size(required); i++)
        if (chat_json_is(json_array_get(required, i), name)) return true;
    return false;
}

/* Characters (UTF-8 code points) of s, as Jinja's length counts them. */
static size_t chat_utf8_chars(const char *s, size_t n) {
    size_t chars = 0;
    for (size_t i = 0; i < n; i++) chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    return chars;
}

static bool chat_is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!chat_is_space(s[i])) return false;
    return true;
}

/* Qwen3: the index of the last user message that is not a wrapped tool response (the template's
 * last_query_index); n - 1 when there is none. */
static size_t chat_qwen3_last_query(const chat_message *msgs, size_t n) {
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    for (size_t i = n; i-- > 0;) {
        const char *c = msgs[i].content;
        size_t len = strlen(c);
        bool wrapped = !strncmp(c, open, strlen(open)) && len >= strlen(close) &&
                       !strcmp(c + len - strlen(close), close);
        if (chat_role_is(&msgs[i], "user") && !wrapped) return i;
    }
    return n ? n - 1 : 0;
}

/* Qwen3's split of an assistant content at "</think>": *visible is what follows the last one (leading newlines
 * dropped); the reasoning is what precedes the first one, after the last "<think>" before it, without outer
 * newlines — returned as [*r, *r + *r_len). Without "</think>": all visible, no reasoning. */
static void chat_qwen3_split(const char *content, const char **visible, const char **r, size_t *r_len) {
    static const char think[] = "<think>", think_end[] = "</think>";
    const char *first_end = strstr(content, think_end), *end;
    *visible = content;
    *r = content;
    *r_len = 0;
    if (!first_end) return;
    const char *last_end = first_end;
    while ((end = strstr(last_end + 1, think_end))) last_end = end;
    *visible = chat_skip_newlines(last_end + strlen(think_end));
    const char *start = content, *open;
    while ((open = strstr(start, think)) && open < first_end) start = open + strlen(think);
    if (start > first_end) start = first_end; /* a "<think>" that overlaps nothing before the end */
    while (start < first_end && *start == '\n') start++;
    const char *stop = first_end;
    while (stop > start && stop[-1] == '\n') stop--;
    *r = start;
    *r_len = (size_t)(stop - start);
}

/* Python's str() of a value as Qwen3-Coder's `| string` writes a schema's: chat_put_py_str, and a list of plain strings
 * as Python writes one (['string', 'number']). */
static void chat_put_py_repr(chat_buf *b, const json_t *v) {
    bool plain = json_is_array(v);
    for (size_t i = 0; plain && i < json_array_size(v); i++) {
        const char *s = json_string_value(json_array_get(v, i));
        plain = s && !strpbrk(s, "'\"\\\n\r\t");
    }
    if (!plain) {
        chat_put_py_str(b, v);
        return;
    }
    chat_text(b, "[");
    for (size_t i = 0; i < json_array_size(v); i++) {
        chat_text(b, i ? ", '" : "'");
        chat_text(b, json_string_value(json_array_get(v, i)));
        chat_text(b, "'");
    }
    chat_text(b, "]");
}

/* Qwen3-Coder's render_extra_keys: every key of obj but the handled ones, as "\n<key>value</key>" — a mapping or a
 * list as JSON, anything else as Python's str(). */
static void chat_coder_extra_keys(chat_buf *b, const json_t *obj, const char *const *handled, size_t n_handled) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        size_t k = 0;
        while (k < n_handled && strcmp(key, handled[k])) k++;
        if (k < n_handled) continue;
        chat_text(b, "\n<");
        chat_text(b, key);
        chat_text(b, ">");
        if (json_is_object(v) || json_is_array(v)) chat_put_json(b, v, 0);
        else chat_put_py_str(b, v);
        chat_text(b, "</");
        chat_text(b, key);
        chat_text(b, ">");
    }
}

/* Qwen3-Coder's tool block: the tools as XML (see chat.h). */
static void chat_coder_tools(chat_buf *b, const json_t *tools) {
    static const char *const param_keys[] = {"name", "type", "description"}, *const params_keys[] = {"type", "properties"},
                             *const tool_keys[] = {"type", "name", "description", "parameters"};
    chat_put(b, "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *tool = json_array_get(tools, i);
        if (json_object_get(tool, "function")) tool = json_object_get(tool, "function");
        const json_t *description = json_object_get(tool, "description"), *params = json_object_get(tool, "parameters");
        const json_t *props = json_object_get(params, "properties"), *spec;
        chat_put(b, "\n<function>\n<name>");
        chat_put_py_str(b, json_object_get(tool, "name"));
        chat_put(b, "</name>");
        if (description) {
            chat_put(b, "\n<description>");
            if (json_is_string(description)) chat_text_stripped(b, json_string_value(description));
            else chat_put_py_str(b, description);
            chat_put(b, "</description>");
        }
        chat_put(b, "\n<parameters>");
        const char *name;
        if (json_is_object(props))
            json_object_foreach((json_t *)props, name, spec) {
                chat_put(b, "\n<parameter>\n<name>");
                chat_text(b, name);
                chat_put(b, "</name>");
                if (json_object_get(spec, "type")) {
                    chat_put(b, "\n<type>");
                    chat_put_py_repr(b, json_object_get(spec, "type"));
                    chat_put(b, "</type>");
                }
                const json_t *pd = json_object_get(spec, "description");
                if (pd) {
                    chat_put(b, "\n<description>");
                    if (json_is_string(pd)) chat_text_stripped(b, json_string_value(pd));
                    else chat_put_py_str(b, pd);
                    chat_put(b, "</description>");
                }
                chat_coder_extra_keys(b, spec, param_keys, 3);
                chat_put(b, "\n</parameter>");
            }
        chat_coder_extra_keys(b, params, params_keys, 2);
        chat_put(b, "\n</parameters>");
        chat_coder_extra_keys(b, tool, tool_keys, 4);
        chat_put(b, "\n</function>");
    }
    chat_put(b, "\n</tools>\n\nIf you choose to call a tool ONLY reply in the following format with NO suffix:\n\n"
                "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
                "<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
                "Reminder:\n- Function calls MUST follow the specified format: the tool calling block MUST begin with an "
                "opening <tool_call> tag and end with a closing </tool_call> tag.\n- Required parameters MUST be "
                "specified\n- You may provide optional reasoning for your function call in natural language BEFORE the "
                "function call, but NOT after\n- If there is no function call available, answer the question like "
                "normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>");
}

/* Message i's call's arguments as the templates that iterate them (GLM's, Qwen3-Coder's, Qwen3.5's) take them: the
 * parsed JSON object (an empty one for none given); NULL with err naming the template for anything else. */
static json_t *chat_call_args(const chat_tool_call *call, size_t i, const char *template_name, fkv_error *err) {
    json_t *args = call->arguments && *call->arguments ? json_loads(call->arguments, 0, NULL) : json_object();
    if (json_is_object(args)) return args;
    json_decref(args);
    err_input(err, "chat_render: message %zu: %s's template needs each call's arguments to be a JSON object", i,
              template_name);
    return NULL;
}

/* A call's arguments as key and value markup (GLM's, Qwen's XML): per key, key_open + key + key_close + the value +
 * value_close; a string as it is, a mapping or a list as json.dumps, another value as Python's str() (py) or as
 * json.dumps. */
static void chat_put_args(chat_buf *b, const json_t *args, const char *key_open, const char *key_close,
                          const char *value_close, bool py) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)args, key, v) {
        chat_put(b, key_open);
        chat_text(b, key);
        chat_put(b, key_close);
        if (json_is_string(v)) chat_text_n(b, json_string_value(v), json_string_length(v));
        else if (py && !json_is_object(v) && !json_is_array(v)) chat_put_py_str(b, v);
        else chat_put_json(b, v, 0);
        chat_put(b, value_close);
    }
}

/* Message i's call as XML (Qwen3-Coder's and Qwen3.5's): open (what the template writes before "<function=") +
 * "<function=" + name + ">\n" + per argument "<parameter=" + key + ">\n" + value + "\n</parameter>\n" (values as
 * chat_put_args' py) + "</function>\n</tool_call>". -1 with err (chat_call_args). */
static int chat_put_xml_call(chat_buf *b, const char *open, const chat_tool_call *call, size_t i, fkv_error *err) {
    json_t *args = chat_call_args(call, i, "Qwen", err);
    if (!args) return -1;
    chat_put(b, open);
    chat_put(b, "<function=");
    chat_text(b, call->name);
    chat_put(b, ">\n");
    chat_put_args(b, args, "<parameter=", ">\n", "\n</parameter>\n", true);
    chat_put(b, "</function>\n</tool_call>");
    json_decref(args);
    return 0;
}

/* Qwen3-Coder's template (see chat.h). */
static int chat_render_qwen3_coder(const chat_input *in, chat_buf *b, fkv_error *err) {
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    const bool lead_system = n > 0 && chat_role_is(&msgs[0], "system");
    if (lead_system || in->tools) {
        chat_put(b, "<|im_start|>system\n");
        if (lead_system) chat_text(b, msgs[0].content);
        else chat_put(b, "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.");
        if (in->tools) chat_coder_tools(b, in->tools);
        chat_put(b, "<|im_end|>\n");
    }
    for (size_t i = lead_system; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "assistant") && m->n_tool_calls) {
            chat_put(b, "<|im_start|>assistant");
            if (!chat_is_blank(m->content, strlen(m->content))) {
                chat_put(b, "\n");
                chat_text_stripped(b, m->content);
                chat_put(b, "\n");
            }
            for (size_t c = 0; c < m->n_tool_calls; c++)
                if (chat_put_xml_call(b, "\n<tool_call>\n", &m->tool_calls[c], i, err)) return -1;
            chat_put(b, "<|im_end|>\n");
        } else if (chat_role_is(m, "tool")) {
            /* loop.previtem: the loop's previous message (none for its first, which opens no turn) */
            if (i > lead_system && !chat_role_is(&msgs[i - 1], "tool")) chat_put(b, "<|im_start|>user\n");
            chat_put(b, "<tool_response>\n");
            chat_text(b, m->content);
            chat_put(b, "\n</tool_response>\n");
            if (i + 1 == n || !chat_role_is(&msgs[i + 1], "tool")) chat_put(b, "<|im_end|>\n");
        } else {
            chat_chatml_turn(b, m);
        }
    }
    if (in->add_generation_prompt) chat_put(b, "<|im_start|>assistant\n");
    return 0;
}

/* Qwen3.5's template (see chat.h): Qwen3's thinking, Qwen3-Coder's calls, its own tool block, contents stripped. */
static int chat_render_qwen35(const chat_input *in, chat_buf *b, fkv_error *err) {
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    if (n == 0) return err_input(err, "chat_render: Qwen3.5's template needs a message");
    const bool lead_system = chat_role_is(&msgs[0], "system");
    const char *sys = lead_system ? msgs[0].content : "";
    size_t sys_len = strlen(sys);
    chat_strip(&sys, &sys_len);
    if (in->tools) {
        chat_put(b, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
        for (size_t i = 0; i < json_array_size(in->tools); i++) {
            chat_put(b, "\n");
            chat_put_json(b, json_array_get(in->tools, i), 0);
        }
        chat_put(b, "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:"
                    "\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
                    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat "
                    "can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- "
                    "Function calls MUST follow the specified format: an inner <function=...></function> block must be "
                    "nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You "
                    "may provide optional reasoning for your function call in natural language BEFORE the function "
                    "call, but NOT after\n- If there is no function call available, answer the question like normal "
                    "with your current knowledge and do not tell the user about function calls\n</IMPORTANT>");
        if (sys_len) chat_put(b, "\n\n");
        chat_text_n(b, sys, sys_len);
        chat_put(b, "<|im_end|>\n");
    } else if (lead_system) {
        chat_put(b, "<|im_start|>system\n");
        chat_text_n(b, sys, sys_len);
        chat_put(b, "<|im_end|>\n");
    }
    size_t last_query = n; /* the last user message that is not a wrapped tool response, on stripped contents */
    for (size_t i = n; i-- > 0 && last_query == n;) {
        const char *c = msgs[i].content;
        size_t len = strlen(c);
        chat_strip(&c, &len);
        const bool wrapped = len >= 31 && !strncmp(c, "<tool_response>", 15) && !memcmp(c + len - 16, "</tool_response>", 16);
        if (chat_role_is(&msgs[i], "user") && !wrapped) last_query = i;
    }
    if (last_query == n) return err_input(err, "chat_render: Qwen3.5's template needs a user message (no user query)");
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        char *content = strdup(m->content); /* stripped, NUL-terminated for the reasoning split */
        if (!content) return err_nomem(err, "chat_render: out of memory");
        const char *c = content;
        size_t len = strlen(c);
        chat_strip(&c, &len);
        memmove(content, c, len);
        content[len] = 0;
        int rc = 0;
        if (chat_role_is(m, "system")) {
            if (i > 0) rc = err_input(err, "chat_render: message %zu: Qwen3.5's template takes a system message only "
                                           "at the beginning", i);
        } else if (chat_role_is(m, "user")) {
            chat_put(b, "<|im_start|>user\n");
            chat_text(b, content);
            chat_put(b, "<|im_end|>\n");
        } else if (chat_role_is(m, "assistant")) {
            const char *visible = content, *reasoning = m->reasoning ? m->reasoning : "";
            size_t r_len = strlen(reasoning);
            if (!m->reasoning) chat_qwen3_split(content, &visible, &reasoning, &r_len);
            chat_strip(&reasoning, &r_len);
            chat_put(b, "<|im_start|>assistant\n");
            if (i > last_query) {
                chat_put(b, "<think>\n");
                chat_text_n(b, reasoning, r_len);
                chat_put(b, "\n</think>\n\n");
            }
            chat_text(b, visible);
            const char *open = chat_is_blank(visible, strlen(visible)) ? "<tool_call>\n" : "\n\n<tool_call>\n";
            for (size_t k = 0; !rc && k < m->n_tool_calls; k++, open = "\n<tool_call>\n")
                rc = chat_put_xml_call(b, open, &m->tool_calls[k], i, err);
            chat_put(b, "<|im_end|>\n");
        } else if (chat_role_is(m, "tool")) {
            /* loop.previtem: the loop's previous message (none for its first, which opens no turn) */
            if (i > 0 && !chat_role_is(&msgs[i - 1], "tool")) chat_put(b, "<|im_start|>user");
            chat_put(b, "\n<tool_response>\n");
            chat_text(b, content);
            chat_put(b, "\n</tool_response>");
            if (i + 1 == n || !chat_role_is(&msgs[i + 1], "tool")) chat_put(b, "<|im_end|>\n");
        } else {
            rc = err_input(err, "chat_render: message %zu: Qwen3.5's template has no role '%s'", i, m->role);
        }
        free(content);
        if (rc) return -1;
    }
    if (in->add_generation_prompt)
        chat_put(b, in->t->no_thinking ? "<|im_start|>assistant\n<think>\n\n</think>\n\n" : "<|im_start|>assistant\n<think>\n");
    return 0;
}

static bool chat_detect_chatml(const char *src, chat_template *t) {
    if (strstr(src, chat_qwen_default_system)) t->default_system = chat_qwen_default_system;
    t->qwen3_thinking = strstr(src, "</think>") && strstr(src, "last_query_index");
    t->qwen3_coder = strstr(src, "<function=") != NULL;
    return true;
}

static int chat_render_chatml(const chat_input *in, chat_buf *b, fkv_error *err) {
    if (in->t->qwen3_coder) return (in->t->qwen3_thinking ? chat_render_qwen35 : chat_render_qwen3_coder)(in, b, err);
    const chat_template *t = in->t;
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    const json_t *tools = in->tools;
    const bool lead_system = n > 0 && chat_role_is(&msgs[0], "system");
    if (tools) { /* Qwen2.5's and Qwen3's "# Tools" system block */
        chat_put(b, "<|im_start|>system\n");
        if (!t->qwen3_thinking || lead_system) {
            chat_text(b, lead_system ? msgs[0].content : t->default_system ? t->default_system : "");
            chat_put(b, "\n\n");
        }
        chat_put(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
                    "provided with function signatures within <tools></tools> XML tags:\n<tools>");
        for (size_t i = 0; i < json_array_size(tools); i++) {
            chat_put(b, "\n");
            chat_put_json(b, json_array_get(tools, i), 0);
        }
        chat_put(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
    } else if (lead_system) {
        chat_put(b, "<|im_start|>system\n");
        chat_text(b, msgs[0].content);
        chat_put(b, "<|im_end|>\n");
    } else if (t->default_system) {
        chat_put(b, "<|im_start|>system\n");
        chat_put(b, t->default_system);
        chat_put(b, "<|im_end|>\n");
    }
    const size_t last_query = t->qwen3_thinking ? chat_qwen3_last_query(msgs, n) : n;
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "tool")) {
            if (i == 0 || !chat_role_is(&msgs[i - 1], "tool")) chat_put(b, "<|im_start|>user");
            chat_put(b, "\n<tool_response>\n");
            chat_text(b, m->content);
            chat_put(b, "\n</tool_response>");
            if (i + 1 == n || !chat_role_is(&msgs[i + 1], "tool")) chat_put(b, "<|im_end|>\n");
        } else if (chat_role_is(m, "assistant")) {
            /* Qwen2.5 writes "\n" + content only when there is content, then "\n<tool_call>..." per call; Qwen3
             * writes "\n" + content, then "\n" before a call unless it is the first after empty content. Both
             * give the same bytes. */
            const char *visible = m->content, *reasoning = "";
            size_t r_len = 0;
            if (t->qwen3_thinking && m->reasoning) reasoning = m->reasoning, r_len = strlen(reasoning);
            else if (t->qwen3_thinking) chat_qwen3_split(m->content, &visible, &reasoning, &r_len);
            chat_put(b, "<|im_start|>assistant\n");
            if (t->qwen3_thinking && i > last_query && (i + 1 == n || r_len > 0)) {
                while (r_len > 0 && reasoning[r_len - 1] == '\n') r_len--; /* strip('\n'): a split's has none */
                while (r_len > 0 && *reasoning == '\n') reasoning++, r_len--;
                chat_put(b, "<think>\n");
                chat_text_n(b, reasoning, r_len);
                chat_put(b, "\n</think>\n\n");
                chat_text(b, chat_skip_newlines(visible));
            } else {
                chat_text(b, visible);
            }
            for (size_t c = 0; c < m->n_tool_calls; c++) {
                if (c > 0 || *visible) chat_put(b, "\n");
                chat_put(b, "<tool_call>\n{\"name\": \"");
                chat_text(b, m->tool_calls[c].name);
                chat_put(b, "\", \"arguments\": ");
                chat_put_arguments(b, m->tool_calls[c].arguments);
                chat_put(b, "}\n</tool_call>");
            }
            chat_put(b, "<|im_end|>\n");
        } else if (i > 0 || !chat_role_is(m, "system")) { /* a leading system message went first */
            chat_chatml_turn(b, m);
        }
    }
    if (in->add_generation_prompt) chat_put(b, "<|im_start|>assistant\n");
    if (in->add_generation_prompt && t->qwen3_thinking && t->no_thinking) chat_put(b, "<think>\n\n</think>\n\n");
    return 0;
}

static bool chat_detect_smollm3(const char *src, chat_template *t) {
    if (!strstr(src, "Reasoning Mode: ")) return false;
    if (strstr(src, "Today Date: ")) t->date_string = chat_smollm3_date;
    return true;
}

/* SmolLM3's template (HuggingFaceTB/SmolLM3-3B; see chat.h). */
static int chat_render_smollm3(const chat_input *in, chat_buf *b, fkv_error *err) {
    (void)err;
    static const char think_long[] =
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
        "thoroughly exploring questions through a systematic thinking process before providing the final precise "
        "and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, "
        "exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking "
        "process. Please structure your response into two main sections: Thought and Solution using the specified "
        "format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning "
        "process in steps. Each step should include detailed considerations such as analysing questions, "
        "summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, "
        "refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, "
        "explorations, and reflections from the Thought section, systematically present the final solution that "
        "you deem correct. The Solution section should be logical, accurate, and concise and detail necessary "
        "steps needed to reach the conclusion.\n\n";
    static const char no_think_short[] = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n";
    static const char empty_think[] = "<think>\n\n</think>\n";
    const chat_template *t = in->t;
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    bool think = !t->no_thinking;
    const char *system = n > 0 && chat_role_is(&msgs[0], "system") ? msgs[0].content : NULL;
    chat_buf custom = {0}; /* system.replace("/no_think", "").replace("/think", "").rstrip() */
    chat_put(&custom, "");
    if (system) {
        if (strstr(system, "/no_think")) think = false;
        else if (strstr(system, "/think")) think = true;
        static const char *const flags[] = {"/no_think", "/think"};
        chat_put(&custom, system);
        for (size_t f = 0; f < 2 && !custom.oom; f++) {
            char *at, *from = custom.s;
            size_t fl = strlen(flags[f]);
            while ((at = strstr(from, flags[f]))) {
                memmove(at, at + fl, strlen(at + fl) + 1);
                custom.len -= fl;
                from = at;
            }
        }
        while (custom.len > 0 && chat_is_space(custom.s[custom.len - 1])) custom.s[--custom.len] = 0;
    }
    if (custom.oom) b->oom = true;
    chat_put(b, "<|im_start|>system\n");
    const char *override = t->date_string && !custom.oom ? strstr(custom.s, "/system_override") : NULL;
    if (override) { /* the original template only: the system text alone */
        size_t fl = strlen("/system_override");
        char *at;
        while ((at = strstr(custom.s, "/system_override"))) memmove(at, at + fl, strlen(at + fl) + 1);
        custom.len = strlen(custom.s);
        while (custom.len > 0 && chat_is_space(custom.s[custom.len - 1])) custom.s[--custom.len] = 0;
        chat_text(b, custom.s);
    } else {
        chat_put(b, "## Metadata\n\nKnowledge Cutoff Date: June 2025\n");
        if (t->date_string) {
            chat_put(b, "Today Date: ");
            chat_put(b, t->date_string);
            chat_put(b, "\n");
        }
        chat_put(b, think ? "Reasoning Mode: /think\n\n" : "Reasoning Mode: /no_think\n\n");
        chat_put(b, "## Custom Instructions\n\n");
        if (custom.len) {
            chat_text(b, custom.s);
            chat_put(b, "\n\n");
        } else {
            chat_put(b, think ? think_long : no_think_short);
        }
    }
    chat_put(b, "<|im_end|>\n");
    free(custom.s);
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "system")) continue; /* only a leading one is written, in the header */
        if (chat_role_is(m, "assistant")) {
            chat_put(b, "<|im_start|>assistant\n");
            if (!think) chat_put(b, empty_think);
            chat_text(b, chat_skip_newlines(m->content));
        } else {
            chat_put(b, "<|im_start|>user\n"); /* user, and tool results as a user turn */
            chat_text(b, m->content);
        }
        chat_put(b, "<|im_end|>\n");
    }
    if (in->add_generation_prompt) {
        chat_put(b, "<|im_start|>assistant\n");
        if (!think) chat_put(b, empty_think);
    }
    return 0;
}

static bool chat_detect_llama2(const char *src, chat_template *t) {
    (void)t;
    return strstr(src, "<<SYS>>") != NULL;
}

static int chat_render_llama2(const chat_input *in, chat_buf *b, fkv_error *err) {
    const chat_message *msgs = in->msgs;
    size_t n = in->n;
    const char *bos = in->bos, *eos = in->eos;
    const char *system = NULL;
    if (n > 0 && chat_role_is(&msgs[0], "system")) {
        system = msgs[0].content;
        msgs++, n--;
    }
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        bool user = chat_role_is(m, "user");
        if (user != (i % 2 == 0))
            return err_input(err, "chat_render: message %zu is '%s' but the Llama-2 template needs roles to alternate "
                                "user/assistant starting with user",
                           i + (system != NULL), m->role);
        if (user) {
            chat_put(b, bos);
            chat_put(b, "[INST] ");
            if (i == 0 && system) {
                /* The template strips the concatenation: leading space of the system text, trailing space of
                 * the user text. */
                size_t start = b->len;
                chat_put(b, "<<SYS>>\n");
                chat_put(b, system); /* put, not text: the stripped join below is the span */
                chat_put(b, "\n<</SYS>>\n\n");
                chat_put(b, m->content);
                if (!b->oom) {
                    char *joined = strdup(b->s + start);
                    if (!joined) {
                        b->oom = true;
                        break;
                    }
                    b->len = start;
                    chat_text_stripped(b, joined);
                    free(joined);
                }
            } else {
                chat_text_stripped(b, m->content);
            }
            chat_put(b, " [/INST]");
        } else if (chat_role_is(m, "assistant")) {
            chat_put(b, " ");
            chat_text_stripped(b, m->content);
            chat_put(b, " ");
            chat_put(b, eos);
        }
    }
    return 0;
}

static int chat_render_plain(const chat_input *in, chat_buf *b, fkv_error *err) {
    (void)err;
    for (size_t i = 0; i < in->n; i++) {
        const chat_message *m = &in->msgs[i];
        if (chat_role_is(m, "system")) {
            chat_text(b, m->content);
            chat_put(b, "\n\n");
        } else {
            chat_put(b, chat_role_is(m, "user") ? "User: " : chat_role_is(m, "tool") ? "Tool: " : "Assistant:");
            chat_text(b, m->content);
            chat_put(b, "\n");
        }
    }
    if (in->add_generation_prompt) chat_put(b, "Assistant:");
    return 0;
}

static void chat_put_header(chat_buf *b, const char *role) {
    chat_put(b, "<|start_header_id|>");
    chat_put(b, role);
    chat_put(b, "<|end_header_id|>\n\n");
}

static bool chat_detect_llama3(const char *src, chat_template *t) {
    if (strstr(src, "Today Date: ")) t->date_string = chat_llama3_date;
    return true;
}

static int chat_render_llama3(const chat_input *in, chat_buf *b, fkv_error *err) {
    const chat_template *t = in->t;
    const chat_message *msgs = in->msgs;
    size_t n = in->n;
    const json_t *tools = in->tools;
    const char *bos = in->bos;
    if (t->date_string) {
        chat_put(b, bos);
        chat_put_header(b, "system");
        if (tools) chat_put(b, "Environment: ipython\n");
        chat_put(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
        chat_put(b, t->date_string);
        chat_put(b, "\n\n");
        if (n > 0 && chat_role_is(&msgs[0], "system")) {
            chat_text_stripped(b, msgs[0].content);
            msgs++, n--;
        }
        chat_put(b, "<|eot_id|>");
    } else if (n > 0) {
        chat_put(b, bos); /* Llama-3.0 writes it with the first message */
    }
    if (tools) { /* the function list goes in the first user message */
        if (n == 0 || !chat_role_is(&msgs[0], "user"))
            return err_input(err, "chat_render: with tools, the Llama-3 template needs a user message first");
        chat_put_header(b, "user");
        chat_put(b, "Given the following functions, please respond with a JSON for a function call with its proper "
                    "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function "
                    "name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n");
        for (size_t i = 0; i < json_array_size(tools); i++) {
            chat_put_json(b, json_array_get(tools, i), 4);
            chat_put(b, "\n\n");
        }
        chat_text_stripped(b, msgs[0].content);
        chat_put(b, "<|eot_id|>");
        msgs++, n--;
    }
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (t->date_string && chat_role_is(m, "tool")) {
            chat_put_header(b, "ipython");
            chat_text(b, m->content);
        } else if (t->date_string && chat_role_is(m, "assistant") && m->n_tool_calls) {
            if (m->n_tool_calls != 1)
                return err_input(err, "chat_render: message %zu: the Llama-3 template takes one tool call at a time",
                                      i);
            chat_put_header(b, "assistant");
            chat_put(b, "{\"name\": \"");
            chat_text(b, m->tool_calls[0].name);
            chat_put(b, "\", \"parameters\": ");
            chat_put_arguments(b, m->tool_calls[0].arguments);
            chat_put(b, "}");
        } else {
            chat_put_header(b, m->role);
            chat_text_stripped(b, m->content);
        }
        chat_put(b, "<|eot_id|>");
    }
    if (in->add_generation_prompt) chat_put_header(b, "assistant");
    return 0;
}

/* The variant from the "[INST]" template's spacing. */
static bool chat_detect_mistral(const char *src, chat_template *t) {
    if (strstr(src, "\"[INST]\" +") || strstr(src, "'[INST]' +"))
        t->mistral = CHAT_MISTRAL_TEKKEN;
    else if (strstr(src, "' [/INST]'") || strstr(src, "\" [/INST]\""))
        t->mistral = CHAT_MISTRAL_V1;
    return true;
}

static int chat_render_mistral(const chat_input *in, chat_buf *b, fkv_error *err) {
    const chat_template *t = in->t;
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    static const struct chat_mistral_form {
        const char *open, *close;
        bool spaced_reply; /* " " + strip(reply) rather than the reply verbatim */
    } forms[] = {
        [CHAT_MISTRAL_V3] = {"[INST] ", "[/INST]", true},
        [CHAT_MISTRAL_TEKKEN] = {"[INST]", "[/INST]", false},
        [CHAT_MISTRAL_V1] = {"[INST] ", " [/INST]", false},
    };
    const bool v1 = t->mistral == CHAT_MISTRAL_V1;
    const struct chat_mistral_form *v = &forms[t->mistral];
    const char *system = NULL;
    size_t first = 0;
    if (!v1 && n > 0 && chat_role_is(&msgs[0], "system")) system = msgs[first++].content;
    for (size_t i = first; i < n; i++) {
        if (chat_role_is(&msgs[i], "tool"))
            return err_input(err, "chat_render: message %zu is a tool result, which Mistral's template renders only "
                                "with a 9-character tool_call_id that chat_message does not carry",
                           i);
        if (chat_role_is(&msgs[i], "user") != ((i - first) % 2 == 0) || chat_role_is(&msgs[i], "system"))
            return err_input(err, "chat_render: message %zu is '%s' but Mistral's template needs roles to alternate "
                                "user/assistant starting with user%s",
                           i, msgs[i].role, v1 ? ", with no system message" : " after an optional system message");
    }
    chat_put(b, in->bos);
    for (size_t i = first; i < n; i++) {
        if (chat_role_is(&msgs[i], "user")) {
            chat_put(b, v->open);
            if (system && i + 1 == n) { /* the system text goes with the last message, when it is a user's */
                chat_text(b, system);
                chat_put(b, "\n\n");
            }
            chat_text(b, msgs[i].content);
            chat_put(b, v->close);
        } else {
            if (v->spaced_reply) {
                chat_put(b, " ");
                chat_text_stripped(b, msgs[i].content);
            } else {
                chat_text(b, msgs[i].content);
            }
            chat_put(b, in->eos);
        }
    }
    return 0;
}

/* A "<|end|>" template with "<|user|>" or "<|assistant|>" tags; Phi-4-mini's by its tag forms. */
static bool chat_detect_phi3(const char *src, chat_template *t) {
    if (!strstr(src, "<|user|>") && !strstr(src, "<|assistant|>")) return false;
    if (strstr(src, "|>' + message['content']") || strstr(src, "<|/tool|>")) t->phi = CHAT_PHI_4_MINI;
    return true;
}

static int chat_render_phi3(const chat_input *in, chat_buf *b, fkv_error *err) {
    (void)err;
    static const struct chat_phi_form {
        const char *tag_close, *turn_end, *generation_prompt;
        bool skip_tool_and_empty_system;
    } forms[] = {
        [CHAT_PHI_3] = {"|>\n", "<|end|>\n", "<|assistant|>\n", true},
        [CHAT_PHI_4_MINI] = {"|>", "<|end|>", "<|assistant|>", false},
    };
    const struct chat_phi_form *v = &forms[in->t->phi];
    for (size_t i = 0; i < in->n; i++) {
        const chat_message *m = &in->msgs[i];
        if (v->skip_tool_and_empty_system && (chat_role_is(m, "tool") || (chat_role_is(m, "system") && !*m->content)))
            continue;
        chat_put(b, "<|");
        chat_put(b, m->role);
        chat_put(b, v->tag_close);
        chat_text(b, m->content);
        chat_put(b, v->turn_end);
    }
    chat_put(b, in->add_generation_prompt ? v->generation_prompt : in->eos);
    return 0;
}

static bool chat_detect_gemma(const char *src, chat_template *t) {
    t->fold_system = strstr(src, "first_user_prefix") != NULL;
    return true;
}

static int chat_render_gemma(const chat_input *in, chat_buf *b, fkv_error *err) {
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    const char *system = NULL;
    size_t first = 0;
    if (n > 0 && chat_role_is(&msgs[0], "system")) {
        if (!in->t->fold_system)
            return err_unsupported(err, "chat_render: message 0 is a system message, which Gemma-2's template refuses "
                                "(\"System role not supported\")");
        system = msgs[first++].content;
    }
    for (size_t i = first; i < n; i++)
        if (chat_role_is(&msgs[i], "user") != ((i - first) % 2 == 0))
            return err_input(err, "chat_render: message %zu is '%s' but Gemma's template needs roles to alternate "
                                "user/assistant starting with user",
                           i, msgs[i].role);
    chat_put(b, in->bos);
    for (size_t i = first; i < n; i++) {
        chat_put(b, "<start_of_turn>");
        chat_put(b, chat_role_is(&msgs[i], "assistant") ? "model" : msgs[i].role);
        chat_put(b, "\n");
        if (system && i == first) {
            chat_text(b, system);
            chat_put(b, "\n\n");
        }
        chat_text_stripped(b, msgs[i].content);
        chat_put(b, "<end_of_turn>\n");
    }
    if (in->add_generation_prompt) chat_put(b, "<start_of_turn>model\n");
    return 0;
}

static int chat_render_zephyr(const chat_input *in, chat_buf *b, fkv_error *err) {
    (void)err;
    for (size_t i = 0; i < in->n; i++) {
        const chat_message *m = &in->msgs[i];
        if (chat_role_is(m, "tool")) continue;
        chat_put(b, "<|");
        chat_put(b, m->role);
        chat_put(b, "|>\n");
        chat_text(b, m->content);
        chat_put(b, in->eos);
        chat_put(b, "\n");
    }
    if (in->add_generation_prompt && in->n > 0) chat_put(b, "<|assistant|>\n"); /* written inside its message loop */
    return 0;
}

static int chat_render_deepseek(const chat_input *in, chat_buf *b, fkv_error *err) {
    (void)err;
    static const char eos[] = "<｜end▁of▁sentence｜>", think_end[] = "</think>";
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    chat_put(b, in->bos);
    const char *system = NULL;
    for (size_t i = 0; i < n; i++)
        if (chat_role_is(&msgs[i], "system")) system = msgs[i].content;
    if (system) chat_text(b, system);
    bool in_outputs = false, first_output = true;
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "user")) {
            in_outputs = false;
            chat_put(b, "<｜User｜>");
            chat_text(b, m->content);
        } else if (chat_role_is(m, "assistant")) {
            if (in_outputs) {
                chat_put(b, "<｜tool▁outputs▁end｜>");
                chat_text(b, m->content);
                in_outputs = false;
            } else {
                const char *reply = m->content, *end;
                while ((end = strstr(reply, think_end))) reply = end + strlen(think_end); /* the past reasoning goes */
                chat_put(b, "<｜Assistant｜>");
                chat_text(b, reply);
            }
            chat_put(b, eos);
        } else if (chat_role_is(m, "tool")) {
            in_outputs = true;
            chat_put(b, first_output ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" : "\n<｜tool▁output▁begin｜>");
            chat_text(b, m->content);
            chat_put(b, "<｜tool▁output▁end｜>");
            first_output = false;
        }
    }
    if (in_outputs) chat_put(b, "<｜tool▁outputs▁end｜>");
    else if (in->add_generation_prompt) chat_put(b, "<｜Assistant｜><think>\n");
    return 0;
}

/* gpt-oss's render_typescript_type: a parameter's JSON Schema as the TypeScript type the template writes, branch by
 * branch (a oneOf's has_object_variants is set inside a loop, which Jinja scopes to the loop: it never takes the
 * "any" branch). Schemas nested deeper than CHAT_TS_DEPTH are written "any", so no input can exhaust the stack. */
#define CHAT_TS_DEPTH 32
static void chat_ts_type(chat_buf *b, const json_t *spec, int depth) {
    const json_t *type = json_object_get(spec, "type"), *nullable = json_object_get(spec, "nullable");
    if (depth >= CHAT_TS_DEPTH) {
        chat_text(b, "any");
    } else if (chat_json_is(type, "array")) {
        const json_t *items = json_object_get(spec, "items"), *item_type = json_object_get(items, "type");
        if (!chat_json_truthy(items)) chat_text(b, "any[]");
        else if (chat_json_is(item_type, "string")) chat_text(b, "string[]");
        else if (chat_json_is(item_type, "number") || chat_json_is(item_type, "integer")) chat_text(b, "number[]");
        else if (chat_json_is(item_type, "boolean")) chat_text(b, "boolean[]");
        else {
            chat_buf inner = {0};
            chat_put(&inner, "");
            chat_ts_type(&inner, items, depth + 1);
            if (inner.oom) b->oom = true;
            else if (!strcmp(inner.s, "object | object") || chat_utf8_chars(inner.s, inner.len) > 50) chat_text(b, "any[]");
            else chat_text(b, inner.s), chat_text(b, "[]");
            free(inner.s);
            free(inner.spans);
        }
        if (chat_json_truthy(nullable)) chat_text(b, " | null");
    } else if (json_is_array(type) && json_array_size(type) > 0) {
        for (size_t i = 0; i < json_array_size(type); i++) {
            if (i) chat_text(b, " | ");
            chat_put_py_str(b, json_array_get(type, i));
        }
    } else if (chat_json_truthy(json_object_get(spec, "oneOf"))) {
        const json_t *variants = json_object_get(spec, "oneOf");
        for (size_t i = 0; i < json_array_size(variants); i++) {
            const json_t *v = json_array_get(variants, i), *description = json_object_get(v, "description");
            chat_ts_type(b, v, depth + 1);
            if (chat_json_truthy(description)) chat_text(b, "// "), chat_put_py_str(b, description);
            if (json_object_get(v, "default")) { /* its line's indentation is output: a {{ }} is not a block tag */
                chat_text(b, "                    // default: ");
                chat_put_json(b, json_object_get(v, "default"), 0);
            }
            if (i + 1 < json_array_size(variants)) chat_text(b, " | \n");
        }
    } else if (chat_json_is(type, "string")) {
        const json_t *values = json_object_get(spec, "enum");
        if (chat_json_truthy(values)) {
            chat_text(b, "\"");
            for (size_t i = 0; i < json_array_size(values); i++) {
                if (i) chat_text(b, "\" | \"");
                chat_put_py_str(b, json_array_get(values, i));
            }
            chat_text(b, "\"");
        } else {
            chat_text(b, chat_json_truthy(nullable) ? "string | null" : "string");
        }
    } else if (chat_json_is(type, "number") || chat_json_is(type, "integer")) {
        chat_text(b, "number");
    } else if (chat_json_is(type, "boolean")) {
        chat_text(b, "boolean");
    } else if (chat_json_is(type, "object")) {
        const json_t *props = json_object_get(spec, "properties"), *required = json_object_get(spec, "required"), *p;
        if (!chat_json_truthy(props) || !json_is_object(props)) {
            chat_text(b, "object");
            return;
        }
        chat_text(b, "{\n");
        const char *name;
        size_t left = json_object_size(props);
        json_object_foreach((json_t *)props, name, p) {
            chat_text(b, name);
            if (!chat_json_lists(required, name)) chat_text(b, "?");
            chat_text(b, ": \n                "); /* the call's own line, indented: output as written */
            chat_ts_type(b, p, depth + 1);
            if (--left) chat_text(b, ", ");
        }
        chat_text(b, "}");
    } else {
        chat_text(b, "any");
    }
}

/* gpt-oss's render_tool_namespace("functions", tools). */
static void chat_harmony_tools(chat_buf *b, const json_t *tools) {
    chat_put(b, "## functions\n\nnamespace functions {\n\n");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *fn = json_object_get(json_array_get(tools, i), "function");
        const json_t *params = json_object_get(fn, "parameters"), *props = json_object_get(params, "properties");
        const json_t *required = json_object_get(params, "required"), *spec;
        chat_put(b, "// ");
        if (json_object_get(fn, "description")) chat_put_py_str(b, json_object_get(fn, "description"));
        chat_put(b, "\ntype ");
        chat_put_py_str(b, json_object_get(fn, "name"));
        chat_put(b, " = ");
        if (!chat_json_truthy(params) || !chat_json_truthy(props) || !json_is_object(props)) {
            chat_put(b, "() => any;\n\n");
            continue;
        }
        chat_put(b, "(_: {\n");
        const char *name;
        json_object_foreach((json_t *)props, name, spec) {
            const json_t *description = json_object_get(spec, "description"), *dflt = json_object_get(spec, "default");
            if (chat_json_truthy(description)) {
                chat_put(b, "// ");
                chat_put_py_str(b, description);
                chat_put(b, "\n");
            }
            chat_text(b, name);
            if (!chat_json_lists(required, name)) chat_put(b, "?");
            chat_put(b, ": ");
            chat_ts_type(b, spec, 0);
            if (dflt) {
                const bool listed = chat_json_truthy(json_object_get(spec, "enum"));
                const bool variants = !listed && chat_json_truthy(json_object_get(spec, "oneOf"));
                chat_put(b, variants ? "// default: " : ", // default: ");
                if (listed || variants) chat_put_py_str(b, dflt); /* the template concatenates the value itself */
                else chat_put_json(b, dflt, 0);
            }
            chat_put(b, ",\n");
        }
        chat_put(b, "}) => any;\n\n");
    }
    chat_put(b, "} // namespace functions");
}

static bool chat_detect_harmony(const char *src, chat_template *t) {
    (void)src;
    t->date_string = chat_harmony_date;
    return true;
}

/* A message's text as a JSON string (the template's `content|tojson`), conversation text. */
static void chat_put_json_string(chat_buf *b, const char *s) {
    json_t *v = json_stringn_nocheck(s, strlen(s));
    if (!v) {
        b->oom = true;
        return;
    }
    chat_put_json(b, v, 0);
    json_decref(v);
}

/* gpt-oss's template (see chat.h). */
static int chat_render_harmony(const chat_input *in, chat_buf *b, fkv_error *err) {
    static const char analysis[] = "<|start|>assistant<|channel|>analysis<|message|>";
    const chat_template *t = in->t;
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    chat_put(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                "Knowledge cutoff: 2024-06\nCurrent date: ");
    chat_put(b, t->date_string ? t->date_string : chat_harmony_date);
    chat_put(b, "\n\nReasoning: ");
    if (t->reasoning_effort) chat_text(b, t->reasoning_effort);
    else chat_put(b, "medium");
    chat_put(b, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.");
    if (in->tools) chat_put(b, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    chat_put(b, "<|end|>");
    const bool lead_system = n > 0 && chat_role_is(&msgs[0], "system");
    const char *developer = lead_system ? msgs[0].content : "";
    if (*developer || in->tools) {
        chat_put(b, "<|start|>developer<|message|>");
        if (*developer) {
            chat_put(b, "# Instructions\n\n");
            chat_text(b, developer);
            chat_put(b, "\n\n");
        }
        if (in->tools) {
            chat_put(b, "# Tools\n\n");
            chat_harmony_tools(b, in->tools);
        }
        chat_put(b, "<|end|>");
    }
    const char *last_call = NULL; /* the template's last_tool_call.name */
    for (size_t i = lead_system; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "assistant")) {
            const char *texts[] = {m->content, m->reasoning ? m->reasoning : ""};
            for (int k = 0; k < 2; k++)
                if (strstr(texts[k], "<|channel|>analysis<|message|>") || strstr(texts[k], "<|channel|>final<|message|>"))
                    return err_input(err, "chat_render: message %zu: gpt-oss's template refuses <|channel|> tags in an "
                                          "assistant's %s: pass the analysis as its reasoning, the final text as its "
                                          "content", i, k ? "reasoning" : "content");
            if (m->n_tool_calls) {
                bool final_later = false; /* an assistant message without calls after this one */
                for (size_t k = i + 1; k < n && !final_later; k++)
                    final_later = chat_role_is(&msgs[k], "assistant") && !msgs[k].n_tool_calls;
                const char *before = m->reasoning ? m->reasoning : m->content; /* see chat.h: reasoning wins */
                if (*before && !final_later) {
                    chat_put(b, analysis);
                    chat_text(b, before);
                    chat_put(b, "<|end|>");
                }
                chat_put(b, "<|start|>assistant to=functions.");
                chat_text(b, m->tool_calls[0].name);
                chat_put(b, "<|channel|>commentary json<|message|>");
                chat_put_arguments(b, m->tool_calls[0].arguments);
                chat_put(b, "<|call|>");
                last_call = m->tool_calls[0].name;
            } else if (i + 1 == n && !in->add_generation_prompt) { /* training's form: the reasoning, then <|return|> */
                if (m->reasoning) {
                    chat_put(b, analysis);
                    chat_text(b, m->reasoning);
                    chat_put(b, "<|end|>");
                }
                chat_put(b, "<|start|>assistant<|channel|>final<|message|>");
                chat_text(b, m->content);
                chat_put(b, "<|return|>");
            } else {
                chat_put(b, "<|start|>assistant<|channel|>final<|message|>");
                chat_text(b, m->content);
                chat_put(b, "<|end|>");
                last_call = NULL;
            }
        } else if (chat_role_is(m, "tool")) {
            if (!last_call)
                return err_input(err, "chat_render: message %zu is a tool result, but gpt-oss's template needs an "
                                      "assistant message with a tool call before it", i);
            chat_put(b, "<|start|>functions.");
            chat_text(b, last_call);
            chat_put(b, " to=assistant<|channel|>commentary<|message|>");
            chat_put_json_string(b, m->content);
            chat_put(b, "<|end|>");
        } else if (chat_role_is(m, "user")) {
            chat_put(b, "<|start|>user<|message|>");
            chat_text(b, m->content);
            chat_put(b, "<|end|>");
        } /* a later system message: the template has no branch for it */
    }
    if (in->add_generation_prompt) chat_put(b, "<|start|>assistant");
    return 0;
}

/* GLM-4.7's template by its bare "</think>" where 4.5/4.6's write "\n<think></think>". */
static bool chat_detect_glm(const char *src, chat_template *t) {
    t->glm = strstr(src, "\\n<think>") ? CHAT_GLM_46 : CHAT_GLM_47;
    return true;
}

/* GLM-4.5/4.6's and GLM-4.7's templates (see chat.h). */
static int chat_render_glm(const chat_input *in, chat_buf *b, fkv_error *err) {
    const chat_message *msgs = in->msgs;
    const size_t n = in->n;
    const bool nl = in->t->glm == CHAT_GLM_46, no_thinking = in->t->no_thinking;
    const char *sep = nl ? "\n" : "";
    chat_put(b, "[gMASK]<sop>");
    if (in->tools) {
        chat_put(b, "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou "
                    "are provided with function signatures within <tools></tools> XML tags:\n<tools>\n");
        for (size_t i = 0; i < json_array_size(in->tools); i++) {
            chat_put_json(b, json_array_get(in->tools, i), 0);
            chat_put(b, "\n");
        }
        chat_put(b, "</tools>\n\nFor each function call, output the function name and arguments within the following "
                    "XML format:\n");
        chat_put(b, nl ? "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}"
                         "</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n"
                         "</tool_call>"
                       : "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
                         "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>");
    }
    size_t last_user = SIZE_MAX; /* the template's last_user_index: -1 when there is none */
    for (size_t i = 0; i < n; i++)
        if (chat_role_is(&msgs[i], "user")) last_user = i;
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "user")) {
            chat_put(b, "<|user|>");
            chat_put(b, sep);
            chat_text(b, m->content);
            const size_t len = strlen(m->content), tag = strlen("/nothink");
            if (nl && no_thinking && !(len >= tag && !strcmp(m->content + len - tag, "/nothink"))) chat_put(b, "/nothink");
        } else if (chat_role_is(m, "assistant")) {
            const char *content = m->content, *reasoning = m->reasoning ? m->reasoning : "";
            size_t r_len = strlen(reasoning);
            if (!m->reasoning) chat_qwen3_split(m->content, &content, &reasoning, &r_len);
            chat_put(b, "<|assistant|>");
            if ((last_user == SIZE_MAX || i > last_user) && r_len > 0) {
                chat_put(b, sep);
                chat_put(b, "<think>");
                chat_text_stripped_n(b, reasoning, r_len);
                chat_put(b, "</think>");
            } else {
                chat_put(b, nl ? "\n<think></think>" : "</think>");
            }
            if (!chat_is_blank(content, strlen(content))) {
                chat_put(b, sep);
                chat_text_stripped(b, content);
            }
            for (size_t c = 0; c < m->n_tool_calls; c++) {
                json_t *args = chat_call_args(&m->tool_calls[c], i, "GLM", err);
                if (!args) return -1;
                chat_put(b, sep);
                chat_put(b, "<tool_call>");
                chat_text(b, m->tool_calls[c].name);
                chat_put(b, sep);
                chat_put_args(b, args, "<arg_key>", nl ? "</arg_key>\n<arg_value>" : "</arg_key><arg_value>",
                              nl ? "</arg_value>\n" : "</arg_value>", false);
                chat_put(b, "</tool_call>");
                json_decref(args);
            }
        } else if (chat_role_is(m, "tool")) {
            if (i == 0 || !chat_role_is(&msgs[i - 1], "tool")) chat_put(b, "<|observation|>");
            chat_put(b, sep);
            chat_put(b, "<tool_response>");
            chat_put(b, sep);
            chat_text(b, m->content);
            chat_put(b, sep);
            chat_put(b, "</tool_response>");
        } else {
            chat_put(b, "<|system|>");
            chat_put(b, sep);
            chat_text(b, m->content);
        }
    }
    if (in->add_generation_prompt) {
        chat_put(b, "<|assistant|>");
        if (nl && no_thinking) chat_put(b, "\n<think></think>");
        if (!nl) chat_put(b, no_thinking ? "</think>" : "<think>");
    }
    return 0;
}

/* Which templates have a tool form here (chat_render's tools). */
typedef enum {
    CHAT_TOOLS_NONE,
    CHAT_TOOLS,          /* every template of the family */
    CHAT_TOOLS_IF_DATED, /* the templates with a date_string (Llama-3.1+), not Llama-3.0's */
} chat_tool_form;

/* The tokens the families' models' vocabularies hold (chat_vocab_tokens): gpt-oss's o200k_harmony marks them all
 * CONTROL (the tokenizer then makes the channel markers and "<|end|>" user-defined, as llama.cpp does, and "<|return|>"
 * and "<|call|>" end a generation by their text); GLM's converter points BOS, EOT and EOM at "[gMASK]", "<|user|>" and
 * "<|observation|>", and its tokenizer marks the reasoning and tool tags as added tokens that are not special. */
static const chat_vocab_token chat_harmony_tokens[] = {
    {"<|start|>", false, NULL},  {"<|channel|>", false, NULL}, {"<|message|>", false, NULL},
    {"<|end|>", false, NULL},    {"<|return|>", false, NULL},  {"<|call|>", false, NULL},
    {"<|constrain|>", false, NULL}, {NULL, false, NULL},
};
static const chat_vocab_token chat_glm_tokens[] = {
    {"[gMASK]", false, "bos"},      {"<sop>", false, NULL},          {"<|system|>", false, NULL},
    {"<|user|>", false, "eot"},     {"<|assistant|>", false, NULL},  {"<|observation|>", false, "eom"},
    {"<think>", true, NULL},        {"</think>", true, NULL},        {"<tool_call>", true, NULL},
    {"</tool_call>", true, NULL},   {"<arg_key>", true, NULL},       {"</arg_key>", true, NULL},
    {"<arg_value>", true, NULL},    {"</arg_value>", true, NULL},    {"<tool_response>", true, NULL},
    {"</tool_response>", true, NULL}, {NULL, false, NULL},
};

/* The families, one row each, in the order detection tries them: a template source is the first row's whose marker
 * it contains and whose detect function (where the row has one) accepts it, so a later row's marker may also occur
 * in an earlier row's sources ("<|im_start|>" in SmolLM3's, "[INST]" in Llama-2's). Adding a family is a row here
 * and its render function. */
static const struct chat_family_row {
    chat_family family;
    const char *name;           /* in errors */
    const char *bos, *eos;      /* the BOS/EOS texts its models' vocabularies usually have (NULL: it writes none) */
    const char *marker;         /* a control text its template sources write; NULL: never detected */
    bool (*detect)(const char *src, chat_template *t); /* whether a source with the marker is this family's, t's
                                                         * variant set from it; NULL: it is */
    chat_tool_form tools;
    int (*render)(const chat_input *in, chat_buf *b, fkv_error *err); /* 0, or -1 with err: a role it refuses */
    const chat_vocab_token *tokens; /* chat_vocab_tokens: NULL-terminated by text; NULL: none listed */
} chat_families[] = {
    {CHAT_HARMONY, "gpt-oss", NULL, NULL, "<|channel|>", chat_detect_harmony, CHAT_TOOLS, chat_render_harmony,
     chat_harmony_tokens},
    {CHAT_GLM, "glm", "[gMASK]", NULL, "[gMASK]<sop>", chat_detect_glm, CHAT_TOOLS, chat_render_glm, chat_glm_tokens},
    {CHAT_DEEPSEEK, "deepseek", "<｜begin▁of▁sentence｜>", NULL, "<｜User｜>", NULL, CHAT_TOOLS_NONE, chat_render_deepseek, NULL},
    {CHAT_LLAMA3, "llama3", "<|begin_of_text|>", NULL, "<|start_header_id|>", chat_detect_llama3, CHAT_TOOLS_IF_DATED,
     chat_render_llama3, NULL},
    {CHAT_SMOLLM3, "smollm3", NULL, NULL, "<|im_start|>", chat_detect_smollm3, CHAT_TOOLS_NONE, chat_render_smollm3, NULL},
    {CHAT_CHATML, "chatml", NULL, NULL, "<|im_start|>", chat_detect_chatml, CHAT_TOOLS, chat_render_chatml, NULL},
    {CHAT_GEMMA, "gemma", "<bos>", NULL, "<start_of_turn>", chat_detect_gemma, CHAT_TOOLS_NONE, chat_render_gemma, NULL},
    {CHAT_PHI3, "phi3", NULL, "<|endoftext|>", "<|end|>", chat_detect_phi3, CHAT_TOOLS_NONE, chat_render_phi3, NULL},
    {CHAT_ZEPHYR, "zephyr", NULL, "</s>", "<|user|>", NULL, CHAT_TOOLS_NONE, chat_render_zephyr, NULL},
    {CHAT_LLAMA2, "llama2", "<s>", "</s>", "[INST]", chat_detect_llama2, CHAT_TOOLS_NONE, chat_render_llama2, NULL},
    {CHAT_MISTRAL, "mistral", "<s>", "</s>", "[INST]", chat_detect_mistral, CHAT_TOOLS_NONE, chat_render_mistral, NULL},
    {CHAT_PLAIN, "plain", NULL, NULL, NULL, NULL, CHAT_TOOLS_NONE, chat_render_plain, NULL}, /* no template: a base model */
};
#define CHAT_N_FAMILIES (sizeof chat_families / sizeof *chat_families)

/* The row of family f (PLAIN's for a value no row has). */
static const struct chat_family_row *chat_family_row(chat_family f) {
    size_t i = 0;
    while (i + 1 < CHAT_N_FAMILIES && chat_families[i].family != f) i++;
    return &chat_families[i];
}

chat_template chat_template_detect(const char *src) {
    chat_template t = {.family = CHAT_PLAIN};
    if (!src) return t;
    for (const struct chat_family_row *row = chat_families; row < chat_families + CHAT_N_FAMILIES; row++)
        if (row->marker && strstr(src, row->marker) && (!row->detect || row->detect(src, &t))) {
            t.family = row->family;
            return t;
        }
    t.family = CHAT_CHATML;
    t.guessed = true;
    return t;
}

const chat_vocab_token *chat_vocab_tokens(const chat_template *t, size_t *n) {
    const chat_vocab_token *tokens = chat_family_row(t->family)->tokens;
    *n = 0;
    while (tokens && tokens[*n].text) ++*n;
    return *n ? tokens : NULL;
}

int chat_template_by_name(const char *name, chat_template *out, fkv_error *err) {
    const size_t n = sizeof chat_presets / sizeof *chat_presets;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, chat_presets[i].name)) {
            *out = chat_presets[i].t;
            return 0;
        }
    char names[256];
    for (size_t i = 0, at = 0; i < n && at < sizeof names; i++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", chat_presets[i].name);
    return err_input(err, "chat template '%s' is not one of %s", name, names);
}

/* chat_render into *b (its text and its plain spans; the caller frees both, also on failure). */
static int chat_render_buf(const chat_template *t, const chat_message *messages, size_t n, const json_t *tools,
                           bool add_generation_prompt, const char *bos_text, const char *eos_text, chat_buf *b,
                           fkv_error *err) {
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    for (size_t i = 0; i < n; i++) {
        size_t r = 0;
        while (r < 4 && (!messages[i].role || strcmp(messages[i].role, roles[r]))) r++;
        if (r == 4)
            return err_input(err, "chat_render: message %zu has role '%s', not system, user, assistant or tool", i,
                           messages[i].role ? messages[i].role : "(null)");
        if (!messages[i].content) return err_input(err, "chat_render: message %zu (%s) has no content",
                                                        i, messages[i].role);
    }
    const struct chat_family_row *row = chat_family_row(t->family);
    const bool with_tools = tools && json_array_size(tools) > 0;
    if (with_tools && (row->tools == CHAT_TOOLS_NONE || (row->tools == CHAT_TOOLS_IF_DATED && !t->date_string)))
        return err_unsupported(err, "chat_render: the %s template has no tool form in flatkv (tools work with "
                                    "ChatML/Qwen, Llama-3.1+, gpt-oss and GLM)", row->name);
    const chat_input in = {t, messages, n, with_tools ? tools : NULL, add_generation_prompt,
                           bos_text ? bos_text : row->bos ? row->bos : "", eos_text ? eos_text : row->eos ? row->eos : ""};
    chat_put(b, ""); /* an empty conversation still gives a string */
    const int rc = row->render(&in, b, err);
    if (rc) return -1;
    if (b->oom) return err_nomem(err, "chat_render: out of memory rendering %zu messages", n);
    return 0;
}

/* b's text handed to the caller (*out, its length in *len when len is not NULL) when rc is 0; freed otherwise. rc. */
static int chat_buf_give(chat_buf *b, int rc, char **out, size_t *len) {
    free(b->spans);
    if (rc) {
        free(b->s);
        return -1;
    }
    *out = b->s;
    if (len) *len = b->len;
    return 0;
}

int chat_render(const chat_template *t, const chat_message *messages, size_t n, const json_t *tools,
                bool add_generation_prompt, const char *bos_text, const char *eos_text, char **out, size_t *len,
                fkv_error *err) {
    chat_buf b = {0};
    return chat_buf_give(&b, chat_render_buf(t, messages, n, tools, add_generation_prompt, bos_text, eos_text, &b, err),
                         out, len);
}

/* text when the vocabulary has it as one token (BOS, or an end-of-generation token); "" otherwise, so that a
 * family chosen for a model of another vocabulary writes no stray text where its template has a control
 * token. */
static const char *chat_vocab_text(const fkv_model *m, const char *text, bool is_bos) {
    if (!text) return "";
    int32_t ids[2];
    fkv_error ignored = {0};
    int n = fkv_tokenize(m, text, strlen(text), false, true, ids, 2, &ignored);
    bool single = n == 1 && (is_bos ? ids[0] == fkv_token_bos(m) : fkv_token_is_eog(m, ids[0]));
    return single ? text : "";
}

/* The family's BOS/EOS texts where m's vocabulary has them (chat_vocab_text). */
static void chat_model_texts(const fkv_model *m, const chat_template *t, const char **bos, const char **eos) {
    const struct chat_family_row *row = chat_family_row(t->family);
    *bos = chat_vocab_text(m, row->bos, true);
    *eos = chat_vocab_text(m, row->eos, false);
}

int chat_prompt_ids(const fkv_model *m, const chat_template *t, const chat_message *messages, size_t n,
                    const json_t *tools, int32_t **ids, uint32_t *n_ids, fkv_error *err) {
    const char *bos, *eos;
    chat_model_texts(m, t, &bos, &eos);
    chat_buf b = {0};
    if (chat_render_buf(t, messages, n, tools, true, bos, eos, &b, err)) {
        free(b.s);
        free(b.spans);
        return -1;
    }
    /* The model's vocabulary, read through its struct: fkv_tokenize (model.c) has no form with plain spans. */
    const tok_vocab *v = m->vocab;
    bool add_bos = !(*bos && !strncmp(b.s, bos, strlen(bos))) && tok_add_bos(v);
    int count = tok_encode_spans(v, b.s, b.len, add_bos, true, b.spans, b.n_spans, NULL, 0, err);
    *ids = count >= 0 ? malloc(sizeof(int32_t) * (size_t)(count ? count : 1)) : NULL;
    if (*ids && tok_encode_spans(v, b.s, b.len, add_bos, true, b.spans, b.n_spans, *ids, count, err) != count) {
        free(*ids);
        *ids = NULL;
    }
    free(b.s);
    free(b.spans);
    if (!*ids) return count < 0 ? -1 : err_nomem(err, "out of memory tokenizing the conversation");
    *n_ids = (uint32_t)count;
    return 0;
}

/* Stand-ins for a past turn's texts in a continuation: control characters no template writes. */
static const char chat_mark_user[] = "\x1f" "flatkv:past-user" "\x1f", chat_mark_reply[] = "\x1f" "flatkv:past-reply" "\x1f";

/* The continuation's text and plain spans into *out (the caller frees both, also on failure). */
static int chat_continuation_buf(const chat_template *t, const char *system, const chat_message *messages, size_t n,
                                 const char *bos_text, const char *eos_text, chat_buf *out, fkv_error *err) {
    if (n == 0) return err_input(err, "chat_render_continuation: no messages follow the reply");
    /* The shortest conversation that ends in a finished reply — [system,] user, assistant — then the messages: the
     * rendering after the reply's stand-in is what the template writes after any reply. */
    chat_message *all = malloc(sizeof *all * (n + 3));
    if (!all) return err_nomem(err, "out of memory rendering a continuation");
    size_t k = 0;
    if (system) all[k++] = (chat_message){.role = "system", .content = system};
    all[k++] = (chat_message){.role = "user", .content = chat_mark_user};
    all[k++] = (chat_message){.role = "assistant", .content = chat_mark_reply};
    memcpy(all + k, messages, sizeof *all * n);
    chat_buf b = {0};
    int rc = chat_render_buf(t, all, k + n, NULL, true, bos_text, eos_text, &b, err);
    free(all);
    const char *mark = rc ? NULL : strstr(b.s, chat_mark_reply);
    if (!rc && (!mark || strstr(mark + 1, chat_mark_reply)))
        rc = err_input(err, "chat_render_continuation: a message contains the text that stands for the past reply");
    if (!rc) { /* what follows the reply, its plain spans shifted to its start */
        const size_t from = (size_t)(mark - b.s) + strlen(chat_mark_reply);
        chat_put_n(out, b.s + from, b.len - from);
        for (size_t i = 0; i < b.n_spans && !out->oom; i++) {
            size_t end = b.spans[i].off + b.spans[i].len, off = b.spans[i].off > from ? b.spans[i].off : from;
            if (end > from) chat_span_add(out, (tok_span){off - from, end - off});
        }
        if (out->oom) rc = err_nomem(err, "chat_render_continuation: out of memory");
    }
    free(b.s);
    free(b.spans);
    return rc;
}

int chat_render_continuation(const chat_template *t, const char *system, const chat_message *messages, size_t n,
                             const char *bos_text, const char *eos_text, char **out, size_t *len, fkv_error *err) {
    chat_buf b = {0};
    return chat_buf_give(&b, chat_continuation_buf(t, system, messages, n, bos_text, eos_text, &b, err), out, len);
}

/* *ids (malloc'd) and *n_ids of text after prev (tok_encode_after: special, its spans plain). 0, or -1 with err. */
static int ids_after(const tok_vocab *v, int32_t prev, const char *text, size_t len, bool special,
                     const tok_span *spans, size_t n_spans, int32_t **ids, uint32_t *n_ids, fkv_error *err) {
    int count = tok_encode_after(v, prev, text, len, special, spans, n_spans, NULL, 0, err);
    *ids = count >= 0 ? malloc(sizeof(int32_t) * (size_t)(count ? count : 1)) : NULL;
    if (*ids && tok_encode_after(v, prev, text, len, special, spans, n_spans, *ids, count, err) != count) {
        free(*ids);
        *ids = NULL;
    }
    if (!*ids) return count < 0 ? -1 : err_nomem(err, "out of memory tokenizing a continuation");
    *n_ids = (uint32_t)count;
    return 0;
}

int chat_text_ids_after(const fkv_model *m, int32_t prev, const char *text, size_t len, int32_t **ids,
                        uint32_t *n_ids, fkv_error *err) {
    return ids_after(m->vocab, prev, text, len, false, NULL, 0, ids, n_ids, err);
}

int chat_continuation_ids(const fkv_model *m, const chat_template *t, const char *system, const chat_message *messages,
                          size_t n, int32_t prev, int32_t **ids, uint32_t *n_ids, fkv_error *err) {
    *ids = NULL;
    const char *bos, *eos;
    chat_model_texts(m, t, &bos, &eos);
    chat_buf b = {0};
    int rc = chat_continuation_buf(t, system, messages, n, bos, eos, &b, err);
    if (!rc) rc = ids_after(m->vocab, prev, b.s, b.len, true, b.spans, b.n_spans, ids, n_ids, err);
    free(b.s);
    free(b.spans);
    return rc;
}
