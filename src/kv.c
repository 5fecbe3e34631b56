#include "kv.h"

#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* a state on the stack: digesting never allocates */
#include <xxhash.h>

#include "err.h"

size_t kv_tiled_rows(uint32_t n) { return ((size_t)n + OPS_ATTN_TILE - 1) / OPS_ATTN_TILE * OPS_ATTN_TILE; }

kv_buf *kv_new(uint32_t n_layers, uint32_t n_ctx, uint32_t kv_dim, fkv_kv_type type, fkv_error *err) {
    kv_buf *kv = calloc(1, sizeof *kv);
    if (!kv) {
        err_nomem(err, "out of memory for the KV buffer");
        return NULL;
    }
    kv->type = type;
    kv->n_layers = n_layers;
    kv->n_ctx = n_ctx;
    kv->kv_dim = kv_dim;
    kv->row_bytes = (size_t)kv_dim * (type == FKV_KV_F16 ? sizeof(uint16_t) : sizeof(float));
    size_t bytes = (size_t)n_layers * kv_tiled_rows(n_ctx) * kv->row_bytes;
    kv->k = calloc(1, bytes);
    kv->v = calloc(1, bytes);
    if (!kv->k || !kv->v) {
        err_nomem(err, "out of memory for a KV buffer of 2 x %zu bytes (%u layers, %u positions, %u values)", bytes,
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
    return (kv_map){.part[0] = {.k = kv->k, .v = kv->v, .layer_stride = kv_tiled_rows(kv->n_ctx) * kv->row_bytes},
                    .row_bytes = kv->row_bytes, .type = kv->type};
}

ops_kv_view kv_map_view(const kv_map *m, uint32_t layer) {
    const kv_part *part = &m->part[m->layer_at ? m->layer_at[layer] >> 16 : 0];
    const size_t off = (size_t)(m->layer_at ? m->layer_at[layer] & 0xffff : layer) * part->layer_stride;
    return (ops_kv_view){.k = part->k + off, .v = part->v + off, .row_bytes = m->row_bytes,
                         .f16 = m->type == FKV_KV_F16, .blocks = part->blocks, .block_rows = m->block_rows,
                         .block_stride = part->block_stride};
}

/* Where element e of position p's K row lies in the key-major tile that holds p (ops.h), in elements. */
static size_t k_element(uint32_t p, uint32_t e) { return (size_t)e * OPS_ATTN_TILE + p % OPS_ATTN_TILE; }

static size_t elem_bytes(const ops_kv_view *view) { return view->f16 ? sizeof(uint16_t) : sizeof(float); }

static uint8_t *k_tile(const ops_kv_view *view, uint32_t p) {
    return (uint8_t *)view->k + ops_kv_offset(view, p - p % OPS_ATTN_TILE);
}

void kv_map_store(const kv_map *m, uint32_t layer, uint32_t pos, const float *k, const float *v, uint32_t kv_dim) {
    const ops_kv_view view = kv_map_view(m, layer);
    uint8_t *kt = k_tile(&view, pos), *vr = (uint8_t *)view.v + ops_kv_offset(&view, pos);
    if (m->type == FKV_KV_F16) {
        quant_f32_to_f16_row(v, (uint16_t *)vr, kv_dim);
        enum { CHUNK = 64 };
        uint16_t h[CHUNK];
        for (uint32_t e0 = 0; e0 < kv_dim; e0 += CHUNK) {
            const uint32_t n = kv_dim - e0 < CHUNK ? kv_dim - e0 : CHUNK;
            quant_f32_to_f16_row(k + e0, h, n);
            for (uint32_t e = 0; e < n; e++) ((uint16_t *)kt)[k_element(pos, e0 + e)] = h[e];
        }
    } else {
        memcpy(vr, v, m->row_bytes);
        for (uint32_t e = 0; e < kv_dim; e++) ((float *)kt)[k_element(pos, e)] = k[e];
    }
}

/* Elements [e0, e0 + n) of position p's K row, as stored, into dst. */
static void gather_k(const ops_kv_view *view, uint32_t p, uint32_t e0, uint32_t n, uint8_t *dst) {
    const size_t elem = elem_bytes(view);
    const uint8_t *kt = k_tile(view, p);
    for (uint32_t e = 0; e < n; e++) memcpy(dst + e * elem, kt + k_element(p, e0 + e) * elem, elem);
}

void kv_map_read(const kv_map *m, uint32_t layer, uint32_t pos, void *k, void *v) {
    const ops_kv_view view = kv_map_view(m, layer);
    gather_k(&view, pos, 0, (uint32_t)(m->row_bytes / elem_bytes(&view)), k);
    memcpy(v, view.v + ops_kv_offset(&view, pos), m->row_bytes);
}

/* K rows [p0, n_pos) of one layer, in position order, gathered from their tiles a piece at a time. */
static void digest_k_rows(XXH3_state_t *st, const ops_kv_view *view, uint32_t p0, uint32_t n_pos) {
    const size_t elem = elem_bytes(view);
    const uint32_t kv_dim = (uint32_t)(view->row_bytes / elem);
    enum { PIECE = 4096 };
    uint8_t piece[PIECE];
    for (uint32_t p = p0; p < n_pos; p++)
        for (uint32_t e0 = 0; e0 < kv_dim; e0 += PIECE / sizeof(float)) {
            const uint32_t n = kv_dim - e0 < PIECE / sizeof(float) ? kv_dim - e0 : PIECE / sizeof(float);
            gather_k(view, p, e0, n, piece);
            XXH3_64bits_update(st, piece, n * elem);
        }
}

/* V rows [p0, n_pos) of one layer, in position order, a block's run at a time. */
static void digest_v_rows(XXH3_state_t *st, const ops_kv_view *view, uint32_t p0, uint32_t n_pos) {
    for (uint32_t p = p0; p < n_pos;) {
        const uint32_t end = view->blocks ? (p / view->block_rows + 1) * view->block_rows : n_pos;
        const uint32_t n = (end < n_pos ? end : n_pos) - p;
        XXH3_64bits_update(st, view->v + ops_kv_offset(view, p), (size_t)n * view->row_bytes);
        p += n;
    }
}

uint64_t kv_map_digest(const kv_map *m, uint32_t n_layers, const uint32_t *window, uint32_t n_pos) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (uint32_t l = 0; l < n_layers; l++) {
        const uint32_t w = window ? window[l] : 0, p0 = w && n_pos >= w ? n_pos - w + 1 : 0;
        ops_kv_view view = kv_map_view(m, l);
        digest_k_rows(&st, &view, p0, n_pos);
        digest_v_rows(&st, &view, p0, n_pos);
    }
    return XXH3_64bits_digest(&st);
}
