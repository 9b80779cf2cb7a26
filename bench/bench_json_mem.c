/* bench_json_mem.c: the heap the JSON decoders hold at their peak, per byte of (decompressed)
 * body, on hostile shapes (many empty objects or arrays, deep nesting, tiny strings and keys, one
 * long string, many attributes) and on SDK-shaped requests: OTLP/JSON and the push API's JSON. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/alloc_meter.h"
#include "bench/bench_common.h"
#include "bench/otlp_payload.h"
#include "bench/pprof_payload.h"
#include "core/buf.h"
#include "core/errors.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "receivers/pyroscope/pyroscope_int.h"

static const char usage[] =
    "usage: bench_json_mem [--size BYTES] [--only NAME]\n"
    "  --size BYTES  decompressed body size of each hostile shape (default 8388608)\n"
    "  --only NAME   one shape (see the names printed)\n"
    "Prints, per shape: body bytes; heap bytes held at the decoder's peak and their ratio to the\n"
    "body, with the widest limits the config allows (what the decoder itself holds) and with\n"
    "the receivers' defaults (which stop hostile counts early); the answer with the defaults.\n"
    "Push requests are decoded whole: profiles that pass are also summarized (pdata/pprof.c).\n";

enum target { OTLP, PUSH };

/* Appends `item` (with a comma between) until the body would pass `size`, inside head/tail. */
static void repeat(struct hs_buf *b, size_t size, const char *head, const char *item,
                   const char *tail)
{
    hs_buf_append(b, head, strlen(head));
    size_t n = strlen(item), end = strlen(tail);
    for (bool first = true; b->len + n + 1 + end <= size; first = false) {
        if (!first)
            hs_buf_putc(b, ',');
        hs_buf_append(b, item, n);
    }
    hs_buf_append(b, tail, end);
}

static void gen_empty_objects(struct hs_buf *b, size_t size)
{
    repeat(b, size, "{\"resourceSpans\":[", "{}", "]}");
}

static void gen_empty_arrays(struct hs_buf *b, size_t size)
{
    repeat(b, size, "{\"unknownKey\":[", "[]", "]}");
}

static void gen_deep_arrays(struct hs_buf *b, size_t size)
{
    char item[1001];
    memset(item, '[', 250);
    memset(item + 250, ']', 250);
    item[500] = '\0';
    repeat(b, size, "{\"unknownKey\":[", item, "]}");
}

static void gen_tiny_strings(struct hs_buf *b, size_t size)
{
    repeat(b, size, "{\"unknownKey\":[", "\"\"", "]}");
}

static void gen_tiny_keys(struct hs_buf *b, size_t size)
{
    hs_buf_printf(b, "{\"unknownKey\":{");
    for (uint32_t i = 0; b->len + 20 < size; i++)
        hs_buf_printf(b, "%s\"%x\":0", i ? "," : "", i);
    hs_buf_printf(b, "}}");
}

static void gen_long_string(struct hs_buf *b, size_t size)
{
    hs_buf_printf(b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"k\",\"value\":"
                     "{\"stringValue\":\"");
    while (b->len + 20 < size)
        hs_buf_putc(b, 'a');
    hs_buf_printf(b, "\"}}]}}]}");
}

static void gen_many_attributes(struct hs_buf *b, size_t size)
{
    repeat(b, size, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[",
           "{\"key\":\"a\",\"value\":{\"intValue\":\"1\"}}", "]}}]}");
}

/* What an OpenTelemetry SDK sends: bench/otlp_payload.h's spans, as OTLP/JSON. */
static void gen_sdk_spans(struct hs_buf *b, size_t size)
{
    struct hs_bench_payload p;
    uint32_t spans = (uint32_t)(size / 1100); /* ~1.1 KB of JSON per span */
    if (hs_bench_payload_build(&p, spans ? spans : 1, HS_BENCH_SEED_DEFAULT) != 0 ||
        hs_otlp_wire_to_json(p.data, p.len, b) != 0)
        abort();
    hs_bench_payload_free(&p);
}

static void gen_push_empty_series(struct hs_buf *b, size_t size)
{
    repeat(b, size, "{\"series\":[", "{}", "]}");
}

static void gen_push_empty_labels(struct hs_buf *b, size_t size)
{
    repeat(b, size, "{\"series\":[{\"labels\":[", "{}", "]}]}");
}

static void gen_push_tiny_strings(struct hs_buf *b, size_t size)
{
    repeat(b, size, "{\"unknownKey\":[", "\"\"", "]}");
}

/* What Alloy would send as JSON: one series per Go CPU profile, base64 in rawProfile. */
static void gen_push_profiles(struct hs_buf *b, size_t size)
{
    struct hs_pprof_payload_opts o = hs_pprof_payload_go_cpu();
    struct hs_pprof_payload p;
    hs_pprof_payload_build(&o, &p);
    hs_buf_printf(b, "{\"series\":[");
    for (int i = 0; i < 1000 && b->len + p.gz_len * 4 / 3 + 300 < size; i++) {
        hs_buf_printf(b,
                      "%s{\"labels\":[{\"name\":\"__name__\",\"value\":\"process_cpu\"},"
                      "{\"name\":\"service_name\",\"value\":\"svc%d\"}],"
                      "\"samples\":[{\"rawProfile\":\"",
                      i ? "," : "", i);
        hs_buf_put_base64(b, p.gz, p.gz_len);
        hs_buf_printf(b, "\"}]}");
    }
    hs_buf_printf(b, "]}");
    hs_pprof_payload_free(&p);
}

struct shape {
    const char *name;
    enum target target;
    void (*gen)(struct hs_buf *b, size_t size);
};

static const struct shape shapes[] = {
    {"otlp_empty_objects", OTLP, gen_empty_objects},
    {"otlp_empty_arrays", OTLP, gen_empty_arrays},
    {"otlp_deep_arrays", OTLP, gen_deep_arrays},
    {"otlp_tiny_strings", OTLP, gen_tiny_strings},
    {"otlp_tiny_keys", OTLP, gen_tiny_keys},
    {"otlp_long_string", OTLP, gen_long_string},
    {"otlp_many_attributes", OTLP, gen_many_attributes},
    {"otlp_sdk_spans", OTLP, gen_sdk_spans},
    {"push_empty_series", PUSH, gen_push_empty_series},
    {"push_empty_labels", PUSH, gen_push_empty_labels},
    {"push_tiny_strings", PUSH, gen_push_tiny_strings},
    {"push_profiles", PUSH, gen_push_profiles},
};

/* The receivers' defaults, and the widest their config allows (what the decoder itself holds
 * when no count stops it early). */
static const struct hs_otlp_limits otlp_limits[2] = {
    {.max_spans = 100000, .max_attributes = 1024, .max_value_depth = 32},
    {.max_value_depth = 128},
};

static const struct hs_pyro_limits push_limits[2] = {
    {.pprof = {.max_decompressed = 16u << 20,
               .max_samples = 16000,
               .max_sample_labels = 64,
               .max_stack_depth = 1024},
     .max_labels = 30,
     .max_profiles = 1000},
    {.pprof = {.max_decompressed = 1u << 30,
               .max_samples = 10000000,
               .max_sample_labels = 100000,
               .max_stack_depth = 1000000},
     .max_labels = 1000,
     .max_profiles = 1000000},
};

/* Decodes body once under the meter with the defaults (wide = false) or the widest limits;
 * returns the peak and writes the answer into `answer`. */
static int64_t measure(const struct shape *s, const struct hs_buf *body, bool wide, char *answer,
                       size_t len)
{
    if (s->target == OTLP) {
        struct hs_buf wire = {0};
        char err[256] = "";
        hs_meter_start();
        int rc = hs_otlp_json_to_wire((const char *)body->data, body->len, &otlp_limits[wide],
                                      &wire, err, sizeof(err));
        hs_buf_free(&wire);
        int64_t peak = hs_meter_peak_bytes();
        snprintf(answer, len, "%s%s%.90s", rc ? hs_err_name(rc) : "ok", rc ? ": " : "", err);
        return peak;
    }
    struct hs_profiles *b = hs_profiles_new(NULL);
    struct hs_pyro_fail f = {0};
    hs_meter_start();
    int rc = hs_pyro_push_decode(body->data, body->len, true, &push_limits[wide], b, &f);
    hs_profiles_unref(b);
    int64_t peak = hs_meter_peak_bytes();
    if (rc)
        snprintf(answer, len, "%d %s: %.90s", f.status, f.reason, f.msg);
    else
        snprintf(answer, len, "ok");
    return peak;
}

int main(int argc, char **argv)
{
    size_t size = 8u << 20;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = hs_bench_opt(argc, argv, &i, "--size")))
            size = (size_t)hs_bench_num("--size", v, 64, 1u << 30);
        else if ((v = hs_bench_opt(argc, argv, &i, "--only")))
            only = v;
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    printf("%-22s %10s %12s %7s %12s %7s  %s\n", "shape", "body", "peak_wide", "ratio", "peak_dflt",
           "ratio", "answer with the default limits");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        const struct shape *s = &shapes[i];
        if (only && strcmp(only, s->name) != 0)
            continue;
        struct hs_buf body = {0};
        s->gen(&body, size);
        char answer[200];
        int64_t wide = measure(s, &body, true, answer, sizeof(answer));
        int64_t dflt = measure(s, &body, false, answer, sizeof(answer));
        printf("%-22s %10zu %12lld %7.2f %12lld %7.2f  %s\n", s->name, body.len, (long long)wide,
               (double)wide / (double)body.len, (long long)dflt, (double)dflt / (double)body.len,
               answer);
        fflush(stdout);
        hs_buf_free(&body);
    }
    return 0;
}
