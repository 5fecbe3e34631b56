#include "base/hugemem.h"

#include <stdint.h>
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
