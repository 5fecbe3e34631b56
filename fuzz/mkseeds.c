/* mkseeds.c — writes the GGUF seeds of fuzz/corpus/{gguf,model}: tiny models (dim 8, one or two layers, f32) of
 * several architectures over a 20-token vocabulary, SentencePiece or byte-level BPE, each a few KB.
 *
 * WHY: the fuzzers mutate faster and reach deeper on small inputs, and the vocabularies in data/ are far too
 * large to commit as seeds; a real shape with a tiny vocabulary is still a file fkv_model_load accepts, so every
 * mutation starts from the loader's success path. The files are deterministic (genmodel.h's INVARIANT).
 *
 * Usage: fuzz_mkseeds OUTDIR — writes OUTDIR/<arch>-<tokenizer>.gguf and two truncations of the first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/genmodel.h"
#include "gguf/gguf.h"

/* A vocabulary of SentencePiece pieces (with byte fallback for two bytes) or BPE characters; ids 1 and 2 are the
 * control tokens BOS and EOS, and "<|im_end|>" a user-defined special token, so both special-token paths run. */
static int write_vocab(const char *path, bool bpe, fkv_error *err) {
    static const char *const spm[] = {"<unk>", "<s>", "</s>", "<0x00>", "<0x0A>", "\xe2\x96\x81", "a", "b", "c",
                                      "\xe2\x96\x81" "a", "ab", "bc", "\xe2\x96\x81" "ab", "\xe2\x96\x81" "b", "abc",
                                      "<|im_end|>", "x", "y", "xy", "\xe2\x96\x81" "x"};
    static const char *const gpt2[] = {"<unk>", "<s>", "</s>", "\xc4\xa0", "a", "b", "c", "\xc4\xa0" "a", "ab", "bc",
                                       "\xc4\xa0" "ab", "\xc4\xa0" "b", "abc", "<|im_end|>", "x", "y", "xy", "\xc4\x8a",
                                       "!", "?"};
    const char *const *pieces = bpe ? gpt2 : spm;
    enum { N = 20 };
    gguf_str tokens[N];
    float scores[N];
    int32_t types[N];
    for (int i = 0; i < N; i++) {
        tokens[i] = (gguf_str){pieces[i], strlen(pieces[i])};
        scores[i] = -(float)i;
        /* llama.cpp's token types: 2 unknown, 3 control, 4 user-defined, 6 byte, 1 normal */
        types[i] = i == 0                             ? 2
                   : i <= 2                           ? 3
                   : !strcmp(pieces[i], "<|im_end|>") ? 4
                   : !strncmp(pieces[i], "<0x", 3)    ? 6
                                                      : 1;
    }
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "tokenizer.ggml.model", bpe ? "gpt2" : "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, N);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, N);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (bpe) {
        const gguf_str merges[] = {{"a b", 3}, {"b c", 3}, {"\xc4\xa0 a", 4}, {"\xc4\xa0 b", 4}, {"\xc4\xa0" "a b", 5},
                                   {"a bc", 4}, {"x y", 3}};
        gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, sizeof merges / sizeof *merges);
        gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
    }
    gguf_writer_set_str(w, "tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}");
    int rc = gguf_writer_write(w, path, err);
    gguf_writer_free(w);
    return rc;
}

/* The first n bytes of src, written to dst. */
static int truncate_copy(const char *src, const char *dst, long n) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    int rc = in && out ? 0 : -1;
    for (long i = 0; !rc && i < n; i++) {
        int c = fgetc(in);
        if (c == EOF) break;
        fputc(c, out);
    }
    if (in) fclose(in);
    if (out && fclose(out)) rc = -1;
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_mkseeds OUTDIR\n");
        return 2;
    }
    char spm[4096], bpe[4096], out[4096];
    snprintf(spm, sizeof spm, "%s/.vocab-spm.gguf", argv[1]);
    snprintf(bpe, sizeof bpe, "%s/.vocab-bpe.gguf", argv[1]);
    fkv_error err = {0};
    if (write_vocab(spm, false, &err) || write_vocab(bpe, true, &err)) {
        fprintf(stderr, "fuzz_mkseeds: %s\n", err.msg);
        return 1;
    }
    static const struct {
        const char *arch;
        bool bpe, tied;
        uint32_t layers, window;
    } models[] = {{"llama", false, true, 1, 0}, {"llama", false, false, 2, 0}, {"qwen2", true, true, 1, 0},
                  {"qwen3", true, true, 1, 0},  {"phi3", false, true, 1, 0},   {"gemma3", false, true, 2, 4},
                  {"smollm3", true, true, 1, 0}, {"qwen3moe", true, true, 1, 0}, {"glm4moe", true, true, 2, 0},
                  {"qwen35", true, true, 2, 0},  {"qwen35moe", true, true, 2, 0}};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        genmodel_params p = {.dim = 8, .hidden = 16, .n_layers = models[i].layers, .n_heads = 2, .n_kv_heads = 1,
                             .n_ctx = 64, .vocab_from = models[i].bpe ? bpe : spm, .type = GGML_TYPE_F32,
                             .tied = models[i].tied, .arch = models[i].arch, .window = models[i].window, .seed = 1};
        /* experts: 4 of width 8, 2 used; glm4moe's first layer dense, a shared expert and a NextN block */
        if (strstr(models[i].arch, "moe")) p.n_expert = 4, p.n_expert_used = 2, p.n_ff_exp = 8;
        if (!strcmp(models[i].arch, "glm4moe")) p.n_shared = 1, p.n_dense_lead = 1, p.n_nextn = 1;
        /* hybrids: a gated DeltaNet layer 0 (4 value heads on 2 key heads of 2), gated attention in layer 1 */
        if (!strncmp(models[i].arch, "qwen35", 6)) p.attn_interval = 2, p.ssm_k_heads = 2;
        snprintf(out, sizeof out, "%s/%s-%s%s.gguf", argv[1], models[i].arch, models[i].bpe ? "bpe" : "spm",
                 models[i].layers > 1 ? "-2l" : "");
        if (genmodel_write(&p, out, &err)) {
            fprintf(stderr, "fuzz_mkseeds: %s: %s\n", out, err.msg);
            return 1;
        }
    }
    /* Truncations of the first model: inside the metadata, and inside the tensor data. */
    snprintf(spm, sizeof spm, "%s/llama-spm.gguf", argv[1]);
    snprintf(out, sizeof out, "%s/llama-spm-cut-meta.gguf", argv[1]);
    if (truncate_copy(spm, out, 300)) return 1;
    snprintf(out, sizeof out, "%s/llama-spm-cut-data.gguf", argv[1]);
    if (truncate_copy(spm, out, 2000)) return 1;
    snprintf(out, sizeof out, "%s/.vocab-spm.gguf", argv[1]);
    remove(out);
    snprintf(out, sizeof out, "%s/.vocab-bpe.gguf", argv[1]);
    remove(out);
    return 0;
}
