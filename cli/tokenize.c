/* flatkv tokenize — the ids of a text, as generate would feed them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char HELP[] =
    "usage: flatkv tokenize -m MODEL (-p TEXT | -f FILE) [--parse-special] [--json]\n"
    "\n"
    "Print the token ids of the text (BOS first when the model uses one), one line, space-separated.\n"
    "  -m, --model PATH   GGUF model (its tokenizer is used)\n"
    "  -p, --prompt TEXT  the text\n"
    "  -f, --file PATH    read the text from a file\n"
    "      --parse-special  control-token texts (\"<s>\", \"<|im_end|>\") become their tokens, as llama.cpp's\n"
    "                     parse_special = true; without it they are text (user-defined tokens are split\n"
    "                     out either way, as in llama.cpp)\n"
    "      --json         print {\"tokens\": [...]}\n";

int cli_tokenize(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"prompt", required_argument, 0, 'p'},
                                         {"file", required_argument, 0, 'f'},  {"json", no_argument, 0, 'j'}, {"parse-special", no_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *model_path = NULL, *text = NULL, *file = NULL;
    int json = 0, parse_special = 0, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:p:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'p': text = optarg; break;
        case 'f': file = optarg; break;
        case 'j': json = 1; break;
        case 's': parse_special = 1; break;
        case 'h': fputs(HELP, stdout); return 0;
        default: return cli_bad_option("tokenize", argv);
        }
    }
    if (optind < argc) return cli_usage_error("tokenize", "unexpected argument '%s'", argv[optind]);
    size_t len;
    char *prompt = cli_prompt_text("tokenize", text, file, &len);
    if (!prompt) return CLI_USAGE_EXIT;
    int rc = CLI_USAGE_EXIT;
    fkv_model *m = cli_load_model("tokenize", model_path, &rc);
    int n = 0;
    int32_t *ids = m ? cli_tokenize_text("tokenize", m, prompt, len, parse_special, &n) : NULL;
    free(prompt);
    if (!ids) {
        fkv_model_free(m);
        return rc;
    }
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
        json_t *obj = json_pack("{s:o}", "tokens", arr);
        char *s = json_dumps(obj, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(obj);
    } else {
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        putchar('\n');
    }
    free(ids);
    fkv_model_free(m);
    return 0;
}
