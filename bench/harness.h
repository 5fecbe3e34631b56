/* harness.h — what flatkv_bench.c and llama_bench.c share, so both engines are timed the same way.
 *
 * WHY: the comparison is only fair if both harnesses read the same token ids, time the same span with the
 * same clock, pick the next token by the same argmax and report peak RSS the same way; one copy of that
 * code makes it so.
 *
 * Each harness runs one case per process (so ru_maxrss is that case's peak) and prints one JSON line:
 *   {"engine", "case" ("prefill"|"decode"), "n_prompt", "n_gen", "threads", "seconds", "tok_per_s",
 *    "cpu_share", "max_rss_mb", "tokens" (the greedy ids of a decode case)}
 * cpu_share: CPU time the process got during the timed span over threads × wall time; well under 1 means
 * something else ran on these cores (or the engine left its threads idle), and the figure is suspect.
 * prefill: one call over n_prompt ids, timed. decode: n_prompt ids untimed, then n_gen single-token steps
 * fed with the argmax of the previous logits, timed together.
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

typedef struct {
    const char *model;
    const char *ids_path;
    int threads;
    int decode; /* 0: prefill case, 1: decode case */
    int n_prompt;
    int n_gen;
} harness_args;

/* Parse `MODEL IDS THREADS prefill N` or `MODEL IDS THREADS decode N_PROMPT N_GEN`; 0 or -1 (printed). */
static int harness_parse(int argc, char **argv, harness_args *a) {
    memset(a, 0, sizeof *a);
    if (argc < 6) goto usage;
    a->model = argv[1];
    a->ids_path = argv[2];
    a->threads = atoi(argv[3]);
    a->n_prompt = atoi(argv[5]);
    if (strcmp(argv[4], "prefill") == 0 && argc == 6) {
        a->decode = 0;
    } else if (strcmp(argv[4], "decode") == 0 && argc == 7) {
        a->decode = 1;
        a->n_gen = atoi(argv[6]);
        if (a->n_gen < 1) goto usage;
    } else {
        goto usage;
    }
    if (a->threads < 1 || a->n_prompt < HARNESS_WARMUP_IDS) goto usage;
    return 0;
usage:
    fprintf(stderr, "usage: %s MODEL IDS THREADS prefill N | MODEL IDS THREADS decode N_PROMPT N_GEN\n", argv[0]);
    return -1;
}

/* Read n whitespace-separated ids from path, each in [0, n_vocab). NULL (printed) on failure. */
static int32_t *harness_read_ids(const char *path, int n, int32_t n_vocab) {
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

static double harness_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (user + system) of all the process's threads so far. */
static double harness_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Greedy choice: the largest logit, ties to the lowest id (flatkv's greedy rule). */
static int32_t harness_argmax(const float *logits, int32_t n_vocab) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static void harness_print(const char *engine, const harness_args *a, double seconds, double cpu_seconds,
                          const int32_t *tokens) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int n_timed = a->decode ? a->n_gen : a->n_prompt;
    printf("{\"engine\":\"%s\",\"case\":\"%s\",\"n_prompt\":%d,\"n_gen\":%d,\"threads\":%d,\"seconds\":%.6f,"
           "\"tok_per_s\":%.3f,\"cpu_share\":%.3f,\"max_rss_mb\":%.1f,\"tokens\":[",
           engine, a->decode ? "decode" : "prefill", a->n_prompt, a->n_gen, a->threads, seconds,
           (double)n_timed / seconds, cpu_seconds / (seconds * a->threads), (double)ru.ru_maxrss / 1024.0);
    for (int i = 0; a->decode && i < a->n_gen; i++) printf("%s%d", i ? "," : "", (int)tokens[i]);
    printf("]}\n");
}

#endif
