#include "scheduler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "utf8.h"

/* A running job, as the engine thread sees it. */
typedef struct sched_run {
    fkv_eseq *seq;
    fkv_sampler *sampler;
    fkv_gen *gen;
    int32_t *out;   /* generated ids */
    float *logits;  /* the row the next token is sampled from */
    bool prefilled; /* the prompt is computed; generating */
    bool admitted_once;
    int32_t next;   /* the token to feed in the next decode step */
    bool follower;  /* started from its leader's prompt: not counted against `parallel` */
    int32_t *resume; /* preempted: the ids it was fed and the one it was about to feed (n_resume), to start from
                      * when admitted again; NULL: the request's prompt */
    uint32_t n_resume;
    double t_start, t_prefilled;
} sched_run;

struct sched {
    const fkv_model *model;
    fkv_engine *engine;
    uint32_t parallel, n_vocab;
    uint32_t max_queue, n_queued; /* bound on the queue (0: none) and its length */
    double mean_job_ms;           /* a running mean of how long jobs took, for Retry-After */
    sched_job **running; /* [parallel] */
    uint32_t n_running;
    uint32_t prefill_turn; /* round robin over running prompts */
    uint32_t decode_turn;  /* round robin over generating jobs when more than max_batch are */
    uint32_t n_followers;  /* running jobs started from a leader's prompt (not counted against parallel) */
    uint32_t cap_running;
    fkv_eseq **batch;      /* [max_batch] scratch for a decode step */
    fkv_gen **batch_gens;
    int32_t *batch_ids;
    sched_job **batch_jobs;
    pthread_t thread;
    pthread_mutex_t mu; /* the queue, shutdown, refs, stats */
    pthread_cond_t cv;
    sched_job *head, *tail;
    fkv_engine_stats stats; /* after the last step */
    bool admission_held; /* a job was preempted: admit nothing until a running job ends */
    bool shutdown;
    bool stopped; /* the engine thread was joined */
};

double sched_now_ms(void) {
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

void sched_request_clear(sched_request *r) {
    free(r->ids);
    free(r->prediction);
    free(r->salt);
    for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    json_decref(r->tool_choice);
    json_decref(r->tools);
    json_decref(r->response_format);
    fkv_grammar_free(r->grammar);
    *r = (sched_request){0};
}

void sched_progress_clear(sched_progress *p) {
    holdback_free(&p->text);
    reply_free(&p->reply);
    free(p->lps);
    free(p->out);
    json_decref(p->tool_calls);
    *p = (sched_progress){0};
}

static void job_free(sched_job *j) {
    sched_request_clear(&j->req);
    sched_progress_clear(&j->prog);
    free(j->followers);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

sched_job *sched_job_follower(sched_job *j, uint64_t seed) {
    sched_job *f = sched_job_new(), **grown = realloc(j->followers, sizeof *grown * (j->n_followers + 1));
    if (grown) j->followers = grown;
    if (!f || !grown || !(f->req.ids = malloc(sizeof(int32_t) * j->req.n_ids)) ||
        (j->req.prediction && !(f->req.prediction = malloc(sizeof(int32_t) * j->req.n_prediction))) ||
        (j->req.salt && !(f->req.salt = strdup(j->req.salt))) ||
        (j->req.n_stop && !(f->req.stop = calloc(j->req.n_stop, sizeof *f->req.stop)))) {
        if (f) job_free(f);
        return NULL;
    }
    memcpy(f->req.ids, j->req.ids, sizeof(int32_t) * j->req.n_ids);
    f->req.n_ids = j->req.n_ids;
    if (j->req.prediction) memcpy(f->req.prediction, j->req.prediction, sizeof(int32_t) * j->req.n_prediction);
    f->req.n_prediction = j->req.n_prediction;
    f->req.max_tokens = j->req.max_tokens;
    f->req.sampling = j->req.sampling;
    f->req.sampling.seed = seed;
    f->req.spec = j->req.spec; /* guesses change no choice's answer, only its forwards */
    for (size_t i = 0; i < j->req.n_stop; i++, f->req.n_stop++)
        if (!(f->req.stop[i] = strdup(j->req.stop[i]))) {
            job_free(f);
            return NULL;
        }
    f->req.form = j->req.form;
    f->req.tools = json_incref(j->req.tools);
    f->req.tool_choice = j->req.tool_choice ? json_deep_copy(j->req.tool_choice) : NULL;
    f->req.response_format = j->req.response_format ? json_deep_copy(j->req.response_format) : NULL;
    f->req.single_tool_call = j->req.single_tool_call;
    if ((j->req.tool_choice && !f->req.tool_choice) || (j->req.response_format && !f->req.response_format)) {
        job_free(f);
        return NULL;
    }
    memcpy(f->req.id, j->req.id, sizeof f->req.id);
    f->req.memory_only = j->req.memory_only;
    f->req.deadline_ms = j->req.deadline_ms;
    f->req.logprobs = j->req.logprobs;
    f->req.grammar =
        fkv_grammar_share(j->req.grammar); /* a cancelled leader can be freed while its followers still run */
    f->req.top_logprobs = j->req.top_logprobs;
    f->refs = 2; /* the caller's, and the leader's (dropped when the leader is freed) */
    j->followers[j->n_followers++] = f;
    return f;
}

void sched_job_release(sched *s, sched_job *j) {
    pthread_mutex_lock(&s->mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (!last) return;
    for (uint32_t i = 0; i < j->n_followers; i++) sched_job_release(s, j->followers[i]);
    job_free(j);
}

sched_job *sched_job_choice(sched_job *job, uint32_t i) { return i ? job->followers[i - 1] : job; }

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
    while (!j->prog.done && j->prog.reply.read <= from)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
    return j->prog.done || j->prog.reply.read > from;
}

int sched_submit(sched *s, sched_job *j, uint32_t *retry_after_s, fkv_error *err) {
    pthread_mutex_lock(&s->mu);
    if (s->max_queue && s->n_queued >= s->max_queue) {
        /* The queue drains `parallel` jobs per mean job time: retry about when this one's turn would have come. */
        const double drain_s = (s->n_queued + 1.0) / s->parallel * s->mean_job_ms / 1e3;
        *retry_after_s = drain_s < 1 ? 1 : drain_s > 60 ? 60 : (uint32_t)(drain_s + 0.5);
        const uint32_t queued = s->n_queued;
        pthread_mutex_unlock(&s->mu);
        return err_set(err, FKV_E_BUSY, "the server is at capacity: %u requests are waiting (--max-queue); retry "
                                        "after %u s", queued, *retry_after_s);
    }
    s->n_queued++;
    j->refs++;
    j->next = NULL;
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static holdback_rules rules_of(const sched_job *j) { return (holdback_rules){j->req.stop, j->req.n_stop}; }

/* Mark done (job->mu held): all text becomes stable, valid UTF-8, and is split; calls it ends with become
 * tool_calls. */
static void finish_locked(sched_job *j, const char *reason) {
    holdback *h = &j->prog.text;
    const holdback_rules rules = rules_of(j);
    if (holdback_finish(h, &rules) == 1 && !j->prog.error.code) reason = "stop";
    if (j->prog.n_lps > h->n_tokens) j->prog.n_lps = h->n_tokens; /* the stop string's tokens, as in on_token */
    json_t *calls = NULL;
    if (reply_finish(&j->prog.reply, &j->req.form, h->text, h->len, j->req.id, j->req.tools, &calls) &&
        !j->prog.error.code) /* an answer without part of its text must not pass for the whole one */
        err_nomem(&j->prog.error, "out of memory splitting the generated text");
    if (calls && !j->prog.error.code) {
        j->prog.tool_calls = calls;
        reason = "tool_calls";
        while (j->req.single_tool_call && json_array_size(calls) > 1) json_array_remove(calls, json_array_size(calls) - 1);
    } else {
        json_decref(calls);
    }
    j->prog.finish_reason = reason;
    j->prog.done = true;
    pthread_cond_broadcast(&j->cv);
}

/* fkv_gen_params.on_logprobs: an entry for the token on_token is about to append (its end set there). */
static void on_logprobs(void *user, int32_t id, const fkv_logprobs *lp) {
    sched_job *j = user;
    pthread_mutex_lock(&j->mu);
    if (j->prog.n_lps == j->prog.cap_lps) {
        const size_t cap = j->prog.cap_lps * 2 + 16;
        sched_logprob *grown = realloc(j->prog.lps, sizeof *grown * cap);
        if (grown) j->prog.lps = grown, j->prog.cap_lps = cap;
    }
    if (j->prog.n_lps < j->prog.cap_lps)
        j->prog.lps[j->prog.n_lps++] = (sched_logprob){.id = id, .lp = *lp};
    else /* an answer without this entry would misalign the rest: fail it (on_token then stops) */
        err_nomem(&j->prog.error, "out of memory for a token's log-probabilities");
    pthread_mutex_unlock(&j->mu);
}

/* fkv_gen_params.on_token: append, cut at a stop string, publish what is final; false stops generation. */
static bool on_token(void *user, int32_t id, const char *piece, int piece_len) {
    (void)id;
    sched_job *j = user;
    pthread_mutex_lock(&j->mu);
    const size_t read = j->prog.reply.read;
    const holdback_rules rules = rules_of(j);
    int rc = j->cancelled || j->prog.error.code ? -1 : holdback_append(&j->prog.text, &rules, piece, (size_t)piece_len);
    if (rc >= 0 && reply_read(&j->prog.reply, &j->req.form, j->prog.text.text, j->prog.text.stable, false)) rc = -1;
    if (rc < 0 && !j->cancelled && !j->prog.error.code) /* a shorter answer must not pass for the whole one */
        err_nomem(&j->prog.error, "out of memory for the generated text");
    if (rc >= 0) j->prog.n_gen++;
    if (j->prog.n_lps > j->prog.text.n_tokens) j->prog.n_lps = j->prog.text.n_tokens; /* a stop string's, or none */
    if (rc == 1) j->prog.finish_reason = "stop";
    if (j->prog.reply.read > read) pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return rc == 0;
}

/* The job ends (engine thread): results published, the sequence released (its rows stay cached). */
static void end_job(sched *s, sched_job *j, const fkv_error *failure) {
    sched_run *r = j->run;
    double t = sched_now_ms();
    fkv_gen_result res = r && r->gen ? fkv_gen_result_get(r->gen) : (fkv_gen_result){0};
    pthread_mutex_lock(&j->mu);
    if (r) {
        j->prog.prefill_ms = (r->prefilled ? r->t_prefilled : t) - r->t_start;
        j->prog.decode_ms = r->prefilled ? t - r->t_prefilled : 0;
    }
    if (failure) j->prog.error = *failure;
    if (r) { /* the generated ids go to the job, which outlives the run */
        j->prog.out = r->out;
        j->prog.n_out = res.n_tokens;
        j->prog.drafted = res.drafted;
        j->prog.accepted = res.accepted;
        j->prog.predicted = res.predicted;
        j->prog.predicted_accepted = res.predicted_accepted;
        r->out = NULL;
    }
    finish_locked(j, j->prog.finish_reason ? j->prog.finish_reason : res.eog || res.cancelled ? "stop" : "length");
    pthread_mutex_unlock(&j->mu);
    if (r) {
        fkv_engine_finish(s->engine, r->seq);
        fkv_gen_free(r->gen);
        fkv_sampler_free(r->sampler);
        free(r->out);
        free(r->logits);
        free(r->resume);
        j->run = NULL;
    }
    for (uint32_t i = 0; i < s->n_running; i++)
        if (s->running[i] == j) {
            s->running[i] = s->running[--s->n_running];
            break;
        }
    if (r && r->follower) s->n_followers--;
    if (r) {
        pthread_mutex_lock(&s->mu);
        s->mean_job_ms = s->mean_job_ms ? 0.9 * s->mean_job_ms + 0.1 * (t - r->t_start) : t - r->t_start;
        pthread_mutex_unlock(&s->mu);
        s->admission_held = false; /* memory came free */
    }
    free(r);
    for (uint32_t i = 0; i < j->n_followers; i++) /* a prompt that failed fails its other choices too */
        if (!j->followers[i]->run) {
            sched_job *f = j->followers[i];
            pthread_mutex_lock(&s->mu);
            f->refs++;
            pthread_mutex_unlock(&s->mu);
            end_job(s, f, failure);
        }
    sched_job_release(s, j);
}

static bool memory_full(const fkv_error *err) { return err->code == FKV_E_KV_FULL; }

/* End j with a failure of this kind. */
static void fail_job(sched *s, sched_job *j, fkv_status code, const char *msg) {
    fkv_error e = {0};
    err_set(&e, code, "%s", msg);
    end_job(s, j, &e);
}

/* Out of KV memory while others run: give j's blocks back (its rows stay cached) and requeue it at the
 * front. When it runs again it recomputes — or reuses, if still cached — the ids it was fed, plus the
 * token it was about to feed, and goes on from there: the rows are the same bytes, so is the answer. */
static void preempt(sched *s, sched_job *j) {
    sched_run *r = j->run;
    if (r->prefilled) {
        uint32_t n_fed;
        const int32_t *fed = fkv_eseq_ids(r->seq, &n_fed);
        int32_t *ids = malloc(sizeof(int32_t) * (n_fed + 1));
        if (!ids) {
            fail_job(s, j, FKV_E_NOMEM, "out of memory");
            return;
        }
        memcpy(ids, fed, sizeof(int32_t) * n_fed);
        ids[n_fed] = r->next;
        free(r->resume);
        r->resume = ids;
        r->n_resume = n_fed + 1;
    }
    fkv_engine_finish(s->engine, r->seq);
    r->seq = NULL;
    r->prefilled = false;
    if (r->follower) s->n_followers--; /* from now on it is queued and admitted as any request */
    r->follower = false;
    for (uint32_t i = 0; i < s->n_running; i++)
        if (s->running[i] == j) {
            s->running[i] = s->running[--s->n_running];
            break;
        }
    pthread_mutex_lock(&s->mu);
    j->next = s->head;
    s->head = j;
    if (!s->tail) s->tail = j;
    s->n_queued++;
    s->admission_held = true;
    pthread_mutex_unlock(&s->mu);
}

static bool job_cancelled(sched_job *j) {
    pthread_mutex_lock(&j->mu);
    bool c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

/* The ids ids[0..n) as text into buf (cap bytes, NUL-terminated, cut at cap). */
static void ids_text(const fkv_model *m, int32_t prev, const int32_t *ids, uint32_t n, char *buf, size_t cap) {
    size_t len = 0;
    for (uint32_t i = 0; i < n && len + 1 < cap; i++) {
        char piece[64];
        int k = fkv_token_piece(m, i ? ids[i - 1] : prev, ids[i], piece, sizeof piece);
        if (k < 0) continue;
        if ((size_t)k > sizeof piece) k = (int)sizeof piece;
        if (len + (size_t)k + 1 > cap) k = (int)(cap - 1 - len);
        memcpy(buf + len, piece, (size_t)k);
        len += (size_t)k;
    }
    buf[len] = 0;
}

/* Why the cache missed, if it did (j->mu held): where the prompt parted from the cached sequence it agreed
 * with longest, and the next ids on each side, so a user can see what changed. */
static void note_divergence(sched *s, sched_job *j, const fkv_eseq *seq) {
    int32_t cached_ids[8];
    uint32_t at, n_cached;
    j->prog.diverged = fkv_eseq_divergence(seq, &at, cached_ids, &n_cached) && at < j->req.n_ids;
    if (!j->prog.diverged) return;
    j->prog.diverged_at = at;
    int32_t prev = at ? j->req.ids[at - 1] : -1;
    uint32_t n_prompt = j->req.n_ids - at < 8 ? j->req.n_ids - at : 8;
    ids_text(s->model, prev, cached_ids, n_cached, j->prog.cached_text, sizeof j->prog.cached_text);
    ids_text(s->model, prev, j->req.ids + at, n_prompt, j->prog.prompt_text, sizeof j->prog.prompt_text);
}

/* j's run state: its sampler and generation; NULL after ending j (out of memory). */
static sched_run *new_run(sched *s, sched_job *j) {
    sched_run *r = j->run = calloc(1, sizeof *r);
    fkv_gen_params gp = {.max_tokens = j->req.max_tokens, .on_token = on_token, .user = j,
                         .on_logprobs = j->req.logprobs ? on_logprobs : NULL, .top_logprobs = j->req.top_logprobs,
                         .grammar = j->req.grammar, .spec = j->req.spec};
    gp.spec.prediction = j->req.prediction;
    gp.spec.n_prediction = j->req.n_prediction;
    if (!r || !(r->logits = malloc(sizeof(float) * s->n_vocab)) ||
        !(r->out = malloc(sizeof(int32_t) * (j->req.max_tokens ? j->req.max_tokens : 1))) ||
        !(gp.sampler = r->sampler = fkv_sampler_new(&j->req.sampling, (int32_t)s->n_vocab)) ||
        !(r->gen = fkv_gen_new(s->model, &gp, r->out))) {
        fail_job(s, j, FKV_E_NOMEM, "out of memory");
        return NULL;
    }
    r->t_start = sched_now_ms();
    return r;
}

/* Start a queued job on the engine: 0, or -1 when the KV memory cannot take it now (it stays queued). */
static int admit(sched *s, sched_job *j) {
    fkv_error err = {0};
    s->running[s->n_running++] = j;
    if (job_cancelled(j)) {
        end_job(s, j, NULL);
        return 0;
    }
    sched_run *r = j->run ? j->run : new_run(s, j);
    if (!r) return 0;
    uint32_t cached = 0;
    r->seq = r->resume ? fkv_engine_start(s->engine, j->req.salt, r->resume, r->n_resume, &cached, &err)
                       : fkv_engine_start(s->engine, j->req.salt, j->req.ids, j->req.n_ids, &cached, &err);
    if (!r->seq) {
        if (s->n_running > 1 && memory_full(&err)) {
            s->n_running--; /* others hold the memory: wait for them */
            return -1;
        }
        end_job(s, j, &err);
        return 0;
    }
    if (j->req.memory_only) fkv_eseq_memory_only(r->seq);
    if (!r->admitted_once) {
        r->admitted_once = true;
        pthread_mutex_lock(&j->mu);
        j->prog.cached = cached;
        j->prog.reuse = fkv_eseq_reuse(r->seq);
        note_divergence(s, j, r->seq);
        pthread_mutex_unlock(&j->mu);
    }
    return 0;
}

/* After a row of logits: sample; the job goes on with r->next, or ends. */
static void after_logits(sched *s, sched_job *j) {
    sched_run *r = j->run;
    uint32_t n_hist;
    const int32_t *hist = fkv_eseq_ids(r->seq, &n_hist);
    r->next = fkv_gen_next(r->gen, r->logits, hist, (int)n_hist, n_hist, fkv_engine_n_ctx(s->engine));
    if (r->next < 0) end_job(s, j, NULL);
}

/* j's prompt is computed: each of its followers starts from j's rows and last row's logits, and samples its first
 * token from them (once only: a preempted leader that runs again has no followers left to start). */
static void start_followers(sched *s, sched_job *j) {
    for (uint32_t i = 0; i < j->n_followers; i++) {
        sched_job *f = j->followers[i];
        if (f->run) continue;
        pthread_mutex_lock(&s->mu);
        f->refs++; /* the scheduler's, as sched_submit takes */
        pthread_mutex_unlock(&s->mu);
        if (s->n_running == s->cap_running) {
            fail_job(s, f, FKV_E_BUSY, "too many choices running at once");
            continue;
        }
        s->running[s->n_running++] = f;
        sched_run *r = new_run(s, f);
        if (!r) continue;
        r->follower = r->admitted_once = true;
        s->n_followers++;
        fkv_error err = {0};
        if (job_cancelled(f) || !(r->seq = fkv_engine_fork(s->engine, j->run->seq, &err))) {
            end_job(s, f, job_cancelled(f) ? NULL : &err);
            continue;
        }
        memcpy(r->logits, j->run->logits, sizeof(float) * s->n_vocab);
        r->prefilled = true;
        r->t_prefilled = r->t_start;
        pthread_mutex_lock(&f->mu);
        f->prog.cached = j->req.n_ids; /* every prompt row came from the leader */
        f->prog.reuse = fkv_eseq_reuse(r->seq);
        pthread_mutex_unlock(&f->mu);
        if (f->req.max_tokens == 0)
            end_job(s, f, NULL);
        else
            after_logits(s, f);
    }
}

/* One prompt chunk for the running job whose turn it is. */
static void prefill_step(sched *s) {
    for (uint32_t k = 0; k < s->n_running; k++) {
        sched_job *j = s->running[(s->prefill_turn + k) % s->n_running];
        sched_run *r = j->run;
        if (r->prefilled) continue;
        s->prefill_turn = (s->prefill_turn + k + 1) % (s->n_running ? s->n_running : 1);
        if (job_cancelled(j)) {
            end_job(s, j, NULL);
            return;
        }
        fkv_error err = {0};
        int rc = fkv_engine_prefill(s->engine, r->seq, r->logits, &err);
        if (rc < 0 && memory_full(&err) && s->n_running > 1) {
            preempt(s, j);
        } else if (rc < 0) {
            end_job(s, j, &err);
        } else if (rc == 1) {
            r->prefilled = true;
            r->t_prefilled = sched_now_ms();
            start_followers(s, j);
            if (j->req.max_tokens == 0)
                end_job(s, j, NULL);
            else
                after_logits(s, j);
        }
        return;
    }
}

/* One decode step for every generating job, as one forward (at most max_batch of them), with the guesses of each
 * job's speculative decoding verified in the same forward (fkv_engine_step). */
static void decode_step(sched *s) {
    uint32_t n = 0, max_batch = fkv_engine_max_batch(s->engine);
    const uint32_t first = s->n_running ? s->decode_turn++ % s->n_running : 0;
    for (uint32_t k = 0; k < s->n_running && n < max_batch; k++) {
        sched_job *j = s->running[(first + k) % s->n_running];
        if (!j->run->prefilled) continue;
        s->batch[n] = j->run->seq;
        s->batch_gens[n] = j->run->gen;
        s->batch_ids[n] = j->run->next;
        s->batch_jobs[n++] = j;
    }
    if (!n) return;
    fkv_error err = {0};
    uint32_t failed = 0;
    if (fkv_engine_step(s->engine, s->batch, s->batch_gens, s->batch_ids, n, NULL, &failed, &err)) {
        if (memory_full(&err) && s->n_running > 1)
            preempt(s, s->batch_jobs[failed]);
        else
            end_job(s, s->batch_jobs[failed], &err);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        sched_job *j = s->batch_jobs[i];
        j->run->next = s->batch_ids[i];
        if (j->run->next < 0) end_job(s, j, NULL);
    }
}

/* Jobs whose deadline passed end now with FKV_E_TIMEOUT, waiting or running (a running one's rows stay cached, as
 * any ended job's do). */
static void end_expired(sched *s) {
    const double now = sched_now_ms();
    sched_job *expired = NULL;
    pthread_mutex_lock(&s->mu);
    for (sched_job **at = &s->head, *prev = NULL; *at;) {
        sched_job *j = *at;
        if (j->req.deadline_ms && now > j->req.deadline_ms) {
            *at = j->next;
            if (s->tail == j) s->tail = prev;
            s->n_queued--;
            j->next = expired;
            expired = j;
        } else {
            prev = j;
            at = &j->next;
        }
    }
    pthread_mutex_unlock(&s->mu);
    fkv_error waited = {0}, ran = {0};
    err_set(&waited, FKV_E_TIMEOUT, "the request waited past its deadline (--timeout); the server is busy");
    err_set(&ran, FKV_E_TIMEOUT, "the request ran past its deadline (--timeout)");
    while (expired) {
        sched_job *j = expired;
        expired = j->next;
        end_job(s, j, &waited);
    }
    /* end_job moves the last running job into the slot it frees: going down, each job is looked at once. */
    for (uint32_t i = s->n_running; i-- > 0;)
        if (s->running[i]->req.deadline_ms && now > s->running[i]->req.deadline_ms) end_job(s, s->running[i], &ran);
}

static void *engine_thread(void *arg) {
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->n_running && !s->shutdown) pthread_cond_wait(&s->cv, &s->mu);
        if (s->shutdown) {
            for (sched_job *j = s->head; j; j = j->next) sched_job_cancel(j);
            for (uint32_t i = 0; i < s->n_running; i++) sched_job_cancel(s->running[i]);
        }
        bool idle = !s->head && !s->n_running;
        /* Admit in arrival order while there is room. */
        while (s->head && s->n_running - s->n_followers < s->parallel && s->n_running < s->cap_running &&
               !(s->admission_held && s->n_running)) {
            sched_job *j = s->head;
            s->head = j->next;
            if (!s->head) s->tail = NULL;
            s->n_queued--;
            pthread_mutex_unlock(&s->mu);
            int rc = admit(s, j);
            pthread_mutex_lock(&s->mu);
            if (rc < 0) {
                j->next = s->head;
                s->head = j;
                if (!s->tail) s->tail = j;
                s->n_queued++;
                break;
            }
        }
        pthread_mutex_unlock(&s->mu);
        end_expired(s);
        if (idle && s->shutdown) break;
        prefill_step(s);
        decode_step(s);
        fkv_engine_stats st = fkv_engine_get_stats(s->engine);
        pthread_mutex_lock(&s->mu);
        s->stats = st;
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

sched *sched_new(const fkv_model *m, const fkv_engine_params *p, uint32_t parallel, uint32_t max_queue,
                 fkv_spec_params *spec, fkv_error *err) {
    sched *s = calloc(1, sizeof *s);
    if (!s) {
        err_nomem(err, "out of memory for the scheduler");
        return NULL;
    }
    s->model = m;
    s->parallel = parallel ? parallel : 1;
    s->max_queue = max_queue;
    s->n_vocab = fkv_model_get_info(m).n_vocab;
    fkv_engine_params ep = *p;
    if (ep.max_batch < s->parallel) ep.max_batch = s->parallel;
    if (!(s->engine = fkv_engine_new(m, &ep, err))) {
        free(s);
        return NULL;
    }
    double cost = 0;
    fkv_error why = {0};
    if (spec && spec->mode == FKV_SPEC_AUTO) {
        if (fkv_spec_auto(spec, s->engine, &cost, &why))
            fprintf(stderr, "flatkv serve: --spec auto: %s; %s without measuring\n", why.msg,
                    fkv_spec_mode_name(spec->mode));
        else
            fprintf(stderr, "flatkv serve: --spec auto: %s (a step with guesses costs %.2f plain steps here)\n",
                    fkv_spec_mode_name(spec->mode), cost);
    }
    uint32_t mb = fkv_engine_max_batch(s->engine);
    s->cap_running = s->parallel * SCHED_MAX_CHOICES;
    s->running = calloc(s->cap_running, sizeof *s->running);
    s->batch = calloc(mb, sizeof *s->batch);
    s->batch_gens = calloc(mb, sizeof *s->batch_gens);
    s->batch_ids = calloc(mb, sizeof *s->batch_ids);
    s->batch_jobs = calloc(mb, sizeof *s->batch_jobs);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->stats = fkv_engine_get_stats(s->engine);
    if (!s->running || !s->batch || !s->batch_gens || !s->batch_ids || !s->batch_jobs ||
        pthread_create(&s->thread, NULL, engine_thread, s)) {
        err_nomem(err, "cannot start the engine thread");
        s->stopped = true;
        sched_free(s);
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
    free(s->running);
    free(s->batch);
    free(s->batch_ids);
    free(s->batch_jobs);
    free(s->batch_gens);
    fkv_engine_free(s->engine);
    free(s);
}

uint32_t sched_n_ctx(const sched *s) { return fkv_engine_n_ctx(s->engine); }

void sched_load(sched *s, uint32_t *queued, uint32_t *running) {
    pthread_mutex_lock(&s->mu);
    *queued = s->n_queued;
    *running = s->n_running - s->n_followers; /* read racily by the engine thread's own writes: a gauge */
    pthread_mutex_unlock(&s->mu);
}

const char *sched_note(const sched *s) { return fkv_engine_note(s->engine); }


fkv_engine_stats sched_stats(sched *s) {
    pthread_mutex_lock(&s->mu);
    fkv_engine_stats st = s->stats;
    pthread_mutex_unlock(&s->mu);
    fkv_engine_disk_stats_now(s->engine, &st); /* the writer thread moves on while the engine idles */
    return st;
}
