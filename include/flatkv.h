/* flatkv.h — the public C API of flatkv.
 *
 * flatkv loads GGUF llama-family models and computes them so that every row's bits (activations, K/V
 * entries, logits) depend only on the tokens at and before its position: whatever chunk size, thread
 * count or batch computed it (docs/design.md §1). Everything a program needs to load a model, tokenize,
 * evaluate chunks of positions into a KV buffer and sample is here.
 *
 * Errors: functions that can fail return NULL or a negative status and fill an fkv_error with a status code (what
 * kind of failure: callers decide on it, never on the text) and one sentence naming what is wrong and where.
 * Nothing here prints or exits.
 * Ownership: whoever creates frees (fkv_x_new / fkv_x_free).
 */
#ifndef FLATKV_H
#define FLATKV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What kind of failure an fkv_error reports. A caller maps it to an exit status or an HTTP status in one table. */
typedef enum fkv_status {
    FKV_OK = 0,
    FKV_E_INPUT,       /* the input is wrong: a file, an argument, a request, a call out of order */
    FKV_E_UNSUPPORTED, /* well formed, but flatkv does not compute it (an architecture, a tensor type, a feature) */
    FKV_E_NOMEM,       /* an allocation failed */
    FKV_E_KV_FULL,     /* the KV memory cannot hold the sequence now (others hold it; it may fit later) */
    FKV_E_IO,          /* reading or writing a file failed */
    FKV_E_BUSY,        /* no room for it now (slots, a queue): it may succeed later */
    FKV_E_TIMEOUT,     /* the time it was given ran out */
    FKV_E_CANCELLED,   /* the caller asked it to stop */
} fkv_status;

typedef struct fkv_error {
    fkv_status code;
    char msg[512];
} fkv_error;

/* A short stable name of a status, from the one table of them in src/base/err.c ("input", "kv_full", ...). */
const char *fkv_status_name(fkv_status code);

/* ---- kernels: which instruction-set variant computes (every one gives the same bits) ---- */

/* Make the kernels named `name` (a variant of src/kernels/dispatch.c's table: "ref", the portable reference, or a
 * SIMD one such as "avx2") the ones this process runs; NULL or "" means FLATKV_KERNELS when set, else the best this
 * CPU and OS allow. Call it before loading a model (weights are laid out for the variant that loads them). 0, or -1
 * with err saying why the name is unknown or cannot run here. Without a call, the first model load makes the default
 * choice (and fails on a bad FLATKV_KERNELS). */
int fkv_kernels_select(const char *name, fkv_error *err);
/* The variant in use (after a selection or a model load). */
const char *fkv_kernels_name(void);

/* ---- models ---- */

typedef struct fkv_model fkv_model;

typedef struct {
    uint32_t n_vocab;
    uint32_t n_ctx_train; /* the context length the model was trained with */
    uint32_t dim;
    uint32_t hidden;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    const char *name;
    uint32_t n_nextn; /* NextN (multi-token prediction) blocks after the layers: a drafter for --spec mtp */
} fkv_model_info;

/* Load a GGUF model with its tokenizer. Its architecture must be a row of the architecture table
 * (src/model/model.c) and its matrices' element types rows of the type traits table (src/kernels/traits.c);
 * `flatkv gen-model --help` lists both. NULL with err naming the file and the key or tensor at fault
 * (FKV_E_UNSUPPORTED for what flatkv does not compute). The file is mapped: the layers' matrices (and an untied
 * output matrix) are copied into memory the model owns, packed for the kernels; the embeddings are read in place, and
 * so are the experts of a mixture of experts unless they are packed too. FLATKV_EXPERTS says which: "auto" (the
 * default) packs them when the model fits in 3/4 of the memory available, "pack" always, "map" never (a model larger
 * than memory then pages its experts in as rows use them). */
fkv_model *fkv_model_load(const char *path, fkv_error *err);
void fkv_model_free(fkv_model *m);
/* Keep the whole model resident (mlock of its mapping and its own weights): experts are never paged out. -1 with
 * err (FKV_E_NOMEM, naming the bytes and RLIMIT_MEMLOCK) when the system refuses; nothing is locked then. */
int fkv_model_mlock(const fkv_model *m, fkv_error *err);
fkv_model_info fkv_model_get_info(const fkv_model *m);

/* The model's chat template source (tokenizer.chat_template, Jinja), NUL-terminated; NULL when absent. */
const char *fkv_model_chat_template(const fkv_model *m);

/* ---- tokens ---- */

/* Encode len bytes of text into at most cap ids; returns the full count (call again with a larger
 * buffer when it exceeds cap) or -1 with err. add_bos prepends BOS when the model uses one;
 * parse_special lets control-token texts such as "<s>" in the text become those tokens. */
int fkv_tokenize(const fkv_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                 int32_t *out, int cap, fkv_error *err);
/* The bytes of token id when it follows prev (-1 at the start), into buf (at most cap bytes, not
 * NUL-terminated); the full length, or -1 for an id outside the vocabulary. */
int fkv_token_piece(const fkv_model *m, int32_t prev, int32_t id, char *buf, int cap);
int32_t fkv_token_bos(const fkv_model *m); /* -1 when the vocabulary has none */
/* True for ids that end a generation (EOS and end-of-turn tokens). */
bool fkv_token_is_eog(const fkv_model *m, int32_t id);

/* ---- contexts: a KV buffer and the scratch to compute chunks of positions into it ---- */

/* How K/V rows are stored. F32 and F16 keep each value (F16 rounded to nearest even); Q8_0 and Q4_0 quantize each
 * row on its own in blocks of 32 values with an f16 scale per block, as ggml's block_q8_0 / block_q4_0 (about
 * 1/1.9 and 1/3.6 of F16's bytes): a row's bytes still depend on its own values alone, so on the tokens at and
 * before it. The quantized types need a head size that is a multiple of 32 (a model with another is refused).
 * AUTO, the default, is Q8_0 where the heads allow it and F16 otherwise: at agent lengths the K/V outweighs the
 * weights, and Q8_0 decodes 1.5-1.9x faster than F16 at 16k positions for a mean logit distance from F32 K/V of
 * about 0.03 (docs/performance.md). */
typedef enum { FKV_KV_F32 = 0, FKV_KV_F16 = 1, FKV_KV_Q8_0 = 2, FKV_KV_Q4_0 = 3, FKV_KV_AUTO = 4 } fkv_kv_type;

typedef struct {
    uint32_t n_ctx;        /* positions the KV holds; 0: the model's training context */
    fkv_kv_type kv_type;   /* storage of K/V rows (AUTO: as fkv_kv_type says) */
    int n_threads;         /* 0: OpenMP's default */
    uint32_t prefill_rows; /* the position-fixed grid of prefill chunks (docs/design.md §3); 0: engine's choice */
} fkv_ctx_params;

typedef struct fkv_ctx fkv_ctx;

fkv_ctx_params fkv_ctx_default_params(void);
fkv_ctx *fkv_ctx_new(const fkv_model *m, const fkv_ctx_params *p, fkv_error *err);
void fkv_ctx_free(fkv_ctx *c);
uint32_t fkv_ctx_n_ctx(const fkv_ctx *c);
fkv_kv_type fkv_ctx_kv_type(const fkv_ctx *c); /* the storage taken (AUTO resolved) */
/* "auto", "f32", "f16", "q8_0", "q4_0" (--kv-type's words); NULL for a value that is none of fkv_kv_type's. */
const char *fkv_kv_type_name(fkv_kv_type t);

/* Compute positions [pos0, pos0+n) from ids, writing their K/V rows, and the logits of the last n_logits
 * of them into logits ([n_logits][n_vocab]; may be NULL when n_logits is 0). Positions before pos0 must
 * hold K/V rows already. Chunks are cut at multiples of prefill_rows in absolute position, so a row's
 * bits never depend on n or pos0. 0, or -1 with err (bad id, range past n_ctx). */
int fkv_eval(fkv_ctx *c, const int32_t *ids, uint32_t n, uint32_t pos0, uint32_t n_logits, float *logits,
             fkv_error *err);

/* The same from embedding rows ([n][dim] f32, the input an image encoder would give) instead of token ids. */
int fkv_eval_embd(fkv_ctx *c, const float *embd, uint32_t n, uint32_t pos0, uint32_t n_logits, float *logits,
                  fkv_error *err);

/* xxh3-64 of the K and V rows [0, n_pos) of every layer, as stored (docs/design.md §7); of a sliding-window layer, the
 * last window - 1 of them: the rows a continuation reads, all an engine keeps of them; a recurrent layer keeps none. */
uint64_t fkv_kv_digest(const fkv_ctx *c, uint32_t n_pos);

/* A model with recurrent layers (gated DeltaNet: Qwen3.5) carries a state from token to token instead of those layers'
 * K/V rows: one contiguous buffer of this many bytes per sequence (0 for a model without such layers). The state after
 * position p is a function of the ids [0, p] alone, like a row: computed token by token in one order whatever the
 * chunk, thread count or batch (docs/design.md §5). A context holds the state after the last position it computed:
 * an evaluation of such a model continues at that position or starts again at 0 (FKV_E_INPUT otherwise). */
size_t fkv_model_state_bytes(const fkv_model *m);
/* xxh3-64 of the context's recurrent state as stored (docs/design.md §7); 0 for a model without recurrent layers. */
uint64_t fkv_state_digest(const fkv_ctx *c);

/* ---- engines: many sequences at once — paged KV, shared prefixes, batched decode ----
 *
 * An engine keeps the K/V of many sequences in fixed-size blocks under one memory budget. A new prompt is
 * matched against every cached sequence at once (src/cache/prefix.h, with the record's rules of src/cache/kvrec.h);
 * what sequences share is stored once. Prompts are computed chunk by chunk on the position-fixed grid, and
 * the decode steps of many sequences run as one forward. Rows are invariant, so none of this changes an
 * answer: every sequence gives the bytes it would give alone on a cold engine. */

typedef struct fkv_engine fkv_engine;
typedef struct fkv_eseq fkv_eseq; /* a sequence of an engine */

typedef struct {
    fkv_ctx_params ctx;      /* n_ctx: most positions per sequence; kv_type, threads, grid */
    bool prefix_cache;       /* false: every prefill starts at position 0 (FLATKV_PREFIX_CACHE=0) */
    uint32_t cache_min;      /* smallest reuse worth taking (FLATKV_PREFIX_CACHE_MIN, default 1: any) */
    bool bound_to_frontier;  /* reuse only rows a prefill wrote (off: decode rows are proven equal) */
    uint32_t kv_block;  /* positions per block (a multiple of 32); 0: 64 */
    size_t kv_mem;      /* bytes for K/V blocks; 0: a quarter of RAM, at most 16 full contexts */
    uint32_t max_batch; /* most sequences decoded in one forward; 0: 8 */
    bool swa_full;      /* sliding-window layers keep every row, as the other layers do (--swa-full) */
    uint32_t swa_grid;  /* window layers: a resume point kept every swa_grid positions (rounded up to whole blocks);
                         * 0: 8 windows; UINT32_MAX: none but the prompts' and replies' ends */
    uint32_t state_grid; /* recurrent layers: a state kept every state_grid positions (rounded up to the prefill grid);
                          * 0: where the kept states take at most half the K/V of the positions they pass (and at
                          * least 4 prefill chunks apart); UINT32_MAX: none but the prompts' and replies' ends */
    const char *kv_dir; /* the disk tier's directory (--kv-dir; src/cache/kvdisk.h): blocks outlive the process and are
                         * shared by every engine on it; NULL: none. Not with window layers kept apart (swa_full) */
    uint64_t kv_disk;   /* bytes of block files the disk tier keeps (--kv-disk); 0: a quarter of the free space */
    const char *kv_key; /* a file holding the secret the disk tier's files are authenticated with (--kv-key; shared by a
                         * fleet, mode 0600): files written without it are refused as forged. NULL: checksums only,
                         * which catch damage but not a forger who can write to kv_dir. Needs kv_dir */
    bool mtp; /* the model's NextN (multi-token prediction) block drafts (FKV_SPEC_MTP): every position also keeps that
               * block's K/V row, and a sequence's state the position's final hidden state, so a sequence resumed from
               * the cache or the disk tier drafts on from there. Blocks are named apart from an engine without it.
               * FKV_E_INPUT for a model without such a block */
} fkv_engine_params;

typedef struct {
    uint32_t block_rows;
    size_t block_bytes;
    uint32_t blocks_total, blocks_in_use, blocks_free, blocks_shared;
    uint64_t hits, misses, evictions, reused_tokens;
    /* Sliding-window layers, when kept apart (a window model without swa_full; else 0): their blocks in use, each
     * window_block_bytes (block_bytes counts the other layers then); blocks given back once no resume could read
     * them; starts that reused less than they agreed because the window rows there were given back. */
    uint32_t window_blocks_in_use;
    size_t window_block_bytes;
    uint64_t window_blocks_dropped, window_fallbacks;
    /* Recurrent states kept at resume points (0 without recurrent layers): how many, their bytes (within kv_mem with
     * the blocks), starts that resumed from one (of them, read from the disk tier), and those given up for room; the
     * state grid in positions. */
    uint32_t states_kept, state_grid;
    size_t state_bytes;
    uint64_t state_hits, state_disk_hits, states_evicted;
    /* The disk tier (all 0 without one): blocks read and verified, lookups that found no file, files that did not
     * verify (never used): damaged, or with kv_key forged (checksums verified, the MAC did not); block files written,
     * removed over the budget, writes dropped (queue full) or failed, writes queued, bytes of block files, and
     * positions reused from disk over all starts. */
    bool disk;
    uint64_t disk_hits, disk_misses, disk_corrupt, disk_forged, disk_writes, disk_evictions, disk_dropped, disk_errors;
    uint64_t disk_pending, disk_bytes, disk_reused_tokens;
    /* The NextN drafter (fkv_engine_params.mtp; 0 without): its block's rows computed with the trunk's (prompts,
     * decode and verification rows), and its guess rows. */
    uint64_t nextn_rows, nextn_guess_rows;
} fkv_engine_stats;

/* How a start's reuse came to be (fkv_eseq_reuse): the longest common prefix of the prompt with the cache; at
 * most len(prompt) - 1 of it (the last row is always computed); the longest length at most that whose
 * sliding-window rows are still held (= capped without window layers or with swa_full); the longest at most that
 * where a recurrent state is at hand too (= held without recurrent layers; see src/cache/kvrec.h); what was reused
 * (state, or 0 below the minimum reuse). */
typedef struct {
    uint32_t agreed, capped, held, state, reused;
    uint32_t from_disk; /* positions of the reuse read from the disk tier */
} fkv_reuse;

/* Defaults, with FLATKV_PREFIX_CACHE, FLATKV_PREFILL_ROWS and FLATKV_PREFIX_CACHE_MIN applied from the
 * environment. NULL err ignores malformed values; otherwise a malformed value fails with err. */
int fkv_engine_default_params(fkv_engine_params *p, fkv_error *err);
fkv_engine *fkv_engine_new(const fkv_model *m, const fkv_engine_params *p, fkv_error *err);
/* Every sequence must be finished first. */
void fkv_engine_free(fkv_engine *e);

/* A sequence for prompt ids[0..n) under salt (NULL: the default; different salts never share rows): the
 * longest reusable cached prefix is taken; *cached (may be NULL) = positions reused. NULL with err (prompt
 * longer than the context, KV memory full). The prompt is computed by fkv_engine_prefill. */
fkv_eseq *fkv_engine_start(fkv_engine *e, const char *salt, const int32_t *ids, uint32_t n, uint32_t *cached,
                           fkv_error *err);
/* Compute the next grid chunk of s's prompt. 1 when the prompt is complete (the logits of its last row in
 * logits), 0 when more remains, -1 with err. */
int fkv_engine_prefill(fkv_engine *e, fkv_eseq *s, float *logits, fkv_error *err);
/* One decode step of n sequences in one forward: ids[i] is appended to seqs[i]; logits [n][n_vocab]. -1 with
 * err (KV memory full, end of context) and *failed = the index of the sequence at fault; nothing is fed. */
int fkv_engine_decode(fkv_engine *e, fkv_eseq *const *seqs, const int32_t *ids, uint32_t n, float *logits,
                      uint32_t *failed, fkv_error *err);
/* Rows ahead of the record (a speculative step's verification): sequence i feeds n_ids[i] ≥ 1 ids (NULL: 1 each;
 * ids holds them all, sequence after sequence) after what it holds and what it has pending, in one forward of at most
 * fkv_engine_max_rows rows; logits [Σ n_ids][n_vocab], a row per id. The rows are computed but their ids are not
 * recorded: they are pending (fkv_eseq_pending) until fkv_engine_accept records the first k of them — the rows a
 * verification kept — and forgets the rest, whose rows no later prompt can then match. Any other call on s forgets
 * them too. -1 with err and *failed as fkv_engine_decode; nothing is computed. */
int fkv_engine_verify(fkv_engine *e, fkv_eseq *const *seqs, const int32_t *ids, const uint32_t *n_ids, uint32_t n,
                      float *logits, uint32_t *failed, fkv_error *err);
/* Record s's first k pending ids (at most all), forget the rest. */
void fkv_engine_accept(fkv_engine *e, fkv_eseq *s, uint32_t k);
/* Ids pending on s: those fkv_eseq_ids' array holds after its count. */
uint32_t fkv_eseq_pending(const fkv_eseq *s);
/* Append embedding rows ([n][dim] f32) to s after its prompt: their ids are recorded as ones no prompt has, so no
 * prompt resumes past them. logits (may be NULL) of the last row. -1 with err; rows already computed stay. */
int fkv_engine_feed_embd(fkv_engine *e, fkv_eseq *s, const float *embd, uint32_t n, float *logits, fkv_error *err);
/* A new sequence holding what s holds (its ids and rows, shared: nothing is computed), to go on differently from s —
 * another choice of the same prompt. NULL with err (out of memory). */
fkv_eseq *fkv_engine_fork(fkv_engine *e, const fkv_eseq *s, fkv_error *err);
/* Keep s's positions [0, n_pos) only: the rows after stay cached under their ids, and s resumes on the first n_pos
 * like a prompt (recomputing any that are no longer held; with recurrent layers, all of them: their state cannot be cut
 * back). -1 with err (out of memory): s then holds nothing. */
int fkv_engine_rewind(fkv_engine *e, fkv_eseq *s, uint32_t n_pos, fkv_error *err);
/* s's blocks are never written to the disk tier (a request's prompt_cache_retention "in_memory"). Call it before
 * the prompt is computed. */
void fkv_eseq_memory_only(fkv_eseq *s);
/* Release s: its rows stay cached (matchable by later prompts) until evicted. */
void fkv_engine_finish(fkv_engine *e, fkv_eseq *s);

/* Where s's prompt parted, at start, from the cached sequence it agreed with longest: the position, and the
 * ids the cache holds there (up to 8). false when it did not part (the cache ended, or held nothing). */
bool fkv_eseq_divergence(const fkv_eseq *s, uint32_t *at, int32_t *cached, uint32_t *n_cached);

fkv_reuse fkv_eseq_reuse(const fkv_eseq *s);

/* The ids fed to s so far (prompt rows computed, then decoded tokens), and their count. */
const int32_t *fkv_eseq_ids(const fkv_eseq *s, uint32_t *n);
uint32_t fkv_engine_n_ctx(const fkv_engine *e);
/* A sentence about a default the engine had to change (the model's context capped to what the KV memory holds), for
 * the caller to show; NULL when none. Borrowed: lives as long as e. */
const char *fkv_engine_note(const fkv_engine *e);
const fkv_model *fkv_engine_model(const fkv_engine *e);
uint32_t fkv_engine_max_batch(const fkv_engine *e);
/* Most rows one forward computes (fkv_engine_verify): the larger of the prefill grid and max_batch. */
uint32_t fkv_engine_max_rows(const fkv_engine *e);
/* xxh3-64 of s's K and V rows [0, n_pos) of every layer — of a sliding-window layer the last window - 1 of them —
 * as stored: the same bytes as fkv_seq_kv_digest. 0 when window rows asked for are no longer held. */
uint64_t fkv_engine_kv_digest(const fkv_engine *e, const fkv_eseq *s, uint32_t n_pos);
/* xxh3-64 of s's recurrent state after the positions it holds (fkv_eseq_ids' count), as stored: the bytes of
 * fkv_state_digest for the same ids. 0 for a model without recurrent layers. */
uint64_t fkv_engine_state_digest(const fkv_engine *e, const fkv_eseq *s);
fkv_engine_stats fkv_engine_get_stats(const fkv_engine *e);
/* st's disk tier counters (but disk_reused_tokens) brought up to date: the writer thread moves them on its own.
 * Unlike fkv_engine_get_stats, safe from any thread while another runs the engine. */
void fkv_engine_disk_stats_now(const fkv_engine *e, fkv_engine_stats *st);

/* ---- sampling ---- */

typedef struct fkv_sampler fkv_sampler;

#define FKV_MAX_TOP_LOGPROBS 20

/* The log-probabilities of a step: of the id chosen, and of the n_top most likely ids, most likely first (ties: the
 * lower id). They are the log-softmax of the logits after the penalties, before any constraint and temperature. */
typedef struct {
    float logprob;
    uint32_t n_top;
    int32_t top_ids[FKV_MAX_TOP_LOGPROBS];
    float top_logprobs[FKV_MAX_TOP_LOGPROBS];
} fkv_logprobs;

typedef struct {
    float temp;           /* <= 0: greedy (argmax, ties to the lowest id) */
    int32_t top_k;        /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off */
    int32_t repeat_last_n;
    float frequency_penalty; /* OpenAI's: logit -= frequency_penalty × (times this sampler chose the id); 0: off */
    float presence_penalty;  /* OpenAI's: logit -= presence_penalty once the sampler has chosen the id; 0: off */
    uint64_t seed;
} fkv_sampler_params;

/* temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0, repeat_last_n 64, no frequency or presence
 * penalty, seed 0. */
fkv_sampler_params fkv_sampler_default_params(void);
/* A sampler with its own seeded random state and scratch for n_vocab candidates; NULL when out of memory. */
fkv_sampler *fkv_sampler_new(const fkv_sampler_params *p, int32_t n_vocab);
void fkv_sampler_free(fkv_sampler *s);
/* The next id from one row of logits (not modified); history: the ids so far, for the repetition penalty. */
int32_t fkv_sampler_sample(fkv_sampler *s, const float *logits, const int32_t *history, int n_history);

/* fkv_sampler_sample, where allowed (NULL: all) lets only ids with allowed[id] != 0 be chosen (a constraint; when it
 * allows none, the choice is as if unconstrained), and lp (NULL: none) receives the step's log-probabilities with
 * its n_top ≤ FKV_MAX_TOP_LOGPROBS most likely ids (lp->n_top is read: how many to give). */
int32_t fkv_sampler_choose(fkv_sampler *s, const float *logits, const int32_t *history, int n_history,
                           const uint8_t *allowed, fkv_logprobs *lp);

/* ---- constraints: output that follows a grammar ---- */

typedef struct fkv_grammar fkv_grammar;

/* A grammar in llama.cpp's GBNF (root rule `root`) over model m's tokens: immutable, shareable by any number of
 * generations and threads; m must outlive it. NULL with err naming the line:column and what is wrong. */
fkv_grammar *fkv_grammar_new(const fkv_model *m, const char *gbnf, size_t len, fkv_error *err);
/* One more owner of g (NULL: NULL), for a user that may outlive the others: each owner calls fkv_grammar_free once,
 * and the last call frees it. */
fkv_grammar *fkv_grammar_share(fkv_grammar *g);
void fkv_grammar_free(fkv_grammar *g);
/* GBNF (malloc'd) for the JSON Schema text schema[0..len): its rules prefixed by prefix, its start rule
 * <prefix>root. NULL with err naming an unsupported or malformed keyword and where. */
char *fkv_json_schema_gbnf(const char *schema, size_t len, const char *prefix, fkv_error *err);

/* ---- speculative decoding: several tokens a forward, the answer unchanged ----
 *
 * A drafter guesses the tokens that follow; the target computes the token it feeds and the guesses as one batch of rows
 * (fkv_engine_verify), and the generation chooses each row's next token exactly as plain decoding would — the same
 * sampler state, the same seeded draw per position, the same constraint — keeping a guess while it equals that choice.
 * Rows are invariant, so a kept row is the row plain decoding would compute: tokens, logits and KV are those of
 * speculation off, for every sampler setting; only the number of forwards changes. */
typedef enum { FKV_SPEC_OFF = 0, FKV_SPEC_LOOKUP, FKV_SPEC_DRAFT, FKV_SPEC_MTP, FKV_SPEC_AUTO } fkv_spec_mode;

#define FKV_SPEC_MAX_DRAFT 16   /* most guesses a step */
#define FKV_SPEC_DEFAULT_DRAFT 4 /* bench/spec: lookup on an agent transcript gains most near it */

typedef struct {
    fkv_spec_mode mode;
    uint32_t draft_max; /* most guesses a step, 1..FKV_SPEC_MAX_DRAFT; 0: FKV_SPEC_DEFAULT_DRAFT. DRAFT guesses fewer
                         * after a guess fails, more after all are kept; LOOKUP by the length of its match */
    /* LOOKUP: the guesses are the ids that followed, earlier in the sequence, the longest of its last ngram_max..1
     * ids that occurred before (its latest occurrence), 2^(m-1) of them for a match of m ids; 0: 8. DRAFT: the draft
     * model's greedy continuation. MTP: the model's own NextN block's greedy continuation, on an engine made with
     * fkv_engine_params.mtp (elsewhere no guesses); it guesses fewer after a failure, more after all kept, as DRAFT. */
    uint32_t ngram_max;
    fkv_engine *draft; /* DRAFT: an engine on the draft model (fkv_model_vocab_equal to the target's), borrowed: the
                        * generation keeps a sequence of its own there, resumed through that engine's cache like any
                        * sequence, on the target engine's thread */
    /* A prediction of the output (OpenAI's Predicted Outputs), borrowed for the generation; NULL: none. Whatever the
     * mode, each step guesses the ids that follow, in it, the output's last ids (up to ngram_max of them; at the
     * start, its first id at its start), up to FKV_SPEC_MAX_DRAFT a step as the draft model's adapt; the mode's
     * drafter guesses where it has none. */
    const int32_t *prediction;
    uint32_t n_prediction;
} fkv_spec_params;

/* "off", "lookup", "draft", "mtp", "auto" (NULL for others); and back: -1 for an unknown name. */
const char *fkv_spec_mode_name(fkv_spec_mode mode);
int fkv_spec_mode_parse(const char *name);
/* FKV_SPEC_AUTO chosen for engine e (other modes stay): MTP on an engine with the NextN block (fkv_engine_params.mtp;
 * an engine made for AUTO should have it where the model has one: fkv_model_info.n_nextn), LOOKUP otherwise — or OFF
 * where verification does not pay on this CPU: measured here, a few forwards on a scratch sequence, a step of 1 +
 * draft_max rows (and the NextN block's guesses) against a plain one, beside the tokens a step the drafter is expected
 * to keep (FKV_SPEC_AUTO_TOKENS_LOOKUP, FKV_SPEC_AUTO_KEEP_MTP). *cost: that measured ratio (NULL: not wanted). -1 with err when the engine fails (the mode
 * then chosen by the model alone). */
int fkv_spec_auto(fkv_spec_params *p, fkv_engine *e, double *cost, fkv_error *err);
/* What FKV_SPEC_AUTO expects the drafters to keep. Lookup: 1.6 tokens a step (bench/spec's agent transcript at the
 * default length). The NextN block: each guess kept with probability 0.7 while the ones before it were, so
 * 1 + 0.7 + ... + 0.7^k tokens a step of k guesses — below the 80-90% of first guesses a trained head keeps (DeepSeek-V3's
 * report); generated weights keep none, so this is a claim, not a measurement. */
#define FKV_SPEC_AUTO_TOKENS_LOOKUP 1.6
#define FKV_SPEC_AUTO_KEEP_MTP 0.7
/* True when a and b have the same tokens (a draft model for a target). */
bool fkv_model_vocab_equal(const fkv_model *a, const fkv_model *b);

/* Generation after a prefill: sample from logits, feed the token, repeat. */
typedef struct {
    uint32_t max_tokens;
    fkv_sampler *sampler; /* borrowed; its repetition history is what the sequence was fed */
    /* Called with each generated id and the bytes it decodes to; return false to stop (a cancellation, a
     * stop string). NULL: never stop early. */
    bool (*on_token)(void *user, int32_t id, const char *piece, int piece_len);
    void *user;
    /* Called with every row of logits a token is sampled from, before sampling (n_vocab floats, borrowed for the
     * call), user as above; returns false to stop (an error writing them). NULL: not called. */
    bool (*on_logits)(void *user, const float *logits, uint32_t n_vocab);
    /* Called, before on_token, with the log-probabilities of each token given to on_token and of the top_logprobs
     * (≤ FKV_MAX_TOP_LOGPROBS) most likely ids at its step (fkv_sampler_choose); user as above. NULL: not computed. */
    void (*on_logprobs)(void *user, int32_t id, const fkv_logprobs *lp);
    uint32_t top_logprobs;
    /* The output follows this grammar (borrowed; NULL: free text): at each step only tokens that can continue it are
     * sampled from, and end of generation only once it is complete. */
    const fkv_grammar *grammar;
    fkv_spec_params spec; /* speculative decoding (zero: off); used by fkv_engine_step and fkv_seq_generate */
} fkv_gen_params;

typedef struct {
    uint32_t n_tokens;      /* ids written to out */
    uint64_t logits_digest; /* xxh3-64 of the f32 logits every token was sampled from, in order */
    bool eog;               /* stopped at an end-of-generation token (included in out) */
    bool cancelled;         /* on_token or on_logits returned false */
    uint32_t drafted;       /* speculative decoding: tokens guessed, and how many of them were kept */
    uint32_t accepted;
    uint32_t predicted;          /* of them, the spec params' prediction's guesses, and those kept */
    uint32_t predicted_accepted;
} fkv_gen_result;

/* A generation in progress, independent of how its tokens are fed (one sequence, or a batch of many):
 * given the logits of the last fed row, fkv_gen_next samples the next id and says whether to feed it.
 * Each sampled token is fed only if generation goes on, so a sequence's record always describes exactly
 * what its KV holds: a stopped generation needs no clean-up. */
typedef struct fkv_gen fkv_gen;
/* out receives up to p->max_tokens ids (borrowed, like p->sampler). NULL when out of memory. */
fkv_gen *fkv_gen_new(const fkv_model *m, const fkv_gen_params *p, int32_t *out);
void fkv_gen_free(fkv_gen *g);
/* Sample from logits (the row after history[0..n_history), the ids fed so far); n_pos/n_ctx: positions
 * used and available. Returns the id to feed next, or -1 when the generation is over (see the result). */
int32_t fkv_gen_next(fkv_gen *g, const float *logits, const int32_t *history, int n_history, uint32_t n_pos,
                     uint32_t n_ctx);
fkv_gen_result fkv_gen_result_get(const fkv_gen *g);

/* One decode step of n generations as one forward: gens[i] runs on seqs[i] and is about to feed next[i] (what its last
 * fkv_gen_next returned), with the guesses of its spec params after it (fkv_engine_verify). Each row's next token is
 * chosen by fkv_gen_next, guesses kept while they equal it (fkv_engine_accept); next[i] becomes the id to feed at the
 * following step, or -1 when gens[i] is over. hist_from (NULL: 0 each): where each repetition history starts in its
 * sequence's ids. At most fkv_engine_max_batch generations. -1 with err and *failed (the index at fault) when the
 * step cannot run even without guesses (KV memory full, a context full): nothing is fed then. */
int fkv_engine_step(fkv_engine *e, fkv_eseq *const *seqs, fkv_gen *const *gens, int32_t *next, uint32_t n,
                    const uint32_t *hist_from, uint32_t *failed, fkv_error *err);

/* ---- sequences: one conversation, a view over an engine (above) ----
 *
 * fkv_seq_prefill makes the sequence hold exactly the prompt: the engine reuses the longest valid common prefix
 * with everything it caches (this sequence's last turn, other conversations, what a rewind left), and computes
 * only the rest — on the position-fixed grid, so the result is bit-identical to a cold prefill of the same prompt.
 * Ids are recorded where they are fed (prefill and decode); a generation stopped at any point leaves the cache
 * describing exactly what the KV holds. */

typedef struct fkv_seq fkv_seq;

/* A sequence on engine e (borrowed; it outlives the sequence) under salt (NULL: the default; see
 * fkv_engine_start). Many sequences may share one engine, one at a time (the engine is not thread-safe). */
fkv_seq *fkv_seq_open(fkv_engine *e, const char *salt, fkv_error *err);
/* A sequence on an engine of its own, made with p (NULL: fkv_engine_default_params). */
fkv_seq *fkv_seq_new(const fkv_model *m, const fkv_engine_params *p, fkv_error *err);
void fkv_seq_free(fkv_seq *s);

/* Make the sequence hold exactly ids[0..n): reuse what the engine allows, compute the rest, write the logits of
 * the last prompt row into logits (n_vocab floats). *cached (may be NULL) = rows reused. On failure the sequence
 * holds nothing. */
int fkv_seq_prefill(fkv_seq *s, const int32_t *ids, uint32_t n, float *logits, uint32_t *cached, fkv_error *err);
/* Append one token at the end (a decode step); logits of its row. */
int fkv_seq_decode(fkv_seq *s, int32_t id, float *logits, fkv_error *err);
/* Append embedding rows ([n][dim]) at the end — an input no token id describes: no prompt ever resumes past them
 * (the rows before them stay reusable). logits (may be NULL) of the last row. */
int fkv_seq_feed_embd(fkv_seq *s, const float *embd, uint32_t n, float *logits, fkv_error *err);
/* Keep positions [0, n_pos) only (a cancelled or rolled-back generation); the rows dropped stay cached under
 * their ids. On failure (out of memory) the sequence holds nothing. */
int fkv_seq_rewind(fkv_seq *s, uint32_t n_pos, fkv_error *err);
/* End the turn: the sequence holds nothing; its rows stay cached in the engine. */
void fkv_seq_clear(fkv_seq *s);
/* Positions the sequence holds. */
uint32_t fkv_seq_n_pos(const fkv_seq *s);
uint32_t fkv_seq_n_ctx(const fkv_seq *s);
/* xxh3-64 of the K and V rows [0, n_pos) of every layer, as stored: fkv_engine_kv_digest. */
uint64_t fkv_seq_kv_digest(const fkv_seq *s, uint32_t n_pos);
/* xxh3-64 of the recurrent state after the positions the sequence holds: fkv_engine_state_digest (0: none). */
uint64_t fkv_seq_state_digest(const fkv_seq *s);

/* Generate up to max_tokens ids into out on one sequence: fkv_gen_next and fkv_engine_step in turn.
 * logits: in, the last prefilled row's logits; used as scratch. Stops at end of generation, at
 * max_tokens, at the end of the context, or when on_token says so. */
int fkv_seq_generate(fkv_seq *s, float *logits, const fkv_gen_params *p, int32_t *out, fkv_gen_result *res,
                     fkv_error *err);

#ifdef __cplusplus
}
#endif

#endif
