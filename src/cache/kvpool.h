/* kvpool.h — K/V rows in fixed-size blocks, from one memory budget.
 *
 * WHY blocks: many conversations cached at once cannot each own a buffer of the whole context. A block
 * holds the K and V rows of block_rows consecutive positions (every layer); a sequence is a list of
 * blocks, and a block can be shared by every sequence whose tokens agree over its positions
 * (src/cache/prefix.h decides which).
 *
 * INVARIANT: block_rows is a multiple of OPS_ATTN_TILE, so an attention tile (32 positions aligned to
 * absolute positions) never straddles two blocks: attention reads each tile from one contiguous run of
 * rows, exactly as from a contiguous buffer — paging changes where rows live, never their bits.
 *
 * Layout of block b: for each layer, block_rows K rows then block_rows V rows, kv_dim values each
 * (f32, f16, Q8_0 or Q4_0 blocks, as stored by kv.h's conversion; K in tiles laid out for attention, kv.h).
 *
 * Thread-safety: one owner (the engine thread).
 */
#ifndef FKV_KVPOOL_H
#define FKV_KVPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "flatkv.h"
#include "cache/kv.h"
#include "kernels/ops.h"

typedef struct {
    fkv_kv_type type;
    uint32_t n_layers;
    uint32_t kv_dim;
    uint32_t block_rows;
    uint32_t n_blocks;
    size_t row_bytes;
    size_t block_bytes;
    uint8_t *data;
    uint32_t *free_list;
    uint32_t n_free;
} kvpool;

/* A pool of as many blocks as fit in budget_bytes (at least one). NULL with err naming the problem. */
kvpool *kvpool_new(uint32_t n_layers, uint32_t kv_dim, fkv_kv_type type, uint32_t block_rows, size_t budget_bytes,
                   fkv_error *err);
void kvpool_free(kvpool *p);

/* A free block, or -1 when none is left. */
int64_t kvpool_alloc(kvpool *p);
void kvpool_release(kvpool *p, uint32_t block);

/* The store of a sequence's rows in this pool: positions [i·block_rows, (i+1)·block_rows) in blocks[i] (borrowed). */
kv_part kvpool_part(const kvpool *p, const uint32_t *blocks);
/* The map of a sequence whose positions [i·block_rows, (i+1)·block_rows) are in blocks[i] (borrowed). */
kv_map kvpool_map(const kvpool *p, const uint32_t *blocks);

/* Copy rows [0, n_rows) of every layer from block src to block dst (copy-on-write of a shared block). */
void kvpool_copy_rows(kvpool *p, uint32_t dst, uint32_t src, uint32_t n_rows);

#endif
