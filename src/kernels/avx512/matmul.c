/* avx512/matmul.c — the AVX-512 variant's matrix products: avx2/matmul.c compiled with this folder's flags, which
 * select (MM_VNNI there) VNNI's vpdpbusd for its integer sums and 512-bit panel tiles, its functions named avx512_*.
 * One source for both variants, so their loop nests cannot drift apart; so are its paths' files (tiles.c, packed.c,
 * panels.c, panel_tiles.c, dot.c here, each avx2's file of that name compiled again). */
#include "avx512.h"

#define VARIANT(f) avx512_##f
#include "../avx2/matmul.c"
