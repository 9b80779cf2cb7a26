/* test_traces.c: the refcounted batch of wire bytes: references, appending two requests gives
 * their union (checked by decoding with protobuf-c), and copy on write only when shared. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/errors.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_wire.h"
#include "pdata/traces.h"

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest Request;

/* A batch holding one request: `nspans` spans named "<service>-<i>" of one service. */
static struct hs_traces *batch(const char *service, size_t nspans)
{
    Opentelemetry__Proto__Trace__V1__Span spans[8], *sp[8];
    char names[8][32];
    assert_true(nspans <= 8);
    for (size_t i = 0; i < nspans; i++) {
        opentelemetry__proto__trace__v1__span__init(&spans[i]);
        snprintf(names[i], sizeof(names[i]), "%s-%zu", service, i);
        spans[i].name = names[i];
        sp[i] = &spans[i];
    }
    Opentelemetry__Proto__Common__V1__AnyValue v =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    v.string_value = (char *)service;
    Opentelemetry__Proto__Common__V1__KeyValue kv =
        OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    kv.key = "service.name";
    kv.value = &v;
    Opentelemetry__Proto__Common__V1__KeyValue *kvp = &kv;
    Opentelemetry__Proto__Resource__V1__Resource res =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    res.n_attributes = 1;
    res.attributes = &kvp;
    Opentelemetry__Proto__Trace__V1__ScopeSpans ss =
        OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    ss.n_spans = nspans;
    ss.spans = sp;
    Opentelemetry__Proto__Trace__V1__ScopeSpans *ssp = &ss;
    Opentelemetry__Proto__Trace__V1__ResourceSpans rs =
        OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    Opentelemetry__Proto__Trace__V1__ResourceSpans *rsp = &rs;
    Request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    size_t len = protobuf_c_message_get_packed_size(&req.base);
    uint8_t *p = malloc(len);
    assert_non_null(p);
    protobuf_c_message_pack(&req.base, p);
    struct hs_traces *t = hs_traces_wrap(p, len, len, (uint32_t)nspans, 1);
    assert_non_null(t);
    assert_int_equal(t->refs, 1);
    return t;
}

static void test_ref_unref(void **state)
{
    struct hs_traces *t = batch("a", 2);
    assert_ptr_equal(hs_traces_ref(t), t);
    assert_ptr_equal(hs_traces_ref(t), t);
    assert_int_equal(t->refs, 3);
    hs_traces_unref(t);
    hs_traces_unref(t);
    assert_int_equal(t->refs, 1); /* still alive: the last holder frees (ASan checks the rest) */
    assert_int_equal(t->spans, 2);
    hs_traces_unref(t);
    hs_traces_unref(NULL);

    struct hs_traces *e = hs_traces_new(0);
    assert_non_null(e);
    assert_int_equal(e->len + e->spans + e->resource_spans, 0);
    hs_traces_unref(e);
}

/* Appending the bytes of several requests is one request holding all their ResourceSpans. */
static void test_append_is_the_union(void **state)
{
    struct hs_traces *dst = hs_traces_new(0);
    struct hs_traces *a = batch("alpha", 3), *b = batch("beta", 2);
    assert_int_equal(hs_traces_append(dst, a), 0);
    assert_int_equal(hs_traces_append(dst, b), 0);
    assert_int_equal(dst->len, a->len + b->len);
    assert_int_equal(dst->spans, 5);
    assert_int_equal(dst->resource_spans, 2);

    Request *r = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, dst->len, dst->data);
    assert_non_null(r);
    assert_int_equal(r->n_resource_spans, 2);
    const char *want[2][3] = {{"alpha-0", "alpha-1", "alpha-2"}, {"beta-0", "beta-1", NULL}};
    for (size_t i = 0; i < 2; i++) {
        Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = r->resource_spans[i]->scope_spans[0];
        assert_int_equal(ss->n_spans, i == 0 ? 3 : 2);
        for (size_t j = 0; j < ss->n_spans; j++)
            assert_string_equal(ss->spans[j]->name, want[i][j]);
        assert_string_equal(r->resource_spans[i]->resource->attributes[0]->value->string_value,
                            i == 0 ? "alpha" : "beta");
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(r,
                                                                                            NULL);
    struct hs_otlp_scan scan; /* and the scanner sees the same */
    assert_int_equal(hs_otlp_traces_scan(dst->data, dst->len, NULL, NULL, NULL, &scan), 0);
    assert_int_equal(scan.spans, dst->spans);
    assert_int_equal(scan.resource_spans, dst->resource_spans);

    /* many small appends: the bytes stay in order */
    size_t before = dst->len;
    for (int i = 0; i < 100; i++)
        assert_int_equal(hs_traces_append(dst, b), 0);
    assert_int_equal(dst->len, before + 100 * b->len);
    assert_int_equal(dst->spans, 5 + 100 * 2);
    assert_memory_equal(dst->data + before + 99 * b->len, b->data, b->len);
    assert_true(dst->cap >= dst->len);
    hs_traces_unref(a);
    hs_traces_unref(b);
    hs_traces_unref(dst);
}

static void test_make_writable_copies_only_when_shared(void **state)
{
    struct hs_traces *t = batch("solo", 1);
    struct hs_traces *orig = t;
    uint8_t *data = t->data;
    assert_int_equal(hs_traces_make_writable(&t), 0);
    assert_ptr_equal(t, orig); /* the sole holder: no copy */
    assert_ptr_equal(t->data, data);

    struct hs_traces *other = hs_traces_ref(t); /* now shared, as a fan-out leaves it */
    assert_int_equal(hs_traces_make_writable(&t), 0);
    assert_ptr_not_equal(t, other);
    assert_ptr_not_equal(t->data, other->data);
    assert_int_equal(t->refs, 1);
    assert_int_equal(other->refs, 1); /* our reference on the shared one was dropped */
    assert_int_equal(t->len, other->len);
    assert_memory_equal(t->data, other->data, t->len);
    assert_int_equal(t->spans, other->spans);
    assert_int_equal(t->resource_spans, other->resource_spans);

    struct hs_traces *more = batch("more", 2); /* writing to the copy leaves the other alone */
    size_t len = other->len;
    assert_int_equal(hs_traces_append(t, more), 0);
    assert_int_equal(other->len, len);
    assert_int_equal(other->spans, 1);
    assert_int_equal(t->spans, 3);
    hs_traces_unref(more);
    hs_traces_unref(other);
    hs_traces_unref(t);

    struct hs_traces *e = hs_traces_new(0); /* an empty shared batch copies too */
    struct hs_traces *e2 = hs_traces_ref(e);
    assert_int_equal(hs_traces_make_writable(&e), 0);
    assert_ptr_not_equal(e, e2);
    assert_int_equal(e->len, 0);
    hs_traces_unref(e);
    hs_traces_unref(e2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_unref),
        cmocka_unit_test(test_append_is_the_union),
        cmocka_unit_test(test_make_writable_copies_only_when_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
