/* convert.c — the conversions of convert.h: the scalars as order.h defines them, rows by the active variant. */
#include "convert.h"

#include "dispatch.h"
#include "order.h"

float kern_f16_to_f32(uint16_t h) { return ord_f16_to_f32(h); }

uint16_t kern_f32_to_f16(float f) { return ord_f32_to_f16(f); }

float kern_bf16_to_f32(uint16_t h) { return ord_bf16_to_f32(h); }

uint16_t kern_f32_to_bf16(float f) { return ord_f32_to_bf16(f); }

void kern_f32_to_f16_row(const float *src, uint16_t *dst, size_t n) { kern_active()->f32_to_f16_row(src, dst, n); }

void kern_f32_to_q8_0_row(const float *src, void *dst, size_t n) { kern_active()->f32_to_q8_0_row(src, dst, n); }
