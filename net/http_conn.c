/* http_conn.c: one connection of the server: the transport (reads, writes, the close that waits
 * for the client's EOF so a last error response is not lost to a reset), the switch to HTTP/2 on
 * the client preface (http2.c), and HTTP/1.1: http_parser over what we read, requests answered
 * in order, limits (header and body size, timeouts, unread responses). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "http_server_int.h"

enum piece { PIECE_NONE, PIECE_URL, PIECE_FIELD, PIECE_VALUE };

struct wreq {
    uv_write_t req;
    struct hs_http_conn *conn;
    size_t len;
    char data[];
};

static const http_parser_settings parser_settings;

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

/* Stops parsing; http_parser asserts when paused in an error state, hence the check. */
static void stop_parser(struct hs_http_conn *c)
{
    c->stop = true;
    if (HTTP_PARSER_ERRNO(&c->parser) == HPE_OK)
        http_parser_pause(&c->parser, 1);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct hs_http_conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    struct hs_http_server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    hs_buf_free(&c->head);
    hs_buf_free(&c->body);
    hs_buf_free(&c->pending);
    free(c->fields);
    free(c->headers);
    hs_http2_free(c->h2);
    hs_tls_conn_free(c->tls);
    free(c);
    hs_http_server_maybe_done(s);
}

/* Pending writes and a pending shutdown get their callbacks (UV_ECANCELED) before the close
 * callbacks, so the connection outlives them. */
static void conn_close(struct hs_http_conn *c)
{
    if (c->closing)
        return;
    stop_parser(c);
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

static void conn_resume(struct hs_http_conn *c);

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
static void conn_write_raw(struct hs_http_conn *c, const void *head, size_t hlen,
                           const void *body, size_t blen)
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

/* head + body to the client, through TLS when the connection has it. */
static void conn_write(struct hs_http_conn *c, const void *head, size_t hlen, const void *body,
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

/* A header a handler passes must not split the response (CR, LF) or repeat what we set. */
static bool header_ok(const struct hs_http_header *h)
{
    if (!h->name.len || memchr(h->name.ptr, '\r', h->name.len) ||
        memchr(h->name.ptr, '\n', h->name.len) || memchr(h->name.ptr, ':', h->name.len) ||
        memchr(h->value.ptr, '\r', h->value.len) || memchr(h->value.ptr, '\n', h->value.len))
        return false;
    return !hs_str_ieq(h->name, "content-length") && !hs_str_ieq(h->name, "connection") &&
           !hs_str_ieq(h->name, "transfer-encoding");
}

static void conn_send(struct hs_http_conn *c, int status, const char *ctype,
                      const struct hs_http_header *extra, size_t nextra, const void *body,
                      size_t blen, bool keep)
{
    struct hs_buf *b = &c->srv->scratch;
    bool bodyless = status < 200 || status == 204 || status == 304;
    hs_http_server_count_response(c->srv, status);
    hs_buf_reset(b);
    int rc = hs_buf_printf(b, "HTTP/1.1 %d %s\r\n", status, hs_http_reason(status));
    if (ctype && !strpbrk(ctype, "\r\n"))
        rc |= hs_buf_printf(b, "Content-Type: %s\r\n", ctype);
    if (!bodyless)
        rc |= hs_buf_printf(b, "Content-Length: %zu\r\n", blen);
    rc |= hs_buf_printf(b, "Connection: %s\r\n", keep ? "keep-alive" : "close");
    for (size_t i = 0; i < nextra; i++) {
        if (!header_ok(&extra[i])) {
            hs_log_error(c->srv->name, "response header \"%.*s\" dropped: not allowed here",
                         (int)extra[i].name.len, extra[i].name.ptr);
            continue;
        }
        rc |= hs_buf_append(b, extra[i].name.ptr, extra[i].name.len);
        rc |= hs_buf_append(b, ": ", 2);
        rc |= hs_buf_append(b, extra[i].value.ptr, extra[i].value.len);
        rc |= hs_buf_append(b, "\r\n", 2);
    }
    rc |= hs_buf_append(b, "\r\n", 2);
    if (rc) {
        conn_close(c);
        return;
    }
    bool head_only = bodyless || c->parser.method == HTTP_HEAD;
    conn_write(c, b->data, b->len, body, head_only ? 0 : blen);
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
static void conn_end(struct hs_http_conn *c)
{
    if (c->closing || c->state == HS_HTTP_CONN_DRAIN)
        return;
    stop_parser(c);
    hs_http_conn_idle(c, false);
    c->state = HS_HTTP_CONN_DRAIN;
    c->write_paused = false;
    hs_buf_reset(&c->pending); /* not freed: the parser may be reading it right now */
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

/* An answer of ours (not the handler's): the request is abandoned and the connection ends. */
static void conn_fail(struct hs_http_conn *c, int status, const char *text)
{
    if (c->stop || c->closing)
        return;
    hs_log_debug(c->srv->name, "%s: %d %s", c->peer, status, text);
    conn_send(c, status, "text/plain; charset=utf-8", NULL, 0, text, strlen(text), false);
    conn_end(c);
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

static void on_read_timer(uv_timer_t *t)
{
    struct hs_http_conn *c = t->data;
    conn_fail(c, 408,
              "408 request timeout: the request did not arrive whole within "
              "read_timeout\n");
}

static void conn_parse_error(struct hs_http_conn *c, enum http_errno e)
{
    char text[160];
    if (e == HPE_HEADER_OVERFLOW) {
        conn_fail(c, 431, "431 the request line and headers are larger than max_header_size\n");
        return;
    }
    /* http_parser reports a chunk size past 2^64 as a bad Content-Length: say what it was */
    if (e == HPE_INVALID_CONTENT_LENGTH && c->headers_done && (c->parser.flags & F_CHUNKED)) {
        conn_fail(c, 400, "400 bad request: invalid chunk size: larger than 2^64-1\n");
        return;
    }
    snprintf(text, sizeof(text), "400 bad request: %s\n", http_errno_description(e));
    conn_fail(c, 400, text);
}

/* Runs the parser over data; returns the bytes it took. Less than len only when parsing was
 * paused for unread responses (the caller keeps the rest) or stopped (the rest is dropped). */
static size_t conn_parse(struct hs_http_conn *c, const char *data, size_t len)
{
    size_t off = 0;
    while (off < len && !c->stop && !c->write_paused && !c->closing) {
        size_t n = http_parser_execute(&c->parser, &parser_settings, data + off, len - off);
        off += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            if (c->stop)
                break;
            http_parser_pause(&c->parser, 0);
        } else if (e != HPE_OK) {
            conn_parse_error(c, e);
            break;
        }
        if (c->parser.upgrade) {
            /* We answered without switching protocols, so what follows is HTTP/1.1 again,
             * except after CONNECT, whose tunnel we never open. */
            if (c->parser.method == HTTP_CONNECT) {
                conn_end(c);
                break;
            }
            http_parser_init(&c->parser, HTTP_REQUEST);
            c->parser.data = c;
        } else if (n == 0 && e == HPE_OK) {
            conn_parse_error(c, HPE_UNKNOWN); /* no progress: never loop on it */
            break;
        }
    }
    return off;
}

static void conn_resume(struct hs_http_conn *c)
{
    c->write_paused = false;
    if (c->h2) {
        hs_http2_resume(c);
        return;
    }
    if (c->pending.len) {
        size_t used = conn_parse(c, (const char *)c->pending.data, c->pending.len);
        if (c->closing || c->stop) {
            hs_buf_free(&c->pending);
            return;
        }
        memmove(c->pending.data, c->pending.data + used, c->pending.len - used);
        c->pending.len -= used;
    }
    if (!c->write_paused)
        conn_read(c, true);
}

static bool detect_protocol(struct hs_http_conn *c, const char **data, size_t *len);

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
        conn_end(c);
    } else {
        conn_close(c);
    }
}

/* Plaintext bytes from the client, to HTTP/2 or the HTTP/1.1 parser. */
static void conn_input(struct hs_http_conn *c, const char *data, size_t len)
{
    if (c->h2) {
        hs_http2_recv(c, (const uint8_t *)data, len);
        return;
    }
    hs_http_conn_idle(c, false); /* a request (or the HTTP/2 preface) is arriving */
    if (!c->proto_known && !detect_protocol(c, &data, &len))
        return;
    if (c->pending.len) { /* parsing waits for unread responses: keep the bytes in order */
        if (hs_buf_append(&c->pending, data, len)) {
            conn_close(c);
            return;
        }
        if (!c->write_paused)
            conn_resume(c);
        return;
    }
    size_t used = conn_parse(c, data, len);
    if (used < len && c->write_paused && hs_buf_append(&c->pending, data + used, len - used))
        conn_close(c);
}

static void on_idle_timer(uv_timer_t *t);

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
    hs_tls_conn_free(c->tls); /* conn_end must not add close_notify to a plaintext answer */
    c->tls = NULL;
    conn_end(c);
}

/* The handshake is done: the protocol comes from ALPN ("h2"), else from the first bytes. */
static bool conn_tls_established(struct hs_http_conn *c)
{
    conn_arm(c, hs_http_server_idle_ms(c->srv), on_idle_timer);
    if (!hs_tls_conn_alpn_h2(c->tls)) {
        hs_http_conn_idle(c, true);
        return true;
    }
    c->proto_known = true;
    if (hs_http2_start(c, NULL, 0) != 0) {
        conn_close(c);
        return false;
    }
    return true;
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
            conn_end(c);
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

/* Sorts a new connection by its first bytes: the HTTP/2 client preface (h2c with prior
 * knowledge) hands it to http2.c, anything else is HTTP/1.1. Bytes that may still become the
 * preface are held back. Returns true when the bytes in data, len are left for the HTTP/1.1 parser. */
static bool detect_protocol(struct hs_http_conn *c, const char **data, size_t *len)
{
    static const char preface[] = HS_HTTP2_PREFACE;
    size_t take = HS_MIN(*len, HS_HTTP2_PREFACE_LEN - c->first_len);
    memcpy(c->first + c->first_len, *data, take);
    if (memcmp(c->first, preface, c->first_len + take) == 0) {
        if (c->first_len + take < HS_HTTP2_PREFACE_LEN) {
            if (!c->first_len) /* the rest has the time of a request's headers */
                conn_arm(c, hs_http_server_header_ms(c->srv), on_idle_timer);
            c->first_len += take; /* so far the preface: wait for the rest */
            return false;
        }
        c->proto_known = true;
        uv_timer_stop(&c->timer);
        if (hs_http2_start(c, (const uint8_t *)preface, HS_HTTP2_PREFACE_LEN) != 0) {
            conn_close(c);
            return false;
        }
        if (*len > take)
            hs_http2_recv(c, (const uint8_t *)*data + take, *len - take);
        return false;
    }
    c->proto_known = true;
    if (c->srv->versions == HS_HTTP_H2C_ONLY) {
        conn_fail(c, 426,
                  "426 this port serves gRPC, over HTTP/2 only (h2c with prior knowledge); "
                  "HTTP/1.1 is not served here\n");
        return false;
    }
    /* the bytes held back are the start of an HTTP/1.1 request: parse them first */
    if (c->first_len) {
        size_t held = c->first_len;
        c->first_len = 0;
        conn_parse(c, (const char *)c->first, held);
        if (c->stop || c->closing)
            return false;
    }
    return true;
}

/* ---- parser callbacks ----------------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
    struct hs_http_conn *c = p->data;
    hs_buf_reset(&c->head);
    hs_buf_reset(&c->body);
    c->url_len = c->head_bytes = c->nfields = 0;
    c->last_piece = PIECE_NONE;
    c->responded = c->end_after = c->answered_early = c->headers_done = false;
    c->state = HS_HTTP_CONN_REQUEST;
    hs_http_conn_idle(c, false);
    c->since_ms = uv_now(c->srv->loop);
    conn_arm(c, hs_http_server_header_ms(c->srv), on_read_timer);
    return 0;
}

static int new_field(struct hs_http_conn *c)
{
    if (c->nfields == HS_HTTP_MAX_HEADERS)
        return HS_E2BIG;
    if (c->nfields == c->fields_cap) {
        size_t cap = c->fields_cap ? c->fields_cap * 2 : 16;
        struct hs_http_field *f = realloc(c->fields, cap * sizeof(*f));
        if (!f)
            return HS_ENOMEM;
        c->fields = f;
        c->fields_cap = cap;
    }
    c->fields[c->nfields++] = (struct hs_http_field){c->head.len, 0, c->head.len, 0};
    return 0;
}

/* Stores a piece of the URL, a header name or a header value; http_parser may hand over each
 * in several pieces when it spans reads. */
static int head_add(struct hs_http_conn *c, enum piece kind, const char *at, size_t len)
{
    if (c->stop)
        return 0;
    if (kind == PIECE_FIELD && (memchr(at, ' ', len) || memchr(at, '\t', len))) {
        /* http_parser takes "Content-Length : 10" for a Content-Length; RFC 9112 §5.1: 400 */
        conn_fail(c, 400,
                  "400 bad request: whitespace in a header field name (none is allowed "
                  "before the colon)\n");
        return 0;
    }
    bool fresh = (int)kind != c->last_piece;
    c->head_bytes += len + (fresh ? 2 : 0); /* ": " or CRLF */
    int rc = 0;
    if (c->head_bytes > c->srv->conf.max_header_size ||
        (fresh && kind == PIECE_FIELD && (rc = new_field(c)) == HS_E2BIG)) {
        conn_fail(c, 431, "431 the request line and headers are larger than max_header_size\n");
        return 0;
    }
    size_t off = c->head.len;
    if (rc || hs_buf_append(&c->head, at, len)) {
        conn_fail(c, 503, "503 out of memory reading the request headers\n");
        return 0;
    }
    c->last_piece = kind;
    if (kind == PIECE_URL) {
        c->url_len += len;
        return 0;
    }
    if (!c->nfields)
        return 0;
    struct hs_http_field *f = &c->fields[c->nfields - 1];
    if (kind == PIECE_FIELD) {
        for (size_t i = off; i < c->head.len; i++)
            if (c->head.data[i] >= 'A' && c->head.data[i] <= 'Z')
                c->head.data[i] = (uint8_t)(c->head.data[i] + ('a' - 'A'));
        f->name_len += len;
        f->value_off = c->head.len;
    } else {
        if (fresh)
            f->value_off = off;
        f->value_len += len;
    }
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    return head_add(p->data, PIECE_URL, at, len);
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    return head_add(p->data, PIECE_FIELD, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    return head_add(p->data, PIECE_VALUE, at, len);
}

static bool field_is(const struct hs_http_conn *c, const char *name, const char *value)
{
    for (size_t i = 0; i < c->nfields; i++) {
        const struct hs_http_field *f = &c->fields[i];
        struct hs_str n = {(const char *)c->head.data + f->name_off, f->name_len};
        struct hs_str v = {(const char *)c->head.data + f->value_off, f->value_len};
        if (hs_str_eq(n, name) && hs_str_ieq(v, value))
            return true;
    }
    return false;
}

static bool conn_early(struct hs_http_conn *c, bool has_body, hs_http_handler cb);
static void conn_too_large(struct hs_http_conn *c);

static int on_headers_complete(http_parser *p)
{
    struct hs_http_conn *c = p->data;
    if (c->stop)
        return 0;
    /* the headers' wait may have been cut to busy_timeout: the body gets what read_timeout
     * has left */
    c->headers_done = true;
    uint64_t rt = c->srv->conf.read_timeout_ms, spent = uv_now(c->srv->loop) - c->since_ms;
    if (rt)
        conn_arm(c, rt > spent ? rt - spent : 1, on_read_timer);
    uint64_t max = c->srv->conf.max_request_body_size;
    bool has_length = p->flags & F_CONTENTLENGTH;
    bool has_body = (p->flags & F_CHUNKED) || (has_length && p->content_length > 0);
    /* before the 100 and the body's room: an early answer replaces both (a wrong token is
     * told so before it learns the size limit) */
    if (c->srv->on_headers && conn_early(c, has_body, c->srv->on_headers))
        return 0;
    if (has_length && p->content_length > max) {
        /* answered before the body: no 100 Continue, nothing read that we would drop */
        conn_too_large(c);
        return 0;
    }
    if (has_body && (p->http_major > 1 || p->http_minor >= 1) &&
        field_is(c, "expect", "100-continue")) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        conn_write(c, cont, sizeof(cont) - 1, NULL, 0);
    }
    /* room for what was announced, within reason: the rest grows as it arrives */
    if (has_length && hs_buf_reserve(&c->body, HS_MIN(p->content_length, HS_HTTP_BODY_RESERVE)))
        conn_fail(c, 503, "503 out of memory for the request body\n");
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct hs_http_conn *c = p->data;
    if (c->stop)
        return 0;
    if (len > c->srv->conf.max_request_body_size - c->body.len)
        conn_too_large(c);
    else if (hs_buf_append(&c->body, at, len))
        conn_fail(c, 503, "503 out of memory for the request body\n");
    else
        c->srv->body_bytes += len;
    return 0;
}

/* Path and query of an origin-form ("/v1/traces?x") or absolute-form URL. */
static void split_url(const char *u, size_t n, struct hs_str *path, struct hs_str *query)
{
    struct http_parser_url pu;
    http_parser_url_init(&pu);
    if (n && u[0] != '/' && n <= UINT16_MAX && http_parser_parse_url(u, n, 0, &pu) == 0) {
        *path = HS_STR("/");
        *query = (struct hs_str){"", 0};
        if (pu.field_set & (1 << UF_PATH))
            *path = (struct hs_str){u + pu.field_data[UF_PATH].off, pu.field_data[UF_PATH].len};
        if (pu.field_set & (1 << UF_QUERY))
            *query = (struct hs_str){u + pu.field_data[UF_QUERY].off, pu.field_data[UF_QUERY].len};
        return;
    }
    const char *hash = memchr(u, '#', n);
    size_t end = hash ? (size_t)(hash - u) : n;
    const char *q = memchr(u, '?', end);
    if (q) {
        *path = (struct hs_str){u, (size_t)(q - u)};
        *query = (struct hs_str){q + 1, end - (size_t)(q - u) - 1};
    } else {
        *path = (struct hs_str){u, end};
        *query = (struct hs_str){u + end, 0};
    }
}

static bool build_headers(struct hs_http_conn *c)
{
    if (c->nfields > c->headers_cap) {
        struct hs_http_header *h = realloc(c->headers, c->nfields * sizeof(*h));
        if (!h)
            return false;
        c->headers = h;
        c->headers_cap = c->nfields;
    }
    const char *base = (const char *)c->head.data;
    for (size_t i = 0; i < c->nfields; i++) {
        const struct hs_http_field *f = &c->fields[i];
        c->headers[i] = (struct hs_http_header){{base + f->name_off, f->name_len},
                                                {base + f->value_off, f->value_len}};
    }
    return true;
}

/* The request being read, for on_headers (without its body: NULL, 0) or the handler. False
 * (answered 503) when its headers cannot be listed. */
static bool conn_request(struct hs_http_conn *c, bool with_body, struct hs_http_request *req)
{
    if (!build_headers(c)) {
        conn_fail(c, 503, "503 out of memory for the request headers\n");
        return false;
    }
    *req = (struct hs_http_request){
        .method = http_method_str((enum http_method)c->parser.method),
        .headers = c->headers,
        .header_count = c->nfields,
        .body = !with_body ? NULL : c->body.len ? c->body.data : (const uint8_t *)"",
        .body_len = with_body ? c->body.len : 0,
        .peer = c->peer,
        .conn = c,
    };
    split_url(c->url_len ? (const char *)c->head.data : "/", c->url_len ? c->url_len : 1,
              &req->path, &req->query);
    return true;
}

/* Offers the request to on_headers before any of its body is read. Returns true when it was
 * answered (or failed). With a body announced the connection then ends, as after the 413 for
 * an oversized Content-Length: the answer said Connection: close, and conn_end drops what
 * arrives without parsing it, until the client's EOF or the linger timeout. Keeping the
 * connection would mean reading up to max_request_body_size of a refused client's bytes. With
 * no body to come, the connection stays and on_message_complete skips the handler. */
static bool conn_early(struct hs_http_conn *c, bool has_body, hs_http_handler cb)
{
    struct hs_http_request req;
    if (!conn_request(c, false, &req))
        return true;
    c->in_dispatch = c->in_headers = true;
    c->body_expected = has_body;
    cb(c->srv->ud, &req);
    c->in_dispatch = c->in_headers = false;
    if (!c->responded)
        return false;
    if (c->end_after)
        conn_end(c);
    else
        c->answered_early = true;
    return true;
}

/* A body over max_request_body_size: on_too_large answers in its protocol's format, or we do
 * in text; the connection ends either way (what is still coming is read and dropped). */
static void conn_too_large(struct hs_http_conn *c)
{
    if (c->stop || c->closing)
        return;
    hs_log_debug(c->srv->name, "%s: 413, body over %llu bytes", c->peer,
                 (unsigned long long)c->srv->conf.max_request_body_size);
    if (c->srv->on_too_large && conn_early(c, true, c->srv->on_too_large))
        return;
    conn_fail(c, 413, "413 the request body is larger than max_request_body_size\n");
}

static void conn_dispatch(struct hs_http_conn *c)
{
    struct hs_http_server *s = c->srv;
    struct hs_http_request req;
    if (!conn_request(c, true, &req))
        return;
    c->in_dispatch = true;
    s->handler(s->ud, &req);
    c->in_dispatch = false;
    if (!c->responded && !c->closing) {
        hs_log_error(s->name, "the handler did not answer %s %.*s", req.method, (int)req.path.len,
                     req.path.ptr);
        hs_http_respond_text(&req, 500, "500 the server did not answer this request\n");
    }
    if (c->end_after)
        conn_end(c);
}

static int on_message_complete(http_parser *p)
{
    struct hs_http_conn *c = p->data;
    if (c->stop)
        return 0;
    if (!c->answered_early)
        conn_dispatch(c);
    c->answered_early = false;
    if (c->stop || c->closing)
        return 0;
    c->state = HS_HTTP_CONN_IDLE;
    /* a big body stays with its request, not with the idle connection */
    if (c->body.cap > ((size_t)256 << 10))
        hs_buf_free(&c->body);
    if (c->head.cap > ((size_t)64 << 10))
        hs_buf_free(&c->head);
    hs_http_conn_idle(c, true);
    conn_arm(c, hs_http_server_idle_ms(c->srv), on_idle_timer);
    if (c->write_pending > HS_HTTP_WRITE_HIGH) {
        /* the client does not read: neither do we, so it cannot grow our memory */
        c->write_paused = true;
        conn_read(c, false);
        http_parser_pause(p, 1);
    }
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- the rest of the server's side ----------------------------------------------------- */

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

static void on_refused_closed(uv_handle_t *h)
{
    struct hs_http_conn *c = h->data;
    struct hs_http_server *s = c->srv;
    free(c);
    s->nrejects--;
    hs_http_server_maybe_done(s);
}

void hs_http_conn_accept(struct hs_http_server *s)
{
    struct hs_http_conn *c = hs_xcalloc(1, sizeof(*c));
    c->srv = s;
    if (uv_tcp_init(s->loop, &c->tcp) != 0) {
        free(c);
        return;
    }
    c->tcp.data = c;
    /* accepted either way, so a refused client learns at once, not by a timeout */
    bool ok = uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp) == 0;
    if (ok) {
        peer_name(c);
        ok = hs_http_server_admit(s, c) == HS_HTTP_ADMITTED;
    }
    if (!ok) {
        s->nrejects++;
        uv_close((uv_handle_t *)&c->tcp, on_refused_closed);
        return;
    }
    uv_timer_init(s->loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 2;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
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

void hs_http_conn_server_closing(struct hs_http_conn *c)
{
    if (c->h2 && !c->closing && c->state != HS_HTTP_CONN_DRAIN) {
        hs_http2_server_closing(c);
        return;
    }
    if (c->closing || c->state == HS_HTTP_CONN_REQUEST)
        return; /* its response will say Connection: close and end it */
    if (c->state == HS_HTTP_CONN_DRAIN || c->write_pending == 0)
        conn_close(c);
    else
        conn_end(c); /* let the answers already made reach the client */
}

/* ---- the handler's side ---------------------------------------------------------------- */

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

void hs_http_respond(struct hs_http_request *req, int status, const char *content_type,
                     const struct hs_http_header *extra, size_t extra_count, const void *body,
                     size_t body_len)
{
    struct hs_http_conn *c = req->conn;
    if (req->stream) {
        hs_http2_respond(req, status, content_type, extra, extra_count, body, body_len, NULL, 0);
        return;
    }
    if (!c->in_dispatch || c->responded) {
        hs_log_error(c->srv->name, "a second answer to %s %.*s was dropped", req->method,
                     (int)req->path.len, req->path.ptr);
        return;
    }
    c->responded = true;
    /* an early answer to a request with a body ends the connection (conn_early says why) */
    bool keep = !c->srv->closing && http_should_keep_alive(&c->parser) &&
                !(c->parser.upgrade && c->parser.method == HTTP_CONNECT) &&
                !(c->in_headers && c->body_expected);
    conn_send(c, status, content_type, extra, extra_count, body, body_len, keep);
    if (!keep)
        c->end_after = true;
}

void hs_http_respond_trailers(struct hs_http_request *req, int status, const char *content_type,
                              const struct hs_http_header *extra, size_t extra_count,
                              const void *body, size_t body_len,
                              const struct hs_http_header *trailers, size_t trailer_count)
{
    if (req->stream) {
        hs_http2_respond(req, status, content_type, extra, extra_count, body, body_len, trailers,
                         trailer_count);
        return;
    }
    struct hs_http_header all[32];
    size_t n = 0;
    for (size_t i = 0; i < extra_count && n < HS_ARRAY_SIZE(all); i++)
        all[n++] = extra[i];
    for (size_t i = 0; i < trailer_count && n < HS_ARRAY_SIZE(all); i++)
        all[n++] = trailers[i];
    hs_http_respond(req, status, content_type, all, n, body, body_len);
}

int hs_http_request_take_body(struct hs_http_request *req, struct hs_buf *out)
{
    struct hs_buf *b = req->stream ? hs_http2_stream_body(req->stream) : &req->conn->body;
    if (req->body_len == 0 || b->data != req->body || b->len != req->body_len)
        return HS_ENOENT;
    *out = *b;
    *b = (struct hs_buf){0}; /* the server frees a big body after its request anyway */
    return 0;
}

void hs_http_respond_text(struct hs_http_request *req, int status, const char *text)
{
    hs_http_respond(req, status, "text/plain; charset=utf-8", NULL, 0, text, strlen(text));
}

/* ---- the transport, for http2.c ---------------------------------------------------------- */

void hs_http_conn_write(struct hs_http_conn *c, const void *a, size_t alen, const void *b,
                        size_t blen)
{
    conn_write(c, a, alen, b, blen);
}

void hs_http_conn_end(struct hs_http_conn *c)
{
    conn_end(c);
}

void hs_http_conn_close(struct hs_http_conn *c)
{
    conn_close(c);
}

void hs_http_conn_read(struct hs_http_conn *c, bool on)
{
    conn_read(c, on);
}

void hs_http_conn_timer(struct hs_http_conn *c, uint64_t ms, uv_timer_cb cb)
{
    conn_arm(c, ms, cb);
}
