/* otlp.c: the `otlp` / `otlphttp` exporter: batches sent as OTLP/HTTP (protobuf or JSON, gzip)
 * or OTLP/gRPC (h2c or TLS, gzip) to a backend such as Tempo, per wire.md §2, §3 (otelcol's otlp
 * and otlphttp exporters). Queue, retries, persistence and lifecycle are the exporter helper's
 * (exporters/helper/exporter.h). */
#include <assert.h>
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
#include "core/config_internal.h" /* hs_cfg_url_problem: endpoint is a URL or host:port */
#include "core/grpc.h"
#include "core/http_client.h"
#include "core/log.h"
#include "exporters/otlp.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/traces.h"

/* Measured on 8192 typical spans (2.6 MB): level 1 gives 4.74x at 0.63 CPU-s per million spans,
 * level 6 gives 4.97x at 1.48. 5% fewer bytes is not worth half of our CPU budget (design §11). */
#define GZIP_LEVEL 1

static const char *const compression_choices[] = {"gzip", "none", NULL};
static const char *const encoding_choices[] = {"proto", "json", NULL};
static const char *const protocol_choices[] = {"http/protobuf", "grpc", NULL};

#define GRPC_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
/* the largest ExportTraceServiceResponse we read (wire.md §3: 4 MiB response limit) */
#define GRPC_MAX_RESPONSE (4u << 20)

/* What a backend of load_balancing has too: all but where it is. */
static const struct hs_config_field otlp_wire_fields[] = {
    {"protocol", HS_CFG_ENUM, offsetof(struct hs_otlp_config, protocol), "http/protobuf",
     .choices = protocol_choices,
     .doc = "http/protobuf: OTLP/HTTP (see encoding); grpc: OTLP/gRPC over HTTP/2"},
    {"compression", HS_CFG_ENUM, offsetof(struct hs_otlp_config, compression), "gzip",
     .choices = compression_choices, .doc = "request body compression"},
    {"encoding", HS_CFG_ENUM, offsetof(struct hs_otlp_config, encoding), "proto",
     .choices = encoding_choices, .doc = "OTLP/HTTP body encoding: protobuf or JSON"},
    {"exporter", HS_CFG_INLINE, offsetof(struct hs_otlp_config, common), .sub = hs_exporter_fields},
    {0},
};

static const struct hs_config_field otlp_fields[] = {
    {"endpoint", HS_CFG_STRING, offsetof(struct hs_otlp_config, endpoint), NULL,
     .doc = "http/protobuf: base URL of the backend, e.g. https://tempo:4318 (/v1/traces is "
            "appended); grpc: host:port (TLS unless tls.insecure), https://host:port (TLS) or "
            "http://host:port (h2c), e.g. tempo:4317"},
    {"traces_endpoint", HS_CFG_URL, offsetof(struct hs_otlp_config, traces_endpoint), NULL,
     .doc = "full URL for traces, used as is (overrides endpoint)"},
    {"otlp", HS_CFG_INLINE, 0, .sub = otlp_wire_fields},
    {0},
};

const struct hs_config_field hs_otlp_backend_fields[] = {
    {"port", HS_CFG_UINT, offsetof(struct hs_otlp_config, port), "0", .min = 0, .max = 65535,
     .doc = "the OTLP port of a backend named without one; 0: 4318 for http/protobuf, 4317 for "
            "grpc"},
    {"otlp", HS_CFG_INLINE, 0, .sub = otlp_wire_fields},
    {0},
};

struct otlp_exp {
    struct hs_exporter x; /* first: the helper frees the struct */
    struct hs_otlp_config conf;
    bool gzip, json, grpc;
    bool grpc_tls;     /* grpc over TLS (h2 by ALPN), else h2c */
    char errtext[600]; /* a gRPC failure's text, for the sender's log line (one at a time) */
    struct hs_ratelimit log_rl;
};

extern const struct hs_component_type hs_exporter_otlp;

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

static char *traces_url(const struct hs_otlp_config *conf)
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

/* gRPC request headers (PROTOCOL-HTTP2.md); configured headers travel as metadata, which curl
 * lower-cases on HTTP/2 as gRPC wants. */
static void build_grpc_headers(struct otlp_exp *e)
{
    char timeout[24];
    hs_grpc_timeout_format(e->conf.common.timeout_ms, timeout, sizeof(timeout));
    hs_exporter_header(&e->x, "Content-Type", "application/grpc");
    hs_exporter_header(&e->x, "TE", "trailers");
    if (e->gzip)
        hs_exporter_header(&e->x, "grpc-encoding", "gzip");
    hs_exporter_header(&e->x, "grpc-accept-encoding", HS_GRPC_ACCEPT_ENCODING);
    hs_exporter_header(&e->x, "grpc-timeout", timeout);
    hs_exporter_header(&e->x, "User-Agent", "hotspan/" HS_VERSION " grpc-c/hotspan");
}

/* Our lines; the configured headers follow them (the helper adds those). */
static void build_headers(struct otlp_exp *e)
{
    if (e->grpc) {
        build_grpc_headers(e);
        return;
    }
    hs_exporter_header(&e->x, "Content-Type",
                       e->json ? "application/json" : "application/x-protobuf");
    if (e->gzip)
        hs_exporter_header(&e->x, "Content-Encoding", "gzip");
    hs_exporter_header(&e->x, "User-Agent", "hotspan/" HS_VERSION);
}

/* ---- the helper's hooks ----------------------------------------------------------------- */

static int otlp_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct otlp_exp *e = hs_container_of(ud, struct otlp_exp, x);
    const struct hs_traces *t = item;
    req->count = t->spans;
    req->url = e->x.url;
    req->headers = (const char *const *)e->x.headers;
    req->header_count = e->x.header_count;
    const uint8_t *p = t->data;
    size_t len = t->len;
    struct hs_buf json = {0};
    /* the batch's tenant travels per request; a configured X-Scope-OrgID wins, so a
     * fixed-tenant backend stays fixed */
    int rc = hs_exporter_tenant_header(&e->x, req, t->tenant);
    if (rc != 0)
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

static uint32_t otlp_on_success(void *ud, void *item, const struct hs_sender_request *req,
                                const struct hs_http_result *res)
{
    struct otlp_exp *e = hs_container_of(ud, struct otlp_exp, x);
    char msg[256];
    uint32_t spans = req->count;
    int64_t rejected = partial_rejected(res, msg, sizeof(msg));
    uint32_t bad = rejected <= 0 ? 0 : rejected >= spans ? spans : (uint32_t)rejected;
    uint32_t suppressed;
    if ((bad || msg[0]) && hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(e->x.base.id,
                    "backend rejected %u of %u spans: %s (%u similar messages suppressed)", bad,
                    spans, msg[0] ? msg : "no message", suppressed);
    return bad;
}

/* gRPC answers 200 and says how it went in grpc-status (wire.md §3): OK is sent; the retry
 * table decides the rest, RESOURCE_EXHAUSTED only with RetryInfo, whose delay is waited. */
static int otlp_classify(void *ud, const struct hs_sender_request *req, struct hs_http_result *res)
{
    struct otlp_exp *e = hs_container_of(ud, struct otlp_exp, x);
    if (!e->grpc)
        return 0; /* OTLP/HTTP: the status says it all */
    if (res->status == 0)
        return HS_SENDER_RETRY; /* no answer: a transport error, RST_STREAM or GOAWAY */
    int code = res->grpc_status;
    if (code < 0) /* no grpc-status: a proxy's or a non-gRPC server's answer */
        code = res->status == 200 ? HS_GRPC_UNKNOWN : hs_grpc_code_from_http(res->status);
    if (code == HS_GRPC_OK)
        return HS_SENDER_SENT;
    uint64_t delay = 0;
    bool retry_info =
        res->grpc_details &&
        hs_grpc_details_retry_delay(res->grpc_details, strlen(res->grpc_details), &delay);
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
    if (https && e->conf.common.tls.insecure) {
        hs_config_errorf(err, n ? n : cfg, path,
                         "endpoint: \"%s\": https is TLS, but tls.insecure is true", ep);
        return HS_EINVAL;
    }
    /* otelcol's rule: http:// means plaintext, https:// TLS, host:port TLS unless insecure */
    e->grpc_tls = !http && !e->conf.common.tls.insecure;
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

static const struct hs_exporter_ops otlp_ops = {
    .signal = HS_SIGNAL_TRACES,
    .fields = otlp_fields,
    .encode = otlp_encode,
    .on_success = otlp_on_success,
    .classify = otlp_classify,
};

/* What create and hs_otlp_backend_new share once e->conf is filled: rc is the decoding's. */
static int exp_finish(struct otlp_exp *e, int rc, const struct hs_config_node *cfg,
                      const char *path, struct hs_component **out, struct hs_error *err)
{
    e->grpc = e->conf.protocol && strcmp(e->conf.protocol, "grpc") == 0;
    if (rc == 0 && check_endpoint(e, cfg, path, err) != 0)
        rc = HS_EINVAL;
    if (rc == 0 && hs_exporter_configure(&e->x, cfg, path, err) != 0)
        rc = HS_EINVAL;
    if (rc == 0 && e->grpc && e->conf.traces_endpoint) {
        hs_config_errorf(err, cfg, path,
                         "traces_endpoint is for http/protobuf; with protocol "
                         "grpc set endpoint (host:port)");
        rc = HS_EINVAL;
    }
    if (rc == 0 && e->grpc && strcmp(e->conf.encoding, "json") == 0) {
        hs_config_errorf(err, cfg, path, "encoding json is for http/protobuf; gRPC is protobuf");
        rc = HS_EINVAL;
    }
    if (rc != 0)
        goto fail;
    e->x.url = e->grpc ? grpc_url(e->conf.endpoint, e->grpc_tls) : traces_url(&e->conf);
    if (!e->x.url)
        goto fail;
    e->x.note = e->grpc ? (e->grpc_tls ? " (OTLP/gRPC, TLS)" : " (OTLP/gRPC, h2c)") : NULL;
    e->x.client_flags = e->grpc ? HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE : 0;
    e->gzip = strcmp(e->conf.compression, "gzip") == 0;
    e->json = !e->grpc && strcmp(e->conf.encoding, "json") == 0;
    e->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    build_headers(e);
    *out = &e->x.base;
    return 0;
fail:
    hs_exporter_destroy(&e->x.base);
    return HS_EINVAL;
}

static int exp_create(const struct hs_config_node *cfg, const char *path, struct hs_component **out,
                      struct hs_error *err)
{
    struct otlp_exp *e = hs_xcalloc(1, sizeof(*e));
    hs_exporter_init(&e->x, &otlp_ops, &e->conf, &e->conf.common);
    int rc = hs_config_decode(otlp_fields, cfg, &e->conf, path, err);
    /* checked even when decoding failed, so every problem is reported at once; an endpoint
     * with a bad URL is still "written", not missing */
    if (!e->conf.endpoint && !e->conf.traces_endpoint && !hs_config_get(cfg, "endpoint") &&
        !hs_config_get(cfg, "traces_endpoint")) {
        hs_config_errorf(err, cfg, path, "one of endpoint or traces_endpoint is required");
        rc = HS_EINVAL;
    }
    return exp_finish(e, rc, cfg, path, out, err);
}

uint16_t hs_otlp_backend_port(const struct hs_otlp_config *c)
{
    if (c->port)
        return (uint16_t)c->port;
    return c->protocol && strcmp(c->protocol, "grpc") == 0 ? 4317 : 4318;
}

int hs_otlp_backend_new(const struct hs_otlp_config *tmpl, const char *endpoint,
                        const struct hs_config_node *cfg, const char *path,
                        struct hs_component **out, struct hs_error *err)
{
    struct otlp_exp *e = hs_xcalloc(1, sizeof(*e));
    hs_exporter_init(&e->x, &otlp_ops, &e->conf, &e->conf.common);
    e->conf = *tmpl;
    hs_config_dup_fields(hs_otlp_backend_fields, &e->conf);
    e->conf.endpoint = hs_xstrdup(endpoint); /* tmpl has none: its rows have no endpoint */
    e->conf.traces_endpoint = NULL;
    int rc = exp_finish(e, 0, cfg, path, out, err);
    if (rc == 0)
        (*out)->type = &hs_exporter_otlp; /* what the core sets for those it makes */
    return rc;
}

/* ---- the component ---------------------------------------------------------------------- */

const struct hs_component_type hs_exporter_otlp =
    HS_EXPORTER_TYPE("otlp", HS_SIGNAL_TRACES, otlp_fields, exp_create,
                     "Sends spans to an OTLP/HTTP or OTLP/gRPC backend (Tempo, a Collector), "
                     "queued and retried.");

/* The OpenTelemetry Collector's name for the same exporter, so its configs carry over. */
const struct hs_component_type hs_exporter_otlphttp =
    HS_EXPORTER_TYPE("otlphttp", HS_SIGNAL_TRACES, otlp_fields, exp_create,
                     "Alias of otlp (the OpenTelemetry Collector's otlphttp exporter).");
