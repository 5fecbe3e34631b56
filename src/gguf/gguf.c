/* gguf.c — GGUF reader (validate everything at open, then hand out pointers into the mapping) and writer.
 *
 * The reader walks the file once with a bounds-checked cursor. Every read names what it is reading
 * (the key of entry 5, the value of key 'x', the dims of tensor 'w') so that a truncated or corrupted
 * file is reported at the field at fault, not as a generic failure. All arithmetic on lengths, counts
 * and offsets is done against the bytes actually left, so no attacker-chosen number can overflow.
 * Counts are checked against the smallest encoding of an item before anything is allocated, so a
 * tiny file cannot ask for a huge allocation.
 *
 * The writer keeps owned deep copies of everything (keys, strings, arrays, tensor data) and lays the
 * file out only when written, so setters never fail visibly: an out-of-memory or an invalid value is
 * remembered and reported by gguf_writer_write.
 */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

/* Scalars are decoded with memcpy into host integers: the file is little-endian and so must the host be. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host"
#endif

/* Arrays of arrays recurse; a bound keeps a malicious file from exhausting the stack. */
#define GGUF_MAX_NESTING 8
/* Smallest encodings, used to refuse counts that the remaining bytes cannot possibly hold. */
#define MIN_KV_BYTES 13     /* u64 key length + u32 type + 1-byte value */
#define MIN_TENSOR_BYTES 32 /* u64 name length + u32 n_dims + one u64 dim + u32 type + u64 offset */
#define MIN_ARRAY_BYTES 12  /* u32 element type + u64 count */

/* ------------------------------------------------------------------------------------------------ */
/* types */

static const struct {
    const char *name;
    uint32_t block_elems, block_bytes;
} ggml_types[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = {"f32", 1, 4},           [GGML_TYPE_F16] = {"f16", 1, 2},
    [GGML_TYPE_Q4_0] = {"q4_0", 32, 18},       [GGML_TYPE_Q4_1] = {"q4_1", 32, 20},
    [GGML_TYPE_Q5_0] = {"q5_0", 32, 22},       [GGML_TYPE_Q5_1] = {"q5_1", 32, 24},
    [GGML_TYPE_Q8_0] = {"q8_0", 32, 34},       [GGML_TYPE_Q8_1] = {"q8_1", 32, 36},
    [GGML_TYPE_Q2_K] = {"q2_K", 256, 84},      [GGML_TYPE_Q3_K] = {"q3_K", 256, 110},
    [GGML_TYPE_Q4_K] = {"q4_K", 256, 144},     [GGML_TYPE_Q5_K] = {"q5_K", 256, 176},
    [GGML_TYPE_Q6_K] = {"q6_K", 256, 210},     [GGML_TYPE_Q8_K] = {"q8_K", 256, 292},
    [GGML_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66}, [GGML_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [GGML_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98}, [GGML_TYPE_IQ1_S] = {"iq1_s", 256, 50},
    [GGML_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},   [GGML_TYPE_IQ3_S] = {"iq3_s", 256, 110},
    [GGML_TYPE_IQ2_S] = {"iq2_s", 256, 82},    [GGML_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [GGML_TYPE_I8] = {"i8", 1, 1},             [GGML_TYPE_I16] = {"i16", 1, 2},
    [GGML_TYPE_I32] = {"i32", 1, 4},           [GGML_TYPE_I64] = {"i64", 1, 8},
    [GGML_TYPE_F64] = {"f64", 1, 8},           [GGML_TYPE_IQ1_M] = {"iq1_m", 256, 56},
    [GGML_TYPE_BF16] = {"bf16", 1, 2},         [GGML_TYPE_TQ1_0] = {"tq1_0", 256, 54},
    [GGML_TYPE_TQ2_0] = {"tq2_0", 256, 66},    [GGML_TYPE_MXFP4] = {"mxfp4", 32, 17},
    /* ids 4, 5, 31-33 and 36-38 were removed from ggml: their entries stay empty (unknown) */
};

bool ggml_type_geometry(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes) {
    if (type >= GGML_TYPE_COUNT || ggml_types[type].block_elems == 0) return false;
    if (block_elems) *block_elems = ggml_types[type].block_elems;
    if (block_bytes) *block_bytes = ggml_types[type].block_bytes;
    return true;
}

const char *ggml_type_name(uint32_t type) {
    return ggml_type_geometry(type, NULL, NULL) ? ggml_types[type].name : "unknown";
}

size_t ggml_row_size(ggml_type type, uint64_t n) {
    uint32_t be, bb;
    if (!ggml_type_geometry(type, &be, &bb)) return 0;
    return (size_t)(n / be * bb);
}

size_t gguf_type_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(gguf_type t) {
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "invalid";
}

static bool type_is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}
static bool type_is_unsigned(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}
static bool type_is_float(gguf_type t) { return t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64; }

/* Decode one little-endian scalar of type t at p into v (p may be unaligned). */
static void decode_scalar(gguf_type t, const uint8_t *p, gguf_value *v) {
    v->type = t;
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: v->u64 = p[0]; break;
    case GGUF_TYPE_INT8: v->i64 = (int8_t)p[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); v->u64 = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); v->i64 = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); v->u64 = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); v->i64 = x; break; }
    case GGUF_TYPE_UINT64: memcpy(&v->u64, p, 8); break;
    case GGUF_TYPE_INT64: memcpy(&v->i64, p, 8); break;
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, p, 4); v->f64 = x; break; }
    case GGUF_TYPE_FLOAT64: memcpy(&v->f64, p, 8); break;
    default: break;
    }
}

bool gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

/* s quoted and made printable for an error message (bytes outside ASCII 0x20..0x7e become '?'). */
static const char *show(gguf_str s, char buf[80]) {
    size_t n = s.len < 64 ? (size_t)s.len : 64, o = 0;
    buf[o++] = '\'';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        buf[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (n < s.len) o += (size_t)snprintf(buf + o, 80 - o, "...");
    buf[o++] = '\'';
    buf[o] = 0;
    return buf;
}

static gguf_str cstr(const char *c) { return (gguf_str){c, strlen(c)}; }

/* Shape validation shared by the reader and the writer. On failure writes why (a phrase following
 * "tensor 'name' ") and returns false. */
static bool tensor_geometry(uint32_t type, uint32_t n_dims, const uint64_t *ne, uint64_t *nbytes,
                            char *why, size_t cap) {
    uint32_t be, bb;
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS) {
        snprintf(why, cap, "has n_dims %u, outside 1..%d", n_dims, GGUF_MAX_DIMS);
        return false;
    }
    if (!ggml_type_geometry(type, &be, &bb)) {
        snprintf(why, cap, "has unknown ggml type id %u", type);
        return false;
    }
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] == 0) {
            snprintf(why, cap, "has dimension %u equal to zero", d);
            return false;
        }
    if (ne[0] % be != 0) {
        snprintf(why, cap, "has a row length (ne[0]) of %llu, not a multiple of the %s block size %u",
                 (unsigned long long)ne[0], ggml_types[type].name, be);
        return false;
    }
    /* ggml holds element counts in int64_t, so the count must fit there, and the byte size in uint64. */
    uint64_t elems = 1, bytes;
    for (uint32_t d = 0; d < n_dims; d++)
        if (__builtin_mul_overflow(elems, ne[d], &elems) || elems > INT64_MAX) {
            snprintf(why, cap, "has dims whose product overflows (more than 2^63 elements)");
            return false;
        }
    bool overflow = __builtin_mul_overflow(ne[0] / be, (uint64_t)bb, &bytes);
    for (uint32_t d = 1; d < n_dims && !overflow; d++) overflow = __builtin_mul_overflow(bytes, ne[d], &bytes);
    if (overflow) {
        snprintf(why, cap, "has a byte size that overflows 64 bits (%llu elements of %s)",
                 (unsigned long long)elems, ggml_types[type].name);
        return false;
    }
    *nbytes = bytes;
    return true;
}

/* ------------------------------------------------------------------------------------------------ */
/* reading */

/* What the cursor is reading, for error messages. */
typedef enum {
    AT_MAGIC, AT_VERSION, AT_N_TENSORS, AT_N_KV,
    AT_KEY, AT_KV_TYPE, AT_VALUE,
    AT_TENSOR_NAME, AT_TENSOR_DIMS, AT_TENSOR_TYPE, AT_TENSOR_OFFSET,
} reading_at;

typedef struct {
    const uint8_t *base;
    size_t size, pos;
    const char *path;
    fkv_error *err;
    reading_at at;
    uint64_t index;   /* metadata entry or tensor number */
    gguf_str subject; /* key or tensor name, once read */
} cursor;

static const char *describe(const cursor *c, char *buf, size_t cap) {
    char s[80];
    switch (c->at) {
    case AT_MAGIC: snprintf(buf, cap, "the magic"); break;
    case AT_VERSION: snprintf(buf, cap, "the version"); break;
    case AT_N_TENSORS: snprintf(buf, cap, "the tensor count"); break;
    case AT_N_KV: snprintf(buf, cap, "the metadata count"); break;
    case AT_KEY: snprintf(buf, cap, "the key of metadata entry %llu", (unsigned long long)c->index); break;
    case AT_KV_TYPE: snprintf(buf, cap, "the type of key %s", show(c->subject, s)); break;
    case AT_VALUE: snprintf(buf, cap, "the value of key %s", show(c->subject, s)); break;
    case AT_TENSOR_NAME: snprintf(buf, cap, "the name of tensor %llu", (unsigned long long)c->index); break;
    case AT_TENSOR_DIMS: snprintf(buf, cap, "the dims of tensor %s", show(c->subject, s)); break;
    case AT_TENSOR_TYPE: snprintf(buf, cap, "the type of tensor %s", show(c->subject, s)); break;
    case AT_TENSOR_OFFSET: snprintf(buf, cap, "the offset of tensor %s", show(c->subject, s)); break;
    }
    return buf;
}

static size_t left(const cursor *c) { return c->size - c->pos; }

/* The next n bytes, or NULL after reporting a truncation. */
static const uint8_t *take(cursor *c, size_t n) {
    if (n > left(c)) {
        char what[160];
        err_input(c->err, "%s: truncated while reading %s (needs %zu bytes at offset %zu, file size %zu)",
                c->path, describe(c, what, sizeof what), n, c->pos, c->size);
        return NULL;
    }
    const uint8_t *p = c->base + c->pos;
    c->pos += n;
    return p;
}

static int take_u32(cursor *c, uint32_t *v) {
    const uint8_t *p = take(c, 4);
    if (!p) return -1;
    memcpy(v, p, 4);
    return 0;
}

static int take_u64(cursor *c, uint64_t *v) {
    const uint8_t *p = take(c, 8);
    if (!p) return -1;
    memcpy(v, p, 8);
    return 0;
}

static int take_str(cursor *c, gguf_str *s) {
    uint64_t len;
    if (take_u64(c, &len) < 0) return -1;
    if (len > left(c)) {
        char what[160];
        return err_input(c->err, "%s: in %s: string length %llu runs past the end of the file (%zu bytes left at "
                                 "offset %zu)",
                       c->path, describe(c, what, sizeof what), (unsigned long long)len, left(c), c->pos);
    }
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return 0;
}

/* Frees what the reader allocated inside v: only item tables (strings and raw data live in the file). */
static void value_free_items(gguf_value *v) {
    if (v->type != GGUF_TYPE_ARRAY || !v->arr.items) return;
    for (uint64_t i = 0; i < v->arr.n; i++) value_free_items(&v->arr.items[i]);
    free(v->arr.items);
    v->arr.items = NULL;
}

static int read_array(cursor *c, gguf_value *v, int depth);

static int read_value(cursor *c, gguf_type type, gguf_value *v, int depth) {
    char what[160];
    if (type == GGUF_TYPE_STRING) {
        v->type = type;
        return take_str(c, &v->str);
    }
    if (type == GGUF_TYPE_ARRAY) return read_array(c, v, depth + 1);
    const uint8_t *p = take(c, gguf_type_size(type));
    if (!p) return -1;
    if (type == GGUF_TYPE_BOOL && p[0] > 1)
        return err_input(c->err, "%s: in %s: bool value %u at offset %zu is neither 0 nor 1", c->path,
                       describe(c, what, sizeof what), p[0], c->pos - 1);
    decode_scalar(type, p, v);
    return 0;
}

/* An array value (element type, count, elements) at nesting level depth (1 = a key's own array). */
static int read_array(cursor *c, gguf_value *v, int depth) {
    char what[160];
    uint32_t et;
    uint64_t n;
    if (depth > GGUF_MAX_NESTING)
        return err_input(c->err, "%s: in %s: arrays nested deeper than %d levels at offset %zu", c->path,
                       describe(c, what, sizeof what), GGUF_MAX_NESTING, c->pos);
    if (take_u32(c, &et) < 0) return -1;
    if (et >= GGUF_TYPE_COUNT)
        return err_input(c->err, "%s: in %s: invalid array element type id %u at offset %zu", c->path,
                       describe(c, what, sizeof what), et, c->pos - 4);
    if (take_u64(c, &n) < 0) return -1;
    v->type = GGUF_TYPE_ARRAY;
    v->arr.elem_type = (gguf_type)et;
    v->arr.n = 0;
    v->arr.raw = NULL;
    v->arr.items = NULL;
    size_t esz = gguf_type_size((gguf_type)et);
    size_t min = esz ? esz : (et == GGUF_TYPE_STRING ? 8 : MIN_ARRAY_BYTES);
    if (n > left(c) / min)
        return err_input(c->err, "%s: in %s: array of %llu %s elements (%s%zu bytes each) runs past the end of the "
                                 "file (%zu bytes left at offset %zu)",
                       c->path, describe(c, what, sizeof what), (unsigned long long)n,
                       gguf_type_name((gguf_type)et), esz ? "" : "at least ", min, left(c), c->pos);
    if (esz) {
        v->arr.n = n;
        v->arr.raw = c->base + c->pos;
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (v->arr.raw[i] > 1)
                    return err_input(c->err, "%s: in %s: bool element %llu is %u, neither 0 nor 1", c->path,
                                   describe(c, what, sizeof what), (unsigned long long)i, v->arr.raw[i]);
        c->pos += (size_t)(n * esz);
        return 0;
    }
    if (n == 0) return 0;
    v->arr.items = calloc((size_t)n, sizeof *v->arr.items);
    if (!v->arr.items)
        return err_nomem(c->err, "%s: out of memory for %llu array elements in %s", c->path,
                       (unsigned long long)n, describe(c, what, sizeof what));
    v->arr.n = n; /* zeroed items are uint8 values: safe to free if reading stops part way */
    for (uint64_t i = 0; i < n; i++)
        if (read_value(c, (gguf_type)et, &v->arr.items[i], depth) < 0) return -1;
    return 0;
}

/* Names sorted for binary search and duplicate detection. */
typedef struct {
    gguf_str name;
    uint64_t index;
} name_ref;

static int name_cmp(gguf_str a, gguf_str b) {
    int r = memcmp(a.ptr, b.ptr, a.len < b.len ? (size_t)a.len : (size_t)b.len);
    if (r) return r;
    return (a.len > b.len) - (a.len < b.len);
}

static int name_ref_cmp(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    int r = name_cmp(x->name, y->name);
    if (r) return r;
    return (x->index > y->index) - (x->index < y->index);
}

static const name_ref *name_lookup(const name_ref *refs, uint64_t n, const char *name) {
    gguf_str key = cstr(name);
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int r = name_cmp(refs[mid].name, key);
        if (r == 0) return &refs[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* gguf_file is the first member, so a gguf_file * from gguf_open is also a gguf_file_impl *. */
typedef struct {
    gguf_file f;
    bool mapped;
    name_ref *kv_by_key;
    name_ref *tensor_by_name;
} gguf_file_impl;

static const gguf_file_impl *impl_of(const gguf_file *f) { return (const gguf_file_impl *)f; }

/* Sorts n names into *out; refuses duplicates with an error built from what ("key", "tensor name"). */
static int index_names(gguf_file *f, uint64_t n, gguf_str (*name_at)(const gguf_file *, uint64_t),
                       const char *what, name_ref **out, fkv_error *err) {
    if (n == 0) return 0;
    name_ref *refs = malloc((size_t)n * sizeof *refs);
    if (!refs) return err_nomem(err, "%s: out of memory indexing %llu %ss", f->path, (unsigned long long)n, what);
    for (uint64_t i = 0; i < n; i++) refs[i] = (name_ref){name_at(f, i), i};
    qsort(refs, (size_t)n, sizeof *refs, name_ref_cmp);
    *out = refs;
    for (uint64_t i = 1; i < n; i++)
        if (name_cmp(refs[i - 1].name, refs[i].name) == 0) {
            char s[80];
            return err_input(err, "%s: duplicate %s %s (entries %llu and %llu)", f->path, what,
                           show(refs[i].name, s), (unsigned long long)refs[i - 1].index,
                           (unsigned long long)refs[i].index);
        }
    return 0;
}

static gguf_str kv_key_at(const gguf_file *f, uint64_t i) { return f->kv[i].key; }
static gguf_str tensor_name_at(const gguf_file *f, uint64_t i) { return f->tensors[i].name; }

void gguf_close(gguf_file *f) {
    if (!f) return;
    gguf_file_impl *m = (gguf_file_impl *)f;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) value_free_items(&f->kv[i].value);
    free(f->kv);
    free(f->tensors);
    free(m->kv_by_key);
    free(m->tensor_by_name);
    if (m->mapped && f->size) munmap((void *)f->map, f->size);
    free(f->path);
    free(m);
}

static int read_header(gguf_file *f, cursor *c) {
    c->at = AT_MAGIC;
    const uint8_t *magic = take(c, 4);
    if (!magic) return -1;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char shown[5];
        for (int i = 0; i < 4; i++) shown[i] = (magic[i] >= 0x20 && magic[i] < 0x7f) ? (char)magic[i] : '?';
        shown[4] = 0;
        return err_input(c->err, "%s: bad magic %02x %02x %02x %02x (\"%s\"), expected \"GGUF\"", f->path,
                       magic[0], magic[1], magic[2], magic[3], shown);
    }
    c->at = AT_VERSION;
    if (take_u32(c, &f->version) < 0) return -1;
    if (f->version != 2 && f->version != 3) {
        uint32_t swapped = __builtin_bswap32(f->version);
        return err_unsupported(c->err, "%s: unsupported version %u (flatkv reads GGUF v2 and v3%s)",
                                       f->path, f->version,
                       swapped == 2 || swapped == 3 ? "; this looks like a big-endian file" : "");
    }
    c->at = AT_N_TENSORS;
    if (take_u64(c, &f->n_tensors) < 0) return -1;
    c->at = AT_N_KV;
    if (take_u64(c, &f->n_kv) < 0) return -1;
    if (f->n_kv > left(c) / MIN_KV_BYTES)
        return err_input(c->err, "%s: n_kv %llu is absurd for a file of %zu bytes (each entry needs at least %d)",
                       f->path, (unsigned long long)f->n_kv, c->size, MIN_KV_BYTES);
    if (f->n_tensors > (left(c) - f->n_kv * MIN_KV_BYTES) / MIN_TENSOR_BYTES)
        return err_input(c->err, "%s: n_tensors %llu is absurd for a file of %zu bytes (each tensor needs at least %d)",
                       f->path, (unsigned long long)f->n_tensors, c->size, MIN_TENSOR_BYTES);
    return 0;
}

static int read_metadata(gguf_file *f, cursor *c) {
    char s[80];
    if (f->n_kv && !(f->kv = calloc((size_t)f->n_kv, sizeof *f->kv)))
        return err_nomem(c->err, "%s: out of memory for %llu metadata entries", f->path, (unsigned long long)f->n_kv);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        uint32_t type;
        c->at = AT_KEY;
        c->index = i;
        if (take_str(c, &kv->key) < 0) return -1;
        c->subject = kv->key;
        c->at = AT_KV_TYPE;
        if (take_u32(c, &type) < 0) return -1;
        if (type >= GGUF_TYPE_COUNT)
            return err_input(c->err, "%s: key %s (metadata entry %llu) has invalid type id %u", f->path,
                           show(kv->key, s), (unsigned long long)i, type);
        c->at = AT_VALUE;
        if (read_value(c, (gguf_type)type, &kv->value, 0) < 0) return -1;
    }
    gguf_file_impl *m = (gguf_file_impl *)f;
    if (index_names(f, f->n_kv, kv_key_at, "key", &m->kv_by_key, c->err) < 0) return -1;

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_value *a = gguf_find(f, "general.alignment");
    if (a) {
        if (a->type != GGUF_TYPE_UINT32)
            return err_input(c->err, "%s: general.alignment has type %s, expected uint32",
                                     f->path, gguf_type_name(a->type));
        if (a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0)
            return err_input(c->err, "%s: general.alignment %llu is not a nonzero power of two", f->path,
                           (unsigned long long)a->u64);
        f->alignment = (uint32_t)a->u64;
    }
    return 0;
}

static int read_tensor_infos(gguf_file *f, cursor *c) {
    char s[80], why[160];
    if (f->n_tensors && !(f->tensors = calloc((size_t)f->n_tensors, sizeof *f->tensors)))
        return err_nomem(c->err, "%s: out of memory for %llu tensors", f->path, (unsigned long long)f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint32_t type;
        c->at = AT_TENSOR_NAME;
        c->index = i;
        if (take_str(c, &t->name) < 0) return -1;
        c->subject = t->name;
        c->at = AT_TENSOR_DIMS;
        if (take_u32(c, &t->n_dims) < 0) return -1;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return err_input(c->err, "%s: tensor %s has n_dims %u, outside 1..%d", f->path, show(t->name, s),
                           t->n_dims, GGUF_MAX_DIMS);
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if (take_u64(c, &t->ne[d]) < 0) return -1;
        c->at = AT_TENSOR_TYPE;
        if (take_u32(c, &type) < 0) return -1;
        if (!tensor_geometry(type, t->n_dims, t->ne, &t->nbytes, why, sizeof why))
            return err_input(c->err, "%s: tensor %s %s", f->path, show(t->name, s), why);
        t->type = (ggml_type)type;
        c->at = AT_TENSOR_OFFSET;
        if (take_u64(c, &t->offset) < 0) return -1;
        if (t->offset % f->alignment != 0)
            return err_input(c->err, "%s: tensor %s has offset %llu, not a multiple of the alignment %u", f->path,
                           show(t->name, s), (unsigned long long)t->offset, f->alignment);
    }
    gguf_file_impl *m = (gguf_file_impl *)f;
    return index_names(f, f->n_tensors, tensor_name_at, "tensor name", &m->tensor_by_name, c->err);
}

/* The data section starts at the first aligned offset after the tensor infos; every tensor must lie in it. */
static int place_tensor_data(gguf_file *f, cursor *c) {
    char s[80];
    f->data_offset = ((uint64_t)c->pos + f->alignment - 1) / f->alignment * f->alignment;
    uint64_t avail = f->data_offset <= f->size ? f->size - f->data_offset : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (f->data_offset > f->size || t->offset > avail || t->nbytes > avail - t->offset)
            return err_input(c->err, "%s: tensor %s: data [offset %llu, size %llu] runs past the end of the file (size "
                                     "%zu, data section at %llu)",
                           f->path, show(t->name, s), (unsigned long long)t->offset,
                           (unsigned long long)t->nbytes, f->size, (unsigned long long)f->data_offset);
        t->data = f->map + f->data_offset + t->offset;
    }
    return 0;
}

static gguf_file *parse(const uint8_t *map, size_t size, bool mapped, const char *path, fkv_error *err) {
    gguf_file_impl *m = calloc(1, sizeof *m);
    char *path_copy = strdup(path);
    if (!m || !path_copy) {
        free(m);
        free(path_copy);
        if (mapped && size) munmap((void *)map, size);
        err_nomem(err, "%s: out of memory", path);
        return NULL;
    }
    gguf_file *f = &m->f;
    f->path = path_copy;
    f->map = map;
    f->size = size;
    m->mapped = mapped;
    cursor c = {.base = map, .size = size, .path = path, .err = err};
    if (read_header(f, &c) < 0 || read_metadata(f, &c) < 0 || read_tensor_infos(f, &c) < 0 ||
        place_tensor_data(f, &c) < 0) {
        gguf_close(f);
        return NULL;
    }
    return f;
}

gguf_file *gguf_open_buffer(const void *buf, size_t size, const char *name, fkv_error *err) {
    return parse(buf, size, false, name, err);
}

gguf_file *gguf_open(const char *path, fkv_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_input(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        err_input(err, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        err_input(err, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    const uint8_t *map = NULL;
    if (size) { /* mmap refuses length 0; an empty file is then reported as truncated by the parser */
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            err_io(err, "%s: cannot map %zu bytes: %s", path, size, strerror(errno));
            close(fd);
            return NULL;
        }
        map = p;
    }
    close(fd);
    return parse(map, size, true, path, err);
}

/* ------------------------------------------------------------------------------------------------ */
/* lookup and getters */

const gguf_value *gguf_find(const gguf_file *f, const char *key) {
    const name_ref *r = name_lookup(impl_of(f)->kv_by_key, f->n_kv, key);
    return r ? &f->kv[r->index].value : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    const name_ref *r = name_lookup(impl_of(f)->tensor_by_name, f->n_tensors, name);
    return r ? &f->tensors[r->index] : NULL;
}

static const gguf_value *find_or_fail(const gguf_file *f, const char *key, fkv_error *err) {
    const gguf_value *v = gguf_find(f, key);
    if (!v) err_input(err, "%s: key '%s' is absent", f->path, key);
    return v;
}

static int wrong_type(const gguf_file *f, const char *key, const gguf_value *v, const char *expected,
                      fkv_error *err) {
    return err_input(err, "%s: key '%s' has type %s, expected %s", f->path, key, gguf_type_name(v->type), expected);
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, fkv_error *err) {
    const gguf_value *v = find_or_fail(f, key, err);
    if (!v) return -1;
    if (type_is_unsigned(v->type)) {
        if (v->u64 > UINT32_MAX)
            return err_input(err, "%s: key '%s' = %llu does not fit in uint32",
                                  f->path, key, (unsigned long long)v->u64);
        *out = (uint32_t)v->u64;
        return 0;
    }
    if (type_is_signed(v->type)) {
        if (v->i64 < 0 || v->i64 > (int64_t)UINT32_MAX)
            return err_input(err, "%s: key '%s' = %lld does not fit in uint32", f->path, key, (long long)v->i64);
        *out = (uint32_t)v->i64;
        return 0;
    }
    return wrong_type(f, key, v, "an integer", err);
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, fkv_error *err) {
    const gguf_value *v = find_or_fail(f, key, err);
    if (!v) return -1;
    if (!type_is_float(v->type)) return wrong_type(f, key, v, "float32 or float64", err);
    if (isfinite(v->f64) && fabs(v->f64) > FLT_MAX)
        return err_input(err, "%s: key '%s' = %g does not fit in float32", f->path, key, v->f64);
    *out = (float)v->f64;
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out, fkv_error *err) {
    const gguf_value *v = find_or_fail(f, key, err);
    if (!v) return -1;
    if (v->type != GGUF_TYPE_BOOL) return wrong_type(f, key, v, "bool", err);
    *out = v->u64 != 0;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, fkv_error *err) {
    const gguf_value *v = find_or_fail(f, key, err);
    if (!v) return -1;
    if (v->type != GGUF_TYPE_STRING) return wrong_type(f, key, v, "string", err);
    *out = v->str;
    return 0;
}

int gguf_get_arr(const gguf_file *f, const char *key, int elem_type, const gguf_value **out, fkv_error *err) {
    const gguf_value *v = find_or_fail(f, key, err);
    if (!v) return -1;
    if (v->type != GGUF_TYPE_ARRAY) return wrong_type(f, key, v, "array", err);
    if (elem_type >= 0 && v->arr.elem_type != (gguf_type)elem_type)
        return err_input(err, "%s: key '%s' is an array of %s, expected an array of %s", f->path, key,
                       gguf_type_name(v->arr.elem_type), gguf_type_name((gguf_type)elem_type));
    *out = v;
    return 0;
}

/* Element i decoded; false when arr is not a fixed-size array or i is out of range. */
static bool arr_elem(const gguf_value *arr, uint64_t i, gguf_value *out) {
    if (arr->type != GGUF_TYPE_ARRAY || i >= arr->arr.n) return false;
    size_t esz = gguf_type_size(arr->arr.elem_type);
    if (!esz) return false;
    decode_scalar(arr->arr.elem_type, arr->arr.raw + i * esz, out);
    return true;
}

int64_t gguf_arr_int(const gguf_value *arr, uint64_t i) {
    gguf_value e;
    if (!arr_elem(arr, i, &e)) return 0;
    if (type_is_signed(e.type)) return e.i64;
    if (type_is_float(e.type)) /* saturate: an out-of-range float-to-int conversion is undefined */
        return isnan(e.f64) ? 0 : e.f64 >= 0x1p63 ? INT64_MAX : e.f64 < -0x1p63 ? INT64_MIN : (int64_t)e.f64;
    return e.u64 > INT64_MAX ? INT64_MAX : (int64_t)e.u64;
}

double gguf_arr_float(const gguf_value *arr, uint64_t i) {
    gguf_value e;
    if (!arr_elem(arr, i, &e)) return 0;
    if (type_is_signed(e.type)) return (double)e.i64;
    if (type_is_float(e.type)) return e.f64;
    return (double)e.u64;
}

/* ------------------------------------------------------------------------------------------------ */
/* writing */

typedef struct {
    char *key;
    gguf_value value; /* owned: strings, raw arrays and item tables are the writer's allocations */
} writer_kv;

typedef struct {
    char *name;
    ggml_type type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint8_t *data;
} writer_tensor;

struct gguf_writer {
    writer_kv *kv;
    size_t n_kv, cap_kv;
    writer_tensor *tensors;
    size_t n_tensors, cap_tensors;
    char failure[400]; /* the first setter failure; gguf_writer_write reports it */
};

static void writer_fail(gguf_writer *w, const char *key, const char *why) {
    if (!w->failure[0]) snprintf(w->failure, sizeof w->failure, "key '%s': %s", key, why);
}

static void value_free_owned(gguf_value *v) {
    if (v->type == GGUF_TYPE_STRING) {
        free((char *)v->str.ptr);
    } else if (v->type == GGUF_TYPE_ARRAY) {
        free((uint8_t *)v->arr.raw);
        if (v->arr.items)
            for (uint64_t i = 0; i < v->arr.n; i++) value_free_owned(&v->arr.items[i]);
        free(v->arr.items);
    }
    v->type = GGUF_TYPE_UINT8;
}

static void *dup_bytes(const void *p, size_t n) {
    void *q = malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

/* Deep-copies src into dst (owned), checking it is something the reader would accept back.
 * depth is the nesting level of src if it is an array (1 = a key's own array). On failure dst holds
 * nothing to free and why says what is wrong. */
static bool value_copy(gguf_value *dst, const gguf_value *src, int depth, char *why, size_t cap) {
    *dst = (gguf_value){.type = GGUF_TYPE_UINT8};
    if ((unsigned)src->type >= GGUF_TYPE_COUNT) {
        snprintf(why, cap, "invalid type id %u", (unsigned)src->type);
        return false;
    }
    if (src->type == GGUF_TYPE_STRING) {
        char *p = dup_bytes(src->str.ptr, (size_t)src->str.len);
        if (!p) return snprintf(why, cap, "out of memory"), false;
        dst->type = GGUF_TYPE_STRING;
        dst->str = (gguf_str){p, src->str.len};
        return true;
    }
    if (src->type != GGUF_TYPE_ARRAY) {
        *dst = *src;
        if (src->type == GGUF_TYPE_BOOL) dst->u64 = src->u64 != 0;
        if (src->type == GGUF_TYPE_FLOAT32 && isfinite(src->f64) && fabs(src->f64) > FLT_MAX)
            return snprintf(why, cap, "float32 value %g is out of range", src->f64), false;
        return true;
    }
    if (depth > GGUF_MAX_NESTING)
        return snprintf(why, cap, "arrays nested deeper than %d levels", GGUF_MAX_NESTING), false;
    gguf_type et = src->arr.elem_type;
    uint64_t n = src->arr.n;
    if ((unsigned)et >= GGUF_TYPE_COUNT)
        return snprintf(why, cap, "invalid array element type id %u", (unsigned)et), false;
    dst->type = GGUF_TYPE_ARRAY;
    dst->arr.elem_type = et;
    size_t esz = gguf_type_size(et);
    if (esz) {
        if (n > SIZE_MAX / esz) return snprintf(why, cap, "array of %llu elements is too large", (unsigned long long)n), false;
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (src->arr.raw[i] > 1)
                    return snprintf(why, cap, "bool element %llu is %u, neither 0 nor 1", (unsigned long long)i,
                                    src->arr.raw[i]), false;
        uint8_t *raw = dup_bytes(src->arr.raw, (size_t)(n * esz));
        if (!raw) return snprintf(why, cap, "out of memory"), false;
        dst->arr.raw = raw;
        dst->arr.n = n;
        return true;
    }
    if (n == 0) return true;
    if (n > SIZE_MAX / sizeof(gguf_value) || !(dst->arr.items = calloc((size_t)n, sizeof(gguf_value))))
        return snprintf(why, cap, "out of memory"), false;
    dst->arr.n = n;
    for (uint64_t i = 0; i < n; i++) {
        if (src->arr.items[i].type != et) {
            snprintf(why, cap, "element %llu has type %s in an array of %s", (unsigned long long)i,
                     gguf_type_name(src->arr.items[i].type), gguf_type_name(et));
            value_free_owned(dst);
            return false;
        }
        if (!value_copy(&dst->arr.items[i], &src->arr.items[i], depth + 1, why, cap)) {
            value_free_owned(dst);
            return false;
        }
    }
    return true;
}

/* Takes ownership of v (an owned value) and stores it under key, replacing any previous value. */
static void writer_put(gguf_writer *w, const char *key, gguf_value *v) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            value_free_owned(&w->kv[i].value);
            w->kv[i].value = *v;
            return;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        writer_kv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) {
            value_free_owned(v);
            writer_fail(w, key, "out of memory");
            return;
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        value_free_owned(v);
        writer_fail(w, key, "out of memory");
        return;
    }
    w->kv[w->n_kv++] = (writer_kv){k, *v};
}

void gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    gguf_value copy;
    char why[200];
    if (!value_copy(&copy, v, 1, why, sizeof why)) {
        writer_fail(w, key, why);
        return;
    }
    writer_put(w, key, &copy);
}

void gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, const char *prefix, const char *skip_key) {
    size_t prefix_len = strlen(prefix);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_str key = f->kv[i].key;
        if (key.len < prefix_len || memcmp(key.ptr, prefix, prefix_len) || (skip_key && gguf_str_eq(key, skip_key)))
            continue;
        char *name = strndup(key.ptr, key.len);
        if (!name) {
            writer_fail(w, "(copy)", "out of memory");
            return;
        }
        gguf_writer_set_value(w, name, &f->kv[i].value);
        free(name);
    }
}

void gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    gguf_writer_set_value(w, key, &(gguf_value){.type = GGUF_TYPE_UINT32, .u64 = v});
}

void gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    gguf_writer_set_value(w, key, &(gguf_value){.type = GGUF_TYPE_INT32, .i64 = v});
}

void gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    gguf_writer_set_value(w, key, &(gguf_value){.type = GGUF_TYPE_FLOAT32, .f64 = v});
}

void gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    gguf_writer_set_value(w, key, &(gguf_value){.type = GGUF_TYPE_BOOL, .u64 = v});
}

void gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    gguf_writer_set_value(w, key, &(gguf_value){.type = GGUF_TYPE_STRING, .str = cstr(v)});
}

void gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *raw, uint64_t n) {
    if (gguf_type_size(elem_type) == 0) {
        writer_fail(w, key, "gguf_writer_set_arr takes fixed-size elements only");
        return;
    }
    gguf_value v = {.type = GGUF_TYPE_ARRAY};
    v.arr.elem_type = elem_type;
    v.arr.n = n;
    v.arr.raw = raw;
    gguf_writer_set_value(w, key, &v);
}

void gguf_writer_set_arr_str(gguf_writer *w, const char *key, const gguf_str *items, uint64_t n) {
    gguf_value *vals = n ? calloc((size_t)n, sizeof *vals) : NULL;
    if (n && !vals) {
        writer_fail(w, key, "out of memory");
        return;
    }
    for (uint64_t i = 0; i < n; i++) vals[i] = (gguf_value){.type = GGUF_TYPE_STRING, .str = items[i]};
    gguf_value v = {.type = GGUF_TYPE_ARRAY};
    v.arr.elem_type = GGUF_TYPE_STRING;
    v.arr.n = n;
    v.arr.items = vals;
    gguf_writer_set_value(w, key, &v);
    free(vals);
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, ggml_type type, uint32_t n_dims,
                           const uint64_t *ne, const void *data, fkv_error *err) {
    char why[160];
    writer_tensor t = {.type = type, .n_dims = n_dims};
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    if (!tensor_geometry(type, n_dims, t.ne, &t.nbytes, why, sizeof why))
        return err_input(err, "gguf writer: tensor '%s' %s", name, why);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return err_input(err, "gguf writer: duplicate tensor name '%s'", name);
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        writer_tensor *ts = realloc(w->tensors, cap * sizeof *ts);
        if (!ts) return err_nomem(err, "gguf writer: out of memory adding tensor '%s'", name);
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    t.name = strdup(name);
    t.data = malloc((size_t)t.nbytes);
    if (!t.name || !t.data) {
        free(t.name);
        free(t.data);
        return err_nomem(err, "gguf writer: out of memory for tensor '%s' (%llu bytes)", name,
                       (unsigned long long)t.nbytes);
    }
    memcpy(t.data, data, (size_t)t.nbytes);
    w->tensors[w->n_tensors++] = t;
    return 0;
}

gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        value_free_owned(&w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->kv);
    free(w->tensors);
    free(w);
}

/* A FILE that remembers whether any write failed, so the emitters need no error paths. */
typedef struct {
    FILE *fp;
    uint64_t pos;
    bool ok;
} sink;

static void emit(sink *s, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, s->fp) != n) s->ok = false;
    s->pos += n;
}
static void emit_u32(sink *s, uint32_t v) { emit(s, &v, 4); }
static void emit_u64(sink *s, uint64_t v) { emit(s, &v, 8); }
static void emit_str(sink *s, const char *p, uint64_t len) {
    emit_u64(s, len);
    emit(s, p, (size_t)len);
}
static void emit_zeros(sink *s, uint64_t n) {
    static const uint8_t zeros[256];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        emit(s, zeros, k);
        n -= k;
    }
}

/* A value's encoding without its type tag (as inside a key's value or an array). */
static void emit_value(sink *s, const gguf_value *v) {
    uint8_t b[8];
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        memcpy(b, &v->u64, 8); /* little-endian: the low bytes come first */
        emit(s, b, gguf_type_size(v->type));
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        memcpy(b, &v->i64, 8);
        emit(s, b, gguf_type_size(v->type));
        break;
    case GGUF_TYPE_FLOAT32: {
        float x = (float)v->f64;
        emit(s, &x, 4);
        break;
    }
    case GGUF_TYPE_FLOAT64: emit(s, &v->f64, 8); break;
    case GGUF_TYPE_STRING: emit_str(s, v->str.ptr, v->str.len); break;
    case GGUF_TYPE_ARRAY:
        emit_u32(s, v->arr.elem_type);
        emit_u64(s, v->arr.n);
        if (gguf_type_size(v->arr.elem_type))
            emit(s, v->arr.raw, (size_t)(v->arr.n * gguf_type_size(v->arr.elem_type)));
        else
            for (uint64_t i = 0; i < v->arr.n; i++) emit_value(s, &v->arr.items[i]);
        break;
    default: break;
    }
}

int gguf_writer_write(const gguf_writer *w, const char *path, fkv_error *err) {
    if (w->failure[0]) return err_io(err, "%s: not written: %s", path, w->failure);
    uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            const gguf_value *a = &w->kv[i].value;
            if (a->type != GGUF_TYPE_UINT32 || a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0)
                return err_input(err, "%s: not written: general.alignment must be a nonzero power of two of type "
                                      "uint32", path);
            alignment = (uint32_t)a->u64;
        }

    /* Write beside the target and rename over it, so a reader that has the old file mapped keeps it
     * intact and nobody ever sees a half-written file under path. */
    size_t tmp_len = strlen(path) + 32;
    char *tmp = malloc(tmp_len);
    if (!tmp) return err_nomem(err, "%s: out of memory", path);
    snprintf(tmp, tmp_len, "%s.tmp%ld", path, (long)getpid());
    sink s = {.fp = fopen(tmp, "wbx"), .ok = true};
    if (!s.fp) {
        int e = errno;
        free(tmp);
        return err_io(err, "%s: cannot create: %s", path, strerror(e));
    }

    emit(&s, "GGUF", 4);
    emit_u32(&s, 3);
    emit_u64(&s, w->n_tensors);
    emit_u64(&s, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        emit_str(&s, w->kv[i].key, strlen(w->kv[i].key));
        emit_u32(&s, w->kv[i].value.type);
        emit_value(&s, &w->kv[i].value);
    }
    /* Each tensor starts at the next aligned offset after the previous one's end; no trailing padding,
     * so the file ends exactly where the last tensor does. */
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        emit_str(&s, t->name, strlen(t->name));
        emit_u32(&s, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) emit_u64(&s, t->ne[d]);
        emit_u32(&s, t->type);
        emit_u64(&s, offset);
        offset = (offset + t->nbytes + alignment - 1) / alignment * alignment;
    }
    uint64_t data_offset = (s.pos + alignment - 1) / alignment * alignment;
    offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        emit_zeros(&s, data_offset + offset - s.pos);
        emit(&s, w->tensors[i].data, (size_t)w->tensors[i].nbytes);
        offset = (offset + w->tensors[i].nbytes + alignment - 1) / alignment * alignment;
    }

    int write_errno = s.ok ? 0 : errno;
    if (fclose(s.fp) != 0 && s.ok) {
        s.ok = false;
        write_errno = errno;
    }
    if (s.ok && rename(tmp, path) != 0) {
        s.ok = false;
        write_errno = errno;
    }
    if (!s.ok) {
        unlink(tmp);
        free(tmp);
        return err_io(err, "%s: write failed: %s", path, strerror(write_errno));
    }
    free(tmp);
    return 0;
}
