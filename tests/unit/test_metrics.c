/* test_metrics.c: the Prometheus text rendering and drop accounting. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_and_families),
        cmocka_unit_test(test_drop_counts_by_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
