/* jsonschema_rules.h — the grammar being written from a schema: its rules, their names, the fixed pieces, the
 * first error.
 *
 * WHY: every subschema becomes one rule, named from where it sits (root, root-address, root-address-city, ...; a $ref
 * target is ref-<its last pointer segment>) and made unique; the fixed pieces (space, string, number, value, the date
 * and time formats, ...) are emitted once, on first use, with the pieces they need. Rules are written in the order
 * they are finished. Every module of the converter writes through here.
 *
 * INVARIANT: every name handed out starts with the prefix, is unique, and is owned by the name set (freed with it);
 * only the first error is recorded (failed), so err names the first thing wrong and the JSON path where it is.
 *
 * Thread-safety: a jsctx belongs to one jsonschema_to_gbnf call.
 */
#ifndef FKV_JSONSCHEMA_RULES_H
#define FKV_JSONSCHEMA_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "constrain/sbuf.h"
#include "flatkv.h"

/* The fixed rules (space, string, number, value, the formats, ...), for js_prim. */
enum {
    JP_SPACE, JP_HEX, JP_U4, JP_ESCAPE, JP_CHAR, JP_STRING, JP_INTEGER, JP_NUMBER, JP_FRAC, JP_ZFRAC, JP_NZFRAC,
    JP_BOOLEAN, JP_NULL, JP_VALUE, JP_OBJECT, JP_ARRAY, JP_DATE, JP_TIME, JP_DATE_TIME, JP_UUID,
    JP_HOST_LABEL, JP_HOSTNAME, JP_EMAIL, JP_IPV4_OCTET, JP_IPV4, JP_H16, JP_IPV6, JP_URI_CHAR, JP_URI, JP_COUNT
};

typedef struct {
    char *pointer; /* the $ref text */
    char *rule;
    int structural; /* c->structural when its definition began */
    bool busy;      /* being defined */
} js_ref;

typedef struct {
    json_t *doc;
    const char *prefix;
    sbuf rules;
    char **names; /* open addressing set of the rule names used */
    size_t names_cap, n_names;
    js_ref *refs;
    size_t n_refs, cap_refs;
    unsigned prims; /* emitted fixed rules */
    int depth, merge_depth, structural;
    fkv_error *err;
    bool failed;
} jsctx;

/* Records the first error, with the JSON path where it is; returns -1. */
__attribute__((format(printf, 3, 4))) int js_err(jsctx *c, const char *path, const char *fmt, ...);
/* Records running out of memory as the first error; returns -1. */
int js_oom(jsctx *c);
/* hint + "-" + part (malloc'd; NULL when out of memory): the hint of a child's rule name. */
char *js_hint_join(const char *hint, const char *part);
/* A new rule name: prefix + hint, characters outside [A-Za-z0-9-] made '-', at most 64 of them, numbered when
 * taken. The set owns it. NULL when out of memory (recorded). */
const char *js_rule_name(jsctx *c, const char *hint);
/* Writes the rule `name ::= body`. */
void js_emit_rule(jsctx *c, const char *name, const sbuf *body);
/* Appends the name of fixed rule k (JP_*) to b, emitting it (and what it needs) the first time. */
void js_prim(jsctx *c, sbuf *b, int k);

#endif
