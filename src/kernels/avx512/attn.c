/* avx512/attn.c — attention's kernels on AVX-512: key-tile scores, V accumulation, and the online softmax's steps.
 *
 * WHY: a zmm holds 16 lanes, so a 32-key tile's scores for one query are two registers and a 64-element
 * head of y is four; more chains fit in the 32 registers, so more queries share each load of K or V.
 *
 * INVARIANT: every lane does what the reference (ref/) does to its element — the same IEEE operations on
 * the same operands in the same order (attn.h's fixed orders). Only the loop nest differs: which queries run
 * side by side, and how many registers of one row are held at once. Tails are masked lanes of the same
 * operations, never a different sequence.
 */
#include "avx512.h"

#include "attn.h"
#include "lanes.h"
#include "simd.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* The size of the next block when `left` queries remain to be cut into the fewest blocks of at most `max`, sizes
 * differing by at most one (13 = 7 + 6, not 8 + 5): a small last block would run on too few chains. */
static inline size_t next_block(size_t left, size_t max) {
    const size_t blocks = (left + max - 1) / max;
    return (left + blocks - 1) / blocks;
}

/* ---- scores of a key-major tile ---------------------------------------------------------------- */

/* Queries side by side on one tile: 2 chains each plus the 2 key registers and the Q broadcasts stay within the
 * 32 registers, and from four queries on there are enough chains to cover the multiply-add latency. */
#define SCORE_MAX_Q 8

/* Q queries (1..SCORE_MAX_Q, a constant after inlining) against the tile's 32 keys: keys 0..15 and 16..31 are
 * two registers, so each lane is one key's chain s = fmaf(q[d], k[d], s) from +0; element d of the keys is
 * loaded and widened once for the Q queries. */
static inline __attribute__((always_inline)) void score_queries(widen_kind elem, int Q, const void *kt,
                                                                const float *q, size_t q_stride, size_t n,
                                                                float *out, size_t out_stride) {
    __m512 acc[2 * SCORE_MAX_Q];
    for (int c = 0; c < 2 * Q; c++) acc[c] = _mm512_setzero_ps();
    for (size_t d = 0; d < n; d++) {
        __m512 k0 = avx512_load16(elem, kt, d * KERN_KEY_TILE, 0xffff);
        __m512 k1 = avx512_load16(elem, kt, d * KERN_KEY_TILE + 16, 0xffff);
        if (Q > 1) {
            PIN(k0);
            PIN(k1);
        }
        for (int r = 0; r < Q; r++) {
            __m512 qd = _mm512_set1_ps(q[r * q_stride + d]);
            PIN(qd);
            acc[2 * r] = _mm512_fmadd_ps(qd, k0, acc[2 * r]);
            acc[2 * r + 1] = _mm512_fmadd_ps(qd, k1, acc[2 * r + 1]);
        }
    }
    for (int r = 0; r < Q; r++) {
        _mm512_storeu_ps(out + r * out_stride, acc[2 * r]);
        _mm512_storeu_ps(out + r * out_stride + 16, acc[2 * r + 1]);
    }
}

static inline __attribute__((always_inline)) void score_tile(widen_kind elem, const void *kt, const float *q,
                                                             size_t q_stride, size_t n_q, size_t n, float *out,
                                                             size_t out_stride) {
    for (size_t r = 0, Q; r < n_q; r += Q) {
        Q = next_block(n_q - r, SCORE_MAX_Q);
        const float *qr = q + r * q_stride;
        float *o = out + r * out_stride;
        switch (Q) {
        case 8: score_queries(elem, 8, kt, qr, q_stride, n, o, out_stride); break;
        case 7: score_queries(elem, 7, kt, qr, q_stride, n, o, out_stride); break;
        case 6: score_queries(elem, 6, kt, qr, q_stride, n, o, out_stride); break;
        case 5: score_queries(elem, 5, kt, qr, q_stride, n, o, out_stride); break;
        case 4: score_queries(elem, 4, kt, qr, q_stride, n, o, out_stride); break;
        case 3: score_queries(elem, 3, kt, qr, q_stride, n, o, out_stride); break;
        case 2: score_queries(elem, 2, kt, qr, q_stride, n, o, out_stride); break;
        default: score_queries(elem, 1, kt, qr, q_stride, n, o, out_stride); break;
        }
    }
}

void avx512_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                           size_t out_stride) {
    score_tile(WIDEN_F16, kt, q, q_stride, n_q, n, out, out_stride);
}

void avx512_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                           size_t out_stride) {
    score_tile(WIDEN_F32, kt, q, q_stride, n_q, n, out, out_stride);
}

/* ---- scores of a quantized key tile (attn.h's layout) ------------------------------------------- */

/* Queries side by side: per query 2 float chains and 2 integer sums, with the key registers, within the 32. */
#define SCORE_Q_MAX_Q 6

/* Σ q_q[i] of a query block, exact: VNNI products with ones, then the eight lanes' sum. */
static inline int32_t query_sum(const block_q8_act *q) {
    const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                          _mm256_loadu_si256((const __m256i *)q->qs));
    __m128i w = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    w = _mm_add_epi32(w, _mm_shuffle_epi32(w, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtsi128_si32(_mm_add_epi32(w, _mm_shuffle_epi32(w, _MM_SHUFFLE(2, 3, 0, 1))));
}

/* Four quants of the query (bytes 4g..4g+3 of a block) in every 32-bit lane. */
static inline __m512i query_group(const block_q8_act *q, size_t at) {
    int32_t g;
    memcpy(&g, q->qs + at, sizeof g);
    return _mm512_set1_epi32(g);
}

/* Q queries (1..SCORE_Q_MAX_Q) against the 32 keys of a Q8_0 or Q4_0 tile (keys 0..15 and 16..31: two registers).
 * Per block, each key's integer sum s_b in its lane, from VNNI products of unsigned key bytes with the query's signed
 * ones: Q8_0's quants offset to k + 128 (xor 0x80), Q4_0's nibbles as stored (k + 8); the offset times the query's
 * sum is taken off again, so s_b is exact. Then the chain's step, fmaf(d_q · d_k, s_b, s), in block order. */
static inline __attribute__((always_inline)) void score_queries_q(ggml_type type, int Q, const uint8_t *kt,
                                                                   const block_q8_act *q, size_t q_stride, size_t n,
                                                                   float *out, size_t out_stride) {
    const bool q8 = type == GGML_TYPE_Q8_0;
    const size_t section = ord_kv_block_bytes(type) * KERN_KEY_TILE, group = KERN_KEY_GROUP * KERN_KEY_TILE;
    const int n_groups = (int)(ord_kv_block_bytes(type) - sizeof(uint16_t)) / KERN_KEY_GROUP;
    __m512 acc[2 * SCORE_Q_MAX_Q];
    for (int c = 0; c < 2 * Q; c++) acc[c] = _mm512_setzero_ps();
    for (size_t b = 0; b < n / QK; b++) {
        const uint8_t *sec = kt + b * section, *qs = sec + sizeof(uint16_t) * KERN_KEY_TILE;
        __m512i sum[2 * SCORE_Q_MAX_Q];
        for (int c = 0; c < 2 * Q; c++) sum[c] = _mm512_setzero_si512();
        for (int g = 0; g < n_groups; g++) {
            const __m512i k0 = _mm512_loadu_si512(qs + g * group), k1 = _mm512_loadu_si512(qs + g * group + 64);
            if (q8) {
                const __m512i flip = _mm512_set1_epi8(-128);
                __m512i u0 = _mm512_xor_si512(k0, flip), u1 = _mm512_xor_si512(k1, flip);
                if (Q > 1) {
                    PIN(u0);
                    PIN(u1);
                }
                for (int r = 0; r < Q; r++) {
                    const __m512i qg = query_group(&q[r * q_stride + b], (size_t)g * KERN_KEY_GROUP);
                    sum[2 * r] = _mm512_dpbusd_epi32(sum[2 * r], u0, qg);
                    sum[2 * r + 1] = _mm512_dpbusd_epi32(sum[2 * r + 1], u1, qg);
                }
            } else {
                const __m512i m = _mm512_set1_epi8(15);
                __m512i lo0 = _mm512_and_si512(k0, m), lo1 = _mm512_and_si512(k1, m);
                __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(k0, 4), m);
                __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(k1, 4), m);
                if (Q > 1) {
                    PIN(lo0);
                    PIN(lo1);
                    PIN(hi0);
                    PIN(hi1);
                }
                for (int r = 0; r < Q; r++) {
                    const block_q8_act *qb = &q[r * q_stride + b];
                    const __m512i ql = query_group(qb, (size_t)g * KERN_KEY_GROUP);
                    const __m512i qh = query_group(qb, QK / 2 + (size_t)g * KERN_KEY_GROUP);
                    sum[2 * r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum[2 * r], lo0, ql), hi0, qh);
                    sum[2 * r + 1] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum[2 * r + 1], lo1, ql), hi1, qh);
                }
            }
        }
        const __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sec));
        const __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sec + 32)));
        for (int r = 0; r < Q; r++) {
            const block_q8_act *qb = &q[r * q_stride + b];
            const __m512i off = _mm512_set1_epi32(query_sum(qb) * (q8 ? 128 : 8));
            const __m512 dq = _mm512_set1_ps(qb->d);
            acc[2 * r] = _mm512_fmadd_ps(_mm512_mul_ps(dq, d0), _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[2 * r], off)),
                                         acc[2 * r]);
            acc[2 * r + 1] = _mm512_fmadd_ps(_mm512_mul_ps(dq, d1),
                                             _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[2 * r + 1], off)), acc[2 * r + 1]);
        }
    }
    for (int r = 0; r < Q; r++) {
        _mm512_storeu_ps(out + r * out_stride, acc[2 * r]);
        _mm512_storeu_ps(out + r * out_stride + 16, acc[2 * r + 1]);
    }
}

void avx512_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q,
                         size_t n, float *out, size_t out_stride) {
    for (size_t r = 0, Q; r < n_q; r += Q) {
        Q = next_block(n_q - r, SCORE_Q_MAX_Q);
        const block_q8_act *qr = q + r * q_stride;
        float *o = out + r * out_stride;
        switch (Q) {
        case 6: score_queries_q(type, 6, kt, qr, q_stride, n, o, out_stride); break;
        case 5: score_queries_q(type, 5, kt, qr, q_stride, n, o, out_stride); break;
        case 4: score_queries_q(type, 4, kt, qr, q_stride, n, o, out_stride); break;
        case 3: score_queries_q(type, 3, kt, qr, q_stride, n, o, out_stride); break;
        case 2: score_queries_q(type, 2, kt, qr, q_stride, n, o, out_stride); break;
        default: score_queries_q(type, 1, kt, qr, q_stride, n, o, out_stride); break;
        }
    }
}

/* ---- V accumulation ---------------------------------------------------------------------------- */

/* Q outputs side by side, W registers of each held across all of V's rows: Q·W <= 16 accumulators, with the W row
 * registers and the Q broadcast weights, stay within the 32 registers. */
#define AXPY_MAX_Q 8
#define AXPY_MAX_ACC 16

/* W for Q outputs: the largest power of two with Q·W <= AXPY_MAX_ACC. */
static inline int axpy_width(int Q) { return Q == 1 ? 16 : Q == 2 ? 8 : Q <= 4 ? 4 : 2; }

/* Elements i .. i + 16·W of Q outputs (lanes outside `live` untouched): y[i] = fmaf(a[j], row_j[i], y[i]) for
 * j = 0 .. n_rows-1 in turn, each row's W registers loaded once for the Q outputs. */
static inline __attribute__((always_inline)) void axpy_chunk(widen_kind elem, int Q, int W, float *y,
                                                             size_t y_stride, const float *a, size_t a_stride,
                                                             const void *rows, size_t stride,
                                                             size_t n_rows, size_t i, __mmask16 live) {
    __m512 acc[AXPY_MAX_ACC];
    for (int r = 0; r < Q; r++)
        for (int u = 0; u < W; u++) acc[r * W + u] = _mm512_maskz_loadu_ps(live, y + r * y_stride + i + 16 * u);
    for (size_t j = 0; j < n_rows; j++) {
        __m512 aj[AXPY_MAX_Q];
        for (int r = 0; r < Q; r++) {
            aj[r] = _mm512_set1_ps(a[r * a_stride + j]);
            if (W > 1) PIN(aj[r]);
        }
        for (int u = 0; u < W; u++) {
            size_t at;
            const void *p = widened_elem_at(elem, rows, j, stride, i + 16 * u, &at);
            __m512 v = avx512_load16(elem, p, at, live);
            if (Q > 1) PIN(v);
            for (int r = 0; r < Q; r++) acc[r * W + u] = _mm512_fmadd_ps(aj[r], v, acc[r * W + u]);
        }
    }
    for (int r = 0; r < Q; r++)
        for (int u = 0; u < W; u++) _mm512_mask_storeu_ps(y + r * y_stride + i + 16 * u, live, acc[r * W + u]);
}

/* The chunks of w registers from element *i on while whole ones remain. */
static inline __attribute__((always_inline)) void axpy_span(widen_kind elem, int Q, int w, float *y,
                                                            size_t y_stride, const float *a, size_t a_stride,
                                                            const void *rows, size_t stride,
                                                            size_t n_rows, size_t n, size_t *i) {
    for (; *i + 16 * (size_t)w <= n; *i += 16 * (size_t)w)
        axpy_chunk(elem, Q, w, y, y_stride, a, a_stride, rows, stride, n_rows, *i, 0xffff);
}

/* Q outputs over a whole row: chunks of W = axpy_width(Q) registers, then of W/2, .., 1, then the last n % 16
 * lanes. */
static inline __attribute__((always_inline)) void axpy_queries(widen_kind elem, int Q, float *y, size_t y_stride,
                                                               const float *a, size_t a_stride, const void *rows,
                                                               size_t stride, size_t n_rows,
                                                               size_t n) {
    const int W = axpy_width(Q);
    size_t i = 0;
    axpy_span(elem, Q, W, y, y_stride, a, a_stride, rows, stride, n_rows, n, &i);
    if (W >= 2) axpy_span(elem, Q, W / 2, y, y_stride, a, a_stride, rows, stride, n_rows, n, &i);
    if (W >= 4) axpy_span(elem, Q, W / 4, y, y_stride, a, a_stride, rows, stride, n_rows, n, &i);
    if (W >= 8) axpy_span(elem, Q, W / 8, y, y_stride, a, a_stride, rows, stride, n_rows, n, &i);
    if (W >= 16) axpy_span(elem, Q, W / 16, y, y_stride, a, a_stride, rows, stride, n_rows, n, &i);
    if (i < n)
        axpy_chunk(elem, Q, 1, y, y_stride, a, a_stride, rows, stride, n_rows, i, avx512_first(n - i));
}

static inline __attribute__((always_inline)) void axpy_rows(widen_kind elem, float *y, size_t y_stride,
                                                            const float *a, size_t a_stride, size_t n_y,
                                                            const void *rows, size_t stride,
                                                            size_t n_rows, size_t n) {
    for (size_t r = 0, Q; r < n_y; r += Q) {
        Q = next_block(n_y - r, AXPY_MAX_Q);
        float *yr = y + r * y_stride;
        const float *ar = a + r * a_stride;
        switch (Q) {
        case 8: axpy_queries(elem, 8, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        case 7: axpy_queries(elem, 7, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        case 6: axpy_queries(elem, 6, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        case 5: axpy_queries(elem, 5, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        case 4: axpy_queries(elem, 4, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        case 3: axpy_queries(elem, 3, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        case 2: axpy_queries(elem, 2, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        default: axpy_queries(elem, 1, yr, y_stride, ar, a_stride, rows, stride, n_rows, n); break;
        }
    }
}

void avx512_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                          const uint16_t *rows, size_t stride, size_t n_rows, size_t n) {
    axpy_rows(WIDEN_F16, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void avx512_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                          size_t stride, size_t n_rows, size_t n) {
    axpy_rows(WIDEN_F32, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

/* ---- values of a quantized V tile (attn.h's layout and order) ---------------------------------- */

/* Queries side by side on one section: per query 2 integer sums, with the section's 2 operand registers. */
#define WEIGH_MAX_Q 8

/* One query's weights of a block (attn.h): w_j = a_j · d_j for the keys in `keys` (the others +0), quantized against
 * W = max |w_j| into wq (32 bytes), formed 2^32 larger where that gives the same bits (order.h's ord_weights_scaled).
 * d[0], d[1]: the block's scales of keys 0..15, 16..31; d[2], d[3] the same 2^32 larger. False when the block adds
 * nothing; else W / 127 in *scale. */
static inline bool block_weights(const float *a, const __m512 d[4], __mmask32 keys, int8_t *wq, float *scale) {
    const __mmask16 k0 = (__mmask16)keys, k1 = (__mmask16)(keys >> 16);
    const __m512 a0 = _mm512_maskz_loadu_ps(k0, a), a1 = _mm512_maskz_loadu_ps(k1, a + 16);
    __m512 w0 = _mm512_maskz_mul_ps(k0, a0, d[2]), w1 = _mm512_maskz_mul_ps(k1, a1, d[3]);
    float top = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(w0), _mm512_abs_ps(w1))), W;
    switch (ord_weights_scaled(top)) {
    case ORD_WEIGHTS_DEAD: return false;
    case ORD_WEIGHTS_SCALED: W = top * ORD_WEIGHT_UNSCALE; break;
    default:
        w0 = _mm512_maskz_mul_ps(k0, a0, d[0]);
        w1 = _mm512_maskz_mul_ps(k1, a1, d[1]);
        top = W = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(w0), _mm512_abs_ps(w1)));
        if (!ord_weights_live(W)) return false;
    }
    const __m512 c = _mm512_set1_ps(127.0f / top);
    _mm_storeu_si128((__m128i *)wq, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(w0, c))));
    _mm_storeu_si128((__m128i *)(wq + 16), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(w1, c))));
    *scale = W / 127.0f;
    return true;
}

/* Q queries (1..WEIGH_MAX_Q) against one block's section: per group of four positions, elements 0..15 and 16..31 are
 * two registers of signed values (Q4_0's nibbles less 8), VNNI products with each query's four weights offset to
 * w + 128 (xor 0x80: unsigned); 128 times the values' column sums, taken in the same pass, comes off again, so S is
 * exact (keys past n_keys have w = 0: their values cancel too). Then one step per element, fmaf(W / 127, S, y). */
static inline __attribute__((always_inline)) void weigh_queries(ggml_type type, int Q, float *y, size_t y_stride,
                                                                const float *a, size_t a_stride,
                                                                const uint8_t *sec, __mmask32 keys) {
    const bool q8 = type == GGML_TYPE_Q8_0;
    const uint8_t *qs = sec + sizeof(uint16_t) * KERN_KEY_TILE;
    const size_t group = (ord_kv_block_bytes(type) - sizeof(uint16_t)) * KERN_KEY_GROUP;
    __m512 d[4];
    d[0] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sec));
    d[1] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sec + 32)));
    d[2] = _mm512_mul_ps(d[0], _mm512_set1_ps(ORD_WEIGHT_SCALE));
    d[3] = _mm512_mul_ps(d[1], _mm512_set1_ps(ORD_WEIGHT_SCALE));
    int8_t wq[WEIGH_MAX_Q][KERN_KEY_TILE];
    float scale[WEIGH_MAX_Q];
    bool live[WEIGH_MAX_Q];
    for (int r = 0; r < Q; r++)
        if (!(live[r] = block_weights(a + r * a_stride, d, keys, wq[r], &scale[r]))) {
            memset(wq[r], 0, sizeof wq[r]);
            scale[r] = 0.0f; /* never read: the query's y stays as it is */
        }
    __m512i sum[2 * WEIGH_MAX_Q], col0 = _mm512_setzero_si512(), col1 = _mm512_setzero_si512();
    for (int c = 0; c < 2 * Q; c++) sum[c] = _mm512_setzero_si512();
    const __m512i ones = _mm512_set1_epi8(1);
    for (int g = 0; g < KERN_KEY_TILE / KERN_KEY_GROUP; g++) {
        __m512i v0, v1;
        if (q8) {
            v0 = _mm512_loadu_si512(qs + g * group);
            v1 = _mm512_loadu_si512(qs + g * group + 64);
        } else {
            const __m512i x = _mm512_loadu_si512(qs + g * group), m = _mm512_set1_epi8(15);
            const __m512i eight = _mm512_set1_epi8(8);
            v0 = _mm512_sub_epi8(_mm512_and_si512(x, m), eight);
            v1 = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 4), m), eight);
        }
        if (Q > 1) {
            PIN(v0);
            PIN(v1);
        }
        col0 = _mm512_dpbusd_epi32(col0, ones, v0);
        col1 = _mm512_dpbusd_epi32(col1, ones, v1);
        for (int r = 0; r < Q; r++) {
            uint32_t w4;
            memcpy(&w4, wq[r] + g * KERN_KEY_GROUP, sizeof w4);
            const __m512i w = _mm512_set1_epi32((int32_t)(w4 ^ 0x80808080u));
            sum[2 * r] = _mm512_dpbusd_epi32(sum[2 * r], w, v0);
            sum[2 * r + 1] = _mm512_dpbusd_epi32(sum[2 * r + 1], w, v1);
        }
    }
    const __m512i off0 = _mm512_slli_epi32(col0, 7), off1 = _mm512_slli_epi32(col1, 7);
    for (int r = 0; r < Q; r++) {
        if (!live[r]) continue;
        const __m512 sc = _mm512_set1_ps(scale[r]);
        float *yr = y + r * y_stride;
        _mm512_storeu_ps(yr, _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[2 * r], off0)),
                                             _mm512_loadu_ps(yr)));
        _mm512_storeu_ps(yr + 16, _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[2 * r + 1], off1)),
                                                  _mm512_loadu_ps(yr + 16)));
    }
}

void avx512_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                         const uint8_t *vt, size_t n_keys, size_t n) {
    const size_t section = ord_kv_block_bytes(type) * KERN_KEY_TILE;
    const __mmask32 keys = n_keys >= 32 ? 0xffffffffu : (__mmask32)((1u << n_keys) - 1);
    for (size_t b = 0; b < n / QK; b++)
        for (size_t r = 0, Q; r < n_y; r += Q) {
            Q = next_block(n_y - r, WEIGH_MAX_Q);
            float *yr = y + r * y_stride + b * QK;
            const float *ar = a + r * a_stride;
            const uint8_t *sec = vt + b * section;
            switch (Q) {
            case 8: weigh_queries(type, 8, yr, y_stride, ar, a_stride, sec, keys); break;
            case 7: weigh_queries(type, 7, yr, y_stride, ar, a_stride, sec, keys); break;
            case 6: weigh_queries(type, 6, yr, y_stride, ar, a_stride, sec, keys); break;
            case 5: weigh_queries(type, 5, yr, y_stride, ar, a_stride, sec, keys); break;
            case 4: weigh_queries(type, 4, yr, y_stride, ar, a_stride, sec, keys); break;
            case 3: weigh_queries(type, 3, yr, y_stride, ar, a_stride, sec, keys); break;
            case 2: weigh_queries(type, 2, yr, y_stride, ar, a_stride, sec, keys); break;
            default: weigh_queries(type, 1, yr, y_stride, ar, a_stride, sec, keys); break;
            }
        }
}

/* ---- exponentials ------------------------------------------------------------------------------ */

static inline __attribute__((always_inline)) void exp_at(float *x, __mmask16 live) {
    _mm512_mask_storeu_ps(x, live, exp_lanes(_mm512_maskz_loadu_ps(live, x)));
}

/* Below this many elements, a tail goes to the reference: the callers write x with scalar stores just before
 * (ops.c's corrections), and a masked load of elements still on their way to the cache waits about 80 cycles for
 * them (Sapphire Rapids), longer than exp1 takes for a few elements (decode, 1 query: 1.06x -> 1.15x). */
#define EXP_MIN_MASKED 8

/* Whole registers, then the last n % 16 lanes masked (given the full mask, the compiler emits plain loads and
 * stores); the loops below do the same. */
void avx512_exp(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) exp_at(x + i, 0xffff);
    if (n - i >= EXP_MIN_MASKED)
        exp_at(x + i, avx512_first(n - i));
    else
        for (; i < n; i++) x[i] = ord_exp1(x[i]);
}

/* ---- the online softmax's tile steps (8 lanes: element j in lane j % 8) --------------------------- */

/* A zmm of elements 16t .. 16t+15 meets the 8 lanes as two registers in element order: 16t+l, then 16t+8+l. */
static inline __m256 low8(__m512 v) { return _mm512_castps512_ps256(v); }
static inline __m256 high8(__m512 v) { return _mm512_extractf32x8_ps(v, 1); }

/* max_pick(lane, s) = s > lane ? s : lane, per lane: vmaxps returns its first operand when it is greater, else the
 * second (NaN in either, or equal values such as -0 and +0, give the second). */
static inline __m256 pick8(__m256 lane, __m256 s) { return _mm256_max_ps(s, lane); }

/* combine8_max's tree: pick(pick(pick(l0,l4), pick(l2,l6)), pick(pick(l1,l5), pick(l3,l7))); lanes are never NaN. */
static inline float combine8_max(__m256 l) {
    __m128 w = _mm_max_ps(_mm256_extractf128_ps(l, 1), _mm256_castps256_ps128(l)); /* pick(l0,l4) .. pick(l3,l7) */
    w = _mm_max_ps(_mm_movehl_ps(w, w), w);
    return _mm_cvtss_f32(_mm_max_ss(_mm_movehdup_ps(w), w));
}

/* s[0..15] *= scale and the picks of those elements into the lanes; lanes outside `live` hold -inf, which no pick
 * takes over a lane's value (lanes start at -inf and never become NaN). */
static inline __attribute__((always_inline)) __m256 scale_max_16(float *s, __m512 scale, __m256 lane, __mmask16 live) {
    const __m512 v = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), live, _mm512_maskz_loadu_ps(live, s), scale);
    _mm512_mask_storeu_ps(s, live, v);
    return pick8(pick8(lane, low8(v)), high8(v));
}

float avx512_scale_max(float *s, size_t n, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale);
    __m256 lane = _mm256_set1_ps(-INFINITY);
    size_t j = 0;
    for (; j + 16 <= n; j += 16) lane = scale_max_16(s + j, vscale, lane, 0xffff);
    if (j < n) lane = scale_max_16(s + j, vscale, lane, avx512_first(n - j));
    return combine8_max(lane);
}

/* s[0..15] = e^(s - m) and their adds into the lanes. Lanes outside `live` add +0, which leaves a lane as it is (a
 * lane starts at +0 and only adds values >= +0 or NaN, so it is never -0); s there is neither read nor written. */
static inline __attribute__((always_inline)) __m256 exp_sum_16(float *s, __m512 m, __m256 lane, __mmask16 live) {
    const __m512 e = _mm512_maskz_mov_ps(live, exp_lanes(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, s), m)));
    _mm512_mask_storeu_ps(s, live, e);
    return _mm256_add_ps(_mm256_add_ps(lane, low8(e)), high8(e));
}

/* Each row in one pass: subtract, exponentiate, add into the lanes. */
void avx512_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum) {
    for (size_t r = 0; r < n_rows; r++) {
        float *sr = s + r * stride;
        const __m512 mr = _mm512_set1_ps(m[r]);
        __m256 lane = _mm256_setzero_ps();
        size_t j = 0;
        for (; j + 16 <= n[r]; j += 16) lane = exp_sum_16(sr + j, mr, lane, 0xffff);
        if (j < n[r]) lane = exp_sum_16(sr + j, mr, lane, avx512_first(n[r] - j));
        sum[r] = hsum8(lane);
    }
}

/* ---- many queries over quantized K/V, one query a lane (attn.h's kern_attend_lanes_q; lanes.h) ------------------ */

/* A lane's four quants of a group as the broadcast operand: bytes at p, in every lane. */
static inline __m512i bcast4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* Scores of the tile's 32 keys for the 16 lanes, key j's at s[j]: per block, each key's integer sum from VNNI products
 * of the lanes' quants (+128) with the key's four quants broadcast, from the key's start (lanes_sums_start); then the
 * block's step in block order. */
static void lanes_scores(const lanes_tile *t, size_t n_blocks, const uint8_t *qu, const float *dq, __m512 *s) {
    for (int j = 0; j < KERN_KEY_TILE; j++) s[j] = _mm512_setzero_ps();
    for (size_t b = 0; b < n_blocks; b++) {
        const uint8_t *qs = t->k + b * SECTION_Q8 + SCALES_BYTES;
        __m512i q[QK / KERN_KEY_GROUP];
        for (int g = 0; g < QK / KERN_KEY_GROUP; g++)
            q[g] = _mm512_loadu_si512(qu + kern_lanes_at(b, (size_t)g * KERN_KEY_GROUP, 0));
        for (int h = 0; h < KERN_KEY_TILE; h += 16) {
            __m512i acc[16];
            for (int k = 0; k < 16; k++) acc[k] = _mm512_set1_epi32(t->kstart[b][h + k]);
            for (int g = 0; g < QK / KERN_KEY_GROUP; g++)
                for (int k = 0; k < 16; k++)
                    acc[k] = _mm512_dpbusd_epi32(acc[k], q[g],
                                                 bcast4(qs + (g * KERN_KEY_TILE + h + k) * KERN_KEY_GROUP));
            lanes_score_step(t, b, h, dq, acc, s);
        }
    }
}

/* The weighed values of block b for the 16 lanes: the weights (lanes.h) offset to w + 128 (the unsigned operand), their
 * integer sums against each element's four values broadcast, from the element's start (lanes_sums_start). */
static void lanes_weigh_block(const lanes_tile *t, size_t b, const __m512 *a, float *y) {
    const uint8_t *qs = t->v + b * SECTION_Q8 + SCALES_BYTES;
    __m512i wu[QK / KERN_KEY_GROUP];
    __m512 step;
    const __mmask16 live = lanes_weights(t, b, a, wu, &step);
    if (!live) return;
    for (int g = 0; g < QK / KERN_KEY_GROUP; g++) wu[g] = _mm512_xor_si512(wu[g], _mm512_set1_epi8(-128));
    for (int h = 0; h < QK; h += 16) {
        __m512i acc[16];
        for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_epi32(t->vstart[b][h + i]);
        for (int g = 0; g < QK / KERN_KEY_GROUP; g++)
            for (int i = 0; i < 16; i++)
                acc[i] = _mm512_dpbusd_epi32(acc[i], wu[g], bcast4(qs + g * 128 + (h + i) * KERN_KEY_GROUP));
        for (int i = 0; i < 16; i++) lanes_add(y + (size_t)(h + i) * KERN_LANES, step, acc[i], live);
    }
}

void avx512_attend_lanes_q(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                           kern_lane_block *blocks, size_t n_blocks) {
    const size_t head_blocks = n / QK;
    lanes_tile t;
    lanes_prepare(type, kt, vt, head_blocks, &t);
    for (size_t g = 0; g < n_blocks; g++) {
        kern_lane_block *lb = &blocks[g];
        if (!lanes_reach(lb)) continue;
        __m512 s[KERN_KEY_TILE];
        lanes_scores(&t, head_blocks, lb->qu, lb->dq, s);
        lanes_softmax(s, lb, scale, n);
        for (size_t b = 0; b < head_blocks; b++) lanes_weigh_block(&t, b, s, lb->y + b * QK * KERN_LANES);
    }
}
