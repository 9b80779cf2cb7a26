/* push.c: POST /push.v1.PusherService/Push bodies (wire.md §6): a PushRequest in
 * protobuf or Connect JSON, its counts bounded before protobuf-c decodes it into one capped
 * arena; JSON is first turned into the same wire bytes so both go through one validation. */
#include <stdio.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/errors.h"
#include "pdata/pb_json.h"
#include "push/v1/push.pb-c.h"
#include "receivers/pyroscope/pyroscope_int.h"

/* A push body's JSON nests 5 levels; unknown members may add some. */
#define PUSH_JSON_MAX_DEPTH 64
/* What the decoded structures may take beyond twice the body (see hs_pyro_push_decode). */
#define PUSH_ARENA_BASE (8u << 20)

/* ---- bounding what protobuf-c will build ------------------------------------------------- */

/* Connect JSON becomes the PushRequest's wire form while it is read (pdata/pb_json.c), so it
 * costs its output, and then takes the protobuf path. Its counts are bounded as they arrive,
 * with the limits the protobuf path checks below. */
int hs_pyro_push_json_to_wire(const uint8_t *body, size_t len, const struct hs_pyro_limits *lim,
                              struct hs_buf *wire, struct hs_pyro_fail *f)
{
    const struct hs_pb_json_limit limits[] = {
        {&push__v1__push_request__descriptor, "series", lim->max_profiles, true,
         "max_profiles_per_request"},
        {&push__v1__raw_profile_series__descriptor, "samples", lim->max_profiles, true,
         "max_profiles_per_request"},
        {&push__v1__raw_profile_series__descriptor, "labels", lim->max_labels, false, "max_labels"},
        {&push__v1__raw_profile_series__descriptor, "annotations", lim->max_labels, false,
         "max_labels"},
    };
    const struct hs_pb_json_opts o = {.desc = &push__v1__push_request__descriptor,
                                      .limits = limits,
                                      .n_limits = HS_ARRAY_SIZE(limits),
                                      .max_depth = PUSH_JSON_MAX_DEPTH};
    char err[256];
    int rc = hs_pb_json_to_wire((const char *)body, len, &o, wire, err, sizeof(err));
    if (rc == HS_E2BIG)
        return hs_pyro_failf(f, 413, "over_limit", "PushRequest: %s", err);
    if (rc)
        return rc == HS_ENOMEM ? hs_pyro_fail_code(f, rc, "PushRequest", NULL)
                               : hs_pyro_failf(f, 400, "bad_json", "PushRequest: %s", err);
    return 0;
}

/* Reads a varint at *p; false past end or past ten bytes. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 70; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80)
            return true;
    }
    return false;
}

/* The next field of [*p, end): its number, and for length-delimited ones its bytes in *sub.
 * false at the end or on bytes protobuf-c will refuse anyway (it says why, as before). */
static bool next_field(const uint8_t **p, const uint8_t *end, uint64_t *field, struct hs_str *sub)
{
    uint64_t tag, n;
    if (*p >= end || !varint(p, end, &tag))
        return false;
    *field = tag >> 3;
    *sub = (struct hs_str){NULL, 0};
    switch (tag & 7) {
    case 0:
        return varint(p, end, &n);
    case 1:
    case 5:
        n = (tag & 7) == 1 ? 8 : 4;
        break;
    case 2:
        if (!varint(p, end, &n) || n > (uint64_t)(end - *p))
            return false;
        *sub = (struct hs_str){(const char *)*p, (size_t)n};
        break;
    default:
        return false;
    }
    if (n > (uint64_t)(end - *p))
        return false;
    *p += n;
    return true;
}

/* Counts series, samples, labels and annotations on the wire before protobuf-c builds a struct
 * for each: a body of empty series would otherwise cost 30 times itself. */
static int wire_counts(const uint8_t *p, size_t len, const struct hs_pyro_limits *lim,
                       struct hs_pyro_fail *f)
{
    const uint8_t *end = p + len;
    uint64_t field, n_series = 0, n_samples = 0;
    struct hs_str s;
    while (next_field(&p, end, &field, &s)) {
        if (field != 1 || !s.ptr)
            continue;
        if (++n_series > lim->max_profiles)
            return hs_pyro_failf(f, 413, "over_limit",
                                 "series[%u]: more than %u in one request (limit "
                                 "max_profiles_per_request)",
                                 lim->max_profiles, lim->max_profiles);
        const uint8_t *q = (const uint8_t *)s.ptr, *qend = q + s.len;
        uint64_t sub, n[4] = {0};
        struct hs_str v;
        while (next_field(&q, qend, &sub, &v))
            if (sub >= 1 && sub <= 3 && v.ptr)
                n[sub]++;
        n_samples += n[2];
        if (n[1] > lim->max_labels || n[3] > lim->max_labels)
            return hs_pyro_failf(
                f, 413, "over_limit", "series[%llu].%s: more than %u (limit max_labels)",
                (unsigned long long)n_series - 1, n[1] > lim->max_labels ? "labels" : "annotations",
                lim->max_labels);
        if (n_samples > lim->max_profiles)
            return hs_pyro_failf(f, 413, "over_limit",
                                 "series[%llu].samples: more than %u in one request (limit "
                                 "max_profiles_per_request)",
                                 (unsigned long long)n_series - 1, lim->max_profiles);
    }
    return 0;
}

/* ---- validation and conversion ---------------------------------------------------------- */

static int check_labels(const Push__V1__RawProfileSeries *s, size_t i,
                        const struct hs_pyro_limits *lim, struct hs_pyro_fail *f)
{
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

/* protobuf-c reports any failure as NULL; this remembers whether the arena's cap caused it. */
struct capped {
    struct hs_arena *a;
    bool full;
};

static void *capped_alloc(void *ud, size_t n)
{
    struct capped *c = ud;
    void *p = hs_arena_alloc(c->a, n);
    c->full |= !p;
    return p;
}

static void capped_free(void *ud, void *p)
{
    (void)ud;
    (void)p; /* the arena goes at once */
}

int hs_pyro_push_decode(const uint8_t *body, size_t len, bool json,
                        const struct hs_pyro_limits *lim, struct hs_profiles *b,
                        struct hs_pyro_fail *f)
{
    struct hs_buf wire = {0};
    int rc =
        json ? hs_pyro_push_json_to_wire(body, len, lim, &wire, f) : wire_counts(body, len, lim, f);
    if (rc) {
        hs_buf_free(&wire);
        return rc;
    }
    if (json) {
        body = wire.data ? wire.data : (const uint8_t *)"";
        len = wire.len;
    }
    /* with the counts bounded, protobuf-c's structures are the bytes plus a few MiB at most
     * (1000 series of 30 labels are 3 MiB); the cap holds if the limits were raised far */
    size_t cap = 2 * len + PUSH_ARENA_BASE;
    struct capped c = {.a = hs_arena_new(len + len / 4 + 16384, cap)}; /* bytes + structs */
    if (!c.a) {
        hs_buf_free(&wire);
        return hs_pyro_fail_code(f, HS_ENOMEM, "PushRequest", NULL);
    }
    ProtobufCAllocator alloc = {.alloc = capped_alloc, .free = capped_free, .allocator_data = &c};
    Push__V1__PushRequest *req = push__v1__push_request__unpack(&alloc, len, body);
    hs_buf_free(&wire); /* protobuf-c copied what it keeps */
    if (req)
        rc = convert(req, lim, b, f);
    else if (c.full)
        rc = hs_pyro_failf(f, 413, "too_large",
                           "PushRequest: decoded, it would pass its memory cap (%zu bytes: twice "
                           "the body and %u MiB)",
                           cap, PUSH_ARENA_BASE >> 20);
    else
        rc = hs_pyro_failf(f, 400, "malformed", "PushRequest: malformed protobuf");
    hs_arena_free(c.a);
    return rc;
}
