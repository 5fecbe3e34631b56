#include "reply.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the reader is. */
enum {
    R_START,     /* nothing decided: a think block, a call or content may begin (THINK, LLAMA3) */
    R_REASONING, /* THINK: inside the think block */
    R_CONTENT,
    R_CALLS,    /* the rest is the calls' text */
    R_HEADER,   /* HARMONY: a message's header, up to "<|message|>" */
    R_BODY,     /* HARMONY: a message's body (kind: reasoning or content) */
    R_BETWEEN,  /* HARMONY: after a body's end, before the next "<|start|>" */
};
enum { KIND_REASONING, KIND_CONTENT };

static const char THINK_OPEN[] = "<think>", THINK_CLOSE[] = "</think>", CALL_OPEN[] = "<tool_call>",
                  PYTHON_TAG[] = "<|python_tag|>", H_MESSAGE[] = "<|message|>", H_START[] = "<|start|>";
/* What ends a harmony body: its own end, the generation's ends (never text, unless a model spells them), or the next
 * message's start. */
static const char *const H_ENDS[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
/* How a harmony header begins: its channel, a recipient, or the role after "<|start|>". */
static const char H_CHANNEL[] = "<|channel|>";
static const char *const H_HEADS[] = {H_CHANNEL, " to=", "assistant"};
/* A header is a few words: text whose first this many bytes hold no "<|message|>" is no header but content. */
#define REPLY_MAX_HEADER 256

reply_form reply_form_of(const chat_template *t, bool tools) {
    reply_form f = {.reasoning = REPLY_PLAIN, .calls = t && tools ? toolcall_format_of(t) : TOOLCALL_NONE};
    if (!t) return f;
    switch (t->family) {
    /* thinking switched off: the prompt holds the closed, empty block, and the reply is the answer alone */
    case CHAT_CHATML: /* Qwen3.5 (thinking and XML calls): the prompt ends "<think>\n" */
        f.reasoning = t->qwen3_thinking && !t->no_thinking ? REPLY_THINK : REPLY_PLAIN;
        f.opened = f.reasoning == REPLY_THINK && t->qwen3_coder;
        break;
    case CHAT_SMOLLM3: f.reasoning = REPLY_THINK; break;
    case CHAT_DEEPSEEK: f.reasoning = REPLY_THINK, f.opened = true; break; /* the prompt ends "<think>\n" */
    case CHAT_GLM: f.reasoning = t->no_thinking ? REPLY_PLAIN : REPLY_THINK, f.opened = t->glm == CHAT_GLM_47; break;
    case CHAT_HARMONY: f.reasoning = REPLY_HARMONY; break;
    default: break;
    }
    return f;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static bool starts(const char *s, size_t n, const char *marker) {
    const size_t m = strlen(marker);
    return n >= m && !memcmp(s, marker, m);
}

/* Whether s[0..n) is a proper beginning of marker (more text may complete it). */
static bool begins(const char *s, size_t n, const char *marker) { return n < strlen(marker) && !memcmp(s, marker, n); }

/* The first of markers[0..n_markers) in t[from, len): its offset (SIZE_MAX: none), *which of them. */
static size_t first_of(const char *t, size_t from, size_t len, const char *const *markers, size_t n_markers,
                       size_t *which) {
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < n_markers; k++) {
        const char *hit = from < len ? memmem(t + from, len - from, markers[k], strlen(markers[k])) : NULL;
        if (hit && (size_t)(hit - t) < best) best = (size_t)(hit - t), *which = k;
    }
    return best;
}

/* Where a marker may still be arriving at the end of t[from, len): the first position whose rest is a proper
 * beginning of one of markers (every marker begins with "<"), or len. */
static size_t arriving(const char *t, size_t from, size_t len, const char *const *markers, size_t n_markers) {
    for (size_t at = from; at < len; at++) {
        if (t[at] != '<') continue;
        for (size_t k = 0; k < n_markers; k++)
            if (begins(t + at, len - at, markers[k])) return at;
    }
    return len;
}

static void put(reply *r, int kind, const char *s, size_t n) {
    if (!n || r->oom) return;
    char **buf = kind == KIND_REASONING ? &r->reasoning : &r->content;
    size_t *len = kind == KIND_REASONING ? &r->n_reasoning : &r->n_content;
    size_t *cap = kind == KIND_REASONING ? &r->cap_reasoning : &r->cap_content;
    if (*len + n + 1 > *cap) {
        const size_t grown_cap = 2 * *cap + n + 64;
        char *grown = realloc(*buf, grown_cap);
        if (!grown) {
            r->oom = true;
            return;
        }
        *buf = grown;
        *cap = grown_cap;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
}

/* t[r->read, end) into kind, as far as it is decided: whitespace that begins it dropped while r->lead; with
 * hold_space, trailing whitespace kept back (whitespace the split may still drop). */
static void put_span(reply *r, int kind, const char *t, size_t end, bool hold_space) {
    size_t from = r->read;
    if (r->lead) {
        while (from < end && is_space(t[from])) from++;
        if (from < end) r->lead = false;
    }
    size_t to = end;
    if (hold_space)
        while (to > from && is_space(t[to - 1])) to--;
    put(r, kind, t + from, to - from);
    r->read = r->shown = to > from ? to : from; /* dropped whitespace is decided too */
}

/* The calls begin at `at`; t[r->read, at) is whitespace before them (or, for LLAMA3, before the reply's first byte). */
static void begin_calls(reply *r, size_t at, size_t len) {
    r->calls_at = at;
    r->state = R_CALLS;
    r->read = len;
}

/* THINK's and PLAIN's start: a think block, a Llama-3 call, or content. false: wait for more text. */
static bool read_start(reply *r, const reply_form *f, const char *t, size_t len, bool final) {
    size_t i = r->read;
    while (i < len && is_space(t[i])) i++;
    const char *rest = t + i;
    const size_t n = len - i;
    if (f->reasoning == REPLY_THINK && f->opened) {
        r->state = R_REASONING, r->lead = true;
    } else if (f->reasoning == REPLY_THINK && starts(rest, n, THINK_OPEN)) {
        r->read = r->shown = i + strlen(THINK_OPEN);
        r->state = R_REASONING, r->lead = true;
    } else if (f->calls == TOOLCALL_LLAMA3 && (starts(rest, n, "{") || starts(rest, n, PYTHON_TAG))) {
        begin_calls(r, i, len);
    } else if (!final && (n == 0 || (f->reasoning == REPLY_THINK && begins(rest, n, THINK_OPEN)) ||
                          (f->calls == TOOLCALL_LLAMA3 && begins(rest, n, PYTHON_TAG)))) {
        return false;
    } else {
        r->state = R_CONTENT; /* what was skipped is content, as written */
    }
    return true;
}

static void read_reasoning(reply *r, const char *t, size_t len, bool final) {
    const char *const close[] = {THINK_CLOSE};
    const char *hit = r->read < len ? memmem(t + r->read, len - r->read, THINK_CLOSE, strlen(THINK_CLOSE)) : NULL;
    if (hit) {
        put_span(r, KIND_REASONING, t, (size_t)(hit - t), true);
        r->read = r->shown = (size_t)(hit - t) + strlen(THINK_CLOSE); /* the held whitespace is dropped */
        r->state = R_CONTENT, r->lead = true;
        return;
    }
    put_span(r, KIND_REASONING, t, final ? len : arriving(t, r->read, len, close, 1), true);
    if (final) r->read = r->shown = len;
}

static void read_content(reply *r, const reply_form *f, const char *t, size_t len, bool final) {
    const bool tagged = f->calls == TOOLCALL_HERMES || f->calls == TOOLCALL_GLM || f->calls == TOOLCALL_QWEN3_XML;
    const char *const open[] = {CALL_OPEN};
    const char *hit = tagged && r->read < len ? memmem(t + r->read, len - r->read, CALL_OPEN, strlen(CALL_OPEN)) : NULL;
    if (hit) {
        put_span(r, KIND_CONTENT, t, (size_t)(hit - t), true);
        begin_calls(r, (size_t)(hit - t), len);
        return;
    }
    put_span(r, KIND_CONTENT, t, final || !tagged ? len : arriving(t, r->read, len, open, 1), tagged && !final);
}

/* HARMONY: a header complete up to "<|message|>" at `at`: the body it opens, or the calls. */
static void read_header(reply *r, const char *t, size_t len, bool final) {
    const char *h = t + r->header_at;
    const size_t n = len - r->header_at;
    bool header_like = false, may_be = false;
    for (size_t k = 0; k < sizeof H_HEADS / sizeof *H_HEADS; k++) {
        header_like |= starts(h, n, H_HEADS[k]);
        may_be |= begins(h, n, H_HEADS[k]);
    }
    /* "<|message|>" is looked for in the header's first bytes only, so a piece of text decides as the whole does */
    const size_t window = n < REPLY_MAX_HEADER ? n : REPLY_MAX_HEADER;
    const char *msg = memmem(h, window, H_MESSAGE, strlen(H_MESSAGE));
    if ((!header_like && !(may_be && !final)) || (!msg && window == REPLY_MAX_HEADER)) {
        /* no header: the text is content, as written */
        r->state = R_BODY, r->kind = KIND_CONTENT, r->read = r->shown = r->header_at;
        return;
    }
    if (!msg) {
        if (final) r->read = r->shown = len; /* a header cut short says nothing */
        return;
    }
    const size_t header_len = (size_t)(msg - h);
    if (memmem(h, header_len, " to=", 4)) {
        begin_calls(r, r->header_at, len);
        return;
    }
    const char *channel = memmem(h, header_len, H_CHANNEL, strlen(H_CHANNEL)), *name = NULL;
    if (channel) name = channel + strlen(H_CHANNEL);
    const bool analysis = name && starts(name, header_len - (size_t)(name - h), "analysis");
    r->kind = analysis ? KIND_REASONING : KIND_CONTENT;
    r->read = r->shown = r->header_at + header_len + strlen(H_MESSAGE);
    r->state = R_BODY;
}

static void read_body(reply *r, const char *t, size_t len, bool final) {
    const size_t n_ends = sizeof H_ENDS / sizeof *H_ENDS;
    size_t which = 0;
    const size_t end = first_of(t, r->read, len, H_ENDS, n_ends, &which);
    if (end == SIZE_MAX) {
        put_span(r, r->kind, t, final ? len : arriving(t, r->read, len, H_ENDS, n_ends), false);
        return;
    }
    put_span(r, r->kind, t, end, false);
    r->read = r->shown = end + strlen(H_ENDS[which]);
    if (!strcmp(H_ENDS[which], H_START)) r->state = R_HEADER, r->header_at = r->read;
    else r->state = R_BETWEEN;
}

static bool read_between(reply *r, const char *t, size_t len, bool final) {
    const char *rest = t + r->read;
    const size_t n = len - r->read;
    if (!final && begins(rest, n, H_START)) return false;
    if (starts(rest, n, H_START)) r->read = r->shown = r->read + strlen(H_START);
    r->state = R_HEADER, r->header_at = r->read; /* a header without its "<|start|>" is read all the same */
    return true;
}

int reply_read(reply *r, const reply_form *f, const char *text, size_t len, bool final) {
    if (r->oom) return -1;
    if (!r->begun) { /* a zeroed reply: where it begins */
        r->begun = true;
        r->calls_at = SIZE_MAX;
        if (f->reasoning == REPLY_HARMONY) r->state = R_HEADER; /* the prompt wrote "<|start|>assistant" */
    }
    for (;;) {
        const size_t before = r->read;
        const int state = r->state;
        switch (r->state) {
        case R_START:
            if (!read_start(r, f, text, len, final)) return 0;
            break;
        case R_REASONING: read_reasoning(r, text, len, final); break;
        case R_CONTENT: read_content(r, f, text, len, final); break;
        case R_CALLS: r->read = len; break;
        case R_HEADER: read_header(r, text, len, final); break;
        case R_BODY: read_body(r, text, len, final); break;
        case R_BETWEEN:
            if (!read_between(r, text, len, final)) return 0;
            break;
        }
        if (r->oom) return -1;
        if (r->read == before && r->state == state) return 0; /* nothing more can be decided now */
    }
}

int reply_finish(reply *r, const reply_form *f, const char *text, size_t len, const char *id_base, const json_t *tools,
                 json_t **calls) {
    *calls = NULL;
    if (reply_read(r, f, text, len, true)) return -1;
    if (r->calls_at == SIZE_MAX) return 0;
    size_t before_calls;
    *calls = toolcall_parse(f->calls, text + r->calls_at, len - r->calls_at, id_base, tools, &before_calls);
    if (!*calls || before_calls) { /* not calls after all: their text, and the whitespace before it, is content */
        json_decref(*calls);
        *calls = NULL;
        put(r, KIND_CONTENT, text + r->shown, len - r->shown);
        r->shown = len;
    }
    r->calls_at = SIZE_MAX;
    return r->oom ? -1 : 0;
}

/* --- grammars --- */

char *reply_gbnf(const reply_form *f, const char *rules, const char *calls, const char *answer) {
    char either[256]; /* the calls, or the answer as content (HARMONY: in the final channel) */
    snprintf(either, sizeof either, "( %.64s%s%s%.64s )", calls ? calls : "", calls && answer ? " | " : "",
             answer && f->reasoning == REPLY_HARMONY ? "\"<|channel|>final<|message|>\" " : "", answer ? answer : "");
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out) return NULL;
    if (f->reasoning == REPLY_THINK) { /* the block, as the reader takes it: whitespace around it dropped, and bounded
                                        * (models write a newline or two; a loop of blanks would never reach the answer) */
        if (f->opened) fprintf(out, "root ::= reply-think \"</think>\" [ \\t\\n]{0,8} %s\n", either);
        else fprintf(out, "root ::= ( [ \\t\\n]{0,8} \"<think>\" reply-think \"</think>\" [ \\t\\n]{0,8} )? %s\n", either);
        toolcall_gbnf_text_without(out, "reply-think", THINK_CLOSE);
    } else if (f->reasoning == REPLY_HARMONY) {
        /* An analysis message may come first; it holds no harmony marker at all. */
        fprintf(out, "root ::= ( \"<|channel|>analysis<|message|>\" reply-analysis \"<|end|><|start|>assistant\" )? "
                     "%s\n", either);
        toolcall_gbnf_text_without(out, "reply-analysis", "<|");
    } else {
        fprintf(out, "root ::= %s\n", either);
    }
    fputs(rules, out);
    if (fclose(out)) {
        free(text);
        return NULL;
    }
    return text;
}

void reply_free(reply *r) {
    free(r->reasoning);
    free(r->content);
    *r = (reply){0};
}
