/* bench/growth — per-turn cost of a growing conversation, with the prefix cache and cold.
 *
 * A conversation the way a chat client drives it: each turn re-sends the whole transcript (the last prompt,
 * the reply the model generated, and ~256 new tokens) and generates 32 tokens. One sequence keeps its KV
 * between turns (cache on); another prefills every turn from position 0 (cache off, the cold path). Per
 * turn it prints both walls; then the two numbers the prefix cache is for: the ratio at the largest
 * context, and the time to first token of a repeated long prefix (one new token) against a cold prefill.
 * Exactness is checked on the way: every cached turn's KV digest equals the cold turn's.
 *
 * A third sequence runs every turn as the cached one does, on an engine with the disk tier (--kv-dir, a temporary
 * directory): its decode speed beside the in-memory one's says whether writing blocks costs decode anything. At
 * the end a new engine on the same directory — a restart — answers the last turn from the block files: its time to
 * first token against the cold one's.
 *
 * usage: growth MODEL [max_context (default 4096)] [threads (default 2)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flatkv.h"

#define NEW_PER_TURN 256
#define GEN_PER_TURN 32

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void fill(int32_t *ids, uint32_t n, uint32_t n_vocab, uint64_t seed) {
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(3 + (seed >> 33) % (n_vocab - 3));
    }
}

typedef struct {
    double prefill_ms, decode_ms;
    uint32_t cached, n_gen;
    uint64_t kv;
} turn_stats;

static turn_stats run_turn(fkv_seq *s, fkv_sampler *smp, const int32_t *ids, uint32_t n, uint32_t n_gen,
                           float *logits, int32_t *out) {
    fkv_error err = {0};
    turn_stats t = {0};
    double t0 = now_ms();
    if (fkv_seq_prefill(s, ids, n, logits, &t.cached, &err)) {
        fprintf(stderr, "growth: %s\n", err.msg);
        exit(1);
    }
    double t1 = now_ms();
    fkv_gen_params gp = {.max_tokens = n_gen, .sampler = smp};
    fkv_gen_result res;
    if (n_gen && fkv_seq_generate(s, logits, &gp, out, &res, &err)) {
        fprintf(stderr, "growth: %s\n", err.msg);
        exit(1);
    }
    t.prefill_ms = t1 - t0;
    t.decode_ms = now_ms() - t1;
    t.n_gen = n_gen ? res.n_tokens : 0;
    t.kv = fkv_seq_kv_digest(s, n);
    return t;
}

/* A sequence on an engine of its own (*engine, to free after it), with the disk tier in kv_dir when not NULL. */
static fkv_seq *new_seq(const fkv_model *m, uint32_t n_ctx, int threads, bool cache, const char *kv_dir,
                        fkv_engine **engine) {
    fkv_engine_params p;
    fkv_error err = {0};
    if (fkv_engine_default_params(&p, &err)) {
        fprintf(stderr, "growth: %s\n", err.msg);
        exit(2);
    }
    p.ctx.n_ctx = n_ctx;
    p.ctx.n_threads = threads;
    p.prefix_cache = cache;
    p.kv_dir = kv_dir;
    fkv_seq *s = (*engine = fkv_engine_new(m, &p, &err)) ? fkv_seq_open(*engine, NULL, &err) : NULL;
    if (!s) {
        fprintf(stderr, "growth: %s\n", err.msg);
        exit(2);
    }
    return s;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: growth MODEL [max_context] [threads]\n");
        return 2;
    }
    uint32_t max_ctx = argc > 2 ? (uint32_t)atoi(argv[2]) : 4096;
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "growth: %s\n", err.msg);
        return 2;
    }
    uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    char dir[] = "/tmp/flatkv-growth-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("growth: mkdtemp");
        return 2;
    }
    fkv_engine *warm_e, *cold_e, *disk_e;
    fkv_seq *warm = new_seq(m, max_ctx, threads, true, NULL, &warm_e),
            *cold = new_seq(m, max_ctx, threads, false, NULL, &cold_e),
            *disk = new_seq(m, max_ctx, threads, true, dir, &disk_e);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    fkv_sampler *smp = fkv_sampler_new(&sp, (int32_t)n_vocab);
    float *logits = malloc(sizeof(float) * n_vocab);
    int32_t *convo = malloc(sizeof(int32_t) * max_ctx), gen[GEN_PER_TURN];

    printf("%4s %7s %7s | %10s %10s %8s | %10s %10s %10s | %s\n", "turn", "context", "cached", "warm ms", "cold ms",
           "speedup", "warm tok/s", "cold tok/s", "disk tok/s", "kv");
    uint32_t n = 0, last_prompt = 0;
    double last_ratio = 0, warm_tps = 0, cold_tps = 0, disk_tps = 0;
    double decode_ms[3] = {0}, decoded[3] = {0}; /* warm, cold, disk over every turn: the decode ratios' terms */
    int mismatches = 0;
    for (int turn = 1; n + NEW_PER_TURN + GEN_PER_TURN <= max_ctx; turn++) {
        fill(convo + n, NEW_PER_TURN, n_vocab, (uint64_t)turn);
        n += NEW_PER_TURN;
        turn_stats w = run_turn(warm, smp, convo, n, GEN_PER_TURN, logits, gen);
        turn_stats c = run_turn(cold, smp, convo, n, GEN_PER_TURN, logits, gen);
        turn_stats d = run_turn(disk, smp, convo, n, GEN_PER_TURN, logits, gen);
        double w_ms = w.prefill_ms + w.decode_ms, c_ms = c.prefill_ms + c.decode_ms;
        bool same = w.kv == c.kv && d.kv == c.kv;
        last_prompt = n;
        mismatches += !same;
        warm_tps = (w.n_gen - 1) / (w.decode_ms / 1e3);
        cold_tps = (c.n_gen - 1) / (c.decode_ms / 1e3);
        disk_tps = (d.n_gen - 1) / (d.decode_ms / 1e3);
        const turn_stats *all[3] = {&w, &c, &d};
        for (int k = 0; k < 3; k++) decode_ms[k] += all[k]->decode_ms, decoded[k] += all[k]->n_gen - 1;
        last_ratio = c_ms / w_ms;
        printf("%4d %7u %7u | %10.1f %10.1f %7.2fx | %10.1f %10.1f %10.1f | %s\n", turn, n, w.cached, w_ms, c_ms,
               last_ratio, warm_tps, cold_tps, disk_tps, same ? "equal" : "DIFFERENT");
        fflush(stdout);
        /* The next prompt carries this reply back, as a client would. */
        memcpy(convo + n, gen, sizeof(int32_t) * w.n_gen);
        n += w.n_gen;
    }

    /* A restart: a new engine on the disk tier's directory answers the last turn's prompt from the block files. */
    fkv_seq_free(disk);
    fkv_engine_free(disk_e); /* the queued writes first */
    disk = new_seq(m, max_ctx, threads, true, dir, &disk_e);
    turn_stats r = run_turn(disk, smp, convo, last_prompt, 1, logits, gen);
    turn_stats rc = run_turn(cold, smp, convo, last_prompt, 1, logits, gen);
    const double restart_ratio = (rc.prefill_ms + rc.decode_ms) / (r.prefill_ms + r.decode_ms);
    printf("restarted: %u tokens, %u from disk: first token %.2f ms, %.1f ms cold (kv %s)\n", last_prompt, r.cached,
           r.prefill_ms + r.decode_ms, rc.prefill_ms + rc.decode_ms, r.kv == rc.kv ? "equal" : "DIFFERENT");
    mismatches += r.kv != rc.kv;

    /* A repeated long prefix with one new token: time to the first generated token, cached vs cold. */
    uint32_t long_n = max_ctx / 2 + 1;
    fill(convo, long_n, n_vocab, 4242);
    fkv_seq_clear(warm);
    run_turn(warm, smp, convo, long_n - 1, 0, logits, gen);
    turn_stats w = run_turn(warm, smp, convo, long_n, 1, logits, gen);
    turn_stats c = run_turn(cold, smp, convo, long_n, 1, logits, gen);
    double ttft_ratio = (c.prefill_ms + c.decode_ms) / (w.prefill_ms + w.decode_ms);
    printf("repeated prefix: %u tokens, %u cached: first token %.2f ms cached, %.1f ms cold (kv %s)\n", long_n,
           w.cached, w.prefill_ms + w.decode_ms, c.prefill_ms + c.decode_ms, w.kv == c.kv ? "equal" : "DIFFERENT");
    mismatches += w.kv != c.kv;
    printf("ratio turn_at_%u=%.2f first_token_%u=%.1f restart_first_token_%u=%.1f decode_cached/cold=%.2f "
           "decode_disk/memory=%.2f mismatches=%d\n", n, last_ratio, long_n - 1, ttft_ratio, last_prompt, restart_ratio,
           decoded[0] / decode_ms[0] / (decoded[1] / decode_ms[1]),
           decoded[2] / decode_ms[2] / (decoded[0] / decode_ms[0]), mismatches);

    free(convo);
    free(logits);
    fkv_sampler_free(smp);
    fkv_seq_free(warm);
    fkv_seq_free(cold);
    fkv_seq_free(disk);
    fkv_engine_free(warm_e);
    fkv_engine_free(cold_e);
    fkv_engine_free(disk_e);
    fkv_model_free(m);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm)) fprintf(stderr, "growth: could not remove %s\n", dir);
    return mismatches ? 1 : 0;
}
