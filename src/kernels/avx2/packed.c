/* avx2/packed.c — the AVX2 and AVX-512 variants' weights packed at load (pack_rows: Q8_0, Q4_0, MXFP4, Q4_K and Q6_K rows in
 * the register layout of layout.h's packed rows), and the direct register tiles that read them for few activation rows
 * (decode, small batches); panels read them too (panels.c).
 *
 * Every output keeps the reference's lanes (matmul.h): each output's 8 lanes in the block order through its steps, as
 * the panel tiles, so packing changes no bit. One source, two variants (avx512/packed.c compiles it with VNNI, where
 * Q8_0's quants are stored 128 above their values: the variant's own bytes, table.h).
 */
#ifndef VARIANT
#include "avx2.h"
#define VARIANT(f) avx2_##f
#endif

#include "layout.h"
#include "traits.h"

/* The starts the packed direct tiles of both variants take: read (VNNI) or made from the block sums (AVX2). MXFP4's,
 * -MXFP4_OFFSET · Σx, are a shift of them. */
_Static_assert(MXFP4_OFFSET == 16, "x_mx_base: the shifts make -16 · Σx");
#if MM_VNNI
static inline __m256i x_nib_base(const xgroup *x) { return _mm256_srai_epi32(x->base, 4); } /* -8 · Σx, exact */
static inline __m256i x_mx_base(const xgroup *x) { return _mm256_srai_epi32(x->base, 3); } /* -16 · Σx */
static inline __m256i x_q6_lo(const xgroup *x) { return x->q6_lo; }
static inline __m256i x_q6_hi(const xgroup *x) { return x->q6_hi; }
static inline __m256 x_t(const xgroup *x) { return x->t; }
#else
static inline __m256i x_nib_base(const xgroup *x) { return x->nib_base; }
static inline __m256i x_mx_base(const xgroup *x) { return _mm256_slli_epi32(x->nib_base, 1); }
static inline __m256i x_q6_lo(const xgroup *x) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(x->sum_lo, 5));
}
static inline __m256i x_q6_hi(const xgroup *x) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(x->sum_hi, 5));
}
static inline __m256 x_t(const xgroup *x) { return _mm256_cvtepi32_ps(_mm256_add_epi32(x->sum_lo, x->sum_hi)); }
#endif

#if MM_VNNI
/* The AMX variant's tiles read these rows too (avx512.h). */
avx512_packed_layout VARIANT(packed_layout_of)(ggml_type type, size_t n) {
    return (avx512_packed_layout){packed_group_bytes(type), packed_scales_at(type, n / QK), packed_side_bytes(type)};
}
#endif

/* Activation rows of a packed direct tile: each weight register is loaded and unpacked once for them. Two with VNNI's
 * 32 registers; one on AVX2, chosen when its tiles took 4 weight rows whose sums and lanes filled its 16 registers
 * (not measured again since they take one, PACKED_COLS). */
#define PACKED_ROWS (MM_VNNI ? 2 : 1)
/* Weight rows of a packed direct tile: one, so each thread reads the weights as one stream, a row after the other. Four
 * rows side by side (the activation registers loaded once for them) made four streams a group apart, which AMD Zen 4
 * read at a third of its bandwidth: one thread, 110M Q8_0, every product of a decode step from DRAM, 9.5 -> 19 GB/s
 * (the read probe: 32); decode 512 + 128 at 2 threads, avx512: Q8_0 105-110 -> 151 tok/s, Q4_0 199-202 -> 235-238,
 * Q4_K_M 167-173 -> 215-232; avx2: Q8_0 97-101 -> 156-167. */
#define PACKED_COLS 1

/* The 4-bit quants of a packed register as the bytes its type's sums take: Q4_0's and Q4_K's nibbles as they are,
 * MXFP4's looked up MXFP4_OFFSET above their values (layout.h). */
static inline __m256i packed_quants(ggml_type type, __m256i nibbles) {
    return type == GGML_TYPE_MXFP4 ? _mm256_shuffle_epi8(mxfp4_table_up(), nibbles) : nibbles;
}

/* One group of a packed direct tile: J registers (8, or 4 for a half group), each weight register loaded once for
 * the tile's R activation rows (row r's group at xg + r * x_stride); element k of s[r][c] ends as block k's exact sum
 * (as in the panel tiles; Q4_K: of its quants 0..15, before the scale). Q4_0, MXFP4 and Q4_K: 4 packed registers of
 * nibbles (of 16 bytes each in a half group) against x, Q4_0's from -8 · Σx, MXFP4's from -16 · Σx. */
static inline __attribute__((always_inline)) void packed_group(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                                const xgroup *xg, size_t x_stride, int R, int J, int C,
                                                                __m256i s[PACKED_ROWS][PACKED_COLS]) {
    if (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_MXFP4 || type == GGML_TYPE_Q4_K) {
        __m256i hi[PACKED_ROWS][PACKED_COLS]; /* registers j + 4: a second chain */
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                s[r][c] = type == GGML_TYPE_Q4_0    ? x_nib_base(&xg[r * x_stride])
                          : type == GGML_TYPE_MXFP4 ? x_mx_base(&xg[r * x_stride])
                                                    : _mm256_setzero_si256();
                hi[r][c] = _mm256_setzero_si256();
            }
        const __m256i low4 = _mm256_set1_epi8(15);
        for (int j = 0; j < BLOCK_LANES / 2; j++) {
            __m256i x[PACKED_ROWS], x_hi[PACKED_ROWS];
            for (int r = 0; r < R; r++) {
                x[r] = _mm256_load_si256(&xg[r * x_stride].q[j]);
                x_hi[r] = _mm256_load_si256(&xg[r * x_stride].q[j + BLOCK_LANES / 2]);
            }
            for (int c = 0; c < C; c++) {
                const uint8_t *wc = w + c * w_row_bytes;
                if (J == BLOCK_LANES / 2) {
                    const __m128i h = _mm_load_si128((const __m128i *)wc + j);
                    const __m256i nib =
                        packed_quants(type, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(h, 4), h), low4));
                    for (int r = 0; r < R; r++) s[r][c] = sums_u8s8(s[r][c], nib, x[r]);
                } else {
                    const __m256i p = _mm256_load_si256((const __m256i *)wc + j);
                    const __m256i lo = packed_quants(type, _mm256_and_si256(p, low4)),
                                  up = packed_quants(type, _mm256_and_si256(_mm256_srli_epi16(p, 4), low4));
                    for (int r = 0; r < R; r++) {
                        s[r][c] = sums_u8s8(s[r][c], lo, x[r]);
                        hi[r][c] = sums_u8s8(hi[r][c], up, x_hi[r]);
                    }
                }
            }
        }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) s[r][c] = _mm256_add_epi32(s[r][c], hi[r][c]);
        return;
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
#if MM_VNNI
            s[r][c] = xg[r * x_stride].base; /* the weights are stored 128 up (group_regs) */
#else
            s[r][c] = _mm256_setzero_si256();
#endif
    for (int j = 0; j < J; j++) {
        __m256i x[PACKED_ROWS];
        for (int r = 0; r < R; r++) x[r] = _mm256_load_si256(&xg[r * x_stride].q[j]);
        for (int c = 0; c < C; c++) {
            const __m256i wv = _mm256_load_si256((const __m256i *)(w + c * w_row_bytes) + j);
            for (int r = 0; r < R; r++)
#if MM_VNNI
                s[r][c] = sums_u8s8(s[r][c], wv, x[r]);
#else
                s[r][c] = _mm256_add_epi32(s[r][c], block_sums_q8_0(wv, x[r]));
#endif
        }
    }
}

/* One group of a packed Q6_K direct tile: lo[r][c] and hi[r][c], element k, the sums of sub-block k's quants 0..15
 * and 16..31 less the offset 32 (Σ (q - 32) · x, from xgroup.q6_lo and q6_hi) against activation row r's — registers
 * 0..3 and 4..7. */
static inline __attribute__((always_inline)) void packed_group_q6_K(const uint8_t *w, size_t w_row_bytes,
                                                                     const xgroup *xg, size_t x_stride, int R, int C,
                                                                     __m256i lo[PACKED_ROWS][PACKED_COLS],
                                                                     __m256i hi[PACKED_ROWS][PACKED_COLS]) {
    for (int c = 0; c < C; c++) {
        __m256i q[BLOCK_LANES];
        packed_q6_K_regs(w + c * w_row_bytes, q);
        for (int r = 0; r < R; r++) {
            const xgroup *x = &xg[r * x_stride];
            lo[r][c] = x_q6_lo(x);
            hi[r][c] = x_q6_hi(x);
            for (int j = 0; j < BLOCK_LANES / 2; j++) {
                lo[r][c] = sums_u8s8(lo[r][c], q[j], _mm256_load_si256(&x->q[j]));
                hi[r][c] = sums_u8s8(hi[r][c], q[j + BLOCK_LANES / 2], _mm256_load_si256(&x->q[j + BLOCK_LANES / 2]));
            }
        }
    }
}

/* How far ahead the packed direct tiles fetch: whole rows, at least PACKED_FETCH_BYTES. One row ahead was a few
 * nanoseconds of work ahead for short rows, far less than a DRAM access takes: AMD Zen 5 (family 26), avx512, one
 * thread, one activation row against 32000 768-wide rows from DRAM, 1 / 3 / 6 rows ahead: Q6_K (640-byte rows)
 * 866-1090 / 585-707 / 525-746 us, Q8_0 (816) 862-874 / 829-922 / 670-691, Q4_0 and Q4_K (about 450) unchanged within
 * the noise. Rows of 4 KB and more keep fetching one row ahead, as every row did before. */
#define PACKED_FETCH_BYTES 4096

static inline size_t packed_fetch_rows(size_t w_row_bytes) {
    return w_row_bytes >= PACKED_FETCH_BYTES ? 1 : (PACKED_FETCH_BYTES + w_row_bytes - 1) / w_row_bytes;
}

/* Direct tile on packed rows, for few rows (decode, small batches): R <= PACKED_ROWS prepared activation rows (row
 * r's groups at xg + r * ng) against C <= PACKED_COLS packed weight rows, each output with its 8 lanes in
 * matmul.h's block order through its steps, as the panel tiles; the rows packed_fetch_rows tiles on are fetched
 * meanwhile, by every tile (fetching from only the first of the tiles that share these weight rows, a branch in this
 * loop, cost 0.5B Q4_0 decode about 5%). */
static inline __attribute__((always_inline)) void packed_tile(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                               size_t nb, const xgroup *xg, int R, int C, float *y,
                                                               size_t ldy) {
    const size_t ng = groups_of(nb), scales_at = packed_scales_at(type, nb), gb = packed_group_bytes(type);
    const size_t ahead = packed_fetch_rows(w_row_bytes) * C;
    __m256 acc[PACKED_ROWS][PACKED_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (size_t g = 0; g < ng; g++) {
        const bool half = g + 1 == ng && half_last_group(nb);
        const uint8_t *wg = w + g * gb, *side = w + scales_at + g * packed_side_bytes(type);
        for (int c = 0; c < C; c++) { /* and their side data, which lies apart from the quants (0.5B Q4_0 decode:
                                        * 95-99 tok/s without, 103-106 with) */
            for (size_t off = 0; off < gb; off += 64) prefetch_at(wg, (ahead + c) * w_row_bytes + off);
            prefetch_at(side, (ahead + c) * w_row_bytes);
        }
        __m256i s[PACKED_ROWS][PACKED_COLS];
        if (type == GGML_TYPE_Q6_K) { /* each half's sum less the offset (packed_group_q6_K); then as superblock_q6_K */
            __m256i hi[PACKED_ROWS][PACKED_COLS];
            packed_group_q6_K(wg, w_row_bytes, &xg[g], ng, R, C, s, hi);
            const __m128i deal = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
            for (int c = 0; c < C; c++) {
                const uint8_t *side_c = packed_side(w + c * w_row_bytes, type, nb, g);
                uint16_t d;
                memcpy(&d, side_c, sizeof d);
                const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(side_c + sizeof d)), deal);
                const __m256 sc_lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)),
                             sc_hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc)));
                for (int r = 0; r < R; r++) {
                    const xgroup *x = &xg[r * ng + g];
                    const __m256 sb = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s[r][c]), sc_lo),
                                                    _mm256_mul_ps(_mm256_cvtepi32_ps(hi[r][c]), sc_hi));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d)), x->d), sb, acc[r][c]);
                }
            }
            continue;
        }
        if (half)
            packed_group(type, wg, w_row_bytes, &xg[g], ng, R, BLOCK_LANES / 2, C, s);
        else
            packed_group(type, wg, w_row_bytes, &xg[g], ng, R, BLOCK_LANES, C, s);
        if (type == GGML_TYPE_Q4_K) { /* fmaf(d_x, fmaf(d, (float)(sc · s), dm · (float)t), lane), t = Σx */
            for (int c = 0; c < C; c++) {
                float d, dmin;
                __m256i sc, m;
                packed_q4_K_side(packed_side(w + c * w_row_bytes, type, nb, g), &d, &dmin, &sc, &m);
                const __m256 dm = _mm256_mul_ps(_mm256_set1_ps(-dmin), _mm256_cvtepi32_ps(m));
                for (int r = 0; r < R; r++) {
                    const xgroup *x = &xg[r * ng + g];
                    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(d),
                                                         _mm256_cvtepi32_ps(_mm256_mullo_epi32(s[r][c], sc)),
                                                         _mm256_mul_ps(dm, x_t(x)));
                    acc[r][c] = _mm256_fmadd_ps(x->d, inner, acc[r][c]);
                }
            }
            continue;
        }
        for (int c = 0; c < C; c++) {
            const __m256 dw = packed_scales(type, w + c * w_row_bytes, scales_at, g);
            for (int r = 0; r < R; r++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xg[r * ng + g].d),
                                            _mm256_cvtepi32_ps(half ? half_fold(s[r][c]) : s[r][c]), acc[r][c]);
        }
    }
    __m256 sums[PACKED_ROWS * PACKED_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) sums[r * C + c] = acc[r][c];
    store_sums(sums, R, C, y, ldy);
}

#define PACKED_TILE(R_) packed_tile(type, wo, w_row_bytes, nb, xg, R_, PACKED_COLS, y + (size_t)r * ldy + o, ldy)
_Static_assert(PACKED_COLS == 1, "packed_rows_prepared: a tile of more weight rows needs a smaller one for the last");

/* Few rows against packed rows (xp: the rows prepared): each tile of weight rows against every pair (or row) of
 * activation rows while it is in L1, so the weights stream once. */
static inline __attribute__((always_inline)) void packed_rows_prepared(ggml_type type, const uint8_t *w,
                                                                        size_t w_row_bytes, uint32_t n_out,
                                                                        const xgroup *xp, uint32_t n_rows, size_t nb,
                                                                        float *y, size_t ldy) {
    const size_t ng = groups_of(nb);
    for (uint32_t o = 0; o < n_out; o += PACKED_COLS) {
        const uint8_t *wo = w + o * w_row_bytes;
        uint32_t r = 0;
        for (; r + PACKED_ROWS <= n_rows; r += PACKED_ROWS) {
            const xgroup *xg = xp + (size_t)r * ng;
            PACKED_TILE(PACKED_ROWS);
        }
        for (; r < n_rows; r++) {
            const xgroup *xg = xp + (size_t)r * ng;
            PACKED_TILE(1);
        }
    }
}

/* packed_rows_prepared with a constant type in each call: the types' groups differ in every step. */
static inline __attribute__((always_inline)) void packed_rows_of(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                                  uint32_t n_out, const xgroup *xp, uint32_t n_rows,
                                                                  size_t nb, float *y, size_t ldy) {
    switch (type) {
    case GGML_TYPE_Q4_0: packed_rows_prepared(GGML_TYPE_Q4_0, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    case GGML_TYPE_MXFP4: packed_rows_prepared(GGML_TYPE_MXFP4, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    case GGML_TYPE_Q4_K: packed_rows_prepared(GGML_TYPE_Q4_K, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    case GGML_TYPE_Q6_K: packed_rows_prepared(GGML_TYPE_Q6_K, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    default: packed_rows_prepared(GGML_TYPE_Q8_0, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy); break;
    }
}

/* The same with the rows prepared here, on the stack, PACKED_PREP_ROWS at a time. Out of line, so that its buffer
 * (115 KB) is not in the frame of every product a decode step makes. */
#define PACKED_PREP_ROWS 4
static __attribute__((noinline)) void packed_rows_unprepared(ggml_type type, const uint8_t *w, size_t w_row_bytes,
                                                             uint32_t n_out, const block_q8_act *xq, uint32_t n_rows,
                                                             size_t nb, float *y, size_t ldy) {
    xgroup buf[PACKED_PREP_ROWS * PANEL_MAX_GROUPS];
    for (uint32_t r0 = 0; r0 < n_rows; r0 += PACKED_PREP_ROWS) {
        const uint32_t rows = n_rows - r0 < PACKED_PREP_ROWS ? n_rows - r0 : PACKED_PREP_ROWS;
        VARIANT(panel_rows)(xq + (size_t)r0 * nb, nb * QK, 0, rows, buf); /* panels.c */
        packed_rows_of(type, w, w_row_bytes, n_out, buf, rows, nb, y + (size_t)r0 * ldy, ldy);
    }
}

#undef PACKED_TILE

/* Few rows against packed rows: each weight row streams once past them. */
void VARIANT(matmul_packed)(ggml_type type, const uint8_t *w, size_t w_row_bytes, uint32_t n_out,
                            const block_q8_act *xq, const xgroup *xp, uint32_t n_rows, size_t nb, float *y,
                            size_t ldy) {
    if (!xp) {
        packed_rows_unprepared(type, w, w_row_bytes, n_out, xq, n_rows, nb, y, ldy);
        return;
    }
    packed_rows_of(type, w, w_row_bytes, n_out, xp, n_rows, nb, y, ldy);
}

bool VARIANT(packs)(ggml_type type, size_t n) {
    const bool packed_type = type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_MXFP4 ||
                             type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K;
    return packed_type && n % kern_type_traits(type)->block_elems == 0 && groups_of(n / QK) <= PANEL_MAX_GROUPS;
}

size_t VARIANT(packed_row_bytes)(ggml_type type, size_t n) { return packed_row_bytes(type, n / QK); }

void VARIANT(pack_rows)(ggml_type type, const void *w, size_t w_row_bytes, uint32_t r0, uint32_t r1, size_t n,
                        void *dst) {
    const size_t nb = n / QK, ng = groups_of(nb), rb = packed_row_bytes(type, nb), gb = packed_group_bytes(type);
    for (uint32_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * w_row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)r * rb;
        memset(out, 0, rb);
        for (size_t g = 0; g < ng; g++) {
            const uint8_t *wg = row + g * group_bytes(type);
            const int t = blocks_in_group(nb, g), width = t <= BLOCK_LANES / 2 ? BLOCK_LANES / 2 : BLOCK_LANES;
            uint8_t *side = out + packed_scales_at(type, nb) + g * packed_side_bytes(type);
            if (is_kquant(type)) { /* panel registers j and j + 4 as the nibbles of one; Q6_K's high bits apart */
                __m256i q[BLOCK_LANES];
                kquant_regs(type, wg, q);
                transpose8_epi32(q);
                const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3);
                for (int j = 0; j < BLOCK_LANES / 2; j++)
                    _mm256_store_si256((__m256i *)(out + g * gb) + j,
                                       _mm256_or_si256(_mm256_and_si256(q[j], low4),
                                                       _mm256_slli_epi16(_mm256_and_si256(q[j + BLOCK_LANES / 2], low4), 4)));
                if (type == GGML_TYPE_Q6_K) {
                    for (int h = 0; h < 2; h++) {
                        __m256i bits = _mm256_setzero_si256();
                        for (int j = h; j < BLOCK_LANES; j += 2) /* register j's at bits 2 · (j / 2) */
                            bits = _mm256_or_si256(bits, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q[j], 4), two),
                                                                           2 * (j / 2)));
                        _mm256_store_si256((__m256i *)(out + g * gb) + BLOCK_LANES / 2 + h, bits);
                    }
                    const block_q6_K *b = (const block_q6_K *)wg;
                    memcpy(side, &b->d, sizeof b->d);
                    memcpy(side + sizeof b->d, b->scales, sizeof b->scales);
                    continue;
                }
                const block_q4_K *b = (const block_q4_K *)wg;
                int32_t sc[BLOCK_LANES], m[BLOCK_LANES];
                ord_q4_K_scales(b->scales, sc, m);
                memcpy(side, &b->d, sizeof b->d);
                memcpy(side + sizeof b->d, &b->dmin, sizeof b->dmin);
                for (int k = 0; k < BLOCK_LANES; k++) {
                    side[2 * sizeof(uint16_t) + k] = (uint8_t)sc[k];
                    side[2 * sizeof(uint16_t) + BLOCK_LANES + k] = (uint8_t)m[k];
                }
                continue;
            }
            if (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_MXFP4) { /* dword k of register j: dword j of block k
                                                                       * (width blocks a register) */
                uint8_t *at = out + g * gb;
                for (int j = 0; j < BLOCK_LANES / 2; j++)
                    for (int k = 0; k < t; k++)
                        memcpy(at + ((size_t)j * width + k) * 4,
                               type == GGML_TYPE_MXFP4 ? ((const block_mxfp4 *)wg)[k].qs + 4 * j
                                                       : ((const block_q4_0 *)wg)[k].qs + 4 * j,
                               4);
            } else {
                __m256i q[BLOCK_LANES];
                group_regs(type, wg, t, q);
                for (int j = 0; j < width; j++) _mm256_store_si256((__m256i *)(out + g * gb) + j, q[j]);
            }
            for (int k = 0; k < t; k++) {
                if (type == GGML_TYPE_MXFP4) {
                    side[k] = ((const block_mxfp4 *)wg)[k].e;
                    continue;
                }
                const uint16_t d = block_scale(type, wg, (size_t)k);
                memcpy(side + k * sizeof d, &d, sizeof d);
            }
        }
    }
}
