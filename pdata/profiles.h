/* profiles.h: profiles as they travel through hotspan (design.md §6–7). Each profile keeps the
 * pprof bytes it arrived with (forwarded untouched), its series labels, time range and, decoded
 * once, a summary the correlator indexes. A batch is the profiles of one request, one tenant;
 * an OTLP batch also keeps that request's bytes (pdata/otlp_profiles.h). Everything a profile
 * points to lives in its own arena: one free. */
#ifndef HS_PROFILES_H
#define HS_PROFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/consumer.h"

struct hs_arena;
struct hs_buf;

#define HS_PROFILE_NO_SPAN UINT32_MAX

struct hs_label {
    const char *name;
    const char *value;
};

/* A function of the profile, deduplicated by (name, file). Values per sample type. */
struct hs_profile_func {
    const char *name;      /* Function.name ("" when unset) */
    const char *file;      /* Function.filename ("" when unset) */
    int64_t *self;         /* [ntypes]: samples whose leaf frame is this function */
    int64_t *total;        /* [ntypes]: samples with this function anywhere on the stack (once) */
};

/* One distinct (stack of functions, span) pair with its summed sample values. */
struct hs_profile_stack {
    const uint32_t *funcs; /* indexes into funcs, ROOT FIRST (pprof stores leaf first); inlined
                            * frames expanded (a Location's lines, outermost caller first) */
    uint32_t depth;
    uint32_t span;         /* index into spans, or HS_PROFILE_NO_SPAN */
    int64_t *values;       /* [ntypes] */
};

/* Samples labelled with a span (pprof string label `span_id`, 16 hex chars; the legacy
 * `profile_id` label is read the same way, as Pyroscope does: wire.md §7.1). */
struct hs_profile_span {
    uint8_t id[8];         /* the span id bytes, as in OTLP */
    int64_t *values;       /* [ntypes]: totals of the samples carrying this span id */
};

struct hs_profile_summary {
    uint32_t ntypes;
    const char **types;    /* sample_type[i].type, e.g. "cpu" */
    const char **units;    /* sample_type[i].unit, e.g. "nanoseconds" */
    const char **type_ids; /* "<__name__>:<type>:<unit>:<period type>:<period unit>",
                            * e.g. "process_cpu:cpu:nanoseconds:cpu:nanoseconds": the series
                            * Pyroscope stores the type in, after its default relabel rules
                            * (a wall profile's cpu column is process_cpu) */
    const char *period_type, *period_unit;
    int64_t period;
    /* The column the correlator reads: a "cpu" type if any, else "wall", else the
     * default_sample_type, else the last. */
    uint32_t main_type;
    int64_t time_nanos, duration_nanos;
    int64_t *totals;       /* [ntypes] over all samples */
    uint32_t samples;      /* pprof Sample messages */
    uint32_t nfuncs, nstacks, nspans;
    struct hs_profile_func *funcs;
    struct hs_profile_stack *stacks;
    struct hs_profile_span *spans;
};

struct hs_profile {
    struct hs_arena *arena;   /* owns everything below */
    struct hs_label *labels;  /* series labels, sorted by name, names unique */
    uint32_t nlabels, cap_labels;
    const char *service;      /* value of the service_name label once summarized */
    const char *app_name;     /* /ingest: the `name` query's part before '{'; NULL otherwise */
    int64_t from_ns, until_ns;/* the window the profile covers (ns since the epoch) */
    const uint8_t *raw;       /* pprof bytes as received, gzipped or not */
    size_t raw_len;
    const char *id;           /* push API RawSample.ID, or NULL */
    const char *spy_name;     /* /ingest spyName, or NULL */
    const char *sample_type_config; /* /ingest multipart part (JSON), or NULL */
    uint32_t otlp_index;            /* OTLP batch: which Profile of the request, in request order */
    struct hs_profile_summary summary;
};

enum hs_profiles_format {
    HS_PROFILES_PPROF = 0, /* the Pyroscope APIs: each item's raw is the pprof received */
    HS_PROFILES_OTLP,      /* `request` is what came in; an item's raw is NULL until
                            * hs_profiles_to_pprof converts it (pdata/otlp_profiles.h) */
};

struct hs_profiles {
    unsigned refs;
    char *tenant;             /* X-Scope-OrgID as received; NULL when none */
    bool tenant_authenticated; /* tenant is a per-tenant token's, not asserted by the client */
    struct hs_profile **items;
    uint32_t count, cap;
    size_t bytes; /* sum of raw_len, plus request_len: what queues count */
    enum hs_profiles_format format;
    uint8_t *request; /* OTLP: the ExportProfilesServiceRequest as protobuf (JSON input
                       * converted once), owned; what an OTLP exporter forwards */
    size_t request_len;
    uint32_t request_profiles; /* OTLP: its Profile messages (an item is one Profile, or the
                                * part of one whose samples name one service.name) */
};

/* ---- a profile (pdata/profiles.c) ------------------------------------------------------- */

/* An empty profile with its own arena; NULL when out of memory. */
struct hs_profile *hs_profile_new(void);
void hs_profile_free(struct hs_profile *p);
/* Copies `len` bytes into the profile as its raw pprof. Returns 0 or HS_ENOMEM. */
int hs_profile_set_raw(struct hs_profile *p, const void *data, size_t len);
/* Copies a string into the profile's arena; NULL when out of memory. */
const char *hs_profile_strdup(struct hs_profile *p, const char *s, size_t len);
/* Sets a series label (replacing a label of the same name), keeping labels sorted; copies both
 * strings. Returns 0 or HS_ENOMEM. */
int hs_profile_set_label(struct hs_profile *p, const char *name, size_t name_len,
                         const char *value, size_t value_len);
/* The value of label `name`, or NULL. */
const char *hs_profile_label(const struct hs_profile *p, const char *name);

/* ---- the batch -------------------------------------------------------------------------- */

/* An empty batch for `tenant` (copied; NULL for none); NULL when out of memory. */
struct hs_profiles *hs_profiles_new(const char *tenant);
/* Appends p (taken, also on error). Returns 0 or HS_ENOMEM. */
int hs_profiles_add(struct hs_profiles *b, struct hs_profile *p);
struct hs_profiles *hs_profiles_ref(struct hs_profiles *b);
void hs_profiles_unref(struct hs_profiles *b);

/* How delivery takes and drops references on a profiles batch. */
extern const struct hs_batch_ops hs_profiles_ops;
/* Delivers `batch` (taken) to a consumer's targets, all or nothing (hs_consumer_deliver). */
static inline int hs_consumer_profiles(struct hs_consumer *c, struct hs_profiles *batch)
{
    return hs_consumer_deliver(c, &hs_profiles_ops, batch);
}

/* ---- pprof (pdata/pprof.c) -------------------------------------------------------------- */

struct hs_pprof_limits {
    uint64_t max_decompressed; /* bytes of pprof after gunzip */
    uint32_t max_samples;      /* Sample messages */
    uint32_t max_sample_labels;/* labels on one sample */
    uint32_t max_stack_depth;  /* frames of one sample, inlined frames included */
    uint32_t max_string_len;   /* bytes of one string: function, file, label (0 = none) */
};

/* Decodes p->raw (gzip sniffed by its magic, inflated within max_decompressed), checks it as
 * Pyroscope and pprof's CheckValid do (string_table[0] == "", every string index in range,
 * ids nonzero, unique and resolving, value count == sample_type count, valid UTF-8 strings of
 * at most max_string_len bytes, limits),
 * and fills p->summary. Then completes the labels: `__name__` from the sample types when absent
 * (wire.md §5.3 heuristic, through p->sample_type_config's display names, or Pyroscope's
 * defaults without one), `service_name` = "unknown_service" when still absent, p->service;
 * and p->from_ns/until_ns from time_nanos/duration_nanos when they are 0 (now when those are
 * 0 too). Returns 0; HS_EINVAL (not pprof, malformed: err names the field and index) or
 * HS_E2BIG (a limit: err names it). */
int hs_profile_summarize(struct hs_profile *p, const struct hs_pprof_limits *lim, char *err,
                         size_t errlen);

/* Converts folded/collapsed stacks text ("a;b;c 100\n", root first; wire.md §5.3) into an
 * uncompressed pprof with one sample type `type`/`unit` (e.g. "cpu"/"nanoseconds" where each
 * count is scaled by `period`, or "samples"/"count" with period 0 meaning unscaled), written to
 * out. A period comes with the period type "cpu"/"nanoseconds", for wall time too, as
 * Pyroscope's ingest adapter writes it. Returns 0, HS_EINVAL (err names the line), HS_E2BIG (more than max_samples lines). */
int hs_pprof_from_folded(const char *text, size_t len, const char *type, const char *unit,
                         int64_t period, const struct hs_pprof_limits *lim, struct hs_buf *out,
                         char *err, size_t errlen);

/* ---- Pyroscope `name` syntax (pdata/labelset.c) ----------------------------------------- */

/* Parses `app.name{k=v,...}` (wire.md §5.2) into p: p->app_name and the labels in braces
 * (keys checked, `__name__` reserved). Returns 0 or HS_EINVAL with err naming the problem,
 * HS_E2BIG beyond max_labels. */
int hs_labelset_parse(const char *s, size_t len, uint32_t max_labels, struct hs_profile *p,
                      char *err, size_t errlen);
/* Formats p back into the `name` query value for /ingest, so that Pyroscope derives the same
 * series labels: app name, then the labels (but `__`-prefixed ones) in braces. */
int hs_labelset_format(const struct hs_profile *p, struct hs_buf *out);

#endif
