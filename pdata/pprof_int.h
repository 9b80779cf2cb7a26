/* pprof_int.h: what the pprof files share: the decode context (pprof.c checks it, then
 * pprof_summary.c walks it) and the small helpers both need. Not for other modules. pprof.c
 * calls pprof_summary.c, never the other way. */
#ifndef HS_PPROF_INT_H
#define HS_PPROF_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/common.h"
#include "perftools/profiles/profile.pb-c.h"
#include "pdata/profiles.h"

struct hs_arena;

#define PP_NONE UINT32_MAX

/* pprof ids (location, function, mapping) to table indexes. SDKs number them 1..N, so a plain
 * array indexed by id covers the usual case; sparse ids (some converters hash addresses into
 * ids) fall back to open addressing. */
struct pp_idmap {
    uint32_t *direct; /* [maxid + 1], or NULL */
    uint64_t maxid;
    uint64_t *keys; /* open addressing: 0 = empty slot (ids are nonzero by then) */
    uint32_t *vals;
    size_t mask;
};

static inline uint32_t pp_idmap_get(const struct pp_idmap *m, uint64_t id)
{
    if (m->direct)
        return id <= m->maxid ? m->direct[id] : PP_NONE;
    if (!m->keys || id == 0)
        return PP_NONE;
    for (size_t i = hs_mix64(id) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == id)
            return m->vals[i];
        if (m->keys[i] == 0)
            return PP_NONE;
    }
}

/* One summarize call: the decoded profile (in `tmp`, freed at the end) and its checked maps. */
struct pp_ctx {
    const Perftools__Profiles__Profile *pb;
    struct hs_arena *tmp; /* protobuf-c's tree and every scratch table */
    const struct hs_pprof_limits *lim;
    char *err;
    size_t errlen;
    struct pp_idmap locs;  /* Location.id -> index into pb->location */
    struct pp_idmap funcs; /* Function.id -> index into pb->function */
    uint32_t max_depth;    /* deepest sample, inlined frames included (sizes scratch) */
};

/* Wrapping addition: sample values are client data, and signed overflow would be UB. */
static inline int64_t pp_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* True when s[0..len) is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF). */
bool hs_pprof_utf8_valid(const char *s, size_t len);

/* Writes the message into err (when there is room) and returns code. Inline, so that the
 * pprof files below pprof.c (pprof_summary.c) need not call back up into it. */
static inline __attribute__((format(printf, 4, 5))) int
hs_pprof_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* pprof_summary.c: fills p->summary from a checked profile (strings copied into p->arena).
 * Returns 0, HS_ENOMEM, or HS_E2BIG past the temporary arena's limit. */
int hs_pprof_build_summary(struct pp_ctx *c, struct hs_profile *p);

/* pprof_summary.c: `__name__`, `service_name`, type_ids and the time window, after the summary. */
int hs_pprof_complete_labels(struct pp_ctx *c, struct hs_profile *p);

/* pprof.c: hs_profile_summarize on a profile already decoded (or built, as the OTLP converter
 * does): the same checks, summary and labels. Scratch goes into tmp, which the caller frees. */
int hs_pprof_summarize_pb(const Perftools__Profiles__Profile *pb, struct hs_arena *tmp,
                          struct hs_profile *p, char *err, size_t errlen);

#endif
