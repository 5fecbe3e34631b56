/* order.h — the pieces of the fixed orders that every variant shares: lane layouts, combine trees, the scalar steps.
 *
 * WHY: a variant's tails (the last elements that fill no register) and the reference must run the very same
 * operations, so they are written once, here, as static inline functions compiled into each variant with its own
 * flags. Under -ffp-contract=off (every kernel file) the compiler fuses nothing on its own; each fmaf is written.
 *
 * INVARIANT: nothing here depends on the instruction set: the same IEEE operations in the same order on any build.
 */
#ifndef FKV_KERNELS_ORDER_H
#define FKV_KERNELS_ORDER_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "types.h"

#define DOT_LANES 32  /* f32 dot: element i goes to lane i % 32 */
#define BLOCK_LANES 8 /* quantized dot: block b goes to lane b % 8 */

/* The bytes of one block of a quantized K/V row (kern_score_tile_q, kern_weigh_tile_q: Q8_0 or Q4_0). */
static inline size_t ord_kv_block_bytes(ggml_type type) {
    return type == GGML_TYPE_Q8_0 ? sizeof(block_q8_0) : sizeof(block_q4_0);
}

/* A block's value weights (attn.h: w_j = a_j · d_j, W = max |w_j|; the block adds nothing unless 2^-120 <= W <=
 * FLT_MAX) may be formed ORD_WEIGHT_SCALE times larger, w_j · 2^32 = a_j · (d_j · 2^32), to keep the multiplies off
 * subnormal values: peaked attention makes many w_j subnormal, and each multiply with a subnormal result or operand
 * takes a microcode assist of ~100 cycles (Sapphire Rapids; such attention ran 3-5x slower for it). The scaling is
 * exact for normal w_j, so W, 127 / W and w_j · (127 / W) come out as defined, and a subnormal w_j quantizes to 0
 * either way (|w_j · 127 / W| < 0.5) once W >= 2^-118. So, by the scaled maximum M = W · 2^32: ORD_WEIGHTS_SCALED
 * when M is in [2^-86, 2^120] (the scaled steps give the defined bits; W = M · 2^-32 exactly), ORD_WEIGHTS_DEAD below
 * 2^-88 (W < 2^-120, subnormal W included), else ORD_WEIGHTS_EXACT: take the unscaled steps. */
#define ORD_WEIGHT_SCALE 0x1p32f
#define ORD_WEIGHT_UNSCALE 0x1p-32f
#define ORD_WEIGHT_SCALED_MIN 0x1p-86f
#define ORD_WEIGHT_SCALED_MAX 0x1p120f
#define ORD_WEIGHT_DEAD_BELOW 0x1p-88f
typedef enum { ORD_WEIGHTS_SCALED, ORD_WEIGHTS_DEAD, ORD_WEIGHTS_EXACT } ord_weights;

/* Whether a block whose largest weight is W adds anything (attn.h's values). */
static inline bool ord_weights_live(float W) { return W >= 0x1p-120f && W <= FLT_MAX; }

static inline ord_weights ord_weights_scaled(float m) {
    if (m >= ORD_WEIGHT_SCALED_MIN && m <= ORD_WEIGHT_SCALED_MAX) return ORD_WEIGHTS_SCALED;
    return m >= ORD_WEIGHT_DEAD_BELOW ? ORD_WEIGHTS_EXACT : ORD_WEIGHTS_DEAD;
}

/* Groups of BLOCK_LANES blocks in a row of nb blocks, the last one partial when nb is not a multiple. */
static inline size_t groups_of(size_t nb) { return (nb + BLOCK_LANES - 1) / BLOCK_LANES; }

/* Blocks in group g of a row of nb blocks. */
static inline int blocks_in_group(size_t nb, size_t g) {
    return nb - g * BLOCK_LANES < BLOCK_LANES ? (int)(nb - g * BLOCK_LANES) : BLOCK_LANES;
}

/* The row's last group holds at most half a group's blocks (dim 896: 3 groups and 4 blocks): the half layout. */
static inline bool half_last_group(size_t nb) { return nb % BLOCK_LANES && nb % BLOCK_LANES <= BLOCK_LANES / 2; }

static inline uint32_t ord_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float ord_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f16 → f32, exact; a NaN comes out quiet with its payload's top bits kept, as F16C's conversion does. */
static inline float ord_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return ord_f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp != 0) return ord_f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return ord_f32_from_bits(sign);
    uint32_t shift = 0; /* subnormal f16: normalize, every one is a normal f32 */
    while (!(mant & 0x400)) {
        mant <<= 1;
        shift++;
    }
    return ord_f32_from_bits(sign | ((113 - shift) << 23) | ((mant & 0x3ff) << 13));
}

/* f32 → f16, round to nearest even, as F16C's conversion (NaN quiet, payload's top bits kept). */
static inline uint16_t ord_f32_to_f16(float f) {
    uint32_t u = ord_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00); /* >= 65536 (and inf): inf */
    if (a >= 0x38800000u) { /* normal f16 range; a carry out of the mantissa correctly bumps the exponent */
        uint32_t h = (a >> 13) - (112u << 10);
        uint32_t rem = a & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25: rounds to zero (2^-25 itself ties to even 0) */
    uint32_t mant = (a & 0x7fffff) | 0x800000; /* subnormal f16: value in units of 2^-24 is mant >> shift */
    uint32_t shift = 126 - (a >> 23);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static inline float ord_bf16_to_f32(uint16_t h) { return ord_f32_from_bits((uint32_t)h << 16); }

/* f32 → bf16, round to nearest even; a NaN stays a quiet NaN. */
static inline uint16_t ord_f32_to_bf16(float f) {
    uint32_t u = ord_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* keep it a quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)): how 8 lanes meet (four __m256 halves and a pairwise sum give it). */
static inline float ord_combine8(const float l[BLOCK_LANES]) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* v[j] = (lane[j] + lane[8+j]) + (lane[16+j] + lane[24+j]), then ord_combine8(v). */
static inline float ord_combine32(const float lane[DOT_LANES]) {
    float v[8];
    for (int j = 0; j < 8; j++) v[j] = (lane[j] + lane[8 + j]) + (lane[16 + j] + lane[24 + j]);
    return ord_combine8(v);
}

/* The softmax max: "b > a" picks, so a NaN never wins and ties keep the earlier element. */
static inline float ord_max_pick(float a, float b) { return b > a ? b : a; }

static inline float ord_combine8_max(const float l[BLOCK_LANES]) {
    return ord_max_pick(ord_max_pick(ord_max_pick(l[0], l[4]), ord_max_pick(l[2], l[6])),
                        ord_max_pick(ord_max_pick(l[1], l[5]), ord_max_pick(l[3], l[7])));
}

/* kern_exp's constants: the split of ln 2 (hi has 9 significant bits, so k·hi is exact), 1/i!. */
#define EXP_LOG2E 1.44269504f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_MAX 88.0f
#define EXP_MIN -87.33654f
static const float ord_exp_coef[7] = {1.0f, 1.0f, 0.5f, 0.166666672f, 0.0416666679f, 0.00833333377f, 0.00138888892f};

/* kern_exp's sequence (attn.h) for one element. */
static inline float ord_exp1(float x) {
    if (x != x) return x + 0.0f; /* quiet NaN, as the SIMD paths' arithmetic leaves it */
    if (x > EXP_MAX) return INFINITY;
    if (x < EXP_MIN) return 0.0f;
    const float k = nearbyintf(x * EXP_LOG2E);
    float r = fmaf(k, -EXP_LN2_HI, x);
    r = fmaf(k, -EXP_LN2_LO, r);
    float p = ord_exp_coef[6];
    for (int i = 5; i >= 0; i--) p = fmaf(p, r, ord_exp_coef[i]);
    return p * ord_f32_from_bits((uint32_t)((int32_t)k + 127) << 23);
}

/* The 6-bit scales and mins of the 8 sub-blocks of a Q4_K block as 8 bytes each (sub-block j in byte j, little
 * endian): the 12 bytes taken as three 32-bit words a, b, c, four sub-blocks per operation — sc_j = a_j & 63,
 * m_j = b_j & 63 and, for j + 4, the low (sc) or high (m) nibble of c_j with bits 6-7 of a_j (sc) or b_j (m) on top. */
static inline void ord_q4_K_scale_words(const uint8_t s[12], uint64_t *sc, uint64_t *m) {
    uint32_t a, b, c;
    memcpy(&a, s, 4);
    memcpy(&b, s + 4, 4);
    memcpy(&c, s + 8, 4);
    *sc = (a & 0x3f3f3f3fu) | (uint64_t)((c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u)) << 32;
    *m = (b & 0x3f3f3f3fu) | (uint64_t)(((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)) << 32;
}

static inline void ord_q4_K_scales(const uint8_t s[12], int32_t sc[8], int32_t m[8]) {
    uint64_t scw, mw;
    ord_q4_K_scale_words(s, &scw, &mw);
    for (int j = 0; j < 8; j++) {
        sc[j] = (int32_t)(scw >> 8 * j & 255);
        m[j] = (int32_t)(mw >> 8 * j & 255);
    }
}

/* A Q4_K or Q5_K super-block's values from d, dmin, its 12 scale bytes and its unpacked quants q (types.h):
 * x = (d · sc_j) · q - dmin · m_j in sub-block j. */
static inline void ord_dequantize_sc_min(float d, float dmin, const uint8_t scales[12], const uint8_t q[256], float *dst) {
    int32_t sc[8], m[8];
    ord_q4_K_scales(scales, sc, m);
    for (int j = 0; j < 8; j++) {
        const float dj = d * (float)sc[j], mj = dmin * (float)m[j];
        for (int i = 0; i < 32; i++) dst[32 * j + i] = dj * (float)q[32 * j + i] - mj;
    }
}

/* The 256 quants of a Q4_K block (0..15), in element order. */
static inline void ord_q4_K_unpack(const block_q4_K *w, uint8_t q[QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = w->qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = w->qs[32 * c + l] >> 4;
        }
}

/* The 256 quants of a Q6_K block, offset removed (-32..31), in element order. */
static inline void ord_q6_K_unpack(const block_q6_K *w, int8_t q[QK_K]) {
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

/* ---- the types of ggml's later layouts (types.h): their quants in element order, shared by the reference and the
 * variants' tails ---- */

/* IQ4_NL's and IQ4_XS's 16 non-linear values (ggml's kvalues_iq4nl). */
static const int8_t ord_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* MXFP4's 16 values: E2M1's, doubled so that they are integers (ggml's kvalues_mxfp4); the block scale is halved. */
static const int8_t ord_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* An MXFP4 block's scale from its E8M0 exponent e: 2^(e - 128), exactly (ggml's GGML_E8M0_TO_FP32_HALF), built from its
 * bits: a normal float of exponent field e - 1 from e = 2 on, the subnormals 2^-128 and 2^-127 below. */
static inline float ord_e8m0_half(uint8_t e) {
    return ord_f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* The 32 nibbles of a Q4_0-style block (Q4_1, IQ4_NL's and MXFP4's indices) in element order: qs[j]'s low nibble is
 * element j, its high nibble element j + 16. */
static inline void ord_q4_unpack(const uint8_t qs[QK / 2], uint8_t q[QK]) {
    for (int j = 0; j < QK / 2; j++) {
        q[j] = qs[j] & 15;
        q[j + QK / 2] = qs[j] >> 4;
    }
}

/* The 32 quants of a Q5_0 / Q5_1 block (0..31): the nibbles as Q4_0's, bit 4 of element e is bit e of qh. */
static inline void ord_q5_unpack(const uint8_t qh4[4], const uint8_t qs[QK / 2], uint8_t q[QK]) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    ord_q4_unpack(qs, q);
    for (int e = 0; e < QK; e++) q[e] = (uint8_t)(q[e] | ((qh >> e) & 1) << 4);
}

/* Block b of a Q4_1 row or (fifth) a Q5_1 row, whose d and m lie alike: its 32 quants in element order, d and m. */
static inline void ord_min_block(const void *row, size_t b, bool fifth, uint8_t q[QK], float *d, float *m) {
    const block_q4_1 *w4 = (const block_q4_1 *)row + b;
    const block_q5_1 *w5 = (const block_q5_1 *)row + b;
    if (fifth)
        ord_q5_unpack(w5->qh, w5->qs, q);
    else
        ord_q4_unpack(w4->qs, q);
    *d = ord_f16_to_f32(fifth ? w5->d : w4->d);
    *m = ord_f16_to_f32(fifth ? w5->m : w4->m);
}

/* The 256 quants of a Q5_K block (0..31), in element order; its scales and mins are Q4_K's (ord_q4_K_scales). */
static inline void ord_q5_K_unpack(const block_q5_K *w, uint8_t q[QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (uint8_t)((w->qs[32 * c + l] & 15) | ((w->qh[l] >> (2 * c)) & 1) << 4);
            q[64 * c + 32 + l] = (uint8_t)((w->qs[32 * c + l] >> 4) | ((w->qh[l] >> (2 * c + 1)) & 1) << 4);
        }
}

/* The 16 signed 6-bit scales of a Q3_K block (-32..31): the low nibble of byte j (j < 8) or the high nibble of byte
 * j - 8, and bits 2(j/4)..2(j/4)+1 of byte 8 + j % 4 on top, less 32. */
static inline void ord_q3_K_scales(const uint8_t s[12], int32_t sc[16]) {
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
        const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (lo | hi << 4) - 32;
    }
}

/* The 256 quants of a Q3_K block (-4..3), in element order: element 128h + 32j + l holds bits 2j..2j+1 of
 * qs[32h + l], less 4 unless bit 4h + j of hmask[l] is set. */
static inline void ord_q3_K_unpack(const block_q3_K *w, int8_t q[QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * j + l] = (int8_t)(((w->qs[32 * h + l] >> (2 * j)) & 3) -
                                                   ((w->hmask[l] >> (4 * h + j)) & 1 ? 0 : 4));
}

/* The 256 quants of a Q2_K block (0..3): element 128h + 32j + l holds bits 2j..2j+1 of qs[32h + l]. */
static inline void ord_q2_K_unpack(const block_q2_K *w, uint8_t q[QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * j + l] = (uint8_t)((w->qs[32 * h + l] >> (2 * j)) & 3);
}

/* Sub-block ib's scale of an IQ4_XS block (-32..31): 4 low bits from scales_l, 2 high from scales_h, less 32. */
static inline int32_t ord_iq4_xs_scale(const block_iq4_xs *w, int ib) {
    return (int32_t)((((w->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | ((w->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

#endif
