/* seq.c — sequences (fkv_seq in flatkv.h): one conversation as a view over an engine.
 *
 * WHY a view: the engine (engine.c, prefix.h) is the one place that decides how much of a prompt the KV already
 * holds and that feeds ids, so every feature of the cache — many conversations, window layers, the disk tier — is
 * built once and serves the CLI as it serves the server. A turn ends the sequence's engine sequence (its rows stay
 * cached) and starts the next prompt's, which resumes from them like from any cached conversation.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "engine/engine.h"

struct fkv_seq {
    fkv_engine *e;
    bool own_engine;
    char *salt;
    fkv_eseq *s;       /* the current turn's sequence; NULL before the first prefill, after clear or a failure */
    uint32_t hist_from; /* the repetition history starts after the last embedding rows */
};

fkv_seq *fkv_seq_open(fkv_engine *e, const char *salt, fkv_error *err) {
    fkv_seq *s = calloc(1, sizeof *s);
    if (!s || (salt && *salt && !(s->salt = strdup(salt)))) {
        free(s);
        err_nomem(err, "out of memory for a sequence");
        return NULL;
    }
    s->e = e;
    return s;
}

fkv_seq *fkv_seq_new(const fkv_model *m, const fkv_engine_params *p, fkv_error *err) {
    fkv_engine *e = fkv_engine_new(m, p, err);
    fkv_seq *s = e ? fkv_seq_open(e, NULL, err) : NULL;
    if (!s) {
        fkv_engine_free(e);
        return NULL;
    }
    s->own_engine = true;
    return s;
}

void fkv_seq_clear(fkv_seq *s) {
    fkv_engine_finish(s->e, s->s);
    s->s = NULL;
    s->hist_from = 0;
}

void fkv_seq_free(fkv_seq *s) {
    if (!s) return;
    fkv_seq_clear(s);
    if (s->own_engine) fkv_engine_free(s->e);
    free(s->salt);
    free(s);
}

int fkv_seq_prefill(fkv_seq *s, const int32_t *ids, uint32_t n, float *logits, uint32_t *cached, fkv_error *err) {
    fkv_eseq *prev = s->s; /* the last turn: finished by the start, its recurrent state taken up where it fits */
    s->s = NULL;
    s->hist_from = 0;
    if (!(s->s = engine_continue(s->e, prev, s->salt, ids, n, cached, err))) return -1;
    int rc;
    while ((rc = fkv_engine_prefill(s->e, s->s, logits, err)) == 0) {}
    if (rc < 0) fkv_seq_clear(s);
    return rc < 0 ? -1 : 0;
}

static int started(const fkv_seq *s, fkv_error *err) {
    return s->s ? 0 : err_input(err, "the sequence holds nothing to continue: prefill a prompt first");
}

int fkv_seq_decode(fkv_seq *s, int32_t id, float *logits, fkv_error *err) {
    if (started(s, err)) return -1;
    return fkv_engine_decode(s->e, &s->s, &id, 1, logits, NULL, err);
}

int fkv_seq_feed_embd(fkv_seq *s, const float *embd, uint32_t n, float *logits, fkv_error *err) {
    if (started(s, err) || fkv_engine_feed_embd(s->e, s->s, embd, n, logits, err)) return -1;
    s->hist_from = fkv_seq_n_pos(s);
    return 0;
}

int fkv_seq_rewind(fkv_seq *s, uint32_t n_pos, fkv_error *err) {
    if (!s->s || n_pos >= fkv_seq_n_pos(s)) return 0;
    if (s->hist_from > n_pos) s->hist_from = n_pos;
    if (!fkv_engine_rewind(s->e, s->s, n_pos, err)) return 0;
    fkv_seq_clear(s);
    return -1;
}

uint32_t fkv_seq_n_pos(const fkv_seq *s) {
    uint32_t n = 0;
    if (s->s) fkv_eseq_ids(s->s, &n);
    return n;
}

uint32_t fkv_seq_n_ctx(const fkv_seq *s) { return fkv_engine_n_ctx(s->e); }

uint64_t fkv_seq_kv_digest(const fkv_seq *s, uint32_t n_pos) {
    return s->s ? fkv_engine_kv_digest(s->e, s->s, n_pos) : 0;
}

uint64_t fkv_seq_state_digest(const fkv_seq *s) { return s->s ? fkv_engine_state_digest(s->e, s->s) : 0; }

int fkv_seq_generate(fkv_seq *s, float *logits, const fkv_gen_params *p, int32_t *out, fkv_gen_result *res,
                     fkv_error *err) {
    if (started(s, err)) return -1;
    fkv_gen *g = fkv_gen_new(fkv_engine_model(s->e), p, out);
    if (!g) return err_nomem(err, "out of memory for a generation");
    /* The repetition history is what the KV was fed since the last input no id describes. */
    uint32_t n_fed;
    const int32_t *fed = fkv_eseq_ids(s->s, &n_fed);
    int32_t id = fkv_gen_next(g, logits, fed + s->hist_from, (int)(n_fed - s->hist_from), n_fed, fkv_seq_n_ctx(s));
    int rc = 0;
    while (id >= 0 && !(rc = fkv_engine_step(s->e, &s->s, &g, &id, 1, &s->hist_from, NULL, err))) {}
    *res = fkv_gen_result_get(g);
    fkv_gen_free(g);
    return rc;
}
