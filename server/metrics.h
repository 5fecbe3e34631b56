/* metrics.h — the server's counters, exported as Prometheus text on GET /metrics.
 *
 * Counted once per request when its response is complete: the status, and for completions the prompt,
 * cached and generated tokens and the prefill and decode seconds. The cache hit ratio is cached / prompt
 * tokens over the server's life. Thread-safety: every function locks.
 */
#ifndef FKV_METRICS_H
#define FKV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "flatkv.h"

typedef struct metrics metrics;

metrics *metrics_new(void);
void metrics_free(metrics *m);
void metrics_count_request(metrics *m, int status);
void metrics_count_completion(metrics *m, uint32_t prompt, uint32_t cached, uint32_t generated, double prefill_ms,
                              double decode_ms);
/* The Prometheus text exposition with the engine's block and cache counters, malloc'd. */
char *metrics_render(metrics *m, const fkv_engine_stats *kv);

#endif
