/* grammar_vocab.h — a tokenizer's tokens as byte strings, arranged in a trie for masking (built once per model).
 *
 * WHY: a mask asks, for every token, whether its bytes can continue the output, and tokens that share a prefix share
 * the question. In a trie of the tokens' byte strings, a prefix that is refused refuses every token under it in one
 * step; each node also knows what lies below it (the ASCII bytes, whether a byte >= 0x80 or invalid UTF-8 occurs, how
 * deep it goes), so that a subtree that cannot fail is allowed whole (grammar_mask.h).
 *
 * INVARIANT: nodes are in preorder, so node i's subtree is nodes[i .. skip) and its tokens are one range,
 * node_tok[tok .. nodes[skip].tok). A token that is not text (control, unknown, unused) or is longer than
 * GRAMMAR_MAX_TOKEN_BYTES is in no node and never allowed; end-of-generation ids are kept apart (eog). A
 * grammar_vocab takes about 32 bytes per trie node (217k nodes, 7 MiB, for deepseek-llm's 100k ids).
 *
 * Thread-safety: immutable once made; shared by any number of states and threads.
 */
#ifndef FKV_GRAMMAR_VOCAB_H
#define FKV_GRAMMAR_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/grammar_limits.h"
#include "flatkv.h"
#include "text/tok.h"

typedef struct grammar_vocab grammar_vocab; /* a tokenizer's token byte strings, arranged for masking */

/* From the tokenizer (tok.h): each token's bytes as tok_piece gives them in the middle of a text (SPM's leading
 * space kept, byte tokens <0xHH> as the raw byte, byte-level BPE mapped back to bytes). Control, unknown and
 * unused tokens are not text and are never allowed; end-of-generation ids (tok_is_eog) are allowed exactly when
 * the output is complete. (Right after BOS an SPM decoder drops a piece's leading space; the grammar sees it.)
 * NULL with err when out of memory. */
grammar_vocab *grammar_vocab_new(const tok_vocab *v, fkv_error *err);
/* The same from raw byte strings: token i is bytes[i][0..len[i]), or not text when bytes[i] is NULL; eog (NULL:
 * none) marks the end-of-generation ids. The strings are copied. */
grammar_vocab *grammar_vocab_new_pieces(int32_t n_vocab, const char *const *bytes, const size_t *len,
                                        const bool *eog, fkv_error *err);
void grammar_vocab_free(grammar_vocab *gv);
int32_t grammar_vocab_n(const grammar_vocab *gv);
/* The trie's node count (for the bench). */
size_t grammar_vocab_trie_nodes(const grammar_vocab *gv);

/* ---- inside the vocabulary, for the masks (grammar_mask.c) ---- */

enum { GV_NONE, GV_TEXT, GV_EOG };

typedef struct {
    uint32_t skip; /* the node after this one's subtree */
    uint32_t tok;  /* tokens ending here: node_tok[tok .. next node's tok); a subtree's: [tok, nodes[skip].tok) */
    uint16_t depth;
    uint16_t height; /* of its subtree: the deepest node below, counted from this one (0: a leaf) */
    uint8_t byte;
    uint8_t flags; /* GV_* */
} gv_node;

/* What a node's subtree holds, for the walk's shortcut. The UTF-8 flags decode each token from its first byte. */
enum {
    GV_HIGH_BELOW = 1, /* a byte >= 0x80 below this node */
    GV_BAD_BELOW = 2,  /* a node below whose bytes are not a valid UTF-8 prefix */
    GV_BOUNDARY = 4,   /* this node's bytes end on a character boundary (valid, no character left open) */
    GV_BAD = 8,        /* this node's bytes are not a valid UTF-8 prefix */
};

struct grammar_vocab {
    int32_t n_vocab;
    uint8_t *kind;
    uint32_t *off; /* token id's bytes: bytes[off[id] .. off[id + 1]) */
    uint8_t *bytes;
    int32_t *eog;
    uint32_t n_eog;
    gv_node *nodes; /* preorder; nodes[n_nodes] is a sentinel ending the last node's tokens */
    uint32_t n_nodes;
    int32_t *node_tok;
    uint32_t n_text;
    int32_t *other; /* the ids that are not text (end of generation included) */
    uint32_t n_other;
    uint64_t *below; /* [2 * node]: the ASCII bytes of the nodes below it */
    uint32_t horizon;  /* the token length (bytes) at most GV_MAX_LONG tokens exceed */
    int32_t *long_ids; /* those tokens */
    uint32_t n_long;
};

#define GV_MAX_LONG 128

#endif
