/* pb_json.h: proto3 JSON to protobuf wire bytes, for any message protobuf-c describes (OTLP
 * traces, the Pyroscope push API), converted while core/json.h reads the text: no tree is built,
 * so memory is the output, and element counts are bounded as the elements arrive. */
#ifndef HS_PB_JSON_H
#define HS_PB_JSON_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_buf;

/* A bound on the elements of one repeated field, in each message that holds it or summed over
 * the request. Exceeding it is HS_E2BIG with a message naming `key`, the setting to raise. */
struct hs_pb_json_limit {
    const ProtobufCMessageDescriptor *msg;
    const char *field; /* proto name, e.g. "attributes" */
    uint32_t max;      /* 0: unbounded */
    bool per_request;
    const char *key;
};

struct hs_pb_json_opts {
    const ProtobufCMessageDescriptor *desc; /* of the top-level message */
    bool hex_ids;   /* OTLP: trace_id, span_id, parent_span_id are hex, not base64 */
    bool allow_nul; /* U+0000 in strings (OTLP keeps it; protobuf-c's C strings would end) */
    const struct hs_pb_json_limit *limits;
    size_t n_limits; /* at most HS_PB_JSON_MAX_LIMITS */
    /* a message whose nesting in itself is bounded (OTLP's AnyValue), else NULL */
    const ProtobufCMessageDescriptor *nested;
    uint32_t max_nested;
    const char *nested_key;
    uint32_t max_depth;    /* JSON nesting (core/json.h), 0 = its ceiling */
    const char *depth_key; /* the setting max_depth derives from, for the message, or NULL */
};

#define HS_PB_JSON_MAX_LIMITS 16

/* Converts the JSON text to wire bytes of o->desc, appended to out (fields in number order, as
 * protobuf-c packs them, whatever the order of the keys). Lenient as the Collector is: snake_case
 * or lowerCamelCase keys, enum names or numbers, 64-bit integers as numbers or strings; unknown
 * keys are ignored and null is absent. Returns 0; HS_EINVAL when the text is not JSON or a value
 * does not fit its field, HS_E2BIG past a limit or the JSON nesting (err says where and which:
 * "line 3 col 14: resourceSpans[0].scopeSpans[0].spans[2].traceId: ..."), HS_ENOMEM. On failure out
 * is as it was. The output never passes twice the text's length, so memory is bounded by the body.
 */
int hs_pb_json_to_wire(const char *json, size_t len, const struct hs_pb_json_opts *o,
                       struct hs_buf *out, char *err, size_t errlen);

#endif
