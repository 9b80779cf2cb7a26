/* component.h: the component contract (design.md §5). Every receiver, processor and exporter is
 * one const struct hs_component_type, listed in core/registry.c. */
#ifndef HS_COMPONENT_H
#define HS_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "consumer.h"
#include "errors.h"

struct hs_traces;
struct hs_profiles;
struct hs_metrics;
struct hs_admin;
struct hs_component;
struct hs_service;

enum hs_kind { HS_KIND_RECEIVER, HS_KIND_PROCESSOR, HS_KIND_EXPORTER };

typedef void (*hs_done_cb)(struct hs_component *c);

/* What start() gets: the loop, the metrics registry, and where to send data. */
struct hs_host {
    uv_loop_t *loop;
    struct hs_metrics *metrics;
    struct hs_admin *admin; /* the admin endpoint, for extra pages (admin/admin.h) */
};

struct hs_component_type {
    const char *name; /* YAML type: "otlp", "batch", ... */
    enum hs_kind kind;
    unsigned signals; /* HS_SIGNAL_* this type handles */
    const char *doc;  /* one line for the config reference */
    const struct hs_config_field *fields;
    /* Processors are one instance per pipeline (as in otelcol) unless `shared`: then one
     * instance per id, which may appear in at most one pipeline per signal. */
    bool shared;
    /* Profiles: the kinds of batch (HS_PROFILES_KIND_*) a receiver makes or an exporter takes;
     * 0 is every kind. A profiles pipeline whose receivers make a kind one of its exporters
     * does not take is a config error (processors pass batches on as they are). */
    unsigned profile_kinds;

    /* Decode and check cfg (all problems into err, positioned), allocate; no I/O. On success
     * *out is set and its base fields are filled by the core after return. */
    int (*create)(const struct hs_config_node *cfg, const char *path, struct hs_component **out,
                  struct hs_error *err);
    /* Open listeners and timers. Exporters start first, then processors, then receivers. */
    int (*start)(struct hs_component *c, const struct hs_host *host);
    /* Takes ownership of batch, on success and on error alike. Returns 0, HS_EAGAIN
     * (backpressure: refuse upstream, retryable) or HS_EINVAL (permanent). */
    int (*consume_traces)(struct hs_component *c, struct hs_traces *batch);
    /* The same contract for profiles (pdata/profiles.h). */
    int (*consume_profiles)(struct hs_component *c, struct hs_profiles *batch);
    /* Would consume_traces accept a batch now? NULL means always (or: ask downstream, for
     * processors that pass data on synchronously: the core does that). */
    bool (*ready)(struct hs_component *c);
    /* The same for consume_profiles, for a component whose signals fill apart (a queue each);
     * NULL: ready answers for both. */
    bool (*ready_profiles)(struct hs_component *c);
    /* Stop accepting, drain, close every handle, then call done exactly once. Safe before start
     * and twice. The core frees the component only after done, with destroy. */
    void (*shutdown)(struct hs_component *c, hs_done_cb done);
    void (*destroy)(struct hs_component *c);
};

/* The part of every component instance the core owns; embed it first-class in your struct and
 * recover yours with hs_container_of. */
struct hs_component {
    const struct hs_component_type *type;
    char *id;                       /* "otlp/tempo" */
    char *pipeline;                 /* for per-pipeline processors, else NULL */
    struct hs_consumer *next;       /* receivers and processors: where traces go */
    struct hs_consumer *next_profiles; /* where profiles go (components handling both) */
    unsigned signals;                  /* HS_SIGNAL_* of the pipelines it is in, set before start;
                                        * 0 outside a service (tests): every signal of its type */
    struct hs_metrics *metrics;     /* set before start */
    uv_loop_t *loop;                /* set before start */
    struct hs_service *service;     /* the core's; components leave it alone */
};

bool hs_component_ready(struct hs_component *c);

/* core/registry.c */
const struct hs_component_type *hs_registry_find(enum hs_kind kind, const char *type_name);
const struct hs_component_type *const *hs_registry_all(size_t *count);
const char *hs_kind_name(enum hs_kind kind); /* "receivers", "processors", "exporters" */

#endif
