/* fuzz_json_mem.c: libFuzzer target for the JSON decoders' memory: the heap one OTLP/JSON or
 * push-API JSON conversion holds at its peak, counted through ASan's allocation hooks, must stay
 * within HS_JSON_MEM_BOUND of the input, or the target aborts. Also: core/json.c's reader must
 * agree with jansson on what is JSON, and a refusal must say why. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/alloc_meter.h"
#include "core/buf.h"
#include "core/errors.h"
#include "core/json.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "receivers/pyroscope/pyroscope_int.h"

#ifndef HS_METER_ASAN
#error "fuzz_json_mem counts allocations through ASan's hooks: build it with HS_SANITIZE=ON"
#endif

/* The documented bound (docs/protocols.md, "OTLP/JSON"): the output never passes twice
 * the text, its buffer grows by doubling up to that (old and new blocks side by side for a
 * moment: 3x), and a number longer than 63 characters is copied once for strtod (1x). */
#define HS_JSON_MEM_BOUND(n) (4 * (int64_t)(n) + 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_json_mem: %s: %s\n", what, detail);
    abort();
}

static void check_peak(const char *decoder, size_t size)
{
    int64_t peak = hs_meter_peak_bytes();
    if (peak > HS_JSON_MEM_BOUND(size)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "peak heap %lld bytes for %zu bytes of input (bound %lld)",
                 (long long)peak, size, (long long)HS_JSON_MEM_BOUND(size));
        fail(decoder, msg);
    }
}

/* The widest limits the receivers' config allows: no count stops a conversion early. */
static const struct hs_otlp_limits otlp_wide = {.max_value_depth = 128};
static const struct hs_pyro_limits push_wide = {.max_labels = 1000, .max_profiles = 1000000};

static void otlp(const uint8_t *data, size_t size)
{
    struct hs_buf wire = {0};
    char err[256] = "";
    hs_meter_start();
    int rc = hs_otlp_json_to_wire((const char *)data, size, &otlp_wide, &wire, err, sizeof(err));
    hs_buf_free(&wire);
    check_peak("OTLP/JSON", size);
    if (rc && (rc == HS_ENOMEM || !err[0]))
        fail("OTLP/JSON refused without a reason", err);
}

static void push(const uint8_t *data, size_t size)
{
    struct hs_buf wire = {0};
    struct hs_pyro_fail f = {0};
    hs_meter_start();
    int rc = hs_pyro_push_json_to_wire(data, size, &push_wide, &wire, &f);
    hs_buf_free(&wire);
    check_peak("push JSON", size);
    if (rc && (f.status != 400 && f.status != 413))
        fail("push JSON refused with an unexpected status", f.msg);
}

/* jansson differs on purpose where it has limits we do not: integers past int64 (we take
 * uint64), nesting past 2048 (ours stops at 1024), NUL in keys (a key holding it names no
 * field, so it is merely unknown). And it reads a NUL byte as the end of the text, so it takes
 * "4\0" whole; we do not. */
static bool jansson_limit(const char *text)
{
    return strstr(text, "too big") || strstr(text, "overflow") || strstr(text, "NUL byte") ||
           strstr(text, "maximum parsing depth");
}

static void agree_with_jansson(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    struct hs_json_reader r;
    struct hs_json_token t;
    hs_json_reader_init(&r, (const char *)data, size, 0, true);
    int rc;
    while ((rc = hs_json_next(&r, &t)) == 0 && t.type != HS_JSON_END)
        ;
    if (j && rc && rc != HS_E2BIG && !memchr(data, 0, size))
        fail("jansson accepts what the reader refuses", r.err);
    if (!j && rc == 0 && !jansson_limit(je.text))
        fail("the reader accepts what jansson refuses", je.text);
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    otlp(data, size);
    push(data, size);
    agree_with_jansson(data, size);
    return 0;
}
