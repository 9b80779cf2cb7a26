/* nats.c: a NATS connection used from one libuv loop (nats.h). libnats keeps the socket on its
 * own threads (reader, flusher, reconnect) and calls us back there: every callback only pushes
 * an event under a mutex and wakes the loop with one uv_async_t, which handles them in order.
 * Blocking calls (connect, close, JetStream API requests) run on the thread pool. Teardown waits
 * for libnats' last word about our objects (the inbox subscription's on-complete and the
 * connection's closed callback) before the loop lets go of the shared state. */
#include "nats.h"

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/metrics.h"

/* libnats' client pings: a dead peer that sends no RST is noticed after about 2 intervals. */
#define PING_INTERVAL_MS 10000
#define MAX_PINGS_OUT 2
/* A connect that failed for another reason than an unreachable server (files, TLS). */
#define CONNECT_RETRY_MS 5000

enum ev_kind {
    EV_MSG,
    EV_CONNECTED,
    EV_DISCONNECTED,
    EV_RECONNECTED,
    EV_CLOSED,
    EV_SUB_DONE,
    EV_ERROR
};

struct ev {
    enum ev_kind kind;
    natsMsg *msg;
    natsStatus status; /* EV_ERROR */
};

struct hs_nats {
    const struct hs_nats_config *conf;
    const struct hs_tls_client *tls;
    char *name;
    struct hs_nats_hooks hooks;
    void *ud;
    uv_loop_t *loop;
    struct hs_metrics *metrics;
    struct hs_counter *reconnects;
    /* the bridge from libnats' threads: guarded by mu */
    uv_mutex_t mu;
    struct ev *evs;
    size_t nev, cap;
    bool stop_msgs; /* closing: inbox messages are dropped at once */
    uv_async_t async;
    uv_timer_t retry;
    /* the loop's */
    natsOptions *opts;
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *sub;
    char inbox[64];
    int64_t max_payload;
    uv_work_t connect_work, close_work;
    natsStatus connect_status;
    char connect_err[256];
    bool started, connecting, connected, closing, close_queued, close_done, closed_cb, sub_done;
    bool restart;     /* libnats closed the connection: a new one once it let go of it */
    unsigned calls;   /* JetStream calls on the pool */
    unsigned handles; /* ours still open in the loop */
    void (*closed)(void *ud);
    void *closed_ud;
    struct hs_ratelimit log_rl;
};

/* ---- the rows ---------------------------------------------------------------------------- */

static const struct hs_config_field user_fields[] = {
    {"username", HS_CFG_STRING, offsetof(struct hs_nats_user_config, username), NULL,
     .required = true, .doc = "user name"},
    {"password", HS_CFG_STRING, offsetof(struct hs_nats_user_config, password), NULL,
     .doc = "password (use ${env:VAR} rather than writing it in the file)"},
    {0},
};

static const struct hs_config_field nkey_fields[] = {
    {"public_key", HS_CFG_STRING, offsetof(struct hs_nats_nkey_config, public_key), NULL,
     .required = true, .doc = "the user's NKey public key (U...)"},
    {"seed_file", HS_CFG_STRING, offsetof(struct hs_nats_nkey_config, seed_file), NULL,
     .required = true, .doc = "file holding the NKey seed (SU...) that signs the server's nonce"},
    {0},
};

static const struct hs_config_field creds_fields[] = {
    {"user_file", HS_CFG_STRING, offsetof(struct hs_nats_creds_config, user_file), NULL,
     .required = true, .doc = "a .creds file: the user JWT and its NKey seed (nsc's output)"},
    {0},
};

static const struct hs_config_field auth_fields[] = {
    {"token", HS_CFG_STRING, offsetof(struct hs_nats_auth_config, token), NULL,
     .doc = "an authorization token"},
    {"user", HS_CFG_SECTION, offsetof(struct hs_nats_auth_config, user), NULL, .sub = user_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_nats_auth_config, has_user),
     .doc = "user name and password"},
    {"nkey", HS_CFG_SECTION, offsetof(struct hs_nats_auth_config, nkey), NULL, .sub = nkey_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_nats_auth_config, has_nkey),
     .doc = "an NKey: public key and seed file"},
    {"nkey_user_file", HS_CFG_SECTION, offsetof(struct hs_nats_auth_config, creds), NULL,
     .sub = creds_fields, .has_presence = true,
     .presence_offset = offsetof(struct hs_nats_auth_config, has_creds),
     .doc = "decentralized auth: a user credentials file (JWT and seed)"},
    {0},
};

/* core/tls.h's client rows that mean something to libnats (it has no TLS version floor and
 * no plaintext mode: a nats:// server without the section is plaintext). */
static const struct hs_config_field tls_fields[] = {
    {"ca_file", HS_CFG_STRING, offsetof(struct hs_tls_client_config, ca_file), NULL,
     .doc = "PEM file of CAs that sign the servers' certificates (default: the system's)"},
    {"cert_file", HS_CFG_STRING, offsetof(struct hs_tls_client_config, cert_file), NULL,
     .doc = "PEM file: our client certificate, for servers that verify clients"},
    {"key_file", HS_CFG_STRING, offsetof(struct hs_tls_client_config, key_file), NULL,
     .doc = "PEM file: the private key of cert_file"},
    {"insecure_skip_verify", HS_CFG_BOOL,
     offsetof(struct hs_tls_client_config, insecure_skip_verify), "false",
     .doc = "accept any server certificate and name (for tests; never in production)"},
    {"server_name_override", HS_CFG_STRING,
     offsetof(struct hs_tls_client_config, server_name_override), NULL,
     .doc = "the name the servers' certificates must carry, instead of the URL's host"},
    {0},
};

const struct hs_config_field hs_nats_fields[] = {
    {"servers", HS_CFG_STRLIST, offsetof(struct hs_nats_config, servers), NULL,
     .doc = "URLs of the NATS servers (nats://host:port, tls://host:port); give every node of "
            "the cluster, the client fails over between them"},
    {"endpoint", HS_CFG_STRING, offsetof(struct hs_nats_config, endpoint), NULL,
     .doc = "one server URL, instead of servers"},
    {"auth", HS_CFG_SECTION, offsetof(struct hs_nats_config, auth), NULL, .sub = auth_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_nats_config, has_auth),
     .doc = "credentials, at most one kind; none: anonymous"},
    {"tls", HS_CFG_SECTION, offsetof(struct hs_nats_config, tls), NULL, .sub = tls_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_nats_config, has_tls),
     .doc = "TLS to the servers (also turned on by a tls:// URL)"},
    {"connect_timeout", HS_CFG_DURATION, offsetof(struct hs_nats_config, connect_timeout_ms), "2s",
     .min = 10, .max = 600000, .doc = "time limit of one connection attempt to one server"},
    {"reconnect_wait", HS_CFG_DURATION, offsetof(struct hs_nats_config, reconnect_wait_ms), "250ms",
     .min = 10, .max = 600000,
     .doc = "wait between two reconnection rounds (forever: the client never gives up)"},
    {"request_timeout", HS_CFG_DURATION, offsetof(struct hs_nats_config, request_timeout_ms), "5s",
     .min = 100, .max = 600000,
     .doc = "time limit of one JetStream API call (stream and consumer setup), retried after"},
    {0},
};

/* ---- create-time checks ------------------------------------------------------------------ */

static bool url_ok(const char *u)
{
    return (strncmp(u, "nats://", 7) == 0 && u[7]) || (strncmp(u, "tls://", 6) == 0 && u[6]);
}

static void check_urls(const struct hs_nats_config *c, const struct hs_config_node *cfg,
                       const char *path, struct hs_error *err)
{
    if (c->endpoint && c->servers.count)
        hs_config_errorf(err, hs_config_get(cfg, "endpoint"), path,
                         "endpoint: give servers or endpoint, not both");
    else if (!c->endpoint && !c->servers.count)
        hs_config_errorf(err, cfg, path, "servers: required (the URLs of the NATS servers)");
    if (c->endpoint && !url_ok(c->endpoint))
        hs_config_errorf(err, hs_config_get(cfg, "endpoint"), path,
                         "endpoint: \"%s\" is not a nats:// or tls:// URL", c->endpoint);
    const struct hs_config_node *list = hs_config_get(cfg, "servers");
    const struct hs_config_node *item = list ? list->child : NULL;
    for (size_t i = 0; i < c->servers.count; i++, item = item ? item->next : NULL)
        if (!url_ok(c->servers.items[i]))
            hs_config_errorf(err, item ? item : list, path,
                             "servers[%zu]: \"%s\" is not a nats:// or tls:// URL", i,
                             c->servers.items[i]);
}

static void check_file(const char *file, const struct hs_config_node *at, const char *path,
                       const char *key, struct hs_error *err)
{
    FILE *f = file ? fopen(file, "r") : NULL;
    if (file && !f)
        hs_config_errorf(err, at, path, "%s: cannot read %s", key, file);
    if (f)
        fclose(f);
}

static void check_auth(const struct hs_nats_auth_config *a, const struct hs_config_node *node,
                       const char *path, struct hs_error *err)
{
    int ways = (a->token != NULL) + a->has_user + a->has_nkey + a->has_creds;
    if (ways > 1)
        hs_config_errorf(err, node, path,
                         "auth: give one of token, user, nkey, nkey_user_file (%d given)", ways);
    if (a->has_nkey)
        check_file(a->nkey.seed_file, hs_config_get(hs_config_get(node, "nkey"), "seed_file"), path,
                   "auth.nkey.seed_file", err);
    if (a->has_creds)
        check_file(a->creds.user_file,
                   hs_config_get(hs_config_get(node, "nkey_user_file"), "user_file"), path,
                   "auth.nkey_user_file.user_file", err);
}

int hs_nats_check(const struct hs_nats_config *c, const struct hs_config_node *cfg,
                  const char *path, struct hs_tls_client **tls, struct hs_error *err)
{
    size_t before = err->count;
    *tls = NULL;
    check_urls(c, cfg, path, err);
    if (c->has_auth)
        check_auth(&c->auth, hs_config_get(cfg, "auth"), path, err);
    if (c->has_tls && hs_tls_client_new(&c->tls, hs_config_get(cfg, "tls"), path, tls, err) != 0)
        *tls = NULL;
    if (err->count == before)
        return 0;
    hs_tls_client_free(*tls);
    *tls = NULL;
    return HS_EINVAL;
}

/* ---- the bridge: libnats' threads to the loop ------------------------------------------- */

static void push(struct hs_nats *n, struct ev e)
{
    uv_mutex_lock(&n->mu);
    if (e.kind == EV_MSG && n->stop_msgs) {
        uv_mutex_unlock(&n->mu);
        natsMsg_Destroy(e.msg);
        return;
    }
    if (n->nev == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 64;
        struct ev *v = realloc(n->evs, cap * sizeof(*v));
        if (!v && e.kind != EV_MSG)
            abort(); /* a control event cannot be lost (as hs_xmalloc) */
        if (!v) {    /* a dropped ack times out, a dropped pulled message comes again */
            uv_mutex_unlock(&n->mu);
            natsMsg_Destroy(e.msg);
            return;
        }
        n->evs = v;
        n->cap = cap;
    }
    n->evs[n->nev++] = e;
    uv_async_send(&n->async); /* under the lock: the loop frees n only after our last push */
    uv_mutex_unlock(&n->mu);
}

static void on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    push(closure, (struct ev){EV_MSG, msg, NATS_OK});
}

static void on_sub_done(void *closure)
{
    push(closure, (struct ev){EV_SUB_DONE, NULL, NATS_OK});
}

static void on_connected(natsConnection *nc, void *closure)
{
    push(closure, (struct ev){EV_CONNECTED, NULL, NATS_OK});
}

static void on_disconnected(natsConnection *nc, void *closure)
{
    push(closure, (struct ev){EV_DISCONNECTED, NULL, NATS_OK});
}

static void on_reconnected(natsConnection *nc, void *closure)
{
    push(closure, (struct ev){EV_RECONNECTED, NULL, NATS_OK});
}

static void on_closed(natsConnection *nc, void *closure)
{
    push(closure, (struct ev){EV_CLOSED, NULL, NATS_OK});
}

static void on_error(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure)
{
    push(closure, (struct ev){EV_ERROR, NULL, s});
}

static void maybe_finish_close(struct hs_nats *n);
static void maybe_restart(struct hs_nats *n);

static void set_connected(struct hs_nats *n, bool up)
{
    if (n->connected == up)
        return;
    n->connected = up;
    if (up) {
        n->max_payload = natsConnection_GetMaxPayload(n->nc);
        char url[256] = "";
        natsConnection_GetConnectedUrl(n->nc, url, sizeof(url));
        hs_log_info(n->name, "connected to NATS at %s (max_payload %lld bytes)", url,
                    (long long)n->max_payload);
    }
    if (n->hooks.on_state && !n->closing)
        n->hooks.on_state(n->ud, up);
}

static void handle(struct hs_nats *n, struct ev *e)
{
    uint32_t suppressed;
    switch (e->kind) {
    case EV_MSG:
        if (n->closing || !n->hooks.on_msg)
            natsMsg_Destroy(e->msg);
        else
            n->hooks.on_msg(n->ud, e->msg);
        break;
    case EV_CONNECTED:
        set_connected(n, true);
        break;
    case EV_RECONNECTED:
        hs_counter_add(n->reconnects, 1);
        set_connected(n, true);
        break;
    case EV_DISCONNECTED:
        if (!n->closing && n->connected)
            hs_log_warn(n->name, "disconnected from NATS: reconnecting");
        set_connected(n, false);
        break;
    case EV_ERROR:
        if (hs_ratelimit_allow(&n->log_rl, hs_now_ms(), &suppressed))
            hs_log_warn(n->name, "NATS: %s (%u similar messages suppressed)",
                        natsStatus_GetText(e->status), suppressed);
        break;
    case EV_CLOSED:
        n->closed_cb = true;
        set_connected(n, false);
        /* libnats gave up on it (refused credentials): a new one, later; while connecting,
         * connect_done says why (n->nc is the pool thread's until then) */
        if (!n->closing && !n->restart && !n->connecting) {
            const char *why = NULL;
            natsConnection_GetLastError(n->nc, &why);
            hs_log_error(n->name, "NATS connection closed (%s): connecting again in %d s",
                         why && why[0] ? why : "no reason given", CONNECT_RETRY_MS / 1000);
        }
        if (!n->closing)
            n->restart = true;
        break;
    case EV_SUB_DONE:
        n->sub_done = true;
        break;
    }
}

static void on_async(uv_async_t *a)
{
    struct hs_nats *n = a->data;
    uv_mutex_lock(&n->mu);
    struct ev *v = n->evs;
    size_t count = n->nev;
    n->evs = NULL;
    n->nev = n->cap = 0;
    uv_mutex_unlock(&n->mu);
    for (size_t i = 0; i < count; i++)
        handle(n, &v[i]);
    free(v);
    maybe_restart(n);
    maybe_finish_close(n);
}

/* ---- options ---------------------------------------------------------------------------- */

/* A PEM of the TLS files as libnats wants it: a C string. */
static char *pem_string(struct hs_tls_pem p)
{
    if (!p.len)
        return NULL;
    char *s = hs_xmalloc(p.len + 1);
    memcpy(s, p.data, p.len);
    s[p.len] = '\0';
    return s;
}

static natsStatus tls_options(struct hs_nats *n, natsOptions *o)
{
    const struct hs_nats_config *c = n->conf;
    natsStatus s = natsOptions_SetSecure(o, true);
    char *ca = pem_string(hs_tls_client_ca(n->tls));
    char *cert = pem_string(hs_tls_client_cert(n->tls));
    char *key = pem_string(hs_tls_client_key(n->tls));
    if (s == NATS_OK && ca)
        s = natsOptions_SetCATrustedCertificates(o, ca);
    if (s == NATS_OK && cert && key)
        s = natsOptions_SetCertificatesChain(o, cert, key);
    if (s == NATS_OK && c->tls.insecure_skip_verify)
        s = natsOptions_SkipServerVerification(o, true);
    if (s == NATS_OK && c->tls.server_name_override)
        s = natsOptions_SetExpectedHostname(o, c->tls.server_name_override);
    free(ca);
    free(cert);
    free(key);
    return s;
}

static natsStatus auth_options(const struct hs_nats_auth_config *a, natsOptions *o)
{
    if (a->token)
        return natsOptions_SetToken(o, a->token);
    if (a->has_user)
        return natsOptions_SetUserInfo(o, a->user.username, a->user.password);
    if (a->has_nkey)
        return natsOptions_SetNKeyFromSeed(o, a->nkey.public_key, a->nkey.seed_file);
    if (a->has_creds)
        return natsOptions_SetUserCredentialsFromFiles(o, a->creds.user_file, NULL);
    return NATS_OK;
}

static natsStatus build_options(struct hs_nats *n, natsOptions **out)
{
    const struct hs_nats_config *c = n->conf;
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    const char *one[1] = {c->endpoint};
    char name[300];
    snprintf(name, sizeof(name), "hotspan %s", n->name);
    if (s == NATS_OK)
        s = c->servers.count
                ? natsOptions_SetServers(o, (const char **)c->servers.items, (int)c->servers.count)
                : natsOptions_SetServers(o, one, 1);
    if (s == NATS_OK)
        s = natsOptions_SetName(o, name);
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(o, (int64_t)c->connect_timeout_ms);
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(o, -1);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(o, (int64_t)c->reconnect_wait_ms);
    if (s == NATS_OK)
        s = natsOptions_SetPingInterval(o, PING_INTERVAL_MS);
    if (s == NATS_OK)
        s = natsOptions_SetMaxPingsOut(o, MAX_PINGS_OUT);
    if (s == NATS_OK) /* a JetStream call during a failover fails now, and is retried */
        s = natsOptions_SetFailRequestsOnDisconnect(o, true);
    if (s == NATS_OK)
        s = natsOptions_SetRetryOnFailedConnect(o, true, on_connected, n);
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(o, on_disconnected, n);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectedCB(o, on_reconnected, n);
    if (s == NATS_OK)
        s = natsOptions_SetClosedCB(o, on_closed, n);
    if (s == NATS_OK)
        s = natsOptions_SetErrorHandler(o, on_error, n);
    if (s == NATS_OK && c->has_auth)
        s = auth_options(&c->auth, o);
    bool secure = c->has_tls || (c->endpoint && strncmp(c->endpoint, "tls://", 6) == 0);
    for (size_t i = 0; i < c->servers.count; i++)
        secure |= strncmp(c->servers.items[i], "tls://", 6) == 0;
    if (s == NATS_OK && secure && n->tls)
        s = tls_options(n, o);
    else if (s == NATS_OK && secure)
        s = natsOptions_SetSecure(o, true);
    if (s != NATS_OK) {
        natsOptions_Destroy(o);
        return s;
    }
    *out = o;
    return NATS_OK;
}

/* ---- connect ---------------------------------------------------------------------------- */

static void connect_work(uv_work_t *w)
{
    struct hs_nats *n = w->data;
    natsConnection *nc = NULL;
    /* retry-on-failed-connect: one pass over the servers here, then libnats' reconnect thread
     * keeps trying and on_connected says when it got through */
    n->connect_status = natsConnection_Connect(&nc, n->opts);
    n->connect_err[0] = '\0';
    if (n->connect_status != NATS_OK) {
        natsStatus st;
        const char *e = NULL;
        if (nc)
            natsConnection_GetLastError(nc, &e);
        if (!e || !e[0])
            e = nats_GetLastError(&st);
        snprintf(n->connect_err, sizeof(n->connect_err), "%s",
                 e && e[0] ? e : natsStatus_GetText(n->connect_status));
    }
    n->nc = nc;
}

static void begin_connect(struct hs_nats *n);

static void on_retry(uv_timer_t *t)
{
    begin_connect(t->data);
}

/* The connection exists (up or retrying): our inbox and JetStream context. */
static int attach(struct hs_nats *n)
{
    natsInbox *inbox = NULL;
    natsStatus s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
        snprintf(n->inbox, sizeof(n->inbox), "%s", inbox);
        natsInbox_Destroy(inbox);
        char subj[80];
        snprintf(subj, sizeof(subj), "%s.>", n->inbox);
        s = natsConnection_Subscribe(&n->sub, n->nc, subj, on_msg, n);
    }
    /* our own requests bound what comes: no need for libnats' slow-consumer limits */
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(n->sub, -1, -1);
    if (s == NATS_OK)
        s = natsSubscription_SetOnCompleteCB(n->sub, on_sub_done, n);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = (int64_t)n->conf->request_timeout_ms;
    if (s == NATS_OK)
        s = natsConnection_JetStream(&n->js, n->nc, &jo);
    if (s != NATS_OK) {
        hs_log_error(n->name, "NATS: cannot subscribe to its inbox: %s", natsStatus_GetText(s));
        return HS_EIO;
    }
    return 0;
}

static void connect_done(uv_work_t *w, int status)
{
    struct hs_nats *n = w->data;
    n->connecting = false;
    if (n->nc && natsConnection_IsClosed(n->nc) && !n->closing) { /* refused for good */
        hs_log_error(n->name, "cannot connect to NATS: %s (again in %d s)", n->connect_err,
                     CONNECT_RETRY_MS / 1000);
        n->restart = true;
        n->sub_done = true; /* no subscription: no on-complete to wait for */
    } else if (n->nc) {
        if (!n->closing)
            attach(n);                /* logged; the connection still closes cleanly without it */
        n->sub_done = n->sub == NULL; /* no subscription: no on-complete to wait for */
        if (n->connect_status == NATS_OK)
            set_connected(n, true);
        else if (!n->closing)
            hs_log_warn(n->name, "not connected to NATS yet (%s): retrying every %llu ms",
                        n->connect_err, (unsigned long long)n->conf->reconnect_wait_ms);
    } else if (!n->closing) {
        hs_log_error(n->name, "cannot connect to NATS: %s (again in %d s)", n->connect_err,
                     CONNECT_RETRY_MS / 1000);
        uv_timer_start(&n->retry, on_retry, CONNECT_RETRY_MS, 0);
    }
    maybe_restart(n);
    maybe_finish_close(n);
}

static void begin_connect(struct hs_nats *n)
{
    n->connecting = true;
    n->connect_work.data = n;
    uv_queue_work(n->loop, &n->connect_work, connect_work, connect_done);
}

/* A connection libnats closed on its own is let go once it has said its last word (closed,
 * the inbox's on-complete) and no JetStream call uses it; a new one follows after a wait. */
static void maybe_restart(struct hs_nats *n)
{
    if (!n->restart || n->closing || !n->closed_cb || !n->sub_done || n->calls)
        return;
    n->restart = false;
    jsCtx_Destroy(n->js);
    n->js = NULL;
    natsSubscription_Destroy(n->sub);
    n->sub = NULL;
    natsConnection_Destroy(n->nc);
    n->nc = NULL;
    n->closed_cb = n->sub_done = false;
    uv_timer_start(&n->retry, on_retry, CONNECT_RETRY_MS, 0);
}

static double gauge_connected(void *ud)
{
    return ((struct hs_nats *)ud)->connected;
}

struct hs_nats *hs_nats_new(const struct hs_nats_config *conf, const struct hs_tls_client *tls,
                            const char *name, const struct hs_nats_hooks *hooks, void *ud)
{
    struct hs_nats *n = hs_xcalloc(1, sizeof(*n));
    n->conf = conf;
    n->tls = tls;
    n->name = hs_xstrdup(name);
    n->hooks = *hooks;
    n->ud = ud;
    n->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    return n;
}

int hs_nats_start(struct hs_nats *n, uv_loop_t *loop, struct hs_metrics *m)
{
    natsStatus s = build_options(n, &n->opts);
    if (s != NATS_OK) {
        hs_log_error(n->name, "NATS options: %s", natsStatus_GetText(s));
        return s == NATS_NO_MEMORY ? HS_ENOMEM : HS_EINVAL;
    }
    n->loop = loop;
    n->metrics = m;
    char labels[200];
    snprintf(labels, sizeof(labels), "component=\"%s\"", n->name);
    n->reconnects = hs_metrics_counter(m, "nats_reconnects_total",
                                       "Reconnections to NATS after a lost connection", labels);
    hs_metrics_gauge(m, "nats_connected", "1 while connected to a NATS server", labels,
                     gauge_connected, n);
    uv_mutex_init(&n->mu);
    uv_async_init(loop, &n->async, on_async);
    n->async.data = n;
    uv_timer_init(loop, &n->retry);
    n->retry.data = n;
    n->handles = 2;
    n->started = true;
    begin_connect(n);
    return 0;
}

bool hs_nats_connected(const struct hs_nats *n)
{
    return n->connected;
}

const char *hs_nats_inbox(const struct hs_nats *n)
{
    return n->inbox;
}

int64_t hs_nats_max_payload(const struct hs_nats *n)
{
    return n->max_payload;
}

/* ---- publish ---------------------------------------------------------------------------- */

static int publish_status(natsStatus s, const char **why)
{
    if (why)
        *why = natsStatus_GetText(s);
    switch (s) {
    case NATS_OK:
        return 0;
    case NATS_MAX_PAYLOAD:
        return HS_E2BIG;
    case NATS_NO_MEMORY:
        return HS_ENOMEM;
    case NATS_INSUFFICIENT_BUFFER: /* the reconnect buffer is full */
        return HS_EAGAIN;
    default:
        return HS_EIO;
    }
}

/* Adds "Name: value" lines as headers. */
static natsStatus add_headers(natsMsg *m, const char *const *lines, size_t nlines)
{
    natsStatus s = NATS_OK;
    for (size_t i = 0; i < nlines && s == NATS_OK; i++) {
        const char *colon = strchr(lines[i], ':');
        if (!colon)
            continue;
        char key[128];
        size_t kl = HS_MIN((size_t)(colon - lines[i]), sizeof(key) - 1);
        memcpy(key, lines[i], kl);
        key[kl] = '\0';
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        s = natsMsgHeader_Add(m, key, v);
    }
    return s;
}

int hs_nats_publish(struct hs_nats *n, const char *subject, const char *reply,
                    const char *const *lines, size_t nlines, const void *data, size_t len,
                    const char **why)
{
    if (!n->nc || n->closing) {
        if (why)
            *why = n->closing ? "closing" : "not connected to NATS yet";
        return HS_EAGAIN;
    }
    if (len > INT32_MAX) {
        if (why)
            *why = "message too large";
        return HS_E2BIG;
    }
    if (nlines == 0 && !reply)
        return publish_status(natsConnection_Publish(n->nc, subject, data, (int)len), why);
    if (nlines == 0)
        return publish_status(natsConnection_PublishRequest(n->nc, subject, reply, data, (int)len),
                              why);
    natsMsg *m = NULL;
    natsStatus s = natsMsg_Create(&m, subject, reply, data, (int)len);
    if (s == NATS_OK)
        s = add_headers(m, lines, nlines);
    if (s == NATS_OK)
        s = natsConnection_PublishMsg(n->nc, m);
    natsMsg_Destroy(m);
    return publish_status(s, why);
}

/* ---- JetStream calls on the pool --------------------------------------------------------- */

struct js_call {
    uv_work_t w;
    struct hs_nats *n;
    hs_nats_js_fn fn;
    hs_nats_js_done done;
    void *arg;
    int rc;
    char err[256];
};

static void js_work(uv_work_t *w)
{
    struct js_call *c = w->data;
    c->rc = c->fn(c->n->js, c->arg, c->err, sizeof(c->err));
}

static void js_done(uv_work_t *w, int status)
{
    struct js_call *c = w->data;
    struct hs_nats *n = c->n;
    n->calls--;
    c->done(c->arg, status == UV_ECANCELED ? HS_ECANCELED : c->rc, c->err);
    free(c);
    maybe_restart(n);
    maybe_finish_close(n);
}

int hs_nats_js_call(struct hs_nats *n, hs_nats_js_fn fn, hs_nats_js_done done, void *arg)
{
    if (!n->js || n->closing)
        return HS_EAGAIN;
    struct js_call *c = hs_xcalloc(1, sizeof(*c));
    *c = (struct js_call){.n = n, .fn = fn, .done = done, .arg = arg};
    c->w.data = c;
    n->calls++;
    uv_queue_work(n->loop, &c->w, js_work, js_done);
    return 0;
}

/* ---- close ------------------------------------------------------------------------------ */

static void close_work(uv_work_t *w)
{
    struct hs_nats *n = w->data;
    /* flushes what is buffered (up to 0.5 s), cuts pending requests short, ends the
     * subscription (its on-complete follows) and joins the connection's threads */
    natsConnection_Close(n->nc);
}

static void close_work_done(uv_work_t *w, int status)
{
    struct hs_nats *n = w->data;
    n->close_done = true;
    maybe_finish_close(n);
}

static void handle_closed(uv_handle_t *h)
{
    struct hs_nats *n = h->data;
    if (--n->handles == 0)
        n->closed(n->closed_ud);
}

/* Advances the close as far as what libnats still holds allows. */
static void maybe_finish_close(struct hs_nats *n)
{
    if (!n->closing || n->connecting || n->handles == 0 || uv_is_closing((uv_handle_t *)&n->async))
        return;
    if (n->nc && !n->close_queued) {
        n->close_queued = true;
        n->close_work.data = n;
        uv_queue_work(n->loop, &n->close_work, close_work, close_work_done);
        return;
    }
    if (n->nc && !(n->close_done && n->closed_cb && n->sub_done && n->calls == 0))
        return;
    if (n->calls)
        return;
    /* libnats has said its last word about our callbacks: let go of the rest */
    jsCtx_Destroy(n->js);
    n->js = NULL;
    n->sub_done = true;
    natsSubscription_Destroy(n->sub);
    n->sub = NULL;
    natsConnection_Destroy(n->nc);
    n->nc = NULL;
    hs_metrics_gauge_remove(n->metrics, n);
    uv_close((uv_handle_t *)&n->async, handle_closed);
    uv_close((uv_handle_t *)&n->retry, handle_closed);
}

void hs_nats_close(struct hs_nats *n, void (*closed)(void *ud), void *ud)
{
    if (n->closing)
        return;
    n->closing = true;
    n->closed = closed;
    n->closed_ud = ud;
    if (!n->started) {
        closed(ud);
        return;
    }
    uv_mutex_lock(&n->mu);
    n->stop_msgs = true;
    uv_mutex_unlock(&n->mu);
    uv_timer_stop(&n->retry);
    maybe_finish_close(n);
}

void hs_nats_free(struct hs_nats *n)
{
    if (!n)
        return;
    if (n->started) {
        for (size_t i = 0; i < n->nev; i++)
            natsMsg_Destroy(n->evs[i].msg);
        free(n->evs);
        uv_mutex_destroy(&n->mu);
    }
    natsOptions_Destroy(n->opts);
    free(n->name);
    free(n);
}
