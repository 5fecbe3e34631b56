/* engine.h — what the modules above the engine (the step, the drafters) need of it beyond the public API of
 * flatkv.h (fkv_engine: sequences over the block pool, the prefix tree and one forward).
 *
 * Thread-safety: as the engine: one thread at a time.
 */
#ifndef FKV_ENGINE_ENGINE_H
#define FKV_ENGINE_ENGINE_H

#include "engine/stepbuf.h"
#include "flatkv.h"

/* e's decode-step arrays (fkv_engine_step's), sized for its max_batch and forward. */
stepbuf *engine_stepbuf(fkv_engine *e);
/* s's salt (NULL: the default), for a draft sequence that must share rows only where s may. */
const char *engine_eseq_salt(const fkv_eseq *s);
/* fkv_engine_start after prev (NULL: none), which this finishes whatever the outcome: a conversation's next turn. With
 * recurrent layers, prev's state serves the new start where the prompt takes up every id prev fed, under the same
 * salt (the reuse then ends at prev's length: kvrec.h), and prev's state memory passes to the new sequence. */
fkv_eseq *engine_continue(fkv_engine *e, fkv_eseq *prev, const char *salt, const int32_t *ids, uint32_t n,
                          uint32_t *cached, fkv_error *err);

/* True when e's forward runs the model's NextN block (fkv_engine_params.mtp): the MTP drafter's engine. */
bool engine_nextn(const fkv_engine *e);
/* The final hidden state of the last position s's record holds (its state's: forward.h), the first guess's input. */
const float *engine_nextn_h(const fkv_engine *e, const fkv_eseq *s);
/* One guess row of the NextN block for each of seqs[0..n) (engine_nextn): id ids[i] at at[i] positions past the
 * record's end, after the hidden state h[i] ([n][dim]), its K/V row stored ahead of the record as a verification's
 * rows are (forward_nextn); each row's logits to logits[i] ([n][n_vocab]) and its output hidden state into h[i]. */
int engine_nextn_rows(fkv_engine *e, fkv_eseq *const *seqs, const int32_t *ids, const uint32_t *at, uint32_t n,
                      float *h, float *logits, fkv_error *err);

#endif
