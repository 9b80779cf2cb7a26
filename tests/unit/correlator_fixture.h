/* correlator_fixture.h: the correlator driven through its component type, for its unit tests:
 * capturing consumers for traces and profiles, a fake clock, setup from YAML (create, wire,
 * start) and an orderly shutdown and teardown; profiles built by hand (mkprofile) and sent
 * (send_profiles). Include after cmocka.h and the correlator's headers; defines CT, T0, S()
 * and MS(). */
#ifndef HS_TEST_CORRELATOR_FIXTURE_H
#define HS_TEST_CORRELATOR_FIXTURE_H

extern const struct hs_component_type hs_processor_correlator;
#define CT hs_processor_correlator

#define T0 INT64_C(1717000000) /* seconds: the scenario's minute starts here */
#define S(sec) ((uint64_t)((T0 + (sec)) * INT64_C(1000000000)))
#define MS(ms) ((uint64_t)(ms) * 1000000u)

struct capture {
    struct hs_component base;
    bool ready;
    struct hs_traces *t[32];
    int n;
    struct hs_profiles *p[8];
    int np;
};

static inline int cap_traces(struct hs_component *c, struct hs_traces *t)
{
    struct capture *k = hs_container_of(c, struct capture, base);
    assert_true(k->ready);
    assert_true(k->n < 32);
    k->t[k->n++] = t;
    return 0;
}

static inline int cap_profiles(struct hs_component *c, struct hs_profiles *p)
{
    struct capture *k = hs_container_of(c, struct capture, base);
    assert_true(k->np < 8);
    k->p[k->np++] = p;
    return 0;
}

static inline bool cap_ready(struct hs_component *c)
{
    return hs_container_of(c, struct capture, base)->ready;
}

static const struct hs_component_type cap_type = {.name = "capture",
                                                  .kind = HS_KIND_EXPORTER,
                                                  .consume_traces = cap_traces,
                                                  .consume_profiles = cap_profiles,
                                                  .ready = cap_ready};

static uint64_t fake_now;

static inline uint64_t fake_clock(void *ud)
{
    return fake_now;
}

struct fx {
    uv_loop_t loop;
    struct hs_metrics *m;
    struct hs_config_doc doc;
    struct capture traces, profiles;
    struct hs_component *tp, *pp;
    struct hs_consumer next, next_profiles;
    struct hs_component *c;
    int done;
};

static inline void setup(struct fx *f, const char *yaml)
{
    memset(f, 0, sizeof(*f));
    build_arena = hs_arena_new(1 << 16, 0);
    uv_loop_init(&f->loop);
    f->m = hs_metrics_new();
    struct hs_error err = {0};
    assert_int_equal(hs_config_parse("t.yaml", yaml, strlen(yaml), &f->doc, &err), 0);
    int rc = CT.create(f->doc.root, "processors.correlator", &f->c, &err);
    for (size_t i = 0; i < err.count; i++)
        fprintf(stderr, "%s\n", err.lines[i]);
    assert_int_equal(rc, 0);
    hs_error_free(&err);
    f->traces.base.type = f->profiles.base.type = &cap_type;
    f->traces.ready = f->profiles.ready = true;
    f->tp = &f->traces.base;
    f->pp = &f->profiles.base;
    f->next = (struct hs_consumer){.targets = &f->tp, .count = 1};
    f->next_profiles = (struct hs_consumer){.targets = &f->pp, .count = 1};
    f->c->type = &CT;
    f->c->id = "correlator";
    f->c->next = &f->next;
    f->c->next_profiles = &f->next_profiles;
    f->c->loop = &f->loop;
    f->c->metrics = f->m;
    fake_now = 1000000;
    hs_correlator_set_clock(f->c, fake_clock, NULL);
    const struct hs_host host = {.loop = &f->loop, .metrics = f->m};
    assert_int_equal(CT.start(f->c, &host), 0);
}

static struct fx *current;

static inline void on_done(struct hs_component *c)
{
    current->done++;
}

static inline void shutdown_fx(struct fx *f)
{
    current = f;
    CT.shutdown(f->c, on_done);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->done, 1);
    CT.shutdown(f->c, on_done); /* twice is harmless */
    assert_int_equal(f->done, 1);
}

static inline void teardown(struct fx *f)
{
    if (!f->done)
        shutdown_fx(f);
    CT.destroy(f->c);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    for (int i = 0; i < f->traces.n; i++)
        hs_traces_unref(f->traces.t[i]);
    for (int i = 0; i < f->profiles.np; i++)
        hs_profiles_unref(f->profiles.p[i]);
    hs_metrics_free(f->m);
    hs_config_doc_free(&f->doc);
    hs_arena_free(build_arena);
}

/* ---- profiles by hand ------------------------------------------------------------------- */

/* user-db's functions, Go-style names. */
#define MAIN "main.main"
#define HANDLE "main.handle"
#define FIND "main.(*UserRepository).findByEmail"
#define LOADP "main.(*UserRepository).loadPreferences"
#define QUERY "github.com/jackc/pg.(*Client).query"
#define HEALTH "main.healthz"

struct pstack {
    const char *fns[8]; /* root first, NULL-terminated */
    int64_t v;
    const uint8_t *span; /* 8 bytes, or NULL */
};

static inline struct hs_profile *mkprofile(const char *service, int64_t from_s, int64_t until_s,
                                    const struct pstack *st, size_t n)
{
    struct hs_profile *p = hs_profile_new();
    struct hs_arena *a = p->arena;
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, service, strlen(service)), 0);
    p->service = hs_profile_label(p, "service_name");
    p->from_ns = (T0 + from_s) * INT64_C(1000000000);
    p->until_ns = (T0 + until_s) * INT64_C(1000000000);
    struct hs_profile_summary *s = &p->summary;
    s->ntypes = 1;
    s->types = hs_arena_alloc(a, sizeof(char *));
    s->units = hs_arena_alloc(a, sizeof(char *));
    s->type_ids = hs_arena_alloc(a, sizeof(char *));
    s->types[0] = "cpu";
    s->units[0] = "nanoseconds";
    s->type_ids[0] = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    s->main_type = 0;
    s->funcs = hs_arena_alloc(a, 32 * sizeof(*s->funcs));
    s->stacks = hs_arena_alloc(a, n * sizeof(*s->stacks));
    s->spans = hs_arena_alloc(a, (n + 1) * sizeof(*s->spans));
    for (size_t i = 0; i < n; i++) {
        uint32_t *fids = hs_arena_alloc(a, 8 * sizeof(*fids));
        uint32_t d = 0;
        for (; st[i].fns[d]; d++) {
            uint32_t f = 0;
            while (f < s->nfuncs && strcmp(s->funcs[f].name, st[i].fns[d]) != 0)
                f++;
            if (f == s->nfuncs) {
                s->funcs[f].name = st[i].fns[d];
                s->funcs[f].file = "";
                s->funcs[f].self = hs_arena_alloc(a, sizeof(int64_t));
                s->funcs[f].total = hs_arena_alloc(a, sizeof(int64_t));
                s->funcs[f].self[0] = s->funcs[f].total[0] = 0;
                s->nfuncs++;
            }
            fids[d] = f;
            bool seen = false;
            for (uint32_t k = 0; k < d; k++)
                seen = seen || fids[k] == f;
            if (!seen)
                s->funcs[f].total[0] += st[i].v;
        }
        s->funcs[fids[d - 1]].self[0] += st[i].v;
        struct hs_profile_stack *ps = &s->stacks[s->nstacks++];
        ps->funcs = fids;
        ps->depth = d;
        ps->values = hs_arena_alloc(a, sizeof(int64_t));
        ps->values[0] = st[i].v;
        ps->span = HS_PROFILE_NO_SPAN;
        if (st[i].span) {
            uint32_t k = 0;
            while (k < s->nspans && memcmp(s->spans[k].id, st[i].span, 8) != 0)
                k++;
            if (k == s->nspans) {
                memcpy(s->spans[k].id, st[i].span, 8);
                s->spans[k].values = hs_arena_alloc(a, sizeof(int64_t));
                s->spans[k].values[0] = 0;
                s->nspans++;
            }
            s->spans[k].values[0] += st[i].v;
            ps->span = k;
        }
    }
    return p;
}

/* A profile of several sample types (columns), as Node's wall profile (samples, wall, cpu) or
 * Go's mutex profile (contentions, delay) carry them; ids are the type ids. Each stack has a
 * value per column. main_type as the summary chooses it: cpu, else wall, else the last. */
struct pcol {
    const char *type, *unit, *id;
};

struct mstack {
    const char *fns[12]; /* root first, NULL-terminated */
    int64_t v[3];
    const uint8_t *span; /* 8 bytes, or NULL */
};

static inline struct hs_profile *mkprofile_cols(const char *service, int64_t from_s,
                                                int64_t until_s, const struct pcol *cols,
                                                uint32_t ncols, const struct mstack *st, size_t n)
{
    struct hs_profile *p = hs_profile_new();
    struct hs_arena *a = p->arena;
    assert_int_equal(hs_profile_set_label(p, "service_name", 12, service, strlen(service)), 0);
    p->service = hs_profile_label(p, "service_name");
    p->from_ns = (T0 + from_s) * INT64_C(1000000000);
    p->until_ns = (T0 + until_s) * INT64_C(1000000000);
    struct hs_profile_summary *s = &p->summary;
    s->ntypes = ncols;
    s->types = hs_arena_alloc(a, ncols * sizeof(char *));
    s->units = hs_arena_alloc(a, ncols * sizeof(char *));
    s->type_ids = hs_arena_alloc(a, ncols * sizeof(char *));
    s->main_type = ncols - 1;
    for (uint32_t t = ncols; t-- > 0;) {
        s->types[t] = cols[t].type;
        s->units[t] = cols[t].unit;
        s->type_ids[t] = cols[t].id;
        if (strcmp(cols[t].type, "wall") == 0 && strcmp(cols[s->main_type].type, "cpu") != 0)
            s->main_type = t;
        if (strcmp(cols[t].type, "cpu") == 0)
            s->main_type = t;
    }
    size_t cap = 12 * n + 1;
    s->funcs = hs_arena_alloc(a, cap * sizeof(*s->funcs));
    s->stacks = hs_arena_alloc(a, n * sizeof(*s->stacks));
    s->spans = hs_arena_alloc(a, (n + 1) * sizeof(*s->spans));
    for (size_t i = 0; i < n; i++) {
        uint32_t *fids = hs_arena_alloc(a, 12 * sizeof(*fids));
        uint32_t d = 0;
        for (; d < 12 && st[i].fns[d]; d++) {
            uint32_t f = 0;
            while (f < s->nfuncs && strcmp(s->funcs[f].name, st[i].fns[d]) != 0)
                f++;
            if (f == s->nfuncs) {
                s->funcs[f].name = st[i].fns[d];
                s->funcs[f].file = "";
                s->funcs[f].self = hs_arena_alloc(a, ncols * sizeof(int64_t));
                s->funcs[f].total = hs_arena_alloc(a, ncols * sizeof(int64_t));
                memset(s->funcs[f].self, 0, ncols * sizeof(int64_t));
                memset(s->funcs[f].total, 0, ncols * sizeof(int64_t));
                s->nfuncs++;
            }
            fids[d] = f;
            bool seen = false;
            for (uint32_t k = 0; k < d; k++)
                seen = seen || fids[k] == f;
            for (uint32_t t = 0; t < ncols && !seen; t++)
                s->funcs[f].total[t] += st[i].v[t];
        }
        for (uint32_t t = 0; t < ncols; t++)
            s->funcs[fids[d - 1]].self[t] += st[i].v[t];
        struct hs_profile_stack *ps = &s->stacks[s->nstacks++];
        ps->funcs = fids;
        ps->depth = d;
        ps->values = hs_arena_alloc(a, ncols * sizeof(int64_t));
        memcpy(ps->values, st[i].v, ncols * sizeof(int64_t));
        ps->span = HS_PROFILE_NO_SPAN;
        if (st[i].span) {
            uint32_t k = 0;
            while (k < s->nspans && memcmp(s->spans[k].id, st[i].span, 8) != 0)
                k++;
            if (k == s->nspans) {
                memcpy(s->spans[k].id, st[i].span, 8);
                s->spans[k].values = hs_arena_alloc(a, ncols * sizeof(int64_t));
                memset(s->spans[k].values, 0, ncols * sizeof(int64_t));
                s->nspans++;
            }
            for (uint32_t t = 0; t < ncols; t++)
                s->spans[k].values[t] += st[i].v[t];
            ps->span = k;
        }
    }
    return p;
}

static inline int send_profiles(struct fx *f, const char *tenant, struct hs_profile *p)
{
    struct hs_profiles *b = hs_profiles_new(tenant);
    assert_int_equal(hs_profiles_add(b, p), 0);
    int before = f->profiles.np;
    int rc = CT.consume_profiles(f->c, b);
    if (rc == 0) { /* passed on at once, the very same batch */
        assert_int_equal(f->profiles.np, before + 1);
        assert_ptr_equal(f->profiles.p[before], b);
    }
    return rc;
}

#endif
