/* test_otlp_wire.c: the OTLP wire scanner against protobuf-c: every field type, fields out of
 * order, each kind of error with its exact path, the limits, and a differential loop that
 * corrupts valid requests byte by byte and checks both sides agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"
#include "core/errors.h"
#include "pdata/otlp_wire.h"
#include "tests/unit/otlp_build.h"
#include "tests/unit/otlp_wire_ref.h"

/* --- scanning ------------------------------------------------------------------------------ */

struct seen {
    int n;
    struct hs_span_view v[16];
};

static int record(void *ud, const struct hs_span_view *v)
{
    struct seen *s = ud;
    assert_true(s->n < 16);
    s->v[s->n++] = *v;
    return 0;
}

static struct hs_otlp_scan res;

static int scan(struct bytes b, const struct hs_otlp_limits *lim, struct seen *seen)
{
    return hs_otlp_traces_scan(b.p, b.len, lim, seen ? record : NULL, seen, &res);
}

static bool pbc_accepts(struct bytes b)
{
    return ref_check(b.p, b.len, 32).verdict != REF_REJECT_PBC;
}

/* Expects the scan to fail with `rc` and exactly this message. */
static void expect_error(struct bytes b, const struct hs_otlp_limits *lim, int rc, const char *msg)
{
    assert_int_equal(scan(b, lim, NULL), rc);
    assert_string_equal(res.err, msg);
    assert_true(res.err_offset <= b.len);
}

static bool str_is(struct hs_str s, const void *p, size_t n)
{
    return s.len == n && (n == 0 || memcmp(s.ptr, p, n) == 0);
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

/* --- a request with every field ------------------------------------------------------------ */

static void test_every_field(void **state)
{
    Span *full;
    struct bytes b = pack(full_request(&full));
    struct seen seen = {0};
    assert_int_equal(scan(b, NULL, &seen), 0);
    assert_int_equal(res.resource_spans, 1);
    assert_int_equal(res.scope_spans, 2);
    assert_int_equal(res.spans, 5);
    assert_int_equal(seen.n, 5);
    assert_int_equal(ref_check(b.p, b.len, 32).verdict, REF_ACCEPT);

    const struct hs_span_view *v = &seen.v[0];
    assert_true(str_is(v->trace_id, full->trace_id.data, 16));
    assert_true(str_is(v->span_id, full->span_id.data, 8));
    assert_true(str_is(v->parent_span_id, full->parent_span_id.data, 8));
    assert_true(str_is(v->name, "GET /api/v1/users/{id}", 22));
    assert_true(str_is(v->service_name, "checkout", 8));
    assert_true(str_is(v->scope_name, "scope-a", 7));
    assert_int_equal(v->kind, 2);
    assert_int_equal(v->status_code, 2);
    assert_int_equal(v->attributes, 4);
    assert_int_equal(v->events, 2);
    assert_int_equal(v->links, 1);
    assert_int_equal(v->start_ns, full->start_time_unix_nano);
    assert_int_equal(v->end_ns, full->end_time_unix_nano);
    struct bytes one = pack(full); /* the view's range is exactly the span's own encoding */
    assert_int_equal(v->len, one.len);
    assert_memory_equal(b.p + v->offset, one.p, one.len);

    const char *names[] = {"b", "c", "d", "e"};
    for (int i = 1; i < 5; i++) { /* the plain spans: no parent, no status, no children */
        v = &seen.v[i];
        assert_true(str_is(v->name, names[i - 1], 1));
        assert_true(str_is(v->scope_name, i < 2 ? "scope-a" : "scope-b", 7));
        assert_true(str_is(v->service_name, "checkout", 8));
        assert_int_equal(v->parent_span_id.len, 0);
        assert_int_equal(v->status_code + v->attributes + v->events + v->links, 0);
        assert_int_equal(v->trace_id.len, 16);
        assert_int_equal((uint8_t)v->trace_id.ptr[0], i + 1);
    }
}

static void test_resource_and_scope_after_spans(void **state)
{
    Opentelemetry__Proto__Resource__V1__Resource r1, r2;
    opentelemetry__proto__resource__v1__resource__init(&r1);
    opentelemetry__proto__resource__v1__resource__init(&r2);
    r1.n_attributes = 1; /* the resource given twice: merged, so service.name is in the second */
    r1.attributes = (KV **)list(1, kv("host.name", any_str("h")));
    r2.n_attributes = 2;
    r2.attributes = (KV **)list(2, kv("service.name", any_str("late")),
                                kv("service.name", any_str("ignored: the first one counts")));
    ScopeSpans *ss = scope_spans(NULL, 1, (Span **)list(1, span("s", 1)));
    Opentelemetry__Proto__Common__V1__InstrumentationScope scope;
    opentelemetry__proto__common__v1__instrumentation_scope__init(&scope);
    scope.name = "after";
    struct bytes ssb = add(pack(ss), 0x0a, pack(&scope)); /* scope after the spans */
    struct bytes rs = add((struct bytes){0}, 0x0a, pack(&r1));
    rs = add(add(rs, 0x12, ssb), 0x0a, pack(&r2)); /* resource, scope_spans, resource again */
    struct bytes req = add((struct bytes){0}, 0x0a, rs);

    struct seen seen = {0};
    assert_int_equal(scan(req, NULL, &seen), 0);
    assert_int_equal(seen.n, 1);
    assert_true(str_is(seen.v[0].service_name, "late", 4));
    assert_true(str_is(seen.v[0].scope_name, "after", 5));
    assert_true(pbc_accepts(req));

    r2.attributes[0] = kv("service.name", any_int(7)); /* not a string: no service name */
    rs = add(add((struct bytes){0}, 0x12, ssb), 0x0a, pack(&r2));
    seen.n = 0;
    assert_int_equal(scan(add((struct bytes){0}, 0x0a, rs), NULL, &seen), 0);
    assert_int_equal(seen.v[0].service_name.len, 0);
}

static void test_truncated_everywhere(void **state)
{
    Span *full;
    struct bytes b = pack(full_request(&full));
    assert_int_equal(scan((struct bytes){b.p, 0}, NULL, NULL), 0); /* empty: valid, no spans */
    for (size_t k = 1; k < b.len; k++) {
        struct bytes t = {b.p, k};
        if (scan(t, NULL, NULL) != HS_EINVAL || res.err[0] == '\0')
            fail_msg("prefix of %zu bytes of %zu: scanner did not reject it", k, b.len);
        if (pbc_accepts(t))
            fail_msg("prefix of %zu bytes: protobuf-c accepts it", k);
    }
    /* two requests back to back: a prefix ending between them is a valid request */
    size_t one = b.len;
    struct bytes two = {zalloc(2 * one), 2 * one};
    memcpy(two.p, b.p, one);
    memcpy(two.p + one, b.p, one);
    for (size_t k = one - 1; k <= one + 1; k++) {
        int rc = scan((struct bytes){two.p, k}, NULL, NULL);
        assert_int_equal(rc, k == one ? 0 : HS_EINVAL);
        assert_int_equal(pbc_accepts((struct bytes){two.p, k}), k == one);
    }
    assert_int_equal(scan(two, NULL, NULL), 0);
    assert_int_equal(res.spans, 10);
}

/* --- errors, each with its path -------------------------------------------------------------- */

static void test_wrong_wire_type(void **state)
{
    static const struct {
        uint32_t num;
        unsigned wt;
        const char *data;
        size_t len;
        const char *msg;
    } cases[] = {
        {5, PROTOBUF_C_WIRE_TYPE_VARINT, "\x01", 1, "name: wire type 0 (VARINT), want 2 (LEN)"},
        {6, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x00", 1,
         "kind: wire type 2 (LEN), want 0 (VARINT)"},
        {7, PROTOBUF_C_WIRE_TYPE_VARINT, "\x01", 1,
         "start_time_unix_nano: wire type 0 (VARINT), want 1 (I64)"},
        {16, PROTOBUF_C_WIRE_TYPE_64BIT, "12345678", 8, "flags: wire type 1 (I64), want 5 (I32)"},
        {9, PROTOBUF_C_WIRE_TYPE_32BIT, "1234", 4, "attributes: wire type 5 (I32), want 2 (LEN)"},
        {15, PROTOBUF_C_WIRE_TYPE_VARINT, "\x00", 1, "status: wire type 0 (VARINT), want 2 (LEN)"},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(cases); i++) {
        Span *s = span("x", 1);
        inject(s, cases[i].num, cases[i].wt, cases[i].data, cases[i].len);
        struct bytes b = one_span(s);
        char want[200];
        snprintf(want, sizeof(want), "resource_spans[0].scope_spans[0].spans[0].%s", cases[i].msg);
        expect_error(b, NULL, HS_EINVAL, want);
        assert_false(pbc_accepts(b));
    }
    /* deeper: an attribute's key given as a varint */
    Span *s = span("x", 1);
    KV *k = kv("k", any_int(1));
    inject(k, 1, PROTOBUF_C_WIRE_TYPE_VARINT, "\x05", 1);
    s->n_attributes = 1;
    s->attributes = (KV **)list(1, k);
    struct bytes b = one_span(s);
    expect_error(b, NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[0].spans[0].attributes[0].key: wire type 0 "
                 "(VARINT), want 2 (LEN)");
    assert_false(pbc_accepts(b));
    assert_int_equal(b.p[res.err_offset], 0x08); /* the offset points at the bad tag */
    static const uint8_t top[] = {0x08, 0x01};
    expect_error((struct bytes){(uint8_t *)top, 2}, NULL, HS_EINVAL,
                 "resource_spans: wire type 0 (VARINT), want 2 (LEN)");
}

static void test_bad_id_lengths(void **state)
{
    Span *spans[5];
    for (int i = 0; i < 5; i++)
        spans[i] = span("s", (uint8_t)i);
    spans[4]->trace_id = id(7, 9);
    Request *r = request("svc", 2,
                         (ScopeSpans **)list(2, scope_spans("a", 1, (Span **)list(1, span("x", 1))),
                                             scope_spans("b", 5, spans)));
    struct bytes b = pack(r);
    expect_error(b, NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[1].spans[4].trace_id: length 7, want 16");
    assert_int_equal(b.p[res.err_offset], 0x0a);
    assert_int_equal(b.p[res.err_offset + 1], 7);
    assert_true(pbc_accepts(b)); /* a check beyond protobuf-c */
    assert_int_equal(ref_check(b.p, b.len, 32).verdict, REF_REJECT_RULES);

    spans[4]->trace_id = id(16, 9);
    spans[4]->span_id = id(3, 9);
    expect_error(pack(r), NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[1].spans[4].span_id: length 3, want 8");
    spans[4]->span_id = id(0, 0); /* empty ids are allowed */
    spans[4]->parent_span_id = id(9, 9);
    expect_error(pack(r), NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[1].spans[4].parent_span_id: length 9, want 8");
    spans[4]->parent_span_id = id(8, 9);
    assert_int_equal(scan(pack(r), NULL, NULL), 0);

    Link *l = zalloc(sizeof(*l));
    opentelemetry__proto__trace__v1__span__link__init(l);
    l->trace_id = id(15, 1);
    spans[2]->n_links = 1;
    spans[2]->links = (Link **)list(1, l);
    expect_error(pack(r), NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[1].spans[2].links[0].trace_id: length 15, want 16");

    /* a scalar given twice: the last one counts, for protobuf-c and for us */
    Span *s = span("x", 1);
    s->trace_id = id(7, 1);
    inject(s, 1, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
           "\x10"
           "0123456789abcdef",
           17);
    struct seen seen = {0};
    assert_int_equal(scan(one_span(s), NULL, &seen), 0);
    assert_true(str_is(seen.v[0].trace_id, "0123456789abcdef", 16));
    s = span("x", 1);
    inject(s, 1, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
           "\x02"
           "01",
           3);
    expect_error(one_span(s), NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[0].spans[0].trace_id: length 2, want 16");
}

static void test_bad_varints_and_lengths(void **state)
{
    Span *s = span("x", 1);
    inject(s, 10, PROTOBUF_C_WIRE_TYPE_VARINT, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x80\x01", 11);
    struct bytes b = one_span(s);
    expect_error(b, NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[0].spans[0].dropped_attributes_count: varint "
                 "longer than 10 bytes");
    assert_false(pbc_accepts(b));
    s = span("x", 1); /* ten bytes, the last with more than the 64th bit: both take it */
    inject(s, 10, PROTOBUF_C_WIRE_TYPE_VARINT, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
    b = one_span(s);
    assert_int_equal(scan(b, NULL, NULL), 0);
    assert_true(pbc_accepts(b));

    s = span("x", 1); /* an attribute whose key runs past the end of the attribute */
    inject(s, 9, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
           "\x05\x0a\x32"
           "abc",
           6);
    b = one_span(s);
    expect_error(b, NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[0].spans[0].attributes[0].key: length 50 runs "
                 "past the end of its message (3 left)");
    assert_false(pbc_accepts(b));

    /* an attribute of 138 bytes whose value's length is two bytes: 0x85 0x0a is 1285, past the
     * end, though 0x85 alone would be the 133 bytes that follow */
    uint8_t attr[140] = {0x8a, 0x01, 0x0a, 0x01, 'k', 0x12, 0x85, 0x0a, 0x83};
    s = span("x", 1);
    inject(s, 9, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, attr, sizeof(attr));
    b = one_span(s);
    expect_error(b, NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[0].spans[0].attributes[0].value: length 1285 runs "
                 "past the end of its message (132 left)");
    assert_false(pbc_accepts(b));

    static const uint8_t past[] = {0x0a, 0x10, 0x00};
    expect_error((struct bytes){(uint8_t *)past, 3}, NULL, HS_EINVAL,
                 "resource_spans: length 16 runs past the end of its message (1 left)");
    static const uint8_t longlen[] = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    expect_error((struct bytes){(uint8_t *)longlen, 7}, NULL, HS_EINVAL,
                 "resource_spans: length longer than 5 bytes");
    assert_false(pbc_accepts((struct bytes){(uint8_t *)longlen, 7}));
    static const uint8_t cut[] = {0x0a, 0x03, 0x12, 0x01, 0x12}; /* spans' length is missing */
    expect_error((struct bytes){(uint8_t *)cut, 5}, NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[0].spans: length runs past the end of its "
                 "message");
    static const uint8_t longtag[] = {0x8a, 0x80, 0x80, 0x80, 0x80, 0x00};
    expect_error((struct bytes){(uint8_t *)longtag, 6}, NULL, HS_EINVAL,
                 "request: tag longer than 5 bytes");
    assert_false(pbc_accepts((struct bytes){(uint8_t *)longtag, 6}));
}

static void test_wire_types_and_field_numbers(void **state)
{
    static const struct {
        uint8_t b[6];
        size_t len;
        bool pbc; /* what protobuf-c 1.4 says */
        const char *msg;
    } cases[] = {
        {{0xa3, 0x01, 0xa4, 0x01}, 4, false, "field 20: wire type 3 (SGROUP) is not supported"},
        {{0xa4, 0x01}, 2, false, "field 20: wire type 4 (EGROUP) is not supported"},
        {{0xa6, 0x01, 0x00}, 3, false, "field 20: wire type 6 (invalid) is not supported"},
        {{0xa7, 0x01, 0x00}, 3, false, "field 20: wire type 7 (invalid) is not supported"},
        {{0x02, 0x00}, 2, false, "request: field number 0 is invalid"},
        /* protobuf-c only refuses field 0 in a one-byte tag; Go decoders refuse it always */
        {{0x80, 0x00, 0x00}, 3, true, "request: field number 0 is invalid"},
        {{0xf8, 0xff, 0xff, 0xff, 0x7f, 0x00},
         6,
         true,
         "request: field number 4294967295 is over the maximum 536870911"},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(cases); i++) {
        struct bytes b = {(uint8_t *)cases[i].b, cases[i].len};
        expect_error(b, NULL, HS_EINVAL, cases[i].msg);
        assert_int_equal(pbc_accepts(b), cases[i].pbc);
    }
    static const uint8_t unknown_top[] = {0xa0, 0x01, 0x05, 0xad, 0x01, 1, 2, 3, 4};
    assert_int_equal(scan((struct bytes){(uint8_t *)unknown_top, 9}, NULL, NULL), 0);

    /* protobuf-c takes a bool of any wire type; gogo-protobuf (Tempo) refuses it, so do we */
    Any *v = any(0);
    inject(v, 2, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x01\x01", 2);
    Span *s = span("x", 1);
    s->n_attributes = 1;
    s->attributes = (KV **)list(1, kv("b", v));
    struct bytes b = one_span(s);
    expect_error(b, NULL, HS_EINVAL,
                 "resource_spans[0].scope_spans[0].spans[0].attributes[0].value.bool_value: wire "
                 "type 2 (LEN), want 0 (VARINT)");
    assert_int_equal(ref_check(b.p, b.len, 32).verdict, REF_REJECT_RULES);
}

/* KeyValue.value given more than once: protobuf-c 1.4 merges the AnyValues and fails in some
 * cases (see merge_value() in otlp_wire.c); we must fail in the same ones. */
static void test_value_given_twice(void **state)
{
    static const struct {
        bool first_empty;
        struct {
            const char *v;
            size_t n;
        } extra[3]; /* AnyValue payloads appended after the first value */
        bool ok;
    } cases[] = {
        {true, {{"", 0}}, false},                  /* empty, empty */
        {false, {{"", 0}, {"", 0}}, false},        /* string, empty (now empty), empty */
        {true, {{"\x0a\x01x", 3}, {"", 0}}, true}, /* empty, string, empty */
        {false, {{"\x18\x05", 2}, {"", 0}}, true}, /* string, int, empty: int stays */
        {false, {{"\x3a\x00", 2}, {"", 0}}, true}, /* string, empty bytes, empty: now empty */
        {false, {{"\x3a\x00", 2}, {"", 0}, {"", 0}}, false}, /* ... and empty again */
        {false, {{"\x3a\x01z", 3}, {"", 0}}, true},          /* string, bytes, empty */
        {true, {{"\x48\x01", 2}}, false},                    /* only unknown fields: empty */
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(cases); i++) {
        KV *k = kv("k", cases[i].first_empty ? any(0) : any_str("s"));
        for (int j = 0; j < 3 && cases[i].extra[j].v; j++) {
            uint8_t buf[8] = {(uint8_t)cases[i].extra[j].n};
            memcpy(buf + 1, cases[i].extra[j].v, cases[i].extra[j].n);
            inject(k, 2, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, buf, cases[i].extra[j].n + 1);
        }
        Span *s = span("x", 1);
        s->n_attributes = 1;
        s->attributes = (KV **)list(1, k);
        struct bytes b = one_span(s);
        if (!cases[i].ok)
            expect_error(b, NULL, HS_EINVAL,
                         "resource_spans[0].scope_spans[0].spans[0].attributes[0].value: given "
                         "more than once without a value to merge");
        else if (scan(b, NULL, NULL) != 0)
            fail_msg("case %zu: %s", i, res.err);
        assert_int_equal(pbc_accepts(b), cases[i].ok);
    }
}

/* --- limits ------------------------------------------------------------------------------- */

static void test_nesting_limit(void **state)
{
    assert_int_equal(scan(with_value(nested(32)), NULL, NULL), 0);
    struct bytes b = with_value(nested(33));
    assert_int_equal(scan(b, NULL, NULL), HS_E2BIG);
    assert_true(pbc_accepts(b)); /* protobuf-c has no limit */
    assert_int_equal(ref_check(b.p, b.len, 32).verdict, REF_REJECT_DEPTH);
    /* too long to print whole: the middle of the path goes, both ends and the reason stay */
    assert_int_equal(strncmp(res.err, "resource_spans[0].scope_spans[0].spans[0].attr", 46), 0);
    assert_non_null(strstr(res.err, "..."));
    const char *tail = "values[0]: nested deeper than 32 (limit max_value_depth)";
    assert_string_equal(res.err + strlen(res.err) - strlen(tail), tail);
    assert_true(strlen(res.err) < sizeof(res.err));

    struct hs_otlp_limits lim = {.max_value_depth = 3};
    assert_int_equal(scan(with_value(nested(3)), &lim, NULL), 0);
    expect_error(with_value(nested(4)), &lim, HS_E2BIG,
                 "resource_spans[0].scope_spans[0].spans[0].attributes[0].value.array_value."
                 "values[0].array_value.values[0].array_value.values[0]: nested deeper than 3 "
                 "(limit max_value_depth)");
    Any *kvl = any(OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE);
    kvl->kvlist_value = zalloc(sizeof(*kvl->kvlist_value));
    opentelemetry__proto__common__v1__key_value_list__init(kvl->kvlist_value);
    kvl->kvlist_value->n_values = 1;
    kvl->kvlist_value->values = (KV **)list(1, kv("in", nested(3)));
    expect_error(with_value(kvl), &lim, HS_E2BIG,
                 "resource_spans[0].scope_spans[0].spans[0].attributes[0].value.kvlist_value."
                 "values[0].value.array_value.values[0].array_value.values[0]: nested deeper "
                 "than 3 (limit max_value_depth)");
}

static void test_span_and_attribute_limits(void **state)
{
    Request *r = request(
        "svc", 2,
        (ScopeSpans **)list(2, scope_spans("a", 2, (Span **)list(2, span("1", 1), span("2", 2))),
                            scope_spans("b", 2, (Span **)list(2, span("3", 3), span("4", 4)))));
    struct bytes b = pack(r);
    struct hs_otlp_limits lim = {.max_spans = 4};
    assert_int_equal(scan(b, &lim, NULL), 0);
    lim.max_spans = 3;
    expect_error(b, &lim, HS_E2BIG,
                 "resource_spans[0].scope_spans[1].spans: more than 3 in one request (limit "
                 "max_spans)");

    /* resource and scope spans count against it too, summed over the request: each should
     * hold spans, and a body of empty ones holds nothing */
    Request *empty = request(
        "svc", 2, (ScopeSpans **)list(2, scope_spans("a", 0, NULL), scope_spans("b", 0, NULL)));
    lim.max_spans = 1;
    expect_error(pack(empty), &lim, HS_E2BIG,
                 "resource_spans[0].scope_spans: more than 1 in one request (limit max_spans)");
    lim.max_spans = 1000;
    empty->n_resource_spans = 1001;
    empty->resource_spans = zalloc(1001 * sizeof(ResourceSpans *));
    for (int i = 0; i < 1001; i++)
        empty->resource_spans[i] = request("svc", 0, NULL)->resource_spans[0];
    expect_error(pack(empty), &lim, HS_E2BIG,
                 "resource_spans: more than 1000 in one request (limit max_spans)");
    empty->n_resource_spans = 1000;
    assert_int_equal(scan(pack(empty), &lim, NULL), 0);

    lim = (struct hs_otlp_limits){.max_attributes = 2};
    assert_int_equal(scan(b, &lim, NULL), 0); /* the resource has 2 attributes */
    Span *s = r->resource_spans[0]->scope_spans[1]->spans[1];
    s->n_attributes = 3;
    s->attributes = (KV **)list(3, kv("a", any_int(1)), kv("b", any_int(2)), kv("c", any(0)));
    expect_error(pack(r), &lim, HS_E2BIG,
                 "resource_spans[0].scope_spans[1].spans[1].attributes: more than 2 (limit "
                 "max_attributes)");
    s->n_attributes = 2;
    Opentelemetry__Proto__Resource__V1__Resource *res_ = r->resource_spans[0]->resource;
    res_->n_attributes = 3;
    res_->attributes = (KV **)list(3, kv("a", any_int(1)), kv("b", any_int(2)), kv("c", any(0)));
    expect_error(pack(r), &lim, HS_E2BIG,
                 "resource_spans[0].resource.attributes: more than 2 (limit max_attributes)");
}

static int stop_at_second(void *ud, const struct hs_span_view *v)
{
    int *calls = ud;
    return ++*calls == 2 ? 7 : 0;
}

static void test_visitor_stops(void **state)
{
    Span *full;
    struct bytes b = pack(full_request(&full));
    int calls = 0;
    assert_int_equal(hs_otlp_traces_scan(b.p, b.len, NULL, stop_at_second, &calls, &res), 7);
    assert_int_equal(calls, 2);
    assert_string_equal(res.err, ""); /* not an error of the request */
}

/* --- differential ------------------------------------------------------------------------- */

struct tally {
    int accepted, rejected, rules; /* rules: protobuf-c took it, our extra rules did not */
};

/* The scanner must agree with the reference: protobuf-c's unpack plus the rules we add on purpose
 * (ids of length 0/16 and 0/8, bools as varints, field numbers 1..2^29-1, nesting up to 32),
 * which ref_check applies by walking the bytes again with protobuf-c's descriptors. */
static void check_one(const uint8_t *p, size_t len, struct tally *t, const char *what, size_t at)
{
    struct ref_result r = ref_check(p, len, 32);
    int rc = hs_otlp_traces_scan(p, len, NULL, NULL, NULL, &res);
    if ((rc == 0) != (r.verdict == REF_ACCEPT))
        fail_msg("%s at %zu: scanner %s (%s), reference verdict %d", what, at,
                 rc ? "rejects" : "accepts", res.err, r.verdict);
    if (rc == 0) {
        assert_int_equal(res.spans, r.spans);
        assert_int_equal(res.scope_spans, r.scope_spans);
        assert_int_equal(res.resource_spans, r.resource_spans);
        t->accepted++;
    } else {
        assert_true(res.err[0] != '\0' && res.err_offset <= len);
        if (r.verdict == REF_REJECT_DEPTH)
            assert_int_equal(rc, HS_E2BIG);
        t->rules += r.verdict == REF_REJECT_RULES;
        t->rejected++;
    }
}

static void differential(struct bytes b, struct tally *t)
{
    uint8_t *m = malloc(b.len);
    assert_non_null(m);
    for (size_t i = 0; i < b.len; i++) {
        uint8_t o = b.p[i];
        const uint8_t vals[] = {0x00,
                                0x01,
                                0x7f,
                                0x80,
                                0xff,
                                o ^ 0x01,
                                o ^ 0x02,
                                o ^ 0x08,
                                o ^ 0x80,
                                (uint8_t)(o + 1),
                                (uint8_t)(o - 1)};
        for (size_t j = 0; j < sizeof(vals); j++) {
            if (vals[j] == o)
                continue;
            memcpy(m, b.p, b.len);
            m[i] = vals[j];
            check_one(m, b.len, t, "byte set", i);
        }
        memcpy(m, b.p, i); /* and with byte i deleted */
        memcpy(m + i, b.p + i + 1, b.len - i - 1);
        check_one(m, b.len - 1, t, "byte deleted", i);
    }
    free(m);
}

/* HS_WRITE_SEEDS=DIR: also writes the inputs as the fuzzer's seeds (tests/fuzz/corpus/otlp_wire
 * was made so). */
static void write_seeds(const struct bytes *in, size_t n)
{
    const char *dir = getenv("HS_WRITE_SEEDS");
    for (size_t i = 0; dir && i < n; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/seed-%zu.bin", dir, i);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(in[i].p, 1, in[i].len, f), in[i].len);
        fclose(f);
    }
}

static void test_differential(void **state)
{
    Span *full;
    KV *twice = kv("twice", any_str("s"));
    inject(twice, 2, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x02\x18\x01", 3);
    inject(twice, 2, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x00", 1);
    Span *s = span("x", 1);
    s->parent_span_id = id(8, 3);
    s->n_attributes = 2;
    s->attributes = (KV **)list(2, twice, kv("b", any_str("")));
    /* long keys and values: lengths of two bytes at every level */
    char *key = zalloc(131), *val = zalloc(301);
    memset(key, 'k', 130);
    memset(val, 'v', 300);
    Span *l = span("long", 2);
    l->n_attributes = 2;
    l->attributes = (KV **)list(2, kv(key, any_str(val)), kv("n", any_int(-1)));
    struct bytes inputs[] = {pack(full_request(&full)), one_span(s), with_value(nested(31)),
                             one_span(l)};
    write_seeds(inputs, HS_ARRAY_SIZE(inputs));
    struct tally t = {0};
    for (size_t i = 0; i < HS_ARRAY_SIZE(inputs); i++) {
        check_one(inputs[i].p, inputs[i].len, &t, "unchanged", 0);
        differential(inputs[i], &t);
    }
    /* the loop exercised both answers, and the rules beyond protobuf-c */
    assert_true(t.accepted > 500);
    assert_true(t.rejected > 5000);
    assert_true(t.rules > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_field, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resource_and_scope_after_spans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_wire_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_id_lengths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_varints_and_lengths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wire_types_and_field_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_given_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nesting_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_span_and_attribute_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_visitor_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_differential, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
