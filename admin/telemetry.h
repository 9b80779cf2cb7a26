/* telemetry.h: service.telemetry: the log settings and the admin endpoint, as the service runs
 * them beside its pipelines (struct hs_telemetry_ops, core/service.h). cmd/main.c hands this to
 * the service it loads; the core knows neither the admin endpoint nor the network. */
#ifndef HS_ADMIN_TELEMETRY_H
#define HS_ADMIN_TELEMETRY_H

#include "core/service.h"

extern const struct hs_telemetry_ops hs_admin_telemetry;

#endif
