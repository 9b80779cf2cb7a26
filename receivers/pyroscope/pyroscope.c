/* pyroscope.c: the Pyroscope receiver: POST /ingest (pprof raw or multipart, folded text) and
 * POST /push.v1.PusherService/Push (Connect unary, protobuf or JSON, gzip) on one HTTP
 * listener. Each request becomes one batch of summarized profiles, or one precise error; one
 * its headers refuse (credentials above all) is answered before its body is read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/auth.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/compress.h"
#include "core/config.h"
#include "net/grpc.h"
#include "net/http_server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "pdata/otlp_json.h"
#include "pdata/profiles.h"
#include "receivers/pyroscope/pyroscope_int.h"

struct pyro_config {
    struct hs_http_server_config server;
    uint64_t max_decompressed;
    uint32_t max_samples;
    uint32_t max_labels;
    uint32_t max_sample_labels;
    uint32_t max_stack_depth;
    uint64_t max_string_len;
    uint32_t max_profiles;
    bool auth_enabled;
    struct hs_auth_config auth;
};

/* max_request_body_size comes from the shared listener rows (default 20MiB): it bounds a body
 * as sent and, for a gzipped push request, again after inflating it. */
static const struct hs_config_field pyro_fields[] = {
    {"endpoint", HS_CFG_ENDPOINT, offsetof(struct pyro_config, server.endpoint), "0.0.0.0:4040",
     .doc = "host:port to listen on for the Pyroscope API (/ingest and push)"},
    {"server", HS_CFG_INLINE, offsetof(struct pyro_config, server),
     .sub = hs_http_server_fields_common},
    /* Pyroscope itself refuses profiles over 4 MiB uncompressed; 16 MiB keeps headroom for
     * backends with larger limits while a gzip bomb still costs at most this per request. */
    {"max_decompressed_size", HS_CFG_SIZE, offsetof(struct pyro_config, max_decompressed), "16MiB",
     .min = 1024, .max = 1 << 30,
     .doc = "largest pprof after gunzip, per profile; larger is a 413"},
    {"max_samples", HS_CFG_UINT, offsetof(struct pyro_config, max_samples), "16000", .min = 1,
     .max = 10000000,
     .doc = "pprof samples (or folded lines) in one profile (Pyroscope's "
            "default); more is a 413"},
    {"max_labels", HS_CFG_UINT, offsetof(struct pyro_config, max_labels), "30", .min = 1,
     .max = 1000, .doc = "series labels from `name` or a push series (Pyroscope's default)"},
    {"max_sample_labels", HS_CFG_UINT, offsetof(struct pyro_config, max_sample_labels), "64",
     .min = 1, .max = 100000, .doc = "labels on one pprof sample"},
    {"max_stack_depth", HS_CFG_UINT, offsetof(struct pyro_config, max_stack_depth), "1024",
     .min = 1, .max = 1000000, .doc = "frames of one sample, inlined frames included"},
    /* Pyroscope cuts symbols (function and file names, labels) at 65535 bytes; we forward
     * profiles unchanged, so cannot cut, and refuse instead: a name of megabytes would be
     * copied into the correlator's index and onto every span it annotates */
    {"max_string_length", HS_CFG_SIZE, offsetof(struct pyro_config, max_string_len), "65535",
     .min = 256, .max = 16 << 20,
     .doc = "bytes of one pprof string (function or file name, label) or folded frame; longer "
            "is a 400"},
    {"max_profiles_per_request", HS_CFG_UINT, offsetof(struct pyro_config, max_profiles), "1000",
     .min = 1, .max = 1000000, .doc = "profiles (RawSamples) in one push request; more is a 413"},
    {"auth", HS_CFG_SECTION, offsetof(struct pyro_config, auth), .sub = hs_auth_fields,
     .has_presence = true, .presence_offset = offsetof(struct pyro_config, auth_enabled),
     .doc = "credentials every request (/ingest, push) must carry; none: open"},
    {0},
};

struct pyro {
    struct hs_component base;
    struct pyro_config conf;
    struct hs_pyro_limits limits;
    struct hs_http_server *http;
    bool started, closing;
    hs_done_cb done;
    struct hs_ratelimit bad_log;
    struct hs_counter *accepted, *refused;
    struct hs_metrics *metrics;
    struct hs_auth *auth; /* NULL: open */
    char labels[200];
};

enum route { ROUTE_NONE, ROUTE_INGEST, ROUTE_PUSH };

static int pyro_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct pyro *r = hs_xcalloc(1, sizeof(*r));
    int rc = hs_config_decode(pyro_fields, cfg, &r->conf, path, err);
    if (rc == 0 && r->conf.auth_enabled) {
        char apath[256];
        snprintf(apath, sizeof(apath), "%s.auth", path ? path : "");
        rc = hs_auth_new(&r->conf.auth, hs_config_get(cfg, "auth"), apath, &r->auth, err);
    }
    /* TLS files are read now, so a bad one is a positioned error `validate` reports too */
    if (rc == 0)
        rc = hs_http_server_config_check(&r->conf.server, cfg, path, err);
    if (rc) {
        hs_auth_free(r->auth);
        hs_config_free_fields(pyro_fields, &r->conf);
        free(r);
        return rc;
    }
    r->limits =
        (struct hs_pyro_limits){.pprof = {.max_decompressed = r->conf.max_decompressed,
                                          .max_samples = r->conf.max_samples,
                                          .max_sample_labels = r->conf.max_sample_labels,
                                          .max_stack_depth = r->conf.max_stack_depth,
                                          .max_string_len = (uint32_t)r->conf.max_string_len},
                                .max_labels = r->conf.max_labels,
                                .max_profiles = r->conf.max_profiles};
    r->bad_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    *out = &r->base;
    return 0;
}

/* Connect's error codes by HTTP status, for both routes (Pyroscope answers /ingest errors in
 * the same shape). 413 is "invalid_argument": an over-limit profile is permanent, and clients
 * that retry resource_exhausted (Alloy with retry_on_http_429) would only resend it. */
static const char *connect_code(int status)
{
    switch (status) {
    case 401:
        return "unauthenticated";
    case 404:
        return "not_found";
    case 405:
        return "unimplemented";
    case 429:
        return "resource_exhausted";
    case 503:
        return "unavailable";
    default:
        return status >= 500 ? "internal" : "invalid_argument";
    }
}

static void respond_error_h(struct hs_http_request *req, int status, const char *msg,
                            const struct hs_http_header *extra, size_t nextra)
{
    struct hs_buf b = {0};
    int rc = hs_buf_printf(&b, "{\"code\":\"%s\",\"message\":", connect_code(status));
    rc |= hs_json_put_string(&b, msg, strlen(msg));
    rc |= hs_buf_putc(&b, '}');
    if (rc)
        hs_http_respond_text(req, 500, "out of memory\n");
    else
        hs_http_respond(req, status, "application/json", extra, nextra, b.data, b.len);
    hs_buf_free(&b);
}

static void respond_error(struct hs_http_request *req, int status, const char *msg)
{
    static const struct hs_http_header retry = {HS_STR("retry-after"), HS_STR("1")};
    static const struct hs_http_header allow = {HS_STR("allow"), HS_STR("POST")};
    const struct hs_http_header *extra = status == 429 || status == 503 ? &retry
                                         : status == 405                ? &allow
                                                                        : NULL;
    respond_error_h(req, status, msg, extra, extra != NULL);
}

/* Counts and logs a failed request; the caller answers. */
static void reject_counted(struct pyro *r, struct hs_http_request *req,
                           const struct hs_pyro_fail *f)
{
    char labels[300];
    snprintf(labels, sizeof(labels), "%s,reason=\"%s\"", r->labels, f->reason);
    hs_counter_add(hs_metrics_counter(r->metrics, "receiver_failed_requests_total",
                                      "Requests answered with an error, by reason", labels),
                   1);
    uint32_t suppressed = 0;
    if (hs_ratelimit_allow(&r->bad_log, hs_now_ms(), &suppressed))
        hs_log_info(r->base.id, "%d for %s %.*s: %s (%u similar suppressed)", f->status, req->peer,
                    (int)HS_MIN(req->path.len, 64), req->path.ptr, f->msg, suppressed);
}

static void reject(struct pyro *r, struct hs_http_request *req, const struct hs_pyro_fail *f)
{
    reject_counted(r, req, f);
    respond_error(req, f->status, f->msg);
}

/* The push body as protobuf-c or JSON will read it: gunzipped into `owned` when compressed. */
static int push_body(struct pyro *r, struct hs_http_request *req, bool *json, struct hs_buf *owned,
                     struct hs_pyro_fail *f)
{
    const struct hs_str *ct = hs_http_request_header(req, "content-type");
    if (ct &&
        (hs_http_media_type_is(ct, "application/proto") || hs_http_media_type_is(ct, "application/x-protobuf")))
        *json = false;
    else if (ct && hs_http_media_type_is(ct, "application/json"))
        *json = true;
    else
        return hs_pyro_failf(f, 415, "content_type",
                             "unsupported Content-Type \"%.*s\" (supported: application/proto, "
                             "application/x-protobuf, application/json)",
                             ct ? (int)HS_MIN(ct->len, 60) : 0, ct ? ct->ptr : "");
    const struct hs_str *enc = hs_http_request_header(req, "content-encoding");
    if (!enc || !enc->len || hs_str_ieq(*enc, "identity"))
        return 0;
    if (!hs_str_ieq(*enc, "gzip"))
        return hs_pyro_failf(f, 415, "content_encoding",
                             "unsupported Content-Encoding \"%.*s\" (supported: gzip, identity)",
                             (int)HS_MIN(enc->len, 40), enc->ptr);
    const char *why = NULL;
    uint64_t limit = r->conf.server.max_request_body_size;
    int rc = hs_gunzip(req->body, req->body_len, limit, owned, &why);
    if (rc == HS_E2BIG)
        return hs_pyro_failf(f, 413, "over_limit",
                             "decompressed body exceeds max_request_body_size (%llu bytes)",
                             (unsigned long long)limit);
    if (rc)
        return hs_pyro_fail_code(f, rc, "gzip", why);
    return 0;
}

static int push(struct pyro *r, struct hs_http_request *req, struct hs_profiles *b, bool *json,
                struct hs_pyro_fail *f)
{
    struct hs_buf owned = {0};
    int rc = push_body(r, req, json, &owned, f);
    if (rc == 0)
        rc = hs_pyro_push_decode(owned.data ? owned.data : req->body,
                                 owned.data ? owned.len : req->body_len, *json, &r->limits, b, f);
    hs_buf_free(&owned);
    return rc;
}

/* Hands the batch to the pipeline and answers: 429 + Retry-After when it refuses for now. */
static void deliver(struct pyro *r, struct hs_http_request *req, struct hs_profiles *b,
                    enum route route, bool json)
{
    uint32_t n = b->count;
    int rc = hs_consumer_profiles(r->base.next_profiles, b);
    if (rc) {
        hs_counter_add(r->refused, n);
        if (rc == HS_EAGAIN)
            respond_error(req, 429,
                          "pipeline is full (exporters busy or backend down): retry "
                          "later");
        else
            respond_error(req, rc == HS_EINVAL ? 400 : 503, hs_strerror(rc));
        return;
    }
    hs_counter_add(r->accepted, n);
    if (route == ROUTE_INGEST)
        hs_http_respond(req, 200, NULL, NULL, 0, "", 0);
    else if (json)
        hs_http_respond(req, 200, "application/json", NULL, 0, "{}", 2);
    else
        hs_http_respond(req, 200, "application/proto", NULL, 0, "", 0);
}

/* gRPC's code for one of our HTTP statuses, as connect_code names them (wire.md §6). */
static int grpc_code(int status)
{
    switch (status) {
    case 404:
        return HS_GRPC_NOT_FOUND;
    case 405:
        return HS_GRPC_UNIMPLEMENTED;
    case 429:
        return HS_GRPC_RESOURCE_EXHAUSTED;
    case 503:
        return HS_GRPC_UNAVAILABLE;
    default:
        return status >= 500 ? HS_GRPC_INTERNAL : HS_GRPC_INVALID_ARGUMENT;
    }
}

/* Refuses a request without valid credentials (401 with WWW-Authenticate and Connect's
 * "unauthenticated", or gRPC UNAUTHENTICATED) or with an X-Scope-OrgID that is no tenant id
 * (400); else *tenant, when asked for, is the batch's tenant (malloc'd, NULL for none) and
 * *tenant_auth whether a per-tenant token decided it.
 * Headers only: it runs at headers time (pyro_headers), so a stranger is refused before its
 * body is read, and again in the handler, because the tenant of a matching token must reach
 * the batch and nothing carries it from the headers callback to the handler. The second run
 * costs a digest and a compare per credential; a token rotated out between the two refuses the
 * request then, as it should. A failure is counted where it is answered. */
static bool authenticate(struct pyro *r, struct hs_http_request *req, bool grpc, char **tenant,
                         bool *tenant_auth)
{
    const char *token_tenant = NULL;
    if (tenant)
        *tenant = NULL;
    if (r->auth) {
        enum hs_auth_result res = hs_auth_check(r->auth, req, &token_tenant);
        if (res != HS_AUTH_OK) {
            struct hs_http_header ch[2];
            size_t n = hs_auth_challenges(r->auth, res, ch);
            if (grpc)
                hs_grpc_respond(req, HS_GRPC_UNAUTHENTICATED, hs_auth_message(res), NULL, 0,
                                false, 0);
            else
                respond_error_h(req, 401, hs_auth_message(res), ch, n);
            return false;
        }
    }
    struct hs_str t;
    if (!hs_auth_request_tenant(req, token_tenant, &t)) {
        struct hs_pyro_fail f = {0};
        hs_pyro_failf(&f, 400, "bad_tenant",
                      "X-Scope-OrgID: not a valid tenant id (1-150 of A-Z a-z 0-9 "
                      "! - _ . * ' ( ))");
        reject_counted(r, req, &f);
        if (grpc)
            hs_grpc_respond(req, HS_GRPC_INVALID_ARGUMENT, f.msg, NULL, 0, false, 0);
        else
            respond_error(req, 400, f.msg);
        return false;
    }
    if (tenant) {
        *tenant = t.len ? hs_xstrndup(t.ptr, t.len) : NULL;
        *tenant_auth = token_tenant != NULL;
    }
    return true;
}

/* The push API's gRPC variant over HTTP/2: the same PushRequest decoding as Connect's, the
 * message length-prefixed, the status in trailers. A full pipeline is RESOURCE_EXHAUSTED
 * with RetryInfo, which OTLP-style clients retry, as 429 + Retry-After on Connect. Takes `t`,
 * the batch's tenant (malloc'd, or NULL; t_auth: a per-tenant token's). */
static void push_grpc(struct pyro *r, struct hs_http_request *req, char *t, bool t_auth)
{
    struct hs_pyro_fail f = {0};
    struct hs_buf owned = {0};
    const uint8_t *p;
    size_t len;
    char err[200];
    int code = hs_grpc_unframe(req->body, req->body_len,
                               hs_http_request_header(req, "grpc-encoding"),
                               r->conf.server.max_request_body_size, &owned, &p, &len, err,
                               sizeof(err));
    if (code != HS_GRPC_OK) {
        hs_pyro_failf(&f, code == HS_GRPC_RESOURCE_EXHAUSTED ? 413 : 400, "bad_grpc", "%s", err);
        reject_counted(r, req, &f);
        hs_grpc_respond(req, code, err, NULL, 0, false, 0);
        hs_buf_free(&owned);
        free(t);
        return;
    }
    struct hs_profiles *b = hs_profiles_new(t);
    free(t);
    if (b)
        b->tenant_authenticated = t_auth;
    int rc = b ? hs_pyro_push_decode(p, len, false, &r->limits, b, &f) : HS_ENOMEM;
    hs_buf_free(&owned);
    if (!b) {
        hs_grpc_respond(req, HS_GRPC_UNAVAILABLE, "out of memory", NULL, 0, false, 1000);
        return;
    }
    if (rc) {
        hs_profiles_unref(b);
        reject_counted(r, req, &f);
        hs_grpc_respond(req, grpc_code(f.status), f.msg, NULL, 0, false, 0);
        return;
    }
    uint32_t n = b->count;
    rc = hs_consumer_profiles(r->base.next_profiles, b);
    if (rc) {
        hs_counter_add(r->refused, n);
        if (rc == HS_EAGAIN)
            hs_grpc_respond(req, HS_GRPC_RESOURCE_EXHAUSTED,
                            "pipeline is full (exporters busy or backend down): retry later",
                            NULL, 0, false, 1000);
        else
            hs_grpc_respond(req, rc == HS_EINVAL ? HS_GRPC_INVALID_ARGUMENT : HS_GRPC_UNAVAILABLE,
                            hs_strerror(rc), NULL, 0, false, rc == HS_EINVAL ? 0 : 1000);
        return;
    }
    hs_counter_add(r->accepted, n);
    /* PushResponse is empty: a zero-length message */
    hs_grpc_respond(req, HS_GRPC_OK, NULL, (const uint8_t *)"", 0, hs_grpc_request_gzip(req), 0);
}

static bool is_grpc(const struct hs_http_request *req)
{
    const struct hs_str *ct = hs_http_request_header(req, "content-type");
    return ct && ct->len >= 16 && strncasecmp(ct->ptr, "application/grpc", 16) == 0;
}

static enum route route_of(struct hs_str path)
{
    if (hs_str_eq(path, "/ingest") || hs_str_eq(path, "/pyroscope/ingest"))
        return ROUTE_INGEST;
    if (hs_str_eq(path, "/push.v1.PusherService/Push"))
        return ROUTE_PUSH;
    return ROUTE_NONE;
}

/* What every route checks before the body, in this order: the route (404), gRPC itself for
 * push over gRPC (415, UNIMPLEMENTED), the method (405), credentials and tenant. Answers and
 * returns false on the first that fails; else *route, *grpc and, when asked for, *tenant (see
 * authenticate). */
static bool pyro_precheck(struct pyro *r, struct hs_http_request *req, enum route *route,
                          bool *grpc, char **tenant, bool *tenant_auth)
{
    *route = route_of(req->path);
    *grpc = false;
    if (*route == ROUTE_NONE) {
        respond_error(req, 404, "404 page not found");
        return false;
    }
    if (*route == ROUTE_PUSH && hs_http_request_is_h2(req) && is_grpc(req)) {
        *grpc = true;
        return hs_grpc_request_ok(req) && authenticate(r, req, true, tenant, tenant_auth);
    }
    if (strcmp(req->method, "POST") != 0) {
        respond_error(req, 405, "method not allowed, supported: [POST]");
        return false;
    }
    return authenticate(r, req, false, tenant, tenant_auth);
}

/* The server's on_headers: a request refused by its headers is answered before its body is
 * read (net/http_server.h says what the client sees). */
static void pyro_headers(void *ud, struct hs_http_request *req)
{
    enum route route;
    bool grpc;
    pyro_precheck(ud, req, &route, &grpc, NULL, NULL);
}

/* The server's on_too_large: a body over max_request_body_size, answered in Connect's JSON
 * like every other error here, and counted with them. */
static void pyro_too_large(void *ud, struct hs_http_request *req)
{
    struct pyro *r = ud;
    struct hs_pyro_fail f;
    hs_pyro_failf(&f, 413, "too_large", "request body exceeds max_request_body_size (%llu bytes)",
                  (unsigned long long)r->conf.server.max_request_body_size);
    reject(r, req, &f);
}

static void pyro_handle(void *ud, struct hs_http_request *req)
{
    struct pyro *r = ud;
    enum route route;
    bool grpc;
    char *t;
    bool t_auth;
    /* passed at headers time already; run again for the tenant (see authenticate) */
    if (!pyro_precheck(r, req, &route, &grpc, &t, &t_auth))
        return;
    if (grpc) {
        push_grpc(r, req, t, t_auth);
        return;
    }
    struct hs_pyro_fail f = {0};
    struct hs_profiles *b = hs_profiles_new(t);
    free(t);
    if (!b) {
        respond_error(req, 503, "out of memory");
        return;
    }
    b->tenant_authenticated = t_auth;
    bool json = false;
    int rc;
    if (route == ROUTE_PUSH) {
        rc = push(r, req, b, &json, &f);
    } else {
        const struct hs_str *ct = hs_http_request_header(req, "content-type");
        const struct hs_pyro_ingest_req in = {.query = req->query,
                                              .content_type = ct ? *ct : (struct hs_str){"", 0},
                                              .body = req->body,
                                              .len = req->body_len,
                                              .now_ns = (int64_t)hs_wall_ns()};
        rc = hs_pyro_ingest_decode(&in, &r->limits, b, &f);
    }
    if (rc) {
        hs_profiles_unref(b);
        reject(r, req, &f);
        return;
    }
    deliver(r, req, b, route, json);
}

static int pyro_start(struct hs_component *c, const struct hs_host *host)
{
    struct pyro *r = hs_container_of(c, struct pyro, base);
    r->metrics = host->metrics;
    if (r->auth)
        hs_auth_start(r->auth, host->metrics, c->id);
    snprintf(r->labels, sizeof(r->labels), "receiver=\"%s\",transport=\"http\"", c->id);
    r->accepted = hs_metrics_counter(host->metrics, "receiver_accepted_profiles_total",
                                     "Profiles accepted into the pipeline", r->labels);
    r->refused = hs_metrics_counter(host->metrics, "receiver_refused_profiles_total",
                                    "Profiles refused because the pipeline was full", r->labels);
    struct hs_error err = {0};
    const struct hs_http_server_opts opts = {.config = &r->conf.server,
                                             .name = c->id,
                                             .handler = pyro_handle,
                                             .on_headers = pyro_headers,
                                             .on_too_large = pyro_too_large,
                                             .framing = &hs_grpc_framing,
                                             .ud = r,
                                             .metrics = host->metrics};
    int rc = hs_http_server_start(host->loop, &opts, &r->http, &err);
    for (size_t i = 0; i < err.count; i++)
        hs_log_error(c->id, "%s", err.lines[i]);
    hs_error_free(&err);
    if (rc == 0)
        r->started = true;
    return rc;
}

int hs_pyroscope_port(const struct hs_component *c)
{
    const struct pyro *r = hs_container_of(c, const struct pyro, base);
    return r->http ? hs_http_server_port(r->http) : -1;
}

static void pyro_http_closed(void *ud)
{
    struct pyro *r = ud;
    r->http = NULL;
    r->done(&r->base);
}

static void pyro_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct pyro *r = hs_container_of(c, struct pyro, base);
    if (r->closing)
        return;
    r->closing = true;
    if (!r->started || !r->http) {
        done(c);
        return;
    }
    r->done = done;
    hs_http_server_close(r->http, pyro_http_closed, r);
}

static void pyro_destroy(struct hs_component *c)
{
    struct pyro *r = hs_container_of(c, struct pyro, base);
    hs_auth_free(r->auth);
    hs_config_free_fields(pyro_fields, &r->conf);
    free(r);
}

const struct hs_component_type hs_receiver_pyroscope = {
    .name = "pyroscope",
    .kind = HS_KIND_RECEIVER,
    .signals = HS_SIGNAL_PROFILES,
    .profile_kinds = HS_PROFILES_KIND_PPROF,
    .doc = "Pyroscope profiles: POST /ingest (pprof, multipart, folded) and the push API "
           "(Connect, protobuf or JSON, gzip).",
    .fields = pyro_fields,
    .create = pyro_create,
    .start = pyro_start,
    .shutdown = pyro_shutdown,
    .destroy = pyro_destroy,
};
