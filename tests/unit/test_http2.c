/* test_http2.c: the server's HTTP/2 (h2c with prior knowledge) on a real loop against libcurl
 * and a raw socket in another thread: concurrent streams on one connection, the body limit per
 * stream, streams answered at headers time among others, HTTP/1.1 still served on the same
 * port, gRPC trailers, GOAWAY when the server closes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "net/grpc.h"
#include "net/http_server.h"
#include "net/http_server_int.h" /* the server's count of buffered body bytes */

struct fix {
    uv_loop_t loop;
    uv_async_t async;
    struct hs_http_server *srv;
    int port;
    void (*client)(struct fix *);
    char fail[512];
    int handled;
    bool closed;
    int early_calls;
    bool early_saw_body; /* on_headers was given a body: it must never be */
    uint64_t body_bytes; /* the server's count of buffered body bytes, just before its close */
};

#define CHECK(f, cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (!(f)->fail[0])                                                                     \
                snprintf((f)->fail, sizeof((f)->fail), "%s:%d: %s", __FILE__, __LINE__, #cond);    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* /echo answers the body length and the path; /grpc answers gRPC with trailers. */
static void handler(void *ud, struct hs_http_request *req)
{
    struct fix *f = ud;
    f->handled++;
    if (hs_str_eq(req->path, "/grpc")) {
        hs_grpc_respond(req, HS_GRPC_UNAVAILABLE, "busy: try later", NULL, 0, false, 1500);
        return;
    }
    char body[128];
    int n = snprintf(body, sizeof(body), "%zu %.*s %s", req->body_len, (int)req->path.len,
                     req->path.ptr, hs_http_request_is_h2(req) ? "h2" : "h1");
    hs_http_respond(req, 200, "text/plain", NULL, 0, body, (size_t)n);
}

/* on_headers: /deny/... is refused before its body, /deny-grpc/... in gRPC's terms. */
static void early_hook(void *ud, struct hs_http_request *req)
{
    struct fix *f = ud;
    f->early_calls++;
    if (req->body || req->body_len)
        f->early_saw_body = true;
    static const struct hs_http_header ch = {HS_STR("www-authenticate"),
                                             HS_STR("Bearer realm=\"t\"")};
    if (req->path.len > 10 && memcmp(req->path.ptr, "/deny-grpc", 10) == 0)
        hs_grpc_respond(req, HS_GRPC_UNAUTHENTICATED, "no credentials", NULL, 0, false, 0);
    else if (req->path.len > 5 && memcmp(req->path.ptr, "/deny", 5) == 0)
        hs_http_respond(req, 401, "text/plain", &ch, 1, "denied\n", 7);
}

/* on_too_large: 413 in "our own format", naming the path */
static int too_large_calls;

static void too_large_hook(void *ud, struct hs_http_request *req)
{
    (void)ud;
    too_large_calls++;
    char body[64];
    int n = snprintf(body, sizeof(body), "too large: %.*s", (int)req->path.len, req->path.ptr);
    hs_http_respond(req, 413, "application/x-test", NULL, 0, body, (size_t)n);
}

static hs_http_handler run_too_large; /* run()'s on_too_large */
/* run()'s limits when set (else 5 s and the server's default) */
static uint64_t run_idle_ms;
static uint32_t run_max_conns, run_per_client;

static void on_closed(void *ud)
{
    ((struct fix *)ud)->closed = true;
}

static void on_async(uv_async_t *a)
{
    struct fix *f = a->data;
    f->body_bytes = f->srv->body_bytes; /* the server is freed by its close */
    hs_http_server_close(f->srv, on_closed, f);
    uv_close((uv_handle_t *)a, NULL);
}

static void *client_main(void *arg)
{
    struct fix *f = arg;
    f->client(f);
    uv_async_send(&f->async); /* the server closes once the client is done */
    return NULL;
}

/* Returns the fixture, for what the server did (it stays until the next run). */
static const struct fix *run(void (*client)(struct fix *), uint64_t max_body,
                             hs_http_handler on_headers)
{
    static struct fix f;
    memset(&f, 0, sizeof(f));
    uv_loop_init(&f.loop);
    struct hs_http_server_config conf = {.endpoint = "127.0.0.1:0",
                                         .max_request_body_size = max_body,
                                         .read_timeout_ms = 5000,
                                         .idle_timeout_ms = run_idle_ms ? run_idle_ms : 5000,
                                         .max_connections = run_max_conns,
                                         .max_connections_per_client = run_per_client};
    struct hs_http_server_opts opts = {.config = &conf,
                                       .name = "t",
                                       .handler = handler,
                                       .on_headers = on_headers,
                                       .on_too_large = run_too_large,
                                       .ud = &f};
    struct hs_error err = {0};
    assert_int_equal(hs_http_server_start(&f.loop, &opts, &f.srv, &err), 0);
    f.port = hs_http_server_port(f.srv);
    f.client = client;
    uv_async_init(&f.loop, &f.async, on_async);
    f.async.data = &f;
    pthread_t t;
    pthread_create(&t, NULL, client_main, &f);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    assert_true(f.closed);
    assert_int_equal(uv_loop_close(&f.loop), 0); /* nothing left in the loop */
    if (f.fail[0])
        fail_msg("%s", f.fail);
    return &f;
}

struct resp {
    struct hs_buf body;
    struct hs_buf headers;
};

static size_t on_body(char *p, size_t s, size_t n, void *ud)
{
    hs_buf_append(&((struct resp *)ud)->body, p, s * n);
    return s * n;
}

static size_t on_header(char *p, size_t s, size_t n, void *ud)
{
    hs_buf_append(&((struct resp *)ud)->headers, p, s * n);
    return s * n;
}

static CURL *easy(struct fix *f, const char *path, const char *body, size_t blen, bool h2,
                  struct resp *r)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->port, path);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     h2 ? (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)blen);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
    return e;
}

#define NSTREAMS 20

/* A blocking nghttp2 client session: libcurl 7.88 (this system's) fails multiplexed streams and
 * treats RST_STREAM(NO_ERROR) after an early answer as an error, so it cannot judge these. */
struct cli {
    int fd;
    int status[NSTREAMS + 1];
    uint32_t reset[NSTREAMS + 1];  /* the error code the stream closed with */
    int grpc_status[NSTREAMS + 1]; /* -1: none */
    struct hs_buf body[NSTREAMS + 1];
    int closed;
    const uint8_t *data;
    size_t len;
};

static int cli_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *n, size_t nl,
                      const uint8_t *v, size_t vl, uint8_t flags, void *ud)
{
    struct cli *c = ud;
    int idx = (fr->hd.stream_id - 1) / 2;
    if (nl == 7 && memcmp(n, ":status", 7) == 0 && idx <= NSTREAMS)
        c->status[idx] = atoi((const char *)v);
    if (nl == 11 && memcmp(n, "grpc-status", 11) == 0 && idx <= NSTREAMS)
        c->grpc_status[idx] = atoi((const char *)v);
    return 0;
}

static int cli_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t len,
                    void *ud)
{
    struct cli *c = ud;
    hs_buf_append(&c->body[(id - 1) / 2], d, len);
    return 0;
}

static int cli_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
    struct cli *c = ud;
    c->closed++;
    if ((id - 1) / 2 <= NSTREAMS)
        c->reset[(id - 1) / 2] = err;
    return 0;
}

static ssize_t cli_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    size_t *left = src->ptr;
    size_t n = *left < length ? *left : length;
    memset(buf, 'a', n);
    *left -= n;
    if (!*left)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Opens n streams at once, each POSTing body[i] bytes to <prefix[i]>/<i> (prefix NULL: all
 * /echo), stream 0 with `extra` header fields too; runs until all closed. */
static void h2_exchange_nv(struct fix *f, struct cli *c, int n, size_t *blen,
                           const char *const *prefix, const nghttp2_nv *extra, size_t nextra)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i <= NSTREAMS; i++)
        c->grpc_status[i] = -1;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        return;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, cli_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cli_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, cli_close);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
    char paths[NSTREAMS][32], clen[NSTREAMS][24];
    for (int i = 0; i < n; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/%d", prefix ? prefix[i] : "/echo", i);
        snprintf(clen[i], sizeof(clen[i]), "%zu", blen[i]);
        nghttp2_nv nv[8] = {
            {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
            {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
            {(uint8_t *)":authority", (uint8_t *)"t", 10, 1, 0},
            {(uint8_t *)":path", (uint8_t *)paths[i], 5, strlen(paths[i]), 0},
        };
        size_t nnv = 4;
        for (size_t k = 0; i == 0 && k < nextra && nnv < 8; k++)
            nv[nnv++] = extra[k];
        nghttp2_data_provider prd = {.source.ptr = &blen[i], .read_callback = cli_read};
        nghttp2_submit_request(s, NULL, nv, nnv, &prd, NULL);
    }
    uint8_t buf[65536];
    while (c->closed < n && (nghttp2_session_want_read(s) || nghttp2_session_want_write(s))) {
        const uint8_t *out;
        ssize_t k;
        while ((k = nghttp2_session_mem_send(s, &out)) > 0)
            if (write(c->fd, out, (size_t)k) != k)
                goto done;
        if (c->closed >= n)
            break;
        ssize_t r = read(c->fd, buf, sizeof(buf));
        if (r <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)r) < 0)
            break;
    }
done:
    nghttp2_session_del(s);
    close(c->fd);
}

static void h2_exchange(struct fix *f, struct cli *c, int n, size_t *blen,
                        const char *const *prefix)
{
    h2_exchange_nv(f, c, n, blen, prefix, NULL, 0);
}

static void cli_free(struct cli *c)
{
    for (int i = 0; i <= NSTREAMS; i++)
        hs_buf_free(&c->body[i]);
}

static void concurrent_client(struct fix *f)
{
    static struct cli c;
    size_t blen[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++)
        blen[i] = (size_t)(1000 + i * 100);
    h2_exchange(f, &c, NSTREAMS, blen, NULL);
    for (int i = 0; i < NSTREAMS; i++) {
        char want[64];
        snprintf(want, sizeof(want), "%d /echo/%d h2", 1000 + i * 100, i); /* blen is spent */
        CHECK(f, c.status[i] == 200);
        CHECK(f, c.body[i].len == strlen(want) && memcmp(c.body[i].data, want, c.body[i].len) == 0);
    }
    CHECK(f, f->handled == NSTREAMS); /* on one connection: h2_exchange opened one */
    cli_free(&c);
    /* a stream over max_request_body_size is 413 (or RST) without reaching the handler,
     * while its sibling on the same connection is served */
    size_t two[2] = {150000, 10};
    h2_exchange(f, &c, 2, two, NULL);
    CHECK(f, c.status[0] == 413);
    CHECK(f, c.status[1] == 200);
    CHECK(f, f->handled == NSTREAMS + 1);
    cli_free(&c);
}

/* on_too_large answers a stream whose DATA outgrows the limit (no content-length announced),
 * in its own format; the sibling stream on the connection is served. */
static void too_large_client(struct fix *f)
{
    static struct cli c;
    size_t two[2] = {150000, 10};
    h2_exchange(f, &c, 2, two, NULL);
    CHECK(f, c.status[0] == 413);
    CHECK(f, c.body[0].len == 18 && memcmp(c.body[0].data, "too large: /echo/0", 18) == 0);
    CHECK(f, c.status[1] == 200);
    CHECK(f, f->handled == 1);
    CHECK(f, too_large_calls == 1);
    cli_free(&c);
}

static void test_too_large_hook(void **state)
{
    (void)state;
    too_large_calls = 0;
    run_too_large = too_large_hook;
    run(too_large_client, 100000, NULL);
    run_too_large = NULL;
}

static void test_concurrent_streams(void **state)
{
    (void)state;
    run(concurrent_client, 100000, NULL);
}

#define EARLY_BIG ((size_t)4 << 20)
#define EARLY_SMALL ((size_t)200000)

/* Of NSTREAMS streams on one connection, the even ones are refused at headers time (401, or
 * gRPC UNAUTHENTICATED) with 4 MiB bodies, more than the stream and connection windows; the odd
 * ones are served. The refused never reach the handler nor keep a byte, the others complete
 * whole: the DATA dropped for the refused still opened the connection's window. */
static const char *early_prefix(int i)
{
    return i % 2 ? "/echo" : i % 4 ? "/deny-grpc" : "/deny";
}

static void early_client(struct fix *f)
{
    static struct cli c;
    size_t blen[NSTREAMS];
    const char *prefix[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++) {
        blen[i] = i % 2 ? EARLY_SMALL : EARLY_BIG;
        prefix[i] = early_prefix(i);
    }
    h2_exchange(f, &c, NSTREAMS, blen, prefix);
    CHECK(f, c.closed == NSTREAMS);
    for (int i = 0; i < NSTREAMS; i++) {
        char want[64];
        snprintf(want, sizeof(want), "%zu /echo/%d h2", EARLY_SMALL, i);
        if (i % 4 == 0) {
            CHECK(f, c.status[i] == 401);
            CHECK(f, c.body[i].len == 7 && memcmp(c.body[i].data, "denied\n", 7) == 0);
        } else if (i % 2 == 0) {
            CHECK(f, c.status[i] == 200 && c.grpc_status[i] == HS_GRPC_UNAUTHENTICATED);
        } else {
            CHECK(f, c.status[i] == 200);
            CHECK(f, c.body[i].len == strlen(want) &&
                         memcmp(c.body[i].data, want, c.body[i].len) == 0);
        }
    }
    cli_free(&c);
}

static void test_early_answer_among_streams(void **state)
{
    (void)state;
    const struct fix *f = run(early_client, 8u << 20, early_hook);
    assert_int_equal(f->handled, NSTREAMS / 2);     /* the /echo streams */
    assert_int_equal(f->early_calls, NSTREAMS);     /* every stream, before its body */
    assert_false(f->early_saw_body);
    /* not one byte of the refused bodies */
    assert_int_equal(f->body_bytes, NSTREAMS / 2 * EARLY_SMALL);
}

static long one(struct fix *f, const char *path, size_t blen, bool h2, struct resp *r)
{
    static char body[200000];
    memset(body, 'b', sizeof(body));
    CURL *e = easy(f, path, body, blen, h2, r);
    long code = 0;
    CURLcode cc = curl_easy_perform(e);
    if (cc == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    else
        fprintf(stderr, "transfer: %s\n", curl_easy_strerror(cc));
    curl_easy_cleanup(e);
    return code;
}

static void limits_client(struct fix *f)
{
    struct resp r = {0};
    CHECK(f, one(f, "/echo", 50000, true, &r) == 200);
    hs_buf_free(&r.body);
    hs_buf_free(&r.headers);
    /* HTTP/1.1 on the same port */
    CHECK(f, one(f, "/echo", 10, false, &r) == 200);
    CHECK(f, r.body.len >= 2 && memcmp(r.body.data + r.body.len - 2, "h1", 2) == 0);
    hs_buf_free(&r.body);
    hs_buf_free(&r.headers);
    /* gRPC's answer: status in trailers (Trailers-Only here), RetryInfo attached */
    CHECK(f, one(f, "/grpc", 5, true, &r) == 200);
    hs_buf_putc(&r.headers, '\0');
    const char *h = (const char *)r.headers.data;
    CHECK(f, strstr(h, "grpc-status: 14\r\n") != NULL);
    CHECK(f, strstr(h, "grpc-message: busy: try later\r\n") != NULL);
    const char *d = strstr(h, "grpc-status-details-bin: ");
    CHECK(f, d != NULL);
    d += strlen("grpc-status-details-bin: ");
    uint64_t ms = 0;
    CHECK(f, hs_grpc_details_retry_delay(d, strcspn(d, "\r\n"), &ms) && ms == 1500);
    hs_buf_free(&r.body);
    hs_buf_free(&r.headers);
}

static void test_limits_h1_and_trailers(void **state)
{
    (void)state;
    run(limits_client, 100000, NULL);
}

/* A raw h2c client: preface + SETTINGS, then the server is told to close: it must say GOAWAY
 * before its FIN. */
static void goaway_client(struct fix *f)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    CHECK(f, connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    static const char hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    CHECK(f, write(fd, hello, sizeof(hello) - 1) == (ssize_t)sizeof(hello) - 1);
    uint8_t buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf)); /* the server's SETTINGS */
    CHECK(f, n >= 9 && buf[3] == 0x04);
    uv_async_send(&f->async); /* close the server now */
    bool goaway = false;
    size_t have = 0;
    for (;;) {
        n = read(fd, buf + have, sizeof(buf) - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t off = 0;
        while (have - off >= 9) {
            size_t len = (size_t)buf[off] << 16 | (size_t)buf[off + 1] << 8 | buf[off + 2];
            if (have - off < 9 + len)
                break;
            if (buf[off + 3] == 0x07)
                goaway = true;
            off += 9 + len;
        }
        memmove(buf, buf + off, have - off);
        have -= off;
    }
    close(fd);
    CHECK(f, goaway);
}

static void test_goaway_on_close(void **state)
{
    (void)state;
    run(goaway_client, 1000, NULL);
}

/* HTTP/1.1's "Content-Length : 10" has no HTTP/2 twin that gets through: nghttp2 takes a field
 * name with a space (or upper case) for a malformed request and resets the stream
 * (PROTOCOL_ERROR) before the handler, and a body longer than its content-length too; the
 * sibling stream is served. */
static void bad_fields_client(struct fix *f)
{
    static struct cli c;
    const nghttp2_nv bad[][1] = {
        {{(uint8_t *)"content-length ", (uint8_t *)"3", 15, 1, 0}},
        {{(uint8_t *)"Content-Length", (uint8_t *)"3", 14, 1, 0}},
        {{(uint8_t *)"content-length", (uint8_t *)"3", 14, 1, 0}}, /* 10 bytes follow */
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad); i++) {
        size_t two[2] = {10, 10};
        h2_exchange_nv(f, &c, 2, two, NULL, bad[i], 1);
        CHECK(f, c.closed == 2);
        CHECK(f, c.status[0] == 0 && c.reset[0] == NGHTTP2_PROTOCOL_ERROR);
        CHECK(f, c.status[1] == 200 && c.reset[1] == NGHTTP2_NO_ERROR);
        cli_free(&c);
    }
    CHECK(f, f->handled == (int)HS_ARRAY_SIZE(bad)); /* the siblings only */
}

static void test_malformed_fields_reset(void **state)
{
    (void)state;
    run(bad_fields_client, 1000, NULL);
}

/* Reads frames until EOF (or the 5 s receive timeout); true if a GOAWAY came first. */
static bool read_goaway_then_eof(int fd)
{
    uint8_t buf[4096];
    size_t have = 0;
    bool goaway = false;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - have);
        if (n < 0)
            return false; /* a timeout: the server kept the connection */
        if (n == 0)
            return goaway;
        have += (size_t)n;
        size_t off = 0;
        while (have - off >= 9) {
            size_t len = (size_t)buf[off] << 16 | (size_t)buf[off + 1] << 8 | buf[off + 2];
            if (have - off < 9 + len)
                break;
            goaway |= buf[off + 3] == 0x07;
            off += 9 + len;
        }
        memmove(buf, buf + off, have - off);
        have -= off;
    }
}

/* An h2c connection: preface, SETTINGS, and the server's SETTINGS read. */
static int h2_idle_conn(struct fix *f, const char *from)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &me.sin_addr);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    static const char hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    uint8_t buf[256];
    if (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        write(fd, hello, sizeof(hello) - 1) != (ssize_t)sizeof(hello) - 1 ||
        read(fd, buf, sizeof(buf)) < 9) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A client that sends the preface and opens no stream has idle_timeout (200 ms here), as an
 * HTTP/1.1 connection without a request has: GOAWAY, then the connection ends. */
static void idle_preface_client(struct fix *f)
{
    int fd = h2_idle_conn(f, "127.0.0.1");
    CHECK(f, fd >= 0);
    bool ok = read_goaway_then_eof(fd);
    close(fd);
    CHECK(f, ok);
}

static void test_idle_after_preface(void **state)
{
    (void)state;
    run_idle_ms = 200;
    run(idle_preface_client, 1000, NULL);
    run_idle_ms = 0;
}

/* At max_connections (1), an idle HTTP/2 connection gives its slot to a newcomer from another
 * address: GOAWAY, EOF, and the newcomer's request is served. */
static void reclaim_client(struct fix *f)
{
    int fd = h2_idle_conn(f, "127.0.0.1");
    CHECK(f, fd >= 0);
    int g = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.2", &me.sin_addr);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    static const char req[] = "POST /new HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    char buf[512] = "";
    bool sent = bind(g, (struct sockaddr *)&me, sizeof(me)) == 0 &&
                connect(g, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                write(g, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1 &&
                read(g, buf, sizeof(buf) - 1) > 0;
    close(g);
    bool goaway = read_goaway_then_eof(fd);
    close(fd);
    CHECK(f, sent && strncmp(buf, "HTTP/1.1 200 ", 13) == 0 && strstr(buf, "0 /new h1"));
    CHECK(f, goaway);
}

static void test_reclaim_idle_h2(void **state)
{
    (void)state;
    run_max_conns = 1;
    run_per_client = 1;
    run_idle_ms = 60000; /* only the reclaim can end the idle connection within the test */
    run(reclaim_client, 1000, NULL);
    run_max_conns = run_per_client = 0;
    run_idle_ms = 0;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_streams),
        cmocka_unit_test(test_too_large_hook),
        cmocka_unit_test(test_early_answer_among_streams),
        cmocka_unit_test(test_limits_h1_and_trailers),
        cmocka_unit_test(test_goaway_on_close),
        cmocka_unit_test(test_malformed_fields_reset),
        cmocka_unit_test(test_idle_after_preface),
        cmocka_unit_test(test_reclaim_idle_h2),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
