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

kv_map kv_buf_map(const kv_buf *kv) {
    return (kv_map){.k = kv->k, .v = kv->v, .layer_stride = (size_t)kv->n_ctx * kv->row_bytes,
                    .row_bytes = kv->row_bytes, .type = kv->type};
}

ops_kv_view kv_map_view(const kv_map *m, uint32_t layer) {
    size_t off = (size_t)layer * m->layer_stride;
    return (ops_kv_view){.k = m->k + off, .v = m->v + off, .row_bytes = m->row_bytes, .f16 = m->type == FKV_KV_F16,
                         .blocks = m->blocks, .block_rows = m->block_rows, .block_stride = m->block_stride};
}

static void store_row(const kv_map *m, uint8_t *dst, const float *src, uint32_t kv_dim) {
    if (m->type == FKV_KV_F16)
        quant_f32_to_f16_row(src, (uint16_t *)dst, kv_dim);
    else
        memcpy(dst, src, m->row_bytes);
}

void kv_map_store(const kv_map *m, uint32_t layer, uint32_t pos, const float *k, const float *v, uint32_t kv_dim) {
    ops_kv_view view = kv_map_view(m, layer);
    size_t off = ops_kv_offset(&view, pos);
    store_row(m, (uint8_t *)view.k + off, k, kv_dim);
    store_row(m, (uint8_t *)view.v + off, v, kv_dim);
}

/* Rows [0, n_pos) of one layer's K (or V), in position order, a block's run at a time. */
static void digest_rows(XXH3_state_t *st, const ops_kv_view *view, const uint8_t *base, uint32_t n_pos) {
    uint32_t run = view->blocks ? view->block_rows : n_pos;
    for (uint32_t p = 0; p < n_pos; p += run) {
        uint32_t n = n_pos - p < run ? n_pos - p : run;
        XXH3_64bits_update(st, base + ops_kv_offset(view, p), (size_t)n * view->row_bytes);
    }
}

uint64_t kv_map_digest(const kv_map *m, uint32_t n_layers, uint32_t n_pos) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (uint32_t l = 0; l < n_layers; l++) {
        ops_kv_view view = kv_map_view(m, l);
        digest_rows(&st, &view, view.k, n_pos);
        digest_rows(&st, &view, view.v, n_pos);
    }
    return XXH3_64bits_digest(&st);
}
