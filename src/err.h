/* err.h — how library code reports failure.
 *
 * WHY: library code never prints or exits (STYLE.md); it fills an fkv_error with one sentence that names
 * the file, key, tensor or position at fault, and returns a failure status. The CLI and the server decide
 * what a failure becomes (an exit code, an HTTP status).
 *
 * Contract: err_set formats into err->msg (truncating, always NUL-terminated) and returns -1, so a caller
 * can write `return err_set(err, "...")`. err may be NULL: the message is then dropped.
 */
#ifndef FKV_ERR_H
#define FKV_ERR_H

#include "flatkv.h"

int err_set(fkv_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
