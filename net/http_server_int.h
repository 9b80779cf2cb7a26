/* http_server_int.h: what the layers of the HTTP server share, bottom to top: the admission
 * rules (http_limits.c), the transport (transport.c: listener, socket, TLS, timers, the close
 * that waits for the client's EOF), the two protocols over it (http1.c: HTTP/1.1 on
 * http_parser; http2.c: HTTP/2 on nghttp2), side by side and never calling each other, and the
 * server above both (http_server.c: config, start, the request API). Each calls only downward;
 * the transport reaches a protocol only through its struct hs_http_proto. Nothing outside
 * net/ includes this, but tests.
 *
 * TLS sits inside the transport: it decrypts before a protocol sees a byte and encrypts what a
 * protocol writes (hs_http_conn_write), and ALPN "h2" picks HTTP/2 without any preface read. */
#ifndef HS_HTTP_SERVER_INT_H
#define HS_HTTP_SERVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "core/buf.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/queue.h"
#include "net/http_server.h"
#include "net/tls.h"

#define HS_HTTP_READ_SIZE 65536        /* one read; the buffer is shared per server */
#define HS_HTTP_WRITE_HIGH (1u << 20)  /* unread response bytes that stop our reading */
#define HS_HTTP_WRITE_LOW (256u << 10) /* ... and that resume it */
#define HS_HTTP_MAX_HEADERS 512        /* header lines in one request */
#define HS_HTTP_LINGER_MS 5000         /* longest wait for a client's EOF after our last write */
#define HS_HTTP_BODY_RESERVE (1u << 20) /* most body room taken on a client's word (its length) */
#define HS_HTTP_TLS_CHUNK 16384         /* one TLS record's plaintext, at most */
#define HS_HTTP_SNIFF_MAX 24 /* first bytes a protocol may need to know itself (h2's preface) */

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

struct hs_http_conn;
struct hs_http_proto;

/* A header field of a request being read: offsets into the protocol's buffer of names and
 * values, which may move as it grows. */
struct hs_http_field {
    size_t name_off, name_len, value_off, value_len;
};

struct hs_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    char *name;
    hs_http_handler handler;
    hs_http_handler on_headers;   /* NULL: none */
    hs_http_handler on_too_large; /* NULL: 413 text/plain */
    const struct hs_http_framing *framing; /* NULL: none */
    void *ud;
    enum hs_http_versions versions;
    /* the protocols a connection may speak (set by http_server.c): HTTP/2 when its first
     * bytes are the client preface or ALPN chose "h2", else HTTP/1.1 */
    const struct hs_http_proto *h2_proto, *h1_proto;
    /* request body bytes buffered, both protocols, ever: what tests read to prove that an
     * answer at headers time kept none */
    uint64_t body_bytes;
    struct hs_http_server_config conf; /* endpoint is not kept */
    int port;
    struct hs_queue conns; /* every connection until its handles are closed (its link) */
    size_t nconns;
    size_t nrejects; /* refused connections whose handle is closing */
    /* who holds a slot (http_limits.c): connections admitted and not closing, what
     * max_connections counts; by client address; the idle ones, longest idle first */
    size_t nlive;
    struct hs_http_peers peers;
    struct hs_queue idle; /* by idle_link */
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

struct hs_http1;
struct hs_http2;

/* One client connection: the transport's state. A protocol keeps its own in h1 or h2. */
struct hs_http_conn {
    struct hs_http_server *srv;
    struct hs_queue link;      /* in srv->conns */
    struct hs_queue idle_link; /* in srv->idle while `idle` */
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_timer_cb timer_cb; /* what the timer runs when it fires, while armed */
    uint64_t since_ms;    /* uv_now when the connection turned idle, or its request began */
    uint8_t peer_key[16];
    bool slotted;    /* counted in srv->nlive and srv->peers */
    bool fd_counted; /* counted in the listeners' share of the file limit */
    bool idle;       /* nothing in progress: the connection may be reclaimed */
    uv_shutdown_t shutdown;
    int open_handles;
    bool draining; /* the last response is written: wait for EOF, discard input */
    bool closing;  /* uv_close called: nothing more happens on this connection */
    bool stop;     /* no more input goes to the protocol */
    bool reading;
    bool eof;          /* the client sent FIN */
    bool write_paused; /* reading stopped until the client reads our responses */
    char peer[64];
    size_t write_pending; /* bytes handed to uv_write and not yet written */
    /* the protocol, once known; until then the first bytes, while they may still choose one */
    const struct hs_http_proto *proto;
    uint8_t first[HS_HTTP_SNIFF_MAX];
    size_t first_len;
    struct hs_http1 *h1;     /* http1.c's state, when it speaks HTTP/1.1 */
    struct hs_http2 *h2;     /* http2.c's state, when it speaks HTTP/2 */
    struct hs_tls_conn *tls; /* set on a TLS listener: bytes pass through it both ways */
    bool tls_seen;           /* the first byte was read (and was a TLS handshake record) */
};

/* A protocol over the transport. The transport hands it plaintext and tells it what happened;
 * it answers through hs_http_conn_write and ends through hs_http_conn_end. */
struct hs_http_proto {
    /* Do a connection's first bytes say it speaks this protocol? 1 yes, 0 not known yet (more
     * bytes needed; at most HS_HTTP_SNIFF_MAX), -1 no. NULL: whatever comes (the default). */
    int (*sniff)(const uint8_t *data, size_t len);
    /* Takes the connection over; `data` is what was read so far (the bytes that chose it).
     * Returns 0, or HS_ENOMEM (the transport closes the connection). */
    int (*start)(struct hs_http_conn *c, const uint8_t *data, size_t len);
    /* Plaintext from the client. */
    void (*recv)(struct hs_http_conn *c, const uint8_t *data, size_t len);
    /* Unwritten output fell below HS_HTTP_WRITE_LOW after hs_http_conn_hold: go on. */
    void (*writable)(struct hs_http_conn *c);
    /* The transport ends the connection: nothing more is parsed. */
    void (*stop)(struct hs_http_conn *c);
    /* The server is closing. True when the protocol ends the connection itself (HTTP/2:
     * GOAWAY, then the streams begun; HTTP/1.1 in a request: its answer closes), false to let
     * the transport end it now. */
    bool (*server_closing)(struct hs_http_conn *c);
    /* An idle connection gives its slot away (HTTP/2: GOAWAY first); the transport closes. */
    void (*reclaim)(struct hs_http_conn *c);
    /* Does the connection wait for a request's headers (a wait the busy rule cuts)? */
    bool (*awaits_headers)(const struct hs_http_conn *c);
    /* The connection's handles are closed: free what the protocol holds. */
    void (*free)(struct hs_http_conn *c);
};

/* Counts an answer by its status class (both protocols, once per response). */
static inline void hs_http_server_count_response(struct hs_http_server *s, int status)
{
    if (s->metrics && status >= 100 && status < 600)
        hs_counter_add(s->responses[status / 100 - 1], 1);
}

/* ---- http_limits.c: who gets a connection slot (bookkeeping only: it calls nothing above) */

/* Decides on a connection just accepted (its peer_key set): HS_HTTP_REFUSE_PER_CLIENT when its
 * address holds max_connections_per_client, REFUSE_MAX or REFUSE_FILE_LIMIT when the listener
 * (or the receivers' share of the file limit) is full, unless an idle connection gives way
 * (hs_http_limits_victim). Counts nothing. */
enum hs_http_refusal hs_http_limits_check(const struct hs_http_server *s,
                                          const struct hs_http_conn *c);
/* The connection idle longest that is not still writing an answer, to close for `newcomer`
 * (counted and logged), or NULL. */
struct hs_http_conn *hs_http_limits_victim(struct hs_http_server *s,
                                           const struct hs_http_conn *newcomer);
/* Counts and logs (rate-limited) a refusal; returns `why`. */
enum hs_http_refusal hs_http_limits_refuse(struct hs_http_server *s, const struct hs_http_conn *c,
                                           enum hs_http_refusal why);
/* Gives the admitted connection its slot. True when the listener turned busy with it: then
 * every connection's waits are to be cut to busy_timeout. */
bool hs_http_limits_take(struct hs_http_server *s, struct hs_http_conn *c);
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

/* ---- transport.c: the listener and the connections, for the server and the protocols ---- */

/* A socket bound to host:port and listening, made before any libuv handle so a failure leaves
 * nothing in the loop: 0 and *fd, or a negative libuv code. */
int hs_http_listen_socket(uv_loop_t *loop, const char *host, uint16_t port, int *fd);
/* Serves fd (taken) on s, which is set up but for its listener. On failure s is freed (once
 * its handle is closed) and a negative libuv code returned. */
int hs_http_transport_start(struct hs_http_server *s, int fd);
/* Stops listening; every connection ends after its current answer; done(ud) once every handle
 * is closed, and s is freed. */
void hs_http_transport_close(struct hs_http_server *s, void (*done)(void *ud), void *ud);
/* Frees a server whose listener never opened. */
void hs_http_server_free(struct hs_http_server *s);

/* One write of a + b, both copied, through TLS when the connection has it. Closes the
 * connection when it cannot. */
void hs_http_conn_write(struct hs_http_conn *c, const void *a, size_t alen, const void *b,
                        size_t blen);
/* Flush what is written, send FIN, drop input until the client's EOF (or a timeout), close. */
void hs_http_conn_end(struct hs_http_conn *c);
/* Close at once. */
void hs_http_conn_close(struct hs_http_conn *c);
/* The client does not read our answers: neither do we, until it has read most of them
 * (then the protocol's writable runs). */
void hs_http_conn_hold(struct hs_http_conn *c);
/* Between requests: the connection is idle (it may give its slot away) and closes after
 * idle_timeout (busy_timeout when busy). */
void hs_http_conn_await_request(struct hs_http_conn *c);
/* (Re)arms the connection's one timer; 0 ms stops it. */
void hs_http_conn_timer(struct hs_http_conn *c, uint64_t ms, uv_timer_cb cb);

/* ---- http1.c and http2.c: the protocols, and their side of the request API ------------- */

extern const struct hs_http_proto hs_http1_proto, hs_http2_proto;

/* Sets up what http_parser keeps process-wide (once, whoever calls first). */
void hs_http1_setup(void);

/* hs_http_respond_trailers for a request that came over HTTP/1.1 (trailers sent as headers)
 * or HTTP/2. */
void hs_http1_respond(struct hs_http_request *req, int status, const char *content_type,
                      const struct hs_http_header *extra, size_t extra_count, const void *body,
                      size_t body_len, const struct hs_http_header *trailers, size_t trailer_count);
void hs_http2_respond(struct hs_http_request *req, int status, const char *content_type,
                      const struct hs_http_header *extra, size_t extra_count, const void *body,
                      size_t body_len, const struct hs_http_header *trailers,
                      size_t trailer_count);
/* The buffer holding the request's body (hs_http_request_take_body). */
struct hs_buf *hs_http1_body(struct hs_http_request *req);
struct hs_buf *hs_http2_body(struct hs_http_request *req);

#endif
