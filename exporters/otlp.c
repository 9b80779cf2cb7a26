/* otlp.c: the `otlp` exporter (also `otlphttp`, and otelcol's `otlp_http` and `otlp_grpc`): spans
 * and OTLP profiles sent as OTLP/HTTP (protobuf or JSON, gzip) or OTLP/gRPC (h2c or TLS, gzip) to
 * a backend such as Tempo, a Collector or Pyroscope, per wire.md §2, §3. Each signal is one
 * exporter of the helper (exporters/helper/exporter.h: queue, retries, persistence), as otelcol
 * makes one per signal; the component holds both and starts those its pipelines use. Profiles
 * go out as the request bytes they came in as. */
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
#include "net/grpc.h"
#include "net/http_client.h"
#include "core/log.h"
#include "core/metrics.h"
#include "exporters/otlp.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

/* Measured on 8192 typical spans (2.6 MB): level 1 gives 4.74x at 0.63 CPU-s per million spans,
 * level 6 gives 4.97x at 1.48. 5% fewer bytes is not worth half of our CPU budget (design §11). */
#define GZIP_LEVEL 1

static const char *const compression_choices[] = {"gzip", "none", NULL};
static const char *const encoding_choices[] = {"proto", "json", NULL};
static const char *const protocol_choices[] = {"http/protobuf", "grpc", NULL};

#define GRPC_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define GRPC_PROFILES_PATH                                                                         \
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define PROFILES_PATH "/v1development/profiles"
/* the largest ExportTraceServiceResponse we read (wire.md §3: 4 MiB response limit) */
#define GRPC_MAX_RESPONSE (4u << 20)

/* The keys of OTLP/gRPC (otelcol's otlp_grpc has these and no more), then OTLP/HTTP's, then our
 * otlp's, which chooses between the two. */
static const struct hs_config_field grpc_wire_fields[] = {
    {"compression", HS_CFG_ENUM, offsetof(struct hs_otlp_config, compression), "gzip",
     .choices = compression_choices, .doc = "request body compression"},
    {"exporter", HS_CFG_INLINE, offsetof(struct hs_otlp_config, common), .sub = hs_exporter_fields},
    {0},
};

static const struct hs_config_field http_wire_fields[] = {
    {"encoding", HS_CFG_ENUM, offsetof(struct hs_otlp_config, encoding), "proto",
     .choices = encoding_choices, .doc = "OTLP/HTTP body encoding: protobuf or JSON"},
    {"grpc", HS_CFG_INLINE, 0, .sub = grpc_wire_fields},
    {0},
};

/* What a backend of load_balancing has too: all but where it is. */
static const struct hs_config_field otlp_wire_fields[] = {
    {"protocol", HS_CFG_ENUM, offsetof(struct hs_otlp_config, protocol), "http/protobuf",
     .choices = protocol_choices,
     .doc = "http/protobuf: OTLP/HTTP (see encoding); grpc: OTLP/gRPC over HTTP/2"},
    {"http", HS_CFG_INLINE, 0, .sub = http_wire_fields},
    {0},
};

static const struct hs_config_field signal_endpoint_fields[] = {
    {"traces_endpoint", HS_CFG_URL, offsetof(struct hs_otlp_config, traces_endpoint), NULL,
     .doc = "full URL for traces, used as is (overrides endpoint)"},
    {"profiles_endpoint", HS_CFG_URL, offsetof(struct hs_otlp_config, profiles_endpoint), NULL,
     .doc = "full URL for profiles, used as is (overrides endpoint)"},
    {0},
};

/* Every key of every variant: what a config is freed and copied with. */
static const struct hs_config_field otlp_fields[] = {
    {"endpoint", HS_CFG_STRING, offsetof(struct hs_otlp_config, endpoint), NULL,
     .doc = "http/protobuf: base URL of the backend, e.g. https://tempo:4318 (/v1/traces and "
            "/v1development/profiles are appended); grpc: host:port (TLS unless tls.insecure), "
            "https://host:port (TLS) or http://host:port (h2c), e.g. tempo:4317"},
    {"signals", HS_CFG_INLINE, 0, .sub = signal_endpoint_fields},
    {"otlp", HS_CFG_INLINE, 0, .sub = otlp_wire_fields},
    {0},
};

static const struct hs_config_field otlp_http_fields[] = {
    {"endpoint", HS_CFG_STRING, offsetof(struct hs_otlp_config, endpoint), NULL,
     .doc = "base URL of the backend, e.g. https://collector:4318 (/v1/traces and "
            "/v1development/profiles are appended)"},
    {"signals", HS_CFG_INLINE, 0, .sub = signal_endpoint_fields},
    {"http", HS_CFG_INLINE, 0, .sub = http_wire_fields},
    {0},
};

static const struct hs_config_field otlp_grpc_fields[] = {
    {"endpoint", HS_CFG_STRING, offsetof(struct hs_otlp_config, endpoint), NULL, .required = true,
     .doc = "host:port (TLS unless tls.insecure), https://host:port (TLS) or http://host:port "
            "(h2c), e.g. collector:4317"},
    {"grpc", HS_CFG_INLINE, 0, .sub = grpc_wire_fields},
    {0},
};

const struct hs_config_field hs_otlp_backend_fields[] = {
    {"port", HS_CFG_UINT, offsetof(struct hs_otlp_config, port), "0", .min = 0, .max = 65535,
     .doc = "the OTLP port of a backend named without one; 0: 4318 for http/protobuf, 4317 for "
            "grpc"},
    {"otlp", HS_CFG_INLINE, 0, .sub = otlp_wire_fields},
    {0},
};

struct otlp_pair;

/* One signal's exporter: what the helper queues and sends. */
struct otlp_exp {
    struct hs_exporter x; /* first: the helper frees the struct */
    struct hs_otlp_config conf;
    bool gzip, json, grpc;
    bool grpc_tls;     /* grpc over TLS (h2 by ALPN), else h2c */
    bool profiles;     /* its items are OTLP profiles batches, else spans */
    struct otlp_pair *pair; /* the component it is part of; NULL for a load_balancing backend */
    char errtext[600]; /* a gRPC failure's text, for the sender's log line (one at a time) */
    struct hs_ratelimit log_rl;
};

enum { SIG_TRACES, SIG_PROFILES, SIG_COUNT };

/* The component: one exporter per signal, started for the signals of its pipelines. */
struct otlp_pair {
    struct hs_component base;
    struct otlp_exp *exp[SIG_COUNT];
    bool started[SIG_COUNT];
    unsigned pending; /* shutting down: exporters whose done has not come yet, plus one */
    bool closing;
    hs_done_cb done;
    struct hs_ratelimit log_rl;
};

/* A YAML name's keys and, when the name says it, the protocol. */
struct otlp_variant {
    const struct hs_config_field *fields;
    const char *protocol; /* NULL: the `protocol` key's */
};

/* ---- create ----------------------------------------------------------------------------- */

/* gRPC: http(s)://host:port/<service>/<method>, from host:port or http(s)://host:port[/]. */
static char *grpc_url(const char *endpoint, bool tls, const char *method)
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
    if (hs_buf_printf(&b, "%s://%.*s%s", tls ? "https" : "http", (int)n, hp, method) != 0)
        return NULL;
    return (char *)b.data;
}

/* The signal's URL: its *_endpoint as is, else endpoint + the OTLP path; NULL without either
 * (start refuses that signal then). */
static char *signal_url(const struct hs_otlp_config *conf, bool profiles)
{
    const char *own = profiles ? conf->profiles_endpoint : conf->traces_endpoint;
    if (own)
        return hs_xstrdup(own);
    if (!conf->endpoint)
        return NULL;
    size_t n = strlen(conf->endpoint);
    while (n > 0 && conf->endpoint[n - 1] == '/') /* http://tempo:4318/ must not give // */
        n--;
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%.*s%s", (int)n, conf->endpoint,
                      profiles ? PROFILES_PATH : "/v1/traces") != 0)
        abort(); /* a few bytes at create time: treat like hs_xmalloc */
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

/* The request's body from an OTLP request's protobuf bytes (borrowed from the item): framed
 * for gRPC, as JSON when asked (desc: the request's message), gzipped when asked. */
static int encode_body(struct otlp_exp *e, const uint8_t *p, size_t len,
                       const ProtobufCMessageDescriptor *desc, struct hs_sender_request *req)
{
    int rc = 0;
    struct hs_buf json = {0};
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
    const uint8_t *raw = p;
    size_t raw_len = len;
    if (e->json) {
        if ((rc = hs_otlp_wire_to_json_desc(desc, p, len, &json)) != 0)
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
        req->body = raw; /* the batch is already the request: send its bytes */
        req->body_len = raw_len;
    }
out:
    hs_buf_free(&json);
    return rc;
}

/* The URL, our lines and the batch's tenant (a configured X-Scope-OrgID wins, so a
 * fixed-tenant backend stays fixed). */
static int encode_head(struct otlp_exp *e, const char *tenant, struct hs_sender_request *req)
{
    req->url = e->x.url;
    req->headers = (const char *const *)e->x.headers;
    req->header_count = e->x.header_count;
    return hs_exporter_tenant_header(&e->x, req, tenant);
}

static int otlp_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct otlp_exp *e = hs_container_of(ud, struct otlp_exp, x);
    const struct hs_traces *t = item;
    (void)part;
    req->count = t->spans;
    int rc = encode_head(e, t->tenant, req);
    return rc ? rc
              : encode_body(
                    e, t->data, t->len,
                    &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
                    req);
}

/* An OTLP profiles batch goes out as the request it came in as (JSON input converted once). */
static int otlp_encode_profiles(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct otlp_exp *e = hs_container_of(ud, struct otlp_exp, x);
    const struct hs_profiles *b = item;
    (void)part;
    req->count = b->request_profiles;
    int rc = encode_head(e, b->tenant, req);
    return rc ? rc
              : encode_body(
                    e, b->request, b->request_len,
                    &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
                    req);
}

/* The response to a 2xx: partial_success.rejected_spans, from protobuf, a gRPC message or
 * JSON. An ExportProfilesServiceResponse has the same shape (field 1, and in it rejected_profiles
 * as field 1 and error_message as 2), so the traces message reads it too. */
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
    struct otlp_exp *e = hs_container_of(ud, struct otlp_exp, x);
    char msg[256];
    uint32_t items = req->count;
    int64_t rejected = partial_rejected(res, msg, sizeof(msg));
    uint32_t bad = rejected <= 0 ? 0 : rejected >= items ? items : (uint32_t)rejected;
    uint32_t suppressed;
    if ((bad || msg[0]) && hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(e->x.base.id,
                    "backend rejected %u of %u %s: %s (%u similar messages suppressed)", bad, items,
                    e->profiles ? "profiles" : "spans", msg[0] ? msg : "no message", suppressed);
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

static const struct hs_exporter_ops traces_ops = {
    .signal = HS_SIGNAL_TRACES,
    .fields = otlp_fields,
    .encode = otlp_encode,
    .on_success = otlp_on_success,
    .classify = otlp_classify,
};

static const struct hs_exporter_ops profiles_ops = {
    .signal = HS_SIGNAL_PROFILES,
    .fields = otlp_fields,
    .encode = otlp_encode_profiles,
    .on_success = otlp_on_success,
    .classify = otlp_classify,
};

/* The checks of a decoded config, every problem into err (rc: the decoding's). */
static int check_config(struct otlp_exp *e, int rc, const struct hs_config_node *cfg,
                        const char *path, struct hs_error *err)
{
    e->grpc = e->conf.protocol && strcmp(e->conf.protocol, "grpc") == 0;
    if (rc == 0 && check_endpoint(e, cfg, path, err) != 0)
        rc = HS_EINVAL;
    for (int i = 0; rc == 0 && e->grpc && i < 2; i++) {
        if (!(i ? e->conf.profiles_endpoint : e->conf.traces_endpoint))
            continue;
        hs_config_errorf(err, cfg, path,
                         "%s_endpoint is for http/protobuf; with protocol grpc set endpoint "
                         "(host:port)",
                         i ? "profiles" : "traces");
        rc = HS_EINVAL;
    }
    if (rc == 0 && e->grpc && e->conf.encoding && strcmp(e->conf.encoding, "json") == 0) {
        hs_config_errorf(err, cfg, path, "encoding json is for http/protobuf; gRPC is protobuf");
        rc = HS_EINVAL;
    }
    return rc;
}

/* Readies a checked exporter to send its signal: TLS files read (errors at their keys), URL,
 * headers. Returns 0 or HS_EINVAL; the caller destroys e on failure. */
static int exp_setup(struct otlp_exp *e, const struct hs_config_node *cfg, const char *path,
                     struct hs_error *err)
{
    if (hs_exporter_configure(&e->x, cfg, path, err) != 0)
        return HS_EINVAL;
    e->profiles = e->x.ops->signal == HS_SIGNAL_PROFILES;
    if (e->grpc) {
        e->x.url =
            grpc_url(e->conf.endpoint, e->grpc_tls, e->profiles ? GRPC_PROFILES_PATH : GRPC_PATH);
        if (!e->x.url)
            return HS_EINVAL;
    } else {
        e->x.url = signal_url(&e->conf, e->profiles);
    }
    e->x.note = e->grpc ? (e->grpc_tls ? " (OTLP/gRPC, TLS)" : " (OTLP/gRPC, h2c)") : NULL;
    e->x.client_flags = e->grpc ? HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE : 0;
    e->gzip = strcmp(e->conf.compression, "gzip") == 0;
    e->json = !e->grpc && e->conf.encoding && strcmp(e->conf.encoding, "json") == 0;
    e->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    build_headers(e);
    return 0;
}

static struct otlp_exp *exp_new(const struct hs_exporter_ops *ops)
{
    struct otlp_exp *e = hs_xcalloc(1, sizeof(*e));
    hs_exporter_init(&e->x, ops, &e->conf, &e->conf.common);
    return e;
}

/* The profiles exporter beside a checked traces one: the same settings, its own queue; its
 * logs, /healthz entry and store file say "<id>/profiles", its metrics signal="profiles". */
static struct otlp_exp *profiles_twin(const struct otlp_exp *t)
{
    struct otlp_exp *e = exp_new(&profiles_ops);
    e->conf = t->conf;
    hs_config_dup_fields(otlp_fields, &e->conf);
    e->grpc = t->grpc;
    e->grpc_tls = t->grpc_tls;
    e->x.name_signal = true;
    return e;
}

static int pair_create(const struct otlp_variant *v, const struct hs_config_node *cfg,
                       const char *path, struct hs_component **out, struct hs_error *err)
{
    struct otlp_exp *t = exp_new(&traces_ops), *pf = NULL;
    int rc = hs_config_decode(v->fields, cfg, &t->conf, path, err);
    if (v->protocol) /* freed with the rest: otlp_fields has the row */
        t->conf.protocol = hs_xstrdup(v->protocol);
    /* checked even when decoding failed, so every problem is reported at once; an endpoint
     * with a bad URL is still "written", not missing */
    static const char *const keys[] = {"endpoint", "traces_endpoint", "profiles_endpoint"};
    bool any = t->conf.endpoint || t->conf.traces_endpoint || t->conf.profiles_endpoint;
    for (size_t i = 0; i < HS_ARRAY_SIZE(keys); i++)
        any |= hs_config_get(cfg, keys[i]) != NULL;
    if (!any && !v->protocol) { /* otlp_grpc's endpoint is a required row */
        hs_config_errorf(err, cfg, path,
                         "one of endpoint, traces_endpoint or profiles_endpoint is required");
        rc = HS_EINVAL;
    }
    rc = check_config(t, rc, cfg, path, err);
    if (rc == 0)
        rc = exp_setup(t, cfg, path, err);
    if (rc == 0) {
        pf = profiles_twin(t);
        rc = exp_setup(pf, cfg, path, err);
    }
    if (rc != 0) {
        if (pf)
            hs_exporter_destroy(&pf->x.base);
        hs_exporter_destroy(&t->x.base);
        return HS_EINVAL;
    }
    struct otlp_pair *p = hs_xcalloc(1, sizeof(*p));
    p->exp[SIG_TRACES] = t;
    p->exp[SIG_PROFILES] = pf;
    t->pair = pf->pair = p;
    p->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    *out = &p->base;
    return 0;
}

static const struct hs_component_type otlp_signal_type;

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
    struct otlp_exp *e = exp_new(&traces_ops);
    e->conf = *tmpl;
    hs_config_dup_fields(hs_otlp_backend_fields, &e->conf);
    e->conf.endpoint = hs_xstrdup(endpoint); /* tmpl has none: its rows have no endpoint */
    e->conf.traces_endpoint = NULL;
    e->conf.profiles_endpoint = NULL;
    int rc = check_config(e, 0, cfg, path, err);
    if (rc == 0)
        rc = exp_setup(e, cfg, path, err);
    if (rc != 0) {
        hs_exporter_destroy(&e->x.base);
        return HS_EINVAL;
    }
    e->x.base.type = &otlp_signal_type; /* what the core sets for those it makes */
    *out = &e->x.base;
    return 0;
}

/* ---- the component: both signals' exporters ---------------------------------------------- */

static int pair_start(struct hs_component *c, const struct hs_host *host)
{
    struct otlp_pair *p = hs_container_of(c, struct otlp_pair, base);
    static const unsigned sigs[SIG_COUNT] = {HS_SIGNAL_TRACES, HS_SIGNAL_PROFILES};
    for (int i = 0; i < SIG_COUNT; i++) {
        struct otlp_exp *e = p->exp[i];
        /* outside a service (c->signals 0), each signal that has a URL */
        if (c->signals ? !(c->signals & sigs[i]) : !e->x.url)
            continue;
        if (!e->x.url) {
            hs_log_error(c->id, "%s need endpoint or %s_endpoint", i ? "profiles" : "traces",
                         i ? "profiles" : "traces");
            return HS_EINVAL;
        }
        e->x.base.id = c->id;
        e->x.base.loop = host->loop;
        e->x.base.metrics = host->metrics;
        int rc = hs_exporter_start(&e->x.base, host);
        if (rc != 0)
            return rc;
        p->started[i] = true;
    }
    return 0;
}

static bool pair_ready(struct hs_component *c)
{
    struct otlp_pair *p = hs_container_of(c, struct otlp_pair, base);
    return hs_exporter_ready(&p->exp[SIG_TRACES]->x.base);
}

static bool pair_ready_profiles(struct hs_component *c)
{
    struct otlp_pair *p = hs_container_of(c, struct otlp_pair, base);
    return hs_exporter_ready(&p->exp[SIG_PROFILES]->x.base);
}

static int pair_consume_traces(struct hs_component *c, struct hs_traces *t)
{
    struct otlp_pair *p = hs_container_of(c, struct otlp_pair, base);
    return hs_exporter_consume_traces(&p->exp[SIG_TRACES]->x.base, t);
}

/* OTLP batches only: the service keeps pprof from this exporter (profile_kinds), so one here is
 * a bug upstream, dropped and counted rather than sent as something it is not. */
static int pair_consume_profiles(struct hs_component *c, struct hs_profiles *b)
{
    struct otlp_pair *p = hs_container_of(c, struct otlp_pair, base);
    struct otlp_exp *e = p->exp[SIG_PROFILES];
    if (b->format != HS_PROFILES_OTLP) {
        uint32_t suppressed;
        hs_metrics_drop(c->metrics, c->id, "not_otlp", b->count);
        if (hs_ratelimit_allow(&p->log_rl, hs_now_ms(), &suppressed))
            hs_log_error(c->id,
                         "dropped %u pprof profiles: this exporter sends OTLP profiles "
                         "only (%u similar messages suppressed)",
                         b->count, suppressed);
        hs_profiles_unref(b);
        return 0;
    }
    if (b->request_profiles == 0) { /* nothing to send */
        hs_profiles_unref(b);
        return 0;
    }
    return hs_exporter_submit(&e->x, b, b->bytes, b->request_profiles, 1);
}

static void exp_done(struct hs_component *c)
{
    struct otlp_exp *e = hs_container_of(c, struct otlp_exp, x.base);
    struct otlp_pair *p = e->pair;
    if (--p->pending == 0)
        p->done(&p->base);
}

static void pair_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct otlp_pair *p = hs_container_of(c, struct otlp_pair, base);
    if (p->closing) /* already on its way; the first done will fire */
        return;
    p->closing = true;
    p->done = done;
    p->pending = 1; /* held while the shutdowns are called: one may be done at once */
    for (int i = 0; i < SIG_COUNT; i++) {
        if (!p->started[i])
            continue;
        p->pending++;
        hs_exporter_shutdown(&p->exp[i]->x.base, exp_done);
    }
    exp_done(&p->exp[SIG_TRACES]->x.base);
}

static void pair_destroy(struct hs_component *c)
{
    struct otlp_pair *p = hs_container_of(c, struct otlp_pair, base);
    for (int i = 0; i < SIG_COUNT; i++)
        hs_exporter_destroy(&p->exp[i]->x.base);
    free(p);
}

/* A load_balancing backend: one signal's exporter, driven by the helper's hooks. */
static const struct hs_component_type otlp_signal_type = HS_EXPORTER_TYPE(
    "otlp", HS_SIGNAL_TRACES, otlp_fields, NULL, "One signal of an otlp exporter.");

#define OTLP_TYPE(type_name, type_create, type_fields, type_doc)                                   \
    {                                                                                              \
        .name = (type_name), .kind = HS_KIND_EXPORTER,                                             \
        .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES, .profile_kinds = HS_PROFILES_KIND_OTLP,  \
        .doc = (type_doc), .fields = (type_fields), .create = (type_create), .start = pair_start,  \
        .consume_traces = pair_consume_traces, .consume_profiles = pair_consume_profiles,          \
        .ready = pair_ready, .ready_profiles = pair_ready_profiles, .shutdown = pair_shutdown,     \
        .destroy = pair_destroy,                                                                   \
    }

static int otlp_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    static const struct otlp_variant v = {.fields = otlp_fields};
    return pair_create(&v, cfg, path, out, err);
}

static int otlp_http_create(const struct hs_config_node *cfg, const char *path,
                            struct hs_component **out, struct hs_error *err)
{
    static const struct otlp_variant v = {.fields = otlp_http_fields, .protocol = "http/protobuf"};
    return pair_create(&v, cfg, path, out, err);
}

static int otlp_grpc_create(const struct hs_config_node *cfg, const char *path,
                            struct hs_component **out, struct hs_error *err)
{
    static const struct otlp_variant v = {.fields = otlp_grpc_fields, .protocol = "grpc"};
    return pair_create(&v, cfg, path, out, err);
}

const struct hs_component_type hs_exporter_otlp =
    OTLP_TYPE("otlp", otlp_create, otlp_fields,
              "Sends spans and OTLP profiles to an OTLP/HTTP or OTLP/gRPC backend (Tempo, a "
              "Collector, Pyroscope), queued and retried, each signal on its own queue.");

/* The OpenTelemetry Collector's names for the same exporter, so its configs carry over:
 * otlphttp (deprecated there), and since v0.144.0 otlp_http and otlp_grpc, each with that
 * protocol's keys only. (otelcol's plain `otlp` is gRPC; ours chooses by `protocol`.) */
const struct hs_component_type hs_exporter_otlphttp =
    OTLP_TYPE("otlphttp", otlp_create, otlp_fields,
              "Alias of otlp (the OpenTelemetry Collector's former otlphttp exporter).");

const struct hs_component_type hs_exporter_otlp_http =
    OTLP_TYPE("otlp_http", otlp_http_create, otlp_http_fields,
              "OTLP/HTTP: otlp with protocol http/protobuf (the OpenTelemetry Collector's "
              "otlp_http exporter).");

const struct hs_component_type hs_exporter_otlp_grpc =
    OTLP_TYPE("otlp_grpc", otlp_grpc_create, otlp_grpc_fields,
              "OTLP/gRPC: otlp with protocol grpc (the OpenTelemetry Collector's otlp_grpc "
              "exporter).");
