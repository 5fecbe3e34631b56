/* tok_merge.h — the queue of candidate merges both tokenizers' merge loops run on (SPM in tok.c, BPE in tok_bpe.c).
 *
 * WHY one queue: SentencePiece and byte-level BPE differ only in how they key a merge (−score, rank); both take the
 * smallest key first and the leftmost among equals, which is what makes their ids match llama.cpp's.
 *
 * Thread-safety: a queue belongs to one encoding call's scratch.
 */
#ifndef FKV_TEXT_TOK_MERGE_H
#define FKV_TEXT_TOK_MERGE_H

#include <stddef.h>
#include <stdint.h>

/* A candidate merge of adjacent symbols left and right, whose concatenation is `size` bytes when queued
 * (a different size when popped means the entry is stale). Both tokenizers merge the smallest key first,
 * the leftmost among equals: SPM keys by −score (highest score first), BPE by merge rank. */
typedef struct {
    float key;
    int32_t left, right;
    size_t size;
} tok_merge;

typedef struct {
    tok_merge *heap;
    size_t n, cap;
} tok_merge_queue;

/* 0, or -1 when out of memory. */
int tok_merge_push(tok_merge_queue *q, tok_merge m);
/* The first merge (q->n > 0). */
tok_merge tok_merge_pop(tok_merge_queue *q);

#endif
