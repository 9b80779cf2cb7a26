/* http_server.h: an HTTP/1.1 and HTTP/2 (h2c with prior knowledge, or h2 by ALPN over TLS)
 * server on libuv, http_parser and nghttp2, generic over handlers: keep-alive, chunked bodies,
 * Expect: 100-continue, connection limits (per listener, per client address, the process's
 * file limit), time limits that shrink when the listener is busy, body size limit (an oversized
 * Content-Length is answered 413 at once, without reading the body), an optional look at the
 * headers that may answer before the body (authentication); on HTTP/2, concurrent streams, each
 * one request to the same handler. TLS: a `tls:` section (net/tls.h). It knows no protocol that
 * runs inside a body: gRPC brings its own answers (struct hs_http_framing, net/grpc.h). */
#ifndef HS_HTTP_SERVER_H
#define HS_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/common.h"
#include "core/config.h"
#include "tls.h"

struct hs_http_server;
struct hs_http_conn;
struct hs_http2_stream;

struct hs_http_header {
    struct hs_str name; /* lower-cased by the server */
    struct hs_str value;
};

struct hs_http_request {
    const char *method;       /* "POST", "GET", ... */
    struct hs_str path;       /* without the query */
    struct hs_str query;      /* after '?', may be empty */
    const struct hs_http_header *headers;
    size_t header_count;
    const uint8_t *body;      /* as sent (chunked encoding removed); not decompressed;
                               * NULL (body_len 0) in the on_headers callback */
    size_t body_len;
    const char *peer;         /* "127.0.0.1:53422" */
    struct hs_http_conn *conn;
    struct hs_http2_stream *stream; /* the HTTP/2 stream, NULL on HTTP/1.1 */
};

/* True when the request came over HTTP/2 (gRPC needs it: trailers). */
static inline bool hs_http_request_is_h2(const struct hs_http_request *req)
{
    return req->stream != NULL;
}

/* Case-insensitive header lookup; NULL when absent. */
const struct hs_str *hs_http_request_header(const struct hs_http_request *req, const char *name);
/* Is a Content-Type value (e.g. "application/json; charset=utf-8") the media type `want`,
 * parameters and surrounding blanks aside, case-insensitively? */
bool hs_http_media_type_is(const struct hs_str *value, const char *want);

/* The handler must answer every request with exactly one hs_http_respond, before it returns.
 * The request and its body are valid only during the call.
 * As an on_headers callback (hs_http_server_opts), it sees the request once its request line
 * and headers are complete, before any body byte is read or buffered (body NULL, body_len 0),
 * and may answer it (hs_http_respond, hs_http_respond_trailers, hs_grpc_respond) or return
 * without answering; nothing it computes is carried to the handler. */
typedef void (*hs_http_handler)(void *ud, struct hs_http_request *req);

/* The listener options, shared by every HTTP listener's config (protocols.http, admin). */
struct hs_http_server_config {
    char *endpoint;             /* host:port */
    uint64_t max_request_body_size;
    uint64_t read_timeout_ms;   /* a request must arrive whole within this (slowloris) */
    uint64_t idle_timeout_ms;   /* keep-alive connection without a request */
    uint32_t max_connections;
    uint32_t max_connections_per_client; /* one address's share; 0: half of max_connections */
    uint64_t busy_timeout_ms;            /* idle and header waits past 3/4 of max_connections */
    uint64_t max_header_size;        /* bytes of request line + headers (a SIZE field: 64 bits) */
    uint32_t max_concurrent_streams; /* HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS */
    bool tls_enabled;           /* a `tls:` section was written: the port speaks only TLS */
    struct hs_tls_server_config tls;
};

/* The declared fields for the struct above, to be embedded in a component's field table as an
 * HS_CFG_SECTION's .sub (otelcol's confighttp.ServerConfig). `default_endpoint` differs per
 * listener, so callers declare the endpoint row themselves and reuse the rest: */
extern const struct hs_config_field hs_http_server_fields_common[]; /* all but endpoint */

/* Checks what start cannot take back (today: the TLS files) at create time, so a bad file is
 * a positioned config error (FILE:LINE:COL) that `hotspan validate` reports too. `listener` is
 * the YAML map the config was decoded from (e.g. protocols.http), `path` its key path.
 * Returns 0 or HS_EINVAL. */
int hs_http_server_config_check(const struct hs_http_server_config *cf,
                                const struct hs_config_node *listener, const char *path,
                                struct hs_error *err);

/* Which protocols a listener speaks. Every connection starts as HTTP/1.1 unless its first 24
 * bytes are the HTTP/2 client preface (h2c with prior knowledge, RFC 9113 §3.3). */
enum hs_http_versions {
    HS_HTTP_V1_AND_H2C = 0, /* both on one port (the default) */
    HS_HTTP_H2C_ONLY,       /* gRPC ports: an HTTP/1.1 request is answered 426 and closed */
};

/* Messages framed inside HTTP/2 request bodies (gRPC's length-prefixed messages:
 * hs_grpc_framing in net/grpc.h), for the requests whose content-type it claims. */
struct hs_http_framing {
    /* Is a request with this content-type framed so? */
    bool (*claims)(const struct hs_str *content_type);
    /* The whole body's length as its first bytes announce it (0: they do not say), so its
     * room is taken once instead of grown by doubling. */
    uint64_t (*announced_len)(const uint8_t *data, size_t len);
    /* Answers a claimed request whose body is over max_request_body_size (in place of
     * on_too_large), as on_headers answers: headers only, no body. */
    hs_http_handler too_large;
};

struct hs_http_server_opts {
    const struct hs_http_server_config *config;
    const char *name;           /* for logs and metrics: "otlp", "admin" */
    hs_http_handler handler;
    /* Optional: called (with ud) once a request's headers are complete, before its body. An
     * answer there is final: the handler does not run and the body is never buffered. On
     * HTTP/1.1 a request that announced a body (Content-Length > 0 or chunked) is answered
     * with Connection: close and the connection ends, its body read and dropped until the
     * client's EOF (or a short linger), so a stranger cannot make us read a body to keep a
     * connection; one without a body keeps the connection. `Expect: 100-continue` gets this
     * answer instead of the 100. On HTTP/2 the stream is answered, then reset (NO_ERROR) if
     * the client has not ended it; its DATA is dropped and flow control still opened, so the
     * other streams of the connection go on. Without an answer the request proceeds as if
     * there were no callback. */
    hs_http_handler on_headers;
    /* Optional: a request whose body is over max_request_body_size, announced by its
     * Content-Length or found as it arrives, once on_headers has let it pass. Called with its
     * headers and no body, as on_headers is, to answer 413 in the protocol's own format (OTLP:
     * a Status); without an answer the server sends 413 text/plain. Either way the request
     * ends as an early answer does. Requests `framing` claims go to its too_large instead. */
    hs_http_handler on_too_large;
    /* Optional: what HTTP/2 requests may carry framed in their bodies (gRPC's
     * hs_grpc_framing): their bodies' announced lengths and their answers to a body over the
     * limit (gRPC: RESOURCE_EXHAUSTED). */
    const struct hs_http_framing *framing;
    void *ud;
    enum hs_http_versions versions;
    /* where the listener's counts and its TLS handshake failures go (hotspan_http_server_*,
     * hotspan_http_tls_handshake_failures_total); NULL: not counted (tests) */
    struct hs_metrics *metrics;
    /* The admin endpoint: its connections draw on the file descriptors kept in reserve, not on
     * the receivers' share (hs_http_server_set_file_limit), so it answers while they are full. */
    bool fd_reserve;
};

/* Binds and listens. Returns 0, or a negative libuv/HS code with a message in err. */
int hs_http_server_start(uv_loop_t *loop, const struct hs_http_server_opts *opts,
                         struct hs_http_server **out, struct hs_error *err);
/* The bound port (useful with port 0). */
int hs_http_server_port(const struct hs_http_server *s);
/* Stops listening, closes every connection after its current response, then calls done(ud)
 * once every handle is closed, and frees the server. */
void hs_http_server_close(struct hs_http_server *s, void (*done)(void *ud), void *ud);

/* Sends the response. `extra` headers are added (Content-Length and Connection are set by the
 * server). After an error status the server may close the connection if the body was not
 * read. Also valid in an on_headers callback (see hs_http_server_opts). */
void hs_http_respond(struct hs_http_request *req, int status, const char *content_type,
                     const struct hs_http_header *extra, size_t extra_count, const void *body,
                     size_t body_len);

/* hs_http_respond followed by trailing header fields (gRPC's grpc-status), sent after the body
 * on HTTP/2. An empty body with trailers is one HEADERS frame holding both (gRPC's
 * Trailers-Only). On HTTP/1.1, which has no trailers without chunked encoding, the trailers
 * are sent as ordinary headers. */
void hs_http_respond_trailers(struct hs_http_request *req, int status, const char *content_type,
                              const struct hs_http_header *extra, size_t extra_count,
                              const void *body, size_t body_len,
                              const struct hs_http_header *trailers, size_t trailer_count);

/* Shorthand for text/plain answers. */
void hs_http_respond_text(struct hs_http_request *req, int status, const char *text);

/* In the handler: moves the body's buffer to `out` (out->data == req->body, out->len ==
 * req->body_len), so the bytes can be kept without a copy; req->body stays valid, now owned by
 * out. Returns 0, or HS_ENOENT when there is no buffer to move (an empty body). */
int hs_http_request_take_body(struct hs_http_request *req, struct hs_buf *out);

const char *hs_http_reason(int status);

/* The process's file limit (RLIMIT_NOFILE), once main has raised it. Every listener but those
 * started with fd_reserve shares `limit` less a reserve (hs_http_fd_reserve) for exporters,
 * files and the admin endpoint; past that share, their new connections are refused (reason
 * "file_limit"). 0 (the default) sets no share. Returns the share. */
uint64_t hs_http_server_set_file_limit(uint64_t limit);
/* The descriptors kept back from the receivers out of `limit`. */
uint64_t hs_http_fd_reserve(uint64_t limit);
/* After start: warns when the running listeners' max_connections add up to more than their
 * share of the file limit. Returns false then. */
bool hs_http_server_check_file_limit(void);

#endif
