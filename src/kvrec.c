#include "kvrec.h"

#include <stdlib.h>
#include <string.h>

bool kvrec_init(kvrec *r, uint32_t cap) {
    memset(r, 0, sizeof *r);
    r->ids = malloc(sizeof(int32_t) * (cap ? cap : 1));
    r->cap = cap;
    return r->ids != NULL;
}

void kvrec_free(kvrec *r) {
    free(r->ids);
    memset(r, 0, sizeof *r);
}

void kvrec_clear(kvrec *r) {
    r->len = 0;
    r->frontier = 0;
    r->tainted = false;
}

void kvrec_taint(kvrec *r) { r->tainted = true; }

void kvrec_rewind(kvrec *r, uint32_t pos) {
    if (pos < r->len) r->len = pos;
    if (pos < r->frontier) r->frontier = pos;
}

void kvrec_record(kvrec *r, const int32_t *ids, uint32_t n, uint32_t pos0, bool by_prefill) {
    if (pos0 > r->len || n > r->cap - pos0) {
        /* A gap (or a write the KV cannot hold): the record cannot name what fills the positions between,
         * so it must describe nothing rather than claim rows it does not know. */
        r->len = 0;
        r->frontier = 0;
        r->tainted = true;
        return;
    }
    kvrec_rewind(r, pos0);
    memcpy(r->ids + pos0, ids, sizeof(int32_t) * n);
    r->len = pos0 + n;
    if (by_prefill && r->frontier == pos0) r->frontier = r->len;
}

uint32_t kvrec_reusable(const kvrec *r, const int32_t *prompt, uint32_t n, const kvrec_policy *policy) {
    if (r->tainted || r->len == 0 || n == 0) return 0;
    uint32_t ceiling = r->len < n - 1 ? r->len : n - 1;
    if (policy->bound_to_frontier && r->frontier < ceiling) ceiling = r->frontier;
    uint32_t common = 0;
    while (common < ceiling && r->ids[common] == prompt[common]) common++;
    return common >= policy->min_reuse ? common : 0;
}
