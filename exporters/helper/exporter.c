/* exporter.c: the exporter helper (exporter.h): the config rows every network exporter shares,
 * its lifecycle as a component, and the sending queue made for it (sender.h). */
#include "exporter.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/log.h"
#include "core/metrics.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

const struct hs_config_field hs_exporter_fields[] = {
    {"timeout", HS_CFG_DURATION, offsetof(struct hs_exporter_config, timeout_ms), "30s", .min = 1,
     .max = 3600000, .doc = "time limit of one request, connecting included"},
    {"headers", HS_CFG_STRMAP, offsetof(struct hs_exporter_config, headers), NULL,
     .doc = "extra request headers, e.g. X-Scope-OrgID or Authorization; a configured "
            "X-Scope-OrgID wins over the tenant each batch arrived with"},
    {"sending_queue", HS_CFG_SECTION, offsetof(struct hs_exporter_config, queue), NULL,
     .sub = hs_sender_queue_fields,
     .doc = "the queue in front of the backend (a batch is one entry): in memory, or on disk "
            "with storage"},
    {"retry_on_failure", HS_CFG_SECTION, offsetof(struct hs_exporter_config, retry), NULL,
     .sub = hs_sender_retry_fields,
     .doc = "exponential backoff with jitter, honouring Retry-After"},
    {"tls", HS_CFG_SECTION, offsetof(struct hs_exporter_config, tls), NULL,
     .sub = hs_tls_client_fields,
     .doc = "TLS for https:// endpoints, and for otlp's grpc unless insecure: CA, client "
            "certificate for mTLS, verification; reloaded on SIGHUP"},
    {0},
};

/* ---- create ----------------------------------------------------------------------------- */

void hs_exporter_init(struct hs_exporter *x, const struct hs_exporter_ops *ops, void *conf,
                      const struct hs_exporter_config *common)
{
    x->ops = ops;
    x->conf = conf;
    x->common = common;
}

bool hs_exporter_header_configured(const struct hs_exporter *x, const char *name)
{
    const struct hs_strmap *h = &x->common->headers;
    for (size_t i = 0; i < h->count; i++)
        if (strcasecmp(h->keys[i], name) == 0)
            return true;
    return false;
}

int hs_exporter_configure(struct hs_exporter *x, const struct hs_config_node *cfg, const char *path,
                          struct hs_error *err)
{
    x->tenant_fixed |= hs_exporter_header_configured(x, "X-Scope-OrgID");
    return hs_tls_client_new(&x->common->tls, hs_config_get(cfg, "tls"), path, &x->tls, err);
}

void hs_exporter_header(struct hs_exporter *x, const char *name, const char *value)
{
    if (x->header_count == x->header_cap) {
        size_t cap = x->header_cap ? 2 * x->header_cap : 8;
        char **h = realloc(x->headers, cap * sizeof(*h));
        if (!h)
            abort(); /* create time, as hs_xmalloc */
        x->headers = h;
        x->header_cap = cap;
    }
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%s: %s", name, value) != 0)
        abort(); /* a few bytes at create time: treat like hs_xmalloc */
    x->headers[x->header_count++] = (char *)b.data;
}

int hs_exporter_tenant_header(const struct hs_exporter *x, struct hs_sender_request *req,
                              const char *tenant)
{
    if (x->tenant_fixed || !tenant || !tenant[0])
        return 0;
    return hs_sender_request_header(req, "X-Scope-OrgID", tenant);
}

void hs_exporter_destroy(struct hs_component *c)
{
    struct hs_exporter *x = hs_container_of(c, struct hs_exporter, base);
    hs_sender_free(x->sender);
    free(x->sender_name);
    free(x->sender_labels);
    for (size_t i = 0; i < x->header_count; i++)
        free(x->headers[i]);
    free(x->headers);
    free(x->url);
    hs_tls_client_free(x->tls);
    hs_config_free_fields(x->ops->fields, x->conf);
    free(x); /* the exporter's struct: x is its first member */
}

/* ---- the sender ------------------------------------------------------------------------- */

static void release(void *ud, void *item)
{
    const struct hs_exporter *x = ud;
    if (x->ops->signal == HS_SIGNAL_TRACES)
        hs_traces_unref(item);
    else
        hs_profiles_unref(item);
}

/* "spans" or "profiles": metric names and log lines. */
static const char *items_name(const struct hs_exporter *x)
{
    return x->ops->signal == HS_SIGNAL_TRACES ? "spans" : "profiles";
}

/* Made on first use, as the core fills base.id after create; the configured header lines are
 * appended to the exporter's then, so they come last. */
static struct hs_sender *exporter_sender(struct hs_exporter *x)
{
    if (x->sender)
        return x->sender;
    const struct hs_strmap *h = &x->common->headers;
    for (size_t i = 0; i < h->count; i++)
        hs_exporter_header(x, h->keys[i], h->values[i]);
    const struct hs_exporter_ops *ops = x->ops;
    if (x->backend) {
        struct hs_buf name = {0}, labels = {0};
        if (hs_buf_printf(&name, "%s/%s/%s", x->base.id, x->backend, items_name(x)) != 0 ||
            hs_buf_printf(&labels, "backend=\"%s\",signal=\"%s\"", x->backend,
                          ops->signal == HS_SIGNAL_TRACES ? "traces" : "profiles") != 0)
            abort(); /* a few bytes: treat like hs_xmalloc */
        x->sender_name = (char *)name.data;
        x->sender_labels = (char *)labels.data;
    } else if (x->name_signal) {
        struct hs_buf name = {0}, labels = {0};
        if (hs_buf_printf(&name, "%s/%s", x->base.id, items_name(x)) != 0 ||
            hs_buf_printf(&labels, "signal=\"%s\"",
                          ops->signal == HS_SIGNAL_TRACES ? "traces" : "profiles") != 0)
            abort(); /* a few bytes: treat like hs_xmalloc */
        x->sender_name = (char *)name.data;
        x->sender_labels = (char *)labels.data;
    }
    x->sender = hs_sender_new(&(struct hs_sender_options){
        .id = x->base.id,
        .items = items_name(x),
        .signal = ops->signal,
        .queue = &x->common->queue,
        .retry = &x->common->retry,
        .timeout_ms = x->common->timeout_ms,
        /* with sending_queue.storage: replayed records take these from the config */
        .url = x->url,
        .headers = (const char *const *)x->headers,
        .header_count = x->header_count,
        .transport = ops->transport,
        .transport_ud = x,
        .client_flags = x->client_flags,
        .tls = x->tls,
        .hooks = {.encode = ops->encode,
                  .release = release,
                  .on_success = ops->on_success,
                  .classify = ops->classify},
        .ud = x,
        .name = x->sender_name,
        .labels = x->sender_labels,
    });
    return x->sender;
}

/* ---- the component ---------------------------------------------------------------------- */

int hs_exporter_start(struct hs_component *c, const struct hs_host *host)
{
    struct hs_exporter *x = hs_container_of(c, struct hs_exporter, base);
    x->base.metrics = host->metrics;
    int rc = hs_sender_start(exporter_sender(x), host->loop, host->metrics);
    if (rc != 0)
        return rc;
    hs_log_info(x->sender_name ? x->sender_name : c->id, "exporting %s to %s%s", items_name(x),
                x->url, x->note ? x->note : "");
    return 0;
}

bool hs_exporter_ready(struct hs_component *c)
{
    struct hs_exporter *x = hs_container_of(c, struct hs_exporter, base);
    return !x->closing && hs_sender_ready(exporter_sender(x));
}

int hs_exporter_submit(struct hs_exporter *x, void *item, size_t bytes, uint32_t count,
                       uint32_t parts)
{
    if (x->closing) {
        release(x, item);
        return HS_EAGAIN;
    }
    return hs_sender_submit(exporter_sender(x), item, bytes, count, parts);
}

int hs_exporter_submit_keyed(struct hs_exporter *x, void *item, size_t bytes, uint32_t count,
                             uint32_t parts, uint64_t key)
{
    if (x->closing) {
        release(x, item);
        return HS_EAGAIN;
    }
    return hs_sender_submit_keyed(exporter_sender(x), item, bytes, count, parts, key);
}

bool hs_exporter_room(struct hs_exporter *x, uint32_t n)
{
    return !x->closing && hs_sender_room(exporter_sender(x), n);
}

uint32_t hs_exporter_parts(const struct hs_exporter *x, const void *item)
{
    return x->ops->parts ? x->ops->parts(x, item) : 1;
}

void hs_exporter_evict(struct hs_exporter *x, hs_sender_move_fn fn, void *ud)
{
    hs_sender_evict(exporter_sender(x), fn, ud);
}

int hs_exporter_adopt(struct hs_exporter *x, struct hs_sender_moved *m)
{
    return hs_sender_adopt(exporter_sender(x), m);
}

uint32_t hs_exporter_held(const struct hs_exporter *x)
{
    return x->sender ? hs_sender_held(x->sender) : 0;
}

int hs_exporter_consume_traces(struct hs_component *c, struct hs_traces *t)
{
    struct hs_exporter *x = hs_container_of(c, struct hs_exporter, base);
    uint32_t parts = x->ops->parts ? x->ops->parts(x, t) : 1;
    return hs_exporter_submit(x, t, t->len, t->spans, parts);
}

int hs_exporter_consume_profiles(struct hs_component *c, struct hs_profiles *b)
{
    struct hs_exporter *x = hs_container_of(c, struct hs_exporter, base);
    if (!x->closing && b->count == 0) { /* nothing to send (Pyroscope answers 400 to it) */
        hs_profiles_unref(b);
        return 0;
    }
    uint32_t parts = x->ops->parts ? x->ops->parts(x, b) : 1;
    return hs_exporter_submit(x, b, b->bytes, b->count, parts);
}

static void sender_done(void *ud)
{
    struct hs_exporter *x = ud;
    x->done(&x->base);
}

void hs_exporter_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct hs_exporter *x = hs_container_of(c, struct hs_exporter, base);
    if (x->closing) /* already on its way; the first done will fire */
        return;
    x->closing = true;
    x->done = done;
    hs_sender_shutdown(exporter_sender(x), sender_done, x); /* after what is held is settled */
}

bool hs_exporter_profiles_to_pprof(struct hs_component *c, struct hs_ratelimit *rl,
                                   struct hs_profiles *b)
{
    if (b->format != HS_PROFILES_OTLP)
        return true;
    char err[200] = "";
    int rc = hs_profiles_to_pprof(b, err, sizeof(err));
    if (rc == 0)
        return true;
    /* a memory bound or out of memory: not the client's to retry */
    uint32_t suppressed;
    hs_metrics_drop(c->metrics, c->id, "convert_failed", b->count);
    if (hs_ratelimit_allow(rl, hs_now_ms(), &suppressed))
        hs_log_error(c->id,
                     "dropped %u OTLP profiles: conversion to pprof failed: %s (%u similar "
                     "messages suppressed)",
                     b->count, err[0] ? err : hs_strerror(rc), suppressed);
    hs_profiles_unref(b);
    return false;
}
