/* auth.h: authentication of receiver requests: bearer tokens and basic auth (otelcol's
 * bearertokenauth and basicauth extensions, as a section receivers embed), and per-tenant tokens
 * that decide the X-Scope-OrgID a gateway forwards. Credentials come from the config (with
 * ${env:...}) or files, which are re-read when they change so secrets rotate without a restart. */
#ifndef HS_AUTH_H
#define HS_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "core/config.h"
#include "core/errors.h"

struct hs_http_request;
struct hs_http_header;
struct hs_metrics;

struct hs_auth_config {
    bool bearer_enabled; /* `bearer_token:` written */
    struct {
        char *token;
        char *filename;
        struct hs_strlist tokens;
    } bearer;
    bool basic_enabled; /* `basic:` written */
    struct {
        struct {
            char *file;
            char *inline_text;
        } htpasswd;
    } basic;
    struct hs_strmap tenants; /* tenant id -> its token */
    char *tenants_file;       /* lines "tenant:token" */
};

/* The rows of `auth:`, to embed as an HS_CFG_SECTION (with has_presence: no section = open). */
extern const struct hs_config_field hs_auth_fields[];

enum hs_auth_result {
    HS_AUTH_OK,
    HS_AUTH_MISSING,    /* no Authorization header, or an empty one */
    HS_AUTH_BAD_SCHEME, /* a scheme that is not configured (Basic where only tokens are) */
    HS_AUTH_MALFORMED,  /* a scheme without credentials, bad base64, no ':' in basic */
    HS_AUTH_INVALID,    /* well-formed, but no configured credential matches */
};

struct hs_auth;

/* Builds the checker for a decoded `auth` section and reads its files now, so a missing or bad
 * file is a config error (`hotspan validate` reports it) positioned at the key that names it.
 * `node` is the section's config node (for positions; may be NULL), `path` its key path
 * ("receivers.otlp.auth"). Returns 0 or HS_EINVAL with every problem in err. Borrows conf
 * only during the call. */
int hs_auth_new(const struct hs_auth_config *conf, const struct hs_config_node *node,
                const char *path, struct hs_auth **out, struct hs_error *err);
void hs_auth_free(struct hs_auth *a);

/* Where failures are counted (hotspan_receiver_auth_failures_total{receiver,reason}) and the
 * receiver id used in logs. Until called, failures are neither counted nor logged. */
void hs_auth_start(struct hs_auth *a, struct hs_metrics *m, const char *receiver);

/* Checks the request's Authorization header (gRPC metadata `authorization` is the same header)
 * against every configured credential, in time that does not depend on how close a wrong one
 * came. On HS_AUTH_OK, *tenant_out is the tenant of the matching token or NULL (a token without
 * a tenant; basic auth); it is valid until the next hs_auth_check or hs_auth_refresh. A
 * failure is counted and logged (rate-limited, naming the peer, never the credential). Files
 * are looked at (stat) at most once a second. */
enum hs_auth_result hs_auth_check(struct hs_auth *a, const struct hs_http_request *req,
                                  const char **tenant_out);

/* Re-reads the files whose identity (inode, size, mtime, ctime) changed, if the last look was
 * 1 s or more before now_ms. A file that cannot be read or parsed keeps its previous
 * credentials (a rotation half done must not lock every client out) and is logged once per
 * failure. hs_auth_check calls this with hs_now_ms(); tests pass their own clock. */
void hs_auth_refresh(struct hs_auth *a, uint64_t now_ms);

/* "missing", "bad_scheme", "malformed", "invalid": the metrics reason. */
const char *hs_auth_reason(enum hs_auth_result r);
/* A sentence for the client, naming no credential. */
const char *hs_auth_message(enum hs_auth_result r);

/* The WWW-Authenticate challenges for a 401 (RFC 9110 §11.6.1): Bearer when tokens are
 * configured (with error="invalid_token" for a wrong one, RFC 6750 §3), Basic when basic auth
 * is. Writes at most 2 into out; returns how many. */
size_t hs_auth_challenges(const struct hs_auth *a, enum hs_auth_result r,
                          struct hs_http_header *out);

/* The tenant a request's data belongs to: the token's tenant when it has one (it replaces any
 * X-Scope-OrgID the client sent: a tenant token is the gateway's word, not the client's), else
 * the client's X-Scope-OrgID, else none (out->len 0). Returns false when the header is present
 * but not a valid tenant id (the receiver answers 400). */
bool hs_auth_request_tenant(const struct hs_http_request *req, const char *token_tenant,
                            struct hs_str *out);

#endif
