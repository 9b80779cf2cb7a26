/* otlp_wire_ref.h: the verdict hs_otlp_traces_scan must agree with (unit test and fuzzer):
 * protobuf-c 1.4's unpack plus the scanner's extra rules (top of pdata/otlp_wire.c), checked by a
 * generic walk over protobuf-c's descriptors that shares no code with the scanner. */
#ifndef HS_TESTS_OTLP_WIRE_REF_H
#define HS_TESTS_OTLP_WIRE_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"

#define REF_REQ_DESC                                                                               \
    (&opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor)
#define REF_ANY_DESC (&opentelemetry__proto__common__v1__any_value__descriptor)
#define REF_SPAN_DESC (&opentelemetry__proto__trace__v1__span__descriptor)
#define REF_LINK_DESC (&opentelemetry__proto__trace__v1__span__link__descriptor)

enum ref_verdict {
    REF_ACCEPT,
    REF_REJECT_PBC,   /* protobuf-c refuses it */
    REF_REJECT_RULES, /* protobuf-c takes it; the scanner's extra rules refuse it */
    REF_REJECT_DEPTH, /* ... or only the value nesting limit does */
};

struct ref_result {
    enum ref_verdict verdict;
    uint32_t resource_spans, scope_spans, spans; /* from protobuf-c's message, when accepted */
};

enum { REF_BAD_RULE = 1, REF_BAD_DEPTH = 2 };

static inline const uint8_t *ref_varint(const uint8_t *p, const uint8_t *end, unsigned max,
                                        uint64_t *v)
{
    *v = 0;
    for (unsigned i = 0; i < max && p + i < end; i++) {
        *v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80))
            return p + i + 1;
    }
    return NULL;
}

/* Walks a message protobuf-c has accepted; `depth` is the nesting of the innermost AnyValue
 * around (or at) this message, 0 outside any. Returns REF_BAD_* bits. */
static inline int ref_walk(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                           const uint8_t *end, uint32_t depth, uint32_t max_depth)
{
    int bad = d == REF_ANY_DESC && depth > max_depth ? REF_BAD_DEPTH : 0;
    size_t idlen[5] = {0}; /* last length of fields 1..4 (trace_id, span_id, -, parent) */
    while (p < end) {
        uint64_t tag, v = 0;
        if (!(p = ref_varint(p, end, 5, &tag)))
            return bad | REF_BAD_RULE;
        uint64_t num = tag >> 3;
        unsigned wt = tag & 7;
        if (num == 0 || num > 0x1fffffff)
            bad |= REF_BAD_RULE;
        const uint8_t *val = p;
        if (wt == 0)
            p = ref_varint(p, end, 10, &v);
        else if (wt == 1 || wt == 5)
            p = end - p >= (wt == 1 ? 8 : 4) ? p + (wt == 1 ? 8 : 4) : NULL;
        else if (wt == 2 && (val = ref_varint(p, end, 5, &v)) && v <= (uint64_t)(end - val))
            p = val + v;
        else
            p = NULL;
        if (!p)
            return bad | REF_BAD_RULE;
        const ProtobufCFieldDescriptor *f =
            num <= 64 ? protobuf_c_message_descriptor_get_field(d, (unsigned)num) : NULL;
        if (!f)
            continue;
        if (f->type == PROTOBUF_C_TYPE_BOOL && wt != 0)
            bad |= REF_BAD_RULE;
        if (f->type == PROTOBUF_C_TYPE_MESSAGE && wt == 2) {
            const ProtobufCMessageDescriptor *sub = f->descriptor;
            bad |= ref_walk(sub, val, p, sub == REF_ANY_DESC ? depth + 1 : depth, max_depth);
        }
        if ((d == REF_SPAN_DESC || d == REF_LINK_DESC) && num <= 4 && wt == 2)
            idlen[num] = v; /* a scalar given twice: the last counts */
    }
    if ((d == REF_SPAN_DESC || d == REF_LINK_DESC) &&
        ((idlen[1] != 0 && idlen[1] != 16) || (idlen[2] != 0 && idlen[2] != 8) ||
         (d == REF_SPAN_DESC && idlen[4] != 0 && idlen[4] != 8)))
        bad |= REF_BAD_RULE;
    return bad;
}

static inline struct ref_result ref_check(const uint8_t *p, size_t len, uint32_t max_depth)
{
    struct ref_result r = {.verdict = REF_REJECT_PBC};
    struct hs_arena *a = hs_arena_new(1 << 16, 0);
    ProtobufCAllocator alloc = hs_arena_pb_allocator(a);
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
        (void *)protobuf_c_message_unpack(REF_REQ_DESC, &alloc, len, p);
    if (req) {
        r.resource_spans = (uint32_t)req->n_resource_spans;
        for (size_t i = 0; i < req->n_resource_spans; i++) {
            r.scope_spans += (uint32_t)req->resource_spans[i]->n_scope_spans;
            for (size_t j = 0; j < req->resource_spans[i]->n_scope_spans; j++)
                r.spans += (uint32_t)req->resource_spans[i]->scope_spans[j]->n_spans;
        }
        int bad = ref_walk(REF_REQ_DESC, p, p + len, 0, max_depth ? max_depth : 32);
        r.verdict = bad & REF_BAD_RULE    ? REF_REJECT_RULES
                    : bad & REF_BAD_DEPTH ? REF_REJECT_DEPTH
                                          : REF_ACCEPT;
    }
    hs_arena_free(a);
    return r;
}

#endif
