/* explain.c: what matched samples say, as attributes (design.md §1): the application functions
 * they spend their time in (full names; library frames summarised under the application
 * function that calls them), the hot path, and functions grown against the baseline. An exact
 * match's shares come from all of the span's samples, never from its capped stacks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/semconv.h"
#include "pdata/traces_edit.h"
#include "processors/correlator/correlator_int.h"

/* The heaviest root-to-leaf path: at each depth the callee with the most samples, while it has
 * at least CORR_HOT_PATH_MIN of the matched total. Writes fids and their values; returns the
 * length. */
static uint32_t hot_path(const struct corr_matched *m, uint32_t *path, int64_t *vals, uint32_t cap)
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
    uint32_t depth; /* the deepest the function is in the matched stacks (root 0) */
};

/* Heaviest first; of equal totals (a caller's includes its callee's: on a waiting stack every
 * frame holds the same value) the one nearest the leaf, the specific one. */
static int by_total(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth > y->depth ? -1 : 1;
    return x->fid < y->fid ? -1 : x->fid > y->fid;
}

static int by_pp(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->pp != y->pp)
        return x->pp > y->pp ? -1 : 1;
    return x->fid < y->fid ? -1 : x->fid > y->fid;
}

static void put_list(struct hs_buf *attrs, const char *key, char (*text)[320], uint32_t n)
{
    const char *vals[64];
    for (uint32_t i = 0; i < n; i++)
        vals[i] = text[i];
    hs_attr_string_array(attrs, key, vals, n);
}

/* Each function's total (self + callees, once per sample) in the matched samples, into tot (by
 * fid), the functions listed in fids: an exact match's from all its samples, the whole window's
 * from the index, a subtree's from its stacks. Returns their count. */
static uint32_t function_totals(struct correlator *c, const struct corr_matched *m, int64_t *tot,
                                uint32_t *fids)
{
    uint32_t nf = 0;
    if (m->ftot) {
        for (uint32_t f = 0; f < m->svc->nnames; f++)
            if (m->ftot[f] > 0) {
                tot[f] = m->ftot[f];
                fids[nf++] = f;
            }
        return nf;
    }
    if (m->kind == CORR_MATCH_WINDOW && m->nstacks && m->total == m->window_total) {
        for (uint32_t i = 0; i < m->nwfids; i++) {
            fids[nf++] = m->wfids[i];
            tot[m->wfids[i]] = c->index.scratch[m->wfids[i]];
        }
        return nf;
    }
    uint32_t *mark = c->index.mark;
    for (uint32_t i = 0; i < m->nstacks; i++) {
        uint32_t stamp = corr_index_stamp(&c->index);
        for (uint32_t d = 0; d < m->stacks[i].depth; d++) {
            uint32_t f = m->stacks[i].fids[d];
            if (mark[f] == stamp)
                continue; /* recursion: once per stack */
            mark[f] = stamp;
            if (tot[f] == 0)
                fids[nf++] = f;
            tot[f] += m->stacks[i].value;
        }
    }
    return nf;
}

/* The library f spends its time in: of the samples with f, those where f is the deepest
 * application frame and calls into a library, grouped by that library; the heaviest when it
 * holds CORR_LIB_SHARE of them all, else NULL. */
static const char *lib_under(const struct corr_matched *m, uint32_t f)
{
    const struct corr_name *names = m->svc->names;
    const char *libs[8];
    int64_t w[8], all = 0;
    uint32_t nl = 0;
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct corr_mstack *st = &m->stacks[i];
        int64_t deepest = -1;
        bool has = false;
        for (uint32_t d = 0; d < st->depth; d++) {
            has = has || st->fids[d] == f;
            if (!names[st->fids[d]].lib)
                deepest = d;
        }
        if (!has)
            continue;
        all += st->value;
        if (deepest < 0 || st->fids[deepest] != f || (uint32_t)deepest + 1 >= st->depth)
            continue;
        const char *l = names[st->fids[deepest + 1]].lib;
        uint32_t k = 0;
        while (k < nl && strcmp(libs[k], l) != 0)
            k++;
        if (k == nl && nl == HS_ARRAY_SIZE(libs))
            continue;
        if (k == nl) {
            libs[nl] = l;
            w[nl++] = 0;
        }
        w[k] += st->value;
    }
    uint32_t best = UINT32_MAX;
    for (uint32_t k = 0; k < nl; k++)
        if (best == UINT32_MAX || w[k] > w[best])
            best = k;
    return best != UINT32_MAX && (double)w[best] >= CORR_LIB_SHARE * (double)all ? libs[best]
                                                                                 : NULL;
}

/* How many root-most frames of the (application) hot path are trunk: they hold
 * CORR_TRUNK_SHARE of the samples and name nothing (main, the server loop, the handler). The
 * trunk ends at the span's own function; its deepest frame stays ranked when it says something
 * (an N+1 loop's `loadPreferences 98%`), unless it is the span's own function: then *kept is
 * that frame (also when recursion put it higher in the trunk too), else UINT32_MAX. */
static uint32_t trunk_len(const struct corr_svc *s, const struct corr_matched *m,
                          struct hs_str span_name, const uint32_t *path, const int64_t *vals,
                          uint32_t npath, uint32_t *kept)
{
    uint32_t trunk = 0;
    *kept = UINT32_MAX;
    while (trunk < npath && (double)vals[trunk] >= CORR_TRUNK_SHARE * (double)m->total)
        trunk++;
    for (uint32_t k = 0; k < trunk; k++)
        if (hs_corr_name_matches(&s->names[path[k]], span_name)) {
            trunk = k + 1;
            break;
        }
    if (trunk > 1 && !hs_corr_name_matches(&s->names[path[trunk - 1]], span_name)) {
        trunk--;
        *kept = path[trunk];
    }
    return trunk;
}

/* Zeroes what stack_depths wrote. */
static void stack_depths_clear(const struct corr_matched *m, uint32_t *depth, int64_t *leaf)
{
    for (uint32_t i = 0; i < m->nstacks; i++)
        for (uint32_t d = 0; d < m->stacks[i].depth; d++) {
            depth[m->stacks[i].fids[d]] = 0;
            leaf[m->stacks[i].fids[d]] = 0;
        }
}

/* Per function of the matched stacks: the deepest it is (depth[fid] + 1, 0 when absent) and
 * the samples of the stacks whose deepest application frame it is (leaf[fid]). */
static void stack_depths(const struct corr_matched *m, uint32_t *depth, int64_t *leaf)
{
    const struct corr_name *names = m->svc->names;
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct corr_mstack *st = &m->stacks[i];
        uint32_t last = UINT32_MAX;
        for (uint32_t d = 0; d < st->depth; d++) {
            uint32_t f = st->fids[d];
            depth[f] = HS_MAX(depth[f], d + 1);
            if (!names[f].lib)
                last = f;
        }
        if (last != UINT32_MAX && st->value > 0)
            leaf[last] += st->value;
    }
}

/* The hot path as written: the application frames and, at its end, the first library frame
 * they call into; every frame when none is the application's. */
static void put_hot_path(const struct corr_svc *s, const uint32_t *path, uint32_t npath, bool app,
                         const char *key, struct hs_buf *attrs)
{
    struct hs_buf b = {0};
    uint32_t last = npath;
    for (uint32_t i = 0; app && i < npath; i++)
        if (!s->names[path[i]].lib)
            last = i;
    for (uint32_t i = 0; i < npath; i++) {
        bool lib = s->names[path[i]].lib != NULL;
        if (app && lib && !(last < npath && i == last + 1))
            continue;
        if (b.len)
            hs_buf_append(&b, " > ", 3);
        hs_buf_append(&b, s->names[path[i]].name, strlen(s->names[path[i]].name));
    }
    if (b.len)
        hs_attr_string(attrs, key, (const char *)b.data, b.len);
    hs_buf_free(&b);
}

/* Keeps the n first of r[0..nr) in by_total's order in r[0..n), in that order, without sorting
 * the rest (a window's every function is a candidate; conf.top of them are written). Returns
 * how many. */
static uint32_t top_n(struct ranked *r, uint32_t nr, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < nr && n > 0; i++) {
        if (k == n && by_total(&r[i], &r[k - 1]) >= 0)
            continue;
        struct ranked x = r[i]; /* while k < n, i == k: r[i] is the next free place */
        uint32_t j = k < n ? k++ : k - 1;
        for (; j > 0 && by_total(&x, &r[j - 1]) < 0; j--)
            r[j] = r[j - 1];
        r[j] = x;
    }
    return k;
}

/* Appends len bytes of s to the entry text, as snprintf into char[320] would: cut at its end. */
static void text_put(char *text, size_t *n, const char *s, size_t len)
{
    len = HS_MIN(len, 320 - 1 - *n);
    memcpy(text + *n, s, len);
    *n += len;
    text[*n] = '\0';
}

/* "name 98%", or "name 98% (in lib)": a top_functions entry. */
static void entry_text(char *text, const char *name, double share, const char *lib)
{
    char pct[32];
    size_t n = 0;
    text[0] = '\0';
    text_put(text, &n, name, strlen(name));
    text_put(text, &n, pct,
             (size_t)snprintf(pct, sizeof(pct), " %lld%%", (long long)round(100.0 * share)));
    if (lib) {
        text_put(text, &n, " (in ", 5);
        text_put(text, &n, lib, strlen(lib));
        text_put(text, &n, ")", 1);
    }
}

void hs_corr_explain(struct correlator *c, const struct corr_matched *m, struct hs_str span_name,
                     const struct corr_explain_keys *keys, struct hs_buf *attrs,
                     struct corr_explained *ex)
{
    const struct corr_svc *s = m->svc;
    int64_t pvals[CORR_MAX_STACK_DEPTH];
    ex->npath = hot_path(m, ex->path, pvals, CORR_MAX_STACK_DEPTH);
    /* per fid, zero between uses (the index sized them for the service's functions) */
    int64_t *tot = c->index.ex_tot, *leaf = c->index.ex_leaf;
    uint32_t *fids = c->index.ex_fids, *depth = c->index.ex_depth;
    uint32_t nf = function_totals(c, m, tot, fids);
    bool app = false;
    for (uint32_t i = 0; i < nf && !app; i++)
        app = !s->names[fids[i]].lib;
    /* the trunk is judged on the application frames of the hot path, with exact values when
     * the match has them (its stacks are capped) */
    uint32_t apath[CORR_MAX_STACK_DEPTH], na = 0;
    int64_t avals[CORR_MAX_STACK_DEPTH];
    for (uint32_t k = 0; k < ex->npath; k++)
        if (!app || !s->names[ex->path[k]].lib) {
            apath[na] = ex->path[k];
            avals[na++] = m->ftot ? HS_MAX(pvals[k], m->ftot[ex->path[k]]) : pvals[k];
        }
    uint32_t kept;
    uint32_t trunk = trunk_len(s, m, span_name, apath, avals, na, &kept);
    stack_depths(m, depth, leaf);
    /* profiles of waiting (goroutines, mutex, block) give every frame of a stack the same
     * value: the wait is where the stack's deepest application frame is, its callers only pass
     * it on (the trunk of each waiting stack). So a function is ranked by the samples it is the
     * deepest application frame of, not by its total: a handler that is the deepest frame of a
     * few running stacks must not rank by every stack that passes through it (from the matched
     * stacks, which hold all of a span's until CORR_SPAN_STACKS distinct ones) */
    bool waits = app && hs_corr_kind_waits(m->type->rank);
    struct ranked *r = hs_xmalloc(HS_MAX(nf, 1) * sizeof(*r));
    uint32_t nr = 0;
    for (uint32_t i = 0; i < nf; i++) {
        uint32_t f = fids[i];
        bool skip = tot[f] <= 0 || (app && s->names[f].lib) || (waits && leaf[f] <= 0);
        for (uint32_t k = 0; k < trunk && !skip && !waits && f != kept; k++)
            skip = apath[k] == f;
        if (!skip)
            r[nr++] = (struct ranked){f, waits ? leaf[f] : tot[f], 0, depth[f]};
    }
    if (nr == 0 && trunk > 0)
        r[nr++] = (struct ranked){apath[trunk - 1], avals[trunk - 1], 0, depth[apath[trunk - 1]]};
    for (uint32_t i = 0; i < nf; i++) /* the scratch is zero between uses */
        tot[fids[i]] = 0;
    stack_depths_clear(m, depth, leaf);
    nr = top_n(r, nr, HS_MIN(c->conf.top, HS_ARRAY_SIZE(ex->top)));
    char(*text)[320] = hs_xmalloc(HS_MAX(nr, 1) * sizeof(*text));
    for (uint32_t i = 0; i < nr; i++) {
        const char *lib = app ? lib_under(m, r[i].fid) : NULL;
        double share = (double)r[i].total / (double)m->total;
        entry_text(text[i], s->names[r[i].fid].name, share, lib);
        ex->top[i] = (struct corr_top){r[i].fid, share, lib};
    }
    ex->ntop = nr;
    if (nr)
        put_list(attrs, keys->top, text, nr);
    put_hot_path(s, ex->path, ex->npath, app, keys->hot, attrs);
    free(text);
    free(r);
}

/* profile.grown_functions: window shares against the type's decayed baseline of closed
 * buckets, in percentage points, when above grown.min_pp; application functions, as
 * top_functions names them. */
void hs_corr_explain_grown(const struct correlator *c, const struct corr_matched *m,
                           struct hs_buf *attrs, struct corr_note *note)
{
    const struct corr_type *t = m->type;
    if (t->base_buckets == 0 || m->window_total <= 0)
        return;
    struct ranked *r = hs_xmalloc(HS_MAX(m->nwfids, 1) * sizeof(*r));
    uint32_t nr = 0;
    for (int pass = 0; pass < 2 && nr == 0; pass++) /* library functions when no other grew */
        for (uint32_t i = 0; i < m->nwfids; i++) {
            uint32_t f = m->wfids[i];
            double share = (double)c->index.scratch[f] / (double)m->window_total;
            double pp = 100.0 * (share - (f < t->nbase ? t->base[f] : 0.0));
            if (pp > c->conf.grown.min_pp && (pass == 1 || !m->svc->names[f].lib))
                r[nr++] = (struct ranked){f, 0, pp, 0};
        }
    qsort(r, nr, sizeof(*r), by_pp);
    nr = HS_MIN(nr, HS_MIN(c->conf.top, 64));
    char(*text)[320] = hs_xmalloc(HS_MAX(nr, 1) * sizeof(*text));
    for (uint32_t i = 0; i < nr; i++)
        snprintf(text[i], sizeof(text[i]), "%s +%.0fpp", m->svc->names[r[i].fid].name, r[i].pp);
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
