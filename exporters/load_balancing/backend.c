/* backend.c: one backend of the load_balancing exporter: an otlp exporter to its OTLP port and a
 * pyroscope exporter to its Pyroscope port, each with its own queue (and store file); a backend
 * that leaves the ring hands what it holds to the keys' new owners before it goes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/log.h"
#include "exporters/helper/exporter.h"
#include "exporters/load_balancing/lb_int.h"
#include "exporters/load_balancing/ring.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"

static const char *const signal_label[LB_SIGNALS] = {"traces", "profiles"};

void lb_count_refused(struct lb *lb, struct lb_backend *b, int sig, uint64_t n)
{
    hs_counter_add(b ? b->refused[sig] : lb->refused_none[sig], n);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&lb->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(lb->base.id, "refused %llu %s for %s: %s (%u similar messages suppressed)",
                    (unsigned long long)n, sig == LB_TRACES ? "spans" : "profiles",
                    b ? b->name : "no backend",
                    !b            ? "the resolver has not answered yet"
                    : b->exp[sig] ? "its queue is full (backend slow or down), retry later"
                                  : "it has no exporter (rejoining while its old one ends, or "
                                    "it could not be made: see above)",
                    suppressed);
}

/* "host" or "host:port" or "[v6]" or "[v6]:port": the host part (brackets kept) and the port
 * (0 when none). The resolver checked the shape. */
static void split_name(const char *name, char *host, size_t hostlen, unsigned *port)
{
    const char *colon = name[0] == '[' ? strchr(name, ']') : name;
    colon = colon ? strchr(colon, ':') : NULL;
    size_t n = colon ? (size_t)(colon - name) : strlen(name);
    snprintf(host, hostlen, "%.*s", (int)n, name);
    *port = colon ? (unsigned)atoi(colon + 1) : 0;
}

static struct hs_component *make_exporter(struct lb_backend *b, int sig)
{
    struct lb *lb = b->lb;
    char host[256], ep[300], path[300];
    unsigned port;
    split_name(b->name, host, sizeof(host), &port);
    /* the port in a name is the OTLP port; profiles always go to protocol.pyroscope.port */
    if (sig == LB_PROFILES || !port)
        port = sig == LB_TRACES ? hs_otlp_backend_port(&lb->conf.protocol.otlp)
                                : lb->conf.protocol.pyroscope.port;
    snprintf(ep, sizeof(ep), "%s://%s:%u", lb->tls[sig] ? "https" : "http", host, port);
    snprintf(path, sizeof(path), "%s.protocol.%s", lb->base.id,
             sig == LB_TRACES ? "otlp" : "pyroscope");
    struct hs_error err = {0};
    struct hs_component *c = NULL;
    int rc = sig == LB_TRACES
                 ? hs_otlp_backend_new(&lb->conf.protocol.otlp, ep, NULL, path, &c, &err)
                 : hs_pyroscope_backend_new(&lb->conf.protocol.pyroscope, ep, NULL, path, &c, &err);
    for (size_t i = 0; i < err.count; i++)
        hs_log_error(lb->base.id, "backend %s: %s", b->name, err.lines[i]);
    hs_error_free(&err);
    if (rc != 0)
        return NULL;
    c->id = hs_xstrdup(lb->base.id);
    c->loop = lb->host.loop;
    c->metrics = lb->host.metrics;
    hs_container_of(c, struct hs_exporter, base)->backend = b->name;
    if ((rc = c->type->start(c, &lb->host)) != 0) { /* e.g. its store file cannot be opened */
        hs_log_error(lb->base.id, "backend %s: %s exporter did not start: %s", b->name,
                     signal_label[sig], hs_strerror(rc));
        free(c->id);
        c->type->destroy(c);
        return NULL;
    }
    return c;
}

struct lb_backend *lb_backend_new(struct lb *lb, const char *name)
{
    struct lb_backend *b = hs_xcalloc(1, sizeof(*b));
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->lb = lb;
    for (int sig = 0; sig < LB_SIGNALS; sig++) {
        char labels[400];
        snprintf(labels, sizeof(labels), "exporter=\"%s\",backend=\"%s\",signal=\"%s\"",
                 lb->base.id, b->name, signal_label[sig]);
        b->refused[sig] = hs_metrics_counter(
            lb->host.metrics, "load_balancing_refused_total",
            "Spans or profiles refused upstream because a backend they route to had no room in "
            "its queue (the whole batch is refused)",
            labels);
        b->rerouted[sig] = hs_metrics_counter(
            lb->host.metrics, "load_balancing_rerouted_total",
            "Spans or profiles a backend held when it left the resolver's answer, queued at their "
            "keys' new owners",
            labels);
    }
    /* A name that left and came back while its old self still ends what it had in flight: its
     * exporters wait for that one (they would share its store file and metric series); until
     * then its keys are refused, for at most one request's timeout. */
    bool leaving = false;
    for (const struct lb_backend *r = lb->retiring; r && !leaving; r = r->next)
        leaving = strcmp(r->name, name) == 0;
    for (int sig = 0; sig < LB_SIGNALS && !leaving; sig++)
        b->exp[sig] = make_exporter(b, sig);
    return b;
}

void lb_backend_free(struct lb_backend *b)
{
    for (int sig = 0; sig < LB_SIGNALS; sig++) {
        if (b->exp[sig]) {
            free(b->exp[sig]->id);
            b->exp[sig]->type->destroy(b->exp[sig]);
        }
    }
    free(b);
}

static struct lb_backend *backend_of(struct hs_component *c)
{
    const char *name = hs_container_of(c, struct hs_exporter, base)->backend;
    return hs_container_of(name, struct lb_backend, name);
}

/* ---- leaving ----------------------------------------------------------------------------- */

/* An item the leaving backend held goes where its key lives now. In memory a whole batch is
 * split again by the new ring (exact for traceID too); a record from disk, or an /ingest batch
 * cut short, follows the key it was queued with. */
static void hand_over(struct lb_backend *b, int sig, struct hs_sender_moved *m)
{
    struct lb *lb = b->lb;
    hs_counter_add(b->rerouted[sig], m->count);
    if (m->item && m->first_part == 0) {
        lb_reroute_batch(lb, sig, m->item);
        m->item = NULL;
        return;
    }
    struct hs_exporter *to = lb_taker(lb, m->key, sig);
    if (to && hs_exporter_adopt(to, m) == 0)
        return;
    m->kept = true; /* with storage: left in this backend's file, re-routed at the next start */
    if (m->item) {
        hs_metrics_drop(lb->host.metrics, lb->base.id, "not_rerouted", m->count);
        if (sig == LB_TRACES)
            hs_traces_unref(m->item);
        else
            hs_profiles_unref(m->item);
        m->item = NULL;
    }
}

static void hand_over_traces(void *ud, struct hs_sender_moved *m)
{
    hand_over(ud, LB_TRACES, m);
}

static void hand_over_profiles(void *ud, struct hs_sender_moved *m)
{
    hand_over(ud, LB_PROFILES, m);
}

/* A backend of the ring named like one that has just left: its exporters are made now. */
static void rejoin(struct lb *lb, const char *name)
{
    int i = lb->ring && !lb->closing ? hs_ring_find(lb->ring, name) : -1;
    struct lb_backend *b = i >= 0 ? lb->backends[i] : NULL;
    for (int sig = 0; b && sig < LB_SIGNALS; sig++)
        if (!b->exp[sig])
            b->exp[sig] = make_exporter(b, sig);
}

/* Both exporters are done: a leaving backend is freed; a shutdown moves on. */
static void backend_done(struct lb_backend *b)
{
    struct lb *lb = b->lb;
    if (b->retiring) {
        struct lb_backend **pp = &lb->retiring;
        while (*pp != b)
            pp = &(*pp)->next;
        *pp = b->next;
        hs_log_info(lb->base.id, "backend %s left: what it held went to the keys' new owners",
                    b->name);
        char name[sizeof(b->name)];
        memcpy(name, b->name, sizeof(name));
        lb_backend_free(b);
        rejoin(lb, name);
    } else {
        lb->closing_backends--; /* freed with the exporter */
    }
    if (lb->closing)
        lb_shutdown_step(lb);
}

static void exporter_done(struct hs_component *c)
{
    struct lb_backend *b = backend_of(c);
    if (--b->closing == 0)
        backend_done(b);
}

/* One count is held while the shutdowns are called: an exporter that was never started is done
 * at once, and the backend must outlive the loop. */
static void backend_close(struct lb_backend *b)
{
    b->closing = 1;
    for (int sig = 0; sig < LB_SIGNALS; sig++) {
        if (b->exp[sig]) {
            b->closing++;
            b->exp[sig]->type->shutdown(b->exp[sig], exporter_done);
        }
    }
    if (--b->closing == 0)
        backend_done(b);
}

void lb_backend_retire(struct lb_backend *b)
{
    struct lb *lb = b->lb;
    b->retiring = true;
    b->next = lb->retiring;
    lb->retiring = b;
    static const hs_sender_move_fn fns[LB_SIGNALS] = {hand_over_traces, hand_over_profiles};
    for (int sig = 0; sig < LB_SIGNALS; sig++)
        if (b->exp[sig])
            hs_exporter_evict(hs_container_of(b->exp[sig], struct hs_exporter, base), fns[sig], b);
    backend_close(b);
}

void lb_backend_shutdown(struct lb_backend *b)
{
    backend_close(b);
}
