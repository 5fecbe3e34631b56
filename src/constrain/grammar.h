/* grammar.h — constrained decoding: which tokens may come next so that the output stays a sentence of a grammar.
 *
 * WHY: structured output (response_format json_object / json_schema, enforced tool calls, a `grammar` field) must
 * be a guarantee, not a hope. At each step every token whose bytes cannot continue a valid output is masked
 * before sampling, so whatever the sampler picks keeps the output valid, and end of generation is possible exactly
 * when the output is complete.
 *
 * Grammars are llama.cpp's GBNF: rules `name ::= alternatives`, literals, character classes over code points, `.`,
 * grouping, `|`, `* + ? {m} {m,} {m,n}`, `#` comments, start rule `root`. The semantics follow llama.cpp's grammar
 * sampler — a set of parse stacks over the rules, advanced as the output grows — with three differences, all on
 * purpose:
 * - The engine runs on bytes. A character class is compiled to the UTF-8 byte sequences of its code points, so a
 *   multi-byte character may be split across tokens (a token that ends inside a character the grammar allows is
 *   allowed), and only valid UTF-8 is ever accepted: no overlong forms, no surrogates (U+D800..U+DFFF), nothing
 *   past U+10FFFF. `\xHH` in a grammar is the code point U+00HH, as in llama.cpp, not a raw byte.
 * - A rule defined twice is an error (llama.cpp keeps the last definition silently); names may also hold `_`.
 *   Token references (`<[id]>`, `<text>`, `!<...>`) are not supported and are refused by position.
 * - Everything that could blow up is bounded (grammar_limits.h) and refused or cut, never allowed to crash or
 *   allocate without bound.
 *
 * This header is the folder's interface: it includes the modules the engine calls, in data-flow order. README.md in
 * this folder maps every file.
 *
 * INVARIANTS:
 * - grammar_allowed(s)[id] == 1  <=>  grammar_accept(s, id) would succeed  <=>  grammar_token_allowed(s, id); the
 *   three share one transition function, so the mask never admits a token that accept refuses.
 * - A state accepts byte string w iff w is a prefix of a sentence of the grammar (within the bounds), and
 *   grammar_complete(s) iff the output so far is a whole sentence.
 * - A compiled grammar and a grammar_vocab never change after they are made.
 *
 * Ownership and threads: a grammar and a grammar_vocab are immutable and may be shared by any number of states
 * and threads. A grammar_state belongs to one generation (one thread at a time); grammar_allowed and
 * grammar_token_allowed take it const because they do not change what it accepts, but they fill its caches.
 * The state borrows its grammar, which must outlive it.
 */
#ifndef FKV_GRAMMAR_H
#define FKV_GRAMMAR_H

#include "constrain/grammar_limits.h" /* the bounds */
#include "constrain/jsonschema.h"     /* a JSON Schema as GBNF text: jsonschema_to_gbnf */
#include "constrain/grammar_lower.h"  /* GBNF text compiled to rules over bytes: grammar_parse, grammar_free */
#include "constrain/grammar_vocab.h"  /* a tokenizer's tokens as a trie: grammar_vocab_new, ... */
#include "constrain/grammar_dfa.h"    /* one generation's state: grammar_state_new, grammar_accept_bytes, ... */
#include "constrain/grammar_mask.h"   /* by token: grammar_allowed, grammar_token_allowed, grammar_accept */

#endif
