#include "base/hugemem.h"

#include <stdbool.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* Mapped in whole huge pages, so that the last one is not cut short (a partial one cannot be huge). */
static size_t mapped_bytes(size_t bytes) { return (bytes + HUGEMEM_PAGE - 1) / HUGEMEM_PAGE * HUGEMEM_PAGE; }

void *hugemem_alloc(size_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX - 2 * HUGEMEM_PAGE) return NULL;
    const size_t size = mapped_bytes(bytes);
    /* one huge page more than needed, then the unaligned head and the tail beyond it unmapped again */
    uint8_t *raw = mmap(NULL, size + HUGEMEM_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGEMEM_PAGE - 1) & ~(uintptr_t)(HUGEMEM_PAGE - 1));
    const size_t head = (size_t)(p - raw); /* < HUGEMEM_PAGE, so the tail is never empty */
    if (head) munmap(raw, head);
    munmap(p + size, HUGEMEM_PAGE - head);
    madvise(p, size, MADV_HUGEPAGE); /* a hint: where it is refused, 4 KB pages serve */
    return p;
}

void hugemem_touch(void *p, size_t bytes) {
    volatile uint8_t *b = p; /* every store kept: each faults its page in */
    for (size_t at = 0; at < bytes; at += 4096) b[at] = 0;
}

void hugemem_free(void *p, size_t bytes) {
    if (p) munmap(p, mapped_bytes(bytes));
}

/* The first number in the file at path (a "max" or an unreadable file: false). */
static bool read_number(const char *path, unsigned long long *v) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    const bool ok = fscanf(f, "%llu", v) == 1;
    fclose(f);
    return ok;
}

size_t hugemem_available(void) {
    unsigned long long avail = SIZE_MAX, kb, max, cur;
    char line[4096];
    FILE *f = fopen("/proc/meminfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = kb > SIZE_MAX / 1024 ? SIZE_MAX : kb * 1024;
    if (f) fclose(f);
    /* cgroup v2: "0::/path" names the group under /sys/fs/cgroup */
    char group[3000] = "", path[3100];
    if ((f = fopen("/proc/self/cgroup", "r"))) {
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "0::", 3) && sscanf(line + 3, "%2999[^\n]", group) == 1) break;
        fclose(f);
    }
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", group);
    if (group[0] && read_number(path, &max)) {
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", group);
        const unsigned long long room = read_number(path, &cur) && cur < max ? max - cur : 0;
        if (room < avail) avail = room;
    }
    return (size_t)avail;
}
