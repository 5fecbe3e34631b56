#include "openai.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "utf8.h"

#define BAD(param, ...) api_fail(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

/* --- the request --- */

/* A content part's text: chat's parts are {type: "text", text}. */
static const json_t *part_text(const json_t *part, size_t i, const char *param, api_error *e) {
    const char *type = json_string_value(json_object_get(part, "type"));
    const json_t *text = json_object_get(part, "text");
    if (type && !strcmp(type, "text") && json_is_string(text)) return text;
    BAD(param, "'%s[%zu]' must be a text part {\"type\": \"text\", \"text\": ...} (only text is supported)", param, i);
    return NULL;
}

/* An assistant message's tool_calls ([{id, type, function: {name, arguments}}]) added to the last message. */
static int put_tool_calls(convo *c, const json_t *calls, const char *param, api_error *e) {
    if (!calls || json_is_null(calls)) return 0;
    if (!json_is_array(calls)) return BAD(param, "'%s.tool_calls' must be an array", param);
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        if (!json_is_string(name) || (args && !json_is_string(args)))
            return BAD(param, "'%s.tool_calls[%zu]' needs function.name and function.arguments as strings", param, i);
        convo_call(c, json_string_value(name), args ? json_string_value(args) : "{}");
    }
    return 0;
}

/* A message's role, one of chat's four (developer is system's other name), or NULL with e. */
static const char *message_role(const json_t *msg, const char *param, api_error *e) {
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    const json_t *role = json_object_get(msg, "role");
    if (!json_is_object(msg) || !json_is_string(role)) {
        BAD(param, "'%s' must be an object with a string 'role'", param);
        return NULL;
    }
    const char *r = !strcmp(json_string_value(role), "developer") ? "system" : json_string_value(role);
    for (size_t k = 0; k < sizeof roles / sizeof *roles; k++)
        if (!strcmp(r, roles[k])) return roles[k];
    BAD(param, "'%s.role' is '%s'; expected system, developer, user, assistant or tool", param, r);
    return NULL;
}

/* messages as the conversation c. */
static int parse_messages(const json_t *messages, convo *c, api_error *e) {
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return BAD("messages", "'messages' must be a non-empty array");
    for (size_t i = 0; i < json_array_size(messages); i++) {
        const json_t *msg = json_array_get(messages, i), *content = json_object_get(msg, "content");
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        const char *role = message_role(msg, param, e);
        if (!role) return -1;
        const bool assistant = role[0] == 'a'; /* chat's four roles differ in their first letter */
        convo_add(c, role);
        if (!content || json_is_null(content)) {
            if (!assistant) return BAD(param, "'%s.content' is required for role '%s'", param, role);
        } else if (api_put_content(c, content, param, part_text, e)) {
            return -1;
        }
        if (assistant && put_tool_calls(c, json_object_get(msg, "tool_calls"), param, e)) return -1;
        const json_t *reasoning = json_object_get(msg, "reasoning_content");
        if (assistant && reasoning && !json_is_null(reasoning)) {
            if (!json_is_string(reasoning)) return BAD(param, "'%s.reasoning_content' must be a string", param);
            convo_reasoning(c, json_string_value(reasoning), json_string_length(reasoning));
        }
    }
    return 0;
}

/* tools and tool_choice: the tools to offer (borrowed from the request), or NULL when there are none or the choice is
 * "none". "auto", "required" and a named function all offer every tool; "required" and a named function are
 * enforced (api_constrain). parallel_tool_calls false: at most one call. */
static int parse_tools(const json_t *root, const json_t **tools, sched_job *job, api_error *e) {
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
    bool parallel = true;
    if (api_bool(root, "parallel_tool_calls", &parallel, API_QUOTED, e)) return -1;
    if (json_array_size(t) == 0) return 0;
    *tools = t;
    job->req.single_tool_call = !parallel;
    if (choice && !json_is_null(choice) && !(job->req.tool_choice = json_deep_copy(choice))) return api_oom(e);
    return 0;
}

/* response_format (text, json_object, json_schema: {name, schema, strict}) into job->req.response_format, and grammar
 * (GBNF text, llama.cpp's field) compiled into job->req.grammar. */
static int parse_format(const api_context *ctx, const json_t *root, sched_job *job, api_error *e) {
    const json_t *rf = json_object_get(root, "response_format"), *gbnf = json_object_get(root, "grammar");
    const bool has_rf = rf && !json_is_null(rf), has_gbnf = gbnf && !json_is_null(gbnf);
    if (has_rf && has_gbnf) return BAD("grammar", "give 'grammar' or 'response_format', not both");
    if (has_gbnf) {
        if (!json_is_string(gbnf)) return BAD("grammar", "'grammar' must be a string (GBNF)");
        fkv_error err = {0};
        job->req.grammar = fkv_grammar_new(ctx->model, json_string_value(gbnf), json_string_length(gbnf), &err);
        return job->req.grammar ? 0 : err.code == FKV_E_NOMEM ? api_oom(e) : BAD("grammar", "grammar: %s", err.msg);
    }
    if (!has_rf) return 0;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type || (strcmp(type, "text") && strcmp(type, "json_object") &&
                                         strcmp(type, "json_schema")))
        return BAD("response_format", "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                                      "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": ...}}");
    if (!strcmp(type, "json_schema") && !json_is_object(json_object_get(json_object_get(rf, "json_schema"), "schema")))
        return BAD("response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
    if (strcmp(type, "text") && !(job->req.response_format = json_deep_copy(rf))) return api_oom(e);
    return 0;
}

/* chat_template_kwargs (vLLM's and llama.cpp's field): enable_thinking, a boolean, switches the reasoning of the
 * templates that have it (Qwen3, SmolLM3, GLM); reasoning_effort, a string, is what gpt-oss's writes (as the template,
 * any string). OpenAI's own reasoning_effort, one of low, medium and high, sets the latter too (the kwarg wins). Other
 * keys are ignored, as the templates that do not read them do. t's strings point into root. */
static int parse_template_kwargs(const json_t *root, chat_template *t, api_error *e) {
    const json_t *kw = json_object_get(root, "chat_template_kwargs"), *effort = json_object_get(root, "reasoning_effort");
    if (effort && !json_is_null(effort)) {
        const char *v = json_string_value(effort);
        if (!v || (strcmp(v, "low") && strcmp(v, "medium") && strcmp(v, "high")))
            return BAD("reasoning_effort", "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
        t->reasoning_effort = v;
    }
    if (!kw || json_is_null(kw)) return 0;
    if (!json_is_object(kw)) return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    const json_t *thinking = json_object_get(kw, "enable_thinking");
    effort = json_object_get(kw, "reasoning_effort");
    if (effort && !json_is_null(effort)) {
        if (!json_is_string(effort))
            return BAD("chat_template_kwargs", "'chat_template_kwargs.reasoning_effort' must be a string");
        t->reasoning_effort = json_string_value(effort);
    }
    if (!thinking || json_is_null(thinking)) return 0;
    if (!json_is_boolean(thinking))
        return BAD("chat_template_kwargs", "'chat_template_kwargs.enable_thinking' must be true or false");
    t->no_thinking = json_is_false(thinking);
    return 0;
}

/* prediction (OpenAI's Predicted Outputs): {"type": "content", "content": a string or text parts}, its text's ids as
 * an output after the rendered prompt holds them (chat_text_ids_after its last id) into job->req.prediction: the
 * guesses wherever the output matches it. OpenAI refuses it beside n > 1, logprobs, penalties and tools; here it
 * changes no answer, so it is taken with all of them. */
static int parse_prediction(const api_context *ctx, const json_t *root, sched_job *job, api_error *e) {
    const json_t *p = json_object_get(root, "prediction"), *content = json_object_get(p, "content");
    if (!p || json_is_null(p)) return 0;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!json_is_object(p) || !type || strcmp(type, "content") || (!json_is_string(content) && !json_is_array(content)))
        return BAD("prediction", "'prediction' must be {\"type\": \"content\", \"content\": a string or an array of "
                                 "text parts}");
    convo c = {0}; /* the parts' texts joined, as api_put_content joins a message's */
    convo_add(&c, "assistant");
    int rc = api_put_content(&c, content, "prediction.content", part_text, e);
    if (!rc && c.oom) rc = api_oom(e);
    const char *text = rc ? NULL : c.msgs[0].text;
    fkv_error err = {0};
    if (text && c.msgs[0].len &&
        chat_text_ids_after(ctx->model, job->req.ids[job->req.n_ids - 1], text, c.msgs[0].len, &job->req.prediction,
                            &job->req.n_prediction, &err))
        rc = api_fail_with(e, "prediction", &err);
    convo_free(&c);
    return rc;
}

/* Chat's prompt: the tools and their constraint, then messages rendered through the server's template with this
 * request's kwargs. */
static int parse_chat(const api_context *ctx, const json_t *root, sched_job *job, api_error *e) {
    const json_t *tools;
    chat_template t = *ctx->tmpl;
    convo c = {0};
    const int rc = parse_template_kwargs(root, &t, e) || parse_tools(root, &tools, job, e) ||
                           api_constrain(ctx, &t, job, tools, e) || parse_messages(json_object_get(root, "messages"), &c, e) ||
                           api_render(ctx, &t, &c, tools, "messages", job, e) || parse_prediction(ctx, root, job, e)
                       ? -1
                       : 0;
    convo_free(&c);
    return rc;
}

/* prompt: a string or an array of token ids. */
static int parse_prompt(const api_context *ctx, const json_t *prompt, sched_job *job, api_error *e) {
    if (!prompt) return BAD("prompt", "'prompt' is required");
    if (api_constrain(ctx, NULL, job, NULL, e)) return -1;
    fkv_error err = {0};
    if (json_is_string(prompt)) {
        const char *text = json_string_value(prompt);
        size_t len = json_string_length(prompt);
        int n = fkv_tokenize(ctx->model, text, len, true, false, NULL, 0, &err);
        if (n >= 0 && !(job->req.ids = malloc(sizeof(int32_t) * (size_t)(n ? n : 1))))
            n = err_nomem(&err, "out of memory for the prompt's %d ids", n);
        if (n < 0 || fkv_tokenize(ctx->model, text, len, true, false, job->req.ids, n, &err) != n)
            return api_fail_with(e, "prompt", &err);
        job->req.n_ids = (uint32_t)n;
        return 0;
    }
    if (!json_is_array(prompt)) return BAD("prompt", "'prompt' must be a string or an array of token ids");
    uint32_t n_vocab = fkv_model_get_info(ctx->model).n_vocab;
    size_t n = json_array_size(prompt), i;
    json_t *v;
    if (!(job->req.ids = malloc(sizeof(int32_t) * (n ? n : 1))))
        return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
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

/* Chat: logprobs (a boolean) and top_logprobs (0-20, only with logprobs); legacy completions: logprobs, the number of
 * top entries (0-20; null: none). */
static int get_logprobs(const json_t *body, bool completion, sched_job *job, api_error *e) {
    const json_t *lp = json_object_get(body, "logprobs"), *top = json_object_get(body, "top_logprobs");
    if (!completion) {
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

static int get_stop(const json_t *body, sched_job *job, api_error *e) {
    json_t *stop = json_object_get(body, "stop");
    if (!stop || json_is_null(stop)) return 0;
    size_t n = json_is_array(stop) ? json_array_size(stop) : 1;
    if (!json_is_string(stop) && !json_is_array(stop)) return BAD("stop", "'stop' must be a string or an array of strings");
    if (n > API_MAX_STOP) return BAD("stop", "'stop' has %zu strings; at most %d are supported", n, API_MAX_STOP);
    if (!(job->req.stop = calloc(n ? n : 1, sizeof *job->req.stop))) return api_oom(e);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_array(stop) ? json_array_get(stop, i) : stop;
        if (!json_is_string(s) || json_string_length(s) == 0 || strlen(json_string_value(s)) != json_string_length(s))
            return BAD("stop", "every stop sequence must be a non-empty string");
        if (!(job->req.stop[job->req.n_stop] = strdup(json_string_value(s)))) return api_oom(e);
        job->req.n_stop++;
    }
    return 0;
}

/* n, stream and stream_options: the choices and how they travel. */
static int get_delivery(const json_t *root, api_request *req, api_error *e) {
    json_t *n = json_object_get(root, "n"), *opts = json_object_get(root, "stream_options");
    if (n && !json_is_null(n) &&
        (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > SCHED_MAX_CHOICES))
        return BAD("n", "'n' must be an integer from 1 to %d", SCHED_MAX_CHOICES);
    if (json_is_integer(n)) req->n = (uint32_t)json_integer_value(n);
    if (api_bool(root, "stream", &req->stream, API_QUOTED, e)) return -1;
    if (!opts || json_is_null(opts)) return 0;
    json_t *usage = json_object_get(opts, "include_usage");
    if (!json_is_object(opts) || (usage && !json_is_boolean(usage)))
        return BAD("stream_options", "'stream_options' must be an object with a boolean 'include_usage'");
    req->include_usage = json_is_true(usage);
    return 0;
}

/* The sampling fields over the defaults. */
static int get_sampling(const json_t *root, bool completion, sched_job *job, api_error *e) {
    fkv_sampler_params *s = &job->req.sampling;
    float top_k = (float)s->top_k, repeat_last_n = 64;
    if (api_number(root, "temperature", 0, 2, &s->temp, API_QUOTED, e) ||
        api_number(root, "top_p", 0, 1, &s->top_p, API_QUOTED, e) ||
        api_number(root, "min_p", 0, 1, &s->min_p, API_QUOTED, e) ||
        api_number(root, "top_k", 0, 1e6, &top_k, API_QUOTED, e) ||
        api_number(root, "repeat_penalty", 0.01, 100, &s->repeat_penalty, API_QUOTED, e) ||
        api_number(root, "repeat_last_n", 0, 1e6, &repeat_last_n, API_QUOTED, e) ||
        api_number(root, "frequency_penalty", -2, 2, &s->frequency_penalty, API_QUOTED, e) ||
        api_number(root, "presence_penalty", -2, 2, &s->presence_penalty, API_QUOTED, e) ||
        get_logprobs(root, completion, job, e))
        return -1;
    s->top_k = (int32_t)top_k;
    s->repeat_last_n = (int32_t)repeat_last_n;
    json_t *seed = json_object_get(root, "seed");
    if (!seed || json_is_null(seed)) return 0;
    if (!json_is_integer(seed)) return BAD("seed", "'seed' must be an integer");
    s->seed = (uint64_t)json_integer_value(seed);
    return 0;
}

int oai_parse(const api_context *ctx, oai_kind kind, const char *body, size_t len, api_request *req, sched_job *job,
              api_error *e) {
    json_t *root = api_begin(ctx, body, len, req, job, e);
    if (!root) return -1;
    int rc = -1;
    req->completion = kind == OAI_COMPLETION;
    api_new_id(req->id, req->completion ? "cmpl-" : "chatcmpl-", false);
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_string(model)) {
        BAD("model", "'model' must be a string");
        goto out;
    }
    snprintf(req->model, sizeof req->model, "%s", model ? json_string_value(model) : ctx->model_id);
    if (get_delivery(root, req, e) || get_sampling(root, req->completion, job, e) || get_stop(root, job, e) ||
        api_common_fields(ctx, root, job, req->cache_key, e))
        goto out;
    snprintf(job->req.id, sizeof job->req.id, "%s", req->id);
    if (parse_format(ctx, root, job, e) ||
        (req->completion ? parse_prompt(ctx, json_object_get(root, "prompt"), job, e) : parse_chat(ctx, root, job, e)))
        goto out;
    const char *prompt = req->completion ? "prompt" : "messages";
    if (job->req.n_ids == 0) {
        BAD(prompt, "the prompt is empty");
        goto out;
    }
    if (job->req.n_ids >= ctx->n_ctx) {
        api_fail(e, 400, "invalid_request_error", prompt, "context_length_exceeded",
                 "This model's maximum context length is %u tokens. However, your prompt has %u tokens, which "
                 "leaves no room for the completion.", ctx->n_ctx,
                 job->req.n_ids);
        goto out;
    }
    const char *max_keys[] = {"max_completion_tokens", "max_tokens"};
    json_int_t limit = 0;
    for (int k = 0; k < 2 && !limit; k++) {
        json_t *v = json_object_get(root, max_keys[k]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            BAD(max_keys[k], "'%s' must be a positive integer", max_keys[k]);
            goto out;
        }
        limit = json_integer_value(v);
    }
    api_cap_tokens(ctx, job, limit);
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static int parse_chat_body(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job,
                           api_error *e) {
    return oai_parse(ctx, OAI_CHAT, body, len, req, job, e);
}

static int parse_completion_body(const api_context *ctx, const char *body, size_t len, api_request *req,
                                 sched_job *job, api_error *e) {
    return oai_parse(ctx, OAI_COMPLETION, body, len, req, job, e);
}

/* --- the answer --- */

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
    /* Why less than the agreement was reused: the window layers' rows there were given back (prefix.h); no recurrent
     * state is kept there (kvrec.h). */
    if (job->prog.reuse.held < job->prog.reuse.capped)
        json_object_set_new(
            t, "window_fallback",
            json_pack("{s:i,s:i}", "agreed", (int)job->prog.reuse.capped, "held", (int)job->prog.reuse.held));
    if (job->prog.reuse.state < job->prog.reuse.held)
        json_object_set_new(
            t, "state_fallback",
            json_pack("{s:i,s:i}", "held", (int)job->prog.reuse.held, "state", (int)job->prog.reuse.state));
    return t;
}

static json_t *envelope(const api_request *req, bool chunk) {
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", req->id, "object",
                     !req->completion ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion",
                     "created", (json_int_t)req->created, "model", req->model, "system_fingerprint", "flatkv");
}

/* One token's text (valid UTF-8) and its bytes. */
static void token_json(const api_request *req, int32_t prev, int32_t id, json_t **text, json_t **bytes) {
    char piece[256];
    int len = fkv_token_piece(req->ctx->model, prev, id, piece, sizeof piece);
    len = len < 0 ? 0 : len > (int)sizeof piece ? (int)sizeof piece : len;
    size_t clean_len;
    char *clean = utf8_sanitize(piece, (size_t)len, &clean_len);
    if (!clean) api_json_lost(); /* the body would lose the token's text */
    *text = json_stringn(clean ? clean : "", clean ? clean_len : 0);
    free(clean);
    if (!bytes) return;
    *bytes = json_array();
    for (int i = 0; i < len; i++) json_array_append_new(*bytes, json_integer((unsigned char)piece[i]));
}

static json_t *logprobs_json(const api_request *req, const sched_job *job, size_t from, size_t to) {
    const bool chat = !req->completion;
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

/* The entries of the tokens whose text ends before the calls (what the reply shows: reasoning and content). */
static size_t shown_lps(const sched_job *job) {
    size_t n = 0;
    while (n < job->prog.n_lps && n < job->prog.text.n_tokens && job->prog.text.ends[n] <= job->prog.reply.shown) n++;
    return n;
}

/* Choice `index` of a finished job. */
static json_t *choice_json(const api_request *req, const sched_job *job, int index) {
    json_t *choice;
    const reply *r = &job->prog.reply;
    if (!req->completion) {
        json_t *message = json_pack("{s:s}", "role", "assistant");
        if (job->prog.tool_calls && r->n_content == 0)
            json_object_set_new(message, "content", json_null());
        else
            json_object_set_new(message, "content", json_stringn(r->content ? r->content : "", r->n_content));
        /* llama.cpp's and vLLM's field for what the model reasoned before answering */
        if (r->n_reasoning) json_object_set_new(message, "reasoning_content", json_stringn(r->reasoning, r->n_reasoning));
        if (job->prog.tool_calls) json_object_set(message, "tool_calls", job->prog.tool_calls);
        choice = json_pack("{s:i,s:o,s:n,s:s}", "index", index, "message", message, "logprobs", "finish_reason",
                           job->prog.finish_reason);
    } else
        choice = json_pack("{s:i,s:s%,s:n,s:s}", "index", index, "text", r->content ? r->content : "", r->n_content,
                           "logprobs", "finish_reason", job->prog.finish_reason);
    if (job->req.logprobs) json_object_set_new(choice, "logprobs", logprobs_json(req, job, 0, shown_lps(job)));
    return choice;
}

/* The usage of a job and its followers: the prompt counts once (the other choices started from its rows). */
static json_t *choices_usage(const sched_job *job) {
    uint32_t generated = job->prog.n_gen, predicted = job->prog.predicted, accepted = job->prog.predicted_accepted;
    for (uint32_t i = 0; i < job->n_followers; i++) {
        const sched_progress *f = &job->followers[i]->prog;
        generated += f->n_gen, predicted += f->predicted, accepted += f->predicted_accepted;
    }
    /* the prediction's guesses, kept (accepted) and not; the server's own drafting is in timings */
    return json_pack("{s:i,s:i,s:i,s:{s:i},s:{s:i,s:i}}", "prompt_tokens", (int)job->req.n_ids, "completion_tokens",
                     (int)generated, "total_tokens", (int)(job->req.n_ids + generated), "prompt_tokens_details",
                     "cached_tokens", (int)job->prog.cached, "completion_tokens_details", "accepted_prediction_tokens",
                     (int)accepted, "rejected_prediction_tokens", (int)(predicted - accepted));
}

json_t *oai_response(api_request *req, const sched_job *job) {
    json_t *r = envelope(req, false), *choices = json_array();
    for (uint32_t i = 0; i <= job->n_followers; i++)
        json_array_append_new(choices, choice_json(req, i ? job->followers[i - 1] : job, (int)i));
    json_object_set_new(r, "choices", choices);
    json_object_set_new(r, "usage", choices_usage(job));
    json_object_set_new(r, "timings", timings_json(job));
    return r;
}

/* A chunk of choice `index`: text as the delta's `field` ("content" or "reasoning_content"; legacy completions: the
 * text). */
static json_t *stream_chunk(const api_request *req, int index, const char *field, const char *text, size_t len,
                            const char *finish_reason, bool first, json_t *logprobs) {
    json_t *r = envelope(req, true), *choice;
    json_t *finish = finish_reason ? json_string(finish_reason) : json_null();
    if (!req->completion) {
        json_t *delta = json_object();
        if (first) json_object_set_new(delta, "role", json_string("assistant"));
        if (len || !finish_reason) json_object_set_new(delta, field, json_stringn(text ? text : "", len));
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", index, "delta", delta, "logprobs", "finish_reason", finish);
    } else {
        choice = json_pack("{s:i,s:s%,s:n,s:o}", "index", index, "text", text ? text : "", len, "logprobs",
                           "finish_reason", finish);
    }
    if (logprobs) json_object_set_new(choice, "logprobs", logprobs);
    json_object_set_new(r, "choices", json_pack("[o]", choice));
    return r;
}

static json_t *tool_calls_chunk(const api_request *req, int index, const sched_job *job) {
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

static json_t *usage_chunk(const api_request *req, const sched_job *job) {
    json_t *r = envelope(req, true);
    json_object_set_new(r, "choices", json_array());
    json_object_set_new(r, "usage", choices_usage(job));
    json_object_set_new(r, "timings", timings_json(job));
    return r;
}

/* The logprobs of the tokens whose words the reply shows now and were not sent (NULL without logprobs). */
static json_t *new_lps(const api_request *req, const sched_job *job, api_choice *c) {
    size_t to = c->lps_sent;
    while (to < job->prog.n_lps && to < job->prog.text.n_tokens && job->prog.text.ends[to] <= job->prog.reply.shown)
        to++;
    json_t *lps = job->req.logprobs && to > c->lps_sent ? logprobs_json(req, job, c->lps_sent, to) : NULL;
    c->lps_sent = to;
    return lps;
}

/* Choice i's events (job: that choice): chat's first chunk (the role), then its reasoning and its content as the reply
 * splits them, with their tokens' logprobs, then its calls and its finish. */
static void stream_choice(api_request *req, const sched_job *job, uint32_t i, json_t *events) {
    api_choice *c = &req->choice[i];
    const reply *r = &job->prog.reply;
    if (!c->started && !req->completion)
        json_array_append_new(events, stream_chunk(req, (int)i, "content", "", 0, NULL, true, NULL));
    c->started = true;
    if (r->n_reasoning > c->sent_reasoning) {
        json_array_append_new(events, stream_chunk(req, (int)i, "reasoning_content", r->reasoning + c->sent_reasoning,
                                                   r->n_reasoning - c->sent_reasoning, NULL, false, new_lps(req, job, c)));
        c->sent_reasoning = r->n_reasoning;
    }
    json_t *lps = new_lps(req, job, c);
    if (r->n_content > c->sent_content || lps) {
        json_array_append_new(events, stream_chunk(req, (int)i, "content", r->content ? r->content + c->sent_content : "",
                                                   r->n_content - c->sent_content, NULL, false, lps));
        c->sent_content = r->n_content;
    }
    c->sent = r->read;
    if (job->prog.done && !c->done) {
        if (job->prog.tool_calls) json_array_append_new(events, tool_calls_chunk(req, (int)i, job));
        if (!job->prog.error.code)
            json_array_append_new(events,
                                  stream_chunk(req, (int)i, "content", NULL, 0, job->prog.finish_reason, false, NULL));
        c->done = true;
    }
}

/* Every choice's events; once all are done, the usage (or the error of a choice that failed) and [DONE]. */
static void oai_stream(api_request *req, sched_job *job, json_t *events) {
    bool all_done = true;
    const sched_job *failed = NULL;
    for (uint32_t i = 0; i <= job->n_followers; i++) {
        sched_job *choice = sched_job_choice(job, i);
        if (i) pthread_mutex_lock(&choice->mu);
        stream_choice(req, choice, i, events);
        if (!failed && choice->prog.error.code) failed = choice;
        if (i) pthread_mutex_unlock(&choice->mu);
        all_done &= req->choice[i].done;
    }
    if (!all_done || req->finished) return;
    if (failed) {
        api_error e;
        api_fail_with(&e, NULL, &failed->prog.error);
        json_array_append_new(events, oai_error_body(&e));
    } else if (req->include_usage) {
        json_array_append_new(events, usage_chunk(req, job));
    }
    json_array_append_new(events, json_string("[DONE]"));
    req->finished = true;
}

json_t *oai_error_body(const api_error *e) {
    return json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", e->message, "type", e->type, "param", e->param[0] ? e->param : NULL,
                     "code", e->code);
}

const api oai_chat = {.paths = {"/v1/chat/completions", "/chat/completions"}, .parse = parse_chat_body,
                      .respond = oai_response, .stream = oai_stream, .error_body = oai_error_body};
const api oai_completions = {.paths = {"/v1/completions", "/completions"}, .parse = parse_completion_body,
                             .respond = oai_response, .stream = oai_stream, .error_body = oai_error_body};
