/* avx512/table.c — placeholder while the AVX-512 kernels are written: this build does not hold the variant. */
#include "table.h"

const kern_ops *kern_avx512_table(void) { return NULL; }
