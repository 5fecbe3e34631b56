#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>

int err_set(fkv_error *err, fkv_status code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *fkv_status_name(fkv_status code) {
    static const char *const names[] = {
        [FKV_OK] = "ok",
        [FKV_E_INPUT] = "input",
        [FKV_E_UNSUPPORTED] = "unsupported",
        [FKV_E_NOMEM] = "out_of_memory",
        [FKV_E_KV_FULL] = "kv_full",
        [FKV_E_IO] = "io",
        [FKV_E_BUSY] = "busy",
        [FKV_E_TIMEOUT] = "timeout",
        [FKV_E_CANCELLED] = "cancelled",
    };
    return (unsigned)code < sizeof names / sizeof *names ? names[code] : "unknown";
}
