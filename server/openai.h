/* openai.h — the OpenAI API's request and response shapes, as JSON (jansson), kept apart from HTTP.
 *
 * WHY apart: what a request means (messages, sampling, limits) and what a response says (choices, usage,
 * timings, stream chunks) is the contract clients depend on; HTTP is only how it travels. Requests are
 * validated completely before anything is queued, and every problem becomes an OpenAI-style error with
 * the HTTP status, type, param and code a client expects.
 *
 * The server knows nothing of KV layout: it turns a request into prompt ids and sampling for a sched_job
 * and reads back text, counts and timings.
 */
#ifndef FKV_OPENAI_H
#define FKV_OPENAI_H

#include <jansson.h>
#include <stdbool.h>

#include "chat/chat.h"
#include "flatkv.h"
#include "scheduler.h"

typedef struct {
    int status; /* HTTP status */
    const char *type;
    char param[64]; /* "": null */
    const char *code;  /* NULL: null */
    char message[512];
    unsigned retry_after; /* seconds for a Retry-After header; 0: none */
} oai_error;

typedef enum { OAI_CHAT, OAI_COMPLETION } oai_kind;

typedef struct {
    oai_kind kind;
    bool stream;
    bool include_usage;
    uint32_t n; /* choices (n; 1 to SCHED_MAX_CHOICES): the job and its followers */
    const fkv_model *m; /* the tokens' pieces, for logprobs */
    char model[128];
    char id[48];
    long long created;
    char cache_key[65]; /* prompt_cache_key, for the log only (truncated): a routing key, see oai_parse */
} oai_request;

/* What the server needs to turn a body into a job. */
typedef struct {
    const fkv_model *model;
    const chat_template *tmpl;
    uint32_t n_ctx;
    fkv_spec_params spec; /* the server's speculative decoding (a request's `speculative` may change it) */
} oai_context;

/* Validate body (raw bytes) as a request of `kind` and fill job (ids, max_tokens, sampling, stop) and req.
 * 0, or -1 with e filled. */
int oai_parse(const oai_context *ctx, oai_kind kind, const char *body, size_t len, oai_request *req,
              sched_job *job, oai_error *e);

/* The fields every API reads alike (chat, completions, Responses, Messages): cache_salt and prompt_cache_retention
 * into job, the routing keys prompt_cache_key and user checked (strings), prompt_cache_key copied to cache_key (for
 * the log, truncated), and speculative — {"mode": "off"|"lookup"|"draft", "draft_max": 1..16}, flatkv's own: how
 * the answer is computed, never what it is — over the server's (ctx->spec). 0, or -1 with e. */
int oai_parse_common_fields(const oai_context *ctx, const json_t *root, sched_job *job, char cache_key[65],
                            oai_error *e);

/* The grammar job's output must follow (job->grammar), from what the request asked in chat's shapes, whatever its
 * API: job->response_format (json_object, json_schema), or job->tool_choice "required" / a named function with the
 * chat-shaped tools offered (calls in the template's syntax, arguments valid against each tool's parameters). At most
 * one constraint per request; a schema flatkv cannot compile is a 400 naming the keyword. 0, or -1 with e. */
int oai_constrain(const oai_context *ctx, sched_job *job, const json_t *tools, oai_error *e);

/* The whole (non-streamed) response of a finished job (and of its followers, the other choices). */
json_t *oai_response(const oai_request *req, const sched_job *job);
/* One stream chunk of choice `index` carrying text (delta), or its final chunk (finish_reason set); logprobs (taken;
 * NULL: none) those of the chunk's tokens (oai_logprobs). */
json_t *oai_stream_chunk(const oai_request *req, int index, const char *text, size_t len, const char *finish_reason,
                         bool first, json_t *logprobs);
/* The logprobs object of the job's tokens [from, to) (sched_job.lps) in the request's API shape: chat's {content,
 * refusal}, legacy completions' {tokens, token_logprobs, top_logprobs, text_offset}. */
json_t *oai_logprobs(const oai_request *req, const sched_job *job, size_t from, size_t to);
/* The stream chunk carrying a finished job's tool calls (delta.tool_calls, with indexes). */
json_t *oai_tool_calls_chunk(const oai_request *req, int index, const sched_job *job);
/* The usage-only chunk sent before [DONE] when stream_options.include_usage (of every choice). */
json_t *oai_usage_chunk(const oai_request *req, const sched_job *job);
/* {"error": {message, type, param, code}} */
json_t *oai_error_body(const oai_error *e);
/* jansson allocates through oai_json_init's allocator, which remembers a failure in the thread that met it: a body
 * built while memory ran out has lost parts silently (jansson's setters drop what they cannot add), so before
 * sending one, oai_json_failed says whether that happened since it was last asked (and clears it). */
void oai_json_init(void);
bool oai_json_failed(void);
/* The request body as JSON, or NULL with e: 400 for what is not JSON, 500 when memory ran out reading it. Every API's
 * parser reads its body so. */
json_t *oai_load_body(const char *body, size_t len, oai_error *e);
/* Fill e from a failure of the library or the scheduler: its code decides the HTTP status and the error's type, in
 * the one table that maps them (openai.c). Returns -1. */
int oai_fail_with(oai_error *e, const char *param, const fkv_error *failure);
/* Fill e; returns -1 for `return oai_fail(...)`. */
int oai_fail(oai_error *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
