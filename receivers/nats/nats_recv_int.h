/* nats_recv_int.h: the `nats` receiver's insides, shared by receiver.c (config, the component,
 * messages handed to the pipeline and acked), pull.c (durable consumers made on the thread pool,
 * pull requests from the loop) and the unit tests (the pure parts: partition lists, ack subjects,
 * the set of messages taken). */
#ifndef HS_NATS_RECV_INT_H
#define HS_NATS_RECV_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/common.h"
#include "core/component.h"
#include "core/log.h"
#include "net/nats.h"
#include "pdata/bus.h"
#include "pdata/profiles.h"

struct nats_recv_config {
    struct hs_nats_config nats;
    char *stream;
    char *subject_prefix;
    uint32_t partitions;
    struct hs_strlist consume_partitions;
    char *durable;
    uint64_t ack_wait_ms;
    uint32_t max_deliver;
    uint32_t max_ack_pending;
    uint32_t fetch_batch;
    uint64_t fetch_max_bytes;
    uint64_t fetch_timeout_ms;
    uint64_t nak_delay_ms;
    uint64_t max_decompressed;
    uint32_t max_samples;
    uint32_t max_sample_labels;
    uint32_t max_stack_depth;
};

/* ---- the pure parts (pull.c) ---- */

/* Parses consume_partitions ("0-7", "9": ranges and numbers below `partitions`) into a sorted,
 * duplicate-free list (malloc'd; all partitions when there is no item). Returns 0, or
 * HS_EINVAL with *bad the index of the first wrong item and why. */
int hs_nats_partitions_parse(const struct hs_strlist *items, uint32_t partitions, uint32_t **out,
                             uint32_t *n, size_t *bad, const char **why);

/* What JetStream says of a delivered message in its reply subject:
 * $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending> (v1), or
 * $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<stream seq>... (v2). */
struct hs_nats_meta {
    struct hs_str consumer; /* a view into the reply subject */
    uint64_t delivered;     /* 1 on the first delivery */
    uint64_t stream_seq;
};
/* Returns false when reply is no JetStream ack subject. */
bool hs_nats_meta_parse(const char *reply, struct hs_nats_meta *m);

/* What a status message on a pull request's reply subject means for the request. */
enum hs_nats_status {
    HS_NATS_STATUS_IDLE, /* 100: a heartbeat, the request goes on */
    HS_NATS_STATUS_END,  /* 404 none, 408 expired: ask again now */
    HS_NATS_STATUS_FULL, /* 409 cut by max_bytes: ask again now, for one message alone if none
                          * came (it is larger than fetch_max_bytes) */
    HS_NATS_STATUS_WAIT, /* another 409 (too many waiting, leadership change): ask again soon */
    HS_NATS_STATUS_LOST, /* 503 no responders, 409 consumer deleted: the consumer is checked
                          * again (made if missing) before the next request */
};
/* From the Status and Description headers libnats reads off the status line. */
enum hs_nats_status hs_nats_status_kind(const char *status, const char *description);

/* The stream sequences of messages taken lately: a redelivery of one (its ack was lost) is acked
 * again and not handed on twice. Two generations of `cap` slots each (power of two): the
 * latest cap/2 inserts are always remembered, older ones for a while. */
struct hs_nats_seen {
    uint64_t *cur, *prev;
    size_t cap, count;
};
void hs_nats_seen_init(struct hs_nats_seen *s, size_t cap);
void hs_nats_seen_free(struct hs_nats_seen *s);
void hs_nats_seen_add(struct hs_nats_seen *s, uint64_t seq); /* seq > 0 */
bool hs_nats_seen_has(const struct hs_nats_seen *s, uint64_t seq);

/* ---- the component ---- */

struct nats_recv;

/* One durable pull consumer: one partition, both signals of its pipelines. */
struct durable {
    struct nats_recv *r;
    uint32_t index;
    uint32_t partition;
    char name[96];
    char filter[HS_BUS_SUBJECT_MAX];
    bool ready;                /* the consumer exists on the server */
    bool setting_up;           /* a pool job is making it */
    bool requesting;           /* a pull request is out */
    uint64_t gen;              /* of the request out: its reply subject ends .<index>.<gen> */
    uint32_t asked, remaining; /* messages of the request out */
    uint64_t deadline_ms;
    uint64_t not_before_ms; /* no request before (after a status that asks to wait) */
    bool one_alone;         /* the next message is larger than fetch_max_bytes: ask for it alone */
};

struct nats_recv {
    struct hs_component base;
    struct nats_recv_config conf;
    struct hs_tls_client *tls;
    struct hs_nats *nc;
    uint32_t *parts; /* consume_partitions, parsed at create */
    uint32_t nparts;
    struct durable *d;
    uint32_t nd;
    int32_t *by_partition; /* [partitions]: index into d, or -1 */
    unsigned signals;      /* of the pipelines it feeds */
    struct hs_pprof_limits lim;
    struct hs_nats_seen seen;
    /* receiver.c's: stopping and no pull request out (pull.c calls it; closes the timer and
     * the connection, then done) */
    void (*drained)(struct nats_recv *r);
    uv_timer_t timer; /* request deadlines, pauses, consumer setup retries */
    uint64_t paused_until_ms;
    uint64_t setup_retry_ms, setup_backoff_ms;
    unsigned setup_inflight; /* pool jobs making consumers */
    bool all_ready;          /* every consumer was there when last looked at */
    bool started;
    bool stopping;          /* shutdown: no new pull requests, waiting for those out */
    bool closing;           /* then the timer and the connection close */
    unsigned closing_steps; /* of them, still closing */
    hs_done_cb done;
    struct hs_ratelimit log_rl;
    char labels[200];
    struct hs_counter *accepted[2], *refused[2]; /* [0] spans, [1] profiles */
    struct hs_counter *acked, *nacked, *terminated, *duplicate, *redelivered;
};

/* ---- pull.c, for receiver.c ---- */
/* The timer (deadlines, pauses, setup retries), at start. */
void hs_nats_recv_timer_init(struct nats_recv *r, uv_loop_t *loop);
/* Builds the durables of the configured partitions (names, filters). */
void hs_nats_recv_durables(struct nats_recv *r, const uint32_t *parts, uint32_t n);
/* Makes the consumers that are missing (thread pool), then keeps one pull request out per
 * durable while the pipeline has room. Called at connect and by the timer. */
void hs_nats_recv_pump(struct nats_recv *r);
/* The durable and request generation of a reply subject in our inbox (status messages);
 * NULL when not ours. */
struct durable *hs_nats_recv_route(struct nats_recv *r, const char *subject, uint64_t *gen);
/* The durable of a consumer name (deliveries); NULL when not ours. */
struct durable *hs_nats_recv_durable(struct nats_recv *r, struct hs_str consumer);
/* A delivery for d arrived: its request may be filled. */
void hs_nats_recv_delivered(struct durable *d);
/* A status message for d's request `gen` arrived (not IDLE). */
void hs_nats_recv_status(struct durable *d, uint64_t gen, enum hs_nats_status kind);

/* ---- receiver.c, for pull.c ---- */
/* Sends "+ACK", "-NAK {...}" or "+TERM" for a delivered message. */
void hs_nats_recv_ack(struct nats_recv *r, const char *reply, const char *what);

#endif
