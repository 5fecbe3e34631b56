/* metrics.h — the server's counters, exported as Prometheus text on GET /metrics.
 *
 * WHY counted at the end: a request is counted once, when its response is complete — its status, and for
 * completions the prompt, cached and generated tokens and the prefill and decode seconds — so a scrape never sees
 * half a request. The cache hit ratio is cached / prompt tokens over the server's life. Requests turned away by a
 * limit are counted by reason; the queue, the running requests and the open connections are gauges beside their
 * limits.
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
void metrics_count_request(metrics *m, int status);
/* A request done: its prompt tokens, those reused, the tokens generated, speculative decoding's guesses and those kept,
 * and its times. */
typedef struct {
    uint32_t prompt, cached, generated, drafted, accepted;
    double prefill_ms, decode_ms;
} metrics_completion;
void metrics_count_completion(metrics *m, const metrics_completion *c);
void metrics_count_rejected(metrics *m, metrics_rejection why);
/* The Prometheus text exposition with the engine's block and cache counters and the load, malloc'd. */
char *metrics_render(metrics *m, const fkv_engine_stats *kv, const metrics_load *load);

#endif
