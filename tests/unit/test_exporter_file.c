/* test_exporter_file.c: the file exporter: one JSON line per batch that reads back as the same
 * wire bytes, one JSON line per profile with every field of its shape, size rotation that keeps
 * max_backups files in order, a full disk dropped and counted, config errors with their
 * positions, and the lifecycle rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/common.h"
#include "core/component.h"
#include "core/config.h"
#include "core/metrics.h"
#include "otlp_profiles_build.h"
#include "pdata/otlp_json.h"
#include "pdata/otlp_profiles.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

extern const struct hs_component_type hs_exporter_file;

struct fixture {
    char dir[64];
    char path[128];
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct hs_component *c;
};

static int done_calls; /* done callbacks have no user data; one test runs at a time */

static void on_done(struct hs_component *c)
{
    done_calls++;
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    strcpy(fx->dir, "/tmp/hs_test_file_XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof(fx->path), "%s/out.json", fx->dir);
    fx->m = hs_metrics_new();
    umask(022);
    done_calls = 0;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    if (fx->c)
        hs_exporter_file.destroy(fx->c);
    hs_config_doc_free(&fx->doc);
    hs_metrics_free(fx->m);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    free(fx);
    return 0;
}

static int create(struct fixture *fx, const char *yaml, struct hs_error *err)
{
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &fx->doc, err), 0);
    int rc = hs_exporter_file.create(fx->doc.root, "exporters.file/x", &fx->c, err);
    if (rc == 0) {
        fx->c->type = &hs_exporter_file;
        fx->c->id = "file/x";
        fx->c->metrics = fx->m;
    }
    return rc;
}

static void create_and_start(struct fixture *fx, const char *yaml_fmt)
{
    char yaml[512];
    snprintf(yaml, sizeof(yaml), yaml_fmt, fx->path);
    struct hs_error err = {0};
    int rc = create(fx, yaml, &err);
    if (rc)
        fail_msg("create: %s", err.count ? err.lines[0] : "?");
    struct hs_host host = {.metrics = fx->m};
    assert_int_equal(hs_exporter_file.start(fx->c, &host), 0);
}

/* A batch of `spans` spans named "<seq>", each with a `pad`-byte attribute. */
static struct hs_traces *batch(unsigned seq, unsigned spans, size_t pad)
{
    struct hs_buf js = {0};
    char *padding = malloc(pad + 1);
    memset(padding, 'p', pad);
    padding[pad] = '\0';
    hs_buf_printf(&js, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[");
    for (unsigned i = 0; i < spans; i++)
        hs_buf_printf(&js,
                      "%s{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":"
                      "\"eee19b7ec3c1b1%02x\",\"name\":\"%u\",\"attributes\":[{\"key\":\"pad\","
                      "\"value\":{\"stringValue\":\"%s\"}}]}",
                      i ? "," : "", i, seq, padding);
    hs_buf_printf(&js, "]}]}]}");
    free(padding);
    struct hs_buf wire = {0};
    char err[256];
    assert_int_equal(hs_otlp_json_to_wire((char *)js.data, js.len, NULL, &wire, err, sizeof(err)),
                     0);
    hs_buf_free(&js);
    struct hs_traces *t = hs_traces_wrap(wire.data, wire.len, wire.cap, spans, 1);
    assert_non_null(t);
    return t;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct hs_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        hs_buf_append(&b, chunk, n);
    fclose(f);
    hs_buf_putc(&b, '\0');
    *len = b.len - 1;
    return (char *)b.data;
}

/* Span counts of each JSON line in the file; every line must be a whole request. */
static size_t line_spans(const char *text, json_int_t *names, unsigned *spans, size_t max)
{
    size_t lines = 0;
    for (const char *p = text; *p; lines++) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl); /* every line is complete */
        assert_true(lines < max);
        json_error_t je;
        json_t *j = json_loadb(p, (size_t)(nl - p), 0, &je);
        if (!j)
            fail_msg("line %zu is not JSON: %s", lines + 1, je.text);
        json_t *sp = json_object_get(
            json_array_get(json_object_get(json_array_get(json_object_get(j, "resourceSpans"), 0),
                                           "scopeSpans"),
                           0),
            "spans");
        spans[lines] = (unsigned)json_array_size(sp);
        const char *name = json_string_value(json_object_get(json_array_get(sp, 0), "name"));
        names[lines] = name ? atoll(name) : -1;
        json_decref(j);
        p = nl + 1;
    }
    return lines;
}

static uint64_t metric(struct fixture *fx, const char *series)
{
    struct hs_buf out = {0};
    assert_int_equal(hs_metrics_render(fx->m, &out), 0);
    hs_buf_putc(&out, '\0');
    const char *p = strstr((char *)out.data, series);
    uint64_t v = p ? strtoull(p + strlen(series), NULL, 10) : UINT64_MAX;
    hs_buf_free(&out);
    return v;
}

static void test_writes_json_lines(void **state)
{
    struct fixture *fx = *state;
    FILE *old = fopen(fx->path, "w"); /* appended to, never truncated */
    fputs("{}\n", old);
    fclose(old);
    create_and_start(fx, "path: %s\n");

    struct hs_traces *sent[3];
    for (unsigned i = 0; i < 3; i++) {
        sent[i] = batch(i, i + 1, 10);
        hs_traces_ref(sent[i]);
        assert_int_equal(hs_exporter_file.consume_traces(fx->c, sent[i]), 0);
    }

    size_t len;
    char *text = slurp(fx->path, &len);
    json_int_t names[8];
    unsigned spans[8];
    assert_int_equal(line_spans(text, names, spans, 8), 4);
    assert_int_equal(spans[0], 0);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(spans[i + 1], i + 1);

    /* each line is the batch itself: it converts back to the very same wire bytes */
    char *line = strchr(text, '\n') + 1;
    for (unsigned i = 0; i < 3; i++) {
        char *nl = strchr(line, '\n');
        struct hs_buf wire = {0};
        char err[256];
        assert_int_equal(
            hs_otlp_json_to_wire(line, (size_t)(nl - line), NULL, &wire, err, sizeof(err)), 0);
        assert_int_equal(wire.len, sent[i]->len);
        assert_memory_equal(wire.data, sent[i]->data, wire.len);
        hs_buf_free(&wire);
        hs_traces_unref(sent[i]);
        line = nl + 1;
    }
    free(text);

    struct stat st;
    assert_int_equal(stat(fx->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"file/x\"} "), 6);
    assert_int_equal(metric(fx, "hotspan_exporter_send_failed_spans_total{exporter=\"file/x\"} "),
                     0);
}

static void test_rotation(void **state)
{
    struct fixture *fx = *state;
    create_and_start(fx, "path: %s\nrotation: {max_megabytes: 1, max_backups: 2}\n");
    /* ~300 KB lines: three fit in 1 MiB, the fourth rotates */
    for (unsigned seq = 0; seq < 14; seq++)
        assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(seq, 1, 300000)), 0);

    /* 14 lines = files of 3,3,3,3,2: the current one holds 12-13, .1 9-11, .2 6-8, rest gone */
    const char *suffix[] = {"", ".1", ".2"};
    json_int_t first[] = {12, 9, 6};
    size_t count[] = {2, 3, 3};
    for (int i = 0; i < 3; i++) {
        char name[160];
        snprintf(name, sizeof(name), "%s%s", fx->path, suffix[i]);
        size_t len;
        char *text = slurp(name, &len);
        assert_non_null(text);
        assert_true(len <= 1u << 20);
        json_int_t names[8];
        unsigned spans[8];
        assert_int_equal(line_spans(text, names, spans, 8), count[i]);
        for (size_t j = 0; j < count[i]; j++)
            assert_int_equal(names[j], first[i] + (json_int_t)j);
        free(text);
    }
    char name[160];
    snprintf(name, sizeof(name), "%s.3", fx->path);
    assert_int_equal(access(name, F_OK), -1);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"file/x\"} "), 14);
}

/* When path cannot be rotated away (here path.1 is a directory that is not empty), nothing is
 * lost: lines keep going to path. */
static void test_rotation_failure_keeps_writing(void **state)
{
    struct fixture *fx = *state;
    char name[200];
    snprintf(name, sizeof(name), "%s.1", fx->path);
    assert_int_equal(mkdir(name, 0755), 0);
    snprintf(name, sizeof(name), "%s.1/keep", fx->path);
    fclose(fopen(name, "w"));
    create_and_start(fx, "path: %s\nrotation: {max_megabytes: 1, max_backups: 1}\n");
    for (unsigned seq = 0; seq < 8; seq++)
        assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(seq, 1, 300000)), 0);
    size_t len;
    char *text = slurp(fx->path, &len);
    json_int_t names[10];
    unsigned spans[10];
    assert_int_equal(line_spans(text, names, spans, 10), 8);
    for (json_int_t i = 0; i < 8; i++)
        assert_int_equal(names[i], i);
    free(text);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"file/x\"} "), 8);
}

/* /dev/full opens like a file and fails every write with ENOSPC. */
static void test_disk_full_drops(void **state)
{
    struct fixture *fx = *state;
    strcpy(fx->path, "/dev/full");
    create_and_start(fx, "path: %s\n");
    assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(0, 3, 10)), 0);
    assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(1, 2, 10)), 0);
    assert_int_equal(metric(fx, "hotspan_exporter_send_failed_spans_total{exporter=\"file/x\"} "),
                     5);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"file/x\"} "), 0);
    assert_int_equal(
        metric(fx, "hotspan_dropped_total{component=\"file/x\",reason=\"write_failed\"} "), 5);
}

/* A write cut short (here by RLIMIT_FSIZE, as a disk filling up would) is cut back off the
 * file, so it never holds half a line. */
static void test_short_write_cut_back(void **state)
{
    struct fixture *fx = *state;
    create_and_start(fx, "path: %s\n");
    assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(0, 1, 10)), 0);
    size_t before;
    free(slurp(fx->path, &before));

    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = before + 500;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(1, 2, 3000)), 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(metric(fx, "hotspan_exporter_send_failed_spans_total{exporter=\"file/x\"} "),
                     2);

    assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(2, 1, 10)), 0);
    size_t len;
    char *text = slurp(fx->path, &len);
    json_int_t names[4];
    unsigned spans[4];
    assert_int_equal(line_spans(text, names, spans, 4), 2);
    assert_int_equal(names[0], 0);
    assert_int_equal(names[1], 2);
    free(text);
}

static void expect_errors(struct fixture *fx, const char *yaml, const char *const *want, size_t n)
{
    struct hs_error err = {0};
    assert_int_equal(create(fx, yaml, &err), HS_EINVAL);
    assert_null(fx->c);
    assert_int_equal(err.count, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(err.lines[i], want[i]);
    hs_error_free(&err);
    hs_config_doc_free(&fx->doc);
}

static void test_config_errors(void **state)
{
    struct fixture *fx = *state;
    const char *missing[] = {"t.yaml:1:1: exporters.file/x: missing required key \"path\""};
    expect_errors(fx, "rotation: {max_backups: 3}\n", missing, 1);
    const char *several[] = {
        "t.yaml:2:27: exporters.file/x.rotation.max_megabytes: 0 is below the minimum 1",
        "t.yaml:2:43: exporters.file/x.rotation.max_backups: 0 is below the minimum 1",
        "t.yaml:3:1: exporters.file/x.flush_interval: unknown key (known: path, rotation)",
    };
    expect_errors(fx,
                  "path: /tmp/x\nrotation: {max_megabytes: 0, max_backups: 0}\n"
                  "flush_interval: 1s\n",
                  several, 3);
    const char *empty[] = {"t.yaml:1:7: exporters.file/x.path: must not be empty"};
    expect_errors(fx, "path: \"\"\n", empty, 1);
}

static void test_start_fails_on_bad_path(void **state)
{
    struct fixture *fx = *state;
    struct hs_error err = {0};
    assert_int_equal(create(fx, "path: /nonexistent-dir/x/out.json\n", &err), 0);
    struct hs_host host = {.metrics = fx->m};
    assert_int_equal(hs_exporter_file.start(fx->c, &host), HS_ENOENT);
    hs_exporter_file.shutdown(fx->c, on_done);
    assert_int_equal(done_calls, 1);
}

static void test_lifecycle(void **state)
{
    struct fixture *fx = *state;
    struct hs_error err = {0};
    /* shut down before start, and twice: done exactly once */
    assert_int_equal(create(fx, "path: /tmp/never-opened\n", &err), 0);
    hs_exporter_file.shutdown(fx->c, on_done);
    hs_exporter_file.shutdown(fx->c, on_done);
    assert_int_equal(done_calls, 1);
    assert_int_equal(access("/tmp/never-opened", F_OK), -1); /* create and shutdown do no I/O */
    hs_exporter_file.destroy(fx->c);
    fx->c = NULL;
    hs_config_doc_free(&fx->doc);

    done_calls = 0;
    create_and_start(fx, "path: %s\n");
    assert_true(hs_exporter_file.ready(fx->c));
    hs_exporter_file.shutdown(fx->c, on_done);
    hs_exporter_file.shutdown(fx->c, on_done);
    assert_int_equal(done_calls, 1);
    assert_false(hs_exporter_file.ready(fx->c));
    assert_int_equal(hs_exporter_file.consume_traces(fx->c, batch(0, 1, 1)), HS_EAGAIN);
}

/* ---- profiles --------------------------------------------------------------------------- */

#define FROM_NS 1700000000123456789LL /* past 2^53: must survive as a string */
#define UNTIL_NS 1700000010123456789LL

static int64_t *vals(struct hs_profile *p, int64_t a, int64_t b)
{
    int64_t *v = hs_arena_alloc(p->arena, 2 * sizeof(*v));
    v[0] = a;
    v[1] = b;
    return v;
}

/* A profile with its summary filled by hand: types [samples/count, cpu/nanoseconds], cpu the
 * main one; functions main (all of it below), work, idle and aaa; one span. */
static struct hs_profile *summarized_profile(const uint8_t *raw, size_t raw_len)
{
    struct hs_profile *p = hs_profile_new();
    assert_int_equal(hs_profile_set_raw(p, raw, raw_len), 0);
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, "checkout", 8), 0);
    assert_int_equal(hs_profile_set_label(p, "__name__", 8, "process_cpu", 11), 0);
    assert_int_equal(hs_profile_set_label(p, "q", 1, "a\"b\n", 4), 0);
    p->from_ns = FROM_NS;
    p->until_ns = UNTIL_NS;
    struct hs_profile_summary *s = &p->summary;
    s->ntypes = 2;
    static const char *types[] = {"samples", "cpu"}, *units[] = {"count", "nanoseconds"};
    static const char *ids[] = {"process_cpu:samples:count:cpu:nanoseconds",
                                "process_cpu:cpu:nanoseconds:cpu:nanoseconds"};
    s->types = types;
    s->units = units;
    s->type_ids = ids;
    s->period_type = "cpu";
    s->period_unit = "nanoseconds";
    s->period = 10000000;
    s->main_type = 1;
    s->samples = 5;
    s->totals = vals(p, 5, 50000000);
    s->nfuncs = 4;
    s->funcs = hs_arena_alloc(p->arena, 4 * sizeof(*s->funcs));
    s->funcs[0] = (struct hs_profile_func){"idle", "", vals(p, 2, 20000000), vals(p, 2, 20000000)};
    s->funcs[1] = (struct hs_profile_func){"main", "main.go", vals(p, 0, 0), vals(p, 5, 50000000)};
    s->funcs[2] = (struct hs_profile_func){"aaa", "", vals(p, 0, 0), vals(p, 2, 20000000)};
    s->funcs[3] =
        (struct hs_profile_func){"work", "w.go", vals(p, 3, 30000000), vals(p, 3, 30000000)};
    s->nspans = 1;
    s->spans = hs_arena_alloc(p->arena, sizeof(*s->spans));
    static const uint8_t span[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
    memcpy(s->spans[0].id, span, 8);
    s->spans[0].values = vals(p, 1, 10000000);
    return p;
}

static const char *str_at(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static void assert_values(json_t *arr, const char *a, const char *b)
{
    assert_int_equal(json_array_size(arr), 2);
    assert_string_equal(json_string_value(json_array_get(arr, 0)), a);
    assert_string_equal(json_string_value(json_array_get(arr, 1)), b);
}

static void test_profile_lines(void **state)
{
    struct fixture *fx = *state;
    create_and_start(fx, "path: %s\n");
    uint8_t raw[256];
    for (size_t i = 0; i < sizeof(raw); i++)
        raw[i] = (uint8_t)(255 - i);
    struct hs_profiles *b = hs_profiles_new("t1");
    assert_int_equal(hs_profiles_add(b, summarized_profile(raw, sizeof(raw))), 0);
    struct hs_profile *bare = hs_profile_new(); /* nothing summarized: still a valid line */
    assert_int_equal(hs_profile_set_raw(bare, "x", 1), 0);
    bare->id = hs_profile_strdup(bare, "id-1", 4);
    assert_int_equal(hs_profiles_add(b, bare), 0);
    assert_int_equal(hs_exporter_file.consume_profiles(fx->c, b), 0);
    assert_int_equal(hs_exporter_file.consume_profiles(fx->c, hs_profiles_new(NULL)),
                     0); /* empty: no line */

    size_t len;
    char *text = slurp(fx->path, &len);
    char *nl = strchr(text, '\n');
    assert_non_null(nl);
    json_error_t je;
    json_t *root = json_loadb(text, (size_t)(nl - text), 0, &je);
    if (!root)
        fail_msg("not JSON: %s", je.text);
    json_t *pr = json_object_get(root, "profile");
    assert_int_equal(json_object_size(root), 1);
    assert_string_equal(str_at(pr, "tenant"), "t1");
    json_t *labels = json_object_get(pr, "labels");
    assert_int_equal(json_object_size(labels), 3);
    assert_string_equal(str_at(labels, "service_name"), "checkout");
    assert_string_equal(str_at(labels, "__name__"), "process_cpu");
    assert_string_equal(str_at(labels, "q"), "a\"b\n"); /* escaped, not breaking the line */
    assert_string_equal(str_at(pr, "from_ns"), "1700000000123456789");
    assert_string_equal(str_at(pr, "until_ns"), "1700000010123456789");
    assert_true(json_is_null(json_object_get(pr, "id")));
    assert_int_equal(json_integer_value(json_object_get(pr, "samples")), 5);
    assert_string_equal(str_at(pr, "period_type"), "cpu");
    assert_string_equal(str_at(pr, "period_unit"), "nanoseconds");
    assert_string_equal(str_at(pr, "period"), "10000000");
    json_t *types = json_object_get(pr, "types");
    assert_int_equal(json_array_size(types), 2);
    json_t *t1 = json_array_get(types, 1);
    assert_string_equal(str_at(t1, "type"), "cpu");
    assert_string_equal(str_at(t1, "unit"), "nanoseconds");
    assert_string_equal(str_at(t1, "id"), "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_string_equal(str_at(t1, "total"), "50000000");
    assert_string_equal(str_at(json_array_get(types, 0), "type"), "samples");
    assert_int_equal(json_integer_value(json_object_get(pr, "main_type")), 1);

    /* by total of cpu, heaviest first; aaa before idle on a tie */
    json_t *fns = json_object_get(pr, "functions");
    assert_int_equal(json_array_size(fns), 4);
    static const char *order[] = {"main", "work", "aaa", "idle"};
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(str_at(json_array_get(fns, i), "name"), order[i]);
    json_t *work = json_array_get(fns, 1);
    assert_string_equal(str_at(work, "file"), "w.go");
    assert_values(json_object_get(work, "self"), "3", "30000000");
    assert_values(json_object_get(work, "total"), "3", "30000000");
    assert_string_equal(str_at(json_array_get(fns, 3), "file"), "");

    json_t *spans = json_object_get(pr, "spans");
    assert_int_equal(json_array_size(spans), 1);
    assert_string_equal(str_at(json_array_get(spans, 0), "span_id"), "0123456789abcdef");
    assert_values(json_object_get(json_array_get(spans, 0), "values"), "1", "10000000");

    /* the pprof byte for byte, decoded here independently of the exporter's encoder */
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *enc = str_at(pr, "pprof");
    assert_int_equal(strlen(enc), (sizeof(raw) + 2) / 3 * 4);
    uint8_t dec[sizeof(raw) + 3];
    size_t n = 0;
    for (size_t i = 0; enc[i]; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (enc[i + k] == '=') {
                pad++;
                v <<= 6;
                continue;
            }
            const char *pos = strchr(b64, enc[i + k]);
            assert_non_null(pos);
            v = v << 6 | (uint32_t)(pos - b64);
        }
        dec[n++] = (uint8_t)(v >> 16);
        if (pad < 2)
            dec[n++] = (uint8_t)(v >> 8);
        if (pad < 1)
            dec[n++] = (uint8_t)v;
    }
    assert_int_equal(n, sizeof(raw));
    assert_memory_equal(dec, raw, sizeof(raw));
    json_decref(root);

    /* the second line: a bare profile */
    char *line2 = nl + 1;
    char *nl2 = strchr(line2, '\n');
    assert_non_null(nl2);
    assert_string_equal(nl2 + 1, ""); /* two lines, nothing for the empty batch */
    root = json_loadb(line2, (size_t)(nl2 - line2), 0, &je);
    assert_non_null(root);
    pr = json_object_get(root, "profile");
    assert_string_equal(str_at(pr, "id"), "id-1");
    assert_string_equal(str_at(pr, "pprof"), "eA==");
    assert_int_equal(json_array_size(json_object_get(pr, "functions")), 0);
    assert_int_equal(json_object_size(json_object_get(pr, "labels")), 0);
    json_decref(root);
    free(text);

    assert_int_equal(metric(fx, "hotspan_exporter_sent_profiles_total{exporter=\"file/x\"} "), 2);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_spans_total{exporter=\"file/x\"} "), 0);
}

static void test_profile_null_tenant_and_refused(void **state)
{
    struct fixture *fx = *state;
    create_and_start(fx, "path: %s\n");
    struct hs_profiles *b = hs_profiles_new(NULL);
    assert_int_equal(hs_profiles_add(b, summarized_profile((const uint8_t *)"ab", 2)), 0);
    assert_int_equal(hs_exporter_file.consume_profiles(fx->c, b), 0);
    size_t len;
    char *text = slurp(fx->path, &len);
    json_t *root = json_loadb(text, len, 0, NULL);
    assert_non_null(root);
    assert_true(json_is_null(json_object_get(json_object_get(root, "profile"), "tenant")));
    json_decref(root);
    free(text);
    hs_exporter_file.shutdown(fx->c, on_done);
    b = hs_profiles_new("t");
    assert_int_equal(hs_exporter_file.consume_profiles(fx->c, b), HS_EAGAIN);
}

/* An OTLP request of two profiles of checkout (one with a linked sample), decoded into a batch;
 * its protobuf bytes into `wire`. */
static struct hs_profiles *otlp_batch(const char *tenant, struct hs_buf *wire)
{
    struct hs_profiles *batch = ob_checkout_batch(tenant, wire, 0);
    assert_non_null(batch);
    return batch;
}

/* An OTLP request is one line of OTLP/JSON that reads back to the very request, whether or not
 * another exporter converted its profiles to pprof first; its Profile messages are counted. */
static void test_otlp_profiles_line(void **state)
{
    struct fixture *fx = *state;
    create_and_start(fx, "path: %s\n");
    struct hs_buf wire = {0};
    struct hs_profiles *b = otlp_batch("t1", &wire);
    char err[256];
    assert_int_equal(hs_profiles_to_pprof(b, err, sizeof(err)), 0); /* as pyroscope would */
    assert_int_equal(hs_exporter_file.consume_profiles(fx->c, b), 0);
    size_t len;
    char *text = slurp(fx->path, &len);
    assert_true(len > 0 && text[len - 1] == '\n');
    assert_null(memchr(text, '\n', len - 1)); /* one line */
    json_t *root = json_loadb(text, len, 0, NULL);
    assert_non_null(root);
    assert_true(json_is_array(json_object_get(root, "resourceProfiles")));
    assert_true(json_is_object(json_object_get(root, "dictionary")));
    json_decref(root);
    struct hs_profiles *back = hs_profiles_new(NULL);
    assert_int_equal(hs_otlp_profiles_decode_json(back, text, len, NULL, err, sizeof(err)), 0);
    assert_int_equal(back->request_len, wire.len);
    assert_memory_equal(back->request, wire.data, wire.len);
    hs_profiles_unref(back);
    free(text);
    hs_buf_free(&wire);
    assert_int_equal(metric(fx, "hotspan_exporter_sent_profiles_total{exporter=\"file/x\"} "), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writes_json_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_otlp_profiles_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_failure_keeps_writing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_full_drops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_write_cut_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_fails_on_bad_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profile_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profile_null_tenant_and_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
