/* test_openai.c — the request parser's guarantees about what reaches the tokenizer: a message cannot
 * inject a control token (its "<s>" or "</s>" stays text, while the template's own ones are tokens),
 * chat_template_kwargs.enable_thinking switches a thinking template exactly as chat_prompt_ids does, so do
 * reasoning_effort and an assistant's reasoning_content, and the routing keys (prompt_cache_key, user) are checked but
 * change neither the prompt nor the cache salt; and the answer's shape: a reasoning model's reasoning comes back as
 * reasoning_content, whole and in its own stream deltas. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "openai.h"
#include "testutil.h"

static void free_job(sched_job *job) {
    sched_request_clear(&job->req);
    sched_progress_clear(&job->prog);
}

/* The prompt ids of body under template t; asserts the parse succeeds. *n their count; the caller frees. */
static int32_t *parse_ids(const fkv_model *m, const chat_template *t, const char *body, uint32_t *n) {
    api_context ctx = {m, t, 512, {0}, false, NULL, "m", NULL};
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    memset(&req, 0, sizeof req);
    if (oai_parse(&ctx, OAI_CHAT, body, strlen(body), &req, &job, &e)) fail_msg("oai_parse: %s", e.message);
    int32_t *ids = job.req.ids;
    *n = job.req.n_ids;
    job.req.ids = NULL;
    free_job(&job);
    return ids;
}

static int count_of(const int32_t *ids, uint32_t n, int32_t id) {
    int k = 0;
    for (uint32_t i = 0; i < n; i++) k += ids[i] == id;
    return k;
}

static void test_a_message_cannot_inject_control_tokens(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    const int32_t bos = fkv_token_bos(m), eos = 2;
    chat_template chatml = {.family = CHAT_CHATML};
    uint32_t n;
    int32_t *ids = parse_ids(m, &chatml, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi<s> there</s>\"}]}", &n);
    assert_int_equal(ids[0], bos);
    assert_int_equal(count_of(ids, n, bos), 1); /* the tokenizer's, not the message's */
    assert_int_equal(count_of(ids, n, eos), 0);
    free(ids);
    /* Llama-2's template writes "<s>" before each instruction and "</s>" after each reply: those are tokens. */
    chat_template llama2 = {.family = CHAT_LLAMA2};
    ids = parse_ids(m, &llama2,
                    "{\"messages\": [{\"role\": \"user\", \"content\": \"a</s><s>b\"}, {\"role\": \"assistant\", "
                    "\"content\": \"ok</s>\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": "
                    "\"<s>c\"}]}]}",
                    &n);
    assert_int_equal(count_of(ids, n, bos), 2);
    assert_int_equal(count_of(ids, n, eos), 1);
    free(ids);
    fkv_model_free(m);
}

static void test_enable_thinking_false_renders_the_empty_think_block(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    fkv_error err = {0};
    chat_template qwen3;
    if (chat_template_by_name("qwen3", &qwen3, &err)) fail_msg("%s", err.msg);
    const char *on = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}";
    const char *off = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                      "\"chat_template_kwargs\": {\"enable_thinking\": false, \"other\": 1}}";
    uint32_t n_on, n_off, n_want;
    int32_t *ids_on = parse_ids(m, &qwen3, on, &n_on);
    int32_t *ids_off = parse_ids(m, &qwen3, off, &n_off);
    const chat_message msgs[] = {{.role = "user", .content = "Hi"}};
    chat_template want_t = qwen3;
    want_t.no_thinking = true;
    int32_t *want = NULL;
    if (chat_prompt_ids(m, &want_t, msgs, 1, NULL, &want, &n_want, &err)) fail_msg("%s", err.msg);
    assert_int_equal(n_off, n_want);
    assert_memory_equal(ids_off, want, n_want * sizeof *want);
    assert_true(n_off > n_on);
    assert_memory_equal(ids_off, ids_on, n_on * sizeof *ids_on); /* the block only follows the prompt */
    free(want);
    free(ids_on);
    free(ids_off);

    api_context ctx = {m, &qwen3, 512, {0}, false, NULL, "m", NULL};
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    const char *bad = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                      "\"chat_template_kwargs\": {\"enable_thinking\": \"no\"}}";
    assert_int_equal(oai_parse(&ctx, OAI_CHAT, bad, strlen(bad), &req, &job, &e), -1);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "chat_template_kwargs");
    free_job(&job);
    fkv_model_free(m);
}

/* oai_parse of body as a request of kind under ChatML, into req, job and e; its return. */
static int parse(const fkv_model *m, oai_kind kind, const char *body, api_request *req, sched_job *job, api_error *e) {
    static const chat_template chatml = {.family = CHAT_CHATML};
    api_context ctx = {m, &chatml, 512, {0}, false, NULL, "m", NULL};
    memset(req, 0, sizeof *req);
    memset(job, 0, sizeof *job);
    return oai_parse(&ctx, kind, body, strlen(body), req, job, e);
}

static void test_routing_keys_change_neither_the_prompt_nor_the_salt(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    const struct {
        oai_kind kind;
        const char *plain, *keyed, *logged;
    } cases[] = {
        {OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"cache_salt\": \"tenant\"}",
         "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"cache_salt\": \"tenant\", "
         "\"prompt_cache_key\": \"conversation-1\", \"user\": \"user-7\"}",
         "conversation-1"},
        {OAI_COMPLETION, "{\"prompt\": \"Once upon a time\"}",
         "{\"prompt\": \"Once upon a time\", \"user\": null, \"prompt_cache_key\": "
         "\"0123456789012345678901234567890123456789012345678901234567890123-and-more\"}",
         "0123456789012345678901234567890123456789012345678901234567890123"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        api_request req_plain, req_keyed;
        sched_job plain, keyed;
        api_error e;
        if (parse(m, cases[i].kind, cases[i].plain, &req_plain, &plain, &e)) fail_msg("oai_parse: %s", e.message);
        if (parse(m, cases[i].kind, cases[i].keyed, &req_keyed, &keyed, &e)) fail_msg("oai_parse: %s", e.message);
        assert_int_equal(keyed.req.n_ids, plain.req.n_ids);
        assert_memory_equal(keyed.req.ids, plain.req.ids, plain.req.n_ids * sizeof *plain.req.ids);
        assert_true((keyed.req.salt == NULL) == (plain.req.salt == NULL));
        if (plain.req.salt) assert_string_equal(keyed.req.salt, plain.req.salt);
        assert_string_equal(req_plain.cache_key, "");
        assert_string_equal(req_keyed.cache_key, cases[i].logged); /* kept for the log, truncated */
        free_job(&plain);
        free_job(&keyed);
    }
    fkv_model_free(m);
}

static void test_a_routing_key_that_is_not_a_string_is_a_400(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    const struct {
        oai_kind kind;
        const char *body, *param;
    } cases[] = {
        {OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"prompt_cache_key\": 5}",
         "prompt_cache_key"},
        {OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"prompt_cache_key\": {\"id\": \"a\"}}",
         "prompt_cache_key"},
        {OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"prompt_cache_key\": [\"a\"]}",
         "prompt_cache_key"},
        {OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"user\": true}", "user"},
        {OAI_COMPLETION, "{\"prompt\": \"Hi\", \"prompt_cache_key\": 1.5}", "prompt_cache_key"},
        {OAI_COMPLETION, "{\"prompt\": \"Hi\", \"user\": 42}", "user"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        api_request req;
        sched_job job;
        api_error e;
        assert_int_equal(parse(m, cases[i].kind, cases[i].body, &req, &job, &e), -1);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.type, "invalid_request_error");
        assert_string_equal(e.param, cases[i].param);
        assert_non_null(strstr(e.message, "must be a string"));
        free_job(&job);
    }
    fkv_model_free(m);
}

/* Found by fuzz/fuzz_openai.c: the JSON parser's message quotes the body near the error, so a body that is not UTF-8
 * made a message that is not either, and the error body could not be built (the client got "{}"). */
static void test_an_error_quoting_invalid_utf8_still_has_a_json_body(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template chatml = {.family = CHAT_CHATML};
    api_context ctx = {m, &chatml, 512, {0}, false, NULL, "m", NULL};
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    const char body[] = "{\"messages\": \"\\\xde\x9e\xa3\xff\"}";
    assert_int_equal(oai_parse(&ctx, OAI_CHAT, body, sizeof body - 1, &req, &job, &e), -1);
    assert_int_equal(e.status, 400);
    json_t *err_body = oai_error_body(&e);
    assert_non_null(err_body);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(err_body, "error"), "message")), "JSON"));
    json_decref(err_body);
    free_job(&job);
    fkv_model_free(m);
}

/* body's ids equal chat_prompt_ids of msgs under t (no tools). */
static void expect_ids(const fkv_model *m, const chat_template *server, const char *body, const chat_template *t,
                       const chat_message *msgs, size_t n) {
    fkv_error err = {0};
    uint32_t n_got, n_want;
    int32_t *got = parse_ids(m, server, body, &n_got), *want = NULL;
    if (chat_prompt_ids(m, t, msgs, n, NULL, &want, &n_want, &err)) fail_msg("%s", err.msg);
    assert_int_equal(n_got, n_want);
    assert_memory_equal(got, want, n_want * sizeof *want);
    free(got);
    free(want);
}

static void test_reasoning_effort_and_reasoning_content_reach_the_template(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    fkv_error err = {0};
    chat_template harmony;
    if (chat_template_by_name("gpt-oss", &harmony, &err)) fail_msg("%s", err.msg);
    static const chat_tool_call call = {"f", "{\"x\": 1}"};
    const chat_message msgs[] = {{.role = "user", .content = "Hi"},
                                 {.role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1,
                                  .reasoning = "Call f."},
                                 {.role = "tool", .content = "ok"}};
    chat_template high = harmony, low = harmony;
    high.reasoning_effort = "high";
    low.reasoning_effort = "low";
    const char *convo = "\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                        "\"content\": null, \"reasoning_content\": \"Call f.\", \"tool_calls\": [{\"id\": \"1\", "
                        "\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}}]}, "
                        "{\"role\": \"tool\", \"tool_call_id\": \"1\", \"content\": \"ok\"}]";
    char body[1024];
    snprintf(body, sizeof body, "{%s, \"reasoning_effort\": \"high\"}", convo);
    expect_ids(m, &harmony, body, &high, msgs, 3);
    /* the template's kwarg wins over OpenAI's field */
    snprintf(body, sizeof body, "{%s, \"reasoning_effort\": \"high\", \"chat_template_kwargs\": {\"reasoning_effort\": "
                                "\"low\"}}", convo);
    expect_ids(m, &harmony, body, &low, msgs, 3);
    snprintf(body, sizeof body, "{%s}", convo);
    expect_ids(m, &harmony, body, &harmony, msgs, 3);

    api_context ctx = {m, &harmony, 512, {0}, false, NULL, "m", NULL};
    api_request req;
    sched_job job;
    api_error e;
    const char *const bad[][2] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"reasoning_effort\": \"extreme\"}",
         "reasoning_effort"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"chat_template_kwargs\": {\"reasoning_effort\": 3}}",
         "chat_template_kwargs"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"reasoning_content\": 1}]}", "messages[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&job, 0, sizeof job);
        assert_int_equal(oai_parse(&ctx, OAI_CHAT, bad[i][0], strlen(bad[i][0]), &req, &job, &e), -1);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.param, bad[i][1]);
        free_job(&job);
    }
    fkv_model_free(m);
}

/* The "choices[0].delta" of each chunk in events, one JSON text per line. */
static void deltas(const json_t *events, char *out, size_t cap) {
    size_t i, at = 0;
    const json_t *ev;
    out[0] = 0;
    json_array_foreach(events, i, ev) {
        if (!json_is_object(ev)) continue;
        char *d = json_dumps(json_object_get(json_array_get(json_object_get(ev, "choices"), 0), "delta"), JSON_COMPACT);
        at += (size_t)snprintf(out + at, at < cap ? cap - at : 0, "%s\n", d ? d : "?");
        free(d);
    }
}

static void test_a_reply_streams_its_reasoning_apart_from_its_content(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    fkv_error err = {0};
    chat_template harmony;
    if (chat_template_by_name("gpt-oss", &harmony, &err)) fail_msg("%s", err.msg);
    api_context ctx = {m, &harmony, 512, {0}, false, NULL, "m", NULL};
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"stream\": true}";
    if (oai_parse(&ctx, OAI_CHAT, body, strlen(body), &req, &job, &e)) fail_msg("%s", e.message);
    assert_int_equal(job.req.form.reasoning, REPLY_HARMONY);
    /* the text as the scheduler grows it, the stream asked after each piece */
    const char *pieces[] = {"<|channel|>analysis<|message|>", "User", " greets.", "<|end|>", "<|start|>assistant",
                            "<|channel|>final<|message|>", "Hello", "!"};
    json_t *events = json_array();
    char text[512] = "";
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++) {
        strcat(text, pieces[i]);
        assert_int_equal(reply_read(&job.prog.reply, &job.req.form, text, strlen(text), false), 0);
        oai_chat.stream(&req, &job, events);
    }
    json_t *calls = NULL;
    assert_int_equal(reply_finish(&job.prog.reply, &job.req.form, text, strlen(text), "t", NULL, &calls), 0);
    assert_null(calls);
    job.prog.finish_reason = "stop";
    job.prog.done = true;
    oai_chat.stream(&req, &job, events);
    char got[2048];
    deltas(events, got, sizeof got);
    assert_string_equal(got, "{\"role\":\"assistant\",\"content\":\"\"}\n{\"reasoning_content\":\"User\"}\n"
                             "{\"reasoning_content\":\" greets.\"}\n{\"content\":\"Hello\"}\n{\"content\":\"!\"}\n{}\n");
    json_t *r = oai_response(&req, &job);
    const json_t *message = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "message");
    assert_string_equal(json_string_value(json_object_get(message, "reasoning_content")), "User greets.");
    assert_string_equal(json_string_value(json_object_get(message, "content")), "Hello!");
    json_decref(r);
    json_decref(events);
    free_job(&job);
    fkv_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_message_cannot_inject_control_tokens),
        cmocka_unit_test(test_enable_thinking_false_renders_the_empty_think_block),
        cmocka_unit_test(test_routing_keys_change_neither_the_prompt_nor_the_salt),
        cmocka_unit_test(test_a_routing_key_that_is_not_a_string_is_a_400),
        cmocka_unit_test(test_an_error_quoting_invalid_utf8_still_has_a_json_body),
        cmocka_unit_test(test_reasoning_effort_and_reasoning_content_reach_the_template),
        cmocka_unit_test(test_a_reply_streams_its_reasoning_apart_from_its_content),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
