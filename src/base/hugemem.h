/* hugemem.h — large buffers (weights, K/V, scratch) in 2 MB pages where the kernel grants them.
 *
 * WHY: a buffer from malloc or calloc is faulted in 4 KB at a time on first touch, and a new context touches
 * megabytes at once: the first 512-token prefill of a fresh context (110M Q4_0, 2 threads, AMD Zen 5) ran at
 * 1806-1986 tok/s against 2300-2440 for the same call repeated, the difference being page faults on its K/V and
 * scratch. In 2 MB pages (transparent huge pages, asked for with madvise, which Debian's default "madvise" mode
 * honours) a fault maps 512 times as much, and attention's walk over K/V rows takes fewer TLB misses.
 *
 * INVARIANT: memory from hugemem_alloc reads as zeros until written and is aligned to HUGEMEM_PAGE; pages are
 * faulted in on first touch (a budget-sized K/V pool costs resident memory only as it fills), except where the
 * caller asks to fault them in now (hugemem_touch). Without huge pages (the mode "never", another kernel) the same
 * calls serve 4 KB pages.
 *
 * Thread-safety: plain functions; a buffer belongs to its caller.
 */
#ifndef FKV_HUGEMEM_H
#define FKV_HUGEMEM_H

#include <stddef.h>

#define HUGEMEM_PAGE ((size_t)2 << 20)

/* bytes of zeroed memory, aligned to HUGEMEM_PAGE; NULL when bytes is 0 or the system refuses. */
void *hugemem_alloc(size_t bytes);

/* Fault in every page of [p, p + bytes) now (writing zeros over what reads as zeros), so that no later call pays. */
void hugemem_touch(void *p, size_t bytes);

/* Bytes this process can still have resident without pushing other memory out: the system's MemAvailable (free
 * memory and the page cache it can drop), capped by the room left under its cgroup's memory.max where one is set;
 * SIZE_MAX when neither is known. A snapshot, for choosing what to keep in memory. */
size_t hugemem_available(void);

/* Give back a buffer of hugemem_alloc, with the size it was asked for (p NULL: nothing). */
void hugemem_free(void *p, size_t bytes);

#endif
