/* sock_client.c: a blocking-socket HTTP/1.1 client for the server tests: raw bytes out,
 * Content-Length-framed responses in, EOF detection. Included with #include by the tests that use
 * it (it is not a test_*.c, so CMake leaves it alone). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct cconn {
    int fd;
    char *buf;
    size_t len, cap;
};

struct resp {
    int status;
    char head[1024];
    char *body;
    size_t body_len;
};

static bool cconnect(int port, struct cconn *c, int rcvbuf)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (rcvbuf)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return c->fd >= 0 && connect(c->fd, (struct sockaddr *)&a, sizeof(a)) == 0;
}

static void cclose(struct cconn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

static bool csend(struct cconn *c, const char *s, size_t n)
{
    while (n) {
        ssize_t k = send(c->fd, s, n, MSG_NOSIGNAL);
        if (k <= 0)
            return false;
        s += k;
        n -= (size_t)k;
    }
    return true;
}

static bool csends(struct cconn *c, const char *s)
{
    return csend(c, s, strlen(s));
}

/* Reads more into c->buf: >0 bytes, 0 at EOF or reset, -1 on timeout. */
static ssize_t cfill(struct cconn *c)
{
    if (c->cap - c->len < 65536) {
        c->cap = c->cap * 2 + 65536;
        c->buf = realloc(c->buf, c->cap);
    }
    ssize_t k = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
    if (k < 0)
        return errno == ECONNRESET ? 0 : -1;
    c->len += (size_t)k;
    c->buf[c->len] = '\0';
    return k;
}

static const char *find_header(const char *head, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n"))
        if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':')
            return p + 3 + n + strspn(p + 3 + n, " ");
    return NULL;
}

/* One whole response (Content-Length framed, as the server always frames). */
static bool cread(struct cconn *c, struct resp *r)
{
    char *end;
    while (!c->buf || !(end = strstr(c->buf, "\r\n\r\n")))
        if (cfill(c) <= 0)
            return false;
    size_t hlen = (size_t)(end - c->buf) + 4;
    if (hlen >= sizeof(r->head))
        return false;
    memcpy(r->head, c->buf, hlen);
    r->head[hlen] = '\0';
    if (sscanf(r->head, "HTTP/1.1 %d ", &r->status) != 1)
        return false;
    const char *cl = find_header(r->head, "content-length");
    r->body_len = cl ? strtoul(cl, NULL, 10) : 0;
    while (c->len < hlen + r->body_len)
        if (cfill(c) <= 0)
            return false;
    r->body = malloc(r->body_len + 1);
    memcpy(r->body, c->buf + hlen, r->body_len);
    r->body[r->body_len] = '\0';
    memmove(c->buf, c->buf + hlen + r->body_len, c->len - hlen - r->body_len + 1);
    c->len -= hlen + r->body_len;
    return true;
}

/* A request and its response, the body kept in r (to free). */
static bool exchange(struct cconn *c, const char *req, struct resp *r)
{
    return csends(c, req) && cread(c, r);
}

/* True when the server closed the connection with nothing more to say. */
static bool ceof(struct cconn *c)
{
    return c->len == 0 && cfill(c) == 0;
}
