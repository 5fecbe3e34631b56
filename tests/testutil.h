/* testutil.h — small helpers shared by the tests: paths to the test data (data/), temp files, file reading. */
#ifndef FKV_TESTUTIL_H
#define FKV_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

/* FKV_DATA_DIR "/" rel, in a static buffer (one at a time). When that file is missing (a data folder without it),
 * the running test is skipped, naming the path: call it inside a test or its setup. */
const char *tu_data(const char *rel);
/* A fresh path under the system temp dir, unique per call and process; the file is not created. */
const char *tu_tmp_path(const char *suffix);
/* Whole file into a malloc'd buffer (NUL-terminated); NULL when unreadable. */
char *tu_read_file(const char *path, size_t *size);
/* Write size bytes to path; 0 on success. */
int tu_write_file(const char *path, const void *data, size_t size);

/* Calls fn(text, len, want, n_want, user) on every text of tokenizers/<vocab>.inp (llama.cpp's test-tokenizer
 * vectors: texts separated by "\n__ggml_vocab_test__\n", the file ending with one) with the ids of the
 * matching line of tokenizers/<vocab>.out; fails the test on a malformed pair; returns the number of texts. */
typedef void (*tu_vector_fn)(const char *text, size_t len, const int32_t *want, int n_want, void *user);
int tu_for_each_vocab_vector(const char *vocab, tu_vector_fn fn, void *user);

/* The model at path (a file of the test data: tu_data), failing the test, with the loader's sentence, when it does not
 * load. The caller frees it. */
struct fkv_model;
struct fkv_model *tu_load_model(const char *path);

/* A small generated GQA model (dim 128, hidden 352, 2 layers, 4 heads, 2 KV heads, context 512, stories260K's
 * vocabulary) of ggml type `type` (a ggml_type) with `seed`, written to a fresh temp path; NULL on failure. The
 * caller loads it and removes the file (a loaded model keeps its mapping). */
const char *tu_small_model(int type, uint64_t seed);

/* A small generated model of architecture `arch` (dim 128, hidden 256, 4 layers, 4 heads, 2 KV heads, context 512,
 * stories260K's vocabulary) with each architecture's own features in use: qwen3 heads of 64 (q_dim 256 != dim),
 * phi3 partial rotary (16 of 32 dims), gemma3 one KV head of 64 and a window of 20 on layers 0 and 2; smollm3's
 * layer 3 has no rope; qwen3moe and glm4moe route each row to 3 of 8 experts of width 64 (qwen3moe heads of 64;
 * glm4moe partial rotary, a shared expert, a dense layer 0 and one NextN block; gpt-oss biases, sinks, YaRN and a
 * window of 20 on its even layers; qwen35 and qwen35moe gated DeltaNet layers 0-2 of 8 value heads on 4 key heads
 * of 16, gated attention in layer 3, qwen35moe's experts as qwen3moe's and a gated shared one). Written to a fresh
 * temp path like
 * tu_small_model; NULL on failure. */
const char *tu_arch_model(const char *arch, int type, uint64_t seed);

/* The logits (n_vocab floats, malloc'd) of the last of 4 fixed ids (1, 50, 60, 70) through the model at path. */
float *tu_last_logits(const char *path);

/* What tu_rewritten does to the tensors whose names contain its pattern. */
typedef enum {
    TU_RESHAPE, /* dims ne[0..n_dims): the same elements, another shape */
    TU_ZEROS,   /* zeros for its data */
    TU_TO_Q8_0, /* its f32 elements quantized to Q8_0 */
} tu_tensor_edit;

/* A metadata value for tu_rewritten: an unsigned integer. */
#define TU_U32(x) (&(const gguf_value){.type = GGUF_TYPE_UINT32, .u64 = (x)})

/* The GGUF file src copied to a fresh temp path (tu_tmp_path's), key set to *value (key NULL: none changed) and every
 * tensor whose name contains `tensor` (NULL: none) edited as how says (TU_RESHAPE: to n_dims dims ne). Fails the test
 * when src cannot be read or the copy written. */
const char *tu_rewritten(const char *src, const char *key, const gguf_value *value, const char *tensor,
                         tu_tensor_edit how, uint32_t n_dims, const uint64_t *ne);
/* src rewritten so (tensors reshaped) is refused by fkv_model_load with `want` in its sentence; the test fails
 * otherwise. */
void tu_expect_refused(const char *src, const char *key, const gguf_value *value, const char *tensor, uint32_t n_dims,
                       const uint64_t *ne, const char *want);

/* Runs the cmocka group once per kernel variant this build holds and this CPU runs (kern_select'ed before each run,
 * its name in *variant when variant is not NULL); a variant it cannot run is reported as skipped, by name and why.
 * Include <cmocka.h> first. Returns the number of failures. */
struct CMUnitTest;
int tu_each_variant(const struct CMUnitTest *tests, size_t n_tests, const char **variant);

#endif
