/* test_auth.c: receiver authentication: bearer token(s), token files, htpasswd, per-tenant
 * tokens and the tenant they impose, rotation when a file changes, refusals by reason, config
 * errors naming the file, and the failure counters; and the same checker in front of the admin
 * endpoint (admin_auth), over real sockets: probes open, the rest 401 without a credential,
 * /metrics 403 to a tenant's token, pages told the caller's tenant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <uv.h>

#include "admin/admin.h"
#include "net/auth.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/config.h"
#include "net/http_server.h"
#include "core/metrics.h"

#include "sock_client.c"

static char tmpdir[64];

static int group_setup(void **state)
{
    strcpy(tmpdir, "/tmp/hs-auth-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Writes a file atomically (a new inode, as secret mounts and editors do) and returns its path. */
static const char *write_file(const char *name, const char *text)
{
    static char path[4][128];
    static int next;
    char *p = path[next++ % 4];
    char tmp[160];
    snprintf(p, 128, "%s/%s", tmpdir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, p), 0);
    return p;
}

struct fx {
    struct hs_config_doc doc;
    struct hs_auth_config conf;
    struct hs_auth *auth;
    struct hs_error err;
    int rc;
};

static void build(struct fx *fx, const char *yaml)
{
    memset(fx, 0, sizeof(*fx));
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, &fx->err), 0);
    fx->rc =
        hs_config_decode(hs_auth_fields, fx->doc.root, &fx->conf, "receivers.otlp.auth", &fx->err);
    if (fx->rc == 0)
        fx->rc = hs_auth_new(&fx->conf, fx->doc.root, "receivers.otlp.auth", &fx->auth, &fx->err);
}

static void done(struct fx *fx)
{
    hs_auth_free(fx->auth);
    hs_config_free_fields(hs_auth_fields, &fx->conf);
    hs_config_doc_free(&fx->doc);
    hs_error_free(&fx->err);
}

static bool err_has(const struct fx *fx, const char *needle)
{
    for (size_t i = 0; i < fx->err.count; i++)
        if (strstr(fx->err.lines[i], needle))
            return true;
    return false;
}

/* Checks a request with these headers (NULL value: header absent); returns the result. */
static enum hs_auth_result check2(struct hs_auth *a, const char *authz, const char *orgid,
                                  const char **tenant)
{
    struct hs_http_header h[2];
    size_t n = 0;
    if (authz)
        h[n++] = (struct hs_http_header){HS_STR("authorization"), {authz, strlen(authz)}};
    if (orgid)
        h[n++] = (struct hs_http_header){HS_STR("x-scope-orgid"), {orgid, strlen(orgid)}};
    struct hs_http_request req = {.method = "POST",
                                  .path = HS_STR("/v1/traces"),
                                  .headers = h,
                                  .header_count = n,
                                  .peer = "127.0.0.1:1"};
    const char *t = (const char *)1;
    enum hs_auth_result r = hs_auth_check(a, &req, &t);
    if (r != HS_AUTH_OK)
        assert_null(t);
    if (tenant)
        *tenant = t;
    return r;
}

static enum hs_auth_result check(struct hs_auth *a, const char *authz)
{
    return check2(a, authz, NULL, NULL);
}

static char *basic(const char *userpass)
{
    static char out[256];
    strcpy(out, "Basic ");
    assert_true(strlen(userpass) < 150);
    EVP_EncodeBlock((unsigned char *)out + 6, (const unsigned char *)userpass,
                    (int)strlen(userpass));
    return out;
}

static void test_token(void **state)
{
    struct fx fx;
    build(&fx, "{bearer_token: {token: s3cret-token}}");
    assert_int_equal(fx.rc, 0);
    const char *tenant;
    assert_int_equal(check2(fx.auth, "Bearer s3cret-token", NULL, &tenant), HS_AUTH_OK);
    assert_null(tenant); /* a plain token names no tenant */
    assert_int_equal(check(fx.auth, "bearer   s3cret-token  "), HS_AUTH_OK); /* scheme any case */
    assert_int_equal(check(fx.auth, "Bearer s3cret-tokem"), HS_AUTH_INVALID);
    assert_int_equal(check(fx.auth, NULL), HS_AUTH_MISSING);
    assert_int_equal(check(fx.auth, ""), HS_AUTH_MISSING);
    assert_int_equal(check(fx.auth, "   "), HS_AUTH_MISSING);
    assert_int_equal(check(fx.auth, "Bearer"), HS_AUTH_MALFORMED);
    assert_int_equal(check(fx.auth, "Bearer "), HS_AUTH_MALFORMED);
    assert_int_equal(check(fx.auth, "s3cret-token"), HS_AUTH_BAD_SCHEME); /* no scheme */
    assert_int_equal(check(fx.auth, "Token s3cret-token"), HS_AUTH_BAD_SCHEME);
    assert_int_equal(check(fx.auth, basic("u:s3cret-token")), HS_AUTH_BAD_SCHEME);
    struct hs_http_header ch[2];
    assert_int_equal(hs_auth_challenges(fx.auth, HS_AUTH_MISSING, ch), 1);
    assert_true(hs_str_eq(ch[0].value, "Bearer realm=\"hotspan\""));
    assert_int_equal(hs_auth_challenges(fx.auth, HS_AUTH_INVALID, ch), 1);
    assert_true(hs_str_eq(ch[0].value, "Bearer realm=\"hotspan\", error=\"invalid_token\""));
    done(&fx);
}

/* The hashed comparison has no length shortcut: prefixes, extensions, empty-ish and very long
 * candidates all go through the same path and all fail. */
static void test_wrong_lengths(void **state)
{
    struct fx fx;
    build(&fx, "{bearer_token: {tokens: [abcdef, 0123456789abcdef0123456789]}}");
    assert_int_equal(fx.rc, 0);
    assert_int_equal(check(fx.auth, "Bearer abcdef"), HS_AUTH_OK);
    assert_int_equal(check(fx.auth, "Bearer 0123456789abcdef0123456789"), HS_AUTH_OK);
    const char *wrong[] = {"Bearer a",
                           "Bearer abcde",
                           "Bearer abcdefg",
                           "Bearer abcdef0123456789",
                           "Bearer 0123456789abcdef012345678",
                           "Bearer ABCDEF"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(wrong); i++)
        assert_int_equal(check(fx.auth, wrong[i]), HS_AUTH_INVALID);
    char big[5000] = "Bearer ";
    memset(big + 7, 'a', 3000);
    big[3007] = '\0';
    assert_int_equal(check(fx.auth, big), HS_AUTH_INVALID);
    memset(big + 7, 'a', 4500);
    big[4507] = '\0';
    assert_int_equal(check(fx.auth, big), HS_AUTH_MALFORMED); /* over the bound: not hashed */
    done(&fx);
}

static void test_token_file(void **state)
{
    const char *path = write_file("token", "# rotated by the operator\n\n  file-token-1  \n");
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "{bearer_token: {filename: %s, token: cfg-token}}", path);
    struct fx fx;
    build(&fx, yaml);
    assert_int_equal(fx.rc, 0);
    assert_int_equal(check(fx.auth, "Bearer file-token-1"), HS_AUTH_OK);
    assert_int_equal(check(fx.auth, "Bearer cfg-token"), HS_AUTH_OK);
    assert_int_equal(check(fx.auth, "Bearer # rotated by the operator"), HS_AUTH_INVALID);
    done(&fx);
}

static void test_missing_file_is_positioned_error(void **state)
{
    struct fx fx;
    build(&fx, "bearer_token:\n  filename: /nonexistent/hs-token\n");
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_null(fx.auth);
    assert_true(err_has(&fx, "t.yaml:2:13: receivers.otlp.auth.bearer_token.filename: cannot "
                             "read /nonexistent/hs-token"));
    done(&fx);

    const char *path = write_file("htpasswd-bad", "alice:pw\nbob\n");
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "basic: {htpasswd: {file: %s}}\n", path);
    build(&fx, yaml);
    assert_int_equal(fx.rc, HS_EINVAL);
    char want[200];
    snprintf(want, sizeof(want), "%s:2: expected user:password", path);
    assert_true(err_has(&fx, want));
    done(&fx);
}

static void test_config_mistakes(void **state)
{
    struct fx fx;
    build(&fx, "{}");
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_true(err_has(&fx, "no credentials"));
    done(&fx);
    build(&fx, "{bearer_token: {token: \"\"}}"); /* an unset ${env:...} */
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_true(err_has(&fx, "auth.bearer_token.token: empty"));
    done(&fx);
    build(&fx, "{bearer_token: {}}");
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_true(err_has(&fx, "set token, filename or tokens"));
    done(&fx);
    build(&fx, "{tenants: {\"bad tenant\": x, ok: y}}");
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_true(err_has(&fx, "auth.tenants.bad tenant: not a valid tenant id"));
    done(&fx);
    build(&fx, "{tenants: {team-a: same, team-b: same}}");
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_true(err_has(&fx, "one token is given to tenant"));
    done(&fx);
    build(&fx, "{basic: {htpasswd: {inline: \"alice:$apr1$xyz$abc\"}}}");
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_true(err_has(&fx, "hashed passwords are not supported"));
    done(&fx);
    build(&fx, "{bearer_token: {token: x, header: y}}");
    assert_int_equal(fx.rc, HS_EINVAL);
    assert_true(err_has(&fx, "unknown key (known: token, filename, tokens)"));
    done(&fx);
}

static void test_htpasswd(void **state)
{
    const char *path = write_file("htpasswd", "# users\ncarol:pw:with:colons\n");
    char yaml[256];
    snprintf(yaml, sizeof(yaml),
             "{basic: {htpasswd: {file: %s, inline: \"alice:pw1\\nbob:pw2 \\n\"}}}", path);
    struct fx fx;
    build(&fx, yaml);
    assert_int_equal(fx.rc, 0);
    const char *tenant;
    assert_int_equal(check2(fx.auth, basic("alice:pw1"), NULL, &tenant), HS_AUTH_OK);
    assert_null(tenant);
    assert_int_equal(check(fx.auth, basic("bob:pw2 ")), HS_AUTH_OK); /* a trailing blank counts */
    assert_int_equal(check(fx.auth, basic("bob:pw2")), HS_AUTH_INVALID);
    assert_int_equal(check(fx.auth, basic("carol:pw:with:colons")), HS_AUTH_OK);
    assert_int_equal(check(fx.auth, basic("alice:pw2")), HS_AUTH_INVALID);
    assert_int_equal(check(fx.auth, basic("bob:pw1")), HS_AUTH_INVALID);
    assert_int_equal(check(fx.auth, basic("alice")), HS_AUTH_MALFORMED); /* no ':' */
    assert_int_equal(check(fx.auth, "Basic !!!notbase64"), HS_AUTH_MALFORMED);
    assert_int_equal(check(fx.auth, "Bearer alice:pw1"), HS_AUTH_BAD_SCHEME);
    struct hs_http_header ch[2];
    assert_int_equal(hs_auth_challenges(fx.auth, HS_AUTH_INVALID, ch), 1);
    assert_true(hs_str_eq(ch[0].value, "Basic realm=\"hotspan\", charset=\"UTF-8\""));
    done(&fx);
}

static void test_tenants(void **state)
{
    struct fx fx;
    build(&fx, "{tenants: {team-a: tok-a, team-b: tok-b}, bearer_token: {token: gateway}}");
    assert_int_equal(fx.rc, 0);
    const char *tenant;
    assert_int_equal(check2(fx.auth, "Bearer tok-a", NULL, &tenant), HS_AUTH_OK);
    assert_string_equal(tenant, "team-a");
    assert_int_equal(check2(fx.auth, "Bearer tok-b", "team-a", &tenant), HS_AUTH_OK);
    assert_string_equal(tenant, "team-b");
    assert_int_equal(check2(fx.auth, "Bearer gateway", "team-a", &tenant), HS_AUTH_OK);
    assert_null(tenant);
    assert_int_equal(check(fx.auth, "Bearer tok-c"), HS_AUTH_INVALID);

    /* the token's tenant replaces what the client claims; without one, the header stands */
    struct hs_http_header h = {HS_STR("x-scope-orgid"), HS_STR("team-a")};
    struct hs_http_request req = {.headers = &h, .header_count = 1};
    struct hs_str t;
    assert_true(hs_auth_request_tenant(&req, "team-b", &t));
    assert_true(hs_str_eq(t, "team-b"));
    assert_true(hs_auth_request_tenant(&req, NULL, &t));
    assert_true(hs_str_eq(t, "team-a"));
    h.value = HS_STR("team a\r\nx: y");
    assert_false(hs_auth_request_tenant(&req, NULL, &t));
    assert_true(hs_auth_request_tenant(&req, "team-b", &t)); /* ignored when a token decides */
    req.header_count = 0;
    assert_true(hs_auth_request_tenant(&req, NULL, &t));
    assert_int_equal(t.len, 0);
    done(&fx);
}

static void test_tenant_ids(void **state)
{
    assert_true(hs_tenant_valid("team-a", 6));
    assert_true(hs_tenant_valid("A.b_c!*'()-9", 12));
    assert_false(hs_tenant_valid("", 0));
    assert_false(hs_tenant_valid(".", 1));
    assert_false(hs_tenant_valid("..", 2));
    assert_false(hs_tenant_valid("a/b", 3));
    assert_false(hs_tenant_valid("a b", 3));
    assert_false(hs_tenant_valid("a|b", 3));
    assert_false(hs_tenant_valid("a\0b", 3));
    char id[152];
    memset(id, 'x', sizeof(id));
    assert_true(hs_tenant_valid(id, 150));
    assert_false(hs_tenant_valid(id, 151));
}

/* A tenants file re-read when it changes, at most once a second; a broken version keeps the
 * credentials read before. The clock is the test's, far ahead of the real one, so the checks'
 * own once-a-second look never interferes. */
static void test_rotation(void **state)
{
    const char *path = write_file("tenants", "team-a:tok-1\n");
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "{tenants_file: %s}", path);
    struct fx fx;
    build(&fx, yaml);
    assert_int_equal(fx.rc, 0);
    const char *tenant;
    assert_int_equal(check2(fx.auth, "Bearer tok-1", NULL, &tenant), HS_AUTH_OK);
    assert_string_equal(tenant, "team-a");
    uint64_t t0 = hs_now_ms() + 1000000000;
    hs_auth_refresh(fx.auth, t0);

    write_file("tenants", "team-a:tok-2\nteam-b:tok-b\n");
    hs_auth_refresh(fx.auth, t0 + 999); /* within the second: not looked at */
    assert_int_equal(check(fx.auth, "Bearer tok-1"), HS_AUTH_OK);
    assert_int_equal(check(fx.auth, "Bearer tok-2"), HS_AUTH_INVALID);
    hs_auth_refresh(fx.auth, t0 + 1000);
    assert_int_equal(check(fx.auth, "Bearer tok-1"), HS_AUTH_INVALID); /* revoked */
    assert_int_equal(check2(fx.auth, "Bearer tok-2", NULL, &tenant), HS_AUTH_OK);
    assert_string_equal(tenant, "team-a");
    assert_int_equal(check2(fx.auth, "Bearer tok-b", NULL, &tenant), HS_AUTH_OK);
    assert_string_equal(tenant, "team-b");

    write_file("tenants", "team-a tok-3\n"); /* broken: the last good set stays */
    hs_auth_refresh(fx.auth, t0 + 2000);
    assert_int_equal(check(fx.auth, "Bearer tok-2"), HS_AUTH_OK);
    assert_int_equal(check(fx.auth, "Bearer tok-3"), HS_AUTH_INVALID);
    unlink(path); /* gone for a moment (a rotation half done): still the last good set */
    hs_auth_refresh(fx.auth, t0 + 3000);
    assert_int_equal(check(fx.auth, "Bearer tok-2"), HS_AUTH_OK);
    write_file("tenants", "team-c:tok-3\n");
    hs_auth_refresh(fx.auth, t0 + 4000);
    assert_int_equal(check2(fx.auth, "Bearer tok-3", NULL, &tenant), HS_AUTH_OK);
    assert_string_equal(tenant, "team-c");
    assert_int_equal(check(fx.auth, "Bearer tok-2"), HS_AUTH_INVALID);
    done(&fx);
}

static void test_failures_counted(void **state)
{
    struct hs_metrics *m = hs_metrics_new();
    struct fx fx;
    build(&fx, "{bearer_token: {token: t}}");
    assert_int_equal(fx.rc, 0);
    hs_auth_start(fx.auth, m, "otlp");
    check(fx.auth, NULL);
    check(fx.auth, "Bearer nope");
    check(fx.auth, "Bearer nope2");
    check(fx.auth, "Bearer t");
    struct hs_buf b = {0};
    assert_int_equal(hs_metrics_render(m, &b), 0);
    assert_int_equal(hs_buf_putc(&b, '\0'), 0);
    const char *text = (const char *)b.data;
    assert_non_null(strstr(
        text, "hotspan_receiver_auth_failures_total{receiver=\"otlp\",reason=\"missing\"} 1\n"));
    assert_non_null(strstr(
        text, "hotspan_receiver_auth_failures_total{receiver=\"otlp\",reason=\"invalid\"} 2\n"));
    assert_null(strstr(text, "nope")); /* never the credential */
    hs_buf_free(&b);
    done(&fx);
    hs_metrics_free(m);
}

/* ---- the admin endpoint behind admin_auth ----------------------------------------------- */

struct admin_fx {
    uv_loop_t loop;
    uv_async_t async;
    struct hs_admin *admin;
    int port;
    int page_calls;
    char fail[512];
};

/* A page as the correlator's /ui is one: it answers with who asked. */
static void whoami_page(void *ud, struct hs_http_request *req, const char *tenant)
{
    struct admin_fx *f = ud;
    f->page_calls++;
    char body[200];
    int n = snprintf(body, sizeof(body), "page for %s\n", tenant ? tenant : "an operator");
    hs_http_respond(req, 200, "text/plain", NULL, 0, body, (size_t)n);
}

/* GET path with an Authorization header (NULL: none); checks the status and a substring of the
 * body and, when given, of the head. Records the first failure in f->fail. */
static void expect_get(struct admin_fx *f, const char *path, const char *authz, int status,
                       const char *body_has, const char *head_has)
{
    struct cconn c;
    struct resp r = {0};
    char req[512];
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n%s%s%s\r\n", path,
             authz ? "Authorization: " : "", authz ? authz : "", authz ? "\r\n" : "");
    bool ok = cconnect(f->port, &c, 0) && exchange(&c, req, &r);
    cclose(&c);
    if (!f->fail[0] && (!ok || r.status != status || (body_has && !strstr(r.body, body_has)) ||
                        (head_has && !strstr(r.head, head_has))))
        snprintf(f->fail, sizeof(f->fail), "GET %s (%s): got %d %.200s%.200s", path,
                 authz ? authz : "no credentials", r.status, r.head, r.body ? r.body : "");
    free(r.body);
}

static void *admin_client(void *arg)
{
    struct admin_fx *f = arg;
    (void)ceof; /* sock_client.c's, for other tests */
    /* probes carry no credentials */
    expect_get(f, "/healthz/live", NULL, 200, "\"ok\"", NULL);
    expect_get(f, "/healthz/ready", NULL, 200, "\"ok\"", NULL);
    expect_get(f, "/healthz", NULL, 200, "\"ok\"", NULL);
    /* everything else does; the page is not even asked */
    expect_get(f, "/metrics", NULL, 401, "missing credentials",
               "www-authenticate: Bearer realm=\"hotspan\"");
    expect_get(f, "/ui", NULL, 401, "missing credentials", NULL);
    expect_get(f, "/ui/span/0102030405060708", "Bearer wrong", 401, "invalid credentials",
               "error=\"invalid_token\"");
    expect_get(f, "/nowhere", NULL, 401, NULL, NULL);
    expect_get(f, "/ui", basic("ops:pw"), 200, "page for an operator", NULL);
    /* a tenant's token: its own tenant's pages, not every tenant's counts */
    expect_get(f, "/ui", "Bearer tok-a", 200, "page for team-a", NULL);
    expect_get(f, "/metrics", "Bearer tok-a", 403, "tenant \"team-a\"'s", NULL);
    expect_get(f, "/metrics", "Bearer ops-token", 200,
               "hotspan_receiver_auth_failures_total{receiver=\"admin\",reason=\"missing\"} 3",
               NULL);
    expect_get(f, "/nowhere", "Bearer ops-token", 404, NULL, NULL);
    uv_async_send(&f->async);
    return NULL;
}

static void admin_closed(void *ud)
{
    uv_close((uv_handle_t *)&((struct admin_fx *)ud)->async, NULL);
}

static void on_client_done(uv_async_t *a)
{
    struct admin_fx *f = a->data;
    hs_admin_close(f->admin, admin_closed, f);
}

static void test_admin_endpoint_behind_auth(void **state)
{
    struct fx fx;
    build(&fx, "{tenants: {team-a: tok-a}, bearer_token: {token: ops-token}, "
               "basic: {htpasswd: {inline: \"ops:pw\"}}}");
    assert_int_equal(fx.rc, 0);
    struct admin_fx f = {0};
    struct hs_metrics *m = hs_metrics_new();
    struct hs_error err = {0};
    uv_loop_init(&f.loop);
    assert_int_equal(hs_admin_start(&f.loop, "127.0.0.1:0", NULL, m, &f.admin, &err), 0);
    hs_admin_set_auth(f.admin, fx.auth);
    hs_admin_set_ready(f.admin, true);
    assert_int_equal(hs_admin_route(f.admin, "/ui", whoami_page, &f), 0);
    f.port = hs_admin_port(f.admin);
    assert_true(f.port > 0);
    uv_async_init(&f.loop, &f.async, on_client_done);
    f.async.data = &f;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, admin_client, &f), 0);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
    if (f.fail[0])
        fail_msg("%s", f.fail);
    assert_int_equal(f.page_calls, 2); /* never for a refused caller */
    assert_int_equal(uv_loop_close(&f.loop), 0);
    hs_error_free(&err);
    done(&fx);
    hs_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token),
        cmocka_unit_test(test_wrong_lengths),
        cmocka_unit_test(test_token_file),
        cmocka_unit_test(test_missing_file_is_positioned_error),
        cmocka_unit_test(test_config_mistakes),
        cmocka_unit_test(test_htpasswd),
        cmocka_unit_test(test_tenants),
        cmocka_unit_test(test_tenant_ids),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_failures_counted),
        cmocka_unit_test(test_admin_endpoint_behind_auth),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
