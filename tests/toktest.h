/* toktest.h — what the tokenizer tests (test_tok.c: SentencePiece, test_tok_bpe.c: byte-level BPE) share: a vocabulary
 * loaded from a GGUF, encoding and decoding into fresh buffers, and the two assertions every tokenizer test makes. */
#ifndef FKV_TOKTEST_H
#define FKV_TOKTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/tok.h"

/* The vocabulary of the GGUF at path; fails the test when it does not load. */
tok_vocab *tt_load_vocab(const char *path);
/* The ids of text; *n gets the count. The caller frees. */
int32_t *tt_encode(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special, int *n);
/* The decoded text of ids, NUL-terminated; *len gets its length. The caller frees. */
char *tt_decode(const tok_vocab *v, const int32_t *ids, int n, int *len);
void tt_print_ids(const char *label, const int32_t *ids, int n);
/* text encodes to exactly want[0..n_want). */
void tt_assert_ids(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                   const int32_t *want, int n_want);
/* tok_encode's protocol on a sentence: past cap, ids are only counted (the full count returned, nothing written past
 * cap); the empty text is no ids, or just BOS (bos). */
void tt_assert_cap_protocol(const tok_vocab *v, int32_t bos);
/* Decoding text's ids gives text back, byte for byte. */
void tt_assert_round_trip(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special);

#endif
