/* component.c: delivery between components: all-or-nothing fan-out with readiness checks. */
#include "component.h"

#include "pdata/traces.h"

bool hs_component_ready(struct hs_component *c)
{
    if (c->type->ready)
        return c->type->ready(c);
    /* a synchronous pass-through processor is as ready as what follows it */
    return c->next ? hs_consumer_ready(c->next) : true;
}

bool hs_consumer_ready(const struct hs_consumer *c)
{
    for (size_t i = 0; i < c->count; i++)
        if (!hs_component_ready(c->targets[i]))
            return false;
    return true;
}

int hs_consumer_traces(struct hs_consumer *c, struct hs_traces *batch)
{
    if (c->count == 0) {
        hs_traces_unref(batch);
        return 0;
    }
    /* Single-threaded, so checking every target before delivering to any is atomic: a refused
     * batch was delivered nowhere, and the client's retry cannot duplicate it. */
    if (!hs_consumer_ready(c)) {
        hs_traces_unref(batch);
        return HS_EAGAIN;
    }
    int rc = 0;
    for (size_t i = 0; i < c->count; i++) {
        struct hs_traces *b = i + 1 < c->count ? hs_traces_ref(batch) : batch;
        struct hs_component *t = c->targets[i];
        int r = t->type->consume_traces(t, b);
        if (r && !rc)
            rc = r;
    }
    return rc;
}
