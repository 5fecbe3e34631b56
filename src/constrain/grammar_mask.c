/* grammar_mask.c — the walk of the trie through the DFA, its shortcuts, and the kept masks (contract in
 * grammar_mask.h). */
#include "constrain/grammar_mask.h"

#include <stdlib.h>
#include <string.h>

#define GS_TEXT_BYTES 32 /* plain bytes for a state to count as text (reach() follows only those) */
#define GS_FAR UINT32_MAX

/* The successor of state k on the last byte of node i at depth d, after a full cache: compacts, then replays the
 * path from the current state (path_byte[1 .. d-1]). GS_DEAD when even that does not fit. */
static uint32_t walk_recover(gcache *c, uint32_t d, uint8_t byte) {
    dfa_compact(c);
    c->path[0] = c->cur;
    for (uint32_t k = 1; k < d; k++) {
        uint32_t x = dfa_step(c, c->path[k - 1], c->path_byte[k]);
        if (x == GS_FULL || x == GS_DEAD) {
            c->stats.overflows++;
            return GS_DEAD;
        }
        c->path[k] = x;
    }
    uint32_t x = dfa_step(c, c->path[d - 1], byte);
    if (x == GS_FULL) {
        c->stats.overflows++;
        return GS_DEAD;
    }
    return x;
}

/* State k's plain bytes: the ASCII bytes that lead to its most common successor (next). False when a cache is full
 * (no compaction here: the walk holds state ids). */
static bool plain(gcache *c, uint32_t k) {
    if (c->info[k].known & KNOWN_PLAIN) return true;
    uint32_t succ[128], best = GS_DEAD, best_n = 0;
    for (unsigned b = 0; b < 128; b++) {
        succ[b] = dfa_step(c, k, (uint8_t)b); /* may grow (move) the state arrays */
        if (succ[b] == GS_FULL) return false;
    }
    for (unsigned b = 0; b < 128; b++) {
        if (succ[b] == GS_DEAD || succ[b] == best) continue;
        uint32_t n = 0;
        for (unsigned q = b; q < 128; q++) n += succ[q] == succ[b];
        if (n > best_n) best = succ[b], best_n = n;
    }
    gsinfo *in = &c->info[k];
    in->next = best;
    in->plain[0] = in->plain[1] = 0;
    for (unsigned b = 0; b < 128; b++)
        if (best != GS_DEAD && succ[b] == best) in->plain[b >> 6] |= 1ull << (b & 63);
    in->known |= KNOWN_PLAIN;
    return true;
}

/* Whether every byte of [lo, hi] leads state x on, alive, to a state from which `left` - 1 more bytes of 80..BF
 * lead to home (left 1: to home itself). 1, 0, or -1 when a cache is full. Bytes of one class step alike, so one
 * byte per class is tried. */
static int utf8_returns(gcache *c, uint32_t home, uint32_t x, unsigned lo, unsigned hi, int left) {
    uint64_t seen[4] = {0};
    for (unsigned b = lo; b <= hi; b++) {
        uint8_t cl = c->g->cls[b];
        if (seen[cl >> 6] >> (cl & 63) & 1) continue;
        seen[cl >> 6] |= 1ull << (cl & 63);
        uint32_t y = dfa_step(c, x, (uint8_t)b);
        if (y == GS_FULL) return -1;
        if (y == GS_DEAD) return 0;
        int r = left == 1 ? y == home : utf8_returns(c, home, y, 0x80, 0xbf, left - 1);
        if (r <= 0) return r;
    }
    return 1;
}

/* Whether every valid multi-byte character leads state k (plain() known) to its next — k itself for a loop (inside
 * a JSON string), the next count for a counting state — every partial one alive. Unknown (a cache full) counts as
 * no and is not kept. */
static bool utf8_next(gcache *c, uint32_t k) {
    static const struct {
        uint8_t lo, hi, second_lo, second_hi, len;
    } leads[] = {{0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3}, {0xe1, 0xec, 0x80, 0xbf, 3},
                 {0xed, 0xed, 0x80, 0x9f, 3}, {0xee, 0xef, 0x80, 0xbf, 3}, {0xf0, 0xf0, 0x90, 0xbf, 4},
                 {0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4}};
    if (c->info[k].utf8) return c->info[k].utf8 == 1;
    uint32_t target = c->info[k].next;
    int r = target != GS_DEAD;
    for (size_t i = 0; i < sizeof leads / sizeof *leads && r > 0; i++) {
        uint64_t seen[4] = {0};
        for (unsigned b = leads[i].lo; b <= leads[i].hi && r > 0; b++) {
            uint8_t cl = c->g->cls[b];
            if (seen[cl >> 6] >> (cl & 63) & 1) continue;
            seen[cl >> 6] |= 1ull << (cl & 63);
            uint32_t x = dfa_step(c, k, (uint8_t)b);
            r = x == GS_FULL ? -1
              : x == GS_DEAD ? 0
              : utf8_returns(c, target, x, leads[i].second_lo, leads[i].second_hi, leads[i].len - 1);
        }
    }
    if (r >= 0) c->info[k].utf8 = r ? 1 : 2;
    return r > 0;
}

/* How many steps along `next` from k stay alive with every state's plain bytes covering k's: a subtree no deeper
 * than that whose ASCII bytes are k's plain ones is allowed whole (with utf8, every chain state also leads each
 * multi-byte character to its next: then the subtree may hold valid UTF-8 too). GS_FAR for a loop (inside a JSON
 * string), the count left for a counting state (inside a string of bounded length); 0 for a state that is not text
 * (fewer than GS_TEXT_BYTES plain bytes) or when a cache is full. Followed only as far as `need` asks: a chain cut
 * short leaves lower bounds, which a later, deeper question extends. The chain is followed into pos_buf, then
 * filled in backwards: reach(x) = 1 + reach(next) when next's plain bytes cover x's, else 1. */
static uint32_t reach(gcache *c, uint32_t k, uint32_t need, int utf8) {
    const uint8_t exact_bit = (uint8_t)(KNOWN_REACH << utf8);
    if ((c->info[k].known & exact_bit) || c->info[k].reach[utf8] >= need) return c->info[k].reach[utf8];
    uint32_t *chain = c->pos_buf, n = 0, x = k, tail = 0;
    bool exact = true, cut = false;
    for (;;) {
        uint32_t left = need > n ? need - n : 0; /* what x must reach for k to reach need */
        if ((c->info[x].known & exact_bit) || (n && c->info[x].reach[utf8] >= left)) {
            tail = c->info[x].reach[utf8];
            exact = c->info[x].known & exact_bit;
            break;
        }
        if (!plain(c, x)) return 0; /* plain() and utf8_next() may move c->info */
        bool text = __builtin_popcountll(c->info[x].plain[0]) + __builtin_popcountll(c->info[x].plain[1]) >=
                    GS_TEXT_BYTES;
        if (!text || (utf8 && !utf8_next(c, x))) {
            c->info[x].reach[utf8] = 0; /* its successors are not followed */
            c->info[x].known |= exact_bit;
            tail = 0;
            break;
        }
        gsinfo *in = &c->info[x];
        if (in->next == x) { /* a loop: every step lands where it started */
            in->reach[utf8] = GS_FAR;
            in->known |= exact_bit;
            tail = GS_FAR;
            break;
        }
        chain[n++] = x;
        if (n > need || n > GRAMMAR_MAX_TOKEN_BYTES) { /* far enough: the last one is alive one step on */
            cut = true;
            break;
        }
        x = in->next;
    }
    for (uint32_t i = n; i-- > 0;) {
        gsinfo *in = &c->info[chain[i]];
        const gsinfo *ni = &c->info[in->next];
        uint32_t r;
        bool ex;
        if (cut && i == n - 1) {
            r = 1, ex = false;
        } else if ((ni->known & KNOWN_PLAIN) && !(in->plain[0] & ~ni->plain[0]) && !(in->plain[1] & ~ni->plain[1])) {
            r = tail == GS_FAR ? GS_FAR : tail + 1, ex = exact;
        } else {
            r = 1, ex = true;
        }
        if (r > in->reach[utf8] || ex) in->reach[utf8] = r;
        if (ex) in->known |= exact_bit;
        tail = r, exact = ex;
    }
    return c->info[k].reach[utf8];
}

/* Whether every token below a node whose state is x is allowed: its ASCII bytes below[] are x's plain bytes and the
 * subtree, `height` bytes deep, ends before the chain does (a character takes at least one byte, so counting bytes
 * is safe); with bytes >= 0x80 below (valid UTF-8 from a character boundary), the chain must carry characters. */
static bool subtree_allowed(gcache *c, uint32_t x, const uint64_t below[2], uint32_t height, bool high) {
    uint32_t r = reach(c, x, height, high);
    const gsinfo *in = &c->info[x];
    return r && !(below[0] & ~in->plain[0]) && !(below[1] & ~in->plain[1]) && (r == GS_FAR || height <= r);
}

/* Bits [a, b) of w. */
static void bits_set(uint64_t *w, uint32_t a, uint32_t b) {
    if (a >= b) return;
    uint32_t wa = a >> 6, wb = (b - 1) >> 6;
    uint64_t ma = ~0ull << (a & 63), mb = ~0ull >> (63 - ((b - 1) & 63));
    if (wa == wb) {
        w[wa] |= ma & mb;
        return;
    }
    w[wa] |= ma;
    for (uint32_t i = wa + 1; i < wb; i++) w[i] = ~0ull;
    w[wb] |= mb;
}

/* The mask by a preorder walk of the trie from state root, down to depth `limit`, into c->tbits: node i's state is
 * its parent's (st[depth - 1]) stepped by its byte; a dead node skips its subtree, and a live one whose subtree
 * cannot fail (subtree_allowed) allows all of it at once. Returns the root finally walked from (the current state
 * after a compaction); *n_set the tokens marked. */
static uint32_t walk_trie(gcache *c, const grammar_vocab *gv, uint32_t root, uint32_t limit, size_t *n_set) {
    const gv_node *nodes = gv->nodes;
    uint32_t *st = c->path;
    uint64_t visited = 0;
    size_t marked = 0;
    st[0] = root;
    for (uint32_t i = 0; i < gv->n_nodes;) {
        const gv_node *nd = &nodes[i];
        uint32_t d = nd->depth;
        uint32_t x = dfa_step(c, st[d - 1], nd->byte);
        visited++;
        if (x == GS_FULL) {
            x = walk_recover(c, d, nd->byte);
            root = c->cur;
        }
        if (x == GS_DEAD) {
            i = nd->skip;
            continue;
        }
        st[d] = x;
        c->path_byte[d] = nd->byte;
        uint8_t f = nd->flags;
        if (nd->skip > i + 1 && (!(f & GV_HIGH_BELOW) || ((f & GV_BOUNDARY) && !(f & GV_BAD_BELOW))) &&
            subtree_allowed(c, x, gv->below + 2 * (size_t)i, nd->height < limit - d ? nd->height : limit - d,
                            f & GV_HIGH_BELOW)) {
            bits_set(c->tbits, nd->tok, nodes[nd->skip].tok);
            marked += nodes[nd->skip].tok - nd->tok;
            i = nd->skip;
            continue;
        }
        bits_set(c->tbits, nd->tok, nd[1].tok);
        marked += nd[1].tok - nd->tok;
        i = d < limit ? i + 1 : nd->skip;
    }
    c->stats.walk_nodes += visited;
    *n_set = marked;
    return root;
}

void grammar_allowed(const grammar_state *s, const grammar_vocab *gv, uint8_t *allowed) {
    gcache *c = s->c;
    size_t n = (size_t)gv->n_vocab, words = gv->n_text / 64 + 1;
    c->stats.masks++;
    c->clock++;
    if (c->mask_gv != gv) {
        for (int i = 0; i < GRAMMAR_MASK_SLOTS; i++) {
            free(c->masks[i].mask);
            c->masks[i] = (gmask){0};
        }
        free(c->tbits);
        c->tbits = malloc(words * sizeof *c->tbits);
        c->mask_gv = c->tbits ? gv : NULL;
    }
    if (!c->tbits) { /* no memory for the walk's marks: token by token (slower, the same mask) */
        for (size_t id = 0; id < n; id++) allowed[id] = grammar_token_allowed(s, gv, (int32_t)id);
        return;
    }
    /* Bounded: the canonical state answers for the tokens up to the horizon, the longer ones are checked alone. */
    uint32_t root = dfa_canonical(c, c->cur, gv->horizon + 1);
    bool bounded = root != c->cur;
    gmask *hit = NULL;
    for (int i = 0; i < GRAMMAR_MASK_SLOTS && !hit; i++)
        if (c->masks[i].mask && c->masks[i].state == root && (bounded || !c->masks[i].partial)) hit = &c->masks[i];
    if (hit) {
        memcpy(allowed, hit->mask, n);
        hit->used = c->clock;
        c->stats.mask_hits++;
    } else {
        memset(c->tbits, 0, words * sizeof *c->tbits);
        size_t n_set;
        root = walk_trie(c, gv, root, bounded ? gv->horizon : UINT32_MAX, &n_set);
        /* The marks to ids: fewer than half set, scatter them; more, set all and clear the others (the tokens not
         * marked, and those that are not text). */
        if (n_set < gv->n_text / 2) {
            memset(allowed, 0, n);
            for (size_t w = 0; w < words; w++)
                for (uint64_t m = c->tbits[w]; m; m &= m - 1)
                    allowed[gv->node_tok[w * 64 + (size_t)__builtin_ctzll(m)]] = 1;
        } else {
            memset(allowed, 1, n);
            for (size_t w = 0; w < words; w++) {
                uint64_t m = ~c->tbits[w];
                if (w == words - 1) m &= (1ull << (gv->n_text & 63)) - 1; /* bits past n_text hold no token */
                for (; m; m &= m - 1) allowed[gv->node_tok[w * 64 + (size_t)__builtin_ctzll(m)]] = 0;
            }
            for (uint32_t i = 0; i < gv->n_other; i++) allowed[gv->other[i]] = 0;
        }
        if (c->info[c->cur].complete)
            for (uint32_t i = 0; i < gv->n_eog; i++) allowed[gv->eog[i]] = 1;
        /* Kept in the least recently used slot (made on first use; without memory, just not kept). */
        gmask *slot = &c->masks[0];
        for (int i = 1; i < GRAMMAR_MASK_SLOTS; i++)
            if (c->masks[i].used < slot->used) slot = &c->masks[i];
        if (!slot->mask) slot->mask = malloc(n ? n : 1);
        if (slot->mask) {
            memcpy(slot->mask, allowed, n);
            slot->state = root;
            slot->partial = bounded;
            slot->used = c->clock;
        }
    }
    if (bounded)
        for (uint32_t i = 0; i < gv->n_long; i++) {
            int32_t id = gv->long_ids[i];
            allowed[id] = dfa_walk_bytes(c, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]) != GS_DEAD;
        }
}

bool grammar_token_allowed(const grammar_state *s, const grammar_vocab *gv, int32_t id) {
    if (id < 0 || id >= gv->n_vocab) return false;
    if (gv->kind[id] == GV_EOG) return grammar_complete(s);
    if (gv->kind[id] != GV_TEXT) return false;
    return dfa_walk_bytes(s->c, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]) != GS_DEAD;
}

int grammar_accept(grammar_state *s, const grammar_vocab *gv, int32_t id) {
    if (id < 0 || id >= gv->n_vocab) return -1;
    if (gv->kind[id] == GV_EOG) return grammar_complete(s) ? 0 : -1;
    if (gv->kind[id] != GV_TEXT) return -1;
    uint32_t k = dfa_walk_bytes(s->c, gv->bytes + gv->off[id], gv->off[id + 1] - gv->off[id]);
    if (k == GS_DEAD) return -1;
    s->c->cur = k;
    return 0;
}
