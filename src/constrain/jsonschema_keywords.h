/* jsonschema_keywords.h — what a schema's keywords say: which the converter implements, which types a schema
 * allows, counts.
 *
 * WHY: JSON Schema ignores keywords it does not know, so a converter that silently skipped the standard's constraints
 * it does not implement ("pattern", "multipleOf", ...) would let through values the schema refuses. The standard's
 * constraint keywords are therefore listed: those implemented (js_constraints) are converted, the others refused by
 * name, and only annotations and unknown keywords are ignored.
 *
 * INVARIANT: every keyword is in exactly one of three sets: implemented (js_constraints), refused
 * (js_check_keywords), ignored (the rest).
 *
 * Thread-safety: plain functions over constant tables.
 */
#ifndef FKV_JSONSCHEMA_KEYWORDS_H
#define FKV_JSONSCHEMA_KEYWORDS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "constrain/jsonschema_rules.h"

/* The types, as bits; js_type_names[i] is bit 1 << i's name. */
enum { T_NULL = 1, T_BOOLEAN = 2, T_OBJECT = 4, T_ARRAY = 8, T_NUMBER = 16, T_STRING = 32, T_INTEGER = 64 };
#define T_ANY (T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING)
extern const char *const js_type_names[7];

/* The constraint keywords the converter implements (NULL-terminated). */
extern const char *const js_constraints[];
bool js_in_list(const char *const *list, const char *k);
/* Refuses the standard's keywords this converter does not implement (a propertyNames that every string meets is a
 * no-op). */
int js_check_keywords(jsctx *c, json_t *s, const char *path);
/* The names a propertyNames schema lists ({"enum": [strings]}, type string at most), borrowed; else NULL. */
json_t *js_listed_names(json_t *v);
/* s constrains anything at all (false does; true, {} and annotations alone do not). */
bool js_has_constraints(json_t *s);
/* A $ref beside other constraints (JSON Schema 2019+ applies both): merged rather than referenced by name. */
bool js_ref_has_siblings(json_t *s);
/* A copy of object s without key (a new reference). */
json_t *js_without(json_t *s, const char *key);
/* The types s may take: its "type" (string or array), else what its keywords imply, else any. */
int js_schema_types(jsctx *c, json_t *s, const char *path, unsigned *out);
/* The set of types of a "type" value (absent: all). */
unsigned js_type_set(json_t *t);
/* Whether JSON value v is of one of the types. */
bool js_value_has_type(const json_t *v, unsigned types);
/* A pair of count keywords (minItems/maxItems, minLength/maxLength): each a non-negative integer (absent: 0, and
 * INT32_MAX for no bound), neither above GRAMMAR_MAX_REPEAT unless unbounded. */
int js_count_range(jsctx *c, json_t *s, const char *min_key, const char *max_key, const char *path, int64_t *min,
                   int64_t *max);

#endif
