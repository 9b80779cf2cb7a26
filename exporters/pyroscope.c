/* pyroscope.c: the `pyroscope` exporter: profiles sent on to Pyroscope byte for byte, through
 * the shared sending queue (exporters/helper/sender.h), as a Connect Push request per batch
 * (wire.md §6, what Grafana Alloy's pyroscope.write does) or one legacy /ingest upload per profile
 * (wire.md §5). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/compress.h"
#include "core/config.h"
#include "core/log.h"
#include "exporters/helper/sender.h"
#include "core/tls.h"
#include "pdata/profiles.h"
#include "push/v1/push.pb-c.h"

/* pprof is usually gzipped already; level 1 keeps the CPU cost of a second pass small. */
#define GZIP_LEVEL 1
#define PUSH_PATH "/push.v1.PusherService/Push"

static const char *const protocol_choices[] = {"push", "ingest", NULL};
static const char *const compression_choices[] = {"none", "gzip", NULL};

struct basic_auth_config {
    char *username;
    char *password;
};

struct pyro_config {
    char *endpoint;
    char *protocol;
    struct hs_strmap headers;
    bool has_basic_auth;
    struct basic_auth_config basic_auth;
    char *tenant_id;
    char *compression;
    uint64_t timeout_ms;
    struct hs_sender_queue_config queue;
    struct hs_sender_retry_config retry;
    struct hs_tls_client_config tls;
};

static const struct hs_config_field basic_auth_fields[] = {
    {"username", HS_CFG_STRING, offsetof(struct basic_auth_config, username), NULL,
     .required = true, .doc = "user name"},
    {"password", HS_CFG_STRING, offsetof(struct basic_auth_config, password), NULL,
     .doc = "password (use ${env:VAR} rather than writing it in the file)"},
    {0},
};

static const struct hs_config_field pyro_fields[] = {
    {"endpoint", HS_CFG_URL, offsetof(struct pyro_config, endpoint), NULL, .required = true,
     .doc = "base URL of Pyroscope, e.g. http://pyroscope:4040; a path prefix is kept"},
    {"protocol", HS_CFG_ENUM, offsetof(struct pyro_config, protocol), "push",
     .choices = protocol_choices,
     .doc = "push: one POST /push.v1.PusherService/Push (Connect, protobuf) per batch; ingest: "
            "one POST /ingest per profile"},
    {"headers", HS_CFG_STRMAP, offsetof(struct pyro_config, headers), NULL,
     .doc = "extra request headers, e.g. X-Scope-OrgID or Authorization; they win over "
            "tenant_id, the batch's tenant and basic_auth"},
    {"basic_auth", HS_CFG_SECTION, offsetof(struct pyro_config, basic_auth), NULL,
     .sub = basic_auth_fields, .has_presence = true,
     .presence_offset = offsetof(struct pyro_config, has_basic_auth),
     .doc = "sends Authorization: Basic base64(username:password)"},
    {"tenant_id", HS_CFG_STRING, offsetof(struct pyro_config, tenant_id), NULL,
     .doc = "X-Scope-OrgID sent with every request; without it, the tenant each batch arrived "
            "with is sent"},
    {"compression", HS_CFG_ENUM, offsetof(struct pyro_config, compression), "none",
     .choices = compression_choices,
     .doc = "push only: Content-Encoding gzip on the request. /ingest does not decode request "
            "encodings, so there the pprof goes as it arrived"},
    {"timeout", HS_CFG_DURATION, offsetof(struct pyro_config, timeout_ms), "30s", .min = 1,
     .max = 3600000, .doc = "time limit of one request, connecting included"},
    {"sending_queue", HS_CFG_SECTION, offsetof(struct pyro_config, queue), NULL,
     .sub = hs_sender_queue_fields,
     .doc = "the queue in front of the backend (a batch is one entry): in memory, or on disk "
            "with storage"},
    {"retry_on_failure", HS_CFG_SECTION, offsetof(struct pyro_config, retry), NULL,
     .sub = hs_sender_retry_fields,
     .doc = "exponential backoff with jitter, honouring Retry-After"},
    {"tls", HS_CFG_SECTION, offsetof(struct pyro_config, tls), NULL, .sub = hs_tls_client_fields,
     .doc = "TLS for an https:// endpoint (CA, client certificate for mTLS, verification); "
            "reloaded on SIGHUP"},
    {0},
};

struct pyro_exp {
    struct hs_component base;
    struct pyro_config conf;
    bool ingest, gzip;
    bool tenant_configured; /* tenant_id or an X-Scope-OrgID header: batches' tenants unused */
    char *url;              /* push: the procedure's URL; ingest: <endpoint>/ingest */
    char **headers;         /* fixed "Name: value" lines */
    size_t header_count;
    uint64_t boundary_seq;
    struct hs_sender *sender;
    struct hs_tls_client *tls; /* the files of conf.tls */
    bool closing;
    hs_done_cb done;
};

/* ---- create ----------------------------------------------------------------------------- */

static bool header_configured(const struct pyro_config *conf, const char *name)
{
    for (size_t i = 0; i < conf->headers.count; i++)
        if (strcasecmp(conf->headers.keys[i], name) == 0)
            return true;
    return false;
}

static void add_header(struct pyro_exp *e, const char *name, const char *value)
{
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%s: %s", name, value) != 0)
        abort(); /* a few bytes at create time: treat like hs_xmalloc */
    e->headers[e->header_count++] = (char *)b.data;
}

/* The fixed lines; per request come the batch's tenant and, for /ingest, the Content-Type. */
static void build_headers(struct pyro_exp *e)
{
    const struct pyro_config *conf = &e->conf;
    e->headers = hs_xcalloc(6 + conf->headers.count, sizeof(*e->headers));
    add_header(e, "User-Agent", "hotspan/" HS_VERSION);
    if (!e->ingest) {
        add_header(e, "Content-Type", "application/proto");
        add_header(e, "Connect-Protocol-Version", "1");
        if (e->gzip)
            add_header(e, "Content-Encoding", "gzip");
    }
    if (conf->has_basic_auth && !header_configured(conf, "Authorization")) {
        struct hs_buf cred = {0}, line = {0};
        if (hs_buf_printf(&cred, "%s:%s", conf->basic_auth.username,
                          conf->basic_auth.password ? conf->basic_auth.password : "") != 0 ||
            hs_buf_printf(&line, "Authorization: Basic ") != 0 ||
            hs_buf_put_base64(&line, cred.data, cred.len) != 0 || hs_buf_putc(&line, '\0') != 0)
            abort();
        hs_buf_free(&cred);
        e->headers[e->header_count++] = (char *)line.data;
    }
    if (conf->tenant_id && !header_configured(conf, "X-Scope-OrgID"))
        add_header(e, "X-Scope-OrgID", conf->tenant_id);
    for (size_t i = 0; i < conf->headers.count; i++)
        add_header(e, conf->headers.keys[i], conf->headers.values[i]);
}

static void pyro_free(struct pyro_exp *e)
{
    hs_sender_free(e->sender);
    for (size_t i = 0; i < e->header_count; i++)
        free(e->headers[i]);
    free(e->headers);
    free(e->url);
    hs_tls_client_free(e->tls);
    hs_config_free_fields(pyro_fields, &e->conf);
    free(e);
}

static int pyro_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct pyro_exp *e = hs_xcalloc(1, sizeof(*e));
    if (hs_config_decode(pyro_fields, cfg, &e->conf, path, err) != 0)
        goto fail;
    /* the files are read now, so a missing or broken one is an error at its key */
    if (hs_tls_client_new(&e->conf.tls, hs_config_get(cfg, "tls"), path, &e->tls, err) != 0)
        goto fail;
    e->ingest = strcmp(e->conf.protocol, "ingest") == 0;
    e->gzip = !e->ingest && strcmp(e->conf.compression, "gzip") == 0;
    e->tenant_configured =
        (e->conf.tenant_id && e->conf.tenant_id[0]) || header_configured(&e->conf, "X-Scope-OrgID");
    size_t n = strlen(e->conf.endpoint);
    while (n > 0 && e->conf.endpoint[n - 1] == '/') /* http://host/ must not give // */
        n--;
    struct hs_buf u = {0};
    if (hs_buf_printf(&u, "%.*s%s", (int)n, e->conf.endpoint, e->ingest ? "/ingest" : PUSH_PATH))
        goto fail;
    e->url = (char *)u.data;
    build_headers(e);
    *out = &e->base;
    return 0;
fail:
    pyro_free(e);
    return HS_EINVAL;
}

/* ---- push: one PushRequest per batch ---------------------------------------------------- */

static int encode_push(const struct hs_profiles *b, struct hs_buf *out)
{
    size_t nlabels = 0;
    for (uint32_t i = 0; i < b->count; i++)
        nlabels += b->items[i]->nlabels;
    /* one block for the messages, freed once packed: the bytes are copied by pack */
    size_t n = b->count;
    Push__V1__RawProfileSeries *series = calloc(n, sizeof(*series));
    Push__V1__RawProfileSeries **series_p = calloc(n, sizeof(*series_p));
    Push__V1__RawSample *samples = calloc(n, sizeof(*samples));
    Push__V1__RawSample **samples_p = calloc(n, sizeof(*samples_p));
    Types__V1__LabelPair *pairs = calloc(nlabels ? nlabels : 1, sizeof(*pairs));
    Types__V1__LabelPair **pairs_p = calloc(nlabels ? nlabels : 1, sizeof(*pairs_p));
    int rc = HS_ENOMEM;
    if (!series || !series_p || !samples || !samples_p || !pairs || !pairs_p)
        goto out;
    size_t l = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct hs_profile *p = b->items[i];
        push__v1__raw_profile_series__init(&series[i]);
        series[i].n_labels = p->nlabels;
        series[i].labels = &pairs_p[l];
        for (uint32_t j = 0; j < p->nlabels; j++, l++) {
            types__v1__label_pair__init(&pairs[l]);
            pairs[l].name = (char *)p->labels[j].name;
            pairs[l].value = (char *)p->labels[j].value;
            pairs_p[l] = &pairs[l];
        }
        push__v1__raw_sample__init(&samples[i]);
        samples[i].raw_profile = (ProtobufCBinaryData){p->raw_len, (uint8_t *)p->raw};
        if (p->id)
            samples[i].id = (char *)p->id;
        samples_p[i] = &samples[i];
        series[i].n_samples = 1;
        series[i].samples = &samples_p[i];
        series_p[i] = &series[i];
    }
    Push__V1__PushRequest req;
    push__v1__push_request__init(&req);
    req.n_series = n;
    req.series = series_p;
    size_t len = push__v1__push_request__get_packed_size(&req);
    if (hs_buf_reserve(out, len) != 0)
        goto out;
    out->len = push__v1__push_request__pack(&req, out->data);
    rc = 0;
out:
    free(series);
    free(series_p);
    free(samples);
    free(samples_p);
    free(pairs);
    free(pairs_p);
    return rc;
}

/* ---- ingest: one upload per profile ----------------------------------------------------- */

static int put_urlencoded(struct hs_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            rc = hs_buf_putc(b, c);
        } else {
            char q[3] = {'%', hex[c >> 4], hex[c & 15]};
            rc = hs_buf_append(b, q, 3);
        }
    }
    return rc;
}

/* Pyroscope reads an all-digit time by its length: 19 digits are nanoseconds (wire.md §5.1).
 * Zero padding keeps times before 2001 at 19; an unknown time (0) is left out: "now". */
static int put_time(struct hs_buf *b, const char *key, int64_t ns)
{
    if (ns <= 0)
        return 0;
    return hs_buf_printf(b, "&%s=%019" PRId64, key, ns);
}

static int ingest_url(const struct pyro_exp *e, const struct hs_profile *p, struct hs_buf *out)
{
    struct hs_buf name = {0};
    int rc = hs_labelset_format(p, &name);
    if (rc == 0)
        rc = hs_buf_printf(out, "%s?name=", e->url);
    if (rc == 0)
        rc = put_urlencoded(out, (const char *)name.data, name.len);
    hs_buf_free(&name);
    if (rc == 0)
        rc = put_time(out, "from", p->from_ns);
    if (rc == 0)
        rc = put_time(out, "until", p->until_ns);
    if (rc == 0 && p->spy_name) {
        rc = hs_buf_printf(out, "&spyName=");
        if (rc == 0)
            rc = put_urlencoded(out, p->spy_name, strlen(p->spy_name));
    }
    /* multipart must come without format: format=pprof makes Pyroscope read the body raw */
    if (rc == 0 && !p->sample_type_config)
        rc = hs_buf_printf(out, "&format=pprof");
    if (rc == 0)
        rc = hs_buf_putc(out, '\0');
    return rc;
}

static int put_part(struct hs_buf *b, const char *boundary, const char *name, const char *filename,
                    const void *data, size_t len)
{
    int rc = hs_buf_printf(b,
                           "--%s\r\nContent-Disposition: form-data; name=\"%s\"; "
                           "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                           boundary, name, filename);
    if (rc == 0)
        rc = hs_buf_append(b, data, len);
    if (rc == 0)
        rc = hs_buf_printf(b, "\r\n");
    return rc;
}

/* The Go SDK's shape (wire.md §5.5): parts `profile` and `sample_type_config`. */
static int ingest_multipart(struct pyro_exp *e, const struct hs_profile *p,
                            struct hs_sender_request *req)
{
    const char *stc = p->sample_type_config;
    size_t stc_len = strlen(stc);
    char boundary[48];
    do { /* a boundary must not occur in the parts; a random-looking one rarely does */
        uint64_t seq = ++e->boundary_seq;
        snprintf(boundary, sizeof(boundary), "hotspan-%016" PRIx64 "%016" PRIx64,
                 (uint64_t)((uintptr_t)p * UINT64_C(0x9e3779b97f4a7c15)),
                 (uint64_t)(seq * UINT64_C(0xbf58476d1ce4e5b9)));
    } while (memmem(p->raw, p->raw_len, boundary, strlen(boundary)) ||
             memmem(stc, stc_len, boundary, strlen(boundary)));
    struct hs_buf *b = &req->body_buf;
    int rc = put_part(b, boundary, "profile", "profile.pprof", p->raw, p->raw_len);
    if (rc == 0)
        rc = put_part(b, boundary, "sample_type_config", "sample_type_config.json", stc, stc_len);
    if (rc == 0)
        rc = hs_buf_printf(b, "--%s--\r\n", boundary);
    if (rc != 0)
        return rc;
    req->body = b->data;
    req->body_len = b->len;
    char ct[96];
    snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%s", boundary);
    return hs_sender_request_header(req, "Content-Type", ct);
}

static int encode_ingest(struct pyro_exp *e, const struct hs_profile *p,
                         struct hs_sender_request *req)
{
    int rc = ingest_url(e, p, &req->url_buf);
    if (rc != 0)
        return rc;
    req->url = (const char *)req->url_buf.data;
    if (p->sample_type_config)
        return ingest_multipart(e, p, req);
    req->body = p->raw; /* the pprof as it arrived, borrowed from the batch the item holds */
    req->body_len = p->raw_len;
    return hs_sender_request_header(req, "Content-Type", "application/octet-stream");
}

/* ---- the sender's hooks ----------------------------------------------------------------- */

static int pyro_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct pyro_exp *e = ud;
    const struct hs_profiles *b = item;
    req->count = e->ingest ? 1 : b->count;
    req->url = e->url;
    req->headers = (const char *const *)e->headers;
    req->header_count = e->header_count;
    int rc;
    if (!e->tenant_configured && b->tenant &&
        (rc = hs_sender_request_header(req, "X-Scope-OrgID", b->tenant)) != 0)
        return rc;
    if (e->ingest)
        return encode_ingest(e, b->items[part], req);
    struct hs_buf msg = {0};
    if ((rc = encode_push(b, e->gzip ? &msg : &req->body_buf)) == 0 && e->gzip)
        rc = hs_gzip(msg.data, msg.len, GZIP_LEVEL, &req->body_buf);
    hs_buf_free(&msg);
    req->body = req->body_buf.data;
    req->body_len = req->body_buf.len;
    return rc;
}

static void pyro_release(void *ud, void *item)
{
    hs_profiles_unref(item);
}

/* ---- the component ---------------------------------------------------------------------- */

/* Made on first use, as the core fills base.id after create. */
static struct hs_sender *pyro_sender(struct pyro_exp *e)
{
    if (!e->sender)
        e->sender = hs_sender_new(&(struct hs_sender_options){
            .id = e->base.id,
            .items = "profiles",
            .signal = HS_SIGNAL_PROFILES,
            .queue = &e->conf.queue,
            .retry = &e->conf.retry,
            .timeout_ms = e->conf.timeout_ms,
            /* with sending_queue.storage: replayed records take these from the config */
            .url = e->url,
            .headers = (const char *const *)e->headers,
            .header_count = e->header_count,
            .tls = e->tls,
            .hooks = {.encode = pyro_encode, .release = pyro_release},
            .ud = e,
        });
    return e->sender;
}

static bool pyro_ready(struct hs_component *c)
{
    struct pyro_exp *e = hs_container_of(c, struct pyro_exp, base);
    return !e->closing && hs_sender_ready(pyro_sender(e));
}

static int pyro_consume(struct hs_component *c, struct hs_profiles *b)
{
    struct pyro_exp *e = hs_container_of(c, struct pyro_exp, base);
    if (e->closing) {
        hs_profiles_unref(b);
        return HS_EAGAIN;
    }
    if (b->count == 0) { /* Pyroscope answers an empty Push with 400: nothing to send */
        hs_profiles_unref(b);
        return 0;
    }
    return hs_sender_submit(pyro_sender(e), b, b->bytes, b->count, e->ingest ? b->count : 1);
}

static int pyro_start(struct hs_component *c, const struct hs_host *host)
{
    struct pyro_exp *e = hs_container_of(c, struct pyro_exp, base);
    e->base.metrics = host->metrics;
    int rc = hs_sender_start(pyro_sender(e), host->loop, host->metrics);
    if (rc != 0)
        return rc;
    hs_log_info(c->id, "exporting profiles to %s (%s)", e->url, e->conf.protocol);
    return 0;
}

static void sender_done(void *ud)
{
    struct pyro_exp *e = ud;
    e->done(&e->base);
}

static void pyro_shutdown(struct hs_component *c, hs_done_cb done)
{
    struct pyro_exp *e = hs_container_of(c, struct pyro_exp, base);
    if (e->closing) /* already on its way; the first done will fire */
        return;
    e->closing = true;
    e->done = done;
    hs_sender_shutdown(pyro_sender(e), sender_done, e);
}

static void pyro_destroy(struct hs_component *c)
{
    pyro_free(hs_container_of(c, struct pyro_exp, base));
}

const struct hs_component_type hs_exporter_pyroscope = {
    .name = "pyroscope",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_PROFILES,
    .doc = "Sends profiles to Pyroscope (push API or /ingest) byte for byte, queued and retried.",
    .fields = pyro_fields,
    .create = pyro_create,
    .start = pyro_start,
    .consume_profiles = pyro_consume,
    .ready = pyro_ready,
    .shutdown = pyro_shutdown,
    .destroy = pyro_destroy,
};
