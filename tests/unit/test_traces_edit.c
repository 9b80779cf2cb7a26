/* test_traces_edit.c: editing batches in their wire form, checked by decoding the result with
 * protobuf-c: appended attributes of every type, keys hotspan writes never twice, removals, empty
 * scopes and resources left out, extraction, length prefixes that grow, bad offsets, and
 * attribute lookups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/errors.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_wire.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"
#include "tests/unit/otlp_build.h"

#define MAX_SEEN 64

struct seen {
    int n;
    struct hs_span_view v[MAX_SEEN];
};

static int record(void *ud, const struct hs_span_view *v)
{
    struct seen *s = ud;
    assert_true(s->n < MAX_SEEN);
    s->v[s->n++] = *v;
    return 0;
}

/* Scans b (which must be valid) into `seen` and returns it as a batch; the batch borrows b. */
static struct hs_traces batch_of(struct bytes b, struct seen *seen)
{
    struct hs_otlp_scan res;
    seen->n = 0;
    int rc = hs_otlp_traces_scan(b.p, b.len, NULL, record, seen, &res);
    if (rc)
        fail_msg("input does not scan: %s", res.err);
    return (struct hs_traces){.refs = 1,
                              .data = b.p,
                              .len = b.len,
                              .cap = b.len,
                              .spans = res.spans,
                              .resource_spans = res.resource_spans};
}

/* The output must scan cleanly, with the counts the batch claims. */
static void rescan(const struct hs_traces *out, struct seen *seen)
{
    struct hs_otlp_scan res;
    seen->n = 0;
    int rc = hs_otlp_traces_scan(out->data, out->len, NULL, record, seen, &res);
    if (rc)
        fail_msg("output does not scan: %s", res.err);
    assert_int_equal(res.spans, out->spans);
    assert_int_equal(res.resource_spans, out->resource_spans);
}

static Request *unpack(const struct hs_traces *t)
{
    ProtobufCAllocator alloc = hs_arena_pb_allocator(build_arena);
    Request *r = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        &alloc, t->len, t->data);
    assert_non_null(r);
    return r;
}

static bool view_bytes_equal(const uint8_t *a, const struct hs_span_view *va, const uint8_t *b,
                             const struct hs_span_view *vb)
{
    return va->len == vb->len && memcmp(a + va->offset, b + vb->offset, va->len) == 0;
}

static void assert_str_kv(const KV *k, const char *key, const char *val)
{
    assert_string_equal(k->key, key);
    assert_int_equal(k->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
    assert_string_equal(k->value->string_value, val);
}

static int setup(void **state)
{
    build_arena = hs_arena_new(1 << 16, 0);
    return build_arena ? 0 : -1;
}

static int teardown(void **state)
{
    hs_arena_free(build_arena);
    build_arena = NULL;
    return 0;
}

/* --- appending ----------------------------------------------------------------------------- */

static void test_append_every_type(void **state)
{
    Span *full;
    struct bytes b = pack(full_request(&full));
    struct seen in_seen, out_seen;
    struct hs_traces in = batch_of(b, &in_seen);
    assert_int_equal(in_seen.n, 5);

    struct hs_buf attrs = {0}, one = {0};
    const char *const arr[] = {"a", "", "ccc"};
    assert_int_equal(hs_attr_string(&attrs, "db.statement", "SELECT 1", 8), 0);
    assert_int_equal(hs_attr_bool(&attrs, "slow", true), 0);
    assert_int_equal(hs_attr_int(&attrs, "neg", -42), 0);
    assert_int_equal(hs_attr_double(&attrs, "ratio", 2.5), 0);
    assert_int_equal(hs_attr_string_array(&attrs, "funcs", arr, 3), 0);
    assert_int_equal(hs_attr_string(&attrs, "empty", "", 0), 0); /* still a string value */
    assert_int_equal(hs_attr_int(&attrs, "zero", 0), 0);         /* still an int value */
    assert_int_equal(hs_attr_bool(&attrs, "no", false), 0);
    assert_int_equal(hs_attr_string_array(&attrs, "none", NULL, 0), 0);
    assert_int_equal(hs_attr_string(&one, "profile.match", "window", 6), 0);

    struct hs_span_edit edits[] = {
        {.offset = in_seen.v[0].offset, .attrs = attrs.data, .attrs_len = attrs.len},
        {.offset = in_seen.v[1].offset, .attrs = one.data, .attrs_len = one.len},
    };
    struct hs_traces *out;
    assert_int_equal(hs_traces_edit(&in, edits, 2, true, &out), 0);
    assert_non_null(out);
    assert_int_equal(out->spans, 5);
    assert_int_equal(out->resource_spans, 1);
    rescan(out, &out_seen);
    assert_int_equal(out_seen.v[0].attributes, 3 + 9); /* "empty" was there: replaced */
    assert_int_equal(out_seen.v[1].attributes, 1);
    for (int i = 2; i < 5; i++) /* c, d, e: untouched */
        assert_true(view_bytes_equal(b.p, &in_seen.v[i], out->data, &out_seen.v[i]));

    Request *r = unpack(out);
    ResourceSpans *rs = r->resource_spans[0];
    assert_int_equal(rs->resource->n_attributes, 2);
    assert_int_equal(rs->resource->n_entity_refs, 1);
    assert_int_equal(rs->resource->dropped_attributes_count, 9);
    assert_int_equal(rs->resource->base.n_unknown_fields, 1);
    assert_int_equal(rs->base.n_unknown_fields, 1); /* field 1000 */
    assert_string_equal(rs->schema_url, "https://opentelemetry.io/schemas/1.24.0");
    Span *s = rs->scope_spans[0]->spans[0];
    assert_int_equal(s->n_attributes, 12);
    const char *orig[] = {"http.method", "nested", "n"};
    for (int i = 0; i < 3; i++) /* the original ones first, as they were */
        assert_string_equal(s->attributes[i]->key, orig[i]);
    assert_int_equal(s->base.n_unknown_fields, 4);
    assert_int_equal(s->n_events, 2);
    assert_int_equal(s->n_links, 1);
    assert_string_equal(s->status->message, "boom");
    assert_int_equal(s->flags, 0x301);
    KV **a = s->attributes + 3;
    assert_str_kv(a[0], "db.statement", "SELECT 1");
    assert_string_equal(a[1]->key, "slow");
    assert_int_equal(a[1]->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE);
    assert_true(a[1]->value->bool_value);
    assert_string_equal(a[2]->key, "neg");
    assert_int_equal(a[2]->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE);
    assert_int_equal(a[2]->value->int_value, -42);
    assert_string_equal(a[3]->key, "ratio");
    assert_int_equal(a[3]->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE);
    assert_true(a[3]->value->double_value == 2.5);
    assert_string_equal(a[4]->key, "funcs");
    assert_int_equal(a[4]->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE);
    assert_int_equal(a[4]->value->array_value->n_values, 3);
    for (int i = 0; i < 3; i++) {
        Any *v = a[4]->value->array_value->values[i];
        assert_int_equal(v->value_case,
                         OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
        assert_string_equal(v->string_value, arr[i]);
    }
    assert_str_kv(a[5], "empty", "");
    assert_int_equal(a[6]->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE);
    assert_int_equal(a[6]->value->int_value, 0);
    assert_int_equal(a[7]->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE);
    assert_false(a[7]->value->bool_value);
    assert_int_equal(a[8]->value->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE);
    assert_int_equal(a[8]->value->array_value->n_values, 0);
    Span *sb = rs->scope_spans[0]->spans[1];
    assert_string_equal(sb->name, "b");
    assert_int_equal(sb->n_attributes, 1);
    assert_str_kv(sb->attributes[0], "profile.match", "window");

    /* what the correlator reads back from the new batch */
    struct hs_str v;
    assert_true(hs_span_attr_str(out->data, &out_seen.v[0], "db.statement", &v));
    assert_true(v.len == 8 && memcmp(v.ptr, "SELECT 1", 8) == 0);
    assert_true(hs_span_attr_str(out->data, &out_seen.v[0], "http.method", &v));
    assert_false(hs_span_attr_str(out->data, &out_seen.v[0], "neg", &v));

    hs_traces_unref(out);
    hs_buf_free(&attrs);
    hs_buf_free(&one);
}

/* Two resources (two requests back to back are one request), three scopes, unknown fields at
 * every level and a request-level unknown field between the resources. */
static struct bytes two_resources(void)
{
    ScopeSpans *a1 = scope_spans("a1", 2, (Span **)list(2, span("s1", 1), span("s2", 2)));
    ScopeSpans *a2 = scope_spans("a2", 1, (Span **)list(1, span("s3", 3)));
    a1->schema_url = "https://scope/a1";
    inject(a1, 50, PROTOBUF_C_WIRE_TYPE_VARINT, "\x07", 1);
    Request *ra = request("svc-a", 2, (ScopeSpans **)list(2, a1, a2));
    inject(ra->resource_spans[0], 60, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x02hi", 3);
    inject(ra, 70, PROTOBUF_C_WIRE_TYPE_32BIT, "wxyz", 4);
    Span *s4 = span("s4", 4);
    inject(s4, 90, PROTOBUF_C_WIRE_TYPE_VARINT, "\x01", 1);
    Request *rb =
        request("svc-b", 1,
                (ScopeSpans **)list(1, scope_spans("b1", 2, (Span **)list(2, s4, span("s5", 5)))));
    struct bytes pa = pack(ra), pb = pack(rb);
    struct bytes both = {zalloc(pa.len + pb.len), pa.len + pb.len};
    memcpy(both.p, pa.p, pa.len);
    memcpy(both.p + pa.len, pb.p, pb.len);
    return both;
}

static void test_remove_and_leave_out_empty(void **state)
{
    struct bytes b = two_resources();
    struct seen in_seen, out_seen;
    struct hs_traces in = batch_of(b, &in_seen);
    assert_int_equal(in.spans, 5);
    assert_int_equal(in.resource_spans, 2);

    struct hs_buf attrs = {0};
    assert_int_equal(hs_attr_int(&attrs, "n.plus.one", 12), 0);
    struct hs_span_edit edits[] = {
        {.offset = in_seen.v[1].offset, .attrs = attrs.data, .attrs_len = attrs.len}, /* s2 */
        {.offset = in_seen.v[2].offset, .remove = true},                              /* s3 */
        {.offset = in_seen.v[3].offset, .remove = true},                              /* s4 */
        {.offset = in_seen.v[4].offset, .remove = true},                              /* s5 */
    };
    struct hs_traces *out;
    assert_int_equal(hs_traces_edit(&in, edits, 4, true, &out), 0);
    assert_int_equal(out->spans, 2);
    assert_int_equal(out->resource_spans, 1);
    rescan(out, &out_seen);
    assert_int_equal(out_seen.n, 2);
    assert_true(view_bytes_equal(b.p, &in_seen.v[0], out->data, &out_seen.v[0])); /* s1 */

    Request *r = unpack(out);
    assert_int_equal(r->n_resource_spans, 1);      /* svc-b lost all its spans: gone */
    assert_int_equal(r->base.n_unknown_fields, 1); /* field 70 */
    ResourceSpans *rs = r->resource_spans[0];
    assert_int_equal(rs->base.n_unknown_fields, 1);
    assert_int_equal(rs->resource->n_attributes, 2);
    assert_str_kv(rs->resource->attributes[1], "service.name", "svc-a");
    assert_int_equal(rs->n_scope_spans, 1); /* a2 lost its only span: gone */
    ScopeSpans *ss = rs->scope_spans[0];
    assert_string_equal(ss->scope->name, "a1");
    assert_string_equal(ss->scope->version, "1.2.3");
    assert_string_equal(ss->schema_url, "https://scope/a1");
    assert_int_equal(ss->base.n_unknown_fields, 1);
    assert_int_equal(ss->n_spans, 2);
    assert_string_equal(ss->spans[0]->name, "s1");
    assert_string_equal(ss->spans[1]->name, "s2");
    assert_int_equal(ss->spans[1]->n_attributes, 1);
    assert_int_equal(ss->spans[1]->attributes[0]->value->int_value, 12);
    hs_traces_unref(out);

    /* everything removed: no batch */
    struct hs_span_edit all[5];
    for (int i = 0; i < 5; i++)
        all[i] = (struct hs_span_edit){.offset = in_seen.v[i].offset, .remove = true};
    out = (struct hs_traces *)&in; /* must be reset */
    assert_int_equal(hs_traces_edit(&in, all, 5, true, &out), 0);
    assert_null(out);

    /* no edits: the same bytes */
    assert_int_equal(hs_traces_edit(&in, NULL, 0, true, &out), 0);
    assert_int_equal(out->len, b.len);
    assert_memory_equal(out->data, b.p, b.len);
    assert_int_equal(out->spans, 5);
    assert_int_equal(out->resource_spans, 2);
    hs_traces_unref(out);
    hs_buf_free(&attrs);
}

static void test_extract_from_two_resources(void **state)
{
    struct bytes b = two_resources();
    struct seen in_seen, out_seen;
    struct hs_traces in = batch_of(b, &in_seen);
    struct hs_buf attrs = {0};
    assert_int_equal(hs_attr_string(&attrs, "profile.match", "span", 4), 0);
    struct hs_span_edit edits[] = {
        {.offset = in_seen.v[1].offset},                                              /* s2 */
        {.offset = in_seen.v[3].offset, .remove = true},                              /* s4 */
        {.offset = in_seen.v[4].offset, .attrs = attrs.data, .attrs_len = attrs.len}, /* s5 */
    };
    struct hs_traces *out;
    assert_int_equal(hs_traces_edit(&in, edits, 3, false, &out), 0);
    assert_int_equal(out->spans, 2);
    assert_int_equal(out->resource_spans, 2);
    rescan(out, &out_seen);
    assert_true(view_bytes_equal(b.p, &in_seen.v[1], out->data, &out_seen.v[0]));
    assert_true(out_seen.v[0].service_name.len == 5 &&
                memcmp(out_seen.v[0].service_name.ptr, "svc-a", 5) == 0);
    assert_true(out_seen.v[1].service_name.len == 5 &&
                memcmp(out_seen.v[1].service_name.ptr, "svc-b", 5) == 0);

    Request *r = unpack(out);
    assert_int_equal(r->n_resource_spans, 2);
    ResourceSpans *ra = r->resource_spans[0], *rb = r->resource_spans[1];
    assert_str_kv(ra->resource->attributes[1], "service.name", "svc-a");
    assert_str_kv(rb->resource->attributes[1], "service.name", "svc-b");
    assert_string_equal(ra->schema_url, "https://opentelemetry.io/schemas/1.24.0");
    assert_int_equal(ra->base.n_unknown_fields, 1);
    assert_int_equal(ra->n_scope_spans, 1); /* a2 has no listed span */
    assert_string_equal(ra->scope_spans[0]->scope->name, "a1");
    assert_string_equal(ra->scope_spans[0]->schema_url, "https://scope/a1");
    assert_int_equal(ra->scope_spans[0]->n_spans, 1);
    assert_string_equal(ra->scope_spans[0]->spans[0]->name, "s2");
    assert_int_equal(rb->n_scope_spans, 1);
    assert_int_equal(rb->scope_spans[0]->n_spans, 1);
    Span *s5 = rb->scope_spans[0]->spans[0];
    assert_string_equal(s5->name, "s5");
    assert_int_equal(s5->n_attributes, 1);
    assert_str_kv(s5->attributes[0], "profile.match", "span");
    hs_traces_unref(out);

    /* nothing listed: nothing left */
    assert_int_equal(hs_traces_edit(&in, NULL, 0, false, &out), 0);
    assert_null(out);
    hs_buf_free(&attrs);
}

/* Resource and scope after the spans on the wire, and given twice: still kept as they were. */
static void test_resource_and_scope_after_spans(void **state)
{
    Opentelemetry__Proto__Resource__V1__Resource r1, r2;
    opentelemetry__proto__resource__v1__resource__init(&r1);
    opentelemetry__proto__resource__v1__resource__init(&r2);
    r1.n_attributes = 1;
    r1.attributes = (KV **)list(1, kv("host.name", any_str("h")));
    r2.n_attributes = 1;
    r2.attributes = (KV **)list(1, kv("service.name", any_str("late")));
    ScopeSpans *ss = scope_spans(NULL, 2, (Span **)list(2, span("s1", 1), span("s2", 2)));
    Opentelemetry__Proto__Common__V1__InstrumentationScope scope;
    opentelemetry__proto__common__v1__instrumentation_scope__init(&scope);
    scope.name = "after";
    struct bytes ssb = add(pack(ss), 0x0a, pack(&scope));
    struct bytes rs = add((struct bytes){0}, 0x0a, pack(&r1));
    rs = add(add(rs, 0x12, ssb), 0x0a, pack(&r2));
    struct bytes b = add((struct bytes){0}, 0x0a, rs);

    struct seen in_seen, out_seen;
    struct hs_traces in = batch_of(b, &in_seen);
    struct hs_buf attrs = {0};
    assert_int_equal(hs_attr_bool(&attrs, "x", true), 0);
    struct hs_span_edit edits[] = {
        {.offset = in_seen.v[0].offset, .remove = true},
        {.offset = in_seen.v[1].offset, .attrs = attrs.data, .attrs_len = attrs.len},
    };
    struct hs_traces *out;
    assert_int_equal(hs_traces_edit(&in, edits, 2, true, &out), 0);
    rescan(out, &out_seen);
    assert_int_equal(out_seen.n, 1);
    assert_true(out_seen.v[0].service_name.len == 4);
    assert_true(out_seen.v[0].scope_name.len == 5 &&
                memcmp(out_seen.v[0].scope_name.ptr, "after", 5) == 0);
    Request *r = unpack(out);
    Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_spans[0]->resource;
    assert_int_equal(res->n_attributes, 2); /* both occurrences, merged */
    assert_str_kv(res->attributes[0], "host.name", "h");
    assert_str_kv(res->attributes[1], "service.name", "late");
    assert_string_equal(r->resource_spans[0]->scope_spans[0]->scope->name, "after");
    assert_int_equal(r->resource_spans[0]->scope_spans[0]->n_spans, 1);
    assert_string_equal(r->resource_spans[0]->scope_spans[0]->spans[0]->name, "s2");
    /* each resource where it was: the first before the scope spans, the second after them */
    struct bytes p1 = pack(&r1), p2 = pack(&r2);
    const uint8_t *at1 = memmem(out->data, out->len, p1.p, p1.len);
    const uint8_t *at2 = memmem(out->data, out->len, p2.p, p2.len);
    assert_non_null(at1);
    assert_non_null(at2);
    assert_true(at1 < out->data + out_seen.v[0].offset);
    assert_true(at2 > out->data + out_seen.v[0].offset + out_seen.v[0].len);
    hs_traces_unref(out);
    hs_buf_free(&attrs);
}

/* The only span of a request, 120 bytes (one-byte length), grows past 127 (two bytes): its
 * length prefix, its ScopeSpans' and its ResourceSpans' all take a byte more. */
static void test_length_prefix_grows(void **state)
{
    Span *s = span("x", 1);
    size_t base_len = protobuf_c_message_get_packed_size((ProtobufCMessage *)s);
    char *name = zalloc(128);
    size_t name_len = 1 + (120 - base_len); /* to a span of exactly 120 bytes */
    memset(name, 'n', name_len);
    s->name = name;
    assert_int_equal(protobuf_c_message_get_packed_size((ProtobufCMessage *)s), 120);
    Request *req =
        request("svc", 1, (ScopeSpans **)list(1, scope_spans(NULL, 1, (Span **)list(1, s))));
    req->resource_spans[0]->resource = NULL; /* keep the ResourceSpans small too */
    req->resource_spans[0]->schema_url = "";
    struct bytes b = pack(req);
    struct seen in_seen, out_seen;
    struct hs_traces in = batch_of(b, &in_seen);
    assert_int_equal(in_seen.v[0].len, 120);
    assert_int_equal(b.p[in_seen.v[0].offset - 1], 120); /* a one-byte length */

    struct hs_buf attrs = {0};
    assert_int_equal(hs_attr_string(&attrs, "k", "0123456789", 10), 0);
    struct hs_span_edit e = {
        .offset = in_seen.v[0].offset, .attrs = attrs.data, .attrs_len = attrs.len};
    struct hs_traces *out;
    assert_int_equal(hs_traces_edit(&in, &e, 1, true, &out), 0);
    rescan(out, &out_seen);
    size_t grown = 120 + attrs.len;
    assert_true(grown >= 128);
    assert_int_equal(out_seen.v[0].len, grown);
    assert_int_equal(out->data[out_seen.v[0].offset - 2], (grown & 0x7f) | 0x80);
    assert_int_equal(out->data[out_seen.v[0].offset - 1], grown >> 7);
    assert_int_equal(out->len, b.len + attrs.len + 3); /* span, scope spans, resource spans */
    Request *r = unpack(out);
    Span *o = r->resource_spans[0]->scope_spans[0]->spans[0];
    assert_string_equal(o->name, name);
    assert_str_kv(o->attributes[0], "k", "0123456789");
    hs_traces_unref(out);
    hs_buf_free(&attrs);
}

static void test_bad_offsets(void **state)
{
    struct bytes b = two_resources();
    struct seen in_seen;
    struct hs_traces in = batch_of(b, &in_seen);
    size_t s1 = in_seen.v[0].offset, s2 = in_seen.v[1].offset;
    const size_t bad[] = {
        0,                       /* the first resource_spans' tag */
        2,                       /* inside the resource */
        s1 - 1,                  /* the span's length byte */
        s1 + 1,                  /* inside a span */
        s1 + in_seen.v[0].len,   /* right after a span: the next span's tag */
        in_seen.v[4].offset + 1, /* inside the last span */
        b.len,                   /* the end */
        b.len + 100,             /* past it */
    };
    struct hs_traces *out;
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad); i++) {
        /* beside a good edit, kept in order */
        struct hs_span_edit good = {.offset = s2}, wrong = {.offset = bad[i], .remove = true};
        struct hs_span_edit e[2] = {good, wrong};
        if (bad[i] < s2) {
            e[0] = wrong;
            e[1] = good;
        }
        out = (struct hs_traces *)&in;
        if (hs_traces_edit(&in, e, 2, true, &out) != HS_EINVAL)
            fail_msg("offset %zu (case %zu) was taken", bad[i], i);
        assert_null(out);
        assert_int_equal(hs_traces_edit(&in, e, 2, false, &out), HS_EINVAL);
    }
    /* unsorted, or the same span twice */
    struct hs_span_edit unsorted[] = {{.offset = s2}, {.offset = s1}};
    assert_int_equal(hs_traces_edit(&in, unsorted, 2, true, &out), HS_EINVAL);
    struct hs_span_edit twice[] = {{.offset = s1}, {.offset = s1, .remove = true}};
    assert_int_equal(hs_traces_edit(&in, twice, 2, true, &out), HS_EINVAL);
    struct hs_span_edit no_attrs = {.offset = s1, .attrs_len = 3};
    assert_int_equal(hs_traces_edit(&in, &no_attrs, 1, true, &out), HS_EINVAL);
    /* an empty batch has no span to name */
    struct hs_traces empty = {.refs = 1};
    struct hs_span_edit zero = {.offset = 0};
    assert_int_equal(hs_traces_edit(&empty, &zero, 1, true, &out), HS_EINVAL);
    assert_int_equal(hs_traces_edit(&empty, NULL, 0, true, &out), 0);
    assert_null(out);
}

/* An empty span (no bytes at all) is still a span, even at the very end of its messages. */
static void test_empty_span_at_end(void **state)
{
    struct bytes none = {(uint8_t *)"", 0}; /* add() copies from its pointer even when empty */
    struct bytes inner = add((struct bytes){0}, 0x12, none); /* spans: {} */
    struct bytes b = add((struct bytes){0}, 0x0a, add((struct bytes){0}, 0x12, inner));
    struct seen in_seen, out_seen;
    struct hs_traces in = batch_of(b, &in_seen);
    assert_int_equal(in_seen.n, 1);
    assert_int_equal(in_seen.v[0].offset, b.len);
    struct hs_buf attrs = {0};
    assert_int_equal(hs_attr_int(&attrs, "i", 1), 0);
    struct hs_span_edit e = {.offset = b.len, .attrs = attrs.data, .attrs_len = attrs.len};
    struct hs_traces *out;
    assert_int_equal(hs_traces_edit(&in, &e, 1, false, &out), 0);
    rescan(out, &out_seen);
    assert_int_equal(out_seen.v[0].attributes, 1);
    hs_traces_unref(out);
    hs_buf_free(&attrs);
}

/* --- unique keys --------------------------------------------------------------------------- */

/* How many times `key` is among the span's attributes, and the last with it in *last. */
static int key_count(const Span *s, const char *key, const KV **last)
{
    int n = 0;
    for (size_t i = 0; i < s->n_attributes; i++)
        if (strcmp(s->attributes[i]->key, key) == 0)
            n++, *last = s->attributes[i];
    return n;
}

/* The encoded size of a span's attribute entry (tag, length, KeyValue). */
static size_t entry_size(const KV *k)
{
    size_t n = protobuf_c_message_get_packed_size(&k->base);
    return 1 + hs_varint_size(n) + n;
}

/* An attribute hotspan writes that the span already has is replaced, or kept in place when it
 * is byte-equal (otel-profiling-go's pyroscope.profile.id on a root span); it is never there
 * twice, in the wire bytes or in the JSON made from them. Attributes of events keep theirs. */
static void test_unique_keys(void **state)
{
    const char *id = "6465666768696a6b";
    Span *root = span("root", 1); /* pyroscope.profile.id as hotspan writes it, match twice */
    KV *rid = kv("pyroscope.profile.id", any_str(id));
    KV *old1 = kv("profile.match", any_str("old")), *old2 = kv("profile.match", any_int(3));
    root->n_attributes = 4;
    root->attributes = (KV **)list(4, rid, kv("http.route", any_str("/users")), old1, old2);
    root->n_events = 1;
    root->events =
        (Event **)list(1, event("e", 1, (KV **)list(1, kv("profile.match", any_str("ev")))));
    Span *child = span("child", 2); /* another value: hotspan's replaces it */
    child->n_attributes = 2;
    child->attributes = (KV **)list(2, kv("pyroscope.profile.id", any_str("0000000000000001")),
                                    kv("x", any_int(1)));
    Span *other = span("other", 3); /* not edited: untouched, its key included */
    other->n_attributes = 1;
    other->attributes = (KV **)list(1, kv("profile.match", any_str("old")));
    struct bytes b = pack(
        request("svc", 1,
                (ScopeSpans **)list(1, scope_spans("s", 3, (Span **)list(3, root, child, other)))));
    struct seen in_seen, out_seen;
    struct hs_traces in = batch_of(b, &in_seen);

    struct hs_buf attrs = {0};
    assert_int_equal(hs_attr_string(&attrs, "profile.match", "span", 4), 0);
    assert_int_equal(hs_attr_string(&attrs, "pyroscope.profile.id", id, 16), 0);
    assert_int_equal(hs_attr_string(&attrs, "profile.type", "process_cpu", 11), 0);
    struct hs_span_edit edits[] = {
        {.offset = in_seen.v[0].offset, .attrs = attrs.data, .attrs_len = attrs.len},
        {.offset = in_seen.v[1].offset, .attrs = attrs.data, .attrs_len = attrs.len},
    };
    struct hs_traces *out;
    assert_int_equal(hs_traces_edit(&in, edits, 2, true, &out), 0);
    rescan(out, &out_seen);
    Request *r = unpack(out);
    Span **sp = r->resource_spans[0]->scope_spans[0]->spans;

    /* root: the equal pyroscope.profile.id stays first, where the SDK put it, and hotspan's is
     * not appended; both profile.match are replaced by one with hotspan's value */
    const char *root_keys[] = {"pyroscope.profile.id", "http.route", "profile.match",
                               "profile.type"};
    assert_int_equal(sp[0]->n_attributes, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(sp[0]->attributes[i]->key, root_keys[i]);
    assert_str_kv(sp[0]->attributes[0], "pyroscope.profile.id", id);
    assert_str_kv(sp[0]->attributes[2], "profile.match", "span");
    assert_int_equal(out_seen.v[0].len, in_seen.v[0].len - entry_size(old1) - entry_size(old2) +
                                            attrs.len - entry_size(rid));
    assert_int_equal(sp[0]->n_events, 1);
    assert_str_kv(sp[0]->events[0]->attributes[0], "profile.match", "ev");
    /* child: hotspan's pyroscope.profile.id replaces the other one */
    const KV *last = NULL;
    assert_int_equal(key_count(sp[1], "pyroscope.profile.id", &last), 1);
    assert_str_kv(last, "pyroscope.profile.id", id);
    assert_int_equal(key_count(sp[1], "profile.match", &last), 1);
    assert_int_equal(key_count(sp[1], "x", &last), 1);
    assert_int_equal(sp[1]->n_attributes, 4);
    /* other: byte for byte as it came */
    assert_true(view_bytes_equal(b.p, &in_seen.v[2], out->data, &out_seen.v[2]));

    /* the JSON made from the edited batch: pyroscope.profile.id once per edited span, and
     * profile.match once per span plus the event's */
    struct hs_buf json = {0};
    assert_int_equal(hs_otlp_wire_to_json(out->data, out->len, &json), 0);
    hs_buf_append(&json, "", 1);
    int ids = 0, matches = 0;
    for (const char *q = (const char *)json.data;
         (q = strstr(q, "\"key\":\"pyroscope.profile.id\"")); q++)
        ids++;
    for (const char *q = (const char *)json.data; (q = strstr(q, "\"key\":\"profile.match\"")); q++)
        matches++;
    assert_int_equal(ids, 2);
    assert_int_equal(matches, 4);
    hs_buf_free(&json);
    hs_traces_unref(out);
    hs_buf_free(&attrs);

    /* more attributes than the edit keeps on the stack */
    Span *many = span("many", 4);
    many->n_attributes = 2;
    many->attributes = (KV **)list(2, kv("k7", any_str("old")), kv("keep", any_int(1)));
    b = one_span(many);
    in = batch_of(b, &in_seen);
    for (int i = 0; i < 30; i++) {
        char key[8];
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(hs_attr_string(&attrs, key, "new", 3), 0);
    }
    struct hs_span_edit e = {
        .offset = in_seen.v[0].offset, .attrs = attrs.data, .attrs_len = attrs.len};
    assert_int_equal(hs_traces_edit(&in, &e, 1, true, &out), 0);
    Span *m = unpack(out)->resource_spans[0]->scope_spans[0]->spans[0];
    assert_int_equal(m->n_attributes, 31);
    assert_int_equal(key_count(m, "k7", &last), 1);
    assert_str_kv(last, "k7", "new");
    assert_int_equal(key_count(m, "keep", &last), 1);
    hs_traces_unref(out);
    hs_buf_free(&attrs);
}

/* --- lookups ------------------------------------------------------------------------------- */

static void test_attribute_lookups(void **state)
{
    Span *s = span("q", 1);
    KV *merged = kv("merged", any_str("gone")); /* a string merged with an empty value: none */
    inject(merged, 2, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x00", 1);
    s->n_attributes = 7;
    s->attributes = (KV **)list(7, kv("k", any_int(1)), kv("k", any_str("second")),
                                kv("s", any_str("one")), kv("s", any_str("two")),
                                kv("nested", any_nested()), merged, kv("e", any_str("")));
    struct bytes b = one_span(s);
    struct seen seen;
    batch_of(b, &seen);
    struct hs_str v;
    assert_false(hs_span_attr_str(b.p, &seen.v[0], "k", &v)); /* the first "k" is an int */
    assert_true(hs_span_attr_str(b.p, &seen.v[0], "s", &v));
    assert_true(v.len == 3 && memcmp(v.ptr, "one", 3) == 0);
    assert_false(hs_span_attr_str(b.p, &seen.v[0], "nested", &v));
    assert_false(hs_span_attr_str(b.p, &seen.v[0], "merged", &v));
    assert_false(hs_span_attr_str(b.p, &seen.v[0], "absent", &v));
    assert_false(hs_span_attr_str(b.p, &seen.v[0], "", &v));
    assert_true(hs_span_attr_str(b.p, &seen.v[0], "e", &v));
    assert_int_equal(v.len, 0);

    /* the resource's attributes are field 1 */
    assert_true(hs_attrs_find_str(seen.v[0].resource, 1, "host.name", &v));
    assert_true(v.len == 2 && memcmp(v.ptr, "h1", 2) == 0);
    assert_true(hs_attrs_find_str(seen.v[0].resource, 1, "service.name", &v));
    assert_true(v.len == 3 && memcmp(v.ptr, "svc", 3) == 0);
    assert_false(hs_attrs_find_str(seen.v[0].resource, 9, "host.name", &v));
    assert_false(hs_attrs_find_str((struct hs_str){0}, 1, "host.name", &v));
    /* broken bytes are not read past their end */
    static const char broken[] = {0x0a, 0x7f, 0x0a, 0x01};
    assert_false(hs_attrs_find_str((struct hs_str){broken, sizeof(broken)}, 1, "x", &v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_and_leave_out_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extract_from_two_resources, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resource_and_scope_after_spans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_length_prefix_grows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_offsets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_span_at_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unique_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attribute_lookups, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
