/* faultalloc.c — the allocator shim of faultalloc.h (linked with -Wl,--wrap=malloc,calloc,realloc,strdup,strndup,
 * aligned_alloc,posix_memalign,mmap; of mmap, anonymous mappings only: memory, where a file's mapping is not). */
#include "faultalloc.h"

#include <errno.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off);
void *__wrap_malloc(size_t n);

static _Atomic int mode = FA_OFF;
static _Atomic uint64_t count, fail_at, failed, capped;

void fa_arm(fa_mode m, uint64_t k) {
    static int json_routed;
    if (!json_routed) { /* jansson's allocations count as flatkv's: they are made for it */
        json_set_alloc_funcs(__wrap_malloc, free);
        json_routed = 1;
    }
    count = 0;
    failed = 0;
    fail_at = k;
    mode = m;
}

uint64_t fa_disarm(void) {
    mode = FA_OFF;
    return count;
}

uint64_t fa_failed(void) { return failed; }
uint64_t fa_capped(void) { return capped; }

size_t fa_cap_bytes(void) {
    static size_t cap;
    if (!cap) {
        size_t ram = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
        cap = (size_t)64 << 30;
        if (ram && ram < cap) cap = ram;
    }
    return cap;
}

/* false: this request must fail (over the cap, or the armed k-th). */
static int admit(size_t n) {
    if (n > fa_cap_bytes()) {
        capped++;
        if (!getenv("FKV_FA_CAP_SOFT")) {
            fprintf(stderr, "faultalloc: a single allocation of %zu bytes (over the cap of %zu): an unchecked size "
                            "reached the allocator\n", n, fa_cap_bytes());
            abort();
        }
        return 0;
    }
    int m = mode;
    if (m == FA_OFF) return 1;
    uint64_t i = ++count, k = fail_at;
    if (k && (i == k || (m == FA_FROM && i > k))) {
        failed++;
        return 0;
    }
    return 1;
}

void *__wrap_malloc(size_t n) {
    if (!admit(n)) return errno = ENOMEM, NULL;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) return __real_calloc(n, size); /* libc refuses it itself */
    if (!admit(bytes)) return errno = ENOMEM, NULL;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n) {
    if (!admit(n)) return errno = ENOMEM, NULL;
    return __real_realloc(p, n);
}

char *__wrap_strdup(const char *s) {
    if (!admit(strlen(s) + 1)) return errno = ENOMEM, NULL;
    return __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n) {
    if (!admit(strnlen(s, n) + 1)) return errno = ENOMEM, NULL;
    return __real_strndup(s, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n) {
    if (!admit(n)) return errno = ENOMEM, NULL;
    return __real_aligned_alloc(align, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n) {
    if (!admit(n)) return ENOMEM;
    return __real_posix_memalign(p, align, n);
}

void *__wrap_mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off) {
    if ((flags & MAP_ANONYMOUS) && !admit(n)) return errno = ENOMEM, MAP_FAILED;
    return __real_mmap(addr, n, prot, flags, fd, off);
}
