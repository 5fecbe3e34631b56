/* cli.h — what the flatkv subcommands share: strict argument parsing and the one-line error convention.
 *
 * Convention: a usage problem (unknown flag, bad number, unreadable file, invalid model) prints one line
 * "flatkv SUB: ..." to stderr and exits 2; a failure while running exits 1; success exits 0.
 */
#ifndef FKV_CLI_H
#define FKV_CLI_H

#include <getopt.h>
#include <stdint.h>

#include "flatkv.h"

#define CLI_USAGE_EXIT 2

/* Print "flatkv SUB: message" and return CLI_USAGE_EXIT (for `return cli_usage_error(...)`). */
int cli_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "flatkv SUB: <the failure's sentence>" and return the exit status its kind maps to, in the one table that
 * maps them (cli.c): CLI_USAGE_EXIT for bad input and what flatkv does not compute, 1 for a failure while running. */
int cli_fail(const char *sub, const fkv_error *err);

/* Parse optarg strictly (the whole string, in range) or print the flag's name and return -1. */
int cli_parse_u32(const char *sub, const char *flag, const char *s, uint32_t min, uint32_t max, uint32_t *out);
int cli_parse_u64(const char *sub, const char *flag, const char *s, uint64_t *out);
int cli_parse_float(const char *sub, const char *flag, const char *s, float min, float max, float *out);

/* The message for getopt_long's '?' or ':' return (unknown flag or missing argument). */
int cli_bad_option(const char *sub, char *const argv[]);

/* Options shared by every subcommand that runs the engine, for getopt_long tables:
 *   --threads N  --ctx N  --kv-type auto|f16|f32|q8_0|q4_0  --no-prefix-cache  --prefill-rows R  --cache-min K
 *   --kernels NAME  --kv-block N  --kv-mem BYTES  --swa-full  --swa-grid N  --kv-dir DIR  --kv-disk BYTES  --mlock
 *   --experts auto|map|pack  --state-grid N  --kv-key FILE
 * (--mlock locks the model when cli_engine_new makes the engine; --experts sets FLATKV_EXPERTS for the model's load) */
enum { CLI_O_THREADS = 1000, CLI_O_CTX, CLI_O_KV_TYPE, CLI_O_NO_CACHE, CLI_O_PREFILL_ROWS, CLI_O_CACHE_MIN,
       CLI_O_KERNELS, CLI_O_KV_BLOCK, CLI_O_KV_MEM, CLI_O_SWA_FULL, CLI_O_SWA_GRID, CLI_O_KV_DIR, CLI_O_KV_DISK,
       CLI_O_MLOCK, CLI_O_EXPERTS, CLI_O_STATE_GRID, CLI_O_KV_KEY };
#define CLI_ENGINE_OPTIONS                                                                                      \
    {"threads", required_argument, 0, CLI_O_THREADS}, {"ctx", required_argument, 0, CLI_O_CTX},                \
        {"kv-type", required_argument, 0, CLI_O_KV_TYPE}, {"no-prefix-cache", no_argument, 0, CLI_O_NO_CACHE}, \
        {"prefill-rows", required_argument, 0, CLI_O_PREFILL_ROWS},                                            \
        {"cache-min", required_argument, 0, CLI_O_CACHE_MIN}, {"kernels", required_argument, 0, CLI_O_KERNELS}, \
        {"kv-block", required_argument, 0, CLI_O_KV_BLOCK}, {"kv-mem", required_argument, 0, CLI_O_KV_MEM},     \
        {"swa-full", no_argument, 0, CLI_O_SWA_FULL}, {"swa-grid", required_argument, 0, CLI_O_SWA_GRID},       \
        {"kv-dir", required_argument, 0, CLI_O_KV_DIR}, {"kv-disk", required_argument, 0, CLI_O_KV_DISK},    \
        {"mlock", no_argument, 0, CLI_O_MLOCK}, {"experts", required_argument, 0, CLI_O_EXPERTS},             \
        {"state-grid", required_argument, 0, CLI_O_STATE_GRID}, {"kv-key", required_argument, 0, CLI_O_KV_KEY}
#define CLI_ENGINE_HELP                                                                                      \
    "      --threads N        threads (default: all cores)\n"                                                 \
    "      --ctx N            context positions (default: the model's)\n"                                     \
    "      --kv-type TYPE     K/V storage: auto (default: q8_0 where heads are multiples of 32, else f16),\n" \
    "                         f16, f32, q8_0 or q4_0 (blocks of 32 per head)\n"                             \
    "      --no-prefix-cache  prefill every prompt from position 0 (FLATKV_PREFIX_CACHE=0)\n"                 \
    "      --prefill-rows R   prefill chunk grid in positions (FLATKV_PREFILL_ROWS)\n"                        \
    "      --cache-min K      smallest prefix reuse worth taking (FLATKV_PREFIX_CACHE_MIN, default 1)\n"      \
    "      --kernels NAME     ref, avx2, avx512 or amx: force one kernel variant, same bits (FLATKV_KERNELS;\n"  \
    "                         default: the best this CPU runs)\n"                                              \
    "      --kv-block N       KV block size in positions, a multiple of 32 (default 64)\n"                    \
    "      --kv-mem BYTES     memory for K/V blocks (default: a quarter of RAM, at most 16 contexts)\n"       \
    "      --swa-full         sliding-window layers keep every row (default: only the rows a resume can read,\n" \
    "                         for the running windows, the last prompt's and reply's ends and a grid)\n"       \
    "      --swa-grid N       window layers' resume points every N positions (default 8 windows; 0: none)\n"  \
    "      --state-grid N     recurrent layers' states kept every N positions (rounded up to the prefill\n"  \
    "                         grid; default: their bytes at most half the K/V between them; 0: none but the\n" \
    "                         prompts' and replies' ends)\n"                                                     \
    "      --kv-dir DIR       disk tier: full KV blocks kept in DIR, across restarts and processes sharing it\n" \
    "      --kv-disk BYTES    most bytes of block files in DIR (default: a quarter of its free space)\n"        \
    "      --kv-key FILE      authenticate DIR's files with the secret in FILE (mode 0600, shared by a fleet):\n" \
    "                         files written without it are refused as forged (default: checksums only)\n"     \
    "      --mlock            keep the whole model resident (experts are otherwise paged in from the file)\n"  \
    "      --experts WHERE    a mixture's experts: pack (in memory, packed for the kernels), map (read from the\n" \
    "                         file) or auto (default: pack when the model fits in 3/4 of free memory;\n"        \
    "                         FLATKV_EXPERTS)\n"
/* Sampling options for getopt_long tables: --temp --top-k --top-p --min-p --repeat-penalty --seed. */
enum { CLI_O_TEMP = 1100, CLI_O_TOP_K, CLI_O_TOP_P, CLI_O_MIN_P, CLI_O_REPEAT_PENALTY, CLI_O_SEED };
#define CLI_SAMPLING_OPTIONS                                                                                  \
    {"temp", required_argument, 0, CLI_O_TEMP}, {"top-k", required_argument, 0, CLI_O_TOP_K},                \
        {"top-p", required_argument, 0, CLI_O_TOP_P}, {"min-p", required_argument, 0, CLI_O_MIN_P},          \
        {"repeat-penalty", required_argument, 0, CLI_O_REPEAT_PENALTY}, {"seed", required_argument, 0, CLI_O_SEED}
#define CLI_SAMPLING_HELP                                                                                   \
    "      --temp T           temperature; 0 = greedy (default 0.8)\n"                                        \
    "      --top-k K          keep the K most likely tokens; 0 = off (default 40)\n"                          \
    "      --top-p P          keep the smallest set with probability >= P; 1 = off (default 0.95)\n"          \
    "      --min-p P          drop tokens below P x the top probability; 0 = off (default 0.05)\n"           \
    "      --repeat-penalty R penalize the last 64 tokens; 1 = off (default 1)\n"                            \
    "      --seed S           random seed (default 0)\n"

/* Speculative decoding options for getopt_long tables: --spec MODE --draft-max N --model-draft PATH. */
#define CLI_STR_(x) #x
#define CLI_STR(x) CLI_STR_(x) /* a number's macro as text, for help strings */
enum { CLI_O_SPEC = 1200, CLI_O_DRAFT_MAX, CLI_O_MODEL_DRAFT };
#define CLI_SPEC_OPTIONS                                                                                     \
    {"spec", required_argument, 0, CLI_O_SPEC}, {"draft-max", required_argument, 0, CLI_O_DRAFT_MAX},       \
        {"model-draft", required_argument, 0, CLI_O_MODEL_DRAFT}
#define CLI_SPEC_HELP                                                                                       \
    "      --spec MODE        speculative decoding, same output: off, lookup (guesses from the context's own\n" \
    "                         tokens), draft (a draft model's; the default with --model-draft), mtp (the\n"   \
    "                         model's own NextN block's, where its file has one) or auto (mtp where the file\n" \
    "                         has the block, else lookup; off where a step's guesses cost more than they keep,\n" \
    "                         measured at start). Default: " CLI_SPEC_DEFAULT_NAME "\n" \
    "      --draft-max N      most tokens guessed a step, 1..16 (default " CLI_STR(FKV_SPEC_DEFAULT_DRAFT) ")\n"     \
    "      --model-draft PATH the draft model: a GGUF with the same vocabulary\n"
/* The default mode (bench/spec measures it). */
#define CLI_SPEC_DEFAULT FKV_SPEC_LOOKUP
#define CLI_SPEC_DEFAULT_NAME "lookup"

/* What the speculative options ask, and the draft model and engine they load (cli_spec_start). */
typedef struct {
    fkv_spec_params p;
    bool mode_given;
    const char *model_path;
    fkv_model *model;
} cli_spec;
/* Defaults: CLI_SPEC_DEFAULT, FKV_SPEC_DEFAULT_DRAFT. */
cli_spec cli_spec_default(void);
/* Apply option c (CLI_O_SPEC...) to s: 1 when handled, 0 when c is not one, -1 after printing a bad value. */
int cli_spec_option(const char *sub, int c, const char *arg, cli_spec *s);
/* Load the draft model and make its engine (ep's parameters, without a disk tier) when --model-draft names one (the
 * server's requests may ask for it whatever the default), and ask ep for the NextN block with --spec mtp (so before
 * the target's engine is made from ep): 0, or the exit status after printing why (--spec draft without --model-draft,
 * another vocabulary than target's). */
int cli_spec_start(const char *sub, const fkv_model *target, fkv_engine_params *ep, cli_spec *s);
/* cli_spec_start, then the target's engine (cli_engine_new) and --spec auto chosen for it (fkv_spec_auto, said on
 * stderr): the engine, or NULL with *rc the exit status. */
fkv_engine *cli_spec_engine(const char *sub, const fkv_model *m, fkv_engine_params *ep, cli_spec *s, int *rc);
void cli_spec_end(cli_spec *s);

/* Apply option c to the engine (CLI_O_THREADS...), sampling (CLI_O_TEMP...) or speculative (CLI_O_SPEC...)
 * parameters: 1 when handled, 0 when c is none, -1 after printing a bad value. sp and spec may be NULL for commands
 * that do not sample or speculate. */
int cli_run_option(const char *sub, int c, const char *arg, fkv_engine_params *p, fkv_sampler_params *sp,
                   cli_spec *spec);

/* Apply engine option c (one of CLI_O_*) to p: 1 when handled, 0 when c is not one, -1 after printing a bad
 * value. Flags beat the environment because p starts from fkv_engine_default_params. */
int cli_engine_option(const char *sub, int c, const char *arg, fkv_engine_params *p);
/* The engine of p for model m, or NULL after printing why (*rc: the exit status, cli_fail's). */
fkv_engine *cli_engine_new(const char *sub, const fkv_model *m, const fkv_engine_params *p, int *rc);

/* Generated text gathered piece by piece (an fkv_gen_params.on_token callback: cli_collect_piece). */
typedef struct {
    char *text;
    size_t len, cap;
} cli_text;
bool cli_collect_piece(void *text, int32_t id, const char *piece, int len);
void cli_text_free(cli_text *t);

/* Lowercase hex of a 64-bit digest into buf[17]. */
const char *cli_hex64(uint64_t v, char buf[17]);

/* Milliseconds on a monotonic clock. */
double cli_now_ms(void);

/* Whole file into a malloc'd NUL-terminated buffer; NULL with errno set. */
char *cli_read_file(const char *path, size_t *len);

/* Load a model, or print why not (one line) and return NULL (*rc: the exit status, cli_fail's). */
fkv_model *cli_load_model(const char *sub, const char *path, int *rc);
/* The prompt text from -p TEXT or -f FILE (exactly one); malloc'd; NULL after printing why. */
char *cli_prompt_text(const char *sub, const char *text, const char *file, size_t *len);
/* Encode text with BOS (when the model uses one); malloc'd ids; NULL after printing why. */
int32_t *cli_tokenize_text(const char *sub, const fkv_model *m, const char *text, size_t len, bool parse_special,
                           int *n_ids);

int cli_generate(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_gen_model(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_replay(int argc, char **argv);
int cli_serve(int argc, char **argv);

#endif
