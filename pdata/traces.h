/* traces.h: a batch of spans, carried as the wire bytes of an ExportTraceServiceRequest
 * (design.md §11). The request is `repeated ResourceSpans resource_spans = 1`, so two encoded
 * requests concatenated are one valid request holding both: batching and fan-out move bytes,
 * not objects, and unknown fields survive for free. Reference-counted; the last unref frees. */
#ifndef HS_TRACES_H
#define HS_TRACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/consumer.h"

/* Longest tenant id (X-Scope-OrgID), as Cortex, Mimir, Tempo and Pyroscope bound it. */
#define HS_TENANT_MAX 150

struct hs_traces {
    unsigned refs;
    uint8_t *data; /* ExportTraceServiceRequest wire bytes, validated by hs_otlp_traces_scan */
    size_t len;
    size_t cap;
    uint32_t spans;          /* span count */
    uint32_t resource_spans; /* ResourceSpans count */
    /* X-Scope-OrgID of every span in the batch; "" when none. Inline so copying a batch's
     * tenant can never fail; two tenants never share a batch (hs_traces_append refuses). */
    char tenant[HS_TENANT_MAX + 1];
    /* true when `tenant` is a per-tenant token's (the gateway's word), false when the client
     * only asserted it (X-Scope-OrgID without tenant auth) or there is none. Nothing a client
     * writes in the spans may then name another tenant (the correlator's labels.trace_tenant). */
    bool tenant_authenticated;
};

/* An empty batch with room for `cap` bytes; NULL when out of memory. */
struct hs_traces *hs_traces_new(size_t cap);
/* Wraps validated wire bytes; takes `data` (malloc'd, `cap` bytes allocated). */
struct hs_traces *hs_traces_wrap(uint8_t *data, size_t len, size_t cap, uint32_t spans,
                                 uint32_t resource_spans);
/* Returns a new reference. */
struct hs_traces *hs_traces_ref(struct hs_traces *t);
void hs_traces_unref(struct hs_traces *t);

/* How delivery takes and drops references on a traces batch. */
extern const struct hs_batch_ops hs_traces_ops;
/* Delivers `batch` (taken) to a consumer's targets, all or nothing (hs_consumer_deliver). */
static inline int hs_consumer_traces(struct hs_consumer *c, struct hs_traces *batch)
{
    return hs_consumer_deliver(c, &hs_traces_ops, batch);
}
/* Copy on write: a no-op for the sole holder; otherwise *t becomes a private copy and one
 * reference on the shared batch is dropped. Returns 0 or HS_ENOMEM (then *t is unchanged). */
int hs_traces_make_writable(struct hs_traces **t);
/* Appends src's spans to dst (which must be writable). Returns 0, HS_ENOMEM, or HS_EINVAL
 * when their tenants differ (one request must never carry two tenants' spans). */
int hs_traces_append(struct hs_traces *dst, const struct hs_traces *src);

/* Sets the batch's tenant (copied; NULL or "" for none), as asserted (tenant_authenticated
 * false: a receiver sets it after, when a per-tenant token decided the tenant). A longer id than
 * HS_TENANT_MAX is HS_EINVAL and leaves the tenant unchanged: receivers check ids first
 * (hs_tenant_valid). */
int hs_traces_set_tenant(struct hs_traces *t, const char *tenant, size_t len);
/* Copies src's tenant, and whether it was authenticated, to dst (for batches derived from
 * another: edits, copies). */
void hs_traces_copy_tenant(struct hs_traces *dst, const struct hs_traces *src);
/* Same tenant, and the same word for it: an authenticated batch never merges with one that
 * only asserts the same id, so the merged batch cannot lose (or gain) the authentication. */
static inline bool hs_traces_same_tenant(const struct hs_traces *a, const struct hs_traces *b)
{
    return strcmp(a->tenant, b->tenant) == 0 && a->tenant_authenticated == b->tenant_authenticated;
}

#endif
