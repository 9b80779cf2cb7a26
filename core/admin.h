/* admin.h: the admin endpoint (service.telemetry.admin): /healthz (/live, /ready) and /metrics. */
#ifndef HS_ADMIN_H
#define HS_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "errors.h"
#include "http_server.h"

struct hs_admin;
struct hs_metrics;
struct hs_tls_server_config;

/* `tls` (borrowed for the call; NULL: plaintext) makes the endpoint TLS-only. */
int hs_admin_start(uv_loop_t *loop, const char *endpoint, const struct hs_tls_server_config *tls,
                   struct hs_metrics *metrics, struct hs_admin **out, struct hs_error *err);
/* /healthz and /healthz/ready answer 503 until the first hs_admin_set_ready(a, true) (starting)
 * and after hs_admin_set_ready(a, false) (shutting down); /healthz/live answers 200 throughout. */
void hs_admin_set_ready(struct hs_admin *a, bool ready);
/* Readiness also fails while a health source (hs_metrics_health) has been failing for at least
 * threshold_ms; 0 (the default) leaves exporters out of readiness. */
void hs_admin_set_failure_threshold(struct hs_admin *a, uint64_t threshold_ms);
/* More pages on the admin endpoint (the correlator's /ui): a GET or HEAD whose path is `prefix`
 * or starts with `prefix/` goes to handler(ud, req), which answers it as any HTTP handler does.
 * At most HS_ADMIN_MAX_ROUTES; returns 0, HS_EEXIST when another has the prefix, or HS_E2BIG.
 * A component routes in start and must unroute in shutdown (the admin endpoint outlives every
 * component). */
#define HS_ADMIN_MAX_ROUTES 8
int hs_admin_route(struct hs_admin *a, const char *prefix, hs_http_handler handler, void *ud);
/* Removes every route of ud. */
void hs_admin_unroute(struct hs_admin *a, void *ud);
void hs_admin_close(struct hs_admin *a, void (*done)(void *ud), void *ud);

#endif
