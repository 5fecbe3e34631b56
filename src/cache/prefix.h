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
 * The rules are the record's (kvrec.h): the tree measures how far the prompt agrees with its best path (counting
 * only rows a prefill wrote when bound_to_frontier) and which window rows are held; kvrec_decide decides the
 * reuse. Ids are recorded where they are fed (prefix_commit, after their rows are written), so a node never
 * claims a row it does not hold.
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
 * Window layers (a model's sliding-window layers, prefix_window): their rows live in a pool of their own, and a
 * node's window block is held only while something can still read it — a window row at p reads the rows of
 * [p - W + 1, p) alone, so a sequence far past a block never needs that block's window rows again, while its
 * other layers' rows stay. What holds a window block (its pins):
 * - a running sequence, for the blocks from the tile of n_pos - B - W + 1 on (its window, and one block of slack);
 * - a kept resume point q, for the blocks from the tile of q - B - W + 1 up to q: a later prompt may resume
 *   anywhere in [q - B, q]. Kept: the prompt's end (prefix_keep), the sequence's end (prefix_finish), and every
 *   multiple of the grid it passes. When a sequence finishes, the prompt and reply ends it resumed past (the
 *   previous turn's) are no longer kept; grid points stay until their block is evicted.
 * A window block with no pin goes back to its pool at once. A prompt resumes at the longest reusable length p
 * whose window rows [tile of p - W + 1, p) are all held; where some are not, at the longest shorter one that is
 * — never on rows that are not there — and the start says so (prefix_seq.reuse). Both pools share one budget.
 *
 * Recurrent states (a model's gated DeltaNet layers, prefix_states): a state at p folds in every token before p and
 * cannot be cut back, so a prompt resumes at p only where the state after exactly p positions is at hand. The tree
 * keeps copies at the same kinds of points as the window layers' pins — the prompt's end (one position before it:
 * the prompt sent again must compute its last row), the sequence's end, every multiple of the state grid it passes —
 * each on the node holding position p - 1 (a copied block takes the states it copies along), given by the engine when it has
 * the state there (prefix_keep_state). A prompt resumes at the longest reusable length that has a kept state (or the
 * caller's own, kvrec_policy.state), which prefix_start copies out; the previous turn's ends give way when a sequence
 * that resumed past them finishes, as the window pins do. Kept states share the budget with the blocks and are
 * evicted, least recently used first, against them (a node's states go with it). With a disk tier each kept state is
 * also written there (kvdisk_write_state, unless the sequence is memory_only), and a start that finds no later state
 * in memory lists and reads the state files of its path: a restart and another replica resume from them.
 *
 * Thread-safety: one owner (the engine thread).
 */
#ifndef FKV_PREFIX_H
#define FKV_PREFIX_H

#include <stdbool.h>
#include <stdint.h>

#include "cache/kvdisk.h"
#include "cache/kvpool.h"
#include "cache/kvrec.h"

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
    kvrec_reuse reuse;            /* set by prefix_start */
    uint32_t wfrom;               /* window layers: nodes [wfrom, n_nodes) hold this sequence's window pins */
    prefix_node *root; /* of its salt */
    prefix_node **nodes;
    uint32_t n_nodes, cap;
    uint32_t n_pos; /* positions whose rows are written and ids recorded */
    uint32_t from_disk; /* positions of the reuse read from the disk tier (set by prefix_start) */
    bool memory_only;   /* its blocks are never written to the disk tier (the caller sets it after the start) */
    bool state_kept;    /* the start resumed from a kept recurrent state (prefix_start's state_out) */
} prefix_seq;

typedef struct {
    uint64_t hits;          /* sequences started with a reuse */
    uint64_t misses;        /* sequences started from position 0 */
    uint64_t evictions;     /* blocks evicted */
    uint64_t reused_tokens; /* positions reused over all starts */
    uint32_t blocks_in_use; /* blocks holding rows (referenced or cached) */
    uint32_t blocks_free;
    uint32_t blocks_shared; /* blocks referenced by two or more sequences */
    uint32_t salts;         /* cache salts with a root now (one is taken over once nothing is under it) */
    uint32_t window_blocks_in_use; /* window layers' blocks held */
    uint64_t window_blocks_dropped; /* window layers' blocks given back once nothing could read them */
    uint64_t window_fallbacks;      /* starts that reused less than they agreed because window rows were dropped */
    uint32_t states_kept;           /* recurrent states held */
    size_t state_bytes;             /* their bytes */
    uint64_t state_hits;            /* starts that resumed from a kept state */
    uint64_t state_disk_hits;       /* of them, from a state read from the disk tier */
    uint64_t states_evicted;        /* kept states given up for room */
} prefix_stats;

/* Window layers kept apart (see above). */
typedef struct {
    kvpool *pool;  /* their blocks, block_rows as the tree's pool */
    uint32_t window; /* W: a window row at p reads rows (p - W, p] */
    uint32_t grid;   /* a resume point kept at every multiple of grid positions; 0: none */
    size_t budget;   /* bytes the blocks of both pools may take together */
} prefix_window;

/* Recurrent states kept (see above). */
typedef struct {
    size_t bytes;  /* of one state; 0: the model has no recurrent layers */
    uint32_t grid; /* a state kept at every multiple of grid positions; 0: none */
    size_t budget; /* bytes the blocks and the kept states may take together */
} prefix_states;

/* The disk tier below the tree (kvdisk.h): a prompt's path continues from it where memory ends, and every block
 * that fills is written to it (unless its sequence is memory_only). Blocks are named by ns chained with the salt,
 * then with each block's ids. Not with window layers kept apart (their rows are not all in a block). */
typedef struct {
    kvdisk *disk;
    kvdisk_key ns;
} prefix_disk;

typedef struct prefix_tree prefix_tree;

/* win: NULL, or the window layers' own pool (every block of pool then holds the other layers only). states: NULL, or
 * the recurrent states' sizes. disk: NULL, or the disk tier (borrowed; not with win). */
prefix_tree *prefix_new(kvpool *pool, const prefix_window *win, const prefix_states *states, const prefix_disk *disk,
                        fkv_error *err);
/* Frees the tree (every sequence must be finished); the pool stays the caller's. */
void prefix_free(prefix_tree *t);

/* Start seq for prompt ids[0..n) under salt (NULL or "" is the default salt): acquire the longest reusable
 * cached prefix under policy; seq->n_pos = the positions reused (returned too). With cache false nothing
 * is reused. With recurrent states (policy->state set), the reuse stops where the caller's state or a kept one
 * stands; a kept one is copied into state_out (prefix_states.bytes) and seq->state_kept set. -1 with err when the
 * pool cannot hold even the copied tail. */
int64_t prefix_start(prefix_tree *t, const char *salt, const int32_t *ids, uint32_t n, const kvrec_policy *policy,
                     bool cache, prefix_seq *seq, void *state_out, fkv_error *err);
/* Make positions [n_pos, n_pos + n) writable: blocks allocated (evicting if needed). -1 with err when the
 * pool is full of referenced blocks. */
int prefix_reserve(prefix_tree *t, prefix_seq *seq, uint32_t n, fkv_error *err);
/* The rows of positions [n_pos, n_pos + n) are written: record their ids. */
void prefix_commit(prefix_tree *t, prefix_seq *seq, const int32_t *ids, uint32_t n, bool by_prefill);
/* Keep a resume at seq's n_pos (the prompt's end) for window layers; nothing without them. */
void prefix_keep(prefix_tree *t, prefix_seq *seq);
/* Keep a copy of state, the recurrent state after `at` positions of seq (at <= its n_pos): one before the prompt's
 * end (so that the prompt sent again, which must compute its last row, resumes too), the sequence's end, or (grid) a
 * multiple of the state grid. Nothing without recurrent states, at 0, or when the budget has no room left that
 * eviction can make. */
void prefix_keep_state(prefix_tree *t, prefix_seq *seq, uint32_t at, const void *state, bool grid);
/* The state grid (prefix_states.grid; 0: none). */
uint32_t prefix_state_grid(const prefix_tree *t);
/* The sequence is done: its references go; its rows stay cached (matchable) until evicted; blocks it
 * reserved but never wrote are freed. seq is reset. */
void prefix_finish(prefix_tree *t, prefix_seq *seq);

/* The KV block of position p of seq (p < reserved positions), and its window layers' block (0 where it holds none:
 * no row there is read). */
uint32_t prefix_block(const prefix_tree *t, const prefix_seq *seq, uint32_t p);
uint32_t prefix_wblock(const prefix_tree *t, const prefix_seq *seq, uint32_t p);
bool prefix_wblock_held(const prefix_tree *t, const prefix_seq *seq, uint32_t p);
prefix_stats prefix_get_stats(const prefix_tree *t);

#endif
