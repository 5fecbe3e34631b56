/* forward.c — the llama forward pass over a batch of rows (forward.h).
 *
 * Data flow of n rows (shapes per row; [brackets]: where the architecture has it, model.h's model_arch):
 *   x[dim] = embedding(id) [· sqrt(dim)]
 *   per layer: xb = rmsnorm(x); q[,gate],k,v = xb·Wq,Wk,Wv [+ biases]; [q,k = rmsnorm of each head]; rope(q,k) with
 *              the layer's table [none: NoPE layers]; store k,v at the row's position in its own KV;
 *              att = attention(q, that KV [positions (p - window, p] only]) [⊙ sigmoid(gate)]; x += [rmsnorm](att·Wo);
 *              [a gated DeltaNet layer instead: x += gdn(xb), stepping the row's recurrent state (gdn_layer)]
 *              xb = rmsnorm(x); x += [rmsnorm]((act(xb·Wgate) ⊙ xb·Wup)·Wdown), act silu [or tanh-GELU]
 *   logits = rmsnorm(x)·Wout for the rows asked for
 * Attention reads K/V back as stored, also for the rows of this very call: so a row written by prefill and
 * the same row written by decode are computed from identical inputs.
 */
#include "model/forward.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/hugemem.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

struct forward {
    const fkv_model *m;
    uint32_t max_rows;
    int n_threads;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    float *rope_cs[2];          /* [max_rows][n_rot] per rotary table (model.h: MODEL_ROPE_GLOBAL, _LOCAL) */
    const float *rope_divisors; /* the global table's frequency divisors for this context, or NULL */
    block_q8_act *xq;
    void *xp; /* xq's rows as kern_panel_rows prepares them (NULL in a build without panels) */
    ops_kv_view *views;
    /* routed experts (model_experts); NULL without: a chunk's n rows become n·k entries, grouped by expert */
    float *route;              /* [max_rows][n_expert] router logits, then probabilities */
    uint32_t *sel;             /* [max_rows][k] each row's experts, in slot order */
    float *wts;                /* [max_rows][k] their weights */
    uint32_t *entry_slot;      /* [max_rows·k] the route r·k + s that entry j is (entries grouped by expert, rows
                                * ascending): its row entry_slot[j] / k, its expert sel[entry_slot[j]] */
    uint32_t *slot_entry;      /* [max_rows·k] the entry of row r's slot s */
    uint32_t *group_at;        /* [n_expert + 1] expert e's entries are [group_at[e], group_at[e + 1]) */
    float *xg;                 /* [max_rows·k][dim] entries' input rows, f32 (for f32/f16 experts) */
    block_q8_act *xqg;         /* entries' input rows, then their hidden rows, as Q8_0 blocks */
    void *xpg;                 /* the same as kern_panel_rows prepares them, or NULL */
    float *hg, *hu;            /* [max_rows·k][n_ff_exp] entries' gate and up products */
    float *yd;                 /* [max_rows·k][dim] entries' expert outputs */
    float *ym;                 /* [max_rows][dim] rows' weighted sums of their experts */
    ops_rows *erows;           /* [2·n_expert] each expert's entries: as inputs of gate/up, then of down */
    ops_matrix *emat;          /* [3·n_expert] each expert's gate, up and down matrices of this layer */
    ops_product *eprod;        /* [3·n_expert] gate/up products, then down products, of the experts with entries */
    uint32_t n_active;         /* the experts with entries in this layer's chunk */
    float *sg;                 /* [max_rows] the shared expert's gate (shared_gate) */
    /* gated attention (attn_gate) */
    float *qg;                 /* [max_rows][2·q_dim] the q product: each head's q, then its gate */
    float *gate;               /* [max_rows][q_dim] the gates */
    /* gated DeltaNet layers (model_gdn) */
    float *mix;                /* [max_rows][conv_dim] q, k, v: the product, then the convolution's output */
    float *z;                  /* [max_rows][Hv·d] the output gate, then the output */
    float *beta, *g;           /* [max_rows][Hv] each head's β and decay */
    float *o;                  /* [max_rows][Hv·d] the heads' readouts */
    /* the NextN block (forward_new's nextn) */
    bool nextn;
    float *h;                  /* [max_rows][dim] each row's final hidden state, rmsnorm(x)·output_norm */
    float *hin;                /* [max_rows][dim] the hidden state of the position before each row */
    float *eh;                 /* [max_rows][2·dim] [rmsnorm(embedding)·enorm; rmsnorm(hin)·hnorm] */
    void *scratch; /* every buffer above but rope_divisors: slices of one allocation of scratch_bytes */
    size_t scratch_bytes;
};

void forward_free(forward *c) {
    if (!c) return;
    hugemem_free(c->scratch, c->scratch_bytes);
    free(c);
}

/* bytes rounded up to whole cache lines: each scratch slice starts on one. */
static size_t line_bytes(size_t bytes) { return (bytes + 63) / 64 * 64; }

forward *forward_new(const fkv_model *m, uint32_t max_rows, uint32_t n_ctx, int n_threads, bool nextn,
                     fkv_error *err) {
    forward *c = calloc(1, sizeof *c);
    if (!c) {
        err_nomem(err, "out of memory for the forward pass");
        return NULL;
    }
    const model_hparams *hp = &m->hp;
    if (m->kernels != kern_active()->name) {
        err_input(err, "the model's weights are laid out for the %s kernels, but %s are in use", m->kernels,
                kern_active()->name);
        free(c);
        return NULL;
    }
    if (nextn && !hp->n_nextn) {
        err_input(err, "the model has no NextN (multi-token prediction) block to draft with");
        free(c);
        return NULL;
    }
    c->m = m;
    c->nextn = nextn;
    c->max_rows = max_rows;
    c->n_threads = n_threads > 0 ? n_threads : omp_get_max_threads();
    uint32_t q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    size_t rows = max_rows;
    const uint32_t hidden = hp->ffn_max;
    const uint32_t conv_dim = model_conv_dim(hp), value_dim = hp->n_v_heads * hp->ssm_d;
    uint32_t widest = hp->dim > q_dim ? hp->dim : q_dim;
    if (hidden > widest) widest = hidden;
    if (value_dim > widest) widest = value_dim; /* ssm_out's input */
    if (nextn && 2 * hp->dim > widest) widest = 2 * hp->dim; /* eh_proj's input */
    const uint32_t qg_dim = hp->kind.attn_gate ? 2 * q_dim : 0;
    const uint32_t ne = hp->n_expert, ff = hp->n_ff_exp, ent = max_rows * hp->n_expert_used;
    const uint32_t ewide = hp->dim > ff ? hp->dim : ff; /* an entry's widest row: its input or its hidden row */
    const size_t xp_bytes = rows * kern_panel_row_bytes(widest);
    const size_t xpg_bytes = ne ? (size_t)ent * kern_panel_row_bytes(ewide) : 0;
    struct {
        void **at;
        size_t bytes;
    } slices[] = {
        {(void **)&c->x, sizeof(float) * rows * hp->dim},
        {(void **)&c->xb, sizeof(float) * rows * widest},
        {(void **)&c->q, sizeof(float) * rows * q_dim},
        {(void **)&c->k, sizeof(float) * rows * kv_dim},
        {(void **)&c->v, sizeof(float) * rows * kv_dim},
        {(void **)&c->att, sizeof(float) * rows * q_dim},
        {(void **)&c->hb, sizeof(float) * rows * hidden},
        {(void **)&c->hb2, sizeof(float) * rows * hidden},
        {(void **)&c->rope_cs[0], sizeof(float) * rows * hp->n_rot},
        {(void **)&c->rope_cs[1], sizeof(float) * rows * hp->n_rot},
        {(void **)&c->xq, sizeof(block_q8_act) * rows * (widest / QK + 1)},
        {&c->xp, xp_bytes},
        {(void **)&c->views, sizeof(ops_kv_view) * rows},
        {(void **)&c->route, sizeof(float) * rows * ne},
        {(void **)&c->sel, sizeof(uint32_t) * ent},
        {(void **)&c->wts, sizeof(float) * ent},
        {(void **)&c->entry_slot, sizeof(uint32_t) * ent},
        {(void **)&c->slot_entry, sizeof(uint32_t) * ent},
        {(void **)&c->group_at, ne ? sizeof(uint32_t) * (ne + 1) : 0},
        {(void **)&c->xg, sizeof(float) * ent * hp->dim},
        {(void **)&c->xqg, ne ? sizeof(block_q8_act) * ent * (ewide / QK + 1) : 0},
        {&c->xpg, xpg_bytes},
        {(void **)&c->hg, sizeof(float) * ent * ff},
        {(void **)&c->hu, sizeof(float) * ent * ff},
        {(void **)&c->yd, sizeof(float) * ent * hp->dim},
        {(void **)&c->ym, ne ? sizeof(float) * rows * hp->dim : 0},
        {(void **)&c->erows, sizeof(ops_rows) * 2 * ne},
        {(void **)&c->emat, sizeof(ops_matrix) * 3 * ne},
        {(void **)&c->eprod, sizeof(ops_product) * 3 * ne},
        {(void **)&c->sg, hp->kind.shared_gate ? sizeof(float) * rows : 0},
        {(void **)&c->qg, sizeof(float) * rows * qg_dim},
        {(void **)&c->gate, qg_dim ? sizeof(float) * rows * q_dim : 0},
        {(void **)&c->mix, sizeof(float) * rows * conv_dim},
        {(void **)&c->z, sizeof(float) * rows * value_dim},
        {(void **)&c->beta, sizeof(float) * rows * hp->n_v_heads},
        {(void **)&c->g, sizeof(float) * rows * hp->n_v_heads},
        {(void **)&c->o, sizeof(float) * rows * value_dim},
        {(void **)&c->h, nextn ? sizeof(float) * rows * hp->dim : 0},
        {(void **)&c->hin, nextn ? sizeof(float) * rows * hp->dim : 0},
        {(void **)&c->eh, nextn ? sizeof(float) * rows * 2 * hp->dim : 0},
    };
    const size_t n_slices = sizeof slices / sizeof *slices;
    for (size_t i = 0; i < n_slices; i++) c->scratch_bytes += line_bytes(slices[i].bytes);
    c->rope_divisors = model_rope_divisors(m, n_ctx);
    if (!(c->scratch = hugemem_alloc(c->scratch_bytes))) {
        err_nomem(err, "out of memory for the scratch of %zu-row batches (%zu MB)", rows, c->scratch_bytes >> 20);
        forward_free(c);
        return NULL;
    }
    /* Faulted in now: the first chunk of a new context would otherwise fault it in while the team waits. */
    hugemem_touch(c->scratch, c->scratch_bytes);
    uint8_t *at = c->scratch;
    for (size_t i = 0; i < n_slices; i++) { /* each slice on a cache line; xp on 32 bytes, as the kernels want */
        *slices[i].at = at; /* an empty one too (no rotary pairs: n_rot 0): offsets of 0 from it are defined */
        at += line_bytes(slices[i].bytes);
    }
    if (!xp_bytes) c->xp = NULL; /* a variant that prepares no rows: quantize_rows prepares none */
    if (!xpg_bytes) c->xpg = NULL;
    return c;
}

uint32_t forward_max_rows(const forward *c) { return c->max_rows; }

int forward_threads(const forward *c) { return c->n_threads; }

size_t forward_state_floats(const forward *c) { return c->m->hp.state_floats + (c->nextn ? c->m->hp.dim : 0); }

/* Below this many multiply-adds per call the pass runs on one thread (and each op decides alone, see
 * ops.h): waking a team costs more than it saves on a tiny model's decode step. */
#define FORWARD_PARALLEL_MIN_WORK (1u << 22)

/* This thread's rows of n in a team's row-wise steps: contiguous, [r0, r1). */
static void own_rows(uint32_t n, uint32_t *r0, uint32_t *r1) {
    uint32_t t = (uint32_t)omp_get_thread_num(), nt = (uint32_t)omp_get_num_threads();
    *r0 = (uint32_t)((uint64_t)n * t / nt);
    *r1 = (uint32_t)((uint64_t)n * (t + 1) / nt);
}

/* Rows [r0, r1) of x (n_in wide) quantized into c->xq for the matrices that take Q8_0 activations, and rearranged
 * into c->xp (kern_panel_rows), once for every product of them and every thread: a decode row as much as a prefill
 * chunk (packed weights take it either way; a row costs a few hundred operations). */
static void quantize_rows(forward *c, const float *x, uint32_t r0, uint32_t r1, uint32_t n_in, bool wanted) {
    if (!wanted) return;
    for (uint32_t r = r0; r < r1; r++) {
        quant_row_q8(x + (size_t)r * n_in, c->xq + (size_t)r * (n_in / QK), n_in);
    }
    if (c->xp) kern_panel_rows(c->xq, n_in, r0, r1, c->xp);
}

/* The n rows' routes grouped by expert (entries of one expert in ascending rows), and the products of the experts
 * that have entries: c->eprod[0, 2a) gate and up, [2a, 3a) down, a returned. Run by one thread. */
static uint32_t moe_group(forward *c, const model_experts *E, uint32_t n) {
    const model_hparams *hp = &c->m->hp;
    const uint32_t ne = hp->n_expert, k = hp->n_expert_used, dim = hp->dim, ff = hp->n_ff_exp;
    uint32_t *at = c->group_at, cursor[ne];
    memset(at, 0, sizeof(uint32_t) * (ne + 1));
    for (uint32_t i = 0; i < n * k; i++) at[c->sel[i] + 1]++;
    for (uint32_t e = 0; e < ne; e++) at[e + 1] += at[e];
    memcpy(cursor, at, sizeof cursor);
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t s = 0; s < k; s++) {
            const uint32_t j = cursor[c->sel[r * k + s]]++;
            c->entry_slot[j] = r * k + s;
            c->slot_entry[r * k + s] = j;
        }
    const size_t pin = kern_panel_row_bytes(dim), pff = kern_panel_row_bytes(ff);
    uint32_t a = 0;
    for (uint32_t e = 0; e < ne; e++) a += at[e + 1] > at[e];
    for (uint32_t e = 0, i = 0; e < ne; e++) {
        const uint32_t j = at[e], cnt = at[e + 1] - at[e];
        if (!cnt) continue;
        ops_matrix *w = c->emat + 3 * e;
        w[0] = ops_matrix_rows(&E->gate, e * ff, ff);
        w[1] = ops_matrix_rows(&E->up, e * ff, ff);
        w[2] = ops_matrix_rows(&E->down, e * dim, dim);
        ops_rows *in = c->erows + 2 * e;
        in[0] = (ops_rows){c->xg + (size_t)j * dim, c->xqg + (size_t)j * (dim / QK),
                           c->xpg ? (uint8_t *)c->xpg + j * pin : NULL, cnt};
        in[1] = (ops_rows){c->hg + (size_t)j * ff, c->xqg + (size_t)j * (ff / QK),
                           c->xpg ? (uint8_t *)c->xpg + j * pff : NULL, cnt};
        c->eprod[2 * i] = (ops_product){&w[0], &in[0], c->hg + (size_t)j * ff};
        c->eprod[2 * i + 1] = (ops_product){&w[1], &in[0], c->hu + (size_t)j * ff};
        c->eprod[2 * a + i] = (ops_product){&w[2], &in[1], c->yd + (size_t)j * dim};
        i++;
    }
    return a;
}

/* The routed experts of rows [0, n) into c->ym (docs/design.md §6), run by every thread of the team (r0, r1: this
 * thread's rows), from c->xb and its quantized rows. Each row routes from its own logits (ops_route); its k entries
 * are gathered by expert, each expert runs over its entries with the ordinary products (row-invariant: an entry's
 * bits do not depend on how many share its expert), and each row sums its experts' outputs in slot order. */
static void moe_ffn(forward *c, const model_experts *E, uint32_t n, uint32_t r0, uint32_t r1) {
    const model_hparams *hp = &c->m->hp;
    const uint32_t ne = hp->n_expert, k = hp->n_expert_used, dim = hp->dim, ff = hp->n_ff_exp;
    ops_matmul(&E->router, &(ops_rows){c->xb, c->xq, c->xp, n}, c->route, c->n_threads);
#pragma omp single
    { /* routing is a few thousand operations a row: one thread routes and groups them all, one barrier */
        for (uint32_t r = 0; r < n; r++) {
            float *z = c->route + (size_t)r * ne;
            if (E->router_b) ops_add(z, E->router_b, ne);
            ops_route(z, ne, E->select_b, hp->gating, k, hp->expert_norm, hp->expert_scale, c->sel + (size_t)r * k,
                      c->wts + (size_t)r * k);
        }
        c->n_active = moe_group(c, E, n);
    }
    const uint32_t a = c->n_active; /* written by the single thread, read by all after its barrier */
    uint32_t j0, j1;
    own_rows(n * k, &j0, &j1); /* this thread's entries */
    /* gate and up may differ in type: each gets its rows as it takes them */
    const bool in_q8 = ops_matrix_wants_q8(&E->gate) || ops_matrix_wants_q8(&E->up);
    const bool in_f32 = !ops_matrix_wants_q8(&E->gate) || !ops_matrix_wants_q8(&E->up);
    for (uint32_t j = j0; j < j1; j++) {
        const uint32_t r = c->entry_slot[j] / k;
        if (in_q8)
            memcpy(c->xqg + (size_t)j * (dim / QK), c->xq + (size_t)r * (dim / QK), sizeof(block_q8_act) * (dim / QK));
        if (in_f32) memcpy(c->xg + (size_t)j * dim, c->xb + (size_t)r * dim, sizeof(float) * dim);
    }
    if (in_q8 && c->xpg) kern_panel_rows(c->xqg, dim, j0, j1, c->xpg);
#pragma omp barrier
    ops_matmuls(c->eprod, (int)(2 * a), c->n_threads);
    for (uint32_t j = j0; E->gate_b && j < j1; j++) { /* gpt-oss: each entry's expert's biases */
        const uint32_t e = c->sel[c->entry_slot[j]];
        ops_add(c->hg + (size_t)j * ff, E->gate_b + (size_t)e * ff, ff);
        ops_add(c->hu + (size_t)j * ff, E->up_b + (size_t)e * ff, ff);
    }
    if (hp->kind.swiglu_oai)
        ops_swiglu_oai(c->hg + (size_t)j0 * ff, c->hu + (size_t)j0 * ff, (size_t)(j1 - j0) * ff);
    else
        ops_swiglu(c->hg + (size_t)j0 * ff, c->hu + (size_t)j0 * ff, (size_t)(j1 - j0) * ff);
    if (ops_matrix_wants_q8(&E->down)) {
        for (uint32_t j = j0; j < j1; j++) quant_row_q8(c->hg + (size_t)j * ff, c->xqg + (size_t)j * (ff / QK), ff);
        if (c->xpg) kern_panel_rows(c->xqg, ff, j0, j1, c->xpg);
    }
#pragma omp barrier
    ops_matmuls(c->eprod + 2 * a, (int)a, c->n_threads);
    if (E->down_b) { /* gpt-oss */
        for (uint32_t j = j0; j < j1; j++)
            ops_add(c->yd + (size_t)j * dim, E->down_b + (size_t)c->sel[c->entry_slot[j]] * dim, dim);
#pragma omp barrier
    }
    for (uint32_t r = r0; r < r1; r++) {
        const float *ys[k];
        for (uint32_t s = 0; s < k; s++) ys[s] = c->yd + (size_t)c->slot_entry[r * k + s] * dim;
        ops_weighted_sum(c->ym + (size_t)r * dim, ys, c->wts + (size_t)r * k, k, dim);
    }
}

/* Layer l's attention over rows [0, n) into c->xb (after Wo and its bias), from c->xb and its quantized rows; run by
 * every thread of the team (r0, r1: this thread's rows). With attn_gate, the q product holds each head's q, then its
 * gate, and the attention's output is multiplied by sigmoid(gate). */
static void attention(forward *c, const model_layer *L, uint32_t l, uint32_t n, const uint32_t *pos,
                      const kv_map *const *maps, uint32_t r0, uint32_t r1) {
    const model_hparams *hp = &c->m->hp;
    const uint32_t dim = hp->dim, hd = hp->head_dim, q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd;
    const bool gated = hp->kind.attn_gate;
    const ops_rows xb = {c->xb, c->xq, c->xp, n};
    ops_matmuls((const ops_product[]){{&L->wq, &xb, gated ? c->qg : c->q}, {&L->wk, &xb, c->k}, {&L->wv, &xb, c->v}},
                3, c->n_threads);
    for (uint32_t r = r0; gated && r < r1; r++) /* each head's q and gate apart */
        for (uint32_t h = 0; h < hp->n_heads; h++) {
            const float *qg = c->qg + (size_t)r * 2 * q_dim + (size_t)h * 2 * hd;
            memcpy(c->q + (size_t)r * q_dim + (size_t)h * hd, qg, sizeof(float) * hd);
            memcpy(c->gate + (size_t)r * q_dim + (size_t)h * hd, qg + hd, sizeof(float) * hd);
        }
    for (uint32_t r = r0; L->bq && r < r1; r++) { /* qwen2's biases */
        ops_add(c->q + (size_t)r * q_dim, L->bq, q_dim);
        ops_add(c->k + (size_t)r * kv_dim, L->bk, kv_dim);
        ops_add(c->v + (size_t)r * kv_dim, L->bv, kv_dim);
    }
    if (L->q_norm) { /* each head a row of its own */
        ops_rmsnorm(c->q + (size_t)r0 * q_dim, L->q_norm, (r1 - r0) * hp->n_heads, hd, hp->rms_eps,
                    c->q + (size_t)r0 * q_dim);
        ops_rmsnorm(c->k + (size_t)r0 * kv_dim, L->k_norm, (r1 - r0) * hp->n_kv_heads, hd, hp->rms_eps,
                    c->k + (size_t)r0 * kv_dim);
    }
    if (L->rope != MODEL_ROPE_NONE) {
        const float *cs = c->rope_cs[L->rope] + (size_t)r0 * hp->n_rot;
        ops_rope(c->q + (size_t)r0 * q_dim, r1 - r0, hp->n_heads, hd, hp->n_rot, hp->rope_halves, cs);
        ops_rope(c->k + (size_t)r0 * kv_dim, r1 - r0, hp->n_kv_heads, hd, hp->n_rot, hp->rope_halves, cs);
    }
    for (uint32_t r = r0; r < r1; r++) {
        kv_map_store(maps[r], l, pos[r], c->k + (size_t)r * kv_dim, c->v + (size_t)r * kv_dim, kv_dim);
        c->views[r] = kv_map_view(maps[r], l);
    }
#pragma omp barrier
    ops_attention(c->q, n, pos, c->views, hp->n_heads, hp->n_kv_heads, hd, hp->attn_scale, L->window, L->sinks, c->att,
                  c->n_threads);
    for (uint32_t r = r0; gated && r < r1; r++) {
        ops_sigmoid(c->gate + (size_t)r * q_dim, q_dim);
        ops_mul(c->att + (size_t)r * q_dim, c->gate + (size_t)r * q_dim, q_dim);
    }
    quantize_rows(c, c->att, r0, r1, q_dim, ops_matrix_wants_q8(&L->wo));
#pragma omp barrier
    ops_matmul(&L->wo, &(ops_rows){c->att, c->xq, c->xp, n}, c->xb, c->n_threads);
    for (uint32_t r = r0; L->bo && r < r1; r++) ops_add(c->xb + (size_t)r * dim, L->bo, dim); /* gpt-oss */
}

/* A gated DeltaNet layer over rows [0, n) into c->xb (model_gdn; docs/design.md §5), from c->xb and its quantized rows;
 * run by every thread of the team (r0, r1: this thread's rows). The products take all rows at once; then the
 * recurrence runs token by token: a thread owns channels of the convolution, then heads of the delta rule, and walks
 * every row in order for them, so each row reads the state the row before it in its sequence wrote (states[r],
 * forward.h) — the same steps whatever the rows around it, the chunk or the thread count. */
static void gdn_layer(forward *c, const model_gdn *G, uint32_t n, const uint32_t *pos, const forward_state *states,
                      uint32_t r0, uint32_t r1) {
    const model_hparams *hp = &c->m->hp;
    const uint32_t d = hp->ssm_d, hk = hp->n_k_heads, hv = hp->n_v_heads, key_dim = hk * d, value_dim = hv * d;
    const uint32_t conv_dim = model_conv_dim(hp);
    const size_t heads_at = G->state_at + (size_t)(hp->n_conv - 1) * conv_dim; /* the heads' states after the window */
    const ops_rows xb = {c->xb, c->xq, c->xp, n};
    ops_matmuls((const ops_product[]){{&G->qkv, &xb, c->mix}, {&G->z, &xb, c->z}, {&G->beta, &xb, c->beta},
                                      {&G->alpha, &xb, c->g}},
                4, c->n_threads);
    uint32_t c0, c1;
    own_rows(conv_dim, &c0, &c1);
    for (uint32_t r = 0; r < n; r++)
        ops_conv_step(pos[r] ? states[r].in + G->state_at : NULL, states[r].out + G->state_at, G->conv, hp->n_conv,
                      c->mix + (size_t)r * conv_dim, c0, c1);
#pragma omp barrier
    for (uint32_t r = r0; r < r1; r++) {
        float *mix = c->mix + (size_t)r * conv_dim, *g = c->g + (size_t)r * hv;
        ops_silu(mix, conv_dim);
        ops_l2norm(mix, 2 * hk, d, hp->rms_eps); /* q's heads, then k's */
        ops_sigmoid(c->beta + (size_t)r * hv, hv);
        ops_add(g, G->dt_bias, hv);
        ops_softplus(g, hv);
        ops_mul(g, G->a, hv);
    }
#pragma omp barrier
    uint32_t h0, h1;
    own_rows(hv, &h0, &h1);
    const float scale = 1.0f / sqrtf((float)d);
    for (uint32_t r = 0; r < n; r++) {
        const float *mix = c->mix + (size_t)r * conv_dim;
        for (uint32_t h = h0; h < h1; h++) { /* value head h reads key head h % hk (the converter's tiled order) */
            const size_t at = heads_at + (size_t)h * d * d;
            ops_delta_step(pos[r] ? states[r].in + at : NULL, states[r].out + at, mix + (h % hk) * d,
                           mix + key_dim + (h % hk) * d, mix + 2 * key_dim + (size_t)h * d, c->g[(size_t)r * hv + h],
                           c->beta[(size_t)r * hv + h], d, scale, c->o + (size_t)r * value_dim + (size_t)h * d);
        }
    }
#pragma omp barrier
    for (uint32_t r = r0; r < r1; r++) { /* gated norm: rmsnorm(o_h)·ssm_norm ⊙ silu(z_h), into z */
        float *o = c->o + (size_t)r * value_dim;
        ops_rmsnorm(o, G->norm, hv, d, hp->rms_eps, o);
        ops_swiglu(c->z + (size_t)r * value_dim, o, value_dim);
    }
    quantize_rows(c, c->z, r0, r1, value_dim, ops_matrix_wants_q8(&G->out));
#pragma omp barrier
    ops_matmul(&G->out, &(ops_rows){c->z, c->xq, c->xp, n}, c->xb, c->n_threads);
}

/* Rows [r0, r1) of x from their token ids' rows of table (Gemma 3 scales them by sqrt(dim)) or, ids NULL, copied
 * from embd. */
static void embed_rows(forward *c, const ops_matrix *table, const int32_t *ids, const float *embd, uint32_t r0,
                       uint32_t r1) {
    const fkv_model *m = c->m;
    const uint32_t dim = m->hp.dim;
    /* Gemma 3 scales token embeddings by sqrt(dim), not embeddings given as input (llama.cpp does the same). */
    const float embd_scale = m->hp.kind.embd_scale && ids ? sqrtf((float)dim) : 1.0f;
    for (uint32_t r = r0; r < r1; r++) {
        float *x = c->x + (size_t)r * dim;
        if (ids)
            quant_dequantize_row(table->type, table->data + (size_t)ids[r] * table->row_bytes, x, dim);
        else
            memcpy(x, embd + (size_t)r * dim, sizeof(float) * dim);
        if (embd_scale != 1.0f)
            for (uint32_t i = 0; i < dim; i++) x[i] *= embd_scale;
    }
}

/* Layer l (a NextN block's too) over rows [0, n) of x, run by every thread of the team (r0, r1: this thread's rows). */
static void layer_rows(forward *c, uint32_t l, uint32_t n, const uint32_t *pos, const kv_map *const *maps,
                       const forward_state *states, uint32_t r0, uint32_t r1) {
    const model_hparams *hp = &c->m->hp;
    const uint32_t dim = hp->dim;
    const model_layer *L = &c->m->layers[l];
    const model_gdn *G = L->gdn;
    const bool in_q8 = G ? ops_matrix_wants_q8(&G->qkv) || ops_matrix_wants_q8(&G->z) ||
                               ops_matrix_wants_q8(&G->beta) || ops_matrix_wants_q8(&G->alpha)
                         : ops_matrix_wants_q8(&L->wq) || ops_matrix_wants_q8(&L->wk) || ops_matrix_wants_q8(&L->wv);
    ops_rmsnorm(c->x + (size_t)r0 * dim, L->attn_norm, r1 - r0, dim, hp->rms_eps, c->xb + (size_t)r0 * dim);
    quantize_rows(c, c->xb, r0, r1, dim, in_q8);
#pragma omp barrier
    if (G)
        gdn_layer(c, G, n, pos, states, r0, r1);
    else
        attention(c, L, l, n, pos, maps, r0, r1);
    if (L->post_attn_norm)
        ops_rmsnorm(c->xb + (size_t)r0 * dim, L->post_attn_norm, r1 - r0, dim, hp->rms_eps, c->xb + (size_t)r0 * dim);
    ops_add(c->x + (size_t)r0 * dim, c->xb + (size_t)r0 * dim, (size_t)(r1 - r0) * dim);

    ops_rmsnorm(c->x + (size_t)r0 * dim, L->ffn_norm, r1 - r0, dim, hp->rms_eps, c->xb + (size_t)r0 * dim);
    const model_experts *E = L->moe;
    const uint32_t hidden = L->hidden;
    const bool shared_gate = L->shared_gate.n_out != 0;
    quantize_rows(c, c->xb, r0, r1, dim,
                  (hidden && (ops_matrix_wants_q8(&L->w_gate) || ops_matrix_wants_q8(&L->w_up) ||
                              (shared_gate && ops_matrix_wants_q8(&L->shared_gate)))) ||
                      (E && (ops_matrix_wants_q8(&E->router) || ops_matrix_wants_q8(&E->gate) ||
                             ops_matrix_wants_q8(&E->up))));
#pragma omp barrier
    if (E) moe_ffn(c, E, n, r0, r1);
    if (hidden) { /* the dense FFN, or an expert layer's shared experts */
        ops_rows xb = {c->xb, c->xq, c->xp, n}, hb = {c->hb, c->xq, c->xp, n};
        ops_matmuls((const ops_product[]){{&L->w_gate, &xb, c->hb}, {&L->w_up, &xb, c->hb2},
                                          {&L->shared_gate, &xb, c->sg}},
                    shared_gate ? 3 : 2, c->n_threads);
        if (hp->kind.gelu)
            ops_geglu(c->hb + (size_t)r0 * hidden, c->hb2 + (size_t)r0 * hidden, (size_t)(r1 - r0) * hidden);
        else
            ops_swiglu(c->hb + (size_t)r0 * hidden, c->hb2 + (size_t)r0 * hidden, (size_t)(r1 - r0) * hidden);
        quantize_rows(c, c->hb, r0, r1, hidden, ops_matrix_wants_q8(&L->w_down));
#pragma omp barrier
        ops_matmul(&L->w_down, &hb, c->xb, c->n_threads);
        if (L->post_ffn_norm)
            ops_rmsnorm(c->xb + (size_t)r0 * dim, L->post_ffn_norm, r1 - r0, dim, hp->rms_eps,
                        c->xb + (size_t)r0 * dim);
        if (shared_gate) { /* Qwen3.5's shared expert, times sigmoid(xb · ffn_gate_inp_shexp) */
            ops_sigmoid(c->sg + r0, r1 - r0);
            for (uint32_t r = r0; r < r1; r++)
                for (uint32_t i = 0; i < dim; i++) c->xb[(size_t)r * dim + i] *= c->sg[r];
        }
        /* routed + shared, as llama.cpp adds them (an IEEE sum is the same either way round) */
        if (E) ops_add(c->xb + (size_t)r0 * dim, c->ym + (size_t)r0 * dim, (size_t)(r1 - r0) * dim);
    }
    ops_add(c->x + (size_t)r0 * dim, (hidden ? c->xb : c->ym) + (size_t)r0 * dim, (size_t)(r1 - r0) * dim);
}

/* Logits of rows [0, n) of h (dim wide) into logits, through w; run by every thread of the team. */
static void head_rows(forward *c, const ops_matrix *w, const float *h, uint32_t n, float *logits) {
    uint32_t l0, l1;
    own_rows(n, &l0, &l1);
    quantize_rows(c, h, l0, l1, c->m->hp.dim, ops_matrix_wants_q8(w));
#pragma omp barrier
    ops_matmul(w, &(ops_rows){h, c->xq, c->xp, n}, logits, c->n_threads);
}

/* The NextN block over rows [0, n): token ids[r] (or embedding row embd[r]) at pos[r] after the hidden state
 * c->hin[r]; its K/V rows stored in the maps' layer n_layers, its output normed (shared_head_norm, else output_norm)
 * into c->xb. Run by every thread of the team (r0, r1: this thread's rows). As llama.cpp's graph_mtp: x =
 * eh_proj·[enorm(e); hnorm(h)], then a layer. */
static void nextn_rows(forward *c, const int32_t *ids, const float *embd, uint32_t n, const uint32_t *pos,
                       const kv_map *const *maps, uint32_t r0, uint32_t r1) {
    const fkv_model *m = c->m;
    const model_hparams *hp = &m->hp;
    const model_nextn *N = &m->nextn[0];
    const uint32_t dim = hp->dim;
    embed_rows(c, N->embed.n_out ? &N->embed : &m->tok_embd, ids, embd, r0, r1);
    for (uint32_t r = r0; r < r1; r++) {
        float *eh = c->eh + (size_t)r * 2 * dim;
        ops_rmsnorm(c->x + (size_t)r * dim, N->enorm, 1, dim, hp->rms_eps, eh);
        ops_rmsnorm(c->hin + (size_t)r * dim, N->hnorm, 1, dim, hp->rms_eps, eh + dim);
    }
    quantize_rows(c, c->eh, r0, r1, 2 * dim, ops_matrix_wants_q8(&N->eh_proj));
#pragma omp barrier
    ops_matmul(&N->eh_proj, &(ops_rows){c->eh, c->xq, c->xp, n}, c->x, c->n_threads);
    layer_rows(c, hp->n_layers, n, pos, maps, NULL, r0, r1);
    ops_rmsnorm(c->x + (size_t)r0 * dim, N->head_norm ? N->head_norm : m->output_norm, r1 - r0, dim, hp->rms_eps,
                c->xb + (size_t)r0 * dim);
}

/* The whole pass, run by every thread of one team (or by one thread): row-wise steps on each thread's
 * own rows, products and attention shared through ops.h, a barrier wherever a step reads rows another
 * thread wrote. Which thread computes a value never changes its bits (ops.h). */
static void forward_team(forward *c, const int32_t *ids, const float *embd, uint32_t n, const uint32_t *pos,
                         const kv_map *const *maps, const forward_state *states, uint32_t first_logit, float *logits) {
    const fkv_model *m = c->m;
    const model_hparams *hp = &m->hp;
    const uint32_t dim = hp->dim;
    uint32_t r0, r1;
    own_rows(n, &r0, &r1);
    embed_rows(c, &m->tok_embd, ids, embd, r0, r1);
    for (int t = 0; t < (hp->window ? 2 : 1); t++) {
        ops_rope_table(pos + r0, r1 - r0, hp->n_rot, &hp->rope[t], t == MODEL_ROPE_GLOBAL ? c->rope_divisors : NULL,
                       c->rope_cs[t] + (size_t)r0 * hp->n_rot);
    }
    for (uint32_t l = 0; l < hp->n_layers; l++) layer_rows(c, l, n, pos, maps, states, r0, r1);

    /* the final hidden states: every row's for the NextN block, else the rows with logits. Into xb, rows [first_logit,
     * n) as rows [0, n - first_logit) — rows other threads may still be reading in their last residual add: wait. */
    const uint32_t from = c->nextn ? 0 : first_logit;
    float *h = c->nextn ? c->h : c->xb;
    if (from < n) {
#pragma omp barrier
        const uint32_t l0 = r0 > from ? r0 - from : 0, l1 = r1 > from ? r1 - from : 0;
        ops_rmsnorm(c->x + (size_t)(from + l0) * dim, m->output_norm, l1 - l0, dim, hp->rms_eps,
                    h + (size_t)l0 * dim);
#pragma omp barrier
    }
    if (first_logit < n) head_rows(c, &m->output, h + (size_t)(first_logit - from) * dim, n - first_logit, logits);
    if (!c->nextn) return;
    /* The NextN block's row at p reads the hidden state at p - 1 (llama.cpp pairs h_p with the id at p + 1, at p + 1):
     * the row before it in this call where it is of the same sequence (it wrote the state this row reads), else its
     * sequence's state; zeros at position 0. Then each row's own goes to its state, once no row reads them any more,
     * by the last row writing that state (a chunk steps one state in place). */
    const size_t h_at = hp->state_floats;
    for (uint32_t r = r0; r < r1; r++) {
        float *hin = c->hin + (size_t)r * dim;
        if (!pos[r])
            memset(hin, 0, sizeof(float) * dim);
        else
            memcpy(hin, r && states[r].in == states[r - 1].out ? c->h + (size_t)(r - 1) * dim : states[r].in + h_at,
                   sizeof(float) * dim);
    }
#pragma omp barrier
    for (uint32_t r = r0; r < r1; r++)
        if (r == n - 1 || states[r + 1].out != states[r].out)
            memcpy(states[r].out + h_at, c->h + (size_t)r * dim, sizeof(float) * dim);
    nextn_rows(c, ids, embd, n, pos, maps, r0, r1);
}

void forward_rows(forward *c, const int32_t *ids, const float *embd, uint32_t n, const uint32_t *pos,
                  const kv_map *const *maps, const forward_state *states, uint32_t first_logit, float *logits) {
    const model_hparams *hp = &c->m->hp;
    const uint64_t q_dim = (uint64_t)hp->n_heads * hp->head_dim, kv_dim = (uint64_t)hp->n_kv_heads * hp->head_dim;
    const uint64_t ffn = hp->n_expert ? (uint64_t)hp->n_ff_exp * hp->n_expert_used + hp->n_ff_shexp : hp->hidden;
    const uint64_t layer_macs = hp->dim * (2 * q_dim + 2 * kv_dim) + 3ull * hp->dim * ffn;
    const bool wide = (uint64_t)n * layer_macs * hp->n_layers >= FORWARD_PARALLEL_MIN_WORK;
#pragma omp parallel num_threads(c->n_threads) if (wide)
    forward_team(c, ids, embd, n, pos, maps, states, first_logit, logits);
}

/* The NextN block alone: a drafter's rows (forward_nextn in forward.h). */
static void nextn_team(forward *c, const int32_t *ids, const float *h_in, uint32_t n, const uint32_t *pos,
                       const kv_map *const *maps, float *logits, float *h_out) {
    const model_hparams *hp = &c->m->hp;
    uint32_t r0, r1;
    own_rows(n, &r0, &r1);
    ops_rope_table(pos + r0, r1 - r0, hp->n_rot, &hp->rope[MODEL_ROPE_GLOBAL], c->rope_divisors,
                   c->rope_cs[MODEL_ROPE_GLOBAL] + (size_t)r0 * hp->n_rot);
    memcpy(c->hin + (size_t)r0 * hp->dim, h_in + (size_t)r0 * hp->dim, sizeof(float) * hp->dim * (r1 - r0));
    nextn_rows(c, ids, NULL, n, pos, maps, r0, r1);
    memcpy(h_out + (size_t)r0 * hp->dim, c->xb + (size_t)r0 * hp->dim, sizeof(float) * hp->dim * (r1 - r0));
#pragma omp barrier
    const model_nextn *N = &c->m->nextn[0];
    head_rows(c, N->head.n_out ? &N->head : &c->m->output, c->xb, n, logits);
}

void forward_nextn(forward *c, const int32_t *ids, const float *h_in, uint32_t n, const uint32_t *pos,
                   const kv_map *const *maps, float *logits, float *h_out) {
    const model_hparams *hp = &c->m->hp;
    const bool wide = (uint64_t)n * hp->dim * hp->n_vocab >= FORWARD_PARALLEL_MIN_WORK;
#pragma omp parallel num_threads(c->n_threads) if (wide)
    nextn_team(c, ids, h_in, n, pos, maps, logits, h_out);
}
