/* traits.c — the element types the kernels compute (traits.h). */
#include "traits.h"

#include "ref/ref.h"

static const kern_traits traits[] = {
    {GGML_TYPE_F32, "f32", 1, 4, false, ref_dequantize_f32, ref_quantize_f32, ref_dot_w_f32},
    {GGML_TYPE_F16, "f16", 1, 2, false, ref_dequantize_f16, ref_quantize_f16, ref_dot_w_f16},
    {GGML_TYPE_BF16, "bf16", 1, 2, false, ref_dequantize_bf16, ref_quantize_bf16, ref_dot_w_bf16},
    {GGML_TYPE_Q8_0, "q8_0", QK, sizeof(block_q8_0), true, ref_dequantize_q8_0, ref_quantize_q8_0, ref_dot_w_q8_0},
    {GGML_TYPE_Q4_0, "q4_0", QK, sizeof(block_q4_0), true, ref_dequantize_q4_0, ref_quantize_q4_0, ref_dot_w_q4_0},
    {GGML_TYPE_Q4_K, "q4_K", QK_K, sizeof(block_q4_K), true, ref_dequantize_q4_K, ref_quantize_q4_K, ref_dot_w_q4_K},
    {GGML_TYPE_Q6_K, "q6_K", QK_K, sizeof(block_q6_K), true, ref_dequantize_q6_K, ref_quantize_q6_K, ref_dot_w_q6_K},
    {GGML_TYPE_Q4_1, "q4_1", QK, sizeof(block_q4_1), true, ref_dequantize_q4_1, ref_quantize_q4_1, ref_dot_w_q4_1},
    {GGML_TYPE_Q5_0, "q5_0", QK, sizeof(block_q5_0), true, ref_dequantize_q5_0, ref_quantize_q5_0, ref_dot_w_q5_0},
    {GGML_TYPE_Q5_1, "q5_1", QK, sizeof(block_q5_1), true, ref_dequantize_q5_1, ref_quantize_q5_1, ref_dot_w_q5_1},
    {GGML_TYPE_IQ4_NL, "iq4_nl", QK, sizeof(block_iq4_nl), true, ref_dequantize_iq4_nl, ref_quantize_iq4_nl,
     ref_dot_w_iq4_nl},
    {GGML_TYPE_MXFP4, "mxfp4", QK, sizeof(block_mxfp4), true, ref_dequantize_mxfp4, ref_quantize_mxfp4,
     ref_dot_w_mxfp4},
    {GGML_TYPE_Q2_K, "q2_K", QK_K, sizeof(block_q2_K), true, ref_dequantize_q2_K, ref_quantize_q2_K, ref_dot_w_q2_K},
    {GGML_TYPE_Q3_K, "q3_K", QK_K, sizeof(block_q3_K), true, ref_dequantize_q3_K, ref_quantize_q3_K, ref_dot_w_q3_K},
    {GGML_TYPE_Q5_K, "q5_K", QK_K, sizeof(block_q5_K), true, ref_dequantize_q5_K, ref_quantize_q5_K, ref_dot_w_q5_K},
    {GGML_TYPE_IQ4_XS, "iq4_xs", QK_K, sizeof(block_iq4_xs), true, ref_dequantize_iq4_xs, ref_quantize_iq4_xs,
     ref_dot_w_iq4_xs},
};

const kern_traits *kern_type_traits(ggml_type type) {
    for (size_t i = 0; i < sizeof traits / sizeof *traits; i++)
        if (traits[i].type == type) return &traits[i];
    return NULL;
}

bool kern_wants_q8(ggml_type type) {
    const kern_traits *t = kern_type_traits(type);
    return t && t->act_q8;
}

size_t kern_row_bytes(ggml_type type, size_t n) {
    const kern_traits *t = kern_type_traits(type);
    return t ? n / t->block_elems * t->block_bytes : 0;
}
