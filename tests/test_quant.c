/* test_quant.c — element types, (de)quantization and the fixed-order dot products.
 *
 * The central claim under test: every variant the CPU runs (each test group runs once per variant) returns the
 * bits of the reference kernels, on random inputs of awkward sizes, at any alignment and from any thread. Conversions are checked exhaustively
 * (all 65536 f16/bf16 patterns) and on hand-computed rounding cases; quantizers on hand-computed ggml
 * blocks and on their error bounds; dots against a double-precision reference within a stated bound.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "gguf/gguf.h"
#include "cache/kv.h"
#include "kernels/attn.h"
#include "kernels/convert.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/ref/ref.h"
#include "testutil.h"
#include "kernels/traits.h"

/* The definition every variant is compared with. */
static const kern_ops *ref;
/* The variant the group runs under (tu_each_variant). */
static const char *variant_under_test;

#define U24 (1.0 / 16777216.0) /* unit roundoff of f32 */

static const size_t any_sizes[] = {0, 1, 7, 31, 32, 33, 63, 64, 100, 257, 4096};
#define N_ANY (sizeof any_sizes / sizeof any_sizes[0])
/* Multiples of QK: 3, 13 and 17 blocks leave tails after groups of 8 blocks; 128 and 152 do not. */
static const size_t block_sizes[] = {32, 64, 96, 416, 544, 4096, 4864};
#define N_BLOCK (sizeof block_sizes / sizeof block_sizes[0])
/* Multiples of QK_K, the K-quant super-block: 1, 2, 8, 19, 69 (the widest rows in panels) and 70 (the
 * narrowest taking direct tiles) super-blocks. */
static const size_t kquant_sizes[] = {256, 512, 2048, 4864, 69 * QK_K, 70 * QK_K};
#define N_KQUANT (sizeof kquant_sizes / sizeof kquant_sizes[0])

/* ---- helpers ----------------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { /* in (0, 1) */
    return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static float rng_normal(uint64_t *s) {
    return (float)(sqrt(-2.0 * log(rng_uniform(s))) * cos(6.283185307179586 * rng_uniform(s)));
}

static float *normal_row(uint64_t *s, size_t n, float scale) {
    float *x = calloc(n ? n : 1, sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = scale * rng_normal(s);
    return x;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void assert_same_bits(float got, float want, const char *what, size_t n) {
    if (bits_of(got) != bits_of(want))
        fail_msg("%s, n=%zu: variant %.9g (0x%08x) != reference %.9g (0x%08x)", what, n, (double)got, bits_of(got),
                 (double)want, bits_of(want));
}

static size_t row_bytes(ggml_type type, size_t n) {
    const kern_traits *t = kern_type_traits(type);
    return n / t->block_elems * t->block_bytes;
}

/* ---- f16 / bf16 -------------------------------------------------------------------------------- */

static void test_f16_round_trips_every_bit_pattern(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kern_f16_to_f32((uint16_t)h);
        uint16_t back = kern_f32_to_f16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            if (!isnan(f)) fail_msg("f16 0x%04x is a NaN but widened to %g", h, (double)f);
            if ((back & 0x7c00) != 0x7c00 || !(back & 0x3ff)) fail_msg("f16 NaN 0x%04x came back as 0x%04x", h, back);
        } else if (back != h) {
            fail_msg("f16 0x%04x -> %.9g -> 0x%04x", h, (double)f, back);
        }
    }
    /* a few exact values */
    assert_true(kern_f16_to_f32(0x3c00) == 1.0f);
    assert_true(kern_f16_to_f32(0xc000) == -2.0f);
    assert_true(kern_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(kern_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_true(kern_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    assert_true(isinf(kern_f16_to_f32(0xfc00)) && kern_f16_to_f32(0xfc00) < 0);
    assert_int_equal(bits_of(kern_f16_to_f32(0x8000)), 0x80000000u);
}

static void test_f16_row_conversions_match_the_scalar_ones_for_every_bit_pattern(void **state) {
    (void)state;
    uint16_t *h = malloc(65536 * sizeof *h);
    float *f = malloc(65536 * sizeof *f);
    float *g = malloc(65536 * sizeof *g);
    uint16_t *back = malloc(65536 * sizeof *back);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    quant_dequantize_row(GGML_TYPE_F16, h, f, 65536);
    for (uint32_t i = 0; i < 65536; i++) g[i] = kern_f16_to_f32(h[i]);
    assert_memory_equal(f, g, 65536 * sizeof *f);
    kern_f32_to_f16_row(f, back, 65536);
    for (uint32_t i = 0; i < 65536; i++)
        if (back[i] != kern_f32_to_f16(f[i])) fail_msg("f16 row and scalar differ for 0x%04x", i);
    free(h);
    free(f);
    free(g);
    free(back);
}

static void test_f32_to_f16_rounds_to_nearest_even_on_known_cases(void **state) {
    (void)state;
    struct {
        float f;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3c00},
        {65504.0f, 0x7bff},                           /* largest finite */
        {65519.0f, 0x7bff},                           /* below the halfway point to 65536 */
        {65520.0f, 0x7c00},                           /* halfway, ties to even: inf */
        {1e10f, 0x7c00},
        {-INFINITY, 0xfc00},
        {-0.0f, 0x8000},
        {1.0f + 0x1p-11f, 0x3c00},                    /* tie, rounds down to even mantissa 0 */
        {1.0f + 3 * 0x1p-11f, 0x3c02},                /* tie, rounds up to even mantissa 2 */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},         /* just above the tie */
        {0x1p-24f, 0x0001},                           /* smallest subnormal */
        {0x1p-25f, 0x0000},                           /* half of it: tie to even 0 */
        {0x1p-25f + 0x1p-40f, 0x0001},                /* just above that tie */
        {3 * 0x1p-25f, 0x0002},                       /* 1.5 subnormal units: tie to even 2 */
        {-5 * 0x1p-25f, 0x8002},                      /* 2.5 units: tie to even 2 */
        {0x1p-14f, 0x0400},                           /* smallest normal */
        {0x1p-14f - 0x1p-25f, 0x0400},                /* 1023.5 units: tie to even, carries into the exponent */
        {0x1p-14f - 0x1p-24f, 0x03ff},                /* largest subnormal */
        {1e-30f, 0x0000},
        {float_of(0x00000001), 0x0000},               /* f32 subnormal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = kern_f32_to_f16(cases[i].f);
        if (h != cases[i].h) fail_msg("f32 %a -> f16 0x%04x, expected 0x%04x", (double)cases[i].f, h, cases[i].h);
    }
    /* NaN stays NaN, quiet, signalling payloads included */
    uint32_t nans[] = {0x7fc00000, 0x7f800001, 0xff800001, 0x7fffffff};
    for (size_t i = 0; i < 4; i++) {
        uint16_t h = kern_f32_to_f16(float_of(nans[i]));
        if ((h & 0x7e00) != 0x7e00) fail_msg("f32 NaN 0x%08x -> f16 0x%04x is not a quiet NaN", nans[i], h);
    }
}

static void test_f32_to_f16_row_matches_scalar_on_random_values(void **state) {
    (void)state;
    uint64_t s = 11;
    for (size_t k = 0; k < N_ANY; k++) {
        size_t n = any_sizes[k];
        float *x = malloc((n ? n : 1) * sizeof *x);
        uint16_t *row = malloc((n ? n : 1) * sizeof *row);
        /* alternate raw bit patterns (NaN payloads, inf, f32 subnormals) with values in f16's range,
         * near its subnormals and past its overflow */
        for (size_t i = 0; i < n; i++) {
            switch (i % 4) {
            case 0:
                x[i] = float_of((uint32_t)rng_next(&s));
                break;
            case 1:
                x[i] = rng_normal(&s);
                break;
            case 2:
                x[i] = 1e-6f * rng_normal(&s);
                break;
            default:
                x[i] = 7e4f * rng_normal(&s);
            }
        }
        kern_f32_to_f16_row(x, row, n);
        for (size_t i = 0; i < n; i++)
            if (row[i] != kern_f32_to_f16(x[i]))
                fail_msg("n=%zu i=%zu: row 0x%04x != scalar 0x%04x for 0x%08x", n, i, row[i],
                         kern_f32_to_f16(x[i]), bits_of(x[i]));
        free(x);
        free(row);
    }
}

static void test_bf16_round_trips_every_bit_pattern_and_rounds_to_nearest_even(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kern_bf16_to_f32((uint16_t)h);
        assert_int_equal(bits_of(f), h << 16); /* widening is exact */
        uint16_t back = kern_f32_to_bf16(f);
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan) {
            if ((back & 0x7fc0) != 0x7fc0) fail_msg("bf16 NaN 0x%04x came back as 0x%04x, not a quiet NaN", h, back);
        } else if (back != h) {
            fail_msg("bf16 0x%04x -> 0x%04x", h, back);
        }
    }
    struct {
        uint32_t f;
        uint16_t h;
    } cases[] = {
        {0x3f808000, 0x3f80}, /* 1 + 2^-8: tie, to even */
        {0x3f818000, 0x3f82}, /* 1 + 3*2^-8: tie, to even (up) */
        {0x3f808001, 0x3f81}, /* just above the tie */
        {0x7f7fffff, 0x7f80}, /* FLT_MAX rounds to inf */
        {0x80000001, 0x8000}, /* tiny negative subnormal to -0 */
        {0x7f800000, 0x7f80}, /* inf */
        {0x7f800001, 0x7fc0}, /* signalling NaN with a low payload: quiet NaN, not inf */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = kern_f32_to_bf16(float_of(cases[i].f));
        if (h != cases[i].h) fail_msg("f32 0x%08x -> bf16 0x%04x, expected 0x%04x", cases[i].f, h, cases[i].h);
    }
}

/* ---- ggml block layouts and reference quantizers ----------------------------------------------- */

static void test_dequantize_reads_ggml_block_layouts(void **state) {
    (void)state;
    block_q8_0 q8 = {.d = 0x3800}; /* 0.5 */
    block_q4_0 q4 = {.d = 0xc000}; /* -2 */
    for (int i = 0; i < QK; i++) q8.qs[i] = (int8_t)(i * 8 - 128);
    for (int i = 0; i < QK / 2; i++) q4.qs[i] = (uint8_t)(i | (15 - i) << 4);
    float y[QK];
    quant_dequantize_row(GGML_TYPE_Q8_0, &q8, y, QK);
    for (int i = 0; i < QK; i++) assert_true(y[i] == 0.5f * (float)(i * 8 - 128));
    quant_dequantize_row(GGML_TYPE_Q4_0, &q4, y, QK);
    for (int i = 0; i < QK / 2; i++) {
        assert_true(y[i] == -2.0f * (float)(i - 8));           /* low nibble: element i */
        assert_true(y[i + 16] == -2.0f * (float)(15 - i - 8)); /* high nibble: element i + 16 */
    }
    uint16_t bf[3] = {0x3f80, 0xc040, 0x0001};
    quant_dequantize_row(GGML_TYPE_BF16, bf, y, 3);
    assert_true(y[0] == 1.0f && y[1] == -3.0f && bits_of(y[2]) == 0x00010000u);
}

static void test_quantize_q8_0_rounds_half_away_from_zero_like_ggml(void **state) {
    (void)state;
    float x[QK] = {127.0f, 2.5f, -2.5f, 3.5f, 0.4f, -0.5f, -127.0f, 10.0f};
    block_q8_0 q;
    quant_quantize_row(GGML_TYPE_Q8_0, x, &q, QK);
    assert_int_equal(q.d, 0x3c00); /* d = 127 / 127 = 1 */
    int8_t want[8] = {127, 3, -3, 4, 0, -1, -127, 10};
    assert_memory_equal(q.qs, want, sizeof want);
    for (int i = 8; i < QK; i++) assert_int_equal(q.qs[i], 0);
}

static void test_quantize_q4_0_takes_the_signed_max_to_minus_eight_like_ggml(void **state) {
    (void)state;
    float x[QK];
    for (int j = 0; j < QK; j++) x[j] = 0.5f * (float)(j - 16); /* -8 .. 7.5; the max magnitude is -8 */
    block_q4_0 q;
    quant_quantize_row(GGML_TYPE_Q4_0, x, &q, QK);
    assert_int_equal(q.d, 0x3c00); /* d = -8 / -8 = 1 */
    /* nibble = min(15, trunc(x/d + 8.5)): -8 -> 0, -7.5 -> 1, -7 -> 1, 0 -> 8, 0.5 -> 9, 7.5 -> 15 */
    assert_int_equal(q.qs[0] & 15, 0);
    assert_int_equal(q.qs[1] & 15, 1);
    assert_int_equal(q.qs[2] & 15, 1);
    assert_int_equal(q.qs[0] >> 4, 8);
    assert_int_equal(q.qs[1] >> 4, 9);
    assert_int_equal(q.qs[15] >> 4, 15);
    /* a positive max gives a negative scale, and the max still lands on nibble 0 */
    for (int j = 0; j < QK; j++) x[j] = -x[j];
    quant_quantize_row(GGML_TYPE_Q4_0, x, &q, QK);
    assert_int_equal(q.d, 0xbc00);
    assert_int_equal(q.qs[0] & 15, 0);
}

static void test_quantize_then_dequantize_stays_within_the_format_error_bound(void **state) {
    (void)state;
    uint64_t s = 5;
    for (size_t k = 0; k < N_BLOCK; k++) {
        size_t n = block_sizes[k];
        float *x = normal_row(&s, n, k % 2 ? 0.02f : 3.0f);
        block_q8_0 *q8 = malloc(n / QK * sizeof *q8);
        block_q4_0 *q4 = malloc(n / QK * sizeof *q4);
        float *y8 = malloc(n * sizeof *y8), *y4 = malloc(n * sizeof *y4);
        quant_quantize_row(GGML_TYPE_Q8_0, x, q8, n);
        quant_quantize_row(GGML_TYPE_Q4_0, x, q4, n);
        quant_dequantize_row(GGML_TYPE_Q8_0, q8, y8, n);
        quant_dequantize_row(GGML_TYPE_Q4_0, q4, y4, n);
        for (size_t b = 0; b < n / QK; b++) {
            float amax = 0.0f, max = 0.0f;
            for (int j = 0; j < QK; j++)
                if (fabsf(x[b * QK + j]) > amax) amax = fabsf(x[b * QK + j]), max = x[b * QK + j];
            /* Q8_0: d = amax/127 in f32, stored as f16 d16. q = round(x/d) is within 1/2 of x/d, so
             * |d16·q - x| <= d/2 (grid) + 127·|d16 - d| (the f16 rounding of d, times |q| <= 127),
             * plus a few f32 roundings (x·id, d16·q), covered by 1e-6·amax. */
            double d = amax / 127.0f, d16 = kern_f16_to_f32(q8[b].d);
            assert_int_equal(q8[b].d, kern_f32_to_f16(amax / 127.0f));
            for (int j = 0; j < QK; j++) {
                size_t i = b * QK + j;
                double bound = 0.5 * d + 127.0 * fabs(d16 - d) + 1e-6 * amax;
                if (fabs((double)y8[i] - x[i]) > bound)
                    fail_msg("Q8_0 n=%zu i=%zu: x=%g back=%g err %g > %g", n, i, (double)x[i], (double)y8[i],
                             fabs((double)y8[i] - x[i]), bound);
                assert_true(q8[b].qs[j] >= -127 && q8[b].qs[j] <= 127);
            }
            /* Q4_0: d = max/-8 (signed), grid q ∈ [-8, 7]. Within the grid |err| <= |d|/2; values with
             * x/d > 7.5 (the opposite extreme, up to +8) are clamped to 7, so there |err| <= |d|.
             * Plus 8·|d16 - d| for the f16 rounding of d (|q| <= 8) and 1e-6·amax for f32 roundings. */
            d = max / -8.0f;
            d16 = kern_f16_to_f32(q4[b].d);
            for (int j = 0; j < QK; j++) {
                size_t i = b * QK + j;
                double r = x[i] / d;
                double bound = (r > 7.5 ? 1.0 : 0.5) * fabs(d) + 8.0 * fabs(d16 - d) + 1e-6 * amax;
                if (fabs((double)y4[i] - x[i]) > bound)
                    fail_msg("Q4_0 n=%zu i=%zu: x=%g back=%g err %g > %g", n, i, (double)x[i], (double)y4[i],
                             fabs((double)y4[i] - x[i]), bound);
            }
        }
        free(x);
        free(q8);
        free(q4);
        free(y8);
        free(y4);
    }
}

/* ---- K-quants ---------------------------------------------------------------------------------- */

/* ggml's K-quant formulas, written out here in the shape of ggml's own loops and independently of
 * quant.c, so that a layout slip in either shows up as a mismatch. */
static void ref_q4_K_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void ggml_dequantize_q4_K(const block_q4_K *b, float *y) {
    const float d = kern_f16_to_f32(b->d), dmin = kern_f16_to_f32(b->dmin);
    const uint8_t *q = b->qs;
    for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
        int sc, m;
        ref_q4_K_scale_min(b->scales, is, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        ref_q4_K_scale_min(b->scales, is + 1, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[j + l] = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) y[j + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
    }
}

static void ggml_dequantize_q6_K(const block_q6_K *b, float *y) {
    const float d = kern_f16_to_f32(b->d);
    const uint8_t *ql = b->ql, *qh = b->qh;
    const int8_t *sc = b->scales;
    for (int n = 0; n < QK_K; n += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[n + l] = d * (float)sc[is] * (float)q1;
            y[n + l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[n + l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[n + l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
}

/* Random block bytes with a finite, moderate f16 scale. */
static void random_bytes(uint64_t *s, void *dst, size_t n) {
    uint8_t *p = dst;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_next(s);
}

static uint16_t random_scale(uint64_t *s) {
    return kern_f32_to_f16((float)(rng_uniform(s) * 0.1));
}

static void test_dequantize_reads_ggml_k_quant_layouts(void **state) {
    (void)state;
    float y[QK_K], want[QK_K];
    /* Hand-built Q4_K: d = 1, dmin = 0.5. Sub-block 0: sc = 0x41 & 63 = 1, m = 0x80 & 63 = 0; sub-block 1:
     * sc = 2, m = 5; sub-block 4: sc = (0x21 & 15) | (0x41 >> 6) << 4 = 17, m = (0x21 >> 4) | (0x80 >> 6) << 4
     * = 34; sub-block 5: sc = m = 0. */
    block_q4_K k4 = {.d = 0x3c00, .dmin = 0x3800,
                     .scales = {0x41, 0x02, 0x03, 0x04, 0x80, 0x05, 0x06, 0x07, 0x21, 0x00, 0x00, 0x00}};
    k4.qs[0] = 0x07;  /* element 0: low nibble 7; element 32: high nibble 0 */
    k4.qs[64] = 0x3c; /* element 128: low nibble 12; element 160: high nibble 3 */
    quant_dequantize_row(GGML_TYPE_Q4_K, &k4, y, QK_K);
    assert_true(y[0] == 7.0f);           /* 1·1·7 - 0.5·0 */
    assert_true(y[32] == -2.5f);         /* 1·2·0 - 0.5·5 */
    assert_true(y[128] == 187.0f);       /* 1·17·12 - 0.5·34 */
    assert_true(y[160] == 0.0f);         /* 1·0·3 - 0.5·0 */
    /* Hand-built Q6_K: d = 0.5. */
    block_q6_K k6 = {.d = 0x3800, .scales = {-3, 2, 4, 0, 7, 0, -1, 0, 5}};
    k6.ql[0] = 0x21;  /* element 0: low nibble 1; element 64: high nibble 2 */
    k6.ql[32] = 0x0f; /* element 32: low nibble 15; element 96: high nibble 0 */
    k6.qh[0] = 0xe4;  /* high bits: element 0 → 0, 32 → 1, 64 → 2, 96 → 3 */
    k6.qh[32] = 0x03; /* element 128: high bits 3, low nibble 0 */
    quant_dequantize_row(GGML_TYPE_Q6_K, &k6, y, QK_K);
    assert_true(y[0] == 46.5f);    /* q = 1 - 32 = -31, scale[0] = -3: 0.5·-3·-31 */
    assert_true(y[16] == -32.0f);  /* q = 0 - 32, scale[1] = 2 */
    assert_true(y[32] == -2.0f);   /* q = 15 + 16 - 32 = -1, scale[2] = 4 */
    assert_true(y[64] == 7.0f);    /* q = 2 + 32 - 32 = 2, scale[4] = 7 */
    assert_true(y[96] == -8.0f);   /* q = 0 + 48 - 32 = 16, scale[6] = -1 */
    assert_true(y[128] == 40.0f);  /* q = 48 - 32 = 16, scale[8] = 5 */
    /* Random blocks, two per row, against the formulas above. */
    uint64_t s = 21;
    for (int trial = 0; trial < 50; trial++) {
        block_q4_K b4[2];
        block_q6_K b6[2];
        float row[2 * QK_K];
        random_bytes(&s, b4, sizeof b4);
        random_bytes(&s, b6, sizeof b6);
        for (int b = 0; b < 2; b++) {
            b4[b].d = random_scale(&s);
            b4[b].dmin = random_scale(&s);
            b6[b].d = random_scale(&s);
        }
        quant_dequantize_row(GGML_TYPE_Q4_K, b4, row, 2 * QK_K);
        for (int b = 0; b < 2; b++) {
            ggml_dequantize_q4_K(&b4[b], want);
            for (int i = 0; i < QK_K; i++)
                if (bits_of(row[b * QK_K + i]) != bits_of(want[i]))
                    fail_msg("Q4_K block %d element %d: %g, ggml formula %g", b, i, (double)row[b * QK_K + i],
                             (double)want[i]);
        }
        quant_dequantize_row(GGML_TYPE_Q6_K, b6, row, 2 * QK_K);
        for (int b = 0; b < 2; b++) {
            ggml_dequantize_q6_K(&b6[b], want);
            for (int i = 0; i < QK_K; i++)
                if (bits_of(row[b * QK_K + i]) != bits_of(want[i]))
                    fail_msg("Q6_K block %d element %d: %g, ggml formula %g", b, i, (double)row[b * QK_K + i],
                             (double)want[i]);
        }
    }
}

/* The bounds of quant.h: Q4_K within d·sc_j/2 + dmin/2 of x, Q6_K within half a step (a whole one for
 * values beyond +31.5 steps, which clamp to 31); plus 1e-5 of the super-block's largest magnitude for the
 * f32 roundings of the division and of the dequantization. On the whole row, the error is also small
 * against the data: rms below 12% (Q4_K, 16 levels) and 3% (Q6_K, 64 levels) of the row's rms. */
static void test_k_quants_quantize_then_dequantize_within_the_stated_bound(void **state) {
    (void)state;
    uint64_t s = 13;
    for (size_t k = 0; k < N_KQUANT; k++)
        for (int shape = 0; shape < 3; shape++) {
            const size_t n = kquant_sizes[k];
            float *x = normal_row(&s, n, shape == 1 ? 0.02f : 3.0f);
            if (shape == 2) /* all positive, most far from zero: the mins carry the offset */
                for (size_t i = 0; i < n; i++) x[i] = 5.0f + fabsf(x[i]);
            block_q4_K *q4 = malloc(n / QK_K * sizeof *q4);
            block_q6_K *q6 = malloc(n / QK_K * sizeof *q6);
            float *y4 = malloc(n * sizeof *y4), *y6 = malloc(n * sizeof *y6);
            quant_quantize_row(GGML_TYPE_Q4_K, x, q4, n);
            quant_quantize_row(GGML_TYPE_Q6_K, x, q6, n);
            quant_dequantize_row(GGML_TYPE_Q4_K, q4, y4, n);
            quant_dequantize_row(GGML_TYPE_Q6_K, q6, y6, n);
            double e4 = 0, e6 = 0, xx = 0;
            for (size_t b = 0; b < n / QK_K; b++) {
                float amax = 0.0f;
                for (int i = 0; i < QK_K; i++) amax = fmaxf(amax, fabsf(x[b * QK_K + i]));
                const double d = kern_f16_to_f32(q4[b].d), dmin = kern_f16_to_f32(q4[b].dmin);
                const double d6 = kern_f16_to_f32(q6[b].d);
                for (int i = 0; i < QK_K; i++) {
                    const size_t e = b * QK_K + i;
                    int sc, m;
                    ref_q4_K_scale_min(q4[b].scales, i / 32, &sc, &m);
                    double bound = 0.5 * d * sc + 0.5 * dmin + 1e-5 * amax;
                    if (fabs((double)y4[e] - x[e]) > bound)
                        fail_msg("Q4_K n=%zu i=%zu: x=%g back=%g err %g > %g", n, e, (double)x[e], (double)y4[e],
                                 fabs((double)y4[e] - x[e]), bound);
                    const double step = d6 * q6[b].scales[i / 16];
                    bound = (step != 0 && x[e] / step > 31.5 ? 1.0 : 0.5) * fabs(step) + 1e-5 * amax;
                    if (fabs((double)y6[e] - x[e]) > bound)
                        fail_msg("Q6_K n=%zu i=%zu: x=%g back=%g err %g > %g", n, e, (double)x[e], (double)y6[e],
                                 fabs((double)y6[e] - x[e]), bound);
                    e4 += ((double)y4[e] - x[e]) * ((double)y4[e] - x[e]);
                    e6 += ((double)y6[e] - x[e]) * ((double)y6[e] - x[e]);
                    xx += (double)x[e] * x[e];
                }
            }
            print_message("n=%zu shape %d: rms error / rms x: q4_K %.4f, q6_K %.4f\n", n, shape, sqrt(e4 / xx),
                          sqrt(e6 / xx));
            assert_true(sqrt(e4 / xx) < 0.12);
            assert_true(sqrt(e6 / xx) < 0.03);
            free(x);
            free(q4);
            free(q6);
            free(y4);
            free(y6);
        }
}

static void test_k_quants_of_zeros_are_zero(void **state) {
    (void)state;
    float x[QK_K] = {0}, y[QK_K];
    block_q4_K q4;
    block_q6_K q6;
    quant_quantize_row(GGML_TYPE_Q4_K, x, &q4, QK_K);
    quant_dequantize_row(GGML_TYPE_Q4_K, &q4, y, QK_K);
    for (int i = 0; i < QK_K; i++) assert_true(y[i] == 0.0f);
    quant_quantize_row(GGML_TYPE_Q6_K, x, &q6, QK_K);
    quant_dequantize_row(GGML_TYPE_Q6_K, &q6, y, QK_K);
    for (int i = 0; i < QK_K; i++) assert_true(y[i] == 0.0f);
}

static void test_quantizing_zeros_gives_zero_scale_and_zero_values(void **state) {
    (void)state;
    enum { N = 64 };
    float x[N] = {0}, y[N];
    x[7] = -0.0f;
    block_q8_0 q8[N / QK];
    block_q4_0 q4[N / QK];
    block_q8_act qa[N / QK];
    memset(q8, 0x55, sizeof q8);
    memset(q4, 0x55, sizeof q4);
    memset(qa, 0x55, sizeof qa);
    quant_quantize_row(GGML_TYPE_Q8_0, x, q8, N);
    quant_quantize_row(GGML_TYPE_Q4_0, x, q4, N);
    quant_row_q8(x, qa, N);
    for (int b = 0; b < N / QK; b++) {
        assert_int_equal(q8[b].d, 0);
        assert_int_equal(q4[b].d, 0x8000); /* ggml's d = max / -8 turns +0 into -0 */
        assert_true(bits_of(qa[b].d) == 0);
        for (int j = 0; j < QK; j++) {
            assert_int_equal(q8[b].qs[j], 0);
            assert_int_equal(qa[b].qs[j], 0);
        }
        for (int j = 0; j < QK / 2; j++) assert_int_equal(q4[b].qs[j], 0x88); /* 8 is Q4_0's zero */
    }
    quant_dequantize_row(GGML_TYPE_Q4_0, q4, y, N);
    for (int i = 0; i < N; i++) assert_true(y[i] == 0.0f);
    ref->row_q8(x, qa, N);
    assert_true(bits_of(qa[0].d) == 0 && qa[0].qs[7] == 0);
}

/* ---- activation quantization ------------------------------------------------------------------- */

static void test_activation_quantization_rounds_half_to_even(void **state) {
    (void)state;
    float x[QK] = {127.0f, 2.5f, -2.5f, 3.5f, 0.5f, -1.5f, 126.5f};
    block_q8_act a, b;
    quant_row_q8(x, &a, QK);
    ref->row_q8(x, &b, QK);
    assert_true(a.d == 1.0f && b.d == 1.0f);
    int8_t want[7] = {127, 2, -2, 4, 0, -2, 126};
    assert_memory_equal(a.qs, want, sizeof want);
    assert_memory_equal(b.qs, want, sizeof want);
}

/* K/V storage's Q8_0 blocks: the variant's bytes are quant_quantize_row's (the reference, ggml's roundf), on random
 * rows at several scales, a block of exact ties (x · id = k + 0.5, both signs), one a float either side of the ties, a
 * zero block, and a block with a NaN (which stores 0) and huge values. */
static void test_kv_q8_0_storage_variant_matches_the_reference(void **state) {
    (void)state;
    uint64_t s = 17;
    static const float scales[] = {1.0f, 1e-3f, 1e3f, 1e-20f, 1e30f};
    enum { N = 8 * QK };
    for (size_t sc = 0; sc < sizeof scales / sizeof *scales; sc++) {
        float *x = normal_row(&s, N, scales[sc]);
        for (int j = 0; j < QK; j++) { /* amax 127: d = 1, id = 1 */
            x[QK + j] = (float)(j - 16) + 0.5f;
            x[2 * QK + j] = nextafterf(x[QK + j], j % 2 ? INFINITY : -INFINITY);
        }
        x[QK] = x[2 * QK] = 127.0f;
        memset(x + 3 * QK, 0, QK * sizeof *x);
        x[4 * QK + 3] = NAN;
        x[4 * QK + 5] = -FLT_MAX;
        x[4 * QK + 7] = 3e38f;
        block_q8_0 a[N / QK], b[N / QK];
        kern_f32_to_q8_0_row(x, a, N);
        quant_quantize_row(GGML_TYPE_Q8_0, x, b, N);
        for (size_t blk = 0; blk < N / QK; blk++)
            if (memcmp(&a[blk], &b[blk], sizeof a[blk]))
                fail_msg("Q8_0 storage, scale %g: block %zu differs", (double)scales[sc], blk);
        assert_int_equal(b[4].qs[3], 0); /* the NaN */
        free(x);
    }
}

static void test_activation_quantization_variant_matches_the_reference(void **state) {
    (void)state;
    uint64_t s = 7;
    static const float scales[] = {1.0f, 1e-3f, 1e3f, 1e-20f};
    for (size_t k = 0; k < N_BLOCK; k++)
        for (size_t sc = 0; sc < 4; sc++) {
            size_t n = block_sizes[k];
            float *x = normal_row(&s, n, scales[sc]);
            /* a block of exact ties (amax 127 gives id 1) and a zero block, when there is room */
            if (n >= 96) {
                for (int j = 0; j < QK; j++) x[QK + j] = (float)(j - 16) + 0.5f;
                x[QK] = 127.0f;
                memset(x + 2 * QK, 0, QK * sizeof *x);
            }
            block_q8_act *a = malloc(n / QK * sizeof *a), *b = malloc(n / QK * sizeof *b);
            quant_row_q8(x, a, n);
            ref->row_q8(x, b, n);
            for (size_t blk = 0; blk < n / QK; blk++) {
                assert_same_bits(a[blk].d, b[blk].d, "quant_row_q8 scale", n);
                if (memcmp(a[blk].qs, b[blk].qs, QK)) fail_msg("quant_row_q8 n=%zu block %zu: quants differ", n, blk);
            }
            free(x);
            free(a);
            free(b);
        }
}

/* ---- dots -------------------------------------------------------------------------------------- */

static void test_dot_f32_variant_matches_the_reference_at_awkward_sizes(void **state) {
    (void)state;
    uint64_t s = 1;
    for (size_t k = 0; k < N_ANY; k++) {
        size_t n = any_sizes[k];
        for (int rep = 0; rep < 4; rep++) {
            float *a = normal_row(&s, n, 1.0f), *b = normal_row(&s, n, rep ? 0.1f : 1e4f);
            assert_same_bits(kern_dot_f32(a, b, n), ref->dot_f32(a, b, n), "kern_dot_f32", n);
            free(a);
            free(b);
        }
    }
}

static void test_dot_f32_does_not_depend_on_alignment(void **state) {
    (void)state;
    uint64_t s = 2;
    for (size_t k = 0; k < N_ANY; k++) {
        size_t n = any_sizes[k];
        float *a = normal_row(&s, n, 1.0f), *b = normal_row(&s, n, 1.0f);
        float *abuf = malloc((n + 8) * sizeof *abuf), *bbuf = malloc((n + 8) * sizeof *bbuf);
        float want = kern_dot_f32(a, b, n);
        for (size_t off = 1; off < 8; off++) {
            memcpy(abuf + off, a, n * sizeof *a);
            memcpy(bbuf + (8 - off) % 8, b, n * sizeof *b);
            assert_same_bits(kern_dot_f32(abuf + off, bbuf + (8 - off) % 8, n), want, "dot at an offset", n);
            assert_same_bits(ref->dot_f32(abuf + off, bbuf + (8 - off) % 8, n), want, "scalar at an offset", n);
        }
        free(a);
        free(b);
        free(abuf);
        free(bbuf);
    }
}

/* A weight row of `type` quantized from random values, and the activation as f32 and as Q8. */
typedef struct {
    void *w;
    float *xf;
    block_q8_act *xq;
} dot_case;

static dot_case make_dot_case(uint64_t *s, ggml_type type, size_t n) {
    dot_case c;
    float *wf = normal_row(s, n, 0.05f);
    c.w = malloc(row_bytes(type, n) ? row_bytes(type, n) : 1);
    quant_quantize_row(type, wf, c.w, n);
    c.xf = normal_row(s, n, 2.0f);
    c.xq = malloc((n / QK ? n / QK : 1) * sizeof *c.xq);
    quant_row_q8(c.xf, c.xq, n - n % QK);
    free(wf);
    return c;
}

static void free_dot_case(dot_case *c) {
    free(c->w);
    free(c->xf);
    free(c->xq);
}

static void test_dot_of_every_weight_type_variant_matches_the_reference(void **state) {
    (void)state;
    uint64_t s = 3;
    const ggml_type any_n[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    const ggml_type blocked[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    for (size_t t = 0; t < 3; t++)
        for (size_t k = 0; k < N_ANY; k++) {
            size_t n = any_sizes[k];
            dot_case c = make_dot_case(&s, any_n[t], n);
            assert_same_bits(kern_dot(any_n[t], c.w, c.xf, NULL, n), ref->dot(any_n[t], c.w, c.xf, NULL, n),
                             any_n[t] == GGML_TYPE_F32 ? "F32 dot" : any_n[t] == GGML_TYPE_F16 ? "F16 dot" : "BF16 dot",
                             n);
            free_dot_case(&c);
        }
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < N_BLOCK; k++) {
            size_t n = block_sizes[k];
            dot_case c = make_dot_case(&s, blocked[t], n);
            assert_same_bits(kern_dot(blocked[t], c.w, NULL, c.xq, n), ref->dot(blocked[t], c.w, NULL, c.xq, n),
                             t == 0 ? "Q8_0 dot" : "Q4_0 dot", n);
            free_dot_case(&c);
        }
    const ggml_type kquants[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < N_KQUANT; k++) {
            size_t n = kquant_sizes[k];
            dot_case c = make_dot_case(&s, kquants[t], n);
            assert_same_bits(kern_dot(kquants[t], c.w, NULL, c.xq, n), ref->dot(kquants[t], c.w, NULL, c.xq, n),
                             t == 0 ? "Q4_K dot" : "Q6_K dot", n);
            /* random bytes reach every scale, min and quant, which the quantizer may not */
            random_bytes(&s, c.w, row_bytes(kquants[t], n));
            for (size_t b = 0; b < n / QK_K; b++) {
                if (t == 0) {
                    ((block_q4_K *)c.w)[b].d = random_scale(&s);
                    ((block_q4_K *)c.w)[b].dmin = random_scale(&s);
                } else {
                    ((block_q6_K *)c.w)[b].d = random_scale(&s);
                }
            }
            assert_same_bits(kern_dot(kquants[t], c.w, NULL, c.xq, n), ref->dot(kquants[t], c.w, NULL, c.xq, n),
                             t == 0 ? "Q4_K dot, random bytes" : "Q6_K dot, random bytes", n);
            free_dot_case(&c);
        }
}

/* kern_matmul of random weights of `type` (n wide) against random rows, for every row count in rows[] and output count
 * in outs[], with the activation side prepared by kern_matmul itself and by the caller, on natural rows and (where the
 * variant packs) packed ones: every output has the bits of the reference dot. */
static void assert_matmul_equals_the_scalar_dots(uint64_t *s, ggml_type type, size_t n, const uint32_t *rows,
                                                 size_t n_counts, const uint32_t *outs, size_t n_outs) {
    enum { LDY_PAD = 3 }; /* outputs land in rows wider than n_out */
    const size_t nb = n / QK, wrb = row_bytes(type, n);
    uint32_t max_rows = 0, max_out = 0;
    for (size_t a = 0; a < n_counts; a++) max_rows = rows[a] > max_rows ? rows[a] : max_rows;
    for (size_t b = 0; b < n_outs; b++) max_out = outs[b] > max_out ? outs[b] : max_out;
    float *wf = normal_row(s, (size_t)max_out * n, 0.05f), *x = normal_row(s, (size_t)max_rows * n, 2.0f);
    uint8_t *w = malloc(max_out * wrb);
    block_q8_act *xq = malloc(max_rows * nb * sizeof *xq);
    for (uint32_t o = 0; o < max_out; o++) quant_quantize_row(type, wf + o * n, w + o * wrb, n);
    for (uint32_t r = 0; r < max_rows; r++) quant_row_q8(x + r * n, xq + r * nb, n);
    /* the same rows packed, as the model loader packs them (in two parts, as its threads do) */
    const bool packs = kern_packs(type, n);
    const size_t prb = packs ? kern_packed_row_bytes(type, n) : 0;
    uint8_t *wp = packs ? aligned_alloc(32, max_out * prb) : NULL;
    if (packs) {
        kern_pack_rows(type, w, wrb, 0, max_out / 2, n, wp);
        kern_pack_rows(type, w, wrb, max_out / 2, max_out, n, wp);
    }
    /* the reference dot of every (row, output), and the variant's own single dot beside it, once */
    float *want = malloc(sizeof *want * max_rows * max_out);
    for (uint32_t r = 0; r < max_rows; r++)
        for (uint32_t o = 0; o < max_out; o++) {
            want[r * max_out + o] = ref->dot(type, w + o * wrb, x + r * n, xq + r * nb, n);
            const float dot = kern_dot(type, w + o * wrb, x + r * n, xq + r * nb, n);
            if (bits_of(dot) != bits_of(want[r * max_out + o]))
                fail_msg("type %d, n=%zu: kern_dot of (%u, %u) is %.9g, scalar %.9g", (int)type, n, r, o, (double)dot,
                         (double)want[r * max_out + o]);
        }
    size_t n_tunings;
    const kern_tuning *tunings = kern_tunings(&n_tunings), *mine = kern_tuning_active();
    for (size_t a = 0; a < n_counts; a++)
        for (size_t b = 0; b < n_outs; b++) {
            const uint32_t n_rows = rows[a], n_out = outs[b];
            const size_t ldy = n_out + LDY_PAD;
            float *y = malloc(n_rows * ldy * sizeof *y);
            /* the activation side prepared by kern_matmul itself, then by the caller in two parts of rows (as two
             * threads do) */
            const size_t xp_bytes = n_rows * kern_panel_row_bytes(n);
            void *xp = xp_bytes ? aligned_alloc(32, xp_bytes) : NULL;
            if (xp) {
                kern_panel_rows(xq, n, 0, n_rows / 2, xp);
                kern_panel_rows(xq, n, n_rows / 2, n_rows, xp);
            }
            /* packed rows under every CPU's tuning row: the paths this machine would not choose too */
            for (int variant = 0; variant < 4; variant++) {
                const bool prepared = variant & 1, packed = variant & 2;
                if ((prepared && !xp) || (packed && !packs)) continue;
                for (size_t t = 0; t < (packed ? n_tunings : 1); t++) {
                    kern_tune(packed ? &tunings[t] : mine);
                    kern_matmul(type, packed, packed ? wp : w, packed ? prb : wrb, n_out, x, xq,
                                prepared ? xp : NULL, n_rows, n, y, ldy);
                    for (uint32_t r = 0; r < n_rows; r++)
                        for (uint32_t o = 0; o < n_out; o++)
                            if (bits_of(y[r * ldy + o]) != bits_of(want[r * max_out + o]))
                                fail_msg("type %d, n=%zu, %u rows x %u outputs%s%s (tuning %s): element (%u, %u) is "
                                         "%.9g, scalar %.9g",
                                         (int)type, n, n_rows, n_out, prepared ? ", rows prepared" : "",
                                         packed ? ", weights packed" : "", kern_tuning_active()->name, r, o,
                                         (double)y[r * ldy + o], (double)want[r * max_out + o]);
                }
            }
            kern_tune(mine);
            free(xp);
            free(y);
        }
    free(want);
    free(wf);
    free(x);
    free(w);
    free(wp);
    free(xq);
}

static void test_tiled_matmul_equals_the_scalar_dot_of_every_output_on_awkward_shapes(void **state) {
    (void)state;
    uint64_t s = 9;
    const ggml_type types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_Q4_K,
                               GGML_TYPE_Q6_K};
    const uint32_t rows[] = {1, 2, 3, 5, 17, 33}; /* 17, 33: the AMX tiles' 16 rows, and a partial group after them */
    const uint32_t outs[] = {1, 3, 5, 10, 17}; /* VNNI tiles of 4 weight rows: last ones of 3, 1, 2 and 1 */
    /* 1, 3, 13, 17, 24 blocks: tails after groups of 8; 552 blocks: the widest rows in panels, 553 the
     * narrowest taking direct tiles at every row count (quant.c's PANEL_MAX_GROUPS) */
    const size_t ns[] = {32, 96, 416, 544, 768, 552 * QK, 553 * QK};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const bool kquant = types[t] == GGML_TYPE_Q4_K || types[t] == GGML_TYPE_Q6_K;
            if (kquant && k >= N_KQUANT) continue;
            assert_matmul_equals_the_scalar_dots(&s, types[t], kquant ? kquant_sizes[k] : ns[k], rows,
                                                 sizeof rows / sizeof *rows, outs, sizeof outs / sizeof *outs);
        }
}

static void test_prefill_matmul_of_the_model_widths_equals_the_scalar_dots(void **state) {
    (void)state;
    uint64_t s = 10;
    /* 128 rows: the AMX tiles' whole pass of 8 groups of 16; 130: a second pass of one group, partly rows done
     * twice. 40 outputs: a last panel of 8 weight rows. */
    const uint32_t rows[] = {128, 130}, outs[] = {40};
    /* the 0.5B shape's widths: 896 (28 blocks: the half layout of a last group of 4) and 4864 (152 blocks: chunks of
     * 64 blocks, then 24); the 8B shape's 14336, whose rows' activation side the panels take in passes */
    const size_t ns[] = {896, 4864, 14336};
    const ggml_type types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}; /* packed where it packs */
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            if (ns[k] % kern_type_traits(types[t])->block_elems == 0) /* K-quants: 4864 only */
                assert_matmul_equals_the_scalar_dots(&s, types[t], ns[k], rows, 2, outs, 1);
}

static void test_attention_scores_follow_the_order_and_equal_their_twins(void **state) {
    (void)state;
    uint64_t s = 12;
    const size_t ns[] = {1, 7, 64, 72, 100, 128, 136};
    const size_t query_counts[] = {1, 2, 3, 4, 5, 6, 7, 11, 13}; /* every register block, and blocks after blocks */
    enum { T = KERN_KEY_TILE, OUT = T + 3 };                    /* query r's scores at r * OUT */
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
        for (size_t u = 0; u < sizeof query_counts / sizeof *query_counts; u++) {
            const size_t n = ns[k], n_q = query_counts[u], q_stride = n + 3;
            float *kt = normal_row(&s, n * T, 1.0f), *q = normal_row(&s, n_q * q_stride, 1.0f);
            uint16_t *kt16 = malloc(n * T * sizeof *kt16);
            kern_f32_to_f16_row(kt, kt16, n * T);
            float *wide = malloc(n * T * sizeof *wide); /* an f16 tile and its widening score alike */
            quant_dequantize_row(GGML_TYPE_F16, kt16, wide, n * T);
            float *got = malloc(n_q * OUT * sizeof *got), *want = malloc(n_q * OUT * sizeof *want);
            kern_score_tile_f16(kt16, q, q_stride, n_q, n, got, OUT);
            ref->score_tile_f16(kt16, q, q_stride, n_q, n, want, OUT);
            for (size_t r = 0; r < n_q; r++) assert_memory_equal(got + r * OUT, want + r * OUT, T * sizeof *got);
            kern_score_tile_f32(wide, q, q_stride, n_q, n, got, OUT);
            for (size_t r = 0; r < n_q; r++) assert_memory_equal(got + r * OUT, want + r * OUT, T * sizeof *got);
            kern_score_tile_f32(kt, q, q_stride, n_q, n, got, OUT);
            ref->score_tile_f32(kt, q, q_stride, n_q, n, want, OUT);
            for (size_t r = 0; r < n_q; r++) {
                assert_memory_equal(got + r * OUT, want + r * OUT, T * sizeof *got);
                for (size_t j = 0; j < T; j++) { /* the order of attn.h, spelled out */
                    float v = 0.0f;
                    for (size_t d = 0; d < n; d++) v = fmaf(q[r * q_stride + d], kt[d * T + j], v);
                    assert_same_bits(got[r * OUT + j], v, "attention score", n);
                }
            }
            free(kt);
            free(q);
            free(kt16);
            free(wide);
            free(got);
            free(want);
        }
}

static void test_attention_accumulation_equals_its_steps(void **state) {
    (void)state;
    uint64_t s = 11;
    const size_t ns[] = {1, 7, 64, 72, 100, 128, 136};
    const size_t key_counts[] = {1, 5, 8, 13, 32};
    const size_t query_counts[] = {1, 2, 3, 5}; /* a block of queries gets each query's own bits */
    enum { OUT = 33 };                          /* weights of query r at r * OUT */
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
        for (size_t c = 0; c < sizeof key_counts / sizeof *key_counts; c++)
            for (size_t u = 0; u < sizeof query_counts / sizeof *query_counts; u++) {
                const size_t n = ns[k], n_keys = key_counts[c], n_q = query_counts[u];
                const size_t stride = n + 5, q_stride = n + 3; /* rows inside wider KV rows and output rows */
                float *rows = normal_row(&s, n_keys * stride, 1.0f);
                float *a = normal_row(&s, n_q * OUT, 0.5f), *y0 = normal_row(&s, n_q * q_stride, 1.0f);
                uint16_t *rows16 = malloc(n_keys * stride * sizeof *rows16);
                kern_f32_to_f16_row(rows, rows16, n_keys * stride);
                float *ya = malloc(n_q * q_stride * sizeof *ya), *yb = malloc(n_q * q_stride * sizeof *yb);
                for (int f16 = 0; f16 < 2; f16++) {
                    memcpy(ya, y0, n_q * q_stride * sizeof *ya);
                    memcpy(yb, y0, n_q * q_stride * sizeof *yb);
                    if (f16)
                        kern_axpy_rows_f16(ya, q_stride, a, OUT, n_q, rows16, stride, n_keys, n);
                    else
                        kern_axpy_rows_f32(ya, q_stride, a, OUT, n_q, rows, stride, n_keys, n);
                    for (size_t r = 0; r < n_q; r++) {
                        for (size_t j = 0; j < n_keys; j++)
                            if (f16)
                                for (size_t i = 0; i < n; i++)
                                    yb[r * q_stride + i] = fmaf(a[r * OUT + j], kern_f16_to_f32(rows16[j * stride + i]),
                                                                yb[r * q_stride + i]);
                            else
                                for (size_t i = 0; i < n; i++)
                                    yb[r * q_stride + i] = fmaf(a[r * OUT + j], rows[j * stride + i], yb[r * q_stride + i]);
                        assert_memory_equal(ya + r * q_stride, yb + r * q_stride, n * sizeof *ya);
                    }
                }
                free(rows);
                free(a);
                free(y0);
                free(rows16);
                free(ya);
                free(yb);
            }
}

/* ---- quantized K/V rows (kv.h, attn.h's kern_score_tile_q and kern_weigh_tile_q) ---------------- */

static const ggml_type kv_quant_types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};

/* Every byte random (Q8_0 quants -128 included, every Q4_0 nibble), the f16 scales from normal values. */
static void random_kv_blocks(uint64_t *s, ggml_type type, uint8_t *blocks, size_t n_blocks) {
    const size_t bytes = kern_row_bytes(type, QK);
    for (size_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = blocks + b * bytes;
        for (size_t i = 0; i < bytes; i++) blk[i] = (uint8_t)rng_next(s);
        const uint16_t d = kern_f32_to_f16(0.01f * rng_normal(s));
        memcpy(blk, &d, sizeof d);
    }
}

/* Queries quantized as attention quantizes them: rows of n elements, n / QK blocks each. */
static block_q8_act *quantized_queries(uint64_t *s, size_t n_q, size_t n) {
    float *x = normal_row(s, n_q * n, 1.0f);
    block_q8_act *q = malloc(n_q * n / QK * sizeof *q);
    for (size_t r = 0; r < n_q; r++) quant_row_q8(x + r * n, q + r * n / QK, n);
    free(x);
    return q;
}

static void test_quantized_key_scores_follow_the_order_and_equal_the_reference(void **state) {
    (void)state;
    uint64_t s = 21;
    const size_t ns[] = {32, 64, 96, 128, 256};
    const size_t query_counts[] = {1, 2, 3, 5, 6, 7, 13, 16, 17, 40};
    enum { T = KERN_KEY_TILE, OUT = T + 3 };
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            for (size_t u = 0; u < sizeof query_counts / sizeof *query_counts; u++) {
                const ggml_type type = kv_quant_types[t];
                const size_t n = ns[k], n_q = query_counts[u], nb = n / QK, block = kern_row_bytes(type, QK);
                uint8_t *kt = malloc(nb * T * block); /* a tile's sections, its bytes as random as its blocks' */
                random_kv_blocks(&s, type, kt, nb * T);
                for (size_t b = 0; b < nb; b++) /* the scales are read as f16: finite ones */
                    for (size_t j = 0; j < T; j++) {
                        const uint16_t d = kern_f32_to_f16(0.01f * rng_normal(&s));
                        memcpy(kt + b * T * block + j * sizeof d, &d, sizeof d);
                    }
                block_q8_act *q = quantized_queries(&s, n_q, n);
                float *got = malloc(n_q * OUT * sizeof *got), *want = malloc(n_q * OUT * sizeof *want);
                kern_score_tile_q(type, kt, q, nb, n_q, n, got, OUT);
                ref->score_tile_q(type, kt, q, nb, n_q, n, want, OUT);
                for (size_t r = 0; r < n_q; r++) {
                    assert_memory_equal(got + r * OUT, want + r * OUT, T * sizeof *got);
                    for (size_t j = 0; j < T; j++) { /* the order and the layout of attn.h, spelled out */
                        float v = 0.0f;
                        for (size_t b = 0; b < nb; b++) {
                            const uint8_t *sec = kt + b * T * block, *qs = sec + T * sizeof(uint16_t);
                            int32_t sum = 0;
                            for (size_t i = 0; i < QK; i++) {
                                const size_t byte = type == GGML_TYPE_Q8_0 ? i : i % 16;
                                const uint8_t x = qs[(byte / 4 * T + j) * 4 + byte % 4];
                                const int32_t kq = type == GGML_TYPE_Q8_0 ? (int8_t)x : (i < 16 ? x & 15 : x >> 4) - 8;
                                sum += kq * q[r * nb + b].qs[i];
                            }
                            uint16_t d;
                            memcpy(&d, sec + j * sizeof d, sizeof d);
                            v = fmaf(q[r * nb + b].d * kern_f16_to_f32(d), (float)sum, v);
                        }
                        assert_same_bits(got[r * OUT + j], v, "quantized attention score", n);
                    }
                }
                free(kt);
                free(q);
                free(got);
                free(want);
            }
}

/* Weights as attention gives them (exponentials, at most 1) — one vanishing block in every eighth query, so the
 * "adds nothing" rule is met too, and in another the largest weight near 2^-119 with subnormal ones below it (where a
 * variant's shortcut around subnormal steps ends: order.h's ord_weights_scaled) — weighed against a V tile of random
 * sections. */
static void test_quantized_value_weighing_follows_the_order_and_equals_the_reference(void **state) {
    (void)state;
    uint64_t s = 22;
    const size_t ns[] = {32, 64, 96, 256};
    const size_t key_counts[] = {1, 5, 16, 17, 31, 32};
    const size_t query_counts[] = {1, 2, 3, 5, 8, 9, 16};
    enum { T = KERN_KEY_TILE, OUT = T + 3 };
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            for (size_t c = 0; c < sizeof key_counts / sizeof *key_counts; c++)
                for (size_t u = 0; u < sizeof query_counts / sizeof *query_counts; u++) {
                    const ggml_type type = kv_quant_types[t];
                    const size_t n = ns[k], n_keys = key_counts[c], n_q = query_counts[u], nb = n / QK;
                    const size_t block = kern_row_bytes(type, QK), bytes = block - sizeof(uint16_t);
                    const size_t y_stride = n + 3; /* the head inside wider rows */
                    uint8_t *vt = malloc(nb * T * block);
                    random_kv_blocks(&s, type, vt, nb * T); /* then the scales: finite, either sign */
                    for (size_t b = 0; b < nb; b++)
                        for (size_t j = 0; j < T; j++) {
                            const uint16_t d = kern_f32_to_f16(0.01f * rng_normal(&s));
                            memcpy(vt + b * T * block + j * sizeof d, &d, sizeof d);
                        }
                    float *a = malloc(n_q * OUT * sizeof *a), *y0 = normal_row(&s, n_q * y_stride, 1.0f);
                    for (size_t r = 6; r < n_q; r += 8) /* from 0, so the tiny weights' sums show */
                        memset(y0 + r * y_stride, 0, n * sizeof *y0);
                    for (size_t r = 0; r < n_q; r++)
                        for (size_t j = 0; j < OUT; j++) {
                            const float x = -fabsf(4.0f * rng_normal(&s));
                            a[r * OUT + j] = r % 8 == 7   ? ldexpf(1.0f + x / 64, -130)
                                             : r % 8 == 6 ? ldexpf(expf(x), -112) /* W near 2^-119 */
                                                          : expf(x);
                        }
                    float *got = malloc(n_q * y_stride * sizeof *got), *want = malloc(n_q * y_stride * sizeof *want);
                    memcpy(got, y0, n_q * y_stride * sizeof *got);
                    memcpy(want, y0, n_q * y_stride * sizeof *want);
                    kern_weigh_tile_q(type, got, y_stride, a, OUT, n_q, vt, n_keys, n);
                    ref->weigh_tile_q(type, want, y_stride, a, OUT, n_q, vt, n_keys, n);
                    for (size_t r = 0; r < n_q; r++) {
                        assert_memory_equal(got + r * y_stride, want + r * y_stride, n * sizeof *got);
                        for (size_t b = 0; b < nb; b++) { /* the order and the layout of attn.h, spelled out */
                            const uint8_t *sec = vt + b * T * block, *qs = sec + T * sizeof(uint16_t);
                            float w[T], top = 0.0f;
                            for (size_t j = 0; j < n_keys; j++) {
                                uint16_t d;
                                memcpy(&d, sec + j * sizeof d, sizeof d);
                                w[j] = a[r * OUT + j] * kern_f16_to_f32(d);
                                top = fmaxf(top, fabsf(w[j]));
                            }
                            for (size_t i = 0; i < QK; i++) {
                                float v = y0[r * y_stride + b * QK + i];
                                if (top >= 0x1p-120f) {
                                    int32_t sum = 0;
                                    for (size_t j = 0; j < n_keys; j++) {
                                        const uint8_t x = qs[(j / 4 * bytes + i % bytes) * 4 + j % 4];
                                        const int32_t vq = type == GGML_TYPE_Q8_0 ? (int8_t)x
                                                                                  : (i < 16 ? x & 15 : x >> 4) - 8;
                                        sum += (int32_t)nearbyintf(w[j] * (127.0f / top)) * vq;
                                    }
                                    v = fmaf(top / 127.0f, (float)sum, v);
                                }
                                assert_same_bits(got[r * y_stride + b * QK + i], v, "quantized value weighing", n);
                            }
                        }
                    }
                    free(vt);
                    free(a);
                    free(y0);
                    free(got);
                    free(want);
                }
}

/* One lane's tile step spelled out by the reference's own steps, in the order attn.h states for kern_attend_lanes_q. */
static void lane_step(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, const block_q8_act *q,
                      uint32_t keys, uint32_t below, float scale, float *m, float *d, float *y) {
    if (!keys) return;
    float sc[KERN_KEY_TILE], sum;
    ref->score_tile_q(type, kt, q, 0, 1, n, sc, KERN_KEY_TILE);
    for (uint32_t j = 0; j < below; j++) sc[j] = -INFINITY;
    const float t = ref->scale_max(sc, keys, scale);
    if (t > *m) {
        float c = *m - t;
        ref->exp(&c, 1);
        for (size_t i = 0; i < n; i++) y[i] *= c;
        *d *= c;
        *m = t;
    }
    ref->exp_sum_rows(sc, KERN_KEY_TILE, &keys, m, 1, &sum);
    *d += sum;
    ref->weigh_tile_q(type, y, n, sc, KERN_KEY_TILE, 1, vt, keys, n);
}

/* Queries in lanes, over several tiles with every kind of lane — not reaching a tile, seeing part of it (the diagonal),
 * keys under a window — end with each query's state bit for bit as its own steps leave it, in the active variant (when
 * it has the lanes) and in the reference's; two lane blocks share each call, the second one full. Peaked attention too
 * (wide scores, V scales from 2^-24 up): weights down to subnormal, and blocks whose largest weight is near 2^-120,
 * where the "adds nothing" rule and the variants' shortcuts around subnormal steps meet. */
static void test_queries_in_lanes_take_each_query_s_own_steps(void **state) {
    (void)state;
    uint64_t s = 24;
    const size_t ns[] = {32, 64, 256}, query_counts[] = {1, 5, 16};
    enum { T = KERN_KEY_TILE, TILES = 24, L = KERN_LANES, B = 2 };
    const float scale = 0.125f;
    for (size_t t = 0; t < 4; t++) /* each type, with ordinary attention and peaked */
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            for (size_t u = 0; u < sizeof query_counts / sizeof *query_counts; u++) {
                const ggml_type type = kv_quant_types[t % 2];
                const bool peaked = t >= 2;
                const size_t n = ns[k], n_q[B] = {query_counts[u], L}, nb = n / QK, block = kern_row_bytes(type, QK);
                uint8_t *kt = malloc(TILES * nb * T * block), *vt = malloc(TILES * nb * T * block);
                random_kv_blocks(&s, type, kt, TILES * nb * T);
                random_kv_blocks(&s, type, vt, TILES * nb * T);
                for (size_t b = 0; b < TILES * nb; b++) /* finite scales, either sign; keys' larger, for wide scores */
                    for (size_t j = 0; j < T; j++) {
                        const float fv = peaked ? ldexpf(1.0f, -(int)(rng_next(&s) % 25)) : 0.01f;
                        const uint16_t dk = kern_f32_to_f16((peaked ? 8.0f : 0.2f) * rng_normal(&s));
                        const uint16_t dv = kern_f32_to_f16(fv * rng_normal(&s));
                        memcpy(kt + b * T * block + j * sizeof dk, &dk, sizeof dk);
                        memcpy(vt + b * T * block + j * sizeof dv, &dv, sizeof dv);
                    }
                block_q8_act *q[B];
                uint8_t *qu[B];
                float *dq[B], *want_y[B], want_m[B][L], want_d[B][L];
                kern_lane_block lanes[2][B]; /* the reference's, the active variant's */
                for (size_t g = 0; g < B; g++) {
                    q[g] = quantized_queries(&s, n_q[g], n);
                    qu[g] = malloc(nb * QK * L);
                    dq[g] = malloc(nb * L * sizeof *dq[g]);
                    kern_lanes_queries(q[g], nb, n_q[g], n, qu[g], dq[g]);
                    want_y[g] = calloc(n * L, sizeof(float));
                    for (int v = 0; v < 2; v++) {
                        lanes[v][g] = (kern_lane_block){.qu = qu[g], .dq = dq[g], .y = calloc(n * L, sizeof(float))};
                        for (size_t r = 0; r < L; r++) lanes[v][g].m[r] = -INFINITY;
                    }
                    for (size_t r = 0; r < L; r++) want_m[g][r] = -INFINITY, want_d[g][r] = 0.0f;
                }
                for (size_t tile = 0; tile < TILES; tile++) {
                    const uint8_t *ktile = kt + tile * nb * T * block, *vtile = vt + tile * nb * T * block;
                    for (size_t g = 0; g < B; g++)
                        for (size_t r = 0; r < L; r++) { /* none, part or all of the tile's keys */
                            const uint64_t x = rng_next(&s);
                            uint32_t keys = x % 4 == 0 ? 0 : x % 4 == 1 ? 1 + (uint32_t)(x >> 8) % T : T;
                            if (r >= n_q[g]) keys = 0;
                            const uint32_t below = keys && x % 3 == 0 ? (uint32_t)(x >> 16) % keys : 0;
                            for (int v = 0; v < 2; v++) lanes[v][g].keys[r] = keys, lanes[v][g].below[r] = below;
                            float yr[256];
                            for (size_t i = 0; i < n; i++) yr[i] = want_y[g][i * L + r];
                            lane_step(type, ktile, vtile, n, q[g] + r * nb, keys, below, scale, &want_m[g][r],
                                      &want_d[g][r], yr);
                            for (size_t i = 0; i < n; i++) want_y[g][i * L + r] = yr[i];
                        }
                    ref->attend_lanes_q(type, ktile, vtile, n, scale, lanes[0], B);
                    if (kern_attend_lanes_available()) kern_attend_lanes_q(type, ktile, vtile, n, scale, lanes[1], B);
                }
                for (int v = 0; v < (kern_attend_lanes_available() ? 2 : 1); v++)
                    for (size_t g = 0; g < B; g++)
                        for (size_t r = 0; r < n_q[g]; r++) {
                            assert_same_bits(lanes[v][g].m[r], want_m[g][r], "lane maximum", n);
                            assert_same_bits(lanes[v][g].d[r], want_d[g][r], "lane denominator", n);
                            for (size_t i = 0; i < n; i++)
                                assert_same_bits(lanes[v][g].y[i * L + r], want_y[g][i * L + r], "lane output", n);
                        }
                free(kt);
                free(vt);
                for (size_t g = 0; g < B; g++) {
                    free(q[g]);
                    free(qu[g]);
                    free(dq[g]);
                    free(want_y[g]);
                    free(lanes[0][g].y);
                    free(lanes[1][g].y);
                }
            }
}

/* Rows stored quantized read back (kv_map_read) as the weight quantizer's blocks of the same values, K and V alike,
 * whatever position of a tile they hold. */
static void test_quantized_kv_rows_read_back_as_the_quantizer_wrote_them(void **state) {
    (void)state;
    uint64_t s = 23;
    enum { N_POS = 40, KV_DIM = 96 };
    const fkv_kv_type kv_types[] = {FKV_KV_Q8_0, FKV_KV_Q4_0};
    for (size_t t = 0; t < 2; t++) {
        fkv_error err = {0};
        kv_buf *kv = kv_new(2, N_POS, KV_DIM, kv_types[t], &err);
        assert_non_null(kv);
        const kv_map map = kv_buf_map(kv);
        const size_t bytes = kv_row_bytes(kv_types[t], KV_DIM);
        assert_int_equal(bytes, kern_row_bytes(kv_quant_types[t], KV_DIM));
        float *k = normal_row(&s, N_POS * KV_DIM, 1.0f), *v = normal_row(&s, N_POS * KV_DIM, 1.0f);
        for (uint32_t p = 0; p < N_POS; p++) kv_map_store(&map, 1, p, k + p * KV_DIM, v + p * KV_DIM, KV_DIM);
        uint8_t *got_k = malloc(bytes), *got_v = malloc(bytes), *want = malloc(bytes);
        for (uint32_t p = 0; p < N_POS; p++) {
            kv_map_read(&map, 1, p, got_k, got_v);
            quant_quantize_row(kv_quant_types[t], k + p * KV_DIM, want, KV_DIM);
            assert_memory_equal(got_k, want, bytes);
            quant_quantize_row(kv_quant_types[t], v + p * KV_DIM, want, KV_DIM);
            assert_memory_equal(got_v, want, bytes);
        }
        free(k);
        free(v);
        free(got_k);
        free(got_v);
        free(want);
        kv_free(kv);
    }
}

/* Attention over quantized K/V rows (ops.h's walk over kv.h's tiles): under every variant the reference's bytes, for
 * queries that see 1, 31, 33, 64 and 70 keys, one head or several, grouped-query heads, a window; the rows of a
 * prefill chunk attended together equal each row attended alone (as decode attends it). */
static void test_quantized_kv_attention_equals_the_reference_at_awkward_shapes(void **state) {
    (void)state;
    uint64_t s = 24;
    enum { N_POS = 70, MAX_ROWS = 8 };
    const fkv_kv_type kv_types[] = {FKV_KV_Q8_0, FKV_KV_Q4_0};
    const struct {
        uint32_t n_heads, n_kv_heads, head_dim, window;
    } shapes[] = {{1, 1, 32, 0}, {4, 2, 32, 0}, {6, 2, 64, 0}, {2, 2, 128, 20}, {8, 1, 256, 0}};
    const uint32_t seen[] = {1, 31, 33, 64, 70};
    char why[160];
    for (size_t t = 0; t < 2; t++)
        for (size_t h = 0; h < sizeof shapes / sizeof *shapes; h++) {
            const uint32_t n_heads = shapes[h].n_heads, head_dim = shapes[h].head_dim;
            const uint32_t kv_dim = shapes[h].n_kv_heads * head_dim, q_dim = n_heads * head_dim;
            fkv_error err = {0};
            kv_buf *kv = kv_new(1, N_POS, kv_dim, kv_types[t], &err);
            assert_non_null(kv);
            const kv_map map = kv_buf_map(kv);
            float *k = normal_row(&s, N_POS * kv_dim, 1.0f), *v = normal_row(&s, N_POS * kv_dim, 1.0f);
            for (uint32_t p = 0; p < N_POS; p++) kv_map_store(&map, 0, p, k + p * kv_dim, v + p * kv_dim, kv_dim);
            ops_kv_view views[MAX_ROWS];
            for (int r = 0; r < MAX_ROWS; r++) views[r] = kv_map_view(&map, 0);
            for (size_t c = 0; c < sizeof seen / sizeof *seen; c++) {
                const uint32_t n_rows = seen[c] < MAX_ROWS ? seen[c] : MAX_ROWS;
                uint32_t pos[MAX_ROWS];
                for (uint32_t r = 0; r < n_rows; r++) pos[r] = seen[c] - n_rows + r;
                float *q = normal_row(&s, n_rows * q_dim, 1.0f);
                float *got = malloc(n_rows * q_dim * sizeof *got), *want = malloc(n_rows * q_dim * sizeof *want);
                float *alone = malloc(q_dim * sizeof *alone);
                const float scale = 1.0f / sqrtf((float)head_dim);
                ops_attention(q, n_rows, pos, views, n_heads, shapes[h].n_kv_heads, head_dim, scale, shapes[h].window,
                              NULL, got, 2);
                for (uint32_t r = 0; r < n_rows; r++) {
                    ops_attention(q + r * q_dim, 1, &pos[r], views, n_heads, shapes[h].n_kv_heads, head_dim, scale,
                                  shapes[h].window, NULL, alone, 1);
                    assert_memory_equal(alone, got + r * q_dim, q_dim * sizeof *alone);
                }
                assert_int_equal(kern_select("ref", why, sizeof why), 0);
                ops_attention(q, n_rows, pos, views, n_heads, shapes[h].n_kv_heads, head_dim, scale, shapes[h].window,
                              NULL, want, 1);
                assert_int_equal(kern_select(variant_under_test, why, sizeof why), 0);
                if (memcmp(got, want, n_rows * q_dim * sizeof *got))
                    fail_msg("%s KV, %u heads (%u KV heads) of %u, %u keys: %s differs from ref",
                             kv_types[t] == FKV_KV_Q8_0 ? "q8_0" : "q4_0", n_heads, shapes[h].n_kv_heads, head_dim,
                             seen[c], variant_under_test);
                for (uint32_t i = 0; i < n_rows * q_dim; i++) assert_true(isfinite(got[i]));
                free(q);
                free(got);
                free(want);
                free(alone);
            }
            free(k);
            free(v);
            kv_free(kv);
        }
}

static void test_activation_quants_never_reach_minus_128(void **state) {
    (void)state;
    /* the weight dots flip x's sign by w's (quant.h); -128 would not survive it */
    uint64_t s = 10;
    enum { N = 4096 };
    float *x = normal_row(&s, N, 3.0f);
    x[5] = -1e30f;
    x[40] = 1e-40f; /* a block whose scale is subnormal */
    for (int i = 33; i < 64; i++) x[i] = i == 40 ? x[i] : -1e-41f;
    block_q8_act a[N / QK], b[N / QK];
    quant_row_q8(x, a, N);
    ref->row_q8(x, b, N);
    assert_memory_equal(a, b, sizeof a);
    for (int blk = 0; blk < N / QK; blk++)
        for (int j = 0; j < QK; j++)
            if (a[blk].qs[j] < -127) fail_msg("block %d element %d quantized to %d", blk, j, a[blk].qs[j]);
    free(x);
}

static void test_integer_block_sums_are_exact_at_the_int8_extremes(void **state) {
    (void)state;
    /* weights at -128 against activations at -127, the activation quantizer's extreme (quant.h): a 16-bit
     * pairwise sum of |w|·x must not saturate, nor a sign flip overflow; Q4_0 nibble 0 against -127 likewise */
    enum { N = 9 * QK };
    block_q8_0 w8[N / QK];
    block_q4_0 w4[N / QK];
    block_q8_act x[N / QK];
    for (int b = 0; b < N / QK; b++) {
        w8[b].d = w4[b].d = 0x3c00;
        x[b].d = 1.0f;
        memset(w8[b].qs, 0x80, QK);
        memset(w4[b].qs, b % 2 ? 0x00 : 0xff, QK / 2);
        memset(x[b].qs, 0x81, QK);
    }
    float q8 = kern_dot(GGML_TYPE_Q8_0, w8, NULL, x, N), q4 = kern_dot(GGML_TYPE_Q4_0, w4, NULL, x, N);
    assert_same_bits(q8, ref->dot(GGML_TYPE_Q8_0, w8, NULL, x, N), "Q8_0 extremes", N);
    assert_same_bits(q4, ref->dot(GGML_TYPE_Q4_0, w4, NULL, x, N), "Q4_0 extremes", N);
    assert_true(q8 == 9.0f * 32 * 16256);
    /* the packed tiles too: four rows of the same x */
    enum { ROWS = 4 };
    block_q8_act xr[ROWS * N / QK];
    float y8[ROWS], y4[ROWS];
    for (int r = 0; r < ROWS; r++) memcpy(xr + r * N / QK, x, sizeof x);
    kern_matmul(GGML_TYPE_Q8_0, false, w8, sizeof w8, 1, NULL, xr, NULL, ROWS, N, y8, 1);
    kern_matmul(GGML_TYPE_Q4_0, false, w4, sizeof w4, 1, NULL, xr, NULL, ROWS, N, y4, 1);
    for (int r = 0; r < ROWS; r++) {
        assert_same_bits(y8[r], q8, "Q8_0 extremes, panels", N);
        assert_same_bits(y4[r], q4, "Q4_0 extremes, panels", N);
    }
    /* and the rows packed at load, one row (direct tiles) and four (panels) */
    const ggml_type types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    const void *rows[] = {w8, w4};
    for (int t = 0; t < 2; t++) {
        if (!kern_packs(types[t], N)) continue;
        const size_t prb = kern_packed_row_bytes(types[t], N);
        void *wp = aligned_alloc(32, prb);
        kern_pack_rows(types[t], rows[t], sizeof w8, 0, 1, N, wp);
        for (uint32_t n_rows = 1; n_rows <= ROWS; n_rows += ROWS - 1) {
            float y[ROWS];
            kern_matmul(types[t], true, wp, prb, 1, NULL, xr, NULL, n_rows, N, y, 1);
            for (uint32_t r = 0; r < n_rows; r++)
                assert_same_bits(y[r], t ? q4 : q8, t ? "Q4_0 extremes, packed" : "Q8_0 extremes, packed", N);
        }
        free(wp);
    }
    /* even blocks: nibble 15 (7) · -127; odd blocks: nibble 0 (-8) · -127 */
    assert_true(q4 == 5.0f * 32 * (7 * -127) + 4.0f * 32 * (-8 * -127));
}

static void test_dot_f16_f32_variant_matches_the_reference(void **state) {
    (void)state;
    uint64_t s = 4;
    for (size_t k = 0; k < N_ANY; k++) {
        size_t n = any_sizes[k];
        float *af = normal_row(&s, n, 1.0f), *b = normal_row(&s, n, 1.0f);
        uint16_t *a = malloc((n ? n : 1) * sizeof *a);
        kern_f32_to_f16_row(af, a, n);
        float simd = kern_dot(GGML_TYPE_F16, a, b, NULL, n);
        assert_same_bits(simd, ref->dot(GGML_TYPE_F16, a, b, NULL, n), "F16 dot via kern_dot", n);
        free(af);
        free(a);
        free(b);
    }
}

/* |got - ref| <= depth·u·mag, with 1% slack for the second-order term (u = 2^-24): the bound of a sum whose
 * terms, of magnitudes summing to mag, each pass through at most `depth` f32 roundings. */
static void expect_dot_near(ggml_type type, size_t n, float got, double ref, double depth, double mag) {
    const double tol = 1.01 * depth * U24 * mag;
    if (fabs((double)got - ref) > tol)
        fail_msg("type %d n=%zu: dot %.9g vs reference %.9g, |diff| %g > %g", (int)type, n, (double)got, ref,
                 fabs((double)got - ref), tol);
}

static void test_dots_agree_with_a_double_reference_on_dequantized_values(void **state) {
    (void)state;
    uint64_t s = 9;
    const ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    for (size_t t = 0; t < 5; t++)
        for (size_t k = 0; k < N_BLOCK; k++) {
            ggml_type type = types[t];
            int quantized = type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0;
            size_t n = block_sizes[k];
            dot_case c = make_dot_case(&s, type, n);
            float *w = malloc(n * sizeof *w);
            quant_dequantize_row(type, c.w, w, n);
            double ref = 0.0, mag = 0.0;
            for (size_t i = 0; i < n; i++) {
                double xi = quantized ? (double)c.xq[i / QK].d * c.xq[i / QK].qs[i % QK] : (double)c.xf[i];
                ref += (double)w[i] * xi;
                mag += fabs((double)w[i] * xi);
            }
            /* Each term passes through at most `depth` f32 roundings: one fma per lane step (n/32 for
             * f32 lanes, n/32/8 for block lanes, plus the d_w·d_x product) and the 5 (or 3) combine
             * additions; so |dot - ref| <= depth·u·Σ|w·x| (u = 2^-24), with 1% slack for the second-order
             * term. The double reference itself is exact to far below that. */
            double depth = quantized ? (double)(n / QK / 8 + 1) + 1 + 3 : (double)(n / 32 + 1) + 5;
            expect_dot_near(type, n, kern_dot(type, c.w, c.xf, c.xq, n), ref, depth, mag);
            free(w);
            free_dot_case(&c);
        }
}

/* K-quant dots against double. Each activation block meets the weights through one fmaf into its lane per
 * super-block; for Q6_K its d·d_x product rounds once before, for Q4_K the weight terms meet first in one fused
 * step whose min term is two rounded products (-dmin·m, then ·Σx) — at most four roundings reach a term. 3
 * combine additions follow: |dot - ref| <= depth·u·M, where M is the sum of the magnitudes of the terms — for
 * Q4_K Σ|x|·(|d·sc·q| + |dmin·m|), which bounds the cancelling partial sums too. */
static void test_k_quant_dots_agree_with_a_double_reference(void **state) {
    (void)state;
    uint64_t s = 17;
    const ggml_type types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    for (size_t t = 0; t < 2; t++)
        for (size_t k = 0; k < N_KQUANT; k++) {
            const ggml_type type = types[t];
            const size_t n = kquant_sizes[k];
            dot_case c = make_dot_case(&s, type, n);
            float *w = malloc(n * sizeof *w);
            quant_dequantize_row(type, c.w, w, n);
            double ref = 0.0, mag = 0.0;
            for (size_t i = 0; i < n; i++) {
                const double xi = (double)c.xq[i / QK].d * c.xq[i / QK].qs[i % QK];
                ref += (double)w[i] * xi;
                if (type == GGML_TYPE_Q4_K) {
                    const block_q4_K *b = (const block_q4_K *)c.w + i / QK_K;
                    int sc, m;
                    ref_q4_K_scale_min(b->scales, (int)(i % QK_K) / 32, &sc, &m);
                    const double off = (double)kern_f16_to_f32(b->dmin) * m;
                    mag += (fabs((double)w[i] + off) + off) * fabs(xi);
                } else {
                    mag += fabs((double)w[i] * xi);
                }
            }
            const double steps = type == GGML_TYPE_Q4_K ? 4.0 : 2.0;
            const double depth = steps * (double)(n / QK_K) + 1 + 3;
            expect_dot_near(type, n, kern_dot(type, c.w, NULL, c.xq, n), ref, depth, mag);
            free(w);
            free_dot_case(&c);
        }
}


/* ---- ggml's later types (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K, IQ4_XS, MXFP4) ---------------------------- */

static const struct {
    ggml_type type;
    int f16_at[2]; /* the block's f16 fields (-1: none), given finite random values over random bytes */
} later[] = {
    {GGML_TYPE_Q4_1, {0, 2}},  {GGML_TYPE_Q5_0, {0, -1}},   {GGML_TYPE_Q5_1, {0, 2}},  {GGML_TYPE_IQ4_NL, {0, -1}},
    {GGML_TYPE_Q2_K, {80, 82}}, {GGML_TYPE_Q3_K, {108, -1}}, {GGML_TYPE_Q5_K, {0, 2}}, {GGML_TYPE_IQ4_XS, {0, -1}},
    {GGML_TYPE_MXFP4, {-1, -1}},
};
#define N_LATER (sizeof later / sizeof later[0])

/* Row lengths with awkward block counts: 1, 3, 13, 17 and 152 blocks of 32; 1, 3, 19 and 69 super-blocks. */
static const size_t later_block_sizes[] = {32, 96, 416, 544, 4864};
static const size_t later_super_sizes[] = {256, 768, 4864, 69 * QK_K};

static size_t later_sizes(ggml_type type, const size_t **ns) {
    const bool super = kern_type_traits(type)->block_elems == QK_K;
    *ns = super ? later_super_sizes : later_block_sizes;
    return super ? sizeof later_super_sizes / sizeof *later_super_sizes
                 : sizeof later_block_sizes / sizeof *later_block_sizes;
}

/* Random bytes in every block of w, its f16 fields then finite (either sign): every quant, scale and min. MXFP4's
 * exponents stay below 200 (scales up to 2^71), so that no product overflows; blocks 0 and 1 take the subnormal
 * scales, e 0 and 1. */
static void random_blocks(uint64_t *s, size_t t, void *w, size_t n) {
    const kern_traits *kt = kern_type_traits(later[t].type);
    random_bytes(s, w, row_bytes(later[t].type, n));
    for (size_t b = 0; b < n / kt->block_elems; b++) {
        for (int f = 0; f < 2; f++)
            if (later[t].f16_at[f] >= 0) {
                const uint16_t h = (uint16_t)(random_scale(s) | (rng_next(s) & 0x8000));
                memcpy((uint8_t *)w + b * kt->block_bytes + later[t].f16_at[f], &h, 2);
            }
        if (later[t].type == GGML_TYPE_MXFP4) {
            block_mxfp4 *m = (block_mxfp4 *)w + b;
            m->e = b < 2 ? (uint8_t)b : (uint8_t)(m->e % 200);
        }
    }
}

static void test_the_later_types_have_ggml_block_sizes_and_geometry(void **state) {
    (void)state;
    const uint32_t bytes[] = {20, 22, 24, 18, 84, 110, 176, 136, 17};
    const uint32_t elems[] = {32, 32, 32, 32, 256, 256, 256, 256, 32};
    for (size_t t = 0; t < N_LATER; t++) {
        const kern_traits *kt = kern_type_traits(later[t].type);
        assert_non_null(kt);
        assert_true(kt->act_q8);
        assert_int_equal(kt->block_bytes, bytes[t]);
        assert_int_equal(kt->block_elems, elems[t]);
        uint32_t be, bb;
        ggml_type_geometry(later[t].type, &be, &bb); /* the GGUF reader's table agrees */
        assert_int_equal(be, elems[t]);
        assert_int_equal(bb, bytes[t]);
    }
}

/* Hand-built blocks: one element of each type decoded by hand from types.h's layout. */
static void test_dequantize_reads_the_later_layouts(void **state) {
    (void)state;
    float out[QK_K];
    block_q5_0 q50 = {.d = kern_f32_to_f16(0.5f), .qh = {0x01, 0, 0x01, 0x80}}; /* bits 0, 16 and 31 set */
    q50.qs[0] = 0x3a;  /* element 0: 10 | 16 = 26; element 16: 3 | 16 = 19 */
    q50.qs[15] = 0x70; /* element 15: 0 (bit 15 clear); element 31: 7 | 16 = 23 */
    quant_dequantize_row(GGML_TYPE_Q5_0, &q50, out, QK);
    assert_true(out[0] == 5.0f && out[16] == 1.5f && out[15] == -8.0f && out[31] == 3.5f && out[1] == -8.0f);
    block_q4_1 q41 = {.d = kern_f32_to_f16(0.25f), .m = kern_f32_to_f16(-1.0f)};
    q41.qs[3] = 0xf2;
    quant_dequantize_row(GGML_TYPE_Q4_1, &q41, out, QK);
    assert_true(out[3] == -0.5f && out[19] == 2.75f && out[0] == -1.0f);
    block_iq4_nl nl = {.d = kern_f32_to_f16(2.0f)};
    nl.qs[5] = 0x0f;
    quant_dequantize_row(GGML_TYPE_IQ4_NL, &nl, out, QK);
    assert_true(out[5] == 226.0f && out[21] == -254.0f);
    block_q2_K q2 = {.d = kern_f32_to_f16(1.0f), .dmin = kern_f32_to_f16(0.5f)};
    q2.qs[32 + 16] = 0x0c; /* bits 2-3 of qs[32h + l] for h 1, l 16: element 128 + 32 + 16 (sub-block 11), q 3 */
    quant_dequantize_row(GGML_TYPE_Q2_K, &q2, out, QK_K);
    assert_true(out[128 + 32 + 16] == 0.0f); /* sub-block 11: scale 0, min 0 */
    q2.scales[11] = 0x23; /* scale 3, min 2 */
    quant_dequantize_row(GGML_TYPE_Q2_K, &q2, out, QK_K);
    assert_true(out[128 + 32 + 16] == 3.0f * 3.0f - 1.0f && out[128 + 32 + 17] == -1.0f);
    block_q3_K q3 = {.d = kern_f32_to_f16(1.0f)};
    q3.scales[8 + 1] = 0xc0; /* sub-block 13 = j 4·3 + 1: low nibble of scales[5] >> 4, bits 6-7 of scales[9] */
    q3.scales[5] = 0x70;     /* sc = (7 | 3 << 4) - 32 = 23 */
    q3.qs[32 + 16 + 10] = 0x10; /* element 128 + 64 + 26 (h 1, j 2, l 26): bits 4-5 = 1, hmask bit 6 clear: 1 - 4 */
    quant_dequantize_row(GGML_TYPE_Q3_K, &q3, out, QK_K);
    assert_true(out[128 + 64 + 26] == 23.0f * -3.0f);
    q3.hmask[26] = 0x40;
    quant_dequantize_row(GGML_TYPE_Q3_K, &q3, out, QK_K);
    assert_true(out[128 + 64 + 26] == 23.0f);
    block_q5_K q5 = {.d = kern_f32_to_f16(1.0f), .dmin = kern_f32_to_f16(1.0f)};
    q5.scales[1] = 2;   /* sub-block 1: scale 2 */
    q5.scales[5] = 1;   /* min 1 */
    q5.qs[7] = 0x50;    /* element 32 + 7: high nibble 5 */
    q5.qh[7] = 0x02;    /* bit 1: the fifth bit of sub-block 1 */
    quant_dequantize_row(GGML_TYPE_Q5_K, &q5, out, QK_K);
    assert_true(out[32 + 7] == 2.0f * 21.0f - 1.0f && out[7] == 0.0f);
    block_iq4_xs xs = {.d = kern_f32_to_f16(1.0f), .scales_h = 0x3 << 6, .scales_l = {0, 0x50}};
    xs.qs[16 * 3 + 2] = 0xe0; /* sub-block 3: ls = (5 | 3 << 4) - 32 = 21; element 96 + 16 + 2: v[14] = 89 */
    quant_dequantize_row(GGML_TYPE_IQ4_XS, &xs, out, QK_K);
    assert_true(out[96 + 18] == 21.0f * 89.0f && out[96 + 2] == 21.0f * -127.0f);
    block_mxfp4 fp4 = {.e = 130}; /* scale 2^2 */
    fp4.qs[9] = 0xd7; /* element 9: v[7] = 12; element 25: v[13] = -6 */
    quant_dequantize_row(GGML_TYPE_MXFP4, &fp4, out, QK);
    assert_true(out[9] == 48.0f && out[25] == -24.0f && out[0] == 0.0f);
    fp4.e = 0; /* scale 2^-128, a subnormal */
    quant_dequantize_row(GGML_TYPE_MXFP4, &fp4, out, QK);
    assert_true(out[9] == ldexpf(12.0f, -128) && out[25] == ldexpf(-6.0f, -128));
}

static void test_dot_of_the_later_types_variant_matches_the_reference(void **state) {
    (void)state;
    uint64_t s = 31;
    for (size_t t = 0; t < N_LATER; t++) {
        const ggml_type type = later[t].type;
        const size_t *ns, count = later_sizes(type, &ns);
        for (size_t k = 0; k < count; k++) {
            const size_t n = ns[k];
            dot_case c = make_dot_case(&s, type, n);
            assert_same_bits(kern_dot(type, c.w, NULL, c.xq, n), ref->dot(type, c.w, NULL, c.xq, n),
                             kern_type_traits(type)->name, n);
            random_blocks(&s, t, c.w, n);
            assert_same_bits(kern_dot(type, c.w, NULL, c.xq, n), ref->dot(type, c.w, NULL, c.xq, n),
                             kern_type_traits(type)->name, n);
            free_dot_case(&c);
        }
    }
}

static void test_matmul_of_the_later_types_equals_the_scalar_dots(void **state) {
    (void)state;
    uint64_t s = 32;
    const uint32_t rows[] = {1, 2, 17, 31, 33}, outs[] = {1, 3, 9, 17};
    for (size_t t = 0; t < N_LATER; t++) {
        const size_t *ns, count = later_sizes(later[t].type, &ns);
        for (size_t k = 0; k < count; k += 2) /* the first, third and fifth widths: every tail and one long row */
            assert_matmul_equals_the_scalar_dots(&s, later[t].type, ns[k], rows, sizeof rows / sizeof *rows, outs,
                                                 sizeof outs / sizeof *outs);
    }
}

/* The later types' weights at their extremes against activations at -127 (quant.h's extreme): no 16-bit pair sum may
 * saturate, no sign flip overflow, and IQ4_XS reaches the largest block sum, 32 · 32 · 127 · 127 (matmul.h). Every
 * lane and combine step stays an integer below 2^24 here, so each dot is also known exactly. */
static void test_later_type_block_sums_are_exact_at_the_extremes(void **state) {
    (void)state;
    enum { NB = 16, N = NB * QK, N_NL = 9 * QK }; /* two super-blocks; IQ4_NL nine blocks, a partial group */
    block_q8_act x[NB];
    for (int b = 0; b < NB; b++) {
        x[b].d = 1.0f;
        memset(x[b].qs, 0x81, QK);
    }
    block_iq4_nl nl[9];
    for (int b = 0; b < 9; b++) { /* even blocks: value -127 (nibble 0); odd blocks: 113 (nibble 15) */
        nl[b].d = 0x3c00;
        memset(nl[b].qs, b % 2 ? 0xff : 0x00, sizeof nl[b].qs);
    }
    block_mxfp4 fp4[9];
    for (int b = 0; b < 9; b++) { /* scale 1; even blocks: value 12 (nibble 7); odd blocks: -12 (nibble 15) */
        fp4[b].e = 128;
        memset(fp4[b].qs, b % 2 ? 0xff : 0x77, sizeof fp4[b].qs);
    }
    block_iq4_xs xs[2]; /* every scale -32 (its bits 0), every value -127 */
    memset(xs, 0, sizeof xs);
    block_q3_K q3[2]; /* first: q -4 (bits 0, hmask clear) at scale -32; second: q 3 at scale 31 (every bit set) */
    block_q2_K q2[2]; /* q 3, scale 15, min 15 */
    memset(q2, 0xff, sizeof q2);
    for (int sb = 0; sb < 2; sb++) {
        xs[sb].d = q3[sb].d = q2[sb].d = q2[sb].dmin = 0x3c00;
        memset(q3[sb].hmask, sb ? 0xff : 0, sizeof q3[sb].hmask);
        memset(q3[sb].qs, sb ? 0xff : 0, sizeof q3[sb].qs);
        memset(q3[sb].scales, sb ? 0xff : 0, sizeof q3[sb].scales);
    }
    /* the largest sums of the types with a min (q 31 or 15 everywhere, so s_b and t_b share one int32 at their
     * bounds: avx2/dot.c); Q5_0: even blocks q - 16 = -16 (bits 0), odd ones 15 */
    block_q4_1 q41[9];
    block_q5_1 q51[9];
    block_q5_0 q50[9];
    block_q5_K q5k[2]; /* q 31, scales and mins 63 */
    memset(q41, 0xff, sizeof q41);
    memset(q51, 0xff, sizeof q51);
    memset(q5k, 0xff, sizeof q5k);
    for (int b = 0; b < 9; b++) {
        q41[b].d = q41[b].m = q51[b].d = q51[b].m = q50[b].d = 0x3c00;
        memset(q50[b].qh, b % 2 ? 0xff : 0, sizeof q50[b].qh);
        memset(q50[b].qs, b % 2 ? 0xff : 0, sizeof q50[b].qs);
    }
    for (int sb = 0; sb < 2; sb++) q5k[sb].d = q5k[sb].dmin = 0x3c00;
    const struct {
        ggml_type type;
        const void *w;
        size_t n;
        float want;
    } cases[] = {
        {GGML_TYPE_IQ4_NL, nl, N_NL, 5.0f * 32 * (-127 * -127) + 4.0f * 32 * (113 * -127)},
        {GGML_TYPE_MXFP4, fp4, N_NL, 5.0f * 32 * (12 * -127) + 4.0f * 32 * (-12 * -127)},
        {GGML_TYPE_Q4_1, q41, N_NL, 9.0f * (32 * (15 * -127) + 32 * -127)},
        {GGML_TYPE_Q5_1, q51, N_NL, 9.0f * (32 * (31 * -127) + 32 * -127)},
        {GGML_TYPE_Q5_0, q50, N_NL, 5.0f * 32 * (-16 * -127) + 4.0f * 32 * (15 * -127)},
        {GGML_TYPE_Q5_K, q5k, N, NB * (63.0f * 32 * (31 * -127) + -63.0f * (32 * -127))},
        {GGML_TYPE_IQ4_XS, xs, N, NB * (-32.0f * 32 * (-127 * -127))},
        {GGML_TYPE_Q3_K, q3, N, NB / 2 * (-32.0f * 32 * (-4 * -127)) + NB / 2 * (31.0f * 32 * (3 * -127))},
        {GGML_TYPE_Q2_K, q2, N, NB * (15.0f * 32 * (3 * -127) - 15.0f * 32 * -127)},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *name = kern_type_traits(cases[c].type)->name;
        const float got = kern_dot(cases[c].type, cases[c].w, NULL, x, cases[c].n);
        assert_same_bits(got, ref->dot(cases[c].type, cases[c].w, NULL, x, cases[c].n), name, cases[c].n);
        assert_same_bits(got, cases[c].want, name, cases[c].n);
    }
}

/* The dot and the dequantization read one layout: the dot equals Σ dequantized w · x in double, within a bound.
 * Each lane step is at most three f32 roundings (a product of scales, the weight side's fused step, the lane's
 * fma), then 3 combine additions; a term's magnitude is bounded by |x| · 4 · max|w| of its block (a min or an
 * offset never exceeds the block's values by more than the quantizer's grid, here the quantizer's own rows). */
static void test_later_type_dots_agree_with_a_double_reference(void **state) {
    (void)state;
    uint64_t s = 33;
    for (size_t t = 0; t < N_LATER; t++) {
        const ggml_type type = later[t].type;
        const size_t *ns, count = later_sizes(type, &ns);
        for (size_t k = 0; k < count; k++) {
            const size_t n = ns[k];
            dot_case c = make_dot_case(&s, type, n);
            float *w = malloc(n * sizeof *w);
            quant_dequantize_row(type, c.w, w, n);
            double want = 0.0, mag = 0.0;
            for (size_t b = 0; b < n / QK; b++) {
                double wmax = 0.0;
                for (size_t i = b * QK; i < (b + 1) * QK; i++) wmax = fmax(wmax, fabs((double)w[i]));
                for (size_t i = b * QK; i < (b + 1) * QK; i++) {
                    const double xi = (double)c.xq[b].d * c.xq[b].qs[i % QK];
                    want += (double)w[i] * xi;
                    mag += 4.0 * wmax * fabs(xi);
                }
            }
            expect_dot_near(type, n, kern_dot(type, c.w, NULL, c.xq, n), want, 3.0 * (double)(n / QK / 8 + 1) + 3,
                            mag);
            free(w);
            free_dot_case(&c);
        }
    }
}

/* Quantized by ggml's reference quantizers, rows come back close: within the block's range / levels. */
static void test_the_later_types_quantize_then_dequantize_within_a_step(void **state) {
    (void)state;
    uint64_t s = 34;
    const size_t n = 4096;
    /* the largest error per element, as a fraction of the block's max |x|: half a step of the grid (with its
     * scales' own rounding and the non-linear grid's widest gap, 1/127 · 24/2, for IQ4); MXFP4's a quarter, what its
     * widest gap (8 to 12 steps of 2^(E - 3), the max in [2^E, 2^(E+1))) or the saturation above 12 steps leaves */
    const double frac[] = {1.2 / 15, 1.2 / 16, 1.2 / 31, 0.12, 1.2 / 3, 1.2 / 4, 1.2 / 31, 0.14, 0.13};
    float *x = normal_row(&s, n, 1.0f), *y = malloc(n * sizeof *y);
    for (size_t t = 0; t < N_LATER; t++) {
        void *w = malloc(row_bytes(later[t].type, n));
        quant_quantize_row(later[t].type, x, w, n);
        quant_dequantize_row(later[t].type, w, y, n);
        const size_t be = kern_type_traits(later[t].type)->block_elems;
        for (size_t b = 0; b < n / be; b++) {
            double amax = 0.0;
            for (size_t i = b * be; i < (b + 1) * be; i++) amax = fmax(amax, fabs((double)x[i]));
            for (size_t i = b * be; i < (b + 1) * be; i++)
                if (fabs((double)y[i] - x[i]) > frac[t] * 2.0 * amax)
                    fail_msg("%s: element %zu is %g for %g (block max %g)", kern_type_traits(later[t].type)->name, i,
                             (double)y[i], (double)x[i], amax);
        }
        free(w);
    }
    free(x);
    free(y);
}

/* MXFP4 weights of random bytes in products of few and many rows, natural and packed: every exponent below 200, or
 * (every third weight row) only the smallest, 0..3, whose subnormal scales then decide the dot. The AMX tiles' scales and the dots' give the
 * reference's bits where the quantizer's rows do not reach. */
static void test_matmul_of_mxfp4_at_every_scale_equals_the_scalar_dots(void **state) {
    (void)state;
    enum { N = 416, ROWS = 33, OUT = 17, NB = N / QK };
    uint64_t s = 35;
    size_t t = 0;
    while (later[t].type != GGML_TYPE_MXFP4) t++;
    const size_t wrb = row_bytes(GGML_TYPE_MXFP4, N);
    uint8_t *w = malloc(OUT * wrb);
    for (int o = 0; o < OUT; o++) {
        random_blocks(&s, t, w + o * wrb, N);
        for (int b = 0; b < NB && o % 3 == 0; b++) ((block_mxfp4 *)(w + o * wrb))[b].e %= 4;
    }
    float *x = normal_row(&s, ROWS * N, 2.0f), *y = malloc(ROWS * OUT * sizeof *y);
    block_q8_act *xq = malloc(ROWS * NB * sizeof *xq);
    for (int r = 0; r < ROWS; r++) quant_row_q8(x + r * N, xq + r * NB, N);
    /* natural rows, then packed ones (where the variant packs), at 1 row, a few and many */
    const bool packs = kern_packs(GGML_TYPE_MXFP4, N);
    const size_t prb = packs ? kern_packed_row_bytes(GGML_TYPE_MXFP4, N) : 0;
    uint8_t *wp = packs ? aligned_alloc(32, OUT * prb) : NULL;
    if (packs) kern_pack_rows(GGML_TYPE_MXFP4, w, wrb, 0, OUT, N, wp);
    const uint32_t counts[] = {1, 3, ROWS};
    for (int packed = 0; packed <= (int)packs; packed++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            kern_matmul(GGML_TYPE_MXFP4, packed, packed ? wp : w, packed ? prb : wrb, OUT, x, xq, NULL, counts[c], N,
                        y, OUT);
            for (uint32_t r = 0; r < counts[c]; r++)
                for (int o = 0; o < OUT; o++) {
                    const float want = ref->dot(GGML_TYPE_MXFP4, w + o * wrb, NULL, xq + r * NB, N);
                    assert_same_bits(kern_dot(GGML_TYPE_MXFP4, w + o * wrb, NULL, xq + r * NB, N), want, "mxfp4 dot",
                                     N);
                    assert_same_bits(y[r * OUT + o], want, packed ? "mxfp4 matmul, packed" : "mxfp4 matmul", N);
                }
        }
    free(wp);
    free(w);
    free(x);
    free(y);
    free(xq);
}

/* ---- MXFP4 against ggml's own code: values its library wrote (tests/data/README.md) --------------------------- */

/* The file tests/data/name, which must hold n bytes. */
static void *test_data(const char *name, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", FKV_TEST_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    uint8_t *p = malloc(n + 1);
    const size_t got = fread(p, 1, n + 1, f);
    fclose(f);
    if (got != n) fail_msg("%s holds %zu bytes, not %zu", path, got, n);
    return p;
}

static void test_mxfp4_dequantizes_as_ggml_does_bit_for_bit(void **state) {
    (void)state;
    enum { NB = 256 }; /* block b: e = b, and each half of it every nibble */
    block_mxfp4 blk[NB];
    for (uint32_t b = 0; b < NB; b++) {
        blk[b].e = (uint8_t)b;
        for (uint32_t j = 0; j < QK / 2; j++) blk[b].qs[j] = (uint8_t)(((j + b) & 15) | ((7 * j + b) & 15) << 4);
    }
    float *want = test_data("mxfp4_ggml.bin", NB * QK * sizeof(float)), *got = malloc(NB * QK * sizeof(float));
    quant_dequantize_row(GGML_TYPE_MXFP4, blk, got, NB * QK);
    for (size_t i = 0; i < NB * QK; i++)
        if (bits_of(got[i]) != bits_of(want[i]))
            fail_msg("mxfp4 element %zu (e %zu): %a, ggml %a", i, i / QK, (double)got[i], (double)want[i]);
    free(want);
    free(got);
}

/* The quantizer's inputs: block b's element j. Ten kinds of block, b % 10, each swept over a power 2^k,
 * k = b / 10 % 277 - 148 (-148..128): random values; a largest element just below 2^k; one 2^k · (1 - m · 2^-24)
 * below it, m 1..96; subnormals; zeros of both signs beside tiny values (amax below 2^-125: e wraps); multiples of a
 * power of two (many midway between two of the grid's values); values up to FLT_MAX; a NaN, an infinity or -FLT_MAX
 * among others; and the two largest elements on either side of where log2f starts rounding up to k (m = J and J + 1,
 * J = floor(2^q · ln 2) for the floats in [2^q, 2^(q+1)) just below k: ref/quantize.c's floor_log2f). */
static uint64_t mxfp4_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double mxfp4_unit(uint64_t r) { return (double)(r >> 11) / 4503599627370496.0 - 1.0; } /* [-1, 1) */

static float mxfp4_input(uint32_t b, uint32_t j) {
    const uint64_t r = mxfp4_mix((uint64_t)b << 32 | j), rb = mxfp4_mix(b);
    const int k = (int)(b / 10 % 277) - 148;
    const uint32_t at = (uint32_t)(rb % 32); /* the block's largest element */
    const double sign = rb >> 63 ? -1.0 : 1.0;
    switch (b % 10) {
    case 0: return (float)(mxfp4_unit(r) * ldexp(1.0, k));
    case 1: /* the float below 2^k (FLT_MAX for k = 128) */
        if (j == at) return (float)sign * nextafterf(k < 128 ? (float)ldexp(1.0, k) : INFINITY, 0.0f);
        return (float)(mxfp4_unit(r) * ldexp(1.0, k - 1));
    case 2:
        if (j == at) return (float)(sign * ldexp(1.0 - (double)(1 + rb % 96) / 16777216.0, k));
        return (float)(mxfp4_unit(r) * ldexp(1.0, k - 1));
    case 3: return float_of((uint32_t)(r & 0x807fffffu)); /* subnormal bits, either sign */
    case 4: return j % 11 == 0 ? (float)(mxfp4_unit(r) * ldexp(1.0, k % 40 - 130)) : r >> 63 ? -0.0f : 0.0f;
    case 5: return (float)ldexp((double)((int)(r % 51) - 25), k % 40 - 21);
    case 6: return (float)(mxfp4_unit(r) * 3.4028234663852886e38);
    case 7:
        if (j == at) return b / 10 % 3 == 0 ? NAN : b / 10 % 3 == 1 ? (float)sign * INFINITY : -FLT_MAX;
        return (float)(mxfp4_unit(r) * ldexp(1.0, k % 20));
    default: {
        const double below = k > 0 ? k - 0.5 : -k; /* a value in the floats' binade just below k */
        const int q = below < 1.0 ? -1 : (int)floor(log2(below));
        const double m = (q < 0 ? 0.0 : floor(ldexp(log(2.0), q))) + (b % 10 - 8);
        if (j == at) return (float)(sign * ldexp(1.0 - m / 16777216.0, k));
        return (float)(mxfp4_unit(r) * ldexp(1.0, k - 1));
    }
    }
}

static void test_mxfp4_quantizes_as_ggml_does_byte_for_byte(void **state) {
    (void)state;
    enum { NB = 10 * 277 };
    float *x = malloc(NB * QK * sizeof *x);
    for (uint32_t b = 0; b < NB; b++)
        for (uint32_t j = 0; j < QK; j++) x[b * QK + j] = mxfp4_input(b, j);
    block_mxfp4 *want = test_data("mxfp4_ggml_quant.bin", NB * sizeof *want), *got = malloc(NB * sizeof *got);
    quant_quantize_row(GGML_TYPE_MXFP4, x, got, NB * QK);
    for (size_t b = 0; b < NB; b++)
        if (memcmp(&got[b], &want[b], sizeof *got))
            fail_msg("mxfp4 block %zu (kind %zu): e %u, ggml's %u; quants %s", b, b % 10, got[b].e, want[b].e,
                     memcmp(got[b].qs, want[b].qs, sizeof got[b].qs) ? "differ" : "equal");
    free(x);
    free(want);
    free(got);
}

/* ---- axpy -------------------------------------------------------------------------------------- */

static void test_exp_variant_equals_the_reference_and_is_within_2_ulp_of_libm(void **state) {
    (void)state;
    enum { N = 4099 }; /* not a multiple of 8: the scalar tail too */
    uint64_t s = 21;
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, 88.5f, -87.33654f, -87.4f, -100.0f, INFINITY, -INFINITY,
                             NAN, -NAN, 0.34657359f, -0.34657359f, 1e-8f, -1e-8f};
    const size_t n_special = sizeof special / sizeof *special;
    for (size_t i = 0; i < N; i++)
        a[i] = i < n_special ? special[i] : (float)((rng_uniform(&s) - 0.75) * 200.0); /* mostly [-150, 50] */
    memcpy(b, a, N * sizeof *b);
    kern_exp(a, N);
    ref->exp(b, N);
    for (size_t i = 0; i < N; i++) assert_same_bits(a[i], b[i], "kern_exp", i);
    assert_true(isnan(a[11]) && isnan(a[12]));                         /* NaN stays NaN */
    assert_true(isinf(a[9]) && a[10] == 0.0f && a[8] == 0.0f && a[7] == 0.0f); /* +inf, -inf, below the range */
    /* the edges, float by float: results near FLT_MIN (where 2^k meets subnormal products) and near overflow */
    const float edges[] = {-87.33654f, -86.0f, 88.0f}; /* kern_exp's range: -87.33654 .. 88 */
    for (size_t e = 0; e < sizeof edges / sizeof *edges; e++) {
        float x = edges[e];
        for (size_t i = 0; i < N / 2; i++) x = nextafterf(x, -INFINITY);
        for (size_t i = 0; i < N; i++, x = nextafterf(x, INFINITY)) a[i] = b[i] = x;
        kern_exp(a, N);
        ref->exp(b, N);
        for (size_t i = 0; i < N; i++) assert_same_bits(a[i], b[i], "kern_exp at an edge", i);
    }
    /* accuracy: a fresh grid against libm's double exp */
    for (int k = -8733; k <= 8800; k++) {
        float x = (float)k / 100.0f, e = x;
        kern_exp(&e, 1);
        double want = exp((double)x);
        if (x > 88.0f) {
            assert_true(isinf(e));
            continue;
        }
        if (want < 1.1754944e-38) continue; /* flushed below FLT_MIN */
        if (fabs(e - want) > want * 2.4e-7) fail_msg("kern_exp(%g) = %.9g, e^x = %.9g", (double)x, (double)e, want);
    }
    free(a);
    free(b);
}

static void test_softmax_tile_steps_equal_their_twins_and_the_plain_max_and_sum(void **state) {
    (void)state;
    uint64_t s = 23;
    for (size_t n = 0; n <= 40; n++) {
        float *x = normal_row(&s, n + 1, 4.0f), *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
        if (n > 3) x[3] = NAN; /* never the max */
        memcpy(a, x, (n + 1) * sizeof *a);
        memcpy(b, x, (n + 1) * sizeof *b);
        const float ma = kern_scale_max(a, n, 0.125f), mb = ref->scale_max(b, n, 0.125f);
        assert_same_bits(ma, mb, "kern_scale_max", n);
        assert_memory_equal(a, b, n * sizeof *a);
        float want = -INFINITY;
        for (size_t j = 0; j < n; j++)
            if (x[j] * 0.125f > want) want = x[j] * 0.125f;
        assert_true(ma == want);
        if (n > 3) a[3] = b[3] = 0.0f;
        float sa, sb;
        const uint32_t n32 = (uint32_t)n;
        float *wa = calloc(48, sizeof *wa), *wb = calloc(48, sizeof *wb); /* one row of a stride-48 block */
        memcpy(wa, a, n * sizeof *a);
        memcpy(wb, b, n * sizeof *b);
        kern_exp_sum_rows(wa, 48, &n32, &ma, 1, &sa);
        ref->exp_sum_rows(wb, 48, &n32, &mb, 1, &sb);
        assert_same_bits(sa, sb, "kern_exp_sum_rows", n);
        assert_memory_equal(wa, wb, n * sizeof *wa);
        double sum = 0;
        for (size_t j = 0; j < n; j++) sum += wa[j];
        assert_true(fabs(sa - sum) <= 1e-5 * (sum + 1));
        free(wa);
        free(wb);
        free(x);
        free(a);
        free(b);
    }
    /* a block of rows gets each row's own bits */
    enum { ROWS = 5, STRIDE = 32 };
    const uint32_t n[ROWS] = {0, 1, 9, 32, 17};
    const float m[ROWS] = {0.5f, -1.0f, 2.0f, 3.5f, -INFINITY};
    float *block = normal_row(&s, ROWS * STRIDE, 2.0f), *scalar = malloc(ROWS * STRIDE * sizeof *scalar);
    memcpy(scalar, block, ROWS * STRIDE * sizeof *scalar);
    float sum[ROWS], want[ROWS];
    for (size_t r = 0; r < ROWS; r++) ref->exp_sum_rows(scalar + r * STRIDE, STRIDE, &n[r], &m[r], 1, &want[r]);
    kern_exp_sum_rows(block, STRIDE, n, m, ROWS, sum);
    for (size_t r = 0; r < ROWS; r++) {
        assert_same_bits(sum[r], want[r], "kern_exp_sum_rows, a row of a block", n[r]);
        assert_memory_equal(block + r * STRIDE, scalar + r * STRIDE, n[r] * sizeof *block);
    }
    free(block);
    free(scalar);
}

/* ---- threads ----------------------------------------------------------------------------------- */

static void test_dispatching_functions_from_two_threads_give_serial_bits(void **state) {
    (void)state;
    enum { ROWS = 16, N = 4864 };
    uint64_t s = 8;
    float *x = normal_row(&s, (size_t)ROWS * N, 1.0f), *wf = normal_row(&s, (size_t)ROWS * N, 0.05f);
    block_q8_0 *w8 = malloc((size_t)ROWS * N / QK * sizeof *w8);
    block_q4_0 *w4 = malloc((size_t)ROWS * N / QK * sizeof *w4);
    for (int r = 0; r < ROWS; r++) {
        quant_quantize_row(GGML_TYPE_Q8_0, wf + (size_t)r * N, w8 + (size_t)r * N / QK, N);
        quant_quantize_row(GGML_TYPE_Q4_0, wf + (size_t)r * N, w4 + (size_t)r * N / QK, N);
    }
    block_q8_act *xq_serial = malloc((size_t)ROWS * N / QK * sizeof *xq_serial);
    block_q8_act *xq_par = malloc((size_t)ROWS * N / QK * sizeof *xq_par);
    float serial[ROWS][3], par[ROWS][3];
    int threads_seen = 0;

    /* each activation row against the weight row of the same index: a matrix product's diagonal */
    for (int r = 0; r < ROWS; r++) {
        block_q8_act *xq = xq_serial + (size_t)r * N / QK;
        quant_row_q8(x + (size_t)r * N, xq, N);
        serial[r][0] = kern_dot_f32(wf + (size_t)r * N, x + (size_t)r * N, N);
        serial[r][1] = kern_dot(GGML_TYPE_Q8_0, w8 + (size_t)r * N / QK, NULL, xq, N);
        serial[r][2] = kern_dot(GGML_TYPE_Q4_0, w4 + (size_t)r * N / QK, NULL, xq, N);
    }
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        threads_seen = omp_get_num_threads();
#pragma omp for schedule(static, 1)
        for (int r = ROWS - 1; r >= 0; r--) { /* reversed, interleaved: no row runs where it did serially */
            block_q8_act *xq = xq_par + (size_t)r * N / QK;
            quant_row_q8(x + (size_t)r * N, xq, N);
            par[r][0] = kern_dot_f32(wf + (size_t)r * N, x + (size_t)r * N, N);
            par[r][1] = kern_dot(GGML_TYPE_Q8_0, w8 + (size_t)r * N / QK, NULL, xq, N);
            par[r][2] = kern_dot(GGML_TYPE_Q4_0, w4 + (size_t)r * N / QK, NULL, xq, N);
        }
    }
    assert_int_equal(threads_seen, 2);
    assert_memory_equal(xq_par, xq_serial, (size_t)ROWS * N / QK * sizeof *xq_par);
    assert_memory_equal(par, serial, sizeof par);
    free(x);
    free(wf);
    free(w8);
    free(w4);
    free(xq_serial);
    free(xq_par);
}

static void test_the_active_variant_is_the_one_under_test(void **state) {
    (void)state;
    assert_string_equal(kern_active()->name, variant_under_test);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_round_trips_every_bit_pattern),
        cmocka_unit_test(test_f16_row_conversions_match_the_scalar_ones_for_every_bit_pattern),
        cmocka_unit_test(test_f32_to_f16_rounds_to_nearest_even_on_known_cases),
        cmocka_unit_test(test_f32_to_f16_row_matches_scalar_on_random_values),
        cmocka_unit_test(test_bf16_round_trips_every_bit_pattern_and_rounds_to_nearest_even),
        cmocka_unit_test(test_dequantize_reads_ggml_block_layouts),
        cmocka_unit_test(test_quantize_q8_0_rounds_half_away_from_zero_like_ggml),
        cmocka_unit_test(test_quantize_q4_0_takes_the_signed_max_to_minus_eight_like_ggml),
        cmocka_unit_test(test_quantize_then_dequantize_stays_within_the_format_error_bound),
        cmocka_unit_test(test_dequantize_reads_ggml_k_quant_layouts),
        cmocka_unit_test(test_k_quants_quantize_then_dequantize_within_the_stated_bound),
        cmocka_unit_test(test_k_quants_of_zeros_are_zero),
        cmocka_unit_test(test_quantizing_zeros_gives_zero_scale_and_zero_values),
        cmocka_unit_test(test_activation_quantization_rounds_half_to_even),
        cmocka_unit_test(test_activation_quantization_variant_matches_the_reference),
        cmocka_unit_test(test_kv_q8_0_storage_variant_matches_the_reference),
        cmocka_unit_test(test_dot_f32_variant_matches_the_reference_at_awkward_sizes),
        cmocka_unit_test(test_dot_f32_does_not_depend_on_alignment),
        cmocka_unit_test(test_dot_of_every_weight_type_variant_matches_the_reference),
        cmocka_unit_test(test_tiled_matmul_equals_the_scalar_dot_of_every_output_on_awkward_shapes),
        cmocka_unit_test(test_prefill_matmul_of_the_model_widths_equals_the_scalar_dots),
        cmocka_unit_test(test_attention_scores_follow_the_order_and_equal_their_twins),
        cmocka_unit_test(test_attention_accumulation_equals_its_steps),
        cmocka_unit_test(test_quantized_key_scores_follow_the_order_and_equal_the_reference),
        cmocka_unit_test(test_quantized_value_weighing_follows_the_order_and_equals_the_reference),
        cmocka_unit_test(test_queries_in_lanes_take_each_query_s_own_steps),
        cmocka_unit_test(test_quantized_kv_rows_read_back_as_the_quantizer_wrote_them),
        cmocka_unit_test(test_quantized_kv_attention_equals_the_reference_at_awkward_shapes),
        cmocka_unit_test(test_activation_quants_never_reach_minus_128),
        cmocka_unit_test(test_integer_block_sums_are_exact_at_the_int8_extremes),
        cmocka_unit_test(test_dot_f16_f32_variant_matches_the_reference),
        cmocka_unit_test(test_dots_agree_with_a_double_reference_on_dequantized_values),
        cmocka_unit_test(test_k_quant_dots_agree_with_a_double_reference),
        cmocka_unit_test(test_the_later_types_have_ggml_block_sizes_and_geometry),
        cmocka_unit_test(test_dequantize_reads_the_later_layouts),
        cmocka_unit_test(test_dot_of_the_later_types_variant_matches_the_reference),
        cmocka_unit_test(test_matmul_of_the_later_types_equals_the_scalar_dots),
        cmocka_unit_test(test_later_type_block_sums_are_exact_at_the_extremes),
        cmocka_unit_test(test_later_type_dots_agree_with_a_double_reference),
        cmocka_unit_test(test_the_later_types_quantize_then_dequantize_within_a_step),
        cmocka_unit_test(test_matmul_of_mxfp4_at_every_scale_equals_the_scalar_dots),
        cmocka_unit_test(test_mxfp4_dequantizes_as_ggml_does_bit_for_bit),
        cmocka_unit_test(test_mxfp4_quantizes_as_ggml_does_byte_for_byte),
        cmocka_unit_test(test_exp_variant_equals_the_reference_and_is_within_2_ulp_of_libm),
        cmocka_unit_test(test_softmax_tile_steps_equal_their_twins_and_the_plain_max_and_sum),
        cmocka_unit_test(test_dispatching_functions_from_two_threads_give_serial_bits),
        cmocka_unit_test(test_the_active_variant_is_the_one_under_test),
    };
    ref = kern_ref_table();
    return tu_each_variant(tests, sizeof tests / sizeof *tests, &variant_under_test);
}
