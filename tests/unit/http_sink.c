/* http_sink.c: a tiny HTTP/1.1 server for client and exporter tests, in its own thread with
 * blocking sockets and poll(2): it records every request and answers from a script. Included
 * with #include by the tests that use it (it is not a test_*.c, so CMake leaves it alone). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define SINK_API static __attribute__((unused))
#define SINK_MAX_REQS 256
#define SINK_MAX_CONNS 32
#define SINK_MAX_SCRIPT 32
#define SINK_MAX_HEADERS 32

struct sink_req {
    char method[16];
    char path[256];
    size_t header_count;
    char *names[SINK_MAX_HEADERS];
    char *values[SINK_MAX_HEADERS];
    unsigned char *body;
    size_t body_len;
};

struct sink_resp {
    int status;          /* 0: never answer (the connection hangs until the sink stops) */
    char headers[256];   /* extra "Name: value\r\n" lines */
    unsigned char *body; /* owned */
    size_t body_len;
};

struct sink_conn {
    int fd;
    unsigned char *buf;
    size_t len, cap;
};

struct sink {
    int lfd, wake[2];
    uint16_t port;
    pthread_t thread;
    pthread_mutex_t mu;
    uv_async_t *notify; /* sent after each request is recorded, to wake the test's loop */
    struct sink_conn conns[SINK_MAX_CONNS];
    size_t nconns;
    unsigned accepted;
    struct sink_resp script[SINK_MAX_SCRIPT];
    size_t nscript, next;
    struct sink_resp dflt;
    struct sink_req reqs[SINK_MAX_REQS];
    size_t nreqs;
};

static void sink_resp_set(struct sink_resp *r, int status, const char *headers, const void *body,
                          size_t len)
{
    r->status = status;
    snprintf(r->headers, sizeof(r->headers), "%s", headers ? headers : "");
    free(r->body);
    r->body = len ? malloc(len) : NULL;
    if (len)
        memcpy(r->body, body, len);
    r->body_len = len;
}

/* Answers after the scripted ones run out (the default is an empty 200). */
SINK_API void sink_default(struct sink *s, int status, const char *headers, const void *body,
                           size_t len)
{
    pthread_mutex_lock(&s->mu);
    sink_resp_set(&s->dflt, status, headers, body, len);
    pthread_mutex_unlock(&s->mu);
}

/* Queues the answer to the next request not yet answered. */
SINK_API void sink_push(struct sink *s, int status, const char *headers, const void *body,
                        size_t len)
{
    pthread_mutex_lock(&s->mu);
    if (s->nscript < SINK_MAX_SCRIPT)
        sink_resp_set(&s->script[s->nscript++], status, headers, body, len);
    pthread_mutex_unlock(&s->mu);
}

SINK_API size_t sink_count(struct sink *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->nreqs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

SINK_API unsigned sink_accepted(struct sink *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned n = s->accepted;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Requests are written once and then left alone, so one read of the count under the lock is
 * enough to read the first `count` of them. */
SINK_API const struct sink_req *sink_req(struct sink *s, size_t i)
{
    return i < sink_count(s) ? &s->reqs[i] : NULL;
}

SINK_API const char *sink_header(const struct sink_req *r, const char *name)
{
    for (size_t i = 0; i < r->header_count; i++)
        if (strcasecmp(r->names[i], name) == 0)
            return r->values[i];
    return NULL;
}

static void sink_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

static void sink_answer(struct sink *s, int fd)
{
    pthread_mutex_lock(&s->mu);
    struct sink_resp *r = s->next < s->nscript ? &s->script[s->next++] : &s->dflt;
    int status = r->status;
    char head[512];
    int n = snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n",
                     r->status, r->body_len, r->headers);
    /* a copy, so the test may change the answers while this one is being written */
    size_t body_len = r->body_len;
    unsigned char *body = body_len ? malloc(body_len) : NULL;
    if (body_len)
        memcpy(body, r->body, body_len);
    pthread_mutex_unlock(&s->mu);
    if (status != 0) {
        sink_write_all(fd, head, (size_t)n);
        sink_write_all(fd, body, body_len);
    }
    free(body);
}

/* Parses one whole request at the start of c->buf, if there is one; returns its length. */
static size_t sink_parse(struct sink_conn *c, struct sink_req *r)
{
    unsigned char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head_len = (size_t)(end - c->buf) + 4;
    char *head = strndup((char *)c->buf, head_len - 4);
    char *save = NULL, *line = strtok_r(head, "\r\n", &save);
    size_t body_len = 0;
    memset(r, 0, sizeof(*r));
    sscanf(line, "%15s %255s", r->method, r->path);
    while ((line = strtok_r(NULL, "\r\n", &save)) && r->header_count < SINK_MAX_HEADERS) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        r->names[r->header_count] = strdup(line);
        r->values[r->header_count++] = strdup(v);
        if (strcasecmp(line, "content-length") == 0)
            body_len = strtoul(v, NULL, 10);
    }
    free(head);
    if (c->len < head_len + body_len) {
        for (size_t i = 0; i < r->header_count; i++) {
            free(r->names[i]);
            free(r->values[i]);
        }
        return 0;
    }
    r->body = malloc(body_len + 1);
    memcpy(r->body, c->buf + head_len, body_len);
    r->body_len = body_len;
    return head_len + body_len;
}

static void sink_on_data(struct sink *s, struct sink_conn *c)
{
    struct sink_req r;
    size_t used;
    while ((used = sink_parse(c, &r)) > 0) {
        memmove(c->buf, c->buf + used, c->len - used);
        c->len -= used;
        pthread_mutex_lock(&s->mu);
        if (s->nreqs < SINK_MAX_REQS)
            s->reqs[s->nreqs++] = r;
        pthread_mutex_unlock(&s->mu);
        sink_answer(s, c->fd);
        if (s->notify)
            uv_async_send(s->notify);
    }
}

static void sink_conn_close(struct sink *s, size_t i)
{
    close(s->conns[i].fd);
    free(s->conns[i].buf);
    s->conns[i] = s->conns[--s->nconns];
}

static void sink_read(struct sink *s, size_t i)
{
    struct sink_conn *c = &s->conns[i];
    if (c->cap - c->len < 65536) {
        c->cap = c->cap * 2 + 65536;
        c->buf = realloc(c->buf, c->cap);
    }
    ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (n <= 0) {
        sink_conn_close(s, i);
        return;
    }
    c->len += (size_t)n;
    sink_on_data(s, c);
}

static void *sink_main(void *arg)
{
    struct sink *s = arg;
    for (;;) {
        struct pollfd p[SINK_MAX_CONNS + 2] = {{s->wake[0], POLLIN, 0}, {s->lfd, POLLIN, 0}};
        size_t n = s->nconns;
        for (size_t i = 0; i < n; i++)
            p[i + 2] = (struct pollfd){s->conns[i].fd, POLLIN, 0};
        if (poll(p, n + 2, -1) < 0)
            continue;
        if (p[0].revents)
            return NULL;
        for (size_t i = n; i-- > 0;) /* backwards: closing moves the last one into i */
            if (p[i + 2].revents)
                sink_read(s, i);
        if ((p[1].revents & POLLIN) && s->nconns < SINK_MAX_CONNS) {
            int fd = accept(s->lfd, NULL, NULL);
            if (fd >= 0) {
                s->conns[s->nconns++] = (struct sink_conn){.fd = fd};
                pthread_mutex_lock(&s->mu);
                s->accepted++;
                pthread_mutex_unlock(&s->mu);
            }
        }
    }
}

/* Listens on addr:port (an IPv4 address of 127/8; port 0: any free port, then s->port says
 * which). */
SINK_API int sink_start_at(struct sink *s, const char *addr, uint16_t port, uv_async_t *notify)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    s->notify = notify;
    s->dflt.status = 200;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, addr, &a.sin_addr);
    socklen_t alen = sizeof(a);
    if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s->lfd, 64) != 0 ||
        getsockname(s->lfd, (struct sockaddr *)&a, &alen) != 0 || pipe(s->wake) != 0) {
        close(s->lfd);
        return -1;
    }
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->thread, NULL, sink_main, s) == 0 ? 0 : -1;
}

/* Listens on 127.0.0.1:port (0: any free port, then s->port says which). */
SINK_API int sink_start(struct sink *s, uint16_t port, uv_async_t *notify)
{
    return sink_start_at(s, "127.0.0.1", port, notify);
}

SINK_API void sink_stop(struct sink *s)
{
    (void)!write(s->wake[1], "x", 1);
    pthread_join(s->thread, NULL);
    while (s->nconns)
        sink_conn_close(s, 0);
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    for (size_t i = 0; i < s->nreqs; i++) {
        for (size_t j = 0; j < s->reqs[i].header_count; j++) {
            free(s->reqs[i].names[j]);
            free(s->reqs[i].values[j]);
        }
        free(s->reqs[i].body);
    }
    for (size_t i = 0; i < s->nscript; i++)
        free(s->script[i].body);
    free(s->dflt.body);
    pthread_mutex_destroy(&s->mu);
}

/* A loopback port with nothing listening on it (the kernel gave it out and it was closed). */
SINK_API uint16_t sink_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &alen);
    close(fd);
    return ntohs(a.sin_port);
}
