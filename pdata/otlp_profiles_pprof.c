/* otlp_profiles_pprof.c: one OTLP Profile (with the request's dictionary) as the pprof Pyroscope's
 * own OTLP ingestion makes of it (grafana/pyroscope pkg/ingester/otlp/convert.go): the tree is
 * built once per batch item, summarized by the pprof code, and packed and gzipped only when a
 * Pyroscope exporter asks (hs_profiles_to_pprof, in otlp_profiles.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/compress.h"
#include "core/errors.h"
#include "pdata/otlp_profiles_int.h"

typedef Perftools__Profiles__Label pp_label;

enum cv_mode {
    CV_NONE,
    CV_SAMPLES_TO_NANOS, /* samples/count sampled every `period` cpu nanoseconds: cpu time */
};

enum { FIX_CPU, FIX_NANOSECONDS, FIX_SPAN_ID, FIX_TRACE_ID, FIX_N };
static const char *const fixed_names[FIX_N] = {"cpu", "nanoseconds", "span_id", "trace_id"};

struct cv {
    struct hs_otlp_request *r;
    const op_dict *d;
    struct op_maps *m;
    struct hs_arena *a;
    pp_profile *pb;
    size_t cap_str;
    int32_t *loc_src; /* pprof location i -> its dictionary index (for the mapping flags) */
    int64_t fixed[FIX_N];
    enum cv_mode mode;
    bool full; /* an allocation failed: the arena's bound */
};

static void *cv_alloc(struct cv *c, size_t n, size_t size)
{
    size_t bytes = n * size;
    void *p = size && n > SIZE_MAX / size ? NULL : hs_arena_alloc(c->a, bytes ? bytes : 1);
    if (!p)
        c->full = true;
    return p;
}

/* ---- the conversion maps, made once per request --------------------------------------------- */

static void maps_free(struct op_maps *m)
{
    void *arrays[] = {m->str_gen,  m->fn_gen,   m->loc_gen,    m->map_gen,   m->stk_gen,
                      m->attr_gen, m->link_gen, m->str_idx,    m->fn_id,     m->loc_id,
                      m->map_id,   m->stk_ids,  m->attr_label, m->link_label};
    for (size_t i = 0; i < HS_ARRAY_SIZE(arrays); i++)
        free(arrays[i]);
    free(m);
}

static int maps_init(struct hs_otlp_request *r)
{
    if (r->maps)
        return 0;
    const op_dict *d = r->dict;
    struct op_maps *m = calloc(1, sizeof(*m));
    if (!m)
        return HS_ENOMEM;
    size_t ns = d->n_string_table + 1, nf = d->n_function_table + 1, nl = d->n_location_table + 1,
           nm = d->n_mapping_table + 1, nk = d->n_stack_table + 1, na = d->n_attribute_table + 1,
           nn = d->n_link_table + 1;
    m->str_gen = calloc(ns, 4), m->str_idx = calloc(ns, 8);
    m->fn_gen = calloc(nf, 4), m->fn_id = calloc(nf, 8);
    m->loc_gen = calloc(nl, 4), m->loc_id = calloc(nl, 8);
    m->map_gen = calloc(nm, 4), m->map_id = calloc(nm, 8);
    m->stk_gen = calloc(nk, 4), m->stk_ids = calloc(nk, sizeof(uint64_t *));
    m->attr_gen = calloc(na, 4), m->attr_label = calloc(na, sizeof(void *));
    m->link_gen = calloc(nn, 4), m->link_label = calloc(2 * nn, sizeof(void *));
    if (!m->str_gen || !m->str_idx || !m->fn_gen || !m->fn_id || !m->loc_gen || !m->loc_id ||
        !m->map_gen || !m->map_id || !m->stk_gen || !m->stk_ids || !m->attr_gen || !m->attr_label ||
        !m->link_gen || !m->link_label) {
        maps_free(m);
        return HS_ENOMEM;
    }
    r->maps = m;
    return 0;
}

void hs_otlp_maps_free(struct op_maps *m)
{
    if (m)
        maps_free(m);
}

/* ---- strings ----------------------------------------------------------------------------------
 */

/* Appends s (which outlives the tree: the request's arena or c->a) to the pprof string table. */
static int64_t put_str(struct cv *c, const char *s)
{
    if (c->pb->n_string_table >= c->cap_str) {
        c->full = true;
        return 0;
    }
    c->pb->string_table[c->pb->n_string_table] = (char *)s;
    return (int64_t)c->pb->n_string_table++;
}

static int64_t dstr(struct cv *c, int32_t i)
{
    if (i == 0) /* "" */
        return 0;
    if (c->m->str_gen[i] != c->m->gen) {
        c->m->str_gen[i] = c->m->gen;
        c->m->str_idx[i] = put_str(c, c->d->string_table[i]);
    }
    return c->m->str_idx[i];
}

static int64_t fixed_str(struct cv *c, int which)
{
    if (c->fixed[which] < 0)
        c->fixed[which] = put_str(c, fixed_names[which]);
    return c->fixed[which];
}

static int64_t hex_str(struct cv *c, const ProtobufCBinaryData *b)
{
    if (b->len == 0)
        return 0;
    char *s = cv_alloc(c, 2 * b->len + 1, 1);
    if (!s)
        return 0;
    for (size_t i = 0; i < b->len; i++)
        snprintf(s + 2 * i, 3, "%02x", b->data[i]);
    return put_str(c, s);
}

/* An attribute value as a label value (hs_otlp_any_string's reading); 0 when empty. */
static int64_t value_str(struct cv *c, const op_any *v)
{
    char buf[24];
    const char *s = hs_otlp_any_string(c->r, v, buf);
    if (!*s)
        return 0;
    if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE)
        v = v->array_value->values[0];
    if (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX)
        return dstr(c, v->string_value_strindex);
    if (s == buf && !(s = hs_arena_strndup(c->a, buf, strlen(buf)))) {
        c->full = true;
        return 0;
    }
    return put_str(c, s);
}

/* ---- functions, mappings, locations, stacks -------------------------------------------------- */

static uint64_t fn_get(struct cv *c, int32_t fi)
{
    struct op_maps *m = c->m;
    if (m->fn_gen[fi] == m->gen)
        return m->fn_id[fi];
    const op_function *f = c->d->function_table[fi];
    Perftools__Profiles__Function *g = cv_alloc(c, 1, sizeof(*g));
    if (!g)
        return 0;
    perftools__profiles__function__init(g);
    g->id = c->pb->n_function + 1;
    g->name = dstr(c, f->name_strindex);
    g->system_name = dstr(c, f->system_name_strindex);
    g->filename = dstr(c, f->filename_strindex);
    g->start_line = f->start_line;
    c->pb->function[c->pb->n_function++] = g;
    m->fn_gen[fi] = m->gen;
    return m->fn_id[fi] = g->id;
}

/* Pyroscope takes the build id from the mapping's process.executable.build_id.gnu attribute. */
static int64_t build_id(struct cv *c, const op_mapping *om)
{
    for (size_t i = 0; i < om->n_attribute_indices; i++) {
        const op_kvu *a = c->d->attribute_table[om->attribute_indices[i]];
        if (strcmp(c->d->string_table[a->key_strindex], OP_BUILD_ID) == 0)
            return a->value ? value_str(c, a->value) : 0;
    }
    return 0;
}

static uint64_t map_get(struct cv *c, int32_t mi)
{
    struct op_maps *m = c->m;
    if (m->map_gen[mi] == m->gen)
        return m->map_id[mi];
    const op_mapping *om = c->d->mapping_table[mi];
    Perftools__Profiles__Mapping *g = cv_alloc(c, 1, sizeof(*g));
    if (!g)
        return 0;
    perftools__profiles__mapping__init(g);
    g->id = c->pb->n_mapping + 1;
    g->memory_start = om->memory_start;
    g->memory_limit = om->memory_limit;
    g->file_offset = om->file_offset;
    g->filename = dstr(c, om->filename_strindex);
    g->build_id = build_id(c, om);
    /* narrowed by the locations that use it, once all are known (finish_mappings) */
    g->has_functions = g->has_filenames = g->has_line_numbers = 1;
    c->pb->mapping[c->pb->n_mapping++] = g;
    m->map_gen[mi] = m->gen;
    return m->map_id[mi] = g->id;
}

static uint64_t loc_get(struct cv *c, int32_t li)
{
    struct op_maps *m = c->m;
    if (m->loc_gen[li] == m->gen)
        return m->loc_id[li];
    const op_location *ol = c->d->location_table[li];
    Perftools__Profiles__Location *g = cv_alloc(c, 1, sizeof(*g));
    Perftools__Profiles__Line *lines = cv_alloc(c, ol->n_lines, sizeof(*lines));
    Perftools__Profiles__Line **lp = cv_alloc(c, ol->n_lines, sizeof(*lp));
    if (!g || !lines || !lp)
        return 0;
    perftools__profiles__location__init(g);
    g->id = c->pb->n_location + 1;
    g->mapping_id = ol->mapping_index ? map_get(c, ol->mapping_index) : 0; /* 0: unknown */
    g->address = ol->address;
    for (size_t j = 0; j < ol->n_lines; j++) {
        perftools__profiles__line__init(&lines[j]);
        lines[j].function_id = fn_get(c, ol->lines[j]->function_index);
        lines[j].line = ol->lines[j]->line;
        lines[j].column = ol->lines[j]->column;
        lp[j] = &lines[j];
    }
    g->n_line = ol->n_lines;
    g->line = lp;
    c->loc_src[c->pb->n_location] = li;
    c->pb->location[c->pb->n_location++] = g;
    m->loc_gen[li] = m->gen;
    return m->loc_id[li] = g->id;
}

/* A stack's location ids (leaf first in both formats), made once and shared by its samples. */
static uint64_t *stk_get(struct cv *c, int32_t si)
{
    struct op_maps *m = c->m;
    if (m->stk_gen[si] == m->gen)
        return m->stk_ids[si];
    const op_stack *s = c->d->stack_table[si];
    uint64_t *ids = cv_alloc(c, s->n_location_indices, sizeof(uint64_t));
    if (!ids)
        return NULL;
    for (size_t j = 0; j < s->n_location_indices; j++)
        ids[j] = loc_get(c, s->location_indices[j]);
    m->stk_gen[si] = m->gen;
    return m->stk_ids[si] = ids;
}

/* Pyroscope's convertMappingBack flags, over every location of the profile using the mapping:
 * a location without lines clears them all; a line without a function clears has_functions,
 * without a line number has_line_numbers, a function without a file has_filenames.
 * has_inline_frames: some location has more than one line (Pyroscope's own test of it is never
 * true once a location has lines). */
static void finish_mappings(struct cv *c)
{
    const op_dict *d = c->d;
    for (size_t i = 0; i < c->pb->n_location; i++) {
        uint64_t mid = c->pb->location[i]->mapping_id;
        if (mid == 0)
            continue;
        Perftools__Profiles__Mapping *g = c->pb->mapping[mid - 1];
        const op_location *ol = d->location_table[c->loc_src[i]];
        if (ol->n_lines == 0)
            g->has_functions = g->has_filenames = g->has_line_numbers = 0;
        if (ol->n_lines > 1)
            g->has_inline_frames = 1;
        for (size_t j = 0; j < ol->n_lines; j++) {
            int32_t fi = ol->lines[j]->function_index;
            if (fi <= 0)
                g->has_functions = 0;
            else if (d->function_table[fi]->filename_strindex <= 0)
                g->has_filenames = 0;
            if (ol->lines[j]->line <= 0)
                g->has_line_numbers = 0;
        }
    }
}

/* ---- labels -----------------------------------------------------------------------------------
 */

static pp_label *label(struct cv *c, int64_t key, int64_t str)
{
    pp_label *l = cv_alloc(c, 1, sizeof(*l));
    if (l) {
        perftools__profiles__label__init(l);
        l->key = key;
        l->str = str;
    }
    return l;
}

/* A sample attribute's label, or NULL: service.name (it splits profiles instead) and empty
 * values make none. */
static pp_label *attr_label(struct cv *c, int32_t ai)
{
    struct op_maps *m = c->m;
    if (m->attr_gen[ai] == m->gen)
        return m->attr_label[ai];
    const op_kvu *a = c->d->attribute_table[ai];
    pp_label *l = NULL;
    if (strcmp(c->d->string_table[a->key_strindex], OP_SERVICE_NAME) != 0) {
        int64_t v = a->value ? value_str(c, a->value) : 0;
        if (v)
            l = label(c, dstr(c, a->key_strindex), v);
    }
    m->attr_gen[ai] = m->gen;
    return m->attr_label[ai] = l;
}

/* The link's span_id label (hex, as Pyroscope writes it) and, for a 16-byte trace id, trace_id. */
static pp_label **link_labels(struct cv *c, int32_t li)
{
    struct op_maps *m = c->m;
    pp_label **out = (pp_label **)&m->link_label[2 * (size_t)li];
    if (m->link_gen[li] == m->gen)
        return out;
    const op_link *l = c->d->link_table[li];
    out[0] = label(c, fixed_str(c, FIX_SPAN_ID), hex_str(c, &l->span_id));
    out[1] = l->trace_id.len == 16 ? label(c, fixed_str(c, FIX_TRACE_ID), hex_str(c, &l->trace_id))
                                   : NULL;
    m->link_gen[li] = m->gen;
    return out;
}

/* ---- samples ----------------------------------------------------------------------------------
 */

/* A sample's one value: its values summed (one per timestamp when there are several), or its
 * timestamps counted; cpu time for samples/count. Wrapping, as pprof's int64 would. */
static int64_t sample_value(const struct cv *c, const op_sample *s, int64_t period)
{
    uint64_t v = 0;
    for (size_t i = 0; i < s->n_values; i++)
        v += (uint64_t)s->values[i];
    if (s->n_values == 0)
        v = s->n_timestamps_unix_nano;
    if (c->mode == CV_SAMPLES_TO_NANOS)
        v *= (uint64_t)period;
    return (int64_t)v;
}

static void add_sample(struct cv *c, const op_sample *s, int64_t period)
{
    Perftools__Profiles__Sample *g = cv_alloc(c, 1, sizeof(*g));
    int64_t *v = cv_alloc(c, 1, sizeof(int64_t));
    pp_label **labels = cv_alloc(c, s->n_attribute_indices + 2, sizeof(pp_label *));
    uint64_t *locs = stk_get(c, s->stack_index);
    if (!g || !v || !labels || !locs)
        return;
    perftools__profiles__sample__init(g);
    g->location_id = locs;
    g->n_location_id = c->d->stack_table[s->stack_index]->n_location_indices;
    *v = sample_value(c, s, period);
    g->value = v;
    g->n_value = 1;
    size_t n = 0;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        pp_label *l = attr_label(c, s->attribute_indices[i]);
        if (l)
            labels[n++] = l;
    }
    if (s->link_index != 0) {
        pp_label **ll = link_labels(c, s->link_index);
        for (int i = 0; i < 2; i++)
            if (ll[i])
                labels[n++] = ll[i];
    }
    g->label = labels;
    g->n_label = n;
    c->pb->sample[c->pb->n_sample++] = g;
}

/* ---- the profile ------------------------------------------------------------------------------
 */

static const char *str_of(const struct cv *c, int32_t i)
{
    return c->d->string_table[i];
}

/* Pyroscope's sample type and __name__ (newProfileBuilder): samples/count sampled in cpu
 * nanoseconds is cpu/nanoseconds, "process_cpu"; off_cpu/nanoseconds without a period is
 * "off_cpu"; otherwise the third part of "<type>:<unit>:<period type>:<period unit>" (the period
 * type, when the profile has a period). Where that is empty Pyroscope would store a nameless
 * series, which its validation refuses; hotspan names it after the sample type instead. */
static const char *profile_type(struct cv *c, const op_profile *pr)
{
    const char *type = pr->sample_type ? str_of(c, pr->sample_type->type_strindex) : "";
    const char *unit = pr->sample_type ? str_of(c, pr->sample_type->unit_strindex) : "";
    bool periodic = pr->period_type && pr->period != 0;
    const char *pt = periodic ? str_of(c, pr->period_type->type_strindex) : "";
    const char *pu = periodic ? str_of(c, pr->period_type->unit_strindex) : "";
    size_t n = strlen(type) + strlen(unit) + strlen(pt) + strlen(pu) + 4;
    char *key = cv_alloc(c, n, 1);
    if (!key)
        return "";
    snprintf(key, n, "%s:%s:%s:%s", type, unit, pt, pu);
    Perftools__Profiles__ValueType *st = c->pb->sample_type[0];
    if (strcmp(key, "samples:count:cpu:nanoseconds") == 0) {
        c->mode = CV_SAMPLES_TO_NANOS;
        st->type = fixed_str(c, FIX_CPU);
        st->unit = fixed_str(c, FIX_NANOSECONDS);
        return "process_cpu";
    }
    if (strcmp(key, "off_cpu:nanoseconds::") == 0)
        return "off_cpu";
    char *third = strchr(key, ':');
    third = third ? strchr(third + 1, ':') : NULL;
    if (third) {
        third++;
        third[strcspn(third, ":")] = '\0';
        if (*third)
            return third;
    }
    return *type ? type : "unknown";
}

/* Allocates the tree's tables at their bounds (the dictionary's sizes: only what is used is
 * filled) and the fields that do not depend on the samples. */
static int tree_init(struct cv *c, const op_profile *pr, size_t nsamples, int64_t time_ns)
{
    const op_dict *d = c->d;
    pp_profile *pb = cv_alloc(c, 1, sizeof(*pb));
    Perftools__Profiles__ValueType *st = cv_alloc(c, 1, sizeof(*st));
    Perftools__Profiles__ValueType **stp = cv_alloc(c, 1, sizeof(*stp));
    if (!pb || !st || !stp)
        return HS_E2BIG;
    perftools__profiles__profile__init(pb);
    perftools__profiles__value_type__init(st);
    c->pb = pb;
    c->cap_str = d->n_string_table + 2 * d->n_link_table + d->n_attribute_table +
                 d->n_mapping_table + FIX_N + 2;
    pb->string_table = cv_alloc(c, c->cap_str, sizeof(char *));
    pb->sample = cv_alloc(c, nsamples, sizeof(*pb->sample));
    pb->function = cv_alloc(c, d->n_function_table, sizeof(*pb->function));
    pb->location = cv_alloc(c, d->n_location_table, sizeof(*pb->location));
    pb->mapping = cv_alloc(c, d->n_mapping_table, sizeof(*pb->mapping));
    c->loc_src = cv_alloc(c, d->n_location_table, sizeof(int32_t));
    if (c->full)
        return HS_E2BIG;
    pb->string_table[pb->n_string_table++] = "";
    for (int i = 0; i < FIX_N; i++)
        c->fixed[i] = -1;
    if (pr->sample_type) {
        st->type = dstr(c, pr->sample_type->type_strindex);
        st->unit = dstr(c, pr->sample_type->unit_strindex);
        pb->default_sample_type = st->type;
    }
    stp[0] = st;
    pb->sample_type = stp;
    pb->n_sample_type = 1;
    if (pr->period_type) {
        Perftools__Profiles__ValueType *pt = cv_alloc(c, 1, sizeof(*pt));
        if (!pt)
            return HS_E2BIG;
        perftools__profiles__value_type__init(pt);
        pt->type = dstr(c, pr->period_type->type_strindex);
        pt->unit = dstr(c, pr->period_type->unit_strindex);
        pb->period_type = pt;
    }
    pb->period = pr->period;
    /* Pyroscope's defaults: now for a profile without a time, 10 s for one without a duration */
    pb->time_nanos = time_ns              ? time_ns
                     : pr->time_unix_nano ? (int64_t)pr->time_unix_nano
                                          : (int64_t)hs_wall_ns();
    pb->duration_nanos = pr->duration_nano ? (int64_t)pr->duration_nano : 10000000000LL;
    return 0;
}

int hs_otlp_build_pprof(struct hs_otlp_request *r, uint32_t index, const uint32_t *of_sample,
                        uint32_t group, int64_t time_ns, struct hs_arena *a, struct op_pprof *out)
{
    if (maps_init(r))
        return HS_ENOMEM;
    const op_profile *pr = r->profiles[index].prof;
    struct cv c = {.r = r, .d = r->dict, .m = r->maps, .a = a};
    c.m->gen++;
    size_t n = 0;
    for (size_t i = 0; i < pr->n_samples; i++)
        n += !of_sample || of_sample[i] == group;
    int rc = tree_init(&c, pr, n, time_ns);
    if (rc)
        return rc;
    out->name = profile_type(&c, pr);
    for (size_t i = 0; i < pr->n_samples && !c.full; i++)
        if (!of_sample || of_sample[i] == group)
            add_sample(&c, pr->samples[i], pr->period);
    finish_mappings(&c);
    if (c.full)
        return HS_E2BIG;
    out->pb = c.pb;
    return 0;
}

/* ---- packed and gzipped ------------------------------------------------------------------------
 */

/* Level 1: the push is one of many per upload period, and Pyroscope inflates whatever it gets. */
#define PPROF_GZIP_LEVEL 1

static int pack_gzip(const pp_profile *pb, struct hs_buf *gz)
{
    size_t n = perftools__profiles__profile__get_packed_size(pb);
    uint8_t *raw = malloc(n ? n : 1);
    if (!raw)
        return HS_ENOMEM;
    perftools__profiles__profile__pack(pb, raw);
    int rc = hs_gzip(raw, n, PPROF_GZIP_LEVEL, gz);
    free(raw);
    return rc;
}

/* The group of profile `index` whose service is `service`; UINT32_MAX when none is. */
static uint32_t group_of(const struct op_groups *g, const char *service)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (strcmp(g->names[i], service) == 0)
            return i;
    return UINT32_MAX;
}

int hs_otlp_convert(struct hs_otlp_request *r, uint32_t index, const char *service, int64_t time_ns,
                    struct hs_arena *ga, struct hs_arena *ta, struct hs_buf *gz, char *err,
                    size_t errlen)
{
    struct op_groups g;
    const uint32_t *of_sample = NULL;
    uint32_t group = 0;
    if (index >= r->nprofiles) {
        snprintf(err, errlen, "no profile %u (the request has %u)", index, r->nprofiles);
        return HS_EINVAL;
    }
    if (service) {
        if (hs_otlp_groups(r, index, ga, &g))
            return HS_ENOMEM;
        of_sample = g.of_sample;
        if ((group = group_of(&g, service)) == UINT32_MAX) {
            snprintf(err, errlen, "profiles[%u]: no samples of service \"%.64s\"", index, service);
            return HS_EINVAL;
        }
    }
    struct op_pprof pp;
    int rc = hs_otlp_build_pprof(r, index, of_sample, group, time_ns, ta, &pp);
    if (rc == HS_E2BIG)
        snprintf(err, errlen, "profiles[%u]: converted profile exceeds the memory limit", index);
    return rc ? rc : pack_gzip(pp.pb, gz);
}

int hs_otlp_profile_to_pprof(struct hs_otlp_request *r, uint32_t index, const char *service,
                             int64_t time_ns, struct hs_buf *out, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || !errlen)
        err = dummy, errlen = sizeof(dummy);
    err[0] = '\0';
    struct hs_arena *ga = hs_arena_new(4096, 0);
    struct hs_arena *ta = hs_arena_new(65536, OP_TREE_CAP(r->len));
    struct hs_buf gz = {0};
    int rc = ga && ta ? hs_otlp_convert(r, index, service, time_ns, ga, ta, &gz, err, errlen)
                      : HS_ENOMEM;
    if (rc == 0)
        rc = hs_buf_append(out, gz.data, gz.len);
    hs_buf_free(&gz);
    hs_arena_free(ga);
    hs_arena_free(ta);
    return rc;
}
