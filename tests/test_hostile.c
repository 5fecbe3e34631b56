/* Hostile model files end cleanly: each loads and generates, or is refused with a sentence and a code (FKV_E_INPUT
 * or FKV_E_UNSUPPORTED) — never a crash, never an absurd allocation.
 *
 * The files are made from stories260K (a real trained llama): truncated at many offsets; with lying counts (n_kv,
 * n_tensors, array lengths), lying string lengths, overflowing or zero shapes, unknown tensor types, bad offsets;
 * rewritten with broken hyperparameters (block_count 0 / 2^32-1 / more than the tensors hold, context_length
 * 2^32-1, head counts 0 or not dividing, a huge head size, a vocabulary that disagrees with token_embd, odd rope
 * dims); and with seeded random bit flips. A file that loads is then given an engine with the default context, a
 * prefill and a short greedy generation: that is what `flatkv generate` does with it.
 *
 * Absurd allocations are caught by the allocator shim (faultalloc.h) linked into this test: any single request over
 * min(64 GiB, RAM) aborts the test, naming its size. Under ASan/UBSan any overflow or read past the mapping aborts too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultalloc.h"
#include "flatkv.h"
#include "gguf/gguf.h"
#include "testutil.h"

static uint8_t *base;      /* stories260K's bytes */
static size_t base_size;
static gguf_file *base_f;  /* parsed over base, to find fields' offsets */

static int load_base(void **state) {
    (void)state;
    base = (uint8_t *)tu_read_file(tu_data("models/stories260K.gguf"), &base_size);
    if (!base) return -1;
    fkv_error err = {0};
    base_f = gguf_open_buffer(base, base_size, "stories260K", &err);
    return base_f ? 0 : -1;
}

static int free_base(void **state) {
    (void)state;
    gguf_close(base_f);
    free(base);
    return 0;
}

/* What happened to the files of one category. */
typedef struct {
    const char *category;
    int files, loaded, refused;
} tally;

static void report(const tally *t) {
    print_message("  %-26s %4d files: %4d loaded and generated, %4d refused cleanly\n", t->category, t->files,
                  t->loaded, t->refused);
}

/* A loaded model given what `flatkv generate` gives it: an engine with the default context, a 4-token prefill and
 * 4 greedy tokens. It may refuse (a context too small, a vocabulary without these ids) — cleanly. */
static void exercise(fkv_model *m, const char *what) {
    fkv_error err = {0};
    fkv_ctx *c = fkv_ctx_new(m, NULL, &err); /* the single-sequence context, with the model's context */
    if (!c && err.code != FKV_E_INPUT) fail_msg("%s: a context failed with code %d: %s", what, (int)err.code, err.msg);
    fkv_ctx_free(c);
    fkv_engine_params ep;
    assert_int_equal(fkv_engine_default_params(&ep, &err), 0);
    fkv_engine *e = fkv_engine_new(m, &ep, &err);
    if (!e) {
        if (err.code != FKV_E_INPUT && err.code != FKV_E_UNSUPPORTED)
            fail_msg("%s: the engine failed with code %d: %s", what, (int)err.code, err.msg);
        return;
    }
    fkv_seq *s = fkv_seq_open(e, NULL, &err);
    assert_non_null(s);
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    int32_t ids[4];
    for (int i = 0; i < 4; i++) ids[i] = (int32_t)((uint32_t)(i * 37 + 1) % n_vocab);
    float *logits = malloc(sizeof(float) * n_vocab);
    assert_non_null(logits);
    const uint32_t n = fkv_seq_n_ctx(s) < 4 ? fkv_seq_n_ctx(s) : 4;
    if (fkv_seq_prefill(s, ids, n, logits, NULL, &err) == 0) {
        fkv_sampler_params sp = fkv_sampler_default_params();
        sp.temp = 0;
        fkv_sampler *smp = fkv_sampler_new(&sp, (int32_t)n_vocab);
        assert_non_null(smp);
        fkv_gen_params gp = {.max_tokens = 4, .sampler = smp};
        int32_t out[4];
        fkv_gen_result res;
        if (fkv_seq_generate(s, logits, &gp, out, &res, &err) && err.code != FKV_E_INPUT)
            fail_msg("%s: generation failed with code %d: %s", what, (int)err.code, err.msg);
        fkv_sampler_free(smp);
    } else if (err.code != FKV_E_INPUT) {
        fail_msg("%s: the prefill failed with code %d: %s", what, (int)err.code, err.msg);
    }
    free(logits);
    fkv_seq_free(s);
    fkv_engine_free(e);
}

/* Load bytes[0..size) as a model file: it loads (and is exercised) or is refused with a sentence and a code. */
static void try_file(tally *t, const uint8_t *bytes, size_t size, const char *what) {
    const char *path = tu_tmp_path(".gguf");
    assert_int_equal(tu_write_file(path, bytes, size), 0);
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    remove(path);
    t->files++;
    if (m) {
        t->loaded++;
        exercise(m, what);
        fkv_model_free(m);
        return;
    }
    t->refused++;
    if (err.code != FKV_E_INPUT && err.code != FKV_E_UNSUPPORTED)
        fail_msg("%s: refused with code %d (not INPUT or UNSUPPORTED): %s", what, (int)err.code, err.msg);
    if (strlen(err.msg) < 10) fail_msg("%s: refused without a sentence ('%s')", what, err.msg);
}

/* The base with n bytes at off replaced by v (little-endian). */
static void try_patched(tally *t, size_t off, uint64_t v, size_t n, const char *what) {
    uint8_t *copy = malloc(base_size);
    assert_non_null(copy);
    memcpy(copy, base, base_size);
    assert_true(off + n <= base_size);
    memcpy(copy + off, &v, n);
    char label[256];
    snprintf(label, sizeof label, "%s = %llu (offset %zu)", what, (unsigned long long)v, off);
    try_file(t, copy, base_size, label);
    free(copy);
}

static size_t offset_of(const void *p) { return (size_t)((const uint8_t *)p - base); }

static const uint64_t lies[] = {0, 1, 2, 1000, 0xffffffffull, 0x100000000ull, 1ull << 62, INT64_MAX, UINT64_MAX};
#define N_LIES (sizeof lies / sizeof *lies)

static void test_a_file_truncated_anywhere_is_refused_naming_what_it_was_reading(void **state) {
    (void)state;
    tally t = {.category = "truncations"};
    for (size_t n = 0; n < 64; n++) try_file(&t, base, n, "truncated");
    for (size_t n = 64; n < base_f->data_offset + 64; n += 97) try_file(&t, base, n, "truncated");
    for (size_t n = base_f->data_offset; n < base_size; n += base_size / 40) try_file(&t, base, n, "truncated");
    try_file(&t, base, base_size - 1, "truncated by one byte");
    report(&t);
    assert_int_equal(t.loaded, 0);
}

static void test_lying_counts_of_entries_tensors_and_array_elements_are_refused(void **state) {
    (void)state;
    tally t = {.category = "lying counts"};
    for (size_t i = 0; i < N_LIES; i++) {
        if (lies[i] != base_f->n_tensors) try_patched(&t, 8, lies[i], 8, "n_tensors");
        if (lies[i] != base_f->n_kv) try_patched(&t, 16, lies[i], 8, "n_kv");
    }
    try_patched(&t, 8, base_f->n_tensors + 1, 8, "n_tensors");
    try_patched(&t, 16, base_f->n_kv + 1, 8, "n_kv");
    try_patched(&t, 8, base_f->n_tensors - 1, 8, "n_tensors");
    try_patched(&t, 16, base_f->n_kv - 1, 8, "n_kv");
    /* every array's count: after the key, its type (u32) and the element type (u32) */
    for (uint64_t k = 0; k < base_f->n_kv; k++) {
        const gguf_kv *kv = &base_f->kv[k];
        if (kv->value.type != GGUF_TYPE_ARRAY) continue;
        const size_t at = offset_of(kv->key.ptr) + kv->key.len + 8;
        for (size_t i = 0; i < N_LIES; i++) try_patched(&t, at, lies[i], 8, "an array's count");
        try_patched(&t, at, kv->value.arr.n + 1, 8, "an array's count");
        try_patched(&t, at, kv->value.arr.n - 1, 8, "an array's count");
        try_patched(&t, at - 4, 1000, 4, "an array's element type");
    }
    report(&t);
}

static void test_lying_string_lengths_are_refused(void **state) {
    (void)state;
    tally t = {.category = "lying string lengths"};
    for (uint64_t k = 0; k < base_f->n_kv; k++) {
        const gguf_kv *kv = &base_f->kv[k];
        const size_t key_len_at = offset_of(kv->key.ptr) - 8;
        for (size_t i = 0; i < N_LIES; i += 2) try_patched(&t, key_len_at, lies[i], 8, "a key's length");
        try_patched(&t, key_len_at, kv->key.len + 1, 8, "a key's length");
        if (kv->value.type == GGUF_TYPE_STRING) {
            const size_t at = offset_of(kv->value.str.ptr) - 8;
            for (size_t i = 0; i < N_LIES; i++) try_patched(&t, at, lies[i], 8, "a string value's length");
            try_patched(&t, at, kv->value.str.len + 1, 8, "a string value's length");
        }
        if (kv->value.type == GGUF_TYPE_ARRAY && kv->value.arr.elem_type == GGUF_TYPE_STRING && kv->value.arr.n > 2) {
            const gguf_value *items = kv->value.arr.items;
            for (uint64_t j = 0; j < 3; j++) {
                const size_t at = offset_of(items[j].str.ptr) - 8;
                for (size_t i = 0; i < N_LIES; i++) try_patched(&t, at, lies[i], 8, "an array string's length");
            }
        }
    }
    for (uint64_t k = 0; k < base_f->n_tensors; k++) {
        const size_t at = offset_of(base_f->tensors[k].name.ptr) - 8;
        for (size_t i = 0; i < N_LIES; i += 2) try_patched(&t, at, lies[i], 8, "a tensor name's length");
    }
    report(&t);
}

/* Where tensor k's fields are: n_dims right after its name, then ne[n_dims], the type, the offset. */
static size_t dims_at(uint64_t k) {
    const gguf_tensor *ti = &base_f->tensors[k];
    return offset_of(ti->name.ptr) + ti->name.len;
}
static size_t type_at(uint64_t k) { return dims_at(k) + 4 + 8 * (size_t)base_f->tensors[k].n_dims; }

static void test_overflowing_and_zero_shapes_are_refused(void **state) {
    (void)state;
    tally t = {.category = "overflowing shapes"};
    static const uint64_t ne[] = {0, 3, 1ull << 32, 1ull << 40, 1ull << 62, 1ull << 63, UINT64_MAX};
    for (uint64_t k = 0; k < base_f->n_tensors; k++) {
        const size_t at = dims_at(k);
        try_patched(&t, at, 0, 4, "n_dims");
        try_patched(&t, at, 5, 4, "n_dims");
        try_patched(&t, at, UINT32_MAX, 4, "n_dims");
        for (uint32_t d = 0; d < base_f->tensors[k].n_dims; d++)
            for (size_t i = 0; i < sizeof ne / sizeof *ne; i++) try_patched(&t, at + 4 + 8 * d, ne[i], 8, "ne[d]");
    }
    report(&t);
}

static void test_unknown_or_uncomputed_tensor_types_are_refused(void **state) {
    (void)state;
    tally t = {.category = "unknown tensor types"};
    static const uint32_t types[] = {4, 5, 24, 25, 26, 27, 28, 31, 36, 39, 40, 1000, UINT32_MAX};
    for (uint64_t k = 0; k < base_f->n_tensors; k++)
        for (size_t i = 0; i < sizeof types / sizeof *types; i++)
            try_patched(&t, type_at(k), types[i], 4, "a tensor's type");
    report(&t);
}

static void test_bad_misaligned_and_out_of_file_offsets_are_refused(void **state) {
    (void)state;
    tally t = {.category = "bad offsets"};
    for (uint64_t k = 0; k < base_f->n_tensors; k++) {
        const size_t at = type_at(k) + 4;
        const uint64_t o = base_f->tensors[k].offset, size = base_size;
        const uint64_t bad[] = {o + 1, o + 31, size, size - base_f->data_offset, UINT64_MAX, UINT64_MAX - 31,
                                1ull << 63, 0 /* overlapping tensor 0: loads */};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) try_patched(&t, at, bad[i], 8, "a tensor's offset");
    }
    report(&t);
}

/* The base rewritten with metadata key `key` replaced by a value (or removed when v is NULL), in a temporary file:
 * its path (the caller removes it). */
static const char *write_rewritten(const char *key, const gguf_value *v, const char *what) {
    gguf_writer *w = gguf_writer_new();
    gguf_writer_copy_kv(w, base_f, "", key);
    if (v) gguf_writer_set_value(w, key, v);
    fkv_error err = {0};
    for (uint64_t k = 0; k < base_f->n_tensors; k++) {
        const gguf_tensor *ti = &base_f->tensors[k];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        assert_int_equal(gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, ti->data, &err), 0);
    }
    const char *path = tu_tmp_path(".gguf");
    if (gguf_writer_write(w, path, &err)) fail_msg("%s: writing it failed: %s", what, err.msg);
    gguf_writer_free(w);
    return path;
}

static void try_rewritten(tally *t, const char *key, const gguf_value *v, const char *what) {
    const char *path = write_rewritten(key, v, what);
    size_t size;
    uint8_t *bytes = (uint8_t *)tu_read_file(path, &size);
    remove(path);
    assert_non_null(bytes);
    try_file(t, bytes, size, what);
    free(bytes);
}

static void try_u32(tally *t, const char *key, uint32_t v) {
    gguf_value val = {.type = GGUF_TYPE_UINT32, .u64 = v};
    char what[160];
    snprintf(what, sizeof what, "%s = %u", key, v);
    try_rewritten(t, key, &val, what);
}

static void try_f32(tally *t, const char *key, float v) {
    gguf_value val = {.type = GGUF_TYPE_FLOAT32, .f64 = v};
    char what[160];
    snprintf(what, sizeof what, "%s = %g", key, (double)v);
    try_rewritten(t, key, &val, what);
}

/* tokenizer array `key` with its first n elements only. */
static void try_shortened_array(tally *t, const char *key, uint64_t n) {
    const gguf_value *orig = gguf_find(base_f, key);
    assert_non_null(orig);
    gguf_value v = *orig;
    v.arr.n = n;
    char what[160];
    snprintf(what, sizeof what, "%s cut to %llu elements", key, (unsigned long long)n);
    try_rewritten(t, key, &v, what);
}

static void test_broken_hyperparameters_are_refused_or_capped(void **state) {
    (void)state;
    tally t = {.category = "broken hyperparameters"};
    uint32_t n_layers, n_heads, dim;
    fkv_error err = {0};
    assert_int_equal(gguf_get_u32(base_f, "llama.block_count", &n_layers, &err), 0);
    assert_int_equal(gguf_get_u32(base_f, "llama.attention.head_count", &n_heads, &err), 0);
    assert_int_equal(gguf_get_u32(base_f, "llama.embedding_length", &dim, &err), 0);
    const uint32_t huge[] = {0, UINT32_MAX, UINT32_MAX / 2 + 1, 1u << 16};
    const char *shape_keys[] = {"llama.block_count", "llama.context_length", "llama.embedding_length",
                                "llama.feed_forward_length", "llama.attention.head_count",
                                "llama.attention.head_count_kv", "llama.attention.key_length",
                                "llama.attention.value_length", "llama.rope.dimension_count"};
    for (size_t k = 0; k < sizeof shape_keys / sizeof *shape_keys; k++)
        for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) try_u32(&t, shape_keys[k], huge[i]);
    try_u32(&t, "llama.block_count", n_layers + 1); /* more layers than the tensors hold */
    try_u32(&t, "llama.block_count", n_layers - 1); /* fewer: loads (llama.cpp ignores the extra tensors too) */
    try_u32(&t, "llama.attention.head_count", n_heads + 1);  /* not dividing dim */
    try_u32(&t, "llama.attention.head_count_kv", n_heads - 1); /* not dividing the heads */
    try_u32(&t, "llama.attention.head_count", n_heads * 2);  /* heads of half the size: q_dim no longer dim */
    try_u32(&t, "llama.attention.key_length", 2 * dim / n_heads);
    try_u32(&t, "llama.rope.dimension_count", 7);  /* odd */
    try_u32(&t, "llama.rope.dimension_count", dim / n_heads - 2); /* partial: loads */
    try_u32(&t, "llama.context_length", 1);        /* loads, then the 4-token prompt is refused */
    try_u32(&t, "llama.context_length", 0x10000001); /* capped to the KV memory */
    try_f32(&t, "llama.attention.layer_norm_rms_epsilon", -1.0f);
    try_f32(&t, "llama.attention.layer_norm_rms_epsilon", __builtin_nanf(""));
    try_f32(&t, "llama.rope.freq_base", 0.0f);
    try_f32(&t, "llama.rope.freq_base", -__builtin_inff());
    gguf_value s = {.type = GGUF_TYPE_STRING, .str = {"5", 1}};
    try_rewritten(&t, "llama.block_count", &s, "block_count as a string");
    try_rewritten(&t, "llama.block_count", NULL, "block_count removed");
    try_rewritten(&t, "tokenizer.ggml.tokens", NULL, "tokens removed");
    uint64_t n_vocab = gguf_find(base_f, "tokenizer.ggml.tokens")->arr.n;
    try_shortened_array(&t, "tokenizer.ggml.tokens", n_vocab - 1); /* disagrees with token_embd */
    try_shortened_array(&t, "tokenizer.ggml.tokens", 0);
    try_shortened_array(&t, "tokenizer.ggml.scores", n_vocab - 1);
    try_shortened_array(&t, "tokenizer.ggml.token_type", n_vocab - 1);
    try_u32(&t, "tokenizer.ggml.bos_token_id", (uint32_t)n_vocab);
    try_u32(&t, "tokenizer.ggml.eos_token_id", UINT32_MAX);
    try_u32(&t, "tokenizer.ggml.unknown_token_id", (uint32_t)n_vocab + 5);
    try_u32(&t, "general.alignment", 64); /* valid: loads (a bad alignment is refused by the writer already) */
    report(&t);
}

/* The base with context_length 2^32-1 loaded (it does: the claim sizes nothing at load). */
static fkv_model *load_huge_context(void) {
    const gguf_value huge = {.type = GGUF_TYPE_UINT32, .u64 = UINT32_MAX};
    const char *path = write_rewritten("llama.context_length", &huge, "context_length 2^32-1");
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    remove(path);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

static void test_a_default_context_the_kv_memory_cannot_hold_is_capped_with_a_note(void **state) {
    (void)state;
    fkv_model *m = load_huge_context();
    fkv_error err = {0};
    fkv_engine_params ep;
    assert_int_equal(fkv_engine_default_params(&ep, &err), 0);
    ep.kv_mem = (size_t)64 << 20;
    fkv_engine *e = fkv_engine_new(m, &ep, &err);
    if (!e) fail_msg("%s", err.msg);
    const size_t bytes_per_pos = (size_t)2 * 2 * fkv_model_get_info(m).n_layers * fkv_model_get_info(m).n_kv_heads *
                                 fkv_model_get_info(m).head_dim;
    assert_true(fkv_engine_n_ctx(e) <= ep.kv_mem / bytes_per_pos);
    assert_true(fkv_engine_n_ctx(e) >= ep.kv_mem / bytes_per_pos - 64);
    assert_non_null(fkv_engine_note(e));
    assert_non_null(strstr(fkv_engine_note(e), "context_length 4294967295 is more than the KV memory holds"));
    fkv_engine_free(e);
    /* the default budget too (a quarter of RAM at most) */
    assert_int_equal(fkv_engine_default_params(&ep, &err), 0);
    assert_non_null(e = fkv_engine_new(m, &ep, &err));
    assert_true(fkv_engine_n_ctx(e) < UINT32_MAX);
    assert_non_null(fkv_engine_note(e));
    fkv_engine_free(e);
    fkv_model_free(m);
}

static void test_an_explicit_context_the_default_kv_memory_cannot_hold_is_refused(void **state) {
    (void)state;
    fkv_model *m = load_huge_context();
    fkv_error err = {0};
    fkv_engine_params ep;
    assert_int_equal(fkv_engine_default_params(&ep, &err), 0);
    ep.ctx.n_ctx = UINT32_MAX - 63;
    assert_null(fkv_engine_new(m, &ep, &err));
    assert_int_equal(err.code, FKV_E_INPUT);
    assert_non_null(strstr(err.msg, "is more than the KV memory holds"));
    /* with an explicit budget both are the user's: a small budget serves a large context until it is full */
    ep.kv_mem = (size_t)1 << 20;
    fkv_engine *e = fkv_engine_new(m, &ep, &err);
    if (!e) fail_msg("%s", err.msg);
    assert_null(fkv_engine_note(e));
    fkv_engine_free(e);
    fkv_model_free(m);
}

/* xorshift64*: a fixed seed gives the same flips on every machine. */
static uint64_t next_random(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void test_random_bit_flips_end_cleanly(void **state) {
    (void)state;
    tally t = {.category = "bit flips (seed 18)"};
    uint64_t seed = 18;
    uint8_t *copy = malloc(base_size);
    assert_non_null(copy);
    for (int file = 0; file < 300; file++) {
        memcpy(copy, base, base_size);
        const int n_flips = 1 + (int)(next_random(&seed) % 8);
        for (int i = 0; i < n_flips; i++) {
            /* 4 in 5 flips land in the header and metadata, where a bit decides what is read */
            const uint64_t r = next_random(&seed);
            const size_t span = r % 5 ? (size_t)base_f->data_offset : base_size;
            const size_t at = (size_t)(next_random(&seed) % span);
            copy[at] ^= (uint8_t)(1u << (r >> 61));
        }
        char what[64];
        snprintf(what, sizeof what, "bit flip file %d", file);
        try_file(&t, copy, base_size, what);
    }
    free(copy);
    report(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_file_truncated_anywhere_is_refused_naming_what_it_was_reading),
        cmocka_unit_test(test_lying_counts_of_entries_tensors_and_array_elements_are_refused),
        cmocka_unit_test(test_lying_string_lengths_are_refused),
        cmocka_unit_test(test_overflowing_and_zero_shapes_are_refused),
        cmocka_unit_test(test_unknown_or_uncomputed_tensor_types_are_refused),
        cmocka_unit_test(test_bad_misaligned_and_out_of_file_offsets_are_refused),
        cmocka_unit_test(test_broken_hyperparameters_are_refused_or_capped),
        cmocka_unit_test(test_random_bit_flips_end_cleanly),
        cmocka_unit_test(test_a_default_context_the_kv_memory_cannot_hold_is_capped_with_a_note),
        cmocka_unit_test(test_an_explicit_context_the_default_kv_memory_cannot_hold_is_refused),
    };
    return cmocka_run_group_tests(tests, load_base, free_base);
}
