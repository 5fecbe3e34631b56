/* test_tenants.c — the keys file (server/tenants.h): its lines name tenants, comments and blank lines are skipped, a
 * key without a name gets its digest's, `shared` keeps the common cache; every malformed line is refused naming
 * FILE:LINE and never the key; a key is found only whole; a tenant's salt is one no cache_salt can spell. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "tenants.h"
#include "testutil.h"

static tenants *parse(const char *text, const char *api_key) {
    fkv_error err = {0};
    tenants *t = tenants_parse(text, strlen(text), "keys.txt", api_key, &err);
    if (!t) fail_msg("tenants_parse: %s", err.msg);
    return t;
}

/* The tenant key names in t; fails the test when none. */
static tenant find(const tenants *t, const char *key) {
    tenant who = {.name = ""};
    if (!tenants_find(t, key, &who)) fail_msg("key '%s' not found", key);
    return who;
}

static void test_good_lines_name_tenants_and_several_keys_may_share_one(void **state) {
    (void)state;
    tenants *t = parse("sk-alpha-1 acme\nsk-alpha-2 acme\nsk-beta beta.team_2-x\n", NULL);
    assert_int_equal(tenants_keys(t), 3);
    assert_int_equal(tenants_names(t), 2);
    assert_string_equal(find(t, "sk-alpha-1").name, "acme");
    assert_string_equal(find(t, "sk-alpha-2").name, "acme");
    const tenant beta = find(t, "sk-beta");
    assert_string_equal(beta.name, "beta.team_2-x");
    assert_false(beta.shared);
    assert_string_equal(tenants_cache(&beta), "beta.team_2-x");
    tenants_free(t);
}

static void test_a_key_is_found_only_whole(void **state) {
    (void)state;
    tenants *t = parse("sk-alpha acme\n", NULL);
    tenant who = {.name = ""};
    const char *near[] = {"", "s", "sk-alph", "sk-alphA", "sk-alpha ", "sk-alpha2", " sk-alpha", "acme"};
    for (size_t i = 0; i < sizeof near / sizeof *near; i++) assert_false(tenants_find(t, near[i], &who));
    char longer[TENANTS_KEY_MAX + 2];
    memset(longer, 'k', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    assert_false(tenants_find(t, longer, &who));
    assert_string_equal(who.name, ""); /* nothing written on a miss */
    tenants_free(t);
}

static void test_comments_blank_lines_and_crlf_endings_are_skipped(void **state) {
    (void)state;
    tenants *t = parse("# the keys of the fleet\n\n   \t \n  sk-one   acme   # the first\r\n\tsk-two\tbeta\t\r\n"
                       "sk-three # no name: a comment is not one\n# sk-not-a-key acme\nsk-last acme", NULL);
    assert_int_equal(tenants_keys(t), 4);
    assert_string_equal(find(t, "sk-one").name, "acme");
    assert_string_equal(find(t, "sk-two").name, "beta");
    assert_string_equal(find(t, "sk-last").name, "acme"); /* the last line needs no newline */
    assert_int_equal(strncmp(find(t, "sk-three").name, "key-", 4), 0);
    tenant who;
    assert_false(tenants_find(t, "sk-not-a-key", &who));
    assert_false(tenants_find(t, "#", &who));
    tenants_free(t);
}

static void test_a_key_without_a_name_is_named_by_its_digest_not_by_itself(void **state) {
    (void)state;
    const char *key = "sk-0123456789abcdef";
    tenants *t = parse("sk-0123456789abcdef\nsk-other\n", NULL);
    char want[TENANTS_NAME_MAX + 1];
    snprintf(want, sizeof want, "key-%08x", (unsigned)(XXH3_64bits(key, strlen(key)) >> 32));
    const tenant who = find(t, key);
    assert_string_equal(who.name, want);
    assert_false(who.shared);
    assert_string_not_equal(find(t, "sk-other").name, want); /* each key its own tenant */
    assert_int_equal(tenants_names(t), 2);
    tenants_free(t);
}

static void test_a_shared_key_uses_the_common_cache(void **state) {
    (void)state;
    tenants *t = parse("sk-ops ops shared\nsk-ops-2 ops shared\nsk-acme acme\n", NULL);
    const tenant ops = find(t, "sk-ops");
    assert_string_equal(ops.name, "ops");
    assert_true(ops.shared);
    assert_null(tenants_cache(&ops));
    assert_true(find(t, "sk-ops-2").shared);
    assert_false(find(t, "sk-acme").shared);
    assert_null(tenants_cache(NULL));
    tenants_free(t);
}

static void test_api_key_is_one_more_shared_key_of_the_tenant_default(void **state) {
    (void)state;
    fkv_error err = {0};
    tenants *alone = tenants_load(NULL, "sk-main", &err); /* --api-key without --api-keys */
    assert_non_null(alone);
    assert_int_equal(tenants_keys(alone), 1);
    const tenant main = find(alone, "sk-main");
    assert_string_equal(main.name, "default");
    assert_true(main.shared);
    tenants_free(alone);

    tenants *both = parse("sk-acme acme\n", "sk-main");
    assert_int_equal(tenants_keys(both), 2);
    assert_string_equal(find(both, "sk-main").name, "default");
    assert_string_equal(find(both, "sk-acme").name, "acme");
    tenants_free(both);

    tenants *none = parse("# nothing yet\n", NULL); /* every request refused: the file says no one */
    assert_int_equal(tenants_keys(none), 0);
    tenant who;
    assert_false(tenants_find(none, "sk-main", &who));
    tenants_free(none);
}

static void test_every_malformed_line_is_refused_naming_its_line_and_never_its_key(void **state) {
    (void)state;
    char long_key[TENANTS_KEY_MAX + 2], long_name[TENANTS_NAME_MAX + 2], ok_key[TENANTS_KEY_MAX + 1];
    memset(long_key, 'K', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = 0;
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = 0;
    memset(ok_key, 'K', sizeof ok_key - 1);
    ok_key[sizeof ok_key - 1] = 0;
    char too_long[512], name_too_long[512], longest[512];
    snprintf(too_long, sizeof too_long, "# keys\nSECRETA a\n%s b\n", long_key);
    snprintf(name_too_long, sizeof name_too_long, "SECRETA a\n\n\nSECRETB %s\n", long_name);
    snprintf(longest, sizeof longest, "%s a\n", ok_key);
    const struct {
        const char *text, *api_key, *where;
    } bad[] = {
        {"SECRETA acme\nSECRETB beta\nSECRETA gamma\n", NULL, "keys.txt:3: the same key as keys.txt:1"},
        {"SECRETA acme\nSECRETB acme!\n", NULL, "keys.txt:2: the second word is not a tenant name"},
        {name_too_long, NULL, "keys.txt:4: the second word is not a tenant name"},
        {"\nSECRETA acme sharde\n", NULL, "keys.txt:2: the third word is not 'shared'"},
        {"SECRETA acme shared SECRETB\n", NULL, "keys.txt:1: a fourth word"},
        {too_long, NULL, "keys.txt:3: a key longer than 256 bytes"},
        {"SECRETA a\nSECRET\x01" "B b\n", NULL, "keys.txt:2: a key with a control character"},
        {"SECRETA acme shared\nSECRETB acme\n", NULL, "keys.txt:2: tenant 'acme' is not shared here and shared at "
                                                      "keys.txt:1"},
        {"SECRETA acme\nSECRETB\n", "SECRETA", "--api-key: the same key as keys.txt:1"},
        {"SECRETA default\n", "SECRETB", "--api-key: tenant 'default' is shared here and not shared at keys.txt:1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fkv_error err = {0};
        tenants *t = tenants_parse(bad[i].text, strlen(bad[i].text), "keys.txt", bad[i].api_key, &err);
        if (t) fail_msg("case %zu was taken", i);
        assert_int_equal(err.code, FKV_E_INPUT);
        if (strncmp(err.msg, bad[i].where, strlen(bad[i].where)))
            fail_msg("case %zu: '%s', expected it to begin '%s'", i, err.msg, bad[i].where);
        assert_null(strstr(err.msg, "SECRET"));
        assert_null(strstr(err.msg, "KKKK"));
    }
    tenants *t = parse(longest, NULL); /* 256 bytes is a key */
    assert_string_equal(find(t, ok_key).name, "a");
    tenants_free(t);
}

static void test_a_file_is_read_and_a_missing_one_refused_naming_it(void **state) {
    (void)state;
    const char *path = tu_tmp_path(".keys");
    fkv_error err = {0};
    assert_null(tenants_load(path, NULL, &err));
    assert_int_equal(err.code, FKV_E_INPUT);
    assert_non_null(strstr(err.msg, path));
    const char text[] = "sk-file acme\nsk-file-2 acme shared\n";
    assert_int_equal(tu_write_file(path, text, sizeof text - 1), 0);
    err = (fkv_error){0};
    assert_null(tenants_load(path, NULL, &err)); /* acme is shared on line 2 and not on line 1 */
    char want[400];
    snprintf(want, sizeof want, "%s:2: tenant 'acme'", path);
    assert_int_equal(strncmp(err.msg, want, strlen(want)), 0);
    const char good[] = "sk-file acme\nsk-file-2 acme\n";
    assert_int_equal(tu_write_file(path, good, sizeof good - 1), 0);
    tenants *t = tenants_load(path, "sk-main", &err);
    assert_non_null(t);
    assert_int_equal(tenants_keys(t), 3);
    assert_string_equal(find(t, "sk-file-2").name, "acme");
    tenants_free(t);
    unlink(path);
}

static void expect_salt(const char *cache, const char *cache_salt, const char *want) {
    fkv_error err = {0};
    char *salt = (char *)"unset";
    assert_int_equal(tenants_salt(cache, cache_salt, &salt, &err), 0);
    if (!want) assert_null(salt);
    else assert_string_equal(salt, want);
    free(salt);
}

static void test_a_tenants_salt_is_one_no_cache_salt_can_spell(void **state) {
    (void)state;
    expect_salt(NULL, NULL, NULL); /* the shared cache: as before tenants */
    expect_salt(NULL, "team-a", "team-a");
    expect_salt("acme", NULL, "\x1ftenant\x1f" "acme");
    expect_salt("acme", "team-a", "\x1ftenant\x1f" "acme\x1f" "team-a");
    expect_salt("acme", "caf\xc3\xa9 \x7e", "\x1ftenant\x1f" "acme\x1f" "caf\xc3\xa9 \x7e"); /* bytes >= 0x20 stay */
    const char *forged[] = {"\x1ftenant\x1f" "acme", "a\tb", "line\n", "\x7f", "x\x01"};
    for (size_t i = 0; i < sizeof forged / sizeof *forged; i++)
        for (int shared = 0; shared < 2; shared++) {
            fkv_error err = {0};
            char *salt = NULL;
            assert_int_equal(tenants_salt(shared ? NULL : "beta", forged[i], &salt, &err), -1);
            assert_int_equal(err.code, FKV_E_INPUT);
            assert_null(salt);
            assert_non_null(strstr(err.msg, "'cache_salt'"));
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_lines_name_tenants_and_several_keys_may_share_one),
        cmocka_unit_test(test_a_key_is_found_only_whole),
        cmocka_unit_test(test_comments_blank_lines_and_crlf_endings_are_skipped),
        cmocka_unit_test(test_a_key_without_a_name_is_named_by_its_digest_not_by_itself),
        cmocka_unit_test(test_a_shared_key_uses_the_common_cache),
        cmocka_unit_test(test_api_key_is_one_more_shared_key_of_the_tenant_default),
        cmocka_unit_test(test_every_malformed_line_is_refused_naming_its_line_and_never_its_key),
        cmocka_unit_test(test_a_file_is_read_and_a_missing_one_refused_naming_it),
        cmocka_unit_test(test_a_tenants_salt_is_one_no_cache_salt_can_spell),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
