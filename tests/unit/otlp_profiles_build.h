/* otlp_profiles_build.h: hand-built ExportProfilesServiceRequests for the tests, with protobuf-c
 * (the reference encoder): a dictionary whose tables start with their zero entries, functions and
 * locations made per name, stacks given root first, links, attributes, resources, scopes,
 * profiles and samples. Everything lives in one arena. */
#ifndef HS_TEST_OTLP_PROFILES_BUILD_H
#define HS_TEST_OTLP_PROFILES_BUILD_H

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest OReq;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary ODict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles ORes;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles OScope;
typedef Opentelemetry__Proto__Profiles__V1development__Profile OProf;
typedef Opentelemetry__Proto__Profiles__V1development__Sample OSample;
typedef Opentelemetry__Proto__Profiles__V1development__Stack OStack;
typedef Opentelemetry__Proto__Profiles__V1development__Location OLoc;
typedef Opentelemetry__Proto__Profiles__V1development__Line OLine;
typedef Opentelemetry__Proto__Profiles__V1development__Function OFunc;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping OMap;
typedef Opentelemetry__Proto__Profiles__V1development__Link OLink;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType OVT;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit OKVU;
typedef Opentelemetry__Proto__Common__V1__AnyValue OAny;
typedef Opentelemetry__Proto__Common__V1__KeyValue OKV;

#define OB_MAX 1024

struct ob {
    struct hs_arena *a;
    OReq req;
    ODict dict;
    char *strs[OB_MAX];
    OMap *maps[OB_MAX];
    OLoc *locs[OB_MAX];
    OFunc *funcs[OB_MAX];
    OLink *links[OB_MAX];
    OKVU *attrs[OB_MAX];
    OStack *stacks[OB_MAX];
    ORes *res[16];
};

static inline void *ob_zalloc(struct ob *b, size_t n)
{
    void *p = hs_arena_alloc(b->a, n ? n : 1);
    memset(p, 0, n ? n : 1);
    return p;
}

static inline int32_t ob_str(struct ob *b, const char *s)
{
    for (size_t i = 0; i < b->dict.n_string_table; i++)
        if (strcmp(b->strs[i], s) == 0)
            return (int32_t)i;
    b->strs[b->dict.n_string_table] = hs_arena_strndup(b->a, s, strlen(s));
    return (int32_t)b->dict.n_string_table++;
}

static inline struct ob *ob_new(void)
{
    struct ob *b = calloc(1, sizeof(*b));
    b->a = hs_arena_new(4096, 0);
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
        &b->req);
    opentelemetry__proto__profiles__v1development__profiles_dictionary__init(&b->dict);
    ODict *d = &b->dict;
    d->string_table = b->strs, d->mapping_table = b->maps, d->location_table = b->locs;
    d->function_table = b->funcs, d->link_table = b->links, d->attribute_table = b->attrs;
    d->stack_table = b->stacks;
    b->req.dictionary = d;
    b->req.resource_profiles = b->res;
    /* the zero entries: "", Mapping{}, Location{}, Function{}, Link{zeros}, KeyValueAndUnit{},
     * Stack{} */
    b->strs[d->n_string_table++] = "";
    b->maps[0] = ob_zalloc(b, sizeof(OMap));
    opentelemetry__proto__profiles__v1development__mapping__init(b->maps[0]);
    b->locs[0] = ob_zalloc(b, sizeof(OLoc));
    opentelemetry__proto__profiles__v1development__location__init(b->locs[0]);
    b->funcs[0] = ob_zalloc(b, sizeof(OFunc));
    opentelemetry__proto__profiles__v1development__function__init(b->funcs[0]);
    b->links[0] = ob_zalloc(b, sizeof(OLink));
    opentelemetry__proto__profiles__v1development__link__init(b->links[0]);
    b->links[0]->trace_id = (ProtobufCBinaryData){16, ob_zalloc(b, 16)};
    b->links[0]->span_id = (ProtobufCBinaryData){8, ob_zalloc(b, 8)};
    b->attrs[0] = ob_zalloc(b, sizeof(OKVU));
    opentelemetry__proto__profiles__v1development__key_value_and_unit__init(b->attrs[0]);
    b->stacks[0] = ob_zalloc(b, sizeof(OStack));
    opentelemetry__proto__profiles__v1development__stack__init(b->stacks[0]);
    d->n_mapping_table = d->n_location_table = d->n_function_table = d->n_link_table = 1;
    d->n_attribute_table = d->n_stack_table = 1;
    return b;
}

static inline void ob_free(struct ob *b)
{
    hs_arena_free(b->a);
    free(b);
}

static inline int32_t ob_mapping(struct ob *b, const char *file)
{
    OMap *m = ob_zalloc(b, sizeof(*m));
    opentelemetry__proto__profiles__v1development__mapping__init(m);
    m->filename_strindex = ob_str(b, file);
    m->memory_start = 0x400000;
    m->memory_limit = 0x800000;
    b->maps[b->dict.n_mapping_table] = m;
    return (int32_t)b->dict.n_mapping_table++;
}

/* The function named `name` (file `<name>.go`), made once. */
static inline int32_t ob_func(struct ob *b, const char *name)
{
    int32_t n = ob_str(b, name);
    for (size_t i = 1; i < b->dict.n_function_table; i++)
        if (b->funcs[i]->name_strindex == n)
            return (int32_t)i;
    char file[128];
    snprintf(file, sizeof(file), "%s.go", name);
    OFunc *f = ob_zalloc(b, sizeof(*f));
    opentelemetry__proto__profiles__v1development__function__init(f);
    f->name_strindex = n;
    f->system_name_strindex = n;
    f->filename_strindex = ob_str(b, file);
    f->start_line = 10;
    b->funcs[b->dict.n_function_table] = f;
    return (int32_t)b->dict.n_function_table++;
}

/* A location whose lines are the functions named, innermost (inlined) first. */
static inline int32_t ob_loc_lines(struct ob *b, int32_t mapping, size_t n,
                                   const char *const *names)
{
    OLoc *l = ob_zalloc(b, sizeof(*l));
    opentelemetry__proto__profiles__v1development__location__init(l);
    l->mapping_index = mapping;
    l->address = 0x401000 + 16 * b->dict.n_location_table;
    l->n_lines = n;
    l->lines = ob_zalloc(b, (n ? n : 1) * sizeof(*l->lines));
    for (size_t i = 0; i < n; i++) {
        OLine *ln = ob_zalloc(b, sizeof(*ln));
        opentelemetry__proto__profiles__v1development__line__init(ln);
        ln->function_index = ob_func(b, names[i]);
        ln->line = 20 + (int64_t)i;
        l->lines[i] = ln;
    }
    b->locs[b->dict.n_location_table] = l;
    return (int32_t)b->dict.n_location_table++;
}

/* The single-line location of function `name`, made once. */
static inline int32_t ob_loc(struct ob *b, const char *name)
{
    int32_t f = ob_func(b, name);
    for (size_t i = 1; i < b->dict.n_location_table; i++)
        if (b->locs[i]->n_lines == 1 && b->locs[i]->lines[0]->function_index == f)
            return (int32_t)i;
    return ob_loc_lines(b, 0, 1, &name);
}

static inline int32_t ob_stack_idx(struct ob *b, size_t n, const int32_t *leaf_first)
{
    OStack *s = ob_zalloc(b, sizeof(*s));
    opentelemetry__proto__profiles__v1development__stack__init(s);
    s->n_location_indices = n;
    s->location_indices = ob_zalloc(b, (n ? n : 1) * sizeof(int32_t));
    memcpy(s->location_indices, leaf_first, n * sizeof(int32_t));
    b->stacks[b->dict.n_stack_table] = s;
    return (int32_t)b->dict.n_stack_table++;
}

/* A stack of the functions named ROOT FIRST in "a;b;c" (stored leaf first, as OTLP has it). */
static inline int32_t ob_stack(struct ob *b, const char *folded)
{
    int32_t ids[128];
    size_t n = 0;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", folded);
    for (char *save = NULL, *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save))
        ids[n++] = ob_loc(b, t);
    int32_t leaf_first[128];
    for (size_t i = 0; i < n; i++)
        leaf_first[i] = ids[n - 1 - i];
    return ob_stack_idx(b, n, leaf_first);
}

static inline ProtobufCBinaryData ob_bytes(struct ob *b, size_t n, uint8_t seed)
{
    uint8_t *p = ob_zalloc(b, n);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i);
    return (ProtobufCBinaryData){n, p};
}

/* A link whose span id is the 8 bytes seed, seed+1, ... and trace id 16 bytes from seed + 0x40. */
static inline int32_t ob_link(struct ob *b, uint8_t seed)
{
    OLink *l = ob_zalloc(b, sizeof(*l));
    opentelemetry__proto__profiles__v1development__link__init(l);
    l->trace_id = ob_bytes(b, 16, (uint8_t)(seed + 0x40));
    l->span_id = ob_bytes(b, 8, seed);
    b->links[b->dict.n_link_table] = l;
    return (int32_t)b->dict.n_link_table++;
}

static inline OAny *ob_any_str(struct ob *b, const char *v)
{
    OAny *a = ob_zalloc(b, sizeof(*a));
    opentelemetry__proto__common__v1__any_value__init(a);
    a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    a->string_value = hs_arena_strndup(b->a, v, strlen(v));
    return a;
}

static inline OAny *ob_any_int(struct ob *b, int64_t v)
{
    OAny *a = ob_zalloc(b, sizeof(*a));
    opentelemetry__proto__common__v1__any_value__init(a);
    a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    a->int_value = v;
    return a;
}

/* An attribute_table entry key = value (a string). */
static inline int32_t ob_attr_value(struct ob *b, const char *key, OAny *v)
{
    OKVU *a = ob_zalloc(b, sizeof(*a));
    opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a);
    a->key_strindex = ob_str(b, key);
    a->value = v;
    b->attrs[b->dict.n_attribute_table] = a;
    return (int32_t)b->dict.n_attribute_table++;
}

static inline int32_t ob_attr(struct ob *b, const char *key, const char *value)
{
    return ob_attr_value(b, key, ob_any_str(b, value));
}

static inline OKV *ob_kv(struct ob *b, const char *key, OAny *v)
{
    OKV *kv = ob_zalloc(b, sizeof(*kv));
    opentelemetry__proto__common__v1__key_value__init(kv);
    kv->key = hs_arena_strndup(b->a, key, strlen(key));
    kv->value = v;
    return kv;
}

/* A resource with these attributes (KeyValue pointers, NULL-terminated). */
static inline ORes *ob_resource(struct ob *b, ...)
{
    ORes *rp = ob_zalloc(b, sizeof(*rp));
    opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
    rp->resource = ob_zalloc(b, sizeof(*rp->resource));
    opentelemetry__proto__resource__v1__resource__init(rp->resource);
    rp->resource->attributes = ob_zalloc(b, 32 * sizeof(OKV *));
    va_list ap;
    va_start(ap, b);
    for (OKV *kv; (kv = va_arg(ap, OKV *));)
        rp->resource->attributes[rp->resource->n_attributes++] = kv;
    va_end(ap);
    rp->scope_profiles = ob_zalloc(b, 8 * sizeof(OScope *));
    b->res[b->req.n_resource_profiles++] = rp;
    return rp;
}

static inline OScope *ob_scope(struct ob *b, ORes *rp, const char *name)
{
    OScope *sp = ob_zalloc(b, sizeof(*sp));
    opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
    sp->scope = ob_zalloc(b, sizeof(*sp->scope));
    opentelemetry__proto__common__v1__instrumentation_scope__init(sp->scope);
    sp->scope->name = hs_arena_strndup(b->a, name, strlen(name));
    sp->scope->attributes = ob_zalloc(b, 8 * sizeof(OKV *));
    sp->profiles = ob_zalloc(b, 8 * sizeof(OProf *));
    rp->scope_profiles[rp->n_scope_profiles++] = sp;
    return sp;
}

static inline OVT *ob_vt(struct ob *b, const char *type, const char *unit)
{
    OVT *v = ob_zalloc(b, sizeof(*v));
    opentelemetry__proto__profiles__v1development__value_type__init(v);
    v->type_strindex = ob_str(b, type);
    v->unit_strindex = ob_str(b, unit);
    return v;
}

/* A profile of sample type type/unit; ptype NULL for no period type. */
static inline OProf *ob_profile(struct ob *b, OScope *sp, const char *type, const char *unit,
                                const char *ptype, const char *punit, int64_t period,
                                uint64_t time_ns, uint64_t duration_ns)
{
    OProf *p = ob_zalloc(b, sizeof(*p));
    opentelemetry__proto__profiles__v1development__profile__init(p);
    p->sample_type = ob_vt(b, type, unit);
    if (ptype)
        p->period_type = ob_vt(b, ptype, punit);
    p->period = period;
    p->time_unix_nano = time_ns;
    p->duration_nano = duration_ns;
    p->samples = ob_zalloc(b, OB_MAX * sizeof(OSample *));
    sp->profiles[sp->n_profiles++] = p;
    return p;
}

/* A sample of one value on stack `stack`, linked to `link` (0: none), with attribute indexes
 * (a -1-terminated list). */
static inline OSample *ob_sample(struct ob *b, OProf *p, int32_t stack, int64_t value, int32_t link,
                                 ...)
{
    OSample *s = ob_zalloc(b, sizeof(*s));
    opentelemetry__proto__profiles__v1development__sample__init(s);
    s->stack_index = stack;
    s->link_index = link;
    s->n_values = 1;
    s->values = ob_zalloc(b, sizeof(int64_t));
    s->values[0] = value;
    s->attribute_indices = ob_zalloc(b, 16 * sizeof(int32_t));
    va_list ap;
    va_start(ap, link);
    for (int a; (a = va_arg(ap, int)) >= 0;)
        s->attribute_indices[s->n_attribute_indices++] = a;
    va_end(ap);
    p->samples[p->n_samples++] = s;
    return s;
}

static inline void ob_pack(struct ob *b, struct hs_buf *out)
{
    out->len = 0;
    size_t n =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(
            &b->req);
    hs_buf_reserve(out, n + 1);
    out->len =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(
            &b->req, out->data);
}

/* The exporter tests' request: checkout's CPU profile (3 samples of main;handle;query linked to
 * a span, then `gc` samples of main;gc when gc > 0) and its alloc_space profile (4096 bytes of
 * main;handle), packed into `wire` and decoded into a batch for `tenant`; NULL if it does not
 * decode. */
static inline struct hs_profiles *ob_checkout_batch(const char *tenant, struct hs_buf *wire,
                                                    int64_t gc)
{
    struct ob *b = ob_new();
    ORes *r = ob_resource(b, ob_kv(b, "service.name", ob_any_str(b, "checkout")), NULL);
    OScope *sc = ob_scope(b, r, "ebpf");
    OProf *cpu = ob_profile(b, sc, "samples", "count", "cpu", "nanoseconds", 10000000,
                            1700000000000000000ull, 10000000000ull);
    ob_sample(b, cpu, ob_stack(b, "main;handle;query"), 3, ob_link(b, 7), -1);
    if (gc > 0)
        ob_sample(b, cpu, ob_stack(b, "main;gc"), gc, 0, -1);
    OProf *alloc = ob_profile(b, sc, "alloc_space", "bytes", "space", "bytes", 524288,
                              1700000000000000000ull, 10000000000ull);
    ob_sample(b, alloc, ob_stack(b, "main;handle"), 4096, 0, -1);
    ob_pack(b, wire);
    ob_free(b);
    struct hs_profiles *batch = hs_profiles_new(tenant);
    char err[256];
    if (batch && hs_otlp_profiles_decode(batch, wire->data, wire->len, NULL, err, sizeof(err))) {
        hs_profiles_unref(batch);
        return NULL;
    }
    return batch;
}

#endif
