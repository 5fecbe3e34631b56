/* spec.h — speculative decoding's drafters: the lookup drafter, the draft model's guesses, and a generation's
 * speculation state. fkv_engine_step (step.c) verifies what they guess.
 *
 * WHY the answer cannot change: a step computes the fed token's row and the guesses' rows in one forward, and a guess's
 * row is kept only once the generation, sampling from the row before it exactly as plain decoding would, chose that
 * guess. So every kept row is computed from the ids plain decoding would have fed, at the same positions, and rows are
 * invariant (docs/design.md §1): the same bytes. Rows past the first rejected guess are never recorded (pending in the
 * engine, then forgotten), so the record keeps describing exactly what the KV holds.
 *
 * Thread-safety: a generation and its draft sequence belong to the target engine's thread.
 */
#ifndef FKV_ENGINE_SPEC_H
#define FKV_ENGINE_SPEC_H

#include <stdint.h>

#include "engine/stepbuf.h"
#include "flatkv.h"

/* Lookup drafting over the sequence h = ids[0..n) followed by last: the longest suffix of h, of ngram_max ids at most,
 * that occurs earlier in h, at its latest occurrence; the ids that followed it go to out, 2^(m-1) of them for a suffix
 * of m ids (16 from 5 on), at most max. Their count (0: not even last recurs). A longer match is likelier to go on:
 * on bench/spec's agent transcript the first guess after a 1-id match was kept 22% of the time, after 4 ids 70%, and
 * sizing guesses so (rather than by the last step's luck, as the draft model's are) projects 1.38x against 1.30x. */
uint32_t spec_lookup(const int32_t *ids, uint32_t n, int32_t last, uint32_t ngram_max, uint32_t max, int32_t *out);

/* Prediction drafting (OpenAI's Predicted Outputs) over the output so far, out[0..n_out) (its last id the one about to
 * be fed): the longest suffix of out, of ngram_max ids at most, that occurs in the prediction pred[0..n_pred) — of
 * equally long ones the first ending at or after *at (where the output was expected to go on: 0 at the start, so the
 * first id matches the prediction's start), else the first — and the ids that follow it there go to guesses, at most
 * max; *at becomes where they start. Their count (0: last occurs nowhere in the prediction, or at its end). WHY from
 * *at: a prediction is an edited text's old version, read once front to back; its repeated lines ("}") would
 * otherwise send the guesses back to the first one. */
uint32_t spec_predict(const int32_t *pred, uint32_t n_pred, const int32_t *out, uint32_t n_out, uint32_t ngram_max,
                      uint32_t max, uint32_t *at, int32_t *guesses);

/* A generation's speculation (fkv_gen owns one). */
typedef struct spec_state {
    fkv_spec_params p; /* mode OFF once a draft engine failed it: guesses are an optimisation, never a failure */
    uint32_t k;        /* DRAFT: guesses to try at the next step */
    fkv_eseq *dseq;    /* DRAFT: its sequence on p.draft, started at the first step */
    uint32_t pk;       /* p.prediction: its guesses to try at the next step (as the draft model's k) */
    uint32_t pred_at;  /* p.prediction: where in it the output is expected to go on (spec_predict's *at) */
    bool predicted;    /* this step's guesses are the prediction's (the mode's drafter made none) */
    uint32_t drafted, accepted;           /* every guess, and those kept */
    uint32_t pred_drafted, pred_accepted; /* of them, the prediction's */
} spec_state;

/* A state for p (draft_max and ngram_max defaulted), and its end (the draft sequence finished). */
spec_state spec_state_init(const fkv_spec_params *p);
void spec_state_end(spec_state *st);

/* After a step that kept `kept` of `guesses`: counted, and the next guess count of the drafter that made them (the
 * draft model's, the prediction's) — twice as many after all were kept, one more than were kept after a failure (a guess
 * that fails costs a row of the forward, one kept saves a whole forward). Lookup sizes each guess by its match instead
 * (spec_lookup). */
void spec_adapt(spec_state *st, uint32_t guesses, uint32_t kept);
/* The most guesses st's mode may make at its next step, before the context's and the step's limits. */
uint32_t spec_guess_max(const spec_state *st);
/* A step's guesses for st's sequence — fed[0..n_fed), then the generation's output out[0..n_out) whose last id is about
 * to be fed — at most room: the prediction's where the output matches it, else lookup's, written to guesses; their
 * count. *reserve: the rows after the fed one the step keeps for the sequence — the count, or for DRAFT when the
 * prediction guessed nothing, what the draft model or the NextN block may guess (spec_draft_guesses,
 * spec_nextn_guesses write them). */
uint32_t spec_guess(spec_state *st, const int32_t *fed, uint32_t n_fed, const int32_t *out, uint32_t n_out,
                    uint32_t room, int32_t *guesses, uint32_t *reserve);

/* Guesses from the draft model for the DRAFT sequences of a step the prediction did not guess for, with caps (sb->cap;
 * sb->state[i] each one's speculation), written after each one's fed id next[i] at sb->ids + sb->row[i]; sb->n_ids[i] becomes 1 + the guesses made,
 * sb->lag[i] (0 before) the catch-up rows its draft sequence was fed. The draft engine runs as many forwards as the
 * longest cap: every sequence's catch-up rows (and so its first guess) in one, then one guess per sequence per
 * forward. A draft engine that fails turns its states' speculation off; the guesses made so far stand. */
void spec_draft_guesses(stepbuf *sb, fkv_eseq *const *seqs, const int32_t *next, uint32_t n);
/* Guesses from the NextN block of e (engine_nextn) for the MTP sequences of a step the prediction did not guess for,
 * with caps, written as spec_draft_guesses writes them: one forward of the block per guess, every sequence's next guess
 * in each, from the record's last hidden state, then from each guess's own. On an engine without the block MTP turns
 * off; a failed forward ends the guessing, the guesses made so far stand. The rows they wrote lie ahead of the record,
 * where the step's verification writes the block's rows again from the trunk's hidden states. */
void spec_nextn_guesses(stepbuf *sb, fkv_engine *e, fkv_eseq *const *seqs, const int32_t *next, uint32_t n);
/* After the target kept `kept` of a sequence's `guesses`: its draft sequence keeps its `lag` catch-up rows and its
 * guesses' rows as far as the target kept them (the last guess was never fed to it). */
void spec_draft_keep(spec_state *st, uint32_t lag, uint32_t guesses, uint32_t kept);
/* The step ran without guesses after all: the draft sequence forgets the rows it was fed for them. */
void spec_draft_forget(spec_state *st);

#endif
