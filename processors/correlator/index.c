/* index.c: the correlator's profile index (design.md §7): services by (tenant, service), their
 * functions by name, and per profile type a ring of time buckets (buckets.c); memory capped per
 * service and in total, least recently used services first out. */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/errors.h"
#include "pdata/frames.h"
#include "pdata/profiles.h"
#include "processors/correlator/correlator_int.h"

/* ---- services --------------------------------------------------------------------------- */

/* The service used least recently, or NULL. */
static struct corr_svc *lru_last(const struct corr_index *ix)
{
    return hs_queue_empty(&ix->lru) ? NULL : hs_container_of(ix->lru.prev, struct corr_svc, lru);
}

static void lru_front(struct corr_index *ix, struct corr_svc *s)
{
    hs_queue_remove(&s->lru);
    hs_queue_insert_head(&ix->lru, &s->lru);
}

static void svc_free(struct corr_index *ix, struct corr_svc *s)
{
    for (uint32_t t = 0; t < s->ntypes; t++)
        hs_corr_type_free(&s->types[t]);
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
    hs_queue_remove(&s->lru);
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
    hs_queue_init(&ix->lru);
    ix->mask = 63;
    ix->table = hs_xcalloc(ix->mask + 1, sizeof(*ix->table));
    ix->bytes = corr_heap_size(ix->table);
    return 0;
}

void hs_corr_index_free(struct corr_index *ix)
{
    ix->on_evict = NULL;
    for (struct corr_svc *s; (s = lru_last(ix));) {
        hs_queue_remove(&s->lru);
        svc_free(ix, s);
    }
    free(ix->table);
    free(ix->scratch); /* and the per-fid arrays that share its allocation */
    memset(ix, 0, sizeof(*ix));
    hs_queue_init(&ix->lru); /* freed again, it stays empty */
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
    ix->bytes = ix->bytes + corr_heap_size(nt) - corr_heap_size(ix->table);
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
    struct corr_svc *s = svc_lookup(ix, k, len, corr_hash_bytes(k, len, 0xcbf29ce484222325ULL));
    free(heap);
    return s;
}

static struct corr_svc *svc_get(struct corr_index *ix, struct hs_str t, struct hs_str sv)
{
    char buf[256], *heap;
    size_t len = make_key(t, sv, buf, sizeof(buf), &heap);
    const char *k = heap ? heap : buf;
    uint64_t h = corr_hash_bytes(k, len, 0xcbf29ce484222325ULL);
    struct corr_svc *s = svc_lookup(ix, k, len, h);
    if (s) {
        free(heap);
        lru_front(ix, s);
        return s;
    }
    for (struct corr_svc *old; ix->count >= ix->conf->limits.max_services && (old = lru_last(ix));)
        svc_remove(ix, old, ix->stats->ev_service);
    s = hs_xcalloc(1, sizeof(*s));
    hs_queue_init(&s->lru);
    hs_queue_init(&s->parked);
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
    corr_account(ix, s, (ssize_t)(corr_heap_size(s) + corr_heap_size(s->key)));
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
    return corr_hash_bytes(file, strlen(file),
                           corr_hash_bytes(name, strlen(name) + 1, 0x84222325cbf29ce4ULL));
}

static uint64_t disp_hash(const char *disp)
{
    return corr_hash_bytes(disp, strlen(disp), 0x2325cbf29ce48422ULL);
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
    corr_account(ix, s,
                 (ssize_t)(corr_heap_size(slots) + corr_heap_size(dslots)) -
                     (ssize_t)(corr_heap_size(s->name_slots) + corr_heap_size(s->disp_slots)));
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
        ssize_t was = (ssize_t)corr_heap_size(s->names);
        s->names = realloc(s->names, cap * sizeof(*s->names));
        if (!s->names)
            abort();
        corr_account(ix, s, (ssize_t)corr_heap_size(s->names) - was);
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
    nm->dlen = (uint32_t)dlen;
    nm->lib = NULL;
    struct hs_str lib = {0};
    if (ix->rules && hs_frame_is_library(ix->rules, name, file, &lib))
        nm->lib = hs_xstrndup(lib.len ? lib.ptr : "library", lib.len ? lib.len : 7);
    corr_account(ix, s,
                 (ssize_t)(corr_heap_size(nm->name) + corr_heap_size(nm->file) +
                           corr_heap_size(nm->lib) +
                           (nm->disp != nm->name ? corr_heap_size(nm->disp) : 0)));
    nm->ambiguous = nm->same_name = false;
    uint32_t i = (uint32_t)h & s->name_mask;
    while (s->name_slots[i])
        i = (i + 1) & s->name_mask;
    s->name_slots[i] = fid + 1;
    disp_add(s, fid);
    return fid;
}

int hs_corr_index_scratch(struct corr_index *ix, size_t n)
{
    if (n <= ix->nscratch)
        return 0;
    size_t cap = HS_MAX(n, ix->nscratch * 2);
    /* one zeroed allocation (their state between uses): scratch, ex_tot, ex_leaf (8 bytes per
     * fid each), mark, ex_depth, ex_fids (4 each) */
    int64_t *s = calloc(cap, 3 * sizeof(int64_t) + 3 * sizeof(uint32_t));
    if (!s)
        return HS_ENOMEM;
    /* the index's, not a service's: freed with the index */
    ix->bytes = ix->bytes + corr_heap_size(s) - corr_heap_size(ix->scratch);
    free(ix->scratch);
    ix->scratch = s;
    ix->ex_tot = s + cap;
    ix->ex_leaf = s + 2 * cap;
    ix->mark = (uint32_t *)(s + 3 * cap);
    ix->ex_depth = ix->mark + cap;
    ix->ex_fids = ix->ex_depth + cap;
    ix->nscratch = cap;
    ix->stamp = 0; /* the marks are new */
    return 0;
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
        corr_account(ix, s, -(ssize_t)hs_corr_bucket_free(ot->ring[oslot]));
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
    struct corr_type *t =
        hs_corr_type_get(ix, s, sum->type_ids ? sum->type_ids[col] : sum->types[col],
                         sum->types[col], sum->units ? sum->units[col] : "");
    if (!t)
        return NULL;
    int64_t bucket_ns = (int64_t)ix->conf->bucket_ms * 1000000;
    int64_t idx = p->from_ns >= 0 ? p->from_ns / bucket_ns : -1;
    if (!hs_corr_type_advance(ix, s, t, idx))
        return NULL;
    if (!*fmap) {
        *fmap = hs_xmalloc(HS_MAX(sum->nfuncs, 1) * sizeof(**fmap));
        for (uint32_t i = 0; i < sum->nfuncs; i++)
            (*fmap)[i] = name_intern(ix, s, sum->funcs[i].name ? sum->funcs[i].name : "",
                                     sum->funcs[i].file ? sum->funcs[i].file : "");
    }
    if (hs_corr_index_scratch(ix, s->nnames) != 0)
        return NULL;
    struct corr_bucket *b = hs_corr_bucket_add(ix, s, t, idx, p, col, *fmap);
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
    for (struct corr_svc *old;
         ix->bytes > ix->conf->limits.max_bytes && (old = lru_last(ix)) && old != s;)
        svc_remove(ix, old, ix->stats->ev_service);
    hs_counter_add(ix->stats->profiles_indexed, 1);
    return s;
}

void hs_corr_index_expire(struct corr_index *ix, uint64_t now_ms)
{
    /* the LRU tail was used least recently: stop at the first one still fresh */
    for (struct corr_svc *old;
         (old = lru_last(ix)) && old->last_seen_ms + ix->conf->retention_ms < now_ms;)
        svc_remove(ix, old, ix->stats->ev_expired);
}

/* Frees the least recently used services until the index counts at most `bytes`, each counted
 * in `why`; returns how many left. */
static uint32_t index_shed(struct corr_index *ix, size_t bytes, struct hs_counter *why)
{
    uint32_t n = 0;
    for (struct corr_svc *old; ix->bytes > bytes && (old = lru_last(ix)); n++)
        svc_remove(ix, old, why);
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
