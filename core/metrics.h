/* metrics.h: counters and gauges rendered as Prometheus text on the admin /metrics endpoint.
 * Names are prefixed `hotspan_`; labels are given preformatted, e.g. `receiver="otlp"`. */
#ifndef HS_METRICS_H
#define HS_METRICS_H

#include <stdint.h>

struct hs_buf;
struct hs_metrics;

struct hs_counter {
    uint64_t value;
};

typedef double (*hs_gauge_fn)(void *ud);

struct hs_metrics *hs_metrics_new(void);
void hs_metrics_free(struct hs_metrics *m);

/* Returns the counter for (name, labels), creating it at 0; the pointer stays valid until
 * hs_metrics_free. `name` without the hotspan_ prefix, e.g. "receiver_accepted_spans_total". */
struct hs_counter *hs_metrics_counter(struct hs_metrics *m, const char *name, const char *help,
                                      const char *labels);
/* A gauge read at render time. Remove it with hs_metrics_gauge_remove before ud dies. */
void hs_metrics_gauge(struct hs_metrics *m, const char *name, const char *help, const char *labels,
                      hs_gauge_fn fn, void *ud);
void hs_metrics_gauge_remove(struct hs_metrics *m, void *ud);

static inline void hs_counter_add(struct hs_counter *c, uint64_t n)
{
    c->value += n;
}

/* The counters every exporter keeps, declared once so their names and help texts agree:
 * exporter_sent_<items>_total and exporter_send_failed_<items>_total{exporter="<id>"}, where
 * the items are spans for traces and profiles for profiles. */
struct hs_exporter_counters {
    struct hs_counter *sent;
    struct hs_counter *failed;
};

/* The spans counters (traces). */
struct hs_exporter_counters hs_metrics_exporter(struct hs_metrics *m, const char *id);
/* The counters of one signal: `signal` is HS_SIGNAL_TRACES or HS_SIGNAL_PROFILES
 * (core/component.h). */
struct hs_exporter_counters hs_metrics_exporter_signal(struct hs_metrics *m, const char *id,
                                                       unsigned signal);

/* Prometheus text exposition format 0.0.4; HELP and TYPE once per family. */
int hs_metrics_render(struct hs_metrics *m, struct hs_buf *out);

/* Counts a drop with its reason (hotspan_dropped_total{component,reason}) and logs it,
 * rate-limited. */
void hs_metrics_drop(struct hs_metrics *m, const char *component, const char *reason,
                     uint64_t items);

#endif
