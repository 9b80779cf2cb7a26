/* file.c: the file exporter (stub while being written). */
#include <stdlib.h>

#include "core/component.h"

static const struct hs_config_field file_fields[] = {
    {0},
};

const struct hs_component_type hs_exporter_file = {
    .name = "file",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_TRACES,
    .fields = file_fields,
};
