/* avx512/matmul.c — the AVX-512 variant's dot products and matrix products: avx2/matmul.c compiled with this folder's
 * flags, which select (MM_VNNI there) VNNI's vpdpbusd for its integer sums and 512-bit panel tiles, its functions
 * named avx512_*. One source for both variants, so their loop nests cannot drift apart. */
#include "avx512.h"

#define VARIANT(f) avx512_##f
#include "../avx2/matmul.c"
