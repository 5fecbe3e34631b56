/* dispatch.h — which kernel variant this process runs, chosen once from what the CPU and the OS allow.
 *
 * WHY: one binary carries every variant (table.h); the best one the machine can run is chosen at start-up, or the
 * one a user names (FLATKV_KERNELS, --kernels). Each variant's bits are the reference's, so the choice changes speed
 * only. A variant is available when CPUID reports its instructions, XGETBV shows the OS saves their registers
 * (AVX state; for AVX-512 the opmask and upper ZMM state; for AMX the tile state) and, for AMX, the kernel granted
 * this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM) — asked here, before any thread touches a tile.
 *
 * Thread-safety: kern_select before any kernel runs (the CLI and tests do; otherwise the first kernel call picks
 * the default from FLATKV_KERNELS or the best, once); kern_active from any thread afterwards.
 */
#ifndef FKV_KERNELS_DISPATCH_H
#define FKV_KERNELS_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table.h"

/* The variant's name ("ref", "avx2", "avx512", "amx"). */
const char *kern_name_of(kern_id id);

/* True when this build holds variant id and this machine can run it; else false with why (a sentence) filled. */
bool kern_available(kern_id id, char *why, size_t why_cap);

/* The best variant this machine runs. */
kern_id kern_best(void);

/* Make a variant the active one: name NULL or "" means FLATKV_KERNELS when set, else the best. 0, or -1 with why
 * filled when the name is unknown or this machine cannot run it. */
int kern_select(const char *name, char *why, size_t why_cap);

/* Select the default (as kern_select(NULL)) unless a variant is already active: where a library entry point (model
 * load) surfaces a bad FLATKV_KERNELS as an error. */
int kern_ensure(char *why, size_t why_cap);

/* The active table (chosen by the first kern_select, or on first use). */
const kern_ops *kern_active(void);

/* Speed choices that depend on the CPU model rather than on its instructions. No bit depends on them: every path a row
 * selects gives the reference's bytes, and test_quant runs every row on every machine. A row per CPU measured to want
 * other choices than the default (docs/performance.md has the measurements), found by CPUID's vendor and family; the
 * environment's FLATKV_TUNING names a row instead (to compare rows on one machine). */
typedef struct {
    const char *name;           /* "default", or the CPUs the row is for ("zen5") */
    const char *vendor;         /* CPUID's vendor string and family (base + extended) the row is for */
    unsigned family;
    uint32_t q8_panel_min_rows; /* VNNI: activation rows from which panels read packed Q8_0 rows in place */
} kern_tuning;

/* Every row, the default first; *n set to their count. */
const kern_tuning *kern_tunings(size_t *n);

/* The row in use: the one kern_tune set, else FLATKV_TUNING's (the default for an unknown name), else this CPU's. */
const kern_tuning *kern_tuning_active(void);

/* Make t (a row of kern_tunings) the one in use, while no kernel runs: tests that run every row. */
void kern_tune(const kern_tuning *t);

#endif
