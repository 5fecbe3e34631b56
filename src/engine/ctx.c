/* ctx.c — one sequence's contiguous KV buffer and the forward pass into it (fkv_ctx in flatkv.h).
 *
 * WHY chunks on a grid: a prompt is computed in chunks of at most prefill_rows positions whose boundaries
 * are multiples of prefill_rows in absolute position (docs/design.md §3). With row-invariant kernels (ops.h)
 * the grid only affects speed; it is kept so that a kernel that is not row-invariant could still resume
 * exactly, and so that scratch is sized once, at creation: nothing allocates per chunk or per token.
 *
 * A model with recurrent layers: the context holds the state after its last computed position, stepped in place
 * (forward.h); it cannot be cut back, so an evaluation continues from that position or starts again at 0.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/err.h"
#include "cache/kv.h"
#include "model/forward.h"
#include "model/model.h"

struct fkv_ctx {
    const fkv_model *m;
    fkv_ctx_params p;
    kv_buf *kv;          /* the rows of the layers that keep them (all but the recurrent ones) */
    kv_map map;
    uint32_t *layer_at;  /* [n_layers] map.layer_at's table (model_kv_layers), when one is needed */
    forward *fw;
    uint32_t *pos;        /* [prefill_rows] */
    const kv_map **maps;  /* [prefill_rows], all &map */
    float *state;           /* the recurrent state (model_hparams.state_floats), or NULL: no recurrent layers */
    uint32_t state_pos;     /* the positions it folds in: [0, state_pos) */
    forward_state *states;  /* [prefill_rows], all {state, state}, or NULL */
};

fkv_ctx_params fkv_ctx_default_params(void) {
    return (fkv_ctx_params){.n_ctx = 0, .kv_type = FKV_KV_AUTO, .n_threads = 0, .prefill_rows = 0};
}

uint32_t fkv_ctx_n_ctx(const fkv_ctx *c) { return c->p.n_ctx; }

fkv_kv_type fkv_ctx_kv_type(const fkv_ctx *c) { return c->p.kv_type; }

void fkv_ctx_free(fkv_ctx *c) {
    if (!c) return;
    kv_free(c->kv);
    free(c->layer_at);
    forward_free(c->fw);
    free(c->pos);
    free(c->maps);
    free(c->state);
    free(c->states);
    free(c);
}

fkv_ctx *fkv_ctx_new(const fkv_model *m, const fkv_ctx_params *params, fkv_error *err) {
    fkv_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        err_nomem(err, "out of memory for a context");
        return NULL;
    }
    const model_hparams *hp = &m->hp;
    c->m = m;
    c->p = params ? *params : fkv_ctx_default_params();
    /* A context must fit a quarter of RAM: the model's is capped to it (a file's context_length is only a claim;
     * fkv_ctx_n_ctx tells what was taken), an explicit one larger is refused — the engine's rule (engine.c
     * fit_context), with this buffer as the whole budget. */
    uint32_t kv_layers[2];
    if (kv_choose_type(&c->p.kv_type, hp->head_dim, hp->n_kv_heads * hp->head_dim, err)) {
        fkv_ctx_free(c);
        return NULL;
    }
    if (!(c->layer_at = malloc(sizeof *c->layer_at * hp->n_layers))) {
        err_nomem(err, "out of memory for a context");
        fkv_ctx_free(c);
        return NULL;
    }
    const uint32_t *layer_at = model_kv_layers(m, false, 0, c->layer_at, kv_layers);
    const size_t bytes_per_pos = (size_t)2 * kv_layers[0] * kv_row_bytes(c->p.kv_type, hp->n_kv_heads * hp->head_dim);
    const size_t ram = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    const size_t fits = bytes_per_pos ? ram / 4 / bytes_per_pos : UINT32_MAX;
    if (c->p.n_ctx == 0) c->p.n_ctx = hp->n_ctx_train < fits ? hp->n_ctx_train : (uint32_t)fits;
    if (c->p.n_ctx > fits || c->p.n_ctx == 0) {
        err_input(err, "a context of %u positions is more than a quarter of RAM holds (%zu positions of %zu bytes)",
                  c->p.n_ctx, fits, bytes_per_pos);
        fkv_ctx_free(c);
        return NULL;
    }
    if (c->p.prefill_rows == 0) c->p.prefill_rows = FORWARD_DEFAULT_GRID;
    uint32_t rows = c->p.prefill_rows;
    if (!(c->kv = kv_new(kv_layers[0], c->p.n_ctx, hp->n_kv_heads * hp->head_dim, c->p.kv_type, err)) ||
        !(c->fw = forward_new(m, rows, c->p.n_ctx, c->p.n_threads, false, err))) {
        fkv_ctx_free(c);
        return NULL;
    }
    c->p.n_threads = forward_threads(c->fw);
    c->map = kv_buf_map(c->kv);
    c->map.layer_at = layer_at;
    c->pos = malloc(sizeof *c->pos * rows);
    c->maps = malloc(sizeof *c->maps * rows);
    if (hp->state_floats) {
        c->state = calloc(hp->state_floats, sizeof(float));
        c->states = malloc(sizeof *c->states * rows);
    }
    if (!c->pos || !c->maps || (hp->state_floats && (!c->state || !c->states))) {
        err_nomem(err, "out of memory for the scratch of %u-row chunks and the recurrent state", rows);
        fkv_ctx_free(c);
        return NULL;
    }
    for (uint32_t r = 0; r < rows; r++) c->maps[r] = &c->map;
    for (uint32_t r = 0; c->states && r < rows; r++) c->states[r] = (forward_state){c->state, c->state};
    return c;
}

/* fkv_eval and fkv_eval_embd: rows from ids or from embeddings, cut on the grid. */
static int eval_rows(fkv_ctx *c, const int32_t *ids, const float *embd, uint32_t n, uint32_t pos0, uint32_t n_logits,
                     float *logits, fkv_error *err) {
    const uint32_t n_vocab = c->m->hp.n_vocab, dim = c->m->hp.dim, grid = c->p.prefill_rows;
    if (n == 0) return err_input(err, "nothing to evaluate: 0 rows");
    if (pos0 > c->p.n_ctx || n > c->p.n_ctx - pos0)
        return err_input(err, "positions [%u, %u) exceed the context of %u", pos0, pos0 + n, c->p.n_ctx);
    if (n_logits > n) return err_input(err, "asked for the logits of %u rows of a %u-row evaluation", n_logits, n);
    if (n_logits && !logits) return err_input(err, "asked for logits without a buffer for them");
    if (c->state && pos0 && pos0 != c->state_pos)
        return err_input(err, "positions from %u: the model's recurrent state folds in positions [0, %u), so an "
                              "evaluation continues at %u or starts again at 0", pos0, c->state_pos, c->state_pos);
    for (uint32_t i = 0; ids && i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= n_vocab)
            return err_input(err, "token id %d at position %u is outside the vocabulary (0..%u)", ids[i], pos0 + i,
                           n_vocab - 1);
    const uint32_t want_from = n - n_logits;
    for (uint32_t done = 0; done < n;) {
        uint32_t p = pos0 + done, len = forward_grid_end(p, pos0 + n, grid) - p;
        uint32_t first = want_from > done ? want_from - done : 0;
        if (first > len) first = len;
        float *dst = first < len ? logits + (size_t)(done + first - want_from) * n_vocab : NULL;
        for (uint32_t r = 0; r < len; r++) c->pos[r] = p + r;
        forward_rows(c->fw, ids ? ids + done : NULL, ids ? NULL : embd + (size_t)done * dim, len, c->pos, c->maps,
                     c->states, first, dst);
        done += len;
    }
    c->state_pos = pos0 + n;
    return 0;
}

int fkv_eval(fkv_ctx *c, const int32_t *ids, uint32_t n, uint32_t pos0, uint32_t n_logits, float *logits,
             fkv_error *err) {
    if (!ids) return err_input(err, "no token ids to evaluate");
    return eval_rows(c, ids, NULL, n, pos0, n_logits, logits, err);
}

int fkv_eval_embd(fkv_ctx *c, const float *embd, uint32_t n, uint32_t pos0, uint32_t n_logits, float *logits,
                  fkv_error *err) {
    if (!embd) return err_input(err, "no embedding rows to evaluate");
    return eval_rows(c, NULL, embd, n, pos0, n_logits, logits, err);
}

uint64_t fkv_kv_digest(const fkv_ctx *c, uint32_t n_pos) {
    return kv_map_digest(&c->map, c->m->hp.n_layers, c->m->windows, n_pos > c->p.n_ctx ? c->p.n_ctx : n_pos);
}

uint64_t fkv_state_digest(const fkv_ctx *c) {
    return c->state ? XXH3_64bits(c->state, sizeof(float) * c->m->hp.state_floats) : 0;
}
