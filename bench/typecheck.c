/* typecheck.c — flatkv's weight types against ggml's own code, bit for bit: for every type flatkv computes beyond
 * F32/F16/BF16, (1) dequantizing random blocks (random bytes, finite random f16 scales) gives ggml's floats, and
 * (2) for the types whose flatkv quantizer is ggml's reference one, quantizing random rows gives ggml's bytes.
 *
 * WHY a bench program: it needs the peer's libggml-base.so (bench/compare sets up bench/.peer), which CI does not have; it
 * is opened with dlopen and its ggml_get_type_traits(type)->to_float / from_float_ref called. Run by
 * bench/typecheck.sh; exit status 0 when everything matched.
 *
 *   flatkv_typecheck LIBGGML_BASE.so [ROWS]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/traits.h"

/* ggml.h's struct ggml_type_traits (bench/.peer/llama.cpp/ggml/include/ggml.h), declared here so that this builds
 * without the peer's headers. */
typedef void (*ggml_to_float_fn)(const void *x, float *y, int64_t k);
typedef void (*ggml_from_float_fn)(const float *x, void *y, int64_t k);
struct ggml_type_traits {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ggml_to_float_fn to_float;
    ggml_from_float_fn from_float_ref;
};
typedef const struct ggml_type_traits *(*get_traits_fn)(int type);

/* The types checked; `ggml_quantizer`: flatkv's quantize is ggml's reference one (Q4_K/Q6_K use flatkv's own). */
static const struct {
    ggml_type type;
    bool ggml_quantizer;
    int f16_at[2]; /* byte offsets of the block's f16 fields (-1: none) */
} types[] = {
    {GGML_TYPE_Q8_0, true, {0, -1}},    {GGML_TYPE_Q4_0, true, {0, -1}},    {GGML_TYPE_Q4_1, true, {0, 2}},
    {GGML_TYPE_Q5_0, true, {0, -1}},    {GGML_TYPE_Q5_1, true, {0, 2}},     {GGML_TYPE_IQ4_NL, true, {0, -1}},
    {GGML_TYPE_Q2_K, true, {80, 82}},   {GGML_TYPE_Q3_K, true, {108, -1}},  {GGML_TYPE_Q4_K, false, {0, 2}},
    {GGML_TYPE_Q5_K, true, {0, 2}},     {GGML_TYPE_Q6_K, false, {208, -1}}, {GGML_TYPE_IQ4_XS, true, {0, -1}},
};

static uint64_t rng_state = 0x5eed;
static uint64_t rng(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform01(void) { return ((double)(rng() >> 11) + 0.5) / 9007199254740992.0; }
static float normal(void) { return (float)(sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01())); }

/* A finite f16 of either sign between 2^-14 and 2^3 (or 0 sometimes). */
static uint16_t random_f16(void) {
    if (rng() % 16 == 0) return 0;
    return (uint16_t)((rng() & 0x8000) | (uint16_t)((1 + rng() % 17) << 10) | (rng() & 0x3ff));
}

/* Row r's values: normal, uniform, all positive, with outliers, and rows holding all-zero and constant blocks. The
 * first block is never all zero: ggml's IQ4_NL quantizer then writes the quants its stack buffer held before (a zero
 * block keeps the previous block's quants, d = 0; flatkv's first block keeps zeros), which no comparison can pin. */
static void fill_row(float *x, size_t n, int kind) {
    for (size_t i = 0; i < n; i++) {
        switch (kind % 5) {
        case 0: x[i] = 0.02f * normal(); break;
        case 1: x[i] = (float)(uniform01() * 2.0 - 1.0); break;
        case 2: x[i] = (float)uniform01() + 0.5f; break;
        case 3: x[i] = rng() % 64 ? normal() : 40.0f * normal(); break;
        default: x[i] = (i / 32) % 3 == 1 ? 0.0f : (i / 32) % 3 == 2 ? 0.25f : normal(); break;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIBGGML_BASE.so [ROWS]\n", argv[0]);
        return 2;
    }
    const int rows = argc > 2 ? atoi(argv[2]) : 200;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "typecheck: %s\n", dlerror());
        return 2;
    }
    get_traits_fn get = (get_traits_fn)dlsym(lib, "ggml_get_type_traits");
    if (!get) {
        fprintf(stderr, "typecheck: no ggml_get_type_traits in %s\n", argv[1]);
        return 2;
    }
    const size_t n = 4096; /* 16 super-blocks, 128 blocks */
    float *x = malloc(n * sizeof *x), *mine = malloc(n * sizeof *mine), *theirs = malloc(n * sizeof *theirs);
    uint8_t *qa = malloc(n * 4), *qb = malloc(n * 4);
    int failed = 0;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        const ggml_type type = types[t].type;
        const kern_traits *kt = kern_type_traits(type);
        const struct ggml_type_traits *gt = get((int)type);
        if (!kt || !gt || !gt->to_float || (size_t)gt->blck_size != kt->block_elems || gt->type_size != kt->block_bytes) {
            printf("%-7s MISMATCH of geometry or missing in ggml\n", kt ? kt->name : "?");
            failed++;
            continue;
        }
        const size_t bytes = n / kt->block_elems * kt->block_bytes;
        size_t deq_bad = 0, deq_total = 0, q_bad_rows = 0, q_rows = 0, rq_bad = 0;
        for (int r = 0; r < rows; r++) {
            /* (1) random blocks dequantized */
            for (size_t i = 0; i < bytes; i++) qa[i] = (uint8_t)rng();
            for (size_t b = 0; b < n / kt->block_elems; b++)
                for (int f = 0; f < 2; f++)
                    if (types[t].f16_at[f] >= 0) {
                        const uint16_t h = random_f16();
                        memcpy(qa + b * kt->block_bytes + types[t].f16_at[f], &h, 2);
                    }
            quant_dequantize_row(type, qa, mine, n);
            gt->to_float(qa, theirs, (int64_t)n);
            for (size_t i = 0; i < n; i++) deq_bad += memcmp(&mine[i], &theirs[i], 4) != 0;
            deq_total += n;
            /* (2) random rows quantized by both, then the quantized rows dequantized by both */
            fill_row(x, n, r);
            quant_quantize_row(type, x, qa, n);
            if (gt->from_float_ref) {
                gt->from_float_ref(x, qb, (int64_t)n);
                q_rows++;
                q_bad_rows += memcmp(qa, qb, bytes) != 0;
            }
            quant_dequantize_row(type, qa, mine, n);
            gt->to_float(qa, theirs, (int64_t)n);
            for (size_t i = 0; i < n; i++) rq_bad += memcmp(&mine[i], &theirs[i], 4) != 0;
        }
        const bool deq_ok = deq_bad == 0 && rq_bad == 0;
        const bool q_ok = !types[t].ggml_quantizer || (q_rows && q_bad_rows == 0);
        printf("%-7s dequantize: %zu of %zu random-block values differ, %zu of quantized rows; quantize: %zu of %zu "
               "rows differ from ggml's reference%s  %s\n",
               kt->name, deq_bad, deq_total, rq_bad, q_bad_rows, q_rows,
               types[t].ggml_quantizer ? "" : " (flatkv's own quantizer: not expected to match)",
               deq_ok && q_ok ? "OK" : "FAIL");
        failed += !(deq_ok && q_ok);
    }
    free(x), free(mine), free(theirs), free(qa), free(qb);
    dlclose(lib);
    return failed ? 1 : 0;
}
