/* faultalloc.h — a test-only allocator shim: counts flatkv's allocations, fails the k-th on purpose, and refuses
 * any single request larger than the machine could mean.
 *
 * WHY: SQLite's way — a failure that a test makes happen is a failure whose handling is tested. Only test binaries
 * link it (CMake: FKV_FAULT_TESTS, `-Wl,--wrap=malloc,...`): the library and the command are built and linked as
 * always and pay nothing. The wrap replaces calls made from the objects linked into the test — flatkv's library,
 * the server modules built into it, the test itself — and not calls inside shared libraries (libc, jansson, libgomp,
 * pcre2): those are not flatkv's code. jansson's own allocations go through json_set_alloc_funcs(fa_malloc, free),
 * which the shim installs when first armed.
 *
 * Modes: FA_ONCE fails only the k-th allocation (the code must recover from one failure and carry on correctly);
 * FA_FROM fails the k-th and every later one (the error path itself must not need memory). Counting is only while
 * armed, so a test's own set-up and checks between phases are not counted.
 *
 * The size cap holds whether armed or not: a single request above fa_cap_bytes() (the smaller of 64 GiB and
 * physical RAM) aborts the test loudly with its size and a backtrace-friendly message — an unchecked size from a
 * file or a request reached an allocator.
 */
#ifndef FKV_FAULTALLOC_H
#define FKV_FAULTALLOC_H

#include <stddef.h>
#include <stdint.h>

typedef enum { FA_OFF, FA_ONCE, FA_FROM } fa_mode;

/* Start counting from zero; fail allocation number k (1-based) under mode (k 0: never fail, just count). */
void fa_arm(fa_mode mode, uint64_t k);
/* Stop counting and failing; returns the allocations counted since fa_arm. */
uint64_t fa_disarm(void);
/* Allocations that were made to fail since fa_arm. */
uint64_t fa_failed(void);
size_t fa_cap_bytes(void);
/* Requests the size cap refused (the shim aborts on the first unless FKV_FA_CAP_SOFT is set; then it counts them). */
uint64_t fa_capped(void);

#endif
