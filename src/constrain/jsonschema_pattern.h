/* jsonschema_pattern.h — a string schema's "pattern" (an ECMA-262 regular expression) written as GBNF.
 *
 * WHY: a grammar can hold a regular expression's language exactly, as long as the expression is regular: literals,
 * classes, groups, alternation and bounded or unbounded repetition translate one to one. What is not regular, or not
 * without an automaton construction (lookarounds, backreferences, word boundaries, anchors inside the expression),
 * is refused naming 'pattern' and the construct. JSON Schema patterns are unanchored: without ^ (or $) the match may
 * begin (or end) anywhere, so any characters are allowed before (after) it.
 *
 * INVARIANT: the rule admits exactly the JSON strings (with quotes) whose decoded content the pattern matches, less
 * those whose content holds a control character or U+007F (never written) — a pattern that requires one is
 * refused; a matched '"' or '\' is written escaped (\" and \\), every other character as itself.
 *
 * Thread-safety: works on one jsctx.
 */
#ifndef FKV_JSONSCHEMA_PATTERN_H
#define FKV_JSONSCHEMA_PATTERN_H

#include "constrain/jsonschema_rules.h"

/* b += the rule body of a string whose content matches pattern (UTF-8); an error naming 'pattern' otherwise. */
void js_pattern_body(jsctx *c, sbuf *b, const char *pattern, const char *path);

#endif
