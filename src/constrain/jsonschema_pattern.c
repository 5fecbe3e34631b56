/* jsonschema_pattern.c — a regular expression written as GBNF, by a descent through it (contract in
 * jsonschema_pattern.h).
 *
 * Every character an atom may match is a set of code-point ranges, written as a class of the characters that appear
 * as themselves in JSON, plus the escaped forms of '"' and '\'. Groups become parentheses and quantifiers GBNF's
 * repetitions, so the rule mirrors the expression. The syntax is ECMA-262's without flags (what JSON Schema names).
 */
#include "constrain/jsonschema_pattern.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/grammar_limits.h"
#include "constrain/grow.h"

#define RX_MAX_CP 0x10FFFFu

typedef struct {
    uint32_t lo, hi;
} cprange;

typedef struct {
    cprange *r;
    size_t n, cap;
    bool oom;
} cpset;

typedef struct {
    jsctx *c;
    const char *path;
    const unsigned char *s;
    size_t i, n;
} rx;

static int rx_fail(rx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rx_fail(rx *x, const char *fmt, ...) {
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return js_err(x->c, x->path, "unsupported JSON Schema keyword 'pattern': %s (at offset %zu)", msg, x->i);
}

static void set_add(cpset *s, uint32_t lo, uint32_t hi) {
    if (grow(&s->r, &s->cap, s->n + 1, sizeof *s->r, SIZE_MAX)) {
        s->oom = true;
        return;
    }
    s->r[s->n++] = (cprange){lo, hi};
}

static int range_cmp(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorted, with overlapping and adjacent ranges merged. */
static void set_normalize(cpset *s) {
    if (!s->n) return;
    qsort(s->r, s->n, sizeof *s->r, range_cmp);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[k].hi + 1) {
            if (s->r[i].hi > s->r[k].hi) s->r[k].hi = s->r[i].hi;
        } else {
            s->r[++k] = s->r[i];
        }
    }
    s->n = k + 1;
}

static void set_complement(cpset *s) {
    set_normalize(s);
    cpset out = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next) set_add(&out, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= RX_MAX_CP) set_add(&out, next, RX_MAX_CP);
    out.oom |= s->oom;
    free(s->r);
    *s = out;
}

static bool set_has(const cpset *s, uint32_t cp) {
    for (size_t i = 0; i < s->n; i++)
        if (cp >= s->r[i].lo && cp <= s->r[i].hi) return true;
    return false;
}

/* ECMA-262's WhiteSpace and LineTerminator: what \s matches. */
static void add_space(cpset *s) {
    static const cprange sp[] = {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                 {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                                 {0xFEFF, 0xFEFF}};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) set_add(s, sp[i].lo, sp[i].hi);
}

static void add_word(cpset *s) {
    set_add(s, '0', '9');
    set_add(s, 'A', 'Z');
    set_add(s, '_', '_');
    set_add(s, 'a', 'z');
}

/* b += the JSON text of one character of set s: a class of the characters written as themselves, and \" and \\.
 * Control characters and U+007F are left out (never written); the surrogates are no characters. */
static int emit_set(rx *x, sbuf *b, cpset *s) {
    set_normalize(s);
    if (s->oom) return js_oom(x->c);
    bool quote = set_has(s, '"'), backslash = set_has(s, '\\');
    sbuf cls = {0};
    size_t n_cp = 0;
    uint32_t only = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        /* cut out what is not written as itself, piece by piece */
        static const cprange cut[] = {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}, {0xD800, 0xDFFF}};
        uint32_t at = lo;
        for (size_t k = 0; k <= sizeof cut / sizeof *cut && at <= hi; k++) {
            uint32_t end = k < sizeof cut / sizeof *cut ? cut[k].lo : RX_MAX_CP + 1;
            if (end > at) {
                uint32_t top = end - 1 < hi ? end - 1 : hi;
                sb_printf(&cls, top > 0xFFFF ? "\\U%08X" : "\\u%04X", at);
                if (top != at) sb_printf(&cls, top > 0xFFFF ? "-\\U%08X" : "-\\u%04X", top);
                n_cp += top - at + 1;
                only = at;
            }
            if (k < sizeof cut / sizeof *cut && cut[k].hi + 1 > at) at = cut[k].hi + 1;
        }
    }
    int alts = (cls.n > 0) + quote + backslash;
    if (!alts) {
        free(cls.p);
        return rx_fail(x, "a character that can only be a control character or a lone surrogate, or none");
    }
    if (alts > 1) sb_puts(b, "( ");
    if (n_cp == 1 && only > 0x20 && only < 0x7F) sb_printf(b, "\"%c\"", (char)only);
    else if (cls.n) sb_printf(b, "[%s]", cls.p);
    if (quote) sb_puts(b, cls.n ? " | \"\\\\\\\"\"" : "\"\\\\\\\"\"");
    if (backslash) sb_puts(b, cls.n || quote ? " | \"\\\\\\\\\"" : "\"\\\\\\\\\"");
    if (alts > 1) sb_puts(b, " )");
    if (cls.oom) b->oom = true;
    free(cls.p);
    return 0;
}

static bool at_end(const rx *x) { return x->i >= x->n; }
static int peek(const rx *x) { return at_end(x) ? -1 : x->s[x->i]; }

/* The next code point of the pattern (UTF-8, which jansson has checked). */
static uint32_t next_cp(rx *x) {
    uint32_t cp = x->s[x->i++];
    int more = cp >= 0xF0 ? 3 : cp >= 0xE0 ? 2 : cp >= 0xC0 ? 1 : 0;
    if (more) cp &= 0x3Fu >> more;
    for (; more && !at_end(x); more--) cp = cp << 6 | (x->s[x->i++] & 0x3F);
    return cp;
}

static int hex_digits(rx *x, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < n; k++) {
        int ch = peek(x);
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return rx_fail(x, "a malformed \\x or \\u escape");
        v = v << 4 | (uint32_t)d;
        x->i++;
    }
    *out = v;
    return 0;
}

/* After a backslash: the set it stands for (a class escape, or one character). */
static int parse_escape(rx *x, cpset *s, bool in_class) {
    if (at_end(x)) return rx_fail(x, "a trailing backslash");
    int ch = peek(x);
    x->i++;
    switch (ch) {
    case 'd': set_add(s, '0', '9'); return 0;
    case 'w': add_word(s); return 0;
    case 's': add_space(s); return 0;
    case 'D': case 'W': case 'S': {
        cpset t = {0};
        if (ch == 'D') set_add(&t, '0', '9');
        else if (ch == 'W') add_word(&t);
        else add_space(&t);
        set_complement(&t);
        for (size_t i = 0; i < t.n; i++) set_add(s, t.r[i].lo, t.r[i].hi);
        s->oom |= t.oom;
        free(t.r);
        return 0;
    }
    case 'n': set_add(s, '\n', '\n'); return 0;
    case 'r': set_add(s, '\r', '\r'); return 0;
    case 't': set_add(s, '\t', '\t'); return 0;
    case 'f': set_add(s, '\f', '\f'); return 0;
    case 'v': set_add(s, '\v', '\v'); return 0;
    case '0': set_add(s, 0, 0); return 0;
    case 'b':
        if (in_class) {
            set_add(s, '\b', '\b');
            return 0;
        }
        return rx_fail(x, "the word boundary \\b");
    case 'B': return rx_fail(x, "the word boundary \\B");
    case 'k': return rx_fail(x, "the backreference \\k");
    case 'p': case 'P': return rx_fail(x, "the Unicode property escape \\%c", ch);
    case 'c': return rx_fail(x, "the control escape \\c");
    case 'x': case 'u': {
        uint32_t v = 0;
        if (ch == 'u' && peek(x) == '{') return rx_fail(x, "the escape \\u{...} (needs the u flag)");
        if (hex_digits(x, ch == 'x' ? 2 : 4, &v)) return -1;
        if (ch == 'u' && v >= 0xD800 && v <= 0xDBFF && x->i + 1 < x->n && x->s[x->i] == '\\' &&
            x->s[x->i + 1] == 'u') { /* a surrogate pair is one character */
            size_t save = x->i;
            uint32_t lo = 0;
            x->i += 2;
            if (!hex_digits(x, 4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            else if (x->c->failed) return -1;
            else x->i = save;
        }
        set_add(s, v, v);
        return 0;
    }
    default:
        if (ch >= '1' && ch <= '9') return rx_fail(x, "the backreference \\%c", ch);
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) return rx_fail(x, "the unknown escape \\%c", ch);
        x->i--;
        uint32_t cp = next_cp(x);
        set_add(s, cp, cp);
        return 0;
    }
}

/* After '[': a class, up to and past its ']'. */
static int parse_class(rx *x, cpset *s) {
    bool negate = peek(x) == '^';
    if (negate) x->i++;
    while (peek(x) != ']') {
        if (at_end(x)) return rx_fail(x, "a class with no closing ']'");
        cpset item = {0};
        bool single;
        if (peek(x) == '\\') {
            x->i++;
            if (parse_escape(x, &item, true)) return free(item.r), -1;
            single = item.n == 1 && item.r[0].lo == item.r[0].hi;
        } else {
            uint32_t cp = next_cp(x);
            set_add(&item, cp, cp);
            single = true;
        }
        if (single && peek(x) == '-' && x->i + 1 < x->n && x->s[x->i + 1] != ']') {
            x->i++;
            cpset hi = {0};
            if (peek(x) == '\\') {
                x->i++;
                if (parse_escape(x, &hi, true)) return free(item.r), free(hi.r), -1;
            } else {
                uint32_t cp = next_cp(x);
                set_add(&hi, cp, cp);
            }
            bool ok = hi.n == 1 && hi.r[0].lo == hi.r[0].hi && hi.r[0].lo >= item.r[0].lo;
            if (ok) item.r[0].hi = hi.r[0].lo;
            free(hi.r);
            if (!ok) return free(item.r), rx_fail(x, "a malformed class range");
        }
        for (size_t i = 0; i < item.n; i++) set_add(s, item.r[i].lo, item.r[i].hi);
        s->oom |= item.oom;
        free(item.r);
    }
    x->i++;
    if (negate) set_complement(s);
    return 0;
}

static int parse_alt(rx *x, sbuf *b, bool top);

/* One atom: a group, a class, '.', an escape or a character. */
static int parse_atom(rx *x, sbuf *b) {
    int ch = peek(x);
    cpset s = {0};
    int rc = 0;
    if (ch == '(') {
        size_t start = x->i++;
        if (peek(x) == '?') {
            x->i++;
            int k = peek(x);
            if (k == ':') {
                x->i++;
            } else if (k == '<' && x->i + 1 < x->n && x->s[x->i + 1] != '=' && x->s[x->i + 1] != '!') {
                while (!at_end(x) && peek(x) != '>') x->i++; /* a named group is a group */
                if (at_end(x)) return rx_fail(x, "a group name with no closing '>'");
                x->i++;
            } else if (k == '=' || k == '!' || k == '<') {
                x->i = start; /* the offset of the construct */
                return rx_fail(x, "a lookaround assertion '(?%s'", k == '<' ? "<" : k == '=' ? "=" : "!");
            } else {
                x->i = start;
                return rx_fail(x, "the group modifier '(?%c'", k < 0 ? ' ' : k);
            }
        }
        sb_puts(b, "( ");
        if (parse_alt(x, b, false)) return -1;
        if (peek(x) != ')') return rx_fail(x, "a group with no closing ')'");
        x->i++;
        sb_puts(b, " )");
        return 0;
    }
    if (ch == '*' || ch == '+' || ch == '?' || ch == '{') return rx_fail(x, "a quantifier with nothing to repeat");
    if (ch == '^' || ch == '$') return rx_fail(x, "the anchor '%c' inside the expression", ch);
    x->i++;
    if (ch == '[') {
        rc = parse_class(x, &s);
    } else if (ch == '.') {
        set_add(&s, '\n', '\n');
        set_add(&s, '\r', '\r');
        set_add(&s, 0x2028, 0x2029);
        set_complement(&s);
    } else if (ch == '\\') {
        rc = parse_escape(x, &s, false);
    } else {
        x->i--;
        uint32_t cp = next_cp(x);
        set_add(&s, cp, cp);
    }
    if (!rc) rc = emit_set(x, b, &s);
    free(s.r);
    return rc;
}

static int read_count(rx *x, int64_t *v) {
    if (peek(x) < '0' || peek(x) > '9') return rx_fail(x, "a malformed quantifier");
    *v = 0;
    while (peek(x) >= '0' && peek(x) <= '9') {
        *v = *v * 10 + (peek(x) - '0');
        if (*v > GRAMMAR_MAX_REPEAT) return rx_fail(x, "a repetition count above the supported %d", GRAMMAR_MAX_REPEAT);
        x->i++;
    }
    return 0;
}

/* A quantifier after an atom (if any): b += the atom repeated. */
static int parse_quant(rx *x, sbuf *b, const sbuf *atom) {
    int64_t min = 1, max = 1;
    int ch = peek(x);
    if (ch == '*') min = 0, max = INT32_MAX, x->i++;
    else if (ch == '+') min = 1, max = INT32_MAX, x->i++;
    else if (ch == '?') min = 0, max = 1, x->i++;
    else if (ch == '{') {
        x->i++;
        if (read_count(x, &min)) return -1;
        max = min;
        if (peek(x) == ',') {
            x->i++;
            max = INT32_MAX;
            if (peek(x) != '}' && read_count(x, &max)) return -1;
        }
        if (peek(x) != '}') return rx_fail(x, "a malformed quantifier");
        x->i++;
        if (max < min) return rx_fail(x, "a quantifier {n,m} with m below n");
    }
    if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
        if (peek(x) == '?') x->i++; /* lazy: the same language */
        sbuf item = {0};
        sb_printf(&item, "( %s )", atom->p);
        sb_repeat(b, item.p ? item.p : "", min, max);
        if (item.oom) b->oom = true;
        free(item.p);
        if (max == 0) sb_puts(b, "\"\"");
    } else {
        sb_puts(b, atom->p);
    }
    return 0;
}

/* A sequence, up to '|', ')' or the end; at the top, ^ and $ at its ends anchor it, and without them any characters
 * may come before and after. */
static int parse_seq(rx *x, sbuf *b, bool top) {
    bool start = false, end = false;
    if (top && peek(x) == '^') start = true, x->i++;
    sbuf any = {0};
    if (top && !start) {
        js_prim(x->c, &any, JP_CHAR);
        sb_printf(b, "%s* ", any.p);
    }
    bool empty = true;
    while (!at_end(x) && peek(x) != '|' && peek(x) != ')' && !x->c->failed) {
        if (top && peek(x) == '$' && (x->i + 1 == x->n || x->s[x->i + 1] == '|')) {
            end = true;
            x->i++;
            break;
        }
        sbuf atom = {0};
        if (!parse_atom(x, &atom)) {
            if (!empty) sb_puts(b, " ");
            if (atom.oom) b->oom = true;
            parse_quant(x, b, &atom);
            empty = false;
        }
        free(atom.p);
    }
    if (empty) sb_puts(b, "\"\"");
    if (top && !end) {
        if (!any.p) js_prim(x->c, &any, JP_CHAR);
        sb_printf(b, " %s*", any.p);
    }
    free(any.p);
    return x->c->failed ? -1 : 0;
}

static int parse_alt(rx *x, sbuf *b, bool top) {
    sbuf alts = {0};
    int n = 0;
    for (;;) {
        if (n) sb_puts(&alts, " | ");
        if (parse_seq(x, &alts, top)) break;
        n++;
        if (peek(x) != '|') break;
        x->i++;
    }
    if (!x->c->failed) {
        if (n > 1) sb_printf(b, "( %s )", alts.p);
        else sb_puts(b, alts.p);
    }
    if (alts.oom) b->oom = true;
    free(alts.p);
    return x->c->failed ? -1 : 0;
}

void js_pattern_body(jsctx *c, sbuf *b, const char *pattern, const char *path) {
    rx x = {c, path, (const unsigned char *)pattern, 0, strlen(pattern)};
    sbuf body = {0};
    if (parse_alt(&x, &body, true)) goto out;
    if (!at_end(&x)) {
        rx_fail(&x, "an unmatched ')'");
        goto out;
    }
    sb_printf(b, "\"\\\"\" %s \"\\\"\"", body.p);
    if (body.oom) b->oom = true;
out:
    free(body.p);
}
