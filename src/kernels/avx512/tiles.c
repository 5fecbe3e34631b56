/* avx512/tiles.c — the AVX-512 variant's products of natural rows for few rows: avx2/tiles.c compiled with this
 * folder's flags (VNNI's vpdpbusd for the block sums), its functions named avx512_* (avx2/matmul.c: one source). */
#include "avx512.h"

#define VARIANT(f) avx512_##f
#include "../avx2/tiles.c"
