/* types.h — element type ids and the block layouts the kernels read, straight from GGUF files.
 *
 * WHY here: the kernels include nothing above them (kernels/), yet every layer above names these types; the ids are
 * ggml's, the layouts ggml's, each one's bits spelled out below.
 *
 * Weight blocks follow ggml's layouts exactly (they are read straight from GGUF files):
 *   block_q8_0 { f16 d; int8 qs[32]; }            x[i] = d * qs[i]
 *   block_q4_0 { f16 d; uint8 qs[16]; }           x[i] = d * ((qs[i] & 15) - 8),
 *                                                 x[i+16] = d * ((qs[i] >> 4) - 8), i in 0..15
 *   block_q4_K { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; }    256 elements, 8 sub-blocks of 32:
 *     sub-block j has 6-bit scale sc_j and min m_j: for j < 4, sc_j = scales[j] & 63, m_j = scales[j+4] & 63;
 *     for j >= 4, sc_j = (scales[j+4] & 15) | (scales[j-4] >> 6) << 4, m_j = (scales[j+4] >> 4) |
 *     (scales[j] >> 6) << 4. Element 64c + l (l < 32) is the low nibble of qs[32c + l] (sub-block 2c),
 *     element 64c + 32 + l its high nibble (sub-block 2c+1); x = (d * sc_j) * q - dmin * m_j.
 *   block_q6_K { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; }  256 elements, 16 sub-blocks of 16:
 *     in half h (elements 128h..), for l < 32: element +l is ql[64h+l] & 15 with bits 0-1 of qh[32h+l] as
 *     bits 4-5; +32+l: ql[64h+32+l] & 15, qh bits 2-3; +64+l: ql[64h+l] >> 4, qh bits 4-5; +96+l:
 *     ql[64h+32+l] >> 4, qh bits 6-7. x[e] = (d * scales[e / 16]) * (q - 32).
 *   The later ones (ggml-common.h; bench/typecheck checks every one against ggml's dequantization, bit for bit):
 *   block_q4_1 { f16 d; f16 m; uint8 qs[16]; }   q as Q4_0's nibbles, x = q * d + m
 *   block_q5_0 { f16 d; uint8 qh[4]; uint8 qs[16]; }   q = nibble (as Q4_0) | bit e of qh (little endian) << 4,
 *                                                 x[e] = (q - 16) * d
 *   block_q5_1 { f16 d; f16 m; uint8 qh[4]; uint8 qs[16]; }   q as Q5_0's, x = q * d + m
 *   block_iq4_nl { f16 d; uint8 qs[16]; }         nibbles as Q4_0's index v = {-127, -104, -83, -65, -49, -35, -22, -10,
 *                                                 1, 13, 25, 38, 53, 69, 89, 113}; x = d * v[nibble]
 *   block_q2_K { uint8 scales[16]; uint8 qs[64]; f16 d; f16 dmin; }   16 sub-blocks of 16: element 128h + 32j + l is
 *     bits 2j..2j+1 of qs[32h + l]; sub-block e/16's scale is the low nibble of scales[e/16], its min the high one;
 *     x = (d * sc) * q - dmin * m.
 *   block_q3_K { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; f16 d; }   element 128h + 32j + l: bits 2j..2j+1 of
 *     qs[32h + l], less 4 unless bit 4h + j of hmask[l] is set (-4..3); 16 scales of 6 bits: the low nibble of
 *     scales[j] (j < 8) or the high nibble of scales[j-8], bits 2(j/4)..+1 of scales[8 + j%4] on top, less 32;
 *     x = (d * sc) * q.
 *   block_q5_K { f16 d; f16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]; }   Q4_K's scales and nibbles, and
 *     bit 2c (low nibble) or 2c+1 (high nibble) of qh[l] as the fifth bit; x = (d * sc_j) * q - dmin * m_j.
 *   block_iq4_xs { f16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]; }   8 sub-blocks of 32, sub-block j's
 *     scale ls = (nibble j%2 of scales_l[j/2] | bits 2j..2j+1 of scales_h << 4) - 32, its 16 bytes of nibbles as
 *     IQ4_NL's; x = (d * ls) * v[nibble].
 *   block_mxfp4 { uint8 e; uint8 qs[16]; }   OCP's MXFP4: nibbles as Q4_0's index E2M1's values doubled,
 *     v = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}; e is an E8M0 exponent, and
 *     x = v[nibble] * 2^(e - 128) (ggml's GGML_E8M0_TO_FP32_HALF: half of 2^(e - 127), as v is doubled; e 0 and 1
 *     give subnormals, 255 no NaN; tests/data/mxfp4_ggml.bin holds ggml's values of every e and nibble).
 */
#ifndef FKV_KERNELS_TYPES_H
#define FKV_KERNELS_TYPES_H

#include <stdint.h>

/* Element types, numbered as in ggml (GGUF files carry these numbers). The kernels compute the types of traits.h;
 * the GGUF reader knows the block geometry of every one, so that files holding others are still read (and refused
 * by the model loader by name, not by a size error). */
typedef enum {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34,
    GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_COUNT = 40
} ggml_type;

#define QK 32 /* elements per Q8_0 / Q4_0 block */

typedef struct {
    uint16_t d; /* f16 */
    int8_t qs[QK];
} block_q8_0;

typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[QK / 2];
} block_q4_0;

#define QK_K 256 /* elements per K-quant (and IQ4_XS) super-block */

typedef struct {
    uint16_t d;    /* f16, scale of the sub-block scales */
    uint16_t dmin; /* f16, scale of the sub-block mins */
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
} block_q4_K;

typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d; /* f16 */
} block_q6_K;

/* The rest of ggml's 32-element blocks (their layouts above). */
typedef struct {
    uint16_t d; /* f16 scale */
    uint16_t m; /* f16 min, added */
    uint8_t qs[QK / 2];
} block_q4_1;

typedef struct {
    uint16_t d;    /* f16 */
    uint8_t qh[4]; /* bit 4 of each quant, element j in bit j */
    uint8_t qs[QK / 2];
} block_q5_0;

typedef struct {
    uint16_t d; /* f16 scale */
    uint16_t m; /* f16 min, added */
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} block_q5_1;

typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[QK / 2]; /* indices into the 16 non-linear values (above) */
} block_iq4_nl;

typedef struct {
    uint8_t e;          /* E8M0 exponent: the block's scale is 2^(e - 128) */
    uint8_t qs[QK / 2]; /* indices into the 16 doubled E2M1 values (above) */
} block_mxfp4;

/* The rest of ggml's 256-element super-blocks. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* per sub-block of 16: scale in the low nibble, min in the high one */
    uint8_t qs[QK_K / 4];
    uint16_t d;    /* f16, scale of the scales */
    uint16_t dmin; /* f16, scale of the mins */
} block_q2_K;

typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12]; /* 16 signed 6-bit scales */
    uint16_t d;         /* f16 */
} block_q3_K;

typedef struct {
    uint16_t d;    /* f16, scale of the sub-block scales */
    uint16_t dmin; /* f16, scale of the sub-block mins */
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

typedef struct {
    uint16_t d; /* f16 */
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

/* ggml's block sizes (ggml-common.h): a layout that drifted would misread every GGUF file. */
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0");
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs");

/* An activation row quantized for integer dot products (quant.h); the scale is an f16 value, held as f32. */
typedef struct {
    float d;
    int8_t qs[QK];
} block_q8_act;

#endif
