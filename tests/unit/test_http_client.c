/* test_http_client.c: the curl-multi-on-libuv client against a loopback sink: a POST round trip
 * with headers and body, connection reuse, Retry-After in both forms, the response cap,
 * timeouts, refused connections, and close with requests in flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/errors.h"
#include "core/http_client.h"
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
