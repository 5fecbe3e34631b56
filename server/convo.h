/* convo.h — a conversation assembled from an API's message shapes (chat's messages, the Messages API's content
 * blocks, the Responses API's input items) into the chat_messages that chat.h renders.
 *
 * WHY: every API renders through the same template code, so the same conversation gives the same prompt ids —
 * and the same cached rows — whichever API sent it. APIs split a turn into parts, blocks or items (text pieces, a
 * call, a result); chat_message holds one string and a list of calls. This collects them, owning every string.
 *
 * INVARIANT: out of memory is sticky: the calls do nothing after it, and convo_messages reports it (NULL); what
 * convo_messages returns is exactly what was added, in order.
 */
#ifndef FKV_CONVO_H
#define FKV_CONVO_H

#include <stdbool.h>
#include <stddef.h>

#include "chat/chat.h"

typedef struct {
    const char *role; /* static: "system", "user", "assistant" or "tool" */
    char *text;       /* its content, owned */
    size_t len;
    chat_tool_call *calls; /* owned, and their strings */
    size_t n_calls;
    char *reasoning; /* an assistant's reasoning given apart (owned), or NULL */
} convo_msg;

typedef struct {
    convo_msg *msgs;
    size_t n, cap;
    chat_message *view; /* what convo_messages last returned */
    bool oom;
} convo;

/* A new message (role: a static string) with empty content. */
void convo_add(convo *c, const char *role);
/* Text appended to the last message's content (there must be one). */
void convo_text(convo *c, const char *text, size_t len);
/* A call (name and arguments copied) added to the last message. */
void convo_call(convo *c, const char *name, const char *arguments);
/* The last message's reasoning (copied), given apart from its content. */
void convo_reasoning(convo *c, const char *text, size_t len);
/* The role of the last message, or NULL when there is none. */
const char *convo_last_role(const convo *c);
/* The messages as chat_messages (pointing into c, valid until the next call on c); NULL out of memory. */
const chat_message *convo_messages(convo *c);
void convo_free(convo *c);

#endif
