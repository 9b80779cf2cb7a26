/* buckets.c: a service's profile types in the index (index.c) and each type's ring of time
 * buckets: per-function self/total, the heaviest stacks and per-span-id aggregates (each
 * function's exact totals, the heaviest stacks), and the decayed baseline of closed buckets.
 * Every allocation is counted in the bucket, its service and the index. */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "pdata/profiles.h"
#include "processors/correlator/correlator_int.h"

/* A bucket's own count (what freeing it gives back) moves with its service's and the index's. */
static void bucket_account(struct corr_index *ix, struct corr_svc *svc, struct corr_bucket *b,
                           ssize_t delta)
{
    b->bytes = (size_t)((ssize_t)b->bytes + delta);
    corr_account(ix, svc, delta);
}

static void stack_free(struct corr_stack *st)
{
    free(st->fids);
    st->fids = NULL;
}

size_t hs_corr_bucket_free(struct corr_bucket *b)
{
    if (!b)
        return 0;
    size_t bytes = b->bytes;
    for (uint32_t i = 0; i < b->nstacks; i++)
        stack_free(&b->stacks[i]);
    for (uint32_t i = 0; i < b->nspans; i++) {
        for (uint32_t k = 0; k < b->spans[i].nstacks; k++)
            stack_free(&b->spans[i].stacks[k]);
        free(b->spans[i].stacks);
        free(b->spans[i].funcs);
    }
    free(b->stacks);
    free(b->spans);
    free(b->span_slots);
    free(b->funcs);
    free(b);
    return bytes;
}

struct corr_type *hs_corr_type_get(struct corr_index *ix, struct corr_svc *s, const char *id,
                                   const char *type, const char *unit)
{
    for (uint32_t i = 0; i < s->ntypes; i++)
        if (strcmp(s->types[i].id, id) == 0)
            return &s->types[i];
    if (s->ntypes == CORR_MAX_TYPES) {
        hs_counter_add(ix->stats->ev_type, 1);
        return NULL;
    }
    struct corr_type *t = &s->types[s->ntypes++];
    memset(t, 0, sizeof(*t));
    t->id = hs_xstrdup(id);
    t->rank = (int)hs_corr_type_kind(id, type);
    t->cpu_ns = t->rank == CORR_KIND_CPU && strcmp(unit, "nanoseconds") == 0;
    t->nring = (uint32_t)HS_MAX(1, ix->conf->retention_ms / ix->conf->bucket_ms);
    t->ring = hs_xcalloc(t->nring, sizeof(*t->ring));
    t->newest = INT64_MIN;
    t->max_until_ns = INT64_MIN;
    corr_account(ix, s, (ssize_t)(corr_heap_size(t->id) + corr_heap_size(t->ring)));
    return t;
}

uint32_t hs_corr_svc_types(struct corr_svc *svc, struct corr_type **out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < svc->ntypes; i++) { /* insertion by rank; equal ranks keep order */
        uint32_t k = n++;
        for (; k > 0 && out[k - 1]->rank > svc->types[i].rank; k--)
            out[k] = out[k - 1];
        out[k] = &svc->types[i];
    }
    return n;
}

/* Folds a closed bucket's function shares into the type's decayed baseline: the first bucket
 * sets it, each later one weighs CORR_BASE_WEIGHT (a half-life of about 5 buckets). */
static void baseline_fold(struct corr_index *ix, struct corr_svc *s, struct corr_type *t,
                          const struct corr_bucket *b)
{
    if (!b || b->total <= 0)
        return;
    if (t->nbase < s->nnames) {
        ssize_t was = (ssize_t)corr_heap_size(t->base);
        double *nb = realloc(t->base, s->nnames * sizeof(*nb));
        if (!nb)
            return;
        memset(nb + t->nbase, 0, (s->nnames - t->nbase) * sizeof(*nb));
        corr_account(ix, s, (ssize_t)corr_heap_size(nb) - was);
        t->base = nb;
        t->nbase = s->nnames;
    }
    double w = t->base_buckets ? CORR_BASE_WEIGHT : 1.0;
    for (uint32_t i = 0; i < t->nbase; i++)
        t->base[i] *= 1.0 - w;
    for (uint32_t i = 0; i < b->nfuncs; i++)
        t->base[b->funcs[i].fid] += w * (double)b->funcs[i].total / (double)b->total;
    t->base_buckets++;
}

static bool stack_eq(const struct corr_stack *a, const uint32_t *fids, uint32_t depth, uint64_t h)
{
    return a->hash == h && a->depth == depth && memcmp(a->fids, fids, depth * 4) == 0;
}

static size_t stack_set(struct corr_stack *st, const uint32_t *fids, uint32_t depth, uint64_t h,
                        int64_t v)
{
    st->fids = hs_xmalloc(HS_MAX(depth, 1) * sizeof(*fids));
    memcpy(st->fids, fids, depth * sizeof(*fids));
    st->depth = depth;
    st->hash = h;
    st->value = v;
    return corr_heap_size(st->fids);
}

/* Adds a stack to a top-K set: merged when present; kept while there is room; otherwise it
 * replaces the lightest kept stack if heavier (which folds into *other), else folds itself.
 * Returns the bytes allocated (negative when freed). */
static ssize_t topk_add(struct corr_stack *set, uint32_t *n, uint32_t k, int64_t *other,
                        const uint32_t *fids, uint32_t depth, uint64_t h, int64_t v)
{
    uint32_t min = 0;
    for (uint32_t i = 0; i < *n; i++) {
        if (stack_eq(&set[i], fids, depth, h)) {
            set[i].value += v;
            return 0;
        }
        if (set[i].value < set[min].value)
            min = i;
    }
    if (*n < k)
        return (ssize_t)stack_set(&set[(*n)++], fids, depth, h, v);
    if (set[min].value >= v) {
        *other += v;
        return 0;
    }
    *other += set[min].value;
    ssize_t freed = (ssize_t)corr_heap_size(set[min].fids);
    stack_free(&set[min]);
    return (ssize_t)stack_set(&set[min], fids, depth, h, v) - freed;
}

/* The slot of span id in b's table: its own, or the free one it would take. */
static uint32_t span_slot(const struct corr_bucket *b, uint64_t id)
{
    uint32_t mask = b->capspans * 2 - 1;
    uint32_t i = (uint32_t)corr_hash_bytes(&id, 8, 1) & mask;
    while (b->span_slots[i] && b->spans[b->span_slots[i] - 1].id != id)
        i = (i + 1) & mask;
    return i;
}

struct corr_spanagg *hs_corr_bucket_span(const struct corr_bucket *b, uint64_t id)
{
    if (!b->span_slots)
        return NULL;
    uint32_t v = b->span_slots[span_slot(b, id)];
    return v ? &b->spans[v - 1] : NULL;
}

static struct corr_spanagg *span_get(struct corr_index *ix, struct corr_svc *s,
                                     struct corr_bucket *b, const uint8_t id8[8])
{
    uint64_t id;
    memcpy(&id, id8, 8);
    uint32_t i = 0;
    if (b->span_slots) {
        i = span_slot(b, id);
        if (b->span_slots[i])
            return &b->spans[b->span_slots[i] - 1];
    }
    if (b->nspans == CORR_MAX_SPANS) {
        hs_counter_add(ix->stats->ev_span, 1);
        return NULL;
    }
    if (b->nspans == b->capspans) {
        uint32_t cap = b->capspans ? b->capspans * 2 : 8;
        ssize_t was = (ssize_t)(corr_heap_size(b->spans) + corr_heap_size(b->span_slots));
        struct corr_spanagg *ns = realloc(b->spans, cap * sizeof(*ns));
        uint32_t *slots = calloc(cap * 2, sizeof(*slots));
        if (ns)
            b->spans = ns;
        if (!ns || !slots) {
            free(slots);
            bucket_account(ix, s, b,
                           (ssize_t)(corr_heap_size(b->spans) + corr_heap_size(b->span_slots)) -
                               was);
            return NULL;
        }
        bucket_account(ix, s, b, (ssize_t)(corr_heap_size(ns) + corr_heap_size(slots)) - was);
        free(b->span_slots);
        b->span_slots = slots;
        b->capspans = cap;
        for (uint32_t k = 0; k < b->nspans; k++) /* ids are distinct: each takes a free slot */
            slots[span_slot(b, b->spans[k].id)] = k + 1;
        i = span_slot(b, id);
    }
    struct corr_spanagg *a = &b->spans[b->nspans++];
    memset(a, 0, sizeof(*a));
    a->id = id;
    b->span_slots[i] = b->nspans;
    return a;
}

static struct corr_bucket *bucket_get(struct corr_index *ix, struct corr_svc *s,
                                      struct corr_type *t, int64_t idx)
{
    uint32_t slot = (uint32_t)(((idx % t->nring) + t->nring) % t->nring);
    struct corr_bucket *b = t->ring[slot];
    if (b && b->idx == idx)
        return b;
    if (b) { /* a bucket past retention: the ring's ordinary turnover, not an eviction */
        corr_account(ix, s, -(ssize_t)hs_corr_bucket_free(b));
        t->ring[slot] = NULL;
    }
    b = hs_xcalloc(1, sizeof(*b));
    b->idx = idx;
    b->min_from = INT64_MAX;
    b->max_until = INT64_MIN;
    t->ring[slot] = b;
    bucket_account(ix, s, b, (ssize_t)corr_heap_size(b));
    return b;
}

/* A function's values in a bucket's or a span's list (funcs, n, cap), whose positions pos maps
 * (fid -> index + 1); the list grows from `first` entries. Adds *bytes allocated; false when it
 * could not grow (nothing added). */
static bool fval_add(struct corr_fval **funcs, uint32_t *n, uint32_t *cap, uint32_t first,
                     int64_t *pos, uint32_t fid, int64_t self, int64_t total, ssize_t *bytes)
{
    if (!pos[fid]) {
        if (*n == *cap) {
            uint32_t ncap = *cap ? *cap * 2 : first;
            ssize_t was = (ssize_t)corr_heap_size(*funcs);
            struct corr_fval *nf = realloc(*funcs, ncap * sizeof(*nf));
            if (!nf)
                return false;
            *bytes += (ssize_t)corr_heap_size(nf) - was;
            *funcs = nf;
            *cap = ncap;
        }
        (*funcs)[*n] = (struct corr_fval){.fid = fid};
        pos[fid] = ++*n;
    }
    (*funcs)[pos[fid] - 1].self += self;
    (*funcs)[pos[fid] - 1].total += total;
    return true;
}

/* Adds the profile's function values to the bucket; fmap maps the profile's functions to the
 * service's ids. */
static void bucket_add_funcs(struct corr_index *ix, struct corr_svc *s, struct corr_bucket *b,
                             const struct hs_profile_summary *sum, const uint32_t *fmap,
                             uint32_t col)
{
    int64_t *pos = ix->scratch; /* fid -> position + 1 in b->funcs */
    for (uint32_t i = 0; i < b->nfuncs; i++)
        pos[b->funcs[i].fid] = i + 1;
    for (uint32_t i = 0; i < sum->nfuncs; i++) {
        /* a negative value (a client's broken delta) counts as none, as its stacks do */
        int64_t self = HS_MAX(sum->funcs[i].self[col], 0);
        int64_t total = HS_MAX(sum->funcs[i].total[col], 0);
        if (self == 0 && total == 0)
            continue;
        ssize_t d = 0; /* out of memory: the function is left out of the bucket */
        if (fval_add(&b->funcs, &b->nfuncs, &b->capfuncs, 16, pos, fmap[i], self, total, &d))
            bucket_account(ix, s, b, d);
    }
    for (uint32_t i = 0; i < b->nfuncs; i++)
        pos[b->funcs[i].fid] = 0;
}

static void bucket_add_stacks(struct corr_index *ix, struct corr_svc *s, struct corr_bucket *b,
                              const struct hs_profile_summary *sum, const uint32_t *fmap,
                              uint32_t col)
{
    uint32_t fids[CORR_MAX_STACK_DEPTH];
    for (uint32_t i = 0; i < sum->nstacks; i++) {
        const struct hs_profile_stack *st = &sum->stacks[i];
        int64_t v = st->values[col];
        if (v <= 0)
            continue;
        uint32_t depth = HS_MIN(st->depth, CORR_MAX_STACK_DEPTH);
        for (uint32_t d = 0; d < depth; d++)
            fids[d] = fmap[st->funcs[d]];
        uint64_t h = corr_hash_bytes(fids, depth * sizeof(*fids), 7);
        b->total += v;
        if (b->nstacks == b->capstacks && b->capstacks < CORR_TOP_STACKS) {
            uint32_t cap = b->capstacks ? b->capstacks * 2 : 8;
            ssize_t was = (ssize_t)corr_heap_size(b->stacks);
            struct corr_stack *ns = realloc(b->stacks, cap * sizeof(*ns));
            if (ns) {
                b->stacks = ns;
                bucket_account(ix, s, b, (ssize_t)corr_heap_size(ns) - was);
                b->capstacks = cap;
            }
        }
        ssize_t d = topk_add(b->stacks, &b->nstacks, b->capstacks, &b->other, fids, depth, h, v);
        bucket_account(ix, s, b, d);
    }
}

/* Makes room for one more of a span's stacks, up to CORR_SPAN_STACKS; returns the bytes. */
static ssize_t span_stacks_room(struct corr_spanagg *a)
{
    if (a->nstacks < a->capstacks || a->capstacks >= CORR_SPAN_STACKS)
        return 0;
    uint32_t cap = a->capstacks ? HS_MIN(a->capstacks * 2, CORR_SPAN_STACKS) : 4;
    ssize_t was = (ssize_t)corr_heap_size(a->stacks);
    struct corr_stack *ns = realloc(a->stacks, cap * sizeof(*ns));
    if (!ns)
        abort();
    a->stacks = ns;
    ssize_t d = (ssize_t)corr_heap_size(ns) - was;
    a->capstacks = cap;
    return d;
}

/* Adds to the span's function fid; pos maps fids to their position + 1 in a->funcs. Returns
 * the bytes allocated. */
static ssize_t span_add_func(struct corr_spanagg *a, int64_t *pos, uint32_t fid, int64_t self,
                             int64_t total)
{
    ssize_t d = 0; /* a span's exact totals are not cut short: as hs_xmalloc, out of memory ends */
    if (!fval_add(&a->funcs, &a->nfuncs, &a->capfuncs, 8, pos, fid, self, total, &d))
        abort();
    return d;
}

/* One span's stacks of the profile (order[]): its exact function totals, over every frame of
 * every sample, and its heaviest stacks. */
static ssize_t span_add(struct corr_index *ix, struct corr_spanagg *a,
                        const struct hs_profile_summary *sum, const uint32_t *fmap,
                        const uint32_t *order, uint32_t n, uint32_t col)
{
    int64_t *pos = ix->scratch;
    uint32_t fids[CORR_MAX_STACK_DEPTH];
    ssize_t d = 0;
    for (uint32_t k = 0; k < a->nfuncs; k++)
        pos[a->funcs[k].fid] = k + 1;
    for (uint32_t i = 0; i < n; i++) {
        const struct hs_profile_stack *st = &sum->stacks[order[i]];
        int64_t v = st->values[col];
        uint32_t depth = HS_MIN(st->depth, CORR_MAX_STACK_DEPTH);
        for (uint32_t k = 0; k < depth; k++)
            fids[k] = fmap[st->funcs[k]];
        a->value += v;
        d += span_stacks_room(a);
        d += topk_add(a->stacks, &a->nstacks, a->capstacks, &a->other, fids, depth,
                      corr_hash_bytes(fids, depth * sizeof(*fids), 7), v);
        uint32_t stamp = corr_index_stamp(ix);
        for (uint32_t k = 0; k < st->depth; k++) {
            uint32_t f = fmap[st->funcs[k]];
            if (ix->mark[f] != stamp) { /* recursion: once per sample */
                ix->mark[f] = stamp;
                d += span_add_func(a, pos, f, 0, v);
            }
        }
        if (st->depth)
            d += span_add_func(a, pos, fmap[st->funcs[st->depth - 1]], v, 0);
    }
    for (uint32_t k = 0; k < a->nfuncs; k++)
        pos[a->funcs[k].fid] = 0;
    return d;
}

/* The samples labelled with a span id, grouped by span (a counting sort of the stacks). */
static void bucket_add_spans(struct corr_index *ix, struct corr_svc *s, struct corr_bucket *b,
                             const struct hs_profile_summary *sum, const uint32_t *fmap,
                             uint32_t col)
{
    if (sum->nspans == 0)
        return;
    uint32_t *start = hs_xcalloc((size_t)sum->nspans + 1, sizeof(*start));
    uint32_t n = 0;
    for (uint32_t i = 0; i < sum->nstacks; i++) {
        const struct hs_profile_stack *st = &sum->stacks[i];
        if (st->span < sum->nspans && st->values[col] > 0) {
            start[st->span + 1]++;
            n++;
        }
    }
    for (uint32_t k = 0; k < sum->nspans; k++)
        start[k + 1] += start[k];
    uint32_t *order = hs_xmalloc(HS_MAX(n, 1) * sizeof(*order));
    uint32_t *fill = hs_xmalloc(sum->nspans * sizeof(*fill));
    memcpy(fill, start, sum->nspans * sizeof(*fill));
    for (uint32_t i = 0; i < sum->nstacks; i++) {
        const struct hs_profile_stack *st = &sum->stacks[i];
        if (st->span < sum->nspans && st->values[col] > 0)
            order[fill[st->span]++] = i;
    }
    for (uint32_t k = 0; k < sum->nspans; k++) {
        if (start[k] == start[k + 1])
            continue;
        struct corr_spanagg *a = span_get(ix, s, b, sum->spans[k].id);
        if (!a)
            continue;
        ssize_t d = span_add(ix, a, sum, fmap, order + start[k], start[k + 1] - start[k], col);
        bucket_account(ix, s, b, d);
    }
    free(fill);
    free(order);
    free(start);
}

void hs_corr_type_free(struct corr_type *t)
{
    for (uint32_t i = 0; i < t->nring; i++)
        hs_corr_bucket_free(t->ring[i]);
    free(t->ring);
    free(t->base);
    free(t->id);
}

bool hs_corr_type_advance(struct corr_index *ix, struct corr_svc *s, struct corr_type *t,
                          int64_t idx)
{
    if (t->newest != INT64_MIN && idx <= t->newest - (int64_t)t->nring) {
        hs_counter_add(ix->stats->ev_stale, 1); /* older than retention: forwarded, not indexed */
        return false;
    }
    if (idx > t->newest) {
        if (t->newest != INT64_MIN) {
            struct corr_bucket *prev = t->ring[((t->newest % t->nring) + t->nring) % t->nring];
            if (prev && prev->idx == t->newest)
                baseline_fold(ix, s, t, prev);
        }
        t->newest = idx;
    }
    return true;
}

struct corr_bucket *hs_corr_bucket_add(struct corr_index *ix, struct corr_svc *s,
                                       struct corr_type *t, int64_t idx, const struct hs_profile *p,
                                       uint32_t col, const uint32_t *fmap)
{
    const struct hs_profile_summary *sum = &p->summary;
    struct corr_bucket *b = bucket_get(ix, s, t, idx);
    bucket_add_funcs(ix, s, b, sum, fmap, col);
    bucket_add_stacks(ix, s, b, sum, fmap, col);
    bucket_add_spans(ix, s, b, sum, fmap, col);
    b->min_from = HS_MIN(b->min_from, p->from_ns);
    b->max_until = HS_MAX(b->max_until, p->until_ns);
    return b;
}
