/* forward.c — the llama forward pass over a batch of rows (forward.h).
 *
 * Data flow of n rows (shapes per row):
 *   x[dim] = embedding(id)
 *   per layer: xb = rmsnorm(x); q,k,v = xb·Wq,Wk,Wv; rope(q,k); store k,v at the row's position in its own
 *              KV; att = attention(q, that KV); x += att·Wo; xb = rmsnorm(x); x += (silu(xb·Wgate) ⊙ xb·Wup)·Wdown
 *   logits = rmsnorm(x)·Wout for the rows asked for
 * Attention reads K/V back as stored, also for the rows of this very call: so a row written by prefill and
 * the same row written by decode are computed from identical inputs.
 */
#include "forward.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

struct forward {
    const fkv_model *m;
    uint32_t max_rows;
    int n_threads;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *rope_cs;
    block_q8_act *xq;
    ops_kv_view *views;
};

void forward_free(forward *c) {
    if (!c) return;
    float *bufs[] = {c->x, c->xb, c->q, c->k, c->v, c->att, c->hb, c->hb2, c->rope_cs};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(c->xq);
    free(c->views);
    free(c);
}

forward *forward_new(const fkv_model *m, uint32_t max_rows, int n_threads, fkv_error *err) {
    forward *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, "out of memory for the forward pass");
        return NULL;
    }
    const model_hparams *hp = &m->hp;
    c->m = m;
    c->max_rows = max_rows;
    c->n_threads = n_threads > 0 ? n_threads : omp_get_max_threads();
    uint32_t q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    size_t rows = max_rows;
    uint32_t widest = hp->dim > q_dim ? hp->dim : q_dim;
    if (hp->hidden > widest) widest = hp->hidden;
    c->x = malloc(sizeof(float) * rows * hp->dim);
    c->xb = malloc(sizeof(float) * rows * widest);
    c->q = malloc(sizeof(float) * rows * q_dim);
    c->k = malloc(sizeof(float) * rows * kv_dim);
    c->v = malloc(sizeof(float) * rows * kv_dim);
    c->att = malloc(sizeof(float) * rows * q_dim);
    c->hb = malloc(sizeof(float) * rows * hp->hidden);
    c->hb2 = malloc(sizeof(float) * rows * hp->hidden);
    c->rope_cs = malloc(sizeof(float) * rows * hp->n_rot);
    c->xq = malloc(sizeof(block_q8_act) * rows * (widest / QK + 1));
    c->views = malloc(sizeof(ops_kv_view) * rows);
    if (!c->x || !c->xb || !c->q || !c->k || !c->v || !c->att || !c->hb || !c->hb2 || !c->rope_cs || !c->xq ||
        !c->views) {
        err_set(err, "out of memory for the scratch of %zu-row batches", rows);
        forward_free(c);
        return NULL;
    }
    return c;
}

uint32_t forward_max_rows(const forward *c) { return c->max_rows; }

int forward_threads(const forward *c) { return c->n_threads; }

/* y = x·W, quantizing x's rows first when W's type takes Q8_0 activations. */
static void matmul(forward *c, const ops_matrix *w, const float *x, uint32_t n, float *y) {
    if (ops_matrix_wants_q8(w)) ops_quantize_rows(x, n, w->n_in, c->xq, c->n_threads);
    ops_matmul(w, x, c->xq, n, y, c->n_threads);
}

/* q, k and v share one input; quantize it once when all three take Q8_0. */
static void matmul_qkv(forward *c, const model_layer *L, const float *x, uint32_t n) {
    bool shared = ops_matrix_wants_q8(&L->wq) && ops_matrix_wants_q8(&L->wk) && ops_matrix_wants_q8(&L->wv);
    if (!shared) {
        matmul(c, &L->wq, x, n, c->q);
        matmul(c, &L->wk, x, n, c->k);
        matmul(c, &L->wv, x, n, c->v);
        return;
    }
    ops_quantize_rows(x, n, L->wq.n_in, c->xq, c->n_threads);
    ops_matmul(&L->wq, x, c->xq, n, c->q, c->n_threads);
    ops_matmul(&L->wk, x, c->xq, n, c->k, c->n_threads);
    ops_matmul(&L->wv, x, c->xq, n, c->v, c->n_threads);
}

void forward_rows(forward *c, const int32_t *ids, const float *embd, uint32_t n, const uint32_t *pos,
                  const kv_map *const *maps, uint32_t first_logit, float *logits) {
    const fkv_model *m = c->m;
    const model_hparams *hp = &m->hp;
    const uint32_t dim = hp->dim;
    const float attn_scale = 1.0f / sqrtf((float)hp->head_dim);

    if (!ids) memcpy(c->x, embd, sizeof(float) * n * dim);
    for (uint32_t r = 0; ids && r < n; r++)
        quant_dequantize_row(m->tok_embd.type, m->tok_embd.data + (size_t)ids[r] * m->tok_embd.row_bytes,
                             c->x + (size_t)r * dim, dim);
    ops_rope_table(pos, n, hp->n_rot, hp->rope_base, hp->rope_scale, c->rope_cs);
    const uint32_t kv_dim = hp->n_kv_heads * hp->head_dim;

    for (uint32_t l = 0; l < hp->n_layers; l++) {
        const model_layer *L = &m->layers[l];
        ops_rmsnorm(c->x, L->attn_norm, n, dim, hp->rms_eps, c->xb);
        matmul_qkv(c, L, c->xb, n);
        ops_rope(c->q, n, hp->n_heads, hp->head_dim, hp->n_rot, c->rope_cs);
        ops_rope(c->k, n, hp->n_kv_heads, hp->head_dim, hp->n_rot, c->rope_cs);
        for (uint32_t r = 0; r < n; r++) {
            kv_map_store(maps[r], l, pos[r], c->k + (size_t)r * kv_dim, c->v + (size_t)r * kv_dim, kv_dim);
            c->views[r] = kv_map_view(maps[r], l);
        }
        ops_attention(c->q, n, pos, c->views, hp->n_heads, hp->n_kv_heads, hp->head_dim, attn_scale, c->att,
                      c->n_threads);
        matmul(c, &L->wo, c->att, n, c->xb);
        ops_add(c->x, c->xb, (size_t)n * dim);

        ops_rmsnorm(c->x, L->ffn_norm, n, dim, hp->rms_eps, c->xb);
        if (ops_matrix_wants_q8(&L->w_gate) && ops_matrix_wants_q8(&L->w_up)) {
            ops_quantize_rows(c->xb, n, dim, c->xq, c->n_threads);
            ops_matmul(&L->w_gate, c->xb, c->xq, n, c->hb, c->n_threads);
            ops_matmul(&L->w_up, c->xb, c->xq, n, c->hb2, c->n_threads);
        } else {
            matmul(c, &L->w_gate, c->xb, n, c->hb);
            matmul(c, &L->w_up, c->xb, n, c->hb2);
        }
        ops_swiglu(c->hb, c->hb2, (size_t)n * hp->hidden);
        matmul(c, &L->w_down, c->hb, n, c->xb);
        ops_add(c->x, c->xb, (size_t)n * dim);
    }

    if (first_logit < n) {
        uint32_t rows = n - first_logit;
        ops_rmsnorm(c->x + (size_t)first_logit * dim, m->output_norm, rows, dim, hp->rms_eps, c->xb);
        matmul(c, &m->output, c->xb, rows, logits);
    }
}

