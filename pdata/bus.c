/* bus.c: batches to and from bus messages (bus.h): subjects, the profiles body
 * (hotspan.bus.v1.Profiles through protobuf-c) and the checks a receiving hotspan makes before
 * it believes a message. */
#include "bus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/component.h"
#include "core/errors.h"
#include "hotspan/bus/v1/profiles.pb-c.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

int hs_bus_subject(char *out, size_t cap, const char *prefix, unsigned signal, uint32_t p)
{
    const char *sig = signal == HS_SIGNAL_TRACES     ? "traces"
                      : signal == HS_SIGNAL_PROFILES ? "profiles"
                                                     : "*";
    int n = snprintf(out, cap, "%s.%s.%02u", prefix, sig, p);
    return n < 0 || (size_t)n >= cap ? HS_E2BIG : 0;
}

bool hs_bus_prefix_valid(const char *prefix, const char **why)
{
    size_t n = strlen(prefix);
    if (n == 0 || n > HS_BUS_PREFIX_MAX) {
        *why = "must be 1 to 128 characters";
        return false;
    }
    if (prefix[0] == '.' || prefix[n - 1] == '.' || strstr(prefix, "..")) {
        *why = "an empty token (a leading, trailing or double '.')";
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)prefix[i];
        if (c <= ' ' || c >= 0x7f || c == '*' || c == '>') {
            *why = "only printable ASCII without spaces or the wildcards '*' and '>'";
            return false;
        }
    }
    return true;
}

/* ---- profiles out ----------------------------------------------------------------------- */

int hs_bus_profiles_encode(const struct hs_profiles *b, uint32_t first, uint32_t n,
                           struct hs_buf *out)
{
    if (first > b->count || n > b->count - first)
        return HS_EINVAL;
    struct hs_profile *const *items = b->items + first;
    size_t nlabels = 0;
    for (uint32_t i = 0; i < n; i++)
        nlabels += items[i]->nlabels;
    /* one block for the messages, freed once packed: pack copies the bytes */
    Hotspan__Bus__V1__Profile *profs = calloc(n ? n : 1, sizeof(*profs));
    Hotspan__Bus__V1__Profile **profs_p = calloc(n ? n : 1, sizeof(*profs_p));
    Hotspan__Bus__V1__Label *labels = calloc(nlabels ? nlabels : 1, sizeof(*labels));
    Hotspan__Bus__V1__Label **labels_p = calloc(nlabels ? nlabels : 1, sizeof(*labels_p));
    int rc = HS_ENOMEM;
    if (!profs || !profs_p || !labels || !labels_p)
        goto out;
    size_t l = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct hs_profile *p = items[i];
        Hotspan__Bus__V1__Profile *m = &profs[i];
        hotspan__bus__v1__profile__init(m);
        m->n_labels = p->nlabels;
        m->labels = &labels_p[l];
        for (uint32_t j = 0; j < p->nlabels; j++, l++) {
            hotspan__bus__v1__label__init(&labels[l]);
            labels[l].name = (char *)p->labels[j].name;
            labels[l].value = (char *)p->labels[j].value;
            labels_p[l] = &labels[l];
        }
        m->raw = (ProtobufCBinaryData){p->raw_len, (uint8_t *)p->raw};
        m->has_from_ns = m->has_until_ns = true;
        m->from_ns = p->from_ns;
        m->until_ns = p->until_ns;
        m->id = (char *)p->id;
        m->spy_name = (char *)p->spy_name;
        m->sample_type_config = (char *)p->sample_type_config;
        m->app_name = (char *)p->app_name;
        profs_p[i] = m;
    }
    Hotspan__Bus__V1__Profiles msg = HOTSPAN__BUS__V1__PROFILES__INIT;
    msg.n_profiles = n;
    msg.profiles = profs_p;
    size_t len = hotspan__bus__v1__profiles__get_packed_size(&msg);
    if (hs_buf_reserve(out, len) != 0)
        goto out;
    out->len += hotspan__bus__v1__profiles__pack(&msg, out->data + out->len);
    rc = 0;
out:
    free(profs);
    free(profs_p);
    free(labels);
    free(labels_p);
    return rc;
}

/* ---- in --------------------------------------------------------------------------------- */

static int tenant_check(const char *tenant, char *err, size_t errlen)
{
    if (!tenant || !tenant[0] || hs_tenant_valid(tenant, strlen(tenant)))
        return 0;
    snprintf(err, errlen, HS_BUS_HDR_TENANT ": not a valid tenant id");
    return HS_EINVAL;
}

int hs_bus_traces_decode(const void *body, size_t len, const char *tenant, bool tenant_auth,
                         struct hs_traces **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = tenant_check(tenant, err, errlen);
    if (rc)
        return rc;
    /* the sending hotspan applied its receivers' limits; these only keep the scan bounded */
    const struct hs_otlp_limits lim = {0};
    struct hs_otlp_scan scan = {0};
    rc = hs_otlp_traces_scan(body, len, &lim, NULL, NULL, &scan);
    if (rc) {
        snprintf(err, errlen, "spans: %s", scan.err[0] ? scan.err : hs_strerror(rc));
        return rc;
    }
    if (scan.spans == 0) {
        snprintf(err, errlen, "spans: no span in the message");
        return HS_EINVAL;
    }
    uint8_t *data = malloc(len);
    if (!data)
        return HS_ENOMEM;
    memcpy(data, body, len);
    struct hs_traces *t = hs_traces_wrap(data, len, len, scan.spans, scan.resource_spans);
    if (!t) {
        free(data);
        return HS_ENOMEM;
    }
    if (tenant && tenant[0])
        hs_traces_set_tenant(t, tenant, strlen(tenant)); /* checked above */
    t->tenant_authenticated = tenant && tenant[0] && tenant_auth;
    *out = t;
    return 0;
}

/* An optional string of the message into the profile's arena. */
static int put_str(struct hs_profile *p, const char *s, const char **dst)
{
    if (!s)
        return 0;
    *dst = hs_profile_strdup(p, s, strlen(s));
    return *dst ? 0 : HS_ENOMEM;
}

static int profile_from(const Hotspan__Bus__V1__Profile *m, const struct hs_pprof_limits *lim,
                        struct hs_profile **out, char *err, size_t errlen)
{
    struct hs_profile *p = hs_profile_new();
    if (!p)
        return HS_ENOMEM;
    int rc = hs_profile_set_raw(p, m->raw.data, m->raw.len);
    for (size_t k = 0; k < m->n_labels && rc == 0; k++)
        rc = hs_profile_set_label(p, m->labels[k]->name, strlen(m->labels[k]->name),
                                  m->labels[k]->value, strlen(m->labels[k]->value));
    if (rc == 0)
        rc = put_str(p, m->id, &p->id);
    if (rc == 0)
        rc = put_str(p, m->spy_name, &p->spy_name);
    if (rc == 0)
        rc = put_str(p, m->sample_type_config, &p->sample_type_config);
    if (rc == 0)
        rc = put_str(p, m->app_name, &p->app_name);
    p->from_ns = m->from_ns;
    p->until_ns = m->until_ns;
    if (rc == 0)
        rc = hs_profile_summarize(p, lim, err, errlen);
    if (rc) {
        hs_profile_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int hs_bus_profiles_decode(const void *body, size_t len, const char *tenant, bool tenant_auth,
                           const struct hs_pprof_limits *lim, struct hs_profiles **out, char *err,
                           size_t errlen)
{
    *out = NULL;
    int rc = tenant_check(tenant, err, errlen);
    if (rc)
        return rc;
    /* protobuf-c's structures are a few times the wire size at most */
    struct hs_arena *arena = hs_arena_new(len + 4096, len * 16 + (1 << 20));
    if (!arena)
        return HS_ENOMEM;
    ProtobufCAllocator alloc = hs_arena_pb_allocator(arena);
    Hotspan__Bus__V1__Profiles *msg = hotspan__bus__v1__profiles__unpack(&alloc, len, body);
    struct hs_profiles *b = NULL;
    if (!msg) {
        snprintf(err, errlen, "profiles: malformed protobuf");
        rc = HS_EINVAL;
    } else if (msg->n_profiles == 0) {
        snprintf(err, errlen, "profiles: no profile in the message");
        rc = HS_EINVAL;
    } else if (!(b = hs_profiles_new(tenant && tenant[0] ? tenant : NULL))) {
        rc = HS_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < msg->n_profiles; i++) {
        struct hs_profile *p;
        char why[200] = "";
        rc = profile_from(msg->profiles[i], lim, &p, why, sizeof(why));
        if (rc == 0)
            rc = hs_profiles_add(b, p);
        else if (rc != HS_ENOMEM)
            snprintf(err, errlen, "profiles[%zu]: %s", i, why);
    }
    hs_arena_free(arena);
    if (rc) {
        if (b)
            hs_profiles_unref(b);
        return rc;
    }
    b->tenant_authenticated = b->tenant && tenant_auth;
    *out = b;
    return 0;
}
