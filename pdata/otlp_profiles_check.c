/* otlp_profiles_check.c: the checks of a decoded ExportProfilesServiceRequest: every index within
 * its table, ids of the right size, values matching timestamps, strings UTF-8 and within limits;
 * each failure names the field and index ("dictionary.stack_table[3].location_indices[2]: 40 is
 * out of range (location_table has 12 entries)"), so the sender can find it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/errors.h"
#include "pdata/otlp_profiles_int.h"
#include "pdata/pprof_int.h"

/* A step of the path to the value being checked, rendered only for a message. */
struct seg {
    const char *name; /* ".samples", "dictionary.stack_table", ".value" */
    size_t index;     /* SIZE_MAX: none */
};

enum { CHK_SEGS = 64 };

struct chk {
    const struct hs_otlp_request *r;
    const op_dict *d;
    const struct hs_otlp_profiles_limits *lim;
    struct seg segs[CHK_SEGS]; /* where the walk is, e.g. "dictionary.location_table[3]" */
    uint32_t nsegs;
    uint32_t *stack_depth; /* [n_stack_table]: frames, inlined ones included, saturating */
    char *err;
    size_t errlen;
};

static uint32_t push(struct chk *c, const char *name, size_t index)
{
    if (c->nsegs < CHK_SEGS)
        c->segs[c->nsegs] = (struct seg){name, index};
    return c->nsegs++;
}

static void pop(struct chk *c, uint32_t old)
{
    c->nsegs = old;
}

/* "<path>.<field>: <message>" (no field: "<path>: <message>"). */
__attribute__((format(printf, 4, 5))) static int fail(struct chk *c, int code, const char *field,
                                                      const char *fmt, ...)
{
    char path[320] = "", msg[200];
    size_t n = 0;
    for (uint32_t i = 0; i < c->nsegs && i < CHK_SEGS && n < sizeof(path) - 1; i++) {
        const struct seg *g = &c->segs[i];
        int w = g->index == SIZE_MAX
                    ? snprintf(path + n, sizeof(path) - n, "%s", g->name)
                    : snprintf(path + n, sizeof(path) - n, "%s[%zu]", g->name, g->index);
        n = w < 0 ? n : HS_MIN(n + (size_t)w, sizeof(path) - 1);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s%s%s: %s", path, field && n ? "." : "", field ? field : "", msg);
    return code;
}

/* Index i of a table of n entries; the field is formatted only when it fails (checks run per
 * sample and per stack frame). */
__attribute__((format(printf, 5, 6))) static int idx(struct chk *c, int64_t i, size_t n,
                                                     const char *table, const char *fmt, ...)
{
    if (i >= 0 && (uint64_t)i < n)
        return 0;
    char field[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(field, sizeof(field), fmt, ap);
    va_end(ap);
    return fail(c, HS_EINVAL, field, "%lld is out of range (%s has %zu entries)", (long long)i,
                table, n);
}

static int str_idx(struct chk *c, int64_t i, const char *field)
{
    return idx(c, i, c->d->n_string_table, "string_table", "%s", field);
}

/* A list of attribute_indices: within the attribute table and the count limit. */
static int attr_indices(struct chk *c, const int32_t *ix, size_t n)
{
    uint32_t max = c->lim->max_attributes;
    if (max && n > max)
        return fail(c, HS_E2BIG, "attribute_indices",
                    "%zu attributes, more than max_attributes (%u)", n, max);
    for (size_t i = 0; i < n; i++) {
        int rc =
            idx(c, ix[i], c->d->n_attribute_table, "attribute_table", "attribute_indices[%zu]", i);
        if (rc)
            return rc;
    }
    return 0;
}

static int utf8(struct chk *c, const char *s, const char *field)
{
    if (hs_pprof_utf8_valid(s, strlen(s)))
        return 0;
    return fail(c, HS_EINVAL, field, "not valid UTF-8");
}

/* ---- attribute values (nesting bounded by the wire walk before decoding) ------------------- */

static int check_kv(struct chk *c, const op_kv *kv);

static int check_any(struct chk *c, const op_any *v)
{
    int rc = 0;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        return utf8(c, v->string_value, "string_value");
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        return str_idx(c, v->string_value_strindex, "string_value_strindex");
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        for (size_t i = 0; rc == 0 && i < v->array_value->n_values; i++) {
            uint32_t o = push(c, ".array_value.values", i);
            rc = check_any(c, v->array_value->values[i]);
            pop(c, o);
        }
        return rc;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
        for (size_t i = 0; rc == 0 && i < v->kvlist_value->n_values; i++) {
            uint32_t o = push(c, ".kvlist_value.values", i);
            rc = check_kv(c, v->kvlist_value->values[i]);
            pop(c, o);
        }
        return rc;
    default:
        return 0;
    }
}

static int check_kv(struct chk *c, const op_kv *kv)
{
    int rc;
    if (kv->key_strindex != 0 && (rc = str_idx(c, kv->key_strindex, "key_strindex")))
        return rc;
    if ((rc = utf8(c, kv->key, "key")))
        return rc;
    if (!kv->value)
        return 0;
    uint32_t o = push(c, ".value", SIZE_MAX);
    rc = check_any(c, kv->value);
    pop(c, o);
    return rc;
}

static int check_attributes(struct chk *c, op_kv *const *kvs, size_t n)
{
    uint32_t max = c->lim->max_attributes;
    if (max && n > max)
        return fail(c, HS_E2BIG, "attributes", "%zu attributes, more than max_attributes (%u)", n,
                    max);
    for (size_t i = 0; i < n; i++) {
        uint32_t o = push(c, ".attributes", i);
        int rc = check_kv(c, kvs[i]);
        pop(c, o);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- the dictionary ------------------------------------------------------------------------ */

static int check_strings(struct chk *c)
{
    const op_dict *d = c->d;
    if (d->n_string_table == 0) {
        if (c->r->nprofiles == 0)
            return 0;
        return fail(c, HS_EINVAL, "string_table",
                    "empty, but string_table[0] must be \"\" and the request has %u profiles",
                    c->r->nprofiles);
    }
    if (d->string_table[0][0] != '\0')
        return fail(c, HS_EINVAL, "string_table[0]", "must be \"\" (it is \"%.40s\")",
                    d->string_table[0]);
    uint32_t max = c->lim->max_string_len;
    for (size_t i = 1; i < d->n_string_table; i++) {
        const char *s = d->string_table[i];
        size_t n = strlen(s);
        char f[40];
        bool utf8 = hs_pprof_utf8_valid(s, n);
        if (utf8 && (!max || n <= max))
            continue;
        snprintf(f, sizeof(f), "string_table[%zu]", i);
        if (!utf8)
            return fail(c, HS_EINVAL, f, "not valid UTF-8");
        return fail(c, HS_E2BIG, f, "%zu bytes, more than max_string_length (%u)", n, max);
    }
    return 0;
}

static int check_mapping(struct chk *c, const op_mapping *m)
{
    int rc = str_idx(c, m->filename_strindex, "filename_strindex");
    return rc ? rc : attr_indices(c, m->attribute_indices, m->n_attribute_indices);
}

static int check_location(struct chk *c, const op_location *l)
{
    int rc;
    /* 0 is "unknown", also when the table is absent */
    if (l->mapping_index != 0 &&
        (rc = idx(c, l->mapping_index, c->d->n_mapping_table, "mapping_table", "mapping_index")))
        return rc;
    for (size_t j = 0; j < l->n_lines; j++)
        if ((rc = idx(c, l->lines[j]->function_index, c->d->n_function_table, "function_table",
                      "lines[%zu].function_index", j)))
            return rc;
    return attr_indices(c, l->attribute_indices, l->n_attribute_indices);
}

static int check_function(struct chk *c, const op_function *f)
{
    int rc;
    if ((rc = str_idx(c, f->name_strindex, "name_strindex")) ||
        (rc = str_idx(c, f->system_name_strindex, "system_name_strindex")))
        return rc;
    return str_idx(c, f->filename_strindex, "filename_strindex");
}

static int check_link(struct chk *c, const op_link *l)
{
    if (l->trace_id.len != 0 && l->trace_id.len != 16)
        return fail(c, HS_EINVAL, "trace_id", "%zu bytes (a trace id has 16)", l->trace_id.len);
    if (l->span_id.len != 0 && l->span_id.len != 8)
        return fail(c, HS_EINVAL, "span_id", "%zu bytes (a span id has 8)", l->span_id.len);
    return 0;
}

static int check_kvu(struct chk *c, const op_kvu *a)
{
    int rc;
    if ((rc = str_idx(c, a->key_strindex, "key_strindex")) ||
        (rc = str_idx(c, a->unit_strindex, "unit_strindex")))
        return rc;
    if (!a->value)
        return 0;
    uint32_t o = push(c, ".value", SIZE_MAX);
    rc = check_any(c, a->value);
    pop(c, o);
    return rc;
}

static int check_stack(struct chk *c, const op_stack *s, uint32_t *depth)
{
    uint64_t frames = 0;
    for (size_t j = 0; j < s->n_location_indices; j++) {
        int32_t l = s->location_indices[j];
        int rc = idx(c, l, c->d->n_location_table, "location_table", "location_indices[%zu]", j);
        if (rc)
            return rc;
        size_t lines = c->d->location_table[l]->n_lines;
        frames += lines ? lines : 1; /* a location without lines is one (address) frame */
    }
    *depth = frames > UINT32_MAX ? UINT32_MAX : (uint32_t)frames;
    return 0;
}

/* Runs check_one on every entry of one table, with the path at "dictionary.<name>[i]". */
#define CHECK_TABLE(c, name, call)                                                                 \
    for (size_t i = 0; i < (c)->d->n_##name; i++) {                                                \
        uint32_t o_ = push((c), "dictionary." #name, i);                                           \
        int rc_ = (call);                                                                          \
        pop((c), o_);                                                                              \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
    }

static int check_dictionary(struct chk *c)
{
    uint32_t o = push(c, "dictionary", SIZE_MAX);
    int rc = check_strings(c);
    pop(c, o);
    if (rc)
        return rc;
    const op_dict *d = c->d;
    CHECK_TABLE(c, mapping_table, check_mapping(c, d->mapping_table[i]));
    CHECK_TABLE(c, location_table, check_location(c, d->location_table[i]));
    CHECK_TABLE(c, function_table, check_function(c, d->function_table[i]));
    CHECK_TABLE(c, link_table, check_link(c, d->link_table[i]));
    CHECK_TABLE(c, attribute_table, check_kvu(c, d->attribute_table[i]));
    CHECK_TABLE(c, stack_table, check_stack(c, d->stack_table[i], &c->stack_depth[i]));
    return 0;
}

/* ---- profiles ------------------------------------------------------------------------------ */

static int check_value_type(struct chk *c, const op_value_type *vt, const char *name)
{
    size_t n = c->d->n_string_table;
    int rc = idx(c, vt->type_strindex, n, "string_table", "%s.type_strindex", name);
    return rc ? rc : idx(c, vt->unit_strindex, n, "string_table", "%s.unit_strindex", name);
}

static int check_sample(struct chk *c, const op_sample *s)
{
    const op_dict *d = c->d;
    int rc;
    if ((rc = idx(c, s->stack_index, d->n_stack_table, "stack_table", "stack_index")))
        return rc;
    /* 0 is "no link", also when the table is absent */
    if (s->link_index != 0 &&
        (rc = idx(c, s->link_index, d->n_link_table, "link_table", "link_index")))
        return rc;
    if ((rc = attr_indices(c, s->attribute_indices, s->n_attribute_indices)))
        return rc;
    size_t nv = s->n_values, nt = s->n_timestamps_unix_nano;
    if (nv == 0 && nt == 0)
        return fail(c, HS_EINVAL, "values", "empty, and no timestamps_unix_nano either");
    if (nv > 1 && nv != nt)
        return fail(c, HS_EINVAL, "values",
                    "%zu values, but the profile has one sample type (more values need as many "
                    "timestamps_unix_nano: there are %zu)",
                    nv, nt);
    uint32_t depth = c->stack_depth[s->stack_index], max = c->lim->max_stack_depth;
    if (max && depth > max)
        return fail(c, HS_E2BIG, NULL,
                    "stack %d is %u frames deep (inlined frames included), more than "
                    "max_stack_depth (%u)",
                    s->stack_index, depth, max);
    return 0;
}

static int check_profile(struct chk *c, const op_profile *p)
{
    int rc;
    if (!p->sample_type && p->n_samples > 0)
        return fail(c, HS_EINVAL, "sample_type", "missing, but the profile has %zu samples",
                    p->n_samples);
    if (p->sample_type && (rc = check_value_type(c, p->sample_type, "sample_type")))
        return rc;
    if (p->period_type && (rc = check_value_type(c, p->period_type, "period_type")))
        return rc;
    if ((rc = attr_indices(c, p->attribute_indices, p->n_attribute_indices)))
        return rc;
    if (p->profile_id.len != 0 && p->profile_id.len != 16)
        return fail(c, HS_EINVAL, "profile_id", "%zu bytes (a profile id has 16)",
                    p->profile_id.len);
    if ((rc = utf8(c, p->original_payload_format, "original_payload_format")))
        return rc;
    uint32_t max = c->lim->max_samples;
    if (max && p->n_samples > max)
        return fail(c, HS_E2BIG, "samples", "%zu samples, more than max_samples (%u)", p->n_samples,
                    max);
    for (size_t i = 0; i < p->n_samples; i++) {
        uint32_t o = push(c, ".samples", i);
        rc = check_sample(c, p->samples[i]);
        pop(c, o);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_scope(struct chk *c, const op_scope_profiles *sp)
{
    int rc;
    if ((rc = utf8(c, sp->schema_url, "schema_url")))
        return rc;
    if (sp->scope) {
        uint32_t o = push(c, ".scope", SIZE_MAX);
        if (!(rc = utf8(c, sp->scope->name, "name")) &&
            !(rc = utf8(c, sp->scope->version, "version")))
            rc = check_attributes(c, sp->scope->attributes, sp->scope->n_attributes);
        pop(c, o);
        if (rc)
            return rc;
    }
    for (size_t k = 0; k < sp->n_profiles; k++) {
        uint32_t o = push(c, ".profiles", k);
        rc = check_profile(c, sp->profiles[k]);
        pop(c, o);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_resource(struct chk *c, const op_resource_profiles *rp)
{
    int rc;
    if ((rc = utf8(c, rp->schema_url, "schema_url")))
        return rc;
    if (rp->resource) {
        uint32_t o = push(c, ".resource", SIZE_MAX);
        rc = check_attributes(c, rp->resource->attributes, rp->resource->n_attributes);
        pop(c, o);
        if (rc)
            return rc;
    }
    for (size_t j = 0; j < rp->n_scope_profiles; j++) {
        uint32_t o = push(c, ".scope_profiles", j);
        rc = check_scope(c, rp->scope_profiles[j]);
        pop(c, o);
        if (rc)
            return rc;
    }
    return 0;
}

int hs_otlp_check(const struct hs_otlp_request *r, const struct hs_otlp_profiles_limits *lim,
                  char *err, size_t errlen)
{
    static const struct hs_otlp_profiles_limits none = {0};
    char dummy[1];
    struct chk c = {.r = r,
                    .d = r->dict,
                    .lim = lim ? lim : &none,
                    .err = err && errlen ? err : dummy,
                    .errlen = err && errlen ? errlen : sizeof(dummy)};
    size_t nstacks = r->dict->n_stack_table;
    c.stack_depth = hs_arena_alloc(r->arena, (nstacks ? nstacks : 1) * sizeof(uint32_t));
    if (!c.stack_depth)
        return fail(&c, HS_E2BIG, NULL, "decoded request exceeds the memory limit");
    int rc = check_dictionary(&c);
    for (size_t i = 0; rc == 0 && i < r->req->n_resource_profiles; i++) {
        uint32_t o = push(&c, "resource_profiles", i);
        rc = check_resource(&c, r->req->resource_profiles[i]);
        pop(&c, o);
    }
    return rc;
}
