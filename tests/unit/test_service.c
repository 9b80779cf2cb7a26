/* test_service.c: the pipeline graph's config checks, and the lifecycle of every registered
 * component type: create with defaults, start, shut down twice, done exactly once, and no
 * handle left in the loop (style.md §7). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admin/telemetry.h"
#include "core/buf.h"
#include "core/component.h"
#include "core/config.h"
#include "core/metrics.h"
#include "core/service.h"

static int load(const char *yaml, struct hs_error *err, struct hs_service **out)
{
    struct hs_service *s = NULL;
    int rc = hs_service_load("t.yaml", yaml, strlen(yaml), &hs_admin_telemetry, &s, err);
    if (out)
        *out = s;
    else if (s)
        hs_service_free(s);
    return rc;
}

static bool has_line(const struct hs_error *err, const char *want)
{
    for (size_t i = 0; i < err->count; i++)
        if (strcmp(err->lines[i], want) == 0)
            return true;
    for (size_t i = 0; i < err->count; i++)
        fprintf(stderr, "  got: %s\n", err->lines[i]);
    fprintf(stderr, "  wanted: %s\n", want);
    return false;
}

static void test_valid_graph(void **state)
{
    struct hs_error err = {0};
    const char *yaml = "receivers:\n"
                       "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                       "processors:\n"
                       "  batch: {}\n"
                       "exporters:\n"
                       "  debug:\n"
                       "  otlphttp/a: {endpoint: 'http://127.0.0.1:9'}\n"
                       "service:\n"
                       "  pipelines:\n"
                       "    traces: {receivers: [otlp], processors: [batch], exporters: [debug]}\n"
                       "    traces/2: {receivers: [otlp], exporters: [otlphttp/a, debug]}\n";
    assert_int_equal(load(yaml, &err, NULL), 0);
    assert_int_equal(err.count, 0);
    hs_error_free(&err);
}

/* One otlp receiver in a traces and a profiles pipeline, as in otelcol: one instance, told
 * both signals; an exporter in only one is told that one. */
static void test_receiver_in_both_signals(void **state)
{
    struct hs_error err = {0};
    struct hs_service *s = NULL;
    const char *yaml = "receivers:\n"
                       "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                       "exporters:\n"
                       "  debug:\n"
                       "  otlp_http: {endpoint: 'http://127.0.0.1:9'}\n"
                       "  otlp_grpc: {endpoint: '127.0.0.1:9', tls: {insecure: true}}\n"
                       "service:\n"
                       "  pipelines:\n"
                       "    traces: {receivers: [otlp], exporters: [debug, otlp_grpc]}\n"
                       "    profiles: {receivers: [otlp], exporters: [otlp_http]}\n";
    assert_int_equal(load(yaml, &err, &s), 0);
    assert_int_equal(err.count, 0);
    struct hs_component *otlp = hs_service_component(s, HS_KIND_RECEIVER, "otlp");
    struct hs_component *http = hs_service_component(s, HS_KIND_EXPORTER, "otlp_http");
    struct hs_component *grpc = hs_service_component(s, HS_KIND_EXPORTER, "otlp_grpc");
    assert_non_null(otlp);
    assert_int_equal(otlp->signals, HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES);
    assert_non_null(otlp->next);
    assert_non_null(otlp->next_profiles);
    assert_int_equal(http->signals, HS_SIGNAL_PROFILES);
    assert_int_equal(grpc->signals, HS_SIGNAL_TRACES);
    hs_service_free(s);
    hs_error_free(&err);
}

/* pprof from the pyroscope receiver cannot go to an exporter of OTLP profiles: refused at the
 * exporter's place in the pipeline, naming both; an OTLP-only pipeline beside it is fine. */
static void test_pprof_to_otlp_exporter_refused(void **state)
{
    struct hs_error err = {0};
    const char *yaml = "receivers:\n"                                             /* 1 */
                       "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n" /* 2 */
                       "  pyroscope: {endpoint: '127.0.0.1:0'}\n"                 /* 3 */
                       "exporters:\n"                                             /* 4 */
                       "  otlp_http/col: {endpoint: 'http://127.0.0.1:9'}\n"      /* 5 */
                       "  pyroscope: {endpoint: 'http://127.0.0.1:9'}\n"          /* 6 */
                       "service:\n"                                               /* 7 */
                       "  pipelines:\n"                                           /* 8 */
                       "    profiles/otlp: {receivers: [otlp], exporters: [otlp_http/col, "
                       "pyroscope]}\n" /* 9 */
                       "    profiles: {receivers: [pyroscope, otlp], exporters: [pyroscope, "
                       "otlp_http/col]}\n"; /* 10 */
    assert_int_equal(load(yaml, &err, NULL), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_true(has_line(&err, "t.yaml:10:69: service.pipelines.profiles.exporters: exporter "
                               "\"otlp_http/col\" takes OTLP profiles only, but receiver "
                               "\"pyroscope\" makes pprof: give that receiver a profiles "
                               "pipeline of its own, with exporters that take pprof"));
    hs_error_free(&err);
}

static void test_every_error_at_once(void **state)
{
    struct hs_error err = {0};
    const char *yaml = "receivers:\n"                                        /* 1 */
                       "  otlp: {protocols: {http: {}}}\n"                   /* 2 */
                       "  zipkin: {}\n"                                      /* 3 */
                       "processors:\n"                                       /* 4 */
                       "  batch: {timeout: 30x}\n"                           /* 5 */
                       "exporters:\n"                                        /* 6 */
                       "  debug: {}\n"                                       /* 7 */
                       "extensions: {}\n"                                    /* 8 */
                       "service:\n"                                          /* 9 */
                       "  pipelines:\n"                                      /* 10 */
                       "    traces:\n"                                       /* 11 */
                       "      receivers: [otlp]\n"                           /* 12 */
                       "      processors: [batch, nope]\n"                   /* 13 */
                       "      exporters: [debug, otlp/tempo]\n"              /* 14 */
                       "    metrics: {receivers: [otlp], exporters: [debug]}\n"; /* 15 */
    assert_int_equal(load(yaml, &err, NULL), HS_EINVAL);
    assert_true(has_line(&err, "t.yaml:3:3: receivers.zipkin: unknown receiver type (known: "
                               "otlp, pyroscope, nats)"));
    assert_true(has_line(&err, "t.yaml:5:20: processors.batch.timeout: \"30x\" is not a "
                               "duration (try 30s)"));
    assert_true(has_line(&err, "t.yaml:8:1: extensions: unknown key (known: receivers, "
                               "processors, exporters, service)"));
    assert_true(has_line(&err, "t.yaml:13:27: service.pipelines.traces.processors: processor "
                               "\"nope\" is not defined under processors"));
    assert_true(has_line(&err, "t.yaml:14:26: service.pipelines.traces.exporters: exporter "
                               "\"otlp/tempo\" is not defined under exporters"));
    assert_true(has_line(&err, "t.yaml:15:5: service.pipelines.metrics: unknown pipeline "
                               "signal (known: traces, traces/NAME, profiles, profiles/NAME)"));
    hs_error_free(&err);
}

static void test_receiver_needs_a_protocol(void **state)
{
    struct hs_error err = {0};
    const char *yaml = "receivers:\n"
                       "  otlp: {protocols: {}}\n"
                       "exporters:\n"
                       "  debug:\n"
                       "service:\n"
                       "  pipelines:\n"
                       "    traces: {receivers: [otlp], exporters: [debug]}\n";
    assert_int_equal(load(yaml, &err, NULL), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "no protocol enabled"));
    hs_error_free(&err);
}

/* service.telemetry.health: otelcol's health_check shape, declared, bounded and documented. */
static void test_health_threshold_key(void **state)
{
    struct hs_error err = {0};
    const char *ok = "exporters:\n"
                     "  debug:\n"
                     "receivers:\n"
                     "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                     "service:\n"
                     "  telemetry: {health: {exporter_failure_threshold: 0}}\n"
                     "  pipelines:\n"
                     "    traces: {receivers: [otlp], exporters: [debug]}\n";
    assert_int_equal(load(ok, &err, NULL), 0);
    assert_int_equal(err.count, 0);
    const char *bad = "exporters:\n"
                      "  debug:\n"
                      "receivers:\n"
                      "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                      "service:\n"
                      "  telemetry:\n"
                      "    health: {exporter_failure_treshold: 1m}\n"
                      "    admin: 127.0.0.1:0\n"
                      "  pipelines:\n"
                      "    traces: {receivers: [otlp], exporters: [debug]}\n";
    assert_int_equal(load(bad, &err, NULL), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "t.yaml:7:"));
    assert_non_null(strstr(err.lines[0], "exporter_failure_treshold: unknown key"));
    hs_error_free(&err);
    const char *worse = "exporters:\n"
                        "  debug:\n"
                        "receivers:\n"
                        "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                        "service:\n"
                        "  telemetry: {health: {exporter_failure_threshold: 5 minutes}}\n"
                        "  pipelines:\n"
                        "    traces: {receivers: [otlp], exporters: [debug]}\n";
    assert_int_equal(load(worse, &err, NULL), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "t.yaml:6:"));
    assert_non_null(
        strstr(err.lines[0], "service.telemetry.health.exporter_failure_threshold: "));
    hs_error_free(&err);
    struct hs_buf ref = {0};
    hs_service_reference(&hs_admin_telemetry, &ref);
    hs_buf_putc(&ref, '\0');
    assert_non_null(strstr((char *)ref.data, "`telemetry.health.exporter_failure_threshold`"));
    assert_non_null(strstr((char *)ref.data, "`5m`"));
    hs_buf_free(&ref);
}

/* service.telemetry.admin_auth: a receiver's `auth:` keys, checked when the config is loaded
 * (so `hotspan validate` names a missing file or an empty section), with the same positions. */
static void test_admin_auth_key(void **state)
{
    struct hs_error err = {0};
    const char *ok = "exporters:\n"
                     "  debug:\n"
                     "receivers:\n"
                     "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                     "service:\n"
                     "  telemetry:\n"
                     "    admin_auth: {bearer_token: {token: ops}, tenants: {team-a: tok-a}}\n"
                     "  pipelines:\n"
                     "    traces: {receivers: [otlp], exporters: [debug]}\n";
    assert_int_equal(load(ok, &err, NULL), 0);
    assert_int_equal(err.count, 0);
    const char *bad = "exporters:\n"
                      "  debug:\n"
                      "receivers:\n"
                      "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                      "service:\n"
                      "  telemetry:\n"
                      "    admin_auth:\n"
                      "      tenants_file: /nonexistent/hotspan-tenants\n"
                      "  pipelines:\n"
                      "    traces: {receivers: [otlp], exporters: [debug]}\n";
    assert_int_equal(load(bad, &err, NULL), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "t.yaml:8:"));
    assert_non_null(strstr(err.lines[0], "service.telemetry.admin_auth.tenants_file: "
                                         "cannot read /nonexistent/hotspan-tenants"));
    hs_error_free(&err);
    const char *empty = "exporters:\n"
                        "  debug:\n"
                        "receivers:\n"
                        "  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}\n"
                        "service:\n"
                        "  telemetry: {admin_auth: {}}\n"
                        "  pipelines:\n"
                        "    traces: {receivers: [otlp], exporters: [debug]}\n";
    assert_int_equal(load(empty, &err, NULL), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "service.telemetry.admin_auth: no credentials"));
    hs_error_free(&err);
}

/* A minimal config for every registered type; a type missing here fails the test, so each new
 * component gets its lifecycle checked. */
static const struct {
    enum hs_kind kind;
    const char *type;
    const char *yaml;
} minimal[] = {
    {HS_KIND_RECEIVER, "otlp", "protocols: {http: {endpoint: '127.0.0.1:0'}}"},
    {HS_KIND_RECEIVER, "pyroscope", "{endpoint: '127.0.0.1:0'}"},
    {HS_KIND_PROCESSOR, "batch", "{}"},
    {HS_KIND_PROCESSOR, "memory_limiter", "{limit_mib: 4096}"},
    {HS_KIND_PROCESSOR, "correlator", "{}"},
    {HS_KIND_EXPORTER, "otlp", "{endpoint: 'http://127.0.0.1:9'}"},
    {HS_KIND_EXPORTER, "otlphttp", "{endpoint: 'http://127.0.0.1:9'}"},
    {HS_KIND_EXPORTER, "otlp_http", "{endpoint: 'http://127.0.0.1:9'}"},
    {HS_KIND_EXPORTER, "otlp_grpc", "{endpoint: 'http://127.0.0.1:9'}"},
    {HS_KIND_EXPORTER, "pyroscope", "{endpoint: 'http://127.0.0.1:9'}"},
    {HS_KIND_EXPORTER, "debug", "{}"},
    {HS_KIND_EXPORTER, "file", "{path: '/tmp/hotspan-test-service-lifecycle.jsonl'}"},
    {HS_KIND_EXPORTER, "load_balancing", "{resolver: {static: {hostnames: ['127.0.0.1:9']}}}"},
    {HS_KIND_EXPORTER, "loadbalancing", "{resolver: {dns: {hostname: localhost}}}"},
    {HS_KIND_RECEIVER, "nats", "{servers: ['nats://127.0.0.1:9']}"},
    {HS_KIND_EXPORTER, "nats", "{servers: ['nats://127.0.0.1:9']}"},
};

static int done_calls;

static void count_done(struct hs_component *c)
{
    done_calls++;
}

static void lifecycle(const struct hs_component_type *t, const char *yaml, bool start)
{
    struct hs_config_doc doc = {0};
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(t->create(doc.root, "x", &c, &err), 0);
    assert_int_equal(err.count, 0);
    c->type = t;
    c->id = strdup(t->name);
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct hs_metrics *m = hs_metrics_new();
    struct hs_consumer none = {0};
    c->loop = &loop;
    c->metrics = m;
    if (t->kind != HS_KIND_EXPORTER) {
        c->next = &none;
        c->next_profiles = &none;
    }
    if (start) {
        const struct hs_host host = {.loop = &loop, .metrics = m};
        assert_int_equal(t->start(c, &host), 0);
    }
    done_calls = 0;
    t->shutdown(c, count_done);
    t->shutdown(c, count_done); /* harmless the second time */
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(done_calls, 1);
    free(c->id);
    t->destroy(c);
    assert_int_equal(uv_loop_close(&loop), 0);
    hs_metrics_free(m);
    hs_config_doc_free(&doc);
    hs_error_free(&err);
}

static void test_lifecycle_of_every_type(void **state)
{
    size_t count;
    const struct hs_component_type *const *all = hs_registry_all(&count);
    for (size_t i = 0; i < count; i++) {
        const char *yaml = NULL;
        for (size_t j = 0; j < sizeof(minimal) / sizeof(minimal[0]); j++)
            if (minimal[j].kind == all[i]->kind && strcmp(minimal[j].type, all[i]->name) == 0)
                yaml = minimal[j].yaml;
        if (!yaml)
            fail_msg("no minimal config in test_service.c for %s %s", hs_kind_name(all[i]->kind),
                     all[i]->name);
        lifecycle(all[i], yaml, false); /* shutdown before start */
        lifecycle(all[i], yaml, true);
    }
    remove("/tmp/hotspan-test-service-lifecycle.jsonl");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_graph),
        cmocka_unit_test(test_receiver_in_both_signals),
        cmocka_unit_test(test_pprof_to_otlp_exporter_refused),
        cmocka_unit_test(test_every_error_at_once),
        cmocka_unit_test(test_receiver_needs_a_protocol),
        cmocka_unit_test(test_health_threshold_key),
        cmocka_unit_test(test_admin_auth_key),
        cmocka_unit_test(test_lifecycle_of_every_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
