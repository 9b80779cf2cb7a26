/* pprof_summary.c: from a checked pprof to the summary the correlator indexes (functions by
 * (name, file) with self and total, distinct root-first stacks per span, span totals), then the
 * series labels and time window Pyroscope would derive (wire.md §5.3, §6, §7.1). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/arena.h"
#include "core/common.h"
#include "core/errors.h"
#include "pdata/pprof_int.h"

typedef Perftools__Profiles__Profile pb_profile;

/* Scratch of one build, all in the temporary arena. */
struct sb {
    struct pp_ctx *c;
    const pb_profile *pb;
    struct hs_profile *p;
    uint32_t ntypes;

    /* functions, deduplicated by content: pprof may repeat a (name, file) under two ids */
    const char **fname, **ffile; /* [bound] */
    uint32_t nfuncs;
    uint32_t *fslot; /* hash slots: summary function index or PP_NONE */
    size_t fmask;
    uint32_t *pbfunc; /* pprof function index -> summary index, PP_NONE until used */

    /* each location's frames, outermost caller first, at a fixed offset */
    uint32_t *loc_off, *loc_n;
    uint8_t *loc_done;
    uint32_t *frames;

    /* distinct (stack, span) pairs */
    struct hs_profile_stack *stacks;
    uint64_t *stack_hash;
    int64_t *stack_vals; /* [n_sample * ntypes] */
    uint32_t nstacks;
    uint32_t *sslot;
    size_t smask;

    struct hs_profile_span *spans;
    int64_t *span_vals;
    uint32_t nspans;
    uint32_t *pslot;
    size_t pmask;
};

static int full(struct sb *b)
{
    return hs_pprof_errf(b->c->err, b->c->errlen, HS_E2BIG,
                         "decoded profile exceeds the memory limit");
}

static void *tmp_alloc(struct sb *b, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return hs_arena_alloc(b->c->tmp, n * size > 0 ? n * size : 1);
}

static size_t table_cap(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

static uint32_t *slots_new(struct sb *b, size_t n, size_t *mask)
{
    size_t cap = table_cap(n);
    uint32_t *s = tmp_alloc(b, cap, sizeof(uint32_t));
    if (s)
        memset(s, 0xff, cap * sizeof(uint32_t));
    *mask = cap - 1;
    return s;
}

static uint64_t str_hash(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* ---- functions and locations ---------------------------------------------------------- */

static uint32_t func_intern(struct sb *b, const char *name, const char *file)
{
    size_t i = hs_mix64(str_hash(file, str_hash(name, 0xcbf29ce484222325ULL) * 31)) & b->fmask;
    for (;; i = (i + 1) & b->fmask) {
        uint32_t f = b->fslot[i];
        if (f == PP_NONE)
            break;
        if (strcmp(b->fname[f], name) == 0 && strcmp(b->ffile[f], file) == 0)
            return f;
    }
    uint32_t f = b->nfuncs++;
    b->fname[f] = name;
    b->ffile[f] = file;
    b->fslot[i] = f;
    return f;
}

/* Frames of location l, written outermost first (pprof lists inlined lines innermost first). */
static int loc_resolve(struct sb *b, uint32_t l)
{
    const Perftools__Profiles__Location *loc = b->pb->location[l];
    uint32_t *out = b->frames + b->loc_off[l];
    if (loc->n_line == 0) {
        /* unsymbolized: the address is all there is, as pprof shows it */
        char *name = tmp_alloc(b, 24, 1);
        if (!name)
            return full(b);
        snprintf(name, 24, "0x%llx", (unsigned long long)loc->address);
        out[0] = func_intern(b, name, "");
    } else {
        for (size_t j = 0; j < loc->n_line; j++) {
            uint32_t pf = pp_idmap_get(&b->c->funcs, loc->line[j]->function_id);
            if (b->pbfunc[pf] == PP_NONE) {
                const Perftools__Profiles__Function *fn = b->pb->function[pf];
                b->pbfunc[pf] = func_intern(b, b->pb->string_table[fn->name],
                                            b->pb->string_table[fn->filename]);
            }
            out[loc->n_line - 1 - j] = b->pbfunc[pf];
        }
    }
    b->loc_done[l] = 1;
    return 0;
}

static int sb_init(struct sb *b)
{
    const pb_profile *pb = b->pb;
    size_t nl = pb->n_location, ns = pb->n_sample;
    size_t bound = pb->n_function + nl; /* functions, plus one per line-less location */
    b->fname = tmp_alloc(b, bound, sizeof(char *));
    b->ffile = tmp_alloc(b, bound, sizeof(char *));
    b->fslot = slots_new(b, bound, &b->fmask);
    b->pbfunc = tmp_alloc(b, pb->n_function, sizeof(uint32_t));
    b->loc_off = tmp_alloc(b, nl, sizeof(uint32_t));
    b->loc_n = tmp_alloc(b, nl, sizeof(uint32_t));
    b->loc_done = tmp_alloc(b, nl, 1);
    if (!b->fname || !b->ffile || !b->fslot || !b->pbfunc || !b->loc_off || !b->loc_n ||
        !b->loc_done)
        return full(b);
    memset(b->pbfunc, 0xff, pb->n_function * sizeof(uint32_t));
    memset(b->loc_done, 0, nl);
    size_t off = 0;
    for (size_t l = 0; l < nl; l++) {
        b->loc_off[l] = (uint32_t)off;
        b->loc_n[l] = pb->location[l]->n_line ? (uint32_t)pb->location[l]->n_line : 1;
        off += b->loc_n[l];
        if (off > UINT32_MAX / 2)
            return full(b);
    }
    b->frames = tmp_alloc(b, off, sizeof(uint32_t));
    b->stacks = tmp_alloc(b, ns, sizeof(*b->stacks));
    b->stack_hash = tmp_alloc(b, ns, sizeof(uint64_t));
    b->stack_vals = tmp_alloc(b, ns * b->ntypes, sizeof(int64_t));
    b->sslot = slots_new(b, ns, &b->smask);
    b->spans = tmp_alloc(b, ns, sizeof(*b->spans));
    b->span_vals = tmp_alloc(b, ns * b->ntypes, sizeof(int64_t));
    b->pslot = slots_new(b, ns, &b->pmask);
    if (!b->frames || !b->stacks || !b->stack_hash || !b->stack_vals || !b->sslot || !b->spans ||
        !b->span_vals || !b->pslot)
        return full(b);
    return 0;
}

/* Resolves every location a sample uses, so the function set (and its arrays) is final before
 * the values are summed. Unused functions and locations never reach the summary. */
static int resolve_used(struct sb *b)
{
    for (size_t i = 0; i < b->pb->n_sample; i++) {
        const Perftools__Profiles__Sample *s = b->pb->sample[i];
        for (size_t j = 0; j < s->n_location_id; j++) {
            uint32_t l = pp_idmap_get(&b->c->locs, s->location_id[j]);
            int rc;
            if (!b->loc_done[l] && (rc = loc_resolve(b, l)))
                return rc;
        }
    }
    return 0;
}

/* ---- samples -------------------------------------------------------------------------- */

/* Exactly 16 hex digits, either case (Pyroscope's decodeSpanID); anything else is no span. */
static bool span_decode(const char *s, uint8_t id[8])
{
    for (int i = 0; i < 8; i++) {
        int hi = hs_hexval((unsigned char)s[2 * i]);
        if (hi < 0)
            return false;
        int lo = hs_hexval((unsigned char)s[2 * i + 1]);
        if (lo < 0)
            return false;
        id[i] = (uint8_t)(hi << 4 | lo);
    }
    return s[16] == '\0';
}

/* `span_id`, else the legacy `profile_id` (wire.md §7.1); false when neither is usable. */
static bool sample_span(const pb_profile *pb, const Perftools__Profiles__Sample *s, uint8_t id[8])
{
    bool legacy = false;
    uint8_t alt[8];
    for (size_t j = 0; j < s->n_label; j++) {
        const char *k = pb->string_table[s->label[j]->key];
        const char *v = pb->string_table[s->label[j]->str];
        if (strcmp(k, "span_id") == 0) {
            if (span_decode(v, id))
                return true;
        } else if (!legacy && strcmp(k, "profile_id") == 0) {
            legacy = span_decode(v, alt);
        }
    }
    if (legacy)
        memcpy(id, alt, 8);
    return legacy;
}

static uint32_t span_find(struct sb *b, const uint8_t id[8])
{
    uint64_t key;
    memcpy(&key, id, 8);
    size_t i = hs_mix64(key) & b->pmask;
    for (;; i = (i + 1) & b->pmask) {
        uint32_t s = b->pslot[i];
        if (s == PP_NONE)
            break;
        if (memcmp(b->spans[s].id, id, 8) == 0)
            return s;
    }
    uint32_t s = b->nspans++;
    memcpy(b->spans[s].id, id, 8);
    b->spans[s].values = b->span_vals + (size_t)s * b->ntypes;
    memset(b->spans[s].values, 0, b->ntypes * sizeof(int64_t));
    b->pslot[i] = s;
    return s;
}

/* The stack's index, adding it (its frames copied into the profile's arena) when new. */
static int stack_find(struct sb *b, const uint32_t *stk, uint32_t depth, uint32_t span,
                      uint32_t *out)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ span;
    for (uint32_t d = 0; d < depth; d++)
        h = (h ^ stk[d]) * 0x100000001b3ULL;
    h = hs_mix64(h ^ depth);
    size_t i = h & b->smask;
    for (;; i = (i + 1) & b->smask) {
        uint32_t s = b->sslot[i];
        if (s == PP_NONE)
            break;
        const struct hs_profile_stack *st = &b->stacks[s];
        if (b->stack_hash[s] == h && st->depth == depth && st->span == span &&
            memcmp(st->funcs, stk, depth * sizeof(uint32_t)) == 0) {
            *out = s;
            return 0;
        }
    }
    uint32_t s = b->nstacks;
    uint32_t *funcs = hs_arena_alloc(b->p->arena, (depth ? depth : 1) * sizeof(uint32_t));
    if (!funcs)
        return HS_ENOMEM;
    memcpy(funcs, stk, depth * sizeof(uint32_t));
    b->stacks[s] = (struct hs_profile_stack){.funcs = funcs,
                                             .depth = depth,
                                             .span = span,
                                             .values = b->stack_vals + (size_t)s * b->ntypes};
    memset(b->stacks[s].values, 0, b->ntypes * sizeof(int64_t));
    b->stack_hash[s] = h;
    b->sslot[i] = s;
    b->nstacks++;
    *out = s;
    return 0;
}

static void add_values(int64_t *dst, const int64_t *v, uint32_t n)
{
    for (uint32_t t = 0; t < n; t++)
        dst[t] = pp_add(dst[t], v[t]);
}

static int sum_samples(struct sb *b, struct hs_profile_summary *sum)
{
    const pb_profile *pb = b->pb;
    uint32_t nt = b->ntypes;
    uint32_t *stk = tmp_alloc(b, b->c->max_depth ? b->c->max_depth : 1, sizeof(uint32_t));
    uint32_t *seen = tmp_alloc(b, b->nfuncs ? b->nfuncs : 1, sizeof(uint32_t));
    if (!stk || !seen)
        return full(b);
    memset(seen, 0, (b->nfuncs ? b->nfuncs : 1) * sizeof(uint32_t));
    for (size_t i = 0; i < pb->n_sample; i++) {
        const Perftools__Profiles__Sample *s = pb->sample[i];
        const int64_t *v = s->value;
        uint32_t depth = 0;
        for (size_t j = s->n_location_id; j-- > 0;) { /* root (last) first */
            uint32_t l = pp_idmap_get(&b->c->locs, s->location_id[j]);
            memcpy(stk + depth, b->frames + b->loc_off[l], b->loc_n[l] * sizeof(uint32_t));
            depth += b->loc_n[l];
        }
        add_values(sum->totals, v, nt);
        if (depth > 0)
            add_values(sum->funcs[stk[depth - 1]].self, v, nt);
        uint32_t stamp = (uint32_t)i + 1;
        for (uint32_t d = 0; d < depth; d++) {
            uint32_t f = stk[d];
            if (seen[f] != stamp) { /* recursion: a function counts once per sample */
                seen[f] = stamp;
                add_values(sum->funcs[f].total, v, nt);
            }
        }
        uint8_t id[8];
        uint32_t span = HS_PROFILE_NO_SPAN;
        if (s->n_label && sample_span(pb, s, id)) {
            span = span_find(b, id);
            add_values(b->spans[span].values, v, nt);
        }
        uint32_t st;
        if (stack_find(b, stk, depth, span, &st))
            return HS_ENOMEM;
        add_values(b->stacks[st].values, v, nt);
    }
    return 0;
}

/* ---- the summary ---------------------------------------------------------------------- */

static const char *dup(struct hs_profile *p, const char *s)
{
    return hs_arena_strndup(p->arena, s, strlen(s));
}

static uint32_t main_type(const pb_profile *pb)
{
    uint32_t n = (uint32_t)pb->n_sample_type;
    const char *const *st = (const char *const *)pb->string_table;
    for (uint32_t t = 0; t < n; t++)
        if (strcmp(st[pb->sample_type[t]->type], "cpu") == 0)
            return t;
    for (uint32_t t = 0; t < n; t++)
        if (strcmp(st[pb->sample_type[t]->type], "wall") == 0)
            return t;
    if (pb->default_sample_type > 0)
        for (uint32_t t = 0; t < n; t++)
            if (strcmp(st[pb->sample_type[t]->type], st[pb->default_sample_type]) == 0)
                return t;
    return n ? n - 1 : 0;
}

/* Copies the function table and the stacks and spans (out of scratch) into the profile. */
static int finish(struct sb *b, struct hs_profile_summary *sum)
{
    struct hs_arena *a = b->p->arena;
    uint32_t nt = b->ntypes;
    for (uint32_t f = 0; f < b->nfuncs; f++) {
        sum->funcs[f].name = dup(b->p, b->fname[f]);
        sum->funcs[f].file = dup(b->p, b->ffile[f]);
        if (!sum->funcs[f].name || !sum->funcs[f].file)
            return HS_ENOMEM;
    }
    sum->nstacks = b->nstacks;
    sum->nspans = b->nspans;
    sum->stacks = hs_arena_alloc(a, (b->nstacks ? b->nstacks : 1) * sizeof(*sum->stacks));
    sum->spans = hs_arena_alloc(a, (b->nspans ? b->nspans : 1) * sizeof(*sum->spans));
    int64_t *sv = hs_arena_alloc(a, ((size_t)b->nstacks + b->nspans) * nt * sizeof(int64_t) + 1);
    if (!sum->stacks || !sum->spans || !sv)
        return HS_ENOMEM;
    for (uint32_t s = 0; s < b->nstacks; s++) {
        sum->stacks[s] = b->stacks[s];
        sum->stacks[s].values = sv;
        memcpy(sv, b->stacks[s].values, nt * sizeof(int64_t));
        sv += nt;
    }
    for (uint32_t s = 0; s < b->nspans; s++) {
        sum->spans[s] = b->spans[s];
        sum->spans[s].values = sv;
        memcpy(sv, b->spans[s].values, nt * sizeof(int64_t));
        sv += nt;
    }
    return 0;
}

static int types_copy(struct sb *b, struct hs_profile_summary *sum)
{
    const pb_profile *pb = b->pb;
    struct hs_arena *a = b->p->arena;
    uint32_t nt = b->ntypes;
    sum->types = hs_arena_alloc(a, (nt ? nt : 1) * sizeof(char *));
    sum->units = hs_arena_alloc(a, (nt ? nt : 1) * sizeof(char *));
    sum->totals = hs_arena_alloc(a, (nt ? nt : 1) * sizeof(int64_t));
    if (!sum->types || !sum->units || !sum->totals)
        return HS_ENOMEM;
    memset(sum->totals, 0, (nt ? nt : 1) * sizeof(int64_t));
    for (uint32_t t = 0; t < nt; t++) {
        sum->types[t] = dup(b->p, pb->string_table[pb->sample_type[t]->type]);
        sum->units[t] = dup(b->p, pb->string_table[pb->sample_type[t]->unit]);
        if (!sum->types[t] || !sum->units[t])
            return HS_ENOMEM;
    }
    const char *pt = pb->period_type ? pb->string_table[pb->period_type->type] : "";
    const char *pu = pb->period_type ? pb->string_table[pb->period_type->unit] : "";
    if (!(sum->period_type = dup(b->p, pt)) || !(sum->period_unit = dup(b->p, pu)))
        return HS_ENOMEM;
    return 0;
}

/* Per-function arrays are nfuncs x ntypes: both come from the input, so their product is
 * bounded like the scratch, or one sample with many values and many lines could ask for a
 * quadratic amount of memory. */
static int funcs_alloc(struct sb *b, struct hs_profile_summary *sum, size_t budget)
{
    uint32_t nt = b->ntypes;
    size_t cells = (size_t)b->nfuncs * nt * 2;
    if (b->nfuncs && cells / b->nfuncs / 2 != nt) /* overflow */
        return full(b);
    if (cells * sizeof(int64_t) > budget)
        return hs_pprof_errf(b->c->err, b->c->errlen, HS_E2BIG,
                             "summary too large: %u functions x %u sample types", b->nfuncs, nt);
    sum->nfuncs = b->nfuncs;
    sum->funcs = hs_arena_alloc(b->p->arena, (b->nfuncs ? b->nfuncs : 1) * sizeof(*sum->funcs));
    int64_t *v = hs_arena_alloc(b->p->arena, cells * sizeof(int64_t) + 1);
    if (!sum->funcs || !v)
        return HS_ENOMEM;
    memset(v, 0, cells * sizeof(int64_t));
    for (uint32_t f = 0; f < b->nfuncs; f++) {
        sum->funcs[f].self = v;
        sum->funcs[f].total = v + nt;
        v += 2 * (size_t)nt;
    }
    return 0;
}

int hs_pprof_build_summary(struct pp_ctx *c, struct hs_profile *p)
{
    const pb_profile *pb = c->pb;
    struct sb b = {.c = c, .pb = pb, .p = p, .ntypes = (uint32_t)pb->n_sample_type};
    struct hs_profile_summary sum = {0};
    int rc;

    if (pb->n_sample_type > UINT16_MAX || pb->n_sample > UINT32_MAX / 2 ||
        pb->n_location > UINT32_MAX / 2 || pb->n_function > UINT32_MAX / 2)
        return hs_pprof_errf(c->err, c->errlen, HS_E2BIG, "profile tables too large");
    /* the function budget: what the decode arena may hold, i.e. proportional to the input */
    if ((rc = sb_init(&b)) || (rc = resolve_used(&b)) || (rc = types_copy(&b, &sum)) ||
        (rc = funcs_alloc(&b, &sum, hs_arena_used(c->tmp) * 4 + (16u << 20))) ||
        (rc = sum_samples(&b, &sum)) || (rc = finish(&b, &sum))) {
        if (rc == HS_ENOMEM)
            hs_pprof_errf(c->err, c->errlen, rc, "out of memory");
        return rc;
    }
    sum.ntypes = b.ntypes;
    sum.period = pb->period;
    sum.main_type = main_type(pb);
    sum.time_nanos = pb->time_nanos;
    sum.duration_nanos = pb->duration_nanos;
    sum.samples = (uint32_t)pb->n_sample;
    p->summary = sum;
    return 0;
}

/* ---- labels and time ------------------------------------------------------------------ */

/* The display names Pyroscope gives sample types when an /ingest upload has no
 * sample_type_config (pkg/og/storage/tree/pprof.go DefaultSampleTypeMapping; the other
 * defaults there set units only). A Go block profile sent so is named "mutex" there too. */
static const char *default_display(const char *type)
{
    static const char *const map[][2] = {{"samples", "cpu"},
                                         {"goroutine", "goroutines"},
                                         {"contentions", "mutex_count"},
                                         {"delay", "mutex_duration"}};
    for (size_t i = 0; i < HS_ARRAY_SIZE(map); i++)
        if (strcmp(type, map[i][0]) == 0)
            return map[i][1];
    return type;
}

/* A sample type as Pyroscope's name heuristic reads it: its non-empty "display-name" in the
 * upload's sample_type_config when there is one (pyroscope-go names the columns of its mutex
 * and block profiles, "contentions" and "delay", mutex_count/block_count and mutex_duration/
 * block_duration there), else the defaults above. */
static const char *display_name(const json_t *stc, const char *type)
{
    if (!stc)
        return default_display(type);
    const json_t *dn = json_object_get(json_object_get(stc, type), "display-name");
    const char *v = json_is_string(dn) ? json_string_value(dn) : NULL;
    return v && *v ? v : type;
}

/* Pyroscope's __name__ for a pprof with none (pkg/og/convert/pprof/profile.go metricName): a
 * type named "wall" wins; otherwise the first type whose display name matches a pattern, in
 * sample type order; otherwise the last display name, as Pyroscope returns it. The result
 * points into s or stc. */
static const char *name_heuristic(const struct hs_profile_summary *s, const json_t *stc)
{
    for (uint32_t t = 0; t < s->ntypes; t++)
        if (strcmp(s->types[t], "wall") == 0)
            return "wall";
    const char *st = "unknown"; /* no sample types: nothing for Pyroscope to store either */
    for (uint32_t t = 0; t < s->ntypes; t++) {
        st = display_name(stc, s->types[t]);
        if (strstr(st, "cpu"))
            return "process_cpu";
        if (strstr(st, "alloc_") || strstr(st, "inuse_") || strcmp(st, "space") == 0 ||
            strcmp(st, "objects") == 0)
            return "memory";
        if (strstr(st, "mutex_"))
            return "mutex";
        if (strstr(st, "block_"))
            return "block";
        if (strstr(st, "goroutines"))
            return "goroutines";
    }
    return st;
}

/* The __name__ Pyroscope stores one sample type under, after its default relabel rules
 * (pkg/validation/relabeling.go): "godeltaprof_X" is X, and a wall profile's "cpu" column
 * (@pyroscope/nodejs with collectCpuTime) is process_cpu. */
static const char *series_name(const char *name, const char *type)
{
    if (strncmp(name, "godeltaprof_", 12) == 0 && name[12])
        name += 12;
    if (strcmp(name, "wall") == 0 && strcmp(type, "cpu") == 0)
        return "process_cpu";
    return name;
}

static int set_label(struct hs_profile *p, const char *name, const char *value)
{
    return hs_profile_set_label(p, name, strlen(name), value, strlen(value));
}

int hs_pprof_complete_labels(struct pp_ctx *c, struct hs_profile *p)
{
    struct hs_profile_summary *s = &p->summary;
    int rc = 0;
    const char *name = hs_profile_label(p, "__name__");
    if (!name) {
        json_t *stc = p->sample_type_config ? json_loads(p->sample_type_config, 0, NULL) : NULL;
        if (!(rc = set_label(p, "__name__", name_heuristic(s, stc))))
            name = hs_profile_label(p, "__name__");
        json_decref(stc);
    }
    if (!rc && !hs_profile_label(p, "service_name"))
        rc = set_label(p, "service_name", "unknown_service");
    if (rc)
        return hs_pprof_errf(c->err, c->errlen, rc, "out of memory");
    p->service = hs_profile_label(p, "service_name");

    s->type_ids = hs_arena_alloc(p->arena, (s->ntypes ? s->ntypes : 1) * sizeof(char *));
    if (!s->type_ids)
        return hs_pprof_errf(c->err, c->errlen, HS_ENOMEM, "out of memory");
    for (uint32_t t = 0; t < s->ntypes; t++) {
        const char *sn = series_name(name, s->types[t]);
        size_t n = strlen(sn) + strlen(s->types[t]) + strlen(s->units[t]) + strlen(s->period_type) +
                   strlen(s->period_unit) + 5;
        char *id = hs_arena_alloc(p->arena, n);
        if (!id)
            return hs_pprof_errf(c->err, c->errlen, HS_ENOMEM, "out of memory");
        snprintf(id, n, "%s:%s:%s:%s:%s", sn, s->types[t], s->units[t], s->period_type,
                 s->period_unit);
        s->type_ids[t] = id;
    }

    if (p->from_ns == 0 && p->until_ns == 0) {
        int64_t dur = s->duration_nanos > 0 ? s->duration_nanos : 0;
        if (s->time_nanos != 0) {
            p->from_ns = s->time_nanos;
            p->until_ns = pp_add(s->time_nanos, dur);
        } else {
            int64_t now = (int64_t)hs_wall_ns();
            p->until_ns = now;
            p->from_ns = now - dur;
        }
    }
    return 0;
}
