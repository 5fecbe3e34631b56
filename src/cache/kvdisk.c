#include "cache/kvdisk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>
#include <xxhash.h>

#include "base/err.h"

#define MAGIC "FLATKVB3" /* B1's depth became n_ids when states joined the blocks; B3 added the MAC */
/* Writes queued at most: a slow disk costs dropped writes (counted), never memory or the engine's time. */
#define QUEUE_BYTES ((size_t)256 << 20)
/* Evicting goes below the budget by this share, so that a full tier does not rescan at every write. */
#define EVICT_TO_PERCENT 90
/* Temporary files older than this are a killed writer's: removed at open. */
#define STALE_TMP_SECONDS 600

typedef struct {
    char magic[8];
    uint64_t key_lo, key_hi;
    uint32_t block_rows, n_ids;
    uint64_t row_bytes; /* of the payload: a block's rows, or a state */
    uint64_t ids_hash, rows_hash; /* xxh3-64 */
    uint64_t header_hash;         /* xxh3-64 of the fields above */
    uint8_t mac[KVDISK_MAC_KEY_BYTES]; /* with a key: entry_mac; zeros without */
} file_header;

typedef struct job {
    struct job *next;
    kvdisk_key key, group; /* group: a state's (see entry_path); a block's is unused */
    bool state;
    uint32_t n_ids;
    size_t bytes;  /* of the payload */
    uint8_t *data; /* ids, then the payload */
} job;

struct kvdisk {
    char *dir;
    uint64_t budget;
    uint32_t block_rows;
    size_t block_bytes;
    pthread_t writer;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    job *head, *tail;
    size_t queued_bytes;
    bool stop;
    unsigned tmp_seq;
    bool keyed;
    uint8_t mac_key[KVDISK_MAC_KEY_BYTES];
    _Atomic uint64_t hits, misses, corrupt, forged, writes, evictions, dropped, errors, bytes, pending;
};

/* BLAKE2b, not a fast non-cryptographic hash: a name is all that keeps one salt's (one tenant's) blocks from
 * another's on disk, so no request may be able to craft a salt or ids whose chain meets another's. Once a block. */
kvdisk_key kvdisk_chain(const kvdisk_key *parent, const void *bytes, size_t n) {
    crypto_generichash_state st;
    uint8_t h[2 * sizeof(uint64_t)];
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    crypto_generichash_update(&st, (const unsigned char *)parent, sizeof *parent);
    crypto_generichash_update(&st, bytes, n);
    crypto_generichash_final(&st, h, sizeof h);
    kvdisk_key k;
    memcpy(&k.lo, h, sizeof k.lo);
    memcpy(&k.hi, h + sizeof k.lo, sizeof k.hi);
    return k;
}

static void key_hex(const kvdisk_key *k, char out[33]) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)k->hi, (unsigned long long)k->lo);
}

/* A block's file: DIR/kv/XY/<key>.blk (XY: the key's first two hex digits). A state's (group given): in its group's
 * folder, DIR/kv/XY/<group>.<n_ids>.<key>.blk, so that listing one folder finds a group's states. */
static char *entry_path(const kvdisk *d, const kvdisk_key *k, const kvdisk_key *group, uint32_t n_ids) {
    char hex[33], ghex[33], *p;
    key_hex(k, hex);
    if (!group) return asprintf(&p, "%s/kv/%.2s/%s.blk", d->dir, hex, hex) < 0 ? NULL : p;
    key_hex(group, ghex);
    return asprintf(&p, "%s/kv/%.2s/%s.%u.%s.blk", d->dir, ghex, ghex, n_ids, hex) < 0 ? NULL : p;
}

static int make_dir(const char *path) { return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1; }

static uint64_t header_hash(const file_header *h) { return XXH3_64bits(h, offsetof(file_header, header_hash)); }

/* The keyed BLAKE2b of n parts, after a domain that keeps the MACs of block files and identities apart. */
static void keyed_mac(const kvdisk *d, const char *domain, const void *const *parts, const size_t *sizes, int n,
                      uint8_t out[KVDISK_MAC_KEY_BYTES]) {
    crypto_generichash_state st;
    crypto_generichash_init(&st, d->mac_key, sizeof d->mac_key, KVDISK_MAC_KEY_BYTES);
    crypto_generichash_update(&st, (const unsigned char *)domain, strlen(domain) + 1);
    for (int i = 0; i < n; i++) crypto_generichash_update(&st, parts[i], sizes[i]);
    crypto_generichash_final(&st, out, KVDISK_MAC_KEY_BYTES);
}

/* An entry's MAC: its header up to the MAC, its ids, its payload. */
static void entry_mac(const kvdisk *d, const file_header *h, const void *ids, size_t ids_bytes, const void *payload,
                      uint8_t out[KVDISK_MAC_KEY_BYTES]) {
    const void *parts[] = {h, ids, payload};
    const size_t sizes[] = {offsetof(file_header, mac), ids_bytes, h->row_bytes};
    keyed_mac(d, "flatkv block file", parts, sizes, 3, out);
}

/* All of buf to fd, through short writes. */
static int write_all(int fd, const void *buf, size_t n) {
    for (const uint8_t *p = buf; n;) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n) {
    for (uint8_t *p = buf; n;) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r;
    }
    return 0;
}

/* ---- budget ---- */

typedef struct {
    char *path;
    struct timespec mtime;
    uint64_t size;
} block_file;

static int by_mtime(const void *a, const void *b) {
    const struct timespec *x = &((const block_file *)a)->mtime, *y = &((const block_file *)b)->mtime;
    return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
                                  : (x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec);
}

/* Every block file under DIR/kv (with other processes' too); *n files, their bytes returned. */
static uint64_t scan(const kvdisk *d, block_file **files, size_t *n) {
    uint64_t total = 0;
    size_t cap = 0;
    *files = NULL, *n = 0;
    char *top;
    if (asprintf(&top, "%s/kv", d->dir) < 0) return 0;
    DIR *kv = opendir(top);
    for (struct dirent *sub; kv && (sub = readdir(kv));) {
        if (sub->d_name[0] == '.') continue;
        char *subdir;
        if (asprintf(&subdir, "%s/%s", top, sub->d_name) < 0) continue;
        DIR *blocks = opendir(subdir);
        for (struct dirent *f; blocks && (f = readdir(blocks));) {
            const size_t len = strlen(f->d_name);
            struct stat st;
            char *path;
            if (len < 4 || strcmp(f->d_name + len - 4, ".blk")) continue;
            if (asprintf(&path, "%s/%s", subdir, f->d_name) < 0) continue;
            if (*n == cap) {
                block_file *grown = realloc(*files, (cap * 2 + 64) * sizeof **files);
                if (!grown) {
                    free(path);
                    break;
                }
                *files = grown;
                cap = cap * 2 + 64;
            }
            if (stat(path, &st)) {
                free(path);
                continue;
            }
            (*files)[(*n)++] = (block_file){path, st.st_mtim, (uint64_t)st.st_size};
            total += (uint64_t)st.st_size;
        }
        if (blocks) closedir(blocks);
        free(subdir);
    }
    if (kv) closedir(kv);
    free(top);
    return total;
}

/* Remove the least recently used block files until they fit the budget with room to spare. */
static void evict(kvdisk *d) {
    block_file *files;
    size_t n;
    uint64_t total = scan(d, &files, &n);
    if (total > d->budget) {
        qsort(files, n, sizeof *files, by_mtime);
        const uint64_t target = d->budget / 100 * EVICT_TO_PERCENT;
        for (size_t i = 0; i < n && total > target; i++)
            if (!unlink(files[i].path)) {
                total -= files[i].size;
                d->evictions++;
            }
    }
    for (size_t i = 0; i < n; i++) free(files[i].path);
    free(files);
    d->bytes = total;
}

/* ---- the writer ---- */

static void write_entry(kvdisk *d, const job *j) {
    char *path = entry_path(d, &j->key, j->state ? &j->group : NULL, j->n_ids), *tmp = NULL;
    struct stat st;
    if (!path) goto failed;
    /* Another writer (or replica) was first: the same bytes. Not with a key: the file there may be a forgery that would
     * hold the name for good (a read stops at the first file that fails), so this one replaces it, whole (rename). */
    if (!d->keyed && !stat(path, &st)) {
        free(path);
        return;
    }
    char hex[33], *slash = strrchr(path, '/');
    key_hex(&j->key, hex);
    *slash = '\0'; /* its folder DIR/kv/XY first */
    const int no_dir = make_dir(path);
    *slash = '/';
    if (no_dir || asprintf(&tmp, "%s/tmp/%s.%d.%u", d->dir, hex, (int)getpid(), d->tmp_seq++) < 0) {
        tmp = NULL;
        goto failed;
    }
    const size_t n_ids = sizeof(int32_t) * j->n_ids;
    file_header h = {.key_lo = j->key.lo, .key_hi = j->key.hi, .block_rows = d->block_rows, .n_ids = j->n_ids,
                     .row_bytes = j->bytes, .ids_hash = XXH3_64bits(j->data, n_ids),
                     .rows_hash = XXH3_64bits(j->data + n_ids, j->bytes)};
    memcpy(h.magic, MAGIC, sizeof h.magic);
    h.header_hash = header_hash(&h);
    if (d->keyed) entry_mac(d, &h, j->data, n_ids, j->data + n_ids, h.mac);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) goto failed;
    int bad = write_all(fd, &h, sizeof h) || write_all(fd, j->data, n_ids + j->bytes) || fsync(fd);
    bad |= close(fd);
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        goto failed;
    }
    free(tmp);
    free(path);
    d->writes++;
    /* fetch_add rather than (bytes += n) > budget: clang 14 refuses to compare the result of an _Atomic +=. */
    const uint64_t added = sizeof h + n_ids + j->bytes;
    if (atomic_fetch_add(&d->bytes, added) + added > d->budget) evict(d);
    return;
failed:
    d->errors++;
    free(tmp);
    free(path);
}

static void *writer_main(void *arg) {
    kvdisk *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->head && !d->stop) pthread_cond_wait(&d->wake, &d->mu);
        job *j = d->head;
        if (!j) break;
        if (!(d->head = j->next)) d->tail = NULL;
        pthread_mutex_unlock(&d->mu);
        write_entry(d, j);
        pthread_mutex_lock(&d->mu);
        d->queued_bytes -= sizeof(int32_t) * j->n_ids + j->bytes;
        d->pending--;
        free(j->data);
        free(j);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* Queue an entry (a block, or a state of group) for writing: ids and payload copied. */
static void queue_entry(kvdisk *d, const kvdisk_key *key, const kvdisk_key *group, uint32_t n, const int32_t *ids,
                        const void *payload, size_t bytes) {
    const size_t n_ids = sizeof(int32_t) * n, size = n_ids + bytes;
    pthread_mutex_lock(&d->mu);
    const bool room = d->queued_bytes == 0 || d->queued_bytes + size <= QUEUE_BYTES;
    if (room) d->queued_bytes += size;
    pthread_mutex_unlock(&d->mu);
    job *j = room ? malloc(sizeof *j) : NULL;
    uint8_t *data = j ? malloc(size) : NULL;
    if (!data) {
        free(j);
        if (room) {
            pthread_mutex_lock(&d->mu);
            d->queued_bytes -= size;
            pthread_mutex_unlock(&d->mu);
        }
        d->dropped++;
        return;
    }
    memcpy(data, ids, n_ids);
    memcpy(data + n_ids, payload, bytes);
    *j = (job){.key = *key, .group = group ? *group : (kvdisk_key){0}, .state = group != NULL, .n_ids = n,
               .bytes = bytes, .data = data};
    pthread_mutex_lock(&d->mu);
    if (d->tail)
        d->tail->next = j;
    else
        d->head = j;
    d->tail = j;
    d->pending++;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
}

/* ---- reading ---- */

/* Read the entry at path, named key, holding ids[0, n) and bytes of payload, into payload; false (the file counted and
 * removed when it is there but does not verify) otherwise. The MAC is checked last: what fails before it is damage
 * (corrupt), what fails only there was written without the key (forged). */
static bool read_entry(kvdisk *d, char *path, const kvdisk_key *key, uint32_t n, const int32_t *ids, void *payload,
                       size_t bytes) {
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) {
        free(path);
        d->misses++;
        return false;
    }
    const size_t n_ids = sizeof(int32_t) * n;
    file_header h;
    struct stat st;
    int32_t *stored = malloc(n_ids ? n_ids : 1);
    bool ok = stored && !fstat(fd, &st) && (uint64_t)st.st_size == sizeof h + n_ids + bytes &&
              !read_all(fd, &h, sizeof h) && !memcmp(h.magic, MAGIC, sizeof h.magic) &&
              h.header_hash == header_hash(&h) && h.key_lo == key->lo && h.key_hi == key->hi &&
              h.block_rows == d->block_rows && h.n_ids == n && h.row_bytes == bytes &&
              !read_all(fd, stored, n_ids) && XXH3_64bits(stored, n_ids) == h.ids_hash &&
              !memcmp(stored, ids, n_ids) && !read_all(fd, payload, bytes) && XXH3_64bits(payload, bytes) == h.rows_hash;
    uint8_t mac[KVDISK_MAC_KEY_BYTES];
    if (ok && d->keyed) entry_mac(d, &h, stored, n_ids, payload, mac);
    const bool forged = ok && d->keyed && sodium_memcmp(mac, h.mac, sizeof mac);
    if (ok && !forged) {
        futimens(fd, NULL); /* recently used: the budget evicts the oldest */
        d->hits++;
    } else if (stored) { /* never used; removed so that the recomputed entry is written again */
        unlink(path);
        if (forged)
            d->forged++;
        else
            d->corrupt++;
    }
    close(fd);
    free(stored);
    free(path);
    return ok && !forged;
}

void kvdisk_write(kvdisk *d, const kvdisk_key *key, uint32_t depth, const int32_t *ids, const void *rows) {
    queue_entry(d, key, NULL, d->block_rows * (depth + 1), ids, rows, d->block_bytes);
}

bool kvdisk_read(kvdisk *d, const kvdisk_key *key, uint32_t depth, const int32_t *ids, void *rows) {
    return read_entry(d, entry_path(d, key, NULL, 0), key, d->block_rows * (depth + 1), ids, rows, d->block_bytes);
}

void kvdisk_write_state(kvdisk *d, const kvdisk_key *group, const kvdisk_key *key, uint32_t n_ids, const int32_t *ids,
                        const void *state, size_t bytes) {
    queue_entry(d, key, group, n_ids, ids, state, bytes);
}

bool kvdisk_read_state(kvdisk *d, const kvdisk_key *group, const kvdisk_key *key, uint32_t n_ids, const int32_t *ids,
                       void *state, size_t bytes) {
    return read_entry(d, entry_path(d, key, group, n_ids), key, n_ids, ids, state, bytes);
}

uint32_t kvdisk_state_files(kvdisk *d, const kvdisk_key *group, uint32_t lo, uint32_t hi, kvdisk_state_file *out,
                            uint32_t cap) {
    char ghex[33], *folder;
    key_hex(group, ghex);
    if (asprintf(&folder, "%s/kv/%.2s", d->dir, ghex) < 0) return 0;
    DIR *dir = opendir(folder);
    free(folder);
    uint32_t n = 0;
    for (struct dirent *f; dir && n < cap && (f = readdir(dir));) {
        unsigned at;
        char khex[33];
        unsigned long long hi_k, lo_k;
        if (strncmp(f->d_name, ghex, 32) || f->d_name[32] != '.' ||
            sscanf(f->d_name + 33, "%u.%32[0-9a-f].blk", &at, khex) != 2 || strlen(khex) != 32 || at <= lo || at > hi ||
            sscanf(khex, "%16llx%16llx", &hi_k, &lo_k) != 2)
            continue;
        out[n++] = (kvdisk_state_file){at, {lo_k, hi_k}};
    }
    if (dir) closedir(dir);
    return n;
}

/* ---- model identity ---- */

/* The MAC of an identity cached for the file of stamp, as hex digits. */
static void identity_mac(const kvdisk *d, const uint64_t stamp[5], unsigned long long hi, unsigned long long lo,
                         char hex[2 * KVDISK_MAC_KEY_BYTES + 1]) {
    const uint64_t id[2] = {hi, lo};
    const void *parts[] = {stamp, id};
    const size_t sizes[] = {5 * sizeof *stamp, sizeof id};
    uint8_t mac[KVDISK_MAC_KEY_BYTES];
    keyed_mac(d, "flatkv model identity", parts, sizes, 2, mac);
    sodium_bin2hex(hex, 2 * KVDISK_MAC_KEY_BYTES + 1, mac, sizeof mac);
}

int kvdisk_model_identity(kvdisk *d, const char *path, const void *map, size_t size, kvdisk_key *out, fkv_error *err) {
    const char *dir = d->dir;
    struct stat st;
    if (stat(path, &st)) { /* the file is gone (its mapping stays): the identity is its bytes, not cached */
        XXH128_hash_t h = XXH3_128bits(map, size);
        *out = (kvdisk_key){h.low64, h.high64};
        return 0;
    }
    const uint64_t stamp[5] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
                               (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec};
    char *models = NULL, *cached = NULL, *tmp = NULL;
    int rc = -1;
    if (asprintf(&models, "%s/models", dir) < 0) models = NULL;
    if (!models || make_dir(models) ||
        asprintf(&cached, "%s/%016llx.id", models, (unsigned long long)XXH3_64bits(stamp, sizeof stamp)) < 0) {
        cached = NULL;
        err_io(err, "cannot create '%s/models' for the model identity: %s", dir, strerror(errno));
        goto out;
    }
    unsigned long long hi, lo;
    char stored_mac[2 * KVDISK_MAC_KEY_BYTES + 1] = "", mac[2 * KVDISK_MAC_KEY_BYTES + 1] = "";
    FILE *f = fopen(cached, "r");
    const int fields = f ? fscanf(f, "%16llx%16llx %64[0-9a-f]", &hi, &lo, stored_mac) : 0;
    if (f) fclose(f);
    bool known = fields >= 2;
    if (known && d->keyed) { /* a keyless process's line (no MAC) is computed again too, and kept with one */
        identity_mac(d, stamp, hi, lo, mac);
        known = fields == 3 && strlen(stored_mac) == strlen(mac) && !sodium_memcmp(stored_mac, mac, strlen(mac));
    }
    if (!known) {
        XXH128_hash_t h = XXH3_128bits(map, size);
        hi = h.high64, lo = h.low64;
        if (d->keyed) identity_mac(d, stamp, hi, lo, mac);
        if (asprintf(&tmp, "%s.%d", cached, (int)getpid()) < 0) tmp = NULL;
        FILE *w = tmp ? fopen(tmp, "w") : NULL;
        if (w) { /* a cache: failing to keep it only costs the next start the hashing again */
            bool bad = fprintf(w, "%016llx%016llx %s\n", hi, lo, mac) < 0;
            if (fclose(w) || bad || rename(tmp, cached)) unlink(tmp);
        }
    }
    *out = (kvdisk_key){lo, hi};
    rc = 0;
out:
    free(models);
    free(cached);
    free(tmp);
    return rc;
}

/* ---- opening ---- */

/* Temporary files a killed writer left behind. */
static void remove_stale_tmp(const char *tmpdir) {
    DIR *dir = opendir(tmpdir);
    const time_t now = time(NULL);
    for (struct dirent *f; dir && (f = readdir(dir));) {
        char *path;
        struct stat st;
        if (f->d_name[0] == '.' || asprintf(&path, "%s/%s", tmpdir, f->d_name) < 0) continue;
        if (!stat(path, &st) && now - st.st_mtim.tv_sec > STALE_TMP_SECONDS) unlink(path);
        free(path);
    }
    if (dir) closedir(dir);
}

int kvdisk_load_key(const char *path, uint8_t key[KVDISK_MAC_KEY_BYTES], fkv_error *err) {
    enum { MIN_SECRET = 16, MAX_SECRET = 4096 };
    unsigned char secret[MAX_SECRET + 1];
    struct stat st;
    int rc = -1, fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st)) {
        err_io(err, "--kv-key '%s': %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err_input(err, "--kv-key '%s': not a regular file", path);
        goto out;
    }
    if (st.st_mode & 077) {
        err_input(err, "--kv-key '%s': others than its owner may read or write it (mode %04o); a secret's file must "
                       "not be (chmod 600 it)", path, (unsigned)(st.st_mode & 07777));
        goto out;
    }
    size_t n = 0; /* up to one byte past the bound, to tell a longer file */
    for (ssize_t r; n < sizeof secret && (r = read(fd, secret + n, sizeof secret - n)) != 0;) {
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            err_io(err, "--kv-key '%s': %s", path, strerror(errno));
            goto out;
        }
        n += (size_t)r;
    }
    if (n > MAX_SECRET) {
        err_input(err, "--kv-key '%s': longer than %d bytes; a key file holds one secret", path, MAX_SECRET);
        goto out;
    }
    while (n && (secret[n - 1] == '\n' || secret[n - 1] == '\r' || secret[n - 1] == ' ' || secret[n - 1] == '\t'))
        n--;
    if (n < MIN_SECRET) {
        err_input(err, "--kv-key '%s': %zu bytes of secret, at least %d needed (e.g. head -c 32 /dev/urandom | "
                       "base64 > FILE)", path, n, MIN_SECRET);
        goto out;
    }
    if (sodium_init() < 0) {
        err_io(err, "--kv-key: libsodium could not start");
        goto out;
    }
    static const char domain[] = "flatkv kv-key";
    crypto_generichash_state hs;
    crypto_generichash_init(&hs, NULL, 0, KVDISK_MAC_KEY_BYTES);
    crypto_generichash_update(&hs, (const unsigned char *)domain, sizeof domain);
    crypto_generichash_update(&hs, secret, n);
    crypto_generichash_final(&hs, key, KVDISK_MAC_KEY_BYTES);
    rc = 0;
out:
    sodium_memzero(secret, sizeof secret);
    if (fd >= 0) close(fd);
    return rc;
}

kvdisk *kvdisk_open(const char *dir, uint64_t budget, uint32_t block_rows, size_t block_bytes,
                    const uint8_t mac_key[KVDISK_MAC_KEY_BYTES], fkv_error *err) {
    kvdisk *d = calloc(1, sizeof *d);
    char *kv = NULL, *tmp = NULL;
    if (!d || !(d->dir = strdup(dir)) || asprintf(&kv, "%s/kv", dir) < 0 || asprintf(&tmp, "%s/tmp", dir) < 0) {
        err_nomem(err, "out of memory for the disk tier");
        goto fail;
    }
    if (mac_key && sodium_init() < 0) {
        err_io(err, "--kv-key: libsodium could not start");
        goto fail;
    }
    if (mac_key) memcpy(d->mac_key, mac_key, sizeof d->mac_key);
    d->keyed = mac_key != NULL;
    if (make_dir(dir) || make_dir(kv) || make_dir(tmp)) {
        err_io(err, "--kv-dir '%s': cannot create the directory: %s", dir, strerror(errno));
        goto fail;
    }
    if (access(kv, W_OK | R_OK | X_OK) || access(tmp, W_OK | R_OK | X_OK)) {
        err_io(err, "--kv-dir '%s': not readable and writable: %s", dir, strerror(errno));
        goto fail;
    }
    if (!budget) {
        struct statvfs fs;
        budget = statvfs(dir, &fs) ? 0 : (uint64_t)fs.f_bavail * fs.f_frsize / 4;
    }
    d->budget = budget;
    d->block_rows = block_rows;
    d->block_bytes = block_bytes;
    remove_stale_tmp(tmp);
    evict(d); /* counts what is there, and applies this budget to it */
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->wake, NULL);
    if (pthread_create(&d->writer, NULL, writer_main, d)) {
        pthread_cond_destroy(&d->wake);
        pthread_mutex_destroy(&d->mu);
        err_io(err, "cannot start the disk tier's writer thread");
        goto fail;
    }
    free(kv);
    free(tmp);
    return d;
fail:
    free(kv);
    free(tmp);
    if (d) free(d->dir);
    free(d);
    return NULL;
}

void kvdisk_close(kvdisk *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->stop = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->writer, NULL);
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->mu);
    sodium_memzero(d->mac_key, sizeof d->mac_key);
    free(d->dir);
    free(d);
}

kvdisk_stats kvdisk_get_stats(kvdisk *d) {
    return (kvdisk_stats){.hits = d->hits, .misses = d->misses, .corrupt = d->corrupt, .forged = d->forged,
                          .writes = d->writes,
                          .evictions = d->evictions, .dropped = d->dropped, .errors = d->errors, .bytes = d->bytes,
                          .pending = d->pending};
}
