/* jsonschema_string.h — strings: by length and format, and the keys that are none of an object's declared names.
 *
 * WHY: a string schema bounds characters, not bytes, so its rule repeats the fixed rule of one JSON character (an
 * escape is one). An object that allows additional properties must not let one reuse a declared name, or that
 * property's value would escape its own schema: the names are put in a trie of code points and the rule admits
 * every string that leaves the trie or stops where no name ends.
 *
 * INVARIANT: every string rule admits only JSON strings strict parsers accept (no control characters, no \u0000,
 * surrogate escapes only in pairs); js_not_names admits exactly the strings that are none of the names.
 *
 * Thread-safety: works on one jsctx.
 */
#ifndef FKV_JSONSCHEMA_STRING_H
#define FKV_JSONSCHEMA_STRING_H

#include <stddef.h>

#include <jansson.h>

#include "constrain/jsonschema_rules.h"

/* b += the rule body of string schema s (minLength, maxLength, format). */
void js_string_body(jsctx *c, sbuf *b, json_t *s, const char *path);
/* A rule for the JSON strings (with quotes) that are none of names[0..n); its name, or NULL with an error. */
const char *js_not_names(jsctx *c, const char *const *names, size_t n, const char *path, const char *hint);

#endif
