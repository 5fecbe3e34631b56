#include "cache/kv.h"

#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* a state on the stack: digesting never allocates */
#include <xxhash.h>

#include "base/err.h"
#include "base/hugemem.h"
#include "kernels/attn.h"
#include "kernels/convert.h"
#include "kernels/quant.h"
#include "kernels/traits.h"

const char *fkv_kv_type_name(fkv_kv_type t) {
    static const char *const names[] = {[FKV_KV_F32] = "f32", [FKV_KV_F16] = "f16", [FKV_KV_Q8_0] = "q8_0",
                                        [FKV_KV_Q4_0] = "q4_0", [FKV_KV_AUTO] = "auto"};
    return (unsigned)t < sizeof names / sizeof *names ? names[t] : NULL;
}

ggml_type kv_elem_type(fkv_kv_type type) {
    switch (type) {
    case FKV_KV_F16: return GGML_TYPE_F16;
    case FKV_KV_Q8_0: return GGML_TYPE_Q8_0;
    case FKV_KV_Q4_0: return GGML_TYPE_Q4_0;
    default: return GGML_TYPE_F32;
    }
}

static bool quantized(ggml_type type) { return type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0; }

size_t kv_row_bytes(fkv_kv_type type, uint32_t kv_dim) { return kern_row_bytes(kv_elem_type(type), kv_dim); }

int kv_choose_type(fkv_kv_type *chosen, uint32_t head_dim, uint32_t kv_dim, fkv_error *err) {
    if (*chosen == FKV_KV_AUTO) *chosen = head_dim % QK ? FKV_KV_F16 : FKV_KV_Q8_0;
    const fkv_kv_type type = *chosen;
    if (type != FKV_KV_F32 && type != FKV_KV_F16 && type != FKV_KV_Q8_0 && type != FKV_KV_Q4_0)
        return err_input(err, "unknown KV storage type %d", (int)type);
    if (quantized(kv_elem_type(type)) && head_dim % QK)
        return err_unsupported(err, "--kv-type %s quantizes K/V rows in blocks of %d values within each head, and "
                               "this model's heads have %u (kv_dim %u); use --kv-type f16 or f32",
                               fkv_kv_type_name(type), QK, head_dim, kv_dim);
    return 0;
}

size_t kv_tiled_rows(uint32_t n) { return ((size_t)n + OPS_ATTN_TILE - 1) / OPS_ATTN_TILE * OPS_ATTN_TILE; }

/* The bytes of each of a buffer's K and V areas. */
static size_t kv_buf_bytes(const kv_buf *kv) { return (size_t)kv->n_layers * kv_tiled_rows(kv->n_ctx) * kv->row_bytes; }

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
    kv->row_bytes = kv_row_bytes(type, kv_dim);
    const size_t bytes = kv_buf_bytes(kv);
    kv->k = hugemem_alloc(bytes);
    kv->v = hugemem_alloc(bytes);
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
    hugemem_free(kv->k, kv_buf_bytes(kv));
    hugemem_free(kv->v, kv_buf_bytes(kv));
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
                         .type = kv_elem_type(m->type), .blocks = part->blocks, .block_rows = m->block_rows,
                         .block_stride = part->block_stride};
}

/* A row is stored in units: its elements (f32, f16), or its blocks of QK elements (the quantized types). In a K tile,
 * unit u of the 32 keys is a section of OPS_ATTN_TILE units: f16/f32 key j's element at j (key-major); quantized,
 * key j's scale at byte 2j, then the block's quant bytes in groups of KERN_KEY_GROUP, key-interleaved (attn.h). A
 * quantized V tile's sections likewise, with its quant bytes in groups of KERN_KEY_GROUP positions (attn.h); an
 * f16/f32 V tile is its rows. */
static uint32_t unit_elems(ggml_type type) { return quantized(type) ? QK : 1; }

static size_t unit_bytes(ggml_type type) { return kern_row_bytes(type, unit_elems(type)); }

/* The tile holding position p's K (v false) or V row. */
static uint8_t *tile_of(const ops_kv_view *view, bool v, uint32_t p) {
    return (uint8_t *)(v ? view->v : view->k) + ops_kv_offset(view, p - p % OPS_ATTN_TILE);
}

/* Where quant byte b (of a block's n_bytes) of position j lies among a quantized section's quants: K's groups hold
 * four bytes of one key, V's byte b of four positions. */
static size_t quant_at(bool v, size_t n_bytes, size_t j, size_t b) {
    return v ? (j / KERN_KEY_GROUP * n_bytes + b) * KERN_KEY_GROUP + j % KERN_KEY_GROUP
             : (b / KERN_KEY_GROUP * OPS_ATTN_TILE + j) * KERN_KEY_GROUP + b % KERN_KEY_GROUP;
}

/* Unit u of position p's K (v false) or V row, as stored (unit, unit_bytes), into its place in the tile; to_tile
 * false: back. */
static void move_unit(ggml_type type, bool v, uint8_t *tile, uint32_t p, uint32_t u, uint8_t *unit, bool to_tile) {
    const size_t bytes = unit_bytes(type), j = p % OPS_ATTN_TILE;
    uint8_t *section = tile + (size_t)u * OPS_ATTN_TILE * bytes;
    if (!quantized(type)) {
        memcpy(to_tile ? section + j * bytes : unit, to_tile ? unit : section + j * bytes, bytes);
        return;
    }
    uint8_t *scale = section + j * sizeof(uint16_t), *quants = section + OPS_ATTN_TILE * sizeof(uint16_t);
    memcpy(to_tile ? scale : unit, to_tile ? unit : scale, sizeof(uint16_t));
    const size_t n_bytes = bytes - sizeof(uint16_t);
    for (size_t b = 0; b < n_bytes; b++) {
        uint8_t *in_tile = quants + quant_at(v, n_bytes, j, b), *in_unit = unit + sizeof(uint16_t) + b;
        *(to_tile ? in_tile : in_unit) = *(to_tile ? in_unit : in_tile);
    }
}

/* Position p's f16/f32 V row, stored as it is (its tile's rows are position-major). */
static uint8_t *v_row(const ops_kv_view *view, uint32_t p) { return (uint8_t *)view->v + ops_kv_offset(view, p); }

/* Units [u0, u0 + n) of position p's K (v false) or V row, as stored, from rows (to_tiles) or into them (else). */
static void move_units(const ops_kv_view *view, bool v, uint32_t p, uint32_t u0, uint32_t n, uint8_t *row,
                       bool to_tiles) {
    const size_t bytes = unit_bytes(view->type);
    if (v && !quantized(view->type)) {
        uint8_t *at = v_row(view, p) + u0 * bytes;
        memcpy(to_tiles ? at : row, to_tiles ? row : at, n * bytes);
        return;
    }
    uint8_t *tile = tile_of(view, v, p);
    for (uint32_t u = 0; u < n; u++) move_unit(view->type, v, tile, p, u0 + u, row + u * bytes, to_tiles);
}

/* n values (whole blocks for the quantized types) in the storage type, as kv.h says. */
static void to_stored(ggml_type type, const float *x, uint8_t *dst, uint32_t n) {
    if (type == GGML_TYPE_F16) /* the variant's conversions: the same bits, faster */
        kern_f32_to_f16_row(x, (uint16_t *)(void *)dst, n);
    else if (type == GGML_TYPE_Q8_0)
        kern_f32_to_q8_0_row(x, dst, n);
    else
        quant_quantize_row(type, x, dst, n);
}

/* Values of a row converted at a time: whole blocks of the quantized types. */
#define STORE_PIECE 64

void kv_map_store(const kv_map *m, uint32_t layer, uint32_t pos, const float *k, const float *v, uint32_t kv_dim) {
    const ops_kv_view view = kv_map_view(m, layer);
    const bool v_in_place = !quantized(view.type); /* an f16/f32 V row is stored where it lies */
    if (v_in_place) to_stored(view.type, v, v_row(&view, pos), kv_dim);
    const uint32_t per_unit = unit_elems(view.type);
    float piece[STORE_PIECE]; /* as floats: aligned for any storage type */
    for (uint32_t e0 = 0; e0 < kv_dim; e0 += STORE_PIECE) {
        const uint32_t n = kv_dim - e0 < STORE_PIECE ? kv_dim - e0 : STORE_PIECE;
        for (int is_v = 0; is_v <= !v_in_place; is_v++) { /* K's piece, then a quantized V row's */
            to_stored(view.type, (is_v ? v : k) + e0, (uint8_t *)piece, n);
            move_units(&view, is_v, pos, e0 / per_unit, n / per_unit, (uint8_t *)piece, true);
        }
    }
}

void kv_map_read(const kv_map *m, uint32_t layer, uint32_t pos, void *k, void *v) {
    const ops_kv_view view = kv_map_view(m, layer);
    const uint32_t units = (uint32_t)(m->row_bytes / unit_bytes(view.type));
    move_units(&view, false, pos, 0, units, k, false);
    move_units(&view, true, pos, 0, units, v, false);
}

/* K (v false) or V rows [p0, n_pos) of one layer, in position order, gathered a piece at a time. */
static void digest_rows(XXH3_state_t *st, const ops_kv_view *view, bool v, uint32_t p0, uint32_t n_pos) {
    const size_t bytes = unit_bytes(view->type);
    const uint32_t units = (uint32_t)(view->row_bytes / bytes);
    enum { PIECE = 4096 };
    const uint32_t per_piece = (uint32_t)(PIECE / bytes);
    uint8_t piece[PIECE];
    for (uint32_t p = p0; p < n_pos; p++)
        for (uint32_t u0 = 0; u0 < units; u0 += per_piece) {
            const uint32_t n = units - u0 < per_piece ? units - u0 : per_piece;
            move_units(view, v, p, u0, n, piece, false);
            XXH3_64bits_update(st, piece, n * bytes);
        }
}

uint64_t kv_map_digest(const kv_map *m, uint32_t n_layers, const uint32_t *window, uint32_t n_pos) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (uint32_t l = 0; l < n_layers; l++) {
        if (m->layer_at && m->layer_at[l] == KV_NO_ROWS) continue;
        const uint32_t w = window ? window[l] : 0, p0 = w && n_pos >= w ? n_pos - w + 1 : 0;
        ops_kv_view view = kv_map_view(m, l);
        digest_rows(&st, &view, false, p0, n_pos);
        digest_rows(&st, &view, true, p0, n_pos);
    }
    return XXH3_64bits_digest(&st);
}
