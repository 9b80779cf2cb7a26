/* http_server.c: the HTTP server as its users see it: the listener's config rows, start and
 * close, and the request API (headers, answers, the body's buffer), over the two protocols
 * (http1.c, http2.c) and their transport (transport.c). */
#include "net/http_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/errors.h"
#include "core/metrics.h"
#include "net/http_server_int.h"

const struct hs_config_field hs_http_server_fields_common[] = {
    {"max_request_body_size", HS_CFG_SIZE,
     offsetof(struct hs_http_server_config, max_request_body_size), "20MiB", .min = 1,
     .max = 1 << 30, .doc = "largest request body, as sent and again after decompression; larger is a 413"},
    {"read_timeout", HS_CFG_DURATION, offsetof(struct hs_http_server_config, read_timeout_ms),
     "30s", .min = 1, .max = 3600000,
     .doc = "time from a request's first byte to its whole body; slower is a 408"},
    {"idle_timeout", HS_CFG_DURATION, offsetof(struct hs_http_server_config, idle_timeout_ms),
     "60s", .min = 1, .max = 86400000,
     .doc = "a keep-alive connection without a request for this long is closed"},
    {"max_connections", HS_CFG_UINT, offsetof(struct hs_http_server_config, max_connections),
     "1024", .min = 1, .max = 65536,
     .doc = "open connections; at the limit the connection idle longest is closed for a new one, "
            "or else the new one is closed at once"},
    {"max_connections_per_client", HS_CFG_UINT,
     offsetof(struct hs_http_server_config, max_connections_per_client), "0", .min = 0,
     .max = 65536,
     .doc = "open connections from one client address (IPv6: one /64); more are closed at once; "
            "0 = half of max_connections; max_connections = no cap"},
    {"busy_timeout", HS_CFG_DURATION, offsetof(struct hs_http_server_config, busy_timeout_ms), "5s",
     .min = 1, .max = 3600000,
     .doc = "once 3/4 of max_connections are open: the longest wait for a request's headers "
            "and between requests, in place of read_timeout and idle_timeout"},
    {"max_header_size", HS_CFG_SIZE, offsetof(struct hs_http_server_config, max_header_size),
     "64KiB", .min = 1024, .max = 1 << 20,
     .doc = "bytes of the request line and headers; larger is a 431"},
    {"max_concurrent_streams", HS_CFG_UINT,
     offsetof(struct hs_http_server_config, max_concurrent_streams), "100", .min = 1,
     .max = 10000,
     .doc = "HTTP/2 requests in flight on one connection (SETTINGS_MAX_CONCURRENT_STREAMS)"},
    {"tls", HS_CFG_SECTION, offsetof(struct hs_http_server_config, tls), NULL,
     .sub = hs_tls_server_fields, .has_presence = true,
     .presence_offset = offsetof(struct hs_http_server_config, tls_enabled),
     .doc = "serve TLS only: HTTP/2 by ALPN \"h2\", else HTTP/1.1 (gRPC ports: h2 only); files "
            "reloaded on SIGHUP"},
    {0},
};

int hs_http_server_config_check(const struct hs_http_server_config *cf,
                                const struct hs_config_node *listener, const char *path,
                                struct hs_error *err)
{
    if (!cf->tls_enabled)
        return 0;
    return hs_tls_server_check(&cf->tls, hs_config_get(listener, "tls"), path, err);
}

static double gauge_open(void *ud)
{
    const struct hs_http_server *s = ud;
    return (double)s->nconns;
}

/* Per listener: open connections, refusals by reason, idle connections closed for newcomers,
 * responses by status class. */
static void server_metrics(struct hs_http_server *s, struct hs_metrics *m)
{
    static const char *const refusals[HS_HTTP_REFUSE_COUNT] = {
        [HS_HTTP_REFUSE_MAX] = "max_connections",
        [HS_HTTP_REFUSE_PER_CLIENT] = "max_connections_per_client",
        [HS_HTTP_REFUSE_FILE_LIMIT] = "file_limit",
    };
    if (!m)
        return;
    char labels[200];
    snprintf(labels, sizeof(labels), "server=\"%s\"", s->name);
    s->metrics = m;
    hs_metrics_gauge(m, "http_server_connections_open", "Open client connections", labels,
                     gauge_open, s);
    char l2[260];
    for (int i = HS_HTTP_REFUSE_MAX; i < HS_HTTP_REFUSE_COUNT; i++) {
        snprintf(l2, sizeof(l2), "%s,reason=\"%s\"", labels, refusals[i]);
        s->refused[i] = hs_metrics_counter(
            m, "http_server_connections_refused_total",
            "Connections closed at once: max_connections open and none idle, "
            "max_connections_per_client from the address, or the file limit's share used",
            l2);
    }
    s->reclaimed =
        hs_metrics_counter(m, "http_server_connections_reclaimed_total",
                           "Idle connections closed to admit a new one at max_connections", labels);
    for (int i = 0; i < 5; i++) {
        snprintf(l2, sizeof(l2), "%s,code_class=\"%dxx\"", labels, i + 1);
        s->responses[i] = hs_metrics_counter(m, "http_server_responses_total",
                                             "Answers sent, by status class (gRPC answers are "
                                             "200: their status is in the trailers)",
                                             l2);
    }
}

/* A config filled by hand (tests, bench_sink) instead of decoded may leave a limit 0: a size or
 * a count that cannot be 0 (its row's minimum is above it) then takes its row's default,
 * decoded from the table as every config is; a duration left 0 means none. */
static void apply_config(struct hs_http_server *s, const struct hs_http_server_config *cf)
{
    s->conf = *cf;
    s->conf.endpoint = NULL;
    s->conf.tls = (struct hs_tls_server_config){0}; /* the caller's strings; s->tls has copies */
    struct hs_http_server_config def = {0};
    struct hs_error err = {0};
    hs_config_decode(hs_http_server_fields_common, NULL, &def, "", &err);
    for (const struct hs_config_field *f = hs_http_server_fields_common; f->name; f++) {
        if (f->min <= 0 || (f->type != HS_CFG_SIZE && f->type != HS_CFG_UINT))
            continue;
        size_t n = f->type == HS_CFG_SIZE ? sizeof(uint64_t) : sizeof(uint32_t);
        uint8_t *v = (uint8_t *)&s->conf + f->offset;
        static const uint8_t zero[sizeof(uint64_t)];
        if (memcmp(v, zero, n) == 0)
            memcpy(v, (const uint8_t *)&def + f->offset, n);
    }
    hs_config_free_fields(hs_http_server_fields_common, &def);
    hs_error_free(&err);
    s->conf.max_connections_per_client =
        HS_MIN(s->conf.max_connections_per_client, s->conf.max_connections);
}

int hs_http_server_start(uv_loop_t *loop, const struct hs_http_server_opts *opts,
                         struct hs_http_server **out, struct hs_error *err)
{
    const char *name = opts->name ? opts->name : "http";
    const struct hs_http_server_config *cf = opts->config;
    char host[256];
    uint16_t port;
    if (!cf || hs_parse_endpoint(cf->endpoint, host, sizeof(host), &port) != 0) {
        hs_error_addf(err, "%s: \"%s\" is not an endpoint (host:port, [v6]:port or :port)", name,
                      cf && cf->endpoint ? cf->endpoint : "");
        return HS_EINVAL;
    }
    hs_http1_setup();
    struct hs_tls_server *tls = NULL;
    /* the files are loaded before the socket exists, so a bad one leaves nothing open */
    int rc = cf->tls_enabled
                 ? hs_tls_server_new(&cf->tls, name,
                                     opts->versions == HS_HTTP_H2C_ONLY ? HS_TLS_ALPN_H2_ONLY
                                                                        : HS_TLS_ALPN_H2_HTTP1,
                                     opts->metrics, &tls, err)
                 : 0;
    if (rc)
        return rc;
    int fd = -1;
    rc = hs_http_listen_socket(loop, host, port, &fd);
    if (rc) {
        hs_tls_server_free(tls);
        hs_error_addf(err, "%s: cannot listen on %s: %s", name, cf->endpoint, uv_strerror(rc));
        return rc;
    }
    struct hs_http_server *s = hs_xcalloc(1, sizeof(*s));
    s->tls = tls;
    s->loop = loop;
    s->name = hs_xstrdup(name);
    s->handler = opts->handler;
    s->on_headers = opts->on_headers;
    s->on_too_large = opts->on_too_large;
    s->framing = opts->framing;
    s->ud = opts->ud;
    s->versions = opts->versions;
    s->h1_proto = &hs_http1_proto;
    s->h2_proto = &hs_http2_proto;
    s->fd_reserve = opts->fd_reserve;
    hs_queue_init(&s->conns);
    hs_queue_init(&s->idle);
    s->full_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 3);
    s->busy_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 3);
    apply_config(s, cf);
    server_metrics(s, opts->metrics);
    if ((rc = hs_http_transport_start(s, fd)) != 0) { /* s is freed */
        hs_error_addf(err, "%s: cannot listen on %s: %s", name, cf->endpoint, uv_strerror(rc));
        return rc;
    }
    if (s->tls)
        hs_log_info(s->name, "TLS on port %d (%s%s)", s->port, cf->tls.cert_file,
                    cf->tls.client_ca_file ? ", client certificates required" : "");
    *out = s;
    return 0;
}

int hs_http_server_port(const struct hs_http_server *s)
{
    return s ? s->port : 0;
}

void hs_http_server_close(struct hs_http_server *s, void (*done)(void *ud), void *ud)
{
    if (s->closing) {
        hs_log_error(s->name, "hs_http_server_close called twice; the first done will fire");
        return;
    }
    hs_http_transport_close(s, done, ud);
}

/* ---- the request API -------------------------------------------------------------------- */

const struct hs_str *hs_http_request_header(const struct hs_http_request *req, const char *name)
{
    for (size_t i = 0; i < req->header_count; i++)
        if (hs_str_ieq(req->headers[i].name, name))
            return &req->headers[i].value;
    return NULL;
}

bool hs_http_media_type_is(const struct hs_str *v, const char *want)
{
    size_t n = 0;
    while (n < v->len && v->ptr[n] != ';')
        n++;
    while (n > 0 && (v->ptr[n - 1] == ' ' || v->ptr[n - 1] == '\t'))
        n--;
    size_t s = 0;
    while (s < n && (v->ptr[s] == ' ' || v->ptr[s] == '\t'))
        s++;
    return hs_str_ieq((struct hs_str){v->ptr + s, n - s}, want);
}

void hs_http_respond_trailers(struct hs_http_request *req, int status, const char *content_type,
                              const struct hs_http_header *extra, size_t extra_count,
                              const void *body, size_t body_len,
                              const struct hs_http_header *trailers, size_t trailer_count)
{
    if (req->stream)
        hs_http2_respond(req, status, content_type, extra, extra_count, body, body_len, trailers,
                         trailer_count);
    else
        hs_http1_respond(req, status, content_type, extra, extra_count, body, body_len, trailers,
                         trailer_count);
}

void hs_http_respond(struct hs_http_request *req, int status, const char *content_type,
                     const struct hs_http_header *extra, size_t extra_count, const void *body,
                     size_t body_len)
{
    hs_http_respond_trailers(req, status, content_type, extra, extra_count, body, body_len, NULL,
                             0);
}

void hs_http_respond_text(struct hs_http_request *req, int status, const char *text)
{
    hs_http_respond(req, status, "text/plain; charset=utf-8", NULL, 0, text, strlen(text));
}

int hs_http_request_take_body(struct hs_http_request *req, struct hs_buf *out)
{
    struct hs_buf *b = req->stream ? hs_http2_body(req) : hs_http1_body(req);
    if (req->body_len == 0 || b->data != req->body || b->len != req->body_len)
        return HS_ENOENT;
    *out = *b;
    *b = (struct hs_buf){0}; /* the server frees a big body after its request anyway */
    return 0;
}
