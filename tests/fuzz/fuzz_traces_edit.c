/* fuzz_traces_edit.c: libFuzzer target: every request the scanner accepts gets a pseudo-random
 * set of edits (derived from its bytes); the result must scan cleanly, keep exactly the expected
 * spans in order, with the attributes appended (each key once: some reuse a key the span has,
 * some with its string value) and untouched spans byte-identical. */
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

#define MAX_ADD 3
#define MAX_ATTRS 256

/* What was planned for one input span. */
struct plan {
    bool listed, removed;
    size_t attrs_at, attrs_len;
    uint32_t attrs_n;
    char keys[MAX_ADD][64]; /* the keys added, distinct */
};

/* --- an independent reading of a span's attribute keys (the oracle) --- */

static const uint8_t *varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned i = 0; i < 10 && p < end; i++, p++) {
        *v |= (uint64_t)(*p & 0x7f) << (7 * i);
        if (*p < 0x80)
            return p + 1;
    }
    return NULL;
}

/* The keys of a span's attributes (field 9; a KeyValue's key is its last field 1), in order,
 * with the string value when the value is one plain string field. Returns their number, or
 * -1 when there are more than max or the framing is broken. */
struct kv_seen {
    struct hs_str key, str;
    bool is_str;
};

static int span_keys(const uint8_t *p, size_t len, struct kv_seen *out, int max)
{
    const uint8_t *end = p + len;
    int n = 0;
    while (p < end) {
        uint64_t tag, l = 0;
        if (!(p = varint(p, end, &tag)))
            return -1;
        unsigned wt = tag & 7;
        if (wt == 0) {
            if (!(p = varint(p, end, &l)))
                return -1;
            continue;
        }
        l = wt == 1 ? 8 : wt == 5 ? 4 : 0;
        if (wt == 2 && !(p = varint(p, end, &l)))
            return -1;
        if ((wt != 1 && wt != 2 && wt != 5) || l > (uint64_t)(end - p))
            return -1;
        if (tag >> 3 == 9 && wt == 2) {
            if (n == max)
                return -1;
            struct kv_seen *k = &out[n++];
            *k = (struct kv_seen){{"", 0}, {"", 0}, false};
            for (const uint8_t *q = p, *qe = p + l; q < qe;) {
                uint64_t t, m = 0;
                if (!(q = varint(q, qe, &t)))
                    return -1;
                if ((t & 7) == 0) {
                    if (!(q = varint(q, qe, &m)))
                        return -1;
                    continue;
                }
                m = (t & 7) == 1 ? 8 : (t & 7) == 5 ? 4 : 0;
                if ((t & 7) == 2 && !(q = varint(q, qe, &m)))
                    return -1;
                if (m > (uint64_t)(qe - q))
                    return -1;
                if (t == 0x0a)
                    k->key = (struct hs_str){(const char *)q, m};
                /* value: AnyValue whose whole body is one string_value field */
                if (t == 0x12 && m >= 2 && q[0] == 0x0a && q[1] == m - 2)
                    k->str = (struct hs_str){(const char *)q + 2, m - 2}, k->is_str = true;
                else if (t == 0x12)
                    k->is_str = false;
                q += m;
            }
        }
        p += l;
    }
    return n;
}

static bool key_is(struct hs_str k, const char *s)
{
    return k.len == strlen(s) && memcmp(k.ptr, s, k.len) == 0;
}

/* Appends 1 to MAX_ADD attributes of distinct keys: fresh ones, or (when the span has any) one
 * of its own keys, with its own string value at times, so that replacing and keeping both run. */
static uint32_t add_attrs(struct hs_buf *b, uint64_t *rng, const uint8_t *span, size_t span_len,
                          struct plan *pl)
{
    static const char *const arr[] = {"main", "", "runtime.mallocgc"};
    static char text[300];
    static struct kv_seen have[MAX_ATTRS];
    int nhave = span_keys(span, span_len, have, MAX_ATTRS);
    uint32_t n = 1 + (uint32_t)(next_rand(rng) % MAX_ADD);
    for (uint32_t i = 0; i < n; i++) {
        int rc = 0;
        uint64_t r = next_rand(rng);
        char *key = pl->keys[i];
        snprintf(key, sizeof(pl->keys[i]), "hs.fuzz.%u", i);
        const struct kv_seen *h = nhave > 0 ? &have[(r >> 20) % (uint64_t)nhave] : NULL;
        bool reuse = h && (r & 0x30) && h->key.len < sizeof(pl->keys[i]) &&
                     !memchr(h->key.ptr, 0, h->key.len);
        for (uint32_t j = 0; reuse && j < i; j++)
            reuse = !key_is(h->key, pl->keys[j]);
        if (reuse) {
            memcpy(key, h->key.ptr, h->key.len);
            key[h->key.len] = '\0';
        }
        if (reuse && h->is_str && (r & 0x40)) {
            rc = hs_attr_string(b, key, h->str.ptr, h->str.len); /* often byte-equal */
        } else {
            switch (r % 5) {
            case 0: { /* lengths around 127 and 255 move length prefixes across a byte */
                size_t len = (size_t)(r >> 8) % sizeof(text);
                memset(text, 'x', len);
                rc = hs_attr_string(b, key, text, len);
                break;
            }
            case 1:
                rc = hs_attr_int(b, key, (int64_t)(r >> 3) * ((r & 8) ? -1 : 1));
                break;
            case 2:
                rc = hs_attr_bool(b, key, r & 8);
                break;
            case 3:
                rc = hs_attr_double(b, key, (double)(r >> 11) / 7.0);
                break;
            default:
                rc = hs_attr_string_array(b, key, arr, (r >> 8) % 4);
            }
        }
        if (rc)
            die("attribute encoding failed");
    }
    return n;
}

/* An edited span's attributes: each added key exactly once, the others as they were, in order. */
static void check_keys(const uint8_t *in, size_t in_len, const uint8_t *out, size_t out_len,
                       const struct plan *pl)
{
    static struct kv_seen a[MAX_ATTRS], b[MAX_ATTRS + MAX_ADD];
    int na = span_keys(in, in_len, a, MAX_ATTRS),
        nb = span_keys(out, out_len, b, MAX_ATTRS + MAX_ADD);
    if (na < 0)
        return; /* more attributes than we follow */
    if (nb < 0)
        die("an edited span does not parse");
    int j = 0, ours = 0;
    for (int i = 0; i < nb; i++) {
        bool mine = false;
        for (uint32_t k = 0; k < pl->attrs_n; k++)
            mine |= key_is(b[i].key, pl->keys[k]);
        if (mine) {
            ours++;
            continue;
        }
        while (j < na) { /* the next original not of an added key */
            bool dropped = false;
            for (uint32_t k = 0; k < pl->attrs_n; k++)
                dropped |= key_is(a[j].key, pl->keys[k]);
            if (!dropped)
                break;
            j++;
        }
        if (j == na || a[j].key.len != b[i].key.len ||
            memcmp(a[j].key.ptr, b[i].key.ptr, a[j].key.len) != 0)
            die("an attribute the span had is lost or moved");
        j++;
    }
    for (; j < na; j++) {
        bool dropped = false;
        for (uint32_t k = 0; k < pl->attrs_n; k++)
            dropped |= key_is(a[j].key, pl->keys[k]);
        if (!dropped)
            die("an attribute the span had is lost");
    }
    if (ours != (int)pl->attrs_n)
        die("an added key is missing or there twice");
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
            !same(a->name, b->name))
            die("a span differs");
        if (plan[i].attrs_n == 0 &&
            (a->len != b->len || memcmp(data + a->offset, out->data + b->offset, a->len) != 0))
            die("an untouched span changed");
        if (plan[i].attrs_n)
            check_keys(data + a->offset, a->len, out->data + b->offset, b->len, &plan[i]);
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
            plan[i].attrs_n = add_attrs(&attrs, &rng, data + in.v[i].offset, in.v[i].len, &plan[i]);
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
