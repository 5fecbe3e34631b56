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

#endif
