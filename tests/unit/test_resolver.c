/* test_resolver.c: the load_balancing resolver: config rows and their mistakes (each at its
 * line:col); static answers its sorted, deduplicated hostnames once; dns through the real
 * uv_getaddrinfo (a numeric name, so no /etc/hosts or network), then through a scripted
 * getaddrinfo: a change calls back with the new sorted set, the same set in another order does
 * not, a failure, an empty answer and a timeout keep the last good set and are counted, a late
 * answer to a timed-out lookup is dropped, no lookup piles up behind a hung one, and shutdown
 * waits for a running lookup and calls back nothing after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/common.h"
#include "core/config.h"
#include "core/errors.h"
#include "exporters/load_balancing/resolver.h"

#define PATH "exporters.load_balancing.resolver"

struct fx {
    uv_loop_t loop;
    struct hs_resolver_config conf;
    struct hs_config_doc doc;
    struct hs_resolver *r;
    uint64_t calls, dones;
    char last[512]; /* the last set called back, joined by ',' */
};

static int decode(struct fx *fx, const char *yaml, struct hs_error *err)
{
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, err), 0);
    int rc = hs_config_decode(hs_resolver_fields, fx->doc.root, &fx->conf, PATH, err);
    if (rc == 0)
        rc = hs_resolver_config_check(&fx->conf, fx->doc.root, PATH, err);
    return rc;
}

static void on_change(struct hs_resolver *r, const char *const *b, size_t n, void *ud)
{
    struct fx *fx = ud;
    fx->calls++;
    fx->last[0] = 0;
    for (size_t i = 0; i < n; i++) {
        strcat(fx->last, i ? "," : "");
        strcat(fx->last, b[i]);
    }
}

static void on_done(struct hs_resolver *r, void *ud)
{
    ((struct fx *)ud)->dones++;
}

static void run_until(struct fx *fx, const uint64_t *counter, uint64_t target)
{
    for (int i = 0; i < 100000 && *counter < target; i++)
        uv_run(&fx->loop, UV_RUN_ONCE);
    assert_true(*counter >= target);
}

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    uv_loop_init(&fx->loop);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    if (fx->r) {
        hs_resolver_shutdown(fx->r, on_done);
        run_until(fx, &fx->dones, 1);
        hs_resolver_free(fx->r);
    }
    uv_run(&fx->loop, UV_RUN_DEFAULT);             /* the test's own closes */
    assert_int_equal(uv_loop_close(&fx->loop), 0); /* nothing of the resolver left */
    hs_config_free_fields(hs_resolver_fields, &fx->conf);
    hs_config_doc_free(&fx->doc);
    free(fx);
    return 0;
}

static void test_config_defaults_and_mistakes(void **state)
{
    struct fx *fx = *state;
    struct hs_error err = {0};
    assert_int_equal(decode(fx, "dns: {hostname: gw.hotspan.svc}\n", &err), 0);
    assert_true(fx->conf.has_dns && !fx->conf.has_static);
    assert_int_equal(fx->conf.dns.interval_ms, 5000);
    assert_int_equal(fx->conf.dns.timeout_ms, 1000);
    assert_int_equal(fx->conf.dns.port, 0);
    hs_config_free_fields(hs_resolver_fields, &fx->conf);
    hs_config_doc_free(&fx->doc);

    const char *bad = "static:\n"
                      "  hostnames:\n"
                      "    - 10.0.0.7\n"
                      "    - http://10.0.0.8:4318\n"
                      "    - fd00::5:4318\n"
                      "    - 'gw 3'\n"
                      "    - gw-4:0\n"
                      "    - '[fd00::6]:4318'\n"
                      "dns: {hostname: 'gw.svc:4318'}\n";
    assert_int_equal(decode(fx, bad, &err), HS_EINVAL);
    const char *want[] = {
        "t.yaml:1:1: " PATH ": static and dns exclude each other: keep one",
        "t.yaml:4:7: " PATH ".static.hostnames: \"http://10.0.0.8:4318\" has a scheme",
        "t.yaml:5:7: " PATH
        ".static.hostnames: \"fd00::5:4318\" is an IPv6 address without brackets",
        "t.yaml:6:7: " PATH ".static.hostnames: \"gw 3\" contains a blank",
        "t.yaml:7:7: " PATH ".static.hostnames: \"gw-4:0\" has a port that is not 1..65535",
        "t.yaml:9:17: " PATH ".dns.hostname: \"gw.svc:4318\" has a port: give it as dns.port",
    };
    assert_int_equal(err.count, HS_ARRAY_SIZE(want));
    for (size_t i = 0; i < HS_ARRAY_SIZE(want); i++)
        assert_true(strncmp(err.lines[i], want[i], strlen(want[i])) == 0);
    hs_error_free(&err);
    hs_config_free_fields(hs_resolver_fields, &fx->conf);
    hs_config_doc_free(&fx->doc);

    assert_int_equal(decode(fx, "dns: {hostname: a, interval: 5ms}\n", &err), HS_EINVAL);
    assert_non_null(strstr(err.lines[0], PATH ".dns.interval"));
    hs_error_free(&err);
    hs_config_free_fields(hs_resolver_fields, &fx->conf);
    hs_config_doc_free(&fx->doc);
    assert_int_equal(decode(fx, "{}\n", &err), HS_EINVAL);
    assert_non_null(strstr(err.lines[0], "set one of static or dns"));
    hs_error_free(&err);
}

static void test_static_answers_once_sorted(void **state)
{
    struct fx *fx = *state;
    struct hs_error err = {0};
    assert_int_equal(
        decode(fx, "static: {hostnames: [gw-2:4318, gw-1, gw-2:4318, '[fd00::1]:4318']}\n", &err),
        0);
    fx->r = hs_resolver_new(&fx->loop, &fx->conf, "load_balancing", on_change, fx);
    assert_int_equal(hs_resolver_start(fx->r), 0);
    assert_int_equal(fx->calls, 1);
    assert_string_equal(fx->last, "[fd00::1]:4318,gw-1,gw-2:4318");
    size_t n;
    const char *const *b = hs_resolver_backends(fx->r, &n);
    assert_int_equal(n, 3);
    assert_string_equal(b[1], "gw-1");
    uv_run(&fx->loop, UV_RUN_NOWAIT);
    assert_int_equal(fx->calls, 1);
}

static void test_dns_real_getaddrinfo(void **state)
{
    struct fx *fx = *state;
    struct hs_error err = {0};
    assert_int_equal(decode(fx, "dns: {hostname: 127.0.0.1, port: 4318, interval: 10ms}\n", &err),
                     0);
    fx->r = hs_resolver_new(&fx->loop, &fx->conf, "load_balancing", on_change, fx);
    assert_int_equal(hs_resolver_start(fx->r), 0);
    run_until(fx, &fx->calls, 1);
    assert_string_equal(fx->last, "127.0.0.1:4318");
    /* later lookups give the same answer: no second call */
    run_until(fx, &hs_resolver_stats(fx->r)->lookups, 3);
    assert_int_equal(fx->calls, 1);
    assert_int_equal(hs_resolver_stats(fx->r)->failures, 0);
}

/* --- a scripted getaddrinfo: each lookup takes the next answer of the script ------------- */

enum { ANS_ADDRS, ANS_FAIL, ANS_HANG };
struct answer {
    int kind;
    const char *addrs[4];
};
static const struct answer *script;
static size_t script_len, script_pos;
static uv_timer_t answer_timer;
static uv_getaddrinfo_t *pending_req;
static uv_getaddrinfo_cb pending_cb;
static struct addrinfo *pending_res;
static int pending_status;
static size_t fake_frees;

static struct addrinfo *make_ai(const char *const *addrs)
{
    struct addrinfo *head = NULL, **tail = &head;
    for (size_t i = 0; i < 4 && addrs[i]; i++) {
        struct addrinfo *a = calloc(1, sizeof(*a) + sizeof(struct sockaddr_storage));
        a->ai_addr = (struct sockaddr *)(a + 1);
        if (strchr(addrs[i], ':')) {
            a->ai_family = AF_INET6;
            uv_ip6_addr(addrs[i], 0, (struct sockaddr_in6 *)a->ai_addr);
        } else {
            a->ai_family = AF_INET;
            uv_ip4_addr(addrs[i], 0, (struct sockaddr_in *)a->ai_addr);
        }
        *tail = a;
        tail = &a->ai_next;
    }
    return head;
}

static void fake_free(struct addrinfo *ai)
{
    while (ai) {
        struct addrinfo *next = ai->ai_next;
        free(ai);
        ai = next;
    }
    fake_frees++;
}

static void answer_now(uv_timer_t *t)
{
    uv_getaddrinfo_t *req = pending_req;
    pending_req = NULL;
    pending_cb(req, pending_status, pending_res);
}

/* Answers the hung lookup with `addrs`, as a slow system resolver finally would. */
static void release_hung(const char *const *addrs)
{
    pending_res = make_ai(addrs);
    pending_status = 0;
    uv_timer_start(&answer_timer, answer_now, 0, 0);
}

static int fake_gai(uv_loop_t *loop, uv_getaddrinfo_t *req, uv_getaddrinfo_cb cb, const char *node,
                    const char *service, const struct addrinfo *hints)
{
    assert_true(script_pos < script_len);
    assert_null(pending_req); /* one lookup at a time */
    const struct answer *a = &script[script_pos++];
    pending_req = req;
    pending_cb = cb;
    pending_res = a->kind == ANS_ADDRS ? make_ai(a->addrs) : NULL;
    pending_status = a->kind == ANS_FAIL ? UV_EAI_NONAME : 0;
    if (a->kind != ANS_HANG)
        uv_timer_start(&answer_timer, answer_now, 0, 0);
    return 0;
}

static void start_fake(struct fx *fx, const struct answer *s, size_t n, const char *timeout)
{
    char yaml[160];
    struct hs_error err = {0};
    snprintf(yaml, sizeof(yaml),
             "dns: {hostname: gw.hotspan.svc, port: 4318, interval: 10ms, timeout: %s}\n", timeout);
    assert_int_equal(decode(fx, yaml, &err), 0);
    script = s;
    script_len = n;
    script_pos = 0;
    pending_req = NULL;
    fake_frees = 0;
    uv_timer_init(&fx->loop, &answer_timer);
    fx->r = hs_resolver_new(&fx->loop, &fx->conf, "load_balancing", on_change, fx);
    hs_resolver_set_getaddrinfo(fx->r, fake_gai, fake_free);
    assert_int_equal(hs_resolver_start(fx->r), 0);
}

static void stop_fake(struct fx *fx)
{
    uv_close((uv_handle_t *)&answer_timer, NULL);
}

static void test_dns_keeps_last_good_set(void **state)
{
    struct fx *fx = *state;
    static const struct answer s[] = {
        {ANS_ADDRS, {"10.0.0.8", "10.0.0.7"}},
        {ANS_ADDRS, {"10.0.0.7", "10.0.0.8", "10.0.0.7"}}, /* same set, other order */
        {ANS_FAIL},
        {ANS_ADDRS, {NULL}}, /* an empty answer */
        {ANS_ADDRS, {"10.0.0.8", "fd00::5"}},
        {ANS_ADDRS, {"fd00::5", "10.0.0.8"}},
    };
    start_fake(fx, s, HS_ARRAY_SIZE(s), "1s");
    const struct hs_resolver_stats *st = hs_resolver_stats(fx->r);
    run_until(fx, &fx->calls, 1);
    assert_string_equal(fx->last, "10.0.0.7:4318,10.0.0.8:4318");
    run_until(fx, &st->lookups, 4);
    assert_int_equal(fx->calls, 1); /* reordered, failed, empty: no change */
    assert_int_equal(st->failures, 1);
    assert_int_equal(st->empty, 1);
    size_t n;
    const char *const *b = hs_resolver_backends(fx->r, &n);
    assert_int_equal(n, 2);
    assert_string_equal(b[0], "10.0.0.7:4318");
    run_until(fx, &fx->calls, 2);
    assert_string_equal(fx->last, "10.0.0.8:4318,[fd00::5]:4318");
    assert_int_equal(st->changes, 2);
    run_until(fx, &st->lookups, 6);
    assert_int_equal(fx->calls, 2);
    assert_int_equal(fake_frees, 4); /* every non-empty answer freed with the given free */
    stop_fake(fx);
}

static void test_dns_timeout_then_late_answer_dropped(void **state)
{
    struct fx *fx = *state;
    static const struct answer s[] = {
        {ANS_ADDRS, {"10.0.0.7"}},
        {ANS_HANG},
        {ANS_ADDRS, {"10.0.0.9"}},
    };
    start_fake(fx, s, HS_ARRAY_SIZE(s), "10ms");
    const struct hs_resolver_stats *st = hs_resolver_stats(fx->r);
    run_until(fx, &fx->calls, 1);
    run_until(fx, &st->timeouts, 1);
    run_until(fx, &st->skipped, 2); /* ticks go by; no second lookup behind the hung one */
    assert_int_equal(script_pos, 2);
    static const char *const late[] = {"10.0.0.66", NULL};
    release_hung(late);
    run_until(fx, &fx->calls, 2); /* the next lookup, not the late answer, changes the set */
    assert_string_equal(fx->last, "10.0.0.9:4318");
    assert_int_equal(st->changes, 2);
    assert_int_equal(st->timeouts, 1);
    stop_fake(fx);
}

static void test_shutdown_waits_for_running_lookup(void **state)
{
    struct fx *fx = *state;
    static const struct answer s[] = {{ANS_HANG}};
    start_fake(fx, s, HS_ARRAY_SIZE(s), "1s");
    while (script_pos == 0)
        uv_run(&fx->loop, UV_RUN_ONCE);
    hs_resolver_shutdown(fx->r, on_done);
    hs_resolver_shutdown(fx->r, on_done); /* a second call is ignored */
    uv_run(&fx->loop, UV_RUN_NOWAIT);
    assert_int_equal(fx->dones, 0); /* the lookup still owns its request */
    static const char *const addrs[] = {"10.0.0.7", NULL};
    release_hung(addrs);
    run_until(fx, &fx->dones, 1);
    assert_int_equal(fx->calls, 0); /* nothing called back after shutdown */
    stop_fake(fx);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    hs_resolver_free(fx->r);
    fx->r = NULL;
}

static void test_shutdown_before_start(void **state)
{
    struct fx *fx = *state;
    struct hs_error err = {0};
    assert_int_equal(decode(fx, "dns: {hostname: gw.hotspan.svc}\n", &err), 0);
    fx->r = hs_resolver_new(&fx->loop, &fx->conf, "load_balancing", on_change, fx);
    hs_resolver_shutdown(fx->r, on_done);
    assert_int_equal(fx->dones, 1);
    hs_resolver_free(fx->r);
    fx->r = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_defaults_and_mistakes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_answers_once_sorted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_real_getaddrinfo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_keeps_last_good_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_timeout_then_late_answer_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_waits_for_running_lookup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_before_start, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
