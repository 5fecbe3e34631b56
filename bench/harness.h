/* harness.h — what flatkv_bench.c and llama_bench.c share, so both engines are timed the same way.
 *
 * WHY: the comparison is only fair if both harnesses read the same token ids, time the same span with the
 * same clock, pick the next token by the same argmax and report peak RSS the same way; one copy of that
 * code makes it so.
 *
 * Each harness runs one case per process (so ru_maxrss is that case's peak) and prints one JSON line:
 *   {"engine", "kernels" (flatkv) or "ggml_cpu" (llama.cpp): the CPU code variant the engine ran, "kv" (the K/V
 *    storage it took: FKV_BENCH_KV, auto resolved), "case"
 *    ("prefill"|"decode"), "n_prompt", "n_cached", "n_gen", "threads", "seconds", "tok_per_s", "cpu_share",
 *    "max_rss_mb", "tokens" (the greedy ids of a decode case)}
 * cpu_share: CPU time the process got during the timed span over threads × wall time; well under 1 means
 * something else ran on these cores (or the engine left its threads idle), and the figure is suspect.
 * prefill: one call over n_prompt ids, timed — after n_cached ids at positions before them (untimed: the
 * conversation so far, cached), where the case names them. decode: n_prompt ids untimed, then n_gen single-token
 * steps fed with the argmax of the previous logits, timed together.
 * verify (bench/spec, llama_bench only: flatkv's side is bench/spec.c's own): n_prompt ids untimed, then forwards of
 * 1 + k ids with logits at every one, k = 0..n_gen, each rewound to n_prompt, `rounds` times with the k interleaved;
 * one JSON line {"engine", "ggml_cpu", "case": "verify", "n_prompt", "threads", "rounds", "ms": median per k}.
 */
#ifndef FKV_BENCH_HARNESS_H
#define FKV_BENCH_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Ids of the warm-up call that runs before the timed span (first-touch page faults of the mapped
 * weights and one-time allocations are not what is measured). */
#define HARNESS_WARMUP_IDS 16

/* Functions are static inline: each harness uses only some of them. */

typedef struct {
    const char *model;
    const char *ids_path;
    int threads;
    int decode; /* 0: prefill case, 1: decode case */
    int verify; /* 1: verify case (decode 0), n_gen its largest k */
    int n_prompt;
    int n_cached; /* prefill: ids before the timed ones, computed untimed */
    int n_gen;
    int rounds; /* verify */
    const char *kv; /* K/V storage: FKV_BENCH_KV (auto, f16, f32, q8_0, q4_0; default auto), as the engine took it */
} harness_args;

/* Parse `MODEL IDS THREADS prefill N [N_CACHED]`, `MODEL IDS THREADS decode N_PROMPT N_GEN` or `MODEL IDS THREADS
 * verify N_PROMPT K_MAX ROUNDS`; 0 or -1 (printed). */
static inline int harness_parse(int argc, char **argv, harness_args *a) {
    memset(a, 0, sizeof *a);
    if (argc < 6) goto usage;
    a->model = argv[1];
    a->ids_path = argv[2];
    a->threads = atoi(argv[3]);
    a->n_prompt = atoi(argv[5]);
    if (strcmp(argv[4], "prefill") == 0 && (argc == 6 || argc == 7)) {
        a->decode = 0;
        a->n_cached = argc == 7 ? atoi(argv[6]) : 0;
        if (a->n_cached < 0) goto usage;
    } else if (strcmp(argv[4], "decode") == 0 && argc == 7) {
        a->decode = 1;
        a->n_gen = atoi(argv[6]);
        if (a->n_gen < 1) goto usage;
    } else if (strcmp(argv[4], "verify") == 0 && argc == 8) {
        a->verify = 1;
        a->n_gen = atoi(argv[6]);
        a->rounds = atoi(argv[7]);
        if (a->n_gen < 0 || a->n_gen > 64 || a->rounds < 1) goto usage;
    } else {
        goto usage;
    }
    if (a->threads < 1 || a->n_prompt < HARNESS_WARMUP_IDS) goto usage;
    a->kv = getenv("FKV_BENCH_KV") ? getenv("FKV_BENCH_KV") : "auto";
    return 0;
usage:
    fprintf(stderr, "usage: %s MODEL IDS THREADS prefill N [N_CACHED] | ... decode N_PROMPT N_GEN | ... verify N_PROMPT K_MAX ROUNDS\n",
            argv[0]);
    return -1;
}

/* Read n whitespace-separated ids from path, each in [0, n_vocab). NULL (printed) on failure. */
static inline int32_t *harness_read_ids(const char *path, int n, int32_t n_vocab) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open ids file %s\n", path);
        return NULL;
    }
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    int i = 0;
    long v;
    while (ids && i < n && fscanf(f, "%ld", &v) == 1) {
        if (v < 0 || v >= n_vocab) {
            fprintf(stderr, "%s: id %ld at index %d is outside the vocabulary (%d)\n", path, v, i, (int)n_vocab);
            break;
        }
        ids[i++] = (int32_t)v;
    }
    fclose(f);
    if (ids && i == n) return ids;
    fprintf(stderr, "%s: need %d valid ids, read %d\n", path, n, i);
    free(ids);
    return NULL;
}

static inline double harness_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (user + system) of all the process's threads so far. */
static inline double harness_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sort n timings ascending, for medians and quartiles (bench/spec.c and bench/kvtype.c take this one too). */
static inline int harness_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static inline void harness_sort(double *v, size_t n) { qsort(v, n, sizeof *v, harness_cmp_double); }

/* Greedy choice: the largest logit, ties to the lowest id (flatkv's greedy rule). */
static inline int32_t harness_argmax(const float *logits, int32_t n_vocab) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* variant_key: "kernels" or "ggml_cpu" (above); variant: its value. */
static inline void harness_print(const char *engine, const char *variant_key, const char *variant,
                                 const harness_args *a, double seconds, double cpu_seconds, const int32_t *tokens) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int n_timed = a->decode ? a->n_gen : a->n_prompt;
    printf("{\"engine\":\"%s\",\"%s\":\"%s\",\"kv\":\"%s\",\"case\":\"%s\",\"n_prompt\":%d,\"n_cached\":%d,"
           "\"n_gen\":%d,\"threads\":%d,\"seconds\":%.6f,\"tok_per_s\":%.3f,\"cpu_share\":%.3f,\"max_rss_mb\":%.1f,\"tokens\":[",
           engine, variant_key, variant, a->kv, a->decode ? "decode" : "prefill", a->n_prompt, a->n_cached, a->n_gen, a->threads,
           seconds,
           (double)n_timed / seconds, cpu_seconds / (seconds * a->threads), (double)ru.ru_maxrss / 1024.0);
    for (int i = 0; a->decode && i < a->n_gen; i++) printf("%s%d", i ? "," : "", (int)tokens[i]);
    printf("]}\n");
}

#ifdef HARNESS_MULTI
/* bench/multi's conversations, shared by multi_flatkv.c and multi_llama.c (they define HARNESS_MULTI).
 *
 * K agent-like conversations over `turns` rounds. Every conversation starts with the same MULTI_SYSTEM ids (a
 * system prompt with tool definitions); its turn t adds MULTI_USER ids of its own; the engine generates up to
 * MULTI_GEN ids greedily; the next turn's prompt is the previous prompt, the ids generated, then the next
 * MULTI_USER ids — what a client sends back. The ids file holds the system prompt, then the user messages in
 * round order: conversation c's turn t at MULTI_SYSTEM + (t·K + c)·MULTI_USER.
 *
 * Each harness prints one JSON line: {"engine", "k", "turns", "threads", "seconds" (all rounds), "cpu_share",
 * "max_rss_mb", "gen_tokens", "prompt_tokens" (computed, not reused), "cached_tokens", per turn t and
 * conversation c at [t·K + c]: "prompt_len", "cached", "n_gen", "latency_ms" (from the round's start to that
 * conversation's last generated id), "round_s" per round, and "kv" (the engine's own KV figures)}.
 */
#define MULTI_SYSTEM 1024
#define MULTI_USER 200
#define MULTI_GEN 32

typedef struct {
    const char *model;
    const char *ids_path;
    int threads;
    int k;
    int turns;
} multi_args;

/* Parse `MODEL IDS THREADS K TURNS`; 0 or -1 (printed). */
static inline int multi_parse(int argc, char **argv, multi_args *a) {
    if (argc != 6) goto usage;
    a->model = argv[1];
    a->ids_path = argv[2];
    a->threads = atoi(argv[3]);
    a->k = atoi(argv[4]);
    a->turns = atoi(argv[5]);
    if (a->threads < 1 || a->k < 1 || a->k > 64 || a->turns < 1) goto usage;
    return 0;
usage:
    fprintf(stderr, "usage: %s MODEL IDS THREADS K TURNS   (K in 1..64)\n", argv[0]);
    return -1;
}

static inline int multi_ids_needed(const multi_args *a) { return MULTI_SYSTEM + a->k * a->turns * MULTI_USER; }

/* Most positions one conversation's KV reaches: its last prompt plus the ids fed while generating. */
static inline int multi_max_len(const multi_args *a) {
    return MULTI_SYSTEM + MULTI_USER + (a->turns - 1) * (MULTI_USER + MULTI_GEN) + MULTI_GEN;
}

/* Positions all K conversations hold at the end with the system prompt stored once. */
static inline int multi_kv_positions(const multi_args *a) {
    return MULTI_SYSTEM + a->k * (multi_max_len(a) - MULTI_SYSTEM);
}

/* Each conversation's ids so far (its next prompt is built here) and what each turn measured. */
typedef struct {
    const multi_args *a;
    const int32_t *ids; /* the ids file */
    int32_t **convo;    /* [k][multi_max_len] */
    int *len;           /* [k] */
    int *prompt_len, *cached, *n_gen; /* [turns * k] */
    double *latency_ms;               /* [turns * k] */
    double *round_s;                  /* [turns] */
    int32_t **gen;                    /* [k][MULTI_GEN]: this turn's generated ids */
} multi_run;

static inline void multi_free(multi_run *r) {
    for (int c = 0; r->convo && c < r->a->k; c++) free(r->convo[c]);
    for (int c = 0; r->gen && c < r->a->k; c++) free(r->gen[c]);
    free(r->convo);
    free(r->gen);
    free(r->len);
    free(r->prompt_len);
    free(r->cached);
    free(r->n_gen);
    free(r->latency_ms);
    free(r->round_s);
}

/* 0, or -1 (printed) when out of memory. */
static inline int multi_init(multi_run *r, const multi_args *a, const int32_t *ids) {
    memset(r, 0, sizeof *r);
    r->a = a;
    r->ids = ids;
    size_t cells = (size_t)a->turns * (size_t)a->k;
    r->convo = calloc((size_t)a->k, sizeof *r->convo);
    r->gen = calloc((size_t)a->k, sizeof *r->gen);
    r->len = calloc((size_t)a->k, sizeof *r->len);
    r->prompt_len = calloc(cells, sizeof *r->prompt_len);
    r->cached = calloc(cells, sizeof *r->cached);
    r->n_gen = calloc(cells, sizeof *r->n_gen);
    r->latency_ms = calloc(cells, sizeof *r->latency_ms);
    r->round_s = calloc((size_t)a->turns, sizeof *r->round_s);
    int ok = r->convo && r->gen && r->len && r->prompt_len && r->cached && r->n_gen && r->latency_ms && r->round_s;
    for (int c = 0; ok && c < a->k; c++) {
        r->convo[c] = malloc(sizeof(int32_t) * (size_t)multi_max_len(a));
        r->gen[c] = malloc(sizeof(int32_t) * MULTI_GEN);
        ok = r->convo[c] && r->gen[c];
    }
    if (ok) return 0;
    fprintf(stderr, "out of memory for %d conversations of %d turns\n", a->k, a->turns);
    multi_free(r);
    memset(r, 0, sizeof *r); /* multi_free may be called again */
    return -1;
}

/* Conversation c's prompt for turn t in r->convo[c][0..r->len[c]): the system prompt and the first user
 * message, or the last prompt, the ids generated at turn t-1 (r->n_gen) and the next user message. */
static inline void multi_next_prompt(multi_run *r, int t, int c) {
    const multi_args *a = r->a;
    int32_t *p = r->convo[c];
    if (t == 0) {
        memcpy(p, r->ids, sizeof(int32_t) * MULTI_SYSTEM);
        r->len[c] = MULTI_SYSTEM;
    } else {
        int n = r->n_gen[(t - 1) * a->k + c];
        memcpy(p + r->len[c], r->gen[c], sizeof(int32_t) * (size_t)n);
        r->len[c] += n;
    }
    memcpy(p + r->len[c], r->ids + MULTI_SYSTEM + (t * a->k + c) * MULTI_USER, sizeof(int32_t) * MULTI_USER);
    r->len[c] += MULTI_USER;
    r->prompt_len[t * a->k + c] = r->len[c];
}

static inline void multi_print_ints(const char *key, const int *v, int n) {
    printf(",\"%s\":[", key);
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", v[i]);
    printf("]");
}

/* The JSON line; kv_json: the engine's KV figures as a JSON object. */
static inline void multi_print(const char *engine, const multi_run *r, double seconds, double cpu_seconds,
                        long prompt_tokens, const char *kv_json) {
    const multi_args *a = r->a;
    int cells = a->turns * a->k;
    long gen_tokens = 0, cached_tokens = 0;
    for (int i = 0; i < cells; i++) gen_tokens += r->n_gen[i], cached_tokens += r->cached[i];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"engine\":\"%s\",\"k\":%d,\"turns\":%d,\"threads\":%d,\"seconds\":%.6f,\"cpu_share\":%.3f,"
           "\"max_rss_mb\":%.1f,\"gen_tokens\":%ld,\"prompt_tokens\":%ld,\"cached_tokens\":%ld",
           engine, a->k, a->turns, a->threads, seconds, cpu_seconds / (seconds * a->threads),
           (double)ru.ru_maxrss / 1024.0, gen_tokens, prompt_tokens, cached_tokens);
    multi_print_ints("prompt_len", r->prompt_len, cells);
    multi_print_ints("cached", r->cached, cells);
    multi_print_ints("n_gen", r->n_gen, cells);
    printf(",\"latency_ms\":[");
    for (int i = 0; i < cells; i++) printf("%s%.3f", i ? "," : "", r->latency_ms[i]);
    printf("],\"round_s\":[");
    for (int t = 0; t < a->turns; t++) printf("%s%.6f", t ? "," : "", r->round_s[t]);
    printf("],\"kv\":%s}\n", kv_json);
}
#endif

#endif
