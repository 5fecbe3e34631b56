/* gbnf.h — GBNF text read into rules of code points, character classes and rule references (stage 1 of
 * grammar_parse).
 *
 * WHY: the text is checked and given its structure here, and an error is placed by line and column (1-based, the
 * column in bytes), or said to be the grammar's as a whole (no `root`, too large). The later stages work on these
 * rules and report through gbnf_error, so their errors are placed the same way.
 *
 * Repetitions are expanded the way llama.cpp does (S{m,n} = m copies of S, then a chain of n-m optional rules); a
 * counted repetition's copies past REPEAT_INLINE are a chain of rules, each "the item, then the next level", so a
 * count is a position in a rule: dfa_canonical() can lower it, and no repetition copies its item more than once per
 * count (nested counts do not multiply).
 *
 * INVARIANT: once gbnf_parse returns root's id, every rule referenced is defined, and every rule's elements are
 * alternatives each ended by PE_ALT (another follows) or PE_END (the rule's last). The text is bounded by
 * GRAMMAR_MAX_REPEAT, GRAMMAR_MAX_ELEMS and GRAMMAR_MAX_NESTING (grammar_limits.h).
 *
 * Thread-safety: a gparser belongs to one grammar_parse call.
 */
#ifndef FKV_GBNF_H
#define FKV_GBNF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/grammar_limits.h"
#include "flatkv.h"

enum { PE_END, PE_ALT, PE_REF, PE_CHAR, PE_CLASS };

typedef struct {
    uint32_t kind, value; /* PE_CHAR: a code point; PE_CLASS: a class id; PE_REF: a rule id */
} pelem;

typedef struct {
    pelem *el;
    size_t n, cap;
    uint32_t origin;        /* the user rule it was written in (itself for a user rule) */
    size_t name_at, name_len; /* a user rule's name in the text (name_len 0: synthesized) */
    size_t def_at, ref_at;  /* where it is defined and first referenced; SIZE_MAX: not (yet) */
} prule;

typedef struct {
    uint32_t lo, hi;
} cprange;

typedef struct {
    uint32_t off, n; /* ranges[off .. off + n) */
    bool neg;
} pclass;

/* A chain of rules L_1 .. L_levels made by a counted repetition: L_k is "item, then L_(k-1)" (L_1: the item alone),
 * each also empty when the repetition is optional. L_k is rule first + k - 1. */
typedef struct {
    uint32_t first, levels;
} pchain;

typedef struct {
    const char *src;
    size_t len, at;
    fkv_error *err;
    bool failed;
    pchain *chains;
    size_t n_chains, cap_chains;
    uint8_t *nullable; /* per rule: can match the empty string (gbnf_check_left_recursion) */
    prule *rules;
    size_t n_rules, cap_rules;
    uint32_t *names; /* open addressing: user rule id + 1, 0 empty */
    size_t names_cap, n_names;
    cprange *ranges;
    size_t n_ranges, cap_ranges;
    pclass *classes;
    size_t n_classes, cap_classes;
    uint32_t any_class; /* `.`, made on first use (UINT32_MAX: not yet) */
    size_t n_elems;     /* over all rules, against GRAMMAR_MAX_ELEMS */
    int depth;          /* parentheses */
} gparser;

/* Reads GBNF text (len bytes; need not be NUL-terminated) into p, which need not be initialized. The id of rule
 * `root`, or -1 with err naming the first error: a syntax error, an unknown escape, invalid UTF-8, an undefined rule,
 * a rule defined twice, no `root`, a bound exceeded. p holds memory either way: gbnf_parser_free. */
int64_t gbnf_parse(gparser *p, const char *gbnf, size_t len, fkv_error *err);
void gbnf_parser_free(gparser *p);

/* Records the first error, at byte `at` of the text (SIZE_MAX: the grammar as a whole); returns -1. */
__attribute__((format(printf, 3, 4))) int gbnf_error(gparser *p, size_t at, const char *fmt, ...);
/* Records running out of memory as the first error; returns -1. */
int gbnf_oom(gparser *p);

#endif
