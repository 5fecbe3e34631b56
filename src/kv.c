#include "kv.h"

#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* a state on the stack: digesting never allocates */
#include <xxhash.h>

#include "err.h"

kv_buf *kv_new(uint32_t n_layers, uint32_t n_ctx, uint32_t kv_dim, fkv_kv_type type, fkv_error *err) {
    kv_buf *kv = calloc(1, sizeof *kv);
    if (!kv) {
        err_set(err, "out of memory for the KV buffer");
        return NULL;
    }
    kv->type = type;
    kv->n_layers = n_layers;
    kv->n_ctx = n_ctx;
    kv->kv_dim = kv_dim;
    kv->row_bytes = (size_t)kv_dim * (type == FKV_KV_F16 ? sizeof(uint16_t) : sizeof(float));
    size_t bytes = (size_t)n_layers * n_ctx * kv->row_bytes;
    kv->k = calloc(1, bytes);
    kv->v = calloc(1, bytes);
    if (!kv->k || !kv->v) {
        err_set(err, "out of memory for a KV buffer of 2 x %zu bytes (%u layers, %u positions, %u values)", bytes,
                n_layers, n_ctx, kv_dim);
        kv_free(kv);
        return NULL;
    }
    return kv;
}

void kv_free(kv_buf *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv);
}

static void store_rows(const kv_buf *kv, uint8_t *dst, const float *src, uint32_t n_rows) {
    if (kv->type == FKV_KV_F16)
        quant_f32_to_f16_row(src, (uint16_t *)dst, (size_t)n_rows * kv->kv_dim);
    else
        memcpy(dst, src, (size_t)n_rows * kv->row_bytes);
}

void kv_store(kv_buf *kv, uint32_t layer, uint32_t pos0, uint32_t n_rows, const float *k, const float *v) {
    size_t off = ((size_t)layer * kv->n_ctx + pos0) * kv->row_bytes;
    store_rows(kv, kv->k + off, k, n_rows);
    store_rows(kv, kv->v + off, v, n_rows);
}

ops_kv_view kv_view(const kv_buf *kv, uint32_t layer) {
    size_t off = (size_t)layer * kv->n_ctx * kv->row_bytes;
    return (ops_kv_view){kv->k + off, kv->v + off, kv->row_bytes, kv->type == FKV_KV_F16};
}

uint64_t kv_digest(const kv_buf *kv, uint32_t n_pos) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (uint32_t l = 0; l < kv->n_layers; l++) {
        size_t off = (size_t)l * kv->n_ctx * kv->row_bytes, len = (size_t)n_pos * kv->row_bytes;
        XXH3_64bits_update(&st, kv->k + off, len);
        XXH3_64bits_update(&st, kv->v + off, len);
    }
    return XXH3_64bits_digest(&st);
}
