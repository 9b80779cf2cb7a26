/* otlp_profiles_read.c: an OTLP profiles request's values as Pyroscope reads them: attribute
 * keys and values (strings, decimal integers, an array of one) and a profile's samples grouped by
 * service. Both the decode (otlp_profiles.c) and the conversion to pprof (otlp_profiles_pprof.c)
 * read them; this file calls neither. */
#include <stdio.h>
#include <string.h>

#include "core/arena.h"
#include "core/errors.h"
#include "pdata/otlp_profiles_int.h"

/* ---- attributes ------------------------------------------------------------------------------ */

const char *hs_otlp_kv_key(const struct hs_otlp_request *r, const op_kv *kv)
{
    if (kv->key[0] == '\0' && kv->key_strindex > 0 &&
        (size_t)kv->key_strindex < r->dict->n_string_table)
        return r->dict->string_table[kv->key_strindex];
    return kv->key;
}

static const char *single_string(const struct hs_otlp_request *r, const op_any *v, char buf[24])
{
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        return v->string_value;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        snprintf(buf, 24, "%lld", (long long)v->int_value);
        return buf;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        /* Pyroscope reads only string_value; this signal may put strings in the dictionary */
        if (v->string_value_strindex >= 0 &&
            (size_t)v->string_value_strindex < r->dict->n_string_table)
            return r->dict->string_table[v->string_value_strindex];
        return "";
    default:
        return "";
    }
}

const char *hs_otlp_any_string(const struct hs_otlp_request *r, const op_any *v, char buf[24])
{
    if (!v)
        return "";
    const char *s = single_string(r, v, buf);
    if (*s == '\0' &&
        v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE &&
        v->array_value->n_values == 1)
        s = single_string(r, v->array_value->values[0], buf);
    return s;
}

/* ---- samples by service ---------------------------------------------------------------------- */

/* Pyroscope's serviceNameFromSample: the first sample attribute keyed service.name; its value when
 * not empty, else the resource's service. */
static const char *sample_service(const struct hs_otlp_request *r, const struct op_ref *ref,
                                  const op_sample *s, char buf[24])
{
    const op_dict *d = r->dict;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        const op_kvu *a = d->attribute_table[s->attribute_indices[i]];
        if (strcmp(d->string_table[a->key_strindex], OP_SERVICE_NAME) == 0) {
            const char *v = hs_otlp_any_string(r, a->value, buf);
            return *v ? v : ref->service;
        }
    }
    return ref->service;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

int hs_otlp_groups(const struct hs_otlp_request *r, uint32_t index, struct hs_arena *a,
                   struct op_groups *g)
{
    const struct op_ref *ref = &r->profiles[index];
    size_t ns = ref->prof->n_samples, cap = 16;
    while (cap < 2 * ns)
        cap *= 2;
    g->n = 0;
    g->names = hs_arena_alloc(a, (ns ? ns : 1) * sizeof(char *));
    g->of_sample = hs_arena_alloc(a, (ns ? ns : 1) * sizeof(uint32_t));
    uint32_t *slot = hs_arena_alloc(a, cap * sizeof(uint32_t));
    if (!g->names || !g->of_sample || !slot)
        return HS_ENOMEM;
    memset(slot, 0xff, cap * sizeof(uint32_t));
    for (size_t i = 0; i < ns; i++) {
        char buf[24];
        const char *svc = sample_service(r, ref, ref->prof->samples[i], buf);
        size_t h = fnv(svc) & (cap - 1);
        while (slot[h] != UINT32_MAX && strcmp(g->names[slot[h]], svc) != 0)
            h = (h + 1) & (cap - 1);
        if (slot[h] == UINT32_MAX) {
            if (svc == buf && !(svc = hs_arena_strndup(a, buf, strlen(buf))))
                return HS_ENOMEM;
            slot[h] = g->n;
            g->names[g->n++] = svc;
        }
        g->of_sample[i] = slot[h];
    }
    if (ns == 0)
        g->names[g->n++] = ref->service;
    return 0;
}
