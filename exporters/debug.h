/* debug.h: the debug exporter's one hook for tests: where its lines go (stdout by default). */
#ifndef HS_EXPORTERS_DEBUG_H
#define HS_EXPORTERS_DEBUG_H

#include <stdio.h>

struct hs_component;

/* `c` must be a debug exporter instance; `out` is borrowed and must outlive it. */
void hs_exporter_debug_set_output(struct hs_component *c, FILE *out);

#endif
