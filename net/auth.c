/* auth.c: bearer-token, basic and per-tenant-token authentication for receivers. Every credential
 * is kept only as its SHA-256, and a presented one is hashed and compared with all of them, so
 * neither an early exit nor a length check tells a client how close it came. */
#include "net/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "net/http_server.h"
#include "core/log.h"
#include "core/metrics.h"

#define DIGEST_LEN 32
#define MAX_FILE_SIZE (1u << 20) /* a credentials file is small; a huge one is a mistake */
#define MAX_CREDS 10000          /* per source */
#define MAX_PRESENTED 4096       /* credential bytes after the scheme */
#define REFRESH_MS 1000

/* ---- config ------------------------------------------------------------------------------ */

#define BEARER(m)                                                                                  \
    offsetof(struct hs_auth_config, bearer.m) - offsetof(struct hs_auth_config, bearer)
#define HTPW(m)                                                                                    \
    offsetof(struct hs_auth_config, basic.htpasswd.m) -                                            \
        offsetof(struct hs_auth_config, basic.htpasswd)

static const struct hs_config_field bearer_fields[] = {
    {"token", HS_CFG_STRING, BEARER(token), NULL,
     .doc = "the token clients send as `Authorization: Bearer <token>` (e.g. \"${env:TOKEN}\")"},
    {"filename", HS_CFG_STRING, BEARER(filename), NULL,
     .doc = "file holding the token (one per line; # comments), re-read when it changes"},
    {"tokens", HS_CFG_STRLIST, BEARER(tokens), NULL,
     .doc = "more accepted tokens (e.g. old and new during a rotation)"},
    {0},
};

static const struct hs_config_field htpasswd_fields[] = {
    {"file", HS_CFG_STRING, HTPW(file), NULL,
     .doc = "file of `user:password` lines (plain text; # comments), re-read when it changes"},
    {"inline", HS_CFG_STRING, HTPW(inline_text), NULL,
     .doc = "`user:password` lines written in the config"},
    {0},
};

static const struct hs_config_field basic_fields[] = {
    {"htpasswd", HS_CFG_SECTION, 0, .sub = htpasswd_fields,
     .doc = "the accepted users and passwords (`Authorization: Basic ...`)"},
    {0},
};

const struct hs_config_field hs_auth_fields[] = {
    {"bearer_token", HS_CFG_SECTION, offsetof(struct hs_auth_config, bearer), .sub = bearer_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_auth_config, bearer_enabled),
     .doc = "accept `Authorization: Bearer <token>` (otelcol's bearertokenauth)"},
    {"basic", HS_CFG_SECTION, offsetof(struct hs_auth_config, basic), .sub = basic_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_auth_config, basic_enabled),
     .doc = "accept `Authorization: Basic ...` (otelcol's basicauth)"},
    {"tenants", HS_CFG_STRMAP, offsetof(struct hs_auth_config, tenants), NULL,
     .doc = "per-tenant bearer tokens, `tenant: token`: a request with one of them belongs to "
            "that tenant, whatever X-Scope-OrgID it sends"},
    {"tenants_file", HS_CFG_STRING, offsetof(struct hs_auth_config, tenants_file), NULL,
     .doc = "per-tenant tokens from a file of `tenant:token` lines, re-read when it changes"},
    {0},
};

/* ---- credentials ------------------------------------------------------------------------- */

enum src_kind { SRC_STATIC, SRC_TOKENS, SRC_HTPASSWD, SRC_TENANTS };

struct cred {
    uint8_t digest[DIGEST_LEN]; /* of the token, or of "user:password" */
    bool basic;
    char *tenant; /* NULL: none */
};

struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

struct source {
    enum src_kind kind;
    char *path; /* NULL for SRC_STATIC */
    struct file_id id, bad_id;
    bool failing;
    struct cred *creds;
    size_t count;
};

#define MAX_SOURCES 4 /* the config's own, the token file, the htpasswd file, the tenants file */

struct hs_auth {
    struct source src[MAX_SOURCES];
    size_t nsrc;
    bool has_bearer, has_basic;
    uint64_t last_look_ms;
    char *receiver;
    struct hs_counter *failures[HS_AUTH_INVALID + 1];
    struct hs_ratelimit log_rl;
};

static void digest(const void *p, size_t n, uint8_t out[DIGEST_LEN])
{
    unsigned len = DIGEST_LEN;
    if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1)
        abort(); /* SHA-256 of memory cannot fail short of a broken libcrypto */
}

static void creds_free(struct cred *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(c[i].tenant);
    free(c);
}

/* A growing list of credentials, bounded by MAX_CREDS. */
struct creds {
    struct cred *v;
    size_t n, cap;
};

static int creds_add(struct creds *cs, const char *secret, size_t len, bool basic,
                     const char *tenant, size_t tenant_len)
{
    if (cs->n == MAX_CREDS)
        return HS_E2BIG;
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? cs->cap * 2 : 8;
        cs->v = realloc(cs->v, cs->cap * sizeof(*cs->v));
        if (!cs->v)
            abort(); /* at most MAX_CREDS small entries */
    }
    struct cred *c = &cs->v[cs->n++];
    *c = (struct cred){.basic = basic, .tenant = tenant ? hs_xstrndup(tenant, tenant_len) : NULL};
    digest(secret, len, c->digest);
    return 0;
}

static bool blank(int ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

static struct hs_str trim(const char *p, size_t n)
{
    while (n && blank((unsigned char)*p))
        p++, n--;
    while (n && blank((unsigned char)p[n - 1]))
        n--;
    return (struct hs_str){p, n};
}

/* Hashed htpasswd entries ($apr1$, bcrypt, {SHA}) would be compared as plain text and never
 * match: say so instead of refusing every client silently. */
static bool looks_hashed(struct hs_str pw)
{
    static const char *const prefixes[] = {"$apr1$", "$2a$", "$2b$", "$2y$", "{SHA}", "$5$", "$6$"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        if (pw.len > n && memcmp(pw.ptr, prefixes[i], n) == 0)
            return true;
    }
    return false;
}

/* One line of a credentials text; *why says what is wrong with it. */
static int parse_line(enum src_kind kind, struct hs_str line, struct creds *cs, const char **why)
{
    if (kind == SRC_TOKENS)
        return creds_add(cs, line.ptr, line.len, false, NULL, 0);
    const char *colon = memchr(line.ptr, ':', line.len);
    if (!colon || colon == line.ptr) {
        *why = kind == SRC_HTPASSWD ? "expected user:password" : "expected tenant:token";
        return HS_EINVAL;
    }
    struct hs_str left = {line.ptr, (size_t)(colon - line.ptr)};
    struct hs_str right = {colon + 1, line.len - left.len - 1};
    if (kind == SRC_HTPASSWD) {
        if (right.len == 0 || looks_hashed(right)) {
            *why = right.len ? "hashed passwords are not supported: write it in plain text "
                               "(and protect the file)"
                             : "empty password";
            return HS_EINVAL;
        }
        return creds_add(cs, line.ptr, line.len, true, NULL, 0);
    }
    right = trim(right.ptr, right.len);
    if (!hs_tenant_valid(left.ptr, left.len) || right.len == 0) {
        *why = right.len ? "not a valid tenant id (1-150 of A-Z a-z 0-9 ! - _ . * ' ( ))"
                         : "empty token";
        return HS_EINVAL;
    }
    return creds_add(cs, right.ptr, right.len, false, left.ptr, left.len);
}

/* The lines of a file or an inline text; blank lines and # comments are skipped. Tokens and
 * tenants are trimmed; an htpasswd line loses only its line end (a password may end in a
 * blank). On error, *line_no and *why say where and what. */
static int parse_text(enum src_kind kind, const char *p, size_t n, struct creds *cs,
                      unsigned *line_no, const char **why)
{
    *line_no = 0;
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t len = nl ? (size_t)(nl - p) : n;
        ++*line_no;
        struct hs_str t = trim(p, len);
        struct hs_str line = t;
        if (kind == SRC_HTPASSWD) {
            line = (struct hs_str){p, len};
            if (line.len && line.ptr[line.len - 1] == '\r')
                line.len--;
        }
        if (t.len && t.ptr[0] != '#') {
            if (memchr(line.ptr, '\0', line.len)) {
                *why = "NUL byte";
                return HS_EINVAL;
            }
            int rc = parse_line(kind, line, cs, why);
            if (rc == HS_E2BIG)
                *why = "more than 10000 entries";
            if (rc)
                return rc;
        }
        p += nl ? len + 1 : len;
        n -= nl ? len + 1 : len;
    }
    return 0;
}

static bool same_id(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static void id_of(const struct stat *st, struct file_id *id)
{
    *id = (struct file_id){.dev = st->st_dev,
                           .ino = st->st_ino,
                           .size = st->st_size,
                           .mtime = st->st_mtim,
                           .ctime = st->st_ctim};
}

/* Reads and parses a credentials file into cs. msg gets "PATH:LINE: why" or "cannot read". */
static int load_file(enum src_kind kind, const char *path, struct creds *cs, struct file_id *id,
                     char *msg, size_t msglen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot read %s: %s", path, strerror(errno));
        return HS_EINVAL;
    }
    struct stat st;
    char *text = NULL;
    int rc = HS_EINVAL;
    if (fstat(fd, &st) != 0) {
        snprintf(msg, msglen, "cannot read %s: %s", path, strerror(errno));
        goto out;
    }
    id_of(&st, id);
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)MAX_FILE_SIZE) {
        snprintf(msg, msglen, "%s: %s", path,
                 S_ISREG(st.st_mode) ? "larger than 1 MiB" : "not a regular file");
        goto out;
    }
    text = hs_xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(msg, msglen, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break; /* shrunk while we read: parse what is there, the next look re-reads */
        got += (size_t)r;
    }
    unsigned line;
    const char *why = "";
    rc = parse_text(kind, text, got, cs, &line, &why);
    if (rc) {
        snprintf(msg, msglen, "%s:%u: %s", path, line, why);
        rc = HS_EINVAL;
    } else if (cs->n == 0) {
        snprintf(msg, msglen, "%s: no credentials in it", path);
        rc = HS_EINVAL;
    }
out:
    free(text);
    close(fd);
    return rc;
}

/* ---- building ---------------------------------------------------------------------------- */

static int by_digest(const void *x, const void *y)
{
    const struct cred *a = *(const struct cred *const *)x, *b = *(const struct cred *const *)y;
    return memcmp(a->digest, b->digest, DIGEST_LEN);
}

/* A token that belongs to two tenants (or to a tenant and to none) would make the tenant of a
 * request depend on the order of the config: refuse it. Returns NULL or the message. */
static const char *tenant_conflict(const struct hs_auth *a, char *msg, size_t msglen)
{
    size_t n = 0;
    for (size_t s = 0; s < a->nsrc; s++)
        n += a->src[s].count;
    if (n < 2)
        return NULL;
    const struct cred **v = hs_xmalloc(n * sizeof(*v));
    size_t k = 0;
    for (size_t s = 0; s < a->nsrc; s++)
        for (size_t i = 0; i < a->src[s].count; i++)
            if (!a->src[s].creds[i].basic)
                v[k++] = &a->src[s].creds[i];
    qsort(v, k, sizeof(*v), by_digest);
    const char *res = NULL;
    for (size_t i = 1; i < k && !res; i++) {
        const char *t0 = v[i - 1]->tenant, *t1 = v[i]->tenant;
        if (memcmp(v[i - 1]->digest, v[i]->digest, DIGEST_LEN) == 0 &&
            (!t0 != !t1 || (t0 && strcmp(t0, t1) != 0))) {
            snprintf(msg, msglen, "one token is given to %s%s%s and to %s%s%s",
                     t0 ? "tenant \"" : "", t0 ? t0 : "no tenant", t0 ? "\"" : "",
                     t1 ? "tenant \"" : "", t1 ? t1 : "no tenant", t1 ? "\"" : "");
            res = msg;
        }
    }
    free(v);
    return res;
}

static const struct hs_config_node *node_at(const struct hs_config_node *n, const char *a,
                                            const char *b)
{
    const struct hs_config_node *x = n ? hs_config_get(n, a) : NULL;
    const struct hs_config_node *y = x && b ? hs_config_get(x, b) : NULL;
    return y ? y : x ? x : n;
}

/* An error at `at`, under the key path `path.key` (the message says what is wrong with it). */
static void key_errorf(struct hs_error *err, const struct hs_config_node *at, const char *path,
                       const char *key, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void key_errorf(struct hs_error *err, const struct hs_config_node *at, const char *path,
                       const char *key, const char *fmt, ...)
{
    char kp[300], msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(kp, sizeof(kp), "%s%s%s", path, *path && *key ? "." : "", key);
    hs_config_errorf(err, at, kp, "%s", msg);
}

static void static_creds(const struct hs_auth_config *conf, const struct hs_config_node *node,
                         const char *path, struct creds *cs, struct hs_error *err)
{
    unsigned line;
    const char *why = "";
    if (conf->bearer.token && conf->bearer.token[0])
        creds_add(cs, conf->bearer.token, strlen(conf->bearer.token), false, NULL, 0);
    else if (conf->bearer.token)
        key_errorf(err, node_at(node, "bearer_token", "token"), path, "bearer_token.token",
                   "empty (is its ${env:...} variable set?)");
    for (size_t i = 0; i < conf->bearer.tokens.count; i++) {
        const char *t = conf->bearer.tokens.items[i];
        if (t[0])
            creds_add(cs, t, strlen(t), false, NULL, 0);
        else
            key_errorf(err, node_at(node, "bearer_token", "tokens"), path, "bearer_token.tokens",
                       "item %zu is empty", i);
    }
    for (size_t i = 0; i < conf->tenants.count; i++) {
        const char *tn = conf->tenants.keys[i], *tok = conf->tenants.values[i];
        const struct hs_config_node *at = node_at(node, "tenants", tn);
        char key[200];
        snprintf(key, sizeof(key), "tenants.%s", tn);
        if (!hs_tenant_valid(tn, strlen(tn)))
            key_errorf(err, at, path, key,
                       "not a valid tenant id (1-150 of A-Z a-z 0-9 ! - _ . * ' ( ))");
        else if (!tok || !tok[0])
            key_errorf(err, at, path, key, "empty token (is its ${env:...} variable set?)");
        else
            creds_add(cs, tok, strlen(tok), false, tn, strlen(tn));
    }
    const char *in = conf->basic.htpasswd.inline_text;
    if (in && parse_text(SRC_HTPASSWD, in, strlen(in), cs, &line, &why) != 0)
        key_errorf(err, node_at(node, "basic", "htpasswd"), path, "basic.htpasswd.inline",
                   "line %u: %s", line, why);
}

static void add_file(struct hs_auth *a, enum src_kind kind, const char *file,
                     const struct hs_config_node *at, const char *path, const char *key,
                     struct hs_error *err)
{
    if (!file)
        return;
    struct source *s = &a->src[a->nsrc++];
    struct creds cs = {0};
    char msg[512];
    *s = (struct source){.kind = kind, .path = hs_xstrdup(file)};
    if (load_file(kind, file, &cs, &s->id, msg, sizeof(msg)) != 0) {
        key_errorf(err, at, path, key, "%s", msg);
        creds_free(cs.v, cs.n);
        return;
    }
    s->creds = cs.v;
    s->count = cs.n;
}

int hs_auth_new(const struct hs_auth_config *conf, const struct hs_config_node *node,
                const char *path, struct hs_auth **out, struct hs_error *err)
{
    struct hs_auth *a = hs_xcalloc(1, sizeof(*a));
    size_t errors = err ? err->count : 0;
    struct creds cs = {0};
    static_creds(conf, node, path, &cs, err);
    a->src[a->nsrc++] = (struct source){.kind = SRC_STATIC, .creds = cs.v, .count = cs.n};
    add_file(a, SRC_TOKENS, conf->bearer.filename, node_at(node, "bearer_token", "filename"), path,
             "bearer_token.filename", err);
    add_file(a, SRC_HTPASSWD, conf->basic.htpasswd.file, node_at(node, "basic", "htpasswd"), path,
             "basic.htpasswd.file", err);
    add_file(a, SRC_TENANTS, conf->tenants_file, node_at(node, "tenants_file", NULL), path,
             "tenants_file", err);
    a->has_bearer = conf->bearer_enabled || conf->tenants.count || conf->tenants_file;
    a->has_basic = conf->basic_enabled;
    char msg[400];
    if (conf->bearer_enabled && !conf->bearer.token && !conf->bearer.filename &&
        !conf->bearer.tokens.count)
        key_errorf(err, node_at(node, "bearer_token", NULL), path, "bearer_token",
                   "set token, filename or tokens");
    if (conf->basic_enabled && !conf->basic.htpasswd.file && !conf->basic.htpasswd.inline_text)
        key_errorf(err, node_at(node, "basic", NULL), path, "basic",
                   "set htpasswd.file or htpasswd.inline");
    if (!a->has_bearer && !a->has_basic)
        hs_config_errorf(err, node, path,
                         "no credentials: set bearer_token, basic, tenants or tenants_file "
                         "(without this section, every request is let in)");
    if (tenant_conflict(a, msg, sizeof(msg)))
        hs_config_errorf(err, node, path, "%s", msg);
    a->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    a->last_look_ms = hs_now_ms();
    if (err && err->count > errors) {
        hs_auth_free(a);
        return HS_EINVAL;
    }
    *out = a;
    return 0;
}

void hs_auth_free(struct hs_auth *a)
{
    if (!a)
        return;
    for (size_t s = 0; s < a->nsrc; s++) {
        creds_free(a->src[s].creds, a->src[s].count);
        free(a->src[s].path);
    }
    free(a->receiver);
    free(a);
}

void hs_auth_start(struct hs_auth *a, struct hs_metrics *m, const char *receiver)
{
    free(a->receiver);
    a->receiver = hs_xstrdup(receiver);
    for (int r = HS_AUTH_MISSING; r <= HS_AUTH_INVALID; r++) {
        char labels[256];
        snprintf(labels, sizeof(labels), "receiver=\"%s\",reason=\"%s\"", receiver,
                 hs_auth_reason((enum hs_auth_result)r));
        a->failures[r] =
            hs_metrics_counter(m, "receiver_auth_failures_total",
                               "Requests refused by authentication, by reason", labels);
    }
}

/* ---- rotation ---------------------------------------------------------------------------- */

static void reload(struct hs_auth *a, struct source *s, const struct file_id *now_id)
{
    struct creds cs = {0};
    struct file_id id;
    char msg[512];
    const char *who = a->receiver ? a->receiver : "auth";
    if (load_file(s->kind, s->path, &cs, &id, msg, sizeof(msg)) != 0) {
        creds_free(cs.v, cs.n);
        s->bad_id = *now_id;
        if (!s->failing)
            hs_log_warn(who, "%s; the credentials read before stay in use", msg);
        s->failing = true;
        return;
    }
    struct cred *old = s->creds;
    size_t old_n = s->count;
    s->creds = cs.v;
    s->count = cs.n;
    if (tenant_conflict(a, msg, sizeof(msg))) {
        s->creds = old;
        s->count = old_n;
        creds_free(cs.v, cs.n);
        s->bad_id = *now_id;
        if (!s->failing)
            hs_log_warn(who, "%s: %s; the credentials read before stay in use", s->path, msg);
        s->failing = true;
        return;
    }
    creds_free(old, old_n);
    s->id = id;
    s->failing = false;
    hs_log_info(who, "re-read %s: %zu credentials", s->path, s->count);
}

void hs_auth_refresh(struct hs_auth *a, uint64_t now_ms)
{
    if (now_ms < a->last_look_ms + REFRESH_MS) /* also a clock behind the last look */
        return;
    a->last_look_ms = now_ms;
    for (size_t i = 0; i < a->nsrc; i++) {
        struct source *s = &a->src[i];
        struct stat st;
        struct file_id id;
        if (!s->path)
            continue;
        if (stat(s->path, &st) != 0) {
            if (!s->failing)
                hs_log_warn(a->receiver ? a->receiver : "auth",
                            "cannot look at %s: %s; the credentials read before stay in use",
                            s->path, strerror(errno));
            s->failing = true;
            continue;
        }
        id_of(&st, &id);
        if (!same_id(&id, &s->id) && !(s->failing && same_id(&id, &s->bad_id)))
            reload(a, s, &id);
    }
}

/* ---- checking ---------------------------------------------------------------------------- */

/* Compares d with every credential of its kind, all of them, whatever matched before. */
static const struct cred *match(const struct hs_auth *a, const uint8_t d[DIGEST_LEN], bool basic)
{
    const struct cred *found = NULL;
    for (size_t s = 0; s < a->nsrc; s++) {
        for (size_t i = 0; i < a->src[s].count; i++) {
            const struct cred *c = &a->src[s].creds[i];
            int eq = (CRYPTO_memcmp(c->digest, d, DIGEST_LEN) == 0) & (c->basic == basic);
            found = eq && !found ? c : found;
        }
    }
    return found;
}

static enum hs_auth_result verify(struct hs_auth *a, const struct hs_http_request *req,
                                  const char **tenant_out)
{
    const struct hs_str *h = hs_http_request_header(req, "authorization");
    struct hs_str v = h ? trim(h->ptr, h->len) : (struct hs_str){"", 0};
    if (v.len == 0)
        return HS_AUTH_MISSING;
    size_t sp = 0;
    while (sp < v.len && !blank((unsigned char)v.ptr[sp]))
        sp++;
    struct hs_str scheme = {v.ptr, sp};
    struct hs_str cred = trim(v.ptr + sp, v.len - sp);
    bool bearer = hs_str_ieq(scheme, "bearer"), basic = hs_str_ieq(scheme, "basic");
    if ((bearer && !a->has_bearer) || (basic && !a->has_basic) || (!bearer && !basic))
        return HS_AUTH_BAD_SCHEME;
    if (cred.len == 0 || cred.len > MAX_PRESENTED)
        return HS_AUTH_MALFORMED;
    uint8_t d[DIGEST_LEN];
    if (bearer) {
        digest(cred.ptr, cred.len, d);
    } else {
        uint8_t plain[MAX_PRESENTED / 4 * 3 + 3];
        long n = hs_base64_decode(cred.ptr, cred.len, plain);
        if (n <= 0 || !memchr(plain, ':', (size_t)n))
            return HS_AUTH_MALFORMED;
        digest(plain, (size_t)n, d);
        OPENSSL_cleanse(plain, sizeof(plain));
    }
    const struct cred *c = match(a, d, basic);
    if (!c)
        return HS_AUTH_INVALID;
    *tenant_out = c->tenant;
    return HS_AUTH_OK;
}

enum hs_auth_result hs_auth_check(struct hs_auth *a, const struct hs_http_request *req,
                                  const char **tenant_out)
{
    *tenant_out = NULL;
    hs_auth_refresh(a, hs_now_ms());
    enum hs_auth_result r = verify(a, req, tenant_out);
    if (r == HS_AUTH_OK || !a->receiver)
        return r;
    hs_counter_add(a->failures[r], 1);
    uint32_t suppressed = 0;
    if (hs_ratelimit_allow(&a->log_rl, hs_now_ms(), &suppressed))
        hs_log_info(a->receiver, "401 for %s %.*s: %s (%u similar suppressed)",
                    req->peer ? req->peer : "?", (int)HS_MIN(req->path.len, 64), req->path.ptr,
                    hs_auth_message(r), suppressed);
    return r;
}

const char *hs_auth_reason(enum hs_auth_result r)
{
    switch (r) {
    case HS_AUTH_OK:
        return "ok";
    case HS_AUTH_MISSING:
        return "missing";
    case HS_AUTH_BAD_SCHEME:
        return "bad_scheme";
    case HS_AUTH_MALFORMED:
        return "malformed";
    default:
        return "invalid";
    }
}

const char *hs_auth_message(enum hs_auth_result r)
{
    switch (r) {
    case HS_AUTH_OK:
        return "authenticated";
    case HS_AUTH_MISSING:
        return "missing credentials: send an Authorization header";
    case HS_AUTH_BAD_SCHEME:
        return "unsupported Authorization scheme";
    case HS_AUTH_MALFORMED:
        return "malformed Authorization header";
    default:
        return "invalid credentials";
    }
}

size_t hs_auth_challenges(const struct hs_auth *a, enum hs_auth_result r,
                          struct hs_http_header *out)
{
    size_t n = 0;
    if (a->has_bearer)
        out[n++] = (struct hs_http_header){
            HS_STR("www-authenticate"),
            r == HS_AUTH_INVALID     ? HS_STR("Bearer realm=\"hotspan\", error=\"invalid_token\"")
            : r == HS_AUTH_MALFORMED ? HS_STR("Bearer realm=\"hotspan\", error=\"invalid_request\"")
                                     : HS_STR("Bearer realm=\"hotspan\"")};
    if (a->has_basic)
        out[n++] = (struct hs_http_header){HS_STR("www-authenticate"),
                                           HS_STR("Basic realm=\"hotspan\", charset=\"UTF-8\"")};
    return n;
}

bool hs_auth_request_tenant(const struct hs_http_request *req, const char *token_tenant,
                            struct hs_str *out)
{
    if (token_tenant) {
        *out = (struct hs_str){token_tenant, strlen(token_tenant)};
        return true;
    }
    const struct hs_str *h = hs_http_request_header(req, "x-scope-orgid");
    *out = (struct hs_str){"", 0};
    if (!h || h->len == 0)
        return true;
    if (!hs_tenant_valid(h->ptr, h->len))
        return false;
    *out = *h;
    return true;
}
