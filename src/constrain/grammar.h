/* grammar.h — constrained decoding: which tokens may come next so that the output stays a sentence of a grammar.
 *
 * WHY: structured output (response_format json_object / json_schema, enforced tool calls, a `grammar` field) must
 * be a guarantee, not a hope. At each step every token whose bytes cannot continue a valid output is masked
 * before sampling, so whatever the sampler picks keeps the output valid, and end of generation is possible exactly
 * when the output is complete.
 *
 * Grammars are llama.cpp's GBNF (grammars/README.md there): rules `name ::= alternatives`, literals, character
 * classes over code points, `.`, grouping, `|`, `* + ? {m} {m,} {m,n}`, `#` comments, start rule `root`. The
 * semantics follow llama.cpp's grammar sampler — a set of parse stacks over the rules, advanced as the output
 * grows — with three differences, all on purpose:
 * - The engine runs on bytes. A character class is compiled to the UTF-8 byte sequences of its code points, so a
 *   multi-byte character may be split across tokens (a token that ends inside a character the grammar allows is
 *   allowed), and only valid UTF-8 is ever accepted: no overlong forms, no surrogates (U+D800..U+DFFF), nothing
 *   past U+10FFFF. `\xHH` in a grammar is the code point U+00HH, as in llama.cpp, not a raw byte.
 * - A rule defined twice is an error (llama.cpp keeps the last definition silently); names may also hold `_`.
 *   Token references (`<[id]>`, `<text>`, `!<...>`) are not supported and are refused by position.
 * - Everything that could blow up is bounded (below) and refused or cut, never allowed to crash or allocate
 *   without bound.
 *
 * How the mask is computed: the set of parse stacks after the output so far is one state of a lazily built DFA
 * over bytes (stacks are hash-consed frames, a set of them is interned, and each state's transition on a byte class
 * is computed once and memoized). The vocabulary is a trie of the tokens' byte strings (grammar_vocab); the mask
 * walks the trie in preorder through the DFA, so a prefix that is refused refuses every token under it in one step.
 * Three things keep the walk short where nearly everything is allowed (inside a string):
 * - a subtree whose bytes cannot fail from its node's state — ASCII bytes that all lead to one successor for as many
 *   steps as the subtree is deep, and valid UTF-8 when every character does the same — is allowed whole;
 * - counting states (a string of maxLength 1000 is 1000 of them) are masked through a canonical state with every
 *   count above the vocabulary's horizon H (the token length at most 128 tokens exceed) lowered to H + 1, which
 *   accepts exactly the same byte strings of up to H bytes; the few longer tokens are then checked one by one;
 * - the masks of the last GRAMMAR_MASK_SLOTS (canonical) states are kept: in a string, a mask is mostly a copy.
 * What it costs (bench/README.md): on average 2-31 µs per token on a 32k vocabulary, 20-310 µs on a 150k one.
 * A sampler may also sample first and check only the token it drew (grammar_token_allowed), masking only when
 * that one is refused.
 *
 * INVARIANTS:
 * - grammar_allowed(s)[id] == 1  <=>  grammar_accept(s, id) would succeed  <=>  grammar_token_allowed(s, id); the
 *   three share one transition function, so the mask never admits a token that accept refuses.
 * - A state accepts byte string w iff w is a prefix of a sentence of the grammar (within the bounds below), and
 *   grammar_complete(s) iff the output so far is a whole sentence.
 * - A compiled grammar and a grammar_vocab never change after they are made.
 *
 * Bounds (compile-time errors name what was exceeded):
 * - GRAMMAR_MAX_REPEAT: a repetition count {m}, {m,} or {m,n} above it is refused ({0,100000} is an error, not
 *   100000 rules); GRAMMAR_MAX_ELEMS: the compiled grammar after expanding repetitions; GRAMMAR_MAX_NESTING:
 *   parentheses.
 * - At run time: GRAMMAR_MAX_STACKS parse stacks and GRAMMAR_MAX_DEPTH frames per stack. A byte after which more
 *   stacks would be alive (a grammar ambiguous enough to need them) is rejected, and a parse deeper than the depth
 *   bound is cut; both only happen to grammars built to explode, and both are counted (grammar_stats).
 * - A state's caches (frames, DFA states, transitions) are bounded (at most about 20 MiB, a few hundred KiB for a
 *   JSON generation, plus GRAMMAR_MASK_SLOTS masks of n_vocab bytes); when one fills, everything but the current
 *   position is dropped and rebuilt on demand. A grammar_vocab takes about 32 bytes per trie node (217k nodes,
 *   7 MiB, for deepseek-llm's 100k ids).
 *
 * Ownership and threads: a grammar and a grammar_vocab are immutable and may be shared by any number of states
 * and threads. A grammar_state belongs to one generation (one thread at a time); grammar_allowed and
 * grammar_token_allowed take it const because they do not change what it accepts, but they fill its caches.
 * The state borrows its grammar, which must outlive it.
 */
#ifndef FKV_GRAMMAR_H
#define FKV_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flatkv.h"
#include "text/tok.h"

#define GRAMMAR_MAX_REPEAT 10000
#define GRAMMAR_MAX_ELEMS (1u << 20)
#define GRAMMAR_MAX_NESTING 256
#define GRAMMAR_MAX_STACKS 1024
#define GRAMMAR_MAX_DEPTH 4096
#define GRAMMAR_MASK_SLOTS 8
/* Tokens longer than this many bytes are never allowed (no real vocabulary has one). */
#define GRAMMAR_MAX_TOKEN_BYTES 1024

typedef struct grammar grammar;             /* compiled, immutable: shareable by many generations and threads */
typedef struct grammar_vocab grammar_vocab; /* a tokenizer's token byte strings, arranged for masking (built once per model) */
typedef struct grammar_state grammar_state; /* one generation's position in the grammar */

/* Compile GBNF text (len bytes; need not be NUL-terminated). NULL with err naming the line:column (1-based, the
 * column in bytes) and what is wrong: a syntax error, an unknown escape, invalid UTF-8, an undefined rule, a rule
 * defined twice, no `root`, left recursion (naming the rule), a bound exceeded. */
grammar *grammar_parse(const char *gbnf, size_t len, fkv_error *err);
void grammar_free(grammar *g);

/* GBNF text (malloc'd, NUL-terminated) for a JSON Schema given as JSON text. Supported: type (object, array,
 * string, number, integer, boolean, null, and arrays of them; without type, the type the keywords imply),
 * properties, required, additionalProperties (false / true / a schema; with properties it defaults to false, as
 * in llama.cpp), items, prefixItems, additionalItems, minItems, maxItems, enum, const, anyOf, oneOf (as anyOf),
 * allOf (merged: properties and required united, bounds intersected), $ref to #/... pointers (#/$defs/...,
 * #/definitions/..., # itself; recursion allowed), minLength/maxLength, format date, time, date-time, uuid,
 * minimum/maximum/exclusiveMinimum/exclusiveMaximum for integers (any bound) and numbers (integer bounds).
 * Annotations (title, description, default, examples, $comment, ...) and unknown keywords are ignored, as JSON
 * Schema says; every other keyword of the standard is refused. Every rule name starts with `prefix` (characters
 * [A-Za-z0-9_-]) and the start rule is `<prefix>root` (`root` with an empty prefix), so several schemas can be
 * spliced into one grammar. Whitespace is bounded: `space ::= | " " | "\n" [ \t]{0,20}` after `{ [ , :` and before
 * `} ]`, none around the whole value. Strings are valid JSON for strict parsers: no control characters, no \u0000,
 * surrogate escapes only in pairs. Numbers have at most 16 integer and 16 fraction digits and a 2-digit exponent
 * (none when bounded). NULL with err naming the keyword and its JSON path, e.g. "unsupported JSON Schema keyword
 * 'pattern' at /properties/name". {"type": "object"} is any object (response_format json_object). */
char *grammar_schema_gbnf(const char *schema_json, size_t len, const char *prefix, fkv_error *err);

/* From the tokenizer (tok.h): each token's bytes as tok_piece gives them in the middle of a text (SPM's leading
 * space kept, byte tokens <0xHH> as the raw byte, byte-level BPE mapped back to bytes). Control, unknown and
 * unused tokens are not text and are never allowed; end-of-generation ids (tok_is_eog) are allowed exactly when
 * the output is complete. (Right after BOS an SPM decoder drops a piece's leading space; the grammar sees it.)
 * NULL with err when out of memory. */
grammar_vocab *grammar_vocab_new(const tok_vocab *v, fkv_error *err);
/* The same from raw byte strings: token i is bytes[i][0..len[i]), or not text when bytes[i] is NULL; eog (NULL:
 * none) marks the end-of-generation ids. The strings are copied. */
grammar_vocab *grammar_vocab_new_pieces(int32_t n_vocab, const char *const *bytes, const size_t *len,
                                        const bool *eog, fkv_error *err);
void grammar_vocab_free(grammar_vocab *gv);
int32_t grammar_vocab_n(const grammar_vocab *gv);
/* The trie's node count (for the bench). */
size_t grammar_vocab_trie_nodes(const grammar_vocab *gv);

/* A state at the start of the grammar. NULL with err when out of memory. */
grammar_state *grammar_state_new(const grammar *g, fkv_error *err);
void grammar_state_free(grammar_state *s);
/* allowed[id] = 1 when token id's bytes can continue a valid output from s, else 0; end-of-generation ids are
 * allowed exactly when the output so far is complete. allowed has grammar_vocab_n(gv) entries. No allocation
 * once the state's caches are warm (the first call for a vocabulary makes the kept masks). A grammar that matches
 * nothing, or a state stopped by a bound, allows nothing at all: the caller ends the generation. */
void grammar_allowed(const grammar_state *s, const grammar_vocab *gv, uint8_t *allowed);
/* One entry of that mask, without computing the rest (cost: the token's bytes). For sampling first and masking
 * only when the sampled token is refused. */
bool grammar_token_allowed(const grammar_state *s, const grammar_vocab *gv, int32_t id);
/* Advance s by token id; -1 (s unchanged) when id is not allowed. An allowed end-of-generation id leaves s as it
 * is (complete). */
int grammar_accept(grammar_state *s, const grammar_vocab *gv, int32_t id);
/* Advance s by n raw bytes (text forced into the output, tests); -1 (s unchanged) when they cannot continue it. */
int grammar_accept_bytes(grammar_state *s, const char *bytes, size_t n);
/* The output so far is a whole sentence of the grammar (end of generation may come now). */
bool grammar_complete(const grammar_state *s);

typedef struct {
    uint64_t masks;        /* grammar_allowed calls */
    uint64_t mask_hits;    /* of those, answered from the kept masks */
    uint64_t walk_nodes;   /* trie nodes visited by the walks */
    uint64_t dfa_states;   /* DFA states built (all time) */
    uint64_t compactions;  /* times a full cache was dropped */
    uint64_t overflows;    /* bytes refused or parses cut by GRAMMAR_MAX_STACKS / GRAMMAR_MAX_DEPTH */
} grammar_stats;
void grammar_state_stats(const grammar_state *s, grammar_stats *out);

#endif
