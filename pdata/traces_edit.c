/* traces_edit.c: edits a batch in its wire form (design.md §11): one walk over the request plans
 * the output as copies of input ranges, appended attributes and rewritten length prefixes, then
 * the output is allocated once, at its exact size, and written. */
#include "pdata/traces_edit.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/errors.h"
#include "pdata/traces.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* Tags we write: always the one-byte form, whatever form the input used. */
enum {
    TAG_RESOURCE_SPANS = 0x0a, /* request.resource_spans = 1 */
    TAG_SCOPE_SPANS = 0x12,    /* ResourceSpans.scope_spans = 2 */
    TAG_SPAN = 0x12,           /* ScopeSpans.spans = 2 */
    TAG_ATTRIBUTE = 0x4a,      /* Span.attributes = 9 */
};

/* --- reading ------------------------------------------------------------------------------ */

struct field {
    uint64_t num;
    unsigned wt;
    const uint8_t *at;  /* the tag's first byte */
    const uint8_t *val; /* LEN: the payload; otherwise the value's first byte */
    size_t len;         /* LEN: the payload's length; otherwise the value's size */
    const uint8_t *end; /* the first byte after the field */
};

static const uint8_t *get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10 && p + i < end; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (p[i] < 0x80) {
            *v = x;
            return p + i + 1;
        }
    }
    return NULL;
}

/* Reads the field at p (< end). The input was scanned, but a lookup may be handed any bytes and
 * a bug elsewhere must not turn into a read past the buffer, so the framing is checked again:
 * false when it is broken. */
static bool next_field(const uint8_t *p, const uint8_t *end, struct field *f)
{
    uint64_t tag, n;
    f->at = p;
    if (!(p = get_varint(p, end, &tag)))
        return false;
    f->num = tag >> 3;
    f->wt = (unsigned)(tag & 7);
    switch (f->wt) {
    case WT_VARINT:
        f->val = p;
        if (!(p = get_varint(p, end, &n)))
            return false;
        f->len = (size_t)(p - f->val);
        break;
    case WT_I64:
    case WT_I32:
        n = f->wt == WT_I64 ? 8 : 4;
        if ((size_t)(end - p) < n)
            return false;
        f->val = p;
        f->len = (size_t)n;
        p += n;
        break;
    case WT_LEN:
        if (!(p = get_varint(p, end, &n)) || n > (uint64_t)(end - p))
            return false;
        f->val = p;
        f->len = (size_t)n;
        p += n;
        break;
    default:
        return false;
    }
    f->end = p;
    return true;
}

static inline bool is_len(const struct field *f, uint64_t num)
{
    return f->num == num && f->wt == WT_LEN;
}

/* --- the plan ------------------------------------------------------------------------------ */

/* One piece of the output: `len` bytes copied from `src`, or, when src is NULL, a tag byte and
 * the varint `len` (a length prefix, patched once its message is complete). */
struct op {
    const uint8_t *src;
    size_t len;
    uint8_t tag;
};

struct plan {
    const uint8_t *base;
    const struct hs_span_edit *edits;
    size_t nedits, next; /* edits[next] is the first not yet met */
    bool keep_unlisted;
    struct op *ops;
    size_t nops, cap;
    size_t total;               /* output bytes so far, open length prefixes not counted */
    uint32_t kept, removed, rs; /* listed spans kept, listed spans removed, ResourceSpans out */
    struct op stack[32];        /* most edits touch a few ranges: no allocation for them */
};

/* The input offset of the next edit; SIZE_MAX when all are met. */
static inline size_t next_offset(const struct plan *pl)
{
    return pl->next < pl->nedits ? pl->edits[pl->next].offset : SIZE_MAX;
}

static inline size_t offset_of(const struct plan *pl, const uint8_t *p)
{
    return (size_t)(p - pl->base);
}

static int push(struct plan *pl, struct op op)
{
    if (pl->nops == pl->cap) {
        size_t cap = pl->cap * 2;
        struct op *ops = pl->ops == pl->stack ? malloc(cap * sizeof(*ops))
                                              : realloc(pl->ops, cap * sizeof(*ops));
        if (!ops)
            return HS_ENOMEM;
        if (pl->ops == pl->stack)
            memcpy(ops, pl->stack, sizeof(pl->stack));
        pl->ops = ops;
        pl->cap = cap;
    }
    pl->ops[pl->nops++] = op;
    return 0;
}

/* Adjacent ranges merge, so a run of untouched spans costs one memcpy. */
static int copy(struct plan *pl, const uint8_t *src, size_t len)
{
    if (len == 0)
        return 0;
    pl->total += len;
    struct op *last = pl->nops ? &pl->ops[pl->nops - 1] : NULL;
    if (last && last->src && last->src + last->len == src) {
        last->len += len;
        return 0;
    }
    return push(pl, (struct op){src, len, 0});
}

/* A message being rebuilt: its length prefix's op and the output size before its body. */
struct open_msg {
    size_t op, mark;
};

static int open_msg(struct plan *pl, uint8_t tag, struct open_msg *m)
{
    m->op = pl->nops;
    m->mark = pl->total;
    return push(pl, (struct op){NULL, 0, tag});
}

static void close_msg(struct plan *pl, const struct open_msg *m)
{
    size_t body = pl->total - m->mark;
    pl->ops[m->op].len = body;
    pl->total += 1 + hs_varint_size(body);
}

/* Forgets the message and everything planned after its start: nothing was merged into an op
 * before it, since its prefix op stands in between. */
static void drop_msg(struct plan *pl, const struct open_msg *m)
{
    pl->nops = m->op;
    pl->total = m->mark;
}

/* Whether a ScopeSpans, copied as it is, holds a span: decides if its ResourceSpans stays. */
static bool has_span(const struct field *ss)
{
    const uint8_t *p = ss->val, *end = ss->val + ss->len;
    struct field f;
    while (p < end && next_field(p, end, &f)) {
        if (is_len(&f, 2))
            return true;
        p = f.end;
    }
    return false;
}

/* The key of a KeyValue: its last key field, as protobuf decodes it. */
static bool kv_key(const uint8_t *p, const uint8_t *end, struct hs_str *key)
{
    struct field f;
    *key = (struct hs_str){"", 0};
    for (; p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return false;
        if (is_len(&f, 1))
            *key = (struct hs_str){(const char *)f.val, f.len};
    }
    return true;
}

/* An attribute entry an edit appends. */
struct added {
    struct hs_str key;
    const struct field *entry; /* Span.attributes entry in the edit's attrs */
    bool present;              /* the span has it already, byte for byte: not appended again */
};

static struct added *added_find(struct added *a, size_t n, const struct field *entry)
{
    struct hs_str k;
    if (!kv_key(entry->val, entry->val + entry->len, &k))
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (a[i].key.len == k.len && memcmp(a[i].key.ptr, k.ptr, k.len) == 0)
            return &a[i];
    return NULL;
}

/* The body of a span the edit gives attributes: its own fields, then the edit's attributes.
 * OTLP wants attribute keys unique, and an SDK may already have set one hotspan writes
 * (otel-profiling-go sets pyroscope.profile.id on root spans): such an attribute is left out,
 * or, when byte-equal to the edit's, kept in its place and the edit's not appended. Only spans
 * listed with attributes (slow spans) are read field by field. */
static int plan_span_attrs(struct plan *pl, const struct field *span, const struct hs_span_edit *e,
                           struct added *add, struct field *ent, size_t cap)
{
    size_t n = 0;
    const uint8_t *p = e->attrs, *end = e->attrs + e->attrs_len;
    for (; p < end; p = ent[n++].end) {
        if (n == cap || !next_field(p, end, &ent[n]) || !is_len(&ent[n], 9) ||
            !kv_key(ent[n].val, ent[n].val + ent[n].len, &add[n].key))
            return HS_EINVAL;
        add[n].entry = &ent[n];
        add[n].present = false;
    }
    struct field f;
    int rc = 0;
    for (p = span->val, end = span->val + span->len; rc == 0 && p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return HS_EINVAL;
        struct added *a = is_len(&f, 9) ? added_find(add, n, &f) : NULL;
        if (!a) {
            rc = copy(pl, f.at, (size_t)(f.end - f.at));
        } else if (!a->present && a->entry->len == f.len &&
                   memcmp(a->entry->val, f.val, f.len) == 0) {
            a->present = true;
            rc = copy(pl, f.at, (size_t)(f.end - f.at));
        } /* else left out: the edit's value replaces it */
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!add[i].present)
            rc = copy(pl, add[i].entry->at, (size_t)(add[i].entry->end - add[i].entry->at));
    return rc;
}

/* plan_span_attrs with room for the edit's entries: on the stack for what the correlator
 * writes, allocated beyond. */
static int plan_span_body(struct plan *pl, const struct field *span, const struct hs_span_edit *e)
{
    size_t n = 0;
    struct field f;
    for (const uint8_t *p = e->attrs, *end = p + e->attrs_len; p < end; p = f.end, n++)
        if (!next_field(p, end, &f))
            return HS_EINVAL;
    struct added add[24];
    struct field ent[24];
    if (n <= HS_ARRAY_SIZE(add))
        return plan_span_attrs(pl, span, e, add, ent, HS_ARRAY_SIZE(add));
    struct added *a = malloc(n * sizeof(*a));
    struct field *fs = malloc(n * sizeof(*fs));
    int rc = a && fs ? plan_span_attrs(pl, span, e, a, fs, n) : HS_ENOMEM;
    free(a);
    free(fs);
    return rc;
}

static int plan_span(struct plan *pl, const struct field *f)
{
    size_t at = offset_of(pl, f->val), want = next_offset(pl);
    if (want < at)
        return HS_EINVAL; /* the edit fell between spans: it names none */
    if (want > at)        /* not listed */
        return pl->keep_unlisted ? copy(pl, f->at, (size_t)(f->end - f->at)) : 0;
    const struct hs_span_edit *e = &pl->edits[pl->next++];
    if (e->remove) {
        pl->removed++;
        return 0;
    }
    pl->kept++;
    if (e->attrs_len == 0)
        return copy(pl, f->at, (size_t)(f->end - f->at));
    struct open_msg m;
    int rc;
    if ((rc = open_msg(pl, TAG_SPAN, &m)) || (rc = plan_span_body(pl, f, e)))
        return rc;
    close_msg(pl, &m);
    return 0;
}

/* A ScopeSpans holding at least one edit. *spans_out: the spans it keeps. */
static int plan_scope_spans(struct plan *pl, const struct field *ss, uint32_t *spans_out)
{
    const uint8_t *p = ss->val, *end = ss->val + ss->len;
    uint32_t before = pl->kept;
    size_t unlisted = 0;
    struct open_msg m;
    struct field f;
    int rc = open_msg(pl, TAG_SCOPE_SPANS, &m);
    for (; rc == 0 && p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return HS_EINVAL;
        if (is_len(&f, 2)) {
            if (next_offset(pl) != offset_of(pl, f.val))
                unlisted++;
            rc = plan_span(pl, &f);
        } else {
            rc = copy(pl, f.at, (size_t)(f.end - f.at)); /* scope, schema_url, unknown */
        }
    }
    if (rc)
        return rc;
    if (next_offset(pl) <= offset_of(pl, end))
        return HS_EINVAL; /* inside this ScopeSpans, but not at a span */
    *spans_out = pl->kept - before + (pl->keep_unlisted ? (uint32_t)unlisted : 0);
    if (*spans_out == 0)
        drop_msg(pl, &m);
    else
        close_msg(pl, &m);
    return 0;
}

/* A ResourceSpans holding at least one edit. */
static int plan_resource_spans(struct plan *pl, const struct field *rs)
{
    const uint8_t *p = rs->val, *end = rs->val + rs->len;
    bool any_span = false;
    struct open_msg m;
    struct field f;
    int rc = open_msg(pl, TAG_RESOURCE_SPANS, &m);
    for (; rc == 0 && p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return HS_EINVAL;
        if (!is_len(&f, 2)) {
            rc = copy(pl, f.at, (size_t)(f.end - f.at)); /* resource, schema_url, unknown */
            continue;
        }
        size_t want = next_offset(pl);
        if (want < offset_of(pl, f.val))
            return HS_EINVAL;
        if (want <= offset_of(pl, f.end)) {
            uint32_t n = 0;
            rc = plan_scope_spans(pl, &f, &n);
            any_span |= n > 0;
        } else if (pl->keep_unlisted) {
            rc = copy(pl, f.at, (size_t)(f.end - f.at));
            any_span = any_span || has_span(&f);
        }
    }
    if (rc)
        return rc;
    if (next_offset(pl) <= offset_of(pl, end))
        return HS_EINVAL;
    if (!any_span) {
        drop_msg(pl, &m);
    } else {
        close_msg(pl, &m);
        pl->rs++;
    }
    return 0;
}

/* Walks the request; ResourceSpans without edits are copied whole (or left out), unread. */
static int plan_request(struct plan *pl, const uint8_t *p, const uint8_t *end)
{
    struct field f;
    int rc = 0;
    for (; rc == 0 && p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return HS_EINVAL;
        if (!is_len(&f, 1)) {
            rc = copy(pl, f.at, (size_t)(f.end - f.at)); /* unknown: kept in place */
            continue;
        }
        size_t want = next_offset(pl);
        if (want < offset_of(pl, f.val))
            return HS_EINVAL;
        if (want <= offset_of(pl, f.end)) {
            rc = plan_resource_spans(pl, &f);
        } else if (pl->keep_unlisted) {
            rc = copy(pl, f.at, (size_t)(f.end - f.at));
            pl->rs++;
        }
    }
    if (rc == 0 && pl->next < pl->nedits)
        rc = HS_EINVAL; /* past the last span */
    return rc;
}

static uint8_t *put_varint(uint8_t *w, uint64_t v)
{
    while (v >= 0x80) {
        *w++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *w++ = (uint8_t)v;
    return w;
}

static void write_plan(const struct plan *pl, uint8_t *w)
{
    for (size_t i = 0; i < pl->nops; i++) {
        const struct op *op = &pl->ops[i];
        if (op->src) {
            memcpy(w, op->src, op->len);
            w += op->len;
        } else {
            *w++ = op->tag;
            w = put_varint(w, op->len);
        }
    }
}

/* Sorted, distinct, and each with the attributes it claims: checked up front, as a mistake
 * here would otherwise show as a silently wrong batch. */
static int check_edits(const struct hs_span_edit *edits, size_t n, size_t in_len)
{
    size_t attrs = 0;
    for (size_t i = 0; i < n; i++) {
        if ((i && edits[i].offset <= edits[i - 1].offset) || edits[i].offset > in_len ||
            (edits[i].attrs_len && !edits[i].attrs))
            return HS_EINVAL;
        if (edits[i].attrs_len > SIZE_MAX / 4 - attrs)
            return HS_ENOMEM;
        attrs += edits[i].attrs_len;
    }
    return attrs > SIZE_MAX / 4 - in_len ? HS_ENOMEM : 0;
}

int hs_traces_edit(const struct hs_traces *in, const struct hs_span_edit *edits, size_t n,
                   bool keep_unlisted, struct hs_traces **out)
{
    *out = NULL;
    int rc = check_edits(edits, n, in->len);
    if (rc)
        return rc;
    struct plan pl = {.base = in->data,
                      .edits = edits,
                      .nedits = n,
                      .keep_unlisted = keep_unlisted,
                      .cap = HS_ARRAY_SIZE(pl.stack)};
    pl.ops = pl.stack;
    if (in->len == 0) /* no spans, so no edit can name one */
        return n ? HS_EINVAL : 0;
    if ((rc = plan_request(&pl, in->data, in->data + in->len)))
        goto done;
    uint32_t spans = keep_unlisted ? in->spans - HS_MIN(in->spans, pl.removed) : pl.kept;
    if (spans == 0)
        goto done;
    uint8_t *data = malloc(pl.total);
    if (!data) {
        rc = HS_ENOMEM;
        goto done;
    }
    write_plan(&pl, data);
    if (!(*out = hs_traces_wrap(data, pl.total, pl.total, spans, pl.rs))) {
        free(data);
        rc = HS_ENOMEM;
    } else {
        hs_traces_copy_tenant(*out, in); /* an edited batch keeps its tenant */
    }
done:
    if (pl.ops != pl.stack)
        free(pl.ops);
    return rc;
}

/* --- attributes ---------------------------------------------------------------------------- */

/* Reserves one whole Span.attributes entry whose AnyValue takes any_len bytes, writes all of it
 * but the AnyValue, and returns where that goes (NULL: out of memory, b unchanged). Sizes are
 * known up front, so each entry is written once, in place. */
static uint8_t *attr_begin(struct hs_buf *b, const char *key, size_t any_len)
{
    size_t klen = strlen(key);
    if (any_len > SIZE_MAX / 4 || klen > SIZE_MAX / 4)
        return NULL;
    size_t kv = 1 + hs_varint_size(klen) + klen + 1 + hs_varint_size(any_len) + any_len;
    size_t total = 1 + hs_varint_size(kv) + kv;
    if (hs_buf_reserve(b, total))
        return NULL;
    uint8_t *w = b->data + b->len;
    *w++ = TAG_ATTRIBUTE;
    w = put_varint(w, kv);
    *w++ = 0x0a; /* KeyValue.key */
    w = put_varint(w, klen);
    memcpy(w, key, klen);
    w += klen;
    *w++ = 0x12; /* KeyValue.value */
    w = put_varint(w, any_len);
    b->len += total;
    return w;
}

/* An AnyValue of one string (a oneof member: written even when empty, wire.md §0). */
static size_t any_string_size(size_t len)
{
    return 1 + hs_varint_size(len) + len;
}

static uint8_t *put_any_string(uint8_t *w, const char *val, size_t len)
{
    *w++ = 0x0a;
    w = put_varint(w, len);
    if (len)
        memcpy(w, val, len);
    return w + len;
}

int hs_attr_string(struct hs_buf *b, const char *key, const char *val, size_t len)
{
    if (len > SIZE_MAX / 4)
        return HS_ENOMEM;
    uint8_t *w = attr_begin(b, key, any_string_size(len));
    if (!w)
        return HS_ENOMEM;
    put_any_string(w, val, len);
    return 0;
}

int hs_attr_bool(struct hs_buf *b, const char *key, bool v)
{
    uint8_t *w = attr_begin(b, key, 2);
    if (!w)
        return HS_ENOMEM;
    w[0] = 0x10;
    w[1] = v ? 1 : 0;
    return 0;
}

int hs_attr_int(struct hs_buf *b, const char *key, int64_t v)
{
    uint64_t u = (uint64_t)v; /* int64: negative values take 10 bytes, no zigzag */
    uint8_t *w = attr_begin(b, key, 1 + hs_varint_size(u));
    if (!w)
        return HS_ENOMEM;
    *w++ = 0x18;
    put_varint(w, u);
    return 0;
}

int hs_attr_double(struct hs_buf *b, const char *key, double v)
{
    static_assert(sizeof(double) == 8, "double is written as fixed64");
    uint8_t *w = attr_begin(b, key, 9);
    if (!w)
        return HS_ENOMEM;
    *w++ = 0x21;
    memcpy(w, &v, 8); /* little-endian host, as otlp_wire.c assumes */
    return 0;
}

int hs_attr_string_array(struct hs_buf *b, const char *key, const char *const *vals, size_t n)
{
    size_t arr = 0; /* ArrayValue: values = 1, each an AnyValue of one string */
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(vals[i]);
        if (len > SIZE_MAX / 8 || arr > SIZE_MAX / 8)
            return HS_ENOMEM;
        size_t any = any_string_size(len);
        arr += 1 + hs_varint_size(any) + any;
    }
    if (arr > SIZE_MAX / 8)
        return HS_ENOMEM;
    uint8_t *w = attr_begin(b, key, 1 + hs_varint_size(arr) + arr);
    if (!w)
        return HS_ENOMEM;
    *w++ = 0x2a; /* AnyValue.array_value */
    w = put_varint(w, arr);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(vals[i]);
        *w++ = 0x0a;
        w = put_varint(w, any_string_size(len));
        w = put_any_string(w, vals[i], len);
    }
    return 0;
}

/* --- lookups ------------------------------------------------------------------------------- */

/* AnyValue members, by field number: 1 string_value ... 8 string_value_strindex. */
enum { V_NONE = 0, V_STRING = 1, V_BYTES = 7 };

struct value {
    unsigned kind;
    struct hs_str str; /* V_STRING */
    size_t bytes_len;  /* V_BYTES */
};

static const unsigned member_wt[9] = {0,      WT_LEN, WT_VARINT, WT_VARINT, WT_I64,
                                      WT_LEN, WT_LEN, WT_LEN,    WT_VARINT};

/* The member an AnyValue holds: the last one given, as protobuf decodes a oneof. */
static bool read_anyvalue(const uint8_t *p, const uint8_t *end, struct value *v)
{
    struct field f;
    *v = (struct value){0};
    for (; p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return false;
        if (f.num == 0 || f.num > 8 || f.wt != member_wt[f.num])
            continue;
        v->kind = (unsigned)f.num;
        v->str = (struct hs_str){(const char *)f.val, f.len};
        v->bytes_len = f.len;
    }
    return true;
}

/* A KeyValue: the last key given, and its value merged as protobuf-c merges a message given
 * twice (see merge_value() in otlp_wire.c), so we read what every decoder downstream reads. */
static bool read_keyvalue(const uint8_t *p, const uint8_t *end, struct hs_str *key,
                          struct value *acc)
{
    struct field f;
    *key = (struct hs_str){0};
    *acc = (struct value){0};
    for (; p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return false;
        if (is_len(&f, 1)) {
            *key = (struct hs_str){(const char *)f.val, f.len};
        } else if (is_len(&f, 2)) {
            struct value v;
            if (!read_anyvalue(f.val, f.val + f.len, &v))
                return false;
            if (v.kind != V_NONE)
                *acc = v;
            else if (acc->kind == V_STRING || (acc->kind == V_BYTES && acc->bytes_len == 0))
                acc->kind = V_NONE;
        }
    }
    return true;
}

bool hs_attrs_find_str(struct hs_str msg, uint32_t field, const char *key, struct hs_str *out)
{
    if (msg.len == 0) /* e.g. a span's resource when it has none: ptr may be NULL */
        return false;
    const uint8_t *p = (const uint8_t *)msg.ptr, *end = p + msg.len;
    struct field f;
    for (; p < end; p = f.end) {
        if (!next_field(p, end, &f))
            return false;
        if (!is_len(&f, field))
            continue;
        struct hs_str k;
        struct value v;
        if (!read_keyvalue(f.val, f.val + f.len, &k, &v))
            return false;
        if (!hs_str_eq(k, key))
            continue;
        /* the first entry with the key is the attribute (pdata's Map.Get), whatever its type */
        if (v.kind != V_STRING)
            return false;
        *out = v.str;
        return true;
    }
    return false;
}

bool hs_span_attr_str(const uint8_t *data, const struct hs_span_view *span, const char *key,
                      struct hs_str *out)
{
    struct hs_str msg = {(const char *)data + span->offset, span->len};
    return hs_attrs_find_str(msg, 9, key, out);
}
