/* server.h — the HTTP server (libmicrohttpd, one thread per connection) in front of one engine.
 *
 * WHY one process serves every API: OpenAI's chat and completions, Anthropic's Messages and OpenAI's Responses are
 * rows of one table (api.h) that turn a body into the same kind of job, which one scheduler (scheduler.h) runs on one
 * engine; so a conversation reuses its cached rows whichever API it speaks. Routes (http.c): POST at each API's paths
 * (/v1/chat/completions, /v1/completions, /v1/messages, /v1/responses), GET and DELETE /v1/responses/{id}, GET
 * /v1/models, /health (no key needed) and /metrics. Requests queue fairly; a client that disconnects stops its
 * generation at the next token.
 *
 * INVARIANT: every failure is a 4xx/5xx with an error body in the shape of the API whose path it came to — OpenAI's
 * {"error": {message, type, param, code}}, under /v1/messages Anthropic's {"type": "error", "error": {type,
 * message}} — and the server keeps serving.
 *
 * Overload: past --max-queue waiting requests the next gets 503 with Retry-After; past --max-connections new
 * connections are refused; a request still waiting or running --timeout seconds after it arrived ends with 504;
 * a body that has not fully arrived --body-timeout seconds after the headers gets 408 and the connection closes.
 * Each is counted on /metrics. SIGINT/SIGTERM: stop accepting, cancel what runs, exit 0.
 */
#ifndef FKV_SERVER_H
#define FKV_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "chat/chat.h"
#include "flatkv.h"

typedef struct {
    const char *host;
    uint16_t port;
    const char *api_key; /* NULL: no authentication */
    size_t max_body;
    fkv_engine_params engine;
    uint32_t parallel; /* requests run at once */
    uint32_t max_queue;       /* requests waiting at most (past it: 503 with Retry-After); 0: no bound */
    uint32_t max_connections; /* connections open at once (past it new ones are refused) */
    float timeout_s;          /* a request's deadline from its arrival (seconds), waiting and running; 0: none */
    uint32_t body_timeout_s;  /* the whole request must arrive within this, and a connection idle this long closes */
    uint32_t responses_max; /* the Responses API's store: most responses kept */
    size_t responses_mem;   /* and most bytes they take */
    chat_template tmpl;
    fkv_spec_params spec; /* speculative decoding for requests that do not ask (spec.draft: the draft model's engine,
                           * run by the engine thread) */
} server_params;

/* Serve until SIGINT or SIGTERM. Returns 0 after a clean shutdown, or -1 with err (e.g. the port). */
int server_run(const fkv_model *m, const server_params *p, fkv_error *err);

#endif
