/* test_http_client.c: the curl-multi-on-libuv client against a loopback sink: a POST round trip
 * with headers and body, connection reuse, Retry-After in both forms, the response cap,
 * timeouts, refused connections, and close with requests in flight; h2c gRPC calls against our
 * own server, one after another and at once, their prefix sent once before the body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "core/errors.h"
#include "net/grpc.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "http_sink.c"

struct got {
    int calls;
    int status;
    char error[256];
    unsigned char *body;
    size_t body_len;
    uint64_t retry_after_ms;
    char content_type[64];
};

struct fixture {
    uv_loop_t loop;
    uv_async_t wake; /* the sink pokes it, so a loop waiting on a silent server wakes up */
    struct sink sink;
    bool sink_up;
    struct hs_http_client *client;
    struct got got[8];
    int closed;
};

static void on_wake(uv_async_t *a)
{
    (void)a;
}

static void on_done(void *ud, const struct hs_http_result *res)
{
    struct got *g = ud;
    g->calls++;
    g->status = res->status;
    snprintf(g->error, sizeof(g->error), "%s", res->error ? res->error : "");
    snprintf(g->content_type, sizeof(g->content_type), "%s",
             res->content_type ? res->content_type : "");
    free(g->body);
    g->body = malloc(res->body_len + 1);
    memcpy(g->body, res->body ? res->body : (const uint8_t *)"", res->body_len);
    g->body_len = res->body_len;
    g->retry_after_ms = res->retry_after_ms;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    uv_async_init(&fx->loop, &fx->wake, on_wake);
    fx->client = hs_http_client_new(&fx->loop);
    assert_non_null(fx->client);
    *state = fx;
    return 0;
}

static void on_closed(void *ud)
{
    ((struct fixture *)ud)->closed++;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    if (fx->client)
        hs_http_client_close(fx->client, on_closed, fx);
    if (fx->sink_up)
        sink_stop(&fx->sink);
    uv_close((uv_handle_t *)&fx->wake, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(fx->closed, 1); /* every test's client is closed once, here or before */
    assert_int_equal(uv_loop_close(&fx->loop), 0); /* no handle of the client is left */
    for (size_t i = 0; i < HS_ARRAY_SIZE(fx->got); i++)
        free(fx->got[i].body);
    free(fx);
    return 0;
}

static void start_sink(struct fixture *fx)
{
    assert_int_equal(sink_start(&fx->sink, 0, &fx->wake), 0);
    fx->sink_up = true;
}

static void url_of(struct fixture *fx, uint16_t port, char *url, size_t n)
{
    (void)fx;
    snprintf(url, n, "http://127.0.0.1:%u/v1/traces", port);
}

static void run_until_calls(struct fixture *fx, int i, int calls)
{
    while (fx->got[i].calls < calls)
        uv_run(&fx->loop, UV_RUN_ONCE);
}

static void post(struct fixture *fx, const char *url, int i, uint64_t timeout_ms)
{
    static const char *const hdrs[] = {"Content-Type: application/x-protobuf",
                                       "X-Scope-OrgID: tenant-a"};
    assert_int_equal(
        hs_http_client_post(fx->client, url, hdrs, 2, "hello", 5, timeout_ms, on_done, &fx->got[i]),
        0);
}

static void test_roundtrip(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    start_sink(fx);
    sink_push(&fx->sink, 200, "Content-Type: text/plain\r\n", "ok-body", 7);
    url_of(fx, fx->sink.port, url, sizeof(url));
    post(fx, url, 0, 5000);
    run_until_calls(fx, 0, 1);

    struct got *g = &fx->got[0];
    assert_int_equal(g->status, 200);
    assert_int_equal(g->body_len, 7);
    assert_memory_equal(g->body, "ok-body", 7);
    assert_string_equal(g->content_type, "text/plain");
    assert_int_equal(g->retry_after_ms, 0);

    assert_int_equal(sink_count(&fx->sink), 1);
    const struct sink_req *r = sink_req(&fx->sink, 0);
    assert_string_equal(r->method, "POST");
    assert_string_equal(r->path, "/v1/traces");
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "tenant-a");
    assert_string_equal(sink_header(r, "Content-Type"), "application/x-protobuf");
    assert_null(sink_header(r, "Expect"));
    assert_int_equal(r->body_len, 5);
    assert_memory_equal(r->body, "hello", 5);

    /* a second request goes over the same kept-alive connection */
    post(fx, url, 1, 5000);
    run_until_calls(fx, 1, 1);
    assert_int_equal(fx->got[1].status, 200);
    assert_int_equal(sink_count(&fx->sink), 2);
    assert_int_equal(sink_accepted(&fx->sink), 1);
    assert_int_equal(fx->got[0].calls, 1); /* done fired once */
}

/* A name goes through curl's resolver, whose wake-up socket the loop must watch too. */
static void test_hostname(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    start_sink(fx);
    snprintf(url, sizeof(url), "http://localhost:%u/x", fx->sink.port);
    post(fx, url, 0, 5000);
    run_until_calls(fx, 0, 1);
    assert_int_equal(fx->got[0].status, 200);
    assert_string_equal(sink_req(&fx->sink, 0)->path, "/x");
}

static void test_retry_after_seconds(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    start_sink(fx);
    sink_push(&fx->sink, 503, "Retry-After: 7\r\n", NULL, 0);
    url_of(fx, fx->sink.port, url, sizeof(url));
    post(fx, url, 0, 5000);
    run_until_calls(fx, 0, 1);
    assert_int_equal(fx->got[0].status, 503);
    assert_int_equal(fx->got[0].retry_after_ms, 7000);
}

static void test_retry_after_date(void **state)
{
    struct fixture *fx = *state;
    char url[128], hdr[128];
    time_t when = time(NULL) + 60;
    struct tm tm;
    gmtime_r(&when, &tm);
    strftime(hdr, sizeof(hdr), "Retry-After: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    start_sink(fx);
    sink_push(&fx->sink, 429, hdr, NULL, 0);
    url_of(fx, fx->sink.port, url, sizeof(url));
    post(fx, url, 0, 5000);
    run_until_calls(fx, 0, 1);
    assert_int_equal(fx->got[0].status, 429);
    /* a minute ahead, less whatever wall-clock seconds passed on the way */
    assert_true(fx->got[0].retry_after_ms <= 60000);
    assert_true(fx->got[0].retry_after_ms >= 50000);
}

static void test_response_capped(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    size_t big = (5u << 20);
    unsigned char *body = malloc(big);
    memset(body, 'z', big);
    start_sink(fx);
    sink_push(&fx->sink, 200, NULL, body, big);
    free(body);
    url_of(fx, fx->sink.port, url, sizeof(url));
    post(fx, url, 0, 20000);
    run_until_calls(fx, 0, 1);
    assert_int_equal(fx->got[0].status, 200);
    assert_int_equal(fx->got[0].body_len, 4u << 20);
}

static void test_timeout(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    start_sink(fx);
    sink_default(&fx->sink, 0, NULL, NULL, 0); /* read the request, never answer */
    url_of(fx, fx->sink.port, url, sizeof(url));
    post(fx, url, 0, 200);
    run_until_calls(fx, 0, 1);
    assert_int_equal(fx->got[0].status, 0);
    assert_non_null(strstr(fx->got[0].error, "imed out")); /* curl: "Operation timed out ..." */
    assert_int_equal(sink_count(&fx->sink), 1);
}

static void test_refused(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    url_of(fx, sink_free_port(), url, sizeof(url));
    post(fx, url, 0, 5000);
    run_until_calls(fx, 0, 1);
    assert_int_equal(fx->got[0].status, 0);
    assert_true(strlen(fx->got[0].error) > 0);
}

static void test_close_in_flight(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    start_sink(fx);
    sink_default(&fx->sink, 0, NULL, NULL, 0);
    url_of(fx, fx->sink.port, url, sizeof(url));
    for (int i = 0; i < 3; i++)
        post(fx, url, i, 30000);
    while (sink_count(&fx->sink) < 3) /* all three are on the wire, waiting for an answer */
        uv_run(&fx->loop, UV_RUN_ONCE);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fx->got[i].calls, 0);

    hs_http_client_close(fx->client, on_closed, fx);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fx->got[i].calls, 1);
        assert_int_equal(fx->got[i].status, 0);
        assert_string_equal(fx->got[i].error, "cancelled");
    }
    assert_int_equal(
        hs_http_client_post(fx->client, url, NULL, 0, "x", 1, 1000, on_done, &fx->got[3]),
        HS_ECANCELED);
    fx->client = NULL; /* closed already: teardown only runs the loop dry and checks */
}

/* A done callback that closes the client (what an exporter does on its last response). */
static void on_done_close(void *ud, const struct hs_http_result *res)
{
    struct fixture *fx = ud;
    on_done(&fx->got[0], res);
    hs_http_client_close(fx->client, on_closed, fx);
    fx->client = NULL;
}

static void test_close_from_done(void **state)
{
    struct fixture *fx = *state;
    char url[128];
    start_sink(fx);
    url_of(fx, fx->sink.port, url, sizeof(url));
    assert_int_equal(hs_http_client_post(fx->client, url, NULL, 0, "x", 1, 5000, on_done_close, fx),
                     0);
    while (fx->client)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_int_equal(fx->got[0].calls, 1);
    assert_int_equal(fx->got[0].status, 200);
}

/* ---- h2c against our own server: gRPC's answers end with trailers ----------------------- */

#define H2_CALLS 24
#define H2_BODY (300u * 1024) /* several DATA frames and flow-control windows per stream */

struct h2fx {
    uv_loop_t loop;
    struct hs_http_server *srv;
    struct hs_http_client *client;
    int port;
    int handled, bad_body, done, ok, closed;
    char peers[H2_CALLS][64]; /* one per connection the server saw */
    int npeers;
    bool trailers_only; /* answer an error in one HEADERS frame (Trailers-Only) */
    char first_error[256];
    uint8_t *body;
};

static void h2_handler(void *ud, struct hs_http_request *req)
{
    struct h2fx *f = ud;
    f->handled++;
    bool seen = false;
    for (int i = 0; i < f->npeers; i++)
        seen |= strcmp(f->peers[i], req->peer) == 0;
    if (!seen && f->npeers < H2_CALLS)
        snprintf(f->peers[f->npeers++], sizeof(f->peers[0]), "%s", req->peer);
    /* the prefix exactly once, then the body as given */
    uint8_t pre[HS_GRPC_PREFIX];
    hs_grpc_prefix(pre, H2_BODY, false);
    if (req->body_len != HS_GRPC_PREFIX + H2_BODY || memcmp(req->body, pre, sizeof(pre)) != 0 ||
        memcmp(req->body + HS_GRPC_PREFIX, f->body, H2_BODY) != 0)
        f->bad_body++;
    if (f->trailers_only)
        hs_grpc_respond(req, HS_GRPC_UNAVAILABLE, "busy", NULL, 0, false, 0);
    else
        hs_grpc_respond(req, HS_GRPC_OK, NULL, (const uint8_t *)"\x08\x01", 2, false, 0);
}

static void h2_done(void *ud, const struct hs_http_result *res)
{
    struct h2fx *f = ud;
    f->done++;
    int want = f->trailers_only ? HS_GRPC_UNAVAILABLE : HS_GRPC_OK;
    if (res->status == 200 && res->grpc_status == want)
        f->ok++;
    else if (!f->first_error[0])
        snprintf(f->first_error, sizeof(f->first_error), "status %d grpc-status %d: %s",
                 res->status, res->grpc_status, res->error ? res->error : "");
}

static void h2_closed(void *ud)
{
    ((struct h2fx *)ud)->closed++;
}

static void h2_setup(struct h2fx *f)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    static const struct hs_http_server_config conf = {.endpoint = "127.0.0.1:0",
                                                      .max_request_body_size = 1u << 20,
                                                      .read_timeout_ms = 10000,
                                                      .idle_timeout_ms = 10000,
                                                      .max_concurrent_streams = 100};
    struct hs_http_server_opts opts = {.config = &conf,
                                       .name = "h2",
                                       .handler = h2_handler,
                                       .ud = f,
                                       .versions = HS_HTTP_H2C_ONLY};
    struct hs_error err = {0};
    assert_int_equal(hs_http_server_start(&f->loop, &opts, &f->srv, &err), 0);
    f->port = hs_http_server_port(f->srv);
    f->client = hs_http_client_new_flags(&f->loop, HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE);
    assert_non_null(f->client);
    f->body = malloc(H2_BODY);
    for (size_t i = 0; i < H2_BODY; i++)
        f->body[i] = (uint8_t)(i * 7 + i / 251);
}

static void h2_post(struct h2fx *f)
{
    static const char *const hdrs[] = {"Content-Type: application/grpc", "TE: trailers"};
    char url[128];
    uint8_t pre[HS_GRPC_PREFIX];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/p.S/Export", f->port);
    hs_grpc_prefix(pre, H2_BODY, false);
    assert_int_equal(hs_http_client_post_prefixed(f->client, url, hdrs, 2, pre, sizeof(pre),
                                                  f->body, H2_BODY, 10000, h2_done, f),
                     0);
}

static void h2_teardown(struct h2fx *f)
{
    hs_http_client_close(f->client, h2_closed, f);
    hs_http_server_close(f->srv, h2_closed, f);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->closed, 2);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f->body);
}

/* calls one after another, then all at once; every one answered OK with its body intact */
static void h2_calls(struct h2fx *f)
{
    for (int i = 0; i < H2_CALLS / 2; i++) {
        h2_post(f);
        while (f->done < i + 1)
            uv_run(&f->loop, UV_RUN_ONCE);
    }
    for (int i = 0; i < H2_CALLS / 2; i++)
        h2_post(f);
    while (f->done < H2_CALLS)
        uv_run(&f->loop, UV_RUN_ONCE);
    if (f->first_error[0])
        print_message("first failure: %s\n", f->first_error);
    print_message("h2c: %d calls, %d ok, %d connections\n", f->done, f->ok, f->npeers);
    assert_int_equal(f->ok, H2_CALLS);
    assert_int_equal(f->handled, H2_CALLS);
    assert_int_equal(f->bad_body, 0);
    /* below libcurl 8.0.0 every call has its own connection (net/http_client.c says why) */
    if (curl_version_info(CURLVERSION_NOW)->version_num < 0x080000)
        assert_int_equal(f->npeers, H2_CALLS);
    else
        assert_true(f->npeers < H2_CALLS);
}

static void test_h2c_grpc_calls(void **state)
{
    (void)state;
    static struct h2fx f;
    h2_setup(&f);
    h2_calls(&f);
    h2_teardown(&f);
}

static void test_h2c_grpc_trailers_only(void **state)
{
    (void)state;
    static struct h2fx f;
    h2_setup(&f);
    f.trailers_only = true;
    h2_calls(&f);
    h2_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostname, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_seconds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_date, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_from_done, setup, teardown),
        cmocka_unit_test(test_h2c_grpc_calls),
        cmocka_unit_test(test_h2c_grpc_trailers_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
