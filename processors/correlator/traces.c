/* traces.c: the correlator's traces path: each span checked for slowness (and counted for N+1
 * and first sight); a slow span is annotated in place when its profile is here or will not
 * come, else taken out of the batch into one of its own and parked (park.c) until it does. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/semconv.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"
#include "processors/correlator/correlator_int.h"

struct slow_rec {
    size_t offset, len;
    struct corr_span span;
    uint64_t first_seen_ms; /* its service's first span */
    struct corr_svc *svc;   /* when it parks */
    bool cold;              /* it parks for its service's first profile */
};

struct scan_ctx {
    struct correlator *c;
    const uint8_t *data;
    struct slow_rec *slow;
    uint32_t nslow, cap;
    uint32_t next;      /* the group rescan: which slow_rec the next span is */
    const char *tenant; /* the batch's (X-Scope-OrgID), for spans without labels.trace_tenant */
    bool tenant_auth;   /* ... a per-tenant token's: labels.trace_tenant cannot override it */
    struct hs_str dflt_tenant; /* the batch's, else `tenant`: spans without the label */
    uint64_t now_ms;
    struct hs_str seen_tenant, seen_service; /* the last service touched: a resource's spans */
    uint64_t first_seen_ms;                  /* ... share it, so one lookup per resource */
    uint64_t frag_tenant;                    /* ... and its tenant as fragments key it */
};

/* The tenant of the batch's spans that name none (fill_span), worked out once per batch. */
static void scan_tenant(struct scan_ctx *x, const struct hs_traces *batch)
{
    const char *dt = batch->tenant[0] ? batch->tenant : x->c->conf.tenant;
    x->data = batch->data;
    x->tenant = batch->tenant;
    x->tenant_auth = batch->tenant_authenticated;
    x->dflt_tenant = dt ? (struct hs_str){dt, strlen(dt)} : (struct hs_str){"", 0};
    x->seen_service = (struct hs_str){NULL, 0}; /* views into the previous batch */
}

/* What annotation needs of the span. Its tenant is the batch's when a per-tenant token decided
 * it: a client must not choose whose profiles annotate its spans, so `labels.trace_tenant` may
 * only agree. Otherwise the label's when present, else the batch's, else `tenant`. Returns true
 * when the label named another tenant than the authenticated one (*named: that name). */
static bool fill_span(const struct scan_ctx *x, const struct hs_span_view *v, struct corr_span *s,
                      struct hs_str *named)
{
    const struct correlator *c = x->c;
    const char *tk = c->conf.labels.trace_tenant;
    bool mismatch = false;
    s->tenant = x->dflt_tenant;
    if (tk && *tk) {
        struct hs_str t;
        if (hs_attrs_find_str(v->resource, 1, tk, &t)) {
            mismatch = x->tenant_auth && !hs_str_eq(t, x->tenant);
            if (mismatch)
                *named = t;
            else
                s->tenant = t;
        }
    }
    if (c->service_is_name)
        s->service = v->service_name;
    else if (!hs_attrs_find_str(v->resource, 1, c->conf.labels.trace_service, &s->service))
        s->service = (struct hs_str){"", 0};
    s->name = v->name;
    s->trace_id = v->trace_id;
    s->span_id = v->span_id;
    s->start_ns = v->start_ns;
    s->end_ns = v->end_ns;
    return mismatch;
}

/* A span of an authenticated tenant named another one: counted, logged (rate-limited). */
static void tenant_mismatch(struct correlator *c, const struct scan_ctx *x, struct hs_str named)
{
    hs_counter_add(c->stats.tenant_mismatch, 1);
    uint32_t supp;
    if (hs_ratelimit_allow(&c->tenant_rl, corr_now_ms(c), &supp))
        hs_log_warn(c->base.id,
                    "a span of tenant \"%s\" (per-tenant token) names tenant \"%.*s\" in %s: "
                    "annotated from tenant \"%s\"'s profiles only (%u more not logged)",
                    x->tenant, (int)HS_MIN(named.len, 64), named.ptr, c->conf.labels.trace_tenant,
                    x->tenant, supp);
}

static void fmt_ms(char *out, size_t cap, uint64_t ns)
{
    if (ns >= 10000000)
        snprintf(out, cap, "%.0fms", (double)ns / 1e6);
    else if (ns >= 1000000)
        snprintf(out, cap, "%.1fms", (double)ns / 1e6);
    else
        snprintf(out, cap, "%.0fus", (double)ns / 1e3);
}

/* Slow when at least slow.threshold, or (slow.factor set, after slow.min_samples spans of the
 * same service and name) longer than factor x their p50. Writes the reason. */
static bool is_slow(struct correlator *c, const struct corr_span *s, char *reason, size_t cap)
{
    uint64_t dur = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
    uint64_t thr = c->conf.slow.threshold_ms * 1000000;
    bool slow = thr > 0 && dur >= thr;
    if (slow)
        snprintf(reason, cap, "threshold %" PRIu64 "ms", c->conf.slow.threshold_ms);
    if (c->conf.slow.factor > 0) {
        uint32_t n;
        uint64_t p50 =
            hs_corr_latency_observe(&c->latency, s->tenant, s->service, s->name, dur, &n);
        if (!slow && n >= c->conf.slow.min_samples && p50 > 0 &&
            (double)dur > c->conf.slow.factor * (double)p50) {
            char p[32];
            fmt_ms(p, sizeof(p), p50);
            snprintf(reason, cap, "%.1fx p50 %s", c->conf.slow.factor, p);
            slow = true;
        }
    }
    return slow;
}

/* Does the span carry pyroscope.profile.id = its own id, as otel-profiling-go and -java set it
 * on the spans whose id they put in the samples' labels? */
static bool own_profile_id(const uint8_t *data, const struct hs_span_view *v)
{
    struct hs_str id;
    if (v->span_id.len != 8 || !hs_span_attr_str(data, v, HS_ATTR_PYROSCOPE_PROFILE_ID, &id) ||
        id.len != 16)
        return false;
    for (size_t i = 0; i < 8; i++) {
        int hi = hs_hexval((unsigned char)id.ptr[2 * i]);
        int lo = hs_hexval((unsigned char)id.ptr[2 * i + 1]);
        if (hi < 0 || lo < 0 || (uint8_t)(hi << 4 | lo) != (uint8_t)v->span_id.ptr[i])
            return false;
    }
    return true;
}

/* Can the span carry attribute `key`? Only when its bytes hold the key's: a memchr for the
 * key's byte `at` (one that is rare in spans) and a compare, before the walk that decodes each
 * attribute in turn. Most children are no database calls, and every child is asked for its
 * db.statement. */
static bool may_carry(const uint8_t *data, const struct hs_span_view *v, const char *key, size_t at)
{
    size_t klen = strlen(key);
    const uint8_t *span = data + v->offset, *end = span + v->len;
    if (v->attributes == 0 || v->len < klen)
        return false;
    for (const uint8_t *p = span + at; p < end; p++) {
        if (!(p = memchr(p, (unsigned char)key[at], (size_t)(end - p))))
            return false;
        if ((size_t)(end - (p - at)) >= klen && memcmp(p - at, key, klen) == 0)
            return true;
    }
    return false;
}

static int visit_span(void *ud, const struct hs_span_view *v)
{
    struct scan_ctx *x = ud;
    struct correlator *c = x->c;
    struct corr_span s;
    struct hs_str named;
    if (fill_span(x, v, &s, &named))
        tenant_mismatch(c, x, named);
    if (!x->seen_service.ptr || s.service.ptr != x->seen_service.ptr ||
        s.service.len != x->seen_service.len || s.tenant.ptr != x->seen_tenant.ptr ||
        s.tenant.len != x->seen_tenant.len) {
        x->first_seen_ms = hs_corr_seen_touch(&c->seen, s.tenant, s.service, x->now_ms);
        x->frag_tenant = hs_corr_fragments_tenant(s.tenant);
        x->seen_tenant = s.tenant;
        x->seen_service = s.service.ptr ? s.service : (struct hs_str){"", 0};
    }
    if (v->parent_span_id.len == 8 && v->trace_id.len == 16) {
        struct hs_str stmt = {"", 0};
        if (may_carry(x->data, v, HS_ATTR_DB_STATEMENT, 1)) /* its 'b' */
            hs_span_attr_str(x->data, v, HS_ATTR_DB_STATEMENT, &stmt);
        hs_corr_fragments_add(&c->frags, x->frag_tenant, v->trace_id, v->parent_span_id, v->name,
                              stmt);
    }
    if (!is_slow(c, &s, s.slow_reason, sizeof(s.slow_reason)))
        return 0;
    s.labelled = v->parent_span_id.len == 0 || own_profile_id(x->data, v);
    s.frag.count = 0; /* kept when it parks (keep_fragment) */
    if (x->nslow == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 16;
        x->slow = realloc(x->slow, x->cap * sizeof(*x->slow));
        if (!x->slow)
            abort();
    }
    x->slow[x->nslow++] = (struct slow_rec){
        .offset = v->offset, .len = v->len, .span = s, .first_seen_ms = x->first_seen_ms};
    return 0;
}

/* The rescan of the batch of parked spans: their offsets and views there. */
static int visit_group(void *ud, const struct hs_span_view *v)
{
    struct scan_ctx *x = ud;
    while (x->next < x->nslow && !x->slow[x->next].svc)
        x->next++;
    if (x->next == x->nslow)
        return HS_EINVAL;
    struct slow_rec *r = &x->slow[x->next++];
    char reason[sizeof(r->span.slow_reason)];
    memcpy(reason, r->span.slow_reason, sizeof(reason));
    struct hs_str named;
    fill_span(x, v, &r->span, &named); /* a mismatch was counted by the first scan */
    memcpy(r->span.slow_reason, reason, sizeof(reason));
    r->offset = v->offset;
    return 0;
}

/* Parks the slow spans that wait: they move into a batch of their own, which each holds a
 * reference on. Returns 0 or an error (then nothing parked). */
/* The span's children counted so far (this batch's included: scanned before it parks). */
static void keep_fragment(struct correlator *c, struct corr_span *s)
{
    struct corr_frag_best g = hs_corr_fragments_best(&c->frags, s->tenant, s->trace_id, s->span_id);
    s->frag.count = g.count;
    s->frag.stmt = g.stmt;
    if (g.count)
        snprintf(s->frag.text, sizeof(s->frag.text), "%s", g.text);
}

static int park_group(struct correlator *c, struct hs_traces *batch, struct scan_ctx *x,
                      uint32_t nwait)
{
    struct hs_span_edit *ed = hs_xcalloc(nwait, sizeof(*ed));
    uint32_t k = 0;
    for (uint32_t i = 0; i < x->nslow; i++)
        if (x->slow[i].svc)
            ed[k++].offset = x->slow[i].offset;
    struct hs_traces *group = NULL;
    int rc = hs_traces_edit(batch, ed, k, false, &group);
    free(ed);
    if (rc || !group)
        return rc ? rc : HS_EINVAL;
    struct hs_otlp_scan res;
    scan_tenant(x, group); /* the parked spans' tenant lives as long as their group */
    x->next = 0;
    rc = hs_otlp_traces_scan(group->data, group->len, NULL, visit_group, x, &res);
    if (rc) {
        hs_traces_unref(group);
        return rc;
    }
    uint64_t now = corr_now_ms(c);
    for (uint32_t i = 0; i < x->nslow; i++) {
        struct slow_rec *r = &x->slow[i];
        if (!r->svc)
            continue;
        struct corr_parked *p = hs_xcalloc(1, sizeof(*p));
        p->svc = r->svc;
        p->group = hs_traces_ref(group);
        p->offset = r->offset;
        p->bytes = r->len + sizeof(*p);
        p->arrival_ms = now;
        p->deadline_ms = now + c->conf.max_wait_ms;
        p->cold = r->cold;
        if (r->cold) /* the first upload may take longer than max_wait (Node: 60 s) */
            p->deadline_ms =
                HS_MAX(p->deadline_ms, r->first_seen_ms + c->conf.first_profile_wait_ms);
        p->need_until_ns = (int64_t)(r->span.end_ns + c->conf.slack_ms * 1000000);
        p->span = r->span;
        keep_fragment(c, &p->span);
        hs_corr_cadence_extend(&c->conf, p, now);
        hs_corr_park(c, p);
    }
    hs_traces_unref(group); /* the parked spans hold it now */
    return 0;
}

/* Should this slow span wait? When its service sends profiles (seen within retention) and
 * none covering the span's end + slack has arrived yet; or when its service has sent none yet
 * but may still be about to (cold start: first seen less than first_profile_wait ago). */
static struct corr_svc *waits_for(struct correlator *c, struct slow_rec *r)
{
    if (c->conf.max_wait_ms == 0 || c->closing)
        return NULL;
    const struct corr_span *s = &r->span;
    uint64_t now = corr_now_ms(c);
    struct corr_svc *svc = hs_corr_index_find(&c->index, s->tenant, s->service);
    if (svc && svc->ntypes > 0 && svc->last_seen_ms + c->conf.retention_ms >= now) {
        if (hs_corr_cadence_covered(svc, now, &c->conf) >=
            (int64_t)(s->end_ns + c->conf.slack_ms * 1000000))
            return NULL; /* its profile is here already */
        return svc;
    }
    if (now >= r->first_seen_ms + c->conf.first_profile_wait_ms) {
        hs_counter_add(c->stats.cold[CORR_COLD_NOT_WAITED], 1); /* shown long enough: none */
        return NULL;
    }
    r->cold = true;
    return hs_corr_index_get(&c->index, s->tenant, s->service, now);
}

int hs_corr_consume_traces(struct hs_component *base, struct hs_traces *batch)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    if (!hs_consumer_ready(base->next) || c->noutq) { /* refused whole, never half delivered */
        hs_traces_unref(batch);
        return HS_EAGAIN;
    }
    struct scan_ctx x = {.c = c, .now_ms = corr_now_ms(c)};
    scan_tenant(&x, batch);
    struct hs_otlp_scan res;
    int rc = hs_otlp_traces_scan(batch->data, batch->len, NULL, visit_span, &x, &res);
    hs_counter_add(c->stats.checked, res.spans);
    if (rc || x.nslow == 0) { /* nothing slow: the same batch goes on, no copy */
        free(x.slow);
        return hs_consumer_traces(base->next, batch);
    }
    hs_counter_add(c->stats.slow, x.nslow);
    uint32_t nwait = 0;
    for (uint32_t i = 0; i < x.nslow; i++)
        x.slow[i].svc = waits_for(c, &x.slow[i]);
    /* a service made for a cold start may have evicted one an earlier span waits for: looked
     * up again, and a span whose service is gone is annotated now */
    for (uint32_t i = 0; i < x.nslow; i++)
        if (x.slow[i].svc && (x.slow[i].svc = hs_corr_index_find(&c->index, x.slow[i].span.tenant,
                                                                 x.slow[i].span.service)))
            nwait++;
    /* the spans that go on now: annotated in place, or taken out when they wait */
    struct hs_buf attrs = {0};
    size_t *at = hs_xmalloc(x.nslow * 2 * sizeof(*at));
    struct hs_span_edit *ed = hs_xcalloc(x.nslow, sizeof(*ed));
    for (uint32_t i = 0; i < x.nslow; i++) {
        at[2 * i] = attrs.len;
        if (!x.slow[i].svc)
            hs_corr_annotate_observed(c, &x.slow[i].span, CORR_REASON_NONE, &attrs);
        at[2 * i + 1] = attrs.len;
    }
    for (uint32_t i = 0; i < x.nslow; i++)
        ed[i] = (struct hs_span_edit){.offset = x.slow[i].offset,
                                      .attrs = attrs.data + at[2 * i],
                                      .attrs_len = at[2 * i + 1] - at[2 * i],
                                      .remove = x.slow[i].svc != NULL};
    struct hs_traces *out = NULL;
    rc = hs_traces_edit(batch, ed, x.nslow, true, &out);
    if (rc == 0 && nwait && park_group(c, batch, &x, nwait) != 0) {
        /* cannot park (out of memory): they go on un-annotated rather than wait or vanish */
        if (out)
            hs_traces_unref(out);
        rc = HS_ENOMEM;
    }
    free(ed);
    free(at);
    hs_buf_free(&attrs);
    free(x.slow);
    if (rc) {
        hs_metrics_drop(base->metrics, base->id, "annotate_failed", 0);
        return hs_consumer_traces(base->next, batch);
    }
    hs_traces_unref(batch);
    return out ? hs_consumer_traces(base->next, out) : 0;
}
