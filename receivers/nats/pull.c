/* pull.c: the `nats` receiver's durable pull consumers, one per partition taken. The consumers
 * are made (or found) on the thread pool, as JetStream API calls wait for their reply. Pulling
 * is what libnats' natsSubscription_Fetch does on the wire, without the thread it would block:
 * a request {"batch","expires"} published from the loop to $JS.API.CONSUMER.MSG.NEXT with a
 * reply subject in our inbox (<inbox>.<durable>.<generation>), the messages coming back there
 * like any other, and a new request once this one is filled, expired (status 408), answered
 * "none" (404), refused (409) or silent past its deadline (a consumer leader that died with it).
 * One request out per durable, and none while the pipeline has no room. */
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/common.h"
#include "core/errors.h"
#include "core/log.h"
#include "nats_recv_int.h"

#define NS_PER_MS 1000000LL
/* beyond a request's expiry, before we take it for lost */
#define REQUEST_GRACE_MS 1000
#define SETUP_BACKOFF_FIRST_MS 500
#define SETUP_BACKOFF_MAX_MS 30000
/* the wait when the pipeline has no room */
#define ROOM_WAIT_MS 50
/* after a status that says the server is busy (409), or that the consumer is not there (503) */
#define BUSY_WAIT_MS 100
#define LOST_WAIT_MS 1000

/* ---- the pure parts --------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* One item: "N" or "A-B". */
static bool parse_range(const char *s, uint32_t partitions, uint32_t *lo, uint32_t *hi,
                        const char **why)
{
    char *end;
    unsigned long a = strtoul(s, &end, 10), b = a;
    if (end == s || *s == '-' || *s == '+' || *s == ' ') {
        *why = "not a partition number or range (e.g. 3 or 0-7)";
        return false;
    }
    if (*end == '-') {
        const char *t = end + 1;
        if (*t == '-' || *t == '+' || *t == ' ') {
            *why = "not a partition number or range (e.g. 3 or 0-7)";
            return false;
        }
        b = strtoul(t, &end, 10);
        if (end == t) {
            *why = "not a partition number or range (e.g. 3 or 0-7)";
            return false;
        }
    }
    if (*end) {
        *why = "not a partition number or range (e.g. 3 or 0-7)";
        return false;
    }
    if (a > b) {
        *why = "a range must go up (e.g. 0-7)";
        return false;
    }
    if (b >= partitions) {
        *why = "beyond the last partition (partitions - 1)";
        return false;
    }
    *lo = (uint32_t)a;
    *hi = (uint32_t)b;
    return true;
}

int hs_nats_partitions_parse(const struct hs_strlist *items, uint32_t partitions, uint32_t **out,
                             uint32_t *n, size_t *bad, const char **why)
{
    uint32_t *v = hs_xmalloc(partitions * sizeof(*v));
    uint32_t count = 0;
    if (items->count == 0)
        for (uint32_t p = 0; p < partitions; p++)
            v[count++] = p;
    bool *have = hs_xcalloc(partitions, sizeof(*have));
    for (size_t i = 0; i < items->count; i++) {
        uint32_t lo, hi;
        if (!parse_range(items->items[i], partitions, &lo, &hi, why)) {
            free(have);
            free(v);
            *bad = i;
            return HS_EINVAL;
        }
        for (uint32_t p = lo; p <= hi; p++)
            if (!have[p]) {
                have[p] = true;
                v[count++] = p;
            }
    }
    free(have);
    qsort(v, count, sizeof(*v), cmp_u32);
    *out = v;
    *n = count;
    return 0;
}

static bool token_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

bool hs_nats_meta_parse(const char *reply, struct hs_nats_meta *m)
{
    static const char prefix[] = "$JS.ACK.";
    if (!reply || strncmp(reply, prefix, sizeof(prefix) - 1) != 0)
        return false;
    struct {
        const char *p;
        size_t len;
    } tok[12];
    size_t nt = 0;
    for (const char *p = reply + sizeof(prefix) - 1;; nt++) {
        if (nt == HS_ARRAY_SIZE(tok))
            return false;
        const char *dot = strchr(p, '.');
        tok[nt].p = p;
        tok[nt].len = dot ? (size_t)(dot - p) : strlen(p);
        if (!dot) {
            nt++;
            break;
        }
        p = dot + 1;
    }
    /* v1: 7 tokens after $JS.ACK.; v2: at least 9 (a domain and account hash first) */
    size_t at = nt == 7 ? 2 : nt >= 9 ? 4 : SIZE_MAX;
    if (at == SIZE_MAX)
        return false;
    m->consumer = (struct hs_str){tok[at - 1].p, tok[at - 1].len};
    return token_u64(tok[at].p, tok[at].len, &m->delivered) &&
           token_u64(tok[at + 1].p, tok[at + 1].len, &m->stream_seq) && m->stream_seq > 0;
}

void hs_nats_seen_init(struct hs_nats_seen *s, size_t cap)
{
    s->cap = cap;
    s->count = 0;
    s->cur = hs_xcalloc(cap, sizeof(*s->cur));
    s->prev = hs_xcalloc(cap, sizeof(*s->prev));
}

void hs_nats_seen_free(struct hs_nats_seen *s)
{
    free(s->cur);
    free(s->prev);
    *s = (struct hs_nats_seen){0};
}

static bool table_has(const uint64_t *t, size_t cap, uint64_t seq)
{
    size_t mask = cap - 1;
    for (size_t i = (size_t)(seq * 0x9e3779b97f4a7c15ULL) & mask;; i = (i + 1) & mask) {
        if (t[i] == seq)
            return true;
        if (t[i] == 0)
            return false;
    }
}

bool hs_nats_seen_has(const struct hs_nats_seen *s, uint64_t seq)
{
    return seq && (table_has(s->cur, s->cap, seq) || table_has(s->prev, s->cap, seq));
}

void hs_nats_seen_add(struct hs_nats_seen *s, uint64_t seq)
{
    if (!seq || table_has(s->cur, s->cap, seq))
        return;
    if (s->count >= s->cap / 2) { /* a new generation: the oldest is forgotten */
        uint64_t *old = s->prev;
        s->prev = s->cur;
        memset(old, 0, s->cap * sizeof(*old));
        s->cur = old;
        s->count = 0;
    }
    size_t mask = s->cap - 1;
    size_t i = (size_t)(seq * 0x9e3779b97f4a7c15ULL) & mask;
    while (s->cur[i])
        i = (i + 1) & mask;
    s->cur[i] = seq;
    s->count++;
}

/* ---- durables --------------------------------------------------------------------------- */

void hs_nats_recv_durables(struct nats_recv *r, const uint32_t *parts, uint32_t n)
{
    unsigned filter = r->signals == (HS_SIGNAL_TRACES | HS_SIGNAL_PROFILES) ? 0 : r->signals;
    const char *what = filter == HS_SIGNAL_TRACES ? "-traces" : filter ? "-profiles" : "";
    r->d = hs_xcalloc(n, sizeof(*r->d));
    r->nd = n;
    r->by_partition = hs_xmalloc(r->conf.partitions * sizeof(*r->by_partition));
    for (uint32_t p = 0; p < r->conf.partitions; p++)
        r->by_partition[p] = -1;
    for (uint32_t i = 0; i < n; i++)
        r->by_partition[parts[i]] = (int32_t)i;
    for (uint32_t i = 0; i < n; i++) {
        struct durable *d = &r->d[i];
        d->r = r;
        d->index = i;
        d->partition = parts[i];
        snprintf(d->name, sizeof(d->name), "%s%s-%02u", r->conf.durable, what, parts[i]);
        hs_bus_subject(d->filter, sizeof(d->filter), r->conf.subject_prefix, filter, parts[i]);
    }
}

/* On a pool thread: the consumer, made or updated to our settings. */
static int ensure_one(jsCtx *js, const struct nats_recv *r, const struct durable *d, char *err,
                      size_t errlen)
{
    const struct nats_recv_config *c = &r->conf;
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = d->name;
    cc.FilterSubject = d->filter;
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = (int64_t)c->ack_wait_ms * NS_PER_MS;
    cc.MaxDeliver = c->max_deliver ? (int64_t)c->max_deliver : -1;
    cc.MaxAckPending = c->max_ack_pending;
    cc.DeliverPolicy = js_DeliverAll;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_AddConsumer(&ci, js, c->stream, &cc, NULL, &jerr);
    if (s != NATS_OK && jerr == JSConsumerNameExistErr) /* exists with other settings */
        s = js_UpdateConsumer(&ci, js, c->stream, &cc, NULL, &jerr);
    jsConsumerInfo_Destroy(ci);
    if (s == NATS_OK)
        return 0;
    natsStatus st;
    const char *text = nats_GetLastError(&st);
    if (jerr == JSStreamNotFoundErr)
        snprintf(err, errlen, "stream %s does not exist yet (the nats exporter makes it)",
                 c->stream);
    else
        snprintf(err, errlen, "consumer %s on stream %s: %s (err_code %d)", d->name, c->stream,
                 text && text[0] ? text : natsStatus_GetText(s), (int)jerr);
    return s == NATS_TIMEOUT ? HS_EAGAIN : HS_EIO;
}

/* Consumers are made a few at a time on the pool: each creation is a Raft proposal of the
 * meta group (0.5 s each on the test machine), and 16 one after the other would hold the first
 * delivery back by seconds. */
#define SETUP_PARALLEL 3 /* of libuv's 4 pool threads: one stays for the rest */

struct setup {
    struct nats_recv *r;
    uint32_t index;
};

/* On a pool thread. */
static int setup_work(jsCtx *js, void *arg, char *err, size_t errlen)
{
    const struct setup *su = arg;
    return ensure_one(js, su->r, &su->r->d[su->index], err, errlen);
}

static uint32_t ready_count(const struct nats_recv *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->nd; i++)
        n += r->d[i].ready;
    return n;
}

static void setup_done(void *arg, int rc, const char *err)
{
    struct setup *su = arg;
    struct nats_recv *r = su->r;
    struct durable *d = &r->d[su->index];
    free(su);
    d->setting_up = false;
    r->setup_inflight--;
    if (r->closing)
        return;
    d->ready = rc == 0;
    uint32_t ready = ready_count(r);
    if (rc) {
        uint32_t suppressed;
        if (hs_ratelimit_allow(&r->log_rl, hs_now_ms(), &suppressed))
            hs_log_warn(r->base.id,
                        "%s (%u of %u partitions ready): retrying in %llu ms (%u similar "
                        "messages suppressed)",
                        rc == HS_ECANCELED ? "consumer setup cancelled" : err, ready, r->nd,
                        (unsigned long long)r->setup_backoff_ms, suppressed);
        r->setup_retry_ms = hs_now_ms() + r->setup_backoff_ms;
        r->setup_backoff_ms = HS_MIN(r->setup_backoff_ms * 2, SETUP_BACKOFF_MAX_MS);
    } else {
        r->setup_backoff_ms = SETUP_BACKOFF_FIRST_MS;
    }
    if (ready == r->nd && !r->all_ready) {
        r->all_ready = true;
        hs_log_info(r->base.id, "consuming %u partitions of stream %s", r->nd, r->conf.stream);
    }
    hs_nats_recv_pump(r);
}

static void setup_start(struct nats_recv *r)
{
    for (uint32_t i = 0; i < r->nd && r->setup_inflight < SETUP_PARALLEL; i++) {
        struct durable *d = &r->d[i];
        if (d->ready || d->setting_up)
            continue;
        struct setup *su = hs_xcalloc(1, sizeof(*su));
        *su = (struct setup){r, i};
        if (hs_nats_js_call(r->nc, setup_work, setup_done, su) != 0) {
            free(su);
            return;
        }
        d->setting_up = true;
        r->setup_inflight++;
    }
}

/* ---- pulling ---------------------------------------------------------------------------- */

static bool pipeline_room(struct nats_recv *r)
{
    return (!(r->signals & HS_SIGNAL_TRACES) || hs_consumer_ready(r->base.next)) &&
           (!(r->signals & HS_SIGNAL_PROFILES) || hs_consumer_ready(r->base.next_profiles));
}

static void request(struct nats_recv *r, struct durable *d, uint64_t now)
{
    char subject[256], reply[128], body[128];
    snprintf(subject, sizeof(subject), "$JS.API.CONSUMER.MSG.NEXT.%s.%s", r->conf.stream, d->name);
    snprintf(reply, sizeof(reply), "%s.%u.%llu", hs_nats_inbox(r->nc), d->index,
             (unsigned long long)(d->gen + 1));
    /* the server ends the request a little before we would give up on it */
    long long expires = (long long)r->conf.fetch_timeout_ms * NS_PER_MS;
    int n =
        d->one_alone
            ? snprintf(body, sizeof(body), "{\"batch\":1,\"expires\":%lld}", expires)
            : snprintf(body, sizeof(body), "{\"batch\":%u,\"max_bytes\":%llu,\"expires\":%lld}",
                       r->conf.fetch_batch, (unsigned long long)r->conf.fetch_max_bytes, expires);
    const char *why = NULL;
    if (hs_nats_publish(r->nc, subject, reply, NULL, 0, body, (size_t)n, &why) != 0) {
        uint32_t suppressed; /* disconnected: libnats buffers; full: try again shortly */
        if (hs_ratelimit_allow(&r->log_rl, now, &suppressed))
            hs_log_warn(r->base.id, "pull request for %s: %s (%u similar messages suppressed)",
                        d->name, why, suppressed);
        r->paused_until_ms = now + ROOM_WAIT_MS;
        return;
    }
    d->gen++;
    d->requesting = true;
    d->asked = d->remaining = d->one_alone ? 1 : r->conf.fetch_batch;
    d->one_alone = false;
    d->deadline_ms = now + r->conf.fetch_timeout_ms + REQUEST_GRACE_MS;
}

static void on_timer(uv_timer_t *t)
{
    hs_nats_recv_pump(t->data);
}

void hs_nats_recv_pump(struct nats_recv *r)
{
    if (r->closing || !r->started)
        return;
    uint64_t now = hs_now_ms(), next = UINT64_MAX;
    bool all_ready = true, out = false;
    for (uint32_t i = 0; i < r->nd; i++)
        all_ready &= r->d[i].ready;
    if (!all_ready && !r->stopping && hs_nats_connected(r->nc)) {
        if (now >= r->setup_retry_ms)
            setup_start(r);
        else
            next = r->setup_retry_ms;
    }
    if (!r->stopping && !pipeline_room(r) && r->paused_until_ms <= now)
        r->paused_until_ms = now + ROOM_WAIT_MS; /* look again soon: exporters drain */
    bool may = !r->stopping && r->paused_until_ms <= now && hs_nats_connected(r->nc);
    for (uint32_t i = 0; i < r->nd; i++) {
        struct durable *d = &r->d[i];
        if (d->requesting && d->deadline_ms <= now) /* lost with a consumer leader: again */
            d->requesting = false;
        if (!d->requesting && d->ready && may && d->not_before_ms <= now)
            request(r, d, now);
        if (d->requesting)
            next = HS_MIN(next, d->deadline_ms);
        else if (d->not_before_ms > now && !r->stopping)
            next = HS_MIN(next, d->not_before_ms);
        out |= d->requesting;
    }
    if (r->stopping && !out) {
        r->drained(r);
        return;
    }
    if (!r->stopping && r->paused_until_ms > now)
        next = HS_MIN(next, r->paused_until_ms);
    if (next == UINT64_MAX)
        uv_timer_stop(&r->timer);
    else
        uv_timer_start(&r->timer, on_timer, next > now ? next - now : 0, 0);
}

struct durable *hs_nats_recv_route(struct nats_recv *r, const char *subject, uint64_t *gen)
{
    const char *inbox = hs_nats_inbox(r->nc);
    size_t n = strlen(inbox);
    if (strncmp(subject, inbox, n) != 0 || subject[n] != '.')
        return NULL;
    char *end;
    unsigned long idx = strtoul(subject + n + 1, &end, 10);
    if (*end != '.' || idx >= r->nd)
        return NULL;
    *gen = strtoull(end + 1, NULL, 10);
    return &r->d[idx];
}

struct durable *hs_nats_recv_durable(struct nats_recv *r, struct hs_str consumer)
{
    /* <durable>[-signal]-<p>: the partition says which, the name confirms */
    size_t i = consumer.len;
    while (i > 0 && consumer.ptr[i - 1] >= '0' && consumer.ptr[i - 1] <= '9')
        i--;
    uint64_t p;
    if (i == consumer.len || !token_u64(consumer.ptr + i, consumer.len - i, &p) ||
        p >= r->conf.partitions || r->by_partition[p] < 0)
        return NULL;
    struct durable *d = &r->d[r->by_partition[p]];
    return strlen(d->name) == consumer.len && memcmp(d->name, consumer.ptr, consumer.len) == 0
               ? d
               : NULL;
}

enum hs_nats_status hs_nats_status_kind(const char *status, const char *description)
{
    const char *d = description ? description : "";
    if (strcmp(status, "100") == 0)
        return HS_NATS_STATUS_IDLE;
    if (strcmp(status, "404") == 0 || strcmp(status, "408") == 0)
        return HS_NATS_STATUS_END;
    if (strcmp(status, "409") == 0) {
        if (strcasecmp(d, "Consumer Deleted") == 0)
            return HS_NATS_STATUS_LOST;
        if (strcasecmp(d, "Message Size Exceeds MaxBytes") == 0)
            return HS_NATS_STATUS_FULL;
        if (strcasecmp(d, "Batch Completed") == 0)
            return HS_NATS_STATUS_END;
        return HS_NATS_STATUS_WAIT;
    }
    return HS_NATS_STATUS_LOST; /* 503 no responders, and anything unknown: look again */
}

/* The request out is over: the pump asks again (now, or after a wait). */
static void request_over(struct durable *d, uint64_t wait_ms)
{
    d->requesting = false;
    d->not_before_ms = wait_ms ? hs_now_ms() + wait_ms : 0;
    hs_nats_recv_pump(d->r);
}

void hs_nats_recv_delivered(struct durable *d)
{
    /* deliveries carry no request id: a late one of a request given up on counts toward the
     * current, which then ends early and is asked again, harmlessly */
    if (d->requesting && --d->remaining == 0)
        request_over(d, 0);
}

void hs_nats_recv_status(struct durable *d, uint64_t gen, enum hs_nats_status kind)
{
    if (!d->requesting || gen != d->gen)
        return; /* the end of a request given up on already */
    /* nothing came: the next message alone is larger than fetch_max_bytes, and asking again the
     * same way would be answered the same at once, for ever */
    if (kind == HS_NATS_STATUS_FULL && d->remaining == d->asked)
        d->one_alone = true;
    if (kind == HS_NATS_STATUS_LOST) { /* no hot loop against a missing consumer or leader */
        d->ready = false;
        d->r->all_ready = false;
        request_over(d, LOST_WAIT_MS);
    } else {
        request_over(d, kind == HS_NATS_STATUS_WAIT ? BUSY_WAIT_MS : 0);
    }
}

void hs_nats_recv_timer_init(struct nats_recv *r, uv_loop_t *loop)
{
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    r->setup_backoff_ms = SETUP_BACKOFF_FIRST_MS;
}
