/* tok_merge.c — a binary heap of candidate merges (tok_merge.h). */
#include "text/tok_merge.h"

#include <stdbool.h>
#include <stdlib.h>

static bool tok_merge_before(const tok_merge *a, const tok_merge *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

int tok_merge_push(tok_merge_queue *q, tok_merge m) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        tok_merge *h = realloc(q->heap, cap * sizeof *h);
        if (!h) return -1;
        q->heap = h;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!tok_merge_before(&m, &q->heap[parent])) break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = m;
    return 0;
}

tok_merge tok_merge_pop(tok_merge_queue *q) {
    tok_merge top = q->heap[0], last = q->heap[--q->n];
    size_t i = 0, n = q->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && tok_merge_before(&q->heap[c + 1], &q->heap[c])) c++;
        if (!tok_merge_before(&q->heap[c], &last)) break;
        q->heap[i] = q->heap[c];
        i = c;
    }
    if (n) q->heap[i] = last;
    return top;
}
