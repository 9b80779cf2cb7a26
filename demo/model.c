/* model.c: the demo's traffic, as pure functions of a seeded RNG and timestamps: requests
 * (api-server -> user-db, sometimes N+1), their OTLP encoding, and CPU profiles (and
 * api-server's goroutine profile) whose stacks and span_id labels match the requests that ran
 * in the profile's window. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/compress.h"
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
    /* Go's standard library, where api-server's goroutines wait */
    F_CLIENT_DO,
    F_CLIENT_DO_,
    F_CLIENT_SEND,
    F_SEND,
    F_ROUNDTRIP,
    F_ROUNDTRIP_,
    F_PC_ROUNDTRIP,
    F_PC_READLOOP,
    F_PC_WRITELOOP,
    F_PC_READ,
    F_PEEK,
    F_FILL,
    F_CONN_READ,
    F_NETFD_READ,
    F_FD_READ,
    F_LISTEN,
    F_SRV_SERVE,
    F_ACCEPT,
    F_ACCEPT_,
    F_NETFD_ACCEPT,
    F_FD_ACCEPT,
    F_WAIT_READ,
    F_PD_WAIT,
    F_POLL_WAIT,
    F_NETPOLLBLOCK,
    F_SELECTGO,
    F_GOPARK,
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
    /* as runtime/pprof names them, files as -trimpath writes them (Go 1.19) */
    [F_CLIENT_DO] = {"net/http.(*Client).Do", "net/http/client.go"},
    [F_CLIENT_DO_] = {"net/http.(*Client).do", "net/http/client.go"},
    [F_CLIENT_SEND] = {"net/http.(*Client).send", "net/http/client.go"},
    [F_SEND] = {"net/http.send", "net/http/client.go"},
    [F_ROUNDTRIP] = {"net/http.(*Transport).RoundTrip", "net/http/roundtrip.go"},
    [F_ROUNDTRIP_] = {"net/http.(*Transport).roundTrip", "net/http/transport.go"},
    [F_PC_ROUNDTRIP] = {"net/http.(*persistConn).roundTrip", "net/http/transport.go"},
    [F_PC_READLOOP] = {"net/http.(*persistConn).readLoop", "net/http/transport.go"},
    [F_PC_WRITELOOP] = {"net/http.(*persistConn).writeLoop", "net/http/transport.go"},
    [F_PC_READ] = {"net/http.(*persistConn).Read", "net/http/transport.go"},
    [F_PEEK] = {"bufio.(*Reader).Peek", "bufio/bufio.go"},
    [F_FILL] = {"bufio.(*Reader).fill", "bufio/bufio.go"},
    [F_CONN_READ] = {"net.(*conn).Read", "net/net.go"},
    [F_NETFD_READ] = {"net.(*netFD).Read", "net/fd_posix.go"},
    [F_FD_READ] = {"internal/poll.(*FD).Read", "internal/poll/fd_unix.go"},
    [F_LISTEN] = {"net/http.(*Server).ListenAndServe", "net/http/server.go"},
    [F_SRV_SERVE] = {"net/http.(*Server).Serve", "net/http/server.go"},
    [F_ACCEPT] = {"net.(*TCPListener).Accept", "net/tcpsock.go"},
    [F_ACCEPT_] = {"net.(*TCPListener).accept", "net/tcpsock_posix.go"},
    [F_NETFD_ACCEPT] = {"net.(*netFD).accept", "net/fd_unix.go"},
    [F_FD_ACCEPT] = {"internal/poll.(*FD).Accept", "internal/poll/fd_unix.go"},
    [F_WAIT_READ] = {"internal/poll.(*pollDesc).waitRead", "internal/poll/fd_poll_runtime.go"},
    [F_PD_WAIT] = {"internal/poll.(*pollDesc).wait", "internal/poll/fd_poll_runtime.go"},
    [F_POLL_WAIT] = {"internal/poll.runtime_pollWait", "runtime/netpoll.go"}, /* go:linkname */
    [F_NETPOLLBLOCK] = {"runtime.netpollblock", "runtime/netpoll.go"},
    [F_SELECTGO] = {"runtime.selectgo", "runtime/select.go"},
    [F_GOPARK] = {"runtime.gopark", "runtime/proc.go"},
};

#define MAX_DEPTH 16

struct stack {
    uint8_t weight; /* % of the mix; in api_goroutines, how many goroutines */
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
/* api-server while a request runs and is on CPU (its CPU samples; its goroutine when caught
 * running) */
static const struct stack api_req[] = {
    {45, 5, {F_SERVE, F_ROUTER, F_GETUSER, F_FETCH, F_READ}},
    {25, 4, {F_SERVE, F_ROUTER, F_GETUSER, F_MARSHAL}},
    {15, 4, {F_SERVE, F_ROUTER, F_GETUSER, F_RENDER}},
    {15, 3, {F_SERVE, F_ROUTER, F_GETUSER}},
};
/* api-server's request goroutine the rest of the time: parked in its HTTP call to user-db,
 * the Transport waiting in a select for the connection's readLoop to bring the response */
static const struct stack api_wait[] = {
    {100,
     13,
     {F_SERVE, F_ROUTER, F_GETUSER, F_FETCH, F_CLIENT_DO, F_CLIENT_DO_, F_CLIENT_SEND, F_SEND,
      F_ROUNDTRIP, F_ROUNDTRIP_, F_PC_ROUNDTRIP, F_SELECTGO, F_GOPARK}},
};
static const struct stack api_idle[] = {
    {50, 2, {F_MAIN, F_SERVE}},
    {50, 1, {F_GC}},
};
/* api-server's goroutines that outlive requests: main in Accept, and the read and write loops
 * of two idle keep-alive connections to user-db (net/http keeps 2 per host) */
static const struct stack api_goroutines[] = {
    {1,
     12,
     {F_MAIN, F_LISTEN, F_SRV_SERVE, F_ACCEPT, F_ACCEPT_, F_NETFD_ACCEPT, F_FD_ACCEPT, F_WAIT_READ,
      F_PD_WAIT, F_POLL_WAIT, F_NETPOLLBLOCK, F_GOPARK}},
    {2,
     12,
     {F_PC_READLOOP, F_PEEK, F_FILL, F_PC_READ, F_CONN_READ, F_NETFD_READ, F_FD_READ, F_WAIT_READ,
      F_PD_WAIT, F_POLL_WAIT, F_NETPOLLBLOCK, F_GOPARK}},
    {2, 3, {F_PC_WRITELOOP, F_SELECTGO, F_GOPARK}},
};

struct mix {
    const struct stack *s;
    uint32_t n;
};
#define MIX(a) ((struct mix){(a), HS_ARRAY_SIZE(a)})

/* 64 requests x 7 stacks, plus the background, fit */
#define MAX_CELLS 512

/* Samples aggregated by (stack, request): the pprof Sample messages to be. */
struct cells {
    struct {
        const struct stack *st;
        int req; /* index into recent, -1 for none */
        int64_t count;
    } c[MAX_CELLS];
    uint32_t n;
};

static void cells_add(struct cells *cs, const struct stack *st, int req, int64_t count)
{
    for (uint32_t i = 0; i < cs->n; i++)
        if (cs->c[i].st == st && cs->c[i].req == req) {
            cs->c[i].count += count;
            return;
        }
    if (cs->n == MAX_CELLS)
        return; /* bounded, and sized so that it is never reached */
    cs->c[cs->n].st = st;
    cs->c[cs->n].req = req;
    cs->c[cs->n++].count = count;
}

/* Time `ns` of a mix as samples every PERIOD_NS (the remainder rounded at random), each of a
 * stack drawn by the mix's weights. */
static void sample_mix(struct hs_demo_model *m, struct cells *cs, struct mix mx, int req,
                       int64_t ns)
{
    if (ns <= 0)
        return;
    int64_t n = ns / PERIOD_NS;
    if ((int64_t)hs_demo_rand(m, 0, PERIOD_NS - 1) < ns % PERIOD_NS)
        n++;
    for (int64_t i = 0; i < n; i++) {
        uint64_t pick = hs_demo_rand(m, 0, 99), acc = 0;
        uint32_t k = 0;
        while (k + 1 < mx.n && pick >= acc + mx.s[k].weight)
            acc += mx.s[k++].weight;
        cells_add(cs, &mx.s[k], req, 1);
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

/* What a profile's values are, as Go's runtime/pprof writes them: a CPU profile's
 * samples/count and cpu/nanoseconds (a sample every 10 ms on CPU), a goroutine profile's
 * goroutine/count (period 1 goroutine). A cell's values: its count, then count x period. */
struct ptype {
    const char *type[2], *unit[2];
    uint32_t ntypes;
    const char *period_type, *period_unit;
    int64_t period;
};

static const struct ptype PT_CPU = {
    {"samples", "cpu"}, {"count", "nanoseconds"}, 2, "cpu", "nanoseconds", PERIOD_NS};
static const struct ptype PT_GOROUTINE = {{"goroutine"}, {"count"}, 1, "goroutine", "count", 1};

/* A profile's string table: each string once, "" first. */
struct strtab {
    char *s[8 + 2 * F_COUNT + HS_DEMO_RECENT];
    size_t n;
};

static int64_t intern(struct strtab *t, const char *s)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->s[i], s) == 0)
            return (int64_t)i;
    if (t->n == HS_ARRAY_SIZE(t->s))
        abort(); /* sized for every string a profile can hold */
    t->s[t->n] = (char *)s;
    return (int64_t)t->n++;
}

/* Every function with one location of its own (no inlining), ids f + 1. */
struct functab {
    Perftools__Profiles__Function fn[F_COUNT], *fnp[F_COUNT];
    Perftools__Profiles__Line line[F_COUNT], *linep[F_COUNT];
    Perftools__Profiles__Location loc[F_COUNT], *locp[F_COUNT];
};

static void functab_init(struct functab *ft, struct strtab *st)
{
    for (int f = 0; f < F_COUNT; f++) {
        perftools__profiles__function__init(&ft->fn[f]);
        ft->fn[f].id = (uint64_t)f + 1;
        ft->fn[f].name = ft->fn[f].system_name = intern(st, funcs[f].name);
        ft->fn[f].filename = intern(st, funcs[f].file);
        ft->fnp[f] = &ft->fn[f];
        perftools__profiles__line__init(&ft->line[f]);
        ft->line[f].function_id = (uint64_t)f + 1;
        ft->line[f].line = 10 + 7 * f;
        ft->linep[f] = &ft->line[f];
        perftools__profiles__location__init(&ft->loc[f]);
        ft->loc[f].id = (uint64_t)f + 1;
        ft->loc[f].address = 0x401000 + 0x40 * (uint64_t)f;
        ft->loc[f].line = &ft->linep[f];
        ft->loc[f].n_line = 1;
        ft->locp[f] = &ft->loc[f];
    }
}

/* The Sample messages of the cells, labelled span_id=<the request's span of svc>; the arrays
 * they point into are freed by samples_free. */
struct samples {
    Perftools__Profiles__Sample *smp, **smpp;
    uint64_t (*locs)[MAX_DEPTH];
    int64_t (*vals)[2];
    Perftools__Profiles__Label *lab, **labp;
    char spans[HS_DEMO_RECENT][17];
};

static void samples_build(struct samples *ss, const struct cells *cs, const struct hs_demo_model *m,
                          enum hs_demo_service svc, const struct ptype *pt, struct strtab *st)
{
    size_t n = HS_MAX(cs->n, 1);
    ss->smp = hs_xcalloc(n, sizeof(*ss->smp));
    ss->smpp = hs_xcalloc(n, sizeof(*ss->smpp));
    ss->locs = hs_xcalloc(n, sizeof(*ss->locs));
    ss->vals = hs_xcalloc(n, sizeof(*ss->vals));
    ss->lab = hs_xcalloc(n, sizeof(*ss->lab));
    ss->labp = hs_xcalloc(n, sizeof(*ss->labp));
    for (uint32_t i = 0; i < cs->n; i++) {
        const struct stack *stk = cs->c[i].st;
        Perftools__Profiles__Sample *s = &ss->smp[i];
        perftools__profiles__sample__init(s);
        for (uint32_t d = 0; d < stk->depth; d++) /* pprof stores the leaf first */
            ss->locs[i][d] = (uint64_t)stk->f[stk->depth - 1 - d] + 1;
        s->location_id = ss->locs[i];
        s->n_location_id = stk->depth;
        ss->vals[i][0] = cs->c[i].count;
        ss->vals[i][1] = cs->c[i].count * pt->period;
        s->value = ss->vals[i];
        s->n_value = pt->ntypes;
        int req = cs->c[i].req;
        if (req >= 0) {
            const struct hs_demo_request *r = &m->recent[req];
            hex16(svc == HS_DEMO_API ? r->api_span : r->db_span, ss->spans[req]);
            perftools__profiles__label__init(&ss->lab[i]);
            ss->lab[i].key = intern(st, "span_id");
            ss->lab[i].str = intern(st, ss->spans[req]);
            ss->labp[i] = &ss->lab[i];
            s->label = &ss->labp[i];
            s->n_label = 1;
        }
        ss->smpp[i] = s;
    }
}

static void samples_free(struct samples *ss)
{
    free(ss->labp);
    free(ss->lab);
    free(ss->vals);
    free(ss->locs);
    free(ss->smpp);
    free(ss->smp);
}

static int pack_profile(const struct cells *cs, const struct hs_demo_model *m,
                        enum hs_demo_service svc, const struct ptype *pt, int64_t from_ns,
                        int64_t until_ns, struct hs_buf *out)
{
    struct strtab st = {.n = 0};
    intern(&st, "");
    Perftools__Profiles__ValueType types[2], *typesp[2], period;
    for (uint32_t k = 0; k < pt->ntypes; k++) {
        perftools__profiles__value_type__init(&types[k]);
        types[k].type = intern(&st, pt->type[k]);
        types[k].unit = intern(&st, pt->unit[k]);
        typesp[k] = &types[k];
    }
    perftools__profiles__value_type__init(&period);
    period.type = intern(&st, pt->period_type);
    period.unit = intern(&st, pt->period_unit);
    struct functab *ft = hs_xmalloc(sizeof(*ft));
    functab_init(ft, &st);
    struct samples *ss = hs_xcalloc(1, sizeof(*ss));
    samples_build(ss, cs, m, svc, pt, &st);

    Perftools__Profiles__Profile p;
    perftools__profiles__profile__init(&p);
    p.sample_type = typesp;
    p.n_sample_type = pt->ntypes;
    p.sample = ss->smpp;
    p.n_sample = cs->n;
    p.location = ft->locp;
    p.n_location = F_COUNT;
    p.function = ft->fnp;
    p.n_function = F_COUNT;
    p.string_table = st.s;
    p.n_string_table = st.n;
    p.time_nanos = from_ns;
    p.duration_nanos = until_ns - from_ns;
    p.period_type = &period;
    p.period = pt->period;

    size_t n = perftools__profiles__profile__get_packed_size(&p);
    int rc = hs_buf_reserve(out, n);
    if (rc == 0) {
        perftools__profiles__profile__pack(&p, out->data + out->len);
        out->len += n;
    }
    samples_free(ss);
    free(ss);
    free(ft);
    return rc;
}

/* api-server is on CPU for this share of a request; the rest it waits on user-db. */
static int64_t api_cpu_pct(const struct hs_demo_request *r)
{
    return r->nplus1 ? 8 : 30;
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
                                        : (hi - lo) * api_cpu_pct(r) / 100;
        struct mix mx = svc == HS_DEMO_API ? MIX(api_req)
                        : r->nplus1        ? MIX(db_nplus1)
                                           : MIX(db_fast);
        sample_mix(m, cs, mx, (int)i, cpu);
    }
    int rc = pack_profile(cs, m, svc, &PT_CPU, from_ns, until_ns, out);
    free(cs);
    return rc;
}

int hs_demo_encode_goroutines(struct hs_demo_model *m, int64_t from_ns, int64_t until_ns,
                              struct hs_buf *out)
{
    struct cells *cs = hs_xcalloc(1, sizeof(*cs));
    int64_t snapshots = until_ns > from_ns ? (until_ns - from_ns) / PERIOD_NS : 0;
    for (size_t k = 0; k < HS_ARRAY_SIZE(api_goroutines) && snapshots > 0; k++)
        cells_add(cs, &api_goroutines[k], -1, snapshots * api_goroutines[k].weight);
    /* a request's goroutine, in each snapshot while its span runs: running, in the stacks of
     * its CPU samples, for its share on CPU; otherwise parked in the call to user-db */
    for (uint32_t i = 0; i < m->nrecent; i++) {
        const struct hs_demo_request *r = &m->recent[i];
        int64_t lo = HS_MAX(r->start_ns, from_ns), hi = HS_MIN(r->end_ns, until_ns);
        if (hi <= lo)
            continue;
        int64_t cpu = (hi - lo) * api_cpu_pct(r) / 100;
        sample_mix(m, cs, MIX(api_req), (int)i, cpu);
        sample_mix(m, cs, MIX(api_wait), (int)i, hi - lo - cpu);
    }
    int rc = pack_profile(cs, m, HS_DEMO_API, &PT_GOROUTINE, from_ns, until_ns, out);
    free(cs);
    return rc;
}

/* pyroscope-go's sample_type_config for its goroutine profile (session.go) */
static const char goroutines_stc[] =
    "{\"goroutine\":{\"units\":\"goroutines\",\"aggregation\":\"average\","
    "\"display-name\":\"goroutines\"}}";

static int put_part(struct hs_buf *b, const char *boundary, bool first, const char *name,
                    const char *filename, const void *data, size_t len)
{
    int rc = hs_buf_printf(b,
                           "%s--%s\r\nContent-Disposition: form-data; name=\"%s\"; "
                           "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                           first ? "" : "\r\n", boundary, name, filename);
    return rc | hs_buf_append(b, data, len);
}

int hs_demo_goroutines_upload(struct hs_demo_model *m, int64_t from_ns, int64_t until_ns,
                              struct hs_demo_upload *up)
{
    struct hs_buf raw = {0}, gz = {0};
    int rc = hs_demo_encode_goroutines(m, from_ns, until_ns, &raw);
    if (rc == 0)
        rc = hs_gzip(raw.data, raw.len, 6, &gz);
    hs_buf_free(&raw);
    /* Go's mime/multipart: a random boundary of 30 bytes in hex, file parts typed
     * application/octet-stream, as remote.go's CreateFormFile writes them */
    char boundary[61];
    for (int i = 0; i < 30; i++)
        snprintf(boundary + 2 * i, 3, "%02x", (unsigned)hs_demo_rand(m, 0, 255));
    up->body = (struct hs_buf){0};
    if (rc == 0)
        rc = put_part(&up->body, boundary, true, "profile", "profile.pprof", gz.data, gz.len) |
             put_part(&up->body, boundary, false, "sample_type_config", "sample_type_config.json",
                      goroutines_stc, strlen(goroutines_stc)) |
             hs_buf_printf(&up->body, "\r\n--%s--\r\n", boundary);
    hs_buf_free(&gz);
    if (rc) {
        hs_buf_free(&up->body);
        return HS_ENOMEM;
    }
    snprintf(up->content_type, sizeof(up->content_type), "multipart/form-data; boundary=%s",
             boundary);
    /* url.Values.Encode: keys sorted, name's braces and '=' escaped; no format= (a multipart
     * body is told by its Content-Type, wire.md §5.3) */
    snprintf(up->query, sizeof(up->query),
             "aggregationType=average&from=%" PRId64 "&name=%s%%7Benv%%3Ddemo%%7D&sampleRate=0"
             "&spyName=hotspan-demo&units=goroutines&until=%" PRId64,
             from_ns, hs_demo_service_names[HS_DEMO_API], until_ns);
    return 0;
}
