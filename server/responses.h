/* responses.h — OpenAI's Responses API: POST /v1/responses (a row of the server's table, api.h), and GET and DELETE
 * /v1/responses/{id} on its store.
 *
 * A request is rendered as a chat conversation (convo.h) through the same template and tool forms chat uses:
 * `input` as a string or items (messages with input_text/output_text parts, function_call and function_call_output
 * items), `instructions` as the system message, `tools` as function tools. The answer is `output` items (a message
 * with output_text, function_call items), streamed as the Responses events, each under its type, numbered by
 * sequence_number. Errors are OpenAI's.
 *
 * WHY previous_response_id continues from ids: a stored response keeps the exact ids its turn was fed and generated.
 * A follow-up's prompt is those ids followed by chat_continuation_ids of its new items — the end of the reply's turn
 * as the template writes it, the items, the generation prompt — so nothing the model wrote is re-rendered or
 * re-tokenized, and the follow-up reuses every row of the previous turn: all of them when the turn ended at an
 * end-of-generation token (never fed, and replaced by the template's own end of turn), all but the last when it ended
 * at max_output_tokens (the last token sampled is never fed). A chain keeps the instructions and tools it began with,
 * since they are in its ids: a follow-up may repeat them or leave them out, and one that changes them is a 400. Tools
 * are rendered whenever given, tool_choice "none" included, so a chain whose tool_choice changes keeps its prefix;
 * "none" means calls are not parsed out of the output.
 *
 * INVARIANT: a stored response is its cache_salt's. Responses with `store` (default true) are kept — their response
 * object, ids, instructions and tools — under the request's cache_salt: another salt can neither read, delete nor
 * continue them (404, as for an unknown id). Bounded by a count and by bytes; the least recently used (stored, read
 * or continued) goes first.
 *
 * Carried, not enforced (see sched_job): text.format as chat's response_format, tool_choice in chat's form,
 * parallel_tool_calls. reasoning.effort (low, medium, high) is gpt-oss's; a reasoning model's reasoning is not
 * returned (no reasoning items: the output message holds the answer alone). Refused with a 400: other tool types than
 * function, image/file/audio inputs, reasoning items, background, conversation, prompt templates, truncation "auto",
 * top_logprobs.
 *
 * Thread-safety: the store is locked; a request is its connection's.
 */
#ifndef FKV_RESPONSES_H
#define FKV_RESPONSES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

extern const api resp_responses;

typedef struct resp_store resp_store;

/* A store of at most max_count responses taking at most max_bytes (their ids, texts and objects). */
resp_store *resp_store_new(uint32_t max_count, size_t max_bytes);
void resp_store_free(resp_store *s);

/* Validate body as a Responses request and fill job (ids, max_tokens, sampling, tools) and req (ctx->store: where
 * previous_response_id is looked up and the answer kept). 0, or -1 with e (previous_response_id unknown: 404). */
int resp_parse(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job, api_error *e);
/* The response object of a finished job; kept in the store when the request asked to be stored. */
json_t *resp_response(api_request *req, const sched_job *job);
/* Append to events the stream events the job's progress allows now (job->mu held): objects whose "type" is their
 * event name, in order. Sets req->finished once response.completed (or .incomplete, .failed) is among them. */
void resp_stream(api_request *req, sched_job *job, json_t *events);

/* GET /v1/responses/{id} under salt (NULL: the default): the stored response object, or NULL with e (404). */
json_t *resp_store_get(resp_store *s, const char *id, const char *salt, api_error *e);
/* DELETE /v1/responses/{id} under salt: {"id", "object": "response", "deleted": true}, or NULL with e (404). */
json_t *resp_store_delete(resp_store *s, const char *id, const char *salt, api_error *e);

#endif
