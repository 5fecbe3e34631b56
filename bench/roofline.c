/* roofline.c — this machine's physical limits for inference, measured with T threads (default 2).
 *
 * WHY: a tok/s figure says little until it is set against what the hardware allows: decode reads every
 * weight once per token (memory bound), prefill reuses each weight across many rows (compute bound).
 * bench/compare divides the bytes and operations per token of each case by these numbers.
 *
 * Measures, each the best of several passes:
 *   read_gb_s   streaming read bandwidth: T threads summing disjoint parts of a 1 GiB buffer (≫ any cache)
 *               with 256-bit loads; 1 GB = 1e9 bytes.
 *   fma_gflops  peak f32 FMA throughput: T threads each running 12 independent chains of 256-bit FMAs
 *               (enough to cover FMA latency × ports); 1 FMA lane = 2 FLOPs.
 *   int8_gops   peak int8 multiply-add throughput of the AVX2 sequence quantized dot products use
 *               (vpmaddubsw u8×s8 → s16 pairs, vpmaddwd → s32, vpaddd); 1 multiply-add = 2 ops.
 *   vnni_gops   the same for AVX-512 VNNI: 12 chains of vpdpbusd on zmm (64 u8×s8 multiply-adds into 16 s32).
 *   amx_gops    the same for AMX: tdpbssd on full tiles (16×64 s8 by 64×16 s8 into 16×16 s32, 16384
 *               multiply-adds), four accumulator tiles from two A and two B tiles (2×2 blocking covers its
 *               latency).
 * Each probe is compiled for its own instructions (target attributes, no -march) and runs only where the CPU
 * has them and the OS saves their registers (__builtin_cpu_supports: CPUID and XGETBV), and for AMX where
 * the kernel grants the tile data: the binary builds on any x86-64 and says why it skips a probe (the first
 * three need AVX2 and FMA: without them it exits, saying so). These are the hardware's limits, so the checks
 * are its own, not those of the variants a flatkv build holds.
 * Prints one JSON line; vnni_gops and amx_gops are null when skipped and "skipped" says why ("" otherwise).
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define READ_BYTES (1ull << 30)
#define PASSES 5
#define FMA_ITERS 20000000ull
#define INT8_ITERS 20000000ull
#define INT8_CHAINS 4 /* inputs, sums, products and 2 constants fit the 16 ymm registers (int8_work) */
#define VNNI_ITERS 10000000ull
#define VNNI_CHAINS 12 /* vpdpbusd's latency × ports */
#define AMX_ITERS 1000000ull
#define AMX_TILE_MACS (16.0 * 16.0 * 64.0)
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One thread's share of a probe; its result is summed into a sink so that no pass is optimized away. */
typedef double (*probe_work)(const void *arg, int thread, int threads);

/* The best wall time of PASSES runs of work on `threads` threads. */
static double best_seconds(int threads, probe_work work, const void *arg, double *sink) {
    double best = 1e30;
    for (int pass = 0; pass < PASSES; pass++) {
        double t0 = now(), total = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        total += work(arg, omp_get_thread_num(), omp_get_num_threads());
        double t = now() - t0;
        if (t < best) best = t;
        *sink += total;
    }
    return best;
}

/* Sum of this thread's part of the buffer with 4 independent 256-bit accumulators (loads, not latency, bound
 * it). */
__attribute__((target("avx2"))) static double read_work(const void *arg, int thread, int threads) {
    const float *p = arg;
    size_t part = READ_BYTES / sizeof(float) / (size_t)threads / 32 * 32, begin = part * (size_t)thread;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = begin; i < begin + part; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* GB/s, or 0 when the buffer cannot be allocated. */
static double read_bandwidth(int threads, double *sink) {
    size_t n = READ_BYTES / sizeof(float);
    float *buf = aligned_alloc(64, READ_BYTES);
    if (!buf) return 0.0;
    /* Each thread first-touches the part it will read (its pages land on its memory node). */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
    double seconds = best_seconds(threads, read_work, buf, sink);
    free(buf);
    return (double)READ_BYTES / seconds / 1e9;
}

__attribute__((target("avx2,fma"))) static double fma_work(const void *arg, int thread, int threads) {
    (void)arg, (void)threads;
    __m256 acc[12];
    const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) acc[k] = _mm256_set1_ps((float)(k + thread));
    for (uint64_t i = 0; i < FMA_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) acc[k] = _mm256_fmadd_ps(acc[k], mul, add);
    float lanes[8];
    for (int k = 1; k < 12; k++) acc[0] = _mm256_add_ps(acc[0], acc[k]);
    _mm256_storeu_ps(lanes, acc[0]);
    return lanes[0] + lanes[7];
}

/* One chain: products of input u with s, summed into acc. */
#define INT8_STEP(u, acc) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones))

__attribute__((target("avx2"))) static double int8_work(const void *arg, int thread, int threads) {
    (void)arg, (void)threads;
    const __m256i s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    __m256i u0 = _mm256_set1_epi8(1), u1 = _mm256_set1_epi8(2), u2 = _mm256_set1_epi8(3);
    __m256i u3 = _mm256_set1_epi8(4);
    __m256i a0 = _mm256_set1_epi32(thread), a1 = a0, a2 = a0, a3 = a0;
    for (uint64_t i = 0; i < INT8_ITERS; i++) {
        /* Inputs opaque to the compiler, so the products are computed every iteration, not hoisted. */
        __asm__ volatile("" : "+x"(u0), "+x"(u1), "+x"(u2), "+x"(u3));
        INT8_STEP(u0, a0);
        INT8_STEP(u1, a1);
        INT8_STEP(u2, a2);
        INT8_STEP(u3, a3);
    }
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
    return _mm256_extract_epi32(sum, 0);
}

/* Each vpdpbusd adds into its own accumulator, so the chains need no opaque inputs to stay in the loop. */
__attribute__((target("avx512f,avx512vnni"))) static double vnni_work(const void *arg, int thread, int threads) {
    (void)arg, (void)threads;
    const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    __m512i acc[VNNI_CHAINS];
    for (int k = 0; k < VNNI_CHAINS; k++) acc[k] = _mm512_set1_epi32(k + thread);
    for (uint64_t i = 0; i < VNNI_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < VNNI_CHAINS; k++) acc[k] = _mm512_dpbusd_epi32(acc[k], u, s);
    for (int k = 1; k < VNNI_CHAINS; k++) acc[0] = _mm512_add_epi32(acc[0], acc[k]);
    return _mm512_reduce_add_epi32(acc[0]);
}

/* The 64-byte tile configuration (palette 1) tileloadconfig reads. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Tiles 0-3 accumulate C[i][j] += A[i]·B[j], A in tiles 4-5, B in tiles 6-7, every tile 16 rows of 64 bytes.
 * Tile state is per thread: each configures its own and releases it. */
__attribute__((target("amx-tile,amx-int8"))) static double amx_work(const void *arg, int thread, int threads) {
    (void)arg, (void)threads;
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    int8_t a[16 * 64], b[16 * 64];
    int32_t c[16 * 16];
    for (int i = 0; i < 16 * 64; i++) a[i] = (int8_t)(i % 7 - 3 + thread), b[i] = (int8_t)(i % 5 - 2);
    /* The tile loads read a and b through asm that does not declare it: make the stores happen first. */
    __asm__ volatile("" : : "r"(a), "r"(b) : "memory");
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, b, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, a, 64);
    for (uint64_t i = 0; i < AMX_ITERS; i++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    double total = 0.0;
    _tile_stored(0, c, 64);
    total += c[0];
    _tile_stored(3, c, 64);
    total += c[255];
    _tile_release();
    return total;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1) {
        fprintf(stderr, "usage: %s [THREADS]\n", argv[0]);
        return 2;
    }
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "roofline: this CPU (or OS) lacks AVX2 or FMA, which the bandwidth and f32 probes use\n");
        return 1;
    }
    double sink = 0.0;
    double bw = read_bandwidth(threads, &sink);
    if (bw == 0.0) {
        fprintf(stderr, "roofline: cannot allocate the %llu-byte read buffer\n", READ_BYTES);
        return 1;
    }
    double fma = (double)threads * FMA_ITERS * 12.0 * 8.0 * 2.0 / best_seconds(threads, fma_work, NULL, &sink) / 1e9;
    /* One vpmaddubsw is 32 u8×s8 multiply-adds. */
    double i8 = (double)threads * INT8_ITERS * INT8_CHAINS * 32.0 * 2.0 /
                best_seconds(threads, int8_work, NULL, &sink) / 1e9;

    char vnni[32] = "null", amx[32] = "null", skipped[256] = "";
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni"))
        snprintf(vnni, sizeof vnni, "%.1f",
                 (double)threads * VNNI_ITERS * VNNI_CHAINS * 64.0 * 2.0 /
                     best_seconds(threads, vnni_work, NULL, &sink) / 1e9);
    else
        snprintf(skipped, sizeof skipped, "AVX-512 VNNI: not on this CPU or not enabled by the OS");
    const char *no_amx = NULL;
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-int8"))
        no_amx = "AMX-INT8: not on this CPU or not enabled by the OS";
    else if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        no_amx = "AMX: the kernel refused this process the tile data (arch_prctl)";
    if (no_amx)
        snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%s", *skipped ? "; " : "", no_amx);
    else
        snprintf(amx, sizeof amx, "%.1f",
                 (double)threads * AMX_ITERS * 4.0 * AMX_TILE_MACS * 2.0 /
                     best_seconds(threads, amx_work, NULL, &sink) / 1e9);

    printf("{\"threads\":%d,\"read_gb_s\":%.2f,\"fma_gflops\":%.1f,\"int8_gops\":%.1f,\"vnni_gops\":%s,"
           "\"amx_gops\":%s,\"skipped\":\"%s\",\"sink\":%g}\n",
           threads, bw, fma, i8, vnni, amx, skipped, sink);
    return 0;
}
