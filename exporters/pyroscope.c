/* pyroscope.c: the `pyroscope` exporter: profiles sent on to Pyroscope byte for byte, as a
 * Connect Push request per batch (wire.md §6, what Grafana Alloy's pyroscope.write does) or one
 * legacy /ingest upload per profile (wire.md §5). OTLP profiles are converted once to the pprof
 * and series labels Pyroscope's own OTLP ingestion makes of them (pdata/otlp_profiles.h). Queue,
 * retries, persistence and lifecycle are the exporter helper's (exporters/helper/exporter.h). */
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
#include "core/metrics.h"
#include "exporters/pyroscope.h"
#include "pdata/profiles.h"
#include "push/v1/push.pb-c.h"

/* pprof is usually gzipped already; level 1 keeps the CPU cost of a second pass small. */
#define GZIP_LEVEL 1
#define PUSH_PATH "/push.v1.PusherService/Push"

static const char *const protocol_choices[] = {"push", "ingest", NULL};
static const char *const compression_choices[] = {"none", "gzip", NULL};

static const struct hs_config_field basic_auth_fields[] = {
    {"username", HS_CFG_STRING, offsetof(struct hs_pyroscope_basic_auth, username), NULL,
     .required = true, .doc = "user name"},
    {"password", HS_CFG_STRING, offsetof(struct hs_pyroscope_basic_auth, password), NULL,
     .doc = "password (use ${env:VAR} rather than writing it in the file)"},
    {0},
};

/* What a backend of load_balancing has too: all but where it is. */
static const struct hs_config_field pyro_wire_fields[] = {
    {"protocol", HS_CFG_ENUM, offsetof(struct hs_pyroscope_config, protocol), "push",
     .choices = protocol_choices,
     .doc = "push: one POST /push.v1.PusherService/Push (Connect, protobuf) per batch; ingest: "
            "one POST /ingest per profile"},
    {"basic_auth", HS_CFG_SECTION, offsetof(struct hs_pyroscope_config, basic_auth), NULL,
     .sub = basic_auth_fields, .has_presence = true,
     .presence_offset = offsetof(struct hs_pyroscope_config, has_basic_auth),
     .doc = "sends Authorization: Basic base64(username:password), unless headers has an "
            "Authorization"},
    {"tenant_id", HS_CFG_STRING, offsetof(struct hs_pyroscope_config, tenant_id), NULL,
     .doc = "X-Scope-OrgID sent with every request (an X-Scope-OrgID in headers wins); without "
            "it, the tenant each batch arrived with is sent"},
    {"compression", HS_CFG_ENUM, offsetof(struct hs_pyroscope_config, compression), "none",
     .choices = compression_choices,
     .doc = "push only: Content-Encoding gzip on the request. /ingest does not decode request "
            "encodings, so there the pprof goes as it arrived"},
    {"exporter", HS_CFG_INLINE, offsetof(struct hs_pyroscope_config, common),
     .sub = hs_exporter_fields},
    {0},
};

static const struct hs_config_field pyro_fields[] = {
    {"endpoint", HS_CFG_URL, offsetof(struct hs_pyroscope_config, endpoint), NULL, .required = true,
     .doc = "base URL of Pyroscope, e.g. http://pyroscope:4040; a path prefix is kept"},
    {"pyroscope", HS_CFG_INLINE, 0, .sub = pyro_wire_fields},
    {0},
};

const struct hs_config_field hs_pyroscope_backend_fields[] = {
    {"port", HS_CFG_UINT, offsetof(struct hs_pyroscope_config, port), "4040", .min = 1,
     .max = 65535, .doc = "every backend's Pyroscope port (the push API and /ingest)"},
    {"pyroscope", HS_CFG_INLINE, 0, .sub = pyro_wire_fields},
    {0},
};

struct pyro_exp {
    struct hs_exporter x; /* first: the helper frees the struct */
    struct hs_pyroscope_config conf;
    bool ingest, gzip;
    uint64_t boundary_seq;
    struct hs_ratelimit log_rl;
};

extern const struct hs_component_type hs_exporter_pyroscope;

/* ---- create ----------------------------------------------------------------------------- */

/* Our fixed lines (the configured headers follow them); per request come the batch's tenant
 * and, for /ingest, the Content-Type. */
static void build_headers(struct pyro_exp *e)
{
    const struct hs_pyroscope_config *conf = &e->conf;
    hs_exporter_header(&e->x, "User-Agent", "hotspan/" HS_VERSION);
    if (!e->ingest) {
        hs_exporter_header(&e->x, "Content-Type", "application/proto");
        hs_exporter_header(&e->x, "Connect-Protocol-Version", "1");
        if (e->gzip)
            hs_exporter_header(&e->x, "Content-Encoding", "gzip");
    }
    if (conf->has_basic_auth && !hs_exporter_header_configured(&e->x, "Authorization")) {
        struct hs_buf cred = {0}, value = {0};
        if (hs_buf_printf(&cred, "%s:%s", conf->basic_auth.username,
                          conf->basic_auth.password ? conf->basic_auth.password : "") != 0 ||
            hs_buf_printf(&value, "Basic ") != 0 ||
            hs_buf_put_base64(&value, cred.data, cred.len) != 0 || hs_buf_putc(&value, '\0') != 0)
            abort();
        hs_exporter_header(&e->x, "Authorization", (const char *)value.data);
        hs_buf_free(&cred);
        hs_buf_free(&value);
    }
    if (conf->tenant_id && !hs_exporter_header_configured(&e->x, "X-Scope-OrgID"))
        hs_exporter_header(&e->x, "X-Scope-OrgID", conf->tenant_id);
}

static const struct hs_exporter_ops pyro_ops;

/* What create and hs_pyroscope_backend_new share once e->conf is decoded. */
static int pyro_finish(struct pyro_exp *e, const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    if (hs_exporter_configure(&e->x, cfg, path, err) != 0)
        goto fail;
    e->ingest = strcmp(e->conf.protocol, "ingest") == 0;
    e->gzip = !e->ingest && strcmp(e->conf.compression, "gzip") == 0;
    e->x.tenant_fixed |= e->conf.tenant_id && e->conf.tenant_id[0];
    size_t n = strlen(e->conf.endpoint);
    while (n > 0 && e->conf.endpoint[n - 1] == '/') /* http://host/ must not give // */
        n--;
    struct hs_buf u = {0};
    if (hs_buf_printf(&u, "%.*s%s", (int)n, e->conf.endpoint, e->ingest ? "/ingest" : PUSH_PATH))
        goto fail;
    e->x.url = (char *)u.data;
    e->x.note = e->ingest ? " (ingest)" : " (push)";
    e->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    build_headers(e);
    *out = &e->x.base;
    return 0;
fail:
    hs_exporter_destroy(&e->x.base);
    return HS_EINVAL;
}

static int pyro_create(const struct hs_config_node *cfg, const char *path,
                       struct hs_component **out, struct hs_error *err)
{
    struct pyro_exp *e = hs_xcalloc(1, sizeof(*e));
    hs_exporter_init(&e->x, &pyro_ops, &e->conf, &e->conf.common);
    if (hs_config_decode(pyro_fields, cfg, &e->conf, path, err) != 0) {
        hs_exporter_destroy(&e->x.base);
        return HS_EINVAL;
    }
    return pyro_finish(e, cfg, path, out, err);
}

int hs_pyroscope_backend_new(const struct hs_pyroscope_config *tmpl, const char *endpoint,
                             const struct hs_config_node *cfg, const char *path,
                             struct hs_component **out, struct hs_error *err)
{
    struct pyro_exp *e = hs_xcalloc(1, sizeof(*e));
    hs_exporter_init(&e->x, &pyro_ops, &e->conf, &e->conf.common);
    e->conf = *tmpl;
    hs_config_dup_fields(hs_pyroscope_backend_fields, &e->conf);
    e->conf.endpoint = hs_xstrdup(endpoint); /* tmpl has none: its rows have no endpoint */
    int rc = pyro_finish(e, cfg, path, out, err);
    if (rc == 0)
        (*out)->type = &hs_exporter_pyroscope; /* what the core sets for those it makes */
    return rc;
}

/* ---- what a batch sends ----------------------------------------------------------------- */

/* A profile of an OTLP batch without samples has nothing for Pyroscope, which skips an OTLP
 * profile that yields no series; a pprof upload goes as it came, empty or not. */
static bool sendable(const struct hs_profiles *b, const struct hs_profile *p)
{
    return b->format != HS_PROFILES_OTLP || p->summary.samples > 0;
}

static uint32_t count_sendable(const struct hs_profiles *b)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->count; i++)
        n += sendable(b, b->items[i]);
    return n;
}

/* The part-th profile to send. */
static const struct hs_profile *nth_sendable(const struct hs_profiles *b, uint32_t part)
{
    for (uint32_t i = 0; i < b->count; i++)
        if (sendable(b, b->items[i]) && part-- == 0)
            return b->items[i];
    return NULL;
}

/* ---- push: one PushRequest per batch ---------------------------------------------------- */

static int encode_push(const struct hs_profiles *b, struct hs_buf *out)
{
    size_t nlabels = 0;
    for (uint32_t i = 0; i < b->count; i++)
        nlabels += b->items[i]->nlabels;
    /* one block for the messages, freed once packed: the bytes are copied by pack */
    size_t n = count_sendable(b);
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
        const struct hs_profile *p = nth_sendable(b, i);
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
        rc = hs_buf_printf(out, "%s?name=", e->x.url);
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

/* ---- the helper's hooks ----------------------------------------------------------------- */

static int pyro_encode(void *ud, void *item, uint32_t part, struct hs_sender_request *req)
{
    struct pyro_exp *e = hs_container_of(ud, struct pyro_exp, x);
    const struct hs_profiles *b = item;
    req->count = e->ingest ? 1 : count_sendable(b);
    req->url = e->x.url;
    req->headers = (const char *const *)e->x.headers;
    req->header_count = e->x.header_count;
    int rc = hs_exporter_tenant_header(&e->x, req, b->tenant);
    if (rc != 0)
        return rc;
    if (e->ingest) {
        const struct hs_profile *p = nth_sendable(b, part);
        return p ? encode_ingest(e, p, req) : HS_EINVAL;
    }
    struct hs_buf msg = {0};
    if ((rc = encode_push(b, e->gzip ? &msg : &req->body_buf)) == 0 && e->gzip)
        rc = hs_gzip(msg.data, msg.len, GZIP_LEVEL, &req->body_buf);
    hs_buf_free(&msg);
    req->body = req->body_buf.data;
    req->body_len = req->body_buf.len;
    return rc;
}

/* /ingest takes one profile per request; a Push takes the batch. */
static uint32_t pyro_parts(const struct hs_exporter *x, const void *item)
{
    const struct pyro_exp *e = hs_container_of(x, const struct pyro_exp, x);
    return e->ingest ? count_sendable(item) : 1;
}

static const struct hs_exporter_ops pyro_ops = {
    .signal = HS_SIGNAL_PROFILES,
    .fields = pyro_fields,
    .encode = pyro_encode,
    .parts = pyro_parts,
};

/* ---- the component ---------------------------------------------------------------------- */

/* OTLP profiles become pprof here, once, before they are queued: what is queued (and stored)
 * is then what is sent, and a batch shared with an otlp exporter keeps its request for it. */
static int pyro_consume_profiles(struct hs_component *c, struct hs_profiles *b)
{
    struct pyro_exp *e = hs_container_of(c, struct pyro_exp, x.base);
    if (!e->x.closing && !hs_exporter_profiles_to_pprof(c, &e->log_rl, b))
        return 0;
    uint32_t n = count_sendable(b);
    if (!e->x.closing && n == 0) { /* nothing to send (Pyroscope answers 400 to it) */
        hs_profiles_unref(b);
        return 0;
    }
    return hs_exporter_submit(&e->x, b, b->bytes, n, e->ingest ? n : 1);
}

const struct hs_component_type hs_exporter_pyroscope = {
    .name = "pyroscope",
    .kind = HS_KIND_EXPORTER,
    .signals = HS_SIGNAL_PROFILES,
    .doc = "Sends profiles to Pyroscope (push API or /ingest) byte for byte, OTLP profiles "
           "converted once to pprof, queued and retried.",
    .fields = pyro_fields,
    .create = pyro_create,
    .start = hs_exporter_start,
    .consume_profiles = pyro_consume_profiles,
    .ready = hs_exporter_ready,
    .shutdown = hs_exporter_shutdown,
    .destroy = hs_exporter_destroy,
};
