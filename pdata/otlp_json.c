/* otlp_json.c: OTLP/JSON <-> wire conversion (stub while being written). */
#include "pdata/otlp_json.h"

#include <stdio.h>

#include "core/buf.h"
#include "core/errors.h"

int hs_otlp_json_to_wire(const char *json, size_t len, struct hs_buf *out, char *err,
                         size_t errlen)
{
    (void)json;
    (void)len;
    (void)out;
    snprintf(err, errlen, "not implemented");
    return HS_EUNSUPPORTED;
}

int hs_otlp_wire_to_json(const uint8_t *p, size_t len, struct hs_buf *out)
{
    (void)p;
    (void)len;
    (void)out;
    return HS_EUNSUPPORTED;
}
