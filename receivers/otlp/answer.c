/* answer.c: the otlp receiver's answers, shared by its traces (otlp.c) and profiles
 * (profiles.c) paths: a google.rpc.Status in the request's encoding or a gRPC status, and a
 * counted, logged refusal of bad input (wire.md §2, §3). */
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/log.h"
#include "core/metrics.h"
#include "google/rpc/status.pb-c.h"
#include "net/grpc.h"
#include "net/http_server.h"
#include "pdata/otlp_json.h"
#include "receivers/otlp/otlp_int.h"

void hs_otlp_recv_status(struct hs_http_request *req, enum body_type type, int http, int code,
                         const char *msg, const struct hs_http_header *extra, size_t nextra)
{
    if (type == BODY_GRPC) { /* the HTTP status and its headers are HTTP's; gRPC has codes */
        hs_grpc_respond(req, code, msg, NULL, 0, false,
                        code == CODE_UNAVAILABLE ? GRPC_RETRY_DELAY_MS : 0);
        return;
    }
    if (type == BODY_JSON) {
        struct hs_buf b = {0};
        int rc = hs_buf_printf(&b, "{\"code\":%d,\"message\":", code);
        rc |= hs_json_put_string(&b, msg, strlen(msg));
        rc |= hs_buf_putc(&b, '}');
        if (rc)
            hs_http_respond_text(req, 500, "out of memory\n");
        else
            hs_http_respond(req, http, "application/json", extra, nextra, b.data, b.len);
        hs_buf_free(&b);
        return;
    }
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    st.code = code;
    st.message = (char *)msg;
    uint8_t body[1200];
    size_t n = google__rpc__status__get_packed_size(&st);
    if (n > sizeof(body)) {
        st.message = "error message too long";
        n = google__rpc__status__get_packed_size(&st);
    }
    google__rpc__status__pack(&st, body);
    hs_http_respond(req, http, "application/x-protobuf", extra, nextra, body, n);
}

void hs_otlp_recv_reject(struct otlp *r, struct hs_http_request *req, enum body_type type, int http,
                         const char *reason, const char *msg)
{
    char labels[300];
    snprintf(labels, sizeof(labels), "%s,reason=\"%s\"",
             r->counters[type == BODY_GRPC ? TR_GRPC : TR_HTTP].labels, reason);
    hs_counter_add(hs_metrics_counter(r->metrics, "receiver_failed_requests_total",
                                      "Requests answered with an error, by reason", labels),
                   1);
    uint32_t suppressed = 0;
    if (hs_ratelimit_allow(&r->bad_log, hs_now_ms(), &suppressed))
        hs_log_info(r->base.id, "%d for %s: %s (%u similar suppressed)", http, req->peer, msg,
                    suppressed);
    hs_otlp_recv_status(req, type, http,
                        http == 413 ? CODE_RESOURCE_EXHAUSTED : CODE_INVALID_ARGUMENT, msg, NULL,
                        0);
}
