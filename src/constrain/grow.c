/* grow.c — the growing array (contract in grow.h). */
#include "constrain/grow.h"

#include <stdlib.h>

int grow(void *p, size_t *cap, size_t need, size_t size, size_t max) {
    if (need <= *cap) return 0;
    if (need > max) return -1;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    if (n > max) n = max;
    void *q = realloc(*(void **)p, n * size);
    if (!q) return -1;
    *(void **)p = q;
    *cap = n;
    return 0;
}
