/* gguf.h — GGUF v3 files: a zero-copy reader over mmap, and a writer.
 *
 * WHY: GGUF is the format people already have models in (llama.cpp, Ollama, LM Studio). The reader maps
 * the file once and hands out pointers into the mapping: tensor data is never copied, so loading a model
 * costs page faults, not reads. Everything a pointer could be derived from is validated at open time, so
 * that no later access can read outside the mapping.
 *
 * INVARIANT: a gguf_file returned by gguf_open is fully validated — every metadata value, string, array
 * and tensor extent lies inside the file; every tensor type is a known ggml type; every tensor's byte
 * size follows from its dims without overflow; tensor data offsets are aligned to general.alignment.
 * Accessors after open therefore cannot fail on memory safety, only on "key absent / wrong type".
 *
 * Layout (little-endian): magic "GGUF", u32 version (3; 2 is read too), u64 n_tensors, u64 n_kv,
 * then n_kv × (string key, u32 type, value), then n_tensors × (string name, u32 n_dims, u64 ne[n_dims],
 * u32 ggml type, u64 offset relative to the data section), padding to general.alignment (default 32),
 * then the data section. Strings are u64 length + bytes (not NUL-terminated).
 *
 * Errors name the file and the key or tensor: "model.gguf: tensor 'blk.0.attn_q.weight': data
 * [offset 1024, size 4096] runs past the end of the file (size 2048)".
 *
 * Thread-safety: a gguf_file is immutable after open; concurrent readers are fine.
 */
#ifndef FKV_GGUF_H
#define FKV_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h" /* ggml_type: the element type ids (kernels/) */

#include "flatkv.h"

/* Metadata value types, numbered as in the GGUF spec. */
typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;


#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the mapping: not NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} gguf_str;

/* One metadata value. Scalars are decoded; arrays keep a pointer to their raw little-endian elements
 * (possibly unaligned: read them with gguf_arr_*), and arrays of strings or of arrays also get a decoded
 * item table. */
typedef struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64; /* UINT8/16/32/64, BOOL (0/1) */
        int64_t i64;  /* INT8/16/32/64 */
        double f64;   /* FLOAT32/64 */
        gguf_str str; /* STRING */
        struct {
            gguf_type elem_type;
            uint64_t n;
            const uint8_t *raw;       /* fixed-size elements: n × gguf_type_size(elem_type) bytes */
            struct gguf_value *items; /* STRING or ARRAY elements: n decoded values; else NULL */
        } arr;
    };
} gguf_value;

typedef struct {
    gguf_str key;
    gguf_value value;
} gguf_kv;

typedef struct {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    ggml_type type;
    uint64_t offset;  /* relative to the data section */
    uint64_t nbytes;  /* derived from type and dims */
    const void *data; /* inside the mapping */
} gguf_tensor;

typedef struct gguf_file {
    char *path;
    const uint8_t *map;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset; /* absolute file offset of the data section */
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
} gguf_file;

/* --- reading --- */

/* Map and validate path. NULL with err filled on any problem (see INVARIANT). */
gguf_file *gguf_open(const char *path, fkv_error *err);
/* Same, over a caller-owned buffer (not copied; must outlive the result). name is used in errors. */
gguf_file *gguf_open_buffer(const void *buf, size_t size, const char *name, fkv_error *err);
void gguf_close(gguf_file *f);

/* The value stored under key, or NULL. */
const gguf_value *gguf_find(const gguf_file *f, const char *key);
/* The tensor named name, or NULL. */
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters: 0 on success; -1 with err naming the file and key when the key is absent or its value
 * is not convertible (integers convert between widths when the value fits; floats from FLOAT32/64). */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, fkv_error *err);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, fkv_error *err);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out, fkv_error *err);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, fkv_error *err);
/* Array getter: checks the element type (elem_type < 0 accepts any). */
int gguf_get_arr(const gguf_file *f, const char *key, int elem_type, const gguf_value **out, fkv_error *err);

/* Element i of a fixed-size array, converted (unaligned-safe). */
int64_t gguf_arr_int(const gguf_value *arr, uint64_t i);
double gguf_arr_float(const gguf_value *arr, uint64_t i);

/* True when s equals the NUL-terminated c. */
bool gguf_str_eq(gguf_str s, const char *c);

/* Bytes of one scalar of a metadata type (0 for STRING/ARRAY). */
size_t gguf_type_size(gguf_type t);
const char *gguf_type_name(gguf_type t);

/* ggml tensor type geometry: elements per block and bytes per block. false for unknown ids. */
bool ggml_type_geometry(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
const char *ggml_type_name(uint32_t type); /* "q8_0", ...; "unknown" for unknown ids */
/* Byte size of a row of n elements (n must be a multiple of the block size). */
size_t ggml_row_size(ggml_type type, uint64_t n);

/* --- writing --- */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
/* Metadata setters; keys and strings are copied. Setting a key twice replaces it. */
void gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
void gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (raw little-endian, n × gguf_type_size(elem_type) bytes, copied). */
void gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *raw, uint64_t n);
/* Array of strings (copied). */
void gguf_writer_set_arr_str(gguf_writer *w, const char *key, const gguf_str *items, uint64_t n);
/* Copy a value read from another file (any type, nested arrays included). */
void gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Copy every metadata entry of f whose key starts with prefix ("" for all), except skip_key (may be NULL). */
void gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, const char *prefix, const char *skip_key);
/* A tensor; data (nbytes from type and dims) is copied. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, ggml_type type, uint32_t n_dims,
                           const uint64_t *ne, const void *data, fkv_error *err);
/* A tensor whose data is made only when the file is written: fill(arg, dst) writes its nbytes into dst and returns 0
 * (or -1 with err set: the write fails). arg's arg_size bytes are copied. For files larger than memory (gen-model's
 * large models): one tensor's data is held at a time. */
typedef int (*gguf_fill_fn)(const void *arg, void *dst, fkv_error *err);
int gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, ggml_type type, uint32_t n_dims, const uint64_t *ne,
                                gguf_fill_fn fill, const void *arg, size_t arg_size, fkv_error *err);
/* Write the file (alignment from general.alignment if set, else 32). */
int gguf_writer_write(const gguf_writer *w, const char *path, fkv_error *err);

#endif
