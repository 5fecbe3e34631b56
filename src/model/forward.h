/* forward.h — the llama forward pass over a batch of rows, each at its own position in its own KV.
 *
 * WHY a batch of rows, not a range of positions: the rows of one forward may come from one prompt chunk
 * (consecutive positions of one sequence) or from many sequences each decoding one token. The kernels are
 * row-invariant (ops.h), so a row's bits are the same in either company: batching never changes an answer.
 *
 * Scratch is sized once for max_rows: nothing allocates per call.
 *
 * Thread-safety: one caller at a time per forward; n_threads OpenMP threads inside.
 */
#ifndef FKV_FORWARD_H
#define FKV_FORWARD_H

#include <stdint.h>

#include "cache/kv.h"
#include "model/model.h"

typedef struct forward forward;

/* n_ctx: the positions a KV may hold (LongRoPE's short or long factors are chosen by it, model_rope_divisors). */
forward *forward_new(const fkv_model *m, uint32_t max_rows, uint32_t n_ctx, int n_threads, fkv_error *err);
void forward_free(forward *f);
uint32_t forward_max_rows(const forward *f);
int forward_threads(const forward *f);

/* The prefill grid when the caller names none (fkv_ctx_params.prefill_rows 0): 128 rather than 64, because each
 * product rearranges a weight panel once for all its rows, so twice the rows halve that cost (110M Q8_0 prefill,
 * bench/: +3% at 512 and 2048 tokens; 0.5B: within noise). */
#define FORWARD_DEFAULT_GRID 128

/* The end of the prefill chunk that starts at position p: the next multiple of grid (docs/design.md §3), or end
 * if that comes first. Chunk boundaries depend on absolute positions only, never on a prompt's length. */
static inline uint32_t forward_grid_end(uint32_t p, uint32_t end, uint32_t grid) {
    uint32_t next = (p / grid + 1) * grid;
    return next < end ? next : end;
}

/* The recurrent state a row steps through a model's gated DeltaNet layers (model_hparams.state_floats floats): it
 * reads `in`, the state of its sequence after the position before it (not read at position 0: the state there is
 * zero), and writes the state after its own position to `out`, which may be `in` (stepped in place) or another
 * buffer (the state before the row then stays as it was: a guess can be taken back). */
typedef struct {
    const float *in;
    float *out;
} forward_state;

/* Rows r < n (n <= max_rows): token ids[r] — or, ids NULL, embedding row embd[r] ([n][dim]) — at position
 * pos[r], whose K/V row is stored into maps[r] and whose attention reads maps[r] positions 0..pos[r] (all
 * already stored, or stored by this call). states: NULL for a model without recurrent layers; else states[r] is row
 * r's, and the rows of one sequence come in the order of their positions, each reading the state the one before it
 * wrote (the recurrence runs token by token, whatever rows share the call). The logits of rows [first_logit, n) go to
 * logits ([n - first_logit][n_vocab]). The caller validated ids and positions. */
void forward_rows(forward *f, const int32_t *ids, const float *embd, uint32_t n, const uint32_t *pos,
                  const kv_map *const *maps, const forward_state *states, uint32_t first_logit, float *logits);

#endif
