/* http_client.c: outbound HTTP for exporters: one libcurl multi handle driven by the libuv loop
 * (a uv_poll_t per socket curl asks us to watch, one uv_timer_t for curl's timeout), so requests
 * run concurrently on the worker's loop and curl pools connections across them. */
#include "http_client.h"

#include <curl/curl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "core/queue.h"
#include "tls.h"

/* wire.md §2: responses are capped at 4 MiB; anything past that is read and discarded. */
#define MAX_RESPONSE_BODY (4u << 20)
/* A Retry-After asking for more than a day is treated as a day. */
#define MAX_RETRY_AFTER_S 86400u

struct xfer {
    struct hs_queue link; /* in c->xfers */
    struct hs_http_client *c;
    CURL *easy;
    struct curl_slist *headers;
    struct curl_slist *connect_to; /* server_name_override: the name's host:port -> the real */
    char *url;                     /* the URL with the overriding name, when there is one */
    struct hs_buf body;
    /* the request body when a prefix goes before it: sent through read_cb, so `out` (the
     * caller's, borrowed) is sent in place instead of being copied behind the prefix first */
    uint8_t prefix[HS_HTTP_CLIENT_PREFIX_MAX];
    size_t prefix_len;
    const uint8_t *out;
    size_t out_len;
    size_t sent; /* bytes of prefix + out handed to curl, for this attempt */
    uint64_t retry_after_ms;
    int grpc_status;
    char grpc_message[512];
    char grpc_details[1024];
    hs_http_done_cb done;
    void *ud;
    char errbuf[CURL_ERROR_SIZE];
};

/* One per socket curl wants watched; freed in its close callback (never before). */
struct sock {
    uv_poll_t poll;
    struct hs_queue link; /* in c->socks */
    struct hs_http_client *c;
    curl_socket_t fd;
};

struct hs_http_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    struct hs_queue xfers; /* in flight */
    struct hs_queue socks; /* watched */
    unsigned handles; /* uv handles not yet through their close callback */
    unsigned depth;   /* > 0 while we are inside a uv callback that drives curl */
    bool closing;
    bool timer_closing;
    void (*closed)(void *ud);
    void *closed_ud;
    unsigned flags;
    const struct hs_tls_client *tls;
    bool forbid_reuse; /* one connection per HTTP/2 transfer: see h2_reuse_broken */
};

static void client_finish_close(struct hs_http_client *c);

/* ---- uv handles ------------------------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
    struct hs_http_client *c = h->data;
    if (h != (uv_handle_t *)&c->timer)
        free(hs_container_of((uv_poll_t *)h, struct sock, poll));
    if (--c->handles == 0 && c->closing) {
        void (*closed)(void *) = c->closed;
        void *ud = c->closed_ud;
        free(c);
        if (closed)
            closed(ud);
    }
}

static void sock_close(struct sock *s)
{
    hs_queue_remove(&s->link);
    /* stops the watcher now, while curl's fd is still open; the memory goes in the callback */
    uv_close((uv_handle_t *)&s->poll, handle_closed);
}

/* ---- completions ------------------------------------------------------------------------ */

static void xfer_free(struct xfer *x)
{
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    curl_slist_free_all(x->connect_to);
    free(x->url);
    hs_buf_free(&x->body);
    free(x);
}

/* Removes x from the multi, reports `code` to its owner and frees it. */
static void xfer_finish(struct xfer *x, CURLcode code, const char *cancel)
{
    struct hs_http_result res = {.grpc_status = -1};
    curl_multi_remove_handle(x->c->multi, x->easy);
    hs_queue_remove(&x->link);
    if (cancel) {
        res.error = cancel;
    } else if (code != CURLE_OK) {
        res.error = x->errbuf[0] ? x->errbuf : curl_easy_strerror(code);
    } else {
        long status = 0;
        char *ct = NULL;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ct);
        res.status = (int)status;
        res.content_type = ct;
        res.body = x->body.data;
        res.body_len = x->body.len;
        res.retry_after_ms = x->retry_after_ms;
        res.grpc_status = x->grpc_status;
        res.grpc_message = x->grpc_message[0] ? x->grpc_message : NULL;
        res.grpc_details = x->grpc_details[0] ? x->grpc_details : NULL;
        if (status == 0)
            res.error = "no HTTP status in the response";
    }
    x->done(x->ud, &res);
    xfer_free(x);
}

static void drain_completions(struct hs_http_client *c)
{
    CURLMsg *msg;
    int left;
    while (!c->closing && (msg = curl_multi_info_read(c->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct xfer *x = NULL;
        CURLcode code = msg->data.result; /* msg is invalid once the handle is removed */
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        xfer_finish(x, code, NULL);
    }
}

/* Every entry from the loop into curl goes through here, so a done callback that closes the
 * client does not pull the multi handle out from under curl_multi_info_read. */
static void drive(struct hs_http_client *c, curl_socket_t fd, int ev_bitmask)
{
    int running;
    c->depth++;
    curl_multi_socket_action(c->multi, fd, ev_bitmask, &running);
    drain_completions(c);
    c->depth--;
    if (c->closing && c->depth == 0)
        client_finish_close(c);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct sock *s = hs_container_of(p, struct sock, poll);
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    drive(s->c, s->fd, flags);
}

static void on_timer(uv_timer_t *t)
{
    drive(t->data, CURL_SOCKET_TIMEOUT, 0);
}

/* ---- curl callbacks: only uv bookkeeping here, never user code -------------------------- */

static int curl_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct hs_http_client *c = userp;
    struct sock *s = socketp;

    if (what == CURL_POLL_REMOVE) {
        if (s) {
            curl_multi_assign(c->multi, fd, NULL);
            sock_close(s);
        }
        return 0;
    }
    if (!s) {
        s = hs_xcalloc(1, sizeof(*s));
        if (uv_poll_init_socket(c->loop, &s->poll, fd) != 0) {
            free(s);
            return -1; /* curl fails the transfer */
        }
        s->c = c;
        s->fd = fd;
        s->poll.data = c;
        hs_queue_insert_head(&c->socks, &s->link);
        c->handles++;
        curl_multi_assign(c->multi, fd, s);
    }
    int events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    uv_poll_start(&s->poll, events, on_poll);
    return 0;
}

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct hs_http_client *c = userp;
    if (c->timer_closing)
        return 0;
    if (timeout_ms < 0)
        uv_timer_stop(&c->timer);
    else /* even 0 goes through the loop: curl must not be re-entered from its callback */
        uv_timer_start(&c->timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static size_t write_cb(char *p, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    size_t room = MAX_RESPONSE_BODY - x->body.len;
    /* past the cap, or out of memory: keep reading so the connection stays usable */
    if (room > 0)
        hs_buf_append(&x->body, p, HS_MIN(len, room));
    return len;
}

/* The prefix, then the caller's bytes, as curl asks for them. */
static size_t read_cb(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t room = size * n, total = x->prefix_len + x->out_len, k = 0;
    if (x->sent < x->prefix_len) {
        k = HS_MIN(room, x->prefix_len - x->sent);
        memcpy(buf, x->prefix + x->sent, k);
        x->sent += k;
    }
    if (k < room && x->sent < total) {
        size_t off = x->sent - x->prefix_len, m = HS_MIN(room - k, x->out_len - off);
        memcpy(buf + k, x->out + off, m);
        x->sent += m;
        k += m;
    }
    return k;
}

/* curl rewinds the body when it sends it again (a reused connection found dead, a redirect):
 * without this it would fail such a transfer ("necessary data rewind wasn't possible"). */
static int seek_cb(void *ud, curl_off_t offset, int origin)
{
    struct xfer *x = ud;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->prefix_len + x->out_len)
        return CURL_SEEKFUNC_CANTSEEK;
    x->sent = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* Retry-After is delay-seconds or an HTTP-date (RFC 9110 §10.2.3). */
static uint64_t parse_retry_after(const char *v, size_t n)
{
    char tmp[128];
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
        n--;
    if (n == 0 || n >= sizeof(tmp))
        return 0;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    if (strspn(tmp, "0123456789") == n) {
        uint64_t s = 0;
        for (size_t i = 0; i < n && s <= MAX_RETRY_AFTER_S; i++)
            s = s * 10 + (uint64_t)(tmp[i] - '0');
        return HS_MIN(s, MAX_RETRY_AFTER_S) * 1000;
    }
    time_t when = curl_getdate(tmp, NULL);
    time_t now = time(NULL);
    if (when == (time_t)-1 || when <= now)
        return 0;
    return (uint64_t)HS_MIN((uint64_t)(when - now), MAX_RETRY_AFTER_S) * 1000;
}

/* The value of "name: value\r\n" into out (trimmed, NUL-terminated, truncated to fit) when the
 * line is that header. */
static bool header_value(const char *p, size_t len, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(p, name, nl) != 0 || p[nl] != ':')
        return false;
    p += nl + 1;
    len -= nl + 1;
    while (len && (*p == ' ' || *p == '\t'))
        p++, len--;
    while (len && (p[len - 1] == '\r' || p[len - 1] == '\n' || p[len - 1] == ' '))
        len--;
    size_t k = HS_MIN(len, outlen - 1);
    memcpy(out, p, k);
    out[k] = '\0';
    return true;
}

/* Headers and, on HTTP/2, trailers too: gRPC's status travels in the latter. */
static size_t header_cb(char *p, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    char num[16];
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) { /* a new response (after 100, redirects) */
        x->retry_after_ms = 0;
        x->grpc_status = -1;
        x->grpc_message[0] = x->grpc_details[0] = '\0';
    } else if (len > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
        x->retry_after_ms = parse_retry_after(p + sizeof(name) - 1, len - (sizeof(name) - 1));
    } else if (header_value(p, len, "grpc-status", num, sizeof(num))) {
        char *end;
        long v = strtol(num, &end, 10);
        x->grpc_status = end != num && *end == '\0' && v >= 0 && v < 1000 ? (int)v : 2;
    } else if (!header_value(p, len, "grpc-message", x->grpc_message, sizeof(x->grpc_message))) {
        header_value(p, len, "grpc-status-details-bin", x->grpc_details, sizeof(x->grpc_details));
    }
    return len;
}

/* ---- the API ---------------------------------------------------------------------------- */

struct hs_http_client *hs_http_client_new(uv_loop_t *loop)
{
    return hs_http_client_new_flags(loop, 0);
}

struct hs_http_client *hs_http_client_new_flags(uv_loop_t *loop, unsigned flags)
{
    return hs_http_client_new_tls(loop, flags, NULL);
}

/* libcurl 7.88 (this system's) cannot put a second transfer on an h2c prior-knowledge
 * connection, be it reused after the first or multiplexed beside it: for every transfer it
 * runs Curl_http2_may_switch, which only asks whether the transfer wants prior knowledge, not
 * whether the connection already speaks HTTP/2, so a second nghttp2 filter is stacked on the
 * connection and the transfer fails at once with "Error in the HTTP2 framing layer" (curl
 * issue #10634, fixed in 8.0.0 by PR #10643). Trailers have nothing to do with it: plain 200s
 * fail alike (tests/unit/test_http_client.c reproduces it against our server). PIPEWAIT,
 * CURLPIPE_MULTIPLEX, a connection cap or a multi of h2c handles only make every transfer
 * after the first fail sooner. Asking for plain HTTP/2 (CURL_HTTP_VERSION_2_0) once a
 * connection exists would dodge the switch, but whenever that connection is gone curl opens
 * an HTTP/1.1 one with Upgrade: h2c, which gRPC servers refuse: not safe. So below 8.0.0
 * each h2c transfer gets its own connection: fresh (else one started while another is in flight
 * is multiplexed onto that one's connection and fails: a grpc-js server, which answers after
 * the next request was started, shows it) and closed after it. Over TLS, HTTP/2 comes from ALPN (2TLS, not prior
 * knowledge), the switch is never asked for, and connections are shared (test_tls.c counts). */
static bool h2_reuse_broken(void)
{
    return curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
}

struct hs_http_client *hs_http_client_new_tls(uv_loop_t *loop, unsigned flags,
                                              const struct hs_tls_client *tls)
{
    struct hs_http_client *c = hs_xcalloc(1, sizeof(*c));
    hs_queue_init(&c->xfers);
    hs_queue_init(&c->socks);
    c->flags = flags;
    c->tls = tls;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        goto fail;
    c->forbid_reuse = h2_reuse_broken();
    c->loop = loop;
    c->multi = curl_multi_init();
    if (!c->multi)
        goto fail_global;
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->handles = 1;
    return c;
fail_global:
    curl_global_cleanup();
fail:
    free(c);
    return NULL;
}

static void set_blob(CURL *e, CURLoption opt, struct hs_tls_pem pem)
{
    if (!pem.len)
        return;
    /* copied by curl: a reload may replace ours while the transfer runs. Pooled connections
     * are matched by these bytes too, so new files mean a new connection. */
    struct curl_blob b = {(void *)pem.data, pem.len, CURL_BLOB_COPY};
    curl_easy_setopt(e, opt, &b);
}

/* server_name_override: the URL carries the name (SNI, certificate check, authority) and
 * CONNECT_TO sends the connection to the endpoint's real host. */
static int name_override(struct xfer *x, const char *url, const char *name)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *out = NULL;
    int rc = HS_ENOMEM;
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_HOST, name, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK)
        goto done;
    struct hs_buf line = {0};
    if (hs_buf_printf(&line, "%s:%s:%s:%s", name, port, host, port) != 0)
        goto done;
    struct curl_slist *l = curl_slist_append(NULL, (const char *)line.data);
    hs_buf_free(&line);
    if (!l)
        goto done;
    x->connect_to = l;
    x->url = hs_xstrdup(out);
    rc = 0;
done:
    curl_free(host);
    curl_free(port);
    curl_free(out);
    curl_url_cleanup(u);
    return rc;
}

/* TLS options for an https:// transfer (net/tls.h). */
static int xfer_tls(struct xfer *x, const char *url)
{
    CURL *e = x->easy;
    const struct hs_tls_client *t = x->c->tls;
    if (!t || strncasecmp(url, "https://", 8) != 0)
        return 0;
    const struct hs_tls_client_config *cf = hs_tls_client_config(t);
    set_blob(e, CURLOPT_CAINFO_BLOB, hs_tls_client_ca(t));
    set_blob(e, CURLOPT_SSLCERT_BLOB, hs_tls_client_cert(t));
    set_blob(e, CURLOPT_SSLKEY_BLOB, hs_tls_client_key(t));
    if (hs_tls_client_cert(t).len) {
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (cf->insecure_skip_verify) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    curl_easy_setopt(e, CURLOPT_SSLVERSION,
                     hs_tls_version(cf->min_version) == hs_tls_version("1.3")
                         ? (long)CURL_SSLVERSION_TLSv1_3
                         : (long)CURL_SSLVERSION_TLSv1_2);
    if (cf->server_name_override) {
        if (name_override(x, url, cf->server_name_override) != 0)
            return HS_ENOMEM;
        curl_easy_setopt(e, CURLOPT_URL, x->url);
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, x->connect_to);
    }
    return 0;
}

/* The body: curl's own copy of it (POSTFIELDS) when it is one piece, else read_cb. */
static void xfer_body(struct xfer *x, const void *body, size_t body_len)
{
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    if (!x->prefix_len) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body_len ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        return;
    }
    x->out = body;
    x->out_len = body_len;
    curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
    curl_easy_setopt(e, CURLOPT_READDATA, x);
    curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, seek_cb);
    curl_easy_setopt(e, CURLOPT_SEEKDATA, x);
    /* a known size: Content-Length on HTTP/1.1 rather than chunked encoding */
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(x->prefix_len + body_len));
}

static int xfer_setup(struct xfer *x, const char *url, const char *const *headers,
                      size_t header_count, const void *body, size_t body_len, uint64_t timeout_ms)
{
    CURL *e = x->easy;
    for (size_t i = 0; i < header_count; i++) {
        struct curl_slist *l = curl_slist_append(x->headers, headers[i]);
        if (!l)
            return HS_ENOMEM;
        x->headers = l;
    }
    /* curl would wait for a 100 Continue before large bodies: a round trip for nothing */
    struct curl_slist *l = curl_slist_append(x->headers, "Expect:");
    if (!l)
        return HS_ENOMEM;
    x->headers = l;
    if (curl_easy_setopt(e, CURLOPT_URL, url) != CURLE_OK)
        return HS_ENOMEM;
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    /* over TLS, HTTP/2 comes from ALPN "h2" (2TLS), for gRPC as for the rest */
    bool https = strncasecmp(url, "https://", 8) == 0;
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     (long)(x->c->flags & HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE && !https
                                ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                                : CURL_HTTP_VERSION_2TLS));
    if (xfer_tls(x, url) != 0)
        return HS_ENOMEM;
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)HS_MIN(timeout_ms, (uint64_t)LONG_MAX));
    xfer_body(x, body, body_len);
    /* curl sends a body through this buffer; its 64 KiB default makes a 4 MB batch take ~60
     * loop passes (bench/passthrough). 512 KiB per transfer in flight is a bounded cost. */
    if (!(x->c->flags & HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE))
        curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
    else if (x->c->forbid_reuse && !https) { /* over TLS h2 is ALPN's: reuse is safe */
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
        /* and never joins another transfer's connection while that one is in flight */
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    return 0;
}

int hs_http_client_post(struct hs_http_client *c, const char *url, const char *const *headers,
                        size_t header_count, const void *body, size_t body_len, uint64_t timeout_ms,
                        hs_http_done_cb done, void *ud)
{
    return hs_http_client_post_prefixed(c, url, headers, header_count, NULL, 0, body, body_len,
                                        timeout_ms, done, ud);
}

int hs_http_client_post_prefixed(struct hs_http_client *c, const char *url,
                                 const char *const *headers, size_t header_count,
                                 const void *prefix, size_t prefix_len, const void *body,
                                 size_t body_len, uint64_t timeout_ms, hs_http_done_cb done,
                                 void *ud)
{
    if (c->closing)
        return HS_ECANCELED;
    if (prefix_len > HS_HTTP_CLIENT_PREFIX_MAX)
        return HS_EINVAL;
    struct xfer *x = calloc(1, sizeof(*x));
    if (!x)
        return HS_ENOMEM;
    if (prefix_len)
        memcpy(x->prefix, prefix, prefix_len);
    x->prefix_len = prefix_len;
    x->c = c;
    x->grpc_status = -1;
    x->done = done;
    x->ud = ud;
    x->easy = curl_easy_init();
    if (!x->easy)
        goto fail;
    if (xfer_setup(x, url, headers, header_count, body, body_len, timeout_ms) != 0)
        goto fail;
    /* curl answers by asking for a timer; the transfer starts from the loop, not from here */
    if (curl_multi_add_handle(c->multi, x->easy) != CURLM_OK)
        goto fail;
    hs_queue_insert_head(&c->xfers, &x->link);
    return 0;
fail:
    if (x->easy)
        curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x);
    return HS_ENOMEM;
}

/* Runs once no curl call is on the stack: the multi goes, then every uv handle is closed. */
static void client_finish_close(struct hs_http_client *c)
{
    if (c->timer_closing)
        return;
    /* closing cached connections may still ask, through curl_socket_cb, to unwatch sockets */
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    curl_global_cleanup();
    while (!hs_queue_empty(&c->socks))
        sock_close(hs_container_of(hs_queue_head(&c->socks), struct sock, link));
    c->timer_closing = true;
    uv_close((uv_handle_t *)&c->timer, handle_closed);
}

void hs_http_client_close(struct hs_http_client *c, void (*closed)(void *ud), void *ud)
{
    if (c->closing) /* already on its way */
        return;
    c->closing = true;
    c->closed = closed;
    c->closed_ud = ud;
    while (!hs_queue_empty(&c->xfers)) /* a done callback may post: refused, as we close */
        xfer_finish(hs_container_of(hs_queue_head(&c->xfers), struct xfer, link),
                    CURLE_ABORTED_BY_CALLBACK, "cancelled");
    if (c->depth == 0)
        client_finish_close(c);
}
