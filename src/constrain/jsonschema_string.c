/* jsonschema_string.c — string lengths and formats; keys other than the declared names (contract in
 * jsonschema_string.h). */
#include "constrain/jsonschema_string.h"

#include <stdlib.h>
#include <string.h>

#include "constrain/grammar_limits.h"
#include "constrain/jsonschema_keywords.h"

void js_string_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    json_t *fmt = json_object_get(s, "format");
    if (fmt) {
        if (!json_is_string(fmt)) {
            js_err(c, path, "malformed JSON Schema keyword 'format': expected a string");
            return;
        }
        const char *f = json_string_value(fmt);
        int k = strcmp(f, "date") == 0 ? JP_DATE : strcmp(f, "time") == 0 ? JP_TIME
              : strcmp(f, "date-time") == 0 ? JP_DATE_TIME : strcmp(f, "uuid") == 0 ? JP_UUID : -1;
        if (k < 0) {
            js_err(c, path, "unsupported JSON Schema keyword 'format': '%s' (date, time, date-time and uuid are)", f);
            return;
        }
        if (k != JP_UUID) sb_puts(b, "\"\\\"\" ");
        js_prim(c, b, k);
        if (k != JP_UUID) sb_puts(b, " \"\\\"\"");
        return;
    }
    int64_t min = 0, max = 0;
    if (js_count_range(c, s, "minLength", "maxLength", path, &min, &max)) return;
    if (min == INT32_MAX) {
        js_err(c, path, "unsupported JSON Schema keyword 'minLength': above the supported %d", GRAMMAR_MAX_REPEAT);
        return;
    }
    if (min > max) {
        js_err(c, path, "'minLength' is above 'maxLength'");
        return;
    }
    if (min == 0 && max == INT32_MAX) {
        js_prim(c, b, JP_STRING);
        return;
    }
    sbuf ch = {0};
    js_prim(c, &ch, JP_CHAR);
    sb_puts(b, "\"\\\"\" ");
    sb_repeat(b, ch.p ? ch.p : "", min, max);
    sb_puts(b, " \"\\\"\"");
    if (ch.oom) b->oom = true;
    free(ch.p);
}

typedef struct {
    uint32_t cp;
    int child, sibling; /* -1: none */
    bool end;           /* a declared name ends here */
} js_trie;

/* Rules for the names that are not one of a trie's: node `at`'s continuations (see js_not_names). */
static const char *not_names_rule(jsctx *c, const js_trie *t, int at, const char *hint) {
    sbuf body = {0}, rej = {0};
    if (!t[at].end) sb_puts(&body, "| "); /* the name may stop here (first: an empty alternative cannot end a line) */
    size_t none = body.n;                 /* no alternative written after it yet */
    for (int ch = t[at].child; ch >= 0; ch = t[ch].sibling) {
        if (body.n > none) sb_puts(&body, " | ");
        uint32_t cp = t[ch].cp;
        sb_printf(&body, cp > 0xffff ? "[\\U%08X] " : "[\\u%04X] ", cp);
        sb_printf(&rej, cp > 0xffff ? "\\U%08X" : "\\u%04X", cp);
        if (t[ch].child >= 0) {
            const char *sub = not_names_rule(c, t, ch, hint);
            if (!sub) goto fail;
            sb_puts(&body, sub);
        } else {
            js_prim(c, &body, JP_CHAR);
            sb_puts(&body, "+");
        }
    }
    if (body.n > none) sb_puts(&body, " | ");
    sb_puts(&body, "( [^\"\\\\\\x7F\\x00-\\x1F");
    if (rej.n) sb_add(&body, rej.p, rej.n);
    sb_puts(&body, "] | \"\\\\\" ");
    js_prim(c, &body, JP_ESCAPE);
    sb_puts(&body, " ) ");
    js_prim(c, &body, JP_CHAR);
    sb_puts(&body, "*");
    if (body.oom || rej.oom) {
        js_oom(c);
        goto fail;
    }
    const char *name = js_rule_name(c, hint);
    if (!name) goto fail;
    js_emit_rule(c, name, &body);
    free(body.p);
    free(rej.p);
    return name;
fail:
    free(body.p);
    free(rej.p);
    return NULL;
}

const char *js_not_names(jsctx *c, const char *const *names, size_t n, const char *path, const char *hint) {
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += strlen(names[i]);
    js_trie *t = malloc(cap * sizeof *t);
    if (!t) return js_oom(c), NULL;
    int nt = 1;
    t[0] = (js_trie){0, -1, -1, false};
    for (size_t i = 0; i < n; i++) {
        int at = 0;
        const unsigned char *k = (const unsigned char *)names[i];
        size_t len = strlen(names[i]);
        if (len > 256) {
            free(t);
            return js_err(c, path, "unsupported: a property name longer than 256 bytes beside additionalProperties"),
                   NULL;
        }
        for (size_t j = 0; j < len;) {
            uint32_t cp = k[j];
            int l = 1;
            if (cp >= 0xf0) cp &= 0x07, l = 4;
            else if (cp >= 0xe0) cp &= 0x0f, l = 3;
            else if (cp >= 0xc0) cp &= 0x1f, l = 2;
            for (int q = 1; q < l && j + (size_t)q < len; q++) cp = cp << 6 | (k[j + (size_t)q] & 0x3f);
            j += (size_t)l;
            if (cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7f) {
                free(t);
                return js_err(c, path, "unsupported: property name '%s' (quote, backslash or control character) beside "
                                       "additionalProperties", names[i]), NULL;
            }
            int ch = t[at].child;
            while (ch >= 0 && t[ch].cp != cp) ch = t[ch].sibling;
            if (ch < 0) {
                ch = nt++;
                t[ch] = (js_trie){cp, -1, t[at].child, false};
                t[at].child = ch;
            }
            at = ch;
        }
        t[at].end = true;
    }
    sbuf body = {0};
    const char *name = NULL;
    sb_puts(&body, "\"\\\"\" ");
    if (t[0].child < 0) { /* only "" declared */
        js_prim(c, &body, JP_CHAR);
        sb_puts(&body, "+");
    } else {
        char *sub_hint = js_hint_join(hint, "k");
        const char *sub = sub_hint ? not_names_rule(c, t, 0, sub_hint) : NULL;
        free(sub_hint);
        if (!sub) goto out;
        sb_puts(&body, sub);
    }
    sb_puts(&body, " \"\\\"\"");
    if (body.oom) {
        js_oom(c);
        goto out;
    }
    name = js_rule_name(c, hint);
    if (name) js_emit_rule(c, name, &body);
out:
    free(body.p);
    free(t);
    return name;
}
