#include "cache/kvpool.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/hugemem.h"

static size_t kvpool_data_bytes(const kvpool *p) { return (size_t)p->n_blocks * (p->block_bytes ? p->block_bytes : 1); }

kvpool *kvpool_new(uint32_t n_layers, uint32_t kv_dim, fkv_kv_type type, uint32_t block_rows, size_t budget_bytes,
                   fkv_error *err) {
    if (block_rows == 0 || block_rows % OPS_ATTN_TILE) {
        err_input(err, "the KV block size %u must be a positive multiple of %d positions", block_rows, OPS_ATTN_TILE);
        return NULL;
    }
    kvpool *p = calloc(1, sizeof *p);
    if (!p) {
        err_nomem(err, "out of memory for the KV pool");
        return NULL;
    }
    p->type = type;
    p->n_layers = n_layers;
    p->kv_dim = kv_dim;
    p->block_rows = block_rows;
    p->row_bytes = kv_row_bytes(type, kv_dim);
    p->block_bytes = (size_t)2 * n_layers * block_rows * p->row_bytes;
    /* a pool of no layers (every layer a window layer, kept apart) still numbers the blocks of the tree's nodes */
    size_t n = budget_bytes / (p->block_bytes ? p->block_bytes : (size_t)2 * block_rows * p->row_bytes);
    p->n_blocks = n < 1 ? 1 : n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)n;
    /* zeroed: attention scores a K tile's slots past the positions stored so far too (and ignores them); they
     * read as initialized memory, and fresh pages cost nothing until touched */
    p->data = hugemem_alloc(kvpool_data_bytes(p));
    p->free_list = malloc(sizeof(uint32_t) * p->n_blocks);
    if (!p->data || !p->free_list) {
        err_nomem(err, "out of memory for a KV pool of %u blocks of %zu bytes", p->n_blocks, p->block_bytes);
        kvpool_free(p);
        return NULL;
    }
    /* Popped from the end: block 0 is handed out first. */
    for (uint32_t i = 0; i < p->n_blocks; i++) p->free_list[i] = p->n_blocks - 1 - i;
    p->n_free = p->n_blocks;
    return p;
}

void kvpool_free(kvpool *p) {
    if (!p) return;
    hugemem_free(p->data, kvpool_data_bytes(p));
    free(p->free_list);
    free(p);
}

int64_t kvpool_alloc(kvpool *p) { return p->n_free ? (int64_t)p->free_list[--p->n_free] : -1; }

void kvpool_release(kvpool *p, uint32_t block) { p->free_list[p->n_free++] = block; }

/* Layer l's K area in a block; its V area follows block_rows rows on. */
static uint8_t *layer_k(const kvpool *p, uint32_t block, uint32_t layer) {
    return p->data + (size_t)block * p->block_bytes + (size_t)2 * layer * p->block_rows * p->row_bytes;
}

void kvpool_copy_rows(kvpool *p, uint32_t dst, uint32_t src, uint32_t n_rows) {
    /* K and quantized V are stored in tiles (kv.h): whole tiles, which hold the rows and slots no one reads yet */
    const size_t bytes = kv_tiled_rows(n_rows) * p->row_bytes, v = (size_t)p->block_rows * p->row_bytes;
    for (uint32_t l = 0; l < p->n_layers; l++) {
        memcpy(layer_k(p, dst, l), layer_k(p, src, l), bytes);
        memcpy(layer_k(p, dst, l) + v, layer_k(p, src, l) + v, bytes);
    }
}

kv_part kvpool_part(const kvpool *p, const uint32_t *blocks) {
    return (kv_part){.k = p->data, .v = p->data + (size_t)p->block_rows * p->row_bytes,
                     .layer_stride = (size_t)2 * p->block_rows * p->row_bytes, .blocks = blocks,
                     .block_stride = p->block_bytes};
}

kv_map kvpool_map(const kvpool *p, const uint32_t *blocks) {
    return (kv_map){.part[0] = kvpool_part(p, blocks), .row_bytes = p->row_bytes, .type = p->type,
                    .block_rows = p->block_rows};
}
