/* flatkv serve — the OpenAI-compatible HTTP server (server/server.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat.h"
#include "cli.h"
#include "server.h"

static const char HELP[] =
    "usage: flatkv serve -m MODEL [--alias ID] [-m MODEL [--alias ID] ...] [--models-dir DIR] [--max-models N]\n"
    "                    [--any-model] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--api-keys FILE]\n"
    "                    [--max-body BYTES] [--chat-template NAME] [--parallel N] [--responses-max N]\n"
    "                    [--responses-mem BYTES] [--max-queue N] [--max-connections N] [--timeout S]\n"
    "                    [--body-timeout S] [engine options]\n"
    "\n"
    "Serve the OpenAI API: POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (GET and DELETE\n"
    "/v1/responses/ID), GET /v1/models, GET /v1/models/ID, GET /health, GET /metrics (Prometheus); and Anthropic's\n"
    "POST /v1/messages. A request's \"model\" picks the model by its id (none: the first model; an unknown one: 404).\n"
    "Many conversations stay cached at once: a request reuses the rows of any\n"
    "cached sequence as far as its prompt ids (and cache_salt) agree with theirs. SIGINT/SIGTERM stop it;\n"
    "SIGHUP reloads --api-keys FILE.\n"
    "  -m, --model PATH       GGUF model, served under its file name without .gguf (repeat for more models)\n"
    "      --alias ID         serve the -m before it under ID instead (no spaces)\n"
    "      --models-dir DIR   serve every *.gguf in DIR too, by file name\n"
    "      --max-models N     models loaded at once (default 1: each engine's --kv-mem is sized as if it were alone);\n"
    "                         a model loads on its first request, the least recently used idle one unloads for it\n"
    "      --any-model        answer any model name with the first model (for tools that hard-code a name)\n"
    "      --host ADDR        IPv4 address to listen on (default 127.0.0.1)\n"
    "      --port N           port (default 8080; 0 picks a free one, printed at start)\n"
    "      --api-key KEY      require 'Authorization: Bearer KEY' (or 'x-api-key: KEY'); beside --api-keys, one more\n"
    "                         key, shared, of the tenant \"default\"\n"
    "      --api-keys FILE    keys as tenants, one a line: KEY [NAME [shared]] ('#' comments); a tenant's requests\n"
    "                         share no cached row and no stored response with another's, a shared key's use the\n"
    "                         one common cache; SIGHUP reloads FILE (docs/server.md, \"Tenants\")\n"
    "      --max-body BYTES   largest request body (default 16 MiB)\n"
    "      --chat-template T  override the model's template family\n"
    "      --parallel N       requests run at once, their decode steps batched (default 4)\n"
    "      --max-queue N      requests waiting at most; past it 503 with Retry-After (default 64; 0: no bound)\n"
    "      --max-connections N  connections open at once; past it new ones are refused (default 256)\n"
    "      --timeout S        a request's deadline in seconds (fractions too) from its arrival, waiting or\n"
    "                         running: then 504, or an error event ending its stream\n"
    "                         (default 600; 0: none)\n"
    "      --body-timeout S   the request body must arrive within S seconds (408), and an idle connection\n"
    "                         closes after S (default 30)\n"
    "      --responses-max N  stored responses (/v1/responses) kept at most (default 1024), least recent out first\n"
    "      --responses-mem BYTES  and the bytes they take at most (default 64 MiB)\n"
    CLI_SPEC_HELP
    "                         (a request's \"speculative\": {\"mode\", \"draft_max\"} asks otherwise)\n"
    CLI_ENGINE_HELP;

#define SERVE_MAX_MODELS 256

/* The models served, in order: each -m (under its --alias, else its file name without .gguf), then --models-dir's
 * *.gguf by name. ids and paths are owned. */
typedef struct {
    models_entry e[SERVE_MAX_MODELS];
    bool aliased[SERVE_MAX_MODELS];
    uint32_t n;
} model_list;

static void model_list_free(model_list *l) {
    for (uint32_t i = 0; i < l->n; i++) free((char *)l->e[i].id), free((char *)l->e[i].path);
}

static int add_model(const char *sub, model_list *l, const char *path) {
    if (l->n == SERVE_MAX_MODELS) return cli_usage_error(sub, "at most %d models", SERVE_MAX_MODELS);
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".gguf")) n -= 5;
    char *id = strndup(name, n), *copy = strdup(path);
    if (!id || !copy) {
        free(id), free(copy);
        return cli_usage_error(sub, "out of memory");
    }
    l->e[l->n++] = (models_entry){id, copy};
    return 0;
}

static int set_alias(const char *sub, model_list *l, const char *alias) {
    if (!l->n || l->aliased[l->n - 1])
        return cli_usage_error(sub, "--alias %s: an alias follows the -m MODEL it names, one for each", alias);
    char *id = strdup(alias);
    if (!id) return cli_usage_error(sub, "out of memory");
    free((char *)l->e[l->n - 1].id);
    l->e[l->n - 1].id = id;
    l->aliased[l->n - 1] = true;
    return 0;
}

static int gguf_file(const struct dirent *d) {
    const size_t n = strlen(d->d_name);
    return n > 5 && !strcmp(d->d_name + n - 5, ".gguf");
}

static int add_models_dir(const char *sub, model_list *l, const char *dir) {
    struct dirent **names;
    const int n = scandir(dir, &names, gguf_file, alphasort);
    if (n < 0) return cli_usage_error(sub, "--models-dir %s: %s", dir, strerror(errno));
    int bad = n == 0 ? cli_usage_error(sub, "--models-dir %s: no *.gguf file in it", dir) : 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (!bad) bad = add_model(sub, l, path);
        free(names[i]);
    }
    free(names);
    return bad;
}

/* Every id usable in a request (non-empty, no spaces, unique) and every file readable now (the first is loaded now,
 * the others on their first request). */
static int check_models(const char *sub, const model_list *l) {
    if (!l->n) return cli_usage_error(sub, "-m MODEL or --models-dir DIR is required (see flatkv %s --help)", sub);
    for (uint32_t i = 0; i < l->n; i++) {
        const char *id = l->e[i].id;
        bool plain = *id && strlen(id) < MODELS_ID_MAX;
        for (const char *c = id; *c; c++) plain = plain && !isspace((unsigned char)*c) && !iscntrl((unsigned char)*c);
        if (!plain)
            return cli_usage_error(sub, "'%s' (%s) is not a usable model id: give one without spaces, at most %d bytes "
                                        "(--alias ID after its -m)", id, l->e[i].path, MODELS_ID_MAX - 1);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(l->e[j].id, id))
                return cli_usage_error(sub, "two models have the id '%s' (%s and %s): give one an --alias", id,
                                       l->e[j].path, l->e[i].path);
        if (access(l->e[i].path, R_OK))
            return cli_usage_error(sub, "cannot read model '%s': %s", l->e[i].path, strerror(errno));
    }
    return 0;
}

/* After the options: the models checked, the first loaded (and the draft model checked against it), then serve. */
static int serve_models(const char *sub, int argc, char **argv, model_list *models, const char *models_dir,
                        const char *template_name, server_params *p, cli_spec *spec) {
    fkv_error err = {0};
    chat_template tmpl;
    if (optind < argc) return cli_usage_error(sub, "unexpected argument '%s'", argv[optind]);
    if (template_name && chat_template_by_name(template_name, &tmpl, &err)) return cli_usage_error(sub, "%s", err.msg);
    if ((models_dir && add_models_dir(sub, models, models_dir)) || check_models(sub, models)) return CLI_USAGE_EXIT;
    if (spec->model_path && models->n > 1)
        return cli_usage_error(sub, "--model-draft serves one model only (%u are given): one engine thread runs a "
                                    "draft model", models->n);
    p->models = models->e;
    p->n_models = models->n;
    p->tmpl = template_name ? &tmpl : NULL;
    /* The keys before a model's load of minutes: a bad file is refused at once. */
    tenants *keys = NULL;
    if ((p->api_key || p->api_keys) && !(keys = tenants_load(p->api_keys, p->api_key, &err)))
        return cli_fail(sub, &err);
    fprintf(stderr, "flatkv serve: loading %s (%u model%s known)\n", models->e[0].path, models->n,
            models->n == 1 ? "" : "s");
    double t0 = cli_now_ms();
    int rc = CLI_USAGE_EXIT;
    fkv_model *m = cli_load_model(sub, models->e[0].path, &rc);
    if (!m) {
        tenants_free(keys);
        return rc;
    }
    fkv_model_info info = fkv_model_get_info(m);
    fprintf(stderr, "flatkv serve: loaded '%s' as '%s' in %.0f ms (%u layers, dim %u, vocabulary %u, context %u; %s "
                    "kernels)\n", info.name, models->e[0].id, cli_now_ms() - t0, info.n_layers, info.dim,
            info.n_vocab, info.n_ctx_train, fkv_kernels_name());
    if (!(rc = cli_spec_start(sub, m, &p->engine, spec))) {
        p->spec = spec->p;
        rc = server_run(m, keys, p, &err) ? cli_fail(sub, &err) : 0; /* the server owns m and keys now */
    } else {
        fkv_model_free(m);
        tenants_free(keys);
    }
    cli_spec_end(spec);
    return rc;
}

int cli_serve(int argc, char **argv) {
    enum { O_HOST = 256, O_PORT, O_KEY, O_MAX_BODY, O_TEMPLATE, O_PARALLEL, O_RESPONSES_MAX, O_RESPONSES_MEM,
           O_MAX_QUEUE, O_MAX_CONNECTIONS, O_TIMEOUT, O_BODY_TIMEOUT, O_ALIAS, O_MODELS_DIR, O_MAX_MODELS,
           O_ANY_MODEL, O_KEYS };
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},  {"host", required_argument, 0, O_HOST},
                                         {"port", required_argument, 0, O_PORT}, {"api-key", required_argument, 0, O_KEY},
                                         {"max-body", required_argument, 0, O_MAX_BODY},
                                         {"chat-template", required_argument, 0, O_TEMPLATE},
                                         {"parallel", required_argument, 0, O_PARALLEL},
                                         {"responses-max", required_argument, 0, O_RESPONSES_MAX},
                                         {"responses-mem", required_argument, 0, O_RESPONSES_MEM},
                                         {"max-queue", required_argument, 0, O_MAX_QUEUE},
                                         {"max-connections", required_argument, 0, O_MAX_CONNECTIONS},
                                         {"timeout", required_argument, 0, O_TIMEOUT},
                                         {"body-timeout", required_argument, 0, O_BODY_TIMEOUT},
                                         {"alias", required_argument, 0, O_ALIAS},
                                         {"models-dir", required_argument, 0, O_MODELS_DIR},
                                         {"max-models", required_argument, 0, O_MAX_MODELS},
                                         {"any-model", no_argument, 0, O_ANY_MODEL},
                                         {"api-keys", required_argument, 0, O_KEYS},
                                         {"help", no_argument, 0, 'h'},         CLI_ENGINE_OPTIONS,
                                         CLI_SPEC_OPTIONS,
                                         {0, 0, 0, 0}};
    const char *sub = "serve", *models_dir = NULL, *template_name = NULL;
    model_list models = {0};
    server_params p = {.host = "127.0.0.1", .port = 8080, .max_body = 16u << 20, .parallel = 4,
                       .responses_max = 1024, .responses_mem = 64u << 20, .max_queue = 64, .max_connections = 256,
                       .timeout_s = 600, .body_timeout_s = 30, .max_models = 1};
    fkv_error err = {0};
    if (fkv_engine_default_params(&p.engine, &err)) return cli_usage_error(sub, "%s", err.msg);
    cli_spec spec = cli_spec_default();
    int c;
    uint32_t u;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': bad = add_model(sub, &models, optarg) != 0; break;
        case O_ALIAS: bad = set_alias(sub, &models, optarg) != 0; break;
        case O_MODELS_DIR: models_dir = optarg; break;
        case O_MAX_MODELS: bad = cli_parse_u32(sub, "--max-models", optarg, 1, SERVE_MAX_MODELS, &p.max_models); break;
        case O_ANY_MODEL: p.any_model = true; break;
        case O_HOST: p.host = optarg; break;
        case O_PORT:
            bad = cli_parse_u32(sub, "--port", optarg, 0, 65535, &u);
            p.port = (uint16_t)u;
            break;
        case O_KEY: p.api_key = optarg; break;
        case O_KEYS: p.api_keys = optarg; break;
        case O_MAX_BODY:
            bad = cli_parse_u32(sub, "--max-body", optarg, 1, UINT32_MAX, &u);
            p.max_body = u;
            break;
        case O_TEMPLATE: template_name = optarg; break;
        case O_PARALLEL: bad = cli_parse_u32(sub, "--parallel", optarg, 1, 256, &p.parallel); break;
        case O_RESPONSES_MAX: bad = cli_parse_u32(sub, "--responses-max", optarg, 0, UINT32_MAX, &p.responses_max); break;
        case O_MAX_QUEUE: bad = cli_parse_u32(sub, "--max-queue", optarg, 0, 1u << 20, &p.max_queue); break;
        case O_MAX_CONNECTIONS:
            bad = cli_parse_u32(sub, "--max-connections", optarg, 1, 900, &p.max_connections);
            break;
        case O_TIMEOUT: bad = cli_parse_float(sub, "--timeout", optarg, 0, 1e7f, &p.timeout_s); break;
        case O_BODY_TIMEOUT: bad = cli_parse_u32(sub, "--body-timeout", optarg, 1, 1u << 24, &p.body_timeout_s); break;
        case O_RESPONSES_MEM: {
            uint64_t bytes;
            bad = cli_parse_u64(sub, "--responses-mem", optarg, &bytes);
            p.responses_mem = (size_t)bytes;
            break;
        }
        case 'h': fputs(HELP, stdout); break;
        default:
            bad = cli_run_option(sub, c, optarg, &p.engine, NULL, &spec);
            if (bad == 0) cli_bad_option(sub, argv);
            bad = bad <= 0;
        }
        if (bad || c == 'h') {
            model_list_free(&models);
            return bad ? CLI_USAGE_EXIT : 0;
        }
    }
    int rc = serve_models(sub, argc, argv, &models, models_dir, template_name, &p, &spec);
    model_list_free(&models);
    return rc;
}
