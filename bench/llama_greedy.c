/* llama_greedy.c — llama.cpp's greedy continuation of given ids, and the logits of every step (bench/refcheck).
 *
 * usage: llama_greedy MODEL IDS.json N_GEN LOGITS_OUT [f32|f16]
 * IDS.json is a JSON array of token ids (the same file `flatkv generate --prompt-ids` reads; parsed here by a
 * few lines, not a JSON library: integers, commas, brackets, spaces). The prompt goes in one llama_decode, then
 * N_GEN steps each feed the argmax of the last logits (the first highest, as flatkv's greedy sampler). LOGITS_OUT
 * receives the float32 logits every token was chosen from, row after row — the layout of `flatkv generate
 * --logits`. KV f32 (default) or f16; flash attention off, so the f32 KV is read in f32; one sequence, the whole
 * window kept (swa_full). Prints one JSON line {"tokens": [...]}.
 * Compiled against llama.h of the peer's source bundle, linked to its prebuilt libraries (bench/refcheck).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_peer.h"

/* The integers of a JSON array of integers; NULL when the file holds anything else. */
static llama_token *read_ids(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    int cap = 256, len = 0, c;
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    while ((c = fgetc(f)) != EOF && c != '[') {}
    while (ids && c != EOF) {
        long v;
        if (fscanf(f, " %ld", &v) != 1) break;
        if (len == cap) ids = realloc(ids, sizeof *ids * (size_t)(cap *= 2));
        if (ids) ids[len++] = (llama_token)v;
        while ((c = fgetc(f)) == ' ' || c == '\n') {}
        if (c != ',') break;
    }
    fclose(f);
    if (!ids || c != ']' || len == 0) {
        free(ids);
        return NULL;
    }
    *n = len;
    return ids;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 6 || (argc == 6 && strcmp(argv[5], "f32") && strcmp(argv[5], "f16"))) {
        fprintf(stderr, "usage: llama_greedy MODEL IDS.json N_GEN LOGITS_OUT [f32|f16]\n");
        return 2;
    }
    const int n_gen = atoi(argv[3]);
    const bool f16 = argc == 6 && !strcmp(argv[5], "f16");
    int n_prompt = 0;
    llama_token *ids = read_ids(argv[2], &n_prompt);
    if (!ids || n_gen < 1) {
        fprintf(stderr, "llama_greedy: %s is not a JSON array of ids, or N_GEN < 1\n", argv[2]);
        return 2;
    }
    struct llama_model *model = llama_peer_load("llama_greedy", argv[1]);
    if (!model) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen);
    cp.n_batch = cp.n_ubatch = (uint32_t)n_prompt;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.swa_full = true;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    FILE *out = fopen(argv[4], "wb");
    int rc = !ctx || !out;
    if (!ctx) fprintf(stderr, "llama_greedy: llama.cpp could not create a context\n");
    if (!out) fprintf(stderr, "llama_greedy: cannot write %s\n", argv[4]);
    if (!rc) rc = llama_decode(ctx, llama_batch_get_one(ids, n_prompt));
    printf("{\"tokens\": [");
    for (int i = 0; rc == 0 && i < n_gen; i++) {
        const float *logits = llama_get_logits_ith(ctx, -1);
        fwrite(logits, sizeof(float), (size_t)n_vocab, out);
        llama_token id = argmax(logits, n_vocab);
        printf("%s%d", i ? ", " : "", id);
        if (i + 1 < n_gen) rc = llama_decode(ctx, llama_batch_get_one(&id, 1));
    }
    printf("]}\n");
    if (rc) fprintf(stderr, "llama_greedy: llama_decode returned %d\n", rc);
    if (out) fclose(out);
    if (ctx) llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return rc ? 1 : 0;
}
