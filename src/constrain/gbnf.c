/* gbnf.c — the GBNF parser: a recursive descent over rules, alternatives and sequences (contract in gbnf.h). */
#include "constrain/gbnf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "base/err.h"
#include "constrain/grow.h"

static void line_col(const char *src, size_t at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (src[i] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

int gbnf_error(gparser *p, size_t at, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at == SIZE_MAX) return err_input(p->err, "grammar: %s", msg);
    int line, col;
    line_col(p->src, at, &line, &col);
    return err_input(p->err, "grammar line %d, column %d: %s", line, col, msg);
}

int gbnf_oom(gparser *p) {
    if (p->failed) return -1;
    p->failed = true;
    return err_nomem(p->err, "grammar: out of memory");
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(gparser *p, bool newlines) {
    while (p->at < p->len) {
        char c = p->src[p->at];
        if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
            p->at++;
        } else if (c == '#') {
            while (p->at < p->len && p->src[p->at] != '\n' && p->src[p->at] != '\r') p->at++;
        } else {
            break;
        }
    }
}

static int64_t rule_new(gparser *p, uint32_t origin) {
    if (grow(&p->rules, &p->cap_rules, p->n_rules + 1, sizeof *p->rules, GRAMMAR_MAX_ELEMS)) {
        if (p->n_rules + 1 > GRAMMAR_MAX_ELEMS)
            return gbnf_error(p, p->at, "grammar too large: more than %u rules", GRAMMAR_MAX_ELEMS);
        return gbnf_oom(p);
    }
    uint32_t id = (uint32_t)p->n_rules++;
    p->rules[id] = (prule){.origin = origin == UINT32_MAX ? id : origin, .def_at = SIZE_MAX, .ref_at = SIZE_MAX};
    return id;
}

static uint32_t name_hash(const char *s, size_t n) { return (uint32_t)XXH3_64bits(s, n); }

/* The slot of the user rule named s[0..n) in the name table (0 there: absent). */
static size_t name_slot(const gparser *p, const char *s, size_t n) {
    size_t h = name_hash(s, n) & (p->names_cap - 1);
    for (; p->names[h]; h = (h + 1) & (p->names_cap - 1)) {
        const prule *r = &p->rules[p->names[h] - 1];
        if (r->name_len == n && memcmp(p->src + r->name_at, s, n) == 0) break;
    }
    return h;
}

/* The user rule named src[at .. at + n): found, or made (not yet defined). -1 on failure. */
static int64_t rule_by_name(gparser *p, size_t at, size_t n) {
    if ((p->n_names + 1) * 2 > p->names_cap) {
        size_t cap = p->names_cap ? p->names_cap * 2 : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) return gbnf_oom(p);
        for (size_t i = 0; i < p->names_cap; i++) {
            uint32_t v = p->names[i];
            if (!v) continue;
            const prule *r = &p->rules[v - 1];
            size_t h = name_hash(p->src + r->name_at, r->name_len) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = v;
        }
        free(p->names);
        p->names = t;
        p->names_cap = cap;
    }
    size_t h = name_slot(p, p->src + at, n);
    if (p->names[h]) return p->names[h] - 1;
    int64_t id = rule_new(p, UINT32_MAX);
    if (id < 0) return -1;
    p->rules[id].name_at = at;
    p->rules[id].name_len = n;
    p->names[h] = (uint32_t)id + 1;
    p->n_names++;
    return id;
}

static int push(gparser *p, uint32_t r, uint32_t kind, uint32_t value) {
    if (++p->n_elems > GRAMMAR_MAX_ELEMS)
        return gbnf_error(p, p->at, "grammar too large: more than %u elements after expanding repetitions",
                          GRAMMAR_MAX_ELEMS);
    prule *pr = &p->rules[r];
    if (grow(&pr->el, &pr->cap, pr->n + 1, sizeof *pr->el, SIZE_MAX)) return gbnf_oom(p);
    pr->el[pr->n++] = (pelem){kind, value};
    return 0;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Strict UTF-8 decoding of s[0..n): the code point and its length, or 0 for an invalid sequence. */
static int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    int len;
    uint32_t v, min;
    if (b < 0x80) {
        *cp = b;
        return 1;
    } else if (b >= 0xc2 && b <= 0xdf) {
        len = 2, v = b & 0x1f, min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
        len = 3, v = b & 0x0f, min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
        len = 4, v = b & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

/* One character of a literal or class at p->at (an escape or a UTF-8 character) into *cp. */
static int parse_char(gparser *p, uint32_t *cp) {
    size_t at = p->at;
    const char *s = p->src;
    if (s[at] != '\\') {
        int n = utf8_decode((const uint8_t *)s + at, p->len - at, cp);
        if (!n) return gbnf_error(p, at, "invalid UTF-8");
        p->at += (size_t)n;
        return 0;
    }
    if (at + 1 >= p->len) return gbnf_error(p, at, "unterminated escape");
    int digits = 0;
    switch (s[at + 1]) {
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    case 't': *cp = '\t'; break;
    case 'r': *cp = '\r'; break;
    case 'n': *cp = '\n'; break;
    case '\\': case '"': case '[': case ']': case '-': *cp = (uint8_t)s[at + 1]; break;
    default:
        if ((unsigned char)s[at + 1] >= 0x20 && (unsigned char)s[at + 1] < 0x7f)
            return gbnf_error(p, at, "unknown escape '\\%c'", s[at + 1]);
        return gbnf_error(p, at, "unknown escape");
    }
    p->at += 2;
    if (!digits) return 0;
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = p->at < p->len ? hex_value(s[p->at]) : -1;
        if (h < 0) return gbnf_error(p, at, "expected %d hex digits after '\\%c'", digits, s[at + 1]);
        v = v << 4 | (uint32_t)h;
        p->at++;
    }
    if (v > 0x10ffff) return gbnf_error(p, at, "code point U+%X is past U+10FFFF", v);
    *cp = v;
    return 0;
}

static int add_range(gparser *p, uint32_t lo, uint32_t hi) {
    if (grow(&p->ranges, &p->cap_ranges, p->n_ranges + 1, sizeof *p->ranges, SIZE_MAX)) return gbnf_oom(p);
    p->ranges[p->n_ranges++] = (cprange){lo, hi};
    return 0;
}

static int64_t class_new(gparser *p, uint32_t off, bool neg) {
    if (grow(&p->classes, &p->cap_classes, p->n_classes + 1, sizeof *p->classes, GRAMMAR_MAX_ELEMS)) return gbnf_oom(p);
    p->classes[p->n_classes] = (pclass){off, (uint32_t)(p->n_ranges - off), neg};
    return (int64_t)p->n_classes++;
}

static int parse_count(gparser *p, uint32_t *v) {
    size_t at = p->at;
    uint64_t n = 0;
    while (p->at < p->len && p->src[p->at] >= '0' && p->src[p->at] <= '9') {
        n = n * 10 + (uint64_t)(p->src[p->at] - '0');
        if (n > GRAMMAR_MAX_REPEAT)
            return gbnf_error(p, at, "repetition count is larger than %d (GRAMMAR_MAX_REPEAT)", GRAMMAR_MAX_REPEAT);
        p->at++;
    }
    if (p->at == at) return gbnf_error(p, at, "expected a repetition count");
    *v = (uint32_t)n;
    return 0;
}

#define REPEAT_ANY UINT32_MAX
#define REPEAT_INLINE 8 /* required copies up to this many are written out; more become a chain of rules */

/* A chain of `levels` rules for item (n elements); the id of its top level L_levels, or -1. */
static int64_t chain(gparser *p, uint32_t origin, const pelem *item, size_t n, uint32_t levels, bool optional) {
    int64_t prev = -1, first = -1;
    for (uint32_t k = 0; k < levels; k++) {
        int64_t rr = rule_new(p, origin);
        if (rr < 0) return -1;
        if (first < 0) first = rr;
        for (size_t i = 0; i < n; i++)
            if (push(p, (uint32_t)rr, item[i].kind, item[i].value)) return -1;
        if (prev >= 0 && push(p, (uint32_t)rr, PE_REF, (uint32_t)prev)) return -1;
        if (optional && push(p, (uint32_t)rr, PE_ALT, 0)) return -1;
        if (push(p, (uint32_t)rr, PE_END, 0)) return -1;
        prev = rr;
    }
    if (grow(&p->chains, &p->cap_chains, p->n_chains + 1, sizeof *p->chains, SIZE_MAX)) return gbnf_oom(p);
    p->chains[p->n_chains++] = (pchain){(uint32_t)first, levels};
    return prev;
}

/* Rewrites the item rules[r].el[last ..] as item{min,max} (max REPEAT_ANY: no bound): the required copies (written
 * out, or a chain), then the optional ones (R ::= item R | "" without a bound, else a chain). */
static int repeat(gparser *p, uint32_t r, size_t last, uint32_t min, uint32_t max) {
    size_t n = p->rules[r].n - last;
    pelem *item = malloc(n * sizeof *item);
    if (!item) return gbnf_oom(p);
    memcpy(item, p->rules[r].el + last, n * sizeof *item);
    p->rules[r].n = last;
    p->n_elems -= n;
    uint32_t origin = p->rules[r].origin;
    int rc = 0;
    if (min <= REPEAT_INLINE) {
        for (uint32_t k = 0; k < min && !rc; k++)
            for (size_t i = 0; i < n && !rc; i++) rc = push(p, r, item[i].kind, item[i].value);
    } else {
        int64_t top = chain(p, origin, item, n, min, false);
        rc = top < 0 ? -1 : push(p, r, PE_REF, (uint32_t)top);
    }
    if (!rc && max == REPEAT_ANY) {
        int64_t rr = rule_new(p, origin);
        rc = rr < 0 ? -1 : 0;
        for (size_t i = 0; i < n && !rc; i++) rc = push(p, (uint32_t)rr, item[i].kind, item[i].value);
        if (!rc) rc = push(p, (uint32_t)rr, PE_REF, (uint32_t)rr);
        if (!rc) rc = push(p, (uint32_t)rr, PE_ALT, 0);
        if (!rc) rc = push(p, (uint32_t)rr, PE_END, 0);
        if (!rc) rc = push(p, r, PE_REF, (uint32_t)rr);
    } else if (!rc && max > min) {
        int64_t top = chain(p, origin, item, n, max - min, true);
        rc = top < 0 ? -1 : push(p, r, PE_REF, (uint32_t)top);
    }
    free(item);
    return rc;
}

static int parse_alternates(gparser *p, uint32_t r, bool nested);

static int parse_sequence(gparser *p, uint32_t r, bool nested) {
    size_t last = SIZE_MAX; /* where the last item starts in rules[r].el */
    while (p->at < p->len && !p->failed) {
        char c = p->src[p->at];
        size_t start = p->at;
        if (c == '"') {
            last = p->rules[r].n;
            p->at++;
            for (;;) {
                if (p->at >= p->len) return gbnf_error(p, start, "unterminated literal");
                if (p->src[p->at] == '"') break;
                uint32_t cp;
                if (parse_char(p, &cp) || push(p, r, PE_CHAR, cp)) return -1;
            }
            p->at++;
        } else if (c == '[') {
            p->at++;
            bool neg = p->at < p->len && p->src[p->at] == '^';
            if (neg) p->at++;
            uint32_t off = (uint32_t)p->n_ranges;
            for (;;) {
                if (p->at >= p->len) return gbnf_error(p, start, "unterminated character class");
                if (p->src[p->at] == ']') break;
                size_t char_at = p->at;
                uint32_t lo, hi;
                if (parse_char(p, &lo)) return -1;
                hi = lo;
                if (p->at + 1 < p->len && p->src[p->at] == '-' && p->src[p->at + 1] != ']') {
                    p->at++;
                    if (parse_char(p, &hi)) return -1;
                    if (hi < lo) return gbnf_error(p, char_at, "character range U+%04X-U+%04X is reversed", lo, hi);
                }
                if (add_range(p, lo, hi)) return -1;
            }
            p->at++;
            int64_t k = class_new(p, off, neg);
            last = p->rules[r].n;
            if (k < 0 || push(p, r, PE_CLASS, (uint32_t)k)) return -1;
        } else if (c == '.') {
            if (p->any_class == UINT32_MAX) {
                uint32_t off = (uint32_t)p->n_ranges;
                int64_t k = add_range(p, 0, 0x10ffff) ? -1 : class_new(p, off, false);
                if (k < 0) return -1;
                p->any_class = (uint32_t)k;
            }
            last = p->rules[r].n;
            p->at++;
            if (push(p, r, PE_CLASS, p->any_class)) return -1;
        } else if (c == '(') {
            if (++p->depth > GRAMMAR_MAX_NESTING)
                return gbnf_error(p, start, "parentheses nested deeper than %d", GRAMMAR_MAX_NESTING);
            p->at++;
            skip_space(p, true);
            int64_t sub = rule_new(p, p->rules[r].origin);
            if (sub < 0 || parse_alternates(p, (uint32_t)sub, true)) return -1;
            if (p->at >= p->len || p->src[p->at] != ')') return gbnf_error(p, start, "'(' without a matching ')'");
            p->at++;
            p->depth--;
            last = p->rules[r].n;
            if (push(p, r, PE_REF, (uint32_t)sub)) return -1;
        } else if (is_name_char(c)) {
            while (p->at < p->len && is_name_char(p->src[p->at])) p->at++;
            int64_t id = rule_by_name(p, start, p->at - start);
            if (id < 0) return -1;
            if (p->rules[id].ref_at == SIZE_MAX) p->rules[id].ref_at = start;
            last = p->rules[r].n;
            if (push(p, r, PE_REF, (uint32_t)id)) return -1;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == SIZE_MAX || last == p->rules[r].n) return gbnf_error(p, start, "'%c' has nothing to repeat", c);
            uint32_t min = 0, max = REPEAT_ANY;
            p->at++;
            if (c == '+') {
                min = 1;
            } else if (c == '?') {
                max = 1;
            } else if (c == '{') {
                skip_space(p, nested);
                if (parse_count(p, &min)) return -1;
                skip_space(p, nested);
                if (p->at < p->len && p->src[p->at] == '}') {
                    max = min;
                } else if (p->at < p->len && p->src[p->at] == ',') {
                    p->at++;
                    skip_space(p, nested);
                    if (p->at < p->len && p->src[p->at] >= '0' && p->src[p->at] <= '9') {
                        if (parse_count(p, &max)) return -1;
                        skip_space(p, nested);
                    }
                    if (p->at >= p->len || p->src[p->at] != '}') return gbnf_error(p, p->at, "expected '}'");
                } else {
                    return gbnf_error(p, p->at, "expected ',' or '}'");
                }
                p->at++;
                if (max < min)
                    return gbnf_error(p, start, "repetition {%u,%u} has its minimum above its maximum", min, max);
            }
            if (repeat(p, r, last, min, max)) return -1;
        } else if (c == '<' || c == '!') {
            return gbnf_error(p, start, "token references (<...>) are not supported");
        } else {
            break;
        }
        skip_space(p, nested);
    }
    return p->failed ? -1 : 0;
}

static int parse_alternates(gparser *p, uint32_t r, bool nested) {
    if (parse_sequence(p, r, nested)) return -1;
    while (p->at < p->len && p->src[p->at] == '|') {
        if (push(p, r, PE_ALT, 0)) return -1;
        p->at++;
        skip_space(p, true);
        if (parse_sequence(p, r, nested)) return -1;
    }
    return push(p, r, PE_END, 0);
}

static int parse_rule(gparser *p) {
    size_t name_at = p->at;
    while (p->at < p->len && is_name_char(p->src[p->at])) p->at++;
    if (p->at == name_at) return gbnf_error(p, name_at, "expected a rule name");
    size_t name_len = p->at - name_at;
    int64_t id = rule_by_name(p, name_at, name_len);
    if (id < 0) return -1;
    skip_space(p, false);
    if (p->len - p->at < 3 || memcmp(p->src + p->at, "::=", 3) != 0)
        return gbnf_error(p, p->at, "expected '::=' after the rule name");
    if (p->rules[id].def_at != SIZE_MAX) {
        int line, col;
        line_col(p->src, p->rules[id].def_at, &line, &col);
        return gbnf_error(p, name_at, "rule '%.*s' is defined twice (first at line %d, column %d)", (int)name_len,
                          p->src + name_at, line, col);
    }
    p->rules[id].def_at = name_at;
    p->at += 3;
    skip_space(p, true);
    if (parse_alternates(p, (uint32_t)id, false)) return -1;
    if (p->at < p->len && p->src[p->at] != '\n' && p->src[p->at] != '\r') {
        unsigned char c = (unsigned char)p->src[p->at];
        if (c == ')') return gbnf_error(p, p->at, "')' without a matching '('");
        if (c >= 0x20 && c < 0x7f) return gbnf_error(p, p->at, "unexpected '%c'", c);
        return gbnf_error(p, p->at, "unexpected byte 0x%02x", c);
    }
    skip_space(p, true);
    return 0;
}

int64_t gbnf_parse(gparser *p, const char *gbnf, size_t len, fkv_error *err) {
    *p = (gparser){.src = gbnf ? gbnf : "", .len = gbnf ? len : 0, .err = err, .any_class = UINT32_MAX};
    skip_space(p, true);
    while (p->at < p->len && !p->failed)
        if (parse_rule(p)) break;
    if (p->failed) return -1;
    /* The first reference (in the text) to a rule never defined. */
    size_t undefined = SIZE_MAX;
    for (size_t r = 0; r < p->n_rules; r++)
        if (p->rules[r].name_len && p->rules[r].def_at == SIZE_MAX && p->rules[r].ref_at < undefined)
            undefined = p->rules[r].ref_at;
    if (undefined != SIZE_MAX) {
        size_t n = 0;
        while (undefined + n < p->len && is_name_char(p->src[undefined + n])) n++;
        return gbnf_error(p, undefined, "undefined rule '%.*s'", (int)n, p->src + undefined);
    }
    size_t root_slot = p->names_cap ? name_slot(p, "root", 4) : 0;
    int64_t root = p->names_cap && p->names[root_slot] ? (int64_t)p->names[root_slot] - 1 : -1;
    if (root < 0) return gbnf_error(p, SIZE_MAX, "no rule named 'root' (the start rule)");
    return root;
}

void gbnf_parser_free(gparser *p) {
    for (size_t r = 0; r < p->n_rules; r++) free(p->rules[r].el);
    free(p->rules);
    free(p->chains);
    free(p->nullable);
    free(p->names);
    free(p->ranges);
    free(p->classes);
}
