/* bench_ring.c: the load_balancing ring (rendezvous hashing) for N = 2..16 backends and 100k
 * (tenant, service) keys: the share of keys moved when a backend is added or removed (beside the
 * ideal 1/(N+1) and 1/N, and how many moved where they should not), load imbalance (max/mean)
 * and ns per lookup; a ketama ring with 100 points per backend (otelcol's loadbalancing
 * exporter's shape) beside it for comparison. Usage: bench_ring [--keys N] [--max-backends N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_common.h"
#include "exporters/load_balancing/ring.h"

#define KETAMA_POINTS 100

/* A ketama ring, for comparison only: KETAMA_POINTS positions per backend on a 32-bit circle;
 * a key belongs to the first position at or after it. */
struct ketama {
    size_t n;
    uint32_t *pos;
    uint32_t *owner;
};

static int u64_pair_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void ketama_build(struct ketama *k, char **names, size_t nb)
{
    uint64_t *pairs = malloc(nb * KETAMA_POINTS * sizeof(*pairs));
    for (size_t b = 0; b < nb; b++)
        for (uint32_t p = 0; p < KETAMA_POINTS; p++) {
            char pt[80];
            int l = snprintf(pt, sizeof(pt), "%s-%u", names[b], p);
            uint32_t h = (uint32_t)(hs_ring_hash(pt, (size_t)l, 7) >> 32);
            pairs[b * KETAMA_POINTS + p] = ((uint64_t)h << 32) | b;
        }
    k->n = nb * KETAMA_POINTS;
    qsort(pairs, k->n, sizeof(*pairs), u64_pair_cmp);
    k->pos = malloc(k->n * sizeof(*k->pos));
    k->owner = malloc(k->n * sizeof(*k->owner));
    for (size_t i = 0; i < k->n; i++) {
        k->pos[i] = (uint32_t)(pairs[i] >> 32);
        k->owner[i] = (uint32_t)pairs[i];
    }
    free(pairs);
}

static uint32_t ketama_pick(const struct ketama *k, uint64_t key)
{
    uint32_t h = (uint32_t)(key >> 32);
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (k->pos[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return k->owner[lo == k->n ? 0 : lo];
}

static void ketama_free(struct ketama *k)
{
    free(k->pos);
    free(k->owner);
}

static char **backend_names(size_t n)
{
    char **v = malloc(n * sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        v[i] = malloc(32);
        snprintf(v[i], 32, "10.0.%zu.%zu:4318", i / 200, 7 + i % 200);
    }
    return v;
}

/* Owner names per key under a ring over names[0..n) except `skip` (or none: skip = n). */
static void owners(const char **out, const uint64_t *keys, size_t nkeys, char **names, size_t n,
                   size_t skip)
{
    const char *set[64];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i != skip)
            set[k++] = names[i];
    struct hs_ring *r = hs_ring_new(set, k);
    for (size_t i = 0; i < nkeys; i++)
        out[i] = hs_ring_name(r, (size_t)hs_ring_pick(r, keys[i]));
    /* names point into `names`, which outlive the ring: find them there */
    for (size_t i = 0; i < nkeys; i++)
        for (size_t j = 0; j < n; j++)
            if (strcmp(out[i], names[j]) == 0) {
                out[i] = names[j];
                break;
            }
    hs_ring_free(r);
}

static double median5(double *v)
{
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[2];
}

static volatile uint64_t sink;

static double ns_per_pick(const struct hs_ring *r, const struct ketama *k, const uint64_t *keys,
                          size_t nkeys)
{
    double runs[5];
    for (int run = 0; run < 5; run++) {
        uint64_t acc = 0;
        double t0 = hs_bench_mono_s();
        for (size_t i = 0; i < nkeys; i++)
            acc += r ? (uint64_t)hs_ring_pick(r, keys[i]) : ketama_pick(k, keys[i]);
        runs[run] = (hs_bench_mono_s() - t0) * 1e9 / (double)nkeys;
        sink += acc;
    }
    return median5(runs);
}

static void one_n(size_t n, char **names, const uint64_t *keys, size_t nkeys)
{
    const char **base = malloc(nkeys * sizeof(*base)), **other = malloc(nkeys * sizeof(*other));
    owners(base, keys, nkeys, names, n, n);

    /* add names[n]: keys may move only to it */
    owners(other, keys, nkeys, names, n + 1, n + 1);
    size_t add_moved = 0, add_wrong = 0;
    for (size_t i = 0; i < nkeys; i++)
        if (base[i] != other[i]) {
            add_moved++;
            add_wrong += other[i] != names[n];
        }

    /* remove each backend in turn: only its keys may move; the least and the most moved */
    size_t rm_min = nkeys, rm_max = 0, rm_wrong = 0;
    for (size_t gone = 0; gone < n; gone++) {
        owners(other, keys, nkeys, names, n, gone);
        size_t moved = 0;
        for (size_t i = 0; i < nkeys; i++)
            if (base[i] != other[i]) {
                moved++;
                rm_wrong += base[i] != names[gone];
            }
        rm_min = HS_MIN(rm_min, moved);
        rm_max = HS_MAX(rm_max, moved);
    }

    size_t count[64] = {0}, max = 0;
    for (size_t i = 0; i < nkeys; i++)
        for (size_t j = 0; j < n; j++)
            if (base[i] == names[j])
                count[j]++;
    for (size_t j = 0; j < n; j++)
        max = HS_MAX(max, count[j]);

    struct hs_ring *r = hs_ring_new((const char *const *)names, n);
    double ns = ns_per_pick(r, NULL, keys, nkeys);
    hs_ring_free(r);

    struct ketama k, k1;
    ketama_build(&k, names, n);
    ketama_build(&k1, names, n + 1);
    size_t kmoved = 0, kcount[64] = {0}, kmax = 0;
    for (size_t i = 0; i < nkeys; i++) {
        uint32_t a = ketama_pick(&k, keys[i]);
        kmoved += a != ketama_pick(&k1, keys[i]);
        kcount[a]++;
    }
    for (size_t j = 0; j < n; j++)
        kmax = HS_MAX(kmax, kcount[j]);
    double kns = ns_per_pick(NULL, &k, keys, nkeys);
    ketama_free(&k);
    ketama_free(&k1);

    double mean = (double)nkeys / (double)n;
    printf("%2zu | %6.4f %6.4f %4zu | %6.4f-%6.4f %6.4f %4zu | %5.3f | %6.1f | %6.4f %5.3f %6.1f\n",
           n, (double)add_moved / (double)nkeys, 1.0 / (double)(n + 1), add_wrong,
           (double)rm_min / (double)nkeys, (double)rm_max / (double)nkeys, 1.0 / (double)n,
           rm_wrong, (double)max / mean, ns, (double)kmoved / (double)nkeys, (double)kmax / mean,
           kns);
    free(base);
    free(other);
}

int main(int argc, char **argv)
{
    size_t nkeys = 100000, maxn = 16;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = hs_bench_opt(argc, argv, &i, "--keys")))
            nkeys = (size_t)hs_bench_num("--keys", v, 1, 1e8);
        else if ((v = hs_bench_opt(argc, argv, &i, "--max-backends")))
            maxn = (size_t)hs_bench_num("--max-backends", v, 2, 62);
        else {
            fprintf(stderr, "usage: %s [--keys N] [--max-backends N (2..62)]\n", argv[0]);
            return 2;
        }
    }
    uint64_t *keys = malloc(nkeys * sizeof(*keys));
    struct hs_str *svc = malloc(nkeys * sizeof(*svc));
    char tenants[13][16];
    for (size_t i = 0; i < nkeys; i++) {
        char s[48];
        int sl = snprintf(s, sizeof(s), "checkout-service-%zu", i);
        svc[i] = (struct hs_str){strdup(s), (size_t)sl};
    }
    for (int t = 0; t < 13; t++)
        snprintf(tenants[t], sizeof(tenants[t]), "tenant-%d", t);
    double runs[5];
    for (int run = 0; run < 5; run++) {
        double t0 = hs_bench_mono_s();
        for (size_t i = 0; i < nkeys; i++) {
            const char *t = tenants[i % 13];
            keys[i] = hs_ring_key_tenant_service((struct hs_str){t, strlen(t)}, svc[i]);
        }
        runs[run] = (hs_bench_mono_s() - t0) * 1e9 / (double)nkeys;
    }
    double key_ns = median5(runs);
    for (size_t i = 0; i < nkeys; i++)
        free((char *)svc[i].ptr);
    free(svc);
    char **names = backend_names(maxn + 1);

    printf("bench_ring: %zu (tenant, service) keys; hs_ring_key_tenant_service %.1f ns per key "
           "(median of 5)\n",
           nkeys, key_ns);
    printf("rendezvous: add = one backend added; rm = each backend removed in turn (least and most "
           "moved);\nwrong = keys that moved anywhere but to the added one / from the removed "
           "one;\nmax/mean = the busiest backend's keys over the mean; ns = one lookup, median "
           "of 5\n");
    printf(" N |  add:moved ideal wrong | rm:moved min-max    ideal wrong | max/mean | ns/pick | "
           "ketama%d: add:moved max/mean ns/pick\n",
           KETAMA_POINTS);
    for (size_t n = 2; n <= maxn; n++)
        one_n(n, names, keys, nkeys);
    for (size_t i = 0; i <= maxn; i++)
        free(names[i]);
    free(names);
    free(keys);
    return 0;
}
