/* latency.c: per (tenant, service, span name) streaming latency baseline, so "slow" can be
 * relative (slow.factor x p50) as well as absolute. A fixed log-bucket histogram per key, a
 * bounded number of keys, least recently used out first (counted). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "processors/correlator/correlator_int.h"

/* Bucket 0 holds durations under 100 us; bucket i > 0 holds [100us x 2^((i-1)/2), x sqrt 2):
 * 64 buckets reach past 200 days. Each bucket also sums its durations, so the p50 reported is
 * the mean of the median bucket: exact when latencies are steady, within one bucket otherwise.
 * Counts are halved once a key has seen CORR_LAT_HALVE spans, so the baseline follows change. */
#define CORR_LAT_HALVE 1024
#define CORR_LAT_BASE_NS 100000.0

struct corr_lat {
    struct corr_lat *hnext;
    struct hs_queue lru; /* in the latency's, most recently used first */
    uint64_t hash;
    uint32_t n;
    uint32_t keylen;
    uint32_t counts[CORR_LAT_BUCKETS];
    uint64_t sums[CORR_LAT_BUCKETS];
    char key[]; /* tenant '\0' service '\0' name */
};

static uint64_t lat_hash(struct hs_str t, struct hs_str s, struct hs_str n)
{
    uint64_t h = corr_hash_bytes(t.ptr, t.len, 0xcbf29ce484222325ULL);
    return corr_hash_bytes(n.ptr, n.len, corr_hash_bytes(s.ptr, s.len, h));
}

void hs_corr_latency_init(struct corr_latency *l, struct corr_stats *stats)
{
    memset(l, 0, sizeof(*l));
    hs_queue_init(&l->lru);
    l->mask = 1023;
    l->table = hs_xcalloc(l->mask + 1, sizeof(*l->table));
    l->stats = stats;
}

void hs_corr_latency_free(struct corr_latency *l)
{
    while (!hs_queue_empty(&l->lru)) {
        struct corr_lat *e = hs_container_of(hs_queue_head(&l->lru), struct corr_lat, lru);
        hs_queue_remove(&e->lru);
        free(e);
    }
    free(l->table);
    memset(l, 0, sizeof(*l));
    hs_queue_init(&l->lru);
}

size_t hs_corr_latency_bytes(const struct corr_latency *l)
{
    return (l->mask + 1) * sizeof(*l->table) + l->count * (sizeof(struct corr_lat) + 64);
}

static bool key_eq(const struct corr_lat *e, struct hs_str t, struct hs_str s, struct hs_str n)
{
    if (e->keylen != t.len + s.len + n.len + 2)
        return false;
    const char *k = e->key;
    return memcmp(k, t.ptr, t.len) == 0 && k[t.len] == '\0' &&
           memcmp(k + t.len + 1, s.ptr, s.len) == 0 && k[t.len + 1 + s.len] == '\0' &&
           memcmp(k + t.len + s.len + 2, n.ptr, n.len) == 0;
}

static void lat_evict_tail(struct corr_latency *l)
{
    struct corr_lat *e = hs_container_of(l->lru.prev, struct corr_lat, lru);
    struct corr_lat **pp = &l->table[e->hash & l->mask];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    hs_queue_remove(&e->lru);
    free(e);
    l->count--;
    hs_counter_add(l->stats->ev_latency, 1);
}

static unsigned lat_bucket(uint64_t ns)
{
    if (ns < (uint64_t)CORR_LAT_BASE_NS)
        return 0;
    double b = 1.0 + floor(2.0 * log2((double)ns / CORR_LAT_BASE_NS));
    return b >= CORR_LAT_BUCKETS - 1 ? CORR_LAT_BUCKETS - 1 : (unsigned)b;
}

static uint64_t lat_p50(const struct corr_lat *e)
{
    uint32_t want = (e->n + 1) / 2, seen = 0;
    for (unsigned i = 0; i < CORR_LAT_BUCKETS; i++) {
        seen += e->counts[i];
        if (seen >= want && e->counts[i])
            return e->sums[i] / e->counts[i];
    }
    return 0;
}

uint64_t hs_corr_latency_observe(struct corr_latency *l, struct hs_str tenant,
                                 struct hs_str service, struct hs_str name, uint64_t dur_ns,
                                 uint32_t *n)
{
    uint64_t h = lat_hash(tenant, service, name);
    struct corr_lat *e = l->table[h & l->mask];
    while (e && !(e->hash == h && key_eq(e, tenant, service, name)))
        e = e->hnext;
    if (e) {
        hs_queue_remove(&e->lru);
    } else {
        if (l->count >= CORR_LAT_KEYS)
            lat_evict_tail(l);
        size_t klen = tenant.len + service.len + name.len + 2;
        e = hs_xcalloc(1, sizeof(*e) + klen);
        e->hash = h;
        e->keylen = (uint32_t)klen;
        memcpy(e->key, tenant.ptr, tenant.len);
        memcpy(e->key + tenant.len + 1, service.ptr, service.len);
        memcpy(e->key + tenant.len + service.len + 2, name.ptr, name.len);
        e->hnext = l->table[h & l->mask];
        l->table[h & l->mask] = e;
        l->count++;
    }
    hs_queue_insert_head(&l->lru, &e->lru);
    *n = e->n;
    uint64_t p50 = e->n ? lat_p50(e) : 0;
    if (e->n >= CORR_LAT_HALVE) {
        e->n = 0;
        for (unsigned i = 0; i < CORR_LAT_BUCKETS; i++) {
            uint32_t c = e->counts[i];
            e->counts[i] = c / 2;
            e->sums[i] = c ? e->sums[i] / c * (c / 2) : 0;
            e->n += e->counts[i];
        }
    }
    unsigned b = lat_bucket(dur_ns);
    e->counts[b]++;
    e->sums[b] += dur_ns;
    e->n++;
    return p50;
}
