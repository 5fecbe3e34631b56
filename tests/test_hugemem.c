/* Large buffers in huge pages (src/base/hugemem.h): what every caller relies on — zeros, alignment, its own bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "base/hugemem.h"

static void test_a_buffer_reads_as_zeros_and_is_aligned_to_a_huge_page(void **state) {
    (void)state;
    const size_t sizes[] = {1, 4095, HUGEMEM_PAGE - 1, HUGEMEM_PAGE, 3 * HUGEMEM_PAGE + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint8_t *p = hugemem_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % HUGEMEM_PAGE, 0);
        for (size_t at = 0; at < sizes[i]; at += 997) assert_int_equal(p[at], 0);
        assert_int_equal(p[sizes[i] - 1], 0);
        hugemem_free(p, sizes[i]);
    }
}

static void test_buffers_hold_their_own_bytes_after_touch(void **state) {
    (void)state;
    const size_t bytes = 2 * HUGEMEM_PAGE + 100;
    uint8_t *a = hugemem_alloc(bytes), *b = hugemem_alloc(bytes);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a + bytes <= b || b + bytes <= a);
    memset(a, 0xa5, bytes);
    hugemem_touch(b, bytes); /* faults the pages in, and leaves them zeros */
    for (size_t at = 0; at < bytes; at += 4096) {
        assert_int_equal(a[at], 0xa5);
        assert_int_equal(b[at], 0);
    }
    assert_int_equal(a[bytes - 1], 0xa5);
    hugemem_free(a, bytes);
    hugemem_free(b, bytes);
}

static void test_nothing_is_allocated_for_zero_or_impossible_sizes(void **state) {
    (void)state;
    assert_null(hugemem_alloc(0));
    assert_null(hugemem_alloc(SIZE_MAX));
    assert_null(hugemem_alloc(SIZE_MAX - HUGEMEM_PAGE));
    hugemem_free(NULL, 123); /* nothing to give back */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_buffer_reads_as_zeros_and_is_aligned_to_a_huge_page),
        cmocka_unit_test(test_buffers_hold_their_own_bytes_after_touch),
        cmocka_unit_test(test_nothing_is_allocated_for_zero_or_impossible_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
