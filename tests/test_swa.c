/* Sliding-window layers cached exactly (prefix.h): an engine keeps, for a window model's window layers, only the
 * rows a resume can still read — a running sequence's window and the windows of kept resume points — and resumes
 * on held rows alone. Every answer here is compared with the same ids run cold on a single sequence (the cache
 * off), by the KV digest after the prompt and at the end and by a digest of every row of logits; the same runs with
 * --swa-full (every row kept) give the same digests. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "flatkv.h"
#include "model/genmodel.h"
#include "testutil.h"

#define W 40      /* window: crosses the 32-position tiles and blocks */
#define B 32      /* KV block */
#define GRID 192  /* resume points kept every GRID positions (the matrix) */
#define N_CTX 1280

typedef struct {
    fkv_model *m;
    uint32_t n_vocab;
    fkv_seq *cold;
} model_fx;

typedef struct {
    uint64_t kv_prompt, kv_end, logits;
    fkv_reuse reuse;
} run;

/* A gemma3 model with windows of W: every layer a window layer (pattern 1... 0 in the file), or every other one. */
static model_fx load_model(uint32_t pattern, uint64_t seed) {
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 64, .hidden = 128, .n_layers = 4, .n_heads = 2, .n_kv_heads = 1, .n_ctx = N_CTX,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_F32, .seed = seed,
                         .arch = "gemma3", .head_dim = 32, .window = W, .window_pattern = pattern};
    fkv_error err = {0};
    if (genmodel_write(&p, path, &err)) fail_msg("%s", err.msg);
    model_fx f = {0};
    if (!(f.m = fkv_model_load(path, &err))) fail_msg("%s", err.msg);
    remove(path);
    f.n_vocab = fkv_model_get_info(f.m).n_vocab;
    fkv_engine_params sp;
    fkv_engine_default_params(&sp, NULL);
    sp.ctx.n_ctx = N_CTX;
    sp.prefix_cache = false;
    if (!(f.cold = fkv_seq_new(f.m, &sp, &err))) fail_msg("%s", err.msg);
    return f;
}

static void free_model(model_fx *f) {
    fkv_seq_free(f->cold);
    fkv_model_free(f->m);
}

static fkv_engine_params engine_params(bool swa_full, uint32_t grid) {
    fkv_engine_params p;
    fkv_engine_default_params(&p, NULL);
    p.ctx.n_ctx = N_CTX;
    p.ctx.prefill_rows = 32;
    p.cache_min = 1;
    p.kv_block = B;
    p.kv_mem = (size_t)64 << 20;
    p.swa_full = swa_full;
    p.swa_grid = grid;
    return p;
}

static fkv_engine *engine_of(const model_fx *f, const fkv_engine_params *p) {
    fkv_error err = {0};
    fkv_engine *e = fkv_engine_new(f->m, p, &err);
    if (!e) fail_msg("%s", err.msg);
    return e;
}

static fkv_engine *new_engine(const model_fx *f, bool swa_full, uint32_t grid) {
    const fkv_engine_params p = engine_params(swa_full, grid);
    return engine_of(f, &p);
}

static void fill(const model_fx *f, int32_t *ids, uint32_t n, uint64_t seed) {
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(3 + (seed >> 33) % (f->n_vocab - 3));
    }
}

/* prompt[0..n), then reply[0..n_reply) fed one decode step each. */
static run engine_run(const model_fx *f, fkv_engine *e, const int32_t *prompt, uint32_t n, const int32_t *reply,
                      uint32_t n_reply) {
    fkv_error err = {0};
    float *logits = malloc(sizeof(float) * f->n_vocab);
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    run r = {0};
    fkv_eseq *s = fkv_engine_start(e, NULL, prompt, n, NULL, &err);
    if (!s) fail_msg("start: %s", err.msg);
    r.reuse = fkv_eseq_reuse(s);
    int rc;
    while ((rc = fkv_engine_prefill(e, s, logits, &err)) == 0) {}
    if (rc < 0) fail_msg("prefill: %s", err.msg);
    r.kv_prompt = fkv_engine_kv_digest(e, s, n);
    XXH3_64bits_update(st, logits, sizeof(float) * f->n_vocab);
    for (uint32_t i = 0; i < n_reply; i++) {
        if (fkv_engine_decode(e, &s, &reply[i], 1, logits, NULL, &err)) fail_msg("decode: %s", err.msg);
        XXH3_64bits_update(st, logits, sizeof(float) * f->n_vocab);
    }
    r.kv_end = fkv_engine_kv_digest(e, s, n + n_reply);
    r.logits = XXH3_64bits_digest(st);
    fkv_engine_finish(e, s);
    XXH3_freeState(st);
    free(logits);
    return r;
}

static run cold_run(const model_fx *f, const int32_t *prompt, uint32_t n, const int32_t *reply, uint32_t n_reply) {
    fkv_error err = {0};
    float *logits = malloc(sizeof(float) * f->n_vocab);
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    run r = {0};
    if (fkv_seq_prefill(f->cold, prompt, n, logits, NULL, &err)) fail_msg("%s", err.msg);
    r.kv_prompt = fkv_seq_kv_digest(f->cold, n);
    XXH3_64bits_update(st, logits, sizeof(float) * f->n_vocab);
    for (uint32_t i = 0; i < n_reply; i++) {
        if (fkv_seq_decode(f->cold, reply[i], logits, &err)) fail_msg("%s", err.msg);
        XXH3_64bits_update(st, logits, sizeof(float) * f->n_vocab);
    }
    r.kv_end = fkv_seq_kv_digest(f->cold, n + n_reply);
    r.logits = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    free(logits);
    return r;
}

static void expect_same(const run *got, const run *cold, const char *what, uint32_t k) {
    if (got->kv_prompt != cold->kv_prompt || got->kv_end != cold->kv_end || got->logits != cold->logits)
        fail_msg("%s, common prefix %u (reused %u): kv %016llx/%016llx logits %016llx; cold %016llx/%016llx %016llx",
                 what, k, got->reuse.reused, (unsigned long long)got->kv_prompt, (unsigned long long)got->kv_end,
                 (unsigned long long)got->logits, (unsigned long long)cold->kv_prompt,
                 (unsigned long long)cold->kv_end, (unsigned long long)cold->logits);
}

/* ---- the boundary matrix ---- */

#define LA 150     /* the first prompt */
#define LR 200     /* its reply, five windows long */
#define LT (LA + LR)
#define SUFFIX 12

/* After prompt A and its reply, a prompt agreeing with them for exactly k ids then going on with others: resumed
 * == cold; where k is a kept point or within a block below one, all of it is reused; elsewhere at least up to the
 * nearest kept point below it. */
static void boundary_matrix(uint32_t pattern) {
    model_fx f = load_model(pattern, 41 + pattern);
    int32_t base[LT], suffix[SUFFIX], prompt[LT + SUFFIX];
    fill(&f, base, LT, 7);
    fill(&f, suffix, SUFFIX, 99);
    const uint32_t kept[] = {LA, GRID, LT};
    uint32_t ks[96], n_ks = 0;
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) { /* kept points, their slack, window and grid edges */
        const int q = (int)kept[i];
        const int offs[] = {0, -1, 1, -B, -B - 1, -W, -W - 1, -W + 1, W, W - 1, W + 1, -2 * W};
        for (size_t o = 0; o < sizeof offs / sizeof *offs; o++)
            if (q + offs[o] >= 1 && q + offs[o] <= LT) ks[n_ks++] = (uint32_t)(q + offs[o]);
    }
    for (uint32_t b = B; b < LT; b += 3 * B) ks[n_ks++] = b + 1; /* block edges */
    const uint32_t in_reply[] = {LA + 37, LA + 101, LA + 163}; /* a reply re-tokenized apart from the generated ids */
    for (size_t i = 0; i < 3; i++) ks[n_ks++] = in_reply[i];
    bool fell_back = false;
    for (int full = 0; full < 2; full++)
        for (uint32_t c = 0; c < n_ks; c++) {
            const uint32_t k = ks[c];
            fkv_engine *e = new_engine(&f, full, GRID);
            run first = engine_run(&f, e, base, LA, base + LA, LR);
            run cold = cold_run(&f, base, LA, base + LA, LR);
            expect_same(&first, &cold, "the first turn", 0);
            /* the next prompt: base[0..k) then other ids (k = LT: the whole turn, then more) */
            memcpy(prompt, base, sizeof(int32_t) * k);
            memcpy(prompt + k, suffix, sizeof suffix);
            if (k < LT && prompt[k] == base[k]) prompt[k] = base[k] == 3 ? 4 : 3;
            const uint32_t n = k + SUFFIX;
            run got = engine_run(&f, e, prompt, n, suffix, 4);
            cold = cold_run(&f, prompt, n, suffix, 4);
            char what[64];
            snprintf(what, sizeof what, "pattern %u%s", pattern, full ? ", --swa-full" : "");
            expect_same(&got, &cold, what, k);
            assert_int_equal(got.reuse.agreed, k);
            assert_int_equal(got.reuse.capped, k);
            uint32_t below = 0; /* the nearest kept point at or below k, and whether k is within a block under one */
            bool at_kept = false;
            for (size_t i = 0; i < sizeof kept / sizeof *kept; i++) {
                if (kept[i] <= k && kept[i] > below) below = kept[i];
                if (k <= kept[i] && k + B >= kept[i]) at_kept = true;
            }
            if (full || at_kept) assert_int_equal(got.reuse.held, k);
            assert_true(got.reuse.held >= below && got.reuse.held <= k);
            assert_int_equal(got.reuse.reused, got.reuse.held);
            fell_back |= got.reuse.held < k;
            fkv_engine_stats st = fkv_engine_get_stats(e);
            if (full) assert_int_equal(st.window_blocks_in_use, 0);
            fkv_engine_free(e);
        }
    assert_true(fell_back); /* some window rows were given back, and a resume went below them */
    free_model(&f);
}

static void test_resumes_on_held_window_rows_only_and_equal_cold(void **state) {
    (void)state;
    boundary_matrix(2);
}

static void test_every_layer_a_window_layer(void **state) {
    (void)state;
    boundary_matrix(0);
}

/* ---- a long conversation ---- */

#define TURNS 20
#define USER 20
#define REPLY 30

/* 20 turns, each prompt the last one, its reply and a new message, growing past 4 windows: each resumes all of the
 * last prompt and reply; the window layers hold what the policy says (each kept point at most (B + W + 30) / B + 2
 * blocks: the last prompt's and reply's ends and the grid's points), far less than every row; --swa-full answers
 * the same. */
static void test_a_long_conversation_resumes_whole_turns_in_bounded_window_memory(void **state) {
    (void)state;
    model_fx f = load_model(2, 5);
    fkv_engine *e = new_engine(&f, false, 0), *full = new_engine(&f, true, 0);
    const uint32_t grid = (8 * W + B - 1) / B * B, per_point = (B + W + 30) / B + 2;
    int32_t *conv = malloc(sizeof(int32_t) * TURNS * (USER + REPLY));
    uint32_t n = 0, last_prompt = 0;
    print_message("turn prompt agreed reused why-not-more window-blocks bound full-copy\n");
    for (int t = 0; t < TURNS; t++) {
        fill(&f, conv + n, USER, 1000 + (uint64_t)t);
        n += USER;
        int32_t reply[REPLY];
        fill(&f, reply, REPLY, 2000 + (uint64_t)t);
        run got = engine_run(&f, e, conv, n, reply, REPLY);
        run same = engine_run(&f, full, conv, n, reply, REPLY);
        run cold = cold_run(&f, conv, n, reply, REPLY);
        expect_same(&got, &cold, "turn", got.reuse.agreed);
        expect_same(&same, &cold, "turn, --swa-full", same.reuse.agreed);
        assert_true(got.reuse.reused * 10 >= last_prompt * 9);
        assert_int_equal(got.reuse.reused, got.reuse.capped);
        memcpy(conv + n, reply, sizeof reply);
        n += REPLY;
        const fkv_engine_stats st = fkv_engine_get_stats(e);
        const uint32_t bound = (n / grid + 2) * per_point, full_copy = (n + B - 1) / B;
        print_message("%4d %6u %6u %6u %-14s %6u %5u %9u\n", t, n - REPLY, got.reuse.agreed, got.reuse.reused,
                      got.reuse.reused == got.reuse.agreed ? "-"
                      : got.reuse.capped < got.reuse.agreed ? "last-token"
                                                            : "window-rows",
                      st.window_blocks_in_use, bound, full_copy);
        assert_true(st.window_blocks_in_use <= bound);
        last_prompt = n - REPLY;
    }
    assert_true(n > 4 * W);
    const fkv_engine_stats st = fkv_engine_get_stats(e), sf = fkv_engine_get_stats(full);
    print_message("window layers: %zu bytes held, --swa-full %zu (its blocks hold every layer: %u x %zu bytes)\n",
                  st.window_blocks_in_use * st.window_block_bytes, (size_t)sf.blocks_in_use * sf.block_bytes / 2,
                  sf.blocks_in_use, sf.block_bytes);
    assert_true(st.window_blocks_dropped > 0);
    free(conv);
    fkv_engine_free(e);
    fkv_engine_free(full);
    free_model(&f);
}

/* Many conversations in a budget that holds a few: evictions take kept points and window rows with them; every
 * answer stays the cold one. */
static void test_evictions_under_a_small_budget_stay_exact(void **state) {
    (void)state;
    model_fx f = load_model(2, 9);
    fkv_engine_params p = engine_params(false, GRID);
    fkv_engine *probe = engine_of(&f, &p);
    const fkv_engine_stats s0 = fkv_engine_get_stats(probe);
    fkv_engine_free(probe);
    p.kv_mem = 24 * (s0.block_bytes + s0.window_block_bytes); /* about 24 blocks of every layer */
    fkv_engine *e = engine_of(&f, &p);
    int32_t conv[4][300];
    for (int c = 0; c < 4; c++) fill(&f, conv[c], 300, 500 + (uint64_t)c);
    for (int round = 0; round < 3; round++)
        for (int c = 0; c < 4; c++) {
            const uint32_t n = 120 + 60 * (uint32_t)round;
            run got = engine_run(&f, e, conv[c], n, conv[c] + n, 20);
            run cold = cold_run(&f, conv[c], n, conv[c] + n, 20);
            expect_same(&got, &cold, "a conversation under eviction", got.reuse.agreed);
        }
    assert_true(fkv_engine_get_stats(e).evictions > 0);
    fkv_engine_free(e);
    free_model(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resumes_on_held_window_rows_only_and_equal_cold),
        cmocka_unit_test(test_every_layer_a_window_layer),
        cmocka_unit_test(test_a_long_conversation_resumes_whole_turns_in_bounded_window_memory),
        cmocka_unit_test(test_evictions_under_a_small_budget_stay_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
