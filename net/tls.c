/* tls.c: TLS for listeners and exporters (OpenSSL): server contexts and their per-connection
 * memory-BIO transport, client PEM files for libcurl, and the SIGHUP reload of both. */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/queue.h"

#define PEM_MAX (1u << 20) /* a certificate chain, CA bundle or key file larger is refused */

static const char *const version_choices[] = {"1.2", "1.3", NULL};

const struct hs_config_field hs_tls_server_fields[] = {
    {"cert_file", HS_CFG_STRING, offsetof(struct hs_tls_server_config, cert_file), NULL,
     .required = true, .doc = "PEM file: the server certificate, then its intermediates"},
    {"key_file", HS_CFG_STRING, offsetof(struct hs_tls_server_config, key_file), NULL,
     .required = true, .doc = "PEM file: the private key of cert_file"},
    {"client_ca_file", HS_CFG_STRING, offsetof(struct hs_tls_server_config, client_ca_file), NULL,
     .doc = "PEM file of CAs; when set, a client must present a certificate signed by one "
            "(mTLS)"},
    /* no default string: a listener without tls (most) then allocates nothing here, and
     * callers that fill the listener struct by hand need not free it */
    {"min_version", HS_CFG_ENUM, offsetof(struct hs_tls_server_config, min_version), NULL,
     .choices = version_choices, .doc = "lowest TLS version accepted (default: 1.2)"},
    {"max_version", HS_CFG_ENUM, offsetof(struct hs_tls_server_config, max_version), NULL,
     .choices = version_choices, .doc = "highest TLS version accepted (default: the newest)"},
    {0},
};

const struct hs_config_field hs_tls_client_fields[] = {
    {"insecure", HS_CFG_BOOL, offsetof(struct hs_tls_client_config, insecure), "false",
     .doc = "grpc with a host:port endpoint: plaintext HTTP/2 (h2c) instead of TLS"},
    {"ca_file", HS_CFG_STRING, offsetof(struct hs_tls_client_config, ca_file), NULL,
     .doc = "PEM file of CAs that sign the backend's certificate (default: the system's)"},
    {"cert_file", HS_CFG_STRING, offsetof(struct hs_tls_client_config, cert_file), NULL,
     .doc = "PEM file: our client certificate, for backends that require mTLS"},
    {"key_file", HS_CFG_STRING, offsetof(struct hs_tls_client_config, key_file), NULL,
     .doc = "PEM file: the private key of cert_file"},
    {"insecure_skip_verify", HS_CFG_BOOL,
     offsetof(struct hs_tls_client_config, insecure_skip_verify), "false",
     .doc = "accept any server certificate and name (for tests; never in production)"},
    {"min_version", HS_CFG_ENUM, offsetof(struct hs_tls_client_config, min_version), "1.2",
     .choices = version_choices, .doc = "lowest TLS version offered"},
    {"server_name_override", HS_CFG_STRING,
     offsetof(struct hs_tls_client_config, server_name_override), NULL,
     .doc = "the name sent by SNI and checked in the server's certificate, instead of the "
            "endpoint's host"},
    {0},
};

/* Every context in the process, for hs_tls_reload_all, which takes no argument (main.c's
 * SIGHUP handler). The lock only guards the lists; contexts are used from the loop. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hs_queue servers = {&servers, &servers}; /* by their link */
static struct hs_queue clients = {&clients, &clients};

int hs_tls_version(const char *v)
{
    if (!v)
        return 0;
    if (strcmp(v, "1.2") == 0)
        return TLS1_2_VERSION;
    if (strcmp(v, "1.3") == 0)
        return TLS1_3_VERSION;
    return 0;
}

/* OpenSSL's reason for a failure, its error queue emptied; returns the reason code. The first
 * error is the cause ("no start line"), the later ones the callers that gave up ("PEM lib"). */
static int ssl_reason(char *out, size_t n)
{
    unsigned long e, last = 0;
    while ((e = ERR_get_error()) != 0)
        if (!last)
            last = e;
    const char *r = last ? ERR_reason_error_string(last) : NULL;
    snprintf(out, n, "%s", r ? r : "unknown error");
    return last ? ERR_GET_REASON(last) : 0;
}

/* OpenSSL says "system lib" for a file it cannot open: say what the system said. */
static bool unreadable(const char *path, char *why, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        return false;
    }
    snprintf(why, n, "%s", strerror(errno));
    return true;
}

/* A PEM file into memory; the errno text on failure. */
static int read_file(const char *path, struct hs_buf *out, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, whylen, "%s", strerror(errno));
        return HS_EINVAL;
    }
    char chunk[8192];
    size_t n;
    int rc = 0;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (out->len + n > PEM_MAX) {
            snprintf(why, whylen, "larger than %u bytes", PEM_MAX);
            rc = HS_EINVAL;
            break;
        }
        if (hs_buf_append(out, chunk, n) != 0) {
            snprintf(why, whylen, "out of memory");
            rc = HS_EINVAL;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(why, whylen, "%s", strerror(errno));
        rc = HS_EINVAL;
    }
    fclose(f);
    return rc;
}

/* ---- server ------------------------------------------------------------------------------ */

struct hs_tls_server {
    struct hs_queue link; /* in servers */
    char *name;
    char *cert_file, *key_file, *client_ca_file;
    int min_version, max_version;
    enum hs_tls_alpn alpn;
    SSL_CTX *ctx; /* one reference ours; each SSL made from it holds another */
    struct hs_metrics *metrics;
    struct hs_ratelimit log_rl;
};

static const unsigned char alpn_h2_http1[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_h2[] = "\x02h2";

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    const struct hs_tls_server *s = arg;
    bool only = s->alpn == HS_TLS_ALPN_H2_ONLY;
    const unsigned char *ours = only ? alpn_h2 : alpn_h2_http1;
    unsigned ourlen = only ? sizeof(alpn_h2) - 1 : sizeof(alpn_h2_http1) - 1;
    unsigned char *sel;
    unsigned char sellen;
    if (SSL_select_next_proto(&sel, &sellen, ours, ourlen, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        *outlen = sellen;
        return SSL_TLSEXT_ERR_OK;
    }
    /* a gRPC port cannot serve HTTP/1.1; elsewhere no ALPN means HTTP/1.1 (or h2 by preface) */
    return only ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK;
}

/* A context from the files, or NULL with one line per problem in err. */
static SSL_CTX *server_ctx(struct hs_tls_server *s, struct hs_error *err)
{
    char why[256];
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_reason(why, sizeof(why));
        hs_error_addf(err, "%s: tls: cannot make a TLS context: %s", s->name, why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, s->min_version);
    SSL_CTX_set_max_proto_version(ctx, s->max_version);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* an idle keep-alive connection holds no record buffers */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    bool ok = true;
    if (unreadable(s->cert_file, why, sizeof(why)) ||
        (SSL_CTX_use_certificate_chain_file(ctx, s->cert_file) != 1 &&
         ssl_reason(why, sizeof(why)) >= 0)) {
        hs_error_addf(err, "%s: tls.cert_file \"%s\": cannot load: %s", s->name, s->cert_file, why);
        ok = false;
    }
    if (unreadable(s->key_file, why, sizeof(why))) {
        hs_error_addf(err, "%s: tls.key_file \"%s\": cannot load: %s", s->name, s->key_file, why);
        ok = false;
    } else if (SSL_CTX_use_PrivateKey_file(ctx, s->key_file, SSL_FILETYPE_PEM) != 1) {
        if (ssl_reason(why, sizeof(why)) == X509_R_KEY_VALUES_MISMATCH)
            hs_error_addf(err, "%s: tls.key_file \"%s\" is not the key of tls.cert_file \"%s\": %s",
                          s->name, s->key_file, s->cert_file, why);
        else
            hs_error_addf(err, "%s: tls.key_file \"%s\": cannot load: %s", s->name, s->key_file,
                          why);
        ok = false;
    } else if (ok && SSL_CTX_check_private_key(ctx) != 1) {
        ssl_reason(why, sizeof(why));
        hs_error_addf(err, "%s: tls.key_file \"%s\" is not the key of tls.cert_file \"%s\": %s",
                      s->name, s->key_file, s->cert_file, why);
        ok = false;
    }
    if (s->client_ca_file) {
        bool bad = unreadable(s->client_ca_file, why, sizeof(why));
        STACK_OF(X509_NAME) *names = bad ? NULL : SSL_load_client_CA_file(s->client_ca_file);
        if (!names || SSL_CTX_load_verify_locations(ctx, s->client_ca_file, NULL) != 1) {
            if (!bad)
                ssl_reason(why, sizeof(why));
            hs_error_addf(err, "%s: tls.client_ca_file \"%s\": cannot load: %s", s->name,
                          s->client_ca_file, why);
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            ok = false;
        } else {
            SSL_CTX_set_client_CA_list(ctx, names); /* takes names */
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
    }
    /* resumed sessions must stay in the listener that verified them */
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)s->name,
                                   (unsigned)HS_MIN(strlen(s->name), SSL_MAX_SID_CTX_LENGTH));
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, s);
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int hs_tls_server_new(const struct hs_tls_server_config *cf, const char *name,
                      enum hs_tls_alpn alpn, struct hs_metrics *m, struct hs_tls_server **out,
                      struct hs_error *err)
{
    struct hs_tls_server *s = hs_xcalloc(1, sizeof(*s));
    hs_queue_init(&s->link);
    s->name = hs_xstrdup(name ? name : "http");
    s->alpn = alpn;
    s->metrics = m;
    s->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    s->min_version = hs_tls_version(cf->min_version);
    if (!s->min_version)
        s->min_version = TLS1_2_VERSION;
    s->max_version = hs_tls_version(cf->max_version);
    int rc = 0;
    if (!cf->cert_file || !cf->key_file) {
        hs_error_addf(err, "%s: tls: cert_file and key_file are both required", s->name);
        rc = HS_EINVAL;
    }
    if (s->max_version && s->max_version < s->min_version) {
        hs_error_addf(err, "%s: tls: max_version %s is below min_version %s", s->name,
                      cf->max_version, cf->min_version);
        rc = HS_EINVAL;
    }
    if (rc == 0) {
        s->cert_file = hs_xstrdup(cf->cert_file);
        s->key_file = hs_xstrdup(cf->key_file);
        s->client_ca_file = cf->client_ca_file ? hs_xstrdup(cf->client_ca_file) : NULL;
        s->ctx = server_ctx(s, err);
        if (!s->ctx)
            rc = HS_EINVAL;
    }
    if (rc) {
        hs_tls_server_free(s);
        return rc;
    }
    pthread_mutex_lock(&reg_mu);
    hs_queue_insert_head(&servers, &s->link);
    pthread_mutex_unlock(&reg_mu);
    *out = s;
    return 0;
}

int hs_tls_server_check(const struct hs_tls_server_config *cf, const struct hs_config_node *node,
                        const char *path, struct hs_error *err)
{
    static const char *const keys[] = {"cert_file", "key_file", "client_ca_file", "max_version"};
    struct hs_error mine = {0};
    struct hs_tls_server *s = NULL;
    /* a context made and dropped at once: nobody else sees it */
    int rc = hs_tls_server_new(cf, "tls", HS_TLS_ALPN_H2_HTTP1, NULL, &s, &mine);
    hs_tls_server_free(s);
    for (size_t i = 0; i < mine.count; i++) {
        const char *line = mine.lines[i];
        if (strncmp(line, "tls: ", 5) == 0)
            line += 5; /* our name as the listener's: the path says where instead */
        /* at the key the line is about: "tls.key_file ... tls.cert_file" is about the key */
        const struct hs_config_node *at = node;
        for (size_t k = 0; k < HS_ARRAY_SIZE(keys); k++) {
            const struct hs_config_node *n = node ? hs_config_get(node, keys[k]) : NULL;
            const char *hit = strstr(line, keys[k]);
            if (n && hit && hit - line <= 4) {
                at = n;
                break;
            }
        }
        if (at)
            hs_config_errorf(err, at, path, "%s", line);
        else
            hs_error_addf(err, "%s: %s", path, line);
    }
    hs_error_free(&mine);
    return rc;
}

void hs_tls_server_free(struct hs_tls_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&reg_mu);
    hs_queue_remove(&s->link); /* nothing when it never got in */
    pthread_mutex_unlock(&reg_mu);
    /* open connections hold their own reference; the callback's arg (s) is not read by
     * them after the handshake, and handshaking connections are closed before the server */
    SSL_CTX_free(s->ctx);
    free(s->name);
    free(s->cert_file);
    free(s->key_file);
    free(s->client_ca_file);
    free(s);
}

int hs_tls_server_reload(struct hs_tls_server *s, struct hs_error *err)
{
    SSL_CTX *ctx = server_ctx(s, err);
    if (!ctx)
        return HS_EINVAL;
    SSL_CTX_free(s->ctx); /* connections made from it keep it alive */
    s->ctx = ctx;
    return 0;
}

void hs_tls_server_refused(struct hs_tls_server *s, const char *peer, const char *reason,
                           const char *detail)
{
    if (s->metrics) {
        char labels[256];
        snprintf(labels, sizeof(labels), "server=\"%s\",reason=\"%s\"", s->name, reason);
        hs_counter_add(hs_metrics_counter(s->metrics, "http_tls_handshake_failures_total",
                                          "TLS connections refused, by listener and reason",
                                          labels),
                       1);
    }
    uint32_t suppressed = 0;
    if (hs_ratelimit_allow(&s->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(s->name, "%s: TLS refused (%s): %s (%u more since the last line)", peer, reason,
                    detail && detail[0] ? detail : "-", suppressed);
}

/* ---- one connection ---------------------------------------------------------------------- */

struct hs_tls_conn {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    bool established, failed, shut;
    const char *reason;
    char detail[200];
};

struct hs_tls_conn *hs_tls_conn_new(struct hs_tls_server *s)
{
    struct hs_tls_conn *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->ssl = SSL_new(s->ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        SSL_free(t->ssl);
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        free(t);
        return NULL;
    }
    /* an empty read BIO means "wait for more", not end of file */
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_accept_state(t->ssl);
    return t;
}

void hs_tls_conn_free(struct hs_tls_conn *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    free(t);
}

int hs_tls_conn_feed(struct hs_tls_conn *t, const void *data, size_t len)
{
    while (len) {
        int n = BIO_write(t->rbio, data, (int)HS_MIN(len, (size_t)INT32_MAX));
        if (n <= 0)
            return HS_ENOMEM;
        data = (const char *)data + n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sorts a failed handshake into a metric label, from OpenSSL's reason code. */
static void classify_failure(struct hs_tls_conn *t)
{
    unsigned long e, first = 0;
    while ((e = ERR_get_error()) != 0)
        if (!first)
            first = e;
    int r = first ? ERR_GET_REASON(first) : 0;
    long vr = SSL_get_verify_result(t->ssl);
    const char *text = first ? ERR_reason_error_string(first) : NULL;
    switch (r) {
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        t->reason = "no_client_cert";
        break;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
        t->reason = "bad_client_cert";
        break;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_VERSION_TOO_HIGH:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
        t->reason = "version";
        break;
    case SSL_R_NO_APPLICATION_PROTOCOL:
        t->reason = "alpn";
        break;
    default:
        t->reason = "handshake";
    }
    if (r == SSL_R_CERTIFICATE_VERIFY_FAILED && vr != X509_V_OK)
        snprintf(t->detail, sizeof(t->detail), "client certificate: %s",
                 X509_verify_cert_error_string(vr));
    else
        snprintf(t->detail, sizeof(t->detail), "%s", text ? text : "handshake failed");
}

int hs_tls_conn_handshake(struct hs_tls_conn *t)
{
    if (t->failed)
        return HS_EIO;
    if (t->established)
        return 1;
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        t->established = true;
        return 1;
    }
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    t->failed = true;
    classify_failure(t);
    return HS_EIO;
}

bool hs_tls_conn_established(const struct hs_tls_conn *t)
{
    return t->established;
}

const char *hs_tls_conn_reason(const struct hs_tls_conn *t)
{
    return t->reason ? t->reason : "handshake";
}

const char *hs_tls_conn_detail(const struct hs_tls_conn *t)
{
    return t->detail;
}

bool hs_tls_conn_alpn_h2(const struct hs_tls_conn *t)
{
    const unsigned char *p;
    unsigned len;
    SSL_get0_alpn_selected(t->ssl, &p, &len);
    return len == 2 && memcmp(p, "h2", 2) == 0;
}

ssize_t hs_tls_conn_read(struct hs_tls_conn *t, void *buf, size_t cap)
{
    if (t->failed)
        return HS_EIO;
    ERR_clear_error();
    int n = SSL_read(t->ssl, buf, (int)HS_MIN(cap, (size_t)INT32_MAX));
    if (n > 0)
        return n;
    int e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    t->failed = e != SSL_ERROR_ZERO_RETURN;
    return HS_EIO;
}

int hs_tls_conn_write(struct hs_tls_conn *t, const void *data, size_t len)
{
    if (t->failed || !t->established)
        return HS_EIO;
    while (len) {
        ERR_clear_error();
        int n = SSL_write(t->ssl, data, (int)HS_MIN(len, (size_t)1 << 30));
        if (n <= 0) {
            t->failed = true;
            return SSL_get_error(t->ssl, n) == SSL_ERROR_SSL ? HS_EIO : HS_ENOMEM;
        }
        data = (const char *)data + n;
        len -= (size_t)n;
    }
    return 0;
}

void hs_tls_conn_close_notify(struct hs_tls_conn *t)
{
    if (!t->established || t->failed || t->shut)
        return;
    t->shut = true;
    ERR_clear_error();
    SSL_shutdown(t->ssl);
    ERR_clear_error();
}

size_t hs_tls_conn_out_len(const struct hs_tls_conn *t)
{
    return BIO_ctrl_pending(t->wbio);
}

size_t hs_tls_conn_out_take(struct hs_tls_conn *t, void *buf, size_t cap)
{
    int n = BIO_read(t->wbio, buf, (int)HS_MIN(cap, (size_t)INT32_MAX));
    return n > 0 ? (size_t)n : 0;
}

/* ---- client ------------------------------------------------------------------------------ */

struct hs_tls_client {
    struct hs_queue link; /* in clients */
    const struct hs_tls_client_config *cf;
    char *path; /* "exporters.otlp/x.tls", for reload logs */
    struct hs_buf ca, cert, key;
};

/* Checks that the PEM holds what the key says; the reason for the error line otherwise. */
static bool pem_check(const struct hs_buf *b, bool is_key, char *why, size_t n)
{
    ERR_clear_error();
    BIO *bio = BIO_new_mem_buf(b->data, (int)b->len);
    if (!bio) {
        snprintf(why, n, "out of memory");
        return false;
    }
    bool ok;
    if (is_key) {
        EVP_PKEY *k = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
        ok = k != NULL;
        EVP_PKEY_free(k);
    } else {
        X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        ok = x != NULL;
        X509_free(x);
    }
    BIO_free(bio);
    if (!ok)
        ssl_reason(why, n);
    return ok;
}

static bool key_matches(const struct hs_buf *cert, const struct hs_buf *key, char *why, size_t n)
{
    ERR_clear_error();
    BIO *cb = BIO_new_mem_buf(cert->data, (int)cert->len);
    BIO *kb = BIO_new_mem_buf(key->data, (int)key->len);
    X509 *x = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    bool ok = x && k && X509_check_private_key(x, k) == 1;
    if (!ok)
        ssl_reason(why, n);
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(cb);
    BIO_free(kb);
    return ok;
}

/* One file of the client into out; errors positioned at the key's node when there is one. */
static int load_one(const char *file, const char *key, bool is_key,
                    const struct hs_config_node *node, const char *path, struct hs_buf *out,
                    struct hs_error *err)
{
    if (!file)
        return 0;
    char why[256];
    const struct hs_config_node *at = node ? hs_config_get(node, key) : NULL;
    if (read_file(file, out, why, sizeof(why)) != 0 || !pem_check(out, is_key, why, sizeof(why))) {
        if (at)
            hs_config_errorf(err, at, path, "tls.%s: \"%s\": cannot load: %s", key, file, why);
        else
            hs_error_addf(err, "%s: tls.%s: \"%s\": cannot load: %s", path, key, file, why);
        return HS_EINVAL;
    }
    return 0;
}

/* Reads every file into the three buffers; nothing is kept on failure. */
static int client_load(const struct hs_tls_client_config *cf, const struct hs_config_node *node,
                       const char *path, struct hs_buf *ca, struct hs_buf *cert, struct hs_buf *key,
                       struct hs_error *err)
{
    int rc = 0;
    rc |= load_one(cf->ca_file, "ca_file", false, node, path, ca, err);
    rc |= load_one(cf->cert_file, "cert_file", false, node, path, cert, err);
    rc |= load_one(cf->key_file, "key_file", true, node, path, key, err);
    char why[256];
    if (rc == 0 && cert->len && key->len && !key_matches(cert, key, why, sizeof(why))) {
        const struct hs_config_node *at = node ? hs_config_get(node, "key_file") : NULL;
        if (at)
            hs_config_errorf(err, at, path, "tls.key_file: \"%s\" is not the key of \"%s\": %s",
                             cf->key_file, cf->cert_file, why);
        else
            hs_error_addf(err, "%s: tls.key_file: \"%s\" is not the key of \"%s\": %s", path,
                          cf->key_file, cf->cert_file, why);
        rc = HS_EINVAL;
    }
    if (rc) {
        hs_buf_free(ca);
        hs_buf_free(cert);
        hs_buf_free(key);
        return HS_EINVAL;
    }
    return 0;
}

int hs_tls_client_new(const struct hs_tls_client_config *cf, const struct hs_config_node *node,
                      const char *path, struct hs_tls_client **out, struct hs_error *err)
{
    int rc = 0;
    if (!cf->cert_file != !cf->key_file) {
        const struct hs_config_node *at =
            node ? hs_config_get(node, cf->cert_file ? "cert_file" : "key_file") : NULL;
        if (at)
            hs_config_errorf(err, at, path, "tls: cert_file and key_file go together (mTLS)");
        else
            hs_error_addf(err, "%s: tls: cert_file and key_file go together (mTLS)", path);
        rc = HS_EINVAL;
    }
    struct hs_tls_client *c = hs_xcalloc(1, sizeof(*c));
    hs_queue_init(&c->link);
    if (rc == 0)
        rc = client_load(cf, node, path, &c->ca, &c->cert, &c->key, err);
    if (rc) {
        free(c);
        return HS_EINVAL;
    }
    c->cf = cf;
    c->path = hs_xstrdup(path ? path : "exporter");
    pthread_mutex_lock(&reg_mu);
    hs_queue_insert_head(&clients, &c->link);
    pthread_mutex_unlock(&reg_mu);
    *out = c;
    return 0;
}

void hs_tls_client_free(struct hs_tls_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&reg_mu);
    hs_queue_remove(&c->link);
    pthread_mutex_unlock(&reg_mu);
    hs_buf_free(&c->ca);
    hs_buf_free(&c->cert);
    hs_buf_free(&c->key);
    free(c->path);
    free(c);
}

const struct hs_tls_client_config *hs_tls_client_config(const struct hs_tls_client *c)
{
    return c->cf;
}

static struct hs_tls_pem pem_of(const struct hs_buf *b)
{
    return (struct hs_tls_pem){b->data, b->len};
}

struct hs_tls_pem hs_tls_client_ca(const struct hs_tls_client *c)
{
    return pem_of(&c->ca);
}

struct hs_tls_pem hs_tls_client_cert(const struct hs_tls_client *c)
{
    return pem_of(&c->cert);
}

struct hs_tls_pem hs_tls_client_key(const struct hs_tls_client *c)
{
    return pem_of(&c->key);
}

static int client_reload(struct hs_tls_client *c, struct hs_error *err)
{
    struct hs_buf ca = {0}, cert = {0}, key = {0};
    if (client_load(c->cf, NULL, c->path, &ca, &cert, &key, err) != 0)
        return HS_EINVAL;
    hs_buf_free(&c->ca);
    hs_buf_free(&c->cert);
    hs_buf_free(&c->key);
    c->ca = ca;
    c->cert = cert;
    c->key = key;
    return 0;
}

/* ---- reload ------------------------------------------------------------------------------ */

static void log_reload(const char *what, int rc, struct hs_error *err)
{
    if (rc == 0) {
        hs_log_info(what, "TLS files reloaded");
        return;
    }
    for (size_t i = 0; i < err->count; i++)
        hs_log_error(what, "TLS reload failed, the old certificate stays in use: %s",
                     err->lines[i]);
}

void hs_tls_reload_all(void)
{
    pthread_mutex_lock(&reg_mu);
    for (struct hs_queue *q = hs_queue_head(&servers); q != &servers; q = q->next) {
        struct hs_tls_server *s = hs_container_of(q, struct hs_tls_server, link);
        struct hs_error err = {0};
        log_reload(s->name, hs_tls_server_reload(s, &err), &err);
        hs_error_free(&err);
    }
    for (struct hs_queue *q = hs_queue_head(&clients); q != &clients; q = q->next) {
        struct hs_tls_client *c = hs_container_of(q, struct hs_tls_client, link);
        struct hs_error err = {0};
        log_reload(c->path, client_reload(c, &err), &err);
        hs_error_free(&err);
    }
    pthread_mutex_unlock(&reg_mu);
}
