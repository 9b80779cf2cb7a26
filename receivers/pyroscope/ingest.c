/* ingest.c: POST /ingest (wire.md §5): the query and body of one upload into one
 * profile: raw pprof, multipart pprof or folded text, dispatched in Pyroscope's order, with the
 * series labels Pyroscope derives. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/errors.h"
#include "receivers/pyroscope/pyroscope_int.h"

int hs_pyro_failf(struct hs_pyro_fail *f, int status, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
    va_end(ap);
    f->status = status;
    f->reason = reason;
    return status == 503 ? HS_ENOMEM : HS_EINVAL;
}

int hs_pyro_fail_code(struct hs_pyro_fail *f, int rc, const char *where, const char *text)
{
    if (!text || !*text)
        text = hs_strerror(rc);
    if (rc == HS_ENOMEM)
        return hs_pyro_failf(f, 503, "no_memory", "%s: out of memory", where);
    if (rc == HS_E2BIG)
        return hs_pyro_failf(f, 413, "over_limit", "%s: %s", where, text);
    return hs_pyro_failf(f, 400, "malformed", "%s: %s", where, text);
}

/* sample_type_config names a few sample types (wire.md §5.3): a Go SDK's is under 2 KiB. The
 * cap bounds what jansson's tree of it can take: ~40x its size for a body of empty objects. */
#define STC_MAX_BYTES 65536u

static bool media_contains(struct hs_str ct, const char *lit)
{
    size_t n = strlen(lit);
    for (size_t i = 0; i + n <= ct.len; i++)
        if (hs_str_ieq((struct hs_str){ct.ptr + i, n}, lit))
            return true;
    return false;
}

/* The formats Pyroscope knows but we do not convert (wire.md §5.3 cases 1-4 and 6). */
static const char *unsupported_format(const char *fmt, struct hs_str ct)
{
    if ((fmt && strcmp(fmt, "trie") == 0) || media_contains(ct, "binary/octet-stream+trie"))
        return "trie";
    if ((fmt && strcmp(fmt, "tree") == 0) || media_contains(ct, "binary/octet-stream+tree"))
        return "tree";
    static const char *const others[] = {"lines", "jfr"};
    for (size_t i = 0; fmt && i < HS_ARRAY_SIZE(others); i++)
        if (strcmp(fmt, others[i]) == 0)
            return others[i];
    return NULL;
}

/* What Pyroscope's json.Unmarshal into map[string]*SampleTypeConfig refuses
 * (pkg/og/convert/pprof/profile.go loadPprofFromForm): a member that is not an object or null,
 * or a known field of the wrong type. "display-name" names the profile (pprof_summary.c). */
static void stc_check(const json_t *cfg, char *why, size_t len)
{
    static const struct {
        const char *key;
        bool boolean;
    } fields[] = {{"units", false},
                  {"display-name", false},
                  {"aggregation", false},
                  {"cumulative", true},
                  {"sampled", true}};
    const char *type;
    const json_t *v;
    json_object_foreach((json_t *)cfg, type, v)
    {
        if (json_is_null(v))
            continue;
        if (!json_is_object(v)) {
            snprintf(why, len, "\"%.40s\" is not an object", type);
            return;
        }
        for (size_t i = 0; i < HS_ARRAY_SIZE(fields); i++) {
            const json_t *fv = json_object_get(v, fields[i].key);
            if (fv && !json_is_null(fv) &&
                (fields[i].boolean ? !json_is_boolean(fv) : !json_is_string(fv))) {
                snprintf(why, len, "\"%.40s\".%s is not a %s", type, fields[i].key,
                         fields[i].boolean ? "boolean" : "string");
                return;
            }
        }
    }
}

static int multipart_profile(const struct hs_pyro_ingest_req *in, struct hs_profile *p,
                             struct hs_pyro_fail *f)
{
    bool is_mp;
    struct hs_str boundary;
    if (!hs_pyro_multipart_boundary(in->content_type, &is_mp, &boundary))
        return hs_pyro_failf(f, 400, "bad_multipart",
                             "multipart/form-data without a valid boundary parameter");
    struct hs_pyro_part parts[HS_PYRO_MAX_PARTS];
    size_t n = 0;
    char err[160] = "";
    if (hs_pyro_multipart_parse(in->body, in->len, boundary, parts, &n, err, sizeof(err)))
        return hs_pyro_failf(f, 400, "bad_multipart", "%s", err);
    const struct hs_pyro_part *profile = NULL, *stc = NULL;
    for (size_t i = 0; i < n; i++) { /* the first of a name wins, as Go's FormFile */
        if (hs_str_eq(parts[i].name, "prev_profile"))
            return hs_pyro_failf(f, 400, "unsupported",
                                 "prev_profile (cumulative profiles of old clients) is not "
                                 "supported");
        if (hs_str_eq(parts[i].name, "profile") && !profile)
            profile = &parts[i];
        if (hs_str_eq(parts[i].name, "sample_type_config") && !stc)
            stc = &parts[i];
    }
    if (!profile)
        return hs_pyro_failf(f, 400, "bad_multipart",
                             "multipart/form-data without a \"profile\" part");
    if (stc && stc->len > STC_MAX_BYTES) /* checked whole by jansson below, and kept */
        return hs_pyro_failf(f, 413, "too_large",
                             "sample_type_config: %zu bytes, more than %u (a Go SDK's is under "
                             "2 KiB)",
                             stc->len, STC_MAX_BYTES);
    if (stc) {
        json_error_t jerr;
        json_t *j = json_loadb((const char *)stc->data, stc->len, 0, &jerr);
        bool object = j && json_is_object(j);
        char why[160] = "";
        if (object)
            stc_check(j, why, sizeof(why));
        json_decref(j);
        if (!object)
            return hs_pyro_failf(f, 400, "bad_multipart",
                                 "sample_type_config: not a JSON object%s%s", j ? "" : ": ",
                                 j ? "" : jerr.text);
        if (why[0])
            return hs_pyro_failf(f, 400, "bad_multipart", "sample_type_config: %s", why);
        if (!(p->sample_type_config = hs_profile_strdup(p, (const char *)stc->data, stc->len)))
            return hs_pyro_fail_code(f, HS_ENOMEM, "sample_type_config", NULL);
    }
    if (hs_pyro_set_raw(p, profile->data, profile->len))
        return hs_pyro_fail_code(f, HS_ENOMEM, "profile", NULL);
    return 0;
}

/* Folded text into an uncompressed pprof typed and named by the app name's suffix; the
 * service is the app name without it. *name: the __name__ Pyroscope gives it. */
static int folded_profile(const struct hs_pyro_ingest_req *in, const struct hs_pyro_query *q,
                          const struct hs_pyro_limits *lim, struct hs_profile *p,
                          size_t *service_len, const char **name, struct hs_pyro_fail *f)
{
    struct hs_pyro_folded ft;
    if (!hs_pyro_folded_type(p->app_name, &ft))
        return hs_pyro_failf(f, 400, "bad_name",
                             "name: unknown profile type \"%s\" (the app name's last '.' "
                             "segment, e.g. .cpu, .wall, .alloc_space)",
                             strrchr(p->app_name, '.') + 1);
    *service_len = strlen(p->app_name) - ft.suffix_len;
    *name = ft.name;
    int64_t period = 0;
    bool valid;
    uint32_t rate = hs_pyro_sample_rate(q->sample_rate, &valid);
    bool timed = strcmp(ft.name, "process_cpu") == 0 || strcmp(ft.name, "wall") == 0;
    if (timed && rate) { /* ingest_adapter.go Put: the counts become time */
        period = 1000000000 / rate;
        ft.type = strcmp(ft.name, "wall") == 0 ? "wall" : "cpu";
        ft.unit = "nanoseconds";
    }
    struct hs_buf out = {0};
    char err[200] = "";
    int rc = hs_pprof_from_folded((const char *)in->body, in->len, ft.type, ft.unit, period,
                                  &lim->pprof, &out, err, sizeof(err));
    if (rc == 0)
        rc = hs_pyro_set_raw(p, out.data, out.len);
    hs_buf_free(&out);
    return rc ? hs_pyro_fail_code(f, rc, "folded", err) : 0;
}

static int ingest_profile(const struct hs_pyro_ingest_req *in, const struct hs_pyro_query *q,
                          const struct hs_pyro_limits *lim, struct hs_profile *p,
                          struct hs_pyro_fail *f)
{
    char err[256] = "";
    int rc = hs_labelset_parse(q->name, strlen(q->name), lim->max_labels, p, err, sizeof(err));
    if (rc)
        return hs_pyro_fail_code(f, rc, "name", err);
    const char *unsup = unsupported_format(q->format, in->content_type);
    if (!unsup && q->format && strcmp(q->format, "speedscope") == 0)
        unsup = "speedscope";
    if (unsup)
        return hs_pyro_failf(f, 415, "unsupported",
                             "format %s is not supported (supported: pprof, multipart/form-data "
                             "pprof, folded)",
                             unsup);
    size_t service_len = strlen(p->app_name);
    const char *folded_name = NULL;
    bool is_mp;
    struct hs_str boundary;
    if (q->format && strcmp(q->format, "pprof") == 0)
        rc = hs_pyro_set_raw(p, in->body, in->len) ? hs_pyro_fail_code(f, HS_ENOMEM, "body", 0) : 0;
    else if ((hs_pyro_multipart_boundary(in->content_type, &is_mp, &boundary), is_mp))
        rc = multipart_profile(in, p, f);
    else
        rc = folded_profile(in, q, lim, p, &service_len, &folded_name, f);
    if (rc)
        return rc;
    /* absent from/until stay 0: summarize then takes the pprof's own time (or now) */
    if (q->from)
        p->from_ns = hs_pyro_attime(q->from, in->now_ns);
    if (q->until)
        p->until_ns = hs_pyro_attime(q->until, in->now_ns);
    /* an inverted window would match no span, or the wrong ones: refused, not guessed at */
    if (q->from && q->until && p->until_ns < p->from_ns)
        return hs_pyro_failf(f, 400, "bad_query", "until (%.32s) is before from (%.32s)", q->until,
                             q->from);
    if (q->spy_name && !(p->spy_name = hs_profile_strdup(p, q->spy_name, strlen(q->spy_name))))
        return hs_pyro_fail_code(f, HS_ENOMEM, "spyName", NULL);
    if (hs_pyro_ingest_labels(p, p->app_name, service_len, q->spy_name) ||
        (folded_name && hs_profile_set_label(p, "__name__", 8, folded_name, strlen(folded_name))))
        return hs_pyro_fail_code(f, HS_ENOMEM, "labels", NULL);
    rc = hs_profile_summarize(p, &lim->pprof, err, sizeof(err));
    return rc ? hs_pyro_fail_code(f, rc, "profile", err) : 0;
}

int hs_pyro_ingest_decode(const struct hs_pyro_ingest_req *in, const struct hs_pyro_limits *lim,
                          struct hs_profiles *b, struct hs_pyro_fail *f)
{
    struct hs_pyro_query q;
    char err[160] = "";
    int rc = hs_pyro_query_parse(in->query.ptr, in->query.len, &q, err, sizeof(err));
    if (rc)
        return rc == HS_ENOMEM ? hs_pyro_fail_code(f, rc, "query", NULL)
                               : hs_pyro_failf(f, 400, "bad_query", "%s", err);
    if (!q.name) {
        hs_pyro_query_free(&q);
        return hs_pyro_failf(f, 400, "bad_query", "missing required query parameter name");
    }
    struct hs_profile *p = hs_profile_new();
    if (!p) {
        hs_pyro_query_free(&q);
        return hs_pyro_fail_code(f, HS_ENOMEM, "profile", NULL);
    }
    rc = ingest_profile(in, &q, lim, p, f);
    hs_pyro_query_free(&q);
    if (rc) {
        hs_profile_free(p);
        return rc;
    }
    return hs_profiles_add(b, p) ? hs_pyro_fail_code(f, HS_ENOMEM, "batch", NULL) : 0;
}
