/* tok_bpe.c — llama.cpp's byte-level BPE (tokenizer.ggml.model = "gpt2") on tok.c's vocabulary.
 *
 * A text fragment (special tokens already split out by tok.c) goes through three steps, as in llama.cpp:
 *   1. Pre-tokenize: the regexes of the vocabulary's tokenizer.ggml.pre run one after another; each splits
 *      every current piece into its matches AND the gaps between them (a gap is kept as a piece too, as
 *      llama.cpp's unicode_regex_split does). Each regex sees one piece at a time, so lookaheads and "$"
 *      stop at the piece's end. The regexes are llama.cpp's, run by PCRE2 with Unicode properties
 *      (PCRE2_UTF | PCRE2_UCP, JIT when available). llama.cpp runs the gpt-2 and llama3 expressions
 *      through hand-written matchers and the others through std::regex on text whose non-ASCII characters
 *      are collapsed to one byte per Unicode category; for assigned code points both agree with the
 *      regex as written, which is what PCRE2 runs.
 *   2. Byte-level alphabet: every byte of a piece becomes one of GPT-2's 256 printable characters
 *      (bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF stand for themselves; the other 68 bytes, in order, become
 *      U+0100..U+0143 — so ' ' is 'Ġ' U+0120).
 *   3. Merge: each byte's character is a symbol; adjacent symbols merge through a min-heap keyed by the
 *      rank of the pair in tokenizer.ggml.merges (its index; equal ranks leftmost first), until no
 *      adjacent pair has a rank. Each final symbol is its piece's id; a symbol that is no piece goes out
 *      as the ids of its single bytes that are pieces (llama.cpp drops the others). For the llama3 family
 *      (ignore_merges) a piece that is itself in the vocabulary is emitted whole without merging.
 *
 * Invalid UTF-8: llama.cpp turns each invalid byte into U+FFFD before step 2, so its ids decode to
 * "\xEF\xBF\xBD", not to the input. flatkv keeps the bytes: the regexes are compiled with
 * PCRE2_MATCH_INVALID_UTF, under which no match contains an invalid byte, so invalid bytes land in the
 * gaps of step 1, go through the alphabet of step 2 like any byte, and decode back to themselves. On
 * valid UTF-8 nothing changes.
 *
 * Merge ranks live in an open-addressing hash keyed by the pair's two strings (llama.cpp splits each
 * merge line at its first space after the first byte; a repeated pair keeps its first rank).
 */
#include "text/tok_bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"
#include "text/tok_merge.h"

#define TOK_BPE_MAX_RE 6

/* --- pre-tokenizers (llama.cpp's llm_tokenizer_bpe, by tokenizer.ggml.pre) --- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                                            \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
                    "\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                         \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
                    "\\s+(?!\\S)|\\s+"
#define RE_CJK "[一-龥ࠀ-一가-퟿]+"

typedef struct {
    const char *const *names; /* tokenizer.ggml.pre values, NULL-terminated */
    const char *regexes[TOK_BPE_MAX_RE]; /* applied in order; NULL-terminated when fewer */
    bool ignore_merges;       /* a piece that is a token is emitted whole */
    bool add_bos;             /* default of tokenizer.ggml.add_bos_token */
} tok_bpe_pre;

static const char *const pre_default[] = {"default", NULL};
static const char *const pre_gpt2[] = {"gpt-2",  "phi-2",      "jina-es", "jina-de", "gigachat",    "jina-v2-es",
                                       "jina-v2-de", "a.x-4.0", "mellum",  "modern-bert", "exaone4", "mpt",
                                       "olmo",   "jais",       "trillion", "granite-docling", NULL};
static const char *const pre_llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                                         "midm-2.0", "lfm2", NULL};
static const char *const pre_dbrx[] = {"dbrx", "smaug-bpe", NULL};
static const char *const pre_qwen2[] = {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", NULL};
static const char *const pre_deepseek_llm[] = {"deepseek-llm", NULL};
static const char *const pre_deepseek_coder[] = {"deepseek-coder", NULL};
static const char *const pre_falcon[] = {"falcon", NULL};
static const char *const pre_starcoder[] = {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                                            "minerva-7b", NULL};

static const tok_bpe_pre tok_bpe_pres[] = {
    {pre_default, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false},
    {pre_gpt2, {RE_GPT2}, false, false},
    {pre_llama3, {RE_LLAMA3}, true, true},
    {pre_dbrx, {RE_LLAMA3}, false, false},
    {pre_qwen2, {RE_QWEN2}, false, false},
    /* deepseek-llm's letter class: the canonical singletons (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A)
     * are escaped, because Unicode normalization of this file would silently turn them into other letters */
    {pre_deepseek_llm,
     {"[\\r\\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RE_CJK, "\\p{N}+"},
     false, false},
    {pre_deepseek_coder, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false, false},
    {pre_falcon, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false, false},
    {pre_starcoder, {"\\p{N}", RE_GPT2}, false, false},
};

struct tok_bpe {
    pcre2_code *re[TOK_BPE_MAX_RE];
    int n_re;
    bool ignore_merges;
    char *merge_text;       /* every merge line, back to back */
    size_t *merge_off;      /* [n_merges + 1] line m is merge_text[merge_off[m] .. merge_off[m + 1]) */
    uint32_t *merge_split;  /* [n_merges] length of the left part; the right part starts one byte later */
    int32_t n_merges;
    int32_t *merge_slots;   /* hash table of merge indices (= ranks), -1 = empty */
    uint64_t merge_mask;
    char alphabet[256][2];  /* UTF-8 of each byte's character */
    uint8_t alphabet_len[256];
};

/* A symbol during merging: bytes text[0..n) of the alphabet-encoded word. */
typedef struct {
    const char *text;
    size_t n; /* 0 once merged into its left neighbour */
    int32_t prev, next;
} tok_bpe_sym;

typedef struct {
    size_t off, len;
} tok_bpe_span;

struct tok_bpe_work {
    pcre2_match_data *match;
    tok_bpe_span *spans[2];
    size_t span_cap[2];
    char *enc;
    tok_bpe_sym *syms;
    size_t word_cap; /* bytes of input word the enc/syms buffers hold */
    tok_merge_queue queue;
};

/* --- the byte-level alphabet --- */

static bool tok_bpe_byte_is_itself(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

/* The code point byte b is written as. */
static unsigned tok_bpe_byte_cp(unsigned b) {
    if (tok_bpe_byte_is_itself(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67; /* 0xAD */
}

/* The byte code point cp stands for, or -1 outside the alphabet. */
static int tok_bpe_cp_byte(unsigned cp) {
    if (cp < 0x100) return tok_bpe_byte_is_itself(cp) ? (int)cp : -1;
    if (cp <= 0x100 + 32) return (int)(cp - 0x100);
    if (cp <= 0x100 + 66) return (int)(cp - 0x100 - 33 + 0x7F);
    return cp == 0x100 + 67 ? 0xAD : -1;
}

size_t tok_bpe_decode_piece(const char *piece, size_t len, char *out) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)piece[i];
        if (c < 0x80) {
            int b = tok_bpe_cp_byte(c);
            out[n++] = b >= 0 ? (char)b : (char)c;
            i++;
            continue;
        }
        /* every alphabet character above ASCII is two bytes: 0xC2..0xC5 then a continuation byte */
        if (c >= 0xC2 && c <= 0xC5 && i + 1 < len && ((unsigned char)piece[i + 1] & 0xC0) == 0x80) {
            int b = tok_bpe_cp_byte(((c & 0x1Fu) << 6) | ((unsigned char)piece[i + 1] & 0x3Fu));
            if (b >= 0) {
                out[n++] = (char)b;
                i += 2;
                continue;
            }
        }
        out[n++] = (char)c; /* outside the alphabet: copied byte by byte */
        i++;
    }
    return n;
}

/* --- merges --- */

static uint64_t tok_bpe_pair_hash(const char *l, size_t ll, const char *r, size_t rl) {
    return XXH3_64bits_withSeed(r, rl, XXH3_64bits(l, ll));
}

/* The rank of the pair (l, r), or -1. */
static int32_t tok_bpe_rank(const tok_bpe *b, const char *l, size_t ll, const char *r, size_t rl) {
    for (uint64_t i = tok_bpe_pair_hash(l, ll, r, rl) & b->merge_mask;; i = (i + 1) & b->merge_mask) {
        int32_t m = b->merge_slots[i];
        if (m < 0) return -1;
        const char *t = b->merge_text + b->merge_off[m];
        size_t split = b->merge_split[m], total = b->merge_off[m + 1] - b->merge_off[m];
        size_t right = total > split ? total - split - 1 : 0;
        if (split == ll && right == rl && memcmp(t, l, ll) == 0 && (rl == 0 || memcmp(t + split + 1, r, rl) == 0))
            return m;
    }
}

static int tok_bpe_load_merges(tok_bpe *b, const gguf_file *f, fkv_error *err) {
    const gguf_value *merges;
    if (gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err)) return -1;
    if (merges->arr.n > (uint64_t)INT32_MAX / 2)
        return err_input(err, "%s: tokenizer.ggml.merges has %llu entries", f->path, (unsigned long long)merges->arr.n);
    b->n_merges = (int32_t)merges->arr.n;
    size_t total = 0;
    for (int32_t m = 0; m < b->n_merges; m++) total += merges->arr.items[m].str.len;
    uint64_t n_slots = 16;
    while (n_slots < 2 * (uint64_t)b->n_merges) n_slots *= 2;
    b->merge_mask = n_slots - 1;
    b->merge_text = malloc(total ? total : 1);
    b->merge_off = malloc(((size_t)b->n_merges + 1) * sizeof *b->merge_off);
    b->merge_split = malloc(((size_t)b->n_merges + 1) * sizeof *b->merge_split);
    b->merge_slots = malloc(n_slots * sizeof *b->merge_slots);
    if (!b->merge_text || !b->merge_off || !b->merge_split || !b->merge_slots)
        return err_nomem(err, "%s: out of memory for the merges", f->path);
    memset(b->merge_slots, 0xff, n_slots * sizeof *b->merge_slots);

    size_t off = 0;
    for (int32_t m = 0; m < b->n_merges; m++) {
        gguf_str s = merges->arr.items[m].str;
        if (s.len > UINT32_MAX)
            return err_input(err, "%s: tokenizer.ggml.merges[%d] is %llu bytes long", f->path, (int)m,
                           (unsigned long long)s.len);
        /* llama.cpp: the first space after the first byte splits; a line without one is the pair ("", "") */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        b->merge_off[m] = off;
        b->merge_split[m] = sp ? (uint32_t)(sp - s.ptr) : 0;
        if (sp) {
            memcpy(b->merge_text + off, s.ptr, s.len);
            off += s.len;
        }
    }
    b->merge_off[b->n_merges] = off;
    for (int32_t m = 0; m < b->n_merges; m++) {
        const char *t = b->merge_text + b->merge_off[m];
        size_t split = b->merge_split[m], total = b->merge_off[m + 1] - b->merge_off[m];
        size_t right = total > split ? total - split - 1 : 0;
        const char *r = right ? t + split + 1 : t;
        if (tok_bpe_rank(b, t, split, r, right) >= 0) continue; /* a repeat keeps its first rank */
        uint64_t i = tok_bpe_pair_hash(t, split, r, right) & b->merge_mask;
        while (b->merge_slots[i] >= 0) i = (i + 1) & b->merge_mask;
        b->merge_slots[i] = m;
    }
    return 0;
}

/* --- loading --- */

static const tok_bpe_pre *tok_bpe_find_pre(gguf_str name) {
    for (size_t k = 0; k < sizeof tok_bpe_pres / sizeof *tok_bpe_pres; k++)
        for (const char *const *n = tok_bpe_pres[k].names; *n; n++)
            if (gguf_str_eq(name, *n)) return &tok_bpe_pres[k];
    return NULL;
}

tok_bpe *tok_bpe_load(const gguf_file *f, bool *add_bos, fkv_error *err) {
    const tok_bpe_pre *pre = &tok_bpe_pres[0];
    if (gguf_find(f, "tokenizer.ggml.pre")) {
        gguf_str name;
        if (gguf_get_str(f, "tokenizer.ggml.pre", &name, err)) return NULL;
        pre = tok_bpe_find_pre(name);
        if (!pre) {
            err_unsupported(err, "%s: tokenizer.ggml.pre is '%.*s', a pre-tokenizer flatkv does not know", f->path,
                    (int)(name.len > 64 ? 64 : name.len), name.ptr);
            return NULL;
        }
    }
    if (!gguf_find(f, "tokenizer.ggml.merges")) {
        err_input(err, "%s: tokenizer.ggml.model is 'gpt2' but tokenizer.ggml.merges is absent", f->path);
        return NULL;
    }
    tok_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        err_nomem(err, "%s: out of memory for the merges", f->path);
        return NULL;
    }
    b->ignore_merges = pre->ignore_merges;
    *add_bos = pre->add_bos;
    for (unsigned c = 0; c < 256; c++) {
        unsigned cp = tok_bpe_byte_cp(c);
        if (cp < 0x80) {
            b->alphabet[c][0] = (char)cp;
            b->alphabet_len[c] = 1;
        } else {
            b->alphabet[c][0] = (char)(0xC0 | (cp >> 6));
            b->alphabet[c][1] = (char)(0x80 | (cp & 0x3F));
            b->alphabet_len[c] = 2;
        }
    }
    if (tok_bpe_load_merges(b, f, err)) goto fail;

    for (; b->n_re < TOK_BPE_MAX_RE && pre->regexes[b->n_re]; b->n_re++) {
        int code;
        PCRE2_SIZE at;
        b->re[b->n_re] = pcre2_compile((PCRE2_SPTR)pre->regexes[b->n_re], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                                       &code, &at, NULL);
        if (!b->re[b->n_re]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(code, msg, sizeof msg);
            err_input(err, "%s: pre-tokenizer regex %d does not compile at offset %zu: %s", f->path, b->n_re,
                    (size_t)at, (const char *)msg);
            goto fail;
        }
        pcre2_jit_compile(b->re[b->n_re], PCRE2_JIT_COMPLETE); /* without JIT the interpreter runs it */
    }
    return b;
fail:
    tok_bpe_free(b);
    return NULL;
}

void tok_bpe_free(tok_bpe *b) {
    if (!b) return;
    for (int i = 0; i < b->n_re; i++) pcre2_code_free(b->re[i]);
    free(b->merge_text);
    free(b->merge_off);
    free(b->merge_split);
    free(b->merge_slots);
    free(b);
}

/* --- encoding --- */

tok_bpe_work *tok_bpe_work_new(void) {
    tok_bpe_work *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->match = pcre2_match_data_create(1, NULL);
    if (!w->match) {
        free(w);
        return NULL;
    }
    return w;
}

void tok_bpe_work_free(tok_bpe_work *w) {
    if (!w) return;
    pcre2_match_data_free(w->match);
    free(w->spans[0]);
    free(w->spans[1]);
    free(w->enc);
    free(w->syms);
    free(w->queue.heap);
    free(w);
}

static int tok_bpe_span_push(tok_bpe_work *w, int k, size_t *n, size_t off, size_t len) {
    if (*n == w->span_cap[k]) {
        size_t cap = w->span_cap[k] ? 2 * w->span_cap[k] : 64;
        tok_bpe_span *s = realloc(w->spans[k], cap * sizeof *s);
        if (!s) return -1;
        w->spans[k] = s;
        w->span_cap[k] = cap;
    }
    w->spans[k][(*n)++] = (tok_bpe_span){off, len};
    return 0;
}

static int tok_bpe_try_pair(const tok_bpe *b, tok_bpe_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    const tok_bpe_sym *l = &w->syms[left], *r = &w->syms[right];
    int32_t rank = tok_bpe_rank(b, l->text, l->n, r->text, r->n);
    if (rank < 0) return 0;
    return tok_merge_push(&w->queue, (tok_merge){(float)rank, left, right, l->n + r->n});
}

/* Steps 2 and 3 on one pre-tokenized piece. */
static int tok_bpe_word(const tok_bpe *b, const tok_pieces *v, tok_bpe_work *w, const char *word, size_t len,
                        tok_sink *sink) {
    if (len > w->word_cap) {
        char *enc = realloc(w->enc, 2 * len);
        if (!enc) return -1;
        w->enc = enc;
        tok_bpe_sym *syms = realloc(w->syms, len * sizeof *syms);
        if (!syms) return -1;
        w->syms = syms;
        w->word_cap = len;
    }
    size_t n_enc = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)word[i];
        w->syms[i] = (tok_bpe_sym){w->enc + n_enc, b->alphabet_len[c], (int32_t)i - 1,
                                   i + 1 == len ? -1 : (int32_t)i + 1};
        memcpy(w->enc + n_enc, b->alphabet[c], b->alphabet_len[c]);
        n_enc += b->alphabet_len[c];
    }
    if (b->ignore_merges) {
        int32_t id = tok_pieces_lookup(v, w->enc, n_enc);
        if (id >= 0) {
            tok_emit(sink, id);
            return 0;
        }
    }

    w->queue.n = 0;
    for (int32_t i = 1; i < (int32_t)len; i++)
        if (tok_bpe_try_pair(b, w, i - 1, i)) return -1;
    while (w->queue.n) {
        tok_merge g = tok_merge_pop(&w->queue);
        tok_bpe_sym *l = &w->syms[g.left], *r = &w->syms[g.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = g.left;
        if (tok_bpe_try_pair(b, w, l->prev, g.left) || tok_bpe_try_pair(b, w, g.left, l->next)) return -1;
    }

    for (int32_t i = 0; i >= 0; i = w->syms[i].next) {
        const tok_bpe_sym *s = &w->syms[i];
        int32_t id = tok_pieces_lookup(v, s->text, s->n);
        if (id >= 0) {
            tok_emit(sink, id);
            continue;
        }
        for (size_t k = 0; k < s->n; k++) {
            int32_t byte_id = tok_pieces_lookup(v, s->text + k, 1);
            if (byte_id >= 0) tok_emit(sink, byte_id);
        }
    }
    return 0;
}

int tok_bpe_encode(const tok_bpe *b, const tok_pieces *v, tok_bpe_work *w, const char *text, size_t len,
                   tok_sink *sink, fkv_error *err) {
    if (len == 0) return 0;
    size_t n_cur = 0;
    int cur = 0;
    if (tok_bpe_span_push(w, cur, &n_cur, 0, len)) goto oom;
    for (int k = 0; k < b->n_re; k++) {
        size_t n_next = 0;
        for (size_t i = 0; i < n_cur; i++) {
            tok_bpe_span s = w->spans[cur][i];
            const PCRE2_SPTR subject = (PCRE2_SPTR)(text + s.off);
            size_t pos = 0; /* end of the last match, within s */
            size_t from = 0;
            while (from < s.len) {
                int rc = pcre2_match(b->re[k], subject, s.len, from, 0, w->match, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[128];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    return err_input(err, "tok_encode: pre-tokenizer regex %d failed at byte %zu: %s", k, s.off + from,
                                   (const char *)msg);
                }
                const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->match);
                size_t start = ov[0], end = ov[1];
                if (end == start) { /* an empty match splits nothing: step over one character */
                    for (from = start + 1; from < s.len && (subject[from] & 0xC0) == 0x80; from++) {}
                    continue;
                }
                if (start > pos && tok_bpe_span_push(w, 1 - cur, &n_next, s.off + pos, start - pos)) goto oom;
                if (tok_bpe_span_push(w, 1 - cur, &n_next, s.off + start, end - start)) goto oom;
                pos = from = end;
            }
            if (pos < s.len && tok_bpe_span_push(w, 1 - cur, &n_next, s.off + pos, s.len - pos)) goto oom;
        }
        cur = 1 - cur;
        n_cur = n_next;
    }
    for (size_t i = 0; i < n_cur; i++)
        if (tok_bpe_word(b, v, w, text + w->spans[cur][i].off, w->spans[cur][i].len, sink)) goto oom;
    return 0;
oom:
    return err_nomem(err, "tok_encode: out of memory tokenizing %zu bytes", len);
}
