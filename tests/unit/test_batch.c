/* test_batch.c: the batch processor: size and timeout triggers, bytes concatenated in order,
 * backpressure when what follows is not ready, a flush on shutdown, and one batch per tenant. */
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
#include "core/metrics.h"
#include "pdata/traces.h"

extern const struct hs_component_type hs_processor_batch;

/* A fake exporter that records what it gets and can say it is not ready. */
struct fake {
    struct hs_component base;
    bool ready;
    int batches;
    uint32_t spans;
    char bytes[1024];
    size_t len;
    uv_loop_t *stop_loop_after_batch;
    /* per batch received: its tenant and its bytes, to see that tenants never mix */
    char tenant[8][HS_TENANT_MAX + 1];
    char batch_bytes[8][64];
};

static int fake_consume(struct hs_component *c, struct hs_traces *t)
{
    struct fake *f = hs_container_of(c, struct fake, base);
    assert_true(f->ready);
    if (f->batches < 8) {
        strcpy(f->tenant[f->batches], t->tenant);
        assert_true(t->len < sizeof(f->batch_bytes[0]));
        memcpy(f->batch_bytes[f->batches], t->data, t->len);
        f->batch_bytes[f->batches][t->len] = '\0';
    }
    f->batches++;
    f->spans += t->spans;
    assert_true(f->len + t->len <= sizeof(f->bytes));
    memcpy(f->bytes + f->len, t->data, t->len);
    f->len += t->len;
    hs_traces_unref(t);
    if (f->stop_loop_after_batch)
        uv_stop(f->stop_loop_after_batch);
    return 0;
}

static bool fake_ready(struct hs_component *c)
{
    return hs_container_of(c, struct fake, base)->ready;
}

static const struct hs_component_type fake_type = {
    .name = "fake", .kind = HS_KIND_EXPORTER, .consume_traces = fake_consume, .ready = fake_ready};

struct fixture {
    uv_loop_t loop;
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct fake fake;
    struct hs_component *fake_ptr;
    struct hs_consumer next;
    struct hs_component *batch;
    int done;
};

static void setup(struct fixture *fx, const char *yaml)
{
    memset(fx, 0, sizeof(*fx));
    uv_loop_init(&fx->loop);
    fx->m = hs_metrics_new();
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &err), 0);
    assert_int_equal(hs_processor_batch.create(fx->doc.root, "processors.batch", &fx->batch, &err),
                     0);
    hs_error_free(&err);
    fx->fake.base.type = &fake_type;
    fx->fake.ready = true;
    fx->fake_ptr = &fx->fake.base;
    fx->next = (struct hs_consumer){.targets = &fx->fake_ptr, .count = 1};
    fx->batch->type = &hs_processor_batch;
    fx->batch->id = "batch";
    fx->batch->next = &fx->next;
    fx->batch->loop = &fx->loop;
    fx->batch->metrics = fx->m;
    const struct hs_host host = {.loop = &fx->loop, .metrics = fx->m};
    assert_int_equal(hs_processor_batch.start(fx->batch, &host), 0);
}

static struct fixture *current;

static void on_done(struct hs_component *c)
{
    current->done++;
}

static void teardown(struct fixture *fx)
{
    current = fx;
    hs_processor_batch.shutdown(fx->batch, on_done);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(fx->done, 1);
    hs_processor_batch.destroy(fx->batch);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    hs_metrics_free(fx->m);
    hs_config_doc_free(&fx->doc);
}

/* A batch of `spans` spans whose bytes are one letter repeated (the processor never looks). */
static struct hs_traces *batch_of(uint32_t spans, char letter)
{
    uint8_t *p = malloc(4);
    memset(p, letter, 4);
    return hs_traces_wrap(p, 4, 4, spans, 1);
}

static void test_size_trigger_concatenates(void **state)
{
    struct fixture fx;
    setup(&fx, "{timeout: 10s, send_batch_size: 3}");
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, batch_of(2, 'a')), 0);
    assert_int_equal(fx.fake.batches, 0);
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, batch_of(2, 'b')), 0);
    assert_int_equal(fx.fake.batches, 1); /* at once, not after 10 s */
    assert_int_equal(fx.fake.spans, 4);
    assert_int_equal(fx.fake.len, 8);
    assert_memory_equal(fx.fake.bytes, "aaaabbbb", 8);
    teardown(&fx);
}

static void test_timeout_trigger(void **state)
{
    struct fixture fx;
    setup(&fx, "{timeout: 20ms, send_batch_size: 100}");
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, batch_of(1, 'a')), 0);
    assert_int_equal(fx.fake.batches, 0);
    fx.fake.stop_loop_after_batch = &fx.loop;
    uv_run(&fx.loop, UV_RUN_DEFAULT); /* returns when the timer delivered it */
    assert_int_equal(fx.fake.batches, 1);
    assert_int_equal(fx.fake.spans, 1);
    fx.fake.stop_loop_after_batch = NULL;
    teardown(&fx);
}

static void test_backpressure_then_delivery(void **state)
{
    struct fixture fx;
    setup(&fx, "{timeout: 5ms, send_batch_size: 4}");
    fx.fake.ready = false;
    uint32_t accepted = 0;
    int refused = 0;
    for (int i = 0; i < 10; i++) {
        int rc = hs_processor_batch.consume_traces(fx.batch, batch_of(3, (char)('a' + i)));
        if (rc == 0)
            accepted += 3;
        else {
            assert_int_equal(rc, HS_EAGAIN);
            refused++;
        }
    }
    assert_int_equal(accepted, 6); /* held: one full batch, then refusal */
    assert_int_equal(refused, 8);
    assert_false(hs_processor_batch.ready(fx.batch));
    fx.fake.ready = true;
    fx.fake.stop_loop_after_batch = &fx.loop;
    uv_run(&fx.loop, UV_RUN_DEFAULT); /* the retry timer finds the exporter ready */
    assert_int_equal(fx.fake.spans, accepted);
    assert_memory_equal(fx.fake.bytes, "aaaabbbb", 8);
    assert_true(hs_processor_batch.ready(fx.batch));
    fx.fake.stop_loop_after_batch = NULL;
    teardown(&fx);
}

static void test_shutdown_flushes(void **state)
{
    struct fixture fx;
    setup(&fx, "{timeout: 10s, send_batch_size: 100}");
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, batch_of(5, 'z')), 0);
    assert_int_equal(fx.fake.batches, 0);
    teardown(&fx); /* asserts done once and a closed loop */
    assert_int_equal(fx.fake.spans, 5);
}

static struct hs_traces *tenant_batch(uint32_t spans, char letter, const char *tenant)
{
    struct hs_traces *t = batch_of(spans, letter);
    assert_int_equal(hs_traces_set_tenant(t, tenant, strlen(tenant)), 0);
    return t;
}

/* Two tenants interleaved: each output batch holds one tenant's bytes only, in order, and the
 * tenant travels with it; a size trigger of one tenant sends only that tenant's batch. */
static void test_two_tenants_never_share_a_batch(void **state)
{
    struct fixture fx;
    setup(&fx, "{timeout: 10s, send_batch_size: 6}");
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(2, 'a', "team-a")),
                     0);
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(1, 'b', "team-b")),
                     0);
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(2, 'c', "team-a")),
                     0);
    assert_int_equal(fx.fake.batches, 0); /* 5 held in all, no tenant's batch full */
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(2, 'd', "team-a")),
                     0);
    assert_int_equal(fx.fake.batches, 1); /* team-a reached 6: it goes alone */
    assert_string_equal(fx.fake.tenant[0], "team-a");
    assert_string_equal(fx.fake.batch_bytes[0], "aaaaccccdddd");
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(1, 'e', "")), 0);
    teardown(&fx); /* the shutdown flush sends team-b and the tenant-less batch apart */
    assert_int_equal(fx.fake.batches, 3);
    assert_string_equal(fx.fake.tenant[1], "team-b");
    assert_string_equal(fx.fake.batch_bytes[1], "bbbb");
    assert_string_equal(fx.fake.tenant[2], "");
    assert_string_equal(fx.fake.batch_bytes[2], "eeee");
    assert_int_equal(fx.fake.spans, 8);
}

/* Tenant ids cycling through cannot grow the held state: past 64 tenants held, the oldest
 * batch goes on first, or the new tenant is refused (backpressure) when it cannot. */
static void test_tenant_cap(void **state)
{
    struct fixture fx;
    setup(&fx, "{timeout: 10s, send_batch_size: 1000}");
    char id[16];
    for (int i = 0; i < 64; i++) {
        snprintf(id, sizeof(id), "t%d", i);
        assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(1, 'x', id)), 0);
    }
    assert_int_equal(fx.fake.batches, 0);
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(1, 'y', "t64")), 0);
    assert_int_equal(fx.fake.batches, 1);
    assert_string_equal(fx.fake.tenant[0], "t0"); /* the oldest made room */
    fx.fake.ready = false;
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(1, 'z', "t65")),
                     HS_EAGAIN);
    assert_int_equal(hs_processor_batch.consume_traces(fx.batch, tenant_batch(1, 'z', "t1")), 0);
    fx.fake.ready = true;
    teardown(&fx);
    assert_int_equal(fx.fake.spans, 66); /* all accepted spans delivered, the refused one not */
}

/* The batch type itself refuses to merge tenants, whoever calls it. */
static void test_append_refuses_other_tenant(void **state)
{
    struct hs_traces *a = tenant_batch(1, 'a', "team-a");
    struct hs_traces *b = tenant_batch(1, 'b', "team-b");
    assert_int_equal(hs_traces_append(a, b), HS_EINVAL);
    assert_int_equal(a->len, 4);
    assert_int_equal(hs_traces_set_tenant(b, "team-a", 6), 0);
    assert_int_equal(hs_traces_append(a, b), 0);
    assert_int_equal(a->spans, 2);
    char longer[HS_TENANT_MAX + 2];
    memset(longer, 'x', sizeof(longer));
    assert_int_equal(hs_traces_set_tenant(b, longer, sizeof(longer)), HS_EINVAL);
    assert_string_equal(b->tenant, "team-a");
    struct hs_traces *shared = hs_traces_ref(b);
    assert_int_equal(hs_traces_make_writable(&shared), 0); /* a private copy keeps the tenant */
    assert_ptr_not_equal(shared, b);
    assert_string_equal(shared->tenant, "team-a");
    hs_traces_unref(shared);
    hs_traces_unref(a);
    hs_traces_unref(b);
}

static void test_defaults_and_bounds(void **state)
{
    struct hs_config_doc doc = {0};
    struct hs_error err = {0};
    const char *yaml = "{send_batch_size: 0}";
    hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, &err);
    struct hs_component *c = NULL;
    assert_int_equal(hs_processor_batch.create(doc.root, "processors.batch", &c, &err), HS_EINVAL);
    assert_int_equal(err.count, 1);
    assert_non_null(strstr(err.lines[0], "processors.batch.send_batch_size"));
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_trigger_concatenates),
        cmocka_unit_test(test_timeout_trigger),
        cmocka_unit_test(test_backpressure_then_delivery),
        cmocka_unit_test(test_shutdown_flushes),
        cmocka_unit_test(test_two_tenants_never_share_a_batch),
        cmocka_unit_test(test_append_refuses_other_tenant),
        cmocka_unit_test(test_tenant_cap),
        cmocka_unit_test(test_defaults_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
