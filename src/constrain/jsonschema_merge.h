/* jsonschema_merge.h — $ref pointers resolved, and schemas merged into one (allOf, a $ref beside other keywords,
 * anyOf members with sibling constraints).
 *
 * WHY: a grammar cannot intersect two rules, so what two schemas both constrain is written as one schema: properties
 * and required united, lower bounds raised, upper bounds lowered, enums intersected, types intersected (integer
 * within number). What cannot be merged that way (two different item arrays, two anyOf) is refused, naming it.
 *
 * INVARIANT: js_flatten's result has no $ref or allOf at its top; merging nests at most JS_MAX_MERGE deep, so a
 * cycle of $ref through allOf ends in an error, never in a stack overflow.
 *
 * Thread-safety: works on one jsctx; returns new references.
 */
#ifndef FKV_JSONSCHEMA_MERGE_H
#define FKV_JSONSCHEMA_MERGE_H

#include <jansson.h>

#include "constrain/jsonschema_rules.h"

/* The subschema a "#..." pointer names, or NULL with an error. */
json_t *js_resolve(jsctx *c, const char *ref, const char *path);
/* s with its own $ref and allOf merged in (a new reference): what it constrains, in one object. */
json_t *js_flatten(jsctx *c, json_t *s, const char *path);
/* One schema that both a and b constrain to (a new reference), or NULL with an error. */
json_t *js_merge(jsctx *c, json_t *a, json_t *b, const char *path);

#endif
