/* test_otlp_profiles.c: OTLP profiles in: requests built here with protobuf-c (and a fixture
 * protobufjs wrote), decoded into batch items whose labels, times and summaries are checked
 * number by number; every bad reference named by its field; the limits; JSON against protobuf;
 * the conversion to pprof checked by its own bytes, by hs_profile_summarize and by go tool pprof.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/compress.h"
#include "core/errors.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "pdata/otlp_profiles.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "perftools/profiles/profile.pb-c.h"
#include "tests/unit/otlp_profiles_build.h"

#define T0 1700000000000000000ULL /* ns */
#define MS 1000000LL

static char err[512];

/* ---- the main request ------------------------------------------------------------------------ */

/* Two resources; the first has a cpu profile (links, an attribute, an inlined frame in a mapping
 * with a build id) and an allocation profile (timestamps instead of values); the second has no
 * service.name and an off-cpu profile whose samples name two services. */
struct main_req {
    struct ob *b;
    OProf *cpu, *alloc, *offcpu;
    int32_t s1, s2, s3, s4, l1, l2, thread, svc_a, svc_b;
};

static void build_main(struct main_req *m)
{
    struct ob *b = m->b = ob_new();
    ORes *r0 = ob_resource(b, ob_kv(b, "service.name", ob_any_str(b, "checkout")),
                           ob_kv(b, "service.namespace", ob_any_str(b, "shop")),
                           ob_kv(b, "host.cpu.count", ob_any_int(b, 8)),
                           ob_kv(b, "bad-name", ob_any_str(b, "x")),
                           ob_kv(b, "empty", ob_any_str(b, "")), NULL);
    OScope *sc0 = ob_scope(b, r0, "ebpf");
    sc0->scope->attributes[sc0->scope->n_attributes++] =
        ob_kv(b, "scope.attr", ob_any_str(b, "s1"));
    sc0->scope->attributes[sc0->scope->n_attributes++] =
        ob_kv(b, "service.namespace", ob_any_str(b, "other"));
    m->s1 = ob_stack(b, "main;handle;db.query");
    m->s2 = ob_stack(b, "main;handle;render");
    m->s3 = ob_stack(b, "main;gc");
    int32_t map = ob_mapping(b, "/usr/bin/app");
    b->maps[map]->attribute_indices = ob_zalloc(b, sizeof(int32_t));
    b->maps[map]->attribute_indices[0] = ob_attr(b, "process.executable.build_id.gnu", "abc123");
    b->maps[map]->n_attribute_indices = 1;
    static const char *const inl[] = {"inner", "outer"}; /* inner inlined into outer */
    int32_t leaf_first[] = {ob_loc_lines(b, map, 2, inl), ob_loc(b, "main")};
    m->s4 = ob_stack_idx(b, 2, leaf_first);
    m->l1 = ob_link(b, 0x10);
    m->l2 = ob_link(b, 0x20);
    m->thread = ob_attr(b, "thread.name", "worker-1");

    m->cpu = ob_profile(b, sc0, "samples", "count", "cpu", "nanoseconds", 10 * MS, T0, 10000 * MS);
    ob_sample(b, m->cpu, m->s1, 3, m->l1, m->thread, -1);
    ob_sample(b, m->cpu, m->s2, 2, m->l2, -1);
    ob_sample(b, m->cpu, m->s3, 1, 0, -1);
    ob_sample(b, m->cpu, m->s1, 4, m->l1, -1);
    ob_sample(b, m->cpu, m->s4, 1, 0, -1);

    OScope *sc1 = ob_scope(b, r0, "alloc");
    m->alloc =
        ob_profile(b, sc1, "alloc_space", "bytes", "space", "bytes", 524288, T0 + 1000 * MS, 0);
    OSample *ts = ob_sample(b, m->alloc, m->s3, 0, 0, -1);
    ts->n_values = 0; /* three timestamps: 3 */
    ts->n_timestamps_unix_nano = 3;
    ts->timestamps_unix_nano = ob_zalloc(b, 3 * sizeof(uint64_t));
    OSample *pv = ob_sample(b, m->alloc, m->s1, 5, 0, -1);
    pv->n_values = 2; /* one value per timestamp: 5 + 6 */
    pv->values = ob_zalloc(b, 2 * sizeof(int64_t));
    pv->values[0] = 5, pv->values[1] = 6;
    pv->n_timestamps_unix_nano = 2;
    pv->timestamps_unix_nano = ob_zalloc(b, 2 * sizeof(uint64_t));

    ORes *r1 = ob_resource(b, ob_kv(b, "process.executable.name", ob_any_str(b, "cart-bin")), NULL);
    OScope *sc2 = ob_scope(b, r1, "offcpu");
    m->svc_a = ob_attr(b, "service.name", "svc-a");
    m->svc_b = ob_attr(b, "service.name", "svc-b");
    m->offcpu = ob_profile(b, sc2, "off_cpu", "nanoseconds", NULL, NULL, 0, T0, 10000 * MS);
    ob_sample(b, m->offcpu, m->s1, 100, 0, m->svc_a, -1);
    ob_sample(b, m->offcpu, m->s2, 50, m->l1, m->svc_b, m->thread, -1);
    ob_sample(b, m->offcpu, m->s3, 25, 0, -1);
    ob_sample(b, m->offcpu, m->s2, 5, 0, m->thread, m->svc_a, -1);
}

static int decode_ob(struct ob *b, const struct hs_otlp_profiles_limits *lim,
                     struct hs_profiles **out)
{
    struct hs_buf buf = {0};
    ob_pack(b, &buf);
    struct hs_profiles *batch = hs_profiles_new("t1");
    memset(err, 0, sizeof(err));
    int rc = hs_otlp_profiles_decode(batch, buf.data, buf.len, lim, err, sizeof(err));
    if (rc == 0) {
        assert_string_equal(err, "");
        assert_int_equal(batch->request_len, buf.len); /* the bytes, kept as they came */
        assert_memory_equal(batch->request, buf.data, buf.len);
    } else {
        assert_true(err[0] != '\0');
        assert_int_equal(batch->count, 0);
        assert_null(batch->request);
    }
    hs_buf_free(&buf);
    *out = batch;
    return rc;
}

static uint32_t func_index(const struct hs_profile_summary *s, const char *name)
{
    for (uint32_t i = 0; i < s->nfuncs; i++)
        if (strcmp(s->funcs[i].name, name) == 0)
            return i;
    fail_msg("function %s not in the summary", name);
    return 0;
}

static void expect_func(const struct hs_profile_summary *s, const char *name, int64_t self,
                        int64_t total)
{
    uint32_t f = func_index(s, name);
    char file[64];
    snprintf(file, sizeof(file), "%s.go", name);
    assert_string_equal(s->funcs[f].file, file);
    assert_int_equal(s->funcs[f].self[0], self);
    assert_int_equal(s->funcs[f].total[0], total);
}

/* The value of the stack "a;b;c" (root first) carrying span `span` (NULL: none). */
static int64_t stack_value(const struct hs_profile_summary *s, const char *folded,
                           const uint8_t *span)
{
    for (uint32_t i = 0; i < s->nstacks; i++) {
        char buf[256] = "";
        for (uint32_t d = 0; d < s->stacks[i].depth; d++)
            snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", d ? ";" : "",
                     s->funcs[s->stacks[i].funcs[d]].name);
        bool span_ok = span ? s->stacks[i].span != HS_PROFILE_NO_SPAN &&
                                  memcmp(s->spans[s->stacks[i].span].id, span, 8) == 0
                            : s->stacks[i].span == HS_PROFILE_NO_SPAN;
        if (strcmp(buf, folded) == 0 && span_ok)
            return s->stacks[i].values[0];
    }
    fail_msg("stack %s not in the summary", folded);
    return 0;
}

static int64_t span_value(const struct hs_profile_summary *s, uint8_t seed)
{
    uint8_t id[8];
    for (int i = 0; i < 8; i++)
        id[i] = (uint8_t)(seed + i);
    for (uint32_t i = 0; i < s->nspans; i++)
        if (memcmp(s->spans[i].id, id, 8) == 0)
            return s->spans[i].values[0];
    fail_msg("span %02x... not in the summary", seed);
    return 0;
}

static void test_main_request(void **state)
{
    (void)state;
    struct main_req m;
    build_main(&m);
    struct hs_profiles *b;
    assert_int_equal(decode_ob(m.b, NULL, &b), 0);
    assert_int_equal(b->format, HS_PROFILES_OTLP);
    assert_int_equal(b->request_profiles, 3);
    assert_int_equal(b->count, 5); /* cpu, alloc, and off-cpu split in three services */
    assert_int_equal(b->bytes, b->request_len);

    /* cpu: samples/count every 10 ms of cpu -> cpu nanoseconds, process_cpu */
    struct hs_profile *p = b->items[0];
    const struct hs_profile_summary *s = &p->summary;
    assert_null(p->raw); /* pprof only when asked */
    assert_int_equal(p->otlp_index, 0);
    assert_string_equal(p->service, "checkout");
    assert_string_equal(hs_profile_label(p, "service_name"), "checkout");
    assert_string_equal(hs_profile_label(p, "__name__"), "process_cpu");
    assert_string_equal(hs_profile_label(p, "__delta__"), "false");
    assert_string_equal(hs_profile_label(p, "__otel__"), "true");
    assert_string_equal(hs_profile_label(p, "service_namespace"), "shop"); /* resource first */
    assert_string_equal(hs_profile_label(p, "host_cpu_count"), "8");
    assert_string_equal(hs_profile_label(p, "scope_attr"), "s1");
    assert_null(hs_profile_label(p, "bad-name"));
    assert_null(hs_profile_label(p, "bad_name"));
    assert_null(hs_profile_label(p, "empty"));
    assert_null(hs_profile_label(p, "service.name"));
    assert_int_equal(p->nlabels, 7);
    assert_int_equal(s->ntypes, 1);
    assert_string_equal(s->types[0], "cpu");
    assert_string_equal(s->units[0], "nanoseconds");
    assert_string_equal(s->type_ids[0], "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_string_equal(s->period_type, "cpu");
    assert_int_equal(s->period, 10 * MS);
    assert_int_equal(s->samples, 5);
    assert_int_equal(s->totals[0], 110 * MS);
    assert_int_equal(p->from_ns, (int64_t)T0);
    assert_int_equal(p->until_ns, (int64_t)T0 + 10000 * MS);
    expect_func(s, "main", 0, 110 * MS);
    expect_func(s, "handle", 0, 90 * MS);
    expect_func(s, "db.query", 70 * MS, 70 * MS);
    expect_func(s, "render", 20 * MS, 20 * MS);
    expect_func(s, "gc", 10 * MS, 10 * MS);
    expect_func(s, "outer", 0, 10 * MS);
    expect_func(s, "inner", 10 * MS, 10 * MS);
    assert_int_equal(s->nfuncs, 7);
    assert_int_equal(s->nspans, 2);
    assert_int_equal(span_value(s, 0x10), 70 * MS);
    assert_int_equal(span_value(s, 0x20), 20 * MS);
    const uint8_t span1[8] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17};
    assert_int_equal(s->nstacks, 4);
    assert_int_equal(stack_value(s, "main;handle;db.query", span1), 70 * MS);
    assert_int_equal(stack_value(s, "main;gc", NULL), 10 * MS);
    assert_int_equal(stack_value(s, "main;outer;inner", NULL), 10 * MS);

    /* alloc: timestamps count 1 each, per-timestamp values add up; named after the period type */
    p = b->items[1];
    s = &p->summary;
    assert_int_equal(p->otlp_index, 1);
    assert_string_equal(hs_profile_label(p, "__name__"), "space");
    assert_string_equal(s->type_ids[0], "space:alloc_space:bytes:space:bytes");
    assert_int_equal(s->totals[0], 14);
    assert_int_equal(stack_value(s, "main;gc", NULL), 3);
    assert_int_equal(stack_value(s, "main;handle;db.query", NULL), 11);
    assert_int_equal(p->from_ns, (int64_t)T0 + 1000 * MS);
    assert_int_equal(p->until_ns, (int64_t)T0 + 11000 * MS); /* no duration: 10 s */

    /* off-cpu: one item per sample service.name, the rest under the resource's service */
    static const char *const svc[] = {"svc-a", "svc-b", "unknown_service:cart-bin"};
    static const int64_t totals[] = {105, 50, 25};
    for (int i = 0; i < 3; i++) {
        p = b->items[2 + i];
        assert_int_equal(p->otlp_index, 2);
        assert_string_equal(p->service, svc[i]);
        assert_string_equal(hs_profile_label(p, "service_name"), svc[i]);
        assert_string_equal(hs_profile_label(p, "__name__"), "off_cpu");
        assert_string_equal(hs_profile_label(p, "process_executable_name"), "cart-bin");
        assert_int_equal(p->summary.totals[0], totals[i]);
        assert_string_equal(p->summary.type_ids[0], "off_cpu:off_cpu:nanoseconds::");
    }
    assert_int_equal(b->items[2]->summary.samples, 2);
    assert_int_equal(b->items[3]->summary.nspans, 1);
    assert_int_equal(span_value(&b->items[3]->summary, 0x10), 50);
    hs_profiles_unref(b);
    ob_free(m.b);
}

/* ---- the pprof they convert to --------------------------------------------------------------- */

static Perftools__Profiles__Profile *unpack_pprof(const struct hs_profile *p, struct hs_buf *plain)
{
    const char *msg = NULL;
    plain->len = 0;
    assert_int_equal(hs_gunzip(p->raw, p->raw_len, 64u << 20, plain, &msg), 0);
    Perftools__Profiles__Profile *pb =
        perftools__profiles__profile__unpack(NULL, plain->len, plain->data);
    assert_non_null(pb);
    return pb;
}

static const char *label_of(const Perftools__Profiles__Profile *pb,
                            const Perftools__Profiles__Sample *s, const char *key)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (strcmp(pb->string_table[s->label[i]->key], key) == 0)
            return pb->string_table[s->label[i]->str];
    return NULL;
}

static void test_pprof_shape(void **state)
{
    (void)state;
    struct main_req m;
    build_main(&m);
    struct hs_profiles *b;
    assert_int_equal(decode_ob(m.b, NULL, &b), 0);
    size_t before = b->bytes;
    assert_int_equal(hs_profiles_to_pprof(b, err, sizeof(err)), 0);
    size_t sum = 0;
    for (uint32_t i = 0; i < b->count; i++) {
        assert_non_null(b->items[i]->raw);
        assert_int_equal(b->items[i]->raw[0], 0x1f); /* gzipped */
        sum += b->items[i]->raw_len;
    }
    assert_int_equal(b->bytes, before + sum);
    const uint8_t *raw0 = b->items[0]->raw;
    assert_int_equal(hs_profiles_to_pprof(b, err, sizeof(err)), 0); /* once */
    assert_ptr_equal(b->items[0]->raw, raw0);
    assert_int_equal(b->bytes, before + sum);

    struct hs_buf plain = {0};
    Perftools__Profiles__Profile *pb = unpack_pprof(b->items[0], &plain);
    const char *const *st = (const char *const *)pb->string_table;
    assert_int_equal(pb->n_sample_type, 1);
    assert_string_equal(st[pb->sample_type[0]->type], "cpu");
    assert_string_equal(st[pb->sample_type[0]->unit], "nanoseconds");
    assert_string_equal(st[pb->period_type->type], "cpu");
    assert_int_equal(pb->period, 10 * MS);
    assert_int_equal(pb->time_nanos, (int64_t)T0);
    assert_int_equal(pb->duration_nanos, 10000 * MS);
    assert_int_equal(pb->n_sample, 5);
    assert_int_equal(pb->sample[0]->value[0], 30 * MS);
    assert_string_equal(label_of(pb, pb->sample[0], "thread.name"), "worker-1");
    assert_string_equal(label_of(pb, pb->sample[0], "span_id"), "1011121314151617");
    assert_string_equal(label_of(pb, pb->sample[0], "trace_id"),
                        "505152535455565758595a5b5c5d5e5f");
    assert_string_equal(label_of(pb, pb->sample[1], "span_id"), "2021222324252627");
    assert_int_equal(pb->sample[2]->n_label, 0);
    assert_int_equal(pb->sample[0]->n_location_id, 3);
    /* only what the samples use: 7 functions, 6 locations, the one mapping */
    assert_int_equal(pb->n_function, 7);
    assert_int_equal(pb->n_location, 6);
    assert_int_equal(pb->n_mapping, 1);
    assert_string_equal(st[pb->mapping[0]->filename], "/usr/bin/app");
    assert_string_equal(st[pb->mapping[0]->build_id], "abc123");
    assert_true(pb->mapping[0]->has_inline_frames);
    assert_true(pb->mapping[0]->has_functions);
    const Perftools__Profiles__Location *inl = pb->location[pb->sample[4]->location_id[0] - 1];
    assert_int_equal(inl->n_line, 2);
    assert_int_equal(inl->mapping_id, pb->mapping[0]->id);
    assert_string_equal(st[pb->function[inl->line[0]->function_id - 1]->name], "inner");
    perftools__profiles__profile__free_unpacked(pb, NULL);

    /* a sample's service.name attribute splits, and never becomes a label */
    pb = unpack_pprof(b->items[2], &plain);
    assert_int_equal(pb->n_sample, 2);
    assert_null(label_of(pb, pb->sample[1], "service.name"));
    assert_string_equal(label_of(pb, pb->sample[1], "thread.name"), "worker-1");
    assert_int_equal(pb->sample[0]->value[0] + pb->sample[1]->value[0], 105);
    assert_null(pb->period_type);
    perftools__profiles__profile__free_unpacked(pb, NULL);
    hs_buf_free(&plain);
    hs_profiles_unref(b);
    ob_free(m.b);
}

static void summaries_equal(const struct hs_profile_summary *a, const struct hs_profile_summary *b)
{
    assert_int_equal(a->ntypes, b->ntypes);
    for (uint32_t t = 0; t < a->ntypes; t++) {
        assert_string_equal(a->types[t], b->types[t]);
        assert_string_equal(a->units[t], b->units[t]);
        assert_string_equal(a->type_ids[t], b->type_ids[t]);
        assert_int_equal(a->totals[t], b->totals[t]);
    }
    assert_string_equal(a->period_type, b->period_type);
    assert_string_equal(a->period_unit, b->period_unit);
    assert_int_equal(a->period, b->period);
    assert_int_equal(a->main_type, b->main_type);
    assert_int_equal(a->time_nanos, b->time_nanos);
    assert_int_equal(a->duration_nanos, b->duration_nanos);
    assert_int_equal(a->samples, b->samples);
    assert_int_equal(a->nfuncs, b->nfuncs);
    for (uint32_t f = 0; f < a->nfuncs; f++) {
        assert_string_equal(a->funcs[f].name, b->funcs[f].name);
        assert_string_equal(a->funcs[f].file, b->funcs[f].file);
        assert_memory_equal(a->funcs[f].self, b->funcs[f].self, a->ntypes * sizeof(int64_t));
        assert_memory_equal(a->funcs[f].total, b->funcs[f].total, a->ntypes * sizeof(int64_t));
    }
    assert_int_equal(a->nstacks, b->nstacks);
    for (uint32_t i = 0; i < a->nstacks; i++) {
        assert_int_equal(a->stacks[i].depth, b->stacks[i].depth);
        assert_int_equal(a->stacks[i].span, b->stacks[i].span);
        assert_memory_equal(a->stacks[i].funcs, b->stacks[i].funcs,
                            a->stacks[i].depth * sizeof(uint32_t));
        assert_memory_equal(a->stacks[i].values, b->stacks[i].values, a->ntypes * sizeof(int64_t));
    }
    assert_int_equal(a->nspans, b->nspans);
    for (uint32_t i = 0; i < a->nspans; i++) {
        assert_memory_equal(a->spans[i].id, b->spans[i].id, 8);
        assert_memory_equal(a->spans[i].values, b->spans[i].values, a->ntypes * sizeof(int64_t));
    }
}

/* The summary an item has is the one hs_profile_summarize makes of its converted pprof. */
static void round_trip(struct hs_profiles *b)
{
    assert_int_equal(hs_profiles_to_pprof(b, err, sizeof(err)), 0);
    for (uint32_t i = 0; i < b->count; i++) {
        const struct hs_profile *p = b->items[i];
        struct hs_profile *q = hs_profile_new();
        assert_int_equal(hs_profile_set_raw(q, p->raw, p->raw_len), 0);
        const char *name = hs_profile_label(p, "__name__");
        assert_int_equal(hs_profile_set_label(q, "__name__", 8, name, strlen(name)), 0);
        assert_int_equal(hs_profile_summarize(q, NULL, err, sizeof(err)), 0);
        summaries_equal(&p->summary, &q->summary);
        assert_int_equal(q->from_ns, p->from_ns);
        assert_int_equal(q->until_ns, p->until_ns);
        hs_profile_free(q);
    }
}

static void test_pprof_round_trip(void **state)
{
    (void)state;
    struct main_req m;
    build_main(&m);
    struct hs_profiles *b;
    assert_int_equal(decode_ob(m.b, NULL, &b), 0);
    round_trip(b);
    hs_profiles_unref(b);

    /* a profile without a time: now, the same now in its summary and in its pprof */
    m.cpu->time_unix_nano = 0;
    assert_int_equal(decode_ob(m.b, NULL, &b), 0);
    assert_true(b->items[0]->from_ns > (int64_t)T0);
    round_trip(b);
    hs_profiles_unref(b);
    ob_free(m.b);
}

/* ---- go tool pprof reads the conversion ---------------------------------------------------------
 */

static const char *go_binary(void)
{
    static const char *const paths[] = {"/usr/bin/go", "/usr/lib/go/bin/go",
                                        "/usr/local/go/bin/go"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

static void test_go_tool_pprof(void **state)
{
    (void)state;
    const char *go = go_binary();
    if (!go) {
        print_message("go not installed (Debian golang-go): go tool pprof not run\n");
        skip();
    }
    struct main_req m;
    build_main(&m);
    struct hs_profiles *b;
    assert_int_equal(decode_ob(m.b, NULL, &b), 0);
    assert_int_equal(hs_profiles_to_pprof(b, err, sizeof(err)), 0);
    char dir[] = "/tmp/hs-otlp-pprof-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[128], cmd[1024];
    snprintf(file, sizeof(file), "%s/cpu.pb.gz", dir);
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b->items[0]->raw, 1, b->items[0]->raw_len, f), b->items[0]->raw_len);
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "HOME=%s GOCACHE=%s/cache GOFLAGS= PPROF_TMPDIR=%s %s tool pprof -raw "
             "-symbolize=none %s 2>&1",
             dir, dir, dir, go, file);
    FILE *out = popen(cmd, "r");
    assert_non_null(out);
    char line[512];
    int64_t total = 0;
    bool in_samples = false, span = false, trace = false, type = false;
    while (fgets(line, sizeof(line), out)) {
        if (strncmp(line, "Samples:", 8) == 0)
            in_samples = true;
        else if (strncmp(line, "Locations", 9) == 0)
            in_samples = false;
        type |= strstr(line, "cpu/nanoseconds") != NULL;
        span |= strstr(line, "span_id:[1011121314151617]") != NULL;
        trace |= strstr(line, "trace_id:[505152535455565758595a5b5c5d5e5f]") != NULL;
        long long v;
        char colon;
        if (in_samples && sscanf(line, " %lld%c", &v, &colon) == 2 && colon == ':')
            total += v;
    }
    int status = pclose(out);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(status, 0);
    assert_true(type);
    assert_true(span);
    assert_true(trace);
    assert_int_equal(total, 110 * MS);
    hs_profiles_unref(b);
    ob_free(m.b);
}

/* ---- bad references, each named
 * ------------------------------------------------------------------ */

struct bad_case {
    const char *name;
    void (*mutate)(struct main_req *m);
    const char *want; /* the whole message */
};

static void bad_stack_index(struct main_req *m)
{
    m->cpu->samples[3]->stack_index = 912;
}
static void bad_stack_negative(struct main_req *m)
{
    m->cpu->samples[0]->stack_index = -1;
}
static void bad_link_index(struct main_req *m)
{
    m->alloc->samples[1]->link_index = 9;
}
static void bad_sample_attr(struct main_req *m)
{
    m->offcpu->samples[1]->attribute_indices[1] = 77;
}
static void bad_stack_location(struct main_req *m)
{
    m->b->stacks[m->s2]->location_indices[1] = 40;
}
static void bad_line_function(struct main_req *m)
{
    OLoc *l = m->b->locs[m->b->stacks[m->s4]->location_indices[0]];
    l->lines[1]->function_index = 99;
}
static void bad_location_mapping(struct main_req *m)
{
    m->b->locs[m->b->stacks[m->s4]->location_indices[0]]->mapping_index = 5;
}
static void bad_function_name(struct main_req *m)
{
    m->b->funcs[2]->name_strindex = 700;
}
static void bad_mapping_file(struct main_req *m)
{
    m->b->maps[1]->filename_strindex = -3;
}
static void bad_mapping_attr(struct main_req *m)
{
    m->b->maps[1]->attribute_indices[0] = 50;
}
static void bad_attr_key(struct main_req *m)
{
    m->b->attrs[m->thread]->key_strindex = 1000;
}
static void bad_attr_strindex(struct main_req *m)
{
    OAny *v = m->b->attrs[m->svc_b]->value;
    v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX;
    v->string_value_strindex = 500;
}
static void bad_resource_key(struct main_req *m)
{
    m->b->res[1]->resource->attributes[0]->key_strindex = 321;
}
static void bad_sample_type(struct main_req *m)
{
    m->alloc->sample_type->type_strindex = 88;
}
static void bad_period_type(struct main_req *m)
{
    m->cpu->period_type->unit_strindex = 88;
}
static void bad_profile_attr(struct main_req *m)
{
    m->offcpu->attribute_indices = ob_zalloc(m->b, sizeof(int32_t));
    m->offcpu->attribute_indices[0] = 31;
    m->offcpu->n_attribute_indices = 1;
}
static void bad_trace_id(struct main_req *m)
{
    m->b->links[m->l2]->trace_id.len = 5;
}
static void bad_span_id(struct main_req *m)
{
    m->b->links[m->l1]->span_id.len = 3;
}
static void bad_profile_id(struct main_req *m)
{
    m->cpu->profile_id = ob_bytes(m->b, 7, 1);
}
static void bad_string0(struct main_req *m)
{
    m->b->strs[0] = "x";
}
static void bad_utf8(struct main_req *m)
{
    m->b->strs[3] = "a\xff";
}
static void bad_two_values(struct main_req *m)
{
    OSample *s = m->cpu->samples[2];
    s->n_values = 2;
    s->values = ob_zalloc(m->b, 2 * sizeof(int64_t));
}
static void bad_values_timestamps(struct main_req *m)
{
    m->alloc->samples[1]->n_timestamps_unix_nano = 1;
}
static void bad_no_values(struct main_req *m)
{
    m->cpu->samples[1]->n_values = 0;
}
static void bad_no_sample_type(struct main_req *m)
{
    m->offcpu->sample_type = NULL;
}
static void bad_no_dictionary(struct main_req *m)
{
    m->b->req.dictionary = NULL;
}

static void test_bad_references(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"stack_index", bad_stack_index,
         "resource_profiles[0].scope_profiles[0].profiles[0].samples[3].stack_index: 912 is out "
         "of range (stack_table has 5 entries)"},
        {"negative", bad_stack_negative,
         "resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index: -1 is out of "
         "range (stack_table has 5 entries)"},
        {"link_index", bad_link_index,
         "resource_profiles[0].scope_profiles[1].profiles[0].samples[1].link_index: 9 is out of "
         "range (link_table has 3 entries)"},
        {"sample attribute", bad_sample_attr,
         "resource_profiles[1].scope_profiles[0].profiles[0].samples[1].attribute_indices[1]: 77 "
         "is out of range (attribute_table has 5 entries)"},
        {"stack location", bad_stack_location,
         "dictionary.stack_table[2].location_indices[1]: 40 is out of range (location_table has 7 "
         "entries)"},
        {"line function", bad_line_function,
         "dictionary.location_table[6].lines[1].function_index: 99 is out of range (function_table "
         "has 8 entries)"},
        {"location mapping", bad_location_mapping,
         "dictionary.location_table[6].mapping_index: 5 is out of range (mapping_table has 2 "
         "entries)"},
        {"function name", bad_function_name,
         "dictionary.function_table[2].name_strindex: 700 is out of range (string_table has 27 "
         "entries)"},
        {"mapping file", bad_mapping_file,
         "dictionary.mapping_table[1].filename_strindex: -3 is out of range (string_table has 27 "
         "entries)"},
        {"mapping attribute", bad_mapping_attr,
         "dictionary.mapping_table[1].attribute_indices[0]: 50 is out of range (attribute_table "
         "has 5 entries)"},
        {"attribute key", bad_attr_key,
         "dictionary.attribute_table[2].key_strindex: 1000 is out of range (string_table has 27 "
         "entries)"},
        {"attribute string", bad_attr_strindex,
         "dictionary.attribute_table[4].value.string_value_strindex: 500 is out of range "
         "(string_table has 27 entries)"},
        {"resource key", bad_resource_key,
         "resource_profiles[1].resource.attributes[0].key_strindex: 321 is out of range "
         "(string_table has 27 entries)"},
        {"sample type", bad_sample_type,
         "resource_profiles[0].scope_profiles[1].profiles[0].sample_type.type_strindex: 88 is out "
         "of range (string_table has 27 entries)"},
        {"period type", bad_period_type,
         "resource_profiles[0].scope_profiles[0].profiles[0].period_type.unit_strindex: 88 is out "
         "of range (string_table has 27 entries)"},
        {"profile attribute", bad_profile_attr,
         "resource_profiles[1].scope_profiles[0].profiles[0].attribute_indices[0]: 31 is out of "
         "range (attribute_table has 5 entries)"},
        {"trace id", bad_trace_id,
         "dictionary.link_table[2].trace_id: 5 bytes (a trace id has 16)"},
        {"span id", bad_span_id, "dictionary.link_table[1].span_id: 3 bytes (a span id has 8)"},
        {"profile id", bad_profile_id,
         "resource_profiles[0].scope_profiles[0].profiles[0].profile_id: 7 bytes (a profile id has "
         "16)"},
        {"string 0", bad_string0, "dictionary.string_table[0]: must be \"\" (it is \"x\")"},
        {"utf-8", bad_utf8, "dictionary.string_table[3]: not valid UTF-8"},
        {"two values", bad_two_values,
         "resource_profiles[0].scope_profiles[0].profiles[0].samples[2].values: 2 values, but the "
         "profile has one sample type (more values need as many timestamps_unix_nano: there are "
         "0)"},
        {"values vs timestamps", bad_values_timestamps,
         "resource_profiles[0].scope_profiles[1].profiles[0].samples[1].values: 2 values, but the "
         "profile has one sample type (more values need as many timestamps_unix_nano: there are "
         "1)"},
        {"no values", bad_no_values,
         "resource_profiles[0].scope_profiles[0].profiles[0].samples[1].values: empty, and no "
         "timestamps_unix_nano either"},
        {"no sample type", bad_no_sample_type,
         "resource_profiles[1].scope_profiles[0].profiles[0].sample_type: missing, but the profile "
         "has 4 samples"},
        {"no dictionary", bad_no_dictionary,
         "dictionary.string_table: empty, but string_table[0] must be \"\" and the request has 3 "
         "profiles"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct main_req m;
        build_main(&m);
        cases[i].mutate(&m);
        struct hs_profiles *b;
        int rc = decode_ob(m.b, NULL, &b);
        if (rc != HS_EINVAL || strcmp(err, cases[i].want) != 0)
            fail_msg("%s: got %s \"%s\"\n  want \"%s\"", cases[i].name, hs_err_name(rc), err,
                     cases[i].want);
        hs_profiles_unref(b);
        ob_free(m.b);
    }
}

static void test_not_protobuf(void **state)
{
    (void)state;
    static const uint8_t garbage[][6] = {
        {0x0a, 0x05, 0x01},             /* resource_profiles longer than the request */
        {0x0b, 0x00},                   /* wire type 3 */
        {0x0a, 0x02, 0x12, 0x80},       /* a truncated length inside */
        {0x12, 0x02, 0x2a, 0x01},       /* string_table entry past its message */
        {0x80, 0x80, 0x80, 0x80, 0x80}, /* an unterminated tag */
    };
    static const size_t lens[] = {3, 2, 4, 4, 5};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        struct hs_profiles *b = hs_profiles_new(NULL);
        int rc = hs_otlp_profiles_decode(b, garbage[i], lens[i], NULL, err, sizeof(err));
        if (rc != HS_EINVAL)
            fail_msg("garbage %zu: %s %s", i, hs_err_name(rc), err);
        assert_int_equal(b->count, 0);
        hs_profiles_unref(b);
    }
    /* an empty request is a request with nothing in it */
    struct hs_profiles *b = hs_profiles_new(NULL);
    assert_int_equal(hs_otlp_profiles_decode(b, (const uint8_t *)"", 0, NULL, err, sizeof(err)), 0);
    assert_int_equal(b->count, 0);
    assert_int_equal(b->format, HS_PROFILES_OTLP);
    assert_int_equal(hs_profiles_to_pprof(b, err, sizeof(err)), 0);
    hs_profiles_unref(b);
}

/* ---- limits ------------------------------------------------------------------------------------
 */

struct limit_case {
    struct hs_otlp_profiles_limits lim;
    const char *want;
};

static void test_limits(void **state)
{
    (void)state;
    static const struct limit_case cases[] = {
        {{.max_samples = 4},
         "resource_profiles[0].scope_profiles[0].profiles[0].samples[4]: more than max_samples (4) "
         "in one Profile"},
        {{.max_table_entries = 20},
         "dictionary.string_table[20]: more than max_table_entries (20) "
         "in one ProfilesDictionary"},
        {{.max_profiles = 2},
         "resource_profiles[1].scope_profiles[0].profiles[0]: more than max_profiles (2) in the "
         "request"},
        {{.max_attributes = 3},
         "resource_profiles[0].resource.attributes[3]: more than max_attributes (3) in one "
         "Resource"},
        {{.max_attributes = 1},
         "resource_profiles[0].resource.attributes[1]: more than max_attributes (1) in one "
         "Resource"},
        {{.max_stack_depth = 2},
         "resource_profiles[0].scope_profiles[0].profiles[0].samples[0]: stack 1 is 3 frames deep "
         "(inlined frames included), more than max_stack_depth (2)"},
        {{.max_string_len = 8},
         "dictionary.string_table[4]: 9 bytes, more than max_string_length (8)"},
        {{.max_decompressed = 100}, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct main_req m;
        build_main(&m);
        struct hs_profiles *b;
        int rc = decode_ob(m.b, &cases[i].lim, &b);
        if (rc != HS_E2BIG || (cases[i].want && strcmp(err, cases[i].want) != 0))
            fail_msg("case %zu: got %s \"%s\"\n  want \"%s\"", i, hs_err_name(rc), err,
                     cases[i].want ? cases[i].want : "");
        if (!cases[i].want)
            assert_non_null(strstr(err, "exceeds max_decompressed (100)"));
        hs_profiles_unref(b);
        ob_free(m.b);
    }
    /* at the limits exactly, accepted */
    struct main_req m;
    build_main(&m);
    struct hs_otlp_profiles_limits at = {.max_samples = 5,
                                         .max_profiles = 3,
                                         .max_attributes = 5,
                                         .max_stack_depth = 3,
                                         .max_table_entries = 28};
    struct hs_profiles *b;
    assert_int_equal(decode_ob(m.b, &at, &b), 0);
    hs_profiles_unref(b);
    /* attribute_indices of a sample count too */
    at.max_attributes = 1;
    at.max_table_entries = 0;
    m.b->res[0]->resource->n_attributes = 1;
    m.b->res[1]->resource->n_attributes = 1;
    m.b->res[0]->scope_profiles[0]->scope->n_attributes = 1;
    assert_int_equal(decode_ob(m.b, &at, &b), HS_E2BIG);
    assert_string_equal(err, "resource_profiles[1].scope_profiles[0].profiles[0].samples[1]."
                             "attribute_indices: 2 attributes, more than max_attributes (1)");
    hs_profiles_unref(b);
    ob_free(m.b);
}

/* A request whose resource attribute nests `levels` arrays, written by hand (protobuf-c would
 * recurse once per level to write it too). */
static void nested_request(uint32_t levels, struct hs_buf *out)
{
    size_t *any = calloc(levels + 1, sizeof(size_t)), *arr = calloc(levels + 1, sizeof(size_t));
    for (uint32_t i = 1; i <= levels; i++) { /* content lengths, innermost first */
        arr[i] = 1 + hs_varint_size(any[i - 1]) + any[i - 1];
        any[i] = 1 + hs_varint_size(arr[i]) + arr[i];
    }
    size_t kv = 3 + 1 + hs_varint_size(any[levels]) + any[levels]; /* key "k", value */
    size_t res = 1 + hs_varint_size(kv) + kv, rp = 1 + hs_varint_size(res) + res;
    out->len = 0;
    hs_buf_putc(out, 0x0a), hs_buf_put_varint(out, rp);  /* resource_profiles */
    hs_buf_putc(out, 0x0a), hs_buf_put_varint(out, res); /* resource */
    hs_buf_putc(out, 0x0a), hs_buf_put_varint(out, kv);  /* attributes */
    hs_buf_append(out, "\x0a\x01k", 3);
    hs_buf_putc(out, 0x12), hs_buf_put_varint(out, any[levels]);
    for (uint32_t i = levels; i >= 1; i--) {
        hs_buf_putc(out, 0x2a), hs_buf_put_varint(out, arr[i]);     /* array_value */
        hs_buf_putc(out, 0x0a), hs_buf_put_varint(out, any[i - 1]); /* values */
    }
    free(any);
    free(arr);
}

static void test_value_depth(void **state)
{
    (void)state;
    struct hs_buf buf = {0};
    nested_request(32, &buf);
    struct hs_profiles *b = hs_profiles_new(NULL);
    assert_int_equal(hs_otlp_profiles_decode(b, buf.data, buf.len, NULL, err, sizeof(err)), 0);
    hs_profiles_unref(b);
    nested_request(33, &buf);
    b = hs_profiles_new(NULL);
    assert_int_equal(hs_otlp_profiles_decode(b, buf.data, buf.len, NULL, err, sizeof(err)),
                     HS_E2BIG);
    assert_non_null(strstr(err, "nested deeper than 32 (limit max_value_depth)"));
    assert_non_null(strstr(err, "resource_profiles[0].resource.attributes[0].value.array_value."
                                "values[0].array_value.values[0]"));
    hs_profiles_unref(b);
    /* a million levels would overflow the stack of a recursive decoder */
    nested_request(1000000, &buf);
    b = hs_profiles_new(NULL);
    struct hs_otlp_profiles_limits lim = {.max_value_depth = 128};
    assert_int_equal(hs_otlp_profiles_decode(b, buf.data, buf.len, &lim, err, sizeof(err)),
                     HS_E2BIG);
    assert_non_null(strstr(err, "nested deeper than 128"));
    hs_profiles_unref(b);
    hs_buf_free(&buf);

    /* a depth the receiver allowed is allowed again when the pprof is made later */
    struct main_req m;
    build_main(&m);
    OAny *v = ob_any_str(m.b, "deep");
    for (int i = 0; i < 40; i++) {
        OAny *outer = ob_zalloc(m.b, sizeof(*outer));
        opentelemetry__proto__common__v1__any_value__init(outer);
        outer->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
        outer->array_value = ob_zalloc(m.b, sizeof(*outer->array_value));
        opentelemetry__proto__common__v1__array_value__init(outer->array_value);
        outer->array_value->n_values = 1;
        outer->array_value->values = ob_zalloc(m.b, sizeof(OAny *));
        outer->array_value->values[0] = v;
        v = outer;
    }
    ORes *r0 = m.b->res[0];
    r0->resource->attributes[r0->resource->n_attributes++] = ob_kv(m.b, "deep", v);
    lim.max_value_depth = 64;
    assert_int_equal(decode_ob(m.b, &lim, &b), 0);
    assert_int_equal(hs_profiles_to_pprof(b, err, sizeof(err)), 0);
    assert_non_null(b->items[0]->raw);
    hs_profiles_unref(b);
    ob_free(m.b);
}

/* ---- JSON
 * ---------------------------------------------------------------------------------------- */

/* The same request twice: OTLP/JSON as the Collector writes it (hex ids, int64 as strings) and
 * protobuf-c. */
static const char small_json[] =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"api\"}},"
    "{\"key\":\"pod.count\",\"value\":{\"intValue\":\"3\"}}]},"
    "\"scopeProfiles\":[{\"scope\":{\"name\":\"p\"},\"profiles\":[{"
    "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"samples\":[{\"stackIndex\":1,\"linkIndex\":1,\"values\":[\"7\"],\"attributeIndices\":[1]},"
    "{\"stackIndex\":2,\"values\":[2]}],"
    "\"timeUnixNano\":\"1700000000000000000\",\"durationNano\":\"10000000000\","
    "\"periodType\":{\"typeStrindex\":3,\"unitStrindex\":4},\"period\":\"10000000\","
    "\"profileId\":\"000102030405060708090a0b0c0d0e0f\"}]}]}],"
    "\"dictionary\":{"
    "\"mappingTable\":[{}],"
    "\"locationTable\":[{},{\"address\":\"4198416\",\"lines\":[{\"functionIndex\":1,\"line\":"
    "\"20\"}]},"
    "{\"address\":4198432,\"lines\":[{\"functionIndex\":2,\"line\":20}]}],"
    "\"functionTable\":[{},{\"nameStrindex\":5,\"systemNameStrindex\":5,\"filenameStrindex\":6,"
    "\"startLine\":\"10\"},{\"name_strindex\":7,\"systemNameStrindex\":7,\"filenameStrindex\":8,"
    "\"startLine\":10}],"
    "\"linkTable\":[{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":"
    "\"0000000000000000\"},{\"traceId\":\"5B8EFFF798038103D269B633813FC60C\","
    "\"spanId\":\"eee19b7ec3c1b174\"}],"
    "\"stringTable\":[\"\",\"samples\",\"count\",\"cpu\",\"nanoseconds\",\"main\",\"main.go\","
    "\"leaf\",\"leaf.go\",\"thread.name\"],"
    "\"attributeTable\":[{},{\"keyStrindex\":9,\"value\":{\"stringValue\":\"w1\"}}],"
    "\"stackTable\":[{},{\"locationIndices\":[2,1]},{\"locationIndices\":[1]}]}}";

static struct ob *small_ob(void)
{
    struct ob *b = ob_new();
    ORes *r = ob_resource(b, ob_kv(b, "service.name", ob_any_str(b, "api")),
                          ob_kv(b, "pod.count", ob_any_int(b, 3)), NULL);
    OScope *sc = ob_scope(b, r, "p");
    OProf *p = ob_profile(b, sc, "samples", "count", "cpu", "nanoseconds", 10 * MS, T0, 10000 * MS);
    p->profile_id = ob_bytes(b, 16, 0);
    ob_str(b, "main"), ob_str(b, "main.go"), ob_str(b, "leaf"), ob_str(b, "leaf.go");
    int32_t main = ob_loc(b, "main"), leaf = ob_loc(b, "leaf");
    int32_t s1 = ob_stack_idx(b, 2, (int32_t[]){leaf, main}), s2 = ob_stack_idx(b, 1, &main);
    OLink *l = ob_zalloc(b, sizeof(*l));
    opentelemetry__proto__profiles__v1development__link__init(l);
    l->trace_id = (ProtobufCBinaryData){
        16, (uint8_t *)"\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c"};
    l->span_id = (ProtobufCBinaryData){8, (uint8_t *)"\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74"};
    b->links[b->dict.n_link_table++] = l;
    int32_t a = ob_attr(b, "thread.name", "w1");
    ob_sample(b, p, s1, 7, 1, a, -1);
    ob_sample(b, p, s2, 2, 0, -1);
    return b;
}

static void test_json_matches_protobuf(void **state)
{
    (void)state;
    struct ob *ob = small_ob();
    struct hs_profiles *pb;
    assert_int_equal(decode_ob(ob, NULL, &pb), 0);
    struct hs_profiles *js = hs_profiles_new(NULL);
    int rc =
        hs_otlp_profiles_decode_json(js, small_json, strlen(small_json), NULL, err, sizeof(err));
    if (rc)
        fail_msg("%s: %s", hs_err_name(rc), err);
    /* the protobuf JSON becomes is the one protobuf-c packs */
    assert_int_equal(js->request_len, pb->request_len);
    assert_memory_equal(js->request, pb->request, pb->request_len);
    assert_int_equal(js->count, 1);
    assert_int_equal(pb->count, 1);
    const struct hs_profile *a = js->items[0], *b = pb->items[0];
    assert_int_equal(a->nlabels, b->nlabels);
    for (uint32_t i = 0; i < a->nlabels; i++) {
        assert_string_equal(a->labels[i].name, b->labels[i].name);
        assert_string_equal(a->labels[i].value, b->labels[i].value);
    }
    assert_string_equal(hs_profile_label(a, "pod_count"), "3");
    summaries_equal(&a->summary, &b->summary);
    assert_int_equal(a->summary.totals[0], 90 * MS);
    assert_int_equal(a->summary.nspans, 1);
    assert_memory_equal(a->summary.spans[0].id, "\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74", 8);
    assert_int_equal(hs_profiles_to_pprof(js, err, sizeof(err)), 0);
    assert_int_equal(hs_profiles_to_pprof(pb, err, sizeof(err)), 0);
    assert_int_equal(a->raw_len, b->raw_len);
    assert_memory_equal(a->raw, b->raw, a->raw_len);
    hs_profiles_unref(js);
    hs_profiles_unref(pb);
    ob_free(ob);
}

static void test_json_bad(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int rc;
        const char *want;
    } cases[] = {
        {"{\"resourceProfiles\":[", HS_EINVAL, "line 1 col 22:"},
        /* protobuf-c's strings end at a NUL: a name would be cut short, so it is refused */
        {"{\"dictionary\":{\"stringTable\":[\"\",\"a\\u0000b\"]}}", HS_EINVAL,
         "\\u0000 is not allowed in this document"},
        {"{\"dictionary\":{\"linkTable\":[{\"spanId\":\"xyz\"}]}}", HS_EINVAL,
         "dictionary.linkTable[0].spanId: \"xyz\" is not 16 hex digits"},
        {"{\"dictionary\":{\"stringTable\":[\"\"],\"stackTable\":[{}]},\"resourceProfiles\":[{"
         "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{},\"samples\":[{\"stackIndex\":3,"
         "\"values\":[1]}]}]}]}]}",
         HS_EINVAL,
         "resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index: 3 is out of "
         "range (stack_table has 1 entries)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hs_profiles *b = hs_profiles_new(NULL);
        int rc = hs_otlp_profiles_decode_json(b, cases[i].json, strlen(cases[i].json), NULL, err,
                                              sizeof(err));
        if (rc != cases[i].rc || !strstr(err, cases[i].want))
            fail_msg("case %zu: %s \"%s\", want \"%s\"", i, hs_err_name(rc), err, cases[i].want);
        assert_int_equal(b->count, 0);
        assert_null(b->request);
        hs_profiles_unref(b);
    }
}

/* ---- one profile at a time ----------------------------------------------------------------------
 */

static void test_profile_to_pprof(void **state)
{
    (void)state;
    struct main_req m;
    build_main(&m);
    struct hs_buf buf = {0}, out = {0};
    ob_pack(m.b, &buf);
    struct hs_otlp_request *r;
    assert_int_equal(hs_otlp_request_parse(buf.data, buf.len, NULL, &r, err, sizeof(err)), 0);
    assert_int_equal(hs_otlp_request_profiles(r), 3);
    /* all of the off-cpu profile's samples, whichever service they name */
    assert_int_equal(hs_otlp_profile_to_pprof(r, 2, NULL, 0, &out, err, sizeof(err)), 0);
    struct hs_profile *p = hs_profile_new();
    assert_int_equal(hs_profile_set_raw(p, out.data, out.len), 0);
    assert_int_equal(hs_profile_summarize(p, NULL, err, sizeof(err)), 0);
    assert_int_equal(p->summary.totals[0], 180);
    assert_int_equal(p->summary.samples, 4);
    assert_int_equal(p->from_ns, (int64_t)T0);
    hs_profile_free(p);
    out.len = 0;
    assert_int_equal(hs_otlp_profile_to_pprof(r, 2, "svc-b", T0 + 5, &out, err, sizeof(err)), 0);
    p = hs_profile_new();
    assert_int_equal(hs_profile_set_raw(p, out.data, out.len), 0);
    assert_int_equal(hs_profile_summarize(p, NULL, err, sizeof(err)), 0);
    assert_int_equal(p->summary.totals[0], 50);
    assert_int_equal(p->from_ns, (int64_t)T0 + 5);
    hs_profile_free(p);
    assert_int_equal(hs_otlp_profile_to_pprof(r, 2, "nobody", 0, &out, err, sizeof(err)),
                     HS_EINVAL);
    assert_string_equal(err, "profiles[2]: no samples of service \"nobody\"");
    assert_int_equal(hs_otlp_profile_to_pprof(r, 3, NULL, 0, &out, err, sizeof(err)), HS_EINVAL);
    hs_otlp_request_free(r);
    hs_buf_free(&buf);
    hs_buf_free(&out);
    ob_free(m.b);
}

/* ---- the fixture protobufjs wrote (tests/integration/lib/otlp_profiles.mjs) ---------------------
 */

static void test_protobufjs_fixture(void **state)
{
    (void)state;
    const char *src = getenv("HS_SOURCE_DIR");
    char path[1024];
    if (src) {
        snprintf(path, sizeof(path), "%s/tests/unit/fixtures/otlp_profiles_protobufjs.pb", src);
    } else { /* run by hand: beside this file */
        snprintf(path, sizeof(path), "%s", __FILE__);
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, sizeof(path) - (size_t)(slash ? slash + 1 - path : 0),
                 "fixtures/otlp_profiles_protobufjs.pb");
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("%s: missing (make it with tests/unit/fixtures/gen_otlp_profiles.mjs)", path);
    struct hs_buf buf = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        hs_buf_append(&buf, chunk, n);
    fclose(f);
    struct hs_profiles *b = hs_profiles_new(NULL);
    int rc = hs_otlp_profiles_decode(b, buf.data, buf.len, NULL, err, sizeof(err));
    if (rc)
        fail_msg("%s: %s", hs_err_name(rc), err);
    /* what gen_otlp_profiles.mjs describes: checkout's cpu profile, 100 Hz, two linked spans */
    assert_int_equal(b->count, 1);
    const struct hs_profile *p = b->items[0];
    const struct hs_profile_summary *s = &p->summary;
    assert_string_equal(p->service, "checkout");
    assert_string_equal(hs_profile_label(p, "__name__"), "process_cpu");
    assert_string_equal(s->type_ids[0], "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_int_equal(s->totals[0], 10 * 10 * MS);
    assert_int_equal(p->from_ns, (int64_t)T0);
    expect_func(s, "db.query", 6 * 10 * MS, 6 * 10 * MS);
    expect_func(s, "handle", 0, 8 * 10 * MS);
    assert_int_equal(s->nspans, 2);
    assert_int_equal(span_value(s, 0xa0), 6 * 10 * MS);
    assert_int_equal(span_value(s, 0xb0), 2 * 10 * MS);
    round_trip(b);
    hs_profiles_unref(b);
    hs_buf_free(&buf);
}

/* ---- the traces path takes the profiles-only fields as absent -----------------------------------
 */

static void test_traces_ignore_strindex(void **state)
{
    (void)state;
    Opentelemetry__Proto__Common__V1__AnyValue v =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX;
    v.string_value_strindex = 7;
    Opentelemetry__Proto__Common__V1__KeyValue
        kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        *kvp = &kv;
    kv.key_strindex = 3;
    kv.value = &v;
    Opentelemetry__Proto__Trace__V1__Span span = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT,
                                          *spp = &span;
    span.trace_id = (ProtobufCBinaryData){16, (uint8_t *)"0123456789abcdef"};
    span.span_id = (ProtobufCBinaryData){8, (uint8_t *)"01234567"};
    span.name = "s";
    span.n_attributes = 1;
    span.attributes = &kvp;
    Opentelemetry__Proto__Trace__V1__ScopeSpans
        ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT,
        *ssp = &ss;
    ss.n_spans = 1;
    ss.spans = &spp;
    Opentelemetry__Proto__Resource__V1__Resource res =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    res.n_attributes = 1;
    res.attributes = &kvp;
    Opentelemetry__Proto__Trace__V1__ResourceSpans
        rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT,
        *rsp = &rs;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    uint8_t buf[512];
    size_t n =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, buf);
    struct hs_otlp_scan res_scan;
    assert_int_equal(hs_otlp_traces_scan(buf, n, NULL, NULL, NULL, &res_scan), 0);
    assert_int_equal(res_scan.spans, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_main_request),
        cmocka_unit_test(test_pprof_shape),
        cmocka_unit_test(test_pprof_round_trip),
        cmocka_unit_test(test_go_tool_pprof),
        cmocka_unit_test(test_bad_references),
        cmocka_unit_test(test_not_protobuf),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_value_depth),
        cmocka_unit_test(test_json_matches_protobuf),
        cmocka_unit_test(test_json_bad),
        cmocka_unit_test(test_profile_to_pprof),
        cmocka_unit_test(test_protobufjs_fixture),
        cmocka_unit_test(test_traces_ignore_strindex),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
