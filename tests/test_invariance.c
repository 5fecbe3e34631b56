/* Row invariance (docs/design.md §1): the same tokens give the same KV bytes and logits bytes whatever the
 * chunk sizes, the prefill grid, the thread count — and whether prefill or decode wrote the row. A model with
 * recurrent layers: its state's bytes too (docs/design.md §5). */
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
#include "gguf/gguf.h"
#include "model/genmodel.h"
#include "testutil.h"

#define N_PROMPT 150 /* crosses the 32-key attention tiles and the 64-row grid several times */

typedef struct {
    fkv_model *m;
    uint32_t n_vocab;
    int32_t prompt[N_PROMPT];
} fixture;

/* A deterministic prompt of valid, non-special ids. */
static void fill_prompt(fixture *f) {
    uint64_t x = 12345;
    f->prompt[0] = fkv_token_bos(f->m);
    for (int i = 1; i < N_PROMPT; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        f->prompt[i] = (int32_t)(3 + (x >> 33) % (f->n_vocab - 3));
    }
}

static int setup_model(void **state, const char *path) {
    fixture *f = calloc(1, sizeof *f);
    fkv_error err = {0};
    f->m = fkv_model_load(path, &err);
    if (!f->m) {
        print_error("%s\n", err.msg);
        return -1;
    }
    f->n_vocab = fkv_model_get_info(f->m).n_vocab;
    fill_prompt(f);
    *state = f;
    return 0;
}

static int setup_stories(void **state) { return setup_model(state, tu_data("models/stories260K.gguf")); }

/* A generated GQA model with quantized weights, so the Q8_0 activation path is covered too. */
static int setup_generated(void **state, ggml_type type) {
    const char *path = tu_small_model(type, 7);
    int rc = path ? setup_model(state, path) : -1;
    if (path) remove(path); /* the mapping stays valid */
    return rc;
}

static int setup_q8(void **state) { return setup_generated(state, GGML_TYPE_Q8_0); }
static int setup_q4(void **state) { return setup_generated(state, GGML_TYPE_Q4_0); }

/* K-quant rows are whole 256-element super-blocks, wider than tu_small_model's; otherwise its shape. */
static int setup_q4_k(void **state) {
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 256, .hidden = 512, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 512,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = GGML_TYPE_Q4_K, .seed = 7};
    fkv_error err = {0};
    if (genmodel_write(&p, path, &err)) {
        print_error("%s\n", err.msg);
        return -1;
    }
    int rc = setup_model(state, path);
    remove(path); /* the mapping stays valid */
    return rc;
}

/* The other architectures (tu_arch_model: head sizes apart from dim, NoPE layers, partial rotary, window layers). */
static int setup_arch(void **state, const char *arch, ggml_type type) {
    const char *path = tu_arch_model(arch, type, 13);
    int rc = path ? setup_model(state, path) : -1;
    if (path) remove(path);
    return rc;
}
static int setup_qwen3(void **state) { return setup_arch(state, "qwen3", GGML_TYPE_Q8_0); }
static int setup_smollm3(void **state) { return setup_arch(state, "smollm3", GGML_TYPE_Q8_0); }
static int setup_phi3(void **state) { return setup_arch(state, "phi3", GGML_TYPE_F32); }
static int setup_gemma3(void **state) { return setup_arch(state, "gemma3", GGML_TYPE_Q8_0); }
static int setup_qwen3moe(void **state) { return setup_arch(state, "qwen3moe", GGML_TYPE_Q8_0); }
static int setup_glm4moe(void **state) { return setup_arch(state, "glm4moe", GGML_TYPE_Q8_0); }
static int setup_gptoss(void **state) { return setup_arch(state, "gpt-oss", GGML_TYPE_Q8_0); }
static int setup_qwen3moe_f32(void **state) { return setup_arch(state, "qwen3moe", GGML_TYPE_F32); }
static int setup_qwen35(void **state) { return setup_arch(state, "qwen35", GGML_TYPE_Q8_0); }
static int setup_qwen35_f32(void **state) { return setup_arch(state, "qwen35", GGML_TYPE_F32); }
static int setup_qwen35moe(void **state) { return setup_arch(state, "qwen35moe", GGML_TYPE_Q8_0); }

static int teardown(void **state) {
    fixture *f = *state;
    fkv_model_free(f->m);
    free(f);
    return 0;
}

typedef struct {
    uint64_t kv;
    uint64_t logits;
    uint64_t state; /* 0 without recurrent layers */
} digests;

/* Prefill the prompt in caller chunks of `chunk` rows on a grid of `grid`, with `threads` threads; digest
 * the KV rows and the logits of every position. */
static digests run(const fixture *f, uint32_t chunk, uint32_t grid, int threads, fkv_kv_type kv_type) {
    fkv_ctx_params cp = {.n_ctx = 512, .kv_type = kv_type, .n_threads = threads, .prefill_rows = grid};
    fkv_error err = {0};
    fkv_ctx *ctx = fkv_ctx_new(f->m, &cp, &err);
    assert_non_null(ctx);
    float *logits = malloc(sizeof(float) * f->n_vocab * N_PROMPT);
    for (uint32_t pos = 0; pos < N_PROMPT; pos += chunk) {
        uint32_t n = pos + chunk <= N_PROMPT ? chunk : N_PROMPT - pos;
        if (fkv_eval(ctx, f->prompt + pos, n, pos, n, logits + (size_t)pos * f->n_vocab, &err)) fail_msg("%s", err.msg);
    }
    digests d = {fkv_kv_digest(ctx, N_PROMPT), XXH3_64bits(logits, sizeof(float) * f->n_vocab * N_PROMPT),
                 fkv_state_digest(ctx)};
    free(logits);
    fkv_ctx_free(ctx);
    return d;
}

static void expect_same(const fixture *f, digests ref, uint32_t chunk, uint32_t grid, int threads,
                        fkv_kv_type kv_type) {
    digests d = run(f, chunk, grid, threads, kv_type);
    if (d.kv != ref.kv || d.logits != ref.logits || d.state != ref.state)
        fail_msg("chunk %u, grid %u, %d threads: kv %016llx logits %016llx state %016llx, all at once gives kv "
                 "%016llx logits %016llx state %016llx", chunk, grid, threads, (unsigned long long)d.kv,
                 (unsigned long long)d.logits, (unsigned long long)d.state, (unsigned long long)ref.kv,
                 (unsigned long long)ref.logits, (unsigned long long)ref.state);
}

static void check_chunks_grids_and_threads(const fixture *f, fkv_kv_type kv_type) {
    digests ref = run(f, N_PROMPT, 512, 1, kv_type);
    static const uint32_t chunks[] = {1, 7, 64, 128, N_PROMPT}, grids[] = {1, 16, 64};
    for (int threads = 1; threads <= 2; threads++) {
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
            expect_same(f, ref, chunks[c], 512, threads, kv_type);
        for (size_t g = 0; g < sizeof grids / sizeof *grids; g++) expect_same(f, ref, N_PROMPT, grids[g], threads, kv_type);
    }
}

static void test_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads(void **state) {
    check_chunks_grids_and_threads(*state, FKV_KV_F16);
    check_chunks_grids_and_threads(*state, FKV_KV_F32);
}

/* The same with f16 KV only (the default storage), for the other architectures: their layers change what is
 * computed, not how K/V are stored, and the sanitizer build's time limit holds the suite. */
static void test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads(void **state) {
    check_chunks_grids_and_threads(*state, FKV_KV_F16);
}

/* The same with K/V rows quantized (Q8_0, Q4_0): the integer scores and dequantized values keep the walk's bits. */
static void test_quantized_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads(void **state) {
    check_chunks_grids_and_threads(*state, FKV_KV_Q8_0);
    check_chunks_grids_and_threads(*state, FKV_KV_Q4_0);
}

/* Decode one token at a time after a prefill, then prefill the whole sequence cold: the rows decode
 * wrote and the logits each decode step produced must equal the cold prefill's, byte for byte. */
static void check_decode_equals_prefill(const fixture *f, fkv_kv_type kv_type) {
    enum { N_PREFILL = 70, N_DECODE = 60, N_ALL = N_PREFILL + N_DECODE };
    fkv_ctx_params cp = {.n_ctx = 512, .kv_type = kv_type, .n_threads = 2, .prefill_rows = 64};
    fkv_error err = {0};
    fkv_ctx *warm = fkv_ctx_new(f->m, &cp, &err), *cold = fkv_ctx_new(f->m, &cp, &err);
    assert_non_null(warm);
    assert_non_null(cold);
    int32_t ids[N_ALL];
    memcpy(ids, f->prompt, sizeof(int32_t) * N_PREFILL);
    float *decoded = malloc(sizeof(float) * f->n_vocab * N_ALL), *prefilled = malloc(sizeof(float) * f->n_vocab * N_ALL);
    float *row = decoded + (size_t)(N_PREFILL - 1) * f->n_vocab;
    assert_int_equal(fkv_eval(warm, ids, N_PREFILL, 0, 1, row, &err), 0);
    for (int i = N_PREFILL; i < N_ALL; i++) {
        uint32_t best = 0;
        for (uint32_t v = 1; v < f->n_vocab; v++)
            if (row[v] > row[best]) best = v;
        ids[i] = (int32_t)best;
        row += f->n_vocab;
        assert_int_equal(fkv_eval(warm, &ids[i], 1, (uint32_t)i, 1, row, &err), 0);
    }
    assert_int_equal(fkv_eval(cold, ids, N_ALL, 0, N_ALL, prefilled, &err), 0);
    assert_true(fkv_kv_digest(warm, N_ALL) == fkv_kv_digest(cold, N_ALL));
    assert_true(fkv_state_digest(warm) == fkv_state_digest(cold));
    size_t from = (size_t)(N_PREFILL - 1) * f->n_vocab, len = sizeof(float) * f->n_vocab * (N_ALL - N_PREFILL + 1);
    assert_memory_equal(decoded + from, prefilled + from, len);
    free(decoded);
    free(prefilled);
    fkv_ctx_free(warm);
    fkv_ctx_free(cold);
}

static void test_decode_rows_equal_prefill_rows(void **state) { check_decode_equals_prefill(*state, FKV_KV_F16); }

static void test_quantized_decode_rows_equal_prefill_rows(void **state) {
    check_decode_equals_prefill(*state, FKV_KV_Q8_0);
    check_decode_equals_prefill(*state, FKV_KV_Q4_0);
}

/* A model whose heads are not a multiple of 32 values (stories260K's are 8) cannot hold quantized rows: it is refused
 * by a sentence naming its head size, never computed over blocks that straddle heads. */
static void test_quantized_kv_refuses_heads_that_are_not_whole_blocks(void **state) {
    const fixture *f = *state;
    const fkv_kv_type quantized[] = {FKV_KV_Q8_0, FKV_KV_Q4_0};
    for (int t = 0; t < 2; t++) {
        fkv_ctx_params cp = {.n_ctx = 64, .kv_type = quantized[t], .n_threads = 1, .prefill_rows = 64};
        fkv_error err = {0};
        assert_null(fkv_ctx_new(f->m, &cp, &err));
        assert_int_equal(err.code, FKV_E_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "heads have 8"));
        fkv_engine_params ep;
        assert_int_equal(fkv_engine_default_params(&ep, NULL), 0);
        ep.ctx = cp;
        assert_null(fkv_engine_new(f->m, &ep, &err));
        assert_int_equal(err.code, FKV_E_UNSUPPORTED);
    }
}

/* A context whose length is not a whole number of attention tiles (K is stored a tile of 32 positions at a time)
 * fills every position it has, and its rows and logits equal a longer context's. */
static void test_a_context_of_any_length_equals_a_longer_one(void **state) {
    const fixture *f = *state;
    enum { N = 100 }; /* 3 tiles and 4 positions */
    fkv_ctx_params cp = {.n_ctx = N, .kv_type = FKV_KV_F16, .n_threads = 2, .prefill_rows = 64};
    fkv_error err = {0};
    fkv_ctx *exact = fkv_ctx_new(f->m, &cp, &err);
    cp.n_ctx = 512;
    fkv_ctx *longer = fkv_ctx_new(f->m, &cp, &err);
    assert_non_null(exact);
    assert_non_null(longer);
    float *a = malloc(sizeof(float) * f->n_vocab * N), *b = malloc(sizeof(float) * f->n_vocab * N);
    assert_int_equal(fkv_eval(exact, f->prompt, N, 0, N, a, &err), 0);
    assert_int_equal(fkv_eval(longer, f->prompt, N, 0, N, b, &err), 0);
    assert_true(fkv_kv_digest(exact, N) == fkv_kv_digest(longer, N));
    assert_memory_equal(a, b, sizeof(float) * f->n_vocab * N);
    free(a);
    free(b);
    fkv_ctx_free(exact);
    fkv_ctx_free(longer);
}

/* A context of a model with recurrent layers holds the state after its last position: it continues there or starts
 * again at 0, and refuses, naming the position, to compute anywhere else (the state cannot be cut back). A start
 * again at 0 gives the cold bytes. */
static void test_a_recurrent_state_continues_only_where_it_stands(void **state) {
    const fixture *f = *state;
    fkv_ctx_params cp = {.n_ctx = 256, .kv_type = FKV_KV_F16, .n_threads = 2, .prefill_rows = 64};
    fkv_error err = {0};
    fkv_ctx *ctx = fkv_ctx_new(f->m, &cp, &err);
    assert_non_null(ctx);
    assert_true(fkv_model_state_bytes(f->m) > 0);
    assert_int_equal(fkv_eval(ctx, f->prompt, 40, 0, 0, NULL, &err), 0);
    const uint64_t at40 = fkv_state_digest(ctx);
    assert_int_equal(fkv_eval(ctx, f->prompt + 30, 10, 30, 0, NULL, &err), -1);
    assert_int_equal(err.code, FKV_E_INPUT);
    assert_non_null(strstr(err.msg, "[0, 40)"));
    assert_true(fkv_state_digest(ctx) == at40); /* nothing was computed */
    assert_int_equal(fkv_eval(ctx, f->prompt + 40, 20, 40, 0, NULL, &err), 0);
    assert_true(fkv_state_digest(ctx) != at40);
    assert_int_equal(fkv_eval(ctx, f->prompt, 40, 0, 0, NULL, &err), 0); /* again from 0: the zero state */
    assert_true(fkv_state_digest(ctx) == at40);
    fkv_ctx_free(ctx);
}

int main(void) {
#define CASE(fn, model) {#fn " (" #model ")", fn, setup_##model, teardown, NULL}
    const struct CMUnitTest tests[] = {
        CASE(test_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, stories),
        CASE(test_decode_rows_equal_prefill_rows, stories),
        CASE(test_a_context_of_any_length_equals_a_longer_one, stories),
        CASE(test_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, q8),
        CASE(test_decode_rows_equal_prefill_rows, q8),
        CASE(test_quantized_kv_refuses_heads_that_are_not_whole_blocks, stories),
        CASE(test_quantized_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, q8),
        CASE(test_quantized_decode_rows_equal_prefill_rows, q8),
        CASE(test_quantized_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, gemma3),
        CASE(test_quantized_decode_rows_equal_prefill_rows, gemma3),
        CASE(test_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, q4),
        CASE(test_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, q4_k),
        CASE(test_decode_rows_equal_prefill_rows, q4_k),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, qwen3),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, smollm3),
        CASE(test_decode_rows_equal_prefill_rows, smollm3),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, phi3),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, gemma3),
        CASE(test_decode_rows_equal_prefill_rows, gemma3),
        /* experts: a chunk groups its rows by expert, so group sizes change with the chunk, the grid and batching */
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, qwen3moe),
        CASE(test_decode_rows_equal_prefill_rows, qwen3moe),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, glm4moe),
        CASE(test_decode_rows_equal_prefill_rows, glm4moe),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, qwen3moe_f32),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, gptoss),
        CASE(test_decode_rows_equal_prefill_rows, gptoss),
        /* gated DeltaNet layers: the recurrence token by token, whatever the chunk, grid, threads or decode */
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, qwen35),
        CASE(test_decode_rows_equal_prefill_rows, qwen35),
        CASE(test_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, qwen35_f32),
        CASE(test_f16_kv_and_logits_bytes_do_not_depend_on_chunks_grid_or_threads, qwen35moe),
        CASE(test_decode_rows_equal_prefill_rows, qwen35moe),
        CASE(test_a_recurrent_state_continues_only_where_it_stands, qwen35),
    };
    return tu_each_variant(tests, sizeof tests / sizeof *tests, NULL);
}
