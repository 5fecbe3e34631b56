/* tok_pieces.h — the vocabulary's pieces (tokenizer.ggml.tokens) and the lookup from a piece's bytes to its id: what
 * both tokenizers merge against (SPM in tok.c, byte-level BPE in tok_bpe.c).
 *
 * WHY its own module: merging looks a candidate piece up at every step, so the lookup is one hash (XXH3, linear
 * probing) and usually one memcmp; both tokenizers share it, and neither needs the rest of the vocabulary.
 *
 * INVARIANT: every id in [0, n) is in the table exactly once (a file whose pieces repeat is refused); an empty piece
 * is stored as "[EMPTY_<id>]", as llama.cpp names it.
 *
 * Thread-safety: immutable after tok_pieces_load.
 */
#ifndef FKV_TEXT_TOK_PIECES_H
#define FKV_TEXT_TOK_PIECES_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct {
    int32_t n;
    char *text;          /* all pieces, back to back */
    size_t *text_off;    /* [n + 1] piece i is text[text_off[i] .. text_off[i + 1]) */
    int32_t *slots;      /* [slot_mask + 1] hash table of ids, -1 = empty */
    uint64_t slot_mask;
} tok_pieces;

/* The pieces of tokens (a string array of 1 to INT32_MAX / 2 entries); -1 with err naming f's path (out of memory, a
 * repeated piece). On failure, tok_pieces_free still frees what was made. */
int tok_pieces_load(tok_pieces *v, const gguf_file *f, const gguf_value *tokens, fkv_error *err);
void tok_pieces_free(tok_pieces *v);

/* Piece id's bytes (*len of them; id in [0, n)). Borrowed. */
static inline const char *tok_pieces_text(const tok_pieces *v, int32_t id, size_t *len) {
    *len = v->text_off[id + 1] - v->text_off[id];
    return v->text + v->text_off[id];
}
/* The id of the piece s[0..len), or -1. */
int32_t tok_pieces_lookup(const tok_pieces *v, const char *s, size_t len);

#endif
