/* anthropic.h — Anthropic's Messages API (POST /v1/messages): a row of the server's table (api.h); and its token
 * count (POST /v1/messages/count_tokens), the same body read the same way.
 *
 * WHY a translation, not a second path: the request becomes a chat conversation (convo.h) rendered by the same chat
 * template and tool forms chat uses, and the job is the same sched_job; so the prefix cache, which sees ids only,
 * reuses a conversation's rows whichever API it speaks, and the answer is bit-identical to chat's for the same
 * conversation. What differs is the shape: content blocks in (text, tool_use, tool_result), a message with text and
 * tool_use blocks out, Anthropic's stream events (each under its type), errors ({"type": "error", "error": {type,
 * message}}, the type from the status) and usage.
 *
 * INVARIANT: usage partitions the prompt, input_tokens + cache_creation_input_tokens + cache_read_input_tokens = the
 * prompt's tokens: cache_read_input_tokens are the rows reused from the prefix cache (memory and disk);
 * cache_creation_input_tokens the rows this request computed and left in the prefix cache, where later requests reuse
 * them (all it computed — flatkv caches every prompt without being asked, cache_control or not); input_tokens the rows
 * it computed that no later request can reuse (all it computed with the prefix cache off, else none). output_tokens:
 * the tokens generated.
 *
 * Accepted: model and max_tokens (required), system (a string or text blocks), messages (a string or blocks), tools
 * (name, description, input_schema), tool_choice (auto, any, tool, none), output_config (format json_schema: the text
 * answer's; effort, checked), stop_sequences, temperature, top_p, top_k, metadata, stream, cache_control on any block, system text and tool; the fields every API reads (api_common_fields).
 * Refused with a 400 naming the field: images and documents, thinking, server tools, a final assistant message (a
 * prefill). A reasoning model's reasoning (reply.h) is not returned: thinking blocks are extended thinking's, which
 * is not offered; the text block holds the answer alone.
 */
#ifndef FKV_ANTHROPIC_H
#define FKV_ANTHROPIC_H

#include <jansson.h>

#include "api.h"

extern const api anth_messages;

/* Validate body as a Messages request and fill job (ids, max_tokens, sampling, stop sequences, tools) and req. 0, or -1
 * with e (status, message). */
int anth_parse(const api_context *ctx, const char *body, size_t len, api_request *req, sched_job *job, api_error *e);
/* {"input_tokens": N}: N the prompt ids anth_parse would make of body (max_tokens and stream not needed), what
 * /v1/messages would prefill. NULL with e, a refusal as anth_parse's. */
json_t *anth_count_tokens(const api_context *ctx, const char *body, size_t len, api_error *e);
/* The message of a finished job. */
json_t *anth_response(api_request *req, const sched_job *job);
/* Append to events the stream events the job's progress allows now (job->mu held): objects whose "type" is their
 * event name, in order. Sets req->finished once message_stop (or an error) is among them. */
void anth_stream(api_request *req, sched_job *job, json_t *events);
/* {"type": "error", "error": {"type", "message"}}, its type Anthropic's for e->status. */
json_t *anth_error_body(const api_error *e);

#endif
