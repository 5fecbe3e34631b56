/* amx/table.c — placeholder while the AMX kernels are written: this build does not hold the variant. */
#include "table.h"

const kern_ops *kern_amx_table(void) { return NULL; }
