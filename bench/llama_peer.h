/* llama_peer.h — how the llama.cpp harnesses here (llama_bench.c, llama_greedy.c, llama_hybrid.c, multi_llama.c)
 * start the peer: its warnings and errors on stderr and the rest silent, its CPU backends loaded from LLAMA_LIB_DIR
 * (set by the script that builds the harness: where node-llama-cpp's libggml-cpu-*.so lie), one model.
 */
#ifndef FKV_BENCH_LLAMA_PEER_H
#define FKV_BENCH_LLAMA_PEER_H

#include <stdio.h>

#include "ggml-backend.h"
#include "llama.h"

#ifndef LLAMA_LIB_DIR
#error "compile with -DLLAMA_LIB_DIR='\"<dir of libggml-cpu-*.so>\"'"
#endif

static void llama_peer_log(enum ggml_log_level level, const char *text, void *user) {
    static enum ggml_log_level last = GGML_LOG_LEVEL_NONE; /* what a CONT line continues */
    (void)user;
    if (level != GGML_LOG_LEVEL_CONT) last = level;
    if (last == GGML_LOG_LEVEL_ERROR || last == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

/* The backends loaded and the model at path; NULL after saying so on stderr as prog. */
static inline struct llama_model *llama_peer_load(const char *prog, const char *path) {
    llama_log_set(llama_peer_log, NULL);
    ggml_backend_load_all_from_path(LLAMA_LIB_DIR);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(path, llama_model_default_params());
    if (!model) fprintf(stderr, "%s: llama.cpp could not load %s\n", prog, path);
    return model;
}

#endif
