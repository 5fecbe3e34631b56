/* spec.c — speculative decoding (spec.h): drafters, and the step that verifies their guesses. */
#include "engine/spec.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/model.h"

/* A draft sequence that lags its target by more than this many ids (or than the step has rows for) is started again,
 * through the draft engine's cache, rather than fed them as rows of a step: after a preemption, say. */
#define DRAFT_LAG_MAX 32
#define DEFAULT_NGRAM_MAX 8

struct spec_scratch {
    uint32_t max_rows, max_seqs, n_vocab;
    float *logits;    /* [max_rows][n_vocab], allocated at the first step */
    int32_t *ids;     /* [max_rows] the rows of a step: each sequence's fed id, then its guesses */
    uint32_t *row;    /* [max_seqs] where sequence i's rows start in ids while guesses are written */
    uint32_t *n_ids;  /* [max_seqs] its rows: 1 + its guesses */
    uint32_t *cap;    /* [max_seqs] the guesses it may make this step */
    uint32_t *lag;    /* [max_seqs] rows its draft sequence was fed to catch up with it */
    /* the draft engine's forwards */
    fkv_eseq **dseqs; /* [max_seqs] */
    int32_t *dids;    /* [max_rows] */
    uint32_t *dn_ids; /* [max_seqs] */
    uint32_t *of;     /* [max_seqs] the generation each draft sequence guesses for */
};

spec_scratch *spec_scratch_new(uint32_t max_rows, uint32_t max_seqs, uint32_t n_vocab) {
    spec_scratch *sc = calloc(1, sizeof *sc);
    if (!sc) return NULL;
    sc->max_rows = max_rows, sc->max_seqs = max_seqs, sc->n_vocab = n_vocab;
    sc->ids = malloc(sizeof *sc->ids * max_rows);
    sc->dids = malloc(sizeof *sc->dids * max_rows);
    uint32_t **per_seq[] = {&sc->row, &sc->n_ids, &sc->cap, &sc->lag, &sc->dn_ids, &sc->of};
    bool ok = sc->ids && sc->dids && (sc->dseqs = malloc(sizeof *sc->dseqs * max_seqs));
    for (size_t i = 0; ok && i < sizeof per_seq / sizeof *per_seq; i++)
        ok = (*per_seq[i] = malloc(sizeof(uint32_t) * max_seqs)) != NULL;
    if (!ok) {
        spec_scratch_free(sc);
        return NULL;
    }
    return sc;
}

void spec_scratch_free(spec_scratch *sc) {
    if (!sc) return;
    free(sc->logits);
    free(sc->ids);
    free(sc->row);
    free(sc->n_ids);
    free(sc->cap);
    free(sc->lag);
    free(sc->dseqs);
    free(sc->dids);
    free(sc->dn_ids);
    free(sc->of);
    free(sc);
}

static const char *const mode_names[] = {[FKV_SPEC_OFF] = "off", [FKV_SPEC_LOOKUP] = "lookup",
                                         [FKV_SPEC_DRAFT] = "draft"};

const char *fkv_spec_mode_name(fkv_spec_mode mode) {
    return (unsigned)mode < sizeof mode_names / sizeof *mode_names ? mode_names[mode] : NULL;
}

int fkv_spec_mode_parse(const char *name) {
    for (int i = 0; name && i < (int)(sizeof mode_names / sizeof *mode_names); i++)
        if (!strcmp(name, mode_names[i])) return i;
    return -1;
}

bool fkv_model_vocab_equal(const fkv_model *a, const fkv_model *b) {
    const uint32_t n = a->hp.n_vocab;
    if (b->hp.n_vocab != n) return false;
    char pa[256], pb[256];
    for (uint32_t id = 0; id < n; id++) {
        const int la = fkv_token_piece(a, -1, (int32_t)id, pa, sizeof pa);
        const int lb = fkv_token_piece(b, -1, (int32_t)id, pb, sizeof pb);
        if (la != lb || (la > 0 && memcmp(pa, pb, (size_t)(la < (int)sizeof pa ? la : (int)sizeof pa))))
            return false;
    }
    return true;
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

spec_state spec_state_init(const fkv_spec_params *p) {
    spec_state st = {.p = *p};
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

/* Guesses from the draft model for the generations with caps (sc->cap), written after each one's fed id at sc->ids +
 * sc->row[i]; sc->n_ids[i] becomes 1 + the guesses made, sc->lag[i] (0 before) the catch-up rows its draft sequence
 * was fed. The draft engine runs as many forwards as the longest cap: every sequence's catch-up rows (and so
 * its first guess) in one, then one guess per sequence per forward. */
static void draft_guesses(spec_scratch *sc, fkv_eseq *const *seqs, fkv_gen *const *gens, const int32_t *next,
                          uint32_t n) {
    fkv_engine *d = NULL;
    uint32_t nd = 0, drows = 0;
    for (uint32_t i = 0; i < n; i++) {
        spec_state *st = gen_spec(gens[i]);
        const bool wanted = st->p.mode == FKV_SPEC_DRAFT && sc->cap[i] && (!d || st->p.draft == d);
        if (st->p.mode == FKV_SPEC_DRAFT) sc->n_ids[i] = 1;
        if (!wanted) continue;
        const uint32_t max_rows = fkv_engine_max_rows(st->p.draft), rows = max_rows < sc->max_rows ? max_rows : sc->max_rows;
        if (drows >= rows) continue;
        uint32_t n_fed;
        const int32_t *fed = fkv_eseq_ids(seqs[i], &n_fed);
        if (!draft_catch_up(st, seqs[i], fed, n_fed, next[i], rows - drows, sc->dids + drows, &sc->dn_ids[nd])) continue;
        d = st->p.draft;
        sc->lag[i] = sc->dn_ids[nd];
        sc->dseqs[nd] = st->dseq;
        sc->of[nd++] = i;
        drows += sc->lag[i];
    }
    for (const uint32_t n_vocab = sc->n_vocab; nd;) {
        fkv_error err = {0};
        uint32_t failed = 0;
        if (fkv_engine_verify(d, sc->dseqs, sc->dids, sc->dn_ids, nd, sc->logits, &failed, &err)) {
            for (uint32_t k = 0; k < nd; k++) draft_off(gen_spec(gens[sc->of[k]]));
            return; /* the guesses made so far stand */
        }
        uint32_t kept = 0;
        for (uint32_t r = 0, k = 0; k < nd; r += sc->dn_ids[k++]) {
            const uint32_t i = sc->of[k];
            const int32_t guess = argmax(sc->logits + (size_t)(r + sc->dn_ids[k] - 1) * n_vocab, n_vocab);
            sc->ids[sc->row[i] + sc->n_ids[i]++] = guess;
            if (sc->n_ids[i] == sc->cap[i] + 1 || fkv_token_is_eog(fkv_engine_model(d), guess)) continue;
            sc->dseqs[kept] = sc->dseqs[k];
            sc->of[kept] = i;
            sc->dids[kept] = guess;
            sc->dn_ids[kept++] = 1;
        }
        nd = kept;
    }
}

/* After the target kept `kept` of a generation's `guesses`: its draft sequence keeps its catch-up rows and its guesses'
 * rows as far as the target kept them (the last guess was never fed to it). */
static void draft_keep(spec_state *st, uint32_t lag, uint32_t guesses, uint32_t kept) {
    if (st->dseq && lag) fkv_engine_accept(st->p.draft, st->dseq, lag + (kept < guesses ? kept : guesses - 1));
}

/* The guesses' caps of a step: what the generation's state asks, within the tokens it may still sample (a kept guess is
 * a sampled token), its context, and the rows a forward computes (spare). */
static uint32_t guess_cap(fkv_gen *g, const fkv_eseq *s, uint32_t n_ctx, uint32_t *spare) {
    const spec_state *st = gen_spec(g);
    uint32_t n_fed, cap = spec_guess_max(st);
    fkv_eseq_ids(s, &n_fed);
    const uint32_t room = gen_room(g);
    if (cap + 1 > room) cap = room ? room - 1 : 0;
    if (n_fed + 1 + cap > n_ctx) cap = n_ctx > n_fed + 1 ? n_ctx - n_fed - 1 : 0;
    if (cap > *spare) cap = *spare;
    *spare -= cap;
    return cap;
}

uint32_t spec_guess_max(const spec_state *st) {
    return st->p.mode == FKV_SPEC_OFF ? 0 : st->p.mode == FKV_SPEC_LOOKUP ? st->p.draft_max : st->k;
}

void spec_adapt(spec_state *st, uint32_t guesses, uint32_t kept) {
    if (!guesses) return;
    st->drafted += guesses;
    st->accepted += kept;
    st->k = kept == guesses ? (2 * st->k < st->p.draft_max ? 2 * st->k : st->p.draft_max) : kept + 1;
}

int fkv_engine_step(fkv_engine *e, fkv_eseq *const *seqs, fkv_gen *const *gens, int32_t *next, uint32_t n,
                    const uint32_t *hist_from, uint32_t *failed, fkv_error *err) {
    spec_scratch *sc = engine_spec_scratch(e);
    const uint32_t n_ctx = fkv_engine_n_ctx(e), n_vocab = sc->n_vocab;
    if (n > sc->max_seqs || n > sc->max_rows)
        return err_input(err, "a decode step of %u sequences exceeds the engine's %u", n, sc->max_seqs);
    if (!sc->logits && !(sc->logits = malloc(sizeof(float) * sc->max_rows * n_vocab)))
        return err_nomem(err, "out of memory for a decode step's logits");
    uint32_t spare = sc->max_rows - n;
    bool model = false;
    for (uint32_t i = 0, r = 0; i < n; r += sc->n_ids[i++]) {
        const spec_state *st = gen_spec(gens[i]);
        sc->cap[i] = guess_cap(gens[i], seqs[i], n_ctx, &spare);
        sc->row[i] = r;
        sc->n_ids[i] = 1 + sc->cap[i];
        sc->ids[r] = next[i];
        sc->lag[i] = 0;
        model |= sc->cap[i] && st->p.mode == FKV_SPEC_DRAFT;
        if (st->p.mode != FKV_SPEC_LOOKUP || !sc->cap[i]) continue;
        uint32_t n_fed;
        const int32_t *fed = fkv_eseq_ids(seqs[i], &n_fed);
        sc->n_ids[i] = 1 + spec_lookup(fed, n_fed, next[i], st->p.ngram_max, sc->cap[i], sc->ids + r + 1);
    }
    if (model) draft_guesses(sc, seqs, gens, next, n);
    uint32_t rows = 0;
    for (uint32_t i = 0; i < n; rows += sc->n_ids[i++]) /* packed: each sequence's rows right after the last's */
        memmove(sc->ids + rows, sc->ids + sc->row[i], sizeof(int32_t) * sc->n_ids[i]);
    if (rows > n && fkv_engine_verify(e, seqs, sc->ids, sc->n_ids, n, sc->logits, failed, err)) {
        /* guesses must never fail what plain decoding would not: the same step without them */
        for (uint32_t i = 0; i < n; i++) {
            sc->ids[i] = next[i];
            sc->n_ids[i] = 1;
        }
        rows = n;
        for (uint32_t i = 0; i < n; i++) { /* a draft sequence's catch-up rows are forgotten with them */
            spec_state *st = gen_spec(gens[i]);
            if (st->dseq) fkv_engine_accept(st->p.draft, st->dseq, 0);
            sc->lag[i] = 0;
        }
    }
    if (rows == n && fkv_engine_verify(e, seqs, sc->ids, NULL, n, sc->logits, failed, err)) return -1;
    for (uint32_t i = 0, r = 0; i < n; r += sc->n_ids[i++]) {
        spec_state *st = gen_spec(gens[i]);
        const uint32_t guesses = sc->n_ids[i] - 1, from = hist_from ? hist_from[i] : 0;
        const int32_t *guess = sc->ids + r + 1;
        uint32_t kept = 0;
        int32_t id;
        for (;; kept++) { /* the history: the ids recorded, then the ones pending as far as kept */
            uint32_t n_fed;
            const int32_t *fed = fkv_eseq_ids(seqs[i], &n_fed);
            const uint32_t n_pos = n_fed + kept + 1;
            id = fkv_gen_next(gens[i], sc->logits + (size_t)(r + kept) * n_vocab, fed + from, (int)(n_pos - from),
                              n_pos, n_ctx);
            if (id < 0 || kept == guesses || id != guess[kept]) break;
        }
        fkv_engine_accept(e, seqs[i], kept + 1);
        draft_keep(st, sc->lag[i], guesses, kept);
        spec_adapt(st, guesses, kept);
        next[i] = id;
    }
    return 0;
}
