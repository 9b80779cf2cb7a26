/* test_load_balancing.c: the load_balancing exporter. Splitting (by resource, by trace, profiles
 * moved or copied), routing stability (the same key to the same backend whatever the order of
 * the answer; spans and profiles of a key together), and against loopback sinks: a full backend
 * refuses only its keys (a batch needing it refused whole), a failing backend keeps its keys and
 * retries them, a backend that leaves hands its queue (in memory, on disk, or found on disk at
 * the next start) to the keys' new owners, and keys moved are counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/metrics.h"
#include "exporters/load_balancing/load_balancing.h"
#include "exporters/load_balancing/ring.h"
#include "exporters/load_balancing/split.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "tests/unit/http_sink.c"
#include "tests/unit/otlp_build.h"

extern const struct hs_component_type hs_exporter_load_balancing;

#define NB 3 /* backends */
#define ID "load_balancing"

struct fixture {
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t dog;
    bool timed_out;
    struct hs_metrics *m;
    struct sink sinks[NB], psinks[NB]; /* backend i: 127.0.0.<i+1>, OTLP and Pyroscope */
    bool up[NB];
    uint16_t port[NB], pport;
    char names[NB][32];
    struct hs_config_doc doc;
    struct hs_component *lb;
    int done;
    char dir[64];
};

static void on_wake(uv_async_t *a)
{
    (void)a;
}

static void on_dog(uv_timer_t *t)
{
    ((struct fixture *)t->data)->timed_out = true;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    uv_async_init(&fx->loop, &fx->wake, on_wake);
    uv_timer_init(&fx->loop, &fx->dog);
    fx->dog.data = fx;
    uv_timer_start(&fx->dog, on_dog, 30000, 0);
    uv_unref((uv_handle_t *)&fx->dog);
    fx->m = hs_metrics_new();
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/hs-lb-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    build_arena = hs_arena_new(1 << 16, 0);
    for (int i = 0; i < NB; i++) {
        char addr[24];
        snprintf(addr, sizeof(addr), "127.0.0.%d", i + 1);
        assert_int_equal(sink_start_at(&fx->sinks[i], addr, 0, &fx->wake), 0);
        /* every backend's Pyroscope port is the same (protocol.pyroscope.port) */
        assert_int_equal(sink_start_at(&fx->psinks[i], addr, fx->pport, &fx->wake), 0);
        fx->pport = fx->psinks[i].port;
        fx->up[i] = true;
        fx->port[i] = fx->sinks[i].port;
        snprintf(fx->names[i], sizeof(fx->names[i]), "%s:%u", addr, fx->port[i]);
    }
    *state = fx;
    return 0;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.')
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static void run_until(struct fixture *fx, bool (*pred)(struct fixture *fx))
{
    while (!pred(fx) && !fx->timed_out)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_false(fx->timed_out);
}

static bool is_done(struct fixture *fx)
{
    return fx->done > 0;
}

static void on_done(struct hs_component *c)
{
    (void)c;
}

static struct fixture *the_fx; /* for on_lb_done: a component's done has no user data */

static void on_lb_done(struct hs_component *c)
{
    (void)c;
    the_fx->done++;
}

/* Shuts the exporter down, as a stopping process does, and frees it. */
static void lb_stop(struct fixture *fx)
{
    if (!fx->lb)
        return;
    the_fx = fx;
    fx->done = 0;
    fx->lb->type->shutdown(fx->lb, on_lb_done);
    run_until(fx, is_done);
    free(fx->lb->id);
    fx->lb->type->destroy(fx->lb);
    fx->lb = NULL;
    hs_config_doc_free(&fx->doc);
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    for (int i = 0; i < NB; i++) /* what is held can be delivered: the shutdown drains it */
        if (fx->up[i])
            sink_default(&fx->sinks[i], 200, NULL, NULL, 0);
    lb_stop(fx);
    for (int i = 0; i < NB; i++) {
        if (fx->up[i]) {
            sink_stop(&fx->sinks[i]);
            sink_stop(&fx->psinks[i]);
        }
    }
    rm_dir(fx->dir);
    uv_close((uv_handle_t *)&fx->wake, NULL);
    uv_close((uv_handle_t *)&fx->dog, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0); /* every handle of every backend is closed */
    hs_metrics_free(fx->m);
    hs_arena_free(build_arena);
    build_arena = NULL;
    free(fx);
    (void)on_done;
    return 0;
}

static void backend_down(struct fixture *fx, int i)
{
    sink_stop(&fx->sinks[i]);
    sink_stop(&fx->psinks[i]);
    fx->up[i] = false;
}

static void backend_up(struct fixture *fx, int i)
{
    char addr[24];
    snprintf(addr, sizeof(addr), "127.0.0.%d", i + 1);
    assert_int_equal(sink_start_at(&fx->sinks[i], addr, fx->port[i], &fx->wake), 0);
    assert_int_equal(sink_start_at(&fx->psinks[i], addr, fx->pport, &fx->wake), 0);
    fx->up[i] = true;
}

/* ---- building batches --------------------------------------------------------------------- */

/* An ExportTraceServiceRequest of one resource of `service` with n spans (trace ids from
 * seed), appended to acc. */
static void add_resource(struct hs_buf *acc, const char *service, size_t n, uint8_t seed)
{
    Span **spans = zalloc(n * sizeof(*spans));
    for (size_t i = 0; i < n; i++)
        spans[i] = span("op", (uint8_t)(seed + 3 * i));
    struct bytes b = pack(request(service, 1, (ScopeSpans **)list(1, scope_spans("s", n, spans))));
    assert_int_equal(hs_buf_append(acc, b.p, b.len), 0);
}

static struct hs_traces *traces_of(struct hs_buf *b, const char *tenant)
{
    struct hs_otlp_limits lim = {0};
    struct hs_otlp_scan scan;
    assert_int_equal(hs_otlp_traces_scan(b->data, b->len, &lim, NULL, NULL, &scan), 0);
    struct hs_traces *t = hs_traces_wrap(b->data, b->len, b->cap, scan.spans, scan.resource_spans);
    assert_non_null(t);
    *b = (struct hs_buf){0};
    hs_traces_set_tenant(t, tenant, tenant ? strlen(tenant) : 0);
    return t;
}

/* Spans of one service: a batch of one resource. */
static struct hs_traces *spans_of(const char *service, const char *tenant, size_t n)
{
    struct hs_buf b = {0};
    add_resource(&b, service, n, 1);
    return traces_of(&b, tenant);
}

static struct hs_profile *profile_of(const char *service)
{
    struct hs_profile *p = hs_profile_new();
    assert_non_null(p);
    assert_int_equal(hs_profile_set_raw(p, "pprof-bytes", 11), 0);
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, service, strlen(service)), 0);
    assert_int_equal(hs_profile_set_label(p, "__name__", 8, "process_cpu", 11), 0);
    p->service = hs_profile_label(p, "service_name");
    return p;
}

static struct hs_profiles *profiles_of(const char *tenant, int n, ...)
{
    struct hs_profiles *b = hs_profiles_new(tenant);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(hs_profiles_add(b, profile_of(va_arg(ap, const char *))), 0);
    va_end(ap);
    return b;
}

static uint32_t spans_in(const void *data, size_t len)
{
    struct hs_otlp_limits lim = {0};
    struct hs_otlp_scan scan;
    assert_int_equal(hs_otlp_traces_scan(data, len, &lim, NULL, NULL, &scan), 0);
    return scan.spans;
}

/* ---- routing, as the exporter's ring sees it ---------------------------------------------- */

static struct hs_ring *ring_of(struct fixture *fx, int without)
{
    const char *names[NB];
    size_t n = 0;
    for (int i = 0; i < NB; i++)
        if (i != without)
            names[n++] = fx->names[i];
    return hs_ring_new(names, n);
}

/* A service whose (tenant, service) key goes to backend `want` of the full ring, and (when
 * then >= 0) to `then` once backend `without` has left. */
static const char *service_for(struct fixture *fx, const char *tenant, int want, int without,
                               int then)
{
    static char svc[8][32];
    static int next;
    struct hs_ring *all = ring_of(fx, -1), *fewer = ring_of(fx, without);
    char *out = svc[next++ % 8];
    for (int i = 0;; i++) {
        snprintf(out, 32, "svc-%d", i);
        uint64_t k = hs_lb_key(HS_LB_ROUTE_TENANT_SERVICE, tenant, out, strlen(out));
        int a = hs_ring_pick(all, k);
        if (strcmp(hs_ring_name(all, (size_t)a), fx->names[want]) != 0)
            continue;
        int b = hs_ring_pick(fewer, k);
        if (then < 0 || strcmp(hs_ring_name(fewer, (size_t)b), fx->names[then]) == 0)
            break;
    }
    hs_ring_free(all);
    hs_ring_free(fewer);
    return out;
}

/* ---- splitting ---------------------------------------------------------------------------- */

static void test_split_by_resource(void **state)
{
    struct fixture *fx = *state;
    struct hs_ring *ring = ring_of(fx, -1);
    struct hs_buf b = {0};
    add_resource(&b, "svc-a", 2, 1);
    add_resource(&b, "svc-b", 1, 40);
    add_resource(&b, "svc-a", 1, 80);
    struct hs_traces *t = traces_of(&b, "acme");
    struct hs_lb_parts parts = {0};
    assert_int_equal(hs_lb_split_traces(t, HS_LB_ROUTE_TENANT_SERVICE, ring, &parts), 0);
    assert_int_equal(parts.n, 2);
    uint64_t ka = hs_lb_key(HS_LB_ROUTE_TENANT_SERVICE, "acme", "svc-a", 5);
    uint64_t kb = hs_lb_key(HS_LB_ROUTE_TENANT_SERVICE, "acme", "svc-b", 5);
    for (size_t i = 0; i < parts.n; i++) {
        struct hs_lb_part *p = &parts.v[i];
        struct hs_traces *pt = p->batch;
        bool a = p->key == ka;
        assert_true(a || p->key == kb);
        assert_int_equal(p->items, a ? 3 : 1);
        assert_int_equal(pt->spans, a ? 3 : 1);
        assert_int_equal(pt->resource_spans, a ? 2 : 1);
        assert_int_equal(spans_in(pt->data, pt->len), a ? 3 : 1); /* a valid request */
        assert_int_equal(p->bytes, pt->len);
        assert_string_equal(pt->tenant, "acme");
        assert_int_equal(p->backend, hs_ring_pick(ring, p->key));
    }
    hs_lb_parts_release(&parts, false);

    /* one key: the batch itself goes on, not a copy */
    t = spans_of("svc-a", "acme", 4);
    assert_int_equal(hs_lb_split_traces(t, HS_LB_ROUTE_TENANT_SERVICE, ring, &parts), 0);
    assert_int_equal(parts.n, 1);
    assert_ptr_equal(parts.v[0].batch, t);
    assert_int_equal(parts.v[0].key, ka);
    /* service routing: the tenant does not count */
    hs_lb_parts_release(&parts, false);
    t = spans_of("svc-a", "globex", 1);
    assert_int_equal(hs_lb_split_traces(t, HS_LB_ROUTE_SERVICE, ring, &parts), 0);
    assert_int_equal(parts.v[0].key, hs_lb_key(HS_LB_ROUTE_SERVICE, "acme", "svc-a", 5));
    assert_int_not_equal(parts.v[0].key,
                         hs_lb_key(HS_LB_ROUTE_TENANT_SERVICE, "globex", "svc-a", 5));
    hs_lb_parts_release(&parts, false);
    hs_lb_parts_free(&parts);
    hs_ring_free(ring);
}

struct picked {
    const struct hs_ring *ring;
    int backend;
    int wrong;
};

static int check_span(void *ud, const struct hs_span_view *s)
{
    struct picked *pk = ud;
    uint8_t id[16];
    memcpy(id, s->trace_id.ptr, 16);
    pk->wrong += hs_ring_pick(pk->ring, hs_ring_key_trace_id(id)) != pk->backend;
    return 0;
}

static void test_split_by_trace(void **state)
{
    struct fixture *fx = *state;
    struct hs_ring *ring = ring_of(fx, -1);
    struct hs_buf b = {0};
    add_resource(&b, "svc-a", 40, 1); /* 40 traces of one service */
    struct hs_traces *t = traces_of(&b, "acme");
    struct hs_lb_parts parts = {0};
    assert_int_equal(hs_lb_split_traces(t, HS_LB_ROUTE_TRACE_ID, ring, &parts), 0);
    assert_int_equal(parts.n, NB); /* one part per backend, not per trace */
    uint32_t total = 0;
    for (size_t i = 0; i < parts.n; i++) {
        struct hs_traces *pt = parts.v[i].batch;
        struct picked pk = {ring, parts.v[i].backend, 0};
        struct hs_otlp_limits lim = {0};
        struct hs_otlp_scan scan;
        assert_int_equal(hs_otlp_traces_scan(pt->data, pt->len, &lim, check_span, &pk, &scan), 0);
        assert_int_equal(pk.wrong, 0); /* every span of a part belongs to its backend */
        assert_int_equal(scan.spans, parts.v[i].items);
        assert_int_equal(hs_ring_pick(ring, parts.v[i].key), parts.v[i].backend);
        total += scan.spans;
        for (size_t j = 0; j < i; j++)
            assert_int_not_equal(parts.v[j].backend, parts.v[i].backend);
    }
    assert_int_equal(total, 40);
    hs_lb_parts_release(&parts, false);
    hs_lb_parts_free(&parts);
    hs_ring_free(ring);
}

static void test_split_profiles(void **state)
{
    struct fixture *fx = *state;
    struct hs_ring *ring = ring_of(fx, -1);
    struct hs_lb_parts parts = {0};
    for (int shared = 0; shared < 2; shared++) {
        struct hs_profiles *b = profiles_of("acme", 3, "svc-a", "svc-b", "svc-a");
        struct hs_profile *first = b->items[0];
        if (shared)
            hs_profiles_ref(b); /* fan-out: another holder keeps it whole */
        assert_int_equal(hs_lb_split_profiles(b, HS_LB_ROUTE_TRACE_ID, ring, &parts), 0);
        assert_int_equal(parts.n, 2);
        uint64_t ka = hs_lb_key(HS_LB_ROUTE_TENANT_SERVICE, "acme", "svc-a", 5);
        for (size_t i = 0; i < parts.n; i++) {
            struct hs_profiles *pb = parts.v[i].batch;
            bool a = parts.v[i].key == ka; /* traceID routes profiles by tenant_service */
            assert_int_equal(pb->count, a ? 2 : 1);
            assert_int_equal(parts.v[i].items, pb->count);
            assert_int_equal(parts.v[i].bytes, 11 * pb->count);
            assert_string_equal(pb->tenant, "acme");
            for (uint32_t j = 0; j < pb->count; j++) {
                assert_string_equal(hs_profile_label(pb->items[j], "service_name"),
                                    a ? "svc-a" : "svc-b");
                assert_memory_equal(pb->items[j]->raw, "pprof-bytes", 11);
                assert_string_equal(hs_profile_label(pb->items[j], "__name__"), "process_cpu");
            }
            if (a) /* moved when the batch was ours alone, copied when shared */
                assert_true((pb->items[0] == first) == !shared);
        }
        if (shared) {
            assert_int_equal(b->count, 3);
            assert_ptr_equal(b->items[0], first);
            hs_profiles_unref(b);
        }
        hs_lb_parts_release(&parts, true);
    }
    hs_lb_parts_free(&parts);
    hs_ring_free(ring);
}

/* ---- routing stability --------------------------------------------------------------------- */

static void test_routing_stable(void **state)
{
    struct fixture *fx = *state;
    const char *fwd[NB] = {fx->names[0], fx->names[1], fx->names[2]};
    const char *rev[NB] = {fx->names[2], fx->names[1], fx->names[0]};
    struct hs_ring *a = hs_ring_new(fwd, NB), *b = hs_ring_new(rev, NB), *c = ring_of(fx, 1);
    struct hs_lb_keys keys;
    hs_lb_keys_init(&keys, 1000);
    uint64_t owned_by_1 = 0;
    for (int i = 0; i < 500; i++) {
        char svc[32];
        snprintf(svc, sizeof(svc), "svc-%d", i);
        uint64_t k =
            hs_lb_key(HS_LB_ROUTE_TENANT_SERVICE, i % 2 ? "acme" : "globex", svc, strlen(svc));
        /* another first-tier hotspan, given the answer in another order, agrees */
        assert_string_equal(hs_ring_name(a, (size_t)hs_ring_pick(a, k)),
                            hs_ring_name(b, (size_t)hs_ring_pick(b, k)));
        bool on1 = strcmp(hs_ring_name(a, (size_t)hs_ring_pick(a, k)), fx->names[1]) == 0;
        owned_by_1 += on1;
        if (!on1) /* a key whose backend stays never moves */
            assert_string_equal(hs_ring_name(a, (size_t)hs_ring_pick(a, k)),
                                hs_ring_name(c, (size_t)hs_ring_pick(c, k)));
        hs_lb_keys_note(&keys, k);
        hs_lb_keys_note(&keys, k); /* seen twice, counted once */
    }
    assert_int_equal(hs_lb_keys_count(&keys), 500);
    /* removing backend 1 moves exactly its keys */
    assert_int_equal(hs_lb_keys_moved(&keys, a, c), owned_by_1);
    assert_true(owned_by_1 > 100 && owned_by_1 < 240); /* about a third */
    assert_int_equal(hs_lb_keys_moved(&keys, a, b), 0);
    hs_lb_keys_free(&keys);
    hs_ring_free(a);
    hs_ring_free(b);
    hs_ring_free(c);
}

/* ---- the exporter against loopback sinks ---------------------------------------------------- */

/* Starts a load_balancing exporter over `hostnames` (the fixture's backends when NULL). */
static void lb_start_with(struct fixture *fx, uint32_t queue_size, bool storage,
                          const char *hostnames)
{
    char names[256], store[128] = "", yaml[2048];
    snprintf(names, sizeof(names), "%s, %s, %s", fx->names[0], fx->names[1], fx->names[2]);
    if (storage)
        snprintf(store, sizeof(store), ", storage: %s", fx->dir);
    snprintf(yaml, sizeof(yaml),
             "resolver: {static: {hostnames: [%s]}}\n"
             "protocol:\n"
             "  otlp:\n"
             "    compression: none\n"
             "    timeout: 1s\n"
             "    retry_on_failure: {initial_interval: 20ms, max_interval: 40ms}\n"
             "    sending_queue: {num_consumers: 1, queue_size: %u%s}\n"
             "  pyroscope:\n"
             "    port: %u\n"
             "    retry_on_failure: {initial_interval: 20ms, max_interval: 40ms}\n"
             "    sending_queue: {num_consumers: 1, queue_size: %u%s}\n",
             hostnames ? hostnames : names, queue_size, store, fx->pport, queue_size, store);
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    int rc = hs_exporter_load_balancing.create(fx->doc.root, "exporters." ID, &fx->lb, &err);
    for (size_t i = 0; i < err.count; i++)
        print_error("%s\n", err.lines[i]);
    hs_error_free(&err);
    assert_int_equal(rc, 0);
    fx->lb->type = &hs_exporter_load_balancing;
    fx->lb->id = strdup(ID);
    fx->lb->loop = &fx->loop;
    fx->lb->metrics = fx->m;
    struct hs_host host = {.loop = &fx->loop, .metrics = fx->m};
    assert_int_equal(fx->lb->type->start(fx->lb, &host), 0);
}

/* A series' value in /metrics (name and labels exactly as registered), or -1 when absent. */
static double metric(struct fixture *fx, const char *name, const char *labels)
{
    struct hs_buf b = {0};
    assert_int_equal(hs_metrics_render(fx->m, &b), 0);
    assert_int_equal(hs_buf_putc(&b, '\0'), 0);
    char key[512];
    snprintf(key, sizeof(key), "\nhotspan_%s{%s} ", name, labels);
    const char *at = strstr((const char *)b.data, key);
    double v = at ? strtod(at + strlen(key), NULL) : -1;
    hs_buf_free(&b);
    return v;
}

static double backend_metric(struct fixture *fx, const char *name, int i, const char *signal)
{
    char labels[256];
    snprintf(labels, sizeof(labels), "exporter=\"" ID "\",backend=\"%s\",signal=\"%s\"",
             fx->names[i], signal);
    return metric(fx, name, labels);
}

static uint32_t sink_spans(struct sink *s)
{
    uint32_t n = 0;
    for (size_t i = 0; i < sink_count(s); i++) {
        const struct sink_req *r = sink_req(s, i);
        n += spans_in(r->body, r->body_len);
    }
    return n;
}

static int waiting_for = -1;
static uint32_t waiting_spans;
static struct fixture *waiting_fx;

static bool sink_has_spans(struct fixture *fx)
{
    return sink_spans(&fx->sinks[waiting_for]) >= waiting_spans;
}

static void wait_spans(struct fixture *fx, int backend, uint32_t n)
{
    waiting_for = backend;
    waiting_spans = n;
    run_until(fx, sink_has_spans);
}

/* Runs the loop until backend i's series reaches at least `want`. */
static void wait_metric(struct fixture *fx, const char *name, int i, const char *signal,
                        double want)
{
    while (backend_metric(fx, name, i, signal) < want && !fx->timed_out)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_false(fx->timed_out);
}

static int consume_spans(struct fixture *fx, struct hs_traces *t)
{
    return fx->lb->type->consume_traces(fx->lb, t);
}

static void test_spans_and_profiles_together(void **state)
{
    struct fixture *fx = *state;
    lb_start_with(fx, 100, false, NULL);
    for (int i = 0; i < NB; i++) {
        const char *svc = service_for(fx, "acme", i, -1, -1);
        assert_int_equal(consume_spans(fx, spans_of(svc, "acme", 2 + i)), 0);
        assert_int_equal(fx->lb->type->consume_profiles(fx->lb, profiles_of("acme", 1, svc)), 0);
    }
    for (int i = 0; i < NB; i++) {
        wait_spans(fx, i, 2 + i);
        assert_int_equal(sink_spans(&fx->sinks[i]), 2 + i); /* nothing of another key */
    }
    for (int i = 0; i < NB; i++) { /* each profile went with its service's spans */
        while (sink_count(&fx->psinks[i]) < 1 && !fx->timed_out)
            uv_run(&fx->loop, UV_RUN_ONCE);
        assert_int_equal(sink_count(&fx->psinks[i]), 1);
        wait_metric(fx, "exporter_sent_spans_total", i, "traces", 2 + i); /* counted there */
        wait_metric(fx, "exporter_sent_profiles_total", i, "profiles", 1);
    }
    const struct sink_req *r = sink_req(&fx->psinks[0], 0);
    assert_string_equal(sink_header(r, "X-Scope-OrgID"), "acme");
    assert_string_equal(r->path, "/push.v1.PusherService/Push");
    assert_int_equal(metric(fx, "load_balancing_backends", "exporter=\"" ID "\""), NB);
    assert_int_equal(metric(fx, "load_balancing_keys", "exporter=\"" ID "\""), NB);
    assert_int_equal(metric(fx, "load_balancing_ring_changes_total", "exporter=\"" ID "\""), 1);
    (void)waiting_fx;
}

static bool backend0_held(struct fixture *fx)
{
    return backend_metric(fx, "exporter_retries_total", 0, "traces") >= 2;
}

/* Backend 0 takes requests and never answers: its queue (1 batch) is full. */
static void test_full_backend_refuses_only_its_keys(void **state)
{
    struct fixture *fx = *state;
    sink_default(&fx->sinks[0], 0, NULL, NULL, 0);
    lb_start_with(fx, 1, false, NULL);
    const char *s0 = service_for(fx, "acme", 0, -1, -1), *s1 = service_for(fx, "acme", 1, -1, -1);
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 1)), 0); /* held, in flight */
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 1)), HS_EAGAIN);
    assert_int_equal(backend_metric(fx, "load_balancing_refused_total", 0, "traces"), 1);
    /* another key flows */
    assert_int_equal(consume_spans(fx, spans_of(s1, "acme", 3)), 0);
    wait_metric(fx, "exporter_sent_spans_total", 1, "traces", 3);
    /* a batch that needs the full backend is refused whole: nothing of it reaches backend 1 */
    struct hs_buf b = {0};
    add_resource(&b, s1, 5, 1);
    add_resource(&b, s0, 1, 9);
    assert_int_equal(consume_spans(fx, traces_of(&b, "acme")), HS_EAGAIN);
    assert_int_equal(backend_metric(fx, "load_balancing_refused_total", 1, "traces"), 5);
    assert_int_equal(backend_metric(fx, "exporter_queue_size", 1, "traces"), 0);
    assert_int_equal(sink_spans(&fx->sinks[1]), 3);
    assert_true(fx->lb->type->ready(fx->lb)); /* the exporter as a whole still takes data */
}

/* Backend 0 is down but still in the answer: its keys wait in its own queue, retried, and are
 * never sent to another backend (that would split the service over two correlators). */
static void test_failing_backend_keeps_its_keys(void **state)
{
    struct fixture *fx = *state;
    backend_down(fx, 0); /* nothing listens on its ports any more */
    lb_start_with(fx, 10, false, NULL);
    const char *s0 = service_for(fx, "acme", 0, -1, -1);
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 2)), 0);
    run_until(fx, backend0_held);
    assert_int_equal(backend_metric(fx, "exporter_queue_size", 0, "traces"), 1);
    assert_int_equal(sink_spans(&fx->sinks[1]) + sink_spans(&fx->sinks[2]), 0);
    backend_up(fx, 0);
    wait_spans(fx, 0, 2);
    assert_int_equal(sink_spans(&fx->sinks[1]) + sink_spans(&fx->sinks[2]), 0);
}

static int store_files(struct fixture *fx, int backend)
{
    DIR *d = opendir(fx->dir);
    int n = 0;
    char port[24];
    snprintf(port, sizeof(port), "%%3A%u%%2F", fx->port[backend]); /* ":<port>/" escaped */
    for (struct dirent *de; d && (de = readdir(d));)
        n += strstr(de->d_name, port) && strstr(de->d_name, ".queue.db") &&
             !strstr(de->d_name, "-wal") && !strstr(de->d_name, "-shm");
    if (d)
        closedir(d);
    return n;
}

static bool backend0_gone(struct fixture *fx)
{
    /* a backend's gauges go when its exporters are done: it has left for good */
    return backend_metric(fx, "exporter_queue_size", 0, "traces") < 0 &&
           backend_metric(fx, "exporter_queue_size", 0, "profiles") < 0;
}

/* Backend 0, down, holds a batch of spans and one of profiles when it leaves the answer: they
 * go to the keys' new owner (chosen as backend `then`), counted; the moved key is counted. */
static void leave_and_reroute(struct fixture *fx, bool storage)
{
    backend_down(fx, 0);
    lb_start_with(fx, 10, storage, NULL);
    const char *s0 = service_for(fx, "acme", 0, 0, 2), *s1 = service_for(fx, "acme", 1, 0, 1);
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 4)), 0);
    assert_int_equal(consume_spans(fx, spans_of(s1, "acme", 1)), 0);
    assert_int_equal(fx->lb->type->consume_profiles(fx->lb, profiles_of("acme", 1, s0)), 0);
    run_until(fx, backend0_held);
    if (storage)
        assert_int_equal(store_files(fx, 0), 2); /* spans and profiles, each in its file */
    uint32_t on2 = sink_spans(&fx->sinks[2]);
    const char *names[] = {fx->names[1], fx->names[2]};
    hs_load_balancing_answer(fx->lb, names, 2);
    wait_spans(fx, 2, on2 + 4);
    run_until(fx, backend0_gone);
    assert_int_equal(backend_metric(fx, "load_balancing_rerouted_total", 0, "traces"), 4);
    assert_int_equal(backend_metric(fx, "load_balancing_rerouted_total", 0, "profiles"), 1);
    while (sink_count(&fx->psinks[2]) < 1 && !fx->timed_out)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_int_equal(sink_count(&fx->psinks[2]), 1);
    assert_int_equal(sink_count(&fx->psinks[1]), 0);
    assert_int_equal(metric(fx, "load_balancing_keys_moved_total", "exporter=\"" ID "\""), 1);
    assert_int_equal(metric(fx, "load_balancing_ring_changes_total", "exporter=\"" ID "\""), 2);
    assert_int_equal(metric(fx, "load_balancing_backends", "exporter=\"" ID "\""), 2);
    assert_int_equal(sink_spans(&fx->sinks[1]), 1); /* the key that stayed did not move */
    if (storage)
        assert_int_equal(store_files(fx, 0), 0); /* emptied, then removed */
}

static void test_leaving_backend_hands_over_memory(void **state)
{
    leave_and_reroute(*state, false);
}

static void test_leaving_backend_hands_over_disk(void **state)
{
    leave_and_reroute(*state, true);
}

/* A restart whose answer no longer has backend 0: what its store file held is found and sent to
 * the keys' owners now. */
static void test_queue_of_departed_backend_found_at_start(void **state)
{
    struct fixture *fx = *state;
    backend_down(fx, 0);
    lb_start_with(fx, 10, true, NULL);
    const char *s0 = service_for(fx, "acme", 0, 0, 1);
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 3)), 0);
    run_until(fx, backend0_held);
    lb_stop(fx); /* the batch stays on disk for the next start */
    assert_int_equal(store_files(fx, 0), 2);
    assert_int_equal(sink_spans(&fx->sinks[1]), 0);
    char names[128];
    snprintf(names, sizeof(names), "%s, %s", fx->names[1], fx->names[2]);
    lb_start_with(fx, 10, true, names);
    wait_spans(fx, 1, 3);
    run_until(fx, backend0_gone);
    assert_int_equal(backend_metric(fx, "load_balancing_rerouted_total", 0, "traces"), 3);
    assert_int_equal(store_files(fx, 0), 0);
}

static bool sink0_hanging(struct fixture *fx)
{
    return sink_count(&fx->sinks[0]) >= 1;
}

static bool two_elsewhere(struct fixture *fx)
{
    return sink_spans(&fx->sinks[1]) + sink_spans(&fx->sinks[2]) >= 2;
}

static bool backend0_back(struct fixture *fx)
{
    return backend_metric(fx, "exporter_queue_size", 0, "traces") >= 0;
}

/* Backend 0 leaves with a request in flight and comes back before that request has ended: its
 * new exporters wait for the old ones (its keys are refused meanwhile), and the request, failing
 * then, goes to the key's next backend rather than nowhere. */
static void test_backend_that_flaps(void **state)
{
    struct fixture *fx = *state;
    sink_default(&fx->sinks[0], 0, NULL, NULL, 0); /* takes the request, never answers */
    lb_start_with(fx, 10, false, NULL);
    const char *s0 = service_for(fx, "acme", 0, -1, -1);
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 2)), 0);
    run_until(fx, sink0_hanging);
    sink_default(&fx->sinks[0], 200, NULL, NULL, 0);
    const char *without[] = {fx->names[1], fx->names[2]};
    const char *all[] = {fx->names[0], fx->names[1], fx->names[2]};
    hs_load_balancing_answer(fx->lb, without, 2);
    hs_load_balancing_answer(fx->lb, all, 3);
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 1)), HS_EAGAIN);
    run_until(fx, backend0_back); /* the old one timed out, handed over and went */
    run_until(fx, two_elsewhere);
    assert_int_equal(consume_spans(fx, spans_of(s0, "acme", 3)), 0);
    wait_spans(fx, 0, 3);
    assert_int_equal(sink_spans(&fx->sinks[1]) + sink_spans(&fx->sinks[2]), 2);
}

static void test_config_errors(void **state)
{
    (void)state;
    static const char yaml[] = "routing_key: trace\n"
                               "resolver:\n"
                               "  static: {hostnames: [\"http://a:1\"]}\n"
                               "  dns: {hostname: gw}\n"
                               "protocol:\n"
                               "  otlp: {endpoint: \"http://x:4318\", port: 70000}\n"
                               "  pyroscope: {protocol: carrier-pigeon}\n";
    struct hs_config_doc doc;
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("lb.yaml", yaml, strlen(yaml), &doc, &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(hs_exporter_load_balancing.create(doc.root, "exporters.lb", &c, &err),
                     HS_EINVAL);
    assert_null(c);
    const char *want[] = {
        "lb.yaml:1:14: exporters.lb.routing_key:",
        "lb.yaml:6:10: exporters.lb.protocol.otlp.endpoint: unknown key",
        "lb.yaml:6:43: exporters.lb.protocol.otlp.port: 70000 is above the maximum 65535",
        "lb.yaml:7:25: exporters.lb.protocol.pyroscope.protocol:",
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(want); i++) {
        bool found = false;
        for (size_t j = 0; j < err.count && !found; j++)
            found = strncmp(err.lines[j], want[i], strlen(want[i])) == 0;
        if (!found)
            for (size_t j = 0; j < err.count; j++)
                print_error("%s\n", err.lines[j]);
        assert_true(found);
    }
    hs_error_free(&err);
    hs_config_doc_free(&doc);
    /* the resolver's own checks, once the rows decode */
    static const char yaml2[] = "resolver:\n"
                                "  static: {hostnames: [\"http://a:1\"]}\n"
                                "  dns: {hostname: gw}\n";
    assert_int_equal(hs_config_parse("lb.yaml", yaml2, strlen(yaml2), &doc, &err), 0);
    assert_int_equal(hs_exporter_load_balancing.create(doc.root, "exporters.lb", &c, &err),
                     HS_EINVAL);
    bool both = false, scheme = false;
    for (size_t j = 0; j < err.count; j++) {
        both |= strstr(err.lines[j], "static and dns exclude each other") != NULL;
        scheme |= strstr(err.lines[j], "has a scheme") != NULL;
    }
    assert_true(both && scheme);
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_split_by_resource, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_by_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_profiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_routing_stable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spans_and_profiles_together, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_backend_refuses_only_its_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failing_backend_keeps_its_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaving_backend_hands_over_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaving_backend_hands_over_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_of_departed_backend_found_at_start, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_backend_that_flaps, setup, teardown),
        cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
