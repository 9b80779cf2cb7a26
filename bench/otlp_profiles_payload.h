/* otlp_profiles_payload.h: the same profile content as OTLP profiles, for benchmarks and fuzz
 * seeds: a pprof (pprof_payload.h's) rewritten as the Collector's pprof receiver does, one OTLP
 * Profile per sample type sharing one dictionary (strings, mappings, functions and locations
 * copied, stacks and links made once each), `span_id` labels as links (a trace id made from the
 * span id), other string labels as sample attributes. Aborts on bad input or no memory. */
#ifndef HS_BENCH_OTLP_PROFILES_PAYLOAD_H
#define HS_BENCH_OTLP_PROFILES_PAYLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "perftools/profiles/profile.pb-c.h"

struct op_gen {
    struct hs_arena *a;
    const Perftools__Profiles__Profile *pp;
    Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary d;
    uint64_t *keys; /* stacks and links: open addressing over a hash of their content */
    int32_t *vals;
    size_t mask;
};

static inline void *op_gen_alloc(struct op_gen *g, size_t n)
{
    void *p = hs_arena_alloc(g->a, n ? n : 1);
    if (!p)
        abort();
    memset(p, 0, n ? n : 1);
    return p;
}

static inline int32_t op_gen_index_of(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++) /* setup only: linear is fine */
        if (ids[i] == id)
            return (int32_t)i + 1;
    abort();
}

/* Index of an interned entry keyed by h in [1, table size), or -1 with *slot for a new one. */
static inline int32_t op_gen_find(struct op_gen *g, uint64_t h, size_t *slot)
{
    h |= 1;
    size_t i = (size_t)(h * 0x9e3779b97f4a7c15ULL) & g->mask;
    while (g->keys[i] && g->keys[i] != h)
        i = (i + 1) & g->mask;
    *slot = i;
    if (g->keys[i] == h)
        return g->vals[i];
    g->keys[i] = h;
    return -1;
}

static inline uint64_t op_gen_hash(const void *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ULL;
    return h;
}

static inline void op_gen_tables(struct op_gen *g, uint64_t *loc_ids, uint64_t *fn_ids)
{
    const Perftools__Profiles__Profile *pp = g->pp;
    Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = &g->d;
    d->n_string_table = pp->n_string_table;
    d->string_table = pp->string_table;
    d->mapping_table = op_gen_alloc(g, (pp->n_mapping + 1) * sizeof(void *));
    d->function_table = op_gen_alloc(g, (pp->n_function + 1) * sizeof(void *));
    d->location_table = op_gen_alloc(g, (pp->n_location + 1) * sizeof(void *));
    uint64_t *map_ids = op_gen_alloc(g, (pp->n_mapping + 1) * sizeof(uint64_t));
    d->n_mapping_table = pp->n_mapping + 1;
    d->n_function_table = pp->n_function + 1;
    d->n_location_table = pp->n_location + 1;
    for (size_t i = 0; i <= pp->n_mapping; i++) {
        Opentelemetry__Proto__Profiles__V1development__Mapping *m = op_gen_alloc(g, sizeof(*m));
        opentelemetry__proto__profiles__v1development__mapping__init(m);
        if (i) {
            const Perftools__Profiles__Mapping *src = pp->mapping[i - 1];
            map_ids[i - 1] = src->id;
            m->memory_start = src->memory_start, m->memory_limit = src->memory_limit;
            m->file_offset = src->file_offset, m->filename_strindex = (int32_t)src->filename;
        }
        d->mapping_table[i] = m;
    }
    for (size_t i = 0; i <= pp->n_function; i++) {
        Opentelemetry__Proto__Profiles__V1development__Function *f = op_gen_alloc(g, sizeof(*f));
        opentelemetry__proto__profiles__v1development__function__init(f);
        if (i) {
            const Perftools__Profiles__Function *src = pp->function[i - 1];
            fn_ids[i - 1] = src->id;
            f->name_strindex = (int32_t)src->name;
            f->system_name_strindex = (int32_t)src->system_name;
            f->filename_strindex = (int32_t)src->filename, f->start_line = src->start_line;
        }
        d->function_table[i] = f;
    }
    for (size_t i = 0; i <= pp->n_location; i++) {
        Opentelemetry__Proto__Profiles__V1development__Location *l = op_gen_alloc(g, sizeof(*l));
        opentelemetry__proto__profiles__v1development__location__init(l);
        if (i) {
            const Perftools__Profiles__Location *src = pp->location[i - 1];
            loc_ids[i - 1] = src->id;
            l->mapping_index =
                src->mapping_id ? op_gen_index_of(map_ids, pp->n_mapping, src->mapping_id) : 0;
            l->address = src->address;
            l->n_lines = src->n_line;
            l->lines = op_gen_alloc(g, src->n_line * sizeof(void *));
            for (size_t j = 0; j < src->n_line; j++) {
                Opentelemetry__Proto__Profiles__V1development__Line *ln =
                    op_gen_alloc(g, sizeof(*ln));
                opentelemetry__proto__profiles__v1development__line__init(ln);
                ln->function_index =
                    op_gen_index_of(fn_ids, pp->n_function, src->line[j]->function_id);
                ln->line = src->line[j]->line;
                l->lines[j] = ln;
            }
        }
        d->location_table[i] = l;
    }
}

/* The stack of a pprof sample, interned. */
static inline int32_t op_gen_stack(struct op_gen *g, const Perftools__Profiles__Sample *s,
                                   const uint64_t *loc_ids)
{
    size_t slot;
    uint64_t h = op_gen_hash(s->location_id, s->n_location_id * sizeof(uint64_t), 0xcbf29ce4);
    int32_t idx = op_gen_find(g, h, &slot);
    if (idx >= 0)
        return idx;
    Opentelemetry__Proto__Profiles__V1development__Stack *st = op_gen_alloc(g, sizeof(*st));
    opentelemetry__proto__profiles__v1development__stack__init(st);
    st->n_location_indices = s->n_location_id;
    st->location_indices = op_gen_alloc(g, s->n_location_id * sizeof(int32_t));
    for (size_t j = 0; j < s->n_location_id; j++)
        st->location_indices[j] = op_gen_index_of(loc_ids, g->pp->n_location, s->location_id[j]);
    g->d.stack_table[g->d.n_stack_table] = st;
    return g->vals[slot] = (int32_t)g->d.n_stack_table++;
}

/* A span_id label's link (16 hex digits; its trace id repeats them), or another string label's
 * attribute, interned; -1 for a label that is neither. */
static inline int32_t op_gen_label(struct op_gen *g, const Perftools__Profiles__Label *lb,
                                   bool *is_link)
{
    const char *key = g->pp->string_table[lb->key], *v = g->pp->string_table[lb->str];
    *is_link = strcmp(key, "span_id") == 0 && strlen(v) == 16;
    if (!*is_link && (lb->str == 0 || lb->num_unit || lb->num))
        return -1;
    size_t slot;
    uint64_t h = op_gen_hash(key, strlen(key), *is_link ? 7 : 11);
    int32_t idx = op_gen_find(g, op_gen_hash(v, strlen(v), h), &slot);
    if (idx >= 0)
        return idx;
    Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = &g->d;
    if (*is_link) {
        Opentelemetry__Proto__Profiles__V1development__Link *l = op_gen_alloc(g, sizeof(*l));
        opentelemetry__proto__profiles__v1development__link__init(l);
        uint8_t *id = op_gen_alloc(g, 24);
        for (int i = 0; i < 8; i++) {
            char b[3] = {v[2 * i], v[2 * i + 1], 0};
            id[i] = id[8 + i] = id[16 + i] = (uint8_t)strtoul(b, NULL, 16);
        }
        l->span_id = (ProtobufCBinaryData){8, id};
        l->trace_id = (ProtobufCBinaryData){16, id + 8};
        d->link_table[d->n_link_table] = l;
        return g->vals[slot] = (int32_t)d->n_link_table++;
    }
    Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit *a = op_gen_alloc(g, sizeof(*a));
    opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a);
    a->key_strindex = (int32_t)lb->key;
    a->value = op_gen_alloc(g, sizeof(*a->value));
    opentelemetry__proto__common__v1__any_value__init(a->value);
    a->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX;
    a->value->string_value_strindex = (int32_t)lb->str;
    d->attribute_table[d->n_attribute_table] = a;
    return g->vals[slot] = (int32_t)d->n_attribute_table++;
}

/* One Profile per sample type of the pprof, its samples pointing into the dictionary. */
static inline Opentelemetry__Proto__Profiles__V1development__Profile *
op_gen_profile(struct op_gen *g, size_t t, const int32_t *stacks, const int32_t *links,
               int32_t **attrs, const size_t *nattrs)
{
    const Perftools__Profiles__Profile *pp = g->pp;
    Opentelemetry__Proto__Profiles__V1development__Profile *p = op_gen_alloc(g, sizeof(*p));
    opentelemetry__proto__profiles__v1development__profile__init(p);
    p->sample_type = op_gen_alloc(g, sizeof(*p->sample_type));
    opentelemetry__proto__profiles__v1development__value_type__init(p->sample_type);
    p->sample_type->type_strindex = (int32_t)pp->sample_type[t]->type;
    p->sample_type->unit_strindex = (int32_t)pp->sample_type[t]->unit;
    if (pp->period_type) {
        p->period_type = op_gen_alloc(g, sizeof(*p->period_type));
        opentelemetry__proto__profiles__v1development__value_type__init(p->period_type);
        p->period_type->type_strindex = (int32_t)pp->period_type->type;
        p->period_type->unit_strindex = (int32_t)pp->period_type->unit;
    }
    p->period = pp->period;
    p->time_unix_nano = (uint64_t)pp->time_nanos;
    p->duration_nano = (uint64_t)pp->duration_nanos;
    p->n_samples = pp->n_sample;
    p->samples = op_gen_alloc(g, pp->n_sample * sizeof(void *));
    for (size_t i = 0; i < pp->n_sample; i++) {
        Opentelemetry__Proto__Profiles__V1development__Sample *s = op_gen_alloc(g, sizeof(*s));
        opentelemetry__proto__profiles__v1development__sample__init(s);
        s->stack_index = stacks[i];
        s->link_index = links[i];
        s->n_attribute_indices = nattrs[i];
        s->attribute_indices = attrs[i];
        s->n_values = 1;
        s->values = &pp->sample[i]->value[t];
        p->samples[i] = s;
    }
    return p;
}

/* The OTLP request holding the content of pprof `raw` (uncompressed), for `service`, into out. */
static inline void hs_otlp_profiles_from_pprof(const uint8_t *raw, size_t len, const char *service,
                                               struct hs_buf *out)
{
    Perftools__Profiles__Profile *pp = perftools__profiles__profile__unpack(NULL, len, raw);
    if (!pp)
        abort();
    struct op_gen g = {.a = hs_arena_new(1 << 20, 0), .pp = pp};
    opentelemetry__proto__profiles__v1development__profiles_dictionary__init(&g.d);
    size_t cap = 64, ns = pp->n_sample;
    while (cap < 16 * (ns + 1)) /* stacks, links and attributes: at most 6 per sample */
        cap *= 2;
    g.keys = op_gen_alloc(&g, cap * sizeof(uint64_t));
    g.vals = op_gen_alloc(&g, cap * sizeof(int32_t));
    g.mask = cap - 1;
    uint64_t *loc_ids = op_gen_alloc(&g, (pp->n_location + 1) * sizeof(uint64_t));
    uint64_t *fn_ids = op_gen_alloc(&g, (pp->n_function + 1) * sizeof(uint64_t));
    op_gen_tables(&g, loc_ids, fn_ids);
    /* zero entries first: Stack{}, Link{zeros}, KeyValueAndUnit{} */
    g.d.stack_table = op_gen_alloc(&g, (ns + 1) * sizeof(void *));
    g.d.link_table = op_gen_alloc(&g, (ns + 1) * sizeof(void *));
    g.d.attribute_table = op_gen_alloc(&g, (ns * 4 + 1) * sizeof(void *));
    g.d.stack_table[g.d.n_stack_table++] = op_gen_alloc(&g, sizeof(*g.d.stack_table[0]));
    opentelemetry__proto__profiles__v1development__stack__init(g.d.stack_table[0]);
    g.d.link_table[g.d.n_link_table++] = op_gen_alloc(&g, sizeof(*g.d.link_table[0]));
    opentelemetry__proto__profiles__v1development__link__init(g.d.link_table[0]);
    g.d.link_table[0]->trace_id = (ProtobufCBinaryData){16, op_gen_alloc(&g, 16)};
    g.d.link_table[0]->span_id = (ProtobufCBinaryData){8, op_gen_alloc(&g, 8)};
    g.d.attribute_table[g.d.n_attribute_table++] =
        op_gen_alloc(&g, sizeof(*g.d.attribute_table[0]));
    opentelemetry__proto__profiles__v1development__key_value_and_unit__init(g.d.attribute_table[0]);

    int32_t *stacks = op_gen_alloc(&g, ns * sizeof(int32_t)), *links = op_gen_alloc(&g, ns * 4);
    int32_t **attrs = op_gen_alloc(&g, ns * sizeof(int32_t *));
    size_t *nattrs = op_gen_alloc(&g, ns * sizeof(size_t));
    for (size_t i = 0; i < ns; i++) {
        const Perftools__Profiles__Sample *s = pp->sample[i];
        stacks[i] = op_gen_stack(&g, s, loc_ids);
        attrs[i] = op_gen_alloc(&g, (s->n_label ? s->n_label : 1) * sizeof(int32_t));
        if (s->n_label > 4)
            abort();
        for (size_t j = 0; j < s->n_label; j++) {
            bool is_link;
            int32_t idx = op_gen_label(&g, s->label[j], &is_link);
            if (is_link)
                links[i] = idx;
            else if (idx > 0)
                attrs[i][nattrs[i]++] = idx;
        }
    }

    Opentelemetry__Proto__Common__V1__AnyValue sv =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sv.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    sv.string_value = (char *)service;
    Opentelemetry__Proto__Common__V1__KeyValue
        kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        *kvp = &kv;
    kv.key = "service.name";
    kv.value = &sv;
    Opentelemetry__Proto__Resource__V1__Resource res =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    res.n_attributes = 1;
    res.attributes = &kvp;
    Opentelemetry__Proto__Profiles__V1development__ScopeProfiles sp =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SCOPE_PROFILES__INIT;
    Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *spp = &sp;
    sp.n_profiles = pp->n_sample_type;
    sp.profiles = op_gen_alloc(&g, pp->n_sample_type * sizeof(void *));
    for (size_t t = 0; t < pp->n_sample_type; t++)
        sp.profiles[t] = op_gen_profile(&g, t, stacks, links, attrs, nattrs);
    Opentelemetry__Proto__Profiles__V1development__ResourceProfiles rp =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__RESOURCE_PROFILES__INIT;
    Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rpp = &rp;
    rp.resource = &res;
    rp.n_scope_profiles = 1;
    rp.scope_profiles = &spp;
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest req =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
    req.n_resource_profiles = 1;
    req.resource_profiles = &rpp;
    req.dictionary = &g.d;
    size_t n =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(
            &req);
    out->len = 0;
    if (hs_buf_reserve(out, n) != 0)
        abort();
    out->len =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(
            &req, out->data);
    hs_arena_free(g.a);
    perftools__profiles__profile__free_unpacked(pp, NULL);
}

#endif
