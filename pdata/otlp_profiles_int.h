/* otlp_profiles_int.h: what pdata/otlp_profiles*.c share: the decoded request and its profiles in
 * request order, the checks, the sample grouping by service and the pprof builder. Not for other
 * modules. */
#ifndef HS_OTLP_PROFILES_INT_H
#define HS_OTLP_PROFILES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "pdata/otlp_profiles.h"
#include "perftools/profiles/profile.pb-c.h"

struct hs_arena;

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    op_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary op_dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles op_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles op_scope_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile op_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample op_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Stack op_stack;
typedef Opentelemetry__Proto__Profiles__V1development__Location op_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line op_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function op_function;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping op_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Link op_link;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType op_value_type;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit op_kvu;
typedef Opentelemetry__Proto__Common__V1__AnyValue op_any;
typedef Opentelemetry__Proto__Common__V1__KeyValue op_kv;
typedef Perftools__Profiles__Profile pp_profile;

#define OP_SERVICE_NAME "service.name"
#define OP_EXE_NAME "process.executable.name"
#define OP_BUILD_ID "process.executable.build_id.gnu"
#define OP_UNKNOWN_SERVICE "unknown_service"

/* One Profile and where it sits. */
struct op_ref {
    const op_profile *prof;
    const op_resource_profiles *rp;
    const op_scope_profiles *sp;
    uint32_t ri, si, pi;
    const char *service; /* the resource's service, as Pyroscope derives it */
};

/* The pprof builder's memory of what it has converted: per dictionary entry, the pprof id or
 * index made for it, valid while its stamp equals `gen` (one generation per converted profile,
 * so nothing is cleared between profiles). */
struct op_maps {
    uint32_t gen;
    uint32_t *str_gen, *fn_gen, *loc_gen, *map_gen, *stk_gen, *attr_gen, *link_gen;
    int64_t *str_idx;
    uint64_t *fn_id, *loc_id, *map_id;
    uint64_t **stk_ids; /* a stack's location ids, shared by the samples that use it */
    void **attr_label;  /* Perftools__Profiles__Label *, or NULL: the attribute makes none */
    void **link_label;  /* [2 per link]: span_id and trace_id labels, or NULL */
};

struct hs_otlp_request {
    struct hs_arena *arena; /* protobuf-c's tree and everything below */
    size_t len;             /* of the wire bytes */
    const op_request *req;
    const op_dict *dict; /* the request's, or an empty one */
    struct op_ref *profiles;
    uint32_t nprofiles;
    struct op_maps *maps; /* made by the first conversion, malloc'd */
};

/* Samples of one profile grouped by service: the service of sample i is names[of_sample[i]]. */
struct op_groups {
    uint32_t n;
    const char **names;
    uint32_t *of_sample;
};

/* A built pprof (in the arena it was built in) and the __name__ Pyroscope gives it. */
struct op_pprof {
    pp_profile *pb;
    const char *name;
};

/* otlp_profiles_check.c: every index, size and string of the request (see the header). */
int hs_otlp_check(const struct hs_otlp_request *r, const struct hs_otlp_profiles_limits *lim,
                  char *err, size_t errlen);

/* otlp_profiles_read.c: an attribute value as Pyroscope reads it for labels (a string, an
 * integer in decimal, or the one element of an array of one); "" otherwise. buf holds a
 * formatted integer. */
const char *hs_otlp_any_string(const struct hs_otlp_request *r, const op_any *v, char buf[24]);
/* A KeyValue's key: `key`, or the dictionary string key_strindex names. */
const char *hs_otlp_kv_key(const struct hs_otlp_request *r, const op_kv *kv);
/* Groups the samples of profile `index` by service (names in first-seen order; a profile
 * without samples has one group, the resource's service). Allocates in a. 0 or HS_ENOMEM. */
int hs_otlp_groups(const struct hs_otlp_request *r, uint32_t index, struct hs_arena *a,
                   struct op_groups *g);

/* otlp_profiles_pprof.c: the pprof of the samples of profile `index` in group `group` (all
 * samples when of_sample is NULL), built in a. time_ns replaces the profile's time when not 0.
 * Returns 0, HS_ENOMEM or HS_E2BIG (a full arena). */
int hs_otlp_build_pprof(struct hs_otlp_request *r, uint32_t index, const uint32_t *of_sample,
                        uint32_t group, int64_t time_ns, struct hs_arena *a, struct op_pprof *out);

/* otlp_profiles_pprof.c: frees what the conversions of a request kept (NULL: nothing). */
void hs_otlp_maps_free(struct op_maps *m);

/* otlp_profiles_pprof.c: the gzipped pprof of profile `index` (the samples of `service` only,
 * when not NULL) into gz, its time replaced by time_ns when not 0; ga and ta are scratch (the
 * grouping and the tree) for the caller to reset. 0, HS_ENOMEM, HS_E2BIG or HS_EINVAL (no
 * such service), with err set. */
int hs_otlp_convert(struct hs_otlp_request *r, uint32_t index, const char *service, int64_t time_ns,
                    struct hs_arena *ga, struct hs_arena *ta, struct hs_buf *gz, char *err,
                    size_t errlen);

/* The bound on one built pprof's arena: its tree repeats per sample what the request says once. */
#define OP_TREE_CAP(request_len) ((size_t)(request_len)*64 + ((size_t)64 << 20))

#endif
