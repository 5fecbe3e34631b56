/* kv.h — the K/V rows of one sequence: storage, conversion on store, and digests.
 *
 * WHY: the KV is what the prefix cache keeps between turns, and what exactness is measured on (docs/design.md
 * §7): a digest of rows [0, n) of every layer, as stored, compared between a cold and a resumed run.
 *
 * Layout: for each layer, K rows then (separately) V rows, kv_dim = n_kv_heads × head_dim elements each, in tiles of
 * OPS_ATTN_TILE positions. Stored as f32, f16 (rounded to nearest even), or quantized: Q8_0 / Q4_0 blocks of 32
 * values, ggml's block_q8_0 / block_q4_0 from the weight quantizers (quant_quantize_row: ggml's rounding), a row's
 * blocks each from its own 32 values — so the quantized types take heads of a multiple of 32 (kv_choose_type), and a
 * head's blocks are its own. A K tile is laid out for the scores of a tile of keys at once: f16/f32 key-major (ops.h's
 * ops_kv_view), no transposing; quantized, per block of the rows a section of the 32 keys' scales then their quants in
 * groups of four, key-interleaved (attn.h's kern_score_tile_q) — the operands of integer products of four quants of
 * 16 keys at once. An f16/f32 V tile is its rows position-major (a row: kv_dim values); a quantized one, per block of
 * the rows a section of the 32 positions' scales then their quants in groups of four positions (attn.h's
 * kern_weigh_tile_q) — the operands of integer products of four weights with 16 values — so a head's values are
 * contiguous sections, as its keys are. A row
 * is the same bytes either way; digests and kv_map_read see rows as stored: values, or ggml blocks.
 *
 * INVARIANT: a row's stored bytes are a function of the f32 values stored into it alone (conversion is element-wise,
 * quantization block-wise within the row), so rows keep the row invariance of the kernels that computed them.
 *
 * Thread-safety: one writer at a time; readers of rows already stored may run concurrently.
 */
#ifndef FKV_KV_H
#define FKV_KV_H

#include <stdint.h>

#include "flatkv.h"
#include "kernels/ops.h"

typedef struct {
    fkv_kv_type type;
    uint32_t n_layers;
    uint32_t n_ctx;
    uint32_t kv_dim;
    size_t row_bytes;
    uint8_t *k; /* [n_layers][n_ctx rounded up to whole tiles][kv_dim] */
    uint8_t *v;
} kv_buf;

/* The element type of rows stored as type: GGML_TYPE_F32, F16, Q8_0 or Q4_0. */
ggml_type kv_elem_type(fkv_kv_type type);
/* Bytes of one K (or V) row of kv_dim values stored as type: the one place that says how big a row is. */
size_t kv_row_bytes(fkv_kv_type type, uint32_t kv_dim);
/* *chosen as a storage type for rows of heads of head_dim values (kv_dim in all): FKV_KV_AUTO becomes the type it
 * means for them (flatkv.h); then 0 when they can be stored so, else -1 with err: FKV_E_INPUT for a type that is
 * none of fkv_kv_type's, FKV_E_UNSUPPORTED for a quantized type and a head size not a multiple of 32. */
int kv_choose_type(fkv_kv_type *chosen, uint32_t head_dim, uint32_t kv_dim, fkv_error *err);

/* The version of the layout above: part of every disk block's name (engine.c), so blocks stored in another layout are
 * never read. 2: quantized V tiles in sections; 3: their quants in groups of four positions. */
#define KV_LAYOUT_VERSION 3

/* Rows that hold n positions: whole attention tiles, since K (and quantized V) is stored a tile at a time (a tile's
 * last key reaches 32 rows past its start, whatever position was stored). */
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
/* kv_map.layer_at's entry for a layer that keeps no K/V rows (a recurrent layer: its state is elsewhere). */
#define KV_NO_ROWS UINT32_MAX

typedef struct {
    kv_part part[2];
    const uint32_t *layer_at; /* NULL: layer l is layer l of part[0]; else layer l is layer layer_at[l] & 0xffff of
                               * part[layer_at[l] >> 16], or none (KV_NO_ROWS: never viewed, stored or digested) */
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
/* The stored bytes of position pos's K row and V row in layer (row_bytes each; quantized: ggml blocks). */
void kv_map_read(const kv_map *m, uint32_t layer, uint32_t pos, void *k, void *v);
/* xxh3-64 over K rows then V rows of layer 0, then of layer 1, ... as stored — the same bytes in the same order
 * whatever the storage, so contiguous and paged sequences compare directly. The rows of layer l are [0, n_pos), or,
 * for a window layer (window[l] > 0; window NULL: none), the last window[l] - 1 of them: what a row at n_pos reads,
 * and all a sequence is sure to hold (prefix.h drops the rest); a layer without rows (KV_NO_ROWS) adds nothing. */
uint64_t kv_map_digest(const kv_map *m, uint32_t n_layers, const uint32_t *window, uint32_t n_pos);

#endif
