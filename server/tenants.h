/* tenants.h — whom an API key names: the tenant whose cache its requests use (--api-keys FILE, --api-key KEY).
 *
 * WHY: a shared prefix cache is a side channel. A request whose prefix is cached answers its first token sooner, so
 * anyone who may send requests can time whether another user's system prompt or pasted document is cached (the attack
 * vLLM's cache_salt documentation describes). So each key names a tenant, and a tenant's requests are salted with its
 * name (tenants_salt): tenants never share a row, nor a stored response, whatever their requests send. A key marked
 * `shared` keeps the one cache that requests without a tenant share, as --api-key always did; several keys may name
 * one tenant, and share its cache.
 *
 * The file: one key a line, then optionally the tenant's name ([A-Za-z0-9._-], at most 64 bytes; none: "key-" and 8
 * hex digits of the key's xxh3, so logs and metrics can name it without the key), then optionally the word `shared`;
 * words are separated by spaces or tabs, and a word that begins with '#' starts a comment that ends with the line. The
 * key of --api-key is one more key, shared, of the tenant "default".
 *
 * INVARIANT: a key is never printed: a refusal names FILE:LINE, a log line or a metric the tenant. No request can spell
 * a tenant's salt: it begins with a control character, and tenants_salt refuses a cache_salt that has one. A table is
 * immutable once loaded; a reload makes a new one (the server swaps it in and frees the old), so a lookup copies what
 * it resolved (tenant) for the request to keep.
 *
 * Thread-safety: a table may be read by any number of threads at once.
 */
#ifndef FKV_TENANTS_H
#define FKV_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flatkv.h"

#define TENANTS_NAME_MAX 64 /* a tenant name's bytes */
#define TENANTS_KEY_MAX 256 /* a key's bytes */

typedef struct tenants tenants;

/* What a key resolved to, copied into the request that presented it. */
typedef struct {
    char name[TENANTS_NAME_MAX + 1]; /* "": no tenant (a server without keys) */
    bool shared;                     /* the key uses the shared cache, not its tenant's own */
} tenant;

/* The table of text[0..len) (a keys file's bytes; origin names it in refusals, as origin:LINE) and of api_key (NULL:
 * none), or NULL with err: FKV_E_INPUT for a duplicate key, a bad name, a bad third word, a fourth word, a key over
 * TENANTS_KEY_MAX bytes or with a control character, or a tenant whose keys disagree on `shared`; FKV_E_NOMEM. */
tenants *tenants_parse(const char *text, size_t len, const char *origin, const char *api_key, fkv_error *err);
/* tenants_parse of the file at path (NULL: api_key alone); FKV_E_INPUT too when it cannot be read (a usage error, as
 * an unreadable file is to the CLI). */
tenants *tenants_load(const char *path, const char *api_key, fkv_error *err);
/* Free t, its keys' bytes overwritten first. NULL: nothing. */
void tenants_free(tenants *t);
/* The keys and the distinct tenant names of t. */
uint32_t tenants_keys(const tenants *t);
uint32_t tenants_names(const tenants *t);

/* The tenant of key (NUL-terminated) into *who; false when no key of t is key. Every key of t is compared in full
 * whatever matches, so the time taken says nothing of how much of a key agreed. */
bool tenants_find(const tenants *t, const char *key, tenant *who);
/* The name whose own cache who's requests use: its tenant's, or NULL for the shared cache (who NULL: no tenant). */
const char *tenants_cache(const tenant *who);
/* The engine salt (flatkv.h: requests under different salts never share rows) of a request of the tenant named
 * `cache` (tenants_cache's; NULL: the shared cache) with cache_salt (NULL: none): the shared cache's is cache_salt as
 * given (NULL: the default salt), a tenant's "\x1ftenant\x1f" NAME, then "\x1f" and cache_salt when there is one.
 * 0 with *salt (malloc'd, or NULL for the default salt), or -1 with err: FKV_E_INPUT for a cache_salt with an ASCII
 * control character (below 0x20, or 0x7f), FKV_E_NOMEM. */
int tenants_salt(const char *cache, const char *cache_salt, char **salt, fkv_error *err);

#endif
