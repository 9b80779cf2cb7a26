/* fuzz_http_request.c: libFuzzer target for the HTTP/1.1 server (net/http_server.c,
 * net/transport.c, net/http1.c, http_parser): the input is what one client sends on one
 * connection. The connection code has no seam that takes bytes without a socket, so a real server
 * listens on loopback in this process and the bytes are written to it over TCP from the same loop.
 * It must not crash or leak; on HTTP/1.1, every request handed to the handler gets a response and
 * whatever comes back is HTTP/1.1 responses (an input opening with the HTTP/2 client preface is
 * answered in HTTP/2 frames: only crashes, leaks and hangs count there). on_headers and
 * on_too_large answer some requests early, so those paths are fuzzed too. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "core/buf.h"
#include "core/errors.h"
#include "net/http_server.h"
#include "core/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct client {
    int fd;
    const uint8_t *data;
    size_t len, off;
    bool shut, done;
    uv_poll_t poll;
    uv_timer_t timer;
    int open_handles;
    struct hs_buf out; /* everything the server sent */
};

static uv_loop_t loop;
static struct hs_http_server *server;
static int port;
static unsigned handled; /* requests the handler saw for the current input */

/* Answers by the path's first letter, so inputs reach the error paths too (a 4xx before the body
 * was read closes the connection); echoes the body so its bytes travel back. */
static void handler(void *ud, struct hs_http_request *req)
{
    handled++;
    const struct hs_str *ct = hs_http_request_header(req, "content-type");
    int status = 200;
    if (req->path.len > 1 && req->path.ptr[1] == 'e')
        status = 400;
    else if (req->path.len > 1 && req->path.ptr[1] == 'b')
        status = 503;
    static const struct hs_http_header extra = {HS_STR("retry-after"), HS_STR("1")};
    hs_http_respond(req, status, ct ? "application/octet-stream" : NULL,
                    status == 503 ? &extra : NULL, status == 503, req->body, req->body_len);
}

/* Early answers too: /d... is refused at its headers; over the body limit, /t... is answered by
 * on_too_large in "its own format", anything else by the server's text. */
static void early(void *ud, struct hs_http_request *req)
{
    (void)ud;
    if (req->path.len > 1 && req->path.ptr[1] == 'd')
        hs_http_respond(req, 401, "text/plain", NULL, 0, "denied\n", 7);
}

static void too_large(void *ud, struct hs_http_request *req)
{
    (void)ud;
    if (req->path.len > 1 && req->path.ptr[1] == 't')
        hs_http_respond(req, 413, "application/json", NULL, 0, "{\"code\":8}", 10);
}

static void init(void)
{
    hs_log_setup(HS_LOG_ERROR, false);
    uv_loop_init(&loop);
    static struct hs_http_server_config conf = {
        .endpoint = "127.0.0.1:0",
        .max_request_body_size = 65536,
        .read_timeout_ms = 2000,
        .idle_timeout_ms = 2000,
        .max_connections = 16,
        .max_header_size = 16384,
    };
    const struct hs_http_server_opts opts = {
        .config = &conf, .name = "fuzz", .handler = handler, .on_headers = early,
        .on_too_large = too_large, .ud = NULL};
    struct hs_error err = {0};
    if (hs_http_server_start(&loop, &opts, &server, &err) != 0) {
        fprintf(stderr, "fuzz_http_request: cannot listen: %s\n", err.count ? err.lines[0] : "?");
        abort();
    }
    port = hs_http_server_port(server);
}

static void client_closed(uv_handle_t *h)
{
    struct client *c = h->data;
    if (--c->open_handles == 0)
        uv_stop(&loop);
}

static void client_finish(struct client *c)
{
    if (c->done)
        return;
    c->done = true;
    uv_poll_stop(&c->poll);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->poll, client_closed);
    uv_close((uv_handle_t *)&c->timer, client_closed);
}

static void client_io(uv_poll_t *p, int status, int events)
{
    struct client *c = p->data;
    if (status < 0) {
        client_finish(c);
        return;
    }
    if ((events & UV_WRITABLE) && c->off < c->len) {
        ssize_t n = send(c->fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (n > 0)
            c->off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            c->off = c->len; /* the server closed on us: nothing more to send */
    }
    if (c->off == c->len && !c->shut) {
        /* our FIN tells the server the client is done, so every path ends in a close */
        shutdown(c->fd, SHUT_WR);
        c->shut = true;
        uv_poll_start(&c->poll, UV_READABLE, client_io);
    }
    if (events & UV_READABLE) {
        for (;;) {
            char buf[65536];
            ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
            if (n > 0) {
                if (hs_buf_append(&c->out, buf, (size_t)n) != 0)
                    abort();
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                client_finish(c); /* EOF or reset: the server is done with us */
            break;
        }
    }
}

static void client_timeout(uv_timer_t *t)
{
    /* the server should close within its read timeout after our FIN; it did not */
    fprintf(stderr, "fuzz_http_request: the server kept the connection open\n");
    abort();
}

static size_t count(const uint8_t *hay, size_t len, const char *needle)
{
    size_t n = 0, k = strlen(needle);
    for (size_t i = 0; i + k <= len; i++)
        if (memcmp(hay + i, needle, k) == 0)
            n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        init();
    if (size > 1 << 20)
        return 0;
    struct client c = {.data = data, .len = size};
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0)
        abort();
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(c.fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS)
        abort();
    handled = 0;
    uv_poll_init(&loop, &c.poll, c.fd);
    uv_timer_init(&loop, &c.timer);
    c.poll.data = c.timer.data = &c;
    c.open_handles = 2;
    uv_poll_start(&c.poll, UV_READABLE | UV_WRITABLE, client_io);
    uv_timer_start(&c.timer, client_timeout, 8000, 0);
    uv_run(&loop, UV_RUN_DEFAULT); /* until both client handles are closed */
    close(c.fd);
    /* let the server finish closing its side, so connections do not pile up across inputs */
    for (int i = 0; i < 3; i++)
        uv_run(&loop, UV_RUN_NOWAIT);

    static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    bool h2 =
        size >= sizeof(h2_preface) - 1 && memcmp(data, h2_preface, sizeof(h2_preface) - 1) == 0;
    if (!h2 && c.out.len && (c.out.len < 12 || memcmp(c.out.data, "HTTP/1.1 ", 9) != 0)) {
        fprintf(stderr, "fuzz_http_request: the answer is not HTTP/1.1: %.40s\n",
                (const char *)c.out.data);
        abort();
    }
    if (!h2 && count(c.out.data, c.out.len, "HTTP/1.1 ") < handled) {
        fprintf(stderr, "fuzz_http_request: %u requests handled, fewer responses\n", handled);
        abort();
    }
    hs_buf_free(&c.out);
    return 0;
}
