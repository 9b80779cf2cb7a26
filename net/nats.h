/* nats.h: a NATS connection for one component, used from its libuv loop (docs/scale-out.md):
 * the connection rows every NATS component shares (servers, auth, tls, timeouts); a connection
 * made off the loop and kept by libnats' own threads, reconnects included; one private inbox
 * whose messages (JetStream acks, pulled messages) are handed to the loop; publishing from the
 * loop, which never waits for a reply; and JetStream API calls, which do wait for theirs, run
 * on libuv's thread pool. */
#ifndef HS_NATS_H
#define HS_NATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/config.h"
#include "tls.h"

/* libnats' types, opaque here so that only the NATS components include its header. */
typedef struct __natsMsg natsMsg;
typedef struct __jsCtx jsCtx;

struct hs_metrics;

/* ---- the shared rows --------------------------------------------------------------------- */

struct hs_nats_user_config {
    char *username;
    char *password;
};

struct hs_nats_nkey_config {
    char *public_key;
    char *seed_file;
};

struct hs_nats_creds_config {
    char *user_file;
};

/* `auth`: at most one way (as synadia's natsclient checks). */
struct hs_nats_auth_config {
    char *token;
    bool has_user, has_nkey, has_creds;
    struct hs_nats_user_config user;
    struct hs_nats_nkey_config nkey;
    struct hs_nats_creds_config creds;
};

struct hs_nats_config {
    struct hs_strlist servers;
    char *endpoint; /* one URL, synadia's key: the same as servers: [endpoint] */
    bool has_auth, has_tls;
    struct hs_nats_auth_config auth;
    struct hs_tls_client_config tls; /* its insecure and min_version rows are not offered */
    uint64_t connect_timeout_ms;
    uint64_t reconnect_wait_ms;
    uint64_t request_timeout_ms; /* of a JetStream API call (stream, consumer) */
};

/* Embed with {"connection", HS_CFG_INLINE, offsetof(struct mine, nats), .sub = hs_nats_fields}. */
extern const struct hs_config_field hs_nats_fields[];

/* The checks that span rows, for create (cfg: the component's map, path its key path): servers
 * or endpoint given (not both), nats:// or tls:// URLs, one way of auth, the TLS and credential
 * files readable (read now, so `validate` reports them). *tls is the TLS files when the tls
 * section is present, else NULL. Returns 0 or HS_EINVAL (positioned errors in err). */
int hs_nats_check(const struct hs_nats_config *c, const struct hs_config_node *cfg,
                  const char *path, struct hs_tls_client **tls, struct hs_error *err);

/* ---- the connection ---------------------------------------------------------------------- */

struct hs_nats;

struct hs_nats_hooks {
    /* A message on the inbox, on the loop; taken (natsMsg_Destroy it). Not called once closing. */
    void (*on_msg)(void *ud, natsMsg *msg);
    /* Optional: the connection came up (again), or went down. */
    void (*on_state)(void *ud, bool connected);
};

/* A connection named `name` (the component's id: logs, metric labels, and the client name
 * servers show in /connz), with conf and tls borrowed for its lifetime. No I/O. */
struct hs_nats *hs_nats_new(const struct hs_nats_config *conf, const struct hs_tls_client *tls,
                            const char *name, const struct hs_nats_hooks *hooks, void *ud);
/* Connects on the thread pool; until then, and while reconnecting, publishes are buffered by
 * libnats (its reconnect buffer) and may time out. Registers nats_connected and
 * nats_reconnects_total{component}. Returns 0 or HS_ENOMEM. */
int hs_nats_start(struct hs_nats *n, uv_loop_t *loop, struct hs_metrics *m);
bool hs_nats_connected(const struct hs_nats *n);
/* The inbox prefix, "_INBOX.<unique>": every subject under "<inbox>." comes to on_msg. */
const char *hs_nats_inbox(const struct hs_nats *n);
/* The largest message the server takes (its max_payload), 0 before the first connect. */
int64_t hs_nats_max_payload(const struct hs_nats *n);

/* From the loop: sends subject/reply/headers/data as it is (copied by libnats; never waits for
 * an answer). `lines` are "Name: value" header lines (may be 0). Returns 0, HS_EAGAIN (not
 * started, closing, or libnats' buffer is full while it reconnects), HS_E2BIG (over the server's
 * max_payload) or HS_EIO; *why (may be NULL) is libnats' text. */
int hs_nats_publish(struct hs_nats *n, const char *subject, const char *reply,
                    const char *const *lines, size_t nlines, const void *data, size_t len,
                    const char **why);

/* A JetStream API call: fn runs on a pool thread with the connection's JetStream context (its
 * requests wait for their reply: request_timeout) and returns 0 or a code, with err filled;
 * done then runs on the loop with them. done always runs, also when closing (rc
 * HS_ECANCELED when fn never ran). Returns 0, or HS_EAGAIN before the connection exists or
 * once closing (done is then not called). */
typedef int (*hs_nats_js_fn)(jsCtx *js, void *arg, char *err, size_t errlen);
typedef void (*hs_nats_js_done)(void *arg, int rc, const char *err);
int hs_nats_js_call(struct hs_nats *n, hs_nats_js_fn fn, hs_nats_js_done done, void *arg);

/* Closes: no more on_msg; pending JetStream calls are cut short (their done fires); closed(ud)
 * once libnats has let go of everything of ours (its callbacks are over) and our handles are
 * closed. Safe before start (closed fires from the loop... or at once when never started). */
void hs_nats_close(struct hs_nats *n, void (*closed)(void *ud), void *ud);
/* Frees it: only before start or after closed. */
void hs_nats_free(struct hs_nats *n);

#endif
