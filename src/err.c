#include "err.h"

#include <stdarg.h>
#include <stdio.h>

int err_set(fkv_error *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}
