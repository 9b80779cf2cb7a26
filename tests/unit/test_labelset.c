/* test_labelset.c: Pyroscope's `name` syntax: what the SDKs send parses into the app name and
 * labels, every malformed form is refused with the offending key or position named, and
 * format gives back what parse reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/errors.h"
#include "pdata/profiles.h"

static struct hs_profile *parse_ok(const char *s)
{
    struct hs_profile *p = hs_profile_new();
    char err[256] = "";
    int rc = hs_labelset_parse(s, strlen(s), 30, p, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse(%s): %s: %s", s, hs_err_name(rc), err);
    return p;
}

/* The error of parsing s, which must fail with `code` and mention `want`. */
static void parse_bad(const char *s, uint32_t max, int code, const char *want)
{
    struct hs_profile *p = hs_profile_new();
    char err[256] = "";
    int rc = hs_labelset_parse(s, strlen(s), max, p, err, sizeof(err));
    if (rc != code || !strstr(err, want))
        fail_msg("parse(%s) = %s \"%s\", want %s \"%s\"", s, hs_err_name(rc), err,
                 hs_err_name(code), want);
    hs_profile_free(p);
}

static void test_node_sdk_name(void **state)
{
    struct hs_profile *p = parse_ok("myapp{otel.scope.name=com.grafana.pyroscope/nodejs,"
                                    "process.runtime.version=v20.1.0,__session_id__=abc}");
    assert_string_equal(p->app_name, "myapp");
    assert_int_equal(p->nlabels, 3);
    assert_string_equal(hs_profile_label(p, "otel.scope.name"), "com.grafana.pyroscope/nodejs");
    assert_string_equal(hs_profile_label(p, "process.runtime.version"), "v20.1.0");
    assert_string_equal(hs_profile_label(p, "__session_id__"), "abc");
    hs_profile_free(p);
}

static void test_plain_and_trimmed(void **state)
{
    struct hs_profile *p = parse_ok("my.awesome-app/x.cpu");
    assert_string_equal(p->app_name, "my.awesome-app/x.cpu");
    assert_int_equal(p->nlabels, 0);
    hs_profile_free(p);

    p = parse_ok("  app.cpu { env = staging , region=us-west-1 } ");
    assert_string_equal(p->app_name, "app.cpu");
    assert_int_equal(p->nlabels, 2);
    assert_string_equal(hs_profile_label(p, "env"), "staging");
    assert_string_equal(hs_profile_label(p, "region"), "us-west-1");
    hs_profile_free(p);

    p = parse_ok("app{}");
    assert_string_equal(p->app_name, "app");
    assert_int_equal(p->nlabels, 0);
    hs_profile_free(p);

    p = parse_ok("app{k=a=b,e=}"); /* the first '=' splits; values may be empty */
    assert_string_equal(hs_profile_label(p, "k"), "a=b");
    assert_string_equal(hs_profile_label(p, "e"), "");
    hs_profile_free(p);
}

static void test_errors(void **state)
{
    parse_bad("", 30, HS_EINVAL, "empty application name");
    parse_bad("  {a=b}", 30, HS_EINVAL, "empty application name");
    parse_bad("my app", 30, HS_EINVAL, "byte 2");
    parse_bad("app{a=b", 30, HS_EINVAL, "'{' at byte 3 is not closed");
    parse_bad("app{a=b}x", 30, HS_EINVAL, "after '}' at byte 8");
    parse_bad("app{a=b,nokey}", 30, HS_EINVAL, "\"nokey\" has no '='");
    parse_bad("app{a=b,=v}", 30, HS_EINVAL, "empty key");
    parse_bad("app{a=b,,c=d}", 30, HS_EINVAL, "byte 8");
    parse_bad("app{a-b=1}", 30, HS_EINVAL, "label key \"a-b\" at byte 4");
    parse_bad("app{__name__=x}", 30, HS_EINVAL, "\"__name__\" at byte 4 is reserved");
    parse_bad("app{env=a, env =b}", 30, HS_EINVAL, "\"env\" at byte 11 is duplicated");
    parse_bad("app{a=1,b=2,c=3}", 2, HS_E2BIG, "more than 2 labels");
    char big[1200];
    memset(big, 'k', sizeof(big));
    memcpy(big, "app{", 4);
    memcpy(big + sizeof(big) - 4, "=1}", 4);
    parse_bad(big, 30, HS_EINVAL, "longer than 1024");
}

static void test_format_round_trip(void **state)
{
    struct hs_profile *p = parse_ok("svc{z=1,a.b=x/y,__session_id__=s,m=}");
    assert_int_equal(hs_profile_set_label(p, "__delta__", 9, "false", 5), 0);
    struct hs_buf b = {0};
    assert_int_equal(hs_labelset_format(p, &b), 0);
    assert_int_equal(hs_buf_putc(&b, '\0'), 0);
    /* `__` labels left out, the rest sorted */
    assert_string_equal((char *)b.data, "svc{a.b=x/y,m=,z=1}");

    struct hs_profile *q = parse_ok((char *)b.data);
    assert_string_equal(q->app_name, "svc");
    assert_int_equal(q->nlabels, 3);
    for (uint32_t i = 0; i < q->nlabels; i++)
        assert_string_equal(hs_profile_label(p, q->labels[i].name), q->labels[i].value);
    hs_profile_free(q);
    hs_profile_free(p);
    hs_buf_free(&b);

    /* without an app name (push profiles) service_name stands in */
    p = hs_profile_new();
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, "checkout", 8), 0);
    b = (struct hs_buf){0};
    assert_int_equal(hs_labelset_format(p, &b), 0);
    assert_int_equal(hs_buf_putc(&b, '\0'), 0);
    assert_string_equal((char *)b.data, "checkout{service_name=checkout}");
    hs_buf_free(&b);

    /* a value parse could not read back is refused, not mangled */
    assert_int_equal(hs_profile_set_label(p, "bad", 3, "a,b", 3), 0);
    assert_int_equal(hs_labelset_format(p, &b), HS_EINVAL);
    assert_int_equal(b.len, 0);
    hs_profile_free(p);
    hs_buf_free(&b);

    p = hs_profile_new(); /* neither app name nor service_name */
    assert_int_equal(hs_labelset_format(p, &b), HS_EINVAL);
    hs_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_sdk_name),
        cmocka_unit_test(test_plain_and_trimmed),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_format_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
