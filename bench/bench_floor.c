/* bench_floor.c: the floor of design.md §11: what protobuf-c decode (arena, reset per request) +
 * encode of the benchmark payload costs alone, in CPU-s per million spans; hotspan's pass-through
 * is measured against it. Also decode and encode apart, and optionally gzip of the result. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_common.h"
#include "bench/otlp_payload.h"
#include "core/arena.h"
#include "core/buf.h"
#include "core/compress.h"

static const char usage[] =
    "usage: bench_floor [--seconds S] [--iterations N] [--spans N] [--seed N] [--gzip LEVEL]\n"
    "                   [--only decode|encode|both|both_malloc]\n"
    "  --seconds S      run each phase for S CPU-seconds (default 2)\n"
    "  --iterations N   run each phase exactly N times instead (for callgrind)\n"
    "  --spans N        spans per request (default 1000)\n"
    "  --seed N         payload seed (default 0x5eed, as bench_load)\n"
    "  --gzip LEVEL     also time libdeflate gzip of the encoded request at LEVEL (1..12)\n"
    "  --only PHASE     run one phase (callgrind: the phase is in floor_<phase>)\n";

#define REQ_DESC                                                                                   \
    (&opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor)

struct floor {
    const struct hs_bench_payload *p;
    struct hs_arena *arena;
    ProtobufCAllocator alloc;
    uint8_t *out;              /* encode target, p->len bytes */
    ProtobufCMessage *decoded; /* for the encode-only phase, in its own arena */
    uint64_t sink;             /* results folded in so nothing is optimized away */
};

/* One request: decode into the arena. noinline so callgrind can name each phase. */
__attribute__((noinline)) static int floor_decode(struct floor *f)
{
    hs_arena_reset(f->arena);
    ProtobufCMessage *m = protobuf_c_message_unpack(REQ_DESC, &f->alloc, f->p->len, f->p->data);
    if (!m)
        return -1;
    f->sink += (uintptr_t)m;
    return 0;
}

__attribute__((noinline)) static int floor_encode(struct floor *f)
{
    size_t n = protobuf_c_message_get_packed_size(f->decoded);
    if (n != f->p->len)
        return -1;
    f->sink += protobuf_c_message_pack(f->decoded, f->out) + f->out[n / 2];
    return 0;
}

__attribute__((noinline)) static int floor_both(struct floor *f)
{
    hs_arena_reset(f->arena);
    ProtobufCMessage *m = protobuf_c_message_unpack(REQ_DESC, &f->alloc, f->p->len, f->p->data);
    if (!m)
        return -1;
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n != f->p->len)
        return -1;
    f->sink += protobuf_c_message_pack(m, f->out) + f->out[n / 2];
    return 0;
}

/* For comparison: protobuf-c's default allocator, one malloc per message, and free_unpacked. */
__attribute__((noinline)) static int floor_malloc(struct floor *f)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(REQ_DESC, NULL, f->p->len, f->p->data);
    if (!m)
        return -1;
    size_t n = protobuf_c_message_get_packed_size(m);
    f->sink += protobuf_c_message_pack(m, f->out) + f->out[n / 2];
    protobuf_c_message_free_unpacked(m, NULL);
    return n == f->p->len ? 0 : -1;
}

struct phase_result {
    uint64_t iterations;
    double cpu_s;
};

/* Runs fn until `seconds` of CPU have passed, or exactly `iterations` times. */
static int run_phase(struct floor *f, int (*fn)(struct floor *), double seconds,
                     uint64_t iterations, struct phase_result *r)
{
    for (int i = 0; i < 3 && !iterations; i++) /* warm caches and the arena */
        if (fn(f))
            return -1;
    double t0 = hs_bench_cpu_s(), t = t0;
    uint64_t n = 0;
    while (iterations ? n < iterations : t - t0 < seconds) {
        for (int k = 0; k < 8 && (!iterations || n < iterations); k++, n++)
            if (fn(f))
                return -1;
        if (!iterations)
            t = hs_bench_cpu_s();
    }
    r->iterations = n;
    r->cpu_s = hs_bench_cpu_s() - t0;
    return 0;
}

static double per_million(const struct phase_result *r, uint32_t spans)
{
    return r->iterations ? r->cpu_s * 1e6 / ((double)r->iterations * spans) : 0;
}

__attribute__((noinline)) static int floor_gzip(const struct hs_bench_payload *p, int level,
                                                double seconds, uint64_t iterations,
                                                struct phase_result *r)
{
    struct hs_buf gz = {0};
    double t0 = hs_bench_cpu_s();
    uint64_t n = 0;
    while (iterations ? n < iterations : hs_bench_cpu_s() - t0 < seconds) {
        if (hs_gzip(p->data, p->len, level, &gz) != 0)
            return -1;
        n++;
    }
    r->iterations = n;
    r->cpu_s = hs_bench_cpu_s() - t0;
    printf("floor_gzip: level=%d ratio=%.2f\n", level, gz.len ? (double)p->len / gz.len : 0);
    hs_buf_free(&gz);
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = 2;
    uint64_t iterations = 0;
    uint32_t spans = HS_BENCH_SPANS_DEFAULT;
    uint64_t seed = HS_BENCH_SEED_DEFAULT;
    int gzip_level = 0;
    const char *only = "all";
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = hs_bench_opt(argc, argv, &i, "--seconds")))
            seconds = hs_bench_num("--seconds", v, 0.01, 3600);
        else if ((v = hs_bench_opt(argc, argv, &i, "--iterations")))
            iterations = (uint64_t)hs_bench_num("--iterations", v, 1, 1e12);
        else if ((v = hs_bench_opt(argc, argv, &i, "--spans")))
            spans = (uint32_t)hs_bench_num("--spans", v, 1, 1e6);
        else if ((v = hs_bench_opt(argc, argv, &i, "--seed")))
            seed = strtoull(v, NULL, 0);
        else if ((v = hs_bench_opt(argc, argv, &i, "--gzip")))
            gzip_level = (int)hs_bench_num("--gzip", v, 1, 12);
        else if ((v = hs_bench_opt(argc, argv, &i, "--only")))
            only = v;
        else {
            fputs(usage, stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }

    struct hs_bench_payload p;
    if (hs_bench_payload_build(&p, spans, seed) != 0) {
        fprintf(stderr, "bench_floor: cannot build the payload\n");
        return 1;
    }
    hs_bench_payload_print(&p, stdout);

    /* Size the arena's first chunk to one decoded request, so the loop never calls malloc. */
    struct hs_arena *probe = hs_arena_new(1 << 20, 0);
    ProtobufCAllocator pa = hs_arena_pb_allocator(probe);
    ProtobufCMessage *m = protobuf_c_message_unpack(REQ_DESC, &pa, p.len, p.data);
    if (!m) {
        fprintf(stderr, "bench_floor: protobuf-c rejects the payload\n");
        return 1;
    }
    size_t decoded_bytes = hs_arena_used(probe);
    struct floor f = {.p = &p,
                      .arena = hs_arena_new(decoded_bytes + decoded_bytes / 4, 0),
                      .out = malloc(p.len),
                      .decoded = m};
    f.alloc = hs_arena_pb_allocator(f.arena);
    printf("floor_arena: decoded_bytes=%zu decoded_bytes_per_span=%.0f\n", decoded_bytes,
           (double)decoded_bytes / spans);

    struct {
        const char *name;
        int (*fn)(struct floor *);
    } phases[] = {{"decode", floor_decode},
                  {"encode", floor_encode},
                  {"both", floor_both},
                  {"both_malloc", floor_malloc}};
    double both = -1, decode = -1, encode = -1; /* -1: not run */
    for (size_t i = 0; i < HS_ARRAY_SIZE(phases); i++) {
        if (strcmp(only, "all") != 0 && strcmp(only, phases[i].name) != 0)
            continue;
        struct phase_result r;
        if (run_phase(&f, phases[i].fn, seconds, iterations, &r) != 0) {
            fprintf(stderr, "bench_floor: %s failed\n", phases[i].name);
            return 1;
        }
        double v = per_million(&r, spans);
        if (i == 0)
            decode = v;
        else if (i == 1)
            encode = v;
        else if (i == 2)
            both = v;
        printf("floor_%s: iterations=%llu cpu_s=%.3f cpu_s_per_1M_spans=%.3f\n", phases[i].name,
               (unsigned long long)r.iterations, r.cpu_s, v);
    }
    if (gzip_level) {
        struct phase_result r;
        if (floor_gzip(&p, gzip_level, seconds, iterations, &r) != 0) {
            fprintf(stderr, "bench_floor: gzip failed\n");
            return 1;
        }
        printf("floor_gzip: iterations=%llu cpu_s=%.3f cpu_s_per_1M_spans=%.3f\n",
               (unsigned long long)r.iterations, r.cpu_s, per_million(&r, spans));
    }
    printf("floor:");
    const char *names[] = {"decode_encode", "decode", "encode"};
    double vals[] = {both, decode, encode};
    for (int i = 0; i < 3; i++)
        if (vals[i] >= 0)
            printf(" %s=%.3f", names[i], vals[i]);
    printf(" (CPU-s per 1M spans)\n");
    hs_arena_free(probe);
    hs_arena_free(f.arena);
    free(f.out);
    hs_bench_payload_free(&p);
    return f.sink == 42 ? 3 : 0; /* never; keeps sink live */
}
