/* grpc.h: gRPC over HTTP/2 for unary calls (wire.md §3): the 5-byte length-prefixed message,
 * gzip per message, status codes and their retry rules, trailers (grpc-status, percent-encoded
 * grpc-message, grpc-status-details-bin with google.rpc.RetryInfo) and grpc-timeout. */
#ifndef HS_GRPC_H
#define HS_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/common.h"
#include "http_server.h"

/* googleapis google/rpc/code.proto */
enum hs_grpc_code {
    HS_GRPC_OK = 0,
    HS_GRPC_CANCELLED = 1,
    HS_GRPC_UNKNOWN = 2,
    HS_GRPC_INVALID_ARGUMENT = 3,
    HS_GRPC_DEADLINE_EXCEEDED = 4,
    HS_GRPC_NOT_FOUND = 5,
    HS_GRPC_ALREADY_EXISTS = 6,
    HS_GRPC_PERMISSION_DENIED = 7,
    HS_GRPC_RESOURCE_EXHAUSTED = 8,
    HS_GRPC_FAILED_PRECONDITION = 9,
    HS_GRPC_ABORTED = 10,
    HS_GRPC_OUT_OF_RANGE = 11,
    HS_GRPC_UNIMPLEMENTED = 12,
    HS_GRPC_INTERNAL = 13,
    HS_GRPC_UNAVAILABLE = 14,
    HS_GRPC_DATA_LOSS = 15,
    HS_GRPC_UNAUTHENTICATED = 16,
};

#define HS_GRPC_PREFIX 5 /* compressed flag + 4-byte big-endian length */
#define HS_GRPC_ACCEPT_ENCODING "identity,gzip"

/* "UNAVAILABLE", ...; "CODE_<n>" style text for unknown numbers is not needed: "UNKNOWN". */
const char *hs_grpc_code_name(int code);

/* The one message of a unary request body. `encoding` is grpc-encoding (NULL when absent). A
 * compressed message is inflated into `out` (at most `max` bytes); otherwise *msg points into
 * body. Returns HS_GRPC_OK, or the code to answer with and a reason in err: INTERNAL for bad
 * framing (grpc-go's choice), RESOURCE_EXHAUSTED over `max` (before or after inflating),
 * UNIMPLEMENTED for an encoding we do not speak. */
int hs_grpc_unframe(const uint8_t *body, size_t len, const struct hs_str *encoding, uint64_t max,
                    struct hs_buf *out, const uint8_t **msg, size_t *msg_len, char *err,
                    size_t errlen);

/* Appends one length-prefixed message to out, gzipped (flag 1) when asked (compressed right
 * behind the prefix, not copied after). 0, HS_ENOMEM, or HS_E2BIG past 4 GiB. */
int hs_grpc_frame(struct hs_buf *out, const uint8_t *msg, size_t len, bool gzip);
/* Writes the prefix of a message of `len` bytes (as sent, i.e. compressed when `compressed`),
 * for a sender that sends the message itself from where it lies. 0, or HS_E2BIG past 4 GiB. */
int hs_grpc_prefix(uint8_t out[HS_GRPC_PREFIX], size_t len, bool compressed);

/* grpc-message's percent-encoding (PROTOCOL-HTTP2.md): bytes outside 0x20-0x7E and '%' become
 * %XX. Truncated at a character boundary to fit; always NUL-terminated. */
void hs_grpc_percent_encode(const char *in, char *out, size_t outlen);
/* The reverse; malformed escapes are kept as they are (the spec says so). */
void hs_grpc_percent_decode(const char *in, size_t len, char *out, size_t outlen);

/* base64 (standard alphabet, padded) of a google.rpc.Status {code, message, details:
 * [RetryInfo{retry_delay}]}: a grpc-status-details-bin value. 0 or HS_E2BIG. */
int hs_grpc_status_details(int code, const char *msg, uint64_t retry_delay_ms, char *out,
                           size_t outlen);
/* Reads RetryInfo.retry_delay from a grpc-status-details-bin value (padded or not). */
bool hs_grpc_details_retry_delay(const char *b64, size_t len, uint64_t *delay_ms);

/* grpc-timeout: "<at most 8 digits><unit>" (H M S m u n). */
void hs_grpc_timeout_format(uint64_t ms, char *out, size_t outlen);
bool hs_grpc_timeout_parse(struct hs_str v, uint64_t *ms);

/* The OTLP client retry table (wire.md §3): RESOURCE_EXHAUSTED only with RetryInfo. */
bool hs_grpc_retryable(int code, bool has_retry_info);
/* A gRPC code for an HTTP status with no grpc-status (a proxy's answer; grpc's
 * http-grpc-status-mapping.md). */
int hs_grpc_code_from_http(int status);

/* Answers a unary gRPC request over HTTP/2. OK: `resp` framed (gzipped when asked, with
 * grpc-encoding) then trailers grpc-status 0. An error: Trailers-Only with grpc-status,
 * grpc-message and, when retry_delay_ms > 0, RetryInfo in grpc-status-details-bin. */
void hs_grpc_respond(struct hs_http_request *req, int code, const char *msg, const uint8_t *resp,
                     size_t resp_len, bool gzip, uint64_t retry_delay_ms);

/* Checks the parts every gRPC service checks alike: POST and content-type application/grpc
 * (+proto). Answers (415 or gRPC's UNIMPLEMENTED) and returns false when the request is not one. */
bool hs_grpc_request_ok(struct hs_http_request *req);
/* Did the client send its message gzipped (grpc-encoding)? We answer alike. */
bool hs_grpc_request_gzip(const struct hs_http_request *req);

/* What a listener serving gRPC gives the HTTP server (hs_http_server_opts.framing), for every
 * HTTP/2 request whose content-type begins "application/grpc": a body's room taken from its
 * first message's length prefix, and RESOURCE_EXHAUSTED (wire.md §3; Trailers-Only) for a body
 * over max_request_body_size. */
extern const struct hs_http_framing hs_grpc_framing;

#endif
