/* test_metrics.c: the Prometheus text rendering (counters, gauges, histograms), drop accounting
 * and health sources. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/metrics.h"

static double seven(void *ud)
{
    return *(double *)ud;
}

static char *render(struct hs_metrics *m, struct hs_buf *b)
{
    hs_buf_reset(b);
    assert_int_equal(hs_metrics_render(m, b), 0);
    hs_buf_putc(b, '\0');
    return (char *)b->data;
}

static void test_counters_and_families(void **state)
{
    struct hs_metrics *m = hs_metrics_new();
    struct hs_counter *a = hs_metrics_counter(m, "x_total", "help x", "k=\"a\"");
    struct hs_counter *b = hs_metrics_counter(m, "x_total", "help x", "k=\"b\"");
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(a, hs_metrics_counter(m, "x_total", "help x", "k=\"a\""));
    hs_counter_add(a, 3);
    hs_counter_add(b, 5);
    double v = 7;
    hs_metrics_gauge(m, "g", "a gauge", "", seven, &v);
    struct hs_buf buf = {0};
    const char *text = render(m, &buf);
    assert_string_equal(text, "# HELP hotspan_x_total help x\n"
                              "# TYPE hotspan_x_total counter\n"
                              "hotspan_x_total{k=\"a\"} 3\n"
                              "hotspan_x_total{k=\"b\"} 5\n"
                              "# HELP hotspan_g a gauge\n"
                              "# TYPE hotspan_g gauge\n"
                              "hotspan_g 7\n");
    hs_metrics_gauge_remove(m, &v);
    text = render(m, &buf);
    assert_null(strstr(text, "hotspan_g"));
    hs_buf_free(&buf);
    hs_metrics_free(m);
}

static void test_drop_counts_by_reason(void **state)
{
    struct hs_metrics *m = hs_metrics_new();
    hs_metrics_drop(m, "otlp", "retry_exhausted", 10);
    hs_metrics_drop(m, "otlp", "retry_exhausted", 5);
    hs_metrics_drop(m, "otlp", "permanent_error", 1);
    struct hs_buf buf = {0};
    const char *text = render(m, &buf);
    assert_non_null(
        strstr(text, "hotspan_dropped_total{component=\"otlp\",reason=\"retry_exhausted\"} 15\n"));
    assert_non_null(
        strstr(text, "hotspan_dropped_total{component=\"otlp\",reason=\"permanent_error\"} 1\n"));
    hs_buf_free(&buf);
    hs_metrics_free(m);
}

/* Buckets are cumulative with +Inf last, a value on a bound falls in it, and _sum/_count
 * follow; the same (name, labels) is the same histogram. */
static void test_histogram(void **state)
{
    struct hs_metrics *m = hs_metrics_new();
    static const double bounds[] = {10, 100};
    struct hs_histogram *h = hs_metrics_histogram(m, "size", "sizes", "p=\"b\"", bounds, 2);
    assert_ptr_equal(h, hs_metrics_histogram(m, "size", "sizes", "p=\"b\"", bounds, 2));
    hs_histogram_observe(h, 10);
    hs_histogram_observe(h, 11);
    hs_histogram_observe(h, 5000);
    struct hs_histogram *bare = hs_metrics_histogram(m, "bare", "no labels", "", bounds, 1);
    hs_histogram_observe(bare, 0.5);
    struct hs_buf buf = {0};
    const char *text = render(m, &buf);
    assert_string_equal(text, "# HELP hotspan_size sizes\n"
                              "# TYPE hotspan_size histogram\n"
                              "hotspan_size_bucket{p=\"b\",le=\"10\"} 1\n"
                              "hotspan_size_bucket{p=\"b\",le=\"100\"} 2\n"
                              "hotspan_size_bucket{p=\"b\",le=\"+Inf\"} 3\n"
                              "hotspan_size_sum{p=\"b\"} 5021\n"
                              "hotspan_size_count{p=\"b\"} 3\n"
                              "# HELP hotspan_bare no labels\n"
                              "# TYPE hotspan_bare histogram\n"
                              "hotspan_bare_bucket{le=\"10\"} 1\n"
                              "hotspan_bare_bucket{le=\"+Inf\"} 1\n"
                              "hotspan_bare_sum 0.5\n"
                              "hotspan_bare_count 1\n");
    hs_buf_free(&buf);
    hs_metrics_free(m);
}

static void count_source(void *arg, const char *component, const struct hs_health *h)
{
    struct hs_buf *b = arg;
    hs_buf_printf(b, "%s:%d;", component, h->failing_since_ms != 0);
}

/* A health source is listed while registered, shows its failing state, and is removed with the
 * gauges of its owner. */
static void test_health_sources(void **state)
{
    struct hs_metrics *m = hs_metrics_new();
    struct hs_health a = {0}, b = {0};
    int owner_a, owner_b;
    hs_metrics_health(m, "otlp/a", &a, &owner_a);
    hs_metrics_health(m, "otlp/b", &b, &owner_b);
    hs_health_failed(&b, 1000, "HTTP 503");
    struct hs_buf buf = {0};
    assert_int_equal(hs_metrics_health_each(m, count_source, &buf), 2);
    hs_buf_putc(&buf, '\0');
    assert_string_equal((char *)buf.data, "otlp/a:0;otlp/b:1;");
    hs_metrics_gauge_remove(m, &owner_a);
    hs_buf_reset(&buf);
    assert_int_equal(hs_metrics_health_each(m, count_source, &buf), 1);
    hs_buf_putc(&buf, '\0');
    assert_string_equal((char *)buf.data, "otlp/b:1;");
    /* registration after a removal still lands at the end */
    hs_metrics_health(m, "otlp/c", &a, &owner_a);
    hs_buf_reset(&buf);
    assert_int_equal(hs_metrics_health_each(m, count_source, &buf), 2);
    hs_buf_putc(&buf, '\0');
    assert_string_equal((char *)buf.data, "otlp/b:1;otlp/c:0;");
    hs_buf_free(&buf);
    hs_metrics_free(m);
}

/* The failing period starts at the first failure, later failures only extend it and update
 * the text, it runs with the clock only while a retry is pending, and a success ends it. */
static void test_health_period(void **state)
{
    struct hs_health h = {0};
    assert_true(hs_health_failing_seconds(&h, 5000) == 0);
    hs_health_failed(&h, 1000, "HTTP 503");
    hs_health_failed(&h, 4000, "connection refused");
    assert_int_equal(h.failing_since_ms, 1000);
    assert_string_equal(h.last_error, "connection refused");
    /* nothing left to try: the period ends at the last failure, whatever the clock says */
    assert_true(hs_health_failing_seconds(&h, 9000) == 3.0);
    /* a retry is due: the period runs on with the clock */
    h.pending = true;
    assert_true(hs_health_failing_seconds(&h, 9000) == 8.0);
    h.pending = false;
    hs_health_failed(&h, 4500, NULL);
    assert_string_equal(h.last_error, "connection refused");
    char longer[400];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    hs_health_failed(&h, 4600, longer);
    assert_int_equal(strlen(h.last_error), HS_HEALTH_ERROR_LEN - 1);
    hs_health_ok(&h, 6000);
    assert_int_equal(h.failing_since_ms, 0);
    assert_int_equal(h.last_success_ms, 6000);
    assert_true(hs_health_failing_seconds(&h, 7000) == 0);
    hs_health_failed(&h, 8000, "again");
    assert_int_equal(h.failing_since_ms, 8000);
    assert_true(hs_health_failing_seconds(&h, 60000) == 0); /* one failure, then silence */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_and_families),
        cmocka_unit_test(test_drop_counts_by_reason),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_health_sources),
        cmocka_unit_test(test_health_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
