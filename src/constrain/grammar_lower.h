/* grammar_lower.h — the compiled grammar: rules over bytes; grammar_parse makes one from GBNF text.
 *
 * WHY: the engine runs on bytes, since a token is a byte string and may end inside a character. grammar_parse runs
 * the stages in data-flow order: the parser reads the text into rules of code points and character classes
 * (gbnf.h), left recursion is refused (gbnf_leftrec.h), and lowering turns every code point into its UTF-8 bytes and
 * every character class into a rule whose alternatives are byte-range sequences (a class of ASCII only stays one
 * terminal). Terminals are sets of bytes, and bytes that every terminal treats alike share a class, so a DFA state's
 * transitions are a row of n_cls entries (grammar_dfa.h).
 *
 * INVARIANT: only valid UTF-8 can match: no overlong forms, nothing past U+10FFFF, no surrogates (a class never holds
 * one, and a surrogate in a literal becomes a terminal that matches nothing). A grammar never changes after
 * grammar_parse returns it.
 *
 * Thread-safety: immutable once made; shared by any number of states and threads.
 */
#ifndef FKV_GRAMMAR_LOWER_H
#define FKV_GRAMMAR_LOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flatkv.h"

/* An element: kind in the top 2 bits, value (a rule or terminal id) below. An alternative ends with ALT (another
 * follows) or END (the rule's last). */
enum { GE_END = 0, GE_ALT = 1, GE_REF = 2, GE_BYTES = 3 };
#define GE_KIND(e) ((e) >> 30)
#define GE_VALUE(e) ((e) & 0x3fffffffu)
#define GE_MAKE(k, v) ((uint32_t)(k) << 30 | (uint32_t)(v))
#define GE_IS_END(e) (GE_KIND(e) <= GE_ALT)

typedef struct {
    uint64_t w[4];
} byteset;

static inline bool byteset_has(const byteset *s, uint8_t b) { return s->w[b >> 6] >> (b & 63) & 1; }

/* A chain's levels 2 .. levels + 1 as positions: level k's rule occupies [lo + (k - 2) * stride, + stride), all alike
 * (level 1 has no reference to a lower level, so it differs). */
typedef struct {
    uint32_t lo, stride, levels;
} gchain;

struct grammar {
    gchain *chains; /* sorted by position; only chains of an item that cannot be empty */
    uint32_t n_chains;
    uint32_t *elems; /* [0] = REF root, [1] = END: the start; then every rule's alternatives */
    uint32_t n_elems;
    uint32_t *alt_off; /* [n_rules + 1]: rule r's alternatives start at alts[alt_off[r] .. alt_off[r + 1]) */
    uint32_t *alts;
    uint32_t n_rules;
    byteset *terms;
    uint32_t n_terms;
    uint8_t cls[256];     /* byte -> its class */
    uint8_t cls_rep[256]; /* class -> one byte of it */
    uint32_t n_cls;
};

typedef struct grammar grammar; /* compiled, immutable: shareable by many generations and threads */

/* Compile GBNF text (len bytes; need not be NUL-terminated). NULL with err naming the line:column (1-based, the
 * column in bytes) and what is wrong: a syntax error, an unknown escape, invalid UTF-8, an undefined rule, a rule
 * defined twice, no `root`, left recursion (naming the rule), a bound exceeded. */
grammar *grammar_parse(const char *gbnf, size_t len, fkv_error *err);
void grammar_free(grammar *g);

#endif
