/* ctx.c — the llama forward pass over chunks of positions, into one KV buffer (fkv_ctx in flatkv.h).
 *
 * WHY chunks on a grid: a prompt is computed in chunks of at most prefill_rows positions whose boundaries
 * are multiples of prefill_rows in absolute position (DESIGN.md §3). With row-invariant kernels (ops.h)
 * the grid only affects speed; it is kept so that a kernel that is not row-invariant could still resume
 * exactly, and so that scratch is sized once, at creation: nothing allocates per chunk or per token.
 *
 * Data flow of one chunk of n rows at pos0 (shapes per row):
 *   x[dim] = embedding(id)
 *   per layer: xb = rmsnorm(x); q,k,v = xb·Wq,Wk,Wv; rope(q,k); store k,v at pos0..; att = attention(q, KV);
 *              x += att·Wo; xb = rmsnorm(x); x += (silu(xb·Wgate) ⊙ xb·Wup)·Wdown
 *   logits = rmsnorm(x)·Wout for the rows asked for
 * Attention reads K/V back from the KV buffer, as stored, also for the chunk's own rows: so a row
 * written by prefill and the same row written by decode are computed from identical inputs.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "kv.h"
#include "model.h"

#define DEFAULT_PREFILL_ROWS 64

struct fkv_ctx {
    const fkv_model *m;
    fkv_ctx_params p;
    kv_buf *kv;
    /* scratch for one chunk of up to p.prefill_rows rows */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *rope_cs;
    block_q8_act *xq;
};

fkv_ctx_params fkv_ctx_default_params(void) {
    return (fkv_ctx_params){.n_ctx = 0, .kv_type = FKV_KV_F16, .n_threads = 0, .prefill_rows = 0};
}

uint32_t fkv_ctx_n_ctx(const fkv_ctx *c) { return c->p.n_ctx; }

void fkv_ctx_free(fkv_ctx *c) {
    if (!c) return;
    kv_free(c->kv);
    float *bufs[] = {c->x, c->xb, c->q, c->k, c->v, c->att, c->hb, c->hb2, c->rope_cs};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(c->xq);
    free(c);
}

fkv_ctx *fkv_ctx_new(const fkv_model *m, const fkv_ctx_params *params, fkv_error *err) {
    fkv_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, "out of memory for a context");
        return NULL;
    }
    const model_hparams *hp = &m->hp;
    c->m = m;
    c->p = params ? *params : fkv_ctx_default_params();
    if (c->p.n_ctx == 0) c->p.n_ctx = hp->n_ctx_train;
    if (c->p.prefill_rows == 0) c->p.prefill_rows = DEFAULT_PREFILL_ROWS;
    if (c->p.n_threads <= 0) c->p.n_threads = omp_get_max_threads();
    if (c->p.kv_type != FKV_KV_F32 && c->p.kv_type != FKV_KV_F16) {
        err_set(err, "unknown KV storage type %d", (int)c->p.kv_type);
        fkv_ctx_free(c);
        return NULL;
    }
    uint32_t q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    size_t rows = c->p.prefill_rows;
    uint32_t widest = hp->dim > q_dim ? hp->dim : q_dim;
    if (hp->hidden > widest) widest = hp->hidden;
    c->kv = kv_new(hp->n_layers, c->p.n_ctx, kv_dim, c->p.kv_type, err);
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
    if (!c->kv || !c->x || !c->xb || !c->q || !c->k || !c->v || !c->att || !c->hb || !c->hb2 || !c->rope_cs ||
        !c->xq) {
        if (c->kv) err_set(err, "out of memory for the scratch of %zu-row chunks", rows);
        fkv_ctx_free(c);
        return NULL;
    }
    return c;
}

/* y = x·W, quantizing x's rows first when W's type takes Q8_0 activations. */
static void matmul(fkv_ctx *c, const ops_matrix *w, const float *x, uint32_t n, float *y) {
    if (ops_matrix_wants_q8(w)) ops_quantize_rows(x, n, w->n_in, c->xq, c->p.n_threads);
    ops_matmul(w, x, c->xq, n, y, c->p.n_threads);
}

/* q, k and v share one input; quantize it once when all three take Q8_0. */
static void matmul_qkv(fkv_ctx *c, const model_layer *L, const float *x, uint32_t n) {
    bool shared = ops_matrix_wants_q8(&L->wq) && ops_matrix_wants_q8(&L->wk) && ops_matrix_wants_q8(&L->wv);
    if (!shared) {
        matmul(c, &L->wq, x, n, c->q);
        matmul(c, &L->wk, x, n, c->k);
        matmul(c, &L->wv, x, n, c->v);
        return;
    }
    ops_quantize_rows(x, n, L->wq.n_in, c->xq, c->p.n_threads);
    ops_matmul(&L->wq, x, c->xq, n, c->q, c->p.n_threads);
    ops_matmul(&L->wk, x, c->xq, n, c->k, c->p.n_threads);
    ops_matmul(&L->wv, x, c->xq, n, c->v, c->p.n_threads);
}

/* One chunk: n <= prefill_rows rows at pos0, from token ids or (ids NULL) embedding rows [n][dim]; logits for
 * rows [first_logit, n) into logits. */
static void forward_chunk(fkv_ctx *c, const int32_t *ids, const float *embd, uint32_t n, uint32_t pos0,
                          uint32_t first_logit, float *logits) {
    const fkv_model *m = c->m;
    const model_hparams *hp = &m->hp;
    const uint32_t dim = hp->dim;
    const float attn_scale = 1.0f / sqrtf((float)hp->head_dim);

    if (!ids) memcpy(c->x, embd, sizeof(float) * n * dim);
    for (uint32_t r = 0; ids && r < n; r++)
        quant_dequantize_row(m->tok_embd.type, m->tok_embd.data + (size_t)ids[r] * m->tok_embd.row_bytes,
                             c->x + (size_t)r * dim, dim);
    ops_rope_table(pos0, n, hp->n_rot, hp->rope_base, hp->rope_scale, c->rope_cs);

    for (uint32_t l = 0; l < hp->n_layers; l++) {
        const model_layer *L = &m->layers[l];
        ops_rmsnorm(c->x, L->attn_norm, n, dim, hp->rms_eps, c->xb);
        matmul_qkv(c, L, c->xb, n);
        ops_rope(c->q, n, hp->n_heads, hp->head_dim, hp->n_rot, c->rope_cs);
        ops_rope(c->k, n, hp->n_kv_heads, hp->head_dim, hp->n_rot, c->rope_cs);
        kv_store(c->kv, l, pos0, n, c->k, c->v);
        ops_kv_view view = kv_view(c->kv, l);
        ops_attention(c->q, n, pos0, &view, hp->n_heads, hp->n_kv_heads, hp->head_dim, attn_scale, c->att,
                      c->p.n_threads);
        matmul(c, &L->wo, c->att, n, c->xb);
        ops_add(c->x, c->xb, (size_t)n * dim);

        ops_rmsnorm(c->x, L->ffn_norm, n, dim, hp->rms_eps, c->xb);
        if (ops_matrix_wants_q8(&L->w_gate) && ops_matrix_wants_q8(&L->w_up)) {
            ops_quantize_rows(c->xb, n, dim, c->xq, c->p.n_threads);
            ops_matmul(&L->w_gate, c->xb, c->xq, n, c->hb, c->p.n_threads);
            ops_matmul(&L->w_up, c->xb, c->xq, n, c->hb2, c->p.n_threads);
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

/* fkv_eval and fkv_eval_embd: rows from ids or from embeddings, cut on the grid. */
static int eval_rows(fkv_ctx *c, const int32_t *ids, const float *embd, uint32_t n, uint32_t pos0, uint32_t n_logits,
                     float *logits, fkv_error *err) {
    const uint32_t n_vocab = c->m->hp.n_vocab, dim = c->m->hp.dim, grid = c->p.prefill_rows;
    if (n == 0) return err_set(err, "nothing to evaluate: 0 rows");
    if (pos0 > c->p.n_ctx || n > c->p.n_ctx - pos0)
        return err_set(err, "positions [%u, %u) exceed the context of %u", pos0, pos0 + n, c->p.n_ctx);
    if (n_logits > n) return err_set(err, "asked for the logits of %u rows of a %u-row evaluation", n_logits, n);
    if (n_logits && !logits) return err_set(err, "asked for logits without a buffer for them");
    for (uint32_t i = 0; ids && i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= n_vocab)
            return err_set(err, "token id %d at position %u is outside the vocabulary (0..%u)", ids[i], pos0 + i,
                           n_vocab - 1);
    const uint32_t want_from = n - n_logits;
    for (uint32_t done = 0; done < n;) {
        uint32_t p = pos0 + done, len = (p / grid + 1) * grid - p;
        if (len > n - done) len = n - done;
        uint32_t first = want_from > done ? want_from - done : 0;
        if (first > len) first = len;
        float *dst = first < len ? logits + (size_t)(done + first - want_from) * n_vocab : NULL;
        forward_chunk(c, ids ? ids + done : NULL, ids ? NULL : embd + (size_t)done * dim, len, p, first, dst);
        done += len;
    }
    return 0;
}

int fkv_eval(fkv_ctx *c, const int32_t *ids, uint32_t n, uint32_t pos0, uint32_t n_logits, float *logits,
             fkv_error *err) {
    if (!ids) return err_set(err, "no token ids to evaluate");
    return eval_rows(c, ids, NULL, n, pos0, n_logits, logits, err);
}

int fkv_eval_embd(fkv_ctx *c, const float *embd, uint32_t n, uint32_t pos0, uint32_t n_logits, float *logits,
                  fkv_error *err) {
    if (!embd) return err_set(err, "no embedding rows to evaluate");
    return eval_rows(c, NULL, embd, n, pos0, n_logits, logits, err);
}

uint64_t fkv_kv_digest(const fkv_ctx *c, uint32_t n_pos) {
    return kv_digest(c->kv, n_pos > c->p.n_ctx ? c->p.n_ctx : n_pos);
}
