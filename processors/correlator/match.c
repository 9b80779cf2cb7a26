/* match.c: the profile samples that match a slow span (design.md §1, §7): exact span_id first
 * in every profile type of its service (CPU, then wall, then the rest), then the subtree under
 * the function named like the span, then the service's window; and, when CPU does not explain
 * the span, the samples of the time it waited. What they say is annotate.c's and explain.c's. */
#include <stdlib.h>
#include <string.h>

#include "processors/correlator/correlator_int.h"

static void matched_push(struct corr_matched *m, const uint32_t *fids, uint32_t depth, int64_t v)
{
    if (m->nstacks == m->capstacks) {
        m->capstacks = m->capstacks ? m->capstacks * 2 : 64;
        m->stacks = realloc(m->stacks, m->capstacks * sizeof(*m->stacks));
        if (!m->stacks)
            abort();
    }
    m->stacks[m->nstacks++] = (struct corr_mstack){fids, depth, v};
}

static const struct corr_spanagg *bucket_span(const struct corr_bucket *b, struct hs_str id)
{
    if (id.len != 8)
        return NULL;
    uint64_t want;
    memcpy(&want, id.ptr, 8);
    return hs_corr_bucket_span(b, want);
}

/* The type's buckets overlapping [lo, hi]. */
static void collect_buckets(struct corr_matched *m, struct corr_type *t)
{
    m->type = t;
    m->nbuckets = 0;
    for (uint32_t i = 0; i < t->nring && m->nbuckets < HS_ARRAY_SIZE(m->buckets); i++) {
        struct corr_bucket *b = t->ring[i];
        if (b && b->total > 0 && b->min_from <= m->hi_ns && b->max_until >= m->lo_ns)
            m->buckets[m->nbuckets++] = b;
    }
}

/* The window's per-function totals, into the index scratch (by fid) until window_close, which
 * zeroes each function listed in wfids: every one written is listed, once. */
static void collect_window(struct correlator *c, struct corr_matched *m)
{
    int64_t *wtot = c->index.scratch;
    uint32_t stamp = corr_index_stamp(&c->index);
    m->wfids = hs_xmalloc(HS_MAX(m->svc->nnames, 1) * sizeof(*m->wfids));
    m->nwfids = 0;
    m->window_total = 0;
    for (uint32_t i = 0; i < m->nbuckets; i++) {
        const struct corr_bucket *b = m->buckets[i];
        m->window_total += b->total;
        for (uint32_t k = 0; k < b->nfuncs; k++) {
            const struct corr_fval *f = &b->funcs[k];
            if (c->index.mark[f->fid] != stamp) {
                c->index.mark[f->fid] = stamp;
                m->wfids[m->nwfids++] = f->fid;
            }
            wtot[f->fid] += f->total;
        }
    }
}

void hs_corr_match_close(struct correlator *c, struct corr_matched *m)
{
    for (uint32_t i = 0; i < m->nwfids; i++) /* the scratch is zero between uses */
        c->index.scratch[m->wfids[i]] = 0;
    free(m->wfids);
    m->wfids = NULL;
    m->nwfids = 0;
}

void hs_corr_match_free(struct correlator *c, struct corr_matched *m)
{
    hs_corr_match_close(c, m);
    free(m->stacks);
    free(m->ftot);
    m->stacks = NULL;
    m->ftot = NULL;
    m->nstacks = m->capstacks = 0;
}

/* The span's own samples in the type: their exact function totals (ftot) and kept stacks. */
static bool match_exact(struct corr_matched *m, struct hs_str span_id)
{
    m->total = m->span_value = 0;
    for (uint32_t i = 0; i < m->nbuckets; i++) {
        const struct corr_spanagg *a = bucket_span(m->buckets[i], span_id);
        if (!a || a->value == 0)
            continue;
        if (!m->ftot)
            m->ftot = hs_xcalloc(HS_MAX(m->svc->nnames, 1), sizeof(*m->ftot));
        m->span_value += a->value;
        for (uint32_t k = 0; k < a->nfuncs; k++)
            m->ftot[a->funcs[k].fid] += a->funcs[k].total;
        for (uint32_t k = 0; k < a->nstacks; k++)
            matched_push(m, a->stacks[k].fids, a->stacks[k].depth, a->stacks[k].value);
    }
    m->total = m->span_value;
    if (m->total > 0) {
        m->kind = CORR_MATCH_SPAN;
        return true;
    }
    m->nstacks = 0;
    return false;
}

static bool match_subtree(struct correlator *c, struct corr_matched *m, struct hs_str name)
{
    const int64_t *wtot = c->index.scratch;
    uint32_t anchor = UINT32_MAX;
    for (uint32_t i = 0; i < m->nwfids; i++) { /* the heaviest function named like the span */
        uint32_t f = m->wfids[i];
        if (hs_corr_name_matches(&m->svc->names[f], name) &&
            (anchor == UINT32_MAX || wtot[f] > wtot[anchor]))
            anchor = f;
    }
    if (anchor == UINT32_MAX)
        return false;
    for (uint32_t i = 0; i < m->nbuckets; i++)
        for (uint32_t k = 0; k < m->buckets[i]->nstacks; k++) {
            const struct corr_stack *st = &m->buckets[i]->stacks[k];
            for (uint32_t d = 0; d < st->depth; d++)
                if (st->fids[d] == anchor) {
                    matched_push(m, st->fids + d, st->depth - d, st->value);
                    break;
                }
        }
    m->total = wtot[anchor]; /* includes its samples folded into "other" */
    m->kind = CORR_MATCH_WINDOW;
    if (m->total > 0 && m->nstacks > 0)
        return true;
    m->nstacks = 0;
    return false;
}

static void match_window(struct corr_matched *m)
{
    for (uint32_t i = 0; i < m->nbuckets; i++)
        for (uint32_t k = 0; k < m->buckets[i]->nstacks; k++) {
            const struct corr_stack *st = &m->buckets[i]->stacks[k];
            matched_push(m, st->fids, st->depth, st->value);
        }
    m->total = m->window_total;
    m->kind = CORR_MATCH_WINDOW;
}

/* Exact in the first of types[] (in rank order) holding the span's own samples. */
static bool find_exact(struct correlator *c, struct corr_matched *m, struct corr_type **types,
                       uint32_t n, struct hs_str span_id)
{
    for (uint32_t i = 0; i < n; i++) {
        collect_buckets(m, types[i]);
        if (match_exact(m, span_id)) {
            collect_window(c, m); /* for grown_functions */
            return true;
        }
    }
    return false;
}

/* Do the type's buckets in the window carry span labels? Then its samples that are not a
 * span's own are other spans'. */
static bool labels_spans(const struct corr_matched *m)
{
    for (uint32_t i = 0; i < m->nbuckets; i++)
        if (m->buckets[i]->nspans > 0)
            return true;
    return false;
}

/* Do the type's buckets in the window reach from the span's start to its end? */
static bool covers(const struct corr_matched *m, const struct corr_span *s)
{
    int64_t from = INT64_MAX, until = INT64_MIN;
    for (uint32_t i = 0; i < m->nbuckets; i++) {
        from = HS_MIN(from, m->buckets[i]->min_from);
        until = HS_MAX(until, m->buckets[i]->max_until);
    }
    return m->nbuckets && from <= (int64_t)s->start_ns && until >= (int64_t)s->end_ns;
}

/* The subtree under the span's function in the first of types[] with samples in the window,
 * else (`whole`) that window; with `unlabelled`, of types that label no spans there only. */
static bool find_window(struct correlator *c, struct corr_matched *m, struct corr_type **types,
                        uint32_t n, struct hs_str name, bool whole, bool unlabelled)
{
    for (uint32_t i = 0; i < n; i++) {
        collect_buckets(m, types[i]);
        if (unlabelled && labels_spans(m))
            continue;
        collect_window(c, m);
        if (m->window_total > 0 && (match_subtree(c, m, name) || whole)) {
            if (m->nstacks == 0)
                match_window(m);
            return true;
        }
        hs_corr_match_close(c, m);
    }
    return false;
}

static void set_window(struct correlator *c, const struct corr_span *s, struct corr_matched *m)
{
    int64_t slack = (int64_t)c->conf.slack_ms * 1000000;
    m->lo_ns = (int64_t)s->start_ns - slack;
    m->hi_ns = (int64_t)s->end_ns + slack;
    int64_t maxw = (int64_t)c->conf.max_window_ms * 1000000;
    if (m->hi_ns - m->lo_ns > maxw) /* a long span: its last max_window */
        m->lo_ns = m->hi_ns - maxw;
}

/* Of types[], how many label spans in the span's window (*labelling), and do those cover it? */
static bool own_samples_known(struct corr_matched *m, const struct corr_span *s,
                              struct corr_type **types, uint32_t n, bool *labelling)
{
    bool known = false;
    *labelling = false;
    for (uint32_t i = 0; i < n; i++) {
        collect_buckets(m, types[i]);
        if (labels_spans(m)) {
            *labelling = true;
            known = known || covers(m, s);
        }
    }
    return known;
}

/* Finds the samples matching s; false (with *why) when there are none. A span whose own id
 * labels samples (s->labelled) takes no window of a type that labels spans: that would be
 * other spans' samples. Without samples of its own there, it was waiting: the window of a
 * profile of waiting (mutex, block) is its match, or none. */
bool hs_corr_match_find(struct correlator *c, const struct corr_span *s, struct corr_matched *m,
                        enum corr_reason *why)
{
    m->svc = hs_corr_index_find(&c->index, s->tenant, s->service);
    struct corr_type *types[CORR_MAX_TYPES], *waits[CORR_MAX_TYPES];
    uint32_t n = m->svc ? hs_corr_svc_types(m->svc, types) : 0, nw = 0;
    *why = CORR_REASON_NO_PROFILES_FOR_SERVICE;
    if (n == 0)
        return false;
    set_window(c, s, m);
    *why = CORR_REASON_NO_PROFILE_IN_WINDOW;
    if (hs_corr_index_scratch(&c->index, m->svc->nnames) != 0)
        return false;
    if (find_exact(c, m, types, n, s->span_id))
        return true;
    bool labelling = false;
    bool known = s->labelled && own_samples_known(m, s, types, n, &labelling);
    if (!(s->labelled && labelling)) {
        if (find_window(c, m, types, n, s->name, true, false))
            return true;
    } else {
        for (uint32_t i = 0; i < n; i++)
            if (types[i]->rank == CORR_KIND_MUTEX || types[i]->rank == CORR_KIND_BLOCK)
                waits[nw++] = types[i];
        if (find_window(c, m, waits, nw, s->name, true, true))
            return true;
        if (known)
            *why = CORR_REASON_NO_SAMPLES_OF_SPAN;
    }
    m->type = types[0];
    return false;
}

/* ---- off CPU ---------------------------------------------------------------------------- */

/* CPU ns under the span id / its duration: from an exact CPU match, or, for a span whose id
 * labels samples, from a CPU type that labels spans and covers it (then a span without samples
 * there was off CPU: 0); -1 when not known (a child span's samples carry its root's id). */
double hs_corr_match_cpu_share(struct correlator *c, const struct corr_span *s,
                               const struct corr_matched *m)
{
    if (!m->svc || !m->type || s->end_ns <= s->start_ns)
        return -1;
    double dur = (double)(s->end_ns - s->start_ns);
    if (m->kind == CORR_MATCH_SPAN && m->type->cpu_ns)
        return (double)m->span_value / dur;
    if (m->kind != CORR_MATCH_SPAN && !s->labelled)
        return -1;
    struct corr_matched k = {.svc = m->svc, .lo_ns = m->lo_ns, .hi_ns = m->hi_ns};
    for (uint32_t t = 0; t < m->svc->ntypes; t++) {
        if (!m->svc->types[t].cpu_ns)
            continue;
        collect_buckets(&k, &m->svc->types[t]);
        if (!labels_spans(&k) || !covers(&k, s))
            continue;
        int64_t v = 0;
        for (uint32_t i = 0; i < k.nbuckets; i++) {
            const struct corr_spanagg *a = bucket_span(k.buckets[i], s->span_id);
            v += a ? a->value : 0;
        }
        return (double)v / dur;
    }
    return -1;
}

/* Did the span wait, so that profile.offcpu.* must say where? Its CPU share is known and low;
 * or, not known, its match is in a profile of waiting (goroutines, mutex, block), or is a CPU
 * window that cannot be its own (the profile labels spans: it is a child under a labelled
 * root, and its window a guess), or the whole service was on CPU for less than half of the
 * span in the window. (A wall match alone does not say: its time may have been on CPU.) */
static bool waited(const struct corr_span *s, const struct corr_matched *m, double share)
{
    if (s->end_ns <= s->start_ns)
        return false;
    if (share >= 0)
        return share < CORR_OFFCPU_SHARE;
    if (hs_corr_kind_waits(m->type->rank))
        return true;
    if (m->type->rank != CORR_KIND_CPU)
        return false;
    if (m->kind == CORR_MATCH_WINDOW && labels_spans(m))
        return true;
    return m->type->cpu_ns &&
           (double)m->window_total < CORR_OFFCPU_SHARE * (double)(s->end_ns - s->start_ns);
}

/* Where a span that waited spent the time, whichever type its match is in: its own samples in
 * the first non-CPU type holding some (wall, goroutines: the types that carry span labels),
 * else the subtree under the span's function, else the window, of the types that measure
 * waiting without labels (mutex, block) or allocation. */
static bool find_offcpu(struct correlator *c, const struct corr_span *s,
                        const struct corr_matched *m, struct corr_matched *o)
{
    struct corr_type *all[CORR_MAX_TYPES], *types[CORR_MAX_TYPES], *waits[CORR_MAX_TYPES];
    uint32_t n = hs_corr_svc_types(m->svc, all), nt = 0, nw = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (all[i]->rank == CORR_KIND_CPU)
            continue;
        types[nt++] = all[i];
        if (all[i]->rank == CORR_KIND_MUTEX || all[i]->rank == CORR_KIND_BLOCK ||
            all[i]->rank == CORR_KIND_ALLOC)
            waits[nw++] = all[i];
    }
    *o = (struct corr_matched){.svc = m->svc, .lo_ns = m->lo_ns, .hi_ns = m->hi_ns};
    return find_exact(c, o, types, nt, s->span_id) ||
           find_window(c, o, waits, nw, s->name, false, s->labelled) ||
           find_window(c, o, waits, nw, s->name, true, s->labelled);
}

bool hs_corr_match_offcpu(struct correlator *c, const struct corr_span *s,
                          const struct corr_matched *m, double share, struct corr_matched *o)
{
    return waited(s, m, share) && find_offcpu(c, s, m, o);
}
