/* fuzz_otlp_json.c: libFuzzer target for OTLP/JSON. Any bytes as JSON -> wire must not crash;
 * when accepted, protobuf-c must unpack the wire, the wire must convert back to JSON that jansson
 * parses, and that JSON must give the same wire again. The bytes are also fed to wire -> JSON
 * as if they were a request, whose output, when there is one, must be valid JSON. (Memory per
 * input byte is fuzz_json_mem's.) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/errors.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_otlp_json: %s: %s\n", what, detail);
    abort();
}

static void check_json(const struct hs_buf *json)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)json->data, json->len,
                           JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j)
        fail("wire -> JSON wrote invalid JSON", je.text);
    json_decref(j);
}

static void json_side(const uint8_t *data, size_t size)
{
    struct hs_buf wire = {0}, json = {0}, again = {0};
    char err[256];
    int rc = hs_otlp_json_to_wire((const char *)data, size, NULL, &wire, err, sizeof(err));
    if (rc) {
        if ((rc != HS_EINVAL && rc != HS_E2BIG) || !err[0])
            fail("a refusal without HS_EINVAL or HS_E2BIG and a message", err);
        goto done;
    }
    struct hs_arena *a = hs_arena_new(4096, 0);
    ProtobufCAllocator alloc = hs_arena_pb_allocator(a);
    if (!opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            &alloc, wire.len, wire.data))
        fail("protobuf-c cannot unpack the wire we wrote", "");
    hs_arena_free(a);
    if (hs_otlp_wire_to_json(wire.data, wire.len, &json) != 0)
        fail("our own wire does not convert back to JSON", "");
    check_json(&json);
    if (hs_otlp_json_to_wire((const char *)json.data, json.len, NULL, &again, err, sizeof(err)) !=
        0)
        fail("our own JSON is refused", err);
    if (again.len != wire.len || (wire.len && memcmp(again.data, wire.data, wire.len) != 0))
        fail("JSON -> wire -> JSON -> wire changed the wire", "");
done:
    hs_buf_free(&wire);
    hs_buf_free(&json);
    hs_buf_free(&again);
}

static void wire_side(const uint8_t *data, size_t size)
{
    struct hs_buf json = {0};
    if (hs_otlp_wire_to_json(data, size, &json) == 0)
        check_json(&json);
    else if (json.len)
        fail("a failed conversion left output behind", "");
    hs_buf_free(&json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_side(data, size);
    wire_side(data, size);
    return 0;
}
