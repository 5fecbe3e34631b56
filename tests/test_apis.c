/* test_apis.c — the Messages and Responses APIs' shapes around a finished job, where the test model cannot go: a
 * call in the output comes back as a tool_use block (Messages) or a function_call item (Responses), whole and in
 * their streams' events; a stored response is continued from its exact ids (an end-of-generation token at its end
 * replaced by the template's end of turn); usage partitions the prompt; text.format and tool_choice reach the job
 * in chat's shapes, and compose in every API; count_tokens counts what a message would prefill. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anthropic.h"
#include "chat/chat.h"
#include "openai.h"
#include "responses.h"
#include "testutil.h"
#include "reply.h"
#include "toolcall.h"

static void free_job(sched_job *job) {
    sched_request_clear(&job->req);
    sched_progress_clear(&job->prog);
}

/* The job as the scheduler leaves it after writing text: done, split and its calls parsed as finish_locked does. */
static void finish_with(sched_job *job, const char *text, uint32_t n_gen, uint32_t cached) {
    job->prog.text.text = strdup(text);
    job->prog.text.len = job->prog.text.stable = strlen(text);
    assert_int_equal(reply_finish(&job->prog.reply, &job->req.form, job->prog.text.text, job->prog.text.len,
                                  job->req.id, job->req.tools, &job->prog.tool_calls), 0);
    job->prog.finish_reason = job->prog.tool_calls ? "tool_calls" : "stop";
    job->prog.n_gen = n_gen;
    job->prog.cached = cached;
    job->prog.done = true;
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
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template chatml = {.family = CHAT_CHATML};
    api_context ctx = {m, &chatml, 512, {0}, true, NULL, "m", NULL};
    const char body[] = "{\"model\": \"m\", \"max_tokens\": 32, \"tools\": [{\"name\": \"weather\", \"input_schema\": "
                        "{\"type\": \"object\"}}], \"tool_choice\": {\"type\": \"any\"}, \"messages\": [{\"role\": "
                        "\"user\", \"content\": \"Weather?\"}]}";
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    if (anth_parse(&ctx, body, strlen(body), &req, &job, &e)) fail_msg("anth_parse: %s", e.message);
    assert_int_equal(job.req.form.calls, TOOLCALL_HERMES);
    assert_string_equal(json_string_value(job.req.tool_choice), "required"); /* "any", in chat's form */
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
    assert_int_equal(json_integer_value(json_object_get(usage, "cache_creation_input_tokens")),
                     (json_int_t)job.req.n_ids - 5);
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
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template plain = {.family = CHAT_PLAIN};
    api_context ctx = {m, &plain, 512, {0}, false, NULL, "m", NULL};
    const char body[] = "{\"model\": \"m\", \"max_tokens\": 8, \"stop_sequences\": [\"zz\"], \"messages\": [{\"role\": "
                        "\"user\", \"content\": \"Hi\"}]}";
    for (int cache = 0; cache < 2; cache++) {
        api_request req;
        sched_job job;
        api_error e;
        memset(&job, 0, sizeof job);
        ctx.prefix_cache = cache;
        if (anth_parse(&ctx, body, strlen(body), &req, &job, &e)) fail_msg("anth_parse: %s", e.message);
        finish_with(&job, " Hello", 2, cache ? 3 : 0);
        job.prog.text.stop_hit = job.req.stop[0];
        json_t *r = anth_response(&req, &job), *usage = json_object_get(r, "usage");
        json_int_t in = json_integer_value(json_object_get(usage, "input_tokens"));
        json_int_t created = json_integer_value(json_object_get(usage, "cache_creation_input_tokens"));
        json_int_t read = json_integer_value(json_object_get(usage, "cache_read_input_tokens"));
        assert_int_equal(in + created + read, job.req.n_ids);
        assert_int_equal(created, cache ? (json_int_t)job.req.n_ids - 3 : 0); /* computed and left cached */
        assert_string_equal(json_string_value(json_object_get(r, "stop_reason")), "stop_sequence");
        assert_string_equal(json_string_value(json_object_get(r, "stop_sequence")), "zz");
        json_decref(r);
        free_job(&job);
    }
    fkv_model_free(m);
}

static void test_a_call_comes_back_as_a_function_call_item(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template chatml = {.family = CHAT_CHATML};
    resp_store *store = resp_store_new(8, 1 << 20);
    api_context ctx = {m, &chatml, 512, {0}, false, store, "m", NULL};
    const char body[] = "{\"input\": \"Weather?\", \"tools\": [{\"type\": \"function\", \"name\": \"weather\", "
                        "\"parameters\": {\"type\": \"object\"}}], \"tool_choice\": {\"type\": \"function\", \"name\": "
                        "\"weather\"}, \"parallel_tool_calls\": false}";
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    if (resp_parse(&ctx, body, strlen(body), &req, &job, &e)) fail_msg("resp_parse: %s", e.message);
    assert_int_equal(job.req.form.calls, TOOLCALL_HERMES);
    assert_true(job.req.single_tool_call);
    assert_string_equal(json_string_value(json_object_get(json_object_get(job.req.tool_choice, "function"), "name")),
                        "weather"); /* chat's form of the Responses' {"type": "function", "name": ...} */
    finish_with(&job, CALL_OUTPUT, 20, 0);

    json_t *events = json_array();
    resp_stream(&req, &job, events);
    assert_true(req.finished);
    assert_string_equal(event_types(events),
                        "response.created,response.in_progress,response.output_item.added,"
                        "response.content_part.added,response.output_text.delta,response.output_text.done,"
                        "response.content_part.done,response.output_item.done,response.output_item.added,"
                        "response.function_call_arguments.delta,response.function_call_arguments.done,"
                        "response.output_item.done,response.completed");
    for (size_t i = 0; i < json_array_size(events); i++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(events, i), "sequence_number")), (json_int_t)i);
    json_t *r = json_object_get(json_array_get(events, 12), "response"), *output = json_object_get(r, "output");
    assert_string_equal(json_string_value(json_object_get(r, "status")), "completed");
    assert_int_equal(json_array_size(output), 2);
    json_t *call = json_array_get(output, 1);
    assert_string_equal(json_string_value(json_object_get(call, "type")), "function_call");
    assert_string_equal(json_string_value(json_object_get(call, "name")), "weather");
    assert_int_equal(strncmp(json_string_value(json_object_get(call, "call_id")), "call_", 5), 0);
    json_t *args = json_loads(json_string_value(json_object_get(call, "arguments")), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(args, "city")), "Paris");
    json_t *added = json_object_get(json_array_get(events, 8), "item");
    assert_string_equal(json_string_value(json_object_get(added, "arguments")), ""); /* in progress */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(events, 8), "output_index")), 1);
    /* the stream stored the response it completed with */
    json_t *got = resp_store_get(store, req.id, NULL, &e);
    assert_non_null(got);
    assert_true(json_equal(json_object_get(got, "output"), output));
    json_decref(got);
    json_decref(args);
    json_decref(events);
    api_request_free(&req);
    free_job(&job);
    resp_store_free(store);
    fkv_model_free(m);
}

/* A finished, stored turn of body whose output ids are out[0..n_out); returns its id in id. */
static void stored_turn(const api_context *ctx, const char *body, const int32_t *out, uint32_t n_out,
                        char id[48], int32_t **prompt, uint32_t *n_prompt) {
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    if (resp_parse(ctx, body, strlen(body), &req, &job, &e)) fail_msg("resp_parse: %s", e.message);
    finish_with(&job, " Once", n_out, 0);
    job.prog.out = malloc(sizeof(int32_t) * n_out);
    memcpy(job.prog.out, out, sizeof(int32_t) * n_out);
    job.prog.n_out = n_out;
    json_decref(resp_response(&req, &job));
    snprintf(id, 48, "%s", req.id);
    *prompt = malloc(sizeof(int32_t) * req.n_prompt);
    memcpy(*prompt, req.prompt, sizeof(int32_t) * req.n_prompt);
    *n_prompt = req.n_prompt;
    api_request_free(&req);
    free_job(&job);
}

static void test_a_stored_turn_is_continued_from_its_exact_ids(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template plain = {.family = CHAT_PLAIN};
    resp_store *store = resp_store_new(8, 1 << 20);
    api_context ctx = {m, &plain, 512, {0}, false, store, "m", NULL};
    const int32_t eos = 2, a = 400, b = 401;
    const int32_t ended[] = {a, b, eos}, cut[] = {a, b};
    for (int k = 0; k < 2; k++) {
        char id[48], body[256];
        int32_t *prompt;
        uint32_t n_prompt;
        stored_turn(&ctx, "{\"input\": \"Tell me a story.\", \"instructions\": \"Be kind.\"}", k ? cut : ended,
                    k ? 2 : 3, id, &prompt, &n_prompt);
        snprintf(body, sizeof body, "{\"input\": \"More.\", \"previous_response_id\": \"%s\"}", id);
        api_request req;
        sched_job job;
        api_error e;
        memset(&job, 0, sizeof job);
        if (resp_parse(&ctx, body, strlen(body), &req, &job, &e)) fail_msg("resp_parse: %s", e.message);
        /* the prompt, the output as generated without its end-of-generation token, then the continuation */
        const chat_message next[] = {{.role = "user", .content = "More."}};
        int32_t *more;
        uint32_t n_more;
        fkv_error err = {0};
        if (chat_continuation_ids(m, &plain, "Be kind.", next, 1, b, &more, &n_more, &err)) fail_msg("%s", err.msg);
        assert_int_equal(job.req.n_ids, n_prompt + 2 + n_more);
        assert_memory_equal(job.req.ids, prompt, sizeof(int32_t) * n_prompt);
        assert_memory_equal(job.req.ids + n_prompt, cut, sizeof cut);
        assert_memory_equal(job.req.ids + n_prompt + 2, more, sizeof(int32_t) * n_more);
        assert_string_equal(req.instructions, "Be kind."); /* the chain's */
        free(more);
        free(prompt);
        api_request_free(&req);
        free_job(&job);
        /* another salt cannot continue it, and other instructions cannot */
        snprintf(body, sizeof body, "{\"input\": \"More.\", \"previous_response_id\": \"%s\", \"cache_salt\": \"b\"}", id);
        memset(&job, 0, sizeof job);
        assert_int_equal(resp_parse(&ctx, body, strlen(body), &req, &job, &e), -1);
        assert_int_equal(e.status, 404);
        api_request_free(&req);
        free_job(&job);
        snprintf(body, sizeof body, "{\"input\": \"More.\", \"previous_response_id\": \"%s\", \"instructions\": \"No.\"}", id);
        assert_int_equal(resp_parse(&ctx, body, strlen(body), &req, &job, &e), -1);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.param, "instructions");
        api_request_free(&req);
        free_job(&job);
    }
    resp_store_free(store);
    fkv_model_free(m);
}

static void test_text_format_reaches_the_job_as_chats_response_format(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template plain = {.family = CHAT_PLAIN};
    resp_store *store = resp_store_new(8, 1 << 20);
    api_context ctx = {m, &plain, 512, {0}, false, store, "m", NULL};
    const char *bodies[] = {
        "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"n\", \"schema\": {\"type\": "
        "\"object\"}, \"strict\": true}}}",
        "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_object\"}}}",
        "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"text\"}}}",
    };
    const char *expected[] = {
        "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", \"schema\": {\"type\": \"object\"}, \"strict\": true}}",
        "{\"type\": \"json_object\"}",
        NULL,
    };
    for (int k = 0; k < 3; k++) {
        api_request req;
        sched_job job;
        api_error e;
        memset(&job, 0, sizeof job);
        if (resp_parse(&ctx, bodies[k], strlen(bodies[k]), &req, &job, &e)) fail_msg("resp_parse: %s", e.message);
        if (!expected[k]) {
            assert_null(job.req.response_format);
        } else {
            json_t *want = json_loads(expected[k], 0, NULL);
            assert_true(json_equal(job.req.response_format, want));
            json_decref(want);
        }
        api_request_free(&req);
        free_job(&job);
    }
    resp_store_free(store);
    fkv_model_free(m);
}

/* Parse body with the row's parser: 0 (a grammar made when want_grammar), or the refusal's status. */
static int parse_status(const api *row, const api_context *ctx, const char *body, bool want_grammar, api_error *e) {
    api_request req;
    sched_job job;
    memset(&job, 0, sizeof job);
    int rc = row->parse(ctx, body, strlen(body), &req, &job, e);
    if (!rc && want_grammar != (job.req.grammar != NULL)) fail_msg("grammar %s: %s", want_grammar ? "missing" : "made", body);
    api_request_free(&req);
    free_job(&job);
    return rc ? e->status : 0;
}

#define CHAT_TOOLS "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"parameters\": " \
                   "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]"
#define NAMED_TOOLS "\"tools\": [{\"type\": \"function\", \"name\": \"weather\", \"parameters\": {\"type\": \"object\"}}]"
#define ANTH_TOOLS "\"tools\": [{\"name\": \"weather\", \"input_schema\": {\"type\": \"object\"}}]"
#define SCHEMA "{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", \"sad\"]}}, \"required\": [\"mood\"]}"

static void test_a_response_format_composes_with_every_tool_choice(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template chatml = {.family = CHAT_CHATML};
    resp_store *store = resp_store_new(8, 1 << 20);
    api_context ctx = {m, &chatml, 512, {0}, true, store, "m", NULL};
    const struct {
        const api *row;
        const char *body;
        int status;
    } cases[] = {
        /* OpenAI chat: required, named and auto with a response_format; a grammar takes nothing beside it */
        {&oai_chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], " CHAT_TOOLS ", \"tool_choice\": "
                    "\"required\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"o\", "
                    "\"schema\": " SCHEMA "}}}", 0},
        {&oai_chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], " CHAT_TOOLS ", \"tool_choice\": "
                    "{\"type\": \"function\", \"function\": {\"name\": \"weather\"}}, \"response_format\": {\"type\": "
                    "\"json_object\"}}", 0},
        {&oai_chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], " CHAT_TOOLS ", \"tool_choice\": "
                    "\"auto\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"o\", "
                    "\"schema\": " SCHEMA "}}}", 0},
        {&oai_chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], " CHAT_TOOLS ", \"response_format\": "
                    "{\"type\": \"json_object\"}}", 0},
        {&oai_chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], " CHAT_TOOLS ", \"tool_choice\": "
                    "\"required\", \"grammar\": \"root ::= \\\"a\\\"\"}", 400},
        /* Responses: text.format with required, named and auto */
        {&resp_responses, "{\"input\": \"x\", " NAMED_TOOLS ", \"tool_choice\": \"required\", \"text\": {\"format\": "
                          "{\"type\": \"json_schema\", \"name\": \"o\", \"schema\": " SCHEMA "}}}", 0},
        {&resp_responses, "{\"input\": \"x\", " NAMED_TOOLS ", \"tool_choice\": {\"type\": \"function\", \"name\": "
                          "\"weather\"}, \"text\": {\"format\": {\"type\": \"json_object\"}}}", 0},
        {&resp_responses, "{\"input\": \"x\", " NAMED_TOOLS ", \"text\": {\"format\": {\"type\": \"json_schema\", "
                          "\"name\": \"o\", \"schema\": " SCHEMA "}}}", 0},
        /* Messages: output_config.format with any, tool and auto; a format that is not json_schema is refused */
        {&anth_messages, "{\"model\": \"m\", \"max_tokens\": 8, \"messages\": [{\"role\": \"user\", \"content\": "
                         "\"x\"}], " ANTH_TOOLS ", \"tool_choice\": {\"type\": \"any\"}, \"output_config\": {\"format\": "
                         "{\"type\": \"json_schema\", \"schema\": " SCHEMA "}}}", 0},
        {&anth_messages, "{\"model\": \"m\", \"max_tokens\": 8, \"messages\": [{\"role\": \"user\", \"content\": "
                         "\"x\"}], " ANTH_TOOLS ", \"tool_choice\": {\"type\": \"tool\", \"name\": \"weather\"}, "
                         "\"output_config\": {\"format\": {\"type\": \"json_schema\", \"schema\": " SCHEMA "}}}", 0},
        {&anth_messages, "{\"model\": \"m\", \"max_tokens\": 8, \"messages\": [{\"role\": \"user\", \"content\": "
                         "\"x\"}], " ANTH_TOOLS ", \"output_config\": {\"effort\": \"low\", \"format\": {\"type\": "
                         "\"json_schema\", \"schema\": " SCHEMA "}}}", 0},
        {&anth_messages, "{\"model\": \"m\", \"max_tokens\": 8, \"messages\": [{\"role\": \"user\", \"content\": "
                         "\"x\"}], \"output_config\": {\"format\": {\"type\": \"json_object\"}}}", 400},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        api_error e = {0};
        int status = parse_status(cases[k].row, &ctx, cases[k].body, true, &e);
        if (status != cases[k].status) fail_msg("case %zu: %d (%s), not %d", k, status, e.message, cases[k].status);
    }
    resp_store_free(store);
    fkv_model_free(m);
}

static void test_count_tokens_counts_what_a_message_would_prefill(void **state) {
    (void)state;
    fkv_model *m = tu_load_model(tu_data("models/stories260K.gguf"));
    chat_template chatml = {.family = CHAT_CHATML};
    api_context ctx = {m, &chatml, 512, {0}, true, NULL, "m", NULL};
    const char fields[] = "\"model\": \"m\", \"system\": \"Be brief.\", " ANTH_TOOLS ", \"messages\": [{\"role\": "
                          "\"user\", \"content\": \"Weather in Paris?\"}]";
    char counted[512], sent[512];
    snprintf(counted, sizeof counted, "{%s}", fields);
    snprintf(sent, sizeof sent, "{\"max_tokens\": 16, %s}", fields);
    api_request req;
    sched_job job;
    api_error e;
    memset(&job, 0, sizeof job);
    if (anth_parse(&ctx, sent, strlen(sent), &req, &job, &e)) fail_msg("anth_parse: %s", e.message);
    json_t *count = anth_count_tokens(&ctx, counted, strlen(counted), &e);
    if (!count) fail_msg("anth_count_tokens: %s", e.message);
    assert_int_equal(json_integer_value(json_object_get(count, "input_tokens")), job.req.n_ids);
    assert_int_equal(json_object_size(count), 1);
    json_decref(count);
    api_request_free(&req);
    free_job(&job);
    const char no_messages[] = "{\"model\": \"m\"}";
    assert_null(anth_count_tokens(&ctx, no_messages, strlen(no_messages), &e));
    assert_int_equal(e.status, 400);
    assert_null(anth_count_tokens(&ctx, "[1]", 3, &e));
    assert_int_equal(e.status, 400);
    fkv_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_call_comes_back_as_a_tool_use_block),
        cmocka_unit_test(test_the_messages_usage_partitions_the_prompt),
        cmocka_unit_test(test_a_call_comes_back_as_a_function_call_item),
        cmocka_unit_test(test_a_stored_turn_is_continued_from_its_exact_ids),
        cmocka_unit_test(test_text_format_reaches_the_job_as_chats_response_format),
        cmocka_unit_test(test_a_response_format_composes_with_every_tool_choice),
        cmocka_unit_test(test_count_tokens_counts_what_a_message_would_prefill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
