/* ref/attn.c — the reference attention steps: a key tile's scores, the softmax's max and exponentials, the value
 * accumulation (attn.h). */
#include "ref.h"

#include <float.h>

#include "attn.h"
#include "order.h"

/* Key j's score: one chain over the elements of the key-major tile. */
static void score_tile(const void *kt, bool f16, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                       size_t out_stride) {
    for (size_t r = 0; r < n_q; r++)
        for (size_t j = 0; j < KERN_KEY_TILE; j++) {
            float s = 0.0f;
            for (size_t d = 0; d < n; d++) {
                const size_t e = d * KERN_KEY_TILE + j;
                const float k = f16 ? ord_f16_to_f32(((const uint16_t *)kt)[e]) : ((const float *)kt)[e];
                s = fmaf(q[r * q_stride + d], k, s);
            }
            out[r * out_stride + j] = s;
        }
}

void ref_score_tile_f16(const uint16_t *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                        size_t out_stride) {
    score_tile(kt, true, q, q_stride, n_q, n, out, out_stride);
}

void ref_score_tile_f32(const float *kt, const float *q, size_t q_stride, size_t n_q, size_t n, float *out,
                        size_t out_stride) {
    score_tile(kt, false, q, q_stride, n_q, n, out, out_stride);
}

static void axpy_rows(bool f16, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                      const void *rows, size_t stride, size_t n_rows, size_t n) {
    for (size_t r = 0; r < n_y; r++)
        for (size_t j = 0; j < n_rows; j++)
            for (size_t i = 0; i < n; i++) {
                const size_t e = j * stride + i;
                const float v = f16 ? ord_f16_to_f32(((const uint16_t *)rows)[e]) : ((const float *)rows)[e];
                y[r * y_stride + i] = fmaf(a[r * a_stride + j], v, y[r * y_stride + i]);
            }
}

void ref_axpy_rows_f16(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const uint16_t *rows,
                       size_t stride, size_t n_rows, size_t n) {
    axpy_rows(true, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

void ref_axpy_rows_f32(float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y, const float *rows,
                       size_t stride, size_t n_rows, size_t n) {
    axpy_rows(false, y, y_stride, a, a_stride, n_y, rows, stride, n_rows, n);
}

/* ---- quantized K/V rows (Q8_0, Q4_0: attn.h's tile layout) ---- */

/* The quant of element i (< QK) of key j in a K tile's section of one block, offset removed. */
static int32_t key_quant(ggml_type type, const uint8_t *section, size_t j, size_t i) {
    const uint8_t *qs = section + sizeof(uint16_t) * KERN_KEY_TILE;
    const size_t b = type == GGML_TYPE_Q8_0 ? i : i % (QK / 2); /* Q4_0: byte b holds elements b and b + 16 */
    const uint8_t byte = qs[(b / KERN_KEY_GROUP * KERN_KEY_TILE + j) * KERN_KEY_GROUP + b % KERN_KEY_GROUP];
    if (type == GGML_TYPE_Q8_0) return (int8_t)byte;
    return (i < QK / 2 ? byte & 15 : byte >> 4) - 8;
}

static float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return ord_f16_to_f32(h);
}

void ref_score_tile_q(ggml_type type, const uint8_t *kt, const block_q8_act *q, size_t q_stride, size_t n_q, size_t n,
                      float *out, size_t out_stride) {
    const size_t section = ord_kv_block_bytes(type) * KERN_KEY_TILE;
    for (size_t r = 0; r < n_q; r++)
        for (size_t j = 0; j < KERN_KEY_TILE; j++) {
            float s = 0.0f;
            for (size_t b = 0; b < n / QK; b++) {
                const block_q8_act *qb = &q[r * q_stride + b];
                const uint8_t *sec = kt + b * section;
                int32_t sum = 0;
                for (size_t i = 0; i < QK; i++) sum += qb->qs[i] * key_quant(type, sec, j, i);
                s = fmaf(qb->d * f16_at(sec + sizeof(uint16_t) * j), (float)sum, s);
            }
            out[r * out_stride + j] = s;
        }
}

/* The quant of element i (< QK) of position j in a V tile's section of one block (attn.h), offset removed. */
static int32_t value_quant(ggml_type type, const uint8_t *section, size_t j, size_t i) {
    const uint8_t *qs = section + sizeof(uint16_t) * KERN_KEY_TILE;
    const size_t bytes = ord_kv_block_bytes(type) - sizeof(uint16_t), b = i % bytes; /* Q4_0: b holds i and i + 16 */
    const uint8_t byte = qs[(j / KERN_KEY_GROUP * bytes + b) * KERN_KEY_GROUP + j % KERN_KEY_GROUP];
    if (type == GGML_TYPE_Q8_0) return (int8_t)byte;
    return (i < QK / 2 ? byte & 15 : byte >> 4) - 8;
}

void ref_weigh_tile_q(ggml_type type, float *y, size_t y_stride, const float *a, size_t a_stride, size_t n_y,
                      const uint8_t *vt, size_t n_keys, size_t n) {
    const size_t section = ord_kv_block_bytes(type) * KERN_KEY_TILE;
    for (size_t r = 0; r < n_y; r++)
        for (size_t b = 0; b < n / QK; b++) {
            const uint8_t *sec = vt + b * section;
            float w[KERN_KEY_TILE], top = 0.0f;
            for (size_t j = 0; j < n_keys; j++) {
                w[j] = a[r * a_stride + j] * f16_at(sec + sizeof(uint16_t) * j);
                if (fabsf(w[j]) > top) top = fabsf(w[j]);
            }
            if (!ord_weights_live(top)) continue;
            const float c = 127.0f / top;
            int32_t wq[KERN_KEY_TILE];
            for (size_t j = 0; j < n_keys; j++) wq[j] = (int32_t)nearbyintf(w[j] * c);
            for (size_t i = 0; i < QK; i++) {
                int32_t sum = 0;
                for (size_t j = 0; j < n_keys; j++) sum += wq[j] * value_quant(type, sec, j, i);
                float *yi = &y[r * y_stride + b * QK + i];
                *yi = fmaf(top / 127.0f, (float)sum, *yi);
            }
        }
}

/* Each lane's step alone, by the steps' own reference functions, in attn.h's order. */
static void attend_lanes(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                         kern_lane_block *lb) {
    for (size_t r = 0; r < KERN_LANES; r++) {
        if (!lb->keys[r]) continue;
        block_q8_act q[KERN_MAX_HEAD_DIM / QK];
        for (size_t b = 0; b < n / QK; b++) {
            q[b].d = lb->dq[b * KERN_LANES + r];
            for (size_t i = 0; i < QK; i++) q[b].qs[i] = (int8_t)(lb->qu[kern_lanes_at(b, i, r)] - 128);
        }
        float s[KERN_KEY_TILE], yr[KERN_MAX_HEAD_DIM], sum;
        ref_score_tile_q(type, kt, q, 0, 1, n, s, KERN_KEY_TILE);
        for (size_t j = 0; j < lb->below[r] && j < KERN_KEY_TILE; j++) s[j] = -INFINITY;
        const float t = ref_scale_max(s, lb->keys[r], scale);
        for (size_t i = 0; i < n; i++) yr[i] = lb->y[i * KERN_LANES + r];
        if (t > lb->m[r]) {
            float c = lb->m[r] - t;
            ref_exp(&c, 1);
            for (size_t i = 0; i < n; i++) yr[i] *= c;
            lb->d[r] *= c;
            lb->m[r] = t;
        }
        ref_exp_sum_rows(s, KERN_KEY_TILE, &lb->keys[r], &lb->m[r], 1, &sum);
        lb->d[r] += sum;
        ref_weigh_tile_q(type, yr, n, s, KERN_KEY_TILE, 1, vt, lb->keys[r], n);
        for (size_t i = 0; i < n; i++) lb->y[i * KERN_LANES + r] = yr[i];
    }
}

void ref_attend_lanes_q(ggml_type type, const uint8_t *kt, const uint8_t *vt, size_t n, float scale,
                        kern_lane_block *blocks, size_t n_blocks) {
    for (size_t g = 0; g < n_blocks; g++) attend_lanes(type, kt, vt, n, scale, &blocks[g]);
}

void ref_exp(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = ord_exp1(x[i]);
}

float ref_scale_max(float *s, size_t n, float scale) {
    float lane[BLOCK_LANES];
    for (int l = 0; l < BLOCK_LANES; l++) lane[l] = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        s[j] *= scale;
        lane[j % BLOCK_LANES] = ord_max_pick(lane[j % BLOCK_LANES], s[j]);
    }
    return ord_combine8_max(lane);
}

void ref_exp_sum_rows(float *s, size_t stride, const uint32_t *n, const float *m, size_t n_rows, float *sum) {
    for (size_t r = 0; r < n_rows; r++) {
        float *sr = s + r * stride, lane[BLOCK_LANES] = {0};
        for (size_t j = 0; j < n[r]; j++) sr[j] -= m[r];
        ref_exp(sr, n[r]);
        for (size_t j = 0; j < n[r]; j++) lane[j % BLOCK_LANES] += sr[j];
        sum[r] = ord_combine8(lane);
    }
}
