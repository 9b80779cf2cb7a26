/* split.h: a batch cut by routing key for the load_balancing exporter, before anything of it is
 * queued: spans regrouped by ResourceSpans (the key is per resource: tenant and service.name),
 * or by span for traceID; profiles by their service_name label. A batch of one key, the common
 * case (one SDK, one service per request), is passed on whole, without a copy. */
#ifndef HS_LB_SPLIT_H
#define HS_LB_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_ring;
struct hs_traces;
struct hs_profiles;

enum hs_lb_route {
    HS_LB_ROUTE_TENANT_SERVICE, /* the default: one (tenant, service) meets one correlator */
    HS_LB_ROUTE_SERVICE,        /* one service, whatever the tenant */
    HS_LB_ROUTE_TRACE_ID,       /* spans by trace (tail sampling); profiles by tenant_service */
};

struct hs_lb_part {
    void *batch;    /* struct hs_traces or struct hs_profiles: a new reference, the caller's */
    uint64_t key;   /* the routing key (traceID: of the part's first span) */
    int backend;    /* the ring index it goes to */
    uint32_t items; /* spans or profiles */
    size_t bytes;
};

/* The parts of one batch; kept between batches so routing allocates nothing in the steady
 * state. */
struct hs_lb_parts {
    struct hs_lb_part *v;
    size_t n, cap;
};

void hs_lb_parts_free(struct hs_lb_parts *p);

/* Cuts t (taken) into out (emptied first) by `route` over `ring` (not empty): one part per
 * distinct key, or per backend for traceID (a batch of 100 traces is not 100 queue entries).
 * Returns 0 or HS_ENOMEM; on error out is empty. */
int hs_lb_split_traces(struct hs_traces *t, enum hs_lb_route route, const struct hs_ring *ring,
                       struct hs_lb_parts *out);
/* The same for profiles (traceID routes them by tenant_service: a profile has no trace). A
 * shared batch (fan-out) is copied, as a profile belongs to one batch. */
int hs_lb_split_profiles(struct hs_profiles *b, enum hs_lb_route route, const struct hs_ring *ring,
                         struct hs_lb_parts *out);
/* Releases the parts' batches and empties out (traces: `profiles` false). */
void hs_lb_parts_release(struct hs_lb_parts *out, bool profiles);

/* The key of (tenant, service) under route (tenant_service for traceID). */
uint64_t hs_lb_key(enum hs_lb_route route, const char *tenant, const char *service, size_t len);

/* Routing keys seen, to count how many a ring change moves. Bounded: past `cap` keys it starts
 * over (traceID keys come and go; services stay). */
struct hs_lb_keys {
    uint64_t *slots; /* open addressing; 0 marks a free slot (key 0 is kept apart) */
    size_t cap, count;
    uint32_t max;
    bool has_zero;
};

void hs_lb_keys_init(struct hs_lb_keys *k, uint32_t max);
void hs_lb_keys_free(struct hs_lb_keys *k);
void hs_lb_keys_note(struct hs_lb_keys *k, uint64_t key);
/* How many of the keys seen pick another backend name on `to` than on `from`. */
uint64_t hs_lb_keys_moved(const struct hs_lb_keys *k, const struct hs_ring *from,
                          const struct hs_ring *to);
size_t hs_lb_keys_count(const struct hs_lb_keys *k);

#endif
