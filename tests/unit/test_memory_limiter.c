/* test_memory_limiter.c: the memory_limiter processor with a fake probe (RSS, clock, trim):
 * ready() flips at the soft limit and back, a stale reading is refreshed when data arrives,
 * freed heap handed back above the soft limit (once per interval) before refusing, back to
 * accepting after a spike on the timer alone, the health source /healthz/ready reads,
 * pass-through unchanged, config checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/metrics.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

extern const struct hs_component_type hs_processor_memory_limiter;
#define ML hs_processor_memory_limiter

/* The seam in processors/memory_limiter.c (not in a header: only this test uses it). */
struct hs_memory_limiter_probe {
    uint64_t (*rss)(void *ud);
    uint64_t (*now_ms)(void *ud);
    uint64_t (*total)(void *ud);
    void (*trim)(void *ud);
    void *ud;
};
void hs_memory_limiter_set_probe(struct hs_component *c, const struct hs_memory_limiter_probe *p);

#define MIB (1024ull * 1024ull)

struct fake_probe {
    uint64_t rss, now, total;
    uint64_t rss_after_trim; /* 0: trimming frees nothing */
    uint64_t step;           /* ms the clock moves at each reading of it (the timer test) */
    int reads, trims;
};

static uint64_t fp_rss(void *ud)
{
    struct fake_probe *p = ud;
    p->reads++;
    return p->rss;
}

static uint64_t fp_now(void *ud)
{
    struct fake_probe *p = ud;
    p->now += p->step;
    return p->now;
}

static uint64_t fp_total(void *ud)
{
    return ((struct fake_probe *)ud)->total;
}

static void fp_trim(void *ud)
{
    struct fake_probe *p = ud;
    p->trims++;
    if (p->rss_after_trim)
        p->rss = p->rss_after_trim;
}

/* A downstream component that records what it gets (both signals) and can be not ready. */
struct fake {
    struct hs_component base;
    bool ready;
    int traces, profiles;
    struct hs_traces *last_traces;
    struct hs_profiles *last_profiles;
};

static int fake_traces(struct hs_component *c, struct hs_traces *t)
{
    struct fake *f = hs_container_of(c, struct fake, base);
    f->traces++;
    if (f->last_traces)
        hs_traces_unref(f->last_traces);
    f->last_traces = t;
    return 0;
}

static int fake_profiles(struct hs_component *c, struct hs_profiles *p)
{
    struct fake *f = hs_container_of(c, struct fake, base);
    f->profiles++;
    if (f->last_profiles)
        hs_profiles_unref(f->last_profiles);
    f->last_profiles = p;
    return 0;
}

static bool fake_ready(struct hs_component *c)
{
    return hs_container_of(c, struct fake, base)->ready;
}

static const struct hs_component_type fake_type = {.name = "fake",
                                                   .kind = HS_KIND_EXPORTER,
                                                   .consume_traces = fake_traces,
                                                   .consume_profiles = fake_profiles,
                                                   .ready = fake_ready};

struct fixture {
    uv_loop_t loop;
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct fake_probe probe;
    struct fake fake;
    struct hs_component *fake_ptr;
    struct hs_consumer next;
    struct hs_component *ml;
    int done;
};

static void setup(struct fixture *fx, const char *yaml, uint64_t rss)
{
    memset(fx, 0, sizeof(*fx));
    uv_loop_init(&fx->loop);
    fx->m = hs_metrics_new();
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    assert_int_equal(ML.create(fx->doc.root, "processors.memory_limiter", &fx->ml, &err), 0);
    hs_error_free(&err);
    fx->probe = (struct fake_probe){.rss = rss, .now = 1000000, .total = 1000 * MIB};
    hs_memory_limiter_set_probe(
        fx->ml,
        &(struct hs_memory_limiter_probe){
            .rss = fp_rss, .now_ms = fp_now, .total = fp_total, .trim = fp_trim, .ud = &fx->probe});
    fx->fake.base.type = &fake_type;
    fx->fake.ready = true;
    fx->fake_ptr = &fx->fake.base;
    fx->next = (struct hs_consumer){.targets = &fx->fake_ptr, .count = 1};
    fx->ml->type = &ML;
    fx->ml->id = "memory_limiter";
    fx->ml->pipeline = "traces";
    fx->ml->next = &fx->next;
    fx->ml->next_profiles = &fx->next;
    fx->ml->loop = &fx->loop;
    fx->ml->metrics = fx->m;
    const struct hs_host host = {.loop = &fx->loop, .metrics = fx->m};
    assert_int_equal(ML.start(fx->ml, &host), 0);
}

static struct fixture *current;

static void on_done(struct hs_component *c)
{
    current->done++;
}

static void teardown(struct fixture *fx)
{
    current = fx;
    ML.shutdown(fx->ml, on_done);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(fx->done, 1);
    ML.destroy(fx->ml);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    if (fx->fake.last_traces)
        hs_traces_unref(fx->fake.last_traces);
    if (fx->fake.last_profiles)
        hs_profiles_unref(fx->fake.last_profiles);
    hs_metrics_free(fx->m);
    hs_config_doc_free(&fx->doc);
}

/* The value of one series in the /metrics text, or -1. */
static double metric_value(struct hs_metrics *m, const char *series)
{
    struct hs_buf out = {0};
    assert_int_equal(hs_metrics_render(m, &out), 0);
    assert_int_equal(hs_buf_append(&out, "", 1), 0);
    const char *p = strstr((const char *)out.data, series);
    double v = p ? strtod(p + strlen(series), NULL) : -1;
    hs_buf_free(&out);
    return v;
}

static const char *const REFUSED =
    "hotspan_processor_memory_limiter_refused_total{processor=\"memory_limiter\","
    "pipeline=\"traces\"} ";

static void advance(struct fixture *fx, uint64_t ms)
{
    fx->probe.now += ms;
}

static void test_ready_flips_at_soft_limit_and_back(void **state)
{
    struct fixture fx;
    /* hard 100 MiB, spike 20 MiB: soft 80 MiB; a long interval so the uv timer never fires */
    setup(&fx, "{limit_mib: 100, spike_limit_mib: 20, check_interval: 1h}", 50 * MIB);
    assert_true(ML.ready(fx.ml));
    assert_true(hs_component_ready(fx.ml));

    fx.probe.rss = 80 * MIB; /* at the soft limit is still fine */
    advance(&fx, 3600000);
    assert_true(ML.ready(fx.ml));
    fx.probe.rss = 80 * MIB + 1;
    advance(&fx, 3600000);
    assert_false(ML.ready(fx.ml));
    assert_false(hs_component_ready(fx.ml));
    /* a receiver delivering through a consumer gets HS_EAGAIN and nothing arrives */
    struct hs_component *ml = fx.ml;
    struct hs_consumer up = {.targets = &ml, .count = 1};
    uint8_t *bytes = malloc(3);
    memcpy(bytes, "abc", 3);
    assert_int_equal(hs_consumer_traces(&up, hs_traces_wrap(bytes, 3, 3, 1, 1)), HS_EAGAIN);
    assert_int_equal(fx.fake.traces, 0);
    assert_true(metric_value(fx.m, REFUSED) >= 2);
    assert_int_equal(fx.probe.trims, 1); /* tried to give freed heap back first: nothing freed */

    fx.probe.rss = 60 * MIB;
    assert_false(ML.ready(fx.ml)); /* the reading is fresh: it is not taken again */
    advance(&fx, 3600000);
    assert_true(ML.ready(fx.ml));
    teardown(&fx);
}

static void test_stale_reading_refreshed_when_data_arrives(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_mib: 100, check_interval: 1s}", 10 * MIB);
    int reads = fx.probe.reads; /* start takes one */
    assert_true(reads >= 1);
    assert_true(ML.ready(fx.ml));
    assert_int_equal(fx.probe.reads, reads); /* fresh: not read per batch */
    fx.probe.rss = 90 * MIB;                 /* default spike is 20%: soft 80 MiB */
    advance(&fx, 999);
    assert_true(ML.ready(fx.ml));
    advance(&fx, 1);
    assert_false(ML.ready(fx.ml)); /* read at once, not at the next timer tick */
    assert_int_equal(fx.probe.reads, reads + 2); /* and again after trying a trim */
    teardown(&fx);
}

static void test_timer_takes_readings(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_mib: 100, check_interval: 10ms}", 10 * MIB);
    int reads = fx.probe.reads;
    uv_run(&fx.loop, UV_RUN_ONCE); /* waits for the timer */
    assert_true(fx.probe.reads > reads);
    teardown(&fx);
}

/* The stuck limiter of issue 15: one large request leaves RSS between the soft and the hard
 * limit, all of it freed heap glibc keeps. The trim comes before the verdict: never refused. */
static void test_freed_heap_above_soft_limit_is_given_back_not_refused(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_mib: 512, check_interval: 1h}", 20 * MIB); /* soft 409.6 MiB */
    fx.probe.rss = 479 * MIB;
    fx.probe.rss_after_trim = 25 * MIB;
    advance(&fx, 3600000);
    assert_true(ML.ready(fx.ml));
    assert_int_equal(fx.probe.trims, 1);
    assert_true(metric_value(fx.m, REFUSED) == 0);
    assert_true(metric_value(fx.m,
                             "hotspan_processor_memory_limiter_rss_bytes{processor="
                             "\"memory_limiter\",pipeline=\"traces\"} ") == (double)(25 * MIB));
    assert_true(metric_value(fx.m, "hotspan_processor_memory_limiter_refusing{processor="
                                   "\"memory_limiter\",pipeline=\"traces\"} ") == 0);
    /* below the soft limit nothing is trimmed: glibc's free lists are left to do their job */
    fx.probe.rss = 300 * MIB;
    advance(&fx, 3600000);
    assert_true(ML.ready(fx.ml));
    assert_int_equal(fx.probe.trims, 1);
    teardown(&fx);
}

static void test_trims_above_soft_limit_once_per_interval(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_mib: 100, spike_limit_mib: 10, check_interval: 1h}", 10 * MIB);
    fx.probe.rss = 95 * MIB; /* above the soft limit (90), below the hard one */
    advance(&fx, 3600000);
    assert_false(ML.ready(fx.ml));
    assert_int_equal(fx.probe.trims, 1);
    assert_false(ML.ready(fx.ml));
    assert_int_equal(fx.probe.trims, 1); /* not again within the interval */
    /* a trim that brings memory back under the soft limit lets data in at once */
    fx.probe.rss_after_trim = 50 * MIB;
    advance(&fx, 3600000);
    assert_true(ML.ready(fx.ml));
    assert_int_equal(fx.probe.trims, 2);
    teardown(&fx);
}

/* A spike of memory in use (refused), then freed but kept by the allocator: the timer alone,
 * with no data arriving (all of it is being refused), gives it back and lets data in again
 * within two intervals. */
static void test_back_to_accepting_after_spike_on_the_timer(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_mib: 100, check_interval: 10ms}", 10 * MIB);
    fx.probe.rss = 150 * MIB; /* in use: a trim frees nothing */
    advance(&fx, 10);
    assert_false(ML.ready(fx.ml));
    int trims = fx.probe.trims;
    assert_int_equal(trims, 1);
    /* the spike is over: freed, but glibc keeps 90 MiB resident, below the hard limit */
    fx.probe.rss = 90 * MIB;
    fx.probe.rss_after_trim = 30 * MIB;
    fx.probe.step = 5; /* the clock moves as the loop runs */
    for (int i = 0; i < 4 && fx.probe.trims == trims; i++)
        uv_run(&fx.loop, UV_RUN_ONCE); /* one timer tick (10 ms of real time) */
    assert_int_equal(fx.probe.trims, trims + 1);
    fx.probe.step = 0;
    assert_true(ML.ready(fx.ml)); /* the timer's reading, fresh: accepted at once */
    teardown(&fx);
}

struct health_seen {
    int n;
    bool over;
    char component[64], error[HS_HEALTH_ERROR_LEN];
};

static void health_visit(void *arg, const char *component, const struct hs_health *h)
{
    struct health_seen *s = arg;
    s->n++;
    s->over = h->over_memory_limit && h->failing_since_ms != 0;
    snprintf(s->component, sizeof(s->component), "%s", component);
    snprintf(s->error, sizeof(s->error), "%s", h->last_error);
}

/* /healthz/ready reads the limiter's health source: over_memory_limit exactly while refusing,
 * saying why; gone after shutdown. */
static void test_health_source_while_refusing(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_mib: 100, check_interval: 1h}", 10 * MIB);
    struct health_seen seen = {0};
    assert_int_equal(hs_metrics_health_each(fx.m, health_visit, &seen), 1);
    assert_false(seen.over);
    assert_string_equal(seen.component, "memory_limiter");
    fx.probe.rss = 95 * MIB;
    advance(&fx, 3600000);
    assert_false(ML.ready(fx.ml));
    seen = (struct health_seen){0};
    hs_metrics_health_each(fx.m, health_visit, &seen);
    assert_true(seen.over);
    assert_non_null(strstr(seen.error, "pipeline traces: resident memory 95 MiB"));
    assert_non_null(strstr(seen.error, "above the soft limit 80 MiB"));
    fx.probe.rss = 50 * MIB;
    advance(&fx, 3600000);
    assert_true(ML.ready(fx.ml));
    seen = (struct health_seen){0};
    hs_metrics_health_each(fx.m, health_visit, &seen);
    assert_false(seen.over);
    teardown(&fx);
}

static void test_passes_data_on_unchanged(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_mib: 100}", 10 * MIB);
    uint8_t *bytes = malloc(5);
    memcpy(bytes, "hello", 5);
    struct hs_traces *t = hs_traces_wrap(bytes, 5, 5, 2, 1);
    assert_int_equal(ML.consume_traces(fx.ml, t), 0);
    assert_int_equal(fx.fake.traces, 1);
    assert_ptr_equal(fx.fake.last_traces, t); /* the same batch: no copy */
    assert_int_equal(t->spans, 2);
    assert_int_equal(t->len, 5);
    assert_memory_equal(t->data, "hello", 5);

    struct hs_profiles *p = hs_profiles_new("tenant-a");
    assert_non_null(p);
    assert_int_equal(ML.consume_profiles(fx.ml, p), 0);
    assert_int_equal(fx.fake.profiles, 1);
    assert_ptr_equal(fx.fake.last_profiles, p);

    /* downstream not ready: so is the limiter, and a direct consume is refused */
    fx.fake.ready = false;
    assert_false(ML.ready(fx.ml));
    bytes = malloc(1);
    bytes[0] = 'x';
    assert_int_equal(ML.consume_traces(fx.ml, hs_traces_wrap(bytes, 1, 1, 1, 1)), HS_EAGAIN);
    assert_int_equal(fx.fake.traces, 1);
    /* over the soft limit: a direct consume is refused too, and counted */
    fx.fake.ready = true;
    fx.probe.rss = 99 * MIB;
    advance(&fx, 1000);
    assert_int_equal(ML.consume_profiles(fx.ml, hs_profiles_new(NULL)), HS_EAGAIN);
    assert_int_equal(fx.fake.profiles, 1);
    assert_true(metric_value(fx.m, REFUSED) >= 1);
    teardown(&fx);
}

static void test_gauges(void **state)
{
    struct fixture fx;
    setup(&fx, "{limit_percentage: 50, spike_limit_percentage: 10}", 123 * MIB);
    /* total 1000 MiB: hard 500, soft 400 */
    const char *labels = "{processor=\"memory_limiter\",pipeline=\"traces\"} ";
    char name[200];
    snprintf(name, sizeof(name), "hotspan_processor_memory_limiter_soft_limit_bytes%s", labels);
    assert_true(metric_value(fx.m, name) == (double)(1000 * MIB / 100 * 40));
    snprintf(name, sizeof(name), "hotspan_processor_memory_limiter_rss_bytes%s", labels);
    assert_true(metric_value(fx.m, name) == (double)(123 * MIB));
    teardown(&fx);
    /* shutdown removed the gauges; a fresh registry would not show them, nothing dangles */
}

static void expect_create_error(const char *yaml, const char *needle)
{
    struct hs_config_doc doc = {0};
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(ML.create(doc.root, "processors.memory_limiter", &c, &err), HS_EINVAL);
    assert_null(c);
    assert_true(err.count >= 1);
    bool found = false;
    for (size_t i = 0; i < err.count; i++)
        found = found || strstr(err.lines[i], needle);
    if (!found)
        fail_msg("no error mentioning \"%s\"; first: %s", needle, err.lines[0]);
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

static void test_config_errors(void **state)
{
    expect_create_error("{}", "set limit_mib or limit_percentage");
    expect_create_error("{limit_mib: 100, limit_percentage: 50}", "exclusive");
    expect_create_error("{limit_mib: 100, spike_limit_mib: 100}", "must be below limit_mib");
    expect_create_error("{limit_percentage: 30, spike_limit_percentage: 40}",
                        "must be below limit_percentage");
    expect_create_error("{limit_percentage: 101}", "processors.memory_limiter.limit_percentage");
    expect_create_error("{limit_mib: 100, check_interval: 0s}",
                        "processors.memory_limiter.check_interval");
    expect_create_error("{limit_mib: 100, limit: 5}", "unknown key");
}

static uint64_t zero(void *ud)
{
    return 0;
}

static void test_percentage_needs_known_memory(void **state)
{
    struct hs_config_doc doc = {0};
    struct hs_error err = {0};
    const char *yaml = "{limit_percentage: 50}";
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(ML.create(doc.root, "processors.memory_limiter", &c, &err), 0);
    struct fake_probe fp = {0};
    hs_memory_limiter_set_probe(
        c, &(struct hs_memory_limiter_probe){
               .rss = fp_rss, .now_ms = fp_now, .total = zero, .trim = fp_trim, .ud = &fp});
    c->type = &ML;
    c->id = "memory_limiter";
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct hs_metrics *m = hs_metrics_new();
    const struct hs_host host = {.loop = &loop, .metrics = m};
    assert_int_equal(ML.start(c, &host), HS_EINVAL);
    current = &(struct fixture){0};
    ML.shutdown(c, on_done); /* a failed start opened nothing */
    assert_int_equal(current->done, 1);
    ML.destroy(c);
    assert_int_equal(uv_loop_close(&loop), 0);
    hs_metrics_free(m);
    hs_config_doc_free(&doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_flips_at_soft_limit_and_back),
        cmocka_unit_test(test_stale_reading_refreshed_when_data_arrives),
        cmocka_unit_test(test_timer_takes_readings),
        cmocka_unit_test(test_freed_heap_above_soft_limit_is_given_back_not_refused),
        cmocka_unit_test(test_trims_above_soft_limit_once_per_interval),
        cmocka_unit_test(test_back_to_accepting_after_spike_on_the_timer),
        cmocka_unit_test(test_health_source_while_refusing),
        cmocka_unit_test(test_passes_data_on_unchanged),
        cmocka_unit_test(test_gauges),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_percentage_needs_known_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
