/* jsonschema.c — JSON Schema to GBNF (grammar_schema_gbnf, contract in grammar.h).
 *
 * Every subschema becomes one rule, named from where it sits (root, root-address, root-address-city, ...; a $ref
 * target is ref-<its last pointer segment>) and made unique; the fixed pieces (space, string, number, value, the
 * date and time formats, ...) are emitted once, on first use. Rules are written in the order they are finished.
 *
 * Choices that shape the output:
 * - Objects list their properties in the schema's order, each optional one skippable: a chain of rules first_i
 *   ("nothing emitted yet, from property i on") and rest_i ("something emitted, from i on") puts every comma right
 *   without an exponential number of rules. Additional properties come last and cannot reuse a declared name (a
 *   trie of the names excludes them), so a declared property's value always follows its own schema.
 * - allOf, $ref with sibling constraints, and anyOf/oneOf with sibling constraints are reduced by merging schemas
 *   (merge()): properties and required united, lower bounds raised, upper bounds lowered, enums intersected.
 *   oneOf is treated as anyOf (exclusivity is not enforced).
 * - Integer ranges are written digit by digit (uint_range), so {"minimum": 15, "maximum": 300} admits exactly
 *   15..300 with no leading zeros; numbers with integer bounds split at the integer part and the fraction.
 * - A $ref cycle that never passes through an object or an array (A is B, B is A) would make a left-recursive
 *   grammar: refused here, naming the $ref.
 */
#include "constrain/grammar.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define JS_MAX_DEPTH 128            /* subschemas inside subschemas (a $ref target counts where it is used first) */
#define JS_MAX_MERGE 32             /* $ref / allOf inside the schemas being merged */
#define JS_MAX_PREFIX_ITEMS 64      /* prefixItems are nested parentheses in the rule */
#define JS_MAX_OUTPUT (8u << 20)    /* bytes of GBNF */
#define JS_MAX_DIGITS 16            /* integer and fraction digits; ±(10^16 - 1) bounds every integer */
#define JS_INT_LIMIT 9999999999999999LL

/* ---- text ---- */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

/* A JSON text as a GBNF literal: quotes, backslashes and control bytes escaped, UTF-8 kept. */
static void sb_gbnf_literal(sbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') sb_puts(b, "\\\"");
        else if (c == '\\') sb_puts(b, "\\\\");
        else if (c == '\n') sb_puts(b, "\\n");
        else if (c == '\r') sb_puts(b, "\\r");
        else if (c == '\t') sb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_puts(b, "\"");
}

/* A string's JSON encoding (what a JSON writer prints): quotes, backslashes and control characters escaped. */
static void sb_json_string(sbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\b': sb_puts(b, "\\b"); break;
        case '\f': sb_puts(b, "\\f"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        default:
            if (c < 0x20) sb_printf(b, "\\u%04x", c);
            else sb_add(b, (const char *)&c, 1);
        }
    }
    sb_puts(b, "\"");
}

/* A real in the fewest digits that read back as the same double. */
static void sb_real(sbuf *b, double v) {
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    sb_puts(b, tmp);
}

/* A JSON value in its compact text (an enum or const value, which the output must spell exactly). */
static void sb_json_value(sbuf *b, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: sb_puts(b, "null"); break;
    case JSON_TRUE: sb_puts(b, "true"); break;
    case JSON_FALSE: sb_puts(b, "false"); break;
    case JSON_INTEGER: sb_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: sb_real(b, json_real_value(v)); break;
    case JSON_STRING: sb_json_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY: {
        sb_puts(b, "[");
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            if (i) sb_puts(b, ",");
            sb_json_value(b, x);
        }
        sb_puts(b, "]");
        break;
    }
    case JSON_OBJECT: {
        sb_puts(b, "{");
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach((json_t *)v, k, x) {
            if (!first) sb_puts(b, ",");
            first = false;
            sb_json_string(b, k, strlen(k));
            sb_puts(b, ":");
            sb_json_value(b, x);
        }
        sb_puts(b, "}");
        break;
    }
    }
}

/* ---- the converter ---- */

/* The fixed rules; '@' in a body stands for the prefix. */
enum {
    JP_SPACE, JP_HEX, JP_U4, JP_ESCAPE, JP_CHAR, JP_STRING, JP_INTEGER, JP_NUMBER, JP_FRAC, JP_ZFRAC, JP_NZFRAC,
    JP_BOOLEAN, JP_NULL, JP_VALUE, JP_OBJECT, JP_ARRAY, JP_DATE, JP_TIME, JP_DATE_TIME, JP_UUID, JP_COUNT
};

static const struct {
    const char *name, *body;
    unsigned deps;
} js_prims[JP_COUNT] = {
    [JP_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    [JP_HEX] = {"hex", "[0-9a-fA-F]", 0},
    /* four hex digits but 0000 (\u0000: refused by strict parsers) and the surrogates (only in pairs, below) */
    [JP_U4] = {"u4",
               "[1-9a-cA-CeEfF] @hex @hex @hex | [dD] [0-7] @hex @hex | \"0\" ( [1-9a-fA-F] @hex @hex | \"0\" "
               "( [1-9a-fA-F] @hex | \"0\" [1-9a-fA-F] ) )",
               1u << JP_HEX},
    [JP_ESCAPE] = {"escape",
                   "[\"\\\\/bfnrt] | \"u\" @u4 | \"u\" [dD] [89abAB] @hex @hex \"\\\\u\" [dD] [c-fC-F] @hex @hex",
                   1u << JP_HEX | 1u << JP_U4},
    [JP_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" @escape", 1u << JP_ESCAPE},
    [JP_STRING] = {"string", "\"\\\"\" @char* \"\\\"\"", 1u << JP_CHAR},
    [JP_INTEGER] = {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )", 0},
    [JP_NUMBER] = {"number", "@integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?", 1u << JP_INTEGER},
    [JP_FRAC] = {"frac", "\".\" [0-9]{1,16}", 0},
    [JP_ZFRAC] = {"zfrac", "\".\" \"0\"{1,16}", 0},
    [JP_NZFRAC] = {"nzfrac", "\".\" \"0\"{0,15} [1-9] [0-9]{0,15}", 0},
    [JP_BOOLEAN] = {"boolean", "\"true\" | \"false\"", 0},
    [JP_NULL] = {"null", "\"null\"", 0},
    [JP_VALUE] = {"value", "@object | @array | @string | @number | @boolean | @null",
                  1u << JP_OBJECT | 1u << JP_ARRAY | 1u << JP_STRING | 1u << JP_NUMBER | 1u << JP_BOOLEAN |
                      1u << JP_NULL},
    [JP_OBJECT] = {"object",
                   "\"{\" @space ( @string @space \":\" @space @value ( \",\" @space @string @space \":\" @space "
                   "@value )* )? @space \"}\"",
                   1u << JP_SPACE | 1u << JP_STRING | 1u << JP_VALUE},
    [JP_ARRAY] = {"array", "\"[\" @space ( @value ( \",\" @space @value )* )? @space \"]\"",
                  1u << JP_SPACE | 1u << JP_VALUE},
    [JP_DATE] = {"date",
                 "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )", 0},
    [JP_TIME] = {"time",
                 "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? ( \"Z\" | "
                 "[+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
                 0},
    [JP_DATE_TIME] = {"date-time", "@date \"T\" @time", 1u << JP_DATE | 1u << JP_TIME},
    [JP_UUID] = {"uuid",
                 "\"\\\"\" @hex{8} \"-\" @hex{4} \"-\" @hex{4} \"-\" @hex{4} \"-\" @hex{12} \"\\\"\"", 1u << JP_HEX},
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

__attribute__((format(printf, 3, 4))) static int jerr(jsctx *c, const char *path, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = true;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_input(c->err, "%s at %s", msg, *path ? path : "the root");
}

static int joom(jsctx *c) {
    if (c->failed) return -1;
    c->failed = true;
    return err_nomem(c->err, "JSON Schema: out of memory");
}

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

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool name_taken(const jsctx *c, const char *name) {
    if (!c->names_cap) return false;
    for (size_t h = str_hash(name) & (c->names_cap - 1); c->names[h]; h = (h + 1) & (c->names_cap - 1))
        if (strcmp(c->names[h], name) == 0) return true;
    return false;
}

static int name_add(jsctx *c, char *name) {
    if ((c->n_names + 1) * 2 > c->names_cap) {
        size_t cap = c->names_cap ? c->names_cap * 2 : 64;
        char **t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < c->names_cap; i++) {
            if (!c->names[i]) continue;
            size_t h = str_hash(c->names[i]) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = c->names[i];
        }
        free(c->names);
        c->names = t;
        c->names_cap = cap;
    }
    size_t h = str_hash(name) & (c->names_cap - 1);
    while (c->names[h]) h = (h + 1) & (c->names_cap - 1);
    c->names[h] = name;
    c->n_names++;
    return 0;
}

/* A new rule name: prefix + hint, characters outside [A-Za-z0-9-] made '-', at most 64 of them, numbered when
 * taken. The set owns it. */
static const char *rule_name(jsctx *c, const char *hint) {
    sbuf b = {0};
    sb_puts(&b, c->prefix);
    size_t n = 0;
    for (const char *h = hint; *h && n < 64; h++, n++) {
        char ch = *h;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
        sb_add(&b, ok ? &ch : "-", 1);
    }
    size_t base = b.n;
    for (unsigned k = 1; !b.oom && name_taken(c, b.p); k++) {
        b.n = base;
        sb_printf(&b, "-%u", k);
    }
    if (b.oom || name_add(c, b.p)) {
        free(b.p);
        joom(c);
        return NULL;
    }
    return b.p;
}

static void emit_rule(jsctx *c, const char *name, const sbuf *body) {
    sb_puts(&c->rules, name);
    sb_puts(&c->rules, " ::= ");
    if (body->n) sb_add(&c->rules, body->p, body->n);
    sb_puts(&c->rules, "\n");
}

/* Appends the name of fixed rule k to b, emitting it (and what it needs) the first time. */
static void prim(jsctx *c, sbuf *b, int k) {
    if (!(c->prims & 1u << k)) {
        c->prims |= 1u << k;
        for (int d = 0; d < JP_COUNT; d++)
            if (js_prims[k].deps & 1u << d) {
                sbuf ignore = {0};
                prim(c, &ignore, d);
                free(ignore.p);
            }
        sbuf body = {0};
        for (const char *s = js_prims[k].body; *s; s++) {
            if (*s == '@') sb_puts(&body, c->prefix);
            else sb_add(&body, s, 1);
        }
        sb_puts(&c->rules, c->prefix);
        sb_puts(&c->rules, js_prims[k].name);
        sb_puts(&c->rules, " ::= ");
        sb_add(&c->rules, body.p ? body.p : "", body.n);
        sb_puts(&c->rules, "\n");
        if (body.oom) c->rules.oom = true;
        free(body.p);
    }
    sb_puts(b, c->prefix);
    sb_puts(b, js_prims[k].name);
}

/* ---- keywords ---- */

static const char *const js_constraints[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "additionalItems",
    "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};

static const char *const js_unsupported[] = {
    "pattern", "patternProperties", "propertyNames", "minProperties", "maxProperties", "multipleOf", "uniqueItems",
    "contains", "minContains", "maxContains", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "dependencies", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$recursiveRef", "contentSchema",
    NULL};

static bool in_list(const char *const *list, const char *k) {
    for (; *list; list++)
        if (strcmp(*list, k) == 0) return true;
    return false;
}

/* Refuses the standard's keywords this converter does not implement (uniqueItems: false is a no-op). */
static int check_keywords(jsctx *c, json_t *s, const char *path) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (!in_list(js_unsupported, k)) continue;
        if (strcmp(k, "uniqueItems") == 0 && json_is_false(v)) continue;
        return jerr(c, path, "unsupported JSON Schema keyword '%s'", k);
    }
    return 0;
}

static bool has_constraints(json_t *s) {
    if (!json_is_object(s)) return json_is_false(s);
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        (void)v;
        if (in_list(js_constraints, k) || in_list(js_unsupported, k)) return true;
    }
    return false;
}

/* A copy of object s without key (a new reference). */
static json_t *without(json_t *s, const char *key) {
    json_t *o = json_copy(s);
    if (o) json_object_del(o, key);
    return o;
}

enum { T_NULL = 1, T_BOOLEAN = 2, T_OBJECT = 4, T_ARRAY = 8, T_NUMBER = 16, T_STRING = 32, T_INTEGER = 64 };
#define T_ANY (T_NULL | T_BOOLEAN | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING)

static unsigned type_bit(const char *t) {
    static const char *const names[] = {"null", "boolean", "object", "array", "number", "string", "integer"};
    for (unsigned i = 0; i < 7; i++)
        if (strcmp(t, names[i]) == 0) return 1u << i;
    return 0;
}

/* The types s may take: its "type" (string or array), else what its keywords imply, else any. */
static int schema_types(jsctx *c, json_t *s, const char *path, unsigned *out) {
    json_t *t = json_object_get(s, "type");
    unsigned types = 0;
    if (json_is_string(t)) {
        types = type_bit(json_string_value(t));
        if (!types) return jerr(c, path, "malformed JSON Schema keyword 'type': unknown type '%s'", json_string_value(t));
    } else if (json_is_array(t) && json_array_size(t)) {
        size_t i;
        json_t *x;
        json_array_foreach(t, i, x) {
            unsigned b = json_is_string(x) ? type_bit(json_string_value(x)) : 0;
            if (!b) return jerr(c, path, "malformed JSON Schema keyword 'type': not a type name in the array");
            types |= b;
        }
    } else if (t) {
        return jerr(c, path, "malformed JSON Schema keyword 'type': expected a type name or an array of them");
    } else {
        static const struct {
            const char *key;
            unsigned type;
        } implied[] = {{"properties", T_OBJECT}, {"required", T_OBJECT}, {"additionalProperties", T_OBJECT},
                       {"items", T_ARRAY}, {"prefixItems", T_ARRAY}, {"additionalItems", T_ARRAY},
                       {"minItems", T_ARRAY}, {"maxItems", T_ARRAY}, {"minLength", T_STRING},
                       {"maxLength", T_STRING}, {"format", T_STRING}, {"minimum", T_NUMBER},
                       {"maximum", T_NUMBER}, {"exclusiveMinimum", T_NUMBER}, {"exclusiveMaximum", T_NUMBER}};
        for (size_t i = 0; i < sizeof implied / sizeof *implied; i++)
            if (json_object_get(s, implied[i].key)) types |= implied[i].type;
        if (!types) types = T_ANY;
    }
    if ((types & T_NUMBER) && (types & T_INTEGER)) types &= ~(unsigned)T_INTEGER; /* number covers integer */
    *out = types;
    return 0;
}

/* A non-negative integer keyword (absent: def). */
static int count_keyword(jsctx *c, json_t *s, const char *key, const char *path, int64_t def, int64_t *out) {
    json_t *v = json_object_get(s, key);
    if (!v) {
        *out = def;
        return 0;
    }
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (d < 0 || d != floor(d)) return jerr(c, path, "malformed JSON Schema keyword '%s': expected a non-negative integer", key);
    *out = d > (double)INT32_MAX ? INT32_MAX : (int64_t)d;
    return 0;
}

static int limit_repeat(jsctx *c, const char *key, int64_t v, const char *path) {
    if (v > GRAMMAR_MAX_REPEAT && v != INT32_MAX)
        return jerr(c, path, "unsupported JSON Schema keyword '%s': %lld is above the supported %d", key, (long long)v,
                    GRAMMAR_MAX_REPEAT);
    return 0;
}

/* b += item{min,max} (max INT32_MAX: no bound). */
static void sb_repeat(sbuf *b, const char *item, int64_t min, int64_t max) {
    if (max == 0) return;
    sb_puts(b, item);
    if (max == INT32_MAX) {
        if (min == 0) sb_puts(b, "*");
        else if (min == 1) sb_puts(b, "+");
        else sb_printf(b, "{%lld,}", (long long)min);
    } else if (min == 0 && max == 1) {
        sb_puts(b, "?");
    } else if (min == max) {
        if (min != 1) sb_printf(b, "{%lld}", (long long)min);
    } else {
        sb_printf(b, "{%lld,%lld}", (long long)min, (long long)max);
    }
}

/* ---- numbers ---- */

static int n_digits(uint64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static bool all_char(const char *s, int n, char ch) {
    for (int i = 0; i < n; i++)
        if (s[i] != ch) return false;
    return true;
}

/* Decimal strings x..y of equal length n (x <= y), digit by digit. */
static void fixed_range(sbuf *b, const char *x, const char *y, int n) {
    int i = 0;
    while (i < n && x[i] == y[i]) i++;
    if (i) {
        sb_puts(b, "\"");
        sb_add(b, x, (size_t)i);
        sb_puts(b, "\"");
    }
    if (i == n) return;
    if (i) sb_puts(b, " ");
    int k = n - i - 1; /* digits after position i */
    if (k == 0) {
        sb_printf(b, "[%c-%c]", x[i], y[i]);
        return;
    }
    bool low_full = all_char(x + i + 1, k, '0'), high_full = all_char(y + i + 1, k, '9');
    char lo = low_full ? x[i] : (char)(x[i] + 1), hi = high_full ? y[i] : (char)(y[i] - 1);
    bool first = true;
    sb_puts(b, "( ");
    if (!low_full) {
        char nines[JS_MAX_DIGITS + 1];
        memset(nines, '9', (size_t)k);
        sb_printf(b, "\"%c\" ", x[i]);
        sb_puts(b, "( ");
        fixed_range(b, x + i + 1, nines, k);
        sb_puts(b, " )");
        first = false;
    }
    if (lo <= hi) {
        if (!first) sb_puts(b, " | ");
        sb_printf(b, "[%c-%c] [0-9]", lo, hi);
        if (k > 1) sb_printf(b, "{%d}", k);
        first = false;
    }
    if (!high_full) {
        char zeros[JS_MAX_DIGITS + 1];
        memset(zeros, '0', (size_t)k);
        if (!first) sb_puts(b, " | ");
        sb_printf(b, "\"%c\" ", y[i]);
        sb_puts(b, "( ");
        fixed_range(b, zeros, y + i + 1, k);
        sb_puts(b, " )");
    }
    sb_puts(b, " )");
}

/* The decimals of a..b (0 <= a <= b <= JS_INT_LIMIT) without leading zeros, as alternatives. */
static void uint_range(sbuf *b, uint64_t a, uint64_t hi) {
    bool first = true;
    for (int d = n_digits(a); d <= n_digits(hi); d++) {
        uint64_t lo_d = 1, hi_d;
        for (int i = 1; i < d; i++) lo_d *= 10;
        hi_d = lo_d * 10 - 1;
        if (d == 1) lo_d = 0;
        uint64_t x = a > lo_d ? a : lo_d, y = hi < hi_d ? hi : hi_d;
        if (x > y) continue;
        char xs[24], ys[24];
        snprintf(xs, sizeof xs, "%llu", (unsigned long long)x);
        snprintf(ys, sizeof ys, "%llu", (unsigned long long)y);
        if (!first) sb_puts(b, " | ");
        first = false;
        fixed_range(b, xs, ys, d);
    }
}

typedef struct {
    bool has_lo, has_hi, lo_excl, hi_excl;
    double lo, hi;
} js_bounds;

static int read_bound(jsctx *c, json_t *s, const char *key, const char *path, bool *has, double *v) {
    json_t *x = json_object_get(s, key);
    if (!x || json_is_boolean(x)) return 0;
    if (!json_is_number(x)) return jerr(c, path, "malformed JSON Schema keyword '%s': expected a number", key);
    *has = true;
    *v = json_number_value(x);
    return 0;
}

/* minimum/maximum/exclusive*: the tighter of each side (exclusiveMinimum: true is draft 4's flag on minimum). */
static int read_bounds(jsctx *c, json_t *s, const char *path, js_bounds *b) {
    *b = (js_bounds){0};
    bool has_emin = false, has_emax = false;
    double emin = 0, emax = 0;
    if (read_bound(c, s, "minimum", path, &b->has_lo, &b->lo) || read_bound(c, s, "maximum", path, &b->has_hi, &b->hi) ||
        read_bound(c, s, "exclusiveMinimum", path, &has_emin, &emin) ||
        read_bound(c, s, "exclusiveMaximum", path, &has_emax, &emax))
        return -1;
    if (json_is_true(json_object_get(s, "exclusiveMinimum"))) b->lo_excl = b->has_lo;
    if (json_is_true(json_object_get(s, "exclusiveMaximum"))) b->hi_excl = b->has_hi;
    if (has_emin && (!b->has_lo || emin >= b->lo)) b->has_lo = true, b->lo = emin, b->lo_excl = true;
    if (has_emax && (!b->has_hi || emax <= b->hi)) b->has_hi = true, b->hi = emax, b->hi_excl = true;
    return 0;
}

static void integer_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    js_bounds bd;
    if (read_bounds(c, s, path, &bd)) return;
    if (!bd.has_lo && !bd.has_hi) {
        prim(c, b, JP_INTEGER);
        return;
    }
    double lo = -(double)JS_INT_LIMIT, hi = (double)JS_INT_LIMIT;
    if (bd.has_lo) lo = bd.lo_excl ? floor(bd.lo) + 1 : ceil(bd.lo);
    if (bd.has_hi) hi = bd.hi_excl ? ceil(bd.hi) - 1 : floor(bd.hi);
    if (lo < -(double)JS_INT_LIMIT) lo = -(double)JS_INT_LIMIT;
    if (hi > (double)JS_INT_LIMIT) hi = (double)JS_INT_LIMIT;
    if (lo > hi) {
        jerr(c, path, "no integer satisfies 'minimum'/'maximum'");
        return;
    }
    int64_t l = (int64_t)lo, h = (int64_t)hi;
    sb_puts(b, "( ");
    if (h >= 0) {
        uint_range(b, l > 0 ? (uint64_t)l : 0, (uint64_t)h);
    }
    if (l < 0) {
        if (h >= 0) sb_puts(b, " | ");
        sb_puts(b, "\"-\" ( ");
        uint_range(b, h < 0 ? (uint64_t)-h : 1, (uint64_t)-l);
        sb_puts(b, " )");
    }
    sb_puts(b, " )");
}

#define JS_NO_TOP UINT64_MAX

/* Magnitudes m = I.F with c <= m (c < m when c_excl) and m <= d (m < d when d_excl; JS_NO_TOP: no bound). False when
 * there is none. */
static bool magnitude(jsctx *c, sbuf *b, uint64_t lo, bool lo_excl, uint64_t top, bool top_excl) {
    bool first = true;
    uint64_t base = lo;
    if (lo_excl) {
        if (top == JS_NO_TOP || top > lo) {
            sb_printf(b, "\"%llu\" ", (unsigned long long)lo);
            prim(c, b, JP_NZFRAC);
            first = false;
        }
        base = lo + 1;
    }
    uint64_t mid_top = top == JS_NO_TOP ? (uint64_t)JS_INT_LIMIT : top - (top > 0);
    if (top != JS_NO_TOP && top == 0) mid_top = 0, base = base > 0 ? base : 1; /* nothing below 0 */
    if (base <= mid_top && (top == JS_NO_TOP || base < top)) {
        if (!first) sb_puts(b, " | ");
        sb_puts(b, "( ");
        uint_range(b, base, mid_top);
        sb_puts(b, " ) ");
        prim(c, b, JP_FRAC);
        sb_puts(b, "?");
        first = false;
    }
    if (top != JS_NO_TOP && !top_excl && top >= base) {
        if (!first) sb_puts(b, " | ");
        sb_printf(b, "\"%llu\" ", (unsigned long long)top);
        prim(c, b, JP_ZFRAC);
        sb_puts(b, "?");
        first = false;
    }
    return !first;
}

static void number_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    js_bounds bd;
    if (read_bounds(c, s, path, &bd)) return;
    if (!bd.has_lo && !bd.has_hi) {
        prim(c, b, JP_NUMBER);
        return;
    }
    if ((bd.has_lo && bd.lo != floor(bd.lo)) || (bd.has_hi && bd.hi != floor(bd.hi))) {
        jerr(c, path, "unsupported JSON Schema keyword '%s': a bound of a number must be an integer",
             bd.has_lo && bd.lo != floor(bd.lo) ? "minimum" : "maximum");
        return;
    }
    double limit = (double)JS_INT_LIMIT;
    if (bd.has_lo && bd.lo < -limit) bd.lo = -limit, bd.lo_excl = false;
    if (bd.has_hi && bd.hi > limit) bd.hi = limit, bd.hi_excl = false;
    if (bd.has_lo && bd.lo > limit) bd.lo = limit;
    if (bd.has_hi && bd.hi < -limit) bd.hi = -limit;
    sb_puts(b, "( ");
    bool any = false;
    /* v >= 0: magnitude v from max(lo, 0) to hi */
    if (!bd.has_hi || bd.hi > 0 || (bd.hi == 0 && !bd.hi_excl)) {
        bool pos_lo = bd.has_lo && bd.lo >= 0;
        any = magnitude(c, b, pos_lo ? (uint64_t)bd.lo : 0, pos_lo && bd.lo_excl,
                        bd.has_hi ? (uint64_t)bd.hi : JS_NO_TOP, bd.hi_excl);
    }
    /* v < 0: magnitude -v above max(-hi, 0) (above 0 strictly: zero itself is the other side's) up to -lo */
    if (!bd.has_lo || bd.lo < 0) {
        sbuf neg = {0};
        bool neg_lo = bd.has_hi && bd.hi < 0;
        if (magnitude(c, &neg, neg_lo ? (uint64_t)-bd.hi : 0, neg_lo ? bd.hi_excl : true,
                      bd.has_lo ? (uint64_t)-bd.lo : JS_NO_TOP, bd.lo_excl)) {
            if (any) sb_puts(b, " | ");
            sb_puts(b, "\"-\" ( ");
            sb_add(b, neg.p, neg.n);
            sb_puts(b, " )");
            any = true;
        }
        if (neg.oom) b->oom = true;
        free(neg.p);
    }
    sb_puts(b, " )");
    if (!any) jerr(c, path, "no number satisfies 'minimum'/'maximum'");
}

/* ---- $ref and merging ---- */

/* The subschema a "#..." pointer names, or NULL with an error. */
static json_t *resolve(jsctx *c, const char *ref, const char *path) {
    if (ref[0] != '#') return jerr(c, path, "unsupported $ref '%s': only pointers into this schema (#/...)", ref), NULL;
    json_t *t = c->doc;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') return jerr(c, path, "malformed $ref '%s'", ref), NULL;
        p++;
        sbuf seg = {0};
        for (; *p && *p != '/'; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) {
                sb_add(&seg, p[1] == '0' ? "~" : "/", 1);
                p++;
            } else if (*p == '%' && p[1] && p[2] && strchr("0123456789abcdefABCDEF", p[1]) &&
                       strchr("0123456789abcdefABCDEF", p[2])) {
                char hex[3] = {p[1], p[2], 0};
                char ch = (char)strtol(hex, NULL, 16);
                sb_add(&seg, &ch, 1);
                p += 2;
            } else {
                sb_add(&seg, p, 1);
            }
        }
        const char *key = seg.p ? seg.p : "";
        json_t *next = NULL;
        if (json_is_object(t)) {
            next = json_object_get(t, key);
        } else if (json_is_array(t)) {
            char *end;
            unsigned long i = strtoul(key, &end, 10);
            if (*key && !*end) next = json_array_get(t, i);
        }
        bool oom = seg.oom;
        free(seg.p);
        if (oom) return joom(c), NULL;
        if (!next) return jerr(c, path, "$ref '%s' points to nothing in the schema", ref), NULL;
        t = next;
    }
    return t;
}

static json_t *merge(jsctx *c, json_t *a, json_t *b, const char *path);

/* s with its own $ref and allOf merged in (a new reference): what it constrains, in one object. */
static json_t *flatten(jsctx *c, json_t *s, const char *path) {
    if (!json_is_object(s)) return json_incref(s);
    if (++c->merge_depth > JS_MAX_MERGE) {
        c->merge_depth--;
        return jerr(c, path, "$ref or allOf nested deeper than %d while merging schemas", JS_MAX_MERGE), NULL;
    }
    json_t *out = NULL;
    json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf");
    if (ref) {
        if (!json_is_string(ref)) {
            jerr(c, path, "malformed JSON Schema keyword '$ref': expected a string");
        } else {
            json_t *target = resolve(c, json_string_value(ref), path);
            json_t *rest = target ? without(s, "$ref") : NULL;
            json_t *ft = rest ? flatten(c, target, path) : NULL;
            json_t *fr = ft ? flatten(c, rest, path) : NULL;
            out = fr ? merge(c, ft, fr, path) : NULL;
            json_decref(rest);
            json_decref(ft);
            json_decref(fr);
        }
    } else if (all) {
        if (!json_is_array(all) || !json_array_size(all)) {
            jerr(c, path, "malformed JSON Schema keyword 'allOf': expected a non-empty array");
        } else {
            out = without(s, "allOf");
            size_t i;
            json_t *m;
            json_array_foreach(all, i, m) {
                json_t *fm = out ? flatten(c, m, path) : NULL;
                json_t *next = fm ? merge(c, out, fm, path) : NULL;
                json_decref(fm);
                json_decref(out);
                out = next;
            }
        }
    } else {
        out = json_incref(s);
    }
    c->merge_depth--;
    if (!out && !c->failed) joom(c);
    return out;
}

static json_t *all_of(json_t *x, json_t *y) { return json_pack("{s:[OO]}", "allOf", x, y); }

/* The set of types of a "type" value (absent: all). */
static unsigned type_set(json_t *t) {
    if (json_is_string(t)) return type_bit(json_string_value(t));
    if (!json_is_array(t)) return T_ANY | T_INTEGER;
    unsigned types = 0;
    size_t i;
    json_t *x;
    json_array_foreach(t, i, x) types |= json_is_string(x) ? type_bit(json_string_value(x)) : 0;
    return types;
}

/* One schema that both a and b constrain to (a new reference), or NULL with an error. */
static json_t *merge(jsctx *c, json_t *a, json_t *b, const char *path) {
    if (json_is_true(a) || (json_is_object(a) && !json_object_size(a))) return json_incref(b);
    if (json_is_true(b) || (json_is_object(b) && !json_object_size(b))) return json_incref(a);
    if (!json_is_object(a) || !json_is_object(b))
        return jerr(c, path, "allOf: a member matches nothing (false) or is not a schema"), NULL;
    json_t *fa = flatten(c, a, path), *fb = fa ? flatten(c, b, path) : NULL;
    json_t *out = fb ? json_copy(fa) : NULL;
    if (!out) goto done;
    const char *k;
    json_t *vb;
    json_object_foreach(fb, k, vb) {
        json_t *va = json_object_get(out, k), *v = NULL;
        if (!va) {
            json_object_set(out, k, vb);
            continue;
        }
        if (strcmp(k, "type") == 0) {
            unsigned ta = type_set(va), tb = type_set(vb), t = ta & tb;
            if ((ta & T_INTEGER && tb & T_NUMBER) || (tb & T_INTEGER && ta & T_NUMBER)) t |= T_INTEGER;
            if (!t) {
                jerr(c, path, "allOf: no value has both of the types asked for ('type')");
                goto fail;
            }
            static const char *const names[] = {"null", "boolean", "object", "array", "number", "string", "integer"};
            v = json_array();
            for (unsigned i = 0; i < 7 && v; i++)
                if (t & 1u << i) json_array_append_new(v, json_string(names[i]));
        } else if (strcmp(k, "properties") == 0 && json_is_object(va) && json_is_object(vb)) {
            v = json_copy(va);
            const char *pk;
            json_t *pv;
            json_object_foreach(vb, pk, pv) {
                json_t *prev = json_object_get(v, pk);
                if (prev) json_object_set_new(v, pk, all_of(prev, pv));
                else json_object_set(v, pk, pv);
            }
        } else if (strcmp(k, "required") == 0 && json_is_array(va) && json_is_array(vb)) {
            v = json_copy(va);
            size_t i, j;
            json_t *x, *y;
            json_array_foreach(vb, i, x) {
                bool dup = false;
                json_array_foreach(va, j, y) dup = dup || json_equal(x, y);
                if (!dup) json_array_append(v, x);
            }
        } else if (strcmp(k, "additionalProperties") == 0 || strcmp(k, "additionalItems") == 0 ||
                   strcmp(k, "items") == 0) {
            if (json_is_array(va) || json_is_array(vb)) {
                if (!json_equal(va, vb)) {
                    jerr(c, path, "allOf: members with different '%s' arrays are not supported", k);
                    goto fail;
                }
                v = json_incref(va);
            } else if (json_is_false(va) || json_is_false(vb)) {
                v = json_false();
            } else {
                v = all_of(va, vb);
            }
        } else if (strcmp(k, "minimum") == 0 || strcmp(k, "minLength") == 0 || strcmp(k, "minItems") == 0 ||
                   (strcmp(k, "exclusiveMinimum") == 0 && json_is_number(va) && json_is_number(vb))) {
            v = json_incref(json_number_value(va) >= json_number_value(vb) ? va : vb);
        } else if (strcmp(k, "maximum") == 0 || strcmp(k, "maxLength") == 0 || strcmp(k, "maxItems") == 0 ||
                   (strcmp(k, "exclusiveMaximum") == 0 && json_is_number(va) && json_is_number(vb))) {
            v = json_incref(json_number_value(va) <= json_number_value(vb) ? va : vb);
        } else if (strcmp(k, "enum") == 0 && json_is_array(va) && json_is_array(vb)) {
            v = json_array();
            size_t i, j;
            json_t *x, *y;
            json_array_foreach(va, i, x) {
                bool both = false;
                json_array_foreach(vb, j, y) both = both || json_equal(x, y);
                if (both && v) json_array_append(v, x);
            }
        } else if (strcmp(k, "anyOf") == 0 || strcmp(k, "oneOf") == 0) {
            jerr(c, path, "allOf: two members with '%s' are not supported", k);
            goto fail;
        } else if (in_list(js_constraints, k) && !json_equal(va, vb)) {
            jerr(c, path, "allOf: members disagree on '%s'", k);
            goto fail;
        } else {
            continue; /* equal, or an annotation: the first one's */
        }
        if (!v || json_object_set_new(out, k, v)) {
            joom(c);
            goto fail;
        }
    }
    goto done;
fail:
    json_decref(out);
    out = NULL;
done:
    json_decref(fa);
    json_decref(fb);
    return out;
}

/* ---- schemas to rules ---- */

static int define(jsctx *c, json_t *s, const char *path, const char *name);

/* A new rule for subschema s (hint names it); its name, owned by the name set, or NULL. */
static const char *visit(jsctx *c, json_t *s, const char *path, const char *hint) {
    const char *name = rule_name(c, hint);
    if (!name || define(c, s, path, name)) return NULL;
    return name;
}

static const char *visit_child(jsctx *c, json_t *s, const char *path, const char *key, const char *hint) {
    char *p = path_join(path, key);
    if (!p) return joom(c), NULL;
    const char *name = visit(c, s, p, hint);
    free(p);
    return name;
}

static char *hint_join(const char *hint, const char *part) {
    sbuf b = {0};
    sb_puts(&b, hint);
    sb_puts(&b, "-");
    sb_puts(&b, part);
    return b.oom ? (free(b.p), NULL) : b.p;
}

static int grow_refs(jsctx *c) {
    if (c->n_refs < c->cap_refs) return 0;
    size_t cap = c->cap_refs ? c->cap_refs * 2 : 8;
    js_ref *r = realloc(c->refs, cap * sizeof *r);
    if (!r) return -1;
    c->refs = r;
    c->cap_refs = cap;
    return 0;
}

/* The rule of $ref target (made the first time; a recursive use gets the name of the rule being made). */
static const char *ref_rule(jsctx *c, const char *ref, const char *path) {
    for (size_t i = 0; i < c->n_refs; i++) {
        if (strcmp(c->refs[i].pointer, ref) != 0) continue;
        if (c->refs[i].busy && c->refs[i].structural == c->structural)
            return jerr(c, path, "$ref '%s' refers to itself before any object or array (a cycle with no value)",
                        ref),
                   NULL;
        return c->refs[i].rule;
    }
    json_t *target = resolve(c, ref, path);
    if (!target) return NULL;
    const char *last = strrchr(ref, '/');
    char *hint = hint_join("ref", last ? last + 1 : "root");
    const char *name = hint ? rule_name(c, hint) : NULL;
    free(hint);
    char *pointer = strdup(ref);
    if (!name || !pointer || grow_refs(c)) {
        free(pointer);
        return joom(c), NULL;
    }
    size_t at = c->n_refs++;
    c->refs[at] = (js_ref){pointer, (char *)name, c->structural, true};
    int rc = define(c, target, path, name);
    c->refs[at].busy = false;
    return rc ? NULL : name;
}

static bool value_has_type(const json_t *v, unsigned types) {
    switch (json_typeof(v)) {
    case JSON_NULL: return types & T_NULL;
    case JSON_TRUE: case JSON_FALSE: return types & T_BOOLEAN;
    case JSON_OBJECT: return types & T_OBJECT;
    case JSON_ARRAY: return types & T_ARRAY;
    case JSON_STRING: return types & T_STRING;
    case JSON_INTEGER: return types & (T_NUMBER | T_INTEGER);
    case JSON_REAL: {
        double d = json_real_value(v);
        return (types & T_NUMBER) || ((types & T_INTEGER) && d == floor(d));
    }
    }
    return false;
}

/* enum and/or const: the values' exact texts, those of the wrong type left out. */
static void enum_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (en && (!json_is_array(en) || !json_array_size(en))) {
        jerr(c, path, "malformed JSON Schema keyword 'enum': expected a non-empty array");
        return;
    }
    unsigned types = T_ANY | T_INTEGER;
    if (json_object_get(s, "type") && schema_types(c, s, path, &types)) return;
    if (types & T_NUMBER) types |= T_INTEGER;
    size_t n = en ? json_array_size(en) : 1;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        json_t *v = en ? json_array_get(en, i) : cn;
        if (en && cn && !json_equal(v, cn)) continue;
        if (!value_has_type(v, types)) continue;
        sbuf lit = {0};
        sb_json_value(&lit, v);
        if (!first) sb_puts(b, " | ");
        first = false;
        sb_gbnf_literal(b, lit.p ? lit.p : "", lit.n);
        if (lit.oom) b->oom = true;
        free(lit.p);
    }
    if (first) jerr(c, path, "no value of '%s' has the schema's type", en ? "enum" : "const");
}

static void string_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    json_t *fmt = json_object_get(s, "format");
    if (fmt) {
        if (!json_is_string(fmt)) {
            jerr(c, path, "malformed JSON Schema keyword 'format': expected a string");
            return;
        }
        const char *f = json_string_value(fmt);
        int k = strcmp(f, "date") == 0 ? JP_DATE : strcmp(f, "time") == 0 ? JP_TIME
              : strcmp(f, "date-time") == 0 ? JP_DATE_TIME : strcmp(f, "uuid") == 0 ? JP_UUID : -1;
        if (k < 0) {
            jerr(c, path, "unsupported JSON Schema keyword 'format': '%s' (date, time, date-time and uuid are)", f);
            return;
        }
        if (k != JP_UUID) sb_puts(b, "\"\\\"\" ");
        prim(c, b, k);
        if (k != JP_UUID) sb_puts(b, " \"\\\"\"");
        return;
    }
    int64_t min = 0, max = 0;
    if (count_keyword(c, s, "minLength", path, 0, &min) || count_keyword(c, s, "maxLength", path, INT32_MAX, &max) ||
        limit_repeat(c, "minLength", min, path) || limit_repeat(c, "maxLength", max, path))
        return;
    if (min == INT32_MAX) {
        jerr(c, path, "unsupported JSON Schema keyword 'minLength': above the supported %d", GRAMMAR_MAX_REPEAT);
        return;
    }
    if (min > max) {
        jerr(c, path, "'minLength' is above 'maxLength'");
        return;
    }
    if (min == 0 && max == INT32_MAX) {
        prim(c, b, JP_STRING);
        return;
    }
    sbuf ch = {0};
    prim(c, &ch, JP_CHAR);
    sb_puts(b, "\"\\\"\" ");
    sb_repeat(b, ch.p ? ch.p : "", min, max);
    sb_puts(b, " \"\\\"\"");
    if (ch.oom) b->oom = true;
    free(ch.p);
}

/* ---- objects ---- */

typedef struct {
    uint32_t cp;
    int child, sibling; /* -1: none */
    bool end;           /* a declared name ends here */
} js_trie;

/* Rules for the names that are not one of a trie's: node `at`'s continuations (see object_body). */
static const char *not_names_rule(jsctx *c, const js_trie *t, int at, const char *hint) {
    sbuf body = {0}, rej = {0};
    if (!t[at].end) sb_puts(&body, "| "); /* the name may stop here (first: an empty alternative cannot end a line) */
    size_t none = body.n;                 /* no alternative written after it yet */
    for (int ch = t[at].child; ch >= 0; ch = t[ch].sibling) {
        if (body.n > none) sb_puts(&body, " | ");
        uint32_t cp = t[ch].cp;
        sb_printf(&body, cp > 0xffff ? "[\\U%08X] " : "[\\u%04X] ", cp);
        sb_printf(&rej, cp > 0xffff ? "\\U%08X" : "\\u%04X", cp);
        if (t[ch].child >= 0) {
            const char *sub = not_names_rule(c, t, ch, hint);
            if (!sub) goto fail;
            sb_puts(&body, sub);
        } else {
            prim(c, &body, JP_CHAR);
            sb_puts(&body, "+");
        }
    }
    if (body.n > none) sb_puts(&body, " | ");
    sb_puts(&body, "( [^\"\\\\\\x7F\\x00-\\x1F");
    if (rej.n) sb_add(&body, rej.p, rej.n);
    sb_puts(&body, "] | \"\\\\\" ");
    prim(c, &body, JP_ESCAPE);
    sb_puts(&body, " ) ");
    prim(c, &body, JP_CHAR);
    sb_puts(&body, "*");
    if (body.oom || rej.oom) {
        joom(c);
        goto fail;
    }
    const char *name = rule_name(c, hint);
    if (!name) goto fail;
    emit_rule(c, name, &body);
    free(body.p);
    free(rej.p);
    return name;
fail:
    free(body.p);
    free(rej.p);
    return NULL;
}

/* A rule for the JSON strings (with quotes) that are none of names[0..n). */
static const char *not_names(jsctx *c, const char *const *names, size_t n, const char *path, const char *hint) {
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += strlen(names[i]);
    js_trie *t = malloc(cap * sizeof *t);
    if (!t) return joom(c), NULL;
    int nt = 1;
    t[0] = (js_trie){0, -1, -1, false};
    for (size_t i = 0; i < n; i++) {
        int at = 0;
        const unsigned char *k = (const unsigned char *)names[i];
        size_t len = strlen(names[i]);
        if (len > 256) {
            free(t);
            return jerr(c, path, "unsupported: a property name longer than 256 bytes beside additionalProperties"), NULL;
        }
        for (size_t j = 0; j < len;) {
            uint32_t cp = k[j];
            int l = 1;
            if (cp >= 0xf0) cp &= 0x07, l = 4;
            else if (cp >= 0xe0) cp &= 0x0f, l = 3;
            else if (cp >= 0xc0) cp &= 0x1f, l = 2;
            for (int q = 1; q < l && j + (size_t)q < len; q++) cp = cp << 6 | (k[j + (size_t)q] & 0x3f);
            j += (size_t)l;
            if (cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7f) {
                free(t);
                return jerr(c, path, "unsupported: property name '%s' (quote, backslash or control character) beside "
                                     "additionalProperties", names[i]), NULL;
            }
            int ch = t[at].child;
            while (ch >= 0 && t[ch].cp != cp) ch = t[ch].sibling;
            if (ch < 0) {
                ch = nt++;
                t[ch] = (js_trie){cp, -1, t[at].child, false};
                t[at].child = ch;
            }
            at = ch;
        }
        t[at].end = true;
    }
    sbuf body = {0};
    const char *name = NULL;
    sb_puts(&body, "\"\\\"\" ");
    if (t[0].child < 0) { /* only "" declared */
        prim(c, &body, JP_CHAR);
        sb_puts(&body, "+");
    } else {
        char *sub_hint = hint_join(hint, "k");
        const char *sub = sub_hint ? not_names_rule(c, t, 0, sub_hint) : NULL;
        free(sub_hint);
        if (!sub) goto out;
        sb_puts(&body, sub);
    }
    sb_puts(&body, " \"\\\"\"");
    if (body.oom) {
        joom(c);
        goto out;
    }
    name = rule_name(c, hint);
    if (name) emit_rule(c, name, &body);
out:
    free(body.p);
    free(t);
    return name;
}

static void object_body(jsctx *c, sbuf *b, json_t *s, const char *path, const char *hint) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) {
        jerr(c, path, "malformed JSON Schema keyword 'properties': expected an object");
        return;
    }
    if (req && !json_is_array(req)) {
        jerr(c, path, "malformed JSON Schema keyword 'required': expected an array of names");
        return;
    }
    size_t i;
    json_t *x;
    json_array_foreach(req, i, x) if (!json_is_string(x)) {
        jerr(c, path, "malformed JSON Schema keyword 'required': expected an array of names");
        return;
    }
    if (add && !json_is_boolean(add) && !json_is_object(add)) {
        jerr(c, path, "malformed JSON Schema keyword 'additionalProperties': expected a schema or a boolean");
        return;
    }
    bool add_allowed = add ? !json_is_false(add) : !props;
    json_t *add_schema = json_is_object(add) && has_constraints(add) ? add : NULL;
    if (!props && !json_array_size(req) && add_allowed && !add_schema) {
        prim(c, b, JP_OBJECT);
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
        joom(c);
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
                jerr(c, path, "required property '%s' is not in 'properties' and additionalProperties is false", r);
                goto out;
            }
            names[n] = r, schemas[n++] = add_schema ? add_schema : json_true();
        }
        required[j] = true;
    }
    c->structural++;
    for (size_t e = 0; e < n && !c->failed; e++) {
        char *h = hint_join(hint, names[e]);
        const char *value = h ? visit_child(c, schemas[e], e < n_props ? ppath : path, e < n_props ? names[e] : "required", h) : NULL;
        char *kvh = value ? hint_join(h, "kv") : NULL;
        free(h);
        sbuf key = {0}, kvb = {0};
        if (kvh) {
            sb_json_string(&key, names[e], strlen(names[e]));
            sb_gbnf_literal(&kvb, key.p ? key.p : "", key.n);
            sb_puts(&kvb, " ");
            prim(c, &kvb, JP_SPACE);
            sb_puts(&kvb, " \":\" ");
            prim(c, &kvb, JP_SPACE);
            sb_puts(&kvb, " ");
            sb_puts(&kvb, value);
            kv[e] = rule_name(c, kvh);
            if (kv[e] && !kvb.oom && !key.oom) emit_rule(c, kv[e], &kvb);
            else joom(c);
        }
        free(kvh);
        free(key.p);
        free(kvb.p);
        if (!kv[e] && !c->failed) joom(c);
    }
    /* Additional properties: a key that is none of the names, then a value of their schema. */
    const char *more = NULL;
    if (add_allowed && !c->failed) {
        char *h = hint_join(hint, "additional");
        const char *value = NULL;
        sbuf vb = {0};
        if (add_schema) {
            value = h ? visit_child(c, add_schema, path, "additionalProperties", h) : NULL;
        } else {
            prim(c, &vb, JP_VALUE);
            value = vb.p;
        }
        char *kh = h ? hint_join(h, "key") : NULL;
        sbuf sk = {0};
        const char *key = NULL;
        if (kh && value) {
            if (n) {
                key = not_names(c, names, n, path, kh);
            } else {
                prim(c, &sk, JP_STRING);
                key = sk.p;
            }
        }
        char *kvh = key ? hint_join(h, "kv") : NULL;
        if (kvh) {
            sbuf kvb = {0};
            sb_puts(&kvb, key);
            sb_puts(&kvb, " ");
            prim(c, &kvb, JP_SPACE);
            sb_puts(&kvb, " \":\" ");
            prim(c, &kvb, JP_SPACE);
            sb_puts(&kvb, " ");
            sb_puts(&kvb, value);
            more = rule_name(c, kvh);
            if (more && !kvb.oom) emit_rule(c, more, &kvb);
            free(kvb.p);
        }
        if (!more && !c->failed) joom(c);
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
    prim(c, &sp, JP_SPACE);
    for (size_t e = 0; e < n && !c->failed; e++) {
        char num[32];
        snprintf(num, sizeof num, "first-%zu", e);
        char *h1 = hint_join(hint, num);
        snprintf(num, sizeof num, "rest-%zu", e);
        char *h2 = hint_join(hint, num);
        first[e] = h1 ? rule_name(c, h1) : NULL;
        rest[e] = h2 ? rule_name(c, h2) : NULL;
        free(h1);
        free(h2);
        if (!first[e] || !rest[e]) joom(c);
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
        if (f.oom || r.oom || tail.oom || after.oom) joom(c);
        emit_rule(c, first[e], &f);
        emit_rule(c, rest[e], &r);
        free(f.p);
        free(r.p);
        free(tail.p);
        free(after.p);
    }
    sb_printf(b, "\"{\" %s ", sp.p);
    if (n) sb_printf(b, "%s ", first[0]);
    else if (more) sb_printf(b, "( %s ( \",\" %s %s )* )? ", more, sp.p, more);
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

static void array_body(jsctx *c, sbuf *b, json_t *s, const char *path, const char *hint) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    json_t *tuple = NULL, *rest = items;
    const char *tuple_key = "prefixItems", *rest_key = "items";
    if (prefix) {
        if (!json_is_array(prefix)) {
            jerr(c, path, "malformed JSON Schema keyword 'prefixItems': expected an array of schemas");
            return;
        }
        if (json_is_array(items)) {
            jerr(c, path, "malformed JSON Schema keyword 'items': an array beside 'prefixItems'");
            return;
        }
        tuple = prefix;
    } else if (json_is_array(items)) {
        tuple = items, tuple_key = "items";
        rest = json_object_get(s, "additionalItems"), rest_key = "additionalItems";
    }
    if (rest && !json_is_boolean(rest) && !json_is_object(rest)) {
        jerr(c, path, "malformed JSON Schema keyword '%s': expected a schema or a boolean", rest_key);
        return;
    }
    int64_t min = 0, max = 0;
    if (count_keyword(c, s, "minItems", path, 0, &min) || count_keyword(c, s, "maxItems", path, INT32_MAX, &max) ||
        limit_repeat(c, "minItems", min, path) || limit_repeat(c, "maxItems", max, path))
        return;
    size_t p = tuple ? json_array_size(tuple) : 0;
    if (p > JS_MAX_PREFIX_ITEMS) {
        jerr(c, path, "unsupported JSON Schema keyword '%s': more than %d schemas", tuple_key, JS_MAX_PREFIX_ITEMS);
        return;
    }
    if (json_is_false(rest) && max > (int64_t)p) max = (int64_t)p;
    if (min == INT32_MAX || min > max) {
        jerr(c, path, "'minItems' is above the items allowed ('maxItems', or the tuple without more items)");
        return;
    }
    if (!tuple && !has_constraints(rest) && min == 0 && max == INT32_MAX) {
        prim(c, b, JP_ARRAY);
        return;
    }
    const char **names = calloc(p + 1, sizeof *names);
    const char *rest_rule = NULL;
    sbuf any = {0}, sp = {0};
    char *tpath = path_join(path, tuple_key);
    if (!names || !tpath) {
        joom(c);
        goto out;
    }
    c->structural++;
    for (size_t i = 0; i < p && !c->failed; i++) {
        char num[32];
        snprintf(num, sizeof num, "%zu", i);
        char *h = hint_join(hint, num);
        char *ip = path_index(tpath, i);
        names[i] = h && ip ? visit(c, json_array_get(tuple, i), ip, h) : NULL;
        if (!names[i] && !c->failed) joom(c);
        free(h);
        free(ip);
    }
    if (max > (int64_t)p && !c->failed) {
        if (has_constraints(rest)) {
            char *h = hint_join(hint, "item");
            rest_rule = h ? visit_child(c, rest, path, rest_key, h) : NULL;
            free(h);
        } else {
            prim(c, &any, JP_VALUE);
            rest_rule = any.p;
        }
        if (!rest_rule && !c->failed) joom(c);
    }
    c->structural--;
    if (c->failed) goto out;
    prim(c, &sp, JP_SPACE);
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

/* ---- one schema ---- */

/* A $ref beside other constraints (JSON Schema 2019+ applies both): merged rather than referenced by name. */
static bool ref_has_siblings(json_t *s) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        (void)v;
        if (strcmp(k, "$ref") != 0 && (in_list(js_constraints, k) || in_list(js_unsupported, k))) return true;
    }
    return false;
}

static void schema_body(jsctx *c, sbuf *b, json_t *s, const char *path, const char *hint) {
    if (json_is_true(s)) {
        prim(c, b, JP_VALUE);
        return;
    }
    if (json_is_false(s)) {
        jerr(c, path, "the schema false matches nothing");
        return;
    }
    if (!json_is_object(s)) {
        jerr(c, path, "malformed JSON Schema: expected an object or a boolean");
        return;
    }
    if (check_keywords(c, s, path)) return;
    json_t *ref = json_object_get(s, "$ref"), *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    if (ref && !json_is_string(ref)) {
        jerr(c, path, "malformed JSON Schema keyword '$ref': expected a string");
        return;
    }
    if (json_object_get(s, "allOf") || (ref && ref_has_siblings(s))) {
        json_t *flat = flatten(c, s, path);
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
            jerr(c, path, "unsupported: both 'anyOf' and 'oneOf' in one schema");
            return;
        }
        if (!json_is_array(alts) || !json_array_size(alts)) {
            jerr(c, path, "malformed JSON Schema keyword '%s': expected a non-empty array", key);
            return;
        }
        json_t *siblings = without(s, key);
        char *kpath = path_join(path, key);
        if (!siblings || !kpath) joom(c);
        bool constrained = siblings && has_constraints(siblings);
        size_t i;
        json_t *m;
        json_array_foreach(alts, i, m) {
            if (c->failed) break;
            char num[32];
            snprintf(num, sizeof num, "%zu", i);
            char *h = hint_join(hint, num), *ip = path_index(kpath, i);
            json_t *member = constrained ? merge(c, siblings, m, ip ? ip : path) : json_incref(m);
            const char *name = h && ip && member ? visit(c, member, ip, h) : NULL;
            if (!name && !c->failed) joom(c);
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
    if (schema_types(c, s, path, &types)) return;
    if ((types & T_ANY) == T_ANY) {
        prim(c, b, JP_VALUE);
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
        case T_STRING: string_body(c, b, s, path); break;
        case T_NUMBER: number_body(c, b, s, path); break;
        case T_INTEGER: integer_body(c, b, s, path); break;
        case T_BOOLEAN: prim(c, b, JP_BOOLEAN); break;
        default: prim(c, b, JP_NULL); break;
        }
    }
}

static int define(jsctx *c, json_t *s, const char *path, const char *name) {
    if (++c->depth > JS_MAX_DEPTH) {
        c->depth--;
        return jerr(c, path, "schema nested deeper than %d", JS_MAX_DEPTH);
    }
    sbuf body = {0};
    schema_body(c, &body, s, path, name + strlen(c->prefix));
    c->depth--;
    if (body.oom) joom(c);
    if (!c->failed) emit_rule(c, name, &body);
    free(body.p);
    return c->failed ? -1 : 0;
}

char *grammar_schema_gbnf(const char *schema_json, size_t len, const char *prefix, fkv_error *err) {
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
    const char *root = rule_name(&c, "root");
    char *pointer = strdup("#");
    if (!root || !pointer || grow_refs(&c)) {
        free(pointer);
        joom(&c);
    } else {
        c.refs[c.n_refs++] = (js_ref){pointer, (char *)root, 0, true};
        define(&c, doc, "", root);
    }
    if (!c.failed && c.rules.oom) joom(&c);
    if (!c.failed && c.rules.n > JS_MAX_OUTPUT)
        jerr(&c, "", "the grammar would be larger than %u bytes", JS_MAX_OUTPUT);
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
