/* tls.h: TLS for listeners and exporters (OpenSSL): the `tls:` config sections (otelcol's
 * configtls shape), a server context reloaded on SIGHUP with a per-connection transport over
 * memory BIOs (driven by transport.c), and the client files the exporters hand to libcurl. */
#ifndef HS_TLS_H
#define HS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/config.h"
#include "core/errors.h"

struct hs_metrics;

/* ---- listeners --------------------------------------------------------------------------- */

/* `tls:` of an HTTP listener; the section's presence turns TLS on. */
struct hs_tls_server_config {
    char *cert_file;      /* PEM: the certificate, then its chain */
    char *key_file;       /* PEM: the private key of cert_file */
    char *client_ca_file; /* PEM: when set, clients must present a cert signed by it (mTLS) */
    char *min_version;    /* "1.2" or "1.3"; NULL: 1.2 */
    char *max_version;    /* NULL: the highest OpenSSL knows */
};

extern const struct hs_config_field hs_tls_server_fields[];

/* What a listener offers by ALPN. */
enum hs_tls_alpn {
    HS_TLS_ALPN_H2_HTTP1, /* "h2" and "http/1.1" */
    HS_TLS_ALPN_H2_ONLY,  /* gRPC listeners: "h2", and a client without it is refused */
};

struct hs_tls_server;

/* Loads the files of `cf` (borrowed; the paths are copied for reloads) into a context that
 * hs_tls_reload_all reloads. `name` labels logs and the handshake-failure counter (counted in
 * `m` when not NULL). Returns 0, or HS_EINVAL with one line per problem in err, each naming the
 * key, the file and OpenSSL's reason. */
int hs_tls_server_new(const struct hs_tls_server_config *cf, const char *name,
                      enum hs_tls_alpn alpn, struct hs_metrics *m, struct hs_tls_server **out,
                      struct hs_error *err);
/* The same loading as hs_tls_server_new, for create and `hotspan validate`: every problem
 * positioned at its key under `node` (the `tls` map) as FILE:LINE:COL: path: message. Returns 0
 * or HS_EINVAL. */
int hs_tls_server_check(const struct hs_tls_server_config *cf, const struct hs_config_node *node,
                        const char *path, struct hs_error *err);
/* Connections made from it keep their context alive; this drops the listener's. */
void hs_tls_server_free(struct hs_tls_server *s);
/* Re-reads the files; on failure the old context stays and err says why. */
int hs_tls_server_reload(struct hs_tls_server *s, struct hs_error *err);

/* A refused connection: counted as hotspan_http_tls_handshake_failures_total{server,reason}
 * and logged (rate-limited) with the peer and detail. */
void hs_tls_server_refused(struct hs_tls_server *s, const char *peer, const char *reason,
                           const char *detail);

/* One connection's TLS: ciphertext in (feed), plaintext out (read); plaintext in (write),
 * ciphertext out (take). Nothing here touches a socket. */
struct hs_tls_conn;

/* NULL when out of memory. */
struct hs_tls_conn *hs_tls_conn_new(struct hs_tls_server *s);
void hs_tls_conn_free(struct hs_tls_conn *t);
/* Ciphertext from the peer. Returns 0 or HS_ENOMEM. */
int hs_tls_conn_feed(struct hs_tls_conn *t, const void *data, size_t len);
/* Advances the handshake: 1 done, 0 more input needed, HS_EIO refused (see reason/detail). */
int hs_tls_conn_handshake(struct hs_tls_conn *t);
bool hs_tls_conn_established(const struct hs_tls_conn *t);
/* The failure's metric label ("no_client_cert", "bad_client_cert", "version", "alpn",
 * "handshake") and OpenSSL's words for it. */
const char *hs_tls_conn_reason(const struct hs_tls_conn *t);
const char *hs_tls_conn_detail(const struct hs_tls_conn *t);
/* Did ALPN pick "h2"? */
bool hs_tls_conn_alpn_h2(const struct hs_tls_conn *t);
/* Plaintext: > 0 bytes, 0 when none is ready, HS_EIO when the peer closed (close_notify) or
 * sent something broken. */
ssize_t hs_tls_conn_read(struct hs_tls_conn *t, void *buf, size_t cap);
/* Encrypts all of data into the outgoing buffer. Returns 0, HS_EIO or HS_ENOMEM. */
int hs_tls_conn_write(struct hs_tls_conn *t, const void *data, size_t len);
/* Queues close_notify (once the handshake is done). */
void hs_tls_conn_close_notify(struct hs_tls_conn *t);
/* Ciphertext waiting to be sent, and taking it. */
size_t hs_tls_conn_out_len(const struct hs_tls_conn *t);
size_t hs_tls_conn_out_take(struct hs_tls_conn *t, void *buf, size_t cap);

/* ---- exporters --------------------------------------------------------------------------- */

/* `tls:` of an exporter. https:// endpoints (and grpc without insecure) use it. */
struct hs_tls_client_config {
    bool insecure;              /* grpc host:port endpoints: plaintext h2c */
    char *ca_file;              /* PEM: CAs that sign the server's cert (default: the system's) */
    char *cert_file, *key_file; /* PEM: our certificate and key, for mTLS */
    bool insecure_skip_verify;  /* accept any server certificate (tests only) */
    char *min_version;          /* "1.2" or "1.3" */
    char *server_name_override; /* the name the server's certificate must carry (and SNI) */
};

extern const struct hs_config_field hs_tls_client_fields[];

/* The files of a client config, read into memory and reloaded on SIGHUP. */
struct hs_tls_client;

/* Reads and checks the files of `cf` (borrowed for the client's lifetime). Problems are
 * positioned at the keys of `node` (the `tls` map; may be NULL) under `path`. Returns 0 or
 * HS_EINVAL. */
int hs_tls_client_new(const struct hs_tls_client_config *cf, const struct hs_config_node *node,
                      const char *path, struct hs_tls_client **out, struct hs_error *err);
void hs_tls_client_free(struct hs_tls_client *c);
const struct hs_tls_client_config *hs_tls_client_config(const struct hs_tls_client *c);

/* The PEM bytes now in force (valid until the next reload, which happens only from the loop
 * between callbacks); len 0 when the key is not set. */
struct hs_tls_pem {
    const void *data;
    size_t len;
};
struct hs_tls_pem hs_tls_client_ca(const struct hs_tls_client *c);
struct hs_tls_pem hs_tls_client_cert(const struct hs_tls_client *c);
struct hs_tls_pem hs_tls_client_key(const struct hs_tls_client *c);

/* ---- both -------------------------------------------------------------------------------- */

/* SIGHUP: every TLS context in the process re-reads its certificate, key and CA files; a
 * context whose new files do not load keeps the old ones (logged). Connections already open
 * keep the context they started with; new client connections use the new files (libcurl
 * matches pooled connections by the certificate bytes, so changed files mean a new one). */
void hs_tls_reload_all(void);

/* "1.2" -> TLS1_2_VERSION etc.; 0 for NULL or unknown. */
int hs_tls_version(const char *v);

#endif
