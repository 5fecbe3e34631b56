/* avx512/dot.c — the AVX-512 variant's dot of one row: avx2/dot.c compiled with this folder's flags, its functions
 * named avx512_* (avx2/matmul.c: one source for both variants). */
#include "avx512.h"

#define VARIANT(f) avx512_##f
#include "../avx2/dot.c"
