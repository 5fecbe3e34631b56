/* The flatkv command line: help on every subcommand, one clear line and exit code 2 for bad usage, and
 * `generate --json` reproducing the reference continuation of the shared model. */
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

typedef struct {
    int status;
    char *out;
    char *err;
} run_result;

/* Run `flatkv ARGS` through the shell; capture stdout, stderr and the exit code. */
static run_result run(const char *args) {
    const char *out_path = tu_tmp_path(".out"), *err_path = tu_tmp_path(".err");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/flatkv %s >%s 2>%s </dev/null", FKV_BUILD_DIR, args, out_path, err_path);
    int st = system(cmd);
    run_result r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, tu_read_file(out_path, NULL), tu_read_file(err_path, NULL)};
    remove(out_path);
    remove(err_path);
    assert_non_null(r.out);
    assert_non_null(r.err);
    return r;
}

static void done(run_result *r) {
    free(r->out);
    free(r->err);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Exit 2 with exactly one line on stderr containing `fragment`. */
static void expect_usage_error(const char *args, const char *fragment) {
    run_result r = run(args);
    if (r.status != 2 || count_lines(r.err) != 1 || !strstr(r.err, fragment))
        fail_msg("flatkv %s: status %d, stderr '%s' (want 2 and one line with '%s')", args, r.status, r.err, fragment);
    done(&r);
}

static void test_every_subcommand_has_help(void **state) {
    (void)state;
    static const char *subs[] = {"", "generate ", "tokenize ", "gen-model "};
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s--help", subs[i]);
        run_result r = run(args);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: flatkv"));
        done(&r);
    }
}

static void test_bad_usage_gives_one_line_and_exit_code_2(void **state) {
    (void)state;
    char args[4096];
    expect_usage_error("frobnicate", "unknown command");
    expect_usage_error("generate --bogus-flag -p hi", "--bogus-flag");
    expect_usage_error("tokenize -m", "-m");
    expect_usage_error("generate -m /nonexistent/model.gguf -p hi", "/nonexistent/model.gguf");
    snprintf(args, sizeof args, "generate -m %s -f /nonexistent/prompt.txt", tu_data("models/stories260K.gguf"));
    expect_usage_error(args, "/nonexistent/prompt.txt");
    snprintf(args, sizeof args, "generate -m %s -p hi -n many", tu_data("models/stories260K.gguf"));
    expect_usage_error(args, "-n");
    snprintf(args, sizeof args, "generate -m %s -p hi --kv-type q4", tu_data("models/stories260K.gguf"));
    expect_usage_error(args, "--kv-type");
    snprintf(args, sizeof args, "generate -m %s -p hi --top-p 2", tu_data("models/stories260K.gguf"));
    expect_usage_error(args, "--top-p");
    /* A file that is not a GGUF model: the error says what is wrong with it. */
    snprintf(args, sizeof args, "tokenize -m %s -p hi", tu_data("vectors/README.md"));
    expect_usage_error(args, "README.md");
    expect_usage_error("gen-model --dim 64", "required");
}

/* Speculative decoding's options: bad values, a draft mode without a draft model, a draft model of other tokens. */
static void test_spec_usage_errors(void **state) {
    (void)state;
    char args[4096], model[1024];
    snprintf(model, sizeof model, "%s", tu_data("models/stories260K.gguf"));
    snprintf(args, sizeof args, "generate -m %s -p hi --spec fast", model);
    expect_usage_error(args, "--spec");
    snprintf(args, sizeof args, "generate -m %s -p hi --draft-max 0", model);
    expect_usage_error(args, "--draft-max");
    snprintf(args, sizeof args, "generate -m %s -p hi --draft-max 17", model);
    expect_usage_error(args, "--draft-max");
    snprintf(args, sizeof args, "generate -m %s -p hi --spec draft", model);
    expect_usage_error(args, "--model-draft");
    const char *other = tu_tmp_path(".gguf");
    snprintf(args, sizeof args, "gen-model --dim 32 --hidden 64 --layers 1 --heads 1 --vocab-from %s -o %s",
             tu_data("tokenizers/ggml-vocab-llama-spm.gguf"), other);
    run_result g = run(args);
    assert_int_equal(g.status, 0);
    done(&g);
    snprintf(args, sizeof args, "generate -m %s -p hi --model-draft %s", model, other);
    expect_usage_error(args, "vocabulary");
    remove(other);
}

static void test_tokenize_prints_the_prompt_ids(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "tokenize -m %s -p 'Once upon a time' --json", tu_data("models/stories260K.gguf"));
    run_result r = run(args);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "{\"tokens\":[1,403,407,261,378]}\n");
    done(&r);
}

/* llama.cpp's choice, explicit: "</s>" (CONTROL) is text by default and the end token with --parse-special. */
static void test_tokenize_parses_control_tokens_only_with_parse_special(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "tokenize -m %s -p 'Hi</s>'", tu_data("models/stories260K.gguf"));
    run_result r = run(args);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "1 320 417 504 492 419 505\n");
    done(&r);
    snprintf(args, sizeof args, "tokenize -m %s -p 'Hi</s>' --parse-special", tu_data("models/stories260K.gguf"));
    r = run(args);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "1 320 417 2\n");
    done(&r);
}

/* The acceptance command: greedy ids equal the reference (whose first near-tie for this prompt comes
 * after 100 steps), and the text is the detokenized ids. */
static void test_generate_json_reproduces_the_reference_continuation(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "generate -m %s -p 'Once upon a time' -n 100 --temp 0 --json",
             tu_data("models/stories260K.gguf"));
    run_result r = run(args);
    assert_int_equal(r.status, 0);
    json_error_t jerr;
    json_t *got = json_loads(r.out, 0, &jerr);
    if (!got) fail_msg("not JSON: %s", r.out);
    FILE *fp = fopen(tu_data("vectors/stories260K-greedy.jsonl"), "r");
    char line[1 << 17];
    assert_non_null(fgets(line, sizeof line, fp));
    fclose(fp);
    json_t *ref = json_loads(line, 0, &jerr);
    json_t *tokens = json_object_get(got, "tokens"), *want = json_object_get(ref, "generated");
    assert_int_equal(json_array_size(tokens), 100);
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(json_integer_value(json_array_get(tokens, i)), json_integer_value(json_array_get(want, i)));
    assert_int_equal(json_integer_value(json_object_get(got, "prompt_tokens")), 5);
    const char *text = json_string_value(json_object_get(got, "text"));
    assert_non_null(text);
    assert_true(strncmp(text, ", there was a little", 20) == 0 || strncmp(text, " there", 6) == 0);
    assert_int_equal(strlen(json_string_value(json_object_get(got, "logits_digest"))), 16);
    assert_true(json_is_number(json_object_get(got, "prefill_ms")) && json_is_number(json_object_get(got, "decode_ms")));

    /* The same run again gives the same logits digest: generation is reproducible bit for bit. */
    run_result again = run(args);
    json_t *got2 = json_loads(again.out, 0, &jerr);
    assert_non_null(got2);
    assert_string_equal(json_string_value(json_object_get(got, "logits_digest")),
                        json_string_value(json_object_get(got2, "logits_digest")));
    json_decref(got2);
    done(&again);
    json_decref(got);
    json_decref(ref);
    done(&r);
}

static void test_seeded_sampling_is_reproducible(void **state) {
    (void)state;
    char args[4096];
    snprintf(args, sizeof args, "generate -m %s -p 'Tim wanted to' -n 40 --temp 0.9 --top-k 20 --top-p 0.9 "
             "--min-p 0.02 --repeat-penalty 1.1 --seed 42 --json", tu_data("models/stories260K.gguf"));
    run_result a = run(args), b = run(args);
    assert_int_equal(a.status, 0);
    /* Everything but the timings must match. */
    json_error_t jerr;
    json_t *ja = json_loads(a.out, 0, &jerr), *jb = json_loads(b.out, 0, &jerr);
    assert_true(json_equal(json_object_get(ja, "tokens"), json_object_get(jb, "tokens")));
    assert_true(json_equal(json_object_get(ja, "logits_digest"), json_object_get(jb, "logits_digest")));
    json_decref(ja);
    json_decref(jb);
    done(&a);
    done(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_subcommand_has_help),
        cmocka_unit_test(test_bad_usage_gives_one_line_and_exit_code_2),
        cmocka_unit_test(test_spec_usage_errors),
        cmocka_unit_test(test_tokenize_prints_the_prompt_ids),
        cmocka_unit_test(test_tokenize_parses_control_tokens_only_with_parse_special),
        cmocka_unit_test(test_generate_json_reproduces_the_reference_continuation),
        cmocka_unit_test(test_seeded_sampling_is_reproducible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
