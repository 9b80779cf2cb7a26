/* exporter.h: the exporter helper (otelcol's exporterhelper): what every network exporter has
 * in common, so an exporter says only what it sends and how it encodes it: the config rows
 * timeout, headers, sending_queue, retry_on_failure and tls; the component lifecycle (start,
 * ready, consume, shutdown, destroy); and the sending queue (sender.h) with its retries,
 * persistence and transport. */
#ifndef HS_EXPORTER_H
#define HS_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/component.h"
#include "core/config.h"
#include "net/tls.h"
#include "sender.h"

/* ---- the shared config rows ----------------------------------------------------------------
 * Embed the struct in the exporter's config and name the rows with one line of its table, where
 * they are to stand in the reference:
 *     {"exporter", HS_CFG_INLINE, offsetof(struct my_config, common), .sub = hs_exporter_fields},
 */
struct hs_exporter_config {
    uint64_t timeout_ms;      /* of one request */
    struct hs_strmap headers; /* sent with every request, after the exporter's own */
    struct hs_sender_queue_config queue;
    struct hs_sender_retry_config retry;
    struct hs_tls_client_config tls;
};

extern const struct hs_config_field hs_exporter_fields[];

/* ---- what an exporter brings ---------------------------------------------------------------- */

struct hs_exporter;

/* One const instance per exporter type. The hooks are the sender's (sender.h); their ud is the
 * instance's struct hs_exporter. */
struct hs_exporter_ops {
    unsigned signal; /* HS_SIGNAL_TRACES or HS_SIGNAL_PROFILES: what an item is */
    /* The exporter's field table: the config given to hs_exporter_init is freed by it. */
    const struct hs_config_field *fields;
    int (*encode)(void *ud, void *item, uint32_t part, struct hs_sender_request *req);
    uint32_t (*on_success)(void *ud, void *item, const struct hs_sender_request *req,
                           const struct hs_http_result *res); /* optional */
    int (*classify)(void *ud, const struct hs_sender_request *req,
                    struct hs_http_result *res); /* optional */
    /* Optional: the requests an item makes (1 when NULL), e.g. one per profile. */
    uint32_t (*parts)(const struct hs_exporter *x, const void *item);
    /* Optional: how requests travel (sender.h); NULL is HTTP. Its transport_ud is the
     * instance's struct hs_exporter. */
    const struct hs_sender_transport *transport;
};

/* ---- an instance ---------------------------------------------------------------------------
 * Put it first in the exporter's struct; recover the exporter with
 * hs_container_of(c, struct mine, x.base) from a component, hs_container_of(ud, struct mine, x)
 * in a hook. The exporter's create fills the fields above the line; the rest is the helper's.
 *
 * An instance lives as a component does: create (hs_exporter_init, hs_exporter_configure), start,
 * consume, shutdown, destroy. The core drives those made from the config; an exporter that owns
 * others (load_balancing, one per backend) may create and shut them down at any time: it sets
 * base.id before their first use, as the core does. The gauges and health source start
 * registers are removed once shutdown is done (counters stay: they never go back). */
struct hs_exporter {
    struct hs_component base;
    char *url;             /* where requests go unless one builds its own; freed by the helper */
    const char *note;      /* after the URL in the start log line, e.g. " (OTLP/gRPC, TLS)" */
    unsigned client_flags; /* HTTP: hs_http_client_new_flags */
    bool tenant_fixed;     /* the backend's tenant is configured: batches' tenants are not sent */
    /* load_balancing: the backend this instance serves, set with base.id before first use
     * (NULL otherwise): its metrics carry backend= and signal= labels beside exporter=, its logs
     * and /healthz say "<id>/<backend>/<spans|profiles>", which also names its store file. */
    const char *backend;
    /* An exporter carrying two signals (otlp), each on its own instance, marks one so (before
     * first use): its logs and /healthz say "<id>/<spans|profiles>", which also names its store
     * file, and its metrics carry signal= beside exporter=. */
    bool name_signal;
    /* ---- the helper's ---- */
    const struct hs_exporter_ops *ops;
    void *conf;                              /* the exporter's config (ops->fields) */
    const struct hs_exporter_config *common; /* its shared rows */
    struct hs_tls_client *tls;               /* the files of common->tls, reloaded on SIGHUP */
    char **headers;                          /* the exporter's lines, then the configured */
    size_t header_count, header_cap;
    struct hs_sender *sender; /* made at first use: the core sets base.id after create */
    char *sender_name, *sender_labels; /* with backend */
    bool closing;
    hs_done_cb done;
};

/* Begins an instance in create (x zeroed, as hs_xcalloc leaves it). conf is the exporter's
 * config as decoded by ops->fields and common its shared rows; both are freed with x. No I/O. */
void hs_exporter_init(struct hs_exporter *x, const struct hs_exporter_ops *ops, void *conf,
                      const struct hs_exporter_config *common);
/* Reads what the shared rows name: the TLS files now, so a missing or broken one is an error at
 * its key (cfg: the exporter's map, path its key path). Marks tenant_fixed when an
 * X-Scope-OrgID header is configured. Returns 0 or HS_EINVAL. */
int hs_exporter_configure(struct hs_exporter *x, const struct hs_config_node *cfg, const char *path,
                          struct hs_error *err);
/* Adds a "Name: value" line to every request (aborts when out of memory, as hs_xmalloc does).
 * The configured headers follow the exporter's lines: the helper appends them at first use. */
void hs_exporter_header(struct hs_exporter *x, const char *name, const char *value);
/* Is `name` among the configured headers? (Case-insensitive.) */
bool hs_exporter_header_configured(const struct hs_exporter *x, const char *name);
/* Adds X-Scope-OrgID: tenant to req, unless tenant_fixed or tenant is NULL or "": a batch's
 * tenant travels with it. Returns 0 or hs_sender_request_header's code. */
int hs_exporter_tenant_header(const struct hs_exporter *x, struct hs_sender_request *req,
                              const char *tenant);

/* The component hooks, for the exporter's struct hs_component_type: open the sending queue and
 * its transport, say whether an item would be taken, submit (one item per batch, bytes and
 * items counted; an empty profiles batch has nothing to send and is dropped), drain and close,
 * free. */
int hs_exporter_start(struct hs_component *c, const struct hs_host *host);
bool hs_exporter_ready(struct hs_component *c);
int hs_exporter_consume_traces(struct hs_component *c, struct hs_traces *batch);
int hs_exporter_consume_profiles(struct hs_component *c, struct hs_profiles *batch);
void hs_exporter_shutdown(struct hs_component *c, hs_done_cb done);
void hs_exporter_destroy(struct hs_component *c);

/* A network exporter's struct hs_component_type: its YAML name, signals (HS_SIGNAL_*), field
 * table, create and one-line doc are the exporter's; the rest is the helper's (both consume hooks
 * are set: the core calls only the one of the type's signals). otelcol's exporter.NewFactory. */
#define HS_EXPORTER_TYPE(type_name, type_signals, type_fields, type_create, type_doc)              \
    {                                                                                              \
        .name = (type_name), .kind = HS_KIND_EXPORTER, .signals = (type_signals),                  \
        .doc = (type_doc), .fields = (type_fields), .create = (type_create),                       \
        .start = hs_exporter_start, .consume_traces = hs_exporter_consume_traces,                  \
        .consume_profiles = hs_exporter_consume_profiles, .ready = hs_exporter_ready,              \
        .shutdown = hs_exporter_shutdown, .destroy = hs_exporter_destroy,                          \
    }

/* Queues item (taken, on success and on error alike), as hs_sender_submit: for an exporter's
 * own consume. Returns 0 or HS_EAGAIN (full, or shutting down). */
int hs_exporter_submit(struct hs_exporter *x, void *item, size_t bytes, uint32_t count,
                       uint32_t parts);

/* For an exporter that sends pprof (pyroscope; nats and load_balancing, which carry pprof on):
 * converts an OTLP batch to pprof once (hs_profiles_to_pprof), in place. A pprof batch is left
 * as it is. Returns false when the conversion failed: the batch is then dropped, counted
 * (reason="convert_failed"), logged at most as often as `rl` allows, and released. */
struct hs_ratelimit;
bool hs_exporter_profiles_to_pprof(struct hs_component *c, struct hs_ratelimit *rl,
                                   struct hs_profiles *b);

/* ---- for an exporter made of others (load_balancing: two per backend) -------------------- */

/* hs_exporter_submit with the routing key kept beside the item (hs_sender_submit_keyed). */
int hs_exporter_submit_keyed(struct hs_exporter *x, void *item, size_t bytes, uint32_t count,
                             uint32_t parts, uint64_t key);
/* Would n more items be taken now (hs_sender_room)? */
bool hs_exporter_room(struct hs_exporter *x, uint32_t n);
/* The requests an item makes (ops->parts, or 1). */
uint32_t hs_exporter_parts(const struct hs_exporter *x, const void *item);
/* hs_sender_evict and hs_sender_adopt on the instance's queue. */
void hs_exporter_evict(struct hs_exporter *x, hs_sender_move_fn fn, void *ud);
int hs_exporter_adopt(struct hs_exporter *x, struct hs_sender_moved *m);
/* Items held: queued, in flight, waiting to retry. */
uint32_t hs_exporter_held(const struct hs_exporter *x);

#endif
