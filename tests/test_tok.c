/* test_tok.c — the SPM tokenizer against llama.cpp's own test vectors, an independent reference for
 * stories260K, round trips (valid UTF-8, invalid bytes, 100 KB of text), special-token parsing, the
 * merge order on a hand-built vocabulary, and the API's edge cases.
 *
 * Every vocabulary is loaded and its gguf_file closed before use, so a tokenizer that kept pointers into
 * the mapping would crash here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "toktest.h"
#include "text/tok.h"

static tok_vocab *load_data(const char *rel) { return tt_load_vocab(tu_data(rel)); }

/* Every text of name.inp encodes to the matching line of name.out. llama.cpp's
 * test-tokenizer-0 encodes without BOS and with special parsing; the texts hold no special tokens, so
 * the vectors must also hold with parse_special off — both are checked. */
static void check_one_vector(const char *text, size_t len, const int32_t *want, int n_want, void *user) {
    tt_assert_ids(user, text, len, false, true, want, n_want);
    tt_assert_ids(user, text, len, false, false, want, n_want);
}

static void check_vocab_vectors(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tokenizers/%s", name);
    tok_vocab *v = load_data(rel);
    assert_true(tu_for_each_vocab_vector(name, check_one_vector, v) >= 40);
    tok_free(v);
}

static void test_llama_spm_vocab_matches_llama_cpp_vectors(void **state) {
    (void)state;
    check_vocab_vectors("ggml-vocab-llama-spm.gguf");
}

static void test_phi3_vocab_matches_llama_cpp_vectors(void **state) {
    (void)state;
    check_vocab_vectors("ggml-vocab-phi-3.gguf");
}

static void test_stories260k_prompts_encode_to_the_reference_ids(void **state) {
    (void)state;
    tok_vocab *v = load_data("models/stories260K.gguf");
    FILE *fp = fopen(tu_data("vectors/stories260K-greedy.jsonl"), "r");
    assert_non_null(fp);
    char *line = NULL;
    size_t cap = 0;
    int n_lines = 0;
    while (getline(&line, &cap, fp) > 0) {
        json_error_t jerr;
        json_t *obj = json_loads(line, 0, &jerr);
        if (!obj) fail_msg("jsonl line %d: %s", n_lines + 1, jerr.text);
        const char *prompt = json_string_value(json_object_get(obj, "prompt"));
        json_t *ids = json_object_get(obj, "prompt_ids");
        assert_non_null(prompt);
        assert_true(json_is_array(ids));
        int32_t want[512];
        int n_want = (int)json_array_size(ids);
        assert_true(n_want > 0 && n_want <= 512);
        for (int i = 0; i < n_want; i++) want[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
        tt_assert_ids(v, prompt, strlen(prompt), true, false, want, n_want);
        json_decref(obj);
        n_lines++;
    }
    free(line);
    fclose(fp);
    assert_int_equal(n_lines, 6);
    tok_free(v);
}

typedef struct {
    const tok_vocab *v, *stories;
} round_trip_vocabs;

static void round_trip_vector(const char *text, size_t len, const int32_t *want, int n_want, void *user) {
    (void)want, (void)n_want;
    const round_trip_vocabs *r = user;
    tt_assert_round_trip(r->v, text, len, false, false);
    tt_assert_round_trip(r->v, text, len, true, false);
    tt_assert_round_trip(r->stories, text, len, true, false); /* 512 pieces: mostly byte fallback */
}

static void test_vector_texts_round_trip_through_decode(void **state) {
    (void)state;
    const char *names[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"};
    tok_vocab *stories = load_data("models/stories260K.gguf");
    for (int k = 0; k < 2; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tokenizers/%s", names[k]);
        round_trip_vocabs r = {load_data(rel), stories};
        tu_for_each_vocab_vector(names[k], round_trip_vector, &r);
        tok_free((tok_vocab *)r.v);
    }
    tok_free(stories);
}

static uint64_t rng_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Append one random character: ASCII (no '<', so no literal special token can form), whitespace, or a
 * 2-, 3- or 4-byte character (never U+2581, which decodes as a space by design). */
static size_t random_char(uint64_t *rng, char *out) {
    static const char *const pool[] = {" ", " ", "  ", "\n", "\t", "\r\n", "é", "ж", "ß", "中", "文", "€",
                                       "ｱ", "🦙", "🚀", "😶‍🌫️", "\xf4\x8f\xbf\xbf", "\xc2\x80"};
    uint64_t r = rng_next(rng) % 100;
    if (r < 60) {
        char c = (char)(' ' + rng_next(rng) % 95);
        out[0] = c == '<' ? 'x' : c;
        return 1;
    }
    const char *s = pool[rng_next(rng) % (sizeof pool / sizeof *pool)];
    size_t n = strlen(s);
    memcpy(out, s, n);
    return n;
}

static void test_random_utf8_strings_round_trip(void **state) {
    (void)state;
    tok_vocab *vs[3] = {load_data("tokenizers/ggml-vocab-llama-spm.gguf"),
                        load_data("tokenizers/ggml-vocab-phi-3.gguf"), load_data("models/stories260K.gguf")};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    char text[4096];
    for (int iter = 0; iter < 300; iter++) {
        size_t len = 0, n_chars = rng_next(&rng) % 200;
        for (size_t i = 0; i < n_chars; i++) len += random_char(&rng, text + len);
        for (int k = 0; k < 3; k++) {
            tt_assert_round_trip(vs[k], text, len, false, false);
            tt_assert_round_trip(vs[k], text, len, true, false);
        }
    }
    for (int k = 0; k < 3; k++) tok_free(vs[k]);
}

static void test_invalid_utf8_bytes_survive_byte_fallback(void **state) {
    (void)state;
    tok_vocab *vs[3] = {load_data("tokenizers/ggml-vocab-llama-spm.gguf"),
                        load_data("tokenizers/ggml-vocab-phi-3.gguf"), load_data("models/stories260K.gguf")};
    const char *fixed[] = {"\x80", "\xff\xfe", "abc\xe2\x96", "\xc3(", "caf\xc3", "\xf0\x9f\xa6", "\xed\xa0\x80",
                           "a\x00" "b"};
    const size_t fixed_len[] = {1, 2, 5, 2, 4, 3, 3, 3};
    uint64_t rng = 12345;
    char text[512];
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
            tt_assert_round_trip(vs[k], fixed[i], fixed_len[i], true, false);
        for (int iter = 0; iter < 200; iter++) {
            size_t len = rng_next(&rng) % sizeof text;
            for (size_t i = 0; i < len; i++) {
                char c = (char)(rng_next(&rng) & 0xff);
                text[i] = c == '<' || c == '\xe2' ? 'y' : c; /* no literal specials, no U+2581 */
            }
            tt_assert_round_trip(vs[k], text, len, iter % 2 == 0, false);
        }
    }
    /* llama.cpp cuts characters by the lead byte alone: "\xC3A" is one symbol, so 'A' goes out as a byte. */
    const int32_t want[] = {29871, 3 + 0xC3, 3 + 'A'};
    tt_assert_ids(vs[0], "\xc3" "A", 2, false, false, want, 3);
    /* ...but a lead byte never swallows a space (llama.cpp would, and the space would decode as "▁"):
     * "\xFB" is cut alone, then "▁a" (263) */
    const int32_t space_kept[] = {29871, 3 + 0xFB, 263};
    tt_assert_ids(vs[0], "\xfb" " a", 3, false, false, space_kept, 3);
    tt_assert_round_trip(vs[0], "x\xf8  \xe0 ", 6, false, false);
    for (int k = 0; k < 3; k++) tok_free(vs[k]);
}

static void test_parse_special_turns_literal_special_tokens_into_their_ids(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-llama-spm.gguf");
    const int32_t bos_only[] = {1};
    tt_assert_ids(v, "<s>", 3, false, true, bos_only, 1);

    int n;
    int32_t *plain = tt_encode(v, "<s>", 3, false, false, &n);
    assert_true(n > 1);
    for (int i = 0; i < n; i++) assert_int_not_equal(plain[i], 1);
    int dlen;
    char *back = tt_decode(v, plain, n, &dlen);
    assert_string_equal(back, "<s>");
    free(back);
    free(plain);

    /* text after a special token gets its own space prefix, as in llama.cpp */
    int n_hello, n_world;
    int32_t *hello = tt_encode(v, "Hello", 5, false, false, &n_hello);
    int32_t *world = tt_encode(v, "world", 5, false, false, &n_world);
    int32_t want[64];
    memcpy(want, hello, (size_t)n_hello * sizeof *want);
    want[n_hello] = 1;
    memcpy(want + n_hello + 1, world, (size_t)n_world * sizeof *want);
    tt_assert_ids(v, "Hello<s>world", 13, false, true, want, n_hello + 1 + n_world);
    const int32_t unk_and_eos[] = {0, 2};
    tt_assert_ids(v, "<unk></s>", 9, false, true, unk_and_eos, 2);
    free(hello);
    free(world);
    tok_free(v);
}

static void test_phi3_special_tokens_swallow_the_whitespace_after_them(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-phi-3.gguf");
    /* <|user|> 32010 and <|end|> 32007 eat the newline; "Hello" then gets the prefix space: ▁Hello 15043 */
    const int32_t chat[] = {32010, 15043, 32007};
    tt_assert_ids(v, "<|user|>\nHello<|end|>\n", 22, false, true, chat, 3);
    /* <|endoftext|> is exempt: the newline stays ("▁" 29871 then "\n" 13) */
    const int32_t eot[] = {32000, 29871, 13};
    tt_assert_ids(v, "<|endoftext|>\n", 14, false, true, eot, 3);
    /* "</s>" is USER_DEFINED in this file, but llama.cpp's end-of-generation list makes it CONTROL: text without
     * parse_special (▁a 263, "</" 829, "s" 29879, ">" 29958, ▁b 289), the token with it (and it swallows the
     * space after it, as phi-3's special tokens do) */
    const int32_t as_text[] = {263, 829, 29879, 29958, 289};
    tt_assert_ids(v, "a</s> b", 7, false, false, as_text, 5);
    const int32_t as_token[] = {263, 2, 289};
    tt_assert_ids(v, "a</s> b", 7, false, true, as_token, 3);
    assert_int_equal(tok_token_type(v, 2), TOK_TYPE_CONTROL);
    tok_free(v);
}

/* Whether id is among the ids of its text between two \x01 bytes. */
static bool split_out(const tok_vocab *v, int32_t id, bool parse_special) {
    size_t len;
    const char *t = tok_token_text(v, id, &len);
    char *text = malloc(len + 3);
    text[0] = '\x01';
    memcpy(text + 1, t, len);
    text[len + 1] = '\x01';
    text[len + 2] = 0;
    int n;
    int32_t *ids = tt_encode(v, text, len + 2, false, parse_special, &n);
    bool found = false;
    for (int i = 0; i < n; i++) found = found || ids[i] == id;
    free(ids);
    free(text);
    return found;
}

/* llama.cpp's tokenizer_st_partition: with parse_special = false only USER_DEFINED tokens are split out of text;
 * with it, CONTROL and UNKNOWN ones too. Checked for every special token of every vocabulary flatkv reads (a
 * token whose text is also covered by a longer special token can lose to it; none here is). */
static void test_every_special_token_follows_llama_cpps_rule_for_its_type(void **state) {
    (void)state;
    static const char *const names[] = {"llama-spm", "phi-3", "baichuan", "deepseek-coder", "deepseek-llm", "falcon",
                                        "gpt-2", "gpt-neox", "mpt", "refact", "starcoder"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char rel[96];
        snprintf(rel, sizeof rel, "tokenizers/ggml-vocab-%s.gguf", names[k]);
        tok_vocab *v = load_data(rel);
        int n_checked = 0;
        for (int32_t id = 0; id < tok_n_vocab(v); id++) {
            tok_type t = tok_token_type(v, id);
            if (t != TOK_TYPE_CONTROL && t != TOK_TYPE_UNKNOWN && t != TOK_TYPE_USER_DEFINED) continue;
            size_t len;
            const char *text = tok_token_text(v, id, &len);
            if (len == 0 || memchr(text, '\x01', len)) continue;
            bool plain = split_out(v, id, false), parsed = split_out(v, id, true);
            if (plain != (t == TOK_TYPE_USER_DEFINED) || !parsed)
                fail_msg("%s: token %d '%.*s' (type %d): split out without parse_special %d, with it %d", names[k],
                         (int)id, (int)len, text, (int)t, plain, parsed);
            n_checked++;
        }
        assert_true(n_checked > 0);
        tok_free(v);
    }
}

/* The types llama.cpp's loader gives by text, where the files say otherwise (llama-vocab.cpp: its EOG list and
 * FIM detection make tokens CONTROL; FIM pad/repo tokens end generation). */
static void test_token_types_are_corrected_by_text_as_llama_cpp_does(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-deepseek-coder.gguf");
    /* <｜fim▁hole｜> 32015, <｜fim▁begin｜> 32016, <｜fim▁end｜> 32017 are USER_DEFINED in the file */
    for (int32_t id = 32015; id <= 32017; id++) assert_int_equal(tok_token_type(v, id), TOK_TYPE_CONTROL);
    assert_int_equal(tok_token_type(v, 32000), TOK_TYPE_USER_DEFINED); /* "õ" keeps its type */
    assert_false(tok_is_eog(v, 32016));
    tok_free(v);

    v = load_data("tokenizers/ggml-vocab-refact.gguf");
    assert_true(tok_is_eog(v, 0));   /* <|endoftext|> */
    assert_true(tok_is_eog(v, 4));   /* <fim_pad> */
    assert_true(tok_is_eog(v, 18));  /* <reponame> */
    assert_false(tok_is_eog(v, 1));  /* <fim_prefix> */
    tok_free(v);

    v = load_data("tokenizers/ggml-vocab-llama-spm.gguf");
    int n;
    int32_t *ids = tt_encode(v, "</s>", 4, false, false, &n); /* CONTROL in the file: "</s>" stays text */
    assert_true(n > 1);
    for (int i = 0; i < n; i++) assert_int_not_equal(ids[i], 2);
    free(ids);
    tok_free(v);
}

/* tok_encode_spans: control tokens are parsed outside the plain spans and are text inside them, and the text
 * around them is encoded as one fragment across the spans' edges. */
static void test_control_tokens_inside_plain_spans_stay_text(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-phi-3.gguf");
    const char text[] = "<|user|>\nHi <|end|> there<|end|>\n<|assistant|>\n";
    const size_t len = sizeof text - 1;
    const tok_span plain[] = {{9, 16}}; /* "Hi <|end|> there" */
    fkv_error err = {0};
    int32_t ids[64];
    int n = tok_encode_spans(v, text, len, false, true, plain, 1, ids, 64, &err);
    if (n < 0) fail_msg("%s", err.msg);
    int n_end = 0, n_user = 0;
    for (int i = 0; i < n; i++) n_end += ids[i] == 32007, n_user += ids[i] == 32010;
    assert_int_equal(n_user, 1);
    assert_int_equal(n_end, 1); /* the template's, not the content's */
    /* the content's ids are what the whole content gives as plain text */
    int n_plain;
    int32_t *want = tt_encode(v, "Hi <|end|> there", 16, false, false, &n_plain);
    assert_int_equal(ids[0], 32010);
    assert_memory_equal(ids + 1, want, (size_t)n_plain * sizeof *want);
    assert_int_equal(ids[1 + n_plain], 32007);
    free(want);
    /* without spans the same text parses all three */
    int all = tok_encode_spans(v, text, len, false, true, NULL, 0, ids, 64, &err);
    n_end = 0;
    for (int i = 0; i < all; i++) n_end += ids[i] == 32007;
    assert_int_equal(n_end, 2);
    /* spans out of order or past the text are refused */
    const tok_span bad[] = {{9, 5}, {10, 2}};
    assert_int_equal(tok_encode_spans(v, text, len, false, true, bad, 2, ids, 64, &err), -1);
    const tok_span past[] = {{40, 100}};
    assert_int_equal(tok_encode_spans(v, text, len, false, true, past, 1, ids, 64, &err), -1);
    tok_free(v);
}

/* The id whose piece is text (fails when none is). */
static int32_t piece_id(const tok_vocab *v, const char *text) {
    for (int32_t id = 0; id < tok_n_vocab(v); id++) {
        size_t len;
        const char *piece = tok_token_text(v, id, &len);
        if (len == strlen(text) && !memcmp(piece, text, len)) return id;
    }
    fail_msg("no piece '%s'", text);
    return -1;
}

/* tok_encode_after: a continuation after a text token gets no SPM space prefix, as the same text gets none inside
 * a fragment; after a control token (or at the start) it gets the prefix tok_encode gives a text. */
static void test_a_continuation_gets_the_space_prefix_only_after_a_special_token(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-llama-spm.gguf");
    const char text[] = "Hello world";
    fkv_error err = {0};
    int32_t after_text[16], after_bos[16], start[16];
    int32_t word = piece_id(v, "\xe2\x96\x81the"); /* "▁the": a normal token */
    int n = tok_encode_after(v, word, text, strlen(text), true, NULL, 0, after_text, 16, &err);
    int n_bos = tok_encode_after(v, tok_bos(v), text, strlen(text), true, NULL, 0, after_bos, 16, &err);
    int n_start = tok_encode_after(v, -1, text, strlen(text), true, NULL, 0, start, 16, &err);
    int n_plain;
    int32_t *plain = tt_encode(v, text, strlen(text), false, true, &n_plain); /* "▁Hello ▁world" */
    assert_int_equal(n_bos, n_plain);
    assert_memory_equal(after_bos, plain, sizeof *plain * (size_t)n_plain);
    assert_int_equal(n_start, n_plain);
    assert_memory_equal(start, plain, sizeof *plain * (size_t)n_plain);
    assert_int_equal(n, 2);
    assert_int_not_equal(after_text[0], plain[0]); /* "Hello", not "▁Hello" */
    assert_int_equal(after_text[0], piece_id(v, "Hello"));
    assert_int_equal(after_text[1], plain[1]);
    free(plain);
    tok_free(v);
}

static void test_end_of_generation_covers_eos_and_end_of_turn_markers(void **state) {
    (void)state;
    tok_vocab *llama = load_data("tokenizers/ggml-vocab-llama-spm.gguf");
    assert_int_equal(tok_bos(llama), 1);
    assert_int_equal(tok_eos(llama), 2);
    assert_true(tok_add_bos(llama));
    assert_true(tok_is_eog(llama, 2));
    assert_false(tok_is_eog(llama, 1));
    assert_false(tok_is_eog(llama, 15043));
    assert_false(tok_is_eog(llama, -1));
    assert_false(tok_is_eog(llama, tok_n_vocab(llama)));
    assert_int_equal(tok_token_type(llama, 1), TOK_TYPE_CONTROL);
    assert_int_equal(tok_token_type(llama, 3), TOK_TYPE_BYTE);
    assert_int_equal(tok_token_type(llama, 0), TOK_TYPE_UNKNOWN);
    tok_free(llama);

    tok_vocab *phi3 = load_data("tokenizers/ggml-vocab-phi-3.gguf");
    assert_int_equal(tok_n_vocab(phi3), 32064);
    assert_int_equal(tok_eos(phi3), 32000);
    assert_true(tok_is_eog(phi3, 32000)); /* <|endoftext|>, the EOS */
    assert_true(tok_is_eog(phi3, 32007)); /* <|end|> */
    assert_false(tok_is_eog(phi3, 32010)); /* <|user|> */
    assert_true(tok_is_eog(phi3, 2));      /* </s>: on llama.cpp's end-of-generation list */
    tok_free(phi3);
}

static void test_encode_returns_the_full_count_when_cap_is_too_small(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-llama-spm.gguf");
    tt_assert_cap_protocol(v, 1);
    tok_free(v);
}

static void test_bad_ids_are_refused_by_piece_and_decode(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-llama-spm.gguf");
    char buf[64];
    assert_int_equal(tok_piece(v, -1, -1, buf, sizeof buf), -1);
    assert_int_equal(tok_piece(v, -1, tok_n_vocab(v), buf, sizeof buf), -1);
    const int32_t ids[] = {1, 15043, 32000};
    assert_int_equal(tok_decode(v, ids, 3, buf, sizeof buf), -1);
    const int32_t neg[] = {15043, -5};
    assert_int_equal(tok_decode(v, neg, 2, buf, sizeof buf), -1);
    tok_free(v);
}

static void test_pieces_drop_the_prefix_space_only_at_the_start(void **state) {
    (void)state;
    tok_vocab *v = load_data("tokenizers/ggml-vocab-llama-spm.gguf");
    char buf[64];
    int n = tok_piece(v, -1, 15043, buf, sizeof buf); /* "▁Hello" */
    assert_int_equal(n, 5);
    assert_memory_equal(buf, "Hello", 5);
    n = tok_piece(v, 1, 15043, buf, sizeof buf); /* after BOS */
    assert_int_equal(n, 5);
    n = tok_piece(v, 3186, 15043, buf, sizeof buf); /* after another word */
    assert_int_equal(n, 6);
    assert_memory_equal(buf, " Hello", 6);
    assert_int_equal(tok_piece(v, -1, 1, buf, sizeof buf), 0);  /* BOS prints nothing */
    assert_int_equal(tok_piece(v, 5, 3 + 'A', buf, sizeof buf), 1); /* <0x41> */
    assert_int_equal(buf[0], 'A');
    assert_int_equal(tok_piece(v, 5, 15043, buf, 2), 6);            /* truncated: full length back */
    assert_memory_equal(buf, " H", 2);

    const int32_t ids[] = {1, 15043, 3186};
    assert_int_equal(tok_decode(v, ids, 3, buf, 4), 11);             /* "Hello world" */
    assert_int_equal(tok_decode(v, ids, 3, buf, sizeof buf), 11);
    assert_string_equal(buf, "Hello world");
    tok_free(v);
}

/* A small SPM vocabulary written with gguf_writer: the merge order is decided by score, then position. */
static tok_vocab *build_vocab(const char *const *pieces, const float *scores, const int32_t *types, int n,
                              bool add_space_prefix, fkv_error *err) {
    gguf_str items[32];
    for (int i = 0; i < n; i++) items[i] = (gguf_str){pieces[i], strlen(pieces[i])};
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", items, (uint64_t)n);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)n);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", add_space_prefix);
    const char *path = tu_tmp_path(".gguf");
    assert_int_equal(gguf_writer_write(w, path, err), 0);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, err);
    assert_non_null(f);
    tok_vocab *v = tok_load(f, err);
    gguf_close(f);
    remove(path);
    return v;
}

static void test_merges_take_the_highest_score_then_the_leftmost_pair(void **state) {
    (void)state;
    fkv_error err = {0};
    /* ids:                      0        1      2       3          4    5    6     7     8 */
    const char *const pieces[] = {"<unk>", "<s>", "</s>", "\u2581", "a", "b", "ab", "ba", "\u2581a"};
    const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    const float by_score[] = {0, 0, 0, -1, -1, -1, -3, -2, -9}; /* "ba" outranks "ab" */
    tok_vocab *v = build_vocab(pieces, by_score, types, 9, false, &err);
    if (!v) fail_msg("%s", err.msg);
    const int32_t a_ba[] = {4, 7};
    tt_assert_ids(v, "aba", 3, false, false, a_ba, 2);
    /* no byte tokens in this vocabulary: an unknown character is UNK, and decodes to nothing */
    const int32_t with_unk[] = {4, 0, 5};
    tt_assert_ids(v, "a\xc3\xa9" "b", 4, false, false, with_unk, 3);
    tok_free(v);

    const float tied[] = {0, 0, 0, -1, -1, -1, -2, -2, -9}; /* equal scores: the leftmost pair first */
    v = build_vocab(pieces, tied, types, 9, true, &err);
    if (!v) fail_msg("%s", err.msg);
    const int32_t ab_a[] = {3, 6, 4}; /* "▁aba": ▁a (-9) loses to ab; ab and ba tie, ab is left */
    tt_assert_ids(v, "aba", 3, false, false, ab_a, 3);
    const int32_t space_a[] = {8}; /* "▁a" is the only merge available */
    tt_assert_ids(v, "a", 1, false, false, space_a, 1);
    tok_free(v);
}

static void test_load_refuses_files_without_a_llama_tokenizer(void **state) {
    (void)state;
    fkv_error err = {0};
    const char *path = tu_tmp_path(".gguf");

    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "llama");
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, &err);
    assert_non_null(f);
    assert_null(tok_load(f, &err));
    assert_non_null(strstr(err.msg, "tokenizer.ggml.model"));
    gguf_close(f);

    const gguf_str toks[] = {{"<unk>", 5}, {"a", 1}};
    w = gguf_writer_new();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 2);
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    gguf_writer_free(w);
    f = gguf_open(path, &err);
    assert_non_null(f);
    err.msg[0] = 0;
    assert_null(tok_load(f, &err));
    assert_non_null(strstr(err.msg, "'gpt2'"));
    gguf_close(f);

    /* a llama model without its token list */
    w = gguf_writer_new();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    gguf_writer_free(w);
    f = gguf_open(path, &err);
    assert_non_null(f);
    err.msg[0] = 0;
    assert_null(tok_load(f, &err));
    assert_non_null(strstr(err.msg, "tokenizer.ggml.tokens"));
    gguf_close(f);

    /* scores that do not match the token count */
    const float one_score[] = {0.0f};
    w = gguf_writer_new();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 2);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, one_score, 1);
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    gguf_writer_free(w);
    f = gguf_open(path, &err);
    assert_non_null(f);
    err.msg[0] = 0;
    assert_null(tok_load(f, &err));
    assert_non_null(strstr(err.msg, "tokenizer.ggml.scores"));
    gguf_close(f);
    remove(path);
}

/* 100 KB of prose-like text encodes and round-trips (no time limit asserted; the whole test must still
 * run in well under a second, which a quadratic merge or a linear piece lookup would not). */
static void test_a_100kb_text_encodes_and_round_trips(void **state) {
    (void)state;
    static const char *const words[] = {"the",   "Once",  "upon", "a",     "time", "little", "girl",  "named",
                                        "Lily",  "park",  ",",    ".",     "\n",   "  ",     "\t",    "über",
                                        "naïve", "日本語", "🦙",   "1234",  "don't", "(x)",   "λx.x",  "é"};
    const size_t target = 100 * 1024;
    char *text = malloc(target + 64);
    assert_non_null(text);
    uint64_t rng = 777;
    size_t len = 0;
    while (len < target) {
        const char *w = words[rng_next(&rng) % (sizeof words / sizeof *words)];
        size_t n = strlen(w);
        memcpy(text + len, w, n);
        len += n;
        text[len++] = ' ';
    }
    const char *vocabs[] = {"tokenizers/ggml-vocab-llama-spm.gguf", "tokenizers/ggml-vocab-phi-3.gguf",
                            "models/stories260K.gguf"};
    for (int k = 0; k < 3; k++) {
        tok_vocab *v = load_data(vocabs[k]);
        int n;
        int32_t *ids = tt_encode(v, text, len, true, true, &n);
        assert_true(n > 10000);
        int dlen;
        char *back = tt_decode(v, ids, n, &dlen);
        assert_int_equal(dlen, len);
        assert_memory_equal(back, text, len);
        free(ids);
        free(back);
        tok_free(v);
    }
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm_vocab_matches_llama_cpp_vectors),
        cmocka_unit_test(test_phi3_vocab_matches_llama_cpp_vectors),
        cmocka_unit_test(test_stories260k_prompts_encode_to_the_reference_ids),
        cmocka_unit_test(test_vector_texts_round_trip_through_decode),
        cmocka_unit_test(test_random_utf8_strings_round_trip),
        cmocka_unit_test(test_invalid_utf8_bytes_survive_byte_fallback),
        cmocka_unit_test(test_parse_special_turns_literal_special_tokens_into_their_ids),
        cmocka_unit_test(test_phi3_special_tokens_swallow_the_whitespace_after_them),
        cmocka_unit_test(test_end_of_generation_covers_eos_and_end_of_turn_markers),
        cmocka_unit_test(test_every_special_token_follows_llama_cpps_rule_for_its_type),
        cmocka_unit_test(test_token_types_are_corrected_by_text_as_llama_cpp_does),
        cmocka_unit_test(test_control_tokens_inside_plain_spans_stay_text),
        cmocka_unit_test(test_a_continuation_gets_the_space_prefix_only_after_a_special_token),
        cmocka_unit_test(test_encode_returns_the_full_count_when_cap_is_too_small),
        cmocka_unit_test(test_bad_ids_are_refused_by_piece_and_decode),
        cmocka_unit_test(test_pieces_drop_the_prefix_space_only_at_the_start),
        cmocka_unit_test(test_merges_take_the_highest_score_then_the_leftmost_pair),
        cmocka_unit_test(test_load_refuses_files_without_a_llama_tokenizer),
        cmocka_unit_test(test_a_100kb_text_encodes_and_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
