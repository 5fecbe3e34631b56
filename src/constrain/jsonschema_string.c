/* jsonschema_string.c — string lengths and formats; keys other than the declared names (contract in
 * jsonschema_string.h). */
#include "constrain/jsonschema_string.h"

#include <stdlib.h>
#include <string.h>

#include "constrain/grammar_limits.h"
#include "constrain/jsonschema_keywords.h"
#include "constrain/jsonschema_pattern.h"

static const struct {
    const char *name;
    int rule;
} js_formats[] = {{"date", JP_DATE},         {"time", JP_TIME}, {"date-time", JP_DATE_TIME}, {"uuid", JP_UUID},
                  {"hostname", JP_HOSTNAME}, {"email", JP_EMAIL}, {"ipv4", JP_IPV4},         {"ipv6", JP_IPV6},
                  {"uri", JP_URI}};

/* The formats JSON Schema 2020-12 defines. Another (zod's "starts_with", "cuid", ...) is an annotation: beside a
 * pattern, which then states the constraint, it is ignored; alone it is refused, as the caller surely meant it. */
static const char *const js_standard_formats[] = {
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6", "uri",
    "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex",
    NULL};

/* A format beside a pattern: a grammar cannot intersect two rules, so only the pairs zod 4's z.toJSONSchema() writes
 * are taken, where one side holds within the other (checked in tests/test_jsonschema.c): the narrower is used. */
static const struct {
    const char *format, *pattern;
    bool use_pattern;
} js_format_patterns[] = {
    {"email", "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$",
     false},
    {"uuid", "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-"
             "0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$", true},
    {"ipv4", "^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]"
             "[0-9]|[0-9])$", true},
    {"ipv6", "^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6"
     "}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,"
     "4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1"
     ",4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-f"
     "A-F]{1,4}){1,7}|:))$",
     true},
    {"date", "^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}"
     "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-("
     "?:0[1-9]|1\\d|2[0-8])))$",
     true},
    {"date-time", "^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}"
     "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-("
     "?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$",
     true},
    {"hostname", "^(?=.{1,253}\\.?$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[-0-9a-zA-Z]"
                 "{0,61}[0-9a-zA-Z])?)*\\.?$", false},
};

/* b += a string of format f (quotes included); an error naming 'format' when it is not one of js_formats. */
static void format_body(jsctx *c, sbuf *b, const char *f, const char *path) {
    size_t k = 0, n = sizeof js_formats / sizeof *js_formats;
    while (k < n && strcmp(js_formats[k].name, f) != 0) k++;
    if (k == n) {
        js_err(c, path, "unsupported JSON Schema keyword 'format': '%s' (date, time, date-time, uuid, hostname, email, "
                        "ipv4, ipv6 and uri are)", f);
        return;
    }
    if (js_formats[k].rule != JP_UUID) sb_puts(b, "\"\\\"\" ");
    js_prim(c, b, js_formats[k].rule);
    if (js_formats[k].rule != JP_UUID) sb_puts(b, " \"\\\"\"");
}

void js_string_body(jsctx *c, sbuf *b, json_t *s, const char *path) {
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    if (fmt && !json_is_string(fmt)) {
        js_err(c, path, "malformed JSON Schema keyword 'format': expected a string");
        return;
    }
    if (pat && !json_is_string(pat)) {
        js_err(c, path, "malformed JSON Schema keyword 'pattern': expected a string");
        return;
    }
    if ((fmt || pat) && (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))) {
        js_err(c, path, "unsupported JSON Schema keyword '%s' beside '%s'",
               json_object_get(s, "minLength") ? "minLength" : "maxLength", pat ? "pattern" : "format");
        return;
    }
    if (fmt && pat) {
        const char *f = json_string_value(fmt), *p = json_string_value(pat);
        size_t k = 0, n = sizeof js_format_patterns / sizeof *js_format_patterns;
        while (k < n && (strcmp(js_format_patterns[k].format, f) != 0 || strcmp(js_format_patterns[k].pattern, p) != 0))
            k++;
        if (k == n && js_in_list(js_standard_formats, f)) {
            js_err(c, path, "unsupported JSON Schema keyword 'pattern' beside 'format' '%s'", f);
            return;
        }
        if (k == n || js_format_patterns[k].use_pattern) fmt = NULL;
        else pat = NULL;
    }
    if (pat) {
        js_pattern_body(c, b, json_string_value(pat), path);
        return;
    }
    if (fmt) {
        format_body(c, b, json_string_value(fmt), path);
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
