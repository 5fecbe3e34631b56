/* grammar_dfa.h — one generation's position in the grammar: its parse stacks, as states of a lazily built DFA.
 *
 * WHY: the set of parse stacks after the output so far decides everything that may follow, and a mask asks about
 * that set for every token, byte by byte. So a parse stack is a chain of frames (an element position and the frame
 * below), hash-consed so that equal stacks are equal ids; a set of stacks is interned as a DFA state, and each
 * state's transition on a byte class is computed once and memoized. A stack's top is always a terminal or the empty
 * stack (0): after a byte is matched, the continuation is expanded through rule references until every stack tops a
 * terminal again. Counting states (a string of maxLength 1000 is 1000 of them) would make every mask a new one:
 * dfa_canonical lowers every count above a level to that level, a state that accepts exactly the same byte strings
 * shorter than the level, so masks are shared across counts (grammar_mask.h).
 *
 * INVARIANT: state 0 is unused (0 in trans means "not computed yet") and state 1 is dead (GS_DEAD: every transition
 * leads back to it); frame 0 is the empty stack, and a frame's parent has a smaller id; a state's stacks are sorted.
 * The caches (frames, DFA states, transitions) are bounded — at most about 20 MiB, a few hundred KiB for a JSON
 * generation, plus GRAMMAR_MASK_SLOTS masks of n_vocab bytes; when one fills, everything but the current position is
 * dropped and rebuilt on demand (dfa_compact), which renumbers the states.
 *
 * Thread-safety: a grammar_state belongs to one generation (one thread at a time); the functions that take it const
 * do not change what it accepts, but they fill its caches. It borrows its grammar, which must outlive it.
 */
#ifndef FKV_GRAMMAR_DFA_H
#define FKV_GRAMMAR_DFA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/grammar_limits.h"
#include "constrain/grammar_lower.h"
#include "flatkv.h"

typedef struct grammar_state grammar_state; /* one generation's position in the grammar */

typedef struct {
    uint64_t masks;        /* grammar_allowed calls */
    uint64_t mask_hits;    /* of those, answered from the kept masks */
    uint64_t walk_nodes;   /* trie nodes visited by the walks */
    uint64_t dfa_states;   /* DFA states built (all time) */
    uint64_t compactions;  /* times a full cache was dropped */
    uint64_t overflows;    /* bytes refused or parses cut by GRAMMAR_MAX_STACKS / GRAMMAR_MAX_DEPTH */
} grammar_stats;

/* A state at the start of the grammar. NULL with err when out of memory. */
grammar_state *grammar_state_new(const grammar *g, fkv_error *err);
void grammar_state_free(grammar_state *s);
/* Advance s by n raw bytes (text forced into the output, tests); -1 (s unchanged) when they cannot continue it. */
int grammar_accept_bytes(grammar_state *s, const char *bytes, size_t n);
/* The output so far is a whole sentence of the grammar (end of generation may come now). */
bool grammar_complete(const grammar_state *s);
void grammar_state_stats(const grammar_state *s, grammar_stats *out);

/* ---- inside the state, for the masks (grammar_mask.c) ---- */

#define GS_DEAD 1u             /* the empty set of stacks: nothing can follow */
#define GS_FULL UINT32_MAX     /* a cache is full: compact and retry */
#define GS_CUT (UINT32_MAX - 1) /* a frame past GRAMMAR_MAX_DEPTH: the parse is dropped */

/* What the walk and dfa_canonical() learn about a state, computed on first use. */
typedef struct {
    uint32_t hash;
    uint32_t canon;    /* dfa_canonical() at canon_level; 0: not computed */
    uint32_t next;     /* the successor most ASCII bytes lead to; those bytes are `plain` */
    uint32_t reach[2]; /* reach(): [0] over ASCII, [1] with every chain state's characters leading on too */
    uint64_t plain[2];
    uint8_t complete;  /* holds the empty stack: the output may end here */
    uint8_t known;     /* KNOWN_PLAIN, KNOWN_REACH << 0 or 1 (that reach is exact, not a lower bound) */
    uint8_t utf8;      /* 0: not known; 1: every valid multi-byte character leads to next, every partial one
                        * alive; 2: not */
} gsinfo;

enum { KNOWN_PLAIN = 1, KNOWN_REACH = 2 };

typedef struct {
    uint8_t *mask;
    uint32_t state; /* 0: empty slot */
    bool partial;   /* tokens longer than the vocabulary's horizon were not computed */
    uint64_t used;
} gmask;

typedef struct {
    const grammar *g;
    /* Frames: frame f is element position f_pos[f] above frame f_parent[f] (< f); frame 0 is the empty stack. */
    uint32_t *f_pos, *f_parent, *f_mark;
    uint16_t *f_depth;
    size_t n_frames, cap_frames;
    uint32_t *f_table; /* open addressing: frame ids, 0 empty */
    size_t f_table_cap;
    /* DFA states: state k is the sorted stacks ids[s_off[k] .. s_off[k + 1]); 0 is unused (0 in trans means "not
     * computed yet"), 1 is the dead state. */
    uint32_t *s_off;
    gsinfo *info;
    uint32_t canon_level;
    uint32_t *pos_buf;    /* [GRAMMAR_MAX_DEPTH]: one stack's positions */
    size_t n_states, cap_states, max_states;
    uint32_t *s_table; /* open addressing: state ids, 0 empty */
    size_t s_table_cap;
    uint32_t *ids;
    size_t n_ids, cap_ids;
    uint32_t *trans; /* [state * n_cls + class] */
    size_t cap_trans;
    uint32_t cur, epoch;
    uint32_t *work, *out;
    size_t cap_work, cap_out;
    uint32_t path[GRAMMAR_MAX_TOKEN_BYTES + 1];
    uint8_t path_byte[GRAMMAR_MAX_TOKEN_BYTES + 1];
    gmask masks[GRAMMAR_MASK_SLOTS];
    const struct grammar_vocab *mask_gv; /* the vocabulary the kept masks are for */
    uint64_t *tbits; /* the walk's marks: bit t for token node_tok[t] (trie order: a subtree is a range) */
    uint64_t clock;
    grammar_stats stats;
} gcache;

struct grammar_state {
    gcache *c; /* everything is in the cache: the const accessors fill it */
};

/* State k's successor on byte `byte` (memoized); GS_DEAD, or GS_FULL when a cache is full (no compaction here). */
uint32_t dfa_step(gcache *c, uint32_t k, uint8_t byte);
/* Drops every frame, state and transition the current state does not need, renumbering what stays. */
void dfa_compact(gcache *c);
/* State x with every chain level above `level` lowered to it, which accepts the same byte strings shorter than
 * `level`; x itself when nothing changes or a cache is full. */
uint32_t dfa_canonical(gcache *c, uint32_t x, uint32_t level);
/* Walks bytes p[0..n) from the current state (compacting once if a cache fills); the state reached, or GS_DEAD. */
uint32_t dfa_walk_bytes(gcache *c, const uint8_t *p, size_t n);

#endif
