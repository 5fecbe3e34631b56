/* tok.h — the tokenizers read from GGUF metadata: SentencePiece-style (tokenizer.ggml.model = "llama") and
 * byte-level BPE ("gpt2": GPT-2, Llama-3, Qwen2, DeepSeek, Falcon, StarCoder, MPT, ...).
 *
 * WHY: prompts must become exactly the ids the model was trained on, or nothing downstream (the prefix
 * cache's id comparison included) means anything. The reference is llama.cpp's tokenizers, whose
 * test vectors live in data/tokenizers/.
 *
 * Encoding (llama.cpp's SPM behaviour): spaces become U+2581 "▁"; when add_space_prefix is set (GGUF
 * tokenizer.ggml.add_space_prefix, default true) a "▁" is prepended to the text; the text is split into
 * UTF-8 characters; adjacent symbols are merged greedily, always taking the pair whose concatenation is
 * a vocabulary piece with the highest score (ties: leftmost); a final symbol not in the vocabulary is
 * emitted as its bytes' <0xNN> tokens (byte fallback), or as UNK when the vocabulary has no byte tokens.
 * Special tokens in the text follow llama.cpp's rule for each token type: with parse_special, control and
 * unknown tokens written literally in the text (e.g. "<s>") are emitted as their ids and the text between
 * them is encoded as above; without it they are plain text. User-defined tokens are always split out, as
 * llama.cpp (and HF) do. The type is the file's, corrected by text as llama.cpp's loader does (tok.c lists
 * the rules): e.g. phi-3's "</s>" is USER_DEFINED in its file but made CONTROL by llama.cpp's end-of-generation
 * list, so without parse_special it stays text.
 *
 * Decoding: piece text with "▁" → " ", <0xNN> → the raw byte, control tokens → "" (BOS/EOS print
 * nothing). tok_decode of tok_encode(text) reproduces text (minus the added leading space) for any
 * valid UTF-8 without a literal "▁" (it is the space symbol, and decodes as a space, as in llama.cpp).
 *
 * Byte-level BPE (llama.cpp's): special tokens are split out exactly as above; each text fragment is cut
 * by the regexes of its tokenizer.ggml.pre (an absent key means llama.cpp's "default"; an unknown one is
 * refused by name), every byte of a piece becomes its GPT-2 alphabet character, and adjacent symbols merge
 * by their rank in tokenizer.ggml.merges (lowest first, ties leftmost). No space prefix is added (unless
 * tokenizer.ggml.add_space_prefix says so, which only affects tok_piece), BOS defaults to off except for the
 * llama3 family, BOS/EOS ids default to 11 as in llama.cpp. Decoding maps the alphabet back to bytes;
 * user-defined tokens decode as their text, control tokens as "". Invalid UTF-8 bytes are kept, not turned
 * into U+FFFD as llama.cpp does, so tok_decode of tok_encode(bytes) gives the bytes back — for every byte
 * whose alphabet character the vocabulary holds as a normal token (all 256 in GPT-2; most vocabularies lack
 * the bytes C0, C1, F5..FF that valid UTF-8 never contains, and a byte without a token is dropped, as in
 * llama.cpp). Decoding is the concatenation of pieces: HF's clean_up_tokenization_spaces, which llama.cpp's
 * llama_detokenize applies for some vocabularies, is not, because it would break the round trip.
 *
 * Thread-safety: immutable after tok_load.
 */
#ifndef FKV_TOK_H
#define FKV_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

/* Token attributes from tokenizer.ggml.token_type (llama.cpp numbering). */
typedef enum {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
} tok_type;

typedef struct tok_vocab tok_vocab;

/* Read tokenizer.ggml.{model,tokens,scores,token_type,bos_token_id,eos_token_id,unknown_token_id,
 * add_bos_token,add_space_prefix}, and for "gpt2" also tokenizer.ggml.{merges,pre}. Refuses models other
 * than "llama" and "gpt2" with an error naming the model string, and pre-tokenizers it does not know with
 * one naming the pre string. The vocabulary copies what it needs: the gguf_file may be closed afterwards. */
tok_vocab *tok_load(const gguf_file *f, fkv_error *err);
void tok_free(tok_vocab *v);

int32_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v); /* -1 when absent */
int32_t tok_eos(const tok_vocab *v); /* -1 when absent */
bool tok_add_bos(const tok_vocab *v); /* tokenizer.ggml.add_bos_token; default true for SPM, see above for BPE */
tok_type tok_token_type(const tok_vocab *v, int32_t id);
/* The token's text as the vocabulary stores it (not NUL-terminated; *len its bytes), or NULL for an id outside
 * the vocabulary. Borrowed from v. */
const char *tok_token_text(const tok_vocab *v, int32_t id, size_t *len);
/* True for ids that end a generation (EOS, and other end-of-generation control tokens if known). */
bool tok_is_eog(const tok_vocab *v, int32_t id);


/* Encode len bytes of text. Writes at most cap ids to out and returns the total number of ids the
 * encoding has (which may exceed cap: call again with a larger buffer), or -1 with err filled. add_bos
 * prepends BOS. Never fails on any byte string (invalid UTF-8 bytes go through byte fallback, or in BPE
 * through the byte alphabet). */
int tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
               int32_t *out, int cap, fkv_error *err);

/* A byte range of the text: [off, off + len). */
typedef struct {
    size_t off, len;
} tok_span;

/* tok_encode, where with parse_special a control or unknown token's text that overlaps one of the spans
 * plain[0..n_plain) (sorted, disjoint) stays text, as without parse_special; user-defined tokens are split out
 * everywhere, as always. For a chat prompt: the template's own control tokens are parsed, the messages'
 * contents are plain, and the fragments between control tokens are encoded whole across span edges, so a
 * content without control-token texts gets exactly the ids tok_encode gives. -1 with err for spans out of
 * order or past len. */
int tok_encode_spans(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                     const tok_span *plain, size_t n_plain, int32_t *out, int cap, fkv_error *err);

/* tok_encode_spans (no BOS) of text that comes after the id prev in a sequence of ids: a continuation encoded on
 * its own (nothing merges across the boundary), with the space prefix llama.cpp's rule gives its first fragment in
 * place — SPM prefixes a text fragment only when it is first or follows a token split out as special, so here only
 * when prev is a control, user-defined or unknown token (or -1: nothing before). */
int tok_encode_after(const tok_vocab *v, int32_t prev, const char *text, size_t len, bool parse_special,
                     const tok_span *plain, size_t n_plain, int32_t *out, int cap, fkv_error *err);

/* The bytes token id stands for when decoded after `prev` (-1 at the start): the leading space of a
 * piece is dropped when prev is BOS or -1 and add_space_prefix is set, as llama.cpp does. Writes at
 * most cap bytes; returns the full length, or -1 for an id outside the vocabulary. */
int tok_piece(const tok_vocab *v, int32_t prev, int32_t id, char *buf, int cap);

/* Decode n ids into buf (NUL-terminated if room); returns the full byte length or -1 on a bad id. */
int tok_decode(const tok_vocab *v, const int32_t *ids, int n, char *buf, int cap);

#endif
