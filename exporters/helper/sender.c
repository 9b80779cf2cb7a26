/* sender.c: the queue, slots and retries behind every network exporter (sender.h). An item
 * holds a slot from its first attempt until each of its requests is sent or given up on, so a
 * backend that is down fills the slots, then the queue, and the pipeline gets backpressure.
 * With storage, items are encoded into records on disk at submit and sent from there. */
#include "sender.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/common.h"
#include "core/component.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/metrics.h"
#include "queue_store.h"

#define LOG_BODY_BYTES 200

const struct hs_config_field hs_sender_queue_fields[] = {
    {"enabled", HS_CFG_BOOL, offsetof(struct hs_sender_queue_config, enabled), "true",
     .doc = "queue batches while requests are in flight; when false only num_consumers batches "
            "are held (the ones being sent) and the pipeline is refused beyond that"},
    {"num_consumers", HS_CFG_UINT, offsetof(struct hs_sender_queue_config, num_consumers), "10",
     .min = 1, .max = 1000,
     .doc = "requests in flight at once (a batch waiting to retry keeps its slot)"},
    {"queue_size", HS_CFG_UINT, offsetof(struct hs_sender_queue_config, queue_size), "1000",
     .min = 1, .max = 1 << 20,
     .doc = "batches held, those in flight included; beyond it the pipeline is "
            "refused (backpressure)"},
    {"queue_bytes", HS_CFG_SIZE, offsetof(struct hs_sender_queue_config, queue_bytes), "64MiB",
     .min = 1,
     .doc = "bytes of batches held (uncompressed; with storage, as encoded on disk), in flight "
            "included"},
    {"storage", HS_CFG_STRING, offsetof(struct hs_sender_queue_config, storage), NULL,
     .doc = "a directory: the queue is kept there (one SQLite file per exporter), so a batch "
            "acknowledged upstream survives a crash or restart and is sent at the next start; "
            "absent: in memory"},
    {0},
};

const struct hs_config_field hs_sender_retry_fields[] = {
    {"enabled", HS_CFG_BOOL, offsetof(struct hs_sender_retry_config, enabled), "true",
     .doc = "retry 429, 502, 503, 504 and transport errors; when false they are dropped"},
    {"initial_interval", HS_CFG_DURATION,
     offsetof(struct hs_sender_retry_config, initial_interval_ms), "5s", .min = 1, .max = 3600000,
     .doc = "wait before the first retry"},
    {"randomization_factor", HS_CFG_DOUBLE,
     offsetof(struct hs_sender_retry_config, randomization_factor), "0.5", .min = 0, .max = 1,
     .doc = "jitter: each wait is the interval times 1 ± this"},
    {"multiplier", HS_CFG_DOUBLE, offsetof(struct hs_sender_retry_config, multiplier), "1.5",
     .min = 1, .max = 100, .doc = "growth of the interval after each retry"},
    {"max_interval", HS_CFG_DURATION, offsetof(struct hs_sender_retry_config, max_interval_ms),
     "30s", .min = 1, .max = 3600000, .doc = "cap on the interval"},
    {"max_elapsed_time", HS_CFG_DURATION, offsetof(struct hs_sender_retry_config, max_elapsed_ms),
     "300s", .min = 0, .max = 7 * 86400000LL,
     .doc = "give up on a batch this long after its first attempt (dropped); 0 = never"},
    {0},
};

/* An item waiting in the queue or held by a slot. */
struct entry {
    struct entry *next;
    void *item;     /* NULL with storage: the record on disk is the item */
    size_t bytes;   /* as counted against queue_bytes */
    uint32_t count; /* with storage: of the parts not yet settled */
    uint32_t parts;
    int64_t rec_id;      /* with storage */
    uint32_t first_part; /* with storage: the parts before it were settled before a restart */
};

/* A consumer: one item, part after part, retries included. */
struct slot {
    struct hs_sender *s;
    uv_timer_t timer;    /* the wait before a retry */
    struct entry *entry; /* NULL when idle */
    uint32_t part;
    struct hs_sender_request req;
    const char **lines; /* the request's header lines, fixed then extra */
    size_t nlines, lines_cap;
    bool in_flight;    /* a request is out (or about to report it could not start) */
    struct hs_buf rec; /* with storage: the entry's record, read when its first part starts */
    size_t rec_off;    /* where the next part starts in rec */
    uint64_t first_ms;
    uint64_t interval_ms;
};

struct hs_sender {
    struct hs_sender_options opt;
    uint32_t capacity; /* items held at most */
    struct hs_http_client *client;
    struct hs_metrics *metrics;
    struct slot *slots;
    uint32_t nslots;
    struct entry *head, **tail;
    uint32_t held; /* queued + in slots */
    uint64_t held_bytes;
    uint64_t rng;
    bool started, closing, finishing;
    unsigned closing_handles;
    void (*done)(void *ud);
    void *done_ud;
    struct hs_ratelimit log_rl;
    struct hs_counter *sent, *failed, *enqueue_failed, *retries;
    struct hs_health health; /* failing since when: /healthz/ready and exporter_failing_seconds */
    /* with storage */
    struct hs_queue_store *store;
    struct hs_ratelimit store_rl;
    struct hs_counter *replayed, *err_write, *err_read, *err_delete, *err_corrupt;
};

static void sender_progress(struct hs_sender *s);

/* ---- the request ------------------------------------------------------------------------ */

int hs_sender_request_header(struct hs_sender_request *r, const char *name, const char *value)
{
    if (r->extra_count == HS_SENDER_EXTRA_HEADERS)
        return HS_E2BIG;
    struct hs_buf b = {0};
    if (hs_buf_printf(&b, "%s: %s", name, value) != 0)
        return HS_ENOMEM;
    r->extra[r->extra_count++] = (char *)b.data;
    return 0;
}

static void request_free(struct hs_sender_request *r)
{
    hs_buf_free(&r->url_buf);
    hs_buf_free(&r->body_buf);
    for (size_t i = 0; i < r->extra_count; i++)
        free(r->extra[i]);
    memset(r, 0, sizeof(*r));
}

/* ---- create, start, free ---------------------------------------------------------------- */

struct hs_sender *hs_sender_new(const struct hs_sender_options *opt)
{
    struct hs_sender *s = hs_xcalloc(1, sizeof(*s));
    s->opt = *opt;
    s->capacity = opt->queue->enabled ? opt->queue->queue_size : opt->queue->num_consumers;
    s->nslots = opt->queue->num_consumers;
    s->tail = &s->head;
    s->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    s->store_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    return s;
}

static void entry_free(struct hs_sender *s, struct entry *e)
{
    if (e->item)
        s->opt.hooks.release(s->opt.ud, e->item);
    free(e);
}

void hs_sender_free(struct hs_sender *s)
{
    if (!s)
        return;
    while (s->head) {
        struct entry *e = s->head;
        s->head = e->next;
        entry_free(s, e);
    }
    for (uint32_t i = 0; s->slots && i < s->nslots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->entry)
            entry_free(s, sl->entry);
        request_free(&sl->req);
        hs_buf_free(&sl->rec);
        free(sl->lines);
    }
    free(s->slots);
    hs_queue_store_close(s->store);
    free(s);
}

static double gauge_queue_size(void *ud)
{
    return ((struct hs_sender *)ud)->held;
}

static double gauge_queue_capacity(void *ud)
{
    return ((struct hs_sender *)ud)->capacity;
}

static double gauge_queue_bytes(void *ud)
{
    return (double)((struct hs_sender *)ud)->held_bytes;
}

static double gauge_failing_seconds(void *ud)
{
    return hs_health_failing_seconds(&((struct hs_sender *)ud)->health, hs_now_ms());
}

static void storage_metrics_register(struct hs_sender *s, struct hs_metrics *m, const char *labels)
{
    char name[96], help[160], l[300];
    snprintf(name, sizeof(name), "exporter_replayed_%s_total", s->opt.items);
    snprintf(help, sizeof(help),
             "%s found on disk at start and sent again (those in flight at a crash may be "
             "duplicates)",
             s->opt.items);
    s->replayed = hs_metrics_counter(m, name, help, labels);
    struct {
        struct hs_counter **c;
        const char *op;
    } errs[] = {{&s->err_write, "write"},
                {&s->err_read, "read"},
                {&s->err_delete, "delete"},
                {&s->err_corrupt, "corrupt"}};
    for (size_t i = 0; i < HS_ARRAY_SIZE(errs); i++) {
        snprintf(l, sizeof(l), "%s,op=\"%s\"", labels, errs[i].op);
        *errs[i].c = hs_metrics_counter(m, "exporter_storage_errors_total",
                                        "Queue store failures (corrupt: moved aside at start)", l);
    }
    /* with storage every held batch is on disk, so these read the same fields as queue_size */
    hs_metrics_gauge(m, "exporter_storage_batches", "Batches in the on-disk queue", labels,
                     gauge_queue_size, s);
    hs_metrics_gauge(m, "exporter_storage_bytes", "Bytes of the records in the on-disk queue",
                     labels, gauge_queue_bytes, s);
}

static void metrics_register(struct hs_sender *s, struct hs_metrics *m)
{
    char labels[256], name[96], help[96];
    snprintf(labels, sizeof(labels), "exporter=\"%s\"", s->opt.id);
    struct hs_exporter_counters c = hs_metrics_exporter_signal(m, s->opt.id, s->opt.signal);
    s->sent = c.sent;
    s->failed = c.failed;
    snprintf(name, sizeof(name), "exporter_enqueue_failed_%s_total", s->opt.items);
    snprintf(help, sizeof(help), "%c%s refused because the queue was full or could not write",
             s->opt.items[0] - 'a' + 'A', s->opt.items + 1);
    s->enqueue_failed = hs_metrics_counter(m, name, help, labels);
    s->retries = hs_metrics_counter(m, "exporter_retries_total", "Requests retried", labels);
    hs_metrics_gauge(m, "exporter_queue_size", "Batches held (waiting and in flight)", labels,
                     gauge_queue_size, s);
    hs_metrics_gauge(m, "exporter_queue_capacity", "Batches the queue holds at most", labels,
                     gauge_queue_capacity, s);
    hs_metrics_gauge(m, "exporter_queue_bytes", "Bytes of the batches held", labels,
                     gauge_queue_bytes, s);
    hs_metrics_gauge(m, "exporter_failing_seconds",
                     "Seconds every send attempt has been failing (0: the last one succeeded)",
                     labels, gauge_failing_seconds, s);
    hs_metrics_health(m, s->opt.id, &s->health, s);
    if (s->opt.queue->storage)
        storage_metrics_register(s, m, labels);
}

static void sender_pump(struct hs_sender *s);

static void queue_append(struct hs_sender *s, struct entry *e)
{
    *s->tail = e;
    s->tail = &e->next;
    s->held++;
    s->held_bytes += e->bytes;
    s->health.pending = true;
}

/* A record found at start: queued as it was left (parts already settled are skipped). */
static void on_stored(void *ud, const struct hs_queue_store_meta *m)
{
    struct hs_sender *s = ud;
    struct entry *e = hs_xcalloc(1, sizeof(*e));
    e->bytes = m->bytes;
    e->count = m->count;
    e->parts = m->parts;
    e->first_part = m->next_part;
    e->rec_id = m->id;
    queue_append(s, e);
    hs_counter_add(s->replayed, m->count);
}

static int storage_open(struct hs_sender *s)
{
    struct hs_queue_store_open_info info;
    int rc = hs_queue_store_open(s->opt.queue->storage, s->opt.id, &s->store, &info);
    if (rc != 0)
        return rc; /* logged by the store */
    if (info.moved_aside)
        hs_counter_add(s->err_corrupt, 1);
    if ((rc = hs_queue_store_scan(s->store, on_stored, s)) != 0) {
        hs_log_error(s->opt.id, "cannot read queue store %s: %s", hs_queue_store_path(s->store),
                     hs_queue_store_errmsg(s->store));
        return rc;
    }
    if (s->held)
        hs_log_info(s->opt.id, "resuming %u batches (%llu %s, %llu bytes) left in %s: sent first",
                    s->held, (unsigned long long)s->replayed->value, s->opt.items,
                    (unsigned long long)s->held_bytes, hs_queue_store_path(s->store));
    else
        hs_log_info(s->opt.id, "queue kept on disk in %s", hs_queue_store_path(s->store));
    return 0;
}

int hs_sender_start(struct hs_sender *s, uv_loop_t *loop, struct hs_metrics *m)
{
    metrics_register(s, m);
    s->metrics = m;
    if (s->opt.queue->storage) {
        int rc = storage_open(s);
        if (rc != 0) {
            hs_metrics_gauge_remove(m, s);
            return rc;
        }
    }
    s->client = hs_http_client_new_tls(loop, s->opt.client_flags, s->opt.tls);
    if (!s->client) {
        hs_metrics_gauge_remove(m, s);
        return HS_ENOMEM;
    }
    s->slots = hs_xcalloc(s->nslots, sizeof(*s->slots));
    for (uint32_t i = 0; i < s->nslots; i++) {
        s->slots[i].s = s;
        uv_timer_init(loop, &s->slots[i].timer);
        s->slots[i].timer.data = &s->slots[i];
    }
    s->rng = (hs_wall_ns() ^ (uint64_t)(uintptr_t)s) | 1;
    s->started = true;
    sender_pump(s);
    return 0;
}

/* ---- an item's life in a slot ----------------------------------------------------------- */

static uint64_t rng_next(struct hs_sender *s)
{
    /* xorshift64*: jitter only needs to spread clients apart, not to be unpredictable */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 2685821657736338717ULL;
}

static void sender_drop(struct hs_sender *s, const char *reason, uint64_t n)
{
    hs_counter_add(s->failed, n);
    hs_metrics_drop(s->metrics, s->opt.id, reason, n);
}

static void slot_drop(struct slot *sl, const char *reason, uint64_t n)
{
    sender_drop(sl->s, reason, n);
}

static void store_error(struct hs_sender *s, struct hs_counter *c, const char *what)
{
    hs_counter_add(c, 1);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&s->store_rl, hs_now_ms(), &suppressed))
        hs_log_error(s->opt.id, "queue store %s: %s (%u similar messages suppressed)", what,
                     hs_queue_store_errmsg(s->store), suppressed);
}

static void on_response(void *ud, const struct hs_http_result *res);

static void on_post_failed(uv_timer_t *t)
{
    struct hs_http_result res = {.error = "could not start the request (out of memory)"};
    on_response(t->data, &res);
}

static void slot_send(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    const struct hs_sender_request *r = &sl->req;
    sl->in_flight = true;
    int rc = hs_http_client_post_prefixed(s->client, r->url, sl->lines, sl->nlines, r->prefix,
                                          r->prefix_len, r->body, r->body_len, s->opt.timeout_ms,
                                          on_response, sl);
    if (rc != 0) /* answered from the loop, as a transport error, so callers never recurse */
        uv_timer_start(&sl->timer, on_post_failed, 0, 0);
}

static void on_retry_timer(uv_timer_t *t)
{
    slot_send(t->data);
}

static int lines_reserve(struct slot *sl, size_t n)
{
    if (n > sl->lines_cap) {
        const char **l = realloc(sl->lines, n * sizeof(*l));
        if (!l)
            return HS_ENOMEM;
        sl->lines = l;
        sl->lines_cap = n;
    }
    return 0;
}

/* Joins the fixed and per-request header lines into the array the client borrows. */
static int slot_lines(struct slot *sl)
{
    const struct hs_sender_request *r = &sl->req;
    sl->nlines = r->header_count + r->extra_count;
    if (lines_reserve(sl, sl->nlines) != 0)
        return HS_ENOMEM;
    for (size_t i = 0; i < r->header_count; i++)
        sl->lines[i] = r->headers[i];
    for (size_t i = 0; i < r->extra_count; i++)
        sl->lines[r->header_count + i] = r->extra[i];
    return 0;
}

static_assert(HS_QUEUE_PART_LINES >= 3 + HS_SENDER_EXTRA_HEADERS,
              "a stored part holds the body's lines and every per-request line");

/* Content-Type, Content-Encoding and gRPC's grpc-encoding describe a stored body, so they are
 * stored with it; the other fixed lines are the config's and are taken from it at send time. */
static bool body_header(const char *line)
{
    return strncasecmp(line, "Content-Type:", 13) == 0 ||
           strncasecmp(line, "Content-Encoding:", 17) == 0 ||
           strncasecmp(line, "grpc-encoding:", 14) == 0;
}

/* Reads the slot's stored entry at its first part; later parts follow in the same buffer. */
static int slot_load(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    int rc = hs_queue_store_get(s->store, e->rec_id, &sl->rec);
    if (rc != 0) {
        store_error(s, s->err_read, "read");
        return rc;
    }
    uint32_t parts;
    if (hs_queue_record_check(sl->rec.data, sl->rec.len, &parts, &sl->rec_off) != 0 ||
        parts != e->parts) {
        hs_counter_add(s->err_read, 1);
        uint32_t suppressed;
        if (hs_ratelimit_allow(&s->store_rl, hs_now_ms(), &suppressed))
            hs_log_error(s->opt.id,
                         "queue record %lld in %s is damaged (CRC): dropped (%u similar "
                         "messages suppressed)",
                         (long long)e->rec_id, hs_queue_store_path(s->store), suppressed);
        return HS_EINVAL;
    }
    struct hs_queue_part skip;
    for (uint32_t i = 0; i < sl->part; i++) /* parts settled before a restart */
        if (hs_queue_record_part(sl->rec.data, sl->rec.len, &sl->rec_off, &skip) != 0)
            return HS_EINVAL;
    return 0;
}

/* Fills the slot's request from the stored record's next part. */
static int slot_stored_part(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    if (sl->rec.len == 0) {
        int rc = slot_load(sl);
        if (rc != 0)
            return rc;
    }
    struct hs_queue_part p;
    if (hs_queue_record_part(sl->rec.data, sl->rec.len, &sl->rec_off, &p) != 0)
        return HS_EINVAL;
    struct hs_sender_request *r = &sl->req;
    r->count = p.count;
    r->url = p.url;
    if (p.url_relative) {
        if (hs_buf_printf(&r->url_buf, "%s%s", s->opt.url ? s->opt.url : "", p.url) != 0)
            return HS_ENOMEM;
        r->url = (const char *)r->url_buf.data;
    }
    r->body = p.body;
    r->body_len = p.body_len;
    if (lines_reserve(sl, s->opt.header_count + p.nlines) != 0)
        return HS_ENOMEM;
    sl->nlines = 0;
    for (size_t i = 0; i < s->opt.header_count; i++)
        if (!body_header(s->opt.headers[i]))
            sl->lines[sl->nlines++] = s->opt.headers[i];
    for (size_t i = 0; i < p.nlines; i++)
        sl->lines[sl->nlines++] = p.lines[i];
    return 0;
}

/* The item leaves the slot: released, or with storage its record deleted. */
static void slot_settle(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    request_free(&sl->req);
    if (s->store && hs_queue_store_delete(s->store, e->rec_id) != 0)
        store_error(s, s->err_delete, "delete (the record will be sent again at the next start)");
    hs_buf_free(&sl->rec); /* up to a whole batch: not kept for the next item */
    s->held--;
    s->held_bytes -= e->bytes;
    s->health.pending = s->held > 0;
    entry_free(s, e);
    sl->entry = NULL;
}

/* Starts the slot's current part, or the first part after it that encodes. Returns false when
 * no part is left: the item is then settled and the slot idle. */
static bool slot_advance(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    for (; sl->part < e->parts; sl->part++) {
        request_free(&sl->req);
        int rc;
        if (!e->item) {
            if ((rc = slot_stored_part(sl)) != 0) { /* the rest of the record is unreadable */
                slot_drop(sl, rc == HS_ENOMEM ? "out_of_memory" : "store_unreadable", e->count);
                break;
            }
        } else {
            rc = s->opt.hooks.encode(s->opt.ud, e->item, sl->part, &sl->req);
            if (rc == 0)
                rc = slot_lines(sl);
            if (rc != 0) {
                uint32_t n = sl->req.count ? sl->req.count : e->parts == 1 ? e->count : 0;
                slot_drop(sl, rc == HS_ENOMEM ? "out_of_memory" : "encode_failed", n);
                continue;
            }
        }
        sl->first_ms = hs_now_ms();
        sl->interval_ms = s->opt.retry->initial_interval_ms;
        slot_send(sl);
        return true;
    }
    slot_settle(sl);
    return false;
}

/* With storage, a settled part is written down, so a restart resumes after it. */
static void slot_part_done(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    sl->part++;
    if (!s->store)
        return;
    e->count -= HS_MIN(sl->req.count, e->count);
    if (sl->part < e->parts && hs_queue_store_advance(s->store, e->rec_id, sl->part, e->count))
        store_error(s, s->err_write, "update (sent parts may be sent again at the next start)");
}

/* Shutting down with storage: the item stays on disk for the next start. */
static void slot_leave(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    request_free(&sl->req);
    hs_buf_free(&sl->rec);
    sl->entry = NULL;
    e->next = s->head; /* counted with the queue's rest when the sender finishes */
    s->head = e;
    if (s->tail == &s->head)
        s->tail = &e->next;
}

/* Returns true when the request waits for another attempt, false when it was dropped. */
static bool slot_retry(struct slot *sl, const struct hs_http_result *res)
{
    struct hs_sender *s = sl->s;
    const struct hs_sender_retry_config *pol = s->opt.retry;
    uint32_t n = sl->req.count;
    if (!pol->enabled) {
        slot_drop(sl, "send_failed", n);
        return false;
    }
    double unit = (double)(rng_next(s) >> 11) / (double)(1ULL << 53); /* [0, 1) */
    double jitter = 1.0 + pol->randomization_factor * (2.0 * unit - 1.0);
    uint64_t delay = HS_MAX((uint64_t)((double)sl->interval_ms * jitter), res->retry_after_ms);
    uint64_t elapsed = hs_now_ms() - sl->first_ms;
    if (pol->max_elapsed_ms && elapsed + delay > pol->max_elapsed_ms) {
        slot_drop(sl, "retry_exhausted", n);
        return false;
    }
    double next = (double)sl->interval_ms * pol->multiplier;
    sl->interval_ms = next >= (double)pol->max_interval_ms ? pol->max_interval_ms : (uint64_t)next;
    hs_counter_add(s->retries, 1);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&s->log_rl, hs_now_ms(), &suppressed)) {
        char why[64];
        snprintf(why, sizeof(why), "HTTP %d", res->status);
        if (res->status && res->error) /* a classify hook's text (a gRPC status) */
            snprintf(why, sizeof(why), "%s", res->error);
        hs_log_warn(s->opt.id,
                    "export of %u %s failed (%s), retrying in %llu ms "
                    "(%u similar messages suppressed)",
                    n, s->opt.items, res->status ? why : res->error, (unsigned long long)delay,
                    suppressed);
    }
    uv_timer_start(&sl->timer, on_retry_timer, delay, 0);
    return true;
}

static void slot_sent(struct slot *sl, const struct hs_http_result *res)
{
    struct hs_sender *s = sl->s;
    uint32_t n = sl->req.count, bad = 0;
    if (s->opt.hooks.on_success)
        bad = HS_MIN(s->opt.hooks.on_success(s->opt.ud, sl->entry->item, &sl->req, res), n);
    hs_counter_add(s->sent, n - bad);
    if (bad)
        slot_drop(sl, "rejected_by_backend", bad);
}

/* The error text of a response: a JSON error's "message" (Connect, google.rpc.Status in
 * JSON), else the printable bytes of the body (often a binary google.rpc.Status). */
static void error_text(const struct hs_http_result *res, char *out, size_t outlen)
{
    const char *ct = res->content_type ? res->content_type : "";
    if (strncasecmp(ct, "application/json", 16) == 0) {
        json_t *root = json_loadb((const char *)res->body, res->body_len, 0, NULL);
        json_t *m = json_object_get(root, "message");
        bool found = json_is_string(m);
        if (found)
            snprintf(out, outlen, "%s", json_string_value(m));
        json_decref(root);
        if (found)
            return;
    }
    size_t n = HS_MIN(res->body_len, HS_MIN((size_t)LOG_BODY_BYTES, outlen - 1));
    for (size_t i = 0; i < n; i++)
        out[i] = res->body[i] >= 0x20 && res->body[i] < 0x7f ? (char)res->body[i] : '.';
    out[n] = '\0';
}

/* Anything but 2xx, 429, 502, 503, 504: retrying will not help (wire.md §2, §6). */
static void slot_permanent(struct slot *sl, const struct hs_http_result *res)
{
    struct hs_sender *s = sl->s;
    char text[LOG_BODY_BYTES + 1];
    if (res->error) /* a classify hook's text (a gRPC status) */
        snprintf(text, sizeof(text), "%s", res->error);
    else
        error_text(res, text, sizeof(text));
    slot_drop(sl, "permanent_error", sl->req.count);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&s->log_rl, hs_now_ms(), &suppressed))
        hs_log_error(s->opt.id,
                     "export of %u %s failed permanently: HTTP %d: %s "
                     "(%u similar messages suppressed)",
                     sl->req.count, s->opt.items, res->status, text, suppressed);
}

static void sender_progress(struct hs_sender *s);

/* Every answer moves the exporter's health: any success ends a failing period, any failure
 * (transport, retryable or permanent: the backend took nothing) starts one if none runs. */
static void health_note(struct hs_sender *s, bool ok, const struct hs_http_result *res)
{
    uint64_t now = hs_now_ms();
    if (ok) {
        hs_health_ok(&s->health, now);
        return;
    }
    char why[HS_HEALTH_ERROR_LEN];
    if (res->status && res->error)
        snprintf(why, sizeof(why), "HTTP %d: %s", res->status, res->error);
    else if (res->status)
        snprintf(why, sizeof(why), "HTTP %d", res->status);
    else
        snprintf(why, sizeof(why), "%s", res->error ? res->error : "no answer");
    hs_health_failed(&s->health, now, why);
}

static void on_response(void *ud, const struct hs_http_result *in)
{
    struct slot *sl = ud;
    struct hs_sender *s = sl->s;
    struct hs_http_result copy = *in, *res = &copy; /* the classify hook may annotate it */
    int v = s->opt.hooks.classify ? s->opt.hooks.classify(s->opt.ud, &sl->req, res) : 0;
    int st = res->status;
    sl->in_flight = false;
    bool ok = v == HS_SENDER_SENT || (!v && st >= 200 && st < 300);
    health_note(s, ok, res);
    if (ok)
        slot_sent(sl, res);
    else if (v == HS_SENDER_RETRY ||
             (!v && (st == 0 || st == 429 || st == 502 || st == 503 || st == 504))) {
        if (s->closing && s->store) { /* no more attempts: the record waits on disk */
            slot_leave(sl);
            sender_progress(s);
            return;
        }
        if (slot_retry(sl, res))
            return;
    } else
        slot_permanent(sl, res);
    slot_part_done(sl);
    if (s->closing && s->store && sl->part < sl->entry->parts) { /* resumes there next start */
        slot_leave(sl);
        sender_progress(s);
        return;
    }
    if (!slot_advance(sl))
        sender_progress(s);
}

/* ---- the queue -------------------------------------------------------------------------- */

/* Moves queued items into idle slots and starts them. */
static void sender_pump(struct hs_sender *s)
{
    if (s->closing && s->store) /* what is queued stays on disk for the next start */
        return;
    for (uint32_t i = 0; i < s->nslots && s->head;) {
        struct slot *sl = &s->slots[i];
        if (sl->entry) {
            i++;
            continue;
        }
        sl->entry = s->head;
        s->head = sl->entry->next;
        if (!s->head)
            s->tail = &s->head;
        sl->part = sl->entry->first_part;
        if (slot_advance(sl))
            i++;
        /* else nothing of it could be encoded: the slot is idle again, give it the next */
    }
}

static void handle_closed(struct hs_sender *s)
{
    if (--s->closing_handles == 0)
        s->done(s->done_ud); /* nothing of ours is in the loop any more */
}

static void timer_closed(uv_handle_t *h)
{
    handle_closed(((struct slot *)h->data)->s);
}

static void client_closed(void *ud)
{
    handle_closed(ud);
}

static bool slots_busy(const struct hs_sender *s)
{
    for (uint32_t i = 0; i < s->nslots; i++)
        if (s->slots[i].entry)
            return true;
    return false;
}

/* Shutting down with storage: says what stays on disk, frees the queue, closes the store. */
static void storage_finish(struct hs_sender *s)
{
    uint64_t items = 0;
    while (s->head) {
        struct entry *e = s->head;
        s->head = e->next;
        items += e->count;
        entry_free(s, e);
    }
    s->tail = &s->head;
    if (s->held)
        hs_log_info(s->opt.id,
                    "left %u batches (%llu %s, %llu bytes) on disk in %s: the next "
                    "start sends them",
                    s->held, (unsigned long long)items, s->opt.items,
                    (unsigned long long)s->held_bytes, hs_queue_store_path(s->store));
    s->held = 0;
    s->held_bytes = 0;
    s->health.pending = false;
    hs_queue_store_close(s->store);
    s->store = NULL;
}

/* Sends what is queued; once shutting down and empty (with storage: once no request is out),
 * closes everything and reports done. */
static void sender_progress(struct hs_sender *s)
{
    sender_pump(s);
    if (!s->closing || s->finishing || (s->store ? slots_busy(s) : s->held > 0))
        return;
    s->finishing = true;
    hs_metrics_gauge_remove(s->metrics, s);
    if (s->store)
        storage_finish(s);
    s->closing_handles = s->nslots + 1;
    for (uint32_t i = 0; i < s->nslots; i++)
        uv_close((uv_handle_t *)&s->slots[i].timer, timer_closed);
    hs_http_client_close(s->client, client_closed, s);
}

bool hs_sender_ready(const struct hs_sender *s)
{
    return !s->closing && (s->started || !s->opt.queue->storage) && s->held < s->capacity &&
           s->held_bytes < s->opt.queue->queue_bytes;
}

/* Encodes part of item into rec; a part that cannot be is dropped and counted, as it would be
 * at send time without storage. Returns the items stored, or -1 when none was. */
static int record_part(struct hs_sender *s, struct hs_buf *rec, void *item, uint32_t part,
                       uint32_t parts, uint32_t count)
{
    struct hs_sender_request req = {0};
    int rc = s->opt.hooks.encode(s->opt.ud, item, part, &req);
    struct hs_queue_part p = {.count = req.count, .body = req.body, .body_len = req.body_len};
    size_t base = s->opt.url ? strlen(s->opt.url) : 0;
    /* a record part has one body (queue_store.h), so a prefix is joined to it here and the
     * replay sends it as it is. This copy comes with the disk write, which copies the body
     * anyway; requests sent from memory keep them apart. */
    struct hs_buf joined = {0};
    if (rc == 0 && req.prefix_len) {
        rc = hs_buf_reserve(&joined, req.prefix_len + req.body_len);
        if (rc == 0) { /* reserved: the appends cannot fail */
            hs_buf_append(&joined, req.prefix, req.prefix_len);
            hs_buf_append(&joined, req.body, req.body_len);
            p.body = joined.data;
            p.body_len = joined.len;
        }
    }
    if (rc == 0) {
        p.url_relative = base && strncmp(req.url, s->opt.url, base) == 0;
        p.url = req.url + (p.url_relative ? base : 0);
        for (size_t i = 0; i < req.header_count && p.nlines < HS_QUEUE_PART_LINES; i++)
            if (body_header(req.headers[i]))
                p.lines[p.nlines++] = req.headers[i];
        for (size_t i = 0; i < req.extra_count && p.nlines < HS_QUEUE_PART_LINES; i++)
            p.lines[p.nlines++] = req.extra[i];
        rc = hs_queue_record_add(rec, &p);
    }
    if (rc != 0) {
        uint32_t n = req.count ? req.count : parts == 1 ? count : 0;
        sender_drop(s, rc == HS_ENOMEM ? "out_of_memory" : "encode_failed", n);
    }
    hs_buf_free(&joined);
    request_free(&req);
    return rc == 0 ? (int)p.count : -1;
}

/* With storage: the item's requests are on disk before this returns 0. */
static int submit_stored(struct hs_sender *s, void *item, uint32_t count, uint32_t parts)
{
    struct hs_buf rec = {0};
    struct hs_queue_store_meta meta = {0};
    int rc = hs_queue_record_start(&rec);
    for (uint32_t i = 0; rc == 0 && i < parts; i++) {
        int n = record_part(s, &rec, item, i, parts, count);
        if (n >= 0) {
            meta.parts++;
            meta.count += (uint32_t)n;
        }
    }
    s->opt.hooks.release(s->opt.ud, item); /* from here on the record is the item */
    /* nothing could be encoded: dropped and counted above */
    if (rc == 0 && meta.parts == 0) {
        hs_buf_free(&rec);
        return 0;
    }
    if (rc == 0)
        rc = hs_queue_record_finish(&rec, meta.parts);
    if (rc == 0 && (rc = hs_queue_store_put(s->store, rec.data, rec.len, &meta)) != 0)
        store_error(s, s->err_write, "write, batch refused");
    hs_buf_free(&rec);
    if (rc != 0) { /* refused, not dropped: the client keeps it and retries */
        hs_counter_add(s->enqueue_failed, meta.count ? meta.count : count);
        return HS_EAGAIN;
    }
    struct entry *e = hs_xcalloc(1, sizeof(*e));
    e->bytes = meta.bytes;
    e->count = meta.count;
    e->parts = meta.parts;
    e->rec_id = meta.id;
    queue_append(s, e);
    sender_pump(s);
    return 0;
}

int hs_sender_submit(struct hs_sender *s, void *item, size_t bytes, uint32_t count, uint32_t parts)
{
    if (!hs_sender_ready(s)) {
        if (s->enqueue_failed)
            hs_counter_add(s->enqueue_failed, count);
        s->opt.hooks.release(s->opt.ud, item);
        return HS_EAGAIN;
    }
    if (s->store)
        return submit_stored(s, item, count, parts ? parts : 1);
    struct entry *e = hs_xcalloc(1, sizeof(*e));
    e->item = item;
    e->bytes = bytes;
    e->count = count;
    e->parts = parts ? parts : 1;
    queue_append(s, e);
    if (s->started)
        sender_pump(s);
    return 0;
}

void hs_sender_shutdown(struct hs_sender *s, void (*done)(void *ud), void *ud)
{
    if (s->closing) /* already on its way; the first done will fire */
        return;
    s->closing = true;
    if (!s->started) {
        done(ud);
        return;
    }
    s->done = done;
    s->done_ud = ud;
    for (uint32_t i = 0; s->store && i < s->nslots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->entry && !sl->in_flight) { /* waiting to retry: it waits on disk instead */
            uv_timer_stop(&sl->timer);
            slot_leave(sl);
        }
    }
    /* done waits until what is held is sent or given up on (with storage: until the requests
     * out now are answered) */
    sender_progress(s);
}
