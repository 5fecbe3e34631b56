/* grammar_lower.c — the parsed rules lowered to bytes, and grammar_parse (contract in grammar_lower.h). */
#include "constrain/grammar_lower.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "constrain/gbnf.h"
#include "constrain/gbnf_leftrec.h"
#include "constrain/grow.h"

static void byteset_add_range(byteset *s, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++) s->w[b >> 6] |= 1ull << (b & 63);
}

/* The UTF-8 encoding of code point cp (< 0x110000) into out; returns its length. */
static int utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

typedef struct {
    gparser *p;
    grammar *g;
    size_t cap_elems, cap_terms;
    uint32_t *term_table; /* open addressing: term id + 1 */
    size_t term_table_cap;
    cprange *norm; /* a class normalized: sorted, merged, negation applied, surrogates removed */
    size_t n_norm, cap_norm;
    /* class rules made so far: their normalized ranges in pool[off .. off + n), and a table by content */
    cprange *pool;
    size_t n_pool, cap_pool;
    struct {
        uint32_t off, n;
    } *crules;
    size_t n_crules, cap_crules;
    uint32_t *crule_table; /* class rule index + 1 */
    size_t crule_table_cap;
    uint32_t n_prules;
} lowerer;

static int emit(lowerer *L, uint32_t e) {
    if (L->g->n_elems + 1 > GRAMMAR_MAX_ELEMS)
        return gbnf_error(L->p, SIZE_MAX, "grammar too large: more than %u elements once compiled to bytes",
                          GRAMMAR_MAX_ELEMS);
    if (grow(&L->g->elems, &L->cap_elems, L->g->n_elems + 1, sizeof *L->g->elems, SIZE_MAX)) return gbnf_oom(L->p);
    L->g->elems[L->g->n_elems++] = e;
    return 0;
}

static int64_t term_id(lowerer *L, const byteset *s) {
    grammar *g = L->g;
    if ((g->n_terms + 1) * 2 > L->term_table_cap) {
        size_t cap = L->term_table_cap ? L->term_table_cap * 2 : 256;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) return gbnf_oom(L->p);
        for (uint32_t i = 0; i < g->n_terms; i++) {
            size_t h = XXH3_64bits(&g->terms[i], sizeof(byteset)) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = i + 1;
        }
        free(L->term_table);
        L->term_table = t;
        L->term_table_cap = cap;
    }
    size_t h = XXH3_64bits(s, sizeof *s) & (L->term_table_cap - 1);
    for (; L->term_table[h]; h = (h + 1) & (L->term_table_cap - 1))
        if (memcmp(&g->terms[L->term_table[h] - 1], s, sizeof *s) == 0) return L->term_table[h] - 1;
    if (grow(&g->terms, &L->cap_terms, g->n_terms + 1, sizeof *g->terms, SIZE_MAX)) return gbnf_oom(L->p);
    g->terms[g->n_terms] = *s;
    L->term_table[h] = g->n_terms + 1;
    return g->n_terms++;
}

static int emit_bytes(lowerer *L, const byteset *s) {
    int64_t t = term_id(L, s);
    return t < 0 ? -1 : emit(L, GE_MAKE(GE_BYTES, t));
}

static int emit_byte_range(lowerer *L, unsigned lo, unsigned hi) {
    byteset s = {{0}};
    byteset_add_range(&s, lo, hi);
    return emit_bytes(L, &s);
}

/* The bytes of code point cp, or a terminal that matches nothing for one UTF-8 cannot encode (a surrogate). */
static int emit_code_point(lowerer *L, uint32_t cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) {
        byteset none = {{0}};
        return emit_bytes(L, &none);
    }
    uint8_t b[4];
    int n = utf8_encode(cp, b);
    for (int i = 0; i < n; i++)
        if (emit_byte_range(L, b[i], b[i])) return -1;
    return 0;
}

static int cprange_cmp(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int norm_add(lowerer *L, uint32_t lo, uint32_t hi) {
    if (grow(&L->norm, &L->cap_norm, L->n_norm + 1, sizeof *L->norm, SIZE_MAX)) return gbnf_oom(L->p);
    L->norm[L->n_norm++] = (cprange){lo, hi};
    return 0;
}

/* L->norm = the code points of class k: sorted, disjoint, not adjacent, without surrogates. */
static int normalize(lowerer *L, const pclass *k) {
    gparser *p = L->p;
    cprange *tmp = malloc((k->n ? k->n : 1) * sizeof *tmp);
    if (!tmp) return gbnf_oom(p);
    memcpy(tmp, p->ranges + k->off, k->n * sizeof *tmp);
    qsort(tmp, k->n, sizeof *tmp, cprange_cmp);
    size_t m = 0;
    for (size_t i = 0; i < k->n; i++) {
        if (m && tmp[i].lo <= tmp[m - 1].hi + 1) {
            if (tmp[i].hi > tmp[m - 1].hi) tmp[m - 1].hi = tmp[i].hi;
        } else {
            tmp[m++] = tmp[i];
        }
    }
    L->n_norm = 0;
    int rc = 0;
    /* The set (complemented when negated), cut around the surrogates. */
    uint32_t next = 0; /* complement: first code point not yet covered */
    for (size_t i = 0; i <= m && !rc; i++) {
        uint32_t lo, hi;
        if (k->neg) {
            if (i < m) {
                if (tmp[i].lo == 0) {
                    next = tmp[i].hi + 1;
                    continue;
                }
                lo = next, hi = tmp[i].lo - 1, next = tmp[i].hi + 1;
            } else {
                if (next > 0x10ffff) break;
                lo = next, hi = 0x10ffff;
            }
            if (lo > hi) continue;
        } else {
            if (i == m) break;
            lo = tmp[i].lo, hi = tmp[i].hi;
        }
        if (lo < 0xd800 && hi >= 0xd800) {
            rc = norm_add(L, lo, 0xd7ff);
            if (hi > 0xdfff && !rc) rc = norm_add(L, 0xe000, hi);
        } else if (lo >= 0xd800 && lo <= 0xdfff) {
            if (hi > 0xdfff) rc = norm_add(L, 0xe000, hi);
        } else {
            rc = norm_add(L, lo, hi);
        }
    }
    free(tmp);
    return rc;
}

/* The byte-range sequences of code points [lo, hi] (one encoded length, no surrogates), as alternatives. */
static int emit_utf8_ranges(lowerer *L, uint32_t lo, uint32_t hi, bool *first) {
    uint8_t a[4], b[4];
    int n = utf8_encode(lo, a);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0)
                return emit_utf8_ranges(L, lo, lo | m, first) || emit_utf8_ranges(L, (lo | m) + 1, hi, first) ? -1 : 0;
            if ((hi & m) != m)
                return emit_utf8_ranges(L, lo, (hi & ~m) - 1, first) || emit_utf8_ranges(L, hi & ~m, hi, first) ? -1
                                                                                                                  : 0;
        }
    }
    utf8_encode(hi, b);
    if (!*first && emit(L, GE_MAKE(GE_ALT, 0))) return -1;
    *first = false;
    for (int i = 0; i < n; i++)
        if (emit_byte_range(L, a[i], b[i])) return -1;
    return 0;
}

/* The body of a class rule: its ASCII part as one terminal, then each multi-byte sequence. */
static int emit_class_body(lowerer *L, const cprange *r, size_t n) {
    static const uint32_t bounds[] = {0x7f, 0x7ff, 0xffff, 0x10ffff};
    bool first = true;
    byteset ascii = {{0}};
    bool has_ascii = false;
    for (size_t i = 0; i < n && r[i].lo < 0x80; i++) {
        byteset_add_range(&ascii, r[i].lo, r[i].hi < 0x7f ? r[i].hi : 0x7f);
        has_ascii = true;
    }
    if (has_ascii) {
        if (emit_bytes(L, &ascii)) return -1;
        first = false;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t lo = r[i].lo < 0x80 ? 0x80 : r[i].lo;
        for (int k = 1; k < 4 && lo <= r[i].hi; k++) {
            if (lo > bounds[k]) continue;
            uint32_t hi = r[i].hi < bounds[k] ? r[i].hi : bounds[k];
            if (emit_utf8_ranges(L, lo, hi, &first)) return -1;
            lo = hi + 1;
        }
    }
    return emit(L, GE_MAKE(GE_END, 0));
}

/* The id of the rule that matches the normalized class in L->norm (made once per distinct class). */
static int64_t class_rule(lowerer *L) {
    size_t bytes = L->n_norm * sizeof *L->norm;
    if ((L->n_crules + 1) * 2 > L->crule_table_cap) {
        size_t cap = L->crule_table_cap ? L->crule_table_cap * 2 : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) return gbnf_oom(L->p);
        for (size_t i = 0; i < L->n_crules; i++) {
            size_t h = XXH3_64bits(L->pool + L->crules[i].off, L->crules[i].n * sizeof *L->pool) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = (uint32_t)i + 1;
        }
        free(L->crule_table);
        L->crule_table = t;
        L->crule_table_cap = cap;
    }
    size_t h = XXH3_64bits(L->norm, bytes) & (L->crule_table_cap - 1);
    for (; L->crule_table[h]; h = (h + 1) & (L->crule_table_cap - 1)) {
        size_t i = L->crule_table[h] - 1;
        if (L->crules[i].n == L->n_norm && memcmp(L->pool + L->crules[i].off, L->norm, bytes) == 0)
            return L->n_prules + (int64_t)i;
    }
    if (L->n_prules + L->n_crules + 1 > GRAMMAR_MAX_ELEMS) return gbnf_error(L->p, SIZE_MAX, "grammar too large");
    if (grow(&L->pool, &L->cap_pool, L->n_pool + L->n_norm, sizeof *L->pool, SIZE_MAX) ||
        grow(&L->crules, &L->cap_crules, L->n_crules + 1, sizeof *L->crules, SIZE_MAX))
        return gbnf_oom(L->p);
    memcpy(L->pool + L->n_pool, L->norm, bytes);
    L->crules[L->n_crules].off = (uint32_t)L->n_pool;
    L->crules[L->n_crules].n = (uint32_t)L->n_norm;
    L->n_pool += L->n_norm;
    L->crule_table[h] = (uint32_t)++L->n_crules;
    return L->n_prules + (int64_t)L->n_crules - 1;
}

static int lower_class(lowerer *L, const pclass *k) {
    if (normalize(L, k)) return -1;
    if (L->n_norm == 0) {
        byteset none = {{0}};
        return emit_bytes(L, &none);
    }
    if (L->norm[L->n_norm - 1].hi < 0x80) {
        byteset s = {{0}};
        for (size_t i = 0; i < L->n_norm; i++) byteset_add_range(&s, L->norm[i].lo, L->norm[i].hi);
        return emit_bytes(L, &s);
    }
    if (L->n_norm == 1 && L->norm[0].lo == L->norm[0].hi) return emit_code_point(L, L->norm[0].lo);
    int64_t r = class_rule(L);
    return r < 0 ? -1 : emit(L, GE_MAKE(GE_REF, r));
}

/* Byte classes: bytes in exactly the same terminals are one class (refined terminal by terminal). */
static void byte_classes(grammar *g) {
    memset(g->cls, 0, sizeof g->cls);
    uint32_t n = 1;
    for (uint32_t t = 0; t < g->n_terms; t++) {
        int16_t map[512];
        memset(map, -1, sizeof map);
        uint32_t m = 0;
        uint8_t next[256];
        for (int b = 0; b < 256; b++) {
            int key = g->cls[b] * 2 + byteset_has(&g->terms[t], (uint8_t)b);
            if (map[key] < 0) map[key] = (int16_t)m++;
            next[b] = (uint8_t)map[key];
        }
        memcpy(g->cls, next, sizeof next);
        n = m;
    }
    g->n_cls = n;
    for (int b = 255; b >= 0; b--) g->cls_rep[g->cls[b]] = (uint8_t)b;
}

static grammar *lower(gparser *p, uint32_t root) {
    grammar *g = calloc(1, sizeof *g);
    lowerer L = {.p = p, .g = g, .n_prules = (uint32_t)p->n_rules};
    uint32_t *starts = NULL;
    size_t cap_starts = 0, cap_chains = 0;
    if (!g) goto fail_oom;
    if (emit(&L, GE_MAKE(GE_REF, root)) || emit(&L, GE_MAKE(GE_END, 0))) goto fail;
    if (grow(&starts, &cap_starts, p->n_rules, sizeof *starts, SIZE_MAX)) goto fail_oom;
    for (size_t r = 0; r < p->n_rules; r++) {
        starts[r] = g->n_elems;
        for (size_t i = 0; i < p->rules[r].n; i++) {
            const pelem *e = &p->rules[r].el[i];
            int rc;
            switch (e->kind) {
            case PE_END: rc = emit(&L, GE_MAKE(GE_END, 0)); break;
            case PE_ALT: rc = emit(&L, GE_MAKE(GE_ALT, 0)); break;
            case PE_REF: rc = emit(&L, GE_MAKE(GE_REF, e->value)); break;
            case PE_CHAR: rc = emit_code_point(&L, e->value); break;
            default: rc = lower_class(&L, &p->classes[e->value]); break;
            }
            if (rc) goto fail;
        }
    }
    g->n_rules = (uint32_t)(p->n_rules + L.n_crules);
    if (grow(&starts, &cap_starts, g->n_rules, sizeof *starts, SIZE_MAX)) goto fail_oom;
    for (size_t i = 0; i < L.n_crules; i++) {
        starts[p->n_rules + i] = g->n_elems;
        if (emit_class_body(&L, L.pool + L.crules[i].off, L.crules[i].n)) goto fail;
    }
    /* Chains whose item cannot be empty (each level then takes at least one byte), for dfa_canonical(). */
    for (size_t i = 0; i < p->n_chains; i++) {
        const pchain *ch = &p->chains[i];
        if (ch->levels < 3) continue;
        bool empty = true;
        for (size_t k = 0; k < p->rules[ch->first].n && empty; k++) {
            const pelem *e = &p->rules[ch->first].el[k];
            if (e->kind == PE_ALT || e->kind == PE_END) break;
            empty = e->kind == PE_REF && p->nullable[e->value];
        }
        uint32_t lo = starts[ch->first + 1], stride = starts[ch->first + 2] - lo;
        bool alike = !empty;
        for (uint32_t k = 2; k < ch->levels && alike; k++)
            alike = starts[ch->first + k] - starts[ch->first + k - 1] == stride;
        if (!alike) continue;
        if (grow(&g->chains, &cap_chains, g->n_chains + 1, sizeof *g->chains, SIZE_MAX)) goto fail_oom;
        g->chains[g->n_chains++] = (gchain){lo, stride, ch->levels - 1};
    }
    /* Each rule's alternatives. */
    size_t n_alts = 0;
    for (uint32_t i = 2; i < g->n_elems; i++) n_alts += GE_IS_END(g->elems[i]);
    g->alt_off = malloc((g->n_rules + 1) * sizeof *g->alt_off);
    g->alts = malloc((n_alts ? n_alts : 1) * sizeof *g->alts);
    if (!g->alt_off || !g->alts) goto fail_oom;
    size_t a = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        g->alt_off[r] = (uint32_t)a;
        uint32_t q = starts[r];
        g->alts[a++] = q;
        for (;; q++) {
            if (GE_KIND(g->elems[q]) == GE_END) break;
            if (GE_KIND(g->elems[q]) == GE_ALT) g->alts[a++] = q + 1;
        }
    }
    g->alt_off[g->n_rules] = (uint32_t)a;
    byte_classes(g);
    goto out;
fail_oom:
    gbnf_oom(p);
fail:
    grammar_free(g);
    g = NULL;
out:
    free(starts);
    free(L.term_table);
    free(L.norm);
    free(L.pool);
    free(L.crules);
    free(L.crule_table);
    return g;
}

grammar *grammar_parse(const char *gbnf, size_t len, fkv_error *err) {
    gparser p;
    grammar *g = NULL;
    int64_t root = gbnf_parse(&p, gbnf, len, err);
    if (root >= 0 && !gbnf_check_left_recursion(&p)) g = lower(&p, (uint32_t)root);
    gbnf_parser_free(&p);
    return g;
}

void grammar_free(grammar *g) {
    if (!g) return;
    free(g->chains);
    free(g->elems);
    free(g->alt_off);
    free(g->alts);
    free(g->terms);
    free(g);
}
