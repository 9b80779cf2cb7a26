/* cadence.c: when a service's next upload is due (design.md §7): each profile type's upload
 * period, learned from its profiles, how long a type still counts as uploading, and how long a
 * parked span waits for the upload expected to cover it. */
#include "processors/correlator/correlator_int.h"

/* How long after a type's last upload its next one is still expected: its period plus a
 * grace of a quarter of it, at least max_wait, at most max_wait_cap (max_wait when 0). */
static uint64_t patience_ms(const struct corr_config *conf, const struct corr_type *t)
{
    if (conf->max_wait_cap_ms == 0)
        return conf->max_wait_ms;
    uint64_t late = t->period_ms + t->period_ms / CORR_GRACE_DIV;
    return HS_MIN(HS_MAX(conf->max_wait_ms, late), conf->max_wait_cap_ms);
}

int64_t hs_corr_cadence_covered(const struct corr_svc *svc, uint64_t now_ms,
                                const struct corr_config *conf)
{
    int64_t covered = INT64_MAX;
    for (uint32_t i = 0; i < svc->ntypes; i++)
        if (svc->types[i].last_ms + patience_ms(conf, &svc->types[i]) >= now_ms)
            covered = HS_MIN(covered, svc->types[i].max_until_ns);
    return covered == INT64_MAX ? svc->max_until_ns : covered;
}

/* When the service's uploads reaching until_ns are expected to have come, each by its type's
 * period and last arrival, plus the grace; 0 when no expected type's period is known. */
static uint64_t expected_ms(const struct corr_svc *svc, int64_t until_ns, uint64_t now_ms,
                            const struct corr_config *conf)
{
    uint64_t want = 0;
    for (uint32_t i = 0; i < svc->ntypes; i++) {
        const struct corr_type *t = &svc->types[i];
        if (t->period_ms == 0 || t->last_ms + patience_ms(conf, t) < now_ms ||
            until_ns <= t->max_until_ns)
            continue;
        /* uploads come every period after the last; the k-th reaches k periods further: the
         * next, or the one after for a span that ends within slack of the next one's end. A
         * type further behind (its client pauses or catches up) is not waited for. */
        int64_t period_ns = (int64_t)t->period_ms * 1000000;
        uint64_t k = (uint64_t)((until_ns - t->max_until_ns + period_ns - 1) / period_ns);
        if (k <= 2)
            want = HS_MAX(want, t->last_ms + k * t->period_ms + t->period_ms / CORR_GRACE_DIV);
    }
    return want;
}

/* The type's upload period: what the profile covers (pyroscope-go and @pyroscope/nodejs send
 * from/until of the whole period since their last upload) or the time since the type's last
 * arrival, the shorter when both are known: a profile counted from the process's start covers
 * more than a period, and an upload the client dropped spaces two arrivals by two. */
void hs_corr_cadence_learn(struct corr_type *t, int64_t from_ns, int64_t until_ns, uint64_t now_ms)
{
    int64_t covers = from_ns > 0 ? (until_ns - from_ns) / 1000000 : 0;
    uint64_t spacing = t->last_ms && now_ms > t->last_ms ? now_ms - t->last_ms : 0;
    uint64_t period = covers >= 1000 ? (uint64_t)covers : 0;
    if (spacing >= 1000 && (period == 0 || spacing < period))
        period = spacing;
    if (period)
        t->period_ms = period;
}

/* A parked span of a service whose upload period is known waits for the upload expected to
 * cover it, plus a quarter period, when that is later than its deadline; at most max_wait_cap
 * after its arrival. */
void hs_corr_cadence_extend(const struct corr_config *conf, struct corr_parked *p, uint64_t now)
{
    if (conf->max_wait_cap_ms == 0 || p->svc->ntypes == 0)
        return;
    uint64_t want = expected_ms(p->svc, p->need_until_ns, now, conf);
    uint64_t cap = p->arrival_ms + conf->max_wait_cap_ms;
    if (HS_MIN(want, cap) <= p->deadline_ms)
        return;
    p->extended = true;
    p->capped = want > cap;
    p->deadline_ms = HS_MIN(want, cap);
}
