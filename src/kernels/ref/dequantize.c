/* ref/dequantize.c — the reference dequantization of every weight type (traits.h's dequantize): what a block's bits
 * mean (types.h spells out each layout). ggml's later types follow ggml's dequantize_row_* expression for expression
 * (bench/typecheck: bit for bit).
 */
#include "ref.h"

#include "order.h"

void ref_dequantize_f32(const void *src, float *dst, size_t n) { memcpy(dst, src, n * sizeof(float)); }

void ref_dequantize_f16(const void *src, float *dst, size_t n) {
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++) dst[i] = ord_f16_to_f32(h[i]);
}

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

/* Q4_1 and Q5_1 (fifth): x = q · d + m. */
static void dequantize_min_blocks(const void *src, float *dst, size_t n, bool fifth) {
    for (size_t b = 0; b < n / QK; b++) {
        uint8_t q[QK];
        float d, m;
        ord_min_block(src, b, fifth, q, &d, &m);
        for (int j = 0; j < QK; j++) dst[b * QK + j] = (float)q[j] * d + m;
    }
}

void ref_dequantize_q4_1(const void *src, float *dst, size_t n) { dequantize_min_blocks(src, dst, n, false); }

void ref_dequantize_q5_1(const void *src, float *dst, size_t n) { dequantize_min_blocks(src, dst, n, true); }

void ref_dequantize_q5_0(const void *src, float *dst, size_t n) {
    const block_q5_0 *blk = src;
    for (size_t b = 0; b < n / QK; b++) {
        const float d = ord_f16_to_f32(blk[b].d);
        uint8_t q[QK];
        ord_q5_unpack(blk[b].qh, blk[b].qs, q);
        for (int j = 0; j < QK; j++) dst[b * QK + j] = (float)(q[j] - 16) * d;
    }
}


void ref_dequantize_iq4_nl(const void *src, float *dst, size_t n) {
    const block_iq4_nl *blk = src;
    for (size_t b = 0; b < n / QK; b++) {
        const float d = ord_f16_to_f32(blk[b].d);
        uint8_t q[QK];
        ord_q4_unpack(blk[b].qs, q);
        for (int j = 0; j < QK; j++) dst[b * QK + j] = d * (float)ord_iq4_values[q[j]];
    }
}

/* ggml's dequantize_row_mxfp4: x = v · d, the small integer times a power of two: exact, subnormal results included,
 * or infinite for the largest values of e >= 253. */
void ref_dequantize_mxfp4(const void *src, float *dst, size_t n) {
    const block_mxfp4 *blk = src;
    for (size_t b = 0; b < n / QK; b++) {
        const float d = ord_e8m0_half(blk[b].e);
        uint8_t q[QK];
        ord_q4_unpack(blk[b].qs, q);
        for (int j = 0; j < QK; j++) dst[b * QK + j] = (float)ord_mxfp4_values[q[j]] * d;
    }
}


void ref_dequantize_q2_K(const void *src, float *dst, size_t n) {
    const block_q2_K *blk = src;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float d = ord_f16_to_f32(blk[b].d), dmin = ord_f16_to_f32(blk[b].dmin);
        uint8_t q[QK_K];
        ord_q2_K_unpack(&blk[b], q);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)(blk[b].scales[j] & 15), ml = dmin * (float)(blk[b].scales[j] >> 4);
            for (int i = 0; i < 16; i++) dst[b * QK_K + 16 * j + i] = dl * (float)q[16 * j + i] - ml;
        }
    }
}

void ref_dequantize_q3_K(const void *src, float *dst, size_t n) {
    const block_q3_K *blk = src;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float d = ord_f16_to_f32(blk[b].d);
        int32_t sc[16];
        int8_t q[QK_K];
        ord_q3_K_scales(blk[b].scales, sc);
        ord_q3_K_unpack(&blk[b], q);
        for (int j = 0; j < 16; j++) {
            const float dl = d * (float)sc[j];
            for (int i = 0; i < 16; i++) dst[b * QK_K + 16 * j + i] = dl * (float)q[16 * j + i];
        }
    }
}


/* Q4_K and Q5_K (fifth: its fifth bits in qh), whose d, dmin and scales are alike: x = (d · sc_j) · q - dmin · m_j. */
static void dequantize_sc_min_blocks(const void *src, float *dst, size_t n, bool fifth) {
    for (size_t b = 0; b < n / QK_K; b++) {
        const block_q4_K *w4 = (const block_q4_K *)src + b;
        const block_q5_K *w5 = (const block_q5_K *)src + b;
        uint8_t q[QK_K];
        if (fifth)
            ord_q5_K_unpack(w5, q);
        else
            ord_q4_K_unpack(w4, q);
        ord_dequantize_sc_min(ord_f16_to_f32(fifth ? w5->d : w4->d), ord_f16_to_f32(fifth ? w5->dmin : w4->dmin),
                              fifth ? w5->scales : w4->scales, q, dst + b * QK_K);
    }
}

void ref_dequantize_q4_K(const void *src, float *dst, size_t n) { dequantize_sc_min_blocks(src, dst, n, false); }

void ref_dequantize_q5_K(const void *src, float *dst, size_t n) { dequantize_sc_min_blocks(src, dst, n, true); }

void ref_dequantize_q6_K(const void *src, float *dst, size_t n) {
    const block_q6_K *blk = src;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float d = ord_f16_to_f32(blk[b].d);
        int8_t q[QK_K];
        ord_q6_K_unpack(&blk[b], q);
        for (int e = 0; e < QK_K; e++) dst[b * QK_K + e] = d * (float)blk[b].scales[e / 16] * (float)q[e];
    }
}

void ref_dequantize_iq4_xs(const void *src, float *dst, size_t n) {
    const block_iq4_xs *blk = src;
    for (size_t b = 0; b < n / QK_K; b++) {
        const float d = ord_f16_to_f32(blk[b].d);
        for (int ib = 0; ib < 8; ib++) {
            const float dl = d * (float)ord_iq4_xs_scale(&blk[b], ib);
            const uint8_t *qs = blk[b].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[b * QK_K + 32 * ib + j] = dl * (float)ord_iq4_values[qs[j] & 15];
                dst[b * QK_K + 32 * ib + 16 + j] = dl * (float)ord_iq4_values[qs[j] >> 4];
            }
        }
    }
}
