/* ref/quantize.c — the reference quantization of every weight type (traits.h's quantize): what gen-model writes and
 * what K/V rows of Q8_0 and Q4_0 store (quant.h gives each one's rounding).
 *
 * Q8_0 and Q4_0 are ggml's reference quantizers; Q4_K and Q6_K a simple per-sub-block scaling (quant.h). WHY ggml's
 * reference quantizers for the later types (unlike ref_quantize_q4_K's simple scaling): gen-model writes files that
 * llama.cpp's reference quantizer would write from the same floats, byte for byte (bench/typecheck checks it), so a
 * generated model is one llama.cpp could have made. Each is written from ggml's algorithm (ggml-quants.c,
 * quantize_row_*_ref): the same IEEE operations in the same order, C's evaluation order and int → float conversions
 * included, which is why some expressions below are spelled out as they are.
 */
#include <float.h>

#include "ref.h"

#include "order.h"

void ref_quantize_f32(const float *src, void *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }

void ref_quantize_f16(const float *src, void *dst, size_t n) { ref_f32_to_f16_row(src, dst, n); }

void ref_quantize_bf16(const float *src, void *dst, size_t n) {
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = ord_f32_to_bf16(src[i]);
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
        for (size_t j = 0; j < QK; j++) {
            const float q = roundf(x[b * QK + j] * id);
            y[b].qs[j] = q == q ? (int8_t)q : 0; /* a NaN stores 0 */
        }
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

/* ---- Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS: ggml's reference quantizers ------------ */

/* Round to the nearest integer, ties to even, by ggml's trick: adding 1.5 · 2^23 leaves the integer in the low
 * mantissa bits. Exact for |v| < 2^22; beyond (a near-zero divisor) it wraps as ggml's does, and the callers clamp. */
static int nearest(float v) {
    const float big = v + 12582912.0f;
    return (int)(ord_f32_bits(big) & 0x007fffff) - 0x00400000;
}

/* Block of 32 with a scale and a min (Q4_1, Q5_1; levels 15 or 31): d = (max - min) / levels and the min, stored in
 * d16 and m16 as f16 (the min also at *min); returns 1 / d (0 when d is), for q = (int)((x - min) / d + 0.5). */
static float scale_min_block(const float *x, float levels, uint16_t *d16, uint16_t *m16, float *min) {
    float max = -FLT_MAX;
    *min = FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - *min) / levels;
    *d16 = ord_f32_to_f16(d);
    *m16 = ord_f32_to_f16(*min);
    return d != 0.0f ? 1.0f / d : 0.0f;
}

void ref_quantize_q4_1(const float *x, void *dst, size_t n) {
    block_q4_1 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float min;
        const float id = scale_min_block(xb, 15.0f, &y[b].d, &y[b].m, &min);
        for (int j = 0; j < QK / 2; j++) {
            const int lo = (int8_t)((xb[j] - min) * id + 0.5f), hi = (int8_t)((xb[j + QK / 2] - min) * id + 0.5f);
            y[b].qs[j] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
        }
    }
}

/* The 32 quants q (0..31) into a Q5 block's nibbles and fifth bits. */
static void q5_pack(const uint8_t q[QK], uint8_t qh4[4], uint8_t qs[QK / 2]) {
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + QK / 2] & 15) << 4);
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + QK / 2] >> 4) << (j + QK / 2);
    }
    memcpy(qh4, &qh, 4);
}

/* The signed max lands on -16, as Q4_0's on -8. */
void ref_quantize_q5_0(const float *x, void *dst, size_t n) {
    block_q5_0 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(xb[j])) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ord_f32_to_f16(d);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) {
            const int v = (int8_t)(xb[j] * id + 16.5f);
            q[j] = (uint8_t)(v < 31 ? v : 31);
        }
        q5_pack(q, y[b].qh, y[b].qs);
    }
}

void ref_quantize_q5_1(const float *x, void *dst, size_t n) {
    block_q5_1 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float min;
        const float id = scale_min_block(xb, 31.0f, &y[b].d, &y[b].m, &min);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) q[j] = (uint8_t)((xb[j] - min) * id + 0.5f);
        q5_pack(q, y[b].qh, y[b].qs);
    }
}

/* ggml's make_qkx2_quants: a scale and a min (returned as -min >= 0) for n values on the grid 0..nmax, the error
 * (absolute with mad, else squared) weighted by w, searched over nstep + 1 trial scales. */
static float scale_min_search(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep, bool mad) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1.0f / iscale, best = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = nearest(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * (float)L[i] + min - x[i];
        diff = mad ? fabsf(diff) : diff * diff;
        best += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = nearest(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.0f) {
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = mad ? fabsf(diff) : diff * diff;
                err += w[i] * diff;
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

void ref_quantize_q2_K(const float *x, void *dst, size_t n) {
    block_q2_K *y = dst;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        uint8_t L[QK_K], Laux[16];
        float w[16], mins[16], scales[16], max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(xb[16 * j + l]);
            scales[j] = scale_min_search(16, 3, xb + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0.0f) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++) y[b].scales[j] = (uint8_t)nearest(iscale * scales[j]);
            y[b].d = ord_f32_to_f16(max_scale / 15.0f);
        } else {
            memset(y[b].scales, 0, sizeof y[b].scales);
            y[b].d = ord_f32_to_f16(0.0f);
        }
        if (max_min > 0.0f) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++) y[b].scales[j] |= (uint8_t)(nearest(iscale * mins[j]) << 4);
            y[b].dmin = ord_f32_to_f16(max_min / 15.0f);
        } else {
            y[b].dmin = ord_f32_to_f16(0.0f);
        }
        for (int j = 0; j < 16; j++) {
            const float d = ord_f16_to_f32(y[b].d) * (float)(y[b].scales[j] & 15);
            if (d == 0.0f) continue; /* the search's quants stay */
            const float dm = ord_f16_to_f32(y[b].dmin) * (float)(y[b].scales[j] >> 4);
            for (int i = 0; i < 16; i++) {
                const int l = nearest((xb[16 * j + i] + dm) / d);
                L[16 * j + i] = (uint8_t)(l < 0 ? 0 : l > 3 ? 3 : l);
            }
        }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *Lh = L + 128 * h;
                y[b].qs[32 * h + l] = (uint8_t)(Lh[l] | Lh[l + 32] << 2 | Lh[l + 64] << 4 | Lh[l + 96] << 6);
            }
    }
}

/* ggml's make_q3_quants with its rmse refinement: quants L in 0..2·nmax-1 (offset by nmax; all 0 for a zero block)
 * and a scale weighted by x². */
static float q3_search(int n, int nmax, const float *x, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = nearest(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0.0f) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int l = nearest(x[i] * sl2 / slx);
                l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
                if (l != L[i]) {
                    slx += w * x[i] * (float)l;
                    sl2 += w * (float)l * (float)l;
                    if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void ref_quantize_q3_K(const float *x, void *dst, size_t n) {
    block_q3_K *y = dst;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        int8_t L[QK_K];
        float scales[16], max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < 16; j++) {
            scales[j] = q3_search(16, 4, xb + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(y[b].scales, 0, sizeof y[b].scales);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = (int8_t)nearest(iscale * scales[j]);
                l = (l < -32 ? -32 : l > 31 ? 31 : l) + 32;
                if (j < 8)
                    y[b].scales[j] = (uint8_t)(l & 15);
                else
                    y[b].scales[j - 8] |= (uint8_t)((l & 15) << 4);
                y[b].scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[b].d = ord_f32_to_f16(1.0f / iscale);
        } else {
            y[b].d = ord_f32_to_f16(0.0f);
        }
        int32_t sc[16];
        ord_q3_K_scales(y[b].scales, sc);
        for (int j = 0; j < 16; j++) {
            const float d = ord_f16_to_f32(y[b].d) * (float)sc[j];
            if (d == 0.0f) continue; /* the search's quants stay */
            for (int i = 0; i < 16; i++) {
                const int l = nearest(xb[16 * j + i] / d);
                L[16 * j + i] = (int8_t)((l < -4 ? -4 : l > 3 ? 3 : l) + 4);
            }
        }
        memset(y[b].hmask, 0, sizeof y[b].hmask);
        for (int e = 0; e < QK_K; e++)
            if (L[e] > 3) {
                y[b].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                L[e] = (int8_t)(L[e] - 4);
            }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *Lh = L + 128 * h;
                y[b].qs[32 * h + l] = (uint8_t)(Lh[l] | Lh[l + 32] << 2 | Lh[l + 64] << 4 | Lh[l + 96] << 6);
            }
    }
}

void ref_quantize_q5_K(const float *x, void *dst, size_t n) {
    block_q5_K *y = dst;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        uint8_t L[QK_K], Laux[32];
        float w[32], mins[8], scales[8], max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 8; j++) {
            float sum_x2 = 0.0f;
            for (int l = 0; l < 32; l++) sum_x2 += xb[32 * j + l] * xb[32 * j + l];
            const float av_x = sqrtf(sum_x2 / 32.0f);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xb[32 * j + l]);
            scales[j] = scale_min_search(32, 31, xb + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, false);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
        for (int j = 0; j < 8; j++) {
            uint8_t ls = (uint8_t)nearest(inv_scale * scales[j]), lm = (uint8_t)nearest(inv_min * mins[j]);
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
            if (j < 4) {
                y[b].scales[j] = ls;
                y[b].scales[j + 4] = lm;
            } else {
                y[b].scales[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
                y[b].scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
                y[b].scales[j] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        y[b].d = ord_f32_to_f16(max_scale / 63.0f);
        y[b].dmin = ord_f32_to_f16(max_min / 63.0f);
        int32_t sc[8], m[8];
        ord_q4_K_scales(y[b].scales, sc, m);
        for (int j = 0; j < 8; j++) {
            const float d = ord_f16_to_f32(y[b].d) * (float)sc[j];
            if (d == 0.0f) continue; /* the search's quants stay */
            const float dm = ord_f16_to_f32(y[b].dmin) * (float)m[j];
            for (int i = 0; i < 32; i++) {
                const int l = nearest((xb[32 * j + i] + dm) / d);
                L[32 * j + i] = (uint8_t)(l < 0 ? 0 : l > 31 ? 31 : l);
            }
        }
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const uint8_t lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y[b].qs[32 * c + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                y[b].qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
            }
    }
}

/* ggml's best_index_int8: the index of the value nearest x among the 16 sorted values (the lower on a tie). */
static int nearest_value(float x) {
    const int8_t *v = ord_iq4_values;
    if (x <= (float)v[0]) return 0;
    if (x >= (float)v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < (float)v[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - (float)v[hi - 1] < (float)v[hi] - x ? hi - 1 : hi;
}

/* ggml's quantize_row_iq4_nl_impl for one sub-block of 32 without importance weights (w = x²): the scale
 * d = max / values[0] (times -1 when ntry > 0), quants the nearest values, then the least-squares scale; ntry > 0
 * also tries the 2·ntry + 1 scales (values[0] + t) / max. L: the quants; returns the scale (0 for a zero block, L
 * then untouched). */
static float iq4_block(const float *xb, int ntry, uint8_t *L) {
    const int8_t *v = ord_iq4_values;
    float w[32], amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) w[j] = xb[j] * xb[j];
    for (int j = 0; j < 32; j++)
        if (fabsf(xb[j]) > amax) {
            amax = fabsf(xb[j]);
            max = xb[j];
        }
    if (amax < 1e-15f) return 0.0f;
    float d = ntry > 0 ? -max / (float)v[0] : max / (float)v[0], id = 1.0f / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const int l = nearest_value(id * xb[j]);
        L[j] = (uint8_t)l;
        const float q = (float)v[l];
        sumqx += w[j] * q * xb[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -ntry; t <= ntry; t++) {
        id = (float)(t + v[0]) / max;
        sumqx = sumq2 = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float q = (float)v[nearest_value(id * xb[j])];
            sumqx += w[j] * q * xb[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* ggml's quantize_row_iq4_nl_ref (ntry -1: no scale search). An all-zero block keeps the previous block's quants
 * with d = 0, as ggml's does (it reuses its buffer; the row's first block starts from zeros here). */
void ref_quantize_iq4_nl(const float *x, void *dst, size_t n) {
    block_iq4_nl *y = dst;
    uint8_t L[QK] = {0};
    for (size_t b = 0; b < n / QK; b++) {
        y[b].d = ord_f32_to_f16(iq4_block(x + b * QK, -1, L));
        for (int j = 0; j < QK / 2; j++) y[b].qs[j] = (uint8_t)(L[j] | L[16 + j] << 4);
    }
}

/* floor(log2f(a)) for a finite a > 0 as ggml gets it from glibc's log2f, which rounds correctly at these points;
 * computed from a's bits, as another libm's log2f may round otherwise. With a = m · 2^E, m in [1, 2) and
 * j = (2 - m) · 2^23: log2(a) = E + 1 - δ, δ = -log2(1 - j · 2^-24) ≈ j · 2^-24 / ln 2, and log2f returns E + 1 itself
 * when δ is below half the spacing of the floats between, 2^(q - 24) for floats in [2^q, 2^(q + 1)): when
 * j <= 2^q · ln 2 (none for q < 1; no 2^q · ln 2 lies within 0.09 of an integer, so this first-order bound decides).
 * E + 1 lies in -148..128, so q <= 7. Equal to glibc's on every positive float (tests/data/README.md). */
static int floor_log2f(float a) {
    static const uint32_t up_to[8] = {0, 1, 2, 5, 11, 22, 44, 88}; /* floor(2^q · ln 2) */
    const uint32_t u = ord_f32_bits(a);
    int e = (int)(u >> 23) - 127;
    uint32_t m = u & 0x007fffff;
    if (e == -127) /* subnormal: normalized, its leading bit to bit 23 */
        for (e = -126; !(m & 0x00800000); e--) m <<= 1;
    const uint32_t j = 0x01000000u - (m | 0x00800000);
    const int t = e + 1;
    int q = 0;
    if (t > 1) /* the floats just below t */
        while (t > 2 << q) q++;
    else if (t < 0) /* just above |t| (the value is negative) */
        while (2 << q <= -t) q++;
    else
        return e; /* t 0 or 1: no float between is coarse enough */
    return j <= up_to[q] ? t : e;
}

/* ggml's best_index_mxfp4: the first of the 16 values v · d nearest x (an exact product: d is a power of two). */
static int mxfp4_index(float x, float d) {
    int best = 0;
    float best_err = fabsf((float)ord_mxfp4_values[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)ord_mxfp4_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* ggml's quantize_row_mxfp4_ref: e = floor(log2f(amax)) - 2 + 127, so that amax / d lies in [8, 16) (just below 8
 * where log2f rounds up; the doubled grid's top, 12, saturates the largest), then each element's nearest value. ggml's
 * float → uint8_t conversion is x86's cvttss2si and a byte's truncation: below 0 (amax under about 2^-125) e wraps
 * modulo 256, and an infinite amax gives 0 (the conversion's INT32_MIN). A NaN never becomes amax ("amax < |x|" is
 * false); a block of zeros gets e 0. */
void ref_quantize_mxfp4(const float *x, void *dst, size_t n) {
    block_mxfp4 *y = dst;
    for (size_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
        const uint8_t e = amax > 0.0f && isfinite(amax) ? (uint8_t)(floor_log2f(amax) - 2 + 127) : 0;
        const float d = ord_e8m0_half(e);
        y[b].e = e;
        for (int j = 0; j < QK / 2; j++)
            y[b].qs[j] = (uint8_t)(mxfp4_index(xb[j], d) | mxfp4_index(xb[j + QK / 2], d) << 4);
    }
}

/* ggml's quantize_row_iq4_xs_ref: sub-block scales by iq4_block (ntry 7), then one f16 d = -max_scale / 32 with
 * 6-bit sub-block scales, and the quants again against each sub-block's quantized scale. */
void ref_quantize_iq4_xs(const float *x, void *dst, size_t n) {
    block_iq4_xs *y = dst;
    uint8_t L[QK_K] = {0};
    for (size_t b = 0; b < n / QK_K; b++) {
        const float *xs = x + b * QK_K;
        float scales[8], max_scale = 0.0f, amax_scale = 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            scales[ib] = iq4_block(xs + 32 * ib, 7, L + 32 * ib);
            if (fabsf(scales[ib]) > amax_scale) {
                amax_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ord_f32_to_f16(d);
        y[b].scales_h = 0;
        for (int ib = 0; ib < 8; ib++) {
            int l = nearest(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l, idl = dl != 0.0f ? 1.0f / dl : 0.0f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)nearest_value(idl * xs[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0)
                y[b].scales_l[ib / 2] = (uint8_t)(l & 15);
            else
                y[b].scales_l[ib / 2] |= (uint8_t)((l & 15) << 4);
            y[b].scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
        for (int ib = 0; ib < 8; ib++)
            for (int j = 0; j < 16; j++) y[b].qs[16 * ib + j] = (uint8_t)(L[32 * ib + j] | L[32 * ib + 16 + j] << 4);
    }
}
