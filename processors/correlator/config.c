/* config.c: the correlator's settings: the field table (which also writes the README's config
 * reference) and the checks across keys that run when the processor is created. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "pdata/frames.h"
#include "processors/correlator/correlator_int.h"

#define C offsetof(struct corr_config, slow)
static const struct hs_config_field slow_fields[] = {
    {"threshold", HS_CFG_DURATION, offsetof(struct corr_config, slow.threshold_ms) - C, "500ms",
     .min = 0, .max = 3600000, .doc = "a span at least this long is slow; 0 leaves only `factor`"},
    {"factor", HS_CFG_DOUBLE, offsetof(struct corr_config, slow.factor) - C, "0", .min = 0,
     .max = 1000,
     .doc = "when > 0, a span longer than factor x the p50 of its (service, span name) is slow"},
    {"min_samples", HS_CFG_UINT, offsetof(struct corr_config, slow.min_samples) - C, "20", .min = 1,
     .max = 1000000, .doc = "spans of a name seen before `factor` applies to it"},
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

const struct hs_config_field hs_corr_fields[] = {
    {"slow", HS_CFG_SECTION, offsetof(struct corr_config, slow), .sub = slow_fields,
     .doc = "what makes a span slow"},
    {"bucket", HS_CFG_DURATION, offsetof(struct corr_config, bucket_ms), "10s", .min = 1000,
     .max = 3600000, .doc = "time bucket of the profile index"},
    {"retention", HS_CFG_DURATION, offsetof(struct corr_config, retention_ms), "15m", .min = 1000,
     .max = 86400000, .doc = "how long profiles stay in the index"},
    {"max_wait", HS_CFG_DURATION, offsetof(struct corr_config, max_wait_ms), "30s", .min = 0,
     .max = 600000,
     .doc = "how long a slow span waits for its profile; 0 never waits. Longer, up to "
            "`max_wait_cap`, when its service uploads less often"},
    {"max_wait_cap", HS_CFG_DURATION, offsetof(struct corr_config, max_wait_cap_ms), "2m", .min = 0,
     .max = 3600000,
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
    {"max_window", HS_CFG_DURATION, offsetof(struct corr_config, max_window_ms), "5m", .min = 1000,
     .max = 86400000, .doc = "longest window matched; a longer span matches its last max_window"},
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
    {"n_plus_one", HS_CFG_SECTION, offsetof(struct corr_config, n_plus_one), .sub = nplus1_fields,
     .doc = "N+1 detection"},
    {"ui", HS_CFG_SECTION, offsetof(struct corr_config, ui), .sub = ui_fields,
     .doc = "the /ui page on the admin endpoint"},
    {"grown", HS_CFG_SECTION, offsetof(struct corr_config, grown), .sub = grown_fields,
     .doc = "functions grown against the service's baseline"},
    {"limits", HS_CFG_SECTION, offsetof(struct corr_config, limits), .sub = limits_fields,
     .doc = "memory bounds"},
    {0},
};

/* Where a check across keys points: the first key written, else the section itself. */
static const struct hs_config_node *conf_node(const struct hs_config_node *cfg, const char *a,
                                              const char *b)
{
    const struct hs_config_node *n = hs_config_get(cfg, a);
    return n ? n : hs_config_get(cfg, b) ? hs_config_get(cfg, b) : cfg;
}

int hs_corr_config_decode(const struct hs_config_node *cfg, const char *path,
                          struct corr_config *conf, struct hs_frame_rules **rules,
                          struct hs_error *err)
{
    int rc = hs_config_decode(hs_corr_fields, cfg, conf, path, err);
    if (rc == 0 && conf->retention_ms < conf->bucket_ms) {
        hs_config_errorf(err, conf_node(cfg, "retention", "bucket"), path,
                         "retention (%" PRIu64 "ms) is shorter than bucket (%" PRIu64 "ms)",
                         conf->retention_ms, conf->bucket_ms);
        rc = HS_EINVAL;
    }
    if (rc == 0 && conf->max_wait_cap_ms && conf->max_wait_cap_ms < conf->max_wait_ms) {
        hs_config_errorf(err, conf_node(cfg, "max_wait_cap", "max_wait"), path,
                         "max_wait_cap (%" PRIu64 "ms) is shorter than max_wait (%" PRIu64
                         "ms): set it to 0 or at least max_wait",
                         conf->max_wait_cap_ms, conf->max_wait_ms);
        rc = HS_EINVAL;
    }
    if (rc == 0 && conf->limits.max_service_bytes > conf->limits.max_bytes) {
        hs_config_errorf(err, conf_node(cfg, "limits", "limits"), path,
                         "limits.max_service_bytes is above limits.max_bytes");
        rc = HS_EINVAL;
    }
    char ferr[256] = "";
    if (rc == 0 && hs_frame_rules_new((const char *const *)conf->library_frames.items,
                                      conf->library_frames.count, rules, ferr, sizeof(ferr)) != 0) {
        char kp[256];
        snprintf(kp, sizeof(kp), "%s.library_frames", path);
        hs_config_errorf(err, conf_node(cfg, "library_frames", "library_frames"), kp, "%s", ferr);
        rc = HS_EINVAL;
    }
    if (rc) {
        hs_config_free_fields(hs_corr_fields, conf);
        return HS_EINVAL;
    }
    return 0;
}

void hs_corr_config_free(struct corr_config *conf)
{
    hs_config_free_fields(hs_corr_fields, conf);
}
