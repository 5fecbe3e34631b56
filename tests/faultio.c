/* faultio.c — the I/O shim of faultio.h. */
#include "faultio.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

ssize_t __real_write(int fd, const void *buf, size_t n);
int __real_fsync(int fd);
int __real_rename(const char *from, const char *to);

static _Atomic int armed = FIO_OFF;
static _Atomic uint32_t every_n = 1;
static _Atomic uint64_t calls, injected;

void fio_arm(fio_fault fault, uint32_t every) {
    calls = 0;
    injected = 0;
    every_n = every ? every : 1;
    armed = fault;
}

void fio_disarm(void) { armed = FIO_OFF; }
uint64_t fio_injected(void) { return injected; }

const char *fio_name(fio_fault f) {
    static const char *const names[] = {"none", "write ENOSPC", "write EIO", "short writes", "short write then ENOSPC",
                                        "fsync EIO", "rename EIO", "rename ENOSPC"};
    return names[f];
}

/* This call of the armed kind is one to fault. */
static int hit(void) { return ++calls % every_n == 0; }

ssize_t __wrap_write(int fd, const void *buf, size_t n) {
    const int f = armed;
    if ((f == FIO_WRITE_ENOSPC || f == FIO_WRITE_EIO) && hit()) {
        injected++;
        errno = f == FIO_WRITE_EIO ? EIO : ENOSPC;
        return -1;
    }
    if (f == FIO_WRITE_SHORT && n > 1 && hit()) {
        injected++;
        return __real_write(fd, buf, n / 2);
    }
    if (f == FIO_WRITE_SHORT_THEN_ENOSPC && n > 0) {
        /* odd calls short, even calls fail: the call that would finish a short write finds the disk full */
        if (++calls % 2) {
            injected++;
            return __real_write(fd, buf, n > 1 ? n / 2 : n);
        }
        errno = ENOSPC;
        return -1;
    }
    return __real_write(fd, buf, n);
}

int __wrap_fsync(int fd) {
    if (armed == FIO_FSYNC_EIO && hit()) {
        injected++;
        errno = EIO;
        return -1;
    }
    return __real_fsync(fd);
}

int __wrap_rename(const char *from, const char *to) {
    const int f = armed;
    if ((f == FIO_RENAME_EIO || f == FIO_RENAME_ENOSPC) && hit()) {
        injected++;
        errno = f == FIO_RENAME_EIO ? EIO : ENOSPC;
        return -1;
    }
    return __real_rename(from, to);
}
