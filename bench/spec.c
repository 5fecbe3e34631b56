/* bench/spec.c — what speculative decoding gains (bench/spec runs it; docs/performance.md has the numbers).
 *
 *   flatkv_spec MODEL TRANSCRIPT STORIES THREADS [ROUNDS [ROOFLINE]]
 *
 * 1. Verification cost (measured): on MODEL, at a context of CONTEXT positions, one forward of 1 + k rows — the fed
 *    token and k guesses, fkv_engine_verify — against a plain decode step (k = 0), k = 0..16, the rounds interleaved;
 *    the medians.
 *    And the floor of that cost on this machine (ROOFLINE: bench/roofline.c's JSON, measured by bench/spec): the work
 *    k more rows add with the weights already streamed — their integer products at the best int8 peak (AMX, VNNI or
 *    AVX2), attention over CONTEXT positions at the f32 FMA peak, and matmul.h's three float steps per output and
 *    block at the FMA rate — as if all ran at peak, overlapped with the weight stream.
 *    1b. A model with a NextN block (--spec mtp): the same forwards on an engine with the block, one guess of it, and
 *    the speed-up projected for assumed acceptances (random weights keep no guess).
 * 2. Acceptance (measured): TRANSCRIPT (an agent session, OpenAI messages) rendered with ChatML and tokenized by
 *    MODEL's vocabulary; every assistant message replayed as if the model generated it: at each step the lookup drafter
 *    guesses from the ids so far exactly as a generation does (spec_lookup, spec_guess_max), a guess is kept while it
 *    equals the message's next id. Tokens per step, and the projected single-stream speed-up: the message's tokens at
 *    the plain step's cost over the steps at each one's measured cost (random-weight models do not copy text, so the
 *    gain on them can only be projected); and once more at a cost of 1 + 0.04 k plain steps, the bar; and the
 *    ceiling of lookup on the transcript: guesses from whichever earlier occurrence of the last id continues right.
 * 3. End to end (measured): STORIES (a real trained model) continuing its own stories, greedy, spec off against lookup
 *    and against itself as the draft model, tokens/s.
 * Last line: `spec verify8=X speedup=Y` (8 guesses' cost in plain steps; the projected speed-up with lookup and the
 * default draft length on the transcript).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/spec.h"
#include "flatkv.h"
#include "harness.h"
#include "kernels/dispatch.h"
#include "chat/chat.h"

#define CONTEXT 512
#define MAX_K FKV_SPEC_MAX_DRAFT
#define LINEAR_ROW_COST 0.04

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what, const fkv_error *err) {
    fprintf(stderr, "flatkv_spec: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

static fkv_engine *engine_for(const fkv_model *m, int threads, uint32_t n_ctx, bool mtp) {
    fkv_engine_params ep;
    fkv_error err = {0};
    if (fkv_engine_default_params(&ep, &err)) die("engine parameters", &err);
    ep.ctx.n_threads = threads;
    ep.ctx.n_ctx = n_ctx;
    ep.mtp = mtp;
    fkv_engine *e = fkv_engine_new(m, &ep, &err);
    if (!e) die("engine", &err);
    return e;
}

/* 1: cost[k] = median ms of a forward of 1 + k rows at CONTEXT positions; mtp: on an engine with the NextN block, and
 * *guess the median ms of one guess (a row of the block alone, with its logits). */
static void verify_costs(const fkv_model *m, int threads, int rounds, bool mtp, double cost[MAX_K + 1], double *guess) {
    fkv_engine *e = engine_for(m, threads, CONTEXT + MAX_K + 2, mtp);
    const fkv_model_info mi = fkv_model_get_info(m);
    int32_t ids[CONTEXT + MAX_K + 1];
    uint32_t x = 12345;
    for (int i = 0; i < CONTEXT + MAX_K + 1; i++) {
        x = x * 48271u % 2147483647u;
        ids[i] = (int32_t)(3 + x % (mi.n_vocab - 3));
    }
    fkv_error err = {0};
    fkv_eseq *s = fkv_engine_start(e, NULL, ids, CONTEXT, NULL, &err);
    if (!s) die("start", &err);
    int rc;
    while ((rc = fkv_engine_prefill(e, s, NULL, &err)) == 0) {}
    if (rc < 0) die("prefill", &err);
    float *logits = malloc(sizeof(float) * mi.n_vocab * (MAX_K + 1)), *h = malloc(sizeof(float) * mi.dim);
    const int n_t = MAX_K + 2; /* the forwards of 1 + k rows, then a guess */
    double *t = malloc(sizeof(double) * (size_t)rounds * n_t);
    for (int r = -2; r < rounds; r++) /* two rounds of warm-up */
        for (int k = 0; k < (mtp ? n_t : n_t - 1); k++) {
            const uint32_t rows = 1 + (uint32_t)k, at = 0;
            double t0 = now_ms();
            if (k <= MAX_K ? fkv_engine_verify(e, &s, ids + CONTEXT, &rows, 1, logits, NULL, &err)
                           : (memcpy(h, engine_nextn_h(e, s), sizeof(float) * mi.dim),
                              engine_nextn_rows(e, &s, ids + CONTEXT, &at, 1, h, logits, &err)))
                die("verify", &err);
            double t1 = now_ms();
            fkv_engine_accept(e, s, 0); /* the context stays CONTEXT */
            if (r >= 0) t[(size_t)k * rounds + r] = t1 - t0;
        }
    for (int k = 0; k < (mtp ? n_t : n_t - 1); k++) {
        harness_sort(t + (size_t)k * rounds, (size_t)rounds);
        *(k <= MAX_K ? &cost[k] : guess) = t[(size_t)k * rounds + rounds / 2];
    }
    free(t);
    free(h);
    free(logits);
    fkv_engine_finish(e, s);
    fkv_engine_free(e);
}

/* 1b: the NextN block (--spec mtp): a step of 1 + k rows on an engine with the block (its rows with the trunk's) and k
 * guesses, against a plain step of an engine without it; and the speed-up that cost projects if each guess were kept
 * with probability a while the ones before it were (random weights keep none: acceptance is assumed, not measured). */
static void mtp_costs(const fkv_model *m, int threads, int rounds, double plain) {
    double cost[MAX_K + 1], guess = 0;
    verify_costs(m, threads, rounds, true, cost, &guess);
    printf("\n1b. the NextN block (--spec mtp), measured: a step of 1 + k rows with the block's rows, k guesses of %.2f ms "
           "each; x a plain step without the block (%.2f ms)\n", guess, plain);
    const double assumed[] = {0.5, 0.7, 0.85};
    printf("  k   verify ms  step ms  x plain   projected speed-up if each guess is kept with a = 0.5 / 0.7 / 0.85\n");
    for (int k = 0; k <= 8; k++) {
        const double step = cost[k] + k * guess;
        printf("  %-2d %9.2f %8.2f  x%.2f   ", k, cost[k], step, step / plain);
        for (size_t i = 0; i < sizeof assumed / sizeof *assumed; i++) {
            double tokens = 0, p = 1; /* expected tokens a step: the fed one, then each guess while all before it held */
            for (int j = 0; j <= k; j++, p *= assumed[i]) tokens += p;
            printf(" x%.2f", tokens * plain / step);
        }
        printf("\n");
    }
}

typedef struct {
    uint64_t tokens, steps, drafted, kept;
    double plain_ms, spec_ms; /* projected */
} replay_sum;

/* The best guess a lookup could make (for the ceiling, not a drafter): of every earlier occurrence of the last id in
 * hist[0..n) + last, the one whose continuation equals the next ids of the reply (truth[0..n_truth)) the longest, at
 * most max ids of it. */
static uint32_t oracle_guess(const int32_t *hist, uint32_t n, int32_t last, const int32_t *truth, uint32_t n_truth,
                             uint32_t max, int32_t *out) {
    uint32_t best = 0, at = 0;
    for (uint32_t q = 0; q < n; q++) {
        if (hist[q] != last) continue;
        uint32_t c = 0;
        while (c < max && c < n_truth && q + 1 + c < n && hist[q + 1 + c] == truth[c]) c++;
        if (c > best) best = c, at = q;
    }
    for (uint32_t i = 0; i < best; i++) out[i] = hist[at + 1 + i];
    return best;
}

/* One reply's generation replayed: ctx[0..n_ctx) the prompt, reply[0..n) the ids generated (the last one never fed);
 * oracle: guesses from oracle_guess instead of spec_lookup. */
static void replay_reply(const int32_t *ctx, uint32_t n_ctx, const int32_t *reply, uint32_t n, uint32_t draft_max,
                         bool oracle, const double cost[MAX_K + 1], int32_t *hist, replay_sum *sum) {
    const fkv_spec_params p = {.mode = FKV_SPEC_LOOKUP, .draft_max = draft_max};
    spec_state st = spec_state_init(&p);
    memcpy(hist, ctx, sizeof(int32_t) * n_ctx);
    uint32_t i = 0; /* reply[i]: sampled, fed at the next step */
    while (i + 1 < n) {
        int32_t guess[MAX_K];
        const uint32_t g = oracle ? oracle_guess(hist, n_ctx + i, reply[i], reply + i + 1, n - i - 1, draft_max, guess)
                                  : spec_lookup(hist, n_ctx + i, reply[i], st.p.ngram_max, spec_guess_max(&st), guess);
        uint32_t kept = 0;
        while (kept < g && i + 1 + kept < n && guess[kept] == reply[i + 1 + kept]) kept++;
        spec_adapt(&st, g, kept);
        sum->steps++;
        sum->spec_ms += cost[g];
        for (uint32_t j = 0; j <= kept; j++) hist[n_ctx + i + j] = reply[i + j];
        i += kept + 1;
    }
    sum->tokens += n ? n - 1 : 0;
    sum->plain_ms += (n ? n - 1 : 0) * cost[0];
    sum->drafted += st.drafted;
    sum->kept += st.accepted;
}

/* The transcript's messages (borrowed from root) and each assistant message's calls. */
typedef struct {
    chat_message *msgs;
    chat_tool_call *calls;
    size_t n;
} transcript;

static transcript load_transcript(const char *path, json_t **root) {
    json_error_t jerr;
    transcript t = {0};
    json_t *msgs = (*root = json_load_file(path, 0, &jerr)) ? json_object_get(*root, "messages") : NULL;
    if (!json_is_array(msgs)) {
        fprintf(stderr, "flatkv_spec: %s: %s\n", path, *root ? "no messages array" : jerr.text);
        exit(1);
    }
    t.n = json_array_size(msgs);
    size_t n_calls = 0;
    for (size_t i = 0; i < t.n; i++) n_calls += json_array_size(json_object_get(json_array_get(msgs, i), "tool_calls"));
    t.msgs = calloc(t.n, sizeof *t.msgs);
    t.calls = calloc(n_calls + 1, sizeof *t.calls);
    for (size_t i = 0, c = 0; i < t.n; i++) {
        json_t *m = json_array_get(msgs, i), *calls = json_object_get(m, "tool_calls");
        const char *role = json_string_value(json_object_get(m, "role"));
        t.msgs[i].role = !role || !strcmp(role, "tool") ? "tool" : role;
        t.msgs[i].content = json_string_value(json_object_get(m, "content"));
        if (!t.msgs[i].content) t.msgs[i].content = "";
        t.msgs[i].tool_calls = t.calls + c;
        for (size_t k = 0; k < json_array_size(calls); k++, c++) {
            json_t *fn = json_object_get(json_array_get(calls, k), "function");
            t.calls[c].name = json_string_value(json_object_get(fn, "name"));
            t.calls[c].arguments = json_string_value(json_object_get(fn, "arguments"));
        }
        t.msgs[i].n_tool_calls = json_array_size(calls);
    }
    return t;
}

/* Text tokenized by m (NULL: exit), its count in *n. */
static int32_t *encode(const fkv_model *m, const char *text, size_t len, bool bos, bool special, uint32_t extra,
                       uint32_t *n) {
    fkv_error err = {0};
    const int k = fkv_tokenize(m, text, len, bos, special, NULL, 0, &err);
    int32_t *ids = k >= 0 ? malloc(sizeof(int32_t) * ((size_t)k + extra + 1)) : NULL;
    if (!ids || fkv_tokenize(m, text, len, bos, special, ids, k, &err) != k) die("tokenize", &err);
    *n = (uint32_t)k;
    return ids;
}

/* 2: every assistant message of the transcript replayed, for draft_max d: the prompt is the conversation before it
 * (with the generation prompt), the reply its text up to its end of turn, then the end of generation. */
static replay_sum replay_transcript(const fkv_model *m, const transcript *t, uint32_t d, bool oracle,
                                    const double *cost) {
    chat_template tmpl;
    fkv_error err = {0};
    if (chat_template_by_name("chatml", &tmpl, &err)) die("template", &err);
    replay_sum sum = {0};
    int32_t eog = 0;
    while (!fkv_token_is_eog(m, eog)) eog++;
    for (size_t k = 0; k < t->n; k++) {
        if (strcmp(t->msgs[k].role, "assistant")) continue;
        char *before, *through;
        size_t n_before, n_through;
        if (chat_render(&tmpl, t->msgs, k, NULL, true, NULL, NULL, &before, &n_before, &err) ||
            chat_render(&tmpl, t->msgs, k + 1, NULL, false, NULL, NULL, &through, &n_through, &err))
            die("render", &err);
        if (n_through < n_before || memcmp(before, through, n_before)) die("the rendering is not prefix-stable", NULL);
        const char *reply = through + n_before, *end = strstr(reply, "<|im_end|>");
        uint32_t n_prompt, n_reply;
        int32_t *prompt = encode(m, before, n_before, true, true, 0, &n_prompt);
        int32_t *ids = encode(m, reply, end ? (size_t)(end - reply) : strlen(reply), false, false, 1, &n_reply);
        ids[n_reply++] = eog; /* the end of generation: sampled, never fed */
        int32_t *hist = malloc(sizeof(int32_t) * (n_prompt + n_reply));
        replay_reply(prompt, n_prompt, ids, n_reply, d, oracle, cost, hist, &sum);
        free(hist);
        free(ids);
        free(prompt);
        free(before);
        free(through);
    }
    return sum;
}

/* 3: STORIES greedy from a few beginnings, spec off / lookup / draft (itself); tokens/s of each, interleaved. */
static void stories_end_to_end(const char *path, int threads, int rounds) {
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) die(path, &err);
    fkv_engine *draft = engine_for(m, threads, 512, false);
    const char *starts[] = {"Once upon a time", "Lily and Ben went to the park.", "The little dog was sad because",
                            "One day, a girl named Sue found a box."};
    const char *names[] = {"off", "lookup", "draft (itself)"};
    const fkv_spec_params specs[] = {{0}, {.mode = FKV_SPEC_LOOKUP}, {.mode = FKV_SPEC_DRAFT, .draft = draft}};
    double ms[3] = {0};
    uint64_t tokens[3] = {0}, drafted[3] = {0}, kept[3] = {0};
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    float *logits = malloc(sizeof(float) * n_vocab);
    int32_t ids[64], out[400];
    for (int r = 0; r < rounds; r++)
        for (size_t p = 0; p < sizeof starts / sizeof *starts; p++)
            for (int c = 0; c < 3; c++) {
                fkv_engine *e = engine_for(m, threads, 512, false);
                fkv_seq *s = fkv_seq_open(e, NULL, &err);
                int n = fkv_tokenize(m, starts[p], strlen(starts[p]), true, false, ids, 64, &err);
                fkv_sampler_params sp = fkv_sampler_default_params();
                sp.temp = 0;
                fkv_sampler *smp = fkv_sampler_new(&sp, (int32_t)n_vocab);
                if (!s || n < 1 || fkv_seq_prefill(s, ids, (uint32_t)n, logits, NULL, &err)) die("stories", &err);
                fkv_gen_params gp = {.max_tokens = 400, .sampler = smp, .spec = specs[c]};
                fkv_gen_result res;
                double t0 = now_ms();
                if (fkv_seq_generate(s, logits, &gp, out, &res, &err)) die("stories", &err);
                ms[c] += now_ms() - t0;
                tokens[c] += res.n_tokens, drafted[c] += res.drafted, kept[c] += res.accepted;
                fkv_sampler_free(smp);
                fkv_seq_free(s);
                fkv_engine_free(e);
            }
    printf("\n3. end to end, measured: %s continuing its own stories (greedy, 4 beginnings, up to 400 tokens, %d "
           "rounds)\n", path, rounds);
    for (int c = 0; c < 3; c++)
        printf("  %-15s %8.0f tok/s  guessed %6llu kept %6llu (%.0f%%)  x%.2f\n", names[c], tokens[c] / (ms[c] / 1e3),
               (unsigned long long)drafted[c], (unsigned long long)kept[c],
               drafted[c] ? 100.0 * kept[c] / drafted[c] : 0.0, (tokens[c] / ms[c]) / (tokens[0] / ms[0]));
    free(logits);
    fkv_engine_free(draft);
    fkv_model_free(m);
}

/* ms the work of one more verified row takes at least, at the peaks in roofline (bench/roofline.c's JSON); 0 when it
 * cannot be read. */
static double row_floor_ms(const fkv_model_info *mi, const char *roofline) {
    json_error_t jerr;
    json_t *r = json_loads(roofline, 0, &jerr);
    const double fma = json_number_value(json_object_get(r, "fma_gflops"));
    double int8 = 0; /* the best of the int8 probes this CPU ran (null where it lacks one: 0) */
    for (const char *const *key = (const char *const[]){"int8_gops", "vnni_gops", "amx_gops", NULL}; *key; key++) {
        const double peak = json_number_value(json_object_get(r, *key));
        if (peak > int8) int8 = peak;
    }
    json_decref(r);
    if (fma <= 0 || int8 <= 0) return 0;
    const double q = (double)mi->n_heads * mi->head_dim, kv = (double)mi->n_kv_heads * mi->head_dim;
    const double macs = mi->n_layers * (mi->dim * (2 * q + 2 * kv) + 3.0 * mi->dim * mi->hidden) +
                        (double)mi->n_vocab * mi->dim;                      /* every matrix, the output's too */
    const double attn_flops = 2.0 * 2.0 * mi->n_layers * CONTEXT * q;       /* q · k and p · v */
    const double step_flops = 2.0 * 3.0 * macs / 32; /* per output and Q8_0 block of 32, each at the FMA's rate */
    return (2.0 * macs / int8 + (attn_flops + step_flops) / fma) / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: flatkv_spec MODEL TRANSCRIPT STORIES THREADS [ROUNDS [ROOFLINE]]\n");
        return 2;
    }
    const int threads = atoi(argv[4]), rounds = argc > 5 ? atoi(argv[5]) : 15;
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(argv[1], &err);
    if (!m) die(argv[1], &err);
    const fkv_model_info mi = fkv_model_get_info(m);
    double cost[MAX_K + 1], guess = 0;
    verify_costs(m, threads, rounds, false, cost, &guess);
    printf("kernels %s (tuning %s), %d threads, model %s\n\n1. verification cost, measured: a forward of 1 + k rows at "
           "%d positions, median of %d\n",
           fkv_kernels_name(), kern_tuning_active()->name, threads, argv[1], CONTEXT, rounds);
    for (int k = 0; k <= MAX_K; k++) printf("  k=%-2d %7.2f ms  x%.2f\n", k, cost[k], cost[k] / cost[0]);
    const double floor_ms = argc > 6 ? row_floor_ms(&mi, argv[6]) : 0;
    if (floor_ms > 0)
        printf("  floor, the work of 8 more rows at this machine's peaks (int8, f32 FMA): %.2f ms, so k=8 costs at "
               "least x%.2f\n", 8 * floor_ms, 1 + 8 * floor_ms / cost[0]);

    if (mi.n_nextn) mtp_costs(m, threads, rounds, cost[0]);

    json_t *root;
    transcript t = load_transcript(argv[2], &root);
    printf("\n2. prompt lookup on %s (%zu messages), replayed as if generated; speed-up projected from 1.\n", argv[2],
           t.n);
    double speedup = 0;
    const uint32_t lengths[] = {2, 4, 8, 16};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        const replay_sum s = replay_transcript(m, &t, lengths[i], false, cost);
        const double x = s.plain_ms / s.spec_ms;
        printf("  draft_max %-2u  %llu tokens in %llu steps: %.2f tokens/step, guessed %llu kept %llu (%.0f%%), "
               "projected x%.2f\n", lengths[i], (unsigned long long)s.tokens, (unsigned long long)s.steps,
               (double)s.tokens / (double)s.steps, (unsigned long long)s.drafted, (unsigned long long)s.kept,
               s.drafted ? 100.0 * s.kept / s.drafted : 0.0, x);
        if (lengths[i] == FKV_SPEC_DEFAULT_DRAFT) speedup = x;
    }
    /* the same replay at the cost the bar implies (verify8 <= 1.3: about 1 + 0.04 k), to say what this drafter
     * would gain there */
    double linear[MAX_K + 1];
    for (int k = 0; k <= MAX_K; k++) linear[k] = cost[0] * (1.0 + LINEAR_ROW_COST * k);
    const replay_sum s = replay_transcript(m, &t, FKV_SPEC_DEFAULT_DRAFT, false, linear);
    printf("  draft_max %-2u  at a cost of 1 + %.2f k a step instead: projected x%.2f\n", FKV_SPEC_DEFAULT_DRAFT,
           LINEAR_ROW_COST, s.plain_ms / s.spec_ms);
    /* the ceiling of lookup on this transcript: the right occurrence of the last id, whenever one exists */
    const replay_sum o = replay_transcript(m, &t, FKV_SPEC_DEFAULT_DRAFT, true, cost);
    printf("  draft_max %-2u  choosing the right earlier occurrence every time (a ceiling): %.2f tokens/step, "
           "projected x%.2f\n", FKV_SPEC_DEFAULT_DRAFT, (double)o.tokens / (double)o.steps, o.plain_ms / o.spec_ms);
    free(t.msgs);
    free(t.calls);
    json_decref(root);
    fkv_model_free(m);
    stories_end_to_end(argv[3], threads, rounds > 3 ? 3 : rounds);
    printf("spec verify8=%.2f speedup=%.2f\n", cost[8] / cost[0], speedup);
    return 0;
}
