#include "scheduler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "utf8.h"

struct sched {
    const fkv_model *model;
    fkv_seq *seq;
    float *logits;
    int32_t *out;
    pthread_t thread;
    pthread_mutex_t mu; /* the queue, shutdown, refs, and seq for sched_kv_bytes */
    pthread_cond_t cv;
    sched_job *head, *tail;
    sched_job *running;
    size_t kv_bytes; /* after the last job */
    bool shutdown;
    bool stopped; /* the engine thread was joined */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

sched_job *sched_job_new(void) {
    sched_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    return j;
}

static void job_free(sched_job *j) {
    free(j->ids);
    for (size_t i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void sched_job_release(sched *s, sched_job *j) {
    pthread_mutex_lock(&s->mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last) job_free(j);
}

void sched_job_cancel(sched_job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

bool sched_job_wait_locked(sched_job *j, size_t from, int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    until.tv_sec += timeout_ms / 1000 + until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    while (!j->done && j->stable <= from)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
    return j->done || j->stable > from;
}

void sched_submit(sched *s, sched_job *j) {
    pthread_mutex_lock(&s->mu);
    j->refs++;
    j->next = NULL;
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Mark done (job->mu held): all text becomes stable, valid UTF-8. */
static void finish_locked(sched_job *j, const char *reason) {
    size_t clean_len;
    char *clean = utf8_sanitize(j->text ? j->text : "", j->len, &clean_len);
    if (clean) {
        free(j->text);
        j->text = clean;
        j->len = j->cap = clean_len;
    }
    j->stable = j->len;
    j->finish_reason = reason;
    j->done = true;
    pthread_cond_broadcast(&j->cv);
}

static size_t longest_stop(const sched_job *j) {
    size_t m = 0;
    for (size_t i = 0; i < j->n_stop; i++)
        if (strlen(j->stop[i]) > m) m = strlen(j->stop[i]);
    return m;
}

/* fkv_gen_params.on_token: append, cut at a stop string, publish what is final; false stops generation. */
static bool on_token(void *user, int32_t id, const char *piece, int piece_len) {
    (void)id;
    sched_job *j = user;
    pthread_mutex_lock(&j->mu);
    bool go_on = !j->cancelled;
    if (j->len + (size_t)piece_len + 1 > j->cap) {
        size_t cap = 2 * j->cap + (size_t)piece_len + 64;
        char *grown = realloc(j->text, cap);
        if (!grown) go_on = false;
        else j->text = grown, j->cap = cap;
    }
    if (go_on) {
        size_t before = j->len, hold = longest_stop(j);
        memcpy(j->text + j->len, piece, (size_t)piece_len);
        j->len += (size_t)piece_len;
        j->text[j->len] = 0;
        j->n_gen++;
        /* A stop string may straddle the last piece: search from where it could have begun. */
        size_t from = before >= hold ? before - hold : 0;
        for (size_t i = 0; i < j->n_stop; i++) {
            char *hit = strstr(j->text + from, j->stop[i]);
            if (hit && (size_t)(hit - j->text) < j->len) {
                j->len = (size_t)(hit - j->text);
                j->text[j->len] = 0;
                j->finish_reason = "stop";
                go_on = false;
            }
        }
        if (go_on) {
            size_t safe = j->len > (hold ? hold - 1 : 0) ? j->len - (hold ? hold - 1 : 0) : 0;
            safe = utf8_complete_prefix(j->text, safe);
            if (safe > j->stable) {
                j->stable = safe;
                pthread_cond_broadcast(&j->cv);
            }
        }
    }
    pthread_mutex_unlock(&j->mu);
    return go_on;
}

static void run_job(sched *s, sched_job *j) {
    fkv_error err = {{0}};
    pthread_mutex_lock(&j->mu);
    bool cancelled = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    if (cancelled) {
        pthread_mutex_lock(&j->mu);
        finish_locked(j, "stop");
        pthread_mutex_unlock(&j->mu);
        return;
    }
    uint32_t n_vocab = fkv_model_get_info(s->model).n_vocab;
    fkv_sampler *smp = fkv_sampler_new(&j->sampling, (int32_t)n_vocab);
    double t0 = now_ms();
    uint32_t cached = 0;
    int rc = smp ? fkv_seq_prefill(s->seq, j->ids, j->n_ids, s->logits, &cached, &err) : -1;
    double t1 = now_ms();
    fkv_gen_result res = {0};
    if (!rc && j->max_tokens) {
        fkv_gen_params gp = {.max_tokens = j->max_tokens, .sampler = smp, .on_token = on_token, .user = j};
        rc = fkv_seq_generate(s->seq, s->logits, &gp, s->out, &res, &err);
    }
    double t2 = now_ms();
    fkv_sampler_free(smp);
    pthread_mutex_lock(&j->mu);
    j->cached = cached;
    j->prefill_ms = t1 - t0;
    j->decode_ms = t2 - t1;
    if (rc) {
        j->error_status = 500;
        snprintf(j->error, sizeof j->error, "%s", smp ? err.msg : "out of memory");
    }
    finish_locked(j, j->finish_reason ? j->finish_reason : res.eog ? "stop" : "length");
    pthread_mutex_unlock(&j->mu);
}

static void *engine_thread(void *arg) {
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->shutdown) pthread_cond_wait(&s->cv, &s->mu);
        sched_job *j = s->head;
        if (j) {
            s->head = j->next;
            if (!s->head) s->tail = NULL;
        }
        bool stop = s->shutdown;
        s->running = j;
        pthread_mutex_unlock(&s->mu);
        if (!j) break;
        if (stop) sched_job_cancel(j);
        run_job(s, j);
        pthread_mutex_lock(&s->mu);
        s->running = NULL;
        s->kv_bytes = fkv_seq_kv_bytes(s->seq);
        pthread_mutex_unlock(&s->mu);
        sched_job_release(s, j);
    }
    return NULL;
}

sched *sched_new(const fkv_model *m, const fkv_seq_params *p, fkv_error *err) {
    sched *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->model = m;
    if (!(s->seq = fkv_seq_new(m, p, err))) {
        free(s);
        return NULL;
    }
    s->logits = malloc(sizeof(float) * fkv_model_get_info(m).n_vocab);
    s->out = malloc(sizeof(int32_t) * fkv_seq_n_ctx(s->seq));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (!s->logits || !s->out || pthread_create(&s->thread, NULL, engine_thread, s)) {
        snprintf(err->msg, sizeof err->msg, "cannot start the engine thread");
        free(s->logits);
        free(s->out);
        fkv_seq_free(s->seq);
        free(s);
        return NULL;
    }
    return s;
}

void sched_stop(sched *s) {
    pthread_mutex_lock(&s->mu);
    if (s->stopped) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->shutdown = true;
    for (sched_job *j = s->head; j; j = j->next) sched_job_cancel(j);
    if (s->running) sched_job_cancel(s->running);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->stopped = true;
}

void sched_free(sched *s) {
    if (!s) return;
    sched_stop(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->logits);
    free(s->out);
    fkv_seq_free(s->seq);
    free(s);
}

uint32_t sched_n_ctx(const sched *s) { return fkv_seq_n_ctx(s->seq); }

size_t sched_kv_bytes(sched *s) {
    pthread_mutex_lock(&s->mu);
    size_t bytes = s->kv_bytes;
    pthread_mutex_unlock(&s->mu);
    return bytes;
}
