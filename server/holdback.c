#include "holdback.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toolcall.h"
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
    /* A stop string may straddle the last piece: search from where it could have begun. */
    const size_t from = before >= hold ? before - hold : 0;
    for (size_t i = 0; i < r->n_stop; i++) {
        const char *hit = strstr(h->text + from, r->stop[i]);
        if (hit && (size_t)(hit - h->text) < h->len) {
            h->len = (size_t)(hit - h->text);
            h->text[h->len] = 0;
            while (h->n_tokens && h->ends[h->n_tokens - 1] > h->len) h->n_tokens--; /* the stop string's tokens */
            h->stop_hit = r->stop[i];
        }
    }
    if (h->stop_hit) return 1;
    /* Final: what no stop string can still begin in, no call can still begin in, and ends on a whole character. */
    size_t safe = h->len > (hold ? hold - 1 : 0) ? h->len - (hold ? hold - 1 : 0) : 0;
    const size_t call_free = toolcall_safe_prefix(r->tool_format, h->text, h->len);
    if (safe > call_free) safe = call_free;
    safe = utf8_complete_prefix(h->text, safe);
    if (safe > h->stable) h->stable = sanitize_span(h, h->stable, safe);
    return 0;
}

void holdback_finish(holdback *h) {
    if (h->text) sanitize_span(h, h->stable, h->len);
    h->stable = h->len;
}

void holdback_end_content(holdback *h, size_t content_end) {
    if (content_end < h->stable) h->stable = content_end;
}

void holdback_free(holdback *h) {
    free(h->text);
    free(h->ends);
    *h = (holdback){0};
}
