/* sampler.c — repetition penalty, top-k, top-p, min-p, temperature and one seeded draw.
 *
 * Design: fkv_sampler_sample copies the row into a candidate array (id, logit) sized at creation, then
 * narrows it in place; the caller's logits are only read. Every ordering uses one total order
 * (higher logit first, equal logits by lower id), so which ids a filter keeps never depends on how
 * the candidates happen to be arranged. Probabilities are exp((l - max) / temp) in double: the max
 * is subtracted before dividing by temp, so neither a huge logit nor a tiny temperature overflows.
 *
 * Nothing sorts the vocabulary: top-k keeps an in-place heap of k candidates (O(n log k)) and top-p
 * buckets candidates by logit to find where the cumulative probability crosses p, sorting only the
 * few candidates at that crossing. Neither allocates (no qsort, which may malloc), so a call never
 * allocates: all scratch is sized in fkv_sampler_new.
 *
 * Odd inputs, decided here because the header leaves them open:
 *   - A NaN logit is read as -inf and a -inf logit is never drawn (it stays a legal argmax only
 *     when every logit is -inf or NaN: then the answer is id 0, the lowest). +inf is read as
 *     FLT_MAX, so it is the most likely id without turning the softmax into inf - inf.
 *   - History ids outside [0, n_vocab) are ignored by the penalty. repeat_last_n 0 turns the
 *     penalty off; a negative repeat_last_n penalizes the whole history (llama.cpp's -1, "the whole
 *     context", since the history is the context). A repeat_penalty that is not > 0 (or NaN) is off.
 *   - temp, top_p, min_p that are NaN mean "off" (greedy for temp): each switch is tested so that
 *     NaN compares false.
 *   - Each non-greedy call consumes exactly one random number, however many candidates survive,
 *     so the generator's position is the count of non-greedy calls. Greedy consumes none.
 *
 * Reproducibility across machines: the generator and all arithmetic are fixed IEEE operations; the
 * one outside dependency is libm's exp. Another libm may differ in an exp's last bit, which can
 * change a draw only when the uniform lands within that bit of a boundary between two ids.
 */
#include "engine/sampler.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    float logit;
    int32_t id;
} sampler_cand;

struct fkv_sampler {
    fkv_sampler_params params;
    int32_t n_vocab;
    uint64_t rng[4];      /* xoshiro256** state */
    sampler_cand *cand;   /* [n_vocab] the row being narrowed; the candidates in play are a prefix */
    double *weight;       /* [n_vocab] unnormalized probability of cand[i] */
    unsigned char *seen;  /* [n_vocab] 1 while an id is being penalized; all 0 between calls */
    float *penalized;     /* [n_vocab] the penalized row, kept for the chosen id's log-probability */
    uint32_t *chosen;     /* [n_vocab] times each id was returned: the frequency and presence penalties' counts */
    int32_t *chosen_ids;  /* the distinct ids returned, in first-return order; n_chosen of them */
    int32_t n_chosen;
};

fkv_sampler_params fkv_sampler_default_params(void) {
    return (fkv_sampler_params){
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .seed = 0,
    };
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) from the top 24 bits: exactly representable in a float, identical everywhere. */
static float uniform01(uint64_t s[4]) { return (float)(xoshiro_next(s) >> 40) * 0x1.0p-24f; }

fkv_sampler *fkv_sampler_new(const fkv_sampler_params *p, int32_t n_vocab) {
    if (!p || n_vocab < 1) return NULL;
    fkv_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->params = *p;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->weight = malloc((size_t)n_vocab * sizeof *s->weight);
    s->seen = calloc((size_t)n_vocab, 1);
    s->penalized = malloc((size_t)n_vocab * sizeof *s->penalized);
    s->chosen = calloc((size_t)n_vocab, sizeof *s->chosen);
    s->chosen_ids = malloc((size_t)n_vocab * sizeof *s->chosen_ids);
    if (!s->cand || !s->weight || !s->seen || !s->penalized || !s->chosen || !s->chosen_ids) {
        fkv_sampler_free(s);
        return NULL;
    }
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    return s;
}

void fkv_sampler_free(fkv_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->weight);
    free(s->seen);
    free(s->penalized);
    free(s->chosen);
    free(s->chosen_ids);
    free(s);
}

/* The one total order: a ranks before b. */
static bool cand_better(sampler_cand a, sampler_cand b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

/* Restore the heap below i, where the root is the worst of h[0..n). */
static void heap_sift_down(sampler_cand *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < n && cand_better(h[worst], h[l])) worst = l;
        if (r < n && cand_better(h[worst], h[r])) worst = r;
        if (worst == i) return;
        sampler_cand t = h[i];
        h[i] = h[worst];
        h[worst] = t;
        i = worst;
    }
}

/* Move the best k of c[0..n) to c[0..k), best first; the others stay in c[k..n), in some order. */
static void select_best(sampler_cand *c, int32_t n, int32_t k) {
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (cand_better(c[i], c[0])) {
            sampler_cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            heap_sift_down(c, k, 0);
        }
    }
    /* Heap sort (all of it when k == n): each step moves the worst left to the end, so the array ends
     * best first. */
    for (int32_t end = k - 1; end > 0; end--) {
        sampler_cand t = c[0];
        c[0] = c[end];
        c[end] = t;
        heap_sift_down(c, end, 0);
    }
}

enum { TOP_P_BUCKETS = 256, TOP_P_SORT_MAX = 64 };

/* Which of TOP_P_BUCKETS equal slices of [lo, hi] holds logit l (scale = TOP_P_BUCKETS / (hi - lo)).
 * Rounding is monotone, so a better logit never lands in a lower bucket. */
static int top_p_bucket(float l, double lo, double scale) {
    int b = (int)(((double)l - lo) * scale);
    return b < TOP_P_BUCKETS ? b : TOP_P_BUCKETS - 1;
}

/* Move to the front of c[0..n) the smallest best-first set whose probability (over c[0..n)) reaches
 * top_p, and return its size (all of c when rounding leaves top_p unreached). Sorting n candidates
 * per token is what this avoids: buckets by logit find the bucket where the mass crosses top_p;
 * everything above it is kept unsorted, everything below dropped, and only the crossing bucket is
 * cut again, until few enough candidates remain to sort. Each round strictly shrinks the crossing
 * set (its lowest and highest logits land in different buckets), so the final sort sees at most
 * TOP_P_SORT_MAX candidates, or more only when they all tie (the sort then orders them by id). */
static float max_logit(const sampler_cand *c, int32_t n) {
    float max = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    return max;
}

/* Swap candidates i and j together with their weights. */
static void swap_cand(sampler_cand *c, double *w, int32_t i, int32_t j) {
    sampler_cand tc = c[i];
    c[i] = c[j];
    c[j] = tc;
    double tw = w[i];
    w[i] = w[j];
    w[j] = tw;
}

static int32_t top_p_filter(sampler_cand *c, double *w, int32_t n, double top_p) {
    double max = max_logit(c, n), sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        w[i] = exp((double)c[i].logit - max);
        sum += w[i];
    }
    double remaining = top_p * sum; /* mass still needed beyond the kept c[0..a) */
    int32_t a = 0, k = n;           /* the crossing set is c[a..k) */
    while (k - a > TOP_P_SORT_MAX) {
        float lo = c[a].logit, hi = c[a].logit;
        for (int32_t i = a + 1; i < k; i++) {
            if (c[i].logit < lo) lo = c[i].logit;
            if (c[i].logit > hi) hi = c[i].logit;
        }
        if (lo == hi) break;
        double scale = TOP_P_BUCKETS / ((double)hi - lo), mass[TOP_P_BUCKETS] = {0};
        for (int32_t i = a; i < k; i++) mass[top_p_bucket(c[i].logit, lo, scale)] += w[i];
        int crossing = TOP_P_BUCKETS - 1;
        double above = 0.0;
        while (crossing > 0 && above + mass[crossing] < remaining) above += mass[crossing--];
        int32_t kept = a;
        for (int32_t i = a; i < k; i++)
            if (top_p_bucket(c[i].logit, lo, scale) > crossing) swap_cand(c, w, i, kept++);
        int32_t end = kept;
        for (int32_t i = kept; i < k; i++)
            if (top_p_bucket(c[i].logit, lo, scale) == crossing) swap_cand(c, w, i, end++);
        a = kept;
        k = end;
        remaining -= above;
    }
    select_best(c + a, k - a, k - a); /* w[a..k) no longer lines up; recomputed below */
    double cum = 0.0;
    for (int32_t i = a; i < k; i++) {
        cum += exp((double)c[i].logit - max);
        if (cum >= remaining) return i + 1;
    }
    return k;
}

static void apply_repeat_penalty(fkv_sampler *s, const int32_t *history, int n_history) {
    float penalty = s->params.repeat_penalty;
    int32_t last_n = s->params.repeat_last_n;
    if (!(penalty > 0.0f) || penalty == 1.0f || last_n == 0 || !history || n_history <= 0) return;
    int start = (last_n < 0 || last_n >= n_history) ? 0 : n_history - last_n;
    /* Once per distinct id, as llama.cpp does: `seen` marks ids already penalized this call. */
    for (int i = start; i < n_history; i++) {
        int32_t id = history[i];
        if (id < 0 || id >= s->n_vocab || s->seen[id]) continue;
        s->seen[id] = 1;
        float *l = &s->cand[id].logit; /* cand is still indexed by id here */
        *l = *l > 0.0f ? *l / penalty : *l * penalty;
    }
    for (int i = start; i < n_history; i++) {
        int32_t id = history[i];
        if (id >= 0 && id < s->n_vocab) s->seen[id] = 0;
    }
}

/* OpenAI's frequency and presence penalties over the ids this sampler returned (cand still indexed by id). */
static void apply_openai_penalties(fkv_sampler *s) {
    const float freq = s->params.frequency_penalty, pres = s->params.presence_penalty;
    if (!(freq != 0.0f || pres != 0.0f)) return;
    for (int32_t i = 0; i < s->n_chosen; i++) {
        const int32_t id = s->chosen_ids[i];
        s->cand[id].logit -= freq * (float)s->chosen[id] + pres;
    }
}

/* lp's top ids from the penalized row (cand still indexed by id); *lse = its log-sum-exp. */
static void fill_top_logprobs(const fkv_sampler *s, fkv_logprobs *lp, double *lse) {
    const int32_t n_vocab = s->n_vocab;
    double max = max_logit(s->cand, n_vocab), sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)s->cand[i].logit - max);
    *lse = max + log(sum);
    uint32_t k = lp->n_top > FKV_MAX_TOP_LOGPROBS ? FKV_MAX_TOP_LOGPROBS : lp->n_top, n = 0;
    if (k > (uint32_t)n_vocab) k = (uint32_t)n_vocab;
    sampler_cand top[FKV_MAX_TOP_LOGPROBS];
    for (int32_t i = 0; i < n_vocab && k; i++) { /* insertion into the best k so far, best first */
        if (n == k && !cand_better(s->cand[i], top[k - 1])) continue;
        uint32_t at = n < k ? n++ : k - 1;
        while (at > 0 && cand_better(s->cand[i], top[at - 1])) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = s->cand[i];
    }
    lp->n_top = n;
    for (uint32_t i = 0; i < n; i++) {
        lp->top_ids[i] = top[i].id;
        lp->top_logprobs[i] = (float)((double)top[i].logit - *lse);
    }
}

/* weight[i] = exp((cand[i].logit - max) / temp) for i < n; returns their sum. */
static double fill_weights(fkv_sampler *s, int32_t n, double temp) {
    double max = max_logit(s->cand, n), sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        s->weight[i] = exp(((double)s->cand[i].logit - max) / temp);
        sum += s->weight[i];
    }
    return sum;
}

/* The id drawn from cand (indexed by id, penalized and constrained): greedy, or filtered and drawn. */
static int32_t pick(fkv_sampler *s) {
    const fkv_sampler_params *p = &s->params;
    const int32_t n_vocab = s->n_vocab;
    if (!(p->temp > 0.0f)) {
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab; i++)
            if (s->cand[i].logit > s->cand[best].logit) best = i;
        return best;
    }

    float u = uniform01(s->rng);

    /* -inf (masked, or NaN) candidates are never drawn: drop them, keeping id order. */
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (s->cand[i].logit > -INFINITY) s->cand[n++] = s->cand[i];
    if (n == 0) return 0;

    if (p->top_k > 0 && p->top_k < n) {
        select_best(s->cand, n, p->top_k);
        n = p->top_k;
    }
    if (p->top_p < 1.0f) n = top_p_filter(s->cand, s->weight, n, (double)p->top_p);
    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p. The top candidates weigh exactly 1,
         * so capping the threshold at 1 keeps at least them even when min_p > 1. */
        fill_weights(s, n, 1.0);
        double threshold = fmin((double)p->min_p, 1.0);
        int32_t kept = 0;
        for (int32_t i = 0; i < n; i++)
            if (s->weight[i] >= threshold) s->cand[kept++] = s->cand[i];
        n = kept;
    }

    double sum = fill_weights(s, n, (double)p->temp), target = (double)u * sum, cum = 0.0;
    int32_t last_positive = 0;
    for (int32_t i = 0; i < n; i++) {
        if (s->weight[i] <= 0.0) continue;
        cum += s->weight[i];
        last_positive = i;
        if (target < cum) return s->cand[i].id;
    }
    /* Rounding left target at or beyond the running sum: the last drawable candidate. */
    return s->cand[last_positive].id;
}

int32_t fkv_sampler_sample(fkv_sampler *s, const float *logits, const int32_t *history, int n_history) {
    return fkv_sampler_choose(s, logits, history, n_history, NULL, NULL);
}

int32_t fkv_sampler_choose(fkv_sampler *s, const float *logits, const int32_t *history, int n_history,
                           const uint8_t *allowed, fkv_logprobs *lp) {
    const int32_t n_vocab = s->n_vocab;
    for (int32_t i = 0; i < n_vocab; i++) {
        float l = logits[i];
        if (isnan(l)) l = -INFINITY;
        else if (l == INFINITY) l = FLT_MAX;
        s->cand[i] = (sampler_cand){l, i};
    }
    apply_repeat_penalty(s, history, n_history);
    apply_openai_penalties(s);
    double lse = 0.0;
    if (lp) {
        fill_top_logprobs(s, lp, &lse);
        for (int32_t i = 0; i < n_vocab; i++) s->penalized[i] = s->cand[i].logit;
    }
    bool any = !allowed; /* a constraint that allows nothing drawable is ignored, not a dead end */
    for (int32_t i = 0; allowed && !any && i < n_vocab; i++) any = allowed[i] && s->cand[i].logit > -INFINITY;
    for (int32_t i = 0; allowed && any && i < n_vocab; i++)
        if (!allowed[i]) s->cand[i].logit = -INFINITY;
    const int32_t id = pick(s);
    if (s->chosen[id]++ == 0) s->chosen_ids[s->n_chosen++] = id;
    if (lp) lp->logprob = (float)((double)s->penalized[id] - lse);
    return id;
}
