/* http1.c: HTTP/1.1 over the transport: http_parser over what the client sends, requests
 * answered in order, each one hs_http_request for the server's handler (or answered at its
 * headers by on_headers), limits (header and body size, read_timeout, unread responses), and
 * the answer's status line and headers. */
#include <http_parser.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "net/http_server_int.h"

/* http_parser's own header limit is process-wide; ours is per server and always lower, so the
 * parser's only catches what our count of stored bytes does not see (padding whitespace). */
#define HS_HTTP_PARSER_HEADER_CAP (2u << 20)

enum piece { PIECE_NONE, PIECE_URL, PIECE_FIELD, PIECE_VALUE };

struct hs_http1 {
    http_parser parser;
    bool in_request;   /* a request has begun and is not answered yet */
    bool headers_done; /* of the request being read */
    bool in_dispatch, responded, end_after;
    bool in_headers;     /* in the on_headers callback */
    bool body_expected;  /* the request announced a body (Content-Length > 0 or chunked) */
    bool answered_early; /* by on_headers, with no body to come: skip the handler */
    /* the request being read */
    struct hs_buf head; /* URL, then header names (lower-cased) and values */
    size_t url_len, head_bytes;
    int last_piece;
    struct hs_http_field *fields;
    size_t nfields, fields_cap;
    struct hs_http_header *headers; /* built from fields for the handler */
    size_t headers_cap;
    struct hs_buf body;
    struct hs_buf pending; /* read but not parsed while reading was paused */
};

static const http_parser_settings parser_settings;

/* Stops parsing; http_parser asserts when paused in an error state, hence the check. */
static void h1_stop(struct hs_http_conn *c)
{
    http_parser *p = &c->h1->parser;
    if (HTTP_PARSER_ERRNO(p) == HPE_OK)
        http_parser_pause(p, 1);
    hs_buf_reset(&c->h1->pending); /* not freed: the parser may be reading it right now */
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

static void h1_send(struct hs_http_conn *c, int status, const char *ctype,
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
        hs_http_conn_close(c);
        return;
    }
    bool head_only = bodyless || c->h1->parser.method == HTTP_HEAD;
    hs_http_conn_write(c, b->data, b->len, body, head_only ? 0 : blen);
}

/* An answer of ours (not the handler's): the request is abandoned and the connection ends. */
static void h1_fail(struct hs_http_conn *c, int status, const char *text)
{
    if (c->stop || c->closing)
        return;
    hs_log_debug(c->srv->name, "%s: %d %s", c->peer, status, text);
    h1_send(c, status, "text/plain; charset=utf-8", NULL, 0, text, strlen(text), false);
    hs_http_conn_end(c);
}

static void on_read_timer(uv_timer_t *t)
{
    struct hs_http_conn *c = t->data;
    h1_fail(c, 408,
            "408 request timeout: the request did not arrive whole within "
            "read_timeout\n");
}

static void h1_parse_error(struct hs_http_conn *c, enum http_errno e)
{
    char text[160];
    if (e == HPE_HEADER_OVERFLOW) {
        h1_fail(c, 431, "431 the request line and headers are larger than max_header_size\n");
        return;
    }
    /* http_parser reports a chunk size past 2^64 as a bad Content-Length: say what it was */
    if (e == HPE_INVALID_CONTENT_LENGTH && c->h1->headers_done &&
        (c->h1->parser.flags & F_CHUNKED)) {
        h1_fail(c, 400, "400 bad request: invalid chunk size: larger than 2^64-1\n");
        return;
    }
    snprintf(text, sizeof(text), "400 bad request: %s\n", http_errno_description(e));
    h1_fail(c, 400, text);
}

/* Runs the parser over data; returns the bytes it took. Less than len only when parsing was
 * paused for unread responses (the caller keeps the rest) or stopped (the rest is dropped). */
static size_t h1_parse(struct hs_http_conn *c, const char *data, size_t len)
{
    http_parser *p = &c->h1->parser;
    size_t off = 0;
    while (off < len && !c->stop && !c->write_paused && !c->closing) {
        size_t n = http_parser_execute(p, &parser_settings, data + off, len - off);
        off += n;
        enum http_errno e = HTTP_PARSER_ERRNO(p);
        if (e == HPE_PAUSED) {
            if (c->stop)
                break;
            http_parser_pause(p, 0);
        } else if (e != HPE_OK) {
            h1_parse_error(c, e);
            break;
        }
        if (p->upgrade) {
            /* We answered without switching protocols, so what follows is HTTP/1.1 again,
             * except after CONNECT, whose tunnel we never open. */
            if (p->method == HTTP_CONNECT) {
                hs_http_conn_end(c);
                break;
            }
            http_parser_init(p, HTTP_REQUEST);
            p->data = c;
        } else if (n == 0 && e == HPE_OK) {
            h1_parse_error(c, HPE_UNKNOWN); /* no progress: never loop on it */
            break;
        }
    }
    return off;
}

/* Parses what was kept while the client did not read our answers. */
static void h1_writable(struct hs_http_conn *c)
{
    struct hs_buf *pending = &c->h1->pending;
    if (!pending->len)
        return;
    size_t used = h1_parse(c, (const char *)pending->data, pending->len);
    if (c->closing || c->stop) {
        hs_buf_free(pending);
        return;
    }
    memmove(pending->data, pending->data + used, pending->len - used);
    pending->len -= used;
}

static void h1_recv(struct hs_http_conn *c, const uint8_t *data, size_t len)
{
    struct hs_buf *pending = &c->h1->pending;
    hs_http_conn_idle(c, false); /* a request is arriving */
    /* parsing waits for unread responses: keep the bytes in order */
    if (pending->len) {
        if (hs_buf_append(pending, data, len)) {
            hs_http_conn_close(c);
            return;
        }
        if (!c->write_paused)
            h1_writable(c);
        return;
    }
    size_t used = h1_parse(c, (const char *)data, len);
    if (used < len && c->write_paused && hs_buf_append(pending, data + used, len - used))
        hs_http_conn_close(c);
}

/* ---- parser callbacks ----------------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
    struct hs_http_conn *c = p->data;
    struct hs_http1 *h = c->h1;
    hs_buf_reset(&h->head);
    hs_buf_reset(&h->body);
    h->url_len = h->head_bytes = h->nfields = 0;
    h->last_piece = PIECE_NONE;
    h->responded = h->end_after = h->answered_early = h->headers_done = false;
    h->in_request = true;
    hs_http_conn_idle(c, false);
    c->since_ms = uv_now(c->srv->loop);
    hs_http_conn_timer(c, hs_http_server_header_ms(c->srv), on_read_timer);
    return 0;
}

static int new_field(struct hs_http1 *h)
{
    if (h->nfields == HS_HTTP_MAX_HEADERS)
        return HS_E2BIG;
    if (h->nfields == h->fields_cap) {
        size_t cap = h->fields_cap ? h->fields_cap * 2 : 16;
        struct hs_http_field *f = realloc(h->fields, cap * sizeof(*f));
        if (!f)
            return HS_ENOMEM;
        h->fields = f;
        h->fields_cap = cap;
    }
    h->fields[h->nfields++] = (struct hs_http_field){h->head.len, 0, h->head.len, 0};
    return 0;
}

/* Stores a piece of the URL, a header name or a header value; http_parser may hand over each
 * in several pieces when it spans reads. */
static int head_add(struct hs_http_conn *c, enum piece kind, const char *at, size_t len)
{
    struct hs_http1 *h = c->h1;
    if (c->stop)
        return 0;
    if (kind == PIECE_FIELD && (memchr(at, ' ', len) || memchr(at, '\t', len))) {
        /* http_parser takes "Content-Length : 10" for a Content-Length; RFC 9112 §5.1: 400 */
        h1_fail(c, 400,
                "400 bad request: whitespace in a header field name (none is allowed "
                "before the colon)\n");
        return 0;
    }
    bool fresh = (int)kind != h->last_piece;
    h->head_bytes += len + (fresh ? 2 : 0); /* ": " or CRLF */
    int rc = 0;
    if (h->head_bytes > c->srv->conf.max_header_size ||
        (fresh && kind == PIECE_FIELD && (rc = new_field(h)) == HS_E2BIG)) {
        h1_fail(c, 431, "431 the request line and headers are larger than max_header_size\n");
        return 0;
    }
    size_t off = h->head.len;
    if (rc || hs_buf_append(&h->head, at, len)) {
        h1_fail(c, 503, "503 out of memory reading the request headers\n");
        return 0;
    }
    h->last_piece = kind;
    if (kind == PIECE_URL) {
        h->url_len += len;
        return 0;
    }
    if (!h->nfields)
        return 0;
    struct hs_http_field *f = &h->fields[h->nfields - 1];
    if (kind == PIECE_FIELD) {
        for (size_t i = off; i < h->head.len; i++)
            if (h->head.data[i] >= 'A' && h->head.data[i] <= 'Z')
                h->head.data[i] = (uint8_t)(h->head.data[i] + ('a' - 'A'));
        f->name_len += len;
        f->value_off = h->head.len;
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

static bool field_is(const struct hs_http1 *h, const char *name, const char *value)
{
    for (size_t i = 0; i < h->nfields; i++) {
        const struct hs_http_field *f = &h->fields[i];
        struct hs_str n = {(const char *)h->head.data + f->name_off, f->name_len};
        struct hs_str v = {(const char *)h->head.data + f->value_off, f->value_len};
        if (hs_str_eq(n, name) && hs_str_ieq(v, value))
            return true;
    }
    return false;
}

static bool h1_early(struct hs_http_conn *c, bool has_body, hs_http_handler cb);
static void h1_too_large(struct hs_http_conn *c);

static int on_headers_complete(http_parser *p)
{
    struct hs_http_conn *c = p->data;
    struct hs_http1 *h = c->h1;
    if (c->stop)
        return 0;
    /* the headers' wait may have been cut to busy_timeout: the body gets what read_timeout
     * has left */
    h->headers_done = true;
    uint64_t rt = c->srv->conf.read_timeout_ms, spent = uv_now(c->srv->loop) - c->since_ms;
    if (rt)
        hs_http_conn_timer(c, rt > spent ? rt - spent : 1, on_read_timer);
    uint64_t max = c->srv->conf.max_request_body_size;
    bool has_length = p->flags & F_CONTENTLENGTH;
    bool has_body = (p->flags & F_CHUNKED) || (has_length && p->content_length > 0);
    /* before the 100 and the body's room: an early answer replaces both (a wrong token is
     * told so before it learns the size limit) */
    if (c->srv->on_headers && h1_early(c, has_body, c->srv->on_headers))
        return 0;
    if (has_length && p->content_length > max) {
        /* answered before the body: no 100 Continue, nothing read that we would drop */
        h1_too_large(c);
        return 0;
    }
    if (has_body && (p->http_major > 1 || p->http_minor >= 1) &&
        field_is(h, "expect", "100-continue")) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        hs_http_conn_write(c, cont, sizeof(cont) - 1, NULL, 0);
    }
    /* room for what was announced, within reason: the rest grows as it arrives */
    if (has_length && hs_buf_reserve(&h->body, HS_MIN(p->content_length, HS_HTTP_BODY_RESERVE)))
        h1_fail(c, 503, "503 out of memory for the request body\n");
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct hs_http_conn *c = p->data;
    struct hs_http1 *h = c->h1;
    if (c->stop)
        return 0;
    if (len > c->srv->conf.max_request_body_size - h->body.len)
        h1_too_large(c);
    else if (hs_buf_append(&h->body, at, len))
        h1_fail(c, 503, "503 out of memory for the request body\n");
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

static bool build_headers(struct hs_http1 *h)
{
    if (h->nfields > h->headers_cap) {
        struct hs_http_header *hd = realloc(h->headers, h->nfields * sizeof(*hd));
        if (!hd)
            return false;
        h->headers = hd;
        h->headers_cap = h->nfields;
    }
    const char *base = (const char *)h->head.data;
    for (size_t i = 0; i < h->nfields; i++) {
        const struct hs_http_field *f = &h->fields[i];
        h->headers[i] = (struct hs_http_header){{base + f->name_off, f->name_len},
                                                {base + f->value_off, f->value_len}};
    }
    return true;
}

/* The request being read, for on_headers (without its body: NULL, 0) or the handler. False
 * (answered 503) when its headers cannot be listed. */
static bool h1_request(struct hs_http_conn *c, bool with_body, struct hs_http_request *req)
{
    struct hs_http1 *h = c->h1;
    if (!build_headers(h)) {
        h1_fail(c, 503, "503 out of memory for the request headers\n");
        return false;
    }
    *req = (struct hs_http_request){
        .method = http_method_str((enum http_method)h->parser.method),
        .headers = h->headers,
        .header_count = h->nfields,
        .body = !with_body    ? NULL
                : h->body.len ? h->body.data
                              : (const uint8_t *)"",
        .body_len = with_body ? h->body.len : 0,
        .peer = c->peer,
        .conn = c,
    };
    split_url(h->url_len ? (const char *)h->head.data : "/", h->url_len ? h->url_len : 1,
              &req->path, &req->query);
    return true;
}

/* Offers the request to on_headers before any of its body is read. Returns true when it was
 * answered (or failed). With a body announced the connection then ends, as after the 413 for
 * an oversized Content-Length: the answer said Connection: close, and the transport drops what
 * arrives without parsing it, until the client's EOF or the linger timeout. Keeping the
 * connection would mean reading up to max_request_body_size of a refused client's bytes. With
 * no body to come, the connection stays and on_message_complete skips the handler. */
static bool h1_early(struct hs_http_conn *c, bool has_body, hs_http_handler cb)
{
    struct hs_http1 *h = c->h1;
    struct hs_http_request req;
    if (!h1_request(c, false, &req))
        return true;
    h->in_dispatch = h->in_headers = true;
    h->body_expected = has_body;
    cb(c->srv->ud, &req);
    h->in_dispatch = h->in_headers = false;
    if (!h->responded)
        return false;
    if (h->end_after)
        hs_http_conn_end(c);
    else
        h->answered_early = true;
    return true;
}

/* A body over max_request_body_size: on_too_large answers in its protocol's format, or we do
 * in text; the connection ends either way (what is still coming is read and dropped). */
static void h1_too_large(struct hs_http_conn *c)
{
    if (c->stop || c->closing)
        return;
    hs_log_debug(c->srv->name, "%s: 413, body over %llu bytes", c->peer,
                 (unsigned long long)c->srv->conf.max_request_body_size);
    if (c->srv->on_too_large && h1_early(c, true, c->srv->on_too_large))
        return;
    h1_fail(c, 413, "413 the request body is larger than max_request_body_size\n");
}

static void h1_dispatch(struct hs_http_conn *c)
{
    struct hs_http1 *h = c->h1;
    struct hs_http_server *s = c->srv;
    struct hs_http_request req;
    if (!h1_request(c, true, &req))
        return;
    h->in_dispatch = true;
    s->handler(s->ud, &req);
    if (!h->responded && !c->closing) { /* still in dispatch: an answer after it is dropped */
        hs_log_error(s->name, "the handler did not answer %s %.*s", req.method, (int)req.path.len,
                     req.path.ptr);
        static const char text[] = "500 the server did not answer this request\n";
        hs_http1_respond(&req, 500, "text/plain; charset=utf-8", NULL, 0, text, sizeof(text) - 1,
                         NULL, 0);
    }
    h->in_dispatch = false;
    if (h->end_after)
        hs_http_conn_end(c);
}

static int on_message_complete(http_parser *p)
{
    struct hs_http_conn *c = p->data;
    struct hs_http1 *h = c->h1;
    if (c->stop)
        return 0;
    if (!h->answered_early)
        h1_dispatch(c);
    h->answered_early = false;
    if (c->stop || c->closing)
        return 0;
    h->in_request = false;
    /* a big body stays with its request, not with the idle connection */
    if (h->body.cap > ((size_t)256 << 10))
        hs_buf_free(&h->body);
    if (h->head.cap > ((size_t)64 << 10))
        hs_buf_free(&h->head);
    hs_http_conn_await_request(c);
    if (c->write_pending > HS_HTTP_WRITE_HIGH) {
        /* the client does not read: neither do we, so it cannot grow our memory */
        hs_http_conn_hold(c);
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

/* ---- the request API's side ------------------------------------------------------------- */

void hs_http1_respond(struct hs_http_request *req, int status, const char *content_type,
                      const struct hs_http_header *extra, size_t extra_count, const void *body,
                      size_t body_len, const struct hs_http_header *trailers, size_t trailer_count)
{
    struct hs_http_conn *c = req->conn;
    struct hs_http1 *h = c->h1;
    /* no trailers without chunked encoding: they go out as headers */
    struct hs_http_header all[32];
    if (trailer_count) {
        size_t n = 0;
        for (size_t i = 0; i < extra_count && n < HS_ARRAY_SIZE(all); i++)
            all[n++] = extra[i];
        for (size_t i = 0; i < trailer_count && n < HS_ARRAY_SIZE(all); i++)
            all[n++] = trailers[i];
        extra = all;
        extra_count = n;
    }
    if (!h->in_dispatch || h->responded) {
        hs_log_error(c->srv->name, "a second answer to %s %.*s was dropped", req->method,
                     (int)req->path.len, req->path.ptr);
        return;
    }
    h->responded = true;
    /* an early answer to a request with a body ends the connection (h1_early says why) */
    bool keep = !c->srv->closing && http_should_keep_alive(&h->parser) &&
                !(h->parser.upgrade && h->parser.method == HTTP_CONNECT) &&
                !(h->in_headers && h->body_expected);
    h1_send(c, status, content_type, extra, extra_count, body, body_len, keep);
    if (!keep)
        h->end_after = true;
}

struct hs_buf *hs_http1_body(struct hs_http_request *req)
{
    return &req->conn->h1->body;
}

static pthread_once_t parser_once = PTHREAD_ONCE_INIT;

static void parser_setup(void)
{
    http_parser_set_max_header_size(HS_HTTP_PARSER_HEADER_CAP);
}

void hs_http1_setup(void)
{
    pthread_once(&parser_once, parser_setup);
}

/* ---- the transport's side ---------------------------------------------------------------- */

static int h1_start(struct hs_http_conn *c, const uint8_t *data, size_t len)
{
    struct hs_http1 *h = calloc(1, sizeof(*h));
    if (!h)
        return HS_ENOMEM;
    c->h1 = h;
    http_parser_init(&h->parser, HTTP_REQUEST);
    h->parser.data = c;
    if (c->srv->versions == HS_HTTP_H2C_ONLY) {
        h1_fail(c, 426,
                "426 this port serves gRPC, over HTTP/2 only (h2c with prior knowledge); "
                "HTTP/1.1 is not served here\n");
        return 0;
    }
    if (len)
        h1_recv(c, data, len);
    return 0;
}

/* The server is closing: a request being answered says Connection: close and ends it. */
static bool h1_server_closing(struct hs_http_conn *c)
{
    return c->h1->in_request;
}

static bool h1_awaits_headers(const struct hs_http_conn *c)
{
    return c->h1->in_request && !c->h1->headers_done;
}

static void h1_free(struct hs_http_conn *c)
{
    struct hs_http1 *h = c->h1;
    hs_buf_free(&h->head);
    hs_buf_free(&h->body);
    hs_buf_free(&h->pending);
    free(h->fields);
    free(h->headers);
    free(h);
    c->h1 = NULL;
}

const struct hs_http_proto hs_http1_proto = {
    .start = h1_start,
    .recv = h1_recv,
    .writable = h1_writable,
    .stop = h1_stop,
    .server_closing = h1_server_closing,
    .awaits_headers = h1_awaits_headers,
    .free = h1_free,
};
