/* otlp.c: the OTLP receiver over HTTP (POST /v1/traces and /v1development/profiles, protobuf or
 * JSON, gzip) and gRPC (TraceService/Export and ProfilesService/Export over h2c, gzip). A traces
 * request is validated by the wire scanner and carried as its own bytes; JSON is converted once
 * to the same form; profiles are profiles.c's. Both transports share the validation and
 * delivery; answers are as the OTLP spec says for each (wire.md §2, §3). What the headers alone
 * refuse (credentials above all) is answered before the body is read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/compress.h"
#include "core/arena.h"
#include "net/auth.h"
#include "core/config.h"
#include "net/grpc.h"
#include "net/http_server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "google/rpc/status.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_wire.h"
#include "pdata/traces.h"
#include "receivers/otlp/otlp_int.h"

static const struct hs_config_field http_fields[] = {
    {"endpoint", HS_CFG_ENDPOINT, offsetof(struct otlp_http_config, server.endpoint),
     "0.0.0.0:4318", .doc = "host:port to listen on for OTLP/HTTP"},
    {"traces_url_path", HS_CFG_STRING, offsetof(struct otlp_http_config, traces_url_path),
     "/v1/traces", .doc = "URL path that accepts traces"},
    {"profiles_url_path", HS_CFG_STRING, offsetof(struct otlp_http_config, profiles_url_path),
     "/v1development/profiles", .doc = "URL path that accepts profiles"},
    {"server", HS_CFG_INLINE, offsetof(struct otlp_http_config, server),
     .sub = hs_http_server_fields_common},
    {0},
};

static const struct hs_config_field grpc_fields[] = {
    {"endpoint", HS_CFG_ENDPOINT, offsetof(struct otlp_grpc_config, server.endpoint),
     "0.0.0.0:4317", .doc = "host:port to listen on for OTLP/gRPC (h2c: HTTP/2 with prior "
                            "knowledge; h2 by ALPN with a `tls:` section)"},
    {"server", HS_CFG_INLINE, offsetof(struct otlp_grpc_config, server),
     .sub = hs_http_server_fields_common},
    {0},
};

static const struct hs_config_field protocols_fields[] = {
    {"http", HS_CFG_SECTION, offsetof(struct otlp_config, protocols.http) -
                                 offsetof(struct otlp_config, protocols),
     .sub = http_fields, .has_presence = true,
     .presence_offset = offsetof(struct otlp_config, protocols.http_enabled) -
                        offsetof(struct otlp_config, protocols),
     .doc = "OTLP/HTTP (protobuf and JSON)"},
    {"grpc", HS_CFG_SECTION, offsetof(struct otlp_config, protocols.grpc) -
                                 offsetof(struct otlp_config, protocols),
     .sub = grpc_fields, .has_presence = true,
     .presence_offset = offsetof(struct otlp_config, protocols.grpc_enabled) -
                        offsetof(struct otlp_config, protocols),
     .doc = "OTLP/gRPC (TraceService/Export, ProfilesService/Export; max_request_body_size is "
            "the message limit, compressed and inflated)"},
    {0},
};

/* Each bound refuses the whole request with 400 naming the element (as the traces' do), so a
 * client learns which setting to raise. Samples, stack depth and string length are the
 * pyroscope receiver's defaults (Pyroscope's own), as these profiles may go there. */
static const struct hs_config_field profiles_fields[] = {
    {"max_profiles", HS_CFG_UINT, offsetof(struct otlp_profiles_config, max_profiles), "1000",
     .min = 1, .max = 1000000, .doc = "Profile messages in one request"},
    {"max_samples", HS_CFG_UINT, offsetof(struct otlp_profiles_config, max_samples), "16000",
     .min = 1, .max = 10000000, .doc = "samples in one Profile"},
    {"max_table_entries", HS_CFG_UINT, offsetof(struct otlp_profiles_config, max_table_entries),
     "1000000", .min = 1, .max = 100000000,
     .doc = "entries of each dictionary table (strings, functions, locations, stacks, links, "
            "attributes, mappings)"},
    {"max_stack_depth", HS_CFG_UINT, offsetof(struct otlp_profiles_config, max_stack_depth), "1024",
     .min = 1, .max = 1000000, .doc = "frames of one sample, inlined frames included"},
    {"max_string_length", HS_CFG_SIZE, offsetof(struct otlp_profiles_config, max_string_len),
     "65535", .min = 256, .max = 16 << 20, .doc = "bytes of one string_table entry"},
    {0},
};

static const struct hs_config_field otlp_fields[] = {
    {"protocols", HS_CFG_SECTION, offsetof(struct otlp_config, protocols), .sub = protocols_fields,
     .required = true, .doc = "the transports to serve"},
    {"max_spans_per_request", HS_CFG_UINT, offsetof(struct otlp_config, max_spans), "100000",
     .min = 1, .max = 10000000,
     .doc = "spans in one request, and resourceSpans and scopeSpans entries each; more is a 400"},
    {"max_attributes", HS_CFG_UINT, offsetof(struct otlp_config, max_attributes), "1024",
     .min = 1, .max = 1000000, .doc = "attributes of one resource, scope, span, event or link"},
    {"max_value_depth", HS_CFG_UINT, offsetof(struct otlp_config, max_value_depth), "32",
     .min = 1, .max = 128, .doc = "nesting of array and kvlist attribute values"},
    {"profiles", HS_CFG_SECTION, offsetof(struct otlp_config, profiles), .sub = profiles_fields,
     .doc = "bounds on an OTLP profiles request (beside max_attributes and max_value_depth, "
            "which apply to it too); past one: 400 naming the element and the key"},
    {"auth", HS_CFG_SECTION, offsetof(struct otlp_config, auth), .sub = hs_auth_fields,
     .has_presence = true, .presence_offset = offsetof(struct otlp_config, auth_enabled),
     .doc = "credentials every request must carry, on both protocols; none: open"},
    {0},
};

#define GRPC_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define GRPC_PROFILES_PATH                                                                         \
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

static int otlp_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct otlp *r = hs_xcalloc(1, sizeof(*r));
    int rc = hs_config_decode(otlp_fields, cfg, &r->conf, path, err);
    if (rc == 0 && !r->conf.protocols.http_enabled && !r->conf.protocols.grpc_enabled) {
        hs_config_errorf(err, cfg, path,
                         "protocols: no protocol enabled (add http: {} and/or grpc: {})");
        rc = HS_EINVAL;
    }
    if (rc == 0 && r->conf.auth_enabled) {
        char apath[256];
        snprintf(apath, sizeof(apath), "%s.auth", path ? path : "");
        rc = hs_auth_new(&r->conf.auth, hs_config_get(cfg, "auth"), apath, &r->auth, err);
    }
    /* TLS files are read now, so a bad one is a positioned error `validate` reports too */
    const struct hs_config_node *protocols = hs_config_get(cfg, "protocols");
    char lpath[256];
    if (rc == 0 && r->conf.protocols.http_enabled) {
        snprintf(lpath, sizeof(lpath), "%s.protocols.http", path ? path : "");
        rc = hs_http_server_config_check(&r->conf.protocols.http.server,
                                         hs_config_get(protocols, "http"), lpath, err);
    }
    if (rc == 0 && r->conf.protocols.grpc_enabled) {
        snprintf(lpath, sizeof(lpath), "%s.protocols.grpc", path ? path : "");
        rc = hs_http_server_config_check(&r->conf.protocols.grpc.server,
                                         hs_config_get(protocols, "grpc"), lpath, err);
    }
    if (rc) {
        hs_auth_free(r->auth);
        hs_config_free_fields(otlp_fields, &r->conf);
        free(r);
        return rc;
    }
    r->limits = (struct hs_otlp_limits){.max_spans = r->conf.max_spans,
                                        .max_attributes = r->conf.max_attributes,
                                        .max_value_depth = r->conf.max_value_depth};
    const struct otlp_profiles_config *pc = &r->conf.profiles;
    r->plimits = (struct hs_otlp_profiles_limits){.max_profiles = pc->max_profiles,
                                                  .max_samples = pc->max_samples,
                                                  .max_table_entries = pc->max_table_entries,
                                                  .max_stack_depth = pc->max_stack_depth,
                                                  .max_attributes = r->conf.max_attributes,
                                                  .max_value_depth = r->conf.max_value_depth,
                                                  .max_string_len = (uint32_t)pc->max_string_len};
    r->bad_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    *out = &r->base;
    return 0;
}

#define INVALID_IDS_MSG "spans rejected: trace_id and span_id must be set and not all zero"

/* 200 with an ExportTraceServiceResponse: partial_success unset on full success, else the
 * count of spans rejected as invalid (the client must not retry them, wire.md §2). */
static void answer_ok(struct hs_http_request *req, enum body_type type, uint32_t rejected)
{
    if (type == BODY_JSON) {
        char body[200];
        int n = rejected ? snprintf(body, sizeof(body),
                                    "{\"partialSuccess\":{\"rejectedSpans\":\"%u\","
                                    "\"errorMessage\":\"%u " INVALID_IDS_MSG "\"}}",
                                    rejected, rejected)
                         : snprintf(body, sizeof(body), "{}");
        hs_http_respond(req, 200, "application/json", NULL, 0, body, (size_t)n);
        return;
    }
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse resp =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess ps =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
    char msg[160];
    uint8_t body[256];
    if (rejected) {
        snprintf(msg, sizeof(msg), "%u " INVALID_IDS_MSG, rejected);
        ps.rejected_spans = rejected;
        ps.error_message = msg;
        resp.partial_success = &ps;
    }
    size_t n = opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(
        &resp, body);
    if (type == BODY_GRPC)
        hs_grpc_respond(req, HS_GRPC_OK, NULL, body, n, hs_grpc_request_gzip(req), 0);
    else
        hs_http_respond(req, 200, "application/x-protobuf", NULL, 0, body, n);
}

static bool id_invalid(struct hs_str id)
{
    for (size_t i = 0; i < id.len; i++)
        if (id.ptr[i])
            return false;
    return true; /* empty or all zero */
}

static int count_invalid_ids(void *ud, const struct hs_span_view *span)
{
    if (id_invalid(span->trace_id) || id_invalid(span->span_id))
        ++*(uint32_t *)ud;
    return 0;
}

static bool span_valid(const Opentelemetry__Proto__Trace__V1__Span *sp)
{
    struct hs_str t = {(const char *)sp->trace_id.data, sp->trace_id.len};
    struct hs_str s = {(const char *)sp->span_id.data, sp->span_id.len};
    return !id_invalid(t) && !id_invalid(s);
}

/* The rare slow path: rewrites the request without its invalid spans (and the scopes and
 * resources left empty), through protobuf-c, which keeps unknown fields; then rescans it. */
static int drop_invalid_spans(struct otlp *r, const uint8_t *p, size_t len, struct hs_buf *out,
                              struct hs_otlp_scan *scan)
{
    struct hs_arena *arena = hs_arena_new(len * 2 + 4096, 0);
    if (!arena)
        return HS_ENOMEM;
    ProtobufCAllocator alloc = hs_arena_pb_allocator(arena);
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            &alloc, len, p);
    if (!req) {
        hs_arena_free(arena);
        return HS_EINVAL;
    }
    size_t nr = 0;
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = req->resource_spans[i];
        size_t ns = 0;
        for (size_t j = 0; j < rs->n_scope_spans; j++) {
            Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = rs->scope_spans[j];
            size_t kept = 0;
            for (size_t k = 0; k < ss->n_spans; k++)
                if (span_valid(ss->spans[k]))
                    ss->spans[kept++] = ss->spans[k];
            ss->n_spans = kept;
            if (kept)
                rs->scope_spans[ns++] = ss;
        }
        rs->n_scope_spans = ns;
        if (ns)
            req->resource_spans[nr++] = rs;
    }
    req->n_resource_spans = nr;
    size_t n =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            req);
    hs_buf_reset(out);
    int rc = hs_buf_reserve(out, n);
    if (rc == 0) {
        out->len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
            req, out->data);
        *scan = (struct hs_otlp_scan){0};
        rc = hs_otlp_traces_scan(out->data, out->len, &r->limits, NULL, NULL, scan);
    }
    hs_arena_free(arena);
    return rc;
}

/* Gunzips the body into `out` when it is compressed; otherwise leaves `out` empty and the body
 * is read where it lies (copied only once it is known to be valid and wanted). */
static int decompress_body(struct otlp *r, struct hs_http_request *req, enum body_type type,
                           struct hs_buf *out)
{
    const struct hs_str *enc = hs_http_request_header(req, "content-encoding");
    uint64_t limit = r->conf.protocols.http.server.max_request_body_size;
    if (!enc || !enc->len || hs_str_ieq(*enc, "identity"))
        return 0;
    if (!hs_str_ieq(*enc, "gzip") && !hs_str_ieq(*enc, "x-gzip")) {
        char msg[160];
        snprintf(msg, sizeof(msg), "unsupported Content-Encoding \"%.*s\" (supported: gzip)",
                 (int)HS_MIN(enc->len, 40), enc->ptr);
        hs_otlp_recv_status(req, type, 415, CODE_INVALID_ARGUMENT, msg, NULL, 0);
        return HS_EINVAL;
    }
    const char *why = NULL;
    int rc = hs_gunzip(req->body, req->body_len, limit, out, &why);
    if (rc == HS_E2BIG) {
        char msg[160];
        snprintf(msg, sizeof(msg), "decompressed body exceeds max_request_body_size (%llu bytes)",
                 (unsigned long long)limit);
        hs_otlp_recv_reject(r, req, type, 413, "too_large", msg);
    } else if (rc) {
        hs_otlp_recv_reject(r, req, type, 400, "bad_gzip", why ? why : hs_strerror(rc));
    }
    return rc;
}

static bool content_type(const struct hs_http_request *req, enum body_type *type)
{
    const struct hs_str *ct = hs_http_request_header(req, "content-type");
    if (ct && hs_http_media_type_is(ct, "application/x-protobuf"))
        *type = BODY_PROTO;
    else if (ct && hs_http_media_type_is(ct, "application/json"))
        *type = BODY_JSON;
    else
        return false;
    return true;
}

/* Hands validated spans to the pipeline, or refuses them (503, UNAVAILABLE) when it is full.
 * `owned` holds the bytes when they were decompressed or converted; else p/len (in the request)
 * are copied here, after the pipeline said it has room, so a refusal costs no copy. */
static void deliver(struct otlp *r, struct hs_http_request *req, enum body_type type,
                    const uint8_t *p, size_t len, struct hs_buf *owned,
                    const struct hs_otlp_scan *scan, uint32_t rejected, struct req_tenant tenant)
{
    static const struct hs_http_header retry = {HS_STR("retry-after"), HS_STR("1")};
    struct otlp_counters *k = &r->counters[type == BODY_GRPC ? TR_GRPC : TR_HTTP];
    if (!hs_consumer_ready(r->base.next)) {
        hs_counter_add(k->refused, scan->spans);
        hs_otlp_recv_status(req, type, 503, CODE_UNAVAILABLE,
                            "pipeline is full (exporters busy or backend down): retry later",
                            &retry, 1);
        return;
    }
    /* the request's own bytes: taken from the server when they are its whole body, else copied */
    bool whole = p == req->body && len == req->body_len;
    if (!owned->data && !(whole && hs_http_request_take_body(req, owned) == 0) &&
        hs_buf_append(owned, p, len) != 0) {
        hs_otlp_recv_status(req, type, 503, CODE_UNAVAILABLE, "out of memory", &retry, 1);
        return;
    }
    struct hs_traces *t =
        hs_traces_wrap(owned->data, owned->len, owned->cap, scan->spans, scan->resource_spans);
    if (!t) {
        hs_otlp_recv_status(req, type, 503, CODE_UNAVAILABLE, "out of memory", &retry, 1);
        return;
    }
    *owned = (struct hs_buf){0}; /* the batch owns the bytes now */
    hs_traces_set_tenant(t, tenant.id.ptr, tenant.id.len); /* checked by hs_auth_request_tenant */
    t->tenant_authenticated = tenant.authenticated;
    int rc = hs_consumer_traces(r->base.next, t);
    if (rc == 0) {
        hs_counter_add(k->accepted, scan->spans);
        answer_ok(req, type, rejected);
    } else {
        hs_counter_add(k->refused, scan->spans);
        hs_otlp_recv_status(req, type, rc == HS_EAGAIN ? 503 : 400,
                            rc == HS_EAGAIN ? CODE_UNAVAILABLE : CODE_INVALID_ARGUMENT,
                            hs_strerror(rc), rc == HS_EAGAIN ? &retry : NULL, rc == HS_EAGAIN);
    }
}

/* What both transports do with the request's protobuf bytes: scan (the limits), drop spans with
 * invalid ids (partial success), deliver. `owned` holds p when p is not in the request. */
static void process(struct otlp *r, struct hs_http_request *req, enum body_type type,
                    const uint8_t *p, size_t len, struct hs_buf *owned, struct req_tenant tenant)
{
    struct otlp_counters *k = &r->counters[type == BODY_GRPC ? TR_GRPC : TR_HTTP];
    struct hs_otlp_scan scan = {0};
    uint32_t invalid = 0;
    int rc = hs_otlp_traces_scan(p, len, &r->limits, count_invalid_ids, &invalid, &scan);
    if (rc) {
        hs_otlp_recv_reject(r, req, type, 400, rc == HS_E2BIG ? "over_limit" : "malformed",
                            scan.err[0] ? scan.err : hs_strerror(rc));
        return;
    }
    if (invalid) {
        struct hs_buf kept = {0};
        rc = drop_invalid_spans(r, p, len, &kept, &scan);
        hs_buf_free(owned);
        *owned = kept;
        p = owned->data;
        len = owned->len;
        if (rc) {
            hs_otlp_recv_status(req, type, 503, CODE_UNAVAILABLE, hs_strerror(rc), NULL, 0);
            return;
        }
        hs_counter_add(k->rejected, invalid);
    }
    if (scan.spans == 0) /* an empty request is a full success */
        answer_ok(req, type, invalid);
    else
        deliver(r, req, type, p, len, owned, &scan, invalid, tenant);
}

/* Refuses a request without valid credentials (401 with WWW-Authenticate, or UNAUTHENTICATED)
 * and one whose X-Scope-OrgID is no tenant id (400); else *tenant is the request's tenant.
 * Headers only: it runs at headers time (http_precheck, grpc_precheck), so a stranger is
 * refused before its body is read, and again in the handler, because the tenant of a matching
 * token must reach the batch and nothing carries it from the headers callback to the handler.
 * The second run costs a digest and a compare per credential; a credential rotated out between
 * the two refuses the request then, as it should. A failure is counted where it is answered. */
static bool authenticate(struct otlp *r, struct hs_http_request *req, enum body_type type,
                         struct req_tenant *tenant)
{
    const char *token_tenant = NULL;
    if (r->auth) {
        enum hs_auth_result res = hs_auth_check(r->auth, req, &token_tenant);
        if (res != HS_AUTH_OK) {
            struct hs_http_header ch[2];
            size_t n = hs_auth_challenges(r->auth, res, ch);
            hs_otlp_recv_status(req, type, 401, HS_GRPC_UNAUTHENTICATED, hs_auth_message(res), ch,
                                n);
            return false;
        }
    }
    tenant->authenticated = token_tenant != NULL;
    if (!hs_auth_request_tenant(req, token_tenant, &tenant->id)) {
        hs_otlp_recv_reject(
            r, req, type, 400, "bad_tenant",
            "X-Scope-OrgID: not a valid tenant id (1-150 of A-Z a-z 0-9 ! - _ . * ' ( ))");
        return false;
    }
    return true;
}

/* Whether the receiver feeds a pipeline of that signal (outside a service: every signal). A
 * signal it feeds none of is not served at all, as otelcol registers no handler for it: its
 * path is a 404 and its gRPC method UNIMPLEMENTED, rather than data accepted into nowhere. */
static bool serves(const struct otlp *r, enum hs_signal sig)
{
    return !r->base.signals || (r->base.signals & sig);
}

/* What OTLP/HTTP checks before the body, in this order: path (404), method (405), credentials
 * and tenant, media type (415). Answers and returns false on the first that fails; *sig is the
 * signal the path names. */
static bool http_precheck(struct otlp *r, struct hs_http_request *req, enum body_type *type,
                          struct req_tenant *tenant, enum hs_signal *sig)
{
    static const struct hs_http_header allow = {HS_STR("allow"), HS_STR("POST")};
    const struct otlp_http_config *hc = &r->conf.protocols.http;
    if (hs_str_eq(req->path, hc->traces_url_path) && serves(r, HS_SIGNAL_TRACES)) {
        *sig = HS_SIGNAL_TRACES;
    } else if (hs_str_eq(req->path, hc->profiles_url_path) && serves(r, HS_SIGNAL_PROFILES)) {
        *sig = HS_SIGNAL_PROFILES;
    } else {
        hs_http_respond_text(req, 404, "404 page not found\n");
        return false;
    }
    if (strcmp(req->method, "POST") != 0) {
        hs_http_respond(req, 405, "text/plain; charset=utf-8", &allow, 1,
                        "405 method not allowed, supported: [POST]\n", 41);
        return false;
    }
    bool known_type = content_type(req, type);
    if (!authenticate(r, req, known_type ? *type : BODY_PROTO, tenant))
        return false;
    if (!known_type) {
        hs_http_respond_text(req, 415, "415 unsupported media type, supported: "
                                       "[application/json, application/x-protobuf]\n");
        return false;
    }
    return true;
}

/* The server's on_headers for OTLP/HTTP: a request refused by its headers is answered before
 * its body is read (net/http_server.h says what the client sees). */
static void otlp_headers(void *ud, struct hs_http_request *req)
{
    enum body_type type;
    struct req_tenant tenant;
    enum hs_signal sig;
    http_precheck(ud, req, &type, &tenant, &sig);
}

/* The server's on_too_large: a body over max_request_body_size (it passed http_precheck), told
 * so in a Status of the request's own encoding, as every OTLP/HTTP error is (wire.md §2). */
static void otlp_too_large(void *ud, struct hs_http_request *req)
{
    struct otlp *r = ud;
    enum body_type type = BODY_PROTO;
    content_type(req, &type);
    char msg[160];
    snprintf(msg, sizeof(msg), "request body exceeds max_request_body_size (%llu bytes)",
             (unsigned long long)r->conf.protocols.http.server.max_request_body_size);
    hs_otlp_recv_reject(r, req, type, 413, "too_large", msg);
}

static void otlp_handle(void *ud, struct hs_http_request *req)
{
    struct otlp *r = ud;
    enum body_type type;
    struct req_tenant tenant;
    enum hs_signal sig;
    /* passed at headers time already; run again for the tenant (see authenticate) */
    if (!http_precheck(r, req, &type, &tenant, &sig))
        return;
    /* the request's bytes: the body where it lies, or `owned` once decompressed/converted */
    struct hs_buf owned = {0};
    const uint8_t *p = req->body;
    size_t len = req->body_len;
    if (decompress_body(r, req, type, &owned) != 0)
        goto out;
    if (owned.data) {
        p = owned.data;
        len = owned.len;
    }
    if (sig == HS_SIGNAL_PROFILES) {
        hs_otlp_recv_profiles(r, req, type, p, len, tenant);
        goto out;
    }
    if (type == BODY_JSON) {
        struct hs_buf wire = {0};
        char msg[256] = "";
        /* converted while read: memory is the wire written, and the limits stop a request
         * at the element that passes one (pdata/pb_json.c) */
        int rc = hs_otlp_json_to_wire((const char *)p, len, &r->limits, &wire, msg, sizeof(msg));
        hs_buf_free(&owned);
        owned = wire;
        p = owned.data;
        len = owned.len;
        if (rc == HS_ENOMEM) {
            static const struct hs_http_header retry = {HS_STR("retry-after"), HS_STR("1")};
            hs_otlp_recv_status(req, type, 503, CODE_UNAVAILABLE, "out of memory", &retry, 1);
            goto out;
        }
        if (rc) {
            hs_otlp_recv_reject(r, req, type, 400, rc == HS_E2BIG ? "over_limit" : "bad_json",
                                msg[0] ? msg : hs_strerror(rc));
            goto out;
        }
    }
    process(r, req, type, p, len, &owned, tenant);
out:
    hs_buf_free(&owned);
}

/* What OTLP/gRPC checks before the message: gRPC itself (415, UNIMPLEMENTED), the method
 * (UNIMPLEMENTED), credentials and tenant (UNAUTHENTICATED, INVALID_ARGUMENT). */
static bool grpc_precheck(struct otlp *r, struct hs_http_request *req, struct req_tenant *tenant,
                          enum hs_signal *sig)
{
    if (!hs_grpc_request_ok(req))
        return false;
    bool traces = serves(r, HS_SIGNAL_TRACES), profiles = serves(r, HS_SIGNAL_PROFILES);
    if (hs_str_eq(req->path, GRPC_PATH) && traces) {
        *sig = HS_SIGNAL_TRACES;
    } else if (hs_str_eq(req->path, GRPC_PROFILES_PATH) && profiles) {
        *sig = HS_SIGNAL_PROFILES;
    } else {
        char msg[300];
        snprintf(msg, sizeof(msg), "unknown method %.*s (served: %s%s%s)",
                 (int)HS_MIN(req->path.len, 100), req->path.ptr, traces ? GRPC_PATH : "",
                 traces && profiles ? ", " : "", profiles ? GRPC_PROFILES_PATH : "");
        hs_grpc_respond(req, HS_GRPC_UNIMPLEMENTED, msg, NULL, 0, false, 0);
        return false;
    }
    return authenticate(r, req, BODY_GRPC, tenant);
}

static void otlp_grpc_headers(void *ud, struct hs_http_request *req)
{
    struct req_tenant tenant;
    enum hs_signal sig;
    grpc_precheck(ud, req, &tenant, &sig);
}

/* POST TraceService/Export or ProfilesService/Export over HTTP/2: the message out of its
 * frame, then as over HTTP. */
static void otlp_grpc_handle(void *ud, struct hs_http_request *req)
{
    struct otlp *r = ud;
    struct req_tenant tenant;
    enum hs_signal sig;
    /* passed at headers time already; run again for the tenant (see authenticate) */
    if (!grpc_precheck(r, req, &tenant, &sig))
        return;
    struct hs_buf owned = {0};
    const uint8_t *p;
    size_t len;
    char err[200];
    int code = hs_grpc_unframe(req->body, req->body_len, hs_http_request_header(req, "grpc-encoding"),
                               r->conf.protocols.grpc.server.max_request_body_size, &owned, &p,
                               &len, err, sizeof(err));
    if (code != HS_GRPC_OK) {
        /* counted like the HTTP rejections; the code tells the client what it was */
        char labels[300];
        snprintf(labels, sizeof(labels), "%s,reason=\"%s\"", r->counters[TR_GRPC].labels,
                 code == HS_GRPC_RESOURCE_EXHAUSTED ? "too_large"
                 : code == HS_GRPC_UNIMPLEMENTED    ? "bad_encoding"
                                                    : "bad_framing");
        hs_counter_add(hs_metrics_counter(r->metrics, "receiver_failed_requests_total",
                                          "Requests answered with an error, by reason", labels),
                       1);
        hs_grpc_respond(req, code, err, NULL, 0, false, 0);
    } else if (sig == HS_SIGNAL_PROFILES) {
        hs_otlp_recv_profiles(r, req, BODY_GRPC, p, len, tenant);
    } else {
        process(r, req, BODY_GRPC, p, len, &owned, tenant);
    }
    hs_buf_free(&owned);
}

static void counters_init(struct otlp *r, const struct hs_host *host, enum transport tr)
{
    struct otlp_counters *k = &r->counters[tr];
    snprintf(k->labels, sizeof(k->labels), "receiver=\"%s\",transport=\"%s\"", r->base.id,
             tr == TR_GRPC ? "grpc" : "http");
    k->accepted = hs_metrics_counter(host->metrics, "receiver_accepted_spans_total",
                                     "Spans accepted into the pipeline", k->labels);
    k->refused = hs_metrics_counter(host->metrics, "receiver_refused_spans_total",
                                    "Spans refused because the pipeline was full", k->labels);
    k->rejected = hs_metrics_counter(host->metrics, "receiver_rejected_spans_total",
                                     "Spans rejected as invalid (answered as partial success)",
                                     k->labels);
    /* the pyroscope receiver's families: a profile is one Profile message here */
    k->accepted_profiles = hs_metrics_counter(host->metrics, "receiver_accepted_profiles_total",
                                              "Profiles accepted into the pipeline", k->labels);
    k->refused_profiles =
        hs_metrics_counter(host->metrics, "receiver_refused_profiles_total",
                           "Profiles refused because the pipeline was full", k->labels);
}

static void otlp_server_closed(void *ud)
{
    struct otlp *r = ud;
    if (--r->open_servers == 0)
        r->done(&r->base);
}

static void otlp_shutdown(struct hs_component *c, hs_done_cb done);

static int otlp_start(struct hs_component *c, const struct hs_host *host)
{
    struct otlp *r = hs_container_of(c, struct otlp, base);
    r->metrics = host->metrics;
    if (r->auth)
        hs_auth_start(r->auth, host->metrics, c->id);
    counters_init(r, host, TR_HTTP);
    counters_init(r, host, TR_GRPC);
    struct hs_error err = {0};
    int rc = 0;
    if (r->conf.protocols.http_enabled) {
        const struct hs_http_server_opts opts = {.config = &r->conf.protocols.http.server,
                                                 .name = c->id,
                                                 .handler = otlp_handle,
                                                 .on_headers = otlp_headers,
                                                 .on_too_large = otlp_too_large,
                                                 .framing = &hs_grpc_framing,
                                                 .ud = r,
                                                 .metrics = host->metrics};
        rc = hs_http_server_start(host->loop, &opts, &r->servers[TR_HTTP], &err);
    }
    if (rc == 0 && r->conf.protocols.grpc_enabled) {
        /* gRPC needs HTTP/2: an HTTP/1.1 client here is told so (426), not left hanging */
        snprintf(r->grpc_name, sizeof(r->grpc_name), "%s/grpc", c->id);
        const struct hs_http_server_opts opts = {.config = &r->conf.protocols.grpc.server,
                                                 .name = r->grpc_name,
                                                 .handler = otlp_grpc_handle,
                                                 .on_headers = otlp_grpc_headers,
                                                 .framing = &hs_grpc_framing,
                                                 .ud = r,
                                                 .versions = HS_HTTP_H2C_ONLY,
                                                 .metrics = host->metrics};
        rc = hs_http_server_start(host->loop, &opts, &r->servers[TR_GRPC], &err);
        if (rc && r->servers[TR_HTTP]) {
            /* the HTTP listener is open: it closes through the loop, done by then */
            hs_http_server_close(r->servers[TR_HTTP], NULL, NULL);
            r->servers[TR_HTTP] = NULL;
        }
    }
    for (size_t i = 0; i < err.count; i++)
        hs_log_error(c->id, "%s", err.lines[i]);
    hs_error_free(&err);
    if (rc == 0)
        r->started = true;
    return rc;
}

static void otlp_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct otlp *r = hs_container_of(c, struct otlp, base);
    if (r->closing)
        return;
    r->closing = true;
    r->done = done;
    for (int t = 0; t < TR_COUNT; t++)
        if (r->started && r->servers[t])
            r->open_servers++;
    if (!r->open_servers) {
        done(c);
        return;
    }
    for (int t = 0; t < TR_COUNT; t++) {
        struct hs_http_server *s = r->servers[t];
        r->servers[t] = NULL;
        if (r->started && s)
            hs_http_server_close(s, otlp_server_closed, r);
    }
}

static void otlp_destroy(struct hs_component *c)
{
    struct otlp *r = hs_container_of(c, struct otlp, base);
    hs_auth_free(r->auth);
    hs_config_free_fields(otlp_fields, &r->conf);
    free(r);
}

const struct hs_component_type hs_receiver_otlp = {
    .name = "otlp",
    .kind = HS_KIND_RECEIVER,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .profile_kinds = HS_PROFILES_KIND_OTLP,
    .doc = "OTLP traces and profiles over HTTP (protobuf and JSON, gzip) and gRPC (h2c, gzip).",
    .fields = otlp_fields,
    .create = otlp_create,
    .start = otlp_start,
    .shutdown = otlp_shutdown,
    .destroy = otlp_destroy,
};
