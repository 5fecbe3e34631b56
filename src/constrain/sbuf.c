/* sbuf.c — growing text and the literals written into it (contract in sbuf.h). */
#include "constrain/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_add(sbuf *b, const char *s, size_t n) {
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

void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

void sb_printf(sbuf *b, const char *fmt, ...) {
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

void sb_gbnf_literal(sbuf *b, const char *s, size_t n) {
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

void sb_json_string(sbuf *b, const char *s, size_t n) {
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

void sb_json_value(sbuf *b, const json_t *v) {
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

void sb_repeat(sbuf *b, const char *item, int64_t min, int64_t max) {
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
