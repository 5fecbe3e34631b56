/* The stream holdback (server/holdback.h): a client is sent only text that can no longer change — not the start of
 * a stop string, not a character still arriving (a tool call's start is test_reply's) — and what it was sent is a
 * prefix of the final text. Token ends follow the bytes when invalid ones are replaced. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "holdback.h"

static int append(holdback *h, const holdback_rules *r, const char *piece) {
    return holdback_append(h, r, piece, strlen(piece));
}

static void test_a_stop_string_split_across_tokens_is_never_sent_and_ends_the_text(void **state) {
    (void)state;
    char *stop[] = {"The end"};
    const holdback_rules r = {stop, 1};
    holdback h = {0};
    assert_int_equal(append(&h, &r, "Once. Th"), 0);
    assert_true(h.stable <= strlen("Once. ")); /* "Th" may begin the stop string */
    assert_int_equal(append(&h, &r, "e e"), 0);
    assert_true(h.stable <= strlen("Once. "));
    assert_int_equal(append(&h, &r, "nd!"), 1);
    assert_string_equal(h.text, "Once. ");
    assert_ptr_equal(h.stop_hit, stop[0]);
    assert_int_equal(h.n_tokens, 0); /* every token holding part of the stop string is dropped, "Once. Th" too */
    holdback_finish(&h, &r);
    assert_int_equal(h.stable, strlen("Once. "));
    holdback_free(&h);
}

static void test_a_character_split_across_tokens_is_held_until_whole(void **state) {
    (void)state;
    const holdback_rules r = {NULL, 0};
    holdback h = {0};
    assert_int_equal(append(&h, &r, "caf\xC3"), 0); /* é's first byte */
    assert_int_equal(h.stable, 3);
    assert_int_equal(append(&h, &r, "\xA9!"), 0);
    assert_int_equal(h.stable, strlen("caf\xC3\xA9!"));
    holdback_free(&h);
}

static void test_invalid_bytes_become_replacement_characters_and_token_ends_follow(void **state) {
    (void)state;
    const holdback_rules r = {NULL, 0};
    holdback h = {0};
    assert_int_equal(append(&h, &r, "a\xFF"), 0);
    assert_int_equal(append(&h, &r, "b"), 0);
    assert_string_equal(h.text, "a\xEF\xBF\xBD" "b");
    assert_int_equal(h.stable, h.len);
    assert_int_equal(h.ends[0], 4); /* "a" and U+FFFD */
    assert_int_equal(h.ends[1], 5);
    /* A character that never completes is replaced when the text ends. */
    assert_int_equal(append(&h, &r, "\xE2\x82"), 0);
    assert_int_equal(h.stable, 5);
    holdback_finish(&h, &r);
    assert_string_equal(h.text, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
    assert_int_equal(h.ends[2], h.len);
    holdback_free(&h);
}

/* Found by fuzz/fuzz_holdback.c: a token ending inside "€" (its first two bytes) was given the end of its bytes
 * sanitized alone (two U+FFFD, 6), past the 3-byte text and the next token's end; chat's logprobs then stopped at
 * it (openai.c counts tokens up to content_len) and text offsets ran backwards. */
static void test_a_token_ending_inside_a_character_ends_where_it_begins(void **state) {
    (void)state;
    const holdback_rules r = {NULL, 0};
    holdback h = {0};
    assert_int_equal(append(&h, &r, "a\xE2\x82"), 0);
    assert_int_equal(append(&h, &r, "\xAC" "b"), 0);
    holdback_finish(&h, &r);
    assert_string_equal(h.text, "a\xE2\x82\xAC" "b");
    assert_int_equal(h.ends[0], 1); /* "a"; the euro sign is the next token's */
    assert_int_equal(h.ends[1], 5);
    holdback_free(&h);
}

/* Found by fuzz/fuzz_holdback.c: strstr stopped at a NUL byte (a <0x00> token's), so a stop string after one was
 * never found; and a stop string holding U+FFFD matched nothing while invalid bytes were still raw, then appeared
 * in the output once they were replaced (during generation, or at the end). */
static void test_stop_strings_are_found_in_the_text_the_client_sees(void **state) {
    (void)state;
    char *end[] = {"END"};
    const holdback_rules r = {end, 1};
    holdback h = {0};
    assert_int_equal(holdback_append(&h, &r, "Hel\0lo", 6), 0);
    assert_int_equal(append(&h, &r, " END more"), 1);
    assert_int_equal(h.len, 7); /* "Hel\0lo " */
    holdback_free(&h);

    char *fffd[] = {"\xEF\xBF\xBD\xEF\xBF\xBD"}; /* two U+FFFD */
    const holdback_rules rf = {fffd, 1};
    assert_int_equal(append(&h, &rf, "ok \xFF"), 0);
    assert_int_equal(append(&h, &rf, "\xFE!"), 1);
    assert_string_equal(h.text, "ok ");
    holdback_free(&h);

    assert_int_equal(append(&h, &rf, "ok \xDF"), 0);
    assert_int_equal(append(&h, &rf, "\xDF"), 0); /* the first is invalid now, the second still may complete */
    assert_true(h.stable <= strlen("ok "));
    assert_int_equal(holdback_finish(&h, &rf), 1);
    assert_string_equal(h.text, "ok ");
    assert_int_equal(h.stable, strlen("ok "));
    holdback_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_stop_string_split_across_tokens_is_never_sent_and_ends_the_text),
        cmocka_unit_test(test_a_character_split_across_tokens_is_held_until_whole),
        cmocka_unit_test(test_invalid_bytes_become_replacement_characters_and_token_ends_follow),
        cmocka_unit_test(test_a_token_ending_inside_a_character_ends_where_it_begins),
        cmocka_unit_test(test_stop_strings_are_found_in_the_text_the_client_sees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
