/* test_pyroscope_receiver.c: the pyroscope receiver on a real loop against a blocking client
 * in another thread: /ingest (raw pprof plain and gzipped, multipart, folded), push (protobuf
 * and JSON, gzip), the labels Pyroscope would derive, the tenant, every error answer, and 429
 * when the pipeline refuses; plus the parsing helpers (time, query, multipart) directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/compress.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/metrics.h"
#include "pdata/profiles.h"
#include "perftools/profiles/profile.pb-c.h"
#include "push/v1/push.pb-c.h"
#include "receivers/pyroscope/pyroscope_int.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* we use only part of the helper */
#include "sock_client.c"
#pragma GCC diagnostic pop

extern const struct hs_component_type hs_receiver_pyroscope;

#define MAX_GOT 16

/* What the pipeline saw: every batch, unless told to refuse (then it is never called). */
struct capture {
    struct hs_component base;
    bool refuse;
    struct hs_profiles *got[MAX_GOT];
    int n;
};

static int capture_consume(struct hs_component *c, struct hs_profiles *b)
{
    struct capture *k = hs_container_of(c, struct capture, base);
    if (k->n == MAX_GOT) {
        hs_profiles_unref(b);
        return HS_EAGAIN;
    }
    k->got[k->n++] = b;
    return 0;
}

static bool capture_ready(struct hs_component *c)
{
    return !hs_container_of(c, struct capture, base)->refuse;
}

static const struct hs_component_type capture_type = {.name = "capture",
                                                      .kind = HS_KIND_EXPORTER,
                                                      .consume_profiles = capture_consume,
                                                      .ready = capture_ready};

struct fix {
    uv_loop_t loop;
    uv_async_t async;
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct hs_component *recv;
    struct capture cap;
    struct hs_component *cap_ptr;
    struct hs_consumer next;
    int port;
    bool done_called;
    void (*client)(struct fix *);
    char fail[512];
};

#define CHECK(f, cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (!(f)->fail[0])                                                                     \
                snprintf((f)->fail, sizeof((f)->fail), "%s:%d: %s", __FILE__, __LINE__, #cond);    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void on_done(struct hs_component *c)
{
    struct fix *f = c->loop->data;
    f->done_called = true;
}

static void on_async(uv_async_t *a)
{
    struct fix *f = a->data;
    hs_receiver_pyroscope.shutdown(f->recv, on_done);
    uv_close((uv_handle_t *)a, NULL);
}

static void *client_main(void *arg)
{
    struct fix *f = arg;
    f->client(f);
    uv_async_send(&f->async);
    return NULL;
}

static void fix_init(struct fix *f, const char *yaml)
{
    memset(f, 0, sizeof(*f));
    uv_loop_init(&f->loop);
    f->loop.data = f;
    f->m = hs_metrics_new();
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &f->doc, &err), 0);
    int rc = hs_receiver_pyroscope.create(f->doc.root, "receivers.pyroscope", &f->recv, &err);
    for (size_t i = 0; i < err.count; i++)
        print_error("%s\n", err.lines[i]);
    assert_int_equal(rc, 0);
    hs_error_free(&err);
    f->cap.base.type = &capture_type;
    f->cap_ptr = &f->cap.base;
    f->next = (struct hs_consumer){.targets = &f->cap_ptr, .count = 1};
    f->recv->type = &hs_receiver_pyroscope;
    f->recv->id = "pyroscope";
    f->recv->next_profiles = &f->next;
    f->recv->loop = &f->loop;
    f->recv->metrics = f->m;
}

/* Starts the receiver, runs `client` in a thread until it is done, shuts everything down. */
static void run(struct fix *f, void (*client)(struct fix *))
{
    const struct hs_host host = {.loop = &f->loop, .metrics = f->m};
    assert_int_equal(hs_receiver_pyroscope.start(f->recv, &host), 0);
    f->port = hs_pyroscope_port(f->recv);
    assert_true(f->port > 0);
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
    hs_receiver_pyroscope.shutdown(f->recv, on_done); /* a second call is harmless */
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void fix_free(struct fix *f)
{
    for (int i = 0; i < f->cap.n; i++)
        hs_profiles_unref(f->cap.got[i]);
    hs_receiver_pyroscope.destroy(f->recv);
    hs_config_doc_free(&f->doc);
    hs_metrics_free(f->m);
}

static uint64_t counter(struct fix *f, const char *name, const char *labels)
{
    return hs_metrics_counter(f->m, name, "", labels)->value;
}

/* ---- request helpers (client thread) ---------------------------------------------------- */

/* One request on a new connection; the response body in r (to free). */
static bool post(struct fix *f, const char *method, const char *target, const char *headers,
                 const void *body, size_t len, struct resp *r)
{
    struct cconn c;
    bool ok = cconnect(f->port, &c, 0);
    struct hs_buf b = {0};
    hs_buf_printf(&b, "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n", method, target,
                  headers, len);
    hs_buf_append(&b, body, len);
    ok = ok && csend(&c, (const char *)b.data, b.len) && cread(&c, r);
    hs_buf_free(&b);
    cclose(&c);
    return ok;
}

/* Posts and checks the status and a substring of the body (NULL: an empty body). */
#define EXPECT(f, tgt, hdrs, bytes, nbytes, want_status, want_text)                                \
    do {                                                                                           \
        struct resp r_ = {0};                                                                      \
        CHECK(f, post(f, "POST", tgt, hdrs, bytes, nbytes, &r_));                                  \
        const char *want_ = (want_text);                                                           \
        bool ok_ = r_.status == (want_status) &&                                                   \
                   (want_ ? strstr(r_.body, want_) != NULL : r_.body_len == 0);                    \
        if (!ok_ && !(f)->fail[0])                                                                 \
            snprintf((f)->fail, sizeof((f)->fail), "%s:%d: %s: got %d %s", __FILE__, __LINE__,     \
                     tgt, r_.status, r_.body);                                                     \
        free(r_.body);                                                                             \
        if (!ok_)                                                                                  \
            return;                                                                                \
    } while (0)

/* A CPU profile like Go's: [samples/count, cpu/nanoseconds], `nsamples` samples of main->foo,
 * each 1 sample / 10ms; sample i carries span_id `span` when given. */
static void build_typed(struct hs_buf *out, int nsamples, const char *span, bool gz,
                        const char *const types[4], int period_type);

static void build_pprof(struct hs_buf *out, int nsamples, const char *span, bool gz)
{
    static const char *const cpu[] = {"samples", "count", "cpu", "nanoseconds"};
    build_typed(out, nsamples, span, gz, cpu, 1);
}

/* The same with two other sample types (type, unit, type, unit) and the period type the
 * first (0) or the second (1) of them, as Go's mutex and block profiles are. */
static void build_typed(struct hs_buf *out, int nsamples, const char *span, bool gz,
                        const char *const types[4], int period_type)
{
    char *strs[] = {"",
                    (char *)types[0],
                    (char *)types[1],
                    (char *)types[2],
                    (char *)types[3],
                    "main",
                    "foo",
                    "app.go",
                    "span_id",
                    (char *)(span ? span : "")};
    Perftools__Profiles__ValueType vt[2] = {PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
                                            PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
    vt[0].type = 1, vt[0].unit = 2, vt[1].type = 3, vt[1].unit = 4;
    Perftools__Profiles__ValueType pt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    pt.type = 1 + 2 * period_type, pt.unit = 2 + 2 * period_type;
    Perftools__Profiles__ValueType *vts[] = {&vt[0], &vt[1]};
    Perftools__Profiles__Function fn[2] = {PERFTOOLS__PROFILES__FUNCTION__INIT,
                                           PERFTOOLS__PROFILES__FUNCTION__INIT};
    Perftools__Profiles__Line ln[2] = {PERFTOOLS__PROFILES__LINE__INIT,
                                       PERFTOOLS__PROFILES__LINE__INIT};
    Perftools__Profiles__Location loc[2] = {PERFTOOLS__PROFILES__LOCATION__INIT,
                                            PERFTOOLS__PROFILES__LOCATION__INIT};
    Perftools__Profiles__Function *fns[2];
    Perftools__Profiles__Location *locs[2];
    Perftools__Profiles__Line *lns[2][1];
    for (int i = 0; i < 2; i++) {
        fn[i].id = (uint64_t)i + 1;
        fn[i].name = 5 + i;
        fn[i].filename = 7;
        ln[i].function_id = (uint64_t)i + 1;
        ln[i].line = 10 + i;
        lns[i][0] = &ln[i];
        loc[i].id = (uint64_t)i + 1;
        loc[i].n_line = 1;
        loc[i].line = lns[i];
        fns[i] = &fn[i];
        locs[i] = &loc[i];
    }
    uint64_t stack[] = {2, 1}; /* leaf first: foo called by main */
    int64_t values[] = {1, 10000000};
    Perftools__Profiles__Label lab = PERFTOOLS__PROFILES__LABEL__INIT;
    lab.key = 8, lab.str = 9;
    Perftools__Profiles__Label *labs[] = {&lab};
    Perftools__Profiles__Sample *samples[64];
    Perftools__Profiles__Sample sm[64];
    for (int i = 0; i < nsamples && i < 64; i++) {
        sm[i] = (Perftools__Profiles__Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
        sm[i].n_location_id = 2, sm[i].location_id = stack;
        sm[i].n_value = 2, sm[i].value = values;
        if (span)
            sm[i].n_label = 1, sm[i].label = labs;
        samples[i] = &sm[i];
    }
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_sample_type = 2, p.sample_type = vts;
    p.n_sample = (size_t)nsamples, p.sample = samples;
    p.n_location = 2, p.location = locs;
    p.n_function = 2, p.function = fns;
    p.n_string_table = HS_ARRAY_SIZE(strs), p.string_table = strs;
    p.period_type = &pt, p.period = 10000000;
    p.time_nanos = (int64_t)hs_wall_ns();
    p.duration_nanos = 10000000000;
    struct hs_buf raw = {0};
    hs_buf_reserve(&raw, perftools__profiles__profile__get_packed_size(&p));
    raw.len = perftools__profiles__profile__pack(&p, raw.data);
    if (gz) {
        hs_gzip(raw.data, raw.len, 6, out);
        hs_buf_free(&raw);
    } else {
        *out = raw;
    }
}

/* ---- /ingest ---------------------------------------------------------------------------- */

#define NODE_NAME                                                                                  \
    "myapp%7Botel.scope.name%3Dcom.grafana.pyroscope%2Fnodejs%2C"                                  \
    "process.runtime.version%3Dv20.1.0%2C__session_id__%3Ds1%2C__private__%3Dx%7D"

static void client_raw_pprof(struct fix *f)
{
    struct hs_buf gz = {0}, plain = {0};
    build_pprof(&gz, 3, "00000000000000ab", true);
    build_pprof(&plain, 2, NULL, false);
    /* as @pyroscope/nodejs sends it: gzipped pprof as the raw body, times in seconds */
    EXPECT(f,
           "/ingest?format=pprof&from=1700000000&name=" NODE_NAME
           "&spyName=nodespy&until=1700000010&sampleRate=17",
           "Content-Type: application/octet-stream\r\nX-Scope-OrgID: acme\r\n", gz.data, gz.len,
           200, NULL);
    EXPECT(f, "/pyroscope/ingest?format=pprof&name=plain.app", "", plain.data, plain.len, 200,
           NULL);
    hs_buf_free(&gz);
    hs_buf_free(&plain);
}

static void test_ingest_raw_pprof(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\n");
    run(&f, client_raw_pprof);
    assert_int_equal(f.cap.n, 2);
    struct hs_profiles *b = f.cap.got[0];
    assert_string_equal(b->tenant, "acme");
    assert_int_equal(b->count, 1);
    struct hs_profile *p = b->items[0];
    assert_string_equal(p->app_name, "myapp");
    assert_string_equal(p->spy_name, "nodespy");
    assert_true(p->from_ns == 1700000000LL * 1000000000);
    assert_true(p->until_ns == 1700000010LL * 1000000000);
    /* exactly the labels Pyroscope derives (wire.md §5.3) */
    static const char *const want[][2] = {
        {"__delta__", "false"},
        {"__name__", "process_cpu"},
        {"__session_id__", "s1"},
        {"otel.scope.name", "com.grafana.pyroscope/nodejs"},
        {"process.runtime.version", "v20.1.0"},
        {"pyroscope_spy", "nodespy"},
        {"service_name", "myapp"},
    };
    assert_int_equal(p->nlabels, HS_ARRAY_SIZE(want));
    for (size_t i = 0; i < HS_ARRAY_SIZE(want); i++) {
        assert_string_equal(p->labels[i].name, want[i][0]);
        assert_string_equal(p->labels[i].value, want[i][1]);
    }
    assert_string_equal(p->service, "myapp");
    assert_true(p->raw_len > 2 && p->raw[0] == 0x1f && p->raw[1] == 0x8b); /* kept as sent */
    assert_int_equal(p->summary.samples, 3);
    assert_int_equal(p->summary.nspans, 1);
    assert_int_equal(p->summary.spans[0].id[7], 0xab);

    b = f.cap.got[1];
    assert_null(b->tenant);
    p = b->items[0];
    assert_string_equal(hs_profile_label(p, "service_name"), "plain.app");
    assert_null(hs_profile_label(p, "pyroscope_spy"));
    assert_int_equal(p->raw[0], 0x0a); /* uncompressed: field 1 (sample_type) */
    assert_int_equal(p->summary.samples, 2);
    assert_int_equal(counter(&f, "receiver_accepted_profiles_total",
                             "receiver=\"pyroscope\",transport=\"http\""),
                     2);
    fix_free(&f);
}

static void multipart(struct hs_buf *out, const char *boundary, const char *const *names,
                      const struct hs_buf *bodies, size_t n)
{
    hs_buf_printf(out, "preamble\r\n");
    for (size_t i = 0; i < n; i++) {
        hs_buf_printf(out,
                      "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s.bin\""
                      "\r\nContent-Type: application/octet-stream\r\n\r\n",
                      boundary, names[i], names[i]);
        hs_buf_append(out, bodies[i].data, bodies[i].len);
        hs_buf_printf(out, "\r\n");
    }
    hs_buf_printf(out, "--%s--\r\n", boundary);
}

#define STC "{\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"}}"

static void client_multipart(struct fix *f)
{
    struct hs_buf parts[2] = {{0}, {0}}, body = {0};
    build_pprof(&parts[0], 1, NULL, true);
    hs_buf_printf(&parts[1], STC);
    static const char *const names[] = {"profile", "sample_type_config"};
    /* as pyroscope-go sends it: ns times, no format */
    multipart(&body, "b0undary-x", names, parts, 2);
    EXPECT(f,
           "/ingest?name=goapp.cpu%7Benv%3Dprod%7D&from=1700000000123&until=1700000010000000000"
           "&spyName=gospy&sampleRate=100",
           "Content-Type: multipart/form-data; boundary=b0undary-x\r\n", body.data, body.len, 200,
           NULL);
    hs_buf_reset(&body);
    multipart(&body, "q:b", names, parts, 1);
    EXPECT(f, "/ingest?name=goapp2", "Content-Type: multipart/form-data; boundary=\"q:b\"\r\n",
           body.data, body.len, 200, NULL);
    hs_buf_free(&parts[0]);
    hs_buf_free(&parts[1]);
    hs_buf_free(&body);
}

static void test_ingest_multipart(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\n");
    run(&f, client_multipart);
    assert_int_equal(f.cap.n, 2);
    struct hs_profile *p = f.cap.got[0]->items[0];
    assert_string_equal(p->sample_type_config, STC);
    assert_true(p->from_ns == 1700000000123LL * 1000000);                  /* 13 digits: ms */
    assert_true(p->until_ns == 1700000010000000000LL);                     /* 19 digits: ns */
    assert_string_equal(hs_profile_label(p, "service_name"), "goapp.cpu"); /* the whole app */
    assert_string_equal(hs_profile_label(p, "env"), "prod");
    assert_string_equal(hs_profile_label(p, "pyroscope_spy"), "gospy");
    assert_int_equal(p->summary.samples, 1);
    p = f.cap.got[1]->items[0];
    assert_null(p->sample_type_config);
    assert_string_equal(hs_profile_label(p, "service_name"), "goapp2");
    fix_free(&f);
}

static void client_folded(struct fix *f)
{
    const char *text = "main;foo 3\nmain;bar 2\n";
    EXPECT(f, "/ingest?name=svc.cpu%7Benv%3Dprod%7D&sampleRate=50&spyName=pyspy", "", text,
           strlen(text), 200, NULL);
    EXPECT(f, "/ingest?name=svc.alloc_space&format=folded", "", text, strlen(text), 200, NULL);
}

static void test_ingest_folded(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\n");
    run(&f, client_folded);
    assert_int_equal(f.cap.n, 2);
    struct hs_profile *p = f.cap.got[0]->items[0];
    assert_string_equal(p->app_name, "svc.cpu");
    assert_string_equal(hs_profile_label(p, "service_name"), "svc"); /* suffix removed */
    assert_string_equal(hs_profile_label(p, "__name__"), "process_cpu");
    assert_string_equal(hs_profile_label(p, "env"), "prod");
    const struct hs_profile_summary *s = &p->summary;
    uint32_t t = s->main_type;
    assert_string_equal(s->types[t], "cpu");
    assert_string_equal(s->units[t], "nanoseconds");
    assert_true(s->totals[t] == 5 * 20000000LL); /* 5 samples at 50 Hz */
    p = f.cap.got[1]->items[0];
    s = &p->summary;
    assert_string_equal(hs_profile_label(p, "service_name"), "svc");
    assert_string_equal(s->types[s->main_type], "alloc_space");
    assert_string_equal(s->units[s->main_type], "bytes");
    assert_true(s->totals[s->main_type] == 5); /* not scaled */
    fix_free(&f);
}

/* sample_type_config as grafana/pyroscope-go's session.go sends it for mutex and block */
#define STC_MUTEX                                                                                  \
    "{\"contentions\":{\"display-name\":\"mutex_count\",\"units\":\"lock_samples\"},"              \
    "\"delay\":{\"display-name\":\"mutex_duration\",\"units\":\"lock_nanoseconds\"}}"
#define STC_BLOCK                                                                                  \
    "{\"contentions\":{\"display-name\":\"block_count\",\"units\":\"lock_samples\"},"              \
    "\"delay\":{\"display-name\":\"block_duration\",\"units\":\"lock_nanoseconds\"}}"
#define GO_MP "Content-Type: multipart/form-data; boundary=b0undary-x\r\n"

/* A Go service's mutex and block profiles (same types, same period type) as pyroscope-go
 * uploads them, then folded uploads of every kind whose name or type Pyroscope changes. */
static void client_go_types(struct fix *f)
{
    static const char *const contention[] = {"contentions", "count", "delay", "nanoseconds"};
    static const char *const names[] = {"profile", "sample_type_config"};
    struct hs_buf parts[2] = {{0}, {0}}, body = {0};
    build_typed(&parts[0], 2, NULL, true, contention, 0);
    const char *stcs[] = {STC_MUTEX, STC_BLOCK};
    for (int i = 0; i < 2; i++) {
        hs_buf_reset(&parts[1]);
        hs_buf_reset(&body);
        hs_buf_printf(&parts[1], "%s", stcs[i]);
        multipart(&body, "b0undary-x", names, parts, 2);
        EXPECT(f, "/ingest?name=goapp%7Benv%3Dprod%7D&spyName=gospy", GO_MP, body.data, body.len,
               200, NULL);
    }
    const char *text = "main;lock 3\n";
    static const char *const folded[] = {"/ingest?name=f.mutex_count",
                                         "/ingest?name=f.block_duration",
                                         "/ingest?name=f.goroutines",
                                         "/ingest?name=f.wall&sampleRate=100",
                                         "/ingest?name=f.cpu&sampleRate=0",
                                         "/ingest?name=f.lock_count",
                                         "/ingest?name=f.alloc_in_new_tlab_bytes"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(folded); i++)
        EXPECT(f, folded[i], "", text, strlen(text), 200, NULL);
    EXPECT(f, "/ingest?name=f.alloc_in_new_tlab_other", "", text, strlen(text), 400,
           "unknown profile type \\\"alloc_in_new_tlab_other\\\"");
    hs_buf_free(&parts[0]);
    hs_buf_free(&parts[1]);
    hs_buf_free(&body);
}

static void test_types_named_as_pyroscope(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\n");
    run(&f, client_go_types);
    static const struct {
        const char *name;
        const char *id0, *id1; /* type ids; NULL: a single type */
    } want[] = {
        {"mutex", "mutex:contentions:count:contentions:count",
         "mutex:delay:nanoseconds:contentions:count"},
        {"block", "block:contentions:count:contentions:count",
         "block:delay:nanoseconds:contentions:count"},
        /* folded: pkg/ingester/pyroscope/ingest_adapter.go convertMetadata */
        {"mutex", "mutex:contentions:count::"},
        {"block", "block:delay:nanoseconds::"},
        {"goroutine", "goroutine:goroutines:count::"},
        {"wall", "wall:wall:nanoseconds:cpu:nanoseconds"},
        {"process_cpu", "process_cpu:samples:count::"},
        {"block", "block:contentions:count::"},
        {"memory", "memory:alloc_in_new_tlab_bytes:bytes::"},
    };
    assert_int_equal(f.cap.n, HS_ARRAY_SIZE(want));
    for (size_t i = 0; i < HS_ARRAY_SIZE(want); i++) {
        const struct hs_profile *p = f.cap.got[i]->items[0];
        const struct hs_profile_summary *s = &p->summary;
        if (strcmp(hs_profile_label(p, "__name__"), want[i].name) != 0)
            fail_msg("upload %zu: __name__ %s, want %s", i, hs_profile_label(p, "__name__"),
                     want[i].name);
        assert_int_equal(s->ntypes, want[i].id1 ? 2 : 1);
        assert_string_equal(s->type_ids[0], want[i].id0);
        if (want[i].id1)
            assert_string_equal(s->type_ids[1], want[i].id1);
        assert_string_equal(p->service, i < 2 ? "goapp" : "f");
    }
    /* the wall upload's counts became time at the sampling period (10 ms at 100 Hz) */
    assert_true(f.cap.got[5]->items[0]->summary.totals[0] == 3 * 10000000LL);
    fix_free(&f);
}

/* ---- push ------------------------------------------------------------------------------- */

/* Two series: {service_name=a, env=x} with 2 samples, {service_name=b} with 1. */
static void build_push(struct hs_buf *out, const struct hs_buf *prof)
{
    Types__V1__LabelPair l[3] = {TYPES__V1__LABEL_PAIR__INIT, TYPES__V1__LABEL_PAIR__INIT,
                                 TYPES__V1__LABEL_PAIR__INIT};
    l[0].name = "service_name", l[0].value = "a";
    l[1].name = "env", l[1].value = "x";
    l[2].name = "service_name", l[2].value = "b";
    Types__V1__LabelPair *l0[] = {&l[0], &l[1]}, *l1[] = {&l[2]};
    Push__V1__RawSample rs[3] = {PUSH__V1__RAW_SAMPLE__INIT, PUSH__V1__RAW_SAMPLE__INIT,
                                 PUSH__V1__RAW_SAMPLE__INIT};
    char *ids[] = {"id-0", "id-1", ""};
    for (int i = 0; i < 3; i++) {
        rs[i].raw_profile.data = prof->data;
        rs[i].raw_profile.len = prof->len;
        rs[i].id = ids[i];
    }
    Push__V1__RawSample *s0[] = {&rs[0], &rs[1]}, *s1[] = {&rs[2]};
    Push__V1__RawProfileSeries se[2] = {PUSH__V1__RAW_PROFILE_SERIES__INIT,
                                        PUSH__V1__RAW_PROFILE_SERIES__INIT};
    se[0].n_labels = 2, se[0].labels = l0, se[0].n_samples = 2, se[0].samples = s0;
    se[1].n_labels = 1, se[1].labels = l1, se[1].n_samples = 1, se[1].samples = s1;
    Push__V1__RawProfileSeries *ses[] = {&se[0], &se[1]};
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    req.n_series = 2, req.series = ses;
    hs_buf_reserve(out, push__v1__push_request__get_packed_size(&req));
    out->len = push__v1__push_request__pack(&req, out->data);
}

static void base64(struct hs_buf *out, const uint8_t *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        hs_buf_putc(out, tab[v >> 18 & 63]);
        hs_buf_putc(out, tab[v >> 12 & 63]);
        hs_buf_putc(out, i + 1 < n ? tab[v >> 6 & 63] : '=');
        hs_buf_putc(out, i + 2 < n ? tab[v & 63] : '=');
    }
}

#define PUSH "/push.v1.PusherService/Push"

static void client_push(struct fix *f)
{
    struct hs_buf prof = {0}, body = {0}, gz = {0}, json = {0};
    build_pprof(&prof, 2, NULL, true);
    build_push(&body, &prof);
    struct resp r = {0};
    CHECK(f, post(f, "POST", PUSH,
                  "Content-Type: application/proto\r\nConnect-Protocol-Version: 1\r\n"
                  "X-Scope-OrgID: t1\r\n",
                  body.data, body.len, &r));
    CHECK(f, r.status == 200 && r.body_len == 0);
    CHECK(f, strstr(r.head, "Content-Type: application/proto\r\n"));
    free(r.body);
    hs_gzip(body.data, body.len, 6, &gz);
    EXPECT(f, PUSH, "Content-Type: application/x-protobuf\r\nContent-Encoding: gzip\r\n", gz.data,
           gz.len, 200, NULL);
    hs_buf_printf(&json, "{\"series\":[{\"labels\":[{\"name\":\"service_name\",\"value\":\"j\"}],"
                         "\"samples\":[{\"rawProfile\":\"");
    base64(&json, prof.data, prof.len);
    hs_buf_printf(&json, "\",\"ID\":\"jid\"}]}]}");
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", json.data, json.len, 200, "{}");
    hs_gzip(json.data, json.len, 6, &gz);
    EXPECT(f, PUSH, "Content-Type: application/json\r\nContent-Encoding: gzip\r\n", gz.data, gz.len,
           200, "{}");
    hs_buf_free(&prof);
    hs_buf_free(&body);
    hs_buf_free(&gz);
    hs_buf_free(&json);
}

static void test_push(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\n");
    run(&f, client_push);
    assert_int_equal(f.cap.n, 4);
    for (int k = 0; k < 2; k++) {
        struct hs_profiles *b = f.cap.got[k];
        assert_int_equal(b->count, 3);
        if (k == 0)
            assert_string_equal(b->tenant, "t1");
        else
            assert_null(b->tenant);
        assert_string_equal(b->items[0]->id, "id-0");
        assert_string_equal(b->items[1]->id, "id-1");
        assert_null(b->items[2]->id);
        assert_string_equal(b->items[0]->service, "a");
        assert_string_equal(hs_profile_label(b->items[1], "env"), "x");
        assert_string_equal(b->items[2]->service, "b");
        assert_null(b->items[0]->app_name);
        assert_string_equal(hs_profile_label(b->items[0], "__name__"), "process_cpu");
        assert_int_equal(b->items[2]->summary.samples, 2);
        assert_int_equal(b->items[0]->raw[0], 0x1f); /* forwarded as sent */
    }
    for (int k = 2; k < 4; k++) {
        struct hs_profiles *b = f.cap.got[k];
        assert_int_equal(b->count, 1);
        assert_string_equal(b->items[0]->id, "jid");
        assert_string_equal(b->items[0]->service, "j");
        assert_int_equal(b->items[0]->summary.samples, 2);
    }
    fix_free(&f);
}

/* ---- errors ----------------------------------------------------------------------------- */

static void client_errors(struct fix *f)
{
    struct hs_buf prof = {0}, body = {0}, big = {0};
    build_pprof(&prof, 1, NULL, false);
    const char *raw = "Content-Type: application/octet-stream\r\n";
    EXPECT(f, "/ingest?format=pprof", raw, prof.data, prof.len, 400,
           "missing required query parameter name");
    EXPECT(f, "/ingest?format=pprof&name=app%7Ba-b%3D1%7D", raw, prof.data, prof.len, 400,
           "label key \\\"a-b\\\"");
    EXPECT(f, "/ingest?format=pprof&name=app%ZZ", raw, prof.data, prof.len, 400, "%-escape");
    EXPECT(f, "/ingest?format=pprof&name=app", raw, "garbage!", 8, 400, "profile: ");
    EXPECT(f, "/ingest?format=trie&name=app", raw, "x", 1, 415, "format trie is not supported");
    EXPECT(f, "/ingest?format=jfr&name=app", raw, "x", 1, 415, "format jfr is not supported");
    EXPECT(f, "/ingest?name=app", "Content-Type: binary/octet-stream+tree\r\n", "x", 1, 415,
           "format tree is not supported");
    EXPECT(f, "/ingest?name=app.nosuch", "", "a;b 1\n", 6, 400, "unknown profile type");
    EXPECT(f, "/ingest?name=app.cpu", "", "a;b x\n", 6, 400, "folded: ");
    EXPECT(f, "/ingest?name=app.cpu", "", "a;b -1\n", 7, 400,
           "folded: line 1: count -1 is negative");
    EXPECT(f, "/ingest?name=app.cpu", "", "a;b 1\na;b\n", 10, 400, "folded: line 2: no count");
    EXPECT(f, "/ingest?name=app.cpu&from=1700000010&until=1700000009", "", "a;b 1\n", 6, 400,
           "until (1700000009) is before from (1700000010)");
    build_pprof(&big, 5, NULL, false); /* max_samples is 4 here */
    EXPECT(f, "/ingest?format=pprof&name=app", raw, big.data, big.len, 413, "profile: ");

    static const char *const pp[] = {"profile", "prev_profile"};
    const struct hs_buf two[] = {prof, prof};
    multipart(&body, "B", pp, two, 2);
    const char *mp = "Content-Type: multipart/form-data; boundary=B\r\n";
    EXPECT(f, "/ingest?name=app", mp, body.data, body.len, 400,
           "prev_profile (cumulative profiles of old clients) is not supported");
    static const char *const stc[] = {"profile", "sample_type_config"};
    struct hs_buf arr = {0};
    hs_buf_printf(&arr, "[1,2]");
    const struct hs_buf withstc[] = {prof, arr};
    hs_buf_reset(&body);
    multipart(&body, "B", stc, withstc, 2);
    EXPECT(f, "/ingest?name=app", mp, body.data, body.len, 400,
           "sample_type_config: not a JSON object");
    /* what Pyroscope's json.Unmarshal into its SampleTypeConfig map refuses */
    static const char *const bad_stc[][2] = {
        {"{\"delay\":{\"display-name\":5}}", "\\\"delay\\\".display-name is not a string"},
        {"{\"delay\":[]}", "\\\"delay\\\" is not an object"},
        {"{\"delay\":{\"sampled\":\"yes\"}}", "\\\"delay\\\".sampled is not a boolean"}};
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad_stc); i++) {
        struct hs_buf cfg = {0};
        hs_buf_printf(&cfg, "%s", bad_stc[i][0]);
        const struct hs_buf parts2[] = {prof, cfg};
        hs_buf_reset(&body);
        multipart(&body, "B", stc, parts2, 2);
        hs_buf_free(&cfg);
        EXPECT(f, "/ingest?name=app", mp, body.data, body.len, 400, bad_stc[i][1]);
    }
    hs_buf_reset(&body);
    multipart(&body, "B", stc + 1, withstc + 1, 1);
    EXPECT(f, "/ingest?name=app", mp, body.data, body.len, 400, "without a \\\"profile\\\" part");
    EXPECT(f, "/ingest?name=app", mp, "no boundary here", 16, 400, "multipart");

    /* push */
    const char *pb = "Content-Type: application/proto\r\n";
    EXPECT(f, PUSH, pb, "", 0, 400, "no profiles received");
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", "{}", 2, 400, "no profiles received");
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", "{\"series\":", 10, 400,
           "PushRequest: line 1 col 11: unexpected end of text (a value is expected)");
    const char *nob64 = "{\"series\":[{\"samples\":[{\"rawProfile\":\"!!\"}]}]}";
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", nob64, strlen(nob64), 400,
           "line 1 col 38: series[0].samples[0].rawProfile: \\\"!!\\\" is not base64");
    const char *nul = "{\"series\":[{\"labels\":[{\"name\":\"a\\u0000b\"}]}]}";
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", nul, strlen(nul), 400,
           "line 1 col 33: \\\\u0000 is not allowed in this document");
    EXPECT(f, PUSH, "Content-Type: text/plain\r\n", "x", 1, 415,
           "application/proto, application/x-protobuf, application/json");
    EXPECT(f, PUSH, "Content-Type: application/proto\r\nContent-Encoding: br\r\n", "x", 1, 415,
           "Content-Encoding");
    EXPECT(f, PUSH, "Content-Type: application/proto\r\nContent-Encoding: gzip\r\n", "xyz", 3, 400,
           "gzip");
    EXPECT(f, PUSH, pb, "\xff\xff", 2, 400, "malformed protobuf");

    struct hs_buf req = {0};
    const char *json_fmt = "{\"series\":[{\"labels\":[%s],\"samples\":[{\"rawProfile\":\"";
    hs_buf_printf(&req, json_fmt, "{\"name\":\"1abc\",\"value\":\"v\"}");
    base64(&req, prof.data, prof.len);
    hs_buf_printf(&req, "\"}]}]}");
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", req.data, req.len, 400,
           "series[0].labels[0]: label name is not");
    hs_buf_reset(&req);
    hs_buf_printf(&req, json_fmt,
                  "{\"name\":\"a\",\"value\":\"1\"},{\"name\":\"a\",\"value\":\"2\"}");
    base64(&req, prof.data, prof.len);
    hs_buf_printf(&req, "\"}]}]}");
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", req.data, req.len, 400,
           "series[0].labels[1]: duplicate label name");
    hs_buf_reset(&req);
    hs_buf_printf(&req, json_fmt, "");
    base64(&req, prof.data, prof.len);
    hs_buf_printf(&req, "\"},{\"rawProfile\":\"AAEC\"}]}]}"); /* the second is not pprof */
    EXPECT(f, PUSH, "Content-Type: application/json\r\n", req.data, req.len, 400,
           "series[0].samples[1]: ");

    /* routing */
    struct resp r = {0};
    CHECK(f, post(f, "GET", "/ingest", "", "", 0, &r));
    CHECK(f, r.status == 405 && find_header(r.head, "allow") &&
                 strncmp(find_header(r.head, "allow"), "POST\r\n", 6) == 0);
    free(r.body);
    EXPECT(f, "/nope", "", "", 0, 404, "not_found");

    /* the body limit (1KiB here) is the server's 413 */
    hs_buf_reset(&body);
    hs_buf_reserve(&body, 4096);
    memset(body.data, 'a', 4096);
    CHECK(f, post(f, "POST", "/ingest?name=app", "", body.data, 4096, &r));
    CHECK(f, r.status == 413);
    free(r.body);

    /* nothing else was lost: a good request on a new connection is accepted */
    EXPECT(f, "/ingest?format=pprof&name=good", raw, prof.data, prof.len, 200, NULL);
    hs_buf_free(&prof);
    hs_buf_free(&body);
    hs_buf_free(&big);
    hs_buf_free(&arr);
    hs_buf_free(&req);
}

static void test_errors(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\nmax_samples: 4\nmax_request_body_size: 2KiB\n");
    run(&f, client_errors);
    assert_int_equal(f.cap.n, 1);
    assert_string_equal(f.cap.got[0]->items[0]->service, "good");
    const char *l = "receiver=\"pyroscope\",transport=\"http\",reason=\"bad_query\"";
    assert_int_equal(counter(&f, "receiver_failed_requests_total", l), 3);
    fix_free(&f);
}

/* ---- the push API's counts and memory ------------------------------------------------- */

/* n series on the wire, each of `labels` empty labels and `samples` empty samples. */
static void push_wire(struct hs_buf *b, int n, int labels, int samples)
{
    struct hs_buf one = {0};
    for (int i = 0; i < labels; i++)
        hs_buf_append(&one, "\x0a\x00", 2);
    for (int i = 0; i < samples; i++)
        hs_buf_append(&one, "\x12\x00", 2);
    for (int i = 0; i < n; i++) {
        hs_buf_putc(b, 0x0a);
        hs_buf_put_varint(b, one.len);
        hs_buf_append(b, one.data, one.len);
    }
    hs_buf_free(&one);
}

/* Counts are bounded before anything is built for them, in JSON as it is read and on the
 * protobuf wire before protobuf-c decodes it; each refusal names the element and the key. */
static void client_push_limits(struct fix *f)
{
    const char *js = "Content-Type: application/json\r\n";
    const char *pb = "Content-Type: application/proto\r\n";
    const char *three = "{\"series\":[{},{},{}]}";
    EXPECT(f, PUSH, js, three, strlen(three), 413,
           "line 1 col 18: series[2]: more than 2 in one request (limit max_profiles_per_request)");
    const char *labels = "{\"series\":[{\"labels\":[{},null,{},{}]}]}";
    EXPECT(f, PUSH, js, labels, strlen(labels), 413,
           "line 1 col 34: series[0].labels[3]: more than 2 (limit max_labels)");
    const char *samples = "{\"series\":[{\"samples\":[{}]},{\"samples\":[{},{}]}]}";
    EXPECT(f, PUSH, js, samples, strlen(samples), 413,
           "series[1].samples[1]: more than 2 in one request (limit max_profiles_per_request)");
    char deep[200] = "{\"x\":";
    memset(deep + 5, '[', 64);
    EXPECT(f, PUSH, js, deep, strlen(deep), 413, "line 1 col 69: nested deeper than 64 levels");

    struct hs_buf w = {0};
    push_wire(&w, 3, 0, 0);
    EXPECT(f, PUSH, pb, w.data, w.len, 413,
           "series[2]: more than 2 in one request (limit max_profiles_per_request)");
    hs_buf_reset(&w);
    push_wire(&w, 1, 3, 0);
    EXPECT(f, PUSH, pb, w.data, w.len, 413, "series[0].labels: more than 2 (limit max_labels)");
    hs_buf_reset(&w);
    push_wire(&w, 2, 0, 2);
    EXPECT(f, PUSH, pb, w.data, w.len, 413,
           "series[1].samples: more than 2 in one request (limit max_profiles_per_request)");
    hs_buf_free(&w);
}

static void test_push_limits(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\nmax_profiles_per_request: 2\nmax_labels: 2\n");
    run(&f, client_push_limits);
    const char *l = "receiver=\"pyroscope\",transport=\"http\",reason=\"over_limit\"";
    assert_int_equal(counter(&f, "receiver_failed_requests_total", l), 7);
    assert_int_equal(f.cap.n, 0);
    fix_free(&f);
}

/* With the counts raised as far as the config allows, what protobuf-c would build is still
 * capped (twice the body and 8 MiB): a million empty labels are 2 MB on the wire and ~60 MB
 * decoded. The answer is a 413 naming the cap. */
static void client_push_cap(struct fix *f)
{
    struct hs_buf w = {0};
    push_wire(&w, 1000, 1000, 0);
    EXPECT(f, PUSH, "Content-Type: application/proto\r\n", w.data, w.len, 413,
           "PushRequest: decoded, it would pass its memory cap");
    hs_buf_free(&w);
}

static void test_push_memory_cap(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\nmax_profiles_per_request: 1000000\nmax_labels: 1000\n"
                 "max_request_body_size: 4MiB\n");
    run(&f, client_push_cap);
    const char *l = "receiver=\"pyroscope\",transport=\"http\",reason=\"too_large\"";
    assert_int_equal(counter(&f, "receiver_failed_requests_total", l), 1);
    fix_free(&f);
}

static void client_refused(struct fix *f)
{
    struct hs_buf prof = {0};
    build_pprof(&prof, 1, NULL, false);
    struct resp r = {0};
    CHECK(f, post(f, "POST", "/ingest?format=pprof&name=app", "", prof.data, prof.len, &r));
    CHECK(f, r.status == 429);
    CHECK(f, find_header(r.head, "retry-after") &&
                 strncmp(find_header(r.head, "retry-after"), "1\r\n", 3) == 0);
    CHECK(f, strstr(r.body, "\"code\":\"resource_exhausted\""));
    free(r.body);
    hs_buf_free(&prof);
}

static void test_refused(void **state)
{
    struct fix f;
    fix_init(&f, "endpoint: 127.0.0.1:0\n");
    f.cap.refuse = true;
    run(&f, client_refused);
    assert_int_equal(f.cap.n, 0);
    assert_int_equal(
        counter(&f, "receiver_refused_profiles_total", "receiver=\"pyroscope\",transport=\"http\""),
        1);
    fix_free(&f);
}

static int early_done;

static void count_early_done(struct hs_component *c)
{
    early_done++;
}

/* shutdown before start calls done at once, and a second shutdown is harmless */
static void test_shutdown_before_start(void **state)
{
    struct fix f;
    fix_init(&f, "{}\n"); /* every default, 0.0.0.0:4040 is never bound */
    hs_receiver_pyroscope.shutdown(f.recv, count_early_done);
    hs_receiver_pyroscope.shutdown(f.recv, count_early_done);
    assert_int_equal(early_done, 1);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    fix_free(&f);
}

/* ---- the parsing helpers ---------------------------------------------------------------- */

static void test_attime(void **state)
{
    const int64_t now = 1700000000LL * 1000000000 + 5;
    assert_true(hs_pyro_attime(NULL, now) == now);
    assert_true(hs_pyro_attime("", now) == now);
    assert_true(hs_pyro_attime("1700000001", now) == 1700000001LL * 1000000000);
    assert_true(hs_pyro_attime("1700000001234", now) == 1700000001234LL * 1000000);
    assert_true(hs_pyro_attime("1700000001234567", now) == 1700000001234567LL * 1000);
    assert_true(hs_pyro_attime("1700000001234567891", now) == 1700000001234567891LL);
    assert_true(hs_pyro_attime("20231114", now) == 19675LL * 86400 * 1000000000);
    assert_true(hs_pyro_attime("20231399", now) == 20231399LL * 1000000000); /* not a date */
    assert_true(hs_pyro_attime("now-1h", now) == now - 3600LL * 1000000000);
    assert_true(hs_pyro_attime("now+30s", now) == now + 30LL * 1000000000);
    assert_true(hs_pyro_attime("9999999999999999999", now) == now); /* overflows */
    assert_true(hs_pyro_attime("yesterday", now) == now);
    assert_true(hs_pyro_attime("99991231", now) == now); /* a date past int64 ns */
    bool valid;
    assert_int_equal(hs_pyro_sample_rate("50", &valid), 50);
    assert_true(valid);
    assert_int_equal(hs_pyro_sample_rate("-1", &valid), 100);
    assert_false(valid);
    assert_int_equal(hs_pyro_sample_rate("1x", &valid), 100);
    assert_false(valid);
}

static void test_query(void **state)
{
    struct hs_pyro_query q;
    char err[100];
    const char *s = "name=a%7Bb%3Dc+d%7D&x=1&name=second&from=1&spyName=&format";
    assert_int_equal(hs_pyro_query_parse(s, strlen(s), &q, err, sizeof(err)), 0);
    assert_string_equal(q.name, "a{b=c d}");
    assert_string_equal(q.from, "1");
    assert_string_equal(q.spy_name, "");
    assert_string_equal(q.format, "");
    assert_null(q.until);
    hs_pyro_query_free(&q);
    assert_int_equal(hs_pyro_query_parse("name=%4", 7, &q, err, sizeof(err)), HS_EINVAL);
    assert_non_null(strstr(err, "byte 5"));
}

static void test_multipart_parse(void **state)
{
    struct hs_str bd;
    bool mp;
    assert_true(
        hs_pyro_multipart_boundary(HS_STR("multipart/form-data; boundary=\"a b\""), &mp, &bd));
    assert_true(mp && bd.len == 3 && memcmp(bd.ptr, "a b", 3) == 0);
    assert_false(hs_pyro_multipart_boundary(HS_STR("multipart/form-data"), &mp, &bd));
    assert_true(mp);
    assert_false(hs_pyro_multipart_boundary(HS_STR("text/plain; boundary=x"), &mp, &bd));
    assert_false(mp);

    struct hs_pyro_part parts[HS_PYRO_MAX_PARTS];
    size_t n;
    char err[100];
    const char *lf = "--X\ncontent-disposition: form-data; name=profile\n\nAB\r\nC\n--X\n"
                     "Content-Disposition: form-data; name=\"b\"\n\n\n--X--";
    assert_int_equal(hs_pyro_multipart_parse((const uint8_t *)lf, strlen(lf), HS_STR("X"), parts,
                                             &n, err, sizeof(err)),
                     0);
    assert_int_equal(n, 2);
    assert_true(hs_str_eq(parts[0].name, "profile"));
    assert_int_equal(parts[0].len, 5); /* "AB\r\nC": the delimiter's CRLF is "\r\n--X" only */
    assert_true(hs_str_eq(parts[1].name, "b"));
    const char *open = "--X\r\nContent-Disposition: form-data; name=a\r\n\r\ndata";
    assert_int_equal(hs_pyro_multipart_parse((const uint8_t *)open, strlen(open), HS_STR("X"),
                                             parts, &n, err, sizeof(err)),
                     HS_EINVAL);
    assert_non_null(strstr(err, "no closing boundary"));
}

static void test_base64(void **state)
{
    uint8_t out[16];
    assert_int_equal(hs_base64_decode("AAEC", 4, out), 3);
    assert_int_equal(out[2], 2);
    assert_int_equal(hs_base64_decode("-_8=", 4, out), 2); /* URL-safe, padded */
    assert_int_equal(out[0], 0xfb);
    assert_int_equal(hs_base64_decode("A", 1, out), -1);
    assert_int_equal(hs_base64_decode("A*==", 4, out), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingest_raw_pprof),
        cmocka_unit_test(test_ingest_multipart),
        cmocka_unit_test(test_ingest_folded),
        cmocka_unit_test(test_types_named_as_pyroscope),
        cmocka_unit_test(test_push),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_push_limits),
        cmocka_unit_test(test_push_memory_cap),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_shutdown_before_start),
        cmocka_unit_test(test_attime),
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_multipart_parse),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
