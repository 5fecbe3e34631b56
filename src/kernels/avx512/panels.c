/* avx512/panels.c — the AVX-512 variant's panels for many rows: avx2/panels.c compiled with this folder's flags
 * (MM_VNNI there), its functions named avx512_* (avx2/matmul.c: one source for both variants). */
#include "avx512.h"

#define VARIANT(f) avx512_##f
#include "../avx2/panels.c"
