/* kv.h — the K/V rows of one sequence: storage, conversion on store, and digests.
 *
 * WHY: the KV is what the prefix cache keeps between turns, and what exactness is measured on (DESIGN.md
 * §6): a digest of rows [0, n) of every layer, as stored, compared between a cold and a resumed run.
 *
 * Layout: for each layer, K rows then (separately) V rows, kv_dim = n_kv_heads × head_dim elements each, f32 or
 * f16 (rounded to nearest even on store), in tiles of OPS_ATTN_TILE positions: a V tile is its rows
 * position-major, a K tile key-major (ops.h's ops_kv_view), so attention scores a tile of keys without
 * transposing it. A row is the same values either way; digests and kv_map_read see rows.
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
    uint8_t *k; /* [n_layers][n_ctx rounded up to whole tiles][kv_dim] */
    uint8_t *v;
} kv_buf;

/* Rows that hold n positions: whole attention tiles, since K is stored a tile at a time (a tile's last key
 * reaches 32 rows past its start, whatever position was stored). */
size_t kv_tiled_rows(uint32_t n);

kv_buf *kv_new(uint32_t n_layers, uint32_t n_ctx, uint32_t kv_dim, fkv_kv_type type, fkv_error *err);
void kv_free(kv_buf *kv);

/* One store of K/V rows: contiguous (blocks NULL) or the blocks of a pool (kvpool.h). */
typedef struct {
    uint8_t *k, *v;          /* its first layer: the K and V rows of position 0 (contiguous) or of block 0 (paged) */
    size_t layer_stride;     /* bytes from one of its layers' rows to the next's */
    const uint32_t *blocks;  /* NULL: contiguous; else the sequence's block table in this store */
    size_t block_stride;
} kv_part;

/* Where the K/V rows of one sequence live, every layer. Usually one store holds every layer; a model with
 * window layers may keep those in a second store (part[1], its own pool: prefix.h drops the blocks of it no
 * resume needs any more), and layer_at says where each layer is. Kernels see one layer of it as an ops_kv_view. */
typedef struct {
    kv_part part[2];
    const uint32_t *layer_at; /* NULL: layer l is layer l of part[0]; else layer l is layer layer_at[l] & 0xffff of
                               * part[layer_at[l] >> 16] */
    size_t row_bytes;
    fkv_kv_type type;
    uint32_t block_rows;
} kv_map;

/* The map of a whole kv_buf. */
kv_map kv_buf_map(const kv_buf *kv);
/* One layer of a map, for attention. */
ops_kv_view kv_map_view(const kv_map *m, uint32_t layer);
/* Store the K and V row (f32, kv_dim values) of position pos in layer, converted to the storage type. */
void kv_map_store(const kv_map *m, uint32_t layer, uint32_t pos, const float *k, const float *v, uint32_t kv_dim);
/* The stored bytes of position pos's K row and V row in layer (row_bytes each). */
void kv_map_read(const kv_map *m, uint32_t layer, uint32_t pos, void *k, void *v);
/* xxh3-64 over K rows then V rows of layer 0, then of layer 1, ... as stored — the same bytes in the same order
 * whatever the storage, so contiguous and paged sequences compare directly. The rows of layer l are [0, n_pos), or,
 * for a window layer (window[l] > 0; window NULL: none), the last window[l] - 1 of them: what a row at n_pos reads,
 * and all a sequence is sure to hold (prefix.h drops the rest). */
uint64_t kv_map_digest(const kv_map *m, uint32_t n_layers, const uint32_t *window, uint32_t n_pos);

#endif
