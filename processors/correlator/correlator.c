/* correlator.c: the correlator processor (design.md §7): indexes profiles as they pass, finds slow
 * spans, parks those whose profile is still to come, and releases them annotated with what the
 * profiles say (beside it: index, latency, match, fragments, ui). One instance sees both
 * signals (`shared`): traces go on to `next`, profiles, unchanged and at once, to
 * `next_profiles`. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "core/buf.h"
#include "core/semconv.h"
#include "pdata/frames.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"
#include "processors/correlator/correlator_int.h"

#define C offsetof(struct corr_config, slow)
static const struct hs_config_field slow_fields[] = {
    {"threshold", HS_CFG_DURATION, offsetof(struct corr_config, slow.threshold_ms) - C, "500ms",
     .min = 0, .max = 3600000,
     .doc = "a span at least this long is slow; 0 leaves only `factor`"},
    {"factor", HS_CFG_DOUBLE, offsetof(struct corr_config, slow.factor) - C, "0", .min = 0,
     .max = 1000,
     .doc = "when > 0, a span longer than factor x the p50 of its (service, span name) is slow"},
    {"min_samples", HS_CFG_UINT, offsetof(struct corr_config, slow.min_samples) - C, "20",
     .min = 1, .max = 1000000, .doc = "spans of a name seen before `factor` applies to it"},
    {0},
};
#undef C

#define C offsetof(struct corr_config, labels)
static const struct hs_config_field labels_fields[] = {
    {"trace_service", HS_CFG_STRING, offsetof(struct corr_config, labels.trace_service) - C,
     "service.name", .doc = "resource attribute naming a span's service"},
    {"profile_service", HS_CFG_STRING, offsetof(struct corr_config, labels.profile_service) - C,
     "service_name", .doc = "profile label naming a profile's service"},
    {"trace_tenant", HS_CFG_STRING, offsetof(struct corr_config, labels.trace_tenant) - C, NULL,
     .doc = "resource attribute naming a span's tenant (X-Scope-OrgID of its profiles); when "
            "unset or absent, the batch's tenant, then `tenant`. Never overrides a per-tenant "
            "token's tenant (a span naming another is annotated from its own tenant's)"},
    {0},
};
#undef C

#define C offsetof(struct corr_config, ui)
static const struct hs_config_field ui_fields[] = {
    {"enabled", HS_CFG_BOOL, offsetof(struct corr_config, ui.enabled) - C, "true",
     .doc = "serve /ui on the admin endpoint: recent slow spans, their flame graphs"},
    {"recent", HS_CFG_UINT, offsetof(struct corr_config, ui.recent) - C, "50", .min = 1,
     .max = 1000,
     .doc = "slow spans /ui keeps (each a few KiB, at most 64KiB); the oldest goes first"},
    {"grafana_url", HS_CFG_URL, offsetof(struct corr_config, ui.grafana_url) - C, NULL,
     .doc = "base URL of Grafana: /ui links each span's trace in Explore; unset: no link"},
    {"tempo_datasource", HS_CFG_STRING, offsetof(struct corr_config, ui.tempo_datasource) - C,
     "tempo", .doc = "uid of Grafana's Tempo data source the Explore link opens"},
    {0},
};
#undef C

static const struct hs_config_field nplus1_fields[] = {
    {"min_count", HS_CFG_UINT, 0, "10", .min = 2, .max = 1000000,
     .doc = "alike children (same name or normalized db.statement) that make an N+1 pattern"},
    {0},
};

static const struct hs_config_field grown_fields[] = {
    {"min_pp", HS_CFG_DOUBLE, 0, "10", .min = 0, .max = 100,
     .doc = "percentage points a function's share must grow over the baseline to be named"},
    {0},
};

#define C offsetof(struct corr_config, limits)
static const struct hs_config_field limits_fields[] = {
    {"max_services", HS_CFG_UINT, offsetof(struct corr_config, limits.max_services) - C, "10000",
     .min = 1, .max = 10000000, .doc = "services indexed; the least recently used goes first"},
    {"max_service_bytes", HS_CFG_SIZE, offsetof(struct corr_config, limits.max_service_bytes) - C,
     "4MiB", .min = 16384, .max = INT64_C(1) << 36,
     .doc = "index memory per service; its oldest buckets go first"},
    {"max_bytes", HS_CFG_SIZE, offsetof(struct corr_config, limits.max_bytes) - C, "256MiB",
     .min = 65536, .max = INT64_C(1) << 40,
     .doc = "index memory in total; the least recently used services go first"},
    {"max_parked_spans", HS_CFG_UINT, offsetof(struct corr_config, limits.max_parked_spans) - C,
     "10000", .min = 1, .max = 10000000,
     .doc = "slow spans waiting for their profile; past it the oldest leaves un-annotated"},
    {"max_parked_bytes", HS_CFG_SIZE, offsetof(struct corr_config, limits.max_parked_bytes) - C,
     "64MiB", .min = 4096, .max = INT64_C(1) << 40, .doc = "bytes of the spans parked"},
    {0},
};
#undef C

static const struct hs_config_field corr_fields[] = {
    {"slow", HS_CFG_SECTION, offsetof(struct corr_config, slow), .sub = slow_fields,
     .doc = "what makes a span slow"},
    {"bucket", HS_CFG_DURATION, offsetof(struct corr_config, bucket_ms), "10s", .min = 1000,
     .max = 3600000, .doc = "time bucket of the profile index"},
    {"retention", HS_CFG_DURATION, offsetof(struct corr_config, retention_ms), "15m",
     .min = 1000, .max = 86400000, .doc = "how long profiles stay in the index"},
    {"max_wait", HS_CFG_DURATION, offsetof(struct corr_config, max_wait_ms), "30s", .min = 0,
     .max = 600000,
     .doc = "how long a slow span waits for its profile; 0 never waits. Longer, up to "
            "`max_wait_cap`, when its service uploads less often"},
    {"max_wait_cap", HS_CFG_DURATION, offsetof(struct corr_config, max_wait_cap_ms), "2m",
     .min = 0, .max = 3600000,
     .doc = "longest a slow span waits for the upload its service is expected to send next "
            "(upload period learned from the profiles, + a quarter); at least max_wait; 0: "
            "never longer than max_wait"},
    {"first_profile_wait", HS_CFG_DURATION, offsetof(struct corr_config, first_profile_wait_ms),
     "75s", .min = 0, .max = 3600000,
     .doc = "how long after a service's first span its first profile is expected (SDKs upload "
            "every 15s to 60s): until then its slow spans wait for it; 0: only services that "
            "sent profiles are waited for"},
    {"slack", HS_CFG_DURATION, offsetof(struct corr_config, slack_ms), "5s", .min = 0,
     .max = 3600000, .doc = "profiles from span start - slack to end + slack match it"},
    {"max_window", HS_CFG_DURATION, offsetof(struct corr_config, max_window_ms), "5m",
     .min = 1000, .max = 86400000,
     .doc = "longest window matched; a longer span matches its last max_window"},
    {"top", HS_CFG_UINT, offsetof(struct corr_config, top), "3", .min = 1, .max = 20,
     .doc = "entries of profile.top_functions and profile.grown_functions"},
    {"library_frames", HS_CFG_STRLIST, offsetof(struct corr_config, library_frames), NULL,
     .doc = "more patterns of frames that are not the application's own, tried before the "
            "built-in runtime, standard-library, third-party and pseudo-frame rules: `prefix`, "
            "`*contains`, `file:` (on the file name), `!pattern` (application code after all)"},
    {"labels", HS_CFG_SECTION, offsetof(struct corr_config, labels), .sub = labels_fields,
     .doc = "names that join spans and profiles"},
    {"tenant", HS_CFG_STRING, offsetof(struct corr_config, tenant), NULL,
     .doc = "tenant of spans without `labels.trace_tenant`; default \"\": profiles sent without "
            "X-Scope-OrgID"},
    {"pyroscope_url", HS_CFG_URL, offsetof(struct corr_config, pyroscope_url), NULL,
     .doc = "base URL for profile.link (e.g. the Pyroscope UI); unset: no link"},
    {"n_plus_one", HS_CFG_SECTION, offsetof(struct corr_config, n_plus_one),
     .sub = nplus1_fields, .doc = "N+1 detection"},
    {"ui", HS_CFG_SECTION, offsetof(struct corr_config, ui), .sub = ui_fields,
     .doc = "the /ui page on the admin endpoint"},
    {"grown", HS_CFG_SECTION, offsetof(struct corr_config, grown), .sub = grown_fields,
     .doc = "functions grown against the service's baseline"},
    {"limits", HS_CFG_SECTION, offsetof(struct corr_config, limits), .sub = limits_fields,
     .doc = "memory bounds"},
    {0},
};

static uint64_t mono_clock(void *ud)
{
    return hs_now_ms();
}

static uint64_t now_ms(struct correlator *c)
{
    return c->clock(c->clock_ud);
}

static void on_evict(void *ud, struct corr_svc *svc);

/* Where a check across keys points: the first key written, else the section itself. */
static const struct hs_config_node *conf_node(const struct hs_config_node *cfg, const char *a,
                                              const char *b)
{
    const struct hs_config_node *n = hs_config_get(cfg, a);
    return n ? n : hs_config_get(cfg, b) ? hs_config_get(cfg, b) : cfg;
}

static int corr_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct correlator *c = hs_xcalloc(1, sizeof(*c));
    int rc = hs_config_decode(corr_fields, cfg, &c->conf, path, err);
    if (rc == 0 && c->conf.retention_ms < c->conf.bucket_ms) {
        hs_config_errorf(err, conf_node(cfg, "retention", "bucket"), path,
                         "retention (%" PRIu64 "ms) is shorter than bucket (%" PRIu64 "ms)",
                         c->conf.retention_ms, c->conf.bucket_ms);
        rc = HS_EINVAL;
    }
    if (rc == 0 && c->conf.max_wait_cap_ms && c->conf.max_wait_cap_ms < c->conf.max_wait_ms) {
        hs_config_errorf(err, conf_node(cfg, "max_wait_cap", "max_wait"), path,
                         "max_wait_cap (%" PRIu64 "ms) is shorter than max_wait (%" PRIu64
                         "ms): set it to 0 or at least max_wait",
                         c->conf.max_wait_cap_ms, c->conf.max_wait_ms);
        rc = HS_EINVAL;
    }
    if (rc == 0 && c->conf.limits.max_service_bytes > c->conf.limits.max_bytes) {
        hs_config_errorf(err, conf_node(cfg, "limits", "limits"), path,
                         "limits.max_service_bytes is above limits.max_bytes");
        rc = HS_EINVAL;
    }
    struct hs_frame_rules *rules = NULL;
    char ferr[256] = "";
    if (rc == 0 &&
        hs_frame_rules_new((const char *const *)c->conf.library_frames.items,
                           c->conf.library_frames.count, &rules, ferr, sizeof(ferr)) != 0) {
        char kp[256];
        snprintf(kp, sizeof(kp), "%s.library_frames", path);
        hs_config_errorf(err, conf_node(cfg, "library_frames", "library_frames"), kp, "%s", ferr);
        rc = HS_EINVAL;
    }
    if (rc) {
        hs_config_free_fields(corr_fields, &c->conf);
        free(c);
        return HS_EINVAL;
    }
    c->rules = rules;
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

/* ---- output ----------------------------------------------------------------------------- */

static void timer_arm(struct correlator *c);

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

static void parked_unlink(struct correlator *c, struct corr_parked *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        c->parked_head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        c->parked_tail = p->prev;
    if (p->svc_prev)
        p->svc_prev->svc_next = p->svc_next;
    else
        p->svc->parked = p->svc_next;
    if (p->svc_next)
        p->svc_next->svc_prev = p->svc_prev;
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
static void release(struct correlator *c, struct corr_parked **ps, uint32_t n,
                    enum corr_reason why)
{
    if (n == 0)
        return;
    qsort(ps, n, sizeof(*ps), by_group);
    struct hs_buf attrs = {0};
    size_t *at = hs_xmalloc(n * sizeof(*at) * 2);
    uint64_t now = now_ms(c);
    for (uint32_t i = 0; i < n; i++) {
        at[2 * i] = attrs.len;
        enum corr_match k = hs_corr_annotate(c, &ps[i]->span, why, &attrs);
        at[2 * i + 1] = attrs.len;
        if (ps[i]->cold) /* it waited for its service's first profile: did it come? */
            hs_counter_add(c->stats.cold[k != CORR_MATCH_NONE ? CORR_COLD_MATCHED
                                         : ps[i]->svc->ntypes ? CORR_COLD_UNMATCHED
                                                              : CORR_COLD_GAVE_UP],
                           1);
        if (ps[i]->extended && now > ps[i]->arrival_ms + c->conf.max_wait_ms &&
            (why == CORR_REASON_NONE || why == CORR_REASON_TIMEOUT))
            hs_counter_add(c->stats.extended[why == CORR_REASON_NONE ? CORR_EXT_PROFILE
                                             : ps[i]->capped       ? CORR_EXT_CAPPED
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
    while (c->parked_head && (c->nparked >= c->conf.limits.max_parked_spans ||
                              c->parked_bytes + incoming_bytes > c->conf.limits.max_parked_bytes)) {
        struct corr_parked *p = c->parked_head;
        parked_unlink(c, p);
        hs_counter_add(c->stats.ev_parked_limit, 1);
        uint32_t supp;
        if (hs_ratelimit_allow(&c->log_rl, now_ms(c), &supp))
            hs_log_warn(c->base.id,
                        "parked spans at their bound (%u spans): the oldest leaves "
                        "un-annotated (%u more not logged)",
                        c->conf.limits.max_parked_spans, supp);
        release(c, &p, 1, CORR_REASON_PARKED_LIMIT);
    }
}

static void park(struct correlator *c, struct corr_parked *p)
{
    release_oldest_over_bound(c, p->bytes);
    p->prev = c->parked_tail;
    if (c->parked_tail)
        c->parked_tail->next = p;
    else
        c->parked_head = p;
    c->parked_tail = p;
    p->svc_next = p->svc->parked;
    if (p->svc->parked)
        p->svc->parked->svc_prev = p;
    p->svc->parked = p;
    p->svc->nparked++;
    c->nparked++;
    c->parked_bytes += p->bytes;
    timer_arm(c);
}

/* Releases the service's parked spans whose window the profiles now cover, in every type the
 * service uploads (or all of them); the others wait for the upload expected to cover them. */
static void release_service(struct correlator *c, struct corr_svc *svc, bool all)
{
    uint32_t n = 0;
    struct corr_parked **ps = hs_xmalloc(HS_MAX(svc->nparked, 1) * sizeof(*ps));
    uint64_t now = now_ms(c);
    int64_t covered = hs_corr_cadence_covered(svc, now, &c->conf);
    for (struct corr_parked *p = svc->parked, *nx; p; p = nx) {
        nx = p->svc_next;
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

static void on_evict(void *ud, struct corr_svc *svc)
{
    release_service(ud, svc, true); /* annotated with what the index still holds */
}

static void release_all(struct correlator *c, enum corr_reason why)
{
    uint32_t n = 0;
    struct corr_parked **ps = hs_xmalloc(HS_MAX(c->nparked, 1) * sizeof(*ps));
    while (c->parked_head) {
        struct corr_parked *p = c->parked_head;
        parked_unlink(c, p);
        ps[n++] = p;
    }
    release(c, ps, n, why);
    free(ps);
}

/* ---- traces ----------------------------------------------------------------------------- */

struct slow_rec {
    size_t offset, len;
    struct corr_span span;
    uint64_t first_seen_ms; /* its service's first span */
    struct corr_svc *svc;   /* when it parks */
    bool cold;              /* it parks for its service's first profile */
};

struct scan_ctx {
    struct correlator *c;
    const uint8_t *data;
    struct slow_rec *slow;
    uint32_t nslow, cap;
    uint32_t next; /* the group rescan: which slow_rec the next span is */
    const char *tenant; /* the batch's (X-Scope-OrgID), for spans without labels.trace_tenant */
    bool tenant_auth;   /* ... a per-tenant token's: labels.trace_tenant cannot override it */
    uint64_t now_ms;
    struct hs_str seen_tenant, seen_service; /* the last service touched: a resource's spans */
    uint64_t first_seen_ms;                  /* ... share it, so one lookup per resource */
};

/* What annotation needs of the span. Its tenant is the batch's when a per-tenant token decided
 * it: a client must not choose whose profiles annotate its spans, so `labels.trace_tenant` may
 * only agree. Otherwise the label's when present, else the batch's, else `tenant`. Returns true
 * when the label named another tenant than the authenticated one (*named: that name). */
static bool fill_span(const struct scan_ctx *x, const struct hs_span_view *v, struct corr_span *s,
                      struct hs_str *named)
{
    const struct correlator *c = x->c;
    const char *tk = c->conf.labels.trace_tenant;
    const char *dt = x->tenant && *x->tenant ? x->tenant : c->conf.tenant;
    bool mismatch = false;
    s->tenant = dt ? (struct hs_str){dt, strlen(dt)} : (struct hs_str){"", 0};
    if (tk && *tk) {
        struct hs_str t;
        if (hs_attrs_find_str(v->resource, 1, tk, &t)) {
            mismatch = x->tenant_auth && !hs_str_eq(t, x->tenant);
            if (mismatch)
                *named = t;
            else
                s->tenant = t;
        }
    }
    if (strcmp(c->conf.labels.trace_service, HS_ATTR_SERVICE_NAME) == 0)
        s->service = v->service_name;
    else if (!hs_attrs_find_str(v->resource, 1, c->conf.labels.trace_service, &s->service))
        s->service = (struct hs_str){"", 0};
    s->name = v->name;
    s->trace_id = v->trace_id;
    s->span_id = v->span_id;
    s->start_ns = v->start_ns;
    s->end_ns = v->end_ns;
    return mismatch;
}

/* A span of an authenticated tenant named another one: counted, logged (rate-limited). */
static void tenant_mismatch(struct correlator *c, const struct scan_ctx *x, struct hs_str named)
{
    hs_counter_add(c->stats.tenant_mismatch, 1);
    uint32_t supp;
    if (hs_ratelimit_allow(&c->tenant_rl, now_ms(c), &supp))
        hs_log_warn(c->base.id,
                    "a span of tenant \"%s\" (per-tenant token) names tenant \"%.*s\" in %s: "
                    "annotated from tenant \"%s\"'s profiles only (%u more not logged)",
                    x->tenant, (int)HS_MIN(named.len, 64), named.ptr, c->conf.labels.trace_tenant,
                    x->tenant, supp);
}

static void fmt_ms(char *out, size_t cap, uint64_t ns)
{
    if (ns >= 10000000)
        snprintf(out, cap, "%.0fms", (double)ns / 1e6);
    else if (ns >= 1000000)
        snprintf(out, cap, "%.1fms", (double)ns / 1e6);
    else
        snprintf(out, cap, "%.0fus", (double)ns / 1e3);
}

/* Slow when at least slow.threshold, or (slow.factor set, after slow.min_samples spans of the
 * same service and name) longer than factor x their p50. Writes the reason. */
static bool is_slow(struct correlator *c, const struct corr_span *s, char *reason, size_t cap)
{
    uint64_t dur = s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0;
    uint64_t thr = c->conf.slow.threshold_ms * 1000000;
    bool slow = thr > 0 && dur >= thr;
    if (slow)
        snprintf(reason, cap, "threshold %" PRIu64 "ms", c->conf.slow.threshold_ms);
    if (c->conf.slow.factor > 0) {
        uint32_t n;
        uint64_t p50 =
            hs_corr_latency_observe(&c->latency, s->tenant, s->service, s->name, dur, &n);
        if (!slow && n >= c->conf.slow.min_samples && p50 > 0 &&
            (double)dur > c->conf.slow.factor * (double)p50) {
            char p[32];
            fmt_ms(p, sizeof(p), p50);
            snprintf(reason, cap, "%.1fx p50 %s", c->conf.slow.factor, p);
            slow = true;
        }
    }
    return slow;
}

/* Does the span carry pyroscope.profile.id = its own id, as otel-profiling-go and -java set it
 * on the spans whose id they put in the samples' labels? */
static bool own_profile_id(const uint8_t *data, const struct hs_span_view *v)
{
    struct hs_str id;
    if (v->span_id.len != 8 || !hs_span_attr_str(data, v, HS_ATTR_PYROSCOPE_PROFILE_ID, &id) ||
        id.len != 16)
        return false;
    for (size_t i = 0; i < 8; i++) {
        int hi = hs_hexval((unsigned char)id.ptr[2 * i]);
        int lo = hs_hexval((unsigned char)id.ptr[2 * i + 1]);
        if (hi < 0 || lo < 0 || (uint8_t)(hi << 4 | lo) != (uint8_t)v->span_id.ptr[i])
            return false;
    }
    return true;
}

static int visit_span(void *ud, const struct hs_span_view *v)
{
    struct scan_ctx *x = ud;
    struct correlator *c = x->c;
    struct corr_span s;
    struct hs_str named;
    if (fill_span(x, v, &s, &named))
        tenant_mismatch(c, x, named);
    if (!x->seen_service.ptr || s.service.ptr != x->seen_service.ptr ||
        s.service.len != x->seen_service.len || s.tenant.ptr != x->seen_tenant.ptr ||
        s.tenant.len != x->seen_tenant.len) {
        x->first_seen_ms = hs_corr_seen_touch(&c->seen, s.tenant, s.service, x->now_ms);
        x->seen_tenant = s.tenant;
        x->seen_service = s.service.ptr ? s.service : (struct hs_str){"", 0};
    }
    if (v->parent_span_id.len == 8 && v->trace_id.len == 16) {
        struct hs_str stmt = {"", 0};
        hs_span_attr_str(x->data, v, HS_ATTR_DB_STATEMENT, &stmt);
        hs_corr_fragments_add(&c->frags, s.tenant, v->trace_id, v->parent_span_id, v->name, stmt);
    }
    if (!is_slow(c, &s, s.slow_reason, sizeof(s.slow_reason)))
        return 0;
    s.labelled = v->parent_span_id.len == 0 || own_profile_id(x->data, v);
    if (x->nslow == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 16;
        x->slow = realloc(x->slow, x->cap * sizeof(*x->slow));
        if (!x->slow)
            abort();
    }
    x->slow[x->nslow++] = (struct slow_rec){
        .offset = v->offset, .len = v->len, .span = s, .first_seen_ms = x->first_seen_ms};
    return 0;
}

/* The rescan of the batch of parked spans: their offsets and views there. */
static int visit_group(void *ud, const struct hs_span_view *v)
{
    struct scan_ctx *x = ud;
    while (x->next < x->nslow && !x->slow[x->next].svc)
        x->next++;
    if (x->next == x->nslow)
        return HS_EINVAL;
    struct slow_rec *r = &x->slow[x->next++];
    char reason[sizeof(r->span.slow_reason)];
    memcpy(reason, r->span.slow_reason, sizeof(reason));
    struct hs_str named;
    fill_span(x, v, &r->span, &named); /* a mismatch was counted by the first scan */
    memcpy(r->span.slow_reason, reason, sizeof(reason));
    r->offset = v->offset;
    return 0;
}

/* Parks the slow spans that wait: they move into a batch of their own, which each holds a
 * reference on. Returns 0 or an error (then nothing parked). */
static int park_group(struct correlator *c, struct hs_traces *batch, struct scan_ctx *x,
                      uint32_t nwait)
{
    struct hs_span_edit *ed = hs_xcalloc(nwait, sizeof(*ed));
    uint32_t k = 0;
    for (uint32_t i = 0; i < x->nslow; i++)
        if (x->slow[i].svc)
            ed[k++].offset = x->slow[i].offset;
    struct hs_traces *group = NULL;
    int rc = hs_traces_edit(batch, ed, k, false, &group);
    free(ed);
    if (rc || !group)
        return rc ? rc : HS_EINVAL;
    struct hs_otlp_scan res;
    x->data = group->data;
    x->tenant = group->tenant; /* the parked spans' tenant lives as long as their group */
    x->tenant_auth = group->tenant_authenticated;
    x->next = 0;
    rc = hs_otlp_traces_scan(group->data, group->len, NULL, visit_group, x, &res);
    if (rc) {
        hs_traces_unref(group);
        return rc;
    }
    uint64_t now = now_ms(c);
    for (uint32_t i = 0; i < x->nslow; i++) {
        struct slow_rec *r = &x->slow[i];
        if (!r->svc)
            continue;
        struct corr_parked *p = hs_xcalloc(1, sizeof(*p));
        p->svc = r->svc;
        p->group = hs_traces_ref(group);
        p->offset = r->offset;
        p->bytes = r->len + sizeof(*p);
        p->arrival_ms = now;
        p->deadline_ms = now + c->conf.max_wait_ms;
        p->cold = r->cold;
        if (r->cold) /* the first upload may take longer than max_wait (Node: 60 s) */
            p->deadline_ms =
                HS_MAX(p->deadline_ms, r->first_seen_ms + c->conf.first_profile_wait_ms);
        p->need_until_ns = (int64_t)(r->span.end_ns + c->conf.slack_ms * 1000000);
        p->span = r->span;
        hs_corr_cadence_extend(&c->conf, p, now);
        park(c, p);
    }
    hs_traces_unref(group); /* the parked spans hold it now */
    return 0;
}

/* Should this slow span wait? When its service sends profiles (seen within retention) and
 * none covering the span's end + slack has arrived yet; or when its service has sent none yet
 * but may still be about to (cold start: first seen less than first_profile_wait ago). */
static struct corr_svc *waits_for(struct correlator *c, struct slow_rec *r)
{
    if (c->conf.max_wait_ms == 0 || c->closing)
        return NULL;
    const struct corr_span *s = &r->span;
    uint64_t now = now_ms(c);
    struct corr_svc *svc = hs_corr_index_find(&c->index, s->tenant, s->service);
    if (svc && svc->ntypes > 0 && svc->last_seen_ms + c->conf.retention_ms >= now) {
        if (hs_corr_cadence_covered(svc, now, &c->conf) >=
            (int64_t)(s->end_ns + c->conf.slack_ms * 1000000))
            return NULL; /* its profile is here already */
        return svc;
    }
    if (now >= r->first_seen_ms + c->conf.first_profile_wait_ms) {
        hs_counter_add(c->stats.cold[CORR_COLD_NOT_WAITED], 1); /* shown long enough: none */
        return NULL;
    }
    r->cold = true;
    return hs_corr_index_get(&c->index, s->tenant, s->service, now);
}

static int corr_consume_traces(struct hs_component *base, struct hs_traces *batch)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    if (!hs_consumer_ready(base->next) || c->noutq) { /* refused whole, never half delivered */
        hs_traces_unref(batch);
        return HS_EAGAIN;
    }
    struct scan_ctx x = {.c = c,
                         .data = batch->data,
                         .tenant = batch->tenant,
                         .tenant_auth = batch->tenant_authenticated,
                         .now_ms = now_ms(c)};
    struct hs_otlp_scan res;
    int rc = hs_otlp_traces_scan(batch->data, batch->len, NULL, visit_span, &x, &res);
    hs_counter_add(c->stats.checked, res.spans);
    if (rc || x.nslow == 0) { /* nothing slow: the same batch goes on, no copy */
        free(x.slow);
        return hs_consumer_traces(base->next, batch);
    }
    hs_counter_add(c->stats.slow, x.nslow);
    uint32_t nwait = 0;
    for (uint32_t i = 0; i < x.nslow; i++)
        x.slow[i].svc = waits_for(c, &x.slow[i]);
    /* a service made for a cold start may have evicted one an earlier span waits for: looked
     * up again, and a span whose service is gone is annotated now */
    for (uint32_t i = 0; i < x.nslow; i++)
        if (x.slow[i].svc && (x.slow[i].svc = hs_corr_index_find(&c->index, x.slow[i].span.tenant,
                                                                 x.slow[i].span.service)))
            nwait++;
    /* the spans that go on now: annotated in place, or taken out when they wait */
    struct hs_buf attrs = {0};
    size_t *at = hs_xmalloc(x.nslow * 2 * sizeof(*at));
    struct hs_span_edit *ed = hs_xcalloc(x.nslow, sizeof(*ed));
    for (uint32_t i = 0; i < x.nslow; i++) {
        at[2 * i] = attrs.len;
        if (!x.slow[i].svc)
            hs_corr_annotate(c, &x.slow[i].span, CORR_REASON_NONE, &attrs);
        at[2 * i + 1] = attrs.len;
    }
    for (uint32_t i = 0; i < x.nslow; i++)
        ed[i] = (struct hs_span_edit){.offset = x.slow[i].offset,
                                      .attrs = attrs.data + at[2 * i],
                                      .attrs_len = at[2 * i + 1] - at[2 * i],
                                      .remove = x.slow[i].svc != NULL};
    struct hs_traces *out = NULL;
    rc = hs_traces_edit(batch, ed, x.nslow, true, &out);
    if (rc == 0 && nwait && park_group(c, batch, &x, nwait) != 0) {
        /* cannot park (out of memory): they go on un-annotated rather than wait or vanish */
        if (out)
            hs_traces_unref(out);
        rc = HS_ENOMEM;
    }
    free(ed);
    free(at);
    hs_buf_free(&attrs);
    free(x.slow);
    if (rc) {
        hs_metrics_drop(base->metrics, base->id, "annotate_failed", 0);
        return hs_consumer_traces(base->next, batch);
    }
    hs_traces_unref(batch);
    return out ? hs_consumer_traces(base->next, out) : 0;
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
    uint64_t now = now_ms(c);
    for (uint32_t i = 0; i < mine->count; i++) {
        /* released at once: a later add may evict this service */
        struct corr_svc *s = hs_corr_index_add(&c->index, mine->tenant, mine->items[i], now);
        if (s && s->nparked)
            release_service(c, s, false);
    }
    hs_profiles_unref(mine);
    return 0;
}

/* ---- timer and lifecycle ---------------------------------------------------------------- */

void hs_correlator_tick(struct hs_component *base)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    uint64_t now = now_ms(c);
    uint32_t n = 0;
    /* not in deadline order: a span waiting for its service's first profile may wait longer
     * than the spans parked after it */
    for (struct corr_parked *p = c->parked_head; p; p = p->next)
        n += p->deadline_ms <= now;
    if (n) {
        struct corr_parked **ps = hs_xmalloc(n * sizeof(*ps));
        uint32_t k = 0;
        for (struct corr_parked *p = c->parked_head, *nx; p; p = nx) {
            nx = p->next;
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
    for (struct corr_parked *p = c->parked_head; p;) {
        struct corr_svc *svc = p->svc;
        if (!svc->settle_ms || svc->settle_ms > now) {
            p = p->next;
            continue;
        }
        svc->settle_ms = 0;
        release_service(c, svc, false);
        p = c->parked_head; /* the list changed */
    }
    outq_flush(c);
    hs_corr_index_expire(&c->index, now);
    hs_corr_seen_expire(&c->seen, now, c->conf.retention_ms);
    if (!c->closing && c->nparked == 0 && c->noutq == 0 && c->timer_open)
        uv_timer_stop(&c->timer); /* armed again by the next park */
}

static void timer_closed(uv_handle_t *h)
{
    struct correlator *c = h->data;
    c->timer_open = false;
    if (!c->housekeep_open) /* the last of our handles: nothing of ours is in the loop */
        c->done(&c->base);
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
    uint32_t n = hs_corr_index_housekeep(&c->index, base->metrics, now_ms(c)), supp;
    if (n && hs_ratelimit_allow(&c->log_rl, now_ms(c), &supp))
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

static void on_timer(uv_timer_t *t)
{
    struct correlator *c = t->data;
    hs_correlator_tick(&c->base);
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

static double gauge_parked(void *ud)
{
    struct correlator *c = ud;
    return (double)c->nparked + (double)c->outq_spans;
}

static double gauge_bytes(void *ud)
{
    struct correlator *c = ud;
    return (double)(c->index.bytes + hs_corr_latency_bytes(&c->latency) +
                    c->frags.cap * sizeof(struct corr_frag) + c->seen.bytes);
}

static double gauge_ui_bytes(void *ud)
{
    struct correlator *c = ud;
    return (double)c->ui.bytes;
}

static int corr_start(struct hs_component *base, const struct hs_host *host)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    struct hs_metrics *m = host->metrics;
    char l[256];
#define L(extra) (snprintf(l, sizeof(l), "processor=\"%s\"%s", base->id, extra), l)
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
    if (c->ui.cap && host->admin) {
        int rc = hs_admin_route(host->admin, "/ui", hs_corr_ui_handle, c);
        if (rc == 0)
            c->admin = host->admin;
        else if (rc == HS_EEXIST) /* one page per admin endpoint: the first correlator's */
            hs_log_warn(base->id, "/ui is served by another correlator: this one's slow spans "
                                  "are not listed there (set ui.enabled: false on all but one)");
        else
            hs_log_warn(base->id, "no room for /ui on the admin endpoint: the page is off");
        if (rc != 0) /* no page to show it on: keep no ring */
            hs_corr_ui_free(&c->ui);
    }
    if (c->ui.cap) {
        hs_metrics_gauge(m, "correlator_ui_bytes", "Memory of the recent slow spans kept for /ui",
                         L(""), gauge_ui_bytes, c);
        c->ui.cut = hs_metrics_counter(m, "correlator_ui_truncated_total",
                                       "Stacks or frames of /ui snapshots left out by their caps",
                                       L(""));
    }
#undef L
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

static void corr_destroy(struct hs_component *base)
{
    struct correlator *c = hs_container_of(base, struct correlator, base);
    if (c->base.metrics)
        hs_metrics_gauge_remove(c->base.metrics, c);
    c->index.on_evict = NULL;
    while (c->parked_head) { /* only without start/shutdown: nothing can be delivered now */
        struct corr_parked *p = c->parked_head;
        parked_unlink(c, p);
        hs_traces_unref(p->group);
        free(p);
    }
    for (uint32_t i = 0; i < c->noutq; i++)
        hs_traces_unref(c->outq[i]);
    free(c->outq);
    free(c->delays);
    hs_corr_index_free(&c->index);
    hs_corr_latency_free(&c->latency);
    hs_corr_fragments_free(&c->frags);
    hs_corr_seen_free(&c->seen);
    hs_corr_ui_free(&c->ui);
    hs_frame_rules_free(c->rules);
    hs_config_free_fields(corr_fields, &c->conf);
    free(c);
}

const struct hs_component_type hs_processor_correlator = {
    .name = "correlator",
    .kind = HS_KIND_PROCESSOR,
    .signals = HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES,
    .doc = "Annotates slow spans with what the profiles of their service show.",
    .fields = corr_fields,
    .shared = true,
    .create = corr_create,
    .start = corr_start,
    .consume_traces = corr_consume_traces,
    .consume_profiles = corr_consume_profiles,
    .shutdown = corr_shutdown,
    .destroy = corr_destroy,
};
