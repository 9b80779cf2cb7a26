/* admin.c: the admin endpoint: /healthz for probes and /metrics in Prometheus text format,
 * with process CPU, RSS and open file descriptors read at scrape time. */
#include "admin.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "buf.h"
#include "common.h"
#include "config.h"
#include "http_server.h"
#include "metrics.h"

struct admin_route {
    char *prefix;
    hs_http_handler handler;
    void *ud;
};

struct hs_admin {
    struct hs_http_server *server;
    struct admin_route routes[HS_ADMIN_MAX_ROUTES];
    size_t nroutes;
    struct hs_http_server_config conf;
    struct hs_metrics *metrics;
    bool ready;
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

static double gauge_one(void *ud)
{
    return 1;
}

/* A route's prefix matches the path itself or the path's subtree, never "/uix" for "/ui". */
static bool route_dispatch(struct hs_admin *a, struct hs_http_request *req, bool get,
                           const struct hs_http_header *allow)
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
            r->handler(r->ud, req);
        return true;
    }
    return false;
}

static void admin_handle(void *ud, struct hs_http_request *req)
{
    struct hs_admin *a = ud;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    static const struct hs_http_header allow = {HS_STR("allow"), HS_STR("GET, HEAD")};

    if (hs_str_eq(req->path, "/healthz") || hs_str_eq(req->path, "/")) {
        if (!get) {
            hs_http_respond(req, 405, "text/plain; charset=utf-8", &allow, 1,
                            "method not allowed\n", 19);
            return;
        }
        const char *body = a->ready ? "{\"status\":\"ok\"}\n" : "{\"status\":\"shutting down\"}\n";
        hs_http_respond(req, a->ready ? 200 : 503, "application/json", NULL, 0, body,
                        strlen(body));
    } else if (hs_str_eq(req->path, "/metrics")) {
        if (!get) {
            hs_http_respond(req, 405, "text/plain; charset=utf-8", &allow, 1,
                            "method not allowed\n", 19);
            return;
        }
        struct hs_buf b = {0};
        if (hs_metrics_render(a->metrics, &b) != 0) {
            hs_http_respond_text(req, 500, "out of memory rendering metrics\n");
        } else {
            hs_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, 0,
                            b.data, b.len);
        }
        hs_buf_free(&b);
    } else if (route_dispatch(a, req, get, &allow)) {
        return;
    } else {
        hs_http_respond_text(req, 404, "not found: the admin endpoint serves /healthz and "
                                       "/metrics\n");
    }
}

int hs_admin_start(uv_loop_t *loop, const char *endpoint, struct hs_metrics *metrics,
                   struct hs_admin **out, struct hs_error *err)
{
    struct hs_admin *a = hs_xcalloc(1, sizeof(*a));
    a->metrics = metrics;
    a->ready = true;
    hs_config_decode(hs_http_server_fields_common, NULL, &a->conf, "service.telemetry", err);
    a->conf.endpoint = hs_xstrdup(endpoint);
    a->conf.max_request_body_size = 4096;
    const struct hs_http_server_opts opts = {
        .config = &a->conf, .name = "admin", .handler = admin_handle, .ud = a};
    int rc = hs_http_server_start(loop, &opts, &a->server, err);
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
    hs_metrics_gauge(metrics, "build_info", "Build information", "version=\"" HS_VERSION "\"",
                     gauge_one, a);
    *out = a;
    return 0;
}

int hs_admin_route(struct hs_admin *a, const char *prefix, hs_http_handler handler, void *ud)
{
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

void hs_admin_set_ready(struct hs_admin *a, bool ready)
{
    a->ready = ready;
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
