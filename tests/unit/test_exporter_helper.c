/* test_exporter_helper.c: the exporter helper with a transport of the exporter's own (in memory,
 * answered by the test, as a NATS publish is by its JetStream ack): the request it is given,
 * header order and tenant, a batch counted sent only on its answer, a retry, instances made and
 * shut down while another runs, and the shared config rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/metrics.h"
#include "exporters/helper/exporter.h"
#include "pdata/traces.h"

#define MAX_SENT 8

/* One request the transport was given, waiting for the test's answer. */
struct sent {
    char url[64];
    char lines[256]; /* joined with '|' */
    uint8_t body[64];
    size_t body_len;
    hs_http_done_cb done;
    void *done_ud;
    bool answered;
};

struct fixture {
    uv_loop_t loop;
    uv_timer_t dog; /* fails a test that would otherwise hang */
    bool timed_out;
    struct hs_metrics *m;
    struct hs_config_doc docs[2];
    struct hs_component *exp[2];
    int done[2];
    struct sent sent[MAX_SENT];
    int nsent, opens, closes;
};

/* ---- the exporter's own transport ------------------------------------------------------- */

struct conn {
    struct fixture *fx;
    uv_timer_t handle; /* stands for a connection: closing it is what close waits for */
    void (*closed)(void *ud);
    void *closed_ud;
};

static int mem_open(const struct hs_sender_options *opt, uv_loop_t *loop, void **out)
{
    struct conn *c = calloc(1, sizeof(*c));
    c->fx = loop->data;
    uv_timer_init(loop, &c->handle);
    c->handle.data = c;
    c->fx->opens++;
    *out = c;
    return 0;
}

static int mem_send(void *conn, const struct hs_sender_request *req, const char *const *lines,
                    size_t nlines, uint64_t timeout_ms, hs_http_done_cb done, void *done_ud)
{
    struct fixture *fx = ((struct conn *)conn)->fx;
    assert_true(fx->nsent < MAX_SENT);
    struct sent *s = &fx->sent[fx->nsent++];
    snprintf(s->url, sizeof(s->url), "%s", req->url);
    for (size_t i = 0; i < nlines; i++)
        snprintf(s->lines + strlen(s->lines), sizeof(s->lines) - strlen(s->lines), "%s%s",
                 i ? "|" : "", lines[i]);
    assert_true(req->body_len <= sizeof(s->body));
    memcpy(s->body, req->body, req->body_len);
    s->body_len = req->body_len;
    s->done = done;
    s->done_ud = done_ud;
    return 0;
}

static void mem_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    c->fx->closes++;
    c->closed(c->closed_ud);
    free(c);
}

static void mem_close(void *conn, void (*closed)(void *ud), void *ud)
{
    struct conn *c = conn;
    c->closed = closed;
    c->closed_ud = ud;
    uv_close((uv_handle_t *)&c->handle, mem_closed);
}

static const struct hs_sender_transport mem_transport = {
    .open = mem_open, .send = mem_send, .close = mem_close};

/* The test's answer to request i: a status as the transport would report its ack. */
static void answer(struct fixture *fx, int i, int status)
{
    struct sent *s = &fx->sent[i];
    assert_false(s->answered);
    s->answered = true;
    struct hs_http_result res = {.status = status, .error = status ? NULL : "no ack"};
    s->done(s->done_ud, &res);
}

/* ---- a thin exporter on the helper ------------------------------------------------------ */

struct memx_config {
    char *subject;
    struct hs_exporter_config common;
};

static const struct hs_config_field memx_fields[] = {
    {"subject", HS_CFG_STRING, offsetof(struct memx_config, subject), "spans.out",
     .doc = "where batches go"},
    {"exporter", HS_CFG_INLINE, offsetof(struct memx_config, common), .sub = hs_exporter_fields},
    {0},
};

struct memx {
    struct hs_exporter x;
    struct memx_config conf;
};

static int memx_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct memx *e = hs_container_of(ud, struct memx, x);
    const struct hs_traces *t = item;
    req->count = t->spans;
    req->url = e->x.url;
    req->headers = (const char *const *)e->x.headers;
    req->header_count = e->x.header_count;
    req->body = t->data;
    req->body_len = t->len;
    return hs_exporter_tenant_header(&e->x, req, t->tenant);
}

static const struct hs_exporter_ops memx_ops = {
    .signal = HS_SIGNAL_TRACES,
    .fields = memx_fields,
    .encode = memx_encode,
    .transport = &mem_transport,
};

static int memx_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct memx *e = hs_xcalloc(1, sizeof(*e));
    hs_exporter_init(&e->x, &memx_ops, &e->conf, &e->conf.common);
    if (hs_config_decode(memx_fields, cfg, &e->conf, path, err) != 0 ||
        hs_exporter_configure(&e->x, cfg, path, err) != 0) {
        hs_exporter_destroy(&e->x.base);
        return HS_EINVAL;
    }
    e->x.url = hs_xstrdup(e->conf.subject);
    hs_exporter_header(&e->x, "Content-Type", "application/x-protobuf");
    *out = &e->x.base;
    return 0;
}

static const struct hs_component_type memx_type =
    HS_EXPORTER_TYPE("memx", HS_SIGNAL_TRACES, memx_fields, memx_create, "test exporter");

/* ---- fixture ---------------------------------------------------------------------------- */

static void on_dog(uv_timer_t *t)
{
    ((struct fixture *)t->data)->timed_out = true;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    fx->loop.data = fx;
    uv_timer_init(&fx->loop, &fx->dog);
    fx->dog.data = fx;
    uv_timer_start(&fx->dog, on_dog, 30000, 0);
    uv_unref((uv_handle_t *)&fx->dog);
    fx->m = hs_metrics_new();
    *state = fx;
    return 0;
}

static void on_done(struct hs_component *c)
{
    struct fixture *fx = c->loop->data;
    fx->done[c == fx->exp[0] ? 0 : 1]++;
}

/* The transport answers only when the test does, so the loop may run dry: then nothing more
 * can happen, and waiting on would spin. */
static void run_until(struct fixture *fx, bool (*pred)(struct fixture *fx, int i), int i)
{
    while (!pred(fx, i) && !fx->timed_out)
        if (uv_run(&fx->loop, UV_RUN_ONCE) == 0 && !pred(fx, i))
            fail_msg("the loop ran dry before the awaited event");
    assert_false(fx->timed_out);
}

static bool is_done(struct fixture *fx, int i)
{
    return fx->done[i] > 0;
}

static bool has_sent(struct fixture *fx, int n)
{
    return fx->nsent >= n;
}

/* Shuts instance i down, waits for done, destroys it: what a parent does with a backend that
 * DNS no longer lists. */
static void stop(struct fixture *fx, int i)
{
    for (int j = 0; j < fx->nsent; j++) /* after a failed test: let the drain end */
        if (!fx->sent[j].answered)
            answer(fx, j, 200);
    memx_type.shutdown(fx->exp[i], on_done);
    memx_type.shutdown(fx->exp[i], on_done); /* a second call changes nothing */
    run_until(fx, is_done, i);
    assert_int_equal(fx->done[i], 1);
    char *id = fx->exp[i]->id;
    memx_type.destroy(fx->exp[i]);
    free(id);
    fx->exp[i] = NULL;
    hs_config_doc_free(&fx->docs[i]);
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    for (int i = 0; i < 2; i++)
        if (fx->exp[i])
            stop(fx, i);
    uv_close((uv_handle_t *)&fx->dog, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0); /* every handle of every instance is closed */
    assert_int_equal(fx->opens, fx->closes);
    hs_metrics_free(fx->m);
    free(fx);
    return 0;
}

/* Creates instance i ("memx/<name>") from YAML and starts it, as the core or a parent does. */
static void start_instance(struct fixture *fx, int i, const char *name, const char *yaml)
{
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->docs[i], &err), 0);
    int rc = memx_type.create(fx->docs[i].root, "exporters.memx", &fx->exp[i], &err);
    for (size_t j = 0; j < err.count; j++)
        print_error("%s\n", err.lines[j]);
    assert_int_equal(rc, 0);
    hs_error_free(&err);
    struct hs_component *c = fx->exp[i];
    c->type = &memx_type;
    struct hs_buf id = {0};
    assert_int_equal(hs_buf_printf(&id, "memx/%s", name), 0);
    c->id = (char *)id.data;
    c->metrics = fx->m;
    c->loop = &fx->loop;
    struct hs_host host = {.loop = &fx->loop, .metrics = fx->m};
    assert_int_equal(memx_type.start(c, &host), 0);
}

/* A batch of `spans` spans (the bytes are only carried, never parsed here) for `tenant`. */
static struct hs_traces *batch(uint32_t spans, const char *tenant)
{
    uint8_t *p = malloc(16);
    memcpy(p, "0123456789abcdef", 16);
    struct hs_traces *t = hs_traces_wrap(p, 16, 16, spans, 1);
    assert_non_null(t);
    assert_int_equal(hs_traces_set_tenant(t, tenant, tenant ? strlen(tenant) : 0), 0);
    return t;
}

static uint64_t sent_spans(struct fixture *fx, const char *id)
{
    return hs_metrics_exporter_signal(fx->m, id, HS_SIGNAL_TRACES).sent->value;
}

static bool metrics_mention(struct fixture *fx, const char *needle)
{
    struct hs_buf out = {0};
    assert_int_equal(hs_metrics_render(fx->m, &out), 0);
    assert_int_equal(hs_buf_putc(&out, '\0'), 0);
    bool found = strstr((const char *)out.data, needle) != NULL;
    hs_buf_free(&out);
    return found;
}

static void count_health(void *arg, const char *component, const struct hs_health *h)
{
    (*(int *)arg)++;
}

/* ---- tests ------------------------------------------------------------------------------ */

/* The transport gets the request as the exporter encoded it: its URL (a subject here), the
 * exporter's lines, then the configured headers, then the batch's tenant; the batch counts as
 * sent only when the transport answers, not when it was handed over. */
static void test_transport_request_and_ack(void **state)
{
    struct fixture *fx = *state;
    start_instance(fx, 0, "a", "subject: traces.eu\nheaders: {X-A: b}\n");
    assert_int_equal(memx_type.consume_traces(fx->exp[0], batch(3, "t1")), 0);
    run_until(fx, has_sent, 1);
    struct sent *s = &fx->sent[0];
    assert_string_equal(s->url, "traces.eu");
    assert_string_equal(s->lines, "Content-Type: application/x-protobuf|X-A: b|X-Scope-OrgID: t1");
    assert_int_equal(s->body_len, 16);
    assert_memory_equal(s->body, "0123456789abcdef", 16);
    assert_int_equal(sent_spans(fx, "memx/a"), 0); /* handed over, not acknowledged */
    assert_true(metrics_mention(fx, "hotspan_exporter_queue_size{exporter=\"memx/a\"} 1"));
    answer(fx, 0, 200);
    assert_int_equal(sent_spans(fx, "memx/a"), 3);
    assert_true(metrics_mention(fx, "hotspan_exporter_queue_size{exporter=\"memx/a\"} 0"));
}

/* No ack (status 0) is retried after the backoff, then the ack counts the batch once. */
static void test_no_ack_is_retried(void **state)
{
    struct fixture *fx = *state;
    start_instance(fx, 0, "a", "retry_on_failure: {initial_interval: 1ms}\n");
    assert_int_equal(memx_type.consume_traces(fx->exp[0], batch(2, NULL)), 0);
    run_until(fx, has_sent, 1);
    assert_string_equal(fx->sent[0].lines, "Content-Type: application/x-protobuf"); /* no tenant */
    answer(fx, 0, 0);
    run_until(fx, has_sent, 2); /* the same request again */
    assert_memory_equal(fx->sent[1].body, fx->sent[0].body, 16);
    answer(fx, 1, 200);
    assert_int_equal(sent_spans(fx, "memx/a"), 2);
    assert_int_equal(hs_metrics_exporter_signal(fx->m, "memx/a", HS_SIGNAL_TRACES).failed->value,
                     0);
    assert_true(metrics_mention(fx, "hotspan_exporter_retries_total{exporter=\"memx/a\"} 1"));
}

/* A configured X-Scope-OrgID fixes the tenant: the batch's is not sent beside it. */
static void test_configured_tenant_wins(void **state)
{
    struct fixture *fx = *state;
    start_instance(fx, 0, "a", "headers: {x-scope-orgid: fixed}\n");
    assert_int_equal(memx_type.consume_traces(fx->exp[0], batch(1, "t1")), 0);
    run_until(fx, has_sent, 1);
    assert_string_equal(fx->sent[0].lines,
                        "Content-Type: application/x-protobuf|x-scope-orgid: fixed");
    answer(fx, 0, 200);
}

/* An instance made and shut down while another runs, as load_balancing will do per backend:
 * its transport is closed, its gauges and health source leave /metrics, the other keeps
 * sending. */
static void test_instances_come_and_go(void **state)
{
    struct fixture *fx = *state;
    start_instance(fx, 0, "a", "subject: a\n");
    start_instance(fx, 1, "b", "subject: b\n");
    int sources = 0;
    assert_int_equal(hs_metrics_health_each(fx->m, count_health, &sources), 2);
    assert_int_equal(memx_type.consume_traces(fx->exp[1], batch(4, NULL)), 0);
    run_until(fx, has_sent, 1);
    assert_string_equal(fx->sent[0].url, "b");
    answer(fx, 0, 200);
    stop(fx, 1);
    assert_int_equal(fx->closes, 1);
    assert_int_equal(sent_spans(fx, "memx/b"), 4);
    assert_false(metrics_mention(fx, "hotspan_exporter_queue_size{exporter=\"memx/b\"}"));
    assert_true(metrics_mention(fx, "hotspan_exporter_queue_size{exporter=\"memx/a\"}"));
    sources = 0;
    assert_int_equal(hs_metrics_health_each(fx->m, count_health, &sources), 1);
    assert_true(memx_type.ready(fx->exp[0]));
    assert_int_equal(memx_type.consume_traces(fx->exp[0], batch(1, NULL)), 0);
    run_until(fx, has_sent, 2);
    assert_string_equal(fx->sent[1].url, "a");
    answer(fx, 1, 200);
    assert_int_equal(sent_spans(fx, "memx/a"), 1);
}

/* The shared rows come from one table: their defaults, bounds, unknown keys listed with the
 * exporter's own, and the TLS files read at create with the error at their key. */
static void test_shared_rows(void **state)
{
    struct fixture *fx = *state;
    start_instance(fx, 0, "a", "{}\n");
    const struct memx *e = hs_container_of(fx->exp[0], struct memx, x.base);
    assert_int_equal(e->conf.common.timeout_ms, 30000);
    assert_int_equal(e->conf.common.queue.queue_size, 1000);
    assert_int_equal(e->conf.common.queue.num_consumers, 10);
    assert_true(e->conf.common.retry.enabled);
    assert_int_equal(e->conf.common.retry.initial_interval_ms, 5000);

    const char *yaml = "bogus: 1\nsending_queue: {queue_size: 0}\n"
                       "tls: {ca_file: /nonexistent/ca.pem}\n";
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->docs[1], &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(memx_type.create(fx->docs[1].root, "exporters.memx", &c, &err), HS_EINVAL);
    assert_null(c);
    assert_int_equal(err.count, 2); /* decoding failed: the TLS files are not read */
    assert_string_equal(err.lines[0],
                        "t.yaml:1:1: exporters.memx.bogus: unknown key (known: subject, timeout, "
                        "headers, sending_queue, retry_on_failure, tls)");
    assert_string_equal(err.lines[1], "t.yaml:2:29: exporters.memx.sending_queue.queue_size: 0 "
                                      "is below the minimum 1");
    hs_error_free(&err);
    hs_config_doc_free(&fx->docs[1]);

    yaml = "tls: {ca_file: /nonexistent/ca.pem}\n";
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->docs[1], &err), 0);
    assert_int_equal(memx_type.create(fx->docs[1].root, "exporters.memx", &c, &err), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "exporters.memx: tls.ca_file"));
    hs_error_free(&err);
    hs_config_doc_free(&fx->docs[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transport_request_and_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_ack_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_configured_tenant_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instances_come_and_go, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_rows, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
