#include "responses.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openai.h"

#define BAD(param, ...) api_fail(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

/* --- the store --- */

/* One stored response. The list is short enough (--responses-max) that a lookup walks it. */
typedef struct resp_entry {
    char id[48];
    char *salt;         /* NULL: the default */
    int32_t *ids;       /* the prompt and the output as generated (an end-of-generation token at its end dropped) */
    uint32_t n_ids;
    char *instructions; /* the chain's, or NULL */
    json_t *tools;      /* the chain's, as given, or NULL */
    json_t *response;   /* the response object, as returned */
    size_t bytes;
    struct resp_entry *prev, *next; /* most recently used first */
} resp_entry;

struct resp_store {
    pthread_mutex_t mu;
    resp_entry *head, *tail;
    uint32_t count, max_count;
    size_t bytes, max_bytes;
};

resp_store *resp_store_new(uint32_t max_count, size_t max_bytes) {
    resp_store *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->max_count = max_count;
    s->max_bytes = max_bytes;
    return s;
}

static void entry_free(resp_entry *x) {
    free(x->salt);
    free(x->ids);
    free(x->instructions);
    json_decref(x->tools);
    json_decref(x->response);
    free(x);
}

static void unlink_entry(resp_store *s, resp_entry *x) {
    if (x->prev) x->prev->next = x->next;
    else s->head = x->next;
    if (x->next) x->next->prev = x->prev;
    else s->tail = x->prev;
    x->prev = x->next = NULL;
    s->count--;
    s->bytes -= x->bytes;
}

static void push_front(resp_store *s, resp_entry *x) {
    x->prev = NULL;
    x->next = s->head;
    if (s->head) s->head->prev = x;
    else s->tail = x;
    s->head = x;
    s->count++;
    s->bytes += x->bytes;
}

void resp_store_free(resp_store *s) {
    if (!s) return;
    for (resp_entry *x = s->head, *next; x; x = next) {
        next = x->next;
        entry_free(x);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static bool same_salt(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* The entry id under salt, made the most recently used (s->mu held); NULL when absent or another salt's. */
static resp_entry *find_locked(resp_store *s, const char *id, const char *salt) {
    for (resp_entry *x = s->head; x; x = x->next)
        if (!strcmp(x->id, id) && same_salt(x->salt, salt)) {
            unlink_entry(s, x);
            push_front(s, x);
            return x;
        }
    return NULL;
}

/* Keep x (taken); the least recently used go until it fits. An entry larger than the whole budget is dropped. */
static void store_put(resp_store *s, resp_entry *x) {
    if (x->bytes > s->max_bytes || s->max_count == 0) {
        entry_free(x);
        return;
    }
    pthread_mutex_lock(&s->mu);
    while (s->tail && (s->count >= s->max_count || s->bytes + x->bytes > s->max_bytes)) {
        resp_entry *old = s->tail;
        unlink_entry(s, old);
        entry_free(old);
    }
    push_front(s, x);
    pthread_mutex_unlock(&s->mu);
}

static int not_found(api_error *e, const char *param, const char *what, const char *id) {
    return api_fail(e, 404, "invalid_request_error", param, param ? "previous_response_not_found" : NULL,
                    "%s with id '%.100s' not found.", what, id);
}

json_t *resp_store_get(resp_store *s, const char *id, const char *salt, api_error *e) {
    pthread_mutex_lock(&s->mu);
    resp_entry *x = find_locked(s, id, salt);
    json_t *r = x ? json_deep_copy(x->response) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (!x) not_found(e, NULL, "Response", id);
    return r;
}

json_t *resp_store_delete(resp_store *s, const char *id, const char *salt, api_error *e) {
    pthread_mutex_lock(&s->mu);
    resp_entry *x = find_locked(s, id, salt);
    if (x) unlink_entry(s, x);
    pthread_mutex_unlock(&s->mu);
    if (!x) {
        not_found(e, NULL, "Response", id);
        return NULL;
    }
    json_t *r = json_pack("{s:s,s:s,s:b}", "id", x->id, "object", "response", "deleted", 1);
    entry_free(x);
    return r;
}

/* What a follow-up continues from: a copy of the entry's ids, instructions and tools (the entry may go meanwhile). */
typedef struct {
    int32_t *ids;
    uint32_t n_ids;
    char *instructions;
    json_t *tools;
} resp_chain;

static int chain_get(resp_store *s, const char *id, const char *salt, resp_chain *c, api_error *e) {
    pthread_mutex_lock(&s->mu);
    resp_entry *x = find_locked(s, id, salt);
    if (x) {
        c->ids = malloc(sizeof(int32_t) * x->n_ids);
        if (c->ids) memcpy(c->ids, x->ids, sizeof(int32_t) * x->n_ids);
        c->n_ids = x->n_ids;
        c->instructions = x->instructions ? strdup(x->instructions) : NULL;
        c->tools = x->tools ? json_deep_copy(x->tools) : NULL;
    }
    const bool copied = x && c->ids && (!x->instructions || c->instructions) && (!x->tools || c->tools);
    pthread_mutex_unlock(&s->mu);
    if (!x) return not_found(e, "previous_response_id", "Previous response", id);
    if (!copied) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

static void chain_free(resp_chain *c) {
    free(c->ids);
    free(c->instructions);
    json_decref(c->tools);
}

/* --- the request --- */

/* A content part's text: the Responses' parts are {type: input_text | output_text, text}. */
static const json_t *part_text(const json_t *part, size_t i, const char *param, api_error *e) {
    const char *type = json_string_value(json_object_get(part, "type"));
    const json_t *text = json_object_get(part, "text");
    if (type && (!strcmp(type, "input_image") || !strcmp(type, "input_file") || !strcmp(type, "input_audio")))
        BAD(param, "'%s[%zu]' is an %s part: this model reads text only", param, i, type);
    else if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text")) || !json_is_string(text))
        BAD(param, "'%s[%zu]' must be {\"type\": \"input_text\" or \"output_text\", \"text\": string}", param, i);
    else
        return text;
    return NULL;
}

/* input (a string, or items) appended to c as chat messages; a run of function_call items joins the assistant
 * message before it, as one turn with its calls. */
static int parse_input(convo *c, const json_t *input, api_error *e) {
    if (json_is_string(input)) {
        convo_add(c, "user");
        convo_text(c, json_string_value(input), json_string_length(input));
        return 0;
    }
    if (!json_is_array(input) || json_array_size(input) == 0)
        return BAD("input", "'input' must be a string or a non-empty array of items");
    size_t i;
    json_t *item;
    char param[48];
    json_array_foreach(input, i, item) {
        snprintf(param, sizeof param, "input[%zu]", i);
        if (!json_is_object(item)) return BAD(param, "'%s' must be an object", param);
        const json_t *type_v = json_object_get(item, "type"), *role_v = json_object_get(item, "role");
        const char *type = json_is_string(type_v) ? json_string_value(type_v) : role_v ? "message" : "";
        if (!strcmp(type, "message")) {
            const char *role = json_string_value(role_v);
            if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
                          strcmp(role, "developer")))
                return BAD(param, "'%s.role' must be user, assistant, system or developer", param);
            convo_add(c, !strcmp(role, "user") ? "user" : !strcmp(role, "assistant") ? "assistant" : "system");
            char content[64];
            snprintf(content, sizeof content, "%s.content", param);
            if (api_put_content(c, json_object_get(item, "content"), content, part_text, e)) return -1;
        } else if (!strcmp(type, "function_call")) {
            const json_t *call_id = json_object_get(item, "call_id"), *name = json_object_get(item, "name");
            const json_t *args = json_object_get(item, "arguments");
            if (!json_is_string(call_id) || !json_is_string(name) || !json_is_string(args))
                return BAD(param, "'%s' (function_call) needs string call_id, name and arguments", param);
            const char *last = convo_last_role(c);
            if (!last || strcmp(last, "assistant")) convo_add(c, "assistant");
            convo_call(c, json_string_value(name), json_string_value(args));
        } else if (!strcmp(type, "function_call_output")) {
            const json_t *call_id = json_object_get(item, "call_id"), *output = json_object_get(item, "output");
            if (!json_is_string(call_id)) return BAD(param, "'%s.call_id' must be a string", param);
            convo_add(c, "tool");
            char at[64];
            snprintf(at, sizeof at, "%s.output", param);
            if (api_put_content(c, output, at, part_text, e)) return -1;
        } else {
            return BAD(param, "'%s' is a%s item; flatkv takes message, function_call and function_call_output items",
                       param, *type ? "n unsupported" : " typeless");
        }
    }
    return 0;
}

/* tools: function tools ({type: "function", name, description, parameters}), checked; *chat_tools: chat's shape of
 * them (what the templates render), or NULL for none. */
static int parse_tools(const json_t *tools, json_t **chat_tools, api_error *e) {
    *chat_tools = NULL;
    if (!tools || json_is_null(tools) || (json_is_array(tools) && json_array_size(tools) == 0)) return 0;
    if (!json_is_array(tools)) return BAD("tools", "'tools' must be an array");
    json_t *out = json_array();
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        const char *type = json_string_value(json_object_get(tool, "type"));
        const json_t *name = json_object_get(tool, "name"), *description = json_object_get(tool, "description");
        const json_t *parameters = json_object_get(tool, "parameters");
        if (type && strcmp(type, "function")) {
            json_decref(out);
            return BAD("tools", "'tools[%zu]' is a '%s' tool: only function tools are supported", i, type);
        }
        if (!type || !json_is_string(name) || json_string_length(name) == 0 ||
            (description && !json_is_null(description) && !json_is_string(description)) ||
            (parameters && !json_is_null(parameters) && !json_is_object(parameters))) {
            json_decref(out);
            return BAD("tools", "'tools[%zu]' must be {\"type\": \"function\", \"name\": string, \"description\": "
                       "string, \"parameters\": object}", i);
        }
        json_array_append_new(out, api_function_tool(name, description, parameters));
    }
    *chat_tools = out;
    return 0;
}

/* tool_choice and parallel_tool_calls, checked against the tools in effect, into job in chat's form. */
static int parse_tool_choice(const json_t *root, const json_t *tools, sched_job *job, api_error *e) {
    const json_t *choice = json_object_get(root, "tool_choice");
    bool parallel = true;
    if (api_bool(root, "parallel_tool_calls", &parallel, API_QUOTED, e)) return -1;
    job->req.single_tool_call = !parallel;
    if (!choice || json_is_null(choice)) return 0;
    const char *s = json_string_value(choice);
    if (s && (!strcmp(s, "none") || !strcmp(s, "auto") || !strcmp(s, "required"))) {
        if (!strcmp(s, "required") && !tools) return BAD("tool_choice", "'tool_choice' \"required\" needs tools");
        job->req.tool_choice = json_string(s);
        return job->req.tool_choice ? 0 : api_oom(e);
    }
    const json_t *type = json_object_get(choice, "type"), *name = json_object_get(choice, "name");
    if (!json_is_object(choice) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
        !json_is_string(name))
        return BAD("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                   "\"name\": ...}");
    if (!api_names_tool(tools, name)) return BAD("tool_choice", "'tool_choice.name' must name one of the tools");
    job->req.tool_choice = json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name);
    return job->req.tool_choice ? 0 : api_oom(e);
}

/* text.format into job->req.response_format, chat's shape: json_object as it is, json_schema's fields under
 * "json_schema"; "text" is no constraint. */
static int parse_text(const json_t *text, sched_job *job, api_error *e) {
    if (!text || json_is_null(text)) return 0;
    const json_t *format = json_object_get(text, "format");
    if (!json_is_object(text)) return BAD("text", "'text' must be an object");
    if (!format || json_is_null(format)) return 0;
    const char *type = json_string_value(json_object_get(format, "type"));
    if (type && !strcmp(type, "text")) return 0;
    if (type && !strcmp(type, "json_object")) {
        job->req.response_format = json_pack("{s:s}", "type", "json_object");
        return job->req.response_format ? 0 : api_oom(e);
    }
    const json_t *name = json_object_get(format, "name"), *schema = json_object_get(format, "schema");
    const json_t *strict = json_object_get(format, "strict"), *description = json_object_get(format, "description");
    if (!type || strcmp(type, "json_schema"))
        return BAD("text.format", "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    if (!json_is_string(name) || !json_is_object(schema) || (strict && !json_is_null(strict) && !json_is_boolean(strict)) ||
        (description && !json_is_null(description) && !json_is_string(description)))
        return BAD("text.format", "'text.format' json_schema needs a string 'name' and an object 'schema' (and "
                   "optionally a boolean 'strict' and a string 'description')");
    json_t *js = json_pack("{s:O,s:O}", "name", name, "schema", schema);
    if ((json_is_boolean(strict) && json_object_set(js, "strict", (json_t *)strict)) ||
        (json_is_string(description) && json_object_set(js, "description", (json_t *)description))) {
        json_decref(js);
        return api_oom(e);
    }
    job->req.response_format = js ? json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", js) : NULL;
    return job->req.response_format ? 0 : api_oom(e);
}

static bool is_string(const json_t *v, const char *s) { return json_is_string(v) && !strcmp(json_string_value(v), s); }

/* The fields that change what flatkv would do in ways it does not: refused rather than ignored. */
static int refuse_unsupported(const json_t *root, api_error *e) {
    const json_t *truncation = json_object_get(root, "truncation"), *top = json_object_get(root, "top_logprobs");
    if (json_is_true(json_object_get(root, "background")))
        return BAD("background", "background responses are not supported");
    const char *keys[] = {"conversation", "prompt"};
    for (int k = 0; k < 2; k++) {
        const json_t *v = json_object_get(root, keys[k]);
        if (v && !json_is_null(v)) return BAD(keys[k], "'%s' is not supported: send input items", keys[k]);
    }
    if (truncation && !json_is_null(truncation) && !is_string(truncation, "disabled"))
        return BAD("truncation", "only 'truncation' \"disabled\" is supported");
    if (top && !json_is_null(top) && !(json_is_integer(top) && json_integer_value(top) == 0))
        return BAD("top_logprobs", "'top_logprobs' is not supported on /v1/responses");
    return 0;
}

/* A sampling default as the request would have written it (0.95, not the float's 0.949999988). */
static json_t *sampling_value(float v) {
    char text[32];
    snprintf(text, sizeof text, "%.6g", (double)v);
    return json_real(strtod(text, NULL));
}

/* A follow-up's prompt: the chain's ids as they were fed and generated (taken), then what the template writes after
 * the reply — its end of turn, c's messages, the generation prompt (chat_continuation_ids). */
static int continue_chain(const api_context *ctx, convo *c, resp_chain *chain, const char *instructions, sched_job *job,
                          api_error *e) {
    const chat_message *msgs = convo_messages(c);
    int32_t *more, *ids;
    uint32_t n_more;
    fkv_error err = {0};
    if (!msgs) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    if (chat_continuation_ids(ctx->model, ctx->tmpl, instructions, msgs, c->n, chain->ids[chain->n_ids - 1], &more,
                              &n_more, &err))
        return api_fail_with(e, "input", &err);
    if (!(ids = realloc(chain->ids, sizeof(int32_t) * (chain->n_ids + n_more)))) {
        free(more);
        return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    memcpy(ids + chain->n_ids, more, sizeof(int32_t) * n_more);
    free(more);
    job->req.ids = ids;
    job->req.n_ids = chain->n_ids + n_more;
    chain->ids = NULL;
    return 0;
}

int resp_parse(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job, api_error *e) {
    json_t *root = api_begin(ctx, body, len, req, job, e), *chat_tools = NULL;
    if (!root) return -1;
    convo c = {0};
    resp_chain chain = {0};
    int rc = -1;
    api_new_id(req->id, "resp_", true);
    snprintf(job->req.id, sizeof job->req.id, "%s", req->id + strlen("resp_"));
    const json_t *model = json_object_get(root, "model"), *prev = json_object_get(root, "previous_response_id");
    const json_t *instructions = json_object_get(root, "instructions"), *metadata = json_object_get(root, "metadata");
    const json_t *max_out = json_object_get(root, "max_output_tokens"), *tools = json_object_get(root, "tools");
    req->store_it = true;
    if (refuse_unsupported(root, e) || api_bool(root, "stream", &req->stream, API_QUOTED, e) ||
        api_bool(root, "store", &req->store_it, API_QUOTED, e))
        goto out;
    if ((model && !json_is_null(model) && !json_is_string(model)) || (prev && !json_is_null(prev) && !json_is_string(prev)) ||
        (instructions && !json_is_null(instructions) && !json_is_string(instructions)) ||
        (metadata && !json_is_null(metadata) && !json_is_object(metadata))) {
        const char *param = model && !json_is_null(model) && !json_is_string(model) ? "model"
                            : prev && !json_is_null(prev) && !json_is_string(prev) ? "previous_response_id"
                            : metadata && !json_is_null(metadata) && !json_is_object(metadata) ? "metadata"
                                                                                               : "instructions";
        BAD(param, "'%s' must be %s", param, !strcmp(param, "metadata") ? "an object" : "a string");
        goto out;
    }
    if (max_out && !json_is_null(max_out) && (!json_is_integer(max_out) || json_integer_value(max_out) < 1)) {
        BAD("max_output_tokens", "'max_output_tokens' must be a positive integer");
        goto out;
    }
    if (api_number(root, "temperature", 0, 2, &job->req.sampling.temp, API_QUOTED, e) ||
        api_number(root, "top_p", 0, 1, &job->req.sampling.top_p, API_QUOTED, e) ||
        api_common_fields(ctx, root, job, req->cache_key, e) || parse_text(json_object_get(root, "text"), job, e) ||
        parse_tools(tools, &chat_tools, e))
        goto out;

    /* The instructions and tools in effect: a chain's own, which a follow-up may repeat but not change. */
    const bool continued = json_is_string(prev);
    if (continued && chain_get(ctx->store, json_string_value(prev), job->req.salt, &chain, e)) goto out;
    const json_t *given_tools = chat_tools ? tools : NULL;
    if (continued) {
        if (json_is_string(instructions) && (!chain.instructions || strcmp(chain.instructions, json_string_value(instructions)))) {
            BAD("instructions", "'instructions' differ from those of the chain previous_response_id continues, which "
                "are in its ids: repeat them or leave them out");
            goto out;
        }
        if (given_tools && !json_equal((json_t *)given_tools, chain.tools)) {
            BAD("tools", "'tools' differ from those of the chain previous_response_id continues, which are in its "
                "ids: repeat them or leave them out");
            goto out;
        }
        req->instructions = chain.instructions;
        req->tools = chain.tools;
        chain.instructions = NULL;
        chain.tools = NULL;
    } else {
        req->instructions = json_is_string(instructions) ? strdup(json_string_value(instructions)) : NULL;
        req->tools = given_tools ? json_deep_copy(given_tools) : NULL;
        if ((json_is_string(instructions) && !req->instructions) || (given_tools && !req->tools)) {
            api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
            goto out;
        }
    }
    if (continued) { /* the chain's tools, in chat's shape */
        json_decref(chat_tools);
        if (parse_tools(req->tools, &chat_tools, e)) goto out;
    }
    /* reasoning.effort: gpt-oss's reasoning effort (its template writes it in the system header) */
    chat_template t = *ctx->tmpl;
    const json_t *reasoning = json_object_get(root, "reasoning"), *effort = json_object_get(reasoning, "effort");
    if (reasoning && !json_is_null(reasoning) &&
        (!json_is_object(reasoning) ||
         (effort && !json_is_null(effort) && !is_string(effort, "low") && !is_string(effort, "medium") &&
          !is_string(effort, "high")))) {
        BAD("reasoning", "'reasoning' must be an object whose 'effort' is \"low\", \"medium\" or \"high\"");
        goto out;
    }
    t.reasoning_effort = json_string_value(effort);
    if (parse_tool_choice(root, req->tools, job, e) ||
        api_constrain(ctx, &t, job, is_string(job->req.tool_choice, "none") ? NULL : chat_tools, e))
        goto out;

    if (!continued && req->instructions) {
        convo_add(&c, "system");
        convo_text(&c, req->instructions, strlen(req->instructions));
    }
    if (parse_input(&c, json_object_get(root, "input"), e)) goto out;
    if (continued ? continue_chain(ctx, &c, &chain, req->instructions, job, e)
                  : api_render(ctx, &t, &c, chat_tools, "input", job, e))
        goto out;
    if (job->req.n_ids >= ctx->n_ctx) {
        api_fail(e, 400, "invalid_request_error", "input", "context_length_exceeded",
                 "This model's maximum context length is %u tokens. However, your input has %u tokens, which "
                 "leaves no room for the output.", ctx->n_ctx,
                 job->req.n_ids);
        goto out;
    }
    req->n_prompt = job->req.n_ids;
    if (!(req->prompt = malloc(sizeof(int32_t) * job->req.n_ids))) {
        api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    memcpy(req->prompt, job->req.ids, sizeof(int32_t) * job->req.n_ids);
    api_cap_tokens(ctx, job, json_is_integer(max_out) ? json_integer_value(max_out) : 0);

    /* What the response object repeats of the request. */
    const json_t *temp = json_object_get(root, "temperature"), *top_p = json_object_get(root, "top_p");
    const json_t *choice = json_object_get(root, "tool_choice");
    json_t *format = job->req.response_format ? json_deep_copy(json_object_get(json_object_get(root, "text"), "format"))
                                          : json_pack("{s:s}", "type", "text");
    req->base = json_pack(
        "{s:o,s:o,s:o,s:s,s:b,s:o,s:{s:o,s:n},s:b,s:o,s:{s:o},s:o,s:o,s:o,s:s,s:n}", "instructions",
        req->instructions ? json_string(req->instructions) : json_null(), "max_output_tokens",
        json_is_integer(max_out) ? json_copy((json_t *)max_out) : json_null(), "previous_response_id",
        continued ? json_copy((json_t *)prev) : json_null(), "model",
        json_is_string(model) ? json_string_value(model) : ctx->model_id, "parallel_tool_calls",
        !job->req.single_tool_call, "metadata", json_is_object(metadata) ? json_deep_copy(metadata) : json_object(),
        "reasoning", "effort", json_is_string(effort) ? json_copy((json_t *)effort) : json_null(), "summary", "store",
        req->store_it, "temperature",
        json_is_number(temp) ? json_deep_copy(temp) : sampling_value(job->req.sampling.temp), "text", "format", format,
        "tool_choice", choice && !json_is_null(choice) ? json_deep_copy(choice) : json_string("auto"), "tools",
        req->tools ? json_deep_copy(req->tools) : json_array(), "top_p",
        json_is_number(top_p) ? json_deep_copy(top_p) : sampling_value(job->req.sampling.top_p), "truncation",
        "disabled", "user");
    if (!req->base) {
        api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    rc = 0;
out:
    chain_free(&chain);
    convo_free(&c);
    json_decref(chat_tools);
    json_decref(root);
    return rc;
}

/* --- the answer --- */

static bool incomplete(const sched_job *job) {
    return !job->prog.tool_calls && !strcmp(job->prog.finish_reason, "length");
}

static bool has_message(const sched_job *job) { return job->prog.reply.n_content || !job->prog.tool_calls; }

static json_t *message_item(const api_request *req, const char *text, size_t len, const char *status) {
    json_t *content = status && !strcmp(status, "in_progress")
                          ? json_array()
                          : json_pack("[{s:s,s:s%,s:[],s:[]}]", "type", "output_text", "text", text ? text : "", len,
                                      "annotations", "logprobs");
    return json_pack("{s:s,s:s+,s:s,s:s,s:o}", "type", "message", "id", "msg_", req->id + strlen("resp_"), "status",
                     status, "role", "assistant", "content", content);
}

/* Call i of the job as a function_call item (arguments "" while in progress). */
static json_t *call_item(const api_request *req, const sched_job *job, size_t i, bool in_progress) {
    const json_t *call = json_array_get(job->prog.tool_calls, i), *fn = json_object_get(call, "function");
    char id[64];
    snprintf(id, sizeof id, "fc_%s_%zu", req->id + strlen("resp_"), i);
    return json_pack("{s:s,s:s,s:O,s:O,s:s,s:s}", "type", "function_call", "id", id, "call_id",
                     json_object_get(call, "id"), "name", json_object_get(fn, "name"), "arguments",
                     in_progress ? "" : json_string_value(json_object_get(fn, "arguments")), "status",
                     in_progress ? "in_progress" : "completed");
}

/* The response object: in progress (job NULL), or the finished job's. */
static json_t *response_object(const api_request *req, const sched_job *job) {
    json_t *r = json_pack("{s:s,s:s,s:I,s:s,s:n,s:o}", "id", req->id, "object", "response", "created_at",
                          (json_int_t)req->created, "status",
                          !job ? "in_progress" : incomplete(job) ? "incomplete" : "completed", "error",
                          "incomplete_details",
                          job && incomplete(job) ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    json_object_update(r, req->base);
    json_t *output = json_array();
    if (job && has_message(job))
        json_array_append_new(output, message_item(req, job->prog.reply.content, job->prog.reply.n_content,
                                                   incomplete(job) ? "incomplete" : "completed"));
    for (size_t i = 0; job && i < json_array_size(job->prog.tool_calls); i++)
        json_array_append_new(output, call_item(req, job, i, false));
    json_object_set_new(r, "output", output);
    json_object_set_new(r, "usage",
                        !job
                            ? json_null()
                            : json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", (int)req->n_prompt,
                                        "input_tokens_details", "cached_tokens", (int)job->prog.cached, "output_tokens",
                                        (int)job->prog.n_gen, "output_tokens_details", "reasoning_tokens", 0,
                                        "total_tokens", (int)(req->n_prompt + job->prog.n_gen)));
    return r;
}

/* Keep the finished response: its object, and its ids — the prompt, then the output as generated but for an
 * end-of-generation token at its end, which was never fed and which the template's end of turn replaces. */
static void keep(api_request *req, const sched_job *job, const json_t *response) {
    uint32_t n_out = job->prog.n_out;
    if (n_out && fkv_token_is_eog(req->ctx->model, job->prog.out[n_out - 1])) n_out--;
    resp_entry *x = calloc(1, sizeof *x);
    if (!x || !(x->ids = malloc(sizeof(int32_t) * (req->n_prompt + n_out)))) {
        free(x);
        return; /* out of memory: not kept, as if evicted */
    }
    snprintf(x->id, sizeof x->id, "%s", req->id);
    memcpy(x->ids, req->prompt, sizeof(int32_t) * req->n_prompt);
    if (n_out) memcpy(x->ids + req->n_prompt, job->prog.out, sizeof(int32_t) * n_out);
    x->n_ids = req->n_prompt + n_out;
    x->salt = job->req.salt ? strdup(job->req.salt) : NULL;
    x->instructions = req->instructions ? strdup(req->instructions) : NULL;
    x->tools = req->tools ? json_deep_copy(req->tools) : NULL;
    x->response = json_deep_copy(response);
    if ((job->req.salt && !x->salt) || (req->instructions && !x->instructions) || (req->tools && !x->tools) ||
        !x->response) {
        entry_free(x);
        return; /* out of memory: not kept, as if evicted */
    }
    char *dump = json_dumps(response, JSON_COMPACT), *tools = x->tools ? json_dumps(x->tools, JSON_COMPACT) : NULL;
    x->bytes = sizeof *x + sizeof(int32_t) * x->n_ids + (dump ? 2 * strlen(dump) : 0) + (tools ? 2 * strlen(tools) : 0) +
               (x->instructions ? strlen(x->instructions) : 0); /* a parsed JSON value takes about twice its text */
    free(dump);
    free(tools);
    store_put(req->ctx->store, x);
}

json_t *resp_response(api_request *req, const sched_job *job) {
    json_t *r = response_object(req, job);
    if (req->store_it) keep(req, job, r);
    return r;
}

static void emit(api_request *req, json_t *events, json_t *event) {
    json_object_set_new(event, "sequence_number", json_integer(req->seq++));
    json_array_append_new(events, event);
}

static json_t *text_part(const char *text, size_t len) {
    return json_pack("{s:s,s:s%,s:[]}", "type", "output_text", "text", text ? text : "", len, "annotations");
}

/* The message item's ends, at output_index 0: added with its empty part, or its text done, part done, item done. */
static void message_open(api_request *req, json_t *events) {
    char item_id[48];
    snprintf(item_id, sizeof item_id, "msg_%s", req->id + strlen("resp_"));
    emit(req, events, json_pack("{s:s,s:i,s:o}", "type", "response.output_item.added", "output_index", 0, "item",
                                message_item(req, NULL, 0, "in_progress")));
    emit(req, events, json_pack("{s:s,s:s,s:i,s:i,s:o}", "type", "response.content_part.added", "item_id", item_id,
                                "output_index", 0, "content_index", 0, "part", text_part("", 0)));
    req->open = true;
}

static void message_close(api_request *req, const sched_job *job, json_t *events, const json_t *item) {
    const char *item_id = json_string_value(json_object_get(item, "id"));
    emit(req, events,
         json_pack("{s:s,s:s,s:i,s:i,s:s%,s:[]}", "type", "response.output_text.done", "item_id", item_id,
                   "output_index", 0, "content_index", 0, "text", job->prog.reply.content ? job->prog.reply.content : "",
                   job->prog.reply.n_content, "logprobs"));
    emit(req, events,
         json_pack("{s:s,s:s,s:i,s:i,s:o}", "type", "response.content_part.done", "item_id", item_id, "output_index", 0,
                   "content_index", 0, "part", text_part(job->prog.reply.content, job->prog.reply.n_content)));
    emit(req, events, json_pack("{s:s,s:i,s:O}", "type", "response.output_item.done", "output_index", 0, "item", item));
}

void resp_stream(api_request *req, sched_job *job, json_t *events) {
    api_choice *c = &req->choice[0];
    if (!c->started) {
        json_t *r = response_object(req, NULL);
        emit(req, events, json_pack("{s:s,s:o}", "type", "response.created", "response", json_deep_copy(r)));
        emit(req, events, json_pack("{s:s,s:o}", "type", "response.in_progress", "response", r));
        c->started = true;
    }
    const reply *rp = &job->prog.reply; /* its reasoning is not sent: reasoning items are not offered */
    if (rp->n_content > c->sent_content && !job->prog.error.code) {
        if (!req->open) message_open(req, events);
        char item_id[48];
        snprintf(item_id, sizeof item_id, "msg_%s", req->id + strlen("resp_"));
        emit(req, events,
             json_pack("{s:s,s:s,s:i,s:i,s:s%,s:[]}", "type", "response.output_text.delta", "item_id", item_id,
                       "output_index", 0, "content_index", 0, "delta", rp->content + c->sent_content,
                       rp->n_content - c->sent_content, "logprobs"));
        c->sent_content = rp->n_content;
    }
    c->sent = rp->read;
    if (!job->prog.done) return;
    req->finished = true;
    if (job->prog.error.code) {
        json_t *r = response_object(req, NULL);
        json_object_set_new(r, "status", json_string("failed"));
        json_object_set_new(r, "error", json_pack("{s:s,s:s}", "code", fkv_status_name(job->prog.error.code), "message",
                                                         job->prog.error.msg));
        emit(req, events, json_pack("{s:s,s:o}", "type", "response.failed", "response", r));
        return;
    }
    json_t *r = resp_response(req, job), *output = json_object_get(r, "output");
    size_t first_call = 0;
    if (has_message(job)) {
        if (!req->open) message_open(req, events);
        message_close(req, job, events, json_array_get(output, 0));
        first_call = 1;
    }
    for (size_t i = 0; i < json_array_size(job->prog.tool_calls); i++) {
        const json_t *item = json_array_get(output, first_call + i);
        const int index = (int)(first_call + i);
        const char *item_id = json_string_value(json_object_get(item, "id"));
        emit(req, events, json_pack("{s:s,s:i,s:o}", "type", "response.output_item.added", "output_index", index, "item",
                                    call_item(req, job, i, true)));
        emit(req, events, json_pack("{s:s,s:s,s:i,s:O}", "type", "response.function_call_arguments.delta", "item_id",
                                    item_id, "output_index", index, "delta", json_object_get(item, "arguments")));
        emit(req, events, json_pack("{s:s,s:s,s:i,s:O,s:O}", "type", "response.function_call_arguments.done", "item_id",
                                    item_id, "output_index", index, "name", json_object_get(item, "name"), "arguments",
                                    json_object_get(item, "arguments")));
        emit(req, events, json_pack("{s:s,s:i,s:O}", "type", "response.output_item.done", "output_index", index, "item",
                                    item));
    }
    emit(req, events, json_pack("{s:s,s:o}", "type", incomplete(job) ? "response.incomplete" : "response.completed",
                                "response", r));
}

const api resp_responses = {.paths = {"/v1/responses"}, .parse = resp_parse, .respond = resp_response,
                            .stream = resp_stream, .error_body = oai_error_body, .named_events = true};
