/* test_ops.c — ops.h's attention sinks.
 *
 * Sinks (one group per variant the CPU runs): attention with per-head sink logits agrees with a plain softmax in
 * double, returns the reference's bits under every variant, and a row's bits depend on nothing but its own
 * position and keys — not the rows attended beside it, the chunk, the threads, another sequence in the call — with
 * windows and over every KV type.
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

#include "cache/kv.h"
#include "kernels/convert.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "testutil.h"

/* The variant the attention group runs under (tu_each_variant). */
static const char *variant_under_test;

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static float rng_normal(uint64_t *s) { /* Box-Muller */
    const double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float *normal_row(uint64_t *s, size_t n, float scale) {
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = scale * rng_normal(s);
    return x;
}

/* ---- attention sinks --------------------------------------------------------------------------- */

enum { N_POS = 150 }; /* five tiles, the last partial */

typedef struct {
    uint32_t n_heads, n_kv_heads, head_dim, window;
} attn_shape;

/* Grouped-query heads, one KV head for eight (gpt-oss's ratio), windows that start inside a tile and one of 128
 * (gpt-oss's), heads of 32 to 128. */
static const attn_shape shapes[] = {{1, 1, 32, 0}, {4, 2, 64, 0}, {8, 1, 64, 20}, {6, 2, 128, 33}, {8, 1, 64, 128}};

/* Sinks per head: below the scores (no max change), about them, far above them (the sink becomes the max and the
 * values shrink to ~e^-20), zero, and none at all (-inf). */
static const float sink_values[] = {-2.0f, 0.75f, 20.0f, -INFINITY, 3.0f, 0.0f, -0.5f, 1.5f};

static float *make_sinks(uint32_t n_heads) {
    float *s = malloc(n_heads * sizeof *s);
    assert_non_null(s);
    for (uint32_t h = 0; h < n_heads; h++) s[h] = sink_values[h % (sizeof sink_values / sizeof *sink_values)];
    return s;
}

/* One sequence's K/V (one layer, N_POS positions of random rows) in a kv_buf of `type`. */
typedef struct {
    kv_buf *kv;
    kv_map map;
    ops_kv_view view;
} test_kv;

static test_kv make_kv(uint64_t *s, fkv_kv_type type, uint32_t kv_dim) {
    fkv_error err = {0};
    test_kv t = {.kv = kv_new(1, N_POS, kv_dim, type, &err)};
    assert_non_null(t.kv);
    t.map = kv_buf_map(t.kv);
    float *k = normal_row(s, (size_t)N_POS * kv_dim, 1.0f), *v = normal_row(s, (size_t)N_POS * kv_dim, 1.0f);
    for (uint32_t p = 0; p < N_POS; p++)
        kv_map_store(&t.map, 0, p, k + (size_t)p * kv_dim, v + (size_t)p * kv_dim, kv_dim);
    free(k);
    free(v);
    t.view = kv_map_view(&t.map, 0);
    return t;
}

/* The stored K and V rows of position p, as f32 values (f32 or f16 storage). */
static void read_kv(const test_kv *t, fkv_kv_type type, uint32_t p, uint32_t kv_dim, float *k, float *v) {
    const size_t bytes = kv_row_bytes(type, kv_dim);
    uint8_t *kb = malloc(bytes), *vb = malloc(bytes);
    kv_map_read(&t->map, 0, p, kb, vb);
    for (uint32_t i = 0; i < kv_dim; i++) {
        if (type == FKV_KV_F32) {
            memcpy(&k[i], kb + 4 * i, 4);
            memcpy(&v[i], vb + 4 * i, 4);
        } else {
            uint16_t hk, hv;
            memcpy(&hk, kb + 2 * i, 2);
            memcpy(&hv, vb + 2 * i, 2);
            k[i] = kern_f16_to_f32(hk);
            v[i] = kern_f16_to_f32(hv);
        }
    }
    free(kb);
    free(vb);
}

/* Every position 0..N_POS-1 as one call of N_POS rows. */
static void attend_all(const float *q, const attn_shape *sh, const ops_kv_view *view, const float *sinks, float *out,
                       int n_threads) {
    uint32_t pos[N_POS];
    ops_kv_view views[N_POS];
    for (uint32_t p = 0; p < N_POS; p++) pos[p] = p, views[p] = *view;
    ops_attention(q, N_POS, pos, views, sh->n_heads, sh->n_kv_heads, sh->head_dim,
                  1.0f / sqrtf((float)sh->head_dim), sh->window, sinks, out, n_threads);
}

/* Sink attention agrees with softmax(scores ∪ {sink}) · V computed plainly in double over the stored f32 and f16
 * rows, within 1e-5 of Σ p_j |v_j| (the size of the terms the output sums) — for prefill rows and decode rows, heads
 * whose sink is below, among or far above the scores, and windows. */
static void test_sink_attention_matches_a_double_precision_softmax(void **state) {
    (void)state;
    uint64_t s = 41;
    const fkv_kv_type types[] = {FKV_KV_F32, FKV_KV_F16};
    for (size_t t = 0; t < 2; t++)
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
            const attn_shape *sh = &shapes[c];
            const uint32_t hd = sh->head_dim, kv_dim = sh->n_kv_heads * hd, q_dim = sh->n_heads * hd;
            test_kv kv = make_kv(&s, types[t], kv_dim);
            float *q = normal_row(&s, (size_t)N_POS * q_dim, 1.0f), *sinks = make_sinks(sh->n_heads);
            float *got = malloc((size_t)N_POS * q_dim * sizeof *got);
            float *k = malloc((size_t)N_POS * kv_dim * sizeof *k), *v = malloc((size_t)N_POS * kv_dim * sizeof *v);
            for (uint32_t p = 0; p < N_POS; p++)
                read_kv(&kv, types[t], p, kv_dim, k + (size_t)p * kv_dim, v + (size_t)p * kv_dim);
            attend_all(q, sh, &kv.view, sinks, got, 2);
            const double scale = 1.0f / sqrtf((float)hd);
            double *w = malloc(N_POS * sizeof *w);
            for (uint32_t p = 0; p < N_POS; p++)
                for (uint32_t h = 0; h < sh->n_heads; h++) {
                    const uint32_t kvh = h / (sh->n_heads / sh->n_kv_heads);
                    const uint32_t first = sh->window && p >= sh->window ? p + 1 - sh->window : 0;
                    const float *qh = q + (size_t)p * q_dim + (size_t)h * hd;
                    double m = sinks[h];
                    for (uint32_t j = first; j <= p; j++) {
                        double dot = 0;
                        for (uint32_t d = 0; d < hd; d++) dot += (double)qh[d] * k[(size_t)j * kv_dim + kvh * hd + d];
                        w[j] = dot * scale;
                        if (w[j] > m) m = w[j];
                    }
                    double denom = exp((double)sinks[h] - m);
                    for (uint32_t j = first; j <= p; j++) denom += w[j] = exp(w[j] - m);
                    for (uint32_t d = 0; d < hd; d++) {
                        double want = 0, size = 0;
                        for (uint32_t j = first; j <= p; j++) {
                            const double vj = v[(size_t)j * kv_dim + kvh * hd + d];
                            want += w[j] * vj;
                            size += w[j] * fabs(vj);
                        }
                        want /= denom, size /= denom;
                        const float g = got[(size_t)p * q_dim + (size_t)h * hd + d];
                        if (!(fabs(g - want) <= 1e-5 * size + 1e-30))
                            fail_msg("%s KV, shape %zu, position %u head %u (sink %g) element %u: %.9g, want %.9g "
                                     "(size %.3g)",
                                     types[t] == FKV_KV_F32 ? "f32" : "f16", c, p, h, (double)sinks[h], d, (double)g,
                                     want, size);
                    }
                }
            /* decode: each row alone (grouped heads then form the block instead of rows) against the same values */
            float *alone = malloc(q_dim * sizeof *alone);
            for (uint32_t p = 0; p < N_POS; p += 13) {
                ops_attention(q + (size_t)p * q_dim, 1, &p, &kv.view, sh->n_heads, sh->n_kv_heads, hd,
                              1.0f / sqrtf((float)hd), sh->window, sinks, alone, 1);
                assert_memory_equal(alone, got + (size_t)p * q_dim, q_dim * sizeof *alone);
            }
            free(alone);
            free(w);
            free(k);
            free(v);
            free(q);
            free(sinks);
            free(got);
            kv_free(kv.kv);
        }
}

/* Over every KV type, with and without windows: the rows of one call, of chunks of 7 rows, of single rows and of
 * a call shared with another sequence's decode row all give the same bits, on 1 or 2 threads; they are the
 * reference variant's bits; sinks of -inf give the bits of no sinks, and real sinks change them. */
static void test_sink_attention_is_row_invariant_and_equals_the_reference(void **state) {
    (void)state;
    uint64_t s = 42;
    const fkv_kv_type types[] = {FKV_KV_F32, FKV_KV_F16, FKV_KV_Q8_0, FKV_KV_Q4_0};
    const char *type_names[] = {"f32", "f16", "q8_0", "q4_0"};
    char why[160];
    for (size_t t = 0; t < 4; t++)
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
            const attn_shape *sh = &shapes[c];
            const uint32_t hd = sh->head_dim, kv_dim = sh->n_kv_heads * hd, q_dim = sh->n_heads * hd;
            const size_t row = q_dim * sizeof(float), all = (size_t)N_POS * row;
            const float scale = 1.0f / sqrtf((float)hd);
            test_kv a = make_kv(&s, types[t], kv_dim), b = make_kv(&s, types[t], kv_dim);
            float *q = normal_row(&s, (size_t)N_POS * q_dim, 1.0f), *sinks = make_sinks(sh->n_heads);
            float *got = malloc(all), *other = malloc(all), *want = malloc(all);
            attend_all(q, sh, &a.view, sinks, got, 2);
            /* the reference variant's bits */
            assert_int_equal(kern_select("ref", why, sizeof why), 0);
            attend_all(q, sh, &a.view, sinks, want, 1);
            assert_int_equal(kern_select(variant_under_test, why, sizeof why), 0);
            if (memcmp(got, want, all))
                fail_msg("%s KV, shape %zu: %s differs from ref", type_names[t], c, variant_under_test);
            /* chunks of 7 rows, one thread */
            for (uint32_t p0 = 0; p0 < N_POS; p0 += 7) {
                const uint32_t n = N_POS - p0 < 7 ? N_POS - p0 : 7;
                uint32_t pos[7];
                ops_kv_view views[7];
                for (uint32_t r = 0; r < n; r++) pos[r] = p0 + r, views[r] = a.view;
                ops_attention(q + (size_t)p0 * q_dim, n, pos, views, sh->n_heads, sh->n_kv_heads, hd, scale,
                              sh->window, sinks, other + (size_t)p0 * q_dim, 1);
            }
            if (memcmp(got, other, all)) fail_msg("%s KV, shape %zu: chunks of 7 differ", type_names[t], c);
            /* single rows, and a row of sequence a beside a decode row of sequence b (the call's other row) */
            for (uint32_t p = 0; p < N_POS; p++) {
                const uint32_t pos[2] = {p, (p * 7 + 3) % N_POS};
                const ops_kv_view views[2] = {a.view, b.view};
                float pair[2 * 8 * 128];
                ops_attention(q + (size_t)p * q_dim, 1, &p, &a.view, sh->n_heads, sh->n_kv_heads, hd, scale,
                              sh->window, sinks, other + (size_t)p * q_dim, 1);
                float *two = malloc(2 * row);
                memcpy(two, q + (size_t)p * q_dim, row);
                memcpy(two + q_dim, q + (size_t)pos[1] * q_dim, row);
                ops_attention(two, 2, pos, views, sh->n_heads, sh->n_kv_heads, hd, scale, sh->window, sinks, pair,
                              p % 2 ? 2 : 1);
                if (memcmp(pair, got + (size_t)p * q_dim, row))
                    fail_msg("%s KV, shape %zu, position %u: a row beside another sequence's differs", type_names[t],
                             c, p);
                free(two);
            }
            if (memcmp(got, other, all)) fail_msg("%s KV, shape %zu: single rows differ", type_names[t], c);
            /* sinks of -inf: no sinks' bits; real sinks: other bits */
            float *none = malloc(sh->n_heads * sizeof *none);
            for (uint32_t h = 0; h < sh->n_heads; h++) none[h] = -INFINITY;
            attend_all(q, sh, &a.view, none, got, 2);
            attend_all(q, sh, &a.view, NULL, want, 2);
            assert_memory_equal(got, want, all);
            attend_all(q, sh, &a.view, sinks, other, 2);
            assert_true(memcmp(other, want, all) != 0);
            for (size_t i = 0; i < (size_t)N_POS * q_dim; i++) assert_true(isfinite(other[i]));
            free(none);
            free(q);
            free(sinks);
            free(got);
            free(other);
            free(want);
            kv_free(a.kv);
            kv_free(b.kv);
        }
}

static void test_the_active_variant_is_the_one_under_test(void **state) {
    (void)state;
    assert_string_equal(kern_active()->name, variant_under_test);
}

int main(void) {
    const struct CMUnitTest attention[] = {
        cmocka_unit_test(test_sink_attention_matches_a_double_precision_softmax),
        cmocka_unit_test(test_sink_attention_is_row_invariant_and_equals_the_reference),
        cmocka_unit_test(test_the_active_variant_is_the_one_under_test),
    };
    return tu_each_variant(attention, sizeof attention / sizeof *attention, &variant_under_test);
}
