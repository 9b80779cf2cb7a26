/* admin.c: the admin endpoint: /healthz, /healthz/live and /healthz/ready for probes (ready
 * names a memory_limiter refusing data and the exporters failing too long), and /metrics in
 * Prometheus text format, with process CPU, RSS and open file descriptors read at scrape time;
 * all but the probes behind admin_auth when it is set. */
#include "admin.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "net/auth.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/config.h"
#include "net/http_server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "net/tls.h"

struct admin_route {
    char *prefix;
    hs_admin_handler handler;
    void *ud;
};

struct hs_admin {
    struct hs_http_server *server;
    struct admin_route routes[HS_ADMIN_MAX_ROUTES];
    size_t nroutes;
    struct hs_http_server_config conf;
    struct hs_metrics *metrics;
    struct hs_auth *auth; /* borrowed; NULL: open */
    bool ready, started;  /* started: hs_admin_set_ready(true) was called once */
    uint64_t failure_threshold_ms;
    void (*done)(void *ud);
    void *done_ud;
};

static double gauge_cpu(void *ud)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static double gauge_rss(void *ud)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

static double gauge_fds(void *ud)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    double n = -1; /* the directory's own fd */
    while (readdir(d))
        n++;
    closedir(d);
    return n - 2; /* . and .. */
}

static double gauge_max_fds(void *ud)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    return (double)rl.rlim_cur;
}

static double gauge_one(void *ud)
{
    return 1;
}

/* A route's prefix matches the path itself or the path's subtree, never "/uix" for "/ui". */
static bool route_dispatch(struct hs_admin *a, struct hs_http_request *req, bool get,
                           const struct hs_http_header *allow, const char *tenant)
{
    for (size_t i = 0; i < a->nroutes; i++) {
        const struct admin_route *r = &a->routes[i];
        size_t n = strlen(r->prefix);
        if (req->path.len < n || memcmp(req->path.ptr, r->prefix, n) != 0 ||
            (req->path.len > n && req->path.ptr[n] != '/'))
            continue;
        if (!get)
            hs_http_respond(req, 405, "text/plain; charset=utf-8", allow, 1,
                            "method not allowed\n", 19);
        else
            r->handler(r->ud, req, tenant);
        return true;
    }
    return false;
}

struct health_walk {
    struct hs_admin *a;
    json_t *failing, *refusing;
    uint64_t now_ms;
    size_t over; /* sources failing for at least the threshold */
};

static void health_visit(void *arg, const char *component, const struct hs_health *h)
{
    struct health_walk *w = arg;
    if (!h->failing_since_ms)
        return;
    char since[32] = "";
    time_t t = (time_t)(h->failing_since_wall_ms / 1000u);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (h->over_memory_limit) { /* refusing everything now: unready at once, no threshold */
        double secs = (double)(w->now_ms - HS_MIN(w->now_ms, h->failing_since_ms)) / 1000.0;
        json_array_append_new(w->refusing,
                              json_pack("{s:s, s:s, s:f, s:s}", "component", component, "since",
                                        since, "seconds", secs, "reason", h->last_error));
        return;
    }
    double secs = hs_health_failing_seconds(h, w->now_ms);
    bool over = w->a->failure_threshold_ms && secs * 1000.0 >= (double)w->a->failure_threshold_ms;
    w->over += over;
    json_array_append_new(w->failing, json_pack("{s:s, s:s, s:f, s:s, s:b}", "exporter", component,
                                                "since", since, "seconds", secs, "last_error",
                                                h->last_error, "over_threshold", over));
}

/* Readiness (and /healthz): the service runs, no memory_limiter refuses data and no exporter
 * has failed for longer than the threshold. The body says why not, naming each refusing
 * component and failing exporter and since when. */
static void respond_ready(struct hs_admin *a, struct hs_http_request *req)
{
    struct health_walk w = {
        .a = a, .failing = json_array(), .refusing = json_array(), .now_ms = hs_now_ms()};
    hs_metrics_health_each(a->metrics, health_visit, &w);
    const char *status = !a->started                   ? "starting"
                         : !a->ready                   ? "shutting down"
                         : json_array_size(w.refusing) ? "refusing data"
                         : w.over                      ? "exporter failing"
                                                       : "ok";
    json_t *root = json_pack("{s:s, s:o}", "status", status, "failing_exporters", w.failing);
    if (root && json_array_size(w.refusing))
        json_object_set(root, "refusing_data", w.refusing);
    json_decref(w.refusing);
    if (a->failure_threshold_ms)
        json_object_set_new(root, "exporter_failure_threshold_seconds",
                            json_real((double)a->failure_threshold_ms / 1000.0));
    char *body = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(root);
    if (!body) {
        hs_http_respond_text(req, 500, "out of memory rendering health\n");
        return;
    }
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%s\n", body) != 0) {
        hs_http_respond_text(req, 500, "out of memory rendering health\n");
    } else {
        int code = strcmp(status, "ok") == 0 ? 200 : 503;
        hs_http_respond(req, code, "application/json", NULL, 0, b.data, b.len);
    }
    hs_buf_free(&b);
    free(body);
}

/* Who may read past the probes. Answers 401 (with the challenges, as a receiver does) and
 * returns false without a valid credential; else *tenant is the caller's token's tenant, or NULL
 * for an operator. */
static bool admin_authorize(struct hs_admin *a, struct hs_http_request *req, const char **tenant)
{
    *tenant = NULL;
    if (!a->auth)
        return true;
    enum hs_auth_result r = hs_auth_check(a->auth, req, tenant);
    if (r == HS_AUTH_OK)
        return true;
    struct hs_http_header ch[2];
    size_t n = hs_auth_challenges(a->auth, r, ch);
    char body[128];
    int len = snprintf(body, sizeof(body), "%s\n", hs_auth_message(r));
    hs_http_respond(req, 401, "text/plain; charset=utf-8", ch, n, body, (size_t)len);
    return false;
}

/* /metrics counts every tenant's data: for operators only, not for a tenant's token. */
static void respond_metrics(struct hs_admin *a, struct hs_http_request *req, const char *tenant)
{
    if (tenant) {
        char body[300];
        int len = snprintf(body, sizeof(body),
                           "forbidden: this token is tenant \"%s\"'s, and /metrics counts every "
                           "tenant's data (use a credential without a tenant)\n",
                           tenant);
        hs_http_respond(req, 403, "text/plain; charset=utf-8", NULL, 0, body,
                        (size_t)HS_MIN(len, (int)sizeof(body) - 1));
        return;
    }
    struct hs_buf b = {0};
    if (hs_metrics_render(a->metrics, &b) != 0)
        hs_http_respond_text(req, 500, "out of memory rendering metrics\n");
    else
        hs_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, 0, b.data,
                        b.len);
    hs_buf_free(&b);
}

static void admin_handle(void *ud, struct hs_http_request *req)
{
    struct hs_admin *a = ud;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    static const struct hs_http_header allow = {HS_STR("allow"), HS_STR("GET, HEAD")};
    bool health = hs_str_eq(req->path, "/healthz") || hs_str_eq(req->path, "/") ||
                  hs_str_eq(req->path, "/healthz/ready") || hs_str_eq(req->path, "/healthz/live");
    const char *tenant;

    if (health && !get) {
        hs_http_respond(req, 405, "text/plain; charset=utf-8", &allow, 1,
                        "method not allowed\n", 19);
    } else if (hs_str_eq(req->path, "/healthz/live")) {
        /* liveness: answering at all is the proof; a failing backend is no reason to restart */
        static const char body[] = "{\"status\":\"ok\"}\n";
        hs_http_respond(req, 200, "application/json", NULL, 0, body, sizeof(body) - 1);
    } else if (health) {
        respond_ready(a, req);
    } else if (!admin_authorize(a, req, &tenant)) {
        return; /* probes above need no credentials; everything below does */
    } else if (hs_str_eq(req->path, "/metrics")) {
        if (get)
            respond_metrics(a, req, tenant);
        else
            hs_http_respond(req, 405, "text/plain; charset=utf-8", &allow, 1,
                            "method not allowed\n", 19);
    } else if (route_dispatch(a, req, get, &allow, tenant)) {
        return;
    } else {
        hs_http_respond_text(req, 404, "not found: the admin endpoint serves /healthz, "
                                       "/healthz/live, /healthz/ready and /metrics\n");
    }
}

int hs_admin_start(uv_loop_t *loop, const char *endpoint, const struct hs_tls_server_config *tls,
                   struct hs_metrics *metrics, struct hs_admin **out, struct hs_error *err)
{
    struct hs_admin *a = hs_xcalloc(1, sizeof(*a));
    a->metrics = metrics;
    hs_config_decode(hs_http_server_fields_common, NULL, &a->conf, "service.telemetry", err);
    a->conf.endpoint = hs_xstrdup(endpoint);
    a->conf.max_request_body_size = 4096;
    /* its own budget: probes, a Prometheus scrape and a browser on /ui need a handful (half
     * of them from one address), and they come out of the descriptors the receivers cannot
     * take (fd_reserve below), so /healthz/live answers while the receivers are full */
    a->conf.max_connections = 64;
    if (tls) { /* borrowed for the call: the server keeps copies of what it needs */
        a->conf.tls_enabled = true;
        a->conf.tls = *tls;
    }
    const struct hs_http_server_opts opts = {.config = &a->conf,
                                             .name = "admin",
                                             .handler = admin_handle,
                                             .ud = a,
                                             .metrics = metrics,
                                             .fd_reserve = true};
    int rc = hs_http_server_start(loop, &opts, &a->server, err);
    a->conf.tls_enabled = false;
    a->conf.tls = (struct hs_tls_server_config){0};
    if (rc) {
        hs_config_free_fields(hs_http_server_fields_common, &a->conf);
        free(a->conf.endpoint);
        free(a);
        return rc;
    }
    hs_metrics_gauge(metrics, "process_cpu_seconds_total", "User and system CPU seconds", "",
                     gauge_cpu, a);
    hs_metrics_gauge(metrics, "process_resident_memory_bytes", "Resident set size", "",
                     gauge_rss, a);
    hs_metrics_gauge(metrics, "process_open_fds", "Open file descriptors", "", gauge_fds, a);
    hs_metrics_gauge(metrics, "process_max_fds", "Limit of open file descriptors (0: none)", "",
                     gauge_max_fds, a);
    hs_metrics_gauge(metrics, "build_info", "Build information", "version=\"" HS_VERSION "\"",
                     gauge_one, a);
    *out = a;
    return 0;
}

int hs_admin_route(struct hs_admin *a, const char *prefix, hs_admin_handler handler, void *ud)
{
    for (size_t i = 0; i < a->nroutes; i++)
        if (strcmp(a->routes[i].prefix, prefix) == 0)
            return HS_EEXIST;
    if (a->nroutes == HS_ADMIN_MAX_ROUTES)
        return HS_E2BIG;
    a->routes[a->nroutes++] = (struct admin_route){hs_xstrdup(prefix), handler, ud};
    return 0;
}

void hs_admin_unroute(struct hs_admin *a, void *ud)
{
    size_t kept = 0;
    for (size_t i = 0; i < a->nroutes; i++) {
        if (a->routes[i].ud == ud)
            free(a->routes[i].prefix);
        else
            a->routes[kept++] = a->routes[i];
    }
    a->nroutes = kept;
}

int hs_admin_port(const struct hs_admin *a)
{
    return hs_http_server_port(a->server);
}

/* 127.0.0.0/8, ::1 or localhost: only this machine reaches it. */
static bool loopback(const char *endpoint)
{
    const char *colon = strrchr(endpoint, ':');
    size_t n = colon ? (size_t)(colon - endpoint) : strlen(endpoint);
    if (n >= 2 && endpoint[0] == '[' && endpoint[n - 1] == ']') {
        endpoint++;
        n -= 2;
    }
    return (n >= 4 && memcmp(endpoint, "127.", 4) == 0) ||
           (n == 9 && memcmp(endpoint, "localhost", 9) == 0) ||
           (n == 3 && memcmp(endpoint, "::1", 3) == 0);
}

void hs_admin_set_auth(struct hs_admin *a, struct hs_auth *auth)
{
    a->auth = auth;
    if (auth)
        hs_auth_start(auth, a->metrics, "admin");
    else if (!loopback(a->conf.endpoint))
        hs_log_warn("admin",
                    "the admin endpoint %s is not on loopback and has no "
                    "service.telemetry.admin_auth: /metrics and /ui answer whoever reaches it "
                    "(set admin_auth, or bind it to 127.0.0.1)",
                    a->conf.endpoint);
}

void hs_admin_set_ready(struct hs_admin *a, bool ready)
{
    a->ready = ready;
    a->started |= ready;
}

void hs_admin_set_failure_threshold(struct hs_admin *a, uint64_t threshold_ms)
{
    a->failure_threshold_ms = threshold_ms;
}

static void hs_admin_unroute_all(struct hs_admin *a)
{
    for (size_t i = 0; i < a->nroutes; i++)
        free(a->routes[i].prefix);
    a->nroutes = 0;
}

static void admin_server_closed(void *ud)
{
    struct hs_admin *a = ud;
    hs_metrics_gauge_remove(a->metrics, a);
    hs_admin_unroute_all(a);
    hs_config_free_fields(hs_http_server_fields_common, &a->conf);
    free(a->conf.endpoint);
    void (*done)(void *) = a->done;
    void *done_ud = a->done_ud;
    free(a);
    done(done_ud);
}

void hs_admin_close(struct hs_admin *a, void (*done)(void *ud), void *ud)
{
    a->done = done;
    a->done_ud = ud;
    hs_http_server_close(a->server, admin_server_closed, a);
}
