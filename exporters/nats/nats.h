/* nats.h: what the `nats` exporter and receiver agree on beyond the subjects of pdata/bus.h:
 * which partition a (tenant, service) lives in. Both components are in core/registry.c. */
#ifndef HS_NATS_COMPONENTS_H
#define HS_NATS_COMPONENTS_H

#include <stdint.h>

#include "core/common.h"

/* The partition 0..partitions-1 of (tenant, service): jump hash of the load_balancing routing
 * key (exporters/load_balancing/ring.h), so one (tenant, service) meets one correlator whichever
 * tier routes it, and growing the partition count moves only the keys the new partition takes.
 * Stable across processes and versions (a unit test pins values). */
uint32_t hs_nats_partition(struct hs_str tenant, struct hs_str service, uint32_t partitions);

#endif
