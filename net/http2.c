/* http2.c: HTTP/2 over the transport (h2c with prior knowledge, or h2 by ALPN over TLS: the
 * transport hands over plaintext) on nghttp2: bytes read are fed to the session, its output
 * written through the connection; every stream that ends is one hs_http_request for the same
 * handler as HTTP/1.1, answered with optional trailers, unless the server's on_headers answered
 * it when its headers arrived. What a body carries (gRPC's messages) is the server's framing's
 * business (struct hs_http_framing), not this file's. */
#include <assert.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "net/http_server_int.h"

/* nghttp2 hands out frames of at most 16 KiB; gathered into one uv_write up to this. */
#define H2_WRITE_CHUNK (64u << 10)
/* HPACK counts 32 bytes of overhead per field (RFC 7541 §4.1); so do we, against
 * max_header_size, so the limit means the same as SETTINGS_MAX_HEADER_LIST_SIZE. */
#define H2_FIELD_OVERHEAD 32
/* The per-stream receive window: a client may have this much unread in flight per stream. The
 * body limit, not the window, bounds what one stream can make us hold. */
#define H2_STREAM_WINDOW (1 << 20)

struct hs_http2_stream {
    struct hs_http2 *h2;
    struct hs_queue link; /* in h2->streams */
    int32_t id;
    bool complete;  /* the client ended its side (END_STREAM) */
    bool responded; /* an answer is submitted (the handler's or ours) */
    bool counted;   /* counted in h2->receiving */
    bool head_over; /* the header list passed max_header_size */
    char method[16];
    struct hs_buf head; /* names and values, as in the HTTP/1.1 connection */
    struct hs_http_field *fields;
    size_t nfields, fields_cap, head_bytes;
    size_t path_off, path_len;
    bool has_path;
    struct hs_buf body;
    /* the response body and trailers, kept until nghttp2 has sent them */
    uint8_t *out;
    size_t out_len, out_off;
    nghttp2_nv *trailers;
    size_t ntrailers;
    struct hs_buf trailer_bytes;
};

struct hs_http2 {
    struct hs_http_conn *c;
    nghttp2_session *session;
    struct hs_queue streams; /* open streams, newest first */
    size_t receiving; /* streams whose request has begun and not ended */
    bool goaway;      /* we sent (or are sending) GOAWAY: end once nothing is left */
    struct hs_buf wbuf;
};

static void h2_flush(struct hs_http2 *h);

/* ---- timers ------------------------------------------------------------------------------ */

static void h2_arm(struct hs_http2 *h);

static void on_h2_idle(uv_timer_t *t)
{
    struct hs_http_conn *c = t->data;
    if (!c->h2)
        return;
    hs_log_debug(c->srv->name, "%s: HTTP/2 idle for idle_timeout, GOAWAY", c->peer);
    nghttp2_session_terminate_session(c->h2->session, NGHTTP2_NO_ERROR);
    c->h2->goaway = true;
    hs_http_conn_idle(c, false);
    h2_flush(c->h2);
}

static void stream_answer(struct hs_http2_stream *st, int status, const char *text);

/* Requests not whole within read_timeout (slowloris on HTTP/2): each is answered 408 and reset,
 * the connection goes on. */
static void on_h2_read_timeout(uv_timer_t *t)
{
    struct hs_http_conn *c = t->data;
    if (!c->h2)
        return;
    struct hs_queue *all = &c->h2->streams;
    for (struct hs_queue *q = hs_queue_head(all); q != all; q = q->next) {
        struct hs_http2_stream *st = hs_container_of(q, struct hs_http2_stream, link);
        if (!st->complete && !st->responded)
            stream_answer(st, 408,
                          "408 request timeout: the request did not arrive whole within "
                          "read_timeout\n");
    }
    h2_flush(c->h2);
    h2_arm(c->h2);
}

/* One timer per connection: read_timeout while a request is arriving, else idle_timeout (or
 * busy_timeout: hs_http_server_idle_ms). Without streams the connection is idle: the server may
 * close it for a newcomer. */
static void h2_arm(struct hs_http2 *h)
{
    struct hs_http_conn *c = h->c;
    bool arriving = false;
    for (struct hs_queue *q = hs_queue_head(&h->streams); q != &h->streams && !arriving;
         q = q->next) {
        const struct hs_http2_stream *st = hs_container_of(q, struct hs_http2_stream, link);
        arriving = !st->complete && !st->responded;
    }
    if (arriving)
        hs_http_conn_timer(c, c->srv->conf.read_timeout_ms, on_h2_read_timeout);
    else if (hs_queue_empty(&h->streams))
        hs_http_conn_timer(c, hs_http_server_idle_ms(c->srv), on_h2_idle);
    else
        hs_http_conn_timer(c, 0, NULL); /* answers being written */
    hs_http_conn_idle(c, hs_queue_empty(&h->streams) && !h->goaway);
}

/* ---- output ------------------------------------------------------------------------------ */

/* Writes what nghttp2 has to send, while the client reads; ends the connection once the
 * session wants nothing more (after GOAWAY, both ways, or a protocol error). */
static void h2_flush(struct hs_http2 *h)
{
    struct hs_http_conn *c = h->c;
    if (c->closing || c->stop)
        return;
    for (;;) {
        if (c->write_pending > HS_HTTP_WRITE_HIGH) {
            /* the client does not read: neither do we, so it cannot grow our memory */
            hs_http_conn_hold(c);
            break;
        }
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(h->session, &data);
        if (n < 0) {
            hs_log_debug(c->srv->name, "%s: HTTP/2 send: %s", c->peer,
                         nghttp2_strerror((int)n));
            hs_http_conn_close(c);
            return;
        }
        if (n > 0 && h->wbuf.len + (size_t)n <= H2_WRITE_CHUNK) {
            if (hs_buf_append(&h->wbuf, data, (size_t)n) != 0) {
                hs_http_conn_close(c);
                return;
            }
            continue;
        }
        if (h->wbuf.len) {
            hs_http_conn_write(c, h->wbuf.data, h->wbuf.len, NULL, 0);
            hs_buf_reset(&h->wbuf);
        }
        if (n == 0)
            break;
        if (hs_buf_append(&h->wbuf, data, (size_t)n) != 0) {
            hs_http_conn_close(c);
            return;
        }
    }
    if (!c->closing && !nghttp2_session_want_read(h->session) &&
        !nghttp2_session_want_write(h->session) && !h->wbuf.len)
        hs_http_conn_end(c);
}

/* ---- streams ----------------------------------------------------------------------------- */

static void stream_free(struct hs_http2_stream *st)
{
    hs_buf_free(&st->head);
    hs_buf_free(&st->body);
    hs_buf_free(&st->trailer_bytes);
    free(st->fields);
    free(st->trailers);
    free(st->out);
    free(st);
}

static ssize_t body_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    struct hs_http2_stream *st = src->ptr;
    size_t n = HS_MIN(length, st->out_len - st->out_off);
    if (n)
        memcpy(buf, st->out + st->out_off, n);
    st->out_off += n;
    if (st->out_off == st->out_len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->ntrailers) {
            /* the stream ends with the trailers' HEADERS frame, not with this DATA */
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            if (nghttp2_submit_trailer(session, id, st->trailers, st->ntrailers) != 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

/* Headers HTTP/2 forbids in a response (RFC 9113 §8.2.2), or that we set ourselves. */
static bool response_header_ok(const struct hs_http_header *x)
{
    if (!x->name.len || memchr(x->name.ptr, '\r', x->name.len) ||
        memchr(x->name.ptr, '\n', x->name.len) || memchr(x->value.ptr, '\r', x->value.len) ||
        memchr(x->value.ptr, '\n', x->value.len) || x->name.ptr[0] == ':')
        return false;
    static const char *const banned[] = {"connection", "keep-alive", "transfer-encoding",
                                         "upgrade", "proxy-connection", "content-length"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(banned); i++)
        if (hs_str_ieq(x->name, banned[i]))
            return false;
    return true;
}

/* Field names go out lower-cased (HTTP/2 requires it); values as given. Copies both into `b`
 * and points nv at them once b stops moving. */
static int nv_collect(struct hs_buf *b, size_t *offs, size_t *nv_count,
                      const struct hs_http_header *hs, size_t n, size_t max)
{
    for (size_t i = 0; i < n && *nv_count < max; i++) {
        if (!response_header_ok(&hs[i]))
            continue;
        size_t off = b->len;
        if (hs_buf_append(b, hs[i].name.ptr, hs[i].name.len) ||
            hs_buf_append(b, hs[i].value.ptr, hs[i].value.len))
            return HS_ENOMEM;
        for (size_t k = off; k < off + hs[i].name.len; k++)
            if (b->data[k] >= 'A' && b->data[k] <= 'Z')
                b->data[k] = (uint8_t)(b->data[k] + ('a' - 'A'));
        offs[*nv_count * 3] = off;
        offs[*nv_count * 3 + 1] = hs[i].name.len;
        offs[*nv_count * 3 + 2] = hs[i].value.len;
        ++*nv_count;
    }
    return 0;
}

static void nv_point(const struct hs_buf *b, const size_t *offs, size_t count, nghttp2_nv *nv)
{
    for (size_t i = 0; i < count; i++) {
        uint8_t *base = b->data + offs[i * 3];
        nv[i] = (nghttp2_nv){base, base + offs[i * 3 + 1], offs[i * 3 + 1], offs[i * 3 + 2],
                             NGHTTP2_NV_FLAG_NONE};
    }
}

#define H2_MAX_FIELDS 40

static int stream_submit(struct hs_http2_stream *st, int status, const char *ctype,
                         const struct hs_http_header *extra, size_t nextra, const void *body,
                         size_t blen, const struct hs_http_header *trailers, size_t ntrailers,
                         bool head_only)
{
    struct hs_http2 *h = st->h2;
    char code[8], clen[24];
    snprintf(code, sizeof(code), "%d", status);
    hs_http_server_count_response(h->c->srv, status);
    bool bodyless = status < 200 || status == 204 || status == 304 || head_only;
    if (bodyless)
        blen = 0;
    bool trailers_only = ntrailers && blen == 0;
    struct hs_http_header fixed[3];
    size_t nfixed = 0;
    fixed[nfixed++] = (struct hs_http_header){HS_STR(":status"), {code, strlen(code)}};
    if (ctype && !strpbrk(ctype, "\r\n"))
        fixed[nfixed++] = (struct hs_http_header){HS_STR("content-type"), {ctype, strlen(ctype)}};
    if (!ntrailers && !bodyless) { /* gRPC answers go without, like grpc-go's */
        snprintf(clen, sizeof(clen), "%zu", blen);
        fixed[nfixed++] = (struct hs_http_header){HS_STR("content-length"), {clen, strlen(clen)}};
    }
    struct hs_buf b = {0};
    size_t offs[H2_MAX_FIELDS * 3], count = 0;
    nghttp2_nv nv[H2_MAX_FIELDS];
    int rc = 0;
    /* the fixed ones bypass the filter (":status", "content-length") */
    for (size_t i = 0; i < nfixed && rc == 0; i++) {
        offs[count * 3] = b.len;
        offs[count * 3 + 1] = fixed[i].name.len;
        offs[count * 3 + 2] = fixed[i].value.len;
        count++;
        rc = hs_buf_append(&b, fixed[i].name.ptr, fixed[i].name.len) |
             hs_buf_append(&b, fixed[i].value.ptr, fixed[i].value.len);
    }
    if (rc == 0)
        rc = nv_collect(&b, offs, &count, extra, nextra, H2_MAX_FIELDS);
    if (rc == 0 && trailers_only)
        rc = nv_collect(&b, offs, &count, trailers, ntrailers, H2_MAX_FIELDS);
    if (rc == 0 && ntrailers && !trailers_only) {
        size_t toffs[H2_MAX_FIELDS * 3], tcount = 0;
        rc = nv_collect(&st->trailer_bytes, toffs, &tcount, trailers, ntrailers, H2_MAX_FIELDS);
        if (rc == 0 && !(st->trailers = calloc(tcount ? tcount : 1, sizeof(nghttp2_nv))))
            rc = HS_ENOMEM;
        if (rc == 0) {
            nv_point(&st->trailer_bytes, toffs, tcount, st->trailers);
            st->ntrailers = tcount;
        }
    }
    if (rc == 0 && blen) {
        if (!(st->out = malloc(blen)))
            rc = HS_ENOMEM;
        else
            memcpy(st->out, body, blen);
        st->out_len = blen;
    }
    if (rc == 0) {
        nv_point(&b, offs, count, nv);
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = body_read};
        /* nghttp2 copies the fields; the body and trailers stay with the stream */
        rc = nghttp2_submit_response(h->session, st->id, nv, count, blen ? &prd : NULL);
    }
    hs_buf_free(&b);
    return rc;
}

/* An answer of ours (a limit, a timeout): plain text, the rest of the request dropped. */
static void stream_answer(struct hs_http2_stream *st, int status, const char *text)
{
    st->responded = true;
    hs_log_debug(st->h2->c->srv->name, "%s: stream %d: %d %s", st->h2->c->peer, (int)st->id,
                 status, text);
    hs_buf_free(&st->body);
    if (stream_submit(st, status, "text/plain; charset=utf-8", NULL, 0, text, strlen(text), NULL,
                      0, false) != 0)
        nghttp2_submit_rst_stream(st->h2->session, NGHTTP2_FLAG_NONE, st->id,
                                  NGHTTP2_INTERNAL_ERROR);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct hs_http2 *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct hs_http2_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets just this stream */
    st->h2 = h;
    st->id = frame->hd.stream_id;
    hs_queue_insert_head(&h->streams, &st->link);
    nghttp2_session_set_stream_user_data(session, st->id, st);
    h2_arm(h);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    struct hs_http2 *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* request trailers: not kept */
    struct hs_http2_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!st || st->head_over)
        return 0;
    st->head_bytes += namelen + valuelen + H2_FIELD_OVERHEAD;
    if (st->head_bytes > h->c->srv->conf.max_header_size || st->nfields == HS_HTTP_MAX_HEADERS) {
        st->head_over = true; /* answered 431 once the headers are complete */
        return 0;
    }
    struct hs_str n = {(const char *)name, namelen};
    if (hs_str_eq(n, ":method")) {
        snprintf(st->method, sizeof(st->method), "%.*s", (int)HS_MIN(valuelen, 15), value);
        return 0;
    }
    if (st->nfields == st->fields_cap) {
        size_t cap = st->fields_cap ? st->fields_cap * 2 : 16;
        struct hs_http_field *f = realloc(st->fields, cap * sizeof(*f));
        if (!f)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        st->fields = f;
        st->fields_cap = cap;
    }
    /* :authority is HTTP/1.1's Host for the handler; other pseudo-headers are not headers */
    bool authority = hs_str_eq(n, ":authority");
    if (authority)
        n = HS_STR("host");
    size_t off = st->head.len;
    if (hs_buf_append(&st->head, n.ptr, n.len) || hs_buf_append(&st->head, value, valuelen))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (hs_str_eq(n, ":path")) {
        st->has_path = true;
        st->path_off = off + n.len;
        st->path_len = valuelen;
        return 0;
    }
    if (n.len && n.ptr[0] == ':')
        return 0;
    st->fields[st->nfields++] = (struct hs_http_field){off, n.len, off + n.len, valuelen};
    return 0;
}

/* The request's content-type, when it sent one. */
static bool stream_content_type(const struct hs_http2_stream *st, struct hs_str *out)
{
    for (size_t i = 0; i < st->nfields; i++) {
        const struct hs_http_field *f = &st->fields[i];
        struct hs_str n = {(const char *)st->head.data + f->name_off, f->name_len};
        if (hs_str_eq(n, "content-type")) {
            *out = (struct hs_str){(const char *)st->head.data + f->value_off, f->value_len};
            return true;
        }
    }
    return false;
}

/* The server's framing, when it claims this request (gRPC's, for application/grpc). */
static const struct hs_http_framing *stream_framing(const struct hs_http2_stream *st)
{
    const struct hs_http_framing *fr = st->h2->c->srv->framing;
    struct hs_str ct;
    return fr && stream_content_type(st, &ct) && fr->claims(&ct) ? fr : NULL;
}

static void stream_early(struct hs_http2 *h, struct hs_http2_stream *st, hs_http_handler cb);

/* The request's Content-Length, when it sent one that parses. */
static bool stream_content_length(const struct hs_http2_stream *st, uint64_t *out)
{
    for (size_t i = 0; i < st->nfields; i++) {
        const struct hs_http_field *f = &st->fields[i];
        struct hs_str n = {(const char *)st->head.data + f->name_off, f->name_len};
        if (!hs_str_eq(n, "content-length"))
            continue;
        const uint8_t *v = st->head.data + f->value_off;
        uint64_t len = 0;
        if (f->value_len == 0 || f->value_len > 19)
            return false;
        for (size_t k = 0; k < f->value_len; k++) {
            if (v[k] < '0' || v[k] > '9')
                return false;
            len = len * 10 + (uint64_t)(v[k] - '0');
        }
        *out = len;
        return true;
    }
    return false;
}

/* A body over the limit: 413 (the framing's answer when it claims the request, else
 * on_too_large's, else ours in text); the rest of the stream is reset once that is sent
 * (on_frame_send). */
static void stream_too_large(struct hs_http2_stream *st)
{
    struct hs_http_server *s = st->h2->c->srv;
    const struct hs_http_framing *fr = stream_framing(st);
    hs_http_handler cb = fr ? fr->too_large : s->on_too_large;
    if (cb)
        stream_early(st->h2, st, cb);
    if (st->responded)
        hs_buf_free(&st->body);
    else
        stream_answer(st, 413, "413 the request body is larger than max_request_body_size\n");
}

/* What the body says it will be, from its first DATA: the content-length, or what the framing
 * reads in its first bytes (gRPC's length prefix); 0 when neither says. */
static uint64_t stream_expected_len(const struct hs_http2_stream *st, const uint8_t *data,
                                    size_t len)
{
    uint64_t n;
    if (stream_content_length(st, &n))
        return n;
    const struct hs_http_framing *fr = stream_framing(st);
    return fr ? fr->announced_len(data, len) : 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    struct hs_http2 *h = ud;
    struct hs_http2_stream *st = nghttp2_session_get_stream_user_data(session, id);
    /* what we keep is bounded by the body limit, so the window opens as data arrives; so it
     * does for what we drop (a stream already answered), or the connection would stall */
    nghttp2_session_consume(session, id, len);
    if (!st || st->responded)
        return 0;
    uint64_t max = h->c->srv->conf.max_request_body_size;
    if (len > max - st->body.len) {
        stream_too_large(st);
        return 0;
    }
    /* room for what the body says it will be, within reason, as HTTP/1.1 does from
     * Content-Length: without it a 400 KB gRPC message grows from 16 KiB by doubling and is
     * copied once more on the way (callgrind: 10% of grpc>http's instructions). Room a client
     * announces and never fills is address space, not memory: pages are touched as data
     * arrives, and what a stream holds stays bounded by max_request_body_size. */
    uint64_t want = st->body.cap ? 0 : stream_expected_len(st, data, len);
    if (want)
        (void)hs_buf_reserve(&st->body, (size_t)HS_MIN(HS_MIN(want, max), HS_HTTP_BODY_RESERVE));
    if (hs_buf_append(&st->body, data, len) != 0)
        stream_answer(st, 503, "503 out of memory for the request body\n");
    else
        h->c->srv->body_bytes += len;
    return 0;
}

/* The stream's request, for on_headers (without its body: NULL, 0) or the handler. Returns
 * the header list to free after the call, or NULL (the stream answered 503). */
static struct hs_http_header *stream_request(struct hs_http2 *h, struct hs_http2_stream *st,
                                             bool with_body, struct hs_http_request *req)
{
    struct hs_http_header *hdrs = calloc(st->nfields ? st->nfields : 1, sizeof(*hdrs));
    if (!hdrs) {
        stream_answer(st, 503, "503 out of memory for the request headers\n");
        return NULL;
    }
    const char *base = (const char *)st->head.data;
    for (size_t i = 0; i < st->nfields; i++) {
        const struct hs_http_field *f = &st->fields[i];
        hdrs[i] = (struct hs_http_header){{base + f->name_off, f->name_len},
                                          {base + f->value_off, f->value_len}};
    }
    *req = (struct hs_http_request){
        .method = st->method[0] ? st->method : "GET",
        .headers = hdrs,
        .header_count = st->nfields,
        .body = !with_body ? NULL : st->body.len ? st->body.data : (const uint8_t *)"",
        .body_len = with_body ? st->body.len : 0,
        .peer = h->c->peer,
        .conn = h->c,
        .stream = st,
        .path = HS_STR("/"),
        .query = {"", 0},
    };
    if (st->has_path && st->path_len) {
        const char *p = base + st->path_off;
        const char *q = memchr(p, '?', st->path_len);
        size_t plen = q ? (size_t)(q - p) : st->path_len;
        req->path = (struct hs_str){p, plen};
        if (q)
            req->query = (struct hs_str){q + 1, st->path_len - plen - 1};
    }
    return hdrs;
}

/* The request without its body, offered to cb (on_headers once its headers are complete, or
 * on_too_large). If it answers, the stream is reset once the answer is sent (on_frame_send),
 * unless the client ended it already, and its DATA is dropped in on_data_chunk, which still
 * opens the windows. */
static void stream_early(struct hs_http2 *h, struct hs_http2_stream *st, hs_http_handler cb)
{
    struct hs_http_server *s = h->c->srv;
    struct hs_http_request req;
    struct hs_http_header *hdrs = stream_request(h, st, false, &req);
    if (!hdrs)
        return;
    cb(s->ud, &req);
    free(hdrs);
    if (st->responded)
        hs_log_debug(s->name, "%s: stream %d answered before its body", h->c->peer, (int)st->id);
}

struct hs_buf *hs_http2_body(struct hs_http_request *req)
{
    return &req->stream->body;
}

static void stream_dispatch(struct hs_http2 *h, struct hs_http2_stream *st)
{
    struct hs_http_server *s = h->c->srv;
    if (st->head_over) {
        stream_answer(st, 431, "431 the request headers are larger than max_header_size\n");
        return;
    }
    struct hs_http_request req;
    struct hs_http_header *hdrs = stream_request(h, st, true, &req);
    if (!hdrs)
        return;
    s->handler(s->ud, &req);
    free(hdrs);
    if (!st->responded) {
        hs_log_error(s->name, "the handler did not answer %s %.*s", req.method,
                     (int)req.path.len, req.path.ptr);
        stream_answer(st, 500, "500 the server did not answer this request\n");
    }
    /* the request is answered: what it held is not needed while the answer is written */
    hs_buf_free(&st->body);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct hs_http2 *h = ud;
    if (frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct hs_http2_stream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!st)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && st->head_over && !st->responded) {
        stream_answer(st, 431, "431 the request headers are larger than max_header_size\n");
        return 0;
    }
    /* the request's own HEADERS (not its trailers): before any DATA of it is read */
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
        !st->responded) {
        uint64_t len;
        if (h->c->srv->on_headers)
            stream_early(h, st, h->c->srv->on_headers);
        if (!st->responded && stream_content_length(st, &len) &&
            len > h->c->srv->conf.max_request_body_size)
            stream_too_large(st); /* announced: answered before any DATA is read */
    }
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    st->complete = true;
    if (!st->responded)
        stream_dispatch(h, st);
    h2_arm(h);
    return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    /* We answered before the request ended (a limit, or on_headers): the client may stop
     * sending (RFC 9113 §8.1). */
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct hs_http2_stream *st =
            nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (st && !st->complete)
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *ud)
{
    struct hs_http2 *h = ud;
    struct hs_http2_stream *st = nghttp2_session_get_stream_user_data(session, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(session, id, NULL);
    hs_queue_remove(&st->link);
    stream_free(st);
    h2_arm(h);
    return 0;
}

/* ---- the transport's side --------------------------------------------------------------- */

static void h2_recv(struct hs_http_conn *c, const uint8_t *data, size_t len)
{
    struct hs_http2 *h = c->h2;
    ssize_t n = nghttp2_session_mem_recv(h->session, data, len);
    if (n < 0) {
        /* a protocol error: nghttp2 has queued GOAWAY where it could; send it and end */
        hs_log_debug(c->srv->name, "%s: HTTP/2: %s", c->peer, nghttp2_strerror((int)n));
        h2_flush(h);
        if (!c->closing)
            hs_http_conn_end(c);
        return;
    }
    h2_flush(h);
}

static void h2_writable(struct hs_http_conn *c)
{
    h2_flush(c->h2);
}

/* GOAWAY: the streams the client has begun are finished, then the connection ends. */
static bool h2_server_closing(struct hs_http_conn *c)
{
    struct hs_http2 *h = c->h2;
    if (h->goaway)
        return true;
    h->goaway = true;
    hs_http_conn_idle(c, false);
    /* streams the client has begun are finished; newer ones it must retry elsewhere */
    nghttp2_submit_goaway(h->session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(h->session), NGHTTP2_NO_ERROR,
                          NULL, 0);
    h2_flush(h);
    return true;
}

static void h2_reclaim(struct hs_http_conn *c)
{
    struct hs_http2 *h = c->h2;
    h->goaway = true;
    /* no stream is open: the client may retry anything on a new connection */
    nghttp2_session_terminate_session(h->session, NGHTTP2_NO_ERROR);
    h2_flush(h);
}

static void h2_free(struct hs_http_conn *c)
{
    struct hs_http2 *h = c->h2;
    nghttp2_session_del(h->session); /* no callbacks from here: the streams go by hand */
    while (!hs_queue_empty(&h->streams)) {
        struct hs_queue *q = hs_queue_head(&h->streams);
        hs_queue_remove(q);
        stream_free(hs_container_of(q, struct hs_http2_stream, link));
    }
    hs_buf_free(&h->wbuf);
    free(h);
    c->h2 = NULL;
}

/* A session whose SETTINGS are queued; NULL when out of memory. */
static nghttp2_session *h2_session(struct hs_http2 *h, const struct hs_http_server_config *conf)
{
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    /* we open the window as we buffer (on_data_chunk), not as nghttp2 reads */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_send_header_block_length(opt, 64u << 10);
    nghttp2_session *session = NULL;
    int rc = nghttp2_session_server_new2(&session, cb, h, opt);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    if (rc != 0)
        return NULL;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, conf->max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
         (uint32_t)HS_MIN(conf->max_header_size, UINT32_MAX)},
    };
    if (nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, iv, HS_ARRAY_SIZE(iv)) != 0) {
        nghttp2_session_del(session);
        return NULL;
    }
    return session;
}

static int h2_start(struct hs_http_conn *c, const uint8_t *data, size_t len)
{
    struct hs_http2 *h = calloc(1, sizeof(*h));
    if (!h)
        return HS_ENOMEM;
    h->c = c;
    hs_queue_init(&h->streams);
    if (!(h->session = h2_session(h, &c->srv->conf))) {
        free(h);
        return HS_ENOMEM;
    }
    c->h2 = h;
    h2_arm(h); /* idle_timeout from the preface on: a client that opens no stream is idle */
    hs_log_debug(c->srv->name, "%s: HTTP/2 (%s)", c->peer,
                 c->tls ? "h2 by ALPN over TLS" : "prior knowledge");
    if (c->srv->closing) {
        h2_server_closing(c);
        return 0;
    }
    h2_recv(c, data, len);
    return 0;
}

/* The client preface (RFC 9113 §3.4): h2c with prior knowledge. */
static int h2_sniff(const uint8_t *data, size_t len)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    static_assert(sizeof(preface) - 1 == HS_HTTP_SNIFF_MAX, "the transport holds the preface");
    size_t n = HS_MIN(len, sizeof(preface) - 1);
    if (memcmp(data, preface, n) != 0)
        return -1;
    return n == sizeof(preface) - 1 ? 1 : 0;
}

const struct hs_http_proto hs_http2_proto = {
    .sniff = h2_sniff,
    .start = h2_start,
    .recv = h2_recv,
    .writable = h2_writable,
    .server_closing = h2_server_closing,
    .reclaim = h2_reclaim,
    .free = h2_free,
};

void hs_http2_respond(struct hs_http_request *req, int status, const char *content_type,
                      const struct hs_http_header *extra, size_t extra_count, const void *body,
                      size_t body_len, const struct hs_http_header *trailers,
                      size_t trailer_count)
{
    struct hs_http2_stream *st = req->stream;
    if (st->responded) {
        hs_log_error(st->h2->c->srv->name, "a second answer to %s %.*s was dropped", req->method,
                     (int)req->path.len, req->path.ptr);
        return;
    }
    st->responded = true;
    if (stream_submit(st, status, content_type, extra, extra_count, body, body_len, trailers,
                      trailer_count, strcmp(req->method, "HEAD") == 0) != 0)
        nghttp2_submit_rst_stream(st->h2->session, NGHTTP2_FLAG_NONE, st->id,
                                  NGHTTP2_INTERNAL_ERROR);
    /* written by the caller of nghttp2_session_mem_recv, once the frame is processed */
}
