#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_usage_error(const char *sub, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "flatkv %s: ", sub);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_USAGE_EXIT;
}

int cli_parse_u64(const char *sub, const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        cli_usage_error(sub, "%s expects a non-negative integer, got '%s'", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_u32(const char *sub, const char *flag, const char *s, uint32_t min, uint32_t max, uint32_t *out) {
    uint64_t v;
    if (cli_parse_u64(sub, flag, s, &v)) return -1;
    if (v < min || v > max) {
        cli_usage_error(sub, "%s must be between %u and %u, got %s", flag, min, max, s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int cli_parse_float(const char *sub, const char *flag, const char *s, float min, float max, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < min || v > max) {
        cli_usage_error(sub, "%s expects a number between %g and %g, got '%s'", flag, (double)min, (double)max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_bad_option(const char *sub, char *const argv[]) {
    const char *arg = argv[optind - 1];
    if (optopt && !strchr(arg, '=') && (arg[0] != '-' || arg[1] != '-' || !arg[2]))
        return cli_usage_error(sub, "option '-%c' is unknown or needs a value (see flatkv %s --help)", optopt, sub);
    return cli_usage_error(sub, "option '%s' is unknown or needs a value (see flatkv %s --help)", arg, sub);
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, fp)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    int failed = ferror(fp);
    fclose(fp);
    if (!buf || failed) {
        free(buf);
        errno = failed ? EIO : ENOMEM;
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

int cli_fail(const char *sub, const fkv_error *err) {
    static const int exit_status[] = {
        [FKV_OK] = 1, [FKV_E_INPUT] = CLI_USAGE_EXIT, [FKV_E_UNSUPPORTED] = CLI_USAGE_EXIT, [FKV_E_NOMEM] = 1,
        [FKV_E_KV_FULL] = 1, [FKV_E_IO] = 1, [FKV_E_BUSY] = 1, [FKV_E_TIMEOUT] = 1, [FKV_E_CANCELLED] = 1,
    };
    fprintf(stderr, "flatkv %s: %s\n", sub, err->msg[0] ? err->msg : fkv_status_name(err->code));
    return (unsigned)err->code < sizeof exit_status / sizeof *exit_status ? exit_status[err->code] : 1;
}

fkv_model *cli_load_model(const char *sub, const char *path, int *rc) {
    if (!path) {
        *rc = cli_usage_error(sub, "-m MODEL is required (see flatkv %s --help)", sub);
        return NULL;
    }
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    if (!m) *rc = cli_fail(sub, &err);
    return m;
}

char *cli_prompt_text(const char *sub, const char *text, const char *file, size_t *len) {
    if (!!text == !!file) {
        cli_usage_error(sub, "give exactly one of -p TEXT or -f FILE");
        return NULL;
    }
    if (text) {
        *len = strlen(text);
        return strdup(text);
    }
    char *buf = cli_read_file(file, len);
    if (!buf) cli_usage_error(sub, "cannot read prompt file '%s': %s", file, strerror(errno));
    return buf;
}

int32_t *cli_tokenize_text(const char *sub, const fkv_model *m, const char *text, size_t len, bool parse_special,
                           int *n_ids) {
    fkv_error err = {0};
    int n = fkv_tokenize(m, text, len, true, parse_special, NULL, 0, &err);
    int32_t *ids = n >= 0 ? malloc(sizeof(int32_t) * (size_t)(n ? n : 1)) : NULL;
    if (ids && fkv_tokenize(m, text, len, true, parse_special, ids, n, &err) != n) {
        free(ids);
        ids = NULL;
    }
    if (!ids) cli_usage_error(sub, "cannot tokenize the prompt: %s", n < 0 ? err.msg : "out of memory");
    *n_ids = n;
    return ids;
}

/* --mlock, applied to the model by cli_engine_new. */
static bool mlock_wanted;

int cli_engine_option(const char *sub, int c, const char *arg, fkv_engine_params *e) {
    uint32_t u;
    uint64_t u64;
    switch (c) {
    case CLI_O_THREADS:
        if (cli_parse_u32(sub, "--threads", arg, 1, 1024, &u)) return -1;
        e->ctx.n_threads = (int)u;
        return 1;
    case CLI_O_CTX: return cli_parse_u32(sub, "--ctx", arg, 1, 1u << 24, &e->ctx.n_ctx) ? -1 : 1;
    case CLI_O_KV_TYPE:
        for (fkv_kv_type t = 0; fkv_kv_type_name(t); t++)
            if (!strcmp(arg, fkv_kv_type_name(t))) {
                e->ctx.kv_type = t;
                return 1;
            }
        return cli_usage_error(sub, "--kv-type must be auto, f16, f32, q8_0 or q4_0, got '%s'", arg), -1;
    case CLI_O_NO_CACHE: e->prefix_cache = false; return 1;
    case CLI_O_PREFILL_ROWS:
        return cli_parse_u32(sub, "--prefill-rows", arg, 1, 1u << 16, &e->ctx.prefill_rows) ? -1 : 1;
    case CLI_O_CACHE_MIN: return cli_parse_u32(sub, "--cache-min", arg, 0, UINT32_MAX, &e->cache_min) ? -1 : 1;
    case CLI_O_KERNELS: {
        fkv_error err;
        if (fkv_kernels_select(arg, &err)) return cli_usage_error(sub, "--kernels: %s", err.msg), -1;
        return 1;
    }
    case CLI_O_KV_BLOCK:
        if (cli_parse_u32(sub, "--kv-block", arg, 32, 1u << 16, &e->kv_block)) return -1;
        return e->kv_block % 32 ? cli_usage_error(sub, "--kv-block must be a multiple of 32"), -1 : 1;
    case CLI_O_KV_MEM:
        if (cli_parse_u64(sub, "--kv-mem", arg, &u64)) return -1;
        e->kv_mem = (size_t)u64;
        return 1;
    case CLI_O_SWA_FULL: e->swa_full = true; return 1;
    case CLI_O_SWA_GRID:
        if (cli_parse_u32(sub, "--swa-grid", arg, 0, UINT32_MAX, &u)) return -1;
        e->swa_grid = u ? u : UINT32_MAX;
        return 1;
    case CLI_O_STATE_GRID:
        if (cli_parse_u32(sub, "--state-grid", arg, 0, UINT32_MAX, &u)) return -1;
        e->state_grid = u ? u : UINT32_MAX;
        return 1;
    case CLI_O_KV_DIR:
        if (!*arg) return cli_usage_error(sub, "--kv-dir needs a directory"), -1;
        e->kv_dir = arg;
        return 1;
    case CLI_O_KV_DISK: return cli_parse_u64(sub, "--kv-disk", arg, &e->kv_disk) ? -1 : 1;
    case CLI_O_KV_KEY:
        if (!*arg) return cli_usage_error(sub, "--kv-key needs a file"), -1;
        e->kv_key = arg;
        return 1;
    case CLI_O_MLOCK: mlock_wanted = true; return 1;
    case CLI_O_EXPERTS: /* read by the model's load, which follows the options */
        if (strcmp(arg, "auto") && strcmp(arg, "map") && strcmp(arg, "pack"))
            return cli_usage_error(sub, "--experts must be auto, map or pack, got '%s'", arg), -1;
        setenv("FLATKV_EXPERTS", arg, 1);
        return 1;
    default: return 0;
    }
}

fkv_engine *cli_engine_new(const char *sub, const fkv_model *m, const fkv_engine_params *p, int *rc) {
    fkv_error err = {0};
    if (mlock_wanted && fkv_model_mlock(m, &err)) {
        *rc = cli_fail(sub, &err);
        return NULL;
    }
    fkv_engine *e = fkv_engine_new(m, p, &err);
    if (!e) *rc = cli_fail(sub, &err);
    else if (fkv_engine_note(e)) fprintf(stderr, "flatkv %s: %s\n", sub, fkv_engine_note(e));
    return e;
}

cli_spec cli_spec_default(void) { return (cli_spec){.p = {.mode = CLI_SPEC_DEFAULT}}; }

int cli_spec_option(const char *sub, int c, const char *arg, cli_spec *s) {
    switch (c) {
    case CLI_O_SPEC: {
        const int mode = fkv_spec_mode_parse(arg);
        if (mode < 0) return cli_usage_error(sub, "--spec must be off, lookup, draft, mtp or auto, got '%s'", arg), -1;
        s->p.mode = (fkv_spec_mode)mode;
        s->mode_given = true;
        return 1;
    }
    case CLI_O_DRAFT_MAX:
        return cli_parse_u32(sub, "--draft-max", arg, 1, FKV_SPEC_MAX_DRAFT, &s->p.draft_max) ? -1 : 1;
    case CLI_O_MODEL_DRAFT:
        if (!*arg) return cli_usage_error(sub, "--model-draft needs a file"), -1;
        s->model_path = arg;
        return 1;
    default: return 0;
    }
}

int cli_spec_start(const char *sub, const fkv_model *target, fkv_engine_params *ep, cli_spec *s) {
    if (s->model_path && !s->mode_given) s->p.mode = FKV_SPEC_DRAFT;
    ep->mtp = s->p.mode == FKV_SPEC_MTP || (s->p.mode == FKV_SPEC_AUTO && fkv_model_get_info(target).n_nextn);
    if (!s->model_path)
        return s->p.mode == FKV_SPEC_DRAFT ? cli_usage_error(sub, "--spec draft needs a draft model (--model-draft PATH)")
                                           : 0;
    int rc = CLI_USAGE_EXIT;
    if (!(s->model = cli_load_model(sub, s->model_path, &rc))) return rc;
    if (!fkv_model_vocab_equal(target, s->model))
        return cli_usage_error(sub, "--model-draft %s: its vocabulary is not the model's (%u tokens against %u, or "
                                    "other pieces); a draft model must share the target's tokens",
                               s->model_path, fkv_model_get_info(s->model).n_vocab, fkv_model_get_info(target).n_vocab);
    fkv_engine_params dp = *ep;
    dp.kv_dir = dp.kv_key = NULL;
    dp.kv_mem = 0;
    return (s->p.draft = cli_engine_new(sub, s->model, &dp, &rc)) ? 0 : rc;
}

fkv_engine *cli_spec_engine(const char *sub, const fkv_model *m, fkv_engine_params *ep, cli_spec *s, int *rc) {
    if ((*rc = cli_spec_start(sub, m, ep, s))) return NULL;
    fkv_engine *e = cli_engine_new(sub, m, ep, rc);
    double cost = 0;
    fkv_error err = {0};
    if (!e || s->p.mode != FKV_SPEC_AUTO) return e;
    if (fkv_spec_auto(&s->p, e, &cost, &err))
        fprintf(stderr, "flatkv %s: --spec auto: %s; %s without measuring\n", sub, err.msg,
                fkv_spec_mode_name(s->p.mode));
    else
        fprintf(stderr, "flatkv %s: --spec auto: %s (a step with guesses costs %.2f plain steps here)\n", sub,
                fkv_spec_mode_name(s->p.mode), cost);
    return e;
}

void cli_spec_end(cli_spec *s) {
    fkv_engine_free(s->p.draft);
    fkv_model_free(s->model);
    s->p.draft = NULL;
    s->model = NULL;
}

bool cli_collect_piece(void *user, int32_t id, const char *piece, int len) {
    (void)id;
    cli_text *t = user;
    if (t->len + (size_t)len + 1 > t->cap) {
        size_t cap = 2 * t->cap + (size_t)len + 256;
        char *grown = realloc(t->text, cap);
        if (!grown) return false;
        t->text = grown;
        t->cap = cap;
    }
    memcpy(t->text + t->len, piece, (size_t)len);
    t->len += (size_t)len;
    t->text[t->len] = 0;
    return true;
}

void cli_text_free(cli_text *t) {
    free(t->text);
    *t = (cli_text){0};
}

const char *cli_hex64(uint64_t v, char buf[17]) {
    snprintf(buf, 17, "%016llx", (unsigned long long)v);
    return buf;
}

static int sampling_option(const char *sub, int c, const char *arg, fkv_sampler_params *sp) {
    uint32_t u;
    switch (c) {
    case CLI_O_TEMP: return cli_parse_float(sub, "--temp", arg, 0.0f, 100.0f, &sp->temp) ? -1 : 1;
    case CLI_O_TOP_K:
        if (cli_parse_u32(sub, "--top-k", arg, 0, INT32_MAX, &u)) return -1;
        sp->top_k = (int32_t)u;
        return 1;
    case CLI_O_TOP_P: return cli_parse_float(sub, "--top-p", arg, 0.0f, 1.0f, &sp->top_p) ? -1 : 1;
    case CLI_O_MIN_P: return cli_parse_float(sub, "--min-p", arg, 0.0f, 1.0f, &sp->min_p) ? -1 : 1;
    case CLI_O_REPEAT_PENALTY:
        return cli_parse_float(sub, "--repeat-penalty", arg, 0.01f, 100.0f, &sp->repeat_penalty) ? -1 : 1;
    case CLI_O_SEED: return cli_parse_u64(sub, "--seed", arg, &sp->seed) ? -1 : 1;
    default: return 0;
    }
}

int cli_run_option(const char *sub, int c, const char *arg, fkv_engine_params *p, fkv_sampler_params *sp,
                   cli_spec *spec) {
    int handled = cli_engine_option(sub, c, arg, p);
    if (!handled && sp) handled = sampling_option(sub, c, arg, sp);
    return handled || !spec ? handled : cli_spec_option(sub, c, arg, spec);
}
