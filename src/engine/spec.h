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

/* A generation's speculation (fkv_gen owns one). */
typedef struct spec_state {
    fkv_spec_params p; /* mode OFF once a draft engine failed it: guesses are an optimisation, never a failure */
    uint32_t k;        /* DRAFT: guesses to try at the next step */
    fkv_eseq *dseq;    /* DRAFT: its sequence on p.draft, started at the first step */
    uint32_t drafted, accepted;
} spec_state;

/* A state for p (draft_max and ngram_max defaulted), and its end (the draft sequence finished). */
spec_state spec_state_init(const fkv_spec_params *p);
void spec_state_end(spec_state *st);

/* After a step that kept `kept` of `guesses`: counted, and the draft model's next guess count — twice as many after all
 * were kept, one more than were kept after a failure (a guess that fails costs a row of the forward, one kept saves a
 * whole forward). Lookup sizes each guess by its match instead (spec_lookup). */
void spec_adapt(spec_state *st, uint32_t guesses, uint32_t kept);
/* The most guesses st may make at its next step, before the context's and the step's limits. */
uint32_t spec_guess_max(const spec_state *st);

/* Guesses from the draft model for the sequences of a step with caps (sb->cap; sb->state[i] each one's speculation),
 * written after each one's fed id next[i] at sb->ids + sb->row[i]; sb->n_ids[i] becomes 1 + the guesses made,
 * sb->lag[i] (0 before) the catch-up rows its draft sequence was fed. The draft engine runs as many forwards as the
 * longest cap: every sequence's catch-up rows (and so its first guess) in one, then one guess per sequence per
 * forward. A draft engine that fails turns its states' speculation off; the guesses made so far stand. */
void spec_draft_guesses(stepbuf *sb, fkv_eseq *const *seqs, const int32_t *next, uint32_t n);
/* After the target kept `kept` of a sequence's `guesses`: its draft sequence keeps its `lag` catch-up rows and its
 * guesses' rows as far as the target kept them (the last guess was never fed to it). */
void spec_draft_keep(spec_state *st, uint32_t lag, uint32_t guesses, uint32_t kept);
/* The step ran without guesses after all: the draft sequence forgets the rows it was fed for them. */
void spec_draft_forget(spec_state *st);

#endif
