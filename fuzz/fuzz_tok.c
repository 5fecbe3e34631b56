/* fuzz_tok.c — both tokenizers (src/text/tok.c SentencePiece, src/text/tok_bpe.c byte-level BPE) on arbitrary bytes, with
 * real vocabularies from data/tokenizers, special-token parsing on and off.
 *
 * Input: byte 0 picks the vocabulary (llama-spm, phi-3: SPM; gpt-2, starcoder, deepseek-coder: BPE) and the flags
 * (parse_special, add_bos); the rest is the text. Asserts, besides memory safety:
 * - tok_encode's counting protocol: a call with cap 0 returns the same count as one with room for every id;
 * - every id is inside the vocabulary, and tok_decode's length is the sum of tok_piece's lengths;
 * - round trip (tok.h): without parse_special, tok_decode(tok_encode(text)) == text for SPM and every valid UTF-8
 *   text without U+2581 (the space symbol, decoded as a space), and for GPT-2's vocabulary (all 256 byte
 *   characters) for every byte string;
 * - with parse_special, tok_encode_spans with the whole text as one plain span gives exactly the ids of
 *   tok_encode without parse_special (tok.h: a control token's text inside a plain span stays text).
 */
#include <stdint.h>

#include "fuzz.h"
#include "gguf/gguf.h"
#include "text/tok.h"

static const struct {
    const char *file;
    bool all_bytes; /* decode(encode(bytes)) == bytes for any bytes, not only valid UTF-8 */
    bool bpe;
} vocab_files[] = {
    {"tokenizers/ggml-vocab-llama-spm.gguf", false, false},
    {"tokenizers/ggml-vocab-phi-3.gguf", false, false},
    {"tokenizers/ggml-vocab-gpt-2.gguf", true, true},
    {"tokenizers/ggml-vocab-starcoder.gguf", false, true},
    {"tokenizers/ggml-vocab-deepseek-coder.gguf", false, true},
};
#define N_VOCABS (sizeof vocab_files / sizeof *vocab_files)
static tok_vocab *vocabs[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (size_t i = 0; i < N_VOCABS; i++) {
        char path[4096];
        fkv_error err = {0};
        gguf_file *f = gguf_open(fuzz_data(vocab_files[i].file, path, sizeof path), &err);
        if (!f || !(vocabs[i] = tok_load(f, &err))) {
            fprintf(stderr, "fuzz_tok: %s\n", err.msg);
            abort();
        }
        gguf_close(f); /* the vocabulary copies what it needs (tok.h) */
    }
    return 0;
}

/* Encode into a malloc'd array (*n ids), checking the counting protocol. */
static int32_t *encode(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool special,
                       const tok_span *plain, size_t n_plain, int *n) {
    fkv_error err = {0};
    int count = plain ? tok_encode_spans(v, text, len, add_bos, special, plain, n_plain, NULL, 0, &err)
                      : tok_encode(v, text, len, add_bos, special, NULL, 0, &err);
    FUZZ_CHECK(count >= 0, "encoding %zu bytes failed: %s", len, err.msg);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(count + 1));
    FUZZ_CHECK(ids, "out of memory");
    int again = plain ? tok_encode_spans(v, text, len, add_bos, special, plain, n_plain, ids, count + 1, &err)
                      : tok_encode(v, text, len, add_bos, special, ids, count + 1, &err);
    FUZZ_CHECK(again == count, "cap 0 counted %d ids, a full buffer got %d", count, again);
    *n = count;
    return ids;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t which = data[0] % N_VOCABS;
    const bool special = data[0] & 0x10, add_bos = data[0] & 0x20;
    const tok_vocab *v = vocabs[which];
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;

    int n;
    int32_t *ids = encode(v, text, len, add_bos, special, NULL, 0, &n);
    const int32_t n_vocab = tok_n_vocab(v);
    int sum = 0;
    char piece[512];
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < n_vocab, "id %d at %d outside the vocabulary of %d", ids[i], i, n_vocab);
        int k = tok_piece(v, i ? ids[i - 1] : -1, ids[i], piece, sizeof piece);
        FUZZ_CHECK(k >= 0, "tok_piece refused id %d", ids[i]);
        sum += k;
    }
    int dlen = tok_decode(v, ids, n, NULL, 0);
    FUZZ_CHECK(dlen == sum, "tok_decode's length %d, the pieces' %d", dlen, sum);
    char *dec = malloc((size_t)dlen + 1);
    FUZZ_CHECK(dec, "out of memory");
    FUZZ_CHECK(tok_decode(v, ids, n, dec, dlen + 1) == dlen, "tok_decode's length changed with the buffer");

    /* SPM: a literal U+2581 in the text is the space symbol itself and decodes as a space, as in llama.cpp. */
    const bool spm_text = !vocab_files[which].bpe && fuzz_utf8_valid(text, len) &&
                          !fuzz_contains(text, len, "\xe2\x96\x81", 3);
    if (!special && (vocab_files[which].all_bytes || spm_text))
        FUZZ_CHECK(dlen == (int)len && !memcmp(dec, text, len), "%s: decode(encode(%zu bytes)) gave %d bytes",
                   vocab_files[which].file, len, dlen);

    if (special) {
        tok_span all = {0, len};
        int n_plain, n_off;
        int32_t *plain = encode(v, text, len, add_bos, true, &all, 1, &n_plain);
        int32_t *off = encode(v, text, len, add_bos, false, NULL, 0, &n_off);
        FUZZ_CHECK(n_plain == n_off && !memcmp(plain, off, sizeof(int32_t) * (size_t)n_off),
                   "%s: a plain span over the whole text gave %d ids, no parse_special %d", vocab_files[which].file,
                   n_plain, n_off);
        free(plain);
        free(off);
    }
    free(dec);
    free(ids);
    return 0;
}
