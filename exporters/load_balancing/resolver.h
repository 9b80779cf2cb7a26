/* resolver.h: where the load_balancing exporter's backends are, as otelcol's loadbalancing
 * exporter has it: `static: {hostnames: [...]}` or `dns: {hostname, port, interval, timeout}`,
 * answered on the loop as a sorted, deduplicated list of `host`, `host:port` or `[v6]:port`.
 *
 * What its users lost data to, and what this does instead:
 * - A DNS lookup that fails, times out or answers nothing keeps the last good set (counted in
 *   hs_resolver_stats, logged rate-limited): a flapping resolver is not a topology change.
 * - Lookups never share a lock with sending (otelcol #1690: a failing backend held the lock
 *   the DNS update needed); one lookup at a time runs in libuv's thread pool.
 * - Static hostnames are kept as written, not resolved here: a backend's identity, and so its
 *   keys on the ring, stay put when its address changes (otelcol #35378 keyed exporters by IP
 *   and dropped their queues with them). What happens to a removed backend's queue is the
 *   exporter's business: it must re-route it, never drop it. */
#ifndef HS_LB_RESOLVER_H
#define HS_LB_RESOLVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "core/config.h"

/* Beyond this many backends an answer is cut (sorted first, so every first-tier hotspan cuts
 * alike), counted and logged. */
#define HS_RESOLVER_MAX_BACKENDS 256

struct hs_resolver_static_config {
    struct hs_strlist hostnames;
};

struct hs_resolver_dns_config {
    char *hostname;
    uint32_t port; /* 0: none, each protocol's own port */
    uint64_t interval_ms;
    uint64_t timeout_ms;
};

struct hs_resolver_config {
    bool has_static, has_dns;
    struct hs_resolver_static_config static_;
    struct hs_resolver_dns_config dns;
};

/* The rows of `resolver:`, for the exporter's field table (a HS_CFG_SECTION with .sub). */
extern const struct hs_config_field hs_resolver_fields[];

/* Checks across rows, into err positioned at the resolver's node (`at`, may be NULL) or its
 * children: exactly one of static and dns; each hostname a host or host:port, no scheme, no
 * blank; a dns hostname without a port of its own. Returns 0 or HS_EINVAL. */
int hs_resolver_config_check(const struct hs_resolver_config *c, const struct hs_config_node *at,
                             const char *path, struct hs_error *err);

struct hs_resolver;

/* Called on the loop when the set changes (and once with the first set): `backends` sorted,
 * deduplicated, never empty, valid only during the call. */
typedef void (*hs_resolver_change_cb)(struct hs_resolver *r, const char *const *backends, size_t n,
                                      void *ud);
typedef void (*hs_resolver_done_cb)(struct hs_resolver *r, void *ud);

struct hs_resolver_stats {
    uint64_t lookups;   /* DNS lookups answered (any outcome) */
    uint64_t failures;  /* answered with an error: last good set kept */
    uint64_t empty;     /* answered with no address: last good set kept */
    uint64_t timeouts;  /* no answer within timeout: last good set kept */
    uint64_t skipped;   /* intervals skipped because a lookup was still running */
    uint64_t changes;   /* times the set changed, the first set included */
    uint64_t truncated; /* answers cut to HS_RESOLVER_MAX_BACKENDS */
};

/* Borrows conf (it must outlive the resolver) and `id` (the exporter's id, for logs). No I/O. */
struct hs_resolver *hs_resolver_new(uv_loop_t *loop, const struct hs_resolver_config *conf,
                                    const char *id, hs_resolver_change_cb cb, void *ud);
/* static: calls cb with the hostnames before returning. dns: starts the first lookup now and
 * one each interval; until the first good answer there are no backends. Returns 0 or a
 * negative code. */
int hs_resolver_start(struct hs_resolver *r);
/* Stops; calls done once nothing of the resolver is in the loop any more, which waits for a
 * lookup already running in the thread pool (the system resolver's own timeout bounds it).
 * No change callback after this call. Safe before start; a second call is ignored. */
void hs_resolver_shutdown(struct hs_resolver *r, hs_resolver_done_cb done);
/* Frees; only after done, or if never started. */
void hs_resolver_free(struct hs_resolver *r);

const struct hs_resolver_stats *hs_resolver_stats(const struct hs_resolver *r);
/* The current set (sorted; n = 0 before the first good answer), valid until the next change. */
const char *const *hs_resolver_backends(const struct hs_resolver *r, size_t *n);

/* For tests: replace uv_getaddrinfo and uv_freeaddrinfo (before start). The replacement must
 * call the callback exactly once, later, on the loop; the resolver frees what it got with
 * `free_fn`. */
typedef int (*hs_resolver_getaddrinfo_fn)(uv_loop_t *loop, uv_getaddrinfo_t *req,
                                          uv_getaddrinfo_cb cb, const char *node,
                                          const char *service, const struct addrinfo *hints);
void hs_resolver_set_getaddrinfo(struct hs_resolver *r, hs_resolver_getaddrinfo_fn fn,
                                 void (*free_fn)(struct addrinfo *ai));

#endif
