/* bench_load.c: an OTLP/HTTP load generator: K keep-alive connections (one blocking thread each)
 * POST the prebuilt benchmark request to host:port for D seconds or N requests, optionally at R
 * spans/s in total, and count 200s, 503s (backpressure) and other answers. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_common.h"
#include "bench/otlp_payload.h"
#include "core/buf.h"
#include "core/compress.h"

static const char usage[] =
    "usage: bench_load [--target HOST:PORT] [--connections K] [--duration S] [--requests N]\n"
    "                  [--rate SPANS_PER_S] [--spans N] [--seed N] [--path P] [--gzip]\n"
    "                  [--backoff-ms MS] [--body FILE --content-type CT [--items N]]\n"
    "                  [--tenants N]\n"
    "  --target        where to POST (default 127.0.0.1:4318)\n"
    "  --connections   keep-alive connections, one thread each (default 32)\n"
    "  --duration      seconds to send for (default 5)\n"
    "  --requests      stop after N requests in total instead (for callgrind runs)\n"
    "  --rate          spans/s in total, evenly spaced (default: as fast as answered)\n"
    "  --spans, --seed the payload (defaults 1000 and 0x5eed, as bench_floor)\n"
    "  --path          URL path (default /v1/traces)\n"
    "  --gzip          send the body gzip-compressed (Content-Encoding: gzip)\n"
    "  --backoff-ms    pause of a connection after a 429/503 (default 10)\n"
    "  --body FILE     send this file as the body instead of the OTLP payload (e.g. a\n"
    "                  profile), with --content-type; --items: what one request counts as\n"
    "                  in the spans= figures (default 1)\n"
    "  --tenants N     connection i sends X-Scope-OrgID: tenant-<i mod N>, so a routing tier\n"
    "                  (load_balancing, by tenant and service) spreads the load (default: none)\n"
    "prints one line: load: key=value ...\n";

struct load {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    char head[512]; /* request line and headers */
    size_t head_len;
    const uint8_t *body;
    size_t body_len;
    uint32_t spans_per_req;
    struct hs_bench_pace pace;
    double backoff_s;
};

struct conn {
    struct load *l;
    char head[600]; /* l->head with this connection's tenant, or empty: l->head as it is */
    size_t head_len;
    pthread_t th;
    int fd;
    bool opened;
    uint64_t ok, errors, reconnects, bytes_sent;
    uint64_t status[6]; /* by class: 1xx..5xx, index 0 unused */
    uint64_t s429, s503, s400, s413;
    struct hs_bench_lat lat; /* seconds, per answered request */
    double last_done;
};

static int conn_open(struct conn *c)
{
    int fd = hs_bench_connect(&c->l->addr, c->l->addr_len, 10);
    if (fd < 0)
        return -1;
    c->fd = fd;
    return 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static int send_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0)
            return -1;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Reads one response; returns its status, or -1. *close_after is set on `Connection: close`. */
static int read_response(int fd, bool *close_after)
{
    char buf[8192];
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == sizeof(buf) - 1)
            return -1;
        ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    size_t clen = 0;
    *close_after = false;
    for (char *line = strstr(buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
        char *h = line + 2;
        if (strncasecmp(h, "content-length:", 15) == 0)
            clen = strtoull(h + 15, NULL, 10);
        else if (strncasecmp(h, "connection:", 11) == 0 && strstr(h, "close") &&
                 strstr(h, "close") < strstr(h, "\r\n"))
            *close_after = true;
    }
    size_t body_have = have - (size_t)(end + 4 - buf);
    while (body_have < clen) { /* the body is small (empty on success); drain it */
        ssize_t r = read(fd, buf, HS_MIN(sizeof(buf), clen - body_have));
        if (r <= 0)
            return -1;
        body_have += (size_t)r;
    }
    return status;
}

static void sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (time_t)t) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

static void *conn_run(void *arg)
{
    struct conn *c = arg;
    struct load *l = c->l;
    double due;
    while (hs_bench_next_ticket(&l->pace, &due)) {
        if (due > 0)
            sleep_until(due);
        if (c->fd < 0) {
            if (conn_open(c) != 0) {
                c->errors++;
                usleep(10000);
                continue;
            }
            c->reconnects += c->opened;
            c->opened = true;
        }
        double t = hs_bench_mono_s();
        struct iovec iov[2] = {
            {c->head_len ? c->head : l->head, c->head_len ? c->head_len : l->head_len},
            {(void *)l->body, l->body_len}};
        bool close_after = false;
        int status = -1;
        if (send_all(c->fd, iov, 2) == 0)
            status = read_response(c->fd, &close_after);
        double done = hs_bench_mono_s();
        if (status < 100 || status > 599) {
            c->errors++;
            conn_close(c);
            continue;
        }
        c->bytes_sent += iov[0].iov_len + l->body_len;
        c->status[status / 100]++;
        hs_bench_lat_add(&c->lat, done - t);
        c->last_done = done;
        if (status == 200) {
            c->ok++;
        } else {
            c->s429 += status == 429;
            c->s503 += status == 503;
            c->s400 += status == 400;
            c->s413 += status == 413;
        }
        if (close_after)
            conn_close(c);
        if ((status == 429 || status == 503) && l->backoff_s > 0)
            usleep((useconds_t)(l->backoff_s * 1e6));
    }
    conn_close(c);
    return NULL;
}

static void report(const struct load *l, struct conn *cs, int k, const char *target, double rate,
                   double cpu_s)
{
    struct conn t = {0};
    double last = l->pace.t0;
    struct hs_bench_lat lat = {0};
    for (int i = 0; i < k; i++) {
        t.ok += cs[i].ok, t.errors += cs[i].errors, t.reconnects += cs[i].reconnects;
        t.bytes_sent += cs[i].bytes_sent;
        t.s429 += cs[i].s429, t.s503 += cs[i].s503, t.s400 += cs[i].s400, t.s413 += cs[i].s413;
        for (int s = 1; s < 6; s++)
            t.status[s] += cs[i].status[s];
        hs_bench_lat_extend(&lat, &cs[i].lat);
        last = HS_MAX(last, cs[i].last_done);
    }
    hs_bench_lat_sort(&lat);
    double elapsed = hs_bench_elapsed(&l->pace, last);
    uint64_t answered = t.status[1] + t.status[2] + t.status[3] + t.status[4] + t.status[5];
    uint64_t other = answered - t.ok - t.s429 - t.s503 - t.s400 - t.s413;
    char rate_s[32] = "unlimited";
    if (rate > 0)
        snprintf(rate_s, sizeof(rate_s), "%.0f", rate);
    printf("load: target=%s connections=%d rate=%s elapsed_s=%.2f requests=%llu ok=%llu "
           "status_503=%llu status_429=%llu status_400=%llu status_413=%llu status_other=%llu "
           "errors=%llu reconnects=%llu spans_ok=%llu spans_per_s=%.0f mb_per_s=%.1f "
           "p50_ms=%.1f p99_ms=%.1f max_ms=%.1f cpu_pct=%.1f\n",
           target, k, rate_s, elapsed, (unsigned long long)answered, (unsigned long long)t.ok,
           (unsigned long long)t.s503, (unsigned long long)t.s429, (unsigned long long)t.s400,
           (unsigned long long)t.s413, (unsigned long long)other, (unsigned long long)t.errors,
           (unsigned long long)t.reconnects, (unsigned long long)(t.ok * l->spans_per_req),
           elapsed > 0 ? (double)(t.ok * l->spans_per_req) / elapsed : 0,
           elapsed > 0 ? (double)t.bytes_sent / elapsed / 1e6 : 0, hs_bench_lat_ms(&lat, 0.5),
           hs_bench_lat_ms(&lat, 0.99), hs_bench_lat_ms(&lat, 1.0),
           elapsed > 0 ? cpu_s / elapsed * 100 : 0);
    free(lat.v);
}

/* The whole of a payload file, into p->data/len (malloc'd). */
static int read_file(const char *path, struct hs_bench_payload *p)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    struct hs_buf b = {0};
    uint8_t chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if (hs_buf_append(&b, chunk, n) != 0)
            break;
    bool ok = !ferror(f);
    fclose(f);
    if (!ok || b.len == 0) {
        hs_buf_free(&b);
        return -1;
    }
    p->data = b.data;
    p->len = b.len;
    return 0;
}

int main(int argc, char **argv)
{
    const char *target = "127.0.0.1:4318", *path = "/v1/traces";
    int k = 32;
    double duration = 5, rate = 0, backoff_ms = 10;
    uint64_t requests = 0, seed = HS_BENCH_SEED_DEFAULT;
    uint32_t spans = HS_BENCH_SPANS_DEFAULT;
    bool gzip = false;
    const char *body_file = NULL, *content_type = "application/x-protobuf";
    uint32_t items = 1, tenants = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = hs_bench_opt(argc, argv, &i, "--target")))
            target = v;
        else if ((v = hs_bench_opt(argc, argv, &i, "--connections")))
            k = (int)hs_bench_num("--connections", v, 1, 4096);
        else if ((v = hs_bench_opt(argc, argv, &i, "--duration")))
            duration = hs_bench_num("--duration", v, 0.01, 86400);
        else if ((v = hs_bench_opt(argc, argv, &i, "--requests")))
            requests = (uint64_t)hs_bench_num("--requests", v, 1, 1e12);
        else if ((v = hs_bench_opt(argc, argv, &i, "--rate")))
            rate = hs_bench_num("--rate", v, 0, 1e9);
        else if ((v = hs_bench_opt(argc, argv, &i, "--spans")))
            spans = (uint32_t)hs_bench_num("--spans", v, 1, 1e6);
        else if ((v = hs_bench_opt(argc, argv, &i, "--seed")))
            seed = strtoull(v, NULL, 0);
        else if ((v = hs_bench_opt(argc, argv, &i, "--path")))
            path = v;
        else if ((v = hs_bench_opt(argc, argv, &i, "--backoff-ms")))
            backoff_ms = hs_bench_num("--backoff-ms", v, 0, 60000);
        else if ((v = hs_bench_opt(argc, argv, &i, "--body")))
            body_file = v;
        else if ((v = hs_bench_opt(argc, argv, &i, "--content-type")))
            content_type = v;
        else if ((v = hs_bench_opt(argc, argv, &i, "--items")))
            items = (uint32_t)hs_bench_num("--items", v, 1, 1e6);
        else if ((v = hs_bench_opt(argc, argv, &i, "--tenants")))
            tenants = (uint32_t)hs_bench_num("--tenants", v, 1, 1e6);
        else if (strcmp(argv[i], "--gzip") == 0)
            gzip = true;
        else {
            fputs(usage, stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }

    static struct load l;
    char host[256];
    if (hs_bench_resolve(target, &l.addr, &l.addr_len, host, sizeof(host)) != 0) {
        fprintf(stderr, "bench_load: cannot resolve %s (want HOST:PORT)\n", target);
        return 2;
    }
    struct hs_bench_payload p = {0};
    if (body_file) {
        if (read_file(body_file, &p) != 0) {
            fprintf(stderr, "bench_load: cannot read %s\n", body_file);
            return 1;
        }
        spans = items;
    } else if (hs_bench_payload_build(&p, spans, seed) != 0) {
        fprintf(stderr, "bench_load: cannot build the payload\n");
        return 1;
    } else {
        hs_bench_payload_print(&p, stderr);
    }
    struct hs_buf gz = {0};
    l.body = p.data;
    l.body_len = p.len;
    if (gzip) {
        if (hs_gzip(p.data, p.len, 1, &gz) != 0)
            return 1;
        l.body = gz.data;
        l.body_len = gz.len;
    }
    int n = snprintf(l.head, sizeof(l.head),
                     "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: hotspan-bench_load\r\n"
                     "Content-Type: %s\r\n%sContent-Length: %zu\r\n\r\n", path, target,
                     content_type, gzip ? "Content-Encoding: gzip\r\n" : "", l.body_len);
    l.head_len = (size_t)n;
    l.spans_per_req = spans;
    l.pace.max_requests = requests;
    l.backoff_s = backoff_ms / 1e3;
    l.pace.interval = rate > 0 ? spans / rate : 0;

    struct conn *cs = calloc((size_t)k, sizeof(*cs));
    double cpu0 = hs_bench_cpu_s();
    l.pace.t0 = hs_bench_mono_s();
    l.pace.deadline = l.pace.t0 + duration;
    for (int i = 0; i < k; i++) {
        cs[i] = (struct conn){.l = &l, .fd = -1};
        if (tenants) /* the tenant goes first after the request line: the rest stays as built */
            cs[i].head_len = (size_t)snprintf(cs[i].head, sizeof(cs[i].head),
                                              "%.*sX-Scope-OrgID: tenant-%u\r\n%s",
                                              (int)(strstr(l.head, "\r\n") + 2 - l.head), l.head,
                                              (unsigned)i % tenants, strstr(l.head, "\r\n") + 2);
        if (pthread_create(&cs[i].th, NULL, conn_run, &cs[i]) != 0) {
            fprintf(stderr, "bench_load: pthread_create failed\n");
            return 1;
        }
    }
    for (int i = 0; i < k; i++)
        pthread_join(cs[i].th, NULL);
    report(&l, cs, k, target, rate, hs_bench_cpu_s() - cpu0);
    for (int i = 0; i < k; i++)
        free(cs[i].lat.v);
    free(cs);
    hs_buf_free(&gz);
    if (body_file)
        free(p.data);
    else
        hs_bench_payload_free(&p);
    return 0;
}
