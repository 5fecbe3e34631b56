/* utf8.h — keeping generated text valid UTF-8 on its way into JSON.
 *
 * WHY: tokens are byte pieces; a multi-byte character can be split across two tokens, and a model can emit
 * bytes that are not UTF-8 at all.
 *
 * INVARIANT: JSON strings must be valid UTF-8, so streamed chunks end only at character boundaries and final texts
 * replace invalid bytes with U+FFFD.
 */
#ifndef FKV_UTF8_H
#define FKV_UTF8_H

#include <stddef.h>

/* The longest prefix of s[0..len) that does not end inside an incomplete (but so far valid) sequence. */
size_t utf8_complete_prefix(const char *s, size_t len);
/* s[0..len) with every invalid sequence replaced by U+FFFD; malloc'd, NUL-terminated, length in *out_len. */
char *utf8_sanitize(const char *s, size_t len, size_t *out_len);
/* Where byte `at` of s[0..len) lands in utf8_sanitize(s, len): the output offset of the character (or invalid byte)
 * that holds it, so an offset inside a multi-byte character maps to where that character begins; at == len maps to
 * the output's length (what utf8_sanitize's length would be). Allocates nothing. */
size_t utf8_sanitized_offset(const char *s, size_t len, size_t at);

#endif
