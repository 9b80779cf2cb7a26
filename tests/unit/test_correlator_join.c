/* test_correlator_join.c: the join made right for what real SDKs send (issue 16): a service's
 * first profile is waited for (cold start) and a service that never sends one is not; exact
 * span matches in every profile type (wall, goroutines), shares from all of a span's samples
 * however many stacks, library frames summarised under the application function that calls
 * them, off-CPU spans explained by wall and mutex profiles, full names in attributes and
 * unambiguous ones on /ui. Profiles are built by hand (correlator_fixture.h). */
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

#define CPU_ID "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define WALL_ID "wall:wall:nanoseconds:wall:nanoseconds"
#define NODE_CPU_ID "wall:cpu:nanoseconds:wall:nanoseconds"
#define MUTEX_ID "mutex:delay:nanoseconds:contentions:count"
#define GOROUTINES_ID "goroutines:goroutine:count:goroutine:count"

static const struct pcol cpu_cols[] = {{"cpu", "nanoseconds", CPU_ID}};
/* Node's wall profile with wall.collectCpuTime (wire.md §5.5) */
static const struct pcol node_cols[] = {{"samples", "count", "wall:samples:count:wall:nanoseconds"},
                                        {"wall", "nanoseconds", WALL_ID},
                                        {"cpu", "nanoseconds", NODE_CPU_ID}};
static const struct pcol mutex_cols[] = {
    {"contentions", "count", "mutex:contentions:count:contentions:count"},
    {"delay", "nanoseconds", MUTEX_ID}};
static const struct pcol goroutine_cols[] = {{"goroutine", "count", GOROUTINES_ID}};
#define HEAP_ID "memory:inuse_space:bytes:inuse_space:bytes"
/* Node's heap profile (wire.md §5.5) */
static const struct pcol heap_cols[] = {{"inuse_objects", "count", "memory:inuse_objects:count"},
                                        {"inuse_space", "bytes", HEAP_ID}};

static struct correlator *corr(struct fx *f)
{
    return hs_container_of(f->c, struct correlator, base);
}

static uint64_t cold(struct fx *f, const char *outcome)
{
    char l[64];
    snprintf(l, sizeof(l), ",outcome=\"%s\"", outcome);
    return metric(f, "correlator_cold_start_total", l);
}

static int send_cols(struct fx *f, const char *service, const struct pcol *cols, uint32_t ncols,
                     const struct mstack *st, size_t n)
{
    return send_profiles(f, NULL, mkprofile_cols(service, 0, 10, cols, ncols, st, n));
}

static void consume(struct fx *f, const char *service, Span *s)
{
    assert_int_equal(CT.consume_traces(f->c, traces_of(service, NULL, 1, (Span **)list(1, s))), 0);
}

/* ---- cold start ------------------------------------------------------------------------- */

/* A slow span of a service that has sent no profile yet waits for its first one, past
 * max_wait (Node uploads every 60 s), and leaves annotated when it comes. */
static void test_cold_start_waits_for_the_first_profile(void **state)
{
    struct fx f;
    setup(&f, "{}"); /* max_wait 30s, first_profile_wait 75s */
    Span *s = mkspan("UserRepository.findByEmail", 1, S(2), MS(600));
    consume(&f, "user-db", s);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    assert_int_equal(f.traces.n, 0);
    fake_now += 40000; /* past max_wait: the first profile may still come */
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    const struct mstack st[] = {{{MAIN, HANDLE, FIND, LOADP}, {70}, NULL},
                                {{MAIN, HANDLE, "main.idle"}, {30}, NULL}};
    assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, st, 2), 0);
    /* the upload's other types may follow: it leaves once they are in */
    fake_now += CORR_SETTLE_MS - 1;
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    fake_now += 1;
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "window");
    assert_string_equal(alist(o, "profile.top_functions"), LOADP " 100%");
    assert_int_equal(cold(&f, "matched"), 1);
    assert_int_equal(cold(&f, "gave_up") + cold(&f, "unmatched") + cold(&f, "not_waited"), 0);
    assert_int_equal(metric(&f, "correlator_released_by_timeout_total", ""), 0);
    /* a service with profiles: its spans wait as always, not counted as a cold start */
    Span *s2 = mkspan("SELECT users", 2, S(9), MS(600));
    consume(&f, "user-db", s2);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    fake_now += 30000;
    hs_correlator_tick(f.c);
    assert_non_null(out_span(&f, "SELECT users", NULL));
    assert_int_equal(metric(&f, "correlator_released_by_timeout_total", ""), 1);
    assert_int_equal(cold(&f, "matched") + cold(&f, "unmatched") + cold(&f, "gave_up"), 1);
    teardown(&f);
}

/* A service that has shown for first_profile_wait without a profile is not waited for; a span
 * that parked before then waits until first seen + first_profile_wait, or max_wait after its
 * arrival when that is later. */
static void test_cold_start_gives_up_on_a_service_without_profiles(void **state)
{
    struct fx f;
    setup(&f, "{}");
    consume(&f, "api-server", mkspan("GET /a", 1, S(2), MS(600)));
    assert_int_equal(hs_correlator_parked(f.c), 1);
    fake_now += 70000;
    consume(&f, "api-server", mkspan("GET /b", 2, S(72), MS(600)));
    assert_int_equal(hs_correlator_parked(f.c), 2);
    fake_now += 4999;
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 2);
    fake_now += 1; /* 75 s after api-server's first span */
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    Span *o = out_span(&f, "GET /a", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "no_profiles_for_service");
    assert_int_equal(cold(&f, "gave_up"), 1);
    /* shown long enough: the next slow span leaves at once */
    consume(&f, "api-server", mkspan("GET /c", 3, S(77), MS(600)));
    assert_int_equal(hs_correlator_parked(f.c), 1);
    o = out_span(&f, "GET /c", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match_reason"), "no_profiles_for_service");
    assert_int_equal(cold(&f, "not_waited"), 1);
    /* GET /b arrived at 70 s: it waits its max_wait, to 100 s */
    fake_now += 24999;
    hs_correlator_tick(f.c);
    assert_null(out_span(&f, "GET /b", NULL));
    fake_now += 1;
    hs_correlator_tick(f.c);
    assert_non_null(out_span(&f, "GET /b", NULL));
    assert_int_equal(cold(&f, "gave_up"), 2);
    assert_int_equal(cold(&f, "matched"), 0);
    teardown(&f);
    /* first_profile_wait 0: only services that sent profiles are waited for */
    setup(&f, "{first_profile_wait: 0}");
    consume(&f, "api-server", mkspan("GET /a", 1, S(2), MS(600)));
    assert_int_equal(hs_correlator_parked(f.c), 0);
    assert_int_equal(cold(&f, "not_waited"), 1);
    teardown(&f);
}

/* A service made for a cold start may evict another at limits.max_services, even one an
 * earlier span of the same batch was to wait for: that span is annotated at once instead. */
static void test_cold_start_at_the_services_bound(void **state)
{
    struct fx f;
    setup(&f, "{limits: {max_services: 1}}");
    Request *r =
        request("svc-a", 1,
                (ScopeSpans **)list(
                    1, scope_spans("sc", 1, (Span **)list(1, mkspan("GET /a", 1, S(2), MS(600))))));
    Request *rb =
        request("svc-b", 1,
                (ScopeSpans **)list(
                    1, scope_spans("sc", 1, (Span **)list(1, mkspan("GET /b", 2, S(2), MS(600))))));
    r->n_resource_spans = 2;
    r->resource_spans = (ResourceSpans **)list(2, r->resource_spans[0], rb->resource_spans[0]);
    struct bytes b = pack(r);
    uint8_t *p = malloc(b.len);
    memcpy(p, b.p, b.len);
    assert_int_equal(CT.consume_traces(f.c, hs_traces_wrap(p, b.len, b.len, 2, 2)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    Span *o = out_span(&f, "GET /a", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match_reason"), "no_profiles_for_service");
    assert_null(out_span(&f, "GET /b", NULL));
    assert_int_equal(metric(&f, "correlator_evictions_total", ",what=\"service\""), 1);
    teardown(&f);
}

/* Node's first upload is a heap and a wall profile, two requests in either order: a span that
 * waited for the service's first profile leaves once both are in, not with the first. */
static void test_cold_start_settles_for_the_uploads_types(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("GET /report", 22, S(2), MS(600));
    consume(&f, "report-js", sp);
    const struct mstack heap[] = {{{"./app.js:(anonymous:L#1:C#1):1"}, {10, 4096}, NULL}};
    const struct mstack wall[] = {
        {{"./app.js:handle:9", "./app.js:render:70"}, {60, 600000000, 550000000}, sp->span_id.data},
        {{":(idle):0"}, {300, 3000000000, 0}, NULL}};
    assert_int_equal(send_cols(&f, "report-js", heap_cols, 2, heap, 1), 0);
    fake_now += 100;
    assert_int_equal(send_cols(&f, "report-js", node_cols, 3, wall, 2), 0);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    fake_now += CORR_SETTLE_MS;
    hs_correlator_tick(f.c);
    Span *o = out_span(&f, "GET /report", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(astr(o, "profile.type"), NODE_CPU_ID);
    assert_string_equal(alist(o, "profile.top_functions"), "./app.js:render:70 100%");
    assert_int_equal(cold(&f, "matched"), 1);
    teardown(&f);
}

/* ---- a service's upload period ---------------------------------------------------------- */

/* A service uploading every 60 s (Node's default flush), longer than max_wait (30 s): its
 * span waits for the upload expected to cover it, + a quarter period, at most max_wait_cap;
 * each longer wait is counted by how it ended. */
static void test_waits_for_the_next_upload_of_a_slow_uploader(void **state)
{
    struct fx f;
    setup(&f, "{}"); /* max_wait 30s, max_wait_cap 2m */
    const struct mstack idle[] = {{{":(idle):0"}, {300, 3000000000, 0}, NULL}};
    uint64_t t = fake_now;
    assert_int_equal(
        send_profiles(&f, NULL, mkprofile_cols("shop-js", -60, 0, node_cols, 3, idle, 1)), 0);
    fake_now = t + 10000;
    Span *sp = mkspan("POST /login", 23, S(8), MS(600));
    consume(&f, "shop-js", sp);
    fake_now = t + 41000; /* past max_wait: the next upload is due at 60 s */
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    const struct mstack st[] = {{{"./app.js:handle:9", "./app.js:verifyPassword:56"},
                                 {60, 600000000, 590000000},
                                 sp->span_id.data}};
    fake_now = t + 60000;
    assert_int_equal(send_profiles(&f, NULL, mkprofile_cols("shop-js", 0, 60, node_cols, 3, st, 1)),
                     0);
    Span *o = out_span(&f, "POST /login", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_int_equal(metric(&f, "correlator_extended_waits_total", ",outcome=\"profile\""), 1);
    assert_int_equal(metric(&f, "correlator_released_by_timeout_total", ""), 0);
    /* the next upload does not come: it leaves when it was due (120 s) + 15 s */
    Span *late = mkspan("GET /rates", 24, S(70), MS(600));
    fake_now = t + 72000;
    consume(&f, "shop-js", late);
    fake_now = t + 134999;
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    fake_now += 1;
    hs_correlator_tick(f.c);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    assert_string_equal(astr(out_span(&f, "GET /rates", NULL), "profile.match_reason"), "timeout");
    assert_int_equal(metric(&f, "correlator_extended_waits_total", ",outcome=\"timeout\""), 1);
    teardown(&f);

    /* max_wait_cap ends a wait before the upload is due; 0 keeps max_wait */
    const char *conf[] = {"{max_wait_cap: 50s}", "{max_wait_cap: 0}"};
    const uint64_t leaves[] = {60000, 40000};
    for (int i = 0; i < 2; i++) {
        setup(&f, conf[i]);
        t = fake_now;
        assert_int_equal(
            send_profiles(&f, NULL, mkprofile_cols("shop-js", -60, 0, node_cols, 3, idle, 1)), 0);
        fake_now = t + 10000;
        consume(&f, "shop-js", mkspan("POST /login", 23, S(8), MS(600)));
        fake_now = t + leaves[i] - 1;
        hs_correlator_tick(f.c);
        assert_int_equal(hs_correlator_parked(f.c), 1);
        fake_now += 1;
        hs_correlator_tick(f.c);
        assert_int_equal(hs_correlator_parked(f.c), 0);
        assert_int_equal(metric(&f, "correlator_extended_waits_total", ",outcome=\"capped\""),
                         i == 0 ? 1 : 0);
        teardown(&f);
    }
}

/* Every 60 s Node sends its heap and its wall profile: the span waits for both, although both
 * types last came longer than max_wait ago, so that the heap does not release it alone. */
static void test_steady_state_waits_for_every_type(void **state)
{
    struct fx f;
    setup(&f, "{}");
    const struct mstack heap[] = {{{"./app.js:(anonymous:L#1:C#1):1"}, {10, 4096}, NULL}};
    const struct mstack idle[] = {{{":(idle):0"}, {300, 3000000000, 0}, NULL}};
    uint64_t t = fake_now;
    assert_int_equal(
        send_profiles(&f, NULL, mkprofile_cols("shop-js", -60, 0, heap_cols, 2, heap, 1)), 0);
    assert_int_equal(
        send_profiles(&f, NULL, mkprofile_cols("shop-js", -60, 0, node_cols, 3, idle, 1)), 0);
    fake_now = t + 10000;
    Span *sp = mkspan("POST /login", 25, S(8), MS(600));
    consume(&f, "shop-js", sp);
    fake_now = t + 60000;
    assert_int_equal(
        send_profiles(&f, NULL, mkprofile_cols("shop-js", 0, 60, heap_cols, 2, heap, 1)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 1); /* the wall profile is still to come */
    const struct mstack st[] = {{{"./app.js:handle:9", "./app.js:verifyPassword:56"},
                                 {60, 600000000, 590000000},
                                 sp->span_id.data}};
    fake_now += 50;
    assert_int_equal(send_profiles(&f, NULL, mkprofile_cols("shop-js", 0, 60, node_cols, 3, st, 1)),
                     0);
    Span *o = out_span(&f, "POST /login", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(astr(o, "profile.type"), NODE_CPU_ID);
    teardown(&f);
}

/* ---- every type, exact first ------------------------------------------------------------ */

/* Node: the span's own samples are in the wall column only (it never ran on CPU), another
 * span's are on CPU: an exact wall match, and a CPU share of 0. */
static void test_exact_match_in_wall_when_cpu_has_none(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("GET /report", 3, S(2), MS(600));
    Span *other = mkspan("GET /other", 4, S(2), MS(100));
    const struct mstack st[] = {
        {{"./app.js:handle:9", "./app.js:waitForDisk:44"}, {54, 540000000, 0}, sp->span_id.data},
        {{"./app.js:handle:9", "./app.js:render:70"},
         {10, 100000000, 90000000},
         other->span_id.data},
        {{":(idle):0"}, {300, 3000000000, 0}, NULL},
    };
    assert_int_equal(send_cols(&f, "report-js", node_cols, 3, st, HS_ARRAY_SIZE(st)), 0);
    consume(&f, "report-js", sp);
    Span *o = out_span(&f, "GET /report", NULL);
    assert_non_null(o);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(astr(o, "profile.type"), WALL_ID);
    assert_string_equal(astr(o, "pyroscope.profile.id"), "6768696a6b6c6d6e");
    assert_string_equal(alist(o, "profile.top_functions"), "./app.js:waitForDisk:44 100%");
    assert_true(attr(o, "profile.cpu_share")->double_value == 0.0);
    /* it waited: profile.offcpu.* says where, whichever type matched first (here the same) */
    assert_string_equal(astr(o, "profile.offcpu.type"), WALL_ID);
    assert_string_equal(astr(o, "profile.offcpu.match"), "span");
    assert_string_equal(alist(o, "profile.offcpu.top_functions"), "./app.js:waitForDisk:44 100%");
    teardown(&f);
}

/* Go: CPU samples carry no span labels; the goroutine profile's do (pprof labels). */
static void test_exact_match_in_goroutine_profile(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("Queue.consume", 5, S(2), MS(900));
    const struct mstack cpu[] = {{{MAIN, "main.loop"}, {50000000}, NULL}};
    const struct mstack gor[] = {
        {{HANDLE, "main.(*Queue).wait", "runtime.gopark"}, {3}, sp->span_id.data},
        {{MAIN, "main.loop"}, {7}, NULL},
    };
    assert_int_equal(send_cols(&f, "worker", cpu_cols, 1, cpu, 1), 0);
    assert_int_equal(send_cols(&f, "worker", goroutine_cols, 1, gor, 2), 0);
    consume(&f, "worker", sp);
    Span *o = out_span(&f, "Queue.consume", NULL);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(astr(o, "profile.type"), GOROUTINES_ID);
    assert_string_equal(alist(o, "profile.top_functions"), "main.(*Queue).wait 100% (in runtime)");
    assert_string_equal(astr(o, "profile.hot_path"),
                        HANDLE " > main.(*Queue).wait > runtime.gopark");
    assert_null(attr(o, "profile.cpu_share")); /* the CPU profile labels no span */
    /* matched in a profile of waiting: it waited, and profile.offcpu.* says where */
    assert_string_equal(astr(o, "profile.offcpu.type"), GOROUTINES_ID);
    assert_string_equal(astr(o, "profile.offcpu.match"), "span");
    assert_string_equal(alist(o, "profile.offcpu.top_functions"),
                        "main.(*Queue).wait 100% (in runtime)");
    teardown(&f);
}

/* Go: a request blocked on a lock that a goroutine it started holds (sleeping); the goroutine
 * profile caught both, labelled with the span (labels are inherited), and its CPU profile, which
 * labels spans, has none of its samples. Every frame of a waiting stack holds the same count:
 * the function nearest the leaf is named, not the handlers above it, and a library function
 * (time.Sleep) is never listed in the application's place. */
static void test_goroutine_wait_names_the_waiting_function(void **state)
{
    struct fx f;
    setup(&f, "{top: 5}");
    Span *sp = mkspan("GET /prices", 26, S(2), MS(600));
    Span *other = mkspan("GET /report", 27, S(2), MS(600));
    const struct mstack cpu[] = {{{HANDLE, "main.buildReport"}, {300000000}, other->span_id.data},
                                 {{MAIN, "main.idle"}, {1000000000}, NULL}};
    const struct mstack gor[] = {
        {{"main.(*PriceCache).rebuild", "time.Sleep", "runtime.gopark"}, {1}, sp->span_id.data},
        {{"net/http.(*conn).serve", "main.(*app).serve", "runtime/pprof.Do",
          "main.(*app).serve.func1", "main.(*app).handlePrices.func1", "main.(*PriceCache).lookup",
          "main.(*PriceCache).Get", "sync.(*Mutex).Lock", "sync.runtime_SemacquireMutex",
          "runtime.gopark"},
         {1},
         sp->span_id.data},
        {{MAIN, "main.idle"}, {5}, NULL},
    };
    assert_int_equal(send_cols(&f, "shop", cpu_cols, 1, cpu, 2), 0);
    assert_int_equal(send_cols(&f, "shop", goroutine_cols, 1, gor, 3), 0);
    consume(&f, "shop", sp);
    Span *o = out_span(&f, "GET /prices", NULL);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(astr(o, "profile.type"), GOROUTINES_ID);
    const char *want = "main.(*PriceCache).Get 50% (in sync) | "
                       "main.(*PriceCache).rebuild 50% (in time)";
    assert_string_equal(alist(o, "profile.top_functions"), want);
    assert_true(attr(o, "profile.cpu_share")->double_value == 0.0);
    /* the match is a profile of waiting: profile.offcpu.* says the same */
    assert_string_equal(astr(o, "profile.offcpu.type"), GOROUTINES_ID);
    assert_string_equal(astr(o, "profile.offcpu.match"), "span");
    assert_string_equal(alist(o, "profile.offcpu.top_functions"), want);
    teardown(&f);
}

/* In a goroutine profile a function is ranked by the samples it is the deepest application
 * frame of: the handler is the deepest of the few running stacks, but every parked stack passes
 * through it too, and ranking it by its total (100%) would name the handler, not the client
 * call the request was parked in (the demo's api-server). */
static void test_goroutine_wait_ranks_by_deepest_frame(void **state)
{
    struct fx f;
    setup(&f, "{top: 3}");
    Span *sp = mkspan("GET /users/:id", 28, S(2), MS(600));
    const struct mstack gor[] = {
        {{"main.serve", "main.getUser"}, {3}, sp->span_id.data},
        {{"main.serve", "main.getUser", "main.(*UserClient).fetch", "net/http.(*Client).Do",
          "runtime.selectgo", "runtime.gopark"},
         {57},
         sp->span_id.data},
        {{MAIN, "main.idle"}, {5}, NULL},
    };
    assert_int_equal(send_cols(&f, "api", goroutine_cols, 1, gor, 3), 0);
    consume(&f, "api", sp);
    Span *o = out_span(&f, "GET /users/:id", NULL);
    assert_string_equal(astr(o, "profile.offcpu.type"), GOROUTINES_ID);
    assert_string_equal(alist(o, "profile.offcpu.top_functions"),
                        "main.(*UserClient).fetch 95% (in net/http) | main.getUser 5%");
    teardown(&f);
}

/* A wall profile without CPU time (@pyroscope/nodejs without collectCpuTime) holds CPU time
 * too: its match is ranked as a CPU one (callers with their callees), and alone it does not say
 * that the span waited. */
static void test_wall_only_profile_ranks_like_cpu(void **state)
{
    static const struct pcol wall_cols[] = {{"wall", "nanoseconds", WALL_ID}};
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("UserRepository.findByEmail", 29, S(2), MS(600));
    const struct mstack st[] = {
        {{"./app.js:handle:9", "./app.js:findByEmail:70", "./app.js:loadPreferences:60",
          "./app.js:spin:47"},
         {540000000},
         sp->span_id.data},
        {{"./app.js:handle:9", "./app.js:findByEmail:70", "./app.js:loadUsers:55",
          "./app.js:spin:47"},
         {60000000},
         sp->span_id.data},
    };
    assert_int_equal(send_cols(&f, "users-js", wall_cols, 1, st, 2), 0);
    consume(&f, "users-js", sp);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_string_equal(astr(o, "profile.type"), WALL_ID);
    assert_string_equal(alist(o, "profile.top_functions"),
                        "./app.js:spin:47 100% | ./app.js:loadPreferences:60 90% | "
                        "./app.js:loadUsers:55 10%");
    assert_null(attr(o, "profile.cpu_share"));
    assert_null(attr(o, "profile.offcpu.type"));
    teardown(&f);
}

/* The trunk's deepest frame stays listed when recursion put it higher in the trunk too: a
 * report renders sections recursively (renderSection > renderSection > scoreRow). */
static void test_trunk_keeps_a_recursive_frame(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("GET /report", 28, S(2), MS(600));
#define RS "main.renderSection"
    const struct mstack st[] = {
        {{HANDLE, "main.buildReport", RS, "main.scoreRow"}, {5000000}, sp->span_id.data},
        {{HANDLE, "main.buildReport", RS, RS, "main.scoreRow"}, {57000000}, sp->span_id.data},
        {{HANDLE, "main.buildReport", RS, RS, "main.formatRow"}, {38000000}, sp->span_id.data},
    };
#undef RS
    assert_int_equal(send_cols(&f, "shop", cpu_cols, 1, st, 3), 0);
    consume(&f, "shop", sp);
    Span *o = out_span(&f, "GET /report", NULL);
    assert_string_equal(alist(o, "profile.top_functions"),
                        "main.renderSection 100% | main.scoreRow 62% | main.formatRow 38%");
    teardown(&f);
}

/* ---- exact means exact ------------------------------------------------------------------ */

static char leaf_names[100][24];

/* A span with 100 distinct stacks (more than CORR_SPAN_STACKS), sent in two profiles:
 * loadPreferences holds 60 stacks of 3 ms, hashPassword 40 of 2 ms. Kept stacks alone would
 * give hashPassword 3%; its samples say 31%. */
static void test_shares_come_from_all_samples(void **state)
{
    struct fx f;
    setup(&f, "{top: 2}");
    Span *sp = mkspan("UserRepository.findByEmail", 6, S(2), MS(600));
    const uint8_t *id = sp->span_id.data;
    struct mstack st[2][51];
    size_t n[2] = {0, 0};
    for (int i = 0; i < 100; i++) {
        snprintf(leaf_names[i], sizeof(leaf_names[i]), "main.work%02d", i);
        bool hash = i >= 60;
        st[i % 2][n[i % 2]++] = (struct mstack){
            {HANDLE, FIND, hash ? "main.(*UserRepository).hashPassword" : LOADP, leaf_names[i]},
            {hash ? 2000000 : 3000000},
            id};
    }
    st[1][n[1]++] = (struct mstack){{MAIN, "main.idle"}, {500000000}, NULL};
    assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, st[0], n[0]), 0);
    assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, st[1], n[1]), 0);
    consume(&f, "user-db", sp);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(alist(o, "profile.top_functions"),
                        LOADP " 69% | main.(*UserRepository).hashPassword 31%");
    assert_true(fabs(attr(o, "profile.cpu_share")->double_value - 260.0 / 600.0) < 1e-12);
    /* the hot path and flame graph come from the kept stacks: the heaviest 64 */
    assert_string_equal(astr(o, "profile.hot_path"), HANDLE " > " FIND " > " LOADP);
    const struct corr_ui_entry *e = hs_corr_ui_get(&corr(&f)->ui, 0);
    assert_int_equal(e->nstacks, CORR_SPAN_STACKS);
    assert_int_equal(e->total, 260000000);
    teardown(&f);
}

/* ---- the code the user owns ------------------------------------------------------------- */

static void test_library_frames_summarised_under_their_caller(void **state)
{
    struct fx f;
    setup(&f, "{}");
    /* Go: loadPreferences spends its time hashing (standard library) */
    Span *go = mkspan("UserRepository.findByEmail", 7, S(2), MS(600));
    const struct mstack gst[] = {
        {{HANDLE, FIND, LOADP, "crypto/sha256.Sum256", "crypto/sha256.block"},
         {88000000},
         go->span_id.data},
        {{HANDLE, FIND, LOADP}, {10000000}, go->span_id.data},
        {{HANDLE, FIND, "runtime.mallocgc"}, {2000000}, go->span_id.data},
    };
    assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, gst, HS_ARRAY_SIZE(gst)), 0);
    consume(&f, "user-db", go);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_string_equal(alist(o, "profile.top_functions"), LOADP " 98% (in crypto/sha256)");
    assert_string_equal(astr(o, "profile.hot_path"),
                        HANDLE " > " FIND " > " LOADP " > crypto/sha256.Sum256");
    /* Node: a third-party driver and the garbage collector */
    Span *js = mkspan("GET /prefs", 8, S(2), MS(600));
    const struct mstack jst[] = {
        {{"./app.js:handle:9", "./app.js:loadPreferences:60",
          "./node_modules/pg/lib/client.js:query:120",
          "./node_modules/pg/lib/connection.js:send:40"},
         {70},
         js->span_id.data},
        {{"./app.js:handle:9", "./app.js:loadPreferences:60", "./app.js:merge:80"},
         {20},
         js->span_id.data},
        {{"./app.js:handle:9", ":(garbage collector):0"}, {10}, js->span_id.data},
    };
    assert_int_equal(send_cols(&f, "prefs-js", cpu_cols, 1, jst, HS_ARRAY_SIZE(jst)), 0);
    consume(&f, "prefs-js", js);
    o = out_span(&f, "GET /prefs", NULL);
    assert_string_equal(alist(o, "profile.top_functions"),
                        "./app.js:loadPreferences:60 90% (in node_modules/pg) | "
                        "./app.js:merge:80 20%");
    /* no application frame at all: the library functions are named */
    Span *lib = mkspan("GET /health", 9, S(2), MS(600));
    const struct mstack lst[] = {
        {{"net/http.(*conn).serve", "net/http.HandlerFunc.ServeHTTP", "encoding/json.Marshal"},
         {10},
         lib->span_id.data}};
    assert_int_equal(send_cols(&f, "health", cpu_cols, 1, lst, 1), 0);
    consume(&f, "health", lib);
    o = out_span(&f, "GET /health", NULL);
    assert_string_equal(alist(o, "profile.top_functions"), "encoding/json.Marshal 100%");
    teardown(&f);
}

/* library_frames: the user's own patterns, beside the defaults; a bad one is a config error. */
static void test_library_frames_config(void **state)
{
    const char *yaml[] = {"{}", "{library_frames: ['github.com/acme/codec.']}"};
    const char *want[] = {LOADP " 100% | github.com/acme/codec.Encode 80%",
                          LOADP " 100% (in github.com/acme/codec)"};
    for (int i = 0; i < 2; i++) {
        struct fx f;
        setup(&f, yaml[i]);
        Span *sp = mkspan("UserRepository.findByEmail", 14, S(2), MS(600));
        const struct mstack st[] = {
            {{HANDLE, FIND, LOADP, "github.com/acme/codec.Encode"}, {80}, sp->span_id.data},
            {{HANDLE, FIND, LOADP}, {20}, sp->span_id.data},
        };
        assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, st, 2), 0);
        consume(&f, "user-db", sp);
        assert_string_equal(
            alist(out_span(&f, "UserRepository.findByEmail", NULL), "profile.top_functions"),
            want[i]);
        teardown(&f);
    }
    const char *bad = "{library_frames: ['a*b']}";
    struct hs_config_doc doc;
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", bad, strlen(bad), &doc, &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(CT.create(doc.root, "processors.correlator", &c, &err), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "processors.correlator.library_frames"));
    assert_non_null(strstr(err.lines[0], "\"a*b\""));
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

/* ---- off CPU ---------------------------------------------------------------------------- */

/* Go: the span ran 20 ms of its 600 on CPU; the mutex profile (no labels) has contention
 * under its function. */
static void test_offcpu_mutex(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("UserRepository.findByEmail", 10, S(2), MS(600));
    const struct mstack cpu[] = {
        {{HANDLE, FIND, "main.(*UserRepository).decode"}, {20000000}, sp->span_id.data},
        {{MAIN, "main.idle"}, {100000000}, NULL},
    };
    const struct mstack mtx[] = {
        {{HANDLE, FIND, "main.(*Cache).get", "sync.(*Mutex).Unlock"}, {4, 450000000}, NULL},
        {{MAIN, "main.(*Cache).refresh", "sync.(*Mutex).Unlock"}, {1, 150000000}, NULL},
    };
    assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, cpu, 2), 0);
    assert_int_equal(send_cols(&f, "user-db", mutex_cols, 2, mtx, 2), 0);
    consume(&f, "user-db", sp);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_string_equal(astr(o, "profile.type"), CPU_ID);
    assert_string_equal(alist(o, "profile.top_functions"), "main.(*UserRepository).decode 100%");
    assert_true(fabs(attr(o, "profile.cpu_share")->double_value - 20.0 / 600.0) < 1e-12);
    assert_string_equal(astr(o, "profile.offcpu.type"), MUTEX_ID);
    assert_string_equal(astr(o, "profile.offcpu.match"), "window");
    assert_string_equal(alist(o, "profile.offcpu.top_functions"),
                        "main.(*Cache).get 100% (in sync)");
    assert_string_equal(astr(o, "profile.offcpu.hot_path"),
                        FIND " > main.(*Cache).get > sync.(*Mutex).Unlock");
    /* /ui shows it too */
    const struct corr_ui_entry *e = hs_corr_ui_get(&corr(&f)->ui, 0);
    assert_string_equal(e->off_type, MUTEX_ID);
    assert_int_equal(e->off_ntop, 1);
    assert_string_equal(e->names[e->off_top[0].name], "Cache.get");
    assert_string_equal(e->off_top[0].lib, "sync");
    /* a span mostly on CPU is not given an off-CPU explanation */
    Span *busy = mkspan("findByEmail", 11, S(2), MS(600));
    const struct mstack bst[] = {{{HANDLE, FIND, LOADP}, {550000000}, busy->span_id.data}};
    assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, bst, 1), 0);
    consume(&f, "user-db", busy);
    o = out_span(&f, "findByEmail", NULL);
    assert_string_equal(astr(o, "profile.match"), "span");
    assert_true(attr(o, "profile.cpu_share")->double_value > 0.9);
    assert_null(attr(o, "profile.offcpu.type"));
    teardown(&f);
}

/* Go: a root span blocked on a lock has no CPU samples of its own, while other spans' are
 * labelled and cover it: it was off CPU (cpu_share 0), and what other requests burned in the
 * window is not its explanation: the mutex window is, as its match and off CPU. A child span,
 * whose samples carry its root's id, keeps the CPU window (a guess) beside the mutex one. */
static void test_offcpu_span_without_cpu_samples(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("GET /prices", 17, S(2), MS(600));
    Span *other = mkspan("GET /report", 18, S(2), MS(600));
    const struct mstack cpu[] = {{{HANDLE, "main.buildReport"}, {300000000}, other->span_id.data},
                                 {{MAIN, "main.idle"}, {1000000000}, NULL}};
    const struct mstack mtx[] = {
        {{MAIN, "main.(*PriceCache).rebuild", "sync.(*Mutex).Unlock"}, {1, 400000000}, NULL}};
    assert_int_equal(send_cols(&f, "shop", cpu_cols, 1, cpu, 2), 0);
    assert_int_equal(send_cols(&f, "shop", mutex_cols, 2, mtx, 1), 0);
    consume(&f, "shop", sp);
    Span *o = out_span(&f, "GET /prices", NULL);
    assert_string_equal(astr(o, "profile.match"), "window");
    assert_string_equal(astr(o, "profile.type"), MUTEX_ID);
    assert_string_equal(alist(o, "profile.top_functions"),
                        "main.(*PriceCache).rebuild 100% (in sync)");
    assert_true(attr(o, "profile.cpu_share")->double_value == 0.0);
    assert_string_equal(astr(o, "profile.offcpu.type"), MUTEX_ID);
    assert_string_equal(astr(o, "profile.offcpu.match"), "window");
    assert_string_equal(alist(o, "profile.offcpu.top_functions"),
                        "main.(*PriceCache).rebuild 100% (in sync)");
    /* under a remote parent, pyroscope.profile.id (otel-profiling-go) says its id labels */
    Span *remote = mkspan("GET /prices?remote", 19, S(3), MS(600));
    child_of(remote, other);
    set_attr(remote, "pyroscope.profile.id", "7778797A7B7C7D7E"); /* either case */
    consume(&f, "shop", remote);
    o = out_span(&f, "GET /prices?remote", NULL);
    assert_string_equal(astr(o, "profile.type"), MUTEX_ID);
    assert_true(attr(o, "profile.cpu_share")->double_value == 0.0);
    /* another id there does not say so */
    Span *other_id = mkspan("GET /prices?other", 21, S(3), MS(600));
    child_of(other_id, other);
    set_attr(other_id, "pyroscope.profile.id", "7778797a7b7c7d7e");
    consume(&f, "shop", other_id);
    assert_string_equal(astr(out_span(&f, "GET /prices?other", NULL), "profile.type"), CPU_ID);
    /* a child: its CPU is in its root's samples; its CPU window is a guess, said as one */
    Span *child = mkspan("PriceCache.Get", 20, S(2), MS(500));
    child_of(child, other);
    consume(&f, "shop", child);
    o = out_span(&f, "PriceCache.Get", NULL);
    assert_string_equal(astr(o, "profile.match"), "window");
    assert_string_equal(astr(o, "profile.type"), CPU_ID);
    assert_null(attr(o, "profile.cpu_share"));
    assert_string_equal(astr(o, "profile.offcpu.type"), MUTEX_ID);
    teardown(&f);
    /* nothing of waiting covers it: none, rather than other spans' functions */
    setup(&f, "{}");
    sp = mkspan("GET /prices", 17, S(2), MS(600));
    other = mkspan("GET /report", 18, S(2), MS(600));
    const struct mstack cpu2[] = {{{HANDLE, "main.buildReport"}, {300000000}, other->span_id.data}};
    assert_int_equal(send_cols(&f, "shop", cpu_cols, 1, cpu2, 1), 0);
    consume(&f, "shop", sp);
    o = out_span(&f, "GET /prices", NULL);
    assert_string_equal(astr(o, "profile.match"), "none");
    assert_string_equal(astr(o, "profile.match_reason"), "no_samples_of_span");
    assert_true(attr(o, "profile.cpu_share")->double_value == 0.0);
    assert_null(attr(o, "profile.top_functions"));
    teardown(&f);
}

/* pyroscope-go uploads cpu, then mutex, ... one request each: a span leaves once every type the
 * service uploads covers it, so the mutex profile of the same upload can explain it; a type
 * not uploaded for max_wait is not waited for. */
static void test_release_waits_for_every_type(void **state)
{
    struct fx f;
    setup(&f, "{}");
    const struct mstack idle[] = {{{MAIN, "main.idle"}, {100000000, 0}, NULL}};
    const struct mstack quiet[] = {{{MAIN, "main.idle"}, {1, 1000}, NULL}};
    assert_int_equal(
        send_profiles(&f, NULL, mkprofile_cols("user-db", -20, -10, cpu_cols, 1, idle, 1)), 0);
    assert_int_equal(
        send_profiles(&f, NULL, mkprofile_cols("user-db", -20, -10, mutex_cols, 2, quiet, 1)), 0);
    Span *sp = mkspan("UserRepository.findByEmail", 15, S(2), MS(600));
    consume(&f, "user-db", sp);
    assert_int_equal(hs_correlator_parked(f.c), 1);
    const struct mstack cpu[] = {{{HANDLE, FIND}, {30000000}, sp->span_id.data}};
    assert_int_equal(send_cols(&f, "user-db", cpu_cols, 1, cpu, 1), 0);
    assert_int_equal(hs_correlator_parked(f.c), 1); /* the mutex profile is still to come */
    const struct mstack mtx[] = {
        {{HANDLE, FIND, "main.(*Cache).get", "sync.(*Mutex).Unlock"}, {4, 450000000}, NULL}};
    assert_int_equal(send_cols(&f, "user-db", mutex_cols, 2, mtx, 1), 0);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    Span *o = out_span(&f, "UserRepository.findByEmail", NULL);
    assert_string_equal(astr(o, "profile.offcpu.type"), MUTEX_ID);
    /* the service stops uploading mutex profiles: CPU alone releases its spans */
    Span *sp2 = mkspan("findByEmail", 16, S(12), MS(600));
    consume(&f, "user-db", sp2);
    fake_now += 30001;
    assert_int_equal(hs_correlator_parked(f.c), 1);
    assert_int_equal(
        send_profiles(&f, NULL, mkprofile_cols("user-db", 10, 20, cpu_cols, 1, cpu, 1)), 0);
    assert_int_equal(hs_correlator_parked(f.c), 0);
    teardown(&f);
}

/* Node: a span blocked 540 ms of 600 in synchronous I/O: its wall samples say where. */
static void test_offcpu_node_wall(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("GET /report", 12, S(2), MS(600));
    const struct mstack st[] = {
        {{"./app.js:handle:9", "./app.js:loadReport:30", "./app.js:readConfig:44"},
         {54, 540000000, 0},
         sp->span_id.data},
        {{"./app.js:handle:9", "./app.js:loadReport:30", "./app.js:render:70"},
         {6, 60000000, 55000000},
         sp->span_id.data},
        {{":(idle):0"}, {300, 3000000000, 0}, NULL},
    };
    assert_int_equal(send_cols(&f, "report-js", node_cols, 3, st, HS_ARRAY_SIZE(st)), 0);
    consume(&f, "report-js", sp);
    Span *o = out_span(&f, "GET /report", NULL);
    assert_string_equal(astr(o, "profile.type"), NODE_CPU_ID); /* CPU first */
    assert_string_equal(alist(o, "profile.top_functions"), "./app.js:render:70 100%");
    assert_true(fabs(attr(o, "profile.cpu_share")->double_value - 55.0 / 600.0) < 1e-12);
    assert_string_equal(astr(o, "profile.offcpu.type"), WALL_ID);
    assert_string_equal(astr(o, "profile.offcpu.match"), "span");
    assert_string_equal(alist(o, "profile.offcpu.top_functions"),
                        "./app.js:readConfig:44 90% | ./app.js:render:70 10%");
    assert_string_equal(astr(o, "profile.offcpu.hot_path"),
                        "./app.js:handle:9 > ./app.js:loadReport:30 > ./app.js:readConfig:44");
    teardown(&f);
}

/* A client's broken delta profile (a stack counted twice by its key: a negative delay) counts
 * as no samples there: shares stay within 100%, and the index and the matching scratch stay
 * sound for what comes after (an ASan build reads out of bounds otherwise). */
static void test_negative_values_count_as_none(void **state)
{
    struct fx f;
    setup(&f, "{}");
    const struct mstack cpu[] = {{{MAIN, "main.idle"}, {100000000}, NULL}};
    const struct mstack mtx[] = {
        {{MAIN, "main.(*PriceCache).rebuild", "sync.(*Mutex).Unlock"}, {1, 400000000}, NULL},
        {{MAIN, "main.(*Report).deep", "sync.(*Mutex).Unlock"}, {-1, -300000000}, NULL},
    };
    assert_int_equal(send_cols(&f, "shop", cpu_cols, 1, cpu, 1), 0);
    assert_int_equal(send_cols(&f, "shop", mutex_cols, 2, mtx, 2), 0);
    const char *want[] = {"main.(*PriceCache).rebuild 100% (in sync)",
                          "main.(*PriceCache).rebuild 50% (in sync) | "
                          "main.(*Report).deep 50% (in sync)"};
    for (int i = 0; i < 2; i++) {
        Span *sp = mkspan(i ? "GET /b" : "GET /a", (uint8_t)(30 + i), S(2), MS(600));
        consume(&f, "shop", sp);
        Span *o = out_span(&f, i ? "GET /b" : "GET /a", NULL);
        assert_string_equal(astr(o, "profile.offcpu.type"), MUTEX_ID);
        assert_string_equal(alist(o, "profile.offcpu.top_functions"), want[i]);
        /* the function given a negative value comes again, with a positive one */
        const struct mstack again[] = {
            {{MAIN, "main.(*Report).deep", "sync.(*Mutex).Unlock"}, {1, 400000000}, NULL}};
        assert_int_equal(send_cols(&f, "shop", mutex_cols, 2, again, 1), 0);
    }
    teardown(&f);
}

/* ---- names ------------------------------------------------------------------------------ */

/* Attributes carry names as the profiler wrote them; /ui shortens them, but not two functions
 * into one name. */
static void test_full_names_and_unambiguous_display(void **state)
{
    struct fx f;
    setup(&f, "{}");
    Span *sp = mkspan("GET /twins", 13, S(2), MS(600));
    const struct mstack st[] = {
        {{"./main.js:handle:1", "./a.js:flush:10"}, {60}, sp->span_id.data},
        {{"./main.js:handle:1", "./b.js:flush:20"}, {30}, sp->span_id.data},
        {{"./main.js:handle:1", "./main.js:render:30"}, {10}, sp->span_id.data},
    };
    assert_int_equal(send_cols(&f, "twins-js", cpu_cols, 1, st, HS_ARRAY_SIZE(st)), 0);
    consume(&f, "twins-js", sp);
    Span *o = out_span(&f, "GET /twins", NULL);
    assert_string_equal(alist(o, "profile.top_functions"),
                        "./a.js:flush:10 60% | ./b.js:flush:20 30% | ./main.js:render:30 10%");
    const struct corr_ui_entry *e = hs_corr_ui_get(&corr(&f)->ui, 0);
    assert_int_equal(e->ntop, 3);
    assert_string_equal(e->names[e->top[0].name], "./a.js:flush:10");
    assert_string_equal(e->names[e->top[1].name], "./b.js:flush:20");
    assert_string_equal(e->names[e->top[2].name], "render");
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cold_start_waits_for_the_first_profile),
        cmocka_unit_test(test_cold_start_gives_up_on_a_service_without_profiles),
        cmocka_unit_test(test_cold_start_at_the_services_bound),
        cmocka_unit_test(test_cold_start_settles_for_the_uploads_types),
        cmocka_unit_test(test_waits_for_the_next_upload_of_a_slow_uploader),
        cmocka_unit_test(test_steady_state_waits_for_every_type),
        cmocka_unit_test(test_exact_match_in_wall_when_cpu_has_none),
        cmocka_unit_test(test_exact_match_in_goroutine_profile),
        cmocka_unit_test(test_goroutine_wait_names_the_waiting_function),
        cmocka_unit_test(test_goroutine_wait_ranks_by_deepest_frame),
        cmocka_unit_test(test_trunk_keeps_a_recursive_frame),
        cmocka_unit_test(test_wall_only_profile_ranks_like_cpu),
        cmocka_unit_test(test_shares_come_from_all_samples),
        cmocka_unit_test(test_library_frames_summarised_under_their_caller),
        cmocka_unit_test(test_library_frames_config),
        cmocka_unit_test(test_offcpu_mutex),
        cmocka_unit_test(test_offcpu_span_without_cpu_samples),
        cmocka_unit_test(test_release_waits_for_every_type),
        cmocka_unit_test(test_offcpu_node_wall),
        cmocka_unit_test(test_negative_values_count_as_none),
        cmocka_unit_test(test_full_names_and_unambiguous_display),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
