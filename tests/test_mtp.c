/* The model's own NextN (multi-token prediction) block as a drafter (--spec mtp) never changes an answer, and its rows
 * belong to the cache like the trunk's. On generated glm4moe, qwen35 and qwen35moe models with one NextN block: generations with
 * the drafter give the tokens and logits of an engine without it, and the K/V (the block's rows too) and state digests
 * of the same engine with speculation off — greedy and seeded, alone and batched; the block's rows do not depend on the
 * prefill grid or on decoding token by token (the hidden state a row reads crosses chunks with the sequence's state);
 * and a conversation resumed from the cache or, after a restart, from the disk tier computes the block's rows only
 * from the reused offset on and answers as a cold engine does; --spec auto picks by the block and the measured cost. */
#define _XOPEN_SOURCE 700
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "flatkv.h"
#include "model/genmodel.h"
#include "testutil.h"

#define GEN 40

typedef struct {
    fkv_model *models[3]; /* glm4moe, qwen35, qwen35moe: each with one NextN block */
} fixture;

typedef struct {
    uint32_t n, n_pos;
    int32_t ids[GEN];
    uint64_t logits, kv, state;
    uint32_t drafted, cached;
    uint64_t prompt_rows; /* rows of the NextN block its prompt computed */
} answer;

static const char *const archs[] = {"glm4moe", "qwen35", "qwen35moe"};
#define N_ARCHS 3

/* archs[i] in tu_arch_model's shape, with a NextN block (with its own embedding, its own head); NULL with err. */
static fkv_model *model(int i, bool embed, bool head, fkv_error *err) {
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 512,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_Q8_0, .seed = 51,
                         .arch = archs[i], .n_nextn = 1, .nextn_embed = embed, .nextn_head = head};
    if (i != 1) p.n_expert = 8, p.n_expert_used = 3, p.n_ff_exp = 64;
    if (i == 0) p.rope_dims = 16, p.n_shared = 1, p.n_dense_lead = 1;
    else p.ssm_k_heads = 4;
    fkv_model *m = genmodel_write(&p, path, err) ? NULL : fkv_model_load(path, err);
    remove(path);
    return m;
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    fkv_error err = {0};
    for (int i = 0; i < N_ARCHS; i++)
        if (!(f->models[i] = model(i, false, false, &err))) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    for (int i = 0; i < N_ARCHS; i++) fkv_model_free(f->models[i]);
    free(f);
    return 0;
}

static fkv_engine *engine(const fkv_model *m, bool mtp, uint32_t grid, bool cache, const char *kv_dir) {
    fkv_engine_params ep;
    fkv_engine_default_params(&ep, NULL);
    ep.ctx.n_ctx = 512;
    ep.ctx.prefill_rows = grid;
    ep.kv_block = 32;
    ep.kv_mem = 64u << 20;
    ep.state_grid = 64;
    ep.cache_min = 1;
    ep.prefix_cache = cache;
    ep.mtp = mtp;
    ep.kv_dir = kv_dir;
    fkv_error err = {0};
    fkv_engine *e = fkv_engine_new(m, &ep, &err);
    if (!e) fail_msg("engine: %s", err.msg);
    return e;
}

static uint32_t prompt_ids(const fkv_model *m, const char *text, int32_t *ids) {
    fkv_error err = {0};
    const int k = fkv_tokenize(m, text, strlen(text), true, false, ids, 256, &err);
    assert_true(k > 0 && k <= 256);
    return (uint32_t)k;
}

/* A stop (as a stop string ends a generation): false at the (*user)-th token. */
static bool stop_at(void *user, int32_t id, const char *piece, int len) {
    (void)id, (void)piece, (void)len;
    return --*(int *)user > 0;
}

static const fkv_grammar *grammar; /* of the generations run() makes; NULL: free text */
static int stop_after;             /* tokens after which they stop; 0: none */

/* prompt, then up to GEN tokens, on the sequence s of its engine e. */
static void run(fkv_engine *e, fkv_seq *s, const fkv_model *m, const int32_t *prompt, uint32_t n, uint64_t seed,
                fkv_spec_mode mode, answer *a) {
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.seed = seed;
    if (!seed) sp.temp = 0.0f;
    fkv_sampler *smp = fkv_sampler_new(&sp, (int32_t)fkv_model_get_info(m).n_vocab);
    float *logits = malloc(sizeof(float) * fkv_model_get_info(m).n_vocab);
    fkv_error err = {0};
    memset(a, 0, sizeof *a);
    const uint64_t before = fkv_engine_get_stats(e).nextn_rows;
    if (fkv_seq_prefill(s, prompt, n, logits, &a->cached, &err)) fail_msg("prefill: %s", err.msg);
    a->prompt_rows = fkv_engine_get_stats(e).nextn_rows - before;
    int left = stop_after;
    const fkv_gen_params gp = {.max_tokens = GEN, .sampler = smp, .spec = {.mode = mode, .draft_max = 4},
                               .grammar = grammar, .on_token = stop_after ? stop_at : NULL, .user = &left};
    fkv_gen_result res;
    if (fkv_seq_generate(s, logits, &gp, a->ids, &res, &err)) fail_msg("generate: %s", err.msg);
    a->n = res.n_tokens, a->logits = res.logits_digest, a->drafted = res.drafted;
    a->n_pos = fkv_seq_n_pos(s);
    a->kv = fkv_seq_kv_digest(s, a->n_pos);
    a->state = fkv_seq_state_digest(s);
    free(logits);
    fkv_sampler_free(smp);
}

/* The same on a fresh engine (mtp: with the NextN block). */
static void run_alone(const fkv_model *m, bool mtp, const int32_t *prompt, uint32_t n, uint64_t seed,
                      fkv_spec_mode mode, answer *a) {
    fkv_engine *e = engine(m, mtp, 32, true, NULL);
    fkv_error err = {0};
    fkv_seq *s = fkv_seq_open(e, NULL, &err);
    assert_non_null(s);
    run(e, s, m, prompt, n, seed, mode, a);
    fkv_seq_free(s);
    fkv_engine_free(e);
}

static void assert_tokens(const answer *want, const answer *got, const char *what) {
    if (want->n != got->n || memcmp(want->ids, got->ids, sizeof(int32_t) * want->n) || want->logits != got->logits)
        fail_msg("%s: %u tokens, logits %016llx; want %u, %016llx", what, got->n, (unsigned long long)got->logits,
                 want->n, (unsigned long long)want->logits);
}

static void assert_same(const answer *want, const answer *got, const char *what) {
    assert_tokens(want, got, what);
    if (want->kv != got->kv || want->state != got->state || want->n_pos != got->n_pos)
        fail_msg("%s: kv %016llx state %016llx at %u; want %016llx %016llx at %u", what, (unsigned long long)got->kv,
                 (unsigned long long)got->state, got->n_pos, (unsigned long long)want->kv,
                 (unsigned long long)want->state, want->n_pos);
}

static const char *const texts[] = {"Once upon a time there was a little girl", "Tom had a red ball. Tom had a red",
                                    "The sun was hot and the birds sang in the tall green trees"};

/* Greedy; seeded; seeded with a grammar and a stop. */
static void test_mtp_equals_off(void **state) {
    fixture *f = *state;
    for (int a = 0; a < N_ARCHS; a++) {
        const fkv_model *m = f->models[a];
        const char *gbnf = "root ::= (\" there was a \" [a-z]+ \".\")+\n";
        fkv_error err = {0};
        fkv_grammar *g = fkv_grammar_new(m, gbnf, strlen(gbnf), &err);
        assert_non_null(g);
        for (uint64_t seed = 0; seed < 3; seed++) {
            int32_t prompt[256];
            const uint32_t n = prompt_ids(m, texts[seed], prompt);
            grammar = seed == 2 ? g : NULL;
            stop_after = seed == 2 ? 17 : 0;
            answer plain, off, mtp;
            run_alone(m, false, prompt, n, seed, FKV_SPEC_OFF, &plain);
            run_alone(m, true, prompt, n, seed, FKV_SPEC_OFF, &off);
            run_alone(m, true, prompt, n, seed, FKV_SPEC_MTP, &mtp);
            assert_tokens(&plain, &off, archs[a]);
            assert_same(&off, &mtp, archs[a]);
            assert_true(mtp.drafted > 0);
            assert_int_equal(off.drafted, 0);
            answer without; /* asked of an engine without the block: no guesses, the same answer */
            run_alone(m, false, prompt, n, seed, FKV_SPEC_MTP, &without);
            assert_tokens(&plain, &without, archs[a]);
            assert_int_equal(without.drafted, 0);
        }
        grammar = NULL, stop_after = 0;
        fkv_grammar_free(g);
    }
}

/* auto: on an engine with the block, mtp or (where guesses do not pay) off; without it, lookup or off; the answer
 * unchanged. */
static void test_auto_chooses_by_the_block_and_the_cost(void **state) {
    fixture *f = *state;
    for (int mtp = 0; mtp < 2; mtp++) {
        const fkv_model *m = f->models[0];
        fkv_engine *e = engine(m, mtp, 32, true, NULL);
        fkv_spec_params p = {.mode = FKV_SPEC_AUTO};
        double cost = 0;
        fkv_error err = {0};
        assert_int_equal(fkv_spec_auto(&p, e, &cost, &err), 0);
        assert_true(p.mode == FKV_SPEC_OFF || p.mode == (mtp ? FKV_SPEC_MTP : FKV_SPEC_LOOKUP));
        assert_true(cost > 0);
        int32_t prompt[256];
        const uint32_t n = prompt_ids(m, texts[0], prompt);
        answer chosen, off;
        fkv_seq *s = fkv_seq_open(e, NULL, &err);
        run(e, s, m, prompt, n, 1, p.mode, &chosen);
        fkv_seq_free(s);
        fkv_engine_free(e);
        run_alone(m, mtp, prompt, n, 1, FKV_SPEC_OFF, &off);
        assert_same(&off, &chosen, "auto");
    }
}

static void test_mtp_batched(void **state) {
    fixture *f = *state;
    enum { N = 3 };
    for (int a = 0; a < N_ARCHS; a++) {
        const fkv_model *m = f->models[a];
        const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
        int32_t prompt[N][256], out[N][GEN], next[N];
        uint32_t n[N];
        answer alone[N];
        for (int i = 0; i < N; i++) {
            n[i] = prompt_ids(m, texts[i], prompt[i]);
            run_alone(m, true, prompt[i], n[i], 7 + (uint64_t)i, FKV_SPEC_OFF, &alone[i]);
        }
        fkv_engine *e = engine(m, true, 32, true, NULL);
        float *logits = malloc(sizeof(float) * n_vocab);
        fkv_eseq *seqs[N];
        fkv_gen *gens[N];
        fkv_sampler *smps[N];
        fkv_error err = {0};
        for (int i = 0; i < N; i++) {
            fkv_sampler_params sp = fkv_sampler_default_params();
            sp.seed = 7 + (uint64_t)i;
            smps[i] = fkv_sampler_new(&sp, (int32_t)n_vocab);
            const fkv_gen_params gp = {.max_tokens = GEN, .sampler = smps[i], .spec = {.mode = FKV_SPEC_MTP}};
            gens[i] = fkv_gen_new(m, &gp, out[i]);
            assert_non_null(seqs[i] = fkv_engine_start(e, NULL, prompt[i], n[i], NULL, &err));
            int rc;
            while ((rc = fkv_engine_prefill(e, seqs[i], logits, &err)) == 0) {}
            assert_int_equal(rc, 1);
            next[i] = fkv_gen_next(gens[i], logits, prompt[i], (int)n[i], n[i], 512);
        }
        for (;;) {
            fkv_eseq *live[N];
            fkv_gen *live_gens[N];
            int32_t live_next[N];
            int at[N];
            uint32_t k = 0, failed;
            for (int i = 0; i < N; i++)
                if (next[i] >= 0) live[k] = seqs[i], live_gens[k] = gens[i], live_next[k] = next[i], at[k++] = i;
            if (!k) break;
            if (fkv_engine_step(e, live, live_gens, live_next, k, NULL, &failed, &err)) fail_msg("step: %s", err.msg);
            for (uint32_t j = 0; j < k; j++) next[at[j]] = live_next[j];
        }
        for (int i = 0; i < N; i++) {
            const fkv_gen_result res = fkv_gen_result_get(gens[i]);
            answer got = {.n = res.n_tokens, .logits = res.logits_digest, .state = alone[i].state};
            memcpy(got.ids, out[i], sizeof(int32_t) * res.n_tokens);
            fkv_eseq_ids(seqs[i], &got.n_pos);
            got.kv = fkv_engine_kv_digest(e, seqs[i], got.n_pos);
            assert_same(&alone[i], &got, texts[i]);
            assert_true(res.drafted > 0);
            fkv_gen_free(gens[i]);
            fkv_sampler_free(smps[i]);
            fkv_engine_finish(e, seqs[i]);
        }
        free(logits);
        fkv_engine_free(e);
    }
}

/* The block's rows and the hidden state carried in the sequence's state are the same whether the prompt is computed in
 * chunks of 32 or of 5, or fed a token at a time (decode rows). */
static void test_mtp_rows_do_not_depend_on_the_grid(void **state) {
    fixture *f = *state;
    for (int a = 0; a < N_ARCHS; a++) {
        const fkv_model *m = f->models[a];
        float *logits = malloc(sizeof(float) * fkv_model_get_info(m).n_vocab);
        int32_t prompt[256];
        const uint32_t n = prompt_ids(m, texts[2], prompt);
        uint64_t kv[3], st[3];
        for (int way = 0; way < 3; way++) {
            fkv_engine *e = engine(m, true, way == 1 ? 5 : 32, false, NULL);
            fkv_error err = {0};
            fkv_seq *s = fkv_seq_open(e, NULL, &err);
            assert_non_null(s);
            assert_int_equal(fkv_seq_prefill(s, prompt, way == 2 ? 1 : n, logits, NULL, &err), 0);
            for (uint32_t i = 1; way == 2 && i < n; i++)
                assert_int_equal(fkv_seq_decode(s, prompt[i], logits, &err), 0);
            kv[way] = fkv_seq_kv_digest(s, n);
            st[way] = fkv_seq_state_digest(s);
            fkv_seq_free(s);
            fkv_engine_free(e);
        }
        assert_true(kv[0] == kv[1] && kv[0] == kv[2]);
        assert_true(st[0] == st[1] && st[0] == st[2]);
        free(logits);
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* A conversation's second turn resumes the first's rows (the block's with them) and computes the block's rows only from
 * the reused offset on; after a restart the disk tier serves them. Either way the answer, K/V and state are a cold
 * engine's. */
static void test_mtp_resumes_where_the_cache_ends(void **state) {
    fixture *f = *state;
    for (int a = 0; a < N_ARCHS; a++) {
        const fkv_model *m = f->models[a];
        const char *dir = tu_tmp_path("-kv");
        int32_t turn[512];
        const uint32_t n1 = prompt_ids(m, texts[0], turn);
        answer first, resumed, cold, restarted;
        for (int restart = 0; restart < 2; restart++) {
            fkv_engine *e = engine(m, true, 32, true, restart ? dir : NULL);
            fkv_error err = {0};
            fkv_seq *s = fkv_seq_open(e, NULL, &err);
            run(e, s, m, turn, n1, 0, FKV_SPEC_MTP, &first);
            uint32_t n2 = n1; /* the first turn's prompt and answer, then more */
            memcpy(turn + n2, first.ids, sizeof(int32_t) * first.n);
            n2 += first.n;
            n2 += prompt_ids(m, texts[1], turn + n2) - 1;
            fkv_engine *again = e;
            if (restart) { /* a new process: a new engine on the same directory */
                fkv_seq_free(s);
                fkv_engine_free(e);
                again = engine(m, true, 32, true, dir);
                s = fkv_seq_open(again, NULL, &err);
            }
            answer *got = restart ? &restarted : &resumed;
            run(again, s, m, turn, n2, 0, FKV_SPEC_MTP, got);
            fkv_seq_free(s);
            /* in memory the whole first turn; from disk whole blocks, to the last state kept within them */
            if (got->cached <= (restart ? 0 : n1))
                fail_msg("%s, restart %d: %u of %u reused", archs[a], restart, got->cached, n2);
            if (restart) assert_true(fkv_engine_get_stats(again).disk_reused_tokens > 0);
            /* the block's rows of the prompt: from the reused offset on, none below it */
            assert_int_equal(got->prompt_rows, n2 - got->cached);
            fkv_engine_free(again);
            fkv_engine *c = engine(m, true, 32, false, NULL);
            s = fkv_seq_open(c, NULL, &err);
            run(c, s, m, turn, n2, 0, FKV_SPEC_OFF, &cold);
            assert_int_equal(cold.prompt_rows, n2);
            fkv_seq_free(s);
            fkv_engine_free(c);
            assert_same(&cold, got, archs[a]);
        }
        nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    }
}

/* A block with its own shared_head_head guesses through it (other logits, the same rows); with its own embed_tokens
 * its rows read that embedding (other rows). The trunk's answer stays. */
static void test_the_block_reads_its_own_embedding_and_head(void **state) {
    fixture *f = *state;
    fkv_error err = {0};
    const fkv_model *plain = f->models[0];
    fkv_model *own[2] = {model(0, false, true, &err), model(0, true, false, &err)}; /* own head; own embedding */
    assert_true(own[0] && own[1]);
    int32_t prompt[256];
    const uint32_t n = prompt_ids(plain, texts[0], prompt), n_vocab = fkv_model_get_info(plain).n_vocab;
    answer want, got[2];
    float *logits[3];
    for (int v = 0; v < 3; v++) {
        const fkv_model *m = v ? own[v - 1] : plain;
        fkv_engine *e = engine(m, true, 32, false, NULL);
        fkv_seq *s = fkv_seq_open(e, NULL, &err);
        run(e, s, m, prompt, n, 0, FKV_SPEC_OFF, v ? &got[v - 1] : &want);
        fkv_seq_free(s);
        /* one guess after the prompt, from a fresh sequence on it */
        fkv_eseq *q = fkv_engine_start(e, NULL, prompt, n, NULL, &err);
        assert_non_null(q);
        while (fkv_engine_prefill(e, q, NULL, &err) == 0) {}
        float h[128];
        const uint32_t at = 0;
        memcpy(h, engine_nextn_h(e, q), sizeof h);
        logits[v] = malloc(sizeof(float) * n_vocab);
        assert_int_equal(engine_nextn_rows(e, &q, prompt, &at, 1, h, logits[v], &err), 0);
        fkv_engine_finish(e, q);
        fkv_engine_free(e);
    }
    assert_tokens(&want, &got[0], "own head");
    assert_tokens(&want, &got[1], "own embedding");
    assert_true(got[0].kv == want.kv);                                     /* the head reads the rows, writes none */
    assert_true(memcmp(logits[1], logits[0], sizeof(float) * n_vocab));    /* ... and gives its own logits */
    assert_true(got[1].kv != want.kv);                                     /* the embedding makes the rows */
    for (int v = 0; v < 3; v++) free(logits[v]);
    fkv_model_free(own[0]);
    fkv_model_free(own[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mtp_equals_off),
        cmocka_unit_test(test_mtp_batched),
        cmocka_unit_test(test_mtp_rows_do_not_depend_on_the_grid),
        cmocka_unit_test(test_mtp_resumes_where_the_cache_ends),
        cmocka_unit_test(test_auto_chooses_by_the_block_and_the_cost),
        cmocka_unit_test(test_the_block_reads_its_own_embedding_and_head),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
