/* bench_scan.c: the OTLP wire scanner (pdata/otlp_wire.c) against protobuf-c decode and decode +
 * encode (arena, reset per request) on the benchmark payload, in ns per span; medians of runs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_common.h"
#include "bench/otlp_payload.h"
#include "core/arena.h"
#include "pdata/otlp_wire.h"

static const char usage[] =
    "usage: bench_scan [--seconds S] [--runs N] [--spans N] [--seed N] [--only PHASE]\n"
    "  --seconds S   CPU seconds per run of each phase (default 0.5)\n"
    "  --runs N      runs per phase; the median is printed (default 5)\n"
    "  --spans N     spans per request (default 1000)\n"
    "  --only PHASE  scan, scan_visit, protobuf_c_decode or protobuf_c_decode_encode\n";

#define REQ_DESC                                                                                   \
    (&opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor)

struct ctx {
    const struct hs_bench_payload *p;
    struct hs_arena *arena;
    ProtobufCAllocator alloc;
    uint8_t *out;
    uint64_t sink; /* results folded in so nothing is optimized away */
};

/* What a consumer of the views would touch: the ids, the name and the times. */
static int visit(void *ud, const struct hs_span_view *v)
{
    struct ctx *c = ud;
    c->sink += v->end_ns - v->start_ns + v->name.len + (uint8_t)v->span_id.ptr[0];
    return 0;
}

__attribute__((noinline)) static int run_scan(struct ctx *c)
{
    struct hs_otlp_scan res;
    int rc = hs_otlp_traces_scan(c->p->data, c->p->len, NULL, NULL, NULL, &res);
    c->sink += res.spans;
    return rc == 0 && res.spans == c->p->spans ? 0 : -1;
}

__attribute__((noinline)) static int run_scan_visit(struct ctx *c)
{
    struct hs_otlp_scan res;
    return hs_otlp_traces_scan(c->p->data, c->p->len, NULL, visit, c, &res);
}

__attribute__((noinline)) static int run_decode(struct ctx *c)
{
    hs_arena_reset(c->arena);
    ProtobufCMessage *m = protobuf_c_message_unpack(REQ_DESC, &c->alloc, c->p->len, c->p->data);
    c->sink += (uintptr_t)m;
    return m ? 0 : -1;
}

__attribute__((noinline)) static int run_decode_encode(struct ctx *c)
{
    hs_arena_reset(c->arena);
    ProtobufCMessage *m = protobuf_c_message_unpack(REQ_DESC, &c->alloc, c->p->len, c->p->data);
    if (!m)
        return -1;
    c->sink += protobuf_c_message_pack(m, c->out);
    return 0;
}

/* ns per span of one run of about `seconds` CPU seconds. */
static double one_run(struct ctx *c, int (*fn)(struct ctx *), double seconds)
{
    uint64_t n = 0;
    double t0 = hs_bench_cpu_s(), t = t0;
    while (t - t0 < seconds) {
        for (int k = 0; k < 4; k++, n++)
            if (fn(c) != 0)
                return -1;
        t = hs_bench_cpu_s();
    }
    return (t - t0) * 1e9 / ((double)n * c->p->spans);
}

int main(int argc, char **argv)
{
    double seconds = 0.5;
    int runs = 5;
    uint32_t spans = HS_BENCH_SPANS_DEFAULT;
    uint64_t seed = HS_BENCH_SEED_DEFAULT;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = hs_bench_opt(argc, argv, &i, "--seconds")))
            seconds = hs_bench_num("--seconds", v, 0.01, 600);
        else if ((v = hs_bench_opt(argc, argv, &i, "--runs")))
            runs = (int)hs_bench_num("--runs", v, 1, 99);
        else if ((v = hs_bench_opt(argc, argv, &i, "--spans")))
            spans = (uint32_t)hs_bench_num("--spans", v, 1, 1e6);
        else if ((v = hs_bench_opt(argc, argv, &i, "--seed")))
            seed = strtoull(v, NULL, 0);
        else if ((v = hs_bench_opt(argc, argv, &i, "--only")))
            only = v;
        else {
            fputs(usage, stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    struct hs_bench_payload p;
    if (hs_bench_payload_build(&p, spans, seed) != 0) {
        fprintf(stderr, "bench_scan: cannot build the payload\n");
        return 1;
    }
    hs_bench_payload_print(&p, stdout);
    struct ctx c = {.p = &p, .arena = hs_arena_new(8u << 20, 0), .out = malloc(p.len)};
    c.alloc = hs_arena_pb_allocator(c.arena);

    static const struct {
        const char *name;
        int (*fn)(struct ctx *);
    } phases[] = {{"scan", run_scan},
                  {"scan_visit", run_scan_visit},
                  {"protobuf_c_decode", run_decode},
                  {"protobuf_c_decode_encode", run_decode_encode}};
    double med[4] = {0};
    for (size_t i = 0; i < 4; i++) {
        double r[99];
        if (only && strcmp(only, phases[i].name) != 0)
            continue;
        for (int k = 0; k < runs; k++)
            if ((r[k] = one_run(&c, phases[i].fn, seconds)) < 0) {
                fprintf(stderr, "bench_scan: %s failed\n", phases[i].name);
                return 1;
            }
        qsort(r, (size_t)runs, sizeof(r[0]), hs_bench_cmp_double);
        med[i] = r[runs / 2];
        printf("%s: ns_per_span=%.1f cpu_s_per_1M_spans=%.3f (median of %d, min %.1f max %.1f)\n",
               phases[i].name, med[i], med[i] / 1e3, runs, r[0], r[runs - 1]);
    }
    if (!only)
        printf("scan_vs_decode_encode: %.1fx faster; scan_vs_decode: %.1fx faster\n",
               med[3] / med[0], med[2] / med[0]);
    hs_arena_free(c.arena);
    free(c.out);
    hs_bench_payload_free(&p);
    return c.sink == 42 ? 3 : 0; /* never; keeps sink live */
}
