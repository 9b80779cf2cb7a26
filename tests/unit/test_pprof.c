/* test_pprof.c: the pprof summary (every number of it, from profiles built here with protobuf-c),
 * the validity checks and limits with the field each error names, gzip handling, the label
 * completion and __name__ heuristic, and folded text -> pprof -> summary round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/compress.h"
#include "core/errors.h"
#include "pdata/profiles.h"
#include "perftools/profiles/profile.pb-c.h"

typedef Perftools__Profiles__Profile Prof;

/* ---- a tiny pprof builder (arena-backed protobuf-c structs) ------------------------------ */

#define MAXN 64

struct pb {
    struct hs_arena *a;
    Prof prof;
    char *strs[MAXN * 4];
    Perftools__Profiles__ValueType *types[8];
    Perftools__Profiles__Function *funcs[MAXN];
    Perftools__Profiles__Location *locs[MAXN];
    Perftools__Profiles__Mapping *maps[8];
    Perftools__Profiles__Sample *samples[MAXN];
};

static struct pb *pb_new(void)
{
    struct pb *b = calloc(1, sizeof(*b));
    b->a = hs_arena_new(4096, 0);
    perftools__profiles__profile__init(&b->prof);
    b->strs[0] = "";
    b->prof.string_table = b->strs;
    b->prof.n_string_table = 1;
    b->prof.sample_type = b->types;
    b->prof.function = b->funcs;
    b->prof.location = b->locs;
    b->prof.mapping = b->maps;
    b->prof.sample = b->samples;
    return b;
}

static void pb_free(struct pb *b)
{
    hs_arena_free(b->a);
    free(b);
}

static int64_t S(struct pb *b, const char *s)
{
    for (size_t i = 0; i < b->prof.n_string_table; i++)
        if (strcmp(b->strs[i], s) == 0)
            return (int64_t)i;
    b->strs[b->prof.n_string_table] = hs_arena_strndup(b->a, s, strlen(s));
    return (int64_t)b->prof.n_string_table++;
}

static Perftools__Profiles__ValueType *vt(struct pb *b, const char *type, const char *unit)
{
    Perftools__Profiles__ValueType *v = hs_arena_alloc(b->a, sizeof(*v));
    perftools__profiles__value_type__init(v);
    v->type = S(b, type);
    v->unit = S(b, unit);
    return v;
}

static void add_type(struct pb *b, const char *type, const char *unit)
{
    b->types[b->prof.n_sample_type++] = vt(b, type, unit);
}

static Perftools__Profiles__Function *add_func(struct pb *b, uint64_t id, const char *name,
                                               const char *file)
{
    Perftools__Profiles__Function *f = hs_arena_alloc(b->a, sizeof(*f));
    perftools__profiles__function__init(f);
    f->id = id;
    f->name = S(b, name);
    f->filename = S(b, file);
    b->funcs[b->prof.n_function++] = f;
    return f;
}

/* A location whose lines are the function ids given, innermost (pprof's line[0]) first. */
static Perftools__Profiles__Location *add_loc(struct pb *b, uint64_t id, size_t nlines, ...)
{
    Perftools__Profiles__Location *l = hs_arena_alloc(b->a, sizeof(*l));
    perftools__profiles__location__init(l);
    l->id = id;
    l->n_line = nlines;
    l->line = hs_arena_alloc(b->a, (nlines + 1) * sizeof(*l->line));
    va_list ap;
    va_start(ap, nlines);
    for (size_t i = 0; i < nlines; i++) {
        Perftools__Profiles__Line *ln = hs_arena_alloc(b->a, sizeof(*ln));
        perftools__profiles__line__init(ln);
        ln->function_id = va_arg(ap, uint64_t);
        ln->line = 10 + (int64_t)i;
        l->line[i] = ln;
    }
    va_end(ap);
    b->locs[b->prof.n_location++] = l;
    return l;
}

/* A sample: location ids leaf first (0-terminated), then the values (one per type). */
static Perftools__Profiles__Sample *add_sample(struct pb *b, const uint64_t *locs,
                                               const int64_t *vals)
{
    Perftools__Profiles__Sample *s = hs_arena_alloc(b->a, sizeof(*s));
    perftools__profiles__sample__init(s);
    size_t n = 0;
    while (locs[n])
        n++;
    s->n_location_id = n;
    s->location_id = hs_arena_alloc(b->a, (n + 1) * sizeof(uint64_t));
    memcpy(s->location_id, locs, n * sizeof(uint64_t));
    s->n_value = b->prof.n_sample_type;
    s->value = hs_arena_alloc(b->a, (s->n_value + 1) * sizeof(int64_t));
    memcpy(s->value, vals, s->n_value * sizeof(int64_t));
    s->label = hs_arena_alloc(b->a, 8 * sizeof(*s->label));
    b->samples[b->prof.n_sample++] = s;
    return s;
}

static void add_label(struct pb *b, Perftools__Profiles__Sample *s, const char *key,
                      const char *str)
{
    Perftools__Profiles__Label *l = hs_arena_alloc(b->a, sizeof(*l));
    perftools__profiles__label__init(l);
    l->key = S(b, key);
    l->str = S(b, str);
    s->label[s->n_label++] = l;
}

static void pb_pack(struct pb *b, struct hs_buf *out)
{
    out->len = 0;
    size_t n = perftools__profiles__profile__get_packed_size(&b->prof);
    assert_int_equal(hs_buf_reserve(out, n), 0);
    out->len = perftools__profiles__profile__pack(&b->prof, out->data);
}

static const struct hs_pprof_limits big = {.max_decompressed = 4u << 20,
                                           .max_samples = 16000,
                                           .max_sample_labels = 32,
                                           .max_stack_depth = 1024};

static char err[256];

/* A profile holding `len` bytes; summarized with lim; returns the code (profile in *out). */
static int summarize_bytes(const void *data, size_t len, const struct hs_pprof_limits *lim,
                           struct hs_profile **out)
{
    struct hs_profile *p = hs_profile_new();
    assert_non_null(p);
    assert_int_equal(hs_profile_set_raw(p, data, len), 0);
    memset(err, 0, sizeof(err));
    int rc = hs_profile_summarize(p, lim, err, sizeof(err));
    if (rc == 0)
        assert_string_equal(err, "");
    else
        assert_true(err[0] != '\0');
    *out = p;
    return rc;
}

static int summarize_pb(struct pb *b, const struct hs_pprof_limits *lim, struct hs_profile **out)
{
    struct hs_buf buf = {0};
    pb_pack(b, &buf);
    int rc = summarize_bytes(buf.data, buf.len, lim, out);
    hs_buf_free(&buf);
    return rc;
}

static uint32_t func_index(const struct hs_profile_summary *s, const char *name, const char *file)
{
    for (uint32_t i = 0; i < s->nfuncs; i++)
        if (strcmp(s->funcs[i].name, name) == 0 && strcmp(s->funcs[i].file, file) == 0)
            return i;
    fail_msg("function %s (%s) not in the summary", name, file);
    return 0;
}

/* The stack as "a;b;c" (root first), for comparisons. */
static const char *stack_str(const struct hs_profile_summary *s, uint32_t st)
{
    static char out[512];
    size_t n = 0;
    out[0] = '\0';
    for (uint32_t d = 0; d < s->stacks[st].depth; d++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s", d ? ";" : "",
                              s->funcs[s->stacks[st].funcs[d]].name);
    return out;
}

static uint32_t stack_index(const struct hs_profile_summary *s, const char *stack, uint32_t span)
{
    for (uint32_t i = 0; i < s->nstacks; i++)
        if (s->stacks[i].span == span && strcmp(stack_str(s, i), stack) == 0)
            return i;
    fail_msg("stack %s (span %u) not in the summary", stack, span);
    return 0;
}

/* A Go-like CPU profile: main -> foo -> bar and main -> foo, in three samples. */
static struct pb *cpu_profile(void)
{
    struct pb *b = pb_new();
    add_type(b, "samples", "count");
    add_type(b, "cpu", "nanoseconds");
    b->prof.period_type = vt(b, "cpu", "nanoseconds");
    b->prof.period = 10000000;
    b->prof.time_nanos = 1700000000000000000LL;
    b->prof.duration_nanos = 10000000000LL;
    add_func(b, 1, "main.main", "main.go");
    add_func(b, 2, "main.foo", "main.go");
    add_func(b, 3, "main.bar", "bar.go");
    add_loc(b, 1, 1, (uint64_t)1);
    add_loc(b, 2, 1, (uint64_t)2);
    add_loc(b, 3, 1, (uint64_t)3);
    add_sample(b, (uint64_t[]){3, 2, 1, 0}, (int64_t[]){1, 10000000});
    add_sample(b, (uint64_t[]){2, 1, 0}, (int64_t[]){2, 20000000});
    add_sample(b, (uint64_t[]){3, 2, 1, 0}, (int64_t[]){3, 30000000});
    return b;
}

/* ---- the summary ------------------------------------------------------------------------- */

static void check_cpu_summary(const struct hs_profile *p)
{
    const struct hs_profile_summary *s = &p->summary;
    assert_int_equal(s->ntypes, 2);
    assert_string_equal(s->types[0], "samples");
    assert_string_equal(s->units[0], "count");
    assert_string_equal(s->types[1], "cpu");
    assert_string_equal(s->units[1], "nanoseconds");
    assert_string_equal(s->period_type, "cpu");
    assert_string_equal(s->period_unit, "nanoseconds");
    assert_int_equal(s->period, 10000000);
    assert_int_equal(s->main_type, 1);
    assert_string_equal(s->type_ids[0], "process_cpu:samples:count:cpu:nanoseconds");
    assert_string_equal(s->type_ids[1], "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_int_equal(s->time_nanos, 1700000000000000000LL);
    assert_int_equal(s->duration_nanos, 10000000000LL);
    assert_int_equal(s->samples, 3);
    assert_int_equal(s->totals[0], 6);
    assert_int_equal(s->totals[1], 60000000);
    assert_int_equal(s->nfuncs, 3);
    uint32_t m = func_index(s, "main.main", "main.go"), f = func_index(s, "main.foo", "main.go"),
             r = func_index(s, "main.bar", "bar.go");
    assert_int_equal(s->funcs[m].self[0], 0);
    assert_int_equal(s->funcs[m].total[0], 6);
    assert_int_equal(s->funcs[m].total[1], 60000000);
    assert_int_equal(s->funcs[f].self[0], 2);
    assert_int_equal(s->funcs[f].self[1], 20000000);
    assert_int_equal(s->funcs[f].total[0], 6);
    assert_int_equal(s->funcs[r].self[0], 4);
    assert_int_equal(s->funcs[r].self[1], 40000000);
    assert_int_equal(s->funcs[r].total[0], 4);
    assert_int_equal(s->nstacks, 2);
    uint32_t a = stack_index(s, "main.main;main.foo;main.bar", HS_PROFILE_NO_SPAN);
    uint32_t c = stack_index(s, "main.main;main.foo", HS_PROFILE_NO_SPAN);
    assert_int_equal(s->stacks[a].values[0], 4);
    assert_int_equal(s->stacks[a].values[1], 40000000);
    assert_int_equal(s->stacks[c].values[0], 2);
    assert_int_equal(s->nspans, 0);
    assert_string_equal(hs_profile_label(p, "__name__"), "process_cpu");
    assert_string_equal(hs_profile_label(p, "service_name"), "unknown_service");
    assert_string_equal(p->service, "unknown_service");
    assert_int_equal(p->from_ns, 1700000000000000000LL);
    assert_int_equal(p->until_ns, 1700000010000000000LL);
}

static void test_summary_plain(void **state)
{
    struct pb *b = cpu_profile();
    struct hs_profile *p;
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    check_cpu_summary(p);
    hs_profile_free(p);
    pb_free(b);
}

static void test_summary_gzip(void **state)
{
    struct pb *b = cpu_profile();
    struct hs_buf raw = {0}, gz = {0};
    pb_pack(b, &raw);
    assert_int_equal(hs_gzip(raw.data, raw.len, 6, &gz), 0);
    struct hs_profile *p;
    assert_int_equal(summarize_bytes(gz.data, gz.len, &big, &p), 0);
    check_cpu_summary(p);
    assert_int_equal(p->raw_len, gz.len); /* the raw bytes stay as received */
    assert_memory_equal(p->raw, gz.data, gz.len);
    hs_profile_free(p);
    hs_buf_free(&raw);
    hs_buf_free(&gz);
    pb_free(b);
}

/* main -> fib -> fib -> fib: fib's total counts the sample once, its self too. */
static void test_recursion_counts_once(void **state)
{
    struct pb *b = pb_new();
    add_type(b, "cpu", "nanoseconds");
    add_func(b, 1, "main", "m.js");
    add_func(b, 2, "fib", "m.js");
    add_loc(b, 1, 1, (uint64_t)1);
    add_loc(b, 2, 1, (uint64_t)2);
    add_loc(b, 3, 1, (uint64_t)2); /* same function, another call site */
    add_sample(b, (uint64_t[]){3, 2, 3, 1, 0}, (int64_t[]){7});
    add_sample(b, (uint64_t[]){1, 0}, (int64_t[]){5});
    struct hs_profile *p;
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    const struct hs_profile_summary *s = &p->summary;
    assert_int_equal(s->nfuncs, 2);
    uint32_t fib = func_index(s, "fib", "m.js"), m = func_index(s, "main", "m.js");
    assert_int_equal(s->funcs[fib].self[0], 7);
    assert_int_equal(s->funcs[fib].total[0], 7);
    assert_int_equal(s->funcs[m].self[0], 5);
    assert_int_equal(s->funcs[m].total[0], 12);
    assert_int_equal(s->stacks[stack_index(s, "main;fib;fib;fib", HS_PROFILE_NO_SPAN)].values[0],
                     7);
    assert_int_equal(s->stacks[stack_index(s, "main", HS_PROFILE_NO_SPAN)].values[0], 5);
    assert_int_equal(s->totals[0], 12);
    hs_profile_free(p);
    pb_free(b);
}

/* One location with lines [inner, middle] (innermost first) called from main: the stack is
 * main;middle;inner and inner is the leaf. */
static void test_inlined_lines_expand(void **state)
{
    struct pb *b = pb_new();
    add_type(b, "wall", "nanoseconds");
    add_func(b, 1, "main", "a.c");
    add_func(b, 2, "middle", "a.c");
    add_func(b, 3, "inner", "a.c");
    add_loc(b, 10, 2, (uint64_t)3, (uint64_t)2);
    add_loc(b, 20, 1, (uint64_t)1);
    add_sample(b, (uint64_t[]){10, 20, 0}, (int64_t[]){100});
    struct hs_profile *p;
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    const struct hs_profile_summary *s = &p->summary;
    assert_int_equal(s->nstacks, 1);
    assert_int_equal(s->stacks[0].depth, 3);
    assert_string_equal(stack_str(s, 0), "main;middle;inner");
    assert_int_equal(s->funcs[func_index(s, "inner", "a.c")].self[0], 100);
    assert_int_equal(s->funcs[func_index(s, "middle", "a.c")].self[0], 0);
    assert_int_equal(s->funcs[func_index(s, "middle", "a.c")].total[0], 100);
    assert_string_equal(hs_profile_label(p, "__name__"), "wall");
    assert_int_equal(s->main_type, 0);
    /* the depth limit counts inlined frames: 3 frames from 2 locations */
    struct hs_pprof_limits lim = big;
    lim.max_stack_depth = 2;
    hs_profile_free(p);
    assert_int_equal(summarize_pb(b, &lim, &p), HS_E2BIG);
    assert_non_null(strstr(err, "sample[0]"));
    assert_non_null(strstr(err, "max_stack_depth"));
    hs_profile_free(p);
    lim.max_stack_depth = 3;
    assert_int_equal(summarize_pb(b, &lim, &p), 0);
    hs_profile_free(p);
    pb_free(b);
}

/* Functions are keyed by (name, file): two ids of one pair merge, one name in two files not. */
static void test_functions_dedup_by_name_and_file(void **state)
{
    struct pb *b = pb_new();
    add_type(b, "cpu", "nanoseconds");
    add_func(b, 1, "handle", "a.go");
    add_func(b, 2, "handle", "a.go");
    add_func(b, 3, "handle", "b.go");
    add_func(b, 4, "unused", "c.go");
    add_loc(b, 1, 1, (uint64_t)1);
    add_loc(b, 2, 1, (uint64_t)2);
    add_loc(b, 3, 1, (uint64_t)3);
    add_sample(b, (uint64_t[]){1, 0}, (int64_t[]){1});
    add_sample(b, (uint64_t[]){2, 0}, (int64_t[]){2});
    add_sample(b, (uint64_t[]){3, 0}, (int64_t[]){4});
    struct hs_profile *p;
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    const struct hs_profile_summary *s = &p->summary;
    assert_int_equal(s->nfuncs, 2); /* "unused" is on no stack */
    assert_int_equal(s->funcs[func_index(s, "handle", "a.go")].self[0], 3);
    assert_int_equal(s->funcs[func_index(s, "handle", "b.go")].self[0], 4);
    assert_int_equal(s->nstacks, 2); /* locations 1 and 2 give the same function stack */
    hs_profile_free(p);
    pb_free(b);
}

static void test_spans(void **state)
{
    struct pb *b = pb_new();
    add_type(b, "samples", "count");
    add_type(b, "cpu", "nanoseconds");
    add_func(b, 1, "main", "m.go");
    add_func(b, 2, "work", "m.go");
    add_loc(b, 1, 1, (uint64_t)1);
    add_loc(b, 2, 1, (uint64_t)2);
    uint64_t stk[] = {2, 1, 0};
    Perftools__Profiles__Sample *s0 = add_sample(b, stk, (int64_t[]){1, 10});
    add_label(b, s0, "span_id", "00f067aa0ba902b7");
    Perftools__Profiles__Sample *s1 = add_sample(b, stk, (int64_t[]){2, 20});
    add_label(b, s1, "span_name", "GET /users");
    add_label(b, s1, "span_id", "00F067AA0BA902B7"); /* uppercase: the same span */
    Perftools__Profiles__Sample *s2 = add_sample(b, stk, (int64_t[]){4, 40});
    add_label(b, s2, "span_id", "00f067aa0ba902b"); /* 15 chars: no span */
    Perftools__Profiles__Sample *s3 = add_sample(b, stk, (int64_t[]){8, 80});
    add_label(b, s3, "span_id", "00f067aa0ba902bz"); /* not hex: no span */
    Perftools__Profiles__Sample *s4 = add_sample(b, stk, (int64_t[]){16, 160});
    add_label(b, s4, "profile_id", "1122334455667788"); /* legacy key */
    Perftools__Profiles__Sample *s5 = add_sample(b, stk, (int64_t[]){32, 320});
    add_label(b, s5, "span_id", "00f067aa0ba902b7a"); /* 17 chars: no span */
    add_sample(b, (uint64_t[]){1, 0}, (int64_t[]){64, 640});
    struct hs_profile *p;
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    const struct hs_profile_summary *s = &p->summary;
    assert_int_equal(s->nspans, 2);
    static const uint8_t id1[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    static const uint8_t id2[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
    uint32_t a = memcmp(s->spans[0].id, id1, 8) == 0 ? 0 : 1;
    assert_memory_equal(s->spans[a].id, id1, 8);
    assert_memory_equal(s->spans[1 - a].id, id2, 8);
    assert_int_equal(s->spans[a].values[0], 3);
    assert_int_equal(s->spans[a].values[1], 30);
    assert_int_equal(s->spans[1 - a].values[0], 16);
    /* stacks are split by span: main;work x {span a, span b, none}, and main alone */
    assert_int_equal(s->nstacks, 4);
    assert_int_equal(s->stacks[stack_index(s, "main;work", a)].values[0], 3);
    assert_int_equal(s->stacks[stack_index(s, "main;work", 1 - a)].values[0], 16);
    assert_int_equal(s->stacks[stack_index(s, "main;work", HS_PROFILE_NO_SPAN)].values[0],
                     4 + 8 + 32);
    assert_int_equal(s->stacks[stack_index(s, "main", HS_PROFILE_NO_SPAN)].values[1], 640);
    assert_int_equal(s->funcs[func_index(s, "work", "m.go")].self[0], 63);
    assert_int_equal(s->totals[0], 127);
    hs_profile_free(p);
    pb_free(b);
}

/* Sparse ids (hashed addresses) take the hash-map path; results must be the same. */
static void test_sparse_ids(void **state)
{
    struct pb *b = pb_new();
    add_type(b, "cpu", "nanoseconds");
    add_func(b, 1ULL << 40, "main", "m.c");
    add_func(b, 0xdeadbeefcafeULL, "leaf", "m.c");
    add_loc(b, 0x7fff00001234ULL, 1, 1ULL << 40);
    add_loc(b, 0x7fff00009999ULL, 1, 0xdeadbeefcafeULL);
    Perftools__Profiles__Location *noline = add_loc(b, 0xffffffffffffffffULL, 0);
    noline->address = 0x4a3b2c;
    add_sample(b, (uint64_t[]){0x7fff00009999ULL, 0x7fff00001234ULL, 0}, (int64_t[]){5});
    add_sample(b, (uint64_t[]){0xffffffffffffffffULL, 0x7fff00001234ULL, 0}, (int64_t[]){6});
    struct hs_profile *p;
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    const struct hs_profile_summary *s = &p->summary;
    assert_int_equal(s->funcs[func_index(s, "leaf", "m.c")].self[0], 5);
    /* an unsymbolized location is one frame named by its address */
    assert_int_equal(s->funcs[func_index(s, "0x4a3b2c", "")].self[0], 6);
    assert_int_equal(s->funcs[func_index(s, "main", "m.c")].total[0], 11);
    hs_profile_free(p);
    pb_free(b);
}

static void test_main_type(void **state)
{
    struct pb *b = pb_new();
    add_type(b, "alloc_objects", "count");
    add_type(b, "alloc_space", "bytes");
    add_type(b, "inuse_objects", "count");
    add_type(b, "inuse_space", "bytes");
    struct hs_profile *p;
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    assert_int_equal(p->summary.main_type, 3); /* the last */
    assert_string_equal(hs_profile_label(p, "__name__"), "memory");
    assert_string_equal(p->summary.type_ids[1], "memory:alloc_space:bytes::");
    hs_profile_free(p);
    b->prof.default_sample_type = S(b, "alloc_space");
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    assert_int_equal(p->summary.main_type, 1);
    hs_profile_free(p);
    pb_free(b);
}

/* ---- labels and time --------------------------------------------------------------------- */

static void test_name_heuristic(void **state)
{
    static const struct {
        const char *types[3];
        const char *name;
    } cases[] = {
        {{"samples", "wall", "cpu"}, "wall"},
        {{"samples", "cpu"}, "process_cpu"},
        {{"samples", "itimer_cpu_time"}, "process_cpu"},
        {{"alloc_objects", "alloc_space"}, "memory"},
        {{"inuse_space"}, "memory"},
        {{"objects", "space"}, "memory"},
        {{"mutex_count", "mutex_duration"}, "mutex"},
        {{"block_count", "block_duration"}, "block"},
        {{"goroutine"}, "goroutines"},
        {{"goroutines"}, "goroutines"},
        {{"contentions", "delay"}, "mutex"}, /* Pyroscope's display names without a config */
        {{"alloc_space", "cpu"}, "memory"},  /* first matching type, in order */
        {{"foo", "bar"}, "bar"},             /* no match: the last type, as Pyroscope names it */
        {{"space_used"}, "space_used"},      /* "space" and "objects" must be whole */
        {{NULL}, "unknown"},
    };
    for (size_t i = 0; i < HS_ARRAY_SIZE(cases); i++) {
        struct pb *b = pb_new();
        for (size_t t = 0; t < 3 && cases[i].types[t]; t++)
            add_type(b, cases[i].types[t], "count");
        struct hs_profile *p;
        assert_int_equal(summarize_pb(b, &big, &p), 0);
        if (strcmp(hs_profile_label(p, "__name__"), cases[i].name) != 0)
            fail_msg("case %zu: __name__ %s, want %s", i, hs_profile_label(p, "__name__"),
                     cases[i].name);
        hs_profile_free(p);
        pb_free(b);
    }
}

static void test_labels_kept(void **state)
{
    struct pb *b = cpu_profile();
    struct hs_buf buf = {0};
    pb_pack(b, &buf);
    struct hs_profile *p = hs_profile_new();
    hs_profile_set_raw(p, buf.data, buf.len);
    hs_profile_set_label(p, "__name__", 8, "wall", 4);
    hs_profile_set_label(p, "service_name", 12, "checkout", 8);
    p->from_ns = 5;
    p->until_ns = 9;
    assert_int_equal(hs_profile_summarize(p, &big, err, sizeof(err)), 0);
    assert_string_equal(hs_profile_label(p, "__name__"), "wall");
    assert_string_equal(p->service, "checkout");
    assert_int_equal(p->nlabels, 2);
    /* Pyroscope's relabel rule: the cpu column of a wall profile is stored as process_cpu */
    assert_string_equal(p->summary.type_ids[0], "wall:samples:count:cpu:nanoseconds");
    assert_string_equal(p->summary.type_ids[1], "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_int_equal(p->from_ns, 5); /* a window from the request wins */
    assert_int_equal(p->until_ns, 9);
    hs_profile_free(p);
    hs_buf_free(&buf);
    pb_free(b);
}

/* One shape an SDK sends: sample types, period type, the upload's sample_type_config (NULL:
 * none) or a __name__ label (push), and what Pyroscope names it. */
struct shape {
    const char *what;
    const char *types[4][2];
    const char *period[2];
    const char *stc, *name_label;
    const char *name;
    const char *ids[4];
};

/* sample_type_config as grafana/pyroscope-go's session.go sends it */
#define GO_STC_MUTEX                                                                               \
    "{\"contentions\":{\"units\":\"lock_samples\",\"display-name\":\"mutex_count\"},"              \
    "\"delay\":{\"units\":\"lock_nanoseconds\",\"display-name\":\"mutex_duration\"}}"
#define GO_STC_BLOCK                                                                               \
    "{\"contentions\":{\"units\":\"lock_samples\",\"display-name\":\"block_count\"},"              \
    "\"delay\":{\"units\":\"lock_nanoseconds\",\"display-name\":\"block_duration\"}}"

static const struct shape shapes[] = {
    {"go cpu",
     {{"samples", "count"}, {"cpu", "nanoseconds"}},
     {"cpu", "nanoseconds"},
     NULL,
     NULL,
     "process_cpu",
     {"process_cpu:samples:count:cpu:nanoseconds", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"}},
    {"go heap",
     {{"alloc_objects", "count"},
      {"alloc_space", "bytes"},
      {"inuse_objects", "count"},
      {"inuse_space", "bytes"}},
     {"space", "bytes"},
     "{\"alloc_objects\":{\"units\":\"objects\"},\"alloc_space\":{\"units\":\"bytes\"},"
     "\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"},"
     "\"inuse_objects\":{\"units\":\"objects\",\"aggregation\":\"average\"}}",
     NULL,
     "memory",
     {"memory:alloc_objects:count:space:bytes", "memory:alloc_space:bytes:space:bytes",
      "memory:inuse_objects:count:space:bytes", "memory:inuse_space:bytes:space:bytes"}},
    {"go goroutines",
     {{"goroutine", "count"}},
     {"goroutine", "count"},
     "{\"goroutine\":{\"display-name\":\"goroutines\",\"units\":\"goroutines\","
     "\"aggregation\":\"average\"}}",
     NULL,
     "goroutines",
     {"goroutines:goroutine:count:goroutine:count"}},
    {"go mutex",
     {{"contentions", "count"}, {"delay", "nanoseconds"}},
     {"contentions", "count"},
     GO_STC_MUTEX,
     NULL,
     "mutex",
     {"mutex:contentions:count:contentions:count", "mutex:delay:nanoseconds:contentions:count"}},
    {"go block",
     {{"contentions", "count"}, {"delay", "nanoseconds"}},
     {"contentions", "count"},
     GO_STC_BLOCK,
     NULL,
     "block",
     {"block:contentions:count:contentions:count", "block:delay:nanoseconds:contentions:count"}},
    /* @pyroscope/nodejs 0.6.4, raw pprof: wall with collectCpuTime, and heap (whose period
     * type is its inuse_space column, renamed with it) */
    {"node wall",
     {{"samples", "count"}, {"wall", "nanoseconds"}, {"cpu", "nanoseconds"}},
     {"wall", "nanoseconds"},
     NULL,
     NULL,
     "wall",
     {"wall:samples:count:wall:nanoseconds", "wall:wall:nanoseconds:wall:nanoseconds",
      "process_cpu:cpu:nanoseconds:wall:nanoseconds"}},
    {"node heap",
     {{"inuse_objects", "count"}, {"inuse_space", "bytes"}},
     {"inuse_space", "bytes"},
     NULL,
     NULL,
     "memory",
     {"memory:inuse_objects:count:inuse_space:bytes",
      "memory:inuse_space:bytes:inuse_space:bytes"}},
    /* Alloy scraping godeltaprof pushes __name__=godeltaprof_memory: stored as memory */
    {"alloy godeltaprof",
     {{"alloc_objects", "count"}, {"alloc_space", "bytes"}},
     {"space", "bytes"},
     NULL,
     "godeltaprof_memory",
     "godeltaprof_memory",
     {"memory:alloc_objects:count:space:bytes", "memory:alloc_space:bytes:space:bytes"}},
};

static struct hs_profile *summarize_shape(const struct shape *sh)
{
    struct pb *b = pb_new();
    size_t nt = 0;
    for (; nt < 4 && sh->types[nt][0]; nt++)
        add_type(b, sh->types[nt][0], sh->types[nt][1]);
    b->prof.period_type = vt(b, sh->period[0], sh->period[1]);
    b->prof.period = 1;
    add_func(b, 1, "main.main", "main.go");
    add_loc(b, 1, 1, (uint64_t)1);
    add_sample(b, (uint64_t[]){1, 0}, (int64_t[]){1, 2, 3, 4});
    struct hs_buf buf = {0};
    pb_pack(b, &buf);
    struct hs_profile *p = hs_profile_new();
    assert_int_equal(hs_profile_set_raw(p, buf.data, buf.len), 0);
    if (sh->stc)
        p->sample_type_config = hs_profile_strdup(p, sh->stc, strlen(sh->stc));
    if (sh->name_label)
        hs_profile_set_label(p, "__name__", 8, sh->name_label, strlen(sh->name_label));
    if (hs_profile_summarize(p, &big, err, sizeof(err)) != 0)
        fail_msg("%s: %s", sh->what, err);
    hs_buf_free(&buf);
    pb_free(b);
    return p;
}

/* Every profile the Go and Node SDKs send is named and typed as Pyroscope stores it, and no
 * two types of one service share a series. */
static void test_sdk_types_named(void **state)
{
    struct hs_profile *ps[HS_ARRAY_SIZE(shapes)];
    for (size_t i = 0; i < HS_ARRAY_SIZE(shapes); i++) {
        const struct shape *sh = &shapes[i];
        struct hs_profile *p = ps[i] = summarize_shape(sh);
        if (strcmp(hs_profile_label(p, "__name__"), sh->name) != 0)
            fail_msg("%s: __name__ %s, want %s", sh->what, hs_profile_label(p, "__name__"),
                     sh->name);
        for (uint32_t t = 0; t < p->summary.ntypes; t++)
            if (strcmp(p->summary.type_ids[t], sh->ids[t]) != 0)
                fail_msg("%s: type %u is %s, want %s", sh->what, t, p->summary.type_ids[t],
                         sh->ids[t]);
    }
    /* one service sending all of them (but Alloy's repeat of the Go heap) */
    for (size_t i = 0; i + 1 < HS_ARRAY_SIZE(shapes); i++)
        for (size_t j = i + 1; j + 1 < HS_ARRAY_SIZE(shapes); j++)
            for (uint32_t a = 0; a < ps[i]->summary.ntypes; a++)
                for (uint32_t b = 0; b < ps[j]->summary.ntypes; b++)
                    if (strcmp(ps[i]->summary.type_ids[a], ps[j]->summary.type_ids[b]) == 0)
                        fail_msg("%s and %s share %s", shapes[i].what, shapes[j].what,
                                 ps[i]->summary.type_ids[a]);
    for (size_t i = 0; i < HS_ARRAY_SIZE(shapes); i++)
        hs_profile_free(ps[i]);
}

/* Pyroscope reads sample_type_config when there is one, and only then its defaults: a config
 * without display names leaves "contentions" as it is. */
static void test_sample_type_config_replaces_defaults(void **state)
{
    struct shape sh = shapes[3]; /* go mutex */
    sh.stc = "{\"contentions\":{\"units\":\"lock_samples\"},\"delay\":null}";
    struct hs_profile *p = summarize_shape(&sh);
    assert_string_equal(hs_profile_label(p, "__name__"), "delay"); /* the last, unmatched */
    hs_profile_free(p);
    sh.stc = NULL; /* the defaults: a Go block profile sent raw is "mutex" to Pyroscope too */
    p = summarize_shape(&sh);
    assert_string_equal(hs_profile_label(p, "__name__"), "mutex");
    hs_profile_free(p);
}

static void test_time_now_when_unset(void **state)
{
    struct pb *b = cpu_profile();
    b->prof.time_nanos = 0;
    b->prof.duration_nanos = 15000000000LL;
    struct hs_profile *p;
    int64_t before = (int64_t)hs_wall_ns();
    assert_int_equal(summarize_pb(b, &big, &p), 0);
    int64_t after = (int64_t)hs_wall_ns();
    assert_true(p->until_ns >= before && p->until_ns <= after);
    assert_int_equal(p->until_ns - p->from_ns, 15000000000LL);
    hs_profile_free(p);
    pb_free(b);
}

/* ---- errors ------------------------------------------------------------------------------ */

struct bad {
    const char *what;
    void (*mutate)(struct pb *b);
    int code;
    const char *msg;
};

static void m_empty_strings(struct pb *b)
{
    b->prof.n_string_table = 0;
    b->prof.n_sample = 0;
    b->prof.n_sample_type = 0;
    b->prof.n_function = 0;
    b->prof.n_location = 0;
    b->prof.period_type = NULL;
}
static void m_first_string(struct pb *b)
{
    b->strs[0] = "x";
}
static void m_func_name(struct pb *b)
{
    b->funcs[2]->name = 40;
}
static void m_func_file(struct pb *b)
{
    b->funcs[1]->filename = -1;
}
static void m_func_sysname(struct pb *b)
{
    b->funcs[0]->system_name = 99;
}
static void m_sample_loc(struct pb *b)
{
    b->samples[1]->location_id[1] = 99;
}
static void m_line_func(struct pb *b)
{
    b->locs[2]->line[0]->function_id = 77;
}
static void m_loc_id0(struct pb *b)
{
    b->locs[1]->id = 0;
}
static void m_loc_dup(struct pb *b)
{
    b->locs[2]->id = 7;
    b->locs[0]->id = 7;
}
static void m_func_dup(struct pb *b)
{
    b->funcs[2]->id = 2;
}
static void m_func_id0(struct pb *b)
{
    b->funcs[0]->id = 0;
}
static void m_map_dup(struct pb *b)
{
    for (int i = 0; i < 2; i++) {
        Perftools__Profiles__Mapping *m = hs_arena_alloc(b->a, sizeof(*m));
        perftools__profiles__mapping__init(m);
        m->id = 5;
        b->maps[b->prof.n_mapping++] = m;
    }
}
static void m_map_file(struct pb *b)
{
    Perftools__Profiles__Mapping *m = hs_arena_alloc(b->a, sizeof(*m));
    perftools__profiles__mapping__init(m);
    m->id = 1;
    m->build_id = 1000;
    b->maps[b->prof.n_mapping++] = m;
}
static void m_values(struct pb *b)
{
    b->samples[2]->n_value = 1;
}
static void m_no_types(struct pb *b)
{
    b->prof.n_sample_type = 0;
    for (size_t i = 0; i < b->prof.n_sample; i++)
        b->samples[i]->n_value = 0;
}
static void m_utf8(struct pb *b)
{
    b->strs[S(b, "main.foo")] = "main.\xc3\x28";
}
static void m_long_name(struct pb *b)
{
    /* 65 bytes, the 32nd and 33rd one character: the message shows 31, not half of it */
    b->strs[S(b, "main.foo")] = "main.foo.aaaaaaaaaaaaaaaaaaaaaa\xc3\xa9"
                                "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
}
static void m_label_key(struct pb *b)
{
    add_label(b, b->samples[0], "span_id", "x");
    b->samples[0]->label[0]->key = 500;
}
static void m_label_str(struct pb *b)
{
    add_label(b, b->samples[1], "k", "v");
    b->samples[1]->label[0]->str = 500;
}
static void m_period_type(struct pb *b)
{
    b->prof.period_type->unit = 31;
}
static void m_sample_type(struct pb *b)
{
    b->types[1]->type = 31;
}
static void m_comment(struct pb *b)
{
    static int64_t c[] = {1, 300};
    b->prof.comment = c;
    b->prof.n_comment = 2;
}
static void m_default_type(struct pb *b)
{
    b->prof.default_sample_type = 300;
}
static void m_drop_frames(struct pb *b)
{
    b->prof.drop_frames = 300;
}
static void m_samples_limit(struct pb *b)
{
    for (int i = 0; i < 3; i++)
        add_sample(b, (uint64_t[]){1, 0}, (int64_t[]){1, 1});
}
static void m_labels_limit(struct pb *b)
{
    for (int i = 0; i < 5; i++)
        add_label(b, b->samples[2], "k", "v");
}

static const struct hs_pprof_limits small = {.max_decompressed = 1 << 20,
                                             .max_samples = 5,
                                             .max_sample_labels = 4,
                                             .max_stack_depth = 100,
                                             .max_string_len = 64};

static const struct bad bads[] = {
    {"empty string table", m_empty_strings, HS_EINVAL, "string_table is empty"},
    {"string 0", m_first_string, HS_EINVAL, "string_table[0] must be \"\""},
    {"function name", m_func_name, HS_EINVAL,
     "function[2].name: string index 40 out of range (string_table has 10 entries)"},
    {"function file", m_func_file, HS_EINVAL, "function[1].filename: string index -1"},
    {"function system name", m_func_sysname, HS_EINVAL, "function[0].system_name"},
    {"sample location", m_sample_loc, HS_EINVAL,
     "sample[1].location_id[1]: location 99 does not exist"},
    {"line function", m_line_func, HS_EINVAL,
     "location[2].line[0].function_id: function 77 does not exist"},
    {"location id 0", m_loc_id0, HS_EINVAL, "location[1].id: id 0"},
    {"location dup", m_loc_dup, HS_EINVAL, "location id 7 is used twice"},
    {"function dup", m_func_dup, HS_EINVAL, "function id 2 is used twice"},
    {"function id 0", m_func_id0, HS_EINVAL, "function[0].id"},
    {"mapping dup", m_map_dup, HS_EINVAL, "mapping id 5 is used twice"},
    {"mapping build id", m_map_file, HS_EINVAL, "mapping[0].build_id: string index 1000"},
    {"value count", m_values, HS_EINVAL, "sample[2].value: 1 values, but 2 sample types"},
    {"no sample types", m_no_types, HS_EINVAL, "sample_type: missing"},
    {"utf-8", m_utf8, HS_EINVAL, "not valid UTF-8"},
    {"long name", m_long_name, HS_EINVAL,
     "string_table[7]: 65 bytes (\"main.foo.aaaaaaaaaaaaaaaaaaaaaa...\"), more than "
     "max_string_length (64)"},
    {"label key", m_label_key, HS_EINVAL, "sample[0].label[0].key: string index 500"},
    {"label str", m_label_str, HS_EINVAL, "sample[1].label[0].str"},
    {"period type", m_period_type, HS_EINVAL, "period_type.unit: string index 31"},
    {"sample type", m_sample_type, HS_EINVAL, "sample_type[1].type"},
    {"comment", m_comment, HS_EINVAL, "comment[1]: string index 300"},
    {"default sample type", m_default_type, HS_EINVAL, "default_sample_type"},
    {"drop frames", m_drop_frames, HS_EINVAL, "drop_frames"},
    {"max samples", m_samples_limit, HS_E2BIG, "6 samples exceed max_samples (5)"},
    {"max labels", m_labels_limit, HS_E2BIG, "sample[2].label: 5 labels exceed max_sample_labels"},
};

static void test_invalid_profiles(void **state)
{
    for (size_t i = 0; i < HS_ARRAY_SIZE(bads); i++) {
        struct pb *b = cpu_profile();
        bads[i].mutate(b);
        struct hs_profile *p;
        int rc = summarize_pb(b, &small, &p);
        if (rc != bads[i].code || !strstr(err, bads[i].msg))
            fail_msg("%s: got %s \"%s\", want %s containing \"%s\"", bads[i].what, hs_err_name(rc),
                     err, hs_err_name(bads[i].code), bads[i].msg);
        assert_int_equal(p->summary.nfuncs, 0); /* nothing half-built is left */
        assert_null(p->summary.funcs);
        hs_profile_free(p);
        pb_free(b);
    }
}

static void test_not_pprof(void **state)
{
    static const char junk[] = "this is not a protobuf at all \xff\xff\xff";
    struct hs_profile *p;
    assert_int_equal(summarize_bytes(junk, sizeof(junk), &big, &p), HS_EINVAL);
    assert_non_null(strstr(err, "not a pprof profile: "));
    hs_profile_free(p);
    /* valid protobuf of something else: an empty message decodes, then fails the checks */
    assert_int_equal(summarize_bytes("", 0, &big, &p), HS_EINVAL);
    assert_non_null(strstr(err, "string_table"));
    hs_profile_free(p);
}

static void test_gzip_errors_and_limits(void **state)
{
    struct pb *b = cpu_profile();
    struct hs_buf raw = {0}, gz = {0};
    pb_pack(b, &raw);
    assert_int_equal(hs_gzip(raw.data, raw.len, 6, &gz), 0);
    struct hs_profile *p;
    /* truncated gzip */
    assert_int_equal(summarize_bytes(gz.data, gz.len - 5, &big, &p), HS_EINVAL);
    assert_non_null(strstr(err, "gzip"));
    assert_non_null(strstr(err, "truncated"));
    hs_profile_free(p);
    /* the limit sits exactly at the pprof's size: ok; one byte less: E2BIG naming the limit */
    struct hs_pprof_limits lim = big;
    lim.max_decompressed = raw.len;
    assert_int_equal(summarize_bytes(gz.data, gz.len, &lim, &p), 0);
    hs_profile_free(p);
    lim.max_decompressed = raw.len - 1;
    assert_int_equal(summarize_bytes(gz.data, gz.len, &lim, &p), HS_E2BIG);
    char want[96];
    snprintf(want, sizeof(want), "decompressed profile exceeds max_decompressed_size (%zu bytes)",
             raw.len - 1);
    assert_string_equal(err, want);
    hs_profile_free(p);
    /* uncompressed input counts against the same limit */
    assert_int_equal(summarize_bytes(raw.data, raw.len, &lim, &p), HS_E2BIG);
    assert_non_null(strstr(err, "max_decompressed_size"));
    hs_profile_free(p);
    /* a bomb: 32 MiB of zeros stops at a 64 KiB limit */
    size_t n = 32u << 20;
    uint8_t *zeros = calloc(1, n);
    assert_int_equal(hs_gzip(zeros, n, 9, &gz), 0);
    free(zeros);
    lim.max_decompressed = 65536;
    assert_int_equal(summarize_bytes(gz.data, gz.len, &lim, &p), HS_E2BIG);
    assert_non_null(strstr(err, "(65536 bytes)"));
    hs_profile_free(p);
    hs_buf_free(&raw);
    hs_buf_free(&gz);
    pb_free(b);
}

/* A truncated plain pprof fails to decode; every cut must be refused or summarize cleanly. */
static void test_truncations(void **state)
{
    struct pb *b = cpu_profile();
    struct hs_buf raw = {0};
    pb_pack(b, &raw);
    for (size_t cut = 0; cut < raw.len; cut++) {
        struct hs_profile *p;
        int rc = summarize_bytes(raw.data, cut, &big, &p);
        assert_true(rc == 0 || rc == HS_EINVAL);
        hs_profile_free(p);
    }
    hs_buf_free(&raw);
    pb_free(b);
}

/* ---- folded ------------------------------------------------------------------------------ */

static const struct hs_pprof_limits folded_lim = {.max_samples = 100, .max_string_len = 64};

static struct hs_profile *summarize_folded(const char *text, const char *type, const char *unit,
                                           int64_t period)
{
    struct hs_buf out = {0};
    assert_int_equal(hs_pprof_from_folded(text, strlen(text), type, unit, period, &folded_lim, &out,
                                          err, sizeof(err)),
                     0);
    struct hs_profile *p;
    assert_int_equal(summarize_bytes(out.data, out.len, &big, &p), 0);
    hs_buf_free(&out);
    return p;
}

static void test_folded_roundtrip(void **state)
{
    const char *text = "main;foo;bar 100\r\n"
                       "\n"
                       "main;foo 50\n"
                       "\r\n"
                       "main;foo;bar 25\n"
                       "main;fib;fib;fib 3\n"
                       "main;my func with spaces 7"; /* no trailing newline */
    struct hs_profile *p = summarize_folded(text, "cpu", "nanoseconds", 10000000);
    const struct hs_profile_summary *s = &p->summary;
    assert_int_equal(s->ntypes, 1);
    assert_string_equal(s->types[0], "cpu");
    assert_string_equal(s->units[0], "nanoseconds");
    assert_string_equal(s->period_type, "cpu");
    assert_string_equal(s->period_unit, "nanoseconds");
    assert_int_equal(s->period, 10000000);
    assert_int_equal(s->samples, 5);
    assert_int_equal(s->nfuncs, 5);
    int64_t P = 10000000;
    assert_int_equal(s->funcs[func_index(s, "bar", "")].self[0], 125 * P);
    assert_int_equal(s->funcs[func_index(s, "foo", "")].self[0], 50 * P);
    assert_int_equal(s->funcs[func_index(s, "foo", "")].total[0], 175 * P);
    assert_int_equal(s->funcs[func_index(s, "fib", "")].total[0], 3 * P);
    assert_int_equal(s->funcs[func_index(s, "main", "")].total[0], 185 * P);
    assert_int_equal(s->funcs[func_index(s, "my func with spaces", "")].self[0], 7 * P);
    assert_int_equal(s->stacks[stack_index(s, "main;foo;bar", HS_PROFILE_NO_SPAN)].values[0],
                     125 * P);
    assert_int_equal(s->stacks[stack_index(s, "main;fib;fib;fib", HS_PROFILE_NO_SPAN)].values[0],
                     3 * P);
    assert_string_equal(hs_profile_label(p, "__name__"), "process_cpu");
    assert_string_equal(s->type_ids[0], "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    hs_profile_free(p);

    /* wall time too is periodic in cpu nanoseconds, as Pyroscope's ingest adapter writes it */
    p = summarize_folded("a;b 3\n", "wall", "nanoseconds", 10000000);
    assert_string_equal(p->summary.type_ids[0], "wall:wall:nanoseconds:cpu:nanoseconds");
    hs_profile_free(p);

    /* period 0: values are the counts, no period type */
    p = summarize_folded("a;b 3\na;b 4\n", "samples", "count", 0);
    s = &p->summary;
    assert_int_equal(s->period, 0);
    assert_string_equal(s->period_type, "");
    assert_int_equal(s->nstacks, 1);
    assert_int_equal(s->stacks[0].values[0], 7);
    assert_int_equal(s->funcs[func_index(s, "b", "")].self[0], 7);
    hs_profile_free(p);
}

static void expect_folded(const char *t, int64_t period, uint32_t max_samples, int rc,
                          const char *msg)
{
    struct hs_buf out = {0};
    const struct hs_pprof_limits lim = {.max_samples = max_samples, .max_string_len = 64};
    assert_int_equal(
        hs_pprof_from_folded(t, strlen(t), "cpu", "ns", period, &lim, &out, err, sizeof(err)), rc);
    if (!strstr(err, msg))
        fail_msg("\"%s\": got \"%s\", want \"%s\"", t, err, msg);
    assert_int_equal(out.len, 0); /* nothing written on failure */
    hs_buf_free(&out);
}

static void test_folded_errors(void **state)
{
    expect_folded("a;b 1\nc 2\na;b x3\n", 1, 10, HS_EINVAL,
                  "line 3: the count after the last space is not an integer");
    expect_folded("a 1\n\nb 2.5\n", 0, 10, HS_EINVAL, "line 3: the count");
    expect_folded("a 1\nb 2\nc 3\n", 0, 2, HS_E2BIG,
                  "folded profile has 3 stacks, more than max_samples (2)");
    expect_folded("a 99999999999999999\n", 1000000000, 2, HS_EINVAL,
                  "line 1: count x period does not fit in 64 bits");
    expect_folded("a;\xff 1\n", 0, 2, HS_EINVAL, "line 1: not valid UTF-8");
    /* what Pyroscope would take: a negative count, a line without one (it skips those) */
    expect_folded("a;b 1\na;c -5\n", 0, 10, HS_EINVAL,
                  "line 2: count -5 is negative (a count of samples cannot be)");
    expect_folded("a;b 1\n\na;b\n", 0, 10, HS_EINVAL,
                  "line 3: no count (a folded line is \"frame;frame count\")");
    /* a frame past max_string_length (64 here): 65 bytes */
    expect_folded("a;bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb;c 1\n", 0,
                  10, HS_EINVAL,
                  "line 1: frame 2 is 65 bytes long, more than max_string_length (64)");

    /* the edges that pass: 64 bytes, a count of 0, a final line without a newline, "+1" */
    struct hs_buf out = {0};
    const char *ok = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb 0\na +1";
    assert_int_equal(
        hs_pprof_from_folded(ok, strlen(ok), "cpu", "ns", 0, &folded_lim, &out, err, sizeof(err)),
        0);
    hs_buf_reset(&out);
    /* empty text: a valid, empty profile */
    assert_int_equal(
        hs_pprof_from_folded("", 0, "cpu", "ns", 0, &folded_lim, &out, err, sizeof(err)), 0);
    struct hs_profile *p;
    assert_int_equal(summarize_bytes(out.data, out.len, &big, &p), 0);
    assert_int_equal(p->summary.samples, 0);
    assert_int_equal(p->summary.ntypes, 1);
    hs_profile_free(p);
    hs_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_plain),
        cmocka_unit_test(test_summary_gzip),
        cmocka_unit_test(test_recursion_counts_once),
        cmocka_unit_test(test_inlined_lines_expand),
        cmocka_unit_test(test_functions_dedup_by_name_and_file),
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_sparse_ids),
        cmocka_unit_test(test_main_type),
        cmocka_unit_test(test_name_heuristic),
        cmocka_unit_test(test_labels_kept),
        cmocka_unit_test(test_sdk_types_named),
        cmocka_unit_test(test_sample_type_config_replaces_defaults),
        cmocka_unit_test(test_time_now_when_unset),
        cmocka_unit_test(test_invalid_profiles),
        cmocka_unit_test(test_not_pprof),
        cmocka_unit_test(test_gzip_errors_and_limits),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_folded_roundtrip),
        cmocka_unit_test(test_folded_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
