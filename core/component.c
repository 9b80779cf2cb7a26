/* component.c: delivery between components: all-or-nothing fan-out with readiness checks. */
#include "component.h"

#include "pdata/profiles.h"
#include "pdata/traces.h"

static bool consumer_ready(const struct hs_consumer *c, enum hs_signal sig);

static bool component_ready(struct hs_component *c, enum hs_signal sig)
{
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

int hs_consumer_traces(struct hs_consumer *c, struct hs_traces *batch)
{
    if (c->count == 0) {
        hs_traces_unref(batch);
        return 0;
    }
    /* Single-threaded, so checking every target before delivering to any is atomic: a refused
     * batch was delivered nowhere, and the client's retry cannot duplicate it. */
    if (!consumer_ready(c, HS_SIGNAL_TRACES)) {
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

int hs_consumer_profiles(struct hs_consumer *c, struct hs_profiles *batch)
{
    if (!c || c->count == 0) {
        hs_profiles_unref(batch);
        return 0;
    }
    if (!consumer_ready(c, HS_SIGNAL_PROFILES)) {
        hs_profiles_unref(batch);
        return HS_EAGAIN;
    }
    int rc = 0;
    for (size_t i = 0; i < c->count; i++) {
        struct hs_profiles *b = i + 1 < c->count ? hs_profiles_ref(batch) : batch;
        struct hs_component *t = c->targets[i];
        int r = t->type->consume_profiles(t, b);
        if (r && !rc)
            rc = r;
    }
    return rc;
}
