#include "openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "toolcall.h"
#include "utf8.h"

#define MAX_STOP 16

int oai_fail(oai_error *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code = code;
    e->retry_after = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    /* A message quotes the request (a value, the JSON parser's "near '...'"), which can be invalid UTF-8, and the
     * truncation above can cut a character: the error body is a JSON string, which must be valid UTF-8. */
    size_t n;
    char *clean = utf8_sanitize(e->message, strlen(e->message), &n);
    if (clean) {
        n = utf8_complete_prefix(clean, n < sizeof e->message - 1 ? n : sizeof e->message - 1);
        memcpy(e->message, clean, n);
        e->message[n] = 0;
        free(clean);
    }
    return -1;
}

/* What each kind of failure is over HTTP (the Messages and Responses APIs derive their types from the status). */
static const struct {
    int status;
    const char *type, *code;
} failure_http[] = {
    [FKV_OK] = {500, "server_error", NULL}, /* not a failure: never asked for */
    [FKV_E_INPUT] = {400, "invalid_request_error", NULL},
    [FKV_E_UNSUPPORTED] = {400, "invalid_request_error", "unsupported"},
    [FKV_E_NOMEM] = {500, "server_error", "out_of_memory"},
    [FKV_E_KV_FULL] = {503, "server_error", "kv_full"},
    [FKV_E_IO] = {500, "server_error", "io_error"},
    [FKV_E_BUSY] = {503, "server_error", "busy"},
    [FKV_E_TIMEOUT] = {504, "server_error", "timeout"},
    [FKV_E_CANCELLED] = {499, "server_error", "cancelled"},
};

static _Thread_local bool json_out_of_memory;

static void *json_alloc(size_t n) {
    void *p = malloc(n);
    if (!p) json_out_of_memory = true;
    return p;
}

void oai_json_init(void) { json_set_alloc_funcs(json_alloc, free); }

bool oai_json_failed(void) {
    const bool failed = json_out_of_memory;
    json_out_of_memory = false;
    return failed;
}

json_t *oai_load_body(const char *body, size_t len, oai_error *e) {
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (root) return root;
    /* jansson leaves the error blank (line -1) when an allocation fails before it could say anything */
    if (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0])
        oai_fail(e, 500, "server_error", NULL, "out_of_memory", "out of memory reading the request body");
    else
        oai_fail(e, 400, "invalid_request_error", NULL, NULL, "the request body is not valid JSON: %s (line %d, "
                 "column %d)", jerr.text, jerr.line, jerr.column);
    return NULL;
}

int oai_fail_with(oai_error *e, const char *param, const fkv_error *failure) {
    const unsigned k = (unsigned)failure->code < sizeof failure_http / sizeof *failure_http ? failure->code : 0;
    return oai_fail(e, failure_http[k].status, failure_http[k].type, param, failure_http[k].code, "%s", failure->msg);
}

#define BAD(param, ...) oai_fail(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__)
#define OOM() oai_fail(e, 500, "server_error", NULL, "out_of_memory", "out of memory reading the request")

/* A text part array ([{type: "text", text}...]) or a string, as one malloc'd string; NULL with e. */
static char *content_text(const json_t *content, const char *param, oai_error *e) {
    if (json_is_string(content)) {
        char *copy = strdup(json_string_value(content));
        if (!copy) OOM();
        return copy;
    }
    if (!json_is_array(content)) {
        BAD(param, "'%s' must be a string or an array of text parts", param);
        return NULL;
    }
    size_t len = 0, i;
    json_t *part;
    json_array_foreach(content, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text)) {
            BAD(param, "'%s[%zu]' must be a text part {\"type\": \"text\", \"text\": ...} (only text is supported)",
                param, i);
            return NULL;
        }
        len += json_string_length(text);
    }
    char *out = malloc(len + 1), *o = out;
    if (!out) {
        OOM();
        return NULL;
    }
    json_array_foreach(content, i, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(o, json_string_value(text), json_string_length(text));
        o += json_string_length(text);
    }
    *o = 0;
    return out;
}

/* An assistant message's tool_calls ([{id, type, function: {name, arguments}}]) as chat_tool_calls whose strings
 * point into the request (which outlives the rendering). */
static int parse_tool_calls(const json_t *calls, const char *param, chat_tool_call **out, size_t *n, oai_error *e) {
    *out = NULL;
    *n = 0;
    if (!calls || json_is_null(calls)) return 0;
    if (!json_is_array(calls)) return BAD(param, "'%s.tool_calls' must be an array", param);
    *out = calloc(json_array_size(calls) + 1, sizeof **out);
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        if (!json_is_string(name) || (args && !json_is_string(args)))
            return BAD(param, "'%s.tool_calls[%zu]' needs function.name and function.arguments as strings", param, i);
        (*out)[i] = (chat_tool_call){json_string_value(name), args ? json_string_value(args) : "{}"};
    }
    *n = json_array_size(calls);
    return 0;
}

/* tools and tool_choice: the tools to render (borrowed from the request), or NULL when there are none or the
 * choice is "none". "auto", "required" and a named function all offer every tool; "required" and a named function
 * are enforced: the output must be calls (of that function), by a grammar of the template's call syntax whose
 * arguments follow each tool's parameters (toolcall_gbnf). parallel_tool_calls false: at most one call. */
static int parse_tools(const oai_context *ctx, const json_t *root, const json_t **tools, sched_job *job, oai_error *e) {
    const json_t *t = json_object_get(root, "tools"), *choice = json_object_get(root, "tool_choice");
    *tools = NULL;
    if (!t || json_is_null(t)) return 0;
    if (!json_is_array(t)) return BAD("tools", "'tools' must be an array");
    size_t i;
    json_t *tool;
    json_array_foreach(t, i, tool) {
        json_t *fn = json_object_get(tool, "function");
        if (!json_is_object(tool) || !json_is_string(json_object_get(tool, "type")) ||
            strcmp(json_string_value(json_object_get(tool, "type")), "function") || !json_is_object(fn) ||
            !json_is_string(json_object_get(fn, "name")))
            return BAD("tools", "'tools[%zu]' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i);
    }
    if (choice && !json_is_null(choice)) {
        bool named = json_is_object(choice) && json_is_string(json_object_get(json_object_get(choice, "function"), "name"));
        if (!named && !(json_is_string(choice) && (!strcmp(json_string_value(choice), "none") ||
                                                    !strcmp(json_string_value(choice), "auto") ||
                                                    !strcmp(json_string_value(choice), "required"))))
            return BAD("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                       "\"function\", \"function\": {\"name\": ...}}");
        if (json_is_string(choice) && !strcmp(json_string_value(choice), "none")) return 0;
    }
    const json_t *parallel = json_object_get(root, "parallel_tool_calls");
    if (parallel && !json_is_null(parallel) && !json_is_boolean(parallel))
        return BAD("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    if (json_array_size(t) == 0) return 0;
    *tools = t;
    job->req.tool_format = toolcall_format_of(ctx->tmpl);
    job->req.single_tool_call = json_is_false(parallel);
    if (choice && !json_is_null(choice) && !(job->req.tool_choice = json_deep_copy(choice))) return OOM();
    return 0;
}

/* response_format (text, json_object, json_schema: {name, schema, strict}) into job->req.response_format, and grammar
 * (GBNF text, llama.cpp's field) compiled into job->req.grammar. */
static int parse_format(const oai_context *ctx, const json_t *root, sched_job *job, oai_error *e) {
    const json_t *rf = json_object_get(root, "response_format"), *gbnf = json_object_get(root, "grammar");
    const bool has_rf = rf && !json_is_null(rf), has_gbnf = gbnf && !json_is_null(gbnf);
    if (has_rf && has_gbnf) return BAD("grammar", "give 'grammar' or 'response_format', not both");
    if (has_gbnf) {
        if (!json_is_string(gbnf)) return BAD("grammar", "'grammar' must be a string (GBNF)");
        fkv_error err = {0};
        job->req.grammar = fkv_grammar_new(ctx->model, json_string_value(gbnf), json_string_length(gbnf), &err);
        return job->req.grammar ? 0 : err.code == FKV_E_NOMEM ? OOM() : BAD("grammar", "grammar: %s", err.msg);
    }
    if (!has_rf) return 0;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type || (strcmp(type, "text") && strcmp(type, "json_object") &&
                                         strcmp(type, "json_schema")))
        return BAD("response_format", "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                                      "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": ...}}");
    if (!strcmp(type, "json_schema") && !json_is_object(json_object_get(json_object_get(rf, "json_schema"), "schema")))
        return BAD("response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
    if (strcmp(type, "text") && !(job->req.response_format = json_deep_copy(rf))) return OOM();
    return 0;
}

int oai_constrain(const oai_context *ctx, sched_job *job, const json_t *tools, oai_error *e) {
    const json_t *choice = job->req.tool_choice;
    const char *named = json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
    const bool calls = tools && (named || (json_is_string(choice) && !strcmp(json_string_value(choice), "required")));
    if ((job->req.grammar != NULL) + (job->req.response_format != NULL) + calls > 1)
        return BAD(calls ? "tool_choice" : "response_format",
                   "one constraint at a time: a grammar, a response_format or an enforced tool_choice");
    fkv_error err = {0};
    char *gbnf = NULL;
    const char *param = calls ? "tool_choice" : "response_format";
    if (calls) {
        gbnf = toolcall_gbnf(job->req.tool_format, tools, named, !job->req.single_tool_call, &err);
    } else if (job->req.response_format) {
        const json_t *schema = json_object_get(json_object_get(job->req.response_format, "json_schema"), "schema");
        char *text = schema ? json_dumps(schema, JSON_COMPACT) : strdup("{\"type\": \"object\"}"); /* json_object */
        gbnf = text ? fkv_json_schema_gbnf(text, strlen(text), "", &err) : NULL;
        free(text);
    } else {
        return 0;
    }
    if (gbnf) job->req.grammar = fkv_grammar_new(ctx->model, gbnf, strlen(gbnf), &err);
    free(gbnf);
    if (job->req.grammar) return 0;
    return !err.msg[0] || err.code == FKV_E_NOMEM ? OOM() : BAD(param, "%s: %s", param, err.msg);
}

/* chat_template_kwargs (vLLM's and llama.cpp's field): enable_thinking, a boolean, switches the reasoning of the
 * templates that have it (Qwen3, SmolLM3); other keys are ignored, as the templates that do not read them do. */
static int parse_template_kwargs(const json_t *root, chat_template *t, oai_error *e) {
    const json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (!kw || json_is_null(kw)) return 0;
    if (!json_is_object(kw)) return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    const json_t *thinking = json_object_get(kw, "enable_thinking");
    if (!thinking || json_is_null(thinking)) return 0;
    if (!json_is_boolean(thinking))
        return BAD("chat_template_kwargs", "'chat_template_kwargs.enable_thinking' must be true or false");
    t->no_thinking = json_is_false(thinking);
    return 0;
}

/* messages → prompt ids through the chat template (t: the server's, with this request's kwargs). Contents are
 * tokenized as text: a control token's text in a message stays text (chat_prompt_ids). */
static int parse_messages(const oai_context *ctx, const chat_template *t, const json_t *messages,
                          const json_t *tools, sched_job *job, oai_error *e) {
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return BAD("messages", "'messages' must be a non-empty array");
    size_t n = json_array_size(messages), i;
    chat_message *msgs = calloc(n, sizeof *msgs);
    char **texts = calloc(n, sizeof *texts);
    chat_tool_call **calls = calloc(n, sizeof *calls);
    int rc = -1;
    json_t *msg;
    char param[64];
    if (!msgs || !texts || !calls) {
        OOM();
        goto out;
    }
    json_array_foreach(messages, i, msg) {
        snprintf(param, sizeof param, "messages[%zu]", i);
        json_t *role = json_object_get(msg, "role"), *content = json_object_get(msg, "content");
        if (!json_is_object(msg) || !json_is_string(role)) {
            BAD(param, "'%s' must be an object with a string 'role'", param);
            goto out;
        }
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            BAD(param, "'%s.role' is '%s'; expected system, developer, user, assistant or tool", param, r);
            goto out;
        }
        if (json_is_null(content) || !content) {
            if (strcmp(r, "assistant")) {
                BAD(param, "'%s.content' is required for role '%s'", param, r);
                goto out;
            }
            if (!(texts[i] = strdup(""))) {
                OOM();
                goto out;
            }
        } else if (!(texts[i] = content_text(content, param, e))) {
            goto out;
        }
        msgs[i] = (chat_message){.role = r, .content = texts[i]};
        if (!strcmp(r, "assistant") &&
            parse_tool_calls(json_object_get(msg, "tool_calls"), param, &calls[i], &msgs[i].n_tool_calls, e))
            goto out;
        msgs[i].tool_calls = calls[i];
    }
    fkv_error err = {0};
    uint32_t n_ids;
    if (chat_prompt_ids(ctx->model, t, msgs, n, tools, &job->req.ids, &n_ids, &err)) {
        oai_fail_with(e, "messages", &err);
        goto out;
    }
    job->req.n_ids = n_ids;
    rc = 0;
out:
    for (i = 0; i < n && texts && calls; i++) free(texts[i]), free(calls[i]);
    free(texts);
    free(calls);
    free(msgs);
    return rc;
}

/* prompt: a string or an array of token ids. */
static int parse_prompt(const oai_context *ctx, const json_t *prompt, sched_job *job, oai_error *e) {
    fkv_error err = {0};
    if (json_is_string(prompt)) {
        const char *text = json_string_value(prompt);
        size_t len = json_string_length(prompt);
        int n = fkv_tokenize(ctx->model, text, len, true, false, NULL, 0, &err);
        if (n >= 0 && !(job->req.ids = malloc(sizeof(int32_t) * (size_t)(n ? n : 1))))
            n = err_nomem(&err, "out of memory for the prompt's %d ids", n);
        if (n < 0 || fkv_tokenize(ctx->model, text, len, true, false, job->req.ids, n, &err) != n)
            return oai_fail_with(e, "prompt", &err);
        job->req.n_ids = (uint32_t)n;
        return 0;
    }
    if (!json_is_array(prompt)) return BAD("prompt", "'prompt' must be a string or an array of token ids");
    uint32_t n_vocab = fkv_model_get_info(ctx->model).n_vocab;
    size_t n = json_array_size(prompt), i;
    json_t *v;
    if (!(job->req.ids = malloc(sizeof(int32_t) * (n ? n : 1))))
        return oai_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    json_array_foreach(prompt, i, v) {
        if (!json_is_integer(v)) return BAD("prompt", "'prompt[%zu]' is not a token id (batches are not supported)", i);
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= n_vocab)
            return BAD("prompt", "'prompt[%zu]' = %lld is outside the vocabulary (0..%u)", i, (long long)id, n_vocab - 1);
        job->req.ids[i] = (int32_t)id;
    }
    job->req.n_ids = (uint32_t)n;
    return 0;
}

/* A number field in [lo, hi] (absent: keep *out). */
static int get_number(const json_t *body, const char *key, double lo, double hi, float *out, oai_error *e) {
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi)
        return BAD(key, "'%s' must be a number between %g and %g", key, lo, hi);
    *out = (float)json_number_value(v);
    return 0;
}

/* Chat: logprobs (a boolean) and top_logprobs (0-20, only with logprobs); legacy completions: logprobs, the number of
 * top entries (0-20; null: none). */
static int get_logprobs(const json_t *body, oai_kind kind, sched_job *job, oai_error *e) {
    const json_t *lp = json_object_get(body, "logprobs"), *top = json_object_get(body, "top_logprobs");
    if (kind == OAI_CHAT) {
        if (lp && !json_is_null(lp) && !json_is_boolean(lp)) return BAD("logprobs", "'logprobs' must be a boolean");
        if (top && !json_is_null(top) &&
            (!json_is_integer(top) || json_integer_value(top) < 0 || json_integer_value(top) > FKV_MAX_TOP_LOGPROBS))
            return BAD("top_logprobs", "'top_logprobs' must be an integer from 0 to %d", FKV_MAX_TOP_LOGPROBS);
        if (top && !json_is_null(top) && !json_is_true(lp))
            return BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        job->req.logprobs = json_is_true(lp);
        job->req.top_logprobs = json_is_integer(top) ? (uint32_t)json_integer_value(top) : 0;
        return 0;
    }
    if (top) return BAD("top_logprobs", "'top_logprobs' is a chat parameter; legacy completions take 'logprobs': N");
    if (lp && !json_is_null(lp) &&
        (!json_is_integer(lp) || json_integer_value(lp) < 0 || json_integer_value(lp) > FKV_MAX_TOP_LOGPROBS))
        return BAD("logprobs", "'logprobs' must be an integer from 0 to %d", FKV_MAX_TOP_LOGPROBS);
    job->req.logprobs = json_is_integer(lp);
    job->req.top_logprobs = job->req.logprobs ? (uint32_t)json_integer_value(lp) : 0;
    return 0;
}

static int get_stop(const json_t *body, sched_job *job, oai_error *e) {
    json_t *stop = json_object_get(body, "stop");
    if (!stop || json_is_null(stop)) return 0;
    size_t n = json_is_array(stop) ? json_array_size(stop) : 1;
    if (!json_is_string(stop) && !json_is_array(stop)) return BAD("stop", "'stop' must be a string or an array of strings");
    if (n > MAX_STOP) return BAD("stop", "'stop' has %zu strings; at most %d are supported", n, MAX_STOP);
    if (!(job->req.stop = calloc(n ? n : 1, sizeof *job->req.stop))) return OOM();
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_array(stop) ? json_array_get(stop, i) : stop;
        if (!json_is_string(s) || json_string_length(s) == 0 || strlen(json_string_value(s)) != json_string_length(s))
            return BAD("stop", "every stop sequence must be a non-empty string");
        if (!(job->req.stop[job->req.n_stop] = strdup(json_string_value(s)))) return OOM();
        job->req.n_stop++;
    }
    return 0;
}

/* The request's speculative object over the server's parameters. */
static int parse_speculative(const oai_context *ctx, const json_t *root, sched_job *job, oai_error *e) {
    job->req.spec = ctx->spec;
    json_t *spec = json_object_get(root, "speculative");
    if (!spec || json_is_null(spec)) return 0;
    json_t *mode = json_object_get(spec, "mode"), *draft_max = json_object_get(spec, "draft_max");
    if (!json_is_object(spec) || json_object_size(spec) > (size_t)(!!mode + !!draft_max))
        return BAD("speculative", "'speculative' must be an object with 'mode' and/or 'draft_max'");
    if (mode) {
        const int m = fkv_spec_mode_parse(json_string_value(mode));
        if (m < 0) return BAD("speculative.mode", "'speculative.mode' must be \"off\", \"lookup\" or \"draft\"");
        if (m == FKV_SPEC_DRAFT && !ctx->spec.draft)
            return BAD("speculative.mode", "this server has no draft model (start it with --model-draft PATH)");
        job->req.spec.mode = (fkv_spec_mode)m;
    }
    if (draft_max) {
        const json_int_t k = json_integer_value(draft_max);
        if (!json_is_integer(draft_max) || k < 1 || k > FKV_SPEC_MAX_DRAFT)
            return BAD("speculative.draft_max", "'speculative.draft_max' must be an integer from 1 to %d",
                       FKV_SPEC_MAX_DRAFT);
        job->req.spec.draft_max = (uint32_t)k;
    }
    return 0;
}

int oai_parse_common_fields(const oai_context *ctx, const json_t *root, sched_job *job, char cache_key[65],
                            oai_error *e) {
    if (parse_speculative(ctx, root, job, e)) return -1;
    json_t *salt = json_object_get(root, "cache_salt");
    if (salt && !json_is_null(salt)) {
        if (!json_is_string(salt) || json_string_length(salt) == 0)
            return BAD("cache_salt", "'cache_salt' must be a non-empty string");
        if (!(job->req.salt = strdup(json_string_value(salt)))) return OOM();
    }
    /* OpenAI's values; "24h" (the default with --kv-dir) lets the blocks reach the disk tier, where they last as
     * long as its budget keeps them. */
    json_t *retention = json_object_get(root, "prompt_cache_retention");
    if (retention && !json_is_null(retention)) {
        const char *r = json_string_value(retention);
        if (!r || (strcmp(r, "in_memory") && strcmp(r, "24h")))
            return BAD("prompt_cache_retention", "'prompt_cache_retention' must be \"in_memory\" or \"24h\"");
        job->req.memory_only = !strcmp(r, "in_memory");
    }
    /* Routing keys: a load balancer hashes them to a replica (deploy/haproxy.cfg). Checked as OpenAI checks
     * them, never used for the answer or the cache salt, so a conversation answers the same wherever it lands. */
    const char *route_keys[] = {"prompt_cache_key", "user"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(root, route_keys[k]);
        if (v && !json_is_null(v) && !json_is_string(v)) return BAD(route_keys[k], "'%s' must be a string", route_keys[k]);
    }
    json_t *key = json_object_get(root, "prompt_cache_key");
    if (json_is_string(key)) snprintf(cache_key, 65, "%s", json_string_value(key));
    return 0;
}

int oai_parse(const oai_context *ctx, oai_kind kind, const char *body, size_t len, oai_request *req,
              sched_job *job, oai_error *e) {
    static unsigned long long counter;
    json_t *root = oai_load_body(body, len, e);
    int rc = -1;
    if (!root) return -1;
    if (!json_is_object(root)) {
        BAD(NULL, "the request body must be a JSON object");
        goto out;
    }
    memset(req, 0, sizeof *req);
    req->kind = kind;
    req->created = (long long)time(NULL);
    snprintf(req->id, sizeof req->id, "%s-%llx%llx", kind == OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)req->created, __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_string(model)) {
        BAD("model", "'model' must be a string");
        goto out;
    }
    snprintf(req->model, sizeof req->model, "%s", model ? json_string_value(model) : fkv_model_get_info(ctx->model).name);
    req->m = ctx->model;

    json_t *n = json_object_get(root, "n");
    if (n && !json_is_null(n) &&
        (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > SCHED_MAX_CHOICES)) {
        BAD("n", "'n' must be an integer from 1 to %d", SCHED_MAX_CHOICES);
        goto out;
    }
    req->n = json_is_integer(n) ? (uint32_t)json_integer_value(n) : 1;
    json_t *stream = json_object_get(root, "stream"), *opts = json_object_get(root, "stream_options");
    if (stream && !json_is_null(stream) && !json_is_boolean(stream)) {
        BAD("stream", "'stream' must be a boolean");
        goto out;
    }
    req->stream = json_is_true(stream);
    if (opts && !json_is_null(opts)) {
        json_t *usage = json_object_get(opts, "include_usage");
        if (!json_is_object(opts) || (usage && !json_is_boolean(usage))) {
            BAD("stream_options", "'stream_options' must be an object with a boolean 'include_usage'");
            goto out;
        }
        req->include_usage = json_is_true(usage);
    }

    job->req.sampling = fkv_sampler_default_params();
    job->req.sampling.seed = (uint64_t)time(NULL);
    float top_k = (float)job->req.sampling.top_k, repeat_last_n = 64;
    if (get_number(root, "temperature", 0, 2, &job->req.sampling.temp, e) ||
        get_number(root, "top_p", 0, 1, &job->req.sampling.top_p, e) ||
        get_number(root, "min_p", 0, 1, &job->req.sampling.min_p, e) || get_number(root, "top_k", 0, 1e6, &top_k, e) ||
        get_number(root, "repeat_penalty", 0.01, 100, &job->req.sampling.repeat_penalty, e) ||
        get_number(root, "repeat_last_n", 0, 1e6, &repeat_last_n, e) ||
        get_number(root, "frequency_penalty", -2, 2, &job->req.sampling.frequency_penalty, e) ||
        get_number(root, "presence_penalty", -2, 2, &job->req.sampling.presence_penalty, e) ||
        get_logprobs(root, kind, job, e))
        goto out;
    job->req.sampling.top_k = (int32_t)top_k;
    job->req.sampling.repeat_last_n = (int32_t)repeat_last_n;
    json_t *seed = json_object_get(root, "seed");
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed)) {
            BAD("seed", "'seed' must be an integer");
            goto out;
        }
        job->req.sampling.seed = (uint64_t)json_integer_value(seed);
    }
    if (get_stop(root, job, e)) goto out;
    if (oai_parse_common_fields(ctx, root, job, req->cache_key, e)) goto out;

    snprintf(job->req.id, sizeof job->req.id, "%s", req->id);
    if (parse_format(ctx, root, job, e)) goto out;
    if (kind == OAI_CHAT) {
        const json_t *tools;
        chat_template t = *ctx->tmpl;
        if (parse_template_kwargs(root, &t, e) || parse_tools(ctx, root, &tools, job, e) ||
            oai_constrain(ctx, job, tools, e) ||
            parse_messages(ctx, &t, json_object_get(root, "messages"), tools, job, e))
            goto out;
    } else {
        json_t *prompt = json_object_get(root, "prompt");
        if (!prompt) {
            BAD("prompt", "'prompt' is required");
            goto out;
        }
        if (oai_constrain(ctx, job, NULL, e) || parse_prompt(ctx, prompt, job, e)) goto out;
    }
    if (job->req.n_ids == 0) {
        BAD(kind == OAI_CHAT ? "messages" : "prompt", "the prompt is empty");
        goto out;
    }
    if (job->req.n_ids > ctx->n_ctx) {
        oai_fail(e, 400, "invalid_request_error", kind == OAI_CHAT ? "messages" : "prompt", "context_length_exceeded",
                 "This model's maximum context length is %u tokens. However, your prompt has %u tokens.", ctx->n_ctx,
                 job->req.n_ids);
        goto out;
    }
    /* Generation may run to the end of the context; max_tokens caps it. */
    job->req.max_tokens = ctx->n_ctx - job->req.n_ids + 1;
    const char *max_keys[] = {"max_completion_tokens", "max_tokens"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(root, max_keys[k]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            BAD(max_keys[k], "'%s' must be a positive integer", max_keys[k]);
            goto out;
        }
        if ((json_int_t)job->req.max_tokens > json_integer_value(v))
            job->req.max_tokens = (uint32_t)json_integer_value(v);
        break;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* llama.cpp's timings object: prompt_n counts the prompt tokens actually computed. */
static json_t *timings_json(const sched_job *job) {
    double pn = job->req.n_ids - job->prog.cached;
    json_t *t =
        json_pack("{s:i,s:f,s:f,s:i,s:f,s:f,s:i}", "prompt_n", (int)pn, "prompt_ms", job->prog.prefill_ms,
                  "prompt_per_second", job->prog.prefill_ms > 0 ? pn / (job->prog.prefill_ms / 1e3) : 0.0,
                  "predicted_n", (int)job->prog.n_gen, "predicted_ms", job->prog.decode_ms, "predicted_per_second",
                  job->prog.decode_ms > 0 ? job->prog.n_gen / (job->prog.decode_ms / 1e3) : 0.0, "cache_n",
                  (int)job->prog.cached);
    json_object_set_new(t, "cache_disk_n",
                        json_integer(job->prog.reuse.from_disk)); /* of cache_n, read from --kv-dir */
    json_object_set_new(t, "draft_n", json_integer(job->prog.drafted)); /* llama.cpp's names */
    json_object_set_new(t, "draft_n_accepted", json_integer(job->prog.accepted));
    /* Why the cache missed: where this prompt parted from the closest cached one, and what each holds there. */
    if (job->prog.diverged)
        json_object_set_new(t, "divergence", json_pack("{s:i,s:s,s:s}", "at", (int)job->prog.diverged_at, "cached",
                                                       job->prog.cached_text, "prompt", job->prog.prompt_text));
    /* Why less than the agreement was reused: the window layers' rows there were given back (prefix.h). */
    if (job->prog.reuse.held < job->prog.reuse.capped)
        json_object_set_new(
            t, "window_fallback",
            json_pack("{s:i,s:i}", "agreed", (int)job->prog.reuse.capped, "held", (int)job->prog.reuse.held));
    return t;
}

static json_t *envelope(const oai_request *req, bool chunk) {
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", req->id, "object",
                     req->kind == OAI_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion",
                     "created", (json_int_t)req->created, "model", req->model, "system_fingerprint", "flatkv");
}

/* One token's text (valid UTF-8) and its bytes. */
static void token_json(const oai_request *req, int32_t prev, int32_t id, json_t **text, json_t **bytes) {
    char piece[256];
    int len = fkv_token_piece(req->m, prev, id, piece, sizeof piece);
    len = len < 0 ? 0 : len > (int)sizeof piece ? (int)sizeof piece : len;
    size_t clean_len;
    char *clean = utf8_sanitize(piece, (size_t)len, &clean_len);
    if (!clean) json_out_of_memory = true; /* the body would lose the token's text: oai_json_failed says so */
    *text = json_stringn(clean ? clean : "", clean ? clean_len : 0);
    free(clean);
    if (!bytes) return;
    *bytes = json_array();
    for (int i = 0; i < len; i++) json_array_append_new(*bytes, json_integer((unsigned char)piece[i]));
}

json_t *oai_logprobs(const oai_request *req, const sched_job *job, size_t from, size_t to) {
    const bool chat = req->kind == OAI_CHAT;
    json_t *content = json_array(), *tokens = json_array(), *token_lps = json_array(), *tops = json_array(),
           *offsets = json_array();
    for (size_t i = from; i < to; i++) {
        const sched_logprob *e = &job->prog.lps[i];
        const int32_t prev = i ? job->prog.lps[i - 1].id : job->req.ids[job->req.n_ids - 1];
        json_t *text, *bytes, *top = chat ? json_array() : json_object();
        token_json(req, prev, e->id, &text, chat ? &bytes : NULL);
        for (uint32_t k = 0; k < e->lp.n_top; k++) {
            json_t *t, *b;
            token_json(req, prev, e->lp.top_ids[k], &t, chat ? &b : NULL);
            if (chat)
                json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", t, "logprob",
                                                     (double)e->lp.top_logprobs[k], "bytes", b));
            else {
                json_object_set_new(top, json_string_value(t), json_real(e->lp.top_logprobs[k]));
                json_decref(t);
            }
        }
        if (chat) {
            json_array_append_new(content, json_pack("{s:o,s:f,s:o,s:o}", "token", text, "logprob",
                                                     (double)e->lp.logprob, "bytes", bytes, "top_logprobs", top));
        } else {
            json_array_append_new(tokens, text);
            json_array_append_new(token_lps, json_real(e->lp.logprob));
            json_array_append_new(tops, top);
            json_array_append_new(offsets, json_integer(i ? (json_int_t)job->prog.text.ends[i - 1] : 0));
        }
    }
    if (chat) {
        json_decref(tokens), json_decref(token_lps), json_decref(tops), json_decref(offsets);
        return json_pack("{s:o,s:n}", "content", content, "refusal");
    }
    json_decref(content);
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", token_lps, "top_logprobs", tops,
                     "text_offset", offsets);
}

/* The entries of job's content (their text ends within it). */
static size_t content_lps(const sched_job *job) {
    size_t n = 0;
    while (n < job->prog.n_lps && n < job->prog.text.n_tokens && job->prog.text.ends[n] <= job->prog.content_len) n++;
    return n;
}

/* Choice `index` of a finished job. */
static json_t *choice_json(const oai_request *req, const sched_job *job, int index) {
    json_t *choice;
    if (req->kind == OAI_CHAT) {
        json_t *message = json_pack("{s:s}", "role", "assistant");
        if (job->prog.tool_calls && job->prog.content_len == 0)
            json_object_set_new(message, "content", json_null());
        else
            json_object_set_new(message, "content",
                                json_stringn(job->prog.text.text ? job->prog.text.text : "", job->prog.content_len));
        if (job->prog.tool_calls) json_object_set(message, "tool_calls", job->prog.tool_calls);
        choice = json_pack("{s:i,s:o,s:n,s:s}", "index", index, "message", message, "logprobs", "finish_reason",
                           job->prog.finish_reason);
    } else
        choice = json_pack("{s:i,s:s%,s:n,s:s}", "index", index, "text", job->prog.text.text ? job->prog.text.text : "",
                           job->prog.text.len, "logprobs", "finish_reason", job->prog.finish_reason);
    if (job->req.logprobs) json_object_set_new(choice, "logprobs", oai_logprobs(req, job, 0, content_lps(job)));
    return choice;
}

/* The usage of a job and its followers: the prompt counts once (the other choices started from its rows). */
static json_t *choices_usage(const sched_job *job) {
    uint32_t generated = job->prog.n_gen, drafted = job->prog.drafted, accepted = job->prog.accepted;
    for (uint32_t i = 0; i < job->n_followers; i++) {
        const sched_progress *f = &job->followers[i]->prog;
        generated += f->n_gen, drafted += f->drafted, accepted += f->accepted;
    }
    /* speculative decoding's guesses as OpenAI counts a prediction's tokens: kept (accepted) and not */
    return json_pack("{s:i,s:i,s:i,s:{s:i},s:{s:i,s:i}}", "prompt_tokens", (int)job->req.n_ids, "completion_tokens",
                     (int)generated, "total_tokens", (int)(job->req.n_ids + generated), "prompt_tokens_details",
                     "cached_tokens", (int)job->prog.cached, "completion_tokens_details", "accepted_prediction_tokens",
                     (int)accepted, "rejected_prediction_tokens", (int)(drafted - accepted));
}

json_t *oai_response(const oai_request *req, const sched_job *job) {
    json_t *r = envelope(req, false), *choices = json_array();
    for (uint32_t i = 0; i <= job->n_followers; i++)
        json_array_append_new(choices, choice_json(req, i ? job->followers[i - 1] : job, (int)i));
    json_object_set_new(r, "choices", choices);
    json_object_set_new(r, "usage", choices_usage(job));
    json_object_set_new(r, "timings", timings_json(job));
    return r;
}

json_t *oai_stream_chunk(const oai_request *req, int index, const char *text, size_t len, const char *finish_reason,
                         bool first, json_t *logprobs) {
    json_t *r = envelope(req, true), *choice;
    json_t *finish = finish_reason ? json_string(finish_reason) : json_null();
    if (req->kind == OAI_CHAT) {
        json_t *delta = json_object();
        if (first) json_object_set_new(delta, "role", json_string("assistant"));
        if (len || !finish_reason) json_object_set_new(delta, "content", json_stringn(text ? text : "", len));
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", index, "delta", delta, "logprobs", "finish_reason", finish);
    } else {
        choice = json_pack("{s:i,s:s%,s:n,s:o}", "index", index, "text", text ? text : "", len, "logprobs",
                           "finish_reason", finish);
    }
    if (logprobs) json_object_set_new(choice, "logprobs", logprobs);
    json_object_set_new(r, "choices", json_pack("[o]", choice));
    return r;
}

json_t *oai_tool_calls_chunk(const oai_request *req, int index, const sched_job *job) {
    json_t *calls = json_array(), *call;
    size_t i;
    json_array_foreach(job->prog.tool_calls, i, call) {
        json_t *c = json_deep_copy(call);
        json_object_set_new(c, "index", json_integer((json_int_t)i));
        json_array_append_new(calls, c);
    }
    json_t *r = envelope(req, true);
    json_object_set_new(r, "choices", json_pack("[{s:i,s:{s:o},s:n,s:n}]", "index", index, "delta", "tool_calls",
                                                calls, "logprobs", "finish_reason"));
    return r;
}

json_t *oai_usage_chunk(const oai_request *req, const sched_job *job) {
    json_t *r = envelope(req, true);
    json_object_set_new(r, "choices", json_array());
    json_object_set_new(r, "usage", choices_usage(job));
    json_object_set_new(r, "timings", timings_json(job));
    return r;
}

json_t *oai_error_body(const oai_error *e) {
    return json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", e->message, "type", e->type, "param", e->param[0] ? e->param : NULL,
                     "code", e->code);
}
