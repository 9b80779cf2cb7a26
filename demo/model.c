/* model.c: the demo's traffic, as pure functions of a seeded RNG and timestamps: requests
 * (api-server -> user-db, sometimes N+1), their OTLP encoding, and CPU profiles whose stacks
 * and span_id labels match the requests that ran in the profile's window. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "demo/demo.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "perftools/profiles/profile.pb-c.h"

const char *const hs_demo_service_names[2] = {"api-server", "user-db"};

#define MS INT64_C(1000000)
#define PERIOD_NS (10 * MS) /* 100 Hz, as Go's and most profilers' CPU sampling */

/* splitmix64: tiny, seedable, and good enough to make traffic look varied. */
static uint64_t next_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void hs_demo_model_init(struct hs_demo_model *m, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->rng = seed;
    m->rng_nplus1 = seed ^ 0x6e2b1f0d4c3a5968ULL;
}

uint64_t hs_demo_rand(struct hs_demo_model *m, uint64_t lo, uint64_t hi)
{
    return hi <= lo ? lo : lo + next_u64(&m->rng) % (hi - lo + 1);
}

static uint64_t draw(uint64_t *state, uint64_t lo, uint64_t hi)
{
    return lo + next_u64(state) % (hi - lo + 1);
}

static void random_id(uint64_t *state, uint8_t *id, size_t n)
{
    do {
        for (size_t i = 0; i < n; i++)
            id[i] = (uint8_t)next_u64(state);
    } while (id[0] == 0); /* an all-zero id is invalid in OTLP; a nonzero first byte rules it out */
}

const struct hs_demo_request *hs_demo_request_new(struct hs_demo_model *m, int64_t end_ns,
                                                  bool nplus1)
{
    struct hs_demo_request *r = &m->recent[m->head];
    m->head = (m->head + 1) % HS_DEMO_RECENT;
    if (m->nrecent < HS_DEMO_RECENT)
        m->nrecent++;
    memset(r, 0, sizeof(*r));
    /* N+1 requests draw from a stream of their own: how many fast requests ran between them
     * depends on the clock, yet the same --seed gives the same N+1 requests */
    uint64_t *st = nplus1 ? &m->rng_nplus1 : &m->rng;
    random_id(st, r->trace_id, sizeof(r->trace_id));
    random_id(st, r->api_span, sizeof(r->api_span));
    random_id(st, r->db_span, sizeof(r->db_span));
    r->nplus1 = nplus1;
    r->queries = nplus1 ? (uint32_t)draw(st, 30, 60) : 1;
    r->user_id = (uint32_t)draw(st, 1000, 99999);
    int64_t db = nplus1 ? (int64_t)draw(st, 560, 700) * MS : (int64_t)draw(st, 40000, 60000) * 1000;
    int64_t before = (int64_t)draw(st, 1000, 3000) * 1000;
    int64_t after = (int64_t)draw(st, 2000, 6000) * 1000;
    r->end_ns = end_ns;
    r->start_ns = end_ns - before - db - after;
    r->db_start_ns = r->start_ns + before;
    r->db_end_ns = r->db_start_ns + db;
    return r;
}

/* ---- OTLP ------------------------------------------------------------------------------- */

typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Trace__V1__Span Span;

/* Everything one request's message points to, freed in one go after packing. */
struct otlp_parts {
    KeyValue *kv;
    AnyValue *av;
    KeyValue **kvp;
    uint32_t nkv, cap;
    char *text; /* statement and path strings */
    size_t ntext, captext;
};

static KeyValue **attrs_begin(struct otlp_parts *p)
{
    return &p->kvp[p->nkv];
}

static const char *keep_text(struct otlp_parts *p, const char *s)
{
    size_t n = strlen(s) + 1;
    if (p->ntext + n > p->captext)
        abort(); /* sized by encode_traces for the longest request */
    char *dst = p->text + p->ntext;
    memcpy(dst, s, n);
    p->ntext += n;
    return dst;
}

static void attr(struct otlp_parts *p, const char *key, const char *str, int64_t num)
{
    if (p->nkv == p->cap)
        abort(); /* sized by encode_traces */
    KeyValue *kv = &p->kv[p->nkv];
    AnyValue *v = &p->av[p->nkv];
    opentelemetry__proto__common__v1__key_value__init(kv);
    opentelemetry__proto__common__v1__any_value__init(v);
    kv->key = (char *)key;
    kv->value = v;
    if (str) {
        v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        v->string_value = (char *)str;
    } else {
        v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        v->int_value = num;
    }
    p->kvp[p->nkv++] = kv;
}

static void span_init(Span *s, const struct hs_demo_request *r, const uint8_t *id,
                      const uint8_t *parent, const char *name, int kind, int64_t start, int64_t end)
{
    opentelemetry__proto__trace__v1__span__init(s);
    s->trace_id = (ProtobufCBinaryData){16, (uint8_t *)r->trace_id};
    s->span_id = (ProtobufCBinaryData){8, (uint8_t *)id};
    if (parent)
        s->parent_span_id = (ProtobufCBinaryData){8, (uint8_t *)parent};
    s->name = (char *)name;
    s->kind = kind;
    s->start_time_unix_nano = (uint64_t)start;
    s->end_time_unix_nano = (uint64_t)end;
}

static void query_span(struct otlp_parts *p, Span *s, const struct hs_demo_request *r,
                       const uint8_t *id, const char *name, const char *stmt, int64_t start,
                       int64_t end)
{
    span_init(s, r, id, r->db_span, name,
              OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT, start, end);
    s->attributes = attrs_begin(p);
    attr(p, "db.system", "postgresql", 0);
    attr(p, "db.statement", keep_text(p, stmt), 0);
    s->n_attributes = 2;
}

/* findByEmail's children: its users query, then one preferences query per user loaded, one
 * after another through the rest of its time. spans[0] is the users query. */
static void query_spans(struct otlp_parts *p, const struct hs_demo_request *r, Span *spans,
                        uint8_t (*ids)[8])
{
    char line[160];
    for (uint32_t i = 0; i < 1 + r->queries; i++) {
        memcpy(ids[i], r->db_span, 8); /* distinct from the parent and from each other */
        ids[i][7] ^= (uint8_t)(i + 1);
        ids[i][6] ^= (uint8_t)((i + 1) >> 8);
    }
    int64_t t = r->db_start_ns + MS, users_end = t + 4 * MS;
    if (r->nplus1)
        snprintf(line, sizeof(line),
                 "SELECT id, email FROM users WHERE email LIKE '%%@example.com' LIMIT %u",
                 r->queries);
    else
        snprintf(line, sizeof(line),
                 "SELECT id, email FROM users WHERE email = 'user%u@example.com'", r->user_id);
    query_span(p, &spans[0], r, ids[0], "SELECT users", line, t, users_end);
    int64_t per = (r->db_end_ns - MS - users_end) / r->queries;
    for (uint32_t i = 0; i < r->queries; i++) {
        snprintf(line, sizeof(line), "SELECT key, value FROM preferences WHERE user_id = %u",
                 r->user_id + i * 7);
        int64_t qs = users_end + (int64_t)i * per;
        query_span(p, &spans[1 + i], r, ids[1 + i], "SELECT preferences", line, qs,
                   qs + per * 7 / 10);
    }
}

/* The request: api-server's span (sp[0]) and user-db's (the rest) under their resources. */
static int pack_request(struct otlp_parts *p, Span **sp, uint32_t nspans, struct hs_buf *out)
{
    Opentelemetry__Proto__Resource__V1__Resource res[2];
    Opentelemetry__Proto__Common__V1__InstrumentationScope scope;
    Opentelemetry__Proto__Trace__V1__ScopeSpans ss[2], *ssp[2];
    Opentelemetry__Proto__Trace__V1__ResourceSpans rs[2], *rsp[2];
    opentelemetry__proto__common__v1__instrumentation_scope__init(&scope);
    scope.name = "hotspan-demo";
    for (int i = 0; i < 2; i++) {
        opentelemetry__proto__resource__v1__resource__init(&res[i]);
        res[i].attributes = attrs_begin(p);
        attr(p, "service.name", hs_demo_service_names[i], 0);
        attr(p, "deployment.environment", "demo", 0);
        res[i].n_attributes = 2;
        opentelemetry__proto__trace__v1__scope_spans__init(&ss[i]);
        ss[i].scope = &scope;
        ss[i].spans = i == 0 ? sp : sp + 1;
        ss[i].n_spans = i == 0 ? 1 : nspans - 1;
        ssp[i] = &ss[i];
        opentelemetry__proto__trace__v1__resource_spans__init(&rs[i]);
        rs[i].resource = &res[i];
        rs[i].scope_spans = &ssp[i];
        rs[i].n_scope_spans = 1;
        rsp[i] = &rs[i];
    }
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&req);
    req.resource_spans = rsp;
    req.n_resource_spans = 2;
    size_t n =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            &req);
    int rc = hs_buf_reserve(out, n);
    if (rc == 0) {
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
            &req, out->data + out->len);
        out->len += n;
    }
    return rc;
}

int hs_demo_encode_traces(const struct hs_demo_request *r, struct hs_buf *out)
{
    uint32_t nspans = 3 + r->queries; /* api, findByEmail, users, preferences x queries */
    struct otlp_parts p = {.cap = 16 + 2 * nspans, .captext = 128 * (nspans + 2)};
    p.kv = hs_xcalloc(p.cap, sizeof(*p.kv));
    p.av = hs_xcalloc(p.cap, sizeof(*p.av));
    p.kvp = hs_xcalloc(p.cap, sizeof(*p.kvp));
    p.text = hs_xmalloc(p.captext);
    Span *spans = hs_xcalloc(nspans, sizeof(*spans));
    Span **sp = hs_xcalloc(nspans, sizeof(*sp));
    uint8_t(*ids)[8] = hs_xcalloc(nspans, sizeof(*ids));

    char path[32];
    snprintf(path, sizeof(path), "/users/%u", r->user_id);
    span_init(&spans[0], r, r->api_span, NULL, "GET /users/:id",
              OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER, r->start_ns,
              r->end_ns);
    spans[0].attributes = attrs_begin(&p);
    attr(&p, "http.request.method", "GET", 0);
    attr(&p, "http.route", "/users/:id", 0);
    attr(&p, "url.path", keep_text(&p, path), 0);
    attr(&p, "http.response.status_code", NULL, 200);
    spans[0].n_attributes = 4;

    span_init(&spans[1], r, r->db_span, r->api_span, HS_DEMO_SPAN_NAME,
              OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER, r->db_start_ns,
              r->db_end_ns);
    spans[1].attributes = attrs_begin(&p);
    attr(&p, "code.namespace", "UserRepository", 0);
    attr(&p, "code.function", "findByEmail", 0);
    spans[1].n_attributes = 2;
    query_spans(&p, r, spans + 2, ids);
    for (uint32_t i = 0; i < nspans; i++)
        sp[i] = &spans[i];

    int rc = pack_request(&p, sp, nspans, out);
    free(ids);
    free(sp);
    free(spans);
    free(p.text);
    free(p.kvp);
    free(p.av);
    free(p.kv);
    return rc;
}

/* ---- pprof ------------------------------------------------------------------------------ */

enum func {
    F_MAIN,
    F_GC,
    F_POOL,
    F_HANDLE,
    F_FIND,
    F_LOADUSERS,
    F_LOADPREFS,
    F_QUERY,
    F_DECODE,
    F_MARSHAL,
    F_SERVE,
    F_ROUTER,
    F_GETUSER,
    F_FETCH,
    F_READ,
    F_RENDER,
    F_COUNT
};

static const struct {
    const char *name, *file;
} funcs[F_COUNT] = {
    [F_MAIN] = {"main", "main.go"},
    [F_GC] = {"runtime.gcBgMarkWorker", "runtime/mgc.go"},
    [F_POOL] = {"Pool.maintain", "db/pool.go"},
    [F_HANDLE] = {"handle", "server/handler.go"},
    [F_FIND] = {"UserRepository.findByEmail", "repo/user_repository.go"},
    [F_LOADUSERS] = {"UserRepository.loadUsers", "repo/user_repository.go"},
    [F_LOADPREFS] = {"UserRepository.loadPreferences", "repo/user_repository.go"},
    [F_QUERY] = {"Client.query", "db/client.go"},
    [F_DECODE] = {"Rows.decode", "db/rows.go"},
    [F_MARSHAL] = {"json.Marshal", "encoding/json/encode.go"},
    [F_SERVE] = {"http.Server.serve", "net/http/server.go"},
    [F_ROUTER] = {"Router.handle", "web/router.go"},
    [F_GETUSER] = {"UsersController.getUser", "web/users.go"},
    [F_FETCH] = {"UserClient.fetch", "clients/user_client.go"},
    [F_READ] = {"Socket.read", "net/socket.go"},
    [F_RENDER] = {"Template.render", "web/template.go"},
};

#define MAX_DEPTH 6

struct stack {
    uint8_t weight; /* % of the mix */
    uint8_t depth;
    uint8_t f[MAX_DEPTH]; /* root first */
};

/* user-db during an N+1 request: one query per user, so the time is under loadPreferences.
 * Samples labelled with findByEmail's span id are all under it, as a profiler labels them. */
static const struct stack db_nplus1[] = {
    {55, 4, {F_HANDLE, F_FIND, F_LOADPREFS, F_QUERY}},
    {8, 5, {F_HANDLE, F_FIND, F_LOADPREFS, F_QUERY, F_DECODE}},
    {11, 3, {F_HANDLE, F_FIND, F_LOADPREFS}},
    {14, 2, {F_HANDLE, F_FIND}},
    {4, 4, {F_HANDLE, F_FIND, F_LOADUSERS, F_QUERY}},
    {4, 3, {F_HANDLE, F_FIND, F_LOADUSERS}},
    {4, 3, {F_HANDLE, F_FIND, F_MARSHAL}},
};
/* user-db on an ordinary request: a flatter mix */
static const struct stack db_fast[] = {
    {30, 4, {F_HANDLE, F_FIND, F_LOADUSERS, F_QUERY}},
    {15, 3, {F_HANDLE, F_FIND, F_LOADUSERS}},
    {15, 2, {F_HANDLE, F_FIND}},
    {15, 4, {F_HANDLE, F_FIND, F_LOADPREFS, F_QUERY}},
    {25, 3, {F_HANDLE, F_FIND, F_MARSHAL}},
};
static const struct stack db_idle[] = {
    {60, 2, {F_MAIN, F_POOL}},
    {40, 1, {F_GC}},
};
/* api-server while a request runs: mostly waiting on user-db (UserClient.fetch) */
static const struct stack api_req[] = {
    {45, 5, {F_SERVE, F_ROUTER, F_GETUSER, F_FETCH, F_READ}},
    {25, 4, {F_SERVE, F_ROUTER, F_GETUSER, F_MARSHAL}},
    {15, 4, {F_SERVE, F_ROUTER, F_GETUSER, F_RENDER}},
    {15, 3, {F_SERVE, F_ROUTER, F_GETUSER}},
};
static const struct stack api_idle[] = {
    {50, 2, {F_MAIN, F_SERVE}},
    {50, 1, {F_GC}},
};

struct mix {
    const struct stack *s;
    uint32_t n;
};
#define MIX(a) ((struct mix){(a), HS_ARRAY_SIZE(a)})

#define MAX_CELLS 256

/* Samples aggregated by (stack, request): the pprof Sample messages to be. */
struct cells {
    struct {
        const struct stack *st;
        int req; /* index into recent, -1 for none */
        int64_t count;
    } c[MAX_CELLS];
    uint32_t n;
};

static void cells_add(struct cells *cs, const struct stack *st, int req)
{
    for (uint32_t i = 0; i < cs->n; i++)
        if (cs->c[i].st == st && cs->c[i].req == req) {
            cs->c[i].count++;
            return;
        }
    if (cs->n == MAX_CELLS)
        return; /* bounded: 64 requests x 7 stacks never gets here in practice */
    cs->c[cs->n].st = st;
    cs->c[cs->n].req = req;
    cs->c[cs->n++].count = 1;
}

/* CPU time `cpu_ns` of a mix as samples of PERIOD_NS (the remainder rounded at random). */
static void sample_mix(struct hs_demo_model *m, struct cells *cs, struct mix mx, int req,
                       int64_t cpu_ns)
{
    if (cpu_ns <= 0)
        return;
    int64_t n = cpu_ns / PERIOD_NS;
    if ((int64_t)hs_demo_rand(m, 0, PERIOD_NS - 1) < cpu_ns % PERIOD_NS)
        n++;
    for (int64_t i = 0; i < n; i++) {
        uint64_t pick = hs_demo_rand(m, 0, 99), acc = 0;
        uint32_t k = 0;
        while (k + 1 < mx.n && pick >= acc + mx.s[k].weight)
            acc += mx.s[k++].weight;
        cells_add(cs, &mx.s[k], req);
    }
}

static void hex16(const uint8_t id[8], char out[17])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[16] = '\0';
}

static int pack_profile(const struct cells *cs, const struct hs_demo_model *m,
                        enum hs_demo_service svc, int64_t from_ns, int64_t until_ns,
                        struct hs_buf *out)
{
    /* strings: "", 4 type names, "span_id", names and files of every function, span ids */
    enum { S_EMPTY, S_SAMPLES, S_COUNT, S_CPU, S_NS, S_SPAN_ID, S_FUNCS };
    char spans[HS_DEMO_RECENT][17];
    char *strs[S_FUNCS + 2 * F_COUNT + HS_DEMO_RECENT];
    size_t nstr = 0;
    static const char *const fixed[] = {"", "samples", "count", "cpu", "nanoseconds", "span_id"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(fixed); i++)
        strs[nstr++] = (char *)fixed[i];
    for (int f = 0; f < F_COUNT; f++) {
        strs[nstr++] = (char *)funcs[f].name;
        strs[nstr++] = (char *)funcs[f].file;
    }
    int64_t span_str[HS_DEMO_RECENT];
    for (uint32_t i = 0; i < HS_DEMO_RECENT; i++)
        span_str[i] = -1;

    Perftools__Profiles__Function fn[F_COUNT], *fnp[F_COUNT];
    Perftools__Profiles__Line line[F_COUNT], *linep[F_COUNT];
    Perftools__Profiles__Location loc[F_COUNT], *locp[F_COUNT];
    for (int f = 0; f < F_COUNT; f++) {
        perftools__profiles__function__init(&fn[f]);
        fn[f].id = (uint64_t)f + 1;
        fn[f].name = fn[f].system_name = S_FUNCS + 2 * f;
        fn[f].filename = S_FUNCS + 2 * f + 1;
        fnp[f] = &fn[f];
        perftools__profiles__line__init(&line[f]);
        line[f].function_id = (uint64_t)f + 1;
        line[f].line = 10 + 7 * f;
        linep[f] = &line[f];
        perftools__profiles__location__init(&loc[f]); /* one location per function: no inlining */
        loc[f].id = (uint64_t)f + 1;
        loc[f].address = 0x401000 + 0x40 * (uint64_t)f;
        loc[f].line = &linep[f];
        loc[f].n_line = 1;
        locp[f] = &loc[f];
    }

    Perftools__Profiles__Sample *smp = hs_xcalloc(HS_MAX(cs->n, 1), sizeof(*smp));
    Perftools__Profiles__Sample **smpp = hs_xcalloc(HS_MAX(cs->n, 1), sizeof(*smpp));
    uint64_t(*locs)[MAX_DEPTH] = hs_xcalloc(HS_MAX(cs->n, 1), sizeof(*locs));
    int64_t(*vals)[2] = hs_xcalloc(HS_MAX(cs->n, 1), sizeof(*vals));
    Perftools__Profiles__Label *lab = hs_xcalloc(HS_MAX(cs->n, 1), sizeof(*lab));
    Perftools__Profiles__Label **labp = hs_xcalloc(HS_MAX(cs->n, 1), sizeof(*labp));
    for (uint32_t i = 0; i < cs->n; i++) {
        const struct stack *st = cs->c[i].st;
        perftools__profiles__sample__init(&smp[i]);
        for (uint32_t d = 0; d < st->depth; d++) /* pprof stores the leaf first */
            locs[i][d] = (uint64_t)st->f[st->depth - 1 - d] + 1;
        smp[i].location_id = locs[i];
        smp[i].n_location_id = st->depth;
        vals[i][0] = cs->c[i].count;
        vals[i][1] = cs->c[i].count * PERIOD_NS;
        smp[i].value = vals[i];
        smp[i].n_value = 2;
        int req = cs->c[i].req;
        if (req >= 0) {
            if (span_str[req] < 0) {
                const struct hs_demo_request *r = &m->recent[req];
                hex16(svc == HS_DEMO_API ? r->api_span : r->db_span, spans[req]);
                span_str[req] = (int64_t)nstr;
                strs[nstr++] = spans[req];
            }
            perftools__profiles__label__init(&lab[i]);
            lab[i].key = S_SPAN_ID;
            lab[i].str = span_str[req];
            labp[i] = &lab[i];
            smp[i].label = &labp[i];
            smp[i].n_label = 1;
        }
        smpp[i] = &smp[i];
    }

    Perftools__Profiles__ValueType types[2], *typesp[2], period;
    perftools__profiles__value_type__init(&types[0]);
    types[0].type = S_SAMPLES;
    types[0].unit = S_COUNT;
    perftools__profiles__value_type__init(&types[1]);
    types[1].type = S_CPU;
    types[1].unit = S_NS;
    typesp[0] = &types[0];
    typesp[1] = &types[1];
    perftools__profiles__value_type__init(&period);
    period.type = S_CPU;
    period.unit = S_NS;

    Perftools__Profiles__Profile p;
    perftools__profiles__profile__init(&p);
    p.sample_type = typesp;
    p.n_sample_type = 2;
    p.sample = smpp;
    p.n_sample = cs->n;
    p.location = locp;
    p.n_location = F_COUNT;
    p.function = fnp;
    p.n_function = F_COUNT;
    p.string_table = strs;
    p.n_string_table = nstr;
    p.time_nanos = from_ns;
    p.duration_nanos = until_ns - from_ns;
    p.period_type = &period;
    p.period = PERIOD_NS;

    size_t n = perftools__profiles__profile__get_packed_size(&p);
    int rc = hs_buf_reserve(out, n);
    if (rc == 0) {
        perftools__profiles__profile__pack(&p, out->data + out->len);
        out->len += n;
    }
    free(labp);
    free(lab);
    free(vals);
    free(locs);
    free(smpp);
    free(smp);
    return rc;
}

int hs_demo_encode_profile(struct hs_demo_model *m, enum hs_demo_service svc, int64_t from_ns,
                           int64_t until_ns, struct hs_buf *out)
{
    struct cells *cs = hs_xcalloc(1, sizeof(*cs));
    int64_t win = until_ns > from_ns ? until_ns - from_ns : 0;
    /* a process is never quite idle: a few percent of a core outside requests */
    sample_mix(m, cs, svc == HS_DEMO_DB ? MIX(db_idle) : MIX(api_idle), -1, win * 4 / 100);
    for (uint32_t i = 0; i < m->nrecent; i++) {
        const struct hs_demo_request *r = &m->recent[i];
        int64_t lo = svc == HS_DEMO_DB ? r->db_start_ns : r->start_ns;
        int64_t hi = svc == HS_DEMO_DB ? r->db_end_ns : r->end_ns;
        lo = HS_MAX(lo, from_ns);
        hi = HS_MIN(hi, until_ns);
        if (hi <= lo)
            continue;
        /* user-db is busy on its own requests (N+1: busier still); api-server mostly waits */
        int64_t cpu = svc == HS_DEMO_DB ? (hi - lo) * (r->nplus1 ? 90 : 60) / 100
                                        : (hi - lo) * (r->nplus1 ? 8 : 30) / 100;
        struct mix mx = svc == HS_DEMO_API ? MIX(api_req)
                        : r->nplus1        ? MIX(db_nplus1)
                                           : MIX(db_fast);
        sample_mix(m, cs, mx, (int)i, cpu);
    }
    int rc = pack_profile(cs, m, svc, from_ns, until_ns, out);
    free(cs);
    return rc;
}
