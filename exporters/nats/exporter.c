/* exporter.c: the `nats` exporter: trace and profile batches published to NATS JetStream, one
 * message per partition of (tenant, service) they hold (<subject_prefix>.<signal>.<p>), counted
 * sent once the stream acknowledges. A batch is one item of the signal's sending queue (the
 * exporter helper's: retries, persistence), its partitions the item's parts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/log.h"
#include "core/metrics.h"
#include "exporters/load_balancing/ring.h"
#include "exporters/load_balancing/split.h"
#include "exporters/nats/nats.h"
#include "nats_int.h"
#include "pdata/bus.h"
#include "exporters/helper/exporter.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

static const char *const retention_choices[] = {"limits", "workqueue", NULL};
static const char *const storage_choices[] = {"file", "memory", NULL};
static const char *const discard_choices[] = {"new", "old", NULL};

static const struct hs_config_field stream_fields[] = {
    {"name", HS_CFG_STRING, offsetof(struct nats_stream_config, name), "HOTSPAN",
     .doc = "the JetStream stream that captures <subject_prefix>.>"},
    {"create", HS_CFG_BOOL, offsetof(struct nats_stream_config, create), "true",
     .doc = "make the stream at start when it does not exist; an existing one is used as it is "
            "(differences from these keys are logged); false: it must exist"},
    {"replicas", HS_CFG_UINT, offsetof(struct nats_stream_config, replicas), "3", .min = 1,
     .max = 5, .doc = "copies kept on distinct servers: 3 survives the loss of one"},
    {"retention", HS_CFG_ENUM, offsetof(struct nats_stream_config, retention), "limits",
     .choices = retention_choices,
     .doc = "limits: kept until max_age/max_bytes (replay possible); workqueue: deleted once a "
            "consumer acks it (one consumer group per partition)"},
    {"storage", HS_CFG_ENUM, offsetof(struct nats_stream_config, storage), "file",
     .choices = storage_choices,
     .doc = "file: acknowledged means written on a quorum of disks; memory: lost if they all "
            "restart"},
    {"max_age", HS_CFG_DURATION, offsetof(struct nats_stream_config, max_age_ms), "24h", .min = 0,
     .max = 3650LL * 86400000, .doc = "messages older than this are removed; 0: no limit"},
    {"max_bytes", HS_CFG_SIZE, offsetof(struct nats_stream_config, max_bytes), "1GiB", .min = 0,
     .doc = "size of the stream; 0: no limit (the server's own)"},
    {"discard", HS_CFG_ENUM, offsetof(struct nats_stream_config, discard), "new",
     .choices = discard_choices,
     .doc = "when max_bytes is reached: new refuses what comes (backpressure to this exporter, "
            "retried), old drops the oldest messages (silently, for every consumer)"},
    {"duplicate_window", HS_CFG_DURATION, offsetof(struct nats_stream_config, duplicate_window_ms),
     "5m", .min = 1000, .max = 86400000,
     .doc = "a message whose Nats-Msg-Id the stream saw this recently is not stored again: a "
            "resend after a lost ack; keep it above retry_on_failure.max_elapsed_time"},
    {0},
};

static const struct hs_config_field nats_fields[] = {
    {"connection", HS_CFG_INLINE, offsetof(struct nats_exp_config, nats), .sub = hs_nats_fields},
    {"stream", HS_CFG_SECTION, offsetof(struct nats_exp_config, stream), NULL, .sub = stream_fields,
     .doc = "the JetStream stream, made at start unless it exists"},
    {"subject_prefix", HS_CFG_STRING, offsetof(struct nats_exp_config, subject_prefix), "hotspan",
     .doc = "subjects are <prefix>.traces.<p> and <prefix>.profiles.<p>"},
    {"partitions", HS_CFG_UINT, offsetof(struct nats_exp_config, partitions), "16", .min = 1,
     .max = 1024,
     .doc = "p = jump hash of (tenant, service) over this many partitions: a partition is what "
            "one consuming hotspan takes; the receivers must use the same number"},
    {"max_message_size", HS_CFG_SIZE, offsetof(struct nats_exp_config, max_message_size), "1MiB",
     .min = 64 << 10, .max = 64 << 20,
     .doc = "largest message published, at most the server's max_payload (nats-server's default "
            "is 1MiB): a partition's batch larger is sent as several messages of whole spans or "
            "profiles; one span or profile larger alone is dropped and counted"},
    {"timeout", HS_CFG_DURATION, offsetof(struct nats_exp_config, common.timeout_ms), "5s",
     .min = 10, .max = 600000,
     .doc = "wait for JetStream's ack of one message; none by then is a failed attempt, retried "
            "with the same Nats-Msg-Id"},
    {"sending_queue", HS_CFG_SECTION, offsetof(struct nats_exp_config, common.queue), NULL,
     .sub = hs_sender_queue_fields,
     .doc = "a queue per signal (a batch is one entry, its partitions its messages): in memory, "
            "or on disk with storage"},
    {"retry_on_failure", HS_CFG_SECTION, offsetof(struct nats_exp_config, common.retry), NULL,
     .sub = hs_sender_retry_fields,
     .doc = "exponential backoff with jitter for messages the stream did not acknowledge"},
    {0},
};

/* ---- queue items ------------------------------------------------------------------------ */

/* Bytes a message's headers may take (id, tenant, signal, type): kept free under the limit. */
#define HEADER_ROOM 4096

static void part_unref(unsigned signal, void *batch)
{
    if (signal == HS_SIGNAL_TRACES)
        hs_traces_unref(batch);
    else
        hs_profiles_unref(batch);
}

static void item_release(void *ud, void *item)
{
    struct nats_item *it = item;
    for (uint32_t i = 0; i < it->n; i++)
        part_unref(it->signal, it->parts[i].batch);
    free(it->parts);
    free(it);
}

uint32_t hs_nats_partition(struct hs_str tenant, struct hs_str service, uint32_t partitions)
{
    return hs_ring_jump(hs_ring_key_tenant_service(tenant, service), partitions);
}

/* Moves src's spans into dst, the same partition's (both of the batch's tenant, as a split
 * keeps it). Returns false when they stay apart: two messages then. Profiles always do (a
 * profile belongs to one batch, and moving it cannot be undone if the move fails). */
static bool part_merge(unsigned signal, void **dst, void *src)
{
    if (signal != HS_SIGNAL_TRACES)
        return false;
    struct hs_traces *d = *dst;
    if (hs_traces_make_writable(&d) != 0)
        return false;
    *dst = d;
    if (hs_traces_append(d, src) != 0)
        return false;
    hs_traces_unref(src);
    return true;
}

/* The largest message body: max_message_size, or the server's max_payload when smaller. */
static size_t message_limit(const struct nats_exp *e)
{
    uint64_t limit = e->conf.max_message_size;
    int64_t server = e->nc ? hs_nats_max_payload(e->nc) : 0;
    if (server > 0 && (uint64_t)server < limit)
        limit = (uint64_t)server;
    return (size_t)(limit > 2 * HEADER_ROOM ? limit - HEADER_ROOM : limit / 2);
}

/* One item from the split: parts of the same partition merged, then cut to the message limit.
 * Takes the parts. Returns NULL when out of memory (everything released). */
static struct nats_item *item_from(struct nats_exp *e, unsigned signal, struct hs_lb_parts *parts,
                                   size_t *bytes, uint32_t *count)
{
    struct nats_item merged = {.signal = signal};
    *bytes = 0;
    for (size_t i = 0; i < parts->n; i++) {
        struct hs_lb_part *pt = &parts->v[i];
        uint32_t p = hs_ring_jump(pt->key, e->conf.partitions);
        *bytes += pt->bytes;
        uint32_t j = 0;
        while (j < merged.n && merged.parts[j].partition != p)
            j++;
        if (j < merged.n && part_merge(signal, &merged.parts[j].batch, pt->batch)) {
            merged.parts[j].items += pt->items;
            continue;
        }
        hs_nats_exp_item_add(&merged, (struct nats_part){pt->batch, p, pt->items, 0});
    }
    parts->n = 0; /* the parts' batches are merged's now */
    struct nats_item *it = hs_xcalloc(1, sizeof(*it));
    it->signal = signal;
    size_t limit = message_limit(e);
    int rc = 0;
    for (uint32_t i = 0; i < merged.n; i++) {
        if (rc == 0)
            rc = hs_nats_exp_cut(e, signal, merged.parts[i], limit, it);
        else
            part_unref(signal, merged.parts[i].batch);
    }
    free(merged.parts);
    if (rc != 0) {
        item_release(NULL, it);
        return NULL;
    }
    *count = 0;
    for (uint32_t i = 0; i < it->n; i++)
        *count += it->parts[i].items;
    return it;
}

static int submit(struct nats_exp *e, struct nats_sig *sg, void *batch)
{
    if (e->closing || !sg->sender) {
        part_unref(sg->signal, batch);
        return HS_EAGAIN;
    }
    struct hs_lb_parts parts = {0};
    int rc = sg->signal == HS_SIGNAL_TRACES
                 ? hs_lb_split_traces(batch, HS_LB_ROUTE_TENANT_SERVICE, e->ring, &parts)
                 : hs_lb_split_profiles(batch, HS_LB_ROUTE_TENANT_SERVICE, e->ring, &parts);
    if (rc != 0) { /* the batch was released */
        hs_lb_parts_free(&parts);
        return rc;
    }
    size_t bytes;
    uint32_t count;
    struct nats_item *it = item_from(e, sg->signal, &parts, &bytes, &count);
    hs_lb_parts_free(&parts);
    if (!it)
        return HS_ENOMEM;
    if (it->n == 0) { /* nothing left to publish (an empty batch, or all of it too large) */
        item_release(sg, it);
        return 0;
    }
    return hs_sender_submit(sg->sender, it, bytes, count, it->n);
}

static int nats_consume_traces(struct hs_component *c, struct hs_traces *t)
{
    struct nats_exp *e = hs_container_of(c, struct nats_exp, base);
    return submit(e, &e->sig[0], t);
}

static int nats_consume_profiles(struct hs_component *c, struct hs_profiles *b)
{
    struct nats_exp *e = hs_container_of(c, struct nats_exp, base);
    /* an OTLP request crosses the bus as pprof, converted once as the pyroscope exporter does,
     * so the nats receiver on the other side makes the batches every profiles exporter takes */
    if (!e->closing && !hs_exporter_profiles_to_pprof(c, &e->log_rl, b))
        return 0;
    if (b->count == 0) {
        hs_profiles_unref(b);
        return 0;
    }
    return submit(e, &e->sig[1], b);
}

static bool nats_ready(struct hs_component *c)
{
    struct nats_exp *e = hs_container_of(c, struct nats_exp, base);
    /* the core asks per signal only through consume; a full queue of either refuses */
    return !e->closing && e->sig[0].sender && hs_sender_ready(e->sig[0].sender) &&
           hs_sender_ready(e->sig[1].sender);
}

/* ---- the sender's hooks ----------------------------------------------------------------- */

static int encode_tenant(struct hs_sender_request *req, const char *tenant, bool authenticated)
{
    if (!tenant || !tenant[0])
        return 0;
    int rc = hs_sender_request_header(req, HS_BUS_HDR_TENANT, tenant);
    if (rc == 0 && authenticated)
        rc = hs_sender_request_header(req, HS_BUS_HDR_TENANT_AUTH, "true");
    return rc;
}

static int nats_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct nats_sig *sg = ud;
    struct nats_exp *e = sg->e;
    const struct nats_part *p = &((struct nats_item *)item)->parts[part];
    req->count = p->items;
    char subject[HS_BUS_SUBJECT_MAX], id[48];
    int rc =
        hs_bus_subject(subject, sizeof(subject), e->conf.subject_prefix, sg->signal, p->partition);
    if (rc == 0)
        rc = hs_buf_printf(&req->url_buf, "%s", subject);
    if (rc == 0)
        rc = hs_buf_putc(&req->url_buf, '\0');
    if (rc != 0)
        return rc;
    req->url = (const char *)req->url_buf.data;
    req->headers = (const char *const *)sg->lines;
    req->header_count = HS_ARRAY_SIZE(sg->lines);
    /* one id per message, kept by the request across its retries (and on disk with storage) */
    snprintf(id, sizeof(id), "%s-%llu", e->msg_id_base, (unsigned long long)++e->msg_seq);
    rc = hs_sender_request_header(req, "Nats-Msg-Id", id);
    if (sg->signal == HS_SIGNAL_TRACES) {
        const struct hs_traces *t = p->batch;
        if (rc == 0)
            rc = encode_tenant(req, t->tenant, t->tenant_authenticated);
        req->body = t->data; /* the batch's own bytes, held by the item */
        req->body_len = t->len;
        return rc;
    }
    const struct hs_profiles *b = p->batch;
    if (rc == 0)
        rc = encode_tenant(req, b->tenant, b->tenant_authenticated);
    if (rc == 0)
        rc = hs_bus_profiles_encode(b, p->first, p->items, &req->body_buf);
    req->body = req->body_buf.data;
    req->body_len = req->body_buf.len;
    return rc;
}

/* ---- create ----------------------------------------------------------------------------- */

static void nats_destroy(struct hs_component *c);

/* Checks across rows; all problems into err. */
static void check_conf(const struct nats_exp_config *conf, const struct hs_config_node *cfg,
                       const char *path, struct hs_error *err)
{
    const char *why;
    if (!hs_bus_prefix_valid(conf->subject_prefix, &why))
        hs_config_errorf(err, hs_config_get(cfg, "subject_prefix"), path, "subject_prefix: %s",
                         why);
    const char *n = conf->stream.name;
    if (!n || !n[0] || strlen(n) > 64 || strpbrk(n, " .*>\t\r\n/\\"))
        hs_config_errorf(err, hs_config_get(hs_config_get(cfg, "stream"), "name"), path,
                         "stream.name: \"%s\" is not a stream name (1-64 characters, none of "
                         "space . * > / \\)",
                         n ? n : "");
}

static void sig_init(struct nats_exp *e, int i)
{
    struct nats_sig *sg = &e->sig[i];
    sg->e = e;
    sg->signal = i == 0 ? HS_SIGNAL_TRACES : HS_SIGNAL_PROFILES;
    sg->kind = i == 0 ? 't' : 'p';
    struct hs_buf ct = {0}, sig = {0};
    if (hs_buf_printf(&ct, "%s: %s", HS_BUS_HDR_TYPE,
                      i == 0 ? HS_BUS_TYPE_TRACES : HS_BUS_TYPE_PROFILES) ||
        hs_buf_printf(&sig, "%s: %s", HS_BUS_HDR_SIGNAL, i == 0 ? "traces" : "profiles"))
        abort(); /* a few bytes at create time, as hs_xmalloc */
    sg->lines[0] = (char *)ct.data;
    sg->lines[1] = (char *)sig.data;
}

static int nats_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct nats_exp *e = hs_xcalloc(1, sizeof(*e));
    size_t before = err->count;
    if (hs_config_decode(nats_fields, cfg, &e->conf, path, err) == 0) {
        check_conf(&e->conf, cfg, path, err);
        hs_nats_check(&e->conf.nats, cfg, path, &e->tls, err);
    }
    if (err->count != before) {
        nats_destroy(&e->base);
        return HS_EINVAL;
    }
    for (int i = 0; i < 2; i++)
        sig_init(e, i);
    const char *name = "nats"; /* the splitter picks among backends; we only use its keys */
    e->ring = hs_ring_new(&name, 1);
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r = hs_wall_ns() ^ (uint64_t)(uintptr_t)e;
    snprintf(e->msg_id_base, sizeof(e->msg_id_base), "%016llx", (unsigned long long)r);
    e->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    *out = &e->base;
    return 0;
}

/* ---- start, shutdown -------------------------------------------------------------------- */

static void on_msg(void *ud, natsMsg *msg)
{
    hs_nats_exp_on_ack(ud, msg);
}

static void on_state(void *ud, bool connected)
{
    struct nats_exp *e = ud;
    if (connected && !e->stream_ok)
        hs_nats_exp_stream_start(e);
}

static void sender_new(struct nats_exp *e, struct nats_sig *sg)
{
    snprintf(sg->name, sizeof(sg->name), "%s/%s", e->base.id,
             sg->signal == HS_SIGNAL_TRACES ? "spans" : "profiles");
    snprintf(sg->labels, sizeof(sg->labels), "signal=\"%s\"",
             sg->signal == HS_SIGNAL_TRACES ? "traces" : "profiles");
    sg->sender = hs_sender_new(&(struct hs_sender_options){
        .id = e->base.id,
        .items = sg->signal == HS_SIGNAL_TRACES ? "spans" : "profiles",
        .signal = sg->signal,
        .queue = &e->conf.common.queue,
        .retry = &e->conf.common.retry,
        .timeout_ms = e->conf.common.timeout_ms,
        .transport = &hs_nats_exp_transport,
        .transport_ud = sg,
        .headers = (const char *const *)sg->lines,
        .header_count = HS_ARRAY_SIZE(sg->lines),
        .hooks = {.encode = nats_encode, .release = item_release},
        .ud = sg,
        .name = sg->name,
        .labels = sg->labels,
    });
}

static void warn_retry_horizon(struct nats_exp *e)
{
    const struct hs_sender_retry_config *r = &e->conf.common.retry;
    uint64_t window = e->conf.stream.duplicate_window_ms;
    if (r->enabled && (r->max_elapsed_ms == 0 || r->max_elapsed_ms > window))
        hs_log_warn(e->base.id,
                    "retry_on_failure.max_elapsed_time (%llu ms%s) exceeds "
                    "stream.duplicate_window (%llu ms): a message resent after that long may be "
                    "stored twice",
                    (unsigned long long)r->max_elapsed_ms, r->max_elapsed_ms ? "" : ": never",
                    (unsigned long long)window);
}

static int nats_start(struct hs_component *c, const struct hs_host *host)
{
    struct nats_exp *e = hs_container_of(c, struct nats_exp, base);
    e->base.metrics = host->metrics;
    char labels[200];
    snprintf(labels, sizeof(labels), "exporter=\"%s\"", c->id);
    e->duplicates = hs_metrics_counter(host->metrics, "exporter_nats_duplicates_total",
                                       "Messages JetStream acknowledged as duplicates of one it "
                                       "already stored (a resend after a lost ack), not stored "
                                       "again",
                                       labels);
    const struct hs_nats_hooks hooks = {.on_msg = on_msg, .on_state = on_state};
    e->nc = hs_nats_new(&e->conf.nats, e->tls, c->id, &hooks, e);
    int rc = hs_nats_start(e->nc, host->loop, host->metrics);
    for (int i = 0; rc == 0 && i < 2; i++) {
        sender_new(e, &e->sig[i]);
        rc = hs_sender_start(e->sig[i].sender, host->loop, host->metrics);
    }
    uv_timer_init(host->loop, &e->stream_timer);
    e->stream_timer.data = e;
    e->started = true;
    if (rc != 0)
        return rc; /* the core shuts down what started */
    warn_retry_horizon(e);
    hs_log_info(c->id, "publishing to stream %s, subjects %s.{traces,profiles}.<0..%u>",
                e->conf.stream.name, e->conf.subject_prefix, e->conf.partitions - 1);
    return 0;
}

static void step_done(struct nats_exp *e)
{
    if (--e->pending_done == 0)
        e->done(&e->base);
}

static void nats_closed(void *ud)
{
    step_done(ud);
}

static void stream_closed(struct nats_exp *e)
{
    /* the senders are done: nothing more is published; the connection goes last */
    hs_nats_close(e->nc, nats_closed, e);
}

static void sender_done(void *ud)
{
    struct nats_sig *sg = ud;
    struct nats_exp *e = sg->e;
    if (--e->pending_done == 1) /* both senders: now the stream timer, then the connection */
        hs_nats_exp_stream_stop(e, stream_closed);
}

static void nats_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct nats_exp *e = hs_container_of(c, struct nats_exp, base);
    if (e->closing)
        return;
    e->closing = true;
    e->done = done;
    if (!e->started) {
        done(c);
        return;
    }
    e->pending_done = 3; /* two senders, then the connection */
    for (int i = 0; i < 2; i++) {
        if (e->sig[i].sender)
            hs_sender_shutdown(e->sig[i].sender, sender_done, &e->sig[i]);
        else
            sender_done(&e->sig[i]);
    }
}

static void nats_destroy(struct hs_component *c)
{
    struct nats_exp *e = hs_container_of(c, struct nats_exp, base);
    for (int i = 0; i < 2; i++) {
        hs_sender_free(e->sig[i].sender);
        for (size_t j = 0; j < HS_ARRAY_SIZE(e->sig[i].lines); j++)
            free(e->sig[i].lines[j]);
    }
    hs_nats_free(e->nc);
    hs_ring_free(e->ring);
    hs_tls_client_free(e->tls);
    hs_config_free_fields(nats_fields, &e->conf);
    free(e);
}

const struct hs_component_type hs_exporter_nats = {
    .name = "nats",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .doc = "Publishes spans and profiles to NATS JetStream, one subject per partition of "
           "(tenant, service), counted sent once the stream acknowledges; queued and retried.",
    .fields = nats_fields,
    .create = nats_create,
    .start = nats_start,
    .consume_traces = nats_consume_traces,
    .consume_profiles = nats_consume_profiles,
    .ready = nats_ready,
    .shutdown = nats_shutdown,
    .destroy = nats_destroy,
};
