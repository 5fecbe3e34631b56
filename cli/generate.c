/* flatkv generate — continue a prompt: prefill it, then decode one token at a time. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* the digest state on the stack */
#include <xxhash.h>

#include "cli.h"

static const char HELP[] =
    "usage: flatkv generate -m MODEL (-p TEXT | -f FILE) [options]\n"
    "\n"
    "Continue the prompt and print the continuation. Stops after N tokens, at end of generation, or at\n"
    "the end of the context.\n"
    "  -m, --model PATH       GGUF model\n"
    "  -p, --prompt TEXT      the prompt\n"
    "  -f, --file PATH        read the prompt from a file\n"
    "  -n, --n-predict N      tokens to generate (default 128)\n"
    "      --temp T           temperature; 0 = greedy (default 0.8)\n"
    "      --top-k K          keep the K most likely tokens; 0 = off (default 40)\n"
    "      --top-p P          keep the smallest set with probability >= P; 1 = off (default 0.95)\n"
    "      --min-p P          drop tokens below P x the top probability; 0 = off (default 0.05)\n"
    "      --repeat-penalty R penalize the last 64 tokens; 1 = off (default 1)\n"
    "      --seed S           random seed (default 0)\n"
    "      --threads N        threads (default: all cores)\n"
    "      --ctx N            context positions (default: the model's)\n"
    "      --kv-type TYPE     K/V storage: f16 (default) or f32\n"
    "      --json             print one JSON object: prompt_tokens, tokens, text, logits_digest,\n"
    "                         prefill_ms, decode_ms\n";

typedef struct {
    const char *model_path, *text, *file;
    uint32_t n_predict;
    fkv_sampler_params sp;
    fkv_ctx_params cp;
    int json;
} gen_args;

static int parse_args(int argc, char **argv, gen_args *a) {
    enum { O_TEMP = 256, O_TOPK, O_TOPP, O_MINP, O_REP, O_SEED, O_THREADS, O_CTX, O_KV, O_JSON };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},  {"prompt", required_argument, 0, 'p'},
        {"file", required_argument, 0, 'f'},   {"n-predict", required_argument, 0, 'n'},
        {"temp", required_argument, 0, O_TEMP}, {"top-k", required_argument, 0, O_TOPK},
        {"top-p", required_argument, 0, O_TOPP}, {"min-p", required_argument, 0, O_MINP},
        {"repeat-penalty", required_argument, 0, O_REP}, {"seed", required_argument, 0, O_SEED},
        {"threads", required_argument, 0, O_THREADS}, {"ctx", required_argument, 0, O_CTX},
        {"kv-type", required_argument, 0, O_KV}, {"json", no_argument, 0, O_JSON},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *sub = "generate";
    int c;
    uint32_t u;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:p:f:n:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': a->model_path = optarg; break;
        case 'p': a->text = optarg; break;
        case 'f': a->file = optarg; break;
        case 'n': bad = cli_parse_u32(sub, "-n", optarg, 0, UINT32_MAX, &a->n_predict); break;
        case O_TEMP: bad = cli_parse_float(sub, "--temp", optarg, 0.0f, 100.0f, &a->sp.temp); break;
        case O_TOPK:
            bad = cli_parse_u32(sub, "--top-k", optarg, 0, INT32_MAX, &u);
            a->sp.top_k = (int32_t)u;
            break;
        case O_TOPP: bad = cli_parse_float(sub, "--top-p", optarg, 0.0f, 1.0f, &a->sp.top_p); break;
        case O_MINP: bad = cli_parse_float(sub, "--min-p", optarg, 0.0f, 1.0f, &a->sp.min_p); break;
        case O_REP: bad = cli_parse_float(sub, "--repeat-penalty", optarg, 0.01f, 100.0f, &a->sp.repeat_penalty); break;
        case O_SEED: bad = cli_parse_u64(sub, "--seed", optarg, &a->sp.seed); break;
        case O_THREADS:
            bad = cli_parse_u32(sub, "--threads", optarg, 1, 1024, &u);
            a->cp.n_threads = (int)u;
            break;
        case O_CTX: bad = cli_parse_u32(sub, "--ctx", optarg, 1, 1u << 24, &a->cp.n_ctx); break;
        case O_KV:
            if (!strcmp(optarg, "f16"))
                a->cp.kv_type = FKV_KV_F16;
            else if (!strcmp(optarg, "f32"))
                a->cp.kv_type = FKV_KV_F32;
            else
                bad = cli_usage_error(sub, "--kv-type must be f16 or f32, got '%s'", optarg);
            break;
        case O_JSON: a->json = 1; break;
        case 'h': fputs(HELP, stdout); return 0;
        default: return cli_bad_option(sub, argv);
        }
        if (bad) return CLI_USAGE_EXIT;
    }
    if (optind < argc) return cli_usage_error(sub, "unexpected argument '%s'", argv[optind]);
    return -1; /* parsed: go on */
}

/* Print the json summary of a finished generation. */
static void print_json(int n_prompt, const int32_t *out, int n_out, const char *text, size_t text_len,
                       uint64_t digest, double prefill_ms, double decode_ms) {
    json_t *tokens = json_array();
    for (int i = 0; i < n_out; i++) json_array_append_new(tokens, json_integer(out[i]));
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)digest);
    json_t *obj = json_pack("{s:i,s:o,s:s%,s:s,s:f,s:f}", "prompt_tokens", n_prompt, "tokens", tokens, "text",
                            text, text_len, "logits_digest", hex, "prefill_ms", prefill_ms, "decode_ms", decode_ms);
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    puts(s ? s : "{}");
    free(s);
    json_decref(obj);
}

int cli_generate(int argc, char **argv) {
    gen_args a = {.n_predict = 128, .sp = fkv_sampler_default_params(), .cp = fkv_ctx_default_params()};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    size_t len;
    char *prompt = cli_prompt_text("generate", a.text, a.file, &len);
    if (!prompt) return CLI_USAGE_EXIT;
    fkv_model *m = cli_load_model("generate", a.model_path);
    int n_prompt = 0;
    int32_t *ids = m ? cli_tokenize_text("generate", m, prompt, len, &n_prompt) : NULL;
    free(prompt);
    if (!ids) {
        fkv_model_free(m);
        return CLI_USAGE_EXIT;
    }
    fkv_error err = {{0}};
    fkv_ctx *ctx = NULL;
    fkv_sampler *smp = NULL;
    float *logits = NULL;
    int32_t *history = NULL;
    char *text = NULL;
    rc = 1;
    const uint32_t n_vocab = fkv_model_get_info(m).n_vocab;
    if (n_prompt == 0) {
        rc = cli_usage_error("generate", "the prompt has no tokens");
        goto out;
    }
    if (!(ctx = fkv_ctx_new(m, &a.cp, &err))) {
        fprintf(stderr, "flatkv generate: %s\n", err.msg);
        goto out;
    }
    const uint32_t n_ctx = fkv_ctx_n_ctx(ctx);
    if ((uint32_t)n_prompt > n_ctx) {
        rc = cli_usage_error("generate", "the prompt has %d tokens, more than the context of %u", n_prompt, n_ctx);
        goto out;
    }
    uint32_t n_max = a.n_predict < n_ctx - (uint32_t)n_prompt + 1 ? a.n_predict : n_ctx - (uint32_t)n_prompt + 1;
    smp = fkv_sampler_new(&a.sp, (int32_t)n_vocab);
    logits = malloc(sizeof(float) * n_vocab);
    history = malloc(sizeof(int32_t) * ((size_t)n_prompt + n_max + 1));
    size_t text_cap = 256 + (size_t)n_max * 64, text_len = 0;
    text = a.json ? malloc(text_cap) : NULL;
    if (!smp || !logits || !history || (a.json && !text)) {
        fprintf(stderr, "flatkv generate: out of memory\n");
        goto out;
    }
    memcpy(history, ids, sizeof(int32_t) * (size_t)n_prompt);

    XXH3_state_t digest;
    XXH3_64bits_reset(&digest);
    double t0 = cli_now_ms();
    if (fkv_eval(ctx, ids, (uint32_t)n_prompt, 0, 1, logits, &err)) {
        fprintf(stderr, "flatkv generate: %s\n", err.msg);
        goto out;
    }
    double t1 = cli_now_ms();
    int n_hist = n_prompt, n_out = 0;
    for (uint32_t step = 0; step < n_max; step++) {
        XXH3_64bits_update(&digest, logits, sizeof(float) * n_vocab);
        int32_t id = fkv_sampler_sample(smp, logits, history, n_hist);
        history[n_hist++] = id;
        n_out++;
        if (fkv_token_is_eog(m, id)) break;
        char piece[256];
        int plen = fkv_token_piece(m, history[n_hist - 2], id, piece, sizeof piece);
        if (plen > (int)sizeof piece) plen = (int)sizeof piece;
        if (a.json) {
            if (text_len + (size_t)plen + 1 > text_cap) {
                char *grown = realloc(text, text_cap = 2 * text_cap + (size_t)plen);
                if (!grown) break;
                text = grown;
            }
            memcpy(text + text_len, piece, (size_t)plen);
            text_len += (size_t)plen;
        } else {
            fwrite(piece, 1, (size_t)plen, stdout);
            fflush(stdout);
        }
        /* The last step needs no logits, and a full context has no room for its token. */
        if (step + 1 == n_max || (uint32_t)(n_hist - 1) >= n_ctx) break;
        if (fkv_eval(ctx, &id, 1, (uint32_t)(n_hist - 1), 1, logits, &err)) {
            fprintf(stderr, "\nflatkv generate: %s\n", err.msg);
                goto out;
        }
    }
    double t2 = cli_now_ms();
    uint64_t logits_digest = XXH3_64bits_digest(&digest);
    if (a.json) {
        text[text_len] = 0;
        print_json(n_prompt, history + n_prompt, n_out, text, text_len, logits_digest, t1 - t0, t2 - t1);
    } else {
        putchar('\n');
        fprintf(stderr, "flatkv generate: prompt %d tokens in %.1f ms (%.1f tok/s), generated %d in %.1f ms (%.1f tok/s)\n",
                n_prompt, t1 - t0, n_prompt / ((t1 - t0) / 1e3), n_out, t2 - t1,
                n_out > 1 ? (n_out - 1) / ((t2 - t1) / 1e3) : 0.0);
    }
    rc = 0;
out:
    free(text);
    free(history);
    free(logits);
    fkv_sampler_free(smp);
    fkv_ctx_free(ctx);
    free(ids);
    fkv_model_free(m);
    return rc;
}
