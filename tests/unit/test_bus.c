/* test_bus.c: a batch as one bus message (pdata/bus.h): subjects and prefixes; profiles survive
 * an encode/decode round trip field for field (the raw bytes untouched, gzipped or not, labels,
 * times, upload details, the tenant and its authentication) with the summary rebuilt from the
 * pprof; spans come back as the same bytes with their tenant; malformed bodies, empty messages,
 * bad tenants and over-limit profiles are refused with a message naming the problem. */
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
#include "core/component.h"
#include "core/compress.h"
#include "core/errors.h"
#include "hotspan/bus/v1/profiles.pb-c.h"
#include "otlp_build.h"
#include "pdata/bus.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

static const struct hs_pprof_limits lim = {.max_decompressed = 4u << 20,
                                           .max_samples = 1000,
                                           .max_sample_labels = 16,
                                           .max_stack_depth = 64};

static int setup(void **state)
{
    build_arena = hs_arena_new(4096, 0);
    return 0;
}

static int teardown(void **state)
{
    hs_arena_free(build_arena);
    return 0;
}

static void test_subjects(void **state)
{
    char s[HS_BUS_SUBJECT_MAX];
    assert_int_equal(hs_bus_subject(s, sizeof(s), "hotspan", HS_SIGNAL_TRACES, 7), 0);
    assert_string_equal(s, "hotspan.traces.07");
    assert_int_equal(hs_bus_subject(s, sizeof(s), "eu.hotspan", HS_SIGNAL_PROFILES, 12), 0);
    assert_string_equal(s, "eu.hotspan.profiles.12");
    assert_int_equal(hs_bus_subject(s, sizeof(s), "hotspan", 0, 3), 0); /* a durable's filter */
    assert_string_equal(s, "hotspan.*.03");
    assert_int_equal(hs_bus_subject(s, sizeof(s), "hotspan", HS_SIGNAL_TRACES, 1000), 0);
    assert_string_equal(s, "hotspan.traces.1000");
    assert_int_equal(hs_bus_subject(s, 10, "hotspan", HS_SIGNAL_TRACES, 1), HS_E2BIG);

    const char *why = NULL;
    assert_true(hs_bus_prefix_valid("hotspan", &why));
    assert_true(hs_bus_prefix_valid("eu-1.hotspan_v2", &why));
    const char *bad[] = {"", ".a", "a.", "a..b", "a b", "a.*", "a.>", "é"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(bad); i++) {
        why = NULL;
        assert_false(hs_bus_prefix_valid(bad[i], &why));
        assert_non_null(why);
    }
    char longp[HS_BUS_PREFIX_MAX + 2];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    assert_false(hs_bus_prefix_valid(longp, &why));
}

/* A summarized profile of `service` from folded stacks, its raw bytes gzipped when asked. */
static struct hs_profile *profile(const char *service, const char *folded, bool gzip)
{
    struct hs_buf pprof = {0}, gz = {0};
    char err[200];
    const struct hs_pprof_limits folded_lim = {.max_samples = 100};
    assert_int_equal(hs_pprof_from_folded(folded, strlen(folded), "cpu", "nanoseconds", 10000000,
                                          &folded_lim, &pprof, err, sizeof(err)),
                     0);
    if (gzip)
        assert_int_equal(hs_gzip(pprof.data, pprof.len, 1, &gz), 0);
    struct hs_profile *p = hs_profile_new();
    assert_non_null(p);
    const struct hs_buf *raw = gzip ? &gz : &pprof;
    assert_int_equal(hs_profile_set_raw(p, raw->data, raw->len), 0);
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, service, strlen(service)), 0);
    assert_int_equal(hs_profile_set_label(p, "env", 3, "prod", 4), 0);
    assert_int_equal(hs_profile_summarize(p, &lim, err, sizeof(err)), 0);
    hs_buf_free(&pprof);
    hs_buf_free(&gz);
    return p;
}

static void assert_same_str(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b); /* absent stays absent */
    else
        assert_string_equal(a, b);
}

static void assert_same_profile(const struct hs_profile *a, const struct hs_profile *b)
{
    assert_int_equal(a->raw_len, b->raw_len);
    assert_memory_equal(a->raw, b->raw, a->raw_len);
    assert_int_equal(a->nlabels, b->nlabels);
    for (uint32_t i = 0; i < a->nlabels; i++) {
        assert_string_equal(a->labels[i].name, b->labels[i].name);
        assert_string_equal(a->labels[i].value, b->labels[i].value);
    }
    assert_true(a->from_ns == b->from_ns && a->until_ns == b->until_ns);
    assert_same_str(a->id, b->id);
    assert_same_str(a->spy_name, b->spy_name);
    assert_same_str(a->sample_type_config, b->sample_type_config);
    assert_same_str(a->app_name, b->app_name);
    assert_string_equal(a->service, b->service);
    /* the summary the correlator reads, rebuilt from the pprof */
    assert_int_equal(a->summary.nfuncs, b->summary.nfuncs);
    assert_int_equal(a->summary.nstacks, b->summary.nstacks);
    assert_int_equal(a->summary.samples, b->summary.samples);
    assert_true(a->summary.totals[a->summary.main_type] == b->summary.totals[b->summary.main_type]);
    assert_string_equal(a->summary.type_ids[0], b->summary.type_ids[0]);
}

static void test_profiles_round_trip(void **state)
{
    struct hs_profiles *b = hs_profiles_new("tenant-1");
    b->tenant_authenticated = true;
    struct hs_profile *p1 = profile("svc-a", "main;handle;findByEmail 5\nmain;idle 2\n", true);
    p1->from_ns = 1717000000000000000LL;
    p1->until_ns = 1717000010000000000LL;
    p1->id = hs_profile_strdup(p1, "7b1c9e5e-0d1e-4cb2-9a51-4b5a1c2d3e4f", 36);
    p1->spy_name = hs_profile_strdup(p1, "nodespy", 7);
    p1->app_name = hs_profile_strdup(p1, "svc-a", 5);
    struct hs_profile *p2 = profile("svc-b", "main;loadPreferences 3\n", false);
    p2->sample_type_config = hs_profile_strdup(p2, "{\"cpu\":{\"units\":\"samples\"}}", 27);
    assert_int_equal(hs_profiles_add(b, p1), 0);
    assert_int_equal(hs_profiles_add(b, p2), 0);

    struct hs_buf body = {0};
    assert_int_equal(hs_bus_profiles_encode(b, 0, b->count, &body), 0);
    struct hs_profiles *out = NULL;
    char err[200] = "";
    assert_int_equal(
        hs_bus_profiles_decode(body.data, body.len, "tenant-1", true, &lim, &out, err, sizeof(err)),
        0);
    assert_int_equal(out->count, 2);
    assert_string_equal(out->tenant, "tenant-1");
    assert_true(out->tenant_authenticated);
    assert_int_equal(out->bytes, b->bytes);
    for (uint32_t i = 0; i < 2; i++)
        assert_same_profile(b->items[i], out->items[i]);
    hs_profiles_unref(out);

    /* no tenant: none comes back, and "authenticated" means nothing without one */
    assert_int_equal(
        hs_bus_profiles_decode(body.data, body.len, NULL, true, &lim, &out, err, sizeof(err)), 0);
    assert_null(out->tenant);
    assert_false(out->tenant_authenticated);
    hs_profiles_unref(out);
    hs_buf_free(&body);
    hs_profiles_unref(b);
}

static struct bytes two_spans(const char *service)
{
    ScopeSpans *ss = scope_spans("lib", 2, (Span **)list(2, span("a", 1), span("b", 2)));
    return pack(request(service, 1, (ScopeSpans **)list(1, ss)));
}

static void test_traces_decode(void **state)
{
    struct bytes req = two_spans("svc-a");
    struct hs_traces *t = NULL;
    char err[200] = "";
    assert_int_equal(hs_bus_traces_decode(req.p, req.len, "tenant-1", true, &t, err, sizeof(err)),
                     0);
    assert_int_equal(t->spans, 2);
    assert_int_equal(t->resource_spans, 1);
    assert_int_equal(t->len, req.len);
    assert_memory_equal(t->data, req.p, req.len); /* the bytes as they were published */
    assert_string_equal(t->tenant, "tenant-1");
    assert_true(t->tenant_authenticated);
    hs_traces_unref(t);

    assert_int_equal(hs_bus_traces_decode(req.p, req.len, "", true, &t, err, sizeof(err)), 0);
    assert_string_equal(t->tenant, "");
    assert_false(t->tenant_authenticated);
    hs_traces_unref(t);
}

static void test_refusals(void **state)
{
    char err[200];
    struct hs_traces *t = (void *)1;
    struct bytes req = two_spans("svc-a");
    static const uint8_t junk[] = {0x0a, 0x05, 0x01};
    assert_int_equal(hs_bus_traces_decode(junk, sizeof(junk), NULL, false, &t, err, sizeof(err)),
                     HS_EINVAL);
    assert_null(t);
    assert_non_null(strstr(err, "spans: "));
    assert_int_equal(hs_bus_traces_decode("", 0, NULL, false, &t, err, sizeof(err)), HS_EINVAL);
    assert_non_null(strstr(err, "no span"));
    assert_int_equal(hs_bus_traces_decode(req.p, req.len, "a tenant", false, &t, err, sizeof(err)),
                     HS_EINVAL);
    assert_non_null(strstr(err, HS_BUS_HDR_TENANT));

    struct hs_profiles *b = (void *)1;
    assert_int_equal(
        hs_bus_profiles_decode(junk, sizeof(junk), NULL, false, &lim, &b, err, sizeof(err)),
        HS_EINVAL);
    assert_null(b);
    assert_non_null(strstr(err, "malformed"));
    assert_int_equal(hs_bus_profiles_decode("", 0, NULL, false, &lim, &b, err, sizeof(err)),
                     HS_EINVAL);
    assert_non_null(strstr(err, "no profile"));

    /* a Profile whose raw bytes are not pprof: named by its index */
    Hotspan__Bus__V1__Profile p = HOTSPAN__BUS__V1__PROFILE__INIT, *pp[2] = {NULL, &p};
    Hotspan__Bus__V1__Profiles msg = HOTSPAN__BUS__V1__PROFILES__INIT;
    struct hs_profiles *good = hs_profiles_new(NULL);
    assert_int_equal(hs_profiles_add(good, profile("svc-a", "main 1\n", false)), 0);
    struct hs_buf body = {0};
    assert_int_equal(hs_bus_profiles_encode(good, 0, good->count, &body), 0);
    Hotspan__Bus__V1__Profiles *one = hotspan__bus__v1__profiles__unpack(NULL, body.len, body.data);
    pp[0] = one->profiles[0];
    p.raw = (ProtobufCBinaryData){3, (uint8_t *)"abc"};
    msg.n_profiles = 2;
    msg.profiles = pp;
    uint8_t buf[4096];
    size_t n = hotspan__bus__v1__profiles__pack(&msg, buf);
    assert_int_equal(hs_bus_profiles_decode(buf, n, NULL, false, &lim, &b, err, sizeof(err)),
                     HS_EINVAL);
    assert_non_null(strstr(err, "profiles[1]: "));

    /* over a limit: HS_E2BIG, not the same as malformed */
    const struct hs_pprof_limits tiny = {.max_decompressed = 4u << 20,
                                         .max_samples = 1,
                                         .max_sample_labels = 16,
                                         .max_stack_depth = 64};
    struct hs_profiles *two = hs_profiles_new(NULL);
    assert_int_equal(hs_profiles_add(two, profile("svc-a", "main;a 1\nmain;b 1\n", false)), 0);
    hs_buf_reset(&body);
    assert_int_equal(hs_bus_profiles_encode(two, 0, two->count, &body), 0);
    assert_int_equal(
        hs_bus_profiles_decode(body.data, body.len, NULL, false, &tiny, &b, err, sizeof(err)),
        HS_E2BIG);
    hotspan__bus__v1__profiles__free_unpacked(one, NULL);
    hs_profiles_unref(two);
    hs_profiles_unref(good);
    hs_buf_free(&body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subjects),
        cmocka_unit_test(test_profiles_round_trip),
        cmocka_unit_test_setup_teardown(test_traces_decode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
