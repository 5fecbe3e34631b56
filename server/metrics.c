#include "metrics.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STATUS 600

/* One tenant's counters, under its name. */
typedef struct {
    char *name;
    uint64_t requests, prompt, cached, generated;
} metrics_tenant;

struct metrics {
    pthread_mutex_t mu;
    uint64_t by_status[MAX_STATUS];
    uint64_t prompt, cached, generated, drafted, accepted;
    double prefill_s, decode_s;
    uint64_t rejected[METRICS_N_REJECTED];
    uint64_t auth_failures;
    metrics_tenant *tenants; /* in the order of their first request; a handful to a few hundred: a lookup walks them */
    size_t n_tenants;
};

metrics *metrics_new(void) {
    metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void metrics_free(metrics *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_tenants; i++) free(m->tenants[i].name);
    free(m->tenants);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* The counters of the tenant named name (m->mu held), added at its first request; NULL for no tenant, or when memory
 * ran out (that request then goes uncounted under its tenant, and in the totals still). */
static metrics_tenant *tenant_of(metrics *m, const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < m->n_tenants; i++)
        if (!strcmp(m->tenants[i].name, name)) return &m->tenants[i];
    char *copy = strdup(name);
    metrics_tenant *grown = copy ? realloc(m->tenants, sizeof *grown * (m->n_tenants + 1)) : NULL;
    if (!grown) {
        free(copy);
        return NULL;
    }
    m->tenants = grown;
    grown[m->n_tenants] = (metrics_tenant){.name = copy};
    return &grown[m->n_tenants++];
}

void metrics_count_request(metrics *m, int status, const char *tenant) {
    pthread_mutex_lock(&m->mu);
    if (status >= 100 && status < MAX_STATUS) m->by_status[status]++;
    metrics_tenant *t = tenant_of(m, tenant);
    if (t) t->requests++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_completion(metrics *m, const metrics_completion *c) {
    pthread_mutex_lock(&m->mu);
    m->prompt += c->prompt;
    m->cached += c->cached;
    m->generated += c->generated;
    m->drafted += c->drafted;
    m->accepted += c->accepted;
    m->prefill_s += c->prefill_ms / 1e3;
    m->decode_s += c->decode_ms / 1e3;
    metrics_tenant *t = tenant_of(m, c->tenant);
    if (t) {
        t->prompt += c->prompt;
        t->cached += c->cached;
        t->generated += c->generated;
    }
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_rejected(metrics *m, metrics_rejection why) {
    pthread_mutex_lock(&m->mu);
    m->rejected[why]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_auth_failure(metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->auth_failures++;
    pthread_mutex_unlock(&m->mu);
}

char *metrics_render(metrics *m, const fkv_engine_stats *kv, const metrics_load *load) {
    char *buf = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&buf, &size);
    if (!out) return NULL;
    pthread_mutex_lock(&m->mu);
    fprintf(out, "# HELP flatkv_requests_total HTTP requests answered, by status.\n"
                 "# TYPE flatkv_requests_total counter\n");
    for (int s = 100; s < MAX_STATUS; s++)
        if (m->by_status[s]) fprintf(out, "flatkv_requests_total{status=\"%d\"} %llu\n", s, (unsigned long long)m->by_status[s]);
    fprintf(out,
            "# HELP flatkv_prompt_tokens_total Prompt tokens of completed requests.\n"
            "# TYPE flatkv_prompt_tokens_total counter\nflatkv_prompt_tokens_total %llu\n"
            "# HELP flatkv_cached_tokens_total Prompt tokens reused from the KV cache instead of prefilled.\n"
            "# TYPE flatkv_cached_tokens_total counter\nflatkv_cached_tokens_total %llu\n"
            "# HELP flatkv_generated_tokens_total Generated tokens.\n"
            "# TYPE flatkv_generated_tokens_total counter\nflatkv_generated_tokens_total %llu\n"
            "# HELP flatkv_prefill_seconds_total Time spent prefilling prompts.\n"
            "# TYPE flatkv_prefill_seconds_total counter\nflatkv_prefill_seconds_total %.6f\n"
            "# HELP flatkv_decode_seconds_total Time spent generating.\n"
            "# TYPE flatkv_decode_seconds_total counter\nflatkv_decode_seconds_total %.6f\n"
            "# HELP flatkv_spec_drafted_tokens_total Tokens speculative decoding guessed.\n"
            "# TYPE flatkv_spec_drafted_tokens_total counter\nflatkv_spec_drafted_tokens_total %llu\n"
            "# HELP flatkv_spec_accepted_tokens_total Guessed tokens the model's own choice kept.\n"
            "# TYPE flatkv_spec_accepted_tokens_total counter\nflatkv_spec_accepted_tokens_total %llu\n"
            "# HELP flatkv_spec_acceptance_ratio Kept guesses / guesses.\n"
            "# TYPE flatkv_spec_acceptance_ratio gauge\nflatkv_spec_acceptance_ratio %.6f\n"
            "# HELP flatkv_cache_hit_ratio Cached prompt tokens / prompt tokens.\n"
            "# TYPE flatkv_cache_hit_ratio gauge\nflatkv_cache_hit_ratio %.6f\n"
            "# HELP flatkv_kv_bytes K/V bytes in blocks that hold rows (running or cached sequences).\n"
            "# TYPE flatkv_kv_bytes gauge\nflatkv_kv_bytes %zu\n"
            "# HELP flatkv_kv_blocks_in_use KV blocks holding rows.\n"
            "# TYPE flatkv_kv_blocks_in_use gauge\nflatkv_kv_blocks_in_use %u\n"
            "# HELP flatkv_kv_blocks_free KV blocks free.\n"
            "# TYPE flatkv_kv_blocks_free gauge\nflatkv_kv_blocks_free %u\n"
            "# HELP flatkv_kv_bytes_shared K/V bytes in blocks that two or more running sequences share.\n"
            "# TYPE flatkv_kv_bytes_shared gauge\nflatkv_kv_bytes_shared %zu\n"
            "# HELP flatkv_cache_hits_total Requests that reused cached rows.\n"
            "# TYPE flatkv_cache_hits_total counter\nflatkv_cache_hits_total %llu\n"
            "# HELP flatkv_cache_misses_total Requests computed from position 0.\n"
            "# TYPE flatkv_cache_misses_total counter\nflatkv_cache_misses_total %llu\n"
            "# HELP flatkv_kv_evictions_total KV blocks evicted (least recently used first).\n"
            "# TYPE flatkv_kv_evictions_total counter\nflatkv_kv_evictions_total %llu\n"
            "# HELP flatkv_kv_window_bytes K/V bytes of sliding-window layers held apart (0: none, or --swa-full).\n"
            "# TYPE flatkv_kv_window_bytes gauge\nflatkv_kv_window_bytes %zu\n"
            "# HELP flatkv_kv_window_dropped_total Window layers' blocks given back once no resume could read them.\n"
            "# TYPE flatkv_kv_window_dropped_total counter\nflatkv_kv_window_dropped_total %llu\n"
            "# HELP flatkv_kv_window_fallbacks_total Requests that reused less than they agreed (window rows gone).\n"
            "# TYPE flatkv_kv_window_fallbacks_total counter\nflatkv_kv_window_fallbacks_total %llu\n",
            (unsigned long long)m->prompt, (unsigned long long)m->cached, (unsigned long long)m->generated,
            m->prefill_s, m->decode_s, (unsigned long long)m->drafted, (unsigned long long)m->accepted,
            m->drafted ? (double)m->accepted / (double)m->drafted : 0.0,
            m->prompt ? (double)m->cached / (double)m->prompt : 0.0,
            (size_t)kv->blocks_in_use * kv->block_bytes + (size_t)kv->window_blocks_in_use * kv->window_block_bytes,
            kv->blocks_in_use, kv->blocks_free,
            (size_t)kv->blocks_shared * kv->block_bytes, (unsigned long long)kv->hits, (unsigned long long)kv->misses,
            (unsigned long long)kv->evictions, (size_t)kv->window_blocks_in_use * kv->window_block_bytes,
            (unsigned long long)kv->window_blocks_dropped, (unsigned long long)kv->window_fallbacks);
    /* The disk tier (--kv-dir; all 0 without one), then the kept recurrent states. */
    const struct {
        const char *name, *type, *help;
        uint64_t value;
    } tier[] = {
        {"disk_hits_total", "counter", "Blocks read from the disk tier and verified.", kv->disk_hits},
        {"disk_misses_total", "counter", "Disk tier lookups that found no block file.", kv->disk_misses},
        {"disk_corrupt_total", "counter", "Block files that did not verify: ignored, removed, recomputed.",
         kv->disk_corrupt},
        {"disk_forged_total", "counter", "With --kv-key: block files whose checksums verified and MAC did not "
         "(written without the key): ignored, removed, recomputed.", kv->disk_forged},
        {"disk_writes_total", "counter", "Block files written.", kv->disk_writes},
        {"disk_evictions_total", "counter", "Block files removed over --kv-disk, least recently used first.",
         kv->disk_evictions},
        {"disk_dropped_total", "counter", "Block writes dropped because the write queue was full.", kv->disk_dropped},
        {"disk_errors_total", "counter", "Block writes the file system refused.", kv->disk_errors},
        {"disk_pending", "gauge", "Block writes queued, not yet on disk.", kv->disk_pending},
        {"disk_bytes", "gauge", "Bytes of block files in the directory, as last counted.", kv->disk_bytes},
        {"disk_reused_tokens_total", "counter", "Prompt tokens reused from blocks read from disk.",
         kv->disk_reused_tokens},
        /* Recurrent states kept at resume points (all 0 without recurrent layers) */
        {"state_kept", "gauge", "Recurrent states kept at resume points.", kv->states_kept},
        {"state_bytes", "gauge", "Bytes of the kept recurrent states (within --kv-mem with the K/V blocks).",
         kv->state_bytes},
        {"state_hits_total", "counter", "Requests that resumed from a kept recurrent state.", kv->state_hits},
        {"state_disk_hits_total", "counter", "Of them, from a state file of the disk tier (a restart, a replica).",
         kv->state_disk_hits},
        {"state_evicted_total", "counter", "Kept recurrent states given up for room, least recently used first.",
         kv->states_evicted},
        {"state_grid", "gauge", "Positions between the recurrent states kept on the grid (--state-grid; 0: none).",
         kv->state_grid},
    };
    for (size_t i = 0; i < sizeof tier / sizeof *tier; i++)
        fprintf(out, "# HELP flatkv_kv_%s %s\n# TYPE flatkv_kv_%s %s\nflatkv_kv_%s %llu\n", tier[i].name, tier[i].help,
                tier[i].name, tier[i].type, tier[i].name, (unsigned long long)tier[i].value);
    static const char *const reasons[METRICS_N_REJECTED] = {
        [METRICS_QUEUE_FULL] = "queue_full",     /* 503 with Retry-After (--max-queue) */
        [METRICS_DEADLINE] = "deadline",         /* 504, or a stream's error event (--timeout) */
        [METRICS_BODY_TIMEOUT] = "body_timeout", /* closed: 408 in the log (--body-timeout) */
    };
    fprintf(out, "# HELP flatkv_rejected_total Requests a limit turned away or ended, by reason.\n"
                 "# TYPE flatkv_rejected_total counter\n");
    for (int r = 0; r < METRICS_N_REJECTED; r++)
        fprintf(out, "flatkv_rejected_total{reason=\"%s\"} %llu\n", reasons[r], (unsigned long long)m->rejected[r]);
    const struct {
        const char *name, *help;
        uint32_t value;
    } gauges[] = {
        {"queue_depth", "Requests waiting to run.", load->queued},
        {"queue_limit", "Most requests that may wait (--max-queue; 0: no bound).", load->max_queue},
        {"requests_running", "Requests running now.", load->running},
        {"connections_open", "HTTP connections open.", load->connections},
        {"connection_limit", "Most connections open at once (--max-connections).", load->max_connections},
    };
    for (size_t i = 0; i < sizeof gauges / sizeof *gauges; i++)
        fprintf(out, "# HELP flatkv_%s %s\n# TYPE flatkv_%s gauge\nflatkv_%s %u\n", gauges[i].name, gauges[i].help,
                gauges[i].name, gauges[i].name, gauges[i].value);
    fprintf(out, "# HELP flatkv_auth_failures_total Requests refused for a missing or unknown API key (401).\n"
                 "# TYPE flatkv_auth_failures_total counter\nflatkv_auth_failures_total %llu\n",
            (unsigned long long)m->auth_failures);
    /* Per tenant: a name is [A-Za-z0-9._-] (tenants.h), so it needs no escaping in a label. */
    const struct {
        const char *name, *help;
        size_t offset;
    } per_tenant[] = {
        {"requests_total", "Requests answered (any status) made with the tenant's keys.",
         offsetof(metrics_tenant, requests)},
        {"prompt_tokens_total", "Prompt tokens of the tenant's completed requests.", offsetof(metrics_tenant, prompt)},
        {"cached_tokens_total", "Of them, reused from the tenant's cache instead of prefilled.",
         offsetof(metrics_tenant, cached)},
        {"generated_tokens_total", "Tokens generated for the tenant.", offsetof(metrics_tenant, generated)},
    };
    for (size_t k = 0; k < sizeof per_tenant / sizeof *per_tenant; k++) {
        fprintf(out, "# HELP flatkv_tenant_%s %s\n# TYPE flatkv_tenant_%s counter\n", per_tenant[k].name,
                per_tenant[k].help, per_tenant[k].name);
        for (size_t i = 0; i < m->n_tenants; i++) {
            const uint64_t *v = (const uint64_t *)((const char *)&m->tenants[i] + per_tenant[k].offset);
            fprintf(out, "flatkv_tenant_%s{tenant=\"%s\"} %llu\n", per_tenant[k].name, m->tenants[i].name,
                    (unsigned long long)*v);
        }
    }
    pthread_mutex_unlock(&m->mu);
    fclose(out);
    return buf;
}
