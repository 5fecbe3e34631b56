/* tok_pieces.c — the vocabulary's pieces in one blob, indexed by an open-addressing hash table (tok_pieces.h). */
#include "text/tok_pieces.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"

int32_t tok_pieces_lookup(const tok_pieces *v, const char *s, size_t len) {
    for (uint64_t i = XXH3_64bits(s, len) & v->slot_mask;; i = (i + 1) & v->slot_mask) {
        int32_t id = v->slots[i];
        if (id < 0) return -1;
        size_t n;
        const char *t = tok_pieces_text(v, id, &n);
        if (n == len && memcmp(t, s, len) == 0) return id;
    }
}

int tok_pieces_load(tok_pieces *v, const gguf_file *f, const gguf_value *tokens, fkv_error *err) {
    v->n = (int32_t)tokens->arr.n;
    size_t total = 0;
    char empty_name[32];
    for (int32_t i = 0; i < v->n; i++) {
        uint64_t len = tokens->arr.items[i].str.len;
        total += len ? len : (size_t)snprintf(empty_name, sizeof empty_name, "[EMPTY_%d]", (int)i);
    }
    v->text = malloc(total ? total : 1);
    v->text_off = malloc(((size_t)v->n + 1) * sizeof *v->text_off);
    if (!v->text || !v->text_off) return err_nomem(err, "%s: out of memory for the vocabulary", f->path);
    size_t off = 0;
    for (int32_t i = 0; i < v->n; i++) {
        gguf_str s = tokens->arr.items[i].str;
        v->text_off[i] = off;
        if (s.len) {
            memcpy(v->text + off, s.ptr, s.len);
            off += s.len;
        } else {
            off += (size_t)snprintf(empty_name, sizeof empty_name, "[EMPTY_%d]", (int)i);
            memcpy(v->text + v->text_off[i], empty_name, off - v->text_off[i]);
        }
    }
    v->text_off[v->n] = off;

    uint64_t n_slots = 16;
    while (n_slots < 2 * (uint64_t)v->n) n_slots *= 2;
    v->slot_mask = n_slots - 1;
    v->slots = malloc(n_slots * sizeof *v->slots);
    if (!v->slots) return err_nomem(err, "%s: out of memory for the vocabulary", f->path);
    memset(v->slots, 0xff, n_slots * sizeof *v->slots);
    for (int32_t i = 0; i < v->n; i++) {
        size_t len;
        const char *t = tok_pieces_text(v, i, &len);
        int32_t dup = tok_pieces_lookup(v, t, len);
        if (dup >= 0)
            return err_input(err, "%s: tokenizer.ggml.tokens: token %d '%.*s' repeats token %d", f->path, (int)i,
                           (int)(len > 64 ? 64 : len), t, (int)dup);
        uint64_t s = XXH3_64bits(t, len) & v->slot_mask;
        while (v->slots[s] >= 0) s = (s + 1) & v->slot_mask;
        v->slots[s] = i;
    }
    return 0;
}

void tok_pieces_free(tok_pieces *v) {
    free(v->text);
    free(v->text_off);
    free(v->slots);
}
