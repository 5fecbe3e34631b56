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

/* Parse optarg strictly (the whole string, in range) or print the flag's name and return -1. */
int cli_parse_u32(const char *sub, const char *flag, const char *s, uint32_t min, uint32_t max, uint32_t *out);
int cli_parse_u64(const char *sub, const char *flag, const char *s, uint64_t *out);
int cli_parse_float(const char *sub, const char *flag, const char *s, float min, float max, float *out);

/* The message for getopt_long's '?' or ':' return (unknown flag or missing argument). */
int cli_bad_option(const char *sub, char *const argv[]);

/* Milliseconds on a monotonic clock. */
double cli_now_ms(void);

/* Whole file into a malloc'd NUL-terminated buffer; NULL with errno set. */
char *cli_read_file(const char *path, size_t *len);

/* Load a model, or print why not (one line) and return NULL. */
fkv_model *cli_load_model(const char *sub, const char *path);
/* The prompt text from -p TEXT or -f FILE (exactly one); malloc'd; NULL after printing why. */
char *cli_prompt_text(const char *sub, const char *text, const char *file, size_t *len);
/* Encode text with BOS (when the model uses one); malloc'd ids; NULL after printing why. */
int32_t *cli_tokenize_text(const char *sub, const fkv_model *m, const char *text, size_t len, int *n_ids);

int cli_generate(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_gen_model(int argc, char **argv);

#endif
