/* bench/grammar — what constrained decoding's mask costs per token (grammar_allowed, src/constrain/grammar.h).
 *
 * For each vocabulary (the 32k SPM one, deepseek-llm's ~100k byte-level BPE one, and a 150k set made of
 * deepseek's byte strings plus distinct generated ones — no 150k vocabulary is in data/tokenizers) and each
 * grammar (response_format json_object, a JSON schema of a typical tool result, and the same schema with bounded
 * string lengths, whose counting states never repeat), generations are driven two ways and every grammar_allowed
 * call is timed:
 * - random: each step takes a random allowed token (seeded; 3 in 10 among the allowed tokens of at most 2 bytes,
 *   so strings end and structure continues as a model's would), for up to 300 tokens, then the allowed token that
 *   best closes the document, until it is complete;
 * - document: a fixed JSON document valid for the schema, fed as the longest allowed token matching it at each
 *   step (a stand-in for a model writing that text).
 * It prints per case the calls, mean / median / 99th percentile / max ns per call, the share of calls answered from
 * the kept masks, and the CPU share the process got (the machine may be shared).
 *
 * usage: flatkv_grammar_bench [TOKENIZERS_DIR (data/tokenizers)] [generations per case (20)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "constrain/grammar.h"
#include "gguf/gguf.h"
#include "text/tok.h"

static const char *const schema_tool =
    "{\"type\": \"object\", \"properties\": {"
    "\"name\": {\"type\": \"string\"},"
    "\"id\": {\"type\": \"string\", \"format\": \"uuid\"},"
    "\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150},"
    "\"email\": {\"type\": \"string\"},"
    "\"score\": {\"type\": \"number\"},"
    "\"active\": {\"type\": \"boolean\"},"
    "\"role\": {\"enum\": [\"admin\", \"user\", \"guest\"]},"
    "\"joined\": {\"type\": \"string\", \"format\": \"date\"},"
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 8},"
    "\"address\": {\"type\": \"object\", \"properties\": {\"street\": {\"type\": \"string\"}, "
    "\"city\": {\"type\": \"string\"}, \"zip\": {\"type\": \"string\"}}, \"required\": [\"city\"]},"
    "\"notes\": {\"type\": [\"string\", \"null\"]}},"
    "\"required\": [\"name\", \"id\", \"age\", \"role\"]}";

static const char *const schema_bounded =
    "{\"type\": \"object\", \"properties\": {"
    "\"title\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 200},"
    "\"summary\": {\"type\": \"string\", \"maxLength\": 1000},"
    "\"keywords\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 40}, \"maxItems\": 10}},"
    "\"required\": [\"title\", \"summary\", \"keywords\"], \"additionalProperties\": false}";

static const char *const doc_tool =
    "{\"name\": \"Ada Lovelace\", \"id\": \"3f2c9a1e-7b4d-4e8a-9c1f-2d3e4f5a6b7c\", \"age\": 36, "
    "\"email\": \"ada@example.org\", \"score\": 97.5, \"active\": true, \"role\": \"admin\", "
    "\"joined\": \"1843-09-05\", \"tags\": [\"mathematics\", \"analytical engine\", \"notes\"], "
    "\"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\", \"zip\": \"SW1Y 4JH\"}, "
    "\"notes\": \"First published algorithm intended for a machine; translated Menabrea's article and added "
    "seven notes, the last of which computes Bernoulli numbers.\"}";

static const char *const doc_object =
    "{\"query\": \"weather in Paris\", \"results\": [{\"day\": \"Monday\", \"high\": 21, \"low\": 12, "
    "\"summary\": \"Sunny with a light breeze from the west; clouds later in the evening.\"}, {\"day\": "
    "\"Tuesday\", \"high\": 18, \"low\": 11, \"summary\": \"Showers in the morning, clearing by noon.\"}], "
    "\"units\": \"celsius\", \"source\": {\"name\": \"Météo-France\", \"updated\": \"2026-12-01T06:00:00Z\"}}";

static const char *const doc_bounded =
    "{\"title\": \"Constrained decoding in a prefix-cached inference engine\", \"summary\": \"Masks are computed "
    "from a lazily built automaton over parse stacks and a trie of the vocabulary, so that every sampled token "
    "keeps the output valid. The cost per token stays small next to a decode step.\", \"keywords\": "
    "[\"grammar\", \"JSON Schema\", \"sampling\", \"tries\"]}";

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double cpu_ns(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return ((double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec) * 1e9 +
           ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) * 1e3;
}

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* A vocabulary as byte strings (NULL: not text) and its end-of-generation ids. */
typedef struct {
    const char *name;
    int32_t n;
    char **bytes;
    size_t *len;
    bool *eog;
    grammar_vocab *gv;
} bvocab;

static void bvocab_free(bvocab *b) {
    for (int32_t i = 0; i < b->n; i++) free(b->bytes[i]);
    free(b->bytes);
    free(b->len);
    free(b->eog);
    grammar_vocab_free(b->gv);
}

static int load_vocab(const char *path, const char *name, int32_t grow_to, uint64_t seed, bvocab *out) {
    fkv_error err = {0};
    gguf_file *f = gguf_open(path, &err);
    tok_vocab *v = f ? tok_load(f, &err) : NULL;
    if (f) gguf_close(f);
    if (!v) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return -1;
    }
    int32_t n0 = tok_n_vocab(v), n = grow_to > n0 ? grow_to : n0;
    *out = (bvocab){.name = name, .n = n};
    out->bytes = calloc((size_t)n, sizeof *out->bytes);
    out->len = calloc((size_t)n, sizeof *out->len);
    out->eog = calloc((size_t)n, sizeof *out->eog);
    for (int32_t i = 0; i < n0; i++) {
        out->eog[i] = tok_is_eog(v, i);
        int len = out->eog[i] ? 0 : tok_piece(v, i, i, NULL, 0);
        if (len <= 0) continue;
        out->bytes[i] = malloc((size_t)len);
        tok_piece(v, i, i, out->bytes[i], len);
        out->len[i] = (size_t)len;
    }
    tok_free(v);
    /* Generated pieces: two existing text pieces of at most 8 bytes joined, distinct from every piece so far (an
     * open-addressing set of the pieces' hashes). */
    size_t cap = 1;
    while (cap < 4 * (size_t)n) cap *= 2;
    uint64_t *set = calloc(cap, sizeof *set);
    for (int32_t i = 0; i < n; i++) {
        if (i >= n0) {
            for (;;) {
                int32_t a = (int32_t)(rng_next(&seed) % (uint64_t)n0), b = (int32_t)(rng_next(&seed) % (uint64_t)n0);
                if (!out->bytes[a] || !out->bytes[b] || out->len[a] > 8 || out->len[b] > 8) continue;
                size_t len = out->len[a] + out->len[b];
                char *p = malloc(len);
                memcpy(p, out->bytes[a], out->len[a]);
                memcpy(p + out->len[a], out->bytes[b], out->len[b]);
                uint64_t h = 1469598103934665603ull;
                for (size_t k = 0; k < len; k++) h = (h ^ (unsigned char)p[k]) * 1099511628211ull;
                size_t slot = h & (cap - 1);
                bool dup = false;
                for (; set[slot]; slot = (slot + 1) & (cap - 1)) dup = dup || set[slot] == (h | 1);
                if (dup) {
                    free(p);
                    continue;
                }
                out->bytes[i] = p;
                out->len[i] = len;
                break;
            }
        }
        if (!out->bytes[i]) continue;
        uint64_t h = 1469598103934665603ull;
        for (size_t k = 0; k < out->len[i]; k++) h = (h ^ (unsigned char)out->bytes[i][k]) * 1099511628211ull;
        size_t slot = h & (cap - 1);
        while (set[slot]) slot = (slot + 1) & (cap - 1);
        set[slot] = h | 1;
    }
    free(set);
    double t0 = now_ns();
    out->gv = grammar_vocab_new_pieces(n, (const char *const *)out->bytes, out->len, out->eog, &err);
    if (!out->gv) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return -1;
    }
    printf("vocabulary %s: %d ids, %zu trie nodes, built in %.1f ms\n", name, n, grammar_vocab_trie_nodes(out->gv),
           (now_ns() - t0) / 1e6);
    return 0;
}

typedef struct {
    double *ns;
    size_t n, cap;
    uint64_t hits, masks;
} timings;

static void timed_mask(grammar_state *s, const bvocab *v, uint8_t *allowed, timings *t) {
    double t0 = now_ns();
    grammar_allowed(s, v->gv, allowed);
    double dt = now_ns() - t0;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4096;
        t->ns = realloc(t->ns, t->cap * sizeof *t->ns);
    }
    t->ns[t->n++] = dt;
}

/* The allowed token that best closes the document: end of generation, then a closing byte, then the shortest. */
static int32_t closing_token(const bvocab *v, const uint8_t *allowed) {
    static const char order[] = "\"}]0e1,:nt";
    int32_t best = -1;
    int best_rank = 1 << 30;
    for (int32_t i = 0; i < v->n; i++) {
        if (!allowed[i]) continue;
        int rank;
        if (v->eog[i]) {
            rank = 0;
        } else {
            const char *p = v->len[i] == 1 ? strchr(order, v->bytes[i][0]) : NULL;
            rank = p && v->bytes[i][0] ? 1 + (int)(p - order) : 100 + (int)v->len[i];
        }
        if (rank < best_rank) best_rank = rank, best = i;
    }
    return best;
}

static void run_random(const grammar *g, const bvocab *v, int gens, uint64_t seed, timings *t) {
    uint8_t *allowed = malloc((size_t)v->n);
    int32_t *pick = malloc((size_t)v->n * sizeof *pick), *pick_short = malloc((size_t)v->n * sizeof *pick_short);
    fkv_error err = {0};
    for (int gen = 0; gen < gens; gen++) {
        grammar_state *s = grammar_state_new(g, &err);
        for (int step = 0; step < 4000; step++) {
            timed_mask(s, v, allowed, t);
            int32_t id = -1;
            if (step < 300) {
                size_t n = 0, n_short = 0;
                for (int32_t i = 0; i < v->n; i++) {
                    if (!allowed[i] || v->eog[i]) continue;
                    pick[n++] = i;
                    if (v->len[i] <= 2) pick_short[n_short++] = i;
                }
                if (grammar_complete(s) && rng_next(&seed) % 4 == 0) break;
                if (n_short && rng_next(&seed) % 10 < 3) id = pick_short[rng_next(&seed) % n_short];
                else if (n) id = pick[rng_next(&seed) % n];
            } else {
                id = closing_token(v, allowed);
            }
            if (id < 0 || v->eog[id]) break;
            if (grammar_accept(s, v->gv, id)) {
                fprintf(stderr, "bench: an allowed token was refused\n");
                exit(1);
            }
        }
        grammar_stats st;
        grammar_state_stats(s, &st);
        t->hits += st.mask_hits;
        t->masks += st.masks;
        grammar_state_free(s);
    }
    free(allowed);
    free(pick);
    free(pick_short);
}

static void run_document(const grammar *g, const bvocab *v, const char *doc, int gens, timings *t) {
    uint8_t *allowed = malloc((size_t)v->n);
    fkv_error err = {0};
    size_t dl = strlen(doc);
    for (int gen = 0; gen < gens; gen++) {
        grammar_state *s = grammar_state_new(g, &err);
        for (size_t at = 0; at < dl;) {
            timed_mask(s, v, allowed, t);
            int32_t best = -1;
            size_t best_len = 0;
            for (int32_t i = 0; i < v->n; i++)
                if (allowed[i] && v->len[i] > best_len && v->len[i] <= dl - at &&
                    memcmp(v->bytes[i], doc + at, v->len[i]) == 0)
                    best = i, best_len = v->len[i];
            if (best < 0 || grammar_accept(s, v->gv, best)) {
                fprintf(stderr, "bench: the document does not fit the grammar at byte %zu\n", at);
                exit(1);
            }
            at += best_len;
        }
        timed_mask(s, v, allowed, t); /* the last: end of generation allowed */
        grammar_stats st;
        grammar_state_stats(s, &st);
        t->hits += st.mask_hits;
        t->masks += st.masks;
        grammar_state_free(s);
    }
    free(allowed);
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *vocab, const char *grammar_name, const char *driver, timings *t, double cpu_share) {
    double sum = 0;
    for (size_t i = 0; i < t->n; i++) sum += t->ns[i];
    qsort(t->ns, t->n, sizeof *t->ns, dbl_cmp);
    printf("| %-14s | %-11s | %-8s | %6zu | %8.0f | %8.0f | %9.0f | %9.0f | %5.1f%% | %3.0f%% |\n", vocab, grammar_name,
           driver, t->n, sum / (double)t->n, t->ns[t->n / 2], t->ns[t->n * 99 / 100], t->ns[t->n - 1],
           100.0 * (double)t->hits / (double)(t->masks ? t->masks : 1), 100 * cpu_share);
    free(t->ns);
    *t = (timings){0};
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "data/tokenizers";
    int gens = argc > 2 ? atoi(argv[2]) : 20;
    char path[4096];
    bvocab vocabs[3];
    snprintf(path, sizeof path, "%s/ggml-vocab-llama-spm.gguf", dir);
    if (load_vocab(path, "spm-32k", 0, 1, &vocabs[0])) return 1;
    snprintf(path, sizeof path, "%s/ggml-vocab-deepseek-llm.gguf", dir);
    if (load_vocab(path, "deepseek-100k", 0, 1, &vocabs[1])) return 1;
    if (load_vocab(path, "synthetic-150k", 150000, 7, &vocabs[2])) return 1;
    static const struct {
        const char *name, *schema, *doc;
    } grammars[] = {{"json_object", "{\"type\": \"object\"}", doc_object},
                    {"schema", NULL, doc_tool},
                    {"maxLength", NULL, doc_bounded}};
    const char *schemas[] = {grammars[0].schema, schema_tool, schema_bounded};
    printf("\n| vocabulary     | grammar     | driver   |  calls |  mean ns |   p50 ns |    p99 ns |    max ns |  hits | cpu |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int vi = 0; vi < 3; vi++) {
        for (int gi = 0; gi < 3; gi++) {
            fkv_error err = {0};
            char *gbnf = jsonschema_to_gbnf(schemas[gi], strlen(schemas[gi]), "", &err);
            grammar *g = gbnf ? grammar_parse(gbnf, strlen(gbnf), &err) : NULL;
            free(gbnf);
            if (!g) {
                fprintf(stderr, "%s: %s\n", grammars[gi].name, err.msg);
                return 1;
            }
            timings t = {0};
            double w0 = now_ns(), c0 = cpu_ns();
            run_random(g, &vocabs[vi], gens, 42 + (uint64_t)gi, &t);
            report(vocabs[vi].name, grammars[gi].name, "random", &t, (cpu_ns() - c0) / (now_ns() - w0));
            w0 = now_ns(), c0 = cpu_ns();
            run_document(g, &vocabs[vi], grammars[gi].doc, gens, &t);
            report(vocabs[vi].name, grammars[gi].name, "document", &t, (cpu_ns() - c0) / (now_ns() - w0));
            grammar_free(g);
        }
    }
    for (int vi = 0; vi < 3; vi++) bvocab_free(&vocabs[vi]);
    return 0;
}
