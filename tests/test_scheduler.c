/* test_scheduler.c — the server's scheduler on stories260K: a job's lifetime as the connections and the engine
 * thread share it.
 *
 * Found by bench/soak under ASan: a streamed request with n > 1 and a response_format whose client went away had its
 * leader freed (the connection's reference and the engine's both dropped once the leader ended) while a follower was
 * still decoding; the leader took the grammar the follower was reading with it. Each job now owns one reference to
 * the grammar (fkv_grammar_share). Without the sanitizers the test still checks that the follower finishes within
 * its grammar; the freed memory itself is what the sanitizer build sees. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "scheduler.h"
#include "testutil.h"

#define WAIT_MS 120000 /* a sanitizer build decodes several times slower; a hung scheduler fails, not hangs */

/* Wait (job->mu not held) until pred(job) or WAIT_MS; true if pred holds. */
static bool wait_for(sched_job *j, bool (*pred)(const sched_job *)) {
    pthread_mutex_lock(&j->mu);
    for (int waited = 0; !pred(j) && waited < WAIT_MS; waited += 20) sched_job_wait_locked(j, j->prog.text.stable, 20);
    bool ok = pred(j);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

static bool generated_one(const sched_job *j) { return j->prog.n_gen > 0 || j->prog.done; }
static bool is_done(const sched_job *j) { return j->prog.done; }

static void test_a_follower_outliving_its_freed_leader_keeps_the_grammar(void **state) {
    (void)state;
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(tu_data("models/stories260K.gguf"), &err);
    if (!m) fail_msg("%s", err.msg);
    fkv_engine_params ep;
    assert_int_equal(fkv_engine_default_params(&ep, &err), 0);
    sched *s = sched_new(m, &ep, 1, 0, NULL, &err);
    if (!s) fail_msg("%s", err.msg);

    sched_job *leader = sched_job_new();
    static const char prompt[] = "Once upon a time";
    leader->req.ids = malloc(sizeof(int32_t) * 64);
    int n = fkv_tokenize(m, prompt, strlen(prompt), true, false, leader->req.ids, 64, &err);
    assert_true(n > 0);
    leader->req.n_ids = (uint32_t)n;
    leader->req.max_tokens = 400;
    leader->req.sampling = fkv_sampler_default_params();
    leader->req.sampling.seed = 1;
    /* 300 characters of lowercase and spaces: the follower cannot end before the leader is gone. */
    static const char gbnf[] = "root ::= [a-z ]{300}";
    leader->req.grammar = fkv_grammar_new(m, gbnf, strlen(gbnf), &err);
    if (!leader->req.grammar) fail_msg("%s", err.msg);
    sched_job *follower = sched_job_follower(leader, 2); /* our reference, kept to read its result */
    assert_non_null(follower);
    uint32_t retry_after;
    assert_int_equal(sched_submit(s, leader, &retry_after, &err), 0);

    /* The leader ends (its own client went away) while its follower decodes; then its last reference goes. */
    assert_true(wait_for(follower, generated_one));
    sched_job_cancel(leader);
    assert_true(wait_for(leader, is_done));
    sched_job_release(s, leader);

    assert_true(wait_for(follower, is_done));
    assert_int_equal(follower->prog.error.code, FKV_OK);
    assert_true(follower->prog.text.len > 0);
    assert_int_equal(strspn(follower->prog.text.text, "abcdefghijklmnopqrstuvwxyz "), follower->prog.text.len);
    sched_job_release(s, follower);
    sched_free(s);
    fkv_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_follower_outliving_its_freed_leader_keeps_the_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
