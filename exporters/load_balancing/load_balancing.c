/* load_balancing.c: the `load_balancing` exporter (`loadbalancing` too, otelcol's old name):
 * spans AND profiles routed by the same key (tenant + service by default) over a consistent-hash
 * ring of backends from a static list or DNS, so one (tenant, service) always meets one
 * correlator across a tier of hotspan gateways (design.md §2). Each backend is an otlp and a
 * pyroscope exporter (backend.c) with its own queue; a batch is split by key before anything is
 * queued and is taken by all its backends' queues or refused whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/log.h"
#include "exporters/helper/exporter.h"
#include "exporters/helper/queue_store.h"
#include "exporters/load_balancing/lb_int.h"
#include "exporters/load_balancing/load_balancing.h"
#include "exporters/load_balancing/ring.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

/* Keys remembered to count what a ring change moves (16 bytes of table each, at most). */
#define KEYS_TRACKED 65536

static const char *const route_choices[] = {"tenant_service", "service", "traceID", NULL};

static const struct hs_config_field protocol_fields[] = {
    {"otlp", HS_CFG_SECTION, offsetof(struct lb_protocol, otlp), NULL,
     .sub = hs_otlp_backend_fields,
     .doc = "spans, to each backend's OTLP port: the otlp exporter's keys but endpoint. Every "
            "backend has its own queue and retries (with sending_queue.storage, a store file per "
            "backend); plaintext unless tls is written"},
    {"pyroscope", HS_CFG_SECTION, offsetof(struct lb_protocol, pyroscope), NULL,
     .sub = hs_pyroscope_backend_fields,
     .doc = "profiles, to each backend's Pyroscope port: the pyroscope exporter's keys but "
            "endpoint; plaintext unless tls is written"},
    {0},
};

static const struct hs_config_field lb_fields[] = {
    {"routing_key", HS_CFG_ENUM, offsetof(struct lb_config, routing_key), "tenant_service",
     .choices = route_choices,
     .doc = "what picks a backend: tenant_service (X-Scope-OrgID + service.name / service_name: "
            "one correlator per service and tenant), service, or traceID (for tail sampling "
            "downstream; profiles still go by tenant_service, so most spans miss their profiles)"},
    {"resolver", HS_CFG_SECTION, offsetof(struct lb_config, resolver), NULL,
     .sub = hs_resolver_fields, .required = true,
     .doc = "where the backends are: static or dns, one of them. A backend is `host` or "
            "`host:port` (the OTLP port)"},
    {"protocol", HS_CFG_SECTION, offsetof(struct lb_config, protocol), NULL, .sub = protocol_fields,
     .doc = "how each backend is sent to"},
    {0},
};

/* ---- create ----------------------------------------------------------------------------- */

static void lb_destroy(struct hs_component *c);

/* protocol.otlp and protocol.pyroscope are checked by making a backend of each, once, with the
 * same code the backends are made with later: every problem is reported now, at its key. */
static int probe(struct lb *lb, const struct hs_config_node *cfg, const char *path,
                 struct hs_error *err)
{
    const struct hs_config_node *proto = hs_config_get(cfg, "protocol");
    int rc = 0;
    for (int sig = 0; sig < LB_SIGNALS; sig++) {
        const char *name = sig == LB_TRACES ? "otlp" : "pyroscope";
        const struct hs_config_node *n = hs_config_get(proto, name);
        const struct hs_tls_client_config *tls = sig == LB_TRACES
                                                     ? &lb->conf.protocol.otlp.common.tls
                                                     : &lb->conf.protocol.pyroscope.common.tls;
        lb->tls[sig] = hs_config_get(n, "tls") && !tls->insecure;
        char p[300], ep[64];
        snprintf(p, sizeof(p), "%s.protocol.%s", path, name);
        snprintf(ep, sizeof(ep), "%s://backend.invalid:1", lb->tls[sig] ? "https" : "http");
        struct hs_component *c = NULL;
        int r = sig == LB_TRACES
                    ? hs_otlp_backend_new(&lb->conf.protocol.otlp, ep, n ? n : cfg, p, &c, err)
                    : hs_pyroscope_backend_new(&lb->conf.protocol.pyroscope, ep, n ? n : cfg, p, &c,
                                               err);
        if (c)
            c->type->destroy(c);
        rc |= r;
    }
    return rc ? HS_EINVAL : 0;
}

static int lb_create(const struct hs_config_node *cfg, const char *path, struct hs_component **out,
                     struct hs_error *err)
{
    struct lb *lb = hs_xcalloc(1, sizeof(*lb));
    hs_queue_init(&lb->retiring);
    int rc = hs_config_decode(lb_fields, cfg, &lb->conf, path, err);
    char p[300];
    snprintf(p, sizeof(p), "%s.resolver", path);
    const struct hs_config_node *rn = hs_config_get(cfg, "resolver");
    if (rc == 0 && hs_resolver_config_check(&lb->conf.resolver, rn ? rn : cfg, p, err) != 0)
        rc = HS_EINVAL;
    if (rc == 0 && probe(lb, cfg, path, err) != 0)
        rc = HS_EINVAL;
    if (rc != 0) {
        lb_destroy(&lb->base);
        return HS_EINVAL;
    }
    const char *rk = lb->conf.routing_key;
    lb->route = strcmp(rk, "service") == 0   ? HS_LB_ROUTE_SERVICE
                : strcmp(rk, "traceID") == 0 ? HS_LB_ROUTE_TRACE_ID
                                             : HS_LB_ROUTE_TENANT_SERVICE;
    lb->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    hs_lb_keys_init(&lb->keys, KEYS_TRACKED);
    *out = &lb->base;
    return 0;
}

/* ---- the ring ---------------------------------------------------------------------------- */

static double gauge_backends(void *ud)
{
    const struct lb *lb = ud;
    return lb->ring ? (double)hs_ring_size(lb->ring) : 0;
}

static double gauge_keys(void *ud)
{
    return (double)hs_lb_keys_count(&((const struct lb *)ud)->keys);
}

/* Backends found on disk at start but not in the first answer: made, then retired at once, so
 * what a previous run queued for them goes to the keys' owners now. */
static void retire_on_disk(struct lb *lb)
{
    for (size_t i = 0; i < lb->ndisk; i++) {
        if (hs_ring_find(lb->ring, lb->on_disk[i]) < 0) {
            hs_log_info(lb->base.id,
                        "backend %s is not in the resolver's answer but has a queue on disk: "
                        "what it holds goes to the keys' owners now",
                        lb->on_disk[i]);
            lb_backend_retire(lb_backend_new(lb, lb->on_disk[i]));
        }
        free(lb->on_disk[i]);
    }
    free(lb->on_disk);
    lb->on_disk = NULL;
    lb->ndisk = 0;
}

static void on_change(struct hs_resolver *r, const char *const *names, size_t n, void *ud)
{
    struct lb *lb = ud;
    struct hs_ring *old = lb->ring, *ring = hs_ring_new(names, n);
    struct lb_backend **olds = lb->backends;
    size_t size = hs_ring_size(ring), oldsize = old ? hs_ring_size(old) : 0, added = 0;
    struct lb_backend **bs = hs_xcalloc(size ? size : 1, sizeof(*bs));
    for (size_t i = 0; i < size; i++) {
        int j = old ? hs_ring_find(old, hs_ring_name(ring, i)) : -1;
        if (j >= 0) { /* stays: keeps its queue and connections */
            bs[i] = olds[j];
            olds[j] = NULL;
        } else {
            bs[i] = lb_backend_new(lb, hs_ring_name(ring, i));
            added++;
        }
    }
    uint64_t moved = old ? hs_lb_keys_moved(&lb->keys, old, ring) : 0;
    lb->ring = ring;
    lb->backends = bs;
    hs_counter_add(lb->ring_changes, 1);
    hs_counter_add(lb->keys_moved, moved);
    size_t removed = oldsize - (size - added);
    hs_log_info(lb->base.id,
                "%zu backends (%zu joined, %zu left; first %s): %llu of %zu known keys move", size,
                added, removed, size ? hs_ring_name(ring, 0) : "-", (unsigned long long)moved,
                hs_lb_keys_count(&lb->keys));
    for (size_t j = 0; j < oldsize; j++) /* after the swap: their items go by the new ring */
        if (olds[j])
            lb_backend_retire(olds[j]);
    free(olds);
    hs_ring_free(old);
    if (lb->on_disk)
        retire_on_disk(lb);
    (void)r;
}

void hs_load_balancing_answer(struct hs_component *c, const char *const *names, size_t n)
{
    on_change(NULL, names, n, hs_container_of(c, struct lb, base));
}

/* ---- start ------------------------------------------------------------------------------- */

static void found_on_disk(void *ud, const char *id)
{
    struct lb *lb = ud;
    /* "<id>/<backend>/<spans|profiles>": the helper's names for our backends' stores (a name
     * with more slashes is another exporter's, e.g. load_balancing/other's) */
    const char *b = id + strlen(lb->base.id) + 1, *slash = strchr(b, '/');
    if (!slash || slash == b || (strcmp(slash, "/spans") != 0 && strcmp(slash, "/profiles") != 0))
        return;
    size_t n = (size_t)(slash - b);
    for (size_t i = 0; i < lb->ndisk; i++)
        if (strlen(lb->on_disk[i]) == n && memcmp(lb->on_disk[i], b, n) == 0)
            return;
    lb->on_disk = realloc(lb->on_disk, (lb->ndisk + 1) * sizeof(*lb->on_disk));
    if (!lb->on_disk)
        abort(); /* start time, a few names: as hs_xmalloc */
    lb->on_disk[lb->ndisk] = hs_xcalloc(1, n + 1);
    memcpy(lb->on_disk[lb->ndisk++], b, n);
}

static void metrics_register(struct lb *lb)
{
    struct hs_metrics *m = lb->host.metrics;
    char labels[300];
    snprintf(labels, sizeof(labels), "exporter=\"%s\"", lb->base.id);
    hs_metrics_gauge(m, "load_balancing_backends", "Backends in the ring (the resolver's answer)",
                     labels, gauge_backends, lb);
    hs_metrics_gauge(m, "load_balancing_keys",
                     "Routing keys seen (up to 65536, then counted afresh), over which a ring "
                     "change's moved keys are counted",
                     labels, gauge_keys, lb);
    lb->ring_changes = hs_metrics_counter(
        m, "load_balancing_ring_changes_total",
        "Times the resolver's answer changed the backends, the first answer included", labels);
    lb->keys_moved =
        hs_metrics_counter(m, "load_balancing_keys_moved_total",
                           "Routing keys seen that a ring change sent to another backend", labels);
    for (int sig = 0; sig < LB_SIGNALS; sig++) {
        snprintf(labels, sizeof(labels), "exporter=\"%s\",backend=\"none\",signal=\"%s\"",
                 lb->base.id, sig == LB_TRACES ? "traces" : "profiles");
        lb->refused_none[sig] = hs_metrics_counter(
            m, "load_balancing_refused_total",
            "Spans or profiles refused upstream because a backend they route to had no room in "
            "its queue (the whole batch is refused)",
            labels);
    }
}

static int lb_start(struct hs_component *c, const struct hs_host *host)
{
    struct lb *lb = hs_container_of(c, struct lb, base);
    lb->host = *host;
    lb->base.metrics = host->metrics;
    metrics_register(lb);
    const char *dirs[] = {lb->conf.protocol.otlp.common.queue.storage,
                          lb->conf.protocol.pyroscope.common.queue.storage};
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "%s/", lb->base.id);
    for (size_t i = 0; i < HS_ARRAY_SIZE(dirs); i++)
        if (dirs[i] && (i == 0 || !dirs[0] || strcmp(dirs[0], dirs[i]) != 0) &&
            hs_queue_store_list(dirs[i], prefix, found_on_disk, lb) < 0)
            hs_log_warn(lb->base.id, "cannot list %s: queues of backends that left are not found",
                        dirs[i]);
    lb->started = true;
    lb->resolver = hs_resolver_new(host->loop, &lb->conf.resolver, lb->base.id, on_change, lb);
    int rc = hs_resolver_start(lb->resolver); /* static: the first answer is given now */
    if (rc != 0) {
        hs_metrics_gauge_remove(host->metrics, lb);
        return rc;
    }
    hs_log_info(lb->base.id, "routing spans and profiles by %s over the backends of %s",
                lb->conf.routing_key,
                lb->conf.resolver.has_dns ? lb->conf.resolver.dns.hostname : "a static list");
    return 0;
}

/* ---- routing ----------------------------------------------------------------------------- */

static void release(int sig, void *batch)
{
    if (sig == LB_TRACES)
        hs_traces_unref(batch);
    else
        hs_profiles_unref(batch);
}

static struct hs_exporter *exporter_of(struct lb *lb, int backend, int sig)
{
    struct hs_component *c = lb->backends[backend]->exp[sig];
    return c ? hs_container_of(c, struct hs_exporter, base) : NULL;
}

struct hs_exporter *lb_taker(struct lb *lb, uint64_t key, int sig)
{
    uint32_t rank[8];
    size_t n = lb->ring ? hs_ring_rank(lb->ring, key, rank, HS_ARRAY_SIZE(rank)) : 0;
    for (size_t i = 0; i < n; i++) { /* the owner, unless its exporter waits (backend.c) */
        struct hs_exporter *x = exporter_of(lb, (int)rank[i], sig);
        if (x)
            return x;
    }
    return NULL;
}

static int split(struct lb *lb, int sig, void *batch)
{
    return sig == LB_TRACES ? hs_lb_split_traces(batch, lb->route, lb->ring, &lb->parts)
                            : hs_lb_split_profiles(batch, lb->route, lb->ring, &lb->parts);
}

/* Is there room for every part (each backend's queue taking all of its parts)? When not, the
 * parts are counted refused at their backends. */
static bool room_for_all(struct lb *lb, int sig)
{
    const struct hs_lb_parts *ps = &lb->parts;
    bool ok = true;
    for (size_t i = 0; i < ps->n && ok; i++) {
        uint32_t need = 0;
        for (size_t j = 0; j < ps->n; j++)
            need += ps->v[j].backend == ps->v[i].backend;
        struct hs_exporter *x = exporter_of(lb, ps->v[i].backend, sig);
        ok = x && hs_exporter_room(x, need);
    }
    for (size_t i = 0; i < ps->n && !ok; i++)
        lb_count_refused(lb, lb->backends[ps->v[i].backend], sig, ps->v[i].items);
    return ok;
}

static int lb_consume(struct lb *lb, int sig, void *batch, uint32_t items)
{
    if (lb->closing || !lb->ring || hs_ring_size(lb->ring) == 0) {
        lb_count_refused(lb, NULL, sig, items);
        release(sig, batch);
        return HS_EAGAIN;
    }
    if (split(lb, sig, batch) != 0) /* out of memory: the client may retry */
        return HS_EAGAIN;
    if (!room_for_all(lb, sig)) {
        hs_lb_parts_release(&lb->parts, sig == LB_PROFILES);
        return HS_EAGAIN;
    }
    int rc = 0;
    for (size_t i = 0; i < lb->parts.n; i++) {
        struct hs_lb_part *p = &lb->parts.v[i];
        struct hs_exporter *x = exporter_of(lb, p->backend, sig);
        hs_lb_keys_note(&lb->keys, p->key);
        /* only a store that cannot write refuses here (counted by the exporter); the parts
         * queued before it are sent, and the client's retry sends them again */
        if (hs_exporter_submit_keyed(x, p->batch, p->bytes, p->items,
                                     hs_exporter_parts(x, p->batch), p->key) != 0)
            rc = HS_EAGAIN;
    }
    lb->parts.n = 0;
    return rc;
}

static int lb_consume_traces(struct hs_component *c, struct hs_traces *t)
{
    return lb_consume(hs_container_of(c, struct lb, base), LB_TRACES, t, t->spans);
}

static int lb_consume_profiles(struct hs_component *c, struct hs_profiles *b)
{
    struct lb *lb = hs_container_of(c, struct lb, base);
    if (b->count == 0 && !lb->closing) { /* nothing to send (Pyroscope answers 400 to it) */
        hs_profiles_unref(b);
        return 0;
    }
    /* the backends speak Pyroscope's push or /ingest: an OTLP batch becomes pprof before it is
     * split, as the pyroscope exporter would make it */
    if (!hs_exporter_profiles_to_pprof(c, &lb->log_rl, b))
        return 0;
    return lb_consume(lb, LB_PROFILES, b, b->count);
}

void lb_reroute_batch(struct lb *lb, int sig, void *batch)
{
    uint32_t items = sig == LB_TRACES ? ((struct hs_traces *)batch)->spans
                                      : ((struct hs_profiles *)batch)->count;
    /* its own parts: this runs inside a sender's callback, possibly during lb_consume */
    struct hs_lb_parts parts = {0}, keep = lb->parts;
    lb->parts = parts;
    if (!lb->ring || split(lb, sig, batch) != 0) {
        hs_metrics_drop(lb->host.metrics, lb->base.id, "not_rerouted", items);
        if (!lb->ring)
            release(sig, batch);
    }
    for (size_t i = 0; i < lb->parts.n; i++) {
        struct hs_lb_part *p = &lb->parts.v[i];
        struct hs_exporter *x = lb_taker(lb, p->key, sig);
        struct hs_sender_moved m = {.item = p->batch,
                                    .bytes = p->bytes,
                                    .count = p->items,
                                    .parts = x ? hs_exporter_parts(x, p->batch) : 1,
                                    .key = p->key};
        hs_lb_keys_note(&lb->keys, p->key);
        if (!x || hs_exporter_adopt(x, &m) != 0) {
            hs_metrics_drop(lb->host.metrics, lb->base.id, "not_rerouted", p->items);
            release(sig, m.item);
        }
    }
    hs_lb_parts_free(&lb->parts);
    lb->parts = keep;
}

static bool lb_ready(struct hs_component *c)
{
    struct lb *lb = hs_container_of(c, struct lb, base);
    /* a full backend refuses only its keys' batches, in consume: the others flow */
    return !lb->closing && lb->ring && hs_ring_size(lb->ring) > 0;
}

/* ---- shutdown ---------------------------------------------------------------------------- */

/* Order: the resolver stops; backends that left finish handing over what they had in flight
 * (to the others, still open); then the others drain as any exporter does. */
void lb_shutdown_step(struct lb *lb)
{
    if (!lb->resolver_done || lb->phase == 3)
        return;
    if (lb->phase == 1) {
        if (!hs_queue_empty(&lb->retiring))
            return;
        lb->phase = 2;
        size_t n = lb->ring ? hs_ring_size(lb->ring) : 0;
        lb->closing_backends = 1; /* held while they are told, as some are done at once */
        for (size_t i = 0; i < n; i++) {
            lb->closing_backends++;
            lb_backend_shutdown(lb->backends[i]);
        }
        lb->closing_backends--;
    }
    if (lb->phase == 2 && lb->closing_backends == 0) {
        lb->phase = 3;
        hs_metrics_gauge_remove(lb->host.metrics, lb);
        lb->done(&lb->base);
    }
}

static void resolver_done(struct hs_resolver *r, void *ud)
{
    struct lb *lb = ud;
    lb->resolver_done = true;
    lb_shutdown_step(lb);
    (void)r;
}

static void lb_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct lb *lb = hs_container_of(c, struct lb, base);
    if (lb->closing) /* already on its way; the first done will fire */
        return;
    lb->closing = true;
    lb->done = done;
    if (!lb->started) {
        done(c);
        return;
    }
    lb->phase = 1;
    hs_resolver_shutdown(lb->resolver, resolver_done);
}

static void lb_destroy(struct hs_component *c)
{
    struct lb *lb = hs_container_of(c, struct lb, base);
    size_t n = lb->ring ? hs_ring_size(lb->ring) : 0;
    for (size_t i = 0; i < n; i++)
        lb_backend_free(lb->backends[i]);
    while (!hs_queue_empty(&lb->retiring)) { /* only when start failed half-way */
        struct hs_queue *q = hs_queue_head(&lb->retiring);
        hs_queue_remove(q);
        lb_backend_free(hs_container_of(q, struct lb_backend, link));
    }
    free(lb->backends);
    hs_ring_free(lb->ring);
    hs_resolver_free(lb->resolver);
    for (size_t i = 0; i < lb->ndisk; i++)
        free(lb->on_disk[i]);
    free(lb->on_disk);
    hs_lb_keys_free(&lb->keys);
    hs_lb_parts_free(&lb->parts);
    hs_config_free_fields(lb_fields, &lb->conf);
    free(lb);
}

#define LB_TYPE(type_name, type_doc)                                                               \
    {                                                                                              \
        .name = (type_name), .kind = HS_KIND_EXPORTER,                                             \
        .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES, .doc = (type_doc), .fields = lb_fields,  \
        .create = lb_create, .start = lb_start, .consume_traces = lb_consume_traces,               \
        .consume_profiles = lb_consume_profiles, .ready = lb_ready, .shutdown = lb_shutdown,       \
        .destroy = lb_destroy,                                                                     \
    }

const struct hs_component_type hs_exporter_load_balancing =
    LB_TYPE("load_balancing", "Routes spans and profiles by tenant + service (or service, or "
                              "trace id) over a consistent-hash ring of hotspan gateways from a "
                              "static list or DNS: one service's spans and profiles meet in one "
                              "correlator.");

/* The OpenTelemetry Collector's former name, so its configs carry over. */
const struct hs_component_type hs_exporter_loadbalancing =
    LB_TYPE("loadbalancing", "Alias of load_balancing (the OpenTelemetry Collector's old name).");
