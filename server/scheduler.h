/* scheduler.h — the server's engine side: requests wait in one fair queue; one engine thread runs up to
 * `parallel` of them at once on a multi-sequence engine (fkv_engine).
 *
 * WHY one engine thread batching every request: each step computes one prompt chunk (of the running request that
 * waited longest for one) and then one decode step for every running request that is generating, as a single
 * batched forward — so a long prompt never stalls the others for more than a chunk, and rows are invariant, so
 * batching never changes an answer. Reuse is decided by the engine's prefix tree with the record's rules.
 *
 * INVARIANT: a request is answered from cached rows only as far as its own token ids (and cache salt) agree with the
 * ids that built them, so one client is never answered from another conversation's rows; and a cancelled or
 * preempted sequence's record describes exactly what its KV holds, because ids are recorded only when fed.
 *
 * Memory: when the KV pool is full of running requests' blocks, the request that needs one more is
 * preempted — its blocks released (still cached), requeued at the front, and resumed later by recomputing
 * (or reusing) exactly the ids it was fed plus the token it was about to feed. Nothing new is admitted until
 * a running request ends. Alone and still too big, a request fails with 503.
 *
 * A job is shared by the connection that submitted it and the engine thread: reference-counted, its
 * progress guarded by its mutex. The engine appends generated text; the connection reads the part that
 * can no longer change (`stable`: complete UTF-8, and no stop string can still begin in it) and may cancel
 * at any time (a client that went away). A cancelled generation stops at the next token.
 *
 * Limits: at most `max_queue` requests wait (sched_submit refuses the next with FKV_E_BUSY, and says when to retry);
 * a request with a deadline that passes — waiting or running — ends with FKV_E_TIMEOUT at the next step.
 *
 * Thread-safety: sched_submit/sched_cancel/sched_job_* from any thread.
 */
#ifndef FKV_SCHEDULER_H
#define FKV_SCHEDULER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "flatkv.h"
#include "holdback.h"
#include "reply.h"

/* A generated token's log-probabilities (its text's end: the job's text.ends at its index). The id before it (for
 * its piece) is the previous entry's, or the prompt's last. */
typedef struct sched_logprob {
    int32_t id;
    fkv_logprobs lp;
} sched_logprob;

/* A request as its parser made it: set before sched_submit, read-only after, by every thread. */
typedef struct sched_request {
    int32_t *ids;
    uint32_t n_ids;
    uint32_t max_tokens;
    fkv_sampler_params sampling;
    char **stop; /* stop strings (not in the output) */
    size_t n_stop;
    char *salt;  /* cache_salt: requests under different salts never share rows; NULL: the default */
    bool memory_only; /* prompt_cache_retention "in_memory": its blocks are never written to the disk tier */
    fkv_grammar *grammar;  /* the output follows it (response_format, grammar, an enforced tool_choice); NULL: free.
                            * One owner each: a leader's is shared (fkv_grammar_share) with its followers */
    bool logprobs;         /* record each content token's log-probabilities (sched_logprob) */
    uint32_t top_logprobs; /* and this many most likely ids at its step */
    reply_form form;  /* how the reply is written: its reasoning's markers, and its calls' syntax when tools were
                       * offered */
    json_t *tools;    /* the tools offered (chat's shape; one reference), for the calls' argument types; or NULL */
    char id[48];      /* the request's id, for tool call ids */
    /* What the output is asked to be, in chat's shapes whatever API asked (the Messages API's tool_choice and the
     * Responses API's text.format are translated); NULL: nothing asked. oai_constrain turns them into `grammar`. Owned
     * (one reference each). */
    json_t *tool_choice;      /* "none", "auto", "required" or {"type": "function", "function": {"name": ...}} */
    json_t *response_format;  /* {"type": "json_object"} or {"type": "json_schema", "json_schema": {name, schema, ...}} */
    bool single_tool_call;    /* parallel_tool_calls false (the Messages API's disable_parallel_tool_use) */
    double deadline_ms;       /* CLOCK_MONOTONIC milliseconds past which it fails with FKV_E_TIMEOUT; 0: none */
    fkv_spec_params spec;     /* speculative decoding: the server's, or what the request asked (same answer) */
    int32_t *prediction;      /* OpenAI's Predicted Outputs: the predicted content's ids, guessed wherever the output
                               * matches them (fkv_spec_params.prediction; same answer); NULL: none */
    uint32_t n_prediction;
} sched_request;

/* A request's progress: written by the scheduler alone (its engine thread), under the job's mu; read by the
 * connection under the same lock. */
typedef struct sched_progress {
    holdback text;    /* the generated text, stop string removed, and how much of it is final (text.stable) */
    reply reply;      /* the stable text split into reasoning, content and calls (read as stable grows) */
    uint32_t n_gen;
    bool done;
    const char *finish_reason; /* "stop", "length" or "tool_calls" once done */
    json_t *tool_calls;        /* the calls the output made (OpenAI tool_calls), or NULL */
    int32_t *out;              /* once done: the ids generated, as sampled (n_out of them); the last one — an
                                * end-of-generation token, the max_tokens-th, the one completing a stop string —
                                * was never fed */
    uint32_t n_out;
    struct sched_logprob *lps; /* with logprobs: one per token appended, in order (n_lps of them); entry i's text
                                * ends at text.ends[i] */
    size_t n_lps, cap_lps;
    fkv_error error;           /* code FKV_OK, or why the job failed */
    uint32_t cached;
    fkv_reuse reuse; /* how the reuse came to be (held < capped: the window layers' rows there were given back) */
    double prefill_ms, decode_ms;
    uint32_t drafted, accepted; /* once done: tokens speculative decoding guessed, and kept */
    uint32_t predicted, predicted_accepted; /* of them, the prediction's */
    /* where the prompt parted from the cached sequence it agreed with longest (OpenAI's timings: "divergence") */
    bool diverged;
    uint32_t diverged_at;
    char cached_text[96], prompt_text[96]; /* the next ids on each side, as text */
} sched_progress;

typedef struct sched_job {
    sched_request req;
    pthread_mutex_t mu; /* guards prog and cancelled; cv is signalled on every change */
    pthread_cond_t cv;
    sched_progress prog;
    bool cancelled; /* asked to stop by the connection */

    /* n > 1: the other choices of this prompt (set before sched_submit; never queued themselves). When this job's
     * prompt is computed, each starts from its rows and its last row's logits (fkv_engine_fork): the prompt is
     * computed once. */
    struct sched_job **followers;
    uint32_t n_followers;

    int refs; /* guarded by the scheduler's lock */
    struct sched_job *next;
    struct sched_run *run; /* the engine thread's state while the job runs */
} sched_job;

#define SCHED_MAX_CHOICES 16 /* n of a request: one leader and at most 15 followers */

typedef struct sched sched;

/* Start the engine thread on a new engine for model m, running up to `parallel` requests at once while at most
 * `max_queue` wait (0: no bound). spec (NULL: none): the requests' default speculation, its FKV_SPEC_AUTO chosen for
 * the engine (fkv_spec_auto) before the thread starts, said on stderr. */
sched *sched_new(const fkv_model *m, const fkv_engine_params *p, uint32_t parallel, uint32_t max_queue,
                 fkv_spec_params *spec, fkv_error *err);
/* Cancel what runs and what waits and stop the engine thread; jobs still referenced stay valid. */
void sched_stop(sched *s);
/* sched_stop if needed, then free (no job may still be referenced). */
void sched_free(sched *s);

uint32_t sched_n_ctx(const sched *s);
/* Requests waiting and running now (followers not counted), for metrics. */
void sched_load(sched *s, uint32_t *queued, uint32_t *running);
/* CLOCK_MONOTONIC now, in milliseconds (the clock deadline_ms is on). */
double sched_now_ms(void);
/* fkv_engine_note of the engine: a default it changed (the context capped to the KV memory), or NULL. */
const char *sched_note(const sched *s);
/* The engine's block and cache counters after the last step, the disk tier's as they are now (for metrics). */
fkv_engine_stats sched_stats(sched *s);

/* Free what a request or a progress record holds, and zero it (job_free's parts; tests parse into jobs of their own).
 */
void sched_request_clear(sched_request *r);
void sched_progress_clear(sched_progress *p);

/* A new job with one reference (the caller's); fill the request fields, then sched_submit. */
sched_job *sched_job_new(void);
/* Another choice of job's request (its fields copied; the sampler's seed `seed`), a follower of it: call before
 * sched_submit(job). NULL when out of memory. The caller owns one reference, as for sched_job_new. */
sched_job *sched_job_follower(sched_job *job, uint64_t seed);
/* Queue the job (the scheduler takes its own reference): 0; or -1 with FKV_E_BUSY in err when max_queue requests
 * already wait, *retry_after_s then saying when a retry is likely to be taken (the queue's expected drain, 1..60). */
int sched_submit(sched *s, sched_job *job, uint32_t *retry_after_s, fkv_error *err);
/* Choice i of a request: the job itself (0), then its followers. */
sched_job *sched_job_choice(sched_job *job, uint32_t i);
/* Drop a reference; the last one frees the job. */
void sched_job_release(sched *s, sched_job *job);
/* Ask the job to stop (waiting: it will not run; running: at the next token). */
void sched_job_cancel(sched_job *job);
/* Wait (job->mu held by the caller) until the reply has read past `from` (prog.reply.read) or the job is done, at most
 * timeout_ms; true if so. */
bool sched_job_wait_locked(sched_job *job, size_t from, int timeout_ms);

#endif
