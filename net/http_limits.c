/* http_limits.c: who gets a connection slot on a listener: a cap per client address, the
 * receivers' share of the process's file limit, and the busy rule (past 3/4 of the slots, waits
 * for headers and between requests shrink to busy_timeout; at the limit, the connection idle
 * longest gives way to a newcomer, as nginx's ngx_drain_connections does). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/common.h"
#include "core/metrics.h"
#include "net/http_server_int.h"

/* How many idle connections reclaim looks at past ones still writing an answer. */
#define HS_HTTP_RECLAIM_LOOK 16

/* ---- connections per client address ----------------------------------------------------- */

static size_t peer_hash(const struct hs_http_peers *p, const uint8_t key[16])
{
    uint64_t a, b;
    memcpy(&a, key, 8);
    memcpy(&b, key + 8, 8);
    return (size_t)hs_mix64(hs_mix64(a ^ p->seed) ^ b);
}

/* Where key is, or the empty slot where it would go. */
static struct hs_http_peer *peer_slot(const struct hs_http_peers *p, const uint8_t key[16])
{
    size_t mask = p->cap - 1;
    for (size_t i = peer_hash(p, key) & mask;; i = (i + 1) & mask)
        if (!p->slots[i].count || memcmp(p->slots[i].key, key, 16) == 0)
            return &p->slots[i];
}

static void peers_grow(struct hs_http_peers *p)
{
    struct hs_http_peers old = *p;
    if (!p->cap && getrandom(&p->seed, sizeof(p->seed), GRND_NONBLOCK) != sizeof(p->seed))
        p->seed = uv_hrtime() ^ (uint64_t)(uintptr_t)p;
    p->cap = old.cap ? old.cap * 2 : 16;
    p->slots = hs_xcalloc(p->cap, sizeof(*p->slots));
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].count)
            *peer_slot(p, old.slots[i].key) = old.slots[i];
    free(old.slots);
}

uint32_t hs_http_peers_count(const struct hs_http_peers *p, const uint8_t key[16])
{
    return p->cap ? peer_slot(p, key)->count : 0;
}

void hs_http_peers_add(struct hs_http_peers *p, const uint8_t key[16])
{
    if ((p->used + 1) * 2 > p->cap)
        peers_grow(p); /* at most half full: probes stay short */
    struct hs_http_peer *e = peer_slot(p, key);
    if (!e->count) {
        memcpy(e->key, key, 16);
        p->used++;
    }
    e->count++;
}

/* At 0 the entry goes, by linear probing's deletion without tombstones: later entries of the
 * run move back into the hole unless their home slot lies cyclically after it. */
void hs_http_peers_del(struct hs_http_peers *p, const uint8_t key[16])
{
    struct hs_http_peer *e = p->cap ? peer_slot(p, key) : NULL;
    if (!e || !e->count || --e->count)
        return;
    size_t mask = p->cap - 1, hole = (size_t)(e - p->slots);
    for (size_t j = (hole + 1) & mask; p->slots[j].count; j = (j + 1) & mask) {
        size_t home = peer_hash(p, p->slots[j].key) & mask;
        bool stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
        if (!stays) {
            p->slots[hole] = p->slots[j];
            hole = j;
        }
    }
    p->slots[hole].count = 0;
    p->used--;
}

void hs_http_peers_free(struct hs_http_peers *p)
{
    free(p->slots);
    *p = (struct hs_http_peers){0};
}

void hs_http_peer_key(const struct sockaddr *sa, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        /* a host is handed a /64 at least, so any address in it is the same client */
        memcpy(key, a, IN6_IS_ADDR_V4MAPPED(a) ? 16 : 8);
    }
}

/* ---- the receivers' share of the file limit -------------------------------------------- */

/* One pool for the whole process, as RLIMIT_NOFILE is; only the loop's thread touches it. */
static struct {
    uint64_t limit, share; /* share 0: none set */
    uint64_t open;         /* connections the sharing listeners hold now */
    uint64_t declared;     /* their max_connections, added up */
} fds;

uint64_t hs_http_fd_reserve(uint64_t limit)
{
    /* exporters (num_consumers connections each), queue files, logs, libuv's own descriptors
     * and the admin endpoint's connections: 256 on a small limit (a quarter of a tiny one), a
     * sixteenth of a large one */
    return HS_MAX(limit / 16, HS_MIN(256, limit / 4));
}

uint64_t hs_http_server_set_file_limit(uint64_t limit)
{
    fds.limit = limit;
    fds.share = limit ? limit - hs_http_fd_reserve(limit) : 0;
    return fds.share;
}

bool hs_http_server_check_file_limit(void)
{
    if (!fds.share || fds.declared <= fds.share)
        return true;
    hs_log_warn(NULL,
                "the listeners' max_connections add up to %llu, more than the file limit (%llu) "
                "leaves them (%llu; %llu are kept for exporters, files and the admin endpoint): "
                "past %llu connections together, new ones are refused (reason file_limit); raise "
                "the hard limit (ulimit -Hn, systemd LimitNOFILE=, docker --ulimit nofile=) or "
                "lower max_connections",
                (unsigned long long)fds.declared, (unsigned long long)fds.limit,
                (unsigned long long)fds.share, (unsigned long long)(fds.limit - fds.share),
                (unsigned long long)fds.share);
    return false;
}

void hs_http_server_declare(const struct hs_http_server *s, bool on)
{
    if (s->fd_reserve)
        return;
    if (on)
        fds.declared += s->conf.max_connections;
    else
        fds.declared -= s->conf.max_connections;
}

/* ---- admission and the busy rule --------------------------------------------------------- */

static uint32_t per_client(const struct hs_http_server *s)
{
    uint32_t cap = s->conf.max_connections_per_client;
    return cap ? cap : HS_MAX(1u, s->conf.max_connections / 2);
}

static bool shares_fds(const struct hs_http_server *s)
{
    return !s->fd_reserve && fds.share;
}

/* Busy from 3/4 of max_connections (or of the file limit's share), until back to half: the
 * gap keeps a listener near the mark from walking its connections at every accept. */
static bool high_water(const struct hs_http_server *s)
{
    return s->nlive * 4 >= (size_t)s->conf.max_connections * 3 ||
           (shares_fds(s) && fds.open * 4 >= fds.share * 3);
}

static bool low_water(const struct hs_http_server *s)
{
    return s->nlive * 2 <= s->conf.max_connections && (!shares_fds(s) || fds.open * 2 <= fds.share);
}

static void busy_begin(struct hs_http_server *s)
{
    s->busy = true;
    uint32_t suppressed = 0;
    if (hs_ratelimit_allow(&s->busy_log, hs_now_ms(), &suppressed))
        hs_log_warn(s->name,
                    "busy: %zu connections open (max_connections %u%s): waits for headers and "
                    "between requests cut to busy_timeout (%llu ms); at the limit the connection "
                    "idle longest gives way to a new one (%u lines suppressed)",
                    s->nlive, s->conf.max_connections,
                    shares_fds(s) && fds.open * 4 >= fds.share * 3 ? ", or the file limit's share"
                                                                   : "",
                    (unsigned long long)s->conf.busy_timeout_ms, suppressed);
}

uint64_t hs_http_server_header_ms(const struct hs_http_server *s)
{
    uint64_t ms = s->conf.read_timeout_ms, b = s->conf.busy_timeout_ms;
    return s->busy && b && (!ms || b < ms) ? b : ms;
}

uint64_t hs_http_server_idle_ms(const struct hs_http_server *s)
{
    uint64_t ms = s->conf.idle_timeout_ms, b = s->conf.busy_timeout_ms;
    return s->busy && b && (!ms || b < ms) ? b : ms;
}

enum hs_http_refusal hs_http_limits_refuse(struct hs_http_server *s, const struct hs_http_conn *c,
                                           enum hs_http_refusal why)
{
    if (s->refused[why])
        hs_counter_add(s->refused[why], 1);
    uint32_t n = 0;
    if (!hs_ratelimit_allow(&s->full_log, hs_now_ms(), &n))
        return why;
    if (why == HS_HTTP_REFUSE_PER_CLIENT)
        hs_log_warn(s->name,
                    "connection from %s refused: its address holds max_connections_per_client "
                    "(%u) here (%u more refused since the last line)",
                    c->peer, per_client(s), n);
    else if (why == HS_HTTP_REFUSE_MAX)
        hs_log_warn(s->name,
                    "connection from %s refused: max_connections (%u) open, none idle (%u more "
                    "refused since the last line)",
                    c->peer, s->conf.max_connections, n);
    else
        hs_log_warn(s->name,
                    "connection from %s refused: the listeners hold their share of the file limit "
                    "(%llu of %llu), none of this one's idle (%u more refused since the last line)",
                    c->peer, (unsigned long long)fds.share, (unsigned long long)fds.limit, n);
    return why;
}

struct hs_http_conn *hs_http_limits_victim(struct hs_http_server *s,
                                           const struct hs_http_conn *newcomer)
{
    int looked = 0;
    for (struct hs_queue *q = hs_queue_head(&s->idle);
         q != &s->idle && looked < HS_HTTP_RECLAIM_LOOK; q = q->next, looked++) {
        struct hs_http_conn *c = hs_container_of(q, struct hs_http_conn, idle_link);
        if (c->write_pending)
            continue;
        if (s->reclaimed)
            hs_counter_add(s->reclaimed, 1);
        uint32_t n = 0;
        if (hs_ratelimit_allow(&s->busy_log, hs_now_ms(), &n))
            hs_log_info(s->name, "%s closed after %llu ms idle, to admit %s (%u lines suppressed)",
                        c->peer, (unsigned long long)(uv_now(s->loop) - c->since_ms),
                        newcomer->peer, n);
        return c;
    }
    return NULL;
}

enum hs_http_refusal hs_http_limits_check(const struct hs_http_server *s,
                                          const struct hs_http_conn *c)
{
    /* a cap of max_connections is none: the listener's own limit (and its reclaim) decides */
    if (per_client(s) < s->conf.max_connections &&
        hs_http_peers_count(&s->peers, c->peer_key) >= per_client(s))
        return HS_HTTP_REFUSE_PER_CLIENT;
    if (s->nlive >= s->conf.max_connections)
        return HS_HTTP_REFUSE_MAX;
    return shares_fds(s) && fds.open >= fds.share ? HS_HTTP_REFUSE_FILE_LIMIT : HS_HTTP_ADMITTED;
}

bool hs_http_limits_take(struct hs_http_server *s, struct hs_http_conn *c)
{
    hs_http_peers_add(&s->peers, c->peer_key);
    s->nlive++;
    c->slotted = true;
    if ((c->fd_counted = shares_fds(s)))
        fds.open++;
    if (s->busy || !high_water(s))
        return false;
    busy_begin(s);
    return true;
}

void hs_http_server_unslot(struct hs_http_conn *c)
{
    struct hs_http_server *s = c->srv;
    if (!c->slotted)
        return;
    c->slotted = false;
    hs_http_peers_del(&s->peers, c->peer_key);
    s->nlive--;
    if (c->fd_counted)
        fds.open--;
    uint32_t n = 0;
    if (s->busy && low_water(s)) {
        s->busy = false;
        if (hs_ratelimit_allow(&s->busy_log, hs_now_ms(), &n))
            hs_log_info(s->name,
                        "no longer busy: %zu connections open (max_connections %u; %u lines "
                        "suppressed)",
                        s->nlive, s->conf.max_connections, n);
    }
}

/* ---- the connection's side --------------------------------------------------------------- */

void hs_http_conn_idle(struct hs_http_conn *c, bool on)
{
    struct hs_http_server *s = c->srv;
    if (c->idle == on || (on && (c->closing || !c->slotted)))
        return;
    c->idle = on;
    if (on) {
        c->since_ms = uv_now(s->loop);
        hs_queue_insert_tail(&s->idle, &c->idle_link);
    } else {
        hs_queue_remove(&c->idle_link);
    }
}
