/* jsonschema_number.c — decimal ranges, bounds and magnitudes (contract in jsonschema_number.h). */
#include "constrain/jsonschema_number.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define JS_MAX_DIGITS 16            /* integer and fraction digits; ±(10^16 - 1) bounds every integer */
#define JS_INT_LIMIT 9999999999999999LL

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
    if (!json_is_number(x)) return js_err(c, path, "malformed JSON Schema keyword '%s': expected a number", key);
    *has = true;
    *v = json_number_value(x);
    return 0;
}

/* minimum/maximum/exclusive*: the tighter of each side (exclusiveMinimum: true is draft 4's flag on minimum). */
static int read_bounds(jsctx *c, json_t *s, const char *path, js_bounds *b) {
    *b = (js_bounds){0};
    bool has_emin = false, has_emax = false;
    double emin = 0, emax = 0;
    if (read_bound(c, s, "minimum", path, &b->has_lo, &b->lo) ||
        read_bound(c, s, "maximum", path, &b->has_hi, &b->hi) ||
        read_bound(c, s, "exclusiveMinimum", path, &has_emin, &emin) ||
        read_bound(c, s, "exclusiveMaximum", path, &has_emax, &emax))
        return -1;
    if (json_is_true(json_object_get(s, "exclusiveMinimum"))) b->lo_excl = b->has_lo;
    if (json_is_true(json_object_get(s, "exclusiveMaximum"))) b->hi_excl = b->has_hi;
    if (has_emin && (!b->has_lo || emin >= b->lo)) b->has_lo = true, b->lo = emin, b->lo_excl = true;
    if (has_emax && (!b->has_hi || emax <= b->hi)) b->has_hi = true, b->hi = emax, b->hi_excl = true;
    return 0;
}

/* The bounds of s into *bd: true when it has one; false on an error, or when it has none, with `any` (the fixed rule
 * of every integer, or of every number) written to b. */
static bool bounded(jsctx *c, sbuf *b, json_t *s, const char *path, int any, js_bounds *bd) {
    if (read_bounds(c, s, path, bd)) return false;
    if (bd->has_lo || bd->has_hi) return true;
    js_prim(c, b, any);
    return false;
}

/* multipleOf d: the decimals of the multiples, by their residues mod d as the digits are read (a DFA whose states are
 * the residue and the digits read so far, at most JS_MULTIPLE_DIGITS); d a power of ten is its trailing zeros. */
#define JS_MULTIPLE_DIGITS 15
#define JS_MAX_DIVISOR 100
#define JS_MULTIPLE_TOP 999999999999999LL /* every multiple of up to JS_MULTIPLE_DIGITS digits */

/* b += the magnitudes (no sign) of the positive multiples of d, up to JS_MULTIPLE_DIGITS digits. */
static void positive_multiples(jsctx *c, sbuf *b, int64_t d) {
    int64_t p = 1;
    int zeros = 0;
    while (p < d) p *= 10, zeros++;
    if (p == d) { /* 10^k: any leading digits, then k zeros */
        sb_printf(b, "[1-9] [0-9]{0,%d}", JS_MULTIPLE_DIGITS - 1 - zeros);
        if (zeros) sb_printf(b, " \"0\"{%d}", zeros);
        return;
    }
    /* alive[l][r]: after l digits with residue r, a multiple can still be reached within the digits left */
    bool alive[JS_MULTIPLE_DIGITS + 1][JS_MAX_DIVISOR];
    const char *names[JS_MULTIPLE_DIGITS + 1][JS_MAX_DIVISOR] = {{0}};
    for (int l = JS_MULTIPLE_DIGITS; l >= 1; l--)
        for (int64_t r = 0; r < d; r++) {
            bool ok = r == 0;
            for (int x = 0; x < 10 && !ok && l < JS_MULTIPLE_DIGITS; x++) ok = alive[l + 1][(10 * r + x) % d];
            alive[l][r] = ok;
        }
    char hint[80]; /* room for any int64_t pair: the compiler cannot see d <= JS_MAX_DIVISOR */
    for (int l = 1; l <= JS_MULTIPLE_DIGITS; l++)
        for (int64_t r = 0; r < d; r++) {
            if (!alive[l][r]) continue;
            snprintf(hint, sizeof hint, "multiple-of-%lld-%lld-%d", (long long)d, (long long)r, l);
            if (!(names[l][r] = js_rule_name(c, hint))) return;
        }
    /* the rules, from the last digit back: a state's body lists the digits into each next live state */
    for (int l = JS_MULTIPLE_DIGITS; l >= 0; l--)
        for (int64_t r = 0; r < d; r++) {
            if (l ? !alive[l][r] : r != 0) continue;
            sbuf body = {0};
            bool first = true;
            if (l && r == 0) sb_puts(&body, "| "); /* it may end here (first: an empty alternative cannot end a line) */
            for (int64_t t = 0; t < d && l < JS_MULTIPLE_DIGITS; t++) {
                if (!alive[l + 1][t]) continue;
                char digits[11];
                int n = 0;
                for (int x = l ? 0 : 1; x < 10; x++)
                    if ((10 * r + x) % d == t) digits[n++] = (char)('0' + x);
                if (!n) continue;
                digits[n] = 0;
                sb_printf(&body, first ? "[%s] %s" : " | [%s] %s", digits, names[l + 1][t]);
                first = false;
            }
            if (first && l) sb_puts(&body, "\"\"");
            if (body.oom) js_oom(c);
            if (l) js_emit_rule(c, names[l][r], &body);
            else sb_add(b, body.p, body.n);
            free(body.p);
        }
}

/* b += the multiples of d within [lo, hi], where the bounds leave whole sides: all of one sign's multiples (up to
 * JS_MULTIPLE_DIGITS digits) or none; refused naming 'multipleOf' otherwise. */
static void integer_multiples(jsctx *c, sbuf *b, json_t *m, double lo, double hi, const char *path) {
    double dv = json_number_value(m);
    if (!json_is_number(m) || dv <= 0 || dv != floor(dv)) {
        js_err(c, path, "unsupported JSON Schema keyword 'multipleOf': %g is not a positive integer", dv);
        return;
    }
    int64_t d = dv < 1e15 ? (int64_t)dv : (int64_t)1e15, p = 1;
    while (p < d) p *= 10;
    if (d >= (int64_t)1e15 || (d > JS_MAX_DIVISOR && p != d)) {
        js_err(c, path, "unsupported JSON Schema keyword 'multipleOf': %lld is above %d and not a power of ten",
               (long long)d, JS_MAX_DIVISOR);
        return;
    }
    bool neg = lo < 0, pos = hi > 0, zero = lo <= 0 && hi >= 0;
    if ((neg && lo > -(double)JS_MULTIPLE_TOP && -lo >= dv) || (pos && hi < (double)JS_MULTIPLE_TOP && hi >= dv) ||
        (lo > dv) || (hi < -dv)) {
        js_err(c, path, "unsupported JSON Schema keyword 'multipleOf' beside 'minimum'/'maximum' (only bounds that "
                        "keep or drop all the multiples of a sign are)");
        return;
    }
    neg = lo <= -dv, pos = hi >= dv;
    if (!neg && !pos && !zero) {
        js_err(c, path, "no integer satisfies 'multipleOf' within 'minimum'/'maximum'");
        return;
    }
    sbuf mag = {0};
    if (neg || pos) positive_multiples(c, &mag, d);
    sb_puts(b, "( ");
    if (zero) sb_puts(b, "\"0\"");
    if (neg || pos) sb_printf(b, "%s%s( %s )", zero ? " | " : "", neg && pos ? "\"-\"? " : neg ? "\"-\" " : "", mag.p);
    sb_puts(b, " )");
    if (mag.oom) b->oom = true;
    free(mag.p);
}
void js_integer_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    js_bounds bd;
    json_t *m = json_object_get(s, "multipleOf");
    if (json_is_number(m) && json_number_value(m) == 1) m = NULL; /* every integer */
    if (m) {
        if (read_bounds(c, s, path, &bd)) return;
    } else if (!bounded(c, b, s, path, JP_INTEGER, &bd)) {
        return;
    }
    double lo = -(double)JS_INT_LIMIT, hi = (double)JS_INT_LIMIT;
    if (bd.has_lo) lo = bd.lo_excl ? floor(bd.lo) + 1 : ceil(bd.lo);
    if (bd.has_hi) hi = bd.hi_excl ? ceil(bd.hi) - 1 : floor(bd.hi);
    if (lo < -(double)JS_INT_LIMIT) lo = -(double)JS_INT_LIMIT;
    if (hi > (double)JS_INT_LIMIT) hi = (double)JS_INT_LIMIT;
    if (lo > hi) {
        js_err(c, path, "no integer satisfies 'minimum'/'maximum'");
        return;
    }
    if (m) {
        integer_multiples(c, b, m, lo, hi, path);
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
            js_prim(c, b, JP_NZFRAC);
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
        js_prim(c, b, JP_FRAC);
        sb_puts(b, "?");
        first = false;
    }
    if (top != JS_NO_TOP && !top_excl && top >= base) {
        if (!first) sb_puts(b, " | ");
        sb_printf(b, "\"%llu\" ", (unsigned long long)top);
        js_prim(c, b, JP_ZFRAC);
        sb_puts(b, "?");
        first = false;
    }
    return !first;
}

void js_number_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    if (json_object_get(s, "multipleOf")) { /* a multiple of an integer is an integer */
        js_integer_body(c, b, s, path);
        return;
    }
    js_bounds bd;
    if (!bounded(c, b, s, path, JP_NUMBER, &bd)) return;
    if ((bd.has_lo && bd.lo != floor(bd.lo)) || (bd.has_hi && bd.hi != floor(bd.hi))) {
        js_err(c, path, "unsupported JSON Schema keyword '%s': a bound of a number must be an integer",
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
    if (!any) js_err(c, path, "no number satisfies 'minimum'/'maximum'");
}
