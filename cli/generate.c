/* flatkv generate — continue a prompt: prefill it, then decode one token at a time. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "utf8.h"

static const char HELP[] =
    "usage: flatkv generate -m MODEL (-p TEXT | -f FILE | --prompt-ids FILE) [options]\n"
    "\n"
    "Continue the prompt and print the continuation. Stops after N tokens, at end of generation, or at\n"
    "the end of the context.\n"
    "  -m, --model PATH       GGUF model\n"
    "  -p, --prompt TEXT      the prompt\n"
    "  -f, --file PATH        read the prompt from a file\n"
    "      --prompt-ids FILE  the prompt as token ids: a JSON array of integers (no BOS is added)\n"
    "      --logits FILE      write the float32 logits of every generated step, row after row (n_vocab each)\n"
    "      --grammar FILE     the output follows this GBNF grammar (llama.cpp's syntax, root rule 'root')\n"
    "      --json-schema FILE the output is JSON valid against this JSON Schema\n"
    "  -n, --n-predict N      tokens to generate (default 128)\n"
    CLI_SAMPLING_HELP
    "      --json             print one JSON object: prompt_tokens, cached_tokens (reused, e.g. from --kv-dir),\n"
    "                         tokens, text, logits_digest, kernels, prefill_ms, decode_ms, spec, drafted,\n"
    "                         accepted (tokens guessed, and kept)\n" CLI_SPEC_HELP CLI_ENGINE_HELP;

typedef struct {
    const char *model_path, *text, *file, *ids_file, *logits_file, *grammar_file, *schema_file;
    uint32_t n_predict;
    fkv_sampler_params sp;
    fkv_engine_params engine;
    cli_spec spec;
    int json;
} gen_args;

static int parse_args(int argc, char **argv, gen_args *a) {
    enum { O_JSON = 256, O_IDS, O_LOGITS, O_GRAMMAR, O_SCHEMA };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},  {"prompt", required_argument, 0, 'p'},
        {"file", required_argument, 0, 'f'},   {"n-predict", required_argument, 0, 'n'},
        CLI_SAMPLING_OPTIONS,
        {"json", no_argument, 0, O_JSON}, {"prompt-ids", required_argument, 0, O_IDS},
        {"logits", required_argument, 0, O_LOGITS}, {"grammar", required_argument, 0, O_GRAMMAR},
        {"json-schema", required_argument, 0, O_SCHEMA}, CLI_ENGINE_OPTIONS, CLI_SPEC_OPTIONS,
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *sub = "generate";
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:p:f:n:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': a->model_path = optarg; break;
        case 'p': a->text = optarg; break;
        case 'f': a->file = optarg; break;
        case 'n': bad = cli_parse_u32(sub, "-n", optarg, 0, UINT32_MAX, &a->n_predict); break;
        case O_JSON: a->json = 1; break;
        case O_IDS: a->ids_file = optarg; break;
        case O_LOGITS: a->logits_file = optarg; break;
        case O_GRAMMAR: a->grammar_file = optarg; break;
        case O_SCHEMA: a->schema_file = optarg; break;
        case 'h': fputs(HELP, stdout); return 0;
        default:
            bad = cli_run_option(sub, c, optarg, &a->engine, &a->sp, &a->spec);
            if (bad == 0) return cli_bad_option(sub, argv);
            bad = bad < 0;
        }
        if (bad) return CLI_USAGE_EXIT;
    }
    if (optind < argc) return cli_usage_error(sub, "unexpected argument '%s'", argv[optind]);
    if (a->grammar_file && a->schema_file) return cli_usage_error(sub, "give --grammar or --json-schema, not both");
    return -1; /* parsed: go on */
}

/* The grammar of --grammar FILE (GBNF) or --json-schema FILE, or NULL with *failed false when neither is given;
 * NULL with *failed true after printing why. */
static fkv_grammar *load_grammar(const gen_args *a, const fkv_model *m, bool *failed) {
    const char *path = a->grammar_file ? a->grammar_file : a->schema_file;
    *failed = false;
    if (!path) return NULL;
    *failed = true;
    size_t len;
    char *text = cli_read_file(path, &len), *gbnf = NULL;
    if (!text) {
        cli_usage_error("generate", "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    fkv_error err = {0};
    if (a->schema_file && !(gbnf = fkv_json_schema_gbnf(text, len, "", &err))) {
        cli_usage_error("generate", "--json-schema %s: %s", path, err.msg);
        free(text);
        return NULL;
    }
    fkv_grammar *g = fkv_grammar_new(m, gbnf ? gbnf : text, gbnf ? strlen(gbnf) : len, &err);
    if (!g) cli_usage_error("generate", "%s %s: %s", a->grammar_file ? "--grammar" : "--json-schema", path, err.msg);
    free(gbnf);
    free(text);
    *failed = !g;
    return g;
}

/* What the generation's callbacks write: the text (first, for cli_collect_piece) and the logits file. */
typedef struct {
    cli_text text;
    FILE *logits;
} gen_out;

static bool write_logits(void *user, const float *logits, uint32_t n_vocab) {
    gen_out *o = user;
    return !o->logits || fwrite(logits, sizeof(float), n_vocab, o->logits) == n_vocab;
}

/* The prompt ids of a JSON array file, each checked against the vocabulary; NULL after a usage message. */
static int32_t *read_prompt_ids(const char *path, uint32_t n_vocab, int *n) {
    json_error_t jerr;
    json_t *arr = json_load_file(path, 0, &jerr);
    if (!arr || !json_is_array(arr)) {
        cli_usage_error("generate", "--prompt-ids %s: not a JSON array of ids (%s)", path, arr ? "not an array" : jerr.text);
        json_decref(arr);
        return NULL;
    }
    size_t len = json_array_size(arr);
    int32_t *ids = malloc(sizeof(int32_t) * (len ? len : 1));
    for (size_t i = 0; ids && i < len; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (json_int_t)n_vocab) {
            cli_usage_error("generate", "--prompt-ids %s: element %zu is not a token id below %u", path, i, n_vocab);
            free(ids);
            ids = NULL;
            break;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    json_decref(arr);
    *n = (int)len;
    return ids;
}

/* Pieces go straight to the terminal as they come. */
static bool print_piece(void *user, int32_t id, const char *piece, int len) {
    (void)user;
    (void)id;
    fwrite(piece, 1, (size_t)len, stdout);
    fflush(stdout);
    return true;
}

int cli_generate(int argc, char **argv) {
    gen_args a = {.n_predict = 128, .sp = fkv_sampler_default_params(), .spec = cli_spec_default()};
    fkv_error err = {0};
    if (fkv_engine_default_params(&a.engine, &err)) return cli_usage_error("generate", "%s", err.msg);
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    size_t len;
    char *prompt = NULL;
    if (a.ids_file && (a.text || a.file))
        return cli_usage_error("generate", "give one of -p TEXT, -f FILE or --prompt-ids FILE");
    if (!a.ids_file && !(prompt = cli_prompt_text("generate", a.text, a.file, &len))) return CLI_USAGE_EXIT;
    rc = CLI_USAGE_EXIT;
    fkv_model *m = cli_load_model("generate", a.model_path, &rc);
    int n_prompt = 0;
    int32_t *ids = !m              ? NULL
                   : a.ids_file    ? read_prompt_ids(a.ids_file, fkv_model_get_info(m).n_vocab, &n_prompt)
                                   : cli_tokenize_text("generate", m, prompt, len, false, &n_prompt);
    free(prompt);
    if (!ids) {
        fkv_model_free(m);
        return rc;
    }
    fkv_engine *engine = NULL;
    fkv_seq *seq = NULL;
    bool bad_grammar;
    fkv_grammar *grammar = load_grammar(&a, m, &bad_grammar);
    if (bad_grammar) {
        free(ids);
        fkv_model_free(m);
        return CLI_USAGE_EXIT;
    }
    fkv_sampler *smp = NULL;
    float *logits = NULL;
    int32_t *out = NULL;
    gen_out o = {{0}, NULL};
    rc = 1;
    if (a.logits_file && !(o.logits = fopen(a.logits_file, "wb"))) {
        rc = cli_usage_error("generate", "cannot write --logits %s: %s", a.logits_file, strerror(errno));
        goto out;
    }
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    if (!(engine = cli_spec_engine("generate", m, &a.engine, &a.spec, &rc))) goto out;
    rc = 1;
    if (!(seq = fkv_seq_open(engine, NULL, &err))) {
        rc = cli_fail("generate", &err);
        goto out;
    }
    if (n_prompt == 0 || (uint32_t)n_prompt > fkv_seq_n_ctx(seq)) {
        rc = cli_usage_error("generate", "the prompt has %d tokens; it must have 1 to %u", n_prompt,
                             fkv_seq_n_ctx(seq));
        goto out;
    }
    smp = fkv_sampler_new(&a.sp, (int32_t)n_vocab);
    logits = malloc(sizeof(float) * n_vocab);
    out = malloc(sizeof(int32_t) * (a.n_predict ? a.n_predict : 1));
    if (!smp || !logits || !out) {
        fprintf(stderr, "flatkv generate: out of memory\n");
        goto out;
    }
    double t0 = cli_now_ms();
    uint32_t cached = 0;
    if (fkv_seq_prefill(seq, ids, (uint32_t)n_prompt, logits, &cached, &err)) {
        rc = cli_fail("generate", &err);
        goto out;
    }
    double t1 = cli_now_ms();
    fkv_gen_params gp = {.max_tokens = a.n_predict, .sampler = smp, .on_token = a.json ? cli_collect_piece : print_piece,
                         .user = &o, .on_logits = a.logits_file ? write_logits : NULL, .grammar = grammar,
                         .spec = a.spec.p};
    fkv_gen_result res;
    if (fkv_seq_generate(seq, logits, &gp, out, &res, &err)) {
        fputc('\n', stderr);
        rc = cli_fail("generate", &err);
        goto out;
    }
    if (o.logits && (fclose(o.logits) != 0 || res.cancelled)) {
        o.logits = NULL;
        fprintf(stderr, "\nflatkv generate: writing --logits %s failed\n", a.logits_file);
        goto out;
    }
    o.logits = NULL;
    double t2 = cli_now_ms();
    if (a.json) {
        char hex[17];
        json_t *tokens = json_array();
        size_t clean_len; /* a model may emit bytes that are not UTF-8; JSON strings must be */
        char *clean = utf8_sanitize(o.text.text ? o.text.text : "", o.text.len, &clean_len);
        for (uint32_t i = 0; i < res.n_tokens; i++) json_array_append_new(tokens, json_integer(out[i]));
        json_t *obj = json_pack("{s:i,s:i,s:o,s:s%,s:s,s:s,s:f,s:f,s:s,s:i,s:i}", "prompt_tokens", n_prompt,
                                "cached_tokens", (int)cached, "tokens", tokens, "text", clean ? clean : "",
                                clean ? clean_len : 0, "logits_digest", cli_hex64(res.logits_digest, hex), "kernels",
                                fkv_kernels_name(), "prefill_ms", t1 - t0, "decode_ms", t2 - t1, "spec",
                                fkv_spec_mode_name(a.spec.p.mode), "drafted", (int)res.drafted, "accepted",
                                (int)res.accepted);
        free(clean);
        char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
        puts(s ? s : "{\"error\": \"out of memory\"}");
        free(s);
        json_decref(obj);
    } else {
        putchar('\n');
        fprintf(stderr, "flatkv generate: prompt %d tokens in %.1f ms (%.1f tok/s), generated %u in %.1f ms",
                n_prompt, t1 - t0, n_prompt / ((t1 - t0) / 1e3), res.n_tokens, t2 - t1);
        if (res.drafted) fprintf(stderr, " (guessed %u, kept %u)", res.drafted, res.accepted);
        fputc('\n', stderr);
    }
    rc = 0;
out:
    if (o.logits) fclose(o.logits);
    cli_text_free(&o.text);
    free(out);
    free(logits);
    fkv_sampler_free(smp);
    fkv_seq_free(seq);
    cli_spec_end(&a.spec);
    fkv_engine_free(engine);
    fkv_grammar_free(grammar);
    free(ids);
    fkv_model_free(m);
    return rc;
}
