/* bench/swa — what a sliding-window model's cache holds over a long conversation, against --swa-full.
 *
 * A conversation the way a chat client drives it: each turn re-sends the last prompt, the reply fed back as the
 * ids that were generated, and NEW new ids, and gets a reply of REPLY ids (fed by decode steps). Two engines run it
 * side by side, one with the window layers kept apart (the default) and one with --swa-full; per turn it prints the
 * reuse of each (agreed / reused), the window layers' bytes each holds, and checks that both answer alike (KV
 * digest after the prompt and a digest of every row of logits). Memory does not depend on the weights: a small
 * model of a real model's window, block and layer pattern gives the real proportions.
 *
 * usage: swa MODEL [turns (20)] [new ids per turn (200)] [reply ids (100)]
 */
#include <stdio.h>
#include <stdlib.h>
#define XXH_STATIC_LINKING_ONLY /* a state on the stack */
#include <xxhash.h>

#include "flatkv.h"

static void fill(int32_t *ids, uint32_t n, uint32_t n_vocab, uint64_t seed) {
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(3 + (seed >> 33) % (n_vocab - 3));
    }
}

typedef struct {
    fkv_reuse reuse;
    uint64_t kv, logits;
} turn;

static int run_turn(fkv_engine *e, const int32_t *ids, uint32_t n, const int32_t *reply, uint32_t n_reply,
                    uint32_t n_vocab, turn *out, fkv_error *err) {
    float *logits = malloc(sizeof(float) * n_vocab);
    fkv_eseq *s = logits ? fkv_engine_start(e, NULL, ids, n, NULL, err) : NULL;
    if (!s) {
        free(logits);
        return -1;
    }
    out->reuse = fkv_eseq_reuse(s);
    int rc;
    while ((rc = fkv_engine_prefill(e, s, logits, err)) == 0) {}
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    if (rc > 0) {
        out->kv = fkv_engine_kv_digest(e, s, n);
        XXH3_64bits_update(&st, logits, sizeof(float) * n_vocab);
    }
    for (uint32_t i = 0; rc > 0 && i < n_reply; i++) {
        if (fkv_engine_decode(e, &s, &reply[i], 1, logits, NULL, err)) rc = -1;
        else XXH3_64bits_update(&st, logits, sizeof(float) * n_vocab);
    }
    out->logits = XXH3_64bits_digest(&st);
    fkv_engine_finish(e, s);
    free(logits);
    return rc > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: swa MODEL [turns] [new ids per turn] [reply ids]\n");
        return 2;
    }
    const uint32_t turns = argc > 2 ? (uint32_t)atoi(argv[2]) : 20, new_ids = argc > 3 ? (uint32_t)atoi(argv[3]) : 200,
                   reply_ids = argc > 4 ? (uint32_t)atoi(argv[4]) : 100, total = turns * (new_ids + reply_ids);
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "swa: %s\n", err.msg);
        return 1;
    }
    const fkv_model_info info = fkv_model_get_info(m);
    fkv_engine *e[2] = {0};
    for (int full = 0; full < 2; full++) {
        fkv_engine_params p;
        fkv_engine_default_params(&p, NULL);
        p.ctx.n_ctx = total + 1;
        p.kv_mem = (size_t)1 << 30;
        p.swa_full = full;
        if (!(e[full] = fkv_engine_new(m, &p, &err))) {
            fprintf(stderr, "swa: %s\n", err.msg);
            return 1;
        }
    }
    const fkv_engine_stats s0 = fkv_engine_get_stats(e[0]), f0 = fkv_engine_get_stats(e[1]);
    if (!s0.window_block_bytes) {
        fprintf(stderr, "swa: %s has no sliding-window layers\n", argv[1]);
        return 1;
    }
    /* --swa-full's blocks hold every layer; the window layers' share of them is what the split pool's block is */
    const double window_share = (double)s0.window_block_bytes / (double)f0.block_bytes;
    int32_t *conv = malloc(sizeof(int32_t) * total);
    uint32_t n = 0, last_prompt = 0;
    int bad = 0;
    printf("turn  prompt  agreed  reused(apart/full)  window MB apart  window MB full  apart/full\n");
    for (uint32_t t = 0; t < turns && !bad; t++) {
        fill(conv + n, new_ids, info.n_vocab, 1000 + t);
        n += new_ids;
        fill(conv + n, reply_ids, info.n_vocab, 5000 + t);
        turn r[2];
        for (int full = 0; full < 2; full++)
            if (run_turn(e[full], conv, n, conv + n, reply_ids, info.n_vocab, &r[full], &err)) {
                fprintf(stderr, "swa: turn %u: %s\n", t, err.msg);
                return 1;
            }
        if (r[0].kv != r[1].kv || r[0].logits != r[1].logits) {
            fprintf(stderr, "swa: turn %u: the two engines answered differently\n", t);
            bad = 1;
        }
        const fkv_engine_stats sa = fkv_engine_get_stats(e[0]), sf = fkv_engine_get_stats(e[1]);
        const double apart = (double)sa.window_blocks_in_use * (double)sa.window_block_bytes / 1e6;
        const double full = (double)sf.blocks_in_use * (double)sf.block_bytes * window_share / 1e6;
        printf("%4u  %6u  %6u  %8u/%-8u  %15.2f  %14.2f  %9.2f%s\n", t, n, r[0].reuse.agreed, r[0].reuse.reused,
               r[1].reuse.reused, apart, full, apart / full,
               r[0].reuse.reused * 10 < last_prompt * 9 ? "  (under 90% of the last prompt)" : "");
        last_prompt = n;
        n += reply_ids;
    }
    printf("window layers apart: %llu blocks given back, %llu window fallbacks; answers %s\n",
           (unsigned long long)fkv_engine_get_stats(e[0]).window_blocks_dropped,
           (unsigned long long)fkv_engine_get_stats(e[0]).window_fallbacks, bad ? "DIFFER" : "identical");
    free(conv);
    fkv_engine_free(e[0]);
    fkv_engine_free(e[1]);
    fkv_model_free(m);
    return bad;
}
