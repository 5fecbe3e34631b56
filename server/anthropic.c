#include "anthropic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 128 /* a field's path in an error: "messages.12.content.3.content.0" */

/* base + "." + sub (an index or a field) into out; a path past 100 bytes is cut, which only shortens a message. */
static void path_at(char out[PATH_MAX_LEN], const char *base, const char *sub) {
    snprintf(out, PATH_MAX_LEN, "%.100s.%.24s", base, sub);
}

static void path_index(char out[PATH_MAX_LEN], const char *base, size_t i) {
    char index[24];
    snprintf(index, sizeof index, "%zu", i);
    path_at(out, base, index);
}

/* Anthropic's errors carry no param: the message names the field, the way Anthropic's do ("messages.0.content"). */
#define BAD(...) api_fail(e, 400, "invalid_request_error", NULL, NULL, __VA_ARGS__)

/* cache_control is accepted wherever Anthropic takes it: flatkv caches every prompt's rows without being asked. */
static int check_cache_control(const json_t *obj, const char *path, api_error *e) {
    const json_t *cc = json_object_get(obj, "cache_control");
    if (!cc || json_is_null(cc)) return 0;
    const json_t *type = json_object_get(cc, "type");
    if (!json_is_object(cc) || !json_is_string(type) || strcmp(json_string_value(type), "ephemeral"))
        return BAD("%s.cache_control: must be {\"type\": \"ephemeral\"}", path);
    return 0;
}

/* A block's type, after checking it is an object with one and an acceptable cache_control; NULL with e. */
static const char *block_type(const json_t *block, const char *path, api_error *e) {
    const json_t *type = json_object_get(block, "type");
    if (!json_is_object(block) || !json_is_string(type)) {
        BAD("%s: must be a content block, an object with a string 'type'", path);
        return NULL;
    }
    return check_cache_control(block, path, e) ? NULL : json_string_value(type);
}

static int unsupported_block(const char *type, const char *path, api_error *e) {
    if (!strcmp(type, "image") || !strcmp(type, "document"))
        return BAD("%s: %s blocks are not supported: this model reads text only", path, type);
    if (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking"))
        return BAD("%s: %s blocks are not supported: extended thinking is not", path, type);
    return BAD("%s: block type '%s' is not supported here", path, type);
}

/* A text block's text appended to the last message; -1 with e when the block has none. */
static int put_text_block(convo *c, const json_t *block, const char *path, api_error *e) {
    const json_t *text = json_object_get(block, "text");
    if (!json_is_string(text)) return BAD("%s.text: must be a string", path);
    convo_text(c, json_string_value(text), json_string_length(text));
    return 0;
}

/* Text content — a string, or an array of text blocks — appended to the last message (system, tool_result). */
static int put_text_content(convo *c, const json_t *content, const char *path, api_error *e) {
    if (json_is_string(content)) {
        convo_text(c, json_string_value(content), json_string_length(content));
        return 0;
    }
    if (!json_is_array(content)) return BAD("%s: must be a string or an array of text blocks", path);
    size_t i;
    json_t *block;
    char at[PATH_MAX_LEN];
    json_array_foreach(content, i, block) {
        path_index(at, path, i);
        const char *type = block_type(block, at, e);
        if (!type) return -1;
        if (strcmp(type, "text")) return unsupported_block(type, at, e);
        if (put_text_block(c, block, at, e)) return -1;
    }
    return 0;
}

/* A user turn's blocks: text blocks make user messages, each tool_result a tool message, in their order. */
static int put_user_blocks(convo *c, const json_t *blocks, const char *path, api_error *e) {
    size_t i;
    json_t *block;
    char at[PATH_MAX_LEN];
    bool in_text = false; /* the last message is this turn's text */
    json_array_foreach(blocks, i, block) {
        path_index(at, path, i);
        const char *type = block_type(block, at, e);
        if (!type) return -1;
        if (!strcmp(type, "text")) {
            if (!in_text) convo_add(c, "user");
            in_text = true;
            if (put_text_block(c, block, at, e)) return -1;
        } else if (!strcmp(type, "tool_result")) {
            const json_t *use_id = json_object_get(block, "tool_use_id"), *content = json_object_get(block, "content");
            const json_t *is_error = json_object_get(block, "is_error");
            if (!json_is_string(use_id)) return BAD("%s.tool_use_id: must be a string", at);
            if (is_error && !json_is_boolean(is_error)) return BAD("%s.is_error: must be a boolean", at);
            in_text = false;
            convo_add(c, "tool");
            char content_at[PATH_MAX_LEN];
            path_at(content_at, at, "content");
            if (content && !json_is_null(content) && put_text_content(c, content, content_at, e)) return -1;
        } else {
            return unsupported_block(type, at, e);
        }
    }
    return 0;
}

/* An assistant turn's blocks: its text, and a call per tool_use block (arguments: the input as JSON text). */
static int put_assistant_blocks(convo *c, const json_t *blocks, const char *path, api_error *e) {
    size_t i;
    json_t *block;
    char at[PATH_MAX_LEN];
    convo_add(c, "assistant");
    json_array_foreach(blocks, i, block) {
        path_index(at, path, i);
        const char *type = block_type(block, at, e);
        if (!type) return -1;
        if (!strcmp(type, "text")) {
            if (put_text_block(c, block, at, e)) return -1;
        } else if (!strcmp(type, "tool_use")) {
            const json_t *id = json_object_get(block, "id"), *name = json_object_get(block, "name");
            const json_t *input = json_object_get(block, "input");
            if (!json_is_string(id) || !json_is_string(name) || !json_is_object(input))
                return BAD("%s: a tool_use block needs a string 'id' and 'name' and an object 'input'", at);
            char *args = json_dumps(input, JSON_COMPACT);
            if (!args) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
            convo_call(c, json_string_value(name), args);
            free(args);
        } else {
            return unsupported_block(type, at, e);
        }
    }
    return 0;
}

static int parse_messages(convo *c, const json_t *messages, api_error *e) {
    if (!json_is_array(messages) || json_array_size(messages) == 0)
        return BAD("messages: must be a non-empty array");
    size_t i, n = json_array_size(messages);
    json_t *msg;
    char at[PATH_MAX_LEN];
    json_array_foreach(messages, i, msg) {
        snprintf(at, sizeof at, "messages.%zu", i);
        const json_t *role = json_object_get(msg, "role"), *content = json_object_get(msg, "content");
        if (!json_is_object(msg) || !json_is_string(role) ||
            (strcmp(json_string_value(role), "user") && strcmp(json_string_value(role), "assistant")))
            return BAD("%s: must be an object with 'role' \"user\" or \"assistant\"", at);
        bool user = !strcmp(json_string_value(role), "user");
        if (!user && i + 1 == n)
            return BAD("%s: a final assistant message (a prefill to continue) is not supported", at);
        char content_at[PATH_MAX_LEN];
        path_at(content_at, at, "content");
        if (json_is_string(content)) {
            convo_add(c, user ? "user" : "assistant");
            convo_text(c, json_string_value(content), json_string_length(content));
        } else if (!json_is_array(content) || json_array_size(content) == 0) {
            return BAD("%s: must be a string or a non-empty array of content blocks", content_at);
        } else if (user ? put_user_blocks(c, content, content_at, e) : put_assistant_blocks(c, content, content_at, e)) {
            return -1;
        }
    }
    return 0;
}

/* A tool as the Messages API gives it: a client tool {name, description, input_schema}. */
static int check_tool(const json_t *tool, const char *at, api_error *e) {
    const json_t *type = json_object_get(tool, "type"), *name = json_object_get(tool, "name");
    const json_t *description = json_object_get(tool, "description");
    if (json_is_object(tool) && type && !json_is_null(type) &&
        (!json_is_string(type) || strcmp(json_string_value(type), "custom")))
        return BAD("%s: tool type '%s' is not supported: only client tools (name, description, input_schema)", at,
                   json_is_string(type) ? json_string_value(type) : "?");
    if (!json_is_object(tool) || !json_is_string(name) || json_string_length(name) == 0 ||
        !json_is_object(json_object_get(tool, "input_schema")) ||
        (description && !json_is_null(description) && !json_is_string(description)))
        return BAD("%s: must be {\"name\": string, \"description\": string, \"input_schema\": object}", at);
    return check_cache_control(tool, at, e);
}

/* tool_choice, checked against the n tools given, into job in chat's form (where constrained decoding reads it,
 * sched_job.tool_choice); *kind: its type ("auto" when it is absent). */
static int parse_tool_choice(const json_t *choice, const json_t *tools, size_t n, const char **kind, sched_job *job,
                             api_error *e) {
    *kind = "auto";
    if (!choice || json_is_null(choice)) return 0;
    const json_t *type = json_object_get(choice, "type"), *name = json_object_get(choice, "name");
    const json_t *single = json_object_get(choice, "disable_parallel_tool_use");
    const char *k = *kind = json_is_string(type) ? json_string_value(type) : "";
    if (!json_is_object(choice) || (strcmp(k, "auto") && strcmp(k, "any") && strcmp(k, "tool") && strcmp(k, "none")))
        return BAD("tool_choice: must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"tool\", \"name\": "
                   "...} or {\"type\": \"none\"}");
    if (single && !json_is_null(single) && !json_is_boolean(single))
        return BAD("tool_choice.disable_parallel_tool_use: must be a boolean");
    job->req.single_tool_call = json_is_true(single);
    if ((!strcmp(k, "any") || !strcmp(k, "tool")) && n == 0) return BAD("tool_choice: type '%s' needs tools", k);
    if (!strcmp(k, "tool") && !(json_is_string(name) && api_names_tool(tools, name)))
        return BAD("tool_choice.name: must name one of the tools");
    job->req.tool_choice = !strcmp(k, "any")  ? json_string("required")
                           : strcmp(k, "tool") ? json_string(k)
                                               : json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name);
    return job->req.tool_choice ? 0 : api_oom(e);
}

/* tools as chat's OpenAI-shaped tools (what the templates render), and tool_choice. *rendered: the tools to render
 * (new reference), or NULL for none — none given, or tool_choice "none". */
static int parse_tools(const json_t *root, json_t **rendered, sched_job *job, api_error *e) {
    const json_t *tools = json_object_get(root, "tools");
    *rendered = NULL;
    size_t n = 0;
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return BAD("tools: must be an array");
        n = json_array_size(tools);
    }
    json_t *chat_tools = json_array();
    const char *kind = "auto";
    char at[PATH_MAX_LEN];
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const json_t *tool = json_array_get(tools, i);
        path_index(at, "tools", i);
        if (!(rc = check_tool(tool, at, e)))
            json_array_append_new(chat_tools, api_function_tool(json_object_get(tool, "name"),
                                                                json_object_get(tool, "description"),
                                                                json_object_get(tool, "input_schema")));
    }
    if (!rc) rc = parse_tool_choice(json_object_get(root, "tool_choice"), tools, n, &kind, job, e);
    if (rc || n == 0 || !strcmp(kind, "none")) json_decref(chat_tools);
    else *rendered = chat_tools;
    return rc;
}

static int parse_sampling(const json_t *root, sched_job *job, api_error *e) {
    if (api_number(root, "temperature", 0, 1, &job->req.sampling.temp, API_LEADING, e) ||
        api_number(root, "top_p", 0, 1, &job->req.sampling.top_p, API_LEADING, e))
        return -1;
    const json_t *top_k = json_object_get(root, "top_k");
    if (top_k && !json_is_null(top_k)) {
        if (!json_is_integer(top_k) || json_integer_value(top_k) < 0 || json_integer_value(top_k) > 1000000)
            return BAD("top_k: must be an integer of at least 0");
        job->req.sampling.top_k = (int32_t)json_integer_value(top_k);
    }
    const json_t *stop = json_object_get(root, "stop_sequences");
    if (!stop || json_is_null(stop)) return 0;
    if (!json_is_array(stop)) return BAD("stop_sequences: must be an array of strings");
    size_t n = json_array_size(stop);
    if (n > API_MAX_STOP) return BAD("stop_sequences: %zu strings; at most %d are supported", n, API_MAX_STOP);
    job->req.stop = calloc(n ? n : 1, sizeof *job->req.stop);
    if (!job->req.stop) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(stop, i);
        if (!json_is_string(s) || json_string_length(s) == 0 || strlen(json_string_value(s)) != json_string_length(s))
            return BAD("stop_sequences.%zu: must be a non-empty string", i);
        if (!(job->req.stop[job->req.n_stop] = strdup(json_string_value(s)))) return api_oom(e);
        job->req.n_stop++;
    }
    return 0;
}

/* output_config: format, {"type": "json_schema", "schema": {...}}, into job->req.response_format (chat's json_schema:
 * the text answer follows it; an enforced tool_choice excludes one, as api_constrain composes them); effort, a hint to
 * models that think, is checked and not used (extended thinking is not offered). */
static int parse_output_config(const json_t *root, sched_job *job, api_error *e) {
    const json_t *config = json_object_get(root, "output_config");
    if (!config || json_is_null(config)) return 0;
    if (!json_is_object(config)) return BAD("output_config: must be an object");
    const json_t *effort = json_object_get(config, "effort"), *format = json_object_get(config, "format");
    const char *level = json_string_value(effort);
    if (effort && !json_is_null(effort) &&
        (!level || (strcmp(level, "low") && strcmp(level, "medium") && strcmp(level, "high") && strcmp(level, "xhigh") &&
                    strcmp(level, "max"))))
        return BAD("output_config.effort: must be \"low\", \"medium\", \"high\", \"xhigh\" or \"max\"");
    if (!format || json_is_null(format)) return 0;
    const json_t *type = json_object_get(format, "type"), *schema = json_object_get(format, "schema");
    if (!json_is_object(format) || !json_is_string(type) || strcmp(json_string_value(type), "json_schema") ||
        !json_is_object(schema))
        return BAD("output_config.format: must be {\"type\": \"json_schema\", \"schema\": {...}}");
    job->req.response_format =
        json_pack("{s:s,s:{s:s,s:O}}", "type", "json_schema", "json_schema", "name", "output", "schema", schema);
    return job->req.response_format ? 0 : api_oom(e);
}

/* The body root as /v1/messages reads it, into req and job up to the prompt's ids — or, counting, as
 * /v1/messages/count_tokens does: the same but max_tokens and stream, which a count has no use for. */
static int read_body(const api_context *ctx, const json_t *root, bool counting, api_request *req, sched_job *job,
                     api_error *e) {
    convo c = {0};
    json_t *tools = NULL;
    int rc = -1;
    api_new_id(req->id, "msg_", false);
    snprintf(job->req.id, sizeof job->req.id, "%s", req->id);
    const json_t *model = json_object_get(root, "model"), *max_tokens = json_object_get(root, "max_tokens");
    const json_t *metadata = json_object_get(root, "metadata"), *system = json_object_get(root, "system");
    const json_t *thinking = json_object_get(root, "thinking");
    if (!json_is_string(model)) {
        BAD("model: a string is required");
        goto out;
    }
    snprintf(req->model, sizeof req->model, "%s", json_string_value(model));
    if (!counting && (!json_is_integer(max_tokens) || json_integer_value(max_tokens) < 1)) {
        BAD("max_tokens: a positive integer is required");
        goto out;
    }
    if (!counting && api_bool(root, "stream", &req->stream, API_LEADING, e)) goto out;
    if (metadata && !json_is_null(metadata) && !json_is_object(metadata)) {
        BAD("metadata: must be an object");
        goto out;
    }
    const char *thinking_type = json_string_value(json_object_get(thinking, "type"));
    if (thinking && !json_is_null(thinking) && (!thinking_type || strcmp(thinking_type, "disabled"))) {
        BAD("thinking: extended thinking is not supported (only {\"type\": \"disabled\"})");
        goto out;
    }
    char cache_key[65]; /* the Messages API has no routing key of its own: the log shows X-Session-Id alone */
    if (parse_sampling(root, job, e) || api_common_fields(ctx, root, job, cache_key, e) ||
        parse_output_config(root, job, e) || parse_tools(root, &tools, job, e) ||
        api_constrain(ctx, ctx->tmpl, job, tools, e))
        goto out;
    if (system && !json_is_null(system)) {
        if (json_is_array(system)) {
            for (size_t i = 0; i < json_array_size(system); i++) {
                char at[PATH_MAX_LEN];
                snprintf(at, sizeof at, "system.%zu", i);
                if (check_cache_control(json_array_get(system, i), at, e)) goto out;
            }
        }
        convo_add(&c, "system");
        if (put_text_content(&c, system, "system", e)) goto out;
    }
    if (parse_messages(&c, json_object_get(root, "messages"), e) || api_render(ctx, ctx->tmpl, &c, tools, NULL, job, e))
        goto out;
    req->n_prompt = job->req.n_ids;
    rc = 0;
out:
    convo_free(&c);
    json_decref(tools);
    return rc;
}

int anth_parse(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job, api_error *e) {
    json_t *root = api_begin(ctx, body, len, req, job, e);
    if (!root) return -1;
    int rc = read_body(ctx, root, false, req, job, e);
    if (!rc && job->req.n_ids >= ctx->n_ctx)
        rc = BAD("prompt is too long: %u tokens, and the reply needs at least one of the %u maximum", job->req.n_ids,
                 ctx->n_ctx);
    if (!rc) api_cap_tokens(ctx, job, json_integer_value(json_object_get(root, "max_tokens")));
    json_decref(root);
    return rc;
}

json_t *anth_count_tokens(const api_context *ctx, const char *body, size_t len, api_error *e) {
    api_request req;
    sched_job job = {0};
    json_t *root = api_begin(ctx, body, len, &req, &job, e), *count = NULL;
    if (root && !read_body(ctx, root, true, &req, &job, e) &&
        !(count = json_pack("{s:I}", "input_tokens", (json_int_t)job.req.n_ids)))
        api_oom(e);
    json_decref(root);
    api_request_free(&req);
    sched_request_clear(&job.req);
    return count;
}

/* --- the answer --- */

static json_t *usage_json(const api_request *req, const sched_job *job) {
    uint32_t computed = req->n_prompt - job->prog.cached, left_cached = req->ctx->prefix_cache ? computed : 0;
    return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", (int)(computed - left_cached), "cache_creation_input_tokens",
                     (int)left_cached, "cache_read_input_tokens", (int)job->prog.cached, "output_tokens",
                     (int)job->prog.n_gen);
}

static const char *stop_reason(const sched_job *job) {
    if (job->prog.tool_calls) return "tool_use";
    if (!strcmp(job->prog.finish_reason, "length")) return "max_tokens";
    return job->prog.text.stop_hit ? "stop_sequence" : "end_turn";
}

/* Call i of the job (an OpenAI tool call) as a tool_use block, its input the arguments parsed (with_input), or {}
 * to be streamed as input_json_delta. Arguments that are not a JSON object give {}: a tool_use input is one. */
static json_t *tool_use_block(const api_request *req, const sched_job *job, size_t i, bool with_input) {
    const json_t *fn = json_object_get(json_array_get(job->prog.tool_calls, i), "function");
    json_t *input = with_input ? json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL) : NULL;
    if (!json_is_object(input)) {
        json_decref(input);
        input = json_object();
    }
    char id[96];
    snprintf(id, sizeof id, "toolu_%s_%zu", req->id + strlen("msg_"), i);
    return json_pack("{s:s,s:s,s:O,s:o}", "type", "tool_use", "id", id, "name", json_object_get(fn, "name"), "input",
                     input);
}

/* The arguments of call i as they stream: the input's JSON text. */
static const char *tool_arguments(const sched_job *job, size_t i) {
    const char *args = json_string_value(
        json_object_get(json_object_get(json_array_get(job->prog.tool_calls, i), "function"), "arguments"));
    json_t *parsed = json_loads(args ? args : "", 0, NULL);
    bool object = json_is_object(parsed);
    json_decref(parsed);
    return object ? args : "{}";
}

static json_t *text_block(const char *text, size_t len) {
    return json_pack("{s:s,s:s%}", "type", "text", "text", text ? text : "", len);
}

json_t *anth_response(api_request *req, const sched_job *job) {
    json_t *content = json_array();
    const reply *r = &job->prog.reply; /* its reasoning is not sent: extended thinking is not offered */
    if (r->n_content || !job->prog.tool_calls) json_array_append_new(content, text_block(r->content, r->n_content));
    for (size_t i = 0; i < json_array_size(job->prog.tool_calls); i++)
        json_array_append_new(content, tool_use_block(req, job, i, true));
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:o}", "id", req->id, "type", "message", "role", "assistant",
                     "model", req->model, "content", content, "stop_reason", stop_reason(job), "stop_sequence",
                     job->prog.text.stop_hit ? json_string(job->prog.text.stop_hit) : json_null(), "usage",
                     usage_json(req, job));
}

static void emit(json_t *events, json_t *event) { json_array_append_new(events, event); }

static void block_start(api_request *req, json_t *events, json_t *block) {
    emit(events, json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", req->n_blocks++, "content_block", block));
}

static void block_stop(api_request *req, json_t *events) {
    emit(events, json_pack("{s:s,s:i}", "type", "content_block_stop", "index", req->n_blocks - 1));
}

void anth_stream(api_request *req, sched_job *job, json_t *events) {
    api_choice *c = &req->choice[0];
    if (job->prog.error.code) {
        api_error err;
        api_fail_with(&err, NULL, &job->prog.error);
        emit(events, anth_error_body(&err));
        req->finished = true;
        return;
    }
    /* message_start carries the usage of the prompt, known once the job has started generating. */
    if (!c->started && !(job->prog.text.stable > 0 || job->prog.done)) return;
    if (!c->started) {
        json_t *usage = usage_json(req, job);
        json_object_set_new(usage, "output_tokens", json_integer(0));
        emit(events, json_pack("{s:s,s:{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:o}}", "type", "message_start", "message", "id",
                               req->id, "type", "message", "role", "assistant", "model", req->model, "content",
                               "stop_reason", "stop_sequence", "usage", usage));
        emit(events, json_pack("{s:s}", "type", "ping"));
        c->started = true;
    }
    const reply *r = &job->prog.reply;
    if (r->n_content > c->sent_content) {
        if (!req->open) block_start(req, events, text_block("", 0));
        req->open = true;
        emit(events, json_pack("{s:s,s:i,s:{s:s,s:s%}}", "type", "content_block_delta", "index", req->n_blocks - 1,
                               "delta", "type", "text_delta", "text", r->content + c->sent_content,
                               r->n_content - c->sent_content));
        c->sent_content = r->n_content;
    }
    c->sent = r->read;
    if (!job->prog.done) return;
    if (!req->open && !job->prog.tool_calls) block_start(req, events, text_block("", 0)); /* as anth_response */
    if (req->open || !job->prog.tool_calls) block_stop(req, events);
    for (size_t i = 0; i < json_array_size(job->prog.tool_calls); i++) {
        block_start(req, events, tool_use_block(req, job, i, false));
        emit(events, json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", req->n_blocks - 1,
                               "delta", "type", "input_json_delta", "partial_json", tool_arguments(job, i)));
        block_stop(req, events);
    }
    emit(events,
         json_pack("{s:s,s:{s:s,s:o},s:o}", "type", "message_delta", "delta", "stop_reason", stop_reason(job),
                   "stop_sequence", job->prog.text.stop_hit ? json_string(job->prog.text.stop_hit) : json_null(),
                   "usage", usage_json(req, job)));
    emit(events, json_pack("{s:s}", "type", "message_stop"));
    req->finished = true;
}

json_t *anth_error_body(const api_error *e) {
    const char *type = e->status == 401   ? "authentication_error"
                       : e->status == 403 ? "permission_error"
                       : e->status == 404 ? "not_found_error"
                       : e->status == 413 ? "request_too_large"
                       : e->status == 429 ? "rate_limit_error"
                       : e->status == 503 ? "overloaded_error"
                       : e->status >= 500 ? "api_error"
                                          : "invalid_request_error";
    return json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", type, "message", e->message);
}

const api anth_messages = {.paths = {"/v1/messages"}, .parse = anth_parse, .respond = anth_response,
                           .stream = anth_stream, .error_body = anth_error_body, .named_events = true};
