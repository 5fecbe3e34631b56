/* Many sequences at once (fkv_engine): interleaved conversations, batched decode, shared prefixes, a tiny
 * memory budget and cache salts — every answer compared with the same prompt run alone, cold, on a single
 * sequence (fkv_seq with the cache off), by KV digest, logits digest, recurrent state digest and ids. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatkv.h"
#include "gguf/gguf.h"
#include "testutil.h"

#define N_GEN 10
#define MAX_SEQS 8

typedef struct {
    fkv_model *m;
    uint32_t n_vocab;
    fkv_seq *cold;
    fkv_sampler *sampler;
    fkv_kv_type kv_type; /* of every sequence and engine of the fixture */
} fixture;

typedef struct {
    uint32_t cached;
    uint64_t kv, logits, state; /* state: after the prompt (0 without recurrent layers) */
    uint32_t n_gen;
    int32_t gen[N_GEN];
} answer;

static int setup_path(void **state, const char *path, fkv_kv_type kv_type) {
    fixture *f = calloc(1, sizeof *f);
    fkv_error err = {0};
    if (!(f->m = fkv_model_load(path, &err))) return -1;
    f->n_vocab = fkv_model_get_info(f->m).n_vocab;
    f->kv_type = kv_type;
    fkv_engine_params p;
    fkv_engine_default_params(&p, NULL);
    p.ctx.n_ctx = 512;
    p.ctx.kv_type = kv_type;
    p.prefix_cache = false;
    f->cold = fkv_seq_new(f->m, &p, &err);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    f->sampler = fkv_sampler_new(&sp, (int32_t)f->n_vocab);
    *state = f;
    return f->cold ? 0 : -1;
}

static int setup_stories(void **state) { return setup_path(state, tu_data("models/stories260K.gguf"), FKV_KV_F16); }

static int setup_generated(void **state, fkv_kv_type kv_type) {
    const char *path = tu_small_model(GGML_TYPE_Q8_0, 17);
    int rc = path ? setup_path(state, path, kv_type) : -1;
    if (path) remove(path);
    return rc;
}
static int setup_q8(void **state) { return setup_generated(state, FKV_KV_F16); }
/* The same model with its K/V rows quantized (its heads of 32 take them; stories260K's of 8 do not). */
static int setup_q8_kv_q8_0(void **state) { return setup_generated(state, FKV_KV_Q8_0); }
static int setup_q8_kv_q4_0(void **state) { return setup_generated(state, FKV_KV_Q4_0); }
/* Experts: a batched step groups the rows of every conversation by expert. */
static int setup_arch(void **state, const char *arch) {
    const char *path = tu_arch_model(arch, GGML_TYPE_Q8_0, 19);
    int rc = path ? setup_path(state, path, FKV_KV_F16) : -1;
    if (path) remove(path);
    return rc;
}
static int setup_qwen3moe(void **state) { return setup_arch(state, "qwen3moe"); }
static int setup_glm4moe(void **state) { return setup_arch(state, "glm4moe"); }
static int setup_gptoss(void **state) { return setup_arch(state, "gpt-oss"); }
static int setup_qwen35(void **state) { return setup_arch(state, "qwen35"); }
static int setup_qwen35moe(void **state) { return setup_arch(state, "qwen35moe"); }

static int teardown(void **state) {
    fixture *f = *state;
    fkv_seq_free(f->cold);
    fkv_sampler_free(f->sampler);
    fkv_model_free(f->m);
    free(f);
    return 0;
}

static fkv_engine *new_engine(const fixture *f, size_t kv_mem, uint32_t block) {
    fkv_engine_params p;
    fkv_engine_default_params(&p, NULL);
    p.ctx.n_ctx = 512;
    p.ctx.kv_type = f->kv_type;
    p.ctx.prefill_rows = 32;
    p.cache_min = 1;
    p.kv_mem = kv_mem;
    p.kv_block = block;
    p.max_batch = MAX_SEQS;
    fkv_error err = {0};
    fkv_engine *e = fkv_engine_new(f->m, &p, &err);
    if (!e) fail_msg("%s", err.msg);
    return e;
}

/* The prompt alone on a cold single sequence. */
static answer cold_answer(fixture *f, const int32_t *ids, uint32_t n) {
    answer a = {0};
    fkv_error err = {0};
    float *logits = malloc(sizeof(float) * f->n_vocab);
    if (fkv_seq_prefill(f->cold, ids, n, logits, &a.cached, &err)) fail_msg("%s", err.msg);
    a.kv = fkv_seq_kv_digest(f->cold, n);
    a.state = fkv_seq_state_digest(f->cold);
    fkv_gen_params gp = {.max_tokens = N_GEN, .sampler = f->sampler};
    fkv_gen_result res;
    if (fkv_seq_generate(f->cold, logits, &gp, a.gen, &res, &err)) fail_msg("%s", err.msg);
    a.logits = res.logits_digest;
    a.n_gen = res.n_tokens;
    free(logits);
    return a;
}

/* k prompts at once on engine e: started together, prompts computed chunk by chunk in turn, then decoded
 * as one batch until each generation ends. */
static void engine_answers(fixture *f, fkv_engine *e, int k, const int32_t *const *ids, const uint32_t *n,
                           const char *const *salts, answer *out) {
    fkv_error err = {0};
    fkv_eseq *seqs[MAX_SEQS];
    fkv_gen *gens[MAX_SEQS];
    float *logits = malloc(sizeof(float) * f->n_vocab * MAX_SEQS);
    int32_t next[MAX_SEQS];
    bool prefilled[MAX_SEQS] = {0}, live[MAX_SEQS];
    fkv_gen_params gp = {.max_tokens = N_GEN, .sampler = f->sampler};
    for (int i = 0; i < k; i++) {
        memset(&out[i], 0, sizeof out[i]);
        seqs[i] = fkv_engine_start(e, salts ? salts[i] : NULL, ids[i], n[i], &out[i].cached, &err);
        if (!seqs[i]) fail_msg("start %d: %s", i, err.msg);
        gens[i] = fkv_gen_new(f->m, &gp, out[i].gen);
        live[i] = true;
    }
    for (int done = 0; done < k;)
        for (int i = 0; i < k; i++) {
            if (prefilled[i]) continue;
            int rc = fkv_engine_prefill(e, seqs[i], logits + (size_t)i * f->n_vocab, &err);
            if (rc < 0) fail_msg("prefill %d: %s", i, err.msg);
            if (rc == 1) prefilled[i] = true, done++;
        }
    for (int i = 0; i < k; i++) {
        out[i].kv = fkv_engine_kv_digest(e, seqs[i], n[i]);
        out[i].state = fkv_engine_state_digest(e, seqs[i]);
    }
    for (;;) {
        fkv_eseq *batch[MAX_SEQS];
        int32_t batch_ids[MAX_SEQS];
        int who[MAX_SEQS], m = 0;
        for (int i = 0; i < k; i++) {
            if (!live[i]) continue;
            uint32_t n_hist;
            const int32_t *hist = fkv_eseq_ids(seqs[i], &n_hist);
            next[i] = fkv_gen_next(gens[i], logits + (size_t)i * f->n_vocab, hist, (int)n_hist, n_hist,
                                   fkv_engine_n_ctx(e));
            if (next[i] < 0) {
                live[i] = false;
                continue;
            }
            batch[m] = seqs[i], batch_ids[m] = next[i], who[m++] = i;
        }
        if (!m) break;
        float *batch_logits = malloc(sizeof(float) * f->n_vocab * (size_t)m);
        uint32_t failed;
        if (fkv_engine_decode(e, batch, batch_ids, (uint32_t)m, batch_logits, &failed, &err))
            fail_msg("decode: %s", err.msg);
        for (int j = 0; j < m; j++)
            memcpy(logits + (size_t)who[j] * f->n_vocab, batch_logits + (size_t)j * f->n_vocab, sizeof(float) * f->n_vocab);
        free(batch_logits);
    }
    for (int i = 0; i < k; i++) {
        fkv_gen_result r = fkv_gen_result_get(gens[i]);
        out[i].logits = r.logits_digest;
        out[i].n_gen = r.n_tokens;
        fkv_gen_free(gens[i]);
        fkv_engine_finish(e, seqs[i]);
    }
    free(logits);
}

static void expect_same(const answer *got, const answer *cold, const char *what) {
    if (got->kv != cold->kv || got->logits != cold->logits || got->state != cold->state ||
        got->n_gen != cold->n_gen || memcmp(got->gen, cold->gen, sizeof(int32_t) * got->n_gen))
        fail_msg("%s (reused %u): kv %016llx logits %016llx state %016llx, alone and cold kv %016llx logits %016llx "
                 "state %016llx", what, got->cached, (unsigned long long)got->kv, (unsigned long long)got->logits,
                 (unsigned long long)got->state, (unsigned long long)cold->kv, (unsigned long long)cold->logits,
                 (unsigned long long)cold->state);
}

static void fill(const fixture *f, int32_t *ids, uint32_t n, uint64_t seed) {
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(3 + (seed >> 33) % (f->n_vocab - 3));
    }
}

/* Four conversations, turns interleaved (A1 B1 C1 D1 A2 B2 ...), each turn one request on the engine: every
 * answer equals its prompt alone and cold, and every turn after the first reuses at least 90% of that
 * conversation's previous prompt. Then the same with the four turns of a round run as one batch. */
static void run_four_conversations(fixture *f, fkv_engine *e, bool batched, bool expect_reuse) {
    enum { K = 4, TURNS = 4, SYSTEM = 40 };
    int32_t convo[K][512];
    uint32_t len[K];
    int32_t system[SYSTEM];
    fill(f, system, SYSTEM, 3);
    for (int c = 0; c < K; c++) {
        memcpy(convo[c], system, sizeof system); /* a shared system prompt */
        fill(f, convo[c] + SYSTEM, 20, 100 + (uint64_t)c);
        len[c] = SYSTEM + 20;
    }
    uint32_t prev_len[K] = {0};
    for (int t = 0; t < TURNS; t++) {
        answer got[K];
        const int32_t *ids[K];
        for (int c = 0; c < K; c++) ids[c] = convo[c];
        if (batched) {
            engine_answers(f, e, K, ids, len, NULL, got);
        } else {
            for (int c = 0; c < K; c++) engine_answers(f, e, 1, &ids[c], &len[c], NULL, &got[c]);
        }
        for (int c = 0; c < K; c++) {
            answer cold = cold_answer(f, convo[c], len[c]);
            char what[96];
            snprintf(what, sizeof what, "%s conversation %d turn %d", batched ? "batched" : "interleaved", c, t);
            expect_same(&got[c], &cold, what);
            if (expect_reuse && t > 0 && got[c].cached * 10 < prev_len[c] * 9)
                fail_msg("%s: reused %u of the previous prompt's %u", what, got[c].cached, prev_len[c]);
            prev_len[c] = len[c];
            /* The reply as generated, then the next user message. */
            memcpy(convo[c] + len[c], got[c].gen, sizeof(int32_t) * got[c].n_gen);
            len[c] += got[c].n_gen;
            fill(f, convo[c] + len[c], 24, 1000 * (uint64_t)t + (uint64_t)c);
            len[c] += 24;
        }
    }
}

static void test_interleaved_conversations_equal_each_alone_and_cold(void **state) {
    fixture *f = *state;
    fkv_engine *e = new_engine(f, 0, 64);
    run_four_conversations(f, e, false, true);
    fkv_engine_free(e);
}

static void test_batched_decode_never_changes_an_answer(void **state) {
    fixture *f = *state;
    fkv_engine *e = new_engine(f, 0, 64);
    run_four_conversations(f, e, true, true);
    fkv_engine_stats s = fkv_engine_get_stats(e);
    assert_true(s.hits > 0);
    fkv_engine_free(e);
}

/* Three prompts with a 128-token common head run at once: the head's full blocks are held once, shared. */
/* A model with recurrent layers: batched with other conversations, each answer (and its state) is its own alone and
 * cold, and each turn resumes from the state its previous turn kept (at its reply's end); a prompt agreeing with a
 * cached one resumes at the kept prompt end, and where no state is kept at or before the agreement (no grid point
 * yet) it starts cold whatever rows agree (kvrec.h), and says why. */
static void test_a_hybrid_batched_equals_alone_and_resumes_at_a_kept_state(void **state) {
    fixture *f = *state;
    fkv_engine *e = new_engine(f, 0, 64);
    run_four_conversations(f, e, true, true);
    fkv_engine_stats s = fkv_engine_get_stats(e);
    assert_true(s.hits > 0 && s.state_hits > 0 && s.states_kept > 0);
    assert_true(s.state_grid > 50);
    int32_t p[100];
    fill(f, p, 100, 7);
    fkv_error err = {0};
    fkv_eseq *a = fkv_engine_start(e, NULL, p, 80, NULL, &err);
    while (fkv_engine_prefill(e, a, NULL, &err) == 0) {}
    fkv_engine_finish(e, a);
    uint32_t cached = 1;
    fkv_eseq *b = fkv_engine_start(e, NULL, p, 100, &cached, &err);
    fkv_reuse r = fkv_eseq_reuse(b);
    assert_int_equal(cached, 80); /* a's end (it generated nothing), kept */
    assert_int_equal(r.state, 80);
    fkv_engine_finish(e, b);
    p[50] = p[50] == 5 ? 6 : 5;
    fkv_eseq *c = fkv_engine_start(e, NULL, p, 100, &cached, &err);
    r = fkv_eseq_reuse(c);
    assert_int_equal(cached, 0);
    assert_int_equal(r.held, 50); /* the rows agree and are held ... */
    assert_int_equal(r.state, 0); /* ... but no state after them is */
    fkv_engine_finish(e, c);
    fkv_engine_free(e);
}

/* A fork (another choice of the same prompt, n > 1) starts from the rows and the recurrent state of the sequence it
 * forks: fed the same ids, both hold what a cold run of them holds. */
static void test_a_fork_carries_the_recurrent_state(void **state) {
    fixture *f = *state;
    int32_t p[90];
    fill(f, p, 90, 12);
    answer cold = cold_answer(f, p, 90);
    fkv_engine *e = new_engine(f, 0, 64);
    fkv_error err = {0};
    fkv_eseq *s = fkv_engine_start(e, NULL, p, 70, NULL, &err);
    while (fkv_engine_prefill(e, s, NULL, &err) == 0) {}
    fkv_eseq *fork = fkv_engine_fork(e, s, &err);
    assert_non_null(fork);
    assert_true(fkv_engine_state_digest(e, fork) == fkv_engine_state_digest(e, s));
    float *logits = malloc(sizeof(float) * f->n_vocab * 2);
    for (uint32_t i = 70; i < 90; i++) {
        fkv_eseq *both[2] = {s, fork};
        const int32_t ids[2] = {p[i], p[i]};
        assert_int_equal(fkv_engine_decode(e, both, ids, 2, logits, NULL, &err), 0);
    }
    assert_true(fkv_engine_kv_digest(e, s, 90) == cold.kv && fkv_engine_kv_digest(e, fork, 90) == cold.kv);
    assert_true(fkv_engine_state_digest(e, s) == cold.state && fkv_engine_state_digest(e, fork) == cold.state);
    free(logits);
    fkv_engine_finish(e, s);
    fkv_engine_finish(e, fork);
    fkv_engine_free(e);
}

static void test_a_shared_prefix_occupies_its_blocks_once(void **state) {
    fixture *f = *state;
    fkv_engine *e = new_engine(f, 0, 64);
    int32_t p[3][200];
    fill(f, p[0], 200, 1);
    for (int i = 1; i < 3; i++) {
        fill(f, p[i], 200, 10 + (uint64_t)i);
        memcpy(p[i], p[0], sizeof(int32_t) * 128);
    }
    fkv_error err = {0};
    float *logits = malloc(sizeof(float) * f->n_vocab);
    fkv_eseq *first = fkv_engine_start(e, NULL, p[0], 200, NULL, &err);
    while (fkv_engine_prefill(e, first, logits, &err) == 0) {}
    fkv_eseq *s1 = fkv_engine_start(e, NULL, p[1], 200, NULL, &err), *s2 = fkv_engine_start(e, NULL, p[2], 200, NULL, &err);
    assert_non_null(s1);
    assert_non_null(s2);
    while (fkv_engine_prefill(e, s1, logits, &err) == 0) {}
    while (fkv_engine_prefill(e, s2, logits, &err) == 0) {}
    fkv_engine_stats st = fkv_engine_get_stats(e);
    /* Blocks 0 and 1 (positions 0..127) are shared by all three; the rest are each sequence's own. */
    assert_int_equal(st.blocks_shared, 2);
    assert_int_equal(st.blocks_in_use, 2 + 3 * 2);
    for (int i = 0; i < 3; i++) {
        answer cold = cold_answer(f, p[i], 200);
        fkv_eseq *s = i == 0 ? first : i == 1 ? s1 : s2;
        assert_true(fkv_engine_kv_digest(e, s, 200) == cold.kv);
    }
    fkv_engine_finish(e, first);
    fkv_engine_finish(e, s1);
    fkv_engine_finish(e, s2);
    free(logits);
    fkv_engine_free(e);
}

/* A budget of a few blocks: conversations evict each other, and every answer is still the cold one. */
static void test_a_tiny_kv_budget_evicts_and_stays_exact(void **state) {
    fixture *f = *state;
    size_t block_bytes;
    {
        fkv_engine *probe = new_engine(f, 1, 32);
        block_bytes = fkv_engine_get_stats(probe).block_bytes;
        fkv_engine_free(probe);
    }
    fkv_engine *e = new_engine(f, block_bytes * 12, 32); /* 12 blocks of 32: 384 positions */
    run_four_conversations(f, e, false, false); /* evictions cost reuse, never exactness */
    fkv_engine_stats s = fkv_engine_get_stats(e);
    print_message("tiny budget: %u blocks, %llu evictions, %llu hits\n", s.blocks_total,
                  (unsigned long long)s.evictions, (unsigned long long)s.hits);
    assert_true(s.evictions > 0);
    fkv_engine_free(e);
}

static void test_different_salts_never_reuse_each_others_rows(void **state) {
    fixture *f = *state;
    fkv_engine *e = new_engine(f, 0, 64);
    int32_t p[150];
    fill(f, p, 150, 5);
    const int32_t *ids[1] = {p};
    uint32_t n[1] = {150};
    const char *alice[1] = {"alice"}, *bob[1] = {"bob"};
    answer a, b, c;
    engine_answers(f, e, 1, ids, n, alice, &a);
    engine_answers(f, e, 1, ids, n, bob, &b);
    engine_answers(f, e, 1, ids, n, alice, &c);
    assert_int_equal(a.cached, 0);
    assert_int_equal(b.cached, 0);
    assert_int_equal(c.cached, 149);
    answer cold = cold_answer(f, p, 150);
    expect_same(&b, &cold, "another salt");
    expect_same(&c, &cold, "the same salt again");
    fkv_engine_free(e);
}

int main(void) {
#define CASE(fn, model) {#fn " (" #model ")", fn, setup_##model, teardown, NULL}
    const struct CMUnitTest tests[] = {
        CASE(test_interleaved_conversations_equal_each_alone_and_cold, stories),
        CASE(test_batched_decode_never_changes_an_answer, stories),
        CASE(test_a_shared_prefix_occupies_its_blocks_once, stories),
        CASE(test_a_tiny_kv_budget_evicts_and_stays_exact, stories),
        CASE(test_different_salts_never_reuse_each_others_rows, stories),
        CASE(test_batched_decode_never_changes_an_answer, q8),
        CASE(test_a_tiny_kv_budget_evicts_and_stays_exact, q8),
        CASE(test_batched_decode_never_changes_an_answer, q8_kv_q8_0),
        CASE(test_batched_decode_never_changes_an_answer, q8_kv_q4_0),
        CASE(test_a_tiny_kv_budget_evicts_and_stays_exact, q8_kv_q4_0),
        CASE(test_batched_decode_never_changes_an_answer, qwen3moe),
        CASE(test_batched_decode_never_changes_an_answer, glm4moe),
        CASE(test_batched_decode_never_changes_an_answer, gptoss),
        CASE(test_a_hybrid_batched_equals_alone_and_resumes_at_a_kept_state, qwen35),
        CASE(test_a_hybrid_batched_equals_alone_and_resumes_at_a_kept_state, qwen35moe),
        CASE(test_a_fork_carries_the_recurrent_state, qwen35),
    };
    return tu_each_variant(tests, sizeof tests / sizeof *tests, NULL);
}
