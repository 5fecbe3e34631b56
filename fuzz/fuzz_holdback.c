/* fuzz_holdback.c — the stream holdback (server/holdback.c): generated pieces appended to a text, cut at stop
 * strings, published as `stable` only when complete UTF-8 with no stop string still able to begin in it; then
 * finished as server/scheduler.c's finish_locked does (holdback_finish).
 *
 * Input: byte 0: the number of stop strings (0-4; its other bits are unused); then each stop string as a length byte
 * (1-8) and its bytes — kept only when valid UTF-8 without NUL, as oai_parse gives them; then the pieces, each a
 * length byte (0-15) and its bytes (any bytes: token pieces can be invalid UTF-8, or NUL). Asserts after every piece
 * and at the end (holdback.h's INVARIANT and what a stream relies on):
 * - the stable text is valid UTF-8, never changes once published (a client already has it), and only grows;
 * - no stop string occurs in the text (it is cut at the first one); the final text is valid UTF-8, all stable;
 * - token ends are nondecreasing, inside the text.
 */
#include <stdint.h>

#include "fuzz.h"
#include "holdback.h"

/* The properties that hold after every step; sent/n_sent: the stable text a client was sent so far. */
static void check(const holdback *h, const holdback_rules *r, char **sent, size_t *n_sent) {
    FUZZ_CHECK(h->stable <= h->len, "stable %zu past the text's %zu bytes", h->stable, h->len);
    FUZZ_CHECK(h->stable >= *n_sent, "stable went back from %zu to %zu", *n_sent, h->stable);
    FUZZ_CHECK(!*n_sent || !memcmp(h->text, *sent, *n_sent), "published text changed");
    FUZZ_CHECK(fuzz_utf8_valid(h->text, h->stable), "stable text of %zu bytes is not UTF-8", h->stable);
    for (size_t i = 0; i < r->n_stop; i++)
        FUZZ_CHECK(!fuzz_contains(h->text, h->len, r->stop[i], strlen(r->stop[i])), "stop string %zu is in the text",
                   i);
    for (size_t i = 0; i < h->n_tokens; i++)
        FUZZ_CHECK(h->ends[i] <= h->len && (i == 0 || h->ends[i - 1] <= h->ends[i]), "token %zu ends at %zu of %zu",
                   i, h->ends[i], h->len);
    char *grown = realloc(*sent, h->stable + 1);
    FUZZ_CHECK(grown, "out of memory");
    if (h->stable) memcpy(grown, h->text, h->stable);
    *sent = grown;
    *n_sent = h->stable;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *stops[4];
    holdback_rules r = {stops, 0};
    const size_t want_stops = (data[0] & 7) % 5;
    size_t at = 1;
    for (size_t i = 0; i < want_stops && at < size; i++) {
        size_t len = 1 + data[at++] % 8;
        if (len > size - at) len = size - at;
        const char *s = (const char *)data + at;
        at += len;
        if (!len || memchr(s, 0, len) || !fuzz_utf8_valid(s, len)) continue;
        stops[r.n_stop++] = strndup(s, len);
    }
    holdback h = {0};
    char *sent = NULL;
    size_t n_sent = 0;
    int rc = 0;
    while (rc == 0 && at < size) {
        size_t len = data[at++] % 16;
        if (len > size - at) len = size - at;
        rc = holdback_append(&h, &r, (const char *)data + at, len);
        FUZZ_CHECK(rc >= 0, "out of memory");
        at += len;
        check(&h, &r, &sent, &n_sent);
    }
    /* The end, as finish_locked makes it. */
    holdback_finish(&h, &r);
    check(&h, &r, &sent, &n_sent);
    FUZZ_CHECK(fuzz_utf8_valid(h.text, h.len), "the final text of %zu bytes is not UTF-8", h.len);
    FUZZ_CHECK(h.stable == h.len, "stable %zu of %zu at the end", h.stable, h.len);
    free(sent);
    holdback_free(&h);
    for (size_t i = 0; i < r.n_stop; i++) free(stops[i]);
    return 0;
}
