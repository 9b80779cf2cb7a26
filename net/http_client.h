/* http_client.h: outbound HTTP for exporters: libcurl multi driven from the libuv loop
 * (curl_multi_socket_action + uv_poll_t + uv_timer_t), HTTP/1.1 and HTTP/2, TLS, keep-alive. */
#ifndef HS_HTTP_CLIENT_H
#define HS_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/common.h"

struct hs_http_client;

struct hs_http_result {
    int status;           /* HTTP status, or 0 when no response (see error) */
    const char *error;    /* transport error text when status == 0 */
    const uint8_t *body;  /* response body (valid during the callback) */
    size_t body_len;
    uint64_t retry_after_ms; /* from Retry-After (seconds or HTTP-date); 0 when absent */
    const char *content_type;
    /* gRPC's status from the trailers (or a Trailers-Only answer): -1 when absent */
    int grpc_status;
    const char *grpc_message;  /* as sent (percent-encoded); NULL when absent */
    const char *grpc_details;  /* grpc-status-details-bin (base64); NULL when absent */
};

typedef void (*hs_http_done_cb)(void *ud, const struct hs_http_result *res);

struct hs_http_client *hs_http_client_new(uv_loop_t *loop);

/* Flags for hs_http_client_new_flags. */
enum {
    /* http:// URLs speak HTTP/2 from the first byte (h2c with prior knowledge), as gRPC needs;
     * streams to one host share a connection */
    HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE = 1u << 0,
};
struct hs_http_client *hs_http_client_new_flags(uv_loop_t *loop, unsigned flags);

/* As hs_http_client_new_flags; https:// requests use `tls` (borrowed for the client's
 * lifetime; NULL: libcurl's defaults, the system CAs): CA, client certificate and key as
 * loaded now (net/tls.h; a SIGHUP reload gives new connections the new files), verification,
 * minimum version, server name. With HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE, https:// means h2 by
 * ALPN. */
struct hs_tls_client;
struct hs_http_client *hs_http_client_new_tls(uv_loop_t *loop, unsigned flags,
                                              const struct hs_tls_client *tls);

/* POST `body` (borrowed until done fires) to `url` with `headers` ("Name: value" lines,
 * borrowed until done). done fires exactly once, also when the client is closed. Returns 0,
 * HS_ENOMEM, or HS_ECANCELED once close has begun (from a done callback); done is then not
 * called. */
int hs_http_client_post(struct hs_http_client *c, const char *url, const char *const *headers,
                        size_t header_count, const void *body, size_t body_len,
                        uint64_t timeout_ms, hs_http_done_cb done, void *ud);

/* The most bytes hs_http_client_post_prefixed sends before a body. */
#define HS_HTTP_CLIENT_PREFIX_MAX 8

/* As hs_http_client_post, the request body being `prefix` (copied; at most
 * HS_HTTP_CLIENT_PREFIX_MAX bytes) followed by `body` (borrowed until done fires). The body is
 * sent from where it lies, not joined to the prefix first: gRPC's 5-byte message prefix in
 * front of a multi-MB batch. Also HS_EINVAL for a longer prefix. */
int hs_http_client_post_prefixed(struct hs_http_client *c, const char *url,
                                 const char *const *headers, size_t header_count,
                                 const void *prefix, size_t prefix_len, const void *body,
                                 size_t body_len, uint64_t timeout_ms, hs_http_done_cb done,
                                 void *ud);

/* Aborts transfers in flight (their done fires with status 0, "cancelled"), closes handles,
 * then calls closed(ud) and frees the client. */
void hs_http_client_close(struct hs_http_client *c, void (*closed)(void *ud), void *ud);

#endif
