/* flatkv — command-line entry: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "version.h" /* generated at build time: cmake/version.cmake */

static const char USAGE[] =
    "usage: flatkv COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  generate   continue a prompt with a GGUF model\n"
    "  chat       an interactive conversation that reuses its KV turn after turn\n"
    "  replay     replay a conversation from a JSONL session file, with per-turn cache and digests\n"
    "  serve      the OpenAI-compatible HTTP server\n"
    "  tokenize   print the token ids of a text\n"
    "  gen-model  write a llama model of a given shape with random weights (for benchmarks and tests)\n"
    "\n"
    "Run 'flatkv COMMAND --help' for a command's options; 'flatkv --version' prints the version.\n";

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE_EXIT : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        puts(FKV_VERSION_STRING);
        return 0;
    }
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {{"generate", cli_generate}, {"chat", cli_chat}, {"replay", cli_replay}, {"serve", cli_serve}, {"tokenize", cli_tokenize}, {"gen-model", cli_gen_model}};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "flatkv: unknown command '%s' (see flatkv --help)\n", argv[1]);
    return CLI_USAGE_EXIT;
}
