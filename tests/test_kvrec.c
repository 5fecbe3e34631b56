/* The record's rules (src/kvrec.h), one test per rule. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "kvrec.h"

static const kvrec_policy ANY = {.min_reuse = 0, .bound_to_frontier = false};

#define IDS(...) ((const int32_t[]){__VA_ARGS__}), (uint32_t)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

static kvrec built(const int32_t *ids, uint32_t n) {
    kvrec r;
    assert_true(kvrec_init(&r, 64));
    kvrec_record(&r, ids, n, 0, true);
    return r;
}

static void test_a_strict_prefix_reports_its_whole_length(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3));
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4), &ANY), 3);
    kvrec_free(&r);
}

static void test_divergence_truncates_rather_than_refusing(void **state) {
    (void)state;
    /* The record holds the last prompt and its reply; the next prompt carries the reply back
     * re-tokenized and diverges there: the agreeing part is still reused. */
    kvrec r = built(IDS(1, 2, 3, 9, 9));
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 7, 7, 8), &ANY), 3);
    assert_int_equal(kvrec_reusable(&r, IDS(9, 2, 3, 4), &ANY), 0);
    kvrec_free(&r);
}

static void test_at_least_one_token_is_always_left_to_prefill(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3));
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3), &ANY), 2);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2), &ANY), 1);
    kvrec_free(&r);
    r = built(IDS(1));
    assert_int_equal(kvrec_reusable(&r, IDS(1), &ANY), 0);
    kvrec_free(&r);
}

static void test_taint_refuses_everything_until_cleared(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3));
    kvrec_taint(&r);
    kvrec_record(&r, IDS(4), 3, true);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4, 5), &ANY), 0);
    kvrec_rewind(&r, 1);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4, 5), &ANY), 0);
    kvrec_clear(&r);
    kvrec_record(&r, IDS(1, 2, 3), 0, true);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4), &ANY), 3);
    kvrec_free(&r);
}

static void test_a_write_that_leaves_a_gap_taints(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3));
    /* Position 5 with nothing recorded at 3 and 4: the record cannot name what the KV holds there. */
    kvrec_record(&r, IDS(9), 5, false);
    assert_true(r.tainted);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 9, 0, 0, 7), &ANY), 0);
    kvrec_free(&r);
}

static void test_a_write_past_the_capacity_taints(void **state) {
    (void)state;
    kvrec r;
    assert_true(kvrec_init(&r, 4));
    kvrec_record(&r, IDS(1, 2, 3), 0, true);
    kvrec_record(&r, IDS(4, 5), 3, false);
    assert_true(r.tainted);
    kvrec_free(&r);
}

static void test_re_recording_over_a_span_replaces_it(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3));
    kvrec_record(&r, IDS(7, 8), 1, true);
    assert_int_equal(r.len, 3);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 7, 8, 4), &ANY), 3);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4), &ANY), 1);
    kvrec_free(&r);
}

static void test_rewind_shortens_what_is_reusable(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3, 4));
    kvrec_rewind(&r, 2);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4), &ANY), 2);
    kvrec_rewind(&r, 99);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4), &ANY), 2);
    kvrec_free(&r);
}

static void test_an_empty_record_or_prompt_reuses_nothing(void **state) {
    (void)state;
    kvrec r;
    assert_true(kvrec_init(&r, 8));
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3), &ANY), 0);
    kvrec_record(&r, IDS(1, 2, 3), 0, true);
    assert_int_equal(kvrec_reusable(&r, NULL, 0, &ANY), 0);
    kvrec_free(&r);
}

static void test_reuse_below_the_minimum_is_not_taken(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3, 4, 5, 6));
    kvrec_policy min4 = {.min_reuse = 4, .bound_to_frontier = false};
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 9, 9), &min4), 0);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4, 9), &min4), 4);
    kvrec_free(&r);
}

static void test_the_frontier_bound_keeps_reuse_to_rows_a_prefill_wrote(void **state) {
    (void)state;
    kvrec r = built(IDS(1, 2, 3));
    kvrec_record(&r, IDS(4), 3, false); /* decode wrote row 3 */
    kvrec_record(&r, IDS(5), 4, false); /* and row 4 */
    kvrec_policy bound = {.min_reuse = 0, .bound_to_frontier = true};
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4, 5, 6), &bound), 3);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4, 5, 6), &ANY), 5);
    /* A prefill from the frontier moves it; rewinding below it pulls it back. */
    kvrec_record(&r, IDS(4, 5, 6), 3, true);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4, 5, 6, 7), &bound), 6);
    kvrec_rewind(&r, 2);
    assert_int_equal(kvrec_reusable(&r, IDS(1, 2, 3, 4, 5, 6, 7), &bound), 2);
    kvrec_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_strict_prefix_reports_its_whole_length),
        cmocka_unit_test(test_divergence_truncates_rather_than_refusing),
        cmocka_unit_test(test_at_least_one_token_is_always_left_to_prefill),
        cmocka_unit_test(test_taint_refuses_everything_until_cleared),
        cmocka_unit_test(test_a_write_that_leaves_a_gap_taints),
        cmocka_unit_test(test_a_write_past_the_capacity_taints),
        cmocka_unit_test(test_re_recording_over_a_span_replaces_it),
        cmocka_unit_test(test_rewind_shortens_what_is_reusable),
        cmocka_unit_test(test_an_empty_record_or_prompt_reuses_nothing),
        cmocka_unit_test(test_reuse_below_the_minimum_is_not_taken),
        cmocka_unit_test(test_the_frontier_bound_keeps_reuse_to_rows_a_prefill_wrote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
