/* tok.c — the vocabulary copied out of GGUF metadata, the special-token split, decoding, and llama.cpp's
 * SPM tokenizer on top of them. Byte-level BPE ("gpt2") shares all of that except step 2-4 below, which
 * tok_bpe.c replaces (pre-tokenizer regexes, byte alphabet, merges by rank).
 *
 * Design: tok_load copies every piece into one blob and indexes it (tok_pieces.h). It also
 * precomputes what each token decodes to (a second blob), the token for each byte value (byte fallback)
 * and the list of "special" tokens that are split out of the text before merging.
 *
 * Encoding follows llama.cpp step by step, because any shortcut changes ids somewhere:
 *   1. Partition: for each special token (control, user-defined, unknown; longest text first, equal
 *      lengths by lower id — llama.cpp's std::sort leaves that order unspecified), every occurrence in
 *      the remaining text fragments becomes that token. Control and unknown tokens take part only with
 *      parse_special; user-defined ones always do (llama.cpp pre-tokenizes them like HF does).
 *   2. Each text fragment gets a leading space when add_space_prefix is set (llama.cpp adds it to a
 *      fragment that is first or follows a token, which every text fragment is: a split always leaves a
 *      token between two texts); then ' ' becomes U+2581.
 *   3. The fragment is cut into UTF-8 characters by the lead byte alone (no validation of continuation
 *      bytes, exactly as llama.cpp), and adjacent symbols are merged through a max-heap of bigrams
 *      whose concatenation is a piece: highest score first, equal scores leftmost first. A heap entry
 *      is stale when either side has been merged away or grown; that shows in the sizes.
 *   4. Each final symbol is its piece's id, or else its bytes' tokens. (llama.cpp's "resegment" also
 *      consults a reverse-merge map first, but every key of that map is itself a piece, so for a
 *      symbol that is not a piece the map never answers: byte fallback is all that remains.)
 *
 * Quirks kept from llama.cpp because they change ids or decoded text:
 *   - token types come from tokenizer.ggml.token_type, then llama.cpp's rules by text (tok_apply_text_rules):
 *     end-of-generation markers ("<|eot_id|>", "<|end|>", "</s>", ...) and FIM markers are made CONTROL
 *     whatever the file says — so phi-3's USER_DEFINED "</s>" and deepseek-coder's USER_DEFINED FIM tokens are
 *     text without parse_special, as in llama.cpp — and the end markers end generation;
 *   - for models whose general.name contains "phi-3"/"phi3", special tokens other than <unk>, <s> and
 *     <|endoftext|> swallow the whitespace that follows them in the text (llama.cpp's RSTRIP);
 *   - an empty piece is renamed "[EMPTY_<id>]"; two tokens with the same text are refused (llama.cpp
 *     aborts on them);
 *   - BOS/EOS/UNK default to 1/2/0 when their keys are absent; an id outside the vocabulary keeps the
 *     default, and a default outside the vocabulary becomes -1.
 * Two deliberate differences, both only on input llama.cpp cannot handle:
 *   - a symbol with a byte that has no byte token becomes UNK (llama.cpp throws);
 *   - a character cut never reaches into an escaped space: llama.cpp lets an invalid lead byte (0xF8
 *     declares 4 bytes) swallow a following "▁", whose bytes then go out through byte fallback and decode
 *     as "▁" instead of " ", so the text does not survive the round trip. Wherever llama.cpp's cut keeps
 *     the text, the ids are the same.
 */
#include "text/tok.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"
#include "text/tok_bpe.h"
#include "text/tok_merge.h"
#include "text/tok_pieces.h"

#define TOK_FLAG_RSTRIP 1u /* swallow whitespace after this special token in the text */
#define TOK_FLAG_EOG 2u    /* ends a generation */

struct tok_vocab {
    tok_pieces pieces;   /* the pieces and their lookup; pieces.n is the vocabulary's size */
    char *dec;           /* what each token decodes to, back to back */
    size_t *dec_off;     /* [n + 1] */
    float *score;        /* [n] */
    uint8_t *type;       /* [n] tok_type */
    uint8_t *flags;      /* [n] TOK_FLAG_* */
    int32_t byte_tok[256]; /* token of each byte value for byte fallback, -1 = none */
    int32_t *special;    /* ids split out of the text before merging, longest text first */
    int32_t n_special;
    int32_t bos, eos, unk;
    bool add_bos;
    bool add_space_prefix;
    tok_bpe *bpe; /* byte-level BPE ("gpt2"); NULL for SPM ("llama") */
};

static const char tok_space_mark[] = "\xe2\x96\x81"; /* U+2581, how SentencePiece writes ' ' */

/* --- loading --- */

static bool tok_is_space(char c) { /* C-locale isspace, as llama.cpp's partition uses */
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int tok_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static bool tok_text_is(const tok_vocab *v, int32_t id, const char *s) {
    size_t n;
    const char *t = tok_pieces_text(&v->pieces, id, &n);
    return n == strlen(s) && memcmp(t, s, n) == 0;
}

/* Optional u32 key: absent leaves *out alone; present but unreadable fails. */
static int tok_opt_u32(const gguf_file *f, const char *key, uint32_t *out, bool *found, fkv_error *err) {
    *found = gguf_find(f, key) != NULL;
    return *found ? gguf_get_u32(f, key, out, err) : 0;
}

static int tok_opt_bool(const gguf_file *f, const char *key, bool *out, fkv_error *err) {
    return gguf_find(f, key) ? gguf_get_bool(f, key, out, err) : 0;
}

/* A special id from key, or def when absent or outside the vocabulary; -1 when neither is usable. */
static int tok_special_id(const gguf_file *f, const char *key, int32_t def, int32_t n, int32_t *out,
                          fkv_error *err) {
    uint32_t id;
    bool found;
    if (tok_opt_u32(f, key, &id, &found, err)) return -1;
    *out = found && id < (uint32_t)n ? (int32_t)id : def;
    if (*out >= n) *out = -1;
    return 0;
}

static int tok_load_types(tok_vocab *v, const gguf_file *f, fkv_error *err) {
    v->score = calloc((size_t)v->pieces.n, sizeof *v->score);
    v->type = malloc((size_t)v->pieces.n);
    v->flags = calloc((size_t)v->pieces.n, 1);
    if (!v->score || !v->type || !v->flags) return err_nomem(err, "%s: out of memory for the vocabulary", f->path);
    memset(v->type, TOK_TYPE_NORMAL, (size_t)v->pieces.n);

    const gguf_value *arr;
    if (gguf_find(f, "tokenizer.ggml.scores")) {
        if (gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &arr, err)) return -1;
        if (arr->arr.n != (uint64_t)v->pieces.n)
            return err_input(err, "%s: tokenizer.ggml.scores has %llu entries for %d tokens", f->path,
                           (unsigned long long)arr->arr.n, (int)v->pieces.n);
        for (int32_t i = 0; i < v->pieces.n; i++) v->score[i] = (float)gguf_arr_float(arr, (uint64_t)i);
    }
    if (gguf_find(f, "tokenizer.ggml.token_type")) {
        if (gguf_get_arr(f, "tokenizer.ggml.token_type", -1, &arr, err)) return -1;
        if (arr->arr.items || arr->arr.elem_type == GGUF_TYPE_FLOAT32 || arr->arr.elem_type == GGUF_TYPE_FLOAT64)
            return err_input(err, "%s: tokenizer.ggml.token_type is not an array of integers", f->path);
        if (arr->arr.n != (uint64_t)v->pieces.n)
            return err_input(err, "%s: tokenizer.ggml.token_type has %llu entries for %d tokens", f->path,
                           (unsigned long long)arr->arr.n, (int)v->pieces.n);
        for (int32_t i = 0; i < v->pieces.n; i++) {
            int64_t t = gguf_arr_int(arr, (uint64_t)i);
            v->type[i] = (uint8_t)(t >= TOK_TYPE_NORMAL && t <= TOK_TYPE_BYTE ? t : TOK_TYPE_UNDEFINED);
        }
    }
    return 0;
}

/* True when s contains the lowercase needle, ignoring ASCII case in s. */
static bool tok_str_has(gguf_str s, const char *needle) {
    size_t n = strlen(needle);
    for (uint64_t i = 0; i + n <= s.len; i++) {
        size_t k = 0;
        while (k < n && (char)tolower((unsigned char)s.ptr[i + k]) == needle[k]) k++;
        if (k == n) return true;
    }
    return false;
}

/* Special tokens are matched longest first; equal lengths by lower id, so the order is fixed. */
typedef struct {
    size_t len;
    int32_t id;
} tok_special_len;

static int tok_special_cmp(const void *pa, const void *pb) {
    const tok_special_len *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Token rules by text, as llama.cpp's vocabulary loader applies them (llama-vocab.cpp, after reading the types;
 * GGUF files do not carry these attributes). A token named here is made CONTROL whatever its file type says —
 * so, like llama.cpp, it is split out of text only with parse_special and decodes as "" — and the EOG list
 * and the FIM pad/repo/separator tokens end generation. */
static const char *const tok_eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
};

/* FIM tokens: found by text only when their metadata key (or its deprecated name) is absent. llama.cpp takes
 * the first candidate its hash map yields; a vocabulary with two candidates of one kind is not known, and here
 * every candidate present gets the rule. */
static const struct {
    const char *key, *old_key;
    bool eog;
    const char *names[9];
} tok_fim_kinds[] = {
    {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id", false,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
      "<|prefix|>"}},
    {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id", false,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
      "<|suffix|>"}},
    {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id", false,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
      "<|middle|>"}},
    {"tokenizer.ggml.fim_pad_token_id", NULL, true, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {"tokenizer.ggml.fim_rep_token_id", NULL, true,
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {"tokenizer.ggml.fim_sep_token_id", NULL, true, {"<|file_sep|>"}},
};

/* gpt-oss's channel markers are always rendered: USER_DEFINED (llama.cpp's "quick hack"). */
static const char *const tok_user_defined_names[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

static int32_t tok_find(const tok_vocab *v, const char *text) { return tok_pieces_lookup(&v->pieces, text, strlen(text)); }

static bool tok_is_eog_text(const tok_vocab *v, const char *text) {
    int32_t id = tok_find(v, text);
    return id >= 0 && (v->flags[id] & TOK_FLAG_EOG);
}

static void tok_make_control(tok_vocab *v, int32_t id, bool eog) {
    v->type[id] = TOK_TYPE_CONTROL;
    if (eog) v->flags[id] |= TOK_FLAG_EOG;
}

/* The rules above, then llama.cpp's two workarounds that undo them: o200k-harmony/solar-open's "<|end|>" is
 * not an end (USER_DEFINED), and with gemma4's "<|tool_response>" "</s>" is NORMAL and no end. */
static int tok_apply_text_rules(tok_vocab *v, const gguf_file *f, int32_t eot, int32_t eom, fkv_error *err) {
    for (size_t k = 0; k < sizeof tok_eog_names / sizeof *tok_eog_names; k++) {
        int32_t id = tok_find(v, tok_eog_names[k]);
        if (id >= 0) tok_make_control(v, id, true);
    }
    for (size_t k = 0; k < sizeof tok_fim_kinds / sizeof *tok_fim_kinds; k++) {
        int32_t id = -1;
        if (tok_special_id(f, tok_fim_kinds[k].key, -1, v->pieces.n, &id, err)) return -1;
        if (id < 0 && tok_fim_kinds[k].old_key && tok_special_id(f, tok_fim_kinds[k].old_key, -1, v->pieces.n, &id, err))
            return -1;
        if (id >= 0) { /* named by metadata: its type stays */
            if (tok_fim_kinds[k].eog) v->flags[id] |= TOK_FLAG_EOG;
            continue;
        }
        for (size_t c = 0; c < sizeof tok_fim_kinds[k].names / sizeof *tok_fim_kinds[k].names; c++) {
            if (!tok_fim_kinds[k].names[c]) break;
            int32_t found = tok_find(v, tok_fim_kinds[k].names[c]);
            if (found >= 0) tok_make_control(v, found, tok_fim_kinds[k].eog);
        }
    }
    for (size_t k = 0; k < sizeof tok_user_defined_names / sizeof *tok_user_defined_names; k++) {
        int32_t id = tok_find(v, tok_user_defined_names[k]);
        if (id >= 0) v->type[id] = TOK_TYPE_USER_DEFINED;
    }
    if (v->eos >= 0) v->flags[v->eos] |= TOK_FLAG_EOG;
    if (eot >= 0) v->flags[eot] |= TOK_FLAG_EOG;
    if (eom >= 0) v->flags[eom] |= TOK_FLAG_EOG;

    int32_t end = tok_find(v, "<|end|>");
    if (end >= 0 && tok_is_eog_text(v, "<|end|>") &&
        ((tok_is_eog_text(v, "<|return|>") && tok_is_eog_text(v, "<|call|>")) ||
         (tok_is_eog_text(v, "<|calls|>") && tok_is_eog_text(v, "<|flush|>")))) {
        v->type[end] = TOK_TYPE_USER_DEFINED;
        v->flags[end] &= (uint8_t)~TOK_FLAG_EOG;
    }
    int32_t s_end = tok_find(v, "</s>");
    if (s_end >= 0 && tok_is_eog_text(v, "</s>") && tok_is_eog_text(v, "<|tool_response>")) {
        v->type[s_end] = TOK_TYPE_NORMAL;
        v->flags[s_end] &= (uint8_t)~TOK_FLAG_EOG;
    }
    return 0;
}

/* Defaults as llama.cpp's: SPM BOS 1, EOS 2, UNK 0, BOS added, space prefix; BPE BOS = EOS = 11, no UNK,
 * BOS as the pre-tokenizer says (already in v->add_bos), no space prefix. */
static int tok_load_specials(tok_vocab *v, const gguf_file *f, fkv_error *err) {
    bool bpe = v->bpe != NULL;
    if (tok_special_id(f, "tokenizer.ggml.bos_token_id", bpe ? 11 : 1, v->pieces.n, &v->bos, err) ||
        tok_special_id(f, "tokenizer.ggml.eos_token_id", bpe ? 11 : 2, v->pieces.n, &v->eos, err) ||
        tok_special_id(f, "tokenizer.ggml.unknown_token_id", bpe ? -1 : 0, v->pieces.n, &v->unk, err))
        return -1;
    int32_t eot, eom;
    if (tok_special_id(f, "tokenizer.ggml.eot_token_id", -1, v->pieces.n, &eot, err) ||
        tok_special_id(f, "tokenizer.ggml.eom_token_id", -1, v->pieces.n, &eom, err))
        return -1;
    if (!bpe) v->add_bos = true;
    v->add_space_prefix = !bpe;
    if (tok_opt_bool(f, "tokenizer.ggml.add_bos_token", &v->add_bos, err) ||
        tok_opt_bool(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err))
        return -1;

    if (tok_apply_text_rules(v, f, eot, eom, err)) return -1;

    v->special = malloc((size_t)v->pieces.n * sizeof *v->special);
    if (!v->special) return err_nomem(err, "%s: out of memory for the vocabulary", f->path);
    v->n_special = 0;
    for (int32_t i = 0; i < v->pieces.n; i++)
        if (v->type[i] == TOK_TYPE_CONTROL || v->type[i] == TOK_TYPE_USER_DEFINED || v->type[i] == TOK_TYPE_UNKNOWN)
            v->special[v->n_special++] = i;
    tok_special_len *order = malloc((size_t)v->n_special * sizeof *order + 1);
    if (!order) return err_nomem(err, "%s: out of memory for the vocabulary", f->path);
    for (int32_t i = 0; i < v->n_special; i++) {
        int32_t id = v->special[i];
        order[i] = (tok_special_len){v->pieces.text_off[id + 1] - v->pieces.text_off[id], id};
    }
    qsort(order, (size_t)v->n_special, sizeof *order, tok_special_cmp);
    for (int32_t i = 0; i < v->n_special; i++) v->special[i] = order[i].id;
    free(order);

    const gguf_value *name = gguf_find(f, "general.name");
    if (name && name->type == GGUF_TYPE_STRING && (tok_str_has(name->str, "phi-3") || tok_str_has(name->str, "phi3"))) {
        for (int32_t i = 0; i < v->n_special; i++) {
            int32_t id = v->special[i];
            if (!tok_text_is(v, id, "<unk>") && !tok_text_is(v, id, "<s>") && !tok_text_is(v, id, "<|endoftext|>"))
                v->flags[id] |= TOK_FLAG_RSTRIP;
        }
    }
    return 0;
}

/* Byte fallback tokens, and each token's decoded bytes. */
static int tok_load_decoding(tok_vocab *v, const gguf_file *f, fkv_error *err) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        char raw = (char)b;
        v->byte_tok[b] = tok_pieces_lookup(&v->pieces, name, 6);
        if (v->byte_tok[b] < 0) v->byte_tok[b] = tok_pieces_lookup(&v->pieces, &raw, 1);
    }

    v->dec = malloc(v->pieces.text_off[v->pieces.n] ? v->pieces.text_off[v->pieces.n] : 1); /* decoding never lengthens a piece */
    v->dec_off = malloc(((size_t)v->pieces.n + 1) * sizeof *v->dec_off);
    if (!v->dec || !v->dec_off) return err_nomem(err, "%s: out of memory for the vocabulary", f->path);
    size_t off = 0;
    for (int32_t i = 0; i < v->pieces.n; i++) {
        size_t len;
        const char *t = tok_pieces_text(&v->pieces, i, &len);
        v->dec_off[i] = off;
        switch ((tok_type)v->type[i]) {
        case TOK_TYPE_USER_DEFINED:
            memcpy(v->dec + off, t, len);
            off += len;
            break;
        case TOK_TYPE_NORMAL:
            if (v->bpe) {
                off += tok_bpe_decode_piece(t, len, v->dec + off);
                break;
            }
            for (size_t k = 0; k < len;) {
                if (k + 3 <= len && memcmp(t + k, tok_space_mark, 3) == 0) {
                    v->dec[off++] = ' ';
                    k += 3;
                } else {
                    v->dec[off++] = t[k++];
                }
            }
            break;
        case TOK_TYPE_BYTE: {
            int hi = len == 6 ? tok_hex(t[3]) : -1, lo = len == 6 ? tok_hex(t[4]) : -1;
            if (hi < 0 || lo < 0 || memcmp(t, "<0x", 3) != 0 || t[5] != '>')
                return err_input(err, "%s: token %d '%.*s' has type BYTE but is not written <0xNN>", f->path, (int)i,
                               (int)(len > 64 ? 64 : len), t);
            v->dec[off++] = (char)(hi * 16 + lo);
            break;
        }
        default: /* control, unknown, unused, undefined: nothing, as llama.cpp without "special" */
            break;
        }
    }
    v->dec_off[v->pieces.n] = off;
    return 0;
}

tok_vocab *tok_load(const gguf_file *f, fkv_error *err) {
    const gguf_value *model = gguf_find(f, "tokenizer.ggml.model");
    if (!model) {
        err_input(err, "%s: no tokenizer in this file (key tokenizer.ggml.model is absent)", f->path);
        return NULL;
    }
    gguf_str model_name;
    if (gguf_get_str(f, "tokenizer.ggml.model", &model_name, err)) return NULL;
    bool bpe = gguf_str_eq(model_name, "gpt2");
    if (!bpe && !gguf_str_eq(model_name, "llama")) {
        err_input(err,
                "%s: tokenizer.ggml.model is '%.*s'; only 'llama' (SentencePiece) and 'gpt2' (byte-level BPE) "
                "vocabularies are supported",
                f->path, (int)(model_name.len > 64 ? 64 : model_name.len), model_name.ptr);
        return NULL;
    }
    const gguf_value *tokens;
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err)) return NULL;
    if (tokens->arr.n == 0 || tokens->arr.n > (uint64_t)INT32_MAX / 2) {
        err_input(err, "%s: tokenizer.ggml.tokens has %llu entries", f->path, (unsigned long long)tokens->arr.n);
        return NULL;
    }

    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        err_nomem(err, "%s: out of memory for the vocabulary", f->path);
        return NULL;
    }
    if ((bpe && !(v->bpe = tok_bpe_load(f, &v->add_bos, err))) || tok_pieces_load(&v->pieces, f, tokens, err) ||
        tok_load_types(v, f, err) || tok_load_specials(v, f, err) ||
        tok_load_decoding(v, f, err)) {
        tok_free(v);
        return NULL;
    }
    return v;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    tok_pieces_free(&v->pieces);
    free(v->dec);
    free(v->dec_off);
    free(v->score);
    free(v->type);
    free(v->flags);
    free(v->special);
    tok_bpe_free(v->bpe);
    free(v);
}

int32_t tok_n_vocab(const tok_vocab *v) { return v->pieces.n; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
bool tok_add_bos(const tok_vocab *v) { return v->add_bos; }

tok_type tok_token_type(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->pieces.n ? (tok_type)v->type[id] : TOK_TYPE_UNDEFINED;
}

const char *tok_token_text(const tok_vocab *v, int32_t id, size_t *len) {
    if (id < 0 || id >= v->pieces.n) return NULL;
    return tok_pieces_text(&v->pieces, id, len);
}

bool tok_is_eog(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->pieces.n && (v->flags[id] & TOK_FLAG_EOG);
}

/* --- encoding --- */

/* A piece of the input: text [off, off + len) when id < 0, else the special token id. */
typedef struct {
    size_t off, len;
    int32_t id;
} tok_frag;

typedef struct {
    tok_frag *items;
    size_t n, cap;
} tok_frags;

static int tok_frags_push(tok_frags *l, size_t off, size_t len, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        tok_frag *items = realloc(l->items, cap * sizeof *items);
        if (!items) return -1;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = (tok_frag){off, len, id};
    return 0;
}

/* Whether [at, at + n) overlaps one of the sorted, disjoint spans plain[0..n_plain) (where control tokens are
 * text). */
static bool tok_in_plain(const tok_span *plain, size_t n_plain, size_t at, size_t n) {
    size_t lo = 0, hi = n_plain; /* the first span ending after at */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (plain[mid].off + plain[mid].len <= at) lo = mid + 1;
        else hi = mid;
    }
    return lo < n_plain && plain[lo].off < at + n;
}

/* Step 1: split every occurrence of each special token out of the text fragments in *frags. Control and unknown
 * tokens take part only with parse_special, and then not where they overlap a plain span. */
static int tok_partition(const tok_vocab *v, const char *text, bool parse_special, const tok_span *plain,
                         size_t n_plain, tok_frags *frags, tok_frags *scratch) {
    for (int32_t k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        bool always = v->type[id] == TOK_TYPE_USER_DEFINED;
        if (!parse_special && !always) continue;
        const bool check_plain = !always && n_plain > 0;
        size_t slen;
        const char *s = tok_pieces_text(&v->pieces, id, &slen);
        bool hit = false;
        for (size_t i = 0; i < frags->n && !hit; i++)
            hit = frags->items[i].id < 0 && memmem(text + frags->items[i].off, frags->items[i].len, s, slen);
        if (!hit) continue;

        scratch->n = 0;
        for (size_t i = 0; i < frags->n; i++) {
            tok_frag fr = frags->items[i];
            if (fr.id >= 0) {
                if (tok_frags_push(scratch, fr.off, fr.len, fr.id)) return -1;
                continue;
            }
            size_t pos = fr.off, from = fr.off, end = fr.off + fr.len;
            const char *m;
            while ((m = memmem(text + from, end - from, s, slen)) != NULL) {
                size_t at = (size_t)(m - text);
                if (check_plain && tok_in_plain(plain, n_plain, at, slen)) { /* text here: look further on */
                    from = at + 1;
                    continue;
                }
                if (at > pos && tok_frags_push(scratch, pos, at - pos, -1)) return -1;
                if (tok_frags_push(scratch, 0, 0, id)) return -1;
                pos = from = at + slen;
                if (v->flags[id] & TOK_FLAG_RSTRIP)
                    while (pos < end && tok_is_space(text[pos])) pos++;
                from = pos;
            }
            if (pos < end && tok_frags_push(scratch, pos, end - pos, -1)) return -1;
        }
        tok_frags t = *frags;
        *frags = *scratch;
        *scratch = t;
    }
    return 0;
}

typedef struct {
    const char *text;
    size_t n; /* 0 once merged into its left neighbour */
    int32_t prev, next;
} tok_sym;

/* Scratch for one SPM run, reused across fragments. */
typedef struct {
    char *esc;
    tok_sym *syms;
    tok_merge_queue queue;
} tok_work;

static int tok_try_bigram(const tok_vocab *v, tok_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    size_t size = w->syms[left].n + w->syms[right].n;
    int32_t id = tok_pieces_lookup(&v->pieces, w->syms[left].text, size);
    if (id < 0) return 0;
    return tok_merge_push(&w->queue, (tok_merge){-v->score[id], left, right, size});
}

/* Unicode-free UTF-8 length from the lead byte, as llama.cpp's unicode_len_utf8. */
static size_t tok_utf8_len(unsigned char c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Steps 2-4 on one text fragment. */
static int tok_spm(const tok_vocab *v, tok_work *w, const char *frag, size_t frag_len, bool space_prefix,
                   tok_sink *sink) {
    size_t len = 0;
    if (space_prefix) {
        memcpy(w->esc, tok_space_mark, 3);
        len = 3;
    }
    for (size_t i = 0; i < frag_len; i++) {
        if (frag[i] == ' ') {
            memcpy(w->esc + len, tok_space_mark, 3);
            len += 3;
        } else {
            w->esc[len++] = frag[i];
        }
    }

    int32_t n_sym = 0;
    for (size_t off = 0; off < len; n_sym++) {
        size_t n = tok_utf8_len((unsigned char)w->esc[off]);
        if (n > len - off) n = len - off;
        for (size_t k = 1; k < n; k++) /* an invalid lead byte must not swallow a space: see the top */
            if (k + 3 <= len - off && memcmp(w->esc + off + k, tok_space_mark, 3) == 0) n = k;
        w->syms[n_sym] = (tok_sym){w->esc + off, n, n_sym - 1, off + n == len ? -1 : n_sym + 1};
        off += n;
    }

    w->queue.n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (tok_try_bigram(v, w, i - 1, i)) return -1;
    while (w->queue.n) {
        tok_merge b = tok_merge_pop(&w->queue);
        tok_sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = b.left;
        if (tok_try_bigram(v, w, l->prev, b.left) || tok_try_bigram(v, w, b.left, l->next)) return -1;
    }

    for (int32_t i = n_sym ? 0 : -1; i >= 0; i = w->syms[i].next) {
        const tok_sym *s = &w->syms[i];
        int32_t id = tok_pieces_lookup(&v->pieces, s->text, s->n);
        if (id >= 0) {
            tok_emit(sink, id);
            continue;
        }
        bool all_bytes = true;
        for (size_t k = 0; k < s->n; k++) all_bytes = all_bytes && v->byte_tok[(unsigned char)s->text[k]] >= 0;
        if (!all_bytes) {
            tok_emit(sink, v->unk);
            continue;
        }
        for (size_t k = 0; k < s->n; k++) tok_emit(sink, v->byte_tok[(unsigned char)s->text[k]]);
    }
    return 0;
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
               int32_t *out, int cap, fkv_error *err) {
    return tok_encode_spans(v, text, len, add_bos, parse_special, NULL, 0, out, cap, err);
}

/* tok_encode_spans, where follows_text says the text continues a sequence whose last token is text (see
 * tok_encode_after): its first fragment then gets no space prefix. */
static int tok_encode_impl(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                           const tok_span *plain, size_t n_plain, bool follows_text, int32_t *out, int cap,
                           fkv_error *err) {
    for (size_t i = 0; i < n_plain; i++)
        if (plain[i].off + plain[i].len > len || (i > 0 && plain[i].off < plain[i - 1].off + plain[i - 1].len))
            return err_input(err, "tok_encode: plain span %zu [%zu, +%zu) is out of order or past the text's %zu bytes",
                           i, plain[i].off, plain[i].len, len);
    if (len > ((size_t)INT32_MAX - 3) / 3)
        return err_input(err, "tok_encode: text of %zu bytes is too long to tokenize in one call", len);
    if (add_bos && v->bos < 0) return err_input(err, "tok_encode: BOS requested but the vocabulary has no BOS token");

    tok_sink sink = {out, cap > 0 ? cap : 0, 0};
    tok_frags frags = {0}, scratch = {0};
    tok_work w = {0};
    tok_bpe_work *bw = NULL;
    int rc = -1;

    if (add_bos) tok_emit(&sink, v->bos);
    if (len > 0 && (tok_frags_push(&frags, 0, len, -1) || tok_partition(v, text, parse_special, plain, n_plain, &frags, &scratch)))
        goto oom;

    if (v->bpe) {
        if (!(bw = tok_bpe_work_new())) goto oom;
    } else {
        size_t max_len = 0;
        for (size_t i = 0; i < frags.n; i++)
            if (frags.items[i].id < 0 && frags.items[i].len > max_len) max_len = frags.items[i].len;
        size_t esc_cap = 3 * max_len + 3;
        w.esc = malloc(esc_cap);
        w.syms = malloc(esc_cap * sizeof *w.syms);
        if (!w.esc || !w.syms) goto oom;
    }

    for (size_t i = 0; i < frags.n; i++) {
        const tok_frag *fr = &frags.items[i];
        if (fr->id >= 0)
            tok_emit(&sink, fr->id);
        else if (v->bpe) {
            if (tok_bpe_encode(v->bpe, &v->pieces, bw, text + fr->off, fr->len, &sink, err)) goto done;
        } else if (tok_spm(v, &w, text + fr->off, fr->len, v->add_space_prefix && !(i == 0 && follows_text), &sink))
            goto oom;
    }
    if (sink.n > INT32_MAX) {
        err_input(err, "tok_encode: %lld tokens do not fit the int count", (long long)sink.n);
        goto done;
    }
    rc = (int)sink.n;
    goto done;
oom:
    err_nomem(err, "tok_encode: out of memory tokenizing %zu bytes", len);
done:
    free(frags.items);
    free(scratch.items);
    free(w.esc);
    free(w.syms);
    free(w.queue.heap);
    tok_bpe_work_free(bw);
    return rc;
}

int tok_encode_spans(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                     const tok_span *plain, size_t n_plain, int32_t *out, int cap, fkv_error *err) {
    return tok_encode_impl(v, text, len, add_bos, parse_special, plain, n_plain, false, out, cap, err);
}

int tok_encode_after(const tok_vocab *v, int32_t prev, const char *text, size_t len, bool parse_special,
                     const tok_span *plain, size_t n_plain, int32_t *out, int cap, fkv_error *err) {
    tok_type t = prev >= 0 && prev < v->pieces.n ? tok_token_type(v, prev) : TOK_TYPE_CONTROL;
    bool special = t == TOK_TYPE_CONTROL || t == TOK_TYPE_USER_DEFINED || t == TOK_TYPE_UNKNOWN;
    return tok_encode_impl(v, text, len, false, parse_special, plain, n_plain, !special, out, cap, err);
}

/* --- decoding --- */

int tok_piece(const tok_vocab *v, int32_t prev, int32_t id, char *buf, int cap) {
    if (id < 0 || id >= v->pieces.n) return -1;
    const char *p = v->dec + v->dec_off[id];
    size_t n = v->dec_off[id + 1] - v->dec_off[id];
    if (v->add_space_prefix && (prev < 0 || prev == v->bos) && n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    size_t copy = cap > 0 ? ((size_t)cap < n ? (size_t)cap : n) : 0;
    if (copy) memcpy(buf, p, copy);
    return (int)n;
}

int tok_decode(const tok_vocab *v, const int32_t *ids, int n, char *buf, int cap) {
    int64_t total = 0;
    int32_t prev = -1;
    for (int i = 0; i < n; i++) {
        int room = total < cap ? cap - (int)total : 0;
        int len = tok_piece(v, prev, ids[i], room ? buf + total : NULL, room);
        if (len < 0) return -1;
        total += len;
        if (total > INT32_MAX) return -1;
        prev = ids[i];
    }
    if (total < cap) buf[total] = 0;
    return (int)total;
}
