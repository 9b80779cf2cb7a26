/* otlp_json.c: OTLP/JSON to wire bytes (wire.md §2.1): pb_json.c's conversion with OTLP's hex
 * ids and the receiver's limits on spans, attributes and value nesting, checked while the JSON
 * is read; and a backend's JSON answer read in place. Wire to JSON is otlp_json_write.c. */
#include "pdata/otlp_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/json.h"
#include "pdata/otlp_json_int.h"
#include "pdata/otlp_wire.h"
#include "pdata/pb_json.h"

/* The same limits the wire scanner applies to protobuf requests (it runs on the converted
 * bytes too), here checked as the elements arrive, so a request past one stops at the element
 * that passes it, named by its JSON path. Entries of resourceSpans and scopeSpans count against
 * the span limit as well: each should carry spans, and a body of empty ones carries nothing. */
int hs_otlp_json_to_wire(const char *json, size_t len, const struct hs_otlp_limits *lim,
                         struct hs_buf *out, char *err, size_t errlen)
{
    uint32_t spans = lim ? lim->max_spans : 0, attrs = lim ? lim->max_attributes : 0;
    uint32_t depth = lim && lim->max_value_depth ? lim->max_value_depth : 32;
    const struct hs_pb_json_limit limits[] = {
        {&HS_JSON_REQUEST_DESC, "resource_spans", spans, true, "max_spans_per_request"},
        {&opentelemetry__proto__trace__v1__resource_spans__descriptor, "scope_spans", spans, true,
         "max_spans_per_request"},
        {&opentelemetry__proto__trace__v1__scope_spans__descriptor, "spans", spans, true,
         "max_spans_per_request"},
        {&opentelemetry__proto__resource__v1__resource__descriptor, "attributes", attrs, false,
         "max_attributes"},
        {&opentelemetry__proto__common__v1__instrumentation_scope__descriptor, "attributes", attrs,
         false, "max_attributes"},
        {&opentelemetry__proto__trace__v1__span__descriptor, "attributes", attrs, false,
         "max_attributes"},
        {&opentelemetry__proto__trace__v1__span__event__descriptor, "attributes", attrs, false,
         "max_attributes"},
        {&opentelemetry__proto__trace__v1__span__link__descriptor, "attributes", attrs, false,
         "max_attributes"},
    };
    const struct hs_pb_json_opts o = {
        .desc = &HS_JSON_REQUEST_DESC,
        .hex_ids = true,
        .allow_nul = true, /* the Collector keeps U+0000 in strings */
        .limits = limits,
        .n_limits = HS_ARRAY_SIZE(limits),
        .nested = &opentelemetry__proto__common__v1__any_value__descriptor,
        .max_nested = depth,
        .nested_key = "max_value_depth",
        /* an event attribute's value sits 12 levels deep, and each level of a kvlist value
         * takes 4 more: room for the deepest value max_value_depth allows, and some */
        .max_depth = 4 * depth + 16,
        .depth_key = "max_value_depth",
    };
    return hs_pb_json_to_wire(json, len, &o, out, err, errlen);
}

/* Another OTLP request in JSON (the profiles signal's): OTLP's hex ids and value nesting, no
 * counts (its decoder applies its own limits to the wire). */
int hs_otlp_json_to_wire_desc(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                              struct hs_buf *out, char *err, size_t errlen)
{
    const struct hs_pb_json_opts o = {
        .desc = desc,
        .hex_ids = true,
        .allow_nul = false, /* decoded by protobuf-c, whose strings end at a NUL */
        .nested = &opentelemetry__proto__common__v1__any_value__descriptor,
        .max_nested = 32,
        .nested_key = "value nesting",
        .max_depth = 4 * 32 + 16, /* as the traces' default: value nesting, and some */
    };
    return hs_pb_json_to_wire(json, len, &o, out, err, errlen);
}

/* rejectedSpans, an int64: a JSON number or, as OTLP/JSON writes it, a decimal string. */
static int64_t rejected_spans(const struct hs_json_token *v)
{
    bool neg;
    uint64_t mag;
    char s[24];
    if (v->type == HS_JSON_STRING && v->len < sizeof(s) && !v->escaped) {
        memcpy(s, v->ptr, v->len);
        s[v->len] = '\0';
        return strtoll(s, NULL, 10);
    }
    if (v->type == HS_JSON_NUMBER && v->integer && hs_json_integer(v, &neg, &mag))
        return mag > INT64_MAX ? (neg ? INT64_MIN : INT64_MAX) : neg ? -(int64_t)mag : (int64_t)mag;
    return 0;
}

/* Inside partialSuccess: its two members, the rest skipped. */
static void partial_members(struct hs_json_reader *r, int64_t *rejected, char *msg, size_t msglen)
{
    struct hs_json_token k, v;
    while (hs_json_next(r, &k) == 0 && k.type == HS_JSON_KEY && hs_json_next(r, &v) == 0) {
        if (hs_json_string_is(&k, "rejectedSpans") || hs_json_string_is(&k, "rejectedProfiles"))
            *rejected = rejected_spans(&v);
        else if (hs_json_string_is(&k, "errorMessage") && v.type == HS_JSON_STRING &&
                 v.len < msglen)
            msg[hs_json_unescape(&v, msg)] = '\0';
        else if (hs_json_string_is(&k, "errorMessage") && v.type == HS_JSON_STRING)
            snprintf(msg, msglen, "%.*s", (int)msglen - 1, v.ptr); /* its start, as written */
        else if (hs_json_skip(r, &v))
            return;
    }
}

int64_t hs_otlp_json_partial_success(const char *json, size_t len, char *msg, size_t msglen)
{
    struct hs_json_reader r;
    struct hs_json_token k, v;
    int64_t rejected = 0;
    msg[0] = '\0';
    hs_json_reader_init(&r, json, len, 64, false);
    if (hs_json_next(&r, &k) || k.type != HS_JSON_OBJECT)
        return 0;
    while (hs_json_next(&r, &k) == 0 && k.type == HS_JSON_KEY && hs_json_next(&r, &v) == 0) {
        if (hs_json_string_is(&k, "partialSuccess") && v.type == HS_JSON_OBJECT)
            partial_members(&r, &rejected, msg, msglen);
        else if (hs_json_skip(&r, &v))
            break;
    }
    return rejected;
}
