/* test_json.c: core/json.c's pull reader: the token stream of a document, string escapes and
 * surrogate pairs decoded, numbers, skipping, nesting limits, each syntax error with its
 * position, and agreement with jansson on what is JSON at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>

#include "core/errors.h"
#include "core/json.h"

/* The tokens of text as one line: {, }, [, ], k:name, s:text (decoded), n:12, t, f, null. */
static int tokens(const char *text, char *out, size_t outlen)
{
    struct hs_json_reader r;
    struct hs_json_token t;
    hs_json_reader_init(&r, text, strlen(text), 0, true);
    size_t n = 0;
    out[0] = '\0';
    for (;;) {
        int rc = hs_json_next(&r, &t);
        if (rc)
            return rc;
        char buf[256];
        const char *s = NULL;
        switch (t.type) {
        case HS_JSON_END:
            return 0;
        case HS_JSON_OBJECT:
            s = "{";
            break;
        case HS_JSON_OBJECT_END:
            s = "}";
            break;
        case HS_JSON_ARRAY:
            s = "[";
            break;
        case HS_JSON_ARRAY_END:
            s = "]";
            break;
        case HS_JSON_KEY:
        case HS_JSON_STRING: {
            char dec[200];
            size_t len = hs_json_unescape(&t, dec);
            snprintf(buf, sizeof(buf), "%c:%.*s", t.type == HS_JSON_KEY ? 'k' : 's', (int)len, dec);
            s = buf;
            break;
        }
        case HS_JSON_NUMBER:
            snprintf(buf, sizeof(buf), "%c:%.*s", t.integer ? 'i' : 'n', (int)t.len, t.ptr);
            s = buf;
            break;
        case HS_JSON_TRUE:
            s = "t";
            break;
        case HS_JSON_FALSE:
            s = "f";
            break;
        case HS_JSON_NULL:
            s = "null";
            break;
        }
        n += (size_t)snprintf(out + n, outlen - n, "%s%s", n ? " " : "", s);
    }
}

static void assert_tokens(const char *text, const char *want)
{
    char got[1024];
    int rc = tokens(text, got, sizeof(got));
    if (rc)
        fail_msg("%s: error %d", text, rc);
    assert_string_equal(got, want);
}

static void test_token_stream(void **state)
{
    assert_tokens("{\"a\": [1, -2.5e3, true, false, null, \"x\"], \"b\": {}}",
                  "{ k:a [ i:1 n:-2.5e3 t f null s:x ] k:b { } }");
    assert_tokens(" \t\r\n[ ] ", "[ ]");
    assert_tokens("\"top\"", "s:top");
    assert_tokens("0", "i:0");
    assert_tokens("[[[]],{}]", "[ [ [ ] ] { } ]");
    /* escapes, a surrogate pair, raw UTF-8 and U+0000 */
    assert_tokens("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "[ s:\"\\/\b\f\n\r\t ]");
    assert_tokens("[\"\\u00e9\\u20AC\\ud83d\\ude00 \xc3\xa9\"]",
                  "[ s:\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \xc3\xa9 ]");
    struct hs_json_reader r;
    struct hs_json_token t;
    char dec[8];
    hs_json_reader_init(&r, "\"a\\u0000b\"", 10, 0, true);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(hs_json_unescape(&t, dec), 3);
    assert_memory_equal(dec, "a\0b", 3);
}

static void assert_syntax(const char *text, uint32_t depth, bool nul, int code, const char *want)
{
    struct hs_json_reader r;
    struct hs_json_token t;
    hs_json_reader_init(&r, text, strlen(text), depth, nul);
    int rc;
    while ((rc = hs_json_next(&r, &t)) == 0 && t.type != HS_JSON_END)
        ;
    assert_int_equal(rc, code);
    assert_string_equal(r.err, want);
    assert_int_equal(hs_json_next(&r, &t), code); /* an error sticks */
}

static void test_errors(void **state)
{
    assert_syntax("", 0, true, HS_EINVAL,
                  "line 1 col 1: unexpected end of text (a value is "
                  "expected)");
    assert_syntax("{\"a\":1\n,\n\"b\" 2}", 0, true, HS_EINVAL,
                  "line 3 col 5: unexpected '2' (expected ':' after the member name)");
    assert_syntax("[1,]", 0, true, HS_EINVAL, "line 1 col 4: unexpected ']' (a value is expected)");
    assert_syntax("[01]", 0, true, HS_EINVAL, "line 1 col 3: unexpected '1' (expected ',' or ']')");
    assert_syntax("[1.]", 0, true, HS_EINVAL,
                  "line 1 col 2: invalid number (a digit must follow '.')");
    assert_syntax("[1e+]", 0, true, HS_EINVAL,
                  "line 1 col 2: invalid number (digits must follow the exponent)");
    assert_syntax("{\"a\":1]", 0, true, HS_EINVAL,
                  "line 1 col 7: unexpected ']' (expected ',' or '}')");
    assert_syntax("{1:2}", 0, true, HS_EINVAL,
                  "line 1 col 2: unexpected '1' (expected a member name in quotes or '}')");
    assert_syntax("[\"\\u12\"]", 0, true, HS_EINVAL,
                  "line 1 col 3: invalid \\u escape (four hex digits must follow)");
    assert_syntax("[\"\\udc00\"]", 0, true, HS_EINVAL,
                  "line 1 col 3: invalid \\uDC00: a low surrogate without its high half");
    assert_syntax("[\"\\u0000\"]", 0, false, HS_EINVAL,
                  "line 1 col 3: \\u0000 is not allowed in this document");
    assert_syntax("[\"\xc0\x80\"]", 0, true, HS_EINVAL,
                  "line 1 col 3: invalid UTF-8 in a string (byte 0xc0)");
    assert_syntax("[\"\xed\xa0\x80\"]", 0, true, HS_EINVAL,
                  "line 1 col 3: invalid UTF-8 in a string (byte 0xed)");
    assert_syntax("\xef\xbb\xbf{}", 0, true, HS_EINVAL,
                  "line 1 col 1: unexpected byte 0xef (a value is expected)");
    /* columns count characters: the é before the error is one */
    assert_syntax("[\"\xc3\xa9\" x]", 0, true, HS_EINVAL,
                  "line 1 col 6: unexpected 'x' (expected ',' or ']')");
    assert_syntax("[[[]]]", 2, true, HS_E2BIG, "line 1 col 3: nested deeper than 2 levels");
}

static void test_skip_and_depth(void **state)
{
    const char *text = "{\"skip\": {\"a\": [1, {\"b\": [[]]}], \"c\": \"}\"}, \"next\": 7}";
    struct hs_json_reader r;
    struct hs_json_token t;
    hs_json_reader_init(&r, text, strlen(text), 0, false);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_true(t.type == HS_JSON_KEY && hs_json_string_is(&t, "skip"));
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(t.type, HS_JSON_OBJECT);
    assert_int_equal(hs_json_skip(&r, &t), 0);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_true(t.type == HS_JSON_KEY && hs_json_string_is(&t, "next"));
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(hs_json_skip(&r, &t), 0); /* a scalar: nothing more */
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(t.type, HS_JSON_OBJECT_END);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(t.type, HS_JSON_END);

    /* a skip checks what it skips */
    hs_json_reader_init(&r, "[{\"a\": [1 2]}]", 14, 0, false);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(hs_json_skip(&r, &t), HS_EINVAL);
    assert_string_equal(r.err, "line 1 col 11: unexpected '2' (expected ',' or ']')");

    /* the ceiling: HS_JSON_MAX_DEPTH open, one more refused */
    char deep[2 * HS_JSON_MAX_DEPTH + 4];
    memset(deep, '[', HS_JSON_MAX_DEPTH + 1);
    memset(deep + HS_JSON_MAX_DEPTH + 1, ']', HS_JSON_MAX_DEPTH + 1);
    hs_json_reader_init(&r, deep, 2 * HS_JSON_MAX_DEPTH + 2, 0, false);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(hs_json_skip(&r, &t), HS_E2BIG);
    hs_json_reader_init(&r, deep + 1, 2 * HS_JSON_MAX_DEPTH, 0, false);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(hs_json_skip(&r, &t), 0);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(t.type, HS_JSON_END);
}

static struct hs_json_token number(const char *text)
{
    struct hs_json_reader r;
    struct hs_json_token t;
    hs_json_reader_init(&r, text, strlen(text), 0, false);
    assert_int_equal(hs_json_next(&r, &t), 0);
    assert_int_equal(t.type, HS_JSON_NUMBER);
    return t;
}

static void test_numbers(void **state)
{
    bool neg;
    uint64_t mag;
    struct hs_json_token t = number("18446744073709551615");
    assert_true(t.integer && hs_json_integer(&t, &neg, &mag));
    assert_false(neg);
    assert_true(mag == UINT64_MAX);
    t = number("18446744073709551616");
    assert_false(hs_json_integer(&t, &neg, &mag));
    t = number("-9223372036854775808");
    assert_true(hs_json_integer(&t, &neg, &mag) && neg && mag == (uint64_t)INT64_MAX + 1);
    t = number("2.5e-3");
    assert_false(t.integer);
    assert_true(hs_json_double(&t) == 2.5e-3);
    t = number("1e999");
    assert_true(isinf(hs_json_double(&t)));
    /* longer than any stack copy: the value is still right */
    char long_num[200] = "1.";
    memset(long_num + 2, '0', 150);
    strcpy(long_num + 152, "1e2");
    t = number(long_num);
    assert_true(fabs(hs_json_double(&t) - 100.0) < 1e-9);
}

/* Agreement with jansson on what is JSON: jansson builds a tree, so here it is the reference
 * for a reader that builds none. The inputs are each rule's edge; the fuzzer (fuzz_json_mem)
 * compares them on everything else. jansson limits nesting to 2048 and integers to int64. */
static void test_agrees_with_jansson(void **state)
{
    static const char *const docs[] = {
        "{}",
        "[]",
        "1",
        "-0",
        "0.5",
        "1E5",
        "-1e-5",
        "\"x\"",
        "true",
        "null",
        " [1 , 2 ] ",
        "{\"a\":{\"b\":[{}]}}",
        "[\"\\u00e9\"]",
        "[\"\\ud83d\\ude00\"]",
        "[\"\\/\"]",
        "",
        " ",
        "[",
        "]",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "[1,]",
        "[,1]",
        "{,}",
        "[01]",
        "[1.]",
        "[.5]",
        "[+1]",
        "[1e]",
        "[-]",
        "[\"\\x\"]",
        "[\"\\ud800\"]",
        "[\"\\udc00\"]",
        "[\"\\u00\"]",
        "[\"a\nb\"]",
        "[\"\xff\"]",
        "[\"\xc3\"]",
        "[\"\xe0\x80\x80\"]",
        "[\"\xf4\x90\x80\x80\"]",
        "[tru]",
        "[nul]",
        "[true false]",
        "{} {}",
        "{}x",
        "[\"unterminated]",
        "[1]\x00",
        "{\"a\":1,\"a\":2}" /* duplicates: jansson keeps the last unless told; so do we */,
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        const char *d = docs[i];
        size_t len = strlen(d) + (strcmp(d, "[1]") == 0);
        json_error_t je;
        json_t *j = json_loadb(d, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        struct hs_json_reader r;
        struct hs_json_token t;
        hs_json_reader_init(&r, d, len, 0, true);
        int rc;
        while ((rc = hs_json_next(&r, &t)) == 0 && t.type != HS_JSON_END)
            ;
        if ((j != NULL) != (rc == 0))
            fail_msg("%zu \"%s\": jansson %s, the reader %s", i, d, j ? "accepts" : je.text,
                     rc ? r.err : "accepts");
        json_decref(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_stream),        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_skip_and_depth),      cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_agrees_with_jansson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
