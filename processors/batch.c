/* batch.c: groups spans into larger requests before export (otelcol's batch processor). Bytes
 * are appended, never decoded (design.md §11). One batch per tenant is held, so two tenants'
 * spans never share a request (otelcol's metadata_keys: [X-Scope-OrgID]). When what follows is
 * not ready the batches are held and, once send_batch_size spans are held, new data is refused:
 * backpressure reaches the receiver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "pdata/traces.h"

struct batch_config {
    uint64_t timeout_ms;
    uint32_t send_batch_size;
};

static const struct hs_config_field batch_fields[] = {
    {"timeout", HS_CFG_DURATION, offsetof(struct batch_config, timeout_ms), "200ms", .min = 1,
     .max = 60000, .doc = "longest a span waits for its batch to fill"},
    {"send_batch_size", HS_CFG_UINT, offsetof(struct batch_config, send_batch_size), "8192",
     .min = 1, .max = 1 << 20,
     .doc = "spans that trigger a send; also the most held while the exporters are busy"},
    {0},
};

/* Tenants with a batch held at once; a new tenant beyond them first sends the oldest batch
 * on, so a client cycling tenant ids cannot grow the processor's state. */
#define BATCH_MAX_TENANTS 64

struct batch {
    struct hs_component base;
    struct batch_config conf;
    struct hs_traces *pending[BATCH_MAX_TENANTS]; /* oldest first, one per tenant */
    unsigned npending;
    uint32_t held_spans; /* over every pending batch */
    uv_timer_t timer;
    bool started, closing, timer_armed;
    hs_done_cb done;
    struct hs_counter *sent_spans, *batches_size_trigger, *batches_timeout_trigger;
};

static int batch_create(const struct hs_config_node *cfg, const char *path,
                        struct hs_component **out, struct hs_error *err)
{
    struct batch *b = hs_xcalloc(1, sizeof(*b));
    if (hs_config_decode(batch_fields, cfg, &b->conf, path, err) != 0) {
        hs_config_free_fields(batch_fields, &b->conf);
        free(b);
        return HS_EINVAL;
    }
    *out = &b->base;
    return 0;
}

static void batch_on_timer(uv_timer_t *t);

static void batch_arm(struct batch *b, uint64_t ms)
{
    uv_timer_start(&b->timer, batch_on_timer, ms, 0);
}

/* Hands pending batch i on if what follows is ready. Returns false when it is not (the batch
 * stays). */
static bool batch_send(struct batch *b, unsigned i, struct hs_counter *trigger)
{
    if (!hs_consumer_ready(b->base.next))
        return false;
    struct hs_traces *t = b->pending[i];
    uint32_t spans = t->spans;
    memmove(&b->pending[i], &b->pending[i + 1], (b->npending - i - 1) * sizeof(*b->pending));
    b->npending--;
    b->held_spans -= spans;
    hs_counter_add(trigger, 1);
    int rc = hs_consumer_traces(b->base.next, t);
    if (rc) /* only a component breaking its ready() promise gets here */
        hs_metrics_drop(b->base.metrics, b->base.id, "refused_after_ready", spans);
    else
        hs_counter_add(b->sent_spans, spans);
    return true;
}

/* Hands every held batch on while what follows is ready; what is left is looked at again soon
 * (the exporters have no "ready again" event yet, so this polls at most every 50 ms). */
static void batch_flush(struct batch *b, struct hs_counter *trigger)
{
    while (b->npending && batch_send(b, 0, trigger))
        ;
    if (b->npending)
        batch_arm(b, HS_MIN(b->conf.timeout_ms, 50));
    else
        uv_timer_stop(&b->timer);
}

static void batch_timer_closed(uv_handle_t *h)
{
    struct batch *b = h->data;
    b->done(&b->base); /* nothing of ours is in the loop any more */
}

static void batch_on_timer(uv_timer_t *t)
{
    struct batch *b = t->data;
    batch_flush(b, b->batches_timeout_trigger);
    if (b->closing && !b->npending)
        uv_close((uv_handle_t *)&b->timer, batch_timer_closed);
}

static bool batch_ready(struct hs_component *c)
{
    struct batch *b = hs_container_of(c, struct batch, base);
    if (b->closing)
        return false;
    if (b->held_spans < b->conf.send_batch_size)
        return true;
    return hs_consumer_ready(c->next); /* full, but it can go on at once */
}

/* The pending batch of t's tenant, or where a new one goes (== npending). */
static unsigned pending_of(const struct batch *b, const struct hs_traces *t)
{
    unsigned i = 0;
    while (i < b->npending && !hs_traces_same_tenant(b->pending[i], t))
        i++;
    return i;
}

static int batch_consume(struct hs_component *c, struct hs_traces *t)
{
    struct batch *b = hs_container_of(c, struct batch, base);
    if (!batch_ready(c)) {
        hs_traces_unref(t);
        return HS_EAGAIN;
    }
    unsigned i = pending_of(b, t);
    if (i < b->npending && b->pending[i]->spans >= b->conf.send_batch_size &&
        batch_send(b, i, b->batches_size_trigger))
        i = b->npending; /* sent: this tenant starts a new batch */
    if (i == b->npending && b->npending == BATCH_MAX_TENANTS) {
        if (!batch_send(b, 0, b->batches_size_trigger)) {
            hs_traces_unref(t);
            return HS_EAGAIN;
        }
        i = b->npending;
    }
    uint32_t spans = t->spans;
    if (i == b->npending) {
        /* the first data of a batch: keep the request itself, copying only when more come */
        b->pending[b->npending++] = t;
        if (b->npending == 1)
            batch_arm(b, b->conf.timeout_ms);
    } else {
        int rc = hs_traces_make_writable(&b->pending[i]);
        if (rc == 0)
            rc = hs_traces_append(b->pending[i], t);
        hs_traces_unref(t);
        if (rc)
            return rc;
    }
    b->held_spans += spans;
    if (b->pending[i]->spans >= b->conf.send_batch_size &&
        batch_send(b, i, b->batches_size_trigger) && b->npending == 0)
        uv_timer_stop(&b->timer);
    else if (b->held_spans >= b->conf.send_batch_size)
        batch_flush(b, b->batches_size_trigger);
    return 0;
}

static int batch_start(struct hs_component *c, const struct hs_host *host)
{
    struct batch *b = hs_container_of(c, struct batch, base);
    char labels[256];
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", c->id,
             c->pipeline ? c->pipeline : "");
    b->sent_spans = hs_metrics_counter(host->metrics, "processor_batch_sent_spans_total",
                                       "Spans sent on by the batch processor", labels);
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\",trigger=\"size\"", c->id,
             c->pipeline ? c->pipeline : "");
    b->batches_size_trigger = hs_metrics_counter(host->metrics, "processor_batch_batches_total",
                                                 "Batches sent, by trigger", labels);
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\",trigger=\"timeout\"", c->id,
             c->pipeline ? c->pipeline : "");
    b->batches_timeout_trigger = hs_metrics_counter(host->metrics, "processor_batch_batches_total",
                                                    "Batches sent, by trigger", labels);
    uv_timer_init(host->loop, &b->timer);
    b->timer.data = b;
    b->started = true;
    return 0;
}

static void batch_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct batch *b = hs_container_of(c, struct batch, base);
    if (b->closing) /* already on its way; the first done will fire */
        return;
    b->closing = true;
    if (!b->started) {
        done(c);
        return;
    }
    b->done = done;
    batch_flush(b, b->batches_timeout_trigger); /* hand what we hold downstream first */
    if (!b->npending)
        uv_close((uv_handle_t *)&b->timer, batch_timer_closed);
    /* else the timer retries until the exporters take it, then closes */
}

static void batch_destroy(struct hs_component *c)
{
    struct batch *b = hs_container_of(c, struct batch, base);
    for (unsigned i = 0; i < b->npending; i++)
        hs_traces_unref(b->pending[i]);
    hs_config_free_fields(batch_fields, &b->conf);
    free(b);
}

const struct hs_component_type hs_processor_batch = {
    .name = "batch",
    .kind = HS_KIND_PROCESSOR,
    .signals = HS_SIGNAL_TRACES,
    .doc = "Groups spans into larger requests before export.",
    .fields = batch_fields,
    .create = batch_create,
    .start = batch_start,
    .consume_traces = batch_consume,
    .ready = batch_ready,
    .shutdown = batch_shutdown,
    .destroy = batch_destroy,
};
