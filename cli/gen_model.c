/* flatkv gen-model — a model of a real shape with deterministic random weights. */
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "cli.h"
#include "model/genmodel.h"
#include "model/model.h"

/* The usage; its two %s are the architectures' names (model.c's table) and the --type names (genmodel.h). */
static const char HELP[] =
    "usage: flatkv gen-model --dim D --hidden H --layers L --heads NH [--kv-heads NKV] [--ctx C]\n"
    "                        --vocab-from TOKENIZER.gguf [--type T] [--seed S]\n"
    "                        [--tied]\n"
    "                        [--arch %s] [--rope-freqs] [--head-dim N]\n"
    "                        [--rope-dims N] [--window N] [--window-pattern N]\n"
    "                        [--experts N --experts-used K --expert-hidden H] [--shared-experts S]\n"
    "                        [--dense-layers D] [--nextn N | --mtp-layers N]\n"
    "                        [--ssm-state D] [--ssm-k-heads N] [--ssm-v-heads N] [--ssm-conv K] [--attn-interval N]\n"
    "                        [--chat-template FILE.jinja]\n"
    "                        -o OUT.gguf\n"
    "\n"
    "Write a GGUF (--arch) with deterministic random weights (same arguments, same bytes) and\n"
    "the tokenizer of TOKENIZER.gguf. For benchmarks and tests: compute cost does not depend on weights.\n"
    "  --kv-heads defaults to --heads; --ctx to 2048; --type to q8_0; --seed to 1.\n"
    "  --type T      %s\n"
    "                q4_k_m, q5_k_m, q3_k_m: llama.cpp's mixes (llama_tensor_get_type): Q6_K for the output matrix\n"
    "                (token_embd when --tied); attn_v and ffn_down Q6_K in use_more_bits layers (first and last\n"
    "                eighth, every third between) for q4_k_m/q5_k_m; q3_k_m: attn_v Q5_K in layers 0-1 else Q4_K,\n"
    "                ffn_down Q5_K in the first sixteenth else Q4_K, attn_output Q4_K; the base type elsewhere.\n"
    "                Rows that 256 does not divide fall back as llama.cpp's do (Q4_K->Q5_0, Q5_K->Q5_1,\n"
    "                Q3_K->Q4_0, Q6_K->Q8_0, the output Q8_0); a uniform type refuses such rows\n"
    "                mxfp4_moe: llama.cpp's MXFP4_MOE (gpt-oss's files): experts MXFP4, every other matrix Q8_0\n"
    "  --tied        no output matrix: logits use the token embedding (as some models do)\n"
    "  --arch A      default llama. The tensors and keys written are those of the architecture's row in the\n"
    "                architecture table (src/model/model.c): its switches (biases, q/k norms, post-norms, fused\n"
    "                tensors, LongRoPE factors, sliding windows...) and what its converter writes\n"
    "  --head-dim N  head size (attention.key_length/value_length); default dim / heads\n"
    "  --rope-dims N rotated dims of each head (rope.dimension_count, partial rotary); default the head size\n"
    "  --window N    sliding window of the local layers (attention.sliding_window), for an architecture with\n"
    "                window layers (gemma3); default 0: none\n"
    "  --window-pattern N  with --window: every Nth layer is global (attention.sliding_window_pattern); default 6\n"
    "  --experts N, --experts-used K, --expert-hidden H  routed experts (an architecture with experts: qwen3moe,\n"
    "                glm4moe, gpt-oss): expert_count, expert_used_count, expert_feed_forward_length; default 8, 2, hidden/2\n"
    "  --shared-experts S  expert_shared_count (glm4moe): a shared FFN of S x the expert width in each expert layer;\n"
    "                qwen35moe: its one shared expert is S (default 1) x the expert width, gated by sigmoid\n"
    "  --dense-layers D    leading_dense_block_count: the first D layers have a dense FFN of --hidden\n"
    "  --nextn N     nextn_predict_layers: N NextN (MTP) blocks after the layers, the drafter of --spec mtp\n"
    "                (--mtp-layers N says the same)\n"
    "  --ssm-state D, --ssm-k-heads N, --ssm-v-heads N, --ssm-conv K  the gated DeltaNet layers of a hybrid (qwen35,\n"
    "                qwen35moe): heads of D (default head size / 2), N key and value heads (default 2 x heads value\n"
    "                heads, 16 key heads where 16 divides them, else as many), a convolution of K taps (default 4);\n"
    "                rope dims default to a quarter of the head, as Qwen3.5's published configs have them\n"
    "  --attn-interval N  every Nth layer is an attention layer, the others gated DeltaNet (default 4)\n"
    "  --rope-freqs  Llama-3.1-style rope_freqs.weight (per-dimension frequency divisors), rope base 500000\n"
    "  --chat-template FILE  the file (a Jinja chat template, e.g. data/templates/openai-gpt-oss-120b.jinja)\n"
    "                becomes tokenizer.chat_template, and the control tokens of its family (gpt-oss, GLM) that\n"
    "                the copied vocabulary lacks are appended to it, as its models' vocabularies hold them\n";

int cli_gen_model(int argc, char **argv) {
    enum { O_DIM = 256, O_HIDDEN, O_LAYERS, O_HEADS, O_KVH, O_CTX, O_VOCAB, O_TYPE, O_SEED, O_TIED, O_ARCH, O_FREQS, O_HEAD_DIM,
           O_ROPE_DIMS, O_WINDOW, O_PATTERN, O_EXPERTS, O_USED, O_EXP_HIDDEN, O_SHARED, O_DENSE, O_NEXTN, O_CHAT,
           O_SSM_STATE, O_SSM_K, O_SSM_V, O_SSM_CONV, O_INTERVAL };
    static const struct option opts[] = {
        {"dim", required_argument, 0, O_DIM},      {"hidden", required_argument, 0, O_HIDDEN},
        {"layers", required_argument, 0, O_LAYERS}, {"heads", required_argument, 0, O_HEADS},
        {"kv-heads", required_argument, 0, O_KVH},  {"ctx", required_argument, 0, O_CTX},
        {"vocab-from", required_argument, 0, O_VOCAB}, {"type", required_argument, 0, O_TYPE},
        {"seed", required_argument, 0, O_SEED},    {"tied", no_argument, 0, O_TIED},
        {"arch", required_argument, 0, O_ARCH},    {"rope-freqs", no_argument, 0, O_FREQS},
        {"head-dim", required_argument, 0, O_HEAD_DIM}, {"rope-dims", required_argument, 0, O_ROPE_DIMS},
        {"window", required_argument, 0, O_WINDOW}, {"window-pattern", required_argument, 0, O_PATTERN},
        {"experts", required_argument, 0, O_EXPERTS}, {"experts-used", required_argument, 0, O_USED},
        {"expert-hidden", required_argument, 0, O_EXP_HIDDEN}, {"shared-experts", required_argument, 0, O_SHARED},
        {"dense-layers", required_argument, 0, O_DENSE}, {"nextn", required_argument, 0, O_NEXTN},
        {"mtp-layers", required_argument, 0, O_NEXTN},
        {"chat-template", required_argument, 0, O_CHAT}, {"ssm-state", required_argument, 0, O_SSM_STATE},
        {"ssm-k-heads", required_argument, 0, O_SSM_K}, {"ssm-v-heads", required_argument, 0, O_SSM_V},
        {"ssm-conv", required_argument, 0, O_SSM_CONV}, {"attn-interval", required_argument, 0, O_INTERVAL},
        {"output", required_argument, 0, 'o'},     {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *sub = "gen-model", *out = NULL, *chat = NULL;
    genmodel_params p = {.n_ctx = 2048, .type = GGML_TYPE_Q8_0, .seed = 1};
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case O_DIM: bad = cli_parse_u32(sub, "--dim", optarg, 1, 1u << 16, &p.dim); break;
        case O_HIDDEN: bad = cli_parse_u32(sub, "--hidden", optarg, 1, 1u << 18, &p.hidden); break;
        case O_LAYERS: bad = cli_parse_u32(sub, "--layers", optarg, 1, 1024, &p.n_layers); break;
        case O_HEADS: bad = cli_parse_u32(sub, "--heads", optarg, 1, 1024, &p.n_heads); break;
        case O_KVH: bad = cli_parse_u32(sub, "--kv-heads", optarg, 1, 1024, &p.n_kv_heads); break;
        case O_CTX: bad = cli_parse_u32(sub, "--ctx", optarg, 1, 1u << 24, &p.n_ctx); break;
        case O_VOCAB: p.vocab_from = optarg; break;
        case O_TYPE:
            if (genmodel_type_by_name(optarg, &p.type, &p.mix)) {
                char names[256];
                return cli_usage_error(sub, "--type must be one of %s, got '%s'",
                                       genmodel_type_names(names, sizeof names, "|"), optarg);
            }
            break;
        case O_SEED: bad = cli_parse_u64(sub, "--seed", optarg, &p.seed); break;
        case O_TIED: p.tied = true; break;
        case O_ARCH: p.arch = optarg; break;
        case O_FREQS: p.rope_freqs = true; break;
        case O_HEAD_DIM: bad = cli_parse_u32(sub, "--head-dim", optarg, 2, 256, &p.head_dim); break;
        case O_ROPE_DIMS: bad = cli_parse_u32(sub, "--rope-dims", optarg, 2, 256, &p.rope_dims); break;
        case O_WINDOW: bad = cli_parse_u32(sub, "--window", optarg, 1, 1u << 24, &p.window); break;
        case O_PATTERN: bad = cli_parse_u32(sub, "--window-pattern", optarg, 1, 1024, &p.window_pattern); break;
        case O_EXPERTS: bad = cli_parse_u32(sub, "--experts", optarg, 1, 512, &p.n_expert); break;
        case O_USED: bad = cli_parse_u32(sub, "--experts-used", optarg, 1, 512, &p.n_expert_used); break;
        case O_EXP_HIDDEN: bad = cli_parse_u32(sub, "--expert-hidden", optarg, 1, 1u << 18, &p.n_ff_exp); break;
        case O_SHARED: bad = cli_parse_u32(sub, "--shared-experts", optarg, 1, 64, &p.n_shared); break;
        case O_DENSE: bad = cli_parse_u32(sub, "--dense-layers", optarg, 1, 1024, &p.n_dense_lead); break;
        case O_NEXTN: bad = cli_parse_u32(sub, "--nextn", optarg, 1, 16, &p.n_nextn); break;
        case O_CHAT: chat = optarg; break;
        case O_SSM_STATE: bad = cli_parse_u32(sub, "--ssm-state", optarg, 1, 256, &p.ssm_d); break;
        case O_SSM_K: bad = cli_parse_u32(sub, "--ssm-k-heads", optarg, 1, 1024, &p.ssm_k_heads); break;
        case O_SSM_V: bad = cli_parse_u32(sub, "--ssm-v-heads", optarg, 1, 1024, &p.ssm_v_heads); break;
        case O_SSM_CONV: bad = cli_parse_u32(sub, "--ssm-conv", optarg, 1, 64, &p.ssm_conv); break;
        case O_INTERVAL: bad = cli_parse_u32(sub, "--attn-interval", optarg, 1, 1024, &p.attn_interval); break;
        case 'o': out = optarg; break;
        case 'h': {
            char archs[128], types[256];
            printf(HELP, model_arch_names(archs, sizeof archs, "|", "|"), genmodel_type_names(types, sizeof types, "|"));
            return 0;
        }
        default: return cli_bad_option(sub, argv);
        }
        if (bad) return CLI_USAGE_EXIT;
    }
    if (optind < argc) return cli_usage_error(sub, "unexpected argument '%s'", argv[optind]);
    if (!p.dim || !p.hidden || !p.n_layers || !p.n_heads || !p.vocab_from || !out)
        return cli_usage_error(sub, "--dim, --hidden, --layers, --heads, --vocab-from and -o are required");
    if (!p.n_kv_heads) p.n_kv_heads = p.n_heads;
    char *source = NULL;
    genmodel_token *tokens = NULL;
    if (chat) { /* the template, and its family's tokens (chat.h) for the vocabulary */
        size_t len, n = 0;
        if (!(source = cli_read_file(chat, &len))) return cli_usage_error(sub, "--chat-template: cannot read '%s'", chat);
        const chat_template t = chat_template_detect(source);
        const chat_vocab_token *listed = chat_vocab_tokens(&t, &n);
        if (n && !(tokens = malloc(sizeof *tokens * n))) {
            free(source);
            return cli_usage_error(sub, "out of memory");
        }
        for (size_t i = 0; i < n; i++) tokens[i] = (genmodel_token){listed[i].text, listed[i].user_defined, listed[i].special};
        p.chat_template = source, p.tokens = tokens, p.n_tokens = n;
    }
    fkv_error err = {0};
    const int rc = genmodel_write(&p, out, &err);
    free(source);
    free(tokens);
    if (rc) return cli_usage_error(sub, "%s", err.msg);
    fprintf(stderr, "flatkv gen-model: wrote %s\n", out);
    return 0;
}
