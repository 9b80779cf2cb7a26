/* test_nats.c: the pure parts of the nats exporter and receiver: the partition of a (tenant,
 * service) is pinned (a change re-routes a whole fleet), spreads evenly and grows by moving keys
 * only to the new partition; consume_partitions lists and their errors; the JetStream ack
 * subject (v1 and v2) read for the delivery count, stream sequence and consumer; what a pull
 * request's status means (never a hot loop against a missing consumer); the set of
 * messages taken remembers the latest and forgets the oldest; and the config: defaults, and
 * every mistake of a file reported at its line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/buf.h"
#include "core/metrics.h"
#include "exporters/load_balancing/ring.h"
#include "exporters/nats/nats.h"
#include "exporters/nats/nats_int.h"
#include "otlp_build.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "receivers/nats/nats_recv_int.h"

static struct hs_str S(const char *s) {
    return (struct hs_str){s, strlen(s)};
}

static void
test_partition_pinned(void **state)
{
    /* computed once; if these change, every deployed fleet re-partitions */
    static const struct {
        const char *tenant, *service;
        uint32_t partitions, want;
    } pins[] = {
        {"", "user-db", 16, 4},          {"", "api-server", 16, 13},
        {"tenant-a", "user-db", 16, 14}, {"tenant-b", "user-db", 16, 2},
        {"tenant-a", "checkout", 4, 0},  {"tenant-a", "checkout", 1024, 658},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(pins); i++) {
        uint32_t p = hs_nats_partition(S(pins[i].tenant), S(pins[i].service), pins[i].partitions);
        assert_int_equal(p, pins[i].want);
        /* the load_balancing routing key, so both tiers agree on what one key is */
        assert_int_equal(
            p, hs_ring_jump(hs_ring_key_tenant_service(S(pins[i].tenant), S(pins[i].service)),
                            pins[i].partitions));
    }
}

static void test_partition_spread_and_growth(void **state)
{
    enum { N = 16000, P = 16 };
    unsigned count[P + 1] = {0}, moved = 0, moved_elsewhere = 0;
    for (unsigned i = 0; i < N; i++) {
        char svc[32];
        snprintf(svc, sizeof(svc), "service-%u", i);
        uint32_t p = hs_nats_partition(S("t"), S(svc), P);
        uint32_t q = hs_nats_partition(S("t"), S(svc), P + 1);
        assert_true(p < P);
        count[p]++;
        moved += p != q;
        moved_elsewhere += p != q && q != P;
    }
    for (unsigned p = 0; p < P; p++) /* 1000 each on average */
        assert_true(count[p] > 850 && count[p] < 1150);
    assert_int_equal(moved_elsewhere, 0); /* a 17th partition takes keys, nobody else does */
    assert_true(moved > N / (P + 1) * 8 / 10 && moved < N / (P + 1) * 12 / 10);
}

static int parse(uint32_t partitions, size_t n, const char *const *items, uint32_t **out,
                 uint32_t *count, size_t *bad, const char **why)
{
    struct hs_strlist l = {(char **)items, n};
    return hs_nats_partitions_parse(&l, partitions, out, count, bad, why);
}

static void test_partitions_parse(void **state)
{
    uint32_t *v, n;
    size_t bad;
    const char *why;
    const char *const mix[] = {"9", "0-3", "2", "3-3"};
    assert_int_equal(parse(16, 4, mix, &v, &n, &bad, &why), 0);
    assert_int_equal(n, 5);
    const uint32_t want[] = {0, 1, 2, 3, 9};
    assert_memory_equal(v, want, sizeof(want));
    free(v);
    assert_int_equal(parse(4, 0, NULL, &v, &n, &bad, &why), 0); /* absent: all */
    assert_int_equal(n, 4);
    assert_int_equal(v[3], 3);
    free(v);
    const char *const wrong[] = {"x", "5-2", "16", "3-20", "-1", "1-", "1 - 2", "+3", "2-x"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(wrong); i++) {
        const char *const items[] = {"0", wrong[i]};
        why = NULL;
        assert_int_equal(parse(16, 2, items, &v, &n, &bad, &why), HS_EINVAL);
        assert_int_equal(bad, 1);
        assert_non_null(why);
    }
}

static void test_meta_parse(void **state)
{
    struct hs_nats_meta m;
    assert_true(
        hs_nats_meta_parse("$JS.ACK.HOTSPAN.hotspan-07.3.1042.17.1717000000000000000.5", &m));
    assert_int_equal(m.delivered, 3);
    assert_int_equal(m.stream_seq, 1042);
    assert_int_equal(m.consumer.len, 10);
    assert_memory_equal(m.consumer.ptr, "hotspan-07", 10);
    /* v2: a domain and an account hash first, a random token last */
    assert_true(hs_nats_meta_parse(
        "$JS.ACK.hub.ACCHASH.HOTSPAN.gw-traces-12.1.77.70.1717000000000000000.0.xyz", &m));
    assert_int_equal(m.delivered, 1);
    assert_int_equal(m.stream_seq, 77);
    assert_memory_equal(m.consumer.ptr, "gw-traces-12", 12);
    const char *bad[] = {NULL,
                         "",
                         "_INBOX.abc.1.2",
                         "$JS.ACK.HOTSPAN.c.1.2.3",
                         "$JS.ACK.HOTSPAN.c.x.2.3.4.5",
                         "$JS.ACK.HOTSPAN.c.1.0.3.4.5",
                         "$JS.ACK.a.b.HOTSPAN.c.1.2",
                         "$JS.ACK.HOTSPAN.c.1.99999999999999999999999.3.4.5"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad); i++)
        assert_false(hs_nats_meta_parse(bad[i], &m));
}

static void test_status_kind(void **state)
{
    assert_int_equal(hs_nats_status_kind("100", "Idle Heartbeat"), HS_NATS_STATUS_IDLE);
    assert_int_equal(hs_nats_status_kind("404", "No Messages"), HS_NATS_STATUS_END);
    assert_int_equal(hs_nats_status_kind("408", "Request Timeout"), HS_NATS_STATUS_END);
    assert_int_equal(hs_nats_status_kind("409", "Message Size Exceeds MaxBytes"),
                     HS_NATS_STATUS_FULL);
    assert_int_equal(hs_nats_status_kind("409", "Batch Completed"), HS_NATS_STATUS_END);
    assert_int_equal(hs_nats_status_kind("409", "Exceeded MaxWaiting"), HS_NATS_STATUS_WAIT);
    assert_int_equal(hs_nats_status_kind("409", "Leadership Change"), HS_NATS_STATUS_WAIT);
    assert_int_equal(hs_nats_status_kind("409", NULL), HS_NATS_STATUS_WAIT);
    /* never asked again at once: no hot loop while a consumer or its leader is missing */
    assert_int_equal(hs_nats_status_kind("409", "Consumer Deleted"), HS_NATS_STATUS_LOST);
    assert_int_equal(hs_nats_status_kind("503", NULL), HS_NATS_STATUS_LOST);
    assert_int_equal(hs_nats_status_kind("500", "whatever"), HS_NATS_STATUS_LOST);
}

static void test_seen(void **state)
{
    struct hs_nats_seen s;
    hs_nats_seen_init(&s, 64);
    assert_false(hs_nats_seen_has(&s, 1));
    hs_nats_seen_add(&s, 1);
    hs_nats_seen_add(&s, 1); /* once */
    assert_true(hs_nats_seen_has(&s, 1));
    assert_false(hs_nats_seen_has(&s, 2));
    assert_false(hs_nats_seen_has(&s, 0));
    for (uint64_t q = 2; q <= 32; q++) /* fills the first generation (cap/2) */
        hs_nats_seen_add(&s, q);
    for (uint64_t q = 33; q <= 60; q++) /* a second one: the first is still remembered */
        hs_nats_seen_add(&s, q);
    for (uint64_t q = 1; q <= 60; q++)
        assert_true(hs_nats_seen_has(&s, q));
    for (uint64_t q = 61; q <= 100; q++) /* a third: the first is forgotten */
        hs_nats_seen_add(&s, q);
    assert_false(hs_nats_seen_has(&s, 1));
    for (uint64_t q = 65; q <= 100; q++)
        assert_true(hs_nats_seen_has(&s, q));
    hs_nats_seen_free(&s);
}

/* ---- cutting to the message limit -------------------------------------------------------- */

static struct nats_exp *cut_exporter(void)
{
    struct nats_exp *e = calloc(1, sizeof(*e));
    e->base.id = "nats";
    e->base.metrics = hs_metrics_new();
    e->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    return e;
}

static void cut_exporter_free(struct nats_exp *e)
{
    hs_metrics_free(e->base.metrics);
    free(e);
}

static double dropped(struct nats_exp *e)
{
    struct hs_counter *c = hs_metrics_counter(e->base.metrics, "dropped_total", "x",
                                              "component=\"nats\",reason=\"message_too_large\"");
    return (double)c->value;
}

static int count_span(void *ud, const struct hs_span_view *s)
{
    (*(uint32_t *)ud)++;
    return 0;
}

/* A batch of n spans of `service` (the span named "big" carries a large attribute). */
static struct hs_traces *batch(const char *service, size_t n, size_t big_at, size_t big_len)
{
    Span **spans = zalloc(n * sizeof(*spans));
    for (size_t i = 0; i < n; i++) {
        spans[i] = span(i == big_at ? "big" : "op", (uint8_t)(i + 1));
        if (i == big_at) {
            char *v = zalloc(big_len + 1);
            memset(v, 'x', big_len);
            spans[i]->n_attributes = 1;
            spans[i]->attributes = (KV **)list(1, kv("blob", any_str(v)));
        }
    }
    ScopeSpans *ss = scope_spans("lib", n, spans);
    struct bytes b = pack(request(service, 1, (ScopeSpans **)list(1, ss)));
    uint8_t *data = malloc(b.len);
    memcpy(data, b.p, b.len);
    struct hs_traces *t = hs_traces_wrap(data, b.len, b.len, (uint32_t)n, 1);
    hs_traces_set_tenant(t, "tenant-a", 8);
    return t;
}

static void test_cut_traces(void **state)
{
    build_arena = hs_arena_new(4096, 0);
    struct nats_exp *e = cut_exporter();
    struct nats_item it = {.signal = HS_SIGNAL_TRACES};
    /* fits: the batch itself, no copy */
    struct hs_traces *small = batch("svc", 3, SIZE_MAX, 0);
    assert_int_equal(
        hs_nats_exp_cut(e, HS_SIGNAL_TRACES, (struct nats_part){small, 7, 3, 0}, 1 << 20, &it), 0);
    assert_int_equal(it.n, 1);
    assert_ptr_equal(it.parts[0].batch, small);
    hs_traces_unref(small);
    it.n = 0;
    /* 400 spans under a 2 KiB limit: pieces of whole spans, each under it, none lost; one span
     * of 3000 bytes cannot fit and is dropped, counted */
    struct hs_traces *t = batch("svc", 400, 50, 3000);
    assert_true(t->len > 8 * 2048);
    assert_int_equal(
        hs_nats_exp_cut(e, HS_SIGNAL_TRACES, (struct nats_part){t, 7, 400, 0}, 2048, &it), 0);
    assert_true(it.n > 8);
    uint32_t spans = 0;
    for (uint32_t i = 0; i < it.n; i++) {
        struct hs_traces *piece = it.parts[i].batch;
        assert_true(piece->len <= 2048);
        assert_int_equal(it.parts[i].partition, 7);
        assert_string_equal(piece->tenant, "tenant-a");
        uint32_t n = 0;
        struct hs_otlp_scan scan;
        const struct hs_otlp_limits none = {0};
        assert_int_equal(hs_otlp_traces_scan(piece->data, piece->len, &none, count_span, &n, &scan),
                         0);
        assert_int_equal(n, it.parts[i].items);
        spans += n;
        hs_traces_unref(piece);
    }
    assert_int_equal(spans, 399);
    assert_true(dropped(e) == 1);
    free(it.parts);
    cut_exporter_free(e);
    hs_arena_free(build_arena);
}

static struct hs_profile *raw_profile(size_t len)
{
    struct hs_profile *p = hs_profile_new();
    uint8_t *raw = calloc(1, len);
    assert_int_equal(hs_profile_set_raw(p, raw, len), 0);
    free(raw);
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, "svc", 3), 0);
    return p;
}

static void test_cut_profiles(void **state)
{
    struct nats_exp *e = cut_exporter();
    struct hs_profiles *b = hs_profiles_new("tenant-a");
    size_t sizes[] = {1000, 1000, 9000, 1000, 1000, 1000};
    for (size_t i = 0; i < HS_ARRAY_SIZE(sizes); i++)
        assert_int_equal(hs_profiles_add(b, raw_profile(sizes[i])), 0);
    struct nats_item it = {.signal = HS_SIGNAL_PROFILES};
    assert_int_equal(
        hs_nats_exp_cut(e, HS_SIGNAL_PROFILES, (struct nats_part){b, 3, 6, 0}, 2500, &it), 0);
    /* ranges of the same batch: [0,2), [3,5), [5,6); the 9000-byte one dropped */
    assert_int_equal(it.n, 3);
    const uint32_t first[] = {0, 3, 5}, items[] = {2, 2, 1};
    for (uint32_t i = 0; i < it.n; i++) {
        assert_ptr_equal(it.parts[i].batch, b);
        assert_int_equal(it.parts[i].first, first[i]);
        assert_int_equal(it.parts[i].items, items[i]);
        struct hs_buf body = {0};
        assert_int_equal(hs_bus_profiles_encode(b, it.parts[i].first, it.parts[i].items, &body), 0);
        assert_true(body.len <= 2500);
        hs_buf_free(&body);
        hs_profiles_unref(b);
    }
    assert_true(dropped(e) == 1);
    free(it.parts);
    cut_exporter_free(e);
}

/* ---- config ----------------------------------------------------------------------------- */

static int create(enum hs_kind kind, const char *yaml, struct hs_component **c,
                  struct hs_error *err)
{
    struct hs_config_doc doc = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, err), 0);
    const struct hs_component_type *t = hs_registry_find(kind, "nats");
    assert_non_null(t);
    *c = NULL;
    int rc =
        t->create(doc.root, kind == HS_KIND_EXPORTER ? "exporters.nats" : "receivers.nats", c, err);
    if (*c)
        (*c)->type = t;
    hs_config_doc_free(&doc);
    return rc;
}

static bool has_line(const struct hs_error *err, const char *line)
{
    for (size_t i = 0; i < err->count; i++)
        if (strcmp(err->lines[i], line) == 0)
            return true;
    for (size_t i = 0; i < err->count; i++)
        printf("  got: %s\n", err->lines[i]);
    printf("  wanted: %s\n", line);
    return false;
}

static void test_exporter_defaults(void **state)
{
    struct hs_component *c;
    struct hs_error err = {0};
    assert_int_equal(create(HS_KIND_EXPORTER, "servers: [nats://a:4222, tls://b:4222]", &c, &err),
                     0);
    struct nats_exp *e = hs_container_of(c, struct nats_exp, base);
    assert_string_equal(e->conf.stream.name, "HOTSPAN");
    assert_true(e->conf.stream.create);
    assert_int_equal(e->conf.stream.replicas, 3);
    assert_string_equal(e->conf.stream.retention, "limits");
    assert_string_equal(e->conf.stream.storage, "file");
    assert_string_equal(e->conf.stream.discard, "new");
    assert_int_equal(e->conf.stream.duplicate_window_ms, 300000);
    /* the window covers the default retry horizon: a resend is never stored twice */
    assert_true(e->conf.stream.duplicate_window_ms >= e->conf.common.retry.max_elapsed_ms);
    assert_string_equal(e->conf.subject_prefix, "hotspan");
    assert_int_equal(e->conf.partitions, 16);
    assert_int_equal(e->conf.common.timeout_ms, 5000);
    assert_int_equal(e->conf.nats.servers.count, 2);
    assert_int_equal(strlen(e->msg_id_base), 16);
    c->type->destroy(c);
    hs_error_free(&err);
}

static void test_exporter_every_error(void **state)
{
    const char *yaml = "servers: [nats://a:4222, http://b:80]\n"                /* 1 */
                       "endpoint: nats://c:4222\n"                              /* 2 */
                       "auth: {token: x, user: {username: u, password: p}}\n"   /* 3 */
                       "stream: {name: a.b, replicas: 7, retention: forever}\n" /* 4 */
                       "subject_prefix: 'a..b'\n"                               /* 5 */
                       "partitions: 0\n";                                       /* 6 */
    struct hs_component *c;
    struct hs_error err = {0};
    /* the decoder's errors come first; the cross-row checks run on what it read */
    assert_int_equal(create(HS_KIND_EXPORTER, yaml, &c, &err), HS_EINVAL);
    assert_null(c);
    assert_true(has_line(&err, "t.yaml:4:31: exporters.nats.stream.replicas: 7 is above the "
                               "maximum 5"));
    assert_true(has_line(&err, "t.yaml:4:45: exporters.nats.stream.retention: \"forever\" is not "
                               "one of: limits, workqueue"));
    assert_true(has_line(&err, "t.yaml:6:13: exporters.nats.partitions: 0 is below the minimum 1"));
    hs_error_free(&err);

    const char *yaml2 = "servers: [nats://a:4222, http://b:80]\n"
                        "endpoint: nats://c:4222\n"
                        "auth: {token: x, user: {username: u, password: p}}\n"
                        "stream: {name: a.b}\n"
                        "subject_prefix: 'a..b'\n";
    assert_int_equal(create(HS_KIND_EXPORTER, yaml2, &c, &err), HS_EINVAL);
    assert_true(has_line(&err, "t.yaml:2:11: exporters.nats: endpoint: give servers or endpoint, "
                               "not both"));
    assert_true(has_line(&err, "t.yaml:1:26: exporters.nats: servers[1]: \"http://b:80\" is not a "
                               "nats:// or tls:// URL"));
    assert_true(has_line(&err, "t.yaml:3:7: exporters.nats: auth: give one of token, user, nkey, "
                               "nkey_user_file (2 given)"));
    assert_true(has_line(&err, "t.yaml:4:16: exporters.nats: stream.name: \"a.b\" is not a stream "
                               "name (1-64 characters, none of space . * > / \\)"));
    assert_true(has_line(&err, "t.yaml:5:17: exporters.nats: subject_prefix: an empty token (a "
                               "leading, trailing or double '.')"));
    assert_int_equal(err.count, 5);
    hs_error_free(&err);

    assert_int_equal(create(HS_KIND_EXPORTER, "{stream: {create: false}}", &c, &err), HS_EINVAL);
    assert_true(has_line(&err, "t.yaml:1:1: exporters.nats: servers: required (the URLs of the "
                               "NATS servers)"));
    hs_error_free(&err);
    assert_int_equal(create(HS_KIND_EXPORTER,
                            "{endpoint: nats://a:1, auth: {nkey_user_file: {user_file: "
                            "/nonexistent/x.creds}}, tls: {ca_file: /nonexistent/ca.pem}}",
                            &c, &err),
                     HS_EINVAL);
    assert_true(has_line(&err, "t.yaml:1:59: exporters.nats: auth.nkey_user_file.user_file: "
                               "cannot read /nonexistent/x.creds"));
    assert_true(has_line(&err, "t.yaml:1:98: exporters.nats: tls.ca_file: \"/nonexistent/ca.pem\": "
                               "cannot load: No such file or directory"));
    assert_int_equal(err.count, 2);
    hs_error_free(&err);
}

static void test_receiver_config(void **state)
{
    struct hs_component *c;
    struct hs_error err = {0};
    assert_int_equal(create(HS_KIND_RECEIVER,
                            "{endpoint: nats://a:4222, partitions: 8, consume_partitions: ['4-7', "
                            "'1']}",
                            &c, &err),
                     0);
    struct nats_recv *r = hs_container_of(c, struct nats_recv, base);
    assert_int_equal(r->nparts, 5);
    assert_int_equal(r->parts[0], 1);
    assert_int_equal(r->parts[4], 7);
    assert_string_equal(r->conf.durable, "hotspan");
    assert_string_equal(r->conf.stream, "HOTSPAN");
    assert_int_equal(r->conf.ack_wait_ms, 30000);
    assert_int_equal(r->conf.max_deliver, 0);
    assert_int_equal(r->conf.fetch_batch, 100);
    c->type->destroy(c);

    const char *yaml = "endpoint: nats://a:4222\n"
                       "partitions: 8\n"
                       "consume_partitions: ['0-3', '6-9']\n"
                       "durable: 'gw.a'\n"
                       "stream: 'S*'\n";
    assert_int_equal(create(HS_KIND_RECEIVER, yaml, &c, &err), HS_EINVAL);
    assert_true(has_line(&err, "t.yaml:3:29: receivers.nats: consume_partitions[1]: \"6-9\": "
                               "beyond the last partition (partitions - 1)"));
    assert_true(has_line(&err, "t.yaml:4:10: receivers.nats: durable: \"gw.a\" is not a consumer "
                               "name (1-64 characters, none of space . * > / \\)"));
    assert_true(has_line(&err, "t.yaml:5:9: receivers.nats: stream: \"S*\" is not a stream name "
                               "(1-64 characters, none of space . * > / \\)"));
    assert_int_equal(err.count, 3);
    hs_error_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_pinned),
        cmocka_unit_test(test_partition_spread_and_growth),
        cmocka_unit_test(test_partitions_parse),
        cmocka_unit_test(test_meta_parse),
        cmocka_unit_test(test_status_kind),
        cmocka_unit_test(test_seen),
        cmocka_unit_test(test_cut_traces),
        cmocka_unit_test(test_cut_profiles),
        cmocka_unit_test(test_exporter_defaults),
        cmocka_unit_test(test_exporter_every_error),
        cmocka_unit_test(test_receiver_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
