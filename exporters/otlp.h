/* otlp.h: what the load_balancing exporter needs of the otlp exporter: its settings as
 * `protocol.otlp` decodes them, and one instance per backend, whose endpoint is given apart from
 * the YAML (exporters/load_balancing/). */
#ifndef HS_EXPORTERS_OTLP_H
#define HS_EXPORTERS_OTLP_H

#include <stdint.h>

#include "exporters/helper/exporter.h"

struct hs_otlp_config {
    char *protocol;
    char *endpoint;
    char *traces_endpoint;
    char *profiles_endpoint;
    uint32_t port; /* load_balancing: a backend's OTLP port when its name has none */
    char *compression;
    char *encoding;
    struct hs_exporter_config common; /* timeout, headers, sending_queue, retry_on_failure, tls */
};

/* `protocol.otlp`: the otlp exporter's rows but endpoint and the *_endpoint ones, plus port. */
extern const struct hs_config_field hs_otlp_backend_fields[];

/* The OTLP port of a backend named without one: `port`, else 4317 for grpc and 4318 for
 * http/protobuf (the OTLP defaults, a hotspan gateway's too). */
uint16_t hs_otlp_backend_port(const struct hs_otlp_config *c);

/* An otlp exporter of spans (one signal: load_balancing sends profiles to Pyroscope) with tmpl's
 * settings (copied; decoded with hs_otlp_backend_fields) sending to `endpoint` (http://host:port,
 * or https:// for TLS; for grpc the same, meaning h2c or TLS). The checks are create's: problems go
 * to err, positioned under cfg (tmpl's node) when it is given. The caller sets base.id (and
 * x.backend) before first use, as the core does. Returns 0 or HS_EINVAL. */
int hs_otlp_backend_new(const struct hs_otlp_config *tmpl, const char *endpoint,
                        const struct hs_config_node *cfg, const char *path,
                        struct hs_component **out, struct hs_error *err);

#endif
