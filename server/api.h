/* api.h — what every API the server speaks shares, and the row each of them is in the server's table.
 *
 * WHY one layer: an API is a translation. Every body — OpenAI's chat and completions, Anthropic's Messages, OpenAI's
 * Responses — is read into the one chat-shaped request the scheduler runs: a sched_job whose prompt the chat template
 * rendered from chat's messages (convo.h) and chat's tools, and whose constraints are in chat's shapes. So the prefix
 * cache, which sees only ids, reuses a conversation whichever API it speaks. What the APIs do alike is here, once:
 * errors and the HTTP statuses of failures, reading the body, the fields every API reads alike, the constraints,
 * rendering, ids. What differs is a row (api): the paths it serves, how it parses, answers, streams and shapes an
 * error. Adding an API is a file that defines its row, and the row's line in http.c's list.
 *
 * INVARIANT: a request is validated completely before anything is queued; every refusal is an api_error (an HTTP
 * status, a type, a param, a code, a sentence), shaped into a body by the row of the path it came to.
 *
 * Thread-safety: a request is its connection's; api_json_failed is per thread.
 */
#ifndef FKV_API_H
#define FKV_API_H

#include <jansson.h>
#include <stdbool.h>

#include "convo.h"
#include "flatkv.h"
#include "scheduler.h"
#include "chat/chat.h"

typedef struct {
    int status; /* HTTP status */
    const char *type;
    char param[64];   /* "": null */
    const char *code; /* NULL: null */
    char message[512];
    unsigned retry_after; /* seconds for a Retry-After header; 0: none */
} api_error;

/* What the server gives every parser: how to turn a body into a job. */
typedef struct {
    const fkv_model *model;
    const chat_template *tmpl;
    uint32_t n_ctx;
    fkv_spec_params spec;     /* the server's speculative decoding (a request's `speculative` may change it) */
    bool prefix_cache;        /* the engine keeps what it computes for later requests (the Messages API's usage) */
    struct resp_store *store; /* the Responses API's stored responses (responses.h) */
    const char *model_id;     /* the model's id as the server lists it (models.h): answers that name none echo it */
    const char *tenant;       /* the tenant whose own cache the request's key names (tenants_cache); NULL: the shared
                               * cache. The server gives each request a copy of its model's context with it set */
} api_context;

/* One choice's progress on a stream. */
typedef struct {
    size_t sent;     /* the reply's text bytes read (prog.reply.read) when the stream last looked */
    size_t sent_reasoning, sent_content; /* the reply's reasoning and content bytes sent */
    size_t lps_sent; /* logprob entries sent (sched_job.lps) */
    bool started, done;
} api_choice;

/* A request as its row's parser read it, whatever the API; the fields an API has no use for stay zero. */
typedef struct {
    const api_context *ctx; /* borrowed: the server's */
    bool stream;
    uint32_t n; /* choices: the job and its followers (OpenAI's n; 1 for the other APIs) */
    char id[48];
    char model[128]; /* as the request named it */
    long long created;
    char cache_key[65]; /* prompt_cache_key, for the log only (truncated): a routing key, see api_common_fields */
    uint32_t n_prompt;  /* the prompt's ids (the job's count grows if it is preempted) */
    bool completion;    /* OpenAI: legacy completions (a prompt in, text out), not chat */
    bool include_usage; /* OpenAI: stream_options.include_usage */
    bool store_it;      /* Responses: the answer is kept in ctx->store */
    json_t *base;       /* Responses: the response object's fields that repeat the request (instructions, tools, ...) */
    char *instructions; /* Responses: in effect, this request's or its chain's (NULL: none) */
    json_t *tools;      /* Responses: in effect, as given (the Responses' shape), or NULL */
    int32_t *prompt;    /* Responses: the prompt's ids, kept with the answer */
    /* A stream's progress, advanced by the row's stream alone. */
    api_choice choice[SCHED_MAX_CHOICES];
    bool open;     /* Messages: the text block is open; Responses: the message item and its output_text part are */
    int n_blocks;  /* Messages: content blocks started */
    int seq;       /* Responses: the next event's sequence_number */
    bool finished; /* the stream's last event is among those made */
} api_request;

/* An API: where it is served and how it reads a request and answers. */
typedef struct api {
    const char *paths[3]; /* where it is POSTed (NULL-terminated); every path that begins with one of them (a 404, a
                           * 405) gets its error shape. No path of a row begins another row's. */
    /* Validate body and fill req and job: ids, sampling, limits, constraints. 0, or -1 with e. */
    int (*parse)(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job, api_error *e);
    /* The answer to a finished job and its followers. */
    json_t *(*respond)(api_request *req, const sched_job *job);
    /* Append to events the events the job's progress allows now, in order (job->mu held; the row locks a follower's
     * itself); req->finished once the last is among them. An event that is a string is sent as it is. */
    void (*stream)(api_request *req, sched_job *job, json_t *events);
    json_t *(*error_body)(const api_error *e);
    bool named_events; /* each event is sent under its "type" (event: TYPE); else as data alone */
} api;

#define API_MAX_STOP 16 /* stop strings a request may give, in every API */

/* Fill e; returns -1 for `return api_fail(...)`. */
int api_fail(api_error *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Fill e from a failure of the library or the scheduler: its code decides the HTTP status and the error's type, in the
 * one table that maps them (api.c). Returns -1. */
int api_fail_with(api_error *e, const char *param, const fkv_error *failure);
/* The 500 of memory running out while a request is read. Returns -1. */
int api_oom(api_error *e);

/* jansson allocates through api_json_init's allocator, which remembers a failure in the thread that met it: a body
 * built while memory ran out has lost parts silently (jansson's setters drop what they cannot add), so before sending
 * one, api_json_failed says whether that happened since it was last asked (and clears it). */
void api_json_init(void);
bool api_json_failed(void);
/* A part of the body being built was lost for want of memory outside jansson: api_json_failed will say so. */
void api_json_lost(void);

/* Every parse's start: req emptied for ctx (one choice, created now), job's sampling the defaults (seeded by the time),
 * and the body as a JSON object — or NULL with e: 400 for what is not one, 500 when memory ran out reading it. */
json_t *api_begin(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job,
                  api_error *e);
/* The model the body names (a copy, for routing before the row's parse), or NULL: none, or a body the parse will
 * refuse (not a JSON object, `model` not a string), which the first model's parser then answers. */
char *api_body_model(const char *body, size_t len);
/* A new id: prefix, then hex digits that no other id of this process has — 32 random ones (random: the id names a
 * stored response, so it must not be guessed), else the time's and a counter's. */
void api_new_id(char out[48], const char *prefix, bool random);

/* How a field is named in its 400: OpenAI's errors quote it and name it in param ("'top_p' must be ..."), Anthropic's
 * begin with it ("top_p: must be ..."). */
typedef enum { API_QUOTED, API_LEADING } api_naming;
/* A number field in [lo, hi] (absent or null: *out kept). 0, or -1 with e. */
int api_number(const json_t *root, const char *key, double lo, double hi, float *out, api_naming naming, api_error *e);
/* A boolean field (absent or null: *out kept). 0, or -1 with e. */
int api_bool(const json_t *root, const char *key, bool *out, api_naming naming, api_error *e);

/* The fields every API reads alike: cache_salt — composed with ctx->tenant into the job's salt (tenants_salt) before
 * anything reads it; one with a control character is a 400 — and prompt_cache_retention into job, the routing keys
 * prompt_cache_key and user checked (strings), prompt_cache_key copied to cache_key (for the log, truncated), and
 * speculative — {"mode": "off"|"lookup"|"draft", "draft_max": 1..16}, flatkv's own: how the answer is computed, never
 * what it is — over the server's (ctx->spec). 0, or -1 with e. */
int api_common_fields(const api_context *ctx, const json_t *root, sched_job *job, char cache_key[65], api_error *e);

/* A function tool in chat's shape, {"type": "function", "function": {name, description, parameters}}: description and
 * parameters only where they are a string and an object. NULL when memory ran out. */
json_t *api_function_tool(const json_t *name, const json_t *description, const json_t *parameters);
/* Whether one of tools (each with a top-level "name", as the Messages and Responses APIs give them) is named name. */
bool api_names_tool(const json_t *tools, const json_t *name);
/* The reply's form (job->form: how a prompt rendered by template t — the request's, its settings included; NULL for a
 * prompt of plain text — is answered, and with tools, chat's shape or NULL, kept in job->tools, how calls are
 * written) and the grammar the job's output must follow (job->grammar), from what the request asked in chat's shapes,
 * whatever its API, composed as OpenAI composes them: job->tool_choice "required" or a named function of the tools
 * offered — calls in the template's syntax, arguments valid against each tool's parameters, and no text answer, so a
 * response_format beside it shapes nothing; else job->response_format (json_object, json_schema) — its JSON as the
 * content, or, with tools offered, either that or calls. Where the form has reasoning, the grammar lets it come
 * first, as the model writes it. A `grammar` (job->grammar already set) takes nothing beside it; a schema flatkv
 * cannot compile is a 400 naming the keyword. 0, or -1 with e. */
int api_constrain(const api_context *ctx, const chat_template *t, sched_job *job, const json_t *tools, api_error *e);
/* The text of part i of a content array (param names the content), or NULL with e. */
typedef const json_t *api_part_text(const json_t *part, size_t i, const char *param, api_error *e);
/* content — a string, or an array of parts whose texts part_text gives — appended to c's last message. 0, or -1 with
 * e. */
int api_put_content(convo *c, const json_t *content, const char *param, api_part_text *part_text, api_error *e);
/* The conversation rendered by template t with tools (chat's shape, or NULL) into the job's prompt ids; a failure names
 * param. Contents are tokenized as text: a control token's text in a message stays text (chat_prompt_ids). */
int api_render(const api_context *ctx, const chat_template *t, convo *c, const json_t *tools, const char *param,
               sched_job *job, api_error *e);
/* Generation may run to the end of the context — prompt and completion together at most n_ctx tokens, as usage
 * counts them (the parsers refuse a prompt that leaves no room) — and the request's limit (0: none) caps it. */
void api_cap_tokens(const api_context *ctx, sched_job *job, json_int_t limit);

/* Free what a parse left in req, and empty it. */
void api_request_free(api_request *req);

#endif
