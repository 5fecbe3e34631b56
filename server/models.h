/* models.h — the models a server answers by name: each known by an id, loaded on its first request with an engine of
 * its own, and unloaded least recently used when more than max_loaded would be in memory.
 *
 * WHY one engine per model: a model's cache holds rows only it can read (its vocabulary, its layers), so each loaded
 * model has its own scheduler, KV pool and disk tier (the tier keys its blocks by the model's identity, so one
 * --kv-dir serves them all), and its own api_context: a body is parsed with the tokenizer and template of the model
 * it names. Loading is slow (seconds for a large model), so it runs outside the registry's lock: a request for a
 * model being loaded waits for it, bounded by its deadline.
 *
 * INVARIANT: a model in use — acquired and not yet released, i.e. a request parsing, waiting or running on it — is
 * never unloaded; at most max_loaded models are loaded or being loaded at once (a request that needs one more while
 * every loaded one is in use waits for one to be released).
 *
 * Thread-safety: every function from any thread; a slot's context and scheduler may be used between models_acquire
 * and models_release.
 */
#ifndef FKV_MODELS_H
#define FKV_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "chat/chat.h"
#include "flatkv.h"
#include "scheduler.h"

#define MODELS_ID_MAX 128 /* an id's bytes, its NUL included */

/* A model the server knows: its id (no spaces) and its GGUF file. */
typedef struct {
    const char *id, *path;
} models_entry;

/* What every model's engine is made with. */
typedef struct {
    const models_entry *entries; /* borrowed for the registry's life; the first answers requests that name none */
    uint32_t n_entries;
    uint32_t max_loaded;       /* models in memory at once, at least 1 */
    bool any_model;            /* a name no entry has is the first model's (for tools that hard-code a name) */
    const fkv_engine_params *engine;
    uint32_t parallel, max_queue;   /* each scheduler's (sched_new) */
    const chat_template *tmpl;      /* every model's template; NULL: each model's own, detected */
    fkv_spec_params spec;           /* speculative decoding (a draft engine only with one model: one thread runs it) */
    uint32_t responses_max;         /* each model's store of responses (resp_store_new) */
    size_t responses_mem;
} models_params;

typedef struct models models;
typedef struct models_slot models_slot;

/* The registry of p's entries, its first model loaded now (given: `first`, loaded by the caller from entries[0].path,
 * whose ownership passes to the registry; NULL: loaded here). NULL with err. */
models *models_new(const models_params *p, fkv_model *first, fkv_error *err);
/* Stop every loaded model's scheduler: what runs and waits ends (slots stay valid until released). */
void models_stop(models *r);
/* Unload everything and free (no slot may still be acquired). */
void models_free(models *r);

/* The model a request names (NULL: none named, the first), loaded if it is not — waiting for a load under way, or for
 * a loaded model to be released to make room, until deadline_ms (sched_now_ms's clock; 0: none). 0 with *out, which
 * the caller releases; or -1 with e: 404 model_not_found (an unknown name, without any_model), 504 (the deadline
 * passed), 500 (the model failed to load: the load's sentence). */
int models_acquire(models *r, const char *name, double deadline_ms, models_slot **out, api_error *e);
void models_release(models *r, models_slot *s);

/* An acquired slot's id, the context its bodies are parsed with, and its scheduler. */
const char *models_id(const models_slot *s);
const api_context *models_context(const models_slot *s);
sched *models_sched(const models_slot *s);

/* GET /v1/models: {"object": "list", "data": [the model object of every entry]} — each with OpenAI's fields (id,
 * object, created, owned_by) and its state (status: "loaded", "loading" or "unloaded"; with meta {n_ctx, n_vocab}
 * when loaded). */
json_t *models_list(models *r);
/* GET /v1/models/{id}: the one entry's object, or NULL (e: 404 model_not_found). */
json_t *models_get(models *r, const char *id, api_error *e);

/* The engine stats and load of the first loaded model (registry order), for /metrics; its load: every loaded model's
 * waiting and running requests summed. false when none is loaded. */
bool models_stats(models *r, fkv_engine_stats *stats, uint32_t *queued, uint32_t *running);
/* The stored response id under salt, from whichever model's store holds it (op: resp_store_get or _delete). */
json_t *models_stored_response(models *r, const char *id, const char *salt,
                               json_t *(*op)(struct resp_store *, const char *, const char *, api_error *),
                               api_error *e);

#endif
