#include "api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/err.h"
#include "reply.h"
#include "tenants.h"
#include "toolcall.h"
#include "utf8.h"

#define BAD(param, ...) api_fail(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

/* --- errors --- */

int api_fail(api_error *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
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

/* What each kind of failure is over HTTP (the Messages API derives its types from the status). */
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

int api_fail_with(api_error *e, const char *param, const fkv_error *failure) {
    const unsigned k = (unsigned)failure->code < sizeof failure_http / sizeof *failure_http ? failure->code : 0;
    return api_fail(e, failure_http[k].status, failure_http[k].type, param, failure_http[k].code, "%s", failure->msg);
}

int api_oom(api_error *e) {
    return api_fail(e, 500, "server_error", NULL, "out_of_memory", "out of memory reading the request");
}

/* The 400 of a field, named as naming says. */
static int bad_field(api_error *e, api_naming naming, const char *field, const char *what) {
    return naming == API_QUOTED ? BAD(field, "'%s' must be %s", field, what) : BAD(NULL, "%s: must be %s", field, what);
}

/* --- the body --- */

static _Thread_local bool json_out_of_memory;

static void *json_alloc(size_t n) {
    void *p = malloc(n);
    if (!p) json_out_of_memory = true;
    return p;
}

void api_json_init(void) { json_set_alloc_funcs(json_alloc, free); }

void api_json_lost(void) { json_out_of_memory = true; }

bool api_json_failed(void) {
    const bool failed = json_out_of_memory;
    json_out_of_memory = false;
    return failed;
}

json_t *api_begin(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job,
                  api_error *e) {
    *req = (api_request){.ctx = ctx, .n = 1, .created = (long long)time(NULL)};
    job->req.sampling = fkv_sampler_default_params();
    job->req.sampling.seed = (uint64_t)req->created;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (json_is_object(root)) return root;
    if (root) {
        json_decref(root);
        BAD(NULL, "the request body must be a JSON object");
    } else if (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0]) {
        /* jansson leaves the error blank (line -1) when an allocation fails before it could say anything */
        api_fail(e, 500, "server_error", NULL, "out_of_memory", "out of memory reading the request body");
    } else {
        BAD(NULL, "the request body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    }
    return NULL;
}

char *api_body_model(const char *body, size_t len) {
    json_t *root = json_loadb(body, len, 0, NULL);
    const char *name = json_string_value(json_object_get(root, "model"));
    char *copy = name ? strdup(name) : NULL;
    json_decref(root);
    return copy;
}

void api_new_id(char out[48], const char *prefix, bool random) {
    static unsigned long long counter;
    const unsigned long long stamp[2] = {(unsigned long long)time(NULL),
                                         __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED)};
    const int at = snprintf(out, 48, "%s", prefix);
    unsigned char bytes[16];
    if (!random) {
        snprintf(out + at, (size_t)(48 - at), "%llx%llx", stamp[0], stamp[1]);
        return;
    }
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) memcpy(bytes, stamp, sizeof bytes);
    for (int i = 0; i < 16; i++) snprintf(out + at + 2 * i, 3, "%02x", bytes[i]);
}

/* --- fields --- */

int api_number(const json_t *root, const char *key, double lo, double hi, float *out, api_naming naming, api_error *e) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        char what[64];
        snprintf(what, sizeof what, "a number between %g and %g", lo, hi);
        return bad_field(e, naming, key, what);
    }
    *out = (float)json_number_value(v);
    return 0;
}

int api_bool(const json_t *root, const char *key, bool *out, api_naming naming, api_error *e) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad_field(e, naming, key, "a boolean");
    *out = json_is_true(v);
    return 0;
}

/* The request's speculative object over the server's parameters. */
static int parse_speculative(const api_context *ctx, const json_t *root, sched_job *job, api_error *e) {
    job->req.spec = ctx->spec;
    json_t *spec = json_object_get(root, "speculative");
    if (!spec || json_is_null(spec)) return 0;
    json_t *mode = json_object_get(spec, "mode"), *draft_max = json_object_get(spec, "draft_max");
    if (!json_is_object(spec) || json_object_size(spec) > (size_t)(!!mode + !!draft_max))
        return BAD("speculative", "'speculative' must be an object with 'mode' and/or 'draft_max'");
    if (mode) {
        const int m = fkv_spec_mode_parse(json_string_value(mode));
        if (m < 0 || m == FKV_SPEC_AUTO) /* auto is the server's choice, made once for its engine */
            return BAD("speculative.mode", "'speculative.mode' must be \"off\", \"lookup\", \"draft\" or \"mtp\"");
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

int api_common_fields(const api_context *ctx, const json_t *root, sched_job *job, char cache_key[65], api_error *e) {
    if (parse_speculative(ctx, root, job, e)) return -1;
    json_t *salt = json_object_get(root, "cache_salt");
    if (salt && !json_is_null(salt) && (!json_is_string(salt) || json_string_length(salt) == 0))
        return BAD("cache_salt", "'cache_salt' must be a non-empty string");
    fkv_error err = {0};
    if (tenants_salt(ctx->tenant, json_string_value(salt), &job->req.salt, &err))
        return api_fail_with(e, "cache_salt", &err);
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

/* --- tools, constraints, the prompt --- */

json_t *api_function_tool(const json_t *name, const json_t *description, const json_t *parameters) {
    json_t *fn = json_pack("{s:O}", "name", name);
    if (json_is_string(description)) json_object_set(fn, "description", (json_t *)description);
    if (json_is_object(parameters)) json_object_set(fn, "parameters", (json_t *)parameters);
    return json_pack("{s:s,s:o}", "type", "function", "function", fn);
}

bool api_names_tool(const json_t *tools, const json_t *name) {
    for (size_t i = 0; i < json_array_size(tools); i++)
        if (json_equal(json_object_get(json_array_get(tools, i), "name"), (json_t *)name)) return true;
    return false;
}

/* The GBNF rules (prefixed "answer-") of a response_format's JSON: its schema's, or any object's (json_object). NULL
 * with err. */
static char *format_rules(const json_t *format, fkv_error *err) {
    const json_t *schema = json_object_get(json_object_get(format, "json_schema"), "schema");
    char *text = schema ? json_dumps(schema, JSON_COMPACT) : strdup("{\"type\": \"object\"}");
    char *rules = text ? fkv_json_schema_gbnf(text, strlen(text), "answer-", err) : NULL;
    if (!text) err_nomem(err, "out of memory for a grammar");
    free(text);
    return rules;
}

int api_constrain(const api_context *ctx, const chat_template *t, sched_job *job, const json_t *tools, api_error *e) {
    job->req.form = reply_form_of(t, tools != NULL);
    if (tools && !(job->req.tools = json_deep_copy(tools))) return api_oom(e);
    const json_t *choice = job->req.tool_choice, *format = job->req.response_format;
    const char *named = json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
    const bool offered = json_array_size(tools) > 0;
    const bool enforced = offered && (named || (json_is_string(choice) && !strcmp(json_string_value(choice), "required")));
    if (job->req.grammar && (format || enforced))
        return BAD(enforced ? "tool_choice" : "response_format",
                   "a grammar constrains the output alone: no response_format or enforced tool_choice beside it");
    /* As OpenAI composes them: an enforced tool_choice excludes a text answer, which is all a response_format shapes,
     * so the calls alone are constrained; a response_format with tools offered (tool_choice auto) lets the model either
     * call them or answer in the format. */
    const bool calls = enforced || (offered && format), answer = format && !enforced;
    if (!calls && !answer) return 0;
    fkv_error err = {0};
    char *call_rules = calls ? toolcall_gbnf(job->req.form.calls, tools, named, !job->req.single_tool_call, &err) : NULL;
    char *answer_rules = answer && (call_rules || !calls) ? format_rules(format, &err) : NULL;
    /* the field a failure names: the part whose rules failed, else the last part the grammar took */
    const char *param = answer && (call_rules || !calls) ? "response_format" : enforced ? "tool_choice" : "tools";
    char *rules = NULL, *gbnf = NULL;
    if ((call_rules || !calls) && (answer_rules || !answer) &&
        asprintf(&rules, "%s%s", call_rules ? call_rules : "", answer_rules ? answer_rules : "") >= 0) {
        /* What the model writes before the answer (its reasoning) as its form has it; the answer is the content. */
        gbnf = reply_gbnf(&job->req.form, rules, calls ? "calls" : NULL, answer ? "answer-root" : NULL);
        if (!gbnf) err_nomem(&err, "out of memory for a grammar");
    }
    if (gbnf) job->req.grammar = fkv_grammar_new(ctx->model, gbnf, strlen(gbnf), &err);
    free(call_rules);
    free(answer_rules);
    free(rules);
    free(gbnf);
    if (job->req.grammar) return 0;
    return !err.msg[0] || err.code == FKV_E_NOMEM ? api_oom(e) : BAD(param, "%s: %s", param, err.msg);
}

int api_put_content(convo *c, const json_t *content, const char *param, api_part_text *part_text, api_error *e) {
    if (json_is_string(content)) {
        convo_text(c, json_string_value(content), json_string_length(content));
        return 0;
    }
    if (!json_is_array(content)) return BAD(param, "'%s' must be a string or an array of text parts", param);
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const json_t *text = part_text(part, i, param, e);
        if (!text) return -1;
        convo_text(c, json_string_value(text), json_string_length(text));
    }
    return 0;
}

int api_render(const api_context *ctx, const chat_template *t, convo *c, const json_t *tools, const char *param,
               sched_job *job, api_error *e) {
    const chat_message *msgs = convo_messages(c);
    if (!msgs) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    fkv_error err = {0};
    if (chat_prompt_ids(ctx->model, t, msgs, c->n, tools, &job->req.ids, &job->req.n_ids, &err))
        return api_fail_with(e, param, &err);
    return 0;
}

void api_cap_tokens(const api_context *ctx, sched_job *job, json_int_t limit) {
    job->req.max_tokens = ctx->n_ctx - job->req.n_ids;
    if (limit && (json_int_t)job->req.max_tokens > limit) job->req.max_tokens = (uint32_t)limit;
}

void api_request_free(api_request *req) {
    json_decref(req->base);
    json_decref(req->tools);
    free(req->instructions);
    free(req->prompt);
    *req = (api_request){0};
}
