/* ref/dot.c — the reference dots of a weight row with an activation row, every type (traits.h's dot, the table's dot
 * and dot_f32): the lane layouts of matmul.h spelled out with arrays of lanes and one fmaf per multiply-add. Every
 * variant's dots and matrix products give these bits for every output.
 *
 * F32, F16 and BF16 rows against an f32 row: element i in lane i % 32. The quantized types against a Q8_0-quantized
 * row: blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) in lane b % 8; super-blocks (Q2_K .. Q6_K, IQ4_XS)
 * whose sub-block k meets activation block 8s + k, lane k. Exact integer sums per 32 elements, then one rounding chain
 * per block.
 */
#include "ref.h"

#include "order.h"
#include "traits.h"

/* Element i of an F32, F16 or BF16 row, widened to f32 (exactly). */
static float widened(ggml_type type, const void *w, size_t i) {
    switch (type) {
    case GGML_TYPE_F16:
        return ord_f16_to_f32(((const uint16_t *)w)[i]);
    case GGML_TYPE_BF16:
        return ord_bf16_to_f32(((const uint16_t *)w)[i]);
    default:
        return ((const float *)w)[i];
    }
}

/* An F32, F16 or BF16 row · an f32 row: element i in lane i % 32. */
static float dot_floats(ggml_type type, const void *w, const float *b, size_t n) {
    float lane[DOT_LANES] = {0};
    for (size_t i = 0; i < n; i++) lane[i % DOT_LANES] = fmaf(widened(type, w, i), b[i], lane[i % DOT_LANES]);
    return ord_combine32(lane);
}

float ref_dot_f32(const float *a, const float *b, size_t n) { return dot_floats(GGML_TYPE_F32, a, b, n); }

/* Block b of a Q8_0 or Q4_0 row: its f16 scale and its exact integer sum against activation block x. */
static uint16_t block_scale(ggml_type type, const void *w, size_t b) {
    return type == GGML_TYPE_Q4_0 ? ((const block_q4_0 *)w)[b].d : ((const block_q8_0 *)w)[b].d;
}

static int32_t block_sum(ggml_type type, const void *w, size_t b, const block_q8_act *x) {
    int32_t s = 0;
    if (type == GGML_TYPE_Q4_0) {
        const uint8_t *qs = ((const block_q4_0 *)w)[b].qs;
        for (int j = 0; j < QK / 2; j++) s += ((qs[j] & 15) - 8) * x->qs[j] + ((qs[j] >> 4) - 8) * x->qs[j + QK / 2];
        return s;
    }
    const int8_t *qs = ((const block_q8_0 *)w)[b].qs;
    for (int j = 0; j < QK; j++) s += (int32_t)qs[j] * x->qs[j];
    return s;
}

/* A Q8_0 or Q4_0 row · an activation row: block b in lane b % 8. */
static float dot_blocks(ggml_type type, const void *w, const block_q8_act *x, size_t nb) {
    float lane[BLOCK_LANES] = {0};
    for (size_t b = 0; b < nb; b++)
        lane[b % BLOCK_LANES] = fmaf(ord_f16_to_f32(block_scale(type, w, b)) * x[b].d,
                                     (float)block_sum(type, w, b, &x[b]), lane[b % BLOCK_LANES]);
    return ord_combine8(lane);
}

/* The traits table's dots (traits.h): one signature for every type, the unused activation side ignored. */
float ref_dot_w_f32(const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    (void)xq;
    return dot_floats(GGML_TYPE_F32, w, xf, n);
}

float ref_dot_w_f16(const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    (void)xq;
    return dot_floats(GGML_TYPE_F16, w, xf, n);
}

float ref_dot_w_bf16(const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    (void)xq;
    return dot_floats(GGML_TYPE_BF16, w, xf, n);
}

float ref_dot_w_q8_0(const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    (void)xf;
    return dot_blocks(GGML_TYPE_Q8_0, w, xq, n / QK);
}

float ref_dot_w_q4_0(const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    (void)xf;
    return dot_blocks(GGML_TYPE_Q4_0, w, xq, n / QK);
}

/* Super-block sb, sub-block k meets activation block 8*sb + k, lane k (matmul.h). */
float ref_dot_w_q4_K(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    const block_q4_K *w = wv;
    const size_t nsb = n / QK_K;
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < nsb; sb++) {
        const float d = ord_f16_to_f32(w[sb].d), dmin = ord_f16_to_f32(w[sb].dmin);
        int32_t sc[8], m[8];
        uint8_t q[QK_K];
        ord_q4_K_scales(w[sb].scales, sc, m);
        ord_q4_K_unpack(&w[sb], q);
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
    return ord_combine8(lane);
}

float ref_dot_w_q6_K(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    const block_q6_K *w = wv;
    const size_t nsb = n / QK_K;
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < nsb; sb++) {
        const float d = ord_f16_to_f32(w[sb].d);
        int8_t q[QK_K];
        ord_q6_K_unpack(&w[sb], q);
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
    return ord_combine8(lane);
}


/* ---- Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS ------------------------------------------- */

/* Σ q[i] · x[i] and Σ x[i] over one activation block (exact). */
static int32_t sum_qx(const uint8_t *q, const int8_t *x, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += q[i] * x[i];
    return s;
}

static int32_t sum_sqx(const int8_t *q, const int8_t *x, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += q[i] * x[i];
    return s;
}

static int32_t sum_x(const int8_t *x, int n) {
    int32_t t = 0;
    for (int i = 0; i < n; i++) t += x[i];
    return t;
}

/* Q4_1 / Q5_1: x = d · q + m, so block b gives d_x · (d · s_b + m · t_b). */
static float dot_scale_min(const uint8_t *q, float d, float m, const block_q8_act *xb, float lane) {
    return fmaf(xb->d, fmaf(d, (float)sum_qx(q, xb->qs, QK), m * (float)sum_x(xb->qs, QK)), lane);
}

/* Q4_1 and Q5_1 (fifth). */
static float dot_min_blocks(const void *wv, const block_q8_act *x, size_t n, bool fifth) {
    float lane[BLOCK_LANES] = {0};
    for (size_t b = 0; b < n / QK; b++) {
        uint8_t q[QK];
        float d, m;
        ord_min_block(wv, b, fifth, q, &d, &m);
        lane[b % BLOCK_LANES] = dot_scale_min(q, d, m, &x[b], lane[b % BLOCK_LANES]);
    }
    return ord_combine8(lane);
}

float ref_dot_w_q4_1(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    return dot_min_blocks(wv, x, n, false);
}

float ref_dot_w_q5_1(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    return dot_min_blocks(wv, x, n, true);
}


/* Q5_0, IQ4_NL and MXFP4: signed quants, one scale: block b gives (d · d_x) · s_b, as Q4_0. */
static float dot_signed_blocks(ggml_type type, const void *wv, const block_q8_act *x, size_t n) {
    float lane[BLOCK_LANES] = {0};
    for (size_t b = 0; b < n / QK; b++) {
        const block_q5_0 *w5 = (const block_q5_0 *)wv + b;
        const block_iq4_nl *wn = (const block_iq4_nl *)wv + b;
        const block_mxfp4 *wm = (const block_mxfp4 *)wv + b;
        uint8_t u[QK];
        int8_t q[QK];
        float d;
        if (type == GGML_TYPE_IQ4_NL) {
            ord_q4_unpack(wn->qs, u);
            for (int j = 0; j < QK; j++) q[j] = ord_iq4_values[u[j]];
            d = ord_f16_to_f32(wn->d);
        } else if (type == GGML_TYPE_MXFP4) {
            ord_q4_unpack(wm->qs, u);
            for (int j = 0; j < QK; j++) q[j] = ord_mxfp4_values[u[j]];
            d = ord_e8m0_half(wm->e);
        } else {
            ord_q5_unpack(w5->qh, w5->qs, u);
            for (int j = 0; j < QK; j++) q[j] = (int8_t)(u[j] - 16);
            d = ord_f16_to_f32(w5->d);
        }
        lane[b % BLOCK_LANES] = fmaf(d * x[b].d, (float)sum_sqx(q, x[b].qs, QK), lane[b % BLOCK_LANES]);
    }
    return ord_combine8(lane);
}

float ref_dot_w_q5_0(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    return dot_signed_blocks(GGML_TYPE_Q5_0, wv, x, n);
}

float ref_dot_w_iq4_nl(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    return dot_signed_blocks(GGML_TYPE_IQ4_NL, wv, x, n);
}

float ref_dot_w_mxfp4(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    return dot_signed_blocks(GGML_TYPE_MXFP4, wv, x, n);
}

/* Q5_K: Q4_K's order with quants 0..31. */
float ref_dot_w_q5_K(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    const block_q5_K *w = wv;
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < n / QK_K; sb++) {
        const float d = ord_f16_to_f32(w[sb].d), dmin = ord_f16_to_f32(w[sb].dmin);
        int32_t sc[8], m[8];
        uint8_t q[QK_K];
        ord_q4_K_scales(w[sb].scales, sc, m);
        ord_q5_K_unpack(&w[sb], q);
        for (int k = 0; k < BLOCK_LANES; k++) {
            const block_q8_act *xb = &x[sb * BLOCK_LANES + k];
            const int32_t s = sum_qx(q + QK * k, xb->qs, QK), t = sum_x(xb->qs, QK);
            const float dm = -dmin * (float)m[k];
            lane[k] = fmaf(xb->d, fmaf(d, (float)(sc[k] * s), dm * (float)t), lane[k]);
        }
    }
    return ord_combine8(lane);
}

/* Q3_K: Q6_K's order (two sub-blocks of 16 per activation block, their scales inside the exact sum). */
float ref_dot_w_q3_K(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    const block_q3_K *w = wv;
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < n / QK_K; sb++) {
        const float d = ord_f16_to_f32(w[sb].d);
        int32_t sc[16];
        int8_t q[QK_K];
        ord_q3_K_scales(w[sb].scales, sc);
        ord_q3_K_unpack(&w[sb], q);
        for (int k = 0; k < BLOCK_LANES; k++) {
            const block_q8_act *xb = &x[sb * BLOCK_LANES + k];
            const int32_t s = sc[2 * k] * sum_sqx(q + QK * k, xb->qs, QK / 2) +
                              sc[2 * k + 1] * sum_sqx(q + QK * k + QK / 2, xb->qs + QK / 2, QK / 2);
            lane[k] = fmaf(d * xb->d, (float)s, lane[k]);
        }
    }
    return ord_combine8(lane);
}

/* Q2_K: two sub-blocks of 16 per activation block, each with a scale and a min:
 * lane k = fmaf(d_x, fmaf(d, s_b, -dmin · t_b), lane), s_b and t_b exact. */
float ref_dot_w_q2_K(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    const block_q2_K *w = wv;
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < n / QK_K; sb++) {
        const float d = ord_f16_to_f32(w[sb].d), dmin = ord_f16_to_f32(w[sb].dmin);
        uint8_t q[QK_K];
        ord_q2_K_unpack(&w[sb], q);
        for (int k = 0; k < BLOCK_LANES; k++) {
            const block_q8_act *xb = &x[sb * BLOCK_LANES + k];
            const uint8_t s0 = w[sb].scales[2 * k], s1 = w[sb].scales[2 * k + 1];
            const int32_t s = (s0 & 15) * sum_qx(q + QK * k, xb->qs, QK / 2) +
                              (s1 & 15) * sum_qx(q + QK * k + QK / 2, xb->qs + QK / 2, QK / 2);
            const int32_t t = (s0 >> 4) * sum_x(xb->qs, QK / 2) + (s1 >> 4) * sum_x(xb->qs + QK / 2, QK / 2);
            lane[k] = fmaf(xb->d, fmaf(d, (float)s, -dmin * (float)t), lane[k]);
        }
    }
    return ord_combine8(lane);
}

/* IQ4_XS: sub-block k's signed scale inside the exact sum, then Q6_K's step. */
float ref_dot_w_iq4_xs(const void *wv, const float *xf, const block_q8_act *x, size_t n) {
    (void)xf;
    const block_iq4_xs *w = wv;
    float lane[BLOCK_LANES] = {0};
    for (size_t sb = 0; sb < n / QK_K; sb++) {
        const float d = ord_f16_to_f32(w[sb].d);
        for (int k = 0; k < BLOCK_LANES; k++) {
            const block_q8_act *xb = &x[sb * BLOCK_LANES + k];
            const uint8_t *qs = w[sb].qs + 16 * k;
            int8_t q[QK];
            for (int j = 0; j < QK / 2; j++) {
                q[j] = ord_iq4_values[qs[j] & 15];
                q[j + QK / 2] = ord_iq4_values[qs[j] >> 4];
            }
            const int32_t s = ord_iq4_xs_scale(&w[sb], k) * sum_sqx(q, xb->qs, QK);
            lane[k] = fmaf(d * xb->d, (float)s, lane[k]);
        }
    }
    return ord_combine8(lane);
}

float ref_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    const kern_traits *t = kern_type_traits(type);
    return t ? t->dot(w, xf, xq, n) : NAN; /* the model loader refuses other types by name: a slip shows */
}
