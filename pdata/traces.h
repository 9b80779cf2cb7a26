/* traces.h: a batch of spans, carried as the wire bytes of an ExportTraceServiceRequest
 * (design.md §11). The request is `repeated ResourceSpans resource_spans = 1`, so two encoded
 * requests concatenated are one valid request holding both: batching and fan-out move bytes,
 * not objects, and unknown fields survive for free. Reference-counted; the last unref frees. */
#ifndef HS_TRACES_H
#define HS_TRACES_H

#include <stddef.h>
#include <stdint.h>

struct hs_traces {
    unsigned refs;
    uint8_t *data; /* ExportTraceServiceRequest wire bytes, validated by hs_otlp_traces_scan */
    size_t len;
    size_t cap;
    uint32_t spans;          /* span count */
    uint32_t resource_spans; /* ResourceSpans count */
};

/* An empty batch with room for `cap` bytes; NULL when out of memory. */
struct hs_traces *hs_traces_new(size_t cap);
/* Wraps validated wire bytes; takes `data` (malloc'd, `cap` bytes allocated). */
struct hs_traces *hs_traces_wrap(uint8_t *data, size_t len, size_t cap, uint32_t spans,
                                 uint32_t resource_spans);
/* Returns a new reference. */
struct hs_traces *hs_traces_ref(struct hs_traces *t);
void hs_traces_unref(struct hs_traces *t);
/* Copy on write: a no-op for the sole holder; otherwise *t becomes a private copy and one
 * reference on the shared batch is dropped. Returns 0 or HS_ENOMEM (then *t is unchanged). */
int hs_traces_make_writable(struct hs_traces **t);
/* Appends src's spans to dst (which must be writable). Returns 0 or HS_ENOMEM. */
int hs_traces_append(struct hs_traces *dst, const struct hs_traces *src);

#endif
