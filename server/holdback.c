#include "holdback.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static size_t longest_stop(const holdback_rules *r) {
    size_t m = 0;
    for (size_t i = 0; i < r->n_stop; i++)
        if (strlen(r->stop[i]) > m) m = strlen(r->stop[i]);
    return m;
}

/* Make text[from, to) valid UTF-8 in place, moving the token ends after it by the change in length and the ends
 * inside it to where their bytes went — measured in the whole span: a token can end inside a character that the
 * next token completes, and then ends where that character begins (its bytes sanitized alone would be U+FFFDs,
 * past the next token's end). The span's new end, or `to` out of memory (then nothing changed). */
static size_t sanitize_span(holdback *h, size_t from, size_t to) {
    size_t clean_len;
    char *clean = utf8_sanitize(h->text + from, to - from, &clean_len);
    if (!clean) return to;
    const size_t len = h->len - (to - from) + clean_len;
    if (len + 1 > h->cap) {
        char *grown = realloc(h->text, len + 1);
        if (!grown) {
            free(clean);
            return to;
        }
        h->text = grown;
        h->cap = len + 1;
    }
    for (size_t i = h->n_tokens; i-- > 0 && h->ends[i] > from;)
        h->ends[i] = h->ends[i] >= to ? h->ends[i] - to + from + clean_len
                                      : from + utf8_sanitized_offset(h->text + from, to - from, h->ends[i] - from);
    memmove(h->text + from + clean_len, h->text + to, h->len - to + 1);
    memcpy(h->text + from, clean, clean_len);
    h->len = len;
    free(clean);
    return from + clean_len;
}

/* Where the raw (not yet sanitized) tail of text[0..len) begins: the start of a trailing incomplete but so far valid
 * sequence (at most 3 bytes, after stable), or len when there is none. Everything before it is valid UTF-8. */
static size_t raw_tail(const char *text, size_t stable, size_t len) {
    const size_t lo = len - stable > 3 ? len - 3 : stable;
    for (size_t k = len; k > lo; k--)
        if (((unsigned char)text[k - 1] & 0xC0) != 0x80) /* the last byte that starts a character */
            return utf8_complete_prefix(text + k - 1, len - (k - 1)) == 0 ? k - 1 : len;
    return len;
}

/* Cut the text at the first stop string that includes a byte at or after `changed` (every earlier one was searched
 * already); true, stop_hit set, when one is found. memmem, not strstr: a piece can hold a NUL byte (a <0x00>
 * token), and text after it must still be searched. */
static bool cut_at_stop(holdback *h, const holdback_rules *r, size_t changed) {
    const size_t hold = longest_stop(r), from = changed >= hold ? changed - hold : 0;
    bool cut = false;
    for (size_t i = 0; i < r->n_stop && from < h->len; i++) {
        const char *hit = memmem(h->text + from, h->len - from, r->stop[i], strlen(r->stop[i]));
        if (hit) {
            h->len = (size_t)(hit - h->text);
            h->text[h->len] = 0;
            while (h->n_tokens && h->ends[h->n_tokens - 1] > h->len) h->n_tokens--; /* the stop string's tokens */
            h->stop_hit = r->stop[i];
            cut = true;
        }
    }
    return cut;
}

int holdback_append(holdback *h, const holdback_rules *r, const char *piece, size_t len) {
    if (h->len + len + 1 > h->cap) {
        const size_t cap = 2 * h->cap + len + 64;
        char *grown = realloc(h->text, cap);
        if (!grown) return -1;
        h->text = grown;
        h->cap = cap;
    }
    if (h->n_tokens == h->cap_tokens) {
        const size_t cap = 2 * h->cap_tokens + 16;
        size_t *grown = realloc(h->ends, sizeof *grown * cap);
        if (!grown) return -1;
        h->ends = grown;
        h->cap_tokens = cap;
    }
    const size_t before = h->len, hold = longest_stop(r);
    memcpy(h->text + h->len, piece, len);
    h->len += len;
    h->text[h->len] = 0;
    h->ends[h->n_tokens++] = h->len;
    /* Bytes no later piece can make valid become U+FFFD now, before the stop search, so that stop strings are matched
     * against the text the client will see (a stop string holding U+FFFD, too): only a trailing incomplete sequence
     * stays raw. Before this piece that was [raw, before); the new one begins at raw_end. */
    const size_t raw = raw_tail(h->text, h->stable, before);
    const size_t complete = raw + utf8_complete_prefix(h->text + raw, h->len - raw);
    const size_t raw_end = complete > raw ? sanitize_span(h, raw, complete) : raw;
    if (cut_at_stop(h, r, raw)) return 1;
    /* Final: what no stop string can still begin in (hold - 1 bytes before the raw tail, whose bytes may still become
     * U+FFFDs), and ends on a whole character. */
    size_t safe = raw_end > (hold ? hold - 1 : 0) ? raw_end - (hold ? hold - 1 : 0) : 0;
    safe = utf8_complete_prefix(h->text, safe); /* sanitized already: below the raw tail */
    if (safe > h->stable) h->stable = safe;
    return 0;
}

int holdback_finish(holdback *h, const holdback_rules *r) {
    int rc = 0;
    if (h->text) { /* the raw tail's bytes become U+FFFD, which can complete a stop string */
        const size_t raw = raw_tail(h->text, h->stable, h->len);
        sanitize_span(h, h->stable, h->len);
        rc = cut_at_stop(h, r, raw);
    }
    h->stable = h->len;
    return rc;
}

void holdback_free(holdback *h) {
    free(h->text);
    free(h->ends);
    *h = (holdback){0};
}
