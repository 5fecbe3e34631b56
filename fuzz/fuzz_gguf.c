/* fuzz_gguf.c — the GGUF reader (src/gguf/gguf.c) on arbitrary bytes, through gguf_open_buffer.
 *
 * Asserts gguf.h's INVARIANT for every file the reader accepts: each metadata key is found again by gguf_find
 * (keys are unique and indexed), every array element is readable, and every tensor is found by name, has a known
 * type, a size that follows from its dims, an aligned offset and data wholly inside the buffer. ASan turns any
 * read outside the input into a crash: the input is copied into a buffer of exactly its size.
 */
#include <stdint.h>

#include "fuzz.h"
#include "gguf/gguf.h"

static void check_value(const gguf_value *v, int depth) {
    FUZZ_CHECK(depth < 16, "arrays nested %d deep", depth);
    if (v->type != GGUF_TYPE_ARRAY) return;
    uint64_t n = v->arr.n < 64 ? v->arr.n : 64; /* a sample is enough: every element was bounds-checked alike */
    if (v->arr.items) {
        for (uint64_t i = 0; i < n; i++) check_value(&v->arr.items[i], depth + 1);
    } else if (v->arr.elem_type == GGUF_TYPE_FLOAT32 || v->arr.elem_type == GGUF_TYPE_FLOAT64) {
        for (uint64_t i = 0; i < n; i++) (void)gguf_arr_float(v, i);
    } else {
        for (uint64_t i = 0; i < n; i++) (void)gguf_arr_int(v, i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    fkv_error err = {0};
    gguf_file *f = gguf_open_buffer(copy, size, "fuzz.gguf", &err);
    if (!f) {
        FUZZ_CHECK(err.msg[0], "a refused file has no error message");
        free(copy);
        return 0;
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        FUZZ_CHECK((const uint8_t *)kv->key.ptr >= copy && (const uint8_t *)kv->key.ptr + kv->key.len <= copy + size,
                   "key %llu outside the file", (unsigned long long)i);
        char key[256];
        if (kv->key.len < sizeof key && !memchr(kv->key.ptr, 0, kv->key.len)) {
            memcpy(key, kv->key.ptr, kv->key.len);
            key[kv->key.len] = 0;
            FUZZ_CHECK(gguf_find(f, key) == &kv->value, "key %llu '%s' not found again", (unsigned long long)i, key);
            uint32_t u;
            float x;
            bool b;
            gguf_str s;
            (void)gguf_get_u32(f, key, &u, NULL);
            (void)gguf_get_f32(f, key, &x, NULL);
            (void)gguf_get_bool(f, key, &b, NULL);
            (void)gguf_get_str(f, key, &s, NULL);
        }
        check_value(&kv->value, 0);
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        uint32_t be, bb;
        FUZZ_CHECK(ggml_type_geometry(t->type, &be, &bb), "tensor %llu has unknown type %u", (unsigned long long)i,
                   (unsigned)t->type);
        FUZZ_CHECK(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS, "tensor %llu has %u dims", (unsigned long long)i,
                   t->n_dims);
        FUZZ_CHECK(t->ne[0] % be == 0, "tensor %llu row of %llu is not whole blocks of %u", (unsigned long long)i,
                   (unsigned long long)t->ne[0], be);
        /* nbytes is the rows' size times the other dims, with no overflow on the way. */
        uint64_t bytes = t->ne[0] / be * bb;
        bool overflow = false;
        for (int d = 1; d < GGUF_MAX_DIMS; d++) overflow |= __builtin_mul_overflow(bytes, t->ne[d], &bytes);
        FUZZ_CHECK(!overflow, "tensor %llu size overflows", (unsigned long long)i);
        FUZZ_CHECK(bytes == t->nbytes, "tensor %llu nbytes %llu, dims give %llu", (unsigned long long)i,
                   (unsigned long long)t->nbytes, (unsigned long long)bytes);
        FUZZ_CHECK(t->offset % f->alignment == 0, "tensor %llu offset %llu not aligned to %u", (unsigned long long)i,
                   (unsigned long long)t->offset, f->alignment);
        const uint8_t *d = t->data;
        FUZZ_CHECK(t->nbytes == 0 || (d >= copy && t->nbytes <= size && d - copy <= (ptrdiff_t)(size - t->nbytes)),
                   "tensor %llu data outside the file", (unsigned long long)i);
        if (t->nbytes) { /* touch both ends: ASan reports a read past the copy */
            volatile uint8_t first = d[0], last = d[t->nbytes - 1];
            (void)first, (void)last;
        }
        char name[256];
        if (t->name.len < sizeof name && !memchr(t->name.ptr, 0, t->name.len)) {
            memcpy(name, t->name.ptr, t->name.len);
            name[t->name.len] = 0;
            FUZZ_CHECK(gguf_find_tensor(f, name) == t, "tensor %llu '%s' not found again", (unsigned long long)i,
                       name);
        }
    }
    gguf_close(f);
    free(copy);
    return 0;
}
