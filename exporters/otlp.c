/* otlp.c: the `otlp` / `otlphttp` exporter: batches sent as OTLP/HTTP (protobuf or JSON, gzip)
 * or OTLP/gRPC (h2c or TLS, gzip) to a backend such as Tempo, through a bounded queue, a fixed
 * number of concurrent requests and retries with backoff per wire.md §2, §3 (otelcol's otlp and
 * otlphttp exporters and their helper). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/compress.h"
#include "core/config.h"
#include "core/config_internal.h" /* hs_cfg_url_problem: endpoint is a URL or host:port */
#include "core/grpc.h"
#include "core/http_client.h"
#include "core/log.h"
#include "core/tls.h"
#include "core/sender.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/traces.h"

/* Measured on 8192 typical spans (2.6 MB): level 1 gives 4.74x at 0.63 CPU-s per million spans,
 * level 6 gives 4.97x at 1.48. 5% fewer bytes is not worth half of our CPU budget (design §11). */
#define GZIP_LEVEL 1

struct otlp_config {
    char *protocol;
    struct hs_tls_client_config tls;
    char *endpoint;
    char *traces_endpoint;
    struct hs_strmap headers;
    char *compression;
    char *encoding;
    uint64_t timeout_ms;
    struct hs_sender_queue_config queue;
    struct hs_sender_retry_config retry;
};

static const char *const compression_choices[] = {"gzip", "none", NULL};
static const char *const encoding_choices[] = {"proto", "json", NULL};
static const char *const protocol_choices[] = {"http/protobuf", "grpc", NULL};

#define GRPC_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
/* the largest ExportTraceServiceResponse we read (wire.md §3: 4 MiB response limit) */
#define GRPC_MAX_RESPONSE (4u << 20)

static const struct hs_config_field otlp_fields[] = {
    {"protocol", HS_CFG_ENUM, offsetof(struct otlp_config, protocol), "http/protobuf",
     .choices = protocol_choices,
     .doc = "http/protobuf: OTLP/HTTP (see encoding); grpc: OTLP/gRPC over HTTP/2"},
    {"tls", HS_CFG_SECTION, offsetof(struct otlp_config, tls), NULL, .sub = hs_tls_client_fields,
     .doc = "TLS for https:// endpoints and grpc (unless insecure: true); reloaded on SIGHUP"},
    {"endpoint", HS_CFG_STRING, offsetof(struct otlp_config, endpoint), NULL,
     .doc = "http/protobuf: base URL of the backend, e.g. https://tempo:4318 (/v1/traces is "
            "appended); grpc: host:port (TLS unless tls.insecure), https://host:port (TLS) or "
            "http://host:port (h2c), e.g. tempo:4317"},
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
     .sub = hs_sender_queue_fields,
     .doc = "the queue in front of the backend: in memory, or on disk with storage"},
    {"retry_on_failure", HS_CFG_SECTION, offsetof(struct otlp_config, retry), NULL,
     .sub = hs_sender_retry_fields,
     .doc = "exponential backoff with jitter, honouring Retry-After"},
    {0},
};

struct otlp_exp {
    struct hs_component base;
    struct otlp_config conf;
    char *url;
    char **headers;
    size_t header_count;
    bool gzip, json, grpc;
    bool grpc_tls;              /* grpc over TLS (h2 by ALPN), else h2c */
    struct hs_tls_client *tls; /* the files of conf.tls, reloaded on SIGHUP */
    char errtext[600]; /* a gRPC failure's text, for the sender's log line (one at a time) */
    struct hs_sender *sender;
    bool closing;
    hs_done_cb done;
    struct hs_ratelimit log_rl;
};

/* ---- create ----------------------------------------------------------------------------- */

/* gRPC: http(s)://host:port/<service>/<method>, from host:port or http(s)://host:port[/]. */
static char *grpc_url(const char *endpoint, bool tls)
{
    const char *hp = endpoint;
    if (strncasecmp(hp, "http://", 7) == 0)
        hp += 7;
    else if (strncasecmp(hp, "https://", 8) == 0)
        hp += 8;
    size_t n = strlen(hp);
    while (n > 0 && hp[n - 1] == '/')
        n--;
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%s://%.*s" GRPC_PATH, tls ? "https" : "http", (int)n, hp) != 0)
        return NULL;
    return (char *)b.data;
}

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

/* gRPC request headers (PROTOCOL-HTTP2.md); configured headers travel as metadata, which curl
 * lower-cases on HTTP/2 as gRPC wants. */
static void build_grpc_headers(struct otlp_exp *e)
{
    const struct hs_strmap *h = &e->conf.headers;
    char timeout[24];
    hs_grpc_timeout_format(e->conf.timeout_ms, timeout, sizeof(timeout));
    e->headers = hs_xcalloc(6 + h->count, sizeof(*e->headers));
    add_header(e, "Content-Type", "application/grpc");
    add_header(e, "TE", "trailers");
    if (e->gzip)
        add_header(e, "grpc-encoding", "gzip");
    add_header(e, "grpc-accept-encoding", HS_GRPC_ACCEPT_ENCODING);
    add_header(e, "grpc-timeout", timeout);
    add_header(e, "User-Agent", "hotspan/" HS_VERSION " grpc-c/hotspan");
    for (size_t i = 0; i < h->count; i++)
        add_header(e, h->keys[i], h->values[i]);
}

static void build_headers(struct otlp_exp *e)
{
    const struct hs_strmap *h = &e->conf.headers;
    if (e->grpc) {
        build_grpc_headers(e);
        return;
    }
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
    hs_sender_free(e->sender);
    for (size_t i = 0; i < e->header_count; i++)
        free(e->headers[i]);
    free(e->headers);
    free(e->url);
    hs_tls_client_free(e->tls);
    hs_config_free_fields(otlp_fields, &e->conf);
    free(e);
}

/* ---- the sender's hooks ----------------------------------------------------------------- */

static int otlp_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct otlp_exp *e = ud;
    const struct hs_traces *t = item;
    req->count = t->spans;
    req->url = e->url;
    req->headers = (const char *const *)e->headers;
    req->header_count = e->header_count;
    const uint8_t *p = t->data;
    size_t len = t->len;
    struct hs_buf json = {0};
    int rc = 0;
    /* the batch's tenant travels per request; a configured X-Scope-OrgID wins (as in
     * exporters/pyroscope.c), so a fixed-tenant backend stays fixed */
    bool tenant_configured = false;
    for (size_t i = 0; i < e->header_count; i++)
        tenant_configured |= strncasecmp(e->headers[i], "x-scope-orgid:", 14) == 0;
    if (t->tenant[0] && !tenant_configured &&
        (rc = hs_sender_request_header(req, "X-Scope-OrgID", t->tenant)) != 0)
        return rc;
    if (e->grpc && e->gzip) { /* the batch is the message, gzipped behind its prefix */
        if ((rc = hs_grpc_frame(&req->body_buf, p, len, true)) != 0)
            goto out;
        req->body = req->body_buf.data;
        req->body_len = req->body_buf.len;
        goto out;
    }
    if (e->grpc) { /* the prefix travels apart, so the batch's bytes are sent in place */
        static_assert(HS_GRPC_PREFIX <= sizeof(req->prefix), "the gRPC prefix fits a request's");
        if ((rc = hs_grpc_prefix(req->prefix, len, false)) != 0)
            goto out;
        req->prefix_len = HS_GRPC_PREFIX;
        req->body = p;
        req->body_len = len;
        goto out;
    }
    if (e->json) {
        if ((rc = hs_otlp_wire_to_json(p, len, &json)) != 0)
            goto out;
        p = json.data;
        len = json.len;
    }
    if (e->gzip) {
        if ((rc = hs_gzip(p, len, GZIP_LEVEL, &req->body_buf)) != 0)
            goto out;
        req->body = req->body_buf.data;
        req->body_len = req->body_buf.len;
    } else if (e->json) {
        req->body_buf = json; /* the request keeps the JSON itself */
        json = (struct hs_buf){0};
        req->body = req->body_buf.data;
        req->body_len = req->body_buf.len;
    } else {
        req->body = t->data; /* the batch is already the request: send its bytes */
        req->body_len = t->len;
    }
out:
    hs_buf_free(&json);
    return rc;
}

static void otlp_release(void *ud, void *item)
{
    hs_traces_unref(item);
}

/* The response to a 2xx: partial_success.rejected_spans, from protobuf, a gRPC message or
 * JSON. */
static int64_t partial_rejected(const struct hs_http_result *res, char *msg, size_t msglen)
{
    int64_t rejected = 0;
    const char *ct = res->content_type ? res->content_type : "";
    msg[0] = '\0';
    if (res->body_len == 0)
        return 0;
    const uint8_t *body = res->body;
    size_t len = res->body_len;
    struct hs_buf inflated = {0};
    bool grpc = strncasecmp(ct, "application/grpc", 16) == 0;
    if (grpc) {
        /* a compressed flag can only mean gzip: it is all we offer in grpc-accept-encoding */
        static const struct hs_str gz = HS_STR("gzip");
        char err[200];
        if (hs_grpc_unframe(res->body, res->body_len, &gz, GRPC_MAX_RESPONSE, &inflated, &body,
                            &len, err, sizeof(err)) != HS_GRPC_OK) {
            hs_buf_free(&inflated);
            snprintf(msg, msglen, "unreadable response message: %s", err);
            return 0;
        }
    }
    if (grpc || strncasecmp(ct, "application/x-protobuf", 22) == 0 ||
        strncasecmp(ct, "application/protobuf", 20) == 0) {
        Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *r =
            opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
                NULL, len, body);
        if (r && r->partial_success) {
            rejected = r->partial_success->rejected_spans;
            snprintf(msg, msglen, "%s", r->partial_success->error_message);
        }
        if (r)
            protobuf_c_message_free_unpacked(&r->base, NULL);
        hs_buf_free(&inflated);
    } else if (strncasecmp(ct, "application/json", 16) == 0) {
        rejected =
            hs_otlp_json_partial_success((const char *)res->body, res->body_len, msg, msglen);
    }
    return rejected;
}

static uint32_t otlp_on_success(void *ud, void *item, const struct hs_sender_request *req,
                                const struct hs_http_result *res)
{
    struct otlp_exp *e = ud;
    char msg[256];
    uint32_t spans = req->count;
    int64_t rejected = partial_rejected(res, msg, sizeof(msg));
    uint32_t bad = rejected <= 0 ? 0 : rejected >= spans ? spans : (uint32_t)rejected;
    uint32_t suppressed;
    if ((bad || msg[0]) && hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(e->base.id,
                    "backend rejected %u of %u spans: %s (%u similar messages suppressed)", bad,
                    spans, msg[0] ? msg : "no message", suppressed);
    return bad;
}

/* gRPC answers 200 and says how it went in grpc-status (wire.md §3): OK is sent; the retry
 * table decides the rest, RESOURCE_EXHAUSTED only with RetryInfo, whose delay is waited. */
static int otlp_grpc_classify(void *ud, const struct hs_sender_request *req,
                              struct hs_http_result *res)
{
    struct otlp_exp *e = ud;
    if (res->status == 0)
        return HS_SENDER_RETRY; /* no answer: a transport error, RST_STREAM or GOAWAY */
    int code = res->grpc_status;
    if (code < 0) /* no grpc-status: a proxy's or a non-gRPC server's answer */
        code = res->status == 200 ? HS_GRPC_UNKNOWN : hs_grpc_code_from_http(res->status);
    if (code == HS_GRPC_OK)
        return HS_SENDER_SENT;
    uint64_t delay = 0;
    bool retry_info = res->grpc_details &&
                      hs_grpc_details_retry_delay(res->grpc_details, strlen(res->grpc_details),
                                                  &delay);
    if (retry_info)
        res->retry_after_ms = HS_MAX(res->retry_after_ms, delay);
    char text[400] = "";
    if (res->grpc_message)
        hs_grpc_percent_decode(res->grpc_message, strlen(res->grpc_message), text, sizeof(text));
    snprintf(e->errtext, sizeof(e->errtext), "gRPC %s (%d)%s%s", hs_grpc_code_name(code), code,
             text[0] ? ": " : "", text);
    res->error = e->errtext;
    return hs_grpc_retryable(code, retry_info) ? HS_SENDER_RETRY : HS_SENDER_PERMANENT;
}

/* endpoint: a URL for http/protobuf; host:port or http://host:port for grpc. */
static int check_endpoint(struct otlp_exp *e, const struct hs_config_node *cfg, const char *path,
                          struct hs_error *err)
{
    const struct hs_config_node *n = hs_config_get(cfg, "endpoint");
    const char *ep = e->conf.endpoint;
    if (!ep)
        return 0;
    if (!e->grpc) {
        const char *why = hs_cfg_url_problem(ep);
        if (why) {
            hs_config_errorf(err, n ? n : cfg, path, "endpoint: \"%s\": %s", ep, why);
            return HS_EINVAL;
        }
        return 0;
    }
    char host[256], tmp[300];
    uint16_t port;
    bool http = strncasecmp(ep, "http://", 7) == 0, https = strncasecmp(ep, "https://", 8) == 0;
    if (https && e->conf.tls.insecure) {
        hs_config_errorf(err, n ? n : cfg, path,
                         "endpoint: \"%s\": https is TLS, but tls.insecure is true", ep);
        return HS_EINVAL;
    }
    /* otelcol's rule: http:// means plaintext, https:// TLS, host:port TLS unless insecure */
    e->grpc_tls = !http && !e->conf.tls.insecure;
    snprintf(tmp, sizeof(tmp), "%s", http ? ep + 7 : https ? ep + 8 : ep);
    size_t tl = strlen(tmp);
    while (tl && tmp[tl - 1] == '/')
        tmp[--tl] = '\0';
    if (hs_parse_endpoint(tmp, host, sizeof(host), &port) != 0 || !host[0] || !port) {
        hs_config_errorf(err, n ? n : cfg, path,
                         "endpoint: \"%s\": for grpc, host:port or http(s)://host:port", ep);
        return HS_EINVAL;
    }
    return 0;
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
    e->grpc = e->conf.protocol && strcmp(e->conf.protocol, "grpc") == 0;
    if (rc == 0 && check_endpoint(e, cfg, path, err) != 0)
        rc = HS_EINVAL;
    /* the files are read now, so a missing or broken one is an error at its key */
    if (rc == 0 && hs_tls_client_new(&e->conf.tls, hs_config_get(cfg, "tls"), path, &e->tls,
                                     err) != 0)
        rc = HS_EINVAL;
    if (rc == 0 && e->grpc && e->conf.traces_endpoint) {
        hs_config_errorf(err, cfg, path, "traces_endpoint is for http/protobuf; with protocol "
                                         "grpc set endpoint (host:port)");
        rc = HS_EINVAL;
    }
    if (rc == 0 && e->grpc && strcmp(e->conf.encoding, "json") == 0) {
        hs_config_errorf(err, cfg, path, "encoding json is for http/protobuf; gRPC is protobuf");
        rc = HS_EINVAL;
    }
    if (rc != 0)
        goto fail;
    e->url = e->grpc ? grpc_url(e->conf.endpoint, e->grpc_tls) : traces_url(&e->conf);
    if (!e->url)
        goto fail;
    e->gzip = strcmp(e->conf.compression, "gzip") == 0;
    e->json = !e->grpc && strcmp(e->conf.encoding, "json") == 0;
    e->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    build_headers(e);
    *out = &e->base;
    return 0;
fail:
    exp_free(e);
    return HS_EINVAL;
}

/* ---- the component ---------------------------------------------------------------------- */

/* The sender is made on first use, as the core fills base.id after create. */
static struct hs_sender *exp_sender(struct otlp_exp *e)
{
    if (!e->sender)
        e->sender = hs_sender_new(&(struct hs_sender_options){
            .id = e->base.id,
            .items = "spans",
            .signal = HS_SIGNAL_TRACES,
            .queue = &e->conf.queue,
            .retry = &e->conf.retry,
            .timeout_ms = e->conf.timeout_ms,
            /* with sending_queue.storage: replayed records take these from the config */
            .url = e->url,
            .headers = (const char *const *)e->headers,
            .header_count = e->header_count,
            .client_flags = e->grpc ? HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE : 0,
            .tls = e->tls,
            .hooks = {.encode = otlp_encode,
                      .release = otlp_release,
                      .on_success = otlp_on_success,
                      .classify = e->grpc ? otlp_grpc_classify : NULL},
            .ud = e,
        });
    return e->sender;
}

static bool exp_ready(struct hs_component *c)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    return !e->closing && hs_sender_ready(exp_sender(e));
}

static int exp_consume(struct hs_component *c, struct hs_traces *t)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    if (e->closing) {
        hs_traces_unref(t);
        return HS_EAGAIN;
    }
    return hs_sender_submit(exp_sender(e), t, t->len, t->spans, 1);
}

static int exp_start(struct hs_component *c, const struct hs_host *host)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    e->base.metrics = host->metrics;
    int rc = hs_sender_start(exp_sender(e), host->loop, host->metrics);
    if (rc != 0)
        return rc;
    hs_log_info(c->id, "exporting to %s%s", e->url,
                e->grpc ? (e->grpc_tls ? " (OTLP/gRPC, TLS)" : " (OTLP/gRPC, h2c)") : "");
    return 0;
}

static void sender_done(void *ud)
{
    struct otlp_exp *e = ud;
    e->done(&e->base);
}

static void exp_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, base);
    if (e->closing) /* already on its way; the first done will fire */
        return;
    e->closing = true;
    e->done = done;
    hs_sender_shutdown(exp_sender(e), sender_done, e); /* after what is held is settled */
}

static void exp_destroy(struct hs_component *c)
{
    exp_free(hs_container_of(c, struct otlp_exp, base));
}

const struct hs_component_type hs_exporter_otlp = {
    .name = "otlp",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES,
    .doc = "Sends spans to an OTLP/HTTP or OTLP/gRPC backend (Tempo, a Collector), queued and "
           "retried.",
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
