/* lanes.h — the steps of kern_attend_lanes_q (attn.h) around its integer products, for the variants with AVX-512: the
 * tile rearranged once for every lane block of a call (Q4_0 widened to Q8_0's layout, the scales as floats, the sums
 * of the quants), the softmax step over 16 lanes, and a block's weights quantized and packed four positions a lane.
 * The products are the variant's own (avx512/attn.c: VNNI).
 *
 * INVARIANT: every step is element-wise over the lanes and is, in each lane, the step attn.h's orders give that query
 * alone.
 */
#ifndef FKV_KERNELS_AVX512_LANES_H
#define FKV_KERNELS_AVX512_LANES_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "attn.h"
#include "order.h"
#include "simd.h"

#define SECTION_Q8 (sizeof(block_q8_0) * KERN_KEY_TILE) /* a block's section of a Q8_0 tile: 32 scales, 1024 quants */
#define SCALES_BYTES (sizeof(uint16_t) * KERN_KEY_TILE)  /* the scales that open a section */
#define LANES_MAX_BLOCKS (KERN_MAX_HEAD_DIM / QK)

/* e^v per lane in exp1's sequence: k = nearbyint(v·log2e), r in two fused steps, Horner, times 2^k — vscalefps, p · 2^k
 * rounded once, as the product with 2^k built from its bits (a normal float for every k whose lane is not replaced
 * next); then +0 below EXP_MIN and, unless v <= 0 is known, +inf above EXP_MAX. A NaN comes out as its quiet self:
 * every step that sees it returns it, and the ordered compares leave it. Lanes outside `live` are +0. */
static inline __attribute__((always_inline)) __m512 exp_lanes_in(__m512 v, __mmask16 live, bool above) {
    const __m512 vl = _mm512_mul_ps(v, _mm512_set1_ps(EXP_LOG2E));
    const __m512 k = _mm512_roundscale_ps(vl, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-EXP_LN2_HI), v);
    r = _mm512_fmadd_ps(k, _mm512_set1_ps(-EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(ord_exp_coef[6]);
    for (int c = 5; c >= 0; c--) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ord_exp_coef[c]));
    const __m512 e = _mm512_maskz_mov_ps(live & ~_mm512_cmp_ps_mask(v, _mm512_set1_ps(EXP_MIN), _CMP_LT_OQ),
                                         _mm512_scalef_ps(p, k));
    if (!above) return e;
    return _mm512_mask_mov_ps(e, _mm512_mask_cmp_ps_mask(live, v, _mm512_set1_ps(EXP_MAX), _CMP_GT_OQ),
                              _mm512_set1_ps(INFINITY));
}

static inline __m512 exp_lanes(__m512 v) { return exp_lanes_in(v, 0xffff, true); }

/* A Q4_0 tile's sections (K or V) in Q8_0's layout, quants less 8, so one code serves both types: a K section's group
 * g holds elements 4g..4g+3 (Q4_0's low nibbles of its group g for g < 4, high ones of group g - 4 above); a V
 * section's group g holds elements 0..15 then 16..31 of its four positions (the low, then the high nibbles of Q4_0's
 * 64 bytes). The scales as they are. */
static inline void lanes_widen_q4(bool keys, const uint8_t *src, size_t n_blocks, uint8_t *dst) {
    const size_t src_section = sizeof(block_q4_0) * KERN_KEY_TILE;
    const __m512i m = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
    for (size_t b = 0; b < n_blocks; b++) {
        const uint8_t *s = src + b * src_section + SCALES_BYTES;
        uint8_t *o = dst + b * SECTION_Q8;
        memcpy(o, src + b * src_section, SCALES_BYTES);
        o += SCALES_BYTES;
        for (size_t at = 0; at < src_section - SCALES_BYTES; at += 64) {
            const __m512i x = _mm512_loadu_si512(s + at);
            const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(x, m), eight);
            const __m512i hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(x, 4), m), eight);
            /* K: Q4_0 group g (128 bytes) -> Q8_0 groups g and g + 4; V: Q4_0 group g (64 bytes) -> Q8_0 group g */
            const size_t lo_at = keys ? at : 2 * at, hi_at = keys ? at + 4 * 128 : 2 * at + 64;
            _mm512_storeu_si512(o + lo_at, lo);
            _mm512_storeu_si512(o + hi_at, hi);
        }
    }
}

/* -128 × the sums of a section's 16-lane columns of four quants over its 8 groups (keys: a key's 32 quants; values: an
 * element's 32 positions), for the 32 keys or elements: start[0..31]. The products' unsigned side is 128 more than the
 * signed value it stands for, so integer sums that start from these come out exact. */
static inline void lanes_sums_start(const uint8_t *qs, int32_t *start) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    for (int g = 0; g < QK / KERN_KEY_GROUP; g++) {
        s0 = _mm512_dpbusd_epi32(s0, ones, _mm512_loadu_si512(qs + g * 128));
        s1 = _mm512_dpbusd_epi32(s1, ones, _mm512_loadu_si512(qs + g * 128 + 64));
    }
    _mm512_storeu_si512(start, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s0, 7)));
    _mm512_storeu_si512(start + 16, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s1, 7)));
}

/* A tile as the lanes read it: its K and V sections in Q8_0's layout (Q4_0's widened into kw, vw), the scales of
 * block b as floats (dk[b][j] of key j, dv[b][j] of position j, dv_scaled[b][j] = dv[b][j] · ORD_WEIGHT_SCALE, exact),
 * and the starts of the VNNI sums with the unsigned queries (kstart[b][j], key j) or weights (vstart[b][i], element
 * i). */
typedef struct {
    const uint8_t *k, *v;
    _Alignas(64) float dk[LANES_MAX_BLOCKS][KERN_KEY_TILE], dv[LANES_MAX_BLOCKS][KERN_KEY_TILE];
    _Alignas(64) float dv_scaled[LANES_MAX_BLOCKS][KERN_KEY_TILE];
    _Alignas(64) int32_t kstart[LANES_MAX_BLOCKS][KERN_KEY_TILE], vstart[LANES_MAX_BLOCKS][QK];
    _Alignas(64) uint8_t kw[LANES_MAX_BLOCKS * SECTION_Q8], vw[LANES_MAX_BLOCKS * SECTION_Q8];
} lanes_tile;

static inline void lanes_scales(const uint8_t *sec, float *d) {
    _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sec)));
    _mm512_storeu_ps(d + 16, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sec + 32))));
}

static inline void lanes_prepare(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n_blocks,
                                 lanes_tile *t) {
    t->k = kt;
    t->v = vt;
    if (type == GGML_TYPE_Q4_0) {
        lanes_widen_q4(true, kt, n_blocks, t->kw);
        lanes_widen_q4(false, vt, n_blocks, t->vw);
        t->k = t->kw;
        t->v = t->vw;
    }
    for (size_t b = 0; b < n_blocks; b++) {
        const uint8_t *ks = t->k + b * SECTION_Q8, *vs = t->v + b * SECTION_Q8;
        lanes_scales(ks, t->dk[b]);
        lanes_scales(vs, t->dv[b]);
        for (int j = 0; j < KERN_KEY_TILE; j++) t->dv_scaled[b][j] = t->dv[b][j] * ORD_WEIGHT_SCALE;
        lanes_sums_start(ks + SCALES_BYTES, t->kstart[b]);
        lanes_sums_start(vs + SCALES_BYTES, t->vstart[b]);
    }
}

/* Whether any lane of the block sees the tile. */
static inline bool lanes_reach(const kern_lane_block *lb) {
    const __m512i keys = _mm512_loadu_si512(lb->keys);
    return _mm512_test_epi32_mask(keys, keys) != 0;
}

/* A block of scores fmaf(d_q · d_k, s_b, s) added to key j's s[j]: acc[k] holds key h + k's exact integer sums s_b (16
 * lanes). */
static inline void lanes_score_step(const lanes_tile *t, size_t b, int h, const float *dq, const __m512i *acc,
                                    __m512 *s) {
    const __m512 dqb = _mm512_loadu_ps(dq + b * KERN_LANES);
    for (int k = 0; k < 16; k++)
        s[h + k] = _mm512_fmadd_ps(_mm512_mul_ps(dqb, _mm512_set1_ps(t->dk[b][h + k])), _mm512_cvtepi32_ps(acc[k]),
                                   s[h + k]);
}

/* The softmax step of a lane block on its scores s[j] (key j's, 16 lanes): scale and maximum (kern_scale_max's 8 lanes
 * and tree), the correction of m, d and y in the lanes whose maximum grew, then s[j] = the weights a_j (+0 where a lane
 * does not see key j) and d += their sum (kern_exp_sum_rows's 8 lanes and tree). */
static inline void lanes_softmax(__m512 *s, kern_lane_block *lb, float scale, size_t n) {
    const __m512i vkeys = _mm512_loadu_si512(lb->keys), vbelow = _mm512_loadu_si512(lb->below);
    const __m512 vscale = _mm512_set1_ps(scale), minus_inf = _mm512_set1_ps(-INFINITY);
    const bool windowed = _mm512_test_epi32_mask(vbelow, vbelow);
    __m512 lane_top[BLOCK_LANES]; /* kern_scale_max's lanes: key j's pick into lane j % 8, then its tree */
    for (int l = 0; l < BLOCK_LANES; l++) lane_top[l] = minus_inf;
    __mmask16 sees[KERN_KEY_TILE];
    for (int j = 0; j < KERN_KEY_TILE; j++) {
        const __m512i vj = _mm512_set1_epi32(j);
        sees[j] = _mm512_cmpgt_epu32_mask(vkeys, vj);
        if (windowed) s[j] = _mm512_mask_mov_ps(s[j], _mm512_cmpgt_epu32_mask(vbelow, vj), minus_inf);
        s[j] = _mm512_mul_ps(s[j], vscale);
        __m512 *pick = &lane_top[j % BLOCK_LANES];
        *pick = _mm512_mask_max_ps(*pick, sees[j], s[j], *pick);
    }
    /* ord_combine8_max's tree; pick(a, b) is max_ps(b, a) */
    const __m512 top = _mm512_max_ps(
        _mm512_max_ps(_mm512_max_ps(lane_top[7], lane_top[3]), _mm512_max_ps(lane_top[5], lane_top[1])),
        _mm512_max_ps(_mm512_max_ps(lane_top[6], lane_top[2]), _mm512_max_ps(lane_top[4], lane_top[0])));
    __m512 vm = _mm512_loadu_ps(lb->m), vd = _mm512_loadu_ps(lb->d);
    const __mmask16 grew = _mm512_cmp_ps_mask(top, vm, _CMP_GT_OQ);
    if (grew) {
        const __m512 c = exp_lanes(_mm512_maskz_sub_ps(grew, vm, top));
        for (size_t i = 0; i < n; i++) {
            float *yi = lb->y + i * KERN_LANES;
            _mm512_storeu_ps(yi, _mm512_mask_mul_ps(_mm512_loadu_ps(yi), grew, _mm512_loadu_ps(yi), c));
        }
        vd = _mm512_mask_mul_ps(vd, grew, vd, c);
        vm = _mm512_mask_mov_ps(vm, grew, top);
    }
    __m512 lane[BLOCK_LANES];
    for (int l = 0; l < BLOCK_LANES; l++) lane[l] = _mm512_setzero_ps();
    for (int j = 0; j < KERN_KEY_TILE; j++) {
        s[j] = exp_lanes_in(_mm512_sub_ps(s[j], vm), sees[j], false); /* s_j <= m: s_j - m <= 0 or NaN */
        lane[j % BLOCK_LANES] = _mm512_add_ps(lane[j % BLOCK_LANES], s[j]);
    }
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(lane[0], lane[4]), _mm512_add_ps(lane[2], lane[6])),
                                     _mm512_add_ps(_mm512_add_ps(lane[1], lane[5]), _mm512_add_ps(lane[3], lane[7])));
    _mm512_storeu_ps(lb->d, _mm512_add_ps(vd, sum));
    _mm512_storeu_ps(lb->m, vm);
}

/* w_j = a_j · d_j for the lanes in `lanes` (the others +0), and the largest |w_j| of each lane. Four chains of maxima,
 * so their latency overlaps: a maximum of magnitudes (vrangeps, the sign cleared), where no NaN occurs (a_j >= +0 and
 * d_j are finite), is the same in any order. */
static inline void lane_weights(const __m512 *a, const float *d, __mmask16 lanes, __m512 *w, __m512 *top) {
    __m512 tops[4];
    for (int c = 0; c < 4; c++) tops[c] = _mm512_setzero_ps();
    for (int j = 0; j < KERN_KEY_TILE; j++) {
        w[j] = _mm512_maskz_mul_ps(lanes, a[j], _mm512_set1_ps(d[j]));
        tops[j % 4] = _mm512_range_ps(w[j], tops[j % 4], 0xb); /* max |.|, sign cleared */
    }
    *top = _mm512_max_ps(_mm512_max_ps(tops[0], tops[1]), _mm512_max_ps(tops[2], tops[3]));
}

/* Block b's weights for the 16 lanes (attn.h's order, per lane): w_j = a_j · d_j (d: the block's scales dv), W = max
 * |w_j| (a_j = 0 where the lane does not see key j), w_j quantized against W and packed four positions a lane as signed
 * bytes: wq[g] holds positions 4g..4g+3 of lane r at bytes 4r..4r+3. Returns the lanes whose W is neither below 2^-120
 * nor infinite (the others add nothing), W / 127 in *step. The weights are formed 2^32 times larger, and lanes the
 * scaling does not serve take the unscaled steps (order.h's ord_weights_scaled). */
static inline __mmask16 lanes_weights(const lanes_tile *t, size_t b, const __m512 *a, __m512i *wq, __m512 *step) {
    __m512 w[KERN_KEY_TILE], top_scaled;
    lane_weights(a, t->dv_scaled[b], 0xffff, w, &top_scaled);
    const __mmask16 scaled = _mm512_cmp_ps_mask(top_scaled, _mm512_set1_ps(ORD_WEIGHT_SCALED_MIN), _CMP_GE_OQ) &
                             _mm512_cmp_ps_mask(top_scaled, _mm512_set1_ps(ORD_WEIGHT_SCALED_MAX), _CMP_LE_OQ);
    const __mmask16 exact = _mm512_cmp_ps_mask(top_scaled, _mm512_set1_ps(ORD_WEIGHT_DEAD_BELOW), _CMP_GE_OQ) & ~scaled;
    __m512 c = _mm512_div_ps(_mm512_set1_ps(127.0f), top_scaled);
    __m512 top = _mm512_mul_ps(top_scaled, _mm512_set1_ps(ORD_WEIGHT_UNSCALE));
    __mmask16 live = scaled;
    if (exact) {
        __m512 we[KERN_KEY_TILE], te;
        lane_weights(a, t->dv[b], exact, we, &te);
        live |= exact & _mm512_cmp_ps_mask(te, _mm512_set1_ps(0x1p-120f), _CMP_GE_OQ) &
                _mm512_cmp_ps_mask(te, _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ);
        for (int j = 0; j < KERN_KEY_TILE; j++) w[j] = _mm512_mask_mov_ps(w[j], exact, we[j]);
        c = _mm512_mask_div_ps(c, exact, _mm512_set1_ps(127.0f), te);
        top = _mm512_mask_mov_ps(top, exact, te);
    }
    if (!live) return 0;
    *step = _mm512_div_ps(top, _mm512_set1_ps(127.0f));
    /* lane r's quantized weights of positions 4g..4g+3 as one dword: packs give, per 128-bit lane, the four queries'
     * bytes position by position; the shuffle gathers each query's four */
    const __m512i gather = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    for (int g = 0; g < QK / KERN_KEY_GROUP; g++) {
        __m512i q4[KERN_KEY_GROUP];
        for (int u = 0; u < KERN_KEY_GROUP; u++)
            q4[u] = _mm512_maskz_cvtps_epi32(live, _mm512_mul_ps(w[g * KERN_KEY_GROUP + u], c));
        const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(q4[0], q4[1]), _mm512_packs_epi32(q4[2], q4[3]));
        wq[g] = _mm512_shuffle_epi8(bytes, gather);
    }
    return live;
}

/* Adds a block's weighed values to the lanes that take them: y = fmaf(W / 127, S, y), S the exact integer sums. */
static inline void lanes_add(float *y, __m512 step, __m512i sum, __mmask16 live) {
    _mm512_storeu_ps(y, _mm512_mask3_fmadd_ps(step, _mm512_cvtepi32_ps(sum), _mm512_loadu_ps(y), live));
}

#endif
