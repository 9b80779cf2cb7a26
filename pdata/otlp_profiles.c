/* otlp_profiles.c: an ExportProfilesServiceRequest in: a walk of the wire bytes first (nesting and
 * counts bounded before protobuf-c allocates or recurses), protobuf-c into an arena, the checks of
 * otlp_profiles_check.c, then one batch item per Profile (and sample service) with the labels
 * Pyroscope's OTLP ingestion gives it and the summary of the pprof it converts to; and, for a
 * Pyroscope exporter, a batch's items as that pprof (hs_profiles_to_pprof, through
 * otlp_profiles_pprof.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "pdata/otlp_json_int.h"
#include "pdata/otlp_profiles_int.h"
#include "pdata/pprof_int.h"

#define REQ_DESC                                                                                   \
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor
#define DICT_DESC opentelemetry__proto__profiles__v1development__profiles_dictionary__descriptor
#define SCOPE_PROFILES_DESC                                                                        \
    opentelemetry__proto__profiles__v1development__scope_profiles__descriptor
#define PROFILE_DESC opentelemetry__proto__profiles__v1development__profile__descriptor
#define RESOURCE_DESC opentelemetry__proto__resource__v1__resource__descriptor
#define SCOPE_DESC opentelemetry__proto__common__v1__instrumentation_scope__descriptor
#define ANY_DESC opentelemetry__proto__common__v1__any_value__descriptor

/* ---- the wire walk --------------------------------------------------------------------------- */

/* protobuf-c recurses once per nested message and allocates every element it finds, so before it
 * runs, one pass over the bytes (driven by the same descriptors) bounds the nesting of attribute
 * values and counts the elements the limits are about, naming the first one past its limit. */
enum { WALK_PATH = 48, WALK_FIELDS = 16 };

struct walk_at {
    const char *name;
    uint32_t index;
    bool repeated;
};

struct walk {
    const struct hs_otlp_profiles_limits *lim;
    uint32_t max_vdepth;
    uint64_t profiles;
    struct walk_at at[WALK_PATH];
    uint32_t depth;
    char *err;
    size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int walk_fail(struct walk *w, int code,
                                                           const char *fmt, ...)
{
    char path[256] = "", msg[160];
    size_t n = 0;
    for (uint32_t i = 0; i < w->depth && i < WALK_PATH && n < sizeof(path) - 1; i++) {
        int k = w->at[i].repeated
                    ? snprintf(path + n, sizeof(path) - n, "%s%s[%u]", n ? "." : "", w->at[i].name,
                               w->at[i].index)
                    : snprintf(path + n, sizeof(path) - n, "%s%s", n ? "." : "", w->at[i].name);
        n = k < 0 ? n : HS_MIN(n + (size_t)k, sizeof(path) - 1);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return hs_pprof_errf(w->err, w->errlen, code, "%s%s%s", path, n ? ": " : "", msg);
}

static bool rd_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t x = 0;
    for (unsigned s = 0; s < 70 && p < end; s += 7) {
        uint8_t b = *p++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *pp = p;
            *v = x;
            return true;
        }
    }
    return false;
}

/* The limit on the elements of repeated field f of d, 0 for none; `key` names it. */
static uint32_t limit_of(const struct walk *w, const ProtobufCMessageDescriptor *d,
                         const ProtobufCFieldDescriptor *f, const char **key)
{
    if (d == &PROFILE_DESC && f->id == 2) {
        *key = "max_samples";
        return w->lim->max_samples;
    }
    if (d == &DICT_DESC) {
        *key = "max_table_entries";
        return w->lim->max_table_entries;
    }
    if ((d == &RESOURCE_DESC && f->id == 1) || (d == &SCOPE_DESC && f->id == 3)) {
        *key = "max_attributes";
        return w->lim->max_attributes;
    }
    return 0;
}

/* Element `index` of field f of d, pushed on the path: its count checked against the limits. */
static int walk_enter(struct walk *w, const ProtobufCMessageDescriptor *d,
                      const ProtobufCFieldDescriptor *f, uint32_t index)
{
    if (w->depth < WALK_PATH)
        w->at[w->depth] = (struct walk_at){f->name, index, f->label == PROTOBUF_C_LABEL_REPEATED};
    w->depth++;
    const char *key = NULL;
    uint32_t max = limit_of(w, d, f, &key);
    if (max && index >= max)
        return walk_fail(w, HS_E2BIG, "more than %s (%u) in one %s", key, max, d->short_name);
    if (d == &SCOPE_PROFILES_DESC && f->id == 2 && w->lim->max_profiles &&
        ++w->profiles > w->lim->max_profiles)
        return walk_fail(w, HS_E2BIG, "more than max_profiles (%u) in the request",
                         w->lim->max_profiles);
    return 0;
}

static int walk_msg(struct walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
                    const uint8_t *end, uint32_t vdepth)
{
    uint32_t counts[WALK_FIELDS] = {0};
    while (p < end) {
        uint64_t key, v;
        if (!rd_varint(&p, end, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
            return walk_fail(w, HS_EINVAL, "%s: malformed field tag", d->short_name);
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
        switch (key & 7) {
        case 0:
            if (!rd_varint(&p, end, &v))
                return walk_fail(w, HS_EINVAL, "%s: truncated varint", d->short_name);
            continue;
        case 1:
        case 5: {
            size_t n = (key & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < n)
                return walk_fail(w, HS_EINVAL, "%s: truncated field", d->short_name);
            p += n;
            continue;
        }
        case 2:
            if (!rd_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return walk_fail(w, HS_EINVAL, "%s: field %u runs past its message", d->short_name,
                                 (unsigned)(key >> 3));
            break;
        default:
            return walk_fail(w, HS_EINVAL, "%s: field %u has wire type %u, which OTLP never uses",
                             d->short_name, (unsigned)(key >> 3), (unsigned)(key & 7));
        }
        const uint8_t *val = p;
        p += v;
        bool msg = f && f->type == PROTOBUF_C_TYPE_MESSAGE;
        if (!msg && !(f && f->label == PROTOBUF_C_LABEL_REPEATED &&
                      (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES)))
            continue; /* scalars, packed or not, cost protobuf-c what their bytes do */
        size_t fi = (size_t)(f - d->fields);
        uint32_t index = fi < WALK_FIELDS ? counts[fi]++ : 0;
        int rc = walk_enter(w, d, f, index);
        if (rc == 0 && msg) {
            const ProtobufCMessageDescriptor *sub = f->descriptor;
            uint32_t sub_vdepth = vdepth + (sub == &ANY_DESC);
            if (sub_vdepth > w->max_vdepth + 1)
                rc = walk_fail(w, HS_E2BIG, "nested deeper than %u (limit max_value_depth)",
                               w->max_vdepth);
            else
                rc = walk_msg(w, sub, val, val + v, sub_vdepth);
        }
        w->depth--;
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- parse ------------------------------------------------------------------------------------
 */

/* protobuf-c's tree is larger than the wire (a 2-byte empty message becomes a struct and a
 * pointer), so its arena may grow to this many times the input before the request is refused. */
#define TREE_FACTOR 32
#define TREE_BASE ((size_t)1 << 20)

struct pb_alloc {
    struct hs_arena *a;
    bool full;
};

static void *pb_alloc_fn(void *ud, size_t n)
{
    struct pb_alloc *pa = ud;
    void *p = hs_arena_alloc(pa->a, n);
    if (!p)
        pa->full = true;
    return p;
}

static void pb_free_fn(void *ud, void *p)
{
    (void)ud;
    (void)p; /* the arena goes at once */
}

/* Pyroscope's getServiceNameFromAttributes: service.name, else "unknown_service" followed by
 * ":<process.executable.name>" when the resource names its executable. */
static const char *resource_service(struct hs_otlp_request *r, const op_resource_profiles *rp)
{
    const char *exe = NULL;
    size_t n = rp->resource ? rp->resource->n_attributes : 0;
    for (size_t i = 0; i < n; i++) {
        const op_kv *kv = rp->resource->attributes[i];
        const char *key = hs_otlp_kv_key(r, kv);
        char buf[24];
        const char *v = hs_otlp_any_string(r, kv->value, buf);
        if (*v && strcmp(key, OP_SERVICE_NAME) == 0)
            return v == buf ? hs_arena_strndup(r->arena, v, strlen(v)) : v;
        if (*v && strcmp(key, OP_EXE_NAME) == 0)
            exe = v == buf ? hs_arena_strndup(r->arena, v, strlen(v)) : v;
    }
    if (!exe)
        return OP_UNKNOWN_SERVICE;
    size_t len = sizeof(OP_UNKNOWN_SERVICE) + strlen(exe) + 1;
    char *s = hs_arena_alloc(r->arena, len);
    if (s)
        snprintf(s, len, OP_UNKNOWN_SERVICE ":%s", exe);
    return s;
}

static int list_profiles(struct hs_otlp_request *r, char *err, size_t errlen)
{
    const op_request *q = r->req;
    size_t n = 0;
    for (size_t i = 0; i < q->n_resource_profiles; i++)
        for (size_t j = 0; j < q->resource_profiles[i]->n_scope_profiles; j++)
            n += q->resource_profiles[i]->scope_profiles[j]->n_profiles;
    if (n > UINT32_MAX / 2)
        return hs_pprof_errf(err, errlen, HS_E2BIG, "too many profiles (%zu)", n);
    r->profiles = hs_arena_alloc(r->arena, (n ? n : 1) * sizeof(*r->profiles));
    if (!r->profiles)
        return hs_pprof_errf(err, errlen, HS_E2BIG, "decoded request exceeds the memory limit");
    for (size_t i = 0; i < q->n_resource_profiles; i++) {
        const op_resource_profiles *rp = q->resource_profiles[i];
        const char *svc = NULL;
        for (size_t j = 0; j < rp->n_scope_profiles; j++) {
            const op_scope_profiles *sp = rp->scope_profiles[j];
            if (sp->n_profiles && !svc && !(svc = resource_service(r, rp)))
                return hs_pprof_errf(err, errlen, HS_E2BIG,
                                     "decoded request exceeds the memory limit");
            for (size_t k = 0; k < sp->n_profiles; k++)
                r->profiles[r->nprofiles++] = (struct op_ref){
                    sp->profiles[k], rp, sp, (uint32_t)i, (uint32_t)j, (uint32_t)k, svc};
        }
    }
    return 0;
}

int hs_otlp_request_parse(const uint8_t *data, size_t len,
                          const struct hs_otlp_profiles_limits *lim, struct hs_otlp_request **out,
                          char *err, size_t errlen)
{
    static const struct hs_otlp_profiles_limits none = {0};
    static const op_dict empty =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    if (!lim)
        lim = &none;
    if (err && errlen)
        err[0] = '\0';
    *out = NULL;
    if (lim->max_decompressed && len > lim->max_decompressed)
        return hs_pprof_errf(err, errlen, HS_E2BIG,
                             "request of %zu bytes exceeds max_decompressed (%llu)", len,
                             (unsigned long long)lim->max_decompressed);
    struct walk w = {.lim = lim,
                     .max_vdepth = lim->max_value_depth ? lim->max_value_depth : 32,
                     .err = err,
                     .errlen = errlen};
    int rc = walk_msg(&w, &REQ_DESC, data, data + len, 0);
    if (rc)
        return rc;
    size_t cap =
        len > (SIZE_MAX - TREE_BASE) / TREE_FACTOR ? SIZE_MAX : len * TREE_FACTOR + TREE_BASE;
    struct hs_arena *a = hs_arena_new(len < 16384 ? 16384 : len * 4, cap);
    struct hs_otlp_request *r = a ? hs_arena_alloc(a, sizeof(*r)) : NULL;
    if (!r) {
        hs_arena_free(a);
        return hs_pprof_errf(err, errlen, HS_ENOMEM, "out of memory");
    }
    memset(r, 0, sizeof(*r));
    r->arena = a;
    r->len = len;
    struct pb_alloc pa = {.a = a};
    ProtobufCAllocator alloc = {.alloc = pb_alloc_fn, .free = pb_free_fn, .allocator_data = &pa};
    r->req = (const op_request *)protobuf_c_message_unpack(&REQ_DESC, &alloc, len, data);
    if (!r->req) {
        rc = pa.full
                 ? hs_pprof_errf(err, errlen, HS_E2BIG,
                                 "decoded request exceeds the memory limit (%zu bytes)", cap)
                 : hs_pprof_errf(err, errlen, HS_EINVAL,
                                 "not an ExportProfilesServiceRequest: protobuf decoding failed");
        goto fail;
    }
    r->dict = r->req->dictionary ? r->req->dictionary : &empty;
    if ((rc = list_profiles(r, err, errlen)) || (rc = hs_otlp_check(r, lim, err, errlen)))
        goto fail;
    *out = r;
    return 0;
fail:
    hs_otlp_request_free(r);
    return rc;
}

void hs_otlp_request_free(struct hs_otlp_request *r)
{
    if (!r)
        return;
    hs_otlp_maps_free(r->maps);
    hs_arena_free(r->arena); /* r lives in it */
}

uint32_t hs_otlp_request_profiles(const struct hs_otlp_request *r)
{
    return r->nprofiles;
}

/* ---- labels ---------------------------------------------------------------------------------- */

/* Pyroscope's label-name rule (pkg/validation SanitizeLegacyLabelName): [a-zA-Z_.][a-zA-Z0-9_.]*,
 * dots becoming '_'; false for a name it refuses (then the label is left out: its push would be
 * refused whole). Names over 1024 bytes are refused as its max_label_name_length does. */
static bool sanitize_name(const char *key, char out[1025])
{
    size_t n = strlen(key);
    if (n == 0 || n > 1024)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
        out[i] = c == '.' ? '_' : c;
    }
    out[n] = '\0';
    return true;
}

static int attr_labels(struct hs_profile *p, const struct hs_otlp_request *r, op_kv *const *kvs,
                       size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char name[1025], buf[24];
        const char *key = hs_otlp_kv_key(r, kvs[i]);
        const char *v = hs_otlp_any_string(r, kvs[i]->value, buf);
        /* empty values are left out as Pyroscope does; over 2048 bytes it refuses them */
        if (!*v || strlen(v) > 2048 || strcmp(key, "__name__") == 0 || !sanitize_name(key, name))
            continue;
        if (hs_profile_label(p, name)) /* the first of a name wins */
            continue;
        int rc = hs_profile_set_label(p, name, strlen(name), v, strlen(v));
        if (rc)
            return rc;
    }
    return 0;
}

static int set(struct hs_profile *p, const char *name, const char *value)
{
    return hs_profile_set_label(p, name, strlen(name), value, strlen(value));
}

/* Pyroscope's ingest_handler.go: __delta__, __otel__, __name__, resource then scope attributes,
 * service_name; hotspan keeps one label per name (the explicit ones win). */
static int item_labels(struct hs_profile *p, const struct hs_otlp_request *r,
                       const struct op_ref *ref, const char *service, const char *name)
{
    int rc = 0;
    if (ref->rp->resource)
        rc = attr_labels(p, r, ref->rp->resource->attributes, ref->rp->resource->n_attributes);
    if (rc == 0 && ref->sp->scope)
        rc = attr_labels(p, r, ref->sp->scope->attributes, ref->sp->scope->n_attributes);
    if (rc == 0)
        rc = set(p, "service_name", service);
    if (rc == 0)
        rc = set(p, "__name__", name);
    if (rc == 0)
        rc = set(p, "__delta__", "false");
    if (rc == 0)
        rc = set(p, "__otel__", "true");
    return rc;
}

/* ---- into a batch ---------------------------------------------------------------------------- */

struct scratch {
    struct hs_arena *groups; /* one profile's grouping */
    struct hs_arena *tree;   /* one item's pprof and its summary's scratch */
};

static int add_profile(struct hs_profiles *b, struct hs_otlp_request *r, uint32_t k,
                       struct scratch *s, char *err, size_t errlen)
{
    struct op_groups g;
    hs_arena_reset(s->groups);
    if (hs_otlp_groups(r, k, s->groups, &g))
        return hs_pprof_errf(err, errlen, HS_ENOMEM, "out of memory");
    for (uint32_t gi = 0; gi < g.n; gi++) {
        struct op_pprof pp;
        hs_arena_reset(s->tree);
        int rc = hs_otlp_build_pprof(r, k, g.of_sample, gi, 0, s->tree, &pp);
        if (rc)
            return hs_pprof_errf(err, errlen, rc,
                                 "profiles[%u]: converted profile exceeds the memory limit", k);
        struct hs_profile *p = hs_profile_new();
        if (!p)
            return hs_pprof_errf(err, errlen, HS_ENOMEM, "out of memory");
        p->otlp_index = k;
        if ((rc = item_labels(p, r, &r->profiles[k], g.names[gi], pp.name)) ||
            (rc = hs_pprof_summarize_pb(pp.pb, s->tree, p, err, errlen))) {
            hs_profile_free(p);
            return rc == HS_ENOMEM ? hs_pprof_errf(err, errlen, rc, "out of memory") : rc;
        }
        if ((rc = hs_profiles_add(b, p))) /* takes p */
            return hs_pprof_errf(err, errlen, rc, "out of memory");
    }
    return 0;
}

static void drop_items(struct hs_profiles *b)
{
    for (uint32_t i = 0; i < b->count; i++)
        hs_profile_free(b->items[i]);
    b->count = 0;
    b->bytes = 0;
}

/* Takes data (malloc'd): the batch's request on success, freed on failure. */
static int decode_owned(struct hs_profiles *b, uint8_t *data, size_t len,
                        const struct hs_otlp_profiles_limits *lim, char *err, size_t errlen)
{
    struct hs_otlp_request *r;
    int rc = hs_otlp_request_parse(data, len, lim, &r, err, errlen);
    if (rc) {
        free(data);
        return rc;
    }
    struct scratch s = {hs_arena_new(4096, 0), hs_arena_new(65536, OP_TREE_CAP(len))};
    if (!s.groups || !s.tree)
        rc = hs_pprof_errf(err, errlen, HS_ENOMEM, "out of memory");
    for (uint32_t k = 0; rc == 0 && k < r->nprofiles; k++)
        rc = add_profile(b, r, k, &s, err, errlen);
    uint32_t nprofiles = r->nprofiles;
    hs_arena_free(s.groups);
    hs_arena_free(s.tree);
    hs_otlp_request_free(r);
    if (rc) {
        drop_items(b);
        free(data);
        return rc;
    }
    b->format = HS_PROFILES_OTLP;
    b->request = data;
    b->request_len = len;
    b->request_profiles = nprofiles;
    b->bytes += len;
    return 0;
}

int hs_otlp_profiles_decode(struct hs_profiles *b, const uint8_t *data, size_t len,
                            const struct hs_otlp_profiles_limits *lim, char *err, size_t errlen)
{
    if (lim && lim->max_decompressed && len > lim->max_decompressed)
        return hs_pprof_errf(err, errlen, HS_E2BIG,
                             "request of %zu bytes exceeds max_decompressed (%llu)", len,
                             (unsigned long long)lim->max_decompressed);
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return hs_pprof_errf(err, errlen, HS_ENOMEM, "out of memory");
    if (len)
        memcpy(copy, data, len);
    return decode_owned(b, copy, len, lim, err, errlen);
}

/* OTLP/JSON goes through the traces' converter with this request's descriptors. When the
 * memory-bounded reader (pdata/pb_json.h) replaces it, this is the one call to change: its opts
 * take REQ_DESC, hex_ids, and limits on Profile.samples and the dictionary tables. */
int hs_otlp_profiles_decode_json(struct hs_profiles *b, const char *json, size_t len,
                                 const struct hs_otlp_profiles_limits *lim, char *err,
                                 size_t errlen)
{
    struct hs_buf wire = {0};
    int rc = hs_otlp_json_to_wire_desc(&REQ_DESC, json, len, &wire, err, errlen);
    if (rc) {
        hs_buf_free(&wire);
        return rc;
    }
    if (!wire.data && hs_buf_reserve(&wire, 1) != 0)
        return hs_pprof_errf(err, errlen, HS_ENOMEM, "out of memory");
    return decode_owned(b, wire.data, wire.len, lim, err, errlen);
}

int hs_profiles_to_pprof(struct hs_profiles *b, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || !errlen)
        err = dummy, errlen = sizeof(dummy);
    err[0] = '\0';
    uint32_t todo = 0;
    for (uint32_t i = 0; b->format == HS_PROFILES_OTLP && i < b->count; i++)
        todo += b->items[i]->raw == NULL;
    if (todo == 0)
        return 0;
    /* the bytes passed the receiver's limits once; the attribute nesting is the one limit that
     * also bounds the decoder's recursion, so it is the one given again (as high as any) */
    static const struct hs_otlp_profiles_limits again = {.max_value_depth = 1u << 20};
    struct hs_otlp_request *r;
    int rc = hs_otlp_request_parse(b->request, b->request_len, &again, &r, err, errlen);
    if (rc)
        return rc; /* not for a batch hs_otlp_profiles_decode made: its bytes passed this */
    struct hs_arena *ga = hs_arena_new(4096, 0);
    struct hs_arena *ta = hs_arena_new(65536, OP_TREE_CAP(b->request_len));
    struct hs_buf gz = {0};
    rc = ga && ta ? 0 : HS_ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < b->count; i++) {
        struct hs_profile *p = b->items[i];
        if (p->raw)
            continue;
        hs_arena_reset(ga);
        hs_arena_reset(ta);
        rc = hs_otlp_convert(r, p->otlp_index, p->service, p->from_ns, ga, ta, &gz, err, errlen);
        if (rc == 0 && (rc = hs_profile_set_raw(p, gz.data, gz.len)) == 0)
            b->bytes += gz.len;
    }
    if (rc == HS_ENOMEM)
        snprintf(err, errlen, "out of memory");
    hs_buf_free(&gz);
    hs_arena_free(ga);
    hs_arena_free(ta);
    hs_otlp_request_free(r);
    return rc;
}
