/* fuzz_chat.c — chat-template rendering (src/chat/chat.c) of arbitrary message JSON, in every family.
 *
 * Input: byte 0 picks the template (chat_template_by_name's names, Mistral's three variants, Qwen2.5's default
 * system) and byte 1 the flags (add_generation_prompt, no_thinking, render the tools); the rest is JSON, either a
 * messages array or {"messages": [...], "tools": [...]}. Messages: role, content (a string; anything else is NULL
 * content, which chat_render must refuse cleanly), reasoning_content, tool_calls [{function: {name, arguments}}]; an
 * object's "reasoning_effort" (a string) is the template's. Asserts:
 * - a rendering's length is its strlen (no NUL can come from C-string contents), a refusal has a message;
 * - prefix stability (chat.h) for the families documented prefix-stable for any reply (CHATML without Qwen3's
 *   thinking — Qwen3-Coder's included — PHI3, ZEPHYR, PLAIN): when the last message is an assistant reply without tool calls, the rendering
 *   of the others with the generation prompt, followed by the reply, is a prefix of the rendering of all of them;
 * - chat_render_continuation (chat.h: exact for these families): the rendering of messages up to an assistant
 *   reply with its generation prompt, + the reply, + the continuation of the messages after it, equals the
 *   rendering of all the messages with the generation prompt.
 */
#include <stdint.h>

#include <jansson.h>

#include "chat/chat.h"
#include "fuzz.h"

#define MAX_MESSAGES 24
#define MAX_CALLS 4

static const char *const names[] = {"chatml", "qwen3",    "llama2",  "llama3",  "mistral", "phi3",
                                    "phi4-mini", "gemma", "gemma3", "zephyr", "deepseek", "smollm3",
                                    "gpt-oss", "glm4",  "glm4.7",  "qwen3-coder", "qwen3.5", "plain"};
#define N_NAMES (sizeof names / sizeof *names)

static chat_template pick(uint8_t b) {
    chat_template t;
    const unsigned i = b % (N_NAMES + 3);
    if (i < N_NAMES) {
        FUZZ_CHECK(chat_template_by_name(names[i], &t, NULL) == 0, "template %s unknown", names[i]);
    } else if (i < N_NAMES + 2) { /* the Mistral variants no name selects */
        chat_template_by_name("mistral", &t, NULL);
        t.mistral = i == N_NAMES ? CHAT_MISTRAL_TEKKEN : CHAT_MISTRAL_V1;
    } else { /* Qwen2.5's: a default system text when the conversation has none */
        t = chat_template_detect("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                                 "assistant.<|im_end|>");
    }
    return t;
}

static bool prefix_stable(const chat_template *t) {
    return (t->family == CHAT_CHATML && !t->qwen3_thinking) || t->family == CHAT_PHI3 || t->family == CHAT_ZEPHYR ||
           t->family == CHAT_PLAIN;
}

/* 0 and *out (malloc'd), or -1; checks the length and the error message. */
static int render(const chat_template *t, const chat_message *m, size_t n, const json_t *tools, bool gen, char **out,
                  size_t *len) {
    fkv_error err = {0};
    if (chat_render(t, m, n, tools, gen, NULL, NULL, out, len, &err)) {
        FUZZ_CHECK(err.msg[0], "a refused rendering has no message");
        return -1;
    }
    FUZZ_CHECK(strlen(*out) == *len, "rendering of %zu bytes has a NUL at %zu", *len, strlen(*out));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    chat_template t = pick(data[0]);
    t.no_thinking = data[1] & 2;
    const bool gen = data[1] & 1, with_tools = data[1] & 4;
    json_t *root = json_loadb((const char *)data + 2, size - 2, 0, NULL);
    if (!root) return 0;
    const json_t *list = json_is_array(root) ? root : json_object_get(root, "messages");
    const json_t *tools = with_tools ? json_object_get(root, "tools") : NULL;
    t.reasoning_effort = json_string_value(json_object_get(root, "reasoning_effort"));
    if (!json_is_array(list)) {
        json_decref(root);
        return 0;
    }
    chat_message msgs[MAX_MESSAGES];
    chat_tool_call calls[MAX_MESSAGES][MAX_CALLS];
    char *args_text[MAX_MESSAGES][MAX_CALLS] = {{0}};
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(list) && n < MAX_MESSAGES; i++, n++) {
        const json_t *m = json_array_get(list, i), *tc = json_object_get(m, "tool_calls");
        msgs[n] = (chat_message){.role = json_string_value(json_object_get(m, "role")),
                                 .content = json_string_value(json_object_get(m, "content")),
                                 .reasoning = json_string_value(json_object_get(m, "reasoning_content"))};
        if (!msgs[n].role) msgs[n].role = "user";
        for (size_t k = 0; k < json_array_size(tc) && k < MAX_CALLS; k++) {
            const json_t *fn = json_object_get(json_array_get(tc, k), "function");
            const json_t *a = json_object_get(fn, "arguments");
            const char *name = json_string_value(json_object_get(fn, "name"));
            /* arguments are JSON text: an object is written as the client would have sent it */
            args_text[n][k] = json_is_string(a) ? strdup(json_string_value(a)) : a ? json_dumps(a, 0) : strdup("{}");
            calls[n][k] = (chat_tool_call){name ? name : "f", args_text[n][k] ? args_text[n][k] : "{}"};
            msgs[n].tool_calls = calls[n];
            msgs[n].n_tool_calls = k + 1;
        }
    }

    char *all = NULL;
    size_t all_len = 0;
    const int all_rc = render(&t, msgs, n, tools, gen, &all, &all_len);

    const chat_message *last = n ? &msgs[n - 1] : NULL;
    if (prefix_stable(&t) && n >= 2 && !strcmp(last->role, "assistant") && last->content && !last->n_tool_calls &&
        !gen) {
        char *head = NULL;
        size_t head_len;
        if (render(&t, msgs, n - 1, tools, true, &head, &head_len) == 0 && all_rc == 0) {
            const size_t reply = strlen(last->content);
            FUZZ_CHECK(head_len + reply <= all_len && !memcmp(all, head, head_len) &&
                           !memcmp(all + head_len, last->content, reply),
                       "%s: the prompt (%zu bytes) + the reply (%zu) is not a prefix of the next rendering (%zu)",
                       names[data[0] % N_NAMES], head_len, reply, all_len);
        }
        free(head);
    }

    /* Continuation after the last assistant reply (k) that has later messages: head(0..k) + reply + cont == all. */
    if (prefix_stable(&t) && gen && !tools && all_rc == 0) {
        size_t k = n;
        while (k-- > 0 && (strcmp(msgs[k].role, "assistant") || msgs[k].n_tool_calls || !msgs[k].content)) {}
        if (k < n && k + 1 < n && k >= 1) {
            const char *system = !strcmp(msgs[0].role, "system") ? msgs[0].content : NULL;
            char *head = NULL, *cont = NULL;
            size_t head_len, cont_len;
            fkv_error err = {0};
            if (render(&t, msgs, k, NULL, true, &head, &head_len) == 0 &&
                chat_render_continuation(&t, system, msgs + k + 1, n - k - 1, NULL, NULL, &cont, &cont_len, &err) ==
                    0) {
                const size_t reply = strlen(msgs[k].content);
                FUZZ_CHECK(head_len + reply + cont_len == all_len && !memcmp(all, head, head_len) &&
                               !memcmp(all + head_len, msgs[k].content, reply) &&
                               !memcmp(all + head_len + reply, cont, cont_len),
                           "continuation: %zu + %zu + %zu bytes are not the whole rendering's %zu", head_len, reply,
                           cont_len, all_len);
            }
            free(head);
            free(cont);
        }
    }
    free(all);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < MAX_CALLS; k++) free(args_text[i][k]);
    json_decref(root);
    return 0;
}
