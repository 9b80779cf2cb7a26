/* pprof_payload.h: SDK-shaped pprof profiles for benchmarks and tests, built with protobuf-c from
 * a fixed seed: a Node wall profile (@pyroscope/nodejs: samples/count + wall/nanoseconds,
 * "./app.js:findByEmail:54" names) and a Go CPU profile (runtime/pprof: samples/count +
 * cpu/nanoseconds, package paths, file names, mappings, some inlined frames), gzipped as the SDKs
 * send them. Stacks come from a random call graph, so they share prefixes as real ones do. */
#ifndef HS_BENCH_PPROF_PAYLOAD_H
#define HS_BENCH_PPROF_PAYLOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/compress.h"
#include "perftools/profiles/profile.pb-c.h"

enum hs_pprof_shape { HS_PPROF_NODE_WALL, HS_PPROF_GO_CPU };

struct hs_pprof_payload_opts {
    enum hs_pprof_shape shape;
    uint32_t functions;
    uint32_t samples;
    uint32_t min_depth, max_depth;
    int64_t duration_ns;
    int64_t period;
    uint32_t span_pct; /* samples carrying a span_id label, in percent */
    uint32_t spans;    /* distinct span ids */
    uint64_t seed;
};

struct hs_pprof_payload {
    uint8_t *raw; /* the packed pprof, malloc'd */
    size_t raw_len;
    uint8_t *gz; /* the same, gzipped (level 6, like Go's compress/gzip default) */
    size_t gz_len;
    uint32_t samples, functions, locations;
};

/* ~15 s of a Node app at 100 Hz: ~400 functions, stacks 10-40 deep, ~1500 samples. */
static inline struct hs_pprof_payload_opts hs_pprof_payload_node_wall(void)
{
    return (struct hs_pprof_payload_opts){HS_PPROF_NODE_WALL, 400,      1500, 10, 40,
                                          15000000000LL,      10548000, 30,   40, 0x5eed};
}

/* 10 s of a busy Go service: ~1000 functions, ~3000 samples, stacks 15-64 deep. */
static inline struct hs_pprof_payload_opts hs_pprof_payload_go_cpu(void)
{
    return (struct hs_pprof_payload_opts){HS_PPROF_GO_CPU, 1000,     3000, 15, 64,
                                          10000000000LL,   10000000, 40,   60, 0x5eed};
}

/* The generator's state; everything lives in the arena until the profile is packed. */
struct pp_gen {
    struct hs_arena *a;
    uint64_t rng;
    char **strs;
    size_t nstrs, cap_strs;
    const struct hs_pprof_payload_opts *o;
    bool node;
    Perftools__Profiles__Profile pr;
    int64_t s_span, s_span_name, span_names[4];
    int64_t *span_ids;   /* [o->spans] string indexes */
    uint32_t *loc_first; /* [functions + 1]: function i's locations are loc_first[i].. */
};

static inline uint32_t pp_gen_rand(struct pp_gen *g, uint32_t n)
{
    g->rng ^= g->rng << 13; /* xorshift64 */
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    return n ? (uint32_t)((g->rng >> 11) % n) : 0;
}

/* Appends a string (no interning: names are generated distinct) and returns its index. */
static inline int64_t pp_gen_str(struct pp_gen *g, const char *s)
{
    if (g->nstrs == g->cap_strs) {
        g->cap_strs = g->cap_strs ? g->cap_strs * 2 : 256;
        char **n = hs_arena_alloc(g->a, g->cap_strs * sizeof(char *));
        if (!n)
            abort();
        if (g->nstrs)
            memcpy(n, g->strs, g->nstrs * sizeof(char *));
        g->strs = n;
    }
    g->strs[g->nstrs] = hs_arena_strndup(g->a, s, strlen(s));
    return (int64_t)g->nstrs++;
}

static inline void *pp_gen_alloc(struct pp_gen *g, size_t n)
{
    void *p = hs_arena_alloc(g->a, n ? n : 1);
    if (!p)
        abort();
    return p;
}

static inline Perftools__Profiles__ValueType *pp_gen_vt(struct pp_gen *g, int64_t type,
                                                        int64_t unit)
{
    Perftools__Profiles__ValueType *v = pp_gen_alloc(g, sizeof(*v));
    perftools__profiles__value_type__init(v);
    v->type = type;
    v->unit = unit;
    return v;
}

static inline void pp_gen_function_name(const struct hs_pprof_payload_opts *o, uint32_t i,
                                        char *name, size_t nlen, char *file, size_t flen)
{
    static const char *const verbs[] = {"find",   "load",    "parse",  "render", "handle",
                                        "encode", "decode",  "query",  "update", "validate",
                                        "fetch",  "compute", "format", "write",  "read"};
    static const char *const nouns[] = {"ByEmail", "User",    "Order",   "Session", "Request",
                                        "Cart",    "Payment", "Token",   "Row",     "Template",
                                        "Body",    "Header",  "Invoice", "Price",   "Stock"};
    const char *v = verbs[i % 15], *n = nouns[(i / 15) % 15];
    if (o->shape == HS_PPROF_NODE_WALL) {
        static const char *const files[] = {"./app.js", "./routes/users.js", "./db/pool.js",
                                            "./lib/render.js",
                                            "./node_modules/express/lib/router/index.js"};
        snprintf(file, flen, "%s", files[i % 5]);
        snprintf(name, nlen, "%s:%s%s%u:%u", file, v, n, i / 225, 10 + (i * 37) % 400);
    } else {
        snprintf(file, flen, "/src/github.com/acme/shop/internal/pkg%u/file%u.go", i % 40, i % 7);
        snprintf(name, nlen, "github.com/acme/shop/internal/pkg%u.(*%s%u).%s%s", i % 40, n, i / 225,
                 v, n);
    }
}

/* Sample and period types, span labels' strings, and Go's one mapping. */
static inline void pp_gen_header(struct pp_gen *g)
{
    Perftools__Profiles__Profile *pr = &g->pr;
    pp_gen_str(g, "");
    int64_t s_samples = pp_gen_str(g, "samples"), s_count = pp_gen_str(g, "count");
    int64_t s_main = pp_gen_str(g, g->node ? "wall" : "cpu"), s_ns = pp_gen_str(g, "nanoseconds");
    g->s_span = pp_gen_str(g, "span_id");
    g->s_span_name = pp_gen_str(g, "span_name");
    pr->n_sample_type = 2;
    pr->sample_type = pp_gen_alloc(g, 2 * sizeof(void *));
    pr->sample_type[0] = pp_gen_vt(g, s_samples, s_count);
    pr->sample_type[1] = pp_gen_vt(g, s_main, s_ns);
    pr->period_type = pp_gen_vt(g, s_main, s_ns);
    pr->period = g->o->period;
    pr->duration_nanos = g->o->duration_ns;
    pr->time_nanos = 1767225600000000000LL; /* fixed, so runs are identical */

    g->span_ids = pp_gen_alloc(g, (g->o->spans + 1) * sizeof(int64_t));
    for (uint32_t i = 0; i < g->o->spans; i++) {
        char hex[17];
        snprintf(hex, sizeof(hex), "%08x%08x", pp_gen_rand(g, 0xffffffffu),
                 pp_gen_rand(g, 0xffffffffu));
        g->span_ids[i] = pp_gen_str(g, hex);
    }
    static const char *const sn[4] = {"GET /users/:id", "POST /orders", "GET /cart",
                                      "grpc.Checkout"};
    for (int i = 0; i < 4; i++)
        g->span_names[i] = pp_gen_str(g, sn[i]);

    if (!g->node) {
        Perftools__Profiles__Mapping *m = pp_gen_alloc(g, sizeof(*m));
        perftools__profiles__mapping__init(m);
        m->id = 1;
        m->memory_start = 0x400000;
        m->memory_limit = 0x1400000;
        m->filename = pp_gen_str(g, "/usr/local/bin/shop");
        m->has_functions = m->has_filenames = m->has_line_numbers = 1;
        pr->n_mapping = 1;
        pr->mapping = pp_gen_alloc(g, sizeof(void *));
        pr->mapping[0] = m;
    }
}

/* Functions, each with one (Node) or 1-3 (Go) locations; 1 in 10 of Go's has an inlined callee. */
static inline void pp_gen_functions(struct pp_gen *g)
{
    Perftools__Profiles__Profile *pr = &g->pr;
    uint32_t nf = g->o->functions;
    pr->n_function = nf;
    pr->function = pp_gen_alloc(g, nf * sizeof(void *));
    for (uint32_t i = 0; i < nf; i++) {
        char name[160], file[96];
        pp_gen_function_name(g->o, i, name, sizeof(name), file, sizeof(file));
        Perftools__Profiles__Function *f = pp_gen_alloc(g, sizeof(*f));
        perftools__profiles__function__init(f);
        f->id = i + 1;
        f->name = pp_gen_str(g, name);
        f->system_name = f->name;
        f->filename = g->node ? 0 : pp_gen_str(g, file);
        f->start_line = 10 + (i * 37) % 400;
        pr->function[i] = f;
    }
    g->loc_first = pp_gen_alloc(g, (nf + 1) * sizeof(uint32_t));
    pr->location = pp_gen_alloc(g, (g->node ? nf : nf * 3) * sizeof(void *));
    for (uint32_t i = 0; i < nf; i++) {
        g->loc_first[i] = (uint32_t)pr->n_location;
        uint32_t k = g->node ? 1 : 1 + pp_gen_rand(g, 3);
        for (uint32_t j = 0; j < k; j++) {
            Perftools__Profiles__Location *l = pp_gen_alloc(g, sizeof(*l));
            perftools__profiles__location__init(l);
            l->id = pr->n_location + 1;
            l->n_line = !g->node && pp_gen_rand(g, 10) == 0 ? 2 : 1;
            l->line = pp_gen_alloc(g, l->n_line * sizeof(void *));
            for (size_t x = 0; x < l->n_line; x++) {
                Perftools__Profiles__Line *ln = pp_gen_alloc(g, sizeof(*ln));
                perftools__profiles__line__init(ln);
                /* line[0] innermost: an inlined helper; the last line is this function */
                ln->function_id = x + 1 == l->n_line ? i + 1 : pp_gen_rand(g, nf) + 1;
                ln->line = pr->function[i]->start_line + (int64_t)j * 3 + (int64_t)x;
                l->line[x] = ln;
            }
            if (!g->node) {
                l->mapping_id = 1;
                l->address = 0x400000 + (uint64_t)l->id * 0x40;
            }
            pr->location[pr->n_location++] = l;
        }
    }
    g->loc_first[nf] = (uint32_t)pr->n_location;
}

/* Samples walk a random call graph (each function calls 2-5 others, from 4 roots). */
static inline void pp_gen_samples(struct pp_gen *g)
{
    const struct hs_pprof_payload_opts *o = g->o;
    Perftools__Profiles__Profile *pr = &g->pr;
    uint32_t nf = o->functions;
    uint32_t *callees = pp_gen_alloc(g, (size_t)nf * 5 * sizeof(uint32_t));
    uint32_t *ncallees = pp_gen_alloc(g, nf * sizeof(uint32_t));
    for (uint32_t i = 0; i < nf; i++) {
        ncallees[i] = 2 + pp_gen_rand(g, 4);
        for (uint32_t j = 0; j < ncallees[i]; j++)
            callees[i * 5 + j] = pp_gen_rand(g, nf);
    }
    pr->n_sample = o->samples;
    pr->sample = pp_gen_alloc(g, o->samples * sizeof(void *));
    uint32_t *funcs = pp_gen_alloc(g, o->max_depth * sizeof(uint32_t));
    for (uint32_t i = 0; i < o->samples; i++) {
        Perftools__Profiles__Sample *s = pp_gen_alloc(g, sizeof(*s));
        perftools__profiles__sample__init(s);
        uint32_t depth = o->min_depth + pp_gen_rand(g, o->max_depth - o->min_depth + 1);
        funcs[0] = pp_gen_rand(g, 4);
        for (uint32_t d = 1; d < depth; d++)
            funcs[d] = callees[funcs[d - 1] * 5 + pp_gen_rand(g, ncallees[funcs[d - 1]])];
        s->n_location_id = depth;
        s->location_id = pp_gen_alloc(g, depth * sizeof(uint64_t));
        for (uint32_t d = 0; d < depth; d++) { /* leaf first */
            uint32_t f = funcs[depth - 1 - d];
            uint32_t nl = g->loc_first[f + 1] - g->loc_first[f];
            s->location_id[d] = pr->location[g->loc_first[f] + pp_gen_rand(g, nl)]->id;
        }
        s->n_value = 2;
        s->value = pp_gen_alloc(g, 2 * sizeof(int64_t));
        s->value[0] = 1 + pp_gen_rand(g, g->node ? 5 : 3);
        s->value[1] = s->value[0] * o->period;
        if (o->spans && pp_gen_rand(g, 100) < o->span_pct) {
            s->n_label = 2;
            s->label = pp_gen_alloc(g, 2 * sizeof(void *));
            for (int x = 0; x < 2; x++) {
                s->label[x] = pp_gen_alloc(g, sizeof(Perftools__Profiles__Label));
                perftools__profiles__label__init(s->label[x]);
            }
            uint32_t sp = pp_gen_rand(g, o->spans);
            s->label[0]->key = g->s_span;
            s->label[0]->str = g->span_ids[sp];
            s->label[1]->key = g->s_span_name;
            s->label[1]->str = g->span_names[sp % 4];
        }
        pr->sample[i] = s;
    }
}

/* Builds the payload; aborts when out of memory (benchmarks and tests only). */
static inline void hs_pprof_payload_build(const struct hs_pprof_payload_opts *o,
                                          struct hs_pprof_payload *out)
{
    struct pp_gen g = {.a = hs_arena_new(1 << 20, 0),
                       .rng = o->seed | 1,
                       .o = o,
                       .node = o->shape == HS_PPROF_NODE_WALL};
    if (!g.a)
        abort();
    perftools__profiles__profile__init(&g.pr);
    pp_gen_header(&g);
    pp_gen_functions(&g);
    pp_gen_samples(&g);
    g.pr.n_string_table = g.nstrs;
    g.pr.string_table = g.strs;

    *out = (struct hs_pprof_payload){
        .samples = o->samples, .functions = o->functions, .locations = (uint32_t)g.pr.n_location};
    out->raw_len = perftools__profiles__profile__get_packed_size(&g.pr);
    out->raw = malloc(out->raw_len ? out->raw_len : 1);
    if (!out->raw)
        abort();
    perftools__profiles__profile__pack(&g.pr, out->raw);
    struct hs_buf gz = {0};
    if (hs_gzip(out->raw, out->raw_len, 6, &gz) != 0)
        abort();
    out->gz = gz.data;
    out->gz_len = gz.len;
    hs_arena_free(g.a);
}

static inline void hs_pprof_payload_free(struct hs_pprof_payload *p)
{
    free(p->raw);
    free(p->gz);
    memset(p, 0, sizeof(*p));
}

#endif
