/* jsonschema.c — JSON Schema to GBNF: one rule per subschema, written by a descent through the schema (contract in
 * jsonschema.h).
 *
 * Choices that shape the output:
 * - Objects list their properties in the schema's order, each optional one skippable: a chain of rules first_i
 *   ("nothing emitted yet, from property i on") and rest_i ("something emitted, from i on") puts every comma right
 *   without an exponential number of rules. Additional properties come last and cannot reuse a declared name
 *   (js_not_names), so a declared property's value always follows its own schema.
 * - allOf, $ref with sibling constraints, and anyOf/oneOf with sibling constraints are reduced by merging schemas
 *   (jsonschema_merge.h). oneOf is written as anyOf once its branches are shown disjoint (one_of_disjoint).
 * - uniqueItems is an automaton written as rules: one per set of the values already used.
 * - A $ref cycle that never passes through an object or an array (A is B, B is A) would make a left-recursive
 *   grammar: refused here, naming the $ref.
 * The descent is here (objects and arrays hold subschemas); the leaves are numbers (jsonschema_number.h) and strings
 * (jsonschema_string.h); rule names and the fixed rules are in jsonschema_rules.h.
 */
#include "constrain/jsonschema.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "constrain/grow.h"
#include "constrain/jsonschema_keywords.h"
#include "constrain/jsonschema_merge.h"
#include "constrain/jsonschema_number.h"
#include "constrain/jsonschema_rules.h"
#include "constrain/jsonschema_string.h"
#include "constrain/sbuf.h"

#define JS_MAX_DEPTH 128            /* subschemas inside subschemas (a $ref target counts where it is used first) */
#define JS_MAX_PREFIX_ITEMS 64      /* prefixItems are nested parentheses in the rule */
#define JS_MAX_OUTPUT (8u << 20)    /* bytes of GBNF */

/* A child's JSON pointer: path + "/" + key with ~ and / escaped (malloc'd). */
static char *path_join(const char *path, const char *key) {
    sbuf b = {0};
    sb_puts(&b, path);
    sb_puts(&b, "/");
    for (const char *k = key; *k; k++) {
        if (*k == '~') sb_puts(&b, "~0");
        else if (*k == '/') sb_puts(&b, "~1");
        else sb_add(&b, k, 1);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : calloc(1, 1);
}

static char *path_index(const char *path, size_t i) {
    char key[24];
    snprintf(key, sizeof key, "%zu", i);
    return path_join(path, key);
}

static int define(jsctx *c, json_t *s, const char *path, const char *name);

/* A new rule for subschema s (hint names it); its name, owned by the name set, or NULL. */
static const char *visit(jsctx *c, json_t *s, const char *path, const char *hint) {
    const char *name = js_rule_name(c, hint);
    if (!name || define(c, s, path, name)) return NULL;
    return name;
}

static const char *visit_child(jsctx *c, json_t *s, const char *path, const char *key, const char *hint) {
    char *p = path_join(path, key);
    if (!p) return js_oom(c), NULL;
    const char *name = visit(c, s, p, hint);
    free(p);
    return name;
}

/* The rule of $ref target (made the first time; a recursive use gets the name of the rule being made). */
static const char *ref_rule(jsctx *c, const char *ref, const char *path) {
    for (size_t i = 0; i < c->n_refs; i++) {
        if (strcmp(c->refs[i].pointer, ref) != 0) continue;
        if (c->refs[i].busy && c->refs[i].structural == c->structural)
            return js_err(c, path, "$ref '%s' refers to itself before any object or array (a cycle with no value)",
                          ref),
                   NULL;
        return c->refs[i].rule;
    }
    json_t *target = js_resolve(c, ref, path);
    if (!target) return NULL;
    const char *last = strrchr(ref, '/');
    char *hint = js_hint_join("ref", last ? last + 1 : "root");
    const char *name = hint ? js_rule_name(c, hint) : NULL;
    free(hint);
    char *pointer = strdup(ref);
    if (!name || !pointer || grow(&c->refs, &c->cap_refs, c->n_refs + 1, sizeof *c->refs, SIZE_MAX)) {
        free(pointer);
        return js_oom(c), NULL;
    }
    size_t at = c->n_refs++;
    c->refs[at] = (js_ref){pointer, (char *)name, c->structural, true};
    int rc = define(c, target, path, name);
    c->refs[at].busy = false;
    return rc ? NULL : name;
}

/* enum and/or const: the values' exact texts, those of the wrong type left out. */
static void enum_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (en && (!json_is_array(en) || !json_array_size(en))) {
        js_err(c, path, "malformed JSON Schema keyword 'enum': expected a non-empty array");
        return;
    }
    unsigned types = T_ANY | T_INTEGER;
    if (json_object_get(s, "type") && js_schema_types(c, s, path, &types)) return;
    if (types & T_NUMBER) types |= T_INTEGER;
    size_t n = en ? json_array_size(en) : 1;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        json_t *v = en ? json_array_get(en, i) : cn;
        if (en && cn && !json_equal(v, cn)) continue;
        if (!js_value_has_type(v, types)) continue;
        sbuf lit = {0};
        sb_json_value(&lit, v);
        if (!first) sb_puts(b, " | ");
        first = false;
        sb_gbnf_literal(b, lit.p ? lit.p : "", lit.n);
        if (lit.oom) b->oom = true;
        free(lit.p);
    }
    if (first) js_err(c, path, "no value of '%s' has the schema's type", en ? "enum" : "const");
}

/* b += ` space ":" space value`, what follows a key in every property's rule. */
static void kv_tail(jsctx *c, sbuf *b, const char *value) {
    sb_puts(b, " ");
    js_prim(c, b, JP_SPACE);
    sb_puts(b, " \":\" ");
    js_prim(c, b, JP_SPACE);
    sb_puts(b, " ");
    sb_puts(b, value);
}

/* minProperties/maxProperties: met by every object the entries allow, or counted on the additional properties when
 * there are no entries (which the object rule then repeats within the bounds); refused otherwise. */
static int count_props(jsctx *c, const bool *required, size_t n, bool add_allowed, int64_t min, int64_t max,
                       const char *path) {
    int64_t n_required = 0;
    for (size_t e = 0; e < n; e++) n_required += required[e];
    if (max < n_required || min > max)
        return js_err(c, path, "no object satisfies 'minProperties'/'maxProperties' with the required properties");
    if (n == 0 && add_allowed) {
        if (min > 1) /* "a" twice is one property, and a grammar cannot keep keys apart */
            return js_err(c, path, "unsupported JSON Schema keyword 'minProperties': above 1 on keys the schema does "
                                   "not name");
        return 0;
    }
    if (min > n_required)
        return js_err(c, path, "unsupported JSON Schema keyword 'minProperties': above the required properties");
    if (max < INT32_MAX && (add_allowed || max < (int64_t)n))
        return js_err(c, path, "unsupported JSON Schema keyword 'maxProperties': below the properties allowed");
    return 0;
}

/* propertyNames listing the names (zod's z.record over an enum): the names as properties of the additional
 * properties' schema, and no others. */
static json_t *names_as_properties(jsctx *c, json_t *s, json_t *names, const char *path) {
    if (json_object_get(s, "properties") || json_object_get(s, "patternProperties"))
        return js_err(c, path, "unsupported JSON Schema keyword 'propertyNames' beside 'properties'"), NULL;
    json_t *add = json_object_get(s, "additionalProperties"), *props = json_object(), *out = js_without(s, "propertyNames");
    size_t i;
    json_t *x;
    json_array_foreach(names, i, x) json_object_set(props, json_string_value(x), add ? add : json_true());
    if (!props || !out || json_object_set_new(out, "properties", props) ||
        json_object_set_new(out, "additionalProperties", json_false())) {
        json_decref(out);
        return js_oom(c), NULL;
    }
    return out;
}

static void object_body(jsctx *c, sbuf *b, json_t *s, const char *path, const char *hint) {
    json_t *names_schema = json_object_get(s, "propertyNames");
    if (names_schema && js_listed_names(names_schema)) {
        json_t *t = names_as_properties(c, s, js_listed_names(names_schema), path);
        if (t) object_body(c, b, t, path, hint);
        json_decref(t);
        return;
    }
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) {
        js_err(c, path, "malformed JSON Schema keyword 'properties': expected an object");
        return;
    }
    if (req && !json_is_array(req)) {
        js_err(c, path, "malformed JSON Schema keyword 'required': expected an array of names");
        return;
    }
    size_t i;
    json_t *x;
    json_array_foreach(req, i, x) if (!json_is_string(x)) {
        js_err(c, path, "malformed JSON Schema keyword 'required': expected an array of names");
        return;
    }
    if (add && !json_is_boolean(add) && !json_is_object(add)) {
        js_err(c, path, "malformed JSON Schema keyword 'additionalProperties': expected a schema or a boolean");
        return;
    }
    bool add_allowed = add ? !json_is_false(add) : !props;
    json_t *add_schema = json_is_object(add) && js_has_constraints(add) ? add : NULL;
    int64_t min_props, max_props;
    if (js_count_range(c, s, "minProperties", "maxProperties", path, &min_props, &max_props)) return;
    if (!props && !json_array_size(req) && add_allowed && !add_schema && !min_props && max_props == INT32_MAX) {
        js_prim(c, b, JP_OBJECT);
        return;
    }
    /* The entries: the declared properties in order, then required names that are not declared. */
    size_t n_props = props ? json_object_size(props) : 0, cap = n_props + json_array_size(req) + 1, n = 0;
    const char **names = calloc(cap, sizeof *names), **kv = calloc(cap, sizeof *kv);
    json_t **schemas = calloc(cap, sizeof *schemas);
    bool *required = calloc(cap, sizeof *required);
    const char **first = calloc(cap, sizeof *first), **rest = calloc(cap, sizeof *rest);
    char *ppath = path_join(path, "properties");
    if (!names || !kv || !schemas || !required || !first || !rest || !ppath) {
        js_oom(c);
        goto out;
    }
    const char *k;
    json_object_foreach(props, k, x) names[n] = k, schemas[n++] = x;
    json_array_foreach(req, i, x) {
        const char *r = json_string_value(x);
        size_t j = 0;
        while (j < n && strcmp(names[j], r) != 0) j++;
        if (j == n) {
            if (!add_allowed) {
                js_err(c, path, "required property '%s' is not in 'properties' and additionalProperties is false", r);
                goto out;
            }
            names[n] = r, schemas[n++] = add_schema ? add_schema : json_true();
        }
        required[j] = true;
    }
    if (count_props(c, required, n, add_allowed, min_props, max_props, path)) goto out;
    c->structural++;
    for (size_t e = 0; e < n && !c->failed; e++) {
        char *h = js_hint_join(hint, names[e]);
        const char *value =
            h ? visit_child(c, schemas[e], e < n_props ? ppath : path, e < n_props ? names[e] : "required", h) : NULL;
        char *kvh = value ? js_hint_join(h, "kv") : NULL;
        free(h);
        sbuf key = {0}, kvb = {0};
        if (kvh) {
            sb_json_string(&key, names[e], strlen(names[e]));
            sb_gbnf_literal(&kvb, key.p ? key.p : "", key.n);
            kv_tail(c, &kvb, value);
            kv[e] = js_rule_name(c, kvh);
            if (kv[e] && !kvb.oom && !key.oom) js_emit_rule(c, kv[e], &kvb);
            else js_oom(c);
        }
        free(kvh);
        free(key.p);
        free(kvb.p);
        if (!kv[e] && !c->failed) js_oom(c);
    }
    /* Additional properties: a key that is none of the names, then a value of their schema. */
    const char *more = NULL;
    if (add_allowed && !c->failed) {
        char *h = js_hint_join(hint, "additional");
        const char *value = NULL;
        sbuf vb = {0};
        if (add_schema) {
            value = h ? visit_child(c, add_schema, path, "additionalProperties", h) : NULL;
        } else {
            js_prim(c, &vb, JP_VALUE);
            value = vb.p;
        }
        char *kh = h ? js_hint_join(h, "key") : NULL;
        sbuf sk = {0};
        const char *key = NULL;
        if (kh && value) {
            if (n) {
                key = js_not_names(c, names, n, path, kh);
            } else {
                js_prim(c, &sk, JP_STRING);
                key = sk.p;
            }
        }
        char *kvh = key ? js_hint_join(h, "kv") : NULL;
        if (kvh) {
            sbuf kvb = {0};
            sb_puts(&kvb, key);
            kv_tail(c, &kvb, value);
            more = js_rule_name(c, kvh);
            if (more && !kvb.oom) js_emit_rule(c, more, &kvb);
            free(kvb.p);
        }
        if (!more && !c->failed) js_oom(c);
        free(h);
        free(kh);
        free(kvh);
        free(vb.p);
        free(sk.p);
    }
    c->structural--;
    if (c->failed) goto out;
    /* first_i: from entry i on, nothing written yet; rest_i: something written. Past the last entry, the
     * additional properties (if any). */
    sbuf sp = {0};
    js_prim(c, &sp, JP_SPACE);
    for (size_t e = 0; e < n && !c->failed; e++) {
        char num[32];
        snprintf(num, sizeof num, "first-%zu", e);
        char *h1 = js_hint_join(hint, num);
        snprintf(num, sizeof num, "rest-%zu", e);
        char *h2 = js_hint_join(hint, num);
        first[e] = h1 ? js_rule_name(c, h1) : NULL;
        rest[e] = h2 ? js_rule_name(c, h2) : NULL;
        free(h1);
        free(h2);
        if (!first[e] || !rest[e]) js_oom(c);
    }
    for (size_t e = 0; e < n && !c->failed; e++) {
        sbuf f = {0}, r = {0}, tail = {0}, after = {0};
        /* what may follow entry e once it is written (tail), and from e + 1 on with nothing written (after) */
        if (e + 1 < n) {
            sb_puts(&tail, rest[e + 1]);
            sb_puts(&after, first[e + 1]);
        } else if (more) {
            sb_printf(&tail, "( \",\" %s %s )*", sp.p, more);
            sb_printf(&after, "( %s ( \",\" %s %s )* )?", more, sp.p, more);
        }
        /* an optional entry's skip comes first: an empty alternative may not end a line (the rule would go on) */
        if (!required[e]) {
            sb_printf(&f, "%s | ", after.p ? after.p : "");
            sb_printf(&r, "%s | ", tail.p ? tail.p : "");
        }
        sb_printf(&f, "%s %s", kv[e], tail.p ? tail.p : "");
        sb_printf(&r, "\",\" %s %s %s", sp.p, kv[e], tail.p ? tail.p : "");
        if (f.oom || r.oom || tail.oom || after.oom) js_oom(c);
        js_emit_rule(c, first[e], &f);
        js_emit_rule(c, rest[e], &r);
        free(f.p);
        free(r.p);
        free(tail.p);
        free(after.p);
    }
    sb_printf(b, "\"{\" %s ", sp.p);
    if (n) sb_printf(b, "%s ", first[0]);
    else if (more && max_props > 0) {
        sbuf item = {0};
        sb_printf(&item, "( \",\" %s %s )", sp.p, more);
        sb_printf(b, min_props ? "%s " : "( %s ", more);
        sb_repeat(b, item.p ? item.p : "", min_props > 1 ? min_props - 1 : 0,
                  max_props == INT32_MAX ? INT32_MAX : max_props - 1);
        sb_puts(b, min_props ? " " : " )? ");
        if (item.oom) b->oom = true;
        free(item.p);
    }
    sb_printf(b, "%s \"}\"", sp.p);
    free(sp.p);
out:
    free(names);
    free(kv);
    free(schemas);
    free(required);
    free(first);
    free(rest);
    free(ppath);
}

/* ---- arrays ---- */

static void array_tail(sbuf *b, const char *sp, const char **tuple, size_t p, const char *rest, int64_t j, int64_t min,
                       int64_t max) {
    if (j == max) return;
    if ((size_t)j < p) {
        bool optional = j >= min;
        sb_printf(b, optional ? " ( \",\" %s %s" : " \",\" %s %s", sp, tuple[j]);
        array_tail(b, sp, tuple, p, rest, j + 1, min, max);
        if (optional) sb_puts(b, " )?");
        return;
    }
    sbuf item = {0};
    sb_printf(&item, "( \",\" %s %s )", sp, rest);
    sb_puts(b, " ");
    sb_repeat(b, item.p ? item.p : "", min > j ? min - j : 0, max == INT32_MAX ? INT32_MAX : max - j);
    if (item.oom) b->oom = true;
    free(item.p);
}

#define JS_MAX_UNIQUE_VALUES 12 /* distinct values under uniqueItems: a rule per set of those already written */
#define JS_MAX_UNIQUE_RULES 1024

/* The distinct values item schema s allows when it is a finite set (enum, const, boolean, null); false otherwise. */
static bool finite_values(jsctx *c, json_t *s, const char *path, json_t *out) {
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    unsigned types = T_ANY | T_INTEGER;
    if (json_object_get(s, "type") && js_schema_types(c, s, path, &types)) return false;
    if (types & T_NUMBER) types |= T_INTEGER;
    if (en || cn) {
        size_t n = json_is_array(en) ? json_array_size(en) : 1;
        for (size_t i = 0; i < n; i++) {
            json_t *v = en ? json_array_get(en, i) : cn;
            if ((en && cn && !json_equal(v, cn)) || !js_value_has_type(v, types)) continue;
            bool dup = false;
            size_t j;
            json_t *y;
            json_array_foreach(out, j, y) dup = dup || json_equal(v, y);
            if (!dup) json_array_append(out, v);
        }
        return true;
    }
    if (types == T_BOOLEAN || types == T_NULL || types == (T_BOOLEAN | T_NULL)) {
        if (types & T_BOOLEAN) json_array_append_new(out, json_true()), json_array_append_new(out, json_false());
        if (types & T_NULL) json_array_append_new(out, json_null());
        return true;
    }
    return false;
}

/* uniqueItems over a finite set of values: a rule per set of values already written (a bit each), which goes on with
 * any value not in it while fewer than max are written, and may end once min are. */
static void unique_array_body(jsctx *c, sbuf *b, json_t *items, int64_t min, int64_t max, const char *path,
                              const char *hint) {
    json_t *flat = js_flatten(c, items ? items : json_true(), path), *vals = json_array();
    const char **lits = NULL, **names = NULL;
    sbuf sp = {0};
    if (!flat || !vals) {
        if (!c->failed) js_oom(c);
        goto out;
    }
    if (!finite_values(c, flat, path, vals)) {
        if (!c->failed)
            js_err(c, path, "unsupported JSON Schema keyword 'uniqueItems': the items are not a finite set (enum, "
                            "const or boolean)");
        goto out;
    }
    size_t n = json_array_size(vals);
    if (max > (int64_t)n) max = (int64_t)n;
    if (min > max) {
        js_err(c, path, "'minItems' is above the %zu distinct values 'uniqueItems' allows", n);
        goto out;
    }
    size_t rules = 0;
    for (uint32_t set = 1; n <= JS_MAX_UNIQUE_VALUES && set < 1u << n; set++)
        rules += __builtin_popcount(set) <= max;
    if (n > JS_MAX_UNIQUE_VALUES || rules > JS_MAX_UNIQUE_RULES) {
        js_err(c, path, "unsupported JSON Schema keyword 'uniqueItems': %zu values, above what the grammar holds", n);
        goto out;
    }
    lits = calloc(n, sizeof *lits);
    names = calloc((size_t)1 << n, sizeof *names);
    if (!lits || !names) {
        js_oom(c);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        sbuf v = {0}, l = {0};
        sb_json_value(&v, json_array_get(vals, i));
        sb_gbnf_literal(&l, v.p ? v.p : "", v.n);
        lits[i] = l.p;
        if (v.oom || l.oom) js_oom(c);
        free(v.p);
    }
    for (uint32_t set = 1; set < 1u << n && !c->failed; set++) {
        if (__builtin_popcount(set) > max) continue;
        char part[32];
        snprintf(part, sizeof part, "unique-%x", set);
        char *h = js_hint_join(hint, part);
        names[set] = h ? js_rule_name(c, h) : NULL;
        free(h);
        if (!names[set] && !c->failed) js_oom(c);
    }
    js_prim(c, &sp, JP_SPACE);
    /* set 0 is the array's start, written into b; the others are rules */
    for (uint32_t set = 0; set < 1u << n && !c->failed; set++) {
        int k = __builtin_popcount(set);
        if (k > max) continue;
        sbuf body = {0};
        bool alt = false, end = set && k >= min;
        for (size_t i = 0; i < n && k < max; i++) {
            if (set & 1u << i) continue;
            /* it may end here: the empty alternative first (see object_body) */
            sb_puts(&body, alt ? " | " : end ? "| " : "");
            if (set) sb_printf(&body, "\",\" %s ", sp.p);
            sb_printf(&body, "%s %s", lits[i], names[set | 1u << i]);
            alt = true;
        }
        if (!alt) sb_puts(&body, "\"\"");
        if (body.oom) js_oom(c);
        if (set) {
            js_emit_rule(c, names[set], &body);
        } else {
            sb_printf(b, "\"[\" %s ( %s )%s %s \"]\"", sp.p, body.p ? body.p : "\"\"", min ? "" : "?", sp.p);
        }
        free(body.p);
    }
out:
    for (size_t i = 0; lits && i < json_array_size(vals); i++) free((char *)lits[i]);
    free(lits);
    free(names);
    free(sp.p);
    json_decref(flat);
    json_decref(vals);
}

static void array_body(jsctx *c, sbuf *b, json_t *s, const char *path, const char *hint) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    json_t *tuple = NULL, *rest = items;
    const char *tuple_key = "prefixItems", *rest_key = "items";
    if (prefix) {
        if (!json_is_array(prefix)) {
            js_err(c, path, "malformed JSON Schema keyword 'prefixItems': expected an array of schemas");
            return;
        }
        if (json_is_array(items)) {
            js_err(c, path, "malformed JSON Schema keyword 'items': an array beside 'prefixItems'");
            return;
        }
        tuple = prefix;
    } else if (json_is_array(items)) {
        tuple = items, tuple_key = "items";
        rest = json_object_get(s, "additionalItems"), rest_key = "additionalItems";
    }
    if (rest && !json_is_boolean(rest) && !json_is_object(rest)) {
        js_err(c, path, "malformed JSON Schema keyword '%s': expected a schema or a boolean", rest_key);
        return;
    }
    int64_t min = 0, max = 0;
    if (js_count_range(c, s, "minItems", "maxItems", path, &min, &max)) return;
    size_t p = tuple ? json_array_size(tuple) : 0;
    if (p > JS_MAX_PREFIX_ITEMS) {
        js_err(c, path, "unsupported JSON Schema keyword '%s': more than %d schemas", tuple_key, JS_MAX_PREFIX_ITEMS);
        return;
    }
    if (json_is_false(rest) && max > (int64_t)p) max = (int64_t)p;
    if (min == INT32_MAX || min > max) {
        js_err(c, path, "'minItems' is above the items allowed ('maxItems', or the tuple without more items)");
        return;
    }
    json_t *uniq = json_object_get(s, "uniqueItems");
    if (uniq && !json_is_boolean(uniq)) {
        js_err(c, path, "malformed JSON Schema keyword 'uniqueItems': expected a boolean");
        return;
    }
    if (json_is_true(uniq) && max > 1) { /* at most one item is always unique */
        if (tuple) {
            js_err(c, path, "unsupported JSON Schema keyword 'uniqueItems' beside '%s'", tuple_key);
            return;
        }
        c->structural++;
        unique_array_body(c, b, rest, min, max, path, hint);
        c->structural--;
        return;
    }
    if (!tuple && !js_has_constraints(rest) && min == 0 && max == INT32_MAX) {
        js_prim(c, b, JP_ARRAY);
        return;
    }
    const char **names = calloc(p + 1, sizeof *names);
    const char *rest_rule = NULL;
    sbuf any = {0}, sp = {0};
    char *tpath = path_join(path, tuple_key);
    if (!names || !tpath) {
        js_oom(c);
        goto out;
    }
    c->structural++;
    for (size_t i = 0; i < p && !c->failed; i++) {
        char num[32];
        snprintf(num, sizeof num, "%zu", i);
        char *h = js_hint_join(hint, num);
        char *ip = path_index(tpath, i);
        names[i] = h && ip ? visit(c, json_array_get(tuple, i), ip, h) : NULL;
        if (!names[i] && !c->failed) js_oom(c);
        free(h);
        free(ip);
    }
    if (max > (int64_t)p && !c->failed) {
        if (js_has_constraints(rest)) {
            char *h = js_hint_join(hint, "item");
            rest_rule = h ? visit_child(c, rest, path, rest_key, h) : NULL;
            free(h);
        } else {
            js_prim(c, &any, JP_VALUE);
            rest_rule = any.p;
        }
        if (!rest_rule && !c->failed) js_oom(c);
    }
    c->structural--;
    if (c->failed) goto out;
    js_prim(c, &sp, JP_SPACE);
    sb_printf(b, "\"[\" %s", sp.p);
    if (max > 0) {
        const char *first = p ? names[0] : rest_rule;
        sb_printf(b, min >= 1 ? " %s" : " ( %s", first);
        array_tail(b, sp.p, names, p, rest_rule, 1, min, max);
        if (min < 1) sb_puts(b, " )?");
    }
    sb_printf(b, " %s \"]\"", sp.p);
out:
    free(names);
    free(any.p);
    free(sp.p);
    free(tpath);
}

/* ---- oneOf ---- */

/* The values s allows when it is an enum or const (a new array), else NULL. */
static json_t *listed_values(json_t *s) {
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (json_is_array(en)) return json_deep_copy(en);
    if (cn) return json_pack("[O]", cn);
    return NULL;
}

static bool values_meet(json_t *a, json_t *b) {
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(a, i, x) json_array_foreach(b, j, y) if (json_equal(x, y)) return true;
    return false;
}

/* The types a flattened branch may take: its values' when it lists them, else its "type"; integer within number. */
static unsigned branch_types(jsctx *c, json_t *s, const char *path) {
    unsigned t = 0;
    json_t *vals = listed_values(s);
    if (vals) {
        static const unsigned each[] = {T_NULL, T_BOOLEAN, T_OBJECT, T_ARRAY, T_NUMBER, T_STRING};
        size_t i;
        json_t *v;
        json_array_foreach(vals, i, v) for (size_t k = 0; k < 6; k++) if (js_value_has_type(v, each[k])) t |= each[k];
        json_decref(vals);
    } else if (!json_is_object(s) || !json_object_get(s, "type") || js_schema_types(c, s, path, &t)) {
        t = T_ANY; /* without "type", {"minimum": 3} also matches every string: no type can be ruled out */
    }
    if (t & T_INTEGER) t |= T_NUMBER;
    return t;
}

/* Whether no object both a and b allow: a property both require whose listed values (const/enum) do not meet. */
static bool discriminated(jsctx *c, json_t *a, json_t *b, const char *path) {
    json_t *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
    json_t *ra = json_object_get(a, "required"), *rb = json_object_get(b, "required");
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(ra, i, x) json_array_foreach(rb, j, y) {
        if (!json_is_string(x) || !json_equal(x, y)) continue;
        json_t *sa = js_flatten(c, json_object_get(pa, json_string_value(x)) ? json_object_get(pa, json_string_value(x))
                                                                              : json_true(), path);
        json_t *sb = js_flatten(c, json_object_get(pb, json_string_value(x)) ? json_object_get(pb, json_string_value(x))
                                                                              : json_true(), path);
        json_t *va = sa ? listed_values(sa) : NULL, *vb = sb ? listed_values(sb) : NULL;
        bool apart = va && vb && !values_meet(va, vb);
        json_decref(sa), json_decref(sb), json_decref(va), json_decref(vb);
        if (apart) return true;
    }
    return false;
}

/* oneOf is written as anyOf, which is exact when no value matches two branches: they differ in type, in listed
 * values, or in a required property's listed values (a discriminator). Refused naming the pair otherwise. */
static int one_of_disjoint(jsctx *c, json_t *alts, const char *path) {
    size_t n = json_array_size(alts);
    json_t **flat = calloc(n, sizeof *flat);
    if (!flat) return js_oom(c);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        if (!(flat[i] = js_flatten(c, json_array_get(alts, i), path))) rc = -1;
    for (size_t i = 0; i < n && !rc; i++)
        for (size_t j = i + 1; j < n && !rc; j++) {
            unsigned ti = branch_types(c, flat[i], path), tj = branch_types(c, flat[j], path);
            if (c->failed) rc = -1;
            if (rc || !(ti & tj)) continue;
            json_t *vi = listed_values(flat[i]), *vj = listed_values(flat[j]);
            bool apart = vi && vj && !values_meet(vi, vj);
            json_decref(vi), json_decref(vj);
            if (apart || ((ti & tj) == T_OBJECT && discriminated(c, flat[i], flat[j], path))) continue;
            if (!c->failed)
                js_err(c, path, "unsupported JSON Schema keyword 'oneOf': branches %zu and %zu may both match (only "
                                "branches that differ in type, const/enum or a required const/enum property are)", i, j);
            rc = -1;
        }
    for (size_t i = 0; i < n; i++) json_decref(flat[i]);
    free(flat);
    return rc;
}

/* ---- one schema ---- */

static void schema_body(jsctx *c, sbuf *b, json_t *s, const char *path, const char *hint) {
    if (json_is_true(s)) {
        js_prim(c, b, JP_VALUE);
        return;
    }
    if (json_is_false(s)) {
        js_err(c, path, "the schema false matches nothing");
        return;
    }
    if (!json_is_object(s)) {
        js_err(c, path, "malformed JSON Schema: expected an object or a boolean");
        return;
    }
    if (js_check_keywords(c, s, path)) return;
    json_t *ref = json_object_get(s, "$ref"), *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    if (ref && !json_is_string(ref)) {
        js_err(c, path, "malformed JSON Schema keyword '$ref': expected a string");
        return;
    }
    if (json_object_get(s, "allOf") || (ref && js_ref_has_siblings(s))) {
        json_t *flat = js_flatten(c, s, path);
        if (flat) schema_body(c, b, flat, path, hint);
        json_decref(flat);
        return;
    }
    if (ref) {
        const char *name = ref_rule(c, json_string_value(ref), path);
        if (name) sb_puts(b, name);
        return;
    }
    if (any || one) {
        const char *key = any ? "anyOf" : "oneOf";
        json_t *alts = any ? any : one;
        if (any && one) {
            js_err(c, path, "unsupported: both 'anyOf' and 'oneOf' in one schema");
            return;
        }
        if (!json_is_array(alts) || !json_array_size(alts)) {
            js_err(c, path, "malformed JSON Schema keyword '%s': expected a non-empty array", key);
            return;
        }
        if (one && one_of_disjoint(c, alts, path)) return;
        json_t *siblings = js_without(s, key);
        char *kpath = path_join(path, key);
        if (!siblings || !kpath) js_oom(c);
        bool constrained = siblings && js_has_constraints(siblings);
        size_t i;
        json_t *m;
        json_array_foreach(alts, i, m) {
            if (c->failed) break;
            char num[32];
            snprintf(num, sizeof num, "%zu", i);
            char *h = js_hint_join(hint, num), *ip = path_index(kpath, i);
            json_t *member = constrained ? js_merge(c, siblings, m, ip ? ip : path) : json_incref(m);
            const char *name = h && ip && member ? visit(c, member, ip, h) : NULL;
            if (!name && !c->failed) js_oom(c);
            if (name) {
                if (i) sb_puts(b, " | ");
                sb_puts(b, name);
            }
            json_decref(member);
            free(h);
            free(ip);
        }
        json_decref(siblings);
        free(kpath);
        return;
    }
    if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        enum_body(c, b, s, path);
        return;
    }
    unsigned types;
    if (js_schema_types(c, s, path, &types)) return;
    if ((types & T_ANY) == T_ANY) {
        js_prim(c, b, JP_VALUE);
        return;
    }
    static const unsigned order[] = {T_OBJECT, T_ARRAY, T_STRING, T_NUMBER, T_INTEGER, T_BOOLEAN, T_NULL};
    bool first = true;
    for (size_t i = 0; i < sizeof order / sizeof *order && !c->failed; i++) {
        if (!(types & order[i])) continue;
        if (!first) sb_puts(b, " | ");
        first = false;
        switch (order[i]) {
        case T_OBJECT: object_body(c, b, s, path, hint); break;
        case T_ARRAY: array_body(c, b, s, path, hint); break;
        case T_STRING: js_string_body(c, b, s, path); break;
        case T_NUMBER: js_number_body(c, b, s, path); break;
        case T_INTEGER: js_integer_body(c, b, s, path); break;
        case T_BOOLEAN: js_prim(c, b, JP_BOOLEAN); break;
        default: js_prim(c, b, JP_NULL); break;
        }
    }
}

static int define(jsctx *c, json_t *s, const char *path, const char *name) {
    if (++c->depth > JS_MAX_DEPTH) {
        c->depth--;
        return js_err(c, path, "schema nested deeper than %d", JS_MAX_DEPTH);
    }
    sbuf body = {0};
    schema_body(c, &body, s, path, name + strlen(c->prefix));
    c->depth--;
    if (body.oom) js_oom(c);
    if (!c->failed) js_emit_rule(c, name, &body);
    free(body.p);
    return c->failed ? -1 : 0;
}

char *jsonschema_to_gbnf(const char *schema_json, size_t len, const char *prefix, fkv_error *err) {
    if (!prefix) prefix = "";
    for (const char *p = prefix; *p; p++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_')) {
            err_input(err, "JSON Schema: the rule prefix '%s' has characters outside [A-Za-z0-9_-]", prefix);
            return NULL;
        }
    }
    json_error_t je;
    json_t *doc = json_loadb(schema_json, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!doc) {
        if (json_error_code(&je) == json_error_out_of_memory || !je.text[0]) /* jansson: blank when out of memory */
            err_nomem(err, "out of memory reading a JSON Schema");
        else
            err_input(err, "JSON Schema is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    jsctx c = {.doc = doc, .prefix = prefix, .err = err};
    const char *root = js_rule_name(&c, "root");
    char *pointer = strdup("#");
    if (!root || !pointer || grow(&c.refs, &c.cap_refs, c.n_refs + 1, sizeof *c.refs, SIZE_MAX)) {
        free(pointer);
        js_oom(&c);
    } else {
        c.refs[c.n_refs++] = (js_ref){pointer, (char *)root, 0, true};
        define(&c, doc, "", root);
    }
    if (!c.failed && c.rules.oom) js_oom(&c);
    if (!c.failed && c.rules.n > JS_MAX_OUTPUT)
        js_err(&c, "", "the grammar would be larger than %u bytes", JS_MAX_OUTPUT);
    for (size_t i = 0; i < c.names_cap; i++) free(c.names[i]);
    free(c.names);
    for (size_t i = 0; i < c.n_refs; i++) free(c.refs[i].pointer);
    free(c.refs);
    json_decref(doc);
    if (c.failed) {
        free(c.rules.p);
        return NULL;
    }
    return c.rules.p;
}
