/* flatkv chat end to end on the shared model: turns re-send the whole transcript and reuse the KV the last
 * turn left; /reset and /quit; Ctrl-C cancels a reply but not the conversation, and at the prompt exits 0. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

typedef struct {
    int prompt, cached, fresh, generated;
} turn_line;

/* Parse every "[turn K: ...]" line of err into turns (in order); the count. */
static int parse_turns(const char *err, turn_line *turns, int cap) {
    int n = 0;
    for (const char *p = strstr(err, "[turn "); p && n < cap; p = strstr(p + 1, "[turn ")) {
        int k;
        turn_line t;
        if (sscanf(p, "[turn %d: prompt %d tokens, cached %d, new %d, prefill %*f ms, generated %d tokens", &k, &t.prompt,
                   &t.cached, &t.fresh, &t.generated) != 5)
            fail_msg("malformed turn line: %.200s", p);
        assert_int_equal(t.fresh, t.prompt - t.cached);
        assert_true(t.cached < t.prompt); /* one token is always prefilled */
        turns[n++] = t;
    }
    return n;
}

/* Run `flatkv chat ARGS` with input on stdin; the exit status, stdout and stderr. */
static int run_chat(const char *args, const char *input, char **out, char **err) {
    const char *in_path = tu_tmp_path(".in"), *out_path = tu_tmp_path(".out"), *err_path = tu_tmp_path(".err");
    assert_int_equal(tu_write_file(in_path, input, strlen(input)), 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/flatkv chat -m %s %s <%s >%s 2>%s", FKV_BUILD_DIR, tu_data("models/stories260K.gguf"),
             args, in_path, out_path, err_path);
    int st = system(cmd);
    *out = tu_read_file(out_path, NULL);
    *err = tu_read_file(err_path, NULL);
    remove(in_path);
    remove(out_path);
    remove(err_path);
    assert_non_null(*out);
    assert_non_null(*err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The acceptance run: three user lines piped; turns 2 and 3 reuse the previous turn's prompt and reply. */
static void test_each_turn_reuses_the_kv_of_the_previous_one(void **state) {
    (void)state;
    char *out, *err;
    int st = run_chat("--cache-min 1 -n 20 --temp 0", "Hello there\nTell me about the cat\nWhat happened next?\n", &out, &err);
    if (st != 0) fail_msg("exit %d, stderr: %s", st, err);
    turn_line t[8];
    if (parse_turns(err, t, 8) != 3) fail_msg("want three turn lines, stderr: %s", err);
    assert_int_equal(t[0].cached, 0);
    for (int k = 1; k < 3; k++) {
        /* The previous prompt and reply come back re-rendered; re-tokenizing the reply may split its last
         * pieces differently, and the last sampled token was never fed: a few tokens of slack. */
        if (t[k].cached <= 0 || t[k].cached < t[k - 1].prompt + t[k - 1].generated - 4)
            fail_msg("turn %d reused %d tokens after a turn of %d prompt + %d generated", k + 1, t[k].cached,
                     t[k - 1].prompt, t[k - 1].generated);
        assert_true(t[k].prompt > t[k - 1].prompt);
    }
    assert_true(strlen(out) > 3); /* three replies were streamed */
    free(out);
    free(err);
}

static void test_reset_starts_over_and_quit_stops_reading(void **state) {
    (void)state;
    char *out, *err;
    int st = run_chat("--cache-min 1 -n 8 --temp 0 --system 'A story.'", "Hi\n\n/reset\nHi\n/quit\nNever answered\n", &out,
                      &err);
    if (st != 0) fail_msg("exit %d, stderr: %s", st, err);
    turn_line t[8];
    if (parse_turns(err, t, 8) != 2) fail_msg("want two turn lines, stderr: %s", err);
    assert_non_null(strstr(err, "[turn 1:"));
    assert_null(strstr(err, "[turn 2:")); /* the turn count starts over */
    /* After /reset the same first message renders the same prompt: all of it but the last token is reused. */
    assert_int_equal(t[1].prompt, t[0].prompt);
    assert_int_equal(t[1].cached, t[0].prompt - 1);
    free(out);
    free(err);
}

static void test_bad_chat_usage_gives_exit_code_2(void **state) {
    (void)state;
    char *out, *err;
    assert_int_equal(run_chat("--chat-template jinja", "", &out, &err), 2);
    assert_non_null(strstr(err, "jinja"));
    free(out);
    free(err);
    assert_int_equal(run_chat("-n 0", "", &out, &err), 2);
    free(out);
    free(err);
    assert_int_equal(run_chat("--help", "", &out, &err), 0);
    assert_non_null(strstr(out, "usage: flatkv chat"));
    free(out);
    free(err);
}

/* --- an interactive session driven through pipes --- */

typedef struct {
    pid_t pid;
    int in, out, err;
    char *out_text, *err_text;
    size_t out_len, err_len;
} session;

static void session_start(session *s, const char *args) {
    int pin[2], pout[2], perr[2];
    assert_int_equal(pipe(pin), 0);
    assert_int_equal(pipe(pout), 0);
    assert_int_equal(pipe(perr), 0);
    char bin[4096];
    snprintf(bin, sizeof bin, "%s/flatkv", FKV_BUILD_DIR);
    char model[4096];
    snprintf(model, sizeof model, "%s", tu_data("models/stories260K.gguf"));
    char argbuf[1024];
    snprintf(argbuf, sizeof argbuf, "%s", args);
    char *argv[32] = {bin, "chat", "-m", model};
    int argc = 4;
    for (char *tok = strtok(argbuf, " "); tok && argc < 31; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        execv(bin, argv);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    *s = (session){pid, pin[1], pout[0], perr[0], calloc(1, 1), calloc(1, 1), 0, 0};
}

/* Read what is available on fd into text (within timeout_ms); false at EOF or timeout. */
static bool session_read(int fd, char **text, size_t *len, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    char *grown = realloc(*text, *len + (size_t)n + 1);
    assert_non_null(grown);
    memcpy(grown + *len, buf, (size_t)n);
    *len += (size_t)n;
    grown[*len] = 0;
    *text = grown;
    return true;
}

/* Wait (up to 60 s) until stderr contains needle. */
static void session_wait_err(session *s, const char *needle) {
    for (int i = 0; i < 600 && !strstr(s->err_text, needle); i++) session_read(s->err, &s->err_text, &s->err_len, 100);
    if (!strstr(s->err_text, needle)) fail_msg("no '%s' on stderr: %s", needle, s->err_text);
}

/* Wait (up to 60 s) until stdout has grown past len. */
static void session_wait_out(session *s, size_t len) {
    for (int i = 0; i < 600 && s->out_len <= len; i++) session_read(s->out, &s->out_text, &s->out_len, 100);
    if (s->out_len <= len) fail_msg("no reply on stdout; stderr: %s", s->err_text);
}

static void session_say(session *s, const char *line) {
    assert_int_equal(write(s->in, line, strlen(line)), (ssize_t)strlen(line));
}

/* Exit status after the process ends (stdin still open); stderr drained. */
static int session_end(session *s) {
    while (session_read(s->err, &s->err_text, &s->err_len, 5000)) {}
    int st;
    assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
    close(s->in);
    close(s->out);
    close(s->err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_ctrl_c_cancels_a_reply_and_keeps_the_conversation(void **state) {
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    session s;
    /* A greedy stories260K never ends its story: only Ctrl-C stops these replies early. */
    session_start(&s, "--cache-min 1 -n 4000 --ctx 4096 --temp 0");
    session_say(&s, "Once\n");
    session_wait_out(&s, 0);
    kill(s.pid, SIGINT);
    session_wait_err(&s, "[turn 1:");
    /* Everything turn 1 wrote is in the pipe by now. */
    while (session_read(s.out, &s.out_text, &s.out_len, 0)) {}
    size_t turn1_out = s.out_len;
    session_say(&s, "And then?\n");
    session_wait_out(&s, turn1_out);
    kill(s.pid, SIGINT);
    session_wait_err(&s, "[turn 2:");
    /* Ctrl-C at the prompt ends the program, though stdin is still open. A moment for it to reach the read. */
    usleep(200 * 1000);
    kill(s.pid, SIGINT);
    int st = session_end(&s);
    if (st != 0) fail_msg("exit %d, stderr: %s", st, s.err_text);

    turn_line t[4];
    assert_int_equal(parse_turns(s.err_text, t, 4), 2);
    int n_cancelled = 0;
    for (const char *p = strstr(s.err_text, "cancelled"); p; p = strstr(p + 1, "cancelled")) n_cancelled++;
    assert_int_equal(n_cancelled, 2);
    assert_true(t[0].generated >= 1 && t[0].generated < 4000);
    assert_true(t[1].generated >= 1 && t[1].generated < 4000);
    /* The cancelled reply stayed in the transcript and in the KV: turn 2 reuses it. */
    if (t[1].cached < t[0].prompt + t[0].generated - 4)
        fail_msg("turn 2 reused %d tokens after a cancelled turn of %d prompt + %d generated", t[1].cached, t[0].prompt,
                 t[0].generated);
    free(s.out_text);
    free(s.err_text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_turn_reuses_the_kv_of_the_previous_one),
        cmocka_unit_test(test_reset_starts_over_and_quit_stops_reading),
        cmocka_unit_test(test_bad_chat_usage_gives_exit_code_2),
        cmocka_unit_test(test_ctrl_c_cancels_a_reply_and_keeps_the_conversation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
