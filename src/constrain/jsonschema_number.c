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

void js_integer_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    js_bounds bd;
    if (!bounded(c, b, s, path, JP_INTEGER, &bd)) return;
    double lo = -(double)JS_INT_LIMIT, hi = (double)JS_INT_LIMIT;
    if (bd.has_lo) lo = bd.lo_excl ? floor(bd.lo) + 1 : ceil(bd.lo);
    if (bd.has_hi) hi = bd.hi_excl ? ceil(bd.hi) - 1 : floor(bd.hi);
    if (lo < -(double)JS_INT_LIMIT) lo = -(double)JS_INT_LIMIT;
    if (hi > (double)JS_INT_LIMIT) hi = (double)JS_INT_LIMIT;
    if (lo > hi) {
        js_err(c, path, "no integer satisfies 'minimum'/'maximum'");
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
