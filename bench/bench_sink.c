/* bench_sink.c: a discarding OTLP backend for the benchmarks: every OTLP/HTTP POST is answered
 * 200 with an empty application/x-protobuf body, every OTLP/gRPC Export (h2c, same port) with an
 * empty response and grpc-status 0, and counted (requests, bytes, spans); GET returns the totals
 * as text; SIGTERM/SIGINT prints them and exits. Prints `port=N` on stdout. */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "bench/bench_common.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/compress.h"
#include "core/errors.h"
#include "net/grpc.h"
#include "net/http_server.h"
#include "core/log.h"

static const char usage[] =
    "usage: bench_sink [--listen HOST:PORT] [--no-count]\n"
    "  --listen     where to listen (default 127.0.0.1:0; the port is printed as port=N);\n"
    "               OTLP/HTTP (HTTP/1.1 or h2c) and OTLP/gRPC (h2c) on the same port\n"
    "  --no-count   do not walk bodies to count spans (saves the sink's CPU)\n";

struct sink {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    struct hs_http_server *http;
    bool count, stopping;
    struct hs_buf inflated;
    uint64_t requests, grpc_requests, bytes, wire_bytes, spans, gzip_requests, bad;
    double t_first, t_last;
};

/* Reads a varint at *p; false past `end`. */
static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Visits the length-delimited fields numbered `field` of the message in [p, end): calls fn on
 * each, skips the rest. Returns the sum of fn's results, or -1 if the bytes are malformed. */
static int64_t each_len_field(const uint8_t *p, const uint8_t *end, uint32_t field,
                              int64_t (*fn)(const uint8_t *, const uint8_t *))
{
    int64_t total = 0;
    while (p < end) {
        uint64_t key, n;
        if (!get_varint(&p, end, &key))
            return -1;
        switch (key & 7) {
        case 0:
            if (!get_varint(&p, end, &n))
                return -1;
            break;
        case 1:
            p += 8;
            break;
        case 5:
            p += 4;
            break;
        case 2:
            if (!get_varint(&p, end, &n) || n > (uint64_t)(end - p))
                return -1;
            if (key >> 3 == field) {
                int64_t r = fn(p, p + n);
                if (r < 0)
                    return -1;
                total += r;
            }
            p += n;
            break;
        default:
            return -1;
        }
        if (p > end)
            return -1;
    }
    return total;
}

static int64_t one(const uint8_t *p, const uint8_t *end)
{
    (void)p, (void)end;
    return 1;
}

static int64_t scope_spans(const uint8_t *p, const uint8_t *end)
{
    return each_len_field(p, end, 2, one); /* ScopeSpans.spans = 2 */
}

static int64_t resource_spans(const uint8_t *p, const uint8_t *end)
{
    return each_len_field(p, end, 2, scope_spans); /* ResourceSpans.scope_spans = 2 */
}

/* Spans in an ExportTraceServiceRequest (resource_spans = 1), or -1. */
static int64_t count_spans(const uint8_t *p, size_t len)
{
    return each_len_field(p, p + len, 1, resource_spans);
}

static void print_totals(struct sink *s, FILE *f)
{
    double el = s->t_last - s->t_first;
    fprintf(f,
            "sink: requests=%llu grpc_requests=%llu gzip_requests=%llu wire_bytes=%llu "
            "bytes=%llu spans=%llu bad=%llu elapsed_s=%.2f spans_per_s=%.0f\n",
            (unsigned long long)s->requests, (unsigned long long)s->grpc_requests,
            (unsigned long long)s->gzip_requests, (unsigned long long)s->wire_bytes,
            (unsigned long long)s->bytes, (unsigned long long)s->spans, (unsigned long long)s->bad,
            el, el > 0 ? (double)s->spans / el : 0);
    fflush(f);
}

/* Counts the spans of one ExportTraceServiceRequest as sent (gzip-compressed when `gzip`). */
static void sink_count(struct sink *s, const uint8_t *body, size_t len, bool gzip)
{
    if (gzip) {
        s->gzip_requests++;
        if (!s->count)
            return;
        const char *why = NULL;
        hs_buf_reset(&s->inflated);
        if (hs_gunzip(body, len, (size_t)1 << 30, &s->inflated, &why) != 0) {
            s->bad++;
            return;
        }
        body = s->inflated.data;
        len = s->inflated.len;
    }
    s->bytes += len;
    if (!s->count)
        return;
    int64_t n = count_spans(body, len);
    if (n < 0)
        s->bad++;
    else
        s->spans += (uint64_t)n;
}

/* A unary TraceService/Export call: the message's spans counted, an empty response, OK. */
static void sink_grpc(struct sink *s, struct hs_http_request *req)
{
    if (!hs_grpc_request_ok(req))
        return;
    s->grpc_requests++;
    /* unframed only, not inflated: sink_count inflates (or not, with --no-count) */
    const uint8_t *body = req->body;
    size_t len = req->body_len;
    uint64_t n = len < HS_GRPC_PREFIX ? 0
                                      : (uint64_t)body[1] << 24 | (uint64_t)body[2] << 16 |
                                            (uint64_t)body[3] << 8 | body[4];
    if (len < HS_GRPC_PREFIX || body[0] > 1 || n != len - HS_GRPC_PREFIX) {
        s->bad++;
        hs_grpc_respond(req, HS_GRPC_INTERNAL, "not one length-prefixed message", NULL, 0, false,
                        0);
        return;
    }
    sink_count(s, body + HS_GRPC_PREFIX, len - HS_GRPC_PREFIX, body[0] == 1);
    hs_grpc_respond(req, HS_GRPC_OK, NULL, NULL, 0, false, 0);
}

static void sink_handle(void *ud, struct hs_http_request *req)
{
    struct sink *s = ud;
    const struct hs_str *ct = hs_http_request_header(req, "content-type");
    bool grpc = ct && ct->len >= 16 && strncasecmp(ct->ptr, "application/grpc", 16) == 0;
    if (strcmp(req->method, "POST") != 0 && !grpc) {
        char text[400];
        snprintf(text, sizeof(text),
                 "requests=%llu grpc_requests=%llu gzip_requests=%llu wire_bytes=%llu "
                 "bytes=%llu spans=%llu bad=%llu\n",
                 (unsigned long long)s->requests, (unsigned long long)s->grpc_requests,
                 (unsigned long long)s->gzip_requests, (unsigned long long)s->wire_bytes,
                 (unsigned long long)s->bytes, (unsigned long long)s->spans,
                 (unsigned long long)s->bad);
        hs_http_respond_text(req, 200, text);
        return;
    }
    double now = hs_bench_mono_s();
    if (!s->requests)
        s->t_first = now;
    s->t_last = now;
    s->requests++;
    s->wire_bytes += req->body_len;
    if (grpc) {
        sink_grpc(s, req);
        return;
    }
    const struct hs_str *enc = hs_http_request_header(req, "content-encoding");
    sink_count(s, req->body, req->body_len, enc && hs_str_ieq(*enc, "gzip"));
    hs_http_respond(req, 200, "application/x-protobuf", NULL, 0, "", 0);
}

static void http_closed(void *ud)
{
    struct sink *s = ud;
    s->http = NULL;
    uv_stop(&s->loop);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct sink *s = h->data;
    if (s->stopping)
        return;
    s->stopping = true;
    print_totals(s, stdout);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    hs_http_server_close(s->http, http_closed, s);
}

int main(int argc, char **argv)
{
    static struct sink s = {.count = true};
    const char *listen = "127.0.0.1:0";
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = hs_bench_opt(argc, argv, &i, "--listen")))
            listen = v;
        else if (strcmp(argv[i], "--no-count") == 0)
            s.count = false;
        else {
            fputs(usage, stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    hs_log_setup(HS_LOG_INFO, false);
    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&s.loop);

    struct hs_http_server_config conf = {
        .endpoint = (char *)listen,
        .max_request_body_size = (uint64_t)1 << 30,
        .read_timeout_ms = 60000,
        .idle_timeout_ms = 600000,
        .max_connections = 4096,
        .max_header_size = 65536,
    };
    struct hs_http_server_opts opts = {.config = &conf,
                                       .name = "bench_sink",
                                       .handler = sink_handle,
                                       .framing = &hs_grpc_framing,
                                       .ud = &s};
    struct hs_error err = {0};
    int rc = hs_http_server_start(&s.loop, &opts, &s.http, &err);
    if (rc != 0) {
        for (size_t i = 0; i < err.count; i++)
            fprintf(stderr, "bench_sink: %s\n", err.lines[i]);
        fprintf(stderr, "bench_sink: cannot listen on %s: %s\n", listen, hs_strerror(rc));
        hs_error_free(&err);
        return 1;
    }
    printf("port=%d\n", hs_http_server_port(s.http));
    fflush(stdout);

    uv_signal_init(&s.loop, &s.sigterm);
    uv_signal_init(&s.loop, &s.sigint);
    s.sigterm.data = s.sigint.data = &s;
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    uv_signal_start(&s.sigint, on_signal, SIGINT);

    uv_run(&s.loop, UV_RUN_DEFAULT);
    uv_run(&s.loop, UV_RUN_NOWAIT); /* the remaining close callbacks */
    rc = uv_loop_close(&s.loop);
    hs_buf_free(&s.inflated);
    return rc == 0 ? 0 : 1;
}
