/* testutil.h — small helpers shared by the tests: paths to the shared data, temp files, file reading. */
#ifndef FKV_TESTUTIL_H
#define FKV_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* FKV_SHARED_DIR "/" rel, in a static buffer (one at a time). */
const char *tu_shared(const char *rel);
/* A fresh path under the system temp dir, unique per call and process; the file is not created. */
const char *tu_tmp_path(const char *suffix);
/* Whole file into a malloc'd buffer (NUL-terminated); NULL when unreadable. */
char *tu_read_file(const char *path, size_t *size);
/* Write size bytes to path; 0 on success. */
int tu_write_file(const char *path, const void *data, size_t size);

/* A small generated GQA model (dim 128, hidden 352, 2 layers, 4 heads, 2 KV heads, context 512, stories260K's
 * vocabulary) of ggml type `type` (a ggml_type) with `seed`, written to a fresh temp path; NULL on failure. The
 * caller loads it and removes the file (a loaded model keeps its mapping). */
const char *tu_small_model(int type, uint64_t seed);

#endif
