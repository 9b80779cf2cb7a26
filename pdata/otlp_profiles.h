/* otlp_profiles.h: OTLP profiles (ExportProfilesServiceRequest, opentelemetry-proto v1.11.0,
 * package v1development) into the pipeline's profile model: decoded and checked once, each Profile
 * summarized as a pprof is, for the correlator; the request's bytes kept for an OTLP exporter;
 * pprof made on demand for the Pyroscope exporter, the way Pyroscope's OTLP ingestion makes it. */
#ifndef HS_OTLP_PROFILES_H
#define HS_OTLP_PROFILES_H

#include <stddef.h>
#include <stdint.h>

#include "pdata/profiles.h"

struct hs_buf;

/* 0 is "no limit" for each, except max_value_depth (0 = 32). Exceeding one is HS_E2BIG, with a
 * message naming the field and the limit. */
struct hs_otlp_profiles_limits {
    uint64_t max_decompressed;  /* bytes of the request as protobuf */
    uint32_t max_profiles;      /* Profile messages in one request */
    uint32_t max_samples;       /* Sample messages in one Profile */
    uint32_t max_table_entries; /* entries of each dictionary table (strings, stacks, ...) */
    uint32_t max_stack_depth;   /* frames of one sample, inlined frames included */
    uint32_t max_attributes;    /* attributes of a resource or scope; attribute_indices of a
                                 * profile, sample, location or mapping */
    uint32_t max_value_depth;   /* nesting of arrays and kvlists in an attribute value */
    uint32_t max_string_len;    /* bytes of one string_table entry */
};

/* ---- into a batch (what the receiver calls) --------------------------------------------- */

/* Decodes `len` bytes of ExportProfilesServiceRequest (protobuf, decompressed) into b, an empty
 * batch from hs_profiles_new: b becomes HS_PROFILES_OTLP, keeps a copy of the bytes as its
 * `request` (counted in b->bytes), and gets one item per Profile (per Profile and sample
 * `service.name`, when samples name services: Pyroscope splits them so), each summarized as
 * hs_profile_summarize summarizes the pprof hs_profiles_to_pprof would make of it: functions by
 * (name, file), root-first stacks, and a sample's span from its link (Link.span_id, as pprof's
 * `span_id` label). Labels are the series labels Pyroscope's OTLP ingestion derives: resource
 * then scope attributes with a string or integer value (names with dots as `_`, first one of a
 * name wins), `service_name` (the sample's service.name, the resource's, or
 * "unknown_service[:<process.executable.name>]"), `__name__` (process_cpu for samples/count
 * sampled in cpu/nanoseconds, off_cpu, else the period type), `__delta__`="false",
 * `__otel__`="true". from/until are time_unix_nano and + duration_nano (10 s when 0; now when
 * the time is 0), as the converted pprof says.
 *
 * Every index is checked against its table, ids against their sizes, values against
 * timestamps, strings for UTF-8; any failure is HS_EINVAL for the whole request with err naming
 * the field and index, e.g. "resource_profiles[0].scope_profiles[1].profiles[2].samples[7].
 * stack_index: 912 is out of range (stack_table has 40 entries)"; a limit is HS_E2BIG;
 * HS_ENOMEM. On failure b has no items and no request. lim may be NULL (none). */
int hs_otlp_profiles_decode(struct hs_profiles *b, const uint8_t *data, size_t len,
                            const struct hs_otlp_profiles_limits *lim, char *err, size_t errlen);

/* The same from OTLP/JSON (lowerCamelCase or snake_case keys, hex trace, span and profile ids,
 * 64-bit integers as strings or numbers): converted once to protobuf, which b keeps as its
 * request, then decoded as above. max_decompressed bounds the protobuf, not the text. */
int hs_otlp_profiles_decode_json(struct hs_profiles *b, const char *json, size_t len,
                                 const struct hs_otlp_profiles_limits *lim, char *err,
                                 size_t errlen);

/* Gives each item of an OTLP batch without pprof its pprof (gzipped, in p->raw, counted in
 * b->bytes), made from b->request as Pyroscope's converter makes it (pkg/ingester/otlp/
 * convert.go): one sample type, sample values summed (or timestamps counted; samples/count in
 * cpu/nanoseconds become cpu nanoseconds: x period), locations, functions and mappings that the
 * samples use, sample attributes as string labels but service.name, the link as `span_id` and
 * `trace_id` labels (lowercase hex), period, time and duration. Done once: items that have pprof
 * are left alone, so any exporter may call it; a pprof batch returns at once. The batch is shared
 * only within one loop (as its refcount is), so filling it in place is safe. Returns 0,
 * HS_ENOMEM, or HS_E2BIG when a converted profile passes the memory bound (err says which). */
int hs_profiles_to_pprof(struct hs_profiles *b, char *err, size_t errlen);

/* ---- one request, for tools and tests --------------------------------------------------- */

/* A decoded, checked request (protobuf-c's tree in an arena). */
struct hs_otlp_request;

/* Decodes and checks as hs_otlp_profiles_decode does, without making a batch. */
int hs_otlp_request_parse(const uint8_t *data, size_t len,
                          const struct hs_otlp_profiles_limits *lim, struct hs_otlp_request **out,
                          char *err, size_t errlen);
void hs_otlp_request_free(struct hs_otlp_request *r);
/* Profile messages in the request; `index` below counts them in request order. */
uint32_t hs_otlp_request_profiles(const struct hs_otlp_request *r);

/* The pprof of Profile `index` (gzipped, appended to out): its samples whose service is
 * `service` (as the batch items split them), or all of them when service is NULL; time_ns, when
 * not 0, replaces the profile's time (a batch item passes its from_ns, so a profile without a
 * time converts to the time its summary has). Returns 0, HS_EINVAL (no such index or service),
 * HS_E2BIG or HS_ENOMEM. */
int hs_otlp_profile_to_pprof(struct hs_otlp_request *r, uint32_t index, const char *service,
                             int64_t time_ns, struct hs_buf *out, char *err, size_t errlen);

#endif
