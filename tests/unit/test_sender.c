/* test_sender.c: the sending queue shared by network exporters, against a loopback sink: the
 * queue bound refuses with HS_EAGAIN, a 503's Retry-After is honoured, permanent errors are
 * dropped and counted, items of several requests, partial rejects, encode failures, per-request
 * headers, and shutdown draining what is held. With storage: items survive a shutdown and a
 * new sender (a restart) and are sent then, resuming after settled parts; shutdown waits for
 * the attempt out and no more; the bound counts what is on disk; a failing disk refuses and
 * recovers; a damaged record is dropped and counted. A request's prefix is sent once per
 * attempt and stored joined to its body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <unistd.h>

#include "core/component.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/metrics.h"
#include "exporters/helper/queue_store.h"
#include "exporters/helper/sender.h"
#include "http_sink.c"

#define ID "test/sender"
#define MAX_ITEMS 16

struct fixture;

/* An item: `parts` requests whose bodies are "<tag>/<part>", `count` items each. */
struct item {
    struct fixture *fx;
    int tag;
    uint32_t parts, count;
    int fail_part;   /* encode fails for this part (-1: none) */
    uint32_t reject; /* on_success reports this many rejected */
    bool prefixed;   /* "<P>" travels as the request's prefix, apart from the body */
};

struct fixture {
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t dog;
    bool timed_out;
    struct sink sink;
    bool sink_up;
    uint16_t port;
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct hs_sender_queue_config queue;
    struct hs_sender_retry_config retry;
    struct hs_sender *s;
    int done;
    bool shut;
    char url[128];
    const char *fixed[2];
    const char *const *opt_headers; /* hs_sender_options.headers: the "config" at send time */
    size_t opt_header_count;
    char dir[64]; /* for storage */
    int released;
    struct item items[MAX_ITEMS];
    int nitems;
};

static void on_wake(uv_async_t *a)
{
    (void)a;
}

static void on_dog(uv_timer_t *t)
{
    ((struct fixture *)t->data)->timed_out = true;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    uv_async_init(&fx->loop, &fx->wake, on_wake);
    uv_timer_init(&fx->loop, &fx->dog);
    fx->dog.data = fx;
    uv_timer_start(&fx->dog, on_dog, 30000, 0);
    uv_unref((uv_handle_t *)&fx->dog);
    fx->m = hs_metrics_new();
    fx->fixed[0] = "X-Fixed: yes";
    fx->fixed[1] = "Content-Type: text/x-item";
    fx->opt_headers = fx->fixed;
    fx->opt_header_count = 2;
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/hs-sender-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    *state = fx;
    return 0;
}

static void on_done(void *ud)
{
    ((struct fixture *)ud)->done++;
}

static void run_until(struct fixture *fx, bool (*pred)(struct fixture *fx))
{
    while (!pred(fx) && !fx->timed_out)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_false(fx->timed_out);
}

static bool is_done(struct fixture *fx)
{
    return fx->done > 0;
}

static const struct hs_config_field sender_fields[] = {
    {"sending_queue", HS_CFG_SECTION, 0, NULL, .sub = hs_sender_queue_fields},
    {"retry_on_failure", HS_CFG_SECTION,
     offsetof(struct fixture, retry) - offsetof(struct fixture, queue), NULL,
     .sub = hs_sender_retry_fields},
    {0},
};

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.')
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Shuts the sender down (if not yet) and frees it, as a stopping process does. */
static void sender_stop(struct fixture *fx)
{
    if (fx->s && !fx->shut) {
        hs_sender_shutdown(fx->s, on_done, fx);
        run_until(fx, is_done);
    }
    hs_sender_free(fx->s);
    fx->s = NULL;
    hs_config_free_fields(sender_fields, &fx->queue);
    memset(&fx->queue, 0, sizeof(fx->queue));
    hs_config_doc_free(&fx->doc);
    fx->done = 0;
    fx->shut = false;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    sender_stop(fx);
    rm_dir(fx->dir);
    unsetenv(HS_QUEUE_STORE_FAIL_ENV);
    assert_int_equal(fx->released, fx->nitems); /* every item given back exactly once */
    if (fx->sink_up)
        sink_stop(&fx->sink);
    uv_close((uv_handle_t *)&fx->wake, NULL);
    uv_close((uv_handle_t *)&fx->dog, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0); /* every handle of the sender is closed */
    hs_metrics_free(fx->m);
    free(fx);
    return 0;
}

/* ---- hooks ------------------------------------------------------------------------------ */

static int t_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct fixture *fx = ud;
    struct item *it = item;
    req->count = it->count;
    if ((int)part == it->fail_part)
        return HS_EINVAL;
    req->url = fx->url;
    req->headers = fx->fixed;
    req->header_count = 2;
    char v[32];
    snprintf(v, sizeof(v), "%d", it->tag);
    int rc = hs_sender_request_header(req, "X-Item", v);
    if (rc == 0)
        rc = hs_buf_printf(&req->body_buf, "%d/%u", it->tag, part);
    req->body = req->body_buf.data;
    req->body_len = req->body_buf.len;
    if (it->prefixed) {
        memcpy(req->prefix, "<P>", 3);
        req->prefix_len = 3;
    }
    return rc;
}

static void t_release(void *ud, void *item)
{
    struct fixture *fx = ud;
    assert_ptr_equal(((struct item *)item)->fx, fx);
    fx->released++;
}

static uint32_t t_success(void *ud, void *item, const struct hs_sender_request *req,
                          const struct hs_http_result *res)
{
    return item ? ((struct item *)item)->reject : 0; /* NULL with storage */
}

/* Decodes the sender's config sections from YAML, as an exporter does, and makes the sender. */
static void make_sender(struct fixture *fx, const char *yaml)
{
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    int rc = hs_config_decode(sender_fields, fx->doc.root, &fx->queue, "exporters.test", &err);
    for (size_t i = 0; i < err.count; i++)
        print_error("%s\n", err.lines[i]);
    assert_int_equal(rc, 0);
    hs_error_free(&err);
    fx->s = hs_sender_new(&(struct hs_sender_options){
        .id = ID,
        .items = "spans",
        .signal = HS_SIGNAL_TRACES,
        .queue = &fx->queue,
        .retry = &fx->retry,
        .timeout_ms = 5000,
        .url = fx->url,
        .headers = fx->opt_headers,
        .header_count = fx->opt_header_count,
        .hooks = {.encode = t_encode, .release = t_release, .on_success = t_success},
        .ud = fx,
    });
}

static void start(struct fixture *fx, bool with_sink)
{
    if (fx->sink_up) { /* a restarted sender: the same backend */
    } else if (with_sink) {
        assert_int_equal(sink_start(&fx->sink, 0, &fx->wake), 0);
        fx->sink_up = true;
        fx->port = fx->sink.port;
    } else {
        fx->port = sink_free_port();
    }
    snprintf(fx->url, sizeof(fx->url), "http://127.0.0.1:%u/x", fx->port);
    assert_int_equal(hs_sender_start(fx->s, &fx->loop, fx->m), 0);
}

static struct item *item(struct fixture *fx, uint32_t parts, uint32_t count)
{
    assert_true(fx->nitems < MAX_ITEMS);
    struct item *it = &fx->items[fx->nitems];
    *it =
        (struct item){.fx = fx, .tag = fx->nitems, .parts = parts, .count = count, .fail_part = -1};
    fx->nitems++;
    return it;
}

static int submit(struct fixture *fx, struct item *it)
{
    return hs_sender_submit(fx->s, it, 100, it->count * it->parts, it->parts);
}

static uint64_t counter(struct fixture *fx, const char *name)
{
    return hs_metrics_counter(fx->m, name, NULL, "exporter=\"" ID "\"")->value;
}

static uint64_t dropped(struct fixture *fx, const char *reason)
{
    char labels[128];
    snprintf(labels, sizeof(labels), "component=\"%s\",reason=\"%s\"", ID, reason);
    return hs_metrics_counter(fx->m, "dropped_total", NULL, labels)->value;
}

static uint64_t sent(struct fixture *fx)
{
    return counter(fx, "exporter_sent_spans_total");
}

static uint64_t failed(struct fixture *fx)
{
    return counter(fx, "exporter_send_failed_spans_total");
}

static bool all_released(struct fixture *fx)
{
    return fx->released == fx->nitems;
}

static const char *body_of(struct fixture *fx, size_t i)
{
    const struct sink_req *r = sink_req(&fx->sink, i);
    assert_non_null(r);
    r->body[r->body_len] = '\0'; /* the sink leaves room for it */
    return (const char *)r->body;
}

static const struct hs_health *health(struct fixture *fx);

/* ---- tests ------------------------------------------------------------------------------ */

static void test_queue_bound(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "sending_queue: {num_consumers: 1, queue_size: 2}\n"
                    "retry_on_failure: {initial_interval: 20ms, max_elapsed_time: 0}\n");
    start(fx, false); /* nothing listens: every attempt fails and is retried */
    assert_true(hs_sender_ready(fx->s));
    assert_int_equal(submit(fx, item(fx, 1, 3)), 0);
    assert_int_equal(submit(fx, item(fx, 1, 3)), 0);
    assert_false(hs_sender_ready(fx->s));
    assert_int_equal(submit(fx, item(fx, 1, 5)), HS_EAGAIN);
    assert_int_equal(fx->released, 1); /* the refused item was given back at once */
    assert_int_equal(counter(fx, "exporter_enqueue_failed_spans_total"), 5);
    assert_int_equal(sent(fx) + failed(fx), 0);

    /* a backend that stays down: shutting down waits, so give up on them by disabling */
    fx->retry.max_elapsed_ms = 1;
    hs_sender_shutdown(fx->s, on_done, fx);
    fx->shut = true;
    assert_false(hs_sender_ready(fx->s));
    run_until(fx, is_done);
    assert_int_equal(dropped(fx, "retry_exhausted"), 6);
    assert_int_equal(failed(fx), 6);
}

static void test_retry_after_then_ok(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "retry_on_failure: {initial_interval: 10ms}\n");
    start(fx, true);
    sink_push(&fx->sink, 503, "Retry-After: 1\r\n", "busy", 4);
    assert_int_equal(submit(fx, item(fx, 1, 4)), 0);
    run_until(fx, all_released);
    assert_int_equal(sink_count(&fx->sink), 2);
    assert_string_equal(body_of(fx, 0), "0/0");
    assert_string_equal(body_of(fx, 1), "0/0"); /* the same request again */
    assert_int_equal(counter(fx, "exporter_retries_total"), 1);
    assert_int_equal(sent(fx), 4);
    assert_int_equal(failed(fx), 0);
}

/* A Retry-After longer than max_elapsed_time gives up at once: with the 10ms interval alone
 * the request would have been retried, so this fails if Retry-After is ignored. */
static void test_retry_after_honoured(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "retry_on_failure: {initial_interval: 10ms, randomization_factor: 0, "
                    "max_elapsed_time: 1s}\n");
    start(fx, true);
    sink_push(&fx->sink, 503, "Retry-After: 5\r\n", NULL, 0);
    sink_push(&fx->sink, 503, NULL, NULL, 0);
    assert_int_equal(submit(fx, item(fx, 1, 2)), 0);
    run_until(fx, all_released);
    assert_int_equal(sink_count(&fx->sink), 1);
    assert_int_equal(dropped(fx, "retry_exhausted"), 2);
    assert_int_equal(counter(fx, "exporter_retries_total"), 0);
}

/* A prefix goes out once in front of the body, at every attempt. */
static void test_prefix_once_per_attempt(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "retry_on_failure: {initial_interval: 10ms}\n");
    start(fx, true);
    sink_push(&fx->sink, 503, NULL, NULL, 0);
    struct item *it = item(fx, 1, 2);
    it->prefixed = true;
    assert_int_equal(submit(fx, it), 0);
    run_until(fx, all_released);
    assert_int_equal(sink_count(&fx->sink), 2);
    assert_string_equal(body_of(fx, 0), "<P>0/0");
    assert_string_equal(body_of(fx, 1), "<P>0/0"); /* the retry: not doubled, not lost */
    assert_int_equal(sent(fx), 2);
}

static void test_permanent_error(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "retry_on_failure: {initial_interval: 10ms}\n");
    start(fx, true);
    static const char err[] = "{\"code\":\"invalid_argument\",\"message\":\"no\"}";
    sink_push(&fx->sink, 400, "Content-Type: application/json\r\n", err, sizeof(err) - 1);
    assert_int_equal(submit(fx, item(fx, 1, 3)), 0);
    run_until(fx, all_released);
    assert_int_equal(dropped(fx, "permanent_error"), 3);
    assert_int_equal(failed(fx), 3);
    assert_int_equal(sent(fx), 0);
    assert_int_equal(counter(fx, "exporter_retries_total"), 0);
    assert_int_equal(sink_count(&fx->sink), 1);
    /* one refused request and nothing more to try: failing, but not for any length of time */
    const struct hs_health *h = health(fx);
    assert_true(h->failing_since_ms != 0);
    assert_non_null(strstr(h->last_error, "HTTP 400"));
    assert_false(h->pending);
    assert_true(hs_health_failing_seconds(h, h->failing_since_ms + 3600000) == 0);
}

static void find_health(void *arg, const char *component, const struct hs_health *h)
{
    if (strcmp(component, ID) == 0)
        *(const struct hs_health **)arg = h;
}

static const struct hs_health *health(struct fixture *fx)
{
    const struct hs_health *h = NULL;
    hs_metrics_health_each(fx->m, find_health, &h);
    return h;
}

static bool health_failing(struct fixture *fx)
{
    return health(fx)->failing_since_ms != 0;
}

/* The exporter's health source: failing from the first failed attempt (the text says why),
 * healthy again at the first success, gone from the registry once the sender has stopped. */
static void test_health_failing_then_ok(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "retry_on_failure: {initial_interval: 10ms}\n");
    start(fx, true);
    assert_non_null(health(fx));
    assert_false(health_failing(fx));
    sink_push(&fx->sink, 503, NULL, "busy", 4);
    sink_push(&fx->sink, 502, NULL, "bad", 3);
    assert_int_equal(submit(fx, item(fx, 1, 2)), 0);
    run_until(fx, health_failing);
    uint64_t since = health(fx)->failing_since_ms;
    assert_non_null(strstr(health(fx)->last_error, "HTTP 50"));
    assert_true(health(fx)->failing_since_wall_ms > 0);
    run_until(fx, all_released);
    assert_int_equal(sent(fx), 2);
    assert_int_equal(sink_count(&fx->sink), 3);
    assert_int_equal(health(fx)->failing_since_ms, 0);
    assert_false(health(fx)->pending); /* nothing held */
    assert_true(health(fx)->last_success_ms >= since);
    assert_string_equal(health(fx)->last_error, "");
    sender_stop(fx);
    const struct hs_health *h = NULL;
    assert_int_equal(hs_metrics_health_each(fx->m, find_health, &h), 0);
}

/* A backend that refuses to connect: the failing period starts at the first attempt and is
 * not moved by later failures, so its length grows while the backend stays down. */
static void test_health_since_first_failure(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx,
                "sending_queue: {num_consumers: 1}\n"
                "retry_on_failure: {initial_interval: 5ms, multiplier: 1, max_elapsed_time: 0}\n");
    start(fx, false);
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    run_until(fx, health_failing);
    uint64_t since = health(fx)->failing_since_ms;
    uint64_t retries = counter(fx, "exporter_retries_total");
    while (counter(fx, "exporter_retries_total") < retries + 3 && !fx->timed_out)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_int_equal(health(fx)->failing_since_ms, since);
    assert_true(health(fx)->last_error[0] != '\0');
    assert_true(health(fx)->pending); /* the item waits for its next attempt */
    assert_true(health(fx)->last_failure_ms > since);
    fx->retry.max_elapsed_ms = 1; /* give up, so shutdown can finish */
}

static void test_parts_settle_one_by_one(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "retry_on_failure: {initial_interval: 10ms}\n");
    start(fx, true);
    sink_push(&fx->sink, 200, NULL, NULL, 0);
    sink_push(&fx->sink, 404, NULL, NULL, 0); /* part 1: permanent */
    sink_push(&fx->sink, 503, NULL, NULL, 0); /* part 2: retried */
    struct item *it = item(fx, 4, 1);
    it->fail_part = 3; /* part 3 cannot be encoded */
    assert_int_equal(submit(fx, it), 0);
    run_until(fx, all_released);
    assert_int_equal(sink_count(&fx->sink), 4);
    assert_string_equal(body_of(fx, 0), "0/0");
    assert_string_equal(body_of(fx, 1), "0/1");
    assert_string_equal(body_of(fx, 2), "0/2");
    assert_string_equal(body_of(fx, 3), "0/2");
    assert_int_equal(sent(fx), 2);
    assert_int_equal(dropped(fx, "permanent_error"), 1);
    assert_int_equal(dropped(fx, "encode_failed"), 1);
    assert_int_equal(failed(fx), 2);
}

static void test_headers_and_rejects(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "");
    start(fx, true);
    struct item *it = item(fx, 1, 5);
    it->reject = 2;
    assert_int_equal(submit(fx, it), 0);
    run_until(fx, all_released);
    const struct sink_req *r = sink_req(&fx->sink, 0);
    assert_string_equal(r->path, "/x");
    assert_string_equal(sink_header(r, "X-Fixed"), "yes");
    assert_string_equal(sink_header(r, "X-Item"), "0");
    assert_int_equal(sent(fx), 3);
    assert_int_equal(dropped(fx, "rejected_by_backend"), 2);
    assert_int_equal(failed(fx), 2);
}

static void test_shutdown_drains(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "sending_queue: {num_consumers: 1}\n");
    for (int i = 0; i < 3; i++) /* queued before start: they wait */
        assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    start(fx, true);
    hs_sender_shutdown(fx->s, on_done, fx);
    hs_sender_shutdown(fx->s, on_done, fx); /* a second call changes nothing */
    fx->shut = true;
    assert_false(hs_sender_ready(fx->s));
    assert_int_equal(submit(fx, item(fx, 1, 1)), HS_EAGAIN);
    assert_int_equal(fx->done, 0); /* three items are still to go */
    run_until(fx, is_done);
    assert_int_equal(fx->done, 1);
    assert_int_equal(sink_count(&fx->sink), 3);
    assert_int_equal(sent(fx), 3);
    for (size_t i = 0; i < 3; i++) { /* one consumer: in order */
        char want[16];
        snprintf(want, sizeof(want), "%zu/0", i);
        assert_string_equal(body_of(fx, i), want);
    }
}

static void test_shutdown_before_start(void **state)
{
    struct fixture *fx = *state;
    make_sender(fx, "");
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    hs_sender_shutdown(fx->s, on_done, fx);
    assert_int_equal(fx->done, 1);
    fx->shut = true;
    assert_int_equal(fx->released, 0); /* freed by hs_sender_free in teardown */
}

/* ---- with storage ----------------------------------------------------------------------- */

static void make_stored(struct fixture *fx, const char *queue_extra, const char *retry)
{
    char yaml[512];
    snprintf(yaml, sizeof(yaml), "sending_queue: {storage: %s%s}\nretry_on_failure: {%s}\n",
             fx->dir, queue_extra, retry);
    make_sender(fx, yaml);
}

static uint64_t storage_errors(struct fixture *fx, const char *op)
{
    char labels[128];
    snprintf(labels, sizeof(labels), "exporter=\"%s\",op=\"%s\"", ID, op);
    return hs_metrics_counter(fx->m, "exporter_storage_errors_total", NULL, labels)->value;
}

static bool sink_has_4(struct fixture *fx)
{
    return sink_count(&fx->sink) >= 4 && sent(fx) >= 6;
}

static void no_record(void *ud, const struct hs_queue_store_meta *m)
{
    fail_msg("record %lld left on disk", (long long)m->id);
}

/* Accepted while the backend is down, kept through a shutdown, sent by the next sender (a
 * restart) against the backend now up, in order, with the headers the rule says. */
static void test_storage_survives_restart(void **state)
{
    struct fixture *fx = *state;
    make_stored(fx, ", num_consumers: 1", "initial_interval: 10s");
    start(fx, false); /* nothing listens: the first attempt fails and waits 10s */
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    assert_int_equal(submit(fx, item(fx, 2, 2)), 0);
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    assert_int_equal(fx->released, 3); /* the records on disk are the items now */
    sender_stop(fx);                   /* returns without waiting the 10s: the rest stays on disk */
    assert_int_equal(sent(fx) + failed(fx), 0);

    static const char *const rotated[] = {"X-Fixed: rotated", "Content-Type: changed"};
    fx->opt_headers = rotated;
    make_stored(fx, ", num_consumers: 1", "initial_interval: 10ms");
    start(fx, true); /* the backend is up now, on another port: the URL follows the config */
    assert_int_equal(counter(fx, "exporter_replayed_spans_total"), 6);
    run_until(fx, sink_has_4);
    assert_int_equal(sink_count(&fx->sink), 4);
    static const char *const want[] = {"0/0", "1/0", "1/1", "2/0"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(body_of(fx, i), want[i]);
    const struct sink_req *r = sink_req(&fx->sink, 1);
    assert_string_equal(r->path, "/x");
    assert_string_equal(sink_header(r, "X-Item"), "1");                 /* per request */
    assert_string_equal(sink_header(r, "X-Fixed"), "rotated");          /* config's, now */
    assert_string_equal(sink_header(r, "Content-Type"), "text/x-item"); /* the body's */
    assert_int_equal(sent(fx), 6);
    assert_int_equal(failed(fx), 0);
    sender_stop(fx);

    struct hs_queue_store *st = NULL; /* nothing is left behind */
    struct hs_queue_store_open_info info;
    assert_int_equal(hs_queue_store_open(fx->dir, ID, &st, &info), 0);
    assert_int_equal(hs_queue_store_scan(st, no_record, NULL), 0);
    hs_queue_store_close(st);
}

static bool retried_once(struct fixture *fx)
{
    return counter(fx, "exporter_retries_total") >= 1;
}

static bool sink_has_4_requests(struct fixture *fx)
{
    return sink_count(&fx->sink) >= 4 && all_released(fx) && sent(fx) >= 3;
}

/* Part 0 is sent, part 1 waits on a long Retry-After at shutdown: the restart sends parts 1
 * and 2 only. */
static void test_storage_resumes_after_settled_parts(void **state)
{
    struct fixture *fx = *state;
    make_stored(fx, ", num_consumers: 1", "initial_interval: 10ms, max_elapsed_time: 0");
    start(fx, true);
    sink_push(&fx->sink, 200, NULL, NULL, 0);
    sink_push(&fx->sink, 503, "Retry-After: 3600\r\n", NULL, 0);
    assert_int_equal(submit(fx, item(fx, 3, 1)), 0);
    run_until(fx, retried_once);
    sender_stop(fx);
    assert_int_equal(sent(fx), 1);
    make_stored(fx, ", num_consumers: 1", "initial_interval: 10ms");
    start(fx, true);
    assert_int_equal(counter(fx, "exporter_replayed_spans_total"), 2); /* parts 1 and 2 */
    run_until(fx, sink_has_4_requests);
    assert_int_equal(sink_count(&fx->sink), 4);
    assert_string_equal(body_of(fx, 0), "0/0");
    assert_string_equal(body_of(fx, 1), "0/1");
    assert_string_equal(body_of(fx, 2), "0/1");
    assert_string_equal(body_of(fx, 3), "0/2");
    assert_int_equal(sent(fx), 3);
}

static bool one_request(struct fixture *fx)
{
    return sink_count(&fx->sink) >= 1;
}

static bool sink_has_2(struct fixture *fx)
{
    return sink_count(&fx->sink) >= 2 && sent(fx) >= 2;
}

/* Shutdown with storage lets the request out finish its attempt (here: the backend drops the
 * connection), starts nothing new, and leaves both items on disk for the next start. */
static void test_storage_shutdown_waits_for_flight(void **state)
{
    struct fixture *fx = *state;
    make_stored(fx, ", num_consumers: 1", "initial_interval: 10ms, max_elapsed_time: 0");
    start(fx, true);
    sink_push(&fx->sink, 0, NULL, NULL, 0); /* never answers */
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    run_until(fx, one_request);
    hs_sender_shutdown(fx->s, on_done, fx);
    fx->shut = true;
    assert_int_equal(fx->done, 0); /* the attempt out is waited for */
    /* the backend goes away mid-request */
    sink_stop(&fx->sink);
    fx->sink_up = false;
    run_until(fx, is_done);
    assert_int_equal(sent(fx) + failed(fx), 0);
    sender_stop(fx);

    make_stored(fx, ", num_consumers: 1", "initial_interval: 10ms");
    start(fx, true);
    assert_int_equal(counter(fx, "exporter_replayed_spans_total"), 2);
    run_until(fx, sink_has_2);
    assert_string_equal(body_of(fx, 0), "0/0"); /* the one in flight, sent again */
    assert_string_equal(body_of(fx, 1), "1/0");
    assert_int_equal(sent(fx), 2);
}

static bool sink_has_1(struct fixture *fx)
{
    return sink_count(&fx->sink) >= 1 && sent(fx) >= 1;
}

/* A prefixed request is stored framed (prefix and body as one body) and replayed so. */
static void test_storage_replays_prefix(void **state)
{
    struct fixture *fx = *state;
    make_stored(fx, ", num_consumers: 1", "initial_interval: 10s");
    start(fx, false); /* nothing listens: it stays on disk */
    struct item *it = item(fx, 1, 1);
    it->prefixed = true;
    assert_int_equal(submit(fx, it), 0);
    sender_stop(fx);
    make_stored(fx, ", num_consumers: 1", "initial_interval: 10ms");
    start(fx, true);
    run_until(fx, sink_has_1);
    assert_int_equal(sink_count(&fx->sink), 1);
    assert_string_equal(body_of(fx, 0), "<P>0/0");
}

/* queue_size counts what a restart finds on disk; a failing disk refuses, then recovers. */
static void test_storage_bound_and_write_failure(void **state)
{
    struct fixture *fx = *state;
    char flag[128];
    snprintf(flag, sizeof(flag), "%s/full", fx->dir);
    setenv(HS_QUEUE_STORE_FAIL_ENV, flag, 1);
    make_stored(fx, ", num_consumers: 1, queue_size: 2", "initial_interval: 10s");
    assert_false(hs_sender_ready(fx->s)); /* no store before start: nothing is accepted */
    start(fx, false);
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    FILE *f = fopen(flag, "w"); /* the disk fills up */
    assert_non_null(f);
    fclose(f);
    assert_int_equal(submit(fx, item(fx, 1, 4)), HS_EAGAIN);
    assert_int_equal(counter(fx, "exporter_enqueue_failed_spans_total"), 4);
    assert_int_equal(storage_errors(fx, "write"), 1);
    assert_true(hs_sender_ready(fx->s)); /* the queue is not full: the next batch may fit */
    unlink(flag);                        /* space is back */
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    assert_false(hs_sender_ready(fx->s));
    assert_int_equal(submit(fx, item(fx, 1, 1)), HS_EAGAIN); /* the bound */
    sender_stop(fx);

    make_stored(fx, ", num_consumers: 1, queue_size: 2", "initial_interval: 10s");
    start(fx, false);
    assert_int_equal(counter(fx, "exporter_replayed_spans_total"), 2);
    assert_false(hs_sender_ready(fx->s)); /* two batches on disk fill a queue of two */
    assert_int_equal(submit(fx, item(fx, 1, 1)), HS_EAGAIN);
    assert_int_equal(sent(fx) + failed(fx), 0);
}

/* A record whose bytes were damaged on disk is dropped and counted, not sent, not fatal. */
static void test_storage_damaged_record(void **state)
{
    struct fixture *fx = *state;
    struct hs_queue_store *st = NULL;
    struct hs_queue_store_open_info info;
    assert_int_equal(hs_queue_store_open(fx->dir, ID, &st, &info), 0);
    struct hs_queue_store_meta m = {.count = 9, .parts = 1};
    assert_int_equal(hs_queue_store_put(st, "HSQ1 not a record at all", 24, &m), 0);
    hs_queue_store_close(st);
    make_stored(fx, "", "initial_interval: 10ms");
    start(fx, true);
    assert_int_equal(submit(fx, item(fx, 1, 1)), 0);
    run_until(fx, all_released);
    while (sent(fx) < 1 && !fx->timed_out)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_int_equal(dropped(fx, "store_unreadable"), 9);
    assert_int_equal(storage_errors(fx, "read"), 1);
    assert_int_equal(sink_count(&fx->sink), 1);
    assert_string_equal(body_of(fx, 0), "0/0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_queue_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_then_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_honoured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefix_once_per_attempt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_permanent_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_failing_then_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health_since_first_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parts_settle_one_by_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_headers_and_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_drains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_survives_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_resumes_after_settled_parts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_shutdown_waits_for_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_replays_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_bound_and_write_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_damaged_record, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
