/* jsonschema_rules.c — rule names, the fixed rules, errors (contract in jsonschema_rules.h). */
#include "constrain/jsonschema_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* The fixed rules, indexed by JP_*; '@' in a body stands for the prefix (a literal '@' is \x40). */
static const struct {
    const char *name, *body;
    unsigned deps;
} js_prims[JP_COUNT] = {
    [JP_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    [JP_HEX] = {"hex", "[0-9a-fA-F]", 0},
    /* four hex digits but 0000 (\u0000: refused by strict parsers) and the surrogates (only in pairs, below) */
    [JP_U4] = {"u4",
               "[1-9a-cA-CeEfF] @hex @hex @hex | [dD] [0-7] @hex @hex | \"0\" ( [1-9a-fA-F] @hex @hex | \"0\" "
               "( [1-9a-fA-F] @hex | \"0\" [1-9a-fA-F] ) )",
               1u << JP_HEX},
    [JP_ESCAPE] = {"escape",
                   "[\"\\\\/bfnrt] | \"u\" @u4 | \"u\" [dD] [89abAB] @hex @hex \"\\\\u\" [dD] [c-fC-F] @hex @hex",
                   1u << JP_HEX | 1u << JP_U4},
    [JP_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" @escape", 1u << JP_ESCAPE},
    [JP_STRING] = {"string", "\"\\\"\" @char* \"\\\"\"", 1u << JP_CHAR},
    [JP_INTEGER] = {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )", 0},
    [JP_NUMBER] = {"number", "@integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?", 1u << JP_INTEGER},
    [JP_FRAC] = {"frac", "\".\" [0-9]{1,16}", 0},
    [JP_ZFRAC] = {"zfrac", "\".\" \"0\"{1,16}", 0},
    [JP_NZFRAC] = {"nzfrac", "\".\" \"0\"{0,15} [1-9] [0-9]{0,15}", 0},
    [JP_BOOLEAN] = {"boolean", "\"true\" | \"false\"", 0},
    [JP_NULL] = {"null", "\"null\"", 0},
    [JP_VALUE] = {"value", "@object | @array | @string | @number | @boolean | @null",
                  1u << JP_OBJECT | 1u << JP_ARRAY | 1u << JP_STRING | 1u << JP_NUMBER | 1u << JP_BOOLEAN |
                      1u << JP_NULL},
    [JP_OBJECT] = {"object",
                   "\"{\" @space ( @string @space \":\" @space @value ( \",\" @space @string @space \":\" @space "
                   "@value )* )? @space \"}\"",
                   1u << JP_SPACE | 1u << JP_STRING | 1u << JP_VALUE},
    [JP_ARRAY] = {"array", "\"[\" @space ( @value ( \",\" @space @value )* )? @space \"]\"",
                  1u << JP_SPACE | 1u << JP_VALUE},
    /* date: the days each month has; 02-29 only in leap years (divisible by 4, centuries by 400) */
    [JP_DATE] = {"date",
                 "[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
                 "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | \"02-\" ( \"0\" [1-9] | "
                 "\"1\" [0-9] | \"2\" [0-8] ) ) | ( [0-9] [0-9] ( [2468] [048] | [13579] [26] | \"0\" [48] ) | "
                 "( [02468] [048] | [13579] [26] ) \"00\" ) \"-02-29\"",
                 0},
    [JP_TIME] = {"time",
                 "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? ( \"Z\" | "
                 "[+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
                 0},
    [JP_DATE_TIME] = {"date-time", "@date \"T\" @time", 1u << JP_DATE | 1u << JP_TIME},
    [JP_UUID] = {"uuid",
                 "\"\\\"\" @hex{8} \"-\" @hex{4} \"-\" @hex{4} \"-\" @hex{4} \"-\" @hex{12} \"\\\"\"", 1u << JP_HEX},
    /* The formats below are subsets, each within what RFC 1123 / 5321 / 3986, ajv-formats and zod 4's patterns
     * accept. hostname: at most 7 labels of at most 32 characters (so at most 230, under 253). */
    [JP_HOST_LABEL] = {"host-label", "[A-Za-z0-9] ( [A-Za-z0-9-]{0,30} [A-Za-z0-9] )?", 0},
    [JP_HOSTNAME] = {"hostname", "@host-label ( \".\" @host-label ){0,6}", 1u << JP_HOST_LABEL},
    /* email: up to 4 dot-separated atoms of up to 16 of [A-Za-z0-9_+-] (no quoted local parts), "@", up to 4
     * labels and an alphabetic top-level label of 2 to 12 letters (no address literals): bounded, so a model ends */
    [JP_EMAIL] = {"email",
                  "[A-Za-z0-9_+-]{1,16} ( \".\" [A-Za-z0-9_+-]{1,16} ){0,3} \"\\x40\" ( @host-label \".\" ){1,4} "
                  "[A-Za-z]{2,12}",
                  1u << JP_HOST_LABEL},
    [JP_IPV4_OCTET] = {"ipv4-octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]", 0},
    [JP_IPV4] = {"ipv4", "@ipv4-octet ( \".\" @ipv4-octet ){3}", 1u << JP_IPV4_OCTET},
    [JP_H16] = {"h16", "@hex{1,4}", 1u << JP_HEX},
    /* ipv6: eight groups, or fewer around one "::"; no embedded IPv4 and no zone */
    [JP_IPV6] = {"ipv6",
                 "( @h16 \":\" ){7} @h16 | ( @h16 \":\" ){1,7} \":\" | ( @h16 \":\" ){1,6} \":\" @h16 | "
                 "( @h16 \":\" ){1,5} ( \":\" @h16 ){1,2} | ( @h16 \":\" ){1,4} ( \":\" @h16 ){1,3} | "
                 "( @h16 \":\" ){1,3} ( \":\" @h16 ){1,4} | ( @h16 \":\" ){1,2} ( \":\" @h16 ){1,5} | "
                 "@h16 \":\" ( \":\" @h16 ){1,6} | \":\" ( ( \":\" @h16 ){1,7} | \":\" )",
                 1u << JP_H16},
    [JP_URI_CHAR] = {"uri-char", "[A-Za-z0-9._~!$&'()*+,;=:\\x40-] | \"%\" @hex @hex", 1u << JP_HEX},
    /* uri: scheme "://" a hostname, an optional port, a path, query and fragment (no IP literals, no userinfo) */
    [JP_URI] = {"uri",
                "[A-Za-z] [A-Za-z0-9+.-]{0,15} \"://\" @hostname ( \":\" [0-9]{1,5} )? ( \"/\" @uri-char* )* "
                "( \"?\" ( @uri-char | [/?] )* )? ( \"#\" ( @uri-char | [/?] )* )?",
                1u << JP_HOSTNAME | 1u << JP_URI_CHAR},
};

int js_err(jsctx *c, const char *path, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = true;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_input(c->err, "%s at %s", msg, *path ? path : "the root");
}

int js_oom(jsctx *c) {
    if (c->failed) return -1;
    c->failed = true;
    return err_nomem(c->err, "JSON Schema: out of memory");
}

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool name_taken(const jsctx *c, const char *name) {
    if (!c->names_cap) return false;
    for (size_t h = str_hash(name) & (c->names_cap - 1); c->names[h]; h = (h + 1) & (c->names_cap - 1))
        if (strcmp(c->names[h], name) == 0) return true;
    return false;
}

static int name_add(jsctx *c, char *name) {
    if ((c->n_names + 1) * 2 > c->names_cap) {
        size_t cap = c->names_cap ? c->names_cap * 2 : 64;
        char **t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < c->names_cap; i++) {
            if (!c->names[i]) continue;
            size_t h = str_hash(c->names[i]) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = c->names[i];
        }
        free(c->names);
        c->names = t;
        c->names_cap = cap;
    }
    size_t h = str_hash(name) & (c->names_cap - 1);
    while (c->names[h]) h = (h + 1) & (c->names_cap - 1);
    c->names[h] = name;
    c->n_names++;
    return 0;
}

char *js_hint_join(const char *hint, const char *part) {
    sbuf b = {0};
    sb_puts(&b, hint);
    sb_puts(&b, "-");
    sb_puts(&b, part);
    return b.oom ? (free(b.p), NULL) : b.p;
}

const char *js_rule_name(jsctx *c, const char *hint) {
    sbuf b = {0};
    sb_puts(&b, c->prefix);
    size_t n = 0;
    for (const char *h = hint; *h && n < 64; h++, n++) {
        char ch = *h;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
        sb_add(&b, ok ? &ch : "-", 1);
    }
    size_t base = b.n;
    for (unsigned k = 1; !b.oom && name_taken(c, b.p); k++) {
        b.n = base;
        sb_printf(&b, "-%u", k);
    }
    if (b.oom || name_add(c, b.p)) {
        free(b.p);
        js_oom(c);
        return NULL;
    }
    return b.p;
}

void js_emit_rule(jsctx *c, const char *name, const sbuf *body) {
    sb_puts(&c->rules, name);
    sb_puts(&c->rules, " ::= ");
    if (body->n) sb_add(&c->rules, body->p, body->n);
    sb_puts(&c->rules, "\n");
}

void js_prim(jsctx *c, sbuf *b, int k) {
    if (!(c->prims & 1u << k)) {
        c->prims |= 1u << k;
        for (int d = 0; d < JP_COUNT; d++)
            if (js_prims[k].deps & 1u << d) {
                sbuf ignore = {0};
                js_prim(c, &ignore, d);
                free(ignore.p);
            }
        sbuf body = {0};
        for (const char *s = js_prims[k].body; *s; s++) {
            if (*s == '@') sb_puts(&body, c->prefix);
            else sb_add(&body, s, 1);
        }
        sb_puts(&c->rules, c->prefix);
        sb_puts(&c->rules, js_prims[k].name);
        sb_puts(&c->rules, " ::= ");
        sb_add(&c->rules, body.p ? body.p : "", body.n);
        sb_puts(&c->rules, "\n");
        if (body.oom) c->rules.oom = true;
        free(body.p);
    }
    sb_puts(b, c->prefix);
    sb_puts(b, js_prims[k].name);
}
