/* pyroscope_push.c: POST /push.v1.PusherService/Push bodies (wire.md §6): a PushRequest in
 * protobuf or Connect JSON, decoded into one arena; JSON is first turned into the same
 * protobuf-c structures so both go through one validation. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/errors.h"
#include "push/v1/push.pb-c.h"
#include "receivers/pyroscope_int.h"

/* ---- Connect JSON into protobuf-c structures -------------------------------------------- */

struct jctx {
    struct hs_arena *arena;
    struct hs_pyro_fail *f;
};

static void *jalloc(struct jctx *c, size_t n)
{
    return hs_arena_alloc(c->arena, n ? n : 1);
}

/* A member by its JSON name or its proto name (protojson accepts both). */
static json_t *member(json_t *o, const char *json_name, const char *proto_name)
{
    json_t *v = json_object_get(o, json_name);
    return v ? v : json_object_get(o, proto_name);
}

/* An optional array member: NULL (absent or null) or the array; an error otherwise. */
static int array_member(struct jctx *c, json_t *o, const char *name, const char *where,
                        json_t **out)
{
    *out = member(o, name, name);
    if (*out && json_is_null(*out))
        *out = NULL;
    if (*out && !json_is_array(*out))
        return hs_pyro_failf(c->f, 400, "bad_json", "%s.%s: not an array", where, name);
    return 0;
}

static int json_string_member(struct jctx *c, json_t *o, const char *jn, const char *pn,
                              const char *where, const char **out, size_t *len)
{
    json_t *v = member(o, jn, pn);
    *out = "";
    *len = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return hs_pyro_failf(c->f, 400, "bad_json", "%s.%s: not a string", where, jn);
    *out = json_string_value(v);
    *len = json_string_length(v);
    return 0;
}

static int json_labels(struct jctx *c, json_t *arr, Push__V1__RawProfileSeries *s,
                       const char *where)
{
    s->n_labels = json_array_size(arr);
    s->labels = jalloc(c, s->n_labels * sizeof(*s->labels));
    if (!s->labels)
        return hs_pyro_fail_code(c->f, HS_ENOMEM, where, NULL);
    for (size_t k = 0; k < s->n_labels; k++) {
        char w[64];
        snprintf(w, sizeof(w), "%s.labels[%zu]", where, k);
        json_t *l = json_array_get(arr, k);
        Types__V1__LabelPair *lp = jalloc(c, sizeof(*lp));
        if (!lp)
            return hs_pyro_fail_code(c->f, HS_ENOMEM, w, NULL);
        types__v1__label_pair__init(lp);
        if (!json_is_object(l))
            return hs_pyro_failf(c->f, 400, "bad_json", "%s: not an object", w);
        const char *v;
        size_t n;
        if (json_string_member(c, l, "name", "name", w, &v, &n))
            return HS_EINVAL;
        lp->name = (char *)v;
        if (json_string_member(c, l, "value", "value", w, &v, &n))
            return HS_EINVAL;
        lp->value = (char *)v;
        s->labels[k] = lp;
    }
    return 0;
}

static int json_samples(struct jctx *c, json_t *arr, Push__V1__RawProfileSeries *s,
                        const char *where)
{
    s->n_samples = json_array_size(arr);
    s->samples = jalloc(c, s->n_samples * sizeof(*s->samples));
    if (!s->samples)
        return hs_pyro_fail_code(c->f, HS_ENOMEM, where, NULL);
    for (size_t j = 0; j < s->n_samples; j++) {
        char w[64];
        snprintf(w, sizeof(w), "%s.samples[%zu]", where, j);
        json_t *o = json_array_get(arr, j);
        Push__V1__RawSample *rs = jalloc(c, sizeof(*rs));
        if (!rs)
            return hs_pyro_fail_code(c->f, HS_ENOMEM, w, NULL);
        push__v1__raw_sample__init(rs);
        if (!json_is_object(o))
            return hs_pyro_failf(c->f, 400, "bad_json", "%s: not an object", w);
        const char *v;
        size_t n;
        if (json_string_member(c, o, "rawProfile", "raw_profile", w, &v, &n))
            return HS_EINVAL;
        rs->raw_profile.data = jalloc(c, n / 4 * 3 + 3);
        if (!rs->raw_profile.data)
            return hs_pyro_fail_code(c->f, HS_ENOMEM, w, NULL);
        long dl = hs_base64_decode(v, n, rs->raw_profile.data);
        if (dl < 0)
            return hs_pyro_failf(c->f, 400, "bad_json", "%s.rawProfile: not base64", w);
        rs->raw_profile.len = (size_t)dl;
        if (json_string_member(c, o, "ID", "id", w, &v, &n))
            return HS_EINVAL;
        rs->id = (char *)v;
        s->samples[j] = rs;
    }
    return 0;
}

/* Builds req from the JSON document (strings stay in root, which the caller keeps). */
static int json_request(struct jctx *c, json_t *root, Push__V1__PushRequest *req)
{
    if (!json_is_object(root))
        return hs_pyro_failf(c->f, 400, "bad_json", "PushRequest: not a JSON object");
    json_t *series;
    if (array_member(c, root, "series", "PushRequest", &series))
        return HS_EINVAL;
    req->n_series = json_array_size(series); /* 0 for NULL */
    req->series = jalloc(c, req->n_series * sizeof(*req->series));
    if (!req->series)
        return hs_pyro_fail_code(c->f, HS_ENOMEM, "series", NULL);
    for (size_t i = 0; i < req->n_series; i++) {
        char w[32];
        snprintf(w, sizeof(w), "series[%zu]", i);
        json_t *o = json_array_get(series, i);
        Push__V1__RawProfileSeries *s = jalloc(c, sizeof(*s));
        if (!s)
            return hs_pyro_fail_code(c->f, HS_ENOMEM, w, NULL);
        push__v1__raw_profile_series__init(s);
        req->series[i] = s;
        if (!json_is_object(o))
            return hs_pyro_failf(c->f, 400, "bad_json", "%s: not an object", w);
        json_t *labels, *samples;
        if (array_member(c, o, "labels", w, &labels) || array_member(c, o, "samples", w, &samples))
            return HS_EINVAL;
        if (json_labels(c, labels, s, w) || json_samples(c, samples, s, w))
            return HS_EINVAL;
    }
    return 0;
}

/* ---- validation and conversion ---------------------------------------------------------- */

static int check_labels(const Push__V1__RawProfileSeries *s, size_t i,
                        const struct hs_pyro_limits *lim, struct hs_pyro_fail *f)
{
    if (s->n_labels > lim->max_labels)
        return hs_pyro_failf(f, 413, "over_limit", "series[%zu]: %zu labels, more than %u", i,
                             s->n_labels, lim->max_labels);
    for (size_t k = 0; k < s->n_labels; k++) {
        const Types__V1__LabelPair *l = s->labels[k];
        const char *why = hs_pyro_push_label_problem(l->name, strlen(l->name), strlen(l->value));
        if (why)
            return hs_pyro_failf(f, 400, "bad_label", "series[%zu].labels[%zu]: %s (\"%.64s\")", i,
                                 k, why, l->name);
        for (size_t m = 0; m < k; m++)
            if (strcmp(s->labels[m]->name, l->name) == 0)
                return hs_pyro_failf(f, 400, "bad_label",
                                     "series[%zu].labels[%zu]: duplicate label name \"%s\"", i, k,
                                     l->name);
    }
    return 0;
}

static int add_sample(const Push__V1__RawProfileSeries *s, const Push__V1__RawSample *rs,
                      const struct hs_pyro_limits *lim, struct hs_profiles *b, const char *where,
                      struct hs_pyro_fail *f)
{
    struct hs_profile *p = hs_profile_new();
    if (!p)
        return hs_pyro_fail_code(f, HS_ENOMEM, where, NULL);
    int rc = hs_pyro_set_raw(p, rs->raw_profile.data, rs->raw_profile.len);
    for (size_t k = 0; k < s->n_labels && rc == 0; k++)
        rc = hs_profile_set_label(p, s->labels[k]->name, strlen(s->labels[k]->name),
                                  s->labels[k]->value, strlen(s->labels[k]->value));
    if (rc == 0 && rs->id && rs->id[0] && !(p->id = hs_profile_strdup(p, rs->id, strlen(rs->id))))
        rc = HS_ENOMEM;
    if (rc) {
        hs_profile_free(p);
        return hs_pyro_fail_code(f, rc, where, NULL);
    }
    char err[256] = "";
    rc = hs_profile_summarize(p, &lim->pprof, err, sizeof(err));
    if (rc) {
        hs_profile_free(p);
        return hs_pyro_fail_code(f, rc, where, err);
    }
    return hs_profiles_add(b, p) ? hs_pyro_fail_code(f, HS_ENOMEM, where, NULL) : 0;
}

static int convert(const Push__V1__PushRequest *req, const struct hs_pyro_limits *lim,
                   struct hs_profiles *b, struct hs_pyro_fail *f)
{
    size_t total = 0;
    for (size_t i = 0; i < req->n_series; i++)
        total += req->series[i]->n_samples;
    if (total == 0)
        return hs_pyro_failf(f, 400, "empty", "no profiles received");
    if (total > lim->max_profiles)
        return hs_pyro_failf(f, 413, "over_limit", "%zu profiles in one request, more than %u",
                             total, lim->max_profiles);
    for (size_t i = 0; i < req->n_series; i++) {
        const Push__V1__RawProfileSeries *s = req->series[i];
        if (check_labels(s, i, lim, f))
            return HS_EINVAL;
        for (size_t j = 0; j < s->n_samples; j++) {
            char where[64];
            snprintf(where, sizeof(where), "series[%zu].samples[%zu]", i, j);
            int rc = add_sample(s, s->samples[j], lim, b, where, f);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int hs_pyro_push_decode(const uint8_t *body, size_t len, bool json,
                        const struct hs_pyro_limits *lim, struct hs_profiles *b,
                        struct hs_pyro_fail *f)
{
    /* protobuf-c's structures are a few times the wire size at most; the cap stops a body
     * of tiny repeated messages from growing without bound */
    struct hs_arena *arena = hs_arena_new(len + 4096, len * 16 + (1 << 20));
    if (!arena)
        return hs_pyro_fail_code(f, HS_ENOMEM, "PushRequest", NULL);
    int rc;
    if (json) {
        json_error_t jerr;
        json_t *root = json_loadb((const char *)body, len, 0, &jerr);
        if (!root) {
            rc = hs_pyro_failf(f, 400, "bad_json",
                               "PushRequest: invalid JSON at line %d "
                               "column %d: %s",
                               jerr.line, jerr.column, jerr.text);
        } else {
            Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
            struct jctx c = {arena, f};
            rc = json_request(&c, root, &req);
            if (rc == 0)
                rc = convert(&req, lim, b, f);
            json_decref(root);
        }
    } else {
        ProtobufCAllocator alloc = hs_arena_pb_allocator(arena);
        Push__V1__PushRequest *req = push__v1__push_request__unpack(&alloc, len, body);
        rc = req ? convert(req, lim, b, f)
                 : hs_pyro_failf(f, 400, "malformed", "PushRequest: malformed protobuf");
    }
    hs_arena_free(arena);
    return rc;
}
