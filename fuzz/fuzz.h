/* fuzz.h — what the harnesses share: a check that fails loudly, an independent UTF-8 validator, and where the
 * repository's data (vocabularies, the small model) is.
 *
 * WHY a check of our own rather than assert(): it stays on in every build type, and its message names the property
 * that broke, which is what a crash report from libFuzzer then shows first.
 */
#ifndef FKV_FUZZ_H
#define FKV_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* True when s[0..n) is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF). Written
 * apart from server/utf8.c on purpose: an oracle must not share the code it checks. */
static inline bool fuzz_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return false;
        unsigned cp = k == 1 ? c : c & (0xFF >> (k + 1));
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        static const unsigned min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_of[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += k;
    }
    return true;
}

/* A file of the repository's data/ (vocabularies, the small model); FKV_FUZZ_DATA, when set, is read instead. */
static inline const char *fuzz_data(const char *rel, char *buf, size_t cap) {
    const char *dir = getenv("FKV_FUZZ_DATA");
    snprintf(buf, cap, "%s/%s", dir && *dir ? dir : FKV_DATA_DIR, rel);
    return buf;
}

/* Occurrences: true when needle[0..m) occurs in hay[0..n) (memmem, spelled out for the checks). */
static inline bool fuzz_contains(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0) return true;
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(hay + i, needle, m)) return true;
    return false;
}

#endif
