/* split.c: batches cut by routing key (split.h). Spans move as the bytes of whole
 * ResourceSpans, concatenated (an ExportTraceServiceRequest is one repeated field), or for
 * traceID through hs_traces_edit; profiles move between batches as pointers. */
#include "exporters/load_balancing/split.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "core/semconv.h"
#include "exporters/load_balancing/ring.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"

/* ---- parts ------------------------------------------------------------------------------- */

void hs_lb_parts_free(struct hs_lb_parts *p)
{
    free(p->v);
    *p = (struct hs_lb_parts){0};
}

void hs_lb_parts_release(struct hs_lb_parts *out, bool profiles)
{
    for (size_t i = 0; i < out->n; i++) {
        if (profiles)
            hs_profiles_unref(out->v[i].batch);
        else
            hs_traces_unref(out->v[i].batch);
    }
    out->n = 0;
}

static struct hs_lb_part *part_add(struct hs_lb_parts *out)
{
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 8;
        struct hs_lb_part *v = realloc(out->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        out->v = v;
        out->cap = cap;
    }
    struct hs_lb_part *p = &out->v[out->n++];
    memset(p, 0, sizeof(*p));
    return p;
}

uint64_t hs_lb_key(enum hs_lb_route route, const char *tenant, const char *service, size_t len)
{
    struct hs_str svc = {service ? service : "", service ? len : 0};
    if (route == HS_LB_ROUTE_SERVICE)
        return hs_ring_key_service(svc);
    struct hs_str ten = {tenant ? tenant : "", tenant ? strlen(tenant) : 0};
    return hs_ring_key_tenant_service(ten, svc);
}

/* ---- the wire, as far as ResourceSpans -------------------------------------------------- */

struct field {
    uint32_t no, wt;
    const uint8_t *start, *val, *end; /* tag, value, past the value */
    size_t len;                       /* LEN fields */
};

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The batch was validated by the receiver's scan; these checks only keep a walk in bounds. */
static bool next_field(const uint8_t *p, const uint8_t *end, struct field *f)
{
    uint64_t tag, n = 0;
    f->start = p;
    if (!varint(&p, end, &tag))
        return false;
    f->no = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    f->val = p;
    switch (f->wt) {
    case 0:
        if (!varint(&p, end, &n))
            return false;
        break;
    case 1:
        p += 8;
        break;
    case 2:
        if (!varint(&p, end, &n) || n > (uint64_t)(end - p))
            return false;
        f->val = p;
        f->len = (size_t)n;
        p += n;
        break;
    case 5:
        p += 4;
        break;
    default:
        return false;
    }
    if (p > end)
        return false;
    f->end = p;
    return true;
}

/* One ResourceSpans: its key (from its resource's service.name) and, when `spans` is given, its
 * span count (a walk over every span: only for a batch that is cut). */
static void resource_spans(const struct field *rs, enum hs_lb_route route, const char *tenant,
                           uint64_t *key, uint32_t *spans)
{
    struct hs_str svc = {"", 0};
    if (spans)
        *spans = 0;
    struct field f, g;
    for (const uint8_t *p = rs->val, *end = rs->val + rs->len; p < end && next_field(p, end, &f);
         p = f.end) {
        if (f.wt != 2)
            continue;
        if (f.no == 1) { /* Resource: attributes are its field 1 */
            struct hs_str v;
            if (hs_attrs_find_str((struct hs_str){(const char *)f.val, f.len}, 1,
                                  HS_ATTR_SERVICE_NAME, &v))
                svc = v;
        } else if (f.no == 2 && spans) { /* ScopeSpans: spans are its field 2 */
            for (const uint8_t *q = f.val, *qe = f.val + f.len; q < qe && next_field(q, qe, &g);
                 q = g.end)
                *spans += g.no == 2 && g.wt == 2;
        }
    }
    *key = hs_lb_key(route, tenant, svc.ptr, svc.len);
}

/* A new batch of t's tenant holding the ResourceSpans of `key` (and, for the first key, any
 * other top-level field, which protobuf lets a request carry). */
static struct hs_traces *traces_of_key(const struct hs_traces *t, enum hs_lb_route route,
                                       uint64_t key, bool first, uint32_t *spans)
{
    struct hs_traces *out = hs_traces_new(t->len);
    if (!out)
        return NULL;
    hs_traces_copy_tenant(out, t);
    struct field f;
    for (const uint8_t *p = t->data, *end = p + t->len; p < end && next_field(p, end, &f);
         p = f.end) {
        uint64_t k = 0;
        uint32_t n = 0;
        bool rs = f.no == 1 && f.wt == 2;
        if (rs)
            resource_spans(&f, route, t->tenant, &k, &n);
        if (rs ? k != key : !first)
            continue;
        memcpy(out->data + out->len, f.start, (size_t)(f.end - f.start));
        out->len += (size_t)(f.end - f.start);
        out->spans += n;
        out->resource_spans += rs;
    }
    *spans = out->spans;
    return out;
}

static int split_by_resource(struct hs_traces *t, enum hs_lb_route route,
                             const struct hs_ring *ring, struct hs_lb_parts *out)
{
    uint64_t first = 0;
    bool mixed = false, any = false;
    struct field f;
    for (const uint8_t *p = t->data, *end = p + t->len; p < end && next_field(p, end, &f);
         p = f.end) {
        if (f.no != 1 || f.wt != 2)
            continue;
        uint64_t k;
        resource_spans(&f, route, t->tenant, &k, NULL);
        mixed |= any && k != first;
        if (!any)
            first = k;
        any = true;
    }
    if (!mixed) { /* the common case: one key, the batch goes as it came */
        struct hs_lb_part *pt = part_add(out);
        if (!pt)
            goto nomem;
        *pt = (struct hs_lb_part){.batch = t, .key = first, .items = t->spans, .bytes = t->len};
        pt->backend = hs_ring_pick(ring, first);
        return 0;
    }
    for (const uint8_t *p = t->data, *end = p + t->len; p < end && next_field(p, end, &f);
         p = f.end) {
        if (f.no != 1 || f.wt != 2)
            continue;
        uint64_t k;
        resource_spans(&f, route, t->tenant, &k, NULL);
        bool seen = false;
        for (size_t i = 0; i < out->n && !seen; i++)
            seen = out->v[i].key == k;
        if (seen)
            continue;
        struct hs_lb_part *pt = part_add(out);
        if (!pt)
            goto nomem;
        pt->key = k;
        pt->backend = hs_ring_pick(ring, k);
        if (!(pt->batch = traces_of_key(t, route, k, out->n == 1, &pt->items))) {
            out->n--;
            goto nomem;
        }
        pt->bytes = ((struct hs_traces *)pt->batch)->len;
    }
    hs_traces_unref(t);
    return 0;
nomem:
    hs_lb_parts_release(out, false);
    hs_traces_unref(t);
    return HS_ENOMEM;
}

/* ---- traceID: by span -------------------------------------------------------------------- */

struct span_route {
    size_t offset; /* the span's, in the batch */
    uint64_t key;  /* of its trace */
    int backend;
};

struct by_trace {
    const struct hs_ring *ring;
    struct span_route *v; /* in scan (offset) order */
    size_t n, cap;
    bool nomem;
};

static int visit_span(void *ud, const struct hs_span_view *s)
{
    struct by_trace *bt = ud;
    if (bt->n == bt->cap) {
        size_t cap = bt->cap ? 2 * bt->cap : 64;
        struct span_route *v = realloc(bt->v, cap * sizeof(*v));
        if (!v) {
            bt->nomem = true;
            return 1;
        }
        bt->v = v;
        bt->cap = cap;
    }
    uint8_t id[16] = {0};
    memcpy(id, s->trace_id.ptr, HS_MIN(s->trace_id.len, sizeof(id)));
    uint64_t k = hs_ring_key_trace_id(id);
    bt->v[bt->n++] = (struct span_route){s->offset, k, hs_ring_pick(bt->ring, k)};
    return 0;
}

/* The part of backend bt->v[i].backend: its spans, cut out of t. */
static int part_of_backend(const struct hs_traces *t, const struct by_trace *bt, size_t i,
                           struct hs_span_edit *edits, struct hs_lb_parts *out)
{
    size_t m = 0;
    for (size_t j = i; j < bt->n; j++)
        if (bt->v[j].backend == bt->v[i].backend)
            edits[m++] = (struct hs_span_edit){.offset = bt->v[j].offset};
    struct hs_traces *cut = NULL;
    if (hs_traces_edit(t, edits, m, false, &cut) != 0 || !cut)
        return HS_ENOMEM;
    struct hs_lb_part *pt = part_add(out);
    if (!pt) {
        hs_traces_unref(cut);
        return HS_ENOMEM;
    }
    /* a record re-routed from disk follows its first trace */
    *pt = (struct hs_lb_part){.batch = cut,
                              .key = bt->v[i].key,
                              .backend = bt->v[i].backend,
                              .items = cut->spans,
                              .bytes = cut->len};
    return 0;
}

static int split_by_trace(struct hs_traces *t, const struct hs_ring *ring, struct hs_lb_parts *out)
{
    struct by_trace bt = {.ring = ring};
    struct hs_otlp_limits lim = {0};
    struct hs_otlp_scan scan;
    int rc = hs_otlp_traces_scan(t->data, t->len, &lim, visit_span, &bt, &scan);
    rc = bt.nomem ? HS_ENOMEM : rc;
    bool mixed = false;
    for (size_t i = 1; rc == 0 && i < bt.n; i++)
        mixed |= bt.v[i].backend != bt.v[0].backend;
    if (rc == 0 && !mixed) { /* every trace of the batch goes to one backend */
        struct hs_lb_part *pt = part_add(out);
        if (pt) {
            uint64_t k = bt.n ? bt.v[0].key : 0;
            *pt = (struct hs_lb_part){.batch = t,
                                      .key = k,
                                      .backend = hs_ring_pick(ring, k),
                                      .items = t->spans,
                                      .bytes = t->len};
            t = NULL;
        }
        rc = pt ? 0 : HS_ENOMEM;
    }
    struct hs_span_edit *edits = rc == 0 && mixed ? malloc(bt.n * sizeof(*edits)) : NULL;
    if (rc == 0 && mixed && !edits)
        rc = HS_ENOMEM;
    for (size_t i = 0; rc == 0 && mixed && i < bt.n; i++) {
        bool seen = false;
        for (size_t j = 0; j < out->n && !seen; j++)
            seen = out->v[j].backend == bt.v[i].backend;
        if (!seen)
            rc = part_of_backend(t, &bt, i, edits, out);
    }
    free(edits);
    free(bt.v);
    if (rc != 0)
        hs_lb_parts_release(out, false);
    hs_traces_unref(t);
    return rc;
}

int hs_lb_split_traces(struct hs_traces *t, enum hs_lb_route route, const struct hs_ring *ring,
                       struct hs_lb_parts *out)
{
    out->n = 0;
    if (route == HS_LB_ROUTE_TRACE_ID)
        return split_by_trace(t, ring, out);
    return split_by_resource(t, route, ring, out);
}

/* ---- profiles ---------------------------------------------------------------------------- */

static uint64_t profile_key(const struct hs_profile *p, enum hs_lb_route route, const char *tenant)
{
    const char *svc = p->service ? p->service : hs_profile_label(p, "service_name");
    return hs_lb_key(route, tenant, svc, svc ? strlen(svc) : 0);
}

/* What the pyroscope exporter sends of a profile, copied into a profile of its own (a profile
 * belongs to one batch; the summary is the correlator's, which runs downstream). */
static struct hs_profile *profile_copy(const struct hs_profile *src)
{
    struct hs_profile *p = hs_profile_new();
    if (!p)
        return NULL;
    int rc = hs_profile_set_raw(p, src->raw, src->raw_len);
    for (uint32_t i = 0; rc == 0 && i < src->nlabels; i++) {
        const struct hs_label *l = &src->labels[i];
        rc = hs_profile_set_label(p, l->name, strlen(l->name), l->value, strlen(l->value));
    }
    const char *const from[] = {src->app_name, src->id, src->spy_name, src->sample_type_config};
    const char **to[] = {&p->app_name, &p->id, &p->spy_name, &p->sample_type_config};
    for (size_t i = 0; rc == 0 && i < HS_ARRAY_SIZE(from); i++)
        if (from[i] && !(*to[i] = hs_profile_strdup(p, from[i], strlen(from[i]))))
            rc = HS_ENOMEM;
    if (rc != 0) {
        hs_profile_free(p);
        return NULL;
    }
    p->service = hs_profile_label(p, "service_name");
    p->from_ns = src->from_ns;
    p->until_ns = src->until_ns;
    return p;
}

/* The part of `key`, made on first use. */
static struct hs_lb_part *profiles_part(const struct hs_profiles *b, const struct hs_ring *ring,
                                        uint64_t key, struct hs_lb_parts *out)
{
    for (size_t i = 0; i < out->n; i++)
        if (out->v[i].key == key)
            return &out->v[i];
    struct hs_profiles *nb = hs_profiles_new(b->tenant);
    struct hs_lb_part *pt = nb ? part_add(out) : NULL;
    if (!pt) {
        hs_profiles_unref(nb);
        return NULL;
    }
    nb->tenant_authenticated = b->tenant_authenticated;
    *pt = (struct hs_lb_part){.batch = nb, .key = key, .backend = hs_ring_pick(ring, key)};
    return pt;
}

int hs_lb_split_profiles(struct hs_profiles *b, enum hs_lb_route route, const struct hs_ring *ring,
                         struct hs_lb_parts *out)
{
    out->n = 0;
    if (route == HS_LB_ROUTE_TRACE_ID)
        route = HS_LB_ROUTE_TENANT_SERVICE;
    uint64_t first = b->count ? profile_key(b->items[0], route, b->tenant) : 0;
    bool mixed = false;
    for (uint32_t i = 1; i < b->count && !mixed; i++)
        mixed = profile_key(b->items[i], route, b->tenant) != first;
    if (!mixed) {
        struct hs_lb_part *pt = part_add(out);
        if (!pt) {
            hs_profiles_unref(b);
            return HS_ENOMEM;
        }
        *pt = (struct hs_lb_part){.batch = b,
                                  .key = first,
                                  .backend = hs_ring_pick(ring, first),
                                  .items = b->count,
                                  .bytes = b->bytes};
        return 0;
    }
    bool own = b->refs == 1; /* then the profiles move; else they are copied */
    int rc = 0;
    uint32_t left = 0;
    for (uint32_t i = 0; i < b->count; i++) {
        struct hs_profile *p = b->items[i];
        struct hs_lb_part *pt =
            rc ? NULL : profiles_part(b, ring, profile_key(p, route, b->tenant), out);
        struct hs_profile *q = !pt ? NULL : own ? p : profile_copy(p);
        if (!q) {
            rc = HS_ENOMEM;
            if (own)
                b->items[left++] = p; /* still the batch's: freed with it */
            continue;
        }
        struct hs_profiles *nb = pt->batch;
        if (hs_profiles_add(nb, q) != 0) /* q is freed by it */
            rc = HS_ENOMEM;
    }
    if (own)
        b->count = left, b->bytes = 0;
    for (size_t i = 0; i < out->n; i++) {
        struct hs_profiles *nb = out->v[i].batch;
        out->v[i].items = nb->count;
        out->v[i].bytes = nb->bytes;
    }
    hs_profiles_unref(b);
    if (rc != 0)
        hs_lb_parts_release(out, true);
    return rc;
}

/* ---- keys seen --------------------------------------------------------------------------- */

void hs_lb_keys_init(struct hs_lb_keys *k, uint32_t max)
{
    *k = (struct hs_lb_keys){.max = max};
}

void hs_lb_keys_free(struct hs_lb_keys *k)
{
    free(k->slots);
    *k = (struct hs_lb_keys){.max = k->max};
}

size_t hs_lb_keys_count(const struct hs_lb_keys *k)
{
    return k->count + k->has_zero;
}

static bool slot_put(uint64_t *slots, size_t cap, uint64_t key)
{
    for (size_t i = (size_t)(key & (cap - 1));; i = (i + 1) & (cap - 1)) {
        if (slots[i] == key)
            return false;
        if (slots[i] == 0) {
            slots[i] = key;
            return true;
        }
    }
}

void hs_lb_keys_note(struct hs_lb_keys *k, uint64_t key)
{
    if (key == 0) {
        k->has_zero = true;
        return;
    }
    if (hs_lb_keys_count(k) >= k->max) /* start over: the keys of now are what matter */
        hs_lb_keys_free(k);
    if (2 * (k->count + 1) > k->cap) { /* at most half full: probes stay short */
        size_t cap = k->cap ? 2 * k->cap : 64;
        uint64_t *slots = calloc(cap, sizeof(*slots));
        if (!slots)
            return; /* not counted: only the moved-keys count is less precise */
        for (size_t i = 0; i < k->cap; i++)
            if (k->slots[i])
                slot_put(slots, cap, k->slots[i]);
        free(k->slots);
        k->slots = slots;
        k->cap = cap;
    }
    k->count += slot_put(k->slots, k->cap, key);
}

static bool moves(uint64_t key, const struct hs_ring *from, const struct hs_ring *to)
{
    int a = hs_ring_pick(from, key), b = hs_ring_pick(to, key);
    if (a < 0 || b < 0)
        return a != b;
    return strcmp(hs_ring_name(from, (size_t)a), hs_ring_name(to, (size_t)b)) != 0;
}

uint64_t hs_lb_keys_moved(const struct hs_lb_keys *k, const struct hs_ring *from,
                          const struct hs_ring *to)
{
    uint64_t n = k->has_zero && moves(0, from, to);
    for (size_t i = 0; i < k->cap; i++)
        n += k->slots[i] && moves(k->slots[i], from, to);
    return n;
}
