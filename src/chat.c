/* chat.c — chat templates written out in C (the contract and each family's rendering: chat.h). */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

static const char chat_qwen_default_system[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

chat_template chat_template_detect(const char *jinja_source) {
    chat_template t = {CHAT_PLAIN, NULL, false};
    if (!jinja_source) return t;
    if (strstr(jinja_source, "<|im_start|>")) {
        t.family = CHAT_CHATML;
        if (strstr(jinja_source, chat_qwen_default_system)) t.default_system = chat_qwen_default_system;
    } else if (strstr(jinja_source, "[INST]")) {
        t.family = CHAT_LLAMA2;
    } else {
        t.family = CHAT_CHATML;
        t.guessed = true;
    }
    return t;
}

int chat_template_by_name(const char *name, chat_template *out, fkv_error *err) {
    static const struct {
        const char *name;
        chat_family family;
    } names[] = {{"chatml", CHAT_CHATML}, {"llama2", CHAT_LLAMA2}, {"plain", CHAT_PLAIN}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i].name)) {
            *out = (chat_template){names[i].family, NULL, false};
            return 0;
        }
    return err_set(err, "chat template '%s' is not one of chatml, llama2, plain", name);
}

/* --- a growing string --- */

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} chat_buf;

static void chat_put_n(chat_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = 2 * b->cap + n + 64;
        char *grown = realloc(b->s, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void chat_put(chat_buf *b, const char *s) { chat_put_n(b, s, strlen(s)); }

static bool chat_is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Python's str.strip() over ASCII whitespace, as a span of s. */
static void chat_put_stripped(chat_buf *b, const char *s) {
    size_t n = strlen(s);
    while (n > 0 && chat_is_space(s[n - 1])) n--;
    while (n > 0 && chat_is_space(*s)) s++, n--;
    chat_put_n(b, s, n);
}

static bool chat_role_is(const chat_message *m, const char *role) { return !strcmp(m->role, role); }

/* --- the families --- */

static void chat_render_chatml(const chat_template *t, const chat_message *msgs, size_t n, chat_buf *b) {
    if (n > 0 && chat_role_is(&msgs[0], "system")) {
        chat_put(b, "<|im_start|>system\n");
        chat_put(b, msgs[0].content);
        chat_put(b, "<|im_end|>\n");
    } else if (t->default_system) {
        chat_put(b, "<|im_start|>system\n");
        chat_put(b, t->default_system);
        chat_put(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "tool")) {
            if (i == 0 || !chat_role_is(&msgs[i - 1], "tool")) chat_put(b, "<|im_start|>user");
            chat_put(b, "\n<tool_response>\n");
            chat_put(b, m->content);
            chat_put(b, "\n</tool_response>");
            if (i + 1 == n || !chat_role_is(&msgs[i + 1], "tool")) chat_put(b, "<|im_end|>\n");
        } else if (i > 0 || !chat_role_is(m, "system")) { /* a leading system message went first */
            chat_put(b, "<|im_start|>");
            chat_put(b, m->role);
            chat_put(b, "\n");
            chat_put(b, m->content);
            chat_put(b, "<|im_end|>\n");
        }
    }
}

static int chat_render_llama2(const chat_message *msgs, size_t n, const char *bos, const char *eos, chat_buf *b,
                              fkv_error *err) {
    const char *system = NULL;
    if (n > 0 && chat_role_is(&msgs[0], "system")) {
        system = msgs[0].content;
        msgs++, n--;
    }
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        bool user = chat_role_is(m, "user");
        if (user != (i % 2 == 0))
            return err_set(err, "chat_render: message %zu is '%s' but the Llama-2 template needs roles to alternate "
                                "user/assistant starting with user",
                           i + (system != NULL), m->role);
        if (user) {
            chat_put(b, bos);
            chat_put(b, "[INST] ");
            if (i == 0 && system) {
                /* The template strips the concatenation: leading space of the system text, trailing space of
                 * the user text. */
                size_t start = b->len;
                chat_put(b, "<<SYS>>\n");
                chat_put(b, system);
                chat_put(b, "\n<</SYS>>\n\n");
                chat_put(b, m->content);
                if (!b->oom) {
                    char *joined = strdup(b->s + start);
                    if (!joined) {
                        b->oom = true;
                        break;
                    }
                    b->len = start;
                    chat_put_stripped(b, joined);
                    free(joined);
                }
            } else {
                chat_put_stripped(b, m->content);
            }
            chat_put(b, " [/INST]");
        } else if (chat_role_is(m, "assistant")) {
            chat_put(b, " ");
            chat_put_stripped(b, m->content);
            chat_put(b, " ");
            chat_put(b, eos);
        }
    }
    return 0;
}

static void chat_render_plain(const chat_message *msgs, size_t n, bool add_generation_prompt, chat_buf *b) {
    for (size_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (chat_role_is(m, "system")) {
            chat_put(b, m->content);
            chat_put(b, "\n\n");
        } else {
            chat_put(b, chat_role_is(m, "user") ? "User: " : chat_role_is(m, "tool") ? "Tool: " : "Assistant:");
            chat_put(b, m->content);
            chat_put(b, "\n");
        }
    }
    if (add_generation_prompt) chat_put(b, "Assistant:");
}

int chat_render(const chat_template *t, const chat_message *messages, size_t n, bool add_generation_prompt,
                const char *bos_text, const char *eos_text, char **out, size_t *len, fkv_error *err) {
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    for (size_t i = 0; i < n; i++) {
        size_t r = 0;
        while (r < 4 && (!messages[i].role || strcmp(messages[i].role, roles[r]))) r++;
        if (r == 4)
            return err_set(err, "chat_render: message %zu has role '%s', not system, user, assistant or tool", i,
                           messages[i].role ? messages[i].role : "(null)");
        if (!messages[i].content) return err_set(err, "chat_render: message %zu (%s) has no content", i, messages[i].role);
    }
    chat_buf b = {0};
    chat_put(&b, ""); /* an empty conversation still gives a string */
    switch (t->family) {
    case CHAT_CHATML:
        chat_render_chatml(t, messages, n, &b);
        if (add_generation_prompt) chat_put(&b, "<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA2:
        if (chat_render_llama2(messages, n, bos_text ? bos_text : "", eos_text ? eos_text : "", &b, err)) {
            free(b.s);
            return -1;
        }
        break;
    case CHAT_PLAIN: chat_render_plain(messages, n, add_generation_prompt, &b); break;
    }
    if (b.oom) {
        free(b.s);
        return err_set(err, "chat_render: out of memory rendering %zu messages", n);
    }
    *out = b.s;
    if (len) *len = b.len;
    return 0;
}

int chat_prompt_ids(const fkv_model *m, const chat_template *t, const chat_message *messages, size_t n,
                    int32_t **ids, uint32_t *n_ids, fkv_error *err) {
    static const char bos[] = "<s>", eos[] = "</s>";
    char *text = NULL;
    size_t len = 0;
    if (chat_render(t, messages, n, true, bos, eos, &text, &len, err)) return -1;
    bool add_bos = !(t->family == CHAT_LLAMA2 && !strncmp(text, bos, strlen(bos)));
    int count = fkv_tokenize(m, text, len, add_bos, true, NULL, 0, err);
    *ids = count >= 0 ? malloc(sizeof(int32_t) * (size_t)(count ? count : 1)) : NULL;
    if (*ids && fkv_tokenize(m, text, len, add_bos, true, *ids, count, err) != count) {
        free(*ids);
        *ids = NULL;
    }
    free(text);
    if (!*ids) return count < 0 ? -1 : err_set(err, "out of memory tokenizing the conversation");
    *n_ids = (uint32_t)count;
    return 0;
}
