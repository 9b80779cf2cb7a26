/* demo.c: `hotspan demo`'s generator on the loop: reads where this hotspan listens from its
 * config, then sends requests (OTLP/HTTP) and CPU and goroutine profiles (Pyroscope /ingest)
 * to itself. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/compress.h"
#include "core/config.h"
#include "net/http_client.h"
#include "core/log.h"
#include "demo/demo.h"

/* ---- targets ---------------------------------------------------------------------------- */

static const struct hs_config_field *field(const struct hs_config_field *f, const char *name)
{
    for (; f && f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* The first receiver of `type` ("otlp" or "otlp/<name>"), and its id. */
static const struct hs_config_node *receiver(const struct hs_config_node *root, const char *type)
{
    const struct hs_config_node *recv = hs_config_get(root, "receivers");
    size_t n = strlen(type);
    for (const struct hs_config_node *c = recv && recv->kind == HS_NODE_MAP ? recv->child : NULL; c;
         c = c->next)
        if (strncmp(c->key, type, n) == 0 && (c->key[n] == '\0' || c->key[n] == '/'))
            return c;
    return NULL;
}

/* A configured scalar, else the field table's default. */
static const char *value_or_default(const struct hs_config_node *map,
                                    const struct hs_config_field *fields, const char *key)
{
    const struct hs_config_node *v = hs_config_get(map, key);
    if (v && v->kind == HS_NODE_SCALAR && !v->is_null)
        return v->value;
    const struct hs_config_field *f = field(fields, key);
    return f ? f->def : NULL;
}

/* "http://HOST:PORT<path>" to send to an endpoint we listen on; HS_EINVAL for port 0. */
static int endpoint_url(const char *endpoint, const char *path, char *out, size_t cap)
{
    char host[256];
    uint16_t port;
    if (!endpoint || hs_parse_endpoint(endpoint, host, sizeof(host), &port) != 0 || port == 0)
        return HS_EINVAL;
    const char *h = host;
    if (!*h || strcmp(h, "0.0.0.0") == 0)
        h = "127.0.0.1";
    else if (strcmp(h, "::") == 0)
        h = "::1";
    bool v6 = strchr(h, ':') != NULL;
    int n = snprintf(out, cap, "http://%s%s%s:%u%s", v6 ? "[" : "", h, v6 ? "]" : "",
                     (unsigned)port, path);
    return n > 0 && (size_t)n < cap ? 0 : HS_EINVAL;
}

/* Errors are positioned as config errors are (FILE:LINE:COL: key.path: message): at the
 * endpoint at fault, or at `receivers` when a receiver is missing. */
static int targets_from(const struct hs_config_node *root, struct hs_demo_targets *t,
                        struct hs_error *err)
{
    const struct hs_component_type *otlp = hs_registry_find(HS_KIND_RECEIVER, "otlp");
    const struct hs_component_type *pyro = hs_registry_find(HS_KIND_RECEIVER, "pyroscope");
    const struct hs_config_field *protos = otlp ? field(otlp->fields, "protocols") : NULL;
    const struct hs_config_field *http = protos ? field(protos->sub, "http") : NULL;
    const struct hs_config_node *recv = hs_config_get(root, "receivers");
    const struct hs_config_node *o = receiver(root, "otlp");
    const struct hs_config_node *oh = hs_config_get(hs_config_get(o, "protocols"), "http");
    const struct hs_config_node *p = receiver(root, "pyroscope");
    const char *need = "hotspan demo sends traces to an otlp receiver with protocols.http and "
                       "profiles to a pyroscope receiver, each on a fixed port";
    char path[300];
    if (!oh || !http) {
        hs_config_errorf(err,
                         o      ? o
                         : recv ? recv
                                : root,
                         "receivers.otlp.protocols.http", "missing: %s", need);
        return HS_EINVAL;
    }
    if (!p || !pyro) {
        hs_config_errorf(err, recv ? recv : root, "receivers.pyroscope", "missing: %s", need);
        return HS_EINVAL;
    }
    const char *ep = value_or_default(oh, http->sub, "endpoint");
    const char *url_path = value_or_default(oh, http->sub, "traces_url_path");
    snprintf(t->otlp_endpoint, sizeof(t->otlp_endpoint), "%s", ep ? ep : "");
    if (endpoint_url(ep, url_path ? url_path : "/v1/traces", t->traces_url,
                     sizeof(t->traces_url))) {
        const struct hs_config_node *at = hs_config_get(oh, "endpoint");
        snprintf(path, sizeof(path), "receivers.%s.protocols.http.endpoint", o->key);
        hs_config_errorf(err, at ? at : oh, path, "\"%s\" is not a fixed host:port: %s",
                         t->otlp_endpoint, need);
        return HS_EINVAL;
    }
    ep = value_or_default(p, pyro->fields, "endpoint");
    snprintf(t->pyroscope_endpoint, sizeof(t->pyroscope_endpoint), "%s", ep ? ep : "");
    if (endpoint_url(ep, "/ingest", t->ingest_url, sizeof(t->ingest_url))) {
        const struct hs_config_node *at = hs_config_get(p, "endpoint");
        snprintf(path, sizeof(path), "receivers.%s.endpoint", p->key);
        hs_config_errorf(err, at ? at : p, path, "\"%s\" is not a fixed host:port: %s",
                         t->pyroscope_endpoint, need);
        return HS_EINVAL;
    }
    const struct hs_config_node *admin =
        hs_config_get(hs_config_get(hs_config_get(root, "service"), "telemetry"), "admin");
    if (admin && admin->kind == HS_NODE_SCALAR && !admin->is_null)
        snprintf(t->admin, sizeof(t->admin), "%s", admin->value);
    return 0;
}

int hs_demo_targets_read(const char *path, const char *text, size_t len,
                         struct hs_demo_targets *out, struct hs_error *err)
{
    struct hs_config_doc doc = {0};
    memset(out, 0, sizeof(*out));
    int rc = path ? hs_config_parse_file(path, &doc, err)
                  : hs_config_parse("<embedded default>", text, len, &doc, err);
    if (rc == 0 && (!doc.root || doc.root->kind != HS_NODE_MAP)) {
        hs_error_addf(err, "%s:1:1: the config must be a map", path ? path : "<embedded default>");
        rc = HS_EINVAL; /* the service refuses such a file first; this is for direct callers */
    }
    if (rc == 0)
        rc = targets_from(doc.root, out, err);
    hs_config_doc_free(&doc);
    return rc;
}

/* ---- the generator ---------------------------------------------------------------------- */

struct hs_demo {
    uv_loop_t *loop;
    struct hs_demo_targets t;
    struct hs_demo_model model;
    struct hs_http_client *http;
    uv_timer_t requests, profiles;
    uint64_t next_nplus1_ms; /* uv_now when the next N+1 request runs */
    int64_t from_ns[2];      /* the start of each service's next profile window */
    uint32_t inflight, closing;
    uint64_t sent, failed;
    bool stopping;
    void (*done)(void *ud);
    void *ud;
};

struct post {
    struct hs_demo *d;
    struct hs_buf body;
    const char *what;
};

#define POST_TIMEOUT_MS 5000
/* a stalled receiver holds requests until their timeout: past this many, new ones are skipped
 * (and counted as failed) rather than queued without bound */
#define MAX_INFLIGHT 64
/* the profiler's flush lags the clock by more than the longest request (~0.7 s), so a request
 * is whole in the window that first sees it, as a sampling profiler's would be */
#define PROFILE_LAG_NS INT64_C(800000000)

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void finish(struct hs_demo *d);

static void posted(void *ud, const struct hs_http_result *res)
{
    struct post *p = ud;
    struct hs_demo *d = p->d;
    if (res->status >= 200 && res->status < 300) {
        d->sent++;
    } else if (d->failed++ < 5 || d->failed % 100 == 0) { /* rate-limited, for the console */
        if (res->status)
            hs_log_warn("demo", "sending %s: HTTP %d (%" PRIu64 " failed so far)", p->what,
                        res->status, d->failed);
        else
            hs_log_warn("demo", "sending %s: %s (%" PRIu64 " failed so far)", p->what,
                        res->error ? res->error : "no response", d->failed);
    }
    hs_buf_free(&p->body);
    free(p);
    d->inflight--;
    if (d->stopping && d->inflight == 0)
        finish(d);
}

/* Takes body. */
static void post(struct hs_demo *d, const char *url, const char *ctype, struct hs_buf *body,
                 const char *what)
{
    if (d->inflight >= MAX_INFLIGHT) {
        hs_buf_free(body);
        d->failed++;
        return;
    }
    struct post *p = hs_xcalloc(1, sizeof(*p));
    p->d = d;
    p->body = *body;
    *body = (struct hs_buf){0};
    p->what = what;
    const char *headers[1] = {ctype};
    if (hs_http_client_post(d->http, url, headers, 1, p->body.data, p->body.len, POST_TIMEOUT_MS,
                            posted, p) != 0) {
        hs_buf_free(&p->body);
        free(p);
        d->failed++;
        return;
    }
    d->inflight++;
}

static void send_request(struct hs_demo *d, bool nplus1)
{
    const struct hs_demo_request *r = hs_demo_request_new(&d->model, wall_ns(), nplus1);
    struct hs_buf body = {0};
    if (hs_demo_encode_traces(r, &body) != 0) {
        hs_buf_free(&body);
        return;
    }
    if (nplus1) { /* the exact count, so a reader (or a test) can check the line it causes */
        char hex[33];
        for (int i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", r->trace_id[i]);
        hs_log_info("demo", "N+1 request trace=%s findByEmail=%" PRId64 "ms queries=%u", hex,
                    (r->db_end_ns - r->db_start_ns) / 1000000, r->queries);
    }
    post(d, d->t.traces_url, "Content-Type: application/x-protobuf", &body, "traces");
}

/* api-server's goroutine profile of the same window, as pyroscope-go uploads it: what its
 * requests waited on, which their CPU samples cannot say. */
static void send_goroutines(struct hs_demo *d, int64_t from_ns, int64_t until_ns)
{
    struct hs_demo_upload up;
    if (hs_demo_goroutines_upload(&d->model, from_ns, until_ns, &up) != 0)
        return;
    char url[sizeof(d->t.ingest_url) + sizeof(up.query) + 1];
    char ctype[sizeof(up.content_type) + 16];
    snprintf(url, sizeof(url), "%s?%s", d->t.ingest_url, up.query);
    snprintf(ctype, sizeof(ctype), "Content-Type: %s", up.content_type);
    post(d, url, ctype, &up.body, "goroutine profile");
}

static void send_profile(struct hs_demo *d, enum hs_demo_service svc, int64_t until_ns)
{
    int64_t from = d->from_ns[svc];
    if (until_ns <= from)
        return;
    struct hs_buf raw = {0}, gz = {0};
    if (hs_demo_encode_profile(&d->model, svc, from, until_ns, &raw) != 0 ||
        hs_gzip(raw.data, raw.len, 6, &gz) != 0) { /* gzipped, as the Go and Node SDKs send */
        hs_buf_free(&raw);
        hs_buf_free(&gz);
        return;
    }
    hs_buf_free(&raw);
    d->from_ns[svc] = until_ns;
    /* name=<service>{env=demo}, URL-escaped; from/until in ns (19 digits: wire.md §5.1) */
    char url[sizeof(d->t.ingest_url) + 200];
    snprintf(url, sizeof(url),
             "%s?name=%s%%7Benv%%3Ddemo%%7D&from=%" PRId64 "&until=%" PRId64
             "&spyName=hotspan-demo&format=pprof",
             d->t.ingest_url, hs_demo_service_names[svc], from, until_ns);
    post(d, url, "Content-Type: application/octet-stream", &gz, "profile");
    if (svc == HS_DEMO_API)
        send_goroutines(d, from, until_ns);
}

static void on_request(uv_timer_t *t)
{
    struct hs_demo *d = t->data;
    bool nplus1 = uv_now(d->loop) >= d->next_nplus1_ms;
    if (nplus1) /* every few seconds, varying */
        d->next_nplus1_ms = uv_now(d->loop) + hs_demo_rand(&d->model, 3000, 6000);
    send_request(d, nplus1);
    uv_timer_start(&d->requests, on_request, hs_demo_rand(&d->model, 150, 350), 0);
}

static void on_profiles(uv_timer_t *t)
{
    struct hs_demo *d = t->data;
    int64_t until = wall_ns() - PROFILE_LAG_NS;
    send_profile(d, HS_DEMO_API, until);
    send_profile(d, HS_DEMO_DB, until);
    uv_timer_start(&d->profiles, on_profiles, hs_demo_rand(&d->model, 1000, 1800), 0);
}

struct hs_demo *hs_demo_start(uv_loop_t *loop, const struct hs_demo_targets *t, uint64_t seed)
{
    struct hs_demo *d = hs_xcalloc(1, sizeof(*d));
    d->http = hs_http_client_new(loop);
    if (!d->http) {
        free(d);
        return NULL;
    }
    d->loop = loop;
    d->t = *t;
    hs_demo_model_init(&d->model, seed);
    d->from_ns[HS_DEMO_API] = d->from_ns[HS_DEMO_DB] = wall_ns() - PROFILE_LAG_NS;
    uv_timer_init(loop, &d->requests);
    uv_timer_init(loop, &d->profiles);
    d->requests.data = d->profiles.data = d;
    /* the first profiles reach the correlator before the first N+1 span, so it knows user-db
     * profiles itself and waits for the window instead of annotating "no profiles" */
    d->next_nplus1_ms = uv_now(loop) + hs_demo_rand(&d->model, 2000, 3000);
    uv_timer_start(&d->requests, on_request, 100, 0);
    uv_timer_start(&d->profiles, on_profiles, 500, 0);
    return d;
}

static void http_closed(void *ud)
{
    struct hs_demo *d = ud;
    void (*done)(void *) = d->done;
    void *arg = d->ud;
    hs_log_info("demo", "stopped: %" PRIu64 " requests sent, %" PRIu64 " failed", d->sent,
                d->failed);
    free(d);
    done(arg);
}

static void timer_closed(uv_handle_t *h)
{
    struct hs_demo *d = h->data;
    if (--d->closing == 0)
        hs_http_client_close(d->http, http_closed, d);
}

static void finish(struct hs_demo *d)
{
    d->closing = 2;
    uv_close((uv_handle_t *)&d->requests, timer_closed);
    uv_close((uv_handle_t *)&d->profiles, timer_closed);
}

void hs_demo_stop(struct hs_demo *d, void (*done)(void *ud), void *ud)
{
    if (d->stopping)
        return;
    d->stopping = true;
    d->done = done;
    d->ud = ud;
    uv_timer_stop(&d->requests);
    uv_timer_stop(&d->profiles);
    /* a last window up to now: the last requests are covered, so their slow spans match */
    int64_t now = wall_ns();
    send_profile(d, HS_DEMO_API, now);
    send_profile(d, HS_DEMO_DB, now);
    if (d->inflight == 0)
        finish(d);
}
