/* server.h — the HTTP server (libmicrohttpd, one thread per connection) in front of an engine per model.
 *
 * WHY one process serves every API: OpenAI's chat and completions, Anthropic's Messages and OpenAI's Responses are
 * rows of one table (api.h) that turn a body into the same kind of job, which one scheduler (scheduler.h) runs on the
 * engine of the model the body names (models.h); so a conversation reuses its cached rows whichever API it speaks.
 * Routes (http.c): POST at each API's paths (/v1/chat/completions, /v1/completions, /v1/messages, /v1/responses), GET
 * and DELETE /v1/responses/{id}, GET /v1/models and /v1/models/{id}, /health (no key needed) and /metrics. Requests
 * queue fairly; a client that disconnects stops its generation at the next token.
 *
 * INVARIANT: every failure is a 4xx/5xx with an error body in the shape of the API whose path it came to — OpenAI's
 * {"error": {message, type, param, code}}, under /v1/messages Anthropic's {"type": "error", "error": {type,
 * message}} — and the server keeps serving.
 *
 * Overload: past --max-queue waiting requests the next gets 503 with Retry-After; past --max-connections new
 * connections are refused; a request still waiting or running --timeout seconds after it arrived ends with 504;
 * a body that has not fully arrived --body-timeout seconds after the headers gets 408 and the connection closes.
 * Each is counted on /metrics. SIGINT/SIGTERM: stop accepting, cancel what runs, exit 0.
 *
 * Keys: --api-key KEY and --api-keys FILE name tenants (tenants.h); a request without a key the server knows is a 401
 * on every route but /health and the chat page's files, and a tenant's requests are salted with it. SIGHUP reloads
 * FILE: a file that does not parse leaves the keys as they were (one line on stderr says where), requests in flight
 * keep the tenant they authenticated as.
 */
#ifndef FKV_SERVER_H
#define FKV_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "chat/chat.h"
#include "flatkv.h"
#include "models.h"
#include "tenants.h"

typedef struct {
    const char *host;
    uint16_t port;
    const char *api_key;  /* one more key, shared, of the tenant "default"; NULL: none */
    const char *api_keys; /* --api-keys FILE (tenants.h), reloaded on SIGHUP; NULL: none (and with no api_key, no
                           * authentication) */
    size_t max_body;
    fkv_engine_params engine;
    uint32_t parallel; /* requests run at once */
    uint32_t max_queue;       /* requests waiting at most (past it: 503 with Retry-After); 0: no bound */
    uint32_t max_connections; /* connections open at once (past it new ones are refused) */
    float timeout_s;          /* a request's deadline from its arrival (seconds), waiting and running; 0: none */
    uint32_t body_timeout_s;  /* the whole request must arrive within this, and a connection idle this long closes */
    uint32_t responses_max; /* the Responses API's store: most responses kept */
    size_t responses_mem;   /* and most bytes they take */
    const models_entry *models; /* the models served, by id; the first answers requests that name none */
    uint32_t n_models;
    uint32_t max_models; /* loaded at once; past it the least recently used (and idle) is unloaded */
    bool any_model;      /* an unknown model name is the first model's, not a 404 */
    const chat_template *tmpl; /* every model's chat template; NULL: each model's own */
    fkv_spec_params spec; /* speculative decoding for requests that do not ask (spec.draft: the draft model's engine,
                           * run by the engine thread) */
} server_params;

/* Serve until SIGINT or SIGTERM. first: the first model, loaded from p->models[0] by the caller, whose ownership passes
 * to the server (unloaded like any other); keys: tenants_load of p->api_keys and p->api_key (NULL: no key needed),
 * owned by the server too (a SIGHUP replaces them). Returns 0 after a clean shutdown, or -1 with err (e.g. the
 * port). */
int server_run(fkv_model *first, tenants *keys, const server_params *p, fkv_error *err);

#endif
