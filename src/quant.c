/* quant.c — element types, (de)quantization and the fixed-order dot products of quant.h.
 *
 * Two implementations of every reduction live here: the scalar twins (`*_scalar`), which spell out
 * the lane layout of quant.h with arrays of lanes and one fmaf per multiply-add, and the AVX2 path,
 * which keeps the same lanes in __m256 registers. They are equal bit for bit because they perform the
 * same IEEE operations on the same operands in the same order; the build passes -ffp-contract=off so
 * that the compiler never fuses or reorders on its own, and every fused multiply-add is written out.
 *
 * Conversions to and from f16 reproduce F16C exactly, NaNs included (a NaN comes out quiet with its
 * top payload bits kept), so that a row converted by _mm256_cvtps_ph and one converted element by
 * element hold the same bytes.
 */
#include "quant.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QUANT_AVX2 1
#include <immintrin.h>
#else
#define QUANT_AVX2 0
#endif

#define DOT_LANES 32    /* f32 dot: element i goes to lane i % 32 */
#define BLOCK_LANES 8   /* quantized dot: block b goes to lane b % 8 */

/* Groups of BLOCK_LANES blocks in a row of nb blocks, the last one partial when nb is not a multiple. */
static inline size_t groups_of(size_t nb) { return (nb + BLOCK_LANES - 1) / BLOCK_LANES; }

/* Blocks in group g of a row of nb blocks. */
static inline int blocks_in_group(size_t nb, size_t g) {
    return nb - g * BLOCK_LANES < BLOCK_LANES ? (int)(nb - g * BLOCK_LANES) : BLOCK_LANES;
}

/* The row's last group holds at most half a group's blocks (dim 896: 3 groups and 4 blocks): the half layout. */
static inline bool half_last_group(size_t nb) { return nb % BLOCK_LANES && nb % BLOCK_LANES <= BLOCK_LANES / 2; }

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- scalar conversions ------------------------------------------------------------------------ */

float quant_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) /* inf, or NaN made quiet as F16C does */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return f32_from_bits(sign);
    /* subnormal f16: normalize, every one is a normal f32 */
    uint32_t shift = 0;
    while (!(mant & 0x400)) {
        mant <<= 1;
        shift++;
    }
    return f32_from_bits(sign | ((113 - shift) << 23) | ((mant & 0x3ff) << 13));
}

uint16_t quant_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* quiet NaN, as F16C */
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00); /* >= 65536 (and inf): inf */
    if (a >= 0x38800000u) { /* normal f16 range; a carry out of the mantissa correctly bumps the exponent */
        uint32_t h = (a >> 13) - (112u << 10);
        uint32_t rem = a & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25: rounds to zero (2^-25 itself ties to even 0) */
    /* subnormal f16: value in units of 2^-24 is mant >> shift */
    uint32_t mant = (a & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - (a >> 23);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float quant_bf16_to_f32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t quant_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* keep it a quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* ---- row conversions --------------------------------------------------------------------------- */

void quant_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
#if QUANT_AVX2
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++) dst[i] = quant_f32_to_f16(src[i]);
}

static void f16_to_f32_row(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
#if QUANT_AVX2
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = quant_f16_to_f32(src[i]);
}

/* ---- K-quant block layouts (quant.h) ------------------------------------------------------------- */

/* The 6-bit scales and mins of the 8 sub-blocks of a Q4_K block as 8 bytes each (sub-block j in byte j, little
 * endian): the 12 bytes taken as three 32-bit words a, b, c, four sub-blocks per operation — sc_j = a_j & 63,
 * m_j = b_j & 63 and, for j + 4, the low (sc) or high (m) nibble of c_j with bits 6-7 of a_j (sc) or b_j (m) on top. */
static void q4_K_scale_words(const uint8_t s[12], uint64_t *sc, uint64_t *m) {
    uint32_t a, b, c;
    memcpy(&a, s, 4);
    memcpy(&b, s + 4, 4);
    memcpy(&c, s + 8, 4);
    *sc = (a & 0x3f3f3f3fu) | (uint64_t)((c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u)) << 32;
    *m = (b & 0x3f3f3f3fu) | (uint64_t)(((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)) << 32;
}

static void q4_K_scales(const uint8_t s[12], int32_t sc[8], int32_t m[8]) {
    uint64_t scw, mw;
    q4_K_scale_words(s, &scw, &mw);
    for (int j = 0; j < 8; j++) {
        sc[j] = (int32_t)(scw >> 8 * j & 255);
        m[j] = (int32_t)(mw >> 8 * j & 255);
    }
}

/* The 256 quants of a Q4_K block (0..15), in element order. */
static void q4_K_unpack(const block_q4_K *w, uint8_t q[QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = w->qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = w->qs[32 * c + l] >> 4;
        }
}

/* The 256 quants of a Q6_K block, offset removed (-32..31), in element order. */
static void q6_K_unpack(const block_q6_K *w, int8_t q[QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t lo0 = w->ql[64 * h + l], lo1 = w->ql[64 * h + 32 + l], hi = w->qh[32 * h + l];
            int8_t *qh = q + 128 * h;
            qh[l] = (int8_t)(((lo0 & 15) | (hi & 3) << 4) - 32);
            qh[32 + l] = (int8_t)(((lo1 & 15) | (hi >> 2 & 3) << 4) - 32);
            qh[64 + l] = (int8_t)(((lo0 >> 4) | (hi >> 4 & 3) << 4) - 32);
            qh[96 + l] = (int8_t)(((lo1 >> 4) | (hi >> 6 & 3) << 4) - 32);
        }
}

static void dequantize_row_q4_K(const block_q4_K *blk, float *dst, size_t n) {
    for (size_t b = 0; b < n / QK_K; b++) {
        const float d = quant_f16_to_f32(blk[b].d), dmin = quant_f16_to_f32(blk[b].dmin);
        int32_t sc[8], m[8];
        uint8_t q[QK_K];
        q4_K_scales(blk[b].scales, sc, m);
        q4_K_unpack(&blk[b], q);
        for (int j = 0; j < 8; j++) {
            const float dj = d * (float)sc[j], mj = dmin * (float)m[j];
            for (int i = 0; i < 32; i++) dst[b * QK_K + 32 * j + i] = dj * (float)q[32 * j + i] - mj;
        }
    }
}

static void dequantize_row_q6_K(const block_q6_K *blk, float *dst, size_t n) {
    for (size_t b = 0; b < n / QK_K; b++) {
        const float d = quant_f16_to_f32(blk[b].d);
        int8_t q[QK_K];
        q6_K_unpack(&blk[b], q);
        for (int e = 0; e < QK_K; e++) dst[b * QK_K + e] = d * (float)blk[b].scales[e / 16] * (float)q[e];
    }
}

void quant_dequantize_row(ggml_type type, const void *src, float *dst, size_t n) {
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case GGML_TYPE_F16:
        f16_to_f32_row(src, dst, n);
        return;
    case GGML_TYPE_BF16: {
        const uint16_t *h = src;
        for (size_t i = 0; i < n; i++) dst[i] = quant_bf16_to_f32(h[i]);
        return;
    }
    case GGML_TYPE_Q8_0: {
        const block_q8_0 *blk = src;
        for (size_t b = 0; b < n / QK; b++) {
            float d = quant_f16_to_f32(blk[b].d);
            for (size_t j = 0; j < QK; j++) dst[b * QK + j] = (float)blk[b].qs[j] * d;
        }
        return;
    }
    case GGML_TYPE_Q4_0: {
        const block_q4_0 *blk = src;
        for (size_t b = 0; b < n / QK; b++) {
            float d = quant_f16_to_f32(blk[b].d);
            for (size_t j = 0; j < QK / 2; j++) {
                dst[b * QK + j] = (float)((blk[b].qs[j] & 15) - 8) * d;
                dst[b * QK + j + QK / 2] = (float)((blk[b].qs[j] >> 4) - 8) * d;
            }
        }
        return;
    }
    case GGML_TYPE_Q4_K:
        dequantize_row_q4_K(src, dst, n);
        return;
    case GGML_TYPE_Q6_K:
        dequantize_row_q6_K(src, dst, n);
        return;
    default: /* the model loader refuses every other type by name; make a slip visible, not silent */
        for (size_t i = 0; i < n; i++) dst[i] = NAN;
        return;
    }
}

/* ggml's quantize_row_q8_0_ref: round half away from zero, unlike the activation quantizer. */
static void quantize_row_q8_0(const float *x, block_q8_0 *y, size_t n) {
    for (size_t b = 0; b < n / QK; b++) {
        float amax = 0.0f;
        for (size_t j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[b * QK + j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = quant_f32_to_f16(d);
        for (size_t j = 0; j < QK; j++) y[b].qs[j] = (int8_t)roundf(x[b * QK + j] * id);
    }
}

/* ggml's quantize_row_q4_0_ref: the scale carries the sign of the largest-magnitude value so that it
 * lands exactly on -8, the end of the asymmetric range [-8, 7]. */
static void quantize_row_q4_0(const float *x, block_q4_0 *y, size_t n) {
    for (size_t b = 0; b < n / QK; b++) {
        float amax = 0.0f, max = 0.0f;
        for (size_t j = 0; j < QK; j++) {
            float v = x[b * QK + j];
            if (amax < fabsf(v)) {
                amax = fabsf(v);
                max = v;
            }
        }
        float d = max / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = quant_f32_to_f16(d);
        for (size_t j = 0; j < QK / 2; j++) {
            int8_t lo = (int8_t)(x[b * QK + j] * id + 8.5f);
            int8_t hi = (int8_t)(x[b * QK + j + QK / 2] * id + 8.5f);
            uint8_t qlo = (uint8_t)(lo < 15 ? lo : 15), qhi = (uint8_t)(hi < 15 ? hi : 15);
            y[b].qs[j] = (uint8_t)(qlo | (uint8_t)(qhi << 4));
        }
    }
}

/* The smallest f16 at or above v >= 0 (finite), so that a scale derived from it never falls short. */
static uint16_t f16_at_least(float v) {
    uint16_t h = quant_f32_to_f16(v);
    return quant_f16_to_f32(h) < v ? (uint16_t)(h + 1) : h;
}

/* Simple min/max scaling (quant.h): each sub-block's range [lo, hi] (lo <= 0) is covered by its grid. */
static void quantize_row_q4_K(const float *x, block_q4_K *y, size_t n) {
    for (size_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        float lo[8], hi[8], max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 8; j++) {
            lo[j] = 0.0f;
            hi[j] = xb[32 * j];
            for (int i = 0; i < 32; i++) {
                lo[j] = fminf(lo[j], xb[32 * j + i]);
                hi[j] = fmaxf(hi[j], xb[32 * j + i]);
            }
            max_scale = fmaxf(max_scale, (hi[j] - lo[j]) / 15.0f);
            max_min = fmaxf(max_min, -lo[j]);
        }
        y[b].d = f16_at_least(max_scale / 63.0f);
        y[b].dmin = f16_at_least(max_min / 63.0f);
        const float d = quant_f16_to_f32(y[b].d), dmin = quant_f16_to_f32(y[b].dmin);
        int32_t sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            m[j] = dmin > 0.0f ? (int32_t)fminf(roundf(-lo[j] / dmin), 63.0f) : 0;
            const float top = hi[j] + dmin * (float)m[j]; /* the grid must reach it from -dmin*m */
            int32_t s = d > 0.0f && top > 0.0f ? (int32_t)fminf(ceilf(top / (15.0f * d)), 63.0f) : 0;
            while (s < 63 && 15.0f * d * (float)s < top) s++;
            while (s > 0 && 15.0f * d * (float)(s - 1) >= top) s--;
            sc[j] = s;
        }
        for (int j = 0; j < 4; j++) {
            y[b].scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
            y[b].scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
            y[b].scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
        }
        uint8_t q[QK_K];
        for (int j = 0; j < 8; j++) {
            const float step = d * (float)sc[j], offset = dmin * (float)m[j];
            for (int i = 0; i < 32; i++)
                q[32 * j + i] =
                    step > 0.0f ? (uint8_t)fminf(fmaxf(roundf((xb[32 * j + i] + offset) / step), 0.0f), 15.0f) : 0;
        }
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[b].qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    }
}

/* Symmetric per sub-block of 16, the scale signed so that the largest magnitude lands on -32 (quant.h). */
static void quantize_row_q6_K(const float *x, block_q6_K *y, size_t n) {
    for (size_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        float scale[16], max_scale = 0.0f;
        for (int j = 0; j < 16; j++) {
            float amax = 0.0f, max = 0.0f;
            for (int i = 0; i < 16; i++)
                if (amax < fabsf(xb[16 * j + i])) {
                    amax = fabsf(xb[16 * j + i]);
                    max = xb[16 * j + i];
                }
            scale[j] = max / -32.0f;
            max_scale = fmaxf(max_scale, fabsf(scale[j]));
        }
        y[b].d = f16_at_least(max_scale / 127.0f);
        const float d = quant_f16_to_f32(y[b].d);
        uint8_t q[QK_K];
        for (int j = 0; j < 16; j++) {
            const float mag = d > 0.0f ? fminf(ceilf(fabsf(scale[j]) / d), 127.0f) : 0.0f;
            y[b].scales[j] = (int8_t)(scale[j] < 0.0f ? -mag : mag);
            const float step = d * (float)y[b].scales[j];
            for (int i = 0; i < 16; i++)
                q[16 * j + i] = (uint8_t)(
                    (step != 0.0f ? (int)fminf(fmaxf(roundf(xb[16 * j + i] / step), -32.0f), 31.0f) : 0) + 32);
        }
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *qq = q + 128 * h;
                y[b].ql[64 * h + l] = (uint8_t)((qq[l] & 15) | (qq[64 + l] & 15) << 4);
                y[b].ql[64 * h + 32 + l] = (uint8_t)((qq[32 + l] & 15) | (qq[96 + l] & 15) << 4);
                y[b].qh[32 * h + l] =
                    (uint8_t)(qq[l] >> 4 | (qq[32 + l] >> 4) << 2 | (qq[64 + l] >> 4) << 4 | (qq[96 + l] >> 4) << 6);
            }
    }
}

void quant_quantize_row(ggml_type type, const float *src, void *dst, size_t n) {
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case GGML_TYPE_F16:
        quant_f32_to_f16_row(src, dst, n);
        return;
    case GGML_TYPE_BF16: {
        uint16_t *h = dst;
        for (size_t i = 0; i < n; i++) h[i] = quant_f32_to_bf16(src[i]);
        return;
    }
    case GGML_TYPE_Q8_0:
        quantize_row_q8_0(src, dst, n);
        return;
    case GGML_TYPE_Q4_0:
        quantize_row_q4_0(src, dst, n);
        return;
    case GGML_TYPE_Q4_K:
        quantize_row_q4_K(src, dst, n);
        return;
    case GGML_TYPE_Q6_K:
        quantize_row_q6_K(src, dst, n);
        return;
    default: /* not a type flatkv writes; the caller chose the type, so there is nothing to fill */
        return;
    }
}

/* ---- activation quantization ------------------------------------------------------------------- */

void quant_row_q8_scalar(const float *x, block_q8_act *dst, size_t n) {
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (size_t j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[b].d = d;
        for (size_t j = 0; j < QK; j++) dst[b].qs[j] = (int8_t)nearbyintf(fminf(fmaxf(xb[j] * id, -127.0f), 127.0f));
    }
}

void quant_row_q8(const float *x, block_q8_act *dst, size_t n) {
#if QUANT_AVX2
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    /* packs interleave 128-bit halves; this puts the four groups of 4 bytes back in element order */
    const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 qmin = _mm256_set1_ps(-127.0f), qmax = _mm256_set1_ps(127.0f);
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            m = _mm256_max_ps(_mm256_and_ps(v[k], abs_mask), m);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[b].d = d;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(
                _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], vid), qmin), qmax),
                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)dst[b].qs, _mm256_permutevar8x32_epi32(q8, unshuffle));
    }
#else
    quant_row_q8_scalar(x, dst, n);
#endif
}

/* ---- fixed-order combines (quant.h) ------------------------------------------------------------ */

static float combine8(const float l[BLOCK_LANES]) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

static float combine32(const float lane[DOT_LANES]) {
    float v[8];
    for (int j = 0; j < 8; j++) v[j] = (lane[j] + lane[8 + j]) + (lane[16 + j] + lane[24 + j]);
    return combine8(v);
}

/* ---- scalar dots ------------------------------------------------------------------------------- */

float quant_dot_f32_scalar(const float *a, const float *b, size_t n) {
    float lane[DOT_LANES] = {0};
    for (size_t i = 0; i < n; i++) lane[i % DOT_LANES] = fmaf(a[i], b[i], lane[i % DOT_LANES]);
    return combine32(lane);
}

float quant_dot_f16_f32_scalar(const uint16_t *a, const float *b, size_t n) {
    float lane[DOT_LANES] = {0};
    for (size_t i = 0; i < n; i++) lane[i % DOT_LANES] = fmaf(quant_f16_to_f32(a[i]), b[i], lane[i % DOT_LANES]);
    return combine32(lane);
}

/* Attention scores of a key-major tile (quant.h): key j's chain over the elements. */
static void score_tile_scalar(const void *kt, bool f16, const float *q, size_t q_stride, size_t n_q, size_t n,
                              float *out, size_t out_stride) {
    for (size_t r = 0; r < n_q; r++)
        for (size_t j = 0; j < QUANT_KEY_TILE; j++) {
            float s = 0.0f;
            for (size_t d = 0; d < n; d++) {
                const size_t e = d * QUANT_KEY_TILE + j;
                const float k = f16 ? quant_f16_to_f32(((const uint16_t *)kt)[e]) : ((const float *)kt)[e];
                s = fmaf(q[r * q_stride + d], k, s);
            }
            out[r * out_stride + j] = s;
        }
}

void quant_score_tile_f16_scalar(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                                 size_t out_stride) {
    score_tile_scalar(kt, true, q, q_stride, n_q, n, out, out_stride);
}

void quant_score_tile_f32_scalar(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                                 size_t out_stride) {
    score_tile_scalar(kt, false, q, q_stride, n_q, n, out, out_stride);
}

static float dot_bf16_f32_scalar(const uint16_t *a, const float *b, size_t n) {
    float lane[DOT_LANES] = {0};
    for (size_t i = 0; i < n; i++) lane[i % DOT_LANES] = fmaf(quant_bf16_to_f32(a[i]), b[i], lane[i % DOT_LANES]);
    return combine32(lane);
}

static int32_t block_sum_q8_0(const block_q8_0 *w, const block_q8_act *x) {
    int32_t s = 0;
    for (int j = 0; j < QK; j++) s += (int32_t)w->qs[j] * x->qs[j];
    return s;
}

static int32_t block_sum_q4_0(const block_q4_0 *w, const block_q8_act *x) {
    int32_t s = 0;
    for (int j = 0; j < QK / 2; j++)
        s += ((w->qs[j] & 15) - 8) * x->qs[j] + ((w->qs[j] >> 4) - 8) * x->qs[j + QK / 2];
    return s;
}

static float dot_q8_0_scalar(const block_q8_0 *w, const block_q8_act *x, size_t nb) {
    float lane[BLOCK_LANES] = {0};
    for (size_t b = 0; b < nb; b++)
        lane[b % BLOCK_LANES] = fmaf(quant_f16_to_f32(w[b].d) * x[b].d, (float)block_sum_q8_0(&w[b], &x[b]),
                                     lane[b % BLOCK_LANES]);
    return combine8(lane);
}

static float dot_q4_0_scalar(const block_q4_0 *w, const block_q8_act *x, size_t nb) {
    float lane[BLOCK_LANES] = {0};
    for (size_t b = 0; b < nb; b++)
        lane[b % BLOCK_LANES] = fmaf(quant_f16_to_f32(w[b].d) * x[b].d, (float)block_sum_q4_0(&w[b], &x[b]),
                                     lane[b % BLOCK_LANES]);
    return combine8(lane);
}

/* Super-block sb, sub-block k meets activation block 8*sb + k, lane k (quant.h). */
static float dot_q4_K_scalar(const block_q4_K *w, const block_q8_act *x, size_t nsb) {
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < nsb; sb++) {
        const float d = quant_f16_to_f32(w[sb].d), dmin = quant_f16_to_f32(w[sb].dmin);
        int32_t sc[8], m[8];
        uint8_t q[QK_K];
        q4_K_scales(w[sb].scales, sc, m);
        q4_K_unpack(&w[sb], q);
        for (int k = 0; k < BLOCK_LANES; k++) {
            const block_q8_act *xb = &x[sb * BLOCK_LANES + k];
            int32_t s = 0, t = 0;
            for (int i = 0; i < QK; i++) {
                s += q[QK * k + i] * xb->qs[i];
                t += xb->qs[i];
            }
            const float dm = -dmin * (float)m[k];
            lane[k] = fmaf(xb->d, fmaf(d, (float)(sc[k] * s), dm * (float)t), lane[k]);
        }
    }
    return combine8(lane);
}

static float dot_q6_K_scalar(const block_q6_K *w, const block_q8_act *x, size_t nsb) {
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < nsb; sb++) {
        const float d = quant_f16_to_f32(w[sb].d);
        int8_t q[QK_K];
        q6_K_unpack(&w[sb], q);
        for (int k = 0; k < BLOCK_LANES; k++) {
            const block_q8_act *xb = &x[sb * BLOCK_LANES + k];
            int32_t s0 = 0, s1 = 0;
            for (int i = 0; i < QK / 2; i++) {
                s0 += q[QK * k + i] * xb->qs[i];
                s1 += q[QK * k + QK / 2 + i] * xb->qs[QK / 2 + i];
            }
            const int32_t s = w[sb].scales[2 * k] * s0 + w[sb].scales[2 * k + 1] * s1;
            lane[k] = fmaf(d * xb->d, (float)s, lane[k]);
        }
    }
    return combine8(lane);
}

float quant_dot_scalar(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    switch (type) {
    case GGML_TYPE_F32:
        return quant_dot_f32_scalar(w, xf, n);
    case GGML_TYPE_F16:
        return quant_dot_f16_f32_scalar(w, xf, n);
    case GGML_TYPE_BF16:
        return dot_bf16_f32_scalar(w, xf, n);
    case GGML_TYPE_Q8_0:
        return dot_q8_0_scalar(w, xq, n / QK);
    case GGML_TYPE_Q4_0:
        return dot_q4_0_scalar(w, xq, n / QK);
    case GGML_TYPE_Q4_K:
        return dot_q4_K_scalar(w, xq, n / QK_K);
    case GGML_TYPE_Q6_K:
        return dot_q6_K_scalar(w, xq, n / QK_K);
    default: /* the model loader refuses every other type by name; make a slip visible, not silent */
        return NAN;
    }
}

typedef enum { WIDEN_F32, WIDEN_F16, WIDEN_BF16 } widen_kind;

/* ---- AVX2 dots --------------------------------------------------------------------------------- */

#if QUANT_AVX2

/* ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)), as combine8. */
static inline float hsum8(__m256 v) {
    __m128 w = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* v0+v4 .. v3+v7 */
    w = _mm_add_ps(w, _mm_movehl_ps(w, w));                                          /* (0+2), (1+3) */
    return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)));
}

/* out[k] = hsum8(acc[k]) for 8 vectors at once: every add is one of hsum8's tree, only 8 at a time. */
static inline __m256 combine8x8(const __m256 acc[8]) {
    __m256 m[4]; /* k | k+4: (l0+l4, l1+l5, l2+l6, l3+l7) */
    for (int k = 0; k < 4; k++)
        m[k] = _mm256_add_ps(_mm256_permute2f128_ps(acc[k], acc[k + 4], 0x20),
                             _mm256_permute2f128_ps(acc[k], acc[k + 4], 0x31));
    __m256 w[2]; /* 2h, 2h+1 | 2h+4, 2h+5: ((l0+l4)+(l2+l6), (l1+l5)+(l3+l7)) each */
    for (int h = 0; h < 2; h++)
        w[h] = _mm256_add_ps(_mm256_shuffle_ps(m[2 * h], m[2 * h + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(m[2 * h], m[2 * h + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* A register tile's outputs: y[r·ldy + c] = hsum8(acc[r·C + c]) for r < R, c < C; eight of them in rows of two or
 * four at once (combine8x8), the same bits. */
static inline __attribute__((always_inline)) void store_sums(const __m256 *acc, int R, int C, float *y, size_t ldy) {
    if (R * C == 8 && (C == 2 || C == 4)) {
        const __m256 v = combine8x8(acc);
        const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
        if (C == 4) {
            _mm_storeu_ps(y, lo);
            _mm_storeu_ps(y + ldy, hi);
        } else {
            _mm_storel_pi((__m64 *)(void *)y, lo);
            _mm_storeh_pi((__m64 *)(void *)(y + ldy), lo);
            _mm_storel_pi((__m64 *)(void *)(y + 2 * ldy), hi);
            _mm_storeh_pi((__m64 *)(void *)(y + 3 * ldy), hi);
        }
        return;
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[r * ldy + c] = hsum8(acc[r * C + c]);
}

static inline __m256 load8_widened(widen_kind kind, const void *a, size_t i) {
    switch (kind) {
    case WIDEN_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i)));
    case WIDEN_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i))), 16));
    default:
        return _mm256_loadu_ps((const float *)a + i);
    }
}

static inline float load1_widened(widen_kind kind, const void *a, size_t i) {
    switch (kind) {
    case WIDEN_F16:
        return quant_f16_to_f32(((const uint16_t *)a)[i]);
    case WIDEN_BF16:
        return quant_bf16_to_f32(((const uint16_t *)a)[i]);
    default:
        return ((const float *)a)[i];
    }
}

/* Lane i % 32 lives in acc(i / 8) % 4 at element i % 8. Whole groups of 8 run in registers (after the
 * last full 32, at most three groups remain, going to acc0, acc1, acc2 in turn); the last n % 8
 * elements are added to the spilled lanes with the same fmaf the scalar twin uses. */
static inline __attribute__((always_inline)) float dot_widened(widen_kind kind, const void *a, const float *b,
                                                                size_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + DOT_LANES <= n; i += DOT_LANES) {
        acc0 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(load8_widened(kind, a, i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load8_widened(kind, a, i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load8_widened(kind, a, i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    if (i + 8 <= n) {
        acc0 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc0);
        i += 8;
        if (i + 8 <= n) {
            acc1 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc1);
            i += 8;
            if (i + 8 <= n) {
                acc2 = _mm256_fmadd_ps(load8_widened(kind, a, i), _mm256_loadu_ps(b + i), acc2);
                i += 8;
            }
        }
    }
    if (i < n) {
        float lane[DOT_LANES];
        _mm256_storeu_ps(lane, acc0);
        _mm256_storeu_ps(lane + 8, acc1);
        _mm256_storeu_ps(lane + 16, acc2);
        _mm256_storeu_ps(lane + 24, acc3);
        for (; i < n; i++) lane[i % DOT_LANES] = fmaf(load1_widened(kind, a, i), b[i], lane[i % DOT_LANES]);
        acc0 = _mm256_loadu_ps(lane);
        acc1 = _mm256_loadu_ps(lane + 8);
        acc2 = _mm256_loadu_ps(lane + 16);
        acc3 = _mm256_loadu_ps(lane + 24);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

/* Exact Σ w·x of one Q8_0 block as 8 partial int32 sums. maddubs takes |w| (0..128, unsigned) against
 * x carrying w's sign; x is in [-127, 127] (quant.h), so each 16-bit pair sum is at most 2·128·127 and
 * never saturates, and negating x never overflows. */
static inline __m256i block_sums_q8_0(__m256i wq, __m256i xq) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq)),
                             _mm256_set1_epi16(1));
}

/* The 32 quants of one Q4_0 block as unsigned bytes 0..15 in element order: bytes 0..15 the low
 * nibbles (elements 0..15), bytes 16..31 the high nibbles (elements 16..31). */
static inline __m256i block_nibbles_q4_0(const block_q4_0 *w) {
    __m128i packed = _mm_loadu_si128((const __m128i *)w->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(15));
}

/* Σ nibble·x of one Q4_0 block as 8 partial int32 sums (nibbles 0..15 unsigned, so maddubs cannot
 * saturate: |15·x + 15·x'| <= 3840). The -8 offset is applied per group, from Σx. */
static inline __m256i block_nibble_sums_q4_0(__m256i nib, __m256i xq) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(nib, xq), _mm256_set1_epi16(1));
}

static inline __m256i block_xsums(__m256i xq) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq), _mm256_set1_epi16(1));
}

/* Eight vectors of partial sums → one vector whose element k is the total of s[k]. */
static inline __m256i hsum8_epi32x8(const __m256i s[8]) {
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* r[j] element k ← r[k] element j (32-bit elements): an involution. On the 32 quants of 8 blocks it
 * turns "register k = block k" into "register j = quants 4j..4j+3 of every block, block k in element k",
 * the layout in which a vertical integer sum of 8 registers is 8 block sums, no horizontal step. */
static inline void transpose8_epi32(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

/* The half layout of a row's last group when it holds at most 4 blocks: from r[k] = block k (k < 4) in natural
 * order, register j (j < 4) gets quants 4j..4j+3 of blocks 0..3 in its low 128 bits and quants 16+4j..16+4j+3 in
 * its high 128 bits (a 4 × 4 transpose of 32-bit elements within each 128-bit lane), so 4 registers hold the
 * group and an integer sum leaves block k's two halves in elements k and k+4 (half_fold joins them). */
static inline void transpose4_epi32_lanes(__m256i r[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    r[0] = _mm256_unpacklo_epi64(t0, t2);
    r[1] = _mm256_unpackhi_epi64(t0, t2);
    r[2] = _mm256_unpacklo_epi64(t1, t3);
    r[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* Elements k < 4: s[k] + s[k+4]; elements 4..7: 0. */
static inline __m256i half_fold(__m256i s) {
    return _mm256_add_epi32(_mm256_permute2x128_si256(s, s, 0x80), _mm256_permute2x128_si256(s, s, 0x81));
}

/* Prefetch the cache line at p + off. The address may lie past the matrix (the tile after the last): a prefetch
 * never faults, and the sum is formed as an integer, so no out-of-range pointer is ever made. */
static inline __attribute__((always_inline)) void prefetch_at(const void *p, size_t off) {
    _mm_prefetch((const char *)(uintptr_t)((uintptr_t)p + off), _MM_HINT_T0);
}

/* Element k: the exact integer sum of weight block k against activation block x[k], k < t <= 8 (for Q4_0
 * before the offset correction); 0 for k >= t (a row's last, partial group: nothing past its end is read). */
static inline __m256i group_sums(ggml_type type, const uint8_t *w, const block_q8_act *x, int t) {
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++) {
        if (k >= t) {
            s[k] = _mm256_setzero_si256();
            continue;
        }
        const __m256i xk = _mm256_loadu_si256((const __m256i *)x[k].qs);
        s[k] = type == GGML_TYPE_Q4_0
                   ? block_nibble_sums_q4_0(block_nibbles_q4_0((const block_q4_0 *)w + k), xk)
                   : block_sums_q8_0(_mm256_loadu_si256((const __m256i *)((const block_q8_0 *)w + k)->qs), xk);
    }
    return hsum8_epi32x8(s);
}

/* Element k: 8·Σx over block k — the Q4_0 offset correction, shared by every weight row. Blocks as in
 * group_sums. Out of line: the direct tiles take it precomputed, and inlined into them it crowds their loop. */
static __attribute__((noinline)) __m256i group_xsum8(const block_q8_act *x, int t) {
    __m256i s[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++)
        s[k] = k >= t ? _mm256_setzero_si256() : block_xsums(_mm256_loadu_si256((const __m256i *)x[k].qs));
    return _mm256_slli_epi32(hsum8_epi32x8(s), 3);
}

static inline size_t block_bytes(ggml_type type) {
    return type == GGML_TYPE_Q4_0 ? sizeof(block_q4_0) : sizeof(block_q8_0);
}

static inline uint16_t block_scale(ggml_type type, const uint8_t *w, size_t b) {
    return type == GGML_TYPE_Q4_0 ? ((const block_q4_0 *)w)[b].d : ((const block_q8_0 *)w)[b].d;
}

/* Scales of weight blocks 0..t-1 as f32, +0 for t..7, built in registers (a store then a wide load would
 * stall on forwarding). Lanes t..7 read block t-1's scale, which is inside the row, and are then cleared: with
 * a conditional per lane instead, GCC spilled the 16-bit scales and reloaded them 32 bits wide — a failed
 * store forward that stalled the pack of every partial group (3% of 0.5B prefill). */
#define WSCALE(k) (short)block_scale(type, w, (k) < t ? (k) : t - 1)
static inline __m256 group_wscales(ggml_type type, const uint8_t *w, int t) {
    __m128i s = _mm_setr_epi16(WSCALE(0), WSCALE(1), WSCALE(2), WSCALE(3), WSCALE(4), WSCALE(5), WSCALE(6), WSCALE(7));
    if (t < BLOCK_LANES) s = _mm_and_si128(s, _mm_cmpgt_epi16(_mm_set1_epi16((short)t), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7)));
    return _mm256_cvtph_ps(s);
}
#undef WSCALE

/* Scales of activation blocks 0..t-1, +0 for t..7. */
#define XSCALE(k) ((k) < t ? x[k].d : 0.0f)
static inline __m256 group_xscales(const block_q8_act *x, int t) {
    return _mm256_setr_ps(XSCALE(0), XSCALE(1), XSCALE(2), XSCALE(3), XSCALE(4), XSCALE(5), XSCALE(6), XSCALE(7));
}
#undef XSCALE

/* Direct tiles, for few rows (decode): 2 × 4 measured best of 1..4 × 1..4 on the 110M shapes. */
#define TILE_ROWS 2 /* activation rows of a register tile */
#define TILE_COLS 4 /* weight rows of a register tile */

/* One group of blocks of a register tile: acc[r][c] gets, in lane k < t, the fused step of block k of weight
 * row c (rows w_row_bytes apart) against block k of activation row r (rows x_stride blocks apart). Q4_0's
 * corrections come from xsum8 (row r's at xsum8[r * xsum8_stride]) when given. Lanes k >= t (a row's last, partial group) get fmaf(+0, +0, lane),
 * which leaves a lane as it is: a lane is never -0 (it starts at +0, and a rounded sum is -0 only when both
 * terms are). */
static inline __attribute__((always_inline)) void tile_group(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                              const block_q8_act *x, size_t x_stride, int t,
                                                              const __m256i *xsum8, size_t xsum8_stride, int R, int C,
                                                              __m256 acc[TILE_ROWS][TILE_COLS]) {
    __m256 dx[TILE_ROWS];
    __m256i corr[TILE_ROWS];
    for (int r = 0; r < R; r++) {
        dx[r] = group_xscales(x + r * x_stride, t);
        if (type == GGML_TYPE_Q4_0) corr[r] = xsum8 ? xsum8[r * xsum8_stride] : group_xsum8(x + r * x_stride, t);
    }
    for (int c = 0; c < C; c++) {
        const __m256 dw = group_wscales(type, w + c * w_row_bytes, t);
        for (int r = 0; r < R; r++) {
            __m256i s = group_sums(type, w + c * w_row_bytes, x + r * x_stride, t);
            if (type == GGML_TYPE_Q4_0) s = _mm256_sub_epi32(s, corr[r]);
            acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[r]), _mm256_cvtepi32_ps(s), acc[r][c]);
        }
    }
}

/* A register tile: y[r*ldy + c] = dot(weight row c, activation row r) for r < R, c < C, each with its
 * own 8-lane accumulator holding exactly the lanes of quant.h's block order — block b of every output
 * goes to lane b % 8, through the same multiply and fused multiply-add as the scalar twin — so the tile
 * shape changes which loads are shared, never an output's bits. x rows are nb blocks apart; xsum8 as in
 * tile_group, a row's groups consecutive. */
static inline __attribute__((always_inline)) void tile_blocks(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                               const block_q8_act *x, size_t nb, const __m256i *xsum8,
                                                               int R, int C, float *y, size_t ldy) {
    const size_t ng = groups_of(nb);
    const size_t bb = block_bytes(type);
    __m256 acc[TILE_ROWS][TILE_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b += BLOCK_LANES) {
        const int t = nb - b < BLOCK_LANES ? (int)(nb - b) : BLOCK_LANES;
        /* the same blocks of the next tile's rows (C rows on): their fetch from memory overlaps this work */
        for (int c = 0; c < C; c++)
            for (size_t off = 0; off < (size_t)t * bb; off += 64)
                prefetch_at(w, (size_t)(C + c) * w_row_bytes + b * bb + off);
        const __m256i *xs = xsum8 ? xsum8 + b / BLOCK_LANES : NULL;
        if (t == BLOCK_LANES) /* a constant t: full groups take no masks */
            tile_group(type, w + b * bb, w_row_bytes, x + b, nb, BLOCK_LANES, xs, ng, R, C, acc);
        else if (t == BLOCK_LANES / 2) /* the half group of rows of 128k + 4 blocks (dim 896): no blocks past 4 */
            tile_group(type, w + b * bb, w_row_bytes, x + b, nb, BLOCK_LANES / 2, xs, ng, R, C, acc);
        else
            tile_group(type, w + b * bb, w_row_bytes, x + b, nb, t, xs, ng, R, C, acc);
    }
    __m256 sums[TILE_ROWS * TILE_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) sums[r * C + c] = acc[r][c];
    store_sums(sums, R, C, y, ldy);
}

static inline float dot_blocks(ggml_type type, const void *w, const block_q8_act *x, size_t nb) {
    float y;
    tile_blocks(type, w, 0, x, nb, NULL, 1, 1, &y, 1);
    return y;
}

#define TILE_CASE(T, R, C)                                                                                     \
    case (R) * 8 + (C):                                                                                        \
        tile_blocks(T, w, w_row_bytes, x, nb, xsum8, R, C, y, ldy);                                           \
        return;
#define TILE_CASES_C(T, C) TILE_CASE(T, 1, C) TILE_CASE(T, 2, C)
#define TILE_CASES(T) TILE_CASES_C(T, 1) TILE_CASES_C(T, 2) TILE_CASES_C(T, 3) TILE_CASES_C(T, 4)

/* One tile with R <= TILE_ROWS, C <= TILE_COLS known at compile time, so acc stays in registers. */
static void tile_dispatch(ggml_type type, const uint8_t *w, size_t w_row_bytes, const block_q8_act *x, size_t nb,
                          const __m256i *xsum8, int R, int C, float *y, size_t ldy) {
    if (type == GGML_TYPE_Q4_0) {
        switch (R * 8 + C) {
            TILE_CASES(GGML_TYPE_Q4_0)
        default:
            return;
        }
    }
    switch (R * 8 + C) {
        TILE_CASES(GGML_TYPE_Q8_0)
    default:
        return;
    }
}

/* K-quants: a super-block is one group of 8 activation blocks, sub-block k in lane k; no tail. */

/* The quants of a K-quant super-block as unsigned bytes, sub-block k (elements 32k..32k+31) in register
 * k in element order: Q4_K 0..15, Q6_K 0..63 (the offset 32 still in). */
static inline void kquant_regs(ggml_type type, const uint8_t *w, __m256i q[BLOCK_LANES]) {
    const __m256i low4 = _mm256_set1_epi8(15);
    if (type == GGML_TYPE_Q4_K) {
        const block_q4_K *b = (const block_q4_K *)w;
        for (int c = 0; c < 4; c++) {
            const __m256i packed = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
            q[2 * c] = _mm256_and_si256(packed, low4);
            q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
        }
        return;
    }
    const block_q6_K *b = (const block_q6_K *)w;
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) { /* 16-bit shifts: the masks drop the bits that cross a byte */
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
        q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
        q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
        q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                       _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
    }
}

/* The activation side of a super-block, the same for every weight row: its 8 blocks' scales and (Q4_K) their Σx as
 * f32 (exact: at most 32 · 127). */
typedef struct {
    __m256 d, sum;
} kxside;

static inline kxside kquant_xside(ggml_type type, const block_q8_act *xg) {
    kxside xs = {group_xscales(xg, BLOCK_LANES), _mm256_setzero_ps()};
    if (type != GGML_TYPE_Q4_K) return xs;
    __m256i t[BLOCK_LANES];
    for (int k = 0; k < BLOCK_LANES; k++) t[k] = block_xsums(_mm256_loadu_si256((const __m256i *)xg[k].qs));
    xs.sum = _mm256_cvtepi32_ps(hsum8_epi32x8(t));
    return xs;
}

/* 8 bytes as the 8 elements of a vector of int32. */
static inline __m256i bytes_epi32(uint64_t v) { return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)v)); }

/* Super-block of Q4_K against activation blocks xr[0..8) (natural order) with their side xs: quant.h's steps on all
 * 8 lanes at once. */
static inline __m256 superblock_q4_K(const block_q4_K *w, const __m256i xr[8], kxside xs, __m256 acc) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i q[BLOCK_LANES], s[BLOCK_LANES];
    kquant_regs(GGML_TYPE_Q4_K, (const uint8_t *)w, q);
    for (int k = 0; k < BLOCK_LANES; k++) /* nibbles 0..15: pair sums at most 2 · 15 · 127, no saturation */
        s[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], xr[k]), ones16);
    uint64_t sc, m;
    q4_K_scale_words(w->scales, &sc, &m);
    const __m256i si = _mm256_mullo_epi32(hsum8_epi32x8(s), bytes_epi32(sc));
    const float d = quant_f16_to_f32(w->d), dmin = quant_f16_to_f32(w->dmin);
    const __m256 dm = _mm256_mul_ps(_mm256_set1_ps(-dmin), _mm256_cvtepi32_ps(bytes_epi32(m)));
    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(si), _mm256_mul_ps(dm, xs.sum));
    return _mm256_fmadd_ps(xs.d, inner, acc);
}

/* Super-block of Q6_K, as superblock_q4_K. A sub-block's pair sums (at most 2 · 32 · 127) lie in the lower 128
 * bits for its quants 0..15 and the upper for 16..31: summed within each half, then weighted by the two halves'
 * scales in f32 — each product and their sum an integer below 2^24 (quant.h), so exact and equal to s_b. */
static inline __m256 superblock_q6_K(const block_q6_K *w, const __m256i xr[8], __m256 dx, __m256 acc) {
    const __m256i offset = _mm256_set1_epi8(32), ones16 = _mm256_set1_epi16(1);
    __m256i q[BLOCK_LANES], s[BLOCK_LANES];
    kquant_regs(GGML_TYPE_Q6_K, (const uint8_t *)w, q);
    for (int k = 0; k < BLOCK_LANES; k++) {
        const __m256i wk = _mm256_sub_epi8(q[k], offset);
        s[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wk), _mm256_sign_epi8(xr[k], wk)), ones16);
    }
    /* element k of lo / hi: sub-block k's sum over quants 0..15 / 16..31 */
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    const __m256i lo = _mm256_permute2x128_si256(a, b, 0x20), hi = _mm256_permute2x128_si256(a, b, 0x31);
    /* scales[2k] and scales[2k + 1] as element k of two vectors */
    const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)w->scales),
                                        _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    const __m256 sc_lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)),
                 sc_hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc)));
    const __m256 sb = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lo), sc_lo), _mm256_mul_ps(_mm256_cvtepi32_ps(hi), sc_hi));
    const float d = quant_f16_to_f32(w->d);
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), dx), sb, acc);
}

/* One K-quant weight row · one activation row of nsb super-blocks; xs: the row's kquant_xside per super-block, made
 * once for every weight row, or NULL (made here). */
static float dot_kquant(ggml_type type, const void *w, const block_q8_act *x, const kxside *xs, size_t nsb) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t sb = 0; sb < nsb; sb++) {
        const block_q8_act *xg = x + sb * BLOCK_LANES;
        __m256i xr[BLOCK_LANES];
        for (int k = 0; k < BLOCK_LANES; k++) xr[k] = _mm256_loadu_si256((const __m256i *)xg[k].qs);
        const kxside x1 = xs ? xs[sb] : kquant_xside(type, xg);
        acc = type == GGML_TYPE_Q4_K ? superblock_q4_K((const block_q4_K *)w + sb, xr, x1, acc)
                                     : superblock_q6_K((const block_q6_K *)w + sb, xr, x1.d, acc);
    }
    return hsum8(acc);
}


static inline bool is_kquant(ggml_type type) { return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K; }

/* Bytes of weights per group of 8 activation blocks. */
static inline size_t group_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_K:
        return sizeof(block_q4_K);
    case GGML_TYPE_Q6_K:
        return sizeof(block_q6_K);
    default:
        return BLOCK_LANES * block_bytes(type);
    }
}

/* Panels, for many rows (prefill). The C weight rows of a panel are rearranged once into the interleaved
 * layout of transpose8_epi32 — register j holds quants 4j..4j+3 of 8 blocks, Q4_0 nibbles and K-quant quants
 * as unsigned bytes, scales as f32 — and then serve every activation row; the activation side is rearranged
 * the same way once per call, with its scales and the block sums Σx that offset corrections need. A group of 8 blocks then
 * costs, per (activation row, weight row), one multiply per register and vertical adds, no horizontal
 * reduction, and unsigned quants sum in 16 bits before widening. Integer block sums are exact and each
 * lane gets the scalar twin's float operations, so no tile shape changes a bit. A row whose block count
 * is not a multiple of 8 ends in a group padded on both sides with zero blocks of scale 0:
 * fmaf(+0, +0, lane) leaves a lane as it is, since a lane is never -0 (it starts at +0, and a rounded
 * sum is -0 only when both terms are). When that group holds at most 4 blocks (dim 896: 3 groups and 4
 * blocks) it takes the half layout (transpose4_epi32_lanes): 4 registers instead of 8. */
#define PANEL_ROWS 4 /* activation rows of a register tile, at most */
#define PANEL_COLS 2 /* weight rows of a panel (and of a register tile), at most */
#define PANEL_MIN_ROWS 4    /* below, packing costs more than it saves: direct tiles */
#define XSUM_MAX_GROUPS 32  /* direct tiles precompute Q4_0's corrections for rows up to 256 blocks */
/* Activation side prepared at a time, on the stack, when the caller has not prepared it (quant_panel_rows): 64
 * rows up to dim 5120 at once. A row prepared in several parts makes every panel of weights be packed again per
 * part; with 96 KB, the 0.5B shape's ffn_down (4864) took 6 parts per 64 rows and ran 20% slower. */
#define PANEL_X_BYTES (448 * 1024)

typedef struct {
    __m256i q[BLOCK_LANES]; /* register j: quants 4j..4j+3 of blocks 0..7 */
    __m256 d;               /* Q8_0, Q4_0: block scales; Q4_K, Q6_K: the super-block's d in every lane */
    __m256 m;               /* Q4_K: -dmin · m per sub-block (rounded once) */
    /* The widening madd's multipliers, in both 16-bit halves of element k: Q4_K: [0] sub-block k's scale; Q6_K: [0]
     * and [1] the scales of quants 0..15 and 16..31 of block k. */
    __m256i sc16[2];
    __m256i corr16; /* Q6_K: 32 · those two scales, the halves of element k: the offset's weights */
} wgroup;

typedef struct {
    __m256i q[BLOCK_LANES]; /* register j: quants 4j..4j+3 of blocks 0..7, aligned (no split loads) */
    __m256 d;       /* activation scales of blocks 0..7 */
    __m256i sum_lo; /* Σx over registers 0..3: quants 0..15 of each block (the half layout: both halves of blocks 0..3) */
    __m256i sum_hi; /* Σx over registers 4..7: quants 16..31 of each block (the half layout: 0) */
} xgroup;

/* The quants of a Q8_0 / Q4_0 group of t blocks (t <= 8) in the register layout: transpose8_epi32's, or the half
 * layout when t <= 4; blocks past t are zero. */
static inline void group_regs(ggml_type type, const uint8_t *wg, int t, __m256i q[BLOCK_LANES]) {
    for (int k = 0; k < BLOCK_LANES; k++)
        q[k] = k >= t                      ? _mm256_setzero_si256()
               : type == GGML_TYPE_Q4_0 ? block_nibbles_q4_0((const block_q4_0 *)wg + k)
                                        : _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)wg + k)->qs);
    if (t <= BLOCK_LANES / 2)
        transpose4_epi32_lanes(q);
    else
        transpose8_epi32(q);
}

/* Packed Q8_0 rows (quant_pack_rows): group g's registers at g · 256 bytes (a last group of at most 4 blocks in the
 * half layout, 128 bytes), then every group's 8 scales as f16 (+0 past the row's end), the row padded to 32 bytes. */
#define PACKED_GROUP_BYTES (BLOCK_LANES * sizeof(__m256i))
static inline size_t packed_scales_at(size_t nb) {
    const size_t last = nb % BLOCK_LANES == 0 ? 0 : half_last_group(nb) ? PACKED_GROUP_BYTES / 2 : PACKED_GROUP_BYTES;
    return nb / BLOCK_LANES * PACKED_GROUP_BYTES + last;
}

static inline size_t packed_row_bytes(size_t nb) {
    const size_t bytes = packed_scales_at(nb) + groups_of(nb) * BLOCK_LANES * sizeof(uint16_t);
    return (bytes + sizeof(__m256i) - 1) / sizeof(__m256i) * sizeof(__m256i);
}

/* pk[g * C + c]: group g of weight row c, c < C. */
static void pack_panel(ggml_type type, const uint8_t *w, size_t w_row_bytes, int C, size_t nb, size_t ng,
                       wgroup *pk) {
    const size_t gb = group_bytes(type);
    for (size_t g = 0; g < ng; g++)
        for (int c = 0; c < C; c++) {
            const uint8_t *wg = w + c * w_row_bytes + g * gb;
            wgroup *p = &pk[g * C + c];
            for (size_t off = 0; off < gb; off += 64) /* the next panel's group: its fetch overlaps this work */
                prefetch_at(wg, (size_t)C * w_row_bytes + off);
            if (type == GGML_TYPE_Q4_K) {
                const block_q4_K *b = (const block_q4_K *)wg;
                int32_t sc[8], m[8];
                q4_K_scales(b->scales, sc, m);
                kquant_regs(type, wg, p->q);
                p->d = _mm256_set1_ps(quant_f16_to_f32(b->d));
                const __m256i sci = _mm256_loadu_si256((const __m256i *)sc);
                p->sc16[0] = _mm256_or_si256(sci, _mm256_slli_epi32(sci, 16));
                p->m = _mm256_mul_ps(_mm256_set1_ps(-quant_f16_to_f32(b->dmin)),
                                     _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)m)));
            } else if (type == GGML_TYPE_Q6_K) {
                const block_q6_K *b = (const block_q6_K *)wg;
                kquant_regs(type, wg, p->q);
                p->d = _mm256_set1_ps(quant_f16_to_f32(b->d));
                /* scales[2k], scales[2k+1] (int8) as the 16-bit halves of element k: sign-extended pairs */
                const __m256i pairs = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
                const __m256i lo = _mm256_srai_epi32(_mm256_slli_epi32(pairs, 16), 16), hi = _mm256_srai_epi32(pairs, 16);
                p->sc16[0] = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(lo, 16));
                p->sc16[1] = _mm256_or_si256(_mm256_and_si256(hi, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(hi, 16));
                p->corr16 = _mm256_slli_epi16(pairs, 5);
            } else {
                const int t = blocks_in_group(nb, g);
                group_regs(type, wg, t, p->q);
                p->d = group_wscales(type, wg, t);
                continue;
            }
            transpose8_epi32(p->q);
        }
}

/* The activation side of rows [0, n_rows) of xq: xp[r * ng + g], a partial last group padded. The same for every
 * weight type, so one preparation serves every product of the rows. */
static void prep_panel_rows(const block_q8_act *xq, size_t nb, size_t ng, uint32_t n_rows, xgroup *xp) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (uint32_t r = 0; r < n_rows; r++)
        for (size_t g = 0; g < ng; g++) {
            const block_q8_act *xg = xq + r * nb + g * BLOCK_LANES;
            const int t = blocks_in_group(nb, g);
            xgroup *p = &xp[r * ng + g];
            __m256i x[BLOCK_LANES];
            p->d = group_xscales(xg, t);
            for (int k = 0; k < BLOCK_LANES; k++)
                x[k] = k < t ? _mm256_loadu_si256((const __m256i *)xg[k].qs) : _mm256_setzero_si256();
            if (t <= BLOCK_LANES / 2)
                transpose4_epi32_lanes(x);
            else
                transpose8_epi32(x);
            for (int j = 0; j < BLOCK_LANES; j++) p->q[j] = x[j];
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256(); /* 16 bits: at most 4 · 2 · 127 */
            for (int j = 0; j < BLOCK_LANES / 2; j++) {
                lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(ones8, x[j]));
                hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(ones8, x[j + BLOCK_LANES / 2]));
            }
            p->sum_lo = _mm256_madd_epi16(lo, ones16);
            p->sum_hi = _mm256_madd_epi16(hi, ones16);
        }
}

/* Keeps v in a register: the compiler would otherwise fold its load into each of its C uses. */
#define PIN(v) __asm__("" : "+x"(v))

/* The integer sums of one group for a whole register tile: s[r][c] = the sum over registers j0 <= j < j0 + n of the
 * products of activation row r's register x[r][j] and weight row c's register w_c[j]. TILE_Q8 (Q8_0): 32-bit
 * sums of madd(maddubs(|w|, sign(x, w)), 1). TILE_Q4 (Q4_0, Q4_K; quants 0..15): 16-bit sums of maddubs(w, x),
 * widened to 32 bits (madd with 1) after the last register. TILE_Q4K (Q4_K): as TILE_Q4, but widened by a madd with
 * each weight row's sub-block scales (m0, m1: block k's in both 16-bit halves of element k), so the sums come out as
 * sc · s, exact (at most 63 · 8 · 4 · 15 · 127 < 2^24) and with no multiply of their own.
 * TILE_Q6 (Q6_K; quants 0..63; all 8 registers): registers j and j+1 summed in 16 bits (at most 2 · 2 · 63 · 127),
 * then 32-bit sums of their madd with the weight row's scales of quants 0..15 (registers 0..3: m0, m1) or 16..31
 * (registers 4..7: 32 bytes on): sc · Σq·x over the block, at most 2 · 128 · 16 · 63 · 127 in magnitude. Written in assembly because GCC, at the 16 registers this needs,
 * spilled two sums to the stack and re-read a weight register from memory at every use: the tile then ran
 * at 0.64 ns per block product for Q8_0 and 0.56 for Q4_0. The sums and the ones are operands; ymm9 to ymm15
 * are fixed scratch: the weight registers, their magnitudes (Q8_0), the row and the products. */
typedef enum { TILE_Q8, TILE_Q4, TILE_Q4K, TILE_Q6 } tile_kind;

/* One register step at byte offset o of the weight rows' and the activation rows' registers. */
#define TILE_ROW_Q8(o, x, a, b)                                                                                \
    "vmovdqa " o "(%[" #x "]), %%ymm13\n\t"                                                                    \
    "vpsignb %%ymm9, %%ymm13, %%ymm14\n\t"                                                                     \
    "vpsignb %%ymm10, %%ymm13, %%ymm15\n\t"                                                                    \
    "vpmaddubsw %%ymm14, %%ymm11, %%ymm14\n\t"                                                                 \
    "vpmaddubsw %%ymm15, %%ymm12, %%ymm15\n\t"                                                                 \
    "vpmaddwd %[ones], %%ymm14, %%ymm14\n\t"                                                                   \
    "vpmaddwd %[ones], %%ymm15, %%ymm15\n\t"                                                                   \
    "vpaddd %%ymm14, %[" #a "], %[" #a "]\n\t"                                                                 \
    "vpaddd %%ymm15, %[" #b "], %[" #b "]\n\t"
#define TILE_STEP_Q8(o)                                                                                        \
    "vmovdqa " o "(%[w0]), %%ymm9\n\t"                                                                         \
    "vmovdqa " o "(%[w1]), %%ymm10\n\t"                                                                        \
    "vpabsb %%ymm9, %%ymm11\n\t"                                                                               \
    "vpabsb %%ymm10, %%ymm12\n\t" TILE_ROWS_AT(TILE_ROW_Q8, o)
#define TILE_ROW_Q4(o, x, a, b)                                                                                \
    "vmovdqa " o "(%[" #x "]), %%ymm13\n\t"                                                                    \
    "vpmaddubsw %%ymm13, %%ymm9, %%ymm14\n\t"                                                                  \
    "vpmaddubsw %%ymm13, %%ymm10, %%ymm15\n\t"                                                                 \
    "vpaddw %%ymm14, %[" #a "], %[" #a "]\n\t"                                                                 \
    "vpaddw %%ymm15, %[" #b "], %[" #b "]\n\t"
#define TILE_STEP_Q4(o)                                                                                        \
    "vmovdqa " o "(%[w0]), %%ymm9\n\t"                                                                         \
    "vmovdqa " o "(%[w1]), %%ymm10\n\t" TILE_ROWS_AT(TILE_ROW_Q4, o)
/* Registers j, j+1 (offsets o, o + 32): the weight rows' in ymm9, ymm10 (row 0) and ymm11, ymm12 (row 1); the
 * activation row's from memory. */
/* ms: the byte offset of this step's scales at m0, m1 (quants 0..15 or 16..31 of each block). */
#define TILE_ROW_Q6(o, ms, x, a, b)                                                                            \
    "vpmaddubsw " o "(%[" #x "]), %%ymm9, %%ymm14\n\t"                                                         \
    "vpmaddubsw 32+" o "(%[" #x "]), %%ymm10, %%ymm15\n\t"                                                     \
    "vpaddw %%ymm15, %%ymm14, %%ymm14\n\t"                                                                     \
    "vpmaddwd " ms "(%[m0]), %%ymm14, %%ymm14\n\t"                                                             \
    "vpaddd %%ymm14, %[" #a "], %[" #a "]\n\t"                                                                 \
    "vpmaddubsw " o "(%[" #x "]), %%ymm11, %%ymm14\n\t"                                                        \
    "vpmaddubsw 32+" o "(%[" #x "]), %%ymm12, %%ymm15\n\t"                                                     \
    "vpaddw %%ymm15, %%ymm14, %%ymm14\n\t"                                                                     \
    "vpmaddwd " ms "(%[m1]), %%ymm14, %%ymm14\n\t"                                                             \
    "vpaddd %%ymm14, %[" #b "], %[" #b "]\n\t"
#define TILE_STEP_Q6(o, ms)                                                                                    \
    "vmovdqa " o "(%[w0]), %%ymm9\n\t"                                                                         \
    "vmovdqa 32+" o "(%[w0]), %%ymm10\n\t"                                                                     \
    "vmovdqa " o "(%[w1]), %%ymm11\n\t"                                                                        \
    "vmovdqa 32+" o "(%[w1]), %%ymm12\n\t" TILE_ROWS_AT(TILE_ROW_Q6, o, ms)
/* ROW for the tile's four activation rows, each with its two sums; the step's arguments (offsets) first. */
#define TILE_ROWS_AT(ROW, ...)                                                                                 \
    ROW(__VA_ARGS__, x0, s00, s01) ROW(__VA_ARGS__, x1, s10, s11) ROW(__VA_ARGS__, x2, s20, s21)                   \
        ROW(__VA_ARGS__, x3, s30, s31)
#define WIDEN(a) "vpmaddwd %[ones], %[" #a "], %[" #a "]\n\t"
#define WIDEN_ALL WIDEN(s00) WIDEN(s01) WIDEN(s10) WIDEN(s11) WIDEN(s20) WIDEN(s21) WIDEN(s30) WIDEN(s31)
#define WIDEN_BY(a, m) "vpmaddwd (%[" #m "]), %[" #a "], %[" #a "]\n\t"
#define WIDEN_SCALED                                                                                           \
    WIDEN_BY(s00, m0) WIDEN_BY(s01, m1) WIDEN_BY(s10, m0) WIDEN_BY(s11, m1) WIDEN_BY(s20, m0) WIDEN_BY(s21, m1)     \
        WIDEN_BY(s30, m0) WIDEN_BY(s31, m1)

/* n registers (4 or 8; Q6: 8) from register j0, unrolled: a loop's exit, mispredicted once per group, cost more
 * than its instructions. */
static inline __attribute__((always_inline)) void tile_sums(tile_kind kind, const __m256i *w0, const __m256i *w1,
                                                             const __m256i *m0, const __m256i *m1,
                                                             const __m256i *const xr[PANEL_ROWS], int j0, int n,
                                                             __m256i s[PANEL_ROWS][PANEL_COLS]) {
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
    const __m256i ones = _mm256_set1_epi16(1);
    w0 += j0, w1 += j0;
    const __m256i *x0 = xr[0] + j0, *x1 = xr[1] + j0, *x2 = xr[2] + j0, *x3 = xr[3] + j0;
#define TILE_ASM(body)                                                                                          \
    __asm__(body                                                                                               \
            : [s00] "+x"(s00), [s01] "+x"(s01), [s10] "+x"(s10), [s11] "+x"(s11), [s20] "+x"(s20),             \
              [s21] "+x"(s21), [s30] "+x"(s30), [s31] "+x"(s31)                                                \
            : [w0] "r"(w0), [w1] "r"(w1), [m0] "r"(m0), [m1] "r"(m1), [x0] "r"(x0), [x1] "r"(x1), [x2] "r"(x2),      \
              [x3] "r"(x3), [ones] "x"(ones)                                                                   \
            : "memory", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15")
#define STEPS4(STEP) STEP("0") STEP("32") STEP("64") STEP("96")
#define STEPS8(STEP) STEPS4(STEP) STEP("128") STEP("160") STEP("192") STEP("224")
    if (kind == TILE_Q8 && n == 8) TILE_ASM(STEPS8(TILE_STEP_Q8));
    if (kind == TILE_Q8 && n == 4) TILE_ASM(STEPS4(TILE_STEP_Q8));
    if (kind == TILE_Q4 && n == 8) TILE_ASM(STEPS8(TILE_STEP_Q4) WIDEN_ALL);
    if (kind == TILE_Q4 && n == 4) TILE_ASM(STEPS4(TILE_STEP_Q4) WIDEN_ALL);
    if (kind == TILE_Q4K) TILE_ASM(STEPS8(TILE_STEP_Q4) WIDEN_SCALED);
    if (kind == TILE_Q6) TILE_ASM(TILE_STEP_Q6("0", "0") TILE_STEP_Q6("64", "0") TILE_STEP_Q6("128", "32") TILE_STEP_Q6("192", "32"));
#undef STEPS8
#undef STEPS4
#undef TILE_ASM
#undef WIDEN_SCALED
#undef WIDEN_BY
#undef WIDEN_ALL
#undef WIDEN
#undef TILE_ROWS_AT
#undef TILE_STEP_Q6
#undef TILE_ROW_Q6
#undef TILE_STEP_Q4
#undef TILE_ROW_Q4
#undef TILE_STEP_Q8
#undef TILE_ROW_Q8
    s[0][0] = s00, s[0][1] = s01, s[1][0] = s10, s[1][1] = s11;
    s[2][0] = s20, s[2][1] = s21, s[3][0] = s30, s[3][1] = s31;
}

/* The weight side of a panel of C rows: rearranged per call (pk: group g of row c at pk[g * C + c]) or packed at
 * load (rows: Q8_0 rows as quant_pack_rows leaves them, row c at rows + c * row_bytes, scales at scales_at). */
typedef struct {
    const wgroup *pk;
    const uint8_t *rows;
    size_t row_bytes, scales_at;
} wpanel;

static inline const __m256i *panel_regs(const wpanel *wp, bool packed, int C, size_t g, int c) {
    return packed ? (const __m256i *)(wp->rows + c * wp->row_bytes + g * PACKED_GROUP_BYTES) : wp->pk[g * C + c].q;
}

/* Group g's 8 scales of a packed row (quant_pack_rows) as f32. */
static inline __m256 packed_scales(const uint8_t *row, size_t scales_at, size_t g) {
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(row + scales_at + g * BLOCK_LANES * sizeof(uint16_t))));
}

static inline __m256 panel_scales(const wpanel *wp, bool packed, int C, size_t g, int c) {
    return packed ? packed_scales(wp->rows + c * wp->row_bytes, wp->scales_at, g) : wp->pk[g * C + c].d;
}

/* One register tile: y[r*ldy + c] for r < R, c < C over all ng groups (packed, R and C known at compile time, so
 * the accumulators stay in registers). xp: activation row r's groups at xp + r * ng. */
static inline __attribute__((always_inline)) void panel_tile(ggml_type type, bool packed, const wpanel *wp, size_t ng,
                                                              bool half_last, const xgroup *xp, int R, int C, float *y,
                                                              size_t ldy) {
    __m256 acc[PANEL_ROWS][PANEL_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (size_t g = 0; g < ng; g++) {
        const __m256i *w0 = panel_regs(wp, packed, C, g, 0), *w1 = panel_regs(wp, packed, C, g, C - 1);
        __m256 dw[PANEL_COLS];
        for (int c = 0; c < C; c++) dw[c] = panel_scales(wp, packed, C, g, c);
        const xgroup *px[PANEL_ROWS];
        for (int r = 0; r < R; r++) px[r] = &xp[r * ng + g];
        const bool half = half_last && g + 1 == ng; /* 4 registers: the half layout */
        /* A smaller tile repeats its last row and column (sums it then drops). */
        const __m256i *xrow[PANEL_ROWS];
        for (int r = 0; r < PANEL_ROWS; r++) xrow[r] = px[r < R ? r : R - 1]->q;
        __m256i s[PANEL_ROWS][PANEL_COLS];
        /* The widening multipliers (K-quants): both rows' scales, their halves 32 bytes apart (Q6_K). */
        const __m256i *m0 = packed ? NULL : wp->pk[g * C].sc16, *m1 = packed ? NULL : wp->pk[g * C + C - 1].sc16;
        if (type == GGML_TYPE_Q6_K) { /* quants 0..15 and 16..31 of each block have their own scales */
            tile_sums(TILE_Q6, w0, w1, m0, m1, xrow, 0, BLOCK_LANES, s);
        } else { /* Q8_0: exact 32-bit sums; Q4_0, Q4_K: quants 0..15, all 8 pair sums (at most 8 · 2 · 15 · 127) in
                  * 16 bits, widened once */
            const tile_kind kind = type == GGML_TYPE_Q8_0 ? TILE_Q8 : type == GGML_TYPE_Q4_K ? TILE_Q4K : TILE_Q4;
            if (half)
                tile_sums(kind, w0, w1, m0, m1, xrow, 0, BLOCK_LANES / 2, s);
            else
                tile_sums(kind, w0, w1, m0, m1, xrow, 0, BLOCK_LANES, s);
        }
        __m256i xsum[PANEL_ROWS]; /* Q4_0, Q4_K: Σx per block; Q6_K: Σx of its halves as the 16-bit halves */
        __m256 xsumf[PANEL_ROWS];
        for (int r = 0; type != GGML_TYPE_Q8_0 && r < R; r++) {
            if (type == GGML_TYPE_Q6_K) { /* each at most 16 · 127 in magnitude */
                xsum[r] = _mm256_or_si256(_mm256_and_si256(px[r]->sum_lo, _mm256_set1_epi32(0xffff)),
                                          _mm256_slli_epi32(px[r]->sum_hi, 16));
                continue;
            }
            xsum[r] = _mm256_add_epi32(px[r]->sum_lo, px[r]->sum_hi);
            if (half) xsum[r] = half_fold(xsum[r]);
            xsumf[r] = _mm256_cvtepi32_ps(xsum[r]);
        }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                const wgroup *pw = packed ? NULL : &wp->pk[g * C + c]; /* K-quants: their scales and mins */
                __m256i si = half ? half_fold(s[r][c]) : s[r][c];
                if (type == GGML_TYPE_Q4_0) si = _mm256_sub_epi32(si, _mm256_slli_epi32(xsum[r], 3));
                /* Q6_K: the sums are sc · Σq·x over both halves; less the offset's 32 · sc · Σx, an exact madd,
                 * they are s_b of quant.h (below 2^24, so its conversion is exact) */
                if (type == GGML_TYPE_Q6_K) si = _mm256_sub_epi32(si, _mm256_madd_epi16(xsum[r], pw->corr16));
                __m256 sf = _mm256_cvtepi32_ps(si); /* Q4_K: sc · s, weighted by the widening madd */
                if (type == GGML_TYPE_Q4_K) /* d · (sc · s) + (-dmin · m) · Σx, then the step below */
                    sf = _mm256_fmadd_ps(dw[c], sf, _mm256_mul_ps(pw->m, xsumf[r]));
                acc[r][c] = type == GGML_TYPE_Q4_K ? _mm256_fmadd_ps(px[r]->d, sf, acc[r][c])
                                                   : _mm256_fmadd_ps(_mm256_mul_ps(dw[c], px[r]->d), sf, acc[r][c]);
            }
    }
    __m256 sums[PANEL_ROWS * PANEL_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) sums[r * C + c] = acc[r][c];
    store_sums(sums, R, C, y, ldy);
}

/* All register tiles of a panel: rows of xp (groups at xp + r * ng) against its C weight rows, 4 rows at a time and
 * a smaller tile for the last 1 to 3 (R and C known at compile time in each). */
static inline __attribute__((always_inline)) void panel_rows(ggml_type type, bool packed, const wpanel *wp, size_t ng,
                                                              bool half_last, const xgroup *xp, uint32_t rows, int C,
                                                              float *y, size_t ldy) {
    uint32_t r = 0;
    for (; r + PANEL_ROWS <= rows; r += PANEL_ROWS)
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, PANEL_ROWS, C, y + (size_t)r * ldy, ldy);
    switch (rows - r) {
    case 1:
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, 1, C, y + (size_t)r * ldy, ldy);
        return;
    case 2:
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, 2, C, y + (size_t)r * ldy, ldy);
        return;
    case 3:
        panel_tile(type, packed, wp, ng, half_last, xp + (size_t)r * ng, 3, C, y + (size_t)r * ldy, ldy);
        return;
    default:
        return;
    }
}

#define PANEL_SHAPES(T, packed)                                                                                \
    if (C == PANEL_COLS)                                                                                       \
        panel_rows(T, packed, wp, ng, half_last, xp, rows, PANEL_COLS, y, ldy);                                \
    else                                                                                                       \
        panel_rows(T, packed, wp, ng, half_last, xp, rows, 1, y, ldy);                                         \
    return;
#define PANEL_TYPE(T)                                                                                          \
    case T:                                                                                                    \
        PANEL_SHAPES(T, false)

/* Packed at load: Q8_0 only (quant_packs). */
static void panel_dispatch(ggml_type type, bool packed, const wpanel *wp, size_t ng, bool half_last, const xgroup *xp,
                           uint32_t rows, int C, float *y, size_t ldy) {
    switch (type) {
    case GGML_TYPE_Q8_0:
        if (packed) {
            PANEL_SHAPES(GGML_TYPE_Q8_0, true)
        }
        PANEL_SHAPES(GGML_TYPE_Q8_0, false)
        PANEL_TYPE(GGML_TYPE_Q4_0)
        PANEL_TYPE(GGML_TYPE_Q4_K)
        PANEL_TYPE(GGML_TYPE_Q6_K)
    default:
        return;
    }
}
#undef PANEL_TYPE
#undef PANEL_SHAPES

/* Groups of the widest row that takes panels (n <= 17664): its packed panel (pk, 53 KB) is on the stack. */
#define PANEL_MAX_GROUPS 69

static bool panel_fits(uint32_t n_rows, size_t ng) { return n_rows >= PANEL_MIN_ROWS && ng <= PANEL_MAX_GROUPS; }

/* Rows of packed panels taken at a time: their activation side stays in L1 while every panel passes over it, and a
 * panel's two weight rows stay there for its tiles (one 4864-wide Q8_0 product: 8% faster than all rows at once). */
#define PANEL_ROW_BLOCK 16

/* Prepared rows xp (rows of them) against every panel of the n_out weight rows: rearranged here, once each, or
 * packed at load (then a block of rows at a time). */
static void panels_over(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                        const xgroup *xp, uint32_t rows, size_t nb, float *y, size_t ldy) {
    const size_t ng = groups_of(nb);
    const bool half_last = half_last_group(nb);
    wgroup pk[PANEL_MAX_GROUPS * PANEL_COLS];
    const uint32_t block = packed ? PANEL_ROW_BLOCK : rows;
    for (uint32_t r0 = 0; r0 < rows; r0 += block) {
        const uint32_t nr = rows - r0 < block ? rows - r0 : block;
        for (uint32_t o = 0; o < n_out; o += PANEL_COLS) {
            const int C = n_out - o < PANEL_COLS ? (int)(n_out - o) : PANEL_COLS;
            wpanel wp = {pk, w + o * w_row_bytes, w_row_bytes, packed_scales_at(nb)};
            if (!packed) pack_panel(type, wp.rows, w_row_bytes, C, nb, ng, pk);
            panel_dispatch(type, packed, &wp, ng, half_last, xp + (size_t)r0 * ng, nr, C, y + (size_t)r0 * ldy + o,
                           ldy);
        }
    }
}

/* With the rows prepared by the caller (xp), all at once; else prepared here, as many whole register tiles of rows
 * at a time as the stack buffer holds. */
static void matmul_panels(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                          const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y, size_t ldy) {
    if (xp) {
        panels_over(type, packed, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy);
        return;
    }
    const size_t ng = groups_of(nb);
    xgroup buf[PANEL_X_BYTES / sizeof(xgroup)];
    const uint32_t chunk = (uint32_t)(PANEL_X_BYTES / (ng * sizeof(xgroup))) / PANEL_ROWS * PANEL_ROWS;
    for (uint32_t r0 = 0; r0 < n_rows; r0 += chunk) {
        const uint32_t rows = n_rows - r0 < chunk ? n_rows - r0 : chunk;
        prep_panel_rows(xq + (size_t)r0 * nb, nb, ng, rows, buf);
        panels_over(type, packed, w, w_row_bytes, n_out, buf, rows, nb, y + (size_t)r0 * ldy, ldy);
    }
}

/* One group of a packed direct tile: J registers (8, or 4 for a half group), each weight register loaded once for
 * the tile's one activation row; element k of s[c] ends as block k's exact sum (as in the panel tiles). */
static inline __attribute__((always_inline)) void packed_group(const uint8_t *w, size_t w_row_bytes, const xgroup *xg,
                                                                int J, int C, __m256i s[TILE_COLS]) {
    for (int c = 0; c < C; c++) s[c] = _mm256_setzero_si256();
    for (int j = 0; j < J; j++) {
        const __m256i x = _mm256_load_si256(&xg->q[j]);
        for (int c = 0; c < C; c++) {
            const __m256i wv = _mm256_load_si256((const __m256i *)(w + c * w_row_bytes) + j);
            s[c] = _mm256_add_epi32(s[c], block_sums_q8_0(wv, x));
        }
    }
}

/* Direct tile on packed Q8_0 rows, for few rows (decode): one prepared activation row (groups xg) against C <= 4
 * packed weight rows, each output with its 8 lanes in quant.h's block order, as the panel tiles; the next tile's
 * rows (C rows on) are fetched meanwhile. */
static inline __attribute__((always_inline)) void packed_tile(const uint8_t *w, size_t w_row_bytes, size_t nb,
                                                               const xgroup *xg, int C, float *y) {
    const size_t ng = groups_of(nb), scales_at = packed_scales_at(nb);
    __m256 acc[TILE_COLS];
    for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_ps();
    for (size_t g = 0; g < ng; g++) {
        const bool half = g + 1 == ng && half_last_group(nb);
        const uint8_t *wg = w + g * PACKED_GROUP_BYTES;
        for (int c = 0; c < C; c++)
            for (size_t off = 0; off < PACKED_GROUP_BYTES; off += 64)
                prefetch_at(wg, (size_t)(C + c) * w_row_bytes + off);
        __m256i s[TILE_COLS];
        if (half)
            packed_group(wg, w_row_bytes, &xg[g], BLOCK_LANES / 2, C, s);
        else
            packed_group(wg, w_row_bytes, &xg[g], BLOCK_LANES, C, s);
        for (int c = 0; c < C; c++) {
            const __m256 dw = packed_scales(w + c * w_row_bytes, scales_at, g);
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xg[g].d), _mm256_cvtepi32_ps(half ? half_fold(s[c]) : s[c]),
                                     acc[c]);
        }
    }
    for (int c = 0; c < C; c++) y[c] = hsum8(acc[c]);
}

/* Few rows against packed rows: each row prepared (here, on the stack, unless the caller did) and taken alone. */
static void packed_rows(const uint8_t *w, size_t w_row_bytes, uint32_t n_out, const block_q8_act *xq,
                        const xgroup *xp, uint32_t n_rows, size_t nb, float *y, size_t ldy) {
    const size_t ng = groups_of(nb);
    xgroup buf[PANEL_MAX_GROUPS];
    for (uint32_t r = 0; r < n_rows; r++) {
        const xgroup *xg = xp ? xp + (size_t)r * ng : buf;
        if (!xp) prep_panel_rows(xq + (size_t)r * nb, nb, ng, 1, buf);
        float *yr = y + (size_t)r * ldy;
        for (uint32_t o = 0; o < n_out; o += TILE_COLS) {
            const uint8_t *wo = w + o * w_row_bytes;
            switch (n_out - o < TILE_COLS ? n_out - o : TILE_COLS) {
            case 1:
                packed_tile(wo, w_row_bytes, nb, xg, 1, yr + o);
                break;
            case 2:
                packed_tile(wo, w_row_bytes, nb, xg, 2, yr + o);
                break;
            case 3:
                packed_tile(wo, w_row_bytes, nb, xg, 3, yr + o);
                break;
            default:
                packed_tile(wo, w_row_bytes, nb, xg, TILE_COLS, yr + o);
                break;
            }
        }
    }
}

/* Every quantized weight type: panels for many rows, else direct tiles (Q8_0, Q4_0) or one output at a
 * time (K-quants). */
static void matmul_blocks(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                          const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y, size_t ldy) {
    if (panel_fits(n_rows, groups_of(nb))) {
        matmul_panels(type, packed, w, w_row_bytes, n_out, xq, xp, n_rows, nb, y, ldy);
        return;
    }
    if (packed) {
        packed_rows(w, w_row_bytes, n_out, xq, xp, n_rows, nb, y, ldy);
        return;
    }
    /* Q4_0's corrections, once per call rather than per tile of weight rows, when they fit on the stack */
    const size_t ng = groups_of(nb);
    __m256i xsum8[(PANEL_MIN_ROWS - 1) * XSUM_MAX_GROUPS];
    const bool pre = type == GGML_TYPE_Q4_0 && n_rows < PANEL_MIN_ROWS && ng <= XSUM_MAX_GROUPS;
    for (uint32_t r = 0; pre && r < n_rows; r++)
        for (size_t g = 0; g < ng; g++) {
            const size_t b = g * BLOCK_LANES;
            xsum8[r * ng + g] = group_xsum8(xq + r * nb + b, nb - b < BLOCK_LANES ? (int)(nb - b) : BLOCK_LANES);
        }
    if (is_kquant(type)) { /* the rows' activation side once for every weight row, when it fits on the stack */
        const size_t nsb = nb / BLOCK_LANES;
        kxside xs[(PANEL_MIN_ROWS - 1) * PANEL_MAX_GROUPS];
        const bool made = n_rows < PANEL_MIN_ROWS && nsb <= PANEL_MAX_GROUPS;
        for (uint32_t r = 0; made && r < n_rows; r++)
            for (size_t sb = 0; sb < nsb; sb++) xs[r * nsb + sb] = kquant_xside(type, xq + r * nb + sb * BLOCK_LANES);
        for (uint32_t o = 0; o < n_out; o++) {
            for (size_t off = 0; off < w_row_bytes; off += 64) /* two rows ahead, as the direct tiles do */
                prefetch_at(w, (o + 2) * w_row_bytes + off);
            for (uint32_t r = 0; r < n_rows; r++)
                y[r * ldy + o] = dot_kquant(type, w + o * w_row_bytes, xq + r * nb, made ? xs + r * nsb : NULL, nsb);
        }
        return;
    }
    for (uint32_t o = 0; o < n_out; o += TILE_COLS) {
        int C = n_out - o < TILE_COLS ? (int)(n_out - o) : TILE_COLS;
        for (uint32_t r = 0; r < n_rows; r += TILE_ROWS) {
            int R = n_rows - r < TILE_ROWS ? (int)(n_rows - r) : TILE_ROWS;
            tile_dispatch(type, w + o * w_row_bytes, w_row_bytes, xq + r * nb, nb, pre ? xsum8 + r * ng : NULL, R, C,
                          y + r * ldy + o, ldy);
        }
    }
}

#endif /* QUANT_AVX2 */

/* ---- dispatch ---------------------------------------------------------------------------------- */

float quant_dot_f32(const float *a, const float *b, size_t n) {
#if QUANT_AVX2
    return dot_widened(WIDEN_F32, a, b, n);
#else
    return quant_dot_f32_scalar(a, b, n);
#endif
}

float quant_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
#if QUANT_AVX2
    switch (type) {
    case GGML_TYPE_F32:
        return dot_widened(WIDEN_F32, w, xf, n);
    case GGML_TYPE_F16:
        return dot_widened(WIDEN_F16, w, xf, n);
    case GGML_TYPE_BF16:
        return dot_widened(WIDEN_BF16, w, xf, n);
    case GGML_TYPE_Q8_0:
        return dot_blocks(GGML_TYPE_Q8_0, w, xq, n / QK);
    case GGML_TYPE_Q4_0:
        return dot_blocks(GGML_TYPE_Q4_0, w, xq, n / QK);
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q6_K:
        return dot_kquant(type, w, xq, NULL, n / QK_K);
    default:
        return quant_dot_scalar(type, w, xf, xq, n);
    }
#else
    return quant_dot_scalar(type, w, xf, xq, n);
#endif
}

bool quant_packs(ggml_type type, size_t n) {
#if QUANT_AVX2
    return type == GGML_TYPE_Q8_0 && n % QK == 0 && groups_of(n / QK) <= PANEL_MAX_GROUPS;
#else
    (void)type, (void)n;
    return false;
#endif
}

size_t quant_packed_row_bytes(size_t n) {
#if QUANT_AVX2
    return packed_row_bytes(n / QK);
#else
    (void)n;
    return 0;
#endif
}

void quant_pack_rows(const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n, void *dst) {
#if QUANT_AVX2
    const size_t nb = n / QK, ng = groups_of(nb), rb = packed_row_bytes(nb);
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * w_row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)r * rb;
        memset(out, 0, rb);
        for (size_t g = 0; g < ng; g++) {
            const uint8_t *wg = row + g * BLOCK_LANES * sizeof(block_q8_0);
            const int t = blocks_in_group(nb, g);
            __m256i q[BLOCK_LANES];
            group_regs(GGML_TYPE_Q8_0, wg, t, q);
            for (int j = 0; j < (t <= BLOCK_LANES / 2 ? BLOCK_LANES / 2 : BLOCK_LANES); j++)
                _mm256_store_si256((__m256i *)(out + g * PACKED_GROUP_BYTES) + j, q[j]);
            uint16_t *d = (uint16_t *)(out + packed_scales_at(nb)) + g * BLOCK_LANES;
            for (int k = 0; k < t; k++) d[k] = ((const block_q8_0 *)wg)[k].d;
        }
    }
#else
    (void)w, (void)w_row_bytes, (void)r0, (void)r1, (void)n, (void)dst;
#endif
}

size_t quant_panel_row_bytes(size_t n) {
#if QUANT_AVX2
    return groups_of(n / QK) * sizeof(xgroup);
#else
    (void)n;
    return 0;
#endif
}

void quant_panel_rows(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp) {
#if QUANT_AVX2
    const size_t nb = n / QK, ng = groups_of(nb);
    prep_panel_rows(xq + (size_t)r0 * nb, nb, ng, r1 - r0, (xgroup *)xp + (size_t)r0 * ng);
#else
    (void)xq, (void)n, (void)r0, (void)r1, (void)xp;
#endif
}

void quant_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                  const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
#if QUANT_AVX2
    if (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || is_kquant(type)) {
        matmul_blocks(type, packed, w, w_row_bytes, n_out, xq, xp, n_rows, n / QK, y, ldy);
        return;
    }
#else
    (void)xp, (void)packed; /* nothing is packed without SIMD (quant_packs) */
#endif
    const bool q8 = type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_K ||
                    type == GGML_TYPE_Q6_K;
    for (uint32_t o = 0; o < n_out; o++)
        for (uint32_t r = 0; r < n_rows; r++)
            y[r * ldy + o] = quant_dot(type, (const uint8_t *)w + o * w_row_bytes, q8 ? NULL : xf + r * n,
                                       q8 ? xq + r * (n / QK) : NULL, n);
}

/* quant_exp's constants: the split of ln 2 (hi has 9 significant bits, so k·hi is exact), 1/i!. */
#define EXP_LOG2E 1.44269504f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_MAX 88.0f
#define EXP_MIN -87.33654f
static const float exp_coef[7] = {1.0f, 1.0f, 0.5f, 0.166666672f, 0.0416666679f, 0.00833333377f, 0.00138888892f};

static float exp1(float x) {
    if (x != x) return x + 0.0f; /* quiet NaN, as the SIMD path's arithmetic leaves it */
    if (x > EXP_MAX) return INFINITY;
    if (x < EXP_MIN) return 0.0f;
    const float k = nearbyintf(x * EXP_LOG2E);
    float r = fmaf(k, -EXP_LN2_HI, x);
    r = fmaf(k, -EXP_LN2_LO, r);
    float p = exp_coef[6];
    for (int i = 5; i >= 0; i--) p = fmaf(p, r, exp_coef[i]);
    return p * f32_from_bits((uint32_t)((int32_t)k + 127) << 23);
}

void quant_exp_scalar(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = exp1(x[i]);
}

void quant_exp(float *x, size_t n) {
    size_t i = 0;
#if QUANT_AVX2
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 k =
            _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-EXP_LN2_HI), v);
        r = _mm256_fmadd_ps(k, _mm256_set1_ps(-EXP_LN2_LO), r);
        __m256 p = _mm256_set1_ps(exp_coef[6]);
        for (int c = 5; c >= 0; c--) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_coef[c]));
        /* lanes out of range hold garbage scales here; the blends below replace them */
        const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
        __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
        e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(v, _mm256_set1_ps(EXP_MIN), _CMP_LT_OQ));
        e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(v, _mm256_set1_ps(EXP_MAX), _CMP_GT_OQ));
        _mm256_storeu_ps(x + i, e);
    }
#endif
    for (; i < n; i++) x[i] = exp1(x[i]);
}

/* quant_scale_max: lane l keeps the running max of elements l, l+8, ..; "s > lane" picks, so a NaN never wins
 * and ties keep the earlier element; the lanes meet in the combine tree's order. */
static float max_pick(float a, float b) { return b > a ? b : a; }

static float combine8_max(const float l[BLOCK_LANES]) {
    return max_pick(max_pick(max_pick(l[0], l[4]), max_pick(l[2], l[6])), max_pick(max_pick(l[1], l[5]), max_pick(l[3], l[7])));
}

float quant_scale_max_scalar(float *s, size_t n, float scale) {
    float lane[BLOCK_LANES];
    for (int l = 0; l < BLOCK_LANES; l++) lane[l] = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        s[j] *= scale;
        lane[j % BLOCK_LANES] = max_pick(lane[j % BLOCK_LANES], s[j]);
    }
    return combine8_max(lane);
}

void quant_exp_sum_rows_scalar(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum) {
    for (size_t r = 0; r < n_rows; r++) {
        float *sr = s + r * stride, lane[BLOCK_LANES] = {0};
        for (size_t j = 0; j < n[r]; j++) sr[j] -= m[r];
        quant_exp_scalar(sr, n[r]);
        for (size_t j = 0; j < n[r]; j++) lane[j % BLOCK_LANES] += sr[j];
        sum[r] = combine8(lane);
    }
}

float quant_scale_max(float *s, size_t n, float scale) {
#if QUANT_AVX2
    __m256 mx = _mm256_set1_ps(-INFINITY);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(scale));
        _mm256_storeu_ps(s + j, v);
        mx = _mm256_blendv_ps(mx, v, _mm256_cmp_ps(v, mx, _CMP_GT_OQ)); /* max_pick per lane */
    }
    float lane[BLOCK_LANES];
    _mm256_storeu_ps(lane, mx);
    for (; j < n; j++) {
        s[j] *= scale;
        lane[j % BLOCK_LANES] = max_pick(lane[j % BLOCK_LANES], s[j]);
    }
    return combine8_max(lane);
#else
    return quant_scale_max_scalar(s, n, scale);
#endif
}

void quant_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum) {
#if QUANT_AVX2
    for (size_t r = 0; r < n_rows; r++) /* whole registers: the elements past n[r] are the caller's scratch */
        for (float *sr = s + r * stride, *end = sr + n[r]; sr < end; sr += 8)
            _mm256_storeu_ps(sr, _mm256_sub_ps(_mm256_loadu_ps(sr), _mm256_set1_ps(m[r])));
    quant_exp(s, n_rows * stride);
    for (size_t r = 0; r < n_rows; r++) {
        const float *sr = s + r * stride;
        __m256 acc = _mm256_setzero_ps();
        size_t j = 0;
        for (; j + 8 <= n[r]; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(sr + j));
        float lane[BLOCK_LANES];
        _mm256_storeu_ps(lane, acc);
        for (; j < n[r]; j++) lane[j % BLOCK_LANES] += sr[j];
        sum[r] = combine8(lane);
    }
#else
    quant_exp_sum_rows_scalar(s, stride, n, m, n_rows, sum);
#endif
}

void quant_axpy_f32(float *y, float a, const float *x, size_t n) {
    size_t i = 0;
#if QUANT_AVX2
    const __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

void quant_axpy_f16(float *y, float a, const uint16_t *x, size_t n) {
    size_t i = 0;
#if QUANT_AVX2
    const __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
                                                _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] = fmaf(a, quant_f16_to_f32(x[i]), y[i]);
}

#if QUANT_AVX2
/* Q queries (1..6) against 8·K8 keys of a key-major tile from key k0 (K8 = 2 or 4, Q·K8 <= 12): Q·K8 chains side by
 * side, each element d of the keys loaded and widened once for the Q queries. One function per (Q, K8), so that the
 * chains are an array of constant size, which GCC keeps in registers. */
#define SCORE_TILE_KEYS(Q, K8)                                                                                      \
    static inline __attribute__((always_inline)) void score_tile_keys_##Q##_##K8(                                  \
        widen_kind kind, const void *kt, size_t k0, const float *q, size_t q_stride, size_t n, float *out,        \
        size_t out_stride) {                                                                                        \
        __m256 acc[Q * K8];                                                                                         \
        for (int c = 0; c < Q * K8; c++) acc[c] = _mm256_setzero_ps();                                              \
        for (size_t d = 0; d < n; d++) {                                                                            \
            __m256 key[K8];                                                                                         \
            for (int g = 0; g < K8; g++) {                                                                          \
                key[g] = load8_widened(kind, kt, d * QUANT_KEY_TILE + k0 + 8 * (size_t)g);                         \
                if (Q > 1) PIN(key[g]); /* shared by the Q queries in registers */                                  \
            }                                                                                                       \
            for (int r = 0; r < Q; r++) {                                                                           \
                const __m256 qd = _mm256_broadcast_ss(q + r * q_stride + d);                                        \
                for (int g = 0; g < K8; g++) acc[r * K8 + g] = _mm256_fmadd_ps(qd, key[g], acc[r * K8 + g]);       \
            }                                                                                                       \
        }                                                                                                           \
        for (int r = 0; r < Q; r++)                                                                                 \
            for (int g = 0; g < K8; g++)                                                                            \
                _mm256_storeu_ps(out + r * out_stride + k0 + 8 * (size_t)g, acc[r * K8 + g]);                       \
    }
SCORE_TILE_KEYS(1, 4)
SCORE_TILE_KEYS(2, 4)
SCORE_TILE_KEYS(3, 2)
SCORE_TILE_KEYS(4, 2)
SCORE_TILE_KEYS(5, 2)
SCORE_TILE_KEYS(6, 2)

/* The queries of a tile in blocks of six, then the rest as one block: all 32 keys at once for one or two queries
 * (4 chains each), else two halves of 16 keys — enough independent chains to cover the multiply-add latency, few
 * enough to stay in registers. */
static void score_tile(widen_kind kind, const void *kt, const float *q, size_t q_stride, size_t n_q, size_t n,
                       float *out, size_t out_stride) {
    for (size_t r = 0; r < n_q; r += 6) {
        const float *qr = q + r * q_stride;
        float *o = out + r * out_stride;
        switch (n_q - r < 6 ? n_q - r : 6) {
#define HALVES(Q)                                                                    \
    score_tile_keys_##Q##_2(kind, kt, 0, qr, q_stride, n, o, out_stride);            \
    score_tile_keys_##Q##_2(kind, kt, 16, qr, q_stride, n, o, out_stride);           \
    break
        case 6: HALVES(6);
        case 5: HALVES(5);
        case 4: HALVES(4);
        case 3: HALVES(3);
#undef HALVES
        case 2: score_tile_keys_2_4(kind, kt, 0, qr, q_stride, n, o, out_stride); break;
        default: score_tile_keys_1_4(kind, kt, 0, qr, q_stride, n, o, out_stride); break;
        }
    }
}
#endif

void quant_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                          size_t out_stride) {
#if QUANT_AVX2
    score_tile(WIDEN_F16, kt, q, q_stride, n_q, n, out, out_stride);
#else
    quant_score_tile_f16_scalar(kt, q, q_stride, n_q, n, out, out_stride);
#endif
}

void quant_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                          size_t out_stride) {
#if QUANT_AVX2
    score_tile(WIDEN_F32, kt, q, q_stride, n_q, n, out, out_stride);
#else
    quant_score_tile_f32_scalar(kt, q, q_stride, n_q, n, out, out_stride);
#endif
}

/* Q outputs at once (1, 2 or 4, known at compile time; output r at y + r·y_stride with weights a + r·a_stride):
 * each y[i] sees fmaf(a[j], row_j[i], y[i]) for j in order, as n_rows axpy calls would do; only the loop nest
 * differs: 64 elements in all (64/Q of each output) stay in eight registers while every row passes over them,
 * each row chunk loaded once for the Q outputs. */
static inline __attribute__((always_inline)) void axpy_queries(widen_kind kind, int Q, float *y, size_t y_stride,
                                                                const float *a, size_t a_stride, const void *rows,
                                                                size_t stride, size_t n_rows, size_t n) {
    size_t i = 0;
#if QUANT_AVX2
    const int W = 8 / Q; /* registers per output */
    for (; i + 8 * (size_t)W <= n; i += 8 * (size_t)W) {
        __m256 acc[8];
        for (int r = 0; r < Q; r++)
            for (int u = 0; u < W; u++) acc[r * W + u] = _mm256_loadu_ps(y + r * y_stride + i + 8 * u);
        for (size_t j = 0; j < n_rows; j++) {
            __m256 aj[4];
            for (int r = 0; r < Q; r++) {
                aj[r] = _mm256_set1_ps(a[r * a_stride + j]);
                if (Q > 1) PIN(aj[r]);
            }
            for (int u = 0; u < W; u++) {
                __m256 v = load8_widened(kind, rows, j * stride + i + 8 * u);
                if (Q > 1) PIN(v);
                for (int r = 0; r < Q; r++) acc[r * W + u] = _mm256_fmadd_ps(aj[r], v, acc[r * W + u]);
            }
        }
        for (int r = 0; r < Q; r++)
            for (int u = 0; u < W; u++) _mm256_storeu_ps(y + r * y_stride + i + 8 * u, acc[r * W + u]);
    }
#endif
    for (int r = 0; r < Q; r++) {
        float *yr = y + r * y_stride;
        const float *ar = a + r * a_stride;
        size_t t = i;
#if QUANT_AVX2
        for (; t + 8 <= n; t += 8) {
            __m256 acc = _mm256_loadu_ps(yr + t);
            for (size_t j = 0; j < n_rows; j++)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(ar[j]), load8_widened(kind, rows, j * stride + t), acc);
            _mm256_storeu_ps(yr + t, acc);
        }
#endif
        for (; t < n; t++)
            for (size_t j = 0; j < n_rows; j++)
                yr[t] = fmaf(ar[j],
                             kind == WIDEN_F16 ? quant_f16_to_f32(((const uint16_t *)rows)[j * stride + t])
                                               : ((const float *)rows)[j * stride + t],
                             yr[t]);
    }
}

static inline __attribute__((always_inline)) void axpy_block(widen_kind kind, float *y, size_t y_stride,
                                                              const float *a, size_t a_stride, size_t n_y,
                                                              const void *rows, size_t stride, size_t n_rows,
                                                              size_t n) {
    size_t r = 0;
    for (; r + 4 <= n_y; r += 4)
        axpy_queries(kind, 4, y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride, n_rows, n);
    for (; r + 2 <= n_y; r += 2)
        axpy_queries(kind, 2, y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride, n_rows, n);
    if (r < n_y) axpy_queries(kind, 1, y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride, n_rows, n);
}

void quant_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                         const uint16_t *rows, size_t stride, size_t n_rows, size_t n) {
    axpy_block(WIDEN_F16, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void quant_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                         size_t stride, size_t n_rows, size_t n) {
    axpy_block(WIDEN_F32, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

int quant_simd_enabled(void) {
    return QUANT_AVX2;
}
