/* grammar_dfa.c — frames, states and transitions of the lazily built DFA; compaction; canonical states (contract in
 * grammar_dfa.h). */
#include "constrain/grammar_dfa.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "base/err.h"
#include "constrain/grow.h"

/* Capacities of one state's caches (the header's "about 20 MiB"). */
#define GS_MAX_FRAMES (1u << 18)
#define GS_MAX_STATES (1u << 15)
#define GS_MAX_IDS (1u << 19)
#define GS_MAX_TRANS (1u << 20)
#define GS_MAX_WORK (1u << 20)

static uint32_t mix32(uint32_t a, uint32_t b) {
    uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca77u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h;
}

static void next_epoch(gcache *c) {
    if (++c->epoch == 0) {
        memset(c->f_mark, 0, c->n_frames * sizeof *c->f_mark);
        c->epoch = 1;
    }
}

static void frame_table_insert(uint32_t *t, size_t cap, const gcache *c, uint32_t f) {
    size_t h = mix32(c->f_pos[f], c->f_parent[f]) & (cap - 1);
    while (t[h]) h = (h + 1) & (cap - 1);
    t[h] = f;
}

static int frame_table_rebuild(gcache *c, size_t cap) {
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (uint32_t f = 1; f < c->n_frames; f++) frame_table_insert(t, cap, c, f);
    free(c->f_table);
    c->f_table = t;
    c->f_table_cap = cap;
    return 0;
}

/* The frame of position pos above frame parent: found or made. GS_FULL, or GS_CUT past the depth bound. */
static uint32_t frame_push(gcache *c, uint32_t pos, uint32_t parent) {
    uint32_t depth = c->f_depth[parent] + 1u;
    if (depth > GRAMMAR_MAX_DEPTH) {
        c->stats.overflows++;
        return GS_CUT;
    }
    size_t h = mix32(pos, parent) & (c->f_table_cap - 1);
    for (; c->f_table[h]; h = (h + 1) & (c->f_table_cap - 1)) {
        uint32_t f = c->f_table[h];
        if (c->f_pos[f] == pos && c->f_parent[f] == parent) return f;
    }
    if (c->n_frames == c->cap_frames) {
        size_t cap = c->cap_frames, cap2 = cap, cap3 = cap, cap4 = cap;
        if (grow(&c->f_pos, &cap, c->n_frames + 1, sizeof *c->f_pos, GS_MAX_FRAMES) ||
            grow(&c->f_parent, &cap2, c->n_frames + 1, sizeof *c->f_parent, GS_MAX_FRAMES) ||
            grow(&c->f_mark, &cap3, c->n_frames + 1, sizeof *c->f_mark, GS_MAX_FRAMES) ||
            grow(&c->f_depth, &cap4, c->n_frames + 1, sizeof *c->f_depth, GS_MAX_FRAMES))
            return GS_FULL;
        c->cap_frames = cap;
    }
    uint32_t f = (uint32_t)c->n_frames++;
    c->f_pos[f] = pos;
    c->f_parent[f] = parent;
    c->f_mark[f] = 0;
    c->f_depth[f] = (uint16_t)depth;
    if (c->n_frames * 2 > c->f_table_cap) {
        if (frame_table_rebuild(c, c->f_table_cap * 2)) {
            c->n_frames--;
            return GS_FULL;
        }
    } else {
        c->f_table[h] = f;
    }
    return f;
}

static bool state_equal(const gcache *c, uint32_t k, const uint32_t *ids, size_t n) {
    return c->s_off[k + 1] - c->s_off[k] == n && memcmp(c->ids + c->s_off[k], ids, n * sizeof *ids) == 0;
}

static int state_table_rebuild(gcache *c, size_t cap) {
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (uint32_t k = 2; k < c->n_states; k++) {
        size_t h = c->info[k].hash & (cap - 1);
        while (t[h]) h = (h + 1) & (cap - 1);
        t[h] = k;
    }
    free(c->s_table);
    c->s_table = t;
    c->s_table_cap = cap;
    return 0;
}

/* The state of the sorted stacks ids[0..n): found or made (its transitions not computed). Or GS_FULL. */
static uint32_t state_intern(gcache *c, const uint32_t *ids, size_t n) {
    if (n == 0) return GS_DEAD;
    uint32_t hash = (uint32_t)XXH3_64bits(ids, n * sizeof *ids);
    size_t h = hash & (c->s_table_cap - 1);
    for (; c->s_table[h]; h = (h + 1) & (c->s_table_cap - 1)) {
        uint32_t k = c->s_table[h];
        if (c->info[k].hash == hash && state_equal(c, k, ids, n)) return k;
    }
    if (c->n_states == c->max_states) return GS_FULL;
    size_t n_cls = c->g->n_cls;
    if (c->n_states + 1 >= c->cap_states) {
        size_t cap = c->cap_states, cap2 = cap, need = c->n_states + 2;
        if (grow(&c->s_off, &cap, need, sizeof *c->s_off, c->max_states + 1) ||
            grow(&c->info, &cap2, need, sizeof *c->info, c->max_states + 1))
            return GS_FULL;
        c->cap_states = cap;
    }
    if (grow(&c->trans, &c->cap_trans, (c->n_states + 1) * n_cls, sizeof *c->trans, c->max_states * n_cls) ||
        grow(&c->ids, &c->cap_ids, c->n_ids + n, sizeof *c->ids, GS_MAX_IDS))
        return GS_FULL;
    uint32_t k = (uint32_t)c->n_states;
    memcpy(c->ids + c->n_ids, ids, n * sizeof *ids);
    c->s_off[k] = (uint32_t)c->n_ids;
    c->n_ids += n;
    c->s_off[k + 1] = (uint32_t)c->n_ids;
    c->info[k] = (gsinfo){.hash = hash, .complete = ids[0] == 0}; /* sorted: the empty stack (0) comes first */
    memset(c->trans + (size_t)k * n_cls, 0, n_cls * sizeof *c->trans);
    c->n_states++;
    c->stats.dfa_states++;
    if (c->n_states * 2 > c->s_table_cap) {
        if (state_table_rebuild(c, c->s_table_cap * 2)) {
            c->n_states--;
            c->n_ids -= n;
            return GS_FULL;
        }
    } else {
        c->s_table[h] = k;
    }
    return k;
}

static int u32_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int work_push(gcache *c, size_t *n, uint32_t f) {
    if (grow(&c->work, &c->cap_work, *n + 1, sizeof *c->work, GS_MAX_WORK)) return -1;
    c->work[(*n)++] = f;
    return 0;
}

/* Expands the n_work frames in c->work (this epoch) through rule references until each tops a terminal or is
 * empty, and interns the set: a state, GS_DEAD (nothing, or more than GRAMMAR_MAX_STACKS stacks), or GS_FULL. */
static uint32_t expand(gcache *c, size_t n_work) {
    const grammar *g = c->g;
    size_t n_out = 0;
    bool over = false;
    while (n_work && !over) {
        uint32_t f = c->work[--n_work];
        if (c->f_mark[f] == c->epoch) continue;
        c->f_mark[f] = c->epoch;
        if (f == 0 || GE_KIND(g->elems[c->f_pos[f]]) == GE_BYTES) {
            if (n_out == GRAMMAR_MAX_STACKS) {
                over = true;
                break;
            }
            if (grow(&c->out, &c->cap_out, n_out + 1, sizeof *c->out, GRAMMAR_MAX_STACKS)) return GS_FULL;
            c->out[n_out++] = f;
            continue;
        }
        uint32_t p = c->f_pos[f], r = GE_VALUE(g->elems[p]);
        uint32_t rest = c->f_parent[f];
        if (!GE_IS_END(g->elems[p + 1])) {
            rest = frame_push(c, p + 1, rest);
            if (rest == GS_FULL) return GS_FULL;
            if (rest == GS_CUT) continue;
        }
        for (uint32_t a = g->alt_off[r]; a < g->alt_off[r + 1]; a++) {
            uint32_t q = g->alts[a];
            uint32_t nf = GE_IS_END(g->elems[q]) ? rest : frame_push(c, q, rest);
            if (nf == GS_FULL) return GS_FULL;
            if (nf == GS_CUT) continue;
            if (work_push(c, &n_work, nf)) {
                over = true;
                break;
            }
        }
    }
    if (over) {
        c->stats.overflows++;
        return GS_DEAD;
    }
    if (n_out < 16) {
        for (size_t i = 1; i < n_out; i++) {
            uint32_t v = c->out[i];
            size_t j = i;
            for (; j > 0 && c->out[j - 1] > v; j--) c->out[j] = c->out[j - 1];
            c->out[j] = v;
        }
    } else {
        qsort(c->out, n_out, sizeof *c->out, u32_cmp);
    }
    return state_intern(c, c->out, n_out);
}

/* State k's successor on byte class cl, computed and memoized; or GS_FULL. */
static uint32_t transition(gcache *c, uint32_t k, uint32_t cl) {
    const grammar *g = c->g;
    uint8_t b = g->cls_rep[cl];
    next_epoch(c);
    size_t n_work = 0;
    for (uint32_t i = c->s_off[k]; i < c->s_off[k + 1]; i++) {
        uint32_t s = c->ids[i];
        if (s == 0) continue;
        uint32_t p = c->f_pos[s];
        if (!byteset_has(&g->terms[GE_VALUE(g->elems[p])], b)) continue;
        uint32_t rest = c->f_parent[s];
        if (!GE_IS_END(g->elems[p + 1])) {
            rest = frame_push(c, p + 1, rest);
            if (rest == GS_FULL) return GS_FULL;
            if (rest == GS_CUT) continue;
        }
        if (work_push(c, &n_work, rest)) return GS_FULL;
    }
    uint32_t nx = n_work ? expand(c, n_work) : GS_DEAD;
    if (nx != GS_FULL) c->trans[(size_t)k * g->n_cls + cl] = nx;
    return nx;
}

uint32_t dfa_step(gcache *c, uint32_t k, uint8_t byte) {
    uint32_t cl = c->g->cls[byte];
    uint32_t nx = c->trans[(size_t)k * c->g->n_cls + cl];
    return nx ? nx : transition(c, k, cl);
}

void dfa_compact(gcache *c) {
    c->stats.compactions++;
    next_epoch(c);
    size_t n_cur = c->s_off[c->cur + 1] - c->s_off[c->cur];
    const uint32_t *cur = c->ids + c->s_off[c->cur];
    for (size_t i = 0; i < n_cur; i++)
        for (uint32_t f = cur[i]; f && c->f_mark[f] != c->epoch; f = c->f_parent[f]) c->f_mark[f] = c->epoch;
    /* Parents come before children, so one ascending pass renumbers; f_mark[f] becomes f's new id. */
    uint32_t n = 1;
    c->f_mark[0] = 0;
    for (uint32_t f = 1; f < c->n_frames; f++) {
        if (c->f_mark[f] != c->epoch) continue;
        c->f_pos[n] = c->f_pos[f];
        c->f_parent[n] = c->f_mark[c->f_parent[f]];
        c->f_depth[n] = c->f_depth[f];
        c->f_mark[f] = n++;
    }
    for (size_t i = 0; i < n_cur; i++) c->out[i] = cur[i] ? c->f_mark[cur[i]] : 0; /* ascending: still sorted */
    memset(c->f_mark, 0, n * sizeof *c->f_mark);
    c->n_frames = n;
    memset(c->f_table, 0, c->f_table_cap * sizeof *c->f_table);
    for (uint32_t f = 1; f < n; f++) frame_table_insert(c->f_table, c->f_table_cap, c, f);
    c->n_states = 2;
    c->n_ids = 0;
    memset(c->s_table, 0, c->s_table_cap * sizeof *c->s_table);
    c->cur = state_intern(c, c->out, n_cur); /* fits: the tables only shrank */
    for (int i = 0; i < GRAMMAR_MASK_SLOTS; i++) c->masks[i].state = 0;
}

/* Position p with a chain level above `level` lowered to it. */
static uint32_t canon_pos(const grammar *g, uint32_t p, uint32_t level) {
    uint32_t lo = 0, hi = g->n_chains;
    while (lo < hi) { /* the first chain ending after p */
        uint32_t mid = lo + (hi - lo) / 2;
        const gchain *ch = &g->chains[mid];
        if (ch->lo + ch->stride * ch->levels <= p) lo = mid + 1;
        else hi = mid;
    }
    if (lo == g->n_chains || p < g->chains[lo].lo) return p;
    const gchain *ch = &g->chains[lo];
    uint32_t k = 2 + (p - ch->lo) / ch->stride;
    return k > level ? ch->lo + (level - 2) * ch->stride + (p - ch->lo) % ch->stride : p;
}

/* State x with every chain level above `level` lowered to it. A level counts the repetitions still allowed (or
 * still required), each at least one byte long, so for byte strings shorter than `level` the two states accept
 * exactly the same: masks of tokens that short are shared across counts (inside a string of maxLength 1000, every
 * count above the horizon is one state). x itself when nothing changes or a cache is full. */
uint32_t dfa_canonical(gcache *c, uint32_t x, uint32_t level) {
    const grammar *g = c->g;
    if (!g->n_chains || x == GS_DEAD) return x;
    if (c->canon_level != level) {
        for (size_t k = 2; k < c->n_states; k++) c->info[k].canon = 0;
        c->canon_level = level;
    }
    if (c->info[x].canon) return c->info[x].canon;
    size_t m = 0;
    bool changed = false;
    for (uint32_t i = c->s_off[x]; i < c->s_off[x + 1]; i++) {
        uint32_t st = c->ids[i], d = 0;
        bool lowered = false;
        for (uint32_t f = st; f; f = c->f_parent[f]) {
            uint32_t q = canon_pos(g, c->f_pos[f], level);
            lowered |= q != c->f_pos[f];
            c->pos_buf[d++] = q;
        }
        if (lowered) {
            st = 0;
            for (uint32_t k = d; k-- > 0;) {
                st = frame_push(c, c->pos_buf[k], st);
                if (st >= GS_CUT) return x;
            }
            changed = true;
        }
        c->out[m++] = st;
    }
    if (!changed) return c->info[x].canon = x;
    qsort(c->out, m, sizeof *c->out, u32_cmp);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (!u || c->out[i] != c->out[u - 1]) c->out[u++] = c->out[i];
    uint32_t y = state_intern(c, c->out, u);
    if (y == GS_FULL) return x;
    c->info[y].canon = y;
    return c->info[x].canon = y;
}

uint32_t dfa_walk_bytes(gcache *c, const uint8_t *p, size_t n) {
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t k = c->cur;
        size_t i = 0;
        for (; i < n && k != GS_DEAD && k != GS_FULL; i++) k = dfa_step(c, k, p[i]);
        if (k != GS_FULL) return k;
        dfa_compact(c);
    }
    c->stats.overflows++;
    return GS_DEAD;
}

static void cache_free(gcache *c) {
    if (!c) return;
    free(c->f_pos);
    free(c->f_parent);
    free(c->f_mark);
    free(c->f_depth);
    free(c->f_table);
    free(c->s_off);
    free(c->info);
    free(c->pos_buf);
    free(c->tbits);
    free(c->s_table);
    free(c->ids);
    free(c->trans);
    free(c->work);
    free(c->out);
    for (int i = 0; i < GRAMMAR_MASK_SLOTS; i++) free(c->masks[i].mask);
    free(c);
}

grammar_state *grammar_state_new(const grammar *g, fkv_error *err) {
    grammar_state *s = calloc(1, sizeof *s);
    gcache *c = s ? calloc(1, sizeof *c) : NULL;
    if (!c) goto fail;
    s->c = c;
    c->g = g;
    c->max_states = GS_MAX_TRANS / g->n_cls < GS_MAX_STATES ? GS_MAX_TRANS / g->n_cls : GS_MAX_STATES;
    size_t cap = 0;
    if (grow(&c->f_pos, &c->cap_frames, 1024, sizeof *c->f_pos, GS_MAX_FRAMES) ||
        grow(&c->f_parent, &cap, 1024, sizeof *c->f_parent, GS_MAX_FRAMES) ||
        grow(&c->f_mark, &(size_t){0}, 1024, sizeof *c->f_mark, GS_MAX_FRAMES) ||
        grow(&c->f_depth, &(size_t){0}, 1024, sizeof *c->f_depth, GS_MAX_FRAMES) || frame_table_rebuild(c, 2048) ||
        grow(&c->s_off, &c->cap_states, 64, sizeof *c->s_off, c->max_states + 1) ||
        grow(&c->info, &(size_t){0}, 64, sizeof *c->info, c->max_states + 1) ||
        !(c->pos_buf = malloc(GRAMMAR_MAX_DEPTH * sizeof *c->pos_buf)) ||
        state_table_rebuild(c, 128) ||
        grow(&c->trans, &c->cap_trans, 2 * (size_t)g->n_cls, sizeof *c->trans, c->max_states * g->n_cls))
        goto fail;
    c->n_frames = 1; /* frame 0: the empty stack */
    c->f_pos[0] = c->f_parent[0] = c->f_mark[0] = 0;
    c->f_depth[0] = 0;
    c->n_states = 2; /* 0: "not computed" in trans; 1: dead, whose every transition is itself */
    c->s_off[0] = c->s_off[1] = c->s_off[2] = 0;
    c->info[0] = (gsinfo){0};
    c->info[1] = (gsinfo){.canon = GS_DEAD};
    for (uint32_t cl = 0; cl < g->n_cls; cl++) c->trans[g->n_cls + cl] = GS_DEAD;
    next_epoch(c);
    size_t n_work = 0;
    uint32_t start = frame_push(c, 0, 0);
    if (start >= GS_CUT || work_push(c, &n_work, start)) goto fail;
    c->cur = expand(c, n_work);
    if (c->cur == GS_FULL) goto fail;
    return s;
fail:
    err_nomem(err, "grammar: out of memory for a generation's state");
    if (s) cache_free(s->c);
    free(s);
    return NULL;
}

void grammar_state_free(grammar_state *s) {
    if (!s) return;
    cache_free(s->c);
    free(s);
}

bool grammar_complete(const grammar_state *s) { return s->c->info[s->c->cur].complete; }

int grammar_accept_bytes(grammar_state *s, const char *bytes, size_t n) {
    uint32_t k = dfa_walk_bytes(s->c, (const uint8_t *)bytes, n);
    if (k == GS_DEAD) return -1;
    s->c->cur = k;
    return 0;
}

void grammar_state_stats(const grammar_state *s, grammar_stats *out) { *out = s->c->stats; }
