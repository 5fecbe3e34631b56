#include "ops.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn.h"
#include "matmul.h"
#include "quant.h"
#include "traits.h"

/* Below this many multiply-adds a call runs on one thread: waking a team costs more than it saves (a
 * 260K-parameter model decodes 20x faster so). Safe for exactness: results do not depend on threads. */
#define PARALLEL_MIN_WORK (1u << 20)

bool ops_matrix_wants_q8(const ops_matrix *w) { return kern_wants_q8(w->type); }

ops_matrix ops_matrix_rows(const ops_matrix *w, uint32_t r0, uint32_t n) {
    ops_matrix part = *w;
    part.n_out = n;
    part.data = w->data + (size_t)r0 * w->row_bytes;
    return part;
}

/* A product shared by a team: each thread first takes a lead, a run of its own of 3/4 (MATMUL_LEAD_NUM / _DEN) / team
 * of the outputs (thread t the t-th), then the rest is cut into items of whole multiples of 64 outputs, about 16 per
 * rest, taken dynamically, so a thread that something else on its core slows down does less of that part instead
 * of making the other wait at the barrier; 64 outputs at least keep a call's fixed costs (kern_matmul) near 1% of an
 * item's work. The last two items' worth of outputs go in items a quarter that size (16 outputs at least): the items
 * taken last are short, so the thread that finishes first waits less for the other.
 * WHY the leads: with items alone, the two threads take turns along the rows, and each thread's weights come as runs
 * of an item with the other's between them, which the hardware prefetchers stream worse than one long run (2 threads,
 * one row from DRAM, 896-wide Q4_0: 19.3 GB/s in items of 64 rows, 25.5 with 80% in leads). Measured whole, leads of
 * 3/4 against none, interleaved, 2 threads, Xeon with AMX (amx): decode 0.5B Q4_0 95-99 -> 104-107 tok/s, 110M Q8_0
 * 213-214 -> 217-234, 8B unchanged (its items are long already); prefill 512 110M Q8_0 +4%, 0.5B Q4_0 +2-3%. */
#define MATMUL_LEAD_NUM 3
#define MATMUL_LEAD_DEN 4
#define MATMUL_ITEM_MIN 64
#define MATMUL_ITEMS 16
#define MATMUL_TAIL_ITEMS 2
#define MATMUL_TAIL_SPLIT 4

/* A product's split for a team: every thread's lead, then the outputs from team · lead on in items. */
typedef struct {
    uint32_t lead;
    uint32_t big, n_big, small; /* outputs per big item, big items, outputs per tail item */
    uint32_t n_items;
} item_plan;

static item_plan plan_of(const ops_product *product, uint32_t team) {
    const ops_matrix *w = product->w;
    if (!product->rows->n) return (item_plan){0};
    const uint32_t share = w->n_out * MATMUL_LEAD_NUM / MATMUL_LEAD_DEN / team;
    item_plan p = {.lead = share / MATMUL_ITEM_MIN * MATMUL_ITEM_MIN};
    const uint32_t rest = w->n_out - team * p.lead;
    if (!rest) return p;
    const uint32_t per = (rest + MATMUL_ITEMS - 1) / MATMUL_ITEMS;
    p.big = (per + MATMUL_ITEM_MIN - 1) / MATMUL_ITEM_MIN * MATMUL_ITEM_MIN;
    const uint32_t full = rest / p.big;
    p.n_big = full > MATMUL_TAIL_ITEMS ? full - MATMUL_TAIL_ITEMS : 0;
    p.small = p.big / MATMUL_TAIL_SPLIT;
    p.n_items = p.n_big + (rest - p.n_big * p.big + p.small - 1) / p.small;
    return p;
}

static void matmul_range(const ops_product *p, uint32_t o0, uint32_t o1) {
    const ops_matrix *w = p->w;
    const ops_rows *x = p->rows;
    kern_matmul(w->type, w->packed, w->data + (size_t)o0 * w->row_bytes, w->row_bytes, o1 - o0, x->x, x->xq, x->xp,
                x->n, w->n_in, p->y + o0, w->n_out);
}

/* This thread's leads of the products, then its items of the rests: a work-sharing loop over all of them, no
 * barrier. */
static void matmul_items(const ops_product *p, int n_products) {
    const uint32_t team = (uint32_t)omp_get_num_threads(), t = (uint32_t)omp_get_thread_num();
    uint32_t n_items = 0;
    for (int i = 0; i < n_products; i++) {
        const item_plan plan = plan_of(&p[i], team);
        if (plan.lead) matmul_range(&p[i], t * plan.lead, (t + 1) * plan.lead);
        n_items += plan.n_items;
    }
#pragma omp for schedule(dynamic, 1) nowait
    for (uint32_t item = 0; item < n_items; item++) {
        int i = 0;
        uint32_t k = item; /* the item's index within product i's rest */
        item_plan plan = plan_of(&p[0], team);
        while (k >= plan.n_items) k -= plan.n_items, plan = plan_of(&p[++i], team);
        const uint32_t at = k < plan.n_big ? k * plan.big : plan.n_big * plan.big + (k - plan.n_big) * plan.small;
        const uint32_t o0 = team * plan.lead + at, size = k < plan.n_big ? plan.big : plan.small;
        matmul_range(&p[i], o0, o0 + size < p[i].w->n_out ? o0 + size : p[i].w->n_out);
    }
}

void ops_matmuls(const ops_product *p, int n_products, int n_threads) {
    if (omp_in_parallel()) {
        matmul_items(p, n_products);
#pragma omp barrier
        return;
    }
    uint64_t work = 0;
    for (int i = 0; i < n_products; i++) work += (uint64_t)p[i].rows->n * p[i].w->n_out * p[i].w->n_in;
#pragma omp parallel num_threads(n_threads) if (work >= PARALLEL_MIN_WORK)
    matmul_items(p, n_products);
}

void ops_matmul(const ops_matrix *w, const ops_rows *rows, float *y, int n_threads) {
    ops_matmuls(&(ops_product){w, rows, y}, 1, n_threads);
}

/* Rows of a quantization, shared by the team running it (a work-sharing loop). */
static void quantize_items(const float *x, uint32_t n_rows, uint32_t n, block_q8_act *xq) {
#pragma omp for schedule(static)
    for (uint32_t r = 0; r < n_rows; r++) {
        quant_row_q8(x + (size_t)r * n, xq + (size_t)r * (n / QK), n);
    }
}

void ops_quantize_rows(const float *x, uint32_t n_rows, uint32_t n, block_q8_act *xq, int n_threads) {
    if (omp_in_parallel()) {
        quantize_items(x, n_rows, n, xq);
        return;
    }
#pragma omp parallel num_threads(n_threads) if ((uint64_t)n_rows * n >= PARALLEL_MIN_WORK / 16)
    quantize_items(x, n_rows, n, xq);
}

void ops_rmsnorm(const float *x, const float *gain, uint32_t n_rows, uint32_t n, float eps, float *out) {
    for (uint32_t r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *o = out + (size_t)r * n;
        float ss = kern_dot_f32(xr, xr, n);
        float scale = 1.0f / sqrtf(ss / (float)n + eps);
        for (uint32_t i = 0; i < n; i++) o[i] = gain[i] * (scale * xr[i]);
    }
}

/* The transcendental functions of the rotary tables and of softplus, in double from plain IEEE operations in one fixed
 * order, rounded to float once: libm's powf/sinf/cosf/logf pick FMA or SSE2 code by CPU at run time, and those may
 * differ in the last bit, which would make a KV row depend on the machine that wrote it (docs/design.md §5).
 * Accuracy: well below 1e-15 relative before the rounding, so the float results are those of a correctly rounded libm
 * but in rare ties. */

/* e^y for |y| < 700: y = n·ln2 + r, |r| <= ln2/2 (ln2 split so that n·hi is exact), Taylor to r^14. */
static double pinned_exp(double y) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double n = nearbyint(y * 1.44269504088896338700);
    const double r = (y - n * ln2_hi) - n * ln2_lo;
    double p = 1.0;
    for (int i = 14; i >= 1; i--) p = 1.0 + p * r / (double)i;
    return ldexp(p, (int)n);
}

/* ln x for x > 0 finite: x = m·2^k, m in [sqrt(1/2), sqrt(2)); ln m = 2·atanh(s), s = (m-1)/(m+1), |s| < 0.172,
 * by its series to s^25. */
static double pinned_log(double x) {
    int k;
    double m = frexp(x, &k); /* m in [0.5, 1) */
    if (m < 0.70710678118654752440) m *= 2.0, k--;
    const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double t = 0.0;
    for (int i = 25; i >= 3; i -= 2) t = (t + 1.0 / (double)i) * s2;
    return (double)k * 6.93147180559945309417e-01 + 2.0 * s * (1.0 + t);
}

/* sin and cos of x (|x| < 2^20 · pi/2): x = k·pi/2 + r by a three-part pi/2 (each part's product with k exact),
 * |r| <= pi/4, Taylor to r^19 / r^18, then the quadrant. */
static void pinned_sincos(double x, double *sin_x, double *cos_x) {
    /* Far outside that (only a file's absurd rope hyperparameters or divisors lead here: the loader refuses the
     * non-finite ones, but a finite base, scale or divisor can still overflow the float angle), the quadrant below
     * would be an undefined conversion: such a pair is not rotated instead. */
    if (!(fabs(x) < 0x1p52)) {
        *sin_x = 0.0, *cos_x = 1.0;
        return;
    }
    const double pio2_1 = 1.57079632673412561417e+00, pio2_2 = 6.07710050630396597660e-11,
                 pio2_3 = 2.02226624871116645580e-21;
    const double k = nearbyint(x * 6.36619772367581382433e-01);
    const double r = ((x - k * pio2_1) - k * pio2_2) - k * pio2_3, r2 = r * r;
    /* 1 / (i (i - 1)) for i = 2..19, folded by the compiler (correctly rounded) */
#define INV(i) (1.0 / ((double)(i) * (double)((i) - 1)))
    static const double inv[20] = {0, 0, INV(2), INV(3), INV(4), INV(5), INV(6), INV(7), INV(8), INV(9), INV(10),
                                   INV(11), INV(12), INV(13), INV(14), INV(15), INV(16), INV(17), INV(18), INV(19)};
#undef INV
    double s = 1.0, c = 1.0;
    for (int i = 19; i >= 3; i -= 2) s = 1.0 - s * r2 * inv[i];
    for (int i = 18; i >= 2; i -= 2) c = 1.0 - c * r2 * inv[i];
    s *= r;
    const long q = (long)k & 3;
    *sin_x = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
    *cos_x = q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
}

/* YaRN's table (ops.h): the angle and magnitude in double, one rounding per element. */
static void yarn_table(const uint32_t *pos, uint32_t n_rows, uint32_t n_rot, const ops_rope_params *rp,
                       const float *freq_divisors, double log_base, float *cs) {
    const double two_pi = 6.28318530717958647693, scale = (double)rp->scale, ext = (double)rp->ext_factor;
    /* the correction dims c(β), clamped as ggml clamps them */
    const double c_fast =
        (double)n_rot * pinned_log((double)rp->n_ctx_orig / (two_pi * (double)rp->beta_fast)) / (2.0 * log_base);
    const double c_slow =
        (double)n_rot * pinned_log((double)rp->n_ctx_orig / (two_pi * (double)rp->beta_slow)) / (2.0 * log_base);
    const double lo = 0.0 > floor(c_fast) ? 0.0 : floor(c_fast);
    const double hi = (double)n_rot - 1.0 < ceil(c_slow) ? (double)n_rot - 1.0 : ceil(c_slow);
    const double a = (double)rp->attn_factor * (1.0 + 0.1 * pinned_log(scale));
    double freq[OPS_ATTN_MAX_HEAD_DIM / 2], mix[OPS_ATTN_MAX_HEAD_DIM / 2]; /* n_rot <= head_dim, bounded at load */
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        freq[i] = pinned_exp(-(double)(2 * i) / (double)n_rot * log_base);
        if (freq_divisors) freq[i] /= (double)freq_divisors[i];
        const double y = ((double)i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
        mix[i] = (1.0 - (y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y)) * ext;
    }
    for (uint32_t r = 0; r < n_rows; r++) {
        for (uint32_t i = 0; i < n_rot / 2; i++) {
            const double t = (double)pos[r] * freq[i];
            double sin_t, cos_t;
            pinned_sincos(t / scale * (1.0 - mix[i]) + t * mix[i], &sin_t, &cos_t);
            cs[(size_t)r * n_rot + 2 * i] = (float)(a * cos_t);
            cs[(size_t)r * n_rot + 2 * i + 1] = (float)(a * sin_t);
        }
    }
}

void ops_rope_table(const uint32_t *pos, uint32_t n_rows, uint32_t n_rot, const ops_rope_params *rp,
                    const float *freq_divisors, float *cs) {
    const double log_base = pinned_log((double)rp->base);
    if (rp->ext_factor != 0.0f) {
        yarn_table(pos, n_rows, n_rot, rp, freq_divisors, log_base, cs);
        return;
    }
    float freq[OPS_ATTN_MAX_HEAD_DIM / 2]; /* n_rot <= head_dim, bounded at load */
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        freq[i] = 1.0f / (float)pinned_exp((double)((float)(2 * i) / (float)n_rot) * log_base);
        if (freq_divisors) freq[i] /= freq_divisors[i];
    }
    for (uint32_t r = 0; r < n_rows; r++) {
        float p = (float)pos[r] / rp->scale;
        for (uint32_t i = 0; i < n_rot / 2; i++) {
            double sin_t, cos_t;
            pinned_sincos((double)(p * freq[i]), &sin_t, &cos_t);
            cs[(size_t)r * n_rot + 2 * i] = (float)cos_t * rp->attn_factor;
            cs[(size_t)r * n_rot + 2 * i + 1] = (float)sin_t * rp->attn_factor;
        }
    }
}

void ops_rope(float *x, uint32_t n_rows, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, bool halves,
              const float *cs) {
    const uint32_t half = n_rot / 2;
    for (uint32_t r = 0; r < n_rows; r++) {
        const float *c = cs + (size_t)r * n_rot;
        for (uint32_t h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)r * n_heads + h) * head_dim;
            for (uint32_t i = 0; i < half; i++) {
                /* pair i: (2i, 2i+1), or (i, i + n_rot/2) in the "neox" order */
                uint32_t a = halves ? i : 2 * i, b = halves ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b], cos_t = c[2 * i], sin_t = c[2 * i + 1];
                v[a] = x0 * cos_t - x1 * sin_t;
                v[b] = x0 * sin_t + x1 * cos_t;
            }
        }
    }
}

/* One query head against keys 0..p: online softmax over tiles aligned to absolute positions. acc (the
 * output row, head_dim floats) accumulates Σ e_j v_j, rescaled when the running max grows. */
size_t ops_kv_offset(const ops_kv_view *view, uint32_t p) {
    if (!view->blocks) return (size_t)p * view->row_bytes;
    return view->blocks[p / view->block_rows] * view->block_stride + (size_t)(p % view->block_rows) * view->row_bytes;
}

/* Query rows attended together: consecutive rows of one sequence share every key tile below their
 * positions, so each tile is read once for all of them. */
#define ATTN_BLOCK_ROWS 64

/* The first key a query at position p sees: 0, or p - window + 1 in a sliding-window layer. */
static uint32_t window_start(uint32_t p, uint32_t window) { return window && p >= window ? p + 1 - window : 0; }

/* Keys of the tile at t0 that a query at position p sees, counted from the tile's start. */
static uint32_t keys_in_tile(uint32_t p, uint32_t t0) {
    return p + 1 - t0 < OPS_ATTN_TILE ? p + 1 - t0 : OPS_ATTN_TILE;
}

/* How many queries from u on (positions ascending, u < m) see the same keys of the tile at t0 as query u. */
static uint32_t same_keys(const uint32_t *qpos, uint32_t u, uint32_t m, uint32_t t0) {
    uint32_t n_q = 1;
    while (u + n_q < m && keys_in_tile(qpos[u + n_q], t0) == keys_in_tile(qpos[u], t0)) n_q++;
    return n_q;
}

/* One KV head of a sequence's K/V, as attention's walks read it. */
typedef struct {
    const ops_kv_view *kv;
    size_t k_head, v_head;    /* the head's bytes: where its section starts in a K tile, its elements in a V row */
    size_t k_bytes, v_bytes;  /* how many: of its sections in a K tile (and a quantized V tile), of a V row */
    bool quantized;
} head_view;

static head_view view_head(const ops_kv_view *kv, size_t head_off, uint32_t head_dim) {
    head_view h = {.kv = kv, .quantized = kv->type == GGML_TYPE_Q8_0 || kv->type == GGML_TYPE_Q4_0};
    h.v_head = kern_row_bytes(kv->type, head_off);
    h.k_head = h.v_head * OPS_ATTN_TILE;
    h.v_bytes = kern_row_bytes(kv->type, head_dim);
    h.k_bytes = h.v_bytes * OPS_ATTN_TILE;
    return h;
}

/* Fetch the tile at t0 while the one before it runs: K's panel, V's sections or rows. */
static void prefetch_tile(const head_view *h, uint32_t t0) {
    const size_t at = ops_kv_offset(h->kv, t0);
    for (size_t b = 0; b < h->k_bytes; b += 64) {
        __builtin_prefetch(h->kv->k + at + h->k_head + b);
        if (h->quantized) __builtin_prefetch(h->kv->v + at + h->k_head + b);
    }
    for (uint32_t j = 0; !h->quantized && j < OPS_ATTN_TILE; j++) { /* every line of the row's head */
        const uintptr_t row = (uintptr_t)(h->kv->v + at + h->v_head + j * h->kv->row_bytes);
        for (uintptr_t line = row & ~(uintptr_t)63; line < row + h->v_bytes; line += 64)
            __builtin_prefetch((const void *)line);
    }
}

/* The first tile of the walk: the one holding the first key the first query sees. */
static uint32_t first_tile(const uint32_t *qpos, uint32_t window) {
    return window_start(qpos[0], window) / OPS_ATTN_TILE * OPS_ATTN_TILE;
}

/* The tiles for queries attended apart: every query that reaches a tile scores its keys in one call, and queries that
 * see the same keys of it accumulate them in one call (attn.h's query blocks); each query's softmax step, in the order
 * attn.h states for kern_attend_lanes_q, is taken here. */
static void walk_apart(const float *q, size_t q_stride, const uint32_t *qpos, uint32_t m, const head_view *h,
                       uint32_t head_dim, float scale, uint32_t window, float *running_max, float *denom, float *acc,
                       size_t out_stride) {
    float scores[ATTN_BLOCK_ROWS * OPS_ATTN_TILE], correction[ATTN_BLOCK_ROWS], weight_sum[ATTN_BLOCK_ROWS];
    uint32_t keys[ATTN_BLOCK_ROWS];
    bool grew[ATTN_BLOCK_ROWS];
    const ops_kv_view *kv = h->kv;
    block_q8_act qq[ATTN_BLOCK_ROWS * OPS_ATTN_MAX_HEAD_DIM / QK]; /* quantized: query u's at u · head_dim / QK */
    const size_t head_blocks = head_dim / QK, unit = h->quantized ? QK : 1; /* a row's elements come in units */
    for (uint32_t u = 0; u < m; u++) {
        running_max[u] = -INFINITY;
        denom[u] = 0.0f;
        memset(acc + u * out_stride, 0, sizeof(float) * head_dim);
        if (h->quantized) quant_row_q8(q + u * q_stride, qq + u * head_blocks, head_dim);
    }
    const size_t stride = kv->row_bytes / kern_row_bytes(kv->type, unit) * unit; /* f16/f32 V's, in elements */
    const uint32_t last = qpos[m - 1];
    for (uint32_t t0 = first_tile(qpos, window); t0 <= last; t0 += OPS_ATTN_TILE) {
        const size_t off = ops_kv_offset(kv, t0); /* a tile never straddles blocks */
        if (t0 + OPS_ATTN_TILE <= last) prefetch_tile(h, t0 + OPS_ATTN_TILE);
        /* queries [first, end) reach this tile and their windows do not start past it; each scores all its keys,
         * using those it sees */
        uint32_t first = 0, end = m;
        while (qpos[first] < t0) first++;
        while (end > first && window_start(qpos[end - 1], window) >= t0 + OPS_ATTN_TILE) end--;
        if (first == end) continue;
        const uint8_t *kt = kv->k + off + h->k_head;
        float *tile_scores = scores + first * OPS_ATTN_TILE;
        if (h->quantized)
            kern_score_tile_q(kv->type, kt, qq + first * head_blocks, head_blocks, end - first, head_dim, tile_scores,
                              OPS_ATTN_TILE);
        else if (kv->type == GGML_TYPE_F16)
            kern_score_tile_f16((const uint16_t *)kt, q + first * q_stride, q_stride, end - first, head_dim,
                                tile_scores, OPS_ATTN_TILE);
        else
            kern_score_tile_f32((const float *)kt, q + first * q_stride, q_stride, end - first, head_dim, tile_scores,
                                OPS_ATTN_TILE);
        for (uint32_t u = first; window && u < end; u++) /* keys below the window: weight e^-inf = 0 */
            for (uint32_t j = 0; t0 + j < window_start(qpos[u], window); j++) scores[u * OPS_ATTN_TILE + j] = -INFINITY;
        /* each query's softmax step, its exponentials (corrections, then weights) taken with the others' */
        for (uint32_t u = first; u < end; u++) {
            keys[u] = keys_in_tile(qpos[u], t0);
            const float tile_max = kern_scale_max(scores + u * OPS_ATTN_TILE, keys[u], scale);
            grew[u] = tile_max > running_max[u];
            correction[u] = grew[u] ? running_max[u] - tile_max : 0.0f; /* -inf on the first tile: e^-inf = 0 */
            if (grew[u]) running_max[u] = tile_max;
        }
        kern_exp(correction + first, end - first);
        for (uint32_t u = first; u < end; u++) {
            if (!grew[u]) continue;
            for (uint32_t d = 0; d < head_dim; d++) acc[u * out_stride + d] *= correction[u];
            denom[u] *= correction[u];
        }
        kern_exp_sum_rows(scores + first * OPS_ATTN_TILE, OPS_ATTN_TILE, keys + first, running_max + first, end - first,
                          weight_sum + first);
        for (uint32_t u = first; u < end; u++) denom[u] += weight_sum[u];
        const uint8_t *vt = kv->v + off + (h->quantized ? h->k_head : h->v_head);
        for (uint32_t u = first, n_q; u < end; u += n_q) {
            n_q = same_keys(qpos, u, end, t0);
            float *y = acc + u * out_stride;
            const float *w = scores + u * OPS_ATTN_TILE;
            if (h->quantized)
                kern_weigh_tile_q(kv->type, y, out_stride, w, OPS_ATTN_TILE, n_q, vt, keys[u], head_dim);
            else if (kv->type == GGML_TYPE_F16)
                kern_axpy_rows_f16(y, out_stride, w, OPS_ATTN_TILE, n_q, (const uint16_t *)vt, stride, keys[u],
                                   head_dim);
            else
                kern_axpy_rows_f32(y, out_stride, w, OPS_ATTN_TILE, n_q, (const float *)vt, stride, keys[u], head_dim);
        }
    }
}

/* Quantized K/V: blocks of at least this many queries go in lanes (kern_attend_lanes_q) where the active variant has
 * them; fewer would leave too many of the lanes idle (decode's query heads of one KV head: at most 8 in the models
 * here). */
#define LANES_MIN_ROWS 12

/* The tiles for queries in lanes: KERN_LANES consecutive queries a lane block, each block's state element-major
 * (attn.h); every tile is read once for all the blocks, and the blocks that reach it take its step in one call. */
static void walk_lanes(const float *q, size_t q_stride, const uint32_t *qpos, uint32_t m, const head_view *h,
                       uint32_t head_dim, float scale, uint32_t window, float *running_max, float *denom, float *acc,
                       size_t out_stride) {
    enum { BLOCKS = ATTN_BLOCK_ROWS / KERN_LANES, HEAD_BLOCKS = OPS_ATTN_MAX_HEAD_DIM / QK };
    _Alignas(64) uint8_t qu[BLOCKS][HEAD_BLOCKS * QK * KERN_LANES];
    _Alignas(64) float dq[BLOCKS][HEAD_BLOCKS * KERN_LANES], y[BLOCKS][OPS_ATTN_MAX_HEAD_DIM * KERN_LANES];
    _Alignas(64) kern_lane_block lanes[BLOCKS];
    const ops_kv_view *kv = h->kv;
    const size_t head_blocks = head_dim / QK;
    const uint32_t n_blocks = (m + KERN_LANES - 1) / KERN_LANES;
    for (uint32_t g = 0; g < n_blocks; g++) {
        block_q8_act qq[KERN_LANES * HEAD_BLOCKS];
        const uint32_t n_q = m - g * KERN_LANES < KERN_LANES ? m - g * KERN_LANES : KERN_LANES;
        for (uint32_t r = 0; r < n_q; r++)
            quant_row_q8(q + (g * KERN_LANES + r) * q_stride, qq + r * head_blocks, head_dim);
        kern_lanes_queries(qq, head_blocks, n_q, head_dim, qu[g], dq[g]);
        lanes[g] = (kern_lane_block){.qu = qu[g], .dq = dq[g], .y = y[g]};
        for (uint32_t r = 0; r < KERN_LANES; r++) lanes[g].m[r] = -INFINITY;
        memset(y[g], 0, sizeof(float) * head_dim * KERN_LANES);
    }
    const uint32_t last = qpos[m - 1];
    for (uint32_t t0 = first_tile(qpos, window); t0 <= last; t0 += OPS_ATTN_TILE) {
        const size_t off = ops_kv_offset(kv, t0);
        if (t0 + OPS_ATTN_TILE <= last) prefetch_tile(h, t0 + OPS_ATTN_TILE);
        uint32_t first = n_blocks, end = 0; /* the blocks with a lane that reaches the tile inside its window */
        for (uint32_t g = 0; g < n_blocks; g++)
            for (uint32_t r = 0, u = g * KERN_LANES; r < KERN_LANES; r++, u++) {
                const uint32_t start = u < m ? window_start(qpos[u], window) : 0;
                const bool sees = u < m && qpos[u] >= t0 && start < t0 + OPS_ATTN_TILE;
                lanes[g].keys[r] = sees ? keys_in_tile(qpos[u], t0) : 0;
                lanes[g].below[r] = sees && start > t0 ? start - t0 : 0;
                if (sees) first = g < first ? g : first, end = g + 1;
            }
        if (first < end)
            kern_attend_lanes_q(kv->type, kv->k + off + h->k_head, kv->v + off + h->k_head, head_dim, scale,
                                lanes + first, end - first);
    }
    for (uint32_t u = 0; u < m; u++) {
        const uint32_t g = u / KERN_LANES, r = u % KERN_LANES;
        running_max[u] = lanes[g].m[r];
        denom[u] = lanes[g].d[r];
        for (uint32_t i = 0; i < head_dim; i++) acc[u * out_stride + i] = y[g][i * KERN_LANES + r];
    }
}

/* A block of m queries of one sequence against one KV head, positions qpos[] ascending: the consecutive rows
 * of a query head (prefill), or the query heads of one row that share the KV head (decode). Query u's vector
 * is at q + u·q_stride, its output (head_dim floats) at acc + u·out_stride. Online softmax over tiles aligned
 * to absolute positions. Each query goes through exactly the steps it would alone — its tiles, its scores in
 * the same order, its max, corrections and accumulation — so the block never changes a bit; only the reading
 * of K and V is shared, by one of two walks over the tiles: queries apart or in lanes. Query u's sink, if sink is not
 * NULL, is sink[u·sink_stride] (ops.h's last step). */
static void attend_block(const float *q, size_t q_stride, const uint32_t *qpos, uint32_t m, const ops_kv_view *kv,
                         size_t head_off, uint32_t head_dim, float scale, uint32_t window, const float *sink,
                         size_t sink_stride, float *acc, size_t out_stride) {
    float running_max[ATTN_BLOCK_ROWS], denom[ATTN_BLOCK_ROWS];
    float correction[ATTN_BLOCK_ROWS], weight_sum[ATTN_BLOCK_ROWS];
    bool grew[ATTN_BLOCK_ROWS];
    const head_view h = view_head(kv, head_off, head_dim);
    if (h.quantized && m >= LANES_MIN_ROWS && kern_attend_lanes_available())
        walk_lanes(q, q_stride, qpos, m, &h, head_dim, scale, window, running_max, denom, acc, out_stride);
    else
        walk_apart(q, q_stride, qpos, m, &h, head_dim, scale, window, running_max, denom, acc, out_stride);
    if (sink) { /* a key of score σ and value 0 after every query's last tile, in a tile's steps */
        for (uint32_t u = 0; u < m; u++) {
            const float s = sink[u * sink_stride];
            grew[u] = s > running_max[u];
            correction[u] = grew[u] ? running_max[u] - s : 0.0f;
            if (grew[u]) running_max[u] = s;
            weight_sum[u] = s - running_max[u];
        }
        kern_exp(correction, m);
        kern_exp(weight_sum, m);
        for (uint32_t u = 0; u < m; u++) {
            if (grew[u]) {
                for (uint32_t d = 0; d < head_dim; d++) acc[u * out_stride + d] *= correction[u];
                denom[u] *= correction[u];
            }
            denom[u] += weight_sum[u];
        }
    }
    for (uint32_t u = 0; u < m; u++) {
        float inv = 1.0f / denom[u], *a = acc + u * out_stride;
        for (uint32_t d = 0; d < head_dim; d++) a[d] *= inv;
    }
}


/* Rows r and r+1 can share key tiles: the same sequence's K/V, consecutive positions. */
static bool same_run(const ops_kv_view *a, const ops_kv_view *b, uint32_t pa, uint32_t pb) {
    return a->k == b->k && a->v == b->v && a->blocks == b->blocks && pb == pa + 1;
}

static void attention_items(const float *q, uint32_t n_rows, const uint32_t *pos, const ops_kv_view *views,
                            uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim, float scale, uint32_t window,
                            const float *sinks, float *out) {
    const uint32_t group = n_heads / n_kv_heads, q_dim = n_heads * head_dim;
    /* When no two rows share key tiles (decode steps), the query heads of a row that share a KV head form
     * the block instead: an item is then (a chunk, a KV head's heads), else (a chunk, a head). Inside the
     * chunk, each run of rows that can share key tiles is attended together. */
    bool by_kv_head = group > 1 && group <= ATTN_BLOCK_ROWS;
    for (uint32_t r = 1; by_kv_head && r < n_rows; r++)
        by_kv_head = !same_run(&views[r - 1], &views[r], pos[r - 1], pos[r]);
    /* fewer KV heads than threads (Gemma 3 1B: one): a KV head's query heads in as many parts as the team has
     * threads, each reading the head's K and V, so none waits for the other (each head's steps are its own) */
    const uint32_t team = (uint32_t)omp_get_num_threads(), want = by_kv_head && n_kv_heads < team ? team : 1;
    const uint32_t heads = by_kv_head ? (group + want - 1) / want : 1; /* a part's query heads, at most */
    const uint32_t parts = (group + heads - 1) / heads, units = by_kv_head ? n_kv_heads * parts : n_heads;
    const uint32_t n_chunks = (n_rows + ATTN_BLOCK_ROWS - 1) / ATTN_BLOCK_ROWS, n_items = n_chunks * units;
#pragma omp for schedule(dynamic, 1)
    for (uint32_t item = 0; item < n_items; item++) {
        const uint32_t c = item / units, u = item % units, skip = u % parts * heads; /* the part's place in its group */
        const uint32_t h = by_kv_head ? u / parts * group + skip : u;                 /* its first query head */
        const uint32_t n_h = !by_kv_head ? 1 : group - skip < heads ? group - skip : heads;
        const uint32_t end = (c + 1) * ATTN_BLOCK_ROWS < n_rows ? (c + 1) * ATTN_BLOCK_ROWS : n_rows;
        const size_t kv_off = (size_t)(h / group) * head_dim;
        for (uint32_t r = c * ATTN_BLOCK_ROWS, m; r < end; r += m) {
            for (m = 1; r + m < end && same_run(&views[r + m - 1], &views[r + m], pos[r + m - 1], pos[r + m]); m++) {}
            const size_t at = (size_t)r * q_dim + (size_t)h * head_dim;
            if (by_kv_head) {
                uint32_t qpos[ATTN_BLOCK_ROWS];
                for (uint32_t k = 0; k < n_h; k++) qpos[k] = pos[r];
                attend_block(q + at, head_dim, qpos, n_h, &views[r], kv_off, head_dim, scale, window,
                             sinks ? sinks + h : NULL, 1, out + at, head_dim);
            } else {
                attend_block(q + at, q_dim, pos + r, m, &views[r], kv_off, head_dim, scale, window,
                             sinks ? sinks + h : NULL, 0, out + at, q_dim);
            }
        }
    }
}

void ops_attention(const float *q, uint32_t n_rows, const uint32_t *pos, const ops_kv_view *views, uint32_t n_heads,
                   uint32_t n_kv_heads, uint32_t head_dim, float scale, uint32_t window, const float *sinks, float *out,
                   int n_threads) {
    if (omp_in_parallel()) {
        attention_items(q, n_rows, pos, views, n_heads, n_kv_heads, head_dim, scale, window, sinks, out);
        return;
    }
    uint64_t keys = 0;
    for (uint32_t r = 0; r < n_rows; r++) keys += pos[r] + 1 - window_start(pos[r], window);
    const bool wide = keys * n_heads * head_dim * 2 >= PARALLEL_MIN_WORK;
#pragma omp parallel num_threads(n_threads) if (wide)
    attention_items(q, n_rows, pos, views, n_heads, n_kv_heads, head_dim, scale, window, sinks, out);
}

/* p[i] = softmax of z[0..n) (ops_route's definition), in place. */
static void route_softmax(float *z, uint32_t n) {
    float m = z[0];
    for (uint32_t i = 1; i < n; i++) m = z[i] > m ? z[i] : m;
    for (uint32_t i = 0; i < n; i++) z[i] -= m;
    kern_exp(z, n);
    double s = 0.0;
    for (uint32_t i = 0; i < n; i++) s += (double)z[i];
    const float inv = (float)(1.0 / s);
    for (uint32_t i = 0; i < n; i++) z[i] *= inv;
}

void ops_route(float *z, uint32_t n_expert, const float *select_b, ops_gating gating, uint32_t k, bool norm,
               float scale, uint32_t *sel, float *w) {
    if (gating == OPS_GATE_SOFTMAX) {
        route_softmax(z, n_expert);
    } else if (gating == OPS_GATE_SIGMOID) {
        ops_sigmoid(z, n_expert);
    }
    for (uint32_t s = 0; s < k; s++) {
        uint32_t best = UINT32_MAX;
        float best_v = 0.0f;
        for (uint32_t e = 0; e < n_expert; e++) {
            bool taken = false;
            for (uint32_t t = 0; t < s && !taken; t++) taken = sel[t] == e;
            if (taken) continue;
            const float v = select_b ? z[e] + select_b[e] : z[e];
            if (best == UINT32_MAX || v > best_v || (best_v != best_v && v == v)) best = e, best_v = v;
        }
        sel[s] = best;
        w[s] = z[best];
    }
    if (gating == OPS_GATE_SOFTMAX_WEIGHT) route_softmax(w, k);
    if (norm) {
        float t = 0.0f;
        for (uint32_t s = 0; s < k; s++) t += w[s];
        t = t > 6.103515625e-5f ? t : 6.103515625e-5f;
        for (uint32_t s = 0; s < k; s++) w[s] /= t;
    }
    if (scale != 0.0f && scale != 1.0f)
        for (uint32_t s = 0; s < k; s++) w[s] *= scale;
}

void ops_weighted_sum(float *out, const float *const *ys, const float *w, uint32_t k, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = w[0] * ys[0][i];
    for (uint32_t s = 1; s < k; s++)
        for (size_t i = 0; i < n; i++) out[i] += w[s] * ys[s][i];
}

/* e[i] = e^-x[i] for i < m: a chunk at a time, through kern_exp's vector path (silu's, swiglu's and sigmoid's). */
enum { EXP_CHUNK = 256 };
static void exp_neg(const float *x, size_t m, float *e) {
    for (size_t i = 0; i < m; i++) e[i] = -x[i];
    kern_exp(e, m);
}

void ops_swiglu(float *gate, const float *up, size_t n) {
    float e[EXP_CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += EXP_CHUNK) {
        const size_t m = n - i0 < EXP_CHUNK ? n - i0 : EXP_CHUNK;
        exp_neg(gate + i0, m, e);
        for (size_t i = 0; i < m; i++) gate[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
    }
}

void ops_swiglu_oai(float *gate, const float *up, size_t n) {
    enum { CHUNK = 256 };
    const float alpha = 1.702f, limit = 7.0f;
    float e[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        const size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        for (size_t i = 0; i < m; i++) {
            const float g = limit < gate[i0 + i] ? limit : gate[i0 + i]; /* std::min's operands: a NaN stays */
            gate[i0 + i] = g;
            e[i] = alpha * -g;
        }
        kern_exp(e, m);
        for (size_t i = 0; i < m; i++) {
            const float u = up[i0 + i] < -limit ? -limit : up[i0 + i] > limit ? limit : up[i0 + i];
            gate[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * (u + 1.0f);
        }
    }
}

void ops_geglu(float *gate, const float *up, size_t n) {
    enum { CHUNK = 256 };
    const float sqrt_2_over_pi = 0.79788456080286535588f, coef = 0.044715f;
    float e[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        const size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        for (size_t i = 0; i < m; i++) {
            const float g = gate[i0 + i];
            e[i] = -2.0f * (sqrt_2_over_pi * g * (1.0f + coef * g * g));
        }
        kern_exp(e, m);
        for (size_t i = 0; i < m; i++) gate[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
    }
}

void ops_add(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void ops_mul(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] *= x[i];
}

void ops_sigmoid(float *x, size_t n) {
    float e[EXP_CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += EXP_CHUNK) {
        const size_t m = n - i0 < EXP_CHUNK ? n - i0 : EXP_CHUNK;
        exp_neg(x + i0, m, e);
        for (size_t i = 0; i < m; i++) x[i0 + i] = 1.0f / (1.0f + e[i]);
    }
}

void ops_silu(float *x, size_t n) {
    float e[EXP_CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += EXP_CHUNK) {
        const size_t m = n - i0 < EXP_CHUNK ? n - i0 : EXP_CHUNK;
        exp_neg(x + i0, m, e);
        for (size_t i = 0; i < m; i++) x[i0 + i] = x[i0 + i] / (1.0f + e[i]);
    }
}

void ops_softplus(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] <= 20.0f)) continue; /* above the threshold, or a NaN: itself */
        x[i] = x[i] < -700.0f ? 0.0f : (float)pinned_log(1.0 + pinned_exp((double)x[i]));
    }
}

void ops_l2norm(float *x, uint32_t n_rows, uint32_t n, float eps) {
    for (uint32_t r = 0; r < n_rows; r++) {
        float *xr = x + (size_t)r * n;
        const float norm = sqrtf(kern_dot_f32(xr, xr, n));
        const float scale = 1.0f / (norm > eps ? norm : eps);
        for (uint32_t i = 0; i < n; i++) xr[i] *= scale;
    }
}

void ops_conv_step(const float *win_in, float *win_out, const float *w, uint32_t k, float *x, uint32_t c0,
                   uint32_t c1) {
    const uint32_t kw = k - 1; /* the window's length */
    for (uint32_t c = c0; c < c1; c++) {
        const float *in = win_in ? win_in + (size_t)c * kw : NULL, *wc = w + (size_t)c * k;
        float *out = win_out + (size_t)c * kw;
        float y = 0.0f;
        for (uint32_t i = 0; i < kw; i++) y += (in ? in[i] : 0.0f) * wc[i];
        y += x[c] * wc[kw];
        for (uint32_t i = 0; i + 1 < kw; i++) out[i] = in ? in[i + 1] : 0.0f;
        if (kw) out[kw - 1] = x[c];
        x[c] = y;
    }
}

void ops_delta_step(const float *s_in, float *s_out, const float *q, const float *k, const float *v, float g,
                    float beta, uint32_t d, float scale, float *o) {
    float e = g;
    kern_exp(&e, 1);
    for (uint32_t j = 0; j < d; j++) {
        float *row = s_out + (size_t)j * d;
        if (s_in)
            for (uint32_t i = 0; i < d; i++) row[i] = s_in[(size_t)j * d + i] * e;
        else
            memset(row, 0, sizeof(float) * d);
        const float delta = (v[j] - kern_dot_f32(row, k, d)) * beta;
        for (uint32_t i = 0; i < d; i++) row[i] = row[i] + k[i] * delta;
        o[j] = kern_dot_f32(row, q, d) * scale;
    }
}
