/* otlp_wire.c: the strict one-pass scanner of OTLP trace wire bytes (design.md §11): every tag,
 * varint, length and wire type checked against proto/opentelemetry/, without allocating; a view
 * of each span for the visitor. protobuf-c 1.4 is the reference: what it rejects, we reject. */
#include "pdata/otlp_wire.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/errors.h"

/*
 * Where we are stricter than protobuf-c 1.4 (the tests and the fuzzer account for each):
 *  - field number 0 (protobuf-c only refuses it in a one-byte tag) and numbers above 2^29-1:
 *    Go decoders (Tempo, the Collector) refuse both, and we forward bytes, not objects, so one
 *    bad request would get a whole batch refused downstream;
 *  - AnyValue.bool_value must be a varint (protobuf-c takes any wire type for a bool);
 *  - the semantic checks in "Checks beyond the wire format" below: id lengths;
 *  - the limits of struct hs_otlp_limits (HS_E2BIG).
 * And one protobuf-c quirk we copy: see merge_value().
 */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
#define TAG(num, wt) (((uint32_t)(num) << 3) | (uint32_t)(wt))
#define MAX_FIELD_NUMBER 0x1fffffffu

/* AnyValue's oneof members, by field number */
enum { V_NONE, V_STRING, V_BOOL, V_INT, V_DOUBLE, V_ARRAY, V_KVLIST, V_BYTES, V_STRINDEX };

/* --- error paths: built only on failure, innermost first, while the stack unwinds --------- */

#define MAX_FRAMES 48
#define KEEP_INNER 12 /* when a path is too deep to print, keep this many innermost frames */

struct frame {
    const char *name; /* NULL: an unknown field, "field <idx>" */
    int len;
    int64_t idx; /* -1: no index */
};

struct scanner {
    const uint8_t *base;
    struct hs_otlp_scan *res;
    hs_span_visit_fn visit;
    void *ud;
    uint32_t max_spans, max_attrs, max_depth;
    bool stopped; /* the visitor stopped the scan: its value goes back untouched */
    bool elided;
    uint32_t nframes;
    struct frame frames[MAX_FRAMES];
    char leaf[160];
};

/* A message's fields, for errors and for telling unknown fields from mistyped ones: the names
 * by field number, space-separated, and the wire type each needs, one digit per field number
 * from 1 ("-": no such field). */
struct msgdef {
    const char *names;
    const char *wts;
    uint32_t n; /* the highest field number */
};

#define MSG(names, wts)                                                                            \
    {                                                                                              \
        names, wts, sizeof(wts) - 1                                                                \
    }

static const struct msgdef request_m = MSG("resource_spans", "2");
static const struct msgdef resource_spans_m = MSG("resource scope_spans schema_url", "222");
static const struct msgdef resource_m =
    MSG("attributes dropped_attributes_count entity_refs", "202");
static const struct msgdef entity_ref_m = MSG("schema_url type id_keys description_keys", "2222");
static const struct msgdef scope_spans_m = MSG("scope spans schema_url", "222");
static const struct msgdef scope_m =
    MSG("name version attributes dropped_attributes_count", "2220");
static const struct msgdef span_m =
    MSG("trace_id span_id trace_state parent_span_id name kind start_time_unix_nano "
        "end_time_unix_nano attributes dropped_attributes_count events dropped_events_count links "
        "dropped_links_count status flags",
        "2222201120202025");
static const struct msgdef event_m =
    MSG("time_unix_nano name attributes dropped_attributes_count", "1220");
static const struct msgdef link_m =
    MSG("trace_id span_id trace_state attributes dropped_attributes_count flags", "222205");
static const struct msgdef status_m = MSG("- message code", "-20");
static const struct msgdef keyvalue_m = MSG("key value key_strindex", "220");
static const struct msgdef anyvalue_m = MSG("string_value bool_value int_value double_value "
                                            "array_value kvlist_value bytes_value "
                                            "string_value_strindex",
                                            "20012220");
static const struct msgdef values_m = MSG("values", "2"); /* ArrayValue and KeyValueList */

/* The name of field `num` of m, its length and wire type; NULL if m has no such field. */
static const char *field_def(const struct msgdef *m, uint32_t num, int *len, unsigned *wt)
{
    if (num == 0 || num > m->n || m->wts[num - 1] == '-')
        return NULL;
    *wt = (unsigned)(m->wts[num - 1] - '0');
    const char *p = m->names;
    for (uint32_t i = 1; i < num; i++)
        p = strchr(p, ' ') + 1;
    *len = (int)strcspn(p, " ");
    return p;
}

static const char *const wt_names[8] = {"VARINT", "I64", "LEN",     "SGROUP",
                                        "EGROUP", "I32", "invalid", "invalid"};

__attribute__((cold, noinline, format(printf, 4, 5))) static int
fail(struct scanner *s, int rc, const uint8_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->leaf, sizeof(s->leaf), fmt, ap);
    va_end(ap);
    s->res->err_offset = (size_t)(at - s->base);
    s->nframes = 0;
    s->elided = false;
    return rc;
}

/* Adds one step of the path on the way out of a failed scan. */
__attribute__((cold, noinline)) static int up_n(struct scanner *s, int rc, const char *name,
                                                int len, int64_t idx)
{
    if (s->stopped)
        return rc;
    if (s->nframes == MAX_FRAMES) { /* drop from the middle: keep both ends of the path */
        memmove(&s->frames[KEEP_INNER], &s->frames[KEEP_INNER + 1],
                (MAX_FRAMES - KEEP_INNER - 1) * sizeof(s->frames[0]));
        s->nframes--;
        s->elided = true;
    }
    s->frames[s->nframes++] = (struct frame){name, len, idx};
    return rc;
}

static int up(struct scanner *s, int rc, const char *name, int64_t idx)
{
    return up_n(s, rc, name, name ? (int)strlen(name) : 0, idx);
}

/* A failure at a field (its tag is read, 0 if not): names the field, if known. */
__attribute__((cold, noinline)) static int up_field(struct scanner *s, int rc, uint32_t tag,
                                                    const struct msgdef *m)
{
    int len = 0;
    unsigned wt;
    const char *name = field_def(m, tag >> 3, &len, &wt);
    if ((tag >> 3) == 0)
        return rc;
    return up_n(s, rc, name, len, name ? -1 : (int64_t)(tag >> 3));
}

/* Prints the path outermost first; when path and reason do not fit, the middle of the path
 * goes, so the outer indexes and the reason stay. */
static void format_error(struct scanner *s)
{
    char path[MAX_FRAMES * 48];
    size_t n = 0;
    for (uint32_t i = s->nframes; i-- > 0 && n < sizeof(path);) {
        const struct frame *f = &s->frames[i];
        const char *dot = i + 1 == s->nframes ? "" : s->elided && i + 1 == KEEP_INNER ? "..." : ".";
        if (!f->name)
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%sfield %lld", dot,
                                  (long long)f->idx);
        else if (f->idx >= 0)
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%s%.*s[%lld]", dot, f->len, f->name,
                                  (long long)f->idx);
        else
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%s%.*s", dot, f->len, f->name);
    }
    if (!s->nframes)
        n = (size_t)snprintf(path, sizeof(path), "request");
    n = HS_MIN(n, sizeof(path) - 1);
    size_t cap = sizeof(s->res->err), leaf = strlen(s->leaf);
    size_t head = HS_MIN(n, cap - 1), tail = 0; /* the path prints as head [... tail] */
    if (n + 2 + leaf >= cap && leaf + 16 < cap) {
        size_t keep = cap - 1 - leaf - 2 - 3;
        head = keep / 2;
        tail = keep - head;
    }
    char *out = s->res->err;
    memcpy(out, path, head);
    if (tail) {
        memcpy(out + head, "...", 3);
        memcpy(out + head + 3, path + n - tail, tail);
        head += 3 + tail;
    }
    snprintf(out + head, cap - head, ": %s", s->leaf);
}

/* --- fields ---------------------------------------------------------------------------- */

struct field {
    uint32_t tag;      /* (number << 3) | wire type */
    const uint8_t *at; /* the tag's first byte */
    const uint8_t *val;
    size_t len; /* LEN: the payload's length */
    uint64_t u; /* VARINT: the value; I64, I32: the little-endian bits */
};

static inline struct hs_str fstr(const struct field *f)
{
    return (struct hs_str){(const char *)f->val, f->len};
}

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fixed64 and fixed32 fields are read with memcpy: a little-endian host is assumed"
#endif

/* At most `max` bytes and within the message, as protobuf-c reads them; NULL if unterminated. */
static const uint8_t *read_varint(const uint8_t *p, const uint8_t *end, unsigned max, uint64_t *v)
{
    size_t avail = (size_t)(end - p);
    unsigned n = avail < max ? (unsigned)avail : max;
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (p[i] < 0x80) {
            *v = x;
            return p + i + 1;
        }
    }
    return NULL;
}

__attribute__((cold, noinline)) static int
bad_varint(struct scanner *s, const uint8_t *p, const uint8_t *end, unsigned max, const char *what)
{
    if ((size_t)(end - p) < max)
        return fail(s, HS_EINVAL, p, "%s runs past the end of its message", what);
    return fail(s, HS_EINVAL, p, "%s longer than %u bytes", what, max);
}

/* Tags of more than one byte: field 16, unknown fields, and odd but valid long encodings. */
static const uint8_t *read_long_tag(struct scanner *s, const uint8_t *p, const uint8_t *end,
                                    uint32_t *tag, int *rc)
{
    uint64_t v;
    const uint8_t *q = read_varint(p, end, 5, &v);
    if (!q) {
        *rc = bad_varint(s, p, end, 5, "tag");
        return NULL;
    }
    if ((v >> 3) == 0 || (v >> 3) > MAX_FIELD_NUMBER) { /* beyond protobuf-c: see the top */
        *rc = fail(s, HS_EINVAL, p,
                   (v >> 3) ? "field number %llu is over the maximum 536870911"
                            : "field number %llu is invalid",
                   (unsigned long long)(v >> 3));
        return NULL;
    }
    *tag = (uint32_t)v;
    return q;
}

/* Reads the field at *pp (p < end) and steps past it; the framing is checked here, the type
 * against the schema by the caller. */
__attribute__((always_inline)) static inline int next_field(struct scanner *s, const uint8_t **pp,
                                                            const uint8_t *end, struct field *f)
{
    const uint8_t *p = *pp;
    int rc = HS_EINVAL;
    f->at = p;
    f->tag = 0;
    if (__builtin_expect(p[0] < 0x80, 1)) {
        if (p[0] < 8)
            return fail(s, HS_EINVAL, p, "field number 0 is invalid");
        f->tag = *p++;
    } else if (end - p >= 2 && p[1] >= 1 && p[1] < 0x80) { /* fields 16..2047: flags */
        f->tag = (uint32_t)(p[0] & 0x7f) | (uint32_t)p[1] << 7;
        p += 2;
    } else if (!(p = read_long_tag(s, p, end, &f->tag, &rc))) {
        return rc;
    }
    switch (f->tag & 7) {
    case WT_VARINT:
        if (p < end && p[0] < 0x80)
            f->u = *p++;
        else if (!(p = read_varint(f->val = p, end, 10, &f->u)))
            return bad_varint(s, f->val, end, 10, "varint");
        break;
    case WT_LEN: {
        uint64_t n;
        const uint8_t *q = p;
        if (p < end && p[0] < 0x80)
            n = *p++;
        else if (!(p = read_varint(q, end, 5, &n)))
            return bad_varint(s, q, end, 5, "length");
        if (n > (uint64_t)(end - p))
            return fail(s, HS_EINVAL, q, "length %llu runs past the end of its message (%zu left)",
                        (unsigned long long)n, (size_t)(end - p));
        f->val = p;
        f->len = (size_t)n;
        p += n;
        break;
    }
    case WT_I64:
        if (end - p < 8)
            return fail(s, HS_EINVAL, p, "fixed64 runs past the end of its message");
        memcpy(&f->u, p, 8);
        p += 8;
        break;
    case WT_I32:
        if (end - p < 4)
            return fail(s, HS_EINVAL, p, "fixed32 runs past the end of its message");
        f->u = 0;
        memcpy(&f->u, p, 4);
        p += 4;
        break;
    default:
        return fail(s, HS_EINVAL, f->at, "wire type %u (%s) is not supported", f->tag & 7,
                    wt_names[f->tag & 7]);
    }
    *pp = p;
    return 0;
}

/* A field no case took: fine if the schema does not know its number (skipped, as protobuf
 * keeps unknown fields), an error if it does (then its wire type was wrong). */
static inline int check_unknown(struct scanner *s, const struct field *f, const struct msgdef *m)
{
    int len;
    unsigned wt;
    const char *name = field_def(m, f->tag >> 3, &len, &wt);
    if (!name)
        return 0;
    fail(s, HS_EINVAL, f->at, "wire type %u (%s), want %u (%s)", f->tag & 7, wt_names[f->tag & 7],
         wt, wt_names[wt]);
    return up_n(s, HS_EINVAL, name, len, -1);
}

/* --- attribute values ------------------------------------------------------------------ */

/* What a KeyValue or AnyValue holds, for service.name and for merge_value(). */
struct value_info {
    uint32_t kind; /* V_* */
    struct hs_str str;
    size_t bytes_len;
};

struct kv_info {
    struct hs_str key;
    struct value_info v;
};

static int scan_anyvalue(struct scanner *s, const uint8_t *p, const uint8_t *end, uint32_t depth,
                         struct value_info *vi);

/* protobuf-c 1.4 merges a KeyValue.value given twice field by field (merge_messages): it fails
 * when neither occurrence has a member of the oneof set, and merging an empty occurrence into a
 * string, or into empty bytes, leaves the value empty. Copied, so both accept the same bytes and
 * whatever decodes our output with protobuf-c later cannot fail on it. */
static int merge_value(struct scanner *s, struct value_info *acc, const struct value_info *next,
                       const uint8_t *at)
{
    if (next->kind != V_NONE) {
        *acc = *next;
        return 0;
    }
    if (acc->kind == V_NONE)
        return fail(s, HS_EINVAL, at, "given more than once without a value to merge");
    if (acc->kind == V_STRING || (acc->kind == V_BYTES && acc->bytes_len == 0))
        acc->kind = V_NONE;
    return 0;
}

static int scan_keyvalue(struct scanner *s, const uint8_t *p, const uint8_t *end, uint32_t depth,
                         struct kv_info *kv)
{
    struct value_info acc = {0};
    uint32_t nvalues = 0;
    struct field f;
    int rc;
    while (p < end) {
        if ((rc = next_field(s, &p, end, &f)))
            return up_field(s, rc, f.tag, &keyvalue_m);
        switch (f.tag) {
        case TAG(1, WT_LEN):
            kv->key = fstr(&f);
            break;
        case TAG(2, WT_LEN): {
            struct value_info vi = {0};
            if ((rc = scan_anyvalue(s, f.val, f.val + f.len, depth, &vi)))
                return up(s, rc, "value", -1);
            if (nvalues++ == 0)
                acc = vi;
            else if ((rc = merge_value(s, &acc, &vi, f.at)))
                return up(s, rc, "value", -1);
            if (vi.kind != V_NONE) /* for our own view: the last member set wins */
                kv->v = vi;
            break;
        }
        case TAG(3, WT_VARINT):
            break;
        default:
            if ((rc = check_unknown(s, &f, &keyvalue_m)))
                return rc;
        }
    }
    return 0;
}

/* ArrayValue (kv == false) or KeyValueList (kv == true): `values`, each one level deeper. */
static int scan_values(struct scanner *s, const uint8_t *p, const uint8_t *end, uint32_t depth,
                       bool kv)
{
    uint32_t n = 0;
    struct field f;
    int rc;
    while (p < end) {
        if ((rc = next_field(s, &p, end, &f)))
            return up_field(s, rc, f.tag, &values_m);
        if (f.tag == TAG(1, WT_LEN)) {
            struct kv_info kvi = {0};
            struct value_info vi = {0};
            rc = kv ? scan_keyvalue(s, f.val, f.val + f.len, depth, &kvi)
                    : scan_anyvalue(s, f.val, f.val + f.len, depth, &vi);
            if (rc)
                return up(s, rc, "values", n);
            n++;
        } else if ((rc = check_unknown(s, &f, &values_m))) {
            return rc;
        }
    }
    return 0;
}

static int scan_anyvalue(struct scanner *s, const uint8_t *p, const uint8_t *end, uint32_t depth,
                         struct value_info *vi)
{
    if (depth > s->max_depth)
        return fail(s, HS_E2BIG, p, "nested deeper than %u (limit max_value_depth)", s->max_depth);
    struct field f;
    int rc;
    while (p < end) {
        if ((rc = next_field(s, &p, end, &f)))
            return up_field(s, rc, f.tag, &anyvalue_m);
        switch (f.tag) {
        case TAG(1, WT_LEN):
            vi->kind = V_STRING;
            vi->str = fstr(&f);
            break;
        case TAG(2, WT_VARINT): /* beyond protobuf-c: only a varint (see the top) */
        case TAG(3, WT_VARINT):
        case TAG(4, WT_I64):
        case TAG(8, WT_VARINT):
            vi->kind = f.tag >> 3;
            break;
        case TAG(5, WT_LEN):
        case TAG(6, WT_LEN):
            vi->kind = f.tag >> 3;
            if ((rc = scan_values(s, f.val, f.val + f.len, depth + 1, vi->kind == V_KVLIST)))
                return up(s, rc, vi->kind == V_KVLIST ? "kvlist_value" : "array_value", -1);
            break;
        case TAG(7, WT_LEN):
            vi->kind = V_BYTES;
            vi->bytes_len = f.len;
            break;
        default:
            if ((rc = check_unknown(s, &f, &anyvalue_m)))
                return rc;
        }
    }
    return 0;
}

/* Whether [p, end) is exactly one varint (of at most 10 bytes: the caller checks). */
static inline bool one_varint(const uint8_t *p, const uint8_t *end)
{
    while (p < end - 1 && *p >= 0x80)
        p++;
    return p == end - 1 && *p < 0x80;
}

/* The usual attribute, a key and a value of one string, int, bool or double, checked in
 * a few compares: the same rules as scan_keyvalue(), which takes every other shape. */
static inline bool quick_attribute(const uint8_t *p, const uint8_t *end, struct kv_info *kv)
{
    size_t len = (size_t)(end - p);
    if (len < 4 || p[0] != TAG(1, WT_LEN) || p[1] >= 0x80 || (size_t)p[1] + 4 > len)
        return false;
    const uint8_t *q = p + 2 + p[1], *v = q + 2;
    size_t n = (size_t)(end - v); /* the AnyValue's length, which must fit one byte */
    if (q[0] != TAG(2, WT_LEN) || q[1] >= 0x80 || q[1] != n)
        return false;
    if (n == 0)
        kv->v.kind = V_NONE;
    else if (n >= 2 && v[0] == TAG(1, WT_LEN) && v[1] == n - 2)
        kv->v = (struct value_info){V_STRING, {(const char *)v + 2, n - 2}, 0};
    else if ((v[0] == TAG(2, WT_VARINT) || v[0] == TAG(3, WT_VARINT)) && n <= 11 && n >= 2 &&
             one_varint(v + 1, end))
        kv->v.kind = v[0] >> 3;
    else if (n == 9 && v[0] == TAG(4, WT_I64))
        kv->v.kind = V_DOUBLE;
    else
        return false;
    kv->key = (struct hs_str){(const char *)p + 2, p[1]};
    return true;
}

/* One entry of a resource, scope, span, event or link's `attributes`, counted against
 * max_attributes; kv (may be NULL) gets its key and value. */
static inline int scan_attribute(struct scanner *s, const struct field *f, uint32_t *count,
                                 struct kv_info *kv)
{
    struct kv_info unused;
    if (s->max_attrs && *count >= s->max_attrs) {
        fail(s, HS_E2BIG, f->at, "more than %u (limit max_attributes)", s->max_attrs);
        return up(s, HS_E2BIG, "attributes", -1);
    }
    kv = kv ? kv : &unused;
    if (!quick_attribute(f->val, f->val + f->len, kv)) {
        *kv = (struct kv_info){0};
        int rc = scan_keyvalue(s, f->val, f->val + f->len, 1, kv);
        if (rc)
            return up(s, rc, "attributes", *count);
    }
    ++*count;
    return 0;
}

/* Scope, event, link, status and entity ref: flat messages but for `attributes` (field
 * `attrs_num` of m, 0 if none). Keeps the last occurrence of each field up to 6 for the caller
 * (a scalar given twice keeps the last, and a message given twice is merged). */
struct flat {
    uint32_t seen; /* bit n: field n was there */
    struct field last[7];
};

static int scan_flat(struct scanner *s, const uint8_t *p, const uint8_t *end,
                     const struct msgdef *m, uint32_t attrs_num, struct flat *out)
{
    uint32_t nattrs = 0;
    struct field f;
    int rc;
    out->seen = 0; /* and nothing else: the caller reads only what `seen` says is there */
    while (p < end) {
        if ((rc = next_field(s, &p, end, &f)))
            return up_field(s, rc, f.tag, m);
        uint32_t num = f.tag >> 3;
        if (num > m->n || m->wts[num - 1] == '-')
            continue; /* unknown: skipped */
        if ((f.tag & 7) != (uint32_t)(m->wts[num - 1] - '0'))
            return check_unknown(s, &f, m); /* known, of the wrong type */
        if (num == attrs_num && (rc = scan_attribute(s, &f, &nattrs, NULL)))
            return rc;
        if (num < 7) {
            out->seen |= 1u << num;
            out->last[num] = f;
        }
    }
    return 0;
}

/* --- resource and scope ------------------------------------------------------------------ */

/* service.name: the first attribute with that key (as pdata's Map.Get finds it), kept only if
 * its value is a string. */
struct service {
    bool found;
    struct hs_str name;
};

static int scan_resource(struct scanner *s, const uint8_t *p, const uint8_t *end,
                         struct service *svc)
{
    uint32_t nattrs = 0, nrefs = 0;
    struct flat fl;
    struct field f;
    int rc;
    while (p < end) {
        if ((rc = next_field(s, &p, end, &f)))
            return up_field(s, rc, f.tag, &resource_m);
        switch (f.tag) {
        case TAG(1, WT_LEN): {
            struct kv_info kv = {0};
            if ((rc = scan_attribute(s, &f, &nattrs, &kv)))
                return rc;
            if (!svc->found && hs_str_eq(kv.key, "service.name")) {
                svc->found = true;
                svc->name = kv.v.kind == V_STRING ? kv.v.str : (struct hs_str){0};
            }
            break;
        }
        case TAG(2, WT_VARINT):
            break;
        case TAG(3, WT_LEN):
            if ((rc = scan_flat(s, f.val, f.val + f.len, &entity_ref_m, 0, &fl)))
                return up(s, rc, "entity_refs", nrefs);
            nrefs++;
            break;
        default:
            if ((rc = check_unknown(s, &f, &resource_m)))
                return rc;
        }
    }
    return 0;
}

/* --- Checks beyond the wire format (protobuf-c accepts all of these) ----------------------- */

/* trace_id, span_id and parent_span_id: fields 1, 2 and 4 of a Span (1 and 2 of a Link) */
struct ids {
    struct hs_str id[3];
    const uint8_t *at[3]; /* where the last of each was */
};

static inline void set_id(struct ids *ids, const struct field *f)
{
    uint32_t i = (f->tag >> 3) == 4 ? 2 : (f->tag >> 3) - 1;
    ids->id[i] = fstr(f);
    ids->at[i] = f->at;
}

/* The last of each counts, as for protobuf-c: a scalar given twice keeps the last. */
static int check_ids(struct scanner *s, const struct ids *ids)
{
    static const char *const names[3] = {"trace_id", "span_id", "parent_span_id"};
    static const size_t want[3] = {16, 8, 8};
    for (int i = 0; i < 3; i++) {
        if (ids->id[i].len == 0 || ids->id[i].len == want[i])
            continue;
        fail(s, HS_EINVAL, ids->at[i], "length %zu, want %zu", ids->id[i].len, want[i]);
        return up(s, HS_EINVAL, names[i], -1);
    }
    return 0;
}

/* --- spans ------------------------------------------------------------------------------- */

/* The fields of a span that hold other messages; the rest are in scan_span(). */
static int scan_span_part(struct scanner *s, const struct field *f, struct hs_span_view *v)
{
    struct flat fl;
    int rc = 0;
    switch (f->tag) {
    case TAG(9, WT_LEN):
        return scan_attribute(s, f, &v->attributes, NULL);
    case TAG(11, WT_LEN):
        if ((rc = scan_flat(s, f->val, f->val + f->len, &event_m, 3, &fl)))
            return up(s, rc, "events", v->events);
        v->events++;
        return 0;
    case TAG(13, WT_LEN): {
        struct ids ids = {0};
        if (!(rc = scan_flat(s, f->val, f->val + f->len, &link_m, 4, &fl))) {
            for (int i = 1; i <= 2; i++)
                if (fl.seen & (1u << i))
                    set_id(&ids, &fl.last[i]);
            rc = check_ids(s, &ids);
        }
        if (rc)
            return up(s, rc, "links", v->links);
        v->links++;
        return 0;
    }
    case TAG(15, WT_LEN):
        if ((rc = scan_flat(s, f->val, f->val + f->len, &status_m, 0, &fl)))
            return up(s, rc, "status", -1);
        if (fl.seen & (1u << 3)) /* the code, as the last status given has it */
            v->status_code = (uint32_t)fl.last[3].u;
        return 0;
    default:
        return check_unknown(s, f, &span_m);
    }
}

static int scan_span(struct scanner *s, const uint8_t *p, const uint8_t *end,
                     struct hs_span_view *v)
{
    struct ids ids = {0};
    struct field f;
    int rc;
    while (p < end) {
        if ((rc = next_field(s, &p, end, &f)))
            return up_field(s, rc, f.tag, &span_m);
        switch (f.tag) {
        case TAG(1, WT_LEN):
        case TAG(2, WT_LEN):
        case TAG(4, WT_LEN):
            set_id(&ids, &f);
            break;
        case TAG(5, WT_LEN):
            v->name = fstr(&f);
            break;
        case TAG(6, WT_VARINT):
            v->kind = (uint32_t)f.u; /* protobuf-c keeps the low 32 bits of an enum */
            break;
        case TAG(7, WT_I64):
            v->start_ns = f.u;
            break;
        case TAG(8, WT_I64):
            v->end_ns = f.u;
            break;
        case TAG(3, WT_LEN):
        case TAG(10, WT_VARINT):
        case TAG(12, WT_VARINT):
        case TAG(14, WT_VARINT):
        case TAG(16, WT_I32):
            break;
        default:
            if ((rc = scan_span_part(s, &f, v)))
                return rc;
        }
    }
    v->trace_id = ids.id[0];
    v->span_id = ids.id[1];
    v->parent_span_id = ids.id[2];
    return check_ids(s, &ids);
}

/* What every span of a ScopeSpans shares. */
struct scope_ctx {
    struct hs_str service_name, scope_name, resource;
};

static int visit_span(struct scanner *s, const struct field *f, const struct scope_ctx *ctx,
                      uint32_t idx)
{
    if (s->max_spans && s->res->spans >= s->max_spans) {
        fail(s, HS_E2BIG, f->at, "more than %u in one request (limit max_spans)", s->max_spans);
        return up(s, HS_E2BIG, "spans", -1);
    }
    /* member by member: a zeroing initializer compiles to `rep stos`, slow for 136 bytes */
    struct hs_span_view v;
    v.trace_id = v.span_id = v.parent_span_id = v.name = (struct hs_str){0};
    v.service_name = ctx->service_name;
    v.scope_name = ctx->scope_name;
    v.resource = ctx->resource;
    v.kind = v.status_code = v.attributes = v.events = v.links = 0;
    v.start_ns = v.end_ns = 0;
    v.offset = (size_t)(f->val - s->base);
    v.len = f->len;
    int rc = scan_span(s, f->val, f->val + f->len, &v);
    if (rc)
        return up(s, rc, "spans", idx);
    s->res->spans++;
    if (s->visit && (rc = s->visit(s->ud, &v)) != 0)
        s->stopped = true;
    return rc;
}

/* --- the request ------------------------------------------------------------------------- */

/* Pass 1 over a ScopeSpans or ResourceSpans: its scope or resource may come after the spans on
 * the wire (fields may come in any order, and a message given twice is merged), and every span
 * needs it, so find and check it first. This pass also checks the framing and wire types of
 * every top-level field, so pass 2 cannot fail on them. */
static int scan_header(struct scanner *s, const uint8_t *p, const uint8_t *end, bool resource,
                       struct scope_ctx *ctx)
{
    const struct msgdef *m = resource ? &resource_spans_m : &scope_spans_m;
    struct service svc = {0};
    struct field f;
    int rc;
    while (p < end) {
        if ((rc = next_field(s, &p, end, &f)))
            return up_field(s, rc, f.tag, m);
        if (f.tag == TAG(1, WT_LEN)) {
            struct flat scope;
            scope.seen = 0;
            rc = resource ? scan_resource(s, f.val, f.val + f.len, &svc)
                          : scan_flat(s, f.val, f.val + f.len, &scope_m, 3, &scope);
            if (rc)
                return up(s, rc, resource ? "resource" : "scope", -1);
            if (resource)
                ctx->resource = (struct hs_str){(const char *)f.val, f.len};
            if (scope.seen & (1u << 1))
                ctx->scope_name = fstr(&scope.last[1]);
        } else if (f.tag != TAG(2, WT_LEN) && f.tag != TAG(3, WT_LEN) &&
                   (rc = check_unknown(s, &f, m))) {
            return rc;
        }
    }
    if (resource)
        ctx->service_name = svc.name;
    return 0;
}

static int scan_scope_spans(struct scanner *s, const uint8_t *p, const uint8_t *end,
                            const struct scope_ctx *rs)
{
    struct scope_ctx ctx = {.service_name = rs->service_name, .resource = rs->resource};
    uint32_t n = 0;
    struct field f;
    int rc = scan_header(s, p, end, false, &ctx);
    while (rc == 0 && p < end && (rc = next_field(s, &p, end, &f)) == 0) {
        if (f.tag == TAG(2, WT_LEN))
            rc = visit_span(s, &f, &ctx, n++);
    }
    return rc;
}

static int scan_resource_spans(struct scanner *s, const uint8_t *p, const uint8_t *end)
{
    struct scope_ctx ctx = {0};
    uint32_t n = 0;
    struct field f;
    int rc = scan_header(s, p, end, true, &ctx);
    while (rc == 0 && p < end && (rc = next_field(s, &p, end, &f)) == 0) {
        if (f.tag != TAG(2, WT_LEN))
            continue;
        if (s->max_spans && s->res->scope_spans >= s->max_spans) { /* each should hold spans */
            fail(s, HS_E2BIG, f.at, "more than %u in one request (limit max_spans)", s->max_spans);
            return up(s, HS_E2BIG, "scope_spans", -1);
        }
        if ((rc = scan_scope_spans(s, f.val, f.val + f.len, &ctx)))
            return up(s, rc, "scope_spans", n);
        n++;
        s->res->scope_spans++;
    }
    return rc;
}

int hs_otlp_traces_scan(const uint8_t *p, size_t len, const struct hs_otlp_limits *lim,
                        hs_span_visit_fn visit, void *ud, struct hs_otlp_scan *res)
{
    *res = (struct hs_otlp_scan){0};
    if (len == 0) /* an empty request is valid: it holds no spans */
        return 0;
    struct scanner s = {.base = p,
                        .res = res,
                        .visit = visit,
                        .ud = ud,
                        .max_spans = lim ? lim->max_spans : 0,
                        .max_attrs = lim ? lim->max_attributes : 0,
                        .max_depth = lim && lim->max_value_depth ? lim->max_value_depth : 32};
    const uint8_t *end = p + len;
    struct field f;
    int rc = 0;
    while (p < end) {
        if ((rc = next_field(&s, &p, end, &f))) {
            up_field(&s, rc, f.tag, &request_m);
            break;
        }
        if (f.tag == TAG(1, WT_LEN) && s.max_spans && res->resource_spans >= s.max_spans) {
            rc = fail(&s, HS_E2BIG, f.at, "more than %u in one request (limit max_spans)",
                      s.max_spans);
            up(&s, rc, "resource_spans", -1);
            break;
        }
        if (f.tag == TAG(1, WT_LEN)) {
            if ((rc = scan_resource_spans(&s, f.val, f.val + f.len))) {
                up(&s, rc, "resource_spans", res->resource_spans);
                break;
            }
            res->resource_spans++;
        } else if ((rc = check_unknown(&s, &f, &request_m))) {
            break;
        }
    }
    if (rc && !s.stopped)
        format_error(&s);
    return rc;
}
