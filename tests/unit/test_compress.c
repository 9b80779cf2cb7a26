/* test_compress.c: gzip in (bounded, strict about truncation) and out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "core/buf.h"
#include "core/compress.h"
#include "core/errors.h"

static void fill(uint8_t *p, size_t n)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245 + 12345;
        p[i] = (uint8_t)((x >> 16) % 7 + 'a'); /* compressible but not trivial */
    }
}

static void test_roundtrip(void **state)
{
    uint8_t in[100000];
    fill(in, sizeof(in));
    struct hs_buf gz = {0}, out = {0};
    assert_int_equal(hs_gzip(in, sizeof(in), 6, &gz), 0);
    assert_true(gz.len < sizeof(in));
    const char *msg = NULL;
    assert_int_equal(hs_gunzip(gz.data, gz.len, sizeof(in), &out, &msg), 0);
    assert_int_equal(out.len, sizeof(in));
    assert_memory_equal(out.data, in, sizeof(in));
    hs_buf_free(&gz);
    hs_buf_free(&out);
}

static void test_limit_exact_and_over(void **state)
{
    uint8_t in[5000];
    fill(in, sizeof(in));
    struct hs_buf gz = {0}, out = {0};
    hs_gzip(in, sizeof(in), 6, &gz);
    const char *msg = NULL;
    assert_int_equal(hs_gunzip(gz.data, gz.len, sizeof(in), &out, &msg), 0); /* at the limit */
    hs_buf_reset(&out);
    assert_int_equal(hs_gunzip(gz.data, gz.len, sizeof(in) - 1, &out, &msg), HS_E2BIG);
    assert_non_null(msg);
    hs_buf_free(&gz);
    hs_buf_free(&out);
}

static void test_bomb_stops_at_limit(void **state)
{
    /* 64 MiB of zeros compresses to ~64 KiB; the output must stop near the 1 MiB limit */
    size_t big = 64u << 20;
    uint8_t *zeros = calloc(1, big);
    struct hs_buf gz = {0}, out = {0};
    hs_gzip(zeros, big, 12, &gz);
    free(zeros);
    assert_true(gz.len < 200000);
    const char *msg = NULL;
    assert_int_equal(hs_gunzip(gz.data, gz.len, 1u << 20, &out, &msg), HS_E2BIG);
    assert_true(out.cap < (4u << 20)); /* memory stayed bounded */
    hs_buf_free(&gz);
    hs_buf_free(&out);
}

static void test_truncated_and_garbage(void **state)
{
    uint8_t in[3000];
    fill(in, sizeof(in));
    struct hs_buf gz = {0}, out = {0};
    hs_gzip(in, sizeof(in), 6, &gz);
    const char *msg = NULL;
    /* every truncation point is an error, never a silent short read */
    for (size_t cut = 0; cut < gz.len; cut++) {
        hs_buf_reset(&out);
        msg = NULL;
        int rc = hs_gunzip(gz.data, cut, 1u << 20, &out, &msg);
        assert_int_equal(rc, HS_EINVAL);
        assert_non_null(msg);
    }
    hs_buf_reset(&out);
    assert_int_equal(hs_gunzip((const uint8_t *)"hello", 5, 100, &out, &msg), HS_EINVAL);
    assert_non_null(strstr(msg, "not gzip"));
    /* a corrupt byte in the middle of the deflate stream (CRC or data error) */
    gz.data[gz.len / 2] ^= 0x55;
    hs_buf_reset(&out);
    assert_int_equal(hs_gunzip(gz.data, gz.len, 1u << 20, &out, &msg), HS_EINVAL);
    hs_buf_free(&gz);
    hs_buf_free(&out);
}

static void test_concatenated_members(void **state)
{
    struct hs_buf a = {0}, b = {0}, both = {0}, out = {0};
    hs_gzip((const uint8_t *)"hello ", 6, 6, &a);
    hs_gzip((const uint8_t *)"world", 5, 6, &b);
    hs_buf_append(&both, a.data, a.len);
    hs_buf_append(&both, b.data, b.len);
    const char *msg = NULL;
    assert_int_equal(hs_gunzip(both.data, both.len, 100, &out, &msg), 0);
    assert_int_equal(out.len, 11);
    assert_memory_equal(out.data, "hello world", 11);
    hs_buf_free(&a);
    hs_buf_free(&b);
    hs_buf_free(&both);
    hs_buf_free(&out);
}

static void test_empty_payload(void **state)
{
    struct hs_buf gz = {0}, out = {0};
    hs_gzip((const uint8_t *)"", 0, 6, &gz);
    const char *msg = NULL;
    assert_int_equal(hs_gunzip(gz.data, gz.len, 100, &out, &msg), 0);
    assert_int_equal(out.len, 0);
    hs_buf_free(&gz);
    hs_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),          cmocka_unit_test(test_limit_exact_and_over),
        cmocka_unit_test(test_bomb_stops_at_limit), cmocka_unit_test(test_truncated_and_garbage),
        cmocka_unit_test(test_concatenated_members), cmocka_unit_test(test_empty_payload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
