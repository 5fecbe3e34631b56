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
    check_schema("{\"type\": \"string\", \"format\": \"date\"}", YES("\"2024-02-29\"", "\"2000-02-29\"", "\"2023-12-31\""),
                 NO("\"2023-02-29\"", "\"2100-02-29\"", "\"2023-06-31\"", "\"2023-02-30\"", "\"2023-00-10\""));
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
    check_schema("{\"type\": \"string\", \"format\": \"date-time\", \"pattern\": \"^(?:(?:\\\\d\\\\d[2468][048]|\\\\d\\\\d[13579][26]|\\\\d\\\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\\\d|30)|(?:02)-(?:0[1-9]|1\\\\d|2[0-8])))T(?:(?:[01]\\\\d|2[0-3]):[0-5]\\\\d:[0-5]\\\\d(?:\\\\.\\\\d+)?(?:Z))$\"}", YES("\"2024-02-29T23:59:59.5Z\""), NO("\"2023-02-29T00:00:00Z\""));
    check_schema("{\"type\": \"string\", \"format\": \"date\", \"pattern\": \"^(?:(?:\\\\d\\\\d[2468][048]|\\\\d\\\\d[13579][26]|\\\\d\\\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\\\d|30)|(?:02)-(?:0[1-9]|1\\\\d|2[0-8])))$\"}", YES("\"2000-02-29\"", "\"2023-04-30\""), NO("\"1900-02-29\"", "\"2023-04-31\""));
    check_schema("{\"type\": \"string\", \"format\": \"ipv6\", \"pattern\": \"^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:))$\"}", YES("\"fe80::1\""), NO("\"fe80:::1\""));
    /* a format JSON Schema does not define, beside a pattern, is an annotation: the pattern holds */
    check_schema("{\"type\": \"string\", \"format\": \"starts_with\", \"pattern\": \"^ab.*\"}", YES("\"abzz\""), NO("\"zab\""));
    assert_refused("{\"type\": \"string\", \"format\": \"starts_with\"}", "'format': 'starts_with'");
    check_schema("{\"type\": \"string\", \"format\": \"ipv4\", \"pattern\": \"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|"
                 "[1-9][0-9]|[0-9])\\\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$\"}",
                 YES("\"10.0.0.255\""), NO("\"10.0.0.256\""));
}

static void test_multiple_of_admits_exactly_the_multiples(void **state) {
    (void)state;
    static const int divisors[] = {2, 3, 7, 12, 10, 100, 97};
    for (size_t k = 0; k < sizeof divisors / sizeof *divisors; k++) {
        char schema[160];
        int d = divisors[k];
        /* zod's .int().multipleOf(d) bounds: ±(2^53 - 1) */
        snprintf(schema, sizeof schema, "{\"type\": \"integer\", \"multipleOf\": %d, \"minimum\": -9007199254740991, "
                 "\"maximum\": 9007199254740991}", d);
        grammar *g = schema_grammar(schema);
        for (long x = -1000; x <= 1000; x++) {
            char text[32];
            snprintf(text, sizeof text, "%ld", x);
            if (accepts(g, text) != (x % d == 0)) fail_msg("%s: %s %s", schema, text, x % d ? "accepted" : "refused");
        }
        char big[32];
        snprintf(big, sizeof big, "%lld", 99999999999999LL / d * d);
        if (!accepts(g, big)) fail_msg("%s: refuses %s", schema, big);
        assert_false(accepts(g, "-0"));
        assert_false(accepts(g, "010") && d == 10);
        grammar_free(g);
    }
    /* positive (zod's .positive(): exclusiveMinimum 0), and a number with an integer multipleOf */
    check_schema("{\"type\": \"integer\", \"exclusiveMinimum\": 0, \"multipleOf\": 5}", YES("5", "10", "995"),
                 NO("0", "-5", "7", "5.0"));
    check_schema("{\"type\": \"number\", \"multipleOf\": 4}", YES("0", "-8", "400"), NO("2", "4.5", "4e0"));
    check_schema("{\"type\": \"integer\", \"multipleOf\": 1, \"minimum\": 3, \"maximum\": 4}", YES("3", "4"), NO("5"));
    assert_refused("{\"type\": \"number\", \"multipleOf\": 0.01}", "'multipleOf': 0.01 is not a positive integer");
    assert_refused("{\"type\": \"integer\", \"multipleOf\": 101}", "'multipleOf': 101 is above 100");
    assert_refused("{\"type\": \"integer\", \"multipleOf\": 5, \"minimum\": 0, \"maximum\": 50}",
                   "'multipleOf' beside 'minimum'/'maximum'");
    assert_refused("{\"type\": \"integer\", \"multipleOf\": 5, \"minimum\": 12}", "'multipleOf' beside");
}

static void test_unique_items_over_a_finite_set(void **state) {
    (void)state;
    check_schema("{\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\", 3]}, \"uniqueItems\": true}",
                 YES("[]", "[\"a\"]", "[3, \"a\"]", "[\"b\", 3, \"a\"]"),
                 NO("[\"a\", \"a\"]", "[3, \"b\", 3]", "[\"c\"]", "[\"a\", \"b\", 3, \"a\"]"));
    check_schema("{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}, \"uniqueItems\": true, \"minItems\": 2}",
                 YES("[true, false]", "[false, true]"), NO("[true]", "[true, true]", "[]"));
    check_schema("{\"$defs\": {\"c\": {\"enum\": [\"r\", \"g\"]}}, \"type\": \"array\", \"items\": {\"$ref\": "
                 "\"#/$defs/c\"}, \"uniqueItems\": true, \"maxItems\": 1}", YES("[\"r\"]"), NO("[\"r\", \"g\"]"));
    /* at most one item: any items */
    check_schema("{\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"uniqueItems\": true, \"maxItems\": 1}",
                 YES("[]", "[\"x\"]"), NO("[\"x\", \"y\"]"));
    assert_refused("{\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"uniqueItems\": true}",
                   "'uniqueItems': the items are not a finite set");
    assert_refused("{\"type\": \"array\", \"items\": {\"enum\": [1,2,3,4,5,6,7,8,9,10,11,12,13]}, \"uniqueItems\": true}",
                   "'uniqueItems': 13 values");
    assert_refused("{\"type\": \"array\", \"items\": {\"enum\": [1, 2]}, \"uniqueItems\": true, \"minItems\": 3}",
                   "above the 2 distinct values");
    assert_refused("{\"type\": \"array\", \"items\": {\"enum\": [1, 2]}, \"uniqueItems\": 1}",
                   "malformed JSON Schema keyword 'uniqueItems'");
}

static void test_property_counts_and_additional_property_schemas(void **state) {
    (void)state;
    /* zod's z.record(z.string(), z.number()): propertyNames {"type": "string"}, additionalProperties a schema */
    check_schema("{\"type\": \"object\", \"propertyNames\": {\"type\": \"string\"}, \"additionalProperties\": "
                 "{\"type\": \"number\"}, \"maxProperties\": 2}",
                 YES("{}", "{\"a\": 1}", "{\"a\": 1, \"b\": 2.5}"), NO("{\"a\": \"x\"}", "{\"a\": 1, \"b\": 2, \"c\": 3}"));
    check_schema("{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}, \"minProperties\": 1}",
                 YES("{\"k\": 1}", "{\"k\": 1, \"j\": 2}"), NO("{}", "{\"k\": true}"));
    check_schema("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, \"additionalProperties\": "
                 "{\"type\": \"boolean\"}}", YES("{\"a\": \"x\", \"b\": true}", "{\"z\": false}"),
                 NO("{\"a\": true}", "{\"b\": 1}"));
    check_schema("{\"type\": \"object\", \"properties\": {\"a\": {}, \"b\": {}}, \"required\": [\"a\"], "
                 "\"minProperties\": 1, \"maxProperties\": 2}", YES("{\"a\": 1}", "{\"a\": 1, \"b\": 2}"), NO("{}"));
    /* z.record(z.enum(["a", "b"]), z.number()): the names listed, all required */
    check_schema("{\"type\": \"object\", \"propertyNames\": {\"type\": \"string\", \"enum\": [\"a\", \"b\"]}, \"additionalProperties\": {\"type\": \"number\"}, \"required\": [\"a\", \"b\"]}", YES("{\"a\": 1, \"b\": 2}"), NO("{\"a\": 1}", "{\"a\": 1, \"b\": 2, \"c\": 3}"));
    assert_refused("{\"type\": \"object\", \"properties\": {\"a\": {}, \"b\": {}}, \"minProperties\": 1}",
                   "'minProperties': above the required properties");
    assert_refused("{\"type\": \"object\", \"minProperties\": 2}", "'minProperties': above 1");
    assert_refused("{\"type\": \"object\", \"properties\": {\"a\": {}, \"b\": {}}, \"maxProperties\": 1}",
                   "'maxProperties': below the properties allowed");
    assert_refused("{\"type\": \"object\", \"propertyNames\": {\"pattern\": \"^a\"}}",
                   "unsupported JSON Schema keyword 'propertyNames'");
}

static void test_one_of_is_taken_when_its_branches_are_disjoint(void **state) {
    (void)state;
    /* zod's z.discriminatedUnion */
    check_schema("{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"kind\": {\"type\": \"string\", \"const\": "
                 "\"a\"}, \"x\": {\"type\": \"string\"}}, \"required\": [\"kind\", \"x\"], \"additionalProperties\": "
                 "false}, {\"type\": \"object\", \"properties\": {\"kind\": {\"type\": \"string\", \"const\": \"b\"}, "
                 "\"y\": {\"type\": \"number\"}}, \"required\": [\"kind\", \"y\"], \"additionalProperties\": false}]}",
                 YES("{\"kind\": \"a\", \"x\": \"s\"}", "{\"kind\": \"b\", \"y\": 1}"),
                 NO("{\"kind\": \"a\", \"y\": 1}", "{\"kind\": \"c\", \"x\": \"s\"}"));
    check_schema("{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}, {\"type\": \"null\"}]}",
                 YES("\"s\"", "3", "null"), NO("true"));
    check_schema("{\"oneOf\": [{\"enum\": [1, 2]}, {\"const\": 3}]}", YES("1", "3"), NO("4"));
    assert_refused("{\"oneOf\": [{\"minimum\": 3}, {\"type\": \"string\"}]}", "'oneOf'"); /* "a" matches both */
    assert_refused("{\"oneOf\": [{\"type\": \"number\"}, {\"type\": \"integer\"}]}",
                   "'oneOf': branches 0 and 1 may both match");
    assert_refused("{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"string\", \"maxLength\": 2}]}",
                   "'oneOf': branches 0 and 1");
    assert_refused("{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"k\": {\"const\": 1}}}, {\"type\": "
                   "\"object\", \"properties\": {\"k\": {\"const\": 2}}}]}", "'oneOf'"); /* k not required */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_holds_the_regular_subset),
        cmocka_unit_test(test_pattern_beyond_a_grammar_is_refused_by_name),
        cmocka_unit_test(test_formats_accept_only_valid_values),
        cmocka_unit_test(test_zods_format_patterns_are_taken),
        cmocka_unit_test(test_multiple_of_admits_exactly_the_multiples),
        cmocka_unit_test(test_unique_items_over_a_finite_set),
        cmocka_unit_test(test_property_counts_and_additional_property_schemas),
        cmocka_unit_test(test_one_of_is_taken_when_its_branches_are_disjoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
