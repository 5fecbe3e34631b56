/* err.h — how library code reports failure.
 *
 * WHY: library code never prints or exits (docs/style.md); it fills an fkv_error with a status code — the kind of
 * failure, which callers decide on — and one sentence that names the file, key, tensor or position at fault, and
 * returns a failure status. The CLI and the server map codes to exit codes and HTTP statuses, each in one table;
 * nothing decides on the sentence's text.
 *
 * Contract: err_set formats into err->msg (truncating, always NUL-terminated), sets err->code and returns -1, so a
 * caller can write `return err_input(err, "...")`. err may be NULL: the failure is then dropped. A caller that
 * passes on a callee's failure leaves err as the callee filled it.
 */
#ifndef FKV_ERR_H
#define FKV_ERR_H

#include "flatkv.h"

int err_set(fkv_error *err, fkv_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One per kind, so a call site reads as what went wrong. */
#define err_input(err, ...) err_set(err, FKV_E_INPUT, __VA_ARGS__)
#define err_unsupported(err, ...) err_set(err, FKV_E_UNSUPPORTED, __VA_ARGS__)
#define err_nomem(err, ...) err_set(err, FKV_E_NOMEM, __VA_ARGS__)
#define err_kv_full(err, ...) err_set(err, FKV_E_KV_FULL, __VA_ARGS__)
#define err_io(err, ...) err_set(err, FKV_E_IO, __VA_ARGS__)

#endif
