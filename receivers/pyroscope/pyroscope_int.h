/* pyroscope_int.h: the parsing pieces of the pyroscope receiver (query, time, multipart, push
 * bodies), apart from the HTTP plumbing so the unit tests and the fuzzer reach them directly. */
#ifndef HS_PYROSCOPE_INT_H
#define HS_PYROSCOPE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "pdata/profiles.h"

struct hs_buf;
struct hs_component;

/* The /ingest query parameters we read (wire.md §5.1), URL-decoded and NUL-terminated; NULL
 * when absent. The first occurrence of a repeated parameter wins, as Go's url.Values.Get. */
struct hs_pyro_query {
    const char *name, *from, *until, *format, *sample_rate, *spy_name, *units, *aggregation_type;
    char *storage; /* backs every value above; hs_pyro_query_free */
};

/* Returns 0, HS_EINVAL (a bad %XX escape: err says where) or HS_ENOMEM. */
int hs_pyro_query_parse(const char *q, size_t len, struct hs_pyro_query *out, char *err,
                        size_t errlen);
void hs_pyro_query_free(struct hs_pyro_query *q);

/* Pyroscope's attime for from/until: all digits of length 13 => ms, 16 => µs, 19 => ns, 8 that
 * form a date => YYYYMMDD (UTC midnight), other lengths => seconds; "now", "now-1h", "now+30s"
 * relative to now_ns. Anything else, like Pyroscope, means now. Returns ns since the epoch. */
int64_t hs_pyro_attime(const char *s, int64_t now_ns);

/* sampleRate: strconv.Atoi, >= 0; anything else gives the default 100 and *valid = false. */
uint32_t hs_pyro_sample_rate(const char *s, bool *valid);

struct hs_pyro_part {
    struct hs_str name; /* Content-Disposition form-data name */
    const uint8_t *data;
    size_t len;
};

#define HS_PYRO_MAX_PARTS 16

/* The boundary parameter of a multipart/form-data Content-Type (quoted or not). Returns false
 * when the type is not multipart/form-data (*is_multipart false) or the boundary is missing or
 * malformed (*is_multipart true). */
bool hs_pyro_multipart_boundary(struct hs_str content_type, bool *is_multipart,
                                struct hs_str *boundary);
/* Splits a multipart body into at most HS_PYRO_MAX_PARTS parts (views into body). Returns 0 or
 * HS_EINVAL with err naming the problem. */
int hs_pyro_multipart_parse(const uint8_t *body, size_t len, struct hs_str boundary,
                            struct hs_pyro_part *parts, size_t *nparts, char *err, size_t errlen);

/* What a folded upload is, from its app name's last '.' segment (wire.md §5.3). */
struct hs_pyro_folded {
    const char *suffix; /* "mutex_count"; "cpu" when the name has no dot */
    const char *name;   /* the series' __name__: "mutex" */
    const char *type;   /* the pprof sample type and unit: "contentions", "count" */
    const char *unit;
    size_t suffix_len; /* 0 when the name has no dot, else the length of ".suffix" */
};

/* The profile a folded upload makes, as Pyroscope makes it. When __name__ is process_cpu or
 * wall and sampleRate is not 0, the counts are scaled by the sampling period into "cpu" (or
 * "wall") nanoseconds with the period type cpu/nanoseconds. false: an unknown suffix. */
bool hs_pyro_folded_type(const char *app, struct hs_pyro_folded *out);

/* Series labels of an /ingest profile as Pyroscope derives them (wire.md §5.3), after
 * hs_labelset_parse filled p: drops `__` labels but `__session_id__`, sets service_name (to
 * `service` unless given), pyroscope_spy (when spy != NULL) and __delta__="false". */
int hs_pyro_ingest_labels(struct hs_profile *p, const char *service, size_t service_len,
                          const char *spy);

/* Checks a push series label (wire.md §6): name [a-zA-Z_][a-zA-Z0-9_.]* of at most 1024 bytes,
 * value at most 2048. Returns NULL or what is wrong. */
const char *hs_pyro_push_label_problem(const char *name, size_t name_len, size_t value_len);

/* ---- request decoding (ingest.c, push.c) ---------------------------- */

struct hs_pyro_limits {
    struct hs_pprof_limits pprof;
    uint32_t max_labels;   /* series labels from `name` or a push series */
    uint32_t max_profiles; /* profiles in one push request */
};

/* Why a request is refused: HTTP status, a metrics reason and the message for the client. */
struct hs_pyro_fail {
    int status;
    const char *reason;
    char msg[512];
};

/* Fills f and returns HS_EINVAL (4xx) or HS_ENOMEM (503). */
int hs_pyro_failf(struct hs_pyro_fail *f, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps a decoder's code (HS_E2BIG 413, HS_ENOMEM 503, else 400) and its text, prefixed. */
int hs_pyro_fail_code(struct hs_pyro_fail *f, int rc, const char *where, const char *text);

struct hs_pyro_ingest_req {
    struct hs_str query;        /* raw, after '?' */
    struct hs_str content_type; /* {NULL, 0} when absent */
    const uint8_t *body;
    size_t len;
    int64_t now_ns;
};

/* POST /ingest (wire.md §5): one profile from the query and body, summarized, added to b. */
int hs_pyro_ingest_decode(const struct hs_pyro_ingest_req *in, const struct hs_pyro_limits *lim,
                          struct hs_profiles *b, struct hs_pyro_fail *f);

/* POST /push.v1.PusherService/Push (wire.md §6), body already decompressed: every RawSample
 * becomes one summarized profile in b; any bad one fails the whole request. */
int hs_pyro_push_decode(const uint8_t *body, size_t len, bool json,
                        const struct hs_pyro_limits *lim, struct hs_profiles *b,
                        struct hs_pyro_fail *f);

/* The push API's JSON as PushRequest wire bytes appended to wire, converted while read (so its
 * memory is the output, at most twice the body), its series, samples and labels counted against
 * lim as they arrive. Fills f (400 bad_json, 413 over_limit, 503) and returns nonzero on
 * failure. hs_pyro_push_decode's first step, apart for the fuzzer. */
int hs_pyro_push_json_to_wire(const uint8_t *body, size_t len, const struct hs_pyro_limits *lim,
                              struct hs_buf *wire, struct hs_pyro_fail *f);

/* hs_profile_set_raw for bytes that may be empty with a NULL pointer (an empty protobuf-c
 * bytes field, an empty body): memcpy must not see NULL. */
static inline int hs_pyro_set_raw(struct hs_profile *p, const void *data, size_t len)
{
    return hs_profile_set_raw(p, len ? data : "", len);
}

/* The port a started receiver listens on (tests start it on port 0). */
int hs_pyroscope_port(const struct hs_component *c);

#endif
