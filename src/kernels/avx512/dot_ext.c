/* avx512/dot_ext.c — the AVX-512 variant's block dots of the later types: avx2/dot_ext.c compiled with this folder's
 * flags (VNNI's vpdpbusd for each block's integer sum), its function named avx512_dot_ext. */
#include "avx512.h"

#define VARIANT(f) avx512_##f
#include "../avx2/dot_ext.c"
