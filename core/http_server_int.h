/* http_server_int.h: what the listener (http_server.c) and the connections (http_conn.c) of the
 * HTTP/1.1 server share. Nothing outside those two files includes it. */
#ifndef HS_HTTP_SERVER_INT_H
#define HS_HTTP_SERVER_INT_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "buf.h"
#include "http_server.h"
#include "log.h"

#define HS_HTTP_READ_SIZE 65536        /* one read; the buffer is shared per server */
#define HS_HTTP_WRITE_HIGH (1u << 20)  /* unread response bytes that stop our reading */
#define HS_HTTP_WRITE_LOW (256u << 10) /* ... and that resume it */
#define HS_HTTP_MAX_HEADERS 512        /* header lines in one request */
#define HS_HTTP_LINGER_MS 5000         /* longest wait for a client's EOF after our last write */

struct hs_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    char *name;
    hs_http_handler handler;
    void *ud;
    struct hs_http_server_config conf; /* endpoint is not kept */
    int port;
    struct hs_http_conn *conns; /* every connection until its handles are closed */
    size_t nconns;
    size_t nrejects; /* refused connections whose handle is closing */
    bool closing, listener_closed;
    void (*done)(void *ud);
    void *done_ud;
    struct hs_ratelimit full_log;
    struct hs_buf scratch; /* a response head being formatted */
    char rbuf[HS_HTTP_READ_SIZE];
};

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
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown;
    int open_handles;
    enum hs_http_conn_state state;
    bool closing; /* uv_close called: nothing more happens on this connection */
    bool stop;    /* no more requests are parsed */
    bool reading;
    bool eof;          /* the client sent FIN */
    bool write_paused; /* reading stopped until the client reads our responses */
    bool in_dispatch, responded, end_after;
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
};

/* Accepts one connection from the listener (http_conn.c). */
void hs_http_conn_accept(struct hs_http_server *s);
/* The server is closing: close the connection now if it is between requests. */
void hs_http_conn_server_closing(struct hs_http_conn *c);
/* A connection's handles are closed and it is unlinked: free the server if it was the last. */
void hs_http_server_maybe_done(struct hs_http_server *s);

#endif
