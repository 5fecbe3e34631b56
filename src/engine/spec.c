/* spec.c — speculative decoding's drafters (spec.h): lookup, and a draft model resumed through its engine's cache. */
#include "engine/spec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

/* A draft sequence that lags its target by more than this many ids (or than the step has rows for) is started again,
 * through the draft engine's cache, rather than fed them as rows of a step: after a preemption, say. */
#define DRAFT_LAG_MAX 32
#define DEFAULT_NGRAM_MAX 8

static const char *const mode_names[] = {[FKV_SPEC_OFF] = "off", [FKV_SPEC_LOOKUP] = "lookup",
                                         [FKV_SPEC_DRAFT] = "draft", [FKV_SPEC_MTP] = "mtp",
                                         [FKV_SPEC_AUTO] = "auto"};

const char *fkv_spec_mode_name(fkv_spec_mode mode) {
    return (unsigned)mode < sizeof mode_names / sizeof *mode_names ? mode_names[mode] : NULL;
}

int fkv_spec_mode_parse(const char *name) {
    for (int i = 0; name && i < (int)(sizeof mode_names / sizeof *mode_names); i++)
        if (!strcmp(name, mode_names[i])) return i;
    return -1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of t[0..n) (sorted in place). */
static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, by_value);
    return t[n / 2];
}

/* AUTO's measurement: positions of context, and rounds of each forward (the medians). */
#define AUTO_CONTEXT 64
#define AUTO_ROUNDS 5

int fkv_spec_auto(fkv_spec_params *p, fkv_engine *e, double *cost, fkv_error *err) {
    if (p->mode != FKV_SPEC_AUTO) return 0;
    const bool nextn = engine_nextn(e);
    const uint32_t k = spec_state_init(p).p.draft_max; /* as a generation takes it */
    stepbuf *sb = engine_stepbuf(e);
    p->mode = nextn ? FKV_SPEC_MTP : FKV_SPEC_LOOKUP; /* the choice should the measurement fail */
    if (stepbuf_logits(sb, err)) return -1;
    if (fkv_engine_n_ctx(e) < AUTO_CONTEXT + k + 1 || fkv_engine_max_rows(e) < k + 1) {
        p->mode = FKV_SPEC_OFF; /* no room to speculate in */
        return 0;
    }
    int32_t ids[AUTO_CONTEXT + FKV_SPEC_MAX_DRAFT + 1];
    for (uint32_t i = 0; i < AUTO_CONTEXT + k + 1; i++) ids[i] = (int32_t)(i * 7919u % sb->n_vocab);
    /* a salt no request has: the scratch rows are never another sequence's, nor written to the disk tier */
    fkv_eseq *s = fkv_engine_start(e, "\x01flatkv spec auto", ids, AUTO_CONTEXT, NULL, err);
    if (!s) return -1;
    fkv_eseq_memory_only(s);
    float *logits = sb->logits, *h = sb->h;
    const uint32_t rows[2] = {1, 1 + k}, at = 0;
    double t[3][AUTO_ROUNDS];
    int rc;
    while ((rc = fkv_engine_prefill(e, s, NULL, err)) == 0) {}
    for (int r = -1; rc > 0 && r < AUTO_ROUNDS; r++) /* a round of warm-up */
        for (int i = 0; i < 3 && rc > 0; i++) {
            const double t0 = now_ms();
            if (i < 2)
                rc = fkv_engine_verify(e, &s, ids + AUTO_CONTEXT, &rows[i], 1, logits, NULL, err) ? -1 : 1;
            else if (nextn) /* a guess: one row of the block */
                rc = (memcpy(h, engine_nextn_h(e, s), sizeof(float) * fkv_model_get_info(fkv_engine_model(e)).dim),
                      engine_nextn_rows(e, &s, ids + AUTO_CONTEXT, &at, 1, h, logits, err)) ? -1 : 1;
            if (r >= 0) t[i][r] = now_ms() - t0;
            fkv_engine_accept(e, s, 0);
        }
    fkv_engine_finish(e, s);
    if (rc < 0) return -1;
    const double plain = median(t[0], AUTO_ROUNDS),
                 ratio = (median(t[1], AUTO_ROUNDS) + (nextn ? k * median(t[2], AUTO_ROUNDS) : 0)) / plain;
    if (cost) *cost = ratio;
    double tokens = nextn ? 0 : FKV_SPEC_AUTO_TOKENS_LOOKUP, kept = 1;
    for (uint32_t i = 0; nextn && i <= k; i++, kept *= FKV_SPEC_AUTO_KEEP_MTP) tokens += kept;
    if (ratio >= tokens) p->mode = FKV_SPEC_OFF;
    return 0;
}

uint32_t spec_lookup(const int32_t *ids, uint32_t n, int32_t last, uint32_t ngram_max, uint32_t max, int32_t *out) {
    const uint32_t len = n + 1; /* h[i] = i < n ? ids[i] : last */
#define H(i) ((i) < n ? ids[i] : last)
    uint32_t best = 0, at = 0; /* the longest match so far, and where its occurrence ends */
    for (uint32_t q = len - 1; q-- > 0 && best < ngram_max;) { /* latest first: an earlier one must be longer */
        uint32_t m = 0;
        while (m < ngram_max && m <= q && H(q - m) == H(len - 1 - m)) m++;
        if (m > best) best = m, at = q;
    }
    if (!best) return 0;
    uint32_t k = best < 5 ? 1u << (best - 1) : FKV_SPEC_MAX_DRAFT; /* 2^(m-1): bench/spec's acceptance by length */
    if (k > max) k = max;
    uint32_t i = 0;
    for (; i < k && at + 1 + i < len; i++) out[i] = H(at + 1 + i);
#undef H
    return i;
}

uint32_t spec_predict(const int32_t *pred, uint32_t n_pred, const int32_t *out, uint32_t n_out, uint32_t ngram_max,
                      uint32_t max, uint32_t *at, int32_t *guesses) {
    uint32_t best = 0, end = 0; /* the best match so far, and where its occurrence ends */
    for (uint32_t q = 0; q < n_pred; q++) {
        uint32_t m = 0;
        while (m < ngram_max && m < n_out && m <= q && pred[q - m] == out[n_out - 1 - m]) m++;
        if (m > best || (m && m == best && end < *at && q >= *at)) best = m, end = q;
    }
    if (!best) return 0;
    uint32_t i = 0;
    for (; i < max && end + 1 + i < n_pred; i++) guesses[i] = pred[end + 1 + i];
    *at = end + 1;
    return i;
}

spec_state spec_state_init(const fkv_spec_params *p) {
    spec_state st = {.p = *p, .pk = FKV_SPEC_MAX_DRAFT};
    if (!st.p.prediction) st.p.n_prediction = 0;
    if (!st.p.draft_max) st.p.draft_max = FKV_SPEC_DEFAULT_DRAFT;
    if (st.p.draft_max > FKV_SPEC_MAX_DRAFT) st.p.draft_max = FKV_SPEC_MAX_DRAFT;
    if (!st.p.ngram_max) st.p.ngram_max = DEFAULT_NGRAM_MAX;
    if (st.p.mode == FKV_SPEC_DRAFT && !st.p.draft) st.p.mode = FKV_SPEC_OFF;
    st.k = st.p.draft_max;
    return st;
}

void spec_state_end(spec_state *st) {
    if (st->dseq) fkv_engine_finish(st->p.draft, st->dseq);
    st->dseq = NULL;
}

/* The draft model failed st (its memory, say): no more guesses from it. */
static void draft_off(spec_state *st) {
    spec_state_end(st);
    st->p.mode = FKV_SPEC_OFF;
}

static int32_t argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

/* Sequence i's next guess, the argmax of logits, written after its others; true while it may guess on (below its cap,
 * not an end of generation of m). */
static bool take_guess(stepbuf *sb, uint32_t i, const float *logits, const fkv_model *m, int32_t *guess) {
    *guess = argmax(logits, sb->n_vocab);
    sb->ids[sb->row[i] + sb->n_ids[i]++] = *guess;
    return sb->n_ids[i] <= sb->cap[i] && !fkv_token_is_eog(m, *guess);
}

/* Bring st's draft sequence to the target's ids fed[0..n_fed) and put what it still needs — the ids it lacks, then
 * next — into dids (their count in *n_lag, at most room). false when the draft cannot take part in this step. */
static bool draft_catch_up(spec_state *st, const fkv_eseq *target, const int32_t *fed, uint32_t n_fed, int32_t next,
                           uint32_t room, int32_t *dids, uint32_t *n_lag) {
    fkv_engine *d = st->p.draft;
    fkv_error err = {0};
    uint32_t n_d = 0, same = 0;
    const int32_t *dfed = st->dseq ? fkv_eseq_ids(st->dseq, &n_d) : NULL;
    while (same < n_d && same < n_fed && dfed[same] == fed[same]) same++;
    const uint32_t lag_max = room < DRAFT_LAG_MAX ? room : DRAFT_LAG_MAX;
    if (st->dseq && (n_fed - same >= lag_max || (same < n_d && fkv_engine_rewind(d, st->dseq, same, &err)))) {
        spec_state_end(st); /* far behind, or the rewind failed: start again from the draft engine's cache */
        same = 0;
    }
    if (!st->dseq) {
        if (!n_fed || !(st->dseq = fkv_engine_start(d, engine_eseq_salt(target), fed, n_fed, NULL, &err))) {
            draft_off(st);
            return false;
        }
        int rc;
        while ((rc = fkv_engine_prefill(d, st->dseq, NULL, &err)) == 0) {}
        if (rc < 0) {
            draft_off(st);
            return false;
        }
        same = n_fed;
    }
    memcpy(dids, fed + same, sizeof(int32_t) * (n_fed - same));
    dids[n_fed - same] = next;
    *n_lag = n_fed - same + 1;
    return true;
}

void spec_draft_guesses(stepbuf *sb, fkv_eseq *const *seqs, const int32_t *next, uint32_t n) {
    fkv_engine *d = NULL;
    uint32_t nd = 0, drows = 0;
    for (uint32_t i = 0; i < n; i++) {
        spec_state *st = sb->state[i];
        const bool drafts = st->p.mode == FKV_SPEC_DRAFT && !st->predicted;
        const bool wanted = drafts && sb->cap[i] && (!d || st->p.draft == d);
        if (drafts) sb->n_ids[i] = 1;
        if (!wanted) continue;
        const uint32_t max_rows = fkv_engine_max_rows(st->p.draft);
        const uint32_t rows = max_rows < sb->max_rows ? max_rows : sb->max_rows;
        if (drows >= rows) continue;
        uint32_t n_fed;
        const int32_t *fed = fkv_eseq_ids(seqs[i], &n_fed);
        if (!draft_catch_up(st, seqs[i], fed, n_fed, next[i], rows - drows, sb->dids + drows, &sb->dn_ids[nd]))
            continue;
        d = st->p.draft;
        sb->lag[i] = sb->dn_ids[nd];
        sb->dseqs[nd] = st->dseq;
        sb->of[nd++] = i;
        drows += sb->lag[i];
    }
    while (nd) {
        fkv_error err = {0};
        uint32_t failed = 0;
        if (fkv_engine_verify(d, sb->dseqs, sb->dids, sb->dn_ids, nd, sb->logits, &failed, &err)) {
            for (uint32_t k = 0; k < nd; k++) draft_off(sb->state[sb->of[k]]);
            return; /* the guesses made so far stand */
        }
        uint32_t kept = 0;
        for (uint32_t r = 0, k = 0; k < nd; r += sb->dn_ids[k++]) {
            const uint32_t i = sb->of[k];
            int32_t guess;
            if (!take_guess(sb, i, sb->logits + (size_t)(r + sb->dn_ids[k] - 1) * sb->n_vocab, fkv_engine_model(d),
                            &guess))
                continue;
            sb->dseqs[kept] = sb->dseqs[k];
            sb->of[kept] = i;
            sb->dids[kept] = guess;
            sb->dn_ids[kept++] = 1;
        }
        nd = kept;
    }
}

void spec_nextn_guesses(stepbuf *sb, fkv_engine *e, fkv_eseq *const *seqs, const int32_t *next, uint32_t n) {
    const uint32_t dim = fkv_model_get_info(fkv_engine_model(e)).dim;
    uint32_t nd = 0;
    for (uint32_t i = 0; i < n; i++) {
        spec_state *st = sb->state[i];
        if (st->p.mode != FKV_SPEC_MTP || st->predicted) continue;
        sb->n_ids[i] = 1;
        if (!engine_nextn(e)) st->p.mode = FKV_SPEC_OFF; /* an engine without the block: never guesses */
        if (!sb->cap[i] || st->p.mode == FKV_SPEC_OFF) continue;
        sb->dseqs[nd] = seqs[i];
        sb->dids[nd] = next[i];
        sb->dn_ids[nd] = 0;
        memcpy(sb->h + (size_t)nd * dim, engine_nextn_h(e, seqs[i]), sizeof(float) * dim);
        sb->of[nd++] = i;
    }
    while (nd) {
        fkv_error err = {0};
        if (engine_nextn_rows(e, sb->dseqs, sb->dids, sb->dn_ids, nd, sb->h, sb->logits, &err))
            return; /* the guesses made so far stand */
        uint32_t kept = 0;
        for (uint32_t k = 0; k < nd; k++) {
            const uint32_t i = sb->of[k];
            int32_t guess;
            if (!take_guess(sb, i, sb->logits + (size_t)k * sb->n_vocab, fkv_engine_model(e), &guess)) continue;
            sb->dseqs[kept] = sb->dseqs[k];
            sb->of[kept] = i;
            sb->dids[kept] = guess;
            sb->dn_ids[kept] = sb->dn_ids[k] + 1;
            memmove(sb->h + (size_t)kept * dim, sb->h + (size_t)k * dim, sizeof(float) * dim);
            kept++;
        }
        nd = kept;
    }
}

void spec_draft_keep(spec_state *st, uint32_t lag, uint32_t guesses, uint32_t kept) {
    if (st->dseq && lag) fkv_engine_accept(st->p.draft, st->dseq, lag + (kept < guesses ? kept : guesses - 1));
}

uint32_t spec_guess_max(const spec_state *st) {
    return st->p.mode == FKV_SPEC_OFF ? 0 : st->p.mode == FKV_SPEC_LOOKUP ? st->p.draft_max : st->k;
}

uint32_t spec_guess(spec_state *st, const int32_t *fed, uint32_t n_fed, const int32_t *out, uint32_t n_out,
                    uint32_t room, int32_t *guesses, uint32_t *reserve) {
    const uint32_t own = spec_guess_max(st) < room ? spec_guess_max(st) : room;
    uint32_t n = 0;
    if (st->p.n_prediction && n_out)
        n = spec_predict(st->p.prediction, st->p.n_prediction, out, n_out, st->p.ngram_max,
                         st->pk < room ? st->pk : room, &st->pred_at, guesses);
    st->predicted = n > 0;
    if (!n && st->p.mode == FKV_SPEC_LOOKUP && own && n_out)
        n = spec_lookup(fed, n_fed, out[n_out - 1], st->p.ngram_max, own, guesses);
    *reserve = !st->predicted && (st->p.mode == FKV_SPEC_DRAFT || st->p.mode == FKV_SPEC_MTP) ? own : n;
    return n;
}

/* The next guess count of a drafter that tried k (at most most) and had `kept` of `guesses` kept. */
static uint32_t adapted(uint32_t k, uint32_t most, uint32_t guesses, uint32_t kept) {
    return kept == guesses ? (2 * k < most ? 2 * k : most) : kept + 1;
}

void spec_adapt(spec_state *st, uint32_t guesses, uint32_t kept) {
    if (!guesses) return;
    st->drafted += guesses;
    st->accepted += kept;
    if (!st->predicted) {
        st->k = adapted(st->k, st->p.draft_max, guesses, kept);
        return;
    }
    st->pred_drafted += guesses;
    st->pred_accepted += kept;
    st->pred_at += kept; /* where the id sampled after the kept guesses would be, had the prediction said it */
    st->pk = adapted(st->pk, FKV_SPEC_MAX_DRAFT, guesses, kept);
}

void spec_draft_forget(spec_state *st) {
    if (st->dseq) fkv_engine_accept(st->p.draft, st->dseq, 0);
}
