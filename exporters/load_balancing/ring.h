/* ring.h: which backend owns a routing key, for the load_balancing exporter: rendezvous
 * (highest random weight) hashing over a set of backend names, plus the routing-key hashes
 * every hotspan of a fleet must compute alike, and jump hash for numbered partitions (NATS).
 *
 * Why rendezvous and not a ketama ring (otelcol's loadbalancing exporter: crc32 points, 100 per
 * endpoint) or jump hash:
 * - Movement is exactly the minimum, with no tuning: removing a backend moves only its keys,
 *   spread over the others in proportion; adding one moves to it only the keys it now owns
 *   (1/(N+1) of them on average). A ketama ring moves only the right keys too, but how many
 *   each backend owns varies with the vnode count (about +-10% at 100 vnodes, see
 *   bench/bench_ring.c); rendezvous balances like independent draws (about +-1% at 100k keys).
 * - The order of the scores is a failover list for free: a key's second choice is the backend
 *   it would move to if its first were removed (hs_ring_rank), so re-routing a dead backend's
 *   keys sends each to where a resolver change would have put it anyway.
 * - It costs O(N) per lookup (one 64-bit mix per backend: 8 ns at 2 backends, 47 at 16), but
 *   lookups are per (tenant, service) and a batch's keys can be cached; N is a handful of
 *   gateways. Jump hash is O(log N) with no memory but needs backends numbered 0..N-1 and can
 *   only drop the last one, which fits a fixed partition count, not DNS answers; so it is here
 *   only for partitions (hs_ring_jump).
 * Everything is pure arithmetic on the bytes of names and keys (no seed from the process, no
 * pointer, no insertion order), so two hotspans with the same backend set agree. */
#ifndef HS_LB_RING_H
#define HS_LB_RING_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

struct hs_ring;

/* A ring over `names` (copied): sorted, duplicates and empty names dropped, so the order given
 * does not matter. An empty ring is allowed (every pick is -1). Aborts only if out of memory. */
struct hs_ring *hs_ring_new(const char *const *names, size_t n);
void hs_ring_free(struct hs_ring *r);

/* The number of distinct backends, and the name of the i-th in byte order (valid while the
 * ring lives). */
size_t hs_ring_size(const struct hs_ring *r);
const char *hs_ring_name(const struct hs_ring *r, size_t i);
/* The index of `name`, or -1. */
int hs_ring_find(const struct hs_ring *r, const char *name);

/* The index of the backend that owns `key` (a hs_ring_key_* value), or -1 if the ring is
 * empty. */
int hs_ring_pick(const struct hs_ring *r, uint64_t key);
/* Writes up to `max` backend indexes into `out`, best first: out[0] is hs_ring_pick, out[1]
 * is where the key goes if out[0] is removed, and so on. Returns how many were written. */
size_t hs_ring_rank(const struct hs_ring *r, uint64_t key, uint32_t *out, size_t max);

/* Routing keys (routing_key: tenant_service, service, traceID). Stable across processes,
 * versions and architectures: changing them re-routes a whole fleet, so a unit test pins
 * their values. */
uint64_t hs_ring_key_tenant_service(struct hs_str tenant, struct hs_str service);
uint64_t hs_ring_key_service(struct hs_str service);
uint64_t hs_ring_key_trace_id(const uint8_t trace_id[16]);

/* A 64-bit hash of bytes (little-endian word at a time, splitmix64 mixing). */
uint64_t hs_ring_hash(const void *p, size_t n, uint64_t seed);

/* Jump consistent hash (Lamping and Veach, 2014): the bucket 0..buckets-1 of `key`; growing
 * buckets by one moves only 1/(buckets) of the keys, all to the new bucket. buckets >= 1. */
uint32_t hs_ring_jump(uint64_t key, uint32_t buckets);

#endif
