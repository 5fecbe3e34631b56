/* test_jsonschema.c — the JSON Schema validators a grammar holds (src/constrain/jsonschema.h): pattern, the formats,
 * uniqueItems, multipleOf, minProperties/maxProperties, additionalProperties with a schema, oneOf; for each, JSON texts
 * the grammar must accept and texts it must refuse, and the cases beyond a grammar refused naming the keyword.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/grammar.h"

static grammar *schema_grammar(const char *schema) {
    fkv_error err = {0};
    char *gbnf = jsonschema_to_gbnf(schema, strlen(schema), "", &err);
    if (!gbnf) fail_msg("jsonschema_to_gbnf: %s\n%s", err.msg, schema);
    grammar *g = grammar_parse(gbnf, strlen(gbnf), &err);
    if (!g) fail_msg("the schema's grammar does not parse: %s\n%s", err.msg, gbnf);
    free(gbnf);
    return g;
}

/* Whether the grammar takes text as a whole sentence. */
static bool accepts(const grammar *g, const char *text) {
    fkv_error err = {0};
    grammar_state *s = grammar_state_new(g, &err);
    assert_non_null(s);
    bool ok = !grammar_accept_bytes(s, text, strlen(text)) && grammar_complete(s);
    grammar_state_free(s);
    return ok;
}

/* The schema's grammar accepts every text of yes[] and none of no[] (NULL-terminated lists). */
static void check_schema(const char *schema, const char *const *yes, const char *const *no) {
    grammar *g = schema_grammar(schema);
    for (; yes && *yes; yes++)
        if (!accepts(g, *yes)) fail_msg("%s\nrefuses %s", schema, *yes);
    for (; no && *no; no++)
        if (accepts(g, *no)) fail_msg("%s\naccepts %s", schema, *no);
    grammar_free(g);
}

#define YES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO(...) ((const char *const[]){__VA_ARGS__, NULL})

static void assert_refused(const char *schema, const char *want) {
    fkv_error err = {0};
    char *g = jsonschema_to_gbnf(schema, strlen(schema), "", &err);
    if (g) fail_msg("expected \"%s\" for %s, got a grammar:\n%s", want, schema, g);
    if (!strstr(err.msg, want)) fail_msg("error \"%s\" does not contain \"%s\"", err.msg, want);
}

static void test_pattern_holds_the_regular_subset(void **state) {
    (void)state;
    check_schema("{\"type\": \"string\", \"pattern\": \"^[a-z]+\\\\d{2}$\"}", YES("\"abc12\"", "\"z00\""),
                 NO("\"abc1\"", "\"12\"", "\"abc123\"", "\"Abc12\"", "\"\""));
    /* unanchored: the match may sit anywhere */
    check_schema("{\"type\": \"string\", \"pattern\": \"ab+c\"}", YES("\"abc\"", "\"xxabbbcyy\"", "\"\\\"abc\\n\""),
                 NO("\"ac\"", "\"abx\"", "\"\""));
    check_schema("{\"type\": \"string\", \"pattern\": \"^ab\"}", YES("\"ab\"", "\"abzz\""), NO("\"xab\""));
    check_schema("{\"type\": \"string\", \"pattern\": \"ab$\"}", YES("\"ab\"", "\"zzab\""), NO("\"abx\""));
    /* groups, alternation, counted repetition, optional parts, lazy quantifiers */
    check_schema("{\"pattern\": \"^(?:ab|c){2,3}(x)?y*?$\"}", YES("\"abc\"", "\"cabx\"", "\"ccc\"", "\"ababyy\""),
                 NO("\"ab\"", "\"abababab\"", "\"abcxx\"", "1"));
    check_schema("{\"pattern\": \"^a{3}$|^b{2,}$\"}", YES("\"aaa\"", "\"bb\"", "\"bbbbb\""), NO("\"aa\"", "\"b\""));
    /* classes: ranges, negation, escapes inside, '-' at the end */
    check_schema("{\"pattern\": \"^[^a-c\\\\d][\\\\w.-]\\\\s\\\\S$\"}", YES("\"x_ \\\"\"", "\"d. z\"", "\"é- !\""),
                 NO("\"b_ x\"", "\"5_ x\"", "\"x! x\"", "\"x_xx\"", "\"x_  \""));
    check_schema("{\"pattern\": \"^.\\\\.\\\\/$\"}", YES("\"z./\"", "\"\\\\./\""), NO("\"zz/\""));
    /* what JSON escapes stays escaped: '"' and '\' match as \" and \\, and never raw */
    check_schema("{\"pattern\": \"^[\\\"\\\\\\\\]+\\\\x41\\\\u00e9$\"}", YES("\"\\\"\\\\Aé\""),
                 NO("\"\"\\Aé\"", "\"Aé\""));
    check_schema("{\"pattern\": \"^\\\\uD83D\\\\uDE00$\"}", YES("\"\xf0\x9f\x98\x80\""), NO("\"x\""));
}

static void test_pattern_beyond_a_grammar_is_refused_by_name(void **state) {
    (void)state;
    static const struct {
        const char *pattern, *want;
    } cases[] = {
        {"(?=a)a", "lookaround"},      {"a(?!b)", "lookaround"},          {"(?<=a)b", "lookaround"},
        {"(a)\\\\1", "backreference"}, {"\\\\bword", "word boundary"},    {"a^b", "anchor '^' inside"},
        {"a$b", "anchor '$' inside"},  {"*a", "nothing to repeat"},       {"(ab", "no closing ')'"},
        {"ab)", "unmatched ')'"},      {"[ab", "no closing ']'"},         {"a{3,2}", "m below n"},
        {"\\\\p{L}", "property"},      {"a{20000}", "above the supported"}, {"^\\\\n$", "control character"},
        {"[z-a]", "class range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char schema[200];
        snprintf(schema, sizeof schema, "{\"type\": \"string\", \"pattern\": \"%s\"}", cases[i].pattern);
        assert_refused(schema, "unsupported JSON Schema keyword 'pattern'");
        assert_refused(schema, cases[i].want);
    }
    assert_refused("{\"type\": \"string\", \"pattern\": \"^a\", \"maxLength\": 3}", "'maxLength' beside 'pattern'");
    assert_refused("{\"type\": \"string\", \"pattern\": \"^a\", \"format\": \"email\"}",
                   "'pattern' beside 'format' 'email'");
}

static void test_formats_accept_only_valid_values(void **state) {
    (void)state;
    check_schema("{\"type\": \"string\", \"format\": \"email\"}",
                 YES("\"ada@example.com\"", "\"a.b+c_d-e@mail.example.co.uk\""),
                 NO("\"ada\"", "\"@example.com\"", "\"a..b@example.com\"", "\"a@example\"", "\"a@-x.com\"",
                    "\"a@x-.com\"", "\"a b@x.com\"", "\".a@x.com\"", "\"a@x.c\""));
    check_schema("{\"type\": \"string\", \"format\": \"hostname\"}", YES("\"localhost\"", "\"a-b.example.org\""),
                 NO("\"-a.com\"", "\"a_b.com\"", "\"a..b\"", "\"\"", "\"a.\""));
    check_schema("{\"type\": \"string\", \"format\": \"ipv4\"}", YES("\"0.0.0.0\"", "\"192.168.1.255\""),
                 NO("\"256.1.1.1\"", "\"1.1.1\"", "\"01.1.1.1\"", "\"1.1.1.1.1\""));
    check_schema("{\"type\": \"string\", \"format\": \"ipv6\"}",
                 YES("\"::\"", "\"::1\"", "\"fe80::1:2\"", "\"2001:db8:0:0:0:0:2:1\"", "\"1::\"", "\"1:2:3:4:5:6:7::\""),
                 NO("\"1:2:3:4:5:6:7:8:9\"", "\"1::2::3\"", "\"12345::\"", "\":1\"", "\"g::\""));
    check_schema("{\"type\": \"string\", \"format\": \"uri\"}",
                 YES("\"https://example.com\"", "\"http://a.b:8080/p/a%20th?q=1&r=/x#frag\"", "\"ftp://h/\""),
                 NO("\"example.com\"", "\"http://\"", "\"http://a b\"", "\"1http://a\"", "\"http://a/%zz\""));
    assert_refused("{\"type\": \"string\", \"format\": \"iri\"}", "unsupported JSON Schema keyword 'format': 'iri'");
    assert_refused("{\"type\": \"string\", \"format\": \"email\", \"maxLength\": 9}", "'maxLength' beside 'format'");
}

/* zod 4's z.toJSONSchema() writes a pattern beside the format: each pair is taken, using the narrower side. */
static void test_zods_format_patterns_are_taken(void **state) {
    (void)state;
    check_schema("{\"type\": \"string\", \"format\": \"email\", \"pattern\": "
                 "\"^(?:[A-Za-z0-9_'+\\\\-]+\\\\.)*[A-Za-z0-9_'+\\\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\\\-]*"
                 "\\\\.)+[A-Za-z]{2,}$\"}",
                 YES("\"ada@example.com\""), NO("\"ada@x-.com\"", "\"ada\""));
    check_schema("{\"type\": \"string\", \"format\": \"uuid\", \"pattern\": \"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8]"
                 "[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-"
                 "ffff-ffff-ffff-ffffffffffff)$\"}",
                 YES("\"123e4567-e89b-12d3-a456-426614174000\"", "\"00000000-0000-0000-0000-000000000000\""),
                 NO("\"123e4567-e89b-02d3-a456-426614174000\"")); /* version 0: the pattern's, narrower */
    check_schema("{\"type\": \"string\", \"format\": \"ipv4\", \"pattern\": \"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|"
                 "[1-9][0-9]|[0-9])\\\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$\"}",
                 YES("\"10.0.0.255\""), NO("\"10.0.0.256\""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_holds_the_regular_subset),
        cmocka_unit_test(test_pattern_beyond_a_grammar_is_refused_by_name),
        cmocka_unit_test(test_formats_accept_only_valid_values),
        cmocka_unit_test(test_zods_format_patterns_are_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
