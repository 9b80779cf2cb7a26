/* profiles.c: the otlp receiver's profiles (POST /v1development/profiles, ProfilesService/Export):
 * each request decoded and checked whole (pdata/otlp_profiles.h), delivered to the profiles
 * pipeline all or nothing, and answered as a traces request is: an ExportProfilesServiceResponse,
 * or a Status naming the field, or backpressure. There is no partial success: a request whose
 * one reference is out of range is refused whole, since its profiles share one dictionary. */
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/log.h"
#include "net/grpc.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pdata/profiles.h"
#include "receivers/otlp/otlp_int.h"

/* 200 with an empty ExportProfilesServiceResponse: partial_success unset (wire.md §2). */
static void answer_ok(struct hs_http_request *req, enum body_type type)
{
    if (type == BODY_JSON) {
        hs_http_respond(req, 200, "application/json", NULL, 0, "{}", 2);
        return;
    }
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse resp =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    uint8_t body[16];
    size_t n =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__pack(
            &resp, body);
    if (type == BODY_GRPC)
        hs_grpc_respond(req, HS_GRPC_OK, NULL, body, n, hs_grpc_request_gzip(req), 0);
    else
        hs_http_respond(req, 200, "application/x-protobuf", NULL, 0, body, n);
}

static void answer_busy(struct hs_http_request *req, enum body_type type, const char *msg)
{
    static const struct hs_http_header retry = {HS_STR("retry-after"), HS_STR("1")};
    hs_otlp_recv_status(req, type, 503, CODE_UNAVAILABLE, msg, &retry, 1);
}

/* A new batch for the request's tenant (the receiver checked it: at most 150 bytes). */
static struct hs_profiles *new_batch(struct req_tenant tenant)
{
    char id[160];
    if (tenant.id.len >= sizeof(id))
        return NULL;
    memcpy(id, tenant.id.ptr, tenant.id.len);
    id[tenant.id.len] = '\0';
    struct hs_profiles *b = hs_profiles_new(tenant.id.len ? id : NULL);
    if (b)
        b->tenant_authenticated = tenant.authenticated;
    return b;
}

static void deliver(struct otlp *r, struct hs_http_request *req, enum body_type type,
                    struct hs_profiles *b)
{
    struct otlp_counters *k = hs_otlp_recv_counters(r, type);
    uint32_t n = b->request_profiles;
    if (n == 0) { /* an empty request is a full success, with nothing to pass on */
        hs_profiles_unref(b);
        answer_ok(req, type);
        return;
    }
    int rc = hs_consumer_profiles(r->base.next_profiles, b);
    if (rc == 0) {
        hs_counter_add(k->accepted_profiles, n);
        answer_ok(req, type);
        return;
    }
    hs_counter_add(k->refused_profiles, n);
    if (rc == HS_EAGAIN)
        answer_busy(req, type, "pipeline is full (exporters busy or backend down): retry later");
    else if (rc == HS_EINVAL)
        hs_otlp_recv_status(req, type, 400, CODE_INVALID_ARGUMENT, hs_strerror(rc), NULL, 0);
    else
        answer_busy(req, type, hs_strerror(rc));
}

void hs_otlp_recv_profiles(struct otlp *r, struct hs_http_request *req, enum body_type type,
                           const uint8_t *p, size_t len, struct req_tenant tenant)
{
    struct hs_profiles *b = new_batch(tenant);
    if (!b) {
        answer_busy(req, type, "out of memory");
        return;
    }
    /* the transport's body limit also bounds the protobuf a JSON body converts to */
    struct hs_otlp_profiles_limits lim = r->plimits;
    lim.max_decompressed = type == BODY_GRPC ? r->conf.protocols.grpc.server.max_request_body_size
                                             : r->conf.protocols.http.server.max_request_body_size;
    char err[300] = "";
    int rc = type == BODY_JSON
                 ? hs_otlp_profiles_decode_json(b, (const char *)p, len, &lim, err, sizeof(err))
                 : hs_otlp_profiles_decode(b, p, len, &lim, err, sizeof(err));
    if (rc == HS_ENOMEM) {
        hs_profiles_unref(b);
        answer_busy(req, type, "out of memory");
        return;
    }
    if (rc) {
        hs_profiles_unref(b);
        const char *reason = rc == HS_E2BIG      ? "over_limit"
                             : type == BODY_JSON ? "bad_json"
                                                 : "malformed";
        hs_otlp_recv_reject(r, req, type, 400, reason, err[0] ? err : hs_strerror(rc));
        return;
    }
    deliver(r, req, type, b);
}
