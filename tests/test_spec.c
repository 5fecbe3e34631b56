/* Speculative decoding never changes an answer: every generation with guesses (lookup, a draft model that guesses well,
 * one that guesses badly, a draft engine that fails) gives the tokens, logits digest and KV digest of the same
 * generation without them — greedy and seeded, with penalties, a grammar, every stop (max_tokens, the context's end,
 * end of generation), alone and batched with other conversations, with f16 and quantized K/V rows, and on a model with
 * recurrent layers (its state too), as the target and as the draft; a prediction (OpenAI's Predicted Outputs) right,
 * wrong or cut, beside every mode. And the lookup and prediction drafters find what they should. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/spec.h"
#include "flatkv.h"
#include "gguf/gguf.h"
#include "testutil.h"

#define MAX_GEN 400

typedef struct {
    fkv_model *m, *bad; /* stories260K; a random-weight model of its vocabulary: a draft that guesses badly */
    fkv_model *hybrid;  /* a random-weight qwen35 of that vocabulary: gated DeltaNet layers, a state to take back */
    const fkv_model *target; /* what generate() runs: m, bad (heads of 32, for quantized K/V rows), or hybrid */
    fkv_engine *good_draft, *bad_draft, *tiny_draft; /* tiny: too little KV memory to hold a prompt */
    fkv_engine *hybrid_draft;
} fixture;

typedef struct {
    uint32_t n;
    int32_t ids[MAX_GEN];
    uint64_t logits, kv, state; /* state: the recurrent state after it (0 without recurrent layers) */
    uint32_t n_pos; /* positions the sequence holds after it */
    uint32_t drafted, accepted;
    uint32_t predicted, predicted_accepted;
} answer;

static fkv_kv_type kv_type = FKV_KV_F16; /* of the engines generate() makes */

static fkv_engine *engine(const fkv_model *m, uint32_t n_ctx, size_t kv_mem) {
    fkv_engine_params ep;
    fkv_engine_default_params(&ep, NULL);
    ep.ctx.kv_type = kv_type;
    ep.ctx.n_ctx = n_ctx;
    ep.kv_mem = kv_mem;
    ep.kv_block = 32;
    ep.ctx.prefill_rows = 32;
    ep.state_grid = 32; /* a hybrid's states kept every 32 positions: inside verifications too (their rows' slots) */
    fkv_error err = {0};
    fkv_engine *e = fkv_engine_new(m, &ep, &err);
    if (!e) fail_msg("engine: %s", err.msg);
    return e;
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    fkv_error err = {0};
    const char *bad = tu_small_model(GGML_TYPE_Q8_0, 29);
    if (!bad || !(f->m = fkv_model_load(tu_data("models/stories260K.gguf"), &err)) ||
        !(f->bad = fkv_model_load(bad, &err)))
        return -1;
    remove(bad);
    const char *hybrid = tu_arch_model("qwen35", GGML_TYPE_Q8_0, 31);
    if (!hybrid || !(f->hybrid = fkv_model_load(hybrid, &err))) return -1;
    remove(hybrid);
    if (!fkv_model_vocab_equal(f->m, f->bad) || !fkv_model_vocab_equal(f->m, f->hybrid)) return -1;
    f->good_draft = engine(f->m, 512, 0);
    f->bad_draft = engine(f->bad, 512, 0);
    f->tiny_draft = engine(f->m, 512, 1); /* one block */
    f->hybrid_draft = engine(f->hybrid, 512, 0);
    f->target = f->m;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    fkv_engine_free(f->good_draft);
    fkv_engine_free(f->bad_draft);
    fkv_engine_free(f->tiny_draft);
    fkv_engine_free(f->hybrid_draft);
    fkv_model_free(f->m);
    fkv_model_free(f->bad);
    fkv_model_free(f->hybrid);
    free(f);
    return 0;
}

static void encode(const fkv_model *m, const char *text, int32_t *ids, uint32_t *n) {
    fkv_error err = {0};
    int k = fkv_tokenize(m, text, strlen(text), true, false, ids, 256, &err);
    assert_true(k > 0 && k <= 256);
    *n = (uint32_t)k;
}

/* One generation of max_tokens after prompt on a fresh engine of n_ctx positions, of f->target. */
static void generate(const fixture *f, const int32_t *prompt, uint32_t n_prompt, const fkv_sampler_params *sp,
                     const fkv_spec_params *spec, const fkv_grammar *g, uint32_t max_tokens, uint32_t n_ctx,
                     answer *a) {
    fkv_engine *e = engine(f->target, n_ctx, 0);
    fkv_error err = {0};
    fkv_seq *s = fkv_seq_open(e, NULL, &err);
    fkv_sampler *smp = fkv_sampler_new(sp, (int32_t)fkv_model_get_info(f->m).n_vocab);
    float *logits = malloc(sizeof(float) * fkv_model_get_info(f->m).n_vocab);
    assert_non_null(s);
    assert_int_equal(fkv_seq_prefill(s, prompt, n_prompt, logits, NULL, &err), 0);
    fkv_gen_params gp = {.max_tokens = max_tokens, .sampler = smp, .grammar = g, .spec = *spec};
    fkv_gen_result res;
    memset(a, 0, sizeof *a);
    if (fkv_seq_generate(s, logits, &gp, a->ids, &res, &err)) fail_msg("generate: %s", err.msg);
    a->n = res.n_tokens, a->logits = res.logits_digest, a->drafted = res.drafted, a->accepted = res.accepted;
    a->predicted = res.predicted, a->predicted_accepted = res.predicted_accepted;
    a->kv = fkv_seq_kv_digest(s, fkv_seq_n_pos(s));
    a->state = fkv_seq_state_digest(s);
    a->n_pos = fkv_seq_n_pos(s);
    free(logits);
    fkv_sampler_free(smp);
    fkv_seq_free(s);
    fkv_engine_free(e);
}

static void assert_same(const answer *want, const answer *got, const char *what) {
    if (want->n != got->n || memcmp(want->ids, got->ids, sizeof(int32_t) * want->n) || want->logits != got->logits ||
        want->kv != got->kv || want->state != got->state || want->n_pos != got->n_pos)
        fail_msg("%s: %u tokens, logits %016llx, kv %016llx, state %016llx; without guesses %u, %016llx, %016llx, "
                 "%016llx", what, got->n, (unsigned long long)got->logits, (unsigned long long)got->kv,
                 (unsigned long long)got->state, want->n, (unsigned long long)want->logits,
                 (unsigned long long)want->kv, (unsigned long long)want->state);
}

/* The speculation settings every case runs under, beside off. */
static fkv_spec_params spec_case(const fixture *f, int i, const char **name) {
    static const char *const names[] = {"lookup", "lookup draft_max 1", "lookup draft_max 16", "draft (good)",
                                        "draft (bad)", "draft (fails)"};
    const fkv_spec_params cases[] = {
        {.mode = FKV_SPEC_LOOKUP},
        {.mode = FKV_SPEC_LOOKUP, .draft_max = 1},
        {.mode = FKV_SPEC_LOOKUP, .draft_max = 16, .ngram_max = 2},
        {.mode = FKV_SPEC_DRAFT, .draft = f->good_draft},
        {.mode = FKV_SPEC_DRAFT, .draft = f->bad_draft, .draft_max = 3},
        {.mode = FKV_SPEC_DRAFT, .draft = f->tiny_draft},
    };
    *name = names[i];
    return cases[i];
}
#define N_SPEC_CASES 6

static void same_answers(const fixture *f, const int32_t *prompt, uint32_t n_prompt, const fkv_sampler_params *sp,
                         const fkv_grammar *g, uint32_t max_tokens, uint32_t n_ctx, const char *what) {
    answer off, on;
    const fkv_spec_params none = {0};
    generate(f, prompt, n_prompt, sp, &none, g, max_tokens, n_ctx, &off);
    for (int i = 0; i < N_SPEC_CASES; i++) {
        const char *name;
        const fkv_spec_params spec = spec_case(f, i, &name);
        generate(f, prompt, n_prompt, sp, &spec, g, max_tokens, n_ctx, &on);
        char label[160];
        snprintf(label, sizeof label, "%s, %s", what, name);
        assert_same(&off, &on, label);
        assert_true(on.accepted <= on.drafted);
    }
}

static void test_lookup(void **state) {
    (void)state;
    int32_t out[8];
    const int32_t a[] = {1, 2, 3, 4, 1, 2, 3, 5, 1, 2};
    /* suffix (1, 2, 3): latest earlier occurrence at 4 — followed by 5, 1, 2, 3 (the last from `last` itself) */
    assert_int_equal(spec_lookup(a, 10, 3, 4, 8, out), 4);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[3], 3);
    assert_int_equal(spec_lookup(a, 10, 3, 4, 2, out), 2); /* at most max */
    /* no 2-gram (2, 9) recurs; the 1-gram 9 does not either */
    assert_int_equal(spec_lookup(a, 10, 9, 4, 8, out), 0);
    /* longest first: (4, 1) recurs nowhere but 1 does: a match of one id earns one guess */
    const int32_t b[] = {7, 1, 2, 4};
    assert_int_equal(spec_lookup(b, 4, 1, 2, 8, out), 1);
    assert_int_equal(out[0], 2);
    assert_int_equal(spec_lookup(b, 0, 1, 4, 8, out), 0);
    assert_int_equal(spec_lookup(b, 1, 7, 4, 8, out), 1); /* h = 7 7 */
    assert_int_equal(out[0], 7);
    /* 2^(m-1) guesses for a match of m ids, 16 from 5 on, within what follows the occurrence and max */
    const int32_t c[] = {5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 5, 6, 7};
    const uint32_t nc = sizeof c / sizeof *c;
    int32_t many[16];
    assert_int_equal(spec_lookup(c, nc, 8, 8, 16, many), 8); /* (5 6 7 8) at 9..12, latest: 8 guesses */
    assert_int_equal(many[0], 10);
    assert_int_equal(many[7], 17);
    assert_int_equal(spec_lookup(c, nc, 8, 3, 16, many), 4); /* ngram_max 3: (6 7 8), 4 guesses */
    assert_int_equal(spec_lookup(c, nc, 8, 2, 16, many), 2);
    assert_int_equal(spec_lookup(c, 9, 5, 8, 16, many), 1); /* h = 5 .. 4 5: one id */
    assert_int_equal(many[0], 6);
    const int32_t d[] = {1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4};
    assert_int_equal(spec_lookup(d, sizeof d / sizeof *d, 5, 8, 16, many), 7); /* 16, but 7 ids follow: to last */
    assert_int_equal(many[0], 6);
    assert_int_equal(many[6], 5);
}

/* The prediction drafter guesses what follows, in the prediction, the output's last ids: at the start its first id at
 * the prediction's start, the longest match first, and of equally long ones the first where the output was expected to
 * go on — so a repeated id sends it forward, not back. */
static void test_prediction_matches_the_output_where_it_goes_on(void **state) {
    (void)state;
    const int32_t pred[] = {10, 11, 12, 13, 11, 12, 14};
    const uint32_t np = sizeof pred / sizeof *pred;
    int32_t g[16];
    uint32_t at = 0;
    const int32_t start[] = {10};
    assert_int_equal(spec_predict(pred, np, start, 1, 8, 16, &at, g), 6); /* everything after the first id */
    assert_int_equal(at, 1);
    assert_int_equal(g[0], 11);
    assert_int_equal(g[5], 14);
    at = 0;
    assert_int_equal(spec_predict(pred, np, start, 1, 8, 2, &at, g), 2); /* at most max */
    const int32_t twelve[] = {12};
    at = 0;
    assert_int_equal(spec_predict(pred, np, twelve, 1, 8, 16, &at, g), 4); /* 12 at 2, the first at or after 0 */
    assert_int_equal(g[0], 13);
    assert_int_equal(at, 3);
    at = 4;
    assert_int_equal(spec_predict(pred, np, twelve, 1, 8, 16, &at, g), 1); /* 12 at 5: where the output goes on */
    assert_int_equal(g[0], 14);
    assert_int_equal(at, 6);
    at = 6;
    assert_int_equal(spec_predict(pred, np, twelve, 1, 8, 16, &at, g), 4); /* none at or after 6: the first again */
    assert_int_equal(g[0], 13);
    const int32_t tail[] = {13, 11, 12};
    at = 0;
    assert_int_equal(spec_predict(pred, np, tail, 3, 8, 16, &at, g), 1); /* (13 11 12) at 3..5 beats (11 12) at 1..2 */
    assert_int_equal(g[0], 14);
    at = 0;
    assert_int_equal(spec_predict(pred, np, tail, 3, 1, 16, &at, g), 4); /* ngram_max 1: 12 alone, its first place */
    assert_int_equal(g[0], 13);
    const int32_t gone[] = {7}, last[] = {14};
    at = 2;
    assert_int_equal(spec_predict(pred, np, gone, 1, 8, 16, &at, g), 0); /* not in the prediction */
    assert_int_equal(at, 2);
    assert_int_equal(spec_predict(pred, np, last, 1, 8, 16, &at, g), 0); /* at its end: nothing follows */
    assert_int_equal(spec_predict(pred, 0, start, 1, 8, 16, &at, g), 0);
}

/* A prediction's guesses change no answer, with any mode beside it: the answer itself as the prediction has every
 * guess kept, and most of the answer's ids guessed; a wrong one (another prompt's answer), or a cut one, has guesses
 * rejected. Both counted apart from the mode's own. */
static void test_a_prediction_changes_no_answer(void **state) {
    fixture *f = *state;
    int32_t prompt[256], other[256];
    uint32_t n, n_other;
    encode(f->m, "Once upon a time", prompt, &n);
    encode(f->m, "The dog ran to the park", other, &n_other);
    const fkv_spec_params none = {0};
    for (int seeded = 0; seeded < 2; seeded++) {
        fkv_sampler_params sp = fkv_sampler_default_params();
        if (seeded) sp.seed = 21;
        else sp.temp = 0;
        answer off, wrong, on;
        generate(f, prompt, n, &sp, &none, NULL, 120, 512, &off);
        generate(f, other, n_other, &sp, &none, NULL, 120, 512, &wrong);
        const fkv_spec_params modes[] = {{0}, {.mode = FKV_SPEC_LOOKUP}, {.mode = FKV_SPEC_DRAFT, .draft = f->bad_draft}};
        for (int m = 0; m < 3; m++) {
            fkv_spec_params p = modes[m];
            p.prediction = off.ids, p.n_prediction = off.n;
            generate(f, prompt, n, &sp, &p, NULL, 120, 512, &on);
            assert_same(&off, &on, "the answer as the prediction");
            assert_true(on.predicted >= off.n / 2);
            assert_int_equal(on.predicted_accepted, on.predicted);
            p.prediction = wrong.ids, p.n_prediction = wrong.n;
            generate(f, prompt, n, &sp, &p, NULL, 120, 512, &on);
            assert_same(&off, &on, "another answer as the prediction");
            assert_true(on.predicted > on.predicted_accepted);
            assert_true(on.drafted >= on.predicted && on.accepted >= on.predicted_accepted);
            p.prediction = off.ids + 5, p.n_prediction = 30; /* its middle: matched once the output reaches it */
            generate(f, prompt, n, &sp, &p, NULL, 120, 512, &on);
            assert_same(&off, &on, "a cut answer as the prediction");
            assert_true(on.predicted_accepted > 0);
        }
        generate(f, prompt, n, &sp, &modes[1], NULL, 120, 512, &on);
        assert_int_equal(on.predicted, 0); /* lookup's guesses are not the prediction's */
    }
}

static void test_greedy_and_seeded(void **state) {
    fixture *f = *state;
    int32_t prompt[256];
    uint32_t n;
    const char *texts[] = {"Once upon a time", "The cat sat on the mat. The cat sat on the mat. The dog sat on the"};
    for (int t = 0; t < 2; t++) {
        encode(f->m, texts[t], prompt, &n);
        fkv_sampler_params sp = fkv_sampler_default_params();
        sp.temp = 0;
        same_answers(f, prompt, n, &sp, NULL, 120, 512, "greedy");
        sp = fkv_sampler_default_params();
        sp.seed = 3 + (uint64_t)t;
        same_answers(f, prompt, n, &sp, NULL, 120, 512, "seeded, default sampler");
        sp.temp = 1.0f, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.seed = 11;
        same_answers(f, prompt, n, &sp, NULL, 120, 512, "seeded, the whole distribution");
        sp.temp = 0.7f, sp.repeat_penalty = 1.3f, sp.frequency_penalty = 0.5f, sp.presence_penalty = 0.4f;
        same_answers(f, prompt, n, &sp, NULL, 120, 512, "seeded, with penalties");
    }
}

/* Guesses kept often enough to matter on stories260K continuing its own story with itself as the draft: every greedy
 * guess of its own is right. */
static void test_guesses_kept(void **state) {
    fixture *f = *state;
    int32_t prompt[256];
    uint32_t n;
    encode(f->m, "Once upon a time", prompt, &n);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    const fkv_spec_params good = {.mode = FKV_SPEC_DRAFT, .draft = f->good_draft};
    answer a;
    generate(f, prompt, n, &sp, &good, NULL, 200, 512, &a);
    assert_true(a.drafted > 100);
    assert_int_equal(a.accepted, a.drafted);
}

static void test_stops(void **state) {
    fixture *f = *state;
    int32_t prompt[256];
    uint32_t n;
    encode(f->m, "Lily and Ben went to the park. Lily and Ben", prompt, &n);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    for (uint32_t max = 1; max <= 4; max++) same_answers(f, prompt, n, &sp, NULL, max, 512, "max_tokens");
    same_answers(f, prompt, n, &sp, NULL, 100, n + 7, "the context's end");
    same_answers(f, prompt, n, &sp, NULL, MAX_GEN, 512, "end of generation");
}

static void test_grammar(void **state) {
    fixture *f = *state;
    int32_t prompt[256];
    uint32_t n;
    encode(f->m, "Once upon a time", prompt, &n);
    const char *gbnf = "root ::= (\" there was a \" [a-z]+ \".\")+\n";
    fkv_error err = {0};
    fkv_grammar *g = fkv_grammar_new(f->m, gbnf, strlen(gbnf), &err);
    assert_non_null(g);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    same_answers(f, prompt, n, &sp, g, 80, 512, "grammar, greedy");
    sp = fkv_sampler_default_params();
    sp.seed = 5;
    same_answers(f, prompt, n, &sp, g, 80, 512, "grammar, seeded");
    fkv_grammar_free(g);
}

/* Three conversations decoded together, each with its own speculation, give what each gives alone without it. */
static void test_batched(void **state) {
    fixture *f = *state;
    const char *texts[] = {"Once upon a time", "Tom had a red ball. Tom had a red ball. Tom had",
                           "The sun was hot and the birds sang"};
    const fkv_spec_params specs[] = {{.mode = FKV_SPEC_LOOKUP},
                                     {.mode = FKV_SPEC_DRAFT, .draft = f->good_draft, .draft_max = 5},
                                     {.mode = FKV_SPEC_DRAFT, .draft = f->bad_draft}};
    enum { N = 3, GEN = 60 };
    int32_t prompt[N][256];
    uint32_t n[N];
    answer alone[N];
    fkv_sampler_params sp = fkv_sampler_default_params();
    for (int i = 0; i < N; i++) {
        encode(f->m, texts[i], prompt[i], &n[i]);
        sp.seed = 40 + (uint64_t)i;
        const fkv_spec_params none = {0};
        generate(f, prompt[i], n[i], &sp, &none, NULL, GEN, 512, &alone[i]);
    }
    fkv_engine *e = engine(f->m, 512, 0);
    const uint32_t n_vocab = fkv_model_get_info(f->m).n_vocab;
    float *logits = malloc(sizeof(float) * n_vocab);
    fkv_eseq *seqs[N];
    fkv_gen *gens[N];
    fkv_sampler *smps[N];
    int32_t next[N], out[N][GEN];
    fkv_error err = {0};
    for (int i = 0; i < N; i++) {
        sp.seed = 40 + (uint64_t)i;
        smps[i] = fkv_sampler_new(&sp, (int32_t)n_vocab);
        fkv_gen_params gp = {.max_tokens = GEN, .sampler = smps[i], .spec = specs[i]};
        gens[i] = fkv_gen_new(f->m, &gp, out[i]);
        assert_non_null(seqs[i] = fkv_engine_start(e, NULL, prompt[i], n[i], NULL, &err));
        int rc;
        while ((rc = fkv_engine_prefill(e, seqs[i], logits, &err)) == 0) {}
        assert_int_equal(rc, 1);
        next[i] = fkv_gen_next(gens[i], logits, prompt[i], (int)n[i], n[i], 512);
    }
    fkv_eseq *live[N];
    fkv_gen *live_gens[N];
    int32_t live_next[N];
    int at[N];
    for (;;) {
        uint32_t k = 0;
        for (int i = 0; i < N; i++)
            if (next[i] >= 0) live[k] = seqs[i], live_gens[k] = gens[i], live_next[k] = next[i], at[k++] = i;
        if (!k) break;
        uint32_t failed;
        if (fkv_engine_step(e, live, live_gens, live_next, k, NULL, &failed, &err)) fail_msg("step: %s", err.msg);
        for (uint32_t j = 0; j < k; j++) next[at[j]] = live_next[j];
    }
    for (int i = 0; i < N; i++) {
        const fkv_gen_result res = fkv_gen_result_get(gens[i]);
        answer a = {.n = res.n_tokens, .logits = res.logits_digest};
        memcpy(a.ids, out[i], sizeof(int32_t) * res.n_tokens);
        fkv_eseq_ids(seqs[i], &a.n_pos);
        a.kv = fkv_engine_kv_digest(e, seqs[i], a.n_pos);
        assert_same(&alone[i], &a, texts[i]);
        fkv_gen_free(gens[i]);
        fkv_sampler_free(smps[i]);
        fkv_engine_finish(e, seqs[i]);
    }
    free(logits);
    fkv_engine_free(e);
}

/* With K/V rows stored as Q8_0 and Q4_0 (on the random-weight model: stories260K's heads of 8 are no whole block). */
static void test_quantized_kv(void **state) {
    fixture *f = *state;
    int32_t prompt[256];
    uint32_t n;
    encode(f->m, "Tom had a red ball. Tom had a red ball. Tom had", prompt, &n);
    const fkv_kv_type types[] = {FKV_KV_Q8_0, FKV_KV_Q4_0};
    f->target = f->bad;
    for (int t = 0; t < 2; t++) {
        kv_type = types[t];
        fkv_sampler_params sp = fkv_sampler_default_params();
        sp.temp = 0;
        same_answers(f, prompt, n, &sp, NULL, 60, 512, t ? "q4_0 K/V, greedy" : "q8_0 K/V, greedy");
        sp = fkv_sampler_default_params();
        sp.seed = 9;
        same_answers(f, prompt, n, &sp, NULL, 60, 512, t ? "q4_0 K/V, seeded" : "q8_0 K/V, seeded");
    }
    kv_type = FKV_KV_F16;
    f->target = f->m;
}

/* A target with recurrent layers: a verification steps its state through every guess, each row into a slot of its
 * own, and a rejected guess's state is never the one kept — tokens, logits, K/V and state equal speculation off's.
 * And such a model as the draft, whose sequence takes guesses back and rewinds. */
static void test_a_hybrid_takes_back_rejected_guesses(void **state) {
    fixture *f = *state;
    f->target = f->hybrid;
    int32_t prompt[256];
    uint32_t n;
    encode(f->m, "Tom had a red ball. Tom had a red ball. Tom had", prompt, &n);
    fkv_sampler_params sp = {.temp = 0, .repeat_penalty = 1.0f};
    same_answers(f, prompt, n, &sp, NULL, 80, 512, "hybrid target, greedy");
    sp = fkv_sampler_default_params();
    sp.seed = 13;
    same_answers(f, prompt, n, &sp, NULL, 80, 512, "hybrid target, seeded");
    const fkv_spec_params bad = {.mode = FKV_SPEC_DRAFT, .draft = f->good_draft}; /* stories guessing a random model */
    answer a;
    generate(f, prompt, n, &sp, &bad, NULL, 80, 512, &a);
    assert_true(a.drafted > a.accepted); /* guesses were taken back */
    f->target = f->m;
    const fkv_spec_params hybrid_draft = {.mode = FKV_SPEC_DRAFT, .draft = f->hybrid_draft};
    answer off, on;
    const fkv_spec_params none = {0};
    generate(f, prompt, n, &sp, &none, NULL, 80, 512, &off);
    generate(f, prompt, n, &sp, &hybrid_draft, NULL, 80, 512, &on);
    assert_same(&off, &on, "hybrid draft");
    assert_true(on.drafted > on.accepted);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_prediction_matches_the_output_where_it_goes_on),
        cmocka_unit_test(test_a_prediction_changes_no_answer),
        cmocka_unit_test(test_greedy_and_seeded),
        cmocka_unit_test(test_guesses_kept),
        cmocka_unit_test(test_stops),
        cmocka_unit_test(test_grammar),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_quantized_kv),
        cmocka_unit_test(test_a_hybrid_takes_back_rejected_guesses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
