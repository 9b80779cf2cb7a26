/* admin.h: the admin endpoint (service.telemetry.admin): /healthz and /metrics. */
#ifndef HS_ADMIN_H
#define HS_ADMIN_H

#include <stdbool.h>
#include <uv.h>

#include "errors.h"

struct hs_admin;
struct hs_metrics;

int hs_admin_start(uv_loop_t *loop, const char *endpoint, struct hs_metrics *metrics,
                   struct hs_admin **out, struct hs_error *err);
/* /healthz answers 503 while not ready (e.g. shutting down). */
void hs_admin_set_ready(struct hs_admin *a, bool ready);
void hs_admin_close(struct hs_admin *a, void (*done)(void *ud), void *ud);

#endif
