/* bench/kvtype — decode speed and logit distance of the KV storage types, side by side.
 *
 * At long context each decode step reads the whole KV (110M at 4k positions: 151 MB of f16 K/V against 116 MB of
 * weights), so storing K/V rows quantized (--kv-type q8_0, q4_0) is the other half of decode speed. This prefills the
 * same prompt (random ids) into one context per type, then decodes greedily from its end, repetition after
 * repetition with the types interleaved (so drift of the machine falls on all alike), overwriting the same positions.
 *
 * Quality beside speed, against f32 K/V: the logits of the prompt's last LOGIT_ROWS positions (max and mean |Δ|, and the
 * share of positions whose top token agrees), and how many of the greedy tokens equal f32's (the first divergence
 * too: after it the inputs differ).
 *
 * usage: kvtype MODEL [prompt (default 4032)] [decode steps (default 64)] [repetitions (default 5)] [threads (2)]
 * Last line: kvtype q8_0=X q4_0=Y (decode tok/s relative to f16, medians).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flatkv.h"
#include "harness.h"

#define LOGIT_ROWS 256
#define N_TYPES 4
#define F16 1 /* the type speeds are compared with; the distances are from f32's logits (types[0]) */

static const fkv_kv_type types[N_TYPES] = {FKV_KV_F32, FKV_KV_F16, FKV_KV_Q8_0, FKV_KV_Q4_0};
static const char *const names[N_TYPES] = {"f32", "f16", "q8_0", "q4_0"};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int32_t argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static void die(const char *what, const fkv_error *err) {
    fprintf(stderr, "kvtype: %s: %s\n", what, err->msg);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: kvtype MODEL [prompt] [decode steps] [repetitions] [threads]\n");
        return 2;
    }
    const uint32_t n_prompt = argc > 2 ? (uint32_t)atoi(argv[2]) : 4032;
    const uint32_t n_gen = argc > 3 ? (uint32_t)atoi(argv[3]) : 64;
    const int reps = argc > 4 ? atoi(argv[4]) : 5, threads = argc > 5 ? atoi(argv[5]) : 2;
    if (n_prompt < LOGIT_ROWS || n_gen < 2 || reps < 1 || reps > 64) {
        fprintf(stderr, "kvtype: a prompt of at least %d, 2 decode steps or more, 1..64 repetitions\n", LOGIT_ROWS);
        return 2;
    }
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(argv[1], &err);
    if (!m) die(argv[1], &err);
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    int32_t *prompt = malloc(sizeof(int32_t) * n_prompt);
    uint64_t seed = 7;
    for (uint32_t i = 0; i < n_prompt; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = (int32_t)(3 + (seed >> 33) % (n_vocab - 3));
    }
    fkv_ctx *ctx[N_TYPES];
    float *logits[N_TYPES], *row = malloc(sizeof(float) * n_vocab);
    int32_t *gen[N_TYPES];
    double tps[N_TYPES][64];
    for (int t = 0; t < N_TYPES; t++) {
        fkv_ctx_params cp = fkv_ctx_default_params();
        cp.n_ctx = n_prompt + n_gen;
        cp.kv_type = types[t];
        cp.n_threads = threads;
        if (!(ctx[t] = fkv_ctx_new(m, &cp, &err))) die(names[t], &err);
        logits[t] = malloc(sizeof(float) * n_vocab * LOGIT_ROWS);
        gen[t] = malloc(sizeof(int32_t) * n_gen);
        const double t0 = now_ms();
        if (fkv_eval(ctx[t], prompt, n_prompt, 0, LOGIT_ROWS, logits[t], &err)) die(names[t], &err);
        fprintf(stderr, "kvtype: %s prefill of %u: %.0f ms\n", names[t], n_prompt, now_ms() - t0);
    }
    for (int r = 0; r < reps; r++)
        for (int t = 0; t < N_TYPES; t++) {
            gen[t][0] = argmax(logits[t] + (size_t)(LOGIT_ROWS - 1) * n_vocab, n_vocab);
            const double t0 = now_ms();
            for (uint32_t i = 0; i + 1 < n_gen; i++) {
                if (fkv_eval(ctx[t], &gen[t][i], 1, n_prompt + i, 1, row, &err)) die(names[t], &err);
                gen[t][i + 1] = argmax(row, n_vocab);
            }
            tps[t][r] = (n_gen - 1) / ((now_ms() - t0) / 1e3);
        }
    printf("kernels %s, %d threads, %u prompt positions, %u decode steps (decode at %u..%u), %d repetitions\n",
           fkv_kernels_name(), threads, n_prompt, n_gen, n_prompt, n_prompt + n_gen - 2, reps);
    printf("%5s %9s %17s %15s %8s | %11s %11s %9s | %9s %10s\n", "kv", "tok/s med", "quartiles", "min..max", "vs f16",
           "max|dlogit|", "mean|dlogit|", "top1 same", "greedy=", "first diff");
    double median[N_TYPES];
    for (int t = 0; t < N_TYPES; t++) {
        harness_sort(tps[t], (size_t)reps);
        median[t] = reps % 2 ? tps[t][reps / 2] : (tps[t][reps / 2 - 1] + tps[t][reps / 2]) / 2;
    }
    for (int t = 0; t < N_TYPES; t++) {
        double max_d = 0, sum_d = 0;
        uint32_t top1 = 0, same = 0, first = n_gen;
        for (uint32_t p = 0; p < LOGIT_ROWS; p++) {
            const float *a = logits[0] + (size_t)p * n_vocab, *b = logits[t] + (size_t)p * n_vocab;
            for (uint32_t v = 0; v < n_vocab; v++) {
                const double d = fabs((double)a[v] - (double)b[v]);
                max_d = d > max_d ? d : max_d;
                sum_d += d;
            }
            top1 += argmax(a, n_vocab) == argmax(b, n_vocab);
        }
        for (uint32_t i = 0; i < n_gen; i++) {
            same += gen[t][i] == gen[0][i];
            if (gen[t][i] != gen[0][i] && first == n_gen) first = i;
        }
        printf("%5s %9.1f %8.1f..%-7.1f %7.1f..%-6.1f %7.2fx | %11.4f %11.5f %5u/%u | %4u/%u %10u\n", names[t],
               median[t], tps[t][reps / 4], tps[t][reps - 1 - reps / 4], tps[t][0], tps[t][reps - 1],
               median[t] / median[F16], max_d, sum_d / ((double)LOGIT_ROWS * n_vocab), top1,
               LOGIT_ROWS, same, n_gen, first);
    }
    double spread = 0, mean = 0; /* the scale the distances compare with: the f32 logits' standard deviation */
    for (uint32_t v = 0; v < n_vocab; v++) mean += logits[0][v];
    mean /= n_vocab;
    for (uint32_t v = 0; v < n_vocab; v++) spread += (logits[0][v] - mean) * (logits[0][v] - mean);
    printf("f32 logits at position %u: standard deviation %.4f\n", n_prompt - LOGIT_ROWS, sqrt(spread / n_vocab));
    printf("kvtype q8_0=%.2f q4_0=%.2f\n", median[2] / median[F16], median[3] / median[F16]);
    for (int t = 0; t < N_TYPES; t++) {
        fkv_ctx_free(ctx[t]);
        free(logits[t]);
        free(gen[t]);
    }
    free(row);
    free(prompt);
    fkv_model_free(m);
    return 0;
}
