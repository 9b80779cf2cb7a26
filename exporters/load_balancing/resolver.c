/* resolver.c: the load_balancing exporter's backend list from a static list or from periodic
 * DNS lookups (uv_getaddrinfo in the thread pool, one at a time, with a timeout), keeping the
 * last good set through failures. */
#include "exporters/load_balancing/resolver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/log.h"

static const struct hs_config_field static_fields[] = {
    {"hostnames", HS_CFG_STRLIST, offsetof(struct hs_resolver_static_config, hostnames),
     .required = true,
     .doc = "the backends, each `host` or `host:port` (`[v6]:port`); kept as written, so a "
            "backend keeps its keys when its address changes"},
    {0},
};

static const struct hs_config_field dns_fields[] = {
    {"hostname", HS_CFG_STRING, offsetof(struct hs_resolver_dns_config, hostname), .required = true,
     .doc = "a name whose A and AAAA records are the backends"},
    {"port", HS_CFG_UINT, offsetof(struct hs_resolver_dns_config, port), "0", .min = 0,
     .max = 65535,
     .doc = "appended to each address: load_balancing's OTLP port for every backend (profiles go "
            "to protocol.pyroscope.port); 0: protocol.otlp.port"},
    {"interval", HS_CFG_DURATION, offsetof(struct hs_resolver_dns_config, interval_ms), "5s",
     .min = 10, .max = 3600000, .doc = "time between lookups"},
    {"timeout", HS_CFG_DURATION, offsetof(struct hs_resolver_dns_config, timeout_ms), "1s",
     .min = 10, .max = 60000,
     .doc = "a lookup not answered by then counts as failed; the last good set is kept"},
    {0},
};

const struct hs_config_field hs_resolver_fields[] = {
    {"static", HS_CFG_SECTION, offsetof(struct hs_resolver_config, static_), .sub = static_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_resolver_config, has_static),
     .doc = "a fixed list of backends"},
    {"dns", HS_CFG_SECTION, offsetof(struct hs_resolver_config, dns), .sub = dns_fields,
     .has_presence = true, .presence_offset = offsetof(struct hs_resolver_config, has_dns),
     .doc = "backends from a DNS name, looked up every interval"},
    {0},
};

/* NULL if `s` is a host, or host:port when allow_port; else what is wrong with it. */
static const char *host_problem(const char *s, bool allow_port)
{
    if (!s || !*s)
        return "is empty";
    if (strstr(s, "://"))
        return "has a scheme: write host or host:port";
    if (strpbrk(s, " \t\r\n"))
        return "contains a blank";
    if (strchr(s, '/'))
        return "has a path: write host or host:port";
    const char *port = NULL;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end)
            return "has an unclosed '['";
        if (end == s + 1)
            return "has an empty [] address";
        if (end[1] && end[1] != ':')
            return "has text after ']' (write [v6] or [v6]:port)";
        port = end[1] ? end + 2 : NULL;
    } else {
        const char *colon = strchr(s, ':');
        if (colon && strchr(colon + 1, ':'))
            return "is an IPv6 address without brackets (write [v6] or [v6]:port)";
        if (colon == s)
            return "has no host before the port";
        port = colon ? colon + 1 : NULL;
    }
    if (!port)
        return NULL;
    if (!allow_port)
        return "has a port: give it as dns.port";
    size_t len = strspn(port, "0123456789");
    if (len == 0 || len > 5 || port[len] || atoi(port) < 1 || atoi(port) > 65535)
        return "has a port that is not 1..65535";
    return NULL;
}

static const struct hs_config_node *seq_item(const struct hs_config_node *at, const char *sec,
                                             const char *key, size_t i)
{
    const struct hs_config_node *n = hs_config_get(hs_config_get(at, sec), key);
    if (!n || n->kind != HS_NODE_SEQ)
        return n ? n : at;
    const struct hs_config_node *c = n->child;
    for (size_t k = 0; c && k < i; k++)
        c = c->next;
    return c ? c : n;
}

int hs_resolver_config_check(const struct hs_resolver_config *c, const struct hs_config_node *at,
                             const char *path, struct hs_error *err)
{
    size_t before = err->count;
    char p[256];
    if (!c->has_static && !c->has_dns)
        hs_config_errorf(err, at, path, "set one of static or dns");
    if (c->has_static && c->has_dns)
        hs_config_errorf(err, at, path, "static and dns exclude each other: keep one");
    if (c->has_static) {
        const struct hs_strlist *h = &c->static_.hostnames;
        snprintf(p, sizeof(p), "%s.static.hostnames", path);
        if (h->count == 0)
            hs_config_errorf(err, seq_item(at, "static", "hostnames", 0), p,
                             "needs at least one backend");
        if (h->count > HS_RESOLVER_MAX_BACKENDS)
            hs_config_errorf(err, seq_item(at, "static", "hostnames", HS_RESOLVER_MAX_BACKENDS), p,
                             "%zu backends is more than the maximum %d", h->count,
                             HS_RESOLVER_MAX_BACKENDS);
        for (size_t i = 0; i < h->count; i++) {
            const char *why = host_problem(h->items[i], true);
            if (why)
                hs_config_errorf(err, seq_item(at, "static", "hostnames", i), p, "\"%s\" %s",
                                 h->items[i], why);
        }
    }
    if (c->has_dns) {
        const char *why = host_problem(c->dns.hostname, false);
        snprintf(p, sizeof(p), "%s.dns.hostname", path);
        const struct hs_config_node *n = hs_config_get(hs_config_get(at, "dns"), "hostname");
        if (why)
            hs_config_errorf(err, n ? n : at, p, "\"%s\" %s",
                             c->dns.hostname ? c->dns.hostname : "", why);
    }
    return err->count > before ? HS_EINVAL : 0;
}

struct lookup {
    uv_getaddrinfo_t req;
    struct hs_resolver *r;
    bool abandoned; /* timed out, or shut down: its answer is dropped when it comes */
};

struct hs_resolver {
    uv_loop_t *loop;
    const struct hs_resolver_config *conf;
    const char *id;
    hs_resolver_change_cb cb;
    hs_resolver_done_cb done;
    void *ud;
    uv_timer_t tick;    /* every interval */
    uv_timer_t timeout; /* of the running lookup */
    int open_handles;
    bool started, closing, done_called;
    struct lookup *running; /* in the thread pool; at most one, answered or abandoned */
    char **set;
    size_t nset;
    struct hs_resolver_stats stats;
    struct hs_ratelimit rl;
    hs_resolver_getaddrinfo_fn gai;
    void (*gai_free)(struct addrinfo *ai);
};

struct hs_resolver *hs_resolver_new(uv_loop_t *loop, const struct hs_resolver_config *conf,
                                    const char *id, hs_resolver_change_cb cb, void *ud)
{
    struct hs_resolver *r = hs_xcalloc(1, sizeof(*r));
    r->loop = loop;
    r->conf = conf;
    r->id = id;
    r->cb = cb;
    r->ud = ud;
    r->rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(60000, 3);
    r->gai = uv_getaddrinfo;
    r->gai_free = uv_freeaddrinfo;
    return r;
}

void hs_resolver_set_getaddrinfo(struct hs_resolver *r, hs_resolver_getaddrinfo_fn fn,
                                 void (*free_fn)(struct addrinfo *ai))
{
    r->gai = fn;
    r->gai_free = free_fn;
}

const struct hs_resolver_stats *hs_resolver_stats(const struct hs_resolver *r)
{
    return &r->stats;
}

const char *const *hs_resolver_backends(const struct hs_resolver *r, size_t *n)
{
    *n = r->nset;
    return (const char *const *)r->set;
}

static void warn_limited(struct hs_resolver *r, const char *what, const char *detail)
{
    uint32_t suppressed = 0;
    if (!hs_ratelimit_allow(&r->rl, hs_now_ms(), &suppressed))
        return;
    char more[64] = "";
    if (suppressed)
        snprintf(more, sizeof(more), " (%u such lines suppressed)", suppressed);
    hs_log_warn(r->id, "resolver: %s%s; keeping the last good set of %zu backends%s", what, detail,
                r->nset, more);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Takes `v` (n malloc'd strings): sorts, dedupes, cuts, and replaces the set if it differs. */
static void offer(struct hs_resolver *r, char **v, size_t n)
{
    qsort(v, n, sizeof(*v), str_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u && strcmp(v[u - 1], v[i]) == 0)
            free(v[i]);
        else
            v[u++] = v[i];
    }
    if (u > HS_RESOLVER_MAX_BACKENDS) {
        r->stats.truncated++;
        hs_log_warn(r->id, "resolver: %zu backends, more than %d: the first %d in byte order kept",
                    u, HS_RESOLVER_MAX_BACKENDS, HS_RESOLVER_MAX_BACKENDS);
        for (size_t i = HS_RESOLVER_MAX_BACKENDS; i < u; i++)
            free(v[i]);
        u = HS_RESOLVER_MAX_BACKENDS;
    }
    bool same = u == r->nset;
    for (size_t i = 0; same && i < u; i++)
        same = strcmp(v[i], r->set[i]) == 0;
    if (same) {
        free_list(v, u);
        return;
    }
    hs_log_info(r->id, "resolver: %zu backends (were %zu), first %s", u, r->nset, v[0]);
    free_list(r->set, r->nset);
    r->set = v;
    r->nset = u;
    r->stats.changes++;
    r->cb(r, (const char *const *)r->set, r->nset, r->ud);
}

/* The addresses of a good answer as backends: "a.b.c.d[:port]" or "[v6][:port]". */
static void answer(struct hs_resolver *r, const struct addrinfo *res)
{
    size_t cap = 0, n = 0;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        cap++;
    char **v = hs_xcalloc(cap ? cap : 1, sizeof(*v));
    for (const struct addrinfo *a = res; a; a = a->ai_next) {
        char ip[64], out[96];
        if (a->ai_family == AF_INET)
            uv_ip4_name((const struct sockaddr_in *)a->ai_addr, ip, sizeof(ip));
        else if (a->ai_family == AF_INET6)
            uv_ip6_name((const struct sockaddr_in6 *)a->ai_addr, ip, sizeof(ip));
        else
            continue;
        const char *l = a->ai_family == AF_INET6 ? "[" : "",
                   *rb = a->ai_family == AF_INET6 ? "]" : "";
        if (r->conf->dns.port)
            snprintf(out, sizeof(out), "%s%s%s:%u", l, ip, rb, r->conf->dns.port);
        else
            snprintf(out, sizeof(out), "%s%s%s", l, ip, rb);
        v[n++] = hs_xstrdup(out);
    }
    if (n == 0) {
        free(v);
        r->stats.empty++;
        warn_limited(r, "no address for ", r->conf->dns.hostname);
        return;
    }
    offer(r, v, n);
}

static void maybe_done(struct hs_resolver *r)
{
    if (r->closing && !r->done_called && r->open_handles == 0 && !r->running) {
        r->done_called = true;
        if (r->done)
            r->done(r, r->ud);
    }
}

static void on_answer(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct lookup *l = hs_container_of(req, struct lookup, req);
    struct hs_resolver *r = l->r;
    r->running = NULL;
    if (!l->abandoned) {
        uv_timer_stop(&r->timeout);
        r->stats.lookups++;
        if (status < 0) {
            char detail[160];
            snprintf(detail, sizeof(detail), "%s: %s", r->conf->dns.hostname, uv_strerror(status));
            r->stats.failures++;
            warn_limited(r, "lookup failed for ", detail);
        } else {
            answer(r, res);
        }
    }
    if (res)
        r->gai_free(res);
    free(l);
    maybe_done(r);
}

static void on_timeout(uv_timer_t *t)
{
    struct hs_resolver *r = hs_container_of(t, struct hs_resolver, timeout);
    if (!r->running || r->running->abandoned)
        return;
    r->running->abandoned = true;
    r->stats.timeouts++;
    char detail[160];
    snprintf(detail, sizeof(detail), "%s after %llu ms", r->conf->dns.hostname,
             (unsigned long long)r->conf->dns.timeout_ms);
    warn_limited(r, "no answer for ", detail);
}

static void on_tick(uv_timer_t *t)
{
    struct hs_resolver *r = hs_container_of(t, struct hs_resolver, tick);
    if (r->running) { /* a timed-out lookup still holds a pool thread: never pile up more */
        r->stats.skipped++;
        return;
    }
    struct lookup *l = hs_xcalloc(1, sizeof(*l));
    l->r = r;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = r->gai(r->loop, &l->req, on_answer, r->conf->dns.hostname, NULL, &hints);
    if (rc < 0) {
        free(l);
        r->stats.lookups++;
        r->stats.failures++;
        warn_limited(r, "lookup not started: ", uv_strerror(rc));
        return;
    }
    r->running = l;
    uv_timer_start(&r->timeout, on_timeout, r->conf->dns.timeout_ms, 0);
}

int hs_resolver_start(struct hs_resolver *r)
{
    if (r->started || r->closing)
        return HS_EINVAL;
    r->started = true;
    if (r->conf->has_static) {
        const struct hs_strlist *h = &r->conf->static_.hostnames;
        char **v = hs_xcalloc(h->count ? h->count : 1, sizeof(*v));
        for (size_t i = 0; i < h->count; i++)
            v[i] = hs_xstrdup(h->items[i]);
        if (h->count)
            offer(r, v, h->count);
        else
            free(v);
        return 0;
    }
    uv_timer_init(r->loop, &r->tick);
    uv_timer_init(r->loop, &r->timeout);
    r->open_handles = 2;
    return uv_timer_start(&r->tick, on_tick, 0, r->conf->dns.interval_ms);
}

static void on_close(uv_handle_t *h)
{
    struct hs_resolver *r = h->data;
    r->open_handles--;
    maybe_done(r);
}

void hs_resolver_shutdown(struct hs_resolver *r, hs_resolver_done_cb done)
{
    if (r->closing)
        return;
    r->closing = true;
    r->done = done;
    if (r->running)
        r->running->abandoned = true;
    if (r->open_handles) {
        r->tick.data = r;
        r->timeout.data = r;
        uv_close((uv_handle_t *)&r->tick, on_close);
        uv_close((uv_handle_t *)&r->timeout, on_close);
    }
    maybe_done(r);
}

void hs_resolver_free(struct hs_resolver *r)
{
    if (!r)
        return;
    free_list(r->set, r->nset);
    free(r);
}
