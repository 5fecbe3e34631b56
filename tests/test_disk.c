/* The disk tier (src/cache/kvdisk.h) through the engine: a conversation resumed by another engine — a restart — from the
 * block files alone, compared with a cold run by KV digest, logits digest and ids; files that do not verify are
 * never used; with a key, files written without it (checksums valid, rows wrong) are refused as forged; blocks of
 * other bits or salts are never shared; the budget evicts; in-memory sequences write nothing;
 * and writes that fail (ENOSPC, EIO, short writes, failed fsyncs and renames, injected by tests/faultio.h) lose nothing
 * memory holds and leave nothing partial to read. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "faultio.h"
#include "flatkv.h"
#include "gguf/gguf.h"
#include "testutil.h"

#define BLOCK 32
#define N_GEN 10
#define N_PROMPT 300

typedef struct {
    fkv_model *m;
    uint32_t n_vocab;
    fkv_seq *cold;
    fkv_sampler *sampler;
    float *logits;
    char dir[256];
    const char *kv_key; /* the engines' --kv-key; NULL: none */
    int32_t ids[400];
} fixture;

typedef struct {
    uint32_t cached, from_disk, n_gen;
    uint64_t kv, logits, state; /* state: after the turn (0 without recurrent layers) */
    int32_t gen[N_GEN];
} answer;

static void fill(const fixture *f, int32_t *ids, uint32_t n, uint64_t seed) {
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(3 + (seed >> 33) % (f->n_vocab - 3));
    }
}

static int setup_model(void **state, const char *path) {
    fixture *f = calloc(1, sizeof *f);
    fkv_error err = {0};
    if (!path || !(f->m = fkv_model_load(path, &err))) return -1;
    f->n_vocab = fkv_model_get_info(f->m).n_vocab;
    fkv_engine_params p;
    fkv_engine_default_params(&p, NULL);
    p.prefix_cache = false;
    p.ctx.kv_type = FKV_KV_F16; /* the engines' (engine_on's callers') */
    f->cold = fkv_seq_new(f->m, &p, &err);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    f->sampler = fkv_sampler_new(&sp, (int32_t)f->n_vocab);
    f->logits = malloc(sizeof(float) * f->n_vocab);
    snprintf(f->dir, sizeof f->dir, "%s", tu_tmp_path("-kv"));
    fill(f, f->ids, 400, 42);
    *state = f;
    return f->cold ? 0 : -1;
}

static int setup(void **state) { return setup_model(state, tu_data("models/stories260K.gguf")); }

/* A model with recurrent layers (qwen35 of the same vocabulary), whose resumes need a state. */
static int setup_hybrid(void **state) {
    const char *path = tu_arch_model("qwen35", GGML_TYPE_Q8_0, 17);
    const int rc = setup_model(state, path);
    if (path) remove(path);
    return rc;
}

/* Every file under dir, then dir. */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (!lstat(path, &st) && S_ISDIR(st.st_mode))
            remove_tree(path);
        else
            unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static int teardown(void **state) {
    fixture *f = *state;
    remove_tree(f->dir);
    fkv_seq_free(f->cold);
    fkv_sampler_free(f->sampler);
    free(f->logits);
    fkv_model_free(f->m);
    free(f);
    return 0;
}

static fkv_engine *engine_on(const fixture *f, fkv_kv_type kv_type, uint64_t budget, const char **why) {
    fkv_engine_params p;
    fkv_engine_default_params(&p, NULL);
    p.ctx.kv_type = kv_type;
    p.cache_min = 1;
    p.kv_block = BLOCK;
    p.kv_dir = f->dir;
    p.kv_key = f->kv_key;
    p.kv_disk = budget;
    p.ctx.prefill_rows = BLOCK;
    p.state_grid = 2 * BLOCK; /* a hybrid's states kept every 64 positions (others have none) */
    static fkv_error err;
    fkv_engine *e = fkv_engine_new(f->m, &p, &err);
    if (why) *why = err.msg;
    else if (!e) fail_msg("%s", err.msg);
    return e;
}

/* Prefill ids[0..n) on s (memory_only: its blocks stay off disk) and generate N_GEN greedy tokens. */
static answer run(fixture *f, fkv_engine *e, fkv_seq *s, const int32_t *ids, uint32_t n) {
    answer a = {0};
    fkv_error err = {0};
    const uint64_t disk_before = e ? fkv_engine_get_stats(e).disk_reused_tokens : 0;
    if (fkv_seq_prefill(s, ids, n, f->logits, &a.cached, &err)) fail_msg("%s", err.msg);
    a.from_disk = e ? (uint32_t)(fkv_engine_get_stats(e).disk_reused_tokens - disk_before) : 0;
    a.kv = fkv_seq_kv_digest(s, n);
    fkv_gen_params gp = {.max_tokens = N_GEN, .sampler = f->sampler};
    fkv_gen_result res;
    if (fkv_seq_generate(s, f->logits, &gp, a.gen, &res, &err)) fail_msg("%s", err.msg);
    a.logits = res.logits_digest;
    a.n_gen = res.n_tokens;
    a.state = fkv_seq_state_digest(s);
    return a;
}

/* One turn of ids[0..n) on a fresh sequence of e, checked against the cold run; returns it. */
static answer turn_exact(fixture *f, fkv_engine *e, const char *salt, const int32_t *ids, uint32_t n,
                         const char *what) {
    fkv_error err = {0};
    fkv_seq *s = fkv_seq_open(e, salt, &err);
    if (!s) fail_msg("%s", err.msg);
    answer warm = run(f, e, s, ids, n), cold = run(f, NULL, f->cold, ids, n);
    fkv_seq_free(s);
    if (warm.kv != cold.kv || warm.logits != cold.logits || warm.state != cold.state || warm.n_gen != cold.n_gen ||
        memcmp(warm.gen, cold.gen, sizeof(int32_t) * warm.n_gen))
        fail_msg("%s (reused %u, %u from disk): kv %016llx logits %016llx, cold kv %016llx logits %016llx", what,
                 warm.cached, warm.from_disk, (unsigned long long)warm.kv, (unsigned long long)warm.logits,
                 (unsigned long long)cold.kv, (unsigned long long)cold.logits);
    return warm;
}

/* The first conversation: N_PROMPT ids and N_GEN generated, its full blocks written when the engine closes. */
static void first_process(fixture *f) {
    fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
    answer a = turn_exact(f, e, NULL, f->ids, N_PROMPT, "the first process");
    assert_int_equal(a.from_disk, 0);
    fkv_engine_free(e); /* writes what is still queued */
}

/* The next turn: the first's prompt and reply, then 30 new ids. */
static uint32_t next_turn(fixture *f, int32_t *ids) {
    answer cold = run(f, NULL, f->cold, f->ids, N_PROMPT);
    memcpy(ids, f->ids, sizeof(int32_t) * N_PROMPT);
    memcpy(ids + N_PROMPT, cold.gen, sizeof(int32_t) * cold.n_gen);
    fill(f, ids + N_PROMPT + cold.n_gen, 30, 7);
    return N_PROMPT + cold.n_gen + 30;
}

static void test_a_restarted_engine_resumes_from_disk_exactly(void **state) {
    fixture *f = *state;
    first_process(f);
    int32_t ids[400];
    const uint32_t n = next_turn(f, ids), full = (N_PROMPT + N_GEN - 1) / BLOCK * BLOCK; /* the last id is not fed */
    fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
    answer a = turn_exact(f, e, NULL, ids, n, "the restarted process");
    assert_int_equal(a.from_disk, full);
    assert_int_equal(a.cached, full);
    fkv_engine_stats st = fkv_engine_get_stats(e);
    assert_int_equal(st.disk_hits, full / BLOCK);
    assert_int_equal(st.disk_corrupt, 0);
    fkv_engine_free(e);
}

#define MAX_FILES 64

/* The paths of the block files under the fixture's dir (DIR/kv/XY/KEY.blk), at most MAX_FILES. */
static size_t block_paths(const fixture *f, char (*paths)[1024]) {
    char kv[300];
    snprintf(kv, sizeof kv, "%s/kv", f->dir);
    size_t n = 0;
    DIR *top = opendir(kv);
    for (struct dirent *sub; top && (sub = readdir(top));) {
        if (sub->d_name[0] == '.') continue;
        char subdir[600];
        snprintf(subdir, sizeof subdir, "%s/%s", kv, sub->d_name);
        DIR *d = opendir(subdir);
        for (struct dirent *e; d && (e = readdir(d)) && n < MAX_FILES;)
            if (e->d_name[0] != '.') snprintf(paths[n++], sizeof *paths, "%s/%s", subdir, e->d_name);
        if (d) closedir(d);
    }
    if (top) closedir(top);
    return n;
}

static size_t count_blocks(const fixture *f) {
    static char paths[MAX_FILES][1024];
    return block_paths(f, paths);
}

/* The block file of depth d (its header: magic, key, block rows, then the count of its ids, (d + 1) · BLOCK). */
static void block_file(const fixture *f, uint32_t depth, char *out, size_t cap) {
    static char paths[MAX_FILES][1024];
    for (size_t i = 0, n = block_paths(f, paths); i < n; i++) {
        size_t size;
        char *data = tu_read_file(paths[i], &size);
        uint32_t at = UINT32_MAX;
        if (data && size >= 32) memcpy(&at, data + 28, sizeof at);
        free(data);
        if (at == (depth + 1) * BLOCK) {
            snprintf(out, cap, "%s", paths[i]);
            return;
        }
    }
    fail_msg("no block file of depth %u", depth);
}

static void test_a_file_that_does_not_verify_is_never_used(void **state) {
    fixture *f = *state;
    first_process(f);
    char flipped[1024], truncated[1024];
    block_file(f, 3, flipped, sizeof flipped);
    block_file(f, 6, truncated, sizeof truncated);
    size_t size;
    char *data = tu_read_file(flipped, &size);
    data[size - 100] ^= 0x10; /* one bit of one row */
    assert_int_equal(tu_write_file(flipped, data, size), 0);
    free(data);
    assert_int_equal(truncate(truncated, 1000), 0);

    int32_t ids[400];
    const uint32_t n = next_turn(f, ids);
    /* Each run meets the next bad file and replaces it; the last finds the whole of the previous turn's blocks. */
    const uint32_t expect[] = {3 * BLOCK, 6 * BLOCK, (n - 1) / BLOCK * BLOCK};
    for (int run_no = 0; run_no < 3; run_no++) {
        fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
        answer a = turn_exact(f, e, NULL, ids, n, "a resume past a corrupt file");
        assert_int_equal(a.from_disk, expect[run_no]);
        assert_int_equal(fkv_engine_get_stats(e).disk_corrupt, run_no < 2 ? 1 : 0);
        fkv_engine_free(e);
    }
}

/* A key file of mode 0600 holding secret, at a fresh path. */
static const char *key_file(const char *secret) {
    const char *path = tu_tmp_path("-key");
    assert_int_equal(tu_write_file(path, secret, strlen(secret)), 0);
    assert_int_equal(chmod(path, 0600), 0);
    return path;
}

/* What a forger who can write to the directory but holds no key does: block `to`'s rows replaced by block `from`'s
 * (real rows, of other positions), its checksums made to verify again (src/cache/kvdisk.c's header: 96 bytes, rows
 * hash at 48, header hash of the first 56 bytes at 56), its MAC left as it was. */
static void forge(const fixture *f, uint32_t to, uint32_t from) {
    char target[1024], source[1024];
    block_file(f, to, target, sizeof target);
    block_file(f, from, source, sizeof source);
    size_t n_to, n_from;
    char *forged = tu_read_file(target, &n_to), *rows = tu_read_file(source, &n_from);
    uint64_t row_bytes;
    memcpy(&row_bytes, forged + 32, sizeof row_bytes);
    assert_true(n_to > 96 + row_bytes && n_from > row_bytes);
    memcpy(forged + n_to - row_bytes, rows + n_from - row_bytes, row_bytes);
    const uint64_t rows_hash = XXH3_64bits(forged + n_to - row_bytes, row_bytes);
    memcpy(forged + 48, &rows_hash, sizeof rows_hash);
    const uint64_t header_hash = XXH3_64bits(forged, 56);
    memcpy(forged + 56, &header_hash, sizeof header_hash);
    assert_int_equal(tu_write_file(target, forged, n_to), 0);
    free(forged);
    free(rows);
}

/* Without a key a forged block is read as if true (the attack is real: the resumed rows are not the cold run's);
 * with one it is refused as forged, removed and recomputed, and the answer equals a cold run's. */
static void test_a_forged_block_is_refused_with_a_key_and_the_answer_equals_cold(void **state) {
    fixture *f = *state;
    int32_t ids[400];
    const uint32_t n = next_turn(f, ids);
    first_process(f);
    forge(f, 3, 4);
    fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
    fkv_seq *s = fkv_seq_open(e, NULL, NULL);
    const answer fooled = run(f, e, s, ids, n), cold = run(f, NULL, f->cold, ids, n);
    fkv_seq_free(s);
    assert_true(fooled.from_disk > 3 * BLOCK);
    assert_true(fooled.kv != cold.kv);
    assert_int_equal(fkv_engine_get_stats(e).disk_forged, 0);
    fkv_engine_free(e);

    f->kv_key = key_file("a secret of the fleet, 32 bytes.");
    first_process(f);
    forge(f, 3, 4);
    const uint32_t expect[] = {3 * BLOCK, (n - 1) / BLOCK * BLOCK}; /* then the recomputed block was written again */
    for (int run_no = 0; run_no < 2; run_no++) {
        e = engine_on(f, FKV_KV_F16, 0, NULL);
        answer a = turn_exact(f, e, NULL, ids, n, "a resume past a forged file");
        assert_int_equal(a.from_disk, expect[run_no]);
        const fkv_engine_stats st = fkv_engine_get_stats(e);
        assert_int_equal(st.disk_forged, run_no == 0);
        assert_int_equal(st.disk_corrupt, 0);
        fkv_engine_free(e);
    }
    /* Another key's files are all forgeries to this one: the first read is refused, nothing is used. */
    const char *mine = f->kv_key;
    f->kv_key = key_file("another fleet's secret, 32 bytes");
    e = engine_on(f, FKV_KV_F16, 0, NULL);
    assert_int_equal(turn_exact(f, e, NULL, ids, n, "another key").from_disk, 0);
    assert_int_equal(fkv_engine_get_stats(e).disk_forged, 1);
    fkv_engine_free(e);
    remove(f->kv_key);
    remove(mine);
}

/* The cached model identity names the namespace: one forged to another model's would make that model's (valid,
 * keyed) blocks read as this one's. With a key a cached identity without a valid MAC is computed again. */
static void test_a_forged_model_identity_is_computed_again_with_a_key(void **state) {
    fixture *f = *state;
    f->kv_key = key_file("a secret of the fleet, 32 bytes.\n");
    first_process(f);
    char models[300];
    snprintf(models, sizeof models, "%s/models", f->dir);
    DIR *d = opendir(models);
    int rewritten = 0;
    for (struct dirent *x; d && (x = readdir(d));) {
        if (x->d_name[0] == '.') continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", models, x->d_name);
        static const char other[] = "0123456789abcdef0123456789abcdef\n"; /* another identity, no MAC */
        assert_int_equal(tu_write_file(path, other, strlen(other)), 0);
        rewritten++;
    }
    if (d) closedir(d);
    assert_int_equal(rewritten, 1);
    /* the secret without its newline: the same key */
    const char *same = f->kv_key;
    f->kv_key = key_file("a secret of the fleet, 32 bytes.");
    int32_t ids[400];
    const uint32_t n = next_turn(f, ids);
    fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
    const uint32_t full = (N_PROMPT + N_GEN - 1) / BLOCK * BLOCK;
    assert_int_equal(turn_exact(f, e, NULL, ids, n, "a forged identity").from_disk, full);
    assert_int_equal(fkv_engine_get_stats(e).disk_forged, 0);
    fkv_engine_free(e);
    remove(f->kv_key);
    remove(same);
}

/* A key file is a secret: others may not read it, it holds enough of one, and it authenticates a disk tier. */
static void test_a_key_file_must_be_a_private_secret(void **state) {
    fixture *f = *state;
    const char *why = NULL;
    static const struct {
        const char *secret;
        unsigned mode;
        const char *says;
    } bad[] = {
        {"a secret of the fleet, 32 bytes.", 0644, "chmod 600"},
        {"short secret \n\n", 0600, "at least 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f->kv_key = key_file(bad[i].secret);
        assert_int_equal(chmod(f->kv_key, bad[i].mode), 0);
        assert_null(engine_on(f, FKV_KV_F16, 0, &why));
        if (!strstr(why, bad[i].says) || !strstr(why, f->kv_key)) fail_msg("%s: %s", bad[i].says, why);
        remove(f->kv_key);
    }
    f->kv_key = tu_tmp_path("-missing-key");
    assert_null(engine_on(f, FKV_KV_F16, 0, &why));
    assert_non_null(strstr(why, f->kv_key));
    f->kv_key = key_file("a secret of the fleet, 32 bytes.");
    fkv_engine_params p;
    fkv_engine_default_params(&p, NULL);
    p.kv_key = f->kv_key; /* without kv_dir */
    fkv_error err = {0};
    assert_null(fkv_engine_new(f->m, &p, &err));
    assert_int_equal(err.code, FKV_E_INPUT);
    assert_non_null(strstr(err.msg, "--kv-dir"));
    remove(f->kv_key);
    f->kv_key = NULL;
}

static void test_other_bits_or_salts_never_share_a_block(void **state) {
    fixture *f = *state;
    first_process(f);
    int32_t ids[400];
    const uint32_t n = next_turn(f, ids);
    fkv_engine *e = engine_on(f, FKV_KV_F32, 0, NULL);
    fkv_seq *s = fkv_seq_open(e, NULL, NULL);
    assert_int_equal(run(f, e, s, ids, n).from_disk, 0); /* (the cold run keeps f16 rows: no digest to compare) */
    fkv_seq_free(s);
    fkv_engine_free(e);
    e = engine_on(f, FKV_KV_F16, 0, NULL);
    assert_int_equal(turn_exact(f, e, "another salt", ids, n, "another salt").from_disk, 0);
    assert_true(turn_exact(f, e, NULL, ids, n, "the default salt").from_disk > 0);
    fkv_engine_free(e);
}

static void test_in_memory_sequences_write_nothing(void **state) {
    fixture *f = *state;
    fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
    fkv_error err = {0};
    uint32_t cached;
    fkv_eseq *s = fkv_engine_start(e, NULL, f->ids, N_PROMPT, &cached, &err);
    assert_non_null(s);
    fkv_eseq_memory_only(s);
    int rc;
    while ((rc = fkv_engine_prefill(e, s, f->logits, &err)) == 0) {}
    assert_int_equal(rc, 1);
    fkv_engine_finish(e, s);
    fkv_engine_free(e);
    assert_int_equal(count_blocks(f), 0);
}

static void test_the_budget_bounds_the_files_kept(void **state) {
    fixture *f = *state;
    const fkv_model_info info = fkv_model_get_info(f->m);
    const uint64_t file = 96 + sizeof(int32_t) * 400 + (uint64_t)2 * info.n_layers * BLOCK *
                                                          info.n_kv_heads * info.head_dim * sizeof(uint16_t);
    fkv_engine *e = engine_on(f, FKV_KV_F16, 4 * file, NULL);
    turn_exact(f, e, NULL, f->ids, N_PROMPT, "a conversation larger than the budget");
    fkv_engine_free(e);
    const size_t left = count_blocks(f);
    assert_true(left >= 1 && left <= 4);
    e = engine_on(f, FKV_KV_F16, 4 * file, NULL);
    fkv_engine_stats st = fkv_engine_get_stats(e);
    assert_true(st.disk_bytes <= 4 * file);
    turn_exact(f, e, NULL, f->ids, N_PROMPT, "after eviction"); /* resumes from what is left, if anything */
    fkv_engine_free(e);
}

static void test_window_layers_kept_apart_refuse_a_disk_tier(void **state) {
    (void)state;
    const char *path = tu_arch_model("gemma3", GGML_TYPE_Q8_0, 5);
    assert_non_null(path);
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(path, &err);
    remove(path);
    assert_non_null(m);
    fkv_engine_params p;
    fkv_engine_default_params(&p, NULL);
    p.kv_dir = tu_tmp_path("-kv");
    assert_null(fkv_engine_new(m, &p, &err));
    assert_non_null(strstr(err.msg, "--swa-full"));
    p.swa_full = true;
    fkv_engine *e = fkv_engine_new(m, &p, &err);
    if (!e) fail_msg("%s", err.msg);
    fkv_engine_free(e);
    fkv_model_free(m);
    char models[512];
    snprintf(models, sizeof models, "%s", p.kv_dir);
    remove_tree(models);
}

/* Every file under dir/tmp (the writer's temporary files). */
static size_t count_tmp(const fixture *f) {
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/tmp", f->dir);
    size_t n = 0;
    DIR *d = opendir(tmp);
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* The writer thread has written (or failed) everything queued. */
static fkv_engine_stats drained(const fkv_engine *e) {
    fkv_engine_stats st = fkv_engine_get_stats(e);
    for (int i = 0; i < 2000; i++) {
        fkv_engine_disk_stats_now(e, &st);
        if (!st.disk_pending) return st;
        usleep(5000);
    }
    fail_msg("the disk tier's writer did not drain its queue in 10 s");
    return st;
}

/* A model with recurrent layers: its kept states are written beside the blocks, so another engine on the directory
 * (a replica, while the first runs) and a restarted one resume where a state file and the blocks before it are on
 * disk, and answer as a cold run does. The replica: the first turn's reply ends (309) inside a block not yet full, so
 * at the last state before the full blocks' end, the grid point 256. The restart: after the replica's own turn,
 * whose blocks reach 320 and whose grid state at 320 it wrote; and once more with that state's file corrupted. */
static void test_hybrid_states_on_disk_serve_a_replica_and_a_restart(void **state) {
    fixture *f = *state;
    fkv_engine *first = engine_on(f, FKV_KV_F16, 0, NULL);
    answer a = turn_exact(f, first, NULL, f->ids, N_PROMPT, "the first process");
    assert_int_equal(a.from_disk, 0);
    drained(first);
    int32_t ids[400];
    const uint32_t n = next_turn(f, ids);
    for (int run = 0; run < 3; run++) {
        /* run 2: the state file at 320 flipped — never used (counted, removed): from the next one on disk, the first
         * turn's reply end (309), now that the replica's blocks reach past it */
        const uint32_t want = run == 0 ? 4 * 2 * BLOCK : run == 1 ? 5 * 2 * BLOCK : N_PROMPT + N_GEN - 1;
        if (run == 1) fkv_engine_free(first); /* the replica's case runs while it lives */
        if (run == 2) {
            static char paths[MAX_FILES][1024];
            size_t i = 0, count = block_paths(f, paths);
            while (i < count && !strstr(paths[i], ".320.")) i++;
            assert_true(i < count);
            size_t size;
            char *data = tu_read_file(paths[i], &size);
            data[size - 1] ^= 0x01; /* one bit of the state */
            assert_int_equal(tu_write_file(paths[i], data, size), 0);
            free(data);
        }
        fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
        a = turn_exact(f, e, NULL, ids, n, run == 0 ? "a replica" : "a restarted process");
        assert_int_equal(a.cached, want);
        assert_int_equal(a.from_disk, want);
        const fkv_engine_stats st = fkv_engine_get_stats(e);
        assert_int_equal(st.state_hits, 1);
        assert_int_equal(st.state_disk_hits, 1);
        assert_int_equal(st.disk_corrupt, run == 2);
        fkv_engine_free(e);
    }
}

/* For each fault, every call (every 1) and every 3rd: while the disk fails, the engine answers as a cold run does and
 * a second turn reuses its rows from memory; the failures are counted; no temporary file is left and no partial
 * file is under a block's name — a later engine on the directory reads only verified blocks (none corrupt) and
 * answers as a cold run does. */
static void test_failing_disk_writes_lose_nothing_memory_holds_and_leave_nothing_partial(void **state) {
    fixture *f = *state;
    for (int fault = FIO_WRITE_ENOSPC; fault <= FIO_RENAME_ENOSPC; fault++)
        for (uint32_t every = 1; every <= 3; every += 2) {
            if (fault == FIO_WRITE_SHORT_THEN_ENOSPC && every > 1) continue; /* it alternates on its own */
            char what[128];
            snprintf(what, sizeof what, "%s (every %u)", fio_name((fio_fault)fault), every);
            remove_tree(f->dir);
            fkv_engine *e = engine_on(f, FKV_KV_F16, 0, NULL);
            fio_arm((fio_fault)fault, every);
            turn_exact(f, e, NULL, f->ids, N_PROMPT, what);
            fkv_engine_stats st = drained(e);
            const bool all_fail = every == 1 && fault != FIO_WRITE_SHORT;
            if (fault == FIO_WRITE_SHORT) { /* short writes are finished: every file whole */
                if (st.disk_errors || !st.disk_writes) fail_msg("%s: %llu errors, %llu writes", what,
                                                                (unsigned long long)st.disk_errors,
                                                                (unsigned long long)st.disk_writes);
            } else if (!st.disk_errors || (all_fail && st.disk_writes)) {
                fail_msg("%s: %llu failures counted, %llu files written", what, (unsigned long long)st.disk_errors,
                         (unsigned long long)st.disk_writes);
            }
            assert_true(fio_injected() > 0);
            /* memory still holds the rows: the same prompt again reuses them, from memory */
            answer again = turn_exact(f, e, NULL, f->ids, N_PROMPT, what);
            assert_int_equal(again.cached, N_PROMPT - 1);
            assert_int_equal(again.from_disk, 0);
            fkv_engine_free(e); /* still failing: what is queued fails too */
            fio_disarm();
            assert_int_equal(count_tmp(f), 0);
            const size_t n_files = count_blocks(f);
            if (all_fail) assert_int_equal(n_files, 0);
            /* a later process reads what verifies and recomputes the rest */
            e = engine_on(f, FKV_KV_F16, 0, NULL);
            answer later = turn_exact(f, e, NULL, f->ids, N_PROMPT, what);
            st = fkv_engine_get_stats(e);
            assert_int_equal(st.disk_corrupt, 0);
            if (all_fail) assert_int_equal(later.from_disk, 0);
            if (fault == FIO_WRITE_SHORT) assert_true(later.from_disk > 0);
            print_message("  %-30s %3llu faults: %2zu block files kept, %3u positions read back\n", what,
                          (unsigned long long)fio_injected(), n_files, later.from_disk);
            fkv_engine_free(e);
        }
}

int main(void) {
#define CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        CASE(test_a_restarted_engine_resumes_from_disk_exactly),
        CASE(test_a_file_that_does_not_verify_is_never_used),
        CASE(test_a_forged_block_is_refused_with_a_key_and_the_answer_equals_cold),
        CASE(test_a_forged_model_identity_is_computed_again_with_a_key),
        CASE(test_a_key_file_must_be_a_private_secret),
        CASE(test_other_bits_or_salts_never_share_a_block),
        CASE(test_in_memory_sequences_write_nothing),
        CASE(test_the_budget_bounds_the_files_kept),
        CASE(test_failing_disk_writes_lose_nothing_memory_holds_and_leave_nothing_partial),
        cmocka_unit_test_setup_teardown(test_hybrid_states_on_disk_serve_a_replica_and_a_restart, setup_hybrid,
                                        teardown),
        cmocka_unit_test(test_window_layers_kept_apart_refuse_a_disk_tier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
