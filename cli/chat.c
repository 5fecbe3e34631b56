/* flatkv chat — an interactive conversation that re-sends its whole transcript every turn, the way a chat
 * client does, and lets the sequence's prefix cache reuse what the last turn left in the KV.
 *
 * Each turn: the user's line joins the transcript; the whole transcript is rendered with the chat template
 * (src/chat/chat.h) and its generation prompt, tokenized with control tokens parsed, and prefilled with
 * fkv_seq_prefill, which reuses the longest common prefix with what the KV holds and computes the rest;
 * then tokens are decoded until end of generation or N tokens and streamed. The reply joins the
 * transcript as the text that was streamed. One line per turn on stderr gives the prompt, cached and new
 * token counts and the timings.
 *
 * Ctrl-C during a generation stops it; the reply so far is kept in the transcript (the KV holds it too,
 * so the next turn reuses it). Ctrl-C at the prompt, EOF or "/quit" ends the program with status 0.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat/chat.h"
#include "cli.h"

static const char HELP[] =
    "usage: flatkv chat -m MODEL [options]\n"
    "\n"
    "Talk with a model, one line per user turn. The whole conversation is re-sent each turn and the KV\n"
    "prefix it shares with the last turn is reused; stderr shows per turn the prompt, cached and new\n"
    "tokens and the timings. Commands: /reset starts a new conversation, /quit exits. Ctrl-C stops a\n"
    "reply (keeping what was written); at the prompt it exits.\n"
    "  -m, --model PATH       GGUF model\n"
    "      --system TEXT      system message opening the conversation\n"
    "      --chat-template T  chatml, qwen3, llama2, llama3, mistral, phi3, phi4-mini, gemma, gemma3, zephyr,\n"
    "                         deepseek, smollm3, gpt-oss, glm4, glm4.7, qwen3-coder, qwen3.5 or plain (default:\n"
    "                         from the model; plain when it has none)\n"
    "  -n, --n-predict N      most tokens per reply (default 256)\n"
    "      --conversation NAME with --kv-dir: the conversation kept in DIR/chat/NAME.json after every turn and\n"
    "                         resumed from there at start, its KV from the disk tier (default: default)\n"
    CLI_SAMPLING_HELP CLI_SPEC_HELP CLI_ENGINE_HELP;

typedef struct {
    const char *model_path, *system, *template_name, *conversation;
    uint32_t n_predict;
    fkv_sampler_params sp;
    fkv_engine_params engine;
    cli_spec spec;
} chat_args;

static int parse_args(int argc, char **argv, chat_args *a) {
    enum { O_SYSTEM = 256, O_TEMPLATE, O_CONVERSATION };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},          {"system", required_argument, 0, O_SYSTEM},
        {"conversation", required_argument, 0, O_CONVERSATION},
        {"chat-template", required_argument, 0, O_TEMPLATE}, {"n-predict", required_argument, 0, 'n'},
        CLI_SAMPLING_OPTIONS,
        CLI_ENGINE_OPTIONS,                             CLI_SPEC_OPTIONS, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *sub = "chat";
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:n:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': a->model_path = optarg; break;
        case O_SYSTEM: a->system = optarg; break;
        case O_TEMPLATE: a->template_name = optarg; break;
        case O_CONVERSATION:
            if (!*optarg || strchr(optarg, '/') || optarg[0] == '.')
                return cli_usage_error(sub, "--conversation needs a name without '/' that does not start with '.'");
            a->conversation = optarg;
            break;
        case 'n': bad = cli_parse_u32(sub, "-n", optarg, 1, UINT32_MAX, &a->n_predict); break;
        case 'h': fputs(HELP, stdout); return 0;
        default:
            bad = cli_run_option(sub, c, optarg, &a->engine, &a->sp, &a->spec);
            if (bad == 0) return cli_bad_option(sub, argv);
            bad = bad < 0;
        }
        if (bad) return CLI_USAGE_EXIT;
    }
    if (optind < argc) return cli_usage_error(sub, "unexpected argument '%s'", argv[optind]);
    if (a->conversation && !a->engine.kv_dir) return cli_usage_error(sub, "--conversation needs --kv-dir");
    return -1; /* parsed: go on */
}

/* Set by SIGINT; polled between decode steps (a generation stops) and seen after an interrupted read. */
static volatile sig_atomic_t chat_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    chat_interrupted = 1;
}

/* The conversation: messages whose contents this program owns (roles are static strings). */
typedef struct {
    chat_message *msgs;
    size_t n, cap;
} transcript;

static int transcript_push(transcript *t, const char *role, const char *content, size_t len) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        chat_message *grown = realloc(t->msgs, cap * sizeof *grown);
        if (!grown) return -1;
        t->msgs = grown;
        t->cap = cap;
    }
    char *copy = strndup(content, len);
    if (!copy) return -1;
    t->msgs[t->n++] = (chat_message){.role = role, .content = copy};
    return 0;
}

/* Drop messages [keep, n). */
static void transcript_truncate(transcript *t, size_t keep) {
    while (t->n > keep) free((char *)t->msgs[--t->n].content);
}

/* The role names a transcript holds (static strings, as chat_message wants them). */
static const char *const ROLES[] = {"system", "user", "assistant"};

/* Write the transcript to path (a temporary file renamed over it: a kill leaves the old one or the new one);
 * -1 with errno. */
static int transcript_save(const transcript *t, const char *path) {
    json_t *msgs = json_array();
    for (size_t i = 0; msgs && i < t->n; i++)
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", t->msgs[i].role, "content", t->msgs[i].content));
    char *tmp = NULL;
    int rc = -1;
    if (msgs && asprintf(&tmp, "%s.%d.tmp", path, (int)getpid()) >= 0) {
        rc = json_dump_file(msgs, tmp, JSON_INDENT(1)) || rename(tmp, path) ? -1 : 0;
        if (rc) unlink(tmp);
        free(tmp);
    }
    json_decref(msgs);
    return rc;
}

/* The transcript saved at path into t (empty): 1 when loaded, 0 when there is none, -1 after printing why not. */
static int transcript_load(transcript *t, const char *path) {
    json_error_t jerr;
    json_t *msgs = json_load_file(path, 0, &jerr);
    if (!msgs && access(path, F_OK)) return 0;
    int rc = json_is_array(msgs) ? 1 : -1;
    for (size_t i = 0; rc > 0 && i < json_array_size(msgs); i++) {
        const char *role = NULL, *content = NULL;
        if (json_unpack(json_array_get(msgs, i), "{s:s,s:s}", "role", &role, "content", &content)) rc = -1;
        const char *known = NULL;
        for (size_t r = 0; rc > 0 && r < sizeof ROLES / sizeof *ROLES; r++)
            if (!strcmp(role, ROLES[r])) known = ROLES[r];
        if (rc > 0 && (!known || transcript_push(t, known, content, strlen(content)))) rc = -1;
    }
    if (rc < 0)
        fprintf(stderr, "flatkv chat: '%s' is not a saved conversation (%s)\n", path, msgs ? "bad message" : jerr.text);
    json_decref(msgs);
    return rc;
}

/* fkv_gen_params.on_token: show the piece and keep it for the transcript; a Ctrl-C stops the reply. */
static bool show_piece(void *user, int32_t id, const char *piece, int len) {
    (void)id;
    if (chat_interrupted) return false;
    fwrite(piece, 1, (size_t)len, stdout);
    fflush(stdout);
    return cli_collect_piece(user, id, piece, len);
}

typedef struct {
    const fkv_model *m;
    fkv_seq *seq;
    fkv_sampler *smp;
    const fkv_spec_params *spec;
    chat_template tmpl;
    uint32_t n_predict, n_ctx, n_vocab;
    float *logits;
    transcript conv;
    size_t n_fixed;  /* messages /reset keeps: the system message */
    char *save_path; /* with --kv-dir: where the transcript is kept after every turn */
} chat_session;

/* Answer the transcript's last user message: 0 after a reply (complete or cancelled), 1 when the turn
 * was refused (the user message is dropped), -1 on an engine failure (printed). */
static int chat_turn(chat_session *cs, int turn) {
    fkv_error err = {0};
    int32_t *prompt = NULL;
    uint32_t n_prompt = 0;
    if (chat_prompt_ids(cs->m, &cs->tmpl, cs->conv.msgs, cs->conv.n, NULL, &prompt, &n_prompt, &err)) {
        fprintf(stderr, "flatkv chat: %s\n", err.msg);
        return -1;
    }
    if (n_prompt == 0 || n_prompt >= cs->n_ctx) {
        fprintf(stderr, "flatkv chat: the conversation is %u tokens and the context holds %u; /reset starts a new one\n",
                n_prompt, cs->n_ctx);
        free(prompt);
        return 1;
    }
    cli_text reply = {0};
    int rc = -1;
    uint32_t cached = 0;
    double t0 = cli_now_ms();
    if (fkv_seq_prefill(cs->seq, prompt, n_prompt, cs->logits, &cached, &err)) {
        fprintf(stderr, "flatkv chat: %s\n", err.msg);
        goto out;
    }
    double t1 = cli_now_ms();
    int32_t *out_ids = malloc(sizeof(int32_t) * (cs->n_predict ? cs->n_predict : 1));
    fkv_gen_params gp = {.max_tokens = cs->n_predict, .sampler = cs->smp, .on_token = show_piece, .user = &reply,
                         .spec = *cs->spec};
    fkv_gen_result res = {0};
    int gen_rc = out_ids ? fkv_seq_generate(cs->seq, cs->logits, &gp, out_ids, &res, &err) : -1;
    free(out_ids);
    if (gen_rc) {
        fprintf(stderr, "\nflatkv chat: %s\n", err.msg);
        goto out;
    }
    bool cancelled = res.cancelled && chat_interrupted;
    int n_gen = (int)res.n_tokens;
    double t2 = cli_now_ms();
    chat_interrupted = 0;
    putchar('\n');
    fflush(stdout);
    if (transcript_push(&cs->conv, "assistant", reply.text ? reply.text : "", reply.len)) {
        fprintf(stderr, "flatkv chat: out of memory\n");
        goto out;
    }
    if (cancelled) fprintf(stderr, "flatkv chat: reply cancelled; the part written is kept\n");
    if (cs->save_path && transcript_save(&cs->conv, cs->save_path))
        fprintf(stderr, "flatkv chat: cannot keep the conversation in '%s': %s\n", cs->save_path, strerror(errno));
    fprintf(stderr, "[turn %d: prompt %u tokens, cached %u, new %u, prefill %.1f ms, generated %d tokens in %.1f ms (%.1f tok/s)]\n",
            turn, n_prompt, cached, n_prompt - cached, t1 - t0, n_gen, t2 - t1,
            t2 > t1 ? n_gen / ((t2 - t1) / 1e3) : 0.0);
    rc = 0;
out:
    cli_text_free(&reply);
    free(prompt);
    return rc;
}

/* The REPL: 0 at EOF, /quit or Ctrl-C at the prompt; 1 after an engine failure. */
static int chat_loop(chat_session *cs) {
    const bool tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t line_cap = 0;
    int turn = 0, rc = 0;
    for (;;) {
        if (chat_interrupted) break; /* Ctrl-C after a reply ended counts as Ctrl-C at the prompt */
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        errno = 0;
        ssize_t len = getline(&line, &line_cap, stdin);
        if (len < 0) {
            if (tty || chat_interrupted) putchar('\n');
            if (errno && errno != EINTR) {
                fprintf(stderr, "flatkv chat: cannot read stdin: %s\n", strerror(errno));
                rc = 1;
            }
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) continue;
        if (!strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            /* The KV is kept: the next conversation reuses the prefix it shares (the system message). */
            transcript_truncate(&cs->conv, cs->n_fixed);
            turn = 0;
            if (cs->save_path) transcript_save(&cs->conv, cs->save_path);
            fprintf(stderr, "flatkv chat: new conversation\n");
            continue;
        }
        if (transcript_push(&cs->conv, "user", line, (size_t)len)) {
            fprintf(stderr, "flatkv chat: out of memory\n");
            rc = 1;
            break;
        }
        int st = chat_turn(cs, turn + 1);
        if (st < 0) {
            rc = 1;
            break;
        }
        if (st > 0)
            transcript_truncate(&cs->conv, cs->conv.n - 1);
        else
            turn++;
    }
    free(line);
    return rc;
}

int cli_chat(int argc, char **argv) {
    chat_args a = {.n_predict = 256, .sp = fkv_sampler_default_params(), .spec = cli_spec_default()};
    fkv_error err = {0};
    if (fkv_engine_default_params(&a.engine, &err)) return cli_usage_error("chat", "%s", err.msg);
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    chat_session cs = {.n_predict = a.n_predict};
    if (a.template_name && chat_template_by_name(a.template_name, &cs.tmpl, &err))
        return cli_usage_error("chat", "--chat-template: %s", err.msg);
    fkv_model *m = cli_load_model("chat", a.model_path, &rc);
    if (!m) return rc;
    cs.m = m;
    if (!a.template_name) {
        cs.tmpl = chat_template_detect(fkv_model_chat_template(m));
        if (cs.tmpl.guessed)
            fprintf(stderr, "flatkv chat: the model's chat template is not one flatkv knows; using ChatML "
                            "(--chat-template chooses another)\n");
    }
    cs.n_vocab = fkv_model_get_info(m).n_vocab;
    rc = 1;
    fkv_engine *engine = cli_spec_engine("chat", m, &a.engine, &a.spec, &rc);
    if (!engine) goto out;
    rc = 1;
    cs.spec = &a.spec.p;
    if (!(cs.seq = fkv_seq_open(engine, NULL, &err))) {
        rc = cli_fail("chat", &err);
        goto out;
    }
    cs.n_ctx = fkv_seq_n_ctx(cs.seq);
    cs.smp = fkv_sampler_new(&a.sp, (int32_t)cs.n_vocab);
    cs.logits = malloc(sizeof(float) * cs.n_vocab);
    if (!cs.smp || !cs.logits) {
        fprintf(stderr, "flatkv chat: out of memory\n");
        goto out;
    }
    int loaded = 0;
    if (a.engine.kv_dir) {
        char *dir = NULL;
        if (asprintf(&dir, "%s/chat", a.engine.kv_dir) < 0 || (mkdir(dir, 0755) && errno != EEXIST) ||
            asprintf(&cs.save_path, "%s/%s.json", dir, a.conversation ? a.conversation : "default") < 0) {
            fprintf(stderr, "flatkv chat: cannot keep conversations in '%s': %s\n", dir ? dir : "", strerror(errno));
            free(dir);
            cs.save_path = NULL;
            goto out;
        }
        free(dir);
        if ((loaded = transcript_load(&cs.conv, cs.save_path)) < 0) goto out;
        if (loaded)
            fprintf(stderr, "flatkv chat: resuming conversation '%s' (%zu messages) from %s\n",
                    a.conversation ? a.conversation : "default", cs.conv.n, cs.save_path);
    }
    if (!loaded && a.system && transcript_push(&cs.conv, "system", a.system, strlen(a.system))) {
        fprintf(stderr, "flatkv chat: out of memory\n");
        goto out;
    }
    cs.n_fixed = cs.conv.n && !strcmp(cs.conv.msgs[0].role, "system") ? 1 : 0;

    /* No SA_RESTART: Ctrl-C at the prompt must interrupt the blocking read. */
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    rc = chat_loop(&cs);
    sigaction(SIGINT, &old, NULL);
out:
    transcript_truncate(&cs.conv, 0);
    free(cs.conv.msgs);
    free(cs.logits);
    fkv_sampler_free(cs.smp);
    fkv_seq_free(cs.seq);
    cli_spec_end(&a.spec);
    fkv_engine_free(engine);
    free(cs.save_path);
    fkv_model_free(m);
    return rc;
}
