/* The record's rules (src/cache/kvrec.h), one test per rule. How far a prompt agrees with the cache is the tree's to
 * measure (tests/test_prefix.c); what may be reused of that agreement is decided here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache/kvrec.h"

static const kvrec_policy ANY = {.min_reuse = 0};

static void test_an_agreement_shorter_than_the_prompt_is_reused_whole(void **state) {
    (void)state;
    kvrec_reuse r = kvrec_decide(3, 10, &ANY, NULL, NULL);
    assert_int_equal(r.agreed, 3);
    assert_int_equal(r.capped, 3);
    assert_int_equal(r.reused, 3);
}

static void test_at_least_one_token_is_always_left_to_prefill(void **state) {
    (void)state;
    assert_int_equal(kvrec_decide(3, 3, &ANY, NULL, NULL).reused, 2);
    assert_int_equal(kvrec_decide(9, 2, &ANY, NULL, NULL).reused, 1);
    assert_int_equal(kvrec_decide(1, 1, &ANY, NULL, NULL).reused, 0);
    assert_int_equal(kvrec_decide(0, 0, &ANY, NULL, NULL).reused, 0);
}

static void test_a_rewind_may_take_every_agreeing_row(void **state) {
    (void)state;
    const kvrec_policy whole = {.whole = true};
    assert_int_equal(kvrec_decide(3, 3, &whole, NULL, NULL).reused, 3);
    assert_int_equal(kvrec_decide(5, 3, &whole, NULL, NULL).reused, 3);
}

static void test_reuse_below_the_minimum_is_not_taken(void **state) {
    (void)state;
    const kvrec_policy min4 = {.min_reuse = 4};
    assert_int_equal(kvrec_decide(3, 10, &min4, NULL, NULL).reused, 0);
    assert_int_equal(kvrec_decide(4, 10, &min4, NULL, NULL).reused, 4);
    assert_int_equal(kvrec_decide(9, 5, &min4, NULL, NULL).reused, 4); /* capped to 4, still enough */
}

/* Rows held at lengths that are multiples of 8 only (as if window rows between were given back). */
static uint32_t held_at_eights(const void *ctx, uint32_t p) {
    (void)ctx;
    return p / 8 * 8;
}

static void test_rows_that_are_not_held_are_never_reused(void **state) {
    (void)state;
    kvrec_reuse r = kvrec_decide(30, 40, &ANY, held_at_eights, NULL);
    assert_int_equal(r.capped, 30);
    assert_int_equal(r.held, 24);
    assert_int_equal(r.reused, 24);
    const kvrec_policy min25 = {.min_reuse = 25};
    r = kvrec_decide(30, 40, &min25, held_at_eights, NULL);
    assert_int_equal(r.held, 24);
    assert_int_equal(r.reused, 0); /* the minimum applies to what is held, not to what agreed */
}

/* A recurrent state kept at one position (the ctx), and the zero state at 0. */
static uint32_t state_at(const void *ctx, uint32_t p) {
    const uint32_t at = *(const uint32_t *)ctx;
    return at <= p ? at : 0;
}

/* Recurrent layers: the reuse is the longest length where the rows are held and a state is at hand — at the kept
 * state when the agreement reaches it, else 0 — and a shorter held length gives way to a state below it. */
static void test_recurrent_layers_resume_only_where_a_state_is_kept(void **state) {
    (void)state;
    uint32_t at = 20;
    kvrec_policy p = {.state = state_at, .state_ctx = &at};
    kvrec_reuse r = kvrec_decide(30, 40, &p, NULL, NULL);
    assert_int_equal(r.held, 30);
    assert_int_equal(r.state, 20);
    assert_int_equal(r.reused, 20);
    assert_int_equal(kvrec_decide(19, 40, &p, NULL, NULL).reused, 0); /* the agreement stops short of the state */
    assert_int_equal(kvrec_decide(30, 21, &p, NULL, NULL).reused, 20);
    assert_int_equal(kvrec_decide(30, 20, &p, NULL, NULL).reused, 0); /* capped at 19: the last row is computed */
    at = 24;
    r = kvrec_decide(30, 40, &p, held_at_eights, NULL); /* rows held at 24, the state at 24: both */
    assert_int_equal(r.state, 24);
    at = 20;
    assert_int_equal(kvrec_decide(30, 40, &p, held_at_eights, NULL).reused, 0); /* rows at 20 are not held */
    const kvrec_policy min25 = {.min_reuse = 25, .state = state_at, .state_ctx = &at};
    assert_int_equal(kvrec_decide(30, 40, &min25, NULL, NULL).reused, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_an_agreement_shorter_than_the_prompt_is_reused_whole),
        cmocka_unit_test(test_at_least_one_token_is_always_left_to_prefill),
        cmocka_unit_test(test_a_rewind_may_take_every_agreeing_row),
        cmocka_unit_test(test_reuse_below_the_minimum_is_not_taken),
        cmocka_unit_test(test_rows_that_are_not_held_are_never_reused),
        cmocka_unit_test(test_recurrent_layers_resume_only_where_a_state_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
