/* holdback.h — a generated text as it grows token by token, and how much of it a client may be sent.
 *
 * WHY: a stream must never send bytes it would have to take back. Two things can still change the end of the
 * text: a stop string that has begun (the text is cut where it begins), and a character whose bytes are still
 * arriving (or that never completes: its bytes become U+FFFD). What neither can touch is stable; how the stable text
 * splits into reasoning, content and calls is reply.h's.
 *
 * INVARIANT: text[0, stable) is valid UTF-8 and never changes once stable has passed it. ends[0, n_tokens) are the
 * byte offsets where each appended token's text ends, nondecreasing; where bytes were replaced, a token ends where
 * its bytes went.
 *
 * Thread-safety: none; the scheduler keeps one per job under the job's lock.
 */
#ifndef FKV_HOLDBACK_H
#define FKV_HOLDBACK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct holdback {
    char *text; /* NUL-terminated; NULL until the first append */
    size_t len, cap;
    size_t stable;
    size_t *ends;
    size_t n_tokens, cap_tokens;
    const char *stop_hit; /* the stop string (one of the rules') that ended the text, or NULL */
} holdback;

/* What holds text back: stop strings (never part of the output). */
typedef struct holdback_rules {
    char *const *stop;
    size_t n_stop;
} holdback_rules;

/* Append one token's piece. 0: go on; 1: a stop string completed — the text ends where it began, the tokens that
 * made it are dropped, stop_hit names it; -1: out of memory (nothing appended). stable moves as far as it can. */
int holdback_append(holdback *h, const holdback_rules *r, const char *piece, size_t len);
/* The text is complete: all of it becomes stable, invalid bytes replaced by U+FFFD. 1 when those U+FFFDs completed
 * a stop string (cut as holdback_append cuts), else 0. */
int holdback_finish(holdback *h, const holdback_rules *r);
void holdback_free(holdback *h);

#endif
