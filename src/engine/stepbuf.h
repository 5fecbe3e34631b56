/* stepbuf.h — the arrays of one decode step (fkv_engine_step), sized once for an engine.
 *
 * WHY its own module: the engine owns one (it knows how many rows and sequences a forward takes), and the step and
 * the drafters fill it; none of them allocates per token. The engine sizes it, the step module writes it: a buffer
 * below both, so that neither has to reach up into the other.
 *
 * INVARIANT: max_rows >= max_seqs; the per-sequence arrays hold max_seqs entries, the per-row ones max_rows.
 *
 * Thread-safety: belongs to its engine's thread.
 */
#ifndef FKV_ENGINE_STEPBUF_H
#define FKV_ENGINE_STEPBUF_H

#include <stdint.h>

#include "flatkv.h"

struct spec_state;

typedef struct {
    uint32_t max_rows, max_seqs, n_vocab;
    float *logits;              /* [max_rows][n_vocab], allocated at the first step (stepbuf_logits) */
    int32_t *ids;               /* [max_rows] the rows of a step: each sequence's fed id, then its guesses */
    uint32_t *row;              /* [max_seqs] where sequence i's rows start in ids while guesses are written */
    uint32_t *n_ids;            /* [max_seqs] its rows: 1 + its guesses */
    uint32_t *cap;              /* [max_seqs] the guesses it may make this step */
    uint32_t *lag;              /* [max_seqs] rows its draft sequence was fed to catch up with it */
    struct spec_state **state;  /* [max_seqs] sequence i's speculation (its generation's) */
    /* the draft engine's forwards (dseqs, dn_ids: the target's sequences and their guesses so far, for the NextN
     * drafter's) */
    fkv_eseq **dseqs; /* [max_seqs] */
    int32_t *dids;    /* [max_rows] */
    uint32_t *dn_ids; /* [max_seqs] */
    uint32_t *of;     /* [max_seqs] the sequence each draft sequence guesses for */
    float *h;         /* [max_seqs][dim] the NextN drafter's hidden state of each sequence's last guess */
} stepbuf;

/* NULL when out of memory. */
stepbuf *stepbuf_new(uint32_t max_rows, uint32_t max_seqs, uint32_t n_vocab, uint32_t dim);
void stepbuf_free(stepbuf *sb);
/* sb->logits, allocated at the first call (a step's logits are the engine's largest scratch: 152k ids × 40 rows is
 * 24 MB, not paid by engines that never step); -1 with err when out of memory. */
int stepbuf_logits(stepbuf *sb, fkv_error *err);

#endif
