/* registry.c: every component type, in one place (style.md §3). */
#include "component.h"

#include <string.h>

extern const struct hs_component_type hs_receiver_otlp;
extern const struct hs_component_type hs_receiver_pyroscope;
extern const struct hs_component_type hs_receiver_nats;
extern const struct hs_component_type hs_processor_batch;
extern const struct hs_component_type hs_processor_correlator;
extern const struct hs_component_type hs_processor_memory_limiter;
extern const struct hs_component_type hs_exporter_otlp;
extern const struct hs_component_type hs_exporter_otlphttp;
extern const struct hs_component_type hs_exporter_otlp_http;
extern const struct hs_component_type hs_exporter_otlp_grpc;
extern const struct hs_component_type hs_exporter_file;
extern const struct hs_component_type hs_exporter_debug;
extern const struct hs_component_type hs_exporter_pyroscope;
extern const struct hs_component_type hs_exporter_load_balancing;
extern const struct hs_component_type hs_exporter_loadbalancing;
extern const struct hs_component_type hs_exporter_nats;

static const struct hs_component_type *const component_types[] = {
    &hs_receiver_otlp, &hs_receiver_pyroscope, &hs_processor_memory_limiter, &hs_processor_correlator, &hs_processor_batch,
    &hs_exporter_otlp,
    &hs_exporter_otlphttp, &hs_exporter_otlp_http, &hs_exporter_otlp_grpc,
    &hs_exporter_file, &hs_exporter_debug,
    &hs_exporter_pyroscope,
    &hs_exporter_load_balancing, &hs_exporter_loadbalancing,
    &hs_receiver_nats, &hs_exporter_nats,
};

const struct hs_component_type *hs_registry_find(enum hs_kind kind, const char *type_name)
{
    for (size_t i = 0; i < sizeof(component_types) / sizeof(component_types[0]); i++)
        if (component_types[i]->kind == kind && strcmp(component_types[i]->name, type_name) == 0)
            return component_types[i];
    return NULL;
}

const struct hs_component_type *const *hs_registry_all(size_t *count)
{
    *count = sizeof(component_types) / sizeof(component_types[0]);
    return component_types;
}

const char *hs_kind_name(enum hs_kind kind)
{
    switch (kind) {
    case HS_KIND_RECEIVER:
        return "receivers";
    case HS_KIND_PROCESSOR:
        return "processors";
    case HS_KIND_EXPORTER:
        return "exporters";
    }
    return "?";
}
