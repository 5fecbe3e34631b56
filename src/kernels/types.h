/* types.h — element type ids and the block layouts the kernels read, straight from GGUF files.
 *
 * WHY here: the kernels include nothing above them (kernels/), yet every layer above names these types; the ids are
 * ggml's, the layouts ggml's (quant.h spells out each one's bit layout).
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
    GGML_TYPE_COUNT = 39
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

/* The rest of ggml's 32-element blocks (quant.h spells out each layout). */
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
    uint8_t qs[QK / 2]; /* indices into the 16 non-linear values (quant.h) */
} block_iq4_nl;

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
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs");

/* An activation row quantized for integer dot products; the scale is an f16 value (quant.h), held as f32. */
typedef struct {
    float d;
    int8_t qs[QK];
} block_q8_act;

#endif
