/* kv.h — the K/V rows of one sequence: storage, conversion on store, and digests.
 *
 * WHY: the KV is what the prefix cache keeps between turns, and what exactness is measured on (DESIGN.md
 * §6): a digest of rows [0, n) of every layer, as stored, compared between a cold and a resumed run.
 *
 * Layout: for each layer, K rows then (separately) V rows, position-major: row p of layer l holds
 * kv_dim = n_kv_heads × head_dim elements, f32 or f16 (rounded to nearest even on store).
 *
 * INVARIANT: a row's stored bytes are a function of the f32 values stored into it alone (conversion is
 * element-wise), so rows keep the row invariance of the kernels that computed them.
 *
 * Thread-safety: one writer at a time; readers of rows already stored may run concurrently.
 */
#ifndef FKV_KV_H
#define FKV_KV_H

#include <stdint.h>

#include "flatkv.h"
#include "ops.h"

typedef struct {
    fkv_kv_type type;
    uint32_t n_layers;
    uint32_t n_ctx;
    uint32_t kv_dim;
    size_t row_bytes;
    uint8_t *k; /* [n_layers][n_ctx][kv_dim] */
    uint8_t *v;
} kv_buf;

kv_buf *kv_new(uint32_t n_layers, uint32_t n_ctx, uint32_t kv_dim, fkv_kv_type type, fkv_error *err);
void kv_free(kv_buf *kv);

/* Store n_rows rows of K and V (f32, [n_rows][kv_dim]) for layer at positions pos0.. (caller checked the
 * range). */
void kv_store(kv_buf *kv, uint32_t layer, uint32_t pos0, uint32_t n_rows, const float *k, const float *v);

/* The rows of one layer, for attention. */
ops_kv_view kv_view(const kv_buf *kv, uint32_t layer);

/* xxh3-64 over K rows [0, n_pos) then V rows [0, n_pos) of layer 0, then of layer 1, ... as stored. */
uint64_t kv_digest(const kv_buf *kv, uint32_t n_pos);

#endif
