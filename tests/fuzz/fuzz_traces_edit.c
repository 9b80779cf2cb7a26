/* fuzz_traces_edit.c: libFuzzer target: every request the scanner accepts gets a pseudo-random
 * set of edits (derived from its bytes); the result must scan cleanly, keep exactly the expected
 * spans in order, with the attributes appended and untouched spans byte-identical. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/errors.h"
#include "pdata/otlp_wire.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SPANS 512

struct spans {
    uint32_t n;
    struct hs_span_view v[MAX_SPANS];
};

static int collect(void *ud, const struct hs_span_view *v)
{
    struct spans *s = ud;
    if (s->n == MAX_SPANS)
        return 1; /* enough: the input is skipped */
    s->v[s->n++] = *v;
    return 0;
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz_traces_edit: %s\n", what);
    abort();
}

static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* What was planned for one input span. */
struct plan {
    bool listed, removed;
    size_t attrs_at, attrs_len;
    uint32_t attrs_n;
};

static uint32_t add_attrs(struct hs_buf *b, uint64_t *rng)
{
    static const char *const arr[] = {"main", "", "runtime.mallocgc"};
    static char text[300];
    uint32_t n = 1 + (uint32_t)(next_rand(rng) % 3);
    for (uint32_t i = 0; i < n; i++) {
        int rc = 0;
        uint64_t r = next_rand(rng);
        switch (r % 5) {
        case 0: { /* lengths around 127 and 255 move length prefixes across a byte */
            size_t len = (size_t)(r >> 8) % sizeof(text);
            memset(text, 'x', len);
            rc = hs_attr_string(b, "hs.fuzz.s", text, len);
            break;
        }
        case 1:
            rc = hs_attr_int(b, "hs.fuzz.i", (int64_t)(r >> 3) * ((r & 8) ? -1 : 1));
            break;
        case 2:
            rc = hs_attr_bool(b, "hs.fuzz.b", r & 8);
            break;
        case 3:
            rc = hs_attr_double(b, "hs.fuzz.d", (double)(r >> 11) / 7.0);
            break;
        default:
            rc = hs_attr_string_array(b, "hs.fuzz.a", arr, (r >> 8) % 4);
        }
        if (rc)
            die("attribute encoding failed");
    }
    return n;
}

static bool same(struct hs_str a, struct hs_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* The output's spans against the plan, in order. */
static void check_output(const struct hs_traces *out, const uint8_t *data, const struct spans *in,
                         const struct plan *plan, bool keep_unlisted, uint32_t expected)
{
    static struct spans got;
    struct hs_otlp_scan res;
    got.n = 0;
    if (hs_otlp_traces_scan(out->data, out->len, NULL, collect, &got, &res))
        die(res.err);
    if (res.spans != expected || out->spans != expected || got.n != expected ||
        out->resource_spans != res.resource_spans)
        die("counts differ");
    uint32_t j = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        if (plan[i].removed || (!plan[i].listed && !keep_unlisted))
            continue;
        const struct hs_span_view *a = &in->v[i], *b = &got.v[j++];
        if (!same(a->trace_id, b->trace_id) || !same(a->span_id, b->span_id) ||
            !same(a->name, b->name) || b->attributes != a->attributes + plan[i].attrs_n)
            die("a span differs");
        if (plan[i].attrs_n == 0 &&
            (a->len != b->len || memcmp(data + a->offset, out->data + b->offset, a->len) != 0))
            die("an untouched span changed");
        if (!same(a->service_name, b->service_name) || !same(a->scope_name, b->scope_name))
            die("a span moved to another resource or scope");
    }
}

/* The lookup agrees with the scanner on service.name (the first entry, if a string) whenever
 * the scanner found it in view.resource: a Resource given twice is merged, and view.resource is
 * only its last occurrence, so a name from an earlier one is out of the lookup's reach. */
static void check_lookup(const struct spans *in)
{
    for (uint32_t i = 0; i < in->n; i++) {
        struct hs_str r = in->v[i].resource, name = in->v[i].service_name, v;
        if (name.len == 0 || name.ptr < r.ptr || name.ptr + name.len > r.ptr + r.len)
            continue;
        if (!hs_attrs_find_str(r, 1, "service.name", &v) || v.ptr != name.ptr || v.len != name.len)
            die("service.name lookup differs from the scanner");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct spans in;
    static struct plan plan[MAX_SPANS];
    static struct hs_span_edit edits[MAX_SPANS];
    struct hs_otlp_scan res;
    in.n = 0;
    if (hs_otlp_traces_scan(data, size, NULL, collect, &in, &res) != 0)
        return 0;
    check_lookup(&in);

    uint64_t rng = 0xcbf29ce484222325ull; /* FNV-1a of the input seeds the choices */
    for (size_t i = 0; i < size; i++)
        rng = (rng ^ data[i]) * 0x100000001b3ull;
    rng |= 1;
    bool keep_unlisted = next_rand(&rng) & 1;
    struct hs_buf attrs = {0};
    uint32_t expected = 0, n = 0;
    for (uint32_t i = 0; i < in.n; i++) {
        uint64_t r = next_rand(&rng) % 4;
        plan[i] = (struct plan){.listed = r != 0, .removed = r == 3};
        if (r == 2) {
            plan[i].attrs_at = attrs.len;
            plan[i].attrs_n = add_attrs(&attrs, &rng);
            plan[i].attrs_len = attrs.len - plan[i].attrs_at;
        }
        if (!plan[i].removed && (plan[i].listed || keep_unlisted))
            expected++;
    }
    for (uint32_t i = 0; i < in.n; i++) { /* pointers only now: the buffer has stopped moving */
        if (!plan[i].listed)
            continue;
        edits[n++] =
            (struct hs_span_edit){.offset = in.v[i].offset,
                                  .attrs = plan[i].attrs_n ? attrs.data + plan[i].attrs_at : NULL,
                                  .attrs_len = plan[i].attrs_len,
                                  .remove = plan[i].removed};
    }

    struct hs_traces batch = {.refs = 1,
                              .data = (uint8_t *)data,
                              .len = size,
                              .cap = size,
                              .spans = res.spans,
                              .resource_spans = res.resource_spans};
    struct hs_traces *out;
    if (hs_traces_edit(&batch, edits, n, keep_unlisted, &out) != 0)
        die("an edit of valid offsets failed");
    if (expected == 0 && out)
        die("a batch without spans");
    if (expected)
        check_output(out, data, &in, plan, keep_unlisted, expected);
    hs_traces_unref(out);

    if (in.n) { /* one byte into a span names no span */
        struct hs_span_edit bad = {.offset = in.v[in.n - 1].offset + 1};
        if (hs_traces_edit(&batch, &bad, 1, true, &out) != HS_EINVAL || out)
            die("a bad offset was taken");
    }
    hs_buf_free(&attrs);
    return 0;
}
