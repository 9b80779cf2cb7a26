/* sender_store.c: the sender's queue kept on disk (sender.h, `storage`): items encoded into
 * records at submit, queued again from the store at start, sent part by part from there, and
 * what is left reported at shutdown. The records themselves are queue_store.c's. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/errors.h"
#include "core/log.h"
#include "queue_store.h"
#include "sender_int.h"

void hs_sender_store_metrics(struct hs_sender *s, struct hs_metrics *m, const char *labels)
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
                     hs_sender_gauge_held, s);
    hs_metrics_gauge(m, "exporter_storage_bytes", "Bytes of the records in the on-disk queue",
                     labels, hs_sender_gauge_held_bytes, s);
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
    e->key = m->key;
    hs_sender_queue_append(s, e);
    hs_counter_add(s->replayed, m->count);
}

int hs_sender_store_open(struct hs_sender *s)
{
    struct hs_queue_store_open_info info;
    int rc = hs_queue_store_open(s->opt.queue->storage, s->name, &s->store, &info);
    if (rc != 0)
        return rc; /* logged by the store */
    if (info.moved_aside)
        hs_counter_add(s->err_corrupt, 1);
    if ((rc = hs_queue_store_scan(s->store, on_stored, s)) != 0) {
        hs_log_error(s->name, "cannot read queue store %s: %s", hs_queue_store_path(s->store),
                     hs_queue_store_errmsg(s->store));
        return rc;
    }
    if (s->held)
        hs_log_info(s->name, "resuming %u batches (%llu %s, %llu bytes) left in %s: sent first",
                    s->held, (unsigned long long)s->replayed->value, s->opt.items,
                    (unsigned long long)s->held_bytes, hs_queue_store_path(s->store));
    else
        hs_log_info(s->name, "queue kept on disk in %s", hs_queue_store_path(s->store));
    return 0;
}

void hs_sender_store_error(struct hs_sender *s, struct hs_counter *c, const char *what)
{
    hs_counter_add(c, 1);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&s->store_rl, hs_now_ms(), &suppressed))
        hs_log_error(s->name, "queue store %s: %s (%u similar messages suppressed)", what,
                     hs_queue_store_errmsg(s->store), suppressed);
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
        hs_sender_store_error(s, s->err_read, "read");
        return rc;
    }
    uint32_t parts;
    if (hs_queue_record_check(sl->rec.data, sl->rec.len, &parts, &sl->rec_off) != 0 ||
        parts != e->parts) {
        hs_counter_add(s->err_read, 1);
        uint32_t suppressed;
        if (hs_ratelimit_allow(&s->store_rl, hs_now_ms(), &suppressed))
            hs_log_error(s->name,
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
int hs_sender_store_part(struct slot *sl)
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
    if (hs_sender_slot_lines_reserve(sl, s->opt.header_count + p.nlines) != 0)
        return HS_ENOMEM;
    sl->nlines = 0;
    for (size_t i = 0; i < s->opt.header_count; i++)
        if (!body_header(s->opt.headers[i]))
            sl->lines[sl->nlines++] = s->opt.headers[i];
    for (size_t i = 0; i < p.nlines; i++)
        sl->lines[sl->nlines++] = p.lines[i];
    return 0;
}

/* Shutting down with storage: says what stays on disk, frees the queue, closes the store. */
void hs_sender_store_finish(struct hs_sender *s)
{
    uint64_t items = 0;
    while (s->head) {
        struct entry *e = s->head;
        s->head = e->next;
        items += e->count;
        hs_sender_entry_free(s, e);
    }
    s->tail = &s->head;
    if (s->held)
        hs_log_info(s->name,
                    "left %u batches (%llu %s, %llu bytes) on disk in %s: the next "
                    "start sends them",
                    s->held, (unsigned long long)items, s->opt.items,
                    (unsigned long long)s->held_bytes, hs_queue_store_path(s->store));
    s->held = 0;
    s->held_bytes = 0;
    s->health.pending = false;
    if (s->evicting) { /* its records went to other senders: the file goes too, once empty */
        const char *path = hs_queue_store_path(s->store);
        char shown[512];
        snprintf(shown, sizeof(shown), "%s", path);
        if (hs_queue_store_close_remove(s->store))
            hs_log_info(s->name, "queue store %s removed: its records went elsewhere", shown);
    } else {
        hs_queue_store_close(s->store);
    }
    s->store = NULL;
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
        hs_sender_drop(s, rc == HS_ENOMEM ? "out_of_memory" : "encode_failed", n);
    }
    hs_buf_free(&joined);
    hs_sender_request_free(&req);
    return rc == 0 ? (int)p.count : -1;
}

/* With storage: the item's requests are on disk before this returns 0. */
int hs_sender_store_submit(struct hs_sender *s, void *item, uint32_t count, uint32_t parts,
                           uint64_t key)
{
    struct hs_buf rec = {0};
    struct hs_queue_store_meta meta = {.key = key};
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
        hs_sender_store_error(s, s->err_write, "write, batch refused");
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
    e->key = key;
    hs_sender_queue_append(s, e);
    hs_sender_pump(s);
    return 0;
}

/* ---- moving records between senders (sender_move.c) ------------------------------------- */

int hs_sender_store_adopt(struct hs_sender *s, const struct hs_sender_moved *m)
{
    struct hs_queue_store_meta meta = {
        .count = m->count, .parts = m->parts, .next_part = m->first_part, .key = m->key};
    if (hs_queue_store_put(s->store, m->rec, m->rec_len, &meta) != 0) {
        hs_sender_store_error(s, s->err_write, "write, a record moved here stays where it was");
        return HS_EAGAIN;
    }
    struct entry *e = hs_xcalloc(1, sizeof(*e));
    e->bytes = meta.bytes;
    e->count = m->count;
    e->parts = m->parts;
    e->first_part = m->first_part;
    e->rec_id = meta.id;
    e->key = m->key;
    hs_sender_queue_append(s, e);
    hs_sender_pump(s);
    return 0;
}

void hs_sender_store_hand_over(struct hs_sender *s, struct entry *e, uint32_t first_part)
{
    struct hs_buf rec = {0};
    if (hs_queue_store_get(s->store, e->rec_id, &rec) != 0) {
        /* left on disk: the next start finds it in this backend's file */
        hs_sender_store_error(s, s->err_read, "read of a record to move (it stays on disk)");
        hs_buf_free(&rec);
        return;
    }
    struct hs_sender_moved m = {.rec = rec.data,
                                .rec_len = rec.len,
                                .bytes = e->bytes,
                                .count = e->count,
                                .parts = e->parts,
                                .first_part = first_part,
                                .key = e->key};
    s->evict_fn(s->evict_ud, &m);
    if (!m.kept && hs_queue_store_delete(s->store, e->rec_id) != 0)
        hs_sender_store_error(s, s->err_delete,
                              "delete of a moved record (the next start sends it again)");
    hs_buf_free(&rec);
}
