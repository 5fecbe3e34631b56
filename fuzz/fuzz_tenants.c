/* fuzz_tenants.c — the keys file of --api-keys (server/tenants.c): any bytes parse into a table or a refusal, never
 * a crash or a leak; and a table that parses holds exactly the file's lines, as an oracle written here apart reads
 * them (one key a line, then an optional tenant name, then an optional `shared`; a word beginning with '#' ends the
 * line). For every line: its key is found, under the name the line gives (or a default one, key-XXXXXXXX), shared as
 * the line says; a tenant's name is 1-64 bytes of [A-Za-z0-9._-]. And the salt of a request (tenants_salt) of that
 * tenant, with the file's first line as its cache_salt: refused when that has a control character, else the shared
 * cache's salt is the cache_salt as given, a tenant's begins with "\x1ftenant\x1f" and its name — which no cache_salt
 * can begin with.
 */
#include <stdint.h>

#include "fuzz.h"
#include "tenants.h"

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > TENANTS_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data, *end = text + size;
    fkv_error err = {0};
    tenants *t = tenants_parse(text, size, "keys", NULL, &err);
    if (!t) {
        FUZZ_CHECK(err.code == FKV_E_INPUT || err.code == FKV_E_NOMEM, "refused with status %d", (int)err.code);
        return 0;
    }
    uint32_t keys = 0;
    char first[TENANTS_KEY_MAX + 1] = "";
    for (const char *s = text; s < end;) {
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol) eol = end;
        char word[3][TENANTS_KEY_MAX + 1];
        int n = 0;
        for (const char *p = s; p < eol;) {
            while (p < eol && blank(*p)) p++;
            if (p == eol || *p == '#') break;
            const char *w = p;
            while (p < eol && !blank(*p)) p++;
            FUZZ_CHECK(n < 3 && (size_t)(p - w) <= TENANTS_KEY_MAX, "a line the table took has a word too many or "
                                                                    "too long");
            memcpy(word[n], w, (size_t)(p - w));
            word[n++][p - w] = 0;
        }
        s = eol + 1;
        if (!n) continue;
        keys++;
        tenant who;
        FUZZ_CHECK(strlen(word[0]) > 0, "a key with a NUL was taken");
        FUZZ_CHECK(tenants_find(t, word[0], &who), "the key of a line is not found");
        FUZZ_CHECK(name_ok(who.name), "tenant name '%s'", who.name);
        FUZZ_CHECK(n < 2 || !strcmp(who.name, word[1]), "name '%s', the line says '%s'", who.name, word[1]);
        FUZZ_CHECK(n >= 2 || !strncmp(who.name, "key-", 4), "a default name '%s'", who.name);
        FUZZ_CHECK(who.shared == (n == 3), "shared %d with %d words", who.shared, n);
        if (keys == 1) snprintf(first, sizeof first, "%s", word[0]);
    }
    FUZZ_CHECK(keys == tenants_keys(t), "%u key lines, the table holds %u", keys, tenants_keys(t));

    tenant who;
    if (keys && tenants_find(t, first, &who)) {
        char *salt = NULL;
        const char *cache = tenants_cache(&who);
        bool control = false;
        for (const char *c = first; *c; c++) control |= (unsigned char)*c < 0x20 || *c == 0x7f;
        const int rc = tenants_salt(cache, first, &salt, &err);
        FUZZ_CHECK(rc == (control ? -1 : 0), "tenants_salt %d for a cache_salt %s control characters", rc,
                   control ? "with" : "without");
        if (!rc && !cache) FUZZ_CHECK(salt && !strcmp(salt, first), "the shared cache's salt is not the cache_salt");
        if (!rc && cache)
            FUZZ_CHECK(salt && !strncmp(salt, "\x1ftenant\x1f", 8) && !strncmp(salt + 8, cache, strlen(cache)),
                       "a tenant's salt does not begin with its name");
        free(salt);
    }
    tenants_free(t);
    return 0;
}
