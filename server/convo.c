#include "convo.h"

#include <stdlib.h>
#include <string.h>

void convo_add(convo *c, const char *role) {
    if (c->oom) return;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        convo_msg *grown = realloc(c->msgs, sizeof *grown * cap);
        if (!grown) {
            c->oom = true;
            return;
        }
        c->msgs = grown;
        c->cap = cap;
    }
    convo_msg *m = &c->msgs[c->n];
    *m = (convo_msg){.role = role, .text = calloc(1, 1)};
    if (!m->text) {
        c->oom = true;
        return;
    }
    c->n++;
}

void convo_text(convo *c, const char *text, size_t len) {
    if (c->oom || !c->n) return;
    convo_msg *m = &c->msgs[c->n - 1];
    char *grown = realloc(m->text, m->len + len + 1);
    if (!grown) {
        c->oom = true;
        return;
    }
    memcpy(grown + m->len, text, len);
    m->text = grown;
    m->len += len;
    m->text[m->len] = 0;
}

void convo_call(convo *c, const char *name, const char *arguments) {
    if (c->oom || !c->n) return;
    convo_msg *m = &c->msgs[c->n - 1];
    chat_tool_call *grown = realloc(m->calls, sizeof *grown * (m->n_calls + 1));
    if (!grown) {
        c->oom = true;
        return;
    }
    m->calls = grown;
    char *n = strdup(name), *a = strdup(arguments);
    if (!n || !a) {
        free(n);
        free(a);
        c->oom = true;
        return;
    }
    m->calls[m->n_calls++] = (chat_tool_call){n, a};
}

void convo_reasoning(convo *c, const char *text, size_t len) {
    if (c->oom || !c->n) return;
    convo_msg *m = &c->msgs[c->n - 1];
    char *copy = malloc(len + 1);
    if (!copy) {
        c->oom = true;
        return;
    }
    memcpy(copy, text, len);
    copy[len] = 0;
    free(m->reasoning);
    m->reasoning = copy;
}

const char *convo_last_role(const convo *c) { return c->n ? c->msgs[c->n - 1].role : NULL; }

const chat_message *convo_messages(convo *c) {
    if (c->oom) return NULL;
    chat_message *view = realloc(c->view, sizeof *view * (c->n ? c->n : 1));
    if (!view) {
        c->oom = true;
        return NULL;
    }
    c->view = view;
    for (size_t i = 0; i < c->n; i++)
        view[i] = (chat_message){.role = c->msgs[i].role, .content = c->msgs[i].text, .tool_calls = c->msgs[i].calls,
                                 .n_tool_calls = c->msgs[i].n_calls, .reasoning = c->msgs[i].reasoning};
    return view;
}

void convo_free(convo *c) {
    for (size_t i = 0; i < c->n; i++) {
        free(c->msgs[i].text);
        for (size_t k = 0; k < c->msgs[i].n_calls; k++) {
            free((char *)c->msgs[i].calls[k].name);
            free((char *)c->msgs[i].calls[k].arguments);
        }
        free(c->msgs[i].calls);
        free(c->msgs[i].reasoning);
    }
    free(c->msgs);
    free(c->view);
    *c = (convo){0};
}
