/* prefix.h — the prefix cache of many conversations: a tree of KV blocks keyed by the token ids that
 * built them.
 *
 * WHY: with one cached conversation, a second user (or an agent running two tasks) evicts the first and
 * every switch pays the whole transcript again. Here every cached sequence stays matchable: a new prompt
 * is matched against all of them at once, and what they share (a system prompt, tool definitions, a
 * conversation forked at turn k) is stored once.
 *
 * Shape: a trie whose nodes are KV blocks (kvpool.h). A node at depth d holds the ids of positions
 * [d·B, d·B + n_tokens) (B = block_rows) and their K/V rows; only full nodes (n_tokens = B) have
 * children. A root per cache salt: sequences under different salts never share a row.
 *
 * The rules are the record's (kvrec.h), applied to the best path through the tree: reuse the longest
 * common prefix of prompt and tree, at most len(prompt) − 1, nothing below min_reuse, only rows written
 * by a prefill when bound_to_frontier. Ids are recorded where they are fed (prefix_commit, after their
 * rows are written), so a node never claims a row it does not hold.
 *
 * INVARIANTS:
 * - A node's rows [0, n_tokens) are exactly the rows computed from the ids on its path, tokens[0..n_tokens):
 *   identical to a cold run of those ids, because rows depend only on the tokens at and before them.
 * - Only a sequence's own tail node is ever written, and it is referenced by that sequence alone: a
 *   sequence that wants to extend a node someone else references (or that holds more ids than it keeps)
 *   copies the rows it keeps into a fresh block first (copy-on-write).
 * - A referenced block is never evicted. Unreferenced leaves are evicted least recently used first when
 *   the pool runs out; a parent becomes evictable when its last child goes.
 *
 * Thread-safety: one owner (the engine thread).
 */
#ifndef FKV_PREFIX_H
#define FKV_PREFIX_H

#include <stdbool.h>
#include <stdint.h>

#include "kvpool.h"
#include "kvrec.h"

typedef struct prefix_node prefix_node;

/* Where a prompt parted from the cached sequence it agreed with longest: at position `at`, the cache
 * continues with cached[0..n_cached) where the prompt has other ids (n_cached 0: it did not part — the
 * cache simply ended, or nothing agreed at all). */
typedef struct {
    uint32_t at;
    uint32_t n_cached;
    int32_t cached[8];
} prefix_divergence;

/* One sequence's path: nodes[i] holds positions [i·B, (i+1)·B). */
typedef struct {
    prefix_divergence divergence; /* set by prefix_start */
    prefix_node *root; /* of its salt */
    prefix_node **nodes;
    uint32_t n_nodes, cap;
    uint32_t n_pos; /* positions whose rows are written and ids recorded */
} prefix_seq;

typedef struct {
    uint64_t hits;          /* sequences started with a reuse */
    uint64_t misses;        /* sequences started from position 0 */
    uint64_t evictions;     /* blocks evicted */
    uint64_t reused_tokens; /* positions reused over all starts */
    uint32_t blocks_in_use; /* blocks holding rows (referenced or cached) */
    uint32_t blocks_free;
    uint32_t blocks_shared; /* blocks referenced by two or more sequences */
} prefix_stats;

typedef struct prefix_tree prefix_tree;

prefix_tree *prefix_new(kvpool *pool, fkv_error *err);
/* Frees the tree (every sequence must be finished); the pool stays the caller's. */
void prefix_free(prefix_tree *t);

/* Start seq for prompt ids[0..n) under salt (NULL or "" is the default salt): acquire the longest reusable
 * cached prefix under policy; seq->n_pos = the positions reused (returned too). With cache false nothing
 * is reused. -1 with err when the pool cannot hold even the copied tail. */
int64_t prefix_start(prefix_tree *t, const char *salt, const int32_t *ids, uint32_t n, const kvrec_policy *policy,
                     bool cache, prefix_seq *seq, fkv_error *err);
/* Make positions [n_pos, n_pos + n) writable: blocks allocated (evicting if needed). -1 with err when the
 * pool is full of referenced blocks. */
int prefix_reserve(prefix_tree *t, prefix_seq *seq, uint32_t n, fkv_error *err);
/* The rows of positions [n_pos, n_pos + n) are written: record their ids. */
void prefix_commit(prefix_tree *t, prefix_seq *seq, const int32_t *ids, uint32_t n, bool by_prefill);
/* The sequence is done: its references go; its rows stay cached (matchable) until evicted; blocks it
 * reserved but never wrote are freed. seq is reset. */
void prefix_finish(prefix_tree *t, prefix_seq *seq);

/* The KV block of position p of seq (p < reserved positions). */
uint32_t prefix_block(const prefix_tree *t, const prefix_seq *seq, uint32_t p);
prefix_stats prefix_get_stats(const prefix_tree *t);

#endif
