/* test_tls.c: TLS on the HTTP server and the exporters' client files: config errors that name
 * the key, the file and OpenSSL's reason (positioned for exporters); handshakes against libcurl
 * in another thread (h2 by ALPN, HTTP/1.1, mTLS refusals counted, plain HTTP answered in plain
 * HTTP); a reload that keeps the old context when the new files are broken. Certificates are made
 * with the openssl CLI in a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/errors.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "net/tls.h"
#include "sock_client.c"

static char dir[256];

/* dir/name, kept until the group ends (configs borrow these strings) */
static char *paths[256];
static size_t npaths;

static const char *path_of(const char *name)
{
    char b[320];
    snprintf(b, sizeof(b), "%s/%s", dir, name);
    for (size_t i = 0; i < npaths; i++)
        if (strcmp(paths[i], b) == 0)
            return paths[i];
    assert_true(npaths < HS_ARRAY_SIZE(paths));
    paths[npaths] = strdup(b);
    return paths[npaths++];
}

/* ---- certificates ------------------------------------------------------------------------- */

static int make_certs(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/hs-test-tls-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char cmd[4096];
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    snprintf(cmd, sizeof(cmd),
             "cd %s && exec >log 2>&1 && "
             "openssl req -x509 -new %s -keyout ca.key -out ca.pem -days 2 -subj /CN=ca "
             "-addext basicConstraints=critical,CA:TRUE && "
             "openssl req -x509 -new %s -keyout other.key -out other.pem -days 2 -subj /CN=other "
             "-addext basicConstraints=critical,CA:TRUE && "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > srv.ext && "
             "openssl req -new %s -keyout srv.key -out srv.csr -subj /CN=srv && "
             "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -set_serial 11 -days 2 "
             "-extfile srv.ext -out srv.pem && "
             "openssl req -new %s -keyout srv2.key -out srv2.csr -subj /CN=srv2 && "
             "openssl x509 -req -in srv2.csr -CA ca.pem -CAkey ca.key -set_serial 22 -days 2 "
             "-extfile srv.ext -out srv2.pem && "
             "openssl req -new %s -keyout cli.key -out cli.csr -subj /CN=cli && "
             "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -set_serial 33 -days 2 "
             "-out cli.pem && "
             "openssl req -new %s -keyout bad.key -out bad.csr -subj /CN=bad && "
             "openssl x509 -req -in bad.csr -CA other.pem -CAkey other.key -set_serial 44 -days 2 "
             "-out bad.pem && "
             "printf 'not a certificate\\n' > junk.pem",
             dir, ec, ec, ec, ec, ec, ec);
    return system(cmd) == 0 ? 0 : -1;
}

static int remove_certs(void **state)
{
    (void)state;
    char cmd[300];
    for (size_t i = 0; i < npaths; i++)
        free(paths[i]);
    npaths = 0;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static bool has_line(const struct hs_error *err, const char *a, const char *b)
{
    for (size_t i = 0; i < err->count; i++)
        if (strstr(err->lines[i], a) && (!b || strstr(err->lines[i], b)))
            return true;
    return false;
}

static void dump(const struct hs_error *err)
{
    for (size_t i = 0; i < err->count; i++)
        print_message("  %s\n", err->lines[i]);
}

/* ---- config errors ------------------------------------------------------------------------ */

static int server_new(const char *cert, const char *key, const char *ca, struct hs_error *err,
                      struct hs_tls_server **out)
{
    struct hs_tls_server_config cf = {.cert_file = (char *)cert,
                                      .key_file = (char *)key,
                                      .client_ca_file = (char *)ca,
                                      .min_version = "1.2"};
    return hs_tls_server_new(&cf, "t", HS_TLS_ALPN_H2_HTTP1, NULL, out, err);
}

static void test_server_config_errors(void **state)
{
    (void)state;
    struct hs_tls_server *s = NULL;
    struct hs_error err = {0};
    assert_int_equal(server_new(path_of("missing.pem"), path_of("srv.key"), NULL, &err, &s),
                     HS_EINVAL);
    dump(&err);
    assert_true(has_line(&err, "tls.cert_file", path_of("missing.pem")));
    assert_true(has_line(&err, "missing.pem", "No such file"));
    hs_error_free(&err);

    /* a key that belongs to another certificate */
    assert_int_equal(server_new(path_of("srv.pem"), path_of("cli.key"), NULL, &err, &s), HS_EINVAL);
    dump(&err);
    assert_true(has_line(&err, "tls.key_file", "is not the key of"));
    assert_true(has_line(&err, path_of("cli.key"), "values mismatch"));
    hs_error_free(&err);

    assert_int_equal(
        server_new(path_of("junk.pem"), path_of("srv.key"), path_of("nope.pem"), &err, &s),
        HS_EINVAL);
    dump(&err);
    assert_true(has_line(&err, "tls.cert_file", path_of("junk.pem")));
    assert_true(has_line(&err, "tls.client_ca_file", path_of("nope.pem")));
    hs_error_free(&err);

    struct hs_tls_server_config cf = {.cert_file = (char *)path_of("srv.pem"),
                                      .key_file = (char *)path_of("srv.key"),
                                      .min_version = "1.3",
                                      .max_version = "1.2"};
    assert_int_equal(hs_tls_server_new(&cf, "t", HS_TLS_ALPN_H2_HTTP1, NULL, &s, &err), HS_EINVAL);
    assert_true(has_line(&err, "max_version 1.2 is below min_version 1.3", NULL));
    hs_error_free(&err);

    assert_int_equal(
        server_new(path_of("srv.pem"), path_of("srv.key"), path_of("ca.pem"), &err, &s), 0);
    assert_int_equal(err.count, 0);
    hs_tls_server_free(s);
}

/* A listener's tls section checked at create time: errors at the keys, with line and column. */
static void test_server_config_positioned(void **state)
{
    (void)state;
    char yaml[1024];
    snprintf(yaml, sizeof(yaml),
             "http:\n  endpoint: 127.0.0.1:0\n  tls:\n    cert_file: %s\n    key_file: %s\n"
             "    client_ca_file: %s\n",
             path_of("srv.pem"), path_of("cli.key"), path_of("nope.pem"));
    struct hs_error err = {0};
    struct hs_config_doc doc = {0};
    assert_int_equal(hs_config_parse("l.yaml", yaml, strlen(yaml), &doc, &err), 0);
    const struct hs_config_node *http = hs_config_get(doc.root, "http");
    static const struct hs_config_field fields[] = {
        {"endpoint", HS_CFG_ENDPOINT, offsetof(struct hs_http_server_config, endpoint), NULL},
        {"server", HS_CFG_INLINE, 0, .sub = hs_http_server_fields_common},
        {0},
    };
    struct hs_http_server_config cf = {0};
    assert_int_equal(hs_config_decode(fields, http, &cf, "receivers.otlp.protocols.http", &err), 0);
    assert_true(cf.tls_enabled);
    assert_int_equal(hs_http_server_config_check(&cf, http, "receivers.otlp.protocols.http", &err),
                     HS_EINVAL);
    dump(&err);
    assert_true(has_line(&err, "l.yaml:5:15: receivers.otlp.protocols.http: tls.key_file",
                         "is not the key of"));
    assert_true(has_line(&err, "l.yaml:6:21: receivers.otlp.protocols.http: tls.client_ca_file",
                         "No such file"));
    hs_error_free(&err);
    hs_config_free_fields(fields, &cf);
    hs_config_doc_free(&doc);
}

/* The tls section as an exporter writes it: decoded, then loaded, errors at the keys. */
static int client_from_yaml(const char *yaml, struct hs_error *err)
{
    struct hs_config_doc doc = {0};
    if (hs_config_parse("t.yaml", yaml, strlen(yaml), &doc, err) != 0)
        return -1;
    const struct hs_config_node *tls = hs_config_get(doc.root, "tls");
    struct hs_tls_client_config cf = {0};
    int rc = hs_config_decode(hs_tls_client_fields, tls, &cf, "exporters.otlp", err);
    struct hs_tls_client *c = NULL;
    if (rc == 0)
        rc = hs_tls_client_new(&cf, tls, "exporters.otlp", &c, err);
    if (rc == 0) {
        assert_true(hs_tls_client_ca(c).len > 0);
        hs_tls_client_free(c);
    }
    hs_config_free_fields(hs_tls_client_fields, &cf);
    hs_config_doc_free(&doc);
    return rc;
}

static void test_client_config_errors(void **state)
{
    (void)state;
    struct hs_error err = {0};
    char yaml[1024];
    snprintf(yaml, sizeof(yaml), "tls:\n  ca_file: %s\n  cert_file: %s\n  key_file: %s\n",
             path_of("missing.pem"), path_of("cli.pem"), path_of("srv.key"));
    assert_int_equal(client_from_yaml(yaml, &err), HS_EINVAL);
    dump(&err);
    /* positioned at the value of each key: line:col of the file */
    assert_true(has_line(&err, "t.yaml:2:12: exporters.otlp: tls.ca_file", "No such file"));
    hs_error_free(&err);

    snprintf(yaml, sizeof(yaml), "tls:\n  ca_file: %s\n  cert_file: %s\n  key_file: %s\n",
             path_of("ca.pem"), path_of("cli.pem"), path_of("srv.key"));
    assert_int_equal(client_from_yaml(yaml, &err), HS_EINVAL);
    dump(&err);
    assert_true(has_line(&err, "t.yaml:4:13: exporters.otlp: tls.key_file", "is not the key of"));
    hs_error_free(&err);

    snprintf(yaml, sizeof(yaml), "tls:\n  ca_file: %s\n  cert_file: %s\n", path_of("junk.pem"),
             path_of("cli.pem"));
    assert_int_equal(client_from_yaml(yaml, &err), HS_EINVAL);
    dump(&err);
    assert_true(has_line(&err, "tls: cert_file and key_file go together", NULL));
    hs_error_free(&err);

    snprintf(yaml, sizeof(yaml), "tls:\n  ca_file: %s\n", path_of("junk.pem"));
    assert_int_equal(client_from_yaml(yaml, &err), HS_EINVAL);
    assert_true(has_line(&err, "t.yaml:2:12: exporters.otlp: tls.ca_file", "junk.pem"));
    hs_error_free(&err);

    snprintf(yaml, sizeof(yaml), "tls:\n  ca_file: %s\n  cert_file: %s\n  key_file: %s\n",
             path_of("ca.pem"), path_of("cli.pem"), path_of("cli.key"));
    assert_int_equal(client_from_yaml(yaml, &err), 0);
    assert_int_equal(err.count, 0);
}

/* ---- handshakes: the server on this thread's loop, curl in another ------------------------- */

struct fix {
    uv_loop_t loop;
    uv_async_t async;
    struct hs_http_server *srv;
    struct hs_http_server_config conf;
    struct hs_metrics *metrics;
    int port;
    void (*client)(struct fix *);
    char fail[512];
    bool done_called;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool reload_done;
    int reload_rc;
    const char *reload_cert, *reload_key; /* what the loop thread reloads when asked */
    int op;                               /* 1: close, 2: reload */
};

#define CHECK(f, cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (!(f)->fail[0])                                                                     \
                snprintf((f)->fail, sizeof((f)->fail), "%s:%d: %s", __FILE__, __LINE__, #cond);    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static void handler(void *ud, struct hs_http_request *req)
{
    char body[128];
    int n = snprintf(body, sizeof(body), "hello over %s, %zu bytes",
                     hs_http_request_is_h2(req) ? "h2" : "http/1.1", req->body_len);
    hs_http_respond(req, 200, "text/plain", NULL, 0, body, (size_t)n);
}

static void on_done(void *ud)
{
    ((struct fix *)ud)->done_called = true;
}

/* The server's reload is done from its loop, as SIGHUP's is. */
static void on_async(uv_async_t *a)
{
    struct fix *f = a->data;
    pthread_mutex_lock(&f->mu);
    int op = f->op;
    pthread_mutex_unlock(&f->mu);
    if (op == 1) {
        hs_http_server_close(f->srv, on_done, f);
        uv_close((uv_handle_t *)a, NULL);
    } else {
        /* the server copied the paths at start: replace the files under them instead */
        char cmd[2048];
        snprintf(cmd, sizeof(cmd), "cp %s %s/live.pem && cp %s %s/live.key", f->reload_cert, dir,
                 f->reload_key, dir);
        f->reload_rc = system(cmd) == 0 ? 0 : -1;
        hs_tls_reload_all();
    }
    pthread_mutex_lock(&f->mu);
    f->reload_done = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void ask_loop(struct fix *f, int op)
{
    pthread_mutex_lock(&f->mu);
    f->op = op;
    f->reload_done = false;
    pthread_mutex_unlock(&f->mu);
    uv_async_send(&f->async);
    pthread_mutex_lock(&f->mu);
    while (!f->reload_done)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void *client_main(void *arg)
{
    struct fix *f = arg;
    f->client(f);
    ask_loop(f, 1);
    return NULL;
}

static void run(struct fix *f, void (*client)(struct fix *))
{
    struct hs_error err = {0};
    const struct hs_http_server_opts opts = {
        .config = &f->conf, .name = "tls-test", .handler = handler, .ud = f, .metrics = f->metrics};
    assert_int_equal(hs_http_server_start(&f->loop, &opts, &f->srv, &err), 0);
    f->port = hs_http_server_port(f->srv);
    assert_int_equal(uv_async_init(&f->loop, &f->async, on_async), 0);
    f->async.data = f;
    f->client = client;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, client_main, f), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
    if (f->fail[0])
        fail_msg("client: %s", f->fail);
    assert_true(f->done_called);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    uv_loop_init(&f->loop);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    if (hs_config_decode(hs_http_server_fields_common, NULL, &f->conf, "test", NULL) != 0)
        return -1;
    f->conf.endpoint = "127.0.0.1:0";
    f->conf.read_timeout_ms = 5000;
    f->conf.tls_enabled = true;
    hs_config_free_fields(hs_tls_server_fields, &f->conf.tls); /* the defaults */
    f->conf.tls = (struct hs_tls_server_config){.cert_file = (char *)path_of("srv.pem"),
                                                .key_file = (char *)path_of("srv.key"),
                                                .min_version = "1.2"};
    f->metrics = hs_metrics_new();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    hs_metrics_free(f->metrics);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
    return 0;
}

struct got {
    CURLcode rc;
    long status, version;
    char body[256];
    size_t len;
    char serial[64];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct got *g = ud;
    size_t k = HS_MIN(size * n, sizeof(g->body) - 1 - g->len);
    memcpy(g->body + g->len, p, k);
    g->len += k;
    g->body[g->len] = '\0';
    return size * n;
}

/* One POST over TLS; cert/key NULL: no client certificate. */
static struct got fetch(int port, long version, const char *cert, const char *key, long max_tls)
{
    struct got g = {0};
    CURL *e = curl_easy_init();
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/traces", port);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CAINFO, path_of("ca.pem"));
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, version);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "abc");
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(e, CURLOPT_CERTINFO, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    if (max_tls)
        curl_easy_setopt(e, CURLOPT_SSLVERSION, max_tls);
    if (cert) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, cert);
        curl_easy_setopt(e, CURLOPT_SSLKEY, key);
    }
    g.rc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &g.status);
    curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &g.version);
    struct curl_certinfo *ci = NULL;
    if (curl_easy_getinfo(e, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci && ci->num_of_certs > 0)
        for (struct curl_slist *l = ci->certinfo[0]; l; l = l->next)
            if (strncmp(l->data, "Serial Number:", 14) == 0)
                snprintf(g.serial, sizeof(g.serial), "%s", l->data + 14);
    curl_easy_cleanup(e);
    return g;
}

static void client_basic(struct fix *f)
{
    struct got g = fetch(f->port, CURL_HTTP_VERSION_2TLS, NULL, NULL, 0);
    CHECK(f, g.rc == CURLE_OK);
    CHECK(f, g.status == 200 && g.version == CURL_HTTP_VERSION_2);
    CHECK(f, strcmp(g.body, "hello over h2, 3 bytes") == 0);
    g = fetch(f->port, CURL_HTTP_VERSION_1_1, NULL, NULL, 0);
    CHECK(f, g.rc == CURLE_OK);
    CHECK(f, g.status == 200 && g.version == CURL_HTTP_VERSION_1_1);
    CHECK(f, strcmp(g.body, "hello over http/1.1, 3 bytes") == 0);
    /* plain HTTP to the TLS port: told so in plain HTTP */
    struct cconn c;
    struct resp r = {0};
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csends(&c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
    for (;;) {
        ssize_t k = cfill(&c);
        if (k <= 0)
            break;
    }
    CHECK(f, c.len > 0 && strncmp(c.buf, "HTTP/1.0 400 Bad Request\r\n", 26) == 0);
    CHECK(f, strstr(c.buf, "this port speaks TLS (client sent plain HTTP)"));
    (void)r;
    (void)exchange; /* sock_client.c's framed reads are for HTTP/1.1 answers */
    (void)ceof;
    cclose(&c);
}

static uint64_t counter(struct fix *f, const char *reason)
{
    char labels[128];
    snprintf(labels, sizeof(labels), "server=\"tls-test\",reason=\"%s\"", reason);
    return hs_metrics_counter(f->metrics, "http_tls_handshake_failures_total", "", labels)->value;
}

static void test_handshake(void **state)
{
    struct fix *f = *state;
    run(f, client_basic);
    assert_int_equal(counter(f, "plaintext"), 1);
}

static void client_mtls(struct fix *f)
{
    struct got g = fetch(f->port, CURL_HTTP_VERSION_2TLS, NULL, NULL, 0);
    CHECK(f, g.rc != CURLE_OK && g.status == 0);
    g = fetch(f->port, CURL_HTTP_VERSION_2TLS, path_of("bad.pem"), path_of("bad.key"), 0);
    CHECK(f, g.rc != CURLE_OK && g.status == 0);
    g = fetch(f->port, CURL_HTTP_VERSION_2TLS, path_of("cli.pem"), path_of("cli.key"), 0);
    CHECK(f, g.rc == CURLE_OK && g.status == 200);
    CHECK(f, strcmp(g.body, "hello over h2, 3 bytes") == 0);
}

static void test_mtls(void **state)
{
    struct fix *f = *state;
    f->conf.tls.client_ca_file = (char *)path_of("ca.pem");
    run(f, client_mtls);
    assert_int_equal(counter(f, "no_client_cert"), 1);
    assert_int_equal(counter(f, "bad_client_cert"), 1);
}

static void client_min_version(struct fix *f)
{
    /* a client that stops at TLS 1.2 against min_version 1.3 */
    struct got g = fetch(f->port, CURL_HTTP_VERSION_1_1, NULL, NULL,
                         CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2);
    CHECK(f, g.rc != CURLE_OK);
    g = fetch(f->port, CURL_HTTP_VERSION_1_1, NULL, NULL, 0);
    CHECK(f, g.rc == CURLE_OK && g.status == 200);
}

static void test_min_version(void **state)
{
    struct fix *f = *state;
    f->conf.tls.min_version = "1.3";
    run(f, client_min_version);
    assert_int_equal(counter(f, "version"), 1);
}

/* A slowloris handshake: the start of a ClientHello, then nothing. */
static void client_slow_handshake(struct fix *f)
{
    struct cconn c;
    CHECK(f, cconnect(f->port, &c, 0));
    CHECK(f, csend(&c, "\x16\x03\x01\x02\x00\x01", 6));
    ssize_t k;
    while ((k = cfill(&c)) > 0) /* until the server closes (the socket's own limit is 5 s) */
        ;
    CHECK(f, k == 0);
    cclose(&c);
}

static void test_handshake_timeout(void **state)
{
    struct fix *f = *state;
    f->conf.read_timeout_ms = 200; /* the handshake counts against it, as a request would */
    run(f, client_slow_handshake);
    assert_int_equal(counter(f, "timeout"), 1);
}

static void client_reload(struct fix *f)
{
    struct got g = fetch(f->port, CURL_HTTP_VERSION_2TLS, NULL, NULL, 0);
    CHECK(f, g.rc == CURLE_OK && g.status == 200);
    CHECK(f,
          strcmp(g.serial, "0b") == 0 || strcmp(g.serial, "b") == 0 || strcmp(g.serial, "0B") == 0);
    /* broken: a key that is not the certificate's; the old context stays */
    f->reload_cert = path_of("srv2.pem");
    f->reload_key = path_of("cli.key");
    ask_loop(f, 2);
    g = fetch(f->port, CURL_HTTP_VERSION_2TLS, NULL, NULL, 0);
    CHECK(f, g.rc == CURLE_OK && g.status == 200);
    CHECK(f,
          strcmp(g.serial, "0b") == 0 || strcmp(g.serial, "b") == 0 || strcmp(g.serial, "0B") == 0);
    f->reload_key = path_of("srv2.key");
    ask_loop(f, 2);
    g = fetch(f->port, CURL_HTTP_VERSION_2TLS, NULL, NULL, 0);
    CHECK(f, g.rc == CURLE_OK && g.status == 200);
    CHECK(f, strcmp(g.serial, "16") == 0);
}

static void test_reload(void **state)
{
    struct fix *f = *state;
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "cp %s/srv.pem %s/live.pem && cp %s/srv.key %s/live.key", dir, dir,
             dir, dir);
    assert_int_equal(system(cmd), 0);
    f->conf.tls.cert_file = (char *)path_of("live.pem");
    f->conf.tls.key_file = (char *)path_of("live.key");
    run(f, client_reload);
}

/* ---- the exporters' client (net/http_client.c) against our own server, one loop ---------- */

struct loop_fix {
    uv_loop_t loop;
    struct hs_http_server *srv;
    struct hs_http_client *client;
    int status;
    char error[256];
    bool body_h2;
};

static void lf_server_closed(void *ud)
{
    (void)ud;
}

static void lf_done(void *ud, const struct hs_http_result *res)
{
    struct loop_fix *lf = ud;
    lf->status = res->status;
    snprintf(lf->error, sizeof(lf->error), "%s", res->error ? res->error : "");
    lf->body_h2 = res->body_len >= 13 && memcmp(res->body, "hello over h2", 13) == 0;
    hs_http_client_close(lf->client, NULL, NULL);
    hs_http_server_close(lf->srv, lf_server_closed, NULL);
}

/* A loopback TLS listener's config with srv.pem; with mtls, client certificates from ca.pem. */
static void tls_listener(struct hs_http_server_config *conf, bool mtls)
{
    memset(conf, 0, sizeof(*conf));
    assert_int_equal(hs_config_decode(hs_http_server_fields_common, NULL, conf, "t", NULL), 0);
    hs_config_free_fields(hs_tls_server_fields, &conf->tls);
    conf->endpoint = "127.0.0.1:0";
    conf->tls_enabled = true;
    conf->tls = (struct hs_tls_server_config){
        .cert_file = (char *)path_of("srv.pem"),
        .key_file = (char *)path_of("srv.key"),
        .client_ca_file = mtls ? (char *)path_of("ca.pem") : NULL,
        .min_version = "1.2"};
}

/* One POST from hs_http_client with `cf` to a TLS server that requires client certs. */
static void client_post(struct loop_fix *lf, const struct hs_tls_client_config *cf, unsigned flags)
{
    memset(lf, 0, sizeof(*lf));
    uv_loop_init(&lf->loop);
    struct hs_http_server_config conf;
    tls_listener(&conf, true);
    const struct hs_http_server_opts opts = {
        .config = &conf, .name = "tls-client-test", .handler = handler, .ud = lf};
    struct hs_error err = {0};
    assert_int_equal(hs_http_server_start(&lf->loop, &opts, &lf->srv, &err), 0);
    struct hs_tls_client *tc = NULL;
    assert_int_equal(hs_tls_client_new(cf, NULL, "exporters.t", &tc, &err), 0);
    lf->client = hs_http_client_new_tls(&lf->loop, flags, tc);
    char url[80];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/v1/traces", hs_http_server_port(lf->srv));
    assert_int_equal(hs_http_client_post(lf->client, url, NULL, 0, "abc", 3, 10000, lf_done, lf),
                     0);
    uv_run(&lf->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&lf->loop), 0);
    hs_tls_client_free(tc);
}

static void test_client_tls(void **state)
{
    (void)state;
    struct loop_fix lf;
    struct hs_tls_client_config cf = {.ca_file = (char *)path_of("ca.pem"),
                                      .cert_file = (char *)path_of("cli.pem"),
                                      .key_file = (char *)path_of("cli.key"),
                                      .min_version = "1.2"};
    client_post(&lf, &cf, 0);
    assert_int_equal(lf.status, 200);
    assert_true(lf.body_h2);                                  /* h2 by ALPN */
    client_post(&lf, &cf, HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE); /* gRPC's flag: h2 over TLS */
    assert_int_equal(lf.status, 200);
    assert_true(lf.body_h2);
    /* the server's name is checked against the override, not the URL's host */
    cf.server_name_override = "nothere.example";
    client_post(&lf, &cf, 0);
    assert_int_equal(lf.status, 0);
    print_message("  override refused: %s\n", lf.error);
    cf.server_name_override = "localhost";
    client_post(&lf, &cf, 0);
    assert_int_equal(lf.status, 200);
    cf.server_name_override = NULL;
    /* no client certificate: the mTLS server refuses */
    cf.cert_file = cf.key_file = NULL;
    client_post(&lf, &cf, 0);
    assert_int_equal(lf.status, 0);
    /* the wrong CA: we refuse the server, unless told to skip verification */
    cf.cert_file = (char *)path_of("cli.pem");
    cf.key_file = (char *)path_of("cli.key");
    cf.ca_file = (char *)path_of("other.pem");
    client_post(&lf, &cf, 0);
    assert_int_equal(lf.status, 0);
    print_message("  wrong CA: %s\n", lf.error);
    cf.insecure_skip_verify = true;
    client_post(&lf, &cf, 0);
    assert_int_equal(lf.status, 200);
}

/* gRPC calls over TLS share connections: h2 comes from ALPN, so the h2c upgrade path that breaks
 * reuse below libcurl 8.0.0 (net/http_client.c, h2_reuse_broken) is never taken. */
#define REUSE_CALLS 16

struct reuse_fix {
    uv_loop_t loop;
    struct hs_http_server *srv;
    struct hs_http_client *client;
    char peers[REUSE_CALLS][64];
    int npeers, handled, done, ok;
    char first_error[256];
};

static void reuse_handler(void *ud, struct hs_http_request *req)
{
    struct reuse_fix *f = ud;
    f->handled++;
    bool seen = false;
    for (int i = 0; i < f->npeers; i++)
        seen |= strcmp(f->peers[i], req->peer) == 0;
    if (!seen && f->npeers < REUSE_CALLS)
        snprintf(f->peers[f->npeers++], sizeof(f->peers[0]), "%s", req->peer);
    hs_http_respond(req, 200, "text/plain", NULL, 0, "ok", 2);
}

static void reuse_done(void *ud, const struct hs_http_result *res)
{
    struct reuse_fix *f = ud;
    f->done++;
    if (res->status == 200)
        f->ok++;
    else if (!f->first_error[0])
        snprintf(f->first_error, sizeof(f->first_error), "status %d: %s", res->status,
                 res->error ? res->error : "");
}

static void reuse_post(struct reuse_fix *f, const char *url)
{
    static const char *const hdrs[] = {"Content-Type: application/grpc", "TE: trailers"};
    static const uint8_t body[] = {0, 0, 0, 0, 3, 'a', 'b', 'c'};
    assert_int_equal(hs_http_client_post(f->client, url, hdrs, 2, body, sizeof(body), 10000,
                                         reuse_done, f),
                     0);
}

static void test_client_tls_grpc_reuse(void **state)
{
    (void)state;
    static struct reuse_fix f;
    memset(&f, 0, sizeof(f));
    uv_loop_init(&f.loop);
    struct hs_http_server_config conf;
    tls_listener(&conf, false);
    const struct hs_http_server_opts opts = {.config = &conf,
                                             .name = "tls-reuse-test",
                                             .handler = reuse_handler,
                                             .ud = &f,
                                             .versions = HS_HTTP_H2C_ONLY};
    struct hs_error err = {0};
    assert_int_equal(hs_http_server_start(&f.loop, &opts, &f.srv, &err), 0);
    struct hs_tls_client *tc = NULL;
    struct hs_tls_client_config cf = {.ca_file = (char *)path_of("ca.pem")};
    assert_int_equal(hs_tls_client_new(&cf, NULL, "exporters.t", &tc, &err), 0);
    f.client = hs_http_client_new_tls(&f.loop, HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE, tc);
    char url[96];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/p.S/Export", hs_http_server_port(f.srv));
    for (int i = 0; i < REUSE_CALLS / 2; i++) { /* one after another */
        reuse_post(&f, url);
        while (f.done < i + 1)
            uv_run(&f.loop, UV_RUN_ONCE);
    }
    for (int i = 0; i < REUSE_CALLS / 2; i++) /* then all at once */
        reuse_post(&f, url);
    while (f.done < REUSE_CALLS)
        uv_run(&f.loop, UV_RUN_ONCE);
    if (f.first_error[0])
        print_message("  first failure: %s\n", f.first_error);
    print_message("  gRPC over TLS: %d calls, %d ok, %d connections\n", f.done, f.ok, f.npeers);
    assert_int_equal(f.ok, REUSE_CALLS);
    assert_int_equal(f.handled, REUSE_CALLS);
    /* the sequential half needs one connection; the concurrent half may open a few while the
     * first handshake is under way, but far from one per call */
    assert_true(f.npeers <= REUSE_CALLS / 4);
    hs_http_client_close(f.client, NULL, NULL);
    hs_http_server_close(f.srv, lf_server_closed, NULL);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    hs_tls_client_free(tc);
}

/* SIGHUP for a client: new PEM bytes (which new connections get), or the old ones kept. */
static void test_client_reload(void **state)
{
    (void)state;
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "cp %s/cli.pem %s/lc.pem && cp %s/cli.key %s/lc.key", dir, dir, dir,
             dir);
    assert_int_equal(system(cmd), 0);
    struct hs_tls_client_config cf = {.cert_file = (char *)path_of("lc.pem"),
                                      .key_file = (char *)path_of("lc.key")};
    struct hs_tls_client *c = NULL;
    struct hs_error err = {0};
    assert_int_equal(hs_tls_client_new(&cf, NULL, "exporters.t", &c, &err), 0);
    struct hs_buf before = {0};
    hs_buf_append(&before, hs_tls_client_cert(c).data, hs_tls_client_cert(c).len);
    /* broken: the key of another certificate; the old bytes stay */
    snprintf(cmd, sizeof(cmd), "cp %s/srv2.pem %s/lc.pem", dir, dir);
    assert_int_equal(system(cmd), 0);
    hs_tls_reload_all();
    assert_int_equal(hs_tls_client_cert(c).len, before.len);
    assert_memory_equal(hs_tls_client_cert(c).data, before.data, before.len);
    snprintf(cmd, sizeof(cmd), "cp %s/srv2.key %s/lc.key", dir, dir);
    assert_int_equal(system(cmd), 0);
    hs_tls_reload_all();
    assert_true(hs_tls_client_cert(c).len != before.len ||
                memcmp(hs_tls_client_cert(c).data, before.data, before.len) != 0);
    hs_buf_free(&before);
    hs_tls_client_free(c);
}

int main(void)
{
    hs_log_setup(HS_LOG_ERROR, false);
    signal(SIGPIPE, SIG_IGN); /* as hotspan does: a peer that went away is an error code */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_config_errors),
        cmocka_unit_test(test_server_config_positioned),
        cmocka_unit_test(test_client_config_errors),
        cmocka_unit_test_setup_teardown(test_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mtls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_min_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload, setup, teardown),
        cmocka_unit_test(test_client_tls),
        cmocka_unit_test(test_client_tls_grpc_reuse),
        cmocka_unit_test(test_client_reload),
    };
    int rc = cmocka_run_group_tests(tests, make_certs, remove_certs);
    curl_global_cleanup();
    return rc;
}
