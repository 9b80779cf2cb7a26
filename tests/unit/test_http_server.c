/* test_http_server.c: the HTTP/1.1 server on a loop in this thread against a blocking-socket
 * client in another: keep-alive, pipelining, chunked bodies, 100-continue, every limit and
 * timeout, hostile clients, unread responses, answers at headers time that keep no body, and a
 * close that leaves nothing in the loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <http_parser.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/errors.h"
#include "net/http_server.h"
#include "net/http_server_int.h" /* to see a connection's unwritten bytes */
#include "core/log.h"
#include "core/metrics.h"
#include "sock_client.c"

#define BIG_SIZE ((size_t)256 << 10)
#define BIG_COUNT 128

struct fix {
    uv_loop_t loop;
    uv_async_t async;
    struct hs_http_server *srv;
    struct hs_http_server_config conf;
    int port;
    void (*client)(struct fix *);
    char fail[512];
    bool signalled;   /* client thread only */
    bool done_called; /* loop thread only */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool close_called;
    atomic_int handled;
    size_t most_unwritten; /* the largest backlog of response bytes a handler saw */
    bool early;            /* start the server with on_headers */
    atomic_int early_calls;
    bool early_saw_body;  /* on_headers was given a body: it must never be */
    uint64_t body_bytes;  /* the server's count of buffered body bytes, just before its close */
    struct hs_buf taken[4]; /* bodies /take moved out of the server */
    int ntaken;
    struct hs_metrics *metrics;
    /* a second server started with fd_reserve (as the admin endpoint is), and what the check
     * of the file limit said once both were listening */
    bool with_reserve;
    struct hs_http_server *reserve;
    int reserve_port;
    bool file_limit_ok;
};

/* Client-side checks cannot use cmocka (it longjmps); the first failure is kept for the test. */
#define CHECK(f, cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (!(f)->fail[0])                                                                     \
                snprintf((f)->fail, sizeof((f)->fail), "%s:%d: %s", __FILE__, __LINE__, #cond);    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- the server side ------------------------------------------------------------------- */

static void big_answer(struct fix *f, struct hs_http_request *req)
{
    static char big[BIG_SIZE];
    char q[16] = "";
    if (req->query.len > 2 && req->query.len < sizeof(q) + 2) /* "n=7" */
        memcpy(q, req->query.ptr + 2, req->query.len - 2);
    int n = atoi(q);
    f->most_unwritten = HS_MAX(f->most_unwritten, req->conn->write_pending);
    memset(big, 'x', sizeof(big));
    int k = snprintf(big, 32, "resp %d\n", n);
    big[k] = 'x';
    hs_http_respond(req, 200, "application/octet-stream", NULL, 0, big, sizeof(big));
}

static void handler(void *ud, struct hs_http_request *req)
{
    struct fix *f = ud;
    atomic_fetch_add(&f->handled, 1);
    if (hs_str_eq(req->path, "/big")) {
        big_answer(f, req);
        return;
    }
    if (hs_str_eq(req->path, "/silent")) /* a handler that forgets to answer */
        return;
    if (hs_str_eq(req->path, "/take")) { /* keep the body's own buffer, as receivers do */
        struct hs_buf got = {0};
        int rc = hs_http_request_take_body(req, &got);
        bool ok = rc == 0 ? got.data == req->body && got.len == req->body_len && f->ntaken < 4
                          : rc == HS_ENOENT && req->body_len == 0;
        if (rc == 0 && f->ntaken < 4)
            f->taken[f->ntaken++] = got;
        else
            hs_buf_free(&got);
        hs_http_respond_text(req, ok ? 200 : 500, rc == 0 ? "taken\n" : "nothing to take\n");
        return;
    }
    struct hs_buf b = {0};
    if (hs_str_eq(req->path, "/names")) { /* the headers as the server stored them */
        for (size_t i = 0; i < req->header_count; i++)
            hs_buf_printf(&b, "%s%.*s=%.*s", i ? "," : "", (int)req->headers[i].name.len,
                          req->headers[i].name.ptr, (int)req->headers[i].value.len,
                          req->headers[i].value.ptr);
        hs_buf_printf(&b, " body=%.*s", (int)req->body_len, (const char *)req->body);
        hs_http_respond(req, 200, NULL, NULL, 0, b.data, b.len);
        hs_buf_free(&b);
        return;
    }
    const struct hs_str *x = hs_http_request_header(req, "X-TEST");
    hs_buf_printf(&b, "method=%s path=%.*s query=%.*s x-test=%.*s body=%.*s", req->method,
                  (int)req->path.len, req->path.ptr, (int)req->query.len, req->query.ptr,
                  x ? (int)x->len : 1, x ? x->ptr : "-", (int)req->body_len,
                  (const char *)req->body);
    static const struct hs_http_header extra = {HS_STR("X-Echo"), HS_STR("yes")};
    hs_http_respond(req, 200, "text/plain", &extra, 1, b.data, b.len);
    hs_buf_free(&b);
}

/* on_headers: /deny... is refused as an authenticating receiver would, before the body;
 * ?trailers answers through hs_http_respond_trailers. Anything else goes on to the handler. */
static void early_hook(void *ud, struct hs_http_request *req)
{
    struct fix *f = ud;
    atomic_fetch_add(&f->early_calls, 1);
    if (req->body || req->body_len)
        f->early_saw_body = true;
    if (req->path.len < 5 || memcmp(req->path.ptr, "/deny", 5) != 0)
        return;
    static const struct hs_http_header ch = {HS_STR("WWW-Authenticate"),
                                             HS_STR("Bearer realm=\"t\"")};
    static const struct hs_http_header tr = {HS_STR("grpc-status"), HS_STR("16")};
    if (hs_str_eq(req->query, "trailers"))
        hs_http_respond_trailers(req, 401, "text/plain", &ch, 1, "denied\n", 7, &tr, 1);
    else
        hs_http_respond(req, 401, "text/plain", &ch, 1, "denied\n", 7);
}

static void on_done(void *ud)
{
    struct fix *f = ud;
    f->done_called = true;
}

static void on_async(uv_async_t *a)
{
    struct fix *f = a->data;
    f->body_bytes = f->srv->body_bytes; /* the server is freed by its close */
    hs_http_server_close(f->srv, on_done, f);
    if (f->reserve)
        hs_http_server_close(f->reserve, NULL, NULL);
    uv_close((uv_handle_t *)a, NULL);
    pthread_mutex_lock(&f->mu);
    f->close_called = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Called by the client: close the server now and wait until hs_http_server_close has run. */
static void request_close(struct fix *f)
{
    if (f->signalled)
        return;
    f->signalled = true;
    uv_async_send(&f->async);
    pthread_mutex_lock(&f->mu);
    while (!f->close_called)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void *client_main(void *arg)
{
    struct fix *f = arg;
    f->client(f);
    request_close(f);
    return NULL;
}

static void run(struct fix *f, void (*client)(struct fix *))
{
    struct hs_error err = {0};
    const struct hs_http_server_opts opts = {.config = &f->conf,
                                             .name = "test",
                                             .handler = handler,
                                             .on_headers = f->early ? early_hook : NULL,
                                             .ud = f,
                                             .metrics = f->metrics};
    assert_int_equal(hs_http_server_start(&f->loop, &opts, &f->srv, &err), 0);
    assert_int_equal(err.count, 0);
    f->port = hs_http_server_port(f->srv);
    assert_true(f->port > 0);
    if (f->with_reserve) {
        struct hs_http_server_opts ro = opts;
        ro.name = "reserve";
        ro.fd_reserve = true;
        assert_int_equal(hs_http_server_start(&f->loop, &ro, &f->reserve, &err), 0);
        f->reserve_port = hs_http_server_port(f->reserve);
    }
    f->file_limit_ok = hs_http_server_check_file_limit();
    assert_int_equal(uv_async_init(&f->loop, &f->async, on_async), 0);
    f->async.data = f;
    f->client = client;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, client_main, f), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
    if (f->fail[0])
        fail_msg("client: %s", f->fail);
    assert_true(f->done_called);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    uv_loop_init(&f->loop);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    if (hs_config_decode(hs_http_server_fields_common, NULL, &f->conf, "test", NULL) != 0)
        return -1;
    f->conf.endpoint = "127.0.0.1:0";
    f->conf.read_timeout_ms = 5000; /* a failed client leaves a request open: end it sooner */
    f->metrics = hs_metrics_new();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    hs_http_server_set_file_limit(0);
    hs_metrics_free(f->metrics);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
    return 0;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void client_echo(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c,
                      "POST /v1/echo?a=1&b=2 HTTP/1.1\r\nHost: x\r\nX-Test: Hello\r\n"
                      "Content-Length: 5\r\n\r\nhello",
                      &r));
    CHECK(f, r.status == 200);
    CHECK(f,
          strcmp(r.body, "method=POST path=/v1/echo query=a=1&b=2 x-test=Hello body=hello") == 0);
    CHECK(f, strncmp(r.head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(f, strstr(r.head, "\r\nContent-Type: text/plain\r\n"));
    CHECK(f, strstr(r.head, "\r\nContent-Length: 63\r\n"));
    CHECK(f, strstr(r.head, "\r\nConnection: keep-alive\r\n"));
    CHECK(f, strstr(r.head, "\r\nX-Echo: yes\r\n"));
    free(r.body);
    cclose(&c);
}

static void test_echo(void **state)
{
    run(*state, client_echo);
}

/* Every byte in its own segment: names, values and the URL arrive in pieces. */
static void client_bytewise(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    static const char req[] = "POST /names?x=1 HTTP/1.1\r\nHost: h\r\nX-TeSt: Va lue\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    int one = 1;
    CHECK(f, cconnect(f->port, &c, 0));
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (size_t i = 0; i < sizeof(req) - 1; i++)
        CHECK(f, csend(&c, req + i, 1));
    CHECK(f, cread(&c, &r));
    CHECK(f, r.status == 200);
    CHECK(f, strcmp(r.body, "host=h,x-test=Va lue,transfer-encoding=chunked body=abc") == 0);
    CHECK(f, !find_header(r.head, "content-type"));
    free(r.body);
    cclose(&c);
}

static void test_bytewise(void **state)
{
    run(*state, client_bytewise);
}

static void client_keepalive(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /one HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/one "));
    free(r.body);
    CHECK(f, exchange(&c, "GET /two HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/two "));
    free(r.body);
    cclose(&c);
}

static void test_keepalive(void **state)
{
    struct fix *f = *state;
    run(f, client_keepalive);
    assert_int_equal(atomic_load(&f->handled), 2);
}

static void client_pipelined(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csends(&c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
                        "POST /second?q HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"));
    CHECK(f, cread(&c, &r));
    CHECK(f, r.status == 200 && strstr(r.body, "method=GET path=/first query= "));
    free(r.body);
    CHECK(f, cread(&c, &r));
    CHECK(f, r.status == 200 && strstr(r.body, "method=POST path=/second query=q ") &&
                 strstr(r.body, "body=abc"));
    free(r.body);
    cclose(&c);
}

/* A handler that returns without answering: the server answers 500 for it (the client is not
 * left waiting until a timeout) and the connection serves the next request. */
static void client_unanswered(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /silent HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 500 && strstr(r.body, "did not answer"));
    free(r.body);
    CHECK(f, exchange(&c, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/after "));
    free(r.body);
    cclose(&c);
}

static void test_unanswered(void **state)
{
    run(*state, client_unanswered);
}

static void test_pipelined(void **state)
{
    run(*state, client_pipelined);
}

/* Bodies taken by the handler (hs_http_request_take_body) stay the handler's: intact after the
 * connection has gone on to the next requests, freed by their new owner (ASan would see a
 * second free or a later write by the server). */
static void client_take(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csends(&c, "POST /take HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                        "POST /take HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "2\r\nde\r\n3\r\nfgh\r\n0\r\n\r\n"
                        "POST /take HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
                        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz"));
    for (int i = 0; i < 3; i++) {
        CHECK(f, cread(&c, &r));
        CHECK(f, r.status == 200);
        free(r.body);
    }
    CHECK(f, cread(&c, &r));
    CHECK(f, r.status == 200 && strstr(r.body, "body=xyz"));
    free(r.body);
    cclose(&c);
}

static void test_take_body(void **state)
{
    struct fix *f = *state;
    run(f, client_take);
    assert_int_equal(f->ntaken, 2);
    assert_int_equal(f->taken[0].len, 3);
    assert_memory_equal(f->taken[0].data, "abc", 3);
    assert_int_equal(f->taken[1].len, 5);
    assert_memory_equal(f->taken[1].data, "defgh", 5);
    for (int i = 0; i < f->ntaken; i++)
        hs_buf_free(&f->taken[i]);
}

static void client_chunked(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csends(&c, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "5\r\nhel"));
    CHECK(f, exchange(&c, "lo\r\n6\r\n world\r\n0\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "body=hello world"));
    free(r.body);
    cclose(&c);
}

static void test_chunked(void **state)
{
    run(*state, client_chunked);
}

static void client_expect(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    /* the body is sent only after the 100: a server that waited for it would time out */
    CHECK(f, exchange(&c,
                      "POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      "Content-Length: 4\r\n\r\n",
                      &r));
    CHECK(f, r.status == 100 && strcmp(r.head, "HTTP/1.1 100 Continue\r\n\r\n") == 0);
    free(r.body);
    CHECK(f, exchange(&c, "data", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "body=data"));
    free(r.body);
    cclose(&c);
}

static void test_expect_continue(void **state)
{
    run(*state, client_expect);
}

static void client_too_long(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n",
                      &r));
    CHECK(f, r.status == 413 && strstr(r.head, "\r\nConnection: close\r\n"));
    CHECK(f, strstr(r.body, "max_request_body_size"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* with Expect: the 413 comes instead of the 100 */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c,
                      "POST /v1/traces HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      "Content-Length: 1025\r\n\r\n",
                      &r));
    CHECK(f, r.status == 413);
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
}

static void test_413_content_length_before_body(void **state)
{
    struct fix *f = *state;
    f->conf.max_request_body_size = 1024;
    run(f, client_too_long);
    assert_int_equal(atomic_load(&f->handled), 0);
}

static void client_too_long_chunked(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    char req[4096];
    int n = snprintf(req, sizeof(req),
                     "POST /c HTTP/1.1\r\nHost: x\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n400\r\n");
    memset(req + n, 'a', 1024);
    n += 1024;
    n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n1\r\nb\r\n0\r\n\r\n");
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csend(&c, req, (size_t)n) && cread(&c, &r));
    CHECK(f, r.status == 413 && strstr(r.head, "\r\nConnection: close\r\n"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
}

static void test_413_chunked(void **state)
{
    struct fix *f = *state;
    f->conf.max_request_body_size = 1024;
    run(f, client_too_long_chunked);
    assert_int_equal(atomic_load(&f->handled), 0);
}

static void client_big_header(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    char req[8192];
    int n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', 4000);
    n += 4000;
    n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n\r\n");
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csend(&c, req, (size_t)n) && cread(&c, &r));
    CHECK(f, r.status == 431 && strstr(r.head, "Request Header Fields Too Large"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
}

static void test_431_header_too_big(void **state)
{
    struct fix *f = *state;
    f->conf.max_header_size = 1024;
    run(f, client_big_header);
    assert_int_equal(atomic_load(&f->handled), 0);
}

static void client_garbage(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "\x01\x02 garbage \xff\r\n\r\n", &r));
    CHECK(f, r.status == 400);
    CHECK(f, strstr(r.body, http_errno_description(HPE_INVALID_METHOD)));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* garbage after a good request: the good one is answered first */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/9.Z\r\n\r\n", &r));
    CHECK(f, r.status == 200);
    free(r.body);
    CHECK(f, cread(&c, &r));
    CHECK(f, r.status == 400 && strstr(r.body, "400 bad request: "));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
}

static void test_400_garbage(void **state)
{
    struct fix *f = *state;
    run(f, client_garbage);
    assert_int_equal(atomic_load(&f->handled), 1);
}

/* RFC 9112 section 5.1: no whitespace between a field name and its colon; http_parser would
 * take "Content-Length : 10" for the length. */
static void client_space_before_colon(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    const char *reqs[] = {"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length : 10\r\n\r\n0123456789",
                          "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n"
                          "a\r\n0123456789\r\n0\r\n\r\n"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(reqs); i++) {
        CHECK(f, cconnect(f->port, &c, 0));
        CHECK(f, exchange(&c, reqs[i], &r));
        CHECK(f, r.status == 400 && strstr(r.body, "whitespace in a header field name"));
        free(r.body);
        CHECK(f, ceof(&c));
        cclose(&c);
    }
}

static void test_400_space_before_colon(void **state)
{
    struct fix *f = *state;
    run(f, client_space_before_colon);
    assert_int_equal(atomic_load(&f->handled), 0);
}

/* A chunk size past 2^64-1: http_parser says "content-length"; the answer names the chunk. */
static void client_chunk_overflow(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c,
                      "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "1ffffffffffffffff\r\n",
                      &r));
    CHECK(f, r.status == 400 && strstr(r.body, "invalid chunk size"));
    CHECK(f, !strstr(r.body, "content-length"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* an overflowing Content-Length is still told as one */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c,
                      "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
                      &r));
    CHECK(f, r.status == 400 && strstr(r.body, "content-length"));
    free(r.body);
    cclose(&c);
}

static void test_400_chunk_size_overflow(void **state)
{
    struct fix *f = *state;
    run(f, client_chunk_overflow);
    assert_int_equal(atomic_load(&f->handled), 0);
}

static void client_slow(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "POST /slow HTTP/1.1\r\nHost: x\r\n", &r)); /* then nothing */
    CHECK(f, r.status == 408 && strstr(r.head, "\r\nConnection: close\r\n"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* a body that stops half-way is the same */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", &r));
    CHECK(f, r.status == 408);
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
}

static void test_408_read_timeout(void **state)
{
    struct fix *f = *state;
    f->conf.read_timeout_ms = 200;
    run(f, client_slow);
    assert_int_equal(atomic_load(&f->handled), 0);
}

static void client_idle(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.head, "keep-alive"));
    free(r.body);
    CHECK(f, ceof(&c)); /* no response: the connection just ends */
    cclose(&c);
}

static void test_idle_timeout(void **state)
{
    struct fix *f = *state;
    f->conf.idle_timeout_ms = 200;
    run(f, client_idle);
}

/* The server's count of connections refused for `reason` (or reclaimed, reason NULL). */
static uint64_t refused(struct fix *f, const char *reason)
{
    char labels[128];
    if (!reason)
        return hs_metrics_counter(f->metrics, "http_server_connections_reclaimed_total", "",
                                  "server=\"test\"")
            ->value;
    snprintf(labels, sizeof(labels), "server=\"test\",reason=\"%s\"", reason);
    return hs_metrics_counter(f->metrics, "http_server_connections_refused_total", "", labels)
        ->value;
}

/* cconnect from another loopback address (all of 127/8 is loopback on Linux). */
static bool cconnect_from(int port, struct cconn *c, const char *from)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &me.sin_addr);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return c->fd >= 0 && bind(c->fd, (struct sockaddr *)&me, sizeof(me)) == 0 &&
           connect(c->fd, (struct sockaddr *)&a, sizeof(a)) == 0;
}

/* A request begun, so the connection is not idle: the 100 proves the server has read its
 * headers (else an accept could see it still idle). Its body ("ok") is sent later. */
#define BEGUN "POST /begun HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"

static bool begin_request(int port, struct cconn *c, const char *from)
{
    struct resp r = {0};
    bool ok = cconnect_from(port, c, from) && exchange(c, BEGUN, &r) && r.status == 100;
    free(r.body);
    return ok;
}

static bool end_request(struct cconn *c)
{
    struct resp r = {0};
    bool ok = exchange(c, "ok", &r) && r.status == 200 && strstr(r.body, "body=ok");
    free(r.body);
    cclose(c);
    return ok;
}

/* Two requests begun, from two addresses: a third connection, from a third, is closed at
 * once. */
static void client_max_conns(struct fix *f)
{
    struct cconn a, b, c;
    CHECK(f, begin_request(f->port, &a, "127.0.0.1"));
    CHECK(f, begin_request(f->port, &b, "127.0.0.2"));
    CHECK(f, cconnect_from(f->port, &c, "127.0.0.3"));
    CHECK(f, ceof(&c));
    cclose(&c);
    CHECK(f, end_request(&a) && end_request(&b));
}

static void test_max_connections(void **state)
{
    struct fix *f = *state;
    f->conf.max_connections = 2;
    f->conf.max_connections_per_client = 1;
    run(f, client_max_conns);
    assert_int_equal(atomic_load(&f->handled), 2);
    assert_int_equal(refused(f, "max_connections"), 1);
    assert_int_equal(refused(f, NULL), 0);
}

/* At max_connections a newcomer takes the slot of the connection idle longest: a (idle since
 * its answer) goes, b (idle since it connected, later) stays. One address each. */
static void client_reclaim(struct fix *f)
{
    struct cconn a, b, c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &a, 0));
    CHECK(f, exchange(&a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200);
    free(r.body);
    CHECK(f, cconnect_from(f->port, &b, "127.0.0.2") && cconnect_from(f->port, &c, "127.0.0.3"));
    CHECK(f, exchange(&c, "GET /c HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/c "));
    free(r.body);
    CHECK(f, ceof(&a));
    CHECK(f, exchange(&b, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/b "));
    free(r.body);
    cclose(&a);
    cclose(&b);
    cclose(&c);
}

static void test_reclaim_idle_at_max(void **state)
{
    struct fix *f = *state;
    f->conf.max_connections = 2;
    f->conf.max_connections_per_client = 1;
    f->conf.busy_timeout_ms = 60000; /* only the reclaim can end a, within the test */
    run(f, client_reclaim);
    assert_int_equal(refused(f, NULL), 1);
    assert_int_equal(refused(f, "max_connections"), 0);
}

/* A cap of max_connections is none: one address fills the listener, and at the limit its
 * newcomer takes the slot of its connection idle longest. */
static void client_per_client_off(struct fix *f)
{
    struct cconn a, b, c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &a, 0));
    CHECK(f, exchange(&a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    free(r.body);
    CHECK(f, cconnect(f->port, &b, 0) && cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /c HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/c "));
    free(r.body);
    CHECK(f, ceof(&a));
    cclose(&a);
    cclose(&b);
    cclose(&c);
}

static void test_max_connections_per_client_off(void **state)
{
    struct fix *f = *state;
    f->conf.max_connections = 2;
    f->conf.max_connections_per_client = 2;
    f->conf.busy_timeout_ms = 60000;
    run(f, client_per_client_off);
    assert_int_equal(refused(f, "max_connections_per_client"), 0);
    assert_int_equal(refused(f, NULL), 1);
}

/* 127.0.0.1 holds its two; its third is closed at once, while 127.0.0.2 gets in. */
static void client_per_client(struct fix *f)
{
    struct cconn a, b, c, d;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &a, 0) && cconnect(f->port, &b, 0) && cconnect(f->port, &c, 0));
    CHECK(f, ceof(&c));
    cclose(&c);
    CHECK(f, cconnect_from(f->port, &d, "127.0.0.2"));
    CHECK(f, exchange(&d, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/d "));
    free(r.body);
    CHECK(f, exchange(&a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200);
    free(r.body);
    CHECK(f, exchange(&b, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200);
    free(r.body);
    cclose(&a);
    cclose(&b);
    cclose(&d);
}

static void test_max_connections_per_client(void **state)
{
    struct fix *f = *state;
    f->conf.max_connections = 8;
    f->conf.max_connections_per_client = 2;
    run(f, client_per_client);
    assert_int_equal(atomic_load(&f->handled), 3);
    assert_int_equal(refused(f, "max_connections_per_client"), 1);
    assert_int_equal(refused(f, NULL), 0); /* the listener was not full: nothing reclaimed */
}

/* 0 means half of max_connections: with 4, the third from one address is refused. */
static void client_per_client_default(struct fix *f)
{
    struct cconn a, b, c;
    CHECK(f, cconnect(f->port, &a, 0) && cconnect(f->port, &b, 0) && cconnect(f->port, &c, 0));
    CHECK(f, ceof(&c));
    cclose(&a);
    cclose(&b);
    cclose(&c);
}

static void test_max_connections_per_client_default(void **state)
{
    struct fix *f = *state;
    f->conf.max_connections = 4;
    f->conf.max_connections_per_client = 0;
    run(f, client_per_client_default);
    assert_int_equal(refused(f, "max_connections_per_client"), 1);
}

/* Seven of nine slots taken (the seventh, h, begins a request): the listener is busy, and every
 * wait for headers or between requests is cut to busy_timeout (200 ms) where read_timeout and
 * idle_timeout are a minute: the idle a, the fresh c, e, g, k end; b, whose headers dribble, is
 * answered 408. d and h, whose headers are whole (h's arrived while busy), keep read_timeout
 * for their bodies: k, armed after h, ends first. */
static void client_busy(struct fix *f)
{
    struct cconn a, b, c, d, e, g, h, k;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &a, 0));
    CHECK(f, exchange(&a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200);
    free(r.body);
    CHECK(f, cconnect(f->port, &b, 0) && csends(&b, "POST /b HTTP/1.1\r\nHost: x\r\n"));
    CHECK(f, begin_request(f->port, &d, "127.0.0.1"));
    CHECK(f, cconnect(f->port, &c, 0) && cconnect(f->port, &e, 0) && cconnect(f->port, &g, 0));
    CHECK(f, begin_request(f->port, &h, "127.0.0.1"));
    CHECK(f, cconnect(f->port, &k, 0));
    CHECK(f, ceof(&a));
    CHECK(f, cread(&b, &r));
    CHECK(f, r.status == 408);
    free(r.body);
    CHECK(f, ceof(&c) && ceof(&e) && ceof(&g) && ceof(&k));
    CHECK(f, end_request(&d) && end_request(&h));
    cclose(&a);
    cclose(&b);
    cclose(&c);
    cclose(&e);
    cclose(&g);
    cclose(&k);
}

static void test_busy_cuts_waits(void **state)
{
    struct fix *f = *state;
    f->conf.max_connections = 9;
    f->conf.max_connections_per_client = 9;
    f->conf.read_timeout_ms = 60000;
    f->conf.idle_timeout_ms = 60000;
    f->conf.busy_timeout_ms = 200;
    run(f, client_busy);
    assert_int_equal(atomic_load(&f->handled), 3); /* /a, and d's and h's /begun */
    assert_int_equal(refused(f, NULL), 0);
}

/* A file limit of 4 leaves the listeners 3 (hs_http_fd_reserve keeps 1): with three requests
 * begun, a fourth connection is refused, while the server started with fd_reserve (the admin
 * endpoint's kind) still answers. */
static void client_file_limit(struct fix *f)
{
    struct cconn a[3], d, e;
    struct resp r = {0};
    for (int i = 0; i < 3; i++)
        CHECK(f, begin_request(f->port, &a[i], "127.0.0.1"));
    CHECK(f, cconnect(f->port, &d, 0));
    CHECK(f, ceof(&d));
    cclose(&d);
    CHECK(f, cconnect(f->reserve_port, &e, 0));
    CHECK(f, exchange(&e, "GET /live HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/live "));
    free(r.body);
    cclose(&e);
    for (int i = 0; i < 3; i++)
        CHECK(f, end_request(&a[i]));
}

static void test_file_limit_share(void **state)
{
    struct fix *f = *state;
    assert_int_equal(hs_http_fd_reserve(4), 1);
    assert_int_equal(hs_http_fd_reserve(1024), 256);
    assert_int_equal(hs_http_fd_reserve(1 << 20), 1 << 16);
    assert_int_equal(hs_http_server_set_file_limit(4), 3);
    f->with_reserve = true;
    f->conf.max_connections = 100;
    f->conf.max_connections_per_client = 100;
    run(f, client_file_limit);
    hs_http_server_set_file_limit(0);
    assert_int_equal(atomic_load(&f->handled), 4);
    assert_int_equal(refused(f, "file_limit"), 1);
    assert_false(f->file_limit_ok); /* 100 declared (the reserve's are not counted) > 3 */
}

#define MANY 200

static void client_many(struct fix *f)
{
    static struct cconn c[MANY];
    struct resp r = {0};
    char req[64], want[64];
    for (int i = 0; i < MANY; i++)
        CHECK(f, cconnect(f->port, &c[i], 0));
    for (int i = 0; i < MANY; i++) {
        snprintf(req, sizeof(req), "GET /n/%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        CHECK(f, csends(&c[i], req));
    }
    for (int i = 0; i < MANY; i++) {
        snprintf(want, sizeof(want), "path=/n/%d ", i);
        CHECK(f, cread(&c[i], &r));
        bool ok = r.status == 200 && strstr(r.body, want);
        free(r.body);
        CHECK(f, ok);
        cclose(&c[i]);
    }
}

static void test_many_connections(void **state)
{
    struct fix *f = *state;
    run(f, client_many);
    assert_int_equal(atomic_load(&f->handled), MANY);
}

static void client_conn_close(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.head, "\r\nConnection: close\r\n"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* HTTP/1.0 closes unless it asks for keep-alive */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /y HTTP/1.0\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.head, "\r\nConnection: close\r\n"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /z HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.head, "\r\nConnection: keep-alive\r\n"));
    free(r.body);
    CHECK(f, exchange(&c, "GET /z2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r));
    CHECK(f, r.status == 200);
    free(r.body);
    cclose(&c);
}

static void test_connection_close(void **state)
{
    run(*state, client_conn_close);
}

static void client_close_idle(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200);
    free(r.body);
    request_close(f);
    CHECK(f, ceof(&c)); /* an idle keep-alive connection is closed at once */
    cclose(&c);
}

static void test_close_idle_connection(void **state)
{
    run(*state, client_close_idle); /* idle_timeout is 60s: only the close can end it */
}

static void client_close_mid_request(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    /* the 100 proves the server is inside the request when it is told to close */
    CHECK(f, exchange(&c,
                      "POST /m HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      "Content-Length: 10\r\n\r\n",
                      &r));
    CHECK(f, r.status == 100);
    free(r.body);
    request_close(f);
    CHECK(f, exchange(&c, "0123456789", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "body=0123456789"));
    CHECK(f, strstr(r.head, "\r\nConnection: close\r\n"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
}

static void test_close_mid_request(void **state)
{
    struct fix *f = *state;
    run(f, client_close_mid_request);
    assert_int_equal(atomic_load(&f->handled), 1);
}

/* Many requests in one write, each answered with 256 KiB: the server stops taking requests
 * once ~1 MiB of answers wait to be written, and takes them again as they drain. */
static void client_not_reading(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    static char reqs[BIG_COUNT * 40];
    size_t n = 0;
    for (int i = 0; i < BIG_COUNT; i++)
        n += (size_t)snprintf(reqs + n, sizeof(reqs) - n, "GET /big?n=%d HTTP/1.1\r\n\r\n", i);
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csend(&c, reqs, n));
    for (int i = 0; i < BIG_COUNT; i++) {
        char want[32];
        snprintf(want, sizeof(want), "resp %d\n", i);
        CHECK(f, cread(&c, &r));
        bool ok = r.status == 200 && r.body_len == BIG_SIZE && !strncmp(r.body, want, strlen(want));
        free(r.body);
        CHECK(f, ok);
    }
    cclose(&c);
}

static void test_unread_responses_bound_memory(void **state)
{
    struct fix *f = *state;
    run(f, client_not_reading);
    assert_int_equal(atomic_load(&f->handled), BIG_COUNT);
    /* The requests arrive in one read, and write callbacks run later: without the bound all
     * 128 answers (32 MiB) would be queued at once for a client that might never read. */
    assert_true(f->most_unwritten > 0);
    assert_in_range(f->most_unwritten, 1, HS_HTTP_WRITE_HIGH);
}

static void client_resets(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    /* reset while a big response is being written, then mid-headers, then mid-body */
    const char *reqs[] = {"GET /big?n=1 HTTP/1.1\r\n\r\nGET /big?n=2 HTTP/1.1\r\n\r\n",
                          "POST /r HTTP/1.1\r\nHost: x\r\nContent-",
                          "POST /r HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(reqs); i++) {
        CHECK(f, cconnect(f->port, &c, 4096));
        CHECK(f, csends(&c, reqs[i]));
        setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        cclose(&c);
    }
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/after "));
    free(r.body);
    cclose(&c);
}

static void test_client_resets(void **state)
{
    run(*state, client_resets);
}

/* 8 MiB announced, 64 KiB sent: the 401 comes at once (a server waiting for the body would
 * answer 408 at read_timeout), says Connection: close, and what follows is dropped. */
static void client_early_big(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    static char chunk[64 << 10];
    memset(chunk, 'z', sizeof(chunk));
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csends(&c, "POST /deny HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n"));
    CHECK(f, csend(&c, chunk, sizeof(chunk)));
    CHECK(f, cread(&c, &r));
    CHECK(f, r.status == 401 && strstr(r.head, "\r\nConnection: close\r\n"));
    CHECK(f, strstr(r.head, "\r\nWWW-Authenticate: Bearer realm=\"t\"\r\n"));
    CHECK(f, strcmp(r.body, "denied\n") == 0);
    free(r.body);
    /* more of the body while the server drains: read and dropped, not kept */
    for (int i = 0; i < 16; i++)
        CHECK(f, csend(&c, chunk, sizeof(chunk)));
    shutdown(c.fd, SHUT_WR);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* chunked: the same */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c,
                      "POST /deny HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "10000\r\nzzzz",
                      &r));
    CHECK(f, r.status == 401 && strstr(r.head, "\r\nConnection: close\r\n"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* a request the hook lets through is read whole and handled: the counter does count */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
                      &r));
    CHECK(f, r.status == 200 && strstr(r.body, "body=hello"));
    free(r.body);
    cclose(&c);
}

static void test_early_answer_keeps_no_body(void **state)
{
    struct fix *f = *state;
    f->early = true;
    run(f, client_early_big);
    assert_int_equal(atomic_load(&f->handled), 1);     /* /ok only */
    assert_int_equal(atomic_load(&f->early_calls), 3); /* every request, before its body */
    assert_false(f->early_saw_body);
    assert_int_equal(f->body_bytes, 5); /* "hello": not one byte of the refused bodies */
}

/* Expect: 100-continue: the early answer comes instead of the 100, and the connection ends. */
static void client_early_expect(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c,
                      "POST /deny HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      "Content-Length: 1000000\r\n\r\n",
                      &r));
    CHECK(f, r.status == 401 && strstr(r.head, "\r\nConnection: close\r\n"));
    free(r.body);
    CHECK(f, ceof(&c));
    cclose(&c);
    /* let through: the 100 still comes, then the answer */
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c,
                      "POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      "Content-Length: 4\r\n\r\n",
                      &r));
    CHECK(f, r.status == 100);
    free(r.body);
    CHECK(f, exchange(&c, "data", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "body=data"));
    free(r.body);
    cclose(&c);
}

static void test_early_answer_expect(void **state)
{
    struct fix *f = *state;
    f->early = true;
    run(f, client_early_expect);
    assert_int_equal(atomic_load(&f->handled), 1);
    assert_int_equal(f->body_bytes, 4);
}

/* Without a body to come, an early answer keeps the connection: the next request on it is
 * served. hs_http_respond_trailers works there too (trailers as headers on HTTP/1.1). */
static void client_early_keepalive(struct fix *f)
{
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, exchange(&c, "GET /deny HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 401 && strstr(r.head, "\r\nConnection: keep-alive\r\n"));
    free(r.body);
    CHECK(f, exchange(&c, "POST /deny?trailers HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                      &r));
    CHECK(f, r.status == 401 && strstr(r.head, "\r\ngrpc-status: 16\r\n"));
    CHECK(f, strstr(r.head, "\r\nConnection: keep-alive\r\n"));
    free(r.body);
    CHECK(f, exchange(&c, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    CHECK(f, r.status == 200 && strstr(r.body, "path=/after "));
    free(r.body);
    cclose(&c);
}

static void test_early_answer_keepalive(void **state)
{
    struct fix *f = *state;
    f->early = true;
    run(f, client_early_keepalive);
    assert_int_equal(atomic_load(&f->handled), 1);
    assert_int_equal(atomic_load(&f->early_calls), 3);
}

static void test_bind_errors(void **state)
{
    struct fix *f = *state;
    struct hs_error err = {0};
    const struct hs_http_server_opts opts = {
        .config = &f->conf, .name = "test", .handler = handler, .ud = f};
    assert_int_equal(hs_http_server_start(&f->loop, &opts, &f->srv, &err), 0);
    char endpoint[64], want[128];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", hs_http_server_port(f->srv));
    struct hs_http_server_config taken = f->conf;
    taken.endpoint = endpoint;
    const struct hs_http_server_opts opts2 = {
        .config = &taken, .name = "otlp", .handler = handler, .ud = f};
    struct hs_http_server *s2 = NULL;
    assert_int_equal(hs_http_server_start(&f->loop, &opts2, &s2, &err), UV_EADDRINUSE);
    snprintf(want, sizeof(want), "otlp: cannot listen on %s: address already in use", endpoint);
    assert_int_equal(err.count, 1);
    assert_string_equal(err.lines[0], want);
    taken.endpoint = "no-port-here";
    assert_int_equal(hs_http_server_start(&f->loop, &opts2, &s2, &err), HS_EINVAL);
    assert_int_equal(err.count, 2);
    hs_error_free(&err);
    /* names resolve, as in "localhost:0"; ":0" is every address */
    const char *more[] = {"localhost:0", ":0", "[::1]:0"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(more); i++) {
        taken.endpoint = (char *)more[i];
        int rc = hs_http_server_start(&f->loop, &opts2, &s2, NULL);
        if (rc != 0 && strcmp(more[i], "[::1]:0") == 0) /* a host without IPv6 */
            assert_true(rc == UV_EADDRNOTAVAIL || rc == UV_EAFNOSUPPORT);
        assert_true(rc == 0 || strcmp(more[i], "[::1]:0") == 0);
        if (rc == 0) {
            assert_true(hs_http_server_port(s2) > 0);
            hs_http_server_close(s2, NULL, NULL);
        }
    }
    hs_http_server_close(f->srv, on_done, f);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_true(f->done_called);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void test_config_rows(void **state)
{
    struct hs_http_server_config c = {0};
    assert_int_equal(hs_config_decode(hs_http_server_fields_common, NULL, &c, "x", NULL), 0);
    assert_int_equal(c.max_request_body_size, 20u << 20);
    assert_int_equal(c.read_timeout_ms, 30000);
    assert_int_equal(c.idle_timeout_ms, 60000);
    assert_int_equal(c.max_connections, 1024);
    assert_int_equal(c.max_header_size, 64u << 10);
    assert_null(c.endpoint);

    static const char yaml[] = "max_header_size: 1MiB\nmax_connections: 0\nread_timeout: 2h\n";
    struct hs_config_doc doc = {0};
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, sizeof(yaml) - 1, &doc, &err), 0);
    assert_int_equal(hs_config_decode(hs_http_server_fields_common, doc.root, &c, "x", &err),
                     HS_EINVAL);
    assert_int_equal(err.count, 2); /* max_connections and read_timeout, not the 1MiB */
    assert_int_equal(c.max_header_size, 1u << 20);
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

/* The per-address table against a plain array: 200k adds and deletes over `nkeys` addresses,
 * so that runs grow, wrap past the table's end and are cut by deletions (backward shift). */
static void peer_table_run(int nkeys)
{
    static uint8_t keys[300][16];
    static uint32_t want[300];
    struct hs_http_peers t = {0};
    memset(want, 0, sizeof(want));
    for (int i = 0; i < nkeys; i++)
        for (int b = 0; b < 16; b++)
            keys[i][b] = (uint8_t)rand();
    for (int op = 0; op < 200000; op++) {
        int k = rand() % nkeys;
        if (rand() % 2) {
            hs_http_peers_add(&t, keys[k]);
            want[k]++;
        } else {
            hs_http_peers_del(&t, keys[k]); /* one not there is left alone */
            want[k] -= want[k] > 0;
        }
        if (op % 64 == 0) {
            size_t used = 0;
            for (int i = 0; i < nkeys; i++) {
                assert_int_equal(hs_http_peers_count(&t, keys[i]), want[i]);
                used += want[i] > 0;
            }
            assert_int_equal(t.used, used);
        }
    }
    for (int i = 0; i < nkeys; i++)
        while (want[i]--)
            hs_http_peers_del(&t, keys[i]);
    assert_int_equal(t.used, 0);
    for (size_t i = 0; i < t.cap; i++)
        assert_int_equal(t.slots[i].count, 0);
    hs_http_peers_free(&t);
}

static void test_peer_table(void **state)
{
    srand(7);
    peer_table_run(300);
    peer_table_run(15); /* at most half full: 15 keep it at 32 slots, where runs wrap often */
}

/* IPv4 and its mapped IPv6 form are one client; an IPv6 client is its /64. */
static void test_peer_keys(void **state)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 m = {.sin6_family = AF_INET6}, a = m, b = m, other = m;
    inet_pton(AF_INET, "192.0.2.7", &v4.sin_addr);
    inet_pton(AF_INET6, "::ffff:192.0.2.7", &m.sin6_addr);
    inet_pton(AF_INET6, "2001:db8:1:2::1", &a.sin6_addr);
    inet_pton(AF_INET6, "2001:db8:1:2:ffff::9", &b.sin6_addr);
    inet_pton(AF_INET6, "2001:db8:1:3::1", &other.sin6_addr);
    uint8_t k4[16], km[16], ka[16], kb[16], ko[16];
    hs_http_peer_key((struct sockaddr *)&v4, k4);
    hs_http_peer_key((struct sockaddr *)&m, km);
    hs_http_peer_key((struct sockaddr *)&a, ka);
    hs_http_peer_key((struct sockaddr *)&b, kb);
    hs_http_peer_key((struct sockaddr *)&other, ko);
    assert_memory_equal(k4, km, 16);
    assert_memory_equal(ka, kb, 16);
    assert_memory_not_equal(ka, ko, 16);
    assert_memory_not_equal(k4, ka, 16);
}

static void test_reasons(void **state)
{
    assert_string_equal(hs_http_reason(200), "OK");
    assert_string_equal(hs_http_reason(408), "Request Timeout");
    assert_string_equal(hs_http_reason(413), "Content Too Large");
    assert_string_equal(hs_http_reason(429), "Too Many Requests");
    assert_string_equal(hs_http_reason(431), "Request Header Fields Too Large");
    assert_string_equal(hs_http_reason(503), "Service Unavailable");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    hs_log_setup(HS_LOG_ERROR, false);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bytewise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unanswered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_take_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expect_continue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_413_content_length_before_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_413_chunked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_431_header_too_big, setup, teardown),
        cmocka_unit_test_setup_teardown(test_400_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_400_space_before_colon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_400_chunk_size_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_408_read_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_idle_at_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_connections_per_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_connections_per_client_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_connections_per_client_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_cuts_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_limit_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_idle_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_mid_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unread_responses_bound_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_resets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_answer_keeps_no_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_answer_expect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_answer_keepalive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_errors, setup, teardown),
        cmocka_unit_test(test_config_rows),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_peer_table),
        cmocka_unit_test(test_peer_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
