/* seen.c: when each (tenant, service) was first seen in spans, so a slow span of a service
 * whose first profile is still to come waits for it (cold start), and one of a service that has
 * shown for first_profile_wait without profiles does not. Bounded, least recently seen out first
 * (counted); a service silent for `retention` is forgotten, so an app back after a pause is new. */
#include <stdlib.h>
#include <string.h>

#include "processors/correlator/correlator_int.h"

struct corr_seen_entry {
    struct corr_seen_entry *hnext;
    struct hs_queue lru; /* in the table's, most recently seen first */
    uint64_t hash;
    uint64_t first_ms, last_ms;
    uint32_t keylen;
    char key[]; /* tenant '\0' service */
};

static uint64_t seen_hash(struct hs_str t, struct hs_str s)
{
    return corr_hash_bytes(s.ptr, s.len, corr_hash_bytes(t.ptr, t.len, 0xcbf29ce484222325ULL));
}

/* The service seen least recently, or NULL. */
static struct corr_seen_entry *seen_last(const struct corr_seen *t)
{
    return hs_queue_empty(&t->lru) ? NULL
                                   : hs_container_of(t->lru.prev, struct corr_seen_entry, lru);
}

void hs_corr_seen_init(struct corr_seen *t, uint32_t cap, struct hs_counter **evicted)
{
    memset(t, 0, sizeof(*t));
    hs_queue_init(&t->lru);
    t->cap = cap ? cap : 1;
    t->mask = 255;
    while (t->mask + 1 < (size_t)t->cap && t->mask < (1u << 20) - 1)
        t->mask = t->mask * 2 + 1;
    t->table = hs_xcalloc(t->mask + 1, sizeof(*t->table));
    t->bytes = (t->mask + 1) * sizeof(*t->table);
    t->evicted = evicted;
}

void hs_corr_seen_free(struct corr_seen *t)
{
    for (struct corr_seen_entry *e; (e = seen_last(t));) {
        hs_queue_remove(&e->lru);
        free(e);
    }
    free(t->table);
    memset(t, 0, sizeof(*t));
    hs_queue_init(&t->lru);
}

static void seen_remove(struct corr_seen *t, struct corr_seen_entry *e)
{
    struct corr_seen_entry **pp = &t->table[e->hash & t->mask];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    hs_queue_remove(&e->lru);
    t->count--;
    t->bytes -= sizeof(*e) + e->keylen;
    free(e);
}

uint64_t hs_corr_seen_touch(struct corr_seen *t, struct hs_str tenant, struct hs_str service,
                            uint64_t now_ms)
{
    uint64_t h = seen_hash(tenant, service);
    size_t keylen = tenant.len + 1 + service.len;
    for (struct corr_seen_entry *e = t->table[h & t->mask]; e; e = e->hnext) {
        if (e->hash != h || e->keylen != keylen || memcmp(e->key, tenant.ptr, tenant.len) != 0 ||
            e->key[tenant.len] != '\0' ||
            memcmp(e->key + tenant.len + 1, service.ptr, service.len) != 0)
            continue;
        e->last_ms = now_ms;
        if (hs_queue_head(&t->lru) != &e->lru) {
            hs_queue_remove(&e->lru);
            hs_queue_insert_head(&t->lru, &e->lru);
        }
        return e->first_ms;
    }
    for (struct corr_seen_entry *old; t->count >= t->cap && (old = seen_last(t));) {
        seen_remove(t, old);
        hs_counter_add(*t->evicted, 1);
    }
    struct corr_seen_entry *e = hs_xmalloc(sizeof(*e) + keylen);
    e->hash = h;
    e->first_ms = e->last_ms = now_ms;
    e->keylen = (uint32_t)keylen;
    memcpy(e->key, tenant.ptr, tenant.len);
    e->key[tenant.len] = '\0';
    memcpy(e->key + tenant.len + 1, service.ptr, service.len);
    e->hnext = t->table[h & t->mask];
    t->table[h & t->mask] = e;
    hs_queue_insert_head(&t->lru, &e->lru);
    t->count++;
    t->bytes += sizeof(*e) + keylen;
    return now_ms;
}

void hs_corr_seen_expire(struct corr_seen *t, uint64_t now_ms, uint64_t idle_ms)
{
    for (struct corr_seen_entry *old; (old = seen_last(t)) && old->last_ms + idle_ms < now_ms;)
        seen_remove(t, old);
}
