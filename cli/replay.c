/* flatkv replay — one engine, one or many conversations, replayed turn by turn from a JSONL session file,
 * printing per turn how much of the prompt was reused and the digests that prove the reuse exact. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "utf8.h"

static const char HELP[] =
    "usage: flatkv replay -m MODEL --session FILE.jsonl [options]\n"
    "\n"
    "Each input line is a turn: {\"prompt\": TEXT} (tokenized as generate does, BOS first) or\n"
    "{\"prompt_ids\": [ids]} (used exactly), with optional \"n\" (tokens to generate, default 32) and \"temp\"\n"
    "(default 0), and \"conversation\" (a name: turns of several conversations may interleave; default \"\").\n"
    "One engine serves every turn, reusing what it caches of any conversation. Per turn one JSON line:\n"
    "turn, conversation, prompt_tokens, cached_tokens, disk_tokens (of them, read from --kv-dir), generated,\n"
    "text, logits_digest, kv_digest (xxh3-64 over the K and V rows [0, prompt_tokens) of every layer, as\n"
    "stored), state_digest (xxh3-64 of the recurrent state after the turn; 0 for a model without recurrent\n"
    "layers), kernels, prefill_ms, decode_ms, drafted, accepted (speculative decoding's guesses, and kept),\n"
    "state_bytes and states_kept (the recurrent states the engine keeps after the turn, of every conversation).\n"
    "  -m, --model PATH       GGUF model\n"
    "      --session FILE     the turns, one JSON object per line\n" CLI_SPEC_HELP CLI_ENGINE_HELP;

typedef struct {
    int32_t *ids;
    uint32_t n;
    uint32_t n_gen;
    float temp;
    char *conversation;
} turn;

/* The conversations seen so far, each a sequence on the one engine. */
typedef struct {
    char **names;
    fkv_seq **seqs;
    size_t n;
} conversations;

/* The sequence of conversation name, opened on first use; NULL after printing why. */
static fkv_seq *conversation_seq(conversations *c, fkv_engine *e, const char *name) {
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->names[i], name)) return c->seqs[i];
    fkv_error err = {0};
    char **names = realloc(c->names, sizeof *names * (c->n + 1));
    if (names) c->names = names;
    fkv_seq **seqs = names ? realloc(c->seqs, sizeof *seqs * (c->n + 1)) : NULL;
    if (seqs) c->seqs = seqs;
    char *copy = seqs ? strdup(name) : NULL;
    fkv_seq *s = copy ? fkv_seq_open(e, NULL, &err) : NULL;
    if (!s) {
        fprintf(stderr, "flatkv replay: %s\n", copy ? err.msg : "out of memory");
        free(copy);
        return NULL;
    }
    c->names[c->n] = copy;
    c->seqs[c->n++] = s;
    return s;
}

static void conversations_free(conversations *c) {
    for (size_t i = 0; i < c->n; i++) {
        fkv_seq_free(c->seqs[i]);
        free(c->names[i]);
    }
    free(c->names);
    free(c->seqs);
}

/* Parse one session line into t; -1 after printing why. */
static int parse_turn(const fkv_model *m, const char *line, int line_no, turn *t) {
    json_error_t jerr;
    json_t *obj = json_loads(line, 0, &jerr);
    int rc = -1;
    if (!json_is_object(obj)) {
        cli_usage_error("replay", "session line %d is not a JSON object: %s", line_no, obj ? "" : jerr.text);
        goto out;
    }
    json_t *prompt = json_object_get(obj, "prompt"), *ids = json_object_get(obj, "prompt_ids");
    json_t *n = json_object_get(obj, "n"), *temp = json_object_get(obj, "temp");
    json_t *conv = json_object_get(obj, "conversation");
    t->n_gen = 32;
    t->temp = 0.0f;
    if (conv && !json_is_string(conv)) {
        cli_usage_error("replay", "session line %d: \"conversation\" must be a string", line_no);
        goto out;
    }
    if (n && (!json_is_integer(n) || json_integer_value(n) < 0 || json_integer_value(n) > 1 << 20)) {
        cli_usage_error("replay", "session line %d: \"n\" must be a non-negative integer", line_no);
        goto out;
    }
    if (temp && (!json_is_number(temp) || json_number_value(temp) < 0)) {
        cli_usage_error("replay", "session line %d: \"temp\" must be a non-negative number", line_no);
        goto out;
    }
    if (n) t->n_gen = (uint32_t)json_integer_value(n);
    if (temp) t->temp = (float)json_number_value(temp);
    if (json_is_string(prompt) && !ids) {
        int count;
        t->ids = cli_tokenize_text("replay", m, json_string_value(prompt), json_string_length(prompt), false, &count);
        if (!t->ids) goto out;
        t->n = (uint32_t)count;
    } else if (json_is_array(ids) && !prompt) {
        uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
        t->n = (uint32_t)json_array_size(ids);
        t->ids = malloc(sizeof(int32_t) * (t->n ? t->n : 1));
        for (uint32_t i = 0; i < t->n; i++) {
            json_t *v = json_array_get(ids, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) {
                cli_usage_error("replay", "session line %d: prompt_ids[%u] is not a token id of this model (0..%u)",
                                line_no, i, n_vocab - 1);
                free(t->ids);
                goto out;
            }
            t->ids[i] = (int32_t)json_integer_value(v);
        }
    } else {
        cli_usage_error("replay", "session line %d needs exactly one of \"prompt\" (a string) or \"prompt_ids\" "
                        "(an array)", line_no);
        goto out;
    }
    if (t->n == 0) {
        cli_usage_error("replay", "session line %d: the prompt has no tokens", line_no);
        free(t->ids);
        goto out;
    }
    if (!(t->conversation = strdup(conv ? json_string_value(conv) : ""))) {
        cli_usage_error("replay", "session line %d: out of memory", line_no);
        free(t->ids);
        goto out;
    }
    rc = 0;
out:
    json_decref(obj);
    return rc;
}

/* Run one turn and print its line; 0, or -1 after printing an error. */
static int run_turn(fkv_engine *e, fkv_seq *seq, const fkv_model *m, const turn *t, int turn_no,
                    const fkv_spec_params *spec, float *logits, int32_t *out) {
    fkv_error err = {0};
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = t->temp;
    fkv_sampler *smp = fkv_sampler_new(&sp, (int32_t)fkv_model_get_info(m).n_vocab);
    cli_text text = {0};
    uint32_t cached = 0;
    double t0 = cli_now_ms();
    fkv_engine_stats before = fkv_engine_get_stats(e);
    int rc = fkv_seq_prefill(seq, t->ids, t->n, logits, &cached, &err);
    double t1 = cli_now_ms();
    const uint64_t from_disk = fkv_engine_get_stats(e).disk_reused_tokens - before.disk_reused_tokens;
    fkv_gen_result res = {0};
    if (!rc) {
        fkv_gen_params gp = {.max_tokens = t->n_gen, .sampler = smp, .on_token = cli_collect_piece, .user = &text,
                             .spec = *spec};
        rc = fkv_seq_generate(seq, logits, &gp, out, &res, &err);
    }
    double t2 = cli_now_ms();
    if (rc) {
        fprintf(stderr, "flatkv replay: turn %d: %s\n", turn_no, err.msg);
    } else {
        char kv_hex[17], logits_hex[17], state_hex[17];
        json_t *gen = json_array();
        size_t clean_len; /* a model may emit bytes that are not UTF-8; JSON strings must be */
        char *clean = utf8_sanitize(text.text ? text.text : "", text.len, &clean_len);
        for (uint32_t i = 0; i < res.n_tokens; i++) json_array_append_new(gen, json_integer(out[i]));
        const fkv_engine_stats after = fkv_engine_get_stats(e);
        json_t *line = json_pack("{s:i,s:s,s:i,s:i,s:I,s:o,s:s%,s:s,s:s,s:s,s:s,s:f,s:f,s:i,s:i,s:I,s:i}", "turn",
                                 turn_no, "conversation", t->conversation, "prompt_tokens", (int)t->n, "cached_tokens",
                                 (int)cached, "disk_tokens", (json_int_t)from_disk, "generated", gen, "text",
                                 clean ? clean : "",
                                 clean ? clean_len : 0, "logits_digest",
                                 cli_hex64(res.logits_digest, logits_hex), "kv_digest",
                                 cli_hex64(fkv_seq_kv_digest(seq, t->n), kv_hex), "state_digest",
                                 cli_hex64(fkv_seq_state_digest(seq), state_hex), "kernels", fkv_kernels_name(),
                                 "prefill_ms", t1 - t0, "decode_ms", t2 - t1, "drafted", (int)res.drafted,
                                 "accepted", (int)res.accepted, "state_bytes", (json_int_t)after.state_bytes,
                                 "states_kept", (int)after.states_kept);
        free(clean);
        char *s = line ? json_dumps(line, JSON_COMPACT) : NULL;
        puts(s ? s : "{\"error\": \"out of memory\"}");
        fflush(stdout);
        free(s);
        json_decref(line);
    }
    cli_text_free(&text);
    fkv_sampler_free(smp);
    return rc;
}

int cli_replay(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"session", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'}, CLI_ENGINE_OPTIONS, CLI_SPEC_OPTIONS,
                                         {0, 0, 0, 0}};
    const char *sub = "replay", *model_path = NULL, *session = NULL;
    fkv_engine_params ep;
    fkv_error err = {0};
    if (fkv_engine_default_params(&ep, &err)) return cli_usage_error(sub, "%s", err.msg);
    cli_spec spec = cli_spec_default();
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
        if (c == 'm') {
            model_path = optarg;
        } else if (c == 's') {
            session = optarg;
        } else if (c == 'h') {
            fputs(HELP, stdout);
            return 0;
        } else {
            int handled = cli_run_option(sub, c, optarg, &ep, NULL, &spec);
            if (handled < 0) return CLI_USAGE_EXIT;
            if (handled == 0) return cli_bad_option(sub, argv);
        }
    }
    if (optind < argc) return cli_usage_error(sub, "unexpected argument '%s'", argv[optind]);
    if (!session) return cli_usage_error(sub, "--session FILE is required");
    FILE *fp = fopen(session, "r");
    if (!fp) return cli_usage_error(sub, "cannot read session file '%s'", session);
    int rc = CLI_USAGE_EXIT;
    fkv_model *m = cli_load_model(sub, model_path, &rc);
    fkv_engine *engine = m ? cli_spec_engine(sub, m, &ep, &spec, &rc) : NULL;
    if (!engine) {
        cli_spec_end(&spec);
        fkv_engine_free(engine);
        fclose(fp);
        fkv_model_free(m);
        return rc;
    }
    conversations convs = {0};
    uint32_t n_vocab = fkv_model_get_info(m).n_vocab, n_ctx = fkv_engine_n_ctx(engine);
    float *logits = malloc(sizeof(float) * n_vocab);
    int32_t *out = malloc(sizeof(int32_t) * n_ctx);
    char *line = NULL;
    size_t cap = 0;
    int line_no = 0, turn_no = 0;
    rc = 0;
    while (getline(&line, &cap, fp) > 0) {
        line_no++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        turn t;
        if (parse_turn(m, line, line_no, &t)) {
            rc = CLI_USAGE_EXIT;
            break;
        }
        if (t.n_gen > n_ctx) t.n_gen = n_ctx;
        fkv_seq *seq = conversation_seq(&convs, engine, t.conversation);
        rc = !seq || run_turn(engine, seq, m, &t, ++turn_no, &spec.p, logits, out) ? 1 : 0;
        free(t.ids);
        free(t.conversation);
        if (rc) break;
    }
    free(line);
    fclose(fp);
    free(out);
    free(logits);
    conversations_free(&convs);
    cli_spec_end(&spec);
    fkv_engine_free(engine);
    fkv_model_free(m);
    return rc;
}
