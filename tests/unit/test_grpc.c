/* test_grpc.c: gRPC's unary framing (prefix, gzip, limits), grpc-message percent-encoding,
 * RetryInfo in grpc-status-details-bin both ways, grpc-timeout and the OTLP retry table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "core/buf.h"
#include "core/errors.h"
#include "core/compress.h"
#include "net/grpc.h"

static void test_frame_roundtrip(void **state)
{
    (void)state;
    const uint8_t msg[] = "hello, collector";
    for (int gz = 0; gz < 2; gz++) {
        struct hs_buf f = {0}, out = {0};
        assert_int_equal(hs_grpc_frame(&f, msg, sizeof(msg), gz), 0);
        assert_int_equal(f.data[0], gz);
        uint32_t n = (uint32_t)f.data[1] << 24 | f.data[2] << 16 | f.data[3] << 8 | f.data[4];
        assert_int_equal(n, f.len - 5);
        const uint8_t *p;
        size_t len;
        char err[200];
        struct hs_str enc = HS_STR("gzip");
        assert_int_equal(hs_grpc_unframe(f.data, f.len, gz ? &enc : NULL, 1 << 20, &out, &p, &len,
                                         err, sizeof(err)),
                         HS_GRPC_OK);
        assert_int_equal(len, sizeof(msg));
        assert_memory_equal(p, msg, len);
        hs_buf_free(&f);
        hs_buf_free(&out);
    }
}

/* The prefix a zero-copy sender puts in front of the message is the one hs_grpc_frame writes. */
static void test_prefix_matches_frame(void **state)
{
    (void)state;
    const uint8_t msg[300] = {1, 2, 3};
    struct hs_buf f = {0};
    uint8_t pre[HS_GRPC_PREFIX];
    assert_int_equal(hs_grpc_frame(&f, msg, sizeof(msg), false), 0);
    assert_int_equal(hs_grpc_prefix(pre, sizeof(msg), false), 0);
    assert_int_equal(f.len, sizeof(pre) + sizeof(msg));
    assert_memory_equal(f.data, pre, sizeof(pre));
    assert_memory_equal(f.data + sizeof(pre), msg, sizeof(msg));
    hs_buf_free(&f);
    assert_int_equal(hs_grpc_prefix(pre, 0x01020304, true), 0);
    const uint8_t want[] = {1, 1, 2, 3, 4};
    assert_memory_equal(pre, want, sizeof(want));
    assert_int_equal(hs_grpc_prefix(pre, (size_t)UINT32_MAX + 1, false), HS_E2BIG);
}

static int unframe(const uint8_t *b, size_t n, const char *enc, uint64_t max)
{
    struct hs_buf out = {0};
    const uint8_t *p;
    size_t len;
    char err[200];
    struct hs_str e = {enc, enc ? strlen(enc) : 0};
    int rc = hs_grpc_unframe(b, n, enc ? &e : NULL, max, &out, &p, &len, err, sizeof(err));
    assert_true(rc == HS_GRPC_OK || err[0]); /* every refusal says why */
    hs_buf_free(&out);
    return rc;
}

static void test_unframe_errors(void **state)
{
    (void)state;
    const uint8_t four[] = {0, 0, 0, 0, 4, 1, 2, 3, 4};
    assert_int_equal(unframe(four, sizeof(four), NULL, 100), HS_GRPC_OK);
    assert_int_equal(unframe(four, 3, NULL, 100), HS_GRPC_INTERNAL);          /* short prefix */
    assert_int_equal(unframe(four, 8, NULL, 100), HS_GRPC_INTERNAL);          /* truncated */
    assert_int_equal(unframe(four, sizeof(four), NULL, 3), HS_GRPC_RESOURCE_EXHAUSTED);
    assert_int_equal(unframe(four, sizeof(four), "snappy", 100), HS_GRPC_UNIMPLEMENTED);
    const uint8_t two[] = {0, 0, 0, 0, 1, 9, 0, 0, 0, 0, 1, 9};
    assert_int_equal(unframe(two, sizeof(two), NULL, 100), HS_GRPC_INTERNAL); /* two messages */
    const uint8_t flagged[] = {1, 0, 0, 0, 1, 9};
    assert_int_equal(unframe(flagged, sizeof(flagged), NULL, 100), HS_GRPC_INTERNAL);
    assert_int_equal(unframe(flagged, sizeof(flagged), "gzip", 100), HS_GRPC_INTERNAL); /* bad gz */
    /* a gzip bomb stops at the limit, after inflating too */
    static uint8_t zeros[1 << 16];
    struct hs_buf f = {0};
    assert_int_equal(hs_grpc_frame(&f, zeros, sizeof(zeros), true), 0);
    assert_true(f.len < 1000);
    assert_int_equal(unframe(f.data, f.len, "gzip", 1000), HS_GRPC_RESOURCE_EXHAUSTED);
    assert_int_equal(unframe(f.data, f.len, "gzip", sizeof(zeros)), HS_GRPC_OK);
    hs_buf_free(&f);
}

static void test_percent(void **state)
{
    (void)state;
    char enc[64], dec[64];
    hs_grpc_percent_encode("50% off: caf\xc3\xa9\n", enc, sizeof(enc));
    assert_string_equal(enc, "50%25 off: caf%C3%A9%0A");
    hs_grpc_percent_decode(enc, strlen(enc), dec, sizeof(dec));
    assert_string_equal(dec, "50% off: caf\xc3\xa9\n");
    hs_grpc_percent_decode("100%zz%4", 8, dec, sizeof(dec)); /* malformed escapes kept */
    assert_string_equal(dec, "100%zz%4");
    hs_grpc_percent_encode("\xff\xff\xff", enc, 5); /* never a partial escape */
    assert_string_equal(enc, "%FF");
}

static void test_retry_info(void **state)
{
    (void)state;
    char b64[1024];
    uint64_t ms = 0;
    assert_int_equal(hs_grpc_status_details(HS_GRPC_UNAVAILABLE, "busy", 2500, b64, sizeof(b64)),
                     0);
    assert_true(hs_grpc_details_retry_delay(b64, strlen(b64), &ms));
    assert_int_equal(ms, 2500);
    /* unpadded, as grpc-go may send it */
    size_t n = strlen(b64);
    while (n && b64[n - 1] == '=')
        n--;
    ms = 0;
    assert_true(hs_grpc_details_retry_delay(b64, n, &ms));
    assert_int_equal(ms, 2500);
    /* a Status without details carries no RetryInfo */
    assert_false(hs_grpc_details_retry_delay("CAMSBGJhZA", 10, &ms)); /* {code:3, msg:"bad"} */
    assert_false(hs_grpc_details_retry_delay("!!!", 3, &ms));
}

static void test_timeout_and_retry(void **state)
{
    (void)state;
    char t[24];
    uint64_t ms;
    hs_grpc_timeout_format(30000, t, sizeof(t));
    assert_string_equal(t, "30000m");
    assert_true(hs_grpc_timeout_parse((struct hs_str){t, strlen(t)}, &ms));
    assert_int_equal(ms, 30000);
    assert_true(hs_grpc_timeout_parse(HS_STR("2S"), &ms));
    assert_int_equal(ms, 2000);
    assert_true(hs_grpc_timeout_parse(HS_STR("1H"), &ms));
    assert_int_equal(ms, 3600000);
    assert_false(hs_grpc_timeout_parse(HS_STR("123456789m"), &ms)); /* 9 digits */
    assert_false(hs_grpc_timeout_parse(HS_STR("10x"), &ms));
    const int retry[] = {1, 4, 10, 11, 14, 15};
    const int perm[] = {2, 3, 5, 6, 7, 9, 12, 13, 16};
    for (size_t i = 0; i < sizeof(retry) / sizeof(*retry); i++)
        assert_true(hs_grpc_retryable(retry[i], false));
    for (size_t i = 0; i < sizeof(perm) / sizeof(*perm); i++)
        assert_false(hs_grpc_retryable(perm[i], true));
    assert_false(hs_grpc_retryable(HS_GRPC_RESOURCE_EXHAUSTED, false));
    assert_true(hs_grpc_retryable(HS_GRPC_RESOURCE_EXHAUSTED, true));
    assert_int_equal(hs_grpc_code_from_http(503), HS_GRPC_UNAVAILABLE);
    assert_int_equal(hs_grpc_code_from_http(404), HS_GRPC_UNIMPLEMENTED);
    assert_string_equal(hs_grpc_code_name(8), "RESOURCE_EXHAUSTED");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_roundtrip), cmocka_unit_test(test_prefix_matches_frame),
        cmocka_unit_test(test_unframe_errors),
        cmocka_unit_test(test_percent),         cmocka_unit_test(test_retry_info),
        cmocka_unit_test(test_timeout_and_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
