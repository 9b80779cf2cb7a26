/* ui_html.c: the /ui pages as server-rendered HTML with inline CSS and SVG, no script and no
 * external asset: the list of recent slow spans, and one span's annotations, flame graph of its
 * matched samples (hot path outlined) and functions grown against the baseline. Everything
 * from clients is HTML-escaped; a page stops adding rows or frames past PAGE_MAX. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "processors/correlator/correlator_int.h"

#define PAGE_MAX (4u << 20)
#define FLAME_W 1200.0
#define FLAME_ROW 18u
#define FLAME_MIN_PX 0.5 /* frames narrower than this are not drawn (they are counted) */
#define FLAME_TEXT_PX 12.0

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2129;background:#f7f8fa}"
    "header{background:#1d2129;color:#fff;padding:10px 20px}"
    "header a{color:#ffb347;font-weight:600;text-decoration:none}"
    "main{padding:12px 20px;max-width:1400px}"
    "h1{font-size:20px;margin:8px 0}h2{font-size:16px;margin:20px 0 8px}"
    "table{border-collapse:collapse;background:#fff;width:100%}"
    "th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e3e6ea;vertical-align:top}"
    "th{background:#eef0f3;font-weight:600}td.num,th.num{text-align:right}"
    "table.kv th{width:170px}table.kv ol{margin:0;padding-left:20px}"
    "code,.mono{font-family:ui-monospace,monospace;font-size:13px}"
    ".m{padding:1px 6px;border-radius:8px;font-size:12px}.m-span{background:#cdeccd}"
    ".m-window{background:#fde6b8}.m-none{background:#e3e6ea}"
    ".empty,.sub{color:#5b6370}"
    ".flame{background:#fff;border:1px solid #e3e6ea;display:block}"
    ".flame text{font:11px ui-monospace,monospace;fill:#1d2129}"
    ".fr.hot>rect{stroke:#1746c7;stroke-width:2}"
    ".bar{display:inline-block;height:10px;background:#f08a4b;vertical-align:middle}"
    ".bar.base{background:#9aa3ad}"
    "footer{color:#8a919b;padding:10px 20px;font-size:12px}";

static void esc(struct hs_buf *b, const char *s)
{
    if (s)
        hs_corr_html_escape(b, s, strlen(s));
}

static void page_open(struct hs_buf *b, const char *title)
{
    hs_buf_printf(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                     /* no favicon request (it would be a 404 in the browser's console) */
                     "<link rel=\"icon\" href=\"data:,\">"
                     "<title>");
    esc(b, title);
    hs_buf_printf(b,
                  " · hotspan</title><style>%s</style></head><body><header>"
                  "<a href=\"/ui\">hotspan</a> &nbsp;slow spans</header><main>\n",
                  css);
}

static void page_close(struct hs_buf *b)
{
    hs_buf_printf(b,
                  "</main><footer>hotspan %s · the correlator's recent slow spans"
                  "</footer></body></html>\n",
                  HS_VERSION);
}

void hs_corr_ui_render_message(struct hs_buf *b, const char *title, const char *text)
{
    page_open(b, title);
    hs_buf_printf(b, "<h1>");
    esc(b, title);
    hs_buf_printf(b, "</h1><p class=\"empty\" id=\"message\">");
    esc(b, text);
    hs_buf_printf(b, "</p>");
    page_close(b);
}

void hs_corr_ui_render_not_found(struct hs_buf *b)
{
    page_open(b, "not found");
    hs_buf_printf(b, "<h1>Not found</h1><p class=\"empty\">No such span among the recent slow "
                     "spans (the oldest leave as new ones come). <a href=\"/ui\">Back to the "
                     "list</a>.</p>");
    page_close(b);
}

/* ---- formatting ------------------------------------------------------------------------- */

static void put_time(struct hs_buf *b, uint64_t ns)
{
    time_t t = (time_t)(ns / 1000000000u);
    struct tm tm;
    char s[32];
    if (!gmtime_r(&t, &tm) || strftime(s, sizeof(s), "%Y-%m-%d %H:%M:%S", &tm) == 0) {
        hs_buf_printf(b, "?");
        return;
    }
    hs_buf_printf(b, "%s.%03u", s, (unsigned)(ns / 1000000u % 1000u));
}

static void put_dur(struct hs_buf *b, uint64_t ns)
{
    if (ns >= 10000000000u)
        hs_buf_printf(b, "%.1f s", (double)ns / 1e9);
    else if (ns >= 10000000u)
        hs_buf_printf(b, "%.0f ms", (double)ns / 1e6);
    else if (ns >= 1000000u)
        hs_buf_printf(b, "%.1f ms", (double)ns / 1e6);
    else
        hs_buf_printf(b, "%.0f µs", (double)ns / 1e3);
}

/* A sample value in the profile type's unit ("...:cpu:nanoseconds:..." -> a duration). */
static void put_value(struct hs_buf *b, const char *type, int64_t v)
{
    const char *u = type ? strchr(type, ':') : NULL;
    u = u ? strchr(u + 1, ':') : NULL;
    if (u && strncmp(u + 1, "nanoseconds", 11) == 0 && v >= 0) {
        put_dur(b, (uint64_t)v);
        return;
    }
    hs_buf_printf(b, "%" PRId64, v);
    if (u) {
        const char *end = strchr(u + 1, ':');
        hs_buf_putc(b, ' ');
        hs_corr_html_escape(b, u + 1, end ? (size_t)(end - u - 1) : strlen(u + 1));
    }
}

static const char *kind_name(enum corr_match k)
{
    return k == CORR_MATCH_SPAN ? "span" : k == CORR_MATCH_WINDOW ? "window" : "none";
}

static void put_match(struct hs_buf *b, const struct corr_ui_entry *e)
{
    const char *k = kind_name(e->kind);
    hs_buf_printf(b, "<span class=\"m m-%s\">%s</span>", k, k);
    if (e->kind == CORR_MATCH_NONE && *hs_corr_reason_name(e->reason))
        hs_buf_printf(b, " <span class=\"sub\">%s</span>", hs_corr_reason_name(e->reason));
}

/* ---- the list --------------------------------------------------------------------------- */

/* "?tenant=<id>" when the entry has a tenant: a span id is the client's to choose, so a link
 * names whose span it means. URL-escaped, so nothing in it needs HTML escaping. */
static void tenant_query(struct hs_buf *b, const char *tenant)
{
    if (!*tenant)
        return;
    hs_buf_printf(b, "?tenant=");
    hs_corr_url_escape(b, tenant);
}

static void span_href(struct hs_buf *b, const struct corr_ui_entry *e)
{
    hs_buf_printf(b, "<a href=\"/ui/span/%s", e->span_hex);
    tenant_query(b, e->tenant);
    hs_buf_printf(b, "\">");
}

static void list_row(struct hs_buf *b, const struct corr_ui_entry *e)
{
    hs_buf_printf(b, "<tr><td class=\"mono\">");
    put_time(b, e->start_ns);
    hs_buf_printf(b, "</td><td>");
    esc(b, e->service);
    hs_buf_printf(b, "</td><td>");
    span_href(b, e);
    esc(b, e->name);
    hs_buf_printf(b, "</a></td><td class=\"num\">");
    put_dur(b, e->dur_ns);
    hs_buf_printf(b, "</td><td>");
    put_match(b, e);
    hs_buf_printf(b, "</td><td>");
    if (e->ntop) {
        esc(b, e->names[e->top[0].name]);
        hs_buf_printf(b, " <span class=\"sub\">%.0f%%</span>", 100.0 * e->top[0].share);
    } else {
        hs_buf_printf(b, "—");
    }
    if (e->nplus1)
        hs_buf_printf(b, "</td><td class=\"num\">%u", e->nplus1);
    else
        hs_buf_printf(b, "</td><td class=\"num\">—");
    hs_buf_printf(b, "</td><td>");
    span_href(b, e);
    hs_buf_printf(b, "details</a></td></tr>\n");
}

#define UI_TENANTS 64 /* tenants an operator's list links to */

/* The operator's tenant bar: a link to each tenant kept (newest first), the shown one marked. */
static void tenant_bar(struct hs_buf *b, const struct corr_ui *ui, const char *shown)
{
    const char *seen[UI_TENANTS];
    uint32_t n = 0, more = 0;
    for (uint32_t i = 0; i < ui->n; i++) {
        const char *t = hs_corr_ui_get(ui, i)->tenant;
        uint32_t k = 0;
        while (k < n && strcmp(seen[k], t) != 0)
            k++;
        if (k == n && n < UI_TENANTS)
            seen[n++] = t;
        else if (k == n)
            more++;
    }
    if (n == 0 || (n == 1 && !*seen[0] && !*shown))
        return; /* no tenants in use: nothing to choose */
    hs_buf_printf(b, "<p id=\"tenants\">Tenant:");
    for (uint32_t k = 0; k < n; k++) {
        bool cur = strcmp(seen[k], shown) == 0;
        hs_buf_printf(b, " %s<a href=\"/ui?tenant=", cur ? "<b>" : "");
        hs_corr_url_escape(b, seen[k]);
        hs_buf_printf(b, "\">");
        if (*seen[k])
            esc(b, seen[k]);
        else
            hs_buf_printf(b, "(none)");
        hs_buf_printf(b, "</a>%s", cur ? "</b>" : "");
    }
    if (more)
        hs_buf_printf(b, " <span class=\"sub\">and %u more (<code>?tenant=</code>)</span>", more);
    hs_buf_printf(b, "</p>\n");
}

int hs_corr_ui_render_list(const struct corr_ui *ui, const struct corr_config *conf,
                           const char *tenant, bool choose, struct hs_buf *b)
{
    if (!tenant) /* an operator who did not choose: the newest span's tenant */
        tenant = ui->n ? hs_corr_ui_get(ui, 0)->tenant : "";
    uint32_t mine = 0;
    for (uint32_t i = 0; i < ui->n; i++)
        mine += strcmp(hs_corr_ui_get(ui, i)->tenant, tenant) == 0;
    page_open(b, "recent slow spans");
    hs_buf_printf(b, "<h1>Recent slow spans</h1>\n");
    if (choose) {
        tenant_bar(b, ui, tenant);
    } else { /* a tenant's token: its own name, no other */
        hs_buf_printf(b, "<p id=\"tenants\">Tenant: <b>");
        esc(b, tenant);
        hs_buf_printf(b, "</b></p>\n");
    }
    if (mine == 0) {
        hs_buf_printf(b, "<p class=\"empty\" id=\"empty\">No slow spans yet. A span slower than "
                         "the correlator's <code>slow</code> settings shows here once it is "
                         "annotated, with its flame graph.</p>\n");
        page_close(b);
        return 0;
    }
    if (choose)
        hs_buf_printf(b,
                      "<p class=\"sub\">%u of the newest %u of %" PRIu64 " annotated since start "
                      "(<code>ui.recent</code> keeps %u).</p>\n",
                      mine, ui->n, ui->seq, ui->cap);
    hs_buf_printf(b, "<table class=\"spans\"><thead><tr><th>Start (UTC)</th><th>Service</th>"
                     "<th>Span</th><th class=\"num\">Duration</th><th>Match</th>"
                     "<th>Top function</th><th class=\"num\">N+1</th><th></th></tr></thead>"
                     "<tbody>\n");
    uint32_t i = 0, shown = 0;
    for (; i < ui->n && b->len < PAGE_MAX; i++) {
        const struct corr_ui_entry *e = hs_corr_ui_get(ui, i);
        if (strcmp(e->tenant, tenant) == 0) {
            list_row(b, e);
            shown++;
        }
    }
    hs_buf_printf(b, "</tbody></table>\n");
    if (shown < mine)
        hs_buf_printf(b,
                      "<p class=\"sub\">%u older spans not shown: the page is at its size "
                      "bound.</p>\n",
                      mine - shown);
    page_close(b);
    return 0;
}

/* ---- one span: annotations -------------------------------------------------------------- */

static void json_str(struct hs_buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            hs_buf_printf(b, "\\%c", ch);
        else if (ch < 0x20)
            hs_buf_printf(b, "\\u%04x", ch);
        else
            hs_buf_putc(b, ch);
    }
}

/* Grafana Explore on the trace id, over an hour either side of the span: the panes state of
 * Explore's URL (schemaVersion 1) with one TraceQL query by trace id. */
static void grafana_link(struct hs_buf *u, const struct corr_config *conf,
                         const struct corr_ui_entry *e)
{
    const char *base = conf->ui.grafana_url;
    const char *ds = conf->ui.tempo_datasource ? conf->ui.tempo_datasource : "tempo";
    size_t bl = strlen(base);
    uint64_t from = e->start_ns / 1000000u, to = (e->start_ns + e->dur_ns) / 1000000u + 3600000u;
    from = from > 3600000u ? from - 3600000u : 0;
    struct hs_buf j = {0};
    hs_buf_printf(&j, "{\"hs\":{\"datasource\":\"");
    json_str(&j, ds);
    hs_buf_printf(&j, "\",\"queries\":[{\"refId\":\"A\",\"datasource\":{\"type\":\"tempo\","
                      "\"uid\":\"");
    json_str(&j, ds);
    hs_buf_printf(&j,
                  "\"},\"queryType\":\"traceql\",\"query\":\"%s\"}],\"range\":{\"from\":"
                  "\"%" PRIu64 "\",\"to\":\"%" PRIu64 "\"}}}",
                  e->trace_hex, from, to);
    hs_buf_putc(&j, 0);
    hs_buf_printf(u, "%.*s/explore?schemaVersion=1&orgId=1&panes=",
                  (int)(bl && base[bl - 1] == '/' ? bl - 1 : bl), base);
    hs_corr_url_escape(u, (const char *)j.data);
    hs_buf_free(&j);
}

/* One row of the annotations table; the value follows, then row_end. */
static void row(struct hs_buf *b, const char *k)
{
    hs_buf_printf(b, "<tr><th>%s</th><td>", k);
}

static void row_end(struct hs_buf *b)
{
    hs_buf_printf(b, "</td></tr>\n");
}

static void put_links(struct hs_buf *b, const struct corr_config *conf,
                      const struct corr_ui_entry *e)
{
    bool any = false;
    if (e->link) {
        hs_buf_printf(b, "<a id=\"pyroscope\" rel=\"noopener noreferrer\" href=\"");
        esc(b, e->link);
        hs_buf_printf(b, "\">Pyroscope flame graph of the window</a>");
        any = true;
    }
    if (conf->ui.grafana_url && *conf->ui.grafana_url && e->trace_hex[0]) {
        struct hs_buf u = {0};
        grafana_link(&u, conf, e);
        hs_buf_printf(b, "%s<a id=\"grafana\" rel=\"noopener noreferrer\" href=\"",
                      any ? " · " : "");
        hs_corr_html_escape(b, (const char *)u.data, u.len);
        hs_buf_printf(b, "\">the trace in Grafana Explore</a>");
        hs_buf_free(&u);
        any = true;
    }
    if (!any)
        hs_buf_printf(b, "<span class=\"sub\">none configured (<code>pyroscope_url</code>, "
                         "<code>ui.grafana_url</code>)</span>");
}

static void put_fns(struct hs_buf *b, const char *id, const struct corr_ui_entry *e,
                    const struct corr_ui_fn *fns, uint32_t n)
{
    hs_buf_printf(b, "<ol id=\"%s\">", id);
    for (uint32_t i = 0; i < n; i++) {
        hs_buf_printf(b, "<li>");
        esc(b, e->names[fns[i].name]);
        hs_buf_printf(b, " <span class=\"sub\">%.0f%%", 100.0 * fns[i].share);
        if (fns[i].lib) {
            hs_buf_printf(b, " (in ");
            esc(b, fns[i].lib);
            hs_buf_printf(b, ")");
        }
        hs_buf_printf(b, "</span></li>");
    }
    hs_buf_printf(b, "</ol>");
}

static void put_path(struct hs_buf *b, const char *id, const struct corr_ui_entry *e,
                     const uint32_t *hot, uint32_t n)
{
    hs_buf_printf(b, "<span id=\"%s\">", id);
    for (uint32_t i = 0; i < n; i++) {
        hs_buf_printf(b, "%s", i ? " &gt; " : "");
        esc(b, e->names[hot[i]]);
    }
    hs_buf_printf(b, "</span>");
}

/* What the profile types that measure waiting said, when CPU did not explain the span. */
static void put_offcpu(struct hs_buf *b, const struct corr_ui_entry *e)
{
    if (!e->off_type)
        return;
    row(b, "Off CPU");
    hs_buf_printf(b, "<code id=\"offcpu-type\">");
    esc(b, e->off_type);
    hs_buf_printf(b, "</code> <span class=\"sub\">(%s match)</span>", kind_name(e->off_kind));
    if (e->off_ntop)
        put_fns(b, "offcpu-top", e, e->off_top, e->off_ntop);
    if (e->off_nhot)
        put_path(b, "offcpu-hot-path", e, e->off_hot, e->off_nhot);
    row_end(b);
}

static void put_lists(struct hs_buf *b, const struct corr_ui_entry *e)
{
    if (e->ntop) {
        row(b, "Top functions");
        put_fns(b, "top", e, e->top, e->ntop);
        row_end(b);
    }
    if (e->nhot) {
        row(b, "Hot path");
        put_path(b, "hot-path", e, e->hot, e->nhot);
        row_end(b);
    }
    put_offcpu(b, e);
    if (e->nplus1) {
        row(b, "Pattern");
        hs_buf_printf(b, "N+1: <b id=\"nplus1\">%u</b> alike children: <code>", e->nplus1);
        esc(b, e->stmt);
        hs_buf_printf(b, "</code>");
        row_end(b);
    }
}

static void put_annotations(struct hs_buf *b, const struct corr_config *conf,
                            const struct corr_ui_entry *e)
{
    hs_buf_printf(b, "<h2>Annotations</h2><table class=\"kv\" id=\"annotations\">\n");
    row(b, "Start (UTC)");
    put_time(b, e->start_ns);
    row_end(b);
    row(b, "Duration");
    put_dur(b, e->dur_ns);
    row_end(b);
    row(b, "Slow because");
    esc(b, e->slow_reason);
    row_end(b);
    if (e->tenant && *e->tenant) {
        row(b, "Tenant");
        esc(b, e->tenant);
        row_end(b);
    }
    hs_buf_printf(b, "<tr><th>Trace id</th><td class=\"mono\">%s</td></tr>\n", e->trace_hex);
    hs_buf_printf(b, "<tr><th>Span id</th><td class=\"mono\">%s</td></tr>\n", e->span_hex);
    row(b, "Match");
    put_match(b, e);
    row_end(b);
    if (e->type) {
        row(b, "Profile type");
        hs_buf_printf(b, "<code>");
        esc(b, e->type);
        hs_buf_printf(b, "</code>");
        row_end(b);
    }
    if (e->cpu_share >= 0) {
        row(b, "CPU share");
        hs_buf_printf(b,
                      "%.2f <span class=\"sub\">(CPU seen in the span / its duration; low: "
                      "waiting, not computing)</span>",
                      e->cpu_share);
        row_end(b);
    }
    put_lists(b, e);
    row(b, "Links");
    put_links(b, conf, e);
    row_end(b);
    hs_buf_printf(b, "</table>\n");
}

/* ---- one span: flame graph -------------------------------------------------------------- */

struct fnode {
    uint32_t name;           /* UINT32_MAX for the root */
    uint32_t child, sibling; /* node indices, 0 = none (0 is the root, never a child) */
    uint32_t last;           /* the last child, for appending in order */
    int64_t value;
};

struct flame {
    const struct corr_ui_entry *e;
    struct fnode *nodes;
    struct hs_buf *b;
    double scale;    /* px per unit of value */
    uint32_t hidden; /* frames too narrow, or past the page bound */
};

/* The snapshot's stacks merged into a call tree. Children keep the order they first appear
 * in, which is heaviest first (the stacks are). Returns the node count (<= nframes + 1). */
static uint32_t flame_build(const struct corr_ui_entry *e, struct fnode *nodes)
{
    uint32_t n = 1;
    nodes[0] = (struct fnode){.name = UINT32_MAX, .value = e->total};
    for (uint32_t i = 0; i < e->nstacks; i++) {
        const struct corr_ui_stack *s = &e->stacks[i];
        uint32_t cur = 0;
        for (uint32_t d = 0; d < s->depth; d++) {
            uint32_t name = e->frames[s->first + d], c = nodes[cur].child;
            while (c && nodes[c].name != name)
                c = nodes[c].sibling;
            if (!c) {
                c = n++;
                nodes[c] = (struct fnode){.name = name};
                if (nodes[cur].last)
                    nodes[nodes[cur].last].sibling = c;
                else
                    nodes[cur].child = c;
                nodes[cur].last = c;
            }
            nodes[c].value += s->value;
            cur = c;
        }
    }
    return n;
}

/* A warm colour from the name, so a function keeps its colour across pages. */
static unsigned name_hue(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % 50u;
}

/* One frame: a nested <svg> clips its text to the frame's rectangle. */
static void flame_frame(struct flame *f, const char *name, int64_t value, double x, uint32_t depth,
                        double w, bool hot)
{
    struct hs_buf *b = f->b;
    hs_buf_printf(b,
                  "<svg x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%u\" class=\"fr%s\">"
                  "<title>",
                  x, depth * FLAME_ROW, w, FLAME_ROW - 1, hot ? " hot" : "");
    esc(b, name);
    hs_buf_printf(b, " — %.1f%% · ", f->e->total > 0 ? 100.0 * (double)value / f->e->total : 0);
    put_value(b, f->e->type, value);
    if (depth == 0)
        hs_buf_printf(b, "</title><rect width=\"100%%\" height=\"100%%\" rx=\"2\" "
                         "fill=\"#c9ced6\"/>");
    else
        hs_buf_printf(b,
                      "</title><rect width=\"100%%\" height=\"100%%\" rx=\"2\" "
                      "fill=\"hsl(%u,78%%,%u%%)\"/>",
                      name_hue(name), hot ? 58u : 66u);
    if (w >= FLAME_TEXT_PX) {
        hs_buf_printf(b, "<text x=\"4\" y=\"12.5\">");
        esc(b, name);
        hs_buf_printf(b, "</text>");
    }
    hs_buf_printf(b, "</svg>\n");
}

/* Draws node i and its subtree; recursion is bounded by CORR_UI_DEPTH + 1. */
static void flame_node(struct flame *f, uint32_t i, double x, uint32_t depth, bool hot)
{
    const struct fnode *n = &f->nodes[i];
    double w = (double)n->value * f->scale;
    if (w < FLAME_MIN_PX || f->b->len > PAGE_MAX) {
        f->hidden++;
        return;
    }
    flame_frame(f, depth ? f->e->names[n->name] : "all", n->value, x, depth, w, hot);
    double cx = x;
    for (uint32_t c = n->child; c; c = f->nodes[c].sibling) {
        bool chot = hot && depth < f->e->nhot && f->nodes[c].name == f->e->hot[depth];
        flame_node(f, c, cx, depth + 1, chot);
        cx += (double)f->nodes[c].value * f->scale;
    }
}

static void put_flame(struct hs_buf *b, const struct corr_ui_entry *e)
{
    hs_buf_printf(b, "<h2>Flame graph</h2>\n");
    if (e->nstacks == 0 || e->total <= 0) {
        hs_buf_printf(b, "<p class=\"empty\" id=\"no-flame\">No matched samples: nothing to "
                         "draw.</p>\n");
        return;
    }
    uint32_t depth = 0;
    for (uint32_t i = 0; i < e->nstacks; i++)
        depth = HS_MAX(depth, e->stacks[i].depth);
    struct fnode *nodes = hs_xmalloc((e->nframes + 1) * sizeof(*nodes));
    flame_build(e, nodes);
    hs_buf_printf(b,
                  "<p class=\"sub\">The %s samples matched (root first%s); the hot path is "
                  "outlined. Hover a frame for its share.</p>\n",
                  e->kind == CORR_MATCH_SPAN ? "span's own" : "window's",
                  e->kind == CORR_MATCH_WINDOW ? "; under the span's function when one is named "
                                                 "like it"
                                               : "");
    hs_buf_printf(b,
                  "<svg class=\"flame\" id=\"flame\" xmlns=\"http://www.w3.org/2000/svg\" "
                  "viewBox=\"0 0 %.0f %u\" width=\"100%%\" role=\"img\" "
                  "aria-label=\"flame graph\">\n",
                  FLAME_W, (depth + 1) * FLAME_ROW);
    struct flame f = {.e = e, .nodes = nodes, .b = b, .scale = FLAME_W / (double)e->total};
    flame_node(&f, 0, 0, 0, true);
    hs_buf_printf(b, "</svg>\n<p class=\"sub\" id=\"snapshot\">%u stacks, %u frames kept",
                  e->nstacks, e->nframes);
    if (e->cut_stacks || e->cut_frames)
        hs_buf_printf(b, "; %u stacks and %u frames left out by the caps (%u stacks, depth %u)",
                      e->cut_stacks, e->cut_frames, CORR_UI_STACKS, CORR_UI_DEPTH);
    if (f.hidden)
        hs_buf_printf(b, "; %u frames too narrow to draw", f.hidden);
    hs_buf_printf(b, ".</p>\n");
    free(nodes);
}

static void put_grown(struct hs_buf *b, const struct corr_config *conf,
                      const struct corr_ui_entry *e)
{
    hs_buf_printf(b, "<h2>Grown against the baseline</h2>\n");
    if (e->ngrown == 0) {
        hs_buf_printf(b,
                      "<p class=\"empty\" id=\"no-grown\">No function's share of the window "
                      "grew by more than %.0f percentage points over the service's baseline "
                      "(or there is no baseline yet).</p>\n",
                      conf->grown.min_pp);
        return;
    }
    hs_buf_printf(b, "<table id=\"grown\"><thead><tr><th>Function</th><th class=\"num\">Window"
                     "</th><th class=\"num\">Baseline</th><th class=\"num\">Change</th><th>"
                     "</th></tr></thead><tbody>\n");
    for (uint32_t i = 0; i < e->ngrown; i++) {
        const struct corr_ui_fn *g = &e->grown[i];
        hs_buf_printf(b, "<tr><td>");
        esc(b, e->names[g->name]);
        hs_buf_printf(b,
                      "</td><td class=\"num\">%.0f%%</td><td class=\"num\">%.0f%%</td>"
                      "<td class=\"num\">+%.0fpp</td><td><span class=\"bar base\" "
                      "style=\"width:%.0fpx\"></span><br><span class=\"bar\" "
                      "style=\"width:%.0fpx\"></span></td></tr>\n",
                      100 * g->share, 100 * g->base, 100 * (g->share - g->base), 200 * g->base,
                      200 * g->share);
    }
    hs_buf_printf(b, "</tbody></table>\n");
}

int hs_corr_ui_render_span(const struct corr_ui *ui, const struct corr_config *conf,
                           struct hs_str span_hex, const char *tenant, struct hs_buf *b)
{
    const struct corr_ui_entry *e = hs_corr_ui_find(ui, span_hex, tenant);
    if (!e)
        return HS_ENOENT;
    struct hs_buf title = {0};
    hs_buf_printf(&title, "%s %s", e->service, e->name);
    hs_buf_putc(&title, 0);
    page_open(b, (const char *)title.data);
    hs_buf_free(&title);
    hs_buf_printf(b, "<p><a href=\"/ui");
    tenant_query(b, e->tenant);
    hs_buf_printf(b, "\">&larr; all recent slow spans</a></p><h1>");
    esc(b, e->service);
    hs_buf_printf(b, " · <span id=\"span-name\">");
    esc(b, e->name);
    hs_buf_printf(b, "</span></h1>\n");
    put_annotations(b, conf, e);
    put_flame(b, e);
    put_grown(b, conf, e);
    page_close(b);
    return 0;
}
