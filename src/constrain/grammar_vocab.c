/* grammar_vocab.c — the trie built from the tokens' byte strings, in one pass over them sorted (contract in
 * grammar_vocab.h). */
#include "constrain/grammar_vocab.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"

void grammar_vocab_free(grammar_vocab *gv) {
    if (!gv) return;
    free(gv->kind);
    free(gv->off);
    free(gv->bytes);
    free(gv->eog);
    free(gv->nodes);
    free(gv->node_tok);
    free(gv->below);
    free(gv->other);
    free(gv->long_ids);
    free(gv);
}

int32_t grammar_vocab_n(const grammar_vocab *gv) { return gv->n_vocab; }
size_t grammar_vocab_trie_nodes(const grammar_vocab *gv) { return gv->n_nodes; }

typedef struct {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
} gv_piece;

/* UTF-8 decoding state after a node: bytes still needed (-1: invalid), and the open character's lead and length. */
typedef struct {
    int need;
    uint8_t lead;
    int len;
} gv_utf8;

/* Whether b may be continuation byte number k (1-based) of a character led by lead (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static bool utf8_cont_ok(uint8_t lead, int k, uint8_t b) {
    if ((b & 0xc0) != 0x80) return false;
    if (k != 1) return true;
    if (lead == 0xe0) return b >= 0xa0;
    if (lead == 0xed) return b <= 0x9f;
    if (lead == 0xf0) return b >= 0x90;
    if (lead == 0xf4) return b <= 0x8f;
    return true;
}

static int piece_cmp(const void *a, const void *b) {
    const gv_piece *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

grammar_vocab *grammar_vocab_new_pieces(int32_t n_vocab, const char *const *bytes, const size_t *len,
                                        const bool *eog, fkv_error *err) {
    grammar_vocab *gv = calloc(1, sizeof *gv);
    gv_piece *sorted = NULL;
    uint32_t *open = NULL;
    gv_utf8 *u = NULL;
    if (!gv || n_vocab < 0) goto fail;
    gv->n_vocab = n_vocab;
    size_t n = (size_t)n_vocab, total = 0, n_text = 0;
    gv->kind = calloc(n ? n : 1, 1);
    gv->off = calloc(n + 1, sizeof *gv->off);
    if (!gv->kind || !gv->off) goto fail;
    for (size_t i = 0; i < n; i++) {
        if (eog && eog[i]) {
            gv->kind[i] = GV_EOG;
            gv->n_eog++;
        } else if (bytes[i] && len[i] > 0 && len[i] <= GRAMMAR_MAX_TOKEN_BYTES) {
            gv->kind[i] = GV_TEXT;
            total += len[i];
            n_text++;
        }
    }
    gv->bytes = malloc(total ? total : 1);
    gv->eog = malloc((gv->n_eog ? gv->n_eog : 1) * sizeof *gv->eog);
    sorted = malloc((n_text ? n_text : 1) * sizeof *sorted);
    gv->node_tok = malloc((n_text ? n_text : 1) * sizeof *gv->node_tok);
    gv->nodes = malloc((total + 1) * sizeof *gv->nodes);
    gv->below = calloc(2 * (total + 1), sizeof *gv->below);
    open = malloc((GRAMMAR_MAX_TOKEN_BYTES + 1) * sizeof *open);
    u = calloc(GRAMMAR_MAX_TOKEN_BYTES + 1, sizeof *u); /* u[0]: the token's start, a boundary */
    gv->other = malloc((n - n_text + 1) * sizeof *gv->other);
    if (!gv->bytes || !gv->eog || !sorted || !gv->node_tok || !gv->nodes || !gv->below || !open || !u || !gv->other)
        goto fail;
    size_t at = 0, k = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        gv->off[i] = (uint32_t)at;
        if (gv->kind[i] == GV_TEXT) {
            memcpy(gv->bytes + at, bytes[i], len[i]);
            sorted[k++] = (gv_piece){gv->bytes + at, (uint32_t)len[i], (int32_t)i};
            at += len[i];
        } else if (gv->kind[i] == GV_EOG) {
            gv->eog[e++] = (int32_t)i;
        }
    }
    gv->off[n] = (uint32_t)at;
    qsort(sorted, n_text, sizeof *sorted, piece_cmp);
    /* The trie in preorder: in sorted order each piece shares its longest common prefix with the previous one;
     * the nodes below that depth are closed and the rest of the piece opens new ones. open[d]: the node at depth
     * d on the current path. */
    uint32_t depth = 0, m = 0;
    for (size_t t = 0; t < n_text; t++) {
        const gv_piece *pc = &sorted[t];
        uint32_t lcp = 0;
        if (t) {
            const gv_piece *prev = &sorted[t - 1];
            while (lcp < prev->len && lcp < pc->len && prev->p[lcp] == pc->p[lcp]) lcp++;
        }
        for (; depth > lcp; depth--) gv->nodes[open[depth]].skip = m;
        for (; depth < pc->len; depth++) {
            gv->nodes[m] = (gv_node){.tok = (uint32_t)t, .depth = (uint16_t)(depth + 1), .byte = pc->p[depth]};
            /* UTF-8 decoding from the token's start, along the path: u[d] is the state after depth d */
            const gv_utf8 *prev = &u[depth];
            gv_utf8 *now = &u[depth + 1];
            uint8_t b = pc->p[depth];
            if (prev->need < 0) {
                *now = *prev;
            } else if (prev->need > 0) {
                *now = *prev;
                now->need = utf8_cont_ok(prev->lead, prev->len - prev->need, b) ? prev->need - 1 : -1;
            } else {
                int len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3
                        : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
                *now = (gv_utf8){.need = len - 1, .lead = b, .len = len};
            }
            if (now->need == 0) gv->nodes[m].flags |= GV_BOUNDARY;
            if (now->need < 0) gv->nodes[m].flags |= GV_BAD;
            open[depth + 1] = m++;
        }
        gv->node_tok[t] = pc->id;
    }
    gv->n_text = (uint32_t)n_text;
    for (size_t i = 0; i < n; i++)
        if (gv->kind[i] != GV_TEXT) gv->other[gv->n_other++] = (int32_t)i;
    for (; depth > 0; depth--) gv->nodes[open[depth]].skip = m;
    gv->nodes[m] = (gv_node){.skip = m, .tok = (uint32_t)n_text};
    gv->n_nodes = m;
    /* The horizon: 16 bytes, doubled while more than GV_MAX_LONG tokens are longer. */
    gv->horizon = 16;
    for (;;) {
        gv->n_long = 0;
        for (size_t t = 0; t < n_text; t++) gv->n_long += sorted[t].len > gv->horizon;
        if (gv->n_long <= GV_MAX_LONG || gv->horizon >= GRAMMAR_MAX_TOKEN_BYTES) break;
        gv->horizon *= 2;
    }
    gv->long_ids = malloc((gv->n_long ? gv->n_long : 1) * sizeof *gv->long_ids);
    if (!gv->long_ids) goto fail;
    for (size_t t = 0, k = 0; t < n_text; t++)
        if (sorted[t].len > gv->horizon) gv->long_ids[k++] = sorted[t].id;
    /* What lies below each node, children first (they come after their parent in preorder). */
    for (uint32_t i = m; i-- > 0;) {
        for (uint32_t ch = i + 1; ch < gv->nodes[i].skip; ch = gv->nodes[ch].skip) {
            uint8_t b = gv->nodes[ch].byte;
            gv->below[2 * i] |= gv->below[2 * ch];
            gv->below[2 * i + 1] |= gv->below[2 * ch + 1];
            uint8_t f = gv->nodes[ch].flags;
            if (gv->nodes[ch].height + 1 > gv->nodes[i].height) gv->nodes[i].height = gv->nodes[ch].height + 1;
            gv->nodes[i].flags |= (f & (GV_HIGH_BELOW | GV_BAD_BELOW)) | (b >= 0x80 ? GV_HIGH_BELOW : 0) |
                                  (f & GV_BAD ? GV_BAD_BELOW : 0);
            if (b < 0x80) gv->below[2 * i + (b >> 6)] |= 1ull << (b & 63);
        }
    }
    goto out;
fail:
    err_nomem(err, "grammar: out of memory for the vocabulary's trie");
    grammar_vocab_free(gv);
    gv = NULL;
out:
    free(sorted);
    free(open);
    free(u);
    return gv;
}

grammar_vocab *grammar_vocab_new(const tok_vocab *v, fkv_error *err) {
    size_t n = (size_t)tok_n_vocab(v), total = 0;
    size_t *len = calloc(n + 1, sizeof *len);
    const char **bytes = calloc(n + 1, sizeof *bytes);
    bool *eog = calloc(n + 1, sizeof *eog);
    char *buf = NULL;
    grammar_vocab *gv = NULL;
    if (!len || !bytes || !eog) goto oom;
    /* prev = the id itself: never -1 or BOS for a text token, so tok_piece keeps a leading space (mid-text). */
    for (size_t id = 0; id < n; id++) {
        eog[id] = tok_is_eog(v, (int32_t)id);
        int piece = eog[id] ? 0 : tok_piece(v, (int32_t)id, (int32_t)id, NULL, 0);
        if (piece > 0 && piece <= GRAMMAR_MAX_TOKEN_BYTES) len[id] = (size_t)piece;
        total += len[id];
    }
    buf = malloc(total ? total : 1);
    if (!buf) goto oom;
    for (size_t id = 0, at = 0; id < n; id++) {
        if (!len[id]) continue;
        bytes[id] = buf + at;
        tok_piece(v, (int32_t)id, (int32_t)id, buf + at, (int)len[id]);
        at += len[id];
    }
    gv = grammar_vocab_new_pieces((int32_t)n, bytes, len, eog, err);
    goto out;
oom:
    err_nomem(err, "grammar: out of memory for the vocabulary's trie");
out:
    free(buf);
    free(bytes);
    free(len);
    free(eog);
    return gv;
}
