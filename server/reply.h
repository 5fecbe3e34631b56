/* reply.h — a model's reply as a client receives it: its reasoning, its content and its tool calls, split from the
 * text the model writes in its template family's form, as that text grows.
 *
 * WHY: reasoning models think before they answer, and mark the thinking in their family's way — Qwen3, SmolLM3,
 * DeepSeek-R1 and GLM in "<think>...</think>" (DeepSeek-R1's and GLM-4.7's prompts open the block, so their replies
 * begin inside it), gpt-oss in harmony's channels ("<|channel|>analysis<|message|>...<|end|><|start|>assistant
 * <|channel|>final<|message|>...") — and call tools in the family's syntax (toolcall.h). A client wants the reasoning
 * apart (OpenAI's reasoning_content), the answer as content and the calls as tool_calls; a stream sends each part as
 * it becomes certain. One reader, fed the stable text (holdback.h) as it grows, makes all three, so a stream and the
 * whole answer split the same text the same way.
 *
 * The split (f: the reply's form):
 * - THINK: the reasoning is what follows "<think>" (the reply's first text, after whitespace; or from the start when
 *   f->opened) up to "</think>", without outer whitespace; the content is what follows, leading whitespace dropped. A
 *   reply that does not begin with "<think>" is all content, as written.
 * - HARMONY: messages, each a header up to "<|message|>" and a body up to "<|end|>" (or "<|return|>", "<|call|>", or a
 *   next "<|start|>"); after "<|end|>", "<|start|>" and the next header. An analysis channel's body is reasoning;
 *   a header naming a recipient (" to=functions.NAME") begins the calls; every other body (final, a commentary
 *   preamble) is content. A header cut short at the end is dropped; a reply that does not begin like a header
 *   ("<|channel|>", " to=", "assistant") is all content, as written.
 * - PLAIN: all content, as written.
 * Calls (f->calls): in the content, "<tool_call>" (HERMES, GLM, QWEN3_XML) begins them — the whitespace before it is no content —
 * as does a reply that opens with "{" or "<|python_tag|>" (LLAMA3). Everything from there on is the calls' text.
 *
 * INVARIANT: reasoning and content only grow, and are valid UTF-8 when the text read is: a byte joins either only
 * once no later text can make it part of a marker, of a call, or of whitespace the split drops (reply_read holds
 * those bytes back until it knows). The calls' text never reaches the content while the reply runs; at the end it is
 * parsed (toolcall_parse) and, when it is not well-formed calls, becomes content after all, as written. Reading a
 * text in any number of pieces gives the same split as reading it whole.
 *
 * Thread-safety: none; the scheduler keeps one per job, under the job's lock.
 */
#ifndef FKV_REPLY_H
#define FKV_REPLY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat/chat.h"
#include "toolcall.h"

typedef enum { REPLY_PLAIN = 0, REPLY_THINK = 1, REPLY_HARMONY = 2 } reply_reasoning;

/* How a template family's replies are written. */
typedef struct {
    reply_reasoning reasoning;
    bool opened;          /* THINK: the prompt opened the block: the reply begins inside it */
    toolcall_format calls; /* the calls' syntax when tools were offered; TOOLCALL_NONE: no calls */
} reply_form;

typedef struct reply {
    char *reasoning, *content; /* NUL-terminated; NULL until their first byte */
    size_t n_reasoning, n_content;
    size_t read;  /* the text's bytes decided: split, dropped, or the calls' */
    size_t shown; /* of those, the bytes before the calls: reasoning, content and markers (the text's tokens that end
                   * there are the ones a client sees the words of) */
    /* where the reader is */
    bool begun;
    int state;
    bool lead;        /* dropping the whitespace that begins the reasoning or the content */
    int kind;         /* HARMONY: the current body's (reasoning or content) */
    size_t header_at; /* HARMONY: where the current header began */
    size_t calls_at;  /* where the calls' text begins (SIZE_MAX: none yet); the text from `shown` to it is whitespace
                       * that becomes content only if they are not calls after all */
    size_t cap_reasoning, cap_content;
    bool oom;
} reply;

/* The form of a reply to a prompt rendered by template t (its per-request settings included), with tools offered
 * when tools; NULL t: a prompt of plain text (legacy completions). */
reply_form reply_form_of(const chat_template *t, bool tools);

/* Read text[r->read .. len) as far as it can be decided; final: the text is complete, so everything is. 0, or -1 out of
 * memory (the reply is then unusable). */
int reply_read(reply *r, const reply_form *f, const char *text, size_t len, bool final);

/* The end: the rest read as final, then the calls' text parsed into *calls (OpenAI's tool_calls, ids
 * "call_<id_base>_<i>"; tools: the tools offered, chat's shape, for the arguments' types) or, when it is not
 * well-formed calls (*calls NULL), added to the content. 0, or -1 out of memory. */
int reply_finish(reply *r, const reply_form *f, const char *text, size_t len, const char *id_base, const json_t *tools,
                 json_t **calls);

/* GBNF (malloc'd) for a reply of form f, the rules it refers to in rules: what f lets the model write first (THINK: a
 * think block, optional unless opened; HARMONY: an analysis message), then either the rule `calls` (NULL: none) or the
 * rule `answer` as the content (NULL: none; HARMONY: in the final channel) — one of them at least. NULL when out of
 * memory. */
char *reply_gbnf(const reply_form *f, const char *rules, const char *calls, const char *answer);

void reply_free(reply *r);

#endif
