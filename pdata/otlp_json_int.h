/* otlp_json_int.h: what the two directions of pdata/otlp_json*.c share: the key and bytes rules
 * of OTLP/JSON and the storage size of protobuf-c field types. Private to pdata. */
#ifndef HS_OTLP_JSON_INT_H
#define HS_OTLP_JSON_INT_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#define HS_JSON_REQUEST_DESC                                                                       \
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor

/* protoc's default json_name: "start_time_unix_nano" -> "startTimeUnixNano". */
static inline size_t hs_json_camel_name(const char *snake, char *out, size_t outlen)
{
    size_t n = 0;
    bool up = false;
    for (const char *s = snake; *s && n + 1 < outlen; s++) {
        if (*s == '_') {
            up = true;
            continue;
        }
        out[n++] = up && *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
        up = false;
    }
    out[n] = '\0';
    return n;
}

struct hs_buf;

/* otlp_json.c: hs_otlp_json_to_wire for another request protobuf-c describes (OTLP profiles). */
int hs_otlp_json_to_wire_desc(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                              struct hs_buf *out, char *err, size_t errlen);

/* OTLP's one deviation for bytes: trace and span ids are hex, not base64 (and profile ids, as the
 * Collector writes them). Returns the id's size in bytes, or 0 for an ordinary (base64) field. */
static inline size_t hs_json_hex_id_size(const ProtobufCFieldDescriptor *f)
{
    if (f->type != PROTOBUF_C_TYPE_BYTES)
        return 0;
    if (strcmp(f->name, "trace_id") == 0 || strcmp(f->name, "profile_id") == 0)
        return 16;
    if (strcmp(f->name, "span_id") == 0 || strcmp(f->name, "parent_span_id") == 0)
        return 8;
    return 0;
}

static inline size_t hs_json_elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_FLOAT:
        return sizeof(float);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    default: /* the 32-bit ints and enums */
        return 4;
    }
}

#endif
