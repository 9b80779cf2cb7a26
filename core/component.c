/* component.c: delivery between components: all-or-nothing fan-out with readiness checks, over
 * batches it knows only through their struct hs_batch_ops. */
#include "component.h"

static bool consumer_ready(const struct hs_consumer *c, enum hs_signal sig);

static bool component_ready(struct hs_component *c, enum hs_signal sig)
{
    if (sig == HS_SIGNAL_PROFILES && c->type->ready_profiles)
        return c->type->ready_profiles(c);
    if (c->type->ready)
        return c->type->ready(c);
    /* a synchronous pass-through processor is as ready as what follows it */
    const struct hs_consumer *next = sig == HS_SIGNAL_PROFILES ? c->next_profiles : c->next;
    return next ? consumer_ready(next, sig) : true;
}

static bool consumer_ready(const struct hs_consumer *c, enum hs_signal sig)
{
    for (size_t i = 0; i < c->count; i++)
        if (!component_ready(c->targets[i], sig))
            return false;
    return true;
}

bool hs_component_ready(struct hs_component *c)
{
    return component_ready(c, HS_SIGNAL_TRACES);
}

bool hs_consumer_ready(const struct hs_consumer *c)
{
    return consumer_ready(c, HS_SIGNAL_TRACES);
}

static int consume(struct hs_component *t, enum hs_signal sig, void *batch)
{
    return sig == HS_SIGNAL_PROFILES ? t->type->consume_profiles(t, batch)
                                     : t->type->consume_traces(t, batch);
}

int hs_consumer_deliver(struct hs_consumer *c, const struct hs_batch_ops *ops, void *batch)
{
    if (!c || c->count == 0) {
        ops->unref(batch);
        return 0;
    }
    /* Single-threaded, so checking every target before delivering to any is atomic: a refused
     * batch was delivered nowhere, and the client's retry cannot duplicate it. */
    if (!consumer_ready(c, ops->signal)) {
        ops->unref(batch);
        return HS_EAGAIN;
    }
    int rc = 0;
    for (size_t i = 0; i < c->count; i++) {
        void *b = i + 1 < c->count ? ops->ref(batch) : batch;
        int r = consume(c->targets[i], ops->signal, b);
        if (r && !rc)
            rc = r;
    }
    return rc;
}
