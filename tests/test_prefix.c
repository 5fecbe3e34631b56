/* The prefix tree's rules (src/cache/prefix.h) on a small pool: sharing, copy-on-write, the record's rules,
 * salts, LRU eviction. Rows are stamped with the id at their position so copies can be checked. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cache/prefix.h"

#define B 32

typedef struct {
    kvpool *pool;
    prefix_tree *tree;
} fixture;

static const kvrec_policy ANY = {.min_reuse = 0, .bound_to_frontier = false};

static int setup_blocks(void **state, uint32_t n_blocks) {
    static fixture f;
    fkv_error err = {0};
    f.pool = kvpool_new(1, 4, FKV_KV_F32, B, (size_t)n_blocks * 2 * B * 4 * sizeof(float), &err);
    f.tree = f.pool ? prefix_new(f.pool, NULL, NULL, NULL, &err) : NULL;
    *state = &f;
    return f.tree ? 0 : -1;
}
static int setup(void **state) { return setup_blocks(state, 64); }
static int setup_small(void **state) { return setup_blocks(state, 6); }
static int teardown(void **state) {
    fixture *f = *state;
    prefix_free(f->tree);
    kvpool_free(f->pool);
    return 0;
}

static void ids_from(int32_t *ids, uint32_t n, int32_t base) {
    for (uint32_t i = 0; i < n; i++) ids[i] = base + (int32_t)i;
}

/* Feed ids[reused..n) as a prefill would: reserve, stamp each row's K with its id, commit. */
static void feed(fixture *f, prefix_seq *s, const int32_t *ids, uint32_t n, bool by_prefill) {
    fkv_error err = {0};
    uint32_t from = s->n_pos;
    assert_int_equal(prefix_reserve(f->tree, s, n - from, &err), 0);
    for (uint32_t p = from; p < n; p++) {
        const uint32_t block = prefix_block(f->tree, s, p);
        const kv_map m = kvpool_map(f->pool, &block);
        const float row[4] = {(float)ids[p]};
        kv_map_store(&m, 0, p % B, row, row, 4);
    }
    prefix_commit(f->tree, s, ids + from, n - from, by_prefill);
}

static float row_stamp(fixture *f, const prefix_seq *s, uint32_t p) {
    const uint32_t block = prefix_block(f->tree, s, p);
    const kv_map m = kvpool_map(f->pool, &block);
    float k[4], v[4];
    kv_map_read(&m, 0, p % B, k, v);
    assert_true(v[0] == k[0]);
    return k[0];
}

static uint32_t start(fixture *f, prefix_seq *s, const char *salt, const int32_t *ids, uint32_t n) {
    fkv_error err = {0};
    int64_t r = prefix_start(f->tree, salt, ids, n, &ANY, true, s, NULL, &err);
    if (r < 0) fail_msg("%s", err.msg);
    return (uint32_t)r;
}

static void test_a_cached_prefix_is_shared_block_for_block(void **state) {
    fixture *f = *state;
    int32_t a[150];
    ids_from(a, 150, 1000);
    prefix_seq s1, s2;
    assert_int_equal(start(f, &s1, NULL, a, 100), 0);
    feed(f, &s1, a, 100, true);
    uint32_t blocks[4];
    for (int i = 0; i < 4; i++) blocks[i] = prefix_block(f->tree, &s1, (uint32_t)i * B);
    prefix_finish(f->tree, &s1);
    assert_int_equal(start(f, &s2, NULL, a, 150), 100);
    for (int i = 0; i < 4; i++) assert_int_equal(prefix_block(f->tree, &s2, (uint32_t)i * B), blocks[i]); /* the tail taken over too */
    feed(f, &s2, a, 150, true);
    for (uint32_t p = 0; p < 150; p++) assert_true(row_stamp(f, &s2, p) == (float)a[p]);
    prefix_finish(f->tree, &s2);
}

static void test_divergence_inside_a_block_copies_the_rows_it_keeps(void **state) {
    fixture *f = *state;
    int32_t a[100], b[100];
    ids_from(a, 100, 1);
    ids_from(b, 100, 5000);
    memcpy(b, a, sizeof(int32_t) * 70);
    prefix_seq s1, s2;
    start(f, &s1, NULL, a, 100);
    feed(f, &s1, a, 100, true);
    assert_int_equal(start(f, &s2, NULL, b, 100), 70);
    assert_int_equal(prefix_block(f->tree, &s2, 0 * B), prefix_block(f->tree, &s1, 0 * B));
    assert_int_equal(prefix_block(f->tree, &s2, 1 * B), prefix_block(f->tree, &s1, 1 * B));
    assert_int_not_equal(prefix_block(f->tree, &s2, 2 * B), prefix_block(f->tree, &s1, 2 * B)); /* s1 holds it: copied */
    feed(f, &s2, b, 100, true);
    for (uint32_t p = 0; p < 100; p++) {
        assert_true(row_stamp(f, &s2, p) == (float)b[p]);
        assert_true(row_stamp(f, &s1, p) == (float)a[p]); /* the other sequence is untouched */
    }
    assert_int_equal(prefix_get_stats(f->tree).blocks_shared, 2);
    prefix_finish(f->tree, &s1);
    prefix_finish(f->tree, &s2);
}

static void test_where_a_prompt_parts_from_the_cache_is_reported(void **state) {
    fixture *f = *state;
    int32_t a[100], b[100];
    ids_from(a, 100, 1);
    ids_from(b, 100, 500);
    memcpy(b, a, sizeof(int32_t) * 70);
    prefix_seq s1, s2;
    start(f, &s1, NULL, a, 100);
    feed(f, &s1, a, 100, true);
    prefix_finish(f->tree, &s1);
    assert_int_equal(start(f, &s2, NULL, b, 100), 70);
    assert_int_equal(s2.divergence.at, 70);
    assert_true(s2.divergence.n_cached > 0);
    assert_int_equal(s2.divergence.cached[0], a[70]);
    prefix_finish(f->tree, &s2);
    /* Parting exactly at a block boundary (64): the cache's next block is reported. */
    memcpy(b, a, sizeof(int32_t) * 64);
    b[64] = -5;
    assert_int_equal(start(f, &s2, NULL, b, 100), 64);
    assert_int_equal(s2.divergence.at, 64);
    assert_int_equal(s2.divergence.cached[0], a[64]);
    prefix_finish(f->tree, &s2);
    /* A prompt that extends the cache does not part from it. */
    int32_t c[120];
    ids_from(c, 120, 1);
    start(f, &s2, NULL, c, 120);
    assert_int_equal(s2.divergence.n_cached, 0);
    prefix_finish(f->tree, &s2);
}

static void test_the_records_rules_hold_in_the_tree(void **state) {
    fixture *f = *state;
    int32_t a[80];
    ids_from(a, 80, 7);
    prefix_seq s;
    start(f, &s, NULL, a, 80);
    feed(f, &s, a, 80, true);
    prefix_finish(f->tree, &s);
    /* At least one token left to prefill. */
    assert_int_equal(start(f, &s, NULL, a, 80), 79);
    prefix_finish(f->tree, &s);
    assert_int_equal(start(f, &s, NULL, a, 1), 0);
    prefix_finish(f->tree, &s);
    /* Minimum reuse. */
    fkv_error err = {0};
    kvrec_policy min64 = {.min_reuse = 64, .bound_to_frontier = false};
    assert_int_equal(prefix_start(f->tree, NULL, a, 60, &min64, true, &s, NULL, &err), 0);
    prefix_finish(f->tree, &s);
    /* Cache off. */
    assert_int_equal(prefix_start(f->tree, NULL, a, 80, &ANY, false, &s, NULL, &err), 0);
    prefix_finish(f->tree, &s);
    /* Divergence at the first token. */
    int32_t b[10];
    ids_from(b, 10, 9999);
    assert_int_equal(start(f, &s, NULL, b, 10), 0);
    prefix_finish(f->tree, &s);
}

static void test_the_frontier_bound_skips_rows_decode_wrote(void **state) {
    fixture *f = *state;
    int32_t a[60];
    ids_from(a, 60, 300);
    prefix_seq s;
    start(f, &s, NULL, a, 40);
    feed(f, &s, a, 40, true);
    feed(f, &s, a, 50, false); /* decode wrote 40..49 */
    prefix_finish(f->tree, &s);
    fkv_error err = {0};
    kvrec_policy bound = {.min_reuse = 0, .bound_to_frontier = true};
    assert_int_equal(prefix_start(f->tree, NULL, a, 60, &bound, true, &s, NULL, &err), 40);
    prefix_finish(f->tree, &s);
    assert_int_equal(start(f, &s, NULL, a, 60), 50);
    prefix_finish(f->tree, &s);
}

static void test_different_salts_never_share(void **state) {
    fixture *f = *state;
    int32_t a[70];
    ids_from(a, 70, 42);
    prefix_seq s;
    start(f, &s, "alice", a, 70);
    feed(f, &s, a, 70, true);
    prefix_finish(f->tree, &s);
    assert_int_equal(start(f, &s, "bob", a, 70), 0);
    prefix_finish(f->tree, &s);
    assert_int_equal(start(f, &s, NULL, a, 70), 0);
    prefix_finish(f->tree, &s);
    assert_int_equal(start(f, &s, "alice", a, 70), 69);
    prefix_finish(f->tree, &s);
}

/* Six blocks: a client sending a new cache_salt with every request grows nothing — a salt's root is taken over once
 * its rows are evicted and no sequence holds it — and a taken-over root shows the new salt none of the old one's rows. */
static void test_a_new_salt_per_request_reuses_the_roots_of_evicted_salts(void **state) {
    fixture *f = *state;
    int32_t a[64];
    ids_from(a, 64, 7);
    prefix_seq s, held;
    char salt[32];
    start(f, &held, "held", a, 64); /* running: its root is never taken over */
    for (int i = 0; i < 200; i++) {
        snprintf(salt, sizeof salt, "tenant-%d", i);
        assert_int_equal(start(f, &s, salt, a, 64), 0); /* a new salt: nothing of the others' */
        feed(f, &s, a, 64, true);
        prefix_finish(f->tree, &s);
        assert_true(prefix_get_stats(f->tree).salts <= 5); /* 6 blocks hold at most 3 salts' rows, + held, + "" */
    }
    assert_int_equal(start(f, &s, salt, a, 64), 63); /* the last salt's rows are still its own */
    prefix_finish(f->tree, &s);
    assert_int_equal(start(f, &s, "tenant-0", a, 64), 0);
    prefix_finish(f->tree, &s);
    prefix_finish(f->tree, &held);
}

/* Six blocks: two finished sequences of 3 blocks fill the pool; a third evicts the least recently used,
 * never a referenced block, and fails cleanly when everything is referenced. */
static void test_eviction_is_lru_and_spares_referenced_blocks(void **state) {
    fixture *f = *state;
    int32_t a[96], b[96], c[96];
    ids_from(a, 96, 1);
    ids_from(b, 96, 2000);
    ids_from(c, 96, 4000);
    prefix_seq sa, sb, sc;
    start(f, &sa, NULL, a, 96);
    feed(f, &sa, a, 96, true);
    prefix_finish(f->tree, &sa);
    start(f, &sb, NULL, b, 96);
    feed(f, &sb, b, 96, true);
    prefix_finish(f->tree, &sb);
    /* Touch a: b is now the least recently used. */
    assert_int_equal(start(f, &sa, NULL, a, 96), 95);
    prefix_finish(f->tree, &sa);
    start(f, &sc, NULL, c, 96);
    feed(f, &sc, c, 96, true);
    /* c needs 3 blocks; touching a also copied its partly reused last block (one more). */
    assert_int_equal(prefix_get_stats(f->tree).evictions, 4);
    prefix_finish(f->tree, &sc);
    assert_int_equal(start(f, &sa, NULL, a, 96), 95); /* a survived */
    prefix_finish(f->tree, &sa);
    assert_int_equal(start(f, &sb, NULL, b, 96), 0); /* b was evicted */
    prefix_finish(f->tree, &sb);
    /* Everything referenced: a reservation fails with a clear error and nothing breaks. */
    int32_t d[64], e[64];
    ids_from(d, 64, 6000);
    ids_from(e, 64, 7000);
    prefix_seq s1, s2, s3;
    start(f, &s1, NULL, d, 64);
    feed(f, &s1, d, 64, true);
    start(f, &s2, NULL, e, 64);
    feed(f, &s2, e, 64, true);
    fkv_error err = {0};
    assert_int_equal(prefix_start(f->tree, NULL, b, 96, &ANY, true, &s3, NULL, &err), 0);
    assert_int_equal(prefix_reserve(f->tree, &s3, 96, &err), -1);
    assert_int_equal(err.code, FKV_E_KV_FULL); /* the scheduler preempts on the code, never on the text */
    assert_non_null(strstr(err.msg, "KV memory is full"));
    prefix_finish(f->tree, &s3);
    prefix_finish(f->tree, &s1);
    prefix_finish(f->tree, &s2);
    assert_int_equal(prefix_get_stats(f->tree).blocks_free + prefix_get_stats(f->tree).blocks_in_use, 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_cached_prefix_is_shared_block_for_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_divergence_inside_a_block_copies_the_rows_it_keeps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_records_rules_hold_in_the_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_where_a_prompt_parts_from_the_cache_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_frontier_bound_skips_rows_decode_wrote, setup, teardown),
        cmocka_unit_test_setup_teardown(test_different_salts_never_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_is_lru_and_spares_referenced_blocks, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_a_new_salt_per_request_reuses_the_roots_of_evicted_salts, setup_small,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
