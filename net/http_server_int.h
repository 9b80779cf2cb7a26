/* http_server_int.h: what the listener (http_server.c), its admission rules (http_limits.c),
 * the connections (http_conn.c) and the HTTP/2 layer (http2.c) of the server share. Nothing
 * outside those files includes it, but tests.
 *
 * The layering, and the seam for TLS: a connection's transport is its uv_tcp_t, read in
 * http_conn.c's on_read and written through hs_http_conn_write/hs_http_conn_end. The protocol
 * above it is http_parser (HTTP/1.1) or, once the client preface is seen, an nghttp2 session
 * (hs_http2_*), which only ever sees plaintext bytes. A TLS transport goes between the two:
 * decrypt in on_read before the protocol sees bytes, encrypt in hs_http_conn_write, and on ALPN
 * "h2" call hs_http2_start with no preface bytes yet read. That is what http_conn.c does when
 * the server has a TLS context (net/tls.h): conn_tls_input and conn_write. */
#ifndef HS_HTTP_SERVER_INT_H
#define HS_HTTP_SERVER_INT_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "core/buf.h"
#include "http_server.h"
#include "core/log.h"
#include "tls.h"

#define HS_HTTP_READ_SIZE 65536        /* one read; the buffer is shared per server */
#define HS_HTTP_WRITE_HIGH (1u << 20)  /* unread response bytes that stop our reading */
#define HS_HTTP_WRITE_LOW (256u << 10) /* ... and that resume it */
#define HS_HTTP_MAX_HEADERS 512        /* header lines in one request */
#define HS_HTTP_LINGER_MS 5000         /* longest wait for a client's EOF after our last write */
#define HS_HTTP_BODY_RESERVE (1u << 20) /* most body room taken on a client's word (its length) */
#define HS_HTTP_TLS_CHUNK 16384         /* one TLS record's plaintext, at most */

/* Why a connection was refused (hotspan_http_server_connections_refused_total's reason). */
enum hs_http_refusal {
    HS_HTTP_ADMITTED = 0,
    HS_HTTP_REFUSE_MAX,        /* max_connections, none of them idle */
    HS_HTTP_REFUSE_PER_CLIENT, /* max_connections_per_client */
    HS_HTTP_REFUSE_FILE_LIMIT, /* the receivers' share of the file limit, none of ours idle */
    HS_HTTP_REFUSE_COUNT
};

/* Open connections per client address: an open-addressing table (linear probing, keys
 * hashed with a per-table random seed so a client cannot choose collisions). */
struct hs_http_peer {
    uint8_t key[16]; /* IPv6, IPv4 mapped (::ffff:a.b.c.d); IPv6 cut to its /64 */
    uint32_t count;  /* 0: an empty slot */
};

struct hs_http_peers {
    struct hs_http_peer *slots;
    size_t cap, used; /* cap: a power of two, or 0 */
    uint64_t seed;
};

struct hs_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    char *name;
    hs_http_handler handler;
    hs_http_handler on_headers; /* NULL: none */
    hs_http_handler on_too_large; /* NULL: 413 text/plain */
    void *ud;
    enum hs_http_versions versions;
    /* request body bytes buffered, both protocols, ever: what tests read to prove that an
     * answer at headers time kept none */
    uint64_t body_bytes;
    struct hs_http_server_config conf; /* endpoint is not kept */
    int port;
    struct hs_http_conn *conns; /* every connection until its handles are closed */
    size_t nconns;
    size_t nrejects; /* refused connections whose handle is closing */
    /* who holds a slot (http_limits.c): connections admitted and not closing, what
     * max_connections counts; by client address; the idle ones, longest idle first */
    size_t nlive;
    struct hs_http_peers peers;
    struct hs_http_conn *idle_head, *idle_tail;
    bool busy;       /* past 3/4 of max_connections (or of the file limit's share) */
    bool fd_reserve; /* draws on the fd reserve (admin), not the receivers' share */
    bool declared;   /* max_connections is in the sum hs_http_server_check_file_limit checks */
    bool closing, listener_closed;
    void (*done)(void *ud);
    void *done_ud;
    struct hs_ratelimit full_log;
    struct hs_ratelimit busy_log;
    struct hs_buf scratch;     /* a response head being formatted */
    struct hs_tls_server *tls; /* NULL: plaintext */
    /* hotspan_http_server_*{server=name}; NULL when started without a registry */
    struct hs_metrics *metrics;
    struct hs_counter *refused[HS_HTTP_REFUSE_COUNT]; /* by enum hs_http_refusal */
    struct hs_counter *reclaimed;    /* idle connections closed to admit a new one */
    struct hs_counter *responses[5]; /* by status class 1xx..5xx */
    char rbuf[HS_HTTP_READ_SIZE];
    char pbuf[HS_HTTP_TLS_CHUNK]; /* decrypted bytes on their way to the protocol */
};

struct hs_http2;

enum hs_http_conn_state {
    HS_HTTP_CONN_IDLE,    /* between requests */
    HS_HTTP_CONN_REQUEST, /* a request has begun and is not answered yet */
    HS_HTTP_CONN_DRAIN,   /* the last response is written: wait for EOF, discard input */
};

/* Offsets into conn->head, which may move as it grows. */
struct hs_http_field {
    size_t name_off, name_len, value_off, value_len;
};

struct hs_http_conn {
    struct hs_http_server *srv;
    struct hs_http_conn *prev, *next;
    struct hs_http_conn *idle_prev, *idle_next; /* in srv's idle list while `idle` */
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_timer_cb timer_cb; /* what the timer runs when it fires, while armed */
    uint64_t since_ms;    /* uv_now when the connection turned idle, or its request began */
    uint8_t peer_key[16];
    bool slotted;      /* counted in srv->nlive and srv->peers */
    bool fd_counted;   /* counted in the listeners' share of the file limit */
    bool idle;         /* nothing in progress: the connection may be reclaimed */
    bool headers_done; /* of the request being read */
    uv_shutdown_t shutdown;
    int open_handles;
    enum hs_http_conn_state state;
    bool closing; /* uv_close called: nothing more happens on this connection */
    bool stop;    /* no more requests are parsed */
    bool reading;
    bool eof;          /* the client sent FIN */
    bool write_paused; /* reading stopped until the client reads our responses */
    bool in_dispatch, responded, end_after;
    bool in_headers;    /* in the on_headers callback */
    bool body_expected; /* the request announced a body (Content-Length > 0 or chunked) */
    bool answered_early; /* by on_headers, with no body to come: skip the handler */
    http_parser parser;
    char peer[64];
    /* the request being read */
    struct hs_buf head; /* URL, then header names (lower-cased) and values */
    size_t url_len, head_bytes;
    int last_piece;
    struct hs_http_field *fields;
    size_t nfields, fields_cap;
    struct hs_http_header *headers; /* built from fields for the handler */
    size_t headers_cap;
    struct hs_buf body;
    struct hs_buf pending; /* read but not parsed while reading was paused */
    size_t write_pending;  /* bytes handed to uv_write and not yet written */
    /* protocol detection: the first bytes, while they may still be the HTTP/2 preface */
    bool proto_known;
    uint8_t first[24];
    size_t first_len;
    struct hs_http2 *h2; /* set once the connection speaks HTTP/2 */
    struct hs_tls_conn *tls; /* set on a TLS listener: bytes pass through it both ways */
    bool tls_seen;           /* the first byte was read (and was a TLS handshake record) */
};

#define HS_HTTP2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define HS_HTTP2_PREFACE_LEN 24

/* ---- http_limits.c: who gets a connection slot ---- */

/* Decides on a connection just accepted (its peer_key set): refuses it when its address holds
 * max_connections_per_client, or when the listener (or the receivers' share of the file limit)
 * is full and no idle connection can give way; else counts it in. Counts and logs refusals. */
enum hs_http_refusal hs_http_server_admit(struct hs_http_server *s, struct hs_http_conn *c);
/* The connection is closing: its slot is free. */
void hs_http_server_unslot(struct hs_http_conn *c);
/* The longest wait for a request's headers (or a TLS handshake), and between requests: the
 * configured read_timeout and idle_timeout, or busy_timeout when shorter and s is busy. */
uint64_t hs_http_server_header_ms(const struct hs_http_server *s);
uint64_t hs_http_server_idle_ms(const struct hs_http_server *s);
/* Connections from key's address: how many, one more, one fewer. */
uint32_t hs_http_peers_count(const struct hs_http_peers *p, const uint8_t key[16]);
void hs_http_peers_add(struct hs_http_peers *p, const uint8_t key[16]);
void hs_http_peers_del(struct hs_http_peers *p, const uint8_t key[16]);
void hs_http_peers_free(struct hs_http_peers *p);
/* A listener's max_connections joins (on) or leaves the sum checked against the file limit. */
void hs_http_server_declare(const struct hs_http_server *s, bool on);
/* The key of a peer address (its /64 for IPv6 outside ::ffff:0:0/96). */
void hs_http_peer_key(const struct sockaddr *sa, uint8_t key[16]);
/* The connection has nothing in progress (on) or has (off): idle ones join the end of the
 * server's idle list, and the one idle longest may be closed for a newcomer. */
void hs_http_conn_idle(struct hs_http_conn *c, bool on);
/* The server turned busy: a connection waiting for headers or between requests gets at most
 * busy_timeout more. */
void hs_http_conn_busy(struct hs_http_conn *c);
/* Closes an idle connection to free its slot (HTTP/2: GOAWAY first). */
void hs_http_conn_reclaim(struct hs_http_conn *c);

/* Counts an answer by its status class (both protocols call it once per response). */
void hs_http_server_count_response(struct hs_http_server *s, int status);
/* Accepts one connection from the listener (http_conn.c). */
void hs_http_conn_accept(struct hs_http_server *s);
/* The server is closing: close the connection now if it is between requests. */
void hs_http_conn_server_closing(struct hs_http_conn *c);
/* A connection's handles are closed and it is unlinked: free the server if it was the last. */
void hs_http_server_maybe_done(struct hs_http_server *s);

/* ---- what http_conn.c offers the HTTP/2 layer (the transport side) ---- */

/* One write of a + b, both copied. Closes the connection when it cannot. */
void hs_http_conn_write(struct hs_http_conn *c, const void *a, size_t alen, const void *b,
                        size_t blen);
/* Flush what is written, send FIN, drop input until the client's EOF (or a timeout), close. */
void hs_http_conn_end(struct hs_http_conn *c);
/* Close at once. */
void hs_http_conn_close(struct hs_http_conn *c);
/* Start or stop reading the transport. */
void hs_http_conn_read(struct hs_http_conn *c, bool on);
/* (Re)arms the connection's one timer; 0 ms stops it. */
void hs_http_conn_timer(struct hs_http_conn *c, uint64_t ms, uv_timer_cb cb);

/* ---- http2.c ---- */

/* Takes the connection over; `data` holds what was read so far, the preface included. Returns
 * 0, or HS_ENOMEM (the caller closes the connection). */
int hs_http2_start(struct hs_http_conn *c, const uint8_t *data, size_t len);
/* Bytes read from the transport. */
void hs_http2_recv(struct hs_http_conn *c, const uint8_t *data, size_t len);
/* Unwritten output fell below HS_HTTP_WRITE_LOW: produce more. */
void hs_http2_resume(struct hs_http_conn *c);
/* The server is closing: GOAWAY, let the streams begun finish, then end the connection. */
void hs_http2_server_closing(struct hs_http_conn *c);
/* An idle connection gives its slot away: GOAWAY (NO_ERROR) out, then the caller closes. */
void hs_http2_reclaim(struct hs_http_conn *c);
/* The connection's handles are closed. */
void hs_http2_free(struct hs_http2 *h);
/* The stream's body buffer (hs_http_request_take_body). */
struct hs_buf *hs_http2_stream_body(struct hs_http2_stream *st);
/* hs_http_respond and hs_http_respond_trailers for a request that came over HTTP/2. */
void hs_http2_respond(struct hs_http_request *req, int status, const char *content_type,
                      const struct hs_http_header *extra, size_t extra_count, const void *body,
                      size_t body_len, const struct hs_http_header *trailers,
                      size_t trailer_count);

#endif
