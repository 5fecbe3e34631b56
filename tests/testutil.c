#include "testutil.h"

#include <stdarg.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "flatkv.h"
#include "kernels/dispatch.h"
#include "kernels/quant.h"
#include "model/genmodel.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

const char *tu_data(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", FKV_DATA_DIR, rel);
    if (access(buf, R_OK) != 0) {
        print_message("skipped: needs %s, which is not here\n", buf);
        skip();
    }
    return buf;
}

const char *tu_tmp_path(const char *suffix) {
    static char buf[4][4096];
    static int counter, slot;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/flatkv-test-%d-%d%s", dir, (int)getpid(), counter++, suffix);
    return buf[slot];
}

char *tu_read_file(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (buf) {
        buf[n] = 0;
        if (size) *size = (size_t)n;
    }
    return buf;
}

int tu_write_file(const char *path, const void *data, size_t size) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    int ok = fwrite(data, 1, size, fp) == size;
    return (fclose(fp) == 0 && ok) ? 0 : -1;
}

const char *tu_small_model(int type, uint64_t seed) {
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 128, .hidden = 352, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 512,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = (ggml_type)type, .seed = seed};
    fkv_error err = {0};
    return genmodel_write(&p, path, &err) ? NULL : path;
}

const char *tu_arch_model(const char *arch, int type, uint64_t seed) {
    const char *path = tu_tmp_path(".gguf");
    genmodel_params p = {.dim = 128, .hidden = 256, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2, .n_ctx = 512,
                         .vocab_from = tu_data("models/stories260K.gguf"), .type = (ggml_type)type, .seed = seed,
                         .arch = arch};
    if (!strcmp(arch, "qwen3")) p.head_dim = 64; /* q_dim 256 != dim 128 */
    if (!strcmp(arch, "phi3")) p.rope_dims = 16;
    if (!strcmp(arch, "gpt-oss")) p.window = 20; /* even layers: crosses the 32-key tiles */
    if (strstr(arch, "moe") || !strcmp(arch, "gpt-oss")) { /* 3 of 8 experts: chunks share some, not all */
        p.n_expert = 8, p.n_expert_used = 3, p.n_ff_exp = 64;
        if (!strcmp(arch, "qwen3moe")) p.head_dim = 64;
        if (!strcmp(arch, "glm4moe")) p.rope_dims = 16, p.n_shared = 1, p.n_dense_lead = 1, p.n_nextn = 1;
    }
    if (!strncmp(arch, "qwen35", 6)) p.ssm_k_heads = 4; /* 8 value heads on 4 key heads; layer 3 attention */
    if (!strcmp(arch, "gemma3")) {
        p.n_kv_heads = 1;
        p.head_dim = 64;
        p.window = 20; /* crosses the 32-key tiles */
        p.window_pattern = 2;
    }
    fkv_error err = {0};
    return genmodel_write(&p, path, &err) ? NULL : path;
}

int tu_for_each_vocab_vector(const char *vocab, tu_vector_fn fn, void *user) {
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    char rel[256];
    snprintf(rel, sizeof rel, "tokenizers/%s.inp", vocab);
    size_t inp_len;
    char *inp = tu_read_file(tu_data(rel), &inp_len);
    assert_non_null(inp);
    snprintf(rel, sizeof rel, "tokenizers/%s.out", vocab);
    char *out = tu_read_file(tu_data(rel), NULL);
    assert_non_null(out);
    int n_cases = 0;
    size_t pos = 0;
    char *line = out;
    const char *sep;
    while ((sep = memmem(inp + pos, inp_len - pos, SEP, strlen(SEP))) != NULL) {
        const char *text = inp + pos;
        size_t len = (size_t)(sep - text);
        pos = (size_t)(sep - inp) + strlen(SEP);
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = 0;
        int32_t want[1024];
        int n_want = 0;
        for (char *p = line, *end; (want[n_want] = (int32_t)strtol(p, &end, 10)), end != p; p = end) {
            n_want++;
            assert_true(n_want < 1024);
        }
        line = eol + 1;
        fn(text, len, want, n_want, user);
        n_cases++;
    }
    assert_int_equal(pos, inp_len); /* the file ends with a separator: nothing unread */
    assert_int_equal(*line, 0);     /* one .out line per text */
    free(inp);
    free(out);
    return n_cases;
}

/* FKV_TEST_KERNELS, when set, narrows the variants to those it names (comma-separated; "best": the best this CPU
 * runs) — the sanitizer build's slow model tests take the best, its kernel tests every one. */
static bool variant_wanted(kern_id id) {
    const char *list = getenv("FKV_TEST_KERNELS");
    if (!list || !*list) return true;
    const char *name = kern_name_of(id);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if ((len == strlen(name) && !strncmp(p, name, len)) || (len == 4 && !strncmp(p, "best", 4) && id == kern_best()))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

int tu_each_variant(const struct CMUnitTest *tests, size_t n_tests, const char **variant) {
    int failed = 0;
    for (int id = 0; id < KERN_COUNT; id++) {
        char why[160];
        const char *name = kern_name_of((kern_id)id);
        if (!kern_available((kern_id)id, why, sizeof why)) {
            printf("[  SKIPPED ] kernels %s: %s\n", name, why);
            continue;
        }
        if (!variant_wanted((kern_id)id)) {
            printf("[  SKIPPED ] kernels %s: not in FKV_TEST_KERNELS\n", name);
            continue;
        }
        if (kern_select(name, why, sizeof why) != 0) {
            printf("[  FAILED  ] kernels %s: %s\n", name, why);
            failed++;
            continue;
        }
        if (variant) *variant = name;
        printf("[----------] kernels %s\n", name);
        char group[64];
        snprintf(group, sizeof group, "kernels %s", name);
        failed += _cmocka_run_group_tests(group, tests, n_tests, NULL, NULL);
    }
    return failed;
}

fkv_model *tu_load_model(const char *path) {
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

float *tu_last_logits(const char *path) {
    fkv_model *m = tu_load_model(path);
    fkv_error err = {0};
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.n_ctx = 64;
    float *logits = malloc(sizeof(float) * fkv_model_get_info(m).n_vocab);
    const int32_t ids[4] = {1, 50, 60, 70};
    fkv_ctx *ctx = fkv_ctx_new(m, &cp, &err);
    assert_non_null(ctx);
    assert_int_equal(fkv_eval(ctx, ids, 4, 0, 1, logits, &err), 0);
    fkv_ctx_free(ctx);
    fkv_model_free(m);
    return logits;
}

const char *tu_rewritten(const char *src, const char *key, const gguf_value *value, const char *tensor,
                         tu_tensor_edit how, uint32_t n_dims, const uint64_t *ne) {
    const char *out = tu_tmp_path(".gguf");
    fkv_error err = {0};
    gguf_file *f = gguf_open(src, &err);
    assert_non_null(f);
    gguf_writer *w = gguf_writer_new();
    gguf_writer_copy_kv(w, f, "", NULL);
    if (key) gguf_writer_set_value(w, key, value);
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ti = &f->tensors[t];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        const bool changed = tensor && strstr(name, tensor);
        ggml_type type = ti->type;
        uint32_t dims = ti->n_dims;
        const uint64_t *shape = ti->ne;
        void *data = NULL;
        if (changed && how == TU_RESHAPE) {
            dims = n_dims, shape = ne;
        } else if (changed && how == TU_ZEROS) {
            data = calloc(1, ti->nbytes);
        } else if (changed && how == TU_TO_Q8_0) {
            const size_t n = ti->nbytes / sizeof(float);
            data = malloc(n / 32 * sizeof(block_q8_0));
            quant_quantize_row(GGML_TYPE_Q8_0, ti->data, data, n);
            type = GGML_TYPE_Q8_0;
        }
        assert_int_equal(gguf_writer_add_tensor(w, name, type, dims, shape, data ? data : ti->data, &err), 0);
        free(data);
    }
    assert_int_equal(gguf_writer_write(w, out, &err), 0);
    gguf_writer_free(w);
    gguf_close(f);
    return out;
}

void tu_expect_refused(const char *src, const char *key, const gguf_value *value, const char *tensor, uint32_t n_dims,
                       const uint64_t *ne, const char *want) {
    const char *bad = tu_rewritten(src, key, value, tensor, TU_RESHAPE, n_dims, ne);
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(bad, &err);
    remove(bad);
    if (m) fail_msg("loaded a file with %s", want);
    if (!strstr(err.msg, want)) fail_msg("refused with '%s', which does not name '%s'", err.msg, want);
}
