/* telemetry.c: the keys of service.telemetry (log level and format, the admin endpoint with its
 * TLS and credentials, what makes it unready) and their life beside the service: decoded and
 * checked with the config, started before the first component, ready once the last one started,
 * closed after the last one stopped. */
#include "admin/telemetry.h"

#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "core/common.h"
#include "core/config.h"
#include "core/log.h"
#include "net/auth.h"
#include "net/tls.h"

/* otelcol's health_check extension kept exporter failures out of readiness unless asked
 * (check_collector_pipeline); here the threshold is on by default, at otelcol's interval. */
struct health_config {
    uint64_t exporter_failure_threshold_ms;
};

static const struct hs_config_field health_fields[] = {
    {"exporter_failure_threshold", HS_CFG_DURATION,
     offsetof(struct health_config, exporter_failure_threshold_ms), "5m", .min = 0,
     .max = 7 * 86400000LL,
     .doc = "/healthz/ready (and /healthz) answer 503 once every send attempt of an exporter "
            "has failed for this long with no success since; 0 = exporters never make it "
            "unready"},
    {0},
};

struct telemetry_config {
    char *admin;
    bool admin_tls_enabled;
    struct hs_tls_server_config admin_tls;
    bool admin_auth_enabled;
    struct hs_auth_config admin_auth;
    char *log_level;
    char *log_format;
    struct health_config health;
};

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const log_formats[] = {"logfmt", "json", NULL};

static const struct hs_config_field telemetry_fields[] = {
    {"admin", HS_CFG_ENDPOINT, offsetof(struct telemetry_config, admin), "127.0.0.1:13133",
     .doc = "admin endpoint: /healthz, /healthz/live, /healthz/ready, /metrics (and /ui); off "
            "loopback only with admin_auth"},
    {"admin_tls", HS_CFG_SECTION, offsetof(struct telemetry_config, admin_tls), NULL,
     .sub = hs_tls_server_fields, .has_presence = true,
     .presence_offset = offsetof(struct telemetry_config, admin_tls_enabled),
     .doc = "serve the admin endpoint over TLS only (the keys of a listener's `tls:`)"},
    {"admin_auth", HS_CFG_SECTION, offsetof(struct telemetry_config, admin_auth), NULL,
     .sub = hs_auth_fields, .has_presence = true,
     .presence_offset = offsetof(struct telemetry_config, admin_auth_enabled),
     .doc = "credentials for /metrics and /ui (the keys of a receiver's `auth:`); the /healthz "
            "probes stay open. A per-tenant token sees its own tenant's /ui only"},
    {"log_level", HS_CFG_ENUM, offsetof(struct telemetry_config, log_level), "info",
     .choices = log_levels, .doc = "least severe level logged"},
    {"log_format", HS_CFG_ENUM, offsetof(struct telemetry_config, log_format), "logfmt",
     .choices = log_formats, .doc = "log line format"},
    {"health", HS_CFG_SECTION, offsetof(struct telemetry_config, health), NULL,
     .sub = health_fields,
     .doc = "what makes /healthz/ready answer 503 besides start-up and shutdown"},
    {0},
};

struct hs_telemetry {
    struct telemetry_config conf;
    struct hs_auth *admin_auth; /* NULL: the admin endpoint is open */
    struct hs_admin *admin;     /* while it runs */
    void (*done)(void *ud);     /* of tel_close */
    void *done_ud;
};

static struct hs_telemetry *tel_load(const struct hs_config_node *node, struct hs_error *err)
{
    struct hs_telemetry *t = hs_xcalloc(1, sizeof(*t));
    if (hs_config_decode(telemetry_fields, node, &t->conf, "service.telemetry", err) != 0)
        return t;
    if (t->conf.admin_tls_enabled)
        hs_tls_server_check(&t->conf.admin_tls, hs_config_get(node, "admin_tls"),
                            "service.telemetry.admin_tls", err);
    if (t->conf.admin_auth_enabled) /* files read now: `hotspan validate` reports them */
        hs_auth_new(&t->conf.admin_auth, hs_config_get(node, "admin_auth"),
                    "service.telemetry.admin_auth", &t->admin_auth, err);
    return t;
}

static int tel_start(struct hs_telemetry *t, uv_loop_t *loop, struct hs_metrics *metrics,
                     struct hs_admin **admin, struct hs_error *err)
{
    enum hs_log_level lvl = HS_LOG_INFO;
    hs_log_level_parse(t->conf.log_level, &lvl);
    hs_log_setup(lvl, strcmp(t->conf.log_format, "json") == 0);
    int rc =
        hs_admin_start(loop, t->conf.admin, t->conf.admin_tls_enabled ? &t->conf.admin_tls : NULL,
                       metrics, &t->admin, err);
    if (rc)
        return rc;
    hs_admin_set_failure_threshold(t->admin, t->conf.health.exporter_failure_threshold_ms);
    hs_admin_set_auth(t->admin, t->admin_auth);
    *admin = t->admin;
    return 0;
}

static void tel_set_ready(struct hs_telemetry *t, bool ready)
{
    if (t->admin)
        hs_admin_set_ready(t->admin, ready);
}

static void admin_closed(void *arg)
{
    struct hs_telemetry *t = arg;
    t->admin = NULL;
    t->done(t->done_ud);
}

static void tel_close(struct hs_telemetry *t, void (*done)(void *ud), void *ud)
{
    if (!t->admin) {
        done(ud);
        return;
    }
    t->done = done;
    t->done_ud = ud;
    hs_admin_close(t->admin, admin_closed, t);
}

static void tel_free(struct hs_telemetry *t)
{
    if (!t)
        return;
    hs_config_free_fields(telemetry_fields, &t->conf);
    hs_auth_free(t->admin_auth);
    free(t);
}

const struct hs_telemetry_ops hs_admin_telemetry = {
    .fields = telemetry_fields,
    .load = tel_load,
    .start = tel_start,
    .set_ready = tel_set_ready,
    .close = tel_close,
    .free = tel_free,
};
