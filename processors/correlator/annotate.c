/* annotate.c: what a slow span is told (design.md §1, §7): the attributes of its match (match.c
 * finds it, explain.c says what it shows), of the time it spent off CPU, of the N+1 pattern and
 * a Pyroscope link; and the same in structured form, a note, for the correlator to hand to its
 * observers (the /ui ring) once the span is annotated. Nothing here calls the UI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/semconv.h"
#include "pdata/traces_edit.h"
#include "processors/correlator/correlator_int.h"

struct corr_note *hs_corr_note_new(void)
{
    return hs_xcalloc(1, sizeof(struct corr_note));
}

void hs_corr_note_free(struct corr_note *n)
{
    if (!n)
        return;
    hs_buf_free(&n->own.link);
    free(n->own.stacks);
    free(n);
}

/* profile.link: `<pyroscope_url>/?query=<type>{<profile_service label>="<service>"}&from=<unix
 * s>&until=<unix s>` (query URL-escaped; the window the match used), which Pyroscope's UI opens
 * as the service's flame graph for that range. */
static void put_link(struct correlator *c, struct corr_matched *m, struct hs_buf *attrs,
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
    hs_corr_url_escape(u, (const char *)q.data);
    hs_buf_printf(u, "&from=%lld&until=%lld", (long long)(m->lo_ns / 1000000000),
                  (long long)((m->hi_ns + 999999999) / 1000000000));
    hs_attr_string(attrs, HS_ATTR_PROFILE_LINK, (const char *)u->data, u->len);
    hs_buf_free(&q);
}

static struct corr_frag_best put_nplus1(struct correlator *c, const struct corr_span *s,
                                        struct hs_buf *attrs)
{
    struct corr_frag_best g = hs_corr_fragments_best(&c->frags, s->tenant, s->trace_id, s->span_id);
    if (s->frag.count > g.count) /* the ring forgot it while the span waited */
        g = (struct corr_frag_best){s->frag.count, s->frag.stmt, s->frag.text};
    if (g.count < c->conf.n_plus_one.min_count)
        return (struct corr_frag_best){0};
    hs_attr_string(attrs, HS_ATTR_PATTERN, "n_plus_one", 10);
    hs_attr_int(attrs, HS_ATTR_N_PLUS_ONE_COUNT, g.count);
    hs_attr_string(attrs, HS_ATTR_N_PLUS_ONE_STATEMENT, g.text, strlen(g.text));
    return g;
}

static void put_span_id(const struct corr_span *s, struct hs_buf *attrs)
{
    char hex[17];
    corr_hex(hex, s->span_id.ptr, 8);
    hs_attr_string(attrs, HS_ATTR_PYROSCOPE_PROFILE_ID, hex, 16);
}

static const char *kind_text(enum corr_match k)
{
    return k == CORR_MATCH_SPAN ? "span" : "window";
}

/* profile.offcpu.*, when the CPU match does not explain the span and another type does. */
static void put_offcpu(struct correlator *c, const struct corr_span *s, struct corr_matched *m,
                       double share, struct corr_matched *o, uint32_t *opath, struct hs_buf *attrs,
                       struct corr_note *note)
{
    if (!hs_corr_match_offcpu(c, s, m, share, o))
        return;
    hs_attr_string(attrs, HS_ATTR_PROFILE_OFFCPU_TYPE, o->type->id, strlen(o->type->id));
    hs_attr_string(attrs, HS_ATTR_PROFILE_OFFCPU_MATCH, kind_text(o->kind),
                   strlen(kind_text(o->kind)));
    static const struct corr_explain_keys keys = {HS_ATTR_PROFILE_OFFCPU_TOP_FUNCTIONS,
                                                  HS_ATTR_PROFILE_OFFCPU_HOT_PATH};
    struct corr_explained ex = {.path = opath};
    hs_corr_explain(c, o, s->name, &keys, attrs, &ex);
    hs_corr_match_close(c, o);
    if (!note)
        return;
    note->off.type = o->type->id;
    note->off.kind = o->kind;
    note->off.path = opath;
    note->off.npath = ex.npath;
    note->off.ntop = HS_MIN(ex.ntop, CORR_UI_LIST);
    memcpy(note->off.top, ex.top, note->off.ntop * sizeof(*ex.top));
}

/* The attributes of a match, and the note when one is wanted (its paths and link in its own
 * storage, so they outlive the call). */
static void put_match(struct correlator *c, const struct corr_span *s, struct corr_matched *m,
                      struct corr_frag_best g, struct hs_buf *attrs, struct corr_note *note)
{
    const char *k = kind_text(m->kind);
    hs_attr_string(attrs, HS_ATTR_PROFILE_MATCH, k, strlen(k));
    hs_attr_string(attrs, HS_ATTR_PROFILE_TYPE, m->type->id, strlen(m->type->id));
    uint32_t lpath[CORR_MAX_STACK_DEPTH], lopath[CORR_MAX_STACK_DEPTH];
    uint32_t *path = note ? note->own.path : lpath, *opath = note ? note->own.off_path : lopath;
    static const struct corr_explain_keys keys = {HS_ATTR_PROFILE_TOP_FUNCTIONS,
                                                  HS_ATTR_PROFILE_HOT_PATH};
    struct corr_explained ex = {.path = path};
    hs_corr_explain(c, m, s->name, &keys, attrs, &ex);
    double share = hs_corr_match_cpu_share(c, s, m);
    if (m->kind == CORR_MATCH_SPAN)
        put_span_id(s, attrs);
    if (share >= 0)
        hs_attr_double(attrs, HS_ATTR_PROFILE_CPU_SHARE, share);
    hs_corr_explain_grown(c, m, attrs, note);
    struct hs_buf lbuf = {0}, *link = note ? &note->own.link : &lbuf;
    put_link(c, m, attrs, link);
    hs_corr_match_close(c, m); /* the off-CPU match needs the scratch */
    struct corr_matched o = {0};
    put_offcpu(c, s, m, share, &o, opath, attrs, note);
    if (note) {
        note->ntop = HS_MIN(ex.ntop, CORR_UI_LIST);
        memcpy(note->top, ex.top, note->ntop * sizeof(*ex.top));
        note->svc = m->svc;
        note->type = m->type->id;
        note->stacks = m->stacks;
        note->nstacks = m->nstacks;
        note->total = m->total;
        note->path = path;
        note->npath = ex.npath;
        note->cpu_share = share;
        note->link = link->len ? (const char *)link->data : NULL;
        note->link_len = link->len;
        note->span = s;
        note->kind = m->kind;
        note->nplus1 = g;
    }
    hs_corr_match_free(c, &o);
    hs_buf_free(&lbuf);
}

enum corr_match hs_corr_annotate(struct correlator *c, const struct corr_span *s,
                                 enum corr_reason fallback, struct hs_buf *attrs,
                                 struct corr_note *note)
{
    hs_attr_bool(attrs, HS_ATTR_SLOW, true);
    hs_attr_string(attrs, HS_ATTR_SLOW_REASON, s->slow_reason, strlen(s->slow_reason));
    struct corr_frag_best g = put_nplus1(c, s, attrs);
    struct corr_matched m = {0};
    enum corr_reason why = fallback;
    if (fallback != CORR_REASON_PARKED_LIMIT && hs_corr_match_find(c, s, &m, &why)) {
        put_match(c, s, &m, g, attrs, note);
        if (note) { /* the note's view of the matched stacks: its own now */
            note->own.stacks = m.stacks;
            m.stacks = NULL;
        }
    } else {
        /* a timeout or shutdown says more than "nothing in the window" */
        if (why == CORR_REASON_NO_PROFILE_IN_WINDOW && fallback != CORR_REASON_NONE)
            why = fallback;
        hs_attr_string(attrs, HS_ATTR_PROFILE_MATCH, "none", 4);
        const char *reason = hs_corr_reason_name(why);
        hs_attr_string(attrs, HS_ATTR_PROFILE_MATCH_REASON, reason, strlen(reason));
        if (m.type)
            hs_attr_string(attrs, HS_ATTR_PROFILE_TYPE, m.type->id, strlen(m.type->id));
        m.kind = CORR_MATCH_NONE;
        double share = hs_corr_match_cpu_share(c, s, &m); /* a labelled span off CPU: 0 */
        if (share >= 0)
            hs_attr_double(attrs, HS_ATTR_PROFILE_CPU_SHARE, share);
        if (note)
            *note = (struct corr_note){.reason = why,
                                       .type = m.type ? m.type->id : NULL,
                                       .span = s,
                                       .kind = CORR_MATCH_NONE,
                                       .svc = m.svc,
                                       .cpu_share = share,
                                       .nplus1 = g};
    }
    hs_corr_match_free(c, &m);
    hs_counter_add(c->stats.annotated[m.kind], 1);
    return m.kind;
}
