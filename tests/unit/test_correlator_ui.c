/* test_correlator_ui.c: the correlator's /ui ring and pages: the ring's bound and eviction, the
 * snapshot's caps (stacks, depth, frames) and merging, HTML escaping of client-sent names, and
 * the pages rendered for a slow N+1 span annotated by the real correlator (rows, flame graph
 * frames, hot path, grown functions, links, 404), and one tenant at a time. */
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
#include "core/component.h"
#include "core/config.h"
#include "core/metrics.h"
#include "otlp_build.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "processors/correlator/correlator_int.h"

#include "correlator_fixture.h"

#define XSS "app.<script>alert(\"x\")</script>'&"

static struct hs_profile *userdb(int64_t from_s, int64_t until_s, bool slow)
{
    const struct pstack st[] = {
        {{MAIN, HANDLE, FIND, LOADP, QUERY}, slow ? 31 : 3, NULL},
        {{MAIN, HANDLE, FIND, LOADP}, slow ? 21 : 2, NULL},
        {{MAIN, HANDLE, FIND}, slow ? 13 : 10, NULL},
        {{MAIN, HANDLE, HEALTH}, slow ? 28 : 80, NULL},
        {{MAIN, XSS}, slow ? 7 : 5, NULL},
    };
    return mkprofile("user-db", from_s, until_s, st, HS_ARRAY_SIZE(st));
}

static struct correlator *corr(struct fx *f)
{
    return hs_container_of(f->c, struct correlator, base);
}

static char *render_list(const struct correlator *c)
{
    struct hs_buf b = {0};
    assert_int_equal(hs_corr_ui_render_list(&c->ui, &c->conf, NULL, true, &b), 0);
    hs_buf_putc(&b, 0);
    return (char *)b.data;
}

static char *render_span(const struct correlator *c, const char *hex)
{
    struct hs_buf b = {0};
    int rc = hs_corr_ui_render_span(&c->ui, &c->conf, (struct hs_str){hex, strlen(hex)}, NULL, &b);
    if (rc == HS_ENOENT) {
        assert_int_equal(b.len, 0);
        return NULL;
    }
    assert_int_equal(rc, 0);
    hs_buf_putc(&b, 0);
    return (char *)b.data;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- the ring --------------------------------------------------------------------------- */

static struct corr_span fake_span(char *name, uint8_t *id)
{
    struct corr_span s = {.tenant = {"", 0},
                          .service = HS_STR("svc"),
                          .name = {name, strlen(name)},
                          .trace_id = {(char *)id, 16},
                          .span_id = {(char *)id, 8},
                          .start_ns = S(1),
                          .end_ns = S(1) + MS(700)};
    snprintf(s.slow_reason, sizeof(s.slow_reason), "threshold 500ms");
    return s;
}

static void test_ring_bound_and_eviction(void **state)
{
    struct corr_ui ui;
    hs_corr_ui_init(&ui, 3);
    char names[5][8];
    uint8_t ids[5][16];
    for (int i = 0; i < 5; i++) {
        snprintf(names[i], sizeof(names[i]), "s%d", i);
        memset(ids[i], 0xa0 + i, sizeof(ids[i]));
        struct corr_span sp = fake_span(names[i], ids[i]);
        struct corr_note n = {
            .span = &sp, .kind = CORR_MATCH_NONE, .reason = CORR_REASON_TIMEOUT, .cpu_share = -1};
        hs_corr_ui_record(&ui, &n);
        assert_int_equal(ui.n, i < 3 ? i + 1 : 3);
        size_t sum = 0;
        for (uint32_t k = 0; k < ui.n; k++)
            sum += hs_corr_ui_get(&ui, k)->bytes;
        assert_true(sum > 0);
        assert_int_equal(ui.bytes, sum); /* the gauge: every entry counted, the evicted not */
    }
    assert_int_equal(ui.seq, 5);
    assert_null(hs_corr_ui_get(&ui, 3));
    assert_string_equal(hs_corr_ui_get(&ui, 0)->name, "s4"); /* newest first */
    assert_string_equal(hs_corr_ui_get(&ui, 1)->name, "s3");
    assert_string_equal(hs_corr_ui_get(&ui, 2)->name, "s2");
    assert_null(hs_corr_ui_find(&ui, HS_STR("a0a0a0a0a0a0a0a0"), NULL)); /* evicted */
    assert_null(hs_corr_ui_find(&ui, HS_STR("a1a1a1a1a1a1a1a1"), NULL));
    const struct corr_ui_entry *e = hs_corr_ui_find(&ui, HS_STR("A3A3A3A3A3A3A3A3"), NULL);
    assert_non_null(e);
    assert_string_equal(e->name, "s3");
    assert_string_equal(e->span_hex, "a3a3a3a3a3a3a3a3");
    assert_string_equal(e->trace_hex, "a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3");
    assert_int_equal(e->dur_ns, MS(700));
    assert_int_equal(e->reason, CORR_REASON_TIMEOUT);
    assert_null(hs_corr_ui_find(&ui, HS_STR("a3a3"), NULL));
    hs_corr_ui_free(&ui);
    assert_int_equal(ui.bytes, 0);
}

static void record_as(struct corr_ui *ui, const char *tenant, char *name, uint8_t *id)
{
    struct corr_span sp = fake_span(name, id);
    sp.tenant = (struct hs_str){tenant, strlen(tenant)};
    struct corr_note n = {
        .span = &sp, .kind = CORR_MATCH_NONE, .reason = CORR_REASON_TIMEOUT, .cpu_share = -1};
    hs_corr_ui_record(ui, &n);
}

static char *list_of(const struct corr_ui *ui, const char *tenant, bool choose)
{
    struct corr_config conf = {0};
    struct hs_buf b = {0};
    assert_int_equal(hs_corr_ui_render_list(ui, &conf, tenant, choose, &b), 0);
    hs_buf_putc(&b, 0);
    return (char *)b.data;
}

/* The span page's name, or NULL when it is not found for that tenant. */
static char *span_of(const struct corr_ui *ui, const char *hex, const char *tenant)
{
    struct corr_config conf = {0};
    struct hs_buf b = {0};
    if (hs_corr_ui_render_span(ui, &conf, (struct hs_str){hex, strlen(hex)}, tenant, &b) != 0)
        return NULL;
    hs_buf_putc(&b, 0);
    return (char *)b.data;
}

/* /ui shows one tenant at a time: a tenant's view lists its spans only and names no other
 * tenant; an operator's defaults to the newest span's tenant and links each tenant kept; a span
 * page is found within the tenant asked for, so a span id another tenant reused (ids are the
 * client's) shows the asker's own span, and another tenant's span is not found. */
static void test_one_tenant_at_a_time(void **state)
{
    struct corr_ui ui;
    hs_corr_ui_init(&ui, 8);
    uint8_t ida1[16], idb1[16], ida2[16];
    memset(ida1, 0xa1, 16);
    memset(idb1, 0xb1, 16);
    memset(ida2, 0xa2, 16);
    char a1[] = "a-first", b1[] = "b-first", bdup[] = "b-reused-id", a2[] = "a-newest";
    record_as(&ui, "a", a1, ida1);
    record_as(&ui, "b", b1, idb1);
    record_as(&ui, "b", bdup, ida1); /* tenant b's span with tenant a's span id */
    record_as(&ui, "a", a2, ida2);

    char *html = list_of(&ui, "b", false); /* tenant b's token */
    assert_non_null(strstr(html, b1));
    assert_non_null(strstr(html, bdup));
    assert_null(strstr(html, "a-"));
    assert_null(strstr(html, "tenant=a"));
    assert_non_null(strstr(html, "<p id=\"tenants\">Tenant: <b>b</b></p>"));
    assert_non_null(strstr(html, "<a href=\"/ui/span/a1a1a1a1a1a1a1a1?tenant=b\">"));
    free(html);

    html = list_of(&ui, NULL, true); /* an operator without ?tenant=: the newest span's, a */
    assert_non_null(strstr(html, a1));
    assert_non_null(strstr(html, a2));
    assert_null(strstr(html, "b-"));
    assert_non_null(strstr(html, "Tenant: <b><a href=\"/ui?tenant=a\">a</a></b> "
                                 "<a href=\"/ui?tenant=b\">b</a></p>"));
    assert_non_null(strstr(html, "2 of the newest 4 of 4 annotated"));
    free(html);
    html = list_of(&ui, "b", true);
    assert_non_null(strstr(html, b1));
    assert_null(strstr(html, a2));
    free(html);
    html = list_of(&ui, "c", false);
    assert_non_null(strstr(html, "id=\"empty\""));
    assert_null(strstr(html, "<table"));
    free(html);

    html = span_of(&ui, "a1a1a1a1a1a1a1a1", "b");
    assert_non_null(html);
    assert_non_null(strstr(html, bdup));
    assert_null(strstr(html, a1));
    assert_non_null(strstr(html, "<a href=\"/ui?tenant=b\">&larr;"));
    free(html);
    html = span_of(&ui, "a1a1a1a1a1a1a1a1", "a");
    assert_non_null(strstr(html, a1));
    free(html);
    assert_null(span_of(&ui, "a2a2a2a2a2a2a2a2", "b")); /* another tenant's span: not found */
    html = span_of(&ui, "a2a2a2a2a2a2a2a2", NULL);      /* an operator's, by its id alone */
    assert_non_null(strstr(html, a2));
    free(html);
    hs_corr_ui_free(&ui);

    /* no tenants in use: no tenant bar, the list as it always was */
    hs_corr_ui_init(&ui, 2);
    record_as(&ui, "", a1, ida1);
    html = list_of(&ui, NULL, true);
    assert_non_null(strstr(html, a1));
    assert_null(strstr(html, "id=\"tenants\""));
    assert_non_null(strstr(html, "<a href=\"/ui/span/a1a1a1a1a1a1a1a1\">"));
    free(html);
    hs_corr_ui_free(&ui);
}

/* A fake service of `nf` functions "fn0".. for the snapshot. */
static struct corr_svc *fake_svc(uint32_t nf)
{
    struct corr_svc *s = calloc(1, sizeof(*s));
    s->names = calloc(nf, sizeof(*s->names));
    for (uint32_t i = 0; i < nf; i++) {
        char b[32];
        snprintf(b, sizeof(b), "fn%u", i);
        s->names[i].name = s->names[i].disp = strdup(b);
    }
    s->nnames = nf;
    return s;
}

static void free_svc(struct corr_svc *s)
{
    for (uint32_t i = 0; i < s->nnames; i++)
        free(s->names[i].name);
    free(s->names);
    free(s);
}

/* nst distinct stacks of `depth` frames (+1 duplicate of the first); returns the entry. */
static const struct corr_ui_entry *record_stacks(struct corr_ui *ui, struct corr_svc *svc,
                                                 uint32_t nst, uint32_t depth, uint32_t **fids)
{
    struct corr_mstack *st = calloc(nst + 1, sizeof(*st));
    *fids = calloc((size_t)nst * depth, sizeof(**fids));
    for (uint32_t i = 0; i < nst; i++) {
        uint32_t *f = *fids + i * depth;
        for (uint32_t d = 0; d < depth; d++)
            f[d] = d % svc->nnames;
        f[depth - 1] = i % svc->nnames; /* distinct by the last two frames */
        if (depth > 1)
            f[depth - 2] = (f[depth - 2] + i / svc->nnames) % svc->nnames;
        st[i] = (struct corr_mstack){f, depth, 1000 - (int64_t)i};
    }
    st[nst] = (struct corr_mstack){*fids, depth, 5000}; /* the same frames as stack 0 */
    uint8_t id[16] = {1};
    char name[] = "GET /x";
    struct corr_span sp = fake_span(name, id);
    struct corr_note n = {.span = &sp,
                          .kind = CORR_MATCH_WINDOW,
                          .svc = svc,
                          .type = "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
                          .stacks = st,
                          .nstacks = nst + 1,
                          .total = 1,
                          .cpu_share = -1};
    hs_corr_ui_record(ui, &n);
    free(st);
    return hs_corr_ui_get(ui, 0);
}

static void test_snapshot_caps(void **state)
{
    struct corr_ui ui;
    hs_corr_ui_init(&ui, 2);
    struct corr_svc *svc = fake_svc(200);
    uint32_t *fids;
    /* 300 shallow stacks: the 256 heaviest are kept, the merged duplicate first */
    const struct corr_ui_entry *e = record_stacks(&ui, svc, 300, 3, &fids);
    free(fids);
    assert_int_equal(e->nstacks, CORR_UI_STACKS);
    assert_int_equal(e->cut_stacks, 300 - CORR_UI_STACKS);
    assert_int_equal(e->cut_frames, 0);
    assert_int_equal(e->stacks[0].value, 6000); /* 1000 + 5000, merged */
    assert_int_equal(e->stacks[1].value, 999);
    int64_t cut = 0;
    for (uint32_t i = CORR_UI_STACKS; i < 300; i++)
        cut += 1000 - (int64_t)i;
    assert_int_equal(e->cut_value, cut);
    int64_t kept = 0;
    for (uint32_t i = 0; i < e->nstacks; i++)
        kept += e->stacks[i].value;
    assert_int_equal(e->total, kept + cut); /* the root is never narrower than its stacks */
    assert_int_equal(ui.cut->value, 300 - CORR_UI_STACKS);
    /* 100 deep stacks: each cut to 64 frames, and only as many as 4096 frames hold */
    e = record_stacks(&ui, svc, 100, 100, &fids);
    free(fids);
    uint32_t fit = CORR_UI_FRAMES / CORR_UI_DEPTH;
    assert_int_equal(e->nstacks, fit);
    assert_int_equal(e->nframes, fit * CORR_UI_DEPTH);
    for (uint32_t i = 0; i < e->nstacks; i++) {
        assert_int_equal(e->stacks[i].depth, CORR_UI_DEPTH);
        assert_string_equal(e->names[e->frames[e->stacks[i].first]], "fn0"); /* root-most kept */
    }
    assert_int_equal(e->cut_stacks, 100 - fit);
    assert_int_equal(e->cut_frames, fit * (100 - CORR_UI_DEPTH));
    assert_true(e->bytes <= CORR_UI_ENTRY_BYTES);
    assert_true(e->nnames <= svc->nnames);
    assert_int_equal(ui.bytes, hs_corr_ui_get(&ui, 0)->bytes + hs_corr_ui_get(&ui, 1)->bytes);
    hs_corr_ui_free(&ui);
    free_svc(svc);
}

static void test_escaping(void **state)
{
    struct hs_buf b = {0};
    const char in[] = "<script>alert(\"x\")</script>'&\x01";
    hs_corr_html_escape(&b, in, sizeof(in) - 1);
    hs_buf_putc(&b, 0);
    assert_string_equal((char *)b.data, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;"
                                        "&amp;\xEF\xBF\xBD");
    hs_buf_free(&b);
}

/* ---- the pages of a real annotation ------------------------------------------------------ */

static Span *mkspan(const char *name, uint8_t seed, uint64_t start, uint64_t dur_ns)
{
    Span *s = span(name, seed);
    s->start_time_unix_nano = start;
    s->end_time_unix_nano = start + dur_ns;
    return s;
}

static struct hs_traces *traces_of(const char *service, size_t n, Span **sp)
{
    Request *r = request(service, 1, (ScopeSpans **)list(1, scope_spans("sc", n, sp)));
    struct bytes b = pack(r);
    uint8_t *p = malloc(b.len);
    memcpy(p, b.p, b.len);
    return hs_traces_wrap(p, b.len, b.len, (uint32_t)n, 1);
}

/* A slow "findByEmail" with 12 "SELECT preferences" children, after two normal minutes (the
 * baseline) and the slow one. */
static void nplus1_scenario(struct fx *f, const char *span_name)
{
    assert_int_equal(send_profiles(f, NULL, userdb(-60, -50, false)), 0);
    assert_int_equal(send_profiles(f, NULL, userdb(-50, -40, false)), 0);
    assert_int_equal(send_profiles(f, NULL, userdb(0, 5, true)), 0);
    assert_int_equal(send_profiles(f, NULL, userdb(5, 10, true)), 0);
    Span *sp[13];
    sp[0] = mkspan(span_name, 7, S(2), MS(612));
    for (int i = 1; i < 13; i++) {
        sp[i] = mkspan("SELECT preferences", (uint8_t)(20 + i), S(2) + MS(i), MS(3));
        sp[i]->trace_id = sp[0]->trace_id;
        sp[i]->parent_span_id = sp[0]->span_id;
        sp[i]->n_attributes = 1;
        sp[i]->attributes =
            (KV **)list(1, kv("db.statement", any_str("SELECT * FROM preferences WHERE id = 42")));
    }
    assert_int_equal(CT.consume_traces(f->c, traces_of("user-db", 13, sp)), 0);
    assert_int_equal(hs_correlator_parked(f->c), 0); /* its profile was there: annotated at once */
}

static void test_pages_of_an_nplus1_span(void **state)
{
    struct fx f;
    setup(&f, "{pyroscope_url: 'http://pyro:4040/', ui: {recent: 4, grafana_url: "
              "'http://grafana:3000/', tempo_datasource: 'tmp\"o'}}");
    struct correlator *c = corr(&f);
    char *html = render_list(c);
    assert_non_null(strstr(html, "id=\"empty\"")); /* the empty state */
    assert_null(strstr(html, "<table"));
    free(html);
    nplus1_scenario(&f, "findByEmail");
    assert_int_equal(c->ui.n, 1);
    const struct corr_ui_entry *e = hs_corr_ui_get(&c->ui, 0);
    assert_string_equal(e->span_hex, "6b6c6d6e6f707172"); /* seed 7 + 100 */
    assert_int_equal(e->kind, CORR_MATCH_WINDOW);
    assert_int_equal(e->nplus1, 12);
    assert_true(e->bytes < 4096); /* sized by what it keeps, not by the caps */
    assert_int_equal(c->ui.bytes, e->bytes);
    html = render_list(c);
    assert_null(strstr(html, "id=\"empty\""));
    assert_non_null(strstr(html, "<td>user-db</td><td><a href=\"/ui/span/6b6c6d6e6f707172\">"
                                 "findByEmail</a></td><td class=\"num\">612 ms</td><td><span "
                                 "class=\"m m-window\">window</span></td><td>"
                                 "UserRepository.loadPreferences <span class=\"sub\">"));
    assert_non_null(strstr(html, "<td class=\"num\">12</td>"));
    assert_non_null(strstr(html, "<td class=\"mono\">2024-05-29 16:26:42.000</td>"));
    free(html);

    html = render_span(c, "6B6C6D6E6F707172");
    assert_non_null(html);
    /* the annotations */
    assert_non_null(strstr(html, "<tr><th>Slow because</th><td>threshold 500ms</td></tr>"));
    assert_non_null(strstr(html, "<ol id=\"top\"><li>UserRepository.loadPreferences "));
    assert_non_null(strstr(html, "<span id=\"hot-path\">UserRepository.findByEmail &gt; "
                                 "UserRepository.loadPreferences &gt; Client.query</span>"));
    assert_non_null(strstr(html, "N+1: <b id=\"nplus1\">12</b> alike children: <code>SELECT * "
                                 "FROM preferences WHERE id = ?</code>"));
    assert_non_null(strstr(html, "href=\"http://pyro:4040/?query=process_cpu%3Acpu"));
    /* Grafana: Explore on the trace id, the data source uid JSON- then URL-escaped */
    assert_non_null(strstr(html, "href=\"http://grafana:3000/explore?schemaVersion=1&amp;orgId=1"
                                 "&amp;panes=%7B%22hs%22%3A%7B%22datasource%22%3A%22tmp%5C%22o"));
    assert_non_null(strstr(html, "%22query%22%3A%220708090a0b0c0d0e0f10111213141516%22"));
    /* the flame graph: the subtree under findByEmail, every frame named, the hot path outlined */
    assert_non_null(strstr(html, "<svg class=\"flame\""));
    assert_non_null(strstr(html, "<text x=\"4\" y=\"12.5\">UserRepository.findByEmail</text>"));
    assert_non_null(strstr(html, "<text x=\"4\" y=\"12.5\">UserRepository.loadPreferences"
                                 "</text>"));
    assert_non_null(strstr(html, "<text x=\"4\" y=\"12.5\">Client.query</text>"));
    assert_int_equal(count(html, "class=\"fr hot\""), 4); /* all > find > loadP > query */
    assert_int_equal(count(html, "class=\"fr\""), 0);     /* nothing else under findByEmail */
    /* the root spans the full width */
    assert_non_null(strstr(html, "<svg x=\"0.00\" y=\"0\" width=\"1200.00\" height=\"17\" "
                                 "class=\"fr hot\"><title>all — 100.0%"));
    /* grown against the baseline */
    assert_non_null(strstr(html, "<table id=\"grown\">"));
    assert_non_null(strstr(html, "<tr><td>UserRepository.loadPreferences</td><td class=\"num\">"
                                 "52%</td><td class=\"num\">5%</td><td class=\"num\">+47pp"));
    free(html);
    assert_null(render_span(c, "0000000000000001"));
    assert_null(render_span(c, "6b6c"));
    teardown(&f);
}

/* A function and a span name carrying markup render as text. */
static void test_client_names_are_escaped(void **state)
{
    struct fx f;
    setup(&f, "{}");
    struct correlator *c = corr(&f);
    nplus1_scenario(&f, "<img src=x onerror=alert(1)>");
    char *html = render_list(c);
    assert_null(strstr(html, "<img"));
    assert_non_null(strstr(html, "&lt;img src=x onerror=alert(1)&gt;"));
    free(html);
    html = render_span(c, hs_corr_ui_get(&c->ui, 0)->span_hex);
    assert_null(strstr(html, "<img"));
    assert_null(strstr(html, "<script"));
    /* a window match (no function named like the span): the XSS frame is in the graph */
    assert_non_null(strstr(html, "<text x=\"4\" y=\"12.5\">app.&lt;script&gt;alert(&quot;x&quot;)"
                                 "&lt;/script&gt;&#39;&amp;</text>"));
    assert_non_null(
        strstr(html, "<title>user-db &lt;img src=x onerror=alert(1)&gt; · hotspan</title>"));
    /* no links configured */
    assert_non_null(strstr(html, "none configured"));
    free(html);
    teardown(&f);
}

static void test_disabled_keeps_nothing(void **state)
{
    struct fx f;
    setup(&f, "{ui: {enabled: false}}");
    nplus1_scenario(&f, "findByEmail");
    assert_int_equal(corr(&f)->ui.cap, 0);
    assert_int_equal(corr(&f)->ui.n, 0);
    assert_int_equal(corr(&f)->ui.bytes, 0);
    teardown(&f);
}

static void test_recent_bounds(void **state)
{
    struct hs_error err = {0};
    struct hs_config_doc doc;
    const char *bad = "{ui: {recent: 0}}";
    assert_int_equal(hs_config_parse("t.yaml", bad, strlen(bad), &doc, &err), 0);
    struct hs_component *c = NULL;
    assert_int_equal(CT.create(doc.root, "processors.correlator", &c, &err), HS_EINVAL);
    assert_true(err.count >= 1);
    assert_non_null(strstr(err.lines[0], "processors.correlator.ui.recent"));
    hs_error_free(&err);
    hs_config_doc_free(&doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_bound_and_eviction),
        cmocka_unit_test(test_one_tenant_at_a_time),
        cmocka_unit_test(test_snapshot_caps),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_pages_of_an_nplus1_span),
        cmocka_unit_test(test_client_names_are_escaped),
        cmocka_unit_test(test_disabled_keeps_nothing),
        cmocka_unit_test(test_recent_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
