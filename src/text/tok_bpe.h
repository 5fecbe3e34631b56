/* tok_bpe.h — byte-level BPE: internal to the tokenizer (tok.h), not part of its contract.
 *
 * WHY: both tokenizers sit on one vocabulary's pieces (tok_pieces.h) and one special-token split (tok.c);
 * tok_bpe.c adds only what byte-level BPE needs on top: the merge ranks, the pre-tokenizer regexes and the
 * GPT-2 byte↔character alphabet.
 *
 * Thread-safety: a tok_bpe is immutable after tok_bpe_load; the per-call scratch (tok_bpe_work) is
 * owned by one tok_encode call.
 */
#ifndef FKV_TOK_BPE_H
#define FKV_TOK_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "text/tok_pieces.h"

/* Ids go here; past cap they are only counted (tok_encode's protocol). */
typedef struct {
    int32_t *out;
    int cap;
    int64_t n;
} tok_sink;

static inline void tok_emit(tok_sink *s, int32_t id) {
    if (s->n < s->cap) s->out[s->n] = id;
    s->n++;
}

typedef struct tok_bpe tok_bpe;
typedef struct tok_bpe_work tok_bpe_work;

/* Read tokenizer.ggml.merges and tokenizer.ggml.pre and compile the pre-tokenizer. add_bos gets the
 * pre-tokenizer's default for tokenizer.ggml.add_bos_token (true only for the llama3 family). */
tok_bpe *tok_bpe_load(const gguf_file *f, bool *add_bos, fkv_error *err);
void tok_bpe_free(tok_bpe *b);

/* Scratch for tok_bpe_encode, NULL on out of memory. */
tok_bpe_work *tok_bpe_work_new(void);
void tok_bpe_work_free(tok_bpe_work *w);

/* Encode one text fragment (no special tokens in it) into sink; -1 with err filled on out of memory
 * (or a regex engine failure, which the patterns are written never to reach). */
int tok_bpe_encode(const tok_bpe *b, const tok_pieces *v, tok_bpe_work *w, const char *text, size_t len,
                   tok_sink *sink, fkv_error *err);

/* The bytes a byte-level piece stands for, written to out (never longer than the piece); returns the
 * length. A character outside the 256-character alphabet is copied as it is. */
size_t tok_bpe_decode_piece(const char *piece, size_t len, char *out);

#endif
