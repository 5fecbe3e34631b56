/* The prefix cache end to end (fkv_seq): every resumed turn is compared with a cold run of the same prompt
 * by the digest of its KV rows, of the logits its generation sampled from, and of the recurrent state it ends with
 * (docs/design.md §7). */
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

#define GRID 16
#define N_GEN 12

typedef struct {
    fkv_model *m;
    uint32_t n_vocab;
    fkv_seq *warm; /* the cache under test */
    fkv_seq *cold; /* prefix cache off: every prompt from position 0 */
    fkv_sampler *sampler;
    float *logits;
    fkv_kv_type kv_type; /* of both sequences */
    uint32_t state_grid; /* recurrent layers: the warm sequences' state grid (0: the default) */
} fixture;

typedef struct {
    uint32_t cached;
    uint64_t kv, logits, state; /* state: after the turn (0 without recurrent layers) */
    uint32_t n_gen;
    int32_t gen[N_GEN];
} turn_result;

static fkv_seq *new_seq(const fixture *f, bool cache) {
    fkv_engine_params p;
    assert_int_equal(fkv_engine_default_params(&p, NULL), 0);
    p.ctx.n_ctx = 512;
    p.ctx.kv_type = f->kv_type;
    p.ctx.prefill_rows = GRID;
    p.prefix_cache = cache;
    p.cache_min = 1;
    p.state_grid = f->state_grid;
    fkv_error err = {0};
    fkv_seq *s = fkv_seq_new(f->m, &p, &err);
    if (!s) fail_msg("%s", err.msg);
    return s;
}

static int setup_path(void **state, const char *path, fkv_kv_type kv_type) {
    fixture *f = calloc(1, sizeof *f);
    fkv_error err = {0};
    f->kv_type = kv_type;
    if (!(f->m = fkv_model_load(path, &err))) {
        print_error("%s\n", err.msg);
        return -1;
    }
    f->n_vocab = fkv_model_get_info(f->m).n_vocab;
    f->warm = new_seq(f, true);
    f->cold = new_seq(f, false);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    f->sampler = fkv_sampler_new(&sp, (int32_t)f->n_vocab);
    f->logits = malloc(sizeof(float) * f->n_vocab);
    *state = f;
    return 0;
}

static int setup_stories(void **state) { return setup_path(state, tu_data("models/stories260K.gguf"), FKV_KV_F16); }

static int setup_generated(void **state, fkv_kv_type kv_type) {
    const char *path = tu_small_model(GGML_TYPE_Q8_0, 11);
    int rc = path ? setup_path(state, path, kv_type) : -1;
    if (path) remove(path);
    return rc;
}
static int setup_q8(void **state) { return setup_generated(state, FKV_KV_F16); }
/* The same model with its K/V rows quantized (its heads of 32 take them; stories260K's of 8 do not). */
static int setup_q8_kv_q8_0(void **state) { return setup_generated(state, FKV_KV_Q8_0); }
static int setup_q8_kv_q4_0(void **state) { return setup_generated(state, FKV_KV_Q4_0); }

static int setup_arch(void **state, const char *arch, fkv_kv_type kv_type) {
    const char *path = tu_arch_model(arch, GGML_TYPE_Q8_0, 17);
    int rc = path ? setup_path(state, path, kv_type) : -1;
    if (path) remove(path);
    return rc;
}
static int setup_smollm3(void **state) { return setup_arch(state, "smollm3", FKV_KV_F16); }
static int setup_gemma3(void **state) { return setup_arch(state, "gemma3", FKV_KV_F16); }
static int setup_qwen3moe(void **state) { return setup_arch(state, "qwen3moe", FKV_KV_F16); }
static int setup_glm4moe(void **state) { return setup_arch(state, "glm4moe", FKV_KV_F16); }
static int setup_gptoss(void **state) { return setup_arch(state, "gpt-oss", FKV_KV_F16); }
/* States kept every 2 prefill chunks, where the default for this tiny state would keep none besides the ends. */
#define STATE_GRID (2 * GRID)
static int setup_qwen35(void **state) {
    const int rc = setup_arch(state, "qwen35", FKV_KV_F16);
    if (!rc) ((fixture *)*state)->state_grid = STATE_GRID;
    return rc;
}
/* gemma3's window layers with quantized rows: its heads of 64, one KV head */
static int setup_gemma3_kv_q8_0(void **state) { return setup_arch(state, "gemma3", FKV_KV_Q8_0); }

static int teardown(void **state) {
    fixture *f = *state;
    fkv_seq_free(f->warm);
    fkv_seq_free(f->cold);
    fkv_sampler_free(f->sampler);
    free(f->logits);
    fkv_model_free(f->m);
    free(f);
    return 0;
}

/* Prefill ids on s and generate N_GEN greedy tokens. */
static turn_result run_turn(fixture *f, fkv_seq *s, const int32_t *ids, uint32_t n) {
    turn_result r = {0};
    fkv_error err = {0};
    if (fkv_seq_prefill(s, ids, n, f->logits, &r.cached, &err)) fail_msg("%s", err.msg);
    r.kv = fkv_seq_kv_digest(s, n);
    fkv_gen_params gp = {.max_tokens = N_GEN, .sampler = f->sampler};
    fkv_gen_result res;
    if (fkv_seq_generate(s, f->logits, &gp, r.gen, &res, &err)) fail_msg("%s", err.msg);
    r.logits = res.logits_digest;
    r.n_gen = res.n_tokens;
    r.state = fkv_seq_state_digest(s);
    return r;
}

/* The warm sequence's turn equals a cold run of the same prompt; returns the warm turn. */
static turn_result expect_exact_turn(fixture *f, const int32_t *ids, uint32_t n, const char *what) {
    turn_result warm = run_turn(f, f->warm, ids, n), cold = run_turn(f, f->cold, ids, n);
    if (cold.cached != 0) fail_msg("%s: the cold path reused %u rows", what, cold.cached);
    if (warm.kv != cold.kv || warm.logits != cold.logits || warm.state != cold.state || warm.n_gen != cold.n_gen ||
        memcmp(warm.gen, cold.gen, sizeof(int32_t) * warm.n_gen))
        fail_msg("%s (reused %u of %u): resumed kv %016llx logits %016llx state %016llx, cold kv %016llx logits "
                 "%016llx state %016llx", what, warm.cached, n, (unsigned long long)warm.kv,
                 (unsigned long long)warm.logits, (unsigned long long)warm.state, (unsigned long long)cold.kv,
                 (unsigned long long)cold.logits, (unsigned long long)cold.state);
    return warm;
}

/* expect_exact_turn's reuse. */
static uint32_t expect_exact(fixture *f, const int32_t *ids, uint32_t n, const char *what) {
    return expect_exact_turn(f, ids, n, what).cached;
}

/* b = a[0..common) then b's own ids, with b[common] != a[common] so that the common prefix is exact. */
static void share_prefix(const fixture *f, int32_t *b, const int32_t *a, uint32_t common) {
    memcpy(b, a, sizeof(int32_t) * common);
    if (b[common] == a[common]) b[common] = 3 + (a[common] - 3 + 1) % (int32_t)(f->n_vocab - 3);
}

/* Deterministic ids in [3, n_vocab) from a seed. */
static void fill(const fixture *f, int32_t *ids, uint32_t n, uint64_t seed) {
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(3 + (seed >> 33) % (f->n_vocab - 3));
    }
}

static void test_boundary_matrix_resumes_exactly(void **state) {
    fixture *f = *state;
    int32_t a[160], b[160];
    fill(f, a, 160, 1);
    for (int base = 3 * GRID; base <= 5 * GRID; base += 2 * GRID)
        for (int delta = -2; delta <= 2; delta++) {
            uint32_t common = (uint32_t)(base + delta);
            fill(f, b, 160, 100 + common);
            share_prefix(f, b, a, common);
            fkv_seq_clear(f->warm);
            expect_exact(f, a, 140, "the first prompt");
            char what[96];
            snprintf(what, sizeof what, "common prefix at grid boundary %d%+d", base, delta);
            /* The record holds a[0..140) plus N_GEN-1 decode rows; b agrees with it for `common` ids. */
            assert_int_equal(expect_exact(f, b, 150, what), common);
        }
    fkv_seq_clear(f->warm);
    expect_exact(f, a, 100, "a prompt");
    assert_int_equal(expect_exact(f, a, 100, "an exact repeat"), 99);
    assert_int_equal(expect_exact(f, a, 60, "a shorter prompt"), 59);
    fill(f, b, 100, 7);
    b[0] = a[0] == 5 ? 6 : 5;
    assert_int_equal(expect_exact(f, b, 100, "divergence at the first token"), 0);
}

/* A growing conversation: each turn is the last prompt, the reply the model generated and new user ids;
 * resumed turns alternate with cold ones (a fresh sequence) and must all agree. */
static void test_alternating_reused_and_cold_turns_never_differ(void **state) {
    fixture *f = *state;
    int32_t convo[512];
    uint32_t n = 24;
    fill(f, convo, n, 99);
    fkv_seq_clear(f->warm);
    for (int pair = 0; pair < 8; pair++) {
        turn_result warm = run_turn(f, f->warm, convo, n);
        fkv_seq *fresh = new_seq(f, true);
        turn_result cold = run_turn(f, fresh, convo, n);
        fkv_seq_free(fresh);
        if (warm.kv != cold.kv || warm.logits != cold.logits)
            fail_msg("pair %d (%u tokens, reused %u): resumed and cold differ", pair, n, warm.cached);
        if (pair > 0 && warm.cached < n - 40) fail_msg("pair %d reused only %u of %u", pair, warm.cached, n);
        /* Next turn: the reply as generated, then 28 new ids. */
        memcpy(convo + n, warm.gen, sizeof(int32_t) * warm.n_gen);
        n += warm.n_gen;
        fill(f, convo + n, 28, 1000 + (uint64_t)pair);
        n += 28;
    }
}

/* The cached conversation differs from the new prompt's history (a shared head, different turns after):
 * the answer must be the new prompt's, never the cached conversation's. */
static void test_a_stale_cache_never_answers_a_different_history(void **state) {
    fixture *f = *state;
    int32_t x[200], y[200];
    for (int pair = 0; pair < 6; pair++) {
        uint32_t head = 20 + 17 * (uint32_t)pair;
        fill(f, x, 200, 500 + (uint64_t)pair);
        fill(f, y, 200, 900 + (uint64_t)pair);
        share_prefix(f, y, x, head);
        fkv_seq_clear(f->warm);
        expect_exact(f, x, 180, "the cached conversation");
        char what[64];
        snprintf(what, sizeof what, "stale pair %d", pair);
        assert_int_equal(expect_exact(f, y, 170, what), head);
    }
}

/* With the cache off the bytes are those of the cache-on path, and nothing is reused. */
static void test_cache_off_gives_the_same_bytes_as_cache_on(void **state) {
    fixture *f = *state;
    int32_t a[120];
    fill(f, a, 120, 4);
    fkv_seq_clear(f->warm);
    run_turn(f, f->warm, a, 80);
    turn_result on = run_turn(f, f->warm, a, 120), off = run_turn(f, f->cold, a, 120);
    assert_true(on.cached >= 79);
    assert_int_equal(off.cached, 0);
    assert_true(on.kv == off.kv && on.logits == off.logits);
}

static bool stop_after_five(void *user, int32_t id, const char *piece, int len) {
    (void)id, (void)piece, (void)len;
    return ++*(int *)user < 5;
}

/* After a cancelled generation, a rewind, or an input no id describes, the cache claims only rows the KV holds:
 * the next turn still equals cold. */
static void test_the_record_never_claims_a_row_the_kv_does_not_hold(void **state) {
    fixture *f = *state;
    fkv_error err = {0};
    int32_t a[200];
    fill(f, a, 200, 77);
    fkv_seq_clear(f->warm);

    /* Cancel: the sampled token that was not fed is not recorded. */
    assert_int_equal(fkv_seq_prefill(f->warm, a, 60, f->logits, NULL, &err), 0);
    int calls = 0;
    int32_t gen[N_GEN];
    fkv_gen_params gp = {.max_tokens = N_GEN, .sampler = f->sampler, .on_token = stop_after_five, .user = &calls};
    fkv_gen_result res;
    assert_int_equal(fkv_seq_generate(f->warm, f->logits, &gp, gen, &res, &err), 0);
    assert_true(res.cancelled);
    assert_int_equal(fkv_seq_n_pos(f->warm), 60 + res.n_tokens - 1);
    int32_t next[200];
    memcpy(next, a, sizeof(int32_t) * 60);
    memcpy(next + 60, gen, sizeof(int32_t) * res.n_tokens);
    fill(f, next + 60 + res.n_tokens, 30, 3);
    assert_int_equal(expect_exact(f, next, 60 + res.n_tokens + 30, "after a cancelled generation"),
                     60 + res.n_tokens - 1);

    /* Rewind: the sequence goes on from the rewind point exactly as a cold one; the rows dropped stay cached under
     * their ids, so the prompt they agree with (a[0..60)) resumes from them. */
    assert_int_equal(fkv_seq_rewind(f->warm, 33, &err), 0);
    assert_int_equal(fkv_seq_n_pos(f->warm), 33);
    assert_int_equal(fkv_seq_kv_digest(f->warm, 33), fkv_seq_kv_digest(f->cold, 33));
    turn_result r = run_turn(f, f->warm, a, 33), c = run_turn(f, f->cold, a, 33);
    assert_true(r.kv == c.kv && r.logits == c.logits);
    assert_int_equal(fkv_seq_rewind(f->warm, 33, &err), 0);
    float *row = malloc(sizeof(float) * f->n_vocab), *cold_row = malloc(sizeof(float) * f->n_vocab);
    assert_int_equal(fkv_seq_decode(f->warm, a[33], row, &err), 0);
    assert_int_equal(fkv_seq_prefill(f->cold, a, 34, cold_row, NULL, &err), 0);
    assert_memory_equal(row, cold_row, sizeof(float) * f->n_vocab);
    free(row);
    free(cold_row);
    assert_int_equal(expect_exact(f, a, 90, "after a rewind"), 60);

    /* Embedding rows at p: no prompt resumes past p, however well its ids agree; before p it does. */
    const uint32_t p = fkv_seq_n_pos(f->warm), dim = fkv_model_get_info(f->m).dim;
    float *embd = calloc((size_t)dim * 4, sizeof(float));
    for (uint32_t i = 0; i < dim * 4; i++) embd[i] = (float)((int)(i % 7) - 3) * 0.1f;
    assert_int_equal(fkv_seq_feed_embd(f->warm, embd, 4, f->logits, &err), 0);
    free(embd);
    assert_int_equal(fkv_seq_n_pos(f->warm), p + 4);
    int32_t placeholder[200];
    uint32_t n_fed = 0;
    memcpy(placeholder, a, sizeof(int32_t) * 90);
    fill(f, placeholder + 90, 110, 5);
    n_fed = expect_exact(f, placeholder, 130, "after embedding rows");
    assert_true(n_fed >= 89 && n_fed <= p);
}

/* A model with recurrent layers (docs/design.md §5): a prompt resumes at the longest agreeing length where a state is
 * at hand — a continuing conversation's own, or one the cache kept at a prompt's end, a reply's end or a multiple of
 * the state grid — and nowhere else; every turn equals cold in K/V, logits and state. */
static void test_a_hybrid_resumes_where_a_state_is_kept(void **state) {
    fixture *f = *state;
    fkv_seq_clear(f->warm);
    int32_t convo[400];
    fill(f, convo, 50, 21);
    uint32_t n = 50;
    turn_result t = expect_exact_turn(f, convo, n, "the first turn");
    for (int turn = 2; turn <= 4; turn++) { /* the reply as generated, then new ids: from the state it left */
        const uint32_t fed = n + t.n_gen - 1; /* the last token sampled is never fed */
        memcpy(convo + n, t.gen, sizeof(int32_t) * t.n_gen);
        n += t.n_gen;
        fill(f, convo + n, 20, 300 + (uint64_t)turn);
        n += 20;
        char what[64];
        snprintf(what, sizeof what, "turn %d, continuing", turn);
        t = expect_exact_turn(f, convo, n, what);
        assert_int_equal(t.cached, fed);
    }
    /* A rewind resumes from the last grid point at or before it, and goes on as a cold sequence. */
    fkv_error err = {0};
    assert_int_equal(fkv_seq_rewind(f->warm, 70, &err), 0);
    assert_int_equal(fkv_seq_prefill(f->cold, convo, 70, f->logits, NULL, &err), 0);
    assert_true(fkv_seq_state_digest(f->warm) == fkv_seq_state_digest(f->cold));
    assert_true(fkv_seq_kv_digest(f->warm, 70) == fkv_seq_kv_digest(f->cold, 70));
    float *row = malloc(sizeof(float) * f->n_vocab);
    assert_int_equal(fkv_seq_decode(f->warm, convo[70], row, &err), 0);
    assert_int_equal(fkv_seq_prefill(f->cold, convo, 71, f->logits, NULL, &err), 0);
    assert_memory_equal(row, f->logits, sizeof(float) * f->n_vocab);
    free(row);

    /* The boundary matrix, each case on a fresh cache: one turn of a 140-id prompt keeps states at the grid points
     * 32, 64, 96 and 128, one before the prompt's end (139) and at its reply's end (151, the ids it fed); a second
     * prompt agreeing with it for `common` ids resumes at the last of them at or before common: before, at and after
     * each kind, inside the reply (a reply re-tokenized otherwise). */
    static const uint32_t common[] = {31, 32, 33, 63, 64, 65, 138, 139, 140, 141, 146, 150, 151, 152};
    int32_t a[200], b[200];
    fill(f, a, 140, 41);
    for (size_t c = 0; c < sizeof common / sizeof *common; c++) {
        fkv_seq_free(f->warm);
        f->warm = new_seq(f, true);
        t = expect_exact_turn(f, a, 140, "the first prompt");
        memcpy(a + 140, t.gen, sizeof(int32_t) * t.n_gen);
        const uint32_t reply_end = 140 + t.n_gen - 1;
        fill(f, b, 200, 500 + common[c]);
        share_prefix(f, b, a, common[c]);
        uint32_t want = common[c] / STATE_GRID * STATE_GRID;
        if (common[c] >= 139) want = 139;
        if (common[c] >= reply_end) want = reply_end;
        char what[64];
        snprintf(what, sizeof what, "common prefix %u", common[c]);
        assert_int_equal(expect_exact(f, b, 180, what), want);
    }
    /* The same prompt again (a retry): its last row is computed anew, from the state kept before it. */
    assert_int_equal(expect_exact(f, b, 180, "the second prompt again"), 179);
}

/* Kept states share the K/V budget: a budget too small for the states of two conversations (about 33 KB each, every
 * 32 positions) evicts them, least recently used first, and a prompt whose state went resumes from an earlier one or
 * from 0 — still exactly. */
static void test_hybrid_states_evicted_for_room_resume_exactly(void **state) {
    fixture *f = *state;
    fkv_engine_params p;
    assert_int_equal(fkv_engine_default_params(&p, NULL), 0);
    p.ctx.n_ctx = 512;
    p.ctx.kv_type = f->kv_type; /* the cold sequence's */
    p.ctx.prefill_rows = GRID;
    p.cache_min = 1;
    p.state_grid = STATE_GRID;
    p.kv_mem = 512 * 1024;
    fkv_error err = {0};
    fkv_engine *e = fkv_engine_new(f->m, &p, &err);
    if (!e) fail_msg("%s", err.msg);
    fkv_seq *warm = f->warm;
    int32_t convo[2][300];
    uint32_t n[2];
    for (int k = 0; k < 2; k++) fill(f, convo[k], 300, 700 + (uint64_t)k), n[k] = 100;
    for (int round = 0; round < 4; round++)
        for (int k = 0; k < 2; k++) { /* two conversations in turn, each growing */
            f->warm = fkv_seq_open(e, NULL, &err);
            assert_non_null(f->warm);
            char what[64];
            snprintf(what, sizeof what, "round %d, conversation %d", round, k);
            expect_exact(f, convo[k], n[k], what);
            fkv_seq_free(f->warm);
            f->warm = warm;
            n[k] += 40;
        }
    const fkv_engine_stats st = fkv_engine_get_stats(e);
    assert_true(st.states_evicted > 0);
    assert_true(st.state_hits > 0);
    assert_int_equal(st.state_grid, STATE_GRID);
    assert_true(st.state_bytes + (size_t)st.blocks_in_use * st.block_bytes <= p.kv_mem);
    fkv_engine_free(e);
}

static void test_reuse_below_the_minimum_is_not_taken(void **state) {
    fixture *f = *state;
    fkv_engine_params p;
    assert_int_equal(fkv_engine_default_params(&p, NULL), 0);
    p.ctx.n_ctx = 512;
    p.cache_min = 64;
    fkv_error err = {0};
    fkv_seq *s = fkv_seq_new(f->m, &p, &err);
    int32_t a[120], b[120];
    fill(f, a, 120, 8);
    fill(f, b, 120, 9);
    share_prefix(f, b, a, 50);
    uint32_t cached;
    assert_int_equal(fkv_seq_prefill(s, a, 120, f->logits, &cached, &err), 0);
    assert_int_equal(fkv_seq_prefill(s, b, 120, f->logits, &cached, &err), 0);
    assert_int_equal(cached, 0); /* 50 agree, fewer than 64 */
    fill(f, a, 120, 10);
    share_prefix(f, a, b, 100);
    assert_int_equal(fkv_seq_prefill(s, a, 120, f->logits, &cached, &err), 0);
    assert_int_equal(cached, 100);
    fkv_seq_free(s);
}

static void test_environment_switches_set_the_defaults(void **state) {
    (void)state;
    fkv_engine_params p;
    fkv_error err = {0};
    setenv("FLATKV_PREFIX_CACHE", "0", 1);
    setenv("FLATKV_PREFILL_ROWS", "48", 1);
    setenv("FLATKV_PREFIX_CACHE_MIN", "7", 1);
    assert_int_equal(fkv_engine_default_params(&p, &err), 0);
    assert_false(p.prefix_cache);
    assert_int_equal(p.ctx.prefill_rows, 48);
    assert_int_equal(p.cache_min, 7);
    setenv("FLATKV_PREFILL_ROWS", "lots", 1);
    assert_int_equal(fkv_engine_default_params(&p, &err), -1);
    assert_non_null(strstr(err.msg, "FLATKV_PREFILL_ROWS"));
    unsetenv("FLATKV_PREFIX_CACHE");
    unsetenv("FLATKV_PREFILL_ROWS");
    unsetenv("FLATKV_PREFIX_CACHE_MIN");
    assert_int_equal(fkv_engine_default_params(&p, &err), 0);
    assert_true(p.prefix_cache);
    assert_int_equal(p.cache_min, 1);
}

/* The default takes any agreeing prefix: a user who repeats a short prompt sees it reused (issue 37). */
static void test_default_reuses_a_short_agreeing_prefix(void **state) {
    fixture *f = *state;
    fkv_engine_params p;
    assert_int_equal(fkv_engine_default_params(&p, NULL), 0);
    p.ctx.n_ctx = 512;
    fkv_error err = {0};
    fkv_seq *s = fkv_seq_new(f->m, &p, &err);
    int32_t a[53], b[53];
    fill(f, a, 53, 11);
    fill(f, b, 53, 12);
    share_prefix(f, b, a, 5);
    uint32_t cached;
    assert_int_equal(fkv_seq_prefill(s, a, 53, f->logits, &cached, &err), 0);
    assert_int_equal(fkv_seq_prefill(s, a, 53, f->logits, &cached, &err), 0);
    assert_int_equal(cached, 52); /* the repeat: all but the last, whose logits are this prompt's */
    assert_int_equal(fkv_seq_prefill(s, b, 53, f->logits, &cached, &err), 0);
    assert_int_equal(cached, 5);
    fkv_seq_free(s);
}

int main(void) {
#define CASE(fn, model) {#fn " (" #model ")", fn, setup_##model, teardown, NULL}
    const struct CMUnitTest tests[] = {
        CASE(test_boundary_matrix_resumes_exactly, stories),
        CASE(test_alternating_reused_and_cold_turns_never_differ, stories),
        CASE(test_a_stale_cache_never_answers_a_different_history, stories),
        CASE(test_cache_off_gives_the_same_bytes_as_cache_on, stories),
        CASE(test_the_record_never_claims_a_row_the_kv_does_not_hold, stories),
        CASE(test_reuse_below_the_minimum_is_not_taken, stories),
        CASE(test_default_reuses_a_short_agreeing_prefix, stories),
        CASE(test_boundary_matrix_resumes_exactly, q8),
        CASE(test_alternating_reused_and_cold_turns_never_differ, q8),
        CASE(test_the_record_never_claims_a_row_the_kv_does_not_hold, q8),
        /* qwen3's q/k norms and phi3's partial rotary are row-local: test_invariance covers them; the resume matrix
         * takes the architectures whose layers differ in what they attend to (window layers, NoPE layers) */
        CASE(test_boundary_matrix_resumes_exactly, smollm3),
        CASE(test_boundary_matrix_resumes_exactly, gemma3),
        CASE(test_boundary_matrix_resumes_exactly, qwen3moe),
        CASE(test_boundary_matrix_resumes_exactly, glm4moe),
        CASE(test_boundary_matrix_resumes_exactly, gptoss),
        CASE(test_boundary_matrix_resumes_exactly, q8_kv_q8_0),
        CASE(test_boundary_matrix_resumes_exactly, q8_kv_q4_0),
        CASE(test_alternating_reused_and_cold_turns_never_differ, q8_kv_q8_0),
        CASE(test_the_record_never_claims_a_row_the_kv_does_not_hold, q8_kv_q4_0),
        CASE(test_boundary_matrix_resumes_exactly, gemma3_kv_q8_0),
        CASE(test_a_hybrid_resumes_where_a_state_is_kept, qwen35),
        CASE(test_hybrid_states_evicted_for_room_resume_exactly, qwen35),
        cmocka_unit_test(test_environment_switches_set_the_defaults),
    };
    return tu_each_variant(tests, sizeof tests / sizeof *tests, NULL);
}
