/* multi_llama.c — K conversations at once on one llama.cpp context through its C API, timed (bench/multi).
 *
 * usage: multi_llama MODEL IDS THREADS K TURNS
 *
 * llama.cpp's own multi-sequence path, as its server's slots use it: one llama_context with n_seq_max = K and
 * one unified KV buffer (kv_unified, the server's default when it picks the number of slots) large enough for
 * every conversation; conversation c is sequence c. Its server's batch sizes (n_batch 2048, n_ubatch 512).
 * Before round 0 the system prompt is computed once on sequence 0 and copied to the others with
 * llama_memory_seq_cp (timed in round 0): in a unified buffer the copy only tags the same cells with more
 * sequence ids, so the system prompt is stored once, as flatkv stores it. A turn's prompt extends what its
 * sequence holds (the previous prompt and the ids fed while generating), so only the ids past
 * llama_memory_seq_pos_max are decoded: all conversations' new ids in one llama_batch (split at n_batch), each
 * token with its own sequence id and position, logits for each conversation's last id. Then every generating
 * conversation's decode step goes in one llama_batch, one token per sequence. Greedy (harness_argmax), stopping
 * by flatkv's rule (fkv_gen in src/engine/gen.c): at an end-of-generation id or the MULTI_GEN-th id, neither fed.
 * The conversations and the JSON line are harness.h's (HARNESS_MULTI).
 */
#define HARNESS_MULTI
#include "harness.h"
#include "llama_peer.h"

#define MAX_K 64 /* multi_parse's bound on K */
#define N_BATCH 2048
#define N_UBATCH 512

typedef struct {
    struct llama_context *ctx;
    llama_memory_t mem;
    const struct llama_vocab *vocab;
    int32_t n_vocab;
    struct llama_batch batch; /* N_BATCH tokens */
    long prompt_tokens;       /* computed, not reused */
} bench;

/* Keep llama.cpp's warnings and errors (a refused model says why), drop its progress chatter. */
static void batch_add(struct llama_batch *b, llama_token id, llama_pos pos, llama_seq_id seq, bool logits) {
    int i = b->n_tokens++;
    b->token[i] = id;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

static int decode(bench *b) {
    int rc = llama_decode(b->ctx, b->batch);
    if (rc != 0) fprintf(stderr, "multi_llama: llama_decode of %d ids returned %d\n", b->batch.n_tokens, rc);
    b->batch.n_tokens = 0;
    return rc;
}

/* One round's conversations. */
typedef struct {
    int32_t next[MAX_K]; /* the id to feed */
    int n_pos[MAX_K];    /* positions sequence c holds */
    bool live[MAX_K];
    int n_live;
    double t0;
} round_state;

/* After conversation c's row of logits (batch index i of the last decode): the next id, or the end of its
 * turn — flatkv's rule, so both engines feed the same number of ids. */
static void after_logits(bench *b, multi_run *r, round_state *st, int t, int c, int i) {
    int32_t id = harness_argmax(llama_get_logits_ith(b->ctx, i), b->n_vocab);
    int *n_gen = &r->n_gen[t * r->a->k + c];
    r->gen[c][(*n_gen)++] = id;
    st->next[c] = id;
    if (!llama_vocab_is_eog(b->vocab, id) && *n_gen < MULTI_GEN) return;
    st->live[c] = false;
    st->n_live--;
    r->latency_ms[t * r->a->k + c] = 1e3 * (harness_now() - st->t0);
}

/* Round t: every conversation's turn t, from its request to its last generated id. */
static int round_run(bench *b, multi_run *r, int t) {
    const int k = r->a->k;
    round_state st = {.t0 = harness_now()};
    int rc = 0;
    if (t == 0) {
        for (int p = 0; p < MULTI_SYSTEM; p++) batch_add(&b->batch, r->ids[p], p, 0, false);
        rc = decode(b);
        for (int c = 1; c < k; c++) llama_memory_seq_cp(b->mem, 0, c, -1, -1);
        b->prompt_tokens += MULTI_SYSTEM;
    }
    /* Every conversation's new ids in as few batches as N_BATCH allows; a conversation's logits are read
     * right after the decode that holds its last id. */
    int pending[MAX_K], pending_at[MAX_K], n_pending = 0; /* conversation, batch index of its last id */
    for (int c = 0; !rc && c < k; c++) {
        multi_next_prompt(r, t, c);
        int from = llama_memory_seq_pos_max(b->mem, c) + 1;
        r->cached[t * k + c] = from;
        b->prompt_tokens += r->len[c] - from;
        st.live[c] = true;
        st.n_live++;
        for (int p = from; !rc && p < r->len[c]; p++) {
            bool last = p == r->len[c] - 1;
            if (last) pending[n_pending] = c, pending_at[n_pending++] = b->batch.n_tokens;
            batch_add(&b->batch, r->convo[c][p], p, c, last);
            if (b->batch.n_tokens == N_BATCH || (c == k - 1 && last)) {
                rc = decode(b);
                for (int j = 0; !rc && j < n_pending; j++) after_logits(b, r, &st, t, pending[j], pending_at[j]);
                n_pending = 0;
            }
        }
        st.n_pos[c] = r->len[c];
    }
    while (!rc && st.n_live > 0) {
        int who[MAX_K], n = 0;
        for (int c = 0; c < k; c++)
            if (st.live[c]) batch_add(&b->batch, st.next[c], st.n_pos[c]++, c, true), who[n++] = c;
        rc = decode(b);
        for (int j = 0; !rc && j < n; j++) after_logits(b, r, &st, t, who[j], j);
    }
    r->round_s[t] = harness_now() - st.t0;
    return rc;
}

int main(int argc, char **argv) {
    multi_args a;
    if (multi_parse(argc, argv, &a) != 0) return 2;

    struct llama_model *model = llama_peer_load("multi_llama", a.model);
    if (!model) return 1;
    bench b = {.vocab = llama_model_get_vocab(model)};
    b.n_vocab = llama_vocab_n_tokens(b.vocab);
    multi_run r = {0};
    int rc = 1;
    int32_t *ids = harness_read_ids(a.ids_path, multi_ids_needed(&a), b.n_vocab);
    if (!ids || multi_init(&r, &a, ids)) goto done;

    struct llama_context_params cp = llama_context_default_params();
    /* Every conversation's positions with the system prompt once (the unified buffer shares its cells), plus
     * the 256 cells llama.cpp pads to. */
    cp.n_ctx = (uint32_t)multi_kv_positions(&a) + 256;
    cp.n_batch = N_BATCH;
    cp.n_ubatch = N_UBATCH;
    cp.n_seq_max = (uint32_t)a.k;
    cp.kv_unified = true;
    cp.n_threads = a.threads;
    cp.n_threads_batch = a.threads;
    cp.no_perf = true;
    if (!(b.ctx = llama_init_from_model(model, cp))) {
        fprintf(stderr, "multi_llama: llama.cpp could not create a context for %s\n", a.model);
        goto done;
    }
    b.mem = llama_get_memory(b.ctx);
    b.batch = llama_batch_init(N_BATCH, 0, 1);

    /* Warm-up: first-touch page faults of the mapped weights and one-time allocations, outside the timed span. */
    for (int p = 0; p < HARNESS_WARMUP_IDS; p++) batch_add(&b.batch, ids[p], p, 0, p == HARNESS_WARMUP_IDS - 1);
    if (decode(&b)) goto done;
    llama_memory_clear(b.mem, true);

    double t0 = harness_now(), c0 = harness_cpu();
    for (int t = 0; t < a.turns; t++)
        if (round_run(&b, &r, t)) goto done;
    llama_synchronize(b.ctx);
    double seconds = harness_now() - t0, cpu_seconds = harness_cpu() - c0;

    /* Cells holding rows: the system prompt once, then each sequence's own. */
    long cells = MULTI_SYSTEM;
    for (int c = 0; c < a.k; c++) cells += llama_memory_seq_pos_max(b.mem, c) + 1 - MULTI_SYSTEM;
    double bytes_per_cell = 2.0 * llama_model_n_layer(model) * llama_model_n_embd(model) /
                            llama_model_n_head(model) * llama_model_n_head_kv(model) * 2.0; /* K and V, f16 */
    char kv[256];
    snprintf(kv, sizeof kv, "{\"n_ctx\":%u,\"cells_used\":%ld,\"kv_mb_used\":%.1f,\"kv_mb_allocated\":%.1f}",
             llama_n_ctx(b.ctx), cells, (double)cells * bytes_per_cell / 1e6,
             (double)llama_n_ctx(b.ctx) * bytes_per_cell / 1e6);
    multi_print("llama.cpp", &r, seconds, cpu_seconds, b.prompt_tokens, kv);
    rc = 0;

done:
    if (b.batch.token) llama_batch_free(b.batch);
    if (b.ctx) llama_free(b.ctx);
    llama_model_free(model);
    llama_backend_free();
    multi_free(&r);
    free(ids);
    return rc;
}
