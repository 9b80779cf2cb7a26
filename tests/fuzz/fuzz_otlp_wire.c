/* fuzz_otlp_wire.c: libFuzzer target, differential: the OTLP wire scanner must accept exactly
 * what protobuf-c 1.4 accepts, less what our own extra rules refuse (tests/unit/otlp_wire_ref.h),
 * count the same spans, and hand out span views that protobuf-c decodes to the same values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/errors.h"
#include "pdata/otlp_wire.h"
#include "tests/unit/otlp_wire_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
    const uint8_t *data;
    size_t size;
    uint32_t visited;
};

static void disagree(const char *what, const struct hs_otlp_scan *res)
{
    fprintf(stderr, "fuzz_otlp_wire: %s (scanner: %s)\n", what, res ? res->err : "-");
    abort();
}

static bool same(struct hs_str s, const void *p, size_t n)
{
    return s.len == n && (n == 0 || memcmp(s.ptr, p, n) == 0);
}

/* protobuf-c's strings end at their first NUL; the wire's may hold more after it. */
static bool same_cstr(struct hs_str s, const char *c)
{
    size_t n = strlen(c);
    return n <= s.len && (n == 0 || memcmp(s.ptr, c, n) == 0) && (n == s.len || s.ptr[n] == 0);
}

/* Every span the scanner hands out has been checked whole, so protobuf-c must decode its bytes,
 * to the same values. */
static int visit(void *ud, const struct hs_span_view *v)
{
    struct input *in = ud;
    in->visited++;
    if (v->offset > in->size || v->len > in->size - v->offset)
        disagree("span view out of the input", NULL);
    struct hs_arena *a = hs_arena_new(4096, 0);
    ProtobufCAllocator alloc = hs_arena_pb_allocator(a);
    Opentelemetry__Proto__Trace__V1__Span *s =
        opentelemetry__proto__trace__v1__span__unpack(&alloc, v->len, in->data + v->offset);
    if (!s)
        disagree("protobuf-c rejects a span the scanner accepted", NULL);
    if (!same(v->trace_id, s->trace_id.data, s->trace_id.len) ||
        !same(v->span_id, s->span_id.data, s->span_id.len) ||
        !same(v->parent_span_id, s->parent_span_id.data, s->parent_span_id.len) ||
        !same_cstr(v->name, s->name) || v->kind != (uint32_t)s->kind ||
        v->start_ns != s->start_time_unix_nano || v->end_ns != s->end_time_unix_nano ||
        v->attributes != s->n_attributes || v->events != s->n_events || v->links != s->n_links)
        disagree("a span view differs from protobuf-c's decoding", NULL);
    hs_arena_free(a);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size, 0};
    struct hs_otlp_scan res;
    int rc = hs_otlp_traces_scan(data, size, NULL, visit, &in, &res);
    struct ref_result r = ref_check(data, size, 32);
    if ((rc == 0) != (r.verdict == REF_ACCEPT)) {
        char what[96];
        snprintf(what, sizeof(what), "scanner %s, reference verdict %d", rc ? "rejects" : "accepts",
                 (int)r.verdict);
        disagree(what, &res);
    }
    if (rc == 0 && (res.spans != r.spans || res.scope_spans != r.scope_spans ||
                    res.resource_spans != r.resource_spans || in.visited != res.spans))
        disagree("counts differ", &res);
    if (rc != 0 && (res.err[0] == '\0' || res.err_offset > size))
        disagree("an error without a message or with an offset past the input", &res);
    if (r.verdict == REF_REJECT_DEPTH && rc != HS_E2BIG)
        disagree("nesting over the limit, but not HS_E2BIG", &res);
    return 0;
}
