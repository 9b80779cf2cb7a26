/* bench_pprof.c: hs_profile_summarize (gunzip, protobuf-c decode, checks, summary) on SDK-shaped
 * profiles from pprof_payload.h, and in the same run the same content as an OTLP profiles request
 * (otlp_profiles_payload.h) through hs_otlp_profiles_decode, then its conversion to pprof for the
 * Pyroscope exporter: profiles/s, MiB/s of input, CPU-s per profile and peak RSS, medians of runs.
 * `--seeds DIR` writes the fuzz seeds (tests/fuzz/corpus/pprof/) instead; `--otlp-seeds DIR`
 * those of fuzz_otlp_profiles. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/bench_common.h"
#include "bench/otlp_profiles_payload.h"
#include "bench/pprof_payload.h"
#include "core/errors.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"
#include "push/v1/push.pb-c.h"

static const char usage[] =
    "usage: bench_pprof [--seconds S] [--runs N] [--only node|go] [--samples N] [--functions N]\n"
    "                   [--seeds DIR] [--otlp-seeds DIR] [--write DIR]\n"
    "  --seconds S   CPU seconds per run (default 0.5)\n"
    "  --runs N      runs per profile shape; the median is printed (default 5)\n"
    "  --only SHAPE  node (wall, ~15 s at 100 Hz) or go (cpu, 10 s)\n"
    "  --samples N   override the samples of both shapes\n"
    "  --functions N override the functions of both shapes\n"
    "  --seeds DIR   write small fuzz seeds for fuzz_pprof into DIR and exit\n"
    "  --otlp-seeds DIR  the same for fuzz_otlp_profiles (protobuf seeds)\n"
    "  --write DIR   write the payloads for bench/profiles into DIR and exit: <shape>.pprof.gz\n"
    "                (what an SDK posts to /ingest), <shape>.push (a PushRequest holding it) and\n"
    "                <shape>.otlp (the same content as an OTLP profiles request)\n";

static const struct hs_pprof_limits limits = {.max_decompressed = 16u << 20,
                                              .max_samples = 16000,
                                              .max_sample_labels = 64,
                                              .max_stack_depth = 1024};

static const struct hs_otlp_profiles_limits otlp_limits = {.max_decompressed = 16u << 20,
                                                           .max_profiles = 1000,
                                                           .max_samples = 16000,
                                                           .max_table_entries = 1u << 20,
                                                           .max_stack_depth = 1024,
                                                           .max_attributes = 128};

static uint64_t sink;

/* What a receiver does per profile: copy the body in, summarize, and (here) drop it. `shape`,
 * when given, receives the summary's counts. */
static void summarize_once(const struct hs_pprof_payload *pl, uint32_t shape[3])
{
    char err[256];
    struct hs_profile *p = hs_profile_new();
    if (!p || hs_profile_set_raw(p, pl->gz, pl->gz_len) != 0)
        abort();
    int rc = hs_profile_summarize(p, &limits, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "bench_pprof: summarize failed: %s: %s\n", hs_err_name(rc), err);
        exit(1);
    }
    if (shape) {
        shape[0] = p->summary.nfuncs;
        shape[1] = p->summary.nstacks;
        shape[2] = p->summary.nspans;
    }
    sink += p->summary.nstacks + p->summary.nfuncs + (uint64_t)p->summary.totals[0];
    hs_profile_free(p);
}

/* What the otlp receiver does per request: copy the body in, decode, check, summarize every
 * profile; with `convert`, also what a pyroscope exporter adds: the pprof of each. */
static void otlp_once(const struct hs_buf *req, bool convert, uint32_t shape[2])
{
    char err[256];
    struct hs_profiles *b = hs_profiles_new(NULL);
    int rc = b ? hs_otlp_profiles_decode(b, req->data, req->len, &otlp_limits, err, sizeof(err))
               : HS_ENOMEM;
    if (rc == 0 && convert)
        rc = hs_profiles_to_pprof(b, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "bench_pprof: OTLP decode failed: %s: %s\n", hs_err_name(rc), err);
        exit(1);
    }
    if (shape) {
        shape[0] = b->count;
        shape[1] = b->count ? b->items[b->count - 1]->summary.nspans : 0;
    }
    for (uint32_t i = 0; i < b->count; i++)
        sink += b->items[i]->summary.nstacks + (uint64_t)b->items[i]->summary.totals[0] +
                b->items[i]->raw_len;
    hs_profiles_unref(b);
}

/* Median profiles/s and CPU-s per profile of `once` over `runs` runs of `seconds` CPU each. */
static void measure(void (*once)(const void *), const void *arg, double seconds, int runs,
                    double *pps, double *cpu)
{
    double *rate = calloc((size_t)runs, sizeof(double));
    double *cpu_per = calloc((size_t)runs, sizeof(double));
    for (int r = 0; r < runs; r++) {
        double c0 = hs_bench_cpu_s(), w0 = hs_bench_mono_s(), c1;
        uint64_t n = 0;
        do {
            once(arg);
            n++;
        } while ((c1 = hs_bench_cpu_s()) - c0 < seconds);
        rate[r] = (double)n / (hs_bench_mono_s() - w0);
        cpu_per[r] = (c1 - c0) / (double)n;
    }
    qsort(rate, (size_t)runs, sizeof(double), hs_bench_cmp_double);
    qsort(cpu_per, (size_t)runs, sizeof(double), hs_bench_cmp_double);
    *pps = rate[runs / 2];
    *cpu = cpu_per[runs / 2];
    free(rate);
    free(cpu_per);
}

static void pprof_once_cb(const void *pl)
{
    summarize_once(pl, NULL);
}

static void otlp_decode_cb(const void *req)
{
    otlp_once(req, false, NULL);
}

static void otlp_convert_cb(const void *req)
{
    otlp_once(req, true, NULL);
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void bench_shape(const char *label, const struct hs_pprof_payload_opts *o, double seconds,
                        int runs)
{
    struct hs_pprof_payload pl;
    hs_pprof_payload_build(o, &pl);
    struct hs_buf req = {0};
    hs_otlp_profiles_from_pprof(pl.raw, pl.raw_len, "bench", &req);
    uint32_t shape[3], oshape[2];
    summarize_once(&pl, shape); /* warm up, and prove it decodes */
    otlp_once(&req, true, oshape);
    printf("%s: %u samples, %u functions, %u locations; pprof %zu bytes gzipped, %zu raw; "
           "OTLP %zu bytes (%u profiles, one per sample type)\n"
           "  summary: %u functions, %u distinct stacks, %u spans\n",
           label, pl.samples, pl.functions, pl.locations, pl.gz_len, pl.raw_len, req.len, oshape[0],
           shape[0], shape[1], shape[2]);
    double pps, cpu;
    measure(pprof_once_cb, &pl, seconds, runs, &pps, &cpu);
    printf("  pprof  summarize:        %7.0f profiles/s, %6.1f MiB/s gzipped (%.1f MiB/s raw), "
           "%.3f ms CPU per profile\n",
           pps, pps * (double)pl.gz_len / (1 << 20), pps * (double)pl.raw_len / (1 << 20),
           cpu * 1e3);
    measure(otlp_decode_cb, &req, seconds, runs, &pps, &cpu);
    printf("  OTLP   decode+summarize: %7.0f profiles/s, %6.1f MiB/s,                        "
           "%.3f ms CPU per profile\n",
           pps, pps * (double)req.len / (1 << 20), cpu * 1e3);
    measure(otlp_convert_cb, &req, seconds, runs, &pps, &cpu);
    printf("  OTLP   + pprof for Pyroscope: %5.0f profiles/s,                                 "
           "%.3f ms CPU per profile\n",
           pps, cpu * 1e3);
    printf("  (a profile: one upload's content, %u sample types; median of %d runs; peak RSS "
           "%.1f MiB)\n",
           oshape[0], runs, (double)peak_rss_kib() / 1024);
    hs_buf_free(&req);
    hs_pprof_payload_free(&pl);
}

/* fuzz_pprof reads its first byte as the mode: even = pprof bytes, odd = folded text. */
static void write_seed(const char *dir, const char *name, uint8_t mode, const void *data,
                       size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(&mode, 1, 1, f) != 1 || (len && fwrite(data, 1, len, f) != len) ||
        fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    printf("%s: %zu bytes\n", path, len + 1);
}

static void write_seeds(const char *dir)
{
    struct hs_pprof_payload_opts node = hs_pprof_payload_node_wall(),
                                 go = hs_pprof_payload_go_cpu();
    node.functions = 12, node.samples = 16, node.min_depth = 2, node.max_depth = 6;
    node.spans = 3;
    go.functions = 16, go.samples = 12, go.min_depth = 3, go.max_depth = 8, go.spans = 2;
    struct hs_pprof_payload a, b;
    hs_pprof_payload_build(&node, &a);
    hs_pprof_payload_build(&go, &b);
    write_seed(dir, "node-wall.pb.gz", 0, a.gz, a.gz_len);
    write_seed(dir, "node-wall.pb", 0, a.raw, a.raw_len);
    write_seed(dir, "go-cpu.pb.gz", 0, b.gz, b.gz_len);
    write_seed(dir, "go-cpu.pb", 0, b.raw, b.raw_len);
    static const char folded[] = "main;handler;db.query 120\n"
                                 "main;handler;render;template.exec 40\r\n"
                                 "\n"
                                 "main;gc 3\n"
                                 "main;fib;fib;fib 7\n";
    write_seed(dir, "stacks.folded", 1, folded, sizeof(folded) - 1);
    hs_pprof_payload_free(&a);
    hs_pprof_payload_free(&b);
}

/* fuzz_otlp_profiles reads its first byte as the mode: even = protobuf, odd = JSON. */
static void write_otlp_seeds(const char *dir)
{
    struct hs_pprof_payload_opts node = hs_pprof_payload_node_wall(),
                                 go = hs_pprof_payload_go_cpu();
    node.functions = 12, node.samples = 16, node.min_depth = 2, node.max_depth = 6;
    node.spans = 3;
    go.functions = 16, go.samples = 12, go.min_depth = 3, go.max_depth = 8, go.spans = 2;
    struct hs_pprof_payload a, b;
    hs_pprof_payload_build(&node, &a);
    hs_pprof_payload_build(&go, &b);
    struct hs_buf req = {0};
    hs_otlp_profiles_from_pprof(a.raw, a.raw_len, "seed-node", &req);
    write_seed(dir, "node-wall.otlp.pb", 0, req.data, req.len);
    hs_otlp_profiles_from_pprof(b.raw, b.raw_len, "seed-go", &req);
    write_seed(dir, "go-cpu.otlp.pb", 0, req.data, req.len);
    hs_buf_free(&req);
    hs_pprof_payload_free(&a);
    hs_pprof_payload_free(&b);
}

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    printf("%s: %zu bytes\n", path, len);
}

/* A push.v1.PushRequest of one series (labels as the Go SDK would send through Alloy) holding
 * one gzipped profile. */
static void write_push(const char *dir, const char *name, const char *service, const char *type,
                       const struct hs_pprof_payload *pl)
{
    Types__V1__LabelPair l[3] = {TYPES__V1__LABEL_PAIR__INIT, TYPES__V1__LABEL_PAIR__INIT,
                                 TYPES__V1__LABEL_PAIR__INIT};
    Types__V1__LabelPair *lp[3] = {&l[0], &l[1], &l[2]};
    l[0].name = "__name__", l[0].value = (char *)type;
    l[1].name = "service_name", l[1].value = (char *)service;
    l[2].name = "env", l[2].value = "bench";
    Push__V1__RawSample sample = PUSH__V1__RAW_SAMPLE__INIT, *sp = &sample;
    sample.raw_profile.data = pl->gz;
    sample.raw_profile.len = pl->gz_len;
    Push__V1__RawProfileSeries series = PUSH__V1__RAW_PROFILE_SERIES__INIT, *ser = &series;
    series.n_labels = 3;
    series.labels = lp;
    series.n_samples = 1;
    series.samples = &sp;
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    req.n_series = 1;
    req.series = &ser;
    size_t n = push__v1__push_request__get_packed_size(&req);
    uint8_t *buf = malloc(n);
    if (!buf)
        abort();
    push__v1__push_request__pack(&req, buf);
    write_file(dir, name, buf, n);
    free(buf);
}

static void write_payloads(const char *dir)
{
    struct hs_pprof_payload_opts node = hs_pprof_payload_node_wall(),
                                 go = hs_pprof_payload_go_cpu();
    struct hs_pprof_payload a, b;
    hs_pprof_payload_build(&node, &a);
    hs_pprof_payload_build(&go, &b);
    write_file(dir, "node.pprof.gz", a.gz, a.gz_len);
    write_push(dir, "node.push", "bench-node", "wall", &a);
    write_file(dir, "go.pprof.gz", b.gz, b.gz_len);
    write_push(dir, "go.push", "bench-go", "process_cpu", &b);
    struct hs_buf req = {0};
    hs_otlp_profiles_from_pprof(a.raw, a.raw_len, "bench-node", &req);
    write_file(dir, "node.otlp", req.data, req.len);
    hs_otlp_profiles_from_pprof(b.raw, b.raw_len, "bench-go", &req);
    write_file(dir, "go.otlp", req.data, req.len);
    hs_buf_free(&req);
    hs_pprof_payload_free(&a);
    hs_pprof_payload_free(&b);
}

int main(int argc, char **argv)
{
    double seconds = 0.5;
    int runs = 5;
    const char *only = NULL, *v;
    uint32_t samples = 0, functions = 0;
    for (int i = 1; i < argc; i++) {
        if ((v = hs_bench_opt(argc, argv, &i, "--seconds")))
            seconds = hs_bench_num("--seconds", v, 0.01, 600);
        else if ((v = hs_bench_opt(argc, argv, &i, "--runs")))
            runs = (int)hs_bench_num("--runs", v, 1, 1000);
        else if ((v = hs_bench_opt(argc, argv, &i, "--samples")))
            samples = (uint32_t)hs_bench_num("--samples", v, 1, 1e6);
        else if ((v = hs_bench_opt(argc, argv, &i, "--functions")))
            functions = (uint32_t)hs_bench_num("--functions", v, 8, 1e6);
        else if ((v = hs_bench_opt(argc, argv, &i, "--only")))
            only = v;
        else if ((v = hs_bench_opt(argc, argv, &i, "--write"))) {
            write_payloads(v);
            return 0;
        } else if ((v = hs_bench_opt(argc, argv, &i, "--seeds"))) {
            write_seeds(v);
            return 0;
        } else if ((v = hs_bench_opt(argc, argv, &i, "--otlp-seeds"))) {
            write_otlp_seeds(v);
            return 0;
        } else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (only && strcmp(only, "node") != 0 && strcmp(only, "go") != 0) {
        fputs(usage, stderr);
        return 2;
    }
    struct hs_pprof_payload_opts node = hs_pprof_payload_node_wall(),
                                 go = hs_pprof_payload_go_cpu();
    if (samples)
        node.samples = go.samples = samples;
    if (functions)
        node.functions = go.functions = functions;
    if (!only || strcmp(only, "node") == 0)
        bench_shape("node wall 15 s", &node, seconds, runs);
    if (!only || strcmp(only, "go") == 0)
        bench_shape("go cpu 10 s", &go, seconds, runs);
    return sink == 42 ? 1 : 0; /* sink is read, so the work is not optimized away */
}
