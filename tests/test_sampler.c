/* test_sampler.c — the sampler's filters, its determinism, and its handling of odd logits.
 *
 * Distribution tests draw N_DRAWS times from a seeded sampler and compare frequencies with the exact
 * probabilities. With N_DRAWS = 20000 a frequency's standard deviation is at most
 * sqrt(0.25 / 20000) ≈ 0.0035, so FREQ_TOL = 0.015 is over 4 sigma: a correct sampler would pass
 * with almost any seed, while a wrong renormalization or filter boundary moves some frequency by
 * several percent. The seeds are fixed, so each run is also exactly repeatable.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampler.h"

#define N_DRAWS 20000
#define FREQ_TOL 0.015

/* Sampling parameters with every filter off, so a test turns on only what it checks. */
static fkv_sampler_params plain(float temp, uint64_t seed) {
    fkv_sampler_params p = fkv_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

/* A test-local generator for random logits, independent of the sampler's. */
static uint64_t test_rng_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static float random_logit(uint64_t *x, float scale) {
    return ((float)(test_rng_next(x) >> 40) * 0x1.0p-24f * 2.0f - 1.0f) * scale;
}

/* counts[0..n_vocab) = how often each id was drawn in n_draws calls. */
static void draw_histogram(const fkv_sampler_params *p, const float *logits, int32_t n_vocab, const int32_t *history,
                           int n_history, int n_draws, int *counts) {
    fkv_sampler *s = fkv_sampler_new(p, n_vocab);
    assert_non_null(s);
    memset(counts, 0, (size_t)n_vocab * sizeof *counts);
    for (int i = 0; i < n_draws; i++) {
        int32_t id = fkv_sampler_sample(s, logits, history, n_history);
        assert_in_range(id, 0, n_vocab - 1);
        counts[id]++;
    }
    fkv_sampler_free(s);
}

static void assert_frequency_near(const int *counts, int32_t id, double expected) {
    double freq = (double)counts[id] / N_DRAWS;
    if (fabs(freq - expected) > FREQ_TOL)
        fail_msg("id %d drawn with frequency %.4f, expected %.4f +- %.3f", id, freq, expected, FREQ_TOL);
}

/* The exact distribution softmax(logits / temp) over ids for which keep[id] is set. */
static void expected_distribution(const float *logits, const int *keep, int32_t n, double temp, double *prob) {
    double max = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (keep[i]) max = fmax(max, logits[i]);
    for (int32_t i = 0; i < n; i++) {
        prob[i] = keep[i] ? exp((logits[i] - max) / temp) : 0.0;
        sum += prob[i];
    }
    for (int32_t i = 0; i < n; i++) prob[i] /= sum;
}

static int32_t greedy(const float *logits, int32_t n_vocab, const int32_t *history, int n_history,
                      float penalty, int32_t last_n) {
    fkv_sampler_params p = plain(0.0f, 0);
    p.repeat_penalty = penalty;
    p.repeat_last_n = last_n;
    fkv_sampler *s = fkv_sampler_new(&p, n_vocab);
    assert_non_null(s);
    int32_t id = fkv_sampler_sample(s, logits, history, n_history);
    fkv_sampler_free(s);
    return id;
}

static void test_greedy_picks_the_argmax(void **state) {
    (void)state;
    float logits[9] = {0.5f, -3.0f, 2.0f, 1.0f, 7.25f, 7.0f, -8.0f, 0.0f, 7.2f};
    assert_int_equal(greedy(logits, 9, NULL, 0, 1.0f, 64), 4);
    /* The defaults' filters do not matter when temp <= 0. */
    fkv_sampler_params p = fkv_sampler_default_params();
    p.temp = -1.0f;
    fkv_sampler *s = fkv_sampler_new(&p, 9);
    assert_non_null(s);
    for (int i = 0; i < 10; i++) assert_int_equal(fkv_sampler_sample(s, logits, NULL, 0), 4);
    fkv_sampler_free(s);
}

static void test_greedy_ties_go_to_the_lowest_id(void **state) {
    (void)state;
    float logits[6] = {1.0f, 3.0f, 5.0f, 5.0f, 2.0f, 5.0f};
    assert_int_equal(greedy(logits, 6, NULL, 0, 1.0f, 64), 2);
    float flat[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    assert_int_equal(greedy(flat, 4, NULL, 0, 1.0f, 64), 0);
}

static void test_greedy_applies_the_repetition_penalty_first(void **state) {
    (void)state;
    float logits[3] = {0.0f, 2.0f, 1.9f};
    int32_t history[1] = {1};
    assert_int_equal(greedy(logits, 3, history, 1, 1.0f, 64), 1);
    assert_int_equal(greedy(logits, 3, history, 1, 1.2f, 64), 2); /* 2.0 / 1.2 = 1.67 < 1.9 */
}

static void test_the_same_seed_gives_the_same_draws_and_another_seed_does_not(void **state) {
    (void)state;
    enum { N_VOCAB = 64, N_CALLS = 2000 };
    float logits[N_VOCAB];
    uint64_t x = 7;
    for (int i = 0; i < N_VOCAB; i++) logits[i] = random_logit(&x, 2.0f);
    fkv_sampler_params p = fkv_sampler_default_params(); /* every filter on */
    p.top_k = 32;
    p.min_p = 0.01f;
    p.seed = 1234;
    fkv_sampler_params other = p;
    other.seed = 1235;
    fkv_sampler *a = fkv_sampler_new(&p, N_VOCAB), *b = fkv_sampler_new(&p, N_VOCAB), *c = fkv_sampler_new(&other, N_VOCAB);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    int n_differ = 0;
    for (int i = 0; i < N_CALLS; i++) {
        int32_t ida = fkv_sampler_sample(a, logits, NULL, 0);
        assert_int_equal(ida, fkv_sampler_sample(b, logits, NULL, 0));
        n_differ += ida != fkv_sampler_sample(c, logits, NULL, 0);
    }
    /* Independent streams over dozens of likely ids disagree on most calls; 10% is a loose floor. */
    assert_true(n_differ > N_CALLS / 10);
    fkv_sampler_free(a);
    fkv_sampler_free(b);
    fkv_sampler_free(c);
}

/* Uniform logits over 256 ids make each draw the top byte of the generator's output, so this pins
 * splitmix64 + xoshiro256** and the 24-bit uniform: the values came from an independent Python
 * implementation of the reference algorithms, and must match on every machine. */
static void test_a_seed_gives_the_same_draws_on_every_machine(void **state) {
    (void)state;
    static const int32_t expected[12] = {21, 97, 174, 236, 253, 197, 184, 217, 194, 149, 174, 74};
    float logits[256] = {0};
    fkv_sampler_params p = plain(1.0f, 42);
    fkv_sampler *s = fkv_sampler_new(&p, 256);
    assert_non_null(s);
    for (int i = 0; i < 12; i++) assert_int_equal(fkv_sampler_sample(s, logits, NULL, 0), expected[i]);
    fkv_sampler_free(s);
}

static void test_top_k_of_one_equals_greedy_at_any_temperature(void **state) {
    (void)state;
    enum { N_VOCAB = 300 };
    static const float temps[] = {0.05f, 1.0f, 5.0f, 1000.0f};
    float logits[N_VOCAB];
    int32_t history[40];
    uint64_t x = 99;
    for (int t = 0; t < 4; t++) {
        fkv_sampler_params p = plain(temps[t], 5);
        p.top_k = 1;
        p.top_p = 0.9f;
        p.repeat_penalty = 1.3f;
        p.repeat_last_n = 16;
        fkv_sampler *s = fkv_sampler_new(&p, N_VOCAB);
        assert_non_null(s);
        for (int row = 0; row < 100; row++) {
            /* Logits on a coarse grid so the maximum is often tied. */
            for (int i = 0; i < N_VOCAB; i++) logits[i] = roundf(random_logit(&x, 4.0f));
            for (int i = 0; i < 40; i++) history[i] = (int32_t)(test_rng_next(&x) % N_VOCAB);
            assert_int_equal(fkv_sampler_sample(s, logits, history, 40), greedy(logits, N_VOCAB, history, 40, 1.3f, 16));
        }
        fkv_sampler_free(s);
    }
}

static void test_top_k_keeps_the_k_best_and_breaks_ties_by_lower_id(void **state) {
    (void)state;
    float logits[6] = {1.0f, 3.0f, 0.0f, 3.0f, 3.0f, 2.0f};
    fkv_sampler_params p = plain(1.0f, 11);
    p.top_k = 2;
    int counts[6];
    draw_histogram(&p, logits, 6, NULL, 0, N_DRAWS, counts);
    /* Three ids tie at 3.0; the two lowest (1 and 3) are kept, with equal chances. */
    assert_int_equal(counts[1] + counts[3], N_DRAWS);
    assert_frequency_near(counts, 1, 0.5);
}

static void test_top_k_on_a_large_vocabulary_draws_only_from_the_true_top_k(void **state) {
    (void)state;
    enum { N_VOCAB = 32000, K = 40 };
    float *logits = malloc(N_VOCAB * sizeof *logits), *sorted = malloc(N_VOCAB * sizeof *sorted);
    assert_non_null(logits);
    assert_non_null(sorted);
    uint64_t x = 3;
    for (int i = 0; i < N_VOCAB; i++) logits[i] = random_logit(&x, 10.0f);
    memcpy(sorted, logits, N_VOCAB * sizeof *sorted);
    /* The K-th largest logit, by a selection independent of the sampler's heap. */
    for (int i = 0; i < K; i++) {
        int best = i;
        for (int j = i + 1; j < N_VOCAB; j++)
            if (sorted[j] > sorted[best]) best = j;
        float t = sorted[i];
        sorted[i] = sorted[best];
        sorted[best] = t;
    }
    float kth = sorted[K - 1];
    fkv_sampler_params p = plain(3.0f, 8); /* a high temperature spreads draws over all K */
    p.top_k = K;
    fkv_sampler *s = fkv_sampler_new(&p, N_VOCAB);
    assert_non_null(s);
    int distinct = 0;
    unsigned char *seen = calloc(N_VOCAB, 1);
    assert_non_null(seen);
    for (int i = 0; i < 500; i++) {
        int32_t id = fkv_sampler_sample(s, logits, NULL, 0);
        assert_true(logits[id] >= kth);
        distinct += !seen[id];
        seen[id] = 1;
    }
    assert_true(distinct > K / 2);
    fkv_sampler_free(s);
    free(seen);
    free(sorted);
    free(logits);
}

static void test_top_p_keeps_the_smallest_set_reaching_p(void **state) {
    (void)state;
    /* Probabilities 0.4, 0.3, 0.15, 0.1, 0.05 spread over ids out of order. */
    static const double prob[5] = {0.3, 0.1, 0.05, 0.4, 0.15};
    float logits[5];
    for (int i = 0; i < 5; i++) logits[i] = (float)log(prob[i]);
    fkv_sampler_params p = plain(1.0f, 21);
    p.top_p = 0.8f; /* 0.4 + 0.3 = 0.7 < 0.8 <= 0.85: ids 3, 0, 4 */
    int counts[5];
    draw_histogram(&p, logits, 5, NULL, 0, N_DRAWS, counts);
    assert_int_equal(counts[1], 0);
    assert_int_equal(counts[2], 0);
    assert_frequency_near(counts, 3, 0.4 / 0.85);
    assert_frequency_near(counts, 0, 0.3 / 0.85);
    assert_frequency_near(counts, 4, 0.15 / 0.85);

    p.top_p = 0.35f; /* the top id alone reaches it */
    draw_histogram(&p, logits, 5, NULL, 0, 500, counts);
    assert_int_equal(counts[3], 500);

    p.top_p = 0.0f; /* reaching nothing still keeps one */
    draw_histogram(&p, logits, 5, NULL, 0, 500, counts);
    assert_int_equal(counts[3], 500);
}

static void test_top_p_after_top_k_renormalizes_over_the_k_kept(void **state) {
    (void)state;
    static const double prob[5] = {0.3, 0.1, 0.05, 0.4, 0.15};
    float logits[5];
    for (int i = 0; i < 5; i++) logits[i] = (float)log(prob[i]);
    fkv_sampler_params p = plain(1.0f, 22);
    p.top_k = 2;    /* ids 3 and 0: 4/7 and 3/7 */
    p.top_p = 0.5f; /* 4/7 = 0.571 >= 0.5: id 3 alone (over all five ids it would take 0.4 + 0.3) */
    int counts[5];
    draw_histogram(&p, logits, 5, NULL, 0, 1000, counts);
    assert_int_equal(counts[3], 1000);
}

static int compare_descending(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a < b) - (a > b);
}

/* 1000 ids of comparable probability, p set halfway between the mass of the best m - 1 and of the
 * best m, so the nucleus is exactly the best m with a margin far above rounding. Every one of them
 * must appear in N_DRAWS draws (each expects 20000 / m, at least about 80) and nothing else may. */
static void test_top_p_keeps_exactly_the_nucleus_of_a_vocabulary_larger_than_a_sort(void **state) {
    (void)state;
    enum { N_VOCAB = 1000 };
    static const int nucleus_sizes[] = {37, 100, 251};
    float logits[N_VOCAB];
    double prob[N_VOCAB], sorted[N_VOCAB];
    int all[N_VOCAB], counts[N_VOCAB];
    uint64_t x = 29;
    for (int i = 0; i < N_VOCAB; i++) {
        logits[i] = random_logit(&x, 1.0f);
        all[i] = 1;
    }
    expected_distribution(logits, all, N_VOCAB, 1.0, prob);
    memcpy(sorted, prob, sizeof prob);
    qsort(sorted, N_VOCAB, sizeof *sorted, compare_descending);
    for (size_t t = 0; t < sizeof nucleus_sizes / sizeof nucleus_sizes[0]; t++) {
        int m = nucleus_sizes[t];
        double cum = 0.0;
        for (int i = 0; i < m - 1; i++) cum += sorted[i];
        fkv_sampler_params p = plain(1.0f, 24);
        p.top_p = (float)(cum + sorted[m - 1] / 2);
        draw_histogram(&p, logits, N_VOCAB, NULL, 0, N_DRAWS, counts);
        for (int i = 0; i < N_VOCAB; i++) {
            bool in_nucleus = prob[i] >= sorted[m - 1];
            if (in_nucleus != (counts[i] > 0))
                fail_msg("id %d, %s a nucleus of %d, was drawn %d times", i, in_nucleus ? "inside" : "outside", m,
                         counts[i]);
        }
    }
}

/* A peaked row has a nucleus of about a thousand ids (the sampler's partial selection finds it); a
 * nearly flat one has most of the vocabulary (the sampler falls back to one full sort). */
static void test_top_p_on_a_large_vocabulary_draws_only_from_the_nucleus(void **state) {
    (void)state;
    enum { N_VOCAB = 32000 };
    static const struct {
        float scale, top_p;
    } rows[] = {{12.0f, 0.5f}, {0.5f, 0.9f}};
    float *logits = malloc(N_VOCAB * sizeof *logits);
    double *prob = malloc(N_VOCAB * sizeof *prob), *sorted = malloc(N_VOCAB * sizeof *sorted);
    int *all = malloc(N_VOCAB * sizeof *all);
    assert_non_null(logits);
    assert_non_null(prob);
    assert_non_null(sorted);
    assert_non_null(all);
    uint64_t x = 17;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int i = 0; i < N_VOCAB; i++) {
            logits[i] = random_logit(&x, rows[r].scale);
            all[i] = 1;
        }
        expected_distribution(logits, all, N_VOCAB, 1.0, prob);
        memcpy(sorted, prob, N_VOCAB * sizeof *sorted);
        qsort(sorted, N_VOCAB, sizeof *sorted, compare_descending);
        double cum = 0.0;
        int n_nucleus = 0;
        while (cum < rows[r].top_p) cum += sorted[n_nucleus++];
        double threshold = sorted[n_nucleus - 1];
        fkv_sampler_params p = plain(1.0f, 23);
        p.top_p = rows[r].top_p;
        fkv_sampler *s = fkv_sampler_new(&p, N_VOCAB);
        assert_non_null(s);
        /* Both nuclei hold hundreds of ids of similar probability: 300 draws must spread over them. */
        int n_outside = 0, n_distinct = 0;
        memset(all, 0, N_VOCAB * sizeof *all);
        for (int i = 0; i < 300; i++) {
            int32_t id = fkv_sampler_sample(s, logits, NULL, 0);
            n_outside += prob[id] < threshold;
            n_distinct += !all[id];
            all[id] = 1;
        }
        if (n_outside) fail_msg("%d of 300 draws fell outside a nucleus of %d ids", n_outside, n_nucleus);
        assert_true(n_distinct > 100);
        fkv_sampler_free(s);
    }
    free(all);
    free(sorted);
    free(prob);
    free(logits);
}

static void test_min_p_excludes_ids_below_min_p_times_the_top_probability(void **state) {
    (void)state;
    static const double prob[5] = {0.1, 0.5, 0.08, 0.12, 0.2};
    float logits[5];
    for (int i = 0; i < 5; i++) logits[i] = (float)log(prob[i]);
    fkv_sampler_params p = plain(1.0f, 31);
    p.min_p = 0.22f; /* 0.22 x 0.5 = 0.11: ids 1, 4, 3 stay; 0 (0.1) and 2 (0.08) go */
    int counts[5];
    draw_histogram(&p, logits, 5, NULL, 0, N_DRAWS, counts);
    assert_int_equal(counts[0], 0);
    assert_int_equal(counts[2], 0);
    assert_frequency_near(counts, 1, 0.5 / 0.82);
    assert_frequency_near(counts, 4, 0.2 / 0.82);
    assert_frequency_near(counts, 3, 0.12 / 0.82);

    p.min_p = 1.5f; /* above 1 nothing qualifies; the top id is kept */
    draw_histogram(&p, logits, 5, NULL, 0, 500, counts);
    assert_int_equal(counts[1], 500);
}

static void test_temperature_sharpens_below_one_and_flattens_above(void **state) {
    (void)state;
    float logits[3] = {(float)log(0.2), (float)log(0.5), (float)log(0.3)};
    int keep[3] = {1, 1, 1};
    static const double temps[3] = {0.5, 1.0, 2.0};
    double top_freq[3], bottom_freq[3];
    for (int t = 0; t < 3; t++) {
        fkv_sampler_params p = plain((float)temps[t], 41);
        int counts[3];
        double prob[3];
        draw_histogram(&p, logits, 3, NULL, 0, N_DRAWS, counts);
        expected_distribution(logits, keep, 3, temps[t], prob); /* 0.5: p^2 renormalized; 2: sqrt(p) */
        for (int i = 0; i < 3; i++) assert_frequency_near(counts, i, prob[i]);
        top_freq[t] = (double)counts[1] / N_DRAWS;
        bottom_freq[t] = (double)counts[0] / N_DRAWS;
    }
    /* The expected gaps (0.66 / 0.5 / 0.42 for the top id) are far wider than FREQ_TOL. */
    assert_true(top_freq[0] > top_freq[1] && top_freq[1] > top_freq[2]);
    assert_true(bottom_freq[0] < bottom_freq[1] && bottom_freq[1] < bottom_freq[2]);
}

static void test_repetition_penalty_divides_positive_and_multiplies_negative_logits(void **state) {
    (void)state;
    float positive[2] = {2.0f, 1.5f};
    float negative[2] = {-1.0f, -1.2f};
    int32_t history[1] = {0};
    assert_int_equal(greedy(positive, 2, history, 1, 1.5f, 64), 1); /* 2.0 / 1.5 = 1.33 < 1.5 */
    assert_int_equal(greedy(negative, 2, history, 1, 1.5f, 64), 1); /* -1.0 x 1.5 = -1.5 < -1.2 */
    /* A penalty below 1 rewards repetition instead. */
    float reward[2] = {1.0f, 1.5f};
    assert_int_equal(greedy(reward, 2, history, 1, 0.5f, 64), 0);
}

static void test_repetition_penalty_lowers_the_chance_of_recent_ids(void **state) {
    (void)state;
    float logits[4] = {1.0f, 1.0f, -1.0f, -1.0f};
    int32_t history[2] = {2, 0};
    fkv_sampler_params p = plain(1.0f, 51);
    p.repeat_penalty = 2.0f;
    int counts[4];
    draw_histogram(&p, logits, 4, history, 2, N_DRAWS, counts);
    float penalized[4] = {0.5f, 1.0f, -2.0f, -1.0f};
    int keep[4] = {1, 1, 1, 1};
    double prob[4];
    expected_distribution(penalized, keep, 4, 1.0, prob);
    for (int i = 0; i < 4; i++) assert_frequency_near(counts, i, prob[i]);
    assert_true(counts[0] < counts[1]);
    assert_true(counts[2] < counts[3]);
}

static void test_repetition_penalty_applies_once_per_distinct_id(void **state) {
    (void)state;
    float logits[2] = {2.0f, 1.5f};
    int32_t history[3] = {0, 0, 0};
    /* Once: 2.0 / 1.2 = 1.67 > 1.5. Three times would give 2.0 / 1.728 = 1.16 < 1.5. */
    assert_int_equal(greedy(logits, 2, history, 3, 1.2f, 64), 0);
}

static void test_repetition_penalty_reaches_only_the_last_n_ids(void **state) {
    (void)state;
    float logits[3] = {2.0f, 1.9f, 0.0f};
    int32_t history[4] = {0, 2, 2, 2};
    assert_int_equal(greedy(logits, 3, history, 4, 1.5f, 4), 1); /* id 0 is in the window */
    assert_int_equal(greedy(logits, 3, history, 4, 1.5f, 3), 0); /* id 0 has left it */
    assert_int_equal(greedy(logits, 3, history, 4, 1.5f, 0), 0); /* 0: off */
    assert_int_equal(greedy(logits, 3, history, 4, 1.5f, -1), 1); /* negative: the whole history */

    /* The same holds for draws: id 0 has left a window of 2, so only id 1 is penalized. */
    float even[2] = {1.0f, 1.0f};
    int32_t old[3] = {0, 1, 1};
    fkv_sampler_params p = plain(1.0f, 52);
    p.repeat_penalty = 3.0f;
    p.repeat_last_n = 2;
    int counts[2];
    draw_histogram(&p, even, 2, old, 3, N_DRAWS, counts);
    float penalized[2] = {1.0f, 1.0f / 3.0f};
    int keep[2] = {1, 1};
    double prob[2];
    expected_distribution(penalized, keep, 2, 1.0, prob); /* 0.66 for id 0; 0.5 had both been penalized */
    assert_frequency_near(counts, 0, prob[0]);
}

static void test_sampling_leaves_the_logits_unchanged(void **state) {
    (void)state;
    enum { N_VOCAB = 1000 };
    float logits[N_VOCAB], before[N_VOCAB];
    int32_t history[100];
    uint64_t x = 61;
    for (int i = 0; i < N_VOCAB; i++) logits[i] = random_logit(&x, 5.0f);
    logits[10] = NAN;
    logits[11] = INFINITY;
    logits[12] = -INFINITY;
    for (int i = 0; i < 100; i++) history[i] = (int32_t)(test_rng_next(&x) % N_VOCAB);
    history[0] = 10;
    history[1] = 11;
    memcpy(before, logits, sizeof logits);
    /* Greedy, the heap (top-k on), the full sort (top-k off, top-p on), and min-p alone. */
    static const struct {
        float temp;
        int32_t top_k;
        float top_p, min_p;
    } configs[] = {{0.0f, 0, 1.0f, 0.0f}, {0.8f, 40, 0.95f, 0.05f}, {1.0f, 0, 0.9f, 0.0f}, {1.0f, 0, 1.0f, 0.1f}};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        fkv_sampler_params p = plain(configs[c].temp, 62);
        p.top_k = configs[c].top_k;
        p.top_p = configs[c].top_p;
        p.min_p = configs[c].min_p;
        p.repeat_penalty = 1.3f;
        p.repeat_last_n = 64;
        fkv_sampler *s = fkv_sampler_new(&p, N_VOCAB);
        assert_non_null(s);
        for (int i = 0; i < 20; i++) fkv_sampler_sample(s, logits, history, 100);
        fkv_sampler_free(s);
        assert_memory_equal(logits, before, sizeof logits);
    }
}

static void test_nan_and_negative_infinity_logits_are_never_chosen(void **state) {
    (void)state;
    float logits[6] = {NAN, 0.0f, -INFINITY, NAN, 0.5f, -INFINITY};
    assert_int_equal(greedy(logits, 6, NULL, 0, 1.0f, 64), 4);
    fkv_sampler_params p = plain(1.0f, 71);
    int counts[6];
    draw_histogram(&p, logits, 6, NULL, 0, 2000, counts);
    assert_int_equal(counts[1] + counts[4], 2000);
    p.top_p = 0.99f; /* the sorting path must order NaNs too */
    p.min_p = 0.01f;
    draw_histogram(&p, logits, 6, NULL, 0, 2000, counts);
    assert_int_equal(counts[1] + counts[4], 2000);
}

static void test_all_nan_or_negative_infinity_logits_give_the_lowest_id(void **state) {
    (void)state;
    float logits[4] = {-INFINITY, NAN, -INFINITY, NAN};
    int32_t history[2] = {0, 1};
    assert_int_equal(greedy(logits, 4, history, 2, 1.5f, 64), 0);
    fkv_sampler_params p = fkv_sampler_default_params();
    p.repeat_penalty = 1.5f;
    int counts[4];
    draw_histogram(&p, logits, 4, history, 2, 100, counts);
    assert_int_equal(counts[0], 100);
}

static void test_positive_infinity_dominates_without_poisoning_the_softmax(void **state) {
    (void)state;
    float logits[5] = {3.0f, INFINITY, 1e30f, INFINITY, -1.0f};
    assert_int_equal(greedy(logits, 5, NULL, 0, 1.0f, 64), 1);
    fkv_sampler_params p = plain(0.01f, 81); /* a small temperature must not overflow either */
    int counts[5];
    draw_histogram(&p, logits, 5, NULL, 0, N_DRAWS, counts);
    assert_int_equal(counts[1] + counts[3], N_DRAWS);
    p.temp = 1.0f;
    draw_histogram(&p, logits, 5, NULL, 0, N_DRAWS, counts);
    assert_int_equal(counts[1] + counts[3], N_DRAWS);
    assert_frequency_near(counts, 1, 0.5);
}

static void test_a_vocabulary_of_one_always_gives_id_zero(void **state) {
    (void)state;
    float logits[1] = {-2.0f};
    int32_t history[3] = {0, 5, -1}; /* ids outside the vocabulary are ignored */
    fkv_sampler_params p = fkv_sampler_default_params();
    p.repeat_penalty = 1.1f;
    int counts[1];
    draw_histogram(&p, logits, 1, history, 3, 100, counts);
    assert_int_equal(counts[0], 100);
    assert_int_equal(greedy(logits, 1, history, 3, 1.1f, 64), 0);
}

static void test_sampler_new_refuses_an_empty_vocabulary(void **state) {
    (void)state;
    fkv_sampler_params p = fkv_sampler_default_params();
    assert_null(fkv_sampler_new(&p, 0));
    assert_null(fkv_sampler_new(&p, -5));
    fkv_sampler_free(NULL);
}

/* OpenAI's penalties count what the sampler chose: frequency by the count, presence once. */
static void test_frequency_and_presence_penalties_count_the_ids_chosen(void **state) {
    (void)state;
    const float logits[4] = {1.0f, 3.0f, 2.5f, 0.0f};
    fkv_sampler_params p = plain(0.0f, 1);
    p.frequency_penalty = 0.3f;
    fkv_sampler *s = fkv_sampler_new(&p, 4);
    /* 3.0 - 0.3k vs 2.5: id 1 twice (3.0, 2.7), then id 2 (2.4 < 2.5) */
    const int32_t want[] = {1, 1, 2, 1, 2};
    for (int i = 0; i < 5; i++) assert_int_equal(fkv_sampler_sample(s, logits, NULL, 0), want[i]);
    fkv_sampler_free(s);
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.6f; /* once chosen, 3.0 - 0.6 < 2.5: then id 2 (2.5 - 0.6 < 2.4) goes back to id 1 */
    s = fkv_sampler_new(&p, 4);
    const int32_t want_presence[] = {1, 2, 1, 1};
    for (int i = 0; i < 4; i++) assert_int_equal(fkv_sampler_sample(s, logits, NULL, 0), want_presence[i]);
    fkv_sampler_free(s);
}

/* The log-probabilities are the log-softmax of the row, top ids best first; a constraint does not change them. */
static void test_logprobs_are_the_rows_log_softmax_before_the_constraint(void **state) {
    (void)state;
    const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
    double sum = 0;
    for (int i = 0; i < 5; i++) sum += exp(logits[i]);
    fkv_sampler_params p = plain(0.0f, 1);
    fkv_sampler *s = fkv_sampler_new(&p, 5);
    const uint8_t allowed[5] = {1, 0, 1, 0, 0}; /* the two best are not allowed */
    fkv_logprobs lp = {.n_top = 3};
    assert_int_equal(fkv_sampler_choose(s, logits, NULL, 0, allowed, &lp), 0);
    assert_int_equal(lp.n_top, 3);
    const int32_t top[3] = {1, 3, 4}; /* the tie of 1 and 3 goes to the lower id */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lp.top_ids[i], top[i]);
        assert_float_equal(lp.top_logprobs[i], logits[top[i]] - log(sum), 1e-5);
    }
    assert_float_equal(lp.logprob, logits[0] - log(sum), 1e-5);
    const uint8_t none[5] = {0};
    assert_int_equal(fkv_sampler_choose(s, logits, NULL, 0, none, NULL), 1); /* allowing nothing constrains nothing */
    fkv_sampler_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_picks_the_argmax),
        cmocka_unit_test(test_greedy_ties_go_to_the_lowest_id),
        cmocka_unit_test(test_greedy_applies_the_repetition_penalty_first),
        cmocka_unit_test(test_the_same_seed_gives_the_same_draws_and_another_seed_does_not),
        cmocka_unit_test(test_a_seed_gives_the_same_draws_on_every_machine),
        cmocka_unit_test(test_top_k_of_one_equals_greedy_at_any_temperature),
        cmocka_unit_test(test_top_k_keeps_the_k_best_and_breaks_ties_by_lower_id),
        cmocka_unit_test(test_top_k_on_a_large_vocabulary_draws_only_from_the_true_top_k),
        cmocka_unit_test(test_top_p_keeps_the_smallest_set_reaching_p),
        cmocka_unit_test(test_top_p_after_top_k_renormalizes_over_the_k_kept),
        cmocka_unit_test(test_top_p_keeps_exactly_the_nucleus_of_a_vocabulary_larger_than_a_sort),
        cmocka_unit_test(test_top_p_on_a_large_vocabulary_draws_only_from_the_nucleus),
        cmocka_unit_test(test_min_p_excludes_ids_below_min_p_times_the_top_probability),
        cmocka_unit_test(test_temperature_sharpens_below_one_and_flattens_above),
        cmocka_unit_test(test_repetition_penalty_divides_positive_and_multiplies_negative_logits),
        cmocka_unit_test(test_repetition_penalty_lowers_the_chance_of_recent_ids),
        cmocka_unit_test(test_repetition_penalty_applies_once_per_distinct_id),
        cmocka_unit_test(test_repetition_penalty_reaches_only_the_last_n_ids),
        cmocka_unit_test(test_sampling_leaves_the_logits_unchanged),
        cmocka_unit_test(test_nan_and_negative_infinity_logits_are_never_chosen),
        cmocka_unit_test(test_all_nan_or_negative_infinity_logits_give_the_lowest_id),
        cmocka_unit_test(test_positive_infinity_dominates_without_poisoning_the_softmax),
        cmocka_unit_test(test_a_vocabulary_of_one_always_gives_id_zero),
        cmocka_unit_test(test_sampler_new_refuses_an_empty_vocabulary),
        cmocka_unit_test(test_frequency_and_presence_penalties_count_the_ids_chosen),
        cmocka_unit_test(test_logprobs_are_the_rows_log_softmax_before_the_constraint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
