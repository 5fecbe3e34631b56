#include "tenants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"

#define FILE_MAX (16u << 20) /* a keys file's bytes at most: a bound for a path given by mistake */

/* One key: its bytes zero-padded to TENANTS_KEY_MAX, so every comparison reads the same bytes. */
typedef struct {
    unsigned char key[TENANTS_KEY_MAX];
    uint32_t len;
    uint32_t line; /* in the file; 0: --api-key's */
    uint64_t hash; /* of the key, to find duplicates while loading */
    tenant who;
} tenants_entry;

struct tenants {
    tenants_entry *e;
    uint32_t n, cap;
    uint32_t names;
};

void tenants_free(tenants *t) {
    if (!t) return;
    if (t->e) explicit_bzero(t->e, sizeof *t->e * t->cap);
    free(t->e);
    free(t);
}

uint32_t tenants_keys(const tenants *t) { return t->n; }

uint32_t tenants_names(const tenants *t) { return t->names; }

static bool name_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

/* Where a refusal points: origin:LINE, or --api-key. */
static const char *place(char out[320], const char *origin, uint32_t line) {
    if (line) snprintf(out, 320, "%.300s:%u", origin, line);
    else snprintf(out, 320, "--api-key");
    return out;
}

/* Add key[0..len) of tenant name (NULL: the key's own default name) from line (0: --api-key). 0, or -1 with err. */
static int add(tenants *t, const char *key, size_t len, const char *name, size_t name_len, bool shared,
               const char *origin, uint32_t line, fkv_error *err) {
    char at[320];
    if (len > TENANTS_KEY_MAX) return err_input(err, "%s: a key longer than %d bytes", place(at, origin, line),
                                                TENANTS_KEY_MAX);
    if (!len) return err_input(err, "%s: an empty key", place(at, origin, line));
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return err_input(err, "%s: a key with a control character (no header can carry it)",
                             place(at, origin, line));
    tenants_entry x = {.len = (uint32_t)len, .line = line, .hash = XXH3_64bits(key, len), .who.shared = shared};
    memcpy(x.key, key, len);
    if (name) {
        bool plain = name_len >= 1 && name_len <= TENANTS_NAME_MAX;
        for (size_t i = 0; plain && i < name_len; i++) plain = name_char(name[i]);
        if (!plain) { /* the word is not quoted: it may be a key written where a name goes */
            explicit_bzero(&x, sizeof x);
            return err_input(err, "%s: the second word is not a tenant name (1 to %d bytes, each A-Z a-z 0-9 . _ or -)",
                             place(at, origin, line), TENANTS_NAME_MAX);
        }
        memcpy(x.who.name, name, name_len);
    } else {
        snprintf(x.who.name, sizeof x.who.name, "key-%08x", (unsigned)(x.hash >> 32));
    }
    bool named = false;
    for (uint32_t i = 0; i < t->n; i++) {
        const tenants_entry *y = &t->e[i];
        if (y->hash == x.hash && y->len == x.len && !memcmp(y->key, x.key, len)) {
            explicit_bzero(&x, sizeof x);
            char there[320];
            return err_input(err, "%s: the same key as %s", place(at, origin, line), place(there, origin, y->line));
        }
        if (!strcmp(y->who.name, x.who.name)) {
            if (y->who.shared != x.who.shared) {
                explicit_bzero(&x, sizeof x);
                char there[320];
                return err_input(err, "%s: tenant '%s' is %s here and %s at %s: its keys share one cache or none",
                                 place(at, origin, line), y->who.name, shared ? "shared" : "not shared",
                                 y->who.shared ? "shared" : "not shared", place(there, origin, y->line));
            }
            named = true;
        }
    }
    if (t->n == t->cap) {
        const uint32_t cap = t->cap ? 2 * t->cap : 16;
        tenants_entry *grown = calloc(cap, sizeof *grown); /* not realloc: the old keys are overwritten, not left */
        if (!grown) {
            explicit_bzero(&x, sizeof x);
            return err_nomem(err, "out of memory for the keys of %s", origin);
        }
        if (t->e) {
            memcpy(grown, t->e, sizeof *grown * t->n);
            explicit_bzero(t->e, sizeof *t->e * t->cap);
            free(t->e);
        }
        t->e = grown;
        t->cap = cap;
    }
    t->e[t->n++] = x;
    t->names += !named;
    explicit_bzero(&x, sizeof x);
    return 0;
}

/* One line's words (at most 4 counted) up to a word that begins with '#'. */
typedef struct {
    const char *word[4];
    size_t len[4];
    int n;
} tenants_line;

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static void split(const char *s, const char *end, tenants_line *l) {
    l->n = 0;
    while (s < end) {
        while (s < end && blank(*s)) s++;
        if (s == end || *s == '#') return;
        const char *w = s;
        while (s < end && !blank(*s)) s++;
        if (l->n < 4) l->word[l->n] = w, l->len[l->n] = (size_t)(s - w);
        l->n += l->n < 4;
    }
}

tenants *tenants_parse(const char *text, size_t len, const char *origin, const char *api_key, fkv_error *err) {
    tenants *t = calloc(1, sizeof *t);
    if (!t) {
        err_nomem(err, "out of memory for the keys of %s", origin ? origin : "--api-key");
        return NULL;
    }
    const char *s = text, *end = text ? text + len : NULL;
    for (uint32_t line = 1; s && s < end; line++) {
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol) eol = end;
        tenants_line l;
        split(s, eol, &l);
        s = eol + 1;
        if (!l.n) continue;
        char at[320];
        if (l.n == 4) {
            err_input(err, "%s: a fourth word (a line is a key, a tenant name and 'shared', the last two optional)",
                      place(at, origin, line));
            goto fail;
        }
        if (l.n == 3 && (l.len[2] != 6 || memcmp(l.word[2], "shared", 6))) {
            err_input(err, "%s: the third word is not 'shared'", place(at, origin, line));
            goto fail;
        }
        if (add(t, l.word[0], l.len[0], l.n >= 2 ? l.word[1] : NULL, l.n >= 2 ? l.len[1] : 0, l.n == 3, origin, line,
                err))
            goto fail;
    }
    if (api_key && add(t, api_key, strlen(api_key), "default", strlen("default"), true, origin, 0, err)) goto fail;
    return t;
fail:
    tenants_free(t);
    return NULL;
}

tenants *tenants_load(const char *path, const char *api_key, fkv_error *err) {
    if (!path) return tenants_parse(NULL, 0, NULL, api_key, err);
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_input(err, "--api-keys %s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(FILE_MAX + 1);
    size_t len = text ? fread(text, 1, FILE_MAX + 1, f) : 0;
    const bool failed = ferror(f);
    fclose(f);
    tenants *t = NULL;
    if (!text) err_nomem(err, "out of memory reading %s", path);
    else if (failed) err_input(err, "--api-keys %s: cannot be read", path);
    else if (len > FILE_MAX) err_input(err, "--api-keys %s: larger than %u bytes", path, FILE_MAX);
    else t = tenants_parse(text, len, path, api_key, err);
    if (text) explicit_bzero(text, len);
    free(text);
    return t;
}

bool tenants_find(const tenants *t, const char *key, tenant *who) {
    const size_t len = strnlen(key, TENANTS_KEY_MAX + 1);
    if (!len || len > TENANTS_KEY_MAX) return false;
    unsigned char given[TENANTS_KEY_MAX] = {0};
    memcpy(given, key, len);
    /* Every byte of every key, and no branch on what matched: the time is the table's size alone. */
    uint32_t found = UINT32_MAX;
    for (uint32_t i = 0; i < t->n; i++) {
        uint32_t diff = t->e[i].len ^ (uint32_t)len;
        for (size_t b = 0; b < TENANTS_KEY_MAX; b++) diff |= (uint32_t)(t->e[i].key[b] ^ given[b]);
        const uint32_t same = 0u - (((diff - 1) & ~diff) >> 31); /* all ones when diff is 0 (diff < 2^31) */
        found = (found & ~same) | (i & same);
    }
    explicit_bzero(given, sizeof given);
    if (found == UINT32_MAX) return false;
    *who = t->e[found].who;
    return true;
}

const char *tenants_cache(const tenant *who) { return who && who->name[0] && !who->shared ? who->name : NULL; }

int tenants_salt(const char *cache, const char *cache_salt, char **salt, fkv_error *err) {
    *salt = NULL;
    for (const char *c = cache_salt; c && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return err_input(err, "'cache_salt' must not contain control characters (U+0000 to U+001F, U+007F)");
    int n = 0;
    if (!cache) *salt = cache_salt ? strdup(cache_salt) : NULL; /* the shared cache: as cache_salt always was */
    else if (cache_salt) n = asprintf(salt, "\x1ftenant\x1f%s\x1f%s", cache, cache_salt);
    else n = asprintf(salt, "\x1ftenant\x1f%s", cache);
    if (n < 0) *salt = NULL;
    if ((cache || cache_salt) && !*salt) return err_nomem(err, "out of memory for a cache salt");
    return 0;
}
