/* test_gguf.c — the GGUF reader and writer: round trips of every metadata type and tensor layout, one
 * refusal per kind of corruption (each with its own message), truncation at every length, random byte
 * flips, and the real files in data/. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "testutil.h"

/* ------------------------------------------------------------------------------------------------ */
/* helpers */

static uint64_t rng_next(uint64_t *s) { /* xorshift64: seeded, reproducible */
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill_random(void *p, size_t n, uint64_t seed) {
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)rng_next(&seed);
}

/* Hand-built GGUF bytes, for files the writer would never produce. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} tb;

static void tb_bytes(tb *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void tb_u8(tb *b, uint8_t v) { tb_bytes(b, &v, 1); }
static void tb_u32(tb *b, uint32_t v) { tb_bytes(b, &v, 4); }
static void tb_u64(tb *b, uint64_t v) { tb_bytes(b, &v, 8); }
static void tb_str(tb *b, const char *s) {
    tb_u64(b, strlen(s));
    tb_bytes(b, s, strlen(s));
}
static void tb_zeros(tb *b, size_t n) {
    for (size_t i = 0; i < n; i++) tb_u8(b, 0);
}
static void tb_header(tb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    tb_bytes(b, "GGUF", 4);
    tb_u32(b, version);
    tb_u64(b, n_tensors);
    tb_u64(b, n_kv);
}
static void tb_key(tb *b, const char *key, gguf_type type) {
    tb_str(b, key);
    tb_u32(b, type);
}
static void tb_tensor(tb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset) {
    tb_str(b, name);
    tb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) tb_u64(b, ne[d]);
    tb_u32(b, type);
    tb_u64(b, offset);
}
static void tb_pad(tb *b, size_t align) { tb_zeros(b, (align - b->n % align) % align); }

/* A file holding one tensor "w" and data_bytes of data after the (default 32) alignment padding. */
static void tb_one_tensor(tb *b, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset, size_t data_bytes) {
    tb_header(b, 3, 1, 0);
    tb_tensor(b, "w", n_dims, ne, type, offset);
    tb_pad(b, 32);
    tb_zeros(b, data_bytes);
}

/* Opens an exact-size heap copy of the bytes, so that AddressSanitizer sees any read past the end. */
static gguf_file *open_copy(const void *bytes, size_t n, uint8_t **copy, fkv_error *err) {
    *copy = malloc(n ? n : 1);
    assert_non_null(*copy);
    if (n) memcpy(*copy, bytes, n);
    return gguf_open_buffer(*copy, n, "corrupt.gguf", err);
}

static void expect_refused(tb *b, const char *expected) {
    fkv_error err = {0};
    uint8_t *copy;
    gguf_file *f = open_copy(b->p, b->n, &copy, &err);
    if (f) fail_msg("expected refusal with \"%s\", but the file opened", expected);
    if (!strstr(err.msg, "corrupt.gguf") || !strstr(err.msg, expected))
        fail_msg("expected \"%s\" in: %s", expected, err.msg);
    /* A file flatkv could read in principle (another version, another byte order) is unsupported; the rest is
     * bad input — the code callers decide on. */
    const fkv_status want = strstr(expected, "unsupported version") || strstr(expected, "big-endian")
                                ? FKV_E_UNSUPPORTED : FKV_E_INPUT;
    if (err.code != want)
        fail_msg("\"%s\": code %s, want %s", expected, fkv_status_name(err.code), fkv_status_name(want));
    free(copy);
    free(b->p);
    *b = (tb){0};
}

static bool value_eq(const gguf_value *a, const gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case GGUF_TYPE_STRING: return a->str.len == b->str.len && memcmp(a->str.ptr, b->str.ptr, a->str.len) == 0;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: return memcmp(&a->f64, &b->f64, 8) == 0;
    case GGUF_TYPE_ARRAY:
        if (a->arr.elem_type != b->arr.elem_type || a->arr.n != b->arr.n) return false;
        if (gguf_type_size(a->arr.elem_type))
            return a->arr.n == 0 || memcmp(a->arr.raw, b->arr.raw, a->arr.n * gguf_type_size(a->arr.elem_type)) == 0;
        for (uint64_t i = 0; i < a->arr.n; i++)
            if (!value_eq(&a->arr.items[i], &b->arr.items[i])) return false;
        return true;
    default: return a->u64 == b->u64;
    }
}

static const gguf_value *must_find(const gguf_file *f, const char *key) {
    const gguf_value *v = gguf_find(f, key);
    if (!v) fail_msg("key %s missing", key);
    return v;
}

static void assert_str(gguf_str s, const char *expected) {
    if (!gguf_str_eq(s, expected)) fail_msg("expected '%s', got '%.*s'", expected, (int)s.len, s.ptr);
}

/* Touches every byte a valid file lets a caller reach, so AddressSanitizer checks the INVARIANT. */
static uint64_t walk_value(const gguf_value *v) {
    uint64_t sum = 0;
    if (v->type == GGUF_TYPE_STRING) {
        for (uint64_t i = 0; i < v->str.len; i++) sum += (uint8_t)v->str.ptr[i];
    } else if (v->type == GGUF_TYPE_ARRAY) {
        if (gguf_type_size(v->arr.elem_type))
            for (uint64_t i = 0; i < v->arr.n; i++) sum += (uint64_t)gguf_arr_int(v, i) + (gguf_arr_float(v, i) > 0);
        else
            for (uint64_t i = 0; i < v->arr.n; i++) sum += walk_value(&v->arr.items[i]);
    } else {
        sum += v->u64;
    }
    return sum;
}

static uint64_t walk_file(const gguf_file *f) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) sum += walk_value(&f->kv[i].value);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const uint8_t *d = t->data;
        sum += d[0] + d[t->nbytes - 1];
        assert_true((uint64_t)(d - (f->map + f->data_offset)) % f->alignment == 0);
    }
    return sum;
}

/* A small file with a bit of everything; every byte of it matters (it ends where its last tensor does). */
static uint8_t *small_file(size_t *size) {
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_u32(w, "llama.context_length", 512);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_str toks[] = {{"<unk>", 5}, {"", 0}, {"\xe2\x96\x81the", 6}};
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    int32_t ids[] = {7, -3};
    gguf_writer_set_arr(w, "ids", GGUF_TYPE_INT32, ids, 2);
    gguf_value inner[2] = {{.type = GGUF_TYPE_ARRAY}, {.type = GGUF_TYPE_ARRAY}};
    inner[0].arr.elem_type = GGUF_TYPE_INT32, inner[0].arr.n = 2, inner[0].arr.raw = (const uint8_t *)ids;
    inner[1].arr.elem_type = GGUF_TYPE_STRING, inner[1].arr.n = 0;
    gguf_value nested = {.type = GGUF_TYPE_ARRAY};
    nested.arr.elem_type = GGUF_TYPE_ARRAY, nested.arr.n = 2, nested.arr.items = inner;
    gguf_writer_set_value(w, "nested", &nested);
    float a[15];
    uint8_t q[2 * 34];
    fill_random(a, sizeof a, 1);
    fill_random(q, sizeof q, 2);
    fkv_error err = {0};
    assert_int_equal(gguf_writer_add_tensor(w, "a", GGML_TYPE_F32, 2, (uint64_t[]){5, 3}, a, &err), 0);
    assert_int_equal(gguf_writer_add_tensor(w, "q", GGML_TYPE_Q8_0, 2, (uint64_t[]){32, 2}, q, &err), 0);
    const char *path = tu_tmp_path(".gguf");
    if (gguf_writer_write(w, path, &err) != 0) fail_msg("%s", err.msg);
    gguf_writer_free(w);
    uint8_t *bytes = (uint8_t *)tu_read_file(path, size);
    assert_non_null(bytes);
    remove(path);
    return bytes;
}

/* ------------------------------------------------------------------------------------------------ */
/* round trips */

static void test_every_metadata_type_and_tensor_survives_a_round_trip(void **state) {
    (void)state;
    gguf_writer *w = gguf_writer_new();
    /* scalars; types without a dedicated setter go through gguf_writer_set_value */
    gguf_writer_set_value(w, "s.u8", &(gguf_value){.type = GGUF_TYPE_UINT8, .u64 = 200});
    gguf_writer_set_value(w, "s.i8", &(gguf_value){.type = GGUF_TYPE_INT8, .i64 = -100});
    gguf_writer_set_value(w, "s.u16", &(gguf_value){.type = GGUF_TYPE_UINT16, .u64 = 60000});
    gguf_writer_set_value(w, "s.i16", &(gguf_value){.type = GGUF_TYPE_INT16, .i64 = -30000});
    gguf_writer_set_u32(w, "s.u32", 4000000000u);
    gguf_writer_set_i32(w, "s.i32", -2000000000);
    gguf_writer_set_f32(w, "s.f32", -3.25f);
    gguf_writer_set_bool(w, "s.true", true);
    gguf_writer_set_bool(w, "s.false", false);
    gguf_writer_set_str(w, "s.str", "h\xc3\xa9llo, world");
    gguf_writer_set_str(w, "s.empty", "");
    gguf_writer_set_value(w, "s.u64", &(gguf_value){.type = GGUF_TYPE_UINT64, .u64 = UINT64_MAX});
    gguf_writer_set_value(w, "s.i64", &(gguf_value){.type = GGUF_TYPE_INT64, .i64 = INT64_MIN});
    gguf_writer_set_value(w, "s.f64", &(gguf_value){.type = GGUF_TYPE_FLOAT64, .f64 = 1e300});
    gguf_writer_set_u32(w, "general.alignment", 64);

    /* arrays of every fixed-size type, odd lengths, random bytes (bools must be 0/1) */
    const gguf_type fixed[] = {GGUF_TYPE_UINT8, GGUF_TYPE_INT8, GGUF_TYPE_UINT16, GGUF_TYPE_INT16,
                               GGUF_TYPE_UINT32, GGUF_TYPE_INT32, GGUF_TYPE_FLOAT32, GGUF_TYPE_BOOL,
                               GGUF_TYPE_UINT64, GGUF_TYPE_INT64, GGUF_TYPE_FLOAT64};
    uint8_t raw[11][7 * 8];
    char key[11][32];
    for (int t = 0; t < 11; t++) {
        fill_random(raw[t], sizeof raw[t], 100 + (uint64_t)t);
        if (fixed[t] == GGUF_TYPE_BOOL)
            for (int i = 0; i < 7; i++) raw[t][i] &= 1;
        if (fixed[t] == GGUF_TYPE_FLOAT32 || fixed[t] == GGUF_TYPE_FLOAT64) /* no NaN payload games */
            for (int i = 0; i < 7; i++) {
                double x = (i - 3) * 0.375;
                if (fixed[t] == GGUF_TYPE_FLOAT32) memcpy(raw[t] + 4 * i, &(float){(float)x}, 4);
                else memcpy(raw[t] + 8 * i, &x, 8);
            }
        snprintf(key[t], sizeof key[t], "a.%s", gguf_type_name(fixed[t]));
        gguf_writer_set_arr(w, key[t], fixed[t], raw[t], 7);
    }
    gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_UINT32, NULL, 0);
    gguf_str strs[] = {{"alpha", 5}, {"", 0}, {"\xce\xb3", 2}};
    gguf_writer_set_arr_str(w, "a.str", strs, 3);
    gguf_writer_set_arr_str(w, "a.str.empty", NULL, 0);

    /* arrays of arrays: [[1,2,3],[],[4]], [["a","b"],["c"]], an empty array of arrays, and 8 levels */
    int32_t ints[] = {1, 2, 3, 4};
    gguf_value rows[3] = {{.type = GGUF_TYPE_ARRAY}, {.type = GGUF_TYPE_ARRAY}, {.type = GGUF_TYPE_ARRAY}};
    rows[0].arr.elem_type = GGUF_TYPE_INT32, rows[0].arr.n = 3, rows[0].arr.raw = (const uint8_t *)ints;
    rows[1].arr.elem_type = GGUF_TYPE_INT32, rows[1].arr.n = 0;
    rows[2].arr.elem_type = GGUF_TYPE_INT32, rows[2].arr.n = 1, rows[2].arr.raw = (const uint8_t *)(ints + 3);
    gguf_value nested_ints = {.type = GGUF_TYPE_ARRAY};
    nested_ints.arr.elem_type = GGUF_TYPE_ARRAY, nested_ints.arr.n = 3, nested_ints.arr.items = rows;
    gguf_writer_set_value(w, "n.ints", &nested_ints);
    gguf_value sv[3] = {{.type = GGUF_TYPE_STRING, .str = {"a", 1}}, {.type = GGUF_TYPE_STRING, .str = {"b", 1}},
                        {.type = GGUF_TYPE_STRING, .str = {"c", 1}}};
    gguf_value srows[2] = {{.type = GGUF_TYPE_ARRAY}, {.type = GGUF_TYPE_ARRAY}};
    srows[0].arr.elem_type = GGUF_TYPE_STRING, srows[0].arr.n = 2, srows[0].arr.items = sv;
    srows[1].arr.elem_type = GGUF_TYPE_STRING, srows[1].arr.n = 1, srows[1].arr.items = sv + 2;
    gguf_value nested_strs = {.type = GGUF_TYPE_ARRAY};
    nested_strs.arr.elem_type = GGUF_TYPE_ARRAY, nested_strs.arr.n = 2, nested_strs.arr.items = srows;
    gguf_writer_set_value(w, "n.strs", &nested_strs);
    gguf_value empty_nest = {.type = GGUF_TYPE_ARRAY};
    empty_nest.arr.elem_type = GGUF_TYPE_ARRAY;
    gguf_writer_set_value(w, "n.empty", &empty_nest);
    gguf_value levels[8];
    uint8_t leaf = 42;
    for (int d = 7; d >= 0; d--) {
        levels[d] = (gguf_value){.type = GGUF_TYPE_ARRAY};
        levels[d].arr.n = 1;
        if (d == 7) levels[d].arr.elem_type = GGUF_TYPE_UINT8, levels[d].arr.raw = &leaf;
        else levels[d].arr.elem_type = GGUF_TYPE_ARRAY, levels[d].arr.items = &levels[d + 1];
    }
    gguf_writer_set_value(w, "n.deep8", &levels[0]);

    /* tensors of every type flatkv computes, odd shapes, random bytes */
    struct {
        const char *name;
        ggml_type type;
        uint32_t n_dims;
        uint64_t ne[4];
        size_t nbytes;
    } ts[] = {
        {"t.f32", GGML_TYPE_F32, 2, {3, 5}, 60},
        {"t.f16", GGML_TYPE_F16, 3, {7, 3, 2}, 84},
        {"t.q8_0", GGML_TYPE_Q8_0, 2, {64, 3}, 2 * 34 * 3},
        {"t.q4_0", GGML_TYPE_Q4_0, 4, {32, 1, 1, 3}, 18 * 3},
        {"t.one", GGML_TYPE_F32, 1, {1}, 4},
    };
    uint8_t *data[5];
    fkv_error err = {0};
    for (int i = 0; i < 5; i++) {
        data[i] = malloc(ts[i].nbytes);
        fill_random(data[i], ts[i].nbytes, 7 + (uint64_t)i);
        if (gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, data[i], &err) != 0)
            fail_msg("%s", err.msg);
    }
    const char *path = tu_tmp_path(".gguf");
    if (gguf_writer_write(w, path, &err) != 0) fail_msg("%s", err.msg);
    gguf_writer_free(w);

    gguf_file *f = gguf_open(path, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(f->version, 3);
    assert_int_equal(f->alignment, 64);
    assert_int_equal(f->n_kv, 15 + 11 + 3 + 4);

    assert_int_equal(must_find(f, "s.u8")->type, GGUF_TYPE_UINT8);
    assert_int_equal(must_find(f, "s.u8")->u64, 200);
    assert_int_equal(must_find(f, "s.i8")->i64, -100);
    assert_int_equal(must_find(f, "s.u16")->u64, 60000);
    assert_int_equal(must_find(f, "s.i16")->i64, -30000);
    assert_int_equal(must_find(f, "s.u32")->u64, 4000000000u);
    assert_int_equal(must_find(f, "s.i32")->type, GGUF_TYPE_INT32);
    assert_true(must_find(f, "s.i32")->i64 == -2000000000);
    assert_true(must_find(f, "s.f32")->f64 == -3.25);
    assert_int_equal(must_find(f, "s.true")->u64, 1);
    assert_int_equal(must_find(f, "s.false")->type, GGUF_TYPE_BOOL);
    assert_int_equal(must_find(f, "s.false")->u64, 0);
    assert_str(must_find(f, "s.str")->str, "h\xc3\xa9llo, world");
    assert_int_equal(must_find(f, "s.empty")->type, GGUF_TYPE_STRING);
    assert_int_equal(must_find(f, "s.empty")->str.len, 0);
    assert_true(must_find(f, "s.u64")->u64 == UINT64_MAX);
    assert_true(must_find(f, "s.i64")->i64 == INT64_MIN);
    assert_true(must_find(f, "s.f64")->f64 == 1e300);

    for (int t = 0; t < 11; t++) {
        const gguf_value *v;
        if (gguf_get_arr(f, key[t], fixed[t], &v, &err) != 0) fail_msg("%s", err.msg);
        assert_int_equal(v->arr.n, 7);
        assert_null(v->arr.items);
        assert_memory_equal(v->arr.raw, raw[t], 7 * gguf_type_size(fixed[t]));
    }
    const gguf_value *v;
    assert_int_equal(gguf_get_arr(f, "a.int8", -1, &v, &err), 0);
    assert_int_equal(gguf_arr_int(v, 3), (int8_t)raw[1][3]);
    assert_int_equal(gguf_get_arr(f, "a.float32", GGUF_TYPE_FLOAT32, &v, &err), 0);
    assert_true(gguf_arr_float(v, 0) == -1.125);
    assert_int_equal(gguf_get_arr(f, "a.empty", GGUF_TYPE_UINT32, &v, &err), 0);
    assert_int_equal(v->arr.n, 0);
    assert_int_equal(gguf_get_arr(f, "a.str", GGUF_TYPE_STRING, &v, &err), 0);
    assert_int_equal(v->arr.n, 3);
    assert_str(v->arr.items[0].str, "alpha");
    assert_str(v->arr.items[1].str, "");
    assert_str(v->arr.items[2].str, "\xce\xb3");
    assert_int_equal(gguf_get_arr(f, "a.str.empty", GGUF_TYPE_STRING, &v, &err), 0);
    assert_int_equal(v->arr.n, 0);
    assert_true(value_eq(must_find(f, "n.ints"), &nested_ints));
    assert_int_equal(must_find(f, "n.ints")->arr.items[2].arr.n, 1);
    assert_int_equal(gguf_arr_int(&must_find(f, "n.ints")->arr.items[0], 2), 3);
    assert_true(value_eq(must_find(f, "n.strs"), &nested_strs));
    assert_str(must_find(f, "n.strs")->arr.items[1].arr.items[0].str, "c");
    assert_true(value_eq(must_find(f, "n.empty"), &empty_nest));
    assert_true(value_eq(must_find(f, "n.deep8"), &levels[0]));

    assert_int_equal(f->n_tensors, 5);
    assert_int_equal(f->data_offset % 64, 0);
    for (int i = 0; i < 5; i++) {
        const gguf_tensor *t = gguf_find_tensor(f, ts[i].name);
        if (!t) fail_msg("tensor %s missing", ts[i].name);
        assert_int_equal(t->type, ts[i].type);
        assert_int_equal(t->n_dims, ts[i].n_dims);
        for (int d = 0; d < GGUF_MAX_DIMS; d++) assert_int_equal(t->ne[d], d < (int)ts[i].n_dims ? ts[i].ne[d] : 1);
        assert_int_equal(t->nbytes, ts[i].nbytes);
        assert_int_equal(t->offset % 64, 0);
        assert_int_equal((const uint8_t *)t->data - (f->map + f->data_offset), t->offset);
        assert_int_equal((uintptr_t)t->data % 64, 0); /* the mapping is page-aligned */
        assert_memory_equal(t->data, data[i], ts[i].nbytes);
        free(data[i]);
    }
    /* the file ends where the last tensor does, and padding is zeros */
    const gguf_tensor *last = &f->tensors[4];
    assert_int_equal(f->data_offset + last->offset + last->nbytes, f->size);
    const gguf_tensor *first = &f->tensors[0];
    for (uint64_t o = first->offset + first->nbytes; o < f->tensors[1].offset; o++)
        assert_int_equal(f->map[f->data_offset + o], 0);
    gguf_close(f);
    remove(path);
}

static void test_setting_a_key_twice_replaces_it(void **state) {
    (void)state;
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_u32(w, "k", 1);
    gguf_writer_set_str(w, "other", "x");
    gguf_writer_set_str(w, "k", "two");
    fkv_error err = {0};
    const char *path = tu_tmp_path(".gguf");
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, &err);
    assert_non_null(f);
    assert_int_equal(f->n_kv, 2);
    assert_str(f->kv[0].key, "k"); /* kept its place */
    gguf_str s;
    assert_int_equal(gguf_get_str(f, "k", &s, &err), 0);
    assert_str(s, "two");
    gguf_close(f);
    remove(path);
}

static void test_set_value_deep_copies_a_tokenizer_from_another_file(void **state) {
    (void)state;
    fkv_error err = {0};
    const char *src_path = tu_data("tokenizers/ggml-vocab-llama-spm.gguf");
    gguf_file *src = gguf_open(src_path, &err);
    if (!src) fail_msg("%s", err.msg);
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < src->n_kv; i++) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)src->kv[i].key.len, src->kv[i].key.ptr);
        gguf_writer_set_value(w, key, &src->kv[i].value);
    }
    uint64_t n_kv = src->n_kv;
    gguf_close(src); /* the writer must not point into the unmapped file */
    const char *path = tu_tmp_path(".gguf");
    if (gguf_writer_write(w, path, &err) != 0) fail_msg("%s", err.msg);
    gguf_writer_free(w);

    gguf_file *copy = gguf_open(path, &err);
    src = gguf_open(tu_data("tokenizers/ggml-vocab-llama-spm.gguf"), &err);
    assert_non_null(copy);
    assert_non_null(src);
    assert_int_equal(copy->n_kv, n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        assert_int_equal(copy->kv[i].key.len, src->kv[i].key.len);
        assert_memory_equal(copy->kv[i].key.ptr, src->kv[i].key.ptr, src->kv[i].key.len);
        if (!value_eq(&copy->kv[i].value, &src->kv[i].value))
            fail_msg("value of key %.*s differs", (int)src->kv[i].key.len, src->kv[i].key.ptr);
    }
    gguf_close(copy);
    gguf_close(src);
    remove(path);
}

/* ------------------------------------------------------------------------------------------------ */
/* getters and type tables */

static void test_getters_convert_only_values_that_fit(void **state) {
    (void)state;
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_value(w, "u8", &(gguf_value){.type = GGUF_TYPE_UINT8, .u64 = 7});
    gguf_writer_set_i32(w, "i32.pos", 12);
    gguf_writer_set_i32(w, "i32.neg", -1);
    gguf_writer_set_value(w, "u64.big", &(gguf_value){.type = GGUF_TYPE_UINT64, .u64 = 1ull << 32});
    gguf_writer_set_value(w, "i64.max", &(gguf_value){.type = GGUF_TYPE_INT64, .i64 = UINT32_MAX});
    gguf_writer_set_value(w, "f64", &(gguf_value){.type = GGUF_TYPE_FLOAT64, .f64 = 0.5});
    gguf_writer_set_value(w, "f64.huge", &(gguf_value){.type = GGUF_TYPE_FLOAT64, .f64 = 1e300});
    gguf_writer_set_f32(w, "f32", 1.5f);
    gguf_writer_set_bool(w, "b", true);
    gguf_writer_set_str(w, "s", "text");
    uint64_t u64s[] = {UINT64_MAX, 5};
    gguf_writer_set_arr(w, "a.u64", GGUF_TYPE_UINT64, u64s, 2);
    gguf_str strs[] = {{"x", 1}};
    gguf_writer_set_arr_str(w, "a.str", strs, 1);
    float floats[] = {-2.75f, 1e30f, -1e30f, NAN};
    gguf_writer_set_arr(w, "a.f32", GGUF_TYPE_FLOAT32, floats, 4);
    fkv_error err = {0};
    const char *path = tu_tmp_path(".gguf");
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    gguf_writer_free(w);
    gguf_file *f = gguf_open(path, &err);
    assert_non_null(f);

    uint32_t u = 0;
    float x = 0;
    bool b = false;
    gguf_str s;
    const gguf_value *v;
    assert_int_equal(gguf_get_u32(f, "u8", &u, &err), 0);
    assert_int_equal(u, 7);
    assert_int_equal(gguf_get_u32(f, "i32.pos", &u, &err), 0);
    assert_int_equal(u, 12);
    assert_int_equal(gguf_get_u32(f, "i64.max", &u, &err), 0);
    assert_int_equal(u, UINT32_MAX);
    assert_int_equal(gguf_get_u32(f, "i32.neg", &u, &err), -1);
    assert_non_null(strstr(err.msg, "'i32.neg' = -1 does not fit in uint32"));
    assert_int_equal(gguf_get_u32(f, "u64.big", &u, &err), -1);
    assert_non_null(strstr(err.msg, "4294967296 does not fit"));
    assert_int_equal(gguf_get_u32(f, "s", &u, &err), -1);
    assert_non_null(strstr(err.msg, "key 's' has type string, expected an integer"));
    assert_int_equal(gguf_get_u32(f, "nope", &u, &err), -1);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "key 'nope' is absent"));
    assert_int_equal(gguf_get_f32(f, "f64", &x, &err), 0);
    assert_true(x == 0.5f);
    assert_int_equal(gguf_get_f32(f, "f32", &x, &err), 0);
    assert_true(x == 1.5f);
    assert_int_equal(gguf_get_f32(f, "f64.huge", &x, &err), -1);
    assert_non_null(strstr(err.msg, "does not fit in float32"));
    assert_int_equal(gguf_get_f32(f, "u8", &x, &err), -1);
    assert_non_null(strstr(err.msg, "has type uint8, expected float32 or float64"));
    assert_int_equal(gguf_get_bool(f, "b", &b, &err), 0);
    assert_true(b);
    assert_int_equal(gguf_get_bool(f, "u8", &b, &err), -1);
    assert_int_equal(gguf_get_str(f, "s", &s, &err), 0);
    assert_str(s, "text");
    assert_false(gguf_str_eq(s, "texT"));
    assert_false(gguf_str_eq(s, "tex"));
    assert_int_equal(gguf_get_str(f, "b", &s, &err), -1);
    assert_int_equal(gguf_get_arr(f, "a.str", GGUF_TYPE_INT32, &v, &err), -1);
    assert_non_null(strstr(err.msg, "is an array of string, expected an array of int32"));
    assert_int_equal(gguf_get_arr(f, "s", -1, &v, &err), -1);
    assert_int_equal(gguf_get_arr(f, "a.u64", GGUF_TYPE_UINT64, &v, &err), 0);
    assert_true(gguf_arr_int(v, 0) == INT64_MAX); /* saturates rather than wrapping negative */
    assert_int_equal(gguf_arr_int(v, 1), 5);
    assert_true(gguf_arr_float(v, 1) == 5.0);
    assert_int_equal(gguf_arr_int(v, 2), 0); /* out of range */
    assert_int_equal(gguf_get_arr(f, "a.f32", GGUF_TYPE_FLOAT32, &v, &err), 0);
    assert_int_equal(gguf_arr_int(v, 0), -2); /* truncates toward zero */
    assert_true(gguf_arr_int(v, 1) == INT64_MAX); /* saturates: out-of-range conversion is undefined in C */
    assert_true(gguf_arr_int(v, 2) == INT64_MIN);
    assert_int_equal(gguf_arr_int(v, 3), 0);
    assert_true(gguf_arr_float(v, 0) == -2.75);
    assert_null(gguf_find_tensor(f, "none"));
    gguf_close(f);
    remove(path);
}

static void test_type_tables_match_ggml(void **state) {
    (void)state;
    static const struct {
        uint32_t id, elems, bytes;
        const char *name;
    } known[] = {
        {GGML_TYPE_F32, 1, 4, "f32"},          {GGML_TYPE_F16, 1, 2, "f16"},
        {GGML_TYPE_BF16, 1, 2, "bf16"},        {GGML_TYPE_Q4_0, 32, 18, "q4_0"},
        {GGML_TYPE_Q4_1, 32, 20, "q4_1"},      {GGML_TYPE_Q5_0, 32, 22, "q5_0"},
        {GGML_TYPE_Q5_1, 32, 24, "q5_1"},      {GGML_TYPE_Q8_0, 32, 34, "q8_0"},
        {GGML_TYPE_Q8_1, 32, 36, "q8_1"},      {GGML_TYPE_Q2_K, 256, 84, "q2_K"},
        {GGML_TYPE_Q3_K, 256, 110, "q3_K"},    {GGML_TYPE_Q4_K, 256, 144, "q4_K"},
        {GGML_TYPE_Q5_K, 256, 176, "q5_K"},    {GGML_TYPE_Q6_K, 256, 210, "q6_K"},
        {GGML_TYPE_Q8_K, 256, 292, "q8_K"},    {GGML_TYPE_IQ2_XXS, 256, 66, "iq2_xxs"},
        {GGML_TYPE_IQ2_XS, 256, 74, "iq2_xs"}, {GGML_TYPE_IQ3_XXS, 256, 98, "iq3_xxs"},
        {GGML_TYPE_IQ1_S, 256, 50, "iq1_s"},   {GGML_TYPE_IQ4_NL, 32, 18, "iq4_nl"},
        {GGML_TYPE_IQ3_S, 256, 110, "iq3_s"},  {GGML_TYPE_IQ2_S, 256, 82, "iq2_s"},
        {GGML_TYPE_IQ4_XS, 256, 136, "iq4_xs"}, {GGML_TYPE_I8, 1, 1, "i8"},
        {GGML_TYPE_I16, 1, 2, "i16"},          {GGML_TYPE_I32, 1, 4, "i32"},
        {GGML_TYPE_I64, 1, 8, "i64"},          {GGML_TYPE_F64, 1, 8, "f64"},
        {GGML_TYPE_IQ1_M, 256, 56, "iq1_m"},   {GGML_TYPE_TQ1_0, 256, 54, "tq1_0"},
        {GGML_TYPE_TQ2_0, 256, 66, "tq2_0"},    {GGML_TYPE_MXFP4, 32, 17, "mxfp4"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint32_t e = 0, b = 0;
        assert_true(ggml_type_geometry(known[i].id, &e, &b));
        assert_int_equal(e, known[i].elems);
        assert_int_equal(b, known[i].bytes);
        assert_string_equal(ggml_type_name(known[i].id), known[i].name);
        assert_int_equal(ggml_row_size((ggml_type)known[i].id, 3 * (uint64_t)e), 3 * b);
    }
    const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        assert_false(ggml_type_geometry(removed[i], NULL, NULL));
        assert_string_equal(ggml_type_name(removed[i]), "unknown");
    }
    assert_int_equal(gguf_type_size(GGUF_TYPE_BOOL), 1);
    assert_int_equal(gguf_type_size(GGUF_TYPE_FLOAT64), 8);
    assert_int_equal(gguf_type_size(GGUF_TYPE_STRING), 0);
    assert_int_equal(gguf_type_size(GGUF_TYPE_ARRAY), 0);
    assert_string_equal(gguf_type_name(GGUF_TYPE_INT16), "int16");
    assert_string_equal(gguf_type_name(GGUF_TYPE_COUNT), "invalid");
}

/* ------------------------------------------------------------------------------------------------ */
/* refusals */

static void test_each_corruption_is_refused_with_its_own_message(void **state) {
    (void)state;
    tb b = {0};
    const uint64_t ne32[] = {32};

    /* header */
    tb_bytes(&b, "GGJT", 4), tb_u32(&b, 3), tb_u64(&b, 0), tb_u64(&b, 0);
    expect_refused(&b, "bad magic 47 47 4a 54 (\"GGJT\")");
    tb_header(&b, 1, 0, 0);
    expect_refused(&b, "unsupported version 1 ");
    tb_header(&b, 4, 0, 0);
    expect_refused(&b, "unsupported version 4 ");
    tb_header(&b, 0x03000000, 0, 0);
    expect_refused(&b, "big-endian");
    tb_bytes(&b, "GGUF", 4), tb_u32(&b, 3), tb_u32(&b, 0);
    expect_refused(&b, "truncated while reading the tensor count");
    tb_header(&b, 3, 0, 1ull << 40), tb_zeros(&b, 64);
    expect_refused(&b, "n_kv 1099511627776 is absurd");
    tb_header(&b, 3, 1ull << 40, 0), tb_zeros(&b, 64);
    expect_refused(&b, "n_tensors 1099511627776 is absurd");

    /* metadata */
    tb_header(&b, 3, 0, 2), tb_key(&b, "a", GGUF_TYPE_STRING);
    tb_str(&b, "a long enough string value that makes the count look plausible.....");
    tb_u32(&b, 1);
    expect_refused(&b, "truncated while reading the key of metadata entry 1");
    tb_header(&b, 3, 0, 1), tb_str(&b, "xxxxx"), tb_u8(&b, 1), tb_u8(&b, 0);
    expect_refused(&b, "truncated while reading the type of key 'xxxxx'");
    tb_header(&b, 3, 0, 1), tb_key(&b, "x", GGUF_TYPE_UINT64), tb_zeros(&b, 3);
    expect_refused(&b, "truncated while reading the value of key 'x'");
    tb_header(&b, 3, 0, 1), tb_u64(&b, UINT64_MAX), tb_zeros(&b, 20);
    expect_refused(&b, "in the key of metadata entry 0: string length 18446744073709551615 runs past the end");
    tb_header(&b, 3, 0, 1), tb_key(&b, "s", GGUF_TYPE_STRING), tb_u64(&b, 1000), tb_zeros(&b, 5);
    expect_refused(&b, "in the value of key 's': string length 1000 runs past the end");
    tb_header(&b, 3, 0, 1), tb_key(&b, "a", GGUF_TYPE_ARRAY), tb_u32(&b, GGUF_TYPE_UINT64);
    tb_u64(&b, (1ull << 61) + 1), tb_zeros(&b, 8); /* n * 8 wraps to 8 */
    expect_refused(&b, "array of 2305843009213693953 uint64 elements (8 bytes each) runs past the end");
    tb_header(&b, 3, 0, 1), tb_key(&b, "a", GGUF_TYPE_ARRAY), tb_u32(&b, GGUF_TYPE_STRING);
    tb_u64(&b, 1ull << 40), tb_zeros(&b, 8);
    expect_refused(&b, "array of 1099511627776 string elements (at least 8 bytes each)");
    tb_header(&b, 3, 0, 1), tb_key(&b, "k", GGUF_TYPE_COUNT), tb_zeros(&b, 8);
    expect_refused(&b, "key 'k' (metadata entry 0) has invalid type id 13");
    tb_header(&b, 3, 0, 1), tb_key(&b, "k", GGUF_TYPE_ARRAY), tb_u32(&b, 77), tb_u64(&b, 0);
    expect_refused(&b, "in the value of key 'k': invalid array element type id 77");
    tb_header(&b, 3, 0, 1), tb_key(&b, "b", GGUF_TYPE_BOOL), tb_u8(&b, 2), tb_zeros(&b, 4);
    expect_refused(&b, "in the value of key 'b': bool value 2");
    tb_header(&b, 3, 0, 1), tb_key(&b, "b", GGUF_TYPE_ARRAY), tb_u32(&b, GGUF_TYPE_BOOL), tb_u64(&b, 3);
    tb_u8(&b, 1), tb_u8(&b, 0), tb_u8(&b, 9);
    expect_refused(&b, "bool element 2 is 9, neither 0 nor 1");
    tb_header(&b, 3, 0, 1), tb_key(&b, "n", GGUF_TYPE_ARRAY);
    for (int d = 0; d < 8; d++) tb_u32(&b, GGUF_TYPE_ARRAY), tb_u64(&b, 1);
    tb_u32(&b, GGUF_TYPE_UINT8), tb_u64(&b, 0); /* the 9th level */
    expect_refused(&b, "in the value of key 'n': arrays nested deeper than 8 levels");
    tb_header(&b, 3, 0, 1), tb_key(&b, "n", GGUF_TYPE_ARRAY);
    for (int d = 0; d < 100000; d++) tb_u32(&b, GGUF_TYPE_ARRAY), tb_u64(&b, 1); /* would blow an unbounded stack */
    expect_refused(&b, "arrays nested deeper than 8 levels");
    tb_header(&b, 3, 0, 3), tb_key(&b, "dup", GGUF_TYPE_UINT32), tb_u32(&b, 1);
    tb_key(&b, "other", GGUF_TYPE_UINT8), tb_u8(&b, 1), tb_key(&b, "dup", GGUF_TYPE_UINT32), tb_u32(&b, 2);
    expect_refused(&b, "duplicate key 'dup' (entries 0 and 2)");
    tb_header(&b, 3, 0, 1), tb_key(&b, "general.alignment", GGUF_TYPE_UINT32), tb_u32(&b, 48);
    expect_refused(&b, "general.alignment 48 is not a nonzero power of two");
    tb_header(&b, 3, 0, 1), tb_key(&b, "general.alignment", GGUF_TYPE_UINT32), tb_u32(&b, 0);
    expect_refused(&b, "general.alignment 0 is not a nonzero power of two");
    tb_header(&b, 3, 0, 1), tb_key(&b, "general.alignment", GGUF_TYPE_UINT64), tb_u64(&b, 64);
    expect_refused(&b, "general.alignment has type uint64, expected uint32");

    /* tensor infos */
    tb_header(&b, 3, 1, 0), tb_str(&b, "a_tensor_with_a_long_name"), tb_u32(&b, 1), tb_u64(&b, 32), tb_u8(&b, 0);
    expect_refused(&b, "truncated while reading the type of tensor 'a_tensor_with_a_long_name'");
    tb_one_tensor(&b, 1, ne32, 4, 0, 128);
    expect_refused(&b, "tensor 'w' has unknown ggml type id 4");
    tb_one_tensor(&b, 1, ne32, 31, 0, 128);
    expect_refused(&b, "tensor 'w' has unknown ggml type id 31");
    tb_one_tensor(&b, 1, ne32, GGML_TYPE_COUNT, 0, 128);
    expect_refused(&b, "tensor 'w' has unknown ggml type id 40");
    tb_header(&b, 3, 1, 0), tb_str(&b, "w"), tb_u32(&b, 0), tb_u32(&b, 0), tb_u64(&b, 0), tb_zeros(&b, 32);
    expect_refused(&b, "tensor 'w' has n_dims 0, outside 1..4");
    tb_one_tensor(&b, 5, (uint64_t[]){32, 1, 1, 1, 1}, GGML_TYPE_F32, 0, 128);
    expect_refused(&b, "tensor 'w' has n_dims 5, outside 1..4");
    tb_one_tensor(&b, 2, (uint64_t[]){32, 0}, GGML_TYPE_F32, 0, 128);
    expect_refused(&b, "tensor 'w' has dimension 1 equal to zero");
    tb_one_tensor(&b, 2, (uint64_t[]){1ull << 32, 1ull << 32}, GGML_TYPE_F32, 0, 128);
    expect_refused(&b, "tensor 'w' has dims whose product overflows");
    tb_one_tensor(&b, 1, (uint64_t[]){1ull << 62}, GGML_TYPE_F64, 0, 128);
    expect_refused(&b, "tensor 'w' has a byte size that overflows 64 bits");
    tb_one_tensor(&b, 2, (uint64_t[]){33, 2}, GGML_TYPE_Q8_0, 0, 128);
    expect_refused(&b, "tensor 'w' has a row length (ne[0]) of 33, not a multiple of the q8_0 block size 32");
    tb_one_tensor(&b, 1, ne32, GGML_TYPE_F32, 4, 132);
    expect_refused(&b, "tensor 'w' has offset 4, not a multiple of the alignment 32");
    tb_one_tensor(&b, 1, ne32, GGML_TYPE_F32, 0, 127);
    expect_refused(&b, "tensor 'w': data [offset 0, size 128] runs past the end of the file");
    tb_one_tensor(&b, 1, ne32, GGML_TYPE_F32, UINT64_MAX - 31, 128); /* offset + size wraps around */
    expect_refused(&b, "tensor 'w': data [offset 18446744073709551584, size 128] runs past the end");
    tb_header(&b, 3, 2, 0), tb_tensor(&b, "w", 1, ne32, GGML_TYPE_F32, 0);
    tb_tensor(&b, "w", 1, ne32, GGML_TYPE_F32, 128), tb_pad(&b, 32), tb_zeros(&b, 256);
    expect_refused(&b, "duplicate tensor name 'w' (entries 0 and 1)");
    tb_header(&b, 3, 1, 0), tb_tensor(&b, "bad\n\x01name", 1, ne32, 5, 0), tb_pad(&b, 32), tb_zeros(&b, 128);
    expect_refused(&b, "tensor 'bad??name' has unknown ggml type id 5"); /* control bytes do not reach the message */
}

static void test_files_the_reader_must_accept_open(void **state) {
    (void)state;
    fkv_error err = {0};
    uint8_t *copy;
    tb b = {0};
    /* v2 (same layout as v3 for little-endian files) */
    tb_header(&b, 2, 0, 1), tb_key(&b, "k", GGUF_TYPE_UINT16), tb_bytes(&b, &(uint16_t){513}, 2);
    gguf_file *f = open_copy(b.p, b.n, &copy, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(f->version, 2);
    assert_int_equal(must_find(f, "k")->u64, 513);
    gguf_close(f);
    free(copy);
    free(b.p);
    b = (tb){0};
    /* exactly 8 levels of arrays */
    tb_header(&b, 3, 0, 1), tb_key(&b, "n", GGUF_TYPE_ARRAY);
    for (int d = 0; d < 7; d++) tb_u32(&b, GGUF_TYPE_ARRAY), tb_u64(&b, 1);
    tb_u32(&b, GGUF_TYPE_UINT8), tb_u64(&b, 1), tb_u8(&b, 9);
    f = open_copy(b.p, b.n, &copy, &err);
    if (!f) fail_msg("%s", err.msg);
    const gguf_value *v = must_find(f, "n");
    for (int d = 0; d < 7; d++) v = &v->arr.items[0];
    assert_int_equal(gguf_arr_int(v, 0), 9);
    gguf_close(f);
    free(copy);
    free(b.p);
    b = (tb){0};
    /* no tensors and no padding after the metadata (as llama.cpp's vocab files are) */
    tb_header(&b, 3, 0, 1), tb_key(&b, "k", GGUF_TYPE_UINT8), tb_u8(&b, 1);
    f = open_copy(b.p, b.n, &copy, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(f->n_tensors, 0);
    gguf_close(f);
    free(copy);
    free(b.p);
}

static void test_truncation_at_every_length_is_refused(void **state) {
    (void)state;
    size_t size;
    uint8_t *bytes = small_file(&size);
    fkv_error err;
    for (size_t n = 0; n < size; n++) {
        uint8_t *copy;
        err.msg[0] = 0;
        gguf_file *f = open_copy(bytes, n, &copy, &err);
        if (f) fail_msg("a file truncated to %zu of %zu bytes opened", n, size);
        assert_non_null(strstr(err.msg, "corrupt.gguf: "));
        free(copy);
    }
    uint8_t *copy;
    gguf_file *f = open_copy(bytes, size, &copy, &err);
    if (!f) fail_msg("%s", err.msg);
    walk_file(f);
    gguf_close(f);
    free(copy);

    /* the same through gguf_open, including an empty file (which cannot be mapped) */
    const size_t lengths[] = {0, 3, size / 2, size - 1};
    for (size_t i = 0; i < 4; i++) {
        const char *path = tu_tmp_path(".gguf");
        assert_int_equal(tu_write_file(path, bytes, lengths[i]), 0);
        err.msg[0] = 0;
        assert_null(gguf_open(path, &err));
        assert_non_null(strstr(err.msg, path));
        remove(path);
    }
    free(bytes);
}

static void test_random_byte_flips_never_crash(void **state) {
    (void)state;
    size_t size;
    uint8_t *bytes = small_file(&size);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int opened = 0, refused = 0;
    for (int trial = 0; trial < 4000; trial++) {
        uint8_t *copy = malloc(size);
        memcpy(copy, bytes, size);
        /* half the trials aim at the header and infos, where a flip changes how the file is parsed */
        size_t span = trial % 2 ? size : size / 2;
        int flips = 1 + (int)(rng_next(&seed) % 4);
        for (int k = 0; k < flips; k++) copy[rng_next(&seed) % span] ^= (uint8_t)(1 + rng_next(&seed) % 255);
        fkv_error err = {0};
        gguf_file *f = gguf_open_buffer(copy, size, "flipped.gguf", &err);
        if (f) {
            opened++;
            walk_file(f);
            gguf_close(f);
        } else {
            refused++;
            if (!strstr(err.msg, "flipped.gguf: ")) fail_msg("trial %d: message without the file name: %s", trial, err.msg);
        }
        free(copy);
    }
    assert_true(opened > 100); /* flips in data and values open fine ... */
    assert_true(refused > 100); /* ... flips in structure are refused */
    free(bytes);
}

static void test_a_missing_file_is_refused_naming_the_path(void **state) {
    (void)state;
    fkv_error err = {0};
    assert_null(gguf_open("/nonexistent/dir/model.gguf", &err));
    assert_non_null(strstr(err.msg, "/nonexistent/dir/model.gguf"));
    assert_null(gguf_open(tu_data("models"), &err));
    assert_non_null(strstr(err.msg, "not a regular file"));
}

static void test_writer_refuses_what_the_reader_would_refuse(void **state) {
    (void)state;
    fkv_error err = {0};
    uint8_t data[256] = {0};
    gguf_writer *w = gguf_writer_new();
    assert_int_equal(gguf_writer_add_tensor(w, "q", GGML_TYPE_Q8_0, 1, (uint64_t[]){33}, data, &err), -1);
    assert_non_null(strstr(err.msg, "tensor 'q' has a row length (ne[0]) of 33"));
    assert_int_equal(gguf_writer_add_tensor(w, "q", 4, 1, (uint64_t[]){1}, data, &err), -1);
    assert_non_null(strstr(err.msg, "unknown ggml type id 4"));
    assert_int_equal(gguf_writer_add_tensor(w, "q", GGML_TYPE_F32, 5, (uint64_t[]){1, 1, 1, 1, 1}, data, &err), -1);
    assert_non_null(strstr(err.msg, "n_dims 5"));
    assert_int_equal(gguf_writer_add_tensor(w, "q", GGML_TYPE_F32, 1, (uint64_t[]){4}, data, &err), 0);
    assert_int_equal(gguf_writer_add_tensor(w, "q", GGML_TYPE_F32, 1, (uint64_t[]){4}, data, &err), -1);
    assert_non_null(strstr(err.msg, "duplicate tensor name 'q'"));

    const char *bad_dir = "/nonexistent/dir/out.gguf";
    assert_int_equal(gguf_writer_write(w, bad_dir, &err), -1);
    assert_non_null(strstr(err.msg, bad_dir));

    const char *path = tu_tmp_path(".gguf");
    gguf_writer_set_u32(w, "general.alignment", 48);
    assert_int_equal(gguf_writer_write(w, path, &err), -1);
    assert_non_null(strstr(err.msg, "general.alignment must be a nonzero power of two"));
    gguf_writer_set_u32(w, "general.alignment", 16);
    assert_int_equal(gguf_writer_write(w, path, &err), 0);
    remove(path);
    gguf_writer_free(w);

    w = gguf_writer_new();
    gguf_writer_set_arr(w, "bools", GGUF_TYPE_BOOL, (uint8_t[]){0, 2}, 2);
    assert_int_equal(gguf_writer_write(w, path, &err), -1);
    assert_non_null(strstr(err.msg, "key 'bools': bool element 1 is 2"));
    gguf_writer_free(w);

    w = gguf_writer_new();
    gguf_value levels[9];
    for (int d = 8; d >= 0; d--) {
        levels[d] = (gguf_value){.type = GGUF_TYPE_ARRAY};
        if (d == 8) levels[d].arr.elem_type = GGUF_TYPE_UINT8;
        else levels[d].arr.elem_type = GGUF_TYPE_ARRAY, levels[d].arr.n = 1, levels[d].arr.items = &levels[d + 1];
    }
    gguf_writer_set_value(w, "deep", &levels[0]);
    assert_int_equal(gguf_writer_write(w, path, &err), -1);
    assert_non_null(strstr(err.msg, "key 'deep': arrays nested deeper than 8 levels"));
    gguf_writer_free(w);

    w = gguf_writer_new();
    gguf_writer_set_arr(w, "strs", GGUF_TYPE_STRING, NULL, 0);
    assert_int_equal(gguf_writer_write(w, path, &err), -1);
    assert_non_null(strstr(err.msg, "key 'strs': gguf_writer_set_arr takes fixed-size elements only"));
    gguf_writer_free(w);
}

/* ------------------------------------------------------------------------------------------------ */
/* real files */

static void test_stories260k_opens_with_its_tokenizer_and_weights(void **state) {
    (void)state;
    fkv_error err = {0};
    gguf_file *f = gguf_open(tu_data("models/stories260K.gguf"), &err);
    if (!f) fail_msg("%s", err.msg);
    gguf_str s;
    assert_int_equal(gguf_get_str(f, "general.architecture", &s, &err), 0);
    assert_str(s, "llama");
    const gguf_value *toks;
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, &err), 0);
    assert_int_equal(toks->arr.n, 512);
    assert_str(toks->arr.items[0].str, "<unk>");
    assert_str(toks->arr.items[3].str, "<0x00>");
    uint32_t u;
    assert_int_equal(gguf_get_u32(f, "llama.embedding_length", &u, &err), 0);
    assert_int_equal(u, 64);
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, GGML_TYPE_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 512);
    assert_int_equal(t->nbytes, 64 * 512 * 4);
    assert_int_equal((uintptr_t)t->data % f->alignment, 0);
    assert_non_null(gguf_find_tensor(f, "blk.4.ffn_down.weight"));
    walk_file(f);
    gguf_close(f);
}

static void test_every_shared_tokenizer_file_opens(void **state) {
    (void)state;
    fkv_error err = {0};
    gguf_file *f = gguf_open(tu_data("tokenizers/ggml-vocab-llama-spm.gguf"), &err);
    if (!f) fail_msg("%s", err.msg);
    const gguf_value *v;
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &v, &err), 0);
    assert_int_equal(v->arr.n, 32000);
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &v, &err), 0);
    assert_int_equal(v->arr.n, 32000);
    gguf_str s;
    assert_int_equal(gguf_get_str(f, "tokenizer.ggml.model", &s, &err), 0);
    assert_str(s, "llama");
    gguf_close(f);

    char dir[4096];
    snprintf(dir, sizeof dir, "%s", tu_data("tokenizers"));
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        f = gguf_open(path, &err);
        if (!f) fail_msg("%s", err.msg);
        assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &v, &err), 0);
        walk_file(f);
        gguf_close(f);
        n++;
    }
    closedir(d);
    assert_true(n >= 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_metadata_type_and_tensor_survives_a_round_trip),
        cmocka_unit_test(test_setting_a_key_twice_replaces_it),
        cmocka_unit_test(test_set_value_deep_copies_a_tokenizer_from_another_file),
        cmocka_unit_test(test_getters_convert_only_values_that_fit),
        cmocka_unit_test(test_type_tables_match_ggml),
        cmocka_unit_test(test_each_corruption_is_refused_with_its_own_message),
        cmocka_unit_test(test_files_the_reader_must_accept_open),
        cmocka_unit_test(test_truncation_at_every_length_is_refused),
        cmocka_unit_test(test_random_byte_flips_never_crash),
        cmocka_unit_test(test_a_missing_file_is_refused_naming_the_path),
        cmocka_unit_test(test_writer_refuses_what_the_reader_would_refuse),
        cmocka_unit_test(test_stories260k_opens_with_its_tokenizer_and_weights),
        cmocka_unit_test(test_every_shared_tokenizer_file_opens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
