/* correlator_int.h: what the correlator's files share (design.md §7), one section per file, the
 * lower ones first: the config and counters; the profile index (index.c, buckets.c); names and
 * escaping (naming.c, escape.c); first sight, latency and N+1 fragments; the spans and their
 * parking (cadence.c, park.c, traces.c); matching, explaining and annotating (match.c, explain.c,
 * annotate.c); the /ui ring and pages, which observe annotations and never call matching (ui.c,
 * ui_html.c, ui_http.c); and the processor (correlator.c, config.c). Not for other modules;
 * tests and the bench include it. Functions and data the files share carry the hs_corr_ prefix
 * (they are external symbols); the types, macros and inline helpers here are the component's
 * own vocabulary and keep a short corr_ / CORR_ prefix. */
#ifndef HS_CORRELATOR_INT_H
#define HS_CORRELATOR_INT_H

#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <uv.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/queue.h"
#include "pdata/otlp_wire.h"

struct correlator;
struct hs_arena;
struct hs_profile;
struct hs_traces;

/* Fixed bounds that are not worth a config key (each documented where it is used). */
#define CORR_MAX_TYPES 8          /* profile types kept per service */
#define CORR_TOP_STACKS 64        /* heaviest distinct stacks per bucket; the rest is "other" */
#define CORR_SPAN_STACKS 64       /* per span id per bucket, for hot path and flame graph only */
#define CORR_MAX_SPANS 4096       /* span ids per bucket */
#define CORR_MAX_STACK_DEPTH 128  /* deeper stacks keep their root-most frames */
#define CORR_LAT_KEYS 4096        /* (tenant, service, span name) latency sketches */
#define CORR_LAT_BUCKETS 64
#define CORR_FRAG_ENTRIES 4096    /* (trace, parent span) fragments for N+1 */
#define CORR_FRAG_GROUPS 3        /* name/statement groups per fragment */
#define CORR_FRAG_TEXT 96         /* bytes of a group's text kept */
#define CORR_FRAG_MEMO 64         /* statements remembered normalized (direct-mapped) */
#define CORR_TRUNK_SHARE 0.9      /* root-most frames passing this share to one callee: trunk */
#define CORR_HOT_PATH_MIN 0.1     /* hot path frames below this share are dropped */
#define CORR_LIB_SHARE 0.5        /* "(in lib)" when a library holds this share of a function */
#define CORR_OFFCPU_SHARE 0.5     /* CPU under this share of a span does not explain it */
#define CORR_GRACE_DIV 4          /* an upload is late after its period + period / this */
#define CORR_SETTLE_MS 2000       /* a service's first upload: its other types' requests follow */
#define CORR_BASE_WEIGHT 0.125    /* weight of each closed bucket in the function baseline */
#define CORR_UI_STACKS 256        /* heaviest matched stacks kept per /ui entry */
#define CORR_UI_DEPTH 64          /* frames kept per stack of a /ui entry (root-most) */
#define CORR_UI_FRAMES 4096       /* frames kept per /ui entry in all */
#define CORR_UI_NAME 160          /* bytes of a function name kept for /ui */
#define CORR_UI_TEXT 256          /* bytes of other /ui strings (span name, statement, link) */
#define CORR_UI_ENTRY_BYTES 65536 /* hard cap of one /ui entry's memory */
#define CORR_UI_LIST 64           /* top and grown functions kept per /ui entry */
#define CORR_HOUSEKEEP_MS 1000    /* how often index expiry and shedding run */

struct corr_config {
    struct {
        uint64_t threshold_ms;
        double factor;
        uint32_t min_samples;
    } slow;
    uint64_t bucket_ms, retention_ms, max_wait_ms, max_wait_cap_ms, slack_ms, max_window_ms;
    uint64_t first_profile_wait_ms;
    uint32_t top;
    struct hs_strlist library_frames;
    struct {
        char *trace_service, *profile_service, *trace_tenant;
    } labels;
    char *tenant;
    char *pyroscope_url;
    struct {
        bool enabled;
        uint32_t recent;
        char *grafana_url, *tempo_datasource;
    } ui;
    struct {
        uint32_t min_count;
    } n_plus_one;
    struct {
        double min_pp;
    } grown;
    struct {
        uint32_t max_services;
        uint64_t max_service_bytes, max_bytes;
        uint32_t max_parked_spans;
        uint64_t max_parked_bytes;
    } limits;
};

enum corr_match { CORR_MATCH_SPAN, CORR_MATCH_WINDOW, CORR_MATCH_NONE };

enum corr_reason {
    CORR_REASON_NONE, /* matched */
    CORR_REASON_NO_PROFILES_FOR_SERVICE,
    CORR_REASON_NO_PROFILE_IN_WINDOW,
    CORR_REASON_TIMEOUT,
    CORR_REASON_PARKED_LIMIT,
    CORR_REASON_SHUTDOWN,
    CORR_REASON_NO_SAMPLES_OF_SPAN, /* its service's profiles label spans and cover it: none
                                     * is its own, and no profile of waiting covers it */
};

/* What became of a slow span of a service without profiles (yet): hotspan_correlator_cold_
 * start_total{outcome}. The first three count spans that waited for the first profile. */
enum corr_cold {
    CORR_COLD_MATCHED,    /* a profile came and matched */
    CORR_COLD_UNMATCHED,  /* profiles came, none matched it */
    CORR_COLD_GAVE_UP,    /* no profile of its service came while it waited */
    CORR_COLD_NOT_WAITED, /* its service had shown for first_profile_wait without profiles */
    CORR_COLD_N
};

/* How a wait extended past max_wait for the service's next upload ended:
 * hotspan_correlator_extended_waits_total{outcome}. */
enum corr_ext {
    CORR_EXT_PROFILE, /* the upload came and released it */
    CORR_EXT_TIMEOUT, /* not by its expected time + grace */
    CORR_EXT_CAPPED,  /* max_wait_cap came before the expected upload */
    CORR_EXT_N
};

struct corr_stats {
    struct hs_counter *checked, *slow, *annotated[3], *released_timeout, *profiles_indexed;
    struct hs_counter *extended[CORR_EXT_N];
    struct hs_counter *ev_service, *ev_bucket, *ev_span, *ev_type, *ev_stale, *ev_latency,
        *ev_fragment, *ev_parked_limit, *ev_expired, *ev_seen, *ev_shed;
    struct hs_counter *cold[CORR_COLD_N];
    struct hs_counter *tenant_mismatch; /* labels.trace_tenant refused: not the token's tenant */
    struct hs_counter dummy; /* every pointer aims here until start() registers the metrics */
};

/* ---- profile index (index.c) ----------------------------------------------------------------- */

struct corr_stack {
    uint32_t *fids; /* root first */
    uint32_t depth;
    uint64_t hash;
    int64_t value;
};

struct corr_fval {
    uint32_t fid;
    int64_t self, total;
};

/* A span id's samples in a bucket: every function's exact totals (what its shares come
 * from), and its heaviest stacks (the hot path and the flame graph). */
struct corr_spanagg {
    uint64_t id; /* the 8 id bytes, as memcpy'd */
    int64_t value;
    int64_t other; /* samples of this span beyond its kept stacks */
    struct corr_fval *funcs;
    uint32_t nfuncs, capfuncs;
    struct corr_stack *stacks; /* up to CORR_SPAN_STACKS */
    uint32_t nstacks, capstacks;
};

struct corr_bucket {
    int64_t idx; /* from_ns / bucket; INT64_MIN when the slot is empty */
    int64_t min_from, max_until;
    int64_t total;
    struct corr_fval *funcs;
    uint32_t nfuncs, capfuncs;
    struct corr_stack *stacks; /* up to CORR_TOP_STACKS, heaviest kept */
    uint32_t nstacks, capstacks;
    int64_t other;
    struct corr_spanagg *spans;
    uint32_t nspans, capspans;
    uint32_t *span_slots; /* open addressing: span index + 1, 0 = free; 2 x capspans slots */
    size_t bytes;
};

/* What a profile type measures, in the order matching prefers them (corr_type.rank). */
enum corr_kind {
    CORR_KIND_CPU,
    CORR_KIND_WALL,
    CORR_KIND_GOROUTINES,
    CORR_KIND_MUTEX,
    CORR_KIND_BLOCK,
    CORR_KIND_ALLOC,
    CORR_KIND_OTHER
};

struct corr_type {
    char *id;                  /* "process_cpu:cpu:nanoseconds:cpu:nanoseconds" */
    bool cpu_ns;               /* sample type cpu in nanoseconds: cpu_share can be computed */
    int rank;                  /* enum corr_kind: which type matching tries first */
    struct corr_bucket **ring; /* [nring], a bucket allocated when first used */
    uint32_t nring;
    int64_t newest; /* newest bucket number indexed */
    int64_t max_until_ns; /* the latest end of a profile of this type */
    uint64_t last_ms;     /* when one last arrived */
    uint64_t period_ms;   /* its upload period, learned from the profiles; 0: not known */
    double *base;   /* [nbase] decayed share of each function's total */
    uint32_t nbase;
    uint32_t base_buckets; /* closed buckets folded into base */
};

struct corr_name {
    char *name; /* as in the profile: what attributes carry */
    char *file; /* Function.filename, "" when unknown */
    char *disp; /* display name: "findByEmail" for "./app.js:findByEmail:54" (may == name) */
    char *lib;  /* runtime, standard library, third party or pseudo-frame: the library's name
                 * ("crypto/sha256", "node_modules/pg"); NULL for the application's own code */
    uint32_t dlen;  /* strlen(disp) (beside the flags: the struct stays 40 bytes) */
    bool ambiguous; /* another function of the service has the same display name */
    bool same_name; /* ... and the same name: only the files differ */
};

struct corr_parked;

struct corr_svc {
    char *key;           /* tenant '\0' service '\0' */
    size_t keylen;       /* both parts and both NULs */
    const char *tenant, *service;
    uint64_t hash;
    struct corr_svc *hnext;
    struct hs_queue lru; /* in the index's, most recently used first */
    size_t bytes;
    uint64_t last_seen_ms;
    int64_t max_until_ns;
    struct corr_type types[CORR_MAX_TYPES];
    uint32_t ntypes;
    struct corr_name *names;
    uint32_t nnames, capnames;
    uint32_t *name_slots; /* open addressing: fid + 1 */
    uint32_t *disp_slots; /* the same by display name (name_mask too) */
    uint32_t name_mask;
    struct hs_queue parked; /* its parked spans (corr_parked.svc_link), newest first */
    uint32_t nparked;
    uint64_t settle_ms; /* its first upload came: its spans leave from then (0: not waiting) */
};

struct hs_frame_rules;

struct corr_index {
    const struct corr_config *conf;
    struct corr_stats *stats;
    const struct hs_frame_rules *rules; /* which frames are library frames */
    struct corr_svc **table;
    size_t mask, count;
    struct hs_queue lru; /* services (corr_svc.lru), most recently used first */
    size_t bytes;
    int64_t *scratch; /* per fid, zero between uses */
    uint32_t *mark;   /* per fid, for counting a function once per stack */
    uint32_t stamp;   /* the last mark written */
    /* per fid, zero between uses, for explaining a match (explain.c): each function's total,
     * its samples as a leaf, its depth; ex_fids lists the functions */
    int64_t *ex_tot, *ex_leaf;
    uint32_t *ex_depth, *ex_fids;
    size_t nscratch;
    /* called before a service is freed (its parked spans must leave) */
    void (*on_evict)(void *ud, struct corr_svc *svc);
    void *ud;
    uint64_t shed_reading_ms; /* the memory_limiter reading the index was last shed for */
};

int hs_corr_index_init(struct corr_index *ix, const struct corr_config *conf,
                       struct corr_stats *stats);
void hs_corr_index_free(struct corr_index *ix);
/* Reads p (borrowed) into the index of (tenant, p's service); returns the service or NULL when
 * the profile was not indexed (no summary, too old). */
struct corr_svc *hs_corr_index_add(struct corr_index *ix, const char *tenant,
                                   const struct hs_profile *p, uint64_t now_ms);
struct corr_svc *hs_corr_index_find(struct corr_index *ix, struct hs_str tenant,
                                    struct hs_str service);
/* Frees services not seen for `retention`. */
void hs_corr_index_expire(struct corr_index *ix, uint64_t now_ms);
/* The service of (tenant, service), made (without profiles) when absent: a place for the spans
 * of a service whose first profile is still to come. */
struct corr_svc *hs_corr_index_get(struct corr_index *ix, struct hs_str tenant,
                                   struct hs_str service, uint64_t now_ms);
/* Expires services, and sheds half the index (ev_shed) when a memory_limiter registered in m
 * has a reading above its soft limit that it was not shed for yet. Returns services shed. */
uint32_t hs_corr_index_housekeep(struct corr_index *ix, struct hs_metrics *m, uint64_t now_ms);
/* Ensures ix->scratch, ix->mark and the ex_ arrays hold n entries. Returns 0 or HS_ENOMEM. */
int hs_corr_index_scratch(struct corr_index *ix, size_t n);

/* A stamp no ix->mark entry holds yet: mark[fid] == it says "seen in this pass". */
static inline uint32_t corr_index_stamp(struct corr_index *ix)
{
    if (++ix->stamp == 0) { /* wrapped: old stamps could collide */
        memset(ix->mark, 0, ix->nscratch * sizeof(*ix->mark));
        ix->stamp = 1;
    }
    return ix->stamp;
}

/* A hash of n bytes, chained through h (a seed, or the hash of an earlier part): eight bytes a
 * step, the tail read as two overlapping words (as wyhash does), the length mixed in, and a final
 * mix so that the low bits tables mask depend on every byte. The correlator's one hash: the
 * traces path calls it per span, so it is word-wise rather than FNV's byte at a time. */
static inline uint64_t corr_hash_bytes(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    h ^= (uint64_t)n * 0x9e3779b97f4a7c15ULL;
    for (; n >= 8; b += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
    }
    if (n) {
        uint64_t w;
        if (n >= 4) {
            uint32_t lo, hi;
            memcpy(&lo, b, 4);
            memcpy(&hi, b + n - 4, 4);
            w = (uint64_t)hi << 32 | lo;
        } else {
            w = (uint64_t)b[0] << 16 | (uint64_t)b[n >> 1] << 8 | b[n - 1];
        }
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
    }
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 32);
}

/* n bytes as lower-case hex into out (2n + 1 bytes, NUL-terminated). */
static inline void corr_hex(char *out, const void *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* What an allocation really takes from the heap: the allocator's usable size plus its chunk
 * header (glibc rounds every request up to 16 bytes, at least 32, and puts 8 before it). The
 * index counts this, not the sizes it asked for: its many small allocations (a stack's frames,
 * a function's name) cost up to twice their size, and max_bytes is meant to bound memory. */
static inline size_t corr_heap_size(const void *p)
{
    return p ? malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

/* Memory the index took (delta > 0) or gave back, counted in the service and the index. */
static inline void corr_account(struct corr_index *ix, struct corr_svc *svc, ssize_t delta)
{
    svc->bytes = (size_t)((ssize_t)svc->bytes + delta);
    ix->bytes = (size_t)((ssize_t)ix->bytes + delta);
}

/* ---- profile types and their buckets (buckets.c) --------------------------------------------- */

/* The type of a profile column (its id, sample type and unit), made when new; NULL (counted)
 * when the service has CORR_MAX_TYPES already. */
struct corr_type *hs_corr_type_get(struct corr_index *ix, struct corr_svc *s, const char *id,
                                   const char *type, const char *unit);
/* Makes bucket number idx the type's newest when it is newer, folding the bucket that closes
 * into the baseline; false (counted) when idx is older than retention. */
bool hs_corr_type_advance(struct corr_index *ix, struct corr_svc *s, struct corr_type *t,
                          int64_t idx);
void hs_corr_type_free(struct corr_type *t);
/* The service's types in the order matching tries them (by rank); returns their count. */
uint32_t hs_corr_svc_types(struct corr_svc *svc, struct corr_type **out);
/* Adds column col of p to the type's bucket number idx (made, or reused past retention); fmap
 * maps p's functions to the service's. Returns the bucket. */
struct corr_bucket *hs_corr_bucket_add(struct corr_index *ix, struct corr_svc *s,
                                       struct corr_type *t, int64_t idx, const struct hs_profile *p,
                                       uint32_t col, const uint32_t *fmap);
/* Frees b; returns what it counted, itself included. */
size_t hs_corr_bucket_free(struct corr_bucket *b);
/* The samples of span id (its 8 bytes, as memcpy'd) in b, or NULL. */
struct corr_spanagg *hs_corr_bucket_span(const struct corr_bucket *b, uint64_t id);

/* ---- names (naming.c) ------------------------------------------------------------------------ */

/* The display name of a function name (writes into out, returns its length). */
size_t hs_corr_display_name(const char *name, char *out, size_t cap);
/* What a type measures, from its id and its sample type. */
enum corr_kind hs_corr_type_kind(const char *id, const char *type);
/* Does a type of this kind (corr_type.rank) record waiting: goroutines (mostly blocked ones),
 * mutex, block? A wall profile records where the time went, on CPU or off. */
bool hs_corr_kind_waits(int rank);
/* Is the function (by its display name) the span's own? Either name may be the qualified one:
 * spans "findByEmail" and "UserRepository.findByEmail" both name the function
 * "UserRepository.findByEmail", and a span "UserRepository.findByEmail" names the function
 * "findByEmail" too, as SDKs name spans Class.method where profilers of JavaScript or Python
 * give the bare method. */
bool hs_corr_name_matches(const struct corr_name *fn, struct hs_str span_name);
/* "timeout", "no_profile_in_window", ...: profile.match_reason's values ("" when matched). */
const char *hs_corr_reason_name(enum corr_reason r);

/* ---- escaping (escape.c) --------------------------------------------------------------------- */

/* Percent-encodes s (NUL-terminated) for a URL's query: all but unreserved characters. */
void hs_corr_url_escape(struct hs_buf *b, const char *s);
/* HTML-escapes n bytes of s into out (& < > " ' as entities). */
void hs_corr_html_escape(struct hs_buf *out, const char *s, size_t n);

/* ---- first seen (seen.c) --------------------------------------------------------------------- */

struct corr_seen_entry;

struct corr_seen {
    struct corr_seen_entry **table;
    size_t mask;
    uint32_t count, cap;
    struct hs_queue lru; /* services (corr_seen_entry.lru), most recently seen first */
    size_t bytes;
    struct hs_counter **evicted;
};

void hs_corr_seen_init(struct corr_seen *t, uint32_t cap, struct hs_counter **evicted);
void hs_corr_seen_free(struct corr_seen *t);
/* Records that (tenant, service) showed at now_ms; returns when it was first seen. */
uint64_t hs_corr_seen_touch(struct corr_seen *t, struct hs_str tenant, struct hs_str service,
                            uint64_t now_ms);
/* Forgets services not seen for idle_ms. */
void hs_corr_seen_expire(struct corr_seen *t, uint64_t now_ms, uint64_t idle_ms);

/* ---- latency baseline (latency.c) ------------------------------------------------------------ */

struct corr_lat;

struct corr_latency {
    struct corr_lat **table;
    size_t mask, count;
    struct hs_queue lru; /* keys (corr_lat.lru), most recently used first */
    struct corr_stats *stats;
};

void hs_corr_latency_init(struct corr_latency *l, struct corr_stats *stats);
void hs_corr_latency_free(struct corr_latency *l);
/* Returns the p50 (ns) of earlier spans of the key and their count in *n, then records dur. */
uint64_t hs_corr_latency_observe(struct corr_latency *l, struct hs_str tenant,
                                 struct hs_str service, struct hs_str name, uint64_t dur_ns,
                                 uint32_t *n);
size_t hs_corr_latency_bytes(const struct corr_latency *l);

/* ---- N+1 fragments (fragments.c) ------------------------------------------------------------- */

struct corr_frag_group {
    uint64_t hash;
    uint32_t count;
    bool stmt;
};

#define CORR_FRAG_KEY 32 /* trace id, parent span id, tenant hash */

/* 96 bytes, the groups' texts apart: every child span looks its parent's fragment up, and a
 * fragment of one or two cache lines is what a cold lookup pays for. */
struct corr_frag {
    uint8_t key[CORR_FRAG_KEY];
    uint64_t hash;
    uint32_t hnext;  /* index + 1 in the chain, 0 = end */
    uint32_t ngroups;
    struct corr_frag_group groups[CORR_FRAG_GROUPS];
};

struct corr_stmt_memo;

struct corr_fragments {
    struct corr_frag *entries; /* a ring: the oldest is overwritten first */
    char (*texts)[CORR_FRAG_GROUPS][CORR_FRAG_TEXT]; /* each entry's groups' texts */
    uint32_t n, cap, head;     /* head: the oldest entry once the ring is full */
    uint32_t *chains;          /* [CORR_FRAG_ENTRIES * 2]: index + 1 */
    uint32_t recent[4];        /* the entries used last, most recent first: index + 1 */
    struct corr_stmt_memo *memo; /* [CORR_FRAG_MEMO], by raw hash; made at the first statement */
    struct corr_stats *stats;
};

/* A parent's largest group of children: how many, whether by statement, and its text (the
 * fragments', good until the next hs_corr_fragments_add). count 0: none. */
struct corr_frag_best {
    uint32_t count;
    bool stmt;
    const char *text;
};

void hs_corr_fragments_init(struct corr_fragments *f, struct corr_stats *stats);
void hs_corr_fragments_free(struct corr_fragments *f);
/* The tenant as fragments key it (a hash): the traces path works it out once per resource. */
uint64_t hs_corr_fragments_tenant(struct hs_str tenant);
/* Counts a child span under (tenant, trace id, parent span id) by its name and its statement;
 * tenant: hs_corr_fragments_tenant's. */
void hs_corr_fragments_add(struct corr_fragments *f, uint64_t tenant, struct hs_str trace_id,
                           struct hs_str parent, struct hs_str name, struct hs_str statement);
/* Memory the fragments hold (entries and remembered statements). */
size_t hs_corr_fragments_bytes(const struct corr_fragments *f);
/* The largest group of children of (tenant, trace id, span id); count 0 when none. */
struct corr_frag_best hs_corr_fragments_best(struct corr_fragments *f, struct hs_str tenant,
                                             struct hs_str trace_id, struct hs_str span_id);
/* "SELECT * FROM t WHERE id = ?": numbers and quoted strings to ?, whitespace collapsed. */
size_t hs_corr_normalize_statement(struct hs_str in, char *out, size_t cap);

/* ---- slow spans and the parked ones (traces.c, park.c) --------------------------------------- */

/* What annotation needs of a slow span; views point into the batch holding it. */
struct corr_span {
    struct hs_str tenant, service, name, trace_id, span_id;
    uint64_t start_ns, end_ns;
    char slow_reason[48];
    /* SDKs label samples with this span's id: it carries pyroscope.profile.id = its id
     * (otel-profiling-go, otel-profiling-java), or it is a trace's root */
    bool labelled;
    /* its largest group of children when it parked: the fragments' ring holds a few seconds of
     * parents at high rates, less than a span may wait, so annotation takes the larger of this
     * and what the ring says then (children that come later still count) */
    struct {
        uint32_t count;
        bool stmt;
        char text[CORR_FRAG_TEXT];
    } frag;
};

struct corr_parked {
    struct hs_queue link;     /* in the correlator's parked, oldest first */
    struct hs_queue svc_link; /* in its service's parked */
    struct corr_svc *svc;
    struct hs_traces *group; /* a reference on the batch holding the span */
    size_t offset, bytes;
    uint64_t deadline_ms;
    uint64_t arrival_ms;
    int64_t need_until_ns; /* released once a profile of the service reaches this */
    bool cold;             /* waits for its service's first profile */
    bool extended;         /* waits past max_wait for its service's next upload */
    bool capped;           /* ... and max_wait_cap ends the wait before it is expected */
    struct corr_span span;
};

/* ---- upload cadence (cadence.c) -------------------------------------------------------------- */

/* Learns the type's upload period from a profile of [from_ns, until_ns] arriving at now_ms
 * (before t->last_ms is set to it). */
void hs_corr_cadence_learn(struct corr_type *t, int64_t from_ns, int64_t until_ns, uint64_t now_ms);
/* How far the service's profiles reach: the least max_until_ns of the types still expected
 * (an upload of several types is complete once the last of them arrived). */
int64_t hs_corr_cadence_covered(const struct corr_svc *svc, uint64_t now_ms,
                                const struct corr_config *conf);
/* Moves p's deadline to when the upload expected to cover it is due, plus the grace, when that
 * is later; at most max_wait_cap after its arrival (p->extended, p->capped say so). */
void hs_corr_cadence_extend(const struct corr_config *conf, struct corr_parked *p, uint64_t now);

/* ---- matched samples (match.c) --------------------------------------------------------------- */

/* A stack of matched samples, root first (for a subtree match, from the anchor down). */
struct corr_mstack {
    const uint32_t *fids;
    uint32_t depth;
    int64_t value;
};

/* The samples of one profile type that matched a span. */
struct corr_matched {
    struct corr_svc *svc;
    struct corr_type *type;
    struct corr_bucket *buckets[64]; /* the type's buckets in the window */
    uint32_t nbuckets;
    int64_t lo_ns, hi_ns;
    int64_t window_total; /* all samples of the window */
    uint32_t *wfids;      /* functions with samples in the window; totals in index scratch
                           * until hs_corr_match_close */
    uint32_t nwfids;
    struct corr_mstack *stacks; /* the matched samples' stacks (capped for an exact match) */
    uint32_t nstacks, capstacks;
    int64_t total;      /* the matched samples (kept stacks and folded ones) */
    int64_t span_value; /* exact: samples carrying the span id */
    int64_t *ftot;      /* exact: each function's total over all of them, by fid */
    enum corr_match kind;
};

/* Zeroes the scratch the window's totals took. */

/* Finds the samples of s's service matching s (exact, subtree or window); false (with *why)
 * when there are none. m is the caller's, zeroed; hs_corr_match_free frees it either way. */
bool hs_corr_match_find(struct correlator *c, const struct corr_span *s, struct corr_matched *m,
                        enum corr_reason *why);
/* CPU ns under the span id / the span's duration, from m or the service's CPU profiles that
 * label spans; -1 when not known. */
double hs_corr_match_cpu_share(struct correlator *c, const struct corr_span *s,
                               const struct corr_matched *m);
/* When s waited (share, or m, says CPU does not explain it): the samples of where, into o
 * (zeroed, freed by the caller), from the types other than CPU. False when it did not wait or
 * nothing says where. */
bool hs_corr_match_offcpu(struct correlator *c, const struct corr_span *s,
                          const struct corr_matched *m, double share, struct corr_matched *o);
/* Zeroes the scratch the window's totals took. */
void hs_corr_match_close(struct correlator *c, struct corr_matched *m);
void hs_corr_match_free(struct correlator *c, struct corr_matched *m);

/* ---- what matched samples say (explain.c) ---------------------------------------------------- */

struct corr_note;

struct corr_explain_keys {
    const char *top, *hot; /* the attribute names */
};

/* One of profile.top_functions: a function, its share of the matched samples, and the library
 * it spends them in ("(in lib)"), or NULL. */
struct corr_top {
    uint32_t fid;
    double share;
    const char *lib;
};

struct corr_explained {
    uint32_t *path; /* [CORR_MAX_STACK_DEPTH], the caller's: the whole hot path, root first */
    uint32_t npath;
    struct corr_top top[20];
    uint32_t ntop;
};

/* Writes the top functions and the hot path of m (its window still open) under keys. */
void hs_corr_explain(struct correlator *c, const struct corr_matched *m, struct hs_str span_name,
                     const struct corr_explain_keys *keys, struct hs_buf *attrs,
                     struct corr_explained *ex);
/* profile.grown_functions of m's window (still open); fills note->grown when note. */
void hs_corr_explain_grown(const struct correlator *c, const struct corr_matched *m,
                           struct hs_buf *attrs, struct corr_note *note);

/* ---- annotation (annotate.c) ----------------------------------------------------------------- */

/* What annotating one slow span found, in structured form: the correlator hands it to its
 * observers (the /ui ring) once the span is annotated. The views point into the span's batch,
 * the index and `own`: good until either changes, so observers copy what they keep. */
struct corr_note {
    const struct corr_span *span;
    enum corr_match kind;
    enum corr_reason reason; /* with kind NONE */
    const struct corr_svc *svc; /* NULL when the service has no profiles */
    const char *type;           /* profile type id, or NULL */
    const struct corr_mstack *stacks;
    uint32_t nstacks;
    int64_t total; /* the matched samples, kept stacks and folded ones */
    const uint32_t *path;
    uint32_t npath;
    struct corr_top top[CORR_UI_LIST];
    uint32_t ntop;
    struct { uint32_t fid; double share, base; } grown[CORR_UI_LIST];
    uint32_t ngrown;
    struct corr_frag_best nplus1; /* count 0 unless it made the pattern */
    const char *link;                     /* profile.link, or NULL */
    size_t link_len;
    double cpu_share; /* < 0 when not known */
    struct {          /* profile.offcpu.*: type NULL when not written */
        const char *type;
        enum corr_match kind;
        struct corr_top top[CORR_UI_LIST];
        uint32_t ntop;
        const uint32_t *path;
        uint32_t npath;
    } off;
    struct { /* what the views above point into when annotation wrote them: the note's own */
        uint32_t path[CORR_MAX_STACK_DEPTH], off_path[CORR_MAX_STACK_DEPTH];
        struct hs_buf link;
        struct corr_mstack *stacks; /* the matched stacks (stacks above) */
    } own;
};

/* An empty note, and its end (what it owns with it; NULL is fine). */
struct corr_note *hs_corr_note_new(void);
void hs_corr_note_free(struct corr_note *n);
/* Appends the annotation attributes of s to attrs: profile match (or `fallback` as the reason
 * when nothing matches), off CPU, N+1, link; fills note (when not NULL) with the same, for the
 * observers. Returns the match kind. */
enum corr_match hs_corr_annotate(struct correlator *c, const struct corr_span *s,
                                 enum corr_reason fallback, struct hs_buf *attrs,
                                 struct corr_note *note);

/* ---- the /ui page (ui.c: the ring; ui_html.c: the pages; ui_http.c: the handler) ------------- */

/* One recent slow span as /ui shows it: a copy, so it outlives the batch and the index. All of
 * it lives in its own arena, capped at CORR_UI_ENTRY_BYTES. Names are indices into names[]. */
struct corr_ui_fn {
    uint32_t name;
    double share, base; /* of the matched samples; base: the baseline share (grown only) */
    const char *lib;    /* top only: "(in lib)", or NULL */
};

struct corr_ui_stack {
    uint32_t first, depth; /* frames[first .. first + depth), root first */
    int64_t value;
};

struct corr_ui_entry {
    struct hs_arena *arena;
    size_t bytes;
    uint64_t start_ns, dur_ns;
    char trace_hex[33], span_hex[17];
    enum corr_match kind;
    enum corr_reason reason;
    char slow_reason[48];
    char *tenant, *service, *name, *type, *stmt, *link;
    uint32_t nplus1; /* alike children when they made the N+1 pattern, else 0 */
    double cpu_share;
    char **names;
    uint32_t nnames;
    uint32_t *frames;
    uint32_t nframes;
    struct corr_ui_stack *stacks;
    uint32_t nstacks;
    int64_t total;                 /* the matched samples (the flame graph's root) */
    uint32_t cut_stacks, cut_frames; /* left out by the caps */
    int64_t cut_value;             /* samples of the stacks left out */
    uint32_t *hot;
    uint32_t nhot;
    struct corr_ui_fn *top, *grown;
    uint32_t ntop, ngrown;
    char *off_type; /* profile.offcpu.type, or NULL */
    enum corr_match off_kind;
    struct corr_ui_fn *off_top;
    uint32_t off_ntop;
    uint32_t *off_hot;
    uint32_t off_nhot;
};

struct corr_ui {
    struct corr_ui_entry **ring; /* [cap]; the oldest is replaced first */
    uint32_t cap, n, head;       /* head: the next slot written */
    uint64_t seq;                /* entries recorded in all */
    size_t bytes;
    struct hs_counter *cut;      /* snapshot frames or stacks left out by the caps */
    struct hs_counter dummy;
};

void hs_corr_ui_init(struct corr_ui *ui, uint32_t cap);
void hs_corr_ui_free(struct corr_ui *ui);
/* Copies what the note says (bounded: CORR_UI_*) into the ring, evicting the oldest entry. */
void hs_corr_ui_record(struct corr_ui *ui, const struct corr_note *n);
/* The newest entry with that span id (hex, either case) of `tenant` (NULL: any), or NULL. */
const struct corr_ui_entry *hs_corr_ui_find(const struct corr_ui *ui, struct hs_str span_hex,
                                            const char *tenant);
/* i = 0 is the newest. */
const struct corr_ui_entry *hs_corr_ui_get(const struct corr_ui *ui, uint32_t i);
/* The /ui pages, into out. The list shows one tenant's spans: `tenant`'s, or (NULL) the newest
 * span's tenant's; with `choose` (an operator) it links every tenant kept, else it names no
 * other tenant. */
int hs_corr_ui_render_list(const struct corr_ui *ui, const struct corr_config *conf,
                           const char *tenant, bool choose, struct hs_buf *out);
/* One span by its hex id, of `tenant` (NULL: any). Returns 0, or HS_ENOENT when no such entry
 * (another tenant's span is not there either). */
int hs_corr_ui_render_span(const struct corr_ui *ui, const struct corr_config *conf,
                           struct hs_str span_hex, const char *tenant, struct hs_buf *out);
void hs_corr_ui_render_not_found(struct hs_buf *out);
/* A page saying `title`: `text` (both plain text, escaped here). */
void hs_corr_ui_render_message(struct hs_buf *out, const char *title, const char *text);

struct hs_http_request;
/* The admin handler for /ui and /ui/span/<id>; ud is the correlator, tenant the caller's
 * (hs_admin_handler). */
void hs_corr_ui_handle(void *ud, struct hs_http_request *req, const char *tenant);

/* ---- the processor (correlator.c) ------------------------------------------------------------ */

typedef uint64_t (*hs_corr_clock_fn)(void *ud);

struct correlator {
    struct hs_component base;
    struct corr_config conf;
    struct corr_stats stats;
    struct corr_index index;
    struct corr_latency latency;
    struct corr_fragments frags;
    struct corr_seen seen;
    struct hs_frame_rules *rules;
    bool service_is_name; /* labels.trace_service is service.name: the scanner's view has it */
    struct corr_ui ui;
    struct hs_admin *admin; /* where /ui is routed, until shutdown */
    hs_corr_clock_fn clock;
    void *clock_ud;
    uv_timer_t timer;
    uv_timer_t housekeep; /* index expiry and shedding, whether or not spans are parked */
    bool started, closing, timer_open, housekeep_open;
    hs_done_cb done;
    struct hs_queue parked; /* every parked span (corr_parked.link), oldest first */
    uint32_t nparked;
    uint64_t due_ms; /* no parked span's deadline or service's settling is before this */
    uint64_t parked_bytes;
    struct hs_traces **outq; /* released batches downstream refused, oldest first */
    uint32_t noutq, capoutq;
    uint64_t outq_spans;
    struct hs_ratelimit log_rl;
    struct hs_ratelimit tenant_rl; /* tenant mismatch logs, apart from the bound's */
    /* delays from arrival to release (ms), for the bench; NULL unless set */
    uint64_t *delays;
    size_t ndelays, capdelays;
};

/* The correlator's clock (milliseconds): uv's monotonic one, or the tests'. */
static inline uint64_t corr_now_ms(const struct correlator *c)
{
    return c->clock(c->clock_ud);
}

/* ---- settings (config.c) --------------------------------------------------------------------- */

extern const struct hs_config_field hs_corr_fields[];
/* Decodes cfg into conf and checks what spans keys; builds the library frame rules into
 * *rules. HS_EINVAL with every problem in err (conf then holds nothing to free). */
int hs_corr_config_decode(const struct hs_config_node *cfg, const char *path,
                          struct corr_config *conf, struct hs_frame_rules **rules,
                          struct hs_error *err);
void hs_corr_config_free(struct corr_config *conf);

/* ---- parked spans and their release (park.c) ------------------------------------------------- */

/* Parks p (the caller's allocation, now the list's), releasing the oldest first when the bounds
 * would be passed, and arms the timer. */
void hs_corr_park(struct correlator *c, struct corr_parked *p);
/* Releases the service's parked spans whose window the profiles now cover, in every type the
 * service uploads (or all of them); the others wait for the upload expected to cover them. */
void hs_corr_release_service(struct correlator *c, struct corr_svc *svc, bool all);
/* What the timer does: releases spans past their deadline and those of services whose first
 * upload settled, retries refused output, expires services and first sightings. */
void hs_corr_park_tick(struct correlator *c);
/* Shutdown's part: releases every parked span, then closes the timer once output is taken. */
void hs_corr_park_close(struct correlator *c);
/* Frees what is parked or waiting for downstream without delivering it (destroy). */
void hs_corr_park_free(struct correlator *c);
/* Annotates s (hs_corr_annotate) and hands what annotation found to the observers: the /ui
 * ring records it. The one place annotation and the UI meet; neither calls the other. */
enum corr_match hs_corr_annotate_observed(struct correlator *c, const struct corr_span *s,
                                          enum corr_reason fallback, struct hs_buf *attrs);

/* ---- the traces path (traces.c) -------------------------------------------------------------- */

/* The processor's consume_traces: takes batch. */
int hs_corr_consume_traces(struct hs_component *base, struct hs_traces *batch);

/* For tests and the bench: time comes from fn (milliseconds, any epoch) instead of uv's. */
void hs_correlator_set_clock(struct hs_component *c, hs_corr_clock_fn fn, void *ud);
/* What the timer does: releases spans past max_wait, retries refused output, expires services. */
void hs_correlator_tick(struct hs_component *c);
/* What the housekeeping timer does every CORR_HOUSEKEEP_MS: expires services, and sheds half
 * the index when a memory_limiter has a new reading above its soft limit. */
void hs_correlator_housekeep(struct hs_component *c);
/* Spans parked now. */
uint32_t hs_correlator_parked(struct hs_component *c);

#endif
