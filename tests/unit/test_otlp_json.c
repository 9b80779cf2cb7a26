/* test_otlp_json.c: OTLP/JSON to wire and back: the spec's example shape with every field
 * checked through protobuf-c, the lenient input forms, each error with its exact message, the
 * strict output form, wire -> JSON -> wire round trips, and invalid UTF-8 made safe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_wire.h"

typedef Opentelemetry__Proto__Common__V1__AnyValue Any;
typedef Opentelemetry__Proto__Common__V1__KeyValue KV;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Trace__V1__Span__Event Event;
typedef Opentelemetry__Proto__Trace__V1__Span__Link Link;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans ScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans ResourceSpans;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest Request;

#define REQ_DESC                                                                                   \
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor
#define ANY(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

static struct hs_arena *A;

static int setup(void **state)
{
    A = hs_arena_new(4096, 0);
    return A ? 0 : -1;
}

static int teardown(void **state)
{
    hs_arena_free(A);
    return 0;
}

/* JSON in the tests is written with ' for " so it stays readable; this swaps them back. */
static char *q(const char *s)
{
    char *out = hs_arena_strndup(A, s, strlen(s));
    for (char *p = out; *p; p++)
        if (*p == '\'')
            *p = '"';
    return out;
}

static Request *to_request(const char *json_q, struct hs_buf *wire)
{
    char err[256] = "";
    const char *json = q(json_q);
    int rc = hs_otlp_json_to_wire(json, strlen(json), NULL, wire, err, sizeof(err));
    if (rc)
        fail_msg("hs_otlp_json_to_wire: %d %s", rc, err);
    ProtobufCAllocator alloc = hs_arena_pb_allocator(A);
    Request *r = (Request *)protobuf_c_message_unpack(&REQ_DESC, &alloc, wire->len, wire->data);
    assert_non_null(r);
    return r;
}

static void assert_bytes(ProtobufCBinaryData b, const char *hex)
{
    char got[80] = "";
    for (size_t i = 0; i < b.len && i < 39; i++)
        sprintf(got + 2 * i, "%02x", b.data[i]);
    assert_string_equal(got, hex);
}

static const KV *attr(KV **kvs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(kvs[i]->key, key) == 0)
            return kvs[i];
    fail_msg("attribute %s missing", key);
    return NULL;
}

/* The shape of opentelemetry-proto's examples/trace.json, extended to every field. */
static const char *EXAMPLE =
    "{'resourceSpans': [{\n"
    "  'resource': {'attributes': [{'key': 'service.name',\n"
    "                               'value': {'stringValue': 'my.service'}}],\n"
    "               'droppedAttributesCount': 1},\n"
    "  'schemaUrl': 'https://opentelemetry.io/schemas/1.4.0',\n"
    "  'scopeSpans': [{\n"
    "    'scope': {'name': 'my.library', 'version': '1.0.0',\n"
    "              'attributes': [{'key': 'my.scope.attribute', 'value': {'stringValue': 'x'}}]},\n"
    "    'schemaUrl': 'https://opentelemetry.io/schemas/1.5.0',\n"
    "    'spans': [{\n"
    "      'traceId': '5B8EFFF798038103D269B633813FC60C',\n"
    "      'spanId': 'EEE19B7EC3C1B174',\n"
    "      'parentSpanId': 'eee19b7ec3c1b173',\n"
    "      'traceState': 'rojo=00f067aa0ba902b7',\n"
    "      'flags': 257,\n"
    "      'name': 'a server span',\n"
    "      'startTimeUnixNano': '1544712660000000000',\n"
    "      'endTimeUnixNano': '1544712661000000000',\n"
    "      'kind': 2,\n"
    "      'attributes': [\n"
    "        {'key': 's', 'value': {'stringValue': 'some value'}},\n"
    "        {'key': 'b', 'value': {'boolValue': true}},\n"
    "        {'key': 'i', 'value': {'intValue': '-42'}},\n"
    "        {'key': 'd', 'value': {'doubleValue': 2.5}},\n"
    "        {'key': 'a', 'value': {'arrayValue': {'values': [{'stringValue': 'x'},\n"
    "                                                         {'intValue': '0'}, {}]}}},\n"
    "        {'key': 'kv', 'value': {'kvlistValue': {'values': [\n"
    "            {'key': 'inner', 'value': {'boolValue': false}}]}}},\n"
    "        {'key': 'bytes', 'value': {'bytesValue': 'aGVsbG8='}},\n"
    "        {'key': 'empty', 'value': {}}],\n"
    "      'droppedAttributesCount': 3,\n"
    "      'events': [{'timeUnixNano': '1544712660500000000', 'name': 'ev',\n"
    "                  'attributes': [{'key': 'e', 'value': {'intValue': '7'}}],\n"
    "                  'droppedAttributesCount': 4}],\n"
    "      'droppedEventsCount': 5,\n"
    "      'links': [{'traceId': '0102030405060708090a0b0c0d0e0f10',\n"
    "                 'spanId': '1112131415161718', 'traceState': 'k=v',\n"
    "                 'attributes': [{'key': 'l', 'value': {'stringValue': 'y'}}],\n"
    "                 'droppedAttributesCount': 6, 'flags': 1}],\n"
    "      'droppedLinksCount': 7,\n"
    "      'status': {'code': 2, 'message': 'boom'}\n"
    "    }]\n"
    "  }]\n"
    "}]}\n";

static void check_span(const Span *s)
{
    assert_bytes(s->trace_id, "5b8efff798038103d269b633813fc60c");
    assert_bytes(s->span_id, "eee19b7ec3c1b174");
    assert_bytes(s->parent_span_id, "eee19b7ec3c1b173");
    assert_string_equal(s->trace_state, "rojo=00f067aa0ba902b7");
    assert_int_equal(s->flags, 257);
    assert_string_equal(s->name, "a server span");
    assert_int_equal(s->kind, OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER);
    assert_true(s->start_time_unix_nano == 1544712660000000000ull);
    assert_true(s->end_time_unix_nano == 1544712661000000000ull);
    assert_int_equal(s->n_attributes, 8);
    const KV *kv = attr(s->attributes, s->n_attributes, "s");
    assert_int_equal(kv->value->value_case, ANY(STRING_VALUE));
    assert_string_equal(kv->value->string_value, "some value");
    kv = attr(s->attributes, s->n_attributes, "b");
    assert_int_equal(kv->value->value_case, ANY(BOOL_VALUE));
    assert_true(kv->value->bool_value);
    kv = attr(s->attributes, s->n_attributes, "i");
    assert_int_equal(kv->value->value_case, ANY(INT_VALUE));
    assert_true(kv->value->int_value == -42);
    kv = attr(s->attributes, s->n_attributes, "d");
    assert_int_equal(kv->value->value_case, ANY(DOUBLE_VALUE));
    assert_true(kv->value->double_value == 2.5);
    kv = attr(s->attributes, s->n_attributes, "a");
    assert_int_equal(kv->value->value_case, ANY(ARRAY_VALUE));
    assert_int_equal(kv->value->array_value->n_values, 3);
    assert_string_equal(kv->value->array_value->values[0]->string_value, "x");
    assert_int_equal(kv->value->array_value->values[1]->value_case, ANY(INT_VALUE));
    assert_true(kv->value->array_value->values[1]->int_value == 0);
    assert_int_equal(kv->value->array_value->values[2]->value_case, ANY(_NOT_SET));
    kv = attr(s->attributes, s->n_attributes, "kv");
    assert_int_equal(kv->value->value_case, ANY(KVLIST_VALUE));
    assert_int_equal(kv->value->kvlist_value->n_values, 1);
    assert_string_equal(kv->value->kvlist_value->values[0]->key, "inner");
    assert_int_equal(kv->value->kvlist_value->values[0]->value->value_case, ANY(BOOL_VALUE));
    assert_false(kv->value->kvlist_value->values[0]->value->bool_value);
    kv = attr(s->attributes, s->n_attributes, "bytes");
    assert_int_equal(kv->value->value_case, ANY(BYTES_VALUE));
    assert_int_equal(kv->value->bytes_value.len, 5);
    assert_memory_equal(kv->value->bytes_value.data, "hello", 5);
    kv = attr(s->attributes, s->n_attributes, "empty");
    assert_non_null(kv->value);
    assert_int_equal(kv->value->value_case, ANY(_NOT_SET));
    assert_int_equal(s->dropped_attributes_count, 3);
}

static void check_span_children(const Span *s)
{
    assert_int_equal(s->n_events, 1);
    const Event *e = s->events[0];
    assert_true(e->time_unix_nano == 1544712660500000000ull);
    assert_string_equal(e->name, "ev");
    assert_int_equal(e->n_attributes, 1);
    assert_string_equal(e->attributes[0]->key, "e");
    assert_true(e->attributes[0]->value->int_value == 7);
    assert_int_equal(e->dropped_attributes_count, 4);
    assert_int_equal(s->dropped_events_count, 5);
    assert_int_equal(s->n_links, 1);
    const Link *l = s->links[0];
    assert_bytes(l->trace_id, "0102030405060708090a0b0c0d0e0f10");
    assert_bytes(l->span_id, "1112131415161718");
    assert_string_equal(l->trace_state, "k=v");
    assert_int_equal(l->n_attributes, 1);
    assert_string_equal(l->attributes[0]->value->string_value, "y");
    assert_int_equal(l->dropped_attributes_count, 6);
    assert_int_equal(l->flags, 1);
    assert_int_equal(s->dropped_links_count, 7);
    assert_non_null(s->status);
    assert_int_equal(s->status->code,
                     OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);
    assert_string_equal(s->status->message, "boom");
}

static void test_spec_example(void **state)
{
    struct hs_buf wire = {0};
    Request *r = to_request(EXAMPLE, &wire);
    assert_int_equal(r->n_resource_spans, 1);
    const ResourceSpans *rs = r->resource_spans[0];
    assert_string_equal(rs->schema_url, "https://opentelemetry.io/schemas/1.4.0");
    assert_non_null(rs->resource);
    assert_int_equal(rs->resource->n_attributes, 1);
    assert_string_equal(rs->resource->attributes[0]->key, "service.name");
    assert_string_equal(rs->resource->attributes[0]->value->string_value, "my.service");
    assert_int_equal(rs->resource->dropped_attributes_count, 1);
    assert_int_equal(rs->n_scope_spans, 1);
    const ScopeSpans *ss = rs->scope_spans[0];
    assert_string_equal(ss->schema_url, "https://opentelemetry.io/schemas/1.5.0");
    assert_string_equal(ss->scope->name, "my.library");
    assert_string_equal(ss->scope->version, "1.0.0");
    assert_int_equal(ss->scope->n_attributes, 1);
    assert_string_equal(ss->scope->attributes[0]->key, "my.scope.attribute");
    assert_int_equal(ss->n_spans, 1);
    check_span(ss->spans[0]);
    check_span_children(ss->spans[0]);
    hs_buf_free(&wire);
}

/* Lenient forms must give exactly the bytes of the strict form. */
static void assert_same_wire(const char *strict, const char *lenient)
{
    struct hs_buf a = {0}, b = {0};
    to_request(strict, &a);
    to_request(lenient, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    hs_buf_free(&a);
    hs_buf_free(&b);
}

static void test_lenient_forms(void **state)
{
    const char *strict =
        "{'resourceSpans':[{'scopeSpans':[{'spans':[{'traceId':'5b8efff798038103d269b633813fc60c',"
        "'spanId':'eee19b7ec3c1b174','name':'n','kind':3,'startTimeUnixNano':'1544712660000000000',"
        "'endTimeUnixNano':'1544712661000000000','droppedAttributesCount':2,"
        "'attributes':[{'key':'i','value':{'intValue':'9007199254740993'}},"
        "{'key':'b','value':{'bytesValue':'aGk='}}],"
        "'status':{'code':1}}]}],'schemaUrl':'u'}]}";
    /* snake_case keys, enum names, int64 as JSON numbers, uppercase hex, unpadded base64, an
     * unknown key, nulls as absent, a null array element */
    const char *lenient =
        "{'resource_spans':[{'scope_spans':[{'spans':["
        "{'trace_id':'5B8EFFF798038103D269B633813FC60C',"
        "'span_id':'EEE19B7EC3C1B174','name':'n','kind':'SPAN_KIND_CLIENT',"
        "'start_time_unix_nano':1544712660000000000,'endTimeUnixNano':1544712661000000000,"
        "'dropped_attributes_count':'2','parentSpanId':null,'futureField':{'x':[1,2]},"
        "'attributes':[{'key':'i','value':{'int_value':9007199254740993}},null,"
        "{'key':'b','value':{'bytes_value':'aGk'}}],"
        "'status':{'code':'STATUS_CODE_OK','message':null}}]}],'schema_url':'u'}]}";
    assert_same_wire(strict, lenient);

    /* keys in any order give the bytes of field number order, as protobuf-c packs them: here
     * every message's keys reversed, and a repeated field between two scalars */
    assert_same_wire(
        strict, "{'resourceSpans':[{'schemaUrl':'u','scopeSpans':[{'spans':[{"
                "'status':{'code':1},'attributes':[{'value':{'intValue':'9007199254740993'},"
                "'key':'i'},{'value':{'bytesValue':'aGk='},'key':'b'}],"
                "'droppedAttributesCount':2,'endTimeUnixNano':'1544712661000000000',"
                "'startTimeUnixNano':'1544712660000000000','kind':3,'name':'n',"
                "'spanId':'eee19b7ec3c1b174','traceId':'5b8efff798038103d269b633813fc60c'}]}]}]}");

    /* an empty parentSpanId is a root span's; integral reals are integers */
    assert_same_wire("{'resourceSpans':[{'scopeSpans':[{'spans':[{'name':'r','kind':1}]}]}]}",
                     "{'resourceSpans':[{'scopeSpans':[{'spans':[{'name':'r','parentSpanId':'',"
                     "'kind':1.0}]}]}]}");

    /* doubleValue: numbers, integers and the proto3 JSON strings */
    struct hs_buf w = {0};
    Request *r = to_request("{'resourceSpans':[{'resource':{'attributes':["
                            "{'key':'nan','value':{'doubleValue':'NaN'}},"
                            "{'key':'inf','value':{'doubleValue':'Infinity'}},"
                            "{'key':'ninf','value':{'doubleValue':'-Infinity'}},"
                            "{'key':'int','value':{'doubleValue':3}},"
                            "{'key':'str','value':{'doubleValue':'1.25'}}]}}]}",
                            &w);
    KV **kv = r->resource_spans[0]->resource->attributes;
    assert_true(isnan(kv[0]->value->double_value));
    assert_true(isinf(kv[1]->value->double_value) && kv[1]->value->double_value > 0);
    assert_true(isinf(kv[2]->value->double_value) && kv[2]->value->double_value < 0);
    assert_true(kv[3]->value->double_value == 3.0);
    assert_true(kv[4]->value->double_value == 1.25);
    hs_buf_free(&w);

    /* the same conversion for any request protobuf-c describes */
    struct hs_buf d1 = {0}, d2 = {0};
    const char *js = q(strict);
    char e[256];
    assert_int_equal(hs_otlp_json_to_wire_desc(&REQ_DESC, js, strlen(js), &d1, e, sizeof(e)), 0);
    to_request(strict, &d2);
    assert_int_equal(d1.len, d2.len);
    assert_memory_equal(d1.data, d2.data, d1.len);
    hs_buf_free(&d1);
    hs_buf_free(&d2);

    /* an empty request is valid and empty on the wire */
    r = to_request("{}", &w);
    assert_int_equal(r->n_resource_spans, 0);
    assert_int_equal(w.len, 0);
    hs_buf_free(&w);
}

static void assert_error(const char *json_q, const char *want)
{
    struct hs_buf out = {0};
    hs_buf_append(&out, "keep", 4);
    char err[256] = "";
    const char *json = q(json_q);
    int rc = hs_otlp_json_to_wire(json, strlen(json), NULL, &out, err, sizeof(err));
    assert_int_equal(rc, HS_EINVAL);
    assert_string_equal(err, want);
    assert_int_equal(out.len, 4); /* nothing appended on failure */
    hs_buf_free(&out);
}

#define SPAN_PREFIX "{'resourceSpans':[{'scopeSpans':[{'spans':[{'name':'a'},"

/* Bad ids, bytes and numbers: each message names the value's line, column and key path. */
static void test_value_errors(void **state)
{
    assert_error("{\n  'resourceSpans': [{'scopeSpans': [{'spans': [{}, {},\n"
                 "    {'name': 'x', 'traceId': 'abc'}]}]}]}",
                 "line 3 col 30: resourceSpans[0].scopeSpans[0].spans[2].traceId: "
                 "\"abc\" is not 32 hex digits");
    assert_error(SPAN_PREFIX "{'spanId':'eee19b7ec3c1b17g'}]}]}]}",
                 "line 1 col 67: resourceSpans[0].scopeSpans[0].spans[1].spanId: "
                 "\"eee19b7ec3c1b17g\" is not 16 hex digits");
    assert_error(SPAN_PREFIX "{'traceId':'(b8efff798038103d269b633813fc60c'}]}]}]}",
                 "line 1 col 68: resourceSpans[0].scopeSpans[0].spans[1].traceId: "
                 "\"(b8efff798038103d269b633813fc60c\" is not 32 hex digits");
    assert_error(SPAN_PREFIX "{'parent_span_id':'eee19b7ec3c1b1'}]}]}]}",
                 "line 1 col 75: resourceSpans[0].scopeSpans[0].spans[1].parent_span_id: "
                 "\"eee19b7ec3c1b1\" is not 16 hex digits");
    assert_error(SPAN_PREFIX "{'links':[{'traceId':'00'}]}]}]}]}",
                 "line 1 col 78: resourceSpans[0].scopeSpans[0].spans[1].links[0].traceId: "
                 "\"00\" is not 32 hex digits");
    assert_error("{'resourceSpans':[{'resource':{'attributes':[{'key':'k','value':"
                 "{'bytesValue':'a$=='}}]}}]}",
                 "line 1 col 79: resourceSpans[0].resource.attributes[0].value.bytesValue: "
                 "\"a$==\" is not base64");
    assert_error(SPAN_PREFIX "{'startTimeUnixNano':'12x'}]}]}]}",
                 "line 1 col 78: resourceSpans[0].scopeSpans[0].spans[1].startTimeUnixNano: "
                 "\"12x\" is not a 64-bit integer");
    assert_error(SPAN_PREFIX "{'endTimeUnixNano':'-5'}]}]}]}",
                 "line 1 col 76: resourceSpans[0].scopeSpans[0].spans[1].endTimeUnixNano: "
                 "-5 is out of range for uint64");
    assert_error(SPAN_PREFIX "{'droppedAttributesCount':4294967296}]}]}]}",
                 "line 1 col 83: resourceSpans[0].scopeSpans[0].spans[1]."
                 "droppedAttributesCount: 4294967296 is out of range for uint32");
    assert_error(SPAN_PREFIX "{'flags':1.5}]}]}]}",
                 "line 1 col 66: resourceSpans[0].scopeSpans[0].spans[1].flags: "
                 "1.5 is not an integer");
}

/* Wrong types and shapes. */
static void test_shape_errors(void **state)
{
    assert_error(SPAN_PREFIX "{'kind':'SERVER'}]}]}]}",
                 "line 1 col 65: resourceSpans[0].scopeSpans[0].spans[1].kind: "
                 "\"SERVER\" is not a SpanKind");
    assert_error(SPAN_PREFIX "{'status':{'code':'STATUS_CODE_BAD'}}]}]}]}",
                 "line 1 col 75: resourceSpans[0].scopeSpans[0].spans[1].status.code: "
                 "\"STATUS_CODE_BAD\" is not a StatusCode");
    assert_error(SPAN_PREFIX "{'name':7}]}]}]}",
                 "line 1 col 65: resourceSpans[0].scopeSpans[0].spans[1].name: "
                 "7 is not a string");
    assert_error("{'resourceSpans':[{'scopeSpans':{'spans':[]}}]}",
                 "line 1 col 33: resourceSpans[0].scopeSpans: an object is not an array");
    assert_error("{'resourceSpans':[{'resource':[]}]}",
                 "line 1 col 31: resourceSpans[0].resource: an array is not an object");
    assert_error("{'resourceSpans':[{'resource':{'attributes':[{'key':'k','value':"
                 "{'stringValue':'s','intValue':'1'}}]}}]}",
                 "line 1 col 95: resourceSpans[0].resource.attributes[0].value.intValue: "
                 "only one of its group may be set (also stringValue)");
    assert_error(SPAN_PREFIX "{'traceId':'5b8efff798038103d269b633813fc60c',"
                             "'trace_id':'5b8efff798038103d269b633813fc60c'}]}]}]}",
                 "line 1 col 114: resourceSpans[0].scopeSpans[0].spans[1].trace_id: "
                 "given twice (also as traceId)");
    assert_error("{'resourceSpans':[{'resource':{'attributes':[{'key':'k','value':"
                 "{'boolValue':'true'}}]}}]}",
                 "line 1 col 78: resourceSpans[0].resource.attributes[0].value.boolValue: "
                 "\"true\" is not true or false");
    assert_error("{'resourceSpans':[{'resource':{'attributes':[{'key':'k','value':"
                 "{'doubleValue':'fast'}}]}}]}",
                 "line 1 col 80: resourceSpans[0].resource.attributes[0].value.doubleValue: "
                 "\"fast\" is not a number");
    assert_error("  [1]", "line 1 col 3: an array is not an object");
}

/* Nesting is bounded in values (max_value_depth, as the wire scanner counts it) and in JSON
 * levels (4 x max_value_depth + 16), so unknown members cannot nest without end either. */
static void test_depth_limit(void **state)
{
    struct hs_buf deep = {0};
    hs_buf_printf(&deep, "{'resourceSpans':[{'resource':{'attributes':[{'key':'k','value':");
    for (int i = 0; i < 200; i++)
        hs_buf_printf(&deep, "{'arrayValue':{'values':[");
    hs_buf_printf(&deep, "{}");
    for (int i = 0; i < 200; i++)
        hs_buf_printf(&deep, "]}}");
    hs_buf_printf(&deep, "}]}}]}");
    hs_buf_putc(&deep, '\0');
    struct hs_buf out = {0};
    char err[256];
    const char *json = q((char *)deep.data);
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), NULL, &out, err, sizeof(err)),
                     HS_E2BIG);
    /* the path's middle gives way, so its start and the failing element both show */
    assert_non_null(strstr(err, ": resourceSpans[0].resource.attributes[0].value..."));
    assert_non_null(strstr(err, ".arrayValue.values[0]: nested deeper than 32 (limit "
                                "max_value_depth)"));
    assert_true(strlen(err) < 250);
    assert_int_equal(out.len, 0);

    /* the same with max_value_depth 128: 200 levels are still too many */
    const struct hs_otlp_limits wide = {.max_value_depth = 128};
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), &wide, &out, err, sizeof(err)),
                     HS_E2BIG);
    assert_non_null(strstr(err, ": nested deeper than 128 (limit max_value_depth)"));

    /* an unknown member nested deeper than 4 x 32 + 16 JSON levels */
    hs_buf_reset(&deep);
    hs_buf_printf(&deep, "{\"future\":");
    for (int i = 0; i < 144; i++)
        hs_buf_putc(&deep, '[');
    for (int i = 0; i < 144; i++)
        hs_buf_putc(&deep, ']');
    hs_buf_putc(&deep, '}');
    assert_int_equal(
        hs_otlp_json_to_wire((char *)deep.data, deep.len, NULL, &out, err, sizeof(err)), HS_E2BIG);
    assert_string_equal(err, "line 1 col 154: nested deeper than 144 levels (limit "
                             "max_value_depth)");
    deep.len -= 2; /* one level less passes */
    memmove(deep.data + 11, deep.data + 12, deep.len - 11);
    deep.data[deep.len - 1] = '}';
    assert_int_equal(
        hs_otlp_json_to_wire((char *)deep.data, deep.len, NULL, &out, err, sizeof(err)), 0);
    assert_int_equal(out.len, 0);
    hs_buf_free(&out);
    hs_buf_free(&deep);
}

static void assert_limit(const struct hs_otlp_limits *lim, const char *json_q, const char *want)
{
    struct hs_buf out = {0};
    char err[256] = "";
    const char *json = q(json_q);
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), lim, &out, err, sizeof(err)),
                     HS_E2BIG);
    assert_string_equal(err, want);
    assert_int_equal(out.len, 0);
    hs_buf_free(&out);
}

/* The receiver's limits stop a request at the element that passes one, named by its path:
 * spans (and the resourceSpans and scopeSpans that should carry them) summed over the request,
 * attributes per resource, scope, span, event and link. Nulls are absent, so they do not count. */
static void test_count_limits(void **state)
{
    const struct hs_otlp_limits lim = {.max_spans = 2, .max_attributes = 2};
    assert_limit(&lim, "{'resourceSpans':[{},null,{},{}]}",
                 "line 1 col 30: resourceSpans[3]: more than 2 in one request (limit "
                 "max_spans_per_request)");
    assert_limit(&lim, "{'resourceSpans':[{'scopeSpans':[{}]},{'scopeSpans':[{},{}]}]}",
                 "line 1 col 57: resourceSpans[1].scopeSpans[1]: more than 2 in one request "
                 "(limit max_spans_per_request)");
    assert_limit(&lim, "{'resourceSpans':[{'scopeSpans':[{'spans':[{}]},{'spans':[{},{}]}]}]}",
                 "line 1 col 62: resourceSpans[0].scopeSpans[1].spans[1]: more than 2 in one "
                 "request (limit max_spans_per_request)");
    const char *three = "[{'key':'a'},{'key':'b'},{'key':'c'}]";
    char buf[512];
    snprintf(buf, sizeof(buf), "{'resourceSpans':[{'resource':{'attributes':%s}}]}", three);
    assert_limit(&lim, buf,
                 "line 1 col 70: resourceSpans[0].resource.attributes[2]: more than 2 (limit "
                 "max_attributes)");
    snprintf(buf, sizeof(buf), "{'resourceSpans':[{'scopeSpans':[{'scope':{'attributes':%s}}]}]}",
             three);
    assert_limit(&lim, buf,
                 "line 1 col 82: resourceSpans[0].scopeSpans[0].scope.attributes[2]: more than 2 "
                 "(limit max_attributes)");
    snprintf(buf, sizeof(buf),
             "{'resourceSpans':[{'scopeSpans':[{'spans':[{'events':[{'attributes':%s}]}]}]}]}",
             three);
    assert_limit(&lim, buf,
                 "line 1 col 94: resourceSpans[0].scopeSpans[0].spans[0].events[0].attributes[2]: "
                 "more than 2 (limit max_attributes)");
    snprintf(buf, sizeof(buf),
             "{'resourceSpans':[{'scopeSpans':[{'spans':[{'links':[{'attributes':%s}]}]}]}]}",
             three);
    assert_limit(&lim, buf,
                 "line 1 col 93: resourceSpans[0].scopeSpans[0].spans[0].links[0].attributes[2]: "
                 "more than 2 (limit max_attributes)");
    /* per message, not per request: two spans of two attributes each pass */
    struct hs_buf w = {0};
    const char *ok = q("{'resourceSpans':[{'scopeSpans':[{'spans':[{'attributes':[{'key':'a'},"
                       "{'key':'b'}]},{'attributes':[{'key':'a'},null,{'key':'b'}]}]}]}]}");
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire(ok, strlen(ok), &lim, &w, err, sizeof(err)), 0);
    hs_buf_free(&w);
}

static void test_syntax_errors(void **state)
{
    /* the reader's own messages, at the offending character */
    assert_error("{'resourceSpans': [\n  {'scopeSpans': ]}",
                 "line 2 col 18: unexpected ']' (a value is expected)");
    assert_error("{'resourceSpans': [], 'resourceSpans': []}",
                 "line 1 col 40: resourceSpans: given twice");
    assert_error("", "line 1 col 1: unexpected end of text (a value is expected)");
    assert_error("{} x", "line 1 col 4: unexpected 'x' after the end of the value");
    assert_error("{'a': 1,}", "line 1 col 9: unexpected '}' (expected a member name in quotes)");
    assert_error("{'a' 1}", "line 1 col 6: unexpected '1' (expected ':' after the member name)");
    assert_error("{'a': [1 2]}", "line 1 col 10: unexpected '2' (expected ',' or ']')");
    assert_error("{'a': 'x\\q'}", "line 1 col 9: invalid escape: backslash before 'q'");
    assert_error("{'a': '\\ud800'}",
                 "line 1 col 8: invalid \\uD800: a high surrogate without its low half");
    assert_error("{'a': '\xff'}", "line 1 col 8: invalid UTF-8 in a string (byte 0xff)");
    assert_error("{'a': '\x01'}", "line 1 col 8: control character 0x01 in a string (escape it)");
    assert_error("{'a': -}", "line 1 col 7: invalid number (a digit must follow '-')");
    assert_error("{'a': tru}", "line 1 col 7: unexpected 't' (a value is expected)");
    assert_error("{'a': 'open", "line 1 col 7: unterminated string");
}

static char *wire_to_json(const uint8_t *p, size_t len)
{
    struct hs_buf out = {0};
    assert_int_equal(hs_otlp_wire_to_json(p, len, &out), 0);
    char *s = hs_arena_strndup(A, (const char *)out.data, out.len);
    hs_buf_free(&out);
    return s;
}

/* Strict output: lowerCamelCase, lowercase hex, int64 as strings, enums as integers, defaults
 * omitted but oneof members and present sub-messages kept, no newline. */
static void test_strict_output(void **state)
{
    struct hs_buf wire = {0};
    to_request("{'resourceSpans':[{'scopeSpans':[{'spans':["
               "{'traceId':'5B8EFFF798038103D269B633813FC60C',"
               "'spanId':'EEE19B7EC3C1B174','parentSpanId':'','name':'n','kind':'SPAN_KIND_SERVER',"
               "'startTimeUnixNano':1,'endTimeUnixNano':'2','droppedAttributesCount':0,'flags':0,"
               "'attributes':[{'key':'i','value':{'intValue':0}},"
               "{'key':'s','value':{'stringValue':''}},"
               "{'key':'d','value':{'doubleValue':0.1}},{'key':'e','value':{}}],"
               "'status':{}}]}]}]}",
               &wire);
    assert_string_equal(
        wire_to_json(wire.data, wire.len),
        q("{'resourceSpans':[{'scopeSpans':[{'spans':["
          "{'traceId':'5b8efff798038103d269b633813fc60c',"
          "'spanId':'eee19b7ec3c1b174','name':'n','kind':2,'startTimeUnixNano':'1',"
          "'endTimeUnixNano':'2','attributes':[{'key':'i','value':{'intValue':'0'}},"
          "{'key':'s','value':{'stringValue':''}},{'key':'d','value':{'doubleValue':0.1}},"
          "{'key':'e','value':{}}],'status':{}}]}]}]}"));
    hs_buf_free(&wire);

    assert_string_equal(wire_to_json(NULL, 0), "{}");
}

static KV *kv_new(const char *key, Any *v)
{
    KV *kv = hs_arena_alloc(A, sizeof(*kv));
    opentelemetry__proto__common__v1__key_value__init(kv);
    kv->key = (char *)key;
    kv->value = v;
    return kv;
}

static Any *any_new(int which)
{
    Any *v = hs_arena_alloc(A, sizeof(*v));
    opentelemetry__proto__common__v1__any_value__init(v);
    v->value_case = which;
    return v;
}

/* A request built with protobuf-c (so canonical) holding edge values of every type. */
static size_t build_edge_request(uint8_t **out)
{
    static uint8_t all_bytes[256], tid[16] = {0xde, 0xad}, sid[8] = {0xbe, 0xef};
    for (int i = 0; i < 256; i++)
        all_bytes[i] = (uint8_t)i;
    KV **kvs = hs_arena_alloc(A, 16 * sizeof(*kvs));
    size_t n = 0;
    Any *v;
    double doubles[] = {-0.0, 0.1, 1e300, 5e-324, -2.5, INFINITY, -INFINITY};
    for (size_t i = 0; i < HS_ARRAY_SIZE(doubles); i++) {
        v = any_new(ANY(DOUBLE_VALUE));
        v->double_value = doubles[i];
        kvs[n++] = kv_new("d", v);
    }
    int64_t ints[] = {INT64_MIN, -1, INT64_MAX};
    for (size_t i = 0; i < HS_ARRAY_SIZE(ints); i++) {
        v = any_new(ANY(INT_VALUE));
        v->int_value = ints[i];
        kvs[n++] = kv_new("i", v);
    }
    for (size_t len = 254; len <= 256; len++) { /* every base64 tail: 2, 1 and 0 pad chars */
        v = any_new(ANY(BYTES_VALUE));
        v->bytes_value = (ProtobufCBinaryData){len, all_bytes};
        kvs[n++] = kv_new("\"quoted\\key\"\n\t\x01", v);
    }
    Span *s = hs_arena_alloc(A, sizeof(*s));
    opentelemetry__proto__trace__v1__span__init(s);
    s->trace_id = (ProtobufCBinaryData){16, tid};
    s->span_id = (ProtobufCBinaryData){8, sid};
    s->name = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
    s->flags = UINT32_MAX;
    s->kind = 77; /* an enum value this schema does not know survives as a number */
    s->start_time_unix_nano = UINT64_MAX;
    s->n_attributes = n;
    s->attributes = kvs;
    Span *spans[] = {s};
    ScopeSpans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    ss.n_spans = 1;
    ss.spans = spans;
    ScopeSpans *sss[] = {&ss};
    ResourceSpans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    rs.n_scope_spans = 1;
    rs.scope_spans = sss;
    ResourceSpans *rss[] = {&rs, &rs};
    Request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    req.n_resource_spans = 2;
    req.resource_spans = rss;
    size_t len = protobuf_c_message_get_packed_size(&req.base);
    *out = hs_arena_alloc(A, len);
    protobuf_c_message_pack(&req.base, *out);
    return len;
}

/* A canonical request (fields in number order, as protobuf-c packs them) survives wire -> JSON
 * -> wire byte for byte. */
static void assert_round_trip(const uint8_t *wire, size_t len)
{
    char *json = wire_to_json(wire, len);
    json_error_t je;
    json_t *j = json_loads(json, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j)
        fail_msg("output is not JSON: %s: %s", je.text, json);
    json_decref(j);
    struct hs_buf back = {0};
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), NULL, &back, err, sizeof(err)), 0);
    assert_int_equal(back.len, len);
    assert_memory_equal(back.data, wire, len);
    hs_buf_free(&back);
}

static void test_round_trip(void **state)
{
    uint8_t *wire;
    size_t len = build_edge_request(&wire);
    assert_round_trip(wire, len);

    struct hs_buf ex = {0};
    to_request(EXAMPLE, &ex);
    assert_round_trip(ex.data, ex.len);
    hs_buf_free(&ex);
}

static json_t *first_of(json_t *obj, const char *key)
{
    return json_array_get(json_object_get(obj, key), 0);
}

/* Wire strings need not be UTF-8; the JSON written from them must still parse. */
static void test_invalid_utf8(void **state)
{
    const char *name = "a\xff"
                       "b\xe2\x82"
                       "c\xc0\x80"
                       "d\xed\xa0\x80"
                       "e\xf4\x90\x80\x80"
                       "f\xc3\xa9\x7f";
    Span s = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    s.name = (char *)name;
    Span *spans[] = {&s};
    ScopeSpans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    ss.n_spans = 1;
    ss.spans = spans;
    ScopeSpans *sss[] = {&ss};
    ResourceSpans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    rs.n_scope_spans = 1;
    rs.scope_spans = sss;
    ResourceSpans *rss[] = {&rs};
    Request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    req.n_resource_spans = 1;
    req.resource_spans = rss;
    uint8_t wire[256];
    size_t len = protobuf_c_message_pack(&req.base, wire);

    char *json = wire_to_json(wire, len);
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    if (!j)
        fail_msg("output is not JSON: %s", je.text);
    json_t *span = first_of(first_of(first_of(j, "resourceSpans"), "scopeSpans"), "spans");
    json_t *got = json_object_get(span, "name");
    /* each byte outside valid UTF-8 is one U+FFFD; valid sequences and DEL pass */
    const char *want = "a\xef\xbf\xbd"
                       "b\xef\xbf\xbd\xef\xbf\xbd"
                       "c\xef\xbf\xbd\xef\xbf\xbd"
                       "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                       "e\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                       "f\xc3\xa9\x7f";
    assert_string_equal(json_string_value(got), want);
    json_decref(j);
}

/* U+0000 is valid in JSON and UTF-8 strings (the Collector keeps it): it must reach the wire and
 * come back, though protobuf-c's own strings end there. It never ends a number or a name, and
 * jansson refuses it in keys. */
static void test_nul_in_strings(void **state)
{
    const char *json = q("{'resourceSpans':[{'scopeSpans':[{'spans':[{'name':'a\\u0000b',"
                         "'attributes':[{'key':'k','value':{'stringValue':'\\u0000'}}]}]}]}]}");
    struct hs_buf wire = {0};
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), NULL, &wire, err, sizeof(err)), 0);
    assert_non_null(memmem(wire.data, wire.len,
                           "\x2a\x03"
                           "a\0b",
                           5));                                    /* name = "a\0b" */
    assert_non_null(memmem(wire.data, wire.len, "\x0a\x01\0", 3)); /* stringValue */
    assert_string_equal(wire_to_json(wire.data, wire.len),
                        q("{'resourceSpans':[{'scopeSpans':[{'spans':[{'name':'a\\u0000b',"
                          "'attributes':[{'key':'k','value':{'stringValue':'\\u0000'}}]}]}]}]}"));
    assert_round_trip(wire.data, wire.len);
    hs_buf_free(&wire);

    /* a string that starts with U+0000 is not an empty (so omitted) one */
    json = q("{'resourceSpans':[{'scopeSpans':[{'spans':[{'name':'\\u0000x'}]}]}]}");
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), NULL, &wire, err, sizeof(err)), 0);
    assert_string_equal(wire_to_json(wire.data, wire.len), json);
    hs_buf_free(&wire);

    assert_error(SPAN_PREFIX "{'startTimeUnixNano':'12\\u0000'}]}]}]}",
                 "line 1 col 78: resourceSpans[0].scopeSpans[0].spans[1].startTimeUnixNano: "
                 "\"12\\u0000\" is not a 64-bit integer");
    assert_error(SPAN_PREFIX "{'kind':'SPAN_KIND_SERVER\\u0000'}]}]}]}",
                 "line 1 col 65: resourceSpans[0].scopeSpans[0].spans[1].kind: "
                 "\"SPAN_KIND_SERVER\\u0000\" is not a SpanKind");
    /* a key holding U+0000 names no field: an unknown member, ignored */
    json = q("{'resourceSpans\\u0000': [1]}");
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), NULL, &wire, err, sizeof(err)), 0);
    assert_int_equal(wire.len, 0);
    hs_buf_free(&wire);
}

static void test_bad_wire(void **state)
{
    struct hs_buf out = {0};
    hs_buf_append(&out, "x", 1);
    const uint8_t bad[] = {0x0a, 0x05, 0x12}; /* length past the end */
    assert_int_equal(hs_otlp_wire_to_json(bad, sizeof(bad), &out), HS_EINVAL);
    assert_int_equal(out.len, 1);
    hs_buf_free(&out);
}

/* The string writer the receiver also uses for its JSON error bodies. */
static void test_put_string(void **state)
{
    struct hs_buf b = {0};
    assert_int_equal(hs_json_put_string(&b, "a\"b\\\n\x01\xff\xc3\xa9", 9), 0);
    const char want[] = "\"a\\\"b\\\\\\n\\u0001\xef\xbf\xbd\xc3\xa9\"";
    assert_int_equal(b.len, sizeof(want) - 1);
    assert_memory_equal(b.data, want, b.len);
    hs_buf_free(&b);
}

/* The otlp exporter reads a backend's JSON answer in place: rejectedSpans as a string (OTLP/JSON)
 * or a number, errorMessage decoded, other members skipped, anything unreadable worth 0. */
static void test_partial_success(void **state)
{
    char msg[32];
    const char *a = "{\"other\":[{}],\"partialSuccess\":{\"rejectedSpans\":\"3\","
                    "\"errorMessage\":\"ids \\u00e9\\\"zero\\\"\"}}";
    assert_int_equal(hs_otlp_json_partial_success(a, strlen(a), msg, sizeof(msg)), 3);
    assert_string_equal(msg, "ids \xc3\xa9\"zero\"");
    const char *b = "{\"partialSuccess\":{\"x\":{\"y\":[1]},\"rejectedSpans\":7}}";
    assert_int_equal(hs_otlp_json_partial_success(b, strlen(b), msg, sizeof(msg)), 7);
    assert_string_equal(msg, "");
    const char *c = "{\"partialSuccess\":{\"errorMessage\":\"a message longer than the 32 bytes "
                    "of room\"}}";
    assert_int_equal(hs_otlp_json_partial_success(c, strlen(c), msg, sizeof(msg)), 0);
    assert_string_equal(msg, "a message longer than the 32 by"); /* its start */
    assert_int_equal(hs_otlp_json_partial_success("{}", 2, msg, sizeof(msg)), 0);
    assert_int_equal(hs_otlp_json_partial_success("[1,", 3, msg, sizeof(msg)), 0);
    assert_int_equal(hs_otlp_json_partial_success("", 0, msg, sizeof(msg)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_string),
        cmocka_unit_test_setup_teardown(test_spec_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lenient_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shape_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syntax_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strict_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_utf8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nul_in_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_wire, setup, teardown),
        cmocka_unit_test(test_partial_success),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
