/* grammar.c — GBNF compiled to byte-level rules; parse stacks as a lazily built DFA; masks by a vocabulary trie.
 *
 * Three stages, in data-flow order:
 * 1. The parser reads GBNF into rules of symbolic elements (code points, character classes, rule references),
 *    expanding repetitions the way llama.cpp does (S{m,n} = m copies of S, then a chain of n-m optional rules).
 * 2. Lowering turns every code point into its UTF-8 bytes and every character class into a rule whose alternatives
 *    are byte-range sequences (a class of ASCII only stays one terminal); terminals are sets of bytes, and bytes that
 *    every terminal treats alike share a class, so a DFA state's transitions are a row of n_cls entries.
 * 3. At run time a parse stack is a chain of frames (an element position and the frame below), hash-consed so that
 *    equal stacks are equal ids; a set of stacks is interned as a DFA state, and each state's transition on a byte
 *    class is computed once. A stack's top is always a terminal or the empty stack (0): after a byte is matched,
 *    the continuation is expanded through rule references until every stack tops a terminal again. Masks walk the
 *    vocabulary's trie through those states (walk_trie), skipping whole subtrees that cannot fail
 *    (subtree_allowed) and folding counts above the horizon into one state (canonical).
 *
 * A counted repetition's copies past REPEAT_INLINE are a chain of rules, each "the item, then the next level", so a
 * count is a position in a rule: canonical() can lower it, and no repetition copies its item more than once per
 * count (nested counts do not multiply).
 */
#include "constrain/grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "base/err.h"

/* ---- helpers ---- */

/* Makes room for `need` items of `size` bytes in *p (capacity *cap, doubled as needed, never past `max`). */
static int grow(void *p, size_t *cap, size_t need, size_t size, size_t max) {
    if (need <= *cap) return 0;
    if (need > max) return -1;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    if (n > max) n = max;
    void *q = realloc(*(void **)p, n * size);
    if (!q) return -1;
    *(void **)p = q;
    *cap = n;
    return 0;
}

static uint32_t mix32(uint32_t a, uint32_t b) {
    uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca77u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

/* The UTF-8 encoding of code point cp (< 0x110000) into out; returns its length. */
static int utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
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

/* ---- the compiled grammar ---- */

/* An element: kind in the top 2 bits, value (a rule or terminal id) below. An alternative ends with ALT (another
 * follows) or END (the rule's last). */
enum { GE_END = 0, GE_ALT = 1, GE_REF = 2, GE_BYTES = 3 };
#define GE_KIND(e) ((e) >> 30)
#define GE_VALUE(e) ((e) & 0x3fffffffu)
#define GE_MAKE(k, v) ((uint32_t)(k) << 30 | (uint32_t)(v))
#define GE_IS_END(e) (GE_KIND(e) <= GE_ALT)

typedef struct {
    uint64_t w[4];
} byteset;

static bool byteset_has(const byteset *s, uint8_t b) { return s->w[b >> 6] >> (b & 63) & 1; }
static void byteset_add_range(byteset *s, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++) s->w[b >> 6] |= 1ull << (b & 63);
}

/* A chain's levels 2 .. levels + 1 as positions: level k's rule occupies [lo + (k - 2) * stride, + stride), all alike
 * (level 1 has no reference to a lower level, so it differs). */
typedef struct {
    uint32_t lo, stride, levels;
} gchain;

struct grammar {
    gchain *chains; /* sorted by position; only chains of an item that cannot be empty */
    uint32_t n_chains;
    uint32_t *elems; /* [0] = REF root, [1] = END: the start; then every rule's alternatives */
    uint32_t n_elems;
    uint32_t *alt_off; /* [n_rules + 1]: rule r's alternatives start at alts[alt_off[r] .. alt_off[r + 1]) */
    uint32_t *alts;
    uint32_t n_rules;
    byteset *terms;
    uint32_t n_terms;
    uint8_t cls[256];     /* byte -> its class */
    uint8_t cls_rep[256]; /* class -> one byte of it */
    uint32_t n_cls;
};

void grammar_free(grammar *g) {
    if (!g) return;
    free(g->chains);
    free(g->elems);
    free(g->alt_off);
    free(g->alts);
    free(g->terms);
    free(g);
}

/* ---- stage 1: the parser ---- */

enum { PE_END, PE_ALT, PE_REF, PE_CHAR, PE_CLASS };

typedef struct {
    uint32_t kind, value; /* PE_CHAR: a code point; PE_CLASS: a class id; PE_REF: a rule id */
} pelem;

typedef struct {
    pelem *el;
    size_t n, cap;
    uint32_t origin;        /* the user rule it was written in (itself for a user rule) */
    size_t name_at, name_len; /* a user rule's name in the text (name_len 0: synthesized) */
    size_t def_at, ref_at;  /* where it is defined and first referenced; SIZE_MAX: not (yet) */
} prule;

typedef struct {
    uint32_t lo, hi;
} cprange;

typedef struct {
    uint32_t off, n; /* ranges[off .. off + n) */
    bool neg;
} pclass;

/* A chain of rules L_1 .. L_levels made by a counted repetition: L_k is "item, then L_(k-1)" (L_1: the item alone),
 * each also empty when the repetition is optional. L_k is rule first + k - 1. */
typedef struct {
    uint32_t first, levels;
} pchain;

typedef struct {
    const char *src;
    size_t len, at;
    fkv_error *err;
    bool failed;
    pchain *chains;
    size_t n_chains, cap_chains;
    uint8_t *nullable; /* per rule, once the text is read */
    prule *rules;
    size_t n_rules, cap_rules;
    uint32_t *names; /* open addressing: user rule id + 1, 0 empty */
    size_t names_cap, n_names;
    cprange *ranges;
    size_t n_ranges, cap_ranges;
    pclass *classes;
    size_t n_classes, cap_classes;
    uint32_t any_class; /* `.`, made on first use (UINT32_MAX: not yet) */
    size_t n_elems;     /* over all rules, against GRAMMAR_MAX_ELEMS */
    int depth;          /* parentheses */
} gparser;

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

/* Records the first error; at == SIZE_MAX: the grammar as a whole. Returns -1. */
__attribute__((format(printf, 3, 4))) static int perr(gparser *p, size_t at, const char *fmt, ...) {
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

static int oom(gparser *p) {
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
            return perr(p, p->at, "grammar too large: more than %u rules", GRAMMAR_MAX_ELEMS);
        return oom(p);
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
        if (!t) return oom(p);
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
        return perr(p, p->at, "grammar too large: more than %u elements after expanding repetitions",
                    GRAMMAR_MAX_ELEMS);
    prule *pr = &p->rules[r];
    if (grow(&pr->el, &pr->cap, pr->n + 1, sizeof *pr->el, SIZE_MAX)) return oom(p);
    pr->el[pr->n++] = (pelem){kind, value};
    return 0;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class at p->at (an escape or a UTF-8 character) into *cp. */
static int parse_char(gparser *p, uint32_t *cp) {
    size_t at = p->at;
    const char *s = p->src;
    if (s[at] != '\\') {
        int n = utf8_decode((const uint8_t *)s + at, p->len - at, cp);
        if (!n) return perr(p, at, "invalid UTF-8");
        p->at += (size_t)n;
        return 0;
    }
    if (at + 1 >= p->len) return perr(p, at, "unterminated escape");
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
            return perr(p, at, "unknown escape '\\%c'", s[at + 1]);
        return perr(p, at, "unknown escape");
    }
    p->at += 2;
    if (!digits) return 0;
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = p->at < p->len ? hex_value(s[p->at]) : -1;
        if (h < 0) return perr(p, at, "expected %d hex digits after '\\%c'", digits, s[at + 1]);
        v = v << 4 | (uint32_t)h;
        p->at++;
    }
    if (v > 0x10ffff) return perr(p, at, "code point U+%X is past U+10FFFF", v);
    *cp = v;
    return 0;
}

static int add_range(gparser *p, uint32_t lo, uint32_t hi) {
    if (grow(&p->ranges, &p->cap_ranges, p->n_ranges + 1, sizeof *p->ranges, SIZE_MAX)) return oom(p);
    p->ranges[p->n_ranges++] = (cprange){lo, hi};
    return 0;
}

static int64_t class_new(gparser *p, uint32_t off, bool neg) {
    if (grow(&p->classes, &p->cap_classes, p->n_classes + 1, sizeof *p->classes, GRAMMAR_MAX_ELEMS)) return oom(p);
    p->classes[p->n_classes] = (pclass){off, (uint32_t)(p->n_ranges - off), neg};
    return (int64_t)p->n_classes++;
}

static int parse_count(gparser *p, uint32_t *v) {
    size_t at = p->at;
    uint64_t n = 0;
    while (p->at < p->len && p->src[p->at] >= '0' && p->src[p->at] <= '9') {
        n = n * 10 + (uint64_t)(p->src[p->at] - '0');
        if (n > GRAMMAR_MAX_REPEAT)
            return perr(p, at, "repetition count is larger than %d (GRAMMAR_MAX_REPEAT)", GRAMMAR_MAX_REPEAT);
        p->at++;
    }
    if (p->at == at) return perr(p, at, "expected a repetition count");
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
    if (grow(&p->chains, &p->cap_chains, p->n_chains + 1, sizeof *p->chains, SIZE_MAX)) return oom(p);
    p->chains[p->n_chains++] = (pchain){(uint32_t)first, levels};
    return prev;
}

/* Rewrites the item rules[r].el[last ..] as item{min,max} (max REPEAT_ANY: no bound): the required copies (written
 * out, or a chain), then the optional ones (R ::= item R | "" without a bound, else a chain). */
static int repeat(gparser *p, uint32_t r, size_t last, uint32_t min, uint32_t max) {
    size_t n = p->rules[r].n - last;
    pelem *item = malloc(n * sizeof *item);
    if (!item) return oom(p);
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
                if (p->at >= p->len) return perr(p, start, "unterminated literal");
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
                if (p->at >= p->len) return perr(p, start, "unterminated character class");
                if (p->src[p->at] == ']') break;
                size_t char_at = p->at;
                uint32_t lo, hi;
                if (parse_char(p, &lo)) return -1;
                hi = lo;
                if (p->at + 1 < p->len && p->src[p->at] == '-' && p->src[p->at + 1] != ']') {
                    p->at++;
                    if (parse_char(p, &hi)) return -1;
                    if (hi < lo) return perr(p, char_at, "character range U+%04X-U+%04X is reversed", lo, hi);
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
                return perr(p, start, "parentheses nested deeper than %d", GRAMMAR_MAX_NESTING);
            p->at++;
            skip_space(p, true);
            int64_t sub = rule_new(p, p->rules[r].origin);
            if (sub < 0 || parse_alternates(p, (uint32_t)sub, true)) return -1;
            if (p->at >= p->len || p->src[p->at] != ')') return perr(p, start, "'(' without a matching ')'");
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
            if (last == SIZE_MAX || last == p->rules[r].n) return perr(p, start, "'%c' has nothing to repeat", c);
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
                    if (p->at >= p->len || p->src[p->at] != '}') return perr(p, p->at, "expected '}'");
                } else {
                    return perr(p, p->at, "expected ',' or '}'");
                }
                p->at++;
                if (max < min) return perr(p, start, "repetition {%u,%u} has its minimum above its maximum", min, max);
            }
            if (repeat(p, r, last, min, max)) return -1;
        } else if (c == '<' || c == '!') {
            return perr(p, start, "token references (<...>) are not supported");
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
    if (p->at == name_at) return perr(p, name_at, "expected a rule name");
    size_t name_len = p->at - name_at;
    int64_t id = rule_by_name(p, name_at, name_len);
    if (id < 0) return -1;
    skip_space(p, false);
    if (p->len - p->at < 3 || memcmp(p->src + p->at, "::=", 3) != 0)
        return perr(p, p->at, "expected '::=' after the rule name");
    if (p->rules[id].def_at != SIZE_MAX) {
        int line, col;
        line_col(p->src, p->rules[id].def_at, &line, &col);
        return perr(p, name_at, "rule '%.*s' is defined twice (first at line %d, column %d)", (int)name_len,
                    p->src + name_at, line, col);
    }
    p->rules[id].def_at = name_at;
    p->at += 3;
    skip_space(p, true);
    if (parse_alternates(p, (uint32_t)id, false)) return -1;
    if (p->at < p->len && p->src[p->at] != '\n' && p->src[p->at] != '\r') {
        unsigned char c = (unsigned char)p->src[p->at];
        if (c == ')') return perr(p, p->at, "')' without a matching '('");
        if (c >= 0x20 && c < 0x7f) return perr(p, p->at, "unexpected '%c'", c);
        return perr(p, p->at, "unexpected byte 0x%02x", c);
    }
    skip_space(p, true);
    return 0;
}

/* ---- left recursion ---- */

/* A rule that can begin with itself (directly, through rules that can be empty, or through a repetition of
 * something that can be empty) would expand forever: refused, as llama.cpp does. */
static int check_left_recursion(gparser *p) {
    size_t n = p->n_rules;
    /* Nullable rules by a worklist: an alternative is nullable once all its references are. */
    uint8_t *nullable = calloc(n ? n : 1, 1), *color = NULL;
    uint32_t *pending = NULL, *occ_off = calloc(n + 1, sizeof *occ_off), *occ = NULL, *work = NULL;
    uint32_t *alt_rule = NULL, *edge_off = calloc(n + 1, sizeof *edge_off), *edges = NULL;
    size_t n_alts = 0, n_refs = 0;
    int rc = -1;
    if (!nullable || !occ_off || !edge_off) goto out;
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < p->rules[r].n; i++) {
            const pelem *e = &p->rules[r].el[i];
            if (e->kind == PE_ALT || e->kind == PE_END) n_alts++;
            if (e->kind == PE_REF) {
                n_refs++;
                occ_off[e->value + 1]++;
            }
        }
    pending = calloc(n_alts + 1, sizeof *pending);
    alt_rule = calloc(n_alts + 1, sizeof *alt_rule);
    occ = calloc(n_refs + 1, sizeof *occ);
    work = calloc(n + 1, sizeof *work);
    edges = calloc(n_refs + 1, sizeof *edges);
    if (!pending || !alt_rule || !occ || !work || !edges) goto out;
    for (size_t r = 0; r < n; r++) occ_off[r + 1] += occ_off[r];
    {
        uint32_t *fill = calloc(n + 1, sizeof *fill);
        if (!fill) goto out;
        size_t a = 0, n_work = 0;
        for (size_t r = 0; r < n; r++) {
            bool terminal = false;
            for (size_t i = 0; i < p->rules[r].n; i++) {
                const pelem *e = &p->rules[r].el[i];
                if (e->kind == PE_REF) {
                    pending[a]++;
                    occ[occ_off[e->value] + fill[e->value]++] = (uint32_t)a;
                } else if (e->kind == PE_CHAR || e->kind == PE_CLASS) {
                    terminal = true;
                } else {
                    alt_rule[a] = (uint32_t)r;
                    if (terminal) pending[a] = UINT32_MAX;
                    else if (pending[a] == 0 && !nullable[r]) nullable[r] = 1, work[n_work++] = (uint32_t)r;
                    a++;
                    terminal = false;
                }
            }
        }
        free(fill);
        while (n_work) {
            uint32_t s = work[--n_work];
            for (uint32_t k = occ_off[s]; k < occ_off[s + 1]; k++) {
                uint32_t alt = occ[k];
                if (pending[alt] == UINT32_MAX || --pending[alt]) continue;
                uint32_t r = alt_rule[alt];
                if (!nullable[r]) nullable[r] = 1, work[n_work++] = r;
            }
        }
    }
    /* Left edges r -> s: s can come first in r. */
    for (size_t r = 0, m = 0; r < n; r++) {
        edge_off[r] = (uint32_t)m;
        bool left = true;
        for (size_t i = 0; i < p->rules[r].n; i++) {
            const pelem *e = &p->rules[r].el[i];
            if (e->kind == PE_REF) {
                if (left) edges[m++] = e->value;
                if (!nullable[e->value]) left = false;
            } else if (e->kind == PE_CHAR || e->kind == PE_CLASS) {
                left = false;
            } else {
                left = true;
            }
        }
        edge_off[r + 1] = (uint32_t)m;
    }
    /* Depth-first search for a cycle: color 1 on the path, 2 done; work[] is the path, pending[] each one's next
     * edge (both have room: the path holds distinct rules). */
    color = calloc(n ? n : 1, 1);
    if (!color) goto out;
    for (size_t root = 0; root < n; root++) {
        if (color[root]) continue;
        size_t depth = 0;
        work[depth] = (uint32_t)root;
        pending[depth] = edge_off[root];
        color[root] = 1;
        while (1) {
            uint32_t r = work[depth];
            if (pending[depth] == edge_off[r + 1]) {
                color[r] = 2;
                if (depth == 0) break;
                depth--;
                continue;
            }
            uint32_t s = edges[pending[depth]++];
            if (color[s] == 1) {
                const prule *u = &p->rules[p->rules[s].origin];
                perr(p, u->def_at, "left recursion: rule '%.*s' can begin with itself (directly, through rules "
                                   "that can be empty, or by repeating something that can be empty)",
                     (int)u->name_len, p->src + u->name_at);
                goto out;
            }
            if (color[s] == 0) {
                color[s] = 1;
                depth++;
                work[depth] = s;
                pending[depth] = edge_off[s];
            }
        }
    }
    rc = 0;
out:
    if (rc && !p->failed) oom(p);
    free(color);
    p->nullable = nullable; /* lowering asks whether a chain's item can be empty */
    free(pending);
    free(occ_off);
    free(occ);
    free(work);
    free(alt_rule);
    free(edge_off);
    free(edges);
    return rc;
}

/* ---- stage 2: lowering to bytes ---- */

typedef struct {
    gparser *p;
    grammar *g;
    size_t cap_elems, cap_terms;
    uint32_t *term_table; /* open addressing: term id + 1 */
    size_t term_table_cap;
    cprange *norm; /* a class normalized: sorted, merged, negation applied, surrogates removed */
    size_t n_norm, cap_norm;
    /* class rules made so far: their normalized ranges in pool[off .. off + n), and a table by content */
    cprange *pool;
    size_t n_pool, cap_pool;
    struct {
        uint32_t off, n;
    } *crules;
    size_t n_crules, cap_crules;
    uint32_t *crule_table; /* class rule index + 1 */
    size_t crule_table_cap;
    uint32_t n_prules;
} lowerer;

static int emit(lowerer *L, uint32_t e) {
    if (L->g->n_elems + 1 > GRAMMAR_MAX_ELEMS)
        return perr(L->p, SIZE_MAX, "grammar too large: more than %u elements once compiled to bytes",
                    GRAMMAR_MAX_ELEMS);
    if (grow(&L->g->elems, &L->cap_elems, L->g->n_elems + 1, sizeof *L->g->elems, SIZE_MAX)) return oom(L->p);
    L->g->elems[L->g->n_elems++] = e;
    return 0;
}

static int64_t term_id(lowerer *L, const byteset *s) {
    grammar *g = L->g;
    if ((g->n_terms + 1) * 2 > L->term_table_cap) {
        size_t cap = L->term_table_cap ? L->term_table_cap * 2 : 256;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) return oom(L->p);
        for (uint32_t i = 0; i < g->n_terms; i++) {
            size_t h = XXH3_64bits(&g->terms[i], sizeof(byteset)) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = i + 1;
        }
        free(L->term_table);
        L->term_table = t;
        L->term_table_cap = cap;
    }
    size_t h = XXH3_64bits(s, sizeof *s) & (L->term_table_cap - 1);
    for (; L->term_table[h]; h = (h + 1) & (L->term_table_cap - 1))
        if (memcmp(&g->terms[L->term_table[h] - 1], s, sizeof *s) == 0) return L->term_table[h] - 1;
    if (grow(&g->terms, &L->cap_terms, g->n_terms + 1, sizeof *g->terms, SIZE_MAX)) return oom(L->p);
    g->terms[g->n_terms] = *s;
    L->term_table[h] = g->n_terms + 1;
    return g->n_terms++;
}

static int emit_bytes(lowerer *L, const byteset *s) {
    int64_t t = term_id(L, s);
    return t < 0 ? -1 : emit(L, GE_MAKE(GE_BYTES, t));
}

static int emit_byte_range(lowerer *L, unsigned lo, unsigned hi) {
    byteset s = {{0}};
    byteset_add_range(&s, lo, hi);
    return emit_bytes(L, &s);
}

/* The bytes of code point cp, or a terminal that matches nothing for one UTF-8 cannot encode (a surrogate). */
static int emit_code_point(lowerer *L, uint32_t cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) {
        byteset none = {{0}};
        return emit_bytes(L, &none);
    }
    uint8_t b[4];
    int n = utf8_encode(cp, b);
    for (int i = 0; i < n; i++)
        if (emit_byte_range(L, b[i], b[i])) return -1;
    return 0;
}

static int cprange_cmp(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int norm_add(lowerer *L, uint32_t lo, uint32_t hi) {
    if (grow(&L->norm, &L->cap_norm, L->n_norm + 1, sizeof *L->norm, SIZE_MAX)) return oom(L->p);
    L->norm[L->n_norm++] = (cprange){lo, hi};
    return 0;
}

/* L->norm = the code points of class k: sorted, disjoint, not adjacent, without surrogates. */
static int normalize(lowerer *L, const pclass *k) {
    gparser *p = L->p;
    cprange *tmp = malloc((k->n ? k->n : 1) * sizeof *tmp);
    if (!tmp) return oom(p);
    memcpy(tmp, p->ranges + k->off, k->n * sizeof *tmp);
    qsort(tmp, k->n, sizeof *tmp, cprange_cmp);
    size_t m = 0;
    for (size_t i = 0; i < k->n; i++) {
        if (m && tmp[i].lo <= tmp[m - 1].hi + 1) {
            if (tmp[i].hi > tmp[m - 1].hi) tmp[m - 1].hi = tmp[i].hi;
        } else {
            tmp[m++] = tmp[i];
        }
    }
    L->n_norm = 0;
    int rc = 0;
    /* The set (complemented when negated), cut around the surrogates. */
    uint32_t next = 0; /* complement: first code point not yet covered */
    for (size_t i = 0; i <= m && !rc; i++) {
        uint32_t lo, hi;
        if (k->neg) {
            if (i < m) {
                if (tmp[i].lo == 0) {
                    next = tmp[i].hi + 1;
                    continue;
                }
                lo = next, hi = tmp[i].lo - 1, next = tmp[i].hi + 1;
            } else {
                if (next > 0x10ffff) break;
                lo = next, hi = 0x10ffff;
            }
            if (lo > hi) continue;
        } else {
            if (i == m) break;
            lo = tmp[i].lo, hi = tmp[i].hi;
        }
        if (lo < 0xd800 && hi >= 0xd800) {
            rc = norm_add(L, lo, 0xd7ff);
            if (hi > 0xdfff && !rc) rc = norm_add(L, 0xe000, hi);
        } else if (lo >= 0xd800 && lo <= 0xdfff) {
            if (hi > 0xdfff) rc = norm_add(L, 0xe000, hi);
        } else {
            rc = norm_add(L, lo, hi);
        }
    }
    free(tmp);
    return rc;
}

/* The byte-range sequences of code points [lo, hi] (one encoded length, no surrogates), as alternatives. */
static int emit_utf8_ranges(lowerer *L, uint32_t lo, uint32_t hi, bool *first) {
    uint8_t a[4], b[4];
    int n = utf8_encode(lo, a);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0)
                return emit_utf8_ranges(L, lo, lo | m, first) || emit_utf8_ranges(L, (lo | m) + 1, hi, first) ? -1 : 0;
            if ((hi & m) != m)
                return emit_utf8_ranges(L, lo, (hi & ~m) - 1, first) || emit_utf8_ranges(L, hi & ~m, hi, first) ? -1
                                                                                                                  : 0;
        }
    }
    utf8_encode(hi, b);
    if (!*first && emit(L, GE_MAKE(GE_ALT, 0))) return -1;
    *first = false;
    for (int i = 0; i < n; i++)
        if (emit_byte_range(L, a[i], b[i])) return -1;
    return 0;
}

/* The body of a class rule: its ASCII part as one terminal, then each multi-byte sequence. */
static int emit_class_body(lowerer *L, const cprange *r, size_t n) {
    static const uint32_t bounds[] = {0x7f, 0x7ff, 0xffff, 0x10ffff};
    bool first = true;
    byteset ascii = {{0}};
    bool has_ascii = false;
    for (size_t i = 0; i < n && r[i].lo < 0x80; i++) {
        byteset_add_range(&ascii, r[i].lo, r[i].hi < 0x7f ? r[i].hi : 0x7f);
        has_ascii = true;
    }
    if (has_ascii) {
        if (emit_bytes(L, &ascii)) return -1;
        first = false;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t lo = r[i].lo < 0x80 ? 0x80 : r[i].lo;
        for (int k = 1; k < 4 && lo <= r[i].hi; k++) {
            if (lo > bounds[k]) continue;
            uint32_t hi = r[i].hi < bounds[k] ? r[i].hi : bounds[k];
            if (emit_utf8_ranges(L, lo, hi, &first)) return -1;
            lo = hi + 1;
        }
    }
    return emit(L, GE_MAKE(GE_END, 0));
}

/* The id of the rule that matches the normalized class in L->norm (made once per distinct class). */
static int64_t class_rule(lowerer *L) {
    size_t bytes = L->n_norm * sizeof *L->norm;
    if ((L->n_crules + 1) * 2 > L->crule_table_cap) {
        size_t cap = L->crule_table_cap ? L->crule_table_cap * 2 : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) return oom(L->p);
        for (size_t i = 0; i < L->n_crules; i++) {
            size_t h = XXH3_64bits(L->pool + L->crules[i].off, L->crules[i].n * sizeof *L->pool) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = (uint32_t)i + 1;
        }
        free(L->crule_table);
        L->crule_table = t;
        L->crule_table_cap = cap;
    }
    size_t h = XXH3_64bits(L->norm, bytes) & (L->crule_table_cap - 1);
    for (; L->crule_table[h]; h = (h + 1) & (L->crule_table_cap - 1)) {
        size_t i = L->crule_table[h] - 1;
        if (L->crules[i].n == L->n_norm && memcmp(L->pool + L->crules[i].off, L->norm, bytes) == 0)
            return L->n_prules + (int64_t)i;
    }
    if (L->n_prules + L->n_crules + 1 > GRAMMAR_MAX_ELEMS) return perr(L->p, SIZE_MAX, "grammar too large");
    if (grow(&L->pool, &L->cap_pool, L->n_pool + L->n_norm, sizeof *L->pool, SIZE_MAX) ||
        grow(&L->crules, &L->cap_crules, L->n_crules + 1, sizeof *L->crules, SIZE_MAX))
        return oom(L->p);
    memcpy(L->pool + L->n_pool, L->norm, bytes);
    L->crules[L->n_crules].off = (uint32_t)L->n_pool;
    L->crules[L->n_crules].n = (uint32_t)L->n_norm;
    L->n_pool += L->n_norm;
    L->crule_table[h] = (uint32_t)++L->n_crules;
    return L->n_prules + (int64_t)L->n_crules - 1;
}

static int lower_class(lowerer *L, const pclass *k) {
    if (normalize(L, k)) return -1;
    if (L->n_norm == 0) {
        byteset none = {{0}};
        return emit_bytes(L, &none);
    }
    if (L->norm[L->n_norm - 1].hi < 0x80) {
        byteset s = {{0}};
        for (size_t i = 0; i < L->n_norm; i++) byteset_add_range(&s, L->norm[i].lo, L->norm[i].hi);
        return emit_bytes(L, &s);
    }
    if (L->n_norm == 1 && L->norm[0].lo == L->norm[0].hi) return emit_code_point(L, L->norm[0].lo);
    int64_t r = class_rule(L);
    return r < 0 ? -1 : emit(L, GE_MAKE(GE_REF, r));
}

/* Byte classes: bytes in exactly the same terminals are one class (refined terminal by terminal). */
static void byte_classes(grammar *g) {
    memset(g->cls, 0, sizeof g->cls);
    uint32_t n = 1;
    for (uint32_t t = 0; t < g->n_terms; t++) {
        int16_t map[512];
        memset(map, -1, sizeof map);
        uint32_t m = 0;
        uint8_t next[256];
        for (int b = 0; b < 256; b++) {
            int key = g->cls[b] * 2 + byteset_has(&g->terms[t], (uint8_t)b);
            if (map[key] < 0) map[key] = (int16_t)m++;
            next[b] = (uint8_t)map[key];
        }
        memcpy(g->cls, next, sizeof next);
        n = m;
    }
    g->n_cls = n;
    for (int b = 255; b >= 0; b--) g->cls_rep[g->cls[b]] = (uint8_t)b;
}

static grammar *lower(gparser *p, uint32_t root) {
    grammar *g = calloc(1, sizeof *g);
    lowerer L = {.p = p, .g = g, .n_prules = (uint32_t)p->n_rules};
    uint32_t *starts = NULL;
    size_t cap_starts = 0, cap_chains = 0;
    if (!g) goto fail_oom;
    if (emit(&L, GE_MAKE(GE_REF, root)) || emit(&L, GE_MAKE(GE_END, 0))) goto fail;
    if (grow(&starts, &cap_starts, p->n_rules, sizeof *starts, SIZE_MAX)) goto fail_oom;
    for (size_t r = 0; r < p->n_rules; r++) {
        starts[r] = g->n_elems;
        for (size_t i = 0; i < p->rules[r].n; i++) {
            const pelem *e = &p->rules[r].el[i];
            int rc;
            switch (e->kind) {
            case PE_END: rc = emit(&L, GE_MAKE(GE_END, 0)); break;
            case PE_ALT: rc = emit(&L, GE_MAKE(GE_ALT, 0)); break;
            case PE_REF: rc = emit(&L, GE_MAKE(GE_REF, e->value)); break;
            case PE_CHAR: rc = emit_code_point(&L, e->value); break;
            default: rc = lower_class(&L, &p->classes[e->value]); break;
            }
            if (rc) goto fail;
        }
    }
    g->n_rules = (uint32_t)(p->n_rules + L.n_crules);
    if (grow(&starts, &cap_starts, g->n_rules, sizeof *starts, SIZE_MAX)) goto fail_oom;
    for (size_t i = 0; i < L.n_crules; i++) {
        starts[p->n_rules + i] = g->n_elems;
        if (emit_class_body(&L, L.pool + L.crules[i].off, L.crules[i].n)) goto fail;
    }
    /* Chains whose item cannot be empty (each level then takes at least one byte), for canonical(). */
    for (size_t i = 0; i < p->n_chains; i++) {
        const pchain *ch = &p->chains[i];
        if (ch->levels < 3) continue;
        bool empty = true;
        for (size_t k = 0; k < p->rules[ch->first].n && empty; k++) {
            const pelem *e = &p->rules[ch->first].el[k];
            if (e->kind == PE_ALT || e->kind == PE_END) break;
            empty = e->kind == PE_REF && p->nullable[e->value];
        }
        uint32_t lo = starts[ch->first + 1], stride = starts[ch->first + 2] - lo;
        bool alike = !empty;
        for (uint32_t k = 2; k < ch->levels && alike; k++)
            alike = starts[ch->first + k] - starts[ch->first + k - 1] == stride;
        if (!alike) continue;
        if (grow(&g->chains, &cap_chains, g->n_chains + 1, sizeof *g->chains, SIZE_MAX)) goto fail_oom;
        g->chains[g->n_chains++] = (gchain){lo, stride, ch->levels - 1};
    }
    /* Each rule's alternatives. */
    size_t n_alts = 0;
    for (uint32_t i = 2; i < g->n_elems; i++) n_alts += GE_IS_END(g->elems[i]);
    g->alt_off = malloc((g->n_rules + 1) * sizeof *g->alt_off);
    g->alts = malloc((n_alts ? n_alts : 1) * sizeof *g->alts);
    if (!g->alt_off || !g->alts) goto fail_oom;
    size_t a = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        g->alt_off[r] = (uint32_t)a;
        uint32_t q = starts[r];
        g->alts[a++] = q;
        for (;; q++) {
            if (GE_KIND(g->elems[q]) == GE_END) break;
            if (GE_KIND(g->elems[q]) == GE_ALT) g->alts[a++] = q + 1;
        }
    }
    g->alt_off[g->n_rules] = (uint32_t)a;
    byte_classes(g);
    free(starts);
    free(L.term_table);
    free(L.norm);
    free(L.pool);
    free(L.crules);
    free(L.crule_table);
    return g;
fail_oom:
    oom(p);
fail:
    free(starts);
    free(L.term_table);
    free(L.norm);
    free(L.pool);
    free(L.crules);
    free(L.crule_table);
    grammar_free(g);
    return NULL;
}

grammar *grammar_parse(const char *gbnf, size_t len, fkv_error *err) {
    gparser p = {.src = gbnf ? gbnf : "", .len = gbnf ? len : 0, .err = err, .any_class = UINT32_MAX};
    grammar *g = NULL;
    skip_space(&p, true);
    while (p.at < p.len && !p.failed)
        if (parse_rule(&p)) break;
    if (p.failed) goto out;
    /* The first reference (in the text) to a rule never defined. */
    size_t undefined = SIZE_MAX;
    for (size_t r = 0; r < p.n_rules; r++)
        if (p.rules[r].name_len && p.rules[r].def_at == SIZE_MAX && p.rules[r].ref_at < undefined)
            undefined = p.rules[r].ref_at;
    if (undefined != SIZE_MAX) {
        size_t n = 0;
        while (undefined + n < p.len && is_name_char(p.src[undefined + n])) n++;
        perr(&p, undefined, "undefined rule '%.*s'", (int)n, p.src + undefined);
        goto out;
    }
    size_t root_slot = p.names_cap ? name_slot(&p, "root", 4) : 0;
    int64_t root = p.names_cap && p.names[root_slot] ? (int64_t)p.names[root_slot] - 1 : -1;
    if (root < 0) {
        perr(&p, SIZE_MAX, "no rule named 'root' (the start rule)");
        goto out;
    }
    if (check_left_recursion(&p)) goto out;
    g = lower(&p, (uint32_t)root);
out:
    for (size_t r = 0; r < p.n_rules; r++) free(p.rules[r].el);
    free(p.rules);
    free(p.chains);
    free(p.nullable);
    free(p.names);
    free(p.ranges);
    free(p.classes);
    return g;
}

/* ---- stage 3: parse stacks as a lazily built DFA ---- */

/* Capacities of one state's caches (the header's "about 20 MiB"). */
#define GS_MAX_FRAMES (1u << 18)
#define GS_MAX_STATES (1u << 15)
#define GS_MAX_IDS (1u << 19)
#define GS_MAX_TRANS (1u << 20)
#define GS_MAX_WORK (1u << 20)

#define GS_DEAD 1u             /* the empty set of stacks: nothing can follow */
#define GS_FULL UINT32_MAX     /* a cache is full: compact and retry */
#define GS_CUT (UINT32_MAX - 1) /* a frame past GRAMMAR_MAX_DEPTH: the parse is dropped */

/* What the walk and canonical() learn about a state, computed on first use. */
typedef struct {
    uint32_t hash;
    uint32_t canon;    /* canonical() at canon_level; 0: not computed */
    uint32_t next;     /* the successor most ASCII bytes lead to; those bytes are `plain` */
    uint32_t reach[2]; /* reach(): [0] over ASCII, [1] with every chain state's characters leading on too */
    uint64_t plain[2];
    uint8_t complete;  /* holds the empty stack: the output may end here */
    uint8_t known;     /* KNOWN_PLAIN, KNOWN_REACH << 0 or 1 (that reach is exact, not a lower bound) */
    uint8_t utf8;      /* 0: not known; 1: every valid multi-byte character leads to next, every partial one
                        * alive; 2: not */
} gsinfo;

enum { KNOWN_PLAIN = 1, KNOWN_REACH = 2 };
#define GS_TEXT_BYTES 32 /* plain bytes for a state to count as text (reach() follows only those) */
#define GS_FAR UINT32_MAX

typedef struct {
    uint8_t *mask;
    uint32_t state; /* 0: empty slot */
    bool partial;   /* tokens longer than the vocabulary's horizon were not computed */
    uint64_t used;
} gmask;

typedef struct {
    const grammar *g;
    /* Frames: frame f is element position f_pos[f] above frame f_parent[f] (< f); frame 0 is the empty stack. */
    uint32_t *f_pos, *f_parent, *f_mark;
    uint16_t *f_depth;
    size_t n_frames, cap_frames;
    uint32_t *f_table; /* open addressing: frame ids, 0 empty */
    size_t f_table_cap;
    /* DFA states: state k is the sorted stacks ids[s_off[k] .. s_off[k + 1]); 0 is unused (0 in trans means "not
     * computed yet"), 1 is the dead state. */
    uint32_t *s_off;
    gsinfo *info;
    uint32_t canon_level;
    uint32_t *pos_buf;    /* [GRAMMAR_MAX_DEPTH]: one stack's positions */
    size_t n_states, cap_states, max_states;
    uint32_t *s_table; /* open addressing: state ids, 0 empty */
    size_t s_table_cap;
    uint32_t *ids;
    size_t n_ids, cap_ids;
    uint32_t *trans; /* [state * n_cls + class] */
    size_t cap_trans;
    uint32_t cur, epoch;
    uint32_t *work, *out;
    size_t cap_work, cap_out;
    uint32_t path[GRAMMAR_MAX_TOKEN_BYTES + 1];
    uint8_t path_byte[GRAMMAR_MAX_TOKEN_BYTES + 1];
    gmask masks[GRAMMAR_MASK_SLOTS];
    const grammar_vocab *mask_gv;
    uint64_t *tbits; /* the walk's marks: bit t for token node_tok[t] (trie order: a subtree is a range) */
    uint64_t clock;
    grammar_stats stats;
} gcache;

struct grammar_state {
    gcache *c; /* everything is in the cache: the const accessors fill it */
};

static void next_epoch(gcache *c) {
    if (++c->epoch == 0) {
        memset(c->f_mark, 0, c->n_frames * sizeof *c->f_mark);
        c->epoch = 1;
    }
}

static void frame_table_insert(uint32_t *t, size_t cap, const gcache *c, uint32_t f) {
    size_t h = mix32(c->f_pos[f], c->f_parent[f]) & (cap - 1);
    while (t[h]) h = (h + 1) & (cap - 1);
    t[h] = f;
}

static int frame_table_rebuild(gcache *c, size_t cap) {
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (uint32_t f = 1; f < c->n_frames; f++) frame_table_insert(t, cap, c, f);
    free(c->f_table);
    c->f_table = t;
    c->f_table_cap = cap;
    return 0;
}

/* The frame of position pos above frame parent: found or made. GS_FULL, or GS_CUT past the depth bound. */
static uint32_t frame_push(gcache *c, uint32_t pos, uint32_t parent) {
    uint32_t depth = c->f_depth[parent] + 1u;
    if (depth > GRAMMAR_MAX_DEPTH) {
        c->stats.overflows++;
        return GS_CUT;
    }
    size_t h = mix32(pos, parent) & (c->f_table_cap - 1);
    for (; c->f_table[h]; h = (h + 1) & (c->f_table_cap - 1)) {
        uint32_t f = c->f_table[h];
        if (c->f_pos[f] == pos && c->f_parent[f] == parent) return f;
    }
    if (c->n_frames == c->cap_frames) {
        size_t cap = c->cap_frames, cap2 = cap, cap3 = cap, cap4 = cap;
        if (grow(&c->f_pos, &cap, c->n_frames + 1, sizeof *c->f_pos, GS_MAX_FRAMES) ||
            grow(&c->f_parent, &cap2, c->n_frames + 1, sizeof *c->f_parent, GS_MAX_FRAMES) ||
            grow(&c->f_mark, &cap3, c->n_frames + 1, sizeof *c->f_mark, GS_MAX_FRAMES) ||
            grow(&c->f_depth, &cap4, c->n_frames + 1, sizeof *c->f_depth, GS_MAX_FRAMES))
            return GS_FULL;
        c->cap_frames = cap;
    }
    uint32_t f = (uint32_t)c->n_frames++;
    c->f_pos[f] = pos;
    c->f_parent[f] = parent;
    c->f_mark[f] = 0;
    c->f_depth[f] = (uint16_t)depth;
    if (c->n_frames * 2 > c->f_table_cap) {
        if (frame_table_rebuild(c, c->f_table_cap * 2)) {
            c->n_frames--;
            return GS_FULL;
        }
    } else {
        c->f_table[h] = f;
    }
    return f;
}

static bool state_equal(const gcache *c, uint32_t k, const uint32_t *ids, size_t n) {
    return c->s_off[k + 1] - c->s_off[k] == n && memcmp(c->ids + c->s_off[k], ids, n * sizeof *ids) == 0;
}

static int state_table_rebuild(gcache *c, size_t cap) {
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (uint32_t k = 2; k < c->n_states; k++) {
        size_t h = c->info[k].hash & (cap - 1);
        while (t[h]) h = (h + 1) & (cap - 1);
        t[h] = k;
    }
    free(c->s_table);
    c->s_table = t;
    c->s_table_cap = cap;
    return 0;
}

/* The state of the sorted stacks ids[0..n): found or made (its transitions not computed). Or GS_FULL. */
static uint32_t state_intern(gcache *c, const uint32_t *ids, size_t n) {
    if (n == 0) return GS_DEAD;
    uint32_t hash = (uint32_t)XXH3_64bits(ids, n * sizeof *ids);
    size_t h = hash & (c->s_table_cap - 1);
    for (; c->s_table[h]; h = (h + 1) & (c->s_table_cap - 1)) {
        uint32_t k = c->s_table[h];
        if (c->info[k].hash == hash && state_equal(c, k, ids, n)) return k;
    }
    if (c->n_states == c->max_states) return GS_FULL;
    size_t n_cls = c->g->n_cls;
    if (c->n_states + 1 >= c->cap_states) {
        size_t cap = c->cap_states, cap2 = cap, need = c->n_states + 2;
        if (grow(&c->s_off, &cap, need, sizeof *c->s_off, c->max_states + 1) ||
            grow(&c->info, &cap2, need, sizeof *c->info, c->max_states + 1))
            return GS_FULL;
        c->cap_states = cap;
    }
    if (grow(&c->trans, &c->cap_trans, (c->n_states + 1) * n_cls, sizeof *c->trans, c->max_states * n_cls) ||
        grow(&c->ids, &c->cap_ids, c->n_ids + n, sizeof *c->ids, GS_MAX_IDS))
        return GS_FULL;
    uint32_t k = (uint32_t)c->n_states;
    memcpy(c->ids + c->n_ids, ids, n * sizeof *ids);
    c->s_off[k] = (uint32_t)c->n_ids;
    c->n_ids += n;
    c->s_off[k + 1] = (uint32_t)c->n_ids;
    c->info[k] = (gsinfo){.hash = hash, .complete = ids[0] == 0}; /* sorted: the empty stack (0) comes first */
    memset(c->trans + (size_t)k * n_cls, 0, n_cls * sizeof *c->trans);
    c->n_states++;
    c->stats.dfa_states++;
    if (c->n_states * 2 > c->s_table_cap) {
        if (state_table_rebuild(c, c->s_table_cap * 2)) {
            c->n_states--;
            c->n_ids -= n;
            return GS_FULL;
        }
    } else {
        c->s_table[h] = k;
    }
    return k;
}

static int u32_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int work_push(gcache *c, size_t *n, uint32_t f) {
    if (grow(&c->work, &c->cap_work, *n + 1, sizeof *c->work, GS_MAX_WORK)) return -1;
    c->work[(*n)++] = f;
    return 0;
}

/* Expands the n_work frames in c->work (this epoch) through rule references until each tops a terminal or is
 * empty, and interns the set: a state, GS_DEAD (nothing, or more than GRAMMAR_MAX_STACKS stacks), or GS_FULL. */
static uint32_t expand(gcache *c, size_t n_work) {
    const grammar *g = c->g;
    size_t n_out = 0;
    bool over = false;
    while (n_work && !over) {
        uint32_t f = c->work[--n_work];
        if (c->f_mark[f] == c->epoch) continue;
        c->f_mark[f] = c->epoch;
        if (f == 0 || GE_KIND(g->elems[c->f_pos[f]]) == GE_BYTES) {
            if (n_out == GRAMMAR_MAX_STACKS) {
                over = true;
                break;
            }
            if (grow(&c->out, &c->cap_out, n_out + 1, sizeof *c->out, GRAMMAR_MAX_STACKS)) return GS_FULL;
            c->out[n_out++] = f;
            continue;
        }
        uint32_t p = c->f_pos[f], r = GE_VALUE(g->elems[p]);
        uint32_t rest = c->f_parent[f];
        if (!GE_IS_END(g->elems[p + 1])) {
            rest = frame_push(c, p + 1, rest);
            if (rest == GS_FULL) return GS_FULL;
            if (rest == GS_CUT) continue;
        }
        for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++) {
            uint32_t q = g->alts[a];
            uint32_t nf = GE_IS_END(g->elems[q]) ? rest : frame_push(c, q, rest);
            if (nf == GS_FULL) return GS_FULL;
            if (nf == GS_CUT) continue;
            if (work_push(c, &n_work, nf)) {
                over = true;
                break;
            }
        }
    }
    if (over) {
        c->stats.overflows++;
        return GS_DEAD;
    }
    if (n_out < 16) {
        for (size_t i = 1; i < n_out; i++) {
            uint32_t v = c->out[i];
            size_t j = i;
            for (; j > 0 && c->out[j - 1] > v; j--) c->out[j] = c->out[j - 1];
            c->out[j] = v;
        }
    } else {
        qsort(c->out, n_out, sizeof *c->out, u32_cmp);
    }
    return state_intern(c, c->out, n_out);
}

/* State k's successor on byte class cl, computed and memoized; or GS_FULL. */
static uint32_t transition(gcache *c, uint32_t k, uint32_t cl) {
    const grammar *g = c->g;
    uint8_t b = g->cls_rep[cl];
    next_epoch(c);
    size_t n_work = 0;
    for (uint32_t i = c->s_off[k]; i < c->s_off[k + 1]; i++) {
        uint32_t s = c->ids[i];
        if (s == 0) continue;
        uint32_t p = c->f_pos[s];
        if (!byteset_has(&g->terms[GE_VALUE(g->elems[p])], b)) continue;
        uint32_t rest = c->f_parent[s];
        if (!GE_IS_END(g->elems[p + 1])) {
            rest = frame_push(c, p + 1, rest);
            if (rest == GS_FULL) return GS_FULL;
            if (rest == GS_CUT) continue;
        }
        if (work_push(c, &n_work, rest)) return GS_FULL;
    }
    uint32_t nx = n_work ? expand(c, n_work) : GS_DEAD;
    if (nx != GS_FULL) c->trans[(size_t)k * g->n_cls + cl] = nx;
    return nx;
}

static uint32_t step(gcache *c, uint32_t k, uint8_t byte) {
    uint32_t cl = c->g->cls[byte];
    uint32_t nx = c->trans[(size_t)k * c->g->n_cls + cl];
    return nx ? nx : transition(c, k, cl);
}

/* Drops every frame, state and transition the current state does not need, renumbering what stays. */
static void compact(gcache *c) {
    c->stats.compactions++;
    next_epoch(c);
    size_t n_cur = c->s_off[c->cur + 1] - c->s_off[c->cur];
    const uint32_t *cur = c->ids + c->s_off[c->cur];
    for (size_t i = 0; i < n_cur; i++)
        for (uint32_t f = cur[i]; f && c->f_mark[f] != c->epoch; f = c->f_parent[f]) c->f_mark[f] = c->epoch;
    /* Parents come before children, so one ascending pass renumbers; f_mark[f] becomes f's new id. */
    uint32_t n = 1;
    c->f_mark[0] = 0;
    for (uint32_t f = 1; f < c->n_frames; f++) {
        if (c->f_mark[f] != c->epoch) continue;
        c->f_pos[n] = c->f_pos[f];
        c->f_parent[n] = c->f_mark[c->f_parent[f]];
        c->f_depth[n] = c->f_depth[f];
        c->f_mark[f] = n++;
    }
    for (size_t i = 0; i < n_cur; i++) c->out[i] = cur[i] ? c->f_mark[cur[i]] : 0; /* ascending: still sorted */
    memset(c->f_mark, 0, n * sizeof *c->f_mark);
    c->n_frames = n;
    memset(c->f_table, 0, c->f_table_cap * sizeof *c->f_table);
    for (uint32_t f = 1; f < n; f++) frame_table_insert(c->f_table, c->f_table_cap, c, f);
    c->n_states = 2;
    c->n_ids = 0;
    memset(c->s_table, 0, c->s_table_cap * sizeof *c->s_table);
    c->cur = state_intern(c, c->out, n_cur); /* fits: the tables only shrank */
    for (int i = 0; i < GRAMMAR_MASK_SLOTS; i++) c->masks[i].state = 0;
}

/* Position p with a chain level above `level` lowered to it. */
static uint32_t canon_pos(const grammar *g, uint32_t p, uint32_t level) {
    uint32_t lo = 0, hi = g->n_chains;
    while (lo < hi) { /* the first chain ending after p */
        uint32_t mid = lo + (hi - lo) / 2;
        const gchain *ch = &g->chains[mid];
        if (ch->lo + ch->stride * ch->levels <= p) lo = mid + 1;
        else hi = mid;
    }
    if (lo == g->n_chains || p < g->chains[lo].lo) return p;
    const gchain *ch = &g->chains[lo];
    uint32_t k = 2 + (p - ch->lo) / ch->stride;
    return k > level ? ch->lo + (level - 2) * ch->stride + (p - ch->lo) % ch->stride : p;
}

/* State x with every chain level above `level` lowered to it. A level counts the repetitions still allowed (or
 * still required), each at least one byte long, so for byte strings shorter than `level` the two states accept
 * exactly the same: masks of tokens that short are shared across counts (inside a string of maxLength 1000, every
 * count above the horizon is one state). x itself when nothing changes or a cache is full. */
static uint32_t canonical(gcache *c, uint32_t x, uint32_t level) {
    const grammar *g = c->g;
    if (!g->n_chains || x == GS_DEAD) return x;
    if (c->canon_level != level) {
        for (size_t k = 2; k < c->n_states; k++) c->info[k].canon = 0;
        c->canon_level = level;
    }
    if (c->info[x].canon) return c->info[x].canon;
    size_t m = 0;
    bool changed = false;
    for (uint32_t i = c->s_off[x]; i < c->s_off[x + 1]; i++) {
        uint32_t st = c->ids[i], d = 0;
        bool lowered = false;
        for (uint32_t f = st; f; f = c->f_parent[f]) {
            uint32_t q = canon_pos(g, c->f_pos[f], level);
            lowered |= q != c->f_pos[f];
            c->pos_buf[d++] = q;
        }
        if (lowered) {
            st = 0;
            for (uint32_t k = d; k-- > 0;) {
                st = frame_push(c, c->pos_buf[k], st);
                if (st >= GS_CUT) return x;
            }
            changed = true;
        }
        c->out[m++] = st;
    }
    if (!changed) return c->info[x].canon = x;
    qsort(c->out, m, sizeof *c->out, u32_cmp);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (!u || c->out[i] != c->out[u - 1]) c->out[u++] = c->out[i];
    uint32_t y = state_intern(c, c->out, u);
    if (y == GS_FULL) return x;
    c->info[y].canon = y;
    return c->info[x].canon = y;
}

/* Walks bytes p[0..n) from the current state; the state reached, or GS_DEAD. */
static uint32_t walk_bytes(gcache *c, const uint8_t *p, size_t n) {
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t k = c->cur;
        size_t i = 0;
        for (; i < n && k != GS_DEAD && k != GS_FULL; i++) k = step(c, k, p[i]);
        if (k != GS_FULL) return k;
        compact(c);
    }
    c->stats.overflows++;
    return GS_DEAD;
}

static void cache_free(gcache *c) {
    if (!c) return;
    free(c->f_pos);
    free(c->f_parent);
    free(c->f_mark);
    free(c->f_depth);
    free(c->f_table);
    free(c->s_off);
    free(c->info);
    free(c->pos_buf);
    free(c->tbits);
    free(c->s_table);
    free(c->ids);
    free(c->trans);
    free(c->work);
    free(c->out);
    for (int i = 0; i < GRAMMAR_MASK_SLOTS; i++) free(c->masks[i].mask);
    free(c);
}

grammar_state *grammar_state_new(const grammar *g, fkv_error *err) {
    grammar_state *s = calloc(1, sizeof *s);
    gcache *c = s ? calloc(1, sizeof *c) : NULL;
    if (!c) goto fail;
    s->c = c;
    c->g = g;
    c->max_states = GS_MAX_TRANS / g->n_cls < GS_MAX_STATES ? GS_MAX_TRANS / g->n_cls : GS_MAX_STATES;
    size_t cap = 0;
    if (grow(&c->f_pos, &c->cap_frames, 1024, sizeof *c->f_pos, GS_MAX_FRAMES) ||
        grow(&c->f_parent, &cap, 1024, sizeof *c->f_parent, GS_MAX_FRAMES) ||
        grow(&c->f_mark, &(size_t){0}, 1024, sizeof *c->f_mark, GS_MAX_FRAMES) ||
        grow(&c->f_depth, &(size_t){0}, 1024, sizeof *c->f_depth, GS_MAX_FRAMES) || frame_table_rebuild(c, 2048) ||
        grow(&c->s_off, &c->cap_states, 64, sizeof *c->s_off, c->max_states + 1) ||
        grow(&c->info, &(size_t){0}, 64, sizeof *c->info, c->max_states + 1) ||
        !(c->pos_buf = malloc(GRAMMAR_MAX_DEPTH * sizeof *c->pos_buf)) ||
        state_table_rebuild(c, 128) ||
        grow(&c->trans, &c->cap_trans, 2 * (size_t)g->n_cls, sizeof *c->trans, c->max_states * g->n_cls))
        goto fail;
    c->n_frames = 1; /* frame 0: the empty stack */
    c->f_pos[0] = c->f_parent[0] = c->f_mark[0] = 0;
    c->f_depth[0] = 0;
    c->n_states = 2; /* 0: "not computed" in trans; 1: dead, whose every transition is itself */
    c->s_off[0] = c->s_off[1] = c->s_off[2] = 0;
    c->info[0] = (gsinfo){0};
    c->info[1] = (gsinfo){.canon = GS_DEAD};
    for (uint32_t cl = 0; cl < g->n_cls; cl++) c->trans[g->n_cls + cl] = GS_DEAD;
    next_epoch(c);
    size_t n_work = 0;
    uint32_t start = frame_push(c, 0, 0);
    if (start >= GS_CUT || work_push(c, &n_work, start)) goto fail;
    c->cur = expand(c, n_work);
    if (c->cur == GS_FULL) goto fail;
    return s;
fail:
    err_nomem(err, "grammar: out of memory for a generation's state");
    if (s) cache_free(s->c);
    free(s);
    return NULL;
}

void grammar_state_free(grammar_state *s) {
    if (!s) return;
    cache_free(s->c);
    free(s);
}

bool grammar_complete(const grammar_state *s) { return s->c->info[s->c->cur].complete; }

int grammar_accept_bytes(grammar_state *s, const char *bytes, size_t n) {
    uint32_t k = walk_bytes(s->c, (const uint8_t *)bytes, n);
    if (k == GS_DEAD) return -1;
    s->c->cur = k;
    return 0;
}

void grammar_state_stats(const grammar_state *s, grammar_stats *out) { *out = s->c->stats; }

/* ---- the vocabulary trie ---- */

enum { GV_NONE, GV_TEXT, GV_EOG };

typedef struct {
    uint32_t skip; /* the node after this one's subtree */
    uint32_t tok;  /* tokens ending here: node_tok[tok .. next node's tok); a subtree's: [tok, nodes[skip].tok) */
    uint16_t depth;
    uint16_t height; /* of its subtree: the deepest node below, counted from this one (0: a leaf) */
    uint8_t byte;
    uint8_t flags; /* GV_* */
} gv_node;

/* What a node's subtree holds, for the walk's shortcut. The UTF-8 flags decode each token from its first byte. */
enum {
    GV_HIGH_BELOW = 1, /* a byte >= 0x80 below this node */
    GV_BAD_BELOW = 2,  /* a node below whose bytes are not a valid UTF-8 prefix */
    GV_BOUNDARY = 4,   /* this node's bytes end on a character boundary (valid, no character left open) */
    GV_BAD = 8,        /* this node's bytes are not a valid UTF-8 prefix */
};

struct grammar_vocab {
    int32_t n_vocab;
    uint8_t *kind;
    uint32_t *off; /* token id's bytes: bytes[off[id] .. off[id + 1]) */
    uint8_t *bytes;
    int32_t *eog;
    uint32_t n_eog;
    gv_node *nodes; /* preorder; nodes[n_nodes] is a sentinel ending the last node's tokens */
    uint32_t n_nodes;
    int32_t *node_tok;
    uint32_t n_text;
    int32_t *other; /* the ids that are not text (end of generation included) */
    uint32_t n_other;
    uint64_t *below; /* [2 * node]: the ASCII bytes of the nodes below it */
    uint32_t horizon;  /* the token length (bytes) at most GV_MAX_LONG tokens exceed */
    int32_t *long_ids; /* those tokens */
    uint32_t n_long;
};

#define GV_MAX_LONG 128

void grammar_vocab_free(grammar_vocab *gv) {
    if (!gv) return;
    free(gv->kind);
    free(gv->off);
    free(gv->bytes);
    free(gv->eog);
    free(gv->nodes);
    free(gv->node_tok);
    free(gv->below);
    free(gv->other);
    free(gv->long_ids);
    free(gv);
}

int32_t grammar_vocab_n(const grammar_vocab *gv) { return gv->n_vocab; }
size_t grammar_vocab_trie_nodes(const grammar_vocab *gv) { return gv->n_nodes; }

typedef struct {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
} gv_piece;

/* UTF-8 decoding state after a node: bytes still needed (-1: invalid), and the open character's lead and length. */
typedef struct {
    int need;
    uint8_t lead;
    int len;
} gv_utf8;

/* Whether b may be continuation byte number k (1-based) of a character led by lead (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static bool utf8_cont_ok(uint8_t lead, int k, uint8_t b) {
    if ((b & 0xc0) != 0x80) return false;
    if (k != 1) return true;
    if (lead == 0xe0) return b >= 0xa0;
    if (lead == 0xed) return b <= 0x9f;
    if (lead == 0xf0) return b >= 0x90;
    if (lead == 0xf4) return b <= 0x8f;
    return true;
}

static int piece_cmp(const void *a, const void *b) {
    const gv_piece *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

grammar_vocab *grammar_vocab_new_pieces(int32_t n_vocab, const char *const *bytes, const size_t *len,
                                        const bool *eog, fkv_error *err) {
    grammar_vocab *gv = calloc(1, sizeof *gv);
    gv_piece *sorted = NULL;
    uint32_t *open = NULL;
    gv_utf8 *u = NULL;
    if (!gv || n_vocab < 0) goto fail;
    gv->n_vocab = n_vocab;
    size_t n = (size_t)n_vocab, total = 0, n_text = 0;
    gv->kind = calloc(n ? n : 1, 1);
    gv->off = calloc(n + 1, sizeof *gv->off);
    if (!gv->kind || !gv->off) goto fail;
    for (size_t i = 0; i < n; i++) {
        if (eog && eog[i]) {
            gv->kind[i] = GV_EOG;
            gv->n_eog++;
        } else if (bytes[i] && len[i] > 0 && len[i] <= GRAMMAR_MAX_TOKEN_BYTES) {
            gv->kind[i] = GV_TEXT;
            total += len[i];
            n_text++;
        }
    }
    gv->bytes = malloc(total ? total : 1);
    gv->eog = malloc((gv->n_eog ? gv->n_eog : 1) * sizeof *gv->eog);
    sorted = malloc((n_text ? n_text : 1) * sizeof *sorted);
    gv->node_tok = malloc((n_text ? n_text : 1) * sizeof *gv->node_tok);
    gv->nodes = malloc((total + 1) * sizeof *gv->nodes);
    gv->below = calloc(2 * (total + 1), sizeof *gv->below);
    open = malloc((GRAMMAR_MAX_TOKEN_BYTES + 1) * sizeof *open);
    u = calloc(GRAMMAR_MAX_TOKEN_BYTES + 1, sizeof *u); /* u[0]: the token's start, a boundary */
    gv->other = malloc((n - n_text + 1) * sizeof *gv->other);
    if (!gv->bytes || !gv->eog || !sorted || !gv->node_tok || !gv->nodes || !gv->below || !open || !u || !gv->other)
        goto fail;
    size_t at = 0, k = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        gv->off[i] = (uint32_t)at;
        if (gv->kind[i] == GV_TEXT) {
            memcpy(gv->bytes + at, bytes[i], len[i]);
            sorted[k++] = (gv_piece){gv->bytes + at, (uint32_t)len[i], (int32_t)i};
            at += len[i];
        } else if (gv->kind[i] == GV_EOG) {
            gv->eog[e++] = (int32_t)i;
        }
    }
    gv->off[n] = (uint32_t)at;
    qsort(sorted, n_text, sizeof *sorted, piece_cmp);
    /* The trie in preorder: in sorted order each piece shares its longest common prefix with the previous one;
     * the nodes below that depth are closed and the rest of the piece opens new ones. open[d]: the node at depth
     * d on the current path. */
    uint32_t depth = 0, m = 0;
    for (size_t t = 0; t < n_text; t++) {
        const gv_piece *pc = &sorted[t];
        uint32_t lcp = 0;
        if (t) {
            const gv_piece *prev = &sorted[t - 1];
            while (lcp < prev->len && lcp < pc->len && prev->p[lcp] == pc->p[lcp]) lcp++;
        }
        for (; depth > lcp; depth--) gv->nodes[open[depth]].skip = m;
        for (; depth < pc->len; depth++) {
            gv->nodes[m] = (gv_node){.tok = (uint32_t)t, .depth = (uint16_t)(depth + 1), .byte = pc->p[depth]};
            /* UTF-8 decoding from the token's start, along the path: u[d] is the state after depth d */
            const gv_utf8 *prev = &u[depth];
            gv_utf8 *now = &u[depth + 1];
            uint8_t b = pc->p[depth];
            if (prev->need < 0) {
                *now = *prev;
            } else if (prev->need > 0) {
                *now = *prev;
                now->need = utf8_cont_ok(prev->lead, prev->len - prev->need, b) ? prev->need - 1 : -1;
            } else {
                int len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3
                        : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
                *now = (gv_utf8){.need = len - 1, .lead = b, .len = len};
            }
            if (now->need == 0) gv->nodes[m].flags |= GV_BOUNDARY;
            if (now->need < 0) gv->nodes[m].flags |= GV_BAD;
            open[depth + 1] = m++;
        }
        gv->node_tok[t] = pc->id;
    }
    gv->n_text = (uint32_t)n_text;
    for (size_t i = 0; i < n; i++)
        if (gv->kind[i] != GV_TEXT) gv->other[gv->n_other++] = (int32_t)i;
    for (; depth > 0; depth--) gv->nodes[open[depth]].skip = m;
    gv->nodes[m] = (gv_node){.skip = m, .tok = (uint32_t)n_text};
    gv->n_nodes = m;
    /* The horizon: 16 bytes, doubled while more than GV_MAX_LONG tokens are longer. */
    gv->horizon = 16;
    for (;;) {
        gv->n_long = 0;
        for (size_t t = 0; t < n_text; t++) gv->n_long += sorted[t].len > gv->horizon;
        if (gv->n_long <= GV_MAX_LONG || gv->horizon >= GRAMMAR_MAX_TOKEN_BYTES) break;
        gv->horizon *= 2;
    }
    gv->long_ids = malloc((gv->n_long ? gv->n_long : 1) * sizeof *gv->long_ids);
    if (!gv->long_ids) goto fail;
    for (size_t t = 0, k = 0; t < n_text; t++)
        if (sorted[t].len > gv->horizon) gv->long_ids[k++] = sorted[t].id;
    /* What lies below each node, children first (they come after their parent in preorder). */
    for (uint32_t i = m; i-- > 0;) {
        for (uint32_t ch = i + 1; ch < gv->nodes[i].skip; ch = gv->nodes[ch].skip) {
            uint8_t b = gv->nodes[ch].byte;
            gv->below[2 * i] |= gv->below[2 * ch];
            gv->below[2 * i + 1] |= gv->below[2 * ch + 1];
            uint8_t f = gv->nodes[ch].flags;
            if (gv->nodes[ch].height + 1 > gv->nodes[i].height) gv->nodes[i].height = gv->nodes[ch].height + 1;
            gv->nodes[i].flags |= (f & (GV_HIGH_BELOW | GV_BAD_BELOW)) | (b >= 0x80 ? GV_HIGH_BELOW : 0) |
                                  (f & GV_BAD ? GV_BAD_BELOW : 0);
            if (b < 0x80) gv->below[2 * i + (b >> 6)] |= 1ull << (b & 63);
        }
    }
    free(sorted);
    free(open);
    free(u);
    return gv;
fail:
    err_nomem(err, "grammar: out of memory for the vocabulary's trie");
    free(sorted);
    free(open);
    free(u);
    grammar_vocab_free(gv);
    return NULL;
}

grammar_vocab *grammar_vocab_new(const tok_vocab *v, fkv_error *err) {
    size_t n = (size_t)tok_n_vocab(v), total = 0;
    size_t *len = calloc(n + 1, sizeof *len);
    const char **bytes = calloc(n + 1, sizeof *bytes);
    bool *eog = calloc(n + 1, sizeof *eog);
    char *buf = NULL;
    grammar_vocab *gv = NULL;
    if (!len || !bytes || !eog) goto oom;
    /* prev = the id itself: never -1 or BOS for a text token, so tok_piece keeps a leading space (mid-text). */
    for (size_t id = 0; id < n; id++) {
        eog[id] = tok_is_eog(v, (int32_t)id);
        int piece = eog[id] ? 0 : tok_piece(v, (int32_t)id, (int32_t)id, NULL, 0);
        if (piece > 0 && piece <= GRAMMAR_MAX_TOKEN_BYTES) len[id] = (size_t)piece;
        total += len[id];
    }
    buf = malloc(total ? total : 1);
    if (!buf) goto oom;
    for (size_t id = 0, at = 0; id < n; id++) {
        if (!len[id]) continue;
        bytes[id] = buf + at;
        tok_piece(v, (int32_t)id, (int32_t)id, buf + at, (int)len[id]);
        at += len[id];
    }
    gv = grammar_vocab_new_pieces((int32_t)n, bytes, len, eog, err);
    goto out;
oom:
    err_nomem(err, "grammar: out of memory for the vocabulary's trie");
out:
    free(buf);
    free(bytes);
    free(len);
    free(eog);
    return gv;
}

/* ---- masks ---- */

/* The successor of state k on the last byte of node i at depth d, after a full cache: compacts, then replays the
 * path from the current state (path_byte[1 .. d-1]). GS_DEAD when even that does not fit. */
static uint32_t walk_recover(gcache *c, uint32_t d, uint8_t byte) {
    compact(c);
    c->path[0] = c->cur;
    for (uint32_t k = 1; k < d; k++) {
        uint32_t x = step(c, c->path[k - 1], c->path_byte[k]);
        if (x == GS_FULL || x == GS_DEAD) {
            c->stats.overflows++;
            return GS_DEAD;
        }
        c->path[k] = x;
    }
    uint32_t x = step(c, c->path[d - 1], byte);
    if (x == GS_FULL) {
        c->stats.overflows++;
        return GS_DEAD;
    }
    return x;
}

/* State k's plain bytes: the ASCII bytes that lead to its most common successor (next). False when a cache is full
 * (no compaction here: the walk holds state ids). */
static bool plain(gcache *c, uint32_t k) {
    if (c->info[k].known & KNOWN_PLAIN) return true;
    uint32_t succ[128], best = GS_DEAD, best_n = 0;
    for (unsigned b = 0; b < 128; b++) {
        succ[b] = step(c, k, (uint8_t)b); /* may grow (move) the state arrays */
        if (succ[b] == GS_FULL) return false;
    }
    for (unsigned b = 0; b < 128; b++) {
        if (succ[b] == GS_DEAD || succ[b] == best) continue;
        uint32_t n = 0;
        for (unsigned q = b; q < 128; q++) n += succ[q] == succ[b];
        if (n > best_n) best = succ[b], best_n = n;
    }
    gsinfo *in = &c->info[k];
    in->next = best;
    in->plain[0] = in->plain[1] = 0;
    for (unsigned b = 0; b < 128; b++)
        if (best != GS_DEAD && succ[b] == best) in->plain[b >> 6] |= 1ull << (b & 63);
    in->known |= KNOWN_PLAIN;
    return true;
}

/* Whether every byte of [lo, hi] leads state x on, alive, to a state from which `left` - 1 more bytes of 80..BF
 * lead to home (left 1: to home itself). 1, 0, or -1 when a cache is full. Bytes of one class step alike, so one
 * byte per class is tried. */
static int utf8_returns(gcache *c, uint32_t home, uint32_t x, unsigned lo, unsigned hi, int left) {
    uint64_t seen[4] = {0};
    for (unsigned b = lo; b <= hi; b++) {
        uint8_t cl = c->g->cls[b];
        if (seen[cl >> 6] >> (cl & 63) & 1) continue;
        seen[cl >> 6] |= 1ull << (cl & 63);
        uint32_t y = step(c, x, (uint8_t)b);
        if (y == GS_FULL) return -1;
        if (y == GS_DEAD) return 0;
        int r = left == 1 ? y == home : utf8_returns(c, home, y, 0x80, 0xbf, left - 1);
        if (r <= 0) return r;
    }
    return 1;
}

/* Whether every valid multi-byte character leads state k (plain() known) to its next — k itself for a loop (inside
 * a JSON string), the next count for a counting state — every partial one alive. Unknown (a cache full) counts as
 * no and is not kept. */
static bool utf8_next(gcache *c, uint32_t k) {
    static const struct {
        uint8_t lo, hi, second_lo, second_hi, len;
    } leads[] = {{0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3}, {0xe1, 0xec, 0x80, 0xbf, 3},
                 {0xed, 0xed, 0x80, 0x9f, 3}, {0xee, 0xef, 0x80, 0xbf, 3}, {0xf0, 0xf0, 0x90, 0xbf, 4},
                 {0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4}};
    if (c->info[k].utf8) return c->info[k].utf8 == 1;
    uint32_t target = c->info[k].next;
    int r = target != GS_DEAD;
    for (size_t i = 0; i < sizeof leads / sizeof *leads && r > 0; i++) {
        uint64_t seen[4] = {0};
        for (unsigned b = leads[i].lo; b <= leads[i].hi && r > 0; b++) {
            uint8_t cl = c->g->cls[b];
            if (seen[cl >> 6] >> (cl & 63) & 1) continue;
            seen[cl >> 6] |= 1ull << (cl & 63);
            uint32_t x = step(c, k, (uint8_t)b);
            r = x == GS_FULL ? -1
              : x == GS_DEAD ? 0
              : utf8_returns(c, target, x, leads[i].second_lo, leads[i].second_hi, leads[i].len - 1);
        }
    }
    if (r >= 0) c->info[k].utf8 = r ? 1 : 2;
    return r > 0;
}

/* How many steps along `next` from k stay alive with every state's plain bytes covering k's: a subtree no deeper
 * than that whose ASCII bytes are k's plain ones is allowed whole (with utf8, every chain state also leads each
 * multi-byte character to its next: then the subtree may hold valid UTF-8 too). GS_FAR for a loop (inside a JSON
 * string), the count left for a counting state (inside a string of bounded length); 0 for a state that is not text
 * (fewer than GS_TEXT_BYTES plain bytes) or when a cache is full. Followed only as far as `need` asks: a chain cut
 * short leaves lower bounds, which a later, deeper question extends. The chain is followed into pos_buf, then
 * filled in backwards: reach(x) = 1 + reach(next) when next's plain bytes cover x's, else 1. */
static uint32_t reach(gcache *c, uint32_t k, uint32_t need, int utf8) {
    const uint8_t exact_bit = (uint8_t)(KNOWN_REACH << utf8);
    if ((c->info[k].known & exact_bit) || c->info[k].reach[utf8] >= need) return c->info[k].reach[utf8];
    uint32_t *chain = c->pos_buf, n = 0, x = k, tail = 0;
    bool exact = true, cut = false;
    for (;;) {
        uint32_t left = need > n ? need - n : 0; /* what x must reach for k to reach need */
        if ((c->info[x].known & exact_bit) || (n && c->info[x].reach[utf8] >= left)) {
            tail = c->info[x].reach[utf8];
            exact = c->info[x].known & exact_bit;
            break;
        }
        if (!plain(c, x)) return 0; /* plain() and utf8_next() may move c->info */
        bool text = __builtin_popcountll(c->info[x].plain[0]) + __builtin_popcountll(c->info[x].plain[1]) >=
                    GS_TEXT_BYTES;
        if (!text || (utf8 && !utf8_next(c, x))) {
            c->info[x].reach[utf8] = 0; /* its successors are not followed */
            c->info[x].known |= exact_bit;
            tail = 0;
            break;
        }
        gsinfo *in = &c->info[x];
        if (in->next == x) { /* a loop: every step lands where it started */
            in->reach[utf8] = GS_FAR;
            in->known |= exact_bit;
            tail = GS_FAR;
            break;
        }
        chain[n++] = x;
        if (n > need || n > GRAMMAR_MAX_TOKEN_BYTES) { /* far enough: the last one is alive one step on */
            cut = true;
            break;
        }
        x = in->next;
    }
    for (uint32_t i = n; i-- > 0;) {
        gsinfo *in = &c->info[chain[i]];
        const gsinfo *ni = &c->info[in->next];
        uint32_t r;
        bool ex;
        if (cut && i == n - 1) {
            r = 1, ex = false;
        } else if ((ni->known & KNOWN_PLAIN) && !(in->plain[0] & ~ni->plain[0]) && !(in->plain[1] & ~ni->plain[1])) {
            r = tail == GS_FAR ? GS_FAR : tail + 1, ex = exact;
        } else {
            r = 1, ex = true;
        }
        if (r > in->reach[utf8] || ex) in->reach[utf8] = r;
        if (ex) in->known |= exact_bit;
        tail = r, exact = ex;
    }
    return c->info[k].reach[utf8];
}

/* Whether every token below a node whose state is x is allowed: its ASCII bytes below[] are x's plain bytes and the
 * subtree, `height` bytes deep, ends before the chain does (a character takes at least one byte, so counting bytes
 * is safe); with bytes >= 0x80 below (valid UTF-8 from a character boundary), the chain must carry characters. */
static bool subtree_allowed(gcache *c, uint32_t x, const uint64_t below[2], uint32_t height, bool high) {
    uint32_t r = reach(c, x, height, high);
    const gsinfo *in = &c->info[x];
    return r && !(below[0] & ~in->plain[0]) && !(below[1] & ~in->plain[1]) && (r == GS_FAR || height <= r);
}

/* Bits [a, b) of w. */
static void bits_set(uint64_t *w, uint32_t a, uint32_t b) {
    if (a >= b) return;
    uint32_t wa = a >> 6, wb = (b - 1) >> 6;
    uint64_t ma = ~0ull << (a & 63), mb = ~0ull >> (63 - ((b - 1) & 63));
    if (wa == wb) {
        w[wa] |= ma & mb;
        return;
    }
    w[wa] |= ma;
    for (uint32_t i = wa + 1; i < wb; i++) w[i] = ~0ull;
    w[wb] |= mb;
}

/* The mask by a preorder walk of the trie from state root, down to depth `limit`, into c->tbits: node i's state is
 * its parent's (st[depth - 1]) stepped by its byte; a dead node skips its subtree, and a live one whose subtree
 * cannot fail (subtree_allowed) allows all of it at once. Returns the root finally walked from (the current state after a compaction); *n_set the
 * tokens marked. */
static uint32_t walk_trie(gcache *c, const grammar_vocab *gv, uint32_t root, uint32_t limit, size_t *n_set) {
    const gv_node *nodes = gv->nodes;
    uint32_t *st = c->path;
    uint64_t visited = 0;
    size_t marked = 0;
    st[0] = root;
    for (uint32_t i = 0; i < gv->n_nodes;) {
        const gv_node *nd = &nodes[i];
        uint32_t d = nd->depth;
        uint32_t x = step(c, st[d - 1], nd->byte);
        visited++;
        if (x == GS_FULL) {
            x = walk_recover(c, d, nd->byte);
            root = c->cur;
        }
        if (x == GS_DEAD) {
            i = nd->skip;
            continue;
        }
        st[d] = x;
        c->path_byte[d] = nd->byte;
        uint8_t f = nd->flags;
        if (nd->skip > i + 1 && (!(f & GV_HIGH_BELOW) || ((f & GV_BOUNDARY) && !(f & GV_BAD_BELOW))) &&
            subtree_allowed(c, x, gv->below + 2 * (size_t)i, nd->height < limit - d ? nd->height : limit - d,
                            f & GV_HIGH_BELOW)) {
            bits_set(c->tbits, nd->tok, nodes[nd->skip].tok);
            marked += nodes[nd->skip].tok - nd->tok;
            i = nd->skip;
            continue;
        }
        bits_set(c->tbits, nd->tok, nd[1].tok);
        marked += nd[1].tok - nd->tok;
        i = d < limit ? i + 1 : nd->skip;
    }
    c->stats.walk_nodes += visited;
    *n_set = marked;
    return root;
}

void grammar_allowed(const grammar_state *s, const grammar_vocab *gv, uint8_t *allowed) {
    gcache *c = s->c;
    size_t n = (size_t)gv->n_vocab, words = gv->n_text / 64 + 1;
    c->stats.masks++;
    c->clock++;
    if (c->mask_gv != gv) {
        for (int i = 0; i < GRAMMAR_MASK_SLOTS; i++) {
            free(c->masks[i].mask);
            c->masks[i] = (gmask){0};
        }
        free(c->tbits);
        c->tbits = malloc(words * sizeof *c->tbits);
        c->mask_gv = c->tbits ? gv : NULL;
    }
    if (!c->tbits) { /* no memory for the walk's marks: token by token (slower, the same mask) */
        for (size_t id = 0; id < n; id++) allowed[id] = grammar_token_allowed(s, gv, (int32_t)id);
        return;
    }
    /* Bounded: the canonical state answers for the tokens up to the horizon, the longer ones are checked alone. */
    uint32_t root = canonical(c, c->cur, gv->horizon + 1);
    bool bounded = root != c->cur;
    gmask *hit = NULL;
    for (int i = 0; i < GRAMMAR_MASK_SLOTS && !hit; i++)
        if (c->masks[i].mask && c->masks[i].state == root && (bounded || !c->masks[i].partial)) hit = &c->masks[i];
    if (hit) {
        memcpy(allowed, hit->mask, n);
        hit->used = c->clock;
        c->stats.mask_hits++;
    } else {
        memset(c->tbits, 0, words * sizeof *c->tbits);
        size_t n_set;
        root = walk_trie(c, gv, root, bounded ? gv->horizon : UINT32_MAX, &n_set);
        /* The marks to ids: fewer than half set, scatter them; more, set all and clear the others (the tokens not
         * marked, and those that are not text). */
        if (n_set < gv->n_text / 2) {
            memset(allowed, 0, n);
            for (size_t w = 0; w < words; w++)
                for (uint64_t m = c->tbits[w]; m; m &= m - 1)
                    allowed[gv->node_tok[w * 64 + (size_t)__builtin_ctzll(m)]] = 1;
        } else {
            memset(allowed, 1, n);
            for (size_t w = 0; w < words; w++) {
                uint64_t m = ~c->tbits[w];
                if (w == words - 1) m &= (1ull << (gv->n_text & 63)) - 1; /* bits past n_text hold no token */
                for (; m; m &= m - 1) allowed[gv->node_tok[w * 64 + (size_t)__builtin_ctzll(m)]] = 0;
            }
            for (uint32_t i = 0; i < gv->n_other; i++) allowed[gv->other[i]] = 0;
        }
        if (c->info[c->cur].complete)
            for (uint32_t i = 0; i < gv->n_eog; i++) allowed[gv->eog[i]] = 1;
        /* Kept in the least recently used slot (made on first use; without memory, just not kept). */
        gmask *slot = &c->masks[0];
        for (int i = 1; i < GRAMMAR_MASK_SLOTS; i++)
            if (c->masks[i].used < slot->used) slot = &c->masks[i];
        if (!slot->mask) slot->mask = malloc(n ? n : 1);
        if (slot->mask) {
            memcpy(slot->mask, allowed, n);
            slot->state = root;
            slot->partial = bounded;
            slot->used = c->clock;
        }
    }
    if (bounded)
        for (uint32_t i = 0; i < gv->n_long; i++) {
            int32_t id = gv->long_ids[i];
            allowed[id] = walk_bytes(c, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]) != GS_DEAD;
        }
}

bool grammar_token_allowed(const grammar_state *s, const grammar_vocab *gv, int32_t id) {
    if (id < 0 || id >= gv->n_vocab) return false;
    if (gv->kind[id] == GV_EOG) return grammar_complete(s);
    if (gv->kind[id] != GV_TEXT) return false;
    return walk_bytes(s->c, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]) != GS_DEAD;
}

int grammar_accept(grammar_state *s, const grammar_vocab *gv, int32_t id) {
    if (id < 0 || id >= gv->n_vocab) return -1;
    if (gv->kind[id] == GV_EOG) return grammar_complete(s) ? 0 : -1;
    if (gv->kind[id] != GV_TEXT) return -1;
    uint32_t k = walk_bytes(s->c, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]);
    if (k == GS_DEAD) return -1;
    s->c->cur = k;
    return 0;
}
