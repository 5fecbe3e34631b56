/* faultio.h — a test-only shim over write(), fsync() and rename(): makes the disk tier's writes fail on purpose.
 *
 * WHY: a full or failing disk must cost the cache its files, never its answers (docs/design.md §5). Linked into
 * test_disk only, with -Wl,--wrap=write,--wrap=fsync,--wrap=rename: calls from flatkv's objects (the disk tier's
 * writer thread) go through it; libc's own (stdio, cmocka's output) do not. The library pays nothing.
 *
 * Faults: every armed call of the kind fails (every 1), or every n-th (some blocks written, some not). A short write
 * returns half of what was asked (at least 1 byte): alone it is a write the caller must finish; "then ENOSPC" fails
 * the call that would finish it.
 */
#ifndef FKV_FAULTIO_H
#define FKV_FAULTIO_H

#include <stdint.h>

typedef enum {
    FIO_OFF,
    FIO_WRITE_ENOSPC,
    FIO_WRITE_EIO,
    FIO_WRITE_SHORT,             /* every write short: write_all must loop; the files are whole */
    FIO_WRITE_SHORT_THEN_ENOSPC, /* a short write, then the disk is full */
    FIO_FSYNC_EIO,
    FIO_RENAME_EIO,
    FIO_RENAME_ENOSPC,
} fio_fault;

void fio_arm(fio_fault fault, uint32_t every);
void fio_disarm(void);
/* Calls the shim made fail (or made short) since fio_arm. */
uint64_t fio_injected(void);
const char *fio_name(fio_fault fault);

#endif
