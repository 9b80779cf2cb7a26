/* test_demo.c: `hotspan demo`'s generator where it has logic: where it sends (read from the
 * config, defaults from the receivers' field tables, refusals that name what is missing), the
 * seeded traffic model, the OTLP it builds (decoded by pdata's scanner: the N+1 children the
 * correlator keys on), the pprof it builds (decoded by pdata/pprof.c: the functions, and
 * span_id labels on the request's samples) and api-server's goroutine profile upload (decoded
 * by the pyroscope receiver's /ingest decoder: its type, labels and where requests waited). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/compress.h"
#include "demo/demo.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces_edit.h"
#include "processors/correlator/correlator_int.h"
#include "receivers/pyroscope/pyroscope_int.h"

extern const char hs_default_config[];
extern const size_t hs_default_config_len;

static int targets(const char *yaml, struct hs_demo_targets *t, struct hs_error *err)
{
    return hs_demo_targets_read(NULL, yaml, strlen(yaml), t, err);
}

static void test_targets_default(void **state)
{
    struct hs_demo_targets t;
    struct hs_error err = {0};
    assert_int_equal(hs_demo_targets_read(NULL, hs_default_config, hs_default_config_len, &t, &err),
                     0);
    assert_string_equal(t.traces_url, "http://127.0.0.1:4318/v1/traces");
    assert_string_equal(t.ingest_url, "http://127.0.0.1:4040/ingest");
    assert_string_equal(t.admin, "127.0.0.1:13133");
    assert_int_equal(err.count, 0);
}

/* Keys left out take the receivers' own defaults; other hosts are kept, wildcards go to
 * loopback; a named instance (otlp/in) counts. */
static void test_targets_defaults_and_hosts(void **state)
{
    struct hs_demo_targets t;
    struct hs_error err = {0};
    assert_int_equal(targets("receivers:\n"
                             "  otlp/in: {protocols: {http: {}}}\n"
                             "  pyroscope: {}\n",
                             &t, &err),
                     0);
    assert_string_equal(t.traces_url, "http://127.0.0.1:4318/v1/traces");
    assert_string_equal(t.ingest_url, "http://127.0.0.1:4040/ingest");
    assert_string_equal(t.admin, "");
    assert_int_equal(targets("receivers:\n"
                             "  otlp: {protocols: {http: {endpoint: \"[::]:5318\", "
                             "traces_url_path: /t}}}\n"
                             "  pyroscope: {endpoint: \"localhost:5040\"}\n",
                             &t, &err),
                     0);
    assert_string_equal(t.traces_url, "http://[::1]:5318/t");
    assert_string_equal(t.ingest_url, "http://localhost:5040/ingest");
    assert_int_equal(err.count, 0);
}

static void expect_refusal(const char *yaml, const char *want)
{
    struct hs_demo_targets t;
    struct hs_error err = {0};
    assert_int_equal(targets(yaml, &t, &err), HS_EINVAL);
    assert_int_equal(err.count, 1);
    if (!strstr(err.lines[0], want))
        fail_msg("\"%s\" does not say \"%s\"", err.lines[0], want);
    assert_true(strstr(err.lines[0], "hotspan demo sends traces") || strstr(want, "a map"));
    hs_error_free(&err);
}

/* Positioned as config errors are: at `receivers` for a missing receiver, else at the key. */
static void test_targets_refused(void **state)
{
    expect_refusal("receivers:\n  otlp: {protocols: {http: {}}}\n",
                   "<embedded default>:2:3: receivers.pyroscope: missing: ");
    expect_refusal("receivers:\n  otlp: {protocols: {grpc: {}}}\n  pyroscope: {}\n",
                   "<embedded default>:2:9: receivers.otlp.protocols.http: missing: ");
    expect_refusal("receivers:\n  pyroscope: {}\n",
                   "<embedded default>:2:3: receivers.otlp.protocols.http: missing: ");
    expect_refusal("receivers:\n  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}\n"
                   "  pyroscope: {}\n",
                   ":2:39: receivers.otlp.protocols.http.endpoint: \"127.0.0.1:0\" is not a "
                   "fixed host:port: ");
    expect_refusal("receivers:\n  otlp: {protocols: {http: {}}}\n"
                   "  pyroscope: {endpoint: 0.0.0.0:0}\n",
                   ":3:25: receivers.pyroscope.endpoint: \"0.0.0.0:0\" is not a fixed");
    expect_refusal("[]", "<embedded default>:1:1: the config must be a map");
}

#define T0 INT64_C(1763900000000000000)
#define MS INT64_C(1000000)

static void test_model_seeded(void **state)
{
    struct hs_demo_model a, b, c;
    hs_demo_model_init(&a, 42);
    hs_demo_model_init(&b, 42);
    hs_demo_model_init(&c, 43);
    bool differs = false;
    for (int i = 0; i < 200; i++) {
        bool n1 = i % 7 == 3;
        const struct hs_demo_request *x = hs_demo_request_new(&a, T0 + i * 250 * MS, n1);
        const struct hs_demo_request *y = hs_demo_request_new(&b, T0 + i * 250 * MS, n1);
        const struct hs_demo_request *z = hs_demo_request_new(&c, T0 + i * 250 * MS, n1);
        assert_memory_equal(x, y, sizeof(*x)); /* --seed reproduces the traffic */
        differs = differs || memcmp(x->trace_id, z->trace_id, 16) != 0;
        int64_t db = x->db_end_ns - x->db_start_ns;
        assert_true(x->end_ns == T0 + i * 250 * MS);
        assert_true(x->start_ns < x->db_start_ns && x->db_end_ns < x->end_ns);
        if (n1) {
            assert_true(x->queries >= 30 && x->queries <= 60);
            assert_true(db >= 560 * MS && db <= 700 * MS);
        } else {
            assert_int_equal(x->queries, 1);
            assert_true(db >= 40 * MS && db <= 60 * MS);
            assert_true(x->end_ns - x->start_ns < 100 * MS); /* far under the 500ms threshold */
        }
    }
    assert_true(differs);
    assert_int_equal(a.nrecent, HS_DEMO_RECENT);
}

struct seen {
    const uint8_t *data;
    const struct hs_demo_request *r;
    uint32_t spans, prefs, users;
    bool api, db;
    char stmt[256];
};

static int visit(void *ud, const struct hs_span_view *v)
{
    struct seen *s = ud;
    const struct hs_demo_request *r = s->r;
    s->spans++;
    assert_memory_equal(v->trace_id.ptr, r->trace_id, 16);
    if (hs_str_eq(v->name, "GET /users/:id")) {
        assert_true(hs_str_eq(v->service_name, "api-server"));
        assert_int_equal(v->parent_span_id.len, 0);
        assert_memory_equal(v->span_id.ptr, r->api_span, 8);
        assert_int_equal(v->kind, 2);
        assert_true(v->start_ns == (uint64_t)r->start_ns && v->end_ns == (uint64_t)r->end_ns);
        s->api = true;
        return 0;
    }
    assert_true(hs_str_eq(v->service_name, "user-db"));
    if (hs_str_eq(v->name, HS_DEMO_SPAN_NAME)) {
        assert_memory_equal(v->parent_span_id.ptr, r->api_span, 8);
        assert_memory_equal(v->span_id.ptr, r->db_span, 8);
        assert_true(v->end_ns - v->start_ns == (uint64_t)(r->db_end_ns - r->db_start_ns));
        s->db = true;
        return 0;
    }
    /* a query: under findByEmail, inside it, with the attributes the N+1 detector reads */
    assert_memory_equal(v->parent_span_id.ptr, r->db_span, 8);
    assert_int_equal(v->kind, 3);
    assert_true(v->start_ns >= (uint64_t)r->db_start_ns && v->end_ns <= (uint64_t)r->db_end_ns);
    struct hs_str sys, stmt;
    assert_true(hs_span_attr_str(s->data, v, "db.system", &sys));
    assert_true(hs_str_eq(sys, "postgresql"));
    assert_true(hs_span_attr_str(s->data, v, "db.statement", &stmt));
    char norm[256];
    hs_corr_normalize_statement(stmt, norm, sizeof(norm));
    if (hs_str_eq(v->name, "SELECT preferences")) {
        if (s->prefs++ == 0)
            snprintf(s->stmt, sizeof(s->stmt), "%s", norm);
        assert_string_equal(norm, s->stmt); /* alike once normalized: one N+1 group */
    } else {
        assert_true(hs_str_eq(v->name, "SELECT users"));
        s->users++;
    }
    return 0;
}

static void check_traces(const struct hs_demo_request *r)
{
    struct hs_buf b = {0};
    assert_int_equal(hs_demo_encode_traces(r, &b), 0);
    struct seen s = {.data = b.data, .r = r};
    struct hs_otlp_scan res;
    assert_int_equal(hs_otlp_traces_scan(b.data, b.len, NULL, visit, &s, &res), 0);
    assert_int_equal(res.resource_spans, 2);
    assert_int_equal(s.spans, 3 + r->queries);
    assert_int_equal(s.prefs, r->queries);
    assert_int_equal(s.users, 1);
    assert_true(s.api && s.db);
    assert_string_equal(s.stmt, "SELECT key, value FROM preferences WHERE user_id = ?");
    /* protobuf-c reads it the same: two resources, api-server then user-db */
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            NULL, b.len, b.data);
    assert_non_null(req);
    assert_int_equal(req->n_resource_spans, 2);
    assert_int_equal(req->resource_spans[1]->scope_spans[0]->n_spans, 2 + r->queries);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                            NULL);
    hs_buf_free(&b);
}

static void test_traces_decode(void **state)
{
    struct hs_demo_model m;
    hs_demo_model_init(&m, 7);
    check_traces(hs_demo_request_new(&m, T0, true));
    check_traces(hs_demo_request_new(&m, T0, false));
}

static const struct hs_pprof_limits lim = {.max_decompressed = 4u << 20,
                                           .max_samples = 16000,
                                           .max_sample_labels = 32,
                                           .max_stack_depth = 1024};

/* Encodes, gzips (as the demo sends it) and decodes with pdata/pprof.c. */
static struct hs_profile *profile(struct hs_demo_model *m, enum hs_demo_service svc, int64_t from,
                                  int64_t until)
{
    struct hs_buf raw = {0}, gz = {0};
    assert_int_equal(hs_demo_encode_profile(m, svc, from, until, &raw), 0);
    assert_int_equal(hs_gzip(raw.data, raw.len, 6, &gz), 0);
    struct hs_profile *p = hs_profile_new();
    assert_int_equal(hs_profile_set_raw(p, gz.data, gz.len), 0);
    char err[256] = "";
    if (hs_profile_summarize(p, &lim, err, sizeof(err)) != 0)
        fail_msg("summarize: %s", err);
    hs_buf_free(&raw);
    hs_buf_free(&gz);
    return p;
}

static int32_t func_index(const struct hs_profile *p, const char *name)
{
    for (uint32_t i = 0; i < p->summary.nfuncs; i++)
        if (strcmp(p->summary.funcs[i].name, name) == 0)
            return (int32_t)i;
    return -1;
}

static bool on_stack(const struct hs_profile_stack *st, int32_t f)
{
    for (uint32_t d = 0; d < st->depth; d++)
        if ((int32_t)st->funcs[d] == f)
            return true;
    return false;
}

static int32_t span_index(const struct hs_profile *p, const uint8_t id[8])
{
    for (uint32_t i = 0; i < p->summary.nspans; i++)
        if (memcmp(p->summary.spans[i].id, id, 8) == 0)
            return (int32_t)i;
    return -1;
}

/* user-db during an N+1 request: its samples carry the findByEmail span id and are mostly
 * findByEmail > loadPreferences > Client.query, about 90% of the span's time in CPU. */
static void test_profile_nplus1(void **state)
{
    struct hs_demo_model m;
    hs_demo_model_init(&m, 11);
    const struct hs_demo_request *r = hs_demo_request_new(&m, T0, true);
    struct hs_profile *p = profile(&m, HS_DEMO_DB, T0 - 2000 * MS, T0 + 500 * MS);
    const struct hs_profile_summary *s = &p->summary;
    assert_string_equal(s->type_ids[s->main_type], "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_string_equal(p->service, "unknown_service"); /* /ingest's name= gives the real one */
    int32_t find = func_index(p, HS_DEMO_SPAN_NAME),
            prefs = func_index(p, "UserRepository.loadPreferences"),
            query = func_index(p, "Client.query"), handle = func_index(p, "handle");
    assert_true(find >= 0 && prefs >= 0 && query >= 0 && handle >= 0);
    int32_t sp = span_index(p, r->db_span);
    assert_true(sp >= 0);
    int64_t all = 0, under_prefs = 0, under_find = 0;
    for (uint32_t i = 0; i < s->nstacks; i++) {
        const struct hs_profile_stack *st = &s->stacks[i];
        if (st->span != (uint32_t)sp)
            continue;
        assert_int_equal(st->funcs[0], handle); /* root first: handle > ... */
        int64_t v = st->values[s->main_type];
        all += v;
        under_prefs += on_stack(st, prefs) ? v : 0;
        under_find += on_stack(st, find) ? v : 0;
    }
    assert_true(all == s->spans[sp].values[s->main_type]);
    int64_t dur = r->db_end_ns - r->db_start_ns;
    assert_true(all >= dur * 80 / 100 && all <= dur); /* ~90% of the span, sampled at 100 Hz */
    assert_true(under_prefs * 100 >= all * 55);       /* loadPreferences dominates */
    assert_true(under_find * 100 >= all * 80);        /* and sits under findByEmail */
    hs_profile_free(p);
}

/* A window without requests has background samples only, no span labels; api-server's
 * profile labels its own span and never has user-db's functions on a stack. */
static void test_profile_windows(void **state)
{
    struct hs_demo_model m;
    hs_demo_model_init(&m, 12);
    const struct hs_demo_request *r = hs_demo_request_new(&m, T0, false);
    struct hs_profile *p = profile(&m, HS_DEMO_DB, T0 + 1000 * MS, T0 + 3000 * MS);
    assert_int_equal(p->summary.nspans, 0);
    assert_true(p->summary.totals[p->summary.main_type] > 0);
    assert_true(func_index(p, "Pool.maintain") >= 0 ||
                func_index(p, "runtime.gcBgMarkWorker") >= 0);
    hs_profile_free(p);

    for (int i = 0; i < 20; i++) /* enough requests for some api-server CPU */
        hs_demo_request_new(&m, T0 - i * 100 * MS, false);
    p = profile(&m, HS_DEMO_API, T0 - 3000 * MS, T0 + 100 * MS);
    assert_true(p->summary.nspans > 0);
    int32_t prefs = func_index(p, "UserRepository.loadPreferences");
    for (uint32_t i = 0; i < p->summary.nstacks; i++)
        assert_false(on_stack(&p->summary.stacks[i], prefs));
    (void)r;
    hs_profile_free(p);
}

static int32_t func_named(const struct hs_profile *p, const char *name)
{
    int32_t f = func_index(p, name);
    if (f < 0)
        fail_msg("no function %s in the profile", name);
    return f;
}

/* The demo's goroutine upload through the pyroscope receiver's /ingest decoder, as it arrives. */
static struct hs_profiles *goroutines_received(struct hs_demo_model *m, int64_t from, int64_t until)
{
    struct hs_demo_upload up;
    assert_int_equal(hs_demo_goroutines_upload(m, from, until, &up), 0);
    /* multipart as pyroscope-go sends it: a `format` would make Pyroscope read the body as raw
     * pprof (wire.md §5.3) */
    assert_null(strstr(up.query, "format="));
    assert_non_null(strstr(up.content_type, "multipart/form-data; boundary="));
    const struct hs_pyro_limits plim = {.pprof = lim, .max_labels = 32, .max_profiles = 8};
    struct hs_pyro_ingest_req in = {.query = {up.query, strlen(up.query)},
                                    .content_type = {up.content_type, strlen(up.content_type)},
                                    .body = up.body.data,
                                    .len = up.body.len,
                                    .now_ns = T0};
    struct hs_profiles *b = hs_profiles_new(NULL);
    struct hs_pyro_fail f = {0};
    if (hs_pyro_ingest_decode(&in, &plim, b, &f) != 0)
        fail_msg("/ingest refused the goroutine upload: %d %s", f.status, f.msg);
    assert_int_equal(b->count, 1);
    hs_buf_free(&up.body);
    return b;
}

/* A request's goroutine in api-server's goroutine profile: one sample per 10 ms of its span,
 * labelled with its span id; on CPU for its CPU share (no gopark), otherwise parked in
 * getUser > UserClient.fetch > net/http.(*Client).Do > ... > runtime.gopark. Returns the span's
 * samples; *parked gets those parked in the call to user-db. */
static int64_t request_goroutine(const struct hs_profile *p, const struct hs_demo_request *r,
                                 int64_t *parked)
{
    const struct hs_profile_summary *s = &p->summary;
    int32_t sp = span_index(p, r->api_span);
    assert_true(sp >= 0);
    int32_t serve = func_named(p, "http.Server.serve"),
            get = func_named(p, "UsersController.getUser"),
            fetch = func_named(p, "UserClient.fetch"),
            doit = func_named(p, "net/http.(*Client).Do"), sel = func_named(p, "runtime.selectgo"),
            park = func_named(p, "runtime.gopark");
    int64_t all = 0;
    *parked = 0;
    for (uint32_t i = 0; i < s->nstacks; i++) {
        const struct hs_profile_stack *st = &s->stacks[i];
        if (st->span != (uint32_t)sp)
            continue;
        int64_t v = st->values[s->main_type];
        assert_int_equal(st->funcs[0], serve);
        assert_true(on_stack(st, get));
        all += v;
        if (!on_stack(st, park))
            continue; /* running: one of api-server's CPU stacks */
        assert_int_equal(st->funcs[st->depth - 1], park); /* the leaf: where it waits */
        assert_int_equal(st->funcs[st->depth - 2], sel);
        assert_true(on_stack(st, fetch) && on_stack(st, doit));
        *parked += v;
    }
    assert_true(all == s->spans[sp].values[s->main_type]);
    return all;
}

/* The goroutine profile arrives as Pyroscope names Go's: `goroutines`, one goroutine/count
 * column; an N+1 request's goroutine is parked in its call to user-db for the ~92% of its span
 * it is not on CPU, a fast one for ~70%; the goroutines that outlive requests are in every
 * snapshot, unlabelled. */
static void test_goroutines_upload(void **state)
{
    struct hs_demo_model m;
    hs_demo_model_init(&m, 13);
    const struct hs_demo_request *slow = hs_demo_request_new(&m, T0, true);
    const struct hs_demo_request *fast = hs_demo_request_new(&m, T0 + 300 * MS, false);
    int64_t from = T0 - 2000 * MS, until = T0 + 500 * MS;
    struct hs_profiles *b = goroutines_received(&m, from, until);
    const struct hs_profile *p = b->items[0];
    const struct hs_profile_summary *s = &p->summary;
    assert_string_equal(hs_profile_label(p, "__name__"), "goroutines");
    assert_string_equal(p->service, "api-server");
    assert_string_equal(hs_profile_label(p, "env"), "demo");
    assert_true(p->from_ns == from && p->until_ns == until); /* ns, 19 digits */
    assert_non_null(strstr(p->sample_type_config, "\"display-name\":\"goroutines\""));
    assert_int_equal(s->ntypes, 1);
    assert_string_equal(s->type_ids[s->main_type], "goroutines:goroutine:count:goroutine:count");

    int64_t parked, dur = slow->end_ns - slow->start_ns;
    int64_t all = request_goroutine(p, slow, &parked);
    assert_true(all >= dur / MS / 10 - 1 && all <= dur / MS / 10 + 1); /* a snapshot per 10 ms */
    assert_true(parked * 100 >= all * 88 && parked * 100 <= all * 96);
    dur = fast->end_ns - fast->start_ns;
    all = request_goroutine(p, fast, &parked);
    assert_true(all >= dur / MS / 10 - 1 && all <= dur / MS / 10 + 1);
    assert_true(parked * 100 >= all * 50 && parked * 100 <= all * 90);

    int64_t background = 0;
    int32_t accept = func_named(p, "net.(*TCPListener).Accept"),
            rloop = func_named(p, "net/http.(*persistConn).readLoop"),
            wloop = func_named(p, "net/http.(*persistConn).writeLoop");
    for (uint32_t i = 0; i < s->nstacks; i++) {
        const struct hs_profile_stack *st = &s->stacks[i];
        if (st->span != HS_PROFILE_NO_SPAN)
            continue;
        assert_true(on_stack(st, accept) || on_stack(st, rloop) || on_stack(st, wloop));
        background += st->values[s->main_type];
    }
    assert_true(background == 5 * (until - from) / (10 * MS)); /* 5 goroutines, 250 snapshots */
    hs_profiles_unref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_targets_default), cmocka_unit_test(test_targets_defaults_and_hosts),
        cmocka_unit_test(test_targets_refused), cmocka_unit_test(test_model_seeded),
        cmocka_unit_test(test_traces_decode),   cmocka_unit_test(test_profile_nplus1),
        cmocka_unit_test(test_profile_windows), cmocka_unit_test(test_goroutines_upload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
