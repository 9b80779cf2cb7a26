/* receiver.c: the `nats` receiver: spans and profiles taken from NATS JetStream, the partitions
 * of consume_partitions, through one durable pull consumer each (pull.c). A message is acked
 * only once the pipeline took its batch; refused (backpressure) it is naked with a delay and
 * comes again; one that cannot be read is terminated, counted and logged; one taken before
 * (its ack was lost: JetStream delivers at least once) is acked again, counted, not handed on. */
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/metrics.h"
#include "nats_recv_int.h"
#include "pdata/traces.h"

/* Stream sequences remembered as taken (two generations: 16k to 32k messages). */
#define SEEN_SLOTS 32768
#define NS_PER_MS 1000000LL

static const struct hs_config_field nats_fields[] = {
    {"connection", HS_CFG_INLINE, offsetof(struct nats_recv_config, nats), .sub = hs_nats_fields},
    {"stream", HS_CFG_STRING, offsetof(struct nats_recv_config, stream), "HOTSPAN",
     .doc = "the stream the nats exporters publish to (they make it)"},
    {"subject_prefix", HS_CFG_STRING, offsetof(struct nats_recv_config, subject_prefix), "hotspan",
     .doc = "as the exporters': subjects <prefix>.traces.<p>, <prefix>.profiles.<p>"},
    {"partitions", HS_CFG_UINT, offsetof(struct nats_recv_config, partitions), "16", .min = 1,
     .max = 1024, .doc = "as the exporters' partitions"},
    {"consume_partitions", HS_CFG_STRLIST, offsetof(struct nats_recv_config, consume_partitions),
     NULL,
     .doc = "the partitions this hotspan takes, numbers and ranges (e.g. [\"0-7\", \"12\"]); "
            "absent: all. Every partition must be taken by exactly one running hotspan"},
    {"durable", HS_CFG_STRING, offsetof(struct nats_recv_config, durable), "hotspan",
     .doc = "consumer name prefix: one durable consumer per partition, <durable>-<p>, which "
            "keeps the partition's position across restarts"},
    {"ack_wait", HS_CFG_DURATION, offsetof(struct nats_recv_config, ack_wait_ms), "30s", .min = 100,
     .max = 3600000, .doc = "a message delivered and not acked by then is delivered again"},
    {"max_deliver", HS_CFG_UINT, offsetof(struct nats_recv_config, max_deliver), "0", .min = 0,
     .max = 1000000,
     .doc = "deliveries of one message before the server gives up on it; 0: never (a refused "
            "message waits for room as long as it takes)"},
    {"max_ack_pending", HS_CFG_UINT, offsetof(struct nats_recv_config, max_ack_pending), "1000",
     .min = 1, .max = 1000000,
     .doc = "messages of a partition delivered and not yet acked; the server then stops "
            "delivering it"},
    {"fetch_batch", HS_CFG_UINT, offsetof(struct nats_recv_config, fetch_batch), "100", .min = 1,
     .max = 10000, .doc = "messages asked for in one pull request"},
    {"fetch_max_bytes", HS_CFG_SIZE, offsetof(struct nats_recv_config, fetch_max_bytes), "4MiB",
     .min = 64 << 10, .max = 1 << 30,
     .doc = "bytes asked for in one pull request: what one partition has in flight to this "
            "hotspan at most (a larger message is asked for alone)"},
    {"fetch_timeout", HS_CFG_DURATION, offsetof(struct nats_recv_config, fetch_timeout_ms), "1s",
     .min = 100, .max = 60000, .doc = "how long one pull request waits on the server for messages"},
    {"nak_delay", HS_CFG_DURATION, offsetof(struct nats_recv_config, nak_delay_ms), "1s", .min = 0,
     .max = 600000, .doc = "a message the pipeline refused (backpressure) comes again after this"},
    {"max_decompressed_size", HS_CFG_SIZE, offsetof(struct nats_recv_config, max_decompressed),
     "16MiB", .min = 1024, .max = 1 << 30,
     .doc = "largest pprof after gunzip, per profile (as the pyroscope receiver's)"},
    {"max_samples", HS_CFG_UINT, offsetof(struct nats_recv_config, max_samples), "16000", .min = 1,
     .max = 10000000, .doc = "pprof samples in one profile"},
    {"max_sample_labels", HS_CFG_UINT, offsetof(struct nats_recv_config, max_sample_labels), "64",
     .min = 1, .max = 100000, .doc = "labels on one pprof sample"},
    {"max_stack_depth", HS_CFG_UINT, offsetof(struct nats_recv_config, max_stack_depth), "1024",
     .min = 1, .max = 1000000, .doc = "frames of one sample, inlined frames included"},
    {0},
};

/* What create learns for start. */
struct nats_recv_create {
    uint32_t *parts; /* consume_partitions, parsed */
    uint32_t nparts;
};

/* ---- acks ------------------------------------------------------------------------------- */

void hs_nats_recv_ack(struct nats_recv *r, const char *reply, const char *what)
{
    /* fire and forget: a lost ack means one more delivery, which `seen` recognises */
    hs_nats_publish(r->nc, reply, NULL, NULL, 0, what, strlen(what), NULL);
}

static void nak(struct nats_recv *r, const char *reply)
{
    char body[64];
    snprintf(body, sizeof(body), "-NAK {\"delay\":%lld}",
             (long long)r->conf.nak_delay_ms * NS_PER_MS);
    hs_nats_recv_ack(r, reply, body);
    hs_counter_add(r->nacked, 1);
}

static void terminate(struct nats_recv *r, natsMsg *m, const char *why)
{
    hs_nats_recv_ack(r, natsMsg_GetReply(m), "+TERM");
    hs_counter_add(r->terminated, 1);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&r->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(r->base.id,
                    "message on %s dropped (terminated): %s (%u similar messages suppressed)",
                    natsMsg_GetSubject(m), why, suppressed);
}

/* ---- a delivery ------------------------------------------------------------------------- */

static const char *header(natsMsg *m, const char *name)
{
    const char *v = NULL;
    return natsMsgHeader_Get(m, name, &v) == NATS_OK ? v : NULL;
}

/* Decodes m into its batch and hands it on. Returns the pipeline's answer, or the decoder's. */
static int hand_on(struct nats_recv *r, natsMsg *m, int sig, uint32_t *items, char *why,
                   size_t whylen)
{
    const char *tenant = header(m, HS_BUS_HDR_TENANT);
    const char *auth = header(m, HS_BUS_HDR_TENANT_AUTH);
    bool tenant_auth = auth && strcmp(auth, "true") == 0;
    const void *body = natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    int rc;
    if (sig == 0) {
        struct hs_traces *t;
        rc = hs_bus_traces_decode(body, len, tenant, tenant_auth, &t, why, whylen);
        if (rc)
            return rc;
        *items = t->spans;
        return hs_consumer_traces(r->base.next, t);
    }
    struct hs_profiles *b;
    rc = hs_bus_profiles_decode(body, len, tenant, tenant_auth, &r->lim, &b, why, whylen);
    if (rc)
        return rc;
    *items = b->count;
    return hs_consumer_profiles(r->base.next_profiles, b);
}

static void deliver(struct nats_recv *r, natsMsg *m, const struct hs_nats_meta *meta)
{
    const char *reply = natsMsg_GetReply(m);
    if (meta->delivered > 1)
        hs_counter_add(r->redelivered, 1);
    if (hs_nats_seen_has(&r->seen, meta->stream_seq)) { /* taken; our ack was lost */
        hs_nats_recv_ack(r, reply, "+ACK");
        hs_counter_add(r->duplicate, 1);
        return;
    }
    const char *signal = header(m, HS_BUS_HDR_SIGNAL);
    int sig = signal && strcmp(signal, "traces") == 0     ? 0
              : signal && strcmp(signal, "profiles") == 0 ? 1
                                                          : -1;
    if (sig < 0 || !(r->signals & (sig == 0 ? HS_SIGNAL_TRACES : HS_SIGNAL_PROFILES))) {
        terminate(r, m, sig < 0 ? "no " HS_BUS_HDR_SIGNAL " header" : "no pipeline of its signal");
        return;
    }
    char why[256] = "";
    uint32_t items = 0;
    int rc = hand_on(r, m, sig, &items, why, sizeof(why));
    if (rc == 0) {
        hs_nats_recv_ack(r, reply, "+ACK");
        hs_counter_add(r->acked, 1);
        hs_counter_add(r->accepted[sig], items);
        hs_nats_seen_add(&r->seen, meta->stream_seq);
    } else if (rc == HS_EAGAIN || rc == HS_ENOMEM) { /* later: pull nothing until then */
        nak(r, reply);
        hs_counter_add(r->refused[sig], items);
        r->paused_until_ms = hs_now_ms() + r->conf.nak_delay_ms;
    } else {
        if (items)
            hs_counter_add(r->refused[sig], items);
        terminate(r, m, why[0] ? why : hs_strerror(rc));
    }
}

/* Status messages (a request's end) come on the request's reply subject, with no data;
 * deliveries keep the subject they were published on, and say their consumer in their ack
 * subject. */
static void on_msg(void *ud, natsMsg *m)
{
    struct nats_recv *r = ud;
    const char *st = header(m, "Status");
    if (st && natsMsg_GetDataLength(m) == 0) {
        uint64_t gen = 0;
        struct durable *d = hs_nats_recv_route(r, natsMsg_GetSubject(m), &gen);
        enum hs_nats_status kind = hs_nats_status_kind(st, header(m, "Description"));
        natsMsg_Destroy(m);
        if (d && kind != HS_NATS_STATUS_IDLE)
            hs_nats_recv_status(d, gen, kind);
        return;
    }
    struct hs_nats_meta meta;
    struct durable *d = NULL;
    if (hs_nats_meta_parse(natsMsg_GetReply(m), &meta))
        d = hs_nats_recv_durable(r, meta.consumer);
    if (d) {
        deliver(r, m, &meta);
        hs_nats_recv_delivered(d);
    }
    natsMsg_Destroy(m);
}

static void on_state(void *ud, bool connected)
{
    hs_nats_recv_pump(ud);
}

/* ---- create ----------------------------------------------------------------------------- */

static void nats_destroy(struct hs_component *c);

static bool name_ok(const char *s, size_t max)
{
    return s && s[0] && strlen(s) <= max && !strpbrk(s, " .*>\t\r\n/\\");
}

static void check_conf(struct nats_recv *r, const struct hs_config_node *cfg, const char *path,
                       struct nats_recv_create *out, struct hs_error *err)
{
    const struct nats_recv_config *c = &r->conf;
    const char *why;
    if (!hs_bus_prefix_valid(c->subject_prefix, &why))
        hs_config_errorf(err, hs_config_get(cfg, "subject_prefix"), path, "subject_prefix: %s",
                         why);
    if (!name_ok(c->stream, 64))
        hs_config_errorf(err, hs_config_get(cfg, "stream"), path,
                         "stream: \"%s\" is not a stream name (1-64 characters, none of "
                         "space . * > / \\)",
                         c->stream ? c->stream : "");
    if (!name_ok(c->durable, 64))
        hs_config_errorf(err, hs_config_get(cfg, "durable"), path,
                         "durable: \"%s\" is not a consumer name (1-64 characters, none of "
                         "space . * > / \\)",
                         c->durable ? c->durable : "");
    size_t bad = 0;
    if (hs_nats_partitions_parse(&c->consume_partitions, c->partitions, &out->parts, &out->nparts,
                                 &bad, &why) != 0) {
        const struct hs_config_node *list = hs_config_get(cfg, "consume_partitions");
        const struct hs_config_node *item = list ? list->child : NULL;
        for (size_t i = 0; item && i < bad; i++)
            item = item->next;
        hs_config_errorf(err, item ? item : list, path, "consume_partitions[%zu]: \"%s\": %s", bad,
                         c->consume_partitions.items[bad], why);
    }
}

static void drained(struct nats_recv *r);

static int nats_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct nats_recv *r = hs_xcalloc(1, sizeof(*r));
    r->drained = drained;
    size_t before = err->count;
    struct nats_recv_create made = {0};
    if (hs_config_decode(nats_fields, cfg, &r->conf, path, err) == 0) {
        check_conf(r, cfg, path, &made, err);
        hs_nats_check(&r->conf.nats, cfg, path, &r->tls, err);
    }
    if (err->count != before) {
        free(made.parts);
        nats_destroy(&r->base);
        return HS_EINVAL;
    }
    /* the durables are named at start, by the pipelines (signals) the receiver feeds */
    r->parts = made.parts;
    r->nparts = made.nparts;
    r->lim = (struct hs_pprof_limits){.max_decompressed = r->conf.max_decompressed,
                                      .max_samples = r->conf.max_samples,
                                      .max_sample_labels = r->conf.max_sample_labels,
                                      .max_stack_depth = r->conf.max_stack_depth};
    r->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    hs_nats_seen_init(&r->seen, SEEN_SLOTS);
    *out = &r->base;
    return 0;
}

/* ---- start, shutdown -------------------------------------------------------------------- */

static void counters(struct nats_recv *r, struct hs_metrics *m)
{
    char l[300];
    snprintf(r->labels, sizeof(r->labels), "receiver=\"%s\"", r->base.id);
    snprintf(l, sizeof(l), "%s,transport=\"nats\"", r->labels);
    r->accepted[0] = hs_metrics_counter(m, "receiver_accepted_spans_total",
                                        "Spans accepted into the pipeline", l);
    r->refused[0] = hs_metrics_counter(m, "receiver_refused_spans_total",
                                       "Spans refused because the pipeline was full", l);
    r->accepted[1] = hs_metrics_counter(m, "receiver_accepted_profiles_total",
                                        "Profiles accepted into the pipeline", l);
    r->refused[1] = hs_metrics_counter(m, "receiver_refused_profiles_total",
                                       "Profiles refused because the pipeline was full", l);
    static const char help[] = "Messages taken from NATS, by what became of them: acked (the "
                               "pipeline took it), nacked (refused for now: delivered again), "
                               "terminated (unreadable: dropped), duplicate (taken before: "
                               "acked again, not handed on)";
    struct hs_counter **c[] = {&r->acked, &r->nacked, &r->terminated, &r->duplicate};
    const char *outcome[] = {"acked", "nacked", "terminated", "duplicate"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(c); i++) {
        snprintf(l, sizeof(l), "%s,outcome=\"%s\"", r->labels, outcome[i]);
        *c[i] = hs_metrics_counter(m, "receiver_nats_messages_total", help, l);
    }
    r->redelivered = hs_metrics_counter(m, "receiver_nats_redelivered_total",
                                        "Messages delivered more than once (not acked in time, "
                                        "refused, or their ack was lost)",
                                        r->labels);
}

static int nats_start(struct hs_component *c, const struct hs_host *host)
{
    struct nats_recv *r = hs_container_of(c, struct nats_recv, base);
    r->signals = (c->next ? HS_SIGNAL_TRACES : 0) | (c->next_profiles ? HS_SIGNAL_PROFILES : 0);
    hs_nats_recv_durables(r, r->parts, r->nparts);
    counters(r, host->metrics);
    hs_nats_recv_timer_init(r, host->loop);
    const struct hs_nats_hooks hooks = {.on_msg = on_msg, .on_state = on_state};
    r->nc = hs_nats_new(&r->conf.nats, r->tls, c->id, &hooks, r);
    r->started = true;
    int rc = hs_nats_start(r->nc, host->loop, host->metrics);
    if (rc == 0)
        hs_log_info(c->id, "taking %u partitions of %u from stream %s (%s%s-NN)", r->nd,
                    r->conf.partitions, r->conf.stream, r->conf.durable,
                    r->signals == HS_SIGNAL_TRACES     ? "-traces"
                    : r->signals == HS_SIGNAL_PROFILES ? "-profiles"
                                                       : "");
    return rc;
}

static void step_closed(struct nats_recv *r)
{
    if (--r->closing_steps == 0)
        r->done(&r->base);
}

static void timer_closed(uv_handle_t *h)
{
    step_closed(h->data);
}

static void nats_closed(void *ud)
{
    step_closed(ud);
}

/* Called by the pump once stopping and no pull request is out: what was asked for has come
 * (and was handed on), so nothing in flight is left to redeliver after ack_wait. */
/* Stopping and no pull request out: closes the timer and the connection, then done. */
static void drained(struct nats_recv *r)
{
    if (r->closing)
        return;
    r->closing = true;
    r->closing_steps = 2;
    uv_close((uv_handle_t *)&r->timer, timer_closed);
    hs_nats_close(r->nc, nats_closed, r);
}

static void nats_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct nats_recv *r = hs_container_of(c, struct nats_recv, base);
    if (r->stopping)
        return;
    r->stopping = true;
    r->done = done;
    if (!r->started) {
        done(c);
        return;
    }
    hs_nats_recv_pump(r); /* no new requests; drained at once when none is out */
}

static void nats_destroy(struct hs_component *c)
{
    struct nats_recv *r = hs_container_of(c, struct nats_recv, base);
    hs_nats_free(r->nc);
    free(r->d);
    free(r->by_partition);
    free(r->parts);
    hs_nats_seen_free(&r->seen);
    hs_tls_client_free(r->tls);
    hs_config_free_fields(nats_fields, &r->conf);
    free(r);
}

const struct hs_component_type hs_receiver_nats = {
    .name = "nats",
    .kind = HS_KIND_RECEIVER,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .doc = "Spans and profiles from NATS JetStream (what nats exporters published): durable pull "
           "consumers of a set of partitions, a message acked once the pipeline took it.",
    .fields = nats_fields,
    .create = nats_create,
    .start = nats_start,
    .shutdown = nats_shutdown,
    .destroy = nats_destroy,
};
