/* ref/matmul.c — the reference matrix product: one reference dot (ref/dot.c) per output. Every variant's matmul gives
 * these bits for every output, whatever its tiles, packing and row counts.
 */
#include "ref.h"

#include "traits.h"

void ref_matmul(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out, const float *xf,
                const block_q8_act *xq, const void *xp, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    (void)packed, (void)xp; /* the reference packs and prepares nothing */
    const bool q8 = kern_wants_q8(type);
    for (uint32_t o = 0; o < n_out; o++)
        for (uint32_t r = 0; r < n_rows; r++)
            y[r * ldy + o] = ref_dot(type, (const uint8_t *)w + o * w_row_bytes, q8 ? NULL : xf + r * n,
                                     q8 ? xq + r * (n / QK) : NULL, n);
}
