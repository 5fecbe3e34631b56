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

#endif
