/* avx2/layout.h — the register layouts that the AVX2 and AVX-512 variants' matrix-product files share: a block's and
 * a group's quants in registers, the rows packed at load, the activation side of a group and a panel of weights, and
 * the functions those files call in one another (named by VARIANT, so each variant has its own).
 *
 * Every layout keeps the reference's lanes (matmul.h, ref/dot.c): block b of a row is lane b % 8, and a vertical
 * integer sum of a group's registers is its 8 exact block sums, so no tile, row count or packing changes a bit.
 * Included by tiles.c, packed.c, panels.c, panel_tiles.c, matmul.c and dot.c after VARIANT is defined (avx2.h or the
 * avx512 twin that includes them); where VNNI's layout differs it says so (MM_VNNI).
 */
#ifndef FKV_KERNELS_AVX2_LAYOUT_H
#define FKV_KERNELS_AVX2_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define MM_VNNI 1
#else
#define MM_VNNI 0
#endif

/* Exact Σ w·x of one Q8_0 block as 8 partial int32 sums. maddubs takes |w| (0..128, unsigned) against
 * x carrying w's sign; x is in [-127, 127] (quant.h), so each 16-bit pair sum is at most 2·128·127 and
 * never saturates, and negating x never overflows. */
static inline __m256i block_sums_q8_0(__m256i wq, __m256i xq) {
    return sums_u8s8(_mm256_setzero_si256(), _mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
}

/* The 32 quants of one Q4_0 block as unsigned bytes 0..15 in element order: bytes 0..15 the low
 * nibbles (elements 0..15), bytes 16..31 the high nibbles (elements 16..31). */
static inline __m256i block_nibbles_q4_0(const block_q4_0 *w) {
    __m128i packed = _mm_loadu_si128((const __m128i *)w->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(15));
}

/* The 32 nibbles of a Q4_0-shaped block: element j the low nibble of qs[j], element j + 16 its high nibble. The 16
 * bytes in both halves (a broadcast load), the upper half shifted by 4: no cross-half shuffle. */
static inline __m256i nibbles32(const uint8_t qs[QK / 2]) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(15));
}

/* Σ w · x for signed w (|w| <= 127) as 8 partial sums: |w| against x carrying w's sign, so maddubs's pair sums stay
 * within 2 · 127 · 127 < 32767, and negating x (never -128: quant.h) cannot overflow. */
static inline __m256i sums_signed(__m256i w, __m256i x) {
    return sums_u8s8(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}

/* The 32 values of one block of nibbles that index a 16-entry table (IQ4_NL's block, an IQ4_XS sub-block: the
 * non-linear values; MXFP4's block: the doubled E2M1 ones), in element order. */
static inline __m256i table_values(const int8_t table16[16], const uint8_t qs[QK / 2]) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table16));
    return _mm256_shuffle_epi8(table, nibbles32(qs));
}

/* MXFP4's scales 2^(e - 128) of 8 E8M0 bytes, byte k in lane k (ord_e8m0_half's bits: (e - 1) << 23, or
 * 0x00200000 << e for e < 2). */
static inline __m256 e8m0_bytes_f32(uint64_t bytes) {
    const __m256i e = bytes_epi32(bytes);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}
/* The scales of blocks k < t of a natural MXFP4 row. Lanes t..7 take e = 0, a finite scale, and nothing past block
 * t - 1 is read; their activation scales are +0, so their products d_w · d_x are +0 as the other types'. The 8 bytes
 * meet in a general register, one move to the vector side: inserting them one by one took the shuffle port the table
 * lookups need. */
static inline __m256 e8m0_scales(const uint8_t *w, int t) {
    uint64_t bytes = 0;
    for (int k = 0; k < t; k++) bytes |= (uint64_t)w[k * sizeof(block_mxfp4)] << (8 * k);
    return e8m0_bytes_f32(bytes);
}

/* r[j] element k ← r[k] element j (32-bit elements): an involution. On the 32 quants of 8 blocks it
 * turns "register k = block k" into "register j = quants 4j..4j+3 of every block, block k in element k",
 * the layout in which a vertical integer sum of 8 registers is 8 block sums, no horizontal step. */
static inline void transpose8_epi32(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

/* The half layout of a row's last group when it holds at most 4 blocks: from r[k] = block k (k < 4) in natural
 * order, register j (j < 4) gets quants 4j..4j+3 of blocks 0..3 in its low 128 bits and quants 16+4j..16+4j+3 in
 * its high 128 bits (a 4 × 4 transpose of 32-bit elements within each 128-bit lane), so 4 registers hold the
 * group and an integer sum leaves block k's two halves in elements k and k+4 (half_fold joins them). */
static inline void transpose4_epi32_lanes(__m256i r[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    r[0] = _mm256_unpacklo_epi64(t0, t2);
    r[1] = _mm256_unpackhi_epi64(t0, t2);
    r[2] = _mm256_unpacklo_epi64(t1, t3);
    r[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* Elements k < 4: s[k] + s[k+4]; elements 4..7: 0. */
static inline __m256i half_fold(__m256i s) {
    return _mm256_add_epi32(_mm256_permute2x128_si256(s, s, 0x80), _mm256_permute2x128_si256(s, s, 0x81));
}

/* MXFP4's values looked up 16 above themselves (4..28), in both 128-bit halves: unsigned, so each block meets the
 * activations in one u8·s8 product (AVX2's maddubs pair sums at most 2 · 28 · 127), the sums corrected by
 * MXFP4_OFFSET · Σx — in the direct tiles per block, in the packed ones by starting from it. */
#define MXFP4_OFFSET 16
static inline __m256i mxfp4_table_up(void) {
    return _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ord_mxfp4_values)),
                           _mm256_set1_epi8(MXFP4_OFFSET));
}

/* The types of 32-element blocks that the direct tiles take (tiles.c): Q8_0 and Q4_0, and the two whose nibbles index
 * a 16-entry table, IQ4_NL (f16 scale) and MXFP4 (E8M0 scale). */
static inline bool is_table_type(ggml_type type) { return type == GGML_TYPE_IQ4_NL || type == GGML_TYPE_MXFP4; }

static inline size_t block_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_0: return sizeof(block_q4_0);
    case GGML_TYPE_IQ4_NL: return sizeof(block_iq4_nl);
    case GGML_TYPE_MXFP4: return sizeof(block_mxfp4);
    default: return sizeof(block_q8_0);
    }
}

/* The f16 scale of block b (Q8_0, Q4_0 and IQ4_NL keep it first). */
static inline uint16_t block_scale(ggml_type type, const uint8_t *w, size_t b) {
    uint16_t d;
    memcpy(&d, w + b * block_bytes(type), sizeof d);
    return d;
}

/* Block k's 32 values of a table type, in element order (signed: |v| <= 127). */
static inline __m256i table_block_values(ggml_type type, const uint8_t *w, int k) {
    return type == GGML_TYPE_MXFP4 ? table_values(ord_mxfp4_values, ((const block_mxfp4 *)w)[k].qs)
                                   : table_values(ord_iq4_values, ((const block_iq4_nl *)w)[k].qs);
}

/* Scales of weight blocks 0..t-1 as f32, +0 for t..7, built in registers (a store then a wide load would
 * stall on forwarding). Lanes t..7 read block t-1's scale, which is inside the row, and are then cleared: with
 * a conditional per lane instead, GCC spilled the 16-bit scales and reloaded them 32 bits wide — a failed
 * store forward that stalled the pack of every partial group (3% of 0.5B prefill). */
#define WSCALE(k) (short)block_scale(type, w, (k) < t ? (k) : t - 1)
static inline __m256 group_wscales(ggml_type type, const uint8_t *w, int t) {
    if (type == GGML_TYPE_MXFP4) return e8m0_scales(w, t);
    __m128i s = _mm_setr_epi16(WSCALE(0), WSCALE(1), WSCALE(2), WSCALE(3), WSCALE(4), WSCALE(5), WSCALE(6), WSCALE(7));
    if (t < BLOCK_LANES) s = _mm_and_si128(s, _mm_cmpgt_epi16(_mm_set1_epi16((short)t), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7)));
    return _mm256_cvtph_ps(s);
}
#undef WSCALE

/* The quants of a K-quant super-block as unsigned bytes, sub-block k (elements 32k..32k+31) in register
 * k in element order: Q4_K 0..15, Q6_K 0..63 (the offset 32 still in). */
static inline void kquant_regs(ggml_type type, const uint8_t *w, __m256i q[BLOCK_LANES]) {
    const __m256i low4 = _mm256_set1_epi8(15);
    if (type == GGML_TYPE_Q4_K) {
        const block_q4_K *b = (const block_q4_K *)w;
        for (int c = 0; c < 4; c++) {
            const __m256i packed = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
            q[2 * c] = _mm256_and_si256(packed, low4);
            q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
        }
        return;
    }
    const block_q6_K *b = (const block_q6_K *)w;
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) { /* 16-bit shifts: the masks drop the bits that cross a byte */
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), bits45));
        q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), bits45));
        q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, bits45));
        q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                       _mm256_and_si256(_mm256_srli_epi16(hb, 2), bits45));
    }
}

static inline bool is_kquant(ggml_type type) { return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K; }

/* Bytes of weights per group of 8 activation blocks. */
static inline size_t group_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_K:
        return sizeof(block_q4_K);
    case GGML_TYPE_Q6_K:
        return sizeof(block_q6_K);
    default:
        return BLOCK_LANES * block_bytes(type);
    }
}

/* Panels, for many rows (panels.c): their register tiles' shape, and from how many rows they pay. */
#define PANEL_ROWS 4 /* activation rows of a register tile, at most */
#define PANEL_COLS 2 /* weight rows of a panel (and of a register tile, but VNNI's: PANEL_PAIRS panels), at most */
#define PANEL_PAIRS 2 /* VNNI: panels of a register tile, at most (panel_tile) */
#define PANEL_MIN_ROWS 4    /* below, packing costs more than it saves: direct tiles */
/* Groups of the widest row that takes panels (n <= 17664): its packed panel (pk, 53 KB) is on the stack. */
#define PANEL_MAX_GROUPS 69

/* One group of one weight row in the panel layout: its quants (transpose8_epi32's registers) and the factors its
 * type's float steps take. */
typedef struct {
    __m256i q[BLOCK_LANES]; /* register j: quants 4j..4j+3 of blocks 0..7 */
    __m256 d;               /* Q8_0, Q4_0: block scales; Q4_K, Q6_K: the super-block's d in every lane */
    __m256 m;               /* Q4_K: -dmin · m per sub-block (rounded once) */
#if MM_VNNI
    /* The scales that weight the 32-bit sums, element k as f32: Q4_K: [0] sub-block k's; Q6_K: [0] and [1] those of
     * quants 0..15 and 16..31 of block k. */
    __m256 sc[2];
#else
    /* The widening madd's multipliers, in both 16-bit halves of element k: Q4_K: [0] sub-block k's scale; Q6_K: [0]
     * and [1] the scales of quants 0..15 and 16..31 of block k. */
    __m256i sc16[2];
    __m256i corr16; /* Q6_K: 32 · those two scales, the halves of element k: the offset's weights */
#endif
} wgroup;

#if MM_VNNI
/* A panel's two weight rows as the VNNI tiles take them, group by group: each of wgroup's registers as [row 0 | row 1],
 * one 512-bit load (a panel of one row: that row in both halves). Pairing them in the tiles took an insert per register
 * and per factor vector, for every tile of activation rows. */
typedef struct {
    __m512i q[BLOCK_LANES];
    __m512 d, m, sc[2];
} wpair;
_Static_assert(2 * sizeof(wgroup) == sizeof(wpair), "wpair: wgroup's registers, two rows side by side");
typedef wpair wpanel_group; /* pk[g]: group g of a panel */
#define PANEL_GROUP_ROWS PANEL_COLS
#else
typedef wgroup wpanel_group; /* pk[g * C + c]: group g of the panel's row c */
#define PANEL_GROUP_ROWS 1
#endif

/* The activation side of a group: what the tiles start their sums from, made once per row (with VNNI, every start the
 * tiles take, in 416 bytes: a larger group made the 4096-wide products of 8B Q4_K_M prefill slower, the rows' side
 * streaming from L2 for every pair of weight rows). */
typedef struct {
    __m256i q[BLOCK_LANES]; /* register j: quants 4j..4j+3 of blocks 0..7, aligned (no split loads) */
    __m256 d;               /* activation scales of blocks 0..7 */
#if MM_VNNI
    __m256i base; /* -128 · Σx per block: where sums of weights stored 128 above their values start (group_regs) */
    /* -32 · Σx over quants 0..15 and 16..31 of each block: where Q6_K's sums of its quants 0..63 start, so they end as
     * Σ (q - 32) · x */
    __m256i q6_lo, q6_hi;
    __m256 t; /* Σx per block as f32: Q4_K's t_b */
#else
    __m256i sum_lo; /* Σx over registers 0..3: quants 0..15 of each block (the half layout: both halves of blocks 0..3) */
    __m256i sum_hi; /* Σx over registers 4..7: quants 16..31 of each block (the half layout: 0) */
    __m256i nib_base; /* -8 · (sum_lo + sum_hi): where sums of packed Q4_0's unsigned nibbles start */
#endif
} xgroup;

/* The quants of a Q8_0 / Q4_0 group of t blocks (t <= 8) in the register layout: transpose8_epi32's, or the half
 * layout when t <= 4; blocks past t are zero. With VNNI both are stored as their values + 128 (Q8_0: w ^ 0x80,
 * 0..255; Q4_0: nibble + 120, 120..135), unsigned, so a block sum is one vpdpbusd against the signed x, started at
 * -128 · Σx (xgroup.base; exact: at most 32 · 255 · 127) — Q8_0's abs/sign pair took two instructions more per
 * register, and Q4_0's own offset a correction per block. Past t they are 128 or 120, against zero blocks of x. */
static inline void group_regs(ggml_type type, const uint8_t *wg, int t, __m256i q[BLOCK_LANES]) {
    for (int k = 0; k < BLOCK_LANES; k++)
        q[k] = k >= t                      ? _mm256_setzero_si256()
               : type == GGML_TYPE_Q4_0 ? block_nibbles_q4_0((const block_q4_0 *)wg + k)
                                        : _mm256_loadu_si256((const __m256i *)((const block_q8_0 *)wg + k)->qs);
    if (t <= BLOCK_LANES / 2)
        transpose4_epi32_lanes(q);
    else
        transpose8_epi32(q);
    for (int j = 0; MM_VNNI && j < BLOCK_LANES; j++)
        q[j] = _mm256_add_epi8(q[j], _mm256_set1_epi8(type == GGML_TYPE_Q4_0 ? 120 : -128));
}

/* Packed rows (kern_pack_rows): group g's quants at g · packed_group_bytes, then every group's side data (the row
 * padded to 32 bytes):
 * - Q8_0: the group's 8 registers of group_regs (a last group of at most 4 blocks: the 4 of the half layout); side:
 *   its 8 scales as f16 (+0 past the row's end).
 * - Q4_0: 4 registers, dword k of register j being dword j of block k's quant bytes (+0 past the row's end), so its
 *   low nibbles are register j of the panel layout and its high nibbles register j + 4 (a last group of at most 4
 *   blocks: 4 × 16 bytes, blocks 0..3's dword j, whose nibbles make register j of the half layout); side as Q8_0's.
 *   The same 18 bytes per block as the natural rows.
 * - MXFP4: its nibbles as Q4_0's; side: the group's 8 E8M0 bytes (0 past the row's end). 17 bytes per block, as the
 *   natural rows (a mixture's experts, packed when they are placed in memory: model.h).
 * - Q4_K (a group is a super-block): its panel registers (kquant_regs, transposed) as nibbles, register j in the low
 *   and j + 4 in the high nibbles of 4 registers; side: d and dmin (f16), then the 8 sub-blocks' scales and mins
 *   decoded to bytes (ord_q4_K_scales): 148 bytes per super-block instead of 144, and no 6-bit unpacking per step.
 * - Q6_K (a super-block per group): its panel registers (kquant_regs, transposed; quants 0..63), their low 4 bits as
 *   Q4_K's nibbles, then 2 registers of their high 2 bits, register j's at bits 2 · (j / 2) of register j % 2; side:
 *   d (f16) and the 16 scales as they lie. 210 bytes, as the natural block.
 * Either way a decode step's block sums are vertical, with no horizontal sum per block. */
static inline size_t packed_group_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q8_0:
        return BLOCK_LANES * sizeof(__m256i);
    case GGML_TYPE_Q6_K:
        return (BLOCK_LANES / 2 + 2) * sizeof(__m256i);
    default:
        return BLOCK_LANES / 2 * sizeof(__m256i);
    }
}

static inline size_t packed_side_bytes(ggml_type type) {
    switch (type) {
    case GGML_TYPE_Q4_K:
        return 2 * sizeof(uint16_t) + 2 * BLOCK_LANES;
    case GGML_TYPE_Q6_K:
        return sizeof(uint16_t) + 2 * BLOCK_LANES;
    case GGML_TYPE_MXFP4:
        return BLOCK_LANES;
    default:
        return BLOCK_LANES * sizeof(uint16_t);
    }
}

static inline size_t packed_scales_at(ggml_type type, size_t nb) {
    const size_t gb = packed_group_bytes(type);
    const size_t last = nb % BLOCK_LANES == 0 ? 0 : half_last_group(nb) ? gb / 2 : gb;
    return nb / BLOCK_LANES * gb + last;
}

static inline size_t packed_row_bytes(ggml_type type, size_t nb) {
    const size_t bytes = packed_scales_at(type, nb) + groups_of(nb) * packed_side_bytes(type);
    return (bytes + sizeof(__m256i) - 1) / sizeof(__m256i) * sizeof(__m256i);
}

/* Group g's side data in a packed row. */
static inline const uint8_t *packed_side(const uint8_t *row, ggml_type type, size_t nb, size_t g) {
    return row + packed_scales_at(type, nb) + g * packed_side_bytes(type);
}

/* Group g's 8 scales of a packed Q8_0, Q4_0 or MXFP4 row (kern_pack_rows) as f32. */
static inline __m256 packed_scales(ggml_type type, const uint8_t *row, size_t scales_at, size_t g) {
    const uint8_t *side = row + scales_at + g * packed_side_bytes(type);
    if (type == GGML_TYPE_MXFP4) {
        uint64_t e;
        memcpy(&e, side, sizeof e);
        return e8m0_bytes_f32(e);
    }
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)side));
}

/* The panel registers of a packed Q4_0 or Q4_K group wg as unsigned nibbles 0..15 (the half layout's 4 and 4 zeros
 * when half). */
static inline void packed_nibble_regs(const uint8_t *wg, bool half, __m256i q[BLOCK_LANES]) {
    const __m256i low4 = _mm256_set1_epi8(15);
    for (int j = 0; j < BLOCK_LANES / 2; j++) {
        if (half) {
            const __m128i h = _mm_load_si128((const __m128i *)wg + j);
            q[j] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(h, 4), h), low4);
            q[j + BLOCK_LANES / 2] = _mm256_setzero_si256();
        } else {
            const __m256i p = _mm256_load_si256((const __m256i *)wg + j);
            q[j] = _mm256_and_si256(p, low4);
            q[j + BLOCK_LANES / 2] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
        }
    }
}

/* The panel registers of a packed Q6_K group wg: quants 0..63, the offset 32 still in (kquant_regs). */
static inline void packed_q6_K_regs(const uint8_t *wg, __m256i q[BLOCK_LANES]) {
    packed_nibble_regs(wg, false, q);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    const __m256i h0 = _mm256_load_si256((const __m256i *)wg + BLOCK_LANES / 2);
    const __m256i h1 = _mm256_load_si256((const __m256i *)wg + BLOCK_LANES / 2 + 1);
    for (int j = 0; j < BLOCK_LANES; j++) { /* bits 2 · (j / 2) of h(j % 2) up to bits 4..5 */
        const __m256i h = j % 2 ? h1 : h0;
        const int at = 2 * (j / 2);
        const __m256i hb = at < 4 ? _mm256_slli_epi16(h, 4 - at) : at > 4 ? _mm256_srli_epi16(h, at - 4) : h;
        q[j] = _mm256_or_si256(q[j], _mm256_and_si256(hb, bits45));
    }
}

/* A packed Q4_K super-block's side (packed_side): d, dmin, and its scales and mins as int32 elements. */
static inline void packed_q4_K_side(const uint8_t *side, float *d, float *dmin, __m256i *sc, __m256i *m) {
    uint16_t h[2];
    memcpy(h, side, sizeof h);
    *d = _cvtsh_ss(h[0]);
    *dmin = _cvtsh_ss(h[1]);
    *sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(side + sizeof h)));
    *m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(side + sizeof h + BLOCK_LANES)));
}

/* The weight side of a panel of C rows: rearranged per call (pk, wpanel_group's layout) or read where it lies (rows:
 * Q8_0 rows as kern_pack_rows leaves them, row c at rows + c * row_bytes, scales at scales_at). */
typedef struct {
    const wpanel_group *pk;
    const uint8_t *rows;
    size_t row_bytes, scales_at;
} wpanel;

/* tiles.c: natural Q8_0, Q4_0, IQ4_NL, MXFP4, Q4_K and Q6_K rows (as GGUF files hold them) in direct register tiles, for few rows */
float VARIANT(tile_dot)(ggml_type type, const void *w, const block_q8_act *xq, size_t n);
void VARIANT(matmul_tiles)(ggml_type type, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                           const block_q8_act *xq, uint32_t n_rows, size_t nb, float *y, size_t ldy);

/* packed.c: rows packed at load in direct register tiles, for few rows (xp: the rows prepared, or NULL) */
void VARIANT(matmul_packed)(ggml_type type, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                            const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y,
                            size_t ldy);

/* panels.c: many rows, against weights rearranged into panels (packed Q8_0 read in place) */
void VARIANT(matmul_panels)(ggml_type type, bool packed, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                            const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y,
                            size_t ldy);

/* panel_tiles.c: every register tile of `rows` prepared rows (xp) against one panel of C weight rows (wp) */
void VARIANT(panel_tiles)(ggml_type type, bool packed, const wpanel *wp, size_t ng, bool half_last, const xgroup *xp,
                          uint32_t rows, int C, float *y, size_t ldy);

#endif
