/* http_server.c: the HTTP listener: binding an endpoint, accepting within max_connections, and
 * a close that waits for every handle. Connections (parsing, limits, timeouts, responses) are
 * in http_conn.c, HTTP/2 in http2.c. */
#include "http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/errors.h"
#include "http_server_int.h"
#include "core/metrics.h"

#define HS_HTTP_BACKLOG 511
/* http_parser's own header limit is process-wide; ours is per server and always lower, so the
 * parser's only catches what our count of stored bytes does not see (padding whitespace). */
#define HS_HTTP_PARSER_HEADER_CAP (2u << 20)

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

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {304, "Not Modified"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {411, "Length Required"},
    {413, "Content Too Large"},
    {415, "Unsupported Media Type"},
    {417, "Expectation Failed"},
    {426, "Upgrade Required"},
    {422, "Unprocessable Content"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

const char *hs_http_reason(int status)
{
    for (size_t i = 0; i < HS_ARRAY_SIZE(reasons); i++)
        if (reasons[i].status == status)
            return reasons[i].reason;
    if (status >= 200 && status < 300)
        return "OK";
    if (status >= 400 && status < 500)
        return "Bad Request";
    return status >= 500 && status < 600 ? "Internal Server Error" : "Unknown";
}

static pthread_once_t parser_once = PTHREAD_ONCE_INIT;

static void parser_setup(void)
{
    http_parser_set_max_header_size(HS_HTTP_PARSER_HEADER_CAP);
}

/* One socket, bound and listening, or a negative libuv code (libuv's are -errno here). */
static int try_listen(const struct addrinfo *ai, int *out)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int on = 1, off = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    /* [::] also takes IPv4, so ":port" means every address of both families */
    if (ai->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, HS_HTTP_BACKLOG) != 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

/* Binds the first address that works: IPv4 first for a name (as Go does, so "localhost" serves
 * 127.0.0.1 clients), the dual-stack [::] first for an empty host. The socket is made before any
 * libuv handle, so a failure leaves nothing in the loop. */
static int open_endpoint(uv_loop_t *loop, const char *host, uint16_t port, int *fd)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    char service[8];
    snprintf(service, sizeof(service), "%u", (unsigned)port);
    uv_getaddrinfo_t req;
    int rc = uv_getaddrinfo(loop, &req, NULL, host[0] ? host : NULL, service, &hints);
    if (rc)
        return rc;
    int first = host[0] ? AF_INET : AF_INET6;
    rc = UV_EADDRNOTAVAIL;
    for (int pass = 0; pass < 2; pass++) {
        for (struct addrinfo *ai = req.addrinfo; ai; ai = ai->ai_next) {
            if ((ai->ai_family == first) != (pass == 0))
                continue;
            int r = try_listen(ai, fd);
            if (r == 0) {
                uv_freeaddrinfo(req.addrinfo);
                return 0;
            }
            if (rc == UV_EADDRNOTAVAIL || rc == UV_EAFNOSUPPORT)
                rc = r; /* "in use" says more than "this family is not here" */
        }
    }
    uv_freeaddrinfo(req.addrinfo);
    return rc;
}

static void log_listening(struct hs_http_server *s)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        uv_ip6_name(a, ip, sizeof(ip));
        s->port = ntohs(a->sin6_port);
        hs_log_info(s->name, "listening on [%s]:%d", ip, s->port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, ip, sizeof(ip));
        s->port = ntohs(a->sin_port);
        hs_log_info(s->name, "listening on %s:%d", ip, s->port);
    }
}

/* Where TLS refusals are counted for servers started without a registry (the receivers): the
 * first one given, cleared when its server goes. */
static struct hs_metrics *fallback_metrics;
static const struct hs_http_server *fallback_owner;

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

void hs_http_server_count_response(struct hs_http_server *s, int status)
{
    if (s->metrics && status >= 100 && status < 600)
        hs_counter_add(s->responses[status / 100 - 1], 1);
}

static void server_free(struct hs_http_server *s)
{
    if (s->declared)
        hs_http_server_declare(s, false);
    hs_http_peers_free(&s->peers);
    if (s->metrics)
        hs_metrics_gauge_remove(s->metrics, s);
    if (fallback_owner == s)
        fallback_metrics = NULL, fallback_owner = NULL;
    hs_tls_server_free(s->tls);
    hs_buf_free(&s->scratch);
    free(s->name);
    free(s);
}

static void on_failed_close(uv_handle_t *h)
{
    server_free(h->data);
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct hs_http_server *s = listener->data;
    if (status < 0) {
        uint32_t suppressed = 0;
        if (hs_ratelimit_allow(&s->full_log, hs_now_ms(), &suppressed))
            hs_log_warn(s->name, "accept failed: %s", uv_strerror(status));
        return;
    }
    if (!s->closing)
        hs_http_conn_accept(s);
}

/* Zero means "use the default" for the limits, and "none" for the timeouts, for callers that
 * fill the struct by hand instead of through the field table. */
static void apply_config(struct hs_http_server *s, const struct hs_http_server_config *cf)
{
    s->conf = *cf;
    s->conf.endpoint = NULL;
    s->conf.tls = (struct hs_tls_server_config){0}; /* the caller's strings; s->tls has copies */
    if (!s->conf.max_request_body_size)
        s->conf.max_request_body_size = 20u << 20;
    if (!s->conf.max_connections)
        s->conf.max_connections = 1024;
    if (!s->conf.max_header_size)
        s->conf.max_header_size = 64u << 10;
    if (!s->conf.max_concurrent_streams)
        s->conf.max_concurrent_streams = 100;
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
    pthread_once(&parser_once, parser_setup);
    struct hs_metrics *m = opts->metrics ? opts->metrics : fallback_metrics;
    struct hs_tls_server *tls = NULL;
    /* the files are loaded before the socket exists, so a bad one leaves nothing open */
    int rc = cf->tls_enabled ? hs_tls_server_new(&cf->tls, name,
                                                 opts->versions == HS_HTTP_H2C_ONLY
                                                     ? HS_TLS_ALPN_H2_ONLY
                                                     : HS_TLS_ALPN_H2_HTTP1,
                                                 m, &tls, err)
                             : 0;
    if (rc)
        return rc;
    int fd = -1;
    rc = open_endpoint(loop, host, port, &fd);
    if (rc) {
        hs_tls_server_free(tls);
        hs_error_addf(err, "%s: cannot listen on %s: %s", name, cf->endpoint, uv_strerror(rc));
        return rc;
    }
    struct hs_http_server *s = hs_xcalloc(1, sizeof(*s));
    s->tls = tls;
    if (opts->metrics && !fallback_metrics) {
        fallback_metrics = opts->metrics;
        fallback_owner = s;
    }
    s->loop = loop;
    s->name = hs_xstrdup(name);
    s->handler = opts->handler;
    s->on_headers = opts->on_headers;
    s->on_too_large = opts->on_too_large;
    s->ud = opts->ud;
    s->versions = opts->versions;
    s->fd_reserve = opts->fd_reserve;
    s->full_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 3);
    s->busy_log = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 3);
    apply_config(s, cf);
    server_metrics(s, opts->metrics);
    if ((rc = uv_tcp_init(loop, &s->listener)) != 0) {
        close(fd);
        server_free(s);
        goto fail;
    }
    s->listener.data = s;
    if ((rc = uv_tcp_open(&s->listener, fd)) != 0) {
        close(fd);
        uv_close((uv_handle_t *)&s->listener, on_failed_close);
        goto fail;
    }
    if ((rc = uv_listen((uv_stream_t *)&s->listener, HS_HTTP_BACKLOG, on_connection)) != 0) {
        uv_close((uv_handle_t *)&s->listener, on_failed_close); /* closes fd */
        goto fail;
    }
    log_listening(s);
    hs_http_server_declare(s, true);
    s->declared = true;
    if (s->tls)
        hs_log_info(s->name, "TLS on port %d (%s%s)", s->port, cf->tls.cert_file,
                    cf->tls.client_ca_file ? ", client certificates required" : "");
    *out = s;
    return 0;
fail:
    hs_error_addf(err, "%s: cannot listen on %s: %s", name, cf->endpoint, uv_strerror(rc));
    return rc;
}

int hs_http_server_port(const struct hs_http_server *s)
{
    return s ? s->port : 0;
}

void hs_http_server_maybe_done(struct hs_http_server *s)
{
    if (!s->closing || !s->listener_closed || s->nconns || s->nrejects)
        return;
    void (*done)(void *) = s->done;
    void *ud = s->done_ud;
    server_free(s);
    if (done)
        done(ud);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct hs_http_server *s = h->data;
    s->listener_closed = true;
    hs_http_server_maybe_done(s);
}

void hs_http_server_close(struct hs_http_server *s, void (*done)(void *ud), void *ud)
{
    if (s->closing) {
        hs_log_error(s->name, "hs_http_server_close called twice; the first done will fire");
        return;
    }
    s->closing = true;
    s->done = done;
    s->done_ud = ud;
    uv_close((uv_handle_t *)&s->listener, on_listener_closed);
    /* closing a connection only schedules its close callbacks, so the list stays intact */
    for (struct hs_http_conn *c = s->conns; c; c = c->next)
        hs_http_conn_server_closing(c);
}
