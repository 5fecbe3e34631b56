/* metrics.h — the server's counters, exported as Prometheus text on GET /metrics.
 *
 * WHY counted at the end: a request is counted once, when its response is complete — its status, and for
 * completions the prompt, cached and generated tokens and the prefill and decode seconds — so a scrape never sees
 * half a request. The cache hit ratio is cached / prompt tokens over the server's life. Requests turned away by a
 * limit are counted by reason; the queue, the running requests and the open connections are gauges beside their
 * limits.
 * Per tenant (tenants.h), by name: the requests its keys made, and their prompt, cached and generated tokens; a tenant
 * is listed from its first request on, and stays listed (its counters only grow) after a reload drops its keys.
 * Failed authentications are counted apart (they have no tenant).
 *
 * INVARIANT: counters only grow, and every request that got a status is in exactly one status's count.
 *
 * Thread-safety: every function locks.
 */
#ifndef FKV_METRICS_H
#define FKV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "flatkv.h"

typedef struct metrics metrics;

/* Why a request was turned away (flatkv_rejected_total{reason}). */
typedef enum { METRICS_QUEUE_FULL, METRICS_DEADLINE, METRICS_BODY_TIMEOUT, METRICS_N_REJECTED } metrics_rejection;

/* The server's load at the time of a scrape, beside its limits (0: none). */
typedef struct {
    uint32_t queued, running, max_queue;
    uint32_t connections, max_connections;
} metrics_load;

metrics *metrics_new(void);
void metrics_free(metrics *m);
/* A request answered with status, made with a key of tenant (NULL: none). */
void metrics_count_request(metrics *m, int status, const char *tenant);
/* A request done: its prompt tokens, those reused, the tokens generated, speculative decoding's guesses and those kept,
 * its times, and its key's tenant (NULL: none). */
typedef struct {
    uint32_t prompt, cached, generated, drafted, accepted;
    double prefill_ms, decode_ms;
    const char *tenant;
} metrics_completion;
void metrics_count_completion(metrics *m, const metrics_completion *c);
void metrics_count_rejected(metrics *m, metrics_rejection why);
/* A request refused for want of a key the server knows (401). */
void metrics_count_auth_failure(metrics *m);
/* The Prometheus text exposition with the engine's block and cache counters and the load, malloc'd. */
char *metrics_render(metrics *m, const fkv_engine_stats *kv, const metrics_load *load);

#endif
