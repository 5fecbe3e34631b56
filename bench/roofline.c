/* roofline.c — this machine's two physical limits for inference, measured with T threads (default 2).
 *
 * WHY: a tok/s figure says little until it is set against what the hardware allows: decode reads every
 * weight once per token (memory bound), prefill reuses each weight across many rows (compute bound).
 * bench/compare divides the bytes and operations per token of each case by these numbers.
 *
 * Measures, each the best of several passes:
 *   read_gb_s   streaming read bandwidth: T threads summing disjoint halves of a 1 GiB buffer (≫ any cache)
 *               with 256-bit loads; 1 GB = 1e9 bytes.
 *   fma_gflops  peak f32 FMA throughput: T threads each running 12 independent chains of 256-bit FMAs
 *               (enough to cover FMA latency × ports); 1 FMA lane = 2 FLOPs.
 *   int8_gops   peak int8 multiply-add throughput of the AVX2 sequence quantized dot products use
 *               (vpmaddubsw u8×s8 → s16 pairs, vpmaddwd → s32, vpaddd); 1 multiply-add = 2 ops.
 * Prints one JSON line. Needs AVX2 and FMA (compiled with -march=native on such a CPU).
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define READ_BYTES (1ull << 30)
#define PASSES 5
#define FMA_ITERS 20000000ull
#define INT8_ITERS 20000000ull
#define INT8_CHAINS 4 /* inputs, sums, products and 2 constants fit the 16 ymm registers (int8_peak) */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sum of floats [begin, end) with 4 independent 256-bit accumulators (loads, not latency, bound it). */
static float sum_range(const float *p, size_t begin, size_t end) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = begin; i < end; i += 32) {
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

static double read_bandwidth(int threads, float *sink) {
    size_t n = READ_BYTES / sizeof(float);
    float *buf = aligned_alloc(64, READ_BYTES);
    if (!buf) return 0.0;
    /* Each thread first-touches the half it will read (its pages land on its memory node). */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
    double best = 1e30;
    for (int pass = 0; pass < PASSES; pass++) {
        double t0 = now();
        float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            size_t part = n / (size_t)omp_get_num_threads();
            size_t begin = part * (size_t)omp_get_thread_num();
            total += sum_range(buf, begin, begin + part);
        }
        double t = now() - t0;
        if (t < best) best = t;
        *sink += total;
    }
    free(buf);
    return (double)READ_BYTES / best / 1e9;
}

static double fma_peak(int threads, float *sink) {
    double best = 1e30;
    for (int pass = 0; pass < PASSES; pass++) {
        double t0 = now();
        float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            __m256 acc[12];
            const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
            for (int k = 0; k < 12; k++) acc[k] = _mm256_set1_ps((float)(k + omp_get_thread_num()));
            for (uint64_t i = 0; i < FMA_ITERS; i++)
#pragma GCC unroll 12
                for (int k = 0; k < 12; k++) acc[k] = _mm256_fmadd_ps(acc[k], mul, add);
            float lanes[8];
            for (int k = 1; k < 12; k++) acc[0] = _mm256_add_ps(acc[0], acc[k]);
            _mm256_storeu_ps(lanes, acc[0]);
            total += lanes[0] + lanes[7];
        }
        double t = now() - t0;
        if (t < best) best = t;
        *sink += total;
    }
    return (double)threads * (double)FMA_ITERS * 12.0 * 8.0 * 2.0 / best / 1e9;
}

/* One chain: products of input u with s, summed into acc. */
#define INT8_STEP(u, acc) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones))

static double int8_peak(int threads, float *sink) {
    double best = 1e30;
    for (int pass = 0; pass < PASSES; pass++) {
        double t0 = now();
        int64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            const __m256i s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
            __m256i u0 = _mm256_set1_epi8(1), u1 = _mm256_set1_epi8(2), u2 = _mm256_set1_epi8(3);
            __m256i u3 = _mm256_set1_epi8(4);
            __m256i a0 = _mm256_set1_epi32(omp_get_thread_num()), a1 = a0, a2 = a0, a3 = a0;
            for (uint64_t i = 0; i < INT8_ITERS; i++) {
                /* Inputs opaque to the compiler, so the products are computed every iteration, not hoisted. */
                __asm__ volatile("" : "+x"(u0), "+x"(u1), "+x"(u2), "+x"(u3));
                INT8_STEP(u0, a0);
                INT8_STEP(u1, a1);
                INT8_STEP(u2, a2);
                INT8_STEP(u3, a3);
            }
            __m256i sum = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
            total += _mm256_extract_epi32(sum, 0);
        }
        double t = now() - t0;
        if (t < best) best = t;
        *sink += (float)total;
    }
    /* One vpmaddubsw is 32 u8×s8 multiply-adds. */
    return (double)threads * (double)INT8_ITERS * INT8_CHAINS * 32.0 * 2.0 / best / 1e9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1) {
        fprintf(stderr, "usage: %s [THREADS]\n", argv[0]);
        return 2;
    }
    float sink = 0.0f; /* results are consumed so no pass is optimized away */
    double bw = read_bandwidth(threads, &sink);
    double fma = fma_peak(threads, &sink);
    double i8 = int8_peak(threads, &sink);
    if (bw == 0.0) {
        fprintf(stderr, "roofline: cannot allocate the %llu-byte read buffer\n", READ_BYTES);
        return 1;
    }
    printf("{\"threads\":%d,\"read_gb_s\":%.2f,\"fma_gflops\":%.1f,\"int8_gops\":%.1f,\"sink\":%g}\n", threads, bw,
           fma, i8, (double)sink);
    return 0;
}
