#include "cache/kvrec.h"

kvrec_reuse kvrec_decide(uint32_t agreed, uint32_t n, const kvrec_policy *policy, kvrec_held_fn held,
                         const void *ctx) {
    kvrec_reuse r = {.agreed = agreed};
    const uint32_t ceiling = policy->whole ? n : n ? n - 1 : 0;
    r.capped = agreed < ceiling ? agreed : ceiling;
    r.held = held ? held(ctx, r.capped) : r.capped;
    /* down to a length where both are there: each answer is at most its question, so this ends */
    uint32_t p = r.held, q;
    while (policy->state && (q = policy->state(policy->state_ctx, p)) != p) p = held ? held(ctx, q) : q;
    r.state = p;
    r.reused = r.state >= policy->min_reuse ? r.state : 0;
    return r;
}
