/* test_grammar.c — the grammar engine (src/constrain/grammar.h): GBNF errors with their positions, what each construct accepts
 * and refuses, repetition bounds, UTF-8 classes and characters split across tokens, masks on real vocabularies
 * against a brute force (every token's bytes tried alone, and replayed from a fresh state), JSON Schemas whose
 * generated outputs parse and validate while invalid documents are refused, unsupported keywords named with their
 * path, and hostile grammars that hit the bounds without crashing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "constrain/grammar.h"
#include "testutil.h"
#include "text/tok.h"

/* ---- helpers ---- */

static grammar *must_parse(const char *text) {
    fkv_error err = {0};
    grammar *g = grammar_parse(text, strlen(text), &err);
    if (!g) fail_msg("grammar_parse: %s\n%s", err.msg, text);
    return g;
}

static void assert_parse_error(const char *text, const char *want) {
    fkv_error err = {0};
    grammar *g = grammar_parse(text, strlen(text), &err);
    if (g) fail_msg("expected an error containing \"%s\" for:\n%s", want, text);
    if (!strstr(err.msg, want)) fail_msg("error \"%s\" does not contain \"%s\"", err.msg, want);
}

/* 1: the whole text is a sentence; 0: a prefix of one; -1: refused. */
static int match(const grammar *g, const char *text, size_t len) {
    fkv_error err = {0};
    grammar_state *s = grammar_state_new(g, &err);
    assert_non_null(s);
    int r = grammar_accept_bytes(s, text, len) ? -1 : grammar_complete(s) ? 1 : 0;
    grammar_state_free(s);
    return r;
}

static int matchs(const grammar *g, const char *text) { return match(g, text, strlen(text)); }

/* Each text against the grammar: want[i] is 1 (sentence), 0 (prefix only) or -1 (refused). */
static void check_texts(const char *gbnf, const char *const *texts, const int *want, size_t n) {
    grammar *g = must_parse(gbnf);
    for (size_t i = 0; i < n; i++) {
        int got = matchs(g, texts[i]);
        if (got != want[i]) fail_msg("grammar:\n%s\ntext \"%s\": got %d, want %d", gbnf, texts[i], got, want[i]);
    }
    grammar_free(g);
}

#define CHECK(gbnf, ...)                                                                                              \
    do {                                                                                                              \
        static const struct {                                                                                         \
            const char *text;                                                                                         \
            int want;                                                                                                 \
        } cases_[] = {__VA_ARGS__};                                                                                   \
        const char *texts_[sizeof cases_ / sizeof *cases_];                                                           \
        int want_[sizeof cases_ / sizeof *cases_];                                                                    \
        for (size_t i_ = 0; i_ < sizeof cases_ / sizeof *cases_; i_++) texts_[i_] = cases_[i_].text, want_[i_] = cases_[i_].want; \
        check_texts(gbnf, texts_, want_, sizeof cases_ / sizeof *cases_);                                             \
    } while (0)

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* ---- parse errors ---- */

static void test_parse_errors_name_the_line_and_column(void **state) {
    (void)state;
    assert_parse_error("root ::= \"abc", "line 1, column 10: unterminated literal");
    assert_parse_error("root ::= [a-z", "line 1, column 10: unterminated character class");
    assert_parse_error("root ::= (\"a\" \"b\"", "line 1, column 10: '(' without a matching ')'");
    assert_parse_error("root ::= \"a\" )", "line 1, column 14: ')' without a matching '('");
    assert_parse_error("root ::= foo\n", "line 1, column 10: undefined rule 'foo'");
    assert_parse_error("root ::= \"a\"\n\n  x ::= y\n", "line 3, column 9: undefined rule 'y'");
    assert_parse_error("root ::= \"a\"\nroot ::= \"b\"\n",
                       "line 2, column 1: rule 'root' is defined twice (first at line 1, column 1)");
    assert_parse_error("start ::= \"a\"\n", "no rule named 'root'");
    assert_parse_error("", "no rule named 'root'");
    assert_parse_error("root \"a\"\n", "line 1, column 6: expected '::=' after the rule name");
    assert_parse_error("root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'");
    assert_parse_error("root ::= \"\\x4\"", "line 1, column 11: expected 2 hex digits after '\\x'");
    assert_parse_error("root ::= \"\\U00110000\"", "past U+10FFFF");
    assert_parse_error("root ::= \"\xc3\x28\"", "line 1, column 11: invalid UTF-8");
    assert_parse_error("root ::= [z-a]", "line 1, column 11: character range U+007A-U+0061 is reversed");
    assert_parse_error("root ::= * \"a\"", "line 1, column 10: '*' has nothing to repeat");
    assert_parse_error("root ::= \"\"+", "'+' has nothing to repeat");
    assert_parse_error("root ::= \"a\"{3,2}", "has its minimum above its maximum");
    assert_parse_error("root ::= \"a\"{2", "line 1, column 15: expected ',' or '}'");
    assert_parse_error("root ::= \"a\"{0,100000}", "line 1, column 16: repetition count is larger than 10000");
    assert_parse_error("root ::= <[12]>", "line 1, column 10: token references (<...>) are not supported");
    assert_parse_error("root ::= \"a\" ? ?\nx ::= ::=", "line 2, column 7: unexpected ':'");
    assert_parse_error("root ::= \"a\"\n::= \"b\"", "line 2, column 1: expected a rule name");
}

static void test_left_recursion_is_refused_naming_the_rule(void **state) {
    (void)state;
    assert_parse_error("root ::= root \"a\" | \"b\"\n", "line 1, column 1: left recursion: rule 'root'");
    assert_parse_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"\n", "left recursion: rule 'a'");
    /* through a rule that can be empty */
    assert_parse_error("root ::= e root \"a\" | \"b\"\ne ::= \"\" | \"c\"\n", "left recursion: rule 'root'");
    /* a repetition of something that can be empty */
    assert_parse_error("root ::= (\"a\"?)*\n", "left recursion: rule 'root'");
    /* not left recursion: recursion after a terminal, or a counted repetition of something empty */
    grammar *g = must_parse("root ::= \"(\" root \")\" | \"\"\n");
    assert_int_equal(matchs(g, "(())"), 1);
    assert_int_equal(matchs(g, "(()"), 0);
    assert_int_equal(matchs(g, "())"), -1);
    grammar_free(g);
    g = must_parse("root ::= (\"a\"?){3}\n");
    assert_int_equal(matchs(g, "aa"), 1);
    assert_int_equal(matchs(g, "aaaa"), -1);
    grammar_free(g);
}

static void test_nesting_and_size_are_bounded(void **state) {
    (void)state;
    char deep[4096] = "root ::= ";
    for (int i = 0; i < GRAMMAR_MAX_NESTING + 1; i++) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < GRAMMAR_MAX_NESTING + 1; i++) strcat(deep, ")");
    assert_parse_error(deep, "parentheses nested deeper than 256");
    /* a counted repetition copies its item once per count: 10000 copies of a 200-character literal are too many */
    char big[512] = "root ::= \"";
    for (int i = 0; i < 200; i++) strcat(big, "x");
    strcat(big, "\"{10000}");
    assert_parse_error(big, "grammar too large");
    /* nested counts go through rules, not copies: (x{100}){100} nested four deep and 10000 * 10000 stay small */
    grammar *n = must_parse("root ::= (((\"a\"{100}){100}){100}){100}\n");
    grammar_free(n);
    grammar *g = must_parse("root ::= x{0,10000}\nx ::= \"a\" [b-z]{0,10000}\n");
    assert_int_equal(matchs(g, "abcab"), 1);
    assert_int_equal(matchs(g, "b"), -1);
    grammar_free(g);
}

/* ---- constructs ---- */

static void test_each_construct_accepts_and_refuses_what_it_should(void **state) {
    (void)state;
    CHECK("root ::= \"abc\"", {"abc", 1}, {"ab", 0}, {"", 0}, {"abd", -1}, {"abcd", -1});
    CHECK("root ::= \"a\" | \"bc\" | \"\"", {"", 1}, {"a", 1}, {"bc", 1}, {"b", 0}, {"ab", -1});
    CHECK("root ::= (\"a\" | \"b\") \"c\"", {"ac", 1}, {"bc", 1}, {"c", -1}, {"abc", -1});
    CHECK("root ::= [a-cx]", {"a", 1}, {"c", 1}, {"x", 1}, {"d", -1}, {"w", -1});
    CHECK("root ::= [^a-c\\n]", {"d", 1}, {"\xc3\xa9", 1}, {"a", -1}, {"\n", -1});
    CHECK("root ::= .", {"x", 1}, {"\n", 1}, {"\xe4\xb8\xad", 1}, {"\xf0\x9f\x98\x80", 1}, {"xy", -1});
    CHECK("root ::= \"a\"*", {"", 1}, {"aaaa", 1}, {"b", -1});
    CHECK("root ::= \"a\"+", {"", 0}, {"a", 1}, {"aaa", 1});
    CHECK("root ::= \"a\"? \"b\"", {"b", 1}, {"ab", 1}, {"aab", -1});
    CHECK("root ::= \"ab\"{2}", {"abab", 1}, {"ab", 0}, {"ababab", -1});
    CHECK("root ::= \"a\"{2,}", {"a", 0}, {"aa", 1}, {"aaaaaaa", 1});
    CHECK("root ::= \"a\"{1,3} \"b\"", {"ab", 1}, {"aaab", 1}, {"aaaab", -1}, {"b", -1});
    CHECK("root ::= [a-z]{0,0} \"x\"", {"x", 1}, {"ax", -1});
    /* escapes, comments, a newline after | continuing the rule, names with digits, '-' and '_' */
    CHECK("# a comment\nroot ::= \"\\n\\t\\\"\\\\\\x41\\u00e9\\U0001F600\" | # why\n  tail-2_x\ntail-2_x ::= [\\]\\-\\[]",
          {"\n\t\"\\A\xc3\xa9\xf0\x9f\x98\x80", 1}, {"]", 1}, {"-", 1}, {"[", 1}, {"x", -1});
    /* newlines inside parentheses */
    CHECK("root ::= (\n  \"a\"\n  | \"b\"\n)\n", {"a", 1}, {"b", 1});
    /* a '-' at the end of a class is a character */
    CHECK("root ::= [a-]+", {"a-a", 1}, {"b", -1});
}

static void test_repetition_bounds_are_exact_on_both_sides_of_the_chain_threshold(void **state) {
    (void)state;
    /* up to 8 required copies are written out; more become a chain of rules: both must count exactly */
    static const struct {
        int min, max;
    } bounds[] = {{0, 1}, {2, 5}, {8, 8}, {9, 9}, {9, 30}, {0, 40}, {25, 25}, {12, -1}};
    for (size_t b = 0; b < sizeof bounds / sizeof *bounds; b++) {
        char gbnf[128], text[128];
        if (bounds[b].max < 0) snprintf(gbnf, sizeof gbnf, "root ::= [a-c]{%d,} \"!\"", bounds[b].min);
        else snprintf(gbnf, sizeof gbnf, "root ::= [a-c]{%d,%d} \"!\"", bounds[b].min, bounds[b].max);
        grammar *g = must_parse(gbnf);
        for (int n = 0; n <= 45; n++) {
            for (int i = 0; i < n; i++) text[i] = (char)('a' + i % 3);
            text[n] = '!';
            bool in = n >= bounds[b].min && (bounds[b].max < 0 || n <= bounds[b].max);
            int got = match(g, text, (size_t)n + 1);
            if (got != (in ? 1 : -1)) fail_msg("%s with %d letters: got %d", gbnf, n, got);
        }
        grammar_free(g);
    }
}

/* ---- UTF-8 ---- */

static void test_utf8_classes_accept_valid_characters_only(void **state) {
    (void)state;
    CHECK("root ::= [ぁ-ゟ]+", {"あい", 1}, {"\xe3\x81", 0}, {"\xe3", 0}, {"a", -1}, {"\xe3\x81\x41", -1});
    /* negation covers every other code point, encoded validly: no overlong forms, surrogates or bytes past F4 */
    CHECK("root ::= [^a]*", {"b\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 1}, {"\xc0\x80", -1}, {"\xed\xa0\x80", -1},
          {"\xf5\x80\x80\x80", -1}, {"\x80", -1}, {"\xe0\x80\x80", -1}, {"\xf4\x90\x80\x80", -1});
    CHECK("root ::= [\\U0001F600-\\U0001F64F]", {"\xf0\x9f\x98\x80", 1}, {"\xf0\x9f\x99\x8f", 1},
          {"\xf0\x9f\x99\x90", -1}, {"\xf0\x9f", 0});
    /* a class with ASCII, two- and three-byte members and ranges that cut UTF-8 blocks mid-way */
    CHECK("root ::= [a\\u00e9\\u0100-\\u0800\\u4e00-\\u4e2d]", {"a", 1}, {"\xc3\xa9", 1}, {"\xc4\x80", 1},
          {"\xe0\xa0\x80", 1}, {"\xe0\xa0\x81", -1}, {"\xe4\xb8\xad", 1}, {"\xe4\xb8\xae", -1}, {"\xc3\xa8", -1});
    /* surrogates in a class are dropped (UTF-8 cannot carry them), a literal surrogate never matches */
    CHECK("root ::= [\\uD700-\\uE000]", {"\xed\x9f\xbf", 1}, {"\xee\x80\x80", 1}, {"\xed\xa0\x80", -1});
    CHECK("root ::= \"\\uD800\" | \"x\"", {"x", 1}, {"\xed\xa0\x80", -1});
}

static void test_a_character_may_be_split_across_tokens(void **state) {
    (void)state;
    grammar *g = must_parse("root ::= [ぁ-ゟ]+ \"!\"");
    /* あ = E3 81 82: tokens ending inside it, starting inside it, and one with invalid bytes */
    const char *pieces[] = {"\xe3", "\x81\x82", "\xe3\x81", "\x82", "a", "\xe3\x81\x82!", "!", "\x81", "\xe3\x41"};
    size_t len[9];
    for (int i = 0; i < 9; i++) len[i] = strlen(pieces[i]);
    bool eog[9] = {0};
    fkv_error err = {0};
    grammar_vocab *gv = grammar_vocab_new_pieces(9, pieces, len, eog, &err);
    assert_non_null(gv);
    grammar_state *s = grammar_state_new(g, &err);
    uint8_t m[9];
    grammar_allowed(s, gv, m);
    const uint8_t start[9] = {1, 0, 1, 0, 0, 1, 0, 0, 0};
    assert_memory_equal(m, start, 9);
    assert_int_equal(grammar_accept(s, gv, 0), 0); /* E3 */
    grammar_allowed(s, gv, m);
    const uint8_t mid[9] = {0, 1, 0, 1, 0, 0, 0, 1, 0}; /* E3 81 and E3 82 both start members (U+3041, U+3080) */
    assert_memory_equal(m, mid, 9);
    assert_false(grammar_complete(s));
    assert_int_equal(grammar_accept(s, gv, 4), -1); /* 'a' inside a character: refused, state unchanged */
    assert_int_equal(grammar_accept(s, gv, 1), 0);  /* 81 82 */
    assert_int_equal(grammar_accept(s, gv, 6), 0);  /* ! */
    assert_true(grammar_complete(s));
    grammar_state_free(s);
    grammar_vocab_free(gv);
    grammar_free(g);
}

/* ---- vocabularies ---- */

static tok_vocab *load_vocab(const char *rel) {
    fkv_error err = {0};
    gguf_file *f = gguf_open(tu_data(rel), &err);
    if (!f) fail_msg("gguf_open %s: %s", rel, err.msg);
    tok_vocab *v = tok_load(f, &err);
    if (!v) fail_msg("tok_load %s: %s", rel, err.msg);
    gguf_close(f);
    return v;
}

typedef struct {
    tok_vocab *v;
    grammar_vocab *gv;
    int32_t n;
    char **bytes; /* each id's bytes as the mask sees them (NULL: not text) */
    size_t *len;
} vocab;

static void vocab_load(vocab *vc, const char *rel) {
    fkv_error err = {0};
    vc->v = load_vocab(rel);
    vc->gv = grammar_vocab_new(vc->v, &err);
    if (!vc->gv) fail_msg("grammar_vocab_new: %s", err.msg);
    vc->n = tok_n_vocab(vc->v);
    assert_int_equal(grammar_vocab_n(vc->gv), vc->n);
    vc->bytes = calloc((size_t)vc->n, sizeof *vc->bytes);
    vc->len = calloc((size_t)vc->n, sizeof *vc->len);
    for (int32_t i = 0; i < vc->n; i++) {
        int l = tok_is_eog(vc->v, i) ? 0 : tok_piece(vc->v, i, i, NULL, 0);
        if (l <= 0) continue;
        vc->bytes[i] = malloc((size_t)l);
        tok_piece(vc->v, i, i, vc->bytes[i], l);
        vc->len[i] = (size_t)l;
    }
}

static void vocab_free(vocab *vc) {
    for (int32_t i = 0; i < vc->n; i++) free(vc->bytes[i]);
    free(vc->bytes);
    free(vc->len);
    grammar_vocab_free(vc->gv);
    tok_free(vc->v);
}

/* The mask of s equals the brute force: each token tried alone (grammar_token_allowed), and for a sample of ids
 * the output so far plus the token replayed from a fresh state (no cache shared with s). */
static void assert_mask_is_brute_force(const grammar *g, grammar_state *s, const vocab *vc, const char *out,
                                       size_t out_len, uint64_t *seed) {
    uint8_t *m = malloc((size_t)vc->n);
    grammar_allowed(s, vc->gv, m);
    bool complete = grammar_complete(s);
    for (int32_t id = 0; id < vc->n; id++) {
        bool want = tok_is_eog(vc->v, id) ? complete : grammar_token_allowed(s, vc->gv, id);
        if (m[id] != want)
            fail_msg("token %d ('%.*s') after \"%.*s\": mask %d, alone %d", id, (int)vc->len[id],
                     vc->bytes[id] ? vc->bytes[id] : "", (int)out_len, out, m[id], want);
    }
    fkv_error err = {0};
    grammar_state *fresh = grammar_state_new(g, &err);
    assert_non_null(fresh);
    assert_int_equal(grammar_accept_bytes(fresh, out, out_len), 0);
    char *buf = malloc(out_len + GRAMMAR_MAX_TOKEN_BYTES);
    memcpy(buf, out, out_len);
    for (int k = 0; k < 64; k++) {
        int32_t id = (int32_t)(rng_next(seed) % (uint64_t)vc->n);
        if (!vc->bytes[id]) continue;
        grammar_state *t = grammar_state_new(g, &err);
        memcpy(buf + out_len, vc->bytes[id], vc->len[id]);
        bool want = grammar_accept_bytes(t, buf, out_len + vc->len[id]) == 0;
        grammar_state_free(t);
        if (m[id] != want) fail_msg("token %d after \"%.*s\": mask %d, replayed %d", id, (int)out_len, out, m[id], want);
    }
    free(buf);
    grammar_state_free(fresh);
    free(m);
}

/* Drives a state with random allowed tokens (3 in 10 among the shortest), checking every third mask against the
 * brute force when `check`; after `steps`, the allowed token that best closes the output, until it is complete (or
 * 2000 steps). The output in *out (malloc'd, NUL-terminated); returns whether it is complete. */
static bool drive(const grammar *g, const vocab *vc, int steps, uint64_t seed, bool check, char **out) {
    fkv_error err = {0};
    grammar_state *s = grammar_state_new(g, &err);
    assert_non_null(s);
    uint8_t *m = malloc((size_t)vc->n);
    int32_t *pick = malloc((size_t)vc->n * sizeof *pick), *pick_short = malloc((size_t)vc->n * sizeof *pick_short);
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    for (int step = 0; step < 2000; step++) {
        if (check && step % 3 == 0) assert_mask_is_brute_force(g, s, vc, text, n, &seed);
        grammar_allowed(s, vc->gv, m);
        int32_t id = -1;
        if (step < steps) {
            size_t k = 0, k_short = 0;
            for (int32_t i = 0; i < vc->n; i++) {
                if (!m[i] || tok_is_eog(vc->v, i)) continue;
                pick[k++] = i;
                if (vc->len[i] <= 2) pick_short[k_short++] = i;
            }
            if (grammar_complete(s) && rng_next(&seed) % 3 == 0) break;
            if (k_short && rng_next(&seed) % 10 < 3) id = pick_short[rng_next(&seed) % k_short];
            else if (k) id = pick[rng_next(&seed) % k];
        } else {
            static const char order[] = "\"}]0e1,:nt";
            int best_rank = 1 << 30;
            for (int32_t i = 0; i < vc->n; i++) {
                if (!m[i]) continue;
                int rank = 1 << 29;
                if (tok_is_eog(vc->v, i)) {
                    rank = 0;
                } else if (vc->len[i] == 1 && vc->bytes[i][0] && strchr(order, vc->bytes[i][0])) {
                    rank = 1 + (int)(strchr(order, vc->bytes[i][0]) - order);
                } else {
                    rank = 100 + (int)vc->len[i];
                }
                if (rank < best_rank) best_rank = rank, id = i;
            }
        }
        if (id < 0 || tok_is_eog(vc->v, id)) break;
        assert_int_equal(grammar_accept(s, vc->gv, id), 0);
        if (n + vc->len[id] + 1 > cap) text = realloc(text, cap = 2 * cap + vc->len[id]);
        memcpy(text + n, vc->bytes[id], vc->len[id]);
        n += vc->len[id];
    }
    text[n] = 0;
    bool complete = grammar_complete(s);
    free(m);
    free(pick);
    free(pick_short);
    grammar_state_free(s);
    *out = text;
    return complete;
}

/* llama.cpp's example grammars (grammars/ in its source, MIT licence), verbatim, as test data. */
static const char *const llama_grammars[][2] = {
    {"arithmetic.gbnf",
     "root  ::= (expr \"=\" ws term \"\\n\")+\n"
     "expr  ::= term ([-+*/] term)*\n"
     "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
     "ident ::= [a-z] [a-z0-9_]* ws\n"
     "num   ::= [0-9]+ ws\n"
     "ws    ::= [ \\t\\n]*\n"},
    {"c.gbnf",
     "root ::= (declaration)*\n"
     "\n"
     "declaration ::= dataType identifier \"(\" parameter? \")\" \"{\" statement* \"}\"\n"
     "\n"
     "dataType  ::= \"int\" ws | \"float\" ws | \"char\" ws\n"
     "identifier ::= [a-zA-Z_] [a-zA-Z_0-9]*\n"
     "\n"
     "parameter ::= dataType identifier\n"
     "\n"
     "statement ::=\n"
     "    ( dataType identifier ws \"=\" ws expression \";\" ) |\n"
     "    ( identifier ws \"=\" ws expression \";\" ) |\n"
     "    ( identifier ws \"(\" argList? \")\" \";\" ) |\n"
     "    ( \"return\" ws expression \";\" ) |\n"
     "    ( \"while\" \"(\" condition \")\" \"{\" statement* \"}\" ) |\n"
     "    ( \"for\" \"(\" forInit \";\" ws condition \";\" ws forUpdate \")\" \"{\" statement* \"}\" ) |\n"
     "    ( \"if\" \"(\" condition \")\" \"{\" statement* \"}\" (\"else\" \"{\" statement* \"}\")? ) |\n"
     "    ( singleLineComment ) |\n"
     "    ( multiLineComment )\n"
     "\n"
     "forInit ::= dataType identifier ws \"=\" ws expression | identifier ws \"=\" ws expression\n"
     "forUpdate ::= identifier ws \"=\" ws expression\n"
     "\n"
     "condition ::= expression relationOperator expression\n"
     "relationOperator ::= (\"<=\" | \"<\" | \"==\" | \"!=\" | \">=\" | \">\")\n"
     "\n"
     "expression ::= term ((\"+\" | \"-\") term)*\n"
     "term ::= factor((\"*\" | \"/\") factor)*\n"
     "\n"
     "factor ::= identifier | number | unaryTerm | funcCall | parenExpression\n"
     "unaryTerm ::= \"-\" factor\n"
     "funcCall ::= identifier \"(\" argList? \")\"\n"
     "parenExpression ::= \"(\" ws expression ws \")\"\n"
     "\n"
     "argList ::= expression (\",\" ws expression)*\n"
     "\n"
     "number ::= [0-9]+\n"
     "\n"
     "singleLineComment ::= \"//\" [^\\n]* \"\\n\"\n"
     "multiLineComment ::= \"/*\" ( [^*] | (\"*\" [^/]) )* \"*/\"\n"
     "\n"
     "ws ::= ([ \\t\\n]+)\n"},
    {"chess.gbnf",
     "# Specifies chess moves as a list in algebraic notation, using PGN conventions\n"
     "\n"
     "# Force first move to \"1. \", then any 1-2 digit number after, relying on model to follow the pattern\n"
     "root    ::= \"1. \" move \" \" move \"\\n\" ([1-9] [0-9]? \". \" move \" \" move \"\\n\")+\n"
     "move    ::= (pawn | nonpawn | castle) [+#]?\n"
     "\n"
     "# piece type, optional file/rank, optional capture, dest file & rank\n"
     "nonpawn ::= [NBKQR] [a-h]? [1-8]? \"x\"? [a-h] [1-8]\n"
     "\n"
     "# optional file & capture, dest file & rank, optional promotion\n"
     "pawn    ::= ([a-h] \"x\")? [a-h] [1-8] (\"=\" [NBKQR])?\n"
     "\n"
     "castle  ::= \"O-O\" \"-O\"?\n"},
    {"english.gbnf",
     "# note: this might be incomplete, mostly an example\n"
     "root        ::= en-char+ ([ \\t\\n] en-char+)*\n"
     "en-char     ::= letter | digit | punctuation\n"
     "letter      ::= [a-zA-Z]\n"
     "digit       ::= [0-9]\n"
     "punctuation ::= [!\"#$%&'()*+,-./:;<=>?@[\\\\\\]^_`{|}~]\n"},
    {"japanese.gbnf",
     "# A probably incorrect grammar for Japanese\n"
     "root        ::= jp-char+ ([ \\t\\n] jp-char+)*\n"
     "jp-char     ::= hiragana | katakana | punctuation | cjk\n"
     "hiragana    ::= [ぁ-ゟ]\n"
     "katakana    ::= [ァ-ヿ]\n"
     "punctuation ::= [、-〾]\n"
     "cjk         ::= [一-鿿]\n"},
    {"json.gbnf",
     "root   ::= object\n"
     "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
     "\n"
     "object ::=\n"
     "  \"{\" ws (\n"
     "            string \":\" ws value\n"
     "    (\",\" ws string \":\" ws value)*\n"
     "  )? \"}\" ws\n"
     "\n"
     "array  ::=\n"
     "  \"[\" ws (\n"
     "            value\n"
     "    (\",\" ws value)*\n"
     "  )? \"]\" ws\n"
     "\n"
     "string ::=\n"
     "  \"\\\"\" (\n"
     "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
     "    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
     "  )* \"\\\"\" ws\n"
     "\n"
     "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
     "\n"
     "# Optional space: by convention, applied in this grammar after literal chars when allowed\n"
     "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"},
    {"json_arr.gbnf",
     "# This is the same as json.gbnf but we restrict whitespaces at the end of the root array\n"
     "# Useful for generating JSON arrays\n"
     "\n"
     "root   ::= arr\n"
     "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
     "\n"
     "arr  ::=\n"
     "  \"[\\n\" ws (\n"
     "            value\n"
     "    (\",\\n\" ws value)*\n"
     "  )? \"]\"\n"
     "\n"
     "object ::=\n"
     "  \"{\" ws (\n"
     "            string \":\" ws value\n"
     "    (\",\" ws string \":\" ws value)*\n"
     "  )? \"}\" ws\n"
     "\n"
     "array  ::=\n"
     "  \"[\" ws (\n"
     "            value\n"
     "    (\",\" ws value)*\n"
     "  )? \"]\" ws\n"
     "\n"
     "string ::=\n"
     "  \"\\\"\" (\n"
     "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
     "    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
     "  )* \"\\\"\" ws\n"
     "\n"
     "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [1-9] [0-9]{0,15})? ws\n"
     "\n"
     "# Optional space: by convention, applied in this grammar after literal chars when allowed\n"
     "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"},
    {"list.gbnf",
     "root ::= item+\n"
     "\n"
     "# Excludes various line break characters\n"
     "item ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n"},
};

static void test_llama_cpps_example_grammars_parse_and_accept_their_examples(void **state) {
    (void)state;
    static const char *const samples[8][2] = {
        {"x +1 = y\n", "(a*b)= 3\n"},
        {"int main(){return 0;}", "float f(int x){while(x<3){x = x+1;}return x;}"},
        {"1. e4 e5\n2. Nf3 Nc6\n", "1. O-O O-O-O\n2. exd5+ Qxd5#\n"},
        {"Hello, world!", "a b\tc"},
        {"ひらがな カタカナ", "漢字"},
        {"{\"a\": [1, 2.5e3, \"x\\u00e9\"], \"b\": {\"c\": null}}", "{}"},
        {"[\n{\"a\": 1},\n\"b\"]", "[\n1]"},
        {"- one\n- two\n", "- x\n"}};
    for (size_t i = 0; i < 8; i++) {
        grammar *g = must_parse(llama_grammars[i][1]);
        for (int k = 0; k < 2; k++)
            if (matchs(g, samples[i][k]) != 1) fail_msg("%s refused \"%s\"", llama_grammars[i][0], samples[i][k]);
        grammar_free(g);
    }
}

static void test_masks_equal_the_brute_force_on_real_vocabularies(void **state) {
    (void)state;
    static const char *const vocabs[] = {"tokenizers/ggml-vocab-llama-spm.gguf", "tokenizers/ggml-vocab-gpt-2.gguf"};
    static const char *const schemas[] = {
        "{\"type\": \"object\"}",
        "{\"type\": \"object\", \"properties\": {\"title\": {\"type\": \"string\", \"minLength\": 3, \"maxLength\": 60}, "
        "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 12}, \"maxItems\": 4}, "
        "\"n\": {\"type\": \"integer\", \"minimum\": -20, \"maximum\": 1500}}, \"required\": [\"title\", \"n\"]}"};
    for (size_t v = 0; v < 2; v++) {
        vocab vc;
        vocab_load(&vc, vocabs[v]);
        uint64_t seed = 1234 + v;
        for (size_t i = 0; i < 8 + 2; i++) {
            char *text;
            if (i < 8) {
                text = strdup(llama_grammars[i][1]);
            } else {
                fkv_error err = {0};
                text = jsonschema_to_gbnf(schemas[i - 8], strlen(schemas[i - 8]), "", &err);
                if (!text) fail_msg("%s", err.msg);
            }
            grammar *g = must_parse(text);
            char *out;
            drive(g, &vc, 40, seed++, true, &out);
            free(out);
            grammar_free(g);
            free(text);
        }
        vocab_free(&vc);
    }
}

/* deepseek-llm: ~100k byte-level BPE ids, many of them CJK, tokens up to 128 bytes (a horizon of 32: bounded
 * strings check 70 ids one by one). */
static void test_masks_equal_the_brute_force_on_a_100k_vocabulary(void **state) {
    (void)state;
    vocab vc;
    vocab_load(&vc, "tokenizers/ggml-vocab-deepseek-llm.gguf");
    static const char *const schemas[] = {
        "{\"type\": \"object\", \"properties\": {\"s\": {\"type\": \"string\", \"maxLength\": 80}, \"t\": "
        "{\"type\": \"string\"}}, \"required\": [\"s\", \"t\"]}"};
    const char *texts[] = {llama_grammars[4][1], llama_grammars[5][1], NULL};
    fkv_error err = {0};
    char *gbnf = jsonschema_to_gbnf(schemas[0], strlen(schemas[0]), "", &err);
    assert_non_null(gbnf);
    texts[2] = gbnf;
    for (size_t i = 0; i < 3; i++) {
        grammar *g = must_parse(texts[i]);
        char *out;
        drive(g, &vc, 30, 77 + i, true, &out);
        free(out);
        grammar_free(g);
    }
    free(gbnf);
    vocab_free(&vc);
}

static void test_the_vocabulary_keeps_spaces_and_bytes_and_refuses_control_tokens(void **state) {
    (void)state;
    vocab vc;
    vocab_load(&vc, "tokenizers/ggml-vocab-llama-spm.gguf");
    grammar *g = must_parse("root ::= \" \" [^\\x00]* | [\\xe3] [\\x80-\\xbf]*");
    fkv_error err = {0};
    grammar_state *s = grammar_state_new(g, &err);
    uint8_t *m = malloc((size_t)vc.n);
    grammar_allowed(s, vc.gv, m);
    int32_t ids[4];
    assert_int_equal(tok_encode(vc.v, "the", 3, false, false, ids, 4, &err), 1); /* "▁the": a leading space */
    assert_true(m[ids[0]]);
    for (int32_t id = 0; id < vc.n; id++) {
        tok_type t = tok_token_type(vc.v, id);
        if (t == TOK_TYPE_CONTROL || t == TOK_TYPE_UNKNOWN) assert_false(m[id] && !tok_is_eog(vc.v, id));
    }
    assert_false(m[tok_eos(vc.v)]); /* not complete yet */
    grammar_state_free(s);
    grammar_free(g);
    /* byte tokens carry their byte: <0xE3> may start a character of U+3000..U+3FFF */
    g = must_parse("root ::= [\\u3000-\\u3fff]");
    s = grammar_state_new(g, &err);
    grammar_allowed(s, vc.gv, m);
    int32_t e3 = -1;
    for (int32_t id = 0; id < vc.n; id++) {
        size_t l;
        const char *t = tok_token_text(vc.v, id, &l);
        if (l == 6 && memcmp(t, "<0xE3>", 6) == 0) e3 = id;
    }
    assert_true(e3 >= 0);
    assert_true(m[e3]);
    assert_int_equal(grammar_accept(s, vc.gv, e3), 0);
    assert_false(grammar_complete(s));
    assert_int_equal(grammar_accept(s, vc.gv, tok_eos(vc.v)), -1);
    grammar_state_free(s);
    grammar_free(g);
    free(m);
    vocab_free(&vc);
}

/* ---- JSON Schema ---- */

static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static json_t *resolve_ref(json_t *root, const char *ref) {
    json_t *t = root;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ref + 1);
    for (char *tok = strtok(buf, "/"); tok && t; tok = strtok(NULL, "/")) t = json_object_get(t, tok);
    return t;
}

static bool valid(json_t *v, json_t *s, json_t *root, bool closed);

static bool valid_type(json_t *v, const char *t) {
    if (strcmp(t, "null") == 0) return json_is_null(v);
    if (strcmp(t, "boolean") == 0) return json_is_boolean(v);
    if (strcmp(t, "object") == 0) return json_is_object(v);
    if (strcmp(t, "array") == 0) return json_is_array(v);
    if (strcmp(t, "string") == 0) return json_is_string(v);
    if (strcmp(t, "number") == 0) return json_is_number(v);
    if (strcmp(t, "integer") == 0) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    return false;
}

static bool digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

static bool valid_format(const char *s, const char *f) {
    size_t n = strlen(s);
    if (strcmp(f, "date") == 0) return n == 10 && digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-' && digits(s + 8, 2) && atoi(s + 5) >= 1 && atoi(s + 5) <= 12 && atoi(s + 8) >= 1 && atoi(s + 8) <= 31;
    if (strcmp(f, "time") == 0) return n >= 9 && digits(s, 2) && s[2] == ':' && digits(s + 3, 2) && s[5] == ':' && digits(s + 6, 2) && atoi(s) < 24 && (s[n - 1] == 'Z' || s[n - 3] == ':');
    if (strcmp(f, "date-time") == 0) return n > 11 && s[10] == 'T' && valid_format((char[11]){s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], 0}, "date") && valid_format(s + 11, "time");
    if (strcmp(f, "uuid") == 0) {
        if (n != 36) return false;
        for (size_t i = 0; i < n; i++)
            if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i])) return false;
        return true;
    }
    return false;
}

/* A validator for the keywords the test schemas use. closed: an object with properties and no additionalProperties
 * admits no others (the converter's default, as llama.cpp's); allOf members are validated as JSON Schema says
 * (open), since the converter merges them. */
static bool valid(json_t *v, json_t *s, json_t *root, bool closed) {
    if (json_is_true(s)) return true;
    json_t *k;
    if ((k = json_object_get(s, "$ref"))) return valid(v, resolve_ref(root, json_string_value(k)), root, closed);
    if ((k = json_object_get(s, "type"))) {
        bool ok = false;
        if (json_is_string(k)) ok = valid_type(v, json_string_value(k));
        size_t i;
        json_t *t;
        json_array_foreach(k, i, t) ok = ok || valid_type(v, json_string_value(t));
        if (!ok) return false;
    }
    if ((k = json_object_get(s, "enum"))) {
        bool ok = false;
        size_t i;
        json_t *e;
        json_array_foreach(k, i, e) ok = ok || json_equal(v, e);
        if (!ok) return false;
    }
    if ((k = json_object_get(s, "const")) && !json_equal(v, k)) return false;
    if ((k = json_object_get(s, "anyOf")) || (k = json_object_get(s, "oneOf"))) {
        bool ok = false;
        size_t i;
        json_t *a;
        json_array_foreach(k, i, a) ok = ok || valid(v, a, root, closed);
        if (!ok) return false;
    }
    if ((k = json_object_get(s, "allOf"))) {
        size_t i;
        json_t *a;
        json_array_foreach(k, i, a) if (!valid(v, a, root, false)) return false;
    }
    if (json_is_string(v)) {
        size_t n = utf8_chars(json_string_value(v));
        if ((k = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(k)) return false;
        if ((k = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(k)) return false;
        if ((k = json_object_get(s, "format")) && !valid_format(json_string_value(v), json_string_value(k))) return false;
    }
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if ((k = json_object_get(s, "minimum")) && x < json_number_value(k)) return false;
        if ((k = json_object_get(s, "maximum")) && x > json_number_value(k)) return false;
        if ((k = json_object_get(s, "exclusiveMinimum")) && x <= json_number_value(k)) return false;
        if ((k = json_object_get(s, "exclusiveMaximum")) && x >= json_number_value(k)) return false;
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v), p = 0;
        if ((k = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(k)) return false;
        if ((k = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(k)) return false;
        json_t *pre = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
        if (pre) {
            p = json_array_size(pre);
            for (size_t i = 0; i < p && i < n; i++)
                if (!valid(json_array_get(v, i), json_array_get(pre, i), root, closed)) return false;
        }
        if (json_is_false(items) && n > p) return false;
        if (json_is_object(items))
            for (size_t i = p; i < n; i++)
                if (!valid(json_array_get(v, i), items, root, closed)) return false;
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties"), *add = json_object_get(s, "additionalProperties");
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(s, "required"), i, r) if (!json_object_get(v, json_string_value(r))) return false;
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x) {
            json_t *ps = json_object_get(props, key);
            if (ps) {
                if (!valid(x, ps, root, closed)) return false;
            } else if ((closed && props && !add) || json_is_false(add)) {
                return false;
            } else if (json_is_object(add) && !valid(x, add, root, closed)) {
                return false;
            }
        }
    }
    return true;
}

static const char *const test_schemas[] = {
    /* objects: required, optional, nested, additional properties refused by default */
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 20}, "
    "\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150}, \"email\": {\"type\": \"string\"}, "
    "\"address\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"zip\": {\"type\": "
    "\"string\", \"maxLength\": 10}}, \"required\": [\"city\"]}}, \"required\": [\"name\", \"age\"]}",
    /* arrays with min/max, tuples */
    "{\"type\": \"array\", \"items\": {\"type\": \"integer\", \"minimum\": -5, \"maximum\": 5}, \"minItems\": 2, "
    "\"maxItems\": 4}",
    "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\"}, {\"type\": \"boolean\"}], \"items\": "
    "{\"type\": \"null\"}, \"minItems\": 1, \"maxItems\": 5}",
    /* enums, const, anyOf/oneOf, type arrays */
    "{\"type\": \"object\", \"properties\": {\"role\": {\"enum\": [\"admin\", \"user\", 3, null, {\"a\": [1]}]}, "
    "\"kind\": {\"const\": \"fixed\"}, \"v\": {\"anyOf\": [{\"type\": \"string\", \"maxLength\": 3}, {\"type\": "
    "\"number\", \"minimum\": 10, \"exclusiveMaximum\": 20}]}, \"w\": {\"oneOf\": [{\"type\": \"boolean\"}, {\"type\": "
    "\"array\", \"maxItems\": 1}]}, \"x\": {\"type\": [\"integer\", \"null\"]}}, \"required\": [\"role\", \"kind\", "
    "\"v\", \"w\", \"x\"]}",
    /* $ref recursion through $defs and definitions */
    "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"value\": {\"type\": \"integer\"}, "
    "\"children\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}, \"maxItems\": 2}}, "
    "\"required\": [\"value\"]}}, \"$ref\": \"#/$defs/node\"}",
    "{\"definitions\": {\"list\": {\"anyOf\": [{\"type\": \"null\"}, {\"type\": \"object\", \"properties\": "
    "{\"head\": {\"type\": \"string\", \"maxLength\": 4}, \"tail\": {\"$ref\": \"#/definitions/list\"}}, "
    "\"required\": [\"head\", \"tail\"]}]}}, \"type\": \"object\", \"properties\": {\"l\": {\"$ref\": "
    "\"#/definitions/list\"}}, \"required\": [\"l\"]}",
    /* formats, additional properties with a schema, allOf */
    "{\"type\": \"object\", \"properties\": {\"d\": {\"type\": \"string\", \"format\": \"date\"}, \"t\": {\"type\": "
    "\"string\", \"format\": \"time\"}, \"dt\": {\"type\": \"string\", \"format\": \"date-time\"}, \"id\": {\"type\": "
    "\"string\", \"format\": \"uuid\"}}, \"required\": [\"d\", \"t\", \"dt\", \"id\"], \"additionalProperties\": "
    "{\"type\": \"integer\", \"minimum\": 1}}",
    "{\"allOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\", \"minimum\": 0}}, "
    "\"required\": [\"a\"]}, {\"properties\": {\"a\": {\"maximum\": 9}, \"b\": {\"type\": \"boolean\"}}, "
    "\"required\": [\"b\"]}]}",
    /* any object (response_format json_object), and numbers with integer bounds */
    "{\"type\": \"object\"}",
    "{\"type\": \"array\", \"items\": {\"type\": \"number\", \"minimum\": -2, \"maximum\": 7}, \"maxItems\": 6}",
};

static grammar *schema_grammar(const char *schema, char **gbnf_out) {
    fkv_error err = {0};
    char *gbnf = jsonschema_to_gbnf(schema, strlen(schema), "", &err);
    if (!gbnf) fail_msg("jsonschema_to_gbnf: %s\n%s", err.msg, schema);
    grammar *g = grammar_parse(gbnf, strlen(gbnf), &err);
    if (!g) fail_msg("the schema's grammar does not parse: %s\n%s", err.msg, gbnf);
    if (gbnf_out) *gbnf_out = gbnf;
    else free(gbnf);
    return g;
}

static void test_outputs_generated_under_a_schema_parse_and_validate(void **state) {
    (void)state;
    vocab vc;
    vocab_load(&vc, "tokenizers/ggml-vocab-llama-spm.gguf");
    for (size_t i = 0; i < sizeof test_schemas / sizeof *test_schemas; i++) {
        json_t *schema = json_loads(test_schemas[i], 0, NULL);
        assert_non_null(schema);
        grammar *g = schema_grammar(test_schemas[i], NULL);
        for (int gen = 0; gen < 6; gen++) {
            char *out;
            if (!drive(g, &vc, gen < 3 ? 20 : 120, 99 + (uint64_t)(i * 31 + (size_t)gen), gen == 0, &out))
                fail_msg("schema %zu: the generation did not complete:\n%s", i, out);
            json_error_t je;
            json_t *doc = json_loads(out, JSON_DECODE_ANY, &je);
            if (!doc) fail_msg("schema %zu: the output does not parse (%s):\n%s", i, je.text, out);
            if (!valid(doc, schema, schema, true)) fail_msg("schema %zu: the output does not validate:\n%s", i, out);
            json_decref(doc);
            free(out);
        }
        grammar_free(g);
        json_decref(schema);
    }
    vocab_free(&vc);
}

static void test_documents_that_break_the_schema_are_refused(void **state) {
    (void)state;
    static const struct {
        int schema;
        const char *doc;
        int want;
    } cases[] = {
        {0, "{\"name\": \"Ada\", \"age\": 36}", 1},
        {0, "{\"name\": \"Ada\", \"age\": 36, \"address\": {\"city\": \"London\", \"zip\": \"SW1\"}}", 1},
        {0, "{\"age\": 36}", -1},                                  /* required name missing */
        {0, "{\"name\": \"\", \"age\": 36}", -1},                  /* minLength */
        {0, "{\"name\": \"Ada\", \"age\": 151}", -1},              /* maximum */
        {0, "{\"name\": \"Ada\", \"age\": -1}", -1},               /* minimum */
        {0, "{\"name\": \"Ada\", \"age\": 3.5}", -1},              /* an integer */
        {0, "{\"name\": \"Ada\", \"age\": 36, \"x\": 1}", -1},     /* no additional properties */
        {0, "{\"name\": \"Ada\", \"age\": 36, \"address\": {}}", -1}, /* nested required */
        {1, "[1, -5]", 1}, {1, "[1]", -1}, {1, "[1, 2, 3, 4, 5]", -1}, {1, "[6, 1]", -1}, {1, "[01, 1]", -1},
        {2, "[\"a\"]", 1}, {2, "[\"a\", true, null, null]", 1}, {2, "[true]", -1}, {2, "[\"a\", true, 1]", -1},
        {3, "{\"role\": {\"a\":[1]}, \"kind\": \"fixed\", \"v\": 19.5, \"w\": [], \"x\": null}", 1},
        {3, "{\"role\": \"root\", \"kind\": \"fixed\", \"v\": \"ab\", \"w\": true, \"x\": 1}", -1},
        {3, "{\"role\": 3, \"kind\": \"fixed\", \"v\": 20, \"w\": true, \"x\": 1}", -1},
        {3, "{\"role\": 3, \"kind\": \"fixed\", \"v\": \"abcd\", \"w\": true, \"x\": 1}", -1},
        {4, "{\"value\": 1, \"children\": [{\"value\": 2}, {\"value\": 3, \"children\": []}]}", 1},
        {4, "{\"value\": 1, \"children\": [{\"children\": []}]}", -1},
        {5, "{\"l\": {\"head\": \"a\", \"tail\": {\"head\": \"b\", \"tail\": null}}}", 1},
        {5, "{\"l\": {\"head\": \"a\"}}", -1},
        {6, "{\"d\": \"2024-02-29\", \"t\": \"23:59:59Z\", \"dt\": \"2024-01-01T00:00:00.5+01:00\", "
            "\"id\": \"123e4567-e89b-12d3-a456-426614174000\", \"extra\": 3}", 1},
        {6, "{\"d\": \"2024-13-01\", \"t\": \"23:59:59Z\", \"dt\": \"2024-01-01T00:00:00Z\", "
            "\"id\": \"123e4567-e89b-12d3-a456-426614174000\"}", -1},
        {6, "{\"d\": \"2024-02-29\", \"t\": \"23:59:59Z\", \"dt\": \"2024-01-01T00:00:00Z\", "
            "\"id\": \"123e4567-e89b-12d3-a456-426614174000\", \"d\": 3}", -1}, /* a declared key as additional */
        {7, "{\"a\": 9, \"b\": false}", 1}, {7, "{\"a\": 10, \"b\": false}", -1}, {7, "{\"a\": 1}", -1},
        {8, "{\"a\": [1, {\"b\": null}], \"c\": \"\\ud83d\\ude00\"}", 1}, {8, "[]", -1},
        {8, "{\"a\": \"\\u0000\"}", -1}, {8, "{\"a\": \"\\udc00\"}", -1}, /* strict parsers refuse both */
        {8, "{\"a\":\n" "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t1}", -1}, /* 21 tabs: whitespace is bounded */
        {9, "[-2, 7, 0.5, -1.25, 6.999, 7.0]", 1}, {9, "[7.01]", -1}, {9, "[-2.01]", -1}, {9, "[1e2]", -1},
    };
    grammar *gs[10];
    for (size_t i = 0; i < 10; i++) gs[i] = schema_grammar(test_schemas[i], NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int got = matchs(gs[cases[i].schema], cases[i].doc);
        bool ok = cases[i].want == 1 ? got == 1 : got != 1;
        if (!ok) fail_msg("schema %d, \"%s\": got %d, want %d", cases[i].schema, cases[i].doc, got, cases[i].want);
    }
    for (size_t i = 0; i < 10; i++) grammar_free(gs[i]);
}

static void test_integer_ranges_admit_exactly_their_members(void **state) {
    (void)state;
    static const long long ranges[][2] = {{0, 0}, {0, 9}, {1, 10}, {15, 300}, {-123, 42}, {-10, -5}, {5, 30},
                                          {-1000, -999}, {99, 1001}, {-7, 0}, {123456, 123600}};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        char schema[160];
        snprintf(schema, sizeof schema, "{\"type\": \"integer\", \"minimum\": %lld, \"maximum\": %lld}", ranges[r][0],
                 ranges[r][1]);
        grammar *g = schema_grammar(schema, NULL);
        for (long long x = ranges[r][0] - 60; x <= ranges[r][1] + 60; x++) {
            char text[32];
            snprintf(text, sizeof text, "%lld", x);
            bool in = x >= ranges[r][0] && x <= ranges[r][1];
            if ((matchs(g, text) == 1) != in) fail_msg("%s: %s %s", schema, text, in ? "refused" : "accepted");
        }
        assert_int_not_equal(matchs(g, "007"), 1); /* no leading zeros */
        grammar_free(g);
    }
    /* one-sided and exclusive bounds */
    grammar *g = schema_grammar("{\"type\": \"integer\", \"exclusiveMinimum\": 7}", NULL);
    assert_int_not_equal(matchs(g, "7"), 1); /* a prefix of 70, not a value */
    assert_int_equal(matchs(g, "8"), 1);
    assert_int_equal(matchs(g, "9999999999999999"), 1);
    assert_int_equal(matchs(g, "-3"), -1);
    grammar_free(g);
    g = schema_grammar("{\"type\": \"integer\", \"maximum\": -3}", NULL);
    assert_int_equal(matchs(g, "-3"), 1);
    assert_int_not_equal(matchs(g, "-2"), 1); /* a prefix of -20 */
    assert_int_equal(matchs(g, "-2.5"), -1);
    assert_int_equal(matchs(g, "-40000"), 1);
    grammar_free(g);
}

static void test_unsupported_and_malformed_keywords_are_named_with_their_path(void **state) {
    (void)state;
    static const struct {
        const char *schema, *want;
    } cases[] = {
        {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"pattern\": \"(?=a)\"}}}",
         "unsupported JSON Schema keyword 'pattern': a lookaround assertion '(?=' (at offset 0) at /properties/name"},
        {"{\"type\": \"string\", \"format\": \"idn-email\"}", "unsupported JSON Schema keyword 'format': 'idn-email'"},
        {"{\"type\": \"array\", \"items\": {\"uniqueItems\": true}}",
         "unsupported JSON Schema keyword 'uniqueItems': the items are not a finite set (enum, const or boolean) at /items"},
        {"{\"anyOf\": [{\"type\": \"string\"}, {\"not\": {\"type\": \"null\"}}]}",
         "unsupported JSON Schema keyword 'not' at /anyOf/1"},
        {"{\"type\": \"object\", \"minProperties\": 3}", "unsupported JSON Schema keyword 'minProperties': above 1"},
        {"{\"$defs\": {\"a\": {\"type\": \"number\", \"multipleOf\": 0.5}}, \"$ref\": \"#/$defs/a\"}",
         "unsupported JSON Schema keyword 'multipleOf'"},
        {"{\"if\": {}, \"then\": {}}", "unsupported JSON Schema keyword 'if'"},
        {"{\"type\": \"object\", \"patternProperties\": {\"^x\": {}}}", "unsupported JSON Schema keyword 'patternProperties'"},
        {"{\"$ref\": \"https://example.com/s.json\"}", "unsupported $ref 'https://example.com/s.json'"},
        {"{\"$ref\": \"#/$defs/missing\"}", "$ref '#/$defs/missing' points to nothing"},
        {"{\"type\": \"strnig\"}", "malformed JSON Schema keyword 'type': unknown type 'strnig' at the root"},
        {"{\"type\": \"string\", \"minLength\": -1}", "malformed JSON Schema keyword 'minLength'"},
        {"{\"type\": \"object\", \"required\": \"a\"}", "malformed JSON Schema keyword 'required'"},
        {"{\"type\": \"string\", \"maxLength\": 100000}", "'maxLength': 100000 is above the supported 10000"},
        {"{\"type\": \"number\", \"minimum\": 0.5}", "a bound of a number must be an integer"},
        {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", "no integer satisfies"},
        {"{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"$ref\": \"#/$defs/a\"}}, \"$ref\": \"#/$defs/a\"}",
         "refers to itself before any object or array"},
        {"{\"type\": \"object\"", "JSON Schema is not valid JSON"},
        {"false", "the schema false matches nothing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fkv_error err = {0};
        char *g = jsonschema_to_gbnf(cases[i].schema, strlen(cases[i].schema), "", &err);
        if (g) fail_msg("expected \"%s\" for %s, got a grammar", cases[i].want, cases[i].schema);
        if (!strstr(err.msg, cases[i].want)) fail_msg("error \"%s\" does not contain \"%s\"", err.msg, cases[i].want);
    }
    /* annotations and unknown keywords are ignored; uniqueItems false is a no-op */
    const char *ok = "{\"title\": \"T\", \"description\": \"d\", \"x-vendor\": 1, \"type\": \"array\", "
                     "\"uniqueItems\": false, \"examples\": [[1]], \"default\": []}";
    fkv_error err = {0};
    char *g = jsonschema_to_gbnf(ok, strlen(ok), "", &err);
    assert_non_null(g);
    free(g);
}

/* Mutated schemas (a number or a string replaced by another: bounds crossed, types swapped, keywords where names
 * were): whenever the converter accepts one, its grammar parses and runs; otherwise it says why. */
static void test_every_schema_the_converter_accepts_gives_a_grammar_that_parses(void **state) {
    (void)state;
    static const char *const words[] = {"object", "array", "string", "integer", "number", "null", "boolean",
                                        "date", "uuid", "time", "#", "#/$defs/node", "type", "items", "minItems",
                                        "maxLength", "required", "properties", "anyOf", "", "a\"b", "\u00e9"};
    uint64_t seed = 17;
    size_t accepted = 0, refused = 0;
    for (size_t i = 0; i < sizeof test_schemas / sizeof *test_schemas; i++) {
        for (int t = 0; t < 150; t++) {
            const char *src = test_schemas[i];
            size_t n = strlen(src);
            /* the k-th number or string literal of the text, k random */
            size_t starts[512], ends[512], count = 0;
            for (size_t at = 0; at < n && count < 512;) {
                if (src[at] == '"') {
                    size_t e = at + 1;
                    while (e < n && src[e] != '"') e += src[e] == '\\' ? 2 : 1;
                    starts[count] = at, ends[count++] = e + 1, at = e + 1;
                } else if ((src[at] >= '0' && src[at] <= '9') || src[at] == '-') {
                    size_t e = at + 1;
                    while (e < n && ((src[e] >= '0' && src[e] <= '9') || src[e] == '.')) e++;
                    starts[count] = at, ends[count++] = e, at = e;
                } else {
                    at++;
                }
            }
            size_t k = rng_next(&seed) % count;
            char repl[64];
            if (src[starts[k]] == '"')
                snprintf(repl, sizeof repl, "\"%s\"", words[rng_next(&seed) % (sizeof words / sizeof *words)]);
            else
                snprintf(repl, sizeof repl, "%d", (int)(rng_next(&seed) % 61) - 30);
            char *mut = malloc(n + sizeof repl);
            size_t len = (size_t)snprintf(mut, n + sizeof repl, "%.*s%s%s", (int)starts[k], src, repl, src + ends[k]);
            fkv_error err = {0};
            char *gbnf = jsonschema_to_gbnf(mut, len, "", &err);
            if (gbnf) {
                grammar *g = grammar_parse(gbnf, strlen(gbnf), &err);
                if (!g) fail_msg("the grammar of an accepted schema does not parse: %s\n%s\n%s", err.msg, mut, gbnf);
                grammar_state *st = grammar_state_new(g, &err);
                assert_non_null(st);
                grammar_accept_bytes(st, "{\"", 2);
                grammar_state_free(st);
                grammar_free(g);
                free(gbnf);
                accepted++;
            } else {
                assert_true(err.msg[0] != 0);
                refused++;
            }
            free(mut);
        }
    }
    assert_true(accepted > 100 && refused > 10);
}

static void test_two_schemas_with_prefixes_splice_into_one_grammar(void **state) {
    (void)state;
    const char *a = "{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}, \"required\": [\"x\"]}";
    const char *b = "{\"type\": \"array\", \"items\": {\"type\": \"string\"}}";
    fkv_error err = {0};
    char *ga = jsonschema_to_gbnf(a, strlen(a), "call-a-", &err), *gb = jsonschema_to_gbnf(b, strlen(b), "call_b-", &err);
    assert_non_null(ga);
    assert_non_null(gb);
    /* every rule of each starts with its prefix */
    for (char *line = ga; *line; line = strchr(line, '\n') + 1) assert_memory_equal(line, "call-a-", 7);
    size_t n = strlen(ga) + strlen(gb) + 64;
    char *all = malloc(n);
    snprintf(all, n, "root ::= call-a-root | call_b-root\n%s%s", ga, gb);
    grammar *g = must_parse(all);
    assert_int_equal(matchs(g, "{\"x\": 1}"), 1);
    assert_int_equal(matchs(g, "[\"u\", \"v\"]"), 1);
    assert_int_equal(matchs(g, "[1]"), -1);
    grammar_free(g);
    free(all);
    free(ga);
    free(gb);
    assert_null(jsonschema_to_gbnf(a, strlen(a), "bad prefix", &err));
    assert_non_null(strstr(err.msg, "prefix"));
}

/* ---- bounds and caches ---- */

static void test_hostile_grammars_hit_the_bounds_without_crashing(void **state) {
    (void)state;
    /* nesting deeper than GRAMMAR_MAX_DEPTH frames is cut: refused, counted */
    grammar *g = must_parse("root ::= \"(\" root \")\" | \"x\"");
    fkv_error err = {0};
    grammar_state *s = grammar_state_new(g, &err);
    int refused_at = -1;
    for (int i = 0; i < GRAMMAR_MAX_DEPTH + 10 && refused_at < 0; i++)
        if (grammar_accept_bytes(s, "(", 1)) refused_at = i;
    assert_true(refused_at > 0 && refused_at <= GRAMMAR_MAX_DEPTH);
    grammar_stats st;
    grammar_state_stats(s, &st);
    assert_true(st.overflows > 0);
    grammar_state_free(s);
    grammar_free(g);
    /* a grammar that keeps n parses alive after n bytes: past GRAMMAR_MAX_STACKS the byte is refused */
    g = must_parse("root ::= s\ns ::= \"a\" s t | \"\"\nt ::= \"b\" | \"c\" | \"\"");
    s = grammar_state_new(g, &err);
    refused_at = -1;
    for (int i = 0; i < 2 * GRAMMAR_MAX_STACKS && refused_at < 0; i++)
        if (grammar_accept_bytes(s, "a", 1)) refused_at = i;
    assert_true(refused_at > 0);
    grammar_state_stats(s, &st);
    assert_true(st.overflows > 0);
    grammar_state_free(s);
    grammar_free(g);
    /* x{0,10000} of an x that can be empty: 10000 parses of the first byte, so nothing is accepted at all */
    g = must_parse("root ::= x{0,10000}\nx ::= [a-z]{0,10000}");
    assert_int_equal(matchs(g, "a"), -1);
    s = grammar_state_new(g, &err);
    assert_false(grammar_complete(s));
    grammar_state_stats(s, &st);
    assert_true(st.overflows > 0);
    grammar_state_free(s);
    grammar_free(g);
    /* hostile text: every byte value, truncated escapes, lone brackets */
    uint64_t seed = 5;
    for (int t = 0; t < 2000; t++) {
        char text[64];
        size_t n = 1 + rng_next(&seed) % 60;
        static const char alphabet[] = "root::= \"[]()|*+?{},0123456789^-\\xu.#\n\xc3\xa9\xff\x01" "ab";
        for (size_t i = 0; i < n; i++) text[i] = alphabet[rng_next(&seed) % (sizeof alphabet - 1)];
        grammar *h = grammar_parse(text, n, &err);
        if (h) {
            grammar_state *hs = grammar_state_new(h, &err);
            grammar_accept_bytes(hs, "ab", 2);
            grammar_state_free(hs);
            grammar_free(h);
        }
    }
}

static void test_masks_stay_right_after_the_caches_are_compacted(void **state) {
    (void)state;
    /* four counters of 10000: every count is a state of its own, so 36000 bytes overflow the state cache */
    grammar *g = must_parse("root ::= [a-c]{0,10000} [0-2]{0,10000} [d-f]{0,10000} [3-5]{0,10000} \"!\"");
    const char *pieces[] = {"a", "b1", "c", "0", "2d", "d", "e3", "5", "!", "ab", "12", "fe", "34"};
    size_t len[13];
    for (int i = 0; i < 13; i++) len[i] = strlen(pieces[i]);
    fkv_error err = {0};
    grammar_vocab *gv = grammar_vocab_new_pieces(13, pieces, len, NULL, &err);
    grammar_state *s = grammar_state_new(g, &err);
    char *chunk = malloc(9000);
    static const char sets[4][3] = {{'a', 'b', 'c'}, {'0', '1', '2'}, {'d', 'e', 'f'}, {'3', '4', '5'}};
    uint8_t m[13];
    for (int part = 0; part < 4; part++) {
        for (int k = 0; k < 9000; k++) chunk[k] = sets[part][k % 3];
        assert_int_equal(grammar_accept_bytes(s, chunk, 9000), 0);
        grammar_allowed(s, gv, m);
        for (int id = 0; id < 13; id++) assert_int_equal(m[id], grammar_token_allowed(s, gv, id));
    }
    grammar_stats st;
    grammar_state_stats(s, &st);
    assert_true(st.compactions > 0);
    assert_true(m[8]); /* "!" */
    assert_false(m[0]);
    assert_int_equal(grammar_accept(s, gv, 8), 0);
    assert_true(grammar_complete(s));
    free(chunk);
    grammar_state_free(s);
    grammar_vocab_free(gv);
    grammar_free(g);
}

static void test_one_grammar_serves_independent_states(void **state) {
    (void)state;
    grammar *g = schema_grammar("{\"type\": \"object\"}", NULL);
    fkv_error err = {0};
    grammar_state *a = grammar_state_new(g, &err), *b = grammar_state_new(g, &err);
    assert_int_equal(grammar_accept_bytes(a, "{\"k\": ", 6), 0);
    assert_int_equal(grammar_accept_bytes(b, "{}", 2), 0);
    assert_true(grammar_complete(b));
    assert_false(grammar_complete(a));
    assert_int_equal(grammar_accept_bytes(a, "}", 1), -1); /* a value is due */
    assert_int_equal(grammar_accept_bytes(a, "[]}", 3), 0);
    assert_true(grammar_complete(a));
    grammar_state_free(a);
    grammar_state_free(b);
    grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors_name_the_line_and_column),
        cmocka_unit_test(test_left_recursion_is_refused_naming_the_rule),
        cmocka_unit_test(test_nesting_and_size_are_bounded),
        cmocka_unit_test(test_each_construct_accepts_and_refuses_what_it_should),
        cmocka_unit_test(test_repetition_bounds_are_exact_on_both_sides_of_the_chain_threshold),
        cmocka_unit_test(test_utf8_classes_accept_valid_characters_only),
        cmocka_unit_test(test_a_character_may_be_split_across_tokens),
        cmocka_unit_test(test_llama_cpps_example_grammars_parse_and_accept_their_examples),
        cmocka_unit_test(test_masks_equal_the_brute_force_on_real_vocabularies),
        cmocka_unit_test(test_masks_equal_the_brute_force_on_a_100k_vocabulary),
        cmocka_unit_test(test_the_vocabulary_keeps_spaces_and_bytes_and_refuses_control_tokens),
        cmocka_unit_test(test_outputs_generated_under_a_schema_parse_and_validate),
        cmocka_unit_test(test_documents_that_break_the_schema_are_refused),
        cmocka_unit_test(test_integer_ranges_admit_exactly_their_members),
        cmocka_unit_test(test_unsupported_and_malformed_keywords_are_named_with_their_path),
        cmocka_unit_test(test_every_schema_the_converter_accepts_gives_a_grammar_that_parses),
        cmocka_unit_test(test_two_schemas_with_prefixes_splice_into_one_grammar),
        cmocka_unit_test(test_hostile_grammars_hit_the_bounds_without_crashing),
        cmocka_unit_test(test_masks_stay_right_after_the_caches_are_compacted),
        cmocka_unit_test(test_one_grammar_serves_independent_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
