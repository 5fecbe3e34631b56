/* flatkv_bench.c — one prefill or decode case of flatkv through include/flatkv.h, timed (bench/compare).
 *
 * usage: flatkv_bench MODEL info
 *        flatkv_bench MODEL IDS THREADS prefill N [N_CACHED]
 *        flatkv_bench MODEL IDS THREADS decode N_PROMPT N_GEN
 * `info` prints the model's shape, weight_bytes and the kernel variant that loaded it (FLATKV_KERNELS or the
 * best this CPU runs) as JSON (the script derives ids and the roofline from it); the cases print harness.h's
 * JSON line. The context holds exactly the positions the case needs.
 */
#include "flatkv.h"
#include "gguf/gguf.h"
#include "harness.h"

/* What one token's matrices are: *bytes the weights a decode step streams, *all those a prefill chunk reads, *macs
 * their multiply-adds. Every 2-D tensor but token_embd (only its rows for the ids are gathered) unless it is also the
 * output matrix; of a mixture of experts' 3-D expert tensors, a decode step reads the k experts a token routes to
 * (expert_used_count of expert_count: the roofline's bytes are the active experts', not the file's), a prefill
 * chunk all of them. Read from the file, so that mixes of types (q4_k_m) count each matrix at its own type. */
static int weight_bytes(const char *path, uint64_t *bytes, uint64_t *all, uint64_t *macs, fkv_error *err) {
    gguf_file *f = gguf_open(path, err);
    if (!f) return -1;
    bool tied = !gguf_find_tensor(f, "output.weight");
    uint32_t n_expert = 1, n_used = 1;
    gguf_str arch;
    char key[96];
    if (!gguf_get_str(f, "general.architecture", &arch, err)) {
        snprintf(key, sizeof key, "%.*s.expert_count", (int)arch.len, arch.ptr);
        if (gguf_find(f, key)) gguf_get_u32(f, key, &n_expert, err);
        snprintf(key, sizeof key, "%.*s.expert_used_count", (int)arch.len, arch.ptr);
        if (gguf_find(f, key)) gguf_get_u32(f, key, &n_used, err);
    }
    *bytes = *all = *macs = 0;
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ti = &f->tensors[t];
        if (ti->n_dims == 2 && (tied || !gguf_str_eq(ti->name, "token_embd.weight"))) {
            *bytes += ti->nbytes, *all += ti->nbytes, *macs += ti->ne[0] * ti->ne[1];
        } else if (ti->n_dims == 3) {
            *bytes += ti->nbytes / n_expert * n_used, *all += ti->nbytes;
            *macs += ti->ne[0] * ti->ne[1] * n_used;
        }
    }
    gguf_close(f);
    return 0;
}

static int print_info(const char *path) {
    fkv_error err;
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) {
        fprintf(stderr, "flatkv_bench: %s\n", err.msg);
        return 1;
    }
    fkv_model_info mi = fkv_model_get_info(m);
    fkv_model_free(m);
    uint64_t bytes, all, macs;
    if (weight_bytes(path, &bytes, &all, &macs, &err)) {
        fprintf(stderr, "flatkv_bench: %s\n", err.msg);
        return 1;
    }
    printf("{\"n_vocab\":%u,\"dim\":%u,\"hidden\":%u,\"n_layers\":%u,\"n_heads\":%u,\"n_kv_heads\":%u,"
           "\"head_dim\":%u,\"weight_bytes\":%llu,\"prefill_weight_bytes\":%llu,\"macs\":%llu,"
           "\"kernels\":\"%s\"}\n",
           mi.n_vocab, mi.dim, mi.hidden, mi.n_layers, mi.n_heads, mi.n_kv_heads, mi.head_dim,
           (unsigned long long)bytes, (unsigned long long)all, (unsigned long long)macs, fkv_kernels_name());
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[2], "info") == 0) return print_info(argv[1]);
    harness_args a;
    if (harness_parse(argc, argv, &a) != 0) return 2;
    if (a.verify) {
        fprintf(stderr, "flatkv_bench: flatkv's verify costs are bench/spec's (flatkv_spec)\n");
        return 2;
    }

    fkv_error err;
    fkv_model *m = fkv_model_load(a.model, &err);
    if (!m) {
        fprintf(stderr, "flatkv_bench: %s\n", err.msg);
        return 1;
    }
    int32_t n_vocab = (int32_t)fkv_model_get_info(m).n_vocab;
    int32_t *ids = harness_read_ids(a.ids_path, a.n_cached + a.n_prompt, n_vocab);
    int32_t *gen = calloc((size_t)a.n_gen + 1, sizeof *gen);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.n_ctx = (uint32_t)(a.n_cached + a.n_prompt + a.n_gen);
    cp.n_threads = a.threads;
    fkv_ctx *c = NULL;
    int rc = -1;
    for (cp.kv_type = 0; fkv_kv_type_name(cp.kv_type) && strcmp(fkv_kv_type_name(cp.kv_type), a.kv); cp.kv_type++) {}
    if (!fkv_kv_type_name(cp.kv_type)) {
        snprintf(err.msg, sizeof err.msg, "FKV_BENCH_KV=%s is none of auto, f16, f32, q8_0, q4_0", a.kv);
        goto done;
    }
    if (!ids || !gen || !logits || !(c = fkv_ctx_new(m, &cp, &err))) goto done;
    a.kv = fkv_kv_type_name(fkv_ctx_kv_type(c));

    rc = fkv_eval(c, ids, HARNESS_WARMUP_IDS, 0, 1, logits, &err);
    double seconds = 0.0, cpu_seconds = 0.0;
    if (rc == 0 && !a.decode) {
        if (a.n_cached) rc = fkv_eval(c, ids, (uint32_t)a.n_cached, 0, 1, logits, &err);
        double t0 = harness_now(), c0 = harness_cpu();
        if (rc == 0) rc = fkv_eval(c, ids + a.n_cached, (uint32_t)a.n_prompt, (uint32_t)a.n_cached, 1, logits, &err);
        seconds = harness_now() - t0;
        cpu_seconds = harness_cpu() - c0;
    } else if (rc == 0) {
        rc = fkv_eval(c, ids, (uint32_t)a.n_prompt, 0, 1, logits, &err);
        double t0 = harness_now(), c0 = harness_cpu();
        for (int i = 0; rc == 0 && i < a.n_gen; i++) {
            gen[i] = harness_argmax(logits, n_vocab);
            rc = fkv_eval(c, &gen[i], 1, (uint32_t)(a.n_prompt + i), 1, logits, &err);
        }
        seconds = harness_now() - t0;
        cpu_seconds = harness_cpu() - c0;
    }
    if (rc == 0) harness_print("flatkv", "kernels", fkv_kernels_name(), &a, seconds, cpu_seconds, gen);

done:
    /* harness_read_ids explains its own failures; fkv_ctx_new and fkv_eval leave theirs in err. */
    if (rc != 0 && ids && gen && logits) fprintf(stderr, "flatkv_bench: %s\n", err.msg);
    fkv_ctx_free(c);
    fkv_model_free(m);
    free(logits);
    free(gen);
    free(ids);
    return rc == 0 ? 0 : 1;
}
