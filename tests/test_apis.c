/* test_apis.c — the Messages API's shapes around a finished job, where the test model cannot go: a call in the
 * output comes back as a tool_use block, whole and in the stream's events; usage partitions the prompt; tool_choice
 * reaches the job in chat's shape. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anthropic.h"
#include "chat.h"
#include "testutil.h"
#include "toolcall.h"

static fkv_model *load_stories(void) {
    fkv_error err = {{0}};
    fkv_model *m = fkv_model_load(tu_shared("models/stories260K.gguf"), &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static void free_job(sched_job *job) {
    free(job->ids);
    for (size_t i = 0; i < job->n_stop; i++) free(job->stop[i]);
    free(job->stop);
    free(job->salt);
    free(job->text);
    json_decref(job->tool_calls);
    json_decref(job->tool_choice);
    memset(job, 0, sizeof *job);
}

/* The job as the scheduler leaves it after writing text: done, its calls parsed as finish_locked parses them. */
static void finish_with(sched_job *job, const char *text, uint32_t n_gen, uint32_t cached) {
    job->text = strdup(text);
    job->len = strlen(text);
    job->content_len = job->len;
    job->tool_calls = toolcall_parse(job->tool_format, job->text, job->len, job->id, &job->content_len);
    job->finish_reason = job->tool_calls ? "tool_calls" : "stop";
    job->stable = job->content_len;
    job->n_gen = n_gen;
    job->cached = cached;
    job->done = true;
}

static const char CALL_OUTPUT[] = "Checking.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

/* The "type" of each event, comma-separated. */
static char *event_types(const json_t *events) {
    static char out[2048];
    out[0] = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        if (i) strcat(out, ",");
        strcat(out, json_string_value(json_object_get(ev, "type")));
    }
    return out;
}

static void test_a_call_comes_back_as_a_tool_use_block(void **state) {
    (void)state;
    fkv_model *m = load_stories();
    chat_template chatml = {.family = CHAT_CHATML};
    oai_context ctx = {m, &chatml, 512};
    const char body[] = "{\"model\": \"m\", \"max_tokens\": 32, \"tools\": [{\"name\": \"weather\", \"input_schema\": "
                        "{\"type\": \"object\"}}], \"tool_choice\": {\"type\": \"any\"}, \"messages\": [{\"role\": "
                        "\"user\", \"content\": \"Weather?\"}]}";
    anth_request req;
    sched_job job;
    oai_error e;
    memset(&job, 0, sizeof job);
    if (anth_parse(&ctx, true, body, strlen(body), &req, &job, &e)) fail_msg("anth_parse: %s", e.message);
    assert_int_equal(job.tool_format, TOOLCALL_HERMES);
    assert_string_equal(json_string_value(job.tool_choice), "required"); /* "any", in chat's form */
    finish_with(&job, CALL_OUTPUT, 20, 5);

    json_t *r = anth_response(&req, &job);
    json_t *content = json_object_get(r, "content");
    assert_int_equal(json_array_size(content), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(content, 0), "text")), "Checking.");
    json_t *use = json_array_get(content, 1);
    assert_string_equal(json_string_value(json_object_get(use, "type")), "tool_use");
    assert_int_equal(strncmp(json_string_value(json_object_get(use, "id")), "toolu_", 6), 0);
    assert_string_equal(json_string_value(json_object_get(use, "name")), "weather");
    assert_string_equal(json_string_value(json_object_get(json_object_get(use, "input"), "city")), "Paris");
    assert_string_equal(json_string_value(json_object_get(r, "stop_reason")), "tool_use");
    json_t *usage = json_object_get(r, "usage");
    assert_int_equal(json_integer_value(json_object_get(usage, "cache_read_input_tokens")), 5);
    assert_int_equal(json_integer_value(json_object_get(usage, "cache_creation_input_tokens")), (json_int_t)job.n_ids - 5);
    assert_int_equal(json_integer_value(json_object_get(usage, "input_tokens")), 0);
    assert_int_equal(json_integer_value(json_object_get(usage, "output_tokens")), 20);

    json_t *events = json_array();
    anth_stream(&req, &job, events);
    assert_true(req.finished);
    assert_string_equal(event_types(events), "message_start,ping,content_block_start,content_block_delta,"
                                             "content_block_stop,content_block_start,content_block_delta,"
                                             "content_block_stop,message_delta,message_stop");
    json_t *start = json_array_get(events, 5), *delta = json_array_get(events, 6);
    assert_int_equal(json_integer_value(json_object_get(start, "index")), 1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(start, "content_block"), "type")), "tool_use");
    assert_int_equal(json_object_size(json_object_get(json_object_get(start, "content_block"), "input")), 0);
    json_t *args = json_loads(json_string_value(json_object_get(json_object_get(delta, "delta"), "partial_json")), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(args, "city")), "Paris");
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_array_get(events, 8), "delta"), "stop_reason")),
                        "tool_use");
    json_decref(args);
    json_decref(events);
    json_decref(r);
    free_job(&job);
    fkv_model_free(m);
}

static void test_the_messages_usage_partitions_the_prompt(void **state) {
    (void)state;
    fkv_model *m = load_stories();
    chat_template plain = {.family = CHAT_PLAIN};
    oai_context ctx = {m, &plain, 512};
    const char body[] = "{\"model\": \"m\", \"max_tokens\": 8, \"stop_sequences\": [\"zz\"], \"messages\": [{\"role\": "
                        "\"user\", \"content\": \"Hi\"}]}";
    for (int cache = 0; cache < 2; cache++) {
        anth_request req;
        sched_job job;
        oai_error e;
        memset(&job, 0, sizeof job);
        if (anth_parse(&ctx, cache, body, strlen(body), &req, &job, &e)) fail_msg("anth_parse: %s", e.message);
        finish_with(&job, " Hello", 2, cache ? 3 : 0);
        job.stop_hit = job.stop[0];
        json_t *r = anth_response(&req, &job), *usage = json_object_get(r, "usage");
        json_int_t in = json_integer_value(json_object_get(usage, "input_tokens"));
        json_int_t created = json_integer_value(json_object_get(usage, "cache_creation_input_tokens"));
        json_int_t read = json_integer_value(json_object_get(usage, "cache_read_input_tokens"));
        assert_int_equal(in + created + read, job.n_ids);
        assert_int_equal(created, cache ? (json_int_t)job.n_ids - 3 : 0); /* computed and left cached */
        assert_string_equal(json_string_value(json_object_get(r, "stop_reason")), "stop_sequence");
        assert_string_equal(json_string_value(json_object_get(r, "stop_sequence")), "zz");
        json_decref(r);
        free_job(&job);
    }
    fkv_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_call_comes_back_as_a_tool_use_block),
        cmocka_unit_test(test_the_messages_usage_partitions_the_prompt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
