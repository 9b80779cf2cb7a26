/* lb_int.h: the load_balancing exporter's insides, shared by load_balancing.c (config, routing,
 * lifecycle) and backend.c (a backend's two exporters, joining and leaving the ring). */
#ifndef HS_LB_INT_H
#define HS_LB_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/component.h"
#include "core/metrics.h"
#include "exporters/helper/exporter.h"
#include "exporters/load_balancing/resolver.h"
#include "exporters/load_balancing/split.h"
#include "exporters/otlp.h"
#include "exporters/pyroscope.h"

/* The two signals, as indexes: a backend has one exporter of each. */
enum { LB_TRACES, LB_PROFILES, LB_SIGNALS };

struct lb_protocol {
    struct hs_otlp_config otlp;
    struct hs_pyroscope_config pyroscope;
};

struct lb_config {
    char *routing_key;
    struct hs_resolver_config resolver;
    struct lb_protocol protocol;
};

struct lb;

struct lb_backend {
    /* first: its exporters' x.backend points here, which leads back to the backend */
    char name[256];
    struct lb *lb;
    struct hs_component *exp[LB_SIGNALS]; /* NULL when it could not be made (logged) */
    bool retiring;
    int closing;             /* exporters whose shutdown has not called done yet */
    struct lb_backend *next; /* in lb->retiring */
    struct hs_counter *refused[LB_SIGNALS], *rerouted[LB_SIGNALS];
};

struct lb {
    struct hs_component base;
    struct lb_config conf;
    enum hs_lb_route route;
    bool tls[LB_SIGNALS]; /* https:// to the backends: `tls` written and not insecure */
    struct hs_host host;
    struct hs_resolver *resolver;
    struct hs_ring *ring;         /* NULL until the first answer */
    struct lb_backend **backends; /* in ring order */
    struct lb_backend *retiring;  /* left the ring; still ending what they had in flight */
    struct hs_lb_parts parts;     /* scratch for one batch */
    struct hs_lb_keys keys;
    char **on_disk; /* backends with a store file found at start */
    size_t ndisk;
    struct hs_counter *ring_changes, *keys_moved, *refused_none[LB_SIGNALS];
    bool started, closing, resolver_done;
    int phase;            /* shutting down: 1 resolver and leaving backends, 2 the others, 3 done */
    int closing_backends; /* phase 2: backends not done yet */
    hs_done_cb done;
    struct hs_ratelimit log_rl;
};

/* ---- backend.c ---- */

/* Makes and starts a backend's two exporters (a failure is logged; that signal's keys are then
 * refused, counted). */
struct lb_backend *lb_backend_new(struct lb *lb, const char *name);
/* Out of the ring: hands every queued item to the keys' new owners (lb->ring is the new ring),
 * lets attempts in flight end, then frees it (or calls lb_shutdown_step when shutting down). */
void lb_backend_retire(struct lb_backend *b);
/* Shuts an active backend down with the exporter (what it holds is sent or stays on disk). */
void lb_backend_shutdown(struct lb_backend *b);
/* Frees a backend whose exporters are done (or were never started). */
void lb_backend_free(struct lb_backend *b);
/* Items of a batch that could not be queued, counted for its backend (NULL: none). */
void lb_count_refused(struct lb *lb, struct lb_backend *b, int sig, uint64_t n);

/* ---- load_balancing.c, for backend.c ---- */

/* Queues a batch handed over by a backend that left, at its keys' new owners, beyond their
 * capacity (it was acknowledged). Takes `batch`. */
void lb_reroute_batch(struct lb *lb, int sig, void *batch);
/* Who takes an item of `key` handed over by a backend that left: its owner, or, in the moment
 * a name that left comes back and its exporters wait for its old self to end (backend.c), the
 * next backend in the key's rank; NULL when none can. */
struct hs_exporter *lb_taker(struct lb *lb, uint64_t key, int sig);
/* Moves the shutdown on once a backend it waited for is done. */
void lb_shutdown_step(struct lb *lb);

#endif
