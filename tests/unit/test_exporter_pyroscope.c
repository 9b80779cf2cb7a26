/* test_exporter_pyroscope.c: the pyroscope exporter against a loopback sink. Push mode: the
 * PushRequest decoded with protobuf-c (labels, raw bytes identical, ID), the tenant header from
 * the batch or from config, basic auth, gzip. Ingest mode: the URL query and the raw or
 * multipart body. Retries, permanent drops and backpressure counted; config errors. OTLP
 * profiles: converted once to pprof with the labels Pyroscope derives, empty ones skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "core/component.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/metrics.h"
#include "http_sink.c"
#include "otlp_profiles_build.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"
#include "perftools/profiles/profile.pb-c.h"
#include "push/v1/push.pb-c.h"

extern const struct hs_component_type hs_exporter_pyroscope;

#define ID "pyroscope/test"
#define FROM 1700000000000000000LL
#define UNTIL 1700000010000000000LL

struct fixture {
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t dog;
    bool timed_out;
    struct sink sink;
    bool sink_up;
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct hs_component *exp;
    int done;
    bool shut;
    uint64_t expected; /* profiles handed over */
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
    *state = fx;
    return 0;
}

static void on_done(struct hs_component *c)
{
    ((struct fixture *)c->loop->data)->done++;
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
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    hs_metrics_free(fx->m);
    hs_config_doc_free(&fx->doc);
    free(fx);
    return 0;
}

/* Creates the exporter from YAML (%u becomes the sink's port) and starts it. */
static void start_exporter(struct fixture *fx, const char *yaml_fmt, unsigned port)
{
    char yaml[1024];
    struct hs_error err = {0};
    snprintf(yaml, sizeof(yaml), yaml_fmt, port);
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    int rc = hs_exporter_pyroscope.create(fx->doc.root, "exporters." ID, &fx->exp, &err);
    for (size_t i = 0; i < err.count; i++)
        print_error("%s\n", err.lines[i]);
    assert_int_equal(rc, 0);
    hs_error_free(&err);
    fx->exp->type = &hs_exporter_pyroscope;
    fx->exp->id = ID;
    fx->exp->metrics = fx->m;
    fx->exp->loop = &fx->loop;
    fx->loop.data = fx;
    struct hs_host host = {.loop = &fx->loop, .metrics = fx->m};
    assert_int_equal(hs_exporter_pyroscope.start(fx->exp, &host), 0);
}

static void start_sink(struct fixture *fx)
{
    assert_int_equal(sink_start(&fx->sink, 0, &fx->wake), 0);
    fx->sink_up = true;
}

/* The raw bytes of profile i: binary, with NULs and CR LF, so any rewriting would show. */
static void raw_of(unsigned i, uint8_t *out, size_t n)
{
    for (size_t k = 0; k < n; k++)
        out[k] = (uint8_t)(k * 37 + i * 11);
    out[0] = 0x1f; /* looks gzipped: it must still go as it is */
    out[1] = 0x8b;
    out[2] = '\r';
    out[3] = '\n';
    out[4] = 0;
}

#define RAW_LEN 300

static struct hs_profile *profile(unsigned i, bool with_id)
{
    struct hs_profile *p = hs_profile_new();
    uint8_t raw[RAW_LEN];
    raw_of(i, raw, sizeof(raw));
    assert_int_equal(hs_profile_set_raw(p, raw, sizeof(raw)), 0);
    char svc[16];
    snprintf(svc, sizeof(svc), "svc%u", i);
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, svc, strlen(svc)), 0);
    assert_int_equal(hs_profile_set_label(p, "__name__", 8, "process_cpu", 11), 0);
    assert_int_equal(hs_profile_set_label(p, "env", 3, "prod", 4), 0);
    p->app_name = hs_profile_strdup(p, "myapp", 5);
    p->from_ns = FROM;
    p->until_ns = UNTIL;
    if (with_id)
        p->id = hs_profile_strdup(p, "0f1e2d3c-aaaa-bbbb-cccc-000000000001", 36);
    return p;
}

static int consume(struct fixture *fx, const char *tenant, unsigned n, bool with_id)
{
    struct hs_profiles *b = hs_profiles_new(tenant);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(hs_profiles_add(b, profile(i, with_id)), 0);
    fx->expected += n;
    return fx->exp->type->consume_profiles(fx->exp, b);
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
    return counter(fx, "exporter_sent_profiles_total");
}

static uint64_t failed(struct fixture *fx)
{
    return counter(fx, "exporter_send_failed_profiles_total");
}

static bool all_settled(struct fixture *fx)
{
    return sent(fx) + failed(fx) == fx->expected;
}

/* Request i, which must have arrived. */
static const struct sink_req *req_at(struct fixture *fx, size_t i)
{
    const struct sink_req *r = sink_req(&fx->sink, i);
    if (!r)
        fail_msg("request %zu never came", i);
    return r;
}

static size_t header_count(const struct sink_req *r, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < r->header_count; i++)
        n += strcasecmp(r->names[i], name) == 0;
    return n;
}

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

/* Checks a PushRequest body against the profiles consume() builds. */
static void assert_push(const uint8_t *body, size_t len, unsigned n, bool with_id)
{
    Push__V1__PushRequest *req = push__v1__push_request__unpack(NULL, len, body);
    assert_non_null(req);
    assert_int_equal(req->n_series, n);
    for (unsigned i = 0; i < n; i++) {
        const Push__V1__RawProfileSeries *s = req->series[i];
        char svc[16];
        snprintf(svc, sizeof(svc), "svc%u", i);
        /* exactly the profile's labels, in its (sorted) order */
        assert_int_equal(s->n_labels, 3);
        assert_string_equal(s->labels[0]->name, "__name__");
        assert_string_equal(s->labels[0]->value, "process_cpu");
        assert_string_equal(s->labels[1]->name, "env");
        assert_string_equal(s->labels[1]->value, "prod");
        assert_string_equal(s->labels[2]->name, "service_name");
        assert_string_equal(s->labels[2]->value, svc);
        assert_int_equal(s->n_samples, 1);
        uint8_t raw[RAW_LEN];
        raw_of(i, raw, sizeof(raw));
        assert_int_equal(s->samples[0]->raw_profile.len, RAW_LEN);
        assert_memory_equal(s->samples[0]->raw_profile.data, raw, RAW_LEN);
        assert_string_equal(s->samples[0]->id,
                            with_id ? "0f1e2d3c-aaaa-bbbb-cccc-000000000001" : "");
        assert_int_equal(s->n_annotations, 0);
    }
    push__v1__push_request__free_unpacked(req, NULL);
}

/* ---- push ------------------------------------------------------------------------------- */

static void test_push(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx, "endpoint: http://127.0.0.1:%u/prefix/\n", fx->sink.port);
    assert_int_equal(consume(fx, "tenant-a", 2, true), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 2);
    assert_int_equal(sink_count(&fx->sink), 1); /* a batch is one request */
    const struct sink_req *r = req_at(fx, 0);
    assert_string_equal(r->method, "POST");
    assert_string_equal(r->path, "/prefix/push.v1.PusherService/Push");
    assert_string_equal(sink_header(r, "Content-Type"), "application/proto");
    assert_string_equal(sink_header(r, "Connect-Protocol-Version"), "1");
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "tenant-a");
    assert_null(sink_header(r, "Content-Encoding"));
    assert_null(sink_header(r, "Authorization"));
    assert_push(r->body, r->body_len, 2, true);
}

static void test_push_no_tenant_no_id(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx, "endpoint: http://127.0.0.1:%u\n", fx->sink.port);
    assert_int_equal(consume(fx, NULL, 1, false), 0);
    run_until(fx, all_settled);
    const struct sink_req *r = req_at(fx, 0);
    assert_string_equal(r->path, "/push.v1.PusherService/Push");
    assert_null(sink_header(r, "X-Scope-OrgID"));
    assert_push(r->body, r->body_len, 1, false);
}

static void test_tenant_from_config(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "tenant_id: fixed\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, "from-batch", 1, false), 0);
    run_until(fx, all_settled);
    const struct sink_req *r = req_at(fx, 0);
    assert_int_equal(header_count(r, "X-Scope-OrgID"), 1);
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "fixed");
}

static void test_headers_win(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "tenant_id: fixed\n"
                   "headers: {x-scope-orgid: from-headers, Authorization: Bearer tok}\n"
                   "basic_auth: {username: u, password: p}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, "from-batch", 1, false), 0);
    run_until(fx, all_settled);
    const struct sink_req *r = req_at(fx, 0);
    assert_int_equal(header_count(r, "X-Scope-OrgID"), 1);
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "from-headers");
    assert_int_equal(header_count(r, "Authorization"), 1);
    assert_string_equal(sink_header(r, "Authorization"), "Bearer tok");
}

static void test_basic_auth(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "basic_auth: {username: user, password: pass}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, "t", 1, false), 0);
    run_until(fx, all_settled);
    const struct sink_req *r = req_at(fx, 0);
    assert_string_equal(sink_header(r, "Authorization"), "Basic dXNlcjpwYXNz");
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "t"); /* the batch's, still */
}

static void test_push_gzip(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "compression: gzip\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, "t", 3, true), 0);
    run_until(fx, all_settled);
    const struct sink_req *r = req_at(fx, 0);
    assert_string_equal(sink_header(r, "Content-Encoding"), "gzip");
    size_t len;
    uint8_t *body = gunzip(r->body, r->body_len, &len);
    assert_push(body, len, 3, true);
    free(body);
}

/* ---- ingest ----------------------------------------------------------------------------- */

static void test_ingest_raw(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u/base\n"
                   "protocol: ingest\n"
                   "compression: gzip\n", /* ignored for /ingest */
                   fx->sink.port);
    struct hs_profiles *b = hs_profiles_new("tenant-b");
    assert_int_equal(hs_profiles_add(b, profile(0, false)), 0);
    struct hs_profile *p = profile(1, false);
    p->spy_name = hs_profile_strdup(p, "go spy", 6);
    assert_int_equal(hs_profiles_add(b, p), 0);
    fx->expected = 2;
    assert_int_equal(hs_exporter_pyroscope.consume_profiles(fx->exp, b), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 2);
    assert_int_equal(sink_count(&fx->sink), 2); /* one request per profile */
    for (unsigned i = 0; i < 2; i++) {
        const struct sink_req *r = req_at(fx, i);
        char want[512];
        snprintf(want, sizeof(want),
                 "/base/ingest?name=myapp%%7Benv%%3Dprod%%2Cservice_name%%3Dsvc%u%%7D"
                 "&from=1700000000000000000&until=1700000010000000000%s&format=pprof",
                 i, i ? "&spyName=go%20spy" : "");
        assert_string_equal(r->path, want);
        assert_string_equal(sink_header(r, "Content-Type"), "application/octet-stream");
        assert_string_equal(sink_header(r, "X-Scope-OrgID"), "tenant-b");
        assert_null(sink_header(r, "Content-Encoding"));
        assert_null(sink_header(r, "Connect-Protocol-Version"));
        uint8_t raw[RAW_LEN];
        raw_of(i, raw, sizeof(raw));
        assert_int_equal(r->body_len, RAW_LEN);
        assert_memory_equal(r->body, raw, RAW_LEN); /* the pprof as it arrived */
    }
}

/* The bytes of the part named `name` of a multipart body, or NULL. */
static const uint8_t *part_of(const struct sink_req *r, const char *boundary, const char *name,
                              const char *filename, size_t *len)
{
    char head[256], delim[96];
    snprintf(head, sizeof(head),
             "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n", boundary,
             name, filename);
    snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
    const uint8_t *h = memmem(r->body, r->body_len, head, strlen(head));
    if (!h)
        return NULL;
    const uint8_t *end = r->body + r->body_len;
    const uint8_t *data = memmem(h, (size_t)(end - h), "\r\n\r\n", 4);
    assert_non_null(data);
    data += 4;
    const uint8_t *stop = memmem(data, (size_t)(end - data), delim, strlen(delim));
    assert_non_null(stop);
    *len = (size_t)(stop - data);
    return data;
}

static void test_ingest_multipart(void **state)
{
    struct fixture *fx = *state;
    static const char stc[] = "{\"alloc_space\":{\"units\":\"bytes\",\"display-name\":\"x\"}}";
    start_sink(fx);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "protocol: ingest\n",
                   fx->sink.port);
    struct hs_profiles *b = hs_profiles_new(NULL);
    struct hs_profile *p = profile(0, false);
    p->sample_type_config = hs_profile_strdup(p, stc, strlen(stc));
    assert_int_equal(hs_profiles_add(b, p), 0);
    fx->expected = 1;
    assert_int_equal(hs_exporter_pyroscope.consume_profiles(fx->exp, b), 0);
    run_until(fx, all_settled);
    const struct sink_req *r = req_at(fx, 0);
    char path[sizeof(r->path)];
    memcpy(path, r->path, sizeof(path));
    assert_true(strstr(path, "format=") == NULL); /* format=pprof: the body would be read raw */
    assert_true(strstr(path, "?name=myapp%7B") != NULL);
    assert_null(sink_header(r, "X-Scope-OrgID"));
    const char *ct = sink_header(r, "Content-Type");
    static const char prefix[] = "multipart/form-data; boundary=";
    assert_int_equal(strncmp(ct, prefix, sizeof(prefix) - 1), 0);
    const char *boundary = ct + sizeof(prefix) - 1;
    size_t len = 0;
    const uint8_t *prof = part_of(r, boundary, "profile", "profile.pprof", &len);
    assert_non_null(prof);
    uint8_t raw[RAW_LEN];
    raw_of(0, raw, sizeof(raw));
    assert_int_equal(len, RAW_LEN);
    assert_memory_equal(prof, raw, RAW_LEN);
    const uint8_t *cfg =
        part_of(r, boundary, "sample_type_config", "sample_type_config.json", &len);
    assert_non_null(cfg);
    assert_int_equal(len, strlen(stc));
    assert_memory_equal(cfg, stc, len);
    char end[96];
    snprintf(end, sizeof(end), "--%s--\r\n", boundary);
    assert_memory_equal(r->body + r->body_len - strlen(end), end, strlen(end));
}

/* ---- failures --------------------------------------------------------------------------- */

static void test_retry_then_ok(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    sink_push(&fx->sink, 503, "Retry-After: 1\r\n", NULL, 0);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "retry_on_failure: {initial_interval: 10ms}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, "t", 2, true), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 2);
    assert_int_equal(sink_count(&fx->sink), 2);
    assert_int_equal(counter(fx, "exporter_retries_total"), 1);
    const struct sink_req *r = req_at(fx, 1);
    assert_push(r->body, r->body_len, 2, true); /* the same request again */
}

static void test_permanent_dropped(void **state)
{
    struct fixture *fx = *state;
    static const char err[] = "{\"code\":\"invalid_argument\",\"message\":\"invalid metric name\"}";
    start_sink(fx);
    sink_push(&fx->sink, 400, "Content-Type: application/json\r\n", err, sizeof(err) - 1);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "retry_on_failure: {initial_interval: 10ms}\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, "t", 3, false), 0);
    run_until(fx, all_settled);
    assert_int_equal(failed(fx), 3);
    assert_int_equal(dropped(fx, "permanent_error"), 3);
    assert_int_equal(counter(fx, "exporter_retries_total"), 0);
    shutdown_and_wait(fx);
    assert_int_equal(sink_count(&fx->sink), 1);
}

static void test_ingest_one_profile_rejected(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    sink_push(&fx->sink, 422, NULL, "bad pprof", 9);
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "protocol: ingest\n",
                   fx->sink.port);
    assert_int_equal(consume(fx, NULL, 2, false), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 1);
    assert_int_equal(failed(fx), 1);
    assert_int_equal(dropped(fx, "permanent_error"), 1);
}

static void test_backpressure(void **state)
{
    struct fixture *fx = *state;
    start_exporter(fx,
                   "endpoint: http://127.0.0.1:%u\n"
                   "sending_queue: {num_consumers: 1, queue_size: 1}\n"
                   "retry_on_failure: {initial_interval: 10ms, max_elapsed_time: 100ms}\n",
                   sink_free_port());
    assert_true(hs_exporter_pyroscope.ready(fx->exp));
    assert_int_equal(consume(fx, "t", 2, false), 0);
    assert_false(hs_exporter_pyroscope.ready(fx->exp));
    assert_int_equal(consume(fx, "t", 3, false), HS_EAGAIN);
    assert_int_equal(counter(fx, "exporter_enqueue_failed_profiles_total"), 3);
    fx->expected -= 3;
    run_until(fx, all_settled); /* the backend never comes: given up on */
    assert_int_equal(dropped(fx, "retry_exhausted"), 2);
    assert_true(hs_exporter_pyroscope.ready(fx->exp));
    assert_int_equal(counter(fx, "exporter_sent_spans_total"), 0); /* profiles, not spans */
}

static void test_shutdown_before_start(void **state)
{
    struct fixture *fx = *state;
    static const char yaml[] = "endpoint: http://127.0.0.1:1\n";
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    assert_int_equal(hs_exporter_pyroscope.create(fx->doc.root, "x", &fx->exp, &err), 0);
    fx->exp->type = &hs_exporter_pyroscope;
    fx->exp->id = ID;
    fx->exp->loop = &fx->loop;
    fx->loop.data = fx;
    assert_int_equal(consume(fx, "t", 1, false), 0); /* held; released by destroy */
    hs_exporter_pyroscope.shutdown(fx->exp, on_done);
    assert_int_equal(fx->done, 1);
    hs_exporter_pyroscope.shutdown(fx->exp, on_done);
    assert_int_equal(fx->done, 1);
    assert_false(hs_exporter_pyroscope.ready(fx->exp));
    assert_int_equal(consume(fx, "t", 1, false), HS_EAGAIN);
    fx->shut = true;
}

static bool any_line(const struct hs_error *err, const char *needle)
{
    for (size_t i = 0; i < err->count; i++)
        if (strstr(err->lines[i], needle))
            return true;
    return false;
}

static void test_config_errors(void **state)
{
    struct fixture *fx = *state;
    static const char yaml[] = "protocol: grpc\nbasic_auth: {password: x}\n";
    struct hs_error err = {0};
    struct hs_component *c = NULL;
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    assert_int_equal(hs_exporter_pyroscope.create(fx->doc.root, "exporters.pyroscope", &c, &err),
                     HS_EINVAL);
    assert_null(c);
    bool proto = any_line(&err, "t.yaml:1:11: exporters.pyroscope.protocol");
    bool endpoint = any_line(&err, "\"endpoint\"");
    bool user = any_line(&err, "\"username\"");
    assert_true(proto);
    assert_true(endpoint);
    assert_true(user);
    hs_error_free(&err);
}

/* ---- OTLP profiles ---------------------------------------------------------------------- */

#define MS 1000000LL

/* One request: checkout's CPU profile (samples/count every 10 ms: 3 + 1 samples, the 3 linked
 * to span 0708..0e) and an empty one, and cart's alloc_space profile (4096 bytes). */
static struct hs_profiles *otlp_batch(const char *tenant)
{
    struct ob *b = ob_new();
    ORes *r0 = ob_resource(b, ob_kv(b, "service.name", ob_any_str(b, "checkout")),
                           ob_kv(b, "k8s.namespace.name", ob_any_str(b, "shop")), NULL);
    OScope *s0 = ob_scope(b, r0, "ebpf");
    OProf *cpu = ob_profile(b, s0, "samples", "count", "cpu", "nanoseconds", 10 * MS,
                            (uint64_t)FROM, 10000 * MS);
    ob_sample(b, cpu, ob_stack(b, "main;handle;query"), 3, ob_link(b, 7), -1);
    ob_sample(b, cpu, ob_stack(b, "main;gc"), 1, 0, -1);
    ob_profile(b, s0, "samples", "count", "cpu", "nanoseconds", 10 * MS, (uint64_t)FROM,
               10000 * MS); /* no samples */
    ORes *r1 = ob_resource(b, ob_kv(b, "service.name", ob_any_str(b, "cart")), NULL);
    OProf *alloc = ob_profile(b, ob_scope(b, r1, "go"), "alloc_space", "bytes", "space", "bytes",
                              524288, (uint64_t)FROM, 10000 * MS);
    ob_sample(b, alloc, ob_stack(b, "main;alloc"), 4096, 0, -1);
    struct hs_buf wire = {0};
    ob_pack(b, &wire);
    ob_free(b);
    struct hs_profiles *batch = hs_profiles_new(tenant);
    char err[256];
    assert_int_equal(hs_otlp_profiles_decode(batch, wire.data, wire.len, NULL, err, sizeof(err)),
                     0);
    hs_buf_free(&wire);
    assert_int_equal(batch->count, 3);
    return batch;
}

/* A series' label, or NULL. */
static const char *label(const Push__V1__RawProfileSeries *s, const char *name)
{
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->labels[i]->name, name) == 0)
            return s->labels[i]->value;
    return NULL;
}

/* The sum of a pprof's first sample type, and how many samples carry span_id `span`. */
static int64_t pprof_total(const uint8_t *gz, size_t len, const char *type, const char *span,
                           size_t *linked)
{
    size_t n;
    uint8_t *raw = gunzip(gz, len, &n);
    Perftools__Profiles__Profile *pp = perftools__profiles__profile__unpack(NULL, n, raw);
    free(raw);
    assert_non_null(pp);
    assert_int_equal(pp->n_sample_type, 1);
    assert_string_equal(pp->string_table[pp->sample_type[0]->type], type);
    int64_t total = 0;
    *linked = 0;
    for (size_t i = 0; i < pp->n_sample; i++) {
        total += pp->sample[i]->value[0];
        for (size_t l = 0; l < pp->sample[i]->n_label; l++) {
            const Perftools__Profiles__Label *lb = pp->sample[i]->label[l];
            *linked += strcmp(pp->string_table[lb->key], "span_id") == 0 &&
                       strcmp(pp->string_table[lb->str], span) == 0;
        }
    }
    perftools__profiles__profile__free_unpacked(pp, NULL);
    return total;
}

/* Push: one series per profile with samples, labelled as Pyroscope's OTLP ingestion labels it,
 * its pprof's totals those of the source (cpu samples x period), the span link a span_id. */
static void test_otlp_push(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx, "endpoint: http://127.0.0.1:%u\n", fx->sink.port);
    struct hs_profiles *b = otlp_batch("tenant-o");
    fx->expected = 2; /* the empty profile is not sent */
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, b), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 2);
    assert_int_equal(sink_count(&fx->sink), 1);
    const struct sink_req *r = req_at(fx, 0);
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "tenant-o");
    Push__V1__PushRequest *req = push__v1__push_request__unpack(NULL, r->body_len, r->body);
    assert_non_null(req);
    assert_int_equal(req->n_series, 2);
    const Push__V1__RawProfileSeries *cpu = req->series[0], *alloc = req->series[1];
    assert_string_equal(label(cpu, "service_name"), "checkout");
    assert_string_equal(label(cpu, "__name__"), "process_cpu");
    assert_string_equal(label(cpu, "__delta__"), "false");
    assert_string_equal(label(cpu, "__otel__"), "true");
    assert_string_equal(label(cpu, "k8s_namespace_name"), "shop");
    assert_string_equal(label(alloc, "service_name"), "cart");
    assert_string_equal(label(alloc, "__name__"), "space"); /* the period type, as Pyroscope */
    assert_null(label(alloc, "k8s_namespace_name"));
    size_t linked;
    assert_int_equal(pprof_total(cpu->samples[0]->raw_profile.data,
                                 cpu->samples[0]->raw_profile.len, "cpu", "0708090a0b0c0d0e",
                                 &linked),
                     4 * 10 * MS);
    assert_int_equal(linked, 1);
    assert_int_equal(pprof_total(alloc->samples[0]->raw_profile.data,
                                 alloc->samples[0]->raw_profile.len, "alloc_space", "-", &linked),
                     4096);
    push__v1__push_request__free_unpacked(req, NULL);
}

/* /ingest: one upload per profile with samples, the converted pprof as its body. */
static void test_otlp_ingest(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx, "endpoint: http://127.0.0.1:%u\nprotocol: ingest\n", fx->sink.port);
    fx->expected = 2;
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, otlp_batch(NULL)), 0);
    run_until(fx, all_settled);
    assert_int_equal(sent(fx), 2);
    assert_int_equal(sink_count(&fx->sink), 2);
    for (size_t i = 0; i < 2; i++) {
        const struct sink_req *r = req_at(fx, i);
        assert_non_null(strstr(r->path, i ? "service_name%3Dcart" : "service_name%3Dcheckout"));
        assert_non_null(strstr(r->path, "&format=pprof"));
        size_t linked;
        assert_int_equal(pprof_total(r->body, r->body_len, i ? "alloc_space" : "cpu",
                                     "0708090a0b0c0d0e", &linked),
                         i ? 4096 : 4 * 10 * MS);
        assert_int_equal(linked, i ? 0 : 1);
    }
}

/* A batch that cannot be converted (here: an item naming a Profile the request lacks) is
 * dropped whole and counted as convert_failed; nothing is sent, nothing is refused. */
static void test_otlp_convert_failed(void **state)
{
    struct fixture *fx = *state;
    start_sink(fx);
    start_exporter(fx, "endpoint: http://127.0.0.1:%u\n", fx->sink.port);
    struct hs_profiles *b = otlp_batch(NULL);
    b->items[2]->otlp_index = 99;
    assert_int_equal(fx->exp->type->consume_profiles(fx->exp, b), 0);
    assert_int_equal(dropped(fx, "convert_failed"), 3);
    assert_int_equal(sent(fx), 0);
    assert_int_equal(sink_count(&fx->sink), 0);
    assert_true(fx->exp->type->ready(fx->exp));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_push, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_no_tenant_no_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenant_from_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_headers_win, setup, teardown),
        cmocka_unit_test_setup_teardown(test_basic_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_gzip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_multipart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_then_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_permanent_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_one_profile_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_otlp_push, setup, teardown),
        cmocka_unit_test_setup_teardown(test_otlp_ingest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_otlp_convert_failed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
