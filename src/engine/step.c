/* step.c — one decode step of many generations (fkv_engine_step in flatkv.h): each sequence's fed token and its
 * drafters' guesses computed as one forward, and each row's next token chosen by its generation exactly as plain
 * decoding would (spec.h says why the answer cannot change).
 *
 * WHY its own module: the step is where the engine (rows), the generations (choices) and the drafters (guesses) meet;
 * each of them knows nothing of the others, so the stack runs one way: engine, spec, gen, step, seq.
 */
#include <string.h>

#include "base/err.h"
#include "engine/engine.h"
#include "engine/gen.h"
#include "engine/spec.h"
#include "engine/stepbuf.h"

/* The most guesses generation g on s may make this step: within the tokens it may still sample (a kept guess is a
 * sampled token), its context, and the rows a forward computes (spare). */
static uint32_t guess_room(const fkv_gen *g, const fkv_eseq *s, uint32_t n_ctx, uint32_t spare) {
    uint32_t n_fed, room = gen_room(g);
    fkv_eseq_ids(s, &n_fed);
    room = room ? room - 1 : 0;
    if (n_fed + 1 + room > n_ctx) room = n_ctx > n_fed + 1 ? n_ctx - n_fed - 1 : 0;
    return room < spare ? room : spare;
}

int fkv_engine_step(fkv_engine *e, fkv_eseq *const *seqs, fkv_gen *const *gens, int32_t *next, uint32_t n,
                    const uint32_t *hist_from, uint32_t *failed, fkv_error *err) {
    stepbuf *sb = engine_stepbuf(e);
    const uint32_t n_ctx = fkv_engine_n_ctx(e), n_vocab = sb->n_vocab;
    if (n > sb->max_seqs || n > sb->max_rows)
        return err_input(err, "a decode step of %u sequences exceeds the engine's %u", n, sb->max_seqs);
    if (stepbuf_logits(sb, err)) return -1;
    uint32_t spare = sb->max_rows - n;
    bool model = false, nextn = false;
    for (uint32_t i = 0, r = 0; i < n; r += sb->n_ids[i++]) {
        spec_state *st = sb->state[i] = gen_spec(gens[i]);
        uint32_t n_fed, n_out;
        const int32_t *fed = fkv_eseq_ids(seqs[i], &n_fed), *out = gen_out(gens[i], &n_out);
        sb->ids[r] = next[i];
        spec_guess(st, fed, n_fed, out, n_out, guess_room(gens[i], seqs[i], n_ctx, spare), sb->ids + r + 1,
                   &sb->cap[i]);
        spare -= sb->cap[i];
        sb->row[i] = r;
        sb->n_ids[i] = 1 + sb->cap[i];
        sb->lag[i] = 0;
        model |= sb->cap[i] && st->p.mode == FKV_SPEC_DRAFT && !st->predicted;
        nextn |= sb->cap[i] && st->p.mode == FKV_SPEC_MTP && !st->predicted;
    }
    if (model) spec_draft_guesses(sb, seqs, next, n);
    if (nextn) spec_nextn_guesses(sb, e, seqs, next, n);
    uint32_t rows = 0;
    for (uint32_t i = 0; i < n; rows += sb->n_ids[i++]) /* packed: each sequence's rows right after the last's */
        memmove(sb->ids + rows, sb->ids + sb->row[i], sizeof(int32_t) * sb->n_ids[i]);
    if (rows > n && fkv_engine_verify(e, seqs, sb->ids, sb->n_ids, n, sb->logits, failed, err)) {
        /* guesses must never fail what plain decoding would not: the same step without them */
        for (uint32_t i = 0; i < n; i++) {
            sb->ids[i] = next[i];
            sb->n_ids[i] = 1;
        }
        rows = n;
        for (uint32_t i = 0; i < n; i++) { /* a draft sequence's catch-up rows are forgotten with them */
            spec_draft_forget(sb->state[i]);
            sb->lag[i] = 0;
        }
    }
    if (rows == n && fkv_engine_verify(e, seqs, sb->ids, NULL, n, sb->logits, failed, err)) return -1;
    for (uint32_t i = 0, r = 0; i < n; r += sb->n_ids[i++]) {
        spec_state *st = sb->state[i];
        const uint32_t guesses = sb->n_ids[i] - 1, from = hist_from ? hist_from[i] : 0;
        const int32_t *guess = sb->ids + r + 1;
        uint32_t kept = 0;
        int32_t id;
        for (;; kept++) { /* the history: the ids recorded, then the ones pending as far as kept */
            uint32_t n_fed;
            const int32_t *fed = fkv_eseq_ids(seqs[i], &n_fed);
            const uint32_t n_pos = n_fed + kept + 1;
            id = fkv_gen_next(gens[i], sb->logits + (size_t)(r + kept) * n_vocab, fed + from, (int)(n_pos - from),
                              n_pos, n_ctx);
            if (id < 0 || kept == guesses || id != guess[kept]) break;
        }
        fkv_engine_accept(e, seqs[i], kept + 1);
        spec_draft_keep(st, sb->lag[i], guesses, kept);
        spec_adapt(st, guesses, kept);
        next[i] = id;
    }
    return 0;
}
