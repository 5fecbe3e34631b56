/* stepbuf.c — a decode step's arrays (stepbuf.h). */
#include "engine/stepbuf.h"

#include <stdlib.h>

#include "base/err.h"

stepbuf *stepbuf_new(uint32_t max_rows, uint32_t max_seqs, uint32_t n_vocab, uint32_t dim) {
    /* One block: the struct, then the pointer arrays, then the 4-byte ones (each array aligned for its type). */
    const size_t rows = max_rows, seqs = max_seqs;
    stepbuf *sb = calloc(1, sizeof *sb + seqs * (sizeof *sb->state + sizeof *sb->dseqs) +
                                rows * (sizeof *sb->ids + sizeof *sb->dids) + seqs * 6 * sizeof(uint32_t));
    if (!sb) return NULL;
    sb->max_rows = max_rows, sb->max_seqs = max_seqs, sb->n_vocab = n_vocab;
    sb->state = (struct spec_state **)(sb + 1);
    sb->dseqs = (fkv_eseq **)(sb->state + seqs);
    sb->ids = (int32_t *)(sb->dseqs + seqs);
    sb->dids = sb->ids + rows;
    uint32_t **per_seq[] = {&sb->row, &sb->n_ids, &sb->cap, &sb->lag, &sb->dn_ids, &sb->of};
    uint32_t *at = (uint32_t *)(sb->dids + rows);
    for (size_t i = 0; i < sizeof per_seq / sizeof *per_seq; i++, at += seqs) *per_seq[i] = at;
    if (!(sb->h = malloc(sizeof(float) * seqs * dim))) {
        free(sb);
        return NULL;
    }
    return sb;
}

void stepbuf_free(stepbuf *sb) {
    if (!sb) return;
    free(sb->logits);
    free(sb->h);
    free(sb);
}

int stepbuf_logits(stepbuf *sb, fkv_error *err) {
    if (!sb->logits && !(sb->logits = malloc(sizeof(float) * sb->max_rows * sb->n_vocab)))
        return err_nomem(err, "out of memory for a decode step's logits");
    return 0;
}
