/* sender.c: the queue, slots and retries behind every network exporter (sender.h). An item
 * holds a slot from its first attempt until each of its requests is sent or given up on, so a
 * backend that is down fills the slots, then the queue, and the pipeline gets backpressure.
 * With storage, items are encoded into records on disk at submit and sent from there. */
#include "sender.h"

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
#include "sender_int.h"

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

void hs_sender_request_free(struct hs_sender_request *r)
{
    hs_buf_free(&r->url_buf);
    hs_buf_free(&r->body_buf);
    for (size_t i = 0; i < r->extra_count; i++)
        free(r->extra[i]);
    memset(r, 0, sizeof(*r));
}

/* ---- the default transport: HTTP ------------------------------------------------------- */

static int http_open(const struct hs_sender_options *opt, uv_loop_t *loop, void **conn)
{
    *conn = hs_http_client_new_tls(loop, opt->client_flags, opt->tls);
    return *conn ? 0 : HS_ENOMEM;
}

static int http_send(void *conn, const struct hs_sender_request *r, const char *const *lines,
                     size_t nlines, uint64_t timeout_ms, hs_http_done_cb done, void *done_ud)
{
    return hs_http_client_post_prefixed(conn, r->url, lines, nlines, r->prefix, r->prefix_len,
                                        r->body, r->body_len, timeout_ms, done, done_ud);
}

static void http_close(void *conn, void (*closed)(void *ud), void *ud)
{
    hs_http_client_close(conn, closed, ud);
}

static const struct hs_sender_transport http_transport = {
    .open = http_open,
    .send = http_send,
    .close = http_close,
};

/* ---- create, start, free ---------------------------------------------------------------- */

struct hs_sender *hs_sender_new(const struct hs_sender_options *opt)
{
    struct hs_sender *s = hs_xcalloc(1, sizeof(*s));
    s->opt = *opt;
    s->name = opt->name ? opt->name : opt->id;
    s->transport = opt->transport ? opt->transport : &http_transport;
    s->capacity = opt->queue->enabled ? opt->queue->queue_size : opt->queue->num_consumers;
    s->nslots = opt->queue->num_consumers;
    s->tail = &s->head;
    s->log_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    s->store_rl = (struct hs_ratelimit)HS_RATELIMIT_INIT(10000, 5);
    return s;
}

void hs_sender_entry_free(struct hs_sender *s, struct entry *e)
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
        hs_sender_entry_free(s, e);
    }
    for (uint32_t i = 0; s->slots && i < s->nslots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->entry)
            hs_sender_entry_free(s, sl->entry);
        hs_sender_request_free(&sl->req);
        hs_buf_free(&sl->rec);
        free(sl->lines);
    }
    free(s->slots);
    hs_queue_store_close(s->store);
    free(s);
}

double hs_sender_gauge_held(void *ud)
{
    return ((struct hs_sender *)ud)->held;
}

static double gauge_queue_capacity(void *ud)
{
    return ((struct hs_sender *)ud)->capacity;
}

double hs_sender_gauge_held_bytes(void *ud)
{
    return (double)((struct hs_sender *)ud)->held_bytes;
}

static double gauge_failing_seconds(void *ud)
{
    return hs_health_failing_seconds(&((struct hs_sender *)ud)->health, hs_now_ms());
}

static void metrics_register(struct hs_sender *s, struct hs_metrics *m)
{
    char labels[512], name[96], help[96];
    snprintf(labels, sizeof(labels), "exporter=\"%s\"%s%s", s->opt.id, s->opt.labels ? "," : "",
             s->opt.labels ? s->opt.labels : "");
    struct hs_exporter_counters c = hs_metrics_exporter_labels(m, labels, s->opt.signal);
    s->sent = c.sent;
    s->failed = c.failed;
    snprintf(name, sizeof(name), "exporter_enqueue_failed_%s_total", s->opt.items);
    snprintf(help, sizeof(help), "%c%s refused because the queue was full or could not write",
             s->opt.items[0] - 'a' + 'A', s->opt.items + 1);
    s->enqueue_failed = hs_metrics_counter(m, name, help, labels);
    s->retries = hs_metrics_counter(m, "exporter_retries_total", "Requests retried", labels);
    hs_metrics_gauge(m, "exporter_queue_size", "Batches held (waiting and in flight)", labels,
                     hs_sender_gauge_held, s);
    hs_metrics_gauge(m, "exporter_queue_capacity", "Batches the queue holds at most", labels,
                     gauge_queue_capacity, s);
    hs_metrics_gauge(m, "exporter_queue_bytes", "Bytes of the batches held", labels,
                     hs_sender_gauge_held_bytes, s);
    hs_metrics_gauge(m, "exporter_failing_seconds",
                     "Seconds every send attempt has been failing (0: the last one succeeded)",
                     labels, gauge_failing_seconds, s);
    hs_metrics_health(m, s->name, &s->health, s);
    if (s->opt.queue->storage)
        hs_sender_store_metrics(s, m, labels);
}

void hs_sender_queue_append(struct hs_sender *s, struct entry *e)
{
    *s->tail = e;
    s->tail = &e->next;
    s->held++;
    s->held_bytes += e->bytes;
    s->health.pending = true;
}

int hs_sender_start(struct hs_sender *s, uv_loop_t *loop, struct hs_metrics *m)
{
    metrics_register(s, m);
    s->metrics = m;
    if (s->opt.queue->storage) {
        int rc = hs_sender_store_open(s);
        if (rc != 0) {
            hs_metrics_gauge_remove(m, s);
            return rc;
        }
    }
    int rc = s->transport->open(&s->opt, loop, &s->conn);
    if (rc != 0) {
        hs_metrics_gauge_remove(m, s);
        return rc;
    }
    s->slots = hs_xcalloc(s->nslots, sizeof(*s->slots));
    for (uint32_t i = 0; i < s->nslots; i++) {
        s->slots[i].s = s;
        uv_timer_init(loop, &s->slots[i].timer);
        s->slots[i].timer.data = &s->slots[i];
    }
    s->rng = (hs_wall_ns() ^ (uint64_t)(uintptr_t)s) | 1;
    s->started = true;
    hs_sender_pump(s);
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

void hs_sender_drop(struct hs_sender *s, const char *reason, uint64_t n)
{
    hs_counter_add(s->failed, n);
    hs_metrics_drop(s->metrics, s->opt.id, reason, n);
}

static void slot_drop(struct slot *sl, const char *reason, uint64_t n)
{
    hs_sender_drop(sl->s, reason, n);
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
    int rc =
        s->transport->send(s->conn, r, sl->lines, sl->nlines, s->opt.timeout_ms, on_response, sl);
    if (rc != 0) /* answered from the loop, as a transport error, so callers never recurse */
        uv_timer_start(&sl->timer, on_post_failed, 0, 0);
}

static void on_retry_timer(uv_timer_t *t)
{
    slot_send(t->data);
}

int hs_sender_slot_lines_reserve(struct slot *sl, size_t n)
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

/* Joins the fixed and per-request header lines into the array the transport borrows. */
static int slot_lines(struct slot *sl)
{
    const struct hs_sender_request *r = &sl->req;
    sl->nlines = r->header_count + r->extra_count;
    if (hs_sender_slot_lines_reserve(sl, sl->nlines) != 0)
        return HS_ENOMEM;
    for (size_t i = 0; i < r->header_count; i++)
        sl->lines[i] = r->headers[i];
    for (size_t i = 0; i < r->extra_count; i++)
        sl->lines[r->header_count + i] = r->extra[i];
    return 0;
}

/* The item leaves the slot: released, or with storage its record deleted. */
static void slot_settle(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    hs_sender_request_free(&sl->req);
    if (s->store && hs_queue_store_delete(s->store, e->rec_id) != 0)
        hs_sender_store_error(s, s->err_delete,
                              "delete (the record will be sent again at the next start)");
    hs_buf_free(&sl->rec); /* up to a whole batch: not kept for the next item */
    s->held--;
    s->held_bytes -= e->bytes;
    s->health.pending = s->held > 0;
    hs_sender_entry_free(s, e);
    sl->entry = NULL;
}

/* Starts the slot's current part, or the first part after it that encodes. Returns false when
 * no part is left: the item is then settled and the slot idle. */
static bool slot_advance(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    for (; sl->part < e->parts; sl->part++) {
        hs_sender_request_free(&sl->req);
        int rc;
        if (!e->item) {
            if ((rc = hs_sender_store_part(sl)) != 0) { /* the rest of the record is unreadable */
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
        hs_sender_store_error(s, s->err_write,
                              "update (sent parts may be sent again at the next start)");
}

/* Shutting down with storage: the item stays on disk for the next start. */
static void slot_leave(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    hs_sender_request_free(&sl->req);
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
        hs_log_warn(s->name,
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
        hs_log_error(s->name,
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
        if (s->evicting) { /* not here again: the item goes where its key lives now */
            hs_sender_slot_hand_over(sl);
            sender_progress(s);
            return;
        }
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
    if (s->evicting && sl->part < sl->entry->parts) { /* the other parts go elsewhere */
        hs_sender_slot_hand_over(sl);
        sender_progress(s);
        return;
    }
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
void hs_sender_pump(struct hs_sender *s)
{
    if ((s->closing && s->store) || s->evicting) /* stays on disk, or was handed over */
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

static void transport_closed(void *ud)
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

/* Sends what is queued; once shutting down and empty (with storage: once no request is out),
 * closes everything and reports done. */
static void sender_progress(struct hs_sender *s)
{
    hs_sender_pump(s);
    if (!s->closing || s->finishing || (s->store ? slots_busy(s) : s->held > 0))
        return;
    s->finishing = true;
    hs_metrics_gauge_remove(s->metrics, s);
    if (s->store)
        hs_sender_store_finish(s);
    s->closing_handles = s->nslots + 1;
    for (uint32_t i = 0; i < s->nslots; i++)
        uv_close((uv_handle_t *)&s->slots[i].timer, timer_closed);
    s->transport->close(s->conn, transport_closed, s);
}

uint32_t hs_sender_held(const struct hs_sender *s)
{
    return s->held;
}

bool hs_sender_room(const struct hs_sender *s, uint32_t n)
{
    return !s->closing && !s->evicting && (s->started || !s->opt.queue->storage) &&
           s->held + (uint64_t)n <= s->capacity && s->held_bytes < s->opt.queue->queue_bytes;
}

bool hs_sender_ready(const struct hs_sender *s)
{
    return hs_sender_room(s, 1);
}

int hs_sender_submit(struct hs_sender *s, void *item, size_t bytes, uint32_t count, uint32_t parts)
{
    return hs_sender_submit_keyed(s, item, bytes, count, parts, 0);
}

int hs_sender_submit_keyed(struct hs_sender *s, void *item, size_t bytes, uint32_t count,
                           uint32_t parts, uint64_t key)
{
    if (!hs_sender_ready(s)) {
        if (s->enqueue_failed)
            hs_counter_add(s->enqueue_failed, count);
        s->opt.hooks.release(s->opt.ud, item);
        return HS_EAGAIN;
    }
    if (s->store)
        return hs_sender_store_submit(s, item, count, parts ? parts : 1, key);
    struct entry *e = hs_xcalloc(1, sizeof(*e));
    e->item = item;
    e->bytes = bytes;
    e->count = count;
    e->parts = parts ? parts : 1;
    e->key = key;
    hs_sender_queue_append(s, e);
    if (s->started)
        hs_sender_pump(s);
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
