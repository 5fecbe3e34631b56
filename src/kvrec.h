/* kvrec.h — what the KV of one sequence currently holds, described by the ids that built it.
 *
 * WHY: a chat client or an agent re-sends the whole transcript every turn. Wherever the new prompt agrees
 * with the ids that built the KV, the KV already IS the state at those positions: prefill only the rest.
 * The reusable length is decided here and nowhere else, from this record alone — never from a caller's
 * counters ("prompt_tokens + generated"), whose meaning differs per caller (was the last sampled token
 * fed? did the chunked prefill finish? did generation stop early?) and whose mistakes do not crash: they
 * silently answer from another conversation's state. So ids are recorded WHERE THEY ARE FED.
 *
 * INVARIANT: ids[0..len) are exactly the tokens whose K/V rows are in the cache, in position order —
 * unless `tainted`, in which case the record describes nothing and nothing is reused until kvrec_clear.
 *
 * The rules:
 * - Longest common prefix, not all-or-nothing: the next prompt carries the last reply back as re-rendered
 *   text, and re-tokenizing it often does not reproduce the generated ids; record and prompt agree up to
 *   there, and that much is reused.
 * - At least one token is always left to prefill (reuse ≤ len(prompt) − 1): the logits the next token is
 *   sampled from must be this prompt's, not the last one's.
 * - A write must start exactly at the record's end. Earlier is a rewind: keep what still holds, then
 *   extend. Later is a gap — positions nothing recorded — so the record is dropped and tainted.
 * - Taint: an input not described by ids (embedding rows, an image) makes an id comparison lie: two
 *   different images behind the same placeholder ids would compare equal. Sticky until kvrec_clear.
 * - Minimum reuse (FLATKV_PREFIX_CACHE_MIN): below it a reuse saves too little; the answer is 0.
 * - Prefill frontier: the seed engines bound reuse by the rows a prefill wrote, because their decode
 *   kernels differ from their prefill kernels. DECISION: flatkv lifts the bound by default, because
 *   tests/test_invariance.c (test_decode_rows_equal_prefill_rows) shows rows written by decode equal rows
 *   written by prefill byte for byte, for f16 and f32 KV, f32 and quantized weights. The bound stays
 *   available (kvrec_policy.bound_to_frontier) for any future kernel that is not row-invariant.
 *
 * Thread-safety: owned by one sequence; not shared.
 */
#ifndef FKV_KVREC_H
#define FKV_KVREC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int32_t *ids;
    uint32_t len;
    uint32_t cap;      /* the KV's positions: a record never grows past them */
    uint32_t frontier; /* rows [0, frontier) were written by a prefill */
    bool tainted;
} kvrec;

typedef struct {
    uint32_t min_reuse;     /* reuse below this is reported as 0 */
    bool bound_to_frontier; /* reuse only rows a prefill wrote */
} kvrec_policy;

/* A record for a KV of cap positions; false when out of memory. */
bool kvrec_init(kvrec *r, uint32_t cap);
void kvrec_free(kvrec *r);

/* Forget everything, taint included. Pair with whatever resets the KV itself. */
void kvrec_clear(kvrec *r);
/* The KV now holds something ids do not describe. Sticky until kvrec_clear. */
void kvrec_taint(kvrec *r);

/* ids[0..n) were fed at positions pos0..pos0+n, by a prefill (by_prefill) or by decode. pos0 < len is a
 * rewind to pos0 first; pos0 > len is a gap: the record is dropped and tainted. */
void kvrec_record(kvrec *r, const int32_t *ids, uint32_t n, uint32_t pos0, bool by_prefill);

/* Drop positions [pos, len). Past the end: no change. */
void kvrec_rewind(kvrec *r, uint32_t pos);

/* How many leading ids of prompt[0..n) the KV already holds and may be reused under policy (see rules). */
uint32_t kvrec_reusable(const kvrec *r, const int32_t *prompt, uint32_t n, const kvrec_policy *policy);

#endif
