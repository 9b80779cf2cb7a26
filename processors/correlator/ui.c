/* ui.c: the ring of recent annotated slow spans behind the admin endpoint's /ui page (design.md
 * §10): each entry a bounded copy of what annotation found, with a capped snapshot of the
 * matched stacks (ui_html.c renders them, ui_http.c serves the pages). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "processors/correlator/correlator_int.h"

#define CORR_UI_NAMES 512 /* distinct function names per entry */

void hs_corr_ui_init(struct corr_ui *ui, uint32_t cap)
{
    memset(ui, 0, sizeof(*ui));
    ui->cut = &ui->dummy;
    ui->cap = cap;
    if (cap)
        ui->ring = hs_xcalloc(cap, sizeof(*ui->ring));
}

static void entry_free(struct corr_ui *ui, struct corr_ui_entry *e)
{
    if (!e)
        return;
    ui->bytes -= e->bytes;
    hs_arena_free(e->arena);
}

void hs_corr_ui_free(struct corr_ui *ui)
{
    for (uint32_t i = 0; i < ui->cap; i++)
        entry_free(ui, ui->ring[i]);
    free(ui->ring);
    ui->ring = NULL;
    ui->cap = ui->n = 0;
}

const struct corr_ui_entry *hs_corr_ui_get(const struct corr_ui *ui, uint32_t i)
{
    if (i >= ui->n)
        return NULL;
    return ui->ring[(ui->head + ui->cap - 1 - i) % ui->cap];
}

const struct corr_ui_entry *hs_corr_ui_find(const struct corr_ui *ui, struct hs_str span_hex,
                                            const char *tenant)
{
    if (span_hex.len == 0 || span_hex.len > 16)
        return NULL;
    for (uint32_t i = 0; i < ui->n; i++) {
        const struct corr_ui_entry *e = hs_corr_ui_get(ui, i);
        if (strlen(e->span_hex) == span_hex.len && hs_str_ieq(span_hex, e->span_hex) &&
            (!tenant || strcmp(e->tenant, tenant) == 0))
            return e;
    }
    return NULL;
}

/* ---- recording -------------------------------------------------------------------------- */

static void hex(char *out, struct hs_str id, size_t max)
{
    corr_hex(out, id.ptr, HS_MIN(id.len, max));
}

/* A copy of at most `cap` bytes, cut at a UTF-8 character boundary; NULL when the arena is
 * full. */
static char *dup_capped(struct hs_arena *a, const char *s, size_t n, size_t cap)
{
    if (n > cap) {
        n = cap;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    return hs_arena_strndup(a, s, n);
}

struct snap {
    struct corr_ui_entry *e;
    const struct corr_svc *svc;
    uint32_t *map; /* per fid of the service: local name + 1 */
    uint32_t capnames;
    struct corr_mstack *st; /* the matched stacks, alike ones merged, heaviest first */
    uint32_t nst, want;     /* want: the stacks the caps let in */
    uint32_t nframes;       /* their frames */
};

/* The local index of the service's function fid, or UINT32_MAX when the caps are reached. */
static uint32_t local_name(struct snap *s, uint32_t fid)
{
    if (s->map[fid])
        return s->map[fid] - 1;
    struct corr_ui_entry *e = s->e;
    if (e->nnames == s->capnames)
        return UINT32_MAX;
    /* shortened for display, unless another function of the service would read alike */
    const struct corr_name *nm = &s->svc->names[fid];
    char full[CORR_UI_NAME + 1];
    const char *d = !nm->ambiguous ? nm->disp : nm->name;
    if (nm->same_name && *nm->file) {
        snprintf(full, sizeof(full), "%s (%s)", nm->name, nm->file);
        d = full;
    }
    char *copy = dup_capped(e->arena, d, strlen(d), CORR_UI_NAME);
    if (!copy)
        return UINT32_MAX;
    e->names[e->nnames] = copy;
    s->map[fid] = ++e->nnames;
    return e->nnames - 1;
}

static int by_frames(const void *a, const void *b)
{
    const struct corr_mstack *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return memcmp(x->fids, y->fids, x->depth * sizeof(*x->fids));
}

static int by_value(const void *a, const void *b)
{
    const struct corr_mstack *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1;
    return by_frames(a, b);
}

/* The matched stacks, alike ones merged (one per bucket otherwise), heaviest first, and how
 * many of them, and of their frames, CORR_UI_STACKS, CORR_UI_DEPTH and CORR_UI_FRAMES let in:
 * the entry is sized by what it keeps, a few KiB for a typical span. */
static void snapshot_plan(struct snap *s, const struct corr_note *n)
{
    if (n->nstacks == 0)
        return;
    struct corr_mstack *st = hs_xmalloc(n->nstacks * sizeof(*st));
    memcpy(st, n->stacks, n->nstacks * sizeof(*st));
    qsort(st, n->nstacks, sizeof(*st), by_frames);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n->nstacks; i++) {
        if (m && by_frames(&st[m - 1], &st[i]) == 0)
            st[m - 1].value += st[i].value;
        else
            st[m++] = st[i];
    }
    qsort(st, m, sizeof(*st), by_value);
    s->st = st;
    s->nst = m;
    for (; s->want < HS_MIN(m, CORR_UI_STACKS); s->want++) {
        uint32_t depth = HS_MIN(st[s->want].depth, CORR_UI_DEPTH);
        if (s->nframes + depth > CORR_UI_FRAMES)
            break;
        s->nframes += depth;
    }
}

/* Copies the planned stacks while the names and the entry's memory last; the rest counted. */
static void snapshot_stacks(struct snap *s)
{
    struct corr_ui_entry *e = s->e;
    const struct corr_mstack *st = s->st;
    e->stacks = hs_arena_alloc(e->arena, HS_MAX(s->want, 1) * sizeof(*e->stacks));
    e->frames = hs_arena_alloc(e->arena, HS_MAX(s->nframes, 1) * sizeof(*e->frames));
    uint32_t i = 0;
    for (; e->stacks && e->frames && i < s->want; i++) {
        uint32_t depth = HS_MIN(st[i].depth, CORR_UI_DEPTH);
        uint32_t k = 0;
        for (; k < depth; k++) {
            uint32_t l = local_name(s, st[i].fids[k]);
            if (l == UINT32_MAX)
                break;
            e->frames[e->nframes + k] = l;
        }
        if (k < depth) /* out of names or memory: this stack and the rest are left out */
            break;
        if (depth < st[i].depth)
            e->cut_frames += st[i].depth - depth;
        e->stacks[e->nstacks++] =
            (struct corr_ui_stack){.first = e->nframes, .depth = depth, .value = st[i].value};
        e->nframes += depth;
    }
    for (; i < s->nst; i++) {
        e->cut_stacks++;
        e->cut_value += st[i].value;
    }
}

/* A top_functions list (the match's or the off-CPU one's) into *out, *nout. */
static void snapshot_top(struct snap *s, const struct corr_top *top, uint32_t n,
                         struct corr_ui_fn **out, uint32_t *nout)
{
    struct corr_ui_entry *e = s->e;
    *out = hs_arena_alloc(e->arena, HS_MAX(n, 1) * sizeof(**out));
    for (uint32_t i = 0; *out && i < n; i++) {
        uint32_t l = local_name(s, top[i].fid);
        const char *lib = top[i].lib;
        if (l != UINT32_MAX)
            (*out)[(*nout)++] = (struct corr_ui_fn){
                l, top[i].share, 0, lib ? dup_capped(e->arena, lib, strlen(lib), 64) : NULL};
    }
}

/* A hot path (the match's or the off-CPU one's) into *out, *nout, while the names last. */
static void snapshot_path(struct snap *s, const uint32_t *path, uint32_t npath, uint32_t **out,
                          uint32_t *nout)
{
    uint32_t np = HS_MIN(npath, CORR_UI_DEPTH);
    *out = hs_arena_alloc(s->e->arena, HS_MAX(np, 1) * sizeof(**out));
    for (uint32_t i = 0; *out && i < np; i++) {
        uint32_t l = local_name(s, path[i]);
        if (l == UINT32_MAX)
            break;
        (*out)[(*nout)++] = l;
    }
}

/* Top, grown and hot path names first: they are what the page leads with. */
static void snapshot_lists(struct snap *s, const struct corr_note *n)
{
    struct corr_ui_entry *e = s->e;
    snapshot_top(s, n->top, n->ntop, &e->top, &e->ntop);
    e->grown = hs_arena_alloc(e->arena, HS_MAX(n->ngrown, 1) * sizeof(*e->grown));
    for (uint32_t i = 0; e->grown && i < n->ngrown; i++) {
        uint32_t l = local_name(s, n->grown[i].fid);
        if (l != UINT32_MAX)
            e->grown[e->ngrown++] = (struct corr_ui_fn){l, n->grown[i].share, n->grown[i].base};
    }
    snapshot_path(s, n->path, n->npath, &e->hot, &e->nhot);
}

/* What the off-CPU type said: its id, top functions and hot path. */
static void snapshot_offcpu(struct snap *s, const struct corr_note *n)
{
    struct corr_ui_entry *e = s->e;
    if (!n->off.type)
        return;
    e->off_type = dup_capped(e->arena, n->off.type, strlen(n->off.type), CORR_UI_TEXT);
    e->off_kind = n->off.kind;
    snapshot_top(s, n->off.top, n->off.ntop, &e->off_top, &e->off_ntop);
    snapshot_path(s, n->off.path, n->off.npath, &e->off_hot, &e->off_nhot);
}

static void copy_strings(struct corr_ui_entry *e, const struct corr_note *n)
{
    const struct corr_span *sp = n->span;
    struct hs_arena *a = e->arena;
    e->tenant = dup_capped(a, sp->tenant.ptr, sp->tenant.len, CORR_UI_TEXT);
    e->service = dup_capped(a, sp->service.ptr, sp->service.len, CORR_UI_TEXT);
    e->name = dup_capped(a, sp->name.ptr, sp->name.len, CORR_UI_TEXT);
    if (n->type)
        e->type = dup_capped(a, n->type, strlen(n->type), CORR_UI_TEXT);
    if (n->nplus1.count) {
        e->nplus1 = n->nplus1.count;
        e->stmt = dup_capped(a, n->nplus1.text, strlen(n->nplus1.text), CORR_UI_TEXT);
    }
    /* a link cut short would be a wrong link: all of it (the arena's cap bounds it) or none */
    if (n->link)
        e->link = hs_arena_strndup(a, n->link, n->link_len);
}

static struct corr_ui_entry *entry_new(struct corr_ui *ui, const struct corr_note *n)
{
    struct hs_arena *a = hs_arena_new(4096, CORR_UI_ENTRY_BYTES);
    struct corr_ui_entry *e = a ? hs_arena_alloc(a, sizeof(*e)) : NULL;
    if (!e) {
        hs_arena_free(a);
        return NULL;
    }
    memset(e, 0, sizeof(*e));
    e->arena = a;
    const struct corr_span *sp = n->span;
    e->start_ns = sp->start_ns;
    e->dur_ns = sp->end_ns > sp->start_ns ? sp->end_ns - sp->start_ns : 0;
    hex(e->trace_hex, sp->trace_id, 16);
    hex(e->span_hex, sp->span_id, 8);
    e->kind = n->kind;
    e->reason = n->reason;
    memcpy(e->slow_reason, sp->slow_reason, sizeof(e->slow_reason));
    e->slow_reason[sizeof(e->slow_reason) - 1] = '\0';
    e->cpu_share = n->cpu_share;
    e->total = n->total;
    copy_strings(e, n);
    if (!e->tenant) { /* whose span it is decides who sees it: no entry without its tenant */
        hs_arena_free(a);
        return NULL;
    }
    if (n->svc && n->svc->nnames) {
        struct snap s = {.e = e, .svc = n->svc};
        snapshot_plan(&s, n);
        s.map = hs_xcalloc(n->svc->nnames, sizeof(*s.map));
        s.capnames = HS_MIN(HS_MIN(CORR_UI_NAMES, n->svc->nnames),
                            n->ntop + n->ngrown + HS_MIN(n->npath, CORR_UI_DEPTH) + s.nframes +
                                n->off.ntop + HS_MIN(n->off.npath, CORR_UI_DEPTH));
        e->names = hs_arena_alloc(a, HS_MAX(s.capnames, 1) * sizeof(*e->names));
        if (e->names) {
            snapshot_lists(&s, n);
            snapshot_offcpu(&s, n);
            snapshot_stacks(&s);
        } else {
            s.want = 0; /* out of the entry's memory: every stack counted as cut */
            snapshot_stacks(&s);
        }
        free(s.map);
        free(s.st);
    }
    int64_t kept = 0;
    for (uint32_t i = 0; i < e->nstacks; i++)
        kept += e->stacks[i].value;
    if (e->total < kept + e->cut_value)
        e->total = kept + e->cut_value;
    e->bytes = hs_arena_used(a);
    return e;
}

void hs_corr_ui_record(struct corr_ui *ui, const struct corr_note *n)
{
    if (ui->cap == 0)
        return;
    struct corr_ui_entry *e = entry_new(ui, n);
    if (!e)
        return;
    hs_counter_add(ui->cut, e->cut_stacks + e->cut_frames);
    entry_free(ui, ui->ring[ui->head]); /* the oldest, once the ring is full */
    ui->ring[ui->head] = e;
    ui->head = (ui->head + 1) % ui->cap;
    ui->n = HS_MIN(ui->n + 1, ui->cap);
    ui->seq++;
    ui->bytes += e->bytes;
}
