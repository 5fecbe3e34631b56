/* test_ops.c — ops.h's attention sinks, the gated delta rule's steps and YaRN rotary tables.
 *
 * Sinks (one group per variant the CPU runs): attention with per-head sink logits agrees with a plain softmax in
 * double, returns the reference's bits under every variant, and a row's bits depend on nothing but its own
 * position and keys — not the rows attended beside it, the chunk, the threads, another sequence in the call — with
 * windows and over every KV type. The gated DeltaNet's token steps (in the same groups): the delta rule and the
 * causal convolution agree with a transcription in double, return the reference's bits under every variant, and
 * stepping in place equals stepping from one buffer into another. Rotary tables (once): YaRN against a
 * double-precision transcription of ggml's rope_yarn, and plain or linear tables keep the bits they had before YaRN
 * existed.
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

/* ---- the gated delta rule ------------------------------------------------------------------------ */

enum { N_TOKENS = 24 };

/* A head's run of N_TOKENS tokens through ops_delta_step from the zero state, into o [N_TOKENS][d] and the final state
 * s [d][d]; in_place: each step in one buffer, else from one buffer into the other, alternately. */
static void delta_run(const float *q, const float *k, const float *v, const float *g, const float *beta, uint32_t d,
                      bool in_place, float *o, float *s) {
    float *other = malloc(sizeof(float) * d * d), *bufs[2] = {s, other};
    for (uint32_t t = 0; t < N_TOKENS; t++) {
        float *in = bufs[in_place ? 0 : t % 2], *out = bufs[in_place ? 0 : (t + 1) % 2];
        ops_delta_step(t ? in : NULL, out, q + t * d, k + t * d, v + t * d, g[t], beta[t], d, 1.0f / sqrtf((float)d),
                       o + t * d);
    }
    if (!in_place && N_TOKENS % 2) memcpy(s, other, sizeof(float) * d * d);
    free(other);
}

/* The delta rule as written in the Gated DeltaNet paper, in double: S = e^g·S; S += k ⊗ β(v − Sᵀk); o = Sᵀq / √d. */
static void test_delta_steps_match_a_double_precision_recurrence(void **state) {
    (void)state;
    uint64_t seed = 7;
    const uint32_t sizes[] = {16, 33, 128};
    for (size_t c = 0; c < 3; c++) {
        const uint32_t d = sizes[c];
        float *q = normal_row(&seed, (size_t)N_TOKENS * d, 1.0f), *k = normal_row(&seed, (size_t)N_TOKENS * d, 1.0f);
        float *v = normal_row(&seed, (size_t)N_TOKENS * d, 1.0f), g[N_TOKENS], beta[N_TOKENS];
        ops_l2norm(q, N_TOKENS, d, 1e-6f);
        ops_l2norm(k, N_TOKENS, d, 1e-6f);
        for (uint32_t t = 0; t < N_TOKENS; t++) g[t] = -0.5f * fabsf(rng_normal(&seed)), beta[t] = 0.3f + 0.02f * t;
        float *o = malloc(sizeof(float) * N_TOKENS * d), *sf = malloc(sizeof(float) * d * d);
        double *S = calloc((size_t)d * d, sizeof *S), worst = 0.0;
        delta_run(q, k, v, g, beta, d, true, o, sf);
        for (uint32_t t = 0; t < N_TOKENS; t++) {
            const float *qt = q + t * d, *kt = k + t * d, *vt = v + t * d;
            for (uint32_t i = 0; i < d * d; i++) S[i] *= exp((double)g[t]);
            for (uint32_t j = 0; j < d; j++) { /* S[i][j] at S[j·d + i] */
                double sk = 0.0;
                for (uint32_t i = 0; i < d; i++) sk += S[j * d + i] * kt[i];
                const double delta = (vt[j] - sk) * beta[t];
                for (uint32_t i = 0; i < d; i++) S[j * d + i] += kt[i] * delta;
            }
            for (uint32_t j = 0; j < d; j++) {
                double oj = 0.0;
                for (uint32_t i = 0; i < d; i++) oj += S[j * d + i] * qt[i];
                oj /= sqrt((double)d);
                worst = fmax(worst, fabs(oj - o[t * d + j]) / (1.0 + fabs(oj)));
            }
        }
        for (uint32_t i = 0; i < d * d; i++) worst = fmax(worst, fabs(S[i] - sf[i]) / (1.0 + fabs(S[i])));
        /* float sums of up to 128 terms over 24 steps against double: a few ulp a step */
        if (!(worst < 1e-5)) fail_msg("d %u: %s differs from double by %g", d, variant_under_test, worst);
        free(q), free(k), free(v), free(o), free(sf), free(S);
    }
}

/* Every variant gives the reference's bits, and a step in place gives the bits of a step into another buffer (the
 * engine steps a prompt in place and a verification's rows from slot to slot). */
static void test_delta_and_conv_steps_give_the_reference_bits_in_place_or_not(void **state) {
    (void)state;
    uint64_t seed = 11;
    char why[160];
    const uint32_t d = 33, channels = 67, taps = 4;
    float *q = normal_row(&seed, (size_t)N_TOKENS * d, 1.0f), *k = normal_row(&seed, (size_t)N_TOKENS * d, 1.0f);
    float *v = normal_row(&seed, (size_t)N_TOKENS * d, 1.0f), g[N_TOKENS], beta[N_TOKENS];
    ops_l2norm(k, N_TOKENS, d, 1e-6f);
    for (uint32_t t = 0; t < N_TOKENS; t++) g[t] = -fabsf(rng_normal(&seed)), beta[t] = 0.5f;
    const size_t o_bytes = sizeof(float) * N_TOKENS * d, s_bytes = sizeof(float) * d * d;
    float *o[3], *s[3];
    for (int r = 0; r < 3; r++) o[r] = malloc(o_bytes), s[r] = malloc(s_bytes);
    delta_run(q, k, v, g, beta, d, true, o[0], s[0]);
    delta_run(q, k, v, g, beta, d, false, o[1], s[1]);
    assert_int_equal(kern_select("ref", why, sizeof why), 0);
    delta_run(q, k, v, g, beta, d, true, o[2], s[2]);
    assert_int_equal(kern_select(variant_under_test, why, sizeof why), 0);
    for (int r = 1; r < 3; r++)
        if (memcmp(o[0], o[r], o_bytes) || memcmp(s[0], s[r], s_bytes))
            fail_msg("%s: the delta rule differs %s", variant_under_test, r == 1 ? "out of place" : "from ref");
    /* the convolution: y = Σ window·taps + x·last tap, in order, and the window shifted; channels split in two */
    float *w = normal_row(&seed, (size_t)channels * taps, 0.5f), *x = normal_row(&seed, (size_t)N_TOKENS * channels, 1.0f);
    float *y = malloc(sizeof(float) * N_TOKENS * channels), win[2][67 * 3];
    memcpy(y, x, sizeof(float) * N_TOKENS * channels);
    for (uint32_t t = 0; t < N_TOKENS; t++) {
        ops_conv_step(t ? win[t % 2] : NULL, win[(t + 1) % 2], w, taps, y + t * channels, 0, 30);
        ops_conv_step(t ? win[t % 2] : NULL, win[(t + 1) % 2], w, taps, y + t * channels, 30, channels);
    }
    for (uint32_t t = 0; t < N_TOKENS; t++)
        for (uint32_t c = 0; c < channels; c++) {
            float want = 0.0f;
            for (uint32_t i = 0; i < taps; i++) { /* input t - (taps - 1) + i, zero before the start */
                const int64_t at = (int64_t)t - (taps - 1) + i;
                want += (at >= 0 ? x[at * channels + c] : 0.0f) * w[c * taps + i];
            }
            if (memcmp(&want, &y[t * channels + c], sizeof want))
                fail_msg("conv token %u channel %u: %g, want %g", t, c, (double)y[t * channels + c], (double)want);
        }
    for (int r = 0; r < 3; r++) free(o[r]), free(s[r]);
    free(q), free(k), free(v), free(w), free(x), free(y);
}

/* softplus: ln(1 + e^x) to float precision, x itself above 20 and for a NaN, 0 far below; sigmoid and silu as
 * their formulas; an L2 norm of 1 (the eps floor for a zero row). */
static void test_softplus_sigmoid_silu_and_l2norm_follow_their_formulas(void **state) {
    (void)state;
    float x[8] = {-1000.0f, -30.0f, -2.5f, 0.0f, 1.0f, 19.5f, 25.0f, NAN};
    float sp[8], sg[8], sl[8];
    memcpy(sp, x, sizeof x), memcpy(sg, x, sizeof x), memcpy(sl, x, sizeof x);
    ops_softplus(sp, 8);
    ops_sigmoid(sg, 7);
    ops_silu(sl, 7);
    for (int i = 0; i < 7; i++) {
        const double want = x[i] > 20.0f ? x[i] : log1p(exp((double)x[i]));
        assert_true(fabs(sp[i] - want) <= 1e-7 * fmax(1.0, fabs(want)));
        assert_true(fabs(sg[i] - 1.0 / (1.0 + exp(-(double)x[i]))) < 1e-6);
        assert_true(fabs(sl[i] - x[i] / (1.0 + exp(-(double)x[i]))) <= 1e-6 * fmax(1.0, fabs(x[i])));
    }
    assert_true(isnan(sp[7]));
    float rows[2][5] = {{3, 4, 0, 0, 0}, {0, 0, 0, 0, 0}};
    ops_l2norm(&rows[0][0], 2, 5, 1e-6f);
    assert_true(fabsf(rows[0][0] - 0.6f) < 1e-7f && fabsf(rows[0][1] - 0.8f) < 1e-7f);
    for (int i = 0; i < 5; i++) assert_true(rows[1][i] == 0.0f);
}

static void test_the_active_variant_is_the_one_under_test(void **state) {
    (void)state;
    assert_string_equal(kern_active()->name, variant_under_test);
}

/* ---- rotary tables ----------------------------------------------------------------------------- */

static const uint32_t rope_pos[] = {0, 1, 2, 3, 7, 31, 32, 100, 511, 4095, 4096, 32767, 65535, 131071, 1000000};
#define N_ROPE_POS (sizeof rope_pos / sizeof *rope_pos)

/* Divisors 1, 1.125, 1.25, ... (as llama3's rope_freqs would give), for tables that take them. */
static void ramp_divisors(float *div, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) div[i] = 1.0f + (float)i / 8.0f;
}

/* ggml's rope_yarn_corr_dims, rope_yarn and rope_cache_init (ggml/src/ggml.c, ggml-cpu/ops.cpp) in double: the
 * angle of pair i grows by base^(-2/n_dims) from the position, divided by the pair's divisor. */
static void ggml_yarn_row(uint32_t p, uint32_t n_dims, const ops_rope_params *rp, const float *div, double *out) {
    const double pi = 3.14159265358979323846, freq_scale = 1.0 / rp->scale;
    double corr[2];
    const double betas[2] = {rp->beta_fast, rp->beta_slow};
    for (int b = 0; b < 2; b++)
        corr[b] = n_dims * log(rp->n_ctx_orig / (betas[b] * 2 * pi)) / (2 * log((double)rp->base));
    corr[0] = fmax(0, floor(corr[0]));
    corr[1] = fmin(n_dims - 1, ceil(corr[1]));
    const double theta_scale = pow(rp->base, -2.0 / n_dims);
    double theta = p;
    for (uint32_t i0 = 0; i0 < n_dims; i0 += 2) {
        const double extrap = theta / (div ? div[i0 / 2] : 1.0), interp = freq_scale * extrap;
        double mscale = rp->attn_factor, th = interp;
        if (rp->ext_factor != 0) {
            const double y = (i0 / 2 - corr[0]) / fmax(0.001, corr[1] - corr[0]);
            const double mix = (1 - fmin(1, fmax(0, y))) * rp->ext_factor;
            th = interp * (1 - mix) + extrap * mix;
            mscale *= 1 + 0.1 * log(1 / freq_scale);
        }
        out[i0] = cos(th) * mscale;
        out[i0 + 1] = sin(th) * mscale;
        theta *= theta_scale;
    }
}

/* YaRN tables agree with ggml's formula in double within 1e-6 at every position up to 10^6: gpt-oss's parameters
 * (base 150000, factor 32, original context 4096, llama.cpp's ext_factor 1 and betas 32 and 1), and others that
 * move each term — a partial mix, a magnitude, divisors, a correction range clamped at both ends. */
static void test_yarn_tables_follow_ggml_in_double(void **state) {
    (void)state;
    const struct {
        uint32_t n_rot;
        ops_rope_params rp;
        bool divisors;
    } cases[] = {
        {64, {.base = 150000.0f, .scale = 32.0f, .attn_factor = 1.0f, .ext_factor = 1.0f, .beta_fast = 32.0f,
              .beta_slow = 1.0f, .n_ctx_orig = 4096}, false},
        {128, {.base = 10000.0f, .scale = 4.0f, .attn_factor = 0.875f, .ext_factor = 0.5f, .beta_fast = 16.0f,
               .beta_slow = 2.0f, .n_ctx_orig = 2048}, true},
        {96, {.base = 1000000.0f, .scale = 8.0f, .attn_factor = 1.0f, .ext_factor = 1.0f, .beta_fast = 32.0f,
              .beta_slow = 1.0f, .n_ctx_orig = 32768}, false},
        {32, {.base = 500.0f, .scale = 2.0f, .attn_factor = 1.0f, .ext_factor = 1.0f, .beta_fast = 20000.0f,
              .beta_slow = 0.01f, .n_ctx_orig = 100000}, false}, /* the range clamped to [0, n_rot - 1] */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const uint32_t n = cases[c].n_rot;
        float div[128], *cs = malloc(N_ROPE_POS * n * sizeof *cs);
        double want[256];
        ramp_divisors(div, n / 2);
        ops_rope_table(rope_pos, N_ROPE_POS, n, &cases[c].rp, cases[c].divisors ? div : NULL, cs);
        for (size_t r = 0; r < N_ROPE_POS; r++) {
            ggml_yarn_row(rope_pos[r], n, &cases[c].rp, cases[c].divisors ? div : NULL, want);
            for (uint32_t i = 0; i < n; i++)
                if (!(fabs(cs[r * n + i] - want[i]) <= 1e-6))
                    fail_msg("case %zu, position %u, element %u: %.9g, want %.9g", c, rope_pos[r], i,
                             (double)cs[r * n + i], want[i]);
        }
        free(cs);
    }
    /* gpt-oss at position 0: every pair is (1 + 0.1 ln 32, 0) */
    const ops_rope_params oss = {.base = 150000.0f, .scale = 32.0f, .attn_factor = 1.0f, .ext_factor = 1.0f,
                                 .beta_fast = 32.0f, .beta_slow = 1.0f, .n_ctx_orig = 4096};
    float cs[64];
    ops_rope_table(rope_pos, 1, 64, &oss, NULL, cs);
    for (uint32_t i = 0; i < 32; i++) {
        assert_float_equal(cs[2 * i], 1.0 + 0.1 * log(32.0), 1e-7);
        assert_true(cs[2 * i + 1] == 0.0f);
    }
}

/* With ext_factor 0 a table has the bits it had before YaRN was added (FNV-1a 64 of each table's floats, recorded
 * from the code of 7d58d88): plain, linear (scale 8) with divisors, LongRoPE's magnitude over a partial rotation,
 * an exponent 2i/96 that float division rounds, divisors alone — whatever the YaRN fields hold. So the golden
 * digests and every stored KV block keep their bits. */
static void test_tables_without_yarn_keep_their_bits(void **state) {
    (void)state;
    static const uint32_t pos[] = {0, 1, 2, 3, 31, 32, 100, 511, 4095, 65535, 131071, 1000000};
    enum { N = sizeof pos / sizeof *pos };
    static const struct {
        uint32_t n_rot;
        float base, scale, attn_factor;
        bool divisors;
        uint64_t fnv;
    } cases[] = {
        {64, 10000.0f, 1.0f, 1.0f, false, 0x0c5f89baade41d1au},
        {128, 500000.0f, 8.0f, 1.0f, true, 0x79c95f3e28fc4acdu},
        {16, 1000000.0f, 1.0f, 1.1902381f, false, 0xbf0d820741105829u},
        {96, 150000.0f, 32.0f, 1.0f, false, 0x5ed35b938f9d15b9u},
        {64, 150000.0f, 1.0f, 1.0f, true, 0x851802452de93950u},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int yarn_fields = 0; yarn_fields < 2; yarn_fields++) {
            float div[64], cs[N * 128];
            ramp_divisors(div, cases[c].n_rot / 2);
            ops_rope_params rp = {.base = cases[c].base, .scale = cases[c].scale, .attn_factor = cases[c].attn_factor};
            if (yarn_fields) rp.beta_fast = 32.0f, rp.beta_slow = 1.0f, rp.n_ctx_orig = 4096; /* unused when off */
            ops_rope_table(pos, N, cases[c].n_rot, &rp, cases[c].divisors ? div : NULL, cs);
            uint64_t h = 0xcbf29ce484222325u;
            for (size_t i = 0; i < (size_t)N * cases[c].n_rot; i++) {
                uint32_t u;
                memcpy(&u, &cs[i], sizeof u);
                for (int b = 0; b < 4; b++) h = (h ^ (u >> 8 * b & 255)) * 0x100000001b3u;
            }
            if (h != cases[c].fnv) fail_msg("case %zu: table digest %016llx", c, (unsigned long long)h);
        }
}

int main(void) {
    const struct CMUnitTest attention[] = {
        cmocka_unit_test(test_sink_attention_matches_a_double_precision_softmax),
        cmocka_unit_test(test_sink_attention_is_row_invariant_and_equals_the_reference),
        cmocka_unit_test(test_delta_steps_match_a_double_precision_recurrence),
        cmocka_unit_test(test_delta_and_conv_steps_give_the_reference_bits_in_place_or_not),
        cmocka_unit_test(test_softplus_sigmoid_silu_and_l2norm_follow_their_formulas),
        cmocka_unit_test(test_the_active_variant_is_the_one_under_test),
    };
    const struct CMUnitTest rope[] = {
        cmocka_unit_test(test_yarn_tables_follow_ggml_in_double),
        cmocka_unit_test(test_tables_without_yarn_keep_their_bits),
    };
    int failed = tu_each_variant(attention, sizeof attention / sizeof *attention, &variant_under_test);
    return failed + cmocka_run_group_tests_name("rotary tables", rope, NULL, NULL);
}
