/* kvrec.h — the record's rules: how much of a prompt the KV that earlier ids built may serve.
 *
 * WHY: a chat client or an agent re-sends the whole transcript every turn. Wherever the new prompt agrees
 * with the ids that built some cached KV, those rows already ARE the state at those positions: prefill only the
 * rest. What the KV holds is described by the ids recorded WHERE THEY ARE FED (the prefix tree's nodes,
 * prefix.h) — never by a caller's counters ("prompt_tokens + generated"), whose meaning differs per caller (was
 * the last sampled token fed? did the chunked prefill finish? did generation stop early?) and whose mistakes do
 * not crash: they silently answer from another conversation's state.
 *
 * The rules, decided here and nowhere else (kvrec_decide; the tree measures the agreement, this decides):
 * - Longest common prefix, not all-or-nothing: the next prompt carries the last reply back as re-rendered
 *   text, and re-tokenizing it often does not reproduce the generated ids; cache and prompt agree up to
 *   there, and that much is reused.
 * - At least one token is always left to prefill (reuse ≤ len(prompt) − 1): the logits the next token is
 *   sampled from must be this prompt's, not the last one's. A rewind (kvrec_policy.whole) asks for rows, not
 *   logits, and may take all of them.
 * - Rows that are not there are never read: where a model keeps only some rows of a layer (sliding windows), the
 *   reuse is the longest length at most the cap whose rows are all held.
 * - A recurrent layer's state is never guessed: it folds in every token before it and cannot be cut back, so a model
 *   with recurrent layers resumes at p only where the state after p - 1 is at hand besides the rows (docs/design.md
 *   §5) — the longest such length at most the held one, else 0, the cold start whose state is zero. DECISION: until
 *   states are kept at chosen points, the one at hand is a continuing sequence's own (its live state where the new
 *   prompt takes up exactly what it fed; engine.h's engine_continue) or a fork's copy; every other start of such a
 *   model is cold, and says why (kvrec_reuse.state).
 * - Minimum reuse (FLATKV_PREFIX_CACHE_MIN, default 1: any): below it the answer is 0.
 * - Inputs no id describes (embedding rows, an image) are recorded as KVREC_NO_ID, which agrees with no prompt:
 *   two different images behind the same placeholder ids must never compare equal. Rows before them stay
 *   reusable — they depend only on the tokens before them.
 * - A write always starts at the sequence's end (the engine has no other); a rewind keeps what still holds: the
 *   rows before the rewind point are resumed like any prompt's, the rows after it stay cached under their ids.
 * - Prefill frontier: the seed engines bound reuse by the rows a prefill wrote, because their decode kernels
 *   differ from their prefill kernels. DECISION: flatkv lifts the bound by default, because
 *   tests/test_invariance.c (test_decode_rows_equal_prefill_rows) shows rows written by decode equal rows
 *   written by prefill byte for byte, for f16 and f32 KV, f32 and quantized weights. The bound stays available
 *   (kvrec_policy.bound_to_frontier: the agreement then counts prefill-written rows only) for any future kernel
 *   that is not row-invariant.
 */
#ifndef FKV_KVREC_H
#define FKV_KVREC_H

#include <stdbool.h>
#include <stdint.h>

/* The id recorded for a row no token id describes. */
#define KVREC_NO_ID (-1)

/* The longest length at most p whose rows are all held (ctx: the caller's); NULL: every row is. The same shape
 * answers where recurrent states are kept: the longest length at most p with a state at hand (0 always qualifies). */
typedef uint32_t (*kvrec_held_fn)(const void *ctx, uint32_t p);

typedef struct {
    uint32_t min_reuse;     /* reuse below this is reported as 0 */
    bool bound_to_frontier; /* reuse only rows a prefill wrote */
    bool whole;             /* a rewind: every agreeing row may be reused, none is left to compute */
    kvrec_held_fn state;    /* where recurrent states are at hand (state_ctx: its ctx); NULL: no recurrent layers */
    const void *state_ctx;
} kvrec_policy;

/* How a reuse came to be: the longest common prefix with the cache (agreed); at most len(prompt) - 1 of it
 * (capped); the longest length at most that whose rows are all held (held); the longest at most that where the rows
 * are held and a recurrent state is at hand (state: = held without recurrent layers); what is reused (state, or 0
 * below the minimum). */
typedef struct {
    uint32_t agreed, capped, held, state, reused;
} kvrec_reuse;

/* The reuse of a prompt of n ids that agrees with the cache for `agreed` of them, under policy. */
kvrec_reuse kvrec_decide(uint32_t agreed, uint32_t n, const kvrec_policy *policy, kvrec_held_fn held,
                         const void *ctx);

#endif
