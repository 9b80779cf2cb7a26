/* metrics.c: a small registry of counters, gauges and histograms, kept in families so /metrics
 * prints HELP and TYPE once per name (Prometheus text format 0.0.4), and the health sources.
 * Single-threaded: owned by the main loop. */
#include "metrics.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "common.h"
#include "component.h"
#include "errors.h"
#include "log.h"
#include <stdio.h>

enum series_kind { SERIES_COUNTER, SERIES_GAUGE, SERIES_HISTOGRAM };

struct series {
    struct series *next;
    char *labels;
    struct hs_counter counter;
    struct hs_histogram *hist;
    hs_gauge_fn fn;
    void *ud;
};

struct family {
    struct family *next;
    char *name;
    char *help;
    enum series_kind kind;
    struct series *series, **tail;
};

struct health_source {
    struct health_source *next;
    char *component;
    const struct hs_health *h;
    void *ud;
};

struct hs_metrics {
    struct family *families, **tail;
    struct health_source *health, **health_tail;
    struct hs_ratelimit drop_log;
};

struct hs_metrics *hs_metrics_new(void)
{
    struct hs_metrics *m = hs_xcalloc(1, sizeof(*m));
    m->tail = &m->families;
    m->health_tail = &m->health;
    m->drop_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 10);
    return m;
}

void hs_metrics_free(struct hs_metrics *m)
{
    if (!m)
        return;
    for (struct family *f = m->families, *fn; f; f = fn) {
        fn = f->next;
        for (struct series *s = f->series, *sn; s; s = sn) {
            sn = s->next;
            free(s->labels);
            free(s->hist);
            free(s);
        }
        free(f->name);
        free(f->help);
        free(f);
    }
    for (struct health_source *h = m->health, *hn; h; h = hn) {
        hn = h->next;
        free(h->component);
        free(h);
    }
    free(m);
}

static struct family *family_get(struct hs_metrics *m, const char *name, const char *help,
                                 enum series_kind kind)
{
    for (struct family *f = m->families; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return f;
    struct family *f = hs_xcalloc(1, sizeof(*f));
    f->name = hs_xstrdup(name);
    f->help = hs_xstrdup(help ? help : "");
    f->kind = kind;
    f->tail = &f->series;
    *m->tail = f;
    m->tail = &f->next;
    return f;
}

static struct series *series_add(struct family *f, const char *labels)
{
    struct series *s = hs_xcalloc(1, sizeof(*s));
    s->labels = hs_xstrdup(labels ? labels : "");
    *f->tail = s;
    f->tail = &s->next;
    return s;
}

struct hs_counter *hs_metrics_counter(struct hs_metrics *m, const char *name, const char *help,
                                      const char *labels)
{
    struct family *f = family_get(m, name, help, SERIES_COUNTER);
    const char *l = labels ? labels : "";
    for (struct series *s = f->series; s; s = s->next)
        if (strcmp(s->labels, l) == 0)
            return &s->counter;
    return &series_add(f, l)->counter;
}

struct hs_histogram *hs_metrics_histogram(struct hs_metrics *m, const char *name, const char *help,
                                          const char *labels, const double *bounds,
                                          size_t nbounds)
{
    struct family *f = family_get(m, name, help, SERIES_HISTOGRAM);
    const char *l = labels ? labels : "";
    for (struct series *s = f->series; s; s = s->next)
        if (strcmp(s->labels, l) == 0)
            return s->hist;
    struct series *s = series_add(f, l);
    s->hist = hs_xcalloc(1, sizeof(*s->hist));
    s->hist->nbounds = (uint32_t)HS_MIN(nbounds, (size_t)HS_HISTOGRAM_MAX_BOUNDS);
    memcpy(s->hist->bounds, bounds, s->hist->nbounds * sizeof(*bounds));
    return s->hist;
}

void hs_histogram_observe(struct hs_histogram *h, double v)
{
    uint32_t i = 0;
    while (i < h->nbounds && v > h->bounds[i])
        i++;
    h->buckets[i]++;
    h->count++;
    h->sum += v;
}

/* _bucket lines are cumulative, as Prometheus wants them; `le` joins the series' labels. */
static int render_histogram(struct hs_buf *out, const char *name, const struct series *s)
{
    const struct hs_histogram *h = s->hist;
    const char *sep = s->labels[0] ? "," : "";
    uint64_t cum = 0;
    int rc = 0;
    for (uint32_t i = 0; i <= h->nbounds; i++) {
        cum += h->buckets[i];
        char le[32] = "+Inf";
        if (i < h->nbounds)
            snprintf(le, sizeof(le), "%.17g", h->bounds[i]);
        rc |= hs_buf_printf(out, "hotspan_%s_bucket{%s%sle=\"%s\"} %llu\n", name, s->labels, sep, le,
                            (unsigned long long)cum);
    }
    const char *open = s->labels[0] ? "{" : "", *close = s->labels[0] ? "}" : "";
    rc |= hs_buf_printf(out, "hotspan_%s_sum%s%s%s %.17g\nhotspan_%s_count%s%s%s %llu\n", name,
                        open, s->labels, close, h->sum, name, open, s->labels, close,
                        (unsigned long long)h->count);
    return rc;
}

void hs_metrics_gauge(struct hs_metrics *m, const char *name, const char *help, const char *labels,
                      hs_gauge_fn fn, void *ud)
{
    struct series *s = series_add(family_get(m, name, help, SERIES_GAUGE), labels);
    s->fn = fn;
    s->ud = ud;
}

void hs_metrics_gauge_remove(struct hs_metrics *m, void *ud)
{
    for (struct family *f = m->families; f; f = f->next) {
        struct series **pp = &f->series;
        while (*pp) {
            struct series *s = *pp;
            if (s->fn && s->ud == ud) {
                *pp = s->next;
                free(s->labels);
                free(s);
            } else {
                pp = &s->next;
            }
        }
        f->tail = &f->series;
        while (*f->tail)
            f->tail = &(*f->tail)->next;
    }
    struct health_source **pp = &m->health;
    while (*pp) {
        struct health_source *h = *pp;
        if (h->ud == ud) {
            *pp = h->next;
            free(h->component);
            free(h);
        } else {
            pp = &h->next;
        }
    }
    m->health_tail = pp;
}

int hs_metrics_render(struct hs_metrics *m, struct hs_buf *out)
{
    int rc = 0;
    for (struct family *f = m->families; f && rc == 0; f = f->next) {
        if (!f->series)
            continue;
        static const char *const types[] = {"counter", "gauge", "histogram"};
        rc |= hs_buf_printf(out, "# HELP hotspan_%s %s\n# TYPE hotspan_%s %s\n", f->name, f->help,
                            f->name, types[f->kind]);
        for (struct series *s = f->series; s; s = s->next) {
            const char *open = s->labels[0] ? "{" : "", *close = s->labels[0] ? "}" : "";
            if (f->kind == SERIES_HISTOGRAM)
                rc |= render_histogram(out, f->name, s);
            else if (f->kind == SERIES_COUNTER)
                rc |= hs_buf_printf(out, "hotspan_%s%s%s%s %llu\n", f->name, open, s->labels, close,
                                    (unsigned long long)s->counter.value);
            else
                rc |= hs_buf_printf(out, "hotspan_%s%s%s%s %.17g\n", f->name, open, s->labels,
                                    close, s->fn(s->ud));
        }
    }
    return rc ? HS_ENOMEM : 0;
}

struct hs_exporter_counters hs_metrics_exporter_signal(struct hs_metrics *m, const char *id,
                                                       unsigned signal)
{
    char labels[256];
    snprintf(labels, sizeof(labels), "exporter=\"%s\"", id);
    return hs_metrics_exporter_labels(m, labels, signal);
}

struct hs_exporter_counters hs_metrics_exporter_labels(struct hs_metrics *m, const char *labels,
                                                       unsigned signal)
{
    if (signal == HS_SIGNAL_PROFILES)
        return (struct hs_exporter_counters){
            .sent = hs_metrics_counter(m, "exporter_sent_profiles_total",
                                       "Profiles successfully sent by the exporter", labels),
            .failed = hs_metrics_counter(m, "exporter_send_failed_profiles_total",
                                         "Profiles the exporter failed to send", labels),
        };
    return (struct hs_exporter_counters){
        .sent = hs_metrics_counter(m, "exporter_sent_spans_total",
                                   "Spans successfully sent by the exporter", labels),
        .failed = hs_metrics_counter(m, "exporter_send_failed_spans_total",
                                     "Spans the exporter failed to send", labels),
    };
}

struct hs_exporter_counters hs_metrics_exporter(struct hs_metrics *m, const char *id)
{
    return hs_metrics_exporter_signal(m, id, HS_SIGNAL_TRACES);
}

void hs_metrics_drop(struct hs_metrics *m, const char *component, const char *reason,
                     uint64_t items)
{
    char labels[256];
    snprintf(labels, sizeof(labels), "component=\"%s\",reason=\"%s\"", component, reason);
    hs_counter_add(hs_metrics_counter(m, "dropped_total",
                                      "Items (spans or profiles) dropped, by component and reason",
                                      labels),
                   items);
    uint32_t suppressed = 0;
    if (hs_ratelimit_allow(&m->drop_log, hs_now_ms(), &suppressed))
        hs_log_warn(component, "dropped %llu items: %s (%u similar messages suppressed)",
                    (unsigned long long)items, reason, suppressed);
}

/* ---- health sources --------------------------------------------------------------------- */

void hs_health_failed(struct hs_health *h, uint64_t now_ms, const char *error)
{
    if (!h->failing_since_ms) {
        /* 0 means healthy, so a failure at the clock's very first millisecond is moved by one */
        h->failing_since_ms = now_ms ? now_ms : 1;
        h->failing_since_wall_ms = hs_wall_ns() / 1000000u;
    }
    h->last_failure_ms = HS_MAX(now_ms, h->failing_since_ms);
    if (error)
        snprintf(h->last_error, sizeof(h->last_error), "%s", error);
}

void hs_health_ok(struct hs_health *h, uint64_t now_ms)
{
    h->failing_since_ms = 0;
    h->failing_since_wall_ms = 0;
    h->last_failure_ms = 0;
    h->last_success_ms = now_ms;
    h->last_error[0] = '\0';
}

double hs_health_failing_seconds(const struct hs_health *h, uint64_t now_ms)
{
    uint64_t end = h->pending ? HS_MAX(now_ms, h->last_failure_ms) : h->last_failure_ms;
    if (!h->failing_since_ms || end < h->failing_since_ms)
        return 0;
    return (double)(end - h->failing_since_ms) / 1000.0;
}

void hs_metrics_health(struct hs_metrics *m, const char *component, const struct hs_health *h,
                       void *ud)
{
    struct health_source *src = hs_xcalloc(1, sizeof(*src));
    src->component = hs_xstrdup(component);
    src->h = h;
    src->ud = ud;
    *m->health_tail = src;
    m->health_tail = &src->next;
}

size_t hs_metrics_health_each(struct hs_metrics *m, hs_health_visit_fn fn, void *arg)
{
    size_t n = 0;
    for (const struct health_source *src = m->health; src; src = src->next, n++)
        fn(arg, src->component, src->h);
    return n;
}
