/* gen.h — what the step (step.c) needs of a generation (fkv_gen, flatkv.h) beyond the public API.
 *
 * Thread-safety: a generation belongs to one thread at a time.
 */
#ifndef FKV_ENGINE_GEN_H
#define FKV_ENGINE_GEN_H

#include <stdint.h>

#include "engine/spec.h"
#include "flatkv.h"

/* g's speculation state. */
spec_state *gen_spec(fkv_gen *g);
/* The ids g sampled so far (*n of them; the last is the one about to be fed while g goes on). */
const int32_t *gen_out(const fkv_gen *g, uint32_t *n);
/* How many more tokens g may sample (0 once it is over). */
uint32_t gen_room(const fkv_gen *g);

#endif
