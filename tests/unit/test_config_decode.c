/* test_config_decode.c: decoding by field tables: every type, defaults, bounds, sections
 * and presence, unknown and missing keys, one file with many mistakes, free, reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/config.h"
#include "core/errors.h"

/* ---- a small table of every type ---------------------------------------------------------- */

struct t_http {
    char *endpoint;
    uint64_t timeout_ms;
};

struct t_storage {
    char *path;
    bool sync;
};

struct t_cfg {
    bool flag;
    int64_t offset;
    uint32_t count;
    uint64_t big;
    double ratio;
    uint64_t wait_ms;
    uint64_t limit;
    char *name;
    char *level;
    char *endpoint;
    char *url;
    struct hs_strlist tags;
    struct hs_strmap headers;
    bool http_on;
    struct t_http http;
    struct t_storage storage;
};

static const char *const levels[] = {"debug", "info", "warn", NULL};

static const struct hs_config_field http_fields[] = {
    {"endpoint", HS_CFG_ENDPOINT, offsetof(struct t_http, endpoint), "localhost:4318",
     .doc = "where"},
    {"timeout", HS_CFG_DURATION, offsetof(struct t_http, timeout_ms), "5s", .min = 1, .max = 60000,
     .doc = "how long"},
    {0},
};

static const struct hs_config_field storage_fields[] = {
    {"path", HS_CFG_STRING, offsetof(struct t_storage, path), NULL, .required = true,
     .doc = "directory"},
    {"sync", HS_CFG_BOOL, offsetof(struct t_storage, sync), "true", .doc = "fsync each write"},
    {0},
};

static const struct hs_config_field fields[] = {
    {"flag", HS_CFG_BOOL, offsetof(struct t_cfg, flag), "false", .doc = "a switch"},
    {"offset", HS_CFG_INT, offsetof(struct t_cfg, offset), "-5", .min = -100, .max = 100,
     .doc = "signed"},
    {"count", HS_CFG_UINT, offsetof(struct t_cfg, count), "10", .min = 1, .max = 1000,
     .doc = "unsigned | piped"},
    {"big", HS_CFG_UINT64, offsetof(struct t_cfg, big), NULL, .doc = "large"},
    {"ratio", HS_CFG_DOUBLE, offsetof(struct t_cfg, ratio), "0.5", .min = 0, .max = 1,
     .doc = "fraction"},
    {"wait", HS_CFG_DURATION, offsetof(struct t_cfg, wait_ms), "30s", .min = 1, .max = 3600000,
     .doc = "patience"},
    {"limit", HS_CFG_SIZE, offsetof(struct t_cfg, limit), "20MiB", .min = 1024, .max = 1 << 30,
     .doc = "bytes"},
    {"name", HS_CFG_STRING, offsetof(struct t_cfg, name), "hotspan", .doc = "label"},
    {"level", HS_CFG_ENUM, offsetof(struct t_cfg, level), "info", .choices = levels,
     .doc = "verbosity"},
    {"endpoint", HS_CFG_ENDPOINT, offsetof(struct t_cfg, endpoint), "0.0.0.0:4318",
     .doc = "listen"},
    {"url", HS_CFG_URL, offsetof(struct t_cfg, url), NULL, .doc = "upstream"},
    {"tags", HS_CFG_STRLIST, offsetof(struct t_cfg, tags), "[a, b]", .doc = "labels"},
    {"headers", HS_CFG_STRMAP, offsetof(struct t_cfg, headers), NULL, .doc = "extra headers"},
    {"http", HS_CFG_SECTION, offsetof(struct t_cfg, http), .sub = http_fields, .has_presence = true,
     .presence_offset = offsetof(struct t_cfg, http_on), .doc = "server"},
    {"storage", HS_CFG_SECTION, offsetof(struct t_cfg, storage), .sub = storage_fields,
     .doc = "disk"},
    {0},
};

/* ---- helpers ------------------------------------------------------------------------------ */

static void parse_ok(const char *yaml, struct hs_config_doc *doc)
{
    struct hs_error err = {0};
    int rc = hs_config_parse("t.yaml", yaml, strlen(yaml), doc, &err);
    if (rc)
        fail_msg("unexpected parse error: %s", err.lines[0]);
    assert_int_equal(err.count, 0);
    hs_error_free(&err);
}

/* Parses and decodes `yaml` against `fields` (parse must succeed); returns the decode code. */

static int decode(const char *yaml, struct t_cfg *cfg, struct hs_error *err)
{
    struct hs_config_doc doc;
    parse_ok(yaml, &doc);
    memset(cfg, 0xA5, sizeof(*cfg)); /* decode must not trust what it is given */
    int rc = hs_config_decode(fields, doc.root, cfg, "", err);
    hs_config_doc_free(&doc);
    return rc;
}

/* Exactly these error lines, in this order. */

static void assert_errors(const struct hs_error *err, const char *const *want, size_t n)
{
    for (size_t i = 0; i < err->count; i++)
        print_message("  error %zu: %s\n", i, err->lines[i]);
    assert_int_equal(err->count, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(err->lines[i], want[i]);
}

#define ASSERT_ERRORS(err, ...)                                                                    \
    do {                                                                                           \
        const char *const want_[] = {__VA_ARGS__};                                                 \
        assert_errors((err), want_, sizeof(want_) / sizeof(want_[0]));                             \
    } while (0)

/* Decodes one bad `yaml`; expects exactly the one error `want`. */

static void expect_one_error(const char *yaml, const char *want)
{
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode(yaml, &cfg, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, want);
    hs_config_free_fields(fields, &cfg);
    hs_error_free(&err);
}

/* ---- ${env:...} meets the decoders --------------------------------------------------------- */

static void test_env_empty_is_missing(void **state)
{
    unsetenv("HS_T_UNSET");
    expect_one_error("storage:\n  path: ${env:HS_T_UNSET}\n",
                     "t.yaml:2:9: storage.path: missing value (expected a string)");
    expect_one_error("wait: ${env:HS_T_UNSET}\n",
                     "t.yaml:1:7: wait: missing value (expected a duration)");
    setenv("HS_T_WAIT", "250ms", 1);
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode("wait: ${env:HS_T_WAIT}\n", &cfg, &err), 0);
    assert_int_equal(cfg.wait_ms, 250);
    hs_config_free_fields(fields, &cfg);
}

/* ---- scalar values ------------------------------------------------------------------------ */

static void test_bool_and_numbers(void **state)
{
    const char *truthy[] = {"true", "TRUE", "Yes", "on"}, *falsy[] = {"false", "No", "OFF"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(truthy) + HS_ARRAY_SIZE(falsy); i++) {
        bool want = i < HS_ARRAY_SIZE(truthy);
        char yaml[64];
        snprintf(yaml, sizeof(yaml), "flag: %s", want ? truthy[i] : falsy[i - 4]);
        struct t_cfg cfg;
        struct hs_error err = {0};
        assert_int_equal(decode(yaml, &cfg, &err), 0);
        assert_int_equal(cfg.flag, want);
        hs_config_free_fields(fields, &cfg);
    }
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(
        decode("{offset: -100, count: 1000, big: 18446744073709551615, ratio: 1e-1}", &cfg, &err),
        0);
    assert_int_equal(cfg.offset, -100);
    assert_int_equal(cfg.count, 1000);
    assert_true(cfg.big == UINT64_MAX);
    assert_true(cfg.ratio > 0.0999 && cfg.ratio < 0.1001);
    hs_config_free_fields(fields, &cfg);

    expect_one_error("flag: maybe", "t.yaml:1:7: flag: \"maybe\" is not a boolean (use true or "
                                    "false)");
    expect_one_error("flag:", "t.yaml:1:6: flag: missing value (expected a bool)");
    expect_one_error("offset: 1.5", "t.yaml:1:9: offset: \"1.5\" is not an integer");
    expect_one_error("offset: +5", "t.yaml:1:9: offset: \"+5\" is not an integer");
    expect_one_error("offset: 99999999999999999999",
                     "t.yaml:1:9: offset: \"99999999999999999999\" is out of range");
    expect_one_error("count: -1", "t.yaml:1:8: count: \"-1\" is not a non-negative integer");
    expect_one_error("count: 4294967296", "t.yaml:1:8: count: \"4294967296\" is out of range");
    expect_one_error("big: 18446744073709551616",
                     "t.yaml:1:6: big: \"18446744073709551616\" is out of range");
    expect_one_error("big: 0x10", "t.yaml:1:6: big: \"0x10\" is not a non-negative integer");
    expect_one_error("ratio: inf", "t.yaml:1:8: ratio: \"inf\" is not a number");
    expect_one_error("ratio: 1e999", "t.yaml:1:8: ratio: \"1e999\" is out of range");
    expect_one_error("wait: 30x", "t.yaml:1:7: wait: \"30x\" is not a duration (try 30s)");
    expect_one_error("wait: 30", "t.yaml:1:7: wait: \"30\" is not a duration (try 30s)");
    expect_one_error("wait: soon",
                     "t.yaml:1:7: wait: \"soon\" is not a duration (e.g. 500ms, 30s, 1m30s, 2h)");
    expect_one_error("limit: lots",
                     "t.yaml:1:8: limit: \"lots\" is not a size (e.g. 512MiB, 64KiB, 1GB, 1500)");
    expect_one_error("endpoint: localhost",
                     "t.yaml:1:11: endpoint: \"localhost\": expected host:port (or :port to "
                     "listen on every address)");
    expect_one_error("endpoint: \"h:99999\"",
                     "t.yaml:1:11: endpoint: \"h:99999\": the port must be a number from 0 to "
                     "65535");
    expect_one_error("url: ftp://x", "t.yaml:1:6: url: \"ftp://x\": expected an absolute http:// "
                                     "or https:// URL");
    expect_one_error("url: http:///path", "t.yaml:1:6: url: \"http:///path\": the URL has no host");
    expect_one_error("url: http://h:99999/", "t.yaml:1:6: url: \"http://h:99999/\": the port "
                                             "must be a number from 0 to 65535");
    expect_one_error("name: [a]", "t.yaml:1:7: name: expected a scalar value, got a sequence");
}

static void test_strings_and_urls(void **state)
{
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode("{name: \"\", url: 'https://user:pw@tempo.example:4318/v1?x=1', "
                            "endpoint: '[::]:4317'}",
                            &cfg, &err),
                     0);
    assert_string_equal(cfg.name, "");
    assert_string_equal(cfg.url, "https://user:pw@tempo.example:4318/v1?x=1");
    assert_string_equal(cfg.endpoint, "[::]:4317");
    hs_config_free_fields(fields, &cfg);
    /* a non-required string written empty is the empty string */
    assert_int_equal(decode("name:", &cfg, &err), 0);
    assert_string_equal(cfg.name, "");
    hs_config_free_fields(fields, &cfg);
    assert_int_equal(decode("url: HTTP://[::1]:8080", &cfg, &err), 0);
    assert_string_equal(cfg.url, "HTTP://[::1]:8080");
    hs_config_free_fields(fields, &cfg);
}

/* ---- decoding ----------------------------------------------------------------------------- */

static void test_defaults_match_the_table(void **state)
{
    struct t_cfg cfg;
    memset(&cfg, 0x5A, sizeof(cfg));
    struct hs_error err = {0};
    assert_int_equal(hs_config_decode(fields, NULL, &cfg, "x", &err), 0);
    assert_int_equal(err.count, 0);
    assert_false(cfg.flag);
    assert_int_equal(cfg.offset, -5);
    assert_int_equal(cfg.count, 10);
    assert_int_equal(cfg.big, 0);
    assert_true(cfg.ratio == 0.5);
    assert_int_equal(cfg.wait_ms, 30000);
    assert_int_equal(cfg.limit, 20971520);
    assert_string_equal(cfg.name, "hotspan");
    assert_string_equal(cfg.level, "info");
    assert_string_equal(cfg.endpoint, "0.0.0.0:4318");
    assert_null(cfg.url);
    assert_int_equal(cfg.tags.count, 2);
    assert_string_equal(cfg.tags.items[0], "a");
    assert_string_equal(cfg.tags.items[1], "b");
    assert_int_equal(cfg.headers.count, 0);
    assert_false(cfg.http_on);
    assert_string_equal(cfg.http.endpoint, "localhost:4318"); /* defaults even when absent */
    assert_int_equal(cfg.http.timeout_ms, 5000);
    assert_null(cfg.storage.path);
    assert_true(cfg.storage.sync);
    hs_config_free_fields(fields, &cfg);

    /* a null document means the same */
    assert_int_equal(decode("~", &cfg, &err), 0);
    assert_int_equal(cfg.wait_ms, 30000);
    hs_config_free_fields(fields, &cfg);
}

static void test_user_values_replace_defaults(void **state)
{
    struct t_cfg cfg;
    struct hs_error err = {0};
    const char *yaml = "name: custom\n"
                       "level: debug\n"
                       "tags: [x]\n"
                       "wait: 1m30s\n"
                       "limit: 1.5KB\n";
    assert_int_equal(decode(yaml, &cfg, &err), 0);
    assert_string_equal(cfg.name, "custom");
    assert_string_equal(cfg.level, "debug");
    assert_int_equal(cfg.tags.count, 1);
    assert_string_equal(cfg.tags.items[0], "x");
    assert_int_equal(cfg.wait_ms, 90000);
    assert_int_equal(cfg.limit, 1500);
    hs_config_free_fields(fields, &cfg);
}

static void test_bounds(void **state)
{
    expect_one_error("count: 0", "t.yaml:1:8: count: 0 is below the minimum 1");
    expect_one_error("count: 1001", "t.yaml:1:8: count: 1001 is above the maximum 1000");
    expect_one_error("offset: -101", "t.yaml:1:9: offset: -101 is below the minimum -100");
    expect_one_error("ratio: 1.5", "t.yaml:1:8: ratio: 1.5 is above the maximum 1");
    expect_one_error("wait: 2h", "t.yaml:1:7: wait: \"2h\" is above the maximum 1h");
    expect_one_error("wait: 0", "t.yaml:1:7: wait: \"0\" is below the minimum 1ms");
    expect_one_error("limit: 2GiB", "t.yaml:1:8: limit: \"2GiB\" is above the maximum 1GiB");
    expect_one_error("limit: 1000", "t.yaml:1:8: limit: \"1000\" is below the minimum 1KiB");
    expect_one_error("http: {timeout: 61s}",
                     "t.yaml:1:17: http.timeout: \"61s\" is above the maximum 1m");
    /* the bounds themselves are inside */
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode("{count: 1, wait: 1h, limit: 1KiB, ratio: 0}", &cfg, &err), 0);
    hs_config_free_fields(fields, &cfg);
}

static void test_enum(void **state)
{
    expect_one_error("level: verbose",
                     "t.yaml:1:8: level: \"verbose\" is not one of: debug, info, warn");
    expect_one_error("level: INFO", "t.yaml:1:8: level: \"INFO\" is not one of: debug, info, warn");
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode("level: warn", &cfg, &err), 0);
    assert_string_equal(cfg.level, "warn");
    hs_config_free_fields(fields, &cfg);
}

static void test_section_presence(void **state)
{
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode("http: {}", &cfg, &err), 0);
    assert_true(cfg.http_on);
    assert_string_equal(cfg.http.endpoint, "localhost:4318");
    assert_int_equal(cfg.http.timeout_ms, 5000);
    hs_config_free_fields(fields, &cfg);

    assert_int_equal(decode("http:", &cfg, &err), 0);
    assert_true(cfg.http_on);
    assert_int_equal(cfg.http.timeout_ms, 5000);
    hs_config_free_fields(fields, &cfg);

    assert_int_equal(decode("flag: true", &cfg, &err), 0);
    assert_false(cfg.http_on);
    hs_config_free_fields(fields, &cfg);

    assert_int_equal(decode("http:\n  endpoint: \":9\"\n  timeout: 250ms\n", &cfg, &err), 0);
    assert_true(cfg.http_on);
    assert_string_equal(cfg.http.endpoint, ":9");
    assert_int_equal(cfg.http.timeout_ms, 250);
    hs_config_free_fields(fields, &cfg);

    expect_one_error("http: [a]", "t.yaml:1:7: http: expected a map, got a sequence");
    expect_one_error("http: on", "t.yaml:1:7: http: expected a map, got a scalar value");
}

static void test_strmap_keeps_order(void **state)
{
    struct t_cfg cfg;
    struct hs_error err = {0};
    const char *yaml = "headers:\n  Z-Last: '1'\n  A-First: two\n  M-Mid: ''\n  Empty:\n";
    assert_int_equal(decode(yaml, &cfg, &err), 0);
    assert_int_equal(cfg.headers.count, 4);
    const char *keys[] = {"Z-Last", "A-First", "M-Mid", "Empty"};
    const char *values[] = {"1", "two", "", ""};
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(cfg.headers.keys[i], keys[i]);
        assert_string_equal(cfg.headers.values[i], values[i]);
    }
    hs_config_free_fields(fields, &cfg);
    expect_one_error("headers: [a]", "t.yaml:1:10: headers: expected a map, got a sequence");
    expect_one_error("headers: {a: [1]}",
                     "t.yaml:1:14: headers.a: expected a scalar value, got a sequence");
}

static void test_strlist(void **state)
{
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode("tags:\n  - one\n  - 'two'\n", &cfg, &err), 0);
    assert_int_equal(cfg.tags.count, 2);
    assert_string_equal(cfg.tags.items[1], "two");
    hs_config_free_fields(fields, &cfg);
    assert_int_equal(decode("tags: []", &cfg, &err), 0);
    assert_int_equal(cfg.tags.count, 0);
    hs_config_free_fields(fields, &cfg);
    assert_int_equal(decode("tags:", &cfg, &err), 0);
    assert_int_equal(cfg.tags.count, 0);
    hs_config_free_fields(fields, &cfg);
    expect_one_error("tags: one", "t.yaml:1:7: tags: expected a sequence, got a scalar value");
    expect_one_error("tags: [a, {b: c}]", "t.yaml:1:11: tags[1]: expected a scalar value, got a "
                                          "map");
    expect_one_error("tags: [a, ~]", "t.yaml:1:11: tags[1]: empty list item");
}

static void test_unknown_key_lists_known(void **state)
{
    expect_one_error("http:\n  endpoint: ':1'\n  bogus: 1\n",
                     "t.yaml:3:3: http.bogus: unknown key (known: endpoint, timeout)");
    expect_one_error("storage: {path: /x, sink: 1}",
                     "t.yaml:1:21: storage.sink: unknown key (known: path, sync)");
}

static void test_required(void **state)
{
    expect_one_error("flag: true\nstorage:\n  sync: false\n",
                     "t.yaml:3:3: storage: missing required key \"path\"");
    expect_one_error("storage: {}", "t.yaml:1:10: storage: missing required key \"path\"");
    expect_one_error("storage:", "t.yaml:1:9: storage: missing required key \"path\"");
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode("storage: {path: /var/lib/hs}", &cfg, &err), 0);
    assert_string_equal(cfg.storage.path, "/var/lib/hs");
    assert_true(cfg.storage.sync);
    hs_config_free_fields(fields, &cfg);
    /* absent section: its required keys are not asked for */
    assert_int_equal(decode("flag: true", &cfg, &err), 0);
    hs_config_free_fields(fields, &cfg);
}

static void test_many_mistakes_at_once(void **state)
{
    const char *yaml = "flag: perhaps\n"        /* 1 */
                       "count: 0\n"             /* 2 */
                       "wait: 30x\n"            /* 3 */
                       "limit: 2GiB\n"          /* 4 */
                       "level: loud\n"          /* 5 */
                       "http:\n"                /* 6 */
                       "  endpoint: nowhere\n"  /* 7 */
                       "  timeuot: 1s\n"        /* 8 */
                       "storage:\n"             /* 9 */
                       "  sync: sometimes\n"    /* 10 */
                       "tags: [ok, [nested]]\n" /* 11 */
                       "url: gopher://old\n"    /* 12 */
                       "colour: blue\n";        /* 13 */
    struct t_cfg cfg;
    struct hs_error err = {0};
    assert_int_equal(decode(yaml, &cfg, &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "t.yaml:1:7: flag: \"perhaps\" is not a boolean (use true or false)",
                  "t.yaml:2:8: count: 0 is below the minimum 1",
                  "t.yaml:3:7: wait: \"30x\" is not a duration (try 30s)",
                  "t.yaml:4:8: limit: \"2GiB\" is above the maximum 1GiB",
                  "t.yaml:5:8: level: \"loud\" is not one of: debug, info, warn",
                  "t.yaml:7:13: http.endpoint: \"nowhere\": expected host:port (or :port to "
                  "listen on every address)",
                  "t.yaml:8:3: http.timeuot: unknown key (known: endpoint, timeout)",
                  "t.yaml:10:9: storage.sync: \"sometimes\" is not a boolean (use true or false)",
                  "t.yaml:10:3: storage: missing required key \"path\"",
                  "t.yaml:11:12: tags[1]: expected a scalar value, got a sequence",
                  "t.yaml:12:6: url: \"gopher://old\": expected an absolute http:// or https:// "
                  "URL",
                  "t.yaml:13:1: colour: unknown key (known: flag, offset, count, big, ratio, "
                  "wait, limit, name, level, endpoint, url, tags, headers, http, storage)");
    /* the good parts were still decoded; free copes with the half-done struct */
    assert_true(cfg.http_on);
    assert_int_equal(cfg.tags.count, 1);
    hs_config_free_fields(fields, &cfg);
    hs_error_free(&err);
}

static void test_path_prefix_and_non_map(void **state)
{
    struct hs_config_doc doc;
    parse_ok("processors:\n  batch: [1, 2]\n", &doc);
    struct t_cfg cfg;
    struct hs_error err = {0};
    const struct hs_config_node *batch =
        hs_config_get(hs_config_get(doc.root, "processors"), "batch");
    assert_int_equal(hs_config_decode(fields, batch, &cfg, "processors.batch", &err), HS_EINVAL);
    ASSERT_ERRORS(&err, "t.yaml:2:10: processors.batch: expected a map, got a sequence");
    assert_int_equal(cfg.wait_ms, 30000); /* defaults are in place all the same */
    hs_config_free_fields(fields, &cfg);
    hs_error_free(&err);
    hs_config_doc_free(&doc);

    parse_ok("a:\n  count: 0\n", &doc);
    assert_int_equal(
        hs_config_decode(fields, hs_config_get(doc.root, "a"), &cfg, "receivers.x", &err),
        HS_EINVAL);
    ASSERT_ERRORS(&err, "t.yaml:2:10: receivers.x.count: 0 is below the minimum 1");
    hs_config_free_fields(fields, &cfg);
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

struct t_bad {
    uint64_t wait;
    char *level;
    struct hs_strlist list;
    uint32_t n;
};

static void test_bad_defaults_are_reported(void **state)
{
    static const struct hs_config_field bad[] = {
        {"wait", HS_CFG_DURATION, offsetof(struct t_bad, wait), "30x"},
        {"level", HS_CFG_ENUM, offsetof(struct t_bad, level), "loud", .choices = levels},
        {"list", HS_CFG_STRLIST, offsetof(struct t_bad, list), "{a: b}"},
        {"n", HS_CFG_UINT, offsetof(struct t_bad, n), "0", .min = 1, .max = 5},
        {0},
    };
    struct t_bad b;
    struct hs_error err = {0};
    assert_int_equal(hs_config_decode(bad, NULL, &b, "p", &err), HS_EINVAL);
    ASSERT_ERRORS(
        &err,
        "p.wait: invalid default \"30x\" in the field table: \"30x\" is not a duration (try 30s)",
        "p.level: invalid default \"loud\" in the field table: \"loud\" is not one of: debug, "
        "info, warn",
        "<default>:1:1: p.list: invalid default \"{a: b}\" in the field table: expected a "
        "sequence, got a map",
        "p.n: invalid default \"0\" in the field table: 0 is below the minimum 1");
    hs_config_free_fields(bad, &b);
    hs_error_free(&err);
}

static void test_free_is_safe(void **state)
{
    struct t_cfg cfg = {0};
    hs_config_free_fields(fields, &cfg); /* zeroed */
    struct hs_error err = {0};
    /* errors after strings, lists and maps were allocated: all must be freed (ASan build) */
    assert_int_equal(decode("name: a\nheaders: {k: v}\ntags: [x, y]\nhttp: {endpoint: ':1'}\n"
                            "count: 0\nname2: x\n",
                            &cfg, &err),
                     HS_EINVAL);
    assert_int_equal(err.count, 2);
    hs_config_free_fields(fields, &cfg);
    assert_null(cfg.name);
    assert_null(cfg.http.endpoint);
    assert_int_equal(cfg.tags.count, 0);
    hs_config_free_fields(fields, &cfg); /* twice: harmless */
    hs_error_free(&err);
}

static void test_reference(void **state)
{
    struct hs_buf b = {0};
    hs_config_reference(fields, "", &b);
    hs_buf_putc(&b, '\0');
    const char *s = (const char *)b.data;
    const char *rows[] = {
        "| `flag` | bool | `false` |  | a switch |\n",
        "| `offset` | int | `-5` | -100 to 100 | signed |\n",
        "| `count` | uint | `10` | 1 to 1000 | unsigned \\| piped |\n",
        "| `wait` | duration | `30s` | 1ms to 1h | patience |\n",
        "| `limit` | size | `20MiB` | 1KiB to 1GiB | bytes |\n",
        "| `level` | enum: `debug`, `info`, `warn` | `info` |  | verbosity |\n",
        "| `tags` | list of strings | `[a, b]` |  | labels |\n",
        "| `http` | section | off unless written |  | server |\n",
        "| `http.timeout` | duration | `5s` | 1ms to 1m | how long |\n",
        "| `storage.path` | string | required |  | directory |\n",
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(rows); i++)
        if (!strstr(s, rows[i]))
            fail_msg("missing row %s in:\n%s", rows[i], s);
    /* one row per field, sections included */
    size_t lines = 0;
    for (const char *p = s; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 15 + 2 + 2);
    hs_buf_free(&b);

    hs_config_reference(http_fields, "receivers.otlp.protocols.http", &b);
    hs_buf_putc(&b, '\0');
    assert_non_null(strstr((char *)b.data, "| `receivers.otlp.protocols.http.endpoint` | "));
    hs_buf_free(&b);
}

/* ---- inline rows (an embedded struct's keys written at the parent's level) ------------------ */

struct t_listener {
    char *endpoint;
    uint64_t timeout_ms;
};

struct t_inl {
    char *path;
    struct t_listener l;
};

static const struct hs_config_field listener_fields[] = {
    {"timeout", HS_CFG_DURATION, offsetof(struct t_listener, timeout_ms), "5s", .min = 1,
     .doc = "t"},
    {0},
};

static const struct hs_config_field inl_fields[] = {
    {"endpoint", HS_CFG_ENDPOINT, offsetof(struct t_inl, l.endpoint), "0.0.0.0:1"},
    {"path", HS_CFG_STRING, offsetof(struct t_inl, path), "/x"},
    {"listener", HS_CFG_INLINE, offsetof(struct t_inl, l), .sub = listener_fields},
    {0},
};

static void test_inline_rows(void **state)
{
    struct hs_config_doc doc = {0};
    struct hs_error err = {0};
    struct t_inl c;
    const char *yaml = "{endpoint: ':9', timeout: 250ms}";
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), 0);
    assert_int_equal(hs_config_decode(inl_fields, doc.root, &c, "r", &err), 0);
    assert_string_equal(c.l.endpoint, ":9");
    assert_int_equal(c.l.timeout_ms, 250);
    assert_string_equal(c.path, "/x");
    hs_config_free_fields(inl_fields, &c);
    hs_config_doc_free(&doc);

    /* defaults reach the embedded struct; unknown keys list the inline ones too */
    yaml = "{nope: 1}";
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), 0);
    assert_int_equal(hs_config_decode(inl_fields, doc.root, &c, "r", &err), HS_EINVAL);
    assert_int_equal(c.l.timeout_ms, 5000);
    assert_int_equal(err.count, 1);
    assert_string_equal(err.lines[0],
                        "t.yaml:1:2: r.nope: unknown key (known: endpoint, path, timeout)");
    hs_config_free_fields(inl_fields, &c);
    hs_config_doc_free(&doc);
    hs_error_free(&err);

    struct hs_buf ref = {0};
    hs_config_reference(inl_fields, "r", &ref);
    hs_buf_putc(&ref, '\0');
    assert_non_null(strstr((char *)ref.data, "| `r.timeout` | duration | `5s` |"));
    assert_null(strstr((char *)ref.data, "listener"));
    hs_buf_free(&ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_empty_is_missing),
        cmocka_unit_test(test_bool_and_numbers),
        cmocka_unit_test(test_strings_and_urls),
        cmocka_unit_test(test_defaults_match_the_table),
        cmocka_unit_test(test_user_values_replace_defaults),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_enum),
        cmocka_unit_test(test_section_presence),
        cmocka_unit_test(test_strmap_keeps_order),
        cmocka_unit_test(test_strlist),
        cmocka_unit_test(test_unknown_key_lists_known),
        cmocka_unit_test(test_required),
        cmocka_unit_test(test_many_mistakes_at_once),
        cmocka_unit_test(test_path_prefix_and_non_map),
        cmocka_unit_test(test_bad_defaults_are_reported),
        cmocka_unit_test(test_free_is_safe),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_inline_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
