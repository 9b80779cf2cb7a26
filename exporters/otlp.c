/* otlp.c: the `otlp` / `otlphttp` exporter: batches POSTed as OTLP/HTTP (protobuf or JSON, gzip)
 * to a backend such as Tempo, through a bounded in-memory queue, a fixed number of concurrent
 * requests and retries with backoff per wire.md §2 (otelcol's otlphttp exporter and helper). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/compress.h"
#include "core/config.h"
#include "core/http_client.h"
#include "core/log.h"
#include "core/metrics.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/traces.h"

/* Measured on 8192 typical spans (2.6 MB): level 1 gives 4.74x at 0.63 CPU-s per million spans,
 * level 6 gives 4.97x at 1.48. 5% fewer bytes is not worth half of our CPU budget (design §11). */
#define GZIP_LEVEL 1
#define LOG_BODY_BYTES 200

struct queue_config {
    bool enabled;
    uint32_t num_consumers;
    uint32_t queue_size;
    uint64_t queue_bytes;
};

struct retry_config {
    bool enabled;
    uint64_t initial_interval_ms;
    double randomization_factor;
    double multiplier;
    uint64_t max_interval_ms;
    uint64_t max_elapsed_ms;
};

struct otlp_config {
    char *endpoint;
    char *traces_endpoint;
    struct hs_strmap headers;
    char *compression;
    char *encoding;
    uint64_t timeout_ms;
    struct queue_config queue;
    struct retry_config retry;
};

static const char *const compression_choices[] = {"gzip", "none", NULL};
static const char *const encoding_choices[] = {"proto", "json", NULL};

static const struct hs_config_field queue_fields[] = {
    {"enabled", HS_CFG_BOOL, offsetof(struct queue_config, enabled), "true",
     .doc = "queue batches while requests are in flight; when false only num_consumers batches "
            "are held (the ones being sent) and the pipeline is refused beyond that"},
    {"num_consumers", HS_CFG_UINT, offsetof(struct queue_config, num_consumers), "10", .min = 1,
     .max = 1000, .doc = "requests in flight at once (a batch waiting to retry keeps its slot)"},
    {"queue_size", HS_CFG_UINT, offsetof(struct queue_config, queue_size), "1000", .min = 1,
     .max = 1 << 20,
     .doc = "batches held, those in flight included; beyond it the pipeline is "
            "refused (backpressure)"},
    {"queue_bytes", HS_CFG_SIZE, offsetof(struct queue_config, queue_bytes), "64MiB", .min = 1,
     .doc = "bytes of batches held (uncompressed), in flight included"},
    {0},
};

static const struct hs_config_field retry_fields[] = {
    {"enabled", HS_CFG_BOOL, offsetof(struct retry_config, enabled), "true",
     .doc = "retry 429, 502, 503, 504 and transport errors; when false they are dropped"},
    {"initial_interval", HS_CFG_DURATION, offsetof(struct retry_config, initial_interval_ms), "5s",
     .min = 1, .max = 3600000, .doc = "wait before the first retry"},
    {"randomization_factor", HS_CFG_DOUBLE, offsetof(struct retry_config, randomization_factor),
     "0.5", .min = 0, .max = 1, .doc = "jitter: each wait is the interval times 1 ± this"},
    {"multiplier", HS_CFG_DOUBLE, offsetof(struct retry_config, multiplier), "1.5", .min = 1,
     .max = 100, .doc = "growth of the interval after each retry"},
    {"max_interval", HS_CFG_DURATION, offsetof(struct retry_config, max_interval_ms), "30s",
     .min = 1, .max = 3600000, .doc = "cap on the interval"},
    {"max_elapsed_time", HS_CFG_DURATION, offsetof(struct retry_config, max_elapsed_ms), "300s",
     .min = 0, .max = 7 * 86400000LL,
     .doc = "give up on a batch this long after its first attempt (dropped); 0 = never"},
    {0},
};

static const struct hs_config_field otlp_fields[] = {
    {"endpoint", HS_CFG_URL, offsetof(struct otlp_config, endpoint), NULL,
     .doc = "base URL of the backend, e.g. http://tempo:4318; /v1/traces is appended"},
    {"traces_endpoint", HS_CFG_URL, offsetof(struct otlp_config, traces_endpoint), NULL,
     .doc = "full URL for traces, used as is (overrides endpoint)"},
    {"headers", HS_CFG_STRMAP, offsetof(struct otlp_config, headers), NULL,
     .doc = "extra request headers, e.g. X-Scope-OrgID or Authorization"},
    {"compression", HS_CFG_ENUM, offsetof(struct otlp_config, compression), "gzip",
     .choices = compression_choices, .doc = "request body compression"},
    {"encoding", HS_CFG_ENUM, offsetof(struct otlp_config, encoding), "proto",
     .choices = encoding_choices, .doc = "OTLP/HTTP body encoding: protobuf or JSON"},
    {"timeout", HS_CFG_DURATION, offsetof(struct otlp_config, timeout_ms), "30s", .min = 1,
     .max = 3600000, .doc = "time limit of one request, connecting included"},
    {"sending_queue", HS_CFG_SECTION, offsetof(struct otlp_config, queue), NULL,
     .sub = queue_fields, .doc = "the in-memory queue in front of the backend"},
    {"retry_on_failure", HS_CFG_SECTION, offsetof(struct otlp_config, retry), NULL,
     .sub = retry_fields, .doc = "exponential backoff with jitter, honouring Retry-After"},
    {0},
};

/* A batch waiting in the queue. */
struct req {
    struct req *next;
    struct hs_traces *batch;
    size_t bytes; /* as counted against queue_bytes */
    uint32_t spans;
};

/* A consumer: one batch from its first attempt until it is sent or dropped, retries included,
 * so a backend that is down holds every slot and the queue fills (backpressure). */
struct slot {
    struct otlp_exp *e;
    uv_timer_t timer;  /* the wait before a retry */
    struct req *req;   /* NULL when idle */
    struct hs_buf enc; /* the encoded body, when it is not the batch's own bytes */
    const uint8_t *body;
    size_t body_len;
    uint64_t first_ms;
    uint64_t interval_ms;
};

struct otlp_exp {
    struct hs_component base;
    struct otlp_config conf;
    char *url;
    char **headers;
    size_t header_count;
    bool gzip, json;
    uint32_t capacity; /* batches held at most */

    struct hs_http_client *client;
    struct slot *slots;
    uint32_t nslots;
    struct req *head, **tail;
    uint32_t held; /* queued + in slots */
    uint64_t held_bytes;
    uint64_t rng;

    bool started, closing, finishing;
    unsigned closing_handles;
    hs_done_cb done;
    struct hs_ratelimit log_rl;
    struct hs_counter *sent, *send_failed, *enqueue_failed, *retries;
};

static void exp_progress(struct otlp_exp *e);

/* ---- create ----------------------------------------------------------------------------- */

static char *traces_url(const struct otlp_config *conf)
{
    if (conf->traces_endpoint)
        return hs_xstrdup(conf->traces_endpoint);
    size_t n = strlen(conf->endpoint);
    while (n > 0 && conf->endpoint[n - 1] == '/') /* http://tempo:4318/ must not give // */
        n--;
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%.*s/v1/traces", (int)n, conf->endpoint) != 0)
        return NULL;
    return (char *)b.data;
}

static void add_header(struct otlp_exp *e, const char *name, const char *value)
{
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%s: %s", name, value) != 0)
        abort(); /* a few bytes at create time: treat like hs_xmalloc */
    e->headers[e->header_count++] = (char *)b.data;
}

static void build_headers(struct otlp_exp *e)
{
    const struct hs_strmap *h = &e->conf.headers;
    e->headers = hs_xcalloc(3 + h->count, sizeof(*e->headers));
    add_header(e, "Content-Type", e->json ? "application/json" : "application/x-protobuf");
    if (e->gzip)
        add_header(e, "Content-Encoding", "gzip");
    add_header(e, "User-Agent", "hotspan/" HS_VERSION);
    for (size_t i = 0; i < h->count; i++)
        add_header(e, h->keys[i], h->values[i]);
}

static void exp_free(struct otlp_exp *e)
{
    while (e->head) {
        struct req *r = e->head;
        e->head = r->next;
        hs_traces_unref(r->batch);
        free(r);
    }
    for (uint32_t i = 0; e->slots && i < e->nslots; i++) {
        if (e->slots[i].req) {
            hs_traces_unref(e->slots[i].req->batch);
            free(e->slots[i].req);
        }
        hs_buf_free(&e->slots[i].enc);
    }
    free(e->slots);
    for (size_t i = 0; i < e->header_count; i++)
        free(e->headers[i]);
    free(e->headers);
    free(e->url);
    hs_config_free_fields(otlp_fields, &e->conf);
    free(e);
}

static int exp_create(const struct hs_config_node *cfg, const char *path, struct hs_component **out,
                      struct hs_error *err)
{
    struct otlp_exp *e = hs_xcalloc(1, sizeof(*e));
    int rc = hs_config_decode(otlp_fields, cfg, &e->conf, path, err);
    /* checked even when decoding failed, so every problem is reported at once; an endpoint
     * with a bad URL is still "written", not missing */
    if (!e->conf.endpoint && !e->conf.traces_endpoint && !hs_config_get(cfg, "endpoint") &&
        !hs_config_get(cfg, "traces_endpoint")) {
        hs_config_errorf(err, cfg, path, "one of endpoint or traces_endpoint is required");
        rc = HS_EINVAL;
    }
    if (rc != 0)
        goto fail;
    e->url = traces_url(&e->conf);
    if (!e->url)
        goto fail;
    e->gzip = strcmp(e->conf.compression, "gzip") == 0;
    e->json = strcmp(e->conf.encoding, "json") == 0;
    e->capacity = e->conf.queue.enabled ? e->conf.queue.queue_size : e->conf.queue.num_consumers;
    e->nslots = e->conf.queue.num_consumers;
    e->tail = &e->head;
    e->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    build_headers(e);
    *out = &e->base;
    return 0;
fail:
    exp_free(e);
    return HS_EINVAL;
}

/* ---- metrics ---------------------------------------------------------------------------- */

static double gauge_queue_size(void *ud)
{
    return ((struct otlp_exp *)ud)->held;
}

static double gauge_queue_capacity(void *ud)
{
    return ((struct otlp_exp *)ud)->capacity;
}

static double gauge_queue_bytes(void *ud)
{
    return (double)((struct otlp_exp *)ud)->held_bytes;
}

static void metrics_register(struct otlp_exp *e, struct hs_metrics *m)
{
    char labels[256];
    snprintf(labels, sizeof(labels), "exporter=\"%s\"", e->base.id);
    struct hs_exporter_counters counters = hs_metrics_exporter(m, e->base.id);
    e->sent = counters.sent;
    e->send_failed = counters.failed;
    e->enqueue_failed = hs_metrics_counter(m, "exporter_enqueue_failed_spans_total",
                                           "Spans refused because the queue was full", labels);
    e->retries = hs_metrics_counter(m, "exporter_retries_total", "Requests retried", labels);
    hs_metrics_gauge(m, "exporter_queue_size", "Batches held (waiting and in flight)", labels,
                     gauge_queue_size, e);
    hs_metrics_gauge(m, "exporter_queue_capacity", "Batches the queue holds at most", labels,
                     gauge_queue_capacity, e);
    hs_metrics_gauge(m, "exporter_queue_bytes", "Bytes of the batches held", labels,
                     gauge_queue_bytes, e);
}

/* ---- a batch's life in a slot ----------------------------------------------------------- */

static uint64_t rng_next(struct otlp_exp *e)
{
    /* xorshift64*: jitter only needs to spread clients apart, not to be unpredictable */
    e->rng ^= e->rng >> 12;
    e->rng ^= e->rng << 25;
    e->rng ^= e->rng >> 27;
    return e->rng * 2685821657736338717ULL;
}

static void slot_release(struct slot *s)
{
    struct otlp_exp *e = s->e;
    e->held--;
    e->held_bytes -= s->req->bytes;
    hs_traces_unref(s->req->batch);
    free(s->req);
    s->req = NULL;
    s->body = NULL;
    hs_buf_reset(&s->enc);
}

static void slot_drop(struct slot *s, const char *reason, uint64_t spans)
{
    struct otlp_exp *e = s->e;
    hs_counter_add(e->send_failed, spans);
    hs_metrics_drop(e->base.metrics, e->base.id, reason, spans);
}

static int slot_encode(struct slot *s)
{
    struct otlp_exp *e = s->e;
    const struct hs_traces *t = s->req->batch;
    const uint8_t *p = t->data;
    size_t len = t->len;
    struct hs_buf json = {0};
    int rc = 0;
    if (e->json) {
        if ((rc = hs_otlp_wire_to_json(p, len, &json)) != 0)
            goto out;
        p = json.data;
        len = json.len;
    }
    if (e->gzip) {
        if ((rc = hs_gzip(p, len, GZIP_LEVEL, &s->enc)) != 0)
            goto out;
        s->body = s->enc.data;
        s->body_len = s->enc.len;
    } else if (e->json) {
        hs_buf_free(&s->enc);
        s->enc = json; /* the slot keeps the JSON itself */
        json = (struct hs_buf){0};
        s->body = s->enc.data;
        s->body_len = s->enc.len;
    } else {
        s->body = t->data; /* the batch is already the request: send its bytes */
        s->body_len = t->len;
    }
out:
    hs_buf_free(&json);
    return rc;
}

static void on_response(void *ud, const struct hs_http_result *res);

static void on_post_failed(uv_timer_t *t)
{
    struct hs_http_result res = {.error = "could not start the request (out of memory)"};
    on_response(t->data, &res);
}

static void slot_send(struct slot *s)
{
    struct otlp_exp *e = s->e;
    int rc =
        hs_http_client_post(e->client, e->url, (const char *const *)e->headers, e->header_count,
                            s->body, s->body_len, e->conf.timeout_ms, on_response, s);
    if (rc != 0) /* answered from the loop, as a transport error, so callers never recurse */
        uv_timer_start(&s->timer, on_post_failed, 0, 0);
}

static void on_retry_timer(uv_timer_t *t)
{
    slot_send(t->data);
}

/* Returns true when the batch waits for another attempt, false when it was dropped. */
static bool slot_retry(struct slot *s, const struct hs_http_result *res)
{
    struct otlp_exp *e = s->e;
    const struct retry_config *pol = &e->conf.retry;
    uint32_t spans = s->req->spans;
    if (!pol->enabled) {
        slot_drop(s, "send_failed", spans);
        return false;
    }
    double unit = (double)(rng_next(e) >> 11) / (double)(1ULL << 53); /* [0, 1) */
    double jitter = 1.0 + pol->randomization_factor * (2.0 * unit - 1.0);
    uint64_t delay = HS_MAX((uint64_t)((double)s->interval_ms * jitter), res->retry_after_ms);
    uint64_t elapsed = hs_now_ms() - s->first_ms;
    if (pol->max_elapsed_ms && elapsed + delay > pol->max_elapsed_ms) {
        slot_drop(s, "retry_exhausted", spans);
        return false;
    }
    double next = (double)s->interval_ms * pol->multiplier;
    s->interval_ms = next >= (double)pol->max_interval_ms ? pol->max_interval_ms : (uint64_t)next;
    hs_counter_add(e->retries, 1);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed)) {
        char why[64];
        snprintf(why, sizeof(why), "HTTP %d", res->status);
        hs_log_warn(e->base.id,
                    "export of %u spans failed (%s), retrying in %llu ms "
                    "(%u similar messages suppressed)",
                    spans, res->status ? why : res->error, (unsigned long long)delay, suppressed);
    }
    uv_timer_start(&s->timer, on_retry_timer, delay, 0);
    return true;
}

/* The response to a 2xx: partial_success.rejected_spans, from protobuf or JSON. */
static int64_t partial_rejected(const struct hs_http_result *res, char *msg, size_t msglen)
{
    int64_t rejected = 0;
    const char *ct = res->content_type ? res->content_type : "";
    msg[0] = '\0';
    if (res->body_len == 0)
        return 0;
    if (strncasecmp(ct, "application/x-protobuf", 22) == 0 ||
        strncasecmp(ct, "application/protobuf", 20) == 0) {
        Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *r =
            opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
                NULL, res->body_len, res->body);
        if (r && r->partial_success) {
            rejected = r->partial_success->rejected_spans;
            snprintf(msg, msglen, "%s", r->partial_success->error_message);
        }
        if (r)
            protobuf_c_message_free_unpacked(&r->base, NULL);
    } else if (strncasecmp(ct, "application/json", 16) == 0) {
        json_t *root = json_loadb((const char *)res->body, res->body_len, 0, NULL);
        json_t *ps = json_object_get(root, "partialSuccess");
        json_t *n = json_object_get(ps, "rejectedSpans"), *m = json_object_get(ps, "errorMessage");
        if (json_is_integer(n))
            rejected = json_integer_value(n);
        else if (json_is_string(n)) /* int64 travels as a string in OTLP/JSON */
            rejected = strtoll(json_string_value(n), NULL, 10);
        if (json_is_string(m))
            snprintf(msg, msglen, "%s", json_string_value(m));
        json_decref(root);
    }
    return rejected;
}

static void slot_sent(struct slot *s, const struct hs_http_result *res)
{
    struct otlp_exp *e = s->e;
    char msg[256];
    uint32_t spans = s->req->spans;
    int64_t rejected = partial_rejected(res, msg, sizeof(msg));
    uint32_t bad = rejected <= 0 ? 0 : rejected >= spans ? spans : (uint32_t)rejected;
    hs_counter_add(e->sent, spans - bad);
    if (bad)
        slot_drop(s, "rejected_by_backend", bad);
    uint32_t suppressed;
    if ((bad || msg[0]) && hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(e->base.id,
                    "backend rejected %u of %u spans: %s (%u similar messages suppressed)", bad,
                    spans, msg[0] ? msg : "no message", suppressed);
}

/* Anything but 2xx, 429, 502, 503, 504: retrying will not help (wire.md §2). */
static void slot_permanent(struct slot *s, const struct hs_http_result *res)
{
    struct otlp_exp *e = s->e;
    char body[LOG_BODY_BYTES + 1];
    size_t n = HS_MIN(res->body_len, (size_t)LOG_BODY_BYTES);
    for (size_t i = 0; i < n; i++) /* often a binary google.rpc.Status: keep its text */
        body[i] = res->body[i] >= 0x20 && res->body[i] < 0x7f ? (char)res->body[i] : '.';
    body[n] = '\0';
    slot_drop(s, "permanent_error", s->req->spans);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed))
        hs_log_error(e->base.id,
                     "export of %u spans failed permanently: HTTP %d: %s "
                     "(%u similar messages suppressed)",
                     s->req->spans, res->status, body, suppressed);
}

static void on_response(void *ud, const struct hs_http_result *res)
{
    struct slot *s = ud;
    int st = res->status;
    bool waits = false;
    if (st >= 200 && st < 300)
        slot_sent(s, res);
    else if (st == 0 || st == 429 || st == 502 || st == 503 || st == 504)
        waits = slot_retry(s, res);
    else
        slot_permanent(s, res);
    if (!waits) {
        slot_release(s);
        exp_progress(s->e);
    }
}

/* ---- the queue -------------------------------------------------------------------------- */

/* Moves queued batches into idle slots and sends them. */
static void exp_pump(struct otlp_exp *e)
{
    for (uint32_t i = 0; i < e->nslots && e->head;) {
        struct slot *s = &e->slots[i];
        if (s->req) {
            i++;
            continue;
        }
        s->req = e->head;
        e->head = s->req->next;
        if (!e->head)
            e->tail = &e->head;
        if (slot_encode(s) != 0) {
            slot_drop(s, "encode_failed", s->req->spans);
            slot_release(s);
            continue; /* the slot is idle again: give it the next batch */
        }
        s->first_ms = hs_now_ms();
        s->interval_ms = e->conf.retry.initial_interval_ms;
        slot_send(s);
        i++;
    }
}

static void timer_closed(uv_handle_t *h)
{
    struct otlp_exp *e = ((struct slot *)h->data)->e;
    if (--e->closing_handles == 0)
        e->done(&e->base); /* nothing of ours is in the loop any more */
}

static void client_closed(void *ud)
{
    struct otlp_exp *e = ud;
    if (--e->closing_handles == 0)
        e->done(&e->base);
}

/* Sends what is queued; once shutting down and empty, closes everything and reports done. */
static void exp_progress(struct otlp_exp *e)
{
    exp_pump(e);
    if (!e->closing || e->held > 0 || e->finishing)
        return;
    e->finishing = true;
    hs_metrics_gauge_remove(e->base.metrics, e);
    e->closing_handles = e->nslots + 1;
    for (uint32_t i = 0; i < e->nslots; i++)
        uv_close((uv_handle_t *)&e->slots[i].timer, timer_closed);
    hs_http_client_close(e->client, client_closed, e);
}

/* ---- the component ---------------------------------------------------------------------- */

static bool exp_ready(struct hs_component *c)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    return !e->closing && e->held < e->capacity && e->held_bytes < e->conf.queue.queue_bytes;
}

static int exp_consume(struct hs_component *c, struct hs_traces *t)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    if (!exp_ready(c)) {
        if (e->enqueue_failed)
            hs_counter_add(e->enqueue_failed, t->spans);
        hs_traces_unref(t);
        return HS_EAGAIN;
    }
    struct req *r = hs_xcalloc(1, sizeof(*r));
    r->batch = t;
    r->bytes = t->len;
    r->spans = t->spans;
    *e->tail = r;
    e->tail = &r->next;
    e->held++;
    e->held_bytes += r->bytes;
    if (e->started)
        exp_pump(e);
    return 0;
}

static int exp_start(struct hs_component *c, const struct hs_host *host)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    e->client = hs_http_client_new(host->loop);
    if (!e->client)
        return HS_ENOMEM;
    e->base.metrics = host->metrics;
    e->slots = hs_xcalloc(e->nslots, sizeof(*e->slots));
    for (uint32_t i = 0; i < e->nslots; i++) {
        e->slots[i].e = e;
        uv_timer_init(host->loop, &e->slots[i].timer);
        e->slots[i].timer.data = &e->slots[i];
    }
    e->rng = (hs_wall_ns() ^ (uint64_t)(uintptr_t)e) | 1;
    metrics_register(e, host->metrics);
    e->started = true;
    hs_log_info(c->id, "exporting to %s", e->url);
    exp_pump(e);
    return 0;
}

static void exp_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    if (e->closing) /* already on its way; the first done will fire */
        return;
    e->closing = true;
    if (!e->started) {
        done(c);
        return;
    }
    e->done = done;
    exp_progress(e); /* done waits until what is queued is sent or given up on */
}

static void exp_destroy(struct hs_component *c)
{
    exp_free(hs_container_of(c, struct otlp_exp, base));
}

const struct hs_component_type hs_exporter_otlp = {
    .name = "otlp",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES,
    .doc = "Sends spans to an OTLP/HTTP backend (Tempo, a Collector), queued and retried.",
    .fields = otlp_fields,
    .create = exp_create,
    .start = exp_start,
    .consume_traces = exp_consume,
    .ready = exp_ready,
    .shutdown = exp_shutdown,
    .destroy = exp_destroy,
};

/* The OpenTelemetry Collector's name for the same exporter, so its configs carry over. */
const struct hs_component_type hs_exporter_otlphttp = {
    .name = "otlphttp",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES,
    .doc = "Alias of otlp (the OpenTelemetry Collector's otlphttp exporter).",
    .fields = otlp_fields,
    .create = exp_create,
    .start = exp_start,
    .consume_traces = exp_consume,
    .ready = exp_ready,
    .shutdown = exp_shutdown,
    .destroy = exp_destroy,
};
