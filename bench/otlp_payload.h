/* otlp_payload.h: the benchmarks' OTLP traces request, shaped like real SDK traffic (one service's
 * resource with ~8 attributes, a few scopes, 7-10 mixed-type attributes per span, an event on about
 * one span in five, random ids, ~440 B/span), built with protobuf-c from a fixed seed. */
#ifndef HS_BENCH_OTLP_PAYLOAD_H
#define HS_BENCH_OTLP_PAYLOAD_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/common.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue pl_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue pl_any;
typedef Opentelemetry__Proto__Trace__V1__Span pl_span;
typedef Opentelemetry__Proto__Trace__V1__Span__Event pl_event;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans pl_scope_spans;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans pl_resource_spans;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest pl_request;

struct hs_bench_payload {
    uint8_t *data; /* the packed ExportTraceServiceRequest, malloc'd */
    size_t len;
    uint32_t spans;
    uint32_t events;
    uint32_t attributes; /* span attributes, all spans */
    uint32_t scopes;
};

#define HS_BENCH_SPANS_DEFAULT 1000
#define HS_BENCH_SEED_DEFAULT 0x5eed

/* What builds one request; everything lives in the arena until it is packed. */
struct pl_ctx {
    struct hs_arena *a;
    uint64_t rng;
    uint64_t now_ns;
    int failed;
};

static inline uint64_t pl_rand(struct pl_ctx *c)
{
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint32_t pl_below(struct pl_ctx *c, uint32_t n)
{
    return (uint32_t)(pl_rand(c) % n);
}

static inline void *pl_alloc(struct pl_ctx *c, size_t n)
{
    void *p = hs_arena_alloc(c->a, n);
    if (!p) {
        c->failed = 1;
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

static inline char *pl_strf(struct pl_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline char *pl_strf(struct pl_ctx *c, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    char *s = hs_arena_strndup(c->a, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
    if (!s)
        c->failed = 1;
    return s ? s : "";
}

static inline ProtobufCBinaryData pl_id(struct pl_ctx *c, size_t n)
{
    uint8_t *p = pl_alloc(c, n);
    for (size_t i = 0; p && i < n; i += 8) {
        uint64_t r = pl_rand(c);
        memcpy(p + i, &r, n - i < 8 ? n - i : 8);
    }
    return (ProtobufCBinaryData){.len = p ? n : 0, .data = p};
}

static inline pl_kv *pl_kv_new(struct pl_ctx *c, const char *key)
{
    pl_kv *kv = pl_alloc(c, sizeof(*kv));
    pl_any *v = pl_alloc(c, sizeof(*v));
    if (!kv || !v)
        return NULL;
    opentelemetry__proto__common__v1__key_value__init(kv);
    opentelemetry__proto__common__v1__any_value__init(v);
    kv->key = (char *)key;
    kv->value = v;
    return kv;
}

static inline pl_kv *pl_kv_str(struct pl_ctx *c, const char *key, char *val)
{
    pl_kv *kv = pl_kv_new(c, key);
    if (kv) {
        kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        kv->value->string_value = val;
    }
    return kv;
}

static inline pl_kv *pl_kv_int(struct pl_ctx *c, const char *key, int64_t val)
{
    pl_kv *kv = pl_kv_new(c, key);
    if (kv) {
        kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        kv->value->int_value = val;
    }
    return kv;
}

static inline pl_kv *pl_kv_bool(struct pl_ctx *c, const char *key, int val)
{
    pl_kv *kv = pl_kv_new(c, key);
    if (kv) {
        kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
        kv->value->bool_value = val != 0;
    }
    return kv;
}

static inline pl_kv *pl_kv_double(struct pl_ctx *c, const char *key, double val)
{
    pl_kv *kv = pl_kv_new(c, key);
    if (kv) {
        kv->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
        kv->value->double_value = val;
    }
    return kv;
}

/* The kinds of span a checkout service emits, one scope each. */
enum pl_kind { PL_HTTP_SERVER, PL_HTTP_CLIENT, PL_DB, PL_INTERNAL, PL_KINDS };

static const char *const pl_scope_names[PL_KINDS] = {
    "io.opentelemetry.tomcat-10.0", "io.opentelemetry.java-http-client", "io.opentelemetry.jdbc",
    "com.example.checkout"};

static const char *const pl_routes[] = {"/api/v1/users/{id}", "/api/v1/orders/{id}/items",
                                        "/api/v1/cart", "/api/v1/checkout/{session}", "/healthz"};
static const char *const pl_methods[] = {"GET", "GET", "GET", "POST", "PUT", "DELETE"};
static const char *const pl_tables[] = {"users", "orders", "order_items", "preferences"};
static const char *const pl_ops[] = {"validateCart", "applyDiscounts", "computeTax",
                                     "reserveInventory", "renderReceipt"};

/* The route with its `{param}` filled in by `id`. */
static inline char *pl_route_path(struct pl_ctx *c, const char *route, uint32_t id)
{
    const char *open = strchr(route, '{');
    const char *close = open ? strchr(open, '}') : NULL;
    if (!close)
        return (char *)route;
    return pl_strf(c, "%.*s%u%s", (int)(open - route), route, id, close + 1);
}

/* Attributes for one span of kind k; returns how many were set (7-10). */
static inline size_t pl_span_attrs(struct pl_ctx *c, enum pl_kind k, pl_kv **at, char **name)
{
    size_t n = 0;
    uint32_t id = 10000 + pl_below(c, 90000);
    int ok = pl_below(c, 50) != 0;
    if (k == PL_HTTP_SERVER || k == PL_HTTP_CLIENT) {
        const char *route = pl_routes[pl_below(c, HS_ARRAY_SIZE(pl_routes))];
        const char *method = pl_methods[pl_below(c, HS_ARRAY_SIZE(pl_methods))];
        *name = pl_strf(c, "%s %s", method, route);
        at[n++] = pl_kv_str(c, "http.method", (char *)method);
        at[n++] = pl_kv_str(c, "http.route", (char *)route);
        at[n++] = pl_kv_str(
            c, "http.url",
            pl_strf(c, "https://%s.shop.example.com%s?expand=items,prices&currency=EUR&v=2",
                    k == PL_HTTP_SERVER ? "api" : "inventory", pl_route_path(c, route, id)));
        at[n++] = pl_kv_int(c, "http.status_code", ok ? 200 : 503);
        at[n++] = pl_kv_str(c, "net.peer.name",
                            k == PL_HTTP_SERVER ? "10.42.7.19" : "inventory.shop.svc");
        at[n++] =
            pl_kv_int(c, "net.peer.port", k == PL_HTTP_SERVER ? 51234 + pl_below(c, 999) : 8080);
        at[n++] = pl_kv_str(c, "http.user_agent",
                            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0");
        at[n++] = pl_kv_bool(c, "http.retry", pl_below(c, 10) == 0);
        at[n++] = pl_kv_double(c, "http.request_duration_ms", (double)pl_below(c, 900000) / 1000);
        if (k == PL_HTTP_SERVER)
            at[n++] = pl_kv_int(c, "http.response_content_length", pl_below(c, 20000));
    } else if (k == PL_DB) {
        const char *table = pl_tables[pl_below(c, HS_ARRAY_SIZE(pl_tables))];
        *name = pl_strf(c, "SELECT shop.%s", table);
        at[n++] = pl_kv_str(c, "db.system", "postgresql");
        at[n++] = pl_kv_str(c, "db.name", "shop");
        at[n++] = pl_kv_str(c, "db.operation", "SELECT");
        at[n++] = pl_kv_str(c, "db.statement",
                            pl_strf(c,
                                    "SELECT id, user_id, created_at, data FROM %s "
                                    "WHERE user_id = $1 ORDER BY created_at LIMIT 50",
                                    table));
        at[n++] = pl_kv_str(c, "net.peer.name", "pg-primary.shop.svc");
        at[n++] = pl_kv_int(c, "net.peer.port", 5432);
        at[n++] = pl_kv_int(c, "db.rows_returned", pl_below(c, 50));
        at[n++] = pl_kv_bool(c, "db.pool.reused", pl_below(c, 5) != 0);
        at[n++] = pl_kv_double(c, "db.pool.wait_ms", (double)pl_below(c, 5000) / 100);
    } else {
        const char *op = pl_ops[pl_below(c, HS_ARRAY_SIZE(pl_ops))];
        *name = pl_strf(c, "CheckoutService.%s", op);
        at[n++] = pl_kv_str(c, "code.function", (char *)op);
        at[n++] = pl_kv_str(c, "code.namespace", "com.example.checkout.CheckoutService");
        at[n++] = pl_kv_int(c, "code.lineno", 40 + pl_below(c, 400));
        at[n++] = pl_kv_str(c, "app.user.id", pl_strf(c, "u-%u", id));
        at[n++] = pl_kv_int(c, "app.cart.items", 1 + pl_below(c, 12));
        at[n++] = pl_kv_bool(c, "app.cache.hit", pl_below(c, 3) != 0);
        at[n++] = pl_kv_double(c, "app.cart.total", (double)pl_below(c, 100000) / 100);
    }
    return n;
}

static inline pl_event *pl_event_new(struct pl_ctx *c, uint64_t t, int ok)
{
    pl_event *e = pl_alloc(c, sizeof(*e));
    pl_kv **at = pl_alloc(c, 3 * sizeof(*at));
    if (!e || !at)
        return NULL;
    opentelemetry__proto__trace__v1__span__event__init(e);
    e->time_unix_nano = t;
    e->attributes = at;
    if (ok) {
        e->name = "cache.miss";
        at[e->n_attributes++] =
            pl_kv_str(c, "cache.key", pl_strf(c, "cart:%016llx", (unsigned long long)pl_rand(c)));
        at[e->n_attributes++] = pl_kv_int(c, "cache.ttl_s", 300);
    } else {
        e->name = "exception";
        at[e->n_attributes++] = pl_kv_str(c, "exception.type", "java.net.SocketTimeoutException");
        at[e->n_attributes++] = pl_kv_str(c, "exception.message", "Read timed out after 2000ms");
    }
    return e;
}

/* One span of trace `trace_id`; parent is NULL for the root. */
static inline pl_span *pl_span_new(struct pl_ctx *c, enum pl_kind k, ProtobufCBinaryData trace_id,
                                   const ProtobufCBinaryData *parent, struct hs_bench_payload *p)
{
    pl_span *s = pl_alloc(c, sizeof(*s));
    pl_kv **at = pl_alloc(c, 10 * sizeof(*at));
    Opentelemetry__Proto__Trace__V1__Status *st = pl_alloc(c, sizeof(*st));
    if (!s || !at || !st)
        return NULL;
    opentelemetry__proto__trace__v1__span__init(s);
    opentelemetry__proto__trace__v1__status__init(st);
    s->trace_id = trace_id;
    s->span_id = pl_id(c, 8);
    if (parent)
        s->parent_span_id = *parent;
    s->flags = 0x101; /* sampled, has-is-remote */
    static const int kinds[PL_KINDS] = {
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER,
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT,
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT,
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL};
    s->kind = kinds[k];
    s->start_time_unix_nano = c->now_ns + pl_below(c, 1000000000);
    s->end_time_unix_nano = s->start_time_unix_nano + 50000 + pl_below(c, 600000000);
    s->attributes = at;
    s->n_attributes = pl_span_attrs(c, k, at, &s->name);
    int ok = pl_below(c, 20) != 0;
    st->code = ok ? OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_UNSET
                  : OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
    if (!ok)
        st->message = "upstream timeout";
    s->status = st;
    if (pl_below(c, 5) == 0) {
        s->events = pl_alloc(c, sizeof(*s->events));
        if (s->events) {
            s->events[0] = pl_event_new(c, s->start_time_unix_nano + 1000, ok);
            s->n_events = 1;
            p->events++;
        }
    }
    p->attributes += (uint32_t)s->n_attributes;
    return s;
}

static inline pl_kv **pl_resource_attrs(struct pl_ctx *c, size_t *n)
{
    pl_kv **at = pl_alloc(c, 9 * sizeof(*at));
    if (!at)
        return NULL;
    size_t i = 0;
    at[i++] = pl_kv_str(c, "service.name", "checkout");
    at[i++] = pl_kv_str(c, "service.namespace", "shop");
    at[i++] = pl_kv_str(c, "service.version", "2.14.3");
    at[i++] = pl_kv_str(c, "deployment.environment", "production");
    at[i++] = pl_kv_str(c, "host.name", "checkout-7d9f8b6c5d-x2k4q");
    at[i++] = pl_kv_str(c, "telemetry.sdk.name", "opentelemetry");
    at[i++] = pl_kv_str(c, "telemetry.sdk.language", "java");
    at[i++] = pl_kv_str(c, "telemetry.sdk.version", "1.38.0");
    at[i++] = pl_kv_int(c, "process.pid", 4242);
    *n = i;
    return at;
}

/* Spans come in traces of 3-12: a server root with client, db and internal children. */
static inline int pl_fill(struct pl_ctx *c, pl_request *req, uint32_t nspans,
                          struct hs_bench_payload *p)
{
    pl_resource_spans *rs = pl_alloc(c, sizeof(*rs));
    Opentelemetry__Proto__Resource__V1__Resource *res = pl_alloc(c, sizeof(*res));
    pl_scope_spans **ss = pl_alloc(c, PL_KINDS * sizeof(*ss));
    if (!rs || !res || !ss)
        return -1;
    opentelemetry__proto__trace__v1__resource_spans__init(rs);
    opentelemetry__proto__resource__v1__resource__init(res);
    res->attributes = pl_resource_attrs(c, &res->n_attributes);
    rs->resource = res;
    rs->schema_url = "https://opentelemetry.io/schemas/1.24.0";
    for (int k = 0; k < PL_KINDS; k++) {
        ss[k] = pl_alloc(c, sizeof(*ss[k]));
        Opentelemetry__Proto__Common__V1__InstrumentationScope *sc = pl_alloc(c, sizeof(*sc));
        if (!ss[k] || !sc)
            return -1;
        opentelemetry__proto__trace__v1__scope_spans__init(ss[k]);
        opentelemetry__proto__common__v1__instrumentation_scope__init(sc);
        sc->name = (char *)pl_scope_names[k];
        sc->version = "2.4.0-alpha";
        ss[k]->scope = sc;
        ss[k]->spans = pl_alloc(c, nspans * sizeof(pl_span *));
        if (!ss[k]->spans)
            return -1;
    }
    rs->scope_spans = ss;
    rs->n_scope_spans = PL_KINDS;
    uint32_t made = 0;
    while (made < nspans) {
        ProtobufCBinaryData trace_id = pl_id(c, 16);
        uint32_t len = 3 + pl_below(c, 10);
        const ProtobufCBinaryData *root_id = NULL;
        for (uint32_t i = 0; i < len && made < nspans; i++, made++) {
            enum pl_kind k = i == 0 ? PL_HTTP_SERVER : (enum pl_kind)(1 + pl_below(c, 3));
            pl_span *s = pl_span_new(c, k, trace_id, root_id, p);
            if (!s)
                return -1;
            if (i == 0)
                root_id = &s->span_id;
            ss[k]->spans[ss[k]->n_spans++] = s;
        }
    }
    req->resource_spans = pl_alloc(c, sizeof(*req->resource_spans));
    if (!req->resource_spans)
        return -1;
    req->resource_spans[0] = rs;
    req->n_resource_spans = 1;
    p->scopes = PL_KINDS;
    return c->failed ? -1 : 0;
}

/* Builds and packs a request of `spans` spans; the same seed gives the same bytes. 0 or -1. */
static inline int hs_bench_payload_build(struct hs_bench_payload *p, uint32_t spans, uint64_t seed)
{
    memset(p, 0, sizeof(*p));
    struct pl_ctx c = {
        .a = hs_arena_new(1 << 20, 0), .rng = seed, .now_ns = 1717000000000000000ULL};
    if (!c.a)
        return -1;
    pl_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    int rc = pl_fill(&c, &req, spans, p);
    if (rc == 0) {
        p->len = protobuf_c_message_get_packed_size(&req.base);
        p->data = malloc(p->len ? p->len : 1);
        if (p->data)
            protobuf_c_message_pack(&req.base, p->data);
        else
            rc = -1;
    }
    p->spans = spans;
    hs_arena_free(c.a);
    return rc;
}

static inline void hs_bench_payload_free(struct hs_bench_payload *p)
{
    free(p->data);
    memset(p, 0, sizeof(*p));
}

/* One line: `payload: spans=1000 bytes=440123 bytes_per_span=440.1 ...`. */
static inline void hs_bench_payload_print(const struct hs_bench_payload *p, FILE *f)
{
    fprintf(f,
            "payload: spans=%u bytes=%zu bytes_per_span=%.1f attrs_per_span=%.2f "
            "events_per_span=%.2f scopes=%u resource_attrs=9\n",
            p->spans, p->len, p->spans ? (double)p->len / p->spans : 0.0,
            p->spans ? (double)p->attributes / p->spans : 0.0,
            p->spans ? (double)p->events / p->spans : 0.0, p->scopes);
}

#endif
