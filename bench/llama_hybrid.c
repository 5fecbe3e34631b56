/* llama_hybrid.c — llama.cpp's server policy for models with recurrent layers, replayed through its C API on a
 * session of turns (bench/hybrid-agent.mjs).
 *
 * usage: llama_hybrid MODEL TURNS THREADS N_GEN [N_CTX (default 16384)]
 *   TURNS: one turn a line, its prompt as space-separated token ids.
 * Prints one JSON line a turn: {"turn", "prompt_tokens", "cached_tokens" (positions not recomputed), "checkpoint"
 * (the position the restored checkpoint resumes at: its n_tokens; or -1), "prefill_ms", "decode_ms", "n_checkpoints" (held after the
 * turn), "checkpoint_bytes" (their sum), "user_starts" (user-message starts the delimiters found in the prompt)}.
 *
 * WHY: a recurrent state cannot be rolled back, so how much of a grown conversation llama.cpp reuses is decided by
 * the context checkpoints its server keeps, not by the common prefix alone. This harness is that policy with one
 * slot and one sequence, so bench/hybrid-agent.mjs can set flatkv's reuse beside llama.cpp's on the same ids.
 *
 * The policy, from the llama.cpp source node-llama-cpp ships (tools/server/server-context.cpp unless named):
 * - Whether checkpoints are made (server_context, load: ctx_tgt_seq_rm_type = common_context_can_seq_rm(), in
 *   common/common.cpp: decode 2 ids; llama_n_rs_seq() > 0 is RS, a refused llama_memory_seq_rm(0, 1, -1) is FULL;
 *   n_swa = llama_model_n_swa() unless --swa-full): update_slots makes checkpoints when n_ctx_checkpoints > 0 and
 *   the type is FULL or RS or n_swa > 0. Defaults (common/common.h): n_ctx_checkpoints 32, checkpoint_min_step
 *   8192, n_batch 2048, n_ubatch 512; n_rs_seq 0 without MTP/EAGLE drafting, so a hybrid model is FULL.
 * - Reuse (update_slots, SLOT_STATE_STARTED): n_past = the common prefix of the slot's tokens and the prompt.
 *   pos_min_thold = max(0, n_past - n_swa - (n_past < n_prompt ? 0 : 1)). If n_past > 0 and the memory's
 *   llama_memory_seq_pos_min() >= pos_min_thold (a recurrent state sits at the last position, so it is unless the
 *   cache ends at n_past), the newest checkpoint with pos_max <= n_past and (pos_min < pos_min_thold or pos_min
 *   == 0) is restored with llama_state_seq_set_data_ext(LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY), and n_past becomes
 *   min(n_past, max(pos_min + 1, pos_max), its n_tokens); none: "forcing full prompt re-processing", n_past = 0.
 *   Then every checkpoint with pos_max > n_past is erased; n_past == n_prompt drops one ([TAG_PROMPT_LOGITS]);
 *   the slot keeps its first n_past tokens and llama_memory_seq_rm(seq, n_past, -1) truncates the KV.
 * - Creation (update_slots, prompt batches; create_checkpoint): a batch takes up to n_batch ids and stops early
 *   at a user-message start (the last one, or one past the last checkpoint's n_tokens + min_step) and where
 *   4 + n_ubatch or 4 ids remain (PR 20288). Before a batch is decoded, a checkpoint of the state so far (n_tokens
 *   = the batch's start, pos_min/pos_max = llama_memory_seq_pos_min/max) is taken if the batch starts a user
 *   message, is the prompt's last, or starts within n_ubatch of the end, and the last checkpoint is more than
 *   min_step behind or it is the last user message or near the end. create_checkpoint first erases checkpoints of
 *   earlier turns within min_step of the one before them, then the oldest while n_ctx_checkpoints are held.
 * - User messages (server_routes, completions: message_spans from common_chat_msg_delimiters::split, common/
 *   chat.cpp): the delimiters of common_chat_params_init_qwen3_coder, the handler of Qwen3.5's template, tokenized
 *   with parse_special; the first matching delimiter at a position names its role, only USER starts count.
 * - Generation: N_GEN ids by argmax; the last is not fed back (the slot stops once it is sampled), so the slot
 *   holds the prompt and N_GEN - 1 generated ids.
 * Not modelled: the RAM prompt cache (--cache-ram; it saves a slot only when a prompt keeps under half of it) and
 * n_cache_reuse (0 by default; a recurrent memory cannot shift).
 * prefill_ms spans the reuse decision, restore, checkpoints and prompt batches up to the last prompt logits;
 * decode_ms the N_GEN argmaxes and N_GEN - 1 single-id decodes.
 */
#include "harness.h"
#include "llama_peer.h"

#include <stdbool.h>

/* common/common.h defaults of the server. */
enum { N_CTX_CHECKPOINTS = 32, CHECKPOINT_MIN_STEP = 8192, N_BATCH = 2048, N_UBATCH = 512 };
#define SEQ 0

/* One turn's prompt ids. */
typedef struct {
    int32_t *ids;
    int n;
} hyb_turn;

/* common_prompt_checkpoint: the partial (recurrent) state taken before the batch starting at n_tokens. */
typedef struct {
    int turn; /* id_task */
    int64_t n_tokens;
    llama_pos pos_min, pos_max;
    uint8_t *data;
    size_t size;
} hyb_checkpoint;

/* The slot: the ids its memory holds, and its checkpoints oldest first. */
typedef struct {
    int32_t *ids;
    int n;
    hyb_checkpoint ckpt[N_CTX_CHECKPOINTS];
    int n_ckpt;
} hyb_slot;

/* Delimiters of common_chat_params_init_qwen3_coder (common/chat.cpp), in its order: the first match wins. */
static const struct {
    bool user;
    const char *text;
} hyb_delims[] = {
    {false, "<|im_start|>assistant"},
    {false, "<|im_start|>user\n<tool_response>"},
    {false, "<|im_start|>tool_response"},
    {true, "<|im_start|>user"},
    {false, "<|im_start|>system"},
};
#define N_DELIMS (sizeof hyb_delims / sizeof hyb_delims[0])

typedef struct {
    llama_token ids[64];
    int n;
} hyb_delim_ids;

/* Read the turns file: one prompt a line. 0, or -1 (printed). */
static int read_turns(const char *path, int32_t n_vocab, hyb_turn **turns, int *n_turns) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "llama_hybrid: cannot open %s\n", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    *turns = NULL;
    *n_turns = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        hyb_turn t = {malloc(strlen(line) / 2 * sizeof(int32_t) + sizeof(int32_t)), 0};
        hyb_turn *grown = realloc(*turns, (size_t)(*n_turns + 1) * sizeof **turns);
        if (!t.ids || !grown) {
            free(t.ids);
            rc = -1;
            break;
        }
        *turns = grown;
        char *end, *p = line;
        for (long v = strtol(p, &end, 10); end != p; v = strtol(p, &end, 10)) {
            if (v < 0 || v >= n_vocab) {
                fprintf(stderr, "llama_hybrid: %s: id %ld outside the vocabulary\n", path, v);
                rc = -1;
            }
            t.ids[t.n++] = (int32_t)v;
            p = end;
        }
        if (t.n == 0) free(t.ids);
        else (*turns)[(*n_turns)++] = t;
    }
    free(line);
    fclose(f);
    return rc;
}

/* The user-message starts of a prompt (common_chat_msg_delimiters::split, USER spans only), ascending; their
 * count. */
static int user_starts(const hyb_turn *t, const hyb_delim_ids *d, int *starts) {
    int n = 0;
    for (int i = 0; i < t->n; i++)
        for (size_t k = 0; k < N_DELIMS; k++) {
            if (d[k].n == 0 || i + d[k].n > t->n || memcmp(t->ids + i, d[k].ids, sizeof(llama_token) * d[k].n))
                continue;
            if (hyb_delims[k].user) starts[n++] = i;
            break;
        }
    return n;
}

static bool is_user_start(const int *starts, int n_starts, int64_t pos) {
    for (int i = 0; i < n_starts; i++)
        if (starts[i] == pos) return true;
    return false;
}

static void checkpoint_erase(hyb_slot *s, int i) {
    free(s->ckpt[i].data);
    memmove(&s->ckpt[i], &s->ckpt[i + 1], sizeof s->ckpt[0] * (size_t)(s->n_ckpt - i - 1));
    s->n_ckpt--;
}

/* create_checkpoint: the state before the batch of n_tokens_cur ids just added to the slot. 0 or -1. */
static int checkpoint_create(struct llama_context *ctx, hyb_slot *s, int turn, int n_tokens_cur, llama_pos pos_min,
                             llama_pos pos_max) {
    int64_t last = -1;
    for (int i = 0; i < s->n_ckpt;) {
        if (s->ckpt[i].turn != turn && last >= 0 && s->ckpt[i].n_tokens <= last + CHECKPOINT_MIN_STEP) {
            checkpoint_erase(s, i);
            continue;
        }
        last = s->ckpt[i].n_tokens;
        i++;
    }
    while (s->n_ckpt >= N_CTX_CHECKPOINTS) checkpoint_erase(s, 0);
    hyb_checkpoint *c = &s->ckpt[s->n_ckpt];
    c->turn = turn;
    c->n_tokens = s->n - n_tokens_cur;
    c->pos_min = pos_min;
    c->pos_max = pos_max;
    c->size = llama_state_seq_get_size_ext(ctx, SEQ, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    if (!(c->data = malloc(c->size))) return -1;
    if (llama_state_seq_get_data_ext(ctx, c->data, c->size, SEQ, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) != c->size) {
        fprintf(stderr, "llama_hybrid: checkpoint size mismatch\n");
        free(c->data);
        return -1;
    }
    s->n_ckpt++;
    return 0;
}

/* The reuse decision of SLOT_STATE_STARTED: restores a checkpoint or not, truncates the slot and the memory.
 * Returns n_past; *restored the checkpoint's n_tokens or -1. */
static int slot_reuse(struct llama_context *ctx, hyb_slot *s, const hyb_turn *t, int n_swa, int *restored) {
    int n_past = 0;
    while (n_past < s->n && n_past < t->n && s->ids[n_past] == t->ids[n_past]) n_past++;
    llama_pos pos_next = n_past;
    const int has_new_tokens = n_past < t->n;
    int pos_min_thold = pos_next - n_swa - (has_new_tokens ? 0 : 1);
    if (pos_min_thold < 0) pos_min_thold = 0;
    *restored = -1;
    if (n_past > 0 && n_past <= s->n &&
        llama_memory_seq_pos_min(llama_get_memory(ctx), SEQ) >= pos_min_thold) {
        int found = -1;
        for (int i = s->n_ckpt - 1; i >= 0 && found < 0; i--)
            if (s->ckpt[i].pos_max <= pos_next && (s->ckpt[i].pos_min < pos_min_thold || s->ckpt[i].pos_min == 0))
                found = i;
        if (found >= 0) {
            const hyb_checkpoint *c = &s->ckpt[found];
            if (llama_state_seq_set_data_ext(ctx, c->data, c->size, SEQ, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) !=
                c->size) {
                fprintf(stderr, "llama_hybrid: checkpoint restore size mismatch\n");
                return -1;
            }
            llama_pos upto = c->pos_min + 1 > c->pos_max ? c->pos_min + 1 : c->pos_max;
            if (upto < pos_next) pos_next = upto;
            n_past = pos_next < s->n ? pos_next : s->n; /* size_up_to_pos */
            if (c->n_tokens < n_past) n_past = (int)c->n_tokens;
            *restored = (int)c->n_tokens;
        } else {
            pos_next = 0; /* forcing full prompt re-processing */
            n_past = 0;
        }
    }
    for (int i = 0; i < s->n_ckpt;)
        if (s->ckpt[i].pos_max > pos_next) checkpoint_erase(s, i);
        else i++;
    if (n_past == t->n && n_past > 0) n_past--; /* [TAG_PROMPT_LOGITS] */
    s->n = n_past;
    if (!llama_memory_seq_rm(llama_get_memory(ctx), SEQ, n_past, -1)) { /* common_memory::seq_rm aborts */
        fprintf(stderr, "llama_hybrid: the memory refused to drop positions %d..\n", n_past);
        return -1;
    }
    return n_past;
}

/* The prompt batches from s->n to the end, with their checkpoints; the last batch's logits are the prompt's. */
static int slot_prefill(struct llama_context *ctx, hyb_slot *s, const hyb_turn *t, int turn, bool checkpoints,
                        const int *starts, int n_starts, struct llama_batch *b) {
    const int last_user_pos = n_starts ? starts[n_starts - 1] : -1;
    while (s->n < t->n) {
        bool do_checkpoint = checkpoints;
        b->n_tokens = 0;
        while (s->n < t->n && b->n_tokens < N_BATCH) {
            int i = b->n_tokens++;
            b->token[i] = t->ids[s->n];
            b->pos[i] = s->n;
            b->n_seq_id[i] = 1;
            b->seq_id[i][0] = SEQ;
            b->logits[i] = 0;
            s->ids[s->n] = t->ids[s->n];
            s->n++;
            if (do_checkpoint && is_user_start(starts, n_starts, s->n) &&
                (s->n == last_user_pos || s->n_ckpt == 0 ||
                 s->n > s->ckpt[s->n_ckpt - 1].n_tokens + CHECKPOINT_MIN_STEP))
                break;
            if (do_checkpoint) {
                static const int offsets[] = {4 + N_UBATCH, 4};
                bool stop = false;
                for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++)
                    if (t->n == s->n + (N_BATCH < offsets[k] ? N_BATCH : offsets[k])) stop = true;
                if (stop) break;
            }
        }
        const int n_tokens_cur = b->n_tokens, n_tokens_start = s->n - n_tokens_cur;
        const bool near_prompt_end = t->n < s->n + N_UBATCH;
        const bool user_start = is_user_start(starts, n_starts, n_tokens_start);
        const bool is_last_user_message = n_tokens_start == last_user_pos;
        if (s->n == t->n) b->logits[b->n_tokens - 1] = 1;
        else if (!user_start && !near_prompt_end) do_checkpoint = false;
        llama_memory_t mem = llama_get_memory(ctx);
        const llama_pos pos_min = llama_memory_seq_pos_min(mem, SEQ), pos_max = llama_memory_seq_pos_max(mem, SEQ);
        if (pos_min < 0) do_checkpoint = false;
        do_checkpoint = do_checkpoint && (s->n_ckpt == 0 || is_last_user_message || near_prompt_end ||
                                          n_tokens_start > s->ckpt[s->n_ckpt - 1].n_tokens + CHECKPOINT_MIN_STEP);
        if (do_checkpoint && checkpoint_create(ctx, s, turn, n_tokens_cur, pos_min, pos_max) != 0) return -1;
        int rc = llama_decode(ctx, *b);
        if (rc != 0) {
            fprintf(stderr, "llama_hybrid: llama_decode of %d ids returned %d\n", b->n_tokens, rc);
            return -1;
        }
    }
    llama_synchronize(ctx);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 6 || atoi(argv[3]) < 1 || atoi(argv[4]) < 1) {
        fprintf(stderr, "usage: %s MODEL TURNS THREADS N_GEN [N_CTX]\n", argv[0]);
        return 2;
    }
    const int threads = atoi(argv[3]), n_gen = atoi(argv[4]), n_ctx = argc == 6 ? atoi(argv[5]) : 16384;

    struct llama_model *model = llama_peer_load("llama_hybrid", argv[1]);
    if (!model) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    hyb_turn *turns = NULL;
    int n_turns = 0, max_prompt = 0, rc = -1;
    hyb_slot slot = {0};
    int *starts = NULL;
    struct llama_context *ctx = NULL;
    struct llama_batch batch = llama_batch_init(N_BATCH, 0, 1);
    if (read_turns(argv[2], n_vocab, &turns, &n_turns) != 0) goto done;
    for (int i = 0; i < n_turns; i++)
        if (turns[i].n > max_prompt) max_prompt = turns[i].n;
    if (max_prompt + n_gen > n_ctx) {
        fprintf(stderr, "llama_hybrid: a prompt of %d ids and %d generated exceed the context (%d)\n", max_prompt,
                n_gen, n_ctx);
        goto done;
    }
    slot.ids = malloc(sizeof(int32_t) * (size_t)n_ctx);
    starts = malloc(sizeof(int) * (size_t)max_prompt);
    if (!slot.ids || !starts) goto done;

    hyb_delim_ids delims[N_DELIMS];
    for (size_t k = 0; k < N_DELIMS; k++) {
        const char *text = hyb_delims[k].text;
        delims[k].n = llama_tokenize(vocab, text, (int32_t)strlen(text), delims[k].ids, 64, false, true);
        if (delims[k].n < 0) delims[k].n = 0;
    }

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = N_BATCH;
    cp.n_ubatch = N_UBATCH;
    cp.n_seq_max = 1;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.no_perf = true;
    if (!(ctx = llama_init_from_model(model, cp))) {
        fprintf(stderr, "llama_hybrid: llama.cpp could not create a context\n");
        goto done;
    }
    /* common_context_can_seq_rm: what the memory can roll back, probed as the server does (also the warm-up). */
    llama_memory_t mem = llama_get_memory(ctx);
    llama_token probe[2] = {0, 0};
    if (llama_decode(ctx, llama_batch_get_one(probe, 2)) != 0) goto done;
    const bool rs = llama_n_rs_seq(ctx) > 0, full = !rs && !llama_memory_seq_rm(mem, SEQ, 1, -1);
    llama_memory_clear(mem, true);
    const int n_swa = llama_model_n_swa(model);
    const bool checkpoints = full || rs || n_swa > 0;
    fprintf(stderr, "llama_hybrid: memory rollback %s, n_swa %d: context checkpoints %s\n",
            rs ? "bounded (RS)" : full ? "none (FULL)" : "partial (PART)", n_swa, checkpoints ? "on" : "off");

    int32_t *gen = malloc(sizeof(int32_t) * (size_t)n_gen);
    if (!gen) goto done;
    rc = 0;
    for (int turn = 0; rc == 0 && turn < n_turns; turn++) {
        const hyb_turn *t = &turns[turn];
        const int n_starts = user_starts(t, delims, starts);
        int restored;
        const double t0 = harness_now();
        const int n_past = slot_reuse(ctx, &slot, t, n_swa, &restored);
        if (n_past < 0 || slot_prefill(ctx, &slot, t, turn, checkpoints, starts, n_starts, &batch) != 0) {
            rc = -1;
            break;
        }
        const double t1 = harness_now();
        for (int i = 0; rc == 0 && i < n_gen; i++) {
            gen[i] = harness_argmax(llama_get_logits_ith(ctx, -1), n_vocab);
            if (i == n_gen - 1) break; /* sampled, then the slot stops: not fed back */
            rc = llama_decode(ctx, llama_batch_get_one(&gen[i], 1));
            slot.ids[slot.n++] = gen[i];
        }
        llama_synchronize(ctx);
        const double t2 = harness_now();
        size_t bytes = 0;
        for (int i = 0; i < slot.n_ckpt; i++) bytes += slot.ckpt[i].size;
        printf("{\"turn\":%d,\"prompt_tokens\":%d,\"cached_tokens\":%d,\"checkpoint\":%d,\"prefill_ms\":%.3f,"
               "\"decode_ms\":%.3f,\"n_checkpoints\":%d,\"checkpoint_bytes\":%zu,\"user_starts\":%d}\n",
               turn, t->n, n_past, restored, (t1 - t0) * 1e3, (t2 - t1) * 1e3, slot.n_ckpt, bytes, n_starts);
        fflush(stdout);
    }
    free(gen);

done:
    if (rc != 0) fprintf(stderr, "llama_hybrid: failed\n");
    for (int i = 0; i < slot.n_ckpt; i++) free(slot.ckpt[i].data);
    free(slot.ids);
    free(starts);
    for (int i = 0; i < n_turns; i++) free(turns[i].ids);
    free(turns);
    llama_batch_free(batch);
    if (ctx) llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc == 0 ? 0 : 1;
}
