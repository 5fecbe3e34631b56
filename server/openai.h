/* openai.h — OpenAI's chat completions (POST /v1/chat/completions) and legacy completions (POST /v1/completions):
 * two rows of the server's table (api.h).
 *
 * WHY two rows and one file: the two share everything but their input (chat's messages rendered by the template,
 * or a prompt of text or ids) and their output's shape (a message, or text): the sampling fields, n choices (the
 * job and its followers, whose prompt is computed once), logprobs, the usage and llama.cpp's timings, the stream
 * of `data:` chunks that ends with [DONE].
 *
 * INVARIANT: a streamed choice's text is the non-streamed one, cut only where it is stable (holdback.h) and split
 * (reply.h): its reasoning in reasoning_content deltas, its answer in content deltas; its logprobs arrive with the
 * chunk that completes their tokens' text.
 *
 * Accepted beside OpenAI's fields: llama.cpp's grammar (GBNF), top_k, min_p, repeat_penalty, repeat_last_n,
 * chat_template_kwargs.enable_thinking and .reasoning_effort (vLLM's and llama.cpp's), an assistant message's
 * reasoning_content (what a reasoning model's answer returned: the templates that keep past reasoning write it), and
 * the fields every API reads (api_common_fields). reasoning_effort (low, medium, high) sets gpt-oss's.
 */
#ifndef FKV_OPENAI_H
#define FKV_OPENAI_H

#include <jansson.h>

#include "api.h"

extern const api oai_chat, oai_completions;

typedef enum { OAI_CHAT, OAI_COMPLETION } oai_kind;

/* Validate body as a request of `kind` and fill job (ids, max_tokens, sampling, stop) and req. 0, or -1 with e. */
int oai_parse(const api_context *ctx, oai_kind kind, const char *body, size_t len, api_request *req, sched_job *job,
              api_error *e);
/* The whole (non-streamed) response of a finished job and its followers (the other choices). */
json_t *oai_response(api_request *req, const sched_job *job);
/* {"error": {message, type, param, code}} */
json_t *oai_error_body(const api_error *e);

#endif
