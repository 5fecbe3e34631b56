/* gbnf_leftrec.c — empty rules by a worklist, left recursion by a depth-first search over "can come first" edges
 * (contract in gbnf_leftrec.h). */
#include "constrain/gbnf_leftrec.h"

#include <stdlib.h>

int gbnf_check_left_recursion(gparser *p) {
    size_t n = p->n_rules;
    /* Nullable rules by a worklist: an alternative is nullable once all its references are. */
    uint8_t *nullable = calloc(n ? n : 1, 1), *color = NULL;
    uint32_t *pending = NULL, *occ_off = calloc(n + 1, sizeof *occ_off), *occ = NULL, *work = NULL;
    uint32_t *alt_rule = NULL, *edge_off = calloc(n + 1, sizeof *edge_off), *edges = NULL;
    size_t n_alts = 0, n_refs = 0;
    int rc = -1;
    if (!nullable || !occ_off || !edge_off) goto out;
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < p->rules[r].n; i++) {
            const pelem *e = &p->rules[r].el[i];
            if (e->kind == PE_ALT || e->kind == PE_END) n_alts++;
            if (e->kind == PE_REF) {
                n_refs++;
                occ_off[e->value + 1]++;
            }
        }
    pending = calloc(n_alts + 1, sizeof *pending);
    alt_rule = calloc(n_alts + 1, sizeof *alt_rule);
    occ = calloc(n_refs + 1, sizeof *occ);
    work = calloc(n + 1, sizeof *work);
    edges = calloc(n_refs + 1, sizeof *edges);
    if (!pending || !alt_rule || !occ || !work || !edges) goto out;
    for (size_t r = 0; r < n; r++) occ_off[r + 1] += occ_off[r];
    {
        uint32_t *fill = calloc(n + 1, sizeof *fill);
        if (!fill) goto out;
        size_t a = 0, n_work = 0;
        for (size_t r = 0; r < n; r++) {
            bool terminal = false;
            for (size_t i = 0; i < p->rules[r].n; i++) {
                const pelem *e = &p->rules[r].el[i];
                if (e->kind == PE_REF) {
                    pending[a]++;
                    occ[occ_off[e->value] + fill[e->value]++] = (uint32_t)a;
                } else if (e->kind == PE_CHAR || e->kind == PE_CLASS) {
                    terminal = true;
                } else {
                    alt_rule[a] = (uint32_t)r;
                    if (terminal) pending[a] = UINT32_MAX;
                    else if (pending[a] == 0 && !nullable[r]) nullable[r] = 1, work[n_work++] = (uint32_t)r;
                    a++;
                    terminal = false;
                }
            }
        }
        free(fill);
        while (n_work) {
            uint32_t s = work[--n_work];
            for (uint32_t k = occ_off[s]; k < occ_off[s + 1]; k++) {
                uint32_t alt = occ[k];
                if (pending[alt] == UINT32_MAX || --pending[alt]) continue;
                uint32_t r = alt_rule[alt];
                if (!nullable[r]) nullable[r] = 1, work[n_work++] = r;
            }
        }
    }
    /* Left edges r -> s: s can come first in r. */
    for (size_t r = 0, m = 0; r < n; r++) {
        edge_off[r] = (uint32_t)m;
        bool left = true;
        for (size_t i = 0; i < p->rules[r].n; i++) {
            const pelem *e = &p->rules[r].el[i];
            if (e->kind == PE_REF) {
                if (left) edges[m++] = e->value;
                if (!nullable[e->value]) left = false;
            } else if (e->kind == PE_CHAR || e->kind == PE_CLASS) {
                left = false;
            } else {
                left = true;
            }
        }
        edge_off[r + 1] = (uint32_t)m;
    }
    /* Depth-first search for a cycle: color 1 on the path, 2 done; work[] is the path, pending[] each one's next
     * edge (both have room: the path holds distinct rules). */
    color = calloc(n ? n : 1, 1);
    if (!color) goto out;
    for (size_t root = 0; root < n; root++) {
        if (color[root]) continue;
        size_t depth = 0;
        work[depth] = (uint32_t)root;
        pending[depth] = edge_off[root];
        color[root] = 1;
        while (1) {
            uint32_t r = work[depth];
            if (pending[depth] == edge_off[r + 1]) {
                color[r] = 2;
                if (depth == 0) break;
                depth--;
                continue;
            }
            uint32_t s = edges[pending[depth]++];
            if (color[s] == 1) {
                const prule *u = &p->rules[p->rules[s].origin];
                gbnf_error(p, u->def_at, "left recursion: rule '%.*s' can begin with itself (directly, through rules "
                                         "that can be empty, or by repeating something that can be empty)",
                           (int)u->name_len, p->src + u->name_at);
                goto out;
            }
            if (color[s] == 0) {
                color[s] = 1;
                depth++;
                work[depth] = s;
                pending[depth] = edge_off[s];
            }
        }
    }
    rc = 0;
out:
    if (rc && !p->failed) gbnf_oom(p);
    free(color);
    p->nullable = nullable; /* lowering asks whether a chain's item can be empty */
    free(pending);
    free(occ_off);
    free(occ);
    free(work);
    free(alt_rule);
    free(edge_off);
    free(edges);
    return rc;
}
