/* index.c: the correlator's profile index (design.md §7): per (tenant, service, profile type) a
 * ring of time buckets holding per-function self/total, the heaviest stacks and per-span-id
 * aggregates (each function's exact totals, the heaviest stacks); memory capped per service and
 * in total, least recently used services first out. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/errors.h"
#include "pdata/frames.h"
#include "pdata/profiles.h"
#include "processors/correlator/correlator_int.h"

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

/* What an allocation really takes from the heap: the allocator's usable size plus its chunk
 * header (glibc rounds every request up to 16 bytes, at least 32, and puts 8 before it). The
 * index counts this, not the sizes it asked for: its many small allocations (a stack's frames,
 * a function's name) cost up to twice their size, and max_bytes is meant to bound memory. */
static size_t heap_size(const void *p)
{
    return p ? malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

static void account(struct corr_index *ix, struct corr_svc *svc, ssize_t delta)
{
    svc->bytes = (size_t)((ssize_t)svc->bytes + delta);
    ix->bytes = (size_t)((ssize_t)ix->bytes + delta);
}

/* A bucket's own count (what freeing it gives back) moves with its service's and the index's. */
static void bucket_account(struct corr_index *ix, struct corr_svc *svc, struct corr_bucket *b,
                           ssize_t delta)
{
    b->bytes = (size_t)((ssize_t)b->bytes + delta);
    account(ix, svc, delta);
}

/* ---- services --------------------------------------------------------------------------- */

static void lru_unlink(struct corr_index *ix, struct corr_svc *s)
{
    if (s->lprev)
        s->lprev->lnext = s->lnext;
    else
        ix->lru_head = s->lnext;
    if (s->lnext)
        s->lnext->lprev = s->lprev;
    else
        ix->lru_tail = s->lprev;
    s->lprev = s->lnext = NULL;
}

static void lru_front(struct corr_index *ix, struct corr_svc *s)
{
    if (ix->lru_head == s)
        return;
    if (s->lprev || s->lnext || ix->lru_tail == s)
        lru_unlink(ix, s);
    s->lnext = ix->lru_head;
    if (ix->lru_head)
        ix->lru_head->lprev = s;
    ix->lru_head = s;
    if (!ix->lru_tail)
        ix->lru_tail = s;
}

static void stack_free(struct corr_stack *st)
{
    free(st->fids);
    st->fids = NULL;
}

/* Returns what the bucket counted, itself included. */
static size_t bucket_free(struct corr_bucket *b)
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

static void svc_free(struct corr_index *ix, struct corr_svc *s)
{
    for (uint32_t t = 0; t < s->ntypes; t++) {
        struct corr_type *ty = &s->types[t];
        for (uint32_t i = 0; i < ty->nring; i++)
            bucket_free(ty->ring[i]);
        free(ty->ring);
        free(ty->base);
        free(ty->id);
    }
    for (uint32_t i = 0; i < s->nnames; i++) {
        if (s->names[i].disp != s->names[i].name)
            free(s->names[i].disp);
        free(s->names[i].name);
        free(s->names[i].file);
        free(s->names[i].lib);
    }
    free(s->names);
    free(s->name_slots);
    free(s->disp_slots);
    ix->bytes -= s->bytes;
    free(s->key);
    free(s);
}

/* Takes a service out of the table and frees it; its parked spans leave first. */
static void svc_remove(struct corr_index *ix, struct corr_svc *s, struct hs_counter *why)
{
    if (ix->on_evict && s->nparked)
        ix->on_evict(ix->ud, s);
    struct corr_svc **pp = &ix->table[s->hash & ix->mask];
    while (*pp != s)
        pp = &(*pp)->hnext;
    *pp = s->hnext;
    lru_unlink(ix, s);
    ix->count--;
    hs_counter_add(why, 1);
    hs_log_debug("correlator", "index: service %s (tenant \"%s\") removed, %zu bytes", s->service,
                 s->tenant, s->bytes);
    svc_free(ix, s);
}

int hs_corr_index_init(struct corr_index *ix, const struct corr_config *conf,
                       struct corr_stats *stats)
{
    memset(ix, 0, sizeof(*ix));
    ix->conf = conf;
    ix->stats = stats;
    ix->mask = 63;
    ix->table = hs_xcalloc(ix->mask + 1, sizeof(*ix->table));
    ix->bytes = heap_size(ix->table);
    return 0;
}

void hs_corr_index_free(struct corr_index *ix)
{
    ix->on_evict = NULL;
    while (ix->lru_head) {
        struct corr_svc *s = ix->lru_head;
        lru_unlink(ix, s);
        svc_free(ix, s);
    }
    free(ix->table);
    free(ix->scratch);
    free(ix->mark);
    memset(ix, 0, sizeof(*ix));
}

static struct corr_svc *svc_lookup(struct corr_index *ix, const char *key, size_t keylen,
                                   uint64_t h)
{
    for (struct corr_svc *s = ix->table[h & ix->mask]; s; s = s->hnext)
        if (s->hash == h && s->keylen == keylen && memcmp(s->key, key, keylen) == 0)
            return s;
    return NULL;
}

static void table_grow(struct corr_index *ix)
{
    size_t nmask = ix->mask * 2 + 1;
    struct corr_svc **nt = calloc(nmask + 1, sizeof(*nt));
    if (!nt)
        return; /* longer chains, still correct */
    for (size_t i = 0; i <= ix->mask; i++)
        for (struct corr_svc *s = ix->table[i], *nx; s; s = nx) {
            nx = s->hnext;
            s->hnext = nt[s->hash & nmask];
            nt[s->hash & nmask] = s;
        }
    ix->bytes = ix->bytes + heap_size(nt) - heap_size(ix->table);
    free(ix->table);
    ix->table = nt;
    ix->mask = nmask;
}

/* Builds "tenant\0service\0" into buf (malloc'd when large); returns its length. */
static size_t make_key(struct hs_str tenant, struct hs_str service, char *buf, size_t cap,
                       char **heap)
{
    size_t len = tenant.len + service.len + 2;
    char *k = buf;
    *heap = NULL;
    if (len > cap)
        k = *heap = hs_xmalloc(len);
    memcpy(k, tenant.ptr, tenant.len);
    k[tenant.len] = '\0';
    memcpy(k + tenant.len + 1, service.ptr, service.len);
    k[len - 1] = '\0';
    return len;
}

struct corr_svc *hs_corr_index_find(struct corr_index *ix, struct hs_str tenant,
                                    struct hs_str service)
{
    char buf[256], *heap;
    size_t len = make_key(tenant, service, buf, sizeof(buf), &heap);
    const char *k = heap ? heap : buf;
    struct corr_svc *s = svc_lookup(ix, k, len, hash_bytes(k, len, 0xcbf29ce484222325ULL));
    free(heap);
    return s;
}

static struct corr_svc *svc_get(struct corr_index *ix, struct hs_str t, struct hs_str sv)
{
    char buf[256], *heap;
    size_t len = make_key(t, sv, buf, sizeof(buf), &heap);
    const char *k = heap ? heap : buf;
    uint64_t h = hash_bytes(k, len, 0xcbf29ce484222325ULL);
    struct corr_svc *s = svc_lookup(ix, k, len, h);
    if (s) {
        free(heap);
        lru_front(ix, s);
        return s;
    }
    while (ix->count >= ix->conf->limits.max_services && ix->lru_tail)
        svc_remove(ix, ix->lru_tail, ix->stats->ev_service);
    s = hs_xcalloc(1, sizeof(*s));
    s->key = hs_xmalloc(len);
    memcpy(s->key, k, len);
    free(heap);
    s->keylen = len;
    s->tenant = s->key;
    s->service = s->key + t.len + 1;
    s->hash = h;
    s->max_until_ns = INT64_MIN;
    s->hnext = ix->table[h & ix->mask];
    ix->table[h & ix->mask] = s;
    ix->count++;
    account(ix, s, (ssize_t)(heap_size(s) + heap_size(s->key)));
    lru_front(ix, s);
    if (ix->count > (ix->mask + 1))
        table_grow(ix);
    return s;
}

struct corr_svc *hs_corr_index_get(struct corr_index *ix, struct hs_str tenant,
                                   struct hs_str service, uint64_t now_ms)
{
    struct corr_svc *s = svc_get(ix, tenant, service);
    if (s->ntypes == 0)
        s->last_seen_ms = now_ms; /* a service with profiles is kept by its profiles only */
    return s;
}

/* ---- functions of a service ------------------------------------------------------------- */

static uint64_t name_hash(const char *name, const char *file)
{
    return hash_bytes(file, strlen(file),
                      hash_bytes(name, strlen(name) + 1, 0x84222325cbf29ce4ULL));
}

static uint64_t disp_hash(const char *disp)
{
    return hash_bytes(disp, strlen(disp), 0x2325cbf29ce48422ULL);
}

/* Both tables grow together: by (name, file), and by display name. */
static void name_slots_grow(struct corr_index *ix, struct corr_svc *s)
{
    uint32_t nmask = s->name_slots ? s->name_mask * 2 + 1 : 31;
    uint32_t *slots = hs_xcalloc(nmask + 1, sizeof(*slots));
    uint32_t *dslots = hs_xcalloc(nmask + 1, sizeof(*dslots));
    for (uint32_t f = 0; f < s->nnames; f++) {
        uint32_t i = (uint32_t)name_hash(s->names[f].name, s->names[f].file) & nmask;
        while (slots[i])
            i = (i + 1) & nmask;
        slots[i] = f + 1;
        for (i = (uint32_t)disp_hash(s->names[f].disp) & nmask; dslots[i]; i = (i + 1) & nmask)
            ;
        dslots[i] = f + 1;
    }
    account(ix, s,
            (ssize_t)(heap_size(slots) + heap_size(dslots)) -
                (ssize_t)(heap_size(s->name_slots) + heap_size(s->disp_slots)));
    free(s->name_slots);
    free(s->disp_slots);
    s->name_slots = slots;
    s->disp_slots = dslots;
    s->name_mask = nmask;
}

/* Two functions of the service displayed alike ("digest.Write" of crypto/sha256 and of
 * crypto/md5, "flush" of a.js and b.js) are both marked, so /ui shows them in full. */
static void disp_add(struct corr_svc *s, uint32_t fid)
{
    struct corr_name *nm = &s->names[fid];
    uint32_t i = (uint32_t)disp_hash(nm->disp) & s->name_mask;
    for (; s->disp_slots[i]; i = (i + 1) & s->name_mask) {
        struct corr_name *o = &s->names[s->disp_slots[i] - 1];
        if (strcmp(o->disp, nm->disp) != 0)
            continue;
        o->ambiguous = nm->ambiguous = true;
        if (strcmp(o->name, nm->name) == 0) /* even in full: only their files differ */
            o->same_name = nm->same_name = true;
    }
    s->disp_slots[i] = fid + 1;
}

/* A function of the service by (name, file), as the profile summary tells them apart; its
 * display name and whether it is a library frame are worked out once, here. */
static uint32_t name_intern(struct corr_index *ix, struct corr_svc *s, const char *name,
                            const char *file)
{
    uint64_t h = name_hash(name, file);
    if (s->name_slots) {
        for (uint32_t i = (uint32_t)h & s->name_mask;; i = (i + 1) & s->name_mask) {
            uint32_t v = s->name_slots[i];
            if (v == 0)
                break;
            if (strcmp(s->names[v - 1].name, name) == 0 && strcmp(s->names[v - 1].file, file) == 0)
                return v - 1;
        }
    }
    if (s->nnames == s->capnames) {
        uint32_t cap = s->capnames ? s->capnames * 2 : 16;
        ssize_t was = (ssize_t)heap_size(s->names);
        s->names = realloc(s->names, cap * sizeof(*s->names));
        if (!s->names)
            abort();
        account(ix, s, (ssize_t)heap_size(s->names) - was);
        s->capnames = cap;
    }
    if ((s->nnames + 1) * 2 > s->name_mask + 1 || !s->name_slots) /* keep load under 1/2 */
        name_slots_grow(ix, s);
    uint32_t fid = s->nnames++;
    struct corr_name *nm = &s->names[fid];
    size_t n = strlen(name), fl = strlen(file);
    char disp[256];
    size_t dlen = hs_corr_display_name(name, disp, sizeof(disp));
    nm->name = hs_xstrndup(name, n);
    nm->file = hs_xstrndup(file, fl);
    nm->disp = dlen == n && memcmp(disp, name, n) == 0 ? nm->name : hs_xstrndup(disp, dlen);
    nm->lib = NULL;
    struct hs_str lib = {0};
    if (ix->rules && hs_frame_is_library(ix->rules, name, file, &lib))
        nm->lib = hs_xstrndup(lib.len ? lib.ptr : "library", lib.len ? lib.len : 7);
    account(ix, s,
            (ssize_t)(heap_size(nm->name) + heap_size(nm->file) + heap_size(nm->lib) +
                      (nm->disp != nm->name ? heap_size(nm->disp) : 0)));
    nm->ambiguous = nm->same_name = false;
    uint32_t i = (uint32_t)h & s->name_mask;
    while (s->name_slots[i])
        i = (i + 1) & s->name_mask;
    s->name_slots[i] = fid + 1;
    disp_add(s, fid);
    return fid;
}

uint32_t hs_corr_index_stamp(struct corr_index *ix)
{
    if (++ix->stamp == 0) { /* wrapped: old stamps could collide */
        memset(ix->mark, 0, ix->nscratch * sizeof(*ix->mark));
        ix->stamp = 1;
    }
    return ix->stamp;
}

int hs_corr_index_scratch(struct corr_index *ix, size_t n)
{
    if (n <= ix->nscratch)
        return 0;
    size_t cap = HS_MAX(n, ix->nscratch * 2);
    int64_t *s = calloc(cap, sizeof(*s));
    uint32_t *m = calloc(cap, sizeof(*m));
    if (!s || !m) {
        free(s);
        free(m);
        return HS_ENOMEM;
    }
    /* the index's, not a service's: freed with the index */
    ix->bytes =
        ix->bytes + heap_size(s) + heap_size(m) - heap_size(ix->scratch) - heap_size(ix->mark);
    free(ix->scratch);
    free(ix->mark);
    ix->scratch = s;
    ix->mark = m;
    ix->nscratch = cap;
    return 0;
}

/* ---- types and buckets ------------------------------------------------------------------ */

static struct corr_type *type_get(struct corr_index *ix, struct corr_svc *s, const char *id,
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
    account(ix, s, (ssize_t)(heap_size(t->id) + heap_size(t->ring)));
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
        ssize_t was = (ssize_t)heap_size(t->base);
        double *nb = realloc(t->base, s->nnames * sizeof(*nb));
        if (!nb)
            return;
        memset(nb + t->nbase, 0, (s->nnames - t->nbase) * sizeof(*nb));
        account(ix, s, (ssize_t)heap_size(nb) - was);
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

static bool stack_eq(const struct corr_stack *a, const uint32_t *fids, uint32_t depth,
                     uint64_t h)
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
    return heap_size(st->fids);
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
    ssize_t freed = (ssize_t)heap_size(set[min].fids);
    stack_free(&set[min]);
    return (ssize_t)stack_set(&set[min], fids, depth, h, v) - freed;
}

static struct corr_spanagg *span_get(struct corr_index *ix, struct corr_svc *s,
                                     struct corr_bucket *b, const uint8_t id8[8])
{
    uint64_t id;
    memcpy(&id, id8, 8);
    uint32_t mask = b->capspans * 2 - 1;
    uint32_t i = 0;
    if (b->span_slots) {
        for (i = (uint32_t)hash_bytes(&id, 8, 1) & mask; b->span_slots[i]; i = (i + 1) & mask)
            if (b->spans[b->span_slots[i] - 1].id == id)
                return &b->spans[b->span_slots[i] - 1];
    }
    if (b->nspans == CORR_MAX_SPANS) {
        hs_counter_add(ix->stats->ev_span, 1);
        return NULL;
    }
    if (b->nspans == b->capspans) {
        uint32_t cap = b->capspans ? b->capspans * 2 : 8;
        ssize_t was = (ssize_t)(heap_size(b->spans) + heap_size(b->span_slots));
        struct corr_spanagg *ns = realloc(b->spans, cap * sizeof(*ns));
        uint32_t *slots = calloc(cap * 2, sizeof(*slots));
        if (ns)
            b->spans = ns;
        if (!ns || !slots) {
            free(slots);
            bucket_account(ix, s, b,
                           (ssize_t)(heap_size(b->spans) + heap_size(b->span_slots)) - was);
            return NULL;
        }
        bucket_account(ix, s, b, (ssize_t)(heap_size(ns) + heap_size(slots)) - was);
        free(b->span_slots);
        b->span_slots = slots;
        b->capspans = cap;
        mask = cap * 2 - 1;
        for (uint32_t k = 0; k < b->nspans; k++) {
            uint32_t j = (uint32_t)hash_bytes(&b->spans[k].id, 8, 1) & mask;
            while (slots[j])
                j = (j + 1) & mask;
            slots[j] = k + 1;
        }
        for (i = (uint32_t)hash_bytes(&id, 8, 1) & mask; slots[i]; i = (i + 1) & mask)
            ;
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
        account(ix, s, -(ssize_t)bucket_free(b));
        t->ring[slot] = NULL;
    }
    b = hs_xcalloc(1, sizeof(*b));
    b->idx = idx;
    b->min_from = INT64_MAX;
    b->max_until = INT64_MIN;
    t->ring[slot] = b;
    bucket_account(ix, s, b, (ssize_t)heap_size(b));
    return b;
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
        uint32_t fid = fmap[i];
        if (!pos[fid]) {
            if (b->nfuncs == b->capfuncs) {
                uint32_t cap = b->capfuncs ? b->capfuncs * 2 : 16;
                ssize_t was = (ssize_t)heap_size(b->funcs);
                struct corr_fval *nf = realloc(b->funcs, cap * sizeof(*nf));
                if (!nf)
                    continue;
                bucket_account(ix, s, b, (ssize_t)heap_size(nf) - was);
                b->funcs = nf;
                b->capfuncs = cap;
            }
            b->funcs[b->nfuncs] = (struct corr_fval){.fid = fid};
            pos[fid] = ++b->nfuncs;
        }
        b->funcs[pos[fid] - 1].self += self;
        b->funcs[pos[fid] - 1].total += total;
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
        uint64_t h = hash_bytes(fids, depth * sizeof(*fids), 7);
        b->total += v;
        if (b->nstacks == b->capstacks && b->capstacks < CORR_TOP_STACKS) {
            uint32_t cap = b->capstacks ? b->capstacks * 2 : 8;
            ssize_t was = (ssize_t)heap_size(b->stacks);
            struct corr_stack *ns = realloc(b->stacks, cap * sizeof(*ns));
            if (ns) {
                b->stacks = ns;
                bucket_account(ix, s, b, (ssize_t)heap_size(ns) - was);
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
    ssize_t was = (ssize_t)heap_size(a->stacks);
    struct corr_stack *ns = realloc(a->stacks, cap * sizeof(*ns));
    if (!ns)
        abort();
    a->stacks = ns;
    ssize_t d = (ssize_t)heap_size(ns) - was;
    a->capstacks = cap;
    return d;
}

/* Adds to the span's function fid; pos maps fids to their position + 1 in a->funcs. Returns
 * the bytes allocated. */
static ssize_t span_add_func(struct corr_spanagg *a, int64_t *pos, uint32_t fid, int64_t self,
                             int64_t total)
{
    ssize_t d = 0;
    if (!pos[fid]) {
        if (a->nfuncs == a->capfuncs) {
            uint32_t cap = a->capfuncs ? a->capfuncs * 2 : 8;
            ssize_t was = (ssize_t)heap_size(a->funcs);
            struct corr_fval *nf = realloc(a->funcs, cap * sizeof(*nf));
            if (!nf)
                abort();
            d = (ssize_t)heap_size(nf) - was;
            a->funcs = nf;
            a->capfuncs = cap;
        }
        a->funcs[a->nfuncs] = (struct corr_fval){.fid = fid};
        pos[fid] = ++a->nfuncs;
    }
    a->funcs[pos[fid] - 1].self += self;
    a->funcs[pos[fid] - 1].total += total;
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
                      hash_bytes(fids, depth * sizeof(*fids), 7), v);
        uint32_t stamp = hs_corr_index_stamp(ix);
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

/* Frees the service's oldest buckets (of any type) until it fits max_service_bytes, keeping
 * the one just written. */
static void svc_trim(struct corr_index *ix, struct corr_svc *s, const struct corr_bucket *keep)
{
    while (s->bytes > ix->conf->limits.max_service_bytes) {
        struct corr_type *ot = NULL;
        uint32_t oslot = 0;
        for (uint32_t t = 0; t < s->ntypes; t++)
            for (uint32_t i = 0; i < s->types[t].nring; i++) {
                struct corr_bucket *b = s->types[t].ring[i];
                if (b && b != keep && (!ot || b->idx < ot->ring[oslot]->idx)) {
                    ot = &s->types[t];
                    oslot = i;
                }
            }
        if (!ot)
            return; /* only the newest bucket is left: it stays, over the cap */
        account(ix, s, -(ssize_t)bucket_free(ot->ring[oslot]));
        ot->ring[oslot] = NULL;
        hs_counter_add(ix->stats->ev_bucket, 1);
    }
}

/* The columns of a profile the index reads: "cpu" and "wall" (a Node wall profile carries
 * both) as two types; otherwise one: alloc_space (a Go heap profile: what was allocated in the
 * window, not what is live), else the summary's main column. Returns their count. */
static uint32_t index_columns(const struct hs_profile_summary *sum, uint32_t cols[2])
{
    uint32_t n = 0, cpu = UINT32_MAX, wall = UINT32_MAX, alloc = UINT32_MAX;
    for (uint32_t t = 0; t < sum->ntypes; t++) {
        if (strcmp(sum->types[t], "cpu") == 0 && cpu == UINT32_MAX)
            cpu = t;
        else if (strcmp(sum->types[t], "wall") == 0 && wall == UINT32_MAX)
            wall = t;
        else if (strcmp(sum->types[t], "alloc_space") == 0 && alloc == UINT32_MAX)
            alloc = t;
    }
    if (cpu != UINT32_MAX)
        cols[n++] = cpu;
    if (wall != UINT32_MAX)
        cols[n++] = wall;
    if (n == 0)
        cols[n++] = alloc != UINT32_MAX ? alloc : sum->main_type;
    return n;
}

/* One column of the profile into its type's bucket; NULL when not kept (types full, stale). */
static struct corr_bucket *index_column(struct corr_index *ix, struct corr_svc *s,
                                        const struct hs_profile *p, uint32_t col, uint32_t **fmap)
{
    const struct hs_profile_summary *sum = &p->summary;
    struct corr_type *t = type_get(ix, s, sum->type_ids ? sum->type_ids[col] : sum->types[col],
                                   sum->types[col], sum->units ? sum->units[col] : "");
    if (!t)
        return NULL;
    int64_t bucket_ns = (int64_t)ix->conf->bucket_ms * 1000000;
    int64_t idx = p->from_ns >= 0 ? p->from_ns / bucket_ns : -1;
    if (t->newest != INT64_MIN && idx <= t->newest - (int64_t)t->nring) {
        hs_counter_add(ix->stats->ev_stale, 1); /* older than retention: forwarded, not indexed */
        return NULL;
    }
    if (idx > t->newest) {
        if (t->newest != INT64_MIN) {
            struct corr_bucket *prev = t->ring[((t->newest % t->nring) + t->nring) % t->nring];
            if (prev && prev->idx == t->newest)
                baseline_fold(ix, s, t, prev);
        }
        t->newest = idx;
    }
    if (!*fmap) {
        *fmap = hs_xmalloc(HS_MAX(sum->nfuncs, 1) * sizeof(**fmap));
        for (uint32_t i = 0; i < sum->nfuncs; i++)
            (*fmap)[i] = name_intern(ix, s, sum->funcs[i].name ? sum->funcs[i].name : "",
                                     sum->funcs[i].file ? sum->funcs[i].file : "");
    }
    if (hs_corr_index_scratch(ix, s->nnames) != 0)
        return NULL;
    struct corr_bucket *b = bucket_get(ix, s, t, idx);
    bucket_add_funcs(ix, s, b, sum, *fmap, col);
    bucket_add_stacks(ix, s, b, sum, *fmap, col);
    bucket_add_spans(ix, s, b, sum, *fmap, col);
    b->min_from = HS_MIN(b->min_from, p->from_ns);
    b->max_until = HS_MAX(b->max_until, p->until_ns);
    t->max_until_ns = HS_MAX(t->max_until_ns, p->until_ns);
    hs_corr_cadence_learn(t, p->from_ns, p->until_ns, s->last_seen_ms);
    t->last_ms = s->last_seen_ms;
    return b;
}

struct corr_svc *hs_corr_index_add(struct corr_index *ix, const char *tenant,
                                   const struct hs_profile *p, uint64_t now_ms)
{
    const struct hs_profile_summary *sum = &p->summary;
    const char *service = hs_profile_label(p, ix->conf->labels.profile_service);
    if (!service)
        service = p->service ? p->service : "unknown_service";
    if (sum->ntypes == 0 || sum->main_type >= sum->ntypes)
        return NULL;
    tenant = tenant ? tenant : "";
    struct corr_svc *s = svc_get(ix, (struct hs_str){tenant, strlen(tenant)},
                                 (struct hs_str){service, strlen(service)});
    s->last_seen_ms = now_ms;
    bool first = s->ntypes == 0;
    uint32_t cols[2], *fmap = NULL;
    uint32_t ncols = index_columns(sum, cols);
    struct corr_bucket *b = NULL;
    for (uint32_t i = 0; i < ncols; i++) {
        struct corr_bucket *nb = index_column(ix, s, p, cols[i], &fmap);
        b = nb ? nb : b;
    }
    free(fmap);
    if (!b)
        return NULL;
    s->max_until_ns = HS_MAX(s->max_until_ns, p->until_ns);
    if (first) /* the upload's other types are on their way: its spans leave once they are in */
        s->settle_ms = now_ms + CORR_SETTLE_MS;
    svc_trim(ix, s, b);
    while (ix->bytes > ix->conf->limits.max_bytes && ix->lru_tail && ix->lru_tail != s)
        svc_remove(ix, ix->lru_tail, ix->stats->ev_service);
    hs_counter_add(ix->stats->profiles_indexed, 1);
    return s;
}

void hs_corr_index_expire(struct corr_index *ix, uint64_t now_ms)
{
    /* the LRU tail was used least recently: stop at the first one still fresh */
    while (ix->lru_tail && ix->lru_tail->last_seen_ms + ix->conf->retention_ms < now_ms)
        svc_remove(ix, ix->lru_tail, ix->stats->ev_expired);
}

/* Frees the least recently used services until the index counts at most `bytes`, each counted
 * in `why`; returns how many left. */
static uint32_t index_shed(struct corr_index *ix, size_t bytes, struct hs_counter *why)
{
    uint32_t n = 0;
    for (; ix->lru_tail && ix->bytes > bytes; n++)
        svc_remove(ix, ix->lru_tail, why);
    return n;
}

/* The newest reading (hs_now_ms) of a memory_limiter above its soft limit, 0 when none is. */
static void memory_visit(void *arg, const char *component, const struct hs_health *h)
{
    uint64_t *newest = arg;
    if (h->over_memory_limit && h->last_failure_ms > *newest)
        *newest = h->last_failure_ms;
}

/* While a limiter refuses data (memory in use above its soft limit even after it gave freed
 * heap back), half the index goes, least recently used first, once per reading that still finds
 * it so: the index is a cache, and it could not shrink otherwise (no profile gets in to evict,
 * retention would take 15 minutes of refusals). The limiter's next trim hands what was freed
 * back to the system. */
uint32_t hs_corr_index_housekeep(struct corr_index *ix, struct hs_metrics *m, uint64_t now_ms)
{
    hs_corr_index_expire(ix, now_ms);
    uint64_t reading = 0;
    if (m)
        hs_metrics_health_each(m, memory_visit, &reading);
    if (!reading || reading == ix->shed_reading_ms)
        return 0;
    ix->shed_reading_ms = reading;
    return index_shed(ix, ix->bytes / 2, ix->stats->ev_shed);
}
