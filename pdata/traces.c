/* traces.c: the refcounted batch of OTLP wire bytes. Appending is concatenation, because an
 * ExportTraceServiceRequest is one repeated field and protobuf merges repeated fields. */
#include "pdata/traces.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"

struct hs_traces *hs_traces_new(size_t cap)
{
    uint8_t *data = NULL;
    if (cap && !(data = malloc(cap)))
        return NULL;
    struct hs_traces *t = hs_traces_wrap(data, 0, cap, 0, 0);
    if (!t)
        free(data);
    return t;
}

struct hs_traces *hs_traces_wrap(uint8_t *data, size_t len, size_t cap, uint32_t spans,
                                 uint32_t resource_spans)
{
    /* on failure `data` stays the caller's, so the receiver can free its body as usual */
    struct hs_traces *t = malloc(sizeof(*t));
    if (!t)
        return NULL;
    *t = (struct hs_traces){.refs = 1,
                            .data = data,
                            .len = len,
                            .cap = cap,
                            .spans = spans,
                            .resource_spans = resource_spans};
    return t;
}

/* References are not atomic: a batch is shared only within one worker's loop (fan-out); a
 * hand-off to another worker moves the reference instead of sharing it. */
struct hs_traces *hs_traces_ref(struct hs_traces *t)
{
    t->refs++;
    return t;
}

void hs_traces_unref(struct hs_traces *t)
{
    if (!t || --t->refs > 0)
        return;
    free(t->data);
    free(t);
}

static void *ops_ref(void *t)
{
    return hs_traces_ref(t);
}

static void ops_unref(void *t)
{
    hs_traces_unref(t);
}

const struct hs_batch_ops hs_traces_ops = {HS_SIGNAL_TRACES, ops_ref, ops_unref};

int hs_traces_make_writable(struct hs_traces **t)
{
    struct hs_traces *old = *t;
    if (old->refs == 1)
        return 0;
    uint8_t *data = NULL;
    if (old->len && !(data = malloc(old->len)))
        return HS_ENOMEM;
    if (old->len)
        memcpy(data, old->data, old->len);
    struct hs_traces *copy =
        hs_traces_wrap(data, old->len, old->len, old->spans, old->resource_spans);
    if (!copy) {
        free(data);
        return HS_ENOMEM;
    }
    hs_traces_copy_tenant(copy, old);
    hs_traces_unref(old);
    *t = copy;
    return 0;
}

int hs_traces_append(struct hs_traces *dst, const struct hs_traces *src)
{
    if (!hs_traces_same_tenant(dst, src))
        return HS_EINVAL;
    if (src->len == 0) {
        dst->spans += src->spans;
        dst->resource_spans += src->resource_spans;
        return 0;
    }
    if (dst->cap - dst->len < src->len) {
        if (src->len > SIZE_MAX / 2 - dst->len)
            return HS_ENOMEM;
        /* double, so a batch built from many small requests costs amortized O(bytes) */
        size_t cap = HS_MAX(dst->cap * 2, dst->len + src->len);
        uint8_t *p = realloc(dst->data, cap);
        if (!p)
            return HS_ENOMEM;
        dst->data = p;
        dst->cap = cap;
    }
    memcpy(dst->data + dst->len, src->data, src->len);
    dst->len += src->len;
    dst->spans += src->spans;
    dst->resource_spans += src->resource_spans;
    return 0;
}

int hs_traces_set_tenant(struct hs_traces *t, const char *tenant, size_t len)
{
    if (!tenant)
        len = 0;
    if (len > HS_TENANT_MAX)
        return HS_EINVAL;
    if (len)
        memcpy(t->tenant, tenant, len);
    t->tenant[len] = '\0';
    t->tenant_authenticated = false;
    return 0;
}

void hs_traces_copy_tenant(struct hs_traces *dst, const struct hs_traces *src)
{
    memcpy(dst->tenant, src->tenant, sizeof(dst->tenant));
    dst->tenant_authenticated = src->tenant_authenticated;
}
