/* sampler.h — choosing the next token from a row of logits.
 *
 * WHY: generation must be reproducible: the same logits, history, parameters and seed give the same
 * token on every machine and every run. The sampler owns its random state (seeded, no globals) and
 * never allocates per token: its scratch is sized at creation for the vocabulary.
 *
 * Pipeline (llama.cpp's order): repetition penalty over the last `repeat_last_n` ids of the history
 * (a positive logit divided by the penalty, a negative one multiplied) → OpenAI's frequency and presence
 * penalties over the ids this sampler chose before (a generation's own output, not its prompt) → [the
 * log-probabilities, when asked: log-softmax of this row] → the constraint (ids not allowed are dropped) →
 * if temp <= 0: argmax (ties: lowest id) → top-k (k <= 0: off) → top-p (1: off) → min-p (0: off; keeps ids
 * whose probability is >= min_p × the top probability) → temperature → softmax → one draw from the seeded
 * generator. Filters always keep at least one token. The logits passed in are not modified.
 *
 * Thread-safety: one sampler per generation; not shared.
 */
#ifndef FKV_SAMPLER_H
#define FKV_SAMPLER_H

#include <stdint.h>

#include "flatkv.h"

/* The API is fkv_sampler_* in flatkv.h (fkv_sampler_params, fkv_sampler_default_params, fkv_sampler_new,
 * fkv_sampler_free, fkv_sampler_sample); this module implements it. */

#endif
