/* bench_load_grpc.c: an OTLP/gRPC load generator: K h2c connections (one thread each, nghttp2's
 * client API) keep M unary TraceService/Export calls in flight each, for D seconds or N calls,
 * optionally at R spans/s in total; counts grpc-status from the trailers, and retries
 * UNAVAILABLE and RESOURCE_EXHAUSTED after the delay the server asked for (RetryInfo). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench_common.h"
#include "bench/otlp_payload.h"
#include "core/buf.h"
#include "net/grpc.h"

static const char usage[] =
    "usage: bench_load_grpc [--target HOST:PORT] [--connections K] [--streams M]\n"
    "                       [--duration S] [--requests N] [--rate SPANS_PER_S] [--spans N]\n"
    "                       [--seed N] [--gzip] [--backoff-ms MS] [--drain S]\n"
    "  --target        the gRPC endpoint, h2c (default 127.0.0.1:4317)\n"
    "  --connections   HTTP/2 connections, one thread each (default 4)\n"
    "  --streams       concurrent calls per connection (default 8)\n"
    "  --duration      seconds to start new calls for (default 5)\n"
    "  --requests      stop after N calls in total instead\n"
    "  --rate          spans/s in total, evenly spaced (default: as fast as answered)\n"
    "  --spans, --seed the payload (defaults 1000 and 0x5eed, as bench_load)\n"
    "  --gzip          send each message gzipped (grpc-encoding: gzip)\n"
    "  --backoff-ms    retry delay when a refusal carries no RetryInfo (default 100)\n"
    "  --drain         seconds after the run to finish retries before giving up (default 10)\n"
    "prints one line: load: key=value ...; exits 0 only if every call was accepted in the end\n"
    "(not_retried, errors and abandoned are 0: calls lost for good, with their connection, or\n"
    "still refused after the drain)\n";

#define EXPORT_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

struct load {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    const char *authority;
    const uint8_t *body; /* the length-prefixed message */
    size_t body_len;
    bool gzip;
    int streams;
    uint32_t spans_per_req;
    double drain_s;
    struct hs_bench_pace pace;
    double backoff_s;
};

enum call_state { CALL_IDLE, CALL_WAIT, CALL_SENT, CALL_DONE };

/* One request: a slot that sends, waits for its due time (rate or retry), or is done. */
struct call {
    struct gconn *c;
    enum call_state state;
    double due, t_sent;
    size_t off; /* bytes of the body handed to nghttp2 */
    int grpc_status, http_status;
    uint64_t delay_ms;
    bool has_delay;
};

struct gconn {
    struct load *l;
    pthread_t th;
    int fd;
    nghttp2_session *s;
    struct call *calls;
    struct hs_buf pend; /* bytes nghttp2 produced that the socket did not take yet */
    size_t pend_off;
    uint64_t ok, exhausted, unavailable, other, failed, errors, retries, abandoned, reconnects;
    uint64_t opened;
    uint64_t answered, bytes_sent;
    struct hs_bench_lat lat; /* seconds, per answered request */
    double last_done;
};

/* The call's answer is complete: count it, and park it for a retry when the server refused it
 * for now: UNAVAILABLE, and RESOURCE_EXHAUSTED with RetryInfo (the OTLP client rules, wire.md
 * §3), after the delay asked for, or --backoff-ms without one. */
static void call_finish(struct gconn *c, struct call *k, uint32_t h2_error)
{
    double now = hs_bench_mono_s();
    int code = k->grpc_status;
    if (h2_error) /* RST_STREAM: REFUSED_STREAM is safe to retry (wire.md §3) */
        code = h2_error == NGHTTP2_REFUSED_STREAM ? HS_GRPC_UNAVAILABLE : HS_GRPC_INTERNAL;
    else if (code < 0) /* no grpc-status: a proxy's or a non-gRPC server's answer */
        code = k->http_status == 200 ? HS_GRPC_UNKNOWN : hs_grpc_code_from_http(k->http_status);
    c->answered++;
    c->bytes_sent += c->l->body_len;
    hs_bench_lat_add(&c->lat, now - k->t_sent);
    k->state = CALL_IDLE;
    if (code == HS_GRPC_OK) {
        c->ok++;
        c->last_done = now;
        return;
    }
    c->unavailable += code == HS_GRPC_UNAVAILABLE;
    c->exhausted += code == HS_GRPC_RESOURCE_EXHAUSTED;
    c->other += code != HS_GRPC_UNAVAILABLE && code != HS_GRPC_RESOURCE_EXHAUSTED;
    if (hs_grpc_retryable(code, k->has_delay)) {
        c->retries++;
        k->state = CALL_WAIT;
        k->due = now + (k->has_delay && k->delay_ms ? (double)k->delay_ms / 1e3 : c->l->backoff_s);
    } else {
        c->failed++; /* refused for good: these spans are lost */
    }
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    struct call *k = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!k || f->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        k->http_status = atoi((const char *)value); /* nghttp2 NUL-terminates values */
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        k->grpc_status = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            k->grpc_status = k->grpc_status * 10 + (value[i] - '0');
    } else if (namelen == 23 && memcmp(name, "grpc-status-details-bin", 23) == 0) {
        k->has_delay = hs_grpc_details_retry_delay((const char *)value, valuelen, &k->delay_ms);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud)
{
    struct call *k = nghttp2_session_get_stream_user_data(s, id);
    if (k && k->state == CALL_SENT)
        call_finish(ud, k, error_code);
    return 0;
}

/* The request body, copied into nghttp2's frame buffer (16 KiB at a time). */
static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    struct call *k = src->ptr;
    const struct load *l = k->c->l;
    size_t n = HS_MIN(length, l->body_len - k->off);
    memcpy(buf, l->body + k->off, n);
    k->off += n;
    if (k->off == l->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void conn_drop(struct gconn *c)
{
    if (c->s)
        nghttp2_session_del(c->s);
    c->s = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    hs_buf_reset(&c->pend);
    c->pend_off = 0;
    /* calls lost with the connection are failures, not retried: their fate is unknown */
    for (int i = 0; i < c->l->streams; i++)
        if (c->calls[i].state == CALL_SENT) {
            c->calls[i].state = CALL_IDLE;
            c->errors++;
        }
}

static int conn_open(struct gconn *c)
{
    int fd = hs_bench_connect(&c->l->addr, c->l->addr_len, 0);
    if (fd < 0)
        return -1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        close(fd);
        return -1;
    }
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    int rc = nghttp2_session_client_new(&c->s, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    /* the answers are tiny; our window only matters for the server's, left at the default */
    nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, NULL, 0);
    c->reconnects += c->opened > 0;
    c->opened++;
    return 0;
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE             \
    }

static int call_send(struct gconn *c, struct call *k)
{
    const struct load *l = c->l;
    nghttp2_nv h[] = {
        NV(":method", "POST"),
        NV(":scheme", "http"),
        NV(":path", EXPORT_PATH),
        NV(":authority", l->authority),
        NV("te", "trailers"),
        NV("content-type", "application/grpc"),
        NV("grpc-accept-encoding", HS_GRPC_ACCEPT_ENCODING),
        NV("user-agent", "hotspan-bench_load_grpc"),
        NV("grpc-encoding", "gzip"),
    };
    size_t nh = sizeof(h) / sizeof(h[0]) - !l->gzip;
    nghttp2_data_provider body = {.source.ptr = k, .read_callback = read_body};
    *k = (struct call){.c = c, .state = CALL_SENT, .t_sent = hs_bench_mono_s(), .grpc_status = -1};
    int32_t id = nghttp2_submit_request(c->s, NULL, h, nh, &body, k);
    if (id < 0) {
        k->state = CALL_IDLE;
        return -1;
    }
    return 0;
}

/* Writes what nghttp2 has to send until the socket would block. -1 when the connection broke. */
static int conn_flush(struct gconn *c)
{
    for (;;) {
        if (c->pend_off < c->pend.len) {
            ssize_t w =
                send(c->fd, c->pend.data + c->pend_off, c->pend.len - c->pend_off, MSG_NOSIGNAL);
            if (w < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
            c->pend_off += (size_t)w;
            continue;
        }
        hs_buf_reset(&c->pend);
        c->pend_off = 0;
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->s, &data);
        if (n <= 0)
            return n < 0 ? -1 : 0;
        ssize_t w = send(c->fd, data, (size_t)n, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        w = HS_MAX(w, 0);
        if (w < n && hs_buf_append(&c->pend, data + w, (size_t)(n - w)) != 0)
            return -1;
    }
}

static int conn_read(struct gconn *c)
{
    uint8_t buf[65536];
    for (;;) {
        ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
        if (r == 0)
            return -1;
        if (r < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if (nghttp2_session_mem_recv(c->s, buf, (size_t)r) < 0)
            return -1;
    }
}

/* Gives idle slots a ticket and sends the calls that are due. Returns the earliest due time of
 * a waiting call (or +inf), and in *live whether any call is not done. */
static double calls_step(struct gconn *c, bool *live)
{
    struct load *l = c->l;
    double now = hs_bench_mono_s(), next = 1e300;
    bool over = !l->pace.max_requests && now >= l->pace.deadline + l->drain_s;
    *live = false;
    for (int i = 0; i < l->streams; i++) {
        struct call *k = &c->calls[i];
        if (k->state == CALL_IDLE) {
            double due = 0;
            k->state = hs_bench_next_ticket(&l->pace, &due) ? CALL_WAIT : CALL_DONE;
            k->due = due;
        }
        if ((k->state == CALL_WAIT || k->state == CALL_SENT) && over) {
            /* still refused (or unanswered) after the drain: give up on it */
            c->abandoned++;
            k->state = CALL_DONE;
        }
        if (k->state == CALL_DONE)
            continue;
        *live = true;
        if (k->state != CALL_WAIT)
            continue;
        if (k->due > now) {
            next = HS_MIN(next, k->due);
            continue;
        }
        if (!c->s && conn_open(c) != 0) {
            c->errors++;
            next = HS_MIN(next, now + 0.01);
            k->due = now + 0.01;
            continue;
        }
        if (call_send(c, k) != 0) { /* GOAWAY received: no new streams here */
            conn_drop(c);
            k->state = CALL_WAIT;
            next = now;
        }
    }
    return next;
}

static void *conn_run(void *arg)
{
    struct gconn *c = arg;
    for (;;) {
        bool live;
        double next = calls_step(c, &live);
        if (!live)
            break;
        if (!c->s) {
            double wait = next - hs_bench_mono_s();
            if (wait > 0)
                usleep((useconds_t)(HS_MIN(wait, 0.1) * 1e6));
            continue;
        }
        if (conn_flush(c) != 0) {
            conn_drop(c);
            continue;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (c->pend_off < c->pend.len || nghttp2_session_want_write(c->s))
            p.events |= POLLOUT;
        double wait = HS_MIN(next - hs_bench_mono_s(), 0.1);
        int r = poll(&p, 1, wait > 0 ? (int)(wait * 1e3) + 1 : 0);
        if (r > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP)) && conn_read(c) != 0)
            conn_drop(c);
        else if (c->s && !nghttp2_session_want_read(c->s) && !nghttp2_session_want_write(c->s))
            conn_drop(c); /* the server said GOAWAY and everything is settled */
    }
    conn_drop(c);
    return NULL;
}

/* Prints the totals; returns true when every call was accepted in the end. */
static bool report(const struct load *l, struct gconn *cs, int k, double rate, double cpu_s)
{
    struct gconn t = {0};
    double last = l->pace.t0;
    struct hs_bench_lat lat = {0};
    for (int i = 0; i < k; i++) {
        t.ok += cs[i].ok, t.exhausted += cs[i].exhausted, t.unavailable += cs[i].unavailable;
        t.other += cs[i].other, t.failed += cs[i].failed, t.errors += cs[i].errors;
        t.retries += cs[i].retries;
        t.abandoned += cs[i].abandoned, t.reconnects += cs[i].reconnects;
        t.answered += cs[i].answered, t.bytes_sent += cs[i].bytes_sent;
        hs_bench_lat_extend(&lat, &cs[i].lat);
        last = HS_MAX(last, cs[i].last_done);
    }
    hs_bench_lat_sort(&lat);
    double elapsed = hs_bench_elapsed(&l->pace, last);
    char rate_s[32] = "unlimited";
    if (rate > 0)
        snprintf(rate_s, sizeof(rate_s), "%.0f", rate);
    printf("load: target=%s protocol=grpc connections=%d streams=%d rate=%s elapsed_s=%.2f "
           "requests=%llu ok=%llu status_unavailable=%llu status_resource_exhausted=%llu "
           "status_other=%llu not_retried=%llu errors=%llu retries=%llu abandoned=%llu "
           "reconnects=%llu spans_ok=%llu spans_per_s=%.0f mb_per_s=%.1f p50_ms=%.1f p99_ms=%.1f "
           "max_ms=%.1f cpu_pct=%.1f\n",
           l->authority, k, l->streams, rate_s, elapsed, (unsigned long long)t.answered,
           (unsigned long long)t.ok, (unsigned long long)t.unavailable,
           (unsigned long long)t.exhausted, (unsigned long long)t.other,
           (unsigned long long)t.failed, (unsigned long long)t.errors,
           (unsigned long long)t.retries, (unsigned long long)t.abandoned,
           (unsigned long long)t.reconnects, (unsigned long long)(t.ok * l->spans_per_req),
           elapsed > 0 ? (double)(t.ok * l->spans_per_req) / elapsed : 0,
           elapsed > 0 ? (double)t.bytes_sent / elapsed / 1e6 : 0, hs_bench_lat_ms(&lat, 0.5),
           hs_bench_lat_ms(&lat, 0.99), hs_bench_lat_ms(&lat, 1.0),
           elapsed > 0 ? cpu_s / elapsed * 100 : 0);
    free(lat.v);
    return t.ok > 0 && !t.failed && !t.errors && !t.abandoned;
}

struct opts {
    const char *target;
    int conns, streams;
    double duration, rate, backoff_ms, drain_s;
    uint64_t requests, seed;
    uint32_t spans;
    bool gzip;
};

static void parse_args(int argc, char **argv, struct opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = hs_bench_opt(argc, argv, &i, "--target")))
            o->target = v;
        else if ((v = hs_bench_opt(argc, argv, &i, "--connections")))
            o->conns = (int)hs_bench_num("--connections", v, 1, 1024);
        else if ((v = hs_bench_opt(argc, argv, &i, "--streams")))
            o->streams = (int)hs_bench_num("--streams", v, 1, 1024);
        else if ((v = hs_bench_opt(argc, argv, &i, "--duration")))
            o->duration = hs_bench_num("--duration", v, 0.01, 86400);
        else if ((v = hs_bench_opt(argc, argv, &i, "--requests")))
            o->requests = (uint64_t)hs_bench_num("--requests", v, 1, 1e12);
        else if ((v = hs_bench_opt(argc, argv, &i, "--rate")))
            o->rate = hs_bench_num("--rate", v, 0, 1e9);
        else if ((v = hs_bench_opt(argc, argv, &i, "--spans")))
            o->spans = (uint32_t)hs_bench_num("--spans", v, 1, 1e6);
        else if ((v = hs_bench_opt(argc, argv, &i, "--seed")))
            o->seed = strtoull(v, NULL, 0);
        else if ((v = hs_bench_opt(argc, argv, &i, "--backoff-ms")))
            o->backoff_ms = hs_bench_num("--backoff-ms", v, 0, 60000);
        else if ((v = hs_bench_opt(argc, argv, &i, "--drain")))
            o->drain_s = hs_bench_num("--drain", v, 0, 3600);
        else if (strcmp(argv[i], "--gzip") == 0)
            o->gzip = true;
        else {
            fputs(usage, stderr);
            exit(strcmp(argv[i], "--help") == 0 ? 0 : 2);
        }
    }
}

int main(int argc, char **argv)
{
    struct opts o = {.target = "127.0.0.1:4317",
                     .conns = 4,
                     .streams = 8,
                     .duration = 5,
                     .backoff_ms = 100,
                     .drain_s = 10,
                     .seed = HS_BENCH_SEED_DEFAULT,
                     .spans = HS_BENCH_SPANS_DEFAULT};
    parse_args(argc, argv, &o);
    static struct load l;
    char host[256];
    if (hs_bench_resolve(o.target, &l.addr, &l.addr_len, host, sizeof(host)) != 0) {
        fprintf(stderr, "bench_load_grpc: cannot resolve %s (want HOST:PORT)\n", o.target);
        return 2;
    }
    struct hs_bench_payload p = {0};
    if (hs_bench_payload_build(&p, o.spans, o.seed) != 0) {
        fprintf(stderr, "bench_load_grpc: cannot build the payload\n");
        return 1;
    }
    hs_bench_payload_print(&p, stderr);
    struct hs_buf msg = {0};
    if (hs_grpc_frame(&msg, p.data, p.len, o.gzip) != 0)
        return 1;
    l.authority = o.target;
    l.body = msg.data;
    l.body_len = msg.len;
    l.gzip = o.gzip;
    l.streams = o.streams;
    l.spans_per_req = o.spans;
    l.pace.max_requests = o.requests;
    l.backoff_s = o.backoff_ms / 1e3;
    l.drain_s = o.drain_s;
    l.pace.interval = o.rate > 0 ? o.spans / o.rate : 0;

    struct gconn *cs = calloc((size_t)o.conns, sizeof(*cs));
    struct call *calls = calloc((size_t)o.conns * (size_t)o.streams, sizeof(*calls));
    if (!cs || !calls)
        return 1;
    double cpu0 = hs_bench_cpu_s();
    l.pace.t0 = hs_bench_mono_s();
    l.pace.deadline = l.pace.t0 + o.duration;
    for (int i = 0; i < o.conns; i++) {
        cs[i] = (struct gconn){.l = &l, .fd = -1, .calls = calls + (size_t)i * (size_t)o.streams};
        if (pthread_create(&cs[i].th, NULL, conn_run, &cs[i]) != 0) {
            fprintf(stderr, "bench_load_grpc: pthread_create failed\n");
            return 1;
        }
    }
    for (int i = 0; i < o.conns; i++)
        pthread_join(cs[i].th, NULL);
    bool all_ok = report(&l, cs, o.conns, o.rate, hs_bench_cpu_s() - cpu0);
    for (int i = 0; i < o.conns; i++) {
        free(cs[i].lat.v);
        hs_buf_free(&cs[i].pend);
    }
    free(calls);
    free(cs);
    hs_buf_free(&msg);
    hs_bench_payload_free(&p);
    return all_ok ? 0 : 1;
}
