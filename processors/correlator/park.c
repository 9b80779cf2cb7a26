/* park.c: slow spans waiting for their profile: the list of them (all, and each service's), its
 * bounds, their release (annotated, taken out of their batches into one), the output that
 * downstream refused, and the timer that releases spans at their deadline and retries output. */
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"
#include "processors/correlator/correlator_int.h"

/* ---- annotation and its observers ------------------------------------------------------- */

enum corr_match hs_corr_annotate_observed(struct correlator *c, const struct corr_span *s,
                                          enum corr_reason fallback, struct hs_buf *attrs)
{
    struct corr_note *note = c->ui.cap ? hs_corr_note_new() : NULL; /* only when observed */
    enum corr_match k = hs_corr_annotate(c, s, fallback, attrs, note);
    if (note) {
        hs_corr_ui_record(&c->ui, note);
        hs_corr_note_free(note);
    }
    return k;
}

/* ---- the timer -------------------------------------------------------------------------- */

static void timer_closed(uv_handle_t *h)
{
    struct correlator *c = h->data;
    c->timer_open = false;
    if (!c->housekeep_open) /* the last of our handles: nothing of ours is in the loop */
        c->done(&c->base);
}

static void on_timer(uv_timer_t *t)
{
    struct correlator *c = t->data;
    hs_corr_park_tick(c);
    if (c->closing && c->noutq == 0 && !uv_is_closing((uv_handle_t *)t))
        uv_close((uv_handle_t *)t, timer_closed);
}

/* The timer runs while spans are parked or output waits; unreferenced, so it never keeps the
 * loop alive on its own (receivers do), except while shutdown waits to hand spans on. */
static void timer_arm(struct correlator *c)
{
    if (!c->timer_open || uv_is_active((uv_handle_t *)&c->timer) || c->closing)
        return;
    uint64_t every = HS_MAX(10, HS_MIN(1000, c->conf.max_wait_ms / 10));
    uv_timer_start(&c->timer, on_timer, every, every);
}

/* ---- output ----------------------------------------------------------------------------- */

/* Hands a batch downstream, or keeps it for the timer when downstream is not ready: released
 * spans are never dropped. Takes t. */
static void deliver(struct correlator *c, struct hs_traces *t)
{
    if (c->noutq == 0 && hs_consumer_ready(c->base.next)) {
        uint32_t spans = t->spans;
        if (hs_consumer_traces(c->base.next, t) != 0) /* a target broke its ready() promise */
            hs_metrics_drop(c->base.metrics, c->base.id, "refused_after_ready", spans);
        return;
    }
    if (c->noutq == c->capoutq) {
        c->capoutq = c->capoutq ? c->capoutq * 2 : 8;
        c->outq = realloc(c->outq, c->capoutq * sizeof(*c->outq));
        if (!c->outq)
            abort();
    }
    c->outq[c->noutq++] = t;
    c->outq_spans += t->spans;
    timer_arm(c);
}

static void outq_flush(struct correlator *c)
{
    uint32_t i = 0;
    while (i < c->noutq && hs_consumer_ready(c->base.next)) {
        struct hs_traces *t = c->outq[i++];
        c->outq_spans -= t->spans;
        uint32_t spans = t->spans;
        if (hs_consumer_traces(c->base.next, t) != 0)
            hs_metrics_drop(c->base.metrics, c->base.id, "refused_after_ready", spans);
    }
    if (i == 0)
        return;
    memmove(c->outq, c->outq + i, (c->noutq - i) * sizeof(*c->outq));
    c->noutq -= i;
}

/* ---- parking ---------------------------------------------------------------------------- */

static struct corr_parked *parked_of(struct hs_queue *q)
{
    return hs_container_of(q, struct corr_parked, link);
}

/* The span parked longest, or NULL. */
static struct corr_parked *parked_oldest(struct correlator *c)
{
    return hs_queue_empty(&c->parked) ? NULL : parked_of(hs_queue_head(&c->parked));
}

static void parked_unlink(struct correlator *c, struct corr_parked *p)
{
    hs_queue_remove(&p->link);
    hs_queue_remove(&p->svc_link);
    p->svc->nparked--;
    c->nparked--;
    c->parked_bytes -= p->bytes;
}

static int by_group(const void *a, const void *b)
{
    const struct corr_parked *x = *(struct corr_parked *const *)a;
    const struct corr_parked *y = *(struct corr_parked *const *)b;
    if (x->group != y->group)
        return (uintptr_t)x->group < (uintptr_t)y->group ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Annotates the given parked spans (already unlinked), takes them out of their batches into
 * one and delivers it. */
static void release(struct correlator *c, struct corr_parked **ps, uint32_t n, enum corr_reason why)
{
    if (n == 0)
        return;
    qsort(ps, n, sizeof(*ps), by_group);
    struct hs_buf attrs = {0};
    size_t *at = hs_xmalloc(n * sizeof(*at) * 2);
    uint64_t now = corr_now_ms(c);
    for (uint32_t i = 0; i < n; i++) {
        at[2 * i] = attrs.len;
        enum corr_match k = hs_corr_annotate_observed(c, &ps[i]->span, why, &attrs);
        at[2 * i + 1] = attrs.len;
        if (ps[i]->cold) /* it waited for its service's first profile: did it come? */
            hs_counter_add(c->stats.cold[k != CORR_MATCH_NONE ? CORR_COLD_MATCHED
                                         : ps[i]->svc->ntypes ? CORR_COLD_UNMATCHED
                                                              : CORR_COLD_GAVE_UP],
                           1);
        if (ps[i]->extended && now > ps[i]->arrival_ms + c->conf.max_wait_ms &&
            (why == CORR_REASON_NONE || why == CORR_REASON_TIMEOUT))
            hs_counter_add(c->stats.extended[why == CORR_REASON_NONE ? CORR_EXT_PROFILE
                                             : ps[i]->capped         ? CORR_EXT_CAPPED
                                                                     : CORR_EXT_TIMEOUT],
                           1);
        if (c->delays) {
            if (c->ndelays == c->capdelays) {
                c->capdelays = c->capdelays ? c->capdelays * 2 : 1024;
                c->delays = realloc(c->delays, c->capdelays * sizeof(*c->delays));
            }
            c->delays[c->ndelays++] = now - ps[i]->arrival_ms;
        }
    }
    struct hs_span_edit *ed = hs_xmalloc(n * sizeof(*ed));
    struct hs_traces *out = NULL;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        for (; j < n && ps[j]->group == ps[i]->group; j++)
            ed[j - i] = (struct hs_span_edit){.offset = ps[j]->offset,
                                              .attrs = attrs.data + at[2 * j],
                                              .attrs_len = at[2 * j + 1] - at[2 * j]};
        struct hs_traces *part = NULL;
        int rc = hs_traces_edit(ps[i]->group, ed, j - i, false, &part);
        if (rc == 0 && part && out && !hs_traces_same_tenant(out, part)) {
            deliver(c, out); /* one request never carries two tenants' spans */
            out = NULL;
        }
        if (rc == 0 && part && !out) {
            out = part;
        } else if (rc == 0 && part) {
            rc = hs_traces_append(out, part);
            hs_traces_unref(part);
        }
        if (rc) /* out of memory: the spans leave as they came, un-annotated */
            hs_metrics_drop(c->base.metrics, c->base.id, "annotate_failed", j - i);
        for (uint32_t k = i; k < j; k++) {
            hs_traces_unref(ps[k]->group);
            free(ps[k]);
        }
        i = j;
    }
    free(ed);
    free(at);
    hs_buf_free(&attrs);
    if (out)
        deliver(c, out);
}

static void release_oldest_over_bound(struct correlator *c, uint64_t incoming_bytes)
{
    struct corr_parked *p;
    while ((p = parked_oldest(c)) &&
           (c->nparked >= c->conf.limits.max_parked_spans ||
            c->parked_bytes + incoming_bytes > c->conf.limits.max_parked_bytes)) {
        parked_unlink(c, p);
        hs_counter_add(c->stats.ev_parked_limit, 1);
        uint32_t supp;
        if (hs_ratelimit_allow(&c->log_rl, corr_now_ms(c), &supp))
            hs_log_warn(c->base.id,
                        "parked spans at their bound (%u spans): the oldest leaves "
                        "un-annotated (%u more not logged)",
                        c->conf.limits.max_parked_spans, supp);
        release(c, &p, 1, CORR_REASON_PARKED_LIMIT);
    }
}

/* When the tick next has something to do for p: its deadline, or its service's settling. */
static uint64_t parked_due(const struct corr_parked *p)
{
    return p->svc->settle_ms ? HS_MIN(p->deadline_ms, p->svc->settle_ms) : p->deadline_ms;
}

void hs_corr_park(struct correlator *c, struct corr_parked *p)
{
    release_oldest_over_bound(c, p->bytes);
    hs_queue_insert_tail(&c->parked, &p->link);
    hs_queue_insert_head(&p->svc->parked, &p->svc_link);
    p->svc->nparked++;
    c->nparked++;
    c->parked_bytes += p->bytes;
    c->due_ms = HS_MIN(c->due_ms, parked_due(p));
    timer_arm(c);
}

/* Releases the service's parked spans whose window the profiles now cover, in every type the
 * service uploads (or all of them); the others wait for the upload expected to cover them. */
void hs_corr_release_service(struct correlator *c, struct corr_svc *svc, bool all)
{
    uint32_t n = 0;
    struct corr_parked **ps = hs_xmalloc(HS_MAX(svc->nparked, 1) * sizeof(*ps));
    uint64_t now = corr_now_ms(c);
    int64_t covered = hs_corr_cadence_covered(svc, now, &c->conf);
    for (struct hs_queue *q = hs_queue_head(&svc->parked), *next; q != &svc->parked; q = next) {
        next = q->next;
        struct corr_parked *p = hs_container_of(q, struct corr_parked, svc_link);
        /* a span parked before the service's first upload leaves once all of that upload's
         * types are in (Node sends heap and wall, in either order) */
        bool settling = p->cold && now < svc->settle_ms;
        if (all || (p->need_until_ns <= covered && !settling)) {
            parked_unlink(c, p);
            ps[n++] = p;
        } else {
            hs_corr_cadence_extend(&c->conf, p, now);
        }
    }
    release(c, ps, n, CORR_REASON_NONE);
    free(ps);
}

static void release_all(struct correlator *c, enum corr_reason why)
{
    uint32_t n = 0;
    struct corr_parked **ps = hs_xmalloc(HS_MAX(c->nparked, 1) * sizeof(*ps));
    for (struct corr_parked *p; (p = parked_oldest(c));) {
        parked_unlink(c, p);
        ps[n++] = p;
    }
    release(c, ps, n, why);
    free(ps);
}

/* Drops what is parked or waiting for downstream, undelivered: for destroy without start or
 * shutdown, when nothing can be delivered any more. */
void hs_corr_park_free(struct correlator *c)
{
    for (struct corr_parked *p; (p = parked_oldest(c));) {
        parked_unlink(c, p);
        hs_traces_unref(p->group);
        free(p);
    }
    for (uint32_t i = 0; i < c->noutq; i++)
        hs_traces_unref(c->outq[i]);
    free(c->outq);
}

/* Shutdown's part: every parked span leaves, annotated with what is known; then the timer
 * closes once downstream took the output, keeping the loop alive until it has. */
void hs_corr_park_close(struct correlator *c)
{
    release_all(c, CORR_REASON_SHUTDOWN); /* annotated with what is known */
    c->closing = true;
    outq_flush(c);
    if (c->noutq == 0) {
        uv_close((uv_handle_t *)&c->timer, timer_closed);
        return;
    }
    /* downstream still busy: retry until it takes them, and keep the loop alive meanwhile */
    uv_ref((uv_handle_t *)&c->timer);
    uv_timer_start(&c->timer, on_timer, 50, 50);
}

/* Releases the parked spans past their deadline, and those of services whose first upload has
 * settled. */
static void release_due(struct correlator *c, uint64_t now)
{
    uint32_t n = 0;
    /* not in deadline order: a span waiting for its service's first profile may wait longer
     * than the spans parked after it */
    for (struct hs_queue *q = hs_queue_head(&c->parked); q != &c->parked; q = q->next)
        n += parked_of(q)->deadline_ms <= now;
    if (n) {
        struct corr_parked **ps = hs_xmalloc(n * sizeof(*ps));
        uint32_t k = 0;
        for (struct hs_queue *q = hs_queue_head(&c->parked), *next; q != &c->parked; q = next) {
            next = q->next;
            struct corr_parked *p = parked_of(q);
            if (p->deadline_ms <= now) {
                parked_unlink(c, p);
                ps[k++] = p;
            }
        }
        hs_counter_add(c->stats.released_timeout, n);
        release(c, ps, n, CORR_REASON_TIMEOUT);
        free(ps);
    }
    /* services whose first upload has settled: every type it sent is in, and the spans that
     * waited for it may leave */
    for (struct hs_queue *q = hs_queue_head(&c->parked); q != &c->parked;) {
        struct corr_svc *svc = parked_of(q)->svc;
        if (!svc->settle_ms || svc->settle_ms > now) {
            q = q->next;
            continue;
        }
        svc->settle_ms = 0;
        hs_corr_release_service(c, svc, false);
        q = hs_queue_head(&c->parked); /* the list changed */
    }
}

void hs_corr_park_tick(struct correlator *c)
{
    uint64_t now = corr_now_ms(c);
    /* the parked spans are walked only when one is due: every second, a thousand of them
     * (1% of a few thousand spans/s waiting up to a minute) cost more than all the rest */
    if (now >= c->due_ms) {
        release_due(c, now);
        c->due_ms = UINT64_MAX; /* deadlines only move later, and settling ends: worked out anew */
        for (struct hs_queue *q = hs_queue_head(&c->parked); q != &c->parked; q = q->next)
            c->due_ms = HS_MIN(c->due_ms, parked_due(parked_of(q)));
    }
    outq_flush(c);
    hs_corr_index_expire(&c->index, now);
    hs_corr_seen_expire(&c->seen, now, c->conf.retention_ms);
    if (!c->closing && c->nparked == 0 && c->noutq == 0 && c->timer_open)
        uv_timer_stop(&c->timer); /* armed again by the next park */
}
