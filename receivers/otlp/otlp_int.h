/* otlp_int.h: what the otlp receiver's files share: the instance, its answers (a Status in the
 * request's encoding, a counted refusal) and the profiles handler (profiles.c) that otlp.c's
 * transports hand a profiles request to. Not for other modules. */
#ifndef HS_RECEIVERS_OTLP_INT_H
#define HS_RECEIVERS_OTLP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "core/component.h"
#include "core/metrics.h"
#include "net/auth.h"
#include "net/http_server.h"
#include "pdata/otlp_profiles.h"
#include "pdata/otlp_wire.h"

struct otlp_http_config {
    struct hs_http_server_config server;
    char *traces_url_path;
    char *profiles_url_path;
};

struct otlp_grpc_config {
    struct hs_http_server_config server;
};

/* The profiles signal's bounds (pdata/otlp_profiles.h names them in its messages). */
struct otlp_profiles_config {
    uint32_t max_profiles;
    uint32_t max_samples;
    uint32_t max_table_entries;
    uint32_t max_stack_depth;
    uint64_t max_string_len;
};

struct otlp_config {
    struct {
        bool http_enabled;
        struct otlp_http_config http;
        bool grpc_enabled;
        struct otlp_grpc_config grpc;
    } protocols;
    uint32_t max_spans;
    uint32_t max_attributes;
    uint32_t max_value_depth;
    struct otlp_profiles_config profiles;
    bool auth_enabled;
    struct hs_auth_config auth;
};

enum transport { TR_HTTP, TR_GRPC, TR_COUNT };

struct otlp_counters {
    struct hs_counter *accepted, *refused, *rejected; /* spans */
    struct hs_counter *accepted_profiles, *refused_profiles;
    char labels[200];
};

struct otlp {
    struct hs_component base;
    struct otlp_config conf;
    struct hs_otlp_limits limits;
    struct hs_otlp_profiles_limits plimits; /* max_decompressed: the transport's, per request */
    struct hs_http_server *servers[TR_COUNT];
    unsigned open_servers; /* not yet through their close */
    bool started, closing;
    hs_done_cb done;
    struct hs_ratelimit bad_log;
    struct otlp_counters counters[TR_COUNT];
    struct hs_metrics *metrics;
    struct hs_auth *auth; /* NULL: open */
    char grpc_name[160];  /* "<id>/grpc": the gRPC listener's name in logs */
};

/* BODY_GRPC: a gRPC message (protobuf); answers are gRPC statuses in trailers. */
enum body_type { BODY_PROTO, BODY_JSON, BODY_GRPC };

/* The wait a refused gRPC client is asked for (RetryInfo), as Retry-After: 1 on HTTP. */
#define GRPC_RETRY_DELAY_MS 1000

/* gRPC codes used in google.rpc.Status (wire.md §3). */
enum { CODE_INVALID_ARGUMENT = 3, CODE_RESOURCE_EXHAUSTED = 8, CODE_UNAVAILABLE = 14 };

/* A request's tenant (id.len 0: none) and whether a per-tenant token decided it. */
struct req_tenant {
    struct hs_str id;
    bool authenticated;
};

static inline struct otlp_counters *hs_otlp_recv_counters(struct otlp *r, enum body_type type)
{
    return &r->counters[type == BODY_GRPC ? TR_GRPC : TR_HTTP];
}

/* A google.rpc.Status in the request's encoding (OTLP/HTTP failures, wire.md §2), or the gRPC
 * status `code` (UNAVAILABLE with RetryInfo) for a gRPC request. */
void hs_otlp_recv_status(struct hs_http_request *req, enum body_type type, int http, int code,
                         const char *msg, const struct hs_http_header *extra, size_t nextra);
/* Counts a request refused as bad (receiver_failed_requests_total{reason}), logs it
 * (rate-limited) and answers http (400 or 413) with INVALID_ARGUMENT or RESOURCE_EXHAUSTED. */
void hs_otlp_recv_reject(struct otlp *r, struct hs_http_request *req, enum body_type type, int http,
                         const char *reason, const char *msg);

/* profiles.c: an ExportProfilesServiceRequest (p/len: protobuf, or the JSON text for
 * BODY_JSON, decompressed and unframed) decoded, checked, delivered to next_profiles all or
 * nothing, and answered. */
void hs_otlp_recv_profiles(struct otlp *r, struct hs_http_request *req, enum body_type type,
                           const uint8_t *p, size_t len, struct req_tenant tenant);

#endif
