/* sender_int.h: the sender's insides, shared by its two halves: sender.c (the queue, slots and
 * retries) and sender_store.c (the queue kept on disk). Nothing else includes it. */
#ifndef HS_SENDER_INT_H
#define HS_SENDER_INT_H

#include "core/common.h"
#include "core/metrics.h"
#include "sender.h"

struct hs_queue_store;

/* An item waiting in the queue or held by a slot. */
struct entry {
    struct entry *next;
    void *item;     /* NULL with storage: the record on disk is the item */
    size_t bytes;   /* as counted against queue_bytes */
    uint32_t count; /* with storage: of the parts not yet settled */
    uint32_t parts;
    int64_t rec_id;      /* with storage */
    uint32_t first_part; /* the parts before it were settled (before a restart, or elsewhere) */
    uint64_t key;        /* the routing key it was submitted with (hs_sender_submit_keyed) */
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
    const struct hs_sender_transport *transport; /* opt.transport, or HTTP */
    void *conn;                                  /* the transport's, from open */
    uint32_t capacity;                           /* items held at most */
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
    const char *name; /* opt.name, or opt.id */
    /* hs_sender_evict: everything goes to evict_fn */
    hs_sender_move_fn evict_fn;
    void *evict_ud;
    bool evicting;
    struct hs_ratelimit log_rl;
    struct hs_counter *sent, *failed, *enqueue_failed, *retries;
    struct hs_health health; /* failing since when: /healthz/ready and exporter_failing_seconds */
    /* with storage */
    struct hs_queue_store *store;
    struct hs_ratelimit store_rl;
    struct hs_counter *replayed, *err_write, *err_read, *err_delete, *err_corrupt;
};

/* ---- sender.c, for sender_store.c ---- */
void hs_sender_queue_append(struct hs_sender *s, struct entry *e);
void hs_sender_entry_free(struct hs_sender *s, struct entry *e);
void hs_sender_pump(struct hs_sender *s);
/* Counts n items failed and dropped for `reason`. */
void hs_sender_drop(struct hs_sender *s, const char *reason, uint64_t n);
void hs_sender_request_free(struct hs_sender_request *r);
int hs_sender_slot_lines_reserve(struct slot *sl, size_t n);
double hs_sender_gauge_held(void *ud);
double hs_sender_gauge_held_bytes(void *ud);

/* ---- sender_move.c, for sender.c ---- */
/* Evicting: hands the slot's item (from its current part) to evict_fn and frees the slot. */
void hs_sender_slot_hand_over(struct slot *sl);

/* ---- sender_store.c ---- */
/* The storage counters and gauges, under `labels`. */
void hs_sender_store_metrics(struct hs_sender *s, struct hs_metrics *m, const char *labels);
/* Opens the store and queues the records it holds. Returns 0 or a code (logged). */
int hs_sender_store_open(struct hs_sender *s);
/* Shutting down: says what stays on disk, frees the queue, closes the store. */
void hs_sender_store_finish(struct hs_sender *s);
/* Counts a store failure and logs it, rate-limited. */
void hs_sender_store_error(struct hs_sender *s, struct hs_counter *c, const char *what);
/* Fills the slot's request from the stored record's next part. Returns 0 or a code. */
int hs_sender_store_part(struct slot *sl);
/* Encodes every part of item into a record on disk and queues it; item is released. Returns 0
 * or HS_EAGAIN (refused: the store could not write). */
int hs_sender_store_submit(struct hs_sender *s, void *item, uint32_t count, uint32_t parts,
                           uint64_t key);
/* Writes a record another sender handed over and queues it. Returns 0 or HS_EAGAIN. */
int hs_sender_store_adopt(struct hs_sender *s, const struct hs_sender_moved *m);
/* Hands e's record to evict_fn (from part `first_part`) and deletes it unless kept. */
void hs_sender_store_hand_over(struct hs_sender *s, struct entry *e, uint32_t first_part);

#endif
