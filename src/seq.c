/* seq.c — sequences (fkv_seq in flatkv.h): one KV, its record, and exact reuse between calls.
 *
 * WHY here: this is the one place that decides how much of a prompt is already in the KV (kvrec.h says
 * how) and that feeds ids — so that every id is recorded where it is fed and nowhere else. The grid and
 * the row-invariant kernels below (ctx.c, ops.h) make a resumed prefill bit-identical to a cold one.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "kvrec.h"
#include "model.h"

struct fkv_seq {
    const fkv_model *m;
    fkv_ctx *ctx;
    kvrec rec;
    kvrec_policy policy;
    bool prefix_cache;
    size_t bytes_per_pos; /* K and V rows of every layer */
    uint32_t n_pos; /* positions the KV holds (the record may be tainted and describe none of them) */
};

/* An unsigned environment variable into *out; -1 with err when set but malformed. */
static int env_u32(const char *name, uint32_t min, uint32_t *out, fkv_error *err) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || v[0] == '-' || x < min || x > UINT32_MAX)
        return err_set(err, "%s='%s' is not an integer >= %u", name, v, min);
    *out = (uint32_t)x;
    return 0;
}

int fkv_seq_default_params(fkv_seq_params *p, fkv_error *err) {
    *p = (fkv_seq_params){.ctx = fkv_ctx_default_params(), .prefix_cache = true, .cache_min = 64,
                          .bound_to_frontier = false};
    uint32_t cache = 1;
    int rc = env_u32("FLATKV_PREFIX_CACHE", 0, &cache, err);
    if (!rc && cache > 1) rc = err_set(err, "FLATKV_PREFIX_CACHE must be 0 or 1");
    p->prefix_cache = cache != 0;
    if (!rc) rc = env_u32("FLATKV_PREFILL_ROWS", 1, &p->ctx.prefill_rows, err);
    if (!rc) rc = env_u32("FLATKV_PREFIX_CACHE_MIN", 0, &p->cache_min, err);
    return err ? rc : 0;
}

fkv_seq *fkv_seq_new(const fkv_model *m, const fkv_seq_params *p, fkv_error *err) {
    fkv_seq_params defaults;
    if (!p) {
        if (fkv_seq_default_params(&defaults, err)) return NULL;
        p = &defaults;
    }
    fkv_seq *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, "out of memory for a sequence");
        return NULL;
    }
    s->m = m;
    s->prefix_cache = p->prefix_cache;
    s->bytes_per_pos = (size_t)2 * m->hp.n_layers * m->hp.n_kv_heads * m->hp.head_dim *
                       (p->ctx.kv_type == FKV_KV_F16 ? sizeof(uint16_t) : sizeof(float));
    s->policy = (kvrec_policy){.min_reuse = p->cache_min, .bound_to_frontier = p->bound_to_frontier};
    if (!(s->ctx = fkv_ctx_new(m, &p->ctx, err))) {
        free(s);
        return NULL;
    }
    if (!kvrec_init(&s->rec, fkv_ctx_n_ctx(s->ctx))) {
        err_set(err, "out of memory for the record of %u positions", fkv_ctx_n_ctx(s->ctx));
        fkv_seq_free(s);
        return NULL;
    }
    return s;
}

void fkv_seq_free(fkv_seq *s) {
    if (!s) return;
    kvrec_free(&s->rec);
    fkv_ctx_free(s->ctx);
    free(s);
}

int fkv_seq_prefill(fkv_seq *s, const int32_t *ids, uint32_t n, float *logits, uint32_t *cached, fkv_error *err) {
    if (n == 0) return err_set(err, "the prompt has no tokens");
    if (n > fkv_ctx_n_ctx(s->ctx))
        return err_set(err, "the prompt has %u tokens, more than the context of %u", n, fkv_ctx_n_ctx(s->ctx));
    uint32_t offset = s->prefix_cache ? kvrec_reusable(&s->rec, ids, n, &s->policy) : 0;
    /* The KV changes only if the evaluation succeeds (it validates before computing), so the record is
     * updated after it: on failure both still agree. */
    if (fkv_eval(s->ctx, ids + offset, n - offset, offset, 1, logits, err)) return -1;
    if (offset == 0) kvrec_clear(&s->rec); /* everything was rewritten: a taint no longer applies */
    kvrec_record(&s->rec, ids + offset, n - offset, offset, true);
    s->n_pos = n;
    if (cached) *cached = offset;
    return 0;
}

int fkv_seq_decode(fkv_seq *s, int32_t id, float *logits, fkv_error *err) {
    if (fkv_eval(s->ctx, &id, 1, s->n_pos, 1, logits, err)) return -1;
    kvrec_record(&s->rec, &id, 1, s->n_pos, false);
    s->n_pos++;
    return 0;
}

int fkv_seq_feed_embd(fkv_seq *s, const float *embd, uint32_t n, float *logits, fkv_error *err) {
    if (fkv_eval_embd(s->ctx, embd, n, s->n_pos, logits ? 1 : 0, logits, err)) return -1;
    kvrec_taint(&s->rec);
    s->n_pos += n;
    return 0;
}

void fkv_seq_rewind(fkv_seq *s, uint32_t n_pos) {
    if (n_pos >= s->n_pos) return;
    s->n_pos = n_pos;
    kvrec_rewind(&s->rec, n_pos);
}

void fkv_seq_clear(fkv_seq *s) {
    s->n_pos = 0;
    kvrec_clear(&s->rec);
}

uint32_t fkv_seq_n_pos(const fkv_seq *s) { return s->n_pos; }

size_t fkv_seq_kv_bytes(const fkv_seq *s) { return s->n_pos * s->bytes_per_pos; }

uint32_t fkv_seq_n_ctx(const fkv_seq *s) { return fkv_ctx_n_ctx(s->ctx); }

uint64_t fkv_seq_kv_digest(const fkv_seq *s, uint32_t n_pos) {
    return fkv_kv_digest(s->ctx, n_pos < s->n_pos ? n_pos : s->n_pos);
}

int fkv_seq_generate(fkv_seq *s, float *logits, const fkv_gen_params *p, int32_t *out, fkv_gen_result *res,
                     fkv_error *err) {
    fkv_gen *g = fkv_gen_new(s->m, p, out);
    if (!g) return err_set(err, "out of memory for a generation");
    int rc = 0;
    for (;;) {
        /* The repetition history is what the KV was fed: the record (empty when tainted). */
        int32_t id = fkv_gen_next(g, logits, s->rec.ids, s->rec.tainted ? 0 : (int)s->rec.len, s->n_pos,
                                  fkv_ctx_n_ctx(s->ctx));
        if (id < 0 || (rc = fkv_seq_decode(s, id, logits, err))) break;
    }
    *res = fkv_gen_result_get(g);
    fkv_gen_free(g);
    return rc;
}
