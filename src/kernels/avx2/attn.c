/* avx2/attn.c — the AVX2 variant's attention steps: key tiles scored eight keys to a register, values accumulated in
 * registers for blocks of queries, the softmax's exponentials eight at a time.
 *
 * Each query gets the bits the reference gives it (ref/attn.c): only the loop nests differ. Compiled with -mavx2
 * -mfma -mf16c and -ffp-contract=off.
 */
#include "avx2.h"

#include "attn.h"
#include "simd.h"

#include <float.h>
#include <string.h>

void avx2_exp(float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 k =
            _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-EXP_LN2_HI), v);
        r = _mm256_fmadd_ps(k, _mm256_set1_ps(-EXP_LN2_LO), r);
        __m256 p = _mm256_set1_ps(ord_exp_coef[6]);
        for (int c = 5; c >= 0; c--) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ord_exp_coef[c]));
        /* lanes out of range hold garbage scales here; the blends below replace them */
        const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
        __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
        e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(v, _mm256_set1_ps(EXP_MIN), _CMP_LT_OQ));
        e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(v, _mm256_set1_ps(EXP_MAX), _CMP_GT_OQ));
        _mm256_storeu_ps(x + i, e);
    }
    for (; i < n; i++) x[i] = ord_exp1(x[i]);
}

float avx2_scale_max(float *s, size_t n, float scale) {
    __m256 mx = _mm256_set1_ps(-INFINITY);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(scale));
        _mm256_storeu_ps(s + j, v);
        mx = _mm256_blendv_ps(mx, v, _mm256_cmp_ps(v, mx, _CMP_GT_OQ)); /* max_pick per lane */
    }
    float lane[BLOCK_LANES];
    _mm256_storeu_ps(lane, mx);
    for (; j < n; j++) {
        s[j] *= scale;
        lane[j % BLOCK_LANES] = ord_max_pick(lane[j % BLOCK_LANES], s[j]);
    }
    return ord_combine8_max(lane);
}

void avx2_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum) {
    for (size_t r = 0; r < n_rows; r++) /* whole registers: the elements past n[r] are the caller's scratch */
        for (float *sr = s + r * stride, *end = sr + n[r]; sr < end; sr += 8)
            _mm256_storeu_ps(sr, _mm256_sub_ps(_mm256_loadu_ps(sr), _mm256_set1_ps(m[r])));
    avx2_exp(s, n_rows * stride);
    for (size_t r = 0; r < n_rows; r++) {
        const float *sr = s + r * stride;
        __m256 acc = _mm256_setzero_ps();
        size_t j = 0;
        for (; j + 8 <= n[r]; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(sr + j));
        float lane[BLOCK_LANES];
        _mm256_storeu_ps(lane, acc);
        for (; j < n[r]; j++) lane[j % BLOCK_LANES] += sr[j];
        sum[r] = ord_combine8(lane);
    }
}

/* Q queries (1..6) against 8·K8 keys of a key-major tile from key k0 (K8 = 2 or 4, Q·K8 <= 12): Q·K8 chains side by
 * side, each element d of the keys loaded and widened once for the Q queries. One function per (Q, K8), so that the
 * chains are an array of constant size, which GCC keeps in registers. */
#define SCORE_TILE_KEYS(Q, K8)                                                                                      \
    static inline __attribute__((always_inline)) void score_tile_keys_##Q##_##K8(                                  \
        widen_kind kind, const void *kt, size_t k0, const float *q, size_t q_stride, size_t n, float *out,        \
        size_t out_stride) {                                                                                        \
        __m256 acc[Q * K8];                                                                                         \
        for (int c = 0; c < Q * K8; c++) acc[c] = _mm256_setzero_ps();                                              \
        for (size_t d = 0; d < n; d++) {                                                                            \
            __m256 key[K8];                                                                                         \
            for (int g = 0; g < K8; g++) {                                                                          \
                key[g] = load8_widened(kind, kt, d * KERN_KEY_TILE + k0 + 8 * (size_t)g);                         \
                if (Q > 1) PIN(key[g]); /* shared by the Q queries in registers */                                  \
            }                                                                                                       \
            for (int r = 0; r < Q; r++) {                                                                           \
                const __m256 qd = _mm256_broadcast_ss(q + r * q_stride + d);                                        \
                for (int g = 0; g < K8; g++) acc[r * K8 + g] = _mm256_fmadd_ps(qd, key[g], acc[r * K8 + g]);       \
            }                                                                                                       \
        }                                                                                                           \
        for (int r = 0; r < Q; r++)                                                                                 \
            for (int g = 0; g < K8; g++)                                                                            \
                _mm256_storeu_ps(out + r * out_stride + k0 + 8 * (size_t)g, acc[r * K8 + g]);                       \
    }
SCORE_TILE_KEYS(1, 4)
SCORE_TILE_KEYS(2, 4)
SCORE_TILE_KEYS(3, 2)
SCORE_TILE_KEYS(4, 2)
SCORE_TILE_KEYS(5, 2)
SCORE_TILE_KEYS(6, 2)

/* The queries of a tile in blocks of six, then the rest as one block: all 32 keys at once for one or two queries
 * (4 chains each), else two halves of 16 keys — enough independent chains to cover the multiply-add latency, few
 * enough to stay in registers. */
static void score_tile(widen_kind kind, const void *kt, const float *q, size_t q_stride, size_t n_q, size_t n,
                       float *out, size_t out_stride) {
    for (size_t r = 0; r < n_q; r += 6) {
        const float *qr = q + r * q_stride;
        float *o = out + r * out_stride;
        switch (n_q - r < 6 ? n_q - r : 6) {
#define HALVES(Q)                                                                    \
    score_tile_keys_##Q##_2(kind, kt, 0, qr, q_stride, n, o, out_stride);            \
    score_tile_keys_##Q##_2(kind, kt, 16, qr, q_stride, n, o, out_stride);           \
    break
        case 6: HALVES(6);
        case 5: HALVES(5);
        case 4: HALVES(4);
        case 3: HALVES(3);
#undef HALVES
        case 2: score_tile_keys_2_4(kind, kt, 0, qr, q_stride, n, o, out_stride); break;
        default: score_tile_keys_1_4(kind, kt, 0, qr, q_stride, n, o, out_stride); break;
        }
    }
}

void avx2_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride) {
    score_tile(WIDEN_F16, kt, q, q_stride, n_q, n, out, out_stride);
}

void avx2_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                         size_t out_stride) {
    score_tile(WIDEN_F32, kt, q, q_stride, n_q, n, out, out_stride);
}

/* Q outputs at once (1, 2 or 4, known at compile time; output r at y + r·y_stride with weights a + r·a_stride):
 * each y[i] sees fmaf(a[j], row_j[i], y[i]) for j in order, as n_rows axpy calls would do; only the loop nest
 * differs: 64 elements in all (64/Q of each output) stay in eight registers while every row passes over them,
 * each row chunk loaded once for the Q outputs. */
static inline __attribute__((always_inline)) void axpy_queries(widen_kind kind, int Q, float *y, size_t y_stride,
                                                                const float *a, size_t a_stride, const void *rows,
                                                                size_t stride, size_t n_rows,
                                                                size_t n) {
    size_t i = 0;
    const int W = 8 / Q; /* registers per output */
    for (; i + 8 * (size_t)W <= n; i += 8 * (size_t)W) {
        __m256 acc[8];
        for (int r = 0; r < Q; r++)
            for (int u = 0; u < W; u++) acc[r * W + u] = _mm256_loadu_ps(y + r * y_stride + i + 8 * u);
        for (size_t j = 0; j < n_rows; j++) {
            __m256 aj[4];
            for (int r = 0; r < Q; r++) {
                aj[r] = _mm256_set1_ps(a[r * a_stride + j]);
                if (Q > 1) PIN(aj[r]);
            }
            for (int u = 0; u < W; u++) {
                size_t at;
                const void *p = widened_elem_at(kind, rows, j, stride, i + 8 * (size_t)u, &at);
                __m256 v = load8_widened(kind, p, at);
                if (Q > 1) PIN(v);
                for (int r = 0; r < Q; r++) acc[r * W + u] = _mm256_fmadd_ps(aj[r], v, acc[r * W + u]);
            }
        }
        for (int r = 0; r < Q; r++)
            for (int u = 0; u < W; u++) _mm256_storeu_ps(y + r * y_stride + i + 8 * u, acc[r * W + u]);
    }
    for (int r = 0; r < Q; r++) {
        float *yr = y + r * y_stride;
        const float *ar = a + r * a_stride;
        size_t t = i;
        for (; t + 8 <= n; t += 8) {
            __m256 acc = _mm256_loadu_ps(yr + t);
            for (size_t j = 0; j < n_rows; j++) {
                size_t at;
                const void *p = widened_elem_at(kind, rows, j, stride, t, &at);
                acc = _mm256_fmadd_ps(_mm256_set1_ps(ar[j]), load8_widened(kind, p, at), acc);
            }
            _mm256_storeu_ps(yr + t, acc);
        }
        for (; t < n; t++)
            for (size_t j = 0; j < n_rows; j++) {
                size_t at;
                const void *p = widened_elem_at(kind, rows, j, stride, t, &at);
                yr[t] = fmaf(ar[j], load1_widened(kind, p, at), yr[t]);
            }
    }
}

static inline __attribute__((always_inline)) void axpy_block(widen_kind kind, float *y, size_t y_stride,
                                                              const float *a, size_t a_stride, size_t n_y,
                                                              const void *rows, size_t stride,
                                                              size_t n_rows, size_t n) {
    size_t r = 0;
    for (; r + 4 <= n_y; r += 4)
        axpy_queries(kind, 4, y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride,
                     n_rows, n);
    for (; r + 2 <= n_y; r += 2)
        axpy_queries(kind, 2, y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride,
                     n_rows, n);
    if (r < n_y)
        axpy_queries(kind, 1, y + r * y_stride, y_stride, a + r * a_stride, a_stride, rows, stride,
                     n_rows, n);
}

/* ---- quantized keys (attn.h's tile layout) ---- */

/* Q queries (1 or 2) against 16 keys of a Q8_0 or Q4_0 tile from key k0 (two registers of 8). Per block, each key's
 * integer sum s_b in its lane, from maddubs products of unsigned bytes with signed ones: Q8_0 as |k| · (q with k's
 * sign) — pair sums at most 2 · 128 · 127, below maddubs's 16-bit limit — and Q4_0 as the stored nibbles (k + 8) · q,
 * the offset times the query's sum taken off again. Then the chain's step, fmaf(d_q · d_k, s_b, s), in block order. */
static inline __attribute__((always_inline)) void score_keys_q(ggml_type type, int Q, const uint8_t *kt, size_t k0,
                                                                const block_q8_act *q, size_t q_stride, size_t n,
                                                                float *out, size_t out_stride) {
    const bool q8 = type == GGML_TYPE_Q8_0;
    const size_t section = ord_kv_block_bytes(type) * KERN_KEY_TILE, group = KERN_KEY_GROUP * KERN_KEY_TILE;
    const int n_groups = (int)(ord_kv_block_bytes(type) - sizeof(uint16_t)) / KERN_KEY_GROUP;
    __m256 acc[4];
    for (int c = 0; c < 2 * Q; c++) acc[c] = _mm256_setzero_ps();
    for (size_t b = 0; b < n / QK; b++) {
        const uint8_t *sec = kt + b * section, *qs = sec + sizeof(uint16_t) * KERN_KEY_TILE + k0 * KERN_KEY_GROUP;
        __m256i sum[4];
        for (int c = 0; c < 2 * Q; c++) sum[c] = _mm256_setzero_si256();
        for (int g = 0; g < n_groups; g++) {
            __m256i k[2];
            for (int h = 0; h < 2; h++) k[h] = _mm256_loadu_si256((const __m256i *)(qs + g * group + 32 * h));
            for (int r = 0; r < Q; r++) {
                const block_q8_act *qb = &q[r * q_stride + b];
                int32_t lo, hi = 0; /* Q8_0: quants 4g..4g+3; Q4_0: those of the low nibbles, then the high ones' */
                memcpy(&lo, qb->qs + g * KERN_KEY_GROUP, sizeof lo);
                if (!q8) memcpy(&hi, qb->qs + QK / 2 + g * KERN_KEY_GROUP, sizeof hi);
                for (int h = 0; h < 2; h++)
                    if (q8) {
                        const __m256i sq = _mm256_sign_epi8(_mm256_set1_epi32(lo), k[h]);
                        sum[2 * r + h] = sums_u8s8(sum[2 * r + h], _mm256_abs_epi8(k[h]), sq);
                    } else {
                        const __m256i m = _mm256_set1_epi8(15);
                        const __m256i nib_lo = _mm256_and_si256(k[h], m);
                        const __m256i nib_hi = _mm256_and_si256(_mm256_srli_epi16(k[h], 4), m);
                        sum[2 * r + h] = sums_u8s8(sums_u8s8(sum[2 * r + h], nib_lo, _mm256_set1_epi32(lo)), nib_hi,
                                                   _mm256_set1_epi32(hi));
                    }
            }
        }
        __m256 d[2];
        for (int h = 0; h < 2; h++) d[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sec + 2 * (k0 + 8 * h))));
        for (int r = 0; r < Q; r++) {
            const block_q8_act *qb = &q[r * q_stride + b];
            int32_t q_sum = 0;
            for (int i = 0; !q8 && i < QK; i++) q_sum += qb->qs[i];
            const __m256i off = _mm256_set1_epi32(8 * q_sum);
            const __m256 dq = _mm256_set1_ps(qb->d);
            for (int h = 0; h < 2; h++)
                acc[2 * r + h] = _mm256_fmadd_ps(_mm256_mul_ps(dq, d[h]),
                                                 _mm256_cvtepi32_ps(_mm256_sub_epi32(sum[2 * r + h], off)),
                                                 acc[2 * r + h]);
        }
    }
    for (int r = 0; r < Q; r++)
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + r * out_stride + k0 + 8 * h, acc[2 * r + h]);
}

void avx2_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q, size_t n,
                       float *out, size_t out_stride) {
    for (size_t r = 0; r < n_q; r += 2)
        for (size_t k0 = 0; k0 < KERN_KEY_TILE; k0 += 16)
            if (n_q - r >= 2)
                score_keys_q(type, 2, kt, k0, q + r * q_stride, q_stride, n, out + r * out_stride, out_stride);
            else
                score_keys_q(type, 1, kt, k0, q + r * q_stride, q_stride, n, out + r * out_stride, out_stride);
}

/* ---- values of a quantized V tile (attn.h's layout and order) ---- */

/* Queries side by side on one section: 4 integer sums each, with the section's value registers, within the 16. */
#define WEIGH_MAX_Q 2

/* w_j = a_j · (d_j · f) for j < n_keys (the others +0) into w, and the largest |w_j|. */
static float weights_of(const float *a, const uint8_t *sec, size_t n_keys, float f, __m256 *w) {
    __m256 top = _mm256_setzero_ps();
    for (int h = 0; h < 4; h++) {
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n_keys),
                                                _mm256_add_epi32(_mm256_set1_epi32(8 * h),
                                                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sec + 16 * h))),
                                       _mm256_set1_ps(f));
        w[h] = _mm256_and_ps(_mm256_mul_ps(_mm256_maskload_ps(a + 8 * h, live), d), _mm256_castsi256_ps(live));
        top = _mm256_max_ps(top, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), w[h]));
    }
    __m128 t = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
    t = _mm_max_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

/* One query's weights of a block (attn.h): w_j = a_j · d_j for j < n_keys (the others +0), quantized against W = max
 * |w_j| into wq (32 bytes), formed 2^32 larger where that gives the same bits (order.h's ord_weights_scaled). False
 * when the block adds nothing; else W / 127 in *scale and, if sum is not NULL (Q4_0's offset needs it, Q8_0's sign
 * products do not), Σ wq in *sum. */
static bool block_weights(const float *a, const uint8_t *sec, size_t n_keys, int8_t *wq, float *scale, int32_t *sum) {
    __m256 w[4];
    float top = weights_of(a, sec, n_keys, ORD_WEIGHT_SCALE, w), W;
    switch (ord_weights_scaled(top)) {
    case ORD_WEIGHTS_DEAD: return false;
    case ORD_WEIGHTS_SCALED: W = top * ORD_WEIGHT_UNSCALE; break;
    default:
        top = W = weights_of(a, sec, n_keys, 1.0f, w);
        if (!ord_weights_live(W)) return false;
    }
    const __m256 c = _mm256_set1_ps(127.0f / top);
    __m256i q[4];
    for (int h = 0; h < 4; h++) q[h] = _mm256_cvtps_epi32(_mm256_mul_ps(w[h], c));
    /* 32 int32 → 32 bytes in order: the packs interleave 128-bit lanes, the permute puts them back */
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256((__m256i *)wq,
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    *scale = W / 127.0f;
    if (!sum) return true;
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    *sum = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1))));
    return true;
}

/* Q queries (1 or 2) against one block's section, per group of four positions: Q8_0's 32 elements are four registers
 * (elements 8h..8h+7), products |v| · (w with v's sign) — pair sums at most 2 · 128 · 127, below maddubs's 16-bit
 * limit; Q4_0's are two, their low and high nibbles (v + 8) times w, the offset 8 · Σ w_q taken off again. Then one
 * step per element, fmaf(W / 127, S, y). */
static inline __attribute__((always_inline)) void weigh_queries(ggml_type type, int Q, float *y, size_t y_stride,
                                                                const float *a, size_t a_stride, const uint8_t *sec,
                                                                size_t n_keys) {
    const bool q8 = type == GGML_TYPE_Q8_0;
    const uint8_t *qs = sec + sizeof(uint16_t) * KERN_KEY_TILE;
    const size_t group = (ord_kv_block_bytes(type) - sizeof(uint16_t)) * KERN_KEY_GROUP;
    int8_t wq[WEIGH_MAX_Q][KERN_KEY_TILE];
    float scale[WEIGH_MAX_Q];
    int32_t wsum[WEIGH_MAX_Q] = {0};
    bool live[WEIGH_MAX_Q];
    for (int r = 0; r < Q; r++)
        if (!(live[r] = block_weights(a + r * a_stride, sec, n_keys, wq[r], &scale[r], q8 ? NULL : &wsum[r])))
            memset(wq[r], 0, sizeof wq[r]);
    __m256i sum[4 * WEIGH_MAX_Q];
    for (int c = 0; c < 4 * Q; c++) sum[c] = _mm256_setzero_si256();
    for (int g = 0; g < KERN_KEY_TILE / KERN_KEY_GROUP; g++) {
        __m256i w[WEIGH_MAX_Q];
        for (int r = 0; r < Q; r++) {
            int32_t w4;
            memcpy(&w4, wq[r] + g * KERN_KEY_GROUP, sizeof w4);
            w[r] = _mm256_set1_epi32(w4);
        }
        if (q8)
            for (int h = 0; h < 4; h++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(qs + g * group + 32 * h));
                const __m256i ax = _mm256_abs_epi8(x);
                for (int r = 0; r < Q; r++)
                    sum[4 * r + h] = sums_u8s8(sum[4 * r + h], ax, _mm256_sign_epi8(w[r], x));
            }
        else
            for (int h = 0; h < 2; h++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(qs + g * group + 32 * h));
                const __m256i m = _mm256_set1_epi8(15);
                const __m256i lo = _mm256_and_si256(x, m), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
                for (int r = 0; r < Q; r++) {
                    sum[4 * r + h] = sums_u8s8(sum[4 * r + h], lo, w[r]);
                    sum[4 * r + 2 + h] = sums_u8s8(sum[4 * r + 2 + h], hi, w[r]);
                }
            }
    }
    for (int r = 0; r < Q; r++) {
        if (!live[r]) continue;
        const __m256i off = _mm256_set1_epi32(q8 ? 0 : 8 * wsum[r]);
        const __m256 sc = _mm256_set1_ps(scale[r]);
        float *yr = y + r * y_stride;
        for (int h = 0; h < 4; h++)
            _mm256_storeu_ps(yr + 8 * h, _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(_mm256_sub_epi32(sum[4 * r + h], off)),
                                                         _mm256_loadu_ps(yr + 8 * h)));
    }
}

void avx2_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                       const uint8_t *vt, size_t n_keys, size_t n) {
    const size_t section = ord_kv_block_bytes(type) * KERN_KEY_TILE;
    for (size_t b = 0; b < n / QK; b++)
        for (size_t r = 0; r < n_y; r += WEIGH_MAX_Q) {
            float *yr = y + r * y_stride + b * QK;
            const float *ar = a + r * a_stride;
            if (n_y - r >= 2)
                weigh_queries(type, 2, yr, y_stride, ar, a_stride, vt + b * section, n_keys);
            else
                weigh_queries(type, 1, yr, y_stride, ar, a_stride, vt + b * section, n_keys);
        }
}

void avx2_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                         const uint16_t *rows, size_t stride, size_t n_rows, size_t n) {
    axpy_block(WIDEN_F16, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void avx2_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                         size_t stride, size_t n_rows, size_t n) {
    axpy_block(WIDEN_F32, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}
