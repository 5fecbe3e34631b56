/* stepbuf.c — a decode step's arrays (stepbuf.h). */
#include "engine/stepbuf.h"

#include <stdlib.h>

#include "base/err.h"

stepbuf *stepbuf_new(uint32_t max_rows, uint32_t max_seqs, uint32_t n_vocab) {
    stepbuf *sb = calloc(1, sizeof *sb);
    if (!sb) return NULL;
    sb->max_rows = max_rows, sb->max_seqs = max_seqs, sb->n_vocab = n_vocab;
    sb->ids = malloc(sizeof *sb->ids * max_rows);
    sb->dids = malloc(sizeof *sb->dids * max_rows);
    uint32_t **per_seq[] = {&sb->row, &sb->n_ids, &sb->cap, &sb->lag, &sb->dn_ids, &sb->of};
    bool ok = sb->ids && sb->dids && (sb->dseqs = malloc(sizeof *sb->dseqs * max_seqs)) &&
              (sb->state = malloc(sizeof *sb->state * max_seqs));
    for (size_t i = 0; ok && i < sizeof per_seq / sizeof *per_seq; i++)
        ok = (*per_seq[i] = malloc(sizeof(uint32_t) * max_seqs)) != NULL;
    if (!ok) {
        stepbuf_free(sb);
        return NULL;
    }
    return sb;
}

void stepbuf_free(stepbuf *sb) {
    if (!sb) return;
    free(sb->logits);
    free(sb->ids);
    free(sb->row);
    free(sb->n_ids);
    free(sb->cap);
    free(sb->lag);
    free(sb->state);
    free(sb->dseqs);
    free(sb->dids);
    free(sb->dn_ids);
    free(sb->of);
    free(sb);
}

int stepbuf_logits(stepbuf *sb, fkv_error *err) {
    if (!sb->logits && !(sb->logits = malloc(sizeof(float) * sb->max_rows * sb->n_vocab)))
        return err_nomem(err, "out of memory for a decode step's logits");
    return 0;
}
