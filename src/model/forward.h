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

/* n_ctx: the positions a KV may hold (LongRoPE's short or long factors are chosen by it, model_rope_divisors).
 * nextn: every row also runs the model's first NextN block (a drafter's rows, forward_rows; the model must have
 * one). */
forward *forward_new(const fkv_model *m, uint32_t max_rows, uint32_t n_ctx, int n_threads, bool nextn,
                     fkv_error *err);
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

/* The recurrent state a row steps through a model's gated DeltaNet layers (model_hparams.state_floats floats, then,
 * with the NextN block, the row's final hidden state: dim floats, forward_state_floats): it
 * reads `in`, the state of its sequence after the position before it (not read at position 0: the state there is
 * zero), and writes the state after its own position to `out`, which may be `in` (stepped in place) or another
 * buffer (the state before the row then stays as it was: a guess can be taken back). */
typedef struct {
    const float *in;
    float *out;
} forward_state;

/* The floats of a state of f's rows (forward_state). */
size_t forward_state_floats(const forward *f);

/* Rows r < n (n <= max_rows): token ids[r] — or, ids NULL, embedding row embd[r] ([n][dim]) — at position
 * pos[r], whose K/V row is stored into maps[r] and whose attention reads maps[r] positions 0..pos[r] (all
 * already stored, or stored by this call). states: NULL for a model without recurrent layers; else states[r] is row
 * r's, and the rows of one sequence come in the order of their positions, each reading the state the one before it
 * wrote (the recurrence runs token by token, whatever rows share the call). The logits of rows [first_logit, n) go to
 * logits ([n - first_logit][n_vocab]). The caller validated ids and positions.
 *
 * With the NextN block (forward_new's nextn), every row r also computes that block's row at pos[r] — from ids[r] and
 * the final hidden state of position pos[r] - 1 (its state's, or the row before it in the call that wrote that state;
 * zeros at position 0), as llama.cpp pairs them — and stores its K/V in the maps' layer n_layers: a drafter's row is
 * then a function of the ids up to its position, like every other row, and the cache keeps it with them. */
void forward_rows(forward *f, const int32_t *ids, const float *embd, uint32_t n, const uint32_t *pos,
                  const kv_map *const *maps, const forward_state *states, uint32_t first_logit, float *logits);

/* A drafter's guesses (the NextN block alone, forward_new's nextn): rows r < n, token ids[r] at pos[r] after the
 * hidden state h_in[r] ([n][dim]), K/V stored as forward_rows stores them; each row's logits ([n][n_vocab]) and its
 * output hidden state, the next guess's h_in, to h_out ([n][dim]). A guess's row is computed from the drafter's own
 * hidden state, not the trunk's: forward_rows computes it again once the trunk has (the same row, where kept). */
void forward_nextn(forward *f, const int32_t *ids, const float *h_in, uint32_t n, const uint32_t *pos,
                   const kv_map *const *maps, float *logits, float *h_out);

#endif
