/* ref/matmul.c — the reference dot products and matrix product: the lane layouts of quant.h spelled out with arrays of
 * lanes and one fmaf per multiply-add. Every variant's matmul gives these bits for every output.
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

/* Super-block sb, sub-block k meets activation block 8*sb + k, lane k (quant.h). */
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

float ref_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    const kern_traits *t = kern_type_traits(type);
    return t ? t->dot(w, xf, xq, n) : NAN; /* the model loader refuses other types by name: a slip shows */
}

void ref_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    (void)packed, (void)xp; /* the reference packs and prepares nothing */
    const bool q8 = kern_wants_q8(type);
    for (uint32_t o = 0; o < n_out; o++)
        for (uint32_t r = 0; r < n_rows; r++)
            y[r * ldy + o] = ref_dot(type, (const uint8_t *)w + o * w_row_bytes, q8 ? NULL : xf + r * n,
                                     q8 ? xq + r * (n / QK) : NULL, n);
}
