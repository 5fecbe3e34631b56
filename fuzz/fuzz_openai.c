/* fuzz_openai.c — the OpenAI request parser (server/openai.c: oai_parse, with api_constrain's schema and tool
 * grammars behind it) on arbitrary bodies, as tests/test_openai.c drives it, with the small real model
 * (data/models/stories260K.gguf) for tokenization.
 *
 * Input: byte 0 picks the kind (chat or completions) and the template (chatml, qwen3, llama3, llama2, mistral,
 * gemma, plain); the rest is the body. Asserts: a refusal is an HTTP 4xx/5xx with a type and a message, and its
 * error body is JSON; an accepted request has 1..n_ctx prompt ids inside the vocabulary, 1..16 choices, at most 16
 * non-empty stop strings, and everything it allocated is freed by what the server frees (LeakSanitizer).
 */
#include <stdint.h>

#include "fuzz.h"
#include "openai.h"

static fkv_model *model;
static chat_template templates[7];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char path[4096];
    fkv_error err = {0};
    const char *file = fuzz_data("models/stories260K.gguf", path, sizeof path);
    if (fkv_kernels_select("ref", &err) || !(model = fkv_model_load(file, &err))) {
        fprintf(stderr, "fuzz_openai: %s\n", err.msg);
        abort();
    }
    static const char *const names[] = {"chatml", "qwen3", "llama3", "llama2", "mistral", "gemma", "plain"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) chat_template_by_name(names[i], &templates[i], NULL);
    return 0;
}

/* What the server frees of a parsed job that is never queued. */
static void free_job(sched_job *job) {
    sched_request_clear(&job->req);
    sched_progress_clear(&job->prog);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const oai_kind kind = data[0] & 0x80 ? OAI_COMPLETION : OAI_CHAT;
    const api_context ctx = {model, &templates[(data[0] & 0x7f) % 7], 128, {0}, false, NULL, "m", NULL};
    api_request req;
    sched_job job;
    api_error e;
    memset(&req, 0, sizeof req);
    memset(&job, 0, sizeof job);
    memset(&e, 0, sizeof e);
    if (oai_parse(&ctx, kind, (const char *)data + 1, size - 1, &req, &job, &e)) {
        FUZZ_CHECK(e.status >= 400 && e.status < 600 && e.type && e.message[0], "a refusal of status %d, message '%s'",
                   e.status, e.message);
        json_t *body = oai_error_body(&e);
        FUZZ_CHECK(body, "no error body for '%s'", e.message);
        char *text = json_dumps(body, 0);
        FUZZ_CHECK(text, "the error body of '%s' does not serialize", e.message);
        free(text);
        json_decref(body);
    } else {
        const int32_t n_vocab = (int32_t)fkv_model_get_info(model).n_vocab;
        FUZZ_CHECK(job.req.n_ids >= 1 && job.req.n_ids <= ctx.n_ctx, "%u prompt ids for a context of %u", job.req.n_ids,
                   ctx.n_ctx);
        for (uint32_t i = 0; i < job.req.n_ids; i++)
            FUZZ_CHECK(job.req.ids[i] >= 0 && job.req.ids[i] < n_vocab, "prompt id %d outside the vocabulary",
                       job.req.ids[i]);
        FUZZ_CHECK(req.n >= 1 && req.n <= SCHED_MAX_CHOICES, "%u choices", req.n);
        FUZZ_CHECK(job.req.n_stop <= 16, "%zu stop strings", job.req.n_stop); /* api.h's API_MAX_STOP */
        for (size_t i = 0; i < job.req.n_stop; i++) FUZZ_CHECK(job.req.stop[i][0], "an empty stop string");
    }
    free_job(&job);
    return 0;
}
