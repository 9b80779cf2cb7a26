/* pyroscope.h: what the load_balancing exporter needs of the pyroscope exporter: its settings as
 * `protocol.pyroscope` decodes them, and one instance per backend, whose endpoint is given apart
 * from the YAML (exporters/load_balancing/). */
#ifndef HS_EXPORTERS_PYROSCOPE_H
#define HS_EXPORTERS_PYROSCOPE_H

#include <stdbool.h>
#include <stdint.h>

#include "exporters/helper/exporter.h"

struct hs_pyroscope_basic_auth {
    char *username;
    char *password;
};

struct hs_pyroscope_config {
    char *endpoint;
    uint32_t port; /* load_balancing: every backend's Pyroscope port */
    char *protocol;
    bool has_basic_auth;
    struct hs_pyroscope_basic_auth basic_auth;
    char *tenant_id;
    char *compression;
    struct hs_exporter_config common; /* timeout, headers, sending_queue, retry_on_failure, tls */
};

/* `protocol.pyroscope`: the pyroscope exporter's rows but endpoint, plus port. */
extern const struct hs_config_field hs_pyroscope_backend_fields[];

/* A pyroscope exporter with tmpl's settings (copied; decoded with hs_pyroscope_backend_fields)
 * sending to `endpoint` (http://host:port, or https://). As hs_otlp_backend_new otherwise. */
int hs_pyroscope_backend_new(const struct hs_pyroscope_config *tmpl, const char *endpoint,
                             const struct hs_config_node *cfg, const char *path,
                             struct hs_component **out, struct hs_error *err);

#endif
