/* test_exporter_otlp.c: the otlp / otlphttp exporter against a loopback sink: URL, headers and
 * gzip body; Retry-After then success; permanent errors; a backend that is down and comes back
 * (backpressure, then exactly-once delivery); draining on shutdown; giving up after
 * max_elapsed_time; partial success; config errors. OTLP profiles: the request's bytes on their
 * own queue (URL, profiles_endpoint, JSON, partial success), pprof refused; otelcol's otlp_http
 * and otlp_grpc names with their keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <zlib.h>

#include "core/component.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/metrics.h"
#include "http_sink.c"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "otlp_profiles_build.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

extern const struct hs_component_type hs_exporter_otlp;
extern const struct hs_component_type hs_exporter_otlphttp;
extern const struct hs_component_type hs_exporter_otlp_http;
extern const struct hs_component_type hs_exporter_otlp_grpc;

#define ID "otlp/test"
#define MAX_BATCHES 16

struct fixture {
    uv_loop_t loop;
    uv_async_t wake; /* the sink pokes it, so the loop wakes when a request arrives */
    uv_timer_t dog;  /* fails a test that would otherwise hang */
    bool timed_out;
    struct sink sink;
    bool sink_up;
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct hs_component *exp;
    int done;
    bool shut;
    /* copies of the bytes of every batch handed to the exporter */
    uint8_t *bytes[MAX_BATCHES];
    size_t lens[MAX_BATCHES];
    uint32_t spans[MAX_BATCHES];
    int nbatches;
};

static void on_wake(uv_async_t *a)
{
    (void)a;
}

static void on_dog(uv_timer_t *t)
{
    struct fixture *fx = t->data;
    fx->timed_out = true;
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
    *state = fx;
    return 0;
}

static void on_done(struct hs_component *c)
{
    struct fixture *fx = c->loop->data;
    fx->done++;
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

static void shutdown_and_wait(struct fixture *fx)
{
    fx->exp->type->shutdown(fx->exp, on_done);
    fx->shut = true;
    run_until(fx, is_done);
    assert_int_equal(fx->done, 1);
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    if (fx->exp && !fx->shut)
        shutdown_and_wait(fx);
    if (fx->exp)
        fx->exp->type->destroy(fx->exp);
    if (fx->sink_up)
        sink_stop(&fx->sink);
    uv_close((uv_handle_t *)&fx->wake, NULL);
    uv_close((uv_handle_t *)&fx->dog, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0); /* every handle of the exporter is closed */
    hs_metrics_free(fx->m);
    hs_config_doc_free(&fx->doc);
    for (int i = 0; i < fx->nbatches; i++)
        free(fx->bytes[i]);
    free(fx);
    return 0;
}

/* Creates the exporter from YAML (%u in it becomes the sink's port) and starts it. */
static void start_exporter(struct fixture *fx, const struct hs_component_type *type,
                           const char *yaml_fmt, unsigned port)
{
    char yaml[1024];
    struct hs_error err = {0};
    snprintf(yaml, sizeof(yaml), yaml_fmt, port);
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    int rc = type->create(fx->doc.root, "exporters." ID, &fx->exp, &err);
    for (size_t i = 0; i < err.count; i++)
        print_error("%s\n", err.lines[i]);
    assert_int_equal(rc, 0);
    hs_error_free(&err);
    fx->exp->type = type;
    fx->exp->id = ID;
    fx->exp->metrics = fx->m;
    fx->exp->loop = &fx->loop;
    fx->loop.data = fx;
    struct hs_host host = {.loop = &fx->loop, .metrics = fx->m};
    assert_int_equal(type->start(fx->exp, &host), 0);
}

static void start_sink(struct fixture *fx, uint16_t port)
{
    assert_int_equal(sink_start(&fx->sink, port, &fx->wake), 0);
    fx->sink_up = true;
}

/* A request of `n` spans whose names carry `tag`, so every batch's bytes differ. */
static struct hs_traces *make_batch(struct fixture *fx, uint32_t n)
{
    Opentelemetry__Proto__Trace__V1__Span spans[8], *sp[8];
    char names[8][32];
    uint8_t ids[8][24];
    assert_true(n <= 8 && fx->nbatches < MAX_BATCHES);
    for (uint32_t i = 0; i < n; i++) {
        opentelemetry__proto__trace__v1__span__init(&spans[i]);
        memset(ids[i], 0x11 + (int)i, sizeof(ids[i]));
        ids[i][0] = (uint8_t)fx->nbatches;
        spans[i].trace_id = (ProtobufCBinaryData){16, ids[i]};
        spans[i].span_id = (ProtobufCBinaryData){8, ids[i] + 16};
        snprintf(names[i], sizeof(names[i]), "batch-%d-span-%u", fx->nbatches, i);
        spans[i].name = names[i];
        spans[i].start_time_unix_nano = 1700000000000000000ull;
        spans[i].end_time_unix_nano = 1700000000050000000ull;
        sp[i] = &spans[i];
    }
    Opentelemetry__Proto__Trace__V1__ScopeSpans ss;
    opentelemetry__proto__trace__v1__scope_spans__init(&ss);
    ss.n_spans = n;
    ss.spans = sp;
    Opentelemetry__Proto__Trace__V1__ScopeSpans *ssp = &ss;
    Opentelemetry__Proto__Trace__V1__ResourceSpans rs;
    opentelemetry__proto__trace__v1__resource_spans__init(&rs);
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    Opentelemetry__Proto__Trace__V1__ResourceSpans *rsp = &rs;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&req);
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    size_t len =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            &req);
    uint8_t *p = malloc(len);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, p);
    fx->bytes[fx->nbatches] = malloc(len);
    memcpy(fx->bytes[fx->nbatches], p, len);
    fx->lens[fx->nbatches] = len;
    fx->spans[fx->nbatches++] = n;
    struct hs_traces *t = hs_traces_wrap(p, len, len, n, 1);
    assert_non_null(t);
    return t;
}

static int consume(struct fixture *fx, uint32_t spans)
{
    return fx->exp->type->consume_traces(fx->exp, make_batch(fx, spans));
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

static uint64_t total_spans(struct fixture *fx)
{
    uint64_t n = 0;
    for (int i = 0; i < fx->nbatches; i++)
        n += fx->spans[i];
    return n;
}

static bool all_sent(struct fixture *fx)
{
    return sent(fx) == total_spans(fx);
}

static bool all_failed(struct fixture *fx)
{
    return failed(fx) == total_spans(fx);
}

static bool all_settled(struct fixture *fx)
{
    return sent(fx) + failed(fx) == total_spans(fx);
}

/* Decompresses a gzip body with zlib (not our own code) into a malloc'd buffer. */
static uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len)
{
    size_t cap = 1 << 20;
    uint8_t *out = malloc(cap);
    z_stream zs = {0};
    assert_int_equal(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_len = zs.total_out;
    inflateEnd(&zs);
    return out;
}

/* Which batch (index) the body of request i carries; -1 when none. */
static int batch_of(struct fixture *fx, size_t i, bool gz)
{
    const struct sink_req *r = sink_req(&fx->sink, i);
    size_t len = r->body_len;
    uint8_t *body = gz ? gunzip(r->body, r->body_len, &len) : r->body;
    int found = -1;
    for (int b = 0; b < fx->nbatches; b++)
        if (fx->lens[b] == len && memcmp(fx->bytes[b], body, len) == 0)
            found = b;
    if (gz)
        free(body);
    return found;
}

static void test_endpoint_gzip_headers(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u/\n"
                   "headers: {X-Scope-OrgID: tenant-a, Authorization: Bearer xyz}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, 3), 0);
    run_until(fx, all_sent);

    assert_int_equal(sink_count(&fx->sink), 1);
    const struct sink_req *r = sink_req(&fx->sink, 0);
    assert_string_equal(r->method, "POST");
    assert_string_equal(r->path, "/v1/traces"); /* appended, without a double slash */
    assert_string_equal(sink_header(r, "Content-Type"), "application/x-protobuf");
    assert_string_equal(sink_header(r, "Content-Encoding"), "gzip");
    assert_string_equal(sink_header(r, "User-Agent"), "hotspan/" HS_VERSION);
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "tenant-a");
    assert_string_equal(sink_header(r, "Authorization"), "Bearer xyz");
    assert_int_equal(batch_of(fx, 0, true), 0); /* gunzips to exactly the batch bytes */
    assert_int_equal(failed(fx), 0);
}

static void test_traces_endpoint_verbatim(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    start_exporter(fx, &hs_exporter_otlphttp,
                   "endpoint: http://127.0.0.1:1/ignored\n"
                   "traces_endpoint: http://127.0.0.1:%u/custom/otlp\n"
                   "compression: none\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, 2), 0);
    run_until(fx, all_sent);
    const struct sink_req *r = sink_req(&fx->sink, 0);
    assert_string_equal(r->path, "/custom/otlp");
    assert_null(sink_header(r, "Content-Encoding"));
    assert_int_equal(batch_of(fx, 0, false), 0); /* the batch's own bytes */
}

static void test_retry_after_then_ok(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    sink_push(&fx->sink, 503, "Retry-After: 1\r\n", "busy", 4);
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "retry_on_failure: {initial_interval: 10ms}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, 4), 0);
    run_until(fx, all_sent);
    assert_int_equal(sink_count(&fx->sink), 2);
    assert_int_equal(batch_of(fx, 0, true), 0);
    assert_int_equal(batch_of(fx, 1, true), 0); /* the same batch, sent again */
    assert_int_equal(counter(fx, "exporter_retries_total"), 1);
    assert_int_equal(failed(fx), 0);
    shutdown_and_wait(fx);
    assert_int_equal(sink_count(&fx->sink), 2); /* delivered once, nothing more */
}

static void test_permanent_error(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    sink_push(&fx->sink, 400, "Content-Type: text/plain\r\n", "bad data", 8);
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "retry_on_failure: {initial_interval: 10ms}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, 3), 0);
    run_until(fx, all_failed);
    assert_int_equal(dropped(fx, "permanent_error"), 3);
    assert_int_equal(sent(fx), 0);
    shutdown_and_wait(fx); /* nothing left to retry, so done comes at once */
    assert_int_equal(sink_count(&fx->sink), 1);
    assert_int_equal(counter(fx, "exporter_retries_total"), 0);
}

static bool retried_4(struct fixture *fx)
{
    return counter(fx, "exporter_retries_total") >= 4;
}

static void test_backend_down_then_up(void **state)
{
    struct fixture *fx = *state;
    uint16_t port = sink_free_port();
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "sending_queue: {num_consumers: 2, queue_size: 4}\n"
                   "retry_on_failure: {initial_interval: 20ms, max_interval: 40ms, "
                   "max_elapsed_time: 0}\n",
                   port);
    for (int i = 0; i < 4; i++) {
        assert_true(fx->exp->type->ready(fx->exp));
        assert_int_equal(consume(fx, 2), 0);
    }
    assert_false(fx->exp->type->ready(fx->exp)); /* full: the pipeline gets backpressure */
    struct hs_traces *extra = hs_traces_new(16);
    extra->spans = 5;
    assert_int_equal(fx->exp->type->consume_traces(fx->exp, extra), HS_EAGAIN);
    assert_int_equal(counter(fx, "exporter_enqueue_failed_spans_total"), 5);

    run_until(fx, retried_4); /* both consumers have failed and retried, twice each */
    assert_false(fx->exp->type->ready(fx->exp));
    assert_int_equal(sent(fx), 0);

    start_sink(fx, port);
    run_until(fx, all_sent);
    assert_true(fx->exp->type->ready(fx->exp));
    assert_int_equal(failed(fx), 0);
    shutdown_and_wait(fx);
    assert_int_equal(sink_count(&fx->sink), 4);
    bool seen[4] = {0};
    for (size_t i = 0; i < 4; i++) {
        int b = batch_of(fx, i, true);
        assert_true(b >= 0 && b < 4);
        assert_false(seen[b]); /* each batch exactly once */
        seen[b] = true;
    }
}

static void test_shutdown_drains(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "sending_queue: {num_consumers: 1}\n",
                   fx->sink.port);
    for (int i = 0; i < 3; i++)
        assert_int_equal(consume(fx, 1), 0);
    fx->exp->type->shutdown(fx->exp, on_done);
    fx->exp->type->shutdown(fx->exp, on_done); /* a second call changes nothing */
    fx->shut = true;
    assert_false(fx->exp->type->ready(fx->exp));
    struct hs_traces *late = hs_traces_new(16);
    late->spans = 1;
    assert_int_equal(fx->exp->type->consume_traces(fx->exp, late), HS_EAGAIN);
    assert_int_equal(fx->done, 0); /* three batches are still to go */

    run_until(fx, is_done);
    assert_int_equal(fx->done, 1);
    assert_int_equal(sink_count(&fx->sink), 3);
    assert_true(all_sent(fx));
    for (size_t i = 0; i < 3; i++) /* one consumer: in order */
        assert_int_equal(batch_of(fx, i, true), (int)i);
}

static bool exhausted(struct fixture *fx)
{
    return dropped(fx, "retry_exhausted") > 0;
}

static void test_retry_exhausted(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    sink_default(&fx->sink, 503, NULL, NULL, 0);
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "retry_on_failure: {initial_interval: 50ms, max_elapsed_time: 300ms}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, 2), 0);
    run_until(fx, exhausted);
    assert_int_equal(dropped(fx, "retry_exhausted"), 2);
    assert_int_equal(failed(fx), 2);
    assert_int_equal(sent(fx), 0);
    assert_true(sink_count(&fx->sink) >= 2);
    assert_int_equal(counter(fx, "exporter_retries_total"), sink_count(&fx->sink) - 1);
}

static void test_retry_disabled(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    sink_default(&fx->sink, 503, NULL, NULL, 0);
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "retry_on_failure: {enabled: false}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, 2), 0);
    run_until(fx, all_failed);
    assert_int_equal(dropped(fx, "send_failed"), 2);
    shutdown_and_wait(fx);
    assert_int_equal(sink_count(&fx->sink), 1);
}

static void test_partial_success(void **state)
{
    struct fixture *fx = *state;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess ps;
    opentelemetry__proto__collector__trace__v1__export_trace_partial_success__init(&ps);
    ps.rejected_spans = 2;
    ps.error_message = "spans too old";
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse resp;
    opentelemetry__proto__collector__trace__v1__export_trace_service_response__init(&resp);
    resp.partial_success = &ps;
    uint8_t buf[128];
    size_t len =
        opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(&resp, buf);
    start_sink(fx, 0);
    sink_push(&fx->sink, 200, "Content-Type: application/x-protobuf\r\n", buf, len);
    start_exporter(fx, &hs_exporter_otlp, "endpoint: http://127.0.0.1:%u\n", fx->sink.port);
    assert_int_equal(consume(fx, 5), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 3);
    assert_int_equal(dropped(fx, "rejected_by_backend"), 2);
    assert_int_equal(failed(fx), 2);
    assert_int_equal(sink_count(&fx->sink), 1); /* a partial success is never retried */
}

static void test_json_encoding(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "encoding: json\n"
                   "compression: none\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, 2), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 2);
    const struct sink_req *r = sink_req(&fx->sink, 0);
    assert_string_equal(sink_header(r, "Content-Type"), "application/json");
    json_error_t jerr;
    json_t *root = json_loadb((const char *)r->body, r->body_len, 0, &jerr);
    assert_non_null(root);
    json_t *rs = json_array_get(json_object_get(root, "resourceSpans"), 0);
    json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
    json_t *sp = json_object_get(ss, "spans");
    assert_int_equal(json_array_size(sp), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(sp, 1), "name")),
                        "batch-0-span-1");
    json_decref(root);
}

static void test_queue_bytes_bound(void **state)
{
    struct fixture *fx = *state;
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "sending_queue: {queue_bytes: 100}\n"
                   "retry_on_failure: {enabled: false}\n",
                   sink_free_port());
    assert_true(fx->exp->type->ready(fx->exp));
    assert_int_equal(consume(fx, 3), 0);
    assert_true(fx->lens[0] > 100);
    assert_false(fx->exp->type->ready(fx->exp)); /* one batch is over the byte bound */
    run_until(fx, all_failed);                   /* refused, not retried: dropped */
    assert_int_equal(dropped(fx, "send_failed"), 3);
    assert_true(fx->exp->type->ready(fx->exp)); /* room again */
}

static void test_queue_disabled(void **state)
{
    struct fixture *fx = *state;
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "sending_queue: {enabled: false, num_consumers: 2}\n"
                   "retry_on_failure: {enabled: false}\n",
                   sink_free_port());
    assert_int_equal(consume(fx, 1), 0);
    assert_true(fx->exp->type->ready(fx->exp));
    assert_int_equal(consume(fx, 1), 0);
    assert_false(fx->exp->type->ready(fx->exp)); /* only what is in flight is held */
    run_until(fx, all_failed);
    assert_true(fx->exp->type->ready(fx->exp));
}

static void test_config_errors(void **state)
{
    struct fixture *fx = *state;
    static const char yaml[] = "compression: zstd\nheaders: {A: b}\n";
    struct hs_error err = {0};
    struct hs_component *c = NULL;
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    assert_int_equal(hs_exporter_otlp.create(fx->doc.root, "exporters.otlp", &c, &err), HS_EINVAL);
    assert_null(c);
    /* both problems at once: a bad value and no endpoint */
    assert_int_equal(err.count, 2);
    bool enum_err = false, endpoint_err = false;
    for (size_t i = 0; i < err.count; i++) {
        enum_err |= strstr(err.lines[i], "t.yaml:1:14: exporters.otlp.compression") != NULL;
        endpoint_err |=
            strstr(err.lines[i], "one of endpoint, traces_endpoint or profiles_endpoint is "
                                 "required") != NULL;
    }
    assert_true(enum_err);
    assert_true(endpoint_err);
    hs_error_free(&err);
    hs_config_doc_free(&fx->doc);

    static const char yaml2[] = "headers: {A: b}\n";
    assert_int_equal(hs_config_parse("t.yaml", yaml2, strlen(yaml2), &fx->doc, &err), 0);
    assert_int_equal(hs_exporter_otlp.create(fx->doc.root, "exporters.otlp", &c, &err), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "t.yaml:1:1: exporters.otlp: "));
    assert_non_null(strstr(err.lines[0], "endpoint, traces_endpoint or profiles_endpoint"));
    hs_error_free(&err);
}

static void test_shutdown_before_start(void **state)
{
    struct fixture *fx = *state;
    static const char yaml[] = "endpoint: http://127.0.0.1:1\n";
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    assert_int_equal(hs_exporter_otlp.create(fx->doc.root, "exporters.otlp", &fx->exp, &err), 0);
    fx->exp->type = &hs_exporter_otlp;
    fx->exp->id = ID;
    fx->loop.data = fx;
    fx->exp->loop = &fx->loop;
    assert_int_equal(consume(fx, 1), 0); /* held; freed by destroy */
    hs_exporter_otlp.shutdown(fx->exp, on_done);
    assert_int_equal(fx->done, 1);
    hs_exporter_otlp.shutdown(fx->exp, on_done);
    assert_int_equal(fx->done, 1);
    fx->shut = true;
}

/* ---- OTLP profiles ---------------------------------------------------------------------- */

/* An ExportProfilesServiceRequest of two profiles with a linked sample (bytes into `wire`),
 * decoded into a batch of tenant `tenant`. */
static struct hs_profiles *make_profiles(struct hs_buf *wire, const char *tenant)
{
    struct hs_profiles *batch = ob_checkout_batch(tenant, wire, 1);
    assert_non_null(batch);
    assert_int_equal(batch->request_profiles, 2);
    return batch;
}

static uint64_t profiles_counter(struct fixture *fx, const char *name)
{
    return hs_metrics_counter(fx->m, name, NULL, "exporter=\"" ID "\",signal=\"profiles\"")->value;
}

static bool two_profiles_sent(struct fixture *fx)
{
    return profiles_counter(fx, "exporter_sent_profiles_total") == 2;
}

static bool two_profiles_settled(struct fixture *fx)
{
    return profiles_counter(fx, "exporter_sent_profiles_total") +
               profiles_counter(fx, "exporter_send_failed_profiles_total") ==
           2;
}

/* The request goes out as it came in: its own bytes (gzipped), to /v1development/profiles, on
 * the profiles queue, with the batch's tenant; spans keep their own URL and queue. */
static void test_profiles_request_bytes(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    start_exporter(fx, &hs_exporter_otlp, "endpoint: http://127.0.0.1:%u/\n", fx->sink.port);
    struct hs_buf wire = {0};
    struct hs_profiles *b = make_profiles(&wire, "tenant-p");
    assert_true(fx->exp->type->ready_profiles(fx->exp));
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, b), 0);
    run_until(fx, two_profiles_sent);
    assert_int_equal(consume(fx, 2), 0);
    run_until(fx, all_sent);
    assert_int_equal(sink_count(&fx->sink), 2);
    const struct sink_req *r = sink_req(&fx->sink, 0);
    assert_string_equal(r->path, "/v1development/profiles");
    assert_string_equal(sink_header(r, "Content-Type"), "application/x-protobuf");
    assert_string_equal(sink_header(r, "Content-Encoding"), "gzip");
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "tenant-p");
    size_t len;
    uint8_t *body = gunzip(r->body, r->body_len, &len);
    assert_int_equal(len, wire.len);
    assert_memory_equal(body, wire.data, len); /* byte for byte */
    free(body);
    assert_string_equal(sink_req(&fx->sink, 1)->path, "/v1/traces");
    assert_int_equal(sent(fx), 2); /* spans counted apart from profiles */
    hs_buf_free(&wire);
}

/* profiles_endpoint is used as is; encoding json sends the request as OTLP/JSON, which reads
 * back to the same protobuf. */
static void test_profiles_endpoint_json(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    start_exporter(fx, &hs_exporter_otlp_http,
                   "endpoint: http://127.0.0.1:1/ignored\n"
                   "profiles_endpoint: http://127.0.0.1:%u/custom/profiles\n"
                   "encoding: json\n"
                   "compression: none\n",
                   fx->sink.port);
    struct hs_buf wire = {0};
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, make_profiles(&wire, NULL)), 0);
    run_until(fx, two_profiles_sent);
    const struct sink_req *r = sink_req(&fx->sink, 0);
    assert_string_equal(r->path, "/custom/profiles");
    assert_string_equal(sink_header(r, "Content-Type"), "application/json");
    assert_null(sink_header(r, "X-Scope-OrgID")); /* no tenant stays no tenant */
    struct hs_profiles *back = hs_profiles_new(NULL);
    char err[256];
    assert_int_equal(hs_otlp_profiles_decode_json(back, (const char *)r->body, r->body_len, NULL,
                                                  err, sizeof(err)),
                     0);
    assert_int_equal(back->request_len, wire.len);
    assert_memory_equal(back->request, wire.data, wire.len);
    hs_profiles_unref(back);
    hs_buf_free(&wire);
}

/* A backend's ExportProfilesServiceResponse with partial_success: the rejected profiles are
 * dropped and counted, never retried. */
static void test_profiles_partial_success(void **state)
{
    struct fixture *fx = *state;
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess ps;
    opentelemetry__proto__collector__profiles__v1development__export_profiles_partial_success__init(
        &ps);
    ps.rejected_profiles = 1;
    ps.error_message = "profile too old";
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse resp;
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__init(
        &resp);
    resp.partial_success = &ps;
    uint8_t buf[128];
    size_t len =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__pack(
            &resp, buf);
    start_sink(fx, 0);
    sink_push(&fx->sink, 200, "Content-Type: application/x-protobuf\r\n", buf, len);
    start_exporter(fx, &hs_exporter_otlp, "endpoint: http://127.0.0.1:%u\n", fx->sink.port);
    struct hs_buf wire = {0};
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, make_profiles(&wire, NULL)), 0);
    run_until(fx, two_profiles_settled);
    assert_int_equal(profiles_counter(fx, "exporter_sent_profiles_total"), 1);
    assert_int_equal(profiles_counter(fx, "exporter_send_failed_profiles_total"), 1);
    assert_int_equal(sink_count(&fx->sink), 1);
    hs_buf_free(&wire);
}

/* A pprof batch (the pyroscope receiver's) is not sent as OTLP: dropped and counted. The
 * service refuses such a pipeline (test_service.c); this is the guard behind that. */
static void test_profiles_pprof_dropped(void **state)
{
    struct fixture *fx = *state;
    start_exporter(fx, &hs_exporter_otlp, "endpoint: http://127.0.0.1:%u\n", sink_free_port());
    struct hs_profiles *b = hs_profiles_new(NULL);
    assert_int_equal(hs_profiles_add(b, hs_profile_new()), 0);
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, b), 0);
    assert_int_equal(dropped(fx, "not_otlp"), 1);
    assert_int_equal(profiles_counter(fx, "exporter_sent_profiles_total"), 0);
}

/* Each signal has its own queue: a full profiles queue refuses profiles (and delivery asks
 * ready_profiles, so nothing is handed over) while spans are still taken. */
static void test_queue_per_signal(void **state)
{
    struct fixture *fx = *state;
    start_exporter(fx, &hs_exporter_otlp,
                   "endpoint: http://127.0.0.1:%u\n"
                   "sending_queue: {queue_size: 1, num_consumers: 1}\n"
                   "retry_on_failure: {enabled: false}\n",
                   sink_free_port());
    struct hs_buf wire = {0};
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, make_profiles(&wire, NULL)), 0);
    assert_false(fx->exp->type->ready_profiles(fx->exp));
    assert_true(fx->exp->type->ready(fx->exp));
    struct hs_consumer to_exp = {.targets = &fx->exp, .count = 1};
    assert_int_equal(hs_consumer_profiles(&to_exp, make_profiles(&wire, NULL)), HS_EAGAIN);
    assert_int_equal(profiles_counter(fx, "exporter_enqueue_failed_profiles_total"), 0);
    assert_int_equal(hs_consumer_traces(&to_exp, make_batch(fx, 1)), 0);
    hs_buf_free(&wire);
}

/* otelcol's names take their protocol's keys and no others. */
static void test_otelcol_names(void **state)
{
    struct fixture *fx = *state;
    static const struct {
        const struct hs_component_type *type;
        const char *yaml, *want;
    } cases[] = {
        {&hs_exporter_otlp_grpc, "endpoint: c:4317\ntraces_endpoint: http://c/v1/traces\n",
         "exporters.otlp_grpc.traces_endpoint: unknown key"},
        {&hs_exporter_otlp_grpc, "endpoint: c:4317\nprotocol: grpc\n",
         "exporters.otlp_grpc.protocol: unknown key"},
        {&hs_exporter_otlp_grpc, "encoding: json\n",
         "exporters.otlp_grpc: missing required key \"endpoint\""},
        {&hs_exporter_otlp_http, "endpoint: http://c:4318\nprotocol: grpc\n",
         "exporters.otlp_http.protocol: unknown key"},
        {&hs_exporter_otlp, "protocol: grpc\nendpoint: c:4317\nprofiles_endpoint: http://c/p\n",
         "profiles_endpoint is for http/protobuf"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hs_error err = {0};
        struct hs_component *c = NULL;
        struct hs_config_doc doc = {0};
        char path[64];
        snprintf(path, sizeof(path), "exporters.%s", cases[i].type->name);
        assert_int_equal(
            hs_config_parse("t.yaml", cases[i].yaml, strlen(cases[i].yaml), &doc, &err), 0);
        assert_int_equal(cases[i].type->create(doc.root, path, &c, &err), HS_EINVAL);
        bool found = false;
        for (size_t j = 0; j < err.count; j++)
            found |= strstr(err.lines[j], cases[i].want) != NULL;
        if (!found)
            fail_msg("case %zu: no \"%s\" in %s", i, cases[i].want, err.count ? err.lines[0] : "");
        hs_error_free(&err);
        hs_config_doc_free(&doc);
    }
    (void)fx;
}

/* otlp_grpc: TraceService and ProfilesService paths on an h2c or TLS endpoint; otlp_http sends
 * spans as otlp does. */
static void test_otlp_http_sends(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx, 0);
    start_exporter(fx, &hs_exporter_otlp_http, "endpoint: http://127.0.0.1:%u\n", fx->sink.port);
    assert_int_equal(consume(fx, 2), 0);
    run_until(fx, all_sent);
    assert_string_equal(sink_req(&fx->sink, 0)->path, "/v1/traces");
    assert_int_equal(batch_of(fx, 0, true), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_endpoint_gzip_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_traces_endpoint_verbatim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_then_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_permanent_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backend_down_then_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_drains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_exhausted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_disabled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_success, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_encoding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_bytes_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_disabled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_request_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_endpoint_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_partial_success, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_pprof_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_per_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_otelcol_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_otlp_http_sends, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
