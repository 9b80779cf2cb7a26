/* metrics.h: counters, gauges and histograms rendered as Prometheus text on the admin /metrics
 * endpoint, and the health sources its /healthz/ready reads. Names are prefixed `hotspan_`;
 * labels are given preformatted, e.g. `receiver="otlp"`. */
#ifndef HS_METRICS_H
#define HS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
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
/* Removes every gauge and every health source (below) registered with ud. */
void hs_metrics_gauge_remove(struct hs_metrics *m, void *ud);

static inline void hs_counter_add(struct hs_counter *c, uint64_t n)
{
    c->value += n;
}

/* A histogram with fixed upper bounds (Prometheus `le`), e.g. batch sizes. At most
 * HS_HISTOGRAM_MAX_BOUNDS bounds, ascending; +Inf is implicit. */
#define HS_HISTOGRAM_MAX_BOUNDS 16
struct hs_histogram {
    double bounds[HS_HISTOGRAM_MAX_BOUNDS];
    uint64_t buckets[HS_HISTOGRAM_MAX_BOUNDS + 1]; /* per bound, not cumulative; last: +Inf */
    uint32_t nbounds;
    uint64_t count;
    double sum;
};

/* Returns the histogram for (name, labels), created with `bounds` (copied; extra bounds past
 * HS_HISTOGRAM_MAX_BOUNDS are ignored) on first use; valid until hs_metrics_free. Rendered as
 * hotspan_<name>_bucket{...,le="..."}, _sum and _count. */
struct hs_histogram *hs_metrics_histogram(struct hs_metrics *m, const char *name, const char *help,
                                          const char *labels, const double *bounds,
                                          size_t nbounds);
void hs_histogram_observe(struct hs_histogram *h, double v);

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
/* The same under preformatted labels (`exporter="<id>"` and more, e.g. a load_balancing
 * exporter's backend). */
struct hs_exporter_counters hs_metrics_exporter_labels(struct hs_metrics *m, const char *labels,
                                                       unsigned signal);

/* Prometheus text exposition format 0.0.4; HELP and TYPE once per family. */
int hs_metrics_render(struct hs_metrics *m, struct hs_buf *out);

/* Counts a drop with its reason (hotspan_dropped_total{component,reason}) and logs it,
 * rate-limited. */
void hs_metrics_drop(struct hs_metrics *m, const char *component, const char *reason,
                     uint64_t items);

/* Health sources: a component that talks to a backend (every sender) keeps one and registers
 * it here, because every component already gets the metrics at start; the admin endpoint's
 * /healthz/ready reads them to say which exporter has been failing, and since when. */
#define HS_HEALTH_ERROR_LEN 120

struct hs_health {
    /* hs_now_ms() of the first failed attempt since the last success; 0 while healthy. */
    uint64_t failing_since_ms;
    uint64_t failing_since_wall_ms; /* the same moment on the wall clock, for people */
    uint64_t last_failure_ms;       /* hs_now_ms() of the latest failed attempt */
    uint64_t last_success_ms;       /* hs_now_ms(); 0: none yet */
    /* Set by the owner while it still holds data it will try again (a retry is due): the
     * failing period then runs on with the clock; otherwise it ends at the last failure, so one
     * failed request followed by silence is not taken for an outage. */
    bool pending;
    char last_error[HS_HEALTH_ERROR_LEN];
};

/* A failed attempt: starts the failing period unless one is running. `error` is copied
 * (truncated), NULL keeps the previous text. */
void hs_health_failed(struct hs_health *h, uint64_t now_ms, const char *error);
/* A successful attempt ends the failing period. */
void hs_health_ok(struct hs_health *h, uint64_t now_ms);
/* How long every attempt has been failing, in seconds, at now_ms: up to now while pending,
 * else up to the last failure; 0 while healthy. */
double hs_health_failing_seconds(const struct hs_health *h, uint64_t now_ms);

/* Registers h (borrowed until hs_metrics_gauge_remove(m, ud)) under `component`, the id
 * /healthz names (copied). */
void hs_metrics_health(struct hs_metrics *m, const char *component, const struct hs_health *h,
                       void *ud);
/* Calls fn for every registered source, in registration order; returns how many there are. */
typedef void (*hs_health_visit_fn)(void *arg, const char *component, const struct hs_health *h);
size_t hs_metrics_health_each(struct hs_metrics *m, hs_health_visit_fn fn, void *arg);

#endif
