/* amx/matmul.c — quantized weight rows × Q8_0 activation rows on AMX-INT8 tiles (prefill), bit for bit the reference's
 * dots (ref/dot.c).
 *
 * WHY: with 16 or more activation rows a product is dominated by its integer block sums, and one tdpbssd gives a
 * block's sums for 16 activation rows × 16 weight rows at once. What remains are the float steps matmul.h fixes for
 * every (row, output, block), done on AVX-512 registers 16 outputs at a time.
 *
 * INVARIANT: every output gets exactly the IEEE operations of the reference dot on the same operands in the same order.
 * Integer block sums are exact in any order, so the tiles may produce them; each of an output's 8 lanes is its own
 * chain over blocks k, k+8, k+16, .., so the lanes run one after another, a lane's 16 × 16 outputs in 16 registers, and
 * meet last in matmul.h's tree.
 *
 * Layout: the activation rows are read in place — tile A is 16 rows × one block's 32 quants, the rows n/32 blocks
 * apart; their scales (and, for the types with a min — Q4_K, Q5_K, Q4_1, Q5_1 — Σx) are gathered once per call into
 * vectors of 16 per block. Q6_K and Q3_K take a block in two halves of 16 quants (tiles A · B and A2 · B2), each half's
 * sums scaled by its own sub-block scale, as matmul.h's Q6_K order; IQ4_XS, one scale per block, takes it whole. Weight
 * rows are rearranged 16 at a time (a panel), a chunk of blocks at a time, into tile B's layout (row k of a block's B:
 * quants 4k..4k+3 of each of the 16 weight rows) as signed bytes, with each block's float factors as vectors of 16; a
 * chunk then serves every group of 16 activation rows while it is in L1. Rows packed at load (the avx512 variant's
 * layout, which its decode tiles read) are rearranged from that layout into the same tiles B (Q8_0's +128 undone).
 * Lanes' partial sums wait in a buffer between chunks, so the stack use (about 380 KB) does not grow with n.
 *
 * Cost, per block of 16 × 16 outputs (Sapphire Rapids, TSC cycles at 2.6 GHz): the tiles' part — load A, load B,
 * tdpbssd, store C — about 32, the scaling (16 × convert, multiply, fused multiply-add) about 17 alone, and about 50
 * together: they overlap only in part, and while tiles are in use port 5 runs no 512-bit multiply or FMA. Neither a
 * biased tile start (an add in place of the convert), nor a copy of the activations (no row of A then straddles cache
 * lines), nor two alternating sets of tiles, nor prefetching the next panel's weights moved that beyond noise.
 *
 * Edges: a last group of fewer than 16 activation rows is the call's last 16 rows (rows done twice get the same bits);
 * with fewer than 16 rows in all, the tiles are configured that many rows high. A last panel of fewer than 16 weight
 * rows is padded with zero weights. Outputs past n_out or n_rows are never written. Rows of weights are gathered at
 * 32-bit offsets: 15 · w_row_bytes must stay below 2^31.
 *
 * Thread-safety: no mutable global state; each call loads its tile configuration and releases the tiles, so concurrent
 * calls on other threads are independent. The process must have been granted AMX tile data (arch_prctl
 * ARCH_REQ_XCOMP_PERM) before the first call. */
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amx.h"
#include "avx512/avx512.h"
#include "order.h"
#include "traits.h"

#define TILE_ROWS 16    /* activation rows of a tile (M) */
#define TILE_COLS 16    /* weight rows of a panel (N) */
#define LANES 8         /* block b goes to lane b % 8 (matmul.h) */
#define B_ROW 64        /* a row of a tile B: 16 weight rows × 4 quants */
#define B_BYTES 512     /* one block's tile B: 8 rows */
#define CHUNK_BLOCKS 64 /* blocks of a panel rearranged at a time: 32 KB of tiles B, whole super-blocks */
#define ROW_GROUPS 8    /* groups of 16 activation rows per pass over the weights (their partial sums: 64 KB) */

/* Tile registers. Q8_0, Q4_0, Q4_K, IQ4_XS: C = A · B, one block. Q6_K, Q3_K: the block's halves apart, C = A · B over
 * quants 0..15 and C2 = A2 · B2 over 16..31, each with its own scale. */
#define T_C 0
#define T_A 1
#define T_B 2
#define T_C2 4
#define T_A2 5
#define T_B2 6

/* The activation side of a group of 16 rows, per block: the rows' scales d_x, and (Q4_K) their Σx as floats, as
 * vectors of 16, so each row's factor is one broadcast from a fixed offset. A pass over the weights takes as many
 * groups as XSIDE_BYTES holds (at most ROW_GROUPS, at least one): 128 rows up to n = 16384 (Q4_K: 8192). */
#define XSIDE_BYTES (256 * 1024)

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* A panel's chunk: tiles B and the factors of each block, one per weight row. */
typedef struct {
    int8_t q[CHUNK_BLOCKS][B_BYTES];     /* Q6_K: quants 0..15 in the first half (4 rows), 16..31 in the second */
    float d[CHUNK_BLOCKS][TILE_COLS];    /* Q8_0, Q4_0: the block's scale; Q4_K: d · sc (exact); Q6_K form: d */
    float dm[CHUNK_BLOCKS][TILE_COLS];   /* Q4_K: -dmin · m (exact) */
    float sc[2][CHUNK_BLOCKS][TILE_COLS]; /* Q6_K form: scales of quants 0..15, 16..31 (IQ4_XS: ls_k, sc[0]) */
} wpanel;

/* The float steps a type's blocks take (matmul.h): Q8_0's fmaf(d_w · d_x, s, lane) for the signed block types, Q4_K's
 * fmaf(d_x, fmaf(d, s, m · t), lane) for those with a min (Q4_1, Q5_1, Q5_K), Q6_K's halves (Q3_K), and IQ4_XS's fmaf(d
 * · d_x, ls · s, lane) on a whole block. */
static ggml_type step_form(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_1: return GGML_TYPE_Q4_K;
    case GGML_TYPE_Q6_K:
    case GGML_TYPE_Q3_K: return GGML_TYPE_Q6_K;
    case GGML_TYPE_IQ4_XS: return GGML_TYPE_IQ4_XS;
    default: return GGML_TYPE_Q8_0;
    }
}

/* The compiler sees neither the tiles' reads of memory nor ldtilecfg's whole operand: stores to p must be done. */
static inline void stores_done(const void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

static void set_tile(tile_config *cfg, int tile, int rows, int bytes_per_row) {
    cfg->rows[tile] = (uint8_t)rows;
    cfg->colsb[tile] = (uint16_t)bytes_per_row;
}

/* Tiles for one call: C, A (and C2, A2) rows high, the activation rows of a group. */
static void configure(ggml_type type, int rows) {
    _Alignas(64) tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    if (step_form(type) == GGML_TYPE_Q6_K) {
        set_tile(&cfg, T_C, rows, 64), set_tile(&cfg, T_A, rows, 16), set_tile(&cfg, T_B, 4, 64);
        set_tile(&cfg, T_C2, rows, 64), set_tile(&cfg, T_A2, rows, 16), set_tile(&cfg, T_B2, 4, 64);
    } else {
        set_tile(&cfg, T_C, rows, 64), set_tile(&cfg, T_A, rows, 32), set_tile(&cfg, T_B, 8, 64);
    }
    stores_done(&cfg);
    _tile_loadconfig(&cfg);
}

/* ---- weight panels ------------------------------------------------------------------------------ */

/* The panel's weight rows i and i + 8 (i < 8) share a register: row i's 32 quants of a block in the low half, row
 * i + 8's in the high half. Rows at or past c_rows are padding: read as row 0 (always there), zeroed by pad_mask (a
 * mask of dwords, so it also serves the instructions that have no byte-masked form). */
static inline const uint8_t *panel_row(const uint8_t *w, size_t w_row_bytes, int c_rows, int i) {
    return w + (i < c_rows ? (size_t)i : 0) * w_row_bytes;
}

static inline __mmask16 pad_mask(int c_rows, int i) {
    return (__mmask16)((i < c_rows ? 0x00FF : 0) | (i + 8 < c_rows ? 0xFF00 : 0));
}

static inline __m512i row_pair(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

/* Dword o (o < 8) of the 16 rows of z (row pairs as above), in row order, as 64 bytes at dst + (o % 4) · step +
 * (o / 4) · half: one 8 × 8 dword transpose per 256-bit half. From a natural block's quants (step B_ROW, half
 * 4 · B_ROW) that is its tile B, dword k of every row making row k. */
static inline void store_b(const __m512i z[8], void *dst, size_t step, size_t half) {
    __m512i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);     /* per 128 bits: dwords 0, 1 of rows i, i+1 */
        t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]); /* dwords 2, 3 */
    }
    for (int h = 0; h < 8; h += 4) { /* u[h + c]: dword c (c + 4 in the odd 128 bits) of 4 rows */
        u[h] = _mm512_unpacklo_epi64(t[h], t[h + 2]);
        u[h + 1] = _mm512_unpackhi_epi64(t[h], t[h + 2]);
        u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
        u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
    }
    const __m512i even = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i odd = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int c = 0; c < 4; c++) {
        _mm512_store_si512((uint8_t *)dst + step * c, _mm512_permutex2var_epi64(u[c], even, u[c + 4]));
        _mm512_store_si512((uint8_t *)dst + half + step * c, _mm512_permutex2var_epi64(u[c], odd, u[c + 4]));
    }
}

/* The f16 scales of the 16 rows' blocks at byte offset off of each row (padding: 0), as f32. */
static inline __m512 row_scales(const uint8_t *w, __m512i row_offsets, __mmask16 real, size_t off) {
    const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), real, row_offsets, w + off, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
}

/* MXFP4: the 16 rows' block scales 2^(e - 128) from the E8M0 bytes at offset off (ord_e8m0_half's bits: (e - 1) << 23,
 * or 0x00200000 << e for e < 2), exact; padding rows 0. */
static inline __m512 e8m0_f32(__mmask16 real, __m512i e) {
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
    const __m512i bits = _mm512_mask_sllv_epi32(normal, small, _mm512_set1_epi32(0x00200000), e);
    return _mm512_maskz_mov_ps(real, _mm512_castsi512_ps(bits));
}

static inline __m512 row_e8m0_scales(const uint8_t *w, __m512i row_offsets, __mmask16 real, size_t off) {
    const __m512i bytes = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), real, row_offsets, w + off, 1);
    return e8m0_f32(real, _mm512_and_si512(bytes, _mm512_set1_epi32(255)));
}

static inline __m512i row_offsets(size_t w_row_bytes) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32((int)w_row_bytes));
}

/* 16 quant bytes of two rows as their 32 nibbles each: in each 256-bit half (row lo, row hi), the low nibbles then
 * the high ones — a 32-element block's elements in order (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4). */
static inline __m512i nibble_pair(const uint8_t *lo, const uint8_t *hi) {
    const long long by4 = 0x0004000400040004ll; /* the second 128-bit lane of each half shifted by 4 */
    const __m512i shift = _mm512_setr_epi64(0, 0, by4, by4, 0, 0, by4, by4);
    const __m512i x =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lo))),
                           _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hi)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(x, shift), _mm512_set1_epi8(15));
}

/* Signed Q4_0 quants, nibble - 8. */
static inline __m512i q4_0_pair(const uint8_t *lo, const uint8_t *hi) {
    return _mm512_sub_epi8(nibble_pair(lo, hi), _mm512_set1_epi8(8));
}

/* Q5_0 / Q5_1 fifth bits of two rows (their 32-bit words qh) as 16: byte e of each half holds bit e of its word. */
static inline __m512i fifth_pair(const uint8_t *lo, const uint8_t *hi) {
    uint32_t a, b;
    memcpy(&a, lo, 4);
    memcpy(&b, hi, 4);
    const __m512i words =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32((int)a)), _mm256_set1_epi32((int)b), 1);
    const long long b1 = 0x0101010101010101ll, b2 = 2 * b1, b3 = 3 * b1; /* byte e takes the word's byte e / 8 */
    const __m512i bytes = _mm512_shuffle_epi8(words, _mm512_setr_epi64(0, b1, b2, b3, 0, b1, b2, b3));
    const __mmask64 set = _mm512_test_epi8_mask(bytes, _mm512_set1_epi64((long long)0x8040201008040201ull));
    return _mm512_maskz_mov_epi8(set, _mm512_set1_epi8(16));
}

/* Bit `bit` of each byte of x moved to bit `at` (the rest 0): Q5_K's fifth bits of one 32-element sub-block (at 4),
 * Q3_K's high bits (at 2). Both bits lie in the same byte, so the 16-bit shifts carry nothing across bytes that the
 * mask keeps. */
static inline __m512i bit_as(__m512i x, int bit, int at) {
    const __m512i moved =
        bit <= at ? _mm512_slli_epi16(x, (unsigned)(at - bit)) : _mm512_srli_epi16(x, (unsigned)(bit - at));
    return _mm512_and_si512(moved, _mm512_set1_epi8((char)(1 << at)));
}

/* Nibbles as the values of a 16-entry table (a byte shuffle of it in every 128-bit lane): IQ4_NL's / IQ4_XS's
 * non-linear values, MXFP4's doubled E2M1 ones. */
static inline __m512i table_values(const int8_t table16[16], __m512i nibbles) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)table16)), nibbles);
}

static inline __m512i iq4_values(__m512i nibbles) { return table_values(ord_iq4_values, nibbles); }

/* A 32-element block's quants of two rows (the blocks at lo and hi) as the signed bytes of its tile B. */
static inline __m512i block_pair(ggml_type type, const uint8_t *lo, const uint8_t *hi) {
    switch (type) {
    case GGML_TYPE_Q8_0: return row_pair(lo + offsetof(block_q8_0, qs), hi + offsetof(block_q8_0, qs));
    case GGML_TYPE_Q4_0: return q4_0_pair(lo + offsetof(block_q4_0, qs), hi + offsetof(block_q4_0, qs));
    case GGML_TYPE_Q4_1: return nibble_pair(lo + offsetof(block_q4_1, qs), hi + offsetof(block_q4_1, qs));
    case GGML_TYPE_Q5_0:
        return _mm512_sub_epi8(
            _mm512_or_si512(nibble_pair(lo + offsetof(block_q5_0, qs), hi + offsetof(block_q5_0, qs)),
                            fifth_pair(lo + offsetof(block_q5_0, qh), hi + offsetof(block_q5_0, qh))),
            _mm512_set1_epi8(16));
    case GGML_TYPE_Q5_1:
        return _mm512_or_si512(nibble_pair(lo + offsetof(block_q5_1, qs), hi + offsetof(block_q5_1, qs)),
                               fifth_pair(lo + offsetof(block_q5_1, qh), hi + offsetof(block_q5_1, qh)));
    case GGML_TYPE_MXFP4: /* each nibble's doubled E2M1 value */
        return table_values(ord_mxfp4_values,
                            nibble_pair(lo + offsetof(block_mxfp4, qs), hi + offsetof(block_mxfp4, qs)));
    default: /* IQ4_NL: each nibble's value in the non-linear table */
        return iq4_values(nibble_pair(lo + offsetof(block_iq4_nl, qs), hi + offsetof(block_iq4_nl, qs)));
    }
}

/* Blocks [b0, b0 + nblk) of a 32-element block type's panel rows w (c_rows of them, w_row_bytes apart): the quants as
 * tiles B; the f16 scale d (at the block's start; MXFP4: its E8M0 scale), and for Q4_1 / Q5_1 the f16 m after it
 * (matmul.h: the Q4_K form, fmaf(d_x, fmaf(d, s, m · t), lane), so d goes where Q4_K's d · sc goes and m where its
 * -dmin · m does). */
static void panel_blocks(ggml_type type, const uint8_t *w, size_t w_row_bytes, int c_rows, size_t b0, size_t nblk,
                         wpanel *p) {
    const __m512i offsets = row_offsets(w_row_bytes);
    const __mmask16 real = (__mmask16)((1u << c_rows) - 1);
    const size_t bytes = kern_type_traits(type)->block_bytes;
    const bool min = type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_1;
    for (size_t j = 0; j < nblk; j++) {
        const size_t off = (b0 + j) * bytes;
        __m512i z[8];
        for (int i = 0; i < 8; i++)
            z[i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i),
                                         block_pair(type, panel_row(w, w_row_bytes, c_rows, i) + off,
                                                    panel_row(w, w_row_bytes, c_rows, i + 8) + off));
        store_b(z, p->q[j], B_ROW, 4 * B_ROW);
        _mm512_store_ps(p->d[j], type == GGML_TYPE_MXFP4 ? row_e8m0_scales(w, offsets, real, off)
                                                        : row_scales(w, offsets, real, off));
        if (min) _mm512_store_ps(p->dm[j], row_scales(w, offsets, real, off + sizeof(uint16_t)));
    }
}

/* A K-quant super-block's factors for weight row i of the panel, blocks j0..j0+7 (a padding row, row false: 0).
 * Q4_K (sc, m: its decoded scales and mins): d · sc and -dmin · m, exact; Q6_K (sc: its 16 scales): d, and the
 * scales of each block's two halves. */
static void q4_K_row_factors(wpanel *p, size_t j0, int i, bool row, uint16_t d16, uint16_t dmin16, const int32_t sc[8],
                             const int32_t m[8]) {
    const float d = row ? f16_to_f32(d16) : 0.0f, mdmin = row ? -f16_to_f32(dmin16) : 0.0f;
    for (int k = 0; k < LANES; k++) {
        p->d[j0 + k][i] = d * (float)(row ? sc[k] : 0);
        p->dm[j0 + k][i] = mdmin * (float)(row ? m[k] : 0);
    }
}

static void q6_K_row_factors(wpanel *p, size_t j0, int i, bool row, uint16_t d16, const int8_t sc[16]) {
    for (int k = 0; k < LANES; k++) {
        p->d[j0 + k][i] = row ? f16_to_f32(d16) : 0.0f;
        p->sc[0][j0 + k][i] = row ? (float)sc[2 * k] : 0.0f;
        p->sc[1][j0 + k][i] = row ? (float)sc[2 * k + 1] : 0.0f;
    }
}

/* Super-block g of packed Q6_K rows (its quants at byte q_at of each row, its side at side_at) into blocks j0.. of the
 * panel: register j of the packed layout (its low 4 bits among the nibbles, its high 2 among the 2 registers after
 * them) is row j of every sub-block's tile B, less the offset 32; the factors as panel_q6_K makes them. */
static void panel_packed_q6_K(const uint8_t *w, size_t w_row_bytes, int c_rows, size_t q_at, size_t side_at, size_t j0,
                              wpanel *p) {
    for (int i = 0; i < TILE_COLS; i++) {
        const uint8_t *side = panel_row(w, w_row_bytes, c_rows, i) + side_at;
        uint16_t h;
        memcpy(&h, side, sizeof h);
        q6_K_row_factors(p, j0, i, i < c_rows, h, (const int8_t *)side + sizeof h);
    }
    const __m512i low = _mm512_set1_epi8(15), high = _mm512_set1_epi8(0x30), off32 = _mm512_set1_epi8(32);
    for (int j = 0; j < LANES; j++) {
        __m512i z[8];
        for (int i = 0; i < 8; i++) {
            const uint8_t *a = panel_row(w, w_row_bytes, c_rows, i) + q_at;
            const uint8_t *b = panel_row(w, w_row_bytes, c_rows, i + 8) + q_at;
            const __m512i nib = row_pair(a + 32 * (j % 4), b + 32 * (j % 4));
            const __m512i hb = row_pair(a + 128 + 32 * (j % 2), b + 128 + 32 * (j % 2));
            const int at = 2 * (j / 2); /* register j's high bits, up to bits 4..5 */
            const __m512i hi2 = at < 4 ? _mm512_slli_epi16(hb, 4 - at) : at > 4 ? _mm512_srli_epi16(hb, at - 4) : hb;
            const __m512i lo4 = j < 4 ? nib : _mm512_srli_epi16(nib, 4);
            const __m512i q = _mm512_or_si512(_mm512_and_si512(lo4, low), _mm512_and_si512(hi2, high));
            z[i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i), _mm512_sub_epi8(q, off32));
        }
        store_b(z, p->q[j0] + B_ROW * j, B_BYTES, 4 * B_BYTES);
    }
}

/* Nibbles of packed rows as the signed quants of tiles B: Q4_0's less 8, MXFP4's looked up, Q4_K's as they are. */
static inline __m512i packed_quants(ggml_type type, __m512i nibbles) {
    switch (type) {
    case GGML_TYPE_Q4_0: return _mm512_sub_epi8(nibbles, _mm512_set1_epi8(8));
    case GGML_TYPE_MXFP4: return table_values(ord_mxfp4_values, nibbles);
    default: return nibbles;
    }
}

/* Blocks [b0, b0 + nblk) of packed Q8_0, Q4_0, MXFP4, Q4_K or Q6_K rows (c_rows of them, w_row_bytes apart;
 * avx512_packed_layout, b0 a multiple of 8). Q8_0: register j of a group is the transpose of 8 natural blocks, so the
 * same transpose on it gives dword k, block k's quants 4j..4j+3, of the 16 rows: row j of block k's tile B (the half
 * layout: dwords k and k + 4 are rows j and j + 4 of block k); the +128 is undone on the way, so the tiles and their
 * sums are the natural rows'. Q4_0: register j's low nibbles are that register j, its high nibbles register j + 4 (rows
 * j + 4 of the blocks' tiles B); a half group's 16 bytes per register make the half layout; MXFP4's as Q4_0's, their
 * E8M0 scales 8 bytes a row. Q4_K's nibbles lie as
 * Q4_0's, a super-block per group, its factors made per row from the decoded side bytes; Q6_K's registers are put
 * together from their parts (panel_packed_q6_K). A group's 8 scales per row transpose the same way, as f32, into one
 * vector per block: first, as they lie apart from the quants, so their loads wait on memory while the quants' go on
 * (after the quants, the fill of 4864 x 896 Q8_0 took 5-10% longer than the natural rows', cold, in a product of 128
 * rows; before, 0-4%). */
static void panel_packed(ggml_type type, const uint8_t *w, size_t w_row_bytes, int c_rows,
                         const avx512_packed_layout *layout, size_t b0, size_t nblk, wpanel *p) {
    const __m512i flip = _mm512_set1_epi8((char)0x80), low = _mm512_set1_epi8(15);
    for (size_t j0 = 0; j0 < nblk; j0 += LANES) {
        const size_t g = (b0 + j0) / LANES, at = layout->scales_at + g * layout->side_bytes;
        if (type == GGML_TYPE_Q6_K) {
            panel_packed_q6_K(w, w_row_bytes, c_rows, g * layout->group_bytes, at, j0, p);
            continue;
        }
        __m512i z[8];
        if (type == GGML_TYPE_Q4_K) { /* per row: d · sc and -dmin · m, as panel_q4_K makes them */
            for (int i = 0; i < TILE_COLS; i++) {
                const uint8_t *side = panel_row(w, w_row_bytes, c_rows, i) + at;
                uint16_t h[2];
                int32_t sc[LANES], m[LANES];
                memcpy(h, side, sizeof h);
                for (int k = 0; k < LANES; k++) sc[k] = side[sizeof h + k], m[k] = side[sizeof h + LANES + k];
                q4_K_row_factors(p, j0, i, i < c_rows, h[0], h[1], sc, m);
            }
        } else if (type == GGML_TYPE_MXFP4) {
            for (int i = 0; i < 8; i++) {
                uint64_t lo, hi;
                memcpy(&lo, panel_row(w, w_row_bytes, c_rows, i) + at, sizeof lo);
                memcpy(&hi, panel_row(w, w_row_bytes, c_rows, i + 8) + at, sizeof hi);
                z[i] = _mm512_castps_si512(
                    e8m0_f32(pad_mask(c_rows, i), _mm512_cvtepu8_epi32(_mm_set_epi64x((long long)hi, (long long)lo))));
            }
            store_b(z, p->d[j0], sizeof p->d[0], 4 * sizeof p->d[0]);
        } else {
            for (int i = 0; i < 8; i++) {
                const __m128i lo = _mm_load_si128((const __m128i *)(panel_row(w, w_row_bytes, c_rows, i) + at));
                const __m128i hi = _mm_load_si128((const __m128i *)(panel_row(w, w_row_bytes, c_rows, i + 8) + at));
                z[i] = _mm512_castps_si512(_mm512_maskz_cvtph_ps(pad_mask(c_rows, i), _mm256_set_m128i(hi, lo)));
            }
            store_b(z, p->d[j0], sizeof p->d[0], 4 * sizeof p->d[0]);
        }
        const bool half = nblk - j0 <= LANES / 2; /* only a row's last group holds fewer than 8 blocks */
        const size_t step = half ? 4 * B_ROW : 4 * B_BYTES;
        if (type != GGML_TYPE_Q8_0) { /* nibbles: packed_quants */
            for (int j = 0; j < LANES / 2; j++) {
                const size_t off = g * layout->group_bytes + j * (half ? sizeof(__m128i) : sizeof(__m256i));
                __m512i lo[8], hi[8];
                for (int i = 0; i < 8; i++) {
                    const uint8_t *r_lo = panel_row(w, w_row_bytes, c_rows, i) + off;
                    const uint8_t *r_hi = panel_row(w, w_row_bytes, c_rows, i + 8) + off;
                    if (half) {
                        lo[i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i), packed_quants(type, nibble_pair(r_lo, r_hi)));
                        continue;
                    }
                    const __m512i x = row_pair(r_lo, r_hi);
                    lo[i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i), packed_quants(type, _mm512_and_si512(x, low)));
                    hi[i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i),
                                                   packed_quants(type, _mm512_and_si512(_mm512_srli_epi16(x, 4), low)));
                }
                store_b(lo, p->q[j0] + B_ROW * j, B_BYTES, step);
                if (!half) store_b(hi, p->q[j0] + B_ROW * (j + 4), B_BYTES, step);
            }
            continue;
        }
        for (int j = 0; j < (half ? LANES / 2 : LANES); j++) {
            const size_t off = g * layout->group_bytes + j * sizeof(__m256i);
            for (int i = 0; i < 8; i++)
                z[i] = _mm512_maskz_xor_epi32(pad_mask(c_rows, i),
                                              row_pair(panel_row(w, w_row_bytes, c_rows, i) + off,
                                                       panel_row(w, w_row_bytes, c_rows, i + 8) + off),
                                              flip);
            store_b(z, p->q[j0] + B_ROW * j, B_BYTES, step);
        }
    }
}

/* Super-blocks of Q4_K (Q5_K: the same, with the fifth bits of qh): sub-block 2c is the low nibbles of
 * qs[32c..32c+31] (Q5_K: plus bit 2c of qh[l]), 2c+1 the high ones (bit 2c+1). d · sc and -dmin · m are exact in f32
 * (an f16 times a 6-bit integer), so d · sc times the sum is matmul.h's d · (sc · s). Both blocks begin with d, dmin
 * and the same 12 bytes of scales. */
static void panel_q4_K(ggml_type type, const uint8_t *w, size_t w_row_bytes, int c_rows, size_t b0, size_t nblk,
                       wpanel *p) {
    const __m512i low = _mm512_set1_epi8(15);
    const bool five = type == GGML_TYPE_Q5_K;
    const size_t bytes = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t qs_at = five ? offsetof(block_q5_K, qs) : offsetof(block_q4_K, qs);
    for (size_t j0 = 0; j0 < nblk; j0 += LANES) {
        const size_t off = (b0 + j0) / LANES * bytes;
        for (int c = 0; c < 4; c++) {
            __m512i lo[8], hi[8];
            for (int i = 0; i < 8; i++) {
                const uint8_t *b_lo = panel_row(w, w_row_bytes, c_rows, i) + off;
                const uint8_t *b_hi = panel_row(w, w_row_bytes, c_rows, i + 8) + off;
                const __m512i x = row_pair(b_lo + qs_at + 32 * c, b_hi + qs_at + 32 * c);
                lo[i] = _mm512_and_si512(x, low);
                hi[i] = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
                if (five) {
                    const __m512i h = row_pair(b_lo + offsetof(block_q5_K, qh), b_hi + offsetof(block_q5_K, qh));
                    lo[i] = _mm512_or_si512(lo[i], bit_as(h, 2 * c, 4));
                    hi[i] = _mm512_or_si512(hi[i], bit_as(h, 2 * c + 1, 4));
                }
                lo[i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i), lo[i]);
                hi[i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i), hi[i]);
            }
            store_b(lo, p->q[j0 + 2 * c], B_ROW, 4 * B_ROW);
            store_b(hi, p->q[j0 + 2 * c + 1], B_ROW, 4 * B_ROW);
        }
        for (int i = 0; i < TILE_COLS; i++) {
            const block_q4_K *blk = (const block_q4_K *)(panel_row(w, w_row_bytes, c_rows, i) + off);
            int32_t sc[LANES], m[LANES];
            ord_q4_K_scales(blk->scales, sc, m);
            q4_K_row_factors(p, j0, i, i < c_rows, blk->d, blk->dmin, sc, m);
        }
    }
}

/* Blocks 4h..4h+3 of a Q6_K, Q3_K or IQ4_XS super-block of two rows (the super-blocks at lo and hi) as the signed
 * bytes of their tiles B, q[c] block 4h + c (types.h's layouts). Q6_K: ql's low 4 bits and qh's 2 high bits, less 32.
 * Q3_K: bits 2c..2c+1 of qs[32h + l] with bit 4h + c of hmask[l] as bit 2, less 4 (so less 4 unless that bit is
 * set). IQ4_XS: block 4h + c's 16 bytes of nibbles as IQ4_NL's. */
static inline void half_quants(ggml_type type, const uint8_t *lo, const uint8_t *hi, int h, __m512i q[4]) {
    switch (type) {
    case GGML_TYPE_Q6_K: {
        const __m512i low = _mm512_set1_epi8(15), high = _mm512_set1_epi8(0x30), off32 = _mm512_set1_epi8(32);
        const block_q6_K *b_lo = (const block_q6_K *)lo, *b_hi = (const block_q6_K *)hi;
        const __m512i l0 = row_pair(b_lo->ql + 64 * h, b_hi->ql + 64 * h);
        const __m512i l1 = row_pair(b_lo->ql + 64 * h + 32, b_hi->ql + 64 * h + 32);
        const __m512i hb = row_pair(b_lo->qh + 32 * h, b_hi->qh + 32 * h);
        q[0] = _mm512_or_si512(_mm512_and_si512(l0, low), _mm512_and_si512(_mm512_slli_epi16(hb, 4), high));
        q[1] = _mm512_or_si512(_mm512_and_si512(l1, low), _mm512_and_si512(_mm512_slli_epi16(hb, 2), high));
        q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), low), _mm512_and_si512(hb, high));
        q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), low),
                               _mm512_and_si512(_mm512_srli_epi16(hb, 2), high));
        for (int c = 0; c < 4; c++) q[c] = _mm512_sub_epi8(q[c], off32);
        return;
    }
    case GGML_TYPE_Q3_K: {
        const __m512i x = row_pair(lo + offsetof(block_q3_K, qs) + 32 * h, hi + offsetof(block_q3_K, qs) + 32 * h);
        const __m512i hm = row_pair(lo + offsetof(block_q3_K, hmask), hi + offsetof(block_q3_K, hmask));
        for (int c = 0; c < 4; c++) {
            const __m512i low2 = _mm512_and_si512(_mm512_srli_epi16(x, (unsigned)(2 * c)), _mm512_set1_epi8(3));
            q[c] = _mm512_sub_epi8(_mm512_or_si512(low2, bit_as(hm, 4 * h + c, 2)), _mm512_set1_epi8(4));
        }
        return;
    }
    default: /* IQ4_XS */
        for (int c = 0; c < 4; c++) {
            const size_t at = offsetof(block_iq4_xs, qs) + (size_t)16 * (4 * h + c);
            q[c] = iq4_values(nibble_pair(lo + at, hi + at));
        }
        return;
    }
}

/* A Q6_K, Q3_K or IQ4_XS super-block's factors for one weight row (blk; a padding row, row false: 0), as Q6_K's: d
 * and the scales of each block's two halves — Q3_K's 16 decoded scales (-32..31); IQ4_XS's block scale ls_k for
 * both (its step reads sc[0]). */
static void half_row_factors(ggml_type type, wpanel *p, size_t j0, int i, bool row, const uint8_t *blk) {
    int8_t sc[16];
    uint16_t d16;
    if (type == GGML_TYPE_Q6_K) {
        const block_q6_K *b = (const block_q6_K *)blk;
        memcpy(sc, b->scales, sizeof sc);
        d16 = b->d;
    } else if (type == GGML_TYPE_Q3_K) {
        const block_q3_K *b = (const block_q3_K *)blk;
        int32_t s32[16];
        ord_q3_K_scales(b->scales, s32);
        for (int k = 0; k < 16; k++) sc[k] = (int8_t)s32[k];
        d16 = b->d;
    } else {
        const block_iq4_xs *b = (const block_iq4_xs *)blk;
        for (int k = 0; k < LANES; k++) sc[2 * k] = sc[2 * k + 1] = (int8_t)ord_iq4_xs_scale(b, k);
        d16 = b->d;
    }
    q6_K_row_factors(p, j0, i, row, d16, sc);
}

/* Super-blocks of Q6_K, Q3_K or IQ4_XS (matmul.h gives all three Q6_K's order), half h holding blocks 4h..4h+3. A tile
 * B's rows 0..3 are quants 0..15 and rows 4..7 quants 16..31, so the same tiles serve two half tiles (Q6_K, Q3_K) or
 * one whole (IQ4_XS). */
static void panel_halves(ggml_type type, const uint8_t *w, size_t w_row_bytes, int c_rows, size_t b0, size_t nblk,
                         wpanel *p) {
    const size_t bytes = kern_type_traits(type)->block_bytes;
    for (size_t j0 = 0; j0 < nblk; j0 += LANES) {
        const size_t off = (b0 + j0) / LANES * bytes;
        for (int h = 0; h < 2; h++) {
            __m512i q[4][8];
            for (int i = 0; i < 8; i++) {
                __m512i qi[4];
                half_quants(type, panel_row(w, w_row_bytes, c_rows, i) + off,
                            panel_row(w, w_row_bytes, c_rows, i + 8) + off, h, qi);
                for (int c = 0; c < 4; c++) q[c][i] = _mm512_maskz_mov_epi32(pad_mask(c_rows, i), qi[c]);
            }
            for (int c = 0; c < 4; c++) store_b(q[c], p->q[j0 + 4 * h + c], B_ROW, 4 * B_ROW);
        }
        for (int i = 0; i < TILE_COLS; i++)
            half_row_factors(type, p, j0, i, i < c_rows, panel_row(w, w_row_bytes, c_rows, i) + off);
    }
}

/* packed: the layout of packed rows (Q8_0, Q4_0, Q4_K, Q6_K), or NULL for natural rows. */
static void fill_panel(ggml_type type, const avx512_packed_layout *packed, const uint8_t *w, size_t w_row_bytes,
                       int c_rows, size_t b0, size_t nblk, wpanel *p) {
    if (packed)
        panel_packed(type, w, w_row_bytes, c_rows, packed, b0, nblk, p);
    else if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K)
        panel_q4_K(type, w, w_row_bytes, c_rows, b0, nblk, p);
    else if (type == GGML_TYPE_Q6_K || type == GGML_TYPE_Q3_K || type == GGML_TYPE_IQ4_XS)
        panel_halves(type, w, w_row_bytes, c_rows, b0, nblk, p);
    else
        panel_blocks(type, w, w_row_bytes, c_rows, b0, nblk, p);
    stores_done(p);
}

/* ---- the activation side ------------------------------------------------------------------------ */

/* Vectors of the rows first_row .. first_row + 15 (the rows past n_rows: 0) per block: xs[b * per_block + 16 * v + r],
 * v = 0: d_x, v = 1 (Q4_K): Σx. */
static void fill_xside(const block_q8_act *xq, size_t nb, uint32_t first_row, int rows, int per_block, float *xs) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (size_t b = 0; b < nb; b++) {
        float *v = xs + b * (size_t)per_block;
        for (int r = 0; r < TILE_ROWS; r++) {
            v[r] = 0.0f;
            if (per_block == 2 * TILE_ROWS) v[TILE_ROWS + r] = 0.0f;
            if (r >= rows) continue;
            const block_q8_act *xb = xq + (first_row + (size_t)r) * nb + b;
            v[r] = xb->d;
            if (per_block == 2 * TILE_ROWS) { /* Σx: the bytes' sum as unsigned (x + 128), less 32 · 128 */
                const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)xb->qs), flip);
                const __m256i sad = _mm256_sad_epu8(u, _mm256_setzero_si256());
                const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
                v[TILE_ROWS + r] = (float)((int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - QK * 128);
            }
        }
    }
}

/* ---- the lanes of a group ------------------------------------------------------------------------ */

/* The blocks are a pipeline: the tiles of the block LAG places ahead are computed and stored before a block's sums
 * are scaled, so the vector loads rarely wait on a tile store still in flight (896 x 4864 Q4_0, 128 rows: 0.095 ns
 * per row, output and block with none, 0.087 with 3; 4 and 6 no better). */
#define LAG 3
#define SUM_SLOTS 4 /* stored blocks in flight: LAG + 1 */

/* Where tiles are stored for the vector registers to read: a block's sums C (and C2) per slot. */
typedef struct {
    int32_t s[SUM_SLOTS][2][TILE_ROWS][TILE_COLS];
} tile_out;

static inline __m512 sum_f32(const int32_t s[TILE_COLS]) { return _mm512_cvtepi32_ps(_mm512_load_si512(s)); }


/* Tiles of block j: its 16 activation rows (x[j], rows x_stride bytes apart) · the panel's tile B, into s. */
static inline __attribute__((always_inline)) void block_sums(ggml_type type, const block_q8_act *xb, long x_stride,
                                                             const int8_t *b, int32_t s[2][TILE_ROWS][TILE_COLS]) {
    if (type == GGML_TYPE_Q6_K) {
        _tile_loadd(T_A, xb->qs, x_stride);
        _tile_loadd(T_A2, xb->qs + 16, x_stride);
        _tile_loadd(T_B, b, 64);
        _tile_loadd(T_B2, b + B_BYTES / 2, 64);
        _tile_zero(T_C);
        _tile_zero(T_C2);
        _tile_dpbssd(T_C, T_A, T_B);
        _tile_dpbssd(T_C2, T_A2, T_B2);
        _tile_stored(T_C, s[0], 64);
        _tile_stored(T_C2, s[1], 64);
        return;
    }
    _tile_loadd(T_A, xb->qs, x_stride);
    _tile_loadd(T_B, b, 64);
    _tile_zero(T_C);
    _tile_dpbssd(T_C, T_A, T_B);
    _tile_stored(T_C, s[0], 64);
}

/* acc[r] (activation row r, the panel's 16 weight rows) takes block j's step of matmul.h's lane, from its sums s;
 * xs: the group's activation side at block j. */
static inline __attribute__((always_inline)) void block_step(ggml_type type, const int32_t s[2][TILE_ROWS][TILE_COLS],
                                                             const float *xs, const wpanel *p, size_t j,
                                                             __m512 acc[TILE_ROWS]) {
    switch (type) {
    case GGML_TYPE_Q4_K: {
        const __m512 dsc = _mm512_load_ps(p->d[j]), dm = _mm512_load_ps(p->dm[j]);
        for (int r = 0; r < TILE_ROWS; r++) { /* fmaf(d_x, fmaf(d · sc, (float)s, dm · (float)t), lane) */
            const __m512 min_term = _mm512_mul_ps(dm, _mm512_set1_ps(xs[TILE_ROWS + r]));
            const __m512 wsum = _mm512_fmadd_ps(dsc, sum_f32(s[0][r]), min_term);
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(xs[r]), wsum, acc[r]);
        }
        return;
    }
    case GGML_TYPE_Q6_K: {
        const __m512 d = _mm512_load_ps(p->d[j]), sc0 = _mm512_load_ps(p->sc[0][j]), sc1 = _mm512_load_ps(p->sc[1][j]);
        /* The reference's s_b = sc0·S0 + sc1·S1 is an integer below 2^24, and so is each product (Q6_K: |sc| <= 128,
         * |S| <= 16 · 32 · 127; Q3_K: |sc| <= 32, |S| <= 16 · 4 · 127): sc0 · S0 is exact, and the fused step rounds
         * the exact s_b, which it keeps, so sum == (float)s_b. d · d_x: the reference's product of the same two
         * floats; then its fmaf(d · d_x, s_b, lane). */
        for (int r = 0; r < TILE_ROWS; r++) {
            const __m512 sum = _mm512_fmadd_ps(sc1, sum_f32(s[1][r]), _mm512_mul_ps(sc0, sum_f32(s[0][r])));
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xs[r])), sum, acc[r]);
        }
        return;
    }
    case GGML_TYPE_IQ4_XS: {
        /* The reference's s_b = ls · S over the whole block, |s_b| <= 16516096 < 2^24 (matmul.h), so ls · (float)S is
         * exact and equals (float)s_b; then its fmaf(d · d_x, s_b, lane). One tile where Q6_K's halves take two: with
         * one scale for both halves nothing needs them apart (prefill 512, iq4_xs: about 20% faster). */
        const __m512 d = _mm512_load_ps(p->d[j]), ls = _mm512_load_ps(p->sc[0][j]);
        for (int r = 0; r < TILE_ROWS; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xs[r])), _mm512_mul_ps(ls, sum_f32(s[0][r])),
                                     acc[r]);
        return;
    }
    default: {
        const __m512 dw = _mm512_load_ps(p->d[j]);
        for (int r = 0; r < TILE_ROWS; r++) /* fmaf(d_w · d_x, (float)s, lane) */
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xs[r])), sum_f32(s[0][r]), acc[r]);
        return;
    }
    }
}

/* The block after j when a chunk of nblk blocks is taken lane by lane (lane 0's j = 0, 8, 16, .., then lane 1's),
 * or nblk after the last. */
static inline size_t lane_order_next(size_t j, size_t nblk) {
    if (j + LANES < nblk) return j + LANES;
    const size_t k = j % LANES + 1;
    return k < LANES && k < nblk ? k : nblk;
}

/* A group's 8 lanes over a chunk's blocks (x, xs: its rows and activation side at the chunk's first block), each
 * from its partial sums in part[k] (or +0 on the first chunk) back into them. The tiles run LAG blocks ahead in
 * lane order, across lanes too, so a lane of 3 blocks (n = 768) still finds its sums stored. */
static inline __attribute__((always_inline)) void group_lanes(ggml_type type, const block_q8_act *x, long x_stride,
                                                              const float *xs, int per_block, const wpanel *p,
                                                              size_t nblk, bool first, tile_out *o,
                                                              float part[LANES][TILE_ROWS][TILE_COLS]) {
    size_t ahead = 0, issued = 0, done = 0; /* the next block to compute; blocks computed, and scaled */
    for (; ahead < nblk && issued < LAG; ahead = lane_order_next(ahead, nblk), issued++)
        block_sums(type, &x[ahead], x_stride, p->q[ahead], o->s[issued % SUM_SLOTS]);
    for (size_t k = 0; k < LANES; k++) {
        __m512 acc[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) acc[r] = first ? _mm512_setzero_ps() : _mm512_load_ps(part[k][r]);
        for (size_t j = k; j < nblk; j += LANES, done++) {
            if (ahead < nblk) {
                block_sums(type, &x[ahead], x_stride, p->q[ahead], o->s[issued % SUM_SLOTS]);
                ahead = lane_order_next(ahead, nblk);
                issued++;
            }
            block_step(type, o->s[done % SUM_SLOTS], xs + j * (size_t)per_block, p, j, acc);
        }
        for (int r = 0; r < TILE_ROWS; r++) _mm512_store_ps(part[k][r], acc[r]);
    }
}

static void run_group(ggml_type type, const block_q8_act *x, long x_stride, const float *xs, int per_block,
                      const wpanel *p, size_t nblk, bool first, tile_out *o, float part[LANES][TILE_ROWS][TILE_COLS]) {
    switch (step_form(type)) {
    case GGML_TYPE_Q8_0:
        group_lanes(GGML_TYPE_Q8_0, x, x_stride, xs, per_block, p, nblk, first, o, part);
        break;
    case GGML_TYPE_Q4_K:
        group_lanes(GGML_TYPE_Q4_K, x, x_stride, xs, per_block, p, nblk, first, o, part);
        break;
    case GGML_TYPE_IQ4_XS:
        group_lanes(GGML_TYPE_IQ4_XS, x, x_stride, xs, per_block, p, nblk, first, o, part);
        break;
    default:
        group_lanes(GGML_TYPE_Q6_K, x, x_stride, xs, per_block, p, nblk, first, o, part);
        break;
    }
}

/* y rows [0, rows) of a group, columns [0, cols): its lanes in matmul.h's tree. */
static void store_group(float part[LANES][TILE_ROWS][TILE_COLS], int rows, int cols, float *y, size_t ldy) {
    const __mmask16 mask = (__mmask16)((1u << cols) - 1);
    for (int r = 0; r < rows; r++) {
        __m512 l[LANES];
        for (int k = 0; k < LANES; k++) l[k] = _mm512_load_ps(part[k][r]);
        const __m512 even = _mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6]));
        const __m512 odd = _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7]));
        _mm512_mask_storeu_ps(y + r * ldy, mask, _mm512_add_ps(even, odd));
    }
}

/* y[r*ldy + o] = ref_dot(type, natural weight row o, NULL, xq + r*(n/QK), n) bit for bit, for r < n_rows, o < n_out;
 * type Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS; w: natural GGUF weight rows
 * (arrays of its blocks, rows w_row_bytes apart) or, when packed (Q8_0, Q4_0, MXFP4, Q4_K, Q6_K), rows as avx512_pack_rows
 * leaves them; xq: n_rows activation rows of n/QK block_q8_act blocks each. */
void amx_matmul_rows(ggml_type type, bool packed, const void *w, size_t w_row_bytes, uint32_t n_out,
                     const block_q8_act *xq, uint32_t n_rows, size_t n, float *y, size_t ldy) {
    if (n_rows == 0 || n_out == 0) return;
    const size_t nb = n / QK;
    const long x_stride = (long)(nb * sizeof(block_q8_act));
    const int tile_rows = n_rows < TILE_ROWS ? (int)n_rows : TILE_ROWS;
    const int per_block = (step_form(type) == GGML_TYPE_Q4_K ? 2 : 1) * TILE_ROWS; /* floats of the activation side */
    const size_t group_floats = nb * (size_t)per_block;
    const size_t fit = XSIDE_BYTES / sizeof(float) / group_floats;
    const avx512_packed_layout layout = packed ? avx512_packed_layout_of(type, n) : (avx512_packed_layout){0, 0, 0};
    const int pass_groups = fit >= ROW_GROUPS ? ROW_GROUPS : fit >= 1 ? (int)fit : 1;
    _Alignas(64) wpanel panel;
    _Alignas(64) float part[ROW_GROUPS][LANES][TILE_ROWS][TILE_COLS];
    _Alignas(64) float xside[XSIDE_BYTES / sizeof(float)];
    _Alignas(64) tile_out out;
    memset(&out, 0, sizeof out); /* rows past tile_rows are read, never written: sums of 0 */
    configure(type, tile_rows);
    for (uint32_t r0 = 0; r0 < n_rows; r0 += (uint32_t)pass_groups * TILE_ROWS) {
        const uint32_t left = n_rows - r0;
        const int groups =
            left >= (uint32_t)pass_groups * TILE_ROWS ? pass_groups : (int)((left + TILE_ROWS - 1) / TILE_ROWS);
        uint32_t first_row[ROW_GROUPS];
        for (int g = 0; g < groups; g++) { /* a last partial group: the call's last 16 rows */
            const uint32_t start = r0 + (uint32_t)g * TILE_ROWS;
            first_row[g] = start + (uint32_t)tile_rows <= n_rows ? start : n_rows - (uint32_t)tile_rows;
            fill_xside(xq, nb, first_row[g], tile_rows, per_block, xside + (size_t)g * group_floats);
        }
        for (uint32_t o0 = 0; o0 < n_out; o0 += TILE_COLS) {
            const int cols = n_out - o0 < TILE_COLS ? (int)(n_out - o0) : TILE_COLS;
            for (size_t b0 = 0; b0 < nb; b0 += CHUNK_BLOCKS) {
                const size_t nblk = nb - b0 < CHUNK_BLOCKS ? nb - b0 : CHUNK_BLOCKS;
                fill_panel(type, packed ? &layout : NULL, (const uint8_t *)w + o0 * w_row_bytes, w_row_bytes, cols, b0,
                           nblk, &panel);
                for (int g = 0; g < groups; g++) {
                    const block_q8_act *x = xq + first_row[g] * nb + b0;
                    const float *xs = xside + (size_t)g * group_floats + b0 * (size_t)per_block;
                    run_group(type, x, x_stride, xs, per_block, &panel, nblk, b0 == 0, &out, part[g]);
                }
            }
            for (int g = 0; g < groups; g++)
                store_group(part[g], tile_rows, cols, y + first_row[g] * ldy + o0, ldy);
        }
    }
    _tile_release();
}
