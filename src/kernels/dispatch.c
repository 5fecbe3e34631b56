/* dispatch.c — CPUID, XGETBV and the AMX permission decide which variants run; the kernel API calls the active one.
 */
#include "dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"

#if defined(__x86_64__) && FKV_SIMD_X86
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amx/amx.h"
#include "avx2/avx2.h"
#include "avx512/avx512.h"
#define HAVE_X86_VARIANTS 1
#else
#define HAVE_X86_VARIANTS 0
#endif

static const char *const names[KERN_COUNT] = {"ref", "avx2", "avx512", "amx"};

const char *kern_name_of(kern_id id) { return id < KERN_COUNT ? names[id] : "?"; }

/* Called only for a variant this machine runs: the variants' own code, their table functions included, is compiled
 * for their instructions. */
static const kern_ops *table_of(kern_id id) {
#if HAVE_X86_VARIANTS
    switch (id) {
    case KERN_AVX2:
        return kern_avx2_table();
    case KERN_AVX512:
        return kern_avx512_table();
    case KERN_AMX:
        return kern_amx_table();
    default:
        break;
    }
#endif
    return id == KERN_REF ? kern_ref_table() : NULL;
}

#if HAVE_X86_VARIANTS
/* One CPUID feature bit: leaf, subleaf, register (0 eax .. 3 edx), bit, and its name for a sentence. */
typedef struct {
    unsigned leaf, sub, reg, bit;
    const char *name;
} cpu_bit;

static bool has_bit(cpu_bit b) {
    unsigned r[4] = {0};
    if (!__get_cpuid_count(b.leaf, b.sub, &r[0], &r[1], &r[2], &r[3])) return false;
    return r[b.reg] >> b.bit & 1;
}

static uint64_t xcr0(void) {
    if (!has_bit((cpu_bit){1, 0, 2, 27, "OSXSAVE"})) return 0;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

/* What each variant needs beyond the one before it: instructions, then the register state the OS must save. */
static const cpu_bit avx2_bits[] = {{1, 0, 2, 12, "FMA"}, {1, 0, 2, 29, "F16C"}, {7, 0, 1, 5, "AVX2"}};
static const cpu_bit avx512_bits[] = {{7, 0, 1, 16, "AVX512F"}, {7, 0, 1, 17, "AVX512DQ"},
                                      {7, 0, 1, 30, "AVX512BW"}, {7, 0, 1, 31, "AVX512VL"},
                                      {7, 0, 2, 11, "AVX512_VNNI"}};
static const cpu_bit amx_bits[] = {{7, 0, 3, 24, "AMX-TILE"}, {7, 0, 3, 25, "AMX-INT8"}};
#define XCR0_AVX 0x6ull       /* SSE and AVX state */
#define XCR0_AVX512 0xe0ull   /* opmask, ZMM_Hi256, Hi16_ZMM */
#define XCR0_AMX 0x60000ull   /* XTILECFG, XTILEDATA */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static bool has_bits(const cpu_bit *bits, size_t n, char *why, size_t cap) {
    for (size_t i = 0; i < n; i++)
        if (!has_bit(bits[i])) {
            snprintf(why, cap, "this CPU lacks %s", bits[i].name);
            return false;
        }
    return true;
}

static bool os_saves(uint64_t mask, const char *what, char *why, size_t cap) {
    if ((xcr0() & mask) == mask) return true;
    snprintf(why, cap, "the OS does not enable the %s register state (XCR0)", what);
    return false;
}

/* The kernel's grant of tile data to this process: asked once (it is per process and cannot be revoked). */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static bool amx_granted;
static void ask_amx(void) { amx_granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0; }
#endif

bool kern_available(kern_id id, char *why, size_t cap) {
    char scratch[160];
    if (!why) why = scratch, cap = sizeof scratch;
    if (id >= KERN_COUNT) {
        snprintf(why, cap, "no such kernel variant");
        return false;
    }
    if (id == KERN_REF) return true;
#if !HAVE_X86_VARIANTS
    snprintf(why, cap, "this build holds only the portable reference kernels");
    return false;
#else
    if (id >= KERN_AVX2 && !(has_bits(avx2_bits, sizeof avx2_bits / sizeof *avx2_bits, why, cap) &&
                             os_saves(XCR0_AVX, "AVX", why, cap)))
        return false;
    if (id >= KERN_AVX512 && !(has_bits(avx512_bits, sizeof avx512_bits / sizeof *avx512_bits, why, cap) &&
                               os_saves(XCR0_AVX512, "AVX-512", why, cap)))
        return false;
    if (id >= KERN_AMX) {
        if (!(has_bits(amx_bits, sizeof amx_bits / sizeof *amx_bits, why, cap) && os_saves(XCR0_AMX, "AMX tile", why, cap)))
            return false;
        pthread_once(&amx_once, ask_amx);
        if (!amx_granted) {
            snprintf(why, cap, "the kernel refused this process the AMX tile data (arch_prctl)");
            return false;
        }
    }
    return true;
#endif
}

kern_id kern_best(void) {
    for (int id = KERN_COUNT - 1; id > KERN_REF; id--)
        if (kern_available((kern_id)id, NULL, 0)) return (kern_id)id;
    return KERN_REF;
}

static const kern_ops *active;

int kern_select(const char *name, char *why, size_t cap) {
    char scratch[160];
    if (!why) why = scratch, cap = sizeof scratch;
    if (!name || !*name) name = getenv("FLATKV_KERNELS");
    kern_id id = KERN_COUNT;
    if (!name || !*name) {
        id = kern_best();
    } else {
        for (int i = 0; i < KERN_COUNT; i++)
            if (!strcmp(name, names[i])) id = (kern_id)i;
        if (id == KERN_COUNT) {
            snprintf(why, cap, "unknown kernels '%s' (ref, avx2, avx512 or amx)", name);
            return -1;
        }
        char reason[160];
        if (!kern_available(id, reason, sizeof reason)) {
            snprintf(why, cap, "kernels '%s' cannot run here: %s", name, reason);
            return -1;
        }
    }
    __atomic_store_n(&active, table_of(id), __ATOMIC_RELEASE);
    return 0;
}

int kern_ensure(char *why, size_t cap) {
    if (__atomic_load_n(&active, __ATOMIC_ACQUIRE)) return 0;
    return kern_select(NULL, why, cap);
}

const kern_ops *kern_active(void) {
    const kern_ops *t = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
    if (t) return t;
    if (kern_ensure(NULL, 0) != 0) kern_select(names[kern_best()], NULL, 0); /* a bad FLATKV_KERNELS: the best */
    return __atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

/* Zen 5 (one thread, 768-wide packed Q8_0, panels against direct tiles, us): 3 rows 845 / 1003 from DRAM (32000
 * outputs), 39 / 57 from cache (2048 outputs); 2 rows 728 / 976 and 46 / 35; a forward of 1 + 8 rows (bench/spec)
 * x2.4 -> x1.9 a plain step. Zen 4 measured the default: there panels made 2 rows cost x1.41 a plain step, and 5 rows
 * x1.37 against x1.14-1.23. */
static const kern_tuning tunings[] = {
    {"default", "", 0, 16},
    {"zen5", "AuthenticAMD", 0x1a, 3},
};
#define N_TUNINGS (sizeof tunings / sizeof *tunings)

const kern_tuning *kern_tunings(size_t *n) {
    *n = N_TUNINGS;
    return tunings;
}

static const kern_tuning *tuning_of_cpu(void) {
#if HAVE_X86_VARIANTS
    unsigned a, b, c, d;
    char vendor[13] = {0};
    if (!__get_cpuid(0, &a, &b, &c, &d)) return &tunings[0];
    memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
    if (!__get_cpuid(1, &a, &b, &c, &d)) return &tunings[0];
    const unsigned base = a >> 8 & 0xf, family = base == 0xf ? base + (a >> 20 & 0xff) : base;
    for (size_t i = 1; i < N_TUNINGS; i++)
        if (!strcmp(vendor, tunings[i].vendor) && family == tunings[i].family) return &tunings[i];
#endif
    return &tunings[0];
}

static const kern_tuning *tuning;
static pthread_once_t tuning_once = PTHREAD_ONCE_INIT;

static void choose_tuning(void) {
    const char *name = getenv("FLATKV_TUNING");
    const kern_tuning *t = tuning_of_cpu();
    if (name && *name) {
        t = &tunings[0];
        for (size_t i = 0; i < N_TUNINGS; i++)
            if (!strcmp(name, tunings[i].name)) t = &tunings[i];
    }
    __atomic_store_n(&tuning, t, __ATOMIC_RELEASE);
}

const kern_tuning *kern_tuning_active(void) {
    pthread_once(&tuning_once, choose_tuning);
    return __atomic_load_n(&tuning, __ATOMIC_ACQUIRE);
}

void kern_tune(const kern_tuning *t) {
    pthread_once(&tuning_once, choose_tuning);
    __atomic_store_n(&tuning, t, __ATOMIC_RELEASE);
}
