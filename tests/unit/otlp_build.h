/* otlp_build.h: builds OTLP trace requests with protobuf-c for the scanner's tests: values of
 * every type, spans with every field, and raw fields appended to any message (inject). */
#ifndef HS_TESTS_OTLP_BUILD_H
#define HS_TESTS_OTLP_BUILD_H

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__AnyValue Any;
typedef Opentelemetry__Proto__Common__V1__KeyValue KV;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Trace__V1__Span__Event Event;
typedef Opentelemetry__Proto__Trace__V1__Span__Link Link;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans ScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans ResourceSpans;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest Request;

static struct hs_arena *build_arena; /* per test, freed by teardown */

static inline void *zalloc(size_t n)
{
    void *p = hs_arena_alloc(build_arena, n);
    if (!p)
        abort();
    memset(p, 0, n);
    return p;
}

static inline Any *any(int kind)
{
    Any *v = zalloc(sizeof(*v));
    opentelemetry__proto__common__v1__any_value__init(v);
    v->value_case = kind;
    return v;
}

static inline Any *any_str(const char *s)
{
    Any *v = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
    v->string_value = (char *)s;
    return v;
}

static inline Any *any_int(int64_t i)
{
    Any *v = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE);
    v->int_value = i;
    return v;
}

static inline KV *kv(const char *key, Any *value)
{
    KV *k = zalloc(sizeof(*k));
    opentelemetry__proto__common__v1__key_value__init(k);
    k->key = (char *)key;
    k->value = value;
    return k;
}

/* An array of n pointers, given as arguments. */
static inline void **list(size_t n, ...)
{
    void **l = zalloc((n ? n : 1) * sizeof(*l));
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        l[i] = va_arg(ap, void *);
    va_end(ap);
    return l;
}

/* Nested values: arrays inside kvlists inside arrays, every AnyValue member at least once. */
static inline Any *any_nested(void)
{
    Any *arr = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE);
    Any *kvl = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE);
    Any *inner = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE);
    Any *b = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE);
    Any *d = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE);
    Any *by = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE);
    Any *si = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX);
    b->bool_value = 1;
    d->double_value = 2.5;
    by->bytes_value = (ProtobufCBinaryData){3, (uint8_t *)"\x00\x01\x02"};
    si->string_value_strindex = 7;
    inner->array_value = zalloc(sizeof(*inner->array_value));
    opentelemetry__proto__common__v1__array_value__init(inner->array_value);
    inner->array_value->n_values = 4;
    inner->array_value->values = (Any **)list(4, b, d, by, any(0));
    kvl->kvlist_value = zalloc(sizeof(*kvl->kvlist_value));
    opentelemetry__proto__common__v1__key_value_list__init(kvl->kvlist_value);
    kvl->kvlist_value->n_values = 3;
    kvl->kvlist_value->values =
        (KV **)list(3, kv("inner", inner), kv("s", any_str("")), kv("i", any_int(-1)));
    arr->array_value = zalloc(sizeof(*arr->array_value));
    opentelemetry__proto__common__v1__array_value__init(arr->array_value);
    arr->array_value->n_values = 3;
    arr->array_value->values = (Any **)list(3, kvl, si, any_int(0));
    return arr;
}

/* Appends a field protobuf-c does not know to m, as raw bytes after its tag (protobuf-c writes
 * unknown fields verbatim): a way to put any bytes at the end of any message. */
static inline void inject(void *msg, uint32_t num, unsigned wt, const void *data, size_t len)
{
    ProtobufCMessage *m = msg;
    ProtobufCMessageUnknownField *u = zalloc((m->n_unknown_fields + 1) * sizeof(*u));
    if (m->n_unknown_fields)
        memcpy(u, m->unknown_fields, m->n_unknown_fields * sizeof(*u));
    uint8_t *copy = zalloc(len ? len : 1);
    memcpy(copy, data, len);
    u[m->n_unknown_fields] =
        (ProtobufCMessageUnknownField){.tag = num, .wire_type = wt, .len = len, .data = copy};
    m->unknown_fields = u;
    m->n_unknown_fields++;
}

static inline ProtobufCBinaryData id(size_t n, uint8_t seed)
{
    uint8_t *p = zalloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i);
    return (ProtobufCBinaryData){n, n ? p : NULL};
}

static inline Span *span(const char *name, uint8_t seed)
{
    Span *s = zalloc(sizeof(*s));
    opentelemetry__proto__trace__v1__span__init(s);
    s->trace_id = id(16, seed);
    s->span_id = id(8, (uint8_t)(seed + 100));
    s->name = (char *)name;
    s->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    s->start_time_unix_nano = 1717000000000000000ULL + seed;
    s->end_time_unix_nano = s->start_time_unix_nano + 600000000;
    return s;
}

static inline ScopeSpans *scope_spans(const char *scope, size_t n, Span **spans)
{
    ScopeSpans *ss = zalloc(sizeof(*ss));
    opentelemetry__proto__trace__v1__scope_spans__init(ss);
    if (scope) {
        ss->scope = zalloc(sizeof(*ss->scope));
        opentelemetry__proto__common__v1__instrumentation_scope__init(ss->scope);
        ss->scope->name = (char *)scope;
        ss->scope->version = "1.2.3";
    }
    ss->n_spans = n;
    ss->spans = spans;
    return ss;
}

/* One ResourceSpans for `service` holding the given ScopeSpans. */
static inline Request *request(const char *service, size_t n, ScopeSpans **ss)
{
    ResourceSpans *rs = zalloc(sizeof(*rs));
    opentelemetry__proto__trace__v1__resource_spans__init(rs);
    rs->resource = zalloc(sizeof(*rs->resource));
    opentelemetry__proto__resource__v1__resource__init(rs->resource);
    rs->resource->n_attributes = 2;
    rs->resource->attributes =
        (KV **)list(2, kv("host.name", any_str("h1")), kv("service.name", any_str(service)));
    rs->n_scope_spans = n;
    rs->scope_spans = ss;
    rs->schema_url = "https://opentelemetry.io/schemas/1.24.0";
    Request *r = zalloc(sizeof(*r));
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(r);
    r->n_resource_spans = 1;
    r->resource_spans = (ResourceSpans **)list(1, rs);
    return r;
}

struct bytes {
    uint8_t *p;
    size_t len;
};

static inline struct bytes pack(const void *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *p = zalloc(n ? n : 1);
    if (protobuf_c_message_pack(msg, p) != n)
        abort();
    return (struct bytes){p, n};
}

static inline Event *event(const char *name, size_t nattrs, KV **attrs)
{
    Event *e = zalloc(sizeof(*e));
    opentelemetry__proto__trace__v1__span__event__init(e);
    e->time_unix_nano = 1717000000000001000ULL;
    e->name = (char *)name;
    e->n_attributes = nattrs;
    e->attributes = attrs;
    e->dropped_attributes_count = 1;
    return e;
}

/* A span with every field set, and unknown fields of each wire type at its end. */
static inline Span *full_span(void)
{
    Span *s = span("GET /api/v1/users/{id}", 1);
    s->trace_state = "vendor=1";
    s->parent_span_id = id(8, 50);
    s->flags = 0x301;
    s->n_attributes = 4;
    s->attributes = (KV **)list(4, kv("http.method", any_str("GET")), kv("nested", any_nested()),
                                kv("empty", any(0)), kv("n", any_int(-5)));
    s->dropped_attributes_count = 3;
    s->n_events = 2;
    s->events = (Event **)list(2, event("exception", 1, (KV **)list(1, kv("t", any_str("E")))),
                               event("", 0, NULL));
    s->dropped_events_count = 4;
    Link *l = zalloc(sizeof(*l));
    opentelemetry__proto__trace__v1__span__link__init(l);
    l->trace_id = id(16, 200);
    l->span_id = id(8, 220);
    l->trace_state = "k=v";
    l->n_attributes = 1;
    l->attributes = (KV **)list(1, kv("link.kind", any_int(3)));
    l->dropped_attributes_count = 2;
    l->flags = 0x100;
    s->n_links = 1;
    s->links = (Link **)list(1, l);
    s->dropped_links_count = 5;
    s->status = zalloc(sizeof(*s->status));
    opentelemetry__proto__trace__v1__status__init(s->status);
    s->status->message = "boom";
    s->status->code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
    inject(s, 100, PROTOBUF_C_WIRE_TYPE_VARINT, "\x96\x01", 2);
    inject(s, 101, PROTOBUF_C_WIRE_TYPE_64BIT, "12345678", 8);
    inject(s, 102, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
           "\x03"
           "abc",
           4);
    inject(s, 103, PROTOBUF_C_WIRE_TYPE_32BIT, "1234", 4);
    return s;
}

/* 1 ResourceSpans, 2 ScopeSpans of 2 and 3 spans; the first span is full_span(). */
static inline Request *full_request(Span **first)
{
    *first = full_span();
    Request *r = request(
        "checkout", 2,
        (ScopeSpans **)list(
            2, scope_spans("scope-a", 2, (Span **)list(2, *first, span("b", 2))),
            scope_spans("scope-b", 3, (Span **)list(3, span("c", 3), span("d", 4), span("e", 5)))));
    Opentelemetry__Proto__Resource__V1__Resource *rsc = r->resource_spans[0]->resource;
    Opentelemetry__Proto__Common__V1__EntityRef *ref = zalloc(sizeof(*ref));
    opentelemetry__proto__common__v1__entity_ref__init(ref);
    ref->schema_url = "s";
    ref->type = "service";
    ref->n_id_keys = 2;
    ref->id_keys = (char **)list(2, "service.name", "service.namespace");
    ref->n_description_keys = 1;
    ref->description_keys = (char **)list(1, "host.name");
    rsc->n_entity_refs = 1;
    rsc->entity_refs = (Opentelemetry__Proto__Common__V1__EntityRef **)list(1, ref);
    rsc->dropped_attributes_count = 9;
    inject(rsc, 77, PROTOBUF_C_WIRE_TYPE_VARINT, "\x01", 1);
    inject(r->resource_spans[0], 1000, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x01x", 2);
    return r;
}

/* Appends one LEN field (tag, length, payload) to acc. */
static inline struct bytes add(struct bytes acc, uint8_t tag, struct bytes payload)
{
    uint8_t *p = zalloc(acc.len + 6 + payload.len);
    size_t n = acc.len;
    if (n)
        memcpy(p, acc.p, n);
    p[n++] = tag;
    for (size_t v = payload.len;; v >>= 7) {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f)
            break;
    }
    if (payload.len) /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(p + n, payload.p, payload.len);
    return (struct bytes){p, n + payload.len};
}

/* A request of one span `s`, packed. */
static inline struct bytes one_span(Span *s)
{
    return pack(
        request("svc", 1, (ScopeSpans **)list(1, scope_spans("sc", 1, (Span **)list(1, s)))));
}

/* An int nested in `depth` - 1 arrays: an attribute value `depth` deep. */
static inline Any *nested(int depth)
{
    Any *v = any_int(1);
    while (--depth > 0) {
        Any *a = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE);
        a->array_value = zalloc(sizeof(*a->array_value));
        opentelemetry__proto__common__v1__array_value__init(a->array_value);
        a->array_value->n_values = 1;
        a->array_value->values = (Any **)list(1, v);
        v = a;
    }
    return v;
}

static inline struct bytes with_value(Any *v)
{
    Span *s = span("x", 1);
    s->n_attributes = 1;
    s->attributes = (KV **)list(1, kv("deep", v));
    return one_span(s);
}

#endif
