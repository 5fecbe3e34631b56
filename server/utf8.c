#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence starting at s (at most n bytes available): 1..4; 0 if invalid; -k if it is
 * a valid start that needs k more bytes than available. */
static int seq_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int need;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) need = 2, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) need = 3, min = 0x10000;
    else return 0;
    uint32_t cp = c & (0x3F >> need);
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) return -(need + 1 - i);
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return need + 1;
}

size_t utf8_complete_prefix(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        int k = seq_len(s + i, len - i);
        if (k < 0) return i; /* a character still arriving */
        i += k ? (size_t)k : 1;
    }
    return len;
}

char *utf8_sanitize(const char *str, size_t len, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)str;
    char *out = malloc(len * 3 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len;) {
        int k = seq_len(s + i, len - i);
        if (k > 0) {
            memcpy(o, s + i, (size_t)k);
            o += k;
            i += (size_t)k;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    *o = 0;
    if (out_len) *out_len = (size_t)(o - out);
    return out;
}

size_t utf8_sanitized_offset(const char *str, size_t len, size_t at) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, o = 0;
    while (i < len) { /* the units utf8_sanitize writes: a valid sequence as it is, an invalid byte as U+FFFD */
        const int k = seq_len(s + i, len - i);
        const size_t in = k > 0 ? (size_t)k : 1;
        if (at < i + in) return o;
        o += k > 0 ? (size_t)k : 3;
        i += in;
    }
    return o;
}
