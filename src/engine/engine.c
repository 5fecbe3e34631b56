/* engine.c — many sequences at once (fkv_engine in flatkv.h): a block pool, the prefix tree over it, and
 * one forward pass that computes prompt chunks and batched decode steps.
 *
 * WHY it stays exact: where a row lives (which block, shared or copied) never changes its bits, and the
 * forward is row-invariant, so a sequence decoded among seven others, resumed from another conversation's
 * blocks, or recomputed after an eviction gives the bytes it gives alone on a cold engine.
 *
 * Sliding-window layers: unless swa_full, their rows go to a pool of their own, which the prefix tree empties of
 * rows no resume can read (prefix.h); the map of a sequence then names both pools and where each layer is.
 *
 * Recurrent layers (gated DeltaNet) keep no K/V rows (model_kv_layers): a sequence carries their state in slots of its
 * own, each one contiguous buffer of
 * the model's state_floats. Slot 0 holds the state after the positions the record holds, slot i the state after
 * pending row i (a verification's): a row reads its predecessor's slot and writes its own (forward.h), so taking back
 * a guess is choosing another slot, never recomputing, and accepting k rows swaps slot k into slot 0. A prompt chunk
 * steps slot 0 in place. A start resumes only where a state is at hand (kvrec.h): a continuing sequence's, a fork's,
 * or one the tree keeps (prefix.h): the engine gives it the state one position before the prompt's end (its last row
 * written to slot 1 for it), slot 0 at the sequence's end and at every multiple of the state grid (whose prefill
 * chunks end there, the grid being a multiple of theirs).
 *
 * The NextN drafter (fkv_engine_params.mtp): its block is one attention layer more of the K/V (after the trunk's), and
 * a state is followed by the final hidden state of its position, which the block's next row reads (forward.h): a model
 * without recurrent layers then carries states too, and resumes where one is at hand, as a hybrid does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/err.h"
#include "cache/kvdisk.h"
#include "cache/kvpool.h"
#include "cache/prefix.h"
#include "engine/engine.h"
#include "engine/stepbuf.h"
#include "model/forward.h"
#include "model/model.h"

/* Measured (bench/multi_flatkv, FKV_BENCH_KV_BLOCK, 4 conversations): 32 and 64 use the same peak memory,
 * 128 and 256 7% more (partial last blocks); speed does not depend on it within noise. 64 keeps half the
 * tree nodes of 32. */
#define DEFAULT_BLOCK_ROWS 64
#define DEFAULT_MAX_BATCH 8
/* Window layers' resume points every this many windows: the window rows a point holds (W + B positions) are then
 * about 1/8 of what a full copy holds, and a resume that no kept end serves loses at most that many positions. */
#define DEFAULT_SWA_GRID_WINDOWS 8
/* Recurrent states kept every so many positions, by default where their bytes are at most half the K/V of the
 * positions between them (Qwen3.5-2B's shape: a 20.2 MB state every 3328 positions of 12 KB of f16 K/V, every 6400
 * of 6.4 KB of q8_0, the default), and at least this many prefill chunks apart. A resume no kept end serves then
 * recomputes at most one grid step. A NextN drafter's state without recurrent layers is one hidden state (8 KB at
 * dim 2048, less than a position's K/V): kept at every prefill chunk's end. */
#define DEFAULT_STATE_GRID_KV_SHARE 2
#define MIN_STATE_GRID_CHUNKS 4

struct fkv_engine {
    const fkv_model *m;
    fkv_engine_params p;
    kvpool *pool;
    kvpool *wpool;       /* window layers' rows, when kept apart */
    uint32_t *layer_table; /* [n_layers + the NextN block] model_kv_layers' */
    uint32_t n_kv_layers;  /* the model's layers, and the NextN block with mtp */
    size_t state_floats;   /* forward_state_floats: the recurrent layers' state, and the hidden state with mtp */
    uint64_t nextn_rows, nextn_guess_rows; /* fkv_engine_stats' */
    const uint32_t *layer_at; /* kv_map.layer_at: layer_table where a layer is apart or keeps no rows, else NULL */
    prefix_tree *tree;
    kvdisk *disk;         /* NULL: no disk tier */
    uint64_t disk_reused; /* positions reused from it */
    forward *fw;
    uint32_t *pos;        /* [max rows] */
    const kv_map **maps;  /* [max rows] */
    forward_state *states; /* [max rows] (a model with recurrent layers), else NULL */
    stepbuf *step;        /* fkv_engine_step's */
    char note[256];       /* fkv_engine_note: a default the engine changed, or "" */
};

struct fkv_eseq {
    prefix_seq ps;
    uint32_t *blocks, *wblocks; /* the flat block tables kv_map reads (wblocks: the window layers', when apart) */
    uint32_t cap_blocks;
    uint32_t n_table; /* entries filled: a sequence's path only grows, and its nodes keep their blocks */
    kv_map map;
    int32_t *ids; /* the prompt, then decoded ids (KVREC_NO_ID for embedding rows); [0, ps.n_pos) are fed, then
                   * n_pending computed ahead of the record (fkv_engine_verify) */
    uint32_t n_ids, cap_ids;
    uint32_t n_pending;
    uint32_t n_prompt;
    char *salt; /* NULL: the default */
    /* recurrent layers: the state slots (engine.c's header), each state_floats; slot[i] is the buffer of the state
     * after the record and pending rows [0, i) (i <= n_pending); slot[] is a permutation of [0, n_slots) */
    float *slots;
    uint32_t *slot;
    uint32_t n_slots;
};

/* An unsigned environment variable into *out; -1 with err when set but malformed. */
static int env_u32(const char *name, uint32_t min, uint32_t *out, fkv_error *err) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || v[0] == '-' || x < min || x > UINT32_MAX)
        return err_input(err, "%s='%s' is not an integer >= %u", name, v, min);
    *out = (uint32_t)x;
    return 0;
}

int fkv_engine_default_params(fkv_engine_params *p, fkv_error *err) {
    *p = (fkv_engine_params){.ctx = fkv_ctx_default_params(), .prefix_cache = true, .cache_min = 1,
                             .bound_to_frontier = false};
    uint32_t cache = 1;
    int rc = env_u32("FLATKV_PREFIX_CACHE", 0, &cache, err);
    if (!rc && cache > 1) rc = err_input(err, "FLATKV_PREFIX_CACHE must be 0 or 1");
    p->prefix_cache = cache != 0;
    if (!rc) rc = env_u32("FLATKV_PREFILL_ROWS", 1, &p->ctx.prefill_rows, err);
    if (!rc) rc = env_u32("FLATKV_PREFIX_CACHE_MIN", 0, &p->cache_min, err);
    return err ? rc : 0;
}

/* The disk tier of e->p.kv_dir and the namespace its blocks are named under: everything besides the ids and the salt
 * that decides a block's bytes. */
static int open_disk(fkv_engine *e, prefix_disk *disk, fkv_error *err) {
    if (e->wpool)
        return err_unsupported(err, "--kv-dir: this model's sliding-window layers keep only the rows a resume can "
                                    "read, which a block file cannot name; add --swa-full to keep every row (and use "
                                    "the disk tier)");
    const gguf_file *f = e->m->file;
    /* keyed: an authenticated tier's files are named apart, so that a fleet's honest files from before its key are
     * never counted as forged, only left to the budget. */
    struct {
        char magic[8];
        kvdisk_key model;
        uint32_t bits_version, kv_type, block_rows, n_layers, kv_dim, layout, keyed;
    } ns = {.magic = "flatkvNS", .bits_version = OPS_BITS_VERSION, .kv_type = (uint32_t)e->pool->type,
            .block_rows = e->pool->block_rows, .n_layers = e->pool->n_layers, .kv_dim = e->pool->kv_dim,
            .layout = KV_LAYOUT_VERSION, .keyed = e->p.kv_key != NULL};
    uint8_t key[KVDISK_MAC_KEY_BYTES];
    if (e->p.kv_key && kvdisk_load_key(e->p.kv_key, key, err)) return -1;
    e->disk = kvdisk_open(e->p.kv_dir, e->p.kv_disk, e->pool->block_rows, e->pool->block_bytes,
                          e->p.kv_key ? key : NULL, err);
    memset(key, 0, sizeof key);
    if (!e->disk || kvdisk_model_identity(e->disk, f->path, f->map, f->size, &ns.model, err)) return -1;
    const kvdisk_key zero = {0};
    *disk = (prefix_disk){.disk = e->disk, .ns = kvdisk_chain(&zero, &ns, sizeof ns)};
    return 0;
}

/* The context and the KV budget, from each other and the machine, before either sizes anything.
 *
 * Default budget (kv_mem 0): room for 16 full contexts, at most a quarter of RAM. Default context (n_ctx 0): the
 * model's, capped to the positions the budget holds — a file's context_length is only a claim (2^32-1 would ask for
 * terabytes), and a context the KV cannot hold is one a generation would run out of midway; the cap is said in
 * e->note for the CLI and the server to print. An explicit n_ctx with the default budget must fit that budget, or
 * the engine is refused (FKV_E_INPUT): as llama.cpp fails at start when its KV cache for -c cannot be allocated, a
 * user who asked for a context learns now, not at position 10^6. With an explicit kv_mem both are the user's: a
 * budget smaller than one context is legitimate (sequences share and evict blocks; one that outgrows the budget
 * gets FKV_E_KV_FULL). */
static int fit_context(fkv_engine *e, size_t bytes_per_pos, fkv_error *err) {
    fkv_ctx_params *cp = &e->p.ctx;
    const uint32_t n_ctx_model = e->m->hp.n_ctx_train;
    const size_t ram = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    const bool default_budget = !e->p.kv_mem;
    if (default_budget) {
        size_t want;
        if (__builtin_mul_overflow(bytes_per_pos, (size_t)(cp->n_ctx ? cp->n_ctx : n_ctx_model), &want) ||
            __builtin_mul_overflow(want, (size_t)16, &want))
            want = SIZE_MAX;
        e->p.kv_mem = want < ram / 4 ? want : ram / 4;
    }
    const size_t held = e->p.kv_mem / bytes_per_pos / e->p.kv_block * e->p.kv_block;
    const uint32_t fits = held > UINT32_MAX ? UINT32_MAX / e->p.kv_block * e->p.kv_block
                                            : held < e->p.kv_block ? e->p.kv_block : (uint32_t)held;
    if (!cp->n_ctx) {
        cp->n_ctx = n_ctx_model;
        if (cp->n_ctx > fits) {
            cp->n_ctx = fits;
            snprintf(e->note, sizeof e->note, "the model's context_length %u is more than the KV memory holds (%zu MB, "
                     "%zu bytes a position); using %u", n_ctx_model, e->p.kv_mem >> 20, bytes_per_pos, fits);
        }
    } else if (default_budget && cp->n_ctx > fits) {
        return err_input(err, "a context of %u positions is more than the KV memory holds (a quarter of RAM, %zu MB: "
                              "%u positions of %zu bytes); ask for a smaller context or set the KV memory (--kv-mem)",
                         cp->n_ctx, e->p.kv_mem >> 20, fits, bytes_per_pos);
    }
    return 0;
}

const char *fkv_engine_note(const fkv_engine *e) { return e->note[0] ? e->note : NULL; }

fkv_engine *fkv_engine_new(const fkv_model *m, const fkv_engine_params *params, fkv_error *err) {
    fkv_engine *e = calloc(1, sizeof *e);
    if (!e) {
        err_nomem(err, "out of memory for an engine");
        return NULL;
    }
    const model_hparams *hp = &m->hp;
    e->m = m;
    if (params)
        e->p = *params;
    else if (fkv_engine_default_params(&e->p, err))
        goto fail;
    fkv_ctx_params *cp = &e->p.ctx;
    if (!cp->prefill_rows) cp->prefill_rows = FORWARD_DEFAULT_GRID;
    if (!e->p.kv_block) e->p.kv_block = DEFAULT_BLOCK_ROWS;
    if (!e->p.max_batch) e->p.max_batch = DEFAULT_MAX_BATCH;
    uint32_t kv_dim = hp->n_kv_heads * hp->head_dim, kv_layers[2];
    if (kv_choose_type(&cp->kv_type, hp->head_dim, kv_dim, err)) goto fail;
    if (e->p.mtp && (!hp->n_nextn || m->windows)) {
        err_input(err, "--spec mtp: %s has no NextN (multi-token prediction) block to draft with", m->name);
        goto fail;
    }
    e->n_kv_layers = hp->n_layers + e->p.mtp;
    if (!(e->layer_table = malloc(sizeof *e->layer_table * e->n_kv_layers))) {
        err_nomem(err, "out of memory for the engine's layer table");
        goto fail;
    }
    e->layer_at = model_kv_layers(m, m->windows && !e->p.swa_full, e->p.mtp, e->layer_table, kv_layers);
    size_t bytes_per_pos = (size_t)2 * (kv_layers[0] + kv_layers[1]) * kv_row_bytes(cp->kv_type, kv_dim);
    if (bytes_per_pos == 0) bytes_per_pos = 1;
    if (fit_context(e, bytes_per_pos, err)) goto fail;
    uint32_t rows = cp->prefill_rows > e->p.max_batch ? cp->prefill_rows : e->p.max_batch;
    prefix_window win = {0};
    const uint32_t n_window = kv_layers[1];
    if (n_window) { /* each pool may take the whole budget; the tree keeps both within it */
        if (!(e->wpool = kvpool_new(n_window, kv_dim, cp->kv_type, e->p.kv_block, e->p.kv_mem, err))) goto fail;
        const uint64_t grid = e->p.swa_grid ? e->p.swa_grid : (uint64_t)DEFAULT_SWA_GRID_WINDOWS * hp->window;
        win = (prefix_window){.pool = e->wpool, .window = hp->window, .budget = e->p.kv_mem,
                              .grid = grid >= cp->n_ctx ? 0 : (uint32_t)((grid + e->p.kv_block - 1) / e->p.kv_block *
                                                                         e->p.kv_block)};
    }
    if (!(e->pool = kvpool_new(kv_layers[0], kv_dim, cp->kv_type, e->p.kv_block, e->p.kv_mem, err)))
        goto fail;
    prefix_disk disk = {0};
    if (e->p.kv_key && !e->p.kv_dir) {
        err_input(err, "--kv-key authenticates the disk tier's files: it needs --kv-dir");
        goto fail;
    }
    if (e->p.kv_dir && open_disk(e, &disk, err)) goto fail;
    if (!(e->fw = forward_new(m, rows, cp->n_ctx, cp->n_threads, e->p.mtp, err))) goto fail;
    e->state_floats = forward_state_floats(e->fw);
    prefix_states states = {0};
    if (e->state_floats) {
        const size_t bytes = sizeof(float) * e->state_floats;
        const uint64_t chunk = cp->prefill_rows,
                       fit = DEFAULT_STATE_GRID_KV_SHARE * (uint64_t)(bytes / bytes_per_pos),
                       want = e->p.state_grid             ? e->p.state_grid
                              : !hp->state_floats               ? chunk /* the hidden state alone: KBs a point */
                              : fit > MIN_STATE_GRID_CHUNKS * chunk ? fit
                                                                  : MIN_STATE_GRID_CHUNKS * chunk,
                       grid = (want + chunk - 1) / chunk * chunk;
        states = (prefix_states){.bytes = bytes, .grid = grid >= cp->n_ctx ? 0 : (uint32_t)grid,
                                 .budget = e->p.kv_mem};
    }
    if (!(e->tree = prefix_new(e->pool, n_window ? &win : NULL, &states, &disk, err))) goto fail;
    e->pos = malloc(sizeof *e->pos * rows);
    e->maps = malloc(sizeof *e->maps * rows);
    if (e->state_floats && !(e->states = malloc(sizeof *e->states * rows))) {
        err_nomem(err, "out of memory for the engine's scratch");
        goto fail;
    }
    /* a step's rows: every sequence's fed token and guesses, as many as the default draft allows each (the logits of
     * every row are kept: 152k ids × 40 rows is 24 MB), at least one sequence's longest */
    const uint32_t step_rows = e->p.max_batch * (1 + FKV_SPEC_DEFAULT_DRAFT) > 1 + FKV_SPEC_MAX_DRAFT
                                   ? e->p.max_batch * (1 + FKV_SPEC_DEFAULT_DRAFT)
                                   : 1 + FKV_SPEC_MAX_DRAFT;
    e->step = stepbuf_new(step_rows < rows ? step_rows : rows, e->p.max_batch, hp->n_vocab, hp->dim);
    if (!e->pos || !e->maps || !e->step) {
        err_nomem(err, "out of memory for the engine's scratch");
        goto fail;
    }
    return e;
fail:
    fkv_engine_free(e);
    return NULL;
}

void fkv_engine_free(fkv_engine *e) {
    if (!e) return;
    prefix_free(e->tree);
    kvdisk_close(e->disk);
    kvpool_free(e->pool);
    kvpool_free(e->wpool);
    free(e->layer_table);
    forward_free(e->fw);
    free(e->pos);
    free(e->maps);
    free(e->states);
    stepbuf_free(e->step);
    free(e);
}

stepbuf *engine_stepbuf(fkv_engine *e) { return e->step; }

const char *engine_eseq_salt(const fkv_eseq *s) { return s->salt; }

uint32_t fkv_engine_n_ctx(const fkv_engine *e) { return e->p.ctx.n_ctx; }

const fkv_model *fkv_engine_model(const fkv_engine *e) { return e->m; }

uint32_t fkv_engine_max_batch(const fkv_engine *e) { return e->p.max_batch; }

uint32_t fkv_engine_max_rows(const fkv_engine *e) { return forward_max_rows(e->fw); }

/* Blocks for positions [n_pos, n_pos + n), and the flat table kv_map reads brought up to date: the entries of new
 * nodes only (a window block given back later stays in its entry, never read: prefix.h). */
static int reserve(fkv_engine *e, fkv_eseq *s, uint32_t n, fkv_error *err) {
    if (prefix_reserve(e->tree, &s->ps, n, err)) return -1;
    uint32_t n_blocks = s->ps.n_nodes;
    if (n_blocks > s->cap_blocks) {
        uint32_t cap = n_blocks * 2;
        for (int w = 0; w < (e->wpool ? 2 : 1); w++) {
            uint32_t **table = w ? &s->wblocks : &s->blocks, *grown = realloc(*table, sizeof *grown * cap);
            if (!grown) return err_nomem(err, "out of memory for a block table");
            *table = grown;
        }
        s->cap_blocks = cap;
        s->map.part[0].blocks = s->blocks;
        s->map.part[1].blocks = s->wblocks;
    }
    for (; s->n_table < n_blocks; s->n_table++) {
        const uint32_t p = s->n_table * e->p.kv_block;
        s->blocks[s->n_table] = prefix_block(e->tree, &s->ps, p);
        if (e->wpool) s->wblocks[s->n_table] = prefix_wblock(e->tree, &s->ps, p);
    }
    return 0;
}

/* s's state slot i: the state after its record and i pending rows. */
static float *state_slot(const fkv_engine *e, const fkv_eseq *s, uint32_t i) {
    return s->slots + (size_t)s->slot[i] * e->state_floats;
}

/* s's slots i and j trade places (a state becomes another's without a copy). */
static void swap_slots(fkv_eseq *s, uint32_t i, uint32_t j) {
    const uint32_t t = s->slot[i];
    s->slot[i] = s->slot[j];
    s->slot[j] = t;
}

/* At least n state slots for s (nothing without recurrent layers); the states in them stay. */
static int state_room(const fkv_engine *e, fkv_eseq *s, uint32_t n, fkv_error *err) {
    const size_t floats = e->state_floats;
    if (!floats || s->n_slots >= n) return 0;
    uint32_t *slot = realloc(s->slot, sizeof *slot * n);
    if (slot) s->slot = slot;
    float *slots = slot ? realloc(s->slots, sizeof(float) * floats * n) : NULL;
    if (!slots) return err_nomem(err, "out of memory for %u recurrent states of %zu MB", n, floats * 4 >> 20);
    s->slots = slots;
    for (; s->n_slots < n; s->n_slots++) s->slot[s->n_slots] = s->n_slots;
    return 0;
}

static void eseq_free(fkv_eseq *s) {
    free(s->slots);
    free(s->slot);
    free(s->salt);
    free(s->blocks);
    free(s->wblocks);
    free(s->ids);
    free(s);
}

/* Keep s's state (slot 0) in the tree as the one after its n_pos positions (prefix_keep_state). */
static void keep_state(fkv_engine *e, fkv_eseq *s, bool grid) {
    if (s->slots) prefix_keep_state(e->tree, &s->ps, s->ps.n_pos, state_slot(e, s, 0), grid);
}

/* s's path let go (prefix_finish), its state kept first as the one at its end. */
static void finish_path(fkv_engine *e, fkv_eseq *s) {
    keep_state(e, s, false);
    prefix_finish(e->tree, &s->ps);
}

/* Where a start finds a recurrent state (kvrec_held_fn; ctx: the position of the one at hand, 0 for none): there,
 * when the start reaches it; else at 0, the zero state every sequence begins from. */
static uint32_t state_held(const void *ctx, uint32_t p) {
    const uint32_t at = *(const uint32_t *)ctx;
    return at <= p ? at : 0;
}

/* Start s's path for its ids[0..n) under policy: the reusable cached prefix acquired, the block table filled. With
 * recurrent layers, s's slot 0 holds the state after state_at positions (0: none), and the reuse stops there or at 0.
 * On failure s holds nothing. */
static int begin(fkv_engine *e, fkv_eseq *s, uint32_t n, kvrec_policy policy, bool cache, uint32_t state_at,
                 uint32_t *cached, fkv_error *err) {
    s->n_table = 0;
    if (e->state_floats) {
        policy.state = state_held;
        policy.state_ctx = &state_at;
        if (state_room(e, s, 1, err)) return -1;
    }
    const bool memory_only = s->ps.memory_only;
    int64_t reused = prefix_start(e->tree, s->salt, s->ids, n, &policy, cache, &s->ps,
                                  s->slots ? state_slot(e, s, 0) : NULL, err);
    if (reused < 0) return -1;
    s->ps.memory_only = memory_only;
    e->disk_reused += s->ps.from_disk;
    if (reserve(e, s, 0, err)) {
        prefix_finish(e->tree, &s->ps); /* its state is the one it started from: kept already */
        return -1;
    }
    if (cached) *cached = (uint32_t)reused;
    return 0;
}

/* A new sequence for prompt ids[0..n) under salt, not started; NULL with err. */
static fkv_eseq *eseq_new(const fkv_engine *e, const char *salt, const int32_t *ids, uint32_t n, fkv_error *err) {
    const uint32_t n_ctx = e->p.ctx.n_ctx, n_vocab = e->m->hp.n_vocab;
    if (n == 0 || n > n_ctx) {
        err_input(err, "the prompt has %u tokens; it must have 1 to %u (the context)", n, n_ctx);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= n_vocab) {
            err_input(err, "token id %d at position %u is outside the vocabulary (0..%u)", ids[i], i, n_vocab - 1);
            return NULL;
        }
    fkv_eseq *s = calloc(1, sizeof *s);
    if (!s || !(s->ids = malloc(sizeof(int32_t) * n)) || (salt && *salt && !(s->salt = strdup(salt)))) {
        if (s) eseq_free(s);
        err_nomem(err, "out of memory for a sequence");
        return NULL;
    }
    return s;
}

fkv_eseq *fkv_engine_start(fkv_engine *e, const char *salt, const int32_t *ids, uint32_t n, uint32_t *cached,
                           fkv_error *err) {
    return engine_continue(e, NULL, salt, ids, n, cached, err);
}

fkv_eseq *engine_continue(fkv_engine *e, fkv_eseq *prev, const char *salt, const int32_t *ids, uint32_t n,
                          uint32_t *cached, fkv_error *err) {
    fkv_eseq *s = eseq_new(e, salt, ids, n, err);
    uint32_t state_at = 0;
    if (prev) finish_path(e, prev);
    if (s && prev) { /* prev's state slots come along; its state serves where the prompt takes up all prev fed */
        const uint32_t n_prev = prev->ps.n_pos;
        if (n_prev <= n && !strcmp(prev->salt ? prev->salt : "", s->salt ? s->salt : "") &&
            !memcmp(prev->ids, ids, sizeof(int32_t) * n_prev))
            state_at = n_prev;
        s->slots = prev->slots, s->slot = prev->slot, s->n_slots = prev->n_slots;
        prev->slots = NULL, prev->slot = NULL, prev->n_slots = 0;
    }
    if (prev) eseq_free(prev);
    if (!s) return NULL;
    memcpy(s->ids, ids, sizeof(int32_t) * n);
    s->n_ids = s->cap_ids = s->n_prompt = n;
    s->map = kvpool_map(e->pool, NULL);
    s->map.layer_at = e->layer_at;
    if (e->wpool) s->map.part[1] = kvpool_part(e->wpool, NULL);
    const kvrec_policy policy = {.min_reuse = e->p.cache_min, .bound_to_frontier = e->p.bound_to_frontier};
    if (begin(e, s, n, policy, e->p.prefix_cache, state_at, cached, err)) {
        eseq_free(s);
        return NULL;
    }
    return s;
}

/* Room in s->ids for n more. */
static int ids_room(fkv_eseq *s, uint32_t n, fkv_error *err) {
    if (s->cap_ids - s->n_ids >= n) return 0;
    const uint32_t cap = s->n_ids + n + s->cap_ids + 16;
    int32_t *grown = realloc(s->ids, sizeof *grown * cap);
    if (!grown) return err_nomem(err, "out of memory for a sequence's ids");
    s->ids = grown;
    s->cap_ids = cap;
    return 0;
}

/* Compute rows [n_pos, n_pos + n) of s from ids[n_pos..], or from embedding rows embd ([n][dim]; their ids
 * KVREC_NO_ID); logits of the last row when logits. prompt_end: these rows end the prompt, and with recurrent layers
 * the state before the last row is kept (prefix_keep_state): the last row writes slot 1, which then becomes slot 0. */
static int compute(fkv_engine *e, fkv_eseq *s, const float *embd, uint32_t n, float *logits, bool prompt_end,
                   fkv_error *err) {
    uint32_t from = s->ps.n_pos;
    s->n_pending = 0;
    const bool split = prompt_end && s->slots && from + n >= 2;
    if (reserve(e, s, n, err) || (split && state_room(e, s, 2, err))) return -1;
    for (uint32_t r = 0; r < n; r++) {
        e->pos[r] = from + r;
        e->maps[r] = &s->map;
        if (e->states) /* in place, but a split's last row */
            e->states[r] = (forward_state){state_slot(e, s, 0), state_slot(e, s, split && r == n - 1)};
    }
    forward_rows(e->fw, embd ? NULL : s->ids + from, embd, n, e->pos, e->maps, e->states, logits ? n - 1 : n, logits);
    if (e->p.mtp) e->nextn_rows += n;
    prefix_commit(e->tree, &s->ps, s->ids + from, n, true);
    if (split) {
        prefix_keep_state(e->tree, &s->ps, s->ps.n_pos - 1, state_slot(e, s, 0), false);
        swap_slots(s, 0, 1);
    }
    const uint32_t grid = prefix_state_grid(e->tree);
    if (grid && s->ps.n_pos % grid == 0) keep_state(e, s, true); /* chunks end on the state grid (a multiple) */
    return 0;
}

int fkv_engine_prefill(fkv_engine *e, fkv_eseq *s, float *logits, fkv_error *err) {
    const uint32_t grid = e->p.ctx.prefill_rows, p = s->ps.n_pos;
    if (p >= s->n_prompt) return err_input(err, "the prompt is already computed");
    uint32_t end = forward_grid_end(p, s->n_prompt, grid);
    bool last = end == s->n_prompt;
    if (compute(e, s, NULL, end - p, last ? logits : NULL, last, err)) return -1;
    if (last) prefix_keep(e->tree, &s->ps); /* a likely resume: the next turn's prompt, or this one again */
    return last ? 1 : 0;
}

int fkv_engine_verify(fkv_engine *e, fkv_eseq *const *seqs, const int32_t *ids, const uint32_t *n_ids, uint32_t n,
                      float *logits, uint32_t *failed, fkv_error *err) {
    const uint32_t n_ctx = e->p.ctx.n_ctx, max_rows = forward_max_rows(e->fw);
    uint32_t rows = 0;
    for (uint32_t i = 0; i < n; i++) {
        fkv_eseq *s = seqs[i];
        const uint32_t k = n_ids ? n_ids[i] : 1, at = s->ps.n_pos + s->n_pending;
        int rc = 0;
        if (s->ps.n_pos < s->n_prompt)
            rc = err_input(err, "sequence %u: its prompt is not computed yet", i);
        else if (k == 0 || k > max_rows - rows)
            rc = err_input(err, "sequence %u: %u rows in a forward of %u, at most %u", i, k, rows, max_rows);
        else if (k > n_ctx - at)
            rc = err_input(err, "sequence %u: the context of %u positions is full", i, n_ctx);
        for (uint32_t j = 0; !rc && j < k; j++)
            if (ids[rows + j] < 0 || (uint32_t)ids[rows + j] >= e->m->hp.n_vocab)
                rc = err_input(err, "sequence %u: token id %d is outside the vocabulary", i, ids[rows + j]);
        if (!rc) rc = ids_room(s, s->n_pending + k, err);
        if (!rc) rc = reserve(e, s, s->n_pending + k, err);
        if (!rc) rc = state_room(e, s, s->n_pending + k + 1, err);
        if (rc) {
            if (failed) *failed = i;
            return -1;
        }
        for (uint32_t j = 0; j < k; j++) {
            e->pos[rows + j] = at + j;
            e->maps[rows + j] = &s->map;
            if (e->states) /* each row its own slot: a rejected guess's state is never the one kept */
                e->states[rows + j] = (forward_state){state_slot(e, s, s->n_pending + j),
                                                      state_slot(e, s, s->n_pending + j + 1)};
        }
        rows += k;
    }
    forward_rows(e->fw, ids, NULL, rows, e->pos, e->maps, e->states, 0, logits);
    if (e->p.mtp) e->nextn_rows += rows;
    for (uint32_t i = 0, r = 0; i < n; i++) {
        fkv_eseq *s = seqs[i];
        const uint32_t k = n_ids ? n_ids[i] : 1;
        memcpy(s->ids + s->n_ids + s->n_pending, ids + r, sizeof(int32_t) * k);
        s->n_pending += k;
        r += k;
    }
    return 0;
}

void fkv_engine_accept(fkv_engine *e, fkv_eseq *s, uint32_t k) {
    if (k > s->n_pending) k = s->n_pending;
    const uint32_t grid = prefix_state_grid(e->tree), from = s->ps.n_pos;
    uint32_t done = 0;
    for (uint32_t g = grid ? (from / grid + 1) * grid : UINT32_MAX; g < from + k; g += grid) {
        /* a state grid point inside the kept rows: its state is slot g - from's, kept as the record reaches it */
        prefix_commit(e->tree, &s->ps, s->ids + s->n_ids + done, g - from - done, false);
        done = g - from;
        prefix_keep_state(e->tree, &s->ps, s->ps.n_pos, state_slot(e, s, done), true);
    }
    if (s->slots && k) swap_slots(s, 0, k); /* the state after the k kept rows becomes the record's */
    prefix_commit(e->tree, &s->ps, s->ids + s->n_ids + done, k - done, false);
    if (grid && k && s->ps.n_pos % grid == 0) keep_state(e, s, true);
    s->n_ids += k;
    s->n_pending = 0;
}

uint32_t fkv_eseq_pending(const fkv_eseq *s) { return s->n_pending; }

int fkv_engine_decode(fkv_engine *e, fkv_eseq *const *seqs, const int32_t *ids, uint32_t n, float *logits,
                      uint32_t *failed, fkv_error *err) {
    if (n > e->p.max_batch) return err_input(err, "a decode batch of %u exceeds the engine's %u", n, e->p.max_batch);
    for (uint32_t i = 0; i < n; i++) seqs[i]->n_pending = 0;
    if (fkv_engine_verify(e, seqs, ids, NULL, n, logits, failed, err)) return -1;
    for (uint32_t i = 0; i < n; i++) fkv_engine_accept(e, seqs[i], 1);
    return 0;
}

int fkv_engine_feed_embd(fkv_engine *e, fkv_eseq *s, const float *embd, uint32_t n, float *logits, fkv_error *err) {
    const uint32_t n_ctx = e->p.ctx.n_ctx, grid = e->p.ctx.prefill_rows, dim = e->m->hp.dim;
    if (!embd || n == 0) return err_input(err, "no embedding rows to feed");
    if (s->ps.n_pos < s->n_prompt) return err_input(err, "the sequence's prompt is not computed yet");
    if (n > n_ctx - s->ps.n_pos)
        return err_input(err, "%u embedding rows at position %u exceed the context of %u", n, s->ps.n_pos, n_ctx);
    if (ids_room(s, n, err)) return -1;
    for (uint32_t i = 0; i < n; i++) s->ids[s->n_ids + i] = KVREC_NO_ID;
    const uint32_t from = s->ps.n_pos, to = from + n;
    for (uint32_t p = from; p < to;) {
        const uint32_t end = forward_grid_end(p, to, grid);
        if (compute(e, s, embd + (size_t)(p - from) * dim, end - p, end == to ? logits : NULL, false, err)) return -1;
        p = end;
    }
    s->n_ids = s->n_prompt = to;
    return 0;
}

/* Start s's path on its ids[0..n) taking every row the cache holds (nothing left to compute, as a fork or a rewind
 * wants), and compute again the rows no longer held (window rows given back, an eviction). With recurrent layers, state
 * is the state after the n positions (NULL: none at hand, so every row is computed again). */
static int resume(fkv_engine *e, fkv_eseq *s, uint32_t n, const float *state, fkv_error *err) {
    const kvrec_policy policy = {.bound_to_frontier = e->p.bound_to_frontier, .whole = true};
    if (begin(e, s, n, policy, true, state ? n : 0, NULL, err)) return -1;
    if (state && s->ps.n_pos == n) memcpy(state_slot(e, s, 0), state, sizeof(float) * e->state_floats);
    while (s->ps.n_pos < n)
        if (fkv_engine_prefill(e, s, NULL, err) < 0) return -1;
    return 0;
}

fkv_eseq *fkv_engine_fork(fkv_engine *e, const fkv_eseq *s, fkv_error *err) {
    const uint32_t n = s->ps.n_pos;
    fkv_eseq *f = calloc(1, sizeof *f);
    if (!f || !(f->ids = malloc(sizeof(int32_t) * (n ? n : 1))) || (s->salt && !(f->salt = strdup(s->salt)))) {
        if (f) eseq_free(f);
        err_nomem(err, "out of memory for a sequence");
        return NULL;
    }
    memcpy(f->ids, s->ids, sizeof(int32_t) * n);
    f->n_ids = f->cap_ids = f->n_prompt = n;
    f->map = s->map;
    f->map.part[0].blocks = f->map.part[1].blocks = NULL;
    f->ps.memory_only = s->ps.memory_only;
    /* s's rows are all in the tree (committed), so the whole of them is reused; any no longer held is recomputed.
     * Its state after them comes along, copied. */
    if (resume(e, f, n, s->slots ? state_slot(e, s, 0) : NULL, err)) {
        fkv_engine_finish(e, f);
        return NULL;
    }
    return f;
}

int fkv_engine_rewind(fkv_engine *e, fkv_eseq *s, uint32_t n_pos, fkv_error *err) {
    s->n_pending = 0;
    if (n_pos >= s->ps.n_pos) return 0;
    /* Its rows stay cached under their ids (still true of them), its state as the one at its end; the path restarts
     * on the first n_pos, from a state kept at or before it. */
    finish_path(e, s);
    s->n_ids = s->n_prompt = n_pos;
    if (resume(e, s, n_pos, NULL, err)) {
        if (!s->ps.root) s->n_ids = s->n_prompt = 0; /* the path did not even start: s holds nothing */
        return -1;
    }
    return 0;
}

void fkv_eseq_memory_only(fkv_eseq *s) { s->ps.memory_only = true; }

void fkv_engine_finish(fkv_engine *e, fkv_eseq *s) {
    if (!s) return;
    finish_path(e, s);
    eseq_free(s);
}

bool fkv_eseq_divergence(const fkv_eseq *s, uint32_t *at, int32_t *cached, uint32_t *n_cached) {
    const prefix_divergence *d = &s->ps.divergence;
    *at = d->at;
    *n_cached = d->n_cached;
    memcpy(cached, d->cached, sizeof(int32_t) * d->n_cached);
    return d->n_cached > 0;
}

fkv_reuse fkv_eseq_reuse(const fkv_eseq *s) {
    const kvrec_reuse *r = &s->ps.reuse;
    return (fkv_reuse){.agreed = r->agreed, .capped = r->capped, .held = r->held, .state = r->state,
                       .reused = r->reused, .from_disk = s->ps.from_disk};
}

const int32_t *fkv_eseq_ids(const fkv_eseq *s, uint32_t *n) {
    *n = s->ps.n_pos;
    return s->ids;
}

bool engine_nextn(const fkv_engine *e) { return e->p.mtp; }

const float *engine_nextn_h(const fkv_engine *e, const fkv_eseq *s) {
    return state_slot(e, s, 0) + e->m->hp.state_floats;
}

int engine_nextn_rows(fkv_engine *e, fkv_eseq *const *seqs, const int32_t *ids, const uint32_t *at, uint32_t n,
                      float *h, float *logits, fkv_error *err) {
    for (uint32_t i = 0; i < n; i++) {
        fkv_eseq *s = seqs[i];
        if (s->ps.n_pos + at[i] >= e->p.ctx.n_ctx)
            return err_input(err, "sequence %u: a guess at %u is past the context", i, s->ps.n_pos + at[i]);
        if (reserve(e, s, at[i] + 1, err)) return -1;
        e->pos[i] = s->ps.n_pos + at[i];
        e->maps[i] = &s->map;
    }
    forward_nextn(e->fw, ids, h, n, e->pos, e->maps, logits, h);
    e->nextn_guess_rows += n;
    return 0;
}

uint64_t fkv_engine_kv_digest(const fkv_engine *e, const fkv_eseq *s, uint32_t n_pos) {
    if (n_pos > s->ps.n_pos) n_pos = s->ps.n_pos;
    const uint32_t w = e->m->hp.window, first = e->wpool && n_pos >= w ? n_pos - w + 1 : 0;
    for (uint32_t p = first; e->wpool && p < n_pos; p = (p / e->p.kv_block + 1) * e->p.kv_block)
        if (!prefix_wblock_held(e->tree, &s->ps, p)) return 0;
    return kv_map_digest(&s->map, e->n_kv_layers, e->m->windows, n_pos);
}

uint64_t fkv_engine_state_digest(const fkv_engine *e, const fkv_eseq *s) {
    return s->slots ? XXH3_64bits(state_slot(e, s, 0), sizeof(float) * e->state_floats) : 0;
}

void fkv_engine_disk_stats_now(const fkv_engine *e, fkv_engine_stats *st) {
    if (!e->disk) return;
    const kvdisk_stats ds = kvdisk_get_stats(e->disk);
    st->disk_hits = ds.hits, st->disk_misses = ds.misses, st->disk_corrupt = ds.corrupt, st->disk_forged = ds.forged;
    st->disk_writes = ds.writes;
    st->disk_evictions = ds.evictions, st->disk_dropped = ds.dropped, st->disk_errors = ds.errors;
    st->disk_pending = ds.pending, st->disk_bytes = ds.bytes;
}

fkv_engine_stats fkv_engine_get_stats(const fkv_engine *e) {
    prefix_stats ps = prefix_get_stats(e->tree);
    fkv_engine_stats st = {.disk = e->disk != NULL, .disk_reused_tokens = e->disk_reused,
                              .block_rows = e->pool->block_rows, .block_bytes = e->pool->block_bytes,
                              .blocks_total = e->pool->n_blocks, .blocks_in_use = ps.blocks_in_use,
                              .blocks_free = ps.blocks_free, .blocks_shared = ps.blocks_shared, .hits = ps.hits,
                              .misses = ps.misses, .evictions = ps.evictions, .reused_tokens = ps.reused_tokens,
                              .window_blocks_in_use = ps.window_blocks_in_use,
                              .window_block_bytes = e->wpool ? e->wpool->block_bytes : 0,
                              .window_blocks_dropped = ps.window_blocks_dropped,
                              .window_fallbacks = ps.window_fallbacks, .states_kept = ps.states_kept,
                              .state_grid = prefix_state_grid(e->tree), .state_bytes = ps.state_bytes,
                              .state_hits = ps.state_hits, .state_disk_hits = ps.state_disk_hits,
                              .states_evicted = ps.states_evicted, .nextn_rows = e->nextn_rows,
                              .nextn_guess_rows = e->nextn_guess_rows};
    fkv_engine_disk_stats_now(e, &st);
    return st;
}
