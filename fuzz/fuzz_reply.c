/* fuzz_reply.c — a reply split as it streams (server/reply.c): reasoning, content and calls read from a text that
 * grows piece by piece, in every form.
 *
 * Input: byte 0 picks the form (its reasoning: plain, think, harmony; bit 2: the prompt opened the think block;
 * bits 3-5: the calls' format, none, Hermes, Llama-3, harmony, GLM or Qwen3-Coder); then the pieces, each a length byte (0-15)
 * and its bytes. Asserts after every piece and at the end (reply.h's INVARIANT):
 * - what was split only grows: each step's reasoning and content begin with the previous step's;
 * - reading the text in these pieces ends as reading it whole does: the same reasoning, content and calls;
 * - the split of valid UTF-8 is valid UTF-8 (markers are ASCII: no cut falls inside a character);
 * - read and shown stay within the text read, shown never past read.
 */
#include <stdint.h>

#include <jansson.h>

#include "fuzz.h"
#include "reply.h"

/* Whether a[0..na) begins b[0..nb) (a NULL a: empty). */
static bool begins_with(const char *a, size_t na, const char *b, size_t nb) {
    return na <= nb && (!na || !memcmp(a, b, na));
}

/* s[0..n) (which may hold NUL bytes) in a buffer of its own; NULL when n is 0. */
static char *copy(const char *s, size_t n) {
    char *c = n ? malloc(n) : NULL;
    FUZZ_CHECK(!n || c, "out of memory");
    if (n) memcpy(c, s, n);
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const toolcall_format calls[] = {TOOLCALL_NONE, TOOLCALL_HERMES, TOOLCALL_LLAMA3, TOOLCALL_HARMONY,
                                            TOOLCALL_GLM, TOOLCALL_QWEN3_XML};
    const reply_form f = {(reply_reasoning)(data[0] & 3) % 3, (data[0] & 4) != 0, calls[(data[0] >> 3 & 7) % 6]};
    /* the text, and where each piece ends */
    char *text = malloc(size);
    size_t ends[4096], n_ends = 0, len = 0;
    FUZZ_CHECK(text, "out of memory");
    for (size_t at = 1; at < size && n_ends < sizeof ends / sizeof *ends;) {
        size_t n = data[at++] % 16;
        if (n > size - at) n = size - at;
        memcpy(text + len, data + at, n);
        len += n, at += n;
        ends[n_ends++] = len;
    }
    reply whole = {0}, r = {0};
    json_t *whole_calls = NULL, *got_calls = NULL;
    FUZZ_CHECK(reply_finish(&whole, &f, text, len, "fuzz", NULL, &whole_calls) == 0, "out of memory");
    size_t sent_r = 0, sent_c = 0;
    char *prev_r = NULL, *prev_c = NULL;
    for (size_t i = 0; i <= n_ends; i++) {
        const bool last = i == n_ends;
        if (last) FUZZ_CHECK(reply_finish(&r, &f, text, len, "fuzz", NULL, &got_calls) == 0, "out of memory");
        else FUZZ_CHECK(reply_read(&r, &f, text, ends[i], false) == 0, "out of memory");
        const size_t upto = last ? len : ends[i];
        FUZZ_CHECK(r.shown <= r.read && r.read <= upto, "read %zu shown %zu of %zu", r.read, r.shown, upto);
        FUZZ_CHECK(r.n_reasoning >= sent_r && begins_with(prev_r, sent_r, r.reasoning, r.n_reasoning),
                   "the reasoning sent (%zu bytes) changed", sent_r);
        FUZZ_CHECK(r.n_content >= sent_c && begins_with(prev_c, sent_c, r.content, r.n_content),
                   "the content sent (%zu bytes) changed", sent_c);
        free(prev_r), free(prev_c);
        prev_r = copy(r.reasoning, r.n_reasoning);
        prev_c = copy(r.content, r.n_content);
        sent_r = r.n_reasoning, sent_c = r.n_content;
    }
    FUZZ_CHECK(r.n_reasoning == whole.n_reasoning && begins_with(r.reasoning, r.n_reasoning, whole.reasoning,
                                                                  whole.n_reasoning),
               "the reasoning streamed differs from the whole's");
    FUZZ_CHECK(r.n_content == whole.n_content && begins_with(r.content, r.n_content, whole.content, whole.n_content),
               "the content streamed differs from the whole's");
    FUZZ_CHECK((got_calls == NULL) == (whole_calls == NULL) && (!got_calls || json_equal(got_calls, whole_calls)),
               "the calls streamed differ from the whole's");
    if (fuzz_utf8_valid(text, len))
        FUZZ_CHECK(fuzz_utf8_valid(whole.reasoning, whole.n_reasoning) && fuzz_utf8_valid(whole.content, whole.n_content),
                   "a split of UTF-8 is not UTF-8");
    free(prev_r), free(prev_c);
    json_decref(got_calls), json_decref(whole_calls);
    reply_free(&r), reply_free(&whole);
    free(text);
    return 0;
}
