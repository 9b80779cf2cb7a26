/* pprof_folded.c: folded ("collapsed") stack text, Pyroscope's default /ingest format (wire.md
 * §5.3), turned into an uncompressed pprof so every profile downstream is pprof. */
#include <limits.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/errors.h"
#include "pdata/pprof_int.h"

/* Frame names are interned by content: one Function and one Location per distinct name. */
struct frames {
    struct hs_arena *a;
    uint32_t *slot; /* index into names, PP_NONE = empty */
    size_t mask;
    char **names; /* NUL-terminated copies, protobuf-c wants C strings */
    size_t *lens;
    uint32_t n;
};

static uint32_t frame_intern(struct frames *f, const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    size_t i = hs_mix64(h) & f->mask;
    for (;; i = (i + 1) & f->mask) {
        uint32_t k = f->slot[i];
        if (k == PP_NONE)
            break;
        if (f->lens[k] == len && memcmp(f->names[k], s, len) == 0)
            return k;
    }
    char *copy = hs_arena_strndup(f->a, s, len);
    if (!copy)
        return PP_NONE;
    uint32_t k = f->n++;
    f->names[k] = copy;
    f->lens[k] = len;
    f->slot[i] = k;
    return k;
}

/* Like Go's strconv.Atoi (what Pyroscope's parser calls): an optional sign, then digits. */
static bool parse_count(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (len > 0 && (s[0] == '-' || s[0] == '+'))
        neg = s[i++] == '-';
    if (i == len)
        return false;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

struct line {
    const char *p;
    size_t len;
};

/* The next line of text (without its LF and an optional CR before it); false at the end. */
static bool next_line(const char *text, size_t len, size_t *pos, struct line *l)
{
    if (*pos >= len)
        return false;
    const char *start = text + *pos;
    const char *nl = memchr(start, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - start) : len - *pos;
    *pos += n + (nl ? 1 : 0);
    if (n > 0 && start[n - 1] == '\r')
        n--;
    *l = (struct line){start, n};
    return true;
}

static const char *last_space(const struct line *l)
{
    for (size_t i = l->len; i-- > 0;)
        if (l->p[i] == ' ')
            return l->p + i;
    return NULL;
}

struct folded {
    Perftools__Profiles__Profile prof;
    Perftools__Profiles__ValueType vt, pt; /* sample type, period type */
    struct frames f;
    struct hs_arena *a;
    uint32_t max_string;
    char *err;
    size_t errlen;
};

/* One line: its frames interned (leaf first, as pprof stores them) and its value. */
static int add_sample(struct folded *fo, const struct line *l, const char *sp, size_t lineno,
                      int64_t period)
{
    int64_t count, value;
    if (!parse_count(sp + 1, (size_t)(l->p + l->len - (sp + 1)), &count))
        return hs_pprof_errf(fo->err, fo->errlen, HS_EINVAL,
                             "line %zu: the count after the last space is not an integer", lineno);
    if (count < 0)
        return hs_pprof_errf(fo->err, fo->errlen, HS_EINVAL,
                             "line %zu: count %lld is negative (a count of samples cannot be)",
                             lineno, (long long)count);
    if (period > 0 ? __builtin_mul_overflow(count, period, &value) : (value = count, false))
        return hs_pprof_errf(fo->err, fo->errlen, HS_EINVAL,
                             "line %zu: count x period does not fit in 64 bits", lineno);
    size_t slen = (size_t)(sp - l->p);
    if (!hs_pprof_utf8_valid(l->p, slen))
        return hs_pprof_errf(fo->err, fo->errlen, HS_EINVAL, "line %zu: not valid UTF-8", lineno);
    size_t nframes = 0;
    if (slen > 0) {
        nframes = 1;
        for (const char *q = l->p; (q = memchr(q, ';', (size_t)(sp - q))); q++)
            nframes++;
    }
    Perftools__Profiles__Sample *s = hs_arena_alloc(fo->a, sizeof(*s));
    uint64_t *locs = hs_arena_alloc(fo->a, (nframes ? nframes : 1) * sizeof(uint64_t));
    int64_t *v = hs_arena_alloc(fo->a, sizeof(int64_t));
    if (!s || !locs || !v)
        return HS_ENOMEM;
    perftools__profiles__sample__init(s);
    const char *q = l->p;
    for (size_t i = 0; i < nframes; i++) {
        const char *e = memchr(q, ';', (size_t)(sp - q));
        if (!e)
            e = sp;
        if (fo->max_string && (size_t)(e - q) > fo->max_string)
            return hs_pprof_errf(fo->err, fo->errlen, HS_EINVAL,
                                 "line %zu: frame %zu is %zu bytes long, more than "
                                 "max_string_length (%u)",
                                 lineno, i + 1, (size_t)(e - q), fo->max_string);
        uint32_t k = frame_intern(&fo->f, q, (size_t)(e - q));
        if (k == PP_NONE)
            return HS_ENOMEM;
        locs[nframes - 1 - i] = (uint64_t)k + 1; /* text is root first, pprof leaf first */
        q = e + 1;
    }
    *v = value;
    s->n_location_id = nframes;
    s->location_id = locs;
    s->n_value = 1;
    s->value = v;
    fo->prof.sample[fo->prof.n_sample++] = s;
    return 0;
}

/* Function i and Location i (ids i + 1) for frame i, whose name is string i + 3; the period
 * type's strings last. */
static int build_tables(struct folded *fo, const char *type, const char *unit)
{
    uint32_t n = fo->f.n;
    Perftools__Profiles__Profile *pr = &fo->prof;
    pr->string_table = hs_arena_alloc(fo->a, ((size_t)n + 5) * sizeof(char *));
    pr->function = hs_arena_alloc(fo->a, (n ? n : 1) * sizeof(*pr->function));
    pr->location = hs_arena_alloc(fo->a, (n ? n : 1) * sizeof(*pr->location));
    Perftools__Profiles__Function *fn = hs_arena_alloc(fo->a, (n ? n : 1) * sizeof(*fn));
    Perftools__Profiles__Location *loc = hs_arena_alloc(fo->a, (n ? n : 1) * sizeof(*loc));
    Perftools__Profiles__Line *ln = hs_arena_alloc(fo->a, (n ? n : 1) * sizeof(*ln));
    Perftools__Profiles__Line **lnp = hs_arena_alloc(fo->a, (n ? n : 1) * sizeof(*lnp));
    if (!pr->string_table || !pr->function || !pr->location || !fn || !loc || !ln || !lnp)
        return HS_ENOMEM;
    pr->n_string_table = (size_t)n + 5;
    pr->string_table[0] = "";
    pr->string_table[1] = (char *)type;
    pr->string_table[2] = (char *)unit;
    pr->string_table[n + 3] = "cpu"; /* the period type */
    pr->string_table[n + 4] = "nanoseconds";
    for (uint32_t i = 0; i < n; i++) {
        pr->string_table[i + 3] = fo->f.names[i];
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = (uint64_t)i + 1;
        fn[i].name = (int64_t)i + 3;
        fn[i].system_name = (int64_t)i + 3;
        pr->function[i] = &fn[i];
        perftools__profiles__line__init(&ln[i]);
        ln[i].function_id = (uint64_t)i + 1;
        lnp[i] = &ln[i];
        perftools__profiles__location__init(&loc[i]);
        loc[i].id = (uint64_t)i + 1;
        loc[i].n_line = 1;
        loc[i].line = &lnp[i];
        pr->location[i] = &loc[i];
    }
    pr->n_function = n;
    pr->n_location = n;
    return 0;
}

static int fold(struct folded *fo, const char *text, size_t len, const char *type, const char *unit,
                int64_t period, uint32_t max_samples)
{
    /* count first: the limit is checked before anything is built, and it sizes the tables */
    size_t pos = 0, samples = 0, seps = 0;
    struct line l;
    for (size_t lineno = 1; next_line(text, len, &pos, &l); lineno++) {
        const char *sp = last_space(&l);
        if (!sp && l.len == 0)
            continue;
        /* Pyroscope skips a line without a count; we refuse it, as a truncated body or one in
         * another format would otherwise pass as a smaller profile (docs/protocols.md,
         * "Profiles") */
        if (!sp)
            return hs_pprof_errf(fo->err, fo->errlen, HS_EINVAL,
                                 "line %zu: no count (a folded line is \"frame;frame count\")",
                                 lineno);
        samples++;
        for (const char *q = l.p; (q = memchr(q, ';', (size_t)(sp - q))); q++)
            seps++;
    }
    if (max_samples && samples > max_samples)
        return hs_pprof_errf(fo->err, fo->errlen, HS_E2BIG,
                             "folded profile has %zu stacks, more than max_samples (%u)", samples,
                             max_samples);
    size_t cap = 16, most = samples + seps;
    while (cap < 2 * most)
        cap *= 2;
    fo->f = (struct frames){.a = fo->a, .mask = cap - 1};
    fo->f.slot = hs_arena_alloc(fo->a, cap * sizeof(uint32_t));
    fo->f.names = hs_arena_alloc(fo->a, (most ? most : 1) * sizeof(char *));
    fo->f.lens = hs_arena_alloc(fo->a, (most ? most : 1) * sizeof(size_t));
    fo->prof.sample = hs_arena_alloc(fo->a, (samples ? samples : 1) * sizeof(void *));
    if (!fo->f.slot || !fo->f.names || !fo->f.lens || !fo->prof.sample)
        return HS_ENOMEM;
    memset(fo->f.slot, 0xff, cap * sizeof(uint32_t));

    pos = 0;
    for (size_t lineno = 1; next_line(text, len, &pos, &l); lineno++) {
        const char *sp = last_space(&l);
        int rc;
        if (sp && (rc = add_sample(fo, &l, sp, lineno, period)))
            return rc;
    }
    return build_tables(fo, type, unit);
}

/* lim (NULL: no limits) bounds the lines (max_samples) and each frame's bytes (max_string_len).
 * Empty lines are skipped; a line without a count or with a negative one is refused. */
int hs_pprof_from_folded(const char *text, size_t len, const char *type, const char *unit,
                         int64_t period, const struct hs_pprof_limits *lim, struct hs_buf *out,
                         char *err, size_t errlen)
{
    uint32_t max_samples = lim ? lim->max_samples : 0;
    if (err && errlen)
        err[0] = '\0';
    if (!hs_pprof_utf8_valid(type, strlen(type)) || !hs_pprof_utf8_valid(unit, strlen(unit)))
        return hs_pprof_errf(err, errlen, HS_EINVAL, "sample type is not valid UTF-8");
    struct folded fo = {.max_string = lim ? lim->max_string_len : 0, .err = err, .errlen = errlen};
    fo.a = hs_arena_new(len < 65536 ? 16384 : len * 2, 0);
    if (!fo.a)
        return hs_pprof_errf(err, errlen, HS_ENOMEM, "out of memory");
    perftools__profiles__profile__init(&fo.prof);
    perftools__profiles__value_type__init(&fo.vt);
    perftools__profiles__value_type__init(&fo.pt);
    int rc = fold(&fo, text ? text : "", text ? len : 0, type, unit, period, max_samples);
    if (rc == 0) {
        Perftools__Profiles__ValueType *vt = &fo.vt;
        vt->type = 1;
        vt->unit = 2;
        fo.prof.n_sample_type = 1;
        fo.prof.sample_type = &vt;
        if (period > 0) { /* pkg/ingester/pyroscope/ingest_adapter.go Put: cpu/nanoseconds */
            fo.pt.type = (int64_t)fo.prof.n_string_table - 2;
            fo.pt.unit = (int64_t)fo.prof.n_string_table - 1;
            fo.prof.period_type = &fo.pt;
            fo.prof.period = period;
        }
        size_t n = perftools__profiles__profile__get_packed_size(&fo.prof);
        out->len = 0;
        if ((rc = hs_buf_reserve(out, n)) == 0)
            out->len = perftools__profiles__profile__pack(&fo.prof, out->data);
    }
    if (rc == HS_ENOMEM)
        hs_pprof_errf(err, errlen, rc, "out of memory");
    hs_arena_free(fo.a);
    return rc;
}
