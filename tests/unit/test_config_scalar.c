/* test_config_scalar.c: the scalar syntaxes on their own: Go-style durations, sizes with SI
 * and IEC units, host:port endpoints (accepted and rejected spellings). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/common.h"
#include "core/config.h"
#include "core/errors.h"

static void test_durations(void **state)
{
    struct {
        const char *s;
        uint64_t ms;
    } ok[] = {
        {"0", 0},
        {"0s", 0},
        {"500ms", 500},
        {"30s", 30000},
        {"1m30s", 90000},
        {"1.5s", 1500},
        {"2h", 7200000},
        {"100us", 1},
        {"100\xc2\xb5s", 1},
        {"1ns", 1},
        {"1000000ns", 1},
        {"1000001ns", 2},
        {"1.1s", 1100},
        {".5s", 500},
        {"5.s", 5000},
        {"1h2m3s4ms", 3723004},
        {"0.0001ms", 1},
        {"1.0000000001s", 1001},
        {"999us", 1},
        {"2000us", 2},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(ok); i++) {
        uint64_t ms = 12345;
        if (hs_parse_duration_ms(ok[i].s, &ms) != 0)
            fail_msg("rejected %s", ok[i].s);
        if (ms != ok[i].ms)
            fail_msg("%s: %llu, want %llu", ok[i].s, (unsigned long long)ms,
                     (unsigned long long)ok[i].ms);
    }
    const char *bad[] = {"",    "30",  "30x", "1S",    "-1s",  "+1s", "s",  ".s", "1m30",
                         " 1s", "1s ", "1 s", "1..2s", "1e3s", "0.0", "5d", NULL, "99999999999h"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad); i++) {
        uint64_t ms = 777;
        assert_int_equal(hs_parse_duration_ms(bad[i], &ms), HS_EINVAL);
        assert_int_equal(ms, 777);
    }
}

static void test_sizes(void **state)
{
    struct {
        const char *s;
        uint64_t bytes;
    } ok[] = {
        {"0", 0},
        {"1500", 1500},
        {"20MiB", 20971520},
        {"1.5KB", 1500},
        {"64KiB", 65536},
        {"1GB", 1000000000},
        {"1gib", 1073741824},
        {"512 MiB", 536870912},
        {"1.5MiB", 1572864},
        {"10B", 10},
        {"10 b", 10},
        {"0.1KiB", 103}, /* 102.4 rounds up */
        {"2mb", 2000000},
        {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(ok); i++) {
        uint64_t b = 1;
        if (hs_parse_size(ok[i].s, &b) != 0)
            fail_msg("rejected %s", ok[i].s);
        if (b != ok[i].bytes)
            fail_msg("%s: %llu, want %llu", ok[i].s, (unsigned long long)b,
                     (unsigned long long)ok[i].bytes);
    }
    const char *bad[] = {"",
                         "1.5",
                         "MiB",
                         "-1",
                         "1 ",
                         "1TB",
                         "1Mi",
                         "1 MiB ",
                         "0x10",
                         " 1",
                         "1e6",
                         "1,5KB",
                         NULL,
                         "18446744073709551616",
                         "99999999999GiB"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad); i++) {
        uint64_t b = 7;
        assert_int_equal(hs_parse_size(bad[i], &b), HS_EINVAL);
        assert_int_equal(b, 7);
    }
}

static void test_endpoints(void **state)
{
    char host[64];
    uint16_t port = 1;
    assert_int_equal(hs_parse_endpoint("localhost:4318", host, sizeof(host), &port), 0);
    assert_string_equal(host, "localhost");
    assert_int_equal(port, 4318);
    assert_int_equal(hs_parse_endpoint("[::1]:65535", host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 65535);
    assert_int_equal(hs_parse_endpoint(":0", host, sizeof(host), &port), 0);
    assert_string_equal(host, "");
    assert_int_equal(port, 0);
    assert_int_equal(hs_parse_endpoint("10.0.0.1:80", host, sizeof(host), &port), 0);
    assert_string_equal(host, "10.0.0.1");
    const char *bad[] = {"localhost", "host:",     "host:65536",  "host:-1",
                         "::1:4318",  "[::1]4318", "[::1:80",     "h st:80",
                         "host:80x",  "[]:80",     "host:123456", NULL};
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad); i++)
        assert_int_equal(hs_parse_endpoint(bad[i], host, sizeof(host), &port), HS_EINVAL);
    char tiny[4];
    assert_int_equal(hs_parse_endpoint("abcd:1", tiny, sizeof(tiny), &port), HS_EINVAL);
    assert_int_equal(hs_parse_endpoint("abc:1", tiny, sizeof(tiny), &port), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_endpoints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
