/* sbuf.h — growing text for the JSON Schema converter: the GBNF it writes, and the literals written into it.
 *
 * WHY: a schema's grammar is written piece by piece from many places, most pieces small; a buffer that remembers
 * running out of memory (oom) lets every writer append without checking, and the converter checks once per rule.
 *
 * INVARIANT: p is NUL-terminated whenever it is not NULL; once oom is set, nothing more is appended.
 *
 * Thread-safety: a buffer belongs to its writer.
 */
#ifndef FKV_SBUF_H
#define FKV_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

void sb_add(sbuf *b, const char *s, size_t n);
void sb_puts(sbuf *b, const char *s);
__attribute__((format(printf, 2, 3))) void sb_printf(sbuf *b, const char *fmt, ...);
/* A JSON text as a GBNF literal: quotes, backslashes and control bytes escaped, UTF-8 kept. */
void sb_gbnf_literal(sbuf *b, const char *s, size_t n);
/* b += item{min,max} (max INT32_MAX: no bound). */
void sb_repeat(sbuf *b, const char *item, int64_t min, int64_t max);
/* A string's JSON encoding (what a JSON writer prints): quotes, backslashes and control characters escaped. */
void sb_json_string(sbuf *b, const char *s, size_t n);
/* A JSON value in its compact text (an enum or const value, which the output must spell exactly). */
void sb_json_value(sbuf *b, const json_t *v);

#endif
