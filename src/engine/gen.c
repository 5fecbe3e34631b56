/* gen.c — a generation in progress (fkv_gen in flatkv.h): the one place that decides, after each row of
 * logits, which token comes next and whether generation goes on.
 *
 * WHY one place: a single sequence (fkv_seq_generate) and a batch of many (the server's scheduler) must
 * stop at the same token for the same reasons, and feed exactly the same ids, or a batched answer would
 * differ from the same request run alone.
 */
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* the digest state inside the struct */
#include <xxhash.h>

#include "base/err.h"
#include "constrain/grammar.h"
#include "engine/gen.h"
#include "flatkv.h"
#include "model/model.h"

struct fkv_grammar {
    const fkv_model *m;
    grammar *g;
    int owners; /* fkv_grammar_new's caller and every fkv_grammar_share; atomic */
};

fkv_grammar *fkv_grammar_new(const fkv_model *m, const char *gbnf, size_t len, fkv_error *err) {
    fkv_grammar *fg = calloc(1, sizeof *fg);
    if (!fg) {
        err_nomem(err, "out of memory for a grammar");
        return NULL;
    }
    fg->m = m;
    fg->owners = 1;
    fkv_model *mm = (fkv_model *)m; /* the vocabulary's masks are built once, by the first grammar that needs them */
    pthread_mutex_lock(&mm->gvocab_mu);
    if (!mm->gvocab) mm->gvocab = grammar_vocab_new(m->vocab, err);
    const bool vocab = mm->gvocab != NULL;
    pthread_mutex_unlock(&mm->gvocab_mu);
    if (!vocab || !(fg->g = grammar_parse(gbnf, len, err))) {
        free(fg);
        return NULL;
    }
    return fg;
}

fkv_grammar *fkv_grammar_share(fkv_grammar *g) {
    if (g) __atomic_add_fetch(&g->owners, 1, __ATOMIC_RELAXED);
    return g;
}

void fkv_grammar_free(fkv_grammar *g) {
    if (!g || __atomic_sub_fetch(&g->owners, 1, __ATOMIC_ACQ_REL) > 0) return;
    grammar_free(g->g);
    free(g);
}

char *fkv_json_schema_gbnf(const char *schema, size_t len, const char *prefix, fkv_error *err) {
    return jsonschema_to_gbnf(schema, len, prefix ? prefix : "", err);
}

struct fkv_gen {
    const fkv_model *m;
    fkv_gen_params p;
    int32_t *out;
    fkv_gen_result res;
    bool over;
    grammar_state *gs; /* with p.grammar: where the output is in it */
    uint8_t *allowed;  /* [n_vocab] the tokens that can continue it */
    XXH3_state_t digest;
    spec_state spec;
};

spec_state *gen_spec(fkv_gen *g) { return &g->spec; }

const int32_t *gen_out(const fkv_gen *g, uint32_t *n) {
    *n = g->res.n_tokens;
    return g->out;
}

uint32_t gen_room(const fkv_gen *g) { return g->over ? 0 : g->p.max_tokens - g->res.n_tokens; }

fkv_gen *fkv_gen_new(const fkv_model *m, const fkv_gen_params *p, int32_t *out) {
    fkv_gen *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = m;
    g->p = *p;
    g->out = out;
    if (p->grammar && (!(g->gs = grammar_state_new(p->grammar->g, NULL)) ||
                       !(g->allowed = malloc(fkv_model_get_info(m).n_vocab)))) {
        fkv_gen_free(g);
        return NULL;
    }
    XXH3_64bits_reset(&g->digest);
    g->over = p->max_tokens == 0;
    g->spec = spec_state_init(&p->spec);
    return g;
}

void fkv_gen_free(fkv_gen *g) {
    if (!g) return;
    spec_state_end(&g->spec);
    grammar_state_free(g->gs);
    free(g->allowed);
    free(g);
}

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
    if (g->gs) {
        grammar_allowed(g->gs, g->m->gvocab, g->allowed);
        if (!memchr(g->allowed, 1, n_vocab)) { /* no token continues the grammar here: the output ends */
            g->over = true;
            return -1;
        }
    }
    int32_t id =
        fkv_sampler_choose(g->p.sampler, logits, history, n_history, g->allowed, g->p.on_logprobs ? &lp : NULL);
    if (g->gs && !fkv_token_is_eog(g->m, id)) grammar_accept(g->gs, g->m->gvocab, id); /* allowed: it advances */
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
    r.drafted = g->spec.drafted;
    r.accepted = g->spec.accepted;
    r.predicted = g->spec.pred_drafted;
    r.predicted_accepted = g->spec.pred_accepted;
    return r;
}
