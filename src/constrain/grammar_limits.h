/* grammar_limits.h — how far constrained decoding goes before it refuses: the bounds, in one place.
 *
 * WHY: grammars and JSON Schemas arrive in requests. Everything in them that could blow up is bounded: past a bound
 * the input is refused (at compile time, with an error that names what was exceeded) or the parse is cut (at run
 * time, counted in grammar_stats) — never a crash, never an allocation without bound.
 *
 * INVARIANT: a bound exceeded at compile time makes grammar_parse (or jsonschema_to_gbnf, which refuses counts above
 * GRAMMAR_MAX_REPEAT itself, naming the keyword) return NULL; one exceeded at run time refuses that byte or drops that
 * parse, and only grammars built to explode reach one.
 *
 * Thread-safety: constants only.
 */
#ifndef FKV_GRAMMAR_LIMITS_H
#define FKV_GRAMMAR_LIMITS_H

/* Compile time (gbnf.c, grammar_lower.c): a repetition count {m}, {m,} or {m,n} above GRAMMAR_MAX_REPEAT is refused
 * ({0,100000} is an error, not 100000 rules); GRAMMAR_MAX_ELEMS bounds the compiled grammar after expanding
 * repetitions; GRAMMAR_MAX_NESTING bounds parentheses. */
#define GRAMMAR_MAX_REPEAT 10000
#define GRAMMAR_MAX_ELEMS (1u << 20)
#define GRAMMAR_MAX_NESTING 256
/* Run time (grammar_dfa.c): parse stacks alive at once, and frames per stack. A byte after which more stacks would
 * be alive (a grammar ambiguous enough to need them) is rejected, and a parse deeper than the depth bound is cut. */
#define GRAMMAR_MAX_STACKS 1024
#define GRAMMAR_MAX_DEPTH 4096
/* Masks a state keeps (grammar_mask.c). */
#define GRAMMAR_MASK_SLOTS 8
/* Tokens longer than this many bytes are never allowed (no real vocabulary has one). */
#define GRAMMAR_MAX_TOKEN_BYTES 1024

#endif
