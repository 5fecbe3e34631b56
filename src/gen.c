/* gen.c — a generation in progress (fkv_gen in flatkv.h): the one place that decides, after each row of
 * logits, which token comes next and whether generation goes on.
 *
 * WHY one place: a single sequence (fkv_seq_generate) and a batch of many (the server's scheduler) must
 * stop at the same token for the same reasons, and feed exactly the same ids, or a batched answer would
 * differ from the same request run alone.
 */
#include <stdlib.h>
#define XXH_STATIC_LINKING_ONLY /* the digest state inside the struct */
#include <xxhash.h>

#include "flatkv.h"

struct fkv_gen {
    const fkv_model *m;
    fkv_gen_params p;
    int32_t *out;
    fkv_gen_result res;
    bool over;
    XXH3_state_t digest;
};

fkv_gen *fkv_gen_new(const fkv_model *m, const fkv_gen_params *p, int32_t *out) {
    fkv_gen *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = m;
    g->p = *p;
    g->out = out;
    XXH3_64bits_reset(&g->digest);
    g->over = p->max_tokens == 0;
    return g;
}

void fkv_gen_free(fkv_gen *g) { free(g); }

int32_t fkv_gen_next(fkv_gen *g, const float *logits, const int32_t *history, int n_history, uint32_t n_pos,
                     uint32_t n_ctx) {
    if (g->over) return -1;
    uint32_t n_vocab = fkv_model_get_info(g->m).n_vocab;
    XXH3_64bits_update(&g->digest, logits, sizeof(float) * n_vocab);
    if (g->p.on_logits && !g->p.on_logits(g->p.user, logits, n_vocab)) {
        g->res.cancelled = true;
        g->over = true;
        return -1;
    }
    fkv_logprobs lp = {.n_top = g->p.top_logprobs};
    int32_t id = fkv_sampler_choose(g->p.sampler, logits, history, n_history, NULL, g->p.on_logprobs ? &lp : NULL);
    g->out[g->res.n_tokens++] = id;
    g->over = true;
    if (fkv_token_is_eog(g->m, id)) {
        g->res.eog = true;
        return -1;
    }
    if (g->p.on_logprobs) g->p.on_logprobs(g->p.user, id, &lp);
    if (g->p.on_token) {
        char piece[256];
        int len = fkv_token_piece(g->m, n_history ? history[n_history - 1] : -1, id, piece, sizeof piece);
        if (len > (int)sizeof piece) len = (int)sizeof piece;
        if (!g->p.on_token(g->p.user, id, piece, len < 0 ? 0 : len)) {
            g->res.cancelled = true;
            return -1;
        }
    }
    /* The last token needs no logits, and a full context has no room for it. */
    if (g->res.n_tokens == g->p.max_tokens || n_pos >= n_ctx) return -1;
    g->over = false;
    return id;
}

fkv_gen_result fkv_gen_result_get(const fkv_gen *g) {
    fkv_gen_result r = g->res;
    r.logits_digest = XXH3_64bits_digest(&g->digest);
    return r;
}
