/* anthropic.h — Anthropic's Messages API (POST /v1/messages) on the engine that serves OpenAI's API.
 *
 * WHY a translation, not a second path: the request becomes a chat conversation (convo.h) rendered by the same
 * chat template and tool forms chat uses, and the job is the same sched_job; so the prefix cache, which sees ids
 * only, reuses a conversation's rows whichever API it speaks, and the answer is bit-identical to chat's for the
 * same conversation. What differs is the shape: content blocks in (text, tool_use, tool_result), a message with
 * text and tool_use blocks out, Anthropic's stream events, errors and usage.
 *
 * Accepted: model and max_tokens (required), system (a string or text blocks), messages (a string or blocks),
 * tools (name, description, input_schema), tool_choice (auto, any, tool, none), stop_sequences, temperature,
 * top_p, top_k, metadata, stream, cache_control on any block, system text and tool; flatkv's cache_salt and
 * prompt_cache_retention. Refused with a 400 naming the field: images and documents, thinking, server tools,
 * a final assistant message (a prefill).
 *
 * Usage is Anthropic's partition of the prompt, input_tokens + cache_creation_input_tokens +
 * cache_read_input_tokens = the prompt's tokens: cache_read_input_tokens are the rows reused from the prefix
 * cache (memory and disk); cache_creation_input_tokens the rows this request computed and left in the prefix
 * cache, where later requests reuse them (all it computed — flatkv caches every prompt without being asked,
 * cache_control or not); input_tokens the rows it computed that no later request can reuse (all it computed
 * with the prefix cache off, else none). output_tokens: the tokens generated.
 */
#ifndef FKV_ANTHROPIC_H
#define FKV_ANTHROPIC_H

#include <jansson.h>
#include <stdbool.h>

#include "openai.h"
#include "scheduler.h"

typedef struct {
    bool stream;
    bool prefix_cache; /* the engine keeps computed rows for later requests (usage) */
    char model[128];
    char id[48];       /* "msg_..." */
    uint32_t n_prompt; /* the prompt's ids (the job's count grows if it is preempted) */
    /* a stream's progress (anth_stream) */
    bool started;   /* message_start sent */
    bool text_open; /* the text block (index n_blocks - 1) is open */
    int n_blocks;
    size_t sent; /* bytes of the job's text sent */
    bool finished;
} anth_request;

/* Validate body as a Messages request and fill job (ids, max_tokens, sampling, stop sequences, tools) and req.
 * prefix_cache: whether the engine caches what it computes. 0, or -1 with e (status, message). */
int anth_parse(const oai_context *ctx, bool prefix_cache, const char *body, size_t len, anth_request *req,
               sched_job *job, oai_error *e);

/* The message of a finished job. */
json_t *anth_response(const anth_request *req, const sched_job *job);

/* Append to events the stream events the job's progress allows now (job->mu held): objects whose "type" is
 * their event name, in order. Sets req->finished once message_stop (or an error) is among them. */
void anth_stream(anth_request *req, const sched_job *job, json_t *events);

/* {"type": "error", "error": {"type", "message"}}, its type Anthropic's for e->status. */
json_t *anth_error_body(const oai_error *e);

#endif
