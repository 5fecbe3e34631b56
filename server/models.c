/* models.c — the models a server answers by name (models.h): a slot per entry, loaded on demand, unloaded least
 * recently used.
 *
 * A slot's state moves UNLOADED → LOADING → LOADED → UNLOADING → UNLOADED; only the thread that moved it to LOADING
 * or UNLOADING does the slow work, outside the lock, and every change is broadcast: whoever waits for a model, or for
 * room, looks again.
 */
#include "models.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/err.h"
#include "responses.h"

typedef enum { SLOT_UNLOADED, SLOT_LOADING, SLOT_LOADED, SLOT_UNLOADING } slot_state;

static const char *const state_names[] = {"unloaded", "loading", "loaded", "unloading"};

struct models_slot {
    const models_entry *entry;
    slot_state state;
    fkv_model *model; /* while LOADED (and UNLOADING) */
    sched *sched;
    chat_template tmpl;
    api_context ctx;
    resp_store *store; /* kept across unloads: its chains are this model's ids, valid again when it is reloaded */
    uint32_t users;    /* acquired and not released */
    uint64_t last_used;
};

struct models {
    models_params p;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast on every change of a slot's state or users */
    uint64_t tick;     /* the last acquisition's number: the order of use */
    bool stopped;
    models_slot *slots;
};

/* Load s's model (or take `given`) and start its engine: 0, or -1 with err. Called without the lock, s LOADING. */
static int slot_load(const models *r, models_slot *s, fkv_model *given, fkv_error *err) {
    const double t0 = sched_now_ms();
    fkv_model *m = given ? given : fkv_model_load(s->entry->path, err);
    if (!m) return -1;
    s->tmpl = r->p.tmpl ? *r->p.tmpl : chat_template_detect(fkv_model_chat_template(m));
    if (!r->p.tmpl && s->tmpl.guessed)
        fprintf(stderr, "flatkv serve: %s: unknown chat template; using ChatML\n", s->entry->id);
    /* the NextN block where --spec mtp asks for it, or auto finds it */
    fkv_engine_params ep = *r->p.engine;
    fkv_spec_params spec = r->p.spec;
    ep.mtp = spec.mode == FKV_SPEC_MTP || (spec.mode == FKV_SPEC_AUTO && fkv_model_get_info(m).n_nextn);
    if (!(s->sched = sched_new(m, &ep, r->p.parallel, r->p.max_queue, &spec, err))) {
        fkv_model_free(m);
        return -1;
    }
    if (sched_note(s->sched)) fprintf(stderr, "flatkv serve: %s: %s\n", s->entry->id, sched_note(s->sched));
    s->model = m;
    s->ctx = (api_context){m, &s->tmpl, sched_n_ctx(s->sched), spec, r->p.engine->prefix_cache, s->store,
                           s->entry->id, NULL}; /* the shared cache: a request's copy names its tenant's (http.c) */
    fprintf(stderr, "flatkv serve: model '%s' ready in %.0f ms\n", s->entry->id, sched_now_ms() - t0);
    return 0;
}

static void slot_unload(models_slot *s) {
    sched_free(s->sched);
    fkv_model_free(s->model);
    s->sched = NULL;
    s->model = NULL;
    fprintf(stderr, "flatkv serve: model '%s' unloaded\n", s->entry->id);
}

void models_free(models *r) {
    if (!r) return;
    for (uint32_t i = 0; r->slots && i < r->p.n_entries; i++) {
        if (r->slots[i].state == SLOT_LOADED) slot_unload(&r->slots[i]);
        resp_store_free(r->slots[i].store);
    }
    free(r->slots);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

models *models_new(const models_params *p, fkv_model *first, fkv_error *err) {
    models *r = calloc(1, sizeof *r);
    if (!r || !(r->slots = calloc(p->n_entries, sizeof *r->slots))) {
        free(r);
        fkv_model_free(first);
        err_nomem(err, "out of memory for the models");
        return NULL;
    }
    r->p = *p;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    for (uint32_t i = 0; i < p->n_entries; i++) {
        r->slots[i].entry = &p->entries[i];
        if (!(r->slots[i].store = resp_store_new(p->responses_max, p->responses_mem))) {
            fkv_model_free(first);
            models_free(r);
            err_nomem(err, "out of memory for the models");
            return NULL;
        }
    }
    if (slot_load(r, &r->slots[0], first, err)) { /* frees `first` on failure */
        models_free(r);
        return NULL;
    }
    r->slots[0].state = SLOT_LOADED;
    return r;
}

void models_stop(models *r) {
    pthread_mutex_lock(&r->mu);
    r->stopped = true;
    for (uint32_t i = 0; i < r->p.n_entries; i++)
        if (r->slots[i].state == SLOT_LOADED) sched_stop(r->slots[i].sched);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* The slot a request's name picks, or NULL: an unknown name without any_model. */
static models_slot *slot_named(models *r, const char *name) {
    if (!name) return &r->slots[0];
    for (uint32_t i = 0; i < r->p.n_entries; i++)
        if (!strcmp(r->slots[i].entry->id, name)) return &r->slots[i];
    return r->p.any_model ? &r->slots[0] : NULL;
}

/* Models in memory or on their way in or out (r->mu held). */
static uint32_t resident(const models *r) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->p.n_entries; i++) n += r->slots[i].state != SLOT_UNLOADED;
    return n;
}

/* The loaded model used least recently that no request holds (r->mu held), or NULL. */
static models_slot *eviction_victim(models *r) {
    models_slot *victim = NULL;
    for (uint32_t i = 0; i < r->p.n_entries; i++) {
        models_slot *s = &r->slots[i];
        if (s->state == SLOT_LOADED && !s->users && (!victim || s->last_used < victim->last_used)) victim = s;
    }
    return victim;
}

/* Wait for a change (r->mu held) until deadline_ms (0: a while, then look again). false: the deadline passed. */
static bool wait_change(models *r, double deadline_ms) {
    double wait_ms = deadline_ms ? deadline_ms - sched_now_ms() : 1000;
    if (wait_ms <= 0) return false;
    if (wait_ms > 1000) wait_ms = 1000; /* the deadline is looked at on the monotonic clock, the wait is not */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    const long long ns = until.tv_nsec + (long long)(wait_ms * 1e6);
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&r->cv, &r->mu, &until);
    return true;
}

int models_acquire(models *r, const char *name, double deadline_ms, models_slot **out, api_error *e) {
    pthread_mutex_lock(&r->mu);
    models_slot *s = slot_named(r, name);
    if (!s) {
        pthread_mutex_unlock(&r->mu);
        return api_fail(e, 404, "invalid_request_error", "model", "model_not_found",
                        "The model '%.200s' does not exist; GET /v1/models lists the models this server has.", name);
    }
    for (;;) {
        if (r->stopped) {
            pthread_mutex_unlock(&r->mu);
            return api_fail(e, 503, "server_error", NULL, "busy", "The server is stopping.");
        }
        if (s->state == SLOT_LOADED) {
            s->users++;
            s->last_used = ++r->tick;
            pthread_mutex_unlock(&r->mu);
            *out = s;
            return 0;
        }
        models_slot *victim = NULL;
        if (s->state == SLOT_UNLOADED &&
            (resident(r) < r->p.max_loaded || (victim = eviction_victim(r)))) {
            /* Claimed before the lock is let go: a request for s that comes meanwhile waits for this load instead of
             * making room a second time. The victim is out of memory before s comes in. */
            s->state = SLOT_LOADING;
            if (victim) victim->state = SLOT_UNLOADING;
            pthread_mutex_unlock(&r->mu);
            if (victim) slot_unload(victim);
            fkv_error err = {0};
            const int failed = slot_load(r, s, NULL, &err);
            pthread_mutex_lock(&r->mu);
            if (victim) victim->state = SLOT_UNLOADED;
            s->state = failed ? SLOT_UNLOADED : SLOT_LOADED;
            if (!failed && r->stopped) sched_stop(s->sched); /* stopped while it loaded: it runs nothing */
            pthread_cond_broadcast(&r->cv);
            if (failed) {
                pthread_mutex_unlock(&r->mu);
                return api_fail(e, 500, "server_error", "model", "model_load_failed",
                                "The model '%s' failed to load: %s", s->entry->id, err.msg);
            }
        } else if (!wait_change(r, deadline_ms)) { /* loading, or no room until a request ends */
            pthread_mutex_unlock(&r->mu);
            return api_fail(e, 504, "server_error", "model", "timeout",
                            "The model '%s' was not ready within the request's deadline (--timeout): it was %s.",
                            s->entry->id, s->state == SLOT_UNLOADED ? "waiting for a loaded model to be free to unload"
                                                                    : state_names[s->state]);
        }
    }
}

void models_release(models *r, models_slot *s) {
    pthread_mutex_lock(&r->mu);
    s->users--;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

const char *models_id(const models_slot *s) { return s->entry->id; }
const api_context *models_context(const models_slot *s) { return &s->ctx; }
sched *models_sched(const models_slot *s) { return s->sched; }

/* The model object of s (r->mu held). */
static json_t *model_object(const models_slot *s) {
    struct stat st;
    const json_int_t created = stat(s->entry->path, &st) ? 0 : (json_int_t)st.st_mtime;
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", s->entry->id, "object", "model", "created", created,
                          "owned_by", "flatkv", "status", state_names[s->state]);
    if (o && s->state == SLOT_LOADED)
        json_object_set_new(o, "meta", json_pack("{s:i,s:i}", "n_ctx", (int)s->ctx.n_ctx, "n_vocab",
                                                 (int)fkv_model_get_info(s->model).n_vocab));
    return o;
}

json_t *models_list(models *r) {
    json_t *data = json_array();
    pthread_mutex_lock(&r->mu);
    for (uint32_t i = 0; i < r->p.n_entries; i++) json_array_append_new(data, model_object(&r->slots[i]));
    pthread_mutex_unlock(&r->mu);
    return json_pack("{s:s,s:o}", "object", "list", "data", data);
}

json_t *models_get(models *r, const char *id, api_error *e) {
    pthread_mutex_lock(&r->mu);
    json_t *o = NULL;
    for (uint32_t i = 0; i < r->p.n_entries && !o; i++)
        if (!strcmp(r->slots[i].entry->id, id)) o = model_object(&r->slots[i]);
    pthread_mutex_unlock(&r->mu);
    if (!o)
        api_fail(e, 404, "invalid_request_error", "model", "model_not_found", "The model '%.200s' does not exist.", id);
    return o;
}

bool models_stats(models *r, fkv_engine_stats *stats, uint32_t *queued, uint32_t *running) {
    bool any = false;
    *queued = *running = 0;
    pthread_mutex_lock(&r->mu); /* a LOADED slot stays loaded while the lock is held */
    for (uint32_t i = 0; i < r->p.n_entries; i++) {
        models_slot *s = &r->slots[i];
        if (s->state != SLOT_LOADED) continue;
        uint32_t q, n;
        sched_load(s->sched, &q, &n);
        *queued += q;
        *running += n;
        if (!any) *stats = sched_stats(s->sched);
        any = true;
    }
    pthread_mutex_unlock(&r->mu);
    return any;
}

json_t *models_stored_response(models *r, const char *id, const char *salt,
                               json_t *(*op)(struct resp_store *, const char *, const char *, api_error *),
                               api_error *e) {
    json_t *found = NULL;
    for (uint32_t i = 0; i < r->p.n_entries && !found; i++) found = op(r->slots[i].store, id, salt, e);
    return found; /* none: e is the last store's 404 */
}
