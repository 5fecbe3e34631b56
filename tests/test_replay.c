/* flatkv replay: a conversation whose turns grow, repeat, shrink and switch, replayed with the prefix cache
 * and without it — every turn's kv_digest and logits_digest identical, and the cache actually used. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

static const char SESSION[] =
    "{\"prompt\": \"Once upon a time\", \"n\": 16}\n"
    "{\"prompt\": \"Once upon a time, there was a little girl named Lily. She loved to play outside.\", \"n\": 16}\n"
    "{\"prompt\": \"Once upon a time, there was a little girl named Lily. She loved to play outside. One day\"}\n"
    "{\"prompt\": \"Once upon a time, there was a little girl named Lily. She loved to play outside. One day\"}\n"
    "{\"prompt\": \"Once upon a time, there was a little girl\", \"n\": 8}\n"
    "\n"
    "{\"prompt_ids\": [1, 326, 391, 266, 267, 272, 421, 422, 426], \"n\": 20, \"temp\": 0}\n"
    "{\"prompt_ids\": [1, 326, 391, 266, 267, 272, 421, 422, 426, 432], \"n\": 4}\n";

/* Run replay over session text with extra flags; the parsed turn lines (a JSON array) and the status. */
static json_t *replay(const char *session, const char *flags, int *status, char **err_text) {
    const char *in = tu_tmp_path(".jsonl"), *out = tu_tmp_path(".out"), *err = tu_tmp_path(".err");
    assert_int_equal(tu_write_file(in, session, strlen(session)), 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/flatkv replay -m %s --session %s %s >%s 2>%s", FKV_BUILD_DIR,
             tu_data("models/stories260K.gguf"), in, flags, out, err);
    int st = system(cmd);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    char *text = tu_read_file(out, NULL);
    *err_text = tu_read_file(err, NULL);
    json_t *turns = json_array();
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t jerr;
        json_t *t = json_loads(line, 0, &jerr);
        if (!t) fail_msg("not JSON: %s", line);
        json_array_append_new(turns, t);
    }
    free(text);
    remove(in);
    remove(out);
    remove(err);
    return turns;
}

static json_int_t num(json_t *turn, const char *key) { return json_integer_value(json_object_get(turn, key)); }
static const char *str(json_t *turn, const char *key) { return json_string_value(json_object_get(turn, key)); }

static void test_replay_with_the_cache_equals_replay_without_it(void **state) {
    (void)state;
    int st_on, st_off;
    char *err_on, *err_off;
    json_t *on = replay(SESSION, "--cache-min 1 --prefill-rows 16", &st_on, &err_on);
    json_t *off = replay(SESSION, "--no-prefix-cache", &st_off, &err_off);
    if (st_on || st_off) fail_msg("replay failed: %s / %s", err_on, err_off);
    assert_int_equal(json_array_size(on), 7);
    assert_int_equal(json_array_size(off), 7);
    print_message("turn prompt cached generated kv_digest\n");
    for (size_t i = 0; i < 7; i++) {
        json_t *a = json_array_get(on, i), *b = json_array_get(off, i);
        print_message("%4zu %6lld %6lld %9zu %s\n", i + 1, (long long)num(a, "prompt_tokens"),
                      (long long)num(a, "cached_tokens"), json_array_size(json_object_get(a, "generated")),
                      str(a, "kv_digest"));
        assert_int_equal(num(a, "turn"), (json_int_t)i + 1);
        assert_int_equal(num(a, "prompt_tokens"), num(b, "prompt_tokens"));
        assert_string_equal(str(a, "kv_digest"), str(b, "kv_digest"));
        assert_string_equal(str(a, "logits_digest"), str(b, "logits_digest"));
        assert_true(json_equal(json_object_get(a, "generated"), json_object_get(b, "generated")));
        assert_string_equal(str(a, "text"), str(b, "text"));
        assert_int_equal(num(b, "cached_tokens"), 0);
    }
    /* Turn 2 extends turn 1's prompt; 3 extends 2; 4 repeats 3; 5 is shorter; 6 switches; 7 extends 6. */
    assert_int_equal(num(json_array_get(on, 0), "cached_tokens"), 0);
    assert_true(num(json_array_get(on, 1), "cached_tokens") >= 4);
    assert_true(num(json_array_get(on, 2), "cached_tokens") >= num(json_array_get(on, 1), "prompt_tokens") - 2);
    assert_int_equal(num(json_array_get(on, 3), "cached_tokens"), num(json_array_get(on, 3), "prompt_tokens") - 1);
    assert_int_equal(num(json_array_get(on, 4), "cached_tokens"), num(json_array_get(on, 4), "prompt_tokens") - 1);
    assert_int_equal(num(json_array_get(on, 5), "cached_tokens"), 1); /* only BOS agrees */
    assert_int_equal(num(json_array_get(on, 6), "cached_tokens"), 9);
    json_decref(on);
    json_decref(off);
    free(err_on);
    free(err_off);
}

static void test_a_bad_session_line_is_named_and_exits_2(void **state) {
    (void)state;
    static const struct {
        const char *session, *fragment;
    } cases[] = {
        {"{\"prompt\": \"hi\"}\nnot json\n", "line 2"},
        {"{\"prompt_ids\": [1, 99999]}\n", "prompt_ids[1]"},
        {"{\"prompt\": 5}\n", "line 1"},
        {"{\"prompt\": \"hi\", \"n\": -3}\n", "\"n\""},
        {"{\"prompt_ids\": []}\n", "no tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int st;
        char *err;
        json_t *turns = replay(cases[i].session, "", &st, &err);
        if (st != 2 || !strstr(err, cases[i].fragment))
            fail_msg("session %zu: status %d, stderr '%s' (want 2 and '%s')", i, st, err, cases[i].fragment);
        json_decref(turns);
        free(err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_with_the_cache_equals_replay_without_it),
        cmocka_unit_test(test_a_bad_session_line_is_named_and_exits_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
