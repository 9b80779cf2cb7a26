/* debug.c: the debug exporter (stub while being written). */
#include <stdlib.h>

#include "core/component.h"

static const struct hs_config_field debug_fields[] = {
    {0},
};

const struct hs_component_type hs_exporter_debug = {
    .name = "debug",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES,
    .fields = debug_fields,
};
