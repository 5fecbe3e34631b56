/* Failure injection, SQLite's way: through model load, engine start, a prefill (cold and resumed), a decode step
 * and a generation, the k-th allocation flatkv's code makes is made to fail, for every k from 1 to the count a clean
 * run makes. Each run must end in a clean error — -1 or NULL with err.code FKV_E_NOMEM and a sentence — or, where
 * the failed allocation was one the code can do without, in success with the clean run's bytes; and the next
 * operation, with allocations working again, must give the clean run's digests (KV rows and logits). Run under the
 * sanitizer build, LeakSanitizer checks that no error path leaks.
 *
 * Both of faultalloc.h's modes run: FA_ONCE (only the k-th fails: the code recovers from one failure) and FA_FROM
 * (the k-th and all later fail: the error path needs no memory). Every k is run, so every allocation site each
 * phase reaches is failed at least once; the counts are printed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultalloc.h"
#include "flatkv.h"
#include "testutil.h"

#define N_PROMPT 80 /* three chunks of the 32-row grid */
#define N_GEN 8

typedef struct {
    fkv_model *m;
    uint32_t n_vocab;
    int32_t prompt[N_PROMPT];
    /* the clean run's bytes */
    uint64_t kv_prompt, kv_step, logits_prompt, logits_step, gen_digest;
    int32_t gen[N_GEN];
    uint32_t n_gen;
    float *logits;
} fixture;

static fixture fx;

static uint64_t logits_digest(const float *l, uint32_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the bytes: enough to tell two rows apart */
    const uint8_t *b = (const uint8_t *)l;
    for (size_t i = 0; i < (size_t)n * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static fkv_engine *clean_engine(void) {
    fkv_engine_params ep;
    fkv_error err = {0};
    assert_int_equal(fkv_engine_default_params(&ep, &err), 0);
    ep.ctx.n_ctx = 256;
    ep.ctx.prefill_rows = 32;
    ep.cache_min = 1;
    ep.kv_block = 32;
    ep.kv_mem = (size_t)4 << 20;
    fkv_engine *e = fkv_engine_new(fx.m, &ep, &err);
    if (!e) fail_msg("%s", err.msg);
    return e;
}

static fkv_sampler *greedy(void) {
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    fkv_sampler *s = fkv_sampler_new(&sp, (int32_t)fx.n_vocab);
    assert_non_null(s);
    return s;
}

static int setup(void **state) {
    (void)state;
    fkv_error err = {0};
    if (!(fx.m = fkv_model_load(tu_data("models/stories260K.gguf"), &err))) return -1;
    fx.n_vocab = fkv_model_get_info(fx.m).n_vocab;
    fx.logits = malloc(sizeof(float) * fx.n_vocab);
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun "
                       "with her friends, and every day she ran to the park to see the big tree and the birds";
    int n = fkv_tokenize(fx.m, text, strlen(text), true, false, fx.prompt, N_PROMPT, &err);
    if (n < N_PROMPT) { /* fill up to N_PROMPT with the text again */
        for (int i = n < 0 ? 0 : n; i < N_PROMPT; i++) fx.prompt[i] = fx.prompt[i % (n > 1 ? n : 1)];
    }
    /* the clean run */
    fkv_engine *e = clean_engine();
    fkv_seq *s = fkv_seq_open(e, NULL, &err);
    if (fkv_seq_prefill(s, fx.prompt, N_PROMPT, fx.logits, NULL, &err)) return -1;
    fx.kv_prompt = fkv_seq_kv_digest(s, N_PROMPT);
    fx.logits_prompt = logits_digest(fx.logits, fx.n_vocab);
    if (fkv_seq_decode(s, 42, fx.logits, &err)) return -1;
    fx.kv_step = fkv_seq_kv_digest(s, N_PROMPT + 1);
    fx.logits_step = logits_digest(fx.logits, fx.n_vocab);
    if (fkv_seq_prefill(s, fx.prompt, N_PROMPT, fx.logits, NULL, &err)) return -1;
    fkv_sampler *smp = greedy();
    fkv_gen_params gp = {.max_tokens = N_GEN, .sampler = smp};
    fkv_gen_result res;
    if (fkv_seq_generate(s, fx.logits, &gp, fx.gen, &res, &err)) return -1;
    fx.n_gen = res.n_tokens;
    fx.gen_digest = res.logits_digest;
    fkv_sampler_free(smp);
    fkv_seq_free(s);
    fkv_engine_free(e);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    free(fx.logits);
    fkv_model_free(fx.m);
    return 0;
}

/* One phase under injection: set up (not counted), run (counted; 0 or -1 with err), check the state after and tear
 * down (not counted). */
typedef struct {
    const char *name;
    void *(*set_up)(void);
    int (*run)(void *state, fkv_error *err);
    void (*check_after)(void *state, int rc); /* the next operation gives the clean bytes */
    void (*tear_down)(void *state);
} phase;

static void run_phase(const phase *p) {
    fkv_error err = {0};
    void *st = p->set_up ? p->set_up() : NULL;
    fa_arm(FA_ONCE, 0);
    int rc = p->run(st, &err);
    const uint64_t n = fa_disarm();
    if (rc) fail_msg("%s: the clean run failed: %s", p->name, err.msg);
    p->check_after(st, rc);
    if (p->tear_down) p->tear_down(st);
    uint64_t survived[2] = {0, 0};
    for (int mode = FA_ONCE; mode <= FA_FROM; mode++)
        for (uint64_t k = 1; k <= n; k++) {
            err = (fkv_error){0};
            st = p->set_up ? p->set_up() : NULL;
            fa_arm((fa_mode)mode, k);
            rc = p->run(st, &err);
            fa_disarm();
            if (rc && err.code != FKV_E_NOMEM)
                fail_msg("%s: allocation %llu of %llu failed (%s), and the error has code %d, not NOMEM: %s", p->name,
                         (unsigned long long)k, (unsigned long long)n, mode == FA_ONCE ? "once" : "and all later",
                         (int)err.code, err.msg);
            if (rc && strlen(err.msg) < 10)
                fail_msg("%s: allocation %llu failed without a sentence ('%s')", p->name, (unsigned long long)k,
                         err.msg);
            if (!rc) survived[mode - FA_ONCE]++;
            p->check_after(st, rc);
            if (p->tear_down) p->tear_down(st);
        }
    print_message("  %-22s %3llu allocations; each failed once and from there on: %llu and %llu runs did without "
                  "it, the rest ended in FKV_E_NOMEM\n",
                  p->name, (unsigned long long)n, (unsigned long long)survived[0], (unsigned long long)survived[1]);
}

/* ---- model load ---- */

static fkv_model *loaded;

static int run_load(void *st, fkv_error *err) {
    (void)st;
    loaded = fkv_model_load(tu_data("models/stories260K.gguf"), err);
    return loaded ? 0 : -1;
}

/* What the model computes: a prefill's KV and logits digests on a clean engine. */
static void expect_clean_prefill(fkv_engine *e) {
    fkv_error err = {0};
    fkv_seq *s = fkv_seq_open(e, NULL, &err);
    assert_non_null(s);
    if (fkv_seq_prefill(s, fx.prompt, N_PROMPT, fx.logits, NULL, &err)) fail_msg("the next prefill failed: %s", err.msg);
    assert_int_equal(fkv_seq_kv_digest(s, N_PROMPT), fx.kv_prompt);
    assert_int_equal(logits_digest(fx.logits, fx.n_vocab), fx.logits_prompt);
    fkv_seq_free(s);
}

static void check_load(void *st, int rc) {
    (void)st;
    fkv_error err = {0};
    if (rc) { /* the next load succeeds */
        assert_null(loaded);
        assert_non_null(loaded = fkv_model_load(tu_data("models/stories260K.gguf"), &err));
    }
    const fkv_model *keep = fx.m;
    fx.m = loaded;
    fkv_engine *e = clean_engine();
    expect_clean_prefill(e);
    fkv_engine_free(e);
    fx.m = (fkv_model *)keep;
    fkv_model_free(loaded);
    loaded = NULL;
}

static void test_every_failed_allocation_of_a_model_load_ends_in_a_clean_error(void **state) {
    (void)state;
    run_phase(&(phase){.name = "model load", .run = run_load, .check_after = check_load});
}

/* ---- engine start ---- */

static fkv_engine *started;

static int run_engine(void *st, fkv_error *err) {
    (void)st;
    fkv_engine_params ep;
    if (fkv_engine_default_params(&ep, err)) return -1;
    ep.ctx.n_ctx = 256;
    ep.ctx.prefill_rows = 32;
    ep.cache_min = 1;
    ep.kv_block = 32;
    ep.kv_mem = (size_t)4 << 20;
    started = fkv_engine_new(fx.m, &ep, err);
    return started ? 0 : -1;
}

static void check_engine(void *st, int rc) {
    (void)st;
    if (rc) {
        assert_null(started);
        started = clean_engine();
    }
    expect_clean_prefill(started);
    fkv_engine_free(started);
    started = NULL;
}

static void test_every_failed_allocation_of_an_engine_start_ends_in_a_clean_error(void **state) {
    (void)state;
    run_phase(&(phase){.name = "engine start", .run = run_engine, .check_after = check_engine});
}

/* ---- a prefill, a resumed prefill, a decode step, a generation: on an engine and sequence made clean ---- */

typedef struct {
    fkv_engine *e;
    fkv_seq *s;
} seq_state;

static void *new_seq_state(void) {
    seq_state *st = calloc(1, sizeof *st);
    assert_non_null(st);
    fkv_error err = {0};
    st->e = clean_engine();
    assert_non_null(st->s = fkv_seq_open(st->e, NULL, &err));
    return st;
}

static void free_seq_state(void *p) {
    seq_state *st = p;
    fkv_seq_free(st->s);
    fkv_engine_free(st->e);
    free(st);
}

static int run_prefill(void *p, fkv_error *err) {
    seq_state *st = p;
    return fkv_seq_prefill(st->s, fx.prompt, N_PROMPT, fx.logits, NULL, err);
}

/* After the armed prefill (failed or not), a clean one on the same engine gives the cold bytes. */
static void check_prefill(void *p, int rc) {
    seq_state *st = p;
    fkv_error err = {0};
    if (rc) assert_int_equal(fkv_seq_n_pos(st->s), 0); /* on failure the sequence holds nothing */
    if (fkv_seq_prefill(st->s, fx.prompt, N_PROMPT, fx.logits, NULL, &err)) fail_msg("the next prefill: %s", err.msg);
    assert_int_equal(fkv_seq_kv_digest(st->s, N_PROMPT), fx.kv_prompt);
    assert_int_equal(logits_digest(fx.logits, fx.n_vocab), fx.logits_prompt);
}

static void test_every_failed_allocation_of_a_cold_prefill_ends_in_a_clean_error(void **state) {
    (void)state;
    run_phase(&(phase){.name = "cold prefill", .set_up = new_seq_state, .run = run_prefill,
                       .check_after = check_prefill, .tear_down = free_seq_state});
}

/* The engine caches the prompt's first 50 rows (released, matchable): the prefill resumes from them. */
static void *new_warm_state(void) {
    seq_state *st = new_seq_state();
    fkv_error err = {0};
    if (fkv_seq_prefill(st->s, fx.prompt, 50, fx.logits, NULL, &err)) fail_msg("%s", err.msg);
    fkv_seq_clear(st->s);
    return st;
}

static void test_every_failed_allocation_of_a_resumed_prefill_ends_in_a_clean_error(void **state) {
    (void)state;
    run_phase(&(phase){.name = "resumed prefill", .set_up = new_warm_state, .run = run_prefill,
                       .check_after = check_prefill, .tear_down = free_seq_state});
}

static void *new_prefilled_state(void) {
    seq_state *st = new_seq_state();
    fkv_error err = {0};
    if (fkv_seq_prefill(st->s, fx.prompt, N_PROMPT, fx.logits, NULL, &err)) fail_msg("%s", err.msg);
    return st;
}

static int run_decode(void *p, fkv_error *err) {
    seq_state *st = p;
    return fkv_seq_decode(st->s, 42, fx.logits, err);
}

/* A failed step fed nothing: the same step again gives the clean bytes. */
static void check_decode(void *p, int rc) {
    seq_state *st = p;
    fkv_error err = {0};
    if (rc) {
        assert_int_equal(fkv_seq_n_pos(st->s), N_PROMPT);
        if (fkv_seq_decode(st->s, 42, fx.logits, &err)) fail_msg("the next decode step: %s", err.msg);
    }
    assert_int_equal(fkv_seq_kv_digest(st->s, N_PROMPT + 1), fx.kv_step);
    assert_int_equal(logits_digest(fx.logits, fx.n_vocab), fx.logits_step);
}

static void test_every_failed_allocation_of_a_decode_step_ends_in_a_clean_error(void **state) {
    (void)state;
    run_phase(&(phase){.name = "decode step", .set_up = new_prefilled_state, .run = run_decode,
                       .check_after = check_decode, .tear_down = free_seq_state});
}

static int run_generate(void *p, fkv_error *err) {
    seq_state *st = p;
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    fkv_sampler *smp = fkv_sampler_new(&sp, (int32_t)fx.n_vocab); /* armed too: a generation needs one */
    if (!smp) {
        err->code = FKV_E_NOMEM; /* the sampler's contract: NULL means out of memory */
        snprintf(err->msg, sizeof err->msg, "out of memory for a sampler");
        return -1;
    }
    int32_t out[N_GEN];
    fkv_gen_params gp = {.max_tokens = N_GEN, .sampler = smp};
    fkv_gen_result res;
    int rc = fkv_seq_generate(st->s, fx.logits, &gp, out, &res, err);
    fkv_sampler_free(smp);
    if (!rc && (res.n_tokens != fx.n_gen || res.logits_digest != fx.gen_digest || memcmp(out, fx.gen, sizeof out)))
        fail_msg("a generation that did without a failed allocation gave other tokens");
    return rc;
}

/* After a failed generation, the prompt again and a clean generation give the clean tokens. */
static void check_generate(void *p, int rc) {
    seq_state *st = p;
    if (!rc) return;
    fkv_error err = {0};
    if (fkv_seq_prefill(st->s, fx.prompt, N_PROMPT, fx.logits, NULL, &err)) fail_msg("the next prefill: %s", err.msg);
    assert_int_equal(run_generate(st, &err), 0);
}

static void test_every_failed_allocation_of_a_generation_ends_in_a_clean_error(void **state) {
    (void)state;
    run_phase(&(phase){.name = "generation", .set_up = new_prefilled_state, .run = run_generate,
                       .check_after = check_generate, .tear_down = free_seq_state});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_failed_allocation_of_a_model_load_ends_in_a_clean_error),
        cmocka_unit_test(test_every_failed_allocation_of_an_engine_start_ends_in_a_clean_error),
        cmocka_unit_test(test_every_failed_allocation_of_a_cold_prefill_ends_in_a_clean_error),
        cmocka_unit_test(test_every_failed_allocation_of_a_resumed_prefill_ends_in_a_clean_error),
        cmocka_unit_test(test_every_failed_allocation_of_a_decode_step_ends_in_a_clean_error),
        cmocka_unit_test(test_every_failed_allocation_of_a_generation_ends_in_a_clean_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
