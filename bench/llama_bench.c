/* llama_bench.c — one prefill or decode case of llama.cpp through its C API, timed (bench/compare).
 *
 * usage: llama_bench MODEL IDS THREADS prefill N [N_CACHED]
 *        llama_bench MODEL IDS THREADS decode N_PROMPT N_GEN
 *        llama_bench MODEL IDS THREADS verify N_PROMPT K_MAX ROUNDS (bench/spec: what a batch of 1 + k ids costs)
 * Compiled against llama.h from the source bundle node-llama-cpp ships and linked to its prebuilt CPU
 * libraries; LLAMA_LIB_DIR (set by bench/compare) is where ggml's CPU backend variants are loaded from
 * (the prebuilt ggml loads backends at run time and picks the best one for this CPU; the result's "ggml_cpu" names
 * the file it chose).
 * Same cases, ids, argmax and timing as flatkv_bench.c (harness.h). A timed prompt goes in one llama_decode (n_batch =
 * n_ubatch = n_prompt); untimed ids (the cached ones, a decode case's prompt) go in pieces of at most that or 2048;
 * the context holds exactly the positions the case needs. Flash attention is on (the setting for the peer).
 */
#include "harness.h"
#include "llama_peer.h"

/* Keep llama.cpp's warnings and errors (a refused model says why), drop its progress chatter. */
/* The file name of the libggml-cpu-*.so mapped into this process, or "unknown": ggml loads every variant to score
 * it and keeps only the best one for this CPU, which no API names. */
static void ggml_cpu_variant(char *name, size_t cap) {
    snprintf(name, cap, "unknown");
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        const char *file = strstr(line, "/libggml-cpu-");
        const char *end = file ? strstr(file, ".so") : NULL;
        if (end) {
            file++; /* past the '/' */
            snprintf(name, cap, "%.*s", (int)(end + strlen(".so") - file), file);
            break;
        }
    }
    fclose(f);
}

static int decode(struct llama_context *ctx, llama_token *ids, int n) {
    int rc = llama_decode(ctx, llama_batch_get_one(ids, n));
    if (rc != 0) fprintf(stderr, "llama_bench: llama_decode of %d ids returned %d\n", n, rc);
    return rc;
}

/* n ids in pieces of at most `piece` (the context's n_batch). */
static int decode_pieces(struct llama_context *ctx, llama_token *ids, int n, int piece) {
    int rc = 0;
    for (int at = 0; rc == 0 && at < n; at += piece) rc = decode(ctx, ids + at, n - at < piece ? n - at : piece);
    return rc;
}

/* The verify case (harness.h): after the prompt, a batch of 1 + k of the next ids, logits at each, as a speculative
 * decoder verifies k guesses; then the positions are removed again — or, where the memory cannot cut a sequence
 * back (a hybrid's recurrent state), the sequence's state after the prompt is put back, untimed. Prints its JSON
 * line. */
static int verify(struct llama_context *ctx, const llama_token *ids, const harness_args *a, const char *ggml_cpu) {
    const int k_max = a->n_gen, rounds = a->rounds;
    struct llama_batch b = llama_batch_init(k_max + 1, 0, 1);
    double *t = malloc(sizeof *t * (size_t)rounds * (size_t)(k_max + 1));
    const size_t state_size = llama_state_seq_get_size(ctx, 0);
    uint8_t *state = malloc(state_size ? state_size : 1);
    int rc = t && state && llama_state_seq_get_data(ctx, state, state_size, 0) == state_size ? 0 : -1;
    for (int r = -2; rc == 0 && r < rounds; r++) /* two rounds of warm-up */
        for (int k = 0; rc == 0 && k <= k_max; k++) {
            b.n_tokens = k + 1;
            for (int i = 0; i <= k; i++) {
                b.token[i] = ids[a->n_prompt + i];
                b.pos[i] = a->n_prompt + i;
                b.n_seq_id[i] = 1;
                b.seq_id[i][0] = 0;
                b.logits[i] = 1;
            }
            const double t0 = harness_now();
            rc = llama_decode(ctx, b);
            llama_synchronize(ctx);
            if (r >= 0) t[(size_t)k * rounds + r] = (harness_now() - t0) * 1e3;
            if (rc != 0) fprintf(stderr, "llama_bench: llama_decode of %d ids returned %d\n", k + 1, rc);
            else if (!llama_memory_seq_rm(llama_get_memory(ctx), 0, a->n_prompt, -1) &&
                     (!llama_memory_seq_rm(llama_get_memory(ctx), 0, -1, -1) ||
                      !llama_state_seq_set_data(ctx, state, state_size, 0)))
                rc = -1;
        }
    if (rc == 0) {
        printf("{\"engine\":\"llama.cpp\",\"ggml_cpu\":\"%s\",\"case\":\"verify\",\"n_prompt\":%d,\"threads\":%d,"
               "\"rounds\":%d,\"ms\":[", ggml_cpu, a->n_prompt, a->threads, rounds);
        for (int k = 0; k <= k_max; k++) {
            harness_sort(t + (size_t)k * rounds, (size_t)rounds);
            printf("%s%.3f", k ? "," : "", t[(size_t)k * rounds + rounds / 2]);
        }
        printf("]}\n");
    }
    free(t);
    free(state);
    llama_batch_free(b);
    return rc;
}

int main(int argc, char **argv) {
    harness_args a;
    if (harness_parse(argc, argv, &a) != 0) return 2;

    struct llama_model *model = llama_peer_load("llama_bench", a.model);
    if (!model) return 1;
    char ggml_cpu[256];
    ggml_cpu_variant(ggml_cpu, sizeof ggml_cpu);
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int32_t *ids = harness_read_ids(a.ids_path, a.n_cached + a.n_prompt + (a.verify ? a.n_gen + 1 : 0), n_vocab);
    int32_t *gen = calloc((size_t)a.n_gen + 1, sizeof *gen);
    struct llama_context_params cp = llama_context_default_params();
    const int piece = a.decode && a.n_prompt > 2048 ? 2048 : a.n_prompt;
    cp.n_ctx = (uint32_t)(a.n_cached + a.n_prompt + a.n_gen + a.verify);
    cp.n_batch = (uint32_t)piece;
    cp.n_ubatch = (uint32_t)piece;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cp.n_threads = a.threads;
    cp.n_threads_batch = a.threads;
    cp.no_perf = true;
    struct llama_context *ctx = NULL;
    int rc = -1;
    if (!ids || !gen) goto done;
    /* the K/V storage flatkv took (bench/compare passes it on); auto: llama.cpp's own default, f16 */
    static const struct { const char *name; enum ggml_type type; } kv_types[] = {
        {"auto", GGML_TYPE_F16}, {"f16", GGML_TYPE_F16}, {"f32", GGML_TYPE_F32}, {"q8_0", GGML_TYPE_Q8_0},
        {"q4_0", GGML_TYPE_Q4_0}};
    size_t kv = 0;
    while (kv < sizeof kv_types / sizeof *kv_types && strcmp(kv_types[kv].name, a.kv)) kv++;
    if (kv == sizeof kv_types / sizeof *kv_types) {
        fprintf(stderr, "llama_bench: FKV_BENCH_KV=%s is none of auto, f16, f32, q8_0, q4_0\n", a.kv);
        goto done;
    }
    cp.type_k = cp.type_v = kv_types[kv].type;
    a.kv = kv ? a.kv : "f16";
    if (!(ctx = llama_init_from_model(model, cp))) {
        fprintf(stderr, "llama_bench: llama.cpp could not create a context for %s\n", a.model);
        goto done;
    }

    rc = decode(ctx, ids, HARNESS_WARMUP_IDS);
    llama_memory_clear(llama_get_memory(ctx), true);
    double seconds = 0.0, cpu_seconds = 0.0;
    if (rc == 0 && a.verify) {
        rc = decode(ctx, ids, a.n_prompt);
        if (rc == 0) rc = verify(ctx, ids, &a, ggml_cpu);
        goto done;
    }
    if (rc == 0 && !a.decode) {
        rc = decode_pieces(ctx, ids, a.n_cached, piece);
        llama_synchronize(ctx);
        double t0 = harness_now(), c0 = harness_cpu();
        if (rc == 0) rc = decode(ctx, ids + a.n_cached, a.n_prompt);
        llama_synchronize(ctx);
        seconds = harness_now() - t0;
        cpu_seconds = harness_cpu() - c0;
    } else if (rc == 0) {
        rc = decode_pieces(ctx, ids, a.n_prompt, piece);
        llama_synchronize(ctx);
        double t0 = harness_now(), c0 = harness_cpu();
        for (int i = 0; rc == 0 && i < a.n_gen; i++) {
            gen[i] = harness_argmax(llama_get_logits_ith(ctx, -1), n_vocab);
            rc = decode(ctx, &gen[i], 1);
        }
        llama_synchronize(ctx);
        seconds = harness_now() - t0;
        cpu_seconds = harness_cpu() - c0;
    }
    if (rc == 0) harness_print("llama.cpp", "ggml_cpu", ggml_cpu, &a, seconds, cpu_seconds, gen);

done:
    if (ctx) llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(gen);
    free(ids);
    return rc == 0 ? 0 : 1;
}
