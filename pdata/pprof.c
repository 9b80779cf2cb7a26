/* pprof.c: hs_profile_summarize's front half: gunzip within the limit, protobuf-c decode into a
 * temporary arena, and the checks of pprof's CheckValid and Pyroscope's ValidateProfile
 * (wire.md §4), every failure naming the field and index. pprof_summary.c does the rest. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/compress.h"
#include "core/errors.h"
#include "pdata/pprof_int.h"

typedef Perftools__Profiles__Profile pb_profile;

/* Eight bytes at a time while they are ASCII, which names and paths nearly always are. */
bool hs_pprof_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + len;
    while (s < end) {
        if (end - s >= 8) {
            uint64_t w;
            memcpy(&w, s, 8);
            if ((w & 0x8080808080808080ULL) == 0) {
                s += 8;
                continue;
            }
        }
        unsigned c = *s;
        if (c < 0x80) {
            s++;
            continue;
        }
        size_t n;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false; /* a continuation byte first, an overlong lead, or past U+10FFFF */
        }
        if ((size_t)(end - s) <= n)
            return false;
        for (size_t i = 1; i <= n; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        s += n + 1;
    }
    return true;
}

/* ---- id maps -------------------------------------------------------------------------- */

/* Builds m over ids[0..n), which the caller has checked to be nonzero. Returns 0, HS_EINVAL with
 * *dup the index of a repeated id, or HS_ENOMEM / HS_E2BIG when the scratch arena is full. */
static int idmap_build(struct pp_idmap *m, struct hs_arena *a, const uint64_t *ids, size_t n,
                       size_t *dup)
{
    memset(m, 0, sizeof(*m));
    uint64_t maxid = 0;
    for (size_t i = 0; i < n; i++)
        maxid = ids[i] > maxid ? ids[i] : maxid;
    if (maxid <= 2 * (uint64_t)n + 1024) {
        m->direct = hs_arena_alloc(a, (maxid + 1) * sizeof(uint32_t));
        if (!m->direct)
            return HS_E2BIG;
        memset(m->direct, 0xff, (maxid + 1) * sizeof(uint32_t));
        m->maxid = maxid;
        for (size_t i = 0; i < n; i++) {
            if (m->direct[ids[i]] != PP_NONE) {
                *dup = i;
                return HS_EINVAL;
            }
            m->direct[ids[i]] = (uint32_t)i;
        }
        return 0;
    }
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->keys = hs_arena_alloc(a, cap * sizeof(uint64_t));
    m->vals = hs_arena_alloc(a, cap * sizeof(uint32_t));
    if (!m->keys || !m->vals)
        return HS_E2BIG;
    memset(m->keys, 0, cap * sizeof(uint64_t));
    m->mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        size_t s = hs_mix64(ids[i]) & m->mask;
        while (m->keys[s] != 0 && m->keys[s] != ids[i])
            s = (s + 1) & m->mask;
        if (m->keys[s] == ids[i]) {
            *dup = i;
            return HS_EINVAL;
        }
        m->keys[s] = ids[i];
        m->vals[s] = (uint32_t)i;
    }
    return 0;
}

/* The ids of one table: nonzero, unique. `what` is "location", "function" or "mapping". */
static int check_ids(struct pp_ctx *c, struct pp_idmap *m, const uint64_t *ids, size_t n,
                     const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == 0)
            return hs_pprof_errf(c->err, c->errlen, HS_EINVAL, "%s[%zu].id: id 0 is not allowed",
                                 what, i);
    size_t dup = 0;
    int rc = idmap_build(m, c->tmp, ids, n, &dup);
    if (rc == HS_EINVAL)
        return hs_pprof_errf(c->err, c->errlen, rc, "%s id %llu is used twice", what,
                             (unsigned long long)ids[dup]);
    if (rc)
        return hs_pprof_errf(c->err, c->errlen, rc, "decoded profile exceeds the memory limit");
    return 0;
}

/* ---- checks --------------------------------------------------------------------------- */

static bool str_ok(const pb_profile *pb, int64_t idx)
{
    return idx >= 0 && (uint64_t)idx < pb->n_string_table;
}

/* "function[2].name: string index 40 out of range (string_table has 12 entries)" */
static int str_err(struct pp_ctx *c, int64_t idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int str_err(struct pp_ctx *c, int64_t idx, const char *fmt, ...)
{
    char field[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(field, sizeof(field), fmt, ap);
    va_end(ap);
    return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                         "%s: string index %lld out of range (string_table has %zu entries)", field,
                         (long long)idx, c->pb->n_string_table);
}

#define CHECK_STR(c, idx, ...)                                                                     \
    do {                                                                                           \
        if (!str_ok((c)->pb, (idx)))                                                               \
            return str_err((c), (idx), __VA_ARGS__);                                               \
    } while (0)

static int check_strings(struct pp_ctx *c)
{
    const pb_profile *pb = c->pb;
    if (pb->n_string_table == 0)
        return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                             "string_table is empty (string_table[0] must be \"\")");
    if (pb->string_table[0][0] != '\0')
        return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                             "string_table[0] must be \"\" (it is \"%.40s\")", pb->string_table[0]);
    uint32_t max = c->lim->max_string_len;
    for (size_t i = 1; i < pb->n_string_table; i++) {
        const char *str = pb->string_table[i];
        size_t n = strlen(str), shown = 32;
        if (!hs_pprof_utf8_valid(str, n))
            return hs_pprof_errf(c->err, c->errlen, HS_EINVAL, "string_table[%zu]: not valid UTF-8",
                                 i);
        if (!max || n <= max)
            continue;
        while (shown > 0 && (str[shown] & 0xC0) == 0x80)
            shown--; /* the message stays UTF-8 */
        /* a function name of megabytes would be copied into the index and onto spans */
        return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                             "string_table[%zu]: %zu bytes (\"%.*s...\"), more than "
                             "max_string_length (%u)",
                             i, n, (int)shown, str, max);
    }
    return 0;
}

/* Everything outside the samples: string indexes, ids, and what lines point to. */
static int check_tables(struct pp_ctx *c)
{
    const pb_profile *pb = c->pb;
    for (size_t i = 0; i < pb->n_sample_type; i++) {
        CHECK_STR(c, pb->sample_type[i]->type, "sample_type[%zu].type", i);
        CHECK_STR(c, pb->sample_type[i]->unit, "sample_type[%zu].unit", i);
    }
    if (pb->period_type) {
        CHECK_STR(c, pb->period_type->type, "period_type.type");
        CHECK_STR(c, pb->period_type->unit, "period_type.unit");
    }
    CHECK_STR(c, pb->drop_frames, "drop_frames");
    CHECK_STR(c, pb->keep_frames, "keep_frames");
    CHECK_STR(c, pb->default_sample_type, "default_sample_type");
    CHECK_STR(c, pb->doc_url, "doc_url");
    for (size_t i = 0; i < pb->n_comment; i++)
        CHECK_STR(c, pb->comment[i], "comment[%zu]", i);
    if (pb->n_sample > 0 && pb->n_sample_type == 0)
        return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                             "sample_type: missing, but the profile has %zu samples", pb->n_sample);

    size_t most = pb->n_mapping;
    most = pb->n_location > most ? pb->n_location : most;
    most = pb->n_function > most ? pb->n_function : most;
    uint64_t *ids = hs_arena_alloc(c->tmp, (most ? most : 1) * sizeof(uint64_t));
    if (!ids)
        return hs_pprof_errf(c->err, c->errlen, HS_E2BIG,
                             "decoded profile exceeds the memory limit");
    int rc;

    for (size_t i = 0; i < pb->n_mapping; i++) {
        CHECK_STR(c, pb->mapping[i]->filename, "mapping[%zu].filename", i);
        CHECK_STR(c, pb->mapping[i]->build_id, "mapping[%zu].build_id", i);
        ids[i] = pb->mapping[i]->id;
    }
    struct pp_idmap maps;
    if ((rc = check_ids(c, &maps, ids, pb->n_mapping, "mapping")))
        return rc;

    for (size_t i = 0; i < pb->n_function; i++) {
        const Perftools__Profiles__Function *f = pb->function[i];
        CHECK_STR(c, f->name, "function[%zu].name", i);
        CHECK_STR(c, f->system_name, "function[%zu].system_name", i);
        CHECK_STR(c, f->filename, "function[%zu].filename", i);
        ids[i] = f->id;
    }
    if ((rc = check_ids(c, &c->funcs, ids, pb->n_function, "function")))
        return rc;

    for (size_t i = 0; i < pb->n_location; i++) {
        const Perftools__Profiles__Location *l = pb->location[i];
        for (size_t j = 0; j < l->n_line; j++)
            if (pp_idmap_get(&c->funcs, l->line[j]->function_id) == PP_NONE)
                return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                                     "location[%zu].line[%zu].function_id: function %llu does "
                                     "not exist",
                                     i, j, (unsigned long long)l->line[j]->function_id);
        /* an unknown mapping_id is tolerated: pprof's decoder leaves it nil, CheckValid allows
         * that, and the summary never reads mappings */
        ids[i] = l->id;
    }
    return check_ids(c, &c->locs, ids, pb->n_location, "location");
}

static int check_samples(struct pp_ctx *c)
{
    const pb_profile *pb = c->pb;
    const struct hs_pprof_limits *lim = c->lim;
    if (lim->max_samples && pb->n_sample > lim->max_samples)
        return hs_pprof_errf(c->err, c->errlen, HS_E2BIG,
                             "sample: %zu samples exceed max_samples (%u)", pb->n_sample,
                             lim->max_samples);
    for (size_t i = 0; i < pb->n_sample; i++) {
        const Perftools__Profiles__Sample *s = pb->sample[i];
        if (s->n_value != pb->n_sample_type)
            return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                                 "sample[%zu].value: %zu values, but %zu sample types", i,
                                 s->n_value, pb->n_sample_type);
        if (lim->max_sample_labels && s->n_label > lim->max_sample_labels)
            return hs_pprof_errf(c->err, c->errlen, HS_E2BIG,
                                 "sample[%zu].label: %zu labels exceed max_sample_labels (%u)", i,
                                 s->n_label, lim->max_sample_labels);
        for (size_t j = 0; j < s->n_label; j++) {
            CHECK_STR(c, s->label[j]->key, "sample[%zu].label[%zu].key", i, j);
            CHECK_STR(c, s->label[j]->str, "sample[%zu].label[%zu].str", i, j);
            CHECK_STR(c, s->label[j]->num_unit, "sample[%zu].label[%zu].num_unit", i, j);
        }
        uint64_t depth = 0;
        for (size_t j = 0; j < s->n_location_id; j++) {
            uint32_t l = pp_idmap_get(&c->locs, s->location_id[j]);
            if (l == PP_NONE)
                return hs_pprof_errf(c->err, c->errlen, HS_EINVAL,
                                     "sample[%zu].location_id[%zu]: location %llu does not exist",
                                     i, j, (unsigned long long)s->location_id[j]);
            size_t lines = pb->location[l]->n_line;
            depth += lines ? lines : 1; /* a location without lines is one (address) frame */
        }
        if (lim->max_stack_depth && depth > lim->max_stack_depth)
            return hs_pprof_errf(c->err, c->errlen, HS_E2BIG,
                                 "sample[%zu]: stack depth %llu exceeds max_stack_depth (%u)", i,
                                 (unsigned long long)depth, lim->max_stack_depth);
        if (depth > UINT32_MAX / 2)
            return hs_pprof_errf(c->err, c->errlen, HS_E2BIG, "sample[%zu]: stack too deep", i);
        if (depth > c->max_depth)
            c->max_depth = (uint32_t)depth;
    }
    return 0;
}

/* ---- the entry point ------------------------------------------------------------------ */

/* protobuf-c's tree costs far more than the wire: a 2-byte empty message becomes a struct of
 * 50-100 bytes and a pointer, so the decode arena may use up to this many times the input
 * (plus the scratch tables, which are proportional to the counts); a hostile input hits the
 * cap and is refused instead of taking memory without bound. */
#define PP_TMP_FACTOR 64
#define PP_TMP_BASE (1u << 20)

/* protobuf-c reports any failure as NULL; this remembers whether the arena's cap caused it. */
struct pb_alloc {
    struct hs_arena *a;
    bool full;
};

static void *pb_alloc_fn(void *ud, size_t n)
{
    struct pb_alloc *pa = ud;
    void *p = hs_arena_alloc(pa->a, n);
    if (!p)
        pa->full = true;
    return p;
}

static void pb_free_fn(void *ud, void *p)
{
    (void)ud;
    (void)p; /* the arena goes at once */
}

static int decode(struct pp_ctx *c, const uint8_t *data, size_t len)
{
    size_t cap = len > (SIZE_MAX - PP_TMP_BASE) / PP_TMP_FACTOR ? SIZE_MAX
                                                                : len * PP_TMP_FACTOR + PP_TMP_BASE;
    c->tmp = hs_arena_new(len < 16384 ? 16384 : len * 4, cap);
    if (!c->tmp)
        return hs_pprof_errf(c->err, c->errlen, HS_ENOMEM, "out of memory");
    struct pb_alloc pa = {.a = c->tmp};
    ProtobufCAllocator alloc = {.alloc = pb_alloc_fn, .free = pb_free_fn, .allocator_data = &pa};
    c->pb = perftools__profiles__profile__unpack(&alloc, len, data);
    if (c->pb)
        return 0;
    if (pa.full)
        return hs_pprof_errf(c->err, c->errlen, HS_E2BIG,
                             "decoded profile exceeds the memory limit (%zu bytes)", cap);
    return hs_pprof_errf(
        c->err, c->errlen, HS_EINVAL, "not a pprof profile: protobuf decoding failed (%zu bytes%s)",
        len, len >= 2 && data[0] == 0x1f && data[1] == 0x8b ? ", gzip inside gzip" : "");
}

static int inflate_raw(const struct hs_profile *p, const struct hs_pprof_limits *lim,
                       struct hs_buf *plain, char *err, size_t errlen)
{
    size_t max = lim->max_decompressed && lim->max_decompressed < SIZE_MAX - 1
                     ? (size_t)lim->max_decompressed
                     : SIZE_MAX - 1;
    const char *msg = NULL;
    int rc = hs_gunzip(p->raw, p->raw_len, max, plain, &msg);
    if (rc == HS_E2BIG)
        return hs_pprof_errf(err, errlen, rc,
                             "decompressed profile exceeds max_decompressed_size (%llu bytes)",
                             (unsigned long long)max);
    if (rc == HS_EINVAL)
        return hs_pprof_errf(err, errlen, rc, "not a pprof profile: gzip: %s",
                             msg ? msg : "corrupt data");
    if (rc)
        return hs_pprof_errf(err, errlen, rc, "out of memory inflating the profile");
    return 0;
}

/* The checks, the summary and the labels, on a decoded profile. */
static int summarize_tree(struct pp_ctx *c, struct hs_profile *p)
{
    int rc;
    if ((rc = check_strings(c)) || (rc = check_tables(c)) || (rc = check_samples(c)))
        return rc;
    if ((rc = hs_pprof_build_summary(c, p)))
        return rc;
    return hs_pprof_complete_labels(c, p);
}

int hs_pprof_summarize_pb(const Perftools__Profiles__Profile *pb, struct hs_arena *tmp,
                          struct hs_profile *p, char *err, size_t errlen)
{
    static const struct hs_pprof_limits none = {0};
    struct pp_ctx c = {.pb = pb, .tmp = tmp, .lim = &none, .err = err, .errlen = errlen};
    if (err && errlen)
        err[0] = '\0';
    memset(&p->summary, 0, sizeof(p->summary));
    int rc = summarize_tree(&c, p);
    if (rc)
        memset(&p->summary, 0, sizeof(p->summary));
    return rc;
}

int hs_profile_summarize(struct hs_profile *p, const struct hs_pprof_limits *lim, char *err,
                         size_t errlen)
{
    static const struct hs_pprof_limits none = {0};
    struct pp_ctx c = {.lim = lim ? lim : &none, .err = err, .errlen = errlen};
    struct hs_buf plain = {0};
    const uint8_t *data = p->raw;
    size_t len = p->raw_len;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    memset(&p->summary, 0, sizeof(p->summary));
    if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        if ((rc = inflate_raw(p, c.lim, &plain, err, errlen)))
            goto done;
        data = plain.data;
        len = plain.len;
    } else if (c.lim->max_decompressed && len > c.lim->max_decompressed) {
        rc = hs_pprof_errf(err, errlen, HS_E2BIG,
                           "decompressed profile exceeds max_decompressed_size (%llu bytes)",
                           (unsigned long long)c.lim->max_decompressed);
        goto done;
    }
    if ((rc = decode(&c, data ? data : (const uint8_t *)"", len)))
        goto done;
    hs_buf_free(&plain); /* protobuf-c copied what it keeps */
    rc = summarize_tree(&c, p);
done:
    if (rc)
        memset(&p->summary, 0, sizeof(p->summary)); /* no half summary escapes */
    hs_buf_free(&plain);
    hs_arena_free(c.tmp);
    return rc;
}
