#include "ops.h"

#include <math.h>
#include <string.h>

/* Weight rows handled together so that each stays in L1 while every activation row passes over it. The
 * tile only orders the loops; each output element is still one quant_dot call. */
#define MATMUL_TILE 4

/* Below this many multiply-adds a call runs on one thread: waking a team costs more than it saves (a
 * 260K-parameter model decodes 20x faster so). Safe for exactness: results do not depend on threads. */
#define PARALLEL_MIN_WORK (1u << 20)

bool ops_matrix_wants_q8(const ops_matrix *w) { return w->type == GGML_TYPE_Q8_0 || w->type == GGML_TYPE_Q4_0; }

void ops_matmul(const ops_matrix *w, const float *x, const block_q8_act *xq, uint32_t n_rows, float *y,
                int n_threads) {
    const bool q8 = ops_matrix_wants_q8(w);
    const uint32_t n_in = w->n_in, n_out = w->n_out, n_tiles = (n_out + MATMUL_TILE - 1) / MATMUL_TILE;
    const size_t xq_row = n_in / QK;
    const bool wide = (uint64_t)n_rows * n_out * n_in >= PARALLEL_MIN_WORK;
#pragma omp parallel for num_threads(n_threads) schedule(static) if (wide)
    for (uint32_t tile = 0; tile < n_tiles; tile++) {
        uint32_t o0 = tile * MATMUL_TILE, o1 = o0 + MATMUL_TILE < n_out ? o0 + MATMUL_TILE : n_out;
        for (uint32_t r = 0; r < n_rows; r++) {
            const float *xr = q8 ? NULL : x + (size_t)r * n_in;
            const block_q8_act *xqr = q8 ? xq + (size_t)r * xq_row : NULL;
            for (uint32_t o = o0; o < o1; o++)
                y[(size_t)r * n_out + o] = quant_dot(w->type, w->data + (size_t)o * w->row_bytes, xr, xqr, n_in);
        }
    }
}

void ops_quantize_rows(const float *x, uint32_t n_rows, uint32_t n, block_q8_act *xq, int n_threads) {
#pragma omp parallel for num_threads(n_threads) schedule(static) if ((uint64_t)n_rows * n >= PARALLEL_MIN_WORK / 16)
    for (uint32_t r = 0; r < n_rows; r++) quant_row_q8(x + (size_t)r * n, xq + (size_t)r * (n / QK), n);
}

void ops_rmsnorm(const float *x, const float *gain, uint32_t n_rows, uint32_t n, float eps, float *out) {
    for (uint32_t r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *o = out + (size_t)r * n;
        float ss = quant_dot_f32(xr, xr, n);
        float scale = 1.0f / sqrtf(ss / (float)n + eps);
        for (uint32_t i = 0; i < n; i++) o[i] = gain[i] * (scale * xr[i]);
    }
}

void ops_rope_table(uint32_t pos0, uint32_t n_rows, uint32_t n_rot, float base, float scale, float *cs) {
    for (uint32_t r = 0; r < n_rows; r++) {
        float pos = (float)(pos0 + r) / scale;
        for (uint32_t i = 0; i < n_rot / 2; i++) {
            float theta = pos * (1.0f / powf(base, (float)(2 * i) / (float)n_rot));
            cs[(size_t)r * n_rot + 2 * i] = cosf(theta);
            cs[(size_t)r * n_rot + 2 * i + 1] = sinf(theta);
        }
    }
}

void ops_rope(float *x, uint32_t n_rows, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, const float *cs) {
    for (uint32_t r = 0; r < n_rows; r++) {
        const float *c = cs + (size_t)r * n_rot;
        for (uint32_t h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)r * n_heads + h) * head_dim;
            for (uint32_t i = 0; i < n_rot; i += 2) {
                float x0 = v[i], x1 = v[i + 1], cos_t = c[i], sin_t = c[i + 1];
                v[i] = x0 * cos_t - x1 * sin_t;
                v[i + 1] = x0 * sin_t + x1 * cos_t;
            }
        }
    }
}

/* One query head against keys 0..p: online softmax over tiles aligned to absolute positions. acc (the
 * output row, head_dim floats) accumulates Σ e_j v_j, rescaled when the running max grows. */
static void attend_one(const float *q, uint32_t p, const ops_kv_view *kv, size_t head_off, uint32_t head_dim,
                       float scale, float *acc) {
    float scores[OPS_ATTN_TILE];
    float running_max = -INFINITY, denom = 0.0f;
    memset(acc, 0, sizeof(float) * head_dim);
    for (uint32_t t0 = 0; t0 <= p; t0 += OPS_ATTN_TILE) {
        uint32_t t1 = t0 + OPS_ATTN_TILE <= p + 1 ? t0 + OPS_ATTN_TILE : p + 1;
        float tile_max = -INFINITY;
        for (uint32_t j = t0; j < t1; j++) {
            const uint8_t *krow = kv->k + (size_t)j * kv->row_bytes;
            float dot = kv->f16 ? quant_dot_f16_f32((const uint16_t *)krow + head_off, q, head_dim)
                                : quant_dot_f32((const float *)krow + head_off, q, head_dim);
            scores[j - t0] = dot * scale;
            if (scores[j - t0] > tile_max) tile_max = scores[j - t0];
        }
        if (tile_max > running_max) {
            float correction = expf(running_max - tile_max); /* expf(-inf) = 0 on the first tile */
            for (uint32_t i = 0; i < head_dim; i++) acc[i] *= correction;
            denom *= correction;
            running_max = tile_max;
        }
        for (uint32_t j = t0; j < t1; j++) {
            float e = expf(scores[j - t0] - running_max);
            denom += e;
            const uint8_t *vrow = kv->v + (size_t)j * kv->row_bytes;
            if (kv->f16)
                quant_axpy_f16(acc, e, (const uint16_t *)vrow + head_off, head_dim);
            else
                quant_axpy_f32(acc, e, (const float *)vrow + head_off, head_dim);
        }
    }
    float inv = 1.0f / denom;
    for (uint32_t i = 0; i < head_dim; i++) acc[i] *= inv;
}

void ops_attention(const float *q, uint32_t n_rows, uint32_t pos0, const ops_kv_view *kv, uint32_t n_heads,
                   uint32_t n_kv_heads, uint32_t head_dim, float scale, float *out, int n_threads) {
    const uint32_t group = n_heads / n_kv_heads, q_dim = n_heads * head_dim;
    const uint32_t n_items = n_rows * n_heads;
    const bool wide = (uint64_t)n_items * (pos0 + n_rows) * head_dim * 2 >= PARALLEL_MIN_WORK;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1) if (wide)
    for (uint32_t item = 0; item < n_items; item++) {
        uint32_t r = item / n_heads, h = item % n_heads;
        attend_one(q + (size_t)r * q_dim + (size_t)h * head_dim, pos0 + r, kv, (size_t)(h / group) * head_dim,
                   head_dim, scale, out + (size_t)r * q_dim + (size_t)h * head_dim);
    }
}

void ops_swiglu(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void ops_add(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}
