/* otlp_wire.h: a strict, allocation-free scanner of OTLP trace wire bytes
 * (ExportTraceServiceRequest / TracesData). One pass checks every tag, varint, length and wire
 * type against the schema, counts spans, and reports each span's essentials to a visitor, so the
 * batch can travel as the request's own bytes (design.md §11). protobuf-c is the reference: tests
 * and the fuzzer check that both accept and reject the same inputs. */
#ifndef HS_OTLP_WIRE_H
#define HS_OTLP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

struct hs_otlp_limits {
    uint32_t max_spans;       /* per request; 0 = no limit */
    uint32_t max_attributes;  /* per resource/scope/span/event/link; 0 = no limit */
    uint32_t max_value_depth; /* nesting of arrays/kvlists in AnyValue; 0 = 32 */
};

/* What the correlator and the debug exporter need of a span, without decoding it. Byte views
 * point into the scanned buffer. */
struct hs_span_view {
    struct hs_str trace_id;       /* 16 raw bytes (or empty) */
    struct hs_str span_id;        /* 8 raw bytes (or empty) */
    struct hs_str parent_span_id; /* 8 raw bytes, empty for a root span */
    struct hs_str name;
    struct hs_str service_name;   /* resource attribute service.name, if a string; else empty */
    struct hs_str scope_name;
    struct hs_str resource;       /* the Resource message's bytes (its attributes are field 1) */
    uint32_t kind;
    uint32_t status_code;
    uint32_t attributes;          /* count */
    uint32_t events;              /* count */
    uint32_t links;               /* count */
    uint64_t start_ns, end_ns;
    size_t offset, len;           /* the Span message's bytes (without its tag and length) */
};

/* Returns nonzero to stop the scan (the scan then returns that value). */
typedef int (*hs_span_visit_fn)(void *ud, const struct hs_span_view *span);

struct hs_otlp_scan {
    uint32_t resource_spans, scope_spans, spans;
    size_t err_offset;
    char err[200]; /* e.g. "resource_spans[0].scope_spans[1].spans[4].trace_id: length 7, want 16" */
};

/* Returns 0; HS_EINVAL when the bytes are not a valid request (res->err says where and why);
 * HS_E2BIG when a limit is exceeded (res->err names it). `visit` may be NULL. */
int hs_otlp_traces_scan(const uint8_t *p, size_t len, const struct hs_otlp_limits *lim,
                        hs_span_visit_fn visit, void *ud, struct hs_otlp_scan *res);

#endif
