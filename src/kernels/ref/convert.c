/* ref/convert.c — the reference conversions, weight (de)quantization and activation quantization (quant.h).
 *
 * Plain C: these define the bits. Conversions to and from f16 reproduce F16C exactly, NaNs included (order.h), so
 * that a row converted by a vector instruction and one converted element by element hold the same bytes.
 */
#include "ref.h"

#include "order.h"

float quant_f16_to_f32(uint16_t h) { return ord_f16_to_f32(h); }

uint16_t quant_f32_to_f16(float f) { return ord_f32_to_f16(f); }

float quant_bf16_to_f32(uint16_t h) { return ord_bf16_to_f32(h); }

uint16_t quant_f32_to_bf16(float f) {
    uint32_t u = ord_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* keep it a quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

void ref_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ord_f32_to_f16(src[i]);
}

void ref_f16_to_f32_row(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ord_f16_to_f32(src[i]);
}

/* ---- K-quant block layouts (quant.h) ------------------------------------------------------------- */

void ref_dequantize_q4_K(const void *src, float *dst, size_t n) {
    const block_q4_K *blk = src;
    for (size_t b = 0; b < n / QK_K; b++) {
        uint8_t q[QK_K];
        ord_q4_K_unpack(&blk[b], q);
        ord_dequantize_sc_min(ord_f16_to_f32(blk[b].d), ord_f16_to_f32(blk[b].dmin), blk[b].scales, q, dst + b * QK_K);
    }
}

void ref_dequantize_q6_K(const void *src, float *dst, size_t n) {
    const block_q6_K *blk = src;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float d = ord_f16_to_f32(blk[b].d);
        int8_t q[QK_K];
        ord_q6_K_unpack(&blk[b], q);
        for (int e = 0; e < QK_K; e++) dst[b * QK_K + e] = d * (float)blk[b].scales[e / 16] * (float)q[e];
    }
}

void ref_dequantize_f32(const void *src, float *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }

void ref_dequantize_f16(const void *src, float *dst, size_t n) { ref_f16_to_f32_row(src, dst, n); }

void ref_dequantize_bf16(const void *src, float *dst, size_t n) {
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++) dst[i] = ord_bf16_to_f32(h[i]);
}

void ref_dequantize_q8_0(const void *src, float *dst, size_t n) {
    const block_q8_0 *blk = src;
    for (size_t b = 0; b < n / QK; b++) {
        float d = ord_f16_to_f32(blk[b].d);
        for (size_t j = 0; j < QK; j++) dst[b * QK + j] = (float)blk[b].qs[j] * d;
    }
}

void ref_dequantize_q4_0(const void *src, float *dst, size_t n) {
    const block_q4_0 *blk = src;
    for (size_t b = 0; b < n / QK; b++) {
        float d = ord_f16_to_f32(blk[b].d);
        for (size_t j = 0; j < QK / 2; j++) {
            dst[b * QK + j] = (float)((blk[b].qs[j] & 15) - 8) * d;
            dst[b * QK + j + QK / 2] = (float)((blk[b].qs[j] >> 4) - 8) * d;
        }
    }
}

/* ggml's quantize_row_q8_0_ref: round half away from zero, unlike the activation quantizer. */
void ref_quantize_q8_0(const float *x, void *dst, size_t n) {
    block_q8_0 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        float amax = 0.0f;
        for (size_t j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[b * QK + j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ord_f32_to_f16(d);
        for (size_t j = 0; j < QK; j++) y[b].qs[j] = (int8_t)roundf(x[b * QK + j] * id);
    }
}

/* ggml's quantize_row_q4_0_ref: the scale carries the sign of the largest-magnitude value so that it
 * lands exactly on -8, the end of the asymmetric range [-8, 7]. */
void ref_quantize_q4_0(const float *x, void *dst, size_t n) {
    block_q4_0 *y = dst;
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
        y[b].d = ord_f32_to_f16(d);
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
    uint16_t h = ord_f32_to_f16(v);
    return ord_f16_to_f32(h) < v ? (uint16_t)(h + 1) : h;
}

/* Simple min/max scaling (quant.h): each sub-block's range [lo, hi] (lo <= 0) is covered by its grid. */
void ref_quantize_q4_K(const float *x, void *dst, size_t n) {
    block_q4_K *y = dst;
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
        const float d = ord_f16_to_f32(y[b].d), dmin = ord_f16_to_f32(y[b].dmin);
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
void ref_quantize_q6_K(const float *x, void *dst, size_t n) {
    block_q6_K *y = dst;
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
        const float d = ord_f16_to_f32(y[b].d);
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

void ref_quantize_f32(const float *src, void *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }

void ref_quantize_f16(const float *src, void *dst, size_t n) { ref_f32_to_f16_row(src, dst, n); }

void ref_quantize_bf16(const float *src, void *dst, size_t n) {
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = quant_f32_to_bf16(src[i]);
}

/* ---- activation quantization ------------------------------------------------------------------- */

void ref_row_q8(const float *x, block_q8_act *dst, size_t n) {
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        /* "a > b ? a : b" rather than fmaxf: a NaN (quiet or signalling) never wins, as the vector max
         * instructions' second operand does, and no libm behaviour enters */
        float amax = 0.0f;
        for (size_t j = 0; j < QK; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f; /* as ggml-cpu computes it (its x86 quantize_row_q8_0) */
        dst[b].d = ord_f16_to_f32(ord_f32_to_f16(d));
        for (size_t j = 0; j < QK; j++) {
            float v = xb[j] * id;
            v = v > -127.0f ? v : -127.0f;
            v = v < 127.0f ? v : 127.0f;
            dst[b].qs[j] = (int8_t)nearbyintf(v);
        }
    }
}
