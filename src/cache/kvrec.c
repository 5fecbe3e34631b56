#include "cache/kvrec.h"

kvrec_reuse kvrec_decide(uint32_t agreed, uint32_t n, const kvrec_policy *policy, kvrec_held_fn held,
                         const void *ctx) {
    kvrec_reuse r = {.agreed = agreed};
    const uint32_t ceiling = policy->whole ? n : n ? n - 1 : 0;
    r.capped = agreed < ceiling ? agreed : ceiling;
    r.held = held ? held(ctx, r.capped) : r.capped;
    r.reused = r.held >= policy->min_reuse ? r.held : 0;
    return r;
}
