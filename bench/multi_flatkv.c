/* multi_flatkv.c — K conversations at once on one flatkv engine (include/flatkv.h), timed (bench/multi).
 *
 * usage: multi_flatkv MODEL IDS THREADS K TURNS
 *
 * Round t submits every conversation's turn t together, each as a new request (fkv_engine_start with the whole
 * prompt: the engine finds what it already holds), and runs them the way flatkv's server scheduler does
 * (server/scheduler.c): each tick computes one grid chunk of one prompt, round robin, then one decode step of
 * every generating conversation as one forward (max_batch = K). Greedy sampling through fkv_gen, so stopping
 * follows flatkv's own rule. Before round 0 the system prompt is computed once on its own sequence (timed in
 * round 0), as a server that already served it would hold it; every conversation then shares its blocks.
 * The conversations and the JSON line are harness.h's (HARNESS_MULTI).
 */
#define HARNESS_MULTI
#include "flatkv.h"
#include "harness.h"

#define MAX_K 64 /* multi_parse's bound on K */

typedef struct {
    fkv_model *m;
    fkv_engine *e;
    fkv_sampler *sampler;
    uint32_t n_vocab;
    float *logits;         /* [K][n_vocab]: the row each conversation samples from next */
    float *batch_logits;   /* [K][n_vocab]: a decode step's output */
    long prompt_tokens;    /* computed, not reused */
    fkv_engine_stats peak; /* blocks in use and shared, at the end of a round (every conversation active) */
} bench;

/* One round's conversations. */
typedef struct {
    fkv_eseq *seq[MAX_K];
    fkv_gen *gen[MAX_K];
    int32_t next[MAX_K]; /* the id to feed */
    bool prefilled[MAX_K], live[MAX_K];
    int n_live;
    double t0;
} round_state;

/* Compute ids[0..n) as a request of its own and release it: its rows stay cached. */
static int prime(bench *b, const int32_t *ids, uint32_t n, fkv_error *err) {
    uint32_t cached = 0;
    fkv_eseq *s = fkv_engine_start(b->e, NULL, ids, n, &cached, err);
    if (!s) return -1;
    int rc;
    while ((rc = fkv_engine_prefill(b->e, s, b->logits, err)) == 0) {}
    fkv_engine_finish(b->e, s);
    b->prompt_tokens += (long)(n - cached);
    return rc < 0 ? -1 : 0;
}

/* After conversation c's row of logits: the next id, or the end of its turn (its last id needs no forward). */
static void after_logits(bench *b, multi_run *r, round_state *st, int t, int c, const float *row) {
    uint32_t n_hist;
    const int32_t *hist = fkv_eseq_ids(st->seq[c], &n_hist);
    st->next[c] = fkv_gen_next(st->gen[c], row, hist, (int)n_hist, n_hist, fkv_engine_n_ctx(b->e));
    if (st->next[c] >= 0) return;
    st->live[c] = false;
    st->n_live--;
    r->latency_ms[t * r->a->k + c] = 1e3 * (harness_now() - st->t0);
}

/* One tick of flatkv's scheduler: a prompt chunk of the next conversation still prefilling, then one decode
 * step of every generating conversation. */
static int tick(bench *b, multi_run *r, round_state *st, int t, int *prefill_turn, fkv_error *err) {
    const int k = r->a->k;
    for (int j = 0; j < k; j++) {
        int c = (*prefill_turn + j) % k;
        if (!st->live[c] || st->prefilled[c]) continue;
        *prefill_turn = (c + 1) % k;
        float *row = b->logits + (size_t)c * b->n_vocab;
        int done = fkv_engine_prefill(b->e, st->seq[c], row, err);
        if (done < 0) return -1;
        if (done == 1) {
            st->prefilled[c] = true;
            after_logits(b, r, st, t, c, row);
        }
        break;
    }
    fkv_eseq *batch[MAX_K];
    int32_t ids[MAX_K];
    int who[MAX_K], n = 0;
    for (int c = 0; c < k; c++)
        if (st->live[c] && st->prefilled[c]) batch[n] = st->seq[c], ids[n] = st->next[c], who[n++] = c;
    if (n == 0) return 0;
    uint32_t failed;
    if (fkv_engine_decode(b->e, batch, ids, (uint32_t)n, b->batch_logits, &failed, err)) return -1;
    for (int j = 0; j < n; j++) after_logits(b, r, st, t, who[j], b->batch_logits + (size_t)j * b->n_vocab);
    return 0;
}

/* Round t: every conversation's turn t, from its request to its last generated id. */
static int round_run(bench *b, multi_run *r, int t, fkv_error *err) {
    const int k = r->a->k;
    round_state st = {.t0 = harness_now()};
    fkv_gen_params gp = {.max_tokens = MULTI_GEN, .sampler = b->sampler};
    int rc = t == 0 ? prime(b, r->ids, MULTI_SYSTEM, err) : 0;
    for (int c = 0; !rc && c < k; c++) {
        multi_next_prompt(r, t, c);
        uint32_t cached = 0;
        if (!(st.seq[c] = fkv_engine_start(b->e, NULL, r->convo[c], (uint32_t)r->len[c], &cached, err))) {
            rc = -1;
        } else if (!(st.gen[c] = fkv_gen_new(b->m, &gp, r->gen[c]))) {
            rc = -1;
            snprintf(err->msg, sizeof err->msg, "out of memory for conversation %d's generation", c);
        } else {
            r->cached[t * k + c] = (int)cached;
            b->prompt_tokens += (long)((uint32_t)r->len[c] - cached);
            st.live[c] = true;
            st.n_live++;
        }
    }
    int prefill_turn = 0;
    while (!rc && st.n_live > 0) rc = tick(b, r, &st, t, &prefill_turn, err);
    r->round_s[t] = harness_now() - st.t0;

    fkv_engine_stats s = fkv_engine_get_stats(b->e);
    if (s.blocks_in_use > b->peak.blocks_in_use) b->peak.blocks_in_use = s.blocks_in_use;
    if (s.blocks_shared > b->peak.blocks_shared) b->peak.blocks_shared = s.blocks_shared;
    for (int c = 0; c < k; c++) {
        if (st.gen[c]) r->n_gen[t * k + c] = (int)fkv_gen_result_get(st.gen[c]).n_tokens;
        fkv_gen_free(st.gen[c]);
        fkv_engine_finish(b->e, st.seq[c]);
    }
    return rc;
}

static void print_result(const bench *b, const multi_run *r, double seconds, double cpu_seconds) {
    fkv_engine_stats s = fkv_engine_get_stats(b->e);
    char kv[512];
    snprintf(kv, sizeof kv,
             "{\"block_rows\":%u,\"block_bytes\":%zu,\"blocks_total\":%u,\"blocks_in_use_peak\":%u,"
             "\"blocks_shared_peak\":%u,\"kv_mb_peak\":%.1f,\"hits\":%llu,\"misses\":%llu,\"evictions\":%llu,"
             "\"reused_tokens\":%llu}",
             s.block_rows, s.block_bytes, s.blocks_total, b->peak.blocks_in_use, b->peak.blocks_shared,
             (double)b->peak.blocks_in_use * (double)s.block_bytes / 1e6, (unsigned long long)s.hits,
             (unsigned long long)s.misses, (unsigned long long)s.evictions, (unsigned long long)s.reused_tokens);
    multi_print("flatkv", r, seconds, cpu_seconds, b->prompt_tokens, kv);
}

int main(int argc, char **argv) {
    multi_args a;
    if (multi_parse(argc, argv, &a) != 0) return 2;

    fkv_error err = {0};
    bench b = {0};
    if (!(b.m = fkv_model_load(a.model, &err))) {
        fprintf(stderr, "multi_flatkv: %s\n", err.msg);
        return 1;
    }
    fkv_model_info mi = fkv_model_get_info(b.m);
    b.n_vocab = mi.n_vocab;
    multi_run r = {0};
    int32_t *ids = NULL;
    int rc = 1;
    if ((uint32_t)multi_max_len(&a) > mi.n_ctx_train) {
        fprintf(stderr, "multi_flatkv: %d turns need %d positions per conversation; the model's context is %u\n",
                a.turns, multi_max_len(&a), mi.n_ctx_train);
        goto done;
    }
    ids = harness_read_ids(a.ids_path, multi_ids_needed(&a), (int32_t)b.n_vocab);
    b.logits = malloc(sizeof(float) * b.n_vocab * (size_t)a.k);
    b.batch_logits = malloc(sizeof(float) * b.n_vocab * (size_t)a.k);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0.0f; /* greedy, as multi_llama.c takes the argmax */
    b.sampler = fkv_sampler_new(&sp, (int32_t)b.n_vocab);
    if (!ids || !b.logits || !b.batch_logits || !b.sampler || multi_init(&r, &a, ids)) {
        if (ids) fprintf(stderr, "multi_flatkv: out of memory\n");
        goto done;
    }

    fkv_engine_params ep;
    if (fkv_engine_default_params(&ep, &err)) goto fail;
    ep.ctx.n_threads = a.threads;
    ep.max_batch = (uint32_t)a.k;
    /* The positions llama.cpp's context gets (multi_llama.c), plus each conversation's partial last block
     * twice over (a shared partial block is copied when extended); unreferenced blocks are evicted. */
    size_t bytes_per_pos = (size_t)2 * mi.n_layers * mi.n_kv_heads * mi.head_dim *
                           (ep.ctx.kv_type == FKV_KV_F16 ? 2 : 4);
    /* FKV_BENCH_KV_BLOCK: the block size, for measuring its effect (the server's --kv-block). */
    if (getenv("FKV_BENCH_KV_BLOCK")) ep.kv_block = (uint32_t)atoi(getenv("FKV_BENCH_KV_BLOCK"));
    uint32_t block = ep.kv_block ? ep.kv_block : 64;
    ep.kv_mem = bytes_per_pos * ((size_t)multi_kv_positions(&a) + 256 + (size_t)2 * (size_t)a.k * block);

    /* Warm-up on a throwaway engine: first-touch page faults of the mapped weights stay outside the timed
     * span and outside the measured engine's statistics. */
    if (!(b.e = fkv_engine_new(b.m, &ep, &err)) || prime(&b, ids, HARNESS_WARMUP_IDS, &err)) goto fail;
    fkv_engine_free(b.e);
    b.prompt_tokens = 0;
    if (!(b.e = fkv_engine_new(b.m, &ep, &err))) goto fail;

    double t0 = harness_now(), c0 = harness_cpu();
    for (int t = 0; t < a.turns; t++)
        if (round_run(&b, &r, t, &err)) goto fail;
    print_result(&b, &r, harness_now() - t0, harness_cpu() - c0);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "multi_flatkv: %s\n", err.msg);
done:
    multi_free(&r);
    fkv_engine_free(b.e);
    fkv_sampler_free(b.sampler);
    fkv_model_free(b.m);
    free(b.batch_logits);
    free(b.logits);
    free(ids);
    return rc;
}
