/* service.h: a running configuration: the components of a config file, the pipeline graph that
 * joins them, and their start and ordered shutdown; with service.telemetry (logs, the admin
 * endpoint) run beside them through the struct hs_telemetry_ops its loader hands over. */
#ifndef HS_SERVICE_H
#define HS_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "component.h"
#include "config.h"
#include "errors.h"

struct hs_admin;
struct hs_metrics;
struct hs_service;
struct hs_telemetry;

/* What runs beside the pipelines for the operator, configured under service.telemetry: the log
 * settings and the admin endpoint (admin/telemetry.c's hs_admin_telemetry, which cmd/main.c
 * hands to the service). The core calls it and knows neither. */
struct hs_telemetry_ops {
    /* service.telemetry's rows, for the config reference */
    const struct hs_config_field *fields;
    /* Decodes and checks service.telemetry (`node` may be NULL: every default), every problem
     * into err, positioned. Returns its state, to free with free, also when err got some. */
    struct hs_telemetry *(*load)(const struct hs_config_node *node, struct hs_error *err);
    /* Before any component starts: logging, then the admin endpoint serving `metrics`; *admin
     * is what components add pages to (struct hs_host). 0 or a negative code (err says). */
    int (*start)(struct hs_telemetry *t, uv_loop_t *loop, struct hs_metrics *metrics,
                 struct hs_admin **admin, struct hs_error *err);
    /* Every component has started (true), or shutdown has begun (false). */
    void (*set_ready)(struct hs_telemetry *t, bool ready);
    /* After the last component is done: closes, then done(ud). */
    void (*close)(struct hs_telemetry *t, void (*done)(void *ud), void *ud);
    void (*free)(struct hs_telemetry *t);
};

/* Parses and checks a whole config (every error collected into err, positioned) and creates
 * its components; no I/O. `tel` (borrowed for the service's life) runs service.telemetry.
 * Returns 0 or HS_EINVAL. */
int hs_service_load(const char *file, const char *text, size_t len,
                    const struct hs_telemetry_ops *tel, struct hs_service **out,
                    struct hs_error *err);
/* The same for a file on disk (unreadable or oversized files are errors in err). */
int hs_service_load_file(const char *path, const struct hs_telemetry_ops *tel,
                         struct hs_service **out, struct hs_error *err);

/* Starts telemetry (the admin endpoint), then exporters, then processors, then receivers; on
 * failure the started ones are shut down again and a negative code returned (message in
 * err). */
int hs_service_start(struct hs_service *s, uv_loop_t *loop, struct hs_error *err);

/* Ordered drain: receivers stop accepting, processors flush front to back, exporters send what
 * they hold; then done(ud). Safe to call once after start. */
void hs_service_shutdown(struct hs_service *s, void (*done)(void *ud), void *ud);

/* service.shutdown_timeout in ms: how long a drain may take before the process gives up and
 * exits 1 (0 = until everything accepted is sent). */
uint64_t hs_service_shutdown_timeout(const struct hs_service *s);

/* Appends the Markdown reference of the `service:` keys, telemetry's included. */
struct hs_buf;
void hs_service_reference(const struct hs_telemetry_ops *tel, struct hs_buf *out);

/* The receiver or exporter `id` (borrowed), or NULL: what the graph made of it (tests). */
struct hs_component *hs_service_component(struct hs_service *s, enum hs_kind kind, const char *id);

/* Frees a service that was never started, or whose shutdown has completed. */
void hs_service_free(struct hs_service *s);

#endif
