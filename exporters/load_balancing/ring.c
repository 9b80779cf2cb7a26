/* ring.c: rendezvous hashing over backend names, routing-key hashes and jump hash (ring.h
 * says why rendezvous). */
#include "exporters/load_balancing/ring.h"

#include <stdlib.h>
#include <string.h>

/* Seeds that keep the kinds of hashes apart: a service named like a backend, or a trace id
 * whose bytes spell a service, must not hash alike by construction. */
#define SEED_BACKEND 0x6a09e667f3bcc908ULL
#define SEED_TENANT_SERVICE 0xbb67ae8584caa73bULL
#define SEED_SERVICE 0x3c6ef372fe94f82bULL
#define SEED_TRACE 0xa54ff53a5f1d36f1ULL

struct ring_backend {
    uint64_t hash;
    char *name;
};

struct hs_ring {
    size_t n;
    struct ring_backend b[];
};

/* splitmix64's finalizer: a bijection on 64 bits in which every input bit flips about half of
 * the output bits, so XOR-combined inputs come out as independent draws. */
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Little-endian whatever the host, so a fleet of mixed machines agrees; compilers turn this
 * into one load on little-endian hosts. */
static inline uint64_t load_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

uint64_t hs_ring_hash(const void *data, size_t n, uint64_t seed)
{
    const uint8_t *p = data;
    /* the length goes in first, so "ab" and "ab\0" and ("a", "bc") vs ("ab", "c") differ */
    uint64_t h = mix64(seed ^ ((uint64_t)n * 0x9e3779b97f4a7c15ULL));
    for (; n >= 8; p += 8, n -= 8)
        h = mix64(h ^ load_le(p, 8));
    if (n)
        h = mix64(h ^ load_le(p, n) ^ 0x8000000000000000ULL);
    return h;
}

uint64_t hs_ring_key_tenant_service(struct hs_str tenant, struct hs_str service)
{
    uint64_t h = hs_ring_hash(tenant.ptr, tenant.len, SEED_TENANT_SERVICE);
    return hs_ring_hash(service.ptr, service.len, h);
}

uint64_t hs_ring_key_service(struct hs_str service)
{
    return hs_ring_hash(service.ptr, service.len, SEED_SERVICE);
}

uint64_t hs_ring_key_trace_id(const uint8_t trace_id[16])
{
    return hs_ring_hash(trace_id, 16, SEED_TRACE);
}

static int backend_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ring_backend *)a)->name, ((const struct ring_backend *)b)->name);
}

struct hs_ring *hs_ring_new(const char *const *names, size_t n)
{
    struct hs_ring *r = hs_xmalloc(sizeof(*r) + n * sizeof(r->b[0]));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || !names[i][0])
            continue;
        r->b[k].name = hs_xstrdup(names[i]);
        r->b[k].hash = hs_ring_hash(names[i], strlen(names[i]), SEED_BACKEND);
        k++;
    }
    qsort(r->b, k, sizeof(r->b[0]), backend_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++) {
        if (u && strcmp(r->b[u - 1].name, r->b[i].name) == 0) {
            free(r->b[i].name);
            continue;
        }
        r->b[u++] = r->b[i];
    }
    r->n = u;
    return r;
}

void hs_ring_free(struct hs_ring *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        free(r->b[i].name);
    free(r);
}

size_t hs_ring_size(const struct hs_ring *r)
{
    return r->n;
}

const char *hs_ring_name(const struct hs_ring *r, size_t i)
{
    return i < r->n ? r->b[i].name : NULL;
}

int hs_ring_find(const struct hs_ring *r, const char *name)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, r->b[mid].name);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

static inline uint64_t score(const struct ring_backend *b, uint64_t key)
{
    return mix64(key ^ b->hash);
}

/* Does (sa, a) outrank (sb, b)? Equal scores mean equal backend hashes, i.e. a 64-bit
 * collision of two names; the array is sorted by name, so the lower index wins everywhere. */
static inline int outranks(uint64_t sa, size_t a, uint64_t sb, size_t b)
{
    return sa > sb || (sa == sb && a < b);
}

int hs_ring_pick(const struct hs_ring *r, uint64_t key)
{
    if (r->n == 0)
        return -1;
    size_t best = 0;
    uint64_t best_score = score(&r->b[0], key);
    for (size_t i = 1; i < r->n; i++) {
        uint64_t s = score(&r->b[i], key);
        if (outranks(s, i, best_score, best)) {
            best = i;
            best_score = s;
        }
    }
    return (int)best;
}

size_t hs_ring_rank(const struct hs_ring *r, uint64_t key, uint32_t *out, size_t max)
{
    size_t m = HS_MIN(max, r->n);
    if (m == 0)
        return 0;
    uint64_t top[m];
    size_t k = 0;
    /* insertion into a sorted top-m: m is a handful (the failover depth), N is small */
    for (size_t i = 0; i < r->n; i++) {
        uint64_t s = score(&r->b[i], key);
        size_t j = k < m ? k++ : m;
        if (j == m && !outranks(s, i, top[m - 1], out[m - 1]))
            continue;
        if (j == m)
            j = m - 1;
        while (j > 0 && outranks(s, i, top[j - 1], out[j - 1])) {
            top[j] = top[j - 1];
            out[j] = out[j - 1];
            j--;
        }
        top[j] = s;
        out[j] = (uint32_t)i;
    }
    return k;
}

uint32_t hs_ring_jump(uint64_t key, uint32_t buckets)
{
    int64_t b = -1, j = 0;
    while (j < (int64_t)buckets) {
        b = j;
        key = key * 2862933555777941757ULL + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1LL << 31) / (double)((key >> 33) + 1)));
    }
    return (uint32_t)b;
}
