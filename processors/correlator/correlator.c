/* correlator.c: the correlator processor (design.md §7): indexes profiles as they pass, finds slow
 * spans, parks those whose profile is still to come, and releases them annotated with what the
 * profiles say. One instance sees both signals (`shared`): traces go on to `next` (traces.c),
 * profiles, unchanged and at once, to `next_profiles`. This file is its lifecycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "core/semconv.h"
#include "pdata/frames.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "processors/correlator/correlator_int.h"

static uint64_t mono_clock(void *ud)
{
    return hs_now_ms();
}

static void on_evict(void *ud, struct corr_svc *svc)
{
    hs_corr_release_service(ud, svc, true); /* annotated with what the index still holds */
}

static int corr_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct correlator *c = hs_xcalloc(1, sizeof(*c));
    struct hs_frame_rules *rules = NULL;
    if (hs_corr_config_decode(cfg, path, &c->conf, &rules, err) != 0) {
        free(c);
        return HS_EINVAL;
    }
    c->rules = rules;
    c->service_is_name = strcmp(c->conf.labels.trace_service, HS_ATTR_SERVICE_NAME) == 0;
    hs_queue_init(&c->parked);
    c->due_ms = UINT64_MAX;
    c->stats.checked = c->stats.slow = c->stats.released_timeout = &c->stats.dummy;
    for (int i = 0; i < 3; i++)
        c->stats.annotated[i] = &c->stats.dummy;
    c->stats.profiles_indexed = c->stats.ev_service = c->stats.ev_bucket = c->stats.ev_span =
        c->stats.ev_type = c->stats.ev_stale = c->stats.ev_latency = c->stats.ev_fragment =
            c->stats.ev_parked_limit = c->stats.ev_expired = c->stats.ev_seen =
                c->stats.tenant_mismatch = c->stats.ev_shed = &c->stats.dummy;
    for (int i = 0; i < CORR_COLD_N; i++)
        c->stats.cold[i] = &c->stats.dummy;
    for (int i = 0; i < CORR_EXT_N; i++)
        c->stats.extended[i] = &c->stats.dummy;
    hs_corr_index_init(&c->index, &c->conf, &c->stats);
    c->index.rules = c->rules;
    hs_corr_seen_init(&c->seen, c->conf.limits.max_services, &c->stats.ev_seen);
    c->index.on_evict = on_evict;
    c->index.ud = c;
    hs_corr_latency_init(&c->latency, &c->stats);
    hs_corr_fragments_init(&c->frags, &c->stats);
    hs_corr_ui_init(&c->ui, c->conf.ui.enabled ? c->conf.ui.recent : 0);
    c->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    c->tenant_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    c->clock = mono_clock;
    *out = &c->base;
    return 0;
}

void hs_correlator_set_clock(struct hs_component *base, hs_corr_clock_fn fn, void *ud)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    c->clock = fn;
    c->clock_ud = ud;
}

uint32_t hs_correlator_parked(struct hs_component *base)
{
    return hs_container_of(base, struct correlator, base)->nparked;
}

/* ---- profiles --------------------------------------------------------------------------- */

static int corr_consume_profiles(struct hs_component *base, struct hs_profiles *batch)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    /* forwarded first, unchanged; indexed only once accepted, so a refused and retried upload
     * is not counted twice */
    struct hs_profiles *mine = hs_profiles_ref(batch);
    int rc = hs_consumer_profiles(base->next_profiles, batch);
    if (rc) {
        hs_profiles_unref(mine);
        return rc;
    }
    uint64_t now = corr_now_ms(c);
    for (uint32_t i = 0; i < mine->count; i++) {
        /* released at once: a later add may evict this service */
        struct corr_svc *s = hs_corr_index_add(&c->index, mine->tenant, mine->items[i], now);
        if (s && s->nparked) {
            hs_corr_release_service(c, s, false);
            if (s->settle_ms) /* its first upload: its cold spans leave when it settles */
                c->due_ms = HS_MIN(c->due_ms, s->settle_ms);
        }
    }
    hs_profiles_unref(mine);
    return 0;
}

/* ---- timers and lifecycle --------------------------------------------------------------- */

void hs_correlator_tick(struct hs_component *base)
{
    hs_corr_park_tick(hs_container_of(base, struct correlator, base));
}

static void housekeep_closed(uv_handle_t *h)
{
    struct correlator *c = h->data;
    c->housekeep_open = false;
    if (!c->timer_open)
        c->done(&c->base);
}

/* Expiry and shedding (hs_corr_index_housekeep) on a schedule of their own: the parking timer runs
 * only while spans are parked, and none are while the memory_limiter refuses every span. */
void hs_correlator_housekeep(struct hs_component *base)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    size_t before = c->index.bytes;
    uint32_t n = hs_corr_index_housekeep(&c->index, base->metrics, corr_now_ms(c)), supp;
    if (n && hs_ratelimit_allow(&c->log_rl, corr_now_ms(c), &supp))
        hs_log_warn(base->id,
                    "a memory_limiter refuses data: shed the %u least recently used services "
                    "(%zu of %zu KiB) from the profile index (%u more not logged)",
                    n, (before - c->index.bytes) / 1024, before / 1024, supp);
}

static void on_housekeep(uv_timer_t *t)
{
    struct correlator *c = t->data;
    hs_correlator_housekeep(&c->base);
}

static double gauge_parked(void *ud)
{
    struct correlator *c = ud;
    return (double)c->nparked + (double)c->outq_spans;
}

static double gauge_bytes(void *ud)
{
    struct correlator *c = ud;
    return (double)(c->index.bytes + hs_corr_latency_bytes(&c->latency) +
                    hs_corr_fragments_bytes(&c->frags) + c->seen.bytes);
}

static double gauge_ui_bytes(void *ud)
{
    struct correlator *c = ud;
    return (double)c->ui.bytes;
}

/* The labels of one series: processor="<id>" and `extra` (",k=\"v\"" or ""), into l. */
#define L(extra) (snprintf(l, sizeof(l), "processor=\"%s\"%s", c->base.id, extra), l)

static void stats_register(struct correlator *c, struct hs_metrics *m)
{
    char l[256];
    c->stats.checked = hs_metrics_counter(m, "correlator_spans_checked_total",
                                          "Spans checked for slowness", L(""));
    c->stats.slow = hs_metrics_counter(m, "correlator_slow_spans_total", "Slow spans", L(""));
    static const char *const kinds[] = {",match=\"span\"", ",match=\"window\"", ",match=\"none\""};
    for (int i = 0; i < 3; i++)
        c->stats.annotated[i] = hs_metrics_counter(m, "correlator_annotated_spans_total",
                                                   "Slow spans annotated, by match", L(kinds[i]));
    c->stats.released_timeout =
        hs_metrics_counter(m, "correlator_released_by_timeout_total",
                           "Parked spans released by max_wait before their profile", L(""));
    c->stats.profiles_indexed = hs_metrics_counter(m, "correlator_profiles_indexed_total",
                                                   "Profiles read into the index", L(""));
    c->stats.tenant_mismatch =
        hs_metrics_counter(m, "correlator_tenant_mismatch_total",
                           "Spans of an authenticated tenant naming another tenant", L(""));
    struct {
        struct hs_counter **p;
        const char *what;
    } ev[] = {
        {&c->stats.ev_service, "service"},   {&c->stats.ev_bucket, "bucket"},
        {&c->stats.ev_span, "span"},         {&c->stats.ev_type, "profile_type"},
        {&c->stats.ev_stale, "stale_profile"}, {&c->stats.ev_latency, "latency_key"},
        {&c->stats.ev_fragment, "fragment"}, {&c->stats.ev_parked_limit, "parked_span"},
        {&c->stats.ev_expired, "service_expired"},
        {&c->stats.ev_seen, "first_seen"},
        {&c->stats.ev_shed, "service_shed"}, /* while a memory_limiter refuses data */
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(ev); i++) {
        char extra[64];
        snprintf(extra, sizeof(extra), ",what=\"%s\"", ev[i].what);
        *ev[i].p = hs_metrics_counter(m, "correlator_evictions_total",
                                      "Index entries evicted or not kept, by what", L(extra));
    }
    static const char *const ext[CORR_EXT_N] = {[CORR_EXT_PROFILE] = ",outcome=\"profile\"",
                                                [CORR_EXT_TIMEOUT] = ",outcome=\"timeout\"",
                                                [CORR_EXT_CAPPED] = ",outcome=\"capped\""};
    for (int i = 0; i < CORR_EXT_N; i++)
        c->stats.extended[i] = hs_metrics_counter(
            m, "correlator_extended_waits_total",
            "Slow spans that waited past max_wait for their service's next upload, by how the "
            "wait ended",
            L(ext[i]));
    static const char *const cold[CORR_COLD_N] = {[CORR_COLD_MATCHED] = ",outcome=\"matched\"",
                                                  [CORR_COLD_UNMATCHED] = ",outcome=\"unmatched\"",
                                                  [CORR_COLD_GAVE_UP] = ",outcome=\"gave_up\"",
                                                  [CORR_COLD_NOT_WAITED] =
                                                      ",outcome=\"not_waited\""};
    for (int i = 0; i < CORR_COLD_N; i++)
        c->stats.cold[i] = hs_metrics_counter(
            m, "correlator_cold_start_total",
            "Slow spans of services without profiles yet, by what became of them", L(cold[i]));
    hs_metrics_gauge(m, "correlator_parked_spans", "Slow spans waiting for their profile", L(""),
                     gauge_parked, c);
    hs_metrics_gauge(m, "correlator_index_bytes", "Memory of the correlator's indexes", L(""),
                     gauge_bytes, c);
}

/* /ui on the admin endpoint, when enabled and there is one; without a page no ring is kept. */
static void ui_start(struct correlator *c, const struct hs_host *host)
{
    char l[256];
    if (c->ui.cap && host->admin) {
        int rc = hs_admin_route(host->admin, "/ui", hs_corr_ui_handle, c);
        if (rc == 0)
            c->admin = host->admin;
        else if (rc == HS_EEXIST) /* one page per admin endpoint: the first correlator's */
            hs_log_warn(c->base.id, "/ui is served by another correlator: this one's slow spans "
                                    "are not listed there (set ui.enabled: false on all but one)");
        else
            hs_log_warn(c->base.id, "no room for /ui on the admin endpoint: the page is off");
        if (rc != 0) /* no page to show it on: keep no ring */
            hs_corr_ui_free(&c->ui);
    }
    if (c->ui.cap) {
        hs_metrics_gauge(host->metrics, "correlator_ui_bytes",
                         "Memory of the recent slow spans kept for /ui", L(""), gauge_ui_bytes, c);
        c->ui.cut =
            hs_metrics_counter(host->metrics, "correlator_ui_truncated_total",
                               "Stacks or frames of /ui snapshots left out by their caps", L(""));
    }
}
#undef L

static int corr_start(struct hs_component *base, const struct hs_host *host)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    stats_register(c, host->metrics);
    ui_start(c, host);
    uv_timer_init(host->loop, &c->timer);
    uv_unref((uv_handle_t *)&c->timer);
    c->timer.data = c;
    uv_timer_init(host->loop, &c->housekeep);
    uv_unref((uv_handle_t *)&c->housekeep); /* receivers keep the loop alive, not expiry */
    c->housekeep.data = c;
    uv_timer_start(&c->housekeep, on_housekeep, CORR_HOUSEKEEP_MS, CORR_HOUSEKEEP_MS);
    c->timer_open = c->housekeep_open = c->started = true;
    return 0;
}

static void corr_shutdown(struct hs_component *base, hs_done_cb done)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    if (c->closing)
        return;
    if (!c->started) {
        c->closing = true;
        done(base);
        return;
    }
    c->done = done;
    uv_close((uv_handle_t *)&c->housekeep, housekeep_closed);
    if (c->admin) { /* the admin endpoint outlives us: no request may reach us after done */
        hs_admin_unroute(c->admin, c);
        c->admin = NULL;
    }
    hs_corr_park_close(c);
}

static void corr_destroy(struct hs_component *base)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    if (c->base.metrics)
        hs_metrics_gauge_remove(c->base.metrics, c);
    c->index.on_evict = NULL;
    hs_corr_park_free(c); /* only without start/shutdown: nothing can be delivered now */
    free(c->delays);
    hs_corr_index_free(&c->index);
    hs_corr_latency_free(&c->latency);
    hs_corr_fragments_free(&c->frags);
    hs_corr_seen_free(&c->seen);
    hs_corr_ui_free(&c->ui);
    hs_frame_rules_free(c->rules);
    hs_corr_config_free(&c->conf);
    free(c);
}

const struct hs_component_type hs_processor_correlator = {
    .name = "correlator",
    .kind = HS_KIND_PROCESSOR,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .doc = "Annotates slow spans with what the profiles of their service show.",
    .fields = hs_corr_fields,
    .shared = true,
    .create = corr_create,
    .start = corr_start,
    .consume_traces = hs_corr_consume_traces,
    .consume_profiles = corr_consume_profiles,
    .shutdown = corr_shutdown,
    .destroy = corr_destroy,
};
