/* fuzz_model.c — the model loader (src/model/model.c: hyperparameters, tensor shapes, weight packing, the tokenizer's
 * load) on arbitrary bytes, through model_load_buffer; seeds are tiny valid models (fuzz/mkseeds.c).
 *
 * Asserts model.h's INVARIANT the way the forward pass relies on it: a model the loader accepts computes. Each
 * accepted model gets a context of 8 positions and evaluates 3 tokens, so a shape the loader let through that the
 * kernels then read past is an ASan report here. The context is capped on purpose: the KV size a file asks for is
 * the engine's budget check, not the loader's. Also: refused files carry an error message; info matches hparams.
 */
#include <stdint.h>

#include "flatkv.h"
#include "fuzz.h"
#include "model/model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fkv_error err = {0};
    /* The reference kernels, picked once: the variants give the same bits, and the fuzzer should spend its time in
     * the loader, not in a re-selection per input. */
    if (fkv_kernels_select("ref", &err)) {
        fprintf(stderr, "fuzz_model: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    fkv_error err = {0};
    fkv_model *m = model_load_buffer(copy, size, "fuzz.gguf", &err);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_model: %s\n", m ? "loaded" : err.msg); /* seeds' status */
    if (!m) {
        FUZZ_CHECK(err.msg[0], "a refused model has no error message");
        free(copy);
        return 0;
    }
    fkv_model_info info = fkv_model_get_info(m);
    FUZZ_CHECK(info.n_vocab > 0 && info.n_layers > 0 && info.dim > 0,
               "an accepted model of vocab %u, %u layers, dim %u", info.n_vocab, info.n_layers, info.dim);
    fkv_ctx_params cp = fkv_ctx_default_params();
    cp.n_ctx = 8;
    cp.n_threads = 1;
    fkv_ctx *c = fkv_ctx_new(m, &cp, &err);
    if (c) {
        const int32_t ids[3] = {fkv_token_bos(m) >= 0 ? fkv_token_bos(m) : 0, (int32_t)(1 % info.n_vocab),
                                (int32_t)(info.n_vocab - 1)};
        float *logits = malloc(sizeof(float) * info.n_vocab);
        if (logits && fkv_eval(c, ids, 3, 0, 1, logits, &err) == 0) (void)fkv_kv_digest(c, 3);
        free(logits);
        fkv_ctx_free(c);
    }
    /* The vocabulary a model carries is usable, too: a short text and back. */
    int32_t ids[16];
    int n = fkv_tokenize(m, "ab <s>x", 7, true, true, ids, 16, &err);
    char piece[64];
    for (int i = 0; i < n && i < 16; i++) (void)fkv_token_piece(m, i ? ids[i - 1] : -1, ids[i], piece, sizeof piece);
    fkv_model_free(m);
    free(copy);
    return 0;
}
