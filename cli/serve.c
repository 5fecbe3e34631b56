/* flatkv serve — the OpenAI-compatible HTTP server (server/server.h). */
#include <stdio.h>
#include <string.h>

#include "chat/chat.h"
#include "cli.h"
#include "server.h"

static const char HELP[] =
    "usage: flatkv serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-body BYTES]\n"
    "                    [--chat-template NAME] [--parallel N] [--responses-max N] [--responses-mem BYTES]\n"
    "                    [--max-queue N] [--max-connections N] [--timeout S] [--body-timeout S] [engine options]\n"
    "\n"
    "Serve the OpenAI API: POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (GET and DELETE\n"
    "/v1/responses/ID), GET /v1/models, GET /health, GET /metrics (Prometheus); and Anthropic's POST /v1/messages.\n"
    "Many conversations stay cached at once: a request reuses the rows of any\n"
    "cached sequence as far as its prompt ids (and cache_salt) agree with theirs. SIGINT/SIGTERM stop it.\n"
    "  -m, --model PATH       GGUF model\n"
    "      --host ADDR        IPv4 address to listen on (default 127.0.0.1)\n"
    "      --port N           port (default 8080; 0 picks a free one, printed at start)\n"
    "      --api-key KEY      require 'Authorization: Bearer KEY' (or 'x-api-key: KEY')\n"
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

int cli_serve(int argc, char **argv) {
    enum { O_HOST = 256, O_PORT, O_KEY, O_MAX_BODY, O_TEMPLATE, O_PARALLEL, O_RESPONSES_MAX, O_RESPONSES_MEM,
           O_MAX_QUEUE, O_MAX_CONNECTIONS, O_TIMEOUT, O_BODY_TIMEOUT };
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
                                         {"help", no_argument, 0, 'h'},         CLI_ENGINE_OPTIONS,
                                         CLI_SPEC_OPTIONS,
                                         {0, 0, 0, 0}};
    const char *sub = "serve", *model_path = NULL, *template_name = NULL;
    server_params p = {.host = "127.0.0.1", .port = 8080, .max_body = 16u << 20, .parallel = 4,
                       .responses_max = 1024, .responses_mem = 64u << 20, .max_queue = 64, .max_connections = 256,
                       .timeout_s = 600, .body_timeout_s = 30};
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
        case 'm': model_path = optarg; break;
        case O_HOST: p.host = optarg; break;
        case O_PORT:
            bad = cli_parse_u32(sub, "--port", optarg, 0, 65535, &u);
            p.port = (uint16_t)u;
            break;
        case O_KEY: p.api_key = optarg; break;
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
        case 'h': fputs(HELP, stdout); return 0;
        default:
            bad = cli_run_option(sub, c, optarg, &p.engine, NULL, &spec);
            if (bad == 0) return cli_bad_option(sub, argv);
            bad = bad < 0;
        }
        if (bad) return CLI_USAGE_EXIT;
    }
    if (optind < argc) return cli_usage_error(sub, "unexpected argument '%s'", argv[optind]);
    if (template_name && chat_template_by_name(template_name, &p.tmpl, &err)) return cli_usage_error(sub, "%s", err.msg);
    fprintf(stderr, "flatkv serve: loading %s\n", model_path ? model_path : "(no model)");
    double t0 = cli_now_ms();
    int rc = CLI_USAGE_EXIT;
    fkv_model *m = cli_load_model(sub, model_path, &rc);
    if (!m) return rc;
    fkv_model_info info = fkv_model_get_info(m);
    fprintf(stderr, "flatkv serve: loaded '%s' in %.0f ms (%u layers, dim %u, vocabulary %u, context %u; %s kernels)\n",
            info.name, cli_now_ms() - t0, info.n_layers, info.dim, info.n_vocab, info.n_ctx_train, fkv_kernels_name());
    if (!template_name) {
        p.tmpl = chat_template_detect(fkv_model_chat_template(m));
        if (p.tmpl.guessed) fprintf(stderr, "flatkv serve: unknown chat template; using ChatML\n");
    }
    if (!(rc = cli_spec_start(sub, m, &p.engine, &spec))) {
        p.spec = spec.p;
        rc = server_run(m, &p, &err) ? cli_fail(sub, &err) : 0;
    }
    cli_spec_end(&spec);
    fkv_model_free(m);
    return rc;
}
