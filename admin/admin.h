/* admin.h: the admin endpoint (service.telemetry.admin): /healthz (/live, /ready) and /metrics,
 * with the pages components add (/ui), behind service.telemetry.admin_auth when set. */
#ifndef HS_ADMIN_H
#define HS_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/errors.h"
#include "net/http_server.h"

struct hs_admin;
struct hs_auth;
struct hs_metrics;
struct hs_tls_server_config;

/* `tls` (borrowed for the call; NULL: plaintext) makes the endpoint TLS-only. */
int hs_admin_start(uv_loop_t *loop, const char *endpoint, const struct hs_tls_server_config *tls,
                   struct hs_metrics *metrics, struct hs_admin **out, struct hs_error *err);
/* The bound port (useful with port 0). */
int hs_admin_port(const struct hs_admin *a);
/* Puts every path but /healthz, /healthz/live, /healthz/ready and / (probes carry no
 * credentials) behind `auth` (borrowed: it must outlive the endpoint; NULL: open), the same
 * checker receivers use: 401 with WWW-Authenticate without a valid credential. A per-tenant
 * token sees only its tenant's data: /metrics (every tenant's counts) answers it 403, and the
 * pages get its tenant. Call before the loop runs; logs a warning when the endpoint is not on
 * loopback and auth is NULL (every /metrics and /ui reader on the network is then welcome). */
void hs_admin_set_auth(struct hs_admin *a, struct hs_auth *auth);
/* /healthz and /healthz/ready answer 503 until the first hs_admin_set_ready(a, true) (starting)
 * and after hs_admin_set_ready(a, false) (shutting down); /healthz/live answers 200 throughout. */
void hs_admin_set_ready(struct hs_admin *a, bool ready);
/* Readiness also fails while a health source (hs_metrics_health) has been failing for at least
 * threshold_ms; 0 (the default) leaves exporters out of readiness. */
void hs_admin_set_failure_threshold(struct hs_admin *a, uint64_t threshold_ms);
/* A page of the admin endpoint, answered as any HTTP handler answers. `tenant` is who asks:
 * NULL for an operator (no admin_auth, or a credential without a tenant), else the tenant of
 * the caller's per-tenant token, whose answer must hold that tenant's data only. */
typedef void (*hs_admin_handler)(void *ud, struct hs_http_request *req, const char *tenant);
/* More pages on the admin endpoint (the correlator's /ui): a GET or HEAD whose path is `prefix`
 * or starts with `prefix/` goes to handler(ud, req, tenant), once admin_auth let it through.
 * At most HS_ADMIN_MAX_ROUTES; returns 0, HS_EEXIST when another has the prefix, or HS_E2BIG.
 * A component routes in start and must unroute in shutdown (the admin endpoint outlives every
 * component). */
#define HS_ADMIN_MAX_ROUTES 8
int hs_admin_route(struct hs_admin *a, const char *prefix, hs_admin_handler handler, void *ud);
/* Removes every route of ud. */
void hs_admin_unroute(struct hs_admin *a, void *ud);
void hs_admin_close(struct hs_admin *a, void (*done)(void *ud), void *ud);

#endif
