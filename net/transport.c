/* transport.c: the HTTP server's transport: the listening socket, each connection's reads and
 * writes (through TLS on a TLS listener), its one timer, admission (http_limits.c), the choice
 * of protocol by ALPN or by the first bytes, and the close that waits for the client's EOF so a
 * last error answer is not lost to a reset. The protocols (http1.c, http2.c) sit above it and
 * are reached only through their struct hs_http_proto. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/common.h"
#include "core/errors.h"
#include "net/http_server_int.h"

#define HS_HTTP_BACKLOG 511

struct wreq {
    uv_write_t req;
    struct hs_http_conn *conn;
    size_t len;
    char data[];
};

static void conn_arm(struct hs_http_conn *c, uint64_t ms, uv_timer_cb cb)
{
    if (c->closing)
        return;
    c->timer_cb = ms ? cb : NULL;
    if (ms)
        uv_timer_start(&c->timer, cb, ms, 0);
    else
        uv_timer_stop(&c->timer);
}

/* Nothing more reaches the protocol. */
static void conn_stop(struct hs_http_conn *c)
{
    c->stop = true;
    if (c->proto && c->proto->stop)
        c->proto->stop(c);
}

static void maybe_done(struct hs_http_server *s);

static void on_handle_closed(uv_handle_t *h)
{
    struct hs_http_conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    struct hs_http_server *s = c->srv;
    hs_queue_remove(&c->link);
    s->nconns--;
    if (c->proto)
        c->proto->free(c);
    hs_tls_conn_free(c->tls);
    free(c);
    maybe_done(s);
}

/* Pending writes and a pending shutdown get their callbacks (UV_ECANCELED) before the close
 * callbacks, so the connection outlives them. */
static void conn_close(struct hs_http_conn *c)
{
    if (c->closing)
        return;
    conn_stop(c);
    hs_http_conn_idle(c, false);
    c->closing = true;
    hs_http_server_unslot(c); /* uv_close closes the socket now: its slot is free */
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct hs_http_conn *c = h->data;
    /* libuv on Unix calls alloc, read and the read callback in sequence, one stream at a time,
     * and we never keep the buffer after the callback, so one buffer serves every connection */
    buf->base = c->srv->rbuf;
    buf->len = sizeof(c->srv->rbuf);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void conn_read(struct hs_http_conn *c, bool on)
{
    if (c->closing || c->eof || c->reading == on)
        return;
    if (!on) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    } else if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) {
        c->reading = true;
    } else {
        conn_close(c);
    }
}

/* The client read most of what we wrote: the protocol goes on, then reading does. */
static void conn_resume(struct hs_http_conn *c)
{
    c->write_paused = false;
    if (c->proto)
        c->proto->writable(c);
    if (!c->write_paused && !c->closing && !c->stop)
        conn_read(c, true);
}

static void on_write(uv_write_t *req, int status)
{
    struct wreq *w = hs_container_of(req, struct wreq, req);
    struct hs_http_conn *c = w->conn;
    c->write_pending -= w->len;
    free(w);
    if (status < 0) {
        if (status != UV_ECANCELED)
            hs_log_debug(c->srv->name, "%s: write failed: %s", c->peer, uv_strerror(status));
        conn_close(c);
    } else if (c->write_paused && c->write_pending <= HS_HTTP_WRITE_LOW) {
        conn_resume(c);
    }
}

/* One uv_write of head + body as they are (no TLS), copied so the caller's memory is free at
 * once. */
static void conn_write_raw(struct hs_http_conn *c, const void *head, size_t hlen, const void *body,
                           size_t blen)
{
    if (c->closing)
        return;
    size_t len = hlen + blen;
    struct wreq *w = malloc(sizeof(*w) + len);
    if (!w) {
        hs_log_error(c->srv->name, "%s: out of memory for a %zu-byte response", c->peer, len);
        conn_close(c);
        return;
    }
    w->conn = c;
    w->len = len;
    memcpy(w->data, head, hlen);
    if (blen)
        memcpy(w->data + hlen, body, blen);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc) {
        free(w);
        conn_close(c);
        return;
    }
    c->write_pending += len;
}

/* Sends what TLS has produced (records, alerts, close_notify) in one write. */
static void conn_tls_flush(struct hs_http_conn *c)
{
    size_t len = hs_tls_conn_out_len(c->tls);
    if (!len || c->closing)
        return;
    struct wreq *w = malloc(sizeof(*w) + len);
    if (!w) {
        hs_log_error(c->srv->name, "%s: out of memory for %zu bytes of TLS", c->peer, len);
        conn_close(c);
        return;
    }
    w->conn = c;
    w->len = hs_tls_conn_out_take(c->tls, w->data, len);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        free(w);
        conn_close(c);
        return;
    }
    c->write_pending += w->len;
}

void hs_http_conn_write(struct hs_http_conn *c, const void *head, size_t hlen, const void *body,
                        size_t blen)
{
    if (!c->tls) {
        conn_write_raw(c, head, hlen, body, blen);
        return;
    }
    if (c->closing)
        return;
    if (hs_tls_conn_write(c->tls, head, hlen) != 0 ||
        (blen && hs_tls_conn_write(c->tls, body, blen) != 0)) {
        hs_log_debug(c->srv->name, "%s: TLS write failed", c->peer);
        conn_close(c);
        return;
    }
    conn_tls_flush(c);
}

static void on_linger_timer(uv_timer_t *t)
{
    conn_close(t->data);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct hs_http_conn *c = req->data;
    if (status < 0 || c->eof || c->srv->closing)
        conn_close(c);
}

/* After the last response: flush it, send FIN, then read and drop until the client's EOF (or a
 * timeout). Closing at once could turn unread input into a reset that destroys the response. */
void hs_http_conn_end(struct hs_http_conn *c)
{
    if (c->closing || c->draining)
        return;
    conn_stop(c);
    hs_http_conn_idle(c, false);
    c->draining = true;
    c->write_paused = false;
    if (c->tls) { /* so the client can tell our end from a truncation */
        hs_tls_conn_close_notify(c->tls);
        conn_tls_flush(c);
        if (c->closing)
            return;
    }
    c->shutdown.data = c;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        conn_close(c);
        return;
    }
    conn_read(c, true);
    uint64_t linger = c->srv->conf.read_timeout_ms;
    conn_arm(c, linger && linger < HS_HTTP_LINGER_MS ? linger : HS_HTTP_LINGER_MS, on_linger_timer);
}

static void on_idle_timer(uv_timer_t *t)
{
    struct hs_http_conn *c = t->data;
    if (c->tls && !hs_tls_conn_established(c->tls)) {
        hs_tls_server_refused(c->srv->tls, c->peer, "timeout",
                              "no complete handshake within read_timeout");
        conn_close(c);
        return;
    }
    hs_log_debug(c->srv->name, "%s: idle for idle_timeout, closed", c->peer);
    conn_close(c);
}

/* The client is done sending (EOF, or TLS close_notify). */
static void conn_eof(struct hs_http_conn *c, bool clean)
{
    /* A client may half-close after its last request: let our answers out first (the
     * shutdown's callback closes, once they are written). */
    if (clean && c->write_pending) {
        c->eof = true;
        if (c->reading)
            uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
        hs_http_conn_end(c);
    } else {
        conn_close(c);
    }
}

/* Hands the connection to p: `held` chose it, `rest` follows. */
static void conn_start(struct hs_http_conn *c, const struct hs_http_proto *p, const uint8_t *held,
                       size_t hlen, const uint8_t *rest, size_t rlen)
{
    c->proto = p;
    if (p->start(c, held, hlen) != 0) {
        c->proto = NULL; /* it holds nothing to stop or free */
        conn_close(c);
        return;
    }
    if (rlen && !c->stop && !c->closing)
        p->recv(c, rest, rlen);
}

/* Sorts a new connection by its first bytes: those HTTP/2 recognises (its client preface, h2c
 * with prior knowledge) give it HTTP/2, anything else HTTP/1.1. Bytes that may still be the
 * preface are held back. */
static void conn_choose(struct hs_http_conn *c, const uint8_t *data, size_t len)
{
    const struct hs_http_proto *h2 = c->srv->h2_proto;
    size_t take = HS_MIN(len, sizeof(c->first) - c->first_len);
    memcpy(c->first + c->first_len, data, take);
    int says = h2->sniff(c->first, c->first_len + take);
    if (says == 0) {
        if (!c->first_len) /* the rest has the time of a request's headers */
            conn_arm(c, hs_http_server_header_ms(c->srv), on_idle_timer);
        c->first_len += take; /* so far it may be: wait for the rest */
        return;
    }
    if (says > 0) {
        uv_timer_stop(&c->timer);
        conn_start(c, h2, c->first, c->first_len + take, data + take, len - take);
        return;
    }
    /* the bytes held back are the start of an HTTP/1.1 request: they go first */
    size_t held = c->first_len;
    c->first_len = 0;
    conn_start(c, c->srv->h1_proto, c->first, held, data, len);
}

/* Plaintext bytes from the client, to the protocol, or to the choice of one. */
static void conn_input(struct hs_http_conn *c, const char *data, size_t len)
{
    if (c->proto) {
        c->proto->recv(c, (const uint8_t *)data, len);
        return;
    }
    hs_http_conn_idle(c, false); /* a request (or the HTTP/2 preface) is arriving */
    conn_choose(c, (const uint8_t *)data, len);
}

/* A client that speaks plain HTTP to a TLS port is told so in plain HTTP, as Go's net/http
 * does, instead of a handshake error it cannot read. */
static void conn_tls_plaintext(struct hs_http_conn *c)
{
    static const char answer[] = "HTTP/1.0 400 Bad Request\r\n"
                                 "Content-Type: text/plain; charset=utf-8\r\n"
                                 "Connection: close\r\n\r\n"
                                 "400 this port speaks TLS (client sent plain HTTP)\n";
    hs_tls_server_refused(c->srv->tls, c->peer, "plaintext", "the client sent plain HTTP");
    conn_write_raw(c, answer, sizeof(answer) - 1, NULL, 0);
    hs_tls_conn_free(c->tls); /* the end must not add close_notify to a plaintext answer */
    c->tls = NULL;
    hs_http_conn_end(c);
}

/* The handshake is done: the protocol comes from ALPN ("h2"), else from the first bytes. */
static bool conn_tls_established(struct hs_http_conn *c)
{
    conn_arm(c, hs_http_server_idle_ms(c->srv), on_idle_timer);
    if (!hs_tls_conn_alpn_h2(c->tls)) {
        hs_http_conn_idle(c, true);
        return true;
    }
    conn_start(c, c->srv->h2_proto, NULL, 0, NULL, 0);
    return !c->closing;
}

/* Ciphertext from the client: the handshake, then records whose plaintext goes to
 * conn_input. */
static void conn_tls_input(struct hs_http_conn *c, const char *data, size_t len)
{
    if (!c->tls_seen) {
        c->tls_seen = true;
        if ((uint8_t)data[0] != 0x16) { /* not a TLS handshake record */
            conn_tls_plaintext(c);
            return;
        }
    }
    if (hs_tls_conn_feed(c->tls, data, len) != 0) {
        conn_close(c);
        return;
    }
    if (!hs_tls_conn_established(c->tls)) {
        int rc = hs_tls_conn_handshake(c->tls);
        conn_tls_flush(c); /* our flight, or the alert that tells the client why */
        if (rc < 0) {
            hs_tls_server_refused(c->srv->tls, c->peer, hs_tls_conn_reason(c->tls),
                                  hs_tls_conn_detail(c->tls));
            hs_http_conn_end(c);
            return;
        }
        if (rc == 0 || c->closing || !conn_tls_established(c))
            return;
    }
    while (!c->closing && !c->stop) {
        ssize_t n = hs_tls_conn_read(c->tls, c->srv->pbuf, sizeof(c->srv->pbuf));
        if (n == 0)
            break;
        if (n < 0) {
            conn_tls_flush(c);
            conn_eof(c, true);
            return;
        }
        conn_input(c, c->srv->pbuf, (size_t)n);
    }
    if (c->tls && !c->closing)
        conn_tls_flush(c); /* e.g. a key update's answer */
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct hs_http_conn *c = st->data;
    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        if (c->tls && !c->stop && !hs_tls_conn_established(c->tls))
            hs_tls_server_refused(c->srv->tls, c->peer, "eof",
                                  "the client closed during the handshake");
        conn_eof(c, nread == UV_EOF);
        return;
    }
    if (c->stop)
        return; /* draining */
    if (c->tls)
        conn_tls_input(c, buf->base, (size_t)nread);
    else
        conn_input(c, buf->base, (size_t)nread);
}

/* ---- accepting ---------------------------------------------------------------------------- */

static void peer_name(struct hs_http_conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN];
    snprintf(c->peer, sizeof(c->peer), "?");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    hs_http_peer_key((const struct sockaddr *)&ss, c->peer_key);
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        uv_ip6_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    } else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    }
}

/* The server turned busy: a connection waiting for headers or between requests gets at most
 * busy_timeout more. */
static void conn_busy(struct hs_http_conn *c)
{
    if (c->closing || c->draining || !c->timer_cb || !uv_is_active((uv_handle_t *)&c->timer))
        return;
    bool headers = !c->proto || (c->proto->awaits_headers && c->proto->awaits_headers(c));
    bool handshake = c->tls && !hs_tls_conn_established(c->tls);
    uint64_t busy = c->srv->conf.busy_timeout_ms;
    if ((c->idle || headers || handshake) && busy && uv_timer_get_due_in(&c->timer) > busy)
        conn_arm(c, busy, c->timer_cb);
}

/* Closes an idle connection to free its slot. */
static void conn_reclaim(struct hs_http_conn *c)
{
    if (c->proto && c->proto->reclaim)
        c->proto->reclaim(c);
    conn_close(c);
}

static bool conn_admit(struct hs_http_server *s, struct hs_http_conn *c)
{
    enum hs_http_refusal why = hs_http_limits_check(s, c);
    if (why == HS_HTTP_REFUSE_PER_CLIENT) {
        hs_http_limits_refuse(s, c, why);
        return false;
    }
    if (why != HS_HTTP_ADMITTED) {
        struct hs_http_conn *victim = hs_http_limits_victim(s, c);
        if (!victim) {
            hs_http_limits_refuse(s, c, why);
            return false;
        }
        conn_reclaim(victim);
    }
    if (hs_http_limits_take(s, c)) /* c is not linked yet: its first timer is armed busy */
        for (struct hs_queue *q = hs_queue_head(&s->conns); q != &s->conns; q = q->next)
            conn_busy(hs_container_of(q, struct hs_http_conn, link));
    return true;
}

static void on_refused_closed(uv_handle_t *h)
{
    struct hs_http_conn *c = h->data;
    struct hs_http_server *s = c->srv;
    free(c);
    s->nrejects--;
    maybe_done(s);
}

static void conn_accept(struct hs_http_server *s)
{
    struct hs_http_conn *c = hs_xcalloc(1, sizeof(*c));
    c->srv = s;
    hs_queue_init(&c->idle_link);
    if (uv_tcp_init(s->loop, &c->tcp) != 0) {
        free(c);
        return;
    }
    c->tcp.data = c;
    /* accepted either way, so a refused client learns at once, not by a timeout */
    bool ok = uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp) == 0;
    if (ok) {
        peer_name(c);
        ok = conn_admit(s, c);
    }
    if (!ok) {
        s->nrejects++;
        uv_close((uv_handle_t *)&c->tcp, on_refused_closed);
        return;
    }
    uv_timer_init(s->loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 2;
    hs_queue_insert_head(&s->conns, &c->link);
    s->nconns++;
    uv_tcp_nodelay(&c->tcp, 1);
    if (s->tls && !(c->tls = hs_tls_conn_new(s->tls))) {
        hs_log_error(s->name, "%s: out of memory for a TLS connection", c->peer);
        conn_close(c);
        return;
    }
    conn_read(c, true);
    /* the handshake is bytes a slow client could dribble: it has read_timeout, as a request */
    uint64_t idle = hs_http_server_idle_ms(s), head = hs_http_server_header_ms(s);
    if (!c->tls)
        hs_http_conn_idle(c, true);
    conn_arm(c, c->tls && head && (!idle || head < idle) ? head : idle, on_idle_timer);
}

/* The server is closing: the connection ends now if it is between requests. */
static void conn_server_closing(struct hs_http_conn *c)
{
    if (c->closing)
        return;
    if (c->proto && !c->draining && c->proto->server_closing(c))
        return; /* the protocol ends it once its answers are out */
    if (c->draining || c->write_pending == 0)
        conn_close(c);
    else
        hs_http_conn_end(c); /* let the answers already made reach the client */
}

/* ---- the listener ------------------------------------------------------------------------- */

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
 * 127.0.0.1 clients), the dual-stack [::] first for an empty host. */
int hs_http_listen_socket(uv_loop_t *loop, const char *host, uint16_t port, int *fd)
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

void hs_http_server_free(struct hs_http_server *s)
{
    if (s->declared)
        hs_http_server_declare(s, false);
    hs_http_peers_free(&s->peers);
    if (s->metrics)
        hs_metrics_gauge_remove(s->metrics, s);
    hs_tls_server_free(s->tls);
    hs_buf_free(&s->scratch);
    free(s->name);
    free(s);
}

static void on_failed_close(uv_handle_t *h)
{
    hs_http_server_free(h->data);
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
        conn_accept(s);
}

int hs_http_transport_start(struct hs_http_server *s, int fd)
{
    int rc = uv_tcp_init(s->loop, &s->listener);
    if (rc) {
        close(fd);
        hs_http_server_free(s);
        return rc;
    }
    s->listener.data = s;
    if ((rc = uv_tcp_open(&s->listener, fd)) != 0)
        close(fd);
    else
        rc = uv_listen((uv_stream_t *)&s->listener, HS_HTTP_BACKLOG, on_connection);
    if (rc) {
        uv_close((uv_handle_t *)&s->listener, on_failed_close); /* closes fd once opened */
        return rc;
    }
    log_listening(s);
    hs_http_server_declare(s, true);
    s->declared = true;
    return 0;
}

static void maybe_done(struct hs_http_server *s)
{
    if (!s->closing || !s->listener_closed || s->nconns || s->nrejects)
        return;
    void (*done)(void *) = s->done;
    void *ud = s->done_ud;
    hs_http_server_free(s);
    if (done)
        done(ud);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct hs_http_server *s = h->data;
    s->listener_closed = true;
    maybe_done(s);
}

void hs_http_transport_close(struct hs_http_server *s, void (*done)(void *ud), void *ud)
{
    s->closing = true;
    s->done = done;
    s->done_ud = ud;
    uv_close((uv_handle_t *)&s->listener, on_listener_closed);
    /* closing a connection only schedules its close callbacks, so the list stays intact */
    for (struct hs_queue *q = hs_queue_head(&s->conns); q != &s->conns; q = q->next)
        conn_server_closing(hs_container_of(q, struct hs_http_conn, link));
}

/* ---- for the protocols -------------------------------------------------------------------- */

void hs_http_conn_close(struct hs_http_conn *c)
{
    conn_close(c);
}

void hs_http_conn_hold(struct hs_http_conn *c)
{
    c->write_paused = true;
    conn_read(c, false);
}

void hs_http_conn_await_request(struct hs_http_conn *c)
{
    hs_http_conn_idle(c, true);
    conn_arm(c, hs_http_server_idle_ms(c->srv), on_idle_timer);
}

void hs_http_conn_timer(struct hs_http_conn *c, uint64_t ms, uv_timer_cb cb)
{
    conn_arm(c, ms, cb);
}
