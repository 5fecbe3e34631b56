/* jsonschema.h — a JSON Schema turned into GBNF text, which grammar_parse then compiles like any grammar.
 *
 * WHY: structured output is asked for as a JSON Schema (response_format json_schema, a tool's parameters); written as
 * a grammar, it is enforced by the same engine as a raw `grammar`, and the text can be read, logged and spliced with
 * other rules (the prefix).
 *
 * INVARIANT: a text the returned grammar accepts is JSON that the schema validates; the
 * limits below (digits, whitespace, property order) only ever leave valid texts out.
 *
 * Thread-safety: a plain function; calls share nothing.
 */
#ifndef FKV_JSONSCHEMA_H
#define FKV_JSONSCHEMA_H

#include <stddef.h>

#include "flatkv.h"

/* GBNF text (malloc'd, NUL-terminated) for a JSON Schema given as JSON text. Supported: type (object, array,
 * string, number, integer, boolean, null, and arrays of them; without type, the type the keywords imply),
 * properties, required, additionalProperties (false / true / a schema; with properties it defaults to false, as
 * in llama.cpp), propertyNames (type string, or listed names), minProperties/maxProperties (when the declared
 * properties meet them, or on free keys), items, prefixItems, additionalItems, minItems, maxItems, uniqueItems
 * (over a finite set of values), enum, const, anyOf, oneOf (as anyOf, when its branches are disjoint), allOf
 * (merged: properties and required united, bounds intersected), $ref to #/... pointers (#/$defs/...,
 * #/definitions/..., # itself; recursion allowed), minLength/maxLength, pattern (jsonschema_pattern.h), format date,
 * time, date-time, uuid, email, hostname, ipv4, ipv6, uri, minimum/maximum/exclusiveMinimum/exclusiveMaximum for
 * integers (any bound) and numbers (integer bounds), multipleOf (a positive integer).
 * Annotations (title, description, default, examples, $comment, ...) and unknown keywords are ignored, as JSON
 * Schema says; every other keyword of the standard is refused. Every rule name starts with `prefix` (characters
 * [A-Za-z0-9_-]) and the start rule is `<prefix>root` (`root` with an empty prefix), so several schemas can be
 * spliced into one grammar. Whitespace is bounded: `space ::= | " " | "\n" [ \t]{0,20}` after `{ [ , :` and before
 * `} ]`, none around the whole value. Strings are valid JSON for strict parsers: no control characters, no \u0000,
 * surrogate escapes only in pairs. Numbers have at most 16 integer and 16 fraction digits and a 2-digit exponent
 * (none when bounded). NULL with err naming the keyword and its JSON path, e.g. "unsupported JSON Schema keyword
 * 'pattern' at /properties/name". {"type": "object"} is any object (response_format json_object). */
char *jsonschema_to_gbnf(const char *schema_json, size_t len, const char *prefix, fkv_error *err);

#endif
