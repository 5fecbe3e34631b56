/* grow.h — room for more items in a growing array, never past a bound.
 *
 * WHY: the parser, the lowering and a state's caches all grow arrays whose final size is not known in advance, and
 * each has a bound (GRAMMAR_MAX_ELEMS, the cache capacities) past which it must refuse rather than allocate: one
 * function doubles, caps at the bound and reports failure for all of them.
 *
 * INVARIANT: on success *cap >= need and the first *cap items are allocated, the old ones kept; on failure (need above
 * max, or no memory) *p and *cap are as they were.
 *
 * Thread-safety: a plain function; the array belongs to the caller.
 */
#ifndef FKV_GROW_H
#define FKV_GROW_H

#include <stddef.h>

/* Makes room for `need` items of `size` bytes in *p (capacity *cap, doubled as needed, never past `max`): 0, or -1. */
int grow(void *p, size_t *cap, size_t need, size_t size, size_t max);

#endif
