#include "cache/prefix.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* A resume point kept for window layers: its window pins the nodes of depth from .. (at - 1) / B on its path. */
typedef struct {
    uint32_t at, from;
    bool grid;
} keep_point;

/* A recurrent state kept at a resume point: the state after `at` positions of its node's path (at in
 * (depth·B, depth·B + B]). */
typedef struct state_point state_point;
struct state_point {
    state_point *lru_prev, *lru_next; /* in the tree's list of kept states, least recently used first */
    state_point *next;                /* the node's next kept state */
    prefix_node *node;
    uint64_t used; /* the tree's clock when last kept or resumed from */
    uint32_t at;
    bool grid;
    unsigned char bytes[]; /* prefix_states.bytes */
};

struct prefix_node {
    prefix_node *parent, *child, *sibling;
    prefix_node *lru_prev, *lru_next; /* in the tree's evictable list while in_lru */
    uint32_t block;
    uint32_t depth; /* positions [depth·B, depth·B + B) */
    uint32_t n_tokens;
    uint32_t n_prefill; /* rows [0, n_prefill) were written by a prefill */
    uint32_t refs;
    uint32_t wblock; /* window layers: its block in the window pool, held while wpins > 0 */
    uint32_t wpins;
    keep_point *keeps; /* the resume points kept in this node (at in (depth·B, depth·B + B]) */
    uint32_t n_keeps;
    state_point *states; /* the recurrent states kept in this node */
    uint64_t used;       /* the tree's clock when it last became evictable */
    bool in_lru;
    kvdisk_key key; /* with a disk tier: the block's name once it is full (a root's: its salt's) */
    int32_t tokens[]; /* block_rows */
};

typedef struct {
    char *salt;        /* NULL: the default (no salt, or an empty one) */
    prefix_node *root; /* a sentinel: no block, no tokens */
} salt_root;

struct prefix_tree {
    kvpool *pool;
    prefix_window win; /* win.pool NULL: no window layers kept apart */
    prefix_disk disk;  /* disk.disk NULL: no disk tier */
    uint8_t *disk_rows; /* [block_bytes]: a block read from disk before it has a pool block */
    uint8_t *disk_state; /* [st.bytes]: a state read from disk during a start (disk_state_at: its position, or 0) */
    uint32_t disk_state_at;
    int32_t *disk_ids;  /* ids from position 0 of a block being written */
    uint32_t disk_ids_cap;
    uint32_t B;
    salt_root *roots;
    uint32_t n_roots;
    prefix_node lru; /* sentinel of a circular list: lru.lru_next is the least recently used */
    prefix_states st; /* st.bytes 0: no recurrent states */
    size_t budget;    /* bytes the blocks of both pools and the kept states may take together; 0: the pool's own */
    state_point slru; /* sentinel of the kept states' circular list, as lru */
    uint64_t clock;
    prefix_stats stats;
};

static prefix_node *node_new(const prefix_tree *t, prefix_node *parent, uint32_t block) {
    prefix_node *n = calloc(1, sizeof *n + sizeof(int32_t) * t->B);
    if (!n) return NULL;
    n->parent = parent;
    n->block = block;
    n->depth = parent && parent->parent ? parent->depth + 1 : 0;
    if (parent) {
        n->sibling = parent->child;
        parent->child = n;
    }
    return n;
}

static void lru_remove(prefix_tree *t, prefix_node *n) {
    (void)t;
    if (!n->in_lru) return;
    n->lru_prev->lru_next = n->lru_next;
    n->lru_next->lru_prev = n->lru_prev;
    n->in_lru = false;
}

/* Most recently used go last; `oldest` puts the node first (a parent freed up by evicting its child). */
static void lru_add(prefix_tree *t, prefix_node *n, bool oldest) {
    prefix_node *before = oldest ? t->lru.lru_next : &t->lru;
    n->used = oldest ? 0 : ++t->clock;
    n->lru_next = before;
    n->lru_prev = before->lru_prev;
    before->lru_prev->lru_next = n;
    before->lru_prev = n;
    n->in_lru = true;
}

static bool is_root(const prefix_node *n) { return n->parent == NULL; }

/* ---- window layers ---- */

/* The first position whose window rows a row at p - slack .. p reads: the tile holding p - slack - W + 1. */
static uint32_t window_lo(const prefix_tree *t, uint32_t p, uint32_t slack) {
    const uint32_t back = slack + t->win.window - 1;
    return p > back ? (p - back) / OPS_ATTN_TILE * OPS_ATTN_TILE : 0;
}

static void wunpin(prefix_tree *t, prefix_node *n) {
    if (--n->wpins) return;
    kvpool_release(t->win.pool, n->wblock);
    t->stats.window_blocks_dropped++;
}

/* Keep a resume at `at` (> 0) on seq's path: its window pins the nodes from the tile of at - B - W + 1 (or from
 * seq's own first pin, if the sequence holds fewer) to the one holding at - 1. Kept once per node and position; a
 * point kept again as a grid point stays one. Out of memory the point is simply not kept. */
static void keep_add(prefix_tree *t, prefix_seq *seq, uint32_t at, bool grid) {
    if (!t->win.pool || at == 0) return;
    prefix_node *n = seq->nodes[(at - 1) / t->B];
    for (uint32_t i = 0; i < n->n_keeps; i++)
        if (n->keeps[i].at == at) {
            n->keeps[i].grid |= grid;
            return;
        }
    keep_point *grown = realloc(n->keeps, sizeof *grown * (n->n_keeps + 1));
    if (!grown) return;
    n->keeps = grown;
    uint32_t from = window_lo(t, at, t->B) / t->B;
    if (from < seq->wfrom) from = seq->wfrom;
    for (uint32_t d = from; d <= n->depth; d++) seq->nodes[d]->wpins++;
    n->keeps[n->n_keeps++] = (keep_point){at, from, grid};
}

/* Forget node n's kept point i: its pins go, up n's path. */
static void keep_drop(prefix_tree *t, prefix_node *n, uint32_t i) {
    const uint32_t from = n->keeps[i].from;
    for (prefix_node *a = n; a && !is_root(a) && a->depth >= from; a = a->parent) wunpin(t, a);
    n->keeps[i] = n->keeps[--n->n_keeps];
}

/* ---- recurrent states ---- */

static void state_unlink_lru(state_point *k) {
    k->lru_prev->lru_next = k->lru_next;
    k->lru_next->lru_prev = k->lru_prev;
}

/* k becomes the most recently used kept state. */
static void state_touch(prefix_tree *t, state_point *k) {
    if (k->lru_next) state_unlink_lru(k);
    k->lru_next = &t->slru;
    k->lru_prev = t->slru.lru_prev;
    t->slru.lru_prev->lru_next = k;
    t->slru.lru_prev = k;
    k->used = ++t->clock;
}

/* Forget kept state k (at *link in its node's list). */
static void state_drop(prefix_tree *t, state_point **link) {
    state_point *k = *link;
    *link = k->next;
    state_unlink_lru(k);
    t->stats.states_kept--;
    t->stats.state_bytes -= t->st.bytes;
    free(k);
}

/* Unlink a childless node from its parent and free it with its block (its window pins must be gone). */
static void node_drop(prefix_tree *t, prefix_node *n) {
    prefix_node **link = &n->parent->child;
    while (*link != n) link = &(*link)->sibling;
    *link = n->sibling;
    lru_remove(t, n);
    kvpool_release(t->pool, n->block);
    while (n->states) state_drop(t, &n->states);
    free(n->keeps);
    free(n);
}

/* Evict what was used least recently: an unreferenced leaf (with what it keeps) or a kept state; false when there is
 * neither. */
static bool evict_one(prefix_tree *t) {
    prefix_node *victim = t->lru.lru_next;
    state_point *oldest = t->slru.lru_next;
    if (oldest != &t->slru && (victim == &t->lru || oldest->used < victim->used)) {
        state_point **link = &oldest->node->states;
        while (*link != oldest) link = &(*link)->next;
        state_drop(t, link);
        t->stats.states_evicted++;
        return true;
    }
    if (victim == &t->lru) return false;
    prefix_node *parent = victim->parent;
    while (victim->n_keeps) keep_drop(t, victim, victim->n_keeps - 1);
    node_drop(t, victim);
    t->stats.evictions++;
    if (!is_root(parent) && parent->refs == 0 && !parent->child) lru_add(t, parent, true);
    return true;
}

static size_t bytes_in_use(const kvpool *p) { return p ? (size_t)(p->n_blocks - p->n_free) * p->block_bytes : 0; }

/* Whether `bytes` more fit the budget the blocks of both pools and the kept states share (always, without one). */
static bool has_room(const prefix_tree *t, size_t bytes) {
    return !t->budget || bytes_in_use(t->pool) + bytes_in_use(t->win.pool) + t->stats.state_bytes + bytes <= t->budget;
}

/* A block of pool (the tree's or the window layers'), evicting least recently used leaves while the pool or the
 * budget both share is full. */
static int64_t alloc_in(prefix_tree *t, kvpool *pool, fkv_error *err) {
    for (;;) {
        const int64_t b = has_room(t, pool->block_bytes) ? kvpool_alloc(pool) : -1;
        if (b >= 0) return b;
        if (!evict_one(t))
            return err_kv_full(err, "the KV memory is full: all %zu bytes of K/V blocks of %u positions are in use by "
                           "running sequences (raise --kv-mem or lower --parallel)",
                           t->budget ? t->budget : t->pool->n_blocks * t->pool->block_bytes, t->B);
    }
}

static int64_t alloc_block(prefix_tree *t, fkv_error *err) { return alloc_in(t, t->pool, err); }

/* A new node's window block, pinned once (by the sequence that reserved or copied it). */
static int alloc_window(prefix_tree *t, prefix_node *n, fkv_error *err) {
    if (!t->win.pool) return 0;
    const int64_t b = alloc_in(t, t->win.pool, err);
    if (b < 0) return -1;
    n->wblock = (uint32_t)b;
    n->wpins = 1;
    return 0;
}

prefix_tree *prefix_new(kvpool *pool, const prefix_window *win, const prefix_states *states, const prefix_disk *disk,
                        fkv_error *err) {
    prefix_tree *t = calloc(1, sizeof *t);
    if (!t || (disk && disk->disk &&
               (!(t->disk_rows = malloc(pool->block_bytes)) ||
                (states && states->bytes && !(t->disk_state = malloc(states->bytes)))))) {
        if (t) free(t->disk_rows);
        free(t);
        err_nomem(err, "out of memory for the prefix tree");
        return NULL;
    }
    t->pool = pool;
    if (win && win->pool) t->win = *win;
    if (states) t->st = *states;
    if (disk) t->disk = *disk;
    t->budget = t->win.budget > t->st.budget ? t->win.budget : t->st.budget;
    t->B = pool->block_rows;
    t->lru.lru_next = t->lru.lru_prev = &t->lru;
    t->slru.lru_next = t->slru.lru_prev = &t->slru;
    return t;
}

static void subtree_free(prefix_tree *t, prefix_node *n) {
    while (n->child) {
        prefix_node *c = n->child;
        n->child = c->sibling;
        subtree_free(t, c);
    }
    if (!is_root(n)) kvpool_release(t->pool, n->block);
    while (n->states) state_drop(t, &n->states);
    free(n->keeps);
    free(n);
}

void prefix_free(prefix_tree *t) {
    if (!t) return;
    for (uint32_t i = 0; i < t->n_roots; i++) {
        subtree_free(t, t->roots[i].root);
        free(t->roots[i].salt);
    }
    free(t->roots);
    free(t->disk_rows);
    free(t->disk_state);
    free(t->disk_ids);
    free(t);
}

/* The root of salt's rows, found by the salt's bytes — never by a digest of them: salts keep tenants apart
 * (server/tenants.h), and a request must not be able to make its salt meet another's. A root no sequence holds (refs:
 * the sequences started under it) and with nothing under it is taken over by a new salt: a client sending a new
 * cache_salt with every request grows nothing. */
static prefix_node *root_for(prefix_tree *t, const char *salt) {
    if (salt && !*salt) salt = NULL;
    salt_root *idle = NULL;
    for (uint32_t i = 0; i < t->n_roots; i++) {
        const char *own = t->roots[i].salt;
        if (own == salt || (own && salt && !strcmp(own, salt))) return t->roots[i].root;
        if (!idle && !t->roots[i].root->refs && !t->roots[i].root->child) idle = &t->roots[i];
    }
    char *copy = salt ? strdup(salt) : NULL;
    if (salt && !copy) return NULL;
    salt_root *at = idle;
    if (!at) {
        salt_root *grown = realloc(t->roots, sizeof *grown * (t->n_roots + 1));
        prefix_node *root = grown ? node_new(t, NULL, 0) : NULL;
        if (grown) t->roots = grown;
        if (!root) {
            free(copy);
            return NULL;
        }
        at = &t->roots[t->n_roots++];
        at->root = root;
    } else {
        free(at->salt);
    }
    at->salt = copy;
    if (t->disk.disk) at->root->key = kvdisk_chain(&t->disk.ns, salt ? salt : "", salt ? strlen(salt) : 0);
    return at->root;
}

static int seq_push(prefix_seq *s, prefix_node *n) {
    if (s->n_nodes == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 16;
        prefix_node **grown = realloc(s->nodes, sizeof *grown * cap);
        if (!grown) return -1;
        s->nodes = grown;
        s->cap = cap;
    }
    s->nodes[s->n_nodes++] = n;
    return 0;
}

static void acquire(prefix_tree *t, prefix_node *n) {
    lru_remove(t, n);
    n->refs++;
}

/* How many leading ids of node n agree with ids[0..avail) (bounded by the prefill rows if asked). */
static uint32_t node_agreement(const prefix_node *n, const int32_t *ids, uint32_t avail, bool bound) {
    uint32_t limit = bound ? n->n_prefill : n->n_tokens, m = 0;
    if (limit > avail) limit = avail;
    while (m < limit && n->tokens[m] == ids[m]) m++;
    return m;
}

/* The deepest agreement found so far and the path to it. */
typedef struct {
    prefix_node **path; /* scratch: the full nodes of the current branch */
    prefix_node **best; /* the full nodes of the best branch */
    uint32_t best_depth, best_len, partial_rows;
    prefix_node *partial; /* where the best agreement ends inside a node, if it does */
} match;

/* Depth-first over the children of node (at block depth `depth`): full agreements descend, partial ones end. */
static void search(const prefix_tree *t, prefix_node *node, const int32_t *ids, uint32_t n, uint32_t depth, bool bound,
                   match *m) {
    const uint32_t B = t->B, pos = depth * B;
    if (pos > m->best_len || (pos == m->best_len && depth > m->best_depth)) {
        m->best_len = pos;
        m->best_depth = depth;
        m->partial = NULL;
        m->partial_rows = 0;
        memcpy(m->best, m->path, sizeof *m->path * depth);
    }
    if (pos >= n) return;
    for (prefix_node *c = node->child; c; c = c->sibling) {
        uint32_t agree = node_agreement(c, ids + pos, n - pos, bound);
        if (agree == B) {
            m->path[depth] = c;
            search(t, c, ids, n, depth + 1, bound, m);
        } else if (agree && pos + agree > m->best_len) {
            m->best_len = pos + agree;
            m->best_depth = depth;
            m->partial = c;
            m->partial_rows = agree;
            memcpy(m->best, m->path, sizeof *m->path * depth);
        }
    }
}

/* What the cache holds where the prompt (n ids) parted from the best match of length `agreed`. */
static void note_divergence(const prefix_node *last_full, const prefix_node *partial, uint32_t partial_rows,
                            uint32_t agreed, uint32_t n, prefix_seq *seq) {
    prefix_divergence *d = &seq->divergence;
    d->at = agreed;
    d->n_cached = 0;
    if (agreed >= n) return;
    const prefix_node *node = partial;
    uint32_t from = partial_rows;
    if (!node) /* the match ended at a block boundary: what any child holds there differs */
        for (node = last_full->child; node && !node->n_tokens; node = node->sibling) {}
    if (!node) return;
    if (!partial) from = 0;
    while (from < node->n_tokens && d->n_cached < sizeof d->cached / sizeof *d->cached)
        d->cached[d->n_cached++] = node->tokens[from++];
}

/* Node d of the matched path: the full nodes walked, then the partly agreeing one. */
static prefix_node *matched(prefix_node *const *walked, uint32_t n_walked, prefix_node *partial, uint32_t d) {
    return d < n_walked ? walked[d] : partial;
}

/* The matched path, for held_reuse. */
typedef struct {
    const prefix_tree *t;
    prefix_node *const *walked;
    uint32_t n_walked;
    prefix_node *partial;
} matched_path;

/* kvrec_held_fn of the matched path: the longest reuse of at most p positions whose window rows are all held —
 * every node from the tile of p - W + 1 to the one holding p - 1. Where one is not, the reuse ends at or before
 * that node's start. */
static uint32_t held_reuse(const void *ctx, uint32_t p) {
    const matched_path *m = ctx;
    while (p) {
        const uint32_t lo = window_lo(m->t, p, 0) / m->t->B;
        uint32_t d = (p - 1) / m->t->B + 1;
        while (d > lo && matched(m->walked, m->n_walked, m->partial, d - 1)->wpins) d--;
        if (d == lo) return p;
        p = (d - 1) * m->t->B;
    }
    return 0;
}

/* The kept state of the matched path with the largest at <= p, or NULL. Deeper nodes hold later positions. */
static state_point *kept_state(const matched_path *m, uint32_t p) {
    for (uint32_t d = p ? (p - 1) / m->t->B + 1 : 0; d-- > 0;) {
        state_point *best = NULL;
        for (state_point *k = matched(m->walked, m->n_walked, m->partial, d)->states; k; k = k->next)
            if (k->at <= p && (!best || k->at > best->at)) best = k;
        if (best) return best;
    }
    return NULL;
}

/* The key a state after ids[0, at) is filed under in the disk tier, in its group's (the chain where its block
 * begins): the chain of its block's ids up to at, then a mark no block's chain ends with. */
static kvdisk_key state_key(const kvdisk_key *group, const int32_t *block_ids, uint32_t n) {
    const kvdisk_key ids = kvdisk_chain(group, block_ids, sizeof(int32_t) * n);
    return kvdisk_chain(&ids, "state", 5);
}

/* The group key of depth d on the matched path: the root's, or the full node's before it. */
static const kvdisk_key *group_of(const matched_path *m, prefix_node *root, uint32_t d) {
    return d ? &m->walked[d - 1]->key : &root->key;
}

/* Where a start finds a recurrent state (kvrec_held_fn): the caller's own, a kept one, or one in the disk tier,
 * whichever is latest. */
typedef struct {
    prefix_tree *t;
    const matched_path *mp;
    prefix_node *root;
    const int32_t *ids;
    kvrec_held_fn own;
    const void *own_ctx;
} state_sources;

/* The latest state file of the prompt's path in (best, p] read into t->disk_state: its position, or best. */
static uint32_t disk_state(const state_sources *src, uint32_t best, uint32_t p) {
    prefix_tree *t = src->t;
    if (t->disk_state_at > best && t->disk_state_at <= p) return t->disk_state_at; /* read by a call before */
    enum { CAP = 64 };
    kvdisk_state_file files[CAP];
    for (uint32_t d = p ? (p - 1) / t->B + 1 : 0; d-- > 0 && (d + 1) * t->B > best;) {
        const uint32_t lo = d * t->B > best ? d * t->B : best, hi = (d + 1) * t->B < p ? (d + 1) * t->B : p;
        const kvdisk_key *group = group_of(src->mp, src->root, d);
        uint32_t n = kvdisk_state_files(t->disk.disk, group, lo, hi, files, CAP);
        while (n) { /* the latest first; a file of another path (its key not this prompt's) is never read */
            uint32_t i = 0;
            for (uint32_t j = 1; j < n; j++)
                if (files[j].at > files[i].at) i = j;
            const kvdisk_state_file f = files[i];
            files[i] = files[--n];
            const kvdisk_key key = state_key(group, src->ids + d * t->B, f.at - d * t->B);
            if (key.lo == f.key.lo && key.hi == f.key.hi &&
                kvdisk_read_state(t->disk.disk, group, &key, f.at, src->ids, t->disk_state, t->st.bytes))
                return t->disk_state_at = f.at;
        }
    }
    return best;
}

static uint32_t state_reuse(const void *ctx, uint32_t p) {
    const state_sources *src = ctx;
    uint32_t best = src->own(src->own_ctx, p);
    const state_point *k = kept_state(src->mp, p);
    if (k && k->at > best) best = k->at;
    return src->t->disk_state ? disk_state(src, best, p) : best;
}

/* Not evictable while held (a path being extended from disk). */
static void hold(prefix_tree *t, prefix_node *n) { acquire(t, n); }

static void unhold(prefix_tree *t, prefix_node *n) {
    if (--n->refs == 0 && !n->child) lru_add(t, n, false);
}

/* Continue the matched path walked[0..*n_walked) from the disk tier: the blocks at depth *n_walked, ... whose ids all
 * lie in the prompt, while their files verify. The blocks read join the tree as if computed here (rows depend only
 * on their ids). Returns how many were read. */
static uint32_t extend_from_disk(prefix_tree *t, prefix_node *root, prefix_node **walked, uint32_t *n_walked,
                                 const int32_t *ids, uint32_t n) {
    const uint32_t B = t->B, first = *n_walked;
    uint32_t d = first;
    for (uint32_t i = 0; i < first; i++) hold(t, walked[i]); /* a block allocated below must not evict them */
    for (prefix_node *parent = first ? walked[first - 1] : root; (d + 1) * B <= n; d++) {
        const kvdisk_key key = kvdisk_chain(&parent->key, ids + d * B, sizeof(int32_t) * B);
        if (!kvdisk_read(t->disk.disk, &key, d, ids, t->disk_rows)) break;
        const int64_t b = alloc_block(t, NULL);
        prefix_node *node = b >= 0 ? node_new(t, parent, (uint32_t)b) : NULL;
        if (!node) {
            if (b >= 0) kvpool_release(t->pool, (uint32_t)b);
            break;
        }
        memcpy(t->pool->data + (size_t)node->block * t->pool->block_bytes, t->disk_rows, t->pool->block_bytes);
        memcpy(node->tokens, ids + d * B, sizeof(int32_t) * B);
        node->n_tokens = node->n_prefill = B;
        node->key = key;
        hold(t, node);
        walked[d] = parent = node;
    }
    for (uint32_t i = d; i-- > 0;) unhold(t, walked[i]);
    *n_walked = d;
    return d - first;
}

/* Push node n at depth seq->n_nodes, pinning its window block when the sequence's window reaches it. */
static int push_node(prefix_seq *seq, prefix_node *n, bool window) {
    if (seq_push(seq, n)) return -1;
    if (window && seq->n_nodes - 1 >= seq->wfrom) n->wpins++;
    return 0;
}

int64_t prefix_start(prefix_tree *t, const char *salt, const int32_t *ids, uint32_t n, const kvrec_policy *policy,
                     bool cache, prefix_seq *seq, void *state_out, fkv_error *err) {
    memset(seq, 0, sizeof *seq);
    prefix_node *root = root_for(t, salt);
    if (!root) return err_nomem(err, "out of memory for a cache salt");
    root->refs++; /* held until prefix_finish: not taken over by another salt meanwhile */
    seq->root = root;
    const uint32_t B = t->B;
    const bool window = t->win.pool != NULL;

    /* The best path: the deepest agreement over every branch (siblings may hold the same ids: two
     * sequences that wrote the same positions at once each made their own block). */
    prefix_node **walked = malloc(sizeof *walked * (n / B + 1) * 2), *partial = NULL;
    if (!walked) {
        root->refs--;
        seq->root = NULL;
        return err_nomem(err, "out of memory matching a prompt");
    }
    match m = {.path = walked + n / B + 1, .best = walked};
    if (cache) search(t, root, ids, n, 0, policy->bound_to_frontier, &m);
    uint32_t n_walked = m.best_depth, partial_rows = m.partial_rows;
    partial = m.partial;
    const uint32_t in_memory = n_walked;
    if (cache && t->disk.disk && extend_from_disk(t, root, walked, &n_walked, ids, n)) {
        partial = NULL; /* the disk's full block agrees further than the partly agreeing one */
        partial_rows = 0;
    }
    const uint32_t agreed = n_walked * B + partial_rows;
    note_divergence(n_walked ? walked[n_walked - 1] : root, partial, partial_rows, agreed, n, seq);
    const matched_path mp = {t, walked, n_walked, partial};
    kvrec_policy pol = *policy;
    const bool states = policy->state && t->st.bytes;
    const state_sources src = {t, &mp, root, ids, policy->state, policy->state_ctx};
    if (states) pol.state = state_reuse, pol.state_ctx = &src;
    t->disk_state_at = 0;
    kvrec_reuse reuse = kvrec_decide(agreed, n, &pol, window ? held_reuse : NULL, &mp);
    const uint32_t reusable = reuse.reused;
    if (states && reusable && policy->state(policy->state_ctx, reusable) != reusable) {
        /* a kept state (or one read from disk): copied out now, before any allocation below could evict it */
        state_point *k = kept_state(&mp, reusable);
        if (k && k->at == reusable) {
            memcpy(state_out, k->bytes, t->st.bytes);
            state_touch(t, k);
        } else {
            memcpy(state_out, t->disk_state, t->st.bytes);
            t->stats.state_disk_hits++;
        }
        seq->state_kept = true;
        t->stats.state_hits++;
    }

    /* Full blocks inside the reuse are shared as they are; the block the reuse ends in is the tail's
     * source: a full node cut short, or the partly agreeing one. The window pins of this sequence reach from the
     * tile of reusable - B - W + 1, or from as far back as the held window blocks go. */
    uint32_t n_full = reusable / B, keep = reusable % B;
    prefix_node *tail_src = keep ? matched(walked, n_walked, partial, n_full) : NULL;
    if (window && reusable) {
        const uint32_t lo = window_lo(t, reusable, B) / B;
        seq->wfrom = (reusable - 1) / B;
        while (seq->wfrom > lo && matched(walked, n_walked, partial, seq->wfrom - 1)->wpins) seq->wfrom--;
    }
    for (uint32_t d = 0; d < n_full; d++) {
        acquire(t, walked[d]);
        if (push_node(seq, walked[d], window)) {
            if (--walked[d]->refs == 0 && !walked[d]->child) lru_add(t, walked[d], false);
            free(walked);
            prefix_finish(t, seq);
            return err_nomem(err, "out of memory for a sequence path");
        }
    }
    prefix_node *parent = n_full ? walked[n_full - 1] : root;
    free(walked);

    /* The partly reused block: take it over when nobody else needs it as it is, else copy what is kept. */
    if (keep) {
        if (tail_src->refs == 0 && !tail_src->child && tail_src->n_tokens == keep) {
            acquire(t, tail_src);
            if (push_node(seq, tail_src, window)) {
                tail_src->refs--;
                if (!tail_src->child) lru_add(t, tail_src, false);
                prefix_finish(t, seq);
                return err_nomem(err, "out of memory for a sequence path");
            }
        } else {
            tail_src->refs++; /* not evictable, nor its window rows droppable, while it is copied from */
            if (window) tail_src->wpins++;
            lru_remove(t, tail_src);
            int64_t b = alloc_block(t, err);
            prefix_node *copy = b >= 0 ? node_new(t, parent, (uint32_t)b) : NULL;
            if (b >= 0 && !copy) kvpool_release(t->pool, (uint32_t)b);
            if (copy && alloc_window(t, copy, err)) {
                node_drop(t, copy);
                copy = NULL, b = -1;
            }
            if (copy) {
                /* the kept states of the rows copied go along: this sequence's finish then drops the ends it
                 * resumed past, which stay on its path */
                for (state_point **link = &tail_src->states; *link;) {
                    state_point *k = *link;
                    if (k->at > tail_src->depth * B + keep) {
                        link = &k->next;
                        continue;
                    }
                    *link = k->next;
                    k->node = copy;
                    k->next = copy->states;
                    copy->states = k;
                }
                kvpool_copy_rows(t->pool, copy->block, tail_src->block, keep);
                if (window) kvpool_copy_rows(t->win.pool, copy->wblock, tail_src->wblock, keep);
                memcpy(copy->tokens, tail_src->tokens, sizeof(int32_t) * keep);
                copy->n_tokens = keep;
                copy->n_prefill = tail_src->n_prefill < keep ? tail_src->n_prefill : keep;
                copy->refs = 1;
            }
            tail_src->refs--;
            if (window) wunpin(t, tail_src);
            if (tail_src->refs == 0 && !tail_src->child) lru_add(t, tail_src, false);
            /* the copy's window block came pinned once: that pin is this sequence's */
            if (copy && seq_push(seq, copy)) {
                if (window) wunpin(t, copy);
                node_drop(t, copy);
                copy = NULL;
            }
            if (!copy) {
                prefix_finish(t, seq);
                return b < 0 ? -1 : err_nomem(err, "out of memory copying a shared block");
            }
        }
    }
    seq->n_pos = reusable;
    seq->reuse = reuse;
    seq->from_disk = n_walked > in_memory && reusable > in_memory * B ? reusable - in_memory * B : 0;
    if (reuse.held < reuse.capped) t->stats.window_fallbacks++;
    if (reusable)
        t->stats.hits++, t->stats.reused_tokens += reusable;
    else
        t->stats.misses++;
    return reusable;
}

int prefix_reserve(prefix_tree *t, prefix_seq *seq, uint32_t n, fkv_error *err) {
    if (!n) return 0;
    uint32_t last = (seq->n_pos + n - 1) / t->B;
    while (seq->n_nodes <= last) {
        prefix_node *parent = seq->n_nodes ? seq->nodes[seq->n_nodes - 1] : seq->root;
        if (!parent) return err_input(err, "a sequence must be started before it is extended");
        int64_t b = alloc_block(t, err);
        if (b < 0) return -1;
        prefix_node *node = node_new(t, parent, (uint32_t)b);
        if (!node) {
            kvpool_release(t->pool, (uint32_t)b);
            return err_nomem(err, "out of memory for a KV block");
        }
        if (alloc_window(t, node, err)) { /* pinned once: this sequence's pin */
            node_drop(t, node);
            return -1;
        }
        if (seq_push(seq, node)) {
            if (t->win.pool) wunpin(t, node);
            node_drop(t, node);
            return err_nomem(err, "out of memory for a KV block");
        }
        node->refs = 1;
    }
    return 0;
}

/* seq's ids [0, n) gathered from its path's nodes into t->disk_ids, for a disk tier file; NULL out of memory (the
 * file is then not written: a later turn computes it again and writes it then). */
static const int32_t *path_ids(prefix_tree *t, const prefix_seq *seq, uint32_t n) {
    if (n > t->disk_ids_cap) {
        int32_t *grown = realloc(t->disk_ids, sizeof *grown * n * 2);
        if (!grown) return NULL;
        t->disk_ids = grown;
        t->disk_ids_cap = n * 2;
    }
    for (uint32_t p = 0; p < n; p += t->B)
        memcpy(t->disk_ids + p, seq->nodes[p / t->B]->tokens, sizeof(int32_t) * (n - p < t->B ? n - p : t->B));
    return t->disk_ids;
}

/* node, the last of seq's path, is full: named, and written to the disk tier unless seq stays in memory. */
static void block_filled(prefix_tree *t, const prefix_seq *seq, prefix_node *node) {
    node->key = kvdisk_chain(&node->parent->key, node->tokens, sizeof(int32_t) * t->B);
    const int32_t *ids = seq->memory_only ? NULL : path_ids(t, seq, (node->depth + 1) * t->B);
    if (ids)
        kvdisk_write(t->disk.disk, &node->key, node->depth, ids,
                     t->pool->data + (size_t)node->block * t->pool->block_bytes);
}

void prefix_commit(prefix_tree *t, prefix_seq *seq, const int32_t *ids, uint32_t n, bool by_prefill) {
    const uint32_t from = seq->n_pos;
    for (uint32_t i = 0; i < n; i++, seq->n_pos++) {
        prefix_node *node = seq->nodes[seq->n_pos / t->B];
        uint32_t row = seq->n_pos % t->B;
        node->tokens[row] = ids[i];
        node->n_tokens = row + 1;
        if (by_prefill && node->n_prefill == row) node->n_prefill = row + 1;
        if (row + 1 == t->B && t->disk.disk) block_filled(t, seq, node);
    }
    if (!t->win.pool) return;
    for (uint32_t g = t->win.grid ? (from / t->win.grid + 1) * t->win.grid : UINT32_MAX; g <= seq->n_pos;
         g += t->win.grid)
        keep_add(t, seq, g, true);
    for (const uint32_t lo = window_lo(t, seq->n_pos, t->B) / t->B; seq->wfrom < lo; seq->wfrom++)
        wunpin(t, seq->nodes[seq->wfrom]);
}

void prefix_keep(prefix_tree *t, prefix_seq *seq) { keep_add(t, seq, seq->n_pos, false); }

void prefix_keep_state(prefix_tree *t, prefix_seq *seq, uint32_t at, const void *state, bool grid) {
    if (!t->st.bytes || at == 0 || at > seq->n_pos) return;
    prefix_node *n = seq->nodes[(at - 1) / t->B]; /* referenced by seq: never evicted below */
    for (state_point *k = n->states; k; k = k->next)
        if (k->at == at) { /* the same positions' state: the same bytes */
            k->grid |= grid;
            state_touch(t, k);
            return;
        }
    const int32_t *ids = t->disk_state && !seq->memory_only ? path_ids(t, seq, at) : NULL;
    if (ids) { /* a restart or another replica may resume here */
        const kvdisk_key *group = &n->parent->key, key = state_key(group, n->tokens, at - n->depth * t->B);
        kvdisk_write_state(t->disk.disk, group, &key, at, ids, state, t->st.bytes);
    }
    while (!has_room(t, t->st.bytes))
        if (!evict_one(t)) return;
    state_point *k = malloc(sizeof *k + t->st.bytes);
    if (!k) return;
    *k = (state_point){.node = n, .at = at, .grid = grid, .next = n->states};
    memcpy(k->bytes, state, t->st.bytes);
    n->states = k;
    state_touch(t, k);
    t->stats.states_kept++;
    t->stats.state_bytes += t->st.bytes;
}

uint32_t prefix_state_grid(const prefix_tree *t) { return t->st.bytes ? t->st.grid : 0; }

void prefix_finish(prefix_tree *t, prefix_seq *seq) {
    /* The previous turn's ends, resumed past, give way to this one's: window points (this one's kept below) and
     * recurrent states (this one's kept before the finish, at n_pos). */
    const uint32_t r = seq->reuse.reused;
    for (uint32_t d = 0; d * t->B < r && d < seq->n_nodes; d++) {
        prefix_node *node = seq->nodes[d];
        for (uint32_t i = node->n_keeps; i-- > 0;)
            if (!node->keeps[i].grid && node->keeps[i].at <= r) keep_drop(t, node, i);
        for (state_point **link = &node->states; *link;)
            if (!(*link)->grid && (*link)->at <= r && (*link)->at != seq->n_pos)
                state_drop(t, link);
            else
                link = &(*link)->next;
    }
    if (t->win.pool) { /* then its own window pins go */
        keep_add(t, seq, seq->n_pos, false);
        for (uint32_t d = seq->wfrom; d < seq->n_nodes; d++) wunpin(t, seq->nodes[d]);
    }
    for (uint32_t i = seq->n_nodes; i-- > 0;) {
        prefix_node *node = seq->nodes[i];
        if (--node->refs) continue;
        if (node->n_tokens == 0 && !node->child)
            node_drop(t, node);
        else if (!node->child)
            lru_add(t, node, false);
    }
    if (seq->root) seq->root->refs--;
    free(seq->nodes);
    memset(seq, 0, sizeof *seq);
}

uint32_t prefix_block(const prefix_tree *t, const prefix_seq *seq, uint32_t p) { return seq->nodes[p / t->B]->block; }

bool prefix_wblock_held(const prefix_tree *t, const prefix_seq *seq, uint32_t p) {
    return seq->nodes[p / t->B]->wpins > 0;
}

uint32_t prefix_wblock(const prefix_tree *t, const prefix_seq *seq, uint32_t p) {
    return prefix_wblock_held(t, seq, p) ? seq->nodes[p / t->B]->wblock : 0;
}

static void count_shared(const prefix_node *n, uint32_t *shared) {
    for (const prefix_node *c = n->child; c; c = c->sibling) {
        if (c->refs >= 2) (*shared)++;
        count_shared(c, shared);
    }
}

prefix_stats prefix_get_stats(const prefix_tree *t) {
    prefix_stats s = t->stats;
    s.blocks_free = t->pool->n_free;
    s.blocks_in_use = t->pool->n_blocks - t->pool->n_free;
    s.blocks_shared = 0;
    s.window_blocks_in_use = t->win.pool ? t->win.pool->n_blocks - t->win.pool->n_free : 0;
    for (uint32_t i = 0; i < t->n_roots; i++) count_shared(t->roots[i].root, &s.blocks_shared);
    s.salts = t->n_roots;
    return s;
}
