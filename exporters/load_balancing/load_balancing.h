/* load_balancing.h: the load_balancing exporter's one entry point besides its component type:
 * a resolver's answer given directly (tests, which drive topology changes without DNS). */
#ifndef HS_EXPORTERS_LOAD_BALANCING_H
#define HS_EXPORTERS_LOAD_BALANCING_H

#include <stddef.h>

struct hs_component;

/* `c` is a started load_balancing exporter: the backends become `names` (any order, copied), as
 * when the resolver's answer changes. */
void hs_load_balancing_answer(struct hs_component *c, const char *const *names, size_t n);

#endif
