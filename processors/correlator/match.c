/* match.c: what a slow span is told (design.md §1, §7): the profile samples that match it, in
 * order exact span_id -> the subtree under the function named like the span -> the service's
 * window, summarized as top functions, hot path, CPU share and functions grown against the
 * service's baseline; plus the N+1 pattern and a Pyroscope link. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/semconv.h"
#include "pdata/traces_edit.h"
#include "processors/correlator/correlator_int.h"

struct matched {
    struct corr_svc *svc;
    struct corr_type *type;
    struct corr_bucket *buckets[64];
    uint32_t nbuckets;
    int64_t lo_ns, hi_ns;
    int64_t window_total;  /* all samples of the window */
    uint32_t *wfids;       /* functions with samples in the window; totals in index scratch */
    uint32_t nwfids;
    struct corr_mstack *stacks; /* the matched samples' stacks */
    uint32_t nstacks, capstacks;
    int64_t total;         /* the matched samples (kept stacks and folded ones) */
    int64_t span_value;    /* exact: samples carrying the span id */
    enum corr_match kind;
};

static void push_stack(struct matched *m, const uint32_t *fids, uint32_t depth, int64_t v)
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
    if (!b->span_slots || id.len != 8)
        return NULL;
    uint64_t want;
    memcpy(&want, id.ptr, 8);
    for (uint32_t i = 0; i < b->nspans; i++) /* slots are index.c's; a scan is fine at 1% */
        if (b->spans[i].id == want)
            return &b->spans[i];
    return NULL;
}

/* Is the function (by display name) the span's own? Either name may be the qualified one:
 * spans "findByEmail" and "UserRepository.findByEmail" both name the function
 * "UserRepository.findByEmail", and a span "UserRepository.findByEmail" names the function
 * "findByEmail" too, as SDKs name spans Class.method where profilers of JavaScript or Python
 * give the bare method. */
static bool name_matches(const char *disp, struct hs_str span_name)
{
    struct hs_str fn = {disp, strlen(disp)};
    return hs_str_ends_with_name(fn, span_name) || hs_str_ends_with_name(span_name, fn);
}

/* The window's buckets and its per-function totals (into the index scratch, by fid). */
static void collect_window(struct correlator *c, struct matched *m)
{
    struct corr_type *t = m->type;
    int64_t *wtot = c->index.scratch;
    m->wfids = hs_xmalloc(HS_MAX(m->svc->nnames, 1) * sizeof(*m->wfids));
    for (uint32_t i = 0; i < t->nring && m->nbuckets < HS_ARRAY_SIZE(m->buckets); i++) {
        struct corr_bucket *b = t->ring[i];
        if (!b || b->total <= 0 || b->min_from > m->hi_ns || b->max_until < m->lo_ns)
            continue;
        m->buckets[m->nbuckets++] = b;
        m->window_total += b->total;
        for (uint32_t k = 0; k < b->nfuncs; k++) {
            const struct corr_fval *f = &b->funcs[k];
            if (wtot[f->fid] == 0 && f->total > 0)
                m->wfids[m->nwfids++] = f->fid;
            wtot[f->fid] += f->total;
        }
    }
}

static bool match_exact(struct matched *m, struct hs_str span_id)
{
    for (uint32_t i = 0; i < m->nbuckets; i++) {
        const struct corr_spanagg *a = bucket_span(m->buckets[i], span_id);
        if (!a)
            continue;
        m->span_value += a->value;
        m->total += a->value;
        for (uint32_t k = 0; k < a->nstacks; k++)
            push_stack(m, a->stacks[k].fids, a->stacks[k].depth, a->stacks[k].value);
    }
    return m->total > 0;
}

static bool match_subtree(struct correlator *c, struct matched *m, struct hs_str name)
{
    const int64_t *wtot = c->index.scratch;
    uint32_t anchor = UINT32_MAX;
    for (uint32_t i = 0; i < m->nwfids; i++) { /* the heaviest function named like the span */
        uint32_t f = m->wfids[i];
        if (name_matches(m->svc->names[f].disp, name) &&
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
                    push_stack(m, st->fids + d, st->depth - d, st->value);
                    break;
                }
        }
    m->total = wtot[anchor]; /* includes its samples folded into "other" */
    return m->total > 0 && m->nstacks > 0;
}

static void match_window(struct matched *m)
{
    for (uint32_t i = 0; i < m->nbuckets; i++)
        for (uint32_t k = 0; k < m->buckets[i]->nstacks; k++) {
            const struct corr_stack *st = &m->buckets[i]->stacks[k];
            push_stack(m, st->fids, st->depth, st->value);
        }
    m->total = m->window_total;
}

/* The heaviest root-to-leaf path: at each depth the callee with the most samples, while it has
 * at least CORR_HOT_PATH_MIN of the matched total. Writes fids and their values; returns the
 * length. */
static uint32_t hot_path(const struct matched *m, uint32_t *path, int64_t *vals, uint32_t cap)
{
    bool *on = hs_xmalloc(HS_MAX(m->nstacks, 1));
    memset(on, 1, m->nstacks);
    struct {
        uint32_t fid;
        int64_t v;
    } *cand = hs_xmalloc(HS_MAX(m->nstacks, 1) * sizeof(*cand));
    uint32_t n = 0;
    for (uint32_t d = 0; d < cap; d++) {
        uint32_t nc = 0;
        for (uint32_t i = 0; i < m->nstacks; i++) {
            if (!on[i] || m->stacks[i].depth <= d)
                continue;
            uint32_t f = m->stacks[i].fids[d], k = 0;
            while (k < nc && cand[k].fid != f)
                k++;
            if (k == nc)
                cand[nc++].fid = f, cand[k].v = 0;
            cand[k].v += m->stacks[i].value;
        }
        uint32_t best = UINT32_MAX;
        for (uint32_t k = 0; k < nc; k++)
            if (best == UINT32_MAX || cand[k].v > cand[best].v ||
                (cand[k].v == cand[best].v && cand[k].fid < cand[best].fid))
                best = k;
        if (best == UINT32_MAX || (double)cand[best].v < CORR_HOT_PATH_MIN * (double)m->total)
            break;
        path[n] = cand[best].fid;
        vals[n++] = cand[best].v;
        for (uint32_t i = 0; i < m->nstacks; i++)
            on[i] = on[i] && m->stacks[i].depth > d && m->stacks[i].fids[d] == cand[best].fid;
    }
    free(cand);
    free(on);
    return n;
}

struct ranked {
    uint32_t fid;
    int64_t total;
    double pp;
};

static int by_total(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return x->fid < y->fid ? -1 : x->fid > y->fid;
}

static int by_pp(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->pp != y->pp)
        return x->pp > y->pp ? -1 : 1;
    return x->fid < y->fid ? -1 : x->fid > y->fid;
}

static int put_list(struct hs_buf *attrs, const char *key, char (*text)[160], uint32_t n)
{
    const char *vals[64];
    for (uint32_t i = 0; i < n; i++)
        vals[i] = text[i];
    return hs_attr_string_array(attrs, key, vals, n);
}

/* profile.top_functions: functions by their total within the matched samples. The trunk (the
 * hot path's root-most frames holding CORR_TRUNK_SHARE of the samples: main, the server loop,
 * the request handler) is in nearly every stack and names nothing, so it is left out — all but
 * its deepest frame, which is where the time is before it splits (an N+1 loop's
 * `loadPreferences 98%`), unless that frame is the root or the span's own function (the anchor
 * of a subtree match), which the span already names. The trunk ends at the span's own function
 * when the hot path passes through it. */
static void put_top(struct correlator *c, struct matched *m, struct hs_str span_name,
                    const uint32_t *path, const int64_t *pvals, uint32_t npath,
                    struct hs_buf *attrs, struct corr_ui_note *note)
{
    uint32_t top = HS_MIN(c->conf.top, 64);
    struct corr_svc *s = m->svc;
    int64_t *tot = hs_xcalloc(HS_MAX(s->nnames, 1), sizeof(*tot));
    uint32_t *stamp = hs_xcalloc(HS_MAX(s->nnames, 1), sizeof(*stamp));
    uint32_t *fids = hs_xmalloc(HS_MAX(s->nnames, 1) * sizeof(*fids));
    uint32_t nf = 0;
    if (m->kind == CORR_MATCH_WINDOW && m->nstacks && m->total == m->window_total) {
        for (uint32_t i = 0; i < m->nwfids; i++) { /* the whole window: exact function totals */
            fids[nf++] = m->wfids[i];
            tot[m->wfids[i]] = c->index.scratch[m->wfids[i]];
        }
    } else {
        for (uint32_t i = 0; i < m->nstacks; i++)
            for (uint32_t d = 0; d < m->stacks[i].depth; d++) {
                uint32_t f = m->stacks[i].fids[d];
                if (stamp[f] == i + 1)
                    continue; /* recursion: once per stack */
                stamp[f] = i + 1;
                if (tot[f] == 0)
                    fids[nf++] = f;
                tot[f] += m->stacks[i].value;
            }
    }
    uint32_t trunk = 0;
    while (trunk < npath && (double)pvals[trunk] >= CORR_TRUNK_SHARE * (double)m->total)
        trunk++;
    /* what the span's own function calls is where the span spends its time, never trunk (an
     * exact match whose every sample is findByEmail > loadPreferences > query) */
    for (uint32_t k = 0; k < trunk; k++)
        if (name_matches(s->names[path[k]].disp, span_name)) {
            trunk = k + 1;
            break;
        }
    /* the deepest trunk frame stays in the ranking when it says something */
    if (trunk > 1 && !name_matches(s->names[path[trunk - 1]].disp, span_name))
        trunk--;
    struct ranked *r = hs_xmalloc(HS_MAX(nf, 1) * sizeof(*r));
    uint32_t nr = 0;
    for (uint32_t i = 0; i < nf; i++) {
        bool in_trunk = false;
        for (uint32_t k = 0; k < trunk; k++)
            in_trunk = in_trunk || path[k] == fids[i];
        if (!in_trunk && tot[fids[i]] > 0)
            r[nr++] = (struct ranked){fids[i], tot[fids[i]], 0};
    }
    if (nr == 0 && trunk > 0)
        r[nr++] = (struct ranked){path[trunk - 1], pvals[trunk - 1], 0};
    qsort(r, nr, sizeof(*r), by_total);
    nr = HS_MIN(nr, top);
    char(*text)[160] = hs_xmalloc(HS_MAX(nr, 1) * sizeof(*text));
    for (uint32_t i = 0; i < nr; i++)
        snprintf(text[i], sizeof(text[i]), "%s %.0f%%", s->names[r[i].fid].disp,
                 round(100.0 * (double)r[i].total / (double)m->total));
    for (uint32_t i = 0; note && i < nr && i < CORR_UI_LIST; i++) {
        note->top[i].fid = r[i].fid;
        note->top[i].share = (double)r[i].total / (double)m->total;
        note->ntop = i + 1;
    }
    if (nr)
        put_list(attrs, HS_ATTR_PROFILE_TOP_FUNCTIONS, text, nr);
    free(text);
    free(r);
    free(fids);
    free(stamp);
    free(tot);
}

static void put_hot_path(struct matched *m, const uint32_t *path, uint32_t npath,
                         struct hs_buf *attrs)
{
    struct hs_buf b = {0};
    for (uint32_t i = 0; i < npath; i++)
        hs_buf_printf(&b, "%s%s", i ? " > " : "", m->svc->names[path[i]].disp);
    if (b.len)
        hs_attr_string(attrs, HS_ATTR_PROFILE_HOT_PATH, (const char *)b.data, b.len);
    hs_buf_free(&b);
}

/* profile.grown_functions: window shares against the type's decayed baseline of closed
 * buckets, in percentage points, when above grown.min_pp. */
static void put_grown(struct correlator *c, struct matched *m, struct hs_buf *attrs,
                      struct corr_ui_note *note)
{
    struct corr_type *t = m->type;
    if (t->base_buckets == 0 || m->window_total <= 0)
        return;
    struct ranked *r = hs_xmalloc(HS_MAX(m->nwfids, 1) * sizeof(*r));
    uint32_t nr = 0;
    for (uint32_t i = 0; i < m->nwfids; i++) {
        uint32_t f = m->wfids[i];
        double share = (double)c->index.scratch[f] / (double)m->window_total;
        double pp = 100.0 * (share - (f < t->nbase ? t->base[f] : 0.0));
        if (pp > c->conf.grown.min_pp)
            r[nr++] = (struct ranked){f, 0, pp};
    }
    qsort(r, nr, sizeof(*r), by_pp);
    nr = HS_MIN(nr, HS_MIN(c->conf.top, 64));
    char(*text)[160] = hs_xmalloc(HS_MAX(nr, 1) * sizeof(*text));
    for (uint32_t i = 0; i < nr; i++)
        snprintf(text[i], sizeof(text[i]), "%s +%.0fpp", m->svc->names[r[i].fid].disp, r[i].pp);
    for (uint32_t i = 0; note && i < nr && i < CORR_UI_LIST; i++) {
        uint32_t f = r[i].fid;
        note->grown[i].fid = f;
        note->grown[i].share = (double)c->index.scratch[f] / (double)m->window_total;
        note->grown[i].base = f < t->nbase ? t->base[f] : 0.0;
        note->ngrown = i + 1;
    }
    if (nr)
        put_list(attrs, HS_ATTR_PROFILE_GROWN_FUNCTIONS, text, nr);
    free(text);
    free(r);
}

void corr_url_escape(struct hs_buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~')
            hs_buf_putc(b, ch);
        else
            hs_buf_printf(b, "%%%02X", ch);
    }
}

/* profile.link: `<pyroscope_url>/?query=<type>{<profile_service label>="<service>"}&from=<unix
 * s>&until=<unix s>` (query URL-escaped; the window the match used), which Pyroscope's UI opens
 * as the service's flame graph for that range. */
static void put_link(struct correlator *c, struct matched *m, struct hs_buf *attrs,
                     struct hs_buf *u)
{
    const char *base = c->conf.pyroscope_url;
    if (!base || !*base)
        return;
    struct hs_buf q = {0};
    hs_buf_printf(&q, "%s{%s=\"%s\"}", m->type->id, c->conf.labels.profile_service,
                  m->svc->service);
    hs_buf_putc(&q, 0);
    size_t bl = strlen(base);
    hs_buf_printf(u, "%.*s/?query=", (int)(bl && base[bl - 1] == '/' ? bl - 1 : bl), base);
    corr_url_escape(u, (const char *)q.data);
    hs_buf_printf(u, "&from=%lld&until=%lld", (long long)(m->lo_ns / 1000000000),
                  (long long)((m->hi_ns + 999999999) / 1000000000));
    hs_attr_string(attrs, HS_ATTR_PROFILE_LINK, (const char *)u->data, u->len);
    hs_buf_free(&q);
}

static const char *const reason_names[] = {
    [CORR_REASON_NONE] = "",
    [CORR_REASON_NO_PROFILES_FOR_SERVICE] = "no_profiles_for_service",
    [CORR_REASON_NO_PROFILE_IN_WINDOW] = "no_profile_in_window",
    [CORR_REASON_TIMEOUT] = "timeout",
    [CORR_REASON_PARKED_LIMIT] = "parked_limit",
    [CORR_REASON_SHUTDOWN] = "shutdown",
};

const char *corr_reason_name(enum corr_reason r)
{
    return (size_t)r < HS_ARRAY_SIZE(reason_names) ? reason_names[r] : "";
}

static const struct corr_frag_group *put_nplus1(struct correlator *c, const struct corr_span *s,
                                                struct hs_buf *attrs)
{
    const struct corr_frag_group *g = corr_frags_best(&c->frags, s->tenant, s->trace_id, s->span_id);
    if (!g || g->count < c->conf.n_plus_one.min_count)
        return NULL;
    hs_attr_string(attrs, HS_ATTR_PATTERN, "n_plus_one", 10);
    hs_attr_int(attrs, HS_ATTR_N_PLUS_ONE_COUNT, g->count);
    hs_attr_string(attrs, HS_ATTR_N_PLUS_ONE_STATEMENT, g->text, strlen(g->text));
    return g;
}

/* Finds the samples matching s; false (with *why) when there are none. */
static bool find_match(struct correlator *c, const struct corr_span *s, struct matched *m,
                       enum corr_reason *why)
{
    m->svc = corr_index_find(&c->index, s->tenant, s->service);
    m->type = m->svc ? corr_svc_main_type(m->svc) : NULL;
    if (!m->type) {
        *why = CORR_REASON_NO_PROFILES_FOR_SERVICE;
        return false;
    }
    int64_t slack = (int64_t)c->conf.slack_ms * 1000000;
    m->lo_ns = (int64_t)s->start_ns - slack;
    m->hi_ns = (int64_t)s->end_ns + slack;
    int64_t maxw = (int64_t)c->conf.max_window_ms * 1000000;
    if (m->hi_ns - m->lo_ns > maxw) /* a long span: its last max_window */
        m->lo_ns = m->hi_ns - maxw;
    if (corr_index_scratch(&c->index, m->svc->nnames) != 0) {
        *why = CORR_REASON_NO_PROFILE_IN_WINDOW;
        return false;
    }
    collect_window(c, m);
    *why = CORR_REASON_NO_PROFILE_IN_WINDOW;
    if (m->window_total <= 0)
        return false;
    if (match_exact(m, s->span_id)) {
        m->kind = CORR_MATCH_SPAN;
        return true;
    }
    m->kind = CORR_MATCH_WINDOW;
    m->nstacks = 0;
    if (match_subtree(c, m, s->name))
        return true;
    m->nstacks = 0;
    match_window(m);
    return true;
}

enum corr_match corr_annotate(struct correlator *c, const struct corr_span *s,
                              enum corr_reason fallback, struct hs_buf *attrs)
{
    hs_attr_bool(attrs, HS_ATTR_SLOW, true);
    hs_attr_string(attrs, HS_ATTR_SLOW_REASON, s->slow_reason, strlen(s->slow_reason));
    /* the /ui ring is told what the attributes say, in structured form */
    struct corr_ui_note *note = c->ui.cap ? hs_xcalloc(1, sizeof(*note)) : NULL;
    struct hs_buf link = {0};
    const struct corr_frag_group *g = put_nplus1(c, s, attrs);
    struct matched m = {0};
    enum corr_reason why = fallback;
    bool ok = fallback != CORR_REASON_PARKED_LIMIT && find_match(c, s, &m, &why);
    if (!ok) {
        /* a timeout or shutdown says more than "nothing in the window" */
        if (why == CORR_REASON_NO_PROFILE_IN_WINDOW && fallback != CORR_REASON_NONE)
            why = fallback;
        hs_attr_string(attrs, HS_ATTR_PROFILE_MATCH, "none", 4);
        hs_attr_string(attrs, HS_ATTR_PROFILE_MATCH_REASON, reason_names[why],
                       strlen(reason_names[why]));
        if (m.type)
            hs_attr_string(attrs, HS_ATTR_PROFILE_TYPE, m.type->id, strlen(m.type->id));
        m.kind = CORR_MATCH_NONE;
        if (note)
            *note = (struct corr_ui_note){.reason = why, .type = m.type ? m.type->id : NULL};
    } else {
        const char *k = m.kind == CORR_MATCH_SPAN ? "span" : "window";
        hs_attr_string(attrs, HS_ATTR_PROFILE_MATCH, k, strlen(k));
        hs_attr_string(attrs, HS_ATTR_PROFILE_TYPE, m.type->id, strlen(m.type->id));
        uint32_t path[CORR_MAX_STACK_DEPTH];
        int64_t pvals[CORR_MAX_STACK_DEPTH];
        uint32_t npath = hot_path(&m, path, pvals, CORR_MAX_STACK_DEPTH);
        put_top(c, &m, s->name, path, pvals, npath, attrs, note);
        put_hot_path(&m, path, npath, attrs);
        double cpu_share = -1;
        if (m.kind == CORR_MATCH_SPAN) {
            char hex[17];
            for (size_t i = 0; i < 8; i++)
                snprintf(hex + 2 * i, 3, "%02x", (uint8_t)s->span_id.ptr[i]);
            hs_attr_string(attrs, HS_ATTR_PYROSCOPE_PROFILE_ID, hex, 16);
            if (m.type->cpu_ns && s->end_ns > s->start_ns) {
                cpu_share = (double)m.span_value / (double)(s->end_ns - s->start_ns);
                hs_attr_double(attrs, HS_ATTR_PROFILE_CPU_SHARE, cpu_share);
            }
        }
        put_grown(c, &m, attrs, note);
        put_link(c, &m, attrs, &link);
        if (note) {
            note->svc = m.svc;
            note->type = m.type->id;
            note->stacks = m.stacks;
            note->nstacks = m.nstacks;
            note->total = m.total;
            note->path = path;
            note->npath = npath;
            note->cpu_share = cpu_share;
            note->link = link.len ? (const char *)link.data : NULL;
            note->link_len = link.len;
            note->span = s;
            note->kind = m.kind;
            note->nplus1 = g;
            corr_ui_record(&c->ui, note); /* while path[] and the stacks are alive */
        }
    }
    if (note && m.kind == CORR_MATCH_NONE) {
        note->span = s;
        note->kind = CORR_MATCH_NONE;
        note->svc = m.svc;
        note->cpu_share = -1;
        note->nplus1 = g;
        corr_ui_record(&c->ui, note);
    }
    free(note);
    hs_buf_free(&link);
    for (uint32_t i = 0; i < m.nwfids; i++) /* the scratch is zero between uses */
        c->index.scratch[m.wfids[i]] = 0;
    free(m.wfids);
    free(m.stacks);
    hs_counter_add(c->stats.annotated[m.kind], 1);
    return m.kind;
}
