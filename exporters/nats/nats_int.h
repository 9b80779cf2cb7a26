/* nats_int.h: the `nats` exporter's insides, shared by its files: exporter.c (config, the
 * component, batches cut by partition into queue items), publish.c (the sending queue's
 * transport: a JetStream publish whose ack is the answer) and stream.c (the stream made or
 * checked at start). Nothing else includes it. */
#ifndef HS_NATS_EXP_INT_H
#define HS_NATS_EXP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/component.h"
#include "core/log.h"
#include "net/nats.h"
#include "exporters/helper/exporter.h"
#include "exporters/helper/sender.h"

struct nats_stream_config {
    char *name;
    bool create;
    uint32_t replicas;
    char *retention; /* limits | workqueue */
    char *storage;   /* file | memory */
    uint64_t max_age_ms;
    uint64_t max_bytes;
    char *discard; /* new | old */
    uint64_t duplicate_window_ms;
};

struct nats_exp_config {
    struct hs_nats_config nats;
    struct nats_stream_config stream;
    char *subject_prefix;
    uint32_t partitions;
    uint64_t max_message_size;
    struct hs_exporter_config common; /* timeout, sending_queue, retry_on_failure */
};

struct nats_exp;
struct pending;

/* One message: a partition's spans, or a range of a partition's profiles. */
struct nats_part {
    void *batch; /* struct hs_traces or struct hs_profiles: a reference the item holds */
    uint32_t partition;
    uint32_t items; /* spans, or profiles from `first` on */
    uint32_t first; /* profiles: the batch's first profile in this message */
};

/* A batch as the queue holds it: its messages. */
struct nats_item {
    unsigned signal;
    uint32_t n, cap;
    struct nats_part *parts;
};

/* One signal's sending queue and its transport's requests in flight. */
struct nats_sig {
    struct nats_exp *e;
    unsigned signal; /* HS_SIGNAL_TRACES or HS_SIGNAL_PROFILES */
    char kind;       /* 't' or 'p': the reply subject says whose ack it is */
    struct hs_sender *sender;
    char name[160];  /* "<id>/spans": logs, /healthz, the store file */
    char labels[40]; /* signal="traces" */
    char *lines[2];  /* the fixed header lines: Content-Type, Hotspan-Signal */
    /* the transport's (publish.c) */
    struct pending *head, *tail; /* in flight, oldest first */
    uv_timer_t timer;            /* the earliest deadline */
    bool open, closing;
    void (*closed)(void *ud);
    void *closed_ud;
};

struct nats_exp {
    struct hs_component base;
    struct nats_exp_config conf;
    struct hs_tls_client *tls;
    struct hs_nats *nc;
    struct nats_sig sig[2]; /* [0] traces, [1] profiles */
    struct hs_ring *ring;   /* the splitter's: one name, only the keys matter here */
    char msg_id_base[20];   /* random per process: Nats-Msg-Id = <base>-<seq> */
    uint64_t msg_seq, reply_seq;
    struct hs_counter *duplicates;
    struct hs_ratelimit log_rl;
    /* stream.c */
    uv_timer_t stream_timer;
    uint64_t stream_backoff_ms;
    bool stream_busy, stream_ok;
    void (*stream_closed)(struct nats_exp *e);
    char stream_note[512]; /* what an existing stream does differently from the config */
    /* lifecycle */
    bool started, closing;
    unsigned pending_done; /* senders, the stream timer and the connection still closing */
    hs_done_cb done;
};

/* ---- publish.c ---- */
extern const struct hs_sender_transport hs_nats_exp_transport;
/* An inbox message: the JetStream ack of one of our publishes (taken). */
void hs_nats_exp_on_ack(struct nats_exp *e, natsMsg *msg);

/* ---- cut.c ---- */
void hs_nats_exp_item_add(struct nats_item *it, struct nats_part p);
/* Adds p (taken) to it as one message, or as several of at most `limit` bytes; a span or profile
 * that alone exceeds it is dropped and counted. Returns 0 or HS_ENOMEM. */
int hs_nats_exp_cut(struct nats_exp *e, unsigned signal, struct nats_part p, size_t limit,
                    struct nats_item *it);

/* ---- stream.c ---- */
/* Finds the stream, or makes it (stream.create), on the thread pool; retried with backoff until
 * it answers. */
void hs_nats_exp_stream_start(struct nats_exp *e);
/* Stops retrying; closed(e) once the timer is closed. */
void hs_nats_exp_stream_stop(struct nats_exp *e, void (*closed)(struct nats_exp *e));

#endif
