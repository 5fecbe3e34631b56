/* A program written against the installed flatkv only (flatkv.h and pkg-config's flags): the greedy continuation
 * of a prompt, its ids printed one line, space-separated — what `flatkv generate --json` puts in "tokens".
 *
 * usage: generate MODEL PROMPT N */
#include <flatkv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL PROMPT N\n", argv[0]);
        return 2;
    }
    uint32_t n_gen = (uint32_t)strtoul(argv[3], NULL, 10);
    fkv_error err = {0};
    fkv_model *m = fkv_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "%s (%s)\n", err.msg, fkv_status_name(err.code));
        return 1;
    }
    int32_t prompt[512];
    int n_prompt = fkv_tokenize(m, argv[2], strlen(argv[2]), true, false, prompt, 512, &err);
    fkv_seq *s = n_prompt > 0 && n_prompt <= 512 ? fkv_seq_new(m, NULL, &err) : NULL;
    float *logits = malloc(fkv_model_get_info(m).n_vocab * sizeof *logits);
    int32_t *out = malloc((n_gen + 1) * sizeof *out);
    fkv_sampler_params sp = fkv_sampler_default_params();
    sp.temp = 0;
    fkv_sampler *sampler = fkv_sampler_new(&sp, (int32_t)fkv_model_get_info(m).n_vocab);
    fkv_gen_params gp = {.max_tokens = n_gen, .sampler = sampler};
    fkv_gen_result res;
    int status = !s || !logits || !out || !sampler || fkv_seq_prefill(s, prompt, (uint32_t)n_prompt, logits, NULL, &err)
                 || fkv_seq_generate(s, logits, &gp, out, &res, &err);
    if (status) {
        fprintf(stderr, "generate: %s\n", err.code ? err.msg : "out of memory or a prompt over 512 ids");
    } else {
        for (uint32_t i = 0; i < res.n_tokens; i++) printf(i ? " %d" : "%d", out[i]);
        printf("\n");
    }
    fkv_sampler_free(sampler);
    free(out);
    free(logits);
    fkv_seq_free(s);
    fkv_model_free(m);
    return status;
}
