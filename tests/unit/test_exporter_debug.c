/* test_exporter_debug.c: the debug exporter's output at each verbosity (the exact summary and span
 * lines, then the JSON; the profile lines, labels and top functions; at slow, only the readable
 * line of each enriched slow span), names that cannot forge lines, its counters, config errors
 * and lifecycle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/metrics.h"
#include "exporters/debug.h"
#include "otlp_profiles_build.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

extern const struct hs_component_type hs_exporter_debug;

struct fixture {
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct hs_component *c;
    FILE *out;
    char *text;
    size_t len;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    fx->m = hs_metrics_new();
    fx->out = open_memstream(&fx->text, &fx->len);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    if (fx->c)
        hs_exporter_debug.destroy(fx->c);
    hs_config_doc_free(&fx->doc);
    hs_metrics_free(fx->m);
    fclose(fx->out);
    free(fx->text);
    free(fx);
    return 0;
}

static int create(struct fixture *fx, const char *yaml, struct hs_error *err)
{
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, err), 0);
    int rc = hs_exporter_debug.create(fx->doc.root, "exporters.debug", &fx->c, err);
    if (rc == 0) {
        fx->c->type = &hs_exporter_debug;
        fx->c->id = "debug";
        fx->c->metrics = fx->m;
        hs_exporter_debug_set_output(fx->c, fx->out);
    }
    return rc;
}

static void start(struct fixture *fx, const char *yaml)
{
    struct hs_error err = {0};
    if (create(fx, yaml, &err))
        fail_msg("create: %s", err.lines[0]);
    struct hs_host host = {.metrics = fx->m};
    assert_int_equal(hs_exporter_debug.start(fx->c, &host), 0);
}

/* Two resources: a service with a server span (12.345 ms, error, 2 attributes, 1 event) and a
 * child, and one without service.name whose span's name holds a newline. */
static const char *BATCH =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
    "\"value\":{\"stringValue\":\"checkout\"}}]},\"scopeSpans\":[{\"spans\":["
    "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"eee19b7ec3c1b174\","
    "\"name\":\"GET /cart\",\"kind\":2,\"startTimeUnixNano\":\"1000000000\","
    "\"endTimeUnixNano\":\"1012345678\",\"attributes\":[{\"key\":\"a\",\"value\":{\"intValue\":1}},"
    "{\"key\":\"b\",\"value\":{}}],\"events\":[{\"name\":\"e\"}],\"status\":{\"code\":2}},"
    "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000001\","
    "\"parentSpanId\":\"eee19b7ec3c1b174\",\"name\":\"SELECT\",\"kind\":3,"
    "\"startTimeUnixNano\":\"1000000000\",\"endTimeUnixNano\":\"1000000999\","
    "\"status\":{\"code\":1}}]}]},"
    "{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
    "\"spanId\":\"1112131415161718\",\"name\":\"evil\\ncheckout x\",\"kind\":9}]}]}]}";

static const char *SPAN_LINES =
    "checkout GET /cart trace=5b8efff798038103d269b633813fc60c span=eee19b7ec3c1b174 parent=- "
    "kind=server dur=12.345ms status=error attrs=2 events=1\n"
    "checkout SELECT trace=5b8efff798038103d269b633813fc60c span=0000000000000001 "
    "parent=eee19b7ec3c1b174 kind=client dur=0.000ms status=ok attrs=0 events=0\n"
    "- evil?checkout x trace=0102030405060708090a0b0c0d0e0f10 span=1112131415161718 parent=- "
    "kind=9 dur=0.000ms status=unset attrs=0 events=0\n";

static struct hs_traces *batch(struct hs_buf *wire_copy)
{
    struct hs_buf wire = {0};
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire(BATCH, strlen(BATCH), NULL, &wire, err, sizeof(err)),
                     0);
    if (wire_copy)
        hs_buf_append(wire_copy, wire.data, wire.len);
    return hs_traces_wrap(wire.data, wire.len, wire.cap, 3, 2);
}

static const char *output(struct fixture *fx)
{
    fflush(fx->out);
    return fx->text ? fx->text : "";
}

static uint64_t metric(struct fixture *fx, const char *series)
{
    struct hs_buf out = {0};
    assert_int_equal(hs_metrics_render(fx->m, &out), 0);
    hs_buf_putc(&out, '\0');
    const char *p = strstr((char *)out.data, series);
    uint64_t v = p ? strtoull(p + strlen(series), NULL, 10) : UINT64_MAX;
    hs_buf_free(&out);
    return v;
}

static void test_basic(void **state)
{
    struct fixture *fx = *state;
    start(fx, "{}"); /* basic is the default */
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, batch(NULL)), 0);
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, batch(NULL)), 0);
    assert_string_equal(output(fx), "traces: 2 resource spans, 3 spans\n"
                                    "traces: 2 resource spans, 3 spans\n");
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"debug\"} "), 6);
}

static void test_normal(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: normal");
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, batch(NULL)), 0);
    char want[1024];
    snprintf(want, sizeof(want), "traces: 2 resource spans, 3 spans\n%s", SPAN_LINES);
    assert_string_equal(output(fx), want);
}

/* A slow span the correlator annotated shows its verdict on its line. */
static void test_normal_annotations(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: normal");
    static const char *json =
        "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"stringValue\":\"user-db\"}}]},\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"eee19b7ec3c1b174\","
        "\"name\":\"findByEmail\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1600000000\",\"attributes\":["
        "{\"key\":\"hotspan.slow\",\"value\":{\"boolValue\":true}},"
        "{\"key\":\"hotspan.slow.reason\",\"value\":{\"stringValue\":\"threshold 500ms\"}},"
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"window\"}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":\"findByEmail > loadPreferences\"}},"
        "{\"key\":\"hotspan.pattern\",\"value\":{\"stringValue\":\"n_plus_one\"}}]}]}]}]}";
    struct hs_buf wire = {0};
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), NULL, &wire, err, sizeof(err)), 0);
    assert_int_equal(hs_exporter_debug.consume_traces(
                         fx->c, hs_traces_wrap(wire.data, wire.len, wire.cap, 1, 1)),
                     0);
    assert_string_equal(output(fx),
                        "traces: 1 resource spans, 1 spans\n"
                        "user-db findByEmail trace=5b8efff798038103d269b633813fc60c "
                        "span=eee19b7ec3c1b174 parent=- kind=unspecified dur=600.000ms status=unset "
                        "attrs=5 events=0 slow=\"threshold 500ms\" match=\"window\" "
                        "hot_path=\"findByEmail > loadPreferences\" pattern=\"n_plus_one\"\n");
}

static void test_detailed(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: detailed");
    struct hs_buf wire = {0};
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, batch(&wire)), 0);
    const char *out = output(fx);
    char head[1024];
    snprintf(head, sizeof(head), "traces: 2 resource spans, 3 spans\n%s", SPAN_LINES);
    assert_memory_equal(out, head, strlen(head));

    /* then one line of JSON holding the same batch */
    const char *json = out + strlen(head);
    const char *nl = strchr(json, '\n');
    assert_non_null(nl);
    assert_string_equal(nl + 1, "");
    struct hs_buf back = {0};
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire(json, (size_t)(nl - json), NULL, &back, err, sizeof(err)),
                     0);
    assert_int_equal(back.len, wire.len);
    assert_memory_equal(back.data, wire.data, wire.len);
    hs_buf_free(&back);
    hs_buf_free(&wire);
}

static void test_config_error(void **state)
{
    struct fixture *fx = *state;
    struct hs_error err = {0};
    assert_int_equal(create(fx, "verbosity: loud", &err), HS_EINVAL);
    assert_null(fx->c);
    assert_int_equal(err.count, 1);
    assert_string_equal(err.lines[0], "t.yaml:1:12: exporters.debug.verbosity: \"loud\" is not "
                                      "one of: basic, normal, detailed, slow");
    hs_error_free(&err);
}

static int done_calls;

static void on_done(struct hs_component *c)
{
    done_calls++;
}

static void test_lifecycle(void **state)
{
    struct fixture *fx = *state;
    struct hs_error err = {0};
    done_calls = 0;
    assert_int_equal(create(fx, "{}", &err), 0);
    assert_false(hs_exporter_debug.ready(fx->c));
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, batch(NULL)), HS_EAGAIN);
    hs_exporter_debug.shutdown(fx->c, on_done); /* before start */
    hs_exporter_debug.shutdown(fx->c, on_done); /* and twice */
    assert_int_equal(done_calls, 1);
    assert_string_equal(output(fx), "");
}

/* ---- profiles --------------------------------------------------------------------------- */

static int64_t *vals(struct hs_profile *p, int64_t a, int64_t b)
{
    int64_t *v = hs_arena_alloc(p->arena, 2 * sizeof(*v));
    v[0] = a;
    v[1] = b;
    return v;
}

/* Summary filled by hand: cpu (index 1) is the main type; self of cpu: work 30 ms, idle 20 ms,
 * main and aaa 0, of 50 ms; 12 more functions with self 0 to test the top-10 cut. */
static struct hs_profile *summarized_profile(void)
{
    struct hs_profile *p = hs_profile_new();
    assert_int_equal(hs_profile_set_raw(p, "0123456789", 10), 0);
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, "check\nout", 9), 0);
    assert_int_equal(hs_profile_set_label(p, "__name__", 8, "process_cpu", 11), 0);
    p->from_ns = 1700000000000000000LL;
    p->until_ns = 1700000010500000000LL;
    struct hs_profile_summary *s = &p->summary;
    static const char *ids[] = {"process_cpu:samples:count:cpu:nanoseconds",
                                "process_cpu:cpu:nanoseconds:cpu:nanoseconds"};
    s->ntypes = 2;
    s->type_ids = ids;
    s->main_type = 1;
    s->samples = 5;
    s->totals = vals(p, 5, 50000000);
    s->nfuncs = 16;
    s->funcs = hs_arena_alloc(p->arena, s->nfuncs * sizeof(*s->funcs));
    s->funcs[0] = (struct hs_profile_func){"main", "main.go", vals(p, 0, 0), vals(p, 5, 50000000)};
    s->funcs[1] = (struct hs_profile_func){"idle", "", vals(p, 2, 20000000), vals(p, 2, 20000000)};
    s->funcs[2] =
        (struct hs_profile_func){"work", "w.go", vals(p, 3, 30000000), vals(p, 3, 30000000)};
    s->funcs[3] = (struct hs_profile_func){"aaa", "", vals(p, 0, 0), vals(p, 2, 20000000)};
    for (uint32_t i = 4; i < s->nfuncs; i++) {
        char name[16];
        snprintf(name, sizeof(name), "z%02u", i);
        s->funcs[i] = (struct hs_profile_func){hs_profile_strdup(p, name, 3), "", vals(p, 0, 0),
                                               vals(p, 0, 0)};
    }
    return p;
}

static void consume_two(struct fixture *fx, const char *tenant)
{
    struct hs_profiles *b = hs_profiles_new(tenant);
    assert_int_equal(hs_profiles_add(b, summarized_profile()), 0);
    struct hs_profile *bare = hs_profile_new();
    assert_int_equal(hs_profile_set_raw(bare, "x", 1), 0);
    assert_int_equal(hs_profiles_add(b, bare), 0);
    assert_int_equal(hs_exporter_debug.consume_profiles(fx->c, b), 0);
}

#define PROFILE_LINES                                                                              \
    "check?out types=process_cpu:samples:count:cpu:nanoseconds,"                                   \
    "process_cpu:cpu:nanoseconds:cpu:nanoseconds samples=5 from=1700000000000000000 "              \
    "dur=10500.000ms bytes=10\n"

static void test_profiles_basic(void **state)
{
    struct fixture *fx = *state;
    start(fx, "{}");
    consume_two(fx, "t1");
    consume_two(fx, NULL);
    assert_string_equal(output(fx), "profiles: 2 (tenant t1)\nprofiles: 2 (tenant -)\n");
    assert_int_equal(metric(fx, "hotspan_exporter_sent_profiles_total{exporter=\"debug\"} "), 4);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"debug\"} "), 0);
}

static void test_profiles_normal(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: normal");
    consume_two(fx, "t1");
    assert_string_equal(output(fx), "profiles: 2 (tenant t1)\n" PROFILE_LINES
                                    "- types=- samples=0 from=0 dur=0.000ms bytes=1\n");
}

static void test_profiles_detailed(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: detailed");
    consume_two(fx, "t1");
    assert_string_equal(output(fx), "profiles: 2 (tenant t1)\n" PROFILE_LINES
                                    "  labels: __name__=process_cpu service_name=check?out\n"
                                    "  self  60.0% 30000000 work (w.go)\n"
                                    "  self  40.0% 20000000 idle\n"
                                    "  self   0.0% 0 aaa\n"
                                    "  self   0.0% 0 main (main.go)\n"
                                    "  self   0.0% 0 z04\n"
                                    "  self   0.0% 0 z05\n"
                                    "  self   0.0% 0 z06\n"
                                    "  self   0.0% 0 z07\n"
                                    "  self   0.0% 0 z08\n"
                                    "  self   0.0% 0 z09\n" /* ten, then cut */
                                    "- types=- samples=0 from=0 dur=0.000ms bytes=1\n"
                                    "  labels:\n");
}

/* An OTLP request of two profiles of checkout (one with a linked sample), decoded into a batch;
 * its protobuf bytes into `wire`. */
static struct hs_profiles *otlp_batch(const char *tenant, struct hs_buf *wire)
{
    struct hs_profiles *batch = ob_checkout_batch(tenant, wire, 0);
    assert_non_null(batch);
    return batch;
}

/* An OTLP batch says so, with its request's size; its profiles name their Profile in the request
 * (they have no pprof until an exporter converts them); detailed adds the request as OTLP/JSON.
 * Profile messages are counted. */
static void test_profiles_otlp(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: detailed");
    struct hs_buf wire = {0};
    assert_int_equal(hs_exporter_debug.consume_profiles(fx->c, otlp_batch("t1", &wire)), 0);
    const char *out = output(fx);
    char head[160];
    snprintf(head, sizeof(head), "profiles: 2 (tenant t1; OTLP request of 2 profiles, %zu bytes)\n",
             wire.len);
    assert_true(strncmp(out, head, strlen(head)) == 0);
    assert_non_null(strstr(out, "\ncheckout types=process_cpu:cpu:nanoseconds:cpu:nanoseconds "
                                "samples=1 from=1700000000000000000 dur=10000.000ms "
                                "otlp_profile=0\n"));
    assert_non_null(strstr(out, "otlp_profile=1\n"));
    const char *json = strstr(out, "\n{\"resourceProfiles\":[");
    assert_non_null(json);
    struct hs_profiles *back = hs_profiles_new(NULL);
    char err[256];
    assert_int_equal(
        hs_otlp_profiles_decode_json(back, json + 1, strlen(json + 1), NULL, err, sizeof(err)), 0);
    assert_int_equal(back->request_len, wire.len); /* the whole request, read back */
    hs_profiles_unref(back);
    hs_buf_free(&wire);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_profiles_total{exporter=\"debug\"} "), 2);
}

/* ---- slow ------------------------------------------------------------------------------- */

/* The correlator's attributes on three spans of user-db: an N+1 span matched exactly, a slow
 * span without a profile, and a fast span, which is not shown. */
static const char *SLOW_BATCH =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
    "\"value\":{\"stringValue\":\"user-db\"}}]},\"scopeSpans\":[{\"spans\":["
    "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"eee19b7ec3c1b174\","
    "\"name\":\"UserRepository.findByEmail\",\"startTimeUnixNano\":\"1000000000\","
    "\"endTimeUnixNano\":\"1612400000\",\"attributes\":["
    "{\"key\":\"hotspan.slow\",\"value\":{\"boolValue\":true}},"
    "{\"key\":\"hotspan.pattern\",\"value\":{\"stringValue\":\"n_plus_one\"}},"
    "{\"key\":\"hotspan.n_plus_one.count\",\"value\":{\"intValue\":\"52\"}},"
    "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"span\"}},"
    "{\"key\":\"profile.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
    "{\"stringValue\":\"UserRepository.loadPreferences 65%\"},"
    "{\"stringValue\":\"Client.query 58%\"}]}}},"
    "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":"
    "\"handle > UserRepository.findByEmail > UserRepository.loadPreferences > Client.query\"}}]},"
    "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000002\","
    "\"name\":\"fast\",\"startTimeUnixNano\":\"1000000000\",\"endTimeUnixNano\":\"1040000000\"},"
    "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0000000000000003\","
    "\"name\":\"GET /users/:id\",\"startTimeUnixNano\":\"1000000000\","
    "\"endTimeUnixNano\":\"1700000000\",\"attributes\":["
    "{\"key\":\"hotspan.slow\",\"value\":{\"boolValue\":true}},"
    "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"none\"}},"
    "{\"key\":\"profile.match_reason\",\"value\":{\"stringValue\":\"no_profiles_for_service\"}}"
    "]}]}]}]}";

static struct hs_traces *json_batch(const char *json, uint32_t rs, uint32_t spans)
{
    struct hs_buf wire = {0};
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire(json, strlen(json), NULL, &wire, err, sizeof(err)), 0);
    return hs_traces_wrap(wire.data, wire.len, wire.cap, spans, rs);
}

static void test_slow(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: slow");
    /* first a batch with nothing slow: nothing written yet (not even from an empty buffer) */
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, batch(NULL)), 0);
    assert_string_equal(output(fx), "");
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, json_batch(SLOW_BATCH, 1, 3)), 0);
    consume_two(fx, "t1"); /* profiles print nothing at slow */
    assert_string_equal(output(fx),
                        "user-db  UserRepository.findByEmail  612 ms \u2014 65% findByEmail > "
                        "loadPreferences \u2014 N+1: 52 queries  "
                        "trace=5b8efff798038103d269b633813fc60c\n"
                        "user-db  GET /users/:id  700 ms \u2014 no profile "
                        "(no_profiles_for_service)  trace=0102030405060708090a0b0c0d0e0f10\n");
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"debug\"} "), 6);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_profiles_total{exporter=\"debug\"} "), 2);
}

/* The top function off the hot path is named alone; without a ranking the hot path's end is
 * shown; the span's own function is passed over for the next; a span mostly off CPU says so;
 * names from clients cannot forge a line. */
static void test_slow_fallbacks(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: slow");
    static const char *json =
        "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"stringValue\":\"svc\\nx\"}}]},\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"eee19b7ec3c1b174\","
        "\"name\":\"work\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1500000000\",\"attributes\":["
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"window\"}},"
        "{\"key\":\"profile.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
        "{\"stringValue\":\"./app.js:gc:12 40%\"}]}}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":\"main > work\"}}]},"
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000002\","
        "\"name\":\"other\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1800000000\",\"attributes\":["
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"window\"}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":\"main > pkg.Loop.spin\"}}]},"
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000003\","
        "\"name\":\"findByEmail\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1600000000\",\"attributes\":["
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"span\"}},"
        "{\"key\":\"profile.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
        "{\"stringValue\":\"UserRepository.findByEmail 89%\"},"
        "{\"stringValue\":\"UserRepository.loadPreferences 70%\"}]}}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":"
        "\"handle > UserRepository.findByEmail > UserRepository.loadPreferences\"}}]},"
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000004\","
        "\"name\":\"GET /users/:id\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1700000000\",\"attributes\":["
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"span\"}},"
        "{\"key\":\"profile.cpu_share\",\"value\":{\"doubleValue\":0.08}},"
        "{\"key\":\"profile.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
        "{\"stringValue\":\"UsersController.getUser 100%\"}]}}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":"
        "\"serve > UsersController.getUser > UserClient.fetch\"}}]}"
        "]}]}]}";
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, json_batch(json, 1, 4)), 0);
    assert_string_equal(output(fx),
                        "svc?x  work  500 ms \u2014 40% gc  "
                        "trace=5b8efff798038103d269b633813fc60c\n"
                        "svc?x  other  800 ms \u2014 hot spin  "
                        "trace=5b8efff798038103d269b633813fc60c\n"
                        "svc?x  findByEmail  600 ms \u2014 70% findByEmail > loadPreferences  "
                        "trace=5b8efff798038103d269b633813fc60c\n"
                        "svc?x  GET /users/:id  700 ms \u2014 8% on CPU; 100% getUser  "
                        "trace=5b8efff798038103d269b633813fc60c\n");
}

/* Full names as the correlator writes them are shortened, unless two would read alike; a
 * library's share and the off-CPU explanation are shown. */
static void test_slow_offcpu_and_names(void **state)
{
    struct fixture *fx = *state;
    start(fx, "verbosity: slow");
    static const char *json =
        "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"stringValue\":\"user-db\"}}]},\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"eee19b7ec3c1b174\","
        "\"name\":\"UserRepository.findByEmail\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1600000000\",\"attributes\":["
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"span\"}},"
        "{\"key\":\"profile.cpu_share\",\"value\":{\"doubleValue\":0.03}},"
        "{\"key\":\"profile.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
        "{\"stringValue\":\"main.(*UserRepository).decode 100%\"}]}}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":\"main.handle > "
        "main.(*UserRepository).findByEmail > main.(*UserRepository).decode\"}},"
        "{\"key\":\"profile.offcpu.type\",\"value\":{\"stringValue\":"
        "\"mutex:delay:nanoseconds:contentions:count\"}},"
        "{\"key\":\"profile.offcpu.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
        "{\"stringValue\":\"main.(*Cache).get 100% (in sync)\"}]}}},"
        "{\"key\":\"profile.offcpu.hot_path\",\"value\":{\"stringValue\":"
        "\"main.(*UserRepository).findByEmail > main.(*Cache).get > sync.(*Mutex).Unlock\"}}]},"
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000002\","
        "\"name\":\"hashAll\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1600000000\",\"attributes\":["
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"span\"}},"
        "{\"key\":\"profile.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
        "{\"stringValue\":\"main.hashAll 100% (in crypto/sha256)\"}]}}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":"
        "\"main.hashAll > crypto/sha256.(*digest).Write\"}}]},"
        "{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"0000000000000003\","
        "\"name\":\"GET /twins\",\"startTimeUnixNano\":\"1000000000\","
        "\"endTimeUnixNano\":\"1600000000\",\"attributes\":["
        "{\"key\":\"profile.match\",\"value\":{\"stringValue\":\"span\"}},"
        "{\"key\":\"profile.top_functions\",\"value\":{\"arrayValue\":{\"values\":["
        "{\"stringValue\":\"./a.js:flush:10 60%\"},{\"stringValue\":\"./b.js:flush:20 30%\"}]}}},"
        "{\"key\":\"profile.hot_path\",\"value\":{\"stringValue\":"
        "\"./main.js:handle:1 > ./a.js:flush:10\"}}]}"
        "]}]}]}";
    assert_int_equal(hs_exporter_debug.consume_traces(fx->c, json_batch(json, 1, 3)), 0);
    assert_string_equal(output(fx),
                        "user-db  UserRepository.findByEmail  600 ms \u2014 3% on CPU; 100% "
                        "findByEmail > decode; off CPU (mutex): 100% findByEmail > get (in sync)  "
                        "trace=5b8efff798038103d269b633813fc60c\n"
                        "user-db  hashAll  600 ms \u2014 100% hashAll (in crypto/sha256)  "
                        "trace=5b8efff798038103d269b633813fc60c\n"
                        "user-db  GET /twins  600 ms \u2014 60% ./a.js:flush:10  "
                        "trace=5b8efff798038103d269b633813fc60c\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_basic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_otlp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_normal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_normal_annotations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detailed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_fallbacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_offcpu_and_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_basic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_normal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles_detailed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
