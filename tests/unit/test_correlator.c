/* test_correlator.c: the correlator processor driven through its component type: slow-span
 * detection, window/subtree/exact matching, parking and release (profile arrival, max_wait,
 * bound, shutdown), tenants and services kept apart (an authenticated tenant over the span's
 * label), N+1, the latency baseline and the config.
 * Traces are built with protobuf-c, profiles by hand; every attribute is decoded and checked. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/metrics.h"
#include "otlp_build.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "processors/correlator/correlator_int.h"

#include "correlator_fixture.h"
#include "correlator_spans.h"

#define GC "runtime.gcBgMarkWorker"

/* The slow minute: findByEmail 65%, loadPreferences 52%, query 31% (of 100). */
static struct hs_profile *userdb_slow(int64_t from_s, int64_t until_s)
{
    const struct pstack st[] = {
        {{MAIN, HANDLE, FIND, LOADP, QUERY}, 31, NULL},
        {{MAIN, HANDLE, FIND, LOADP}, 21, NULL},
        {{MAIN, HANDLE, FIND}, 13, NULL},
        {{MAIN, HANDLE, HEALTH}, 30, NULL},
        {{GC}, 5, NULL},
    };
    return mkprofile("user-db", from_s, until_s, st, HS_ARRAY_SIZE(st));
}

/* A normal minute: findByEmail 15%, loadPreferences 5%, query 3%. */
static struct hs_profile *userdb_normal(int64_t from_s, int64_t until_s)
{
    const struct pstack st[] = {
        {{MAIN, HANDLE, FIND, LOADP, QUERY}, 3, NULL},
        {{MAIN, HANDLE, FIND, LOADP}, 2, NULL},
        {{MAIN, HANDLE, FIND}, 10, NULL},
        {{MAIN, HANDLE, HEALTH}, 80, NULL},
        {{GC}, 5, NULL},
    };
    return mkprofile("user-db", from_s, until_s, st, HS_ARRAY_SIZE(st));
}

static struct hs_profile *api_profile(int64_t from_s, int64_t until_s, const uint8_t *span_id)
{
    const struct pstack st[] = {
        {{"api.serve", "api.(*Server).checkout", "encoding/json.Marshal"}, 123000000, span_id},
        {{"api.serve", "api.(*Server).checkout", "api.(*Server).render"}, 82000000, span_id},
        {{"api.serve", "api.(*Server).checkout", "crypto/tls.(*Conn).Write"}, 41000000, span_id},
        {{"api.serve", "api.idle"}, 400000000, NULL},
    };
    return mkprofile("api-server", from_s, until_s, st, HS_ARRAY_SIZE(st));
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_fast_batch_passes_as_is(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *a = mkspan("GET /users", 1, S(2), MS(40));
    Span *b = mkspan("SELECT users", 2, S(2), MS(499)); /* under the 500ms threshold */
    struct hs_traces *t = traces_of("user-db", NULL, 2, (Span **)list(2, a, b));
    uint8_t copy[4096];
    size_t len = t->len;
    memcpy(copy, t->data, len);
    assert_int_equal(CT.consume_traces(f.c, t), 0);
    assert_int_equal(f.traces.n, 1);
    assert_ptr_equal(f.traces.t[0], t); /* the same object: no copy */
    assert_int_equal(f.traces.t[0]->len, len);
    assert_memory_equal(f.traces.t[0]->data, copy, len);
    assert_int_equal(metric(&f, "correlator_spans_checked_total", ""), 2);
    assert_int_equal(metric(&f, "correlator_slow_spans_total", ""), 0);
    teardown(&f);
}

/* user-db sends profiles; its slow spans wait for the profile covering them, then leave
 * annotated: window match for "SELECT users", the findByEmail subtree for "findByEmail". The
 * fast span leaves at once. api-server sends no profiles: annotated at once, match none. */
static void test_parked_until_profile_window_and_subtree(void **state)
{
    struct fx f;
    setup(&f, "{pyroscope_url: 'http://pyro:4040/'}");
    /* earlier, normal minutes: the service is known and its baseline set */
    assert_int_equal(send_profiles(&f, NULL, userdb_normal(-60, -50)), 0);
    assert_int_equal(send_profiles(&f, NULL, userdb_normal(-50, -40)), 0);
    shown_long_ago(&f, "", "api-server");
    Span *fast = mkspan("GET /health", 1, S(2), MS(3));
    Span *w = mkspan("SELECT users", 2, S(2), MS(600));
    Span *sub = mkspan("findByEmail", 3, S(3), MS(700));
    struct hs_traces *t = traces_of("user-db", NULL, 3, (Span **)list(3, fast, w, sub));
    assert_int_equal(CT.consume_traces(f.c, t), 0);
    Span *api = mkspan("POST /checkout", 4, S(2), MS(900));
    assert_int_equal(CT.consume_traces(f.c, traces_of("api-server", NULL, 1, (Span **)list(1, api))),
                     0);
    assert_int_equal(hs_correlator_parked(f.c), 2);
    assert_int_equal(f.traces.n, 2);
    int bi = -1;
    Span *o = out_span(&f, "GET /health", &bi);
    assert_non_null(o);
    assert_int_equal(bi, 0);
    assert_int_equal(o->n_attributes, 0);
    assert_null(out_span(&f, "SELECT users", NULL));
    o = out_span(&f, "POST /checkout", NULL);
    assert_non_null(o);
    assert_true(attr(o, "hotspan.slow")->bool_value);
    assert_string_equal(astr(o, "hotspan.slow.reason"), "threshold 500ms");
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "no_profiles_for_service");
    assert_null(attr(o, "profile.top_functions"));
    /* a profile ending before span end + slack (2.7 s + 5 s) does not release them */
    assert_int_equal(send_profiles(&f, NULL, userdb_slow(0, 5)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 2);
    assert_int_equal(send_profiles(&f, NULL, userdb_slow(5, 10)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    assert_int_equal(f.traces.n, 3);
    o = out_span(&f, "SELECT users", &bi);
    assert_int_equal(bi, 2);
    assert_string_equal(astr(o, "profile.match"), "window");
    assert_null(attr(o, "profile.match_reason"));
    assert_string_equal(astr(o, "profile.type"), "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    /* two profiles of the slow minute: 200 samples, the shares unchanged; main.main is the
     * trunk, main.handle (95%) its deepest frame, where the time splits; full names, as Go's
     * profiler wrote them (without file names, github.com/jackc/pg may be the user's module:
     * it is not summarised as a library) */
    assert_string_equal(alist(o, "profile.top_functions"),
                        "main.handle 95% | " FIND " 65% | " LOADP " 52%");
    assert_string_equal(astr(o, "profile.hot_path"),
                        MAIN " > " HANDLE " > " FIND " > " LOADP " > " QUERY);
    assert_string_equal(alist(o, "profile.grown_functions"),
                        FIND " +50pp | " LOADP " +47pp | " QUERY " +28pp");
    assert_null(attr(o, "profile.cpu_share"));
    assert_null(attr(o, "pyroscope.profile.id"));
    /* window [2 s - 5 s, 2.6 s + 5 s] */
    assert_string_equal(astr(o, "profile.link"),
                        "http://pyro:4040/?query=process_cpu%3Acpu%3Ananoseconds%3Acpu%3Ananoseconds"
                        "%7Bservice_name%3D%22user-db%22%7D&from=1716999997&until=1717000008");
    o = out_span(&f, "findByEmail", NULL);
    assert_string_equal(astr(o, "profile.match"), "window");
    assert_string_equal(alist(o, "profile.top_functions"), LOADP " 80% | " QUERY " 48%");
    assert_string_equal(astr(o, "profile.hot_path"), FIND " > " LOADP " > " QUERY);
    /* api-server was never told about user-db's functions */
    o = out_span(&f, "POST /checkout", NULL);
    assert_null(attr(o, "profile.hot_path"));
    assert_int_equal(metric(&f, "correlator_annotated_spans_total", ",match=\"window\""), 2);
    assert_int_equal(metric(&f, "correlator_annotated_spans_total", ",match=\"none\""), 1);
    assert_int_equal(metric(&f, "correlator_profiles_indexed_total", ""), 4);
    assert_int_equal(metric(&f, "correlator_released_by_timeout_total", ""), 0);
    teardown(&f);
}

/* Node's profiler names a method bare ("./repo.js:findByEmail:12" reads "findByEmail") while
 * the span says "UserRepository.findByEmail": the span still finds its function, so the
 * annotation is the findByEmail subtree, not the service's whole window (where the handler and
 * an idle loop outweigh it). */
static void test_subtree_for_qualified_span_and_bare_function(void **state)
{
    (void)state;
    struct fx f;
    setup(&f, "{}");
    const struct pstack st[] = {
        {{"./main.js:main:1", "./main.js:handle:9", "./repo.js:findByEmail:12",
          "./repo.js:loadPreferences:30", "./pg.js:query:77"}, 40, NULL},
        {{"./main.js:main:1", "./main.js:handle:9", "./repo.js:findByEmail:12",
          "./repo.js:loadPreferences:30"}, 20, NULL},
        {{"./main.js:main:1", "./main.js:handle:9", "./repo.js:findByEmail:12"}, 10, NULL},
        {{"./main.js:main:1", "./main.js:handle:9", "./main.js:render:50"}, 60, NULL},
        {{"./main.js:main:1", "./main.js:idle:3"}, 70, NULL},
    };
    assert_int_equal(send_profiles(&f, NULL, mkprofile("user-db", 0, 10, st, HS_ARRAY_SIZE(st))),
                     0);
    Span *sp = mkspan("UserRepository.findByEmail", 1, S(2), MS(700));
    Span *other = mkspan("OtherRepository.loadPreferencesLater", 2, S(2), MS(700));
    assert_int_equal(
        CT.consume_traces(f.c, traces_of("user-db", NULL, 2, (Span **)list(2, sp, other))), 0);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_non_null(o);
    assert_string_equal(alist(o, "profile.top_functions"),
                        "./repo.js:loadPreferences:30 86% | ./pg.js:query:77 57%");
    assert_string_equal(
        astr(o, "profile.hot_path"),
        "./repo.js:findByEmail:12 > ./repo.js:loadPreferences:30 > ./pg.js:query:77");
    /* a name that only shares a suffix without a separator is not the function: whole window */
    o = out_span(&f, "OtherRepository.loadPreferencesLater", NULL);
    assert_string_equal(astr(o, "profile.hot_path"),
                        "./main.js:main:1 > ./main.js:handle:9 > ./repo.js:findByEmail:12 > "
                        "./repo.js:loadPreferences:30 > ./pg.js:query:77");
    teardown(&f);
}

/* An exact match whose every sample runs findByEmail > loadPreferences > query: the frames
 * above the span's function are trunk and left out, but loadPreferences, 92% of the span's
 * samples, is what the span spends its time in and is named. */
static void test_exact_match_names_the_callees_of_the_span_function(void **state)
{
    (void)state;
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("UserRepository.findByEmail", 5, S(2), MS(700));
    const uint8_t *id = sp->span_id.data;
    const struct pstack st[] = {
        {{"./main.js:main:1", "./main.js:handle:9", "./repo.js:findByEmail:12",
          "./repo.js:loadPreferences:30", "./pg.js:query:77"}, 92, id},
        {{"./main.js:main:1", "./main.js:handle:9", "./repo.js:findByEmail:12",
          "./repo.js:loadUsers:20", "./pg.js:query:77"}, 8, id},
        {{"./main.js:main:1", "./main.js:idle:3"}, 300, NULL},
    };
    assert_int_equal(send_profiles(&f, NULL, mkprofile("user-db", 0, 10, st, HS_ARRAY_SIZE(st))),
                     0);
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 1, (Span **)list(1, sp))),
                     0);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(alist(o, "profile.top_functions"),
                        "./pg.js:query:77 100% | ./repo.js:loadPreferences:30 92% | "
                        "./repo.js:loadUsers:20 8%");
    assert_string_equal(astr(o, "profile.hot_path"),
                        "./main.js:main:1 > ./main.js:handle:9 > ./repo.js:findByEmail:12 > "
                        "./repo.js:loadPreferences:30 > ./pg.js:query:77");
    teardown(&f);
}

static const uint8_t checkout_id[8] = {104, 105, 106, 107, 108, 109, 110, 111}; /* seed 4 */

/* A span profile labelled with the span's own id: exact match, CPU share, profile id; the
 * profile arrived first, so the span does not wait. */
static void test_exact_span_match(void **state)
{
    struct fx f;
    setup(&f, "{}");
    assert_int_equal(send_profiles(&f, NULL, api_profile(0, 10, checkout_id)), 0);
    Span *api = mkspan("POST /checkout", 4, S(2), MS(600));
    assert_memory_equal(api->span_id.data, checkout_id, 8);
    assert_int_equal(CT.consume_traces(f.c, traces_of("api-server", NULL, 1, (Span **)list(1, api))),
                     0);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    Span *o = out_span(&f, "POST /checkout", NULL);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(astr(o, "pyroscope.profile.id"), "68696a6b6c6d6e6f");
    assert_true(fabs(attr(o, "profile.cpu_share")->double_value - 246000000.0 / 600000000.0) <
                1e-12);
    /* only the span's samples (idle is not the span's); api.serve is the trunk, and
     * Server.checkout, its deepest frame, is where the time is before it splits: half of it in
     * encoding/json, which (standard library) is not listed in its place */
    assert_string_equal(
        alist(o, "profile.top_functions"),
        "api.(*Server).checkout 100% (in encoding/json) | api.(*Server).render 33%");
    assert_string_equal(astr(o, "profile.hot_path"),
                        "api.serve > api.(*Server).checkout > encoding/json.Marshal");
    assert_null(attr(o, "profile.link"));
    assert_int_equal(metric(&f, "correlator_annotated_spans_total", ",match=\"span\""), 1);
    teardown(&f);
}

/* Profiles of tenant acme never annotate spans of tenant globex, and the reverse. */
static void test_tenants_never_joined(void **state)
{
    struct fx f;
    setup(&f, "{labels: {trace_tenant: tenant.id}, tenant: acme}");
    shown_long_ago(&f, "globex", "user-db");
    shown_long_ago(&f, "acme", "api-server");
    assert_int_equal(send_profiles(&f, "acme", userdb_slow(0, 10)), 0);
    assert_int_equal(send_profiles(&f, NULL, api_profile(0, 10, checkout_id)), 0);
    Span *g = mkspan("SELECT users", 1, S(2), MS(600));
    Span *a = mkspan("SELECT orders", 2, S(2), MS(600));
    Span *d = mkspan("SELECT default", 3, S(2), MS(600));
    Span *api = mkspan("POST /checkout", 4, S(2), MS(600));
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", "globex", 1, (Span **)list(1, g))),
                     0);
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", "acme", 1, (Span **)list(1, a))),
                     0);
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 1, (Span **)list(1, d))), 0);
    /* the "" tenant's profiles: not for spans of the configured default tenant acme */
    assert_int_equal(
        CT.consume_traces(f.c, traces_of("api-server", NULL, 1, (Span **)list(1, api))), 0);
    Span *o = out_span(&f, "SELECT users", NULL);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "no_profiles_for_service");
    o = out_span(&f, "SELECT orders", NULL);
    assert_string_equal(astr(o, "profile.match"), "window");
    o = out_span(&f, "SELECT default", NULL); /* no tenant.id: the `tenant` key, acme */
    assert_string_equal(astr(o, "profile.match"), "window");
    o = out_span(&f, "POST /checkout", NULL);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_null(attr(o, "pyroscope.profile.id"));
    teardown(&f);
}

/* user-db of tenant b: its own functions, none of tenant a's. */
static struct hs_profile *userdb_of_b(int64_t from_s, int64_t until_s)
{
    const struct pstack st[] = {
        {{"b.main", "b.(*Store).scan"}, 70, NULL},
        {{"b.main", "b.idle"}, 30, NULL},
    };
    return mkprofile("user-db", from_s, until_s, st, HS_ARRAY_SIZE(st));
}

/* traces_of, the batch's tenant set as a receiver sets it (authenticated: a per-tenant token). */
static struct hs_traces *traces_as(const char *batch_tenant, bool authenticated,
                                   const char *tenant_attr, Span *s)
{
    struct hs_traces *t = traces_of("user-db", tenant_attr, 1, (Span **)list(1, s));
    assert_int_equal(hs_traces_set_tenant(t, batch_tenant, strlen(batch_tenant)), 0);
    t->tenant_authenticated = authenticated;
    return t;
}

/* A span whose batch tenant a per-tenant token decided cannot pick another tenant's profiles
 * with labels.trace_tenant: it is annotated from its own tenant's (or none), counted once (also
 * when it parks and is scanned again), and leaves with its batch's tenant. An asserted tenant
 * (X-Scope-OrgID without tenant auth) is still overridden by the label, as before. */
static void test_authenticated_tenant_wins(void **state)
{
    struct fx f;
    setup(&f, "{labels: {trace_tenant: tenant.id}}");
    shown_long_ago(&f, "b", "user-db"); /* b's spans do not wait for a first profile */
    assert_int_equal(send_profiles(&f, "a", userdb_slow(0, 30)), 0);
    /* b has no profiles yet: none, rather than a's */
    Span *s1 = mkspan("SELECT one", 1, S(2), MS(600));
    assert_int_equal(CT.consume_traces(f.c, traces_as("b", true, "a", s1)), 0);
    int bi;
    Span *o = out_span(&f, "SELECT one", &bi);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "no_profiles_for_service");
    assert_string_equal(f.traces.t[bi]->tenant, "b");
    assert_true(f.traces.t[bi]->tenant_authenticated);
    assert_int_equal(metric(&f, "correlator_tenant_mismatch_total", ""), 1);

    /* b's own profiles: the span parks for them and is annotated from b's functions only */
    assert_int_equal(send_profiles(&f, "b", userdb_of_b(0, 5)), 0);
    Span *s2 = mkspan("SELECT two", 2, S(3), MS(600));
    assert_int_equal(CT.consume_traces(f.c, traces_as("b", true, "a", s2)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    assert_int_equal(send_profiles(&f, "b", userdb_of_b(5, 10)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    o = out_span(&f, "SELECT two", &bi);
    assert_string_equal(astr(o, "profile.match"), "window");
    const char *top = alist(o, "profile.top_functions");
    assert_non_null(strstr(top, "b.(*Store).scan"));
    assert_null(strstr(top, "findByEmail"));
    assert_null(strstr(astr(o, "profile.hot_path"), "findByEmail"));
    assert_string_equal(f.traces.t[bi]->tenant, "b");
    assert_int_equal(metric(&f, "correlator_tenant_mismatch_total", ""), 2);

    /* naming its own tenant is no mismatch */
    Span *s3 = mkspan("SELECT three", 3, S(2), MS(600));
    assert_int_equal(CT.consume_traces(f.c, traces_as("b", true, "b", s3)), 0);
    assert_non_null(
        strstr(alist(out_span(&f, "SELECT three", NULL), "profile.top_functions"), "b.(*Store).scan"));
    assert_int_equal(metric(&f, "correlator_tenant_mismatch_total", ""), 2);

    /* only asserted: the label still chooses (the receiver trusted the header, so the label) */
    Span *s4 = mkspan("SELECT four", 4, S(2), MS(600));
    assert_int_equal(CT.consume_traces(f.c, traces_as("b", false, "a", s4)), 0);
    assert_non_null(
        strstr(alist(out_span(&f, "SELECT four", NULL), "profile.top_functions"), "findByEmail"));
    assert_int_equal(metric(&f, "correlator_tenant_mismatch_total", ""), 2);
    teardown(&f);
}

/* No profile arrives: max_wait (on the injected clock) releases the span, match none/timeout. */
static void test_released_by_max_wait(void **state)
{
    struct fx f;
    setup(&f, "{max_wait: 30s}");
    assert_int_equal(send_profiles(&f, NULL, userdb_normal(-60, -50)), 0);
    Span *w = mkspan("SELECT users", 2, S(2), MS(600));
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 1, (Span **)list(1, w))), 0);
    assert_int_equal(f.traces.n, 0); /* nothing else in the batch: nothing sent */
    assert_int_equal(hs_correlator_parked(f.c), 1);
    fake_now += 29999;
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    fake_now += 1;
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    Span *o = out_span(&f, "SELECT users", NULL);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "timeout");
    assert_string_equal(astr(o, "profile.type"), "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_int_equal(metric(&f, "correlator_released_by_timeout_total", ""), 1);
    teardown(&f);
}

/* At the parked bound the oldest leaves un-annotated (parked_limit); shutdown releases the
 * rest; downstream refusing makes the correlator hold and retry, never drop. */
static void test_parked_bound_shutdown_and_backpressure(void **state)
{
    struct fx f;
    setup(&f, "{limits: {max_parked_spans: 2}}");
    assert_int_equal(send_profiles(&f, NULL, userdb_normal(-60, -50)), 0);
    const char *names[] = {"q1", "q2", "q3"};
    for (int i = 0; i < 3; i++) {
        Span *s = mkspan(names[i], (uint8_t)(10 + i), S(2), MS(600));
        assert_int_equal(
            CT.consume_traces(f.c, traces_of("user-db", NULL, 1, (Span **)list(1, s))), 0);
    }
    assert_int_equal(hs_correlator_parked(f.c), 2);
    Span *o = out_span(&f, "q1", NULL);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "parked_limit");
    assert_null(out_span(&f, "q2", NULL));
    assert_int_equal(metric(&f, "correlator_evictions_total", ",what=\"parked_span\""), 1);
    /* downstream busy: refused whole */
    f.traces.ready = false;
    Span *s4 = mkspan("q4", 14, S(2), MS(1));
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 1, (Span **)list(1, s4))),
                     HS_EAGAIN);
    /* a profile releases both while downstream is busy: they are held, then sent */
    assert_int_equal(send_profiles(&f, NULL, userdb_slow(0, 10)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    assert_int_equal(f.traces.n, 1);
    hs_correlator_tick(f.c);
    assert_int_equal(f.traces.n, 1);
    f.traces.ready = true;
    hs_correlator_tick(f.c);
    assert_int_equal(f.traces.n, 2);
    assert_string_equal(astr(out_span(&f, "q2", NULL), "profile.match"), "window");
    assert_string_equal(astr(out_span(&f, "q3", NULL), "profile.match"), "window");
    /* shutdown: parked spans leave annotated with what is known */
    Span *s5 = mkspan("q5", 15, S(62), MS(600));
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 1, (Span **)list(1, s5))),
                     0);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    shutdown_fx(&f);
    o = out_span(&f, "q5", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "shutdown");
    teardown(&f);
}

/* A slow span with 12 alike children: in the same batch (a service without profiles), and
 * arriving after the parent was parked. */
static void test_n_plus_one(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *parent = mkspan("GET /users", 1, S(2), MS(800));
    Span *kids[13];
    char stmt[13][64];
    for (int i = 0; i < 12; i++) {
        kids[i] = mkspan("pg.query", (uint8_t)(20 + i), S(2), MS(5));
        child_of(kids[i], parent);
        snprintf(stmt[i], sizeof(stmt[i]), "SELECT *  FROM prefs\n WHERE id = %d AND k = 'x%d'",
                 i * 7, i);
        set_attr(kids[i], "db.statement", stmt[i]);
    }
    kids[12] = parent;
    shown_long_ago(&f, "", "api-server");
    assert_int_equal(CT.consume_traces(f.c, traces_of("api-server", NULL, 13, (Span **)kids)), 0);
    Span *o = out_span(&f, "GET /users", NULL);
    assert_string_equal(astr(o, "hotspan.pattern"), "n_plus_one");
    assert_int_equal(attr(o, "hotspan.n_plus_one.count")->int_value, 12);
    assert_string_equal(astr(o, "hotspan.n_plus_one.statement"),
                        "SELECT * FROM prefs WHERE id = ? AND k = ?");
    assert_int_equal(o->n_attributes, 7); /* slow, reason, pattern x3, match, reason */
    /* children after a parked parent; 9 is under min_count 10, the 10th makes it */
    assert_int_equal(send_profiles(&f, NULL, userdb_normal(-60, -50)), 0);
    Span *p2 = mkspan("GET /prefs", 2, S(2), MS(800));
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 1, (Span **)list(1, p2))),
                     0);
    Span *k2[10];
    for (int i = 0; i < 10; i++) {
        k2[i] = mkspan("SELECT preferences", (uint8_t)(40 + i), S(2), MS(5));
        child_of(k2[i], p2);
    }
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 10, (Span **)k2)), 0);
    assert_int_equal(send_profiles(&f, NULL, userdb_slow(0, 10)), 0);
    o = out_span(&f, "GET /prefs", NULL);
    assert_string_equal(astr(o, "hotspan.pattern"), "n_plus_one");
    assert_int_equal(attr(o, "hotspan.n_plus_one.count")->int_value, 10);
    assert_string_equal(astr(o, "hotspan.n_plus_one.statement"), "SELECT preferences");
    teardown(&f);
}

/* A parked span keeps the N+1 group it had when it parked: while it waits for its profile,
 * other parents' children may fill the fragments' ring (CORR_FRAG_ENTRIES parents, a few
 * seconds at a gateway's rates) and push its own entry out. */
static void test_n_plus_one_outlives_the_ring(void **state)
{
    struct fx f;
    setup(&f, "{}");
    assert_int_equal(send_profiles(&f, NULL, userdb_normal(-60, -50)), 0);
    Span *p = mkspan("GET /prefs", 2, S(2), MS(800));
    Span *sp[11];
    for (int i = 0; i < 10; i++) {
        sp[i] = mkspan("SELECT preferences", (uint8_t)(40 + i), S(2), MS(5));
        child_of(sp[i], p);
    }
    sp[10] = p;
    assert_int_equal(CT.consume_traces(f.c, traces_of("user-db", NULL, 11, sp)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    enum { PER = 512, BATCHES = CORR_FRAG_ENTRIES / PER + 1 };
    for (uint32_t b = 0; b < BATCHES; b++) { /* one child each of PER other parents */
        Span *kids[PER];
        for (uint32_t i = 0; i < PER; i++) {
            kids[i] = mkspan("cache.get", 3, S(2), MS(1));
            uint8_t *parent = zalloc(8);
            uint32_t n = b * PER + i + 1;
            memcpy(parent, &n, sizeof(n));
            parent[7] = 0xab;
            kids[i]->parent_span_id = (ProtobufCBinaryData){8, parent};
        }
        assert_int_equal(CT.consume_traces(f.c, traces_of("api-server", NULL, PER, kids)), 0);
    }
    assert_int_equal(send_profiles(&f, NULL, userdb_slow(0, 10)), 0);
    Span *o = out_span(&f, "GET /prefs", NULL);
    assert_non_null(o);
    assert_non_null(attr(o, "hotspan.pattern")); /* the ring alone forgot it */
    assert_string_equal(astr(o, "hotspan.pattern"), "n_plus_one");
    assert_int_equal(attr(o, "hotspan.n_plus_one.count")->int_value, 10);
    assert_string_equal(astr(o, "hotspan.n_plus_one.statement"), "SELECT preferences");
    teardown(&f);
}

/* N+1 children are counted per tenant: spans of tenant b that name a span of tenant a as
 * their parent (trace context passed between the two tenants' services) never tell a's span
 * about b's statements; a's own children do. */
static void test_n_plus_one_per_tenant(void **state)
{
    struct fx f;
    setup(&f, "{labels: {trace_tenant: tenant.id}}");
    shown_long_ago(&f, "a", "a-svc"); /* the parent leaves at once: no profiles to wait for */
    Span *parent = mkspan("GET /orders", 1, S(2), MS(800));
    Span *kids[12];
    for (int i = 0; i < 12; i++) {
        kids[i] = mkspan("SELECT secret_b", (uint8_t)(20 + i), S(2), MS(5));
        child_of(kids[i], parent);
        set_attr(kids[i], "db.statement", "SELECT * FROM b_only WHERE id = 1");
    }
    assert_int_equal(CT.consume_traces(f.c, traces_of("b-svc", "b", 12, (Span **)kids)), 0);
    Span *mine[10];
    for (int i = 0; i < 10; i++) {
        mine[i] = mkspan("SELECT mine", (uint8_t)(40 + i), S(2), MS(5));
        child_of(mine[i], parent);
    }
    assert_int_equal(CT.consume_traces(f.c, traces_of("a-svc", "a", 10, (Span **)mine)), 0);
    assert_int_equal(
        CT.consume_traces(f.c, traces_of("a-svc", "a", 1, (Span **)list(1, parent))), 0);
    Span *o = out_span(&f, "GET /orders", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "hotspan.pattern"), "n_plus_one");
    assert_int_equal(attr(o, "hotspan.n_plus_one.count")->int_value, 10);
    assert_string_equal(astr(o, "hotspan.n_plus_one.statement"), "SELECT mine");
    teardown(&f);
}

/* A slow parent of `n` children of one name, child i carrying the attributes set_kid writes;
 * returns the parent as delivered (api-server has no profiles: annotated at once). */
static Span *n_plus_one_of(struct fx *f, const char *parent_name, uint8_t seed, int n,
                           void (*set_kid)(Span *kid, int i))
{
    Span *parent = mkspan(parent_name, seed, S(2), MS(800));
    Span **sp = zalloc((size_t)(n + 1) * sizeof(*sp));
    for (int i = 0; i < n; i++) {
        sp[i] = mkspan("pg.query", (uint8_t)(seed + 1 + i), S(2), MS(5));
        child_of(sp[i], parent);
        set_kid(sp[i], i);
    }
    sp[n] = parent;
    assert_int_equal(CT.consume_traces(f->c, traces_of("api-server", NULL, (size_t)n + 1, sp)), 0);
    return out_span(f, parent_name, NULL);
}

/* 70 texts of one statement */
static void kid_literal(Span *kid, int i)
{
    char *stmt = zalloc(64);
    snprintf(stmt, 64, "SELECT v FROM t WHERE id = %d", 1000 + i);
    set_attr(kid, "db.statement", stmt);
}

/* one of them again and again, after attributes full of the key's rare byte 'b' */
static void kid_repeat(Span *kid, int i)
{
    set_attr(kid, "b.bb", "bbbbbbbbbbbbbbbbbbb db.statemen");
    set_attr(kid, "db.statement", "SELECT v FROM t WHERE id = 1003");
}

/* a value that names the key, and no such attribute */
static void kid_mention(Span *kid, int i)
{
    set_attr(kid, "note", "has no db.statement");
}

/* N+1 statements are normalized once per distinct text and found past other attributes: the
 * counts and the statement written are those of every child's own statement. */
static void test_n_plus_one_statements(void **state)
{
    struct fx f;
    setup(&f, "{}");
    shown_long_ago(&f, "", "api-server");
    Span *o = n_plus_one_of(&f, "GET /a", 1, 70, kid_literal);
    assert_string_equal(astr(o, "hotspan.pattern"), "n_plus_one");
    assert_int_equal(attr(o, "hotspan.n_plus_one.count")->int_value, 70);
    assert_string_equal(astr(o, "hotspan.n_plus_one.statement"), "SELECT v FROM t WHERE id = ?");
    o = n_plus_one_of(&f, "GET /b", 101, 12, kid_repeat);
    assert_int_equal(attr(o, "hotspan.n_plus_one.count")->int_value, 12);
    assert_string_equal(astr(o, "hotspan.n_plus_one.statement"), "SELECT v FROM t WHERE id = ?");
    o = n_plus_one_of(&f, "GET /c", 151, 11, kid_mention); /* grouped by name only */
    assert_int_equal(attr(o, "hotspan.n_plus_one.count")->int_value, 11);
    assert_string_equal(astr(o, "hotspan.n_plus_one.statement"), "pg.query");
    teardown(&f);
}

/* Three parents whose children interleave, each parent's of one statement with a new literal
 * every time (300 texts, the statements remembered normalized being far fewer): every child
 * counts in its own parent's statement, none in another's. */
static void test_fragments_statements_interleaved(void **state)
{
    static const char *const kinds[3] = {"SELECT v FROM t WHERE id = %d",
                                         "UPDATE t SET v = %d WHERE k = 'x'",
                                         "DELETE FROM t WHERE id IN (%d, 2)"};
    static const char *const norm[3] = {"SELECT v FROM t WHERE id = ?",
                                        "UPDATE t SET v = ? WHERE k = ?",
                                        "DELETE FROM t WHERE id IN (?, ?)"};
    struct corr_stats stats = {0};
    stats.ev_fragment = &stats.dummy;
    struct corr_fragments fr;
    hs_corr_fragments_init(&fr, &stats);
    uint64_t th = hs_corr_fragments_tenant(HS_STR(""));
    struct hs_str trace = HS_STR("0123456789abcdef"),
                  parents[3] = {HS_STR("parent-a"), HS_STR("parent-b"), HS_STR("parent-c")};
    for (int i = 0; i < 300; i++) {
        char stmt[64];
        snprintf(stmt, sizeof(stmt), kinds[i % 3], 1000 + i);
        hs_corr_fragments_add(&fr, th, trace, parents[i % 3], HS_STR("pg.query"),
                              (struct hs_str){stmt, strlen(stmt)});
    }
    for (int k = 0; k < 3; k++) {
        struct corr_frag_best g = hs_corr_fragments_best(&fr, HS_STR(""), trace, parents[k]);
        assert_int_equal(g.count, 100);
        assert_true(g.stmt); /* a statement group as large as the name's wins */
        assert_string_equal(g.text, norm[k]);
    }
    hs_corr_fragments_free(&fr);
}

/* Relative slowness: 5 x the p50 of 20 earlier spans of the name; threshold 0 turns the
 * absolute bound off. */
static void test_latency_baseline_factor(void **state)
{
    struct fx f;
    setup(&f, "{slow: {threshold: 0, factor: 5, min_samples: 20}}");
    Span *sp[23];
    for (int i = 0; i < 20; i++)
        sp[i] = mkspan("GET /users", (uint8_t)i, S(1), MS(48));
    sp[20] = mkspan("GET /users", 20, S(2), MS(2000)); /* 21st: slow */
    shown_long_ago(&f, "", "api-server");
    assert_int_equal(CT.consume_traces(f.c, traces_of("api-server", NULL, 21, sp)), 0);
    assert_int_equal(metric(&f, "correlator_slow_spans_total", ""), 1);
    Span *o = NULL;
    ProtobufCAllocator alloc = hs_arena_pb_allocator(build_arena);
    Request *r = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        &alloc, f.traces.t[0]->len, f.traces.t[0]->data);
    Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = r->resource_spans[0]->scope_spans[0];
    assert_int_equal(ss->n_spans, 21);
    for (size_t i = 0; i < 20; i++)
        assert_int_equal(ss->spans[i]->n_attributes, 0);
    o = ss->spans[20];
    assert_string_equal(astr(o, "hotspan.slow.reason"), "5.0x p50 48ms");
    /* under 5 x 48 ms = 240 ms is not slow; the 19 spans before min_samples never were */
    Span *ok = mkspan("GET /users", 30, S(3), MS(239));
    assert_int_equal(CT.consume_traces(f.c, traces_of("api-server", NULL, 1, (Span **)list(1, ok))),
                     0);
    assert_int_equal(metric(&f, "correlator_slow_spans_total", ""), 1);
    teardown(&f);
}

static void test_index_bounds_and_evictions(void **state)
{
    struct fx f;
    setup(&f, "{limits: {max_services: 2}}");
    const char *svcs[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        const struct pstack st[] = {{{"x", "y"}, 5, NULL}};
        assert_int_equal(send_profiles(&f, NULL, mkprofile(svcs[i], 0, 10, st, 1)), 0);
    }
    assert_int_equal(metric(&f, "correlator_evictions_total", ",what=\"service\""), 1);
    struct correlator *c = hs_container_of(f.c, struct correlator, base);
    assert_null(hs_corr_index_find(&c->index, HS_STR(""), HS_STR("a")));
    assert_non_null(hs_corr_index_find(&c->index, HS_STR(""), HS_STR("c")));
    /* the same profile far in the past of its service: older than retention, not indexed */
    const struct pstack st[] = {{{"x", "y"}, 5, NULL}};
    assert_int_equal(send_profiles(&f, NULL, mkprofile("c", -3600, -3590, st, 1)), 0);
    assert_int_equal(metric(&f, "correlator_evictions_total", ",what=\"stale_profile\""), 1);
    /* services not seen for the retention leave */
    fake_now += 15 * 60 * 1000 + 1;
    hs_correlator_tick(f.c);
    assert_null(hs_corr_index_find(&c->index, HS_STR(""), HS_STR("c")));
    assert_int_equal(metric(&f, "correlator_evictions_total", ",what=\"service_expired\""), 2);
    teardown(&f);
}

/* Expiry runs on its own timer: with nothing parked (the memory_limiter refusing every span,
 * say), a service past retention still leaves. Waits for the real timer (CORR_HOUSEKEEP_MS). */
static void test_index_expires_with_nothing_parked(void **state)
{
    struct fx f;
    setup(&f, "{retention: 1m}");
    const struct pstack st[] = {{{"x", "y"}, 5, NULL}};
    assert_int_equal(send_profiles(&f, NULL, mkprofile("lonely", 0, 10, st, 1)), 0);
    struct correlator *c = hs_container_of(f.c, struct correlator, base);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    assert_non_null(hs_corr_index_find(&c->index, HS_STR(""), HS_STR("lonely")));
    fake_now += 60 * 1000 + 1;
    uv_handle_t *h = (uv_handle_t *)&c->housekeep;
    assert_false(uv_has_ref(h)); /* never keeps the loop alive on its own */
    uv_ref(h);                   /* here it must, so that UV_RUN_ONCE waits for it */
    uv_run(&f.loop, UV_RUN_ONCE);
    uv_unref(h);
    assert_null(hs_corr_index_find(&c->index, HS_STR(""), HS_STR("lonely")));
    assert_int_equal(metric(&f, "correlator_evictions_total", ",what=\"service_expired\""), 1);
    teardown(&f); /* and shutdown closes it: uv_loop_close would fail otherwise */
}

/* While a memory_limiter refuses data, each of its new readings sheds half the index, least
 * recently used services first; the same reading twice sheds once, and none when it accepts. */
static void test_index_shed_while_memory_limiter_refuses(void **state)
{
    struct fx f;
    setup(&f, "{}");
    struct correlator *c = hs_container_of(f.c, struct correlator, base);
    for (int i = 0; i < 16; i++) {
        const struct pstack st[] = {{{"x", "y"}, 5, NULL}};
        char name[16];
        snprintf(name, sizeof(name), "svc-%02d", i);
        struct hs_profile *p = mkprofile(name, 0, 10, st, 1);
        assert_non_null(hs_corr_index_add(&c->index, "", p, fake_now));
        hs_profile_free(p);
    }
    struct hs_health limiter = {0};
    hs_metrics_health(f.m, "memory_limiter", &limiter, &limiter);
    hs_correlator_housekeep(f.c); /* accepting: nothing goes */
    assert_int_equal(c->index.count, 16);
    hs_health_failed(&limiter, 5000, "over");
    limiter.over_memory_limit = true;
    size_t before = c->index.bytes;
    hs_correlator_housekeep(f.c);
    uint64_t shed = metric(&f, "correlator_evictions_total", ",what=\"service_shed\"");
    assert_true(shed >= 6 && shed <= 10);
    assert_int_equal(c->index.count, 16 - shed);
    assert_true(c->index.bytes <= before / 2);
    assert_null(hs_corr_index_find(&c->index, HS_STR(""), HS_STR("svc-00"))); /* oldest first */
    assert_non_null(hs_corr_index_find(&c->index, HS_STR(""), HS_STR("svc-15")));
    hs_correlator_housekeep(f.c); /* the same reading: its effect is not known yet */
    assert_int_equal(metric(&f, "correlator_evictions_total", ",what=\"service_shed\""), shed);
    hs_health_failed(&limiter, 6000, "still over");
    hs_correlator_housekeep(f.c);
    assert_true(metric(&f, "correlator_evictions_total", ",what=\"service_shed\"") > shed);
    hs_health_ok(&limiter, 7000);
    limiter.over_memory_limit = false;
    size_t left = c->index.count;
    hs_correlator_housekeep(f.c);
    assert_int_equal(c->index.count, left);
    hs_metrics_gauge_remove(f.m, &limiter);
    teardown(&f);
}

static void test_config_errors(void **state)
{
    const char *yaml = "{bucket: 1m, retention: 30s, top: 0, slow: {factor: -1}, nope: 1}";
    struct hs_config_doc doc = {0};
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(CT.create(doc.root, "processors.correlator", &c, &err), HS_EINVAL);
    assert_int_equal(err.count, 3); /* top, slow.factor, nope: cross checks wait for those */
    assert_non_null(strstr(err.lines[0], "processors.correlator"));
    hs_error_free(&err);
    hs_config_doc_free(&doc);
    yaml = "{bucket: 1m, retention: 30s}";
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), 0);
    assert_int_equal(CT.create(doc.root, "processors.correlator", &c, &err), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "retention (30000ms) is shorter than bucket (60000ms)"));
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

static void test_names_and_statements(void **state)
{
    char out[128];
    hs_corr_display_name("./app.js:findByEmail:54", out, sizeof(out));
    assert_string_equal(out, "findByEmail");
    hs_corr_display_name("main.(*UserRepository).findByEmail", out, sizeof(out));
    assert_string_equal(out, "UserRepository.findByEmail");
    hs_corr_display_name("com.acme.UserRepository.findByEmail", out, sizeof(out));
    assert_string_equal(out, "com.acme.UserRepository.findByEmail");
    hs_corr_display_name("C:main", out, sizeof(out));
    assert_string_equal(out, "C:main");
    /* Node's anonymous functions have colons in their names; ESM files have them in paths */
    hs_corr_display_name("./app.js:(anonymous:L#51:C#51):51", out, sizeof(out));
    assert_string_equal(out, "(anonymous:L#51:C#51)");
    hs_corr_display_name("file:///srv/app.mjs:loadPreferences:60", out, sizeof(out));
    assert_string_equal(out, "loadPreferences");
    struct hs_str in = HS_STR("  select a1, \"x\"\t from t2 where v in (1, 2.5, 'it''s')  ");
    hs_corr_normalize_statement(in, out, sizeof(out));
    assert_string_equal(out, "select a1, ? from t2 where v in (?, ?, ?)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_batch_passes_as_is),
        cmocka_unit_test(test_parked_until_profile_window_and_subtree),
        cmocka_unit_test(test_subtree_for_qualified_span_and_bare_function),
        cmocka_unit_test(test_exact_match_names_the_callees_of_the_span_function),
        cmocka_unit_test(test_exact_span_match),
        cmocka_unit_test(test_tenants_never_joined),
        cmocka_unit_test(test_authenticated_tenant_wins),
        cmocka_unit_test(test_released_by_max_wait),
        cmocka_unit_test(test_parked_bound_shutdown_and_backpressure),
        cmocka_unit_test(test_n_plus_one),
        cmocka_unit_test(test_n_plus_one_outlives_the_ring),
        cmocka_unit_test(test_n_plus_one_per_tenant),
        cmocka_unit_test(test_n_plus_one_statements),
        cmocka_unit_test(test_fragments_statements_interleaved),
        cmocka_unit_test(test_latency_baseline_factor),
        cmocka_unit_test(test_index_bounds_and_evictions),
        cmocka_unit_test(test_index_expires_with_nothing_parked),
        cmocka_unit_test(test_index_shed_while_memory_limiter_refuses),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_names_and_statements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
