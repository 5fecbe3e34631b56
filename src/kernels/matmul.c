/* matmul.c — the dots and matrix products of matmul.h: each call goes to the active variant's table (dispatch.h). */
#include "matmul.h"

#include "dispatch.h"

float kern_dot_f32(const float *a, const float *b, size_t n) { return kern_active()->dot_f32(a, b, n); }

float kern_dot(ggml_type type, const void *w, const float *xf, const block_q8_act *xq, size_t n) {
    return kern_active()->dot(type, w, xf, xq, n);
}

void kern_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                 const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    kern_active()->matmul(type, packed, w, w_row_bytes, n_out, xf, xq, xp, n_rows, n, y, ldy);
}

bool kern_packs(ggml_type type, size_t n) { return kern_active()->packs(type, n); }

size_t kern_packed_row_bytes(ggml_type type, size_t n) { return kern_active()->packed_row_bytes(type, n); }

void kern_pack_rows(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n,
                    void *dst) {
    kern_active()->pack_rows(type, w, w_row_bytes, r0, r1, n, dst);
}

size_t kern_panel_row_bytes(size_t n) { return kern_active()->panel_row_bytes(n); }

void kern_panel_rows(const block_q8_act *xq, size_t n, uint32_t r0, uint32_t r1, void *xp) {
    kern_active()->panel_rows(xq, n, r0, r1, xp);
}
