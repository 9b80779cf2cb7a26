/* sender.h: the sending queue of the exporter helper (exporter.h): a bounded queue, in memory
 * or on disk (crash-safe, `storage`), a fixed number of requests in flight over a transport
 * (HTTP unless the exporter brings one), retries with backoff and jitter honouring Retry-After,
 * and the permanent/transient split of wire.md §2 and style.md §5. */
#ifndef HS_SENDER_H
#define HS_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/http_client.h"

struct hs_sender;
struct hs_metrics;

/* `sending_queue`: a section of the exporter helper's shared rows (hs_exporter_fields,
 * exporter.h), decoded with .sub = hs_sender_queue_fields. */
struct hs_sender_queue_config {
    bool enabled;
    uint32_t num_consumers;
    uint32_t queue_size;
    uint64_t queue_bytes;
    char *storage; /* a directory: the queue is kept there (queue_store.h); NULL: in memory */
};

/* `retry_on_failure`, likewise with .sub = hs_sender_retry_fields. */
struct hs_sender_retry_config {
    bool enabled;
    uint64_t initial_interval_ms;
    double randomization_factor;
    double multiplier;
    uint64_t max_interval_ms;
    uint64_t max_elapsed_ms;
};

extern const struct hs_config_field hs_sender_queue_fields[];
extern const struct hs_config_field hs_sender_retry_fields[];

/* Extra "Name: value" lines one request may carry beyond the exporter's fixed headers. */
#define HS_SENDER_EXTRA_HEADERS 4

/* One HTTP request, filled by the encode hook. The sender owns it: it frees url_buf, body_buf
 * and extra after the request is settled (sent, dropped or given up on). */
struct hs_sender_request {
    const char *url;            /* the exporter's, or url_buf's data */
    struct hs_buf url_buf;      /* a URL built per request (e.g. /ingest's query) */
    const char *const *headers; /* the exporter's fixed lines, borrowed for its lifetime */
    size_t header_count;
    char *extra[HS_SENDER_EXTRA_HEADERS]; /* per request, owned: see hs_sender_request_header */
    size_t extra_count;
    const uint8_t *body; /* body_buf's data, or bytes the item owns */
    size_t body_len;
    struct hs_buf body_buf;
    /* Sent before body, which then goes out from where it lies instead of being copied behind
     * these bytes (gRPC's message prefix in front of the batch's own bytes). Sent once per
     * attempt; with storage the record holds prefix and body joined, as one body. */
    uint8_t prefix[HS_HTTP_CLIENT_PREFIX_MAX];
    uint8_t prefix_len;
    /* Spans or profiles this request carries: what is counted sent or failed. Set it before
     * anything can fail, so a failed encode is counted right. */
    uint32_t count;
};

/* Adds a per-request header line. Returns 0, HS_ENOMEM, or HS_E2BIG past
 * HS_SENDER_EXTRA_HEADERS. */
int hs_sender_request_header(struct hs_sender_request *r, const char *name, const char *value);

/* With `storage`, hs_sender_submit encodes every part of an item at once and writes the
 * requests to disk (url, body, the lines describing the body: Content-Type, Content-Encoding,
 * grpc-encoding; the per-request lines; count) before it returns; the item is released then.
 * Those records are what is sent, now or after a restart, so the hooks below see item == NULL
 * after encode. The other fixed lines (authorization, tenant, user agent) come from
 * hs_sender_options.headers at send time, so a rotated token applies to what was queued before
 * the restart; a URL that starts with hs_sender_options.url is stored relative to it, so a
 * changed endpoint applies too. */
struct hs_sender_hooks {
    /* Fills req for part `part` (0 .. parts-1) of item; req starts zeroed. Returns 0, or a
     * code: the part is then dropped ("encode_failed", or "out_of_memory") and the next tried. */
    int (*encode)(void *ud, void *item, uint32_t part, struct hs_sender_request *req);
    /* The item is settled: every part sent, dropped or given up on. Also called for items still
     * queued when the sender is freed, and for items refused by hs_sender_submit. With storage,
     * called inside hs_sender_submit, once the item is written (or refused). */
    void (*release)(void *ud, void *item);
    /* Optional: a 2xx answer (item is NULL with storage). Returns how many of req->count the
     * backend rejected (OTLP partial success); they are counted failed and dropped as
     * "rejected_by_backend". */
    uint32_t (*on_success)(void *ud, void *item, const struct hs_sender_request *req,
                           const struct hs_http_result *res);
    /* Optional: what a response means when its HTTP status does not say it all (gRPC answers
     * 200 and puts its status in the trailers). Returns an hs_sender_verdict, or 0 for the
     * default (2xx sent; no answer, 429, 502-504 retried; the rest permanent). May set
     * res->retry_after_ms (a server's RetryInfo) and res->error (the text logged). */
    int (*classify)(void *ud, const struct hs_sender_request *req, struct hs_http_result *res);
};

enum hs_sender_verdict { HS_SENDER_SENT = 1, HS_SENDER_RETRY, HS_SENDER_PERMANENT };

struct hs_sender_options;

/* How a request travels. The default (hs_sender_options.transport NULL) is an HTTP POST through
 * core/http_client.h; an exporter with another wire brings its own, e.g. a NATS publish whose
 * JetStream ack is the answer (url: the subject; lines: message headers). An answer is an
 * hs_http_result whatever the wire: status 2xx is sent, 0 (no answer, see error) and the
 * statuses of the default classification are retried or permanent. */
struct hs_sender_transport {
    /* From hs_sender_start: opens what requests need (a client, a connection); opt is the
     * sender's (opt->transport_ud is the exporter's). Returns 0 or a code, and *conn. */
    int (*open)(const struct hs_sender_options *opt, uv_loop_t *loop, void **conn);
    /* Sends req (url, prefix, body) with `lines`, its fixed and per-request header lines joined
     * (borrowed, as req, until done). done(done_ud, res) fires exactly once, later, from the
     * loop, also when the transport is closed. Returns 0, or a code when the request could not
     * start: done is then not called. */
    int (*send)(void *conn, const struct hs_sender_request *req, const char *const *lines,
                size_t nlines, uint64_t timeout_ms, hs_http_done_cb done, void *done_ud);
    /* Ends what is in flight (their done fires) and closes; closed(ud) once nothing of the
     * transport is left in the loop. */
    void (*close)(void *conn, void (*closed)(void *ud), void *ud);
};

struct hs_sender_options {
    const char *id;    /* the exporter's id, for logs and metric labels; borrowed */
    const char *items; /* "spans" or "profiles": metric names and log lines */
    unsigned signal;   /* HS_SIGNAL_TRACES or HS_SIGNAL_PROFILES: counter names */
    const struct hs_sender_queue_config *queue;  /* borrowed for the sender's lifetime */
    const struct hs_sender_retry_config *retry;  /* borrowed */
    uint64_t timeout_ms;                         /* of one request */
    const struct hs_sender_transport *transport; /* NULL: HTTP (client_flags, tls) */
    void *transport_ud;                          /* for a transport of the exporter's */
    /* HTTP only: hs_http_client_new_flags (HS_HTTP_CLIENT_H2_PRIOR_KNOWLEDGE), and the https://
     * TLS files (core/tls.h; borrowed, may be NULL) */
    unsigned client_flags;
    const struct hs_tls_client *tls;
    /* With storage: the exporter's base URL and fixed "Name: value" lines, borrowed for the
     * sender's lifetime (see above). */
    const char *url;
    const char *const *headers;
    size_t header_count;
    struct hs_sender_hooks hooks;
    void *ud; /* given to the hooks */
    /* Optional, for one of several senders under one exporter id (load_balancing: one per
     * backend and signal; both borrowed): `name` is what logs and /healthz say and what the store
     * file is named by (NULL: the id), `labels` follow exporter="<id>" on every metric (e.g.
     * backend="10.0.0.7",signal="traces"). */
    const char *name;
    const char *labels;
};

/* Allocates a sender; no I/O (call from create). Never fails (small control structures). */
struct hs_sender *hs_sender_new(const struct hs_sender_options *opt);
/* Opens the transport and timers, registers the counters and the queue gauges; with storage,
 * opens the store and queues what it holds ahead of anything new (restart resumes). Items
 * submitted before start wait in the queue (with storage they are refused: no store yet).
 * Returns 0, HS_ENOMEM, or HS_EIO when the store cannot be opened (logged). */
int hs_sender_start(struct hs_sender *s, uv_loop_t *loop, struct hs_metrics *m);
/* Would an item be accepted now? False once shutting down. */
bool hs_sender_ready(const struct hs_sender *s);
/* Queues item (taken, on success and on error alike: refused items are released at once).
 * `bytes` is counted against queue_bytes (with storage, the record's size on disk is counted
 * instead), `count` (spans or profiles) is what the counters see, `parts` is how many requests
 * the item makes (1, or one per profile for /ingest; at least 1). With storage, 0 means the
 * item is on disk. Returns 0, or HS_EAGAIN when the queue is full, shutting down, or the store
 * cannot write (counted as exporter_enqueue_failed_<items>_total). */
int hs_sender_submit(struct hs_sender *s, void *item, size_t bytes, uint32_t count, uint32_t parts);
/* hs_sender_submit with a routing key kept beside the item (with storage: in its record), handed
 * back by hs_sender_evict (load_balancing: the key's new owner takes it). */
int hs_sender_submit_keyed(struct hs_sender *s, void *item, size_t bytes, uint32_t count,
                           uint32_t parts, uint64_t key);
/* Would `n` more items be taken now? As hs_sender_ready, with room for n entries: one batch
 * split over several queues is taken by all of them or refused by all. */
bool hs_sender_room(const struct hs_sender *s, uint32_t n);

/* Items held: queued, in flight, waiting to retry. */
uint32_t hs_sender_held(const struct hs_sender *s);

/* ---- moving items between senders (load_balancing: a backend that left the resolver's answer
 * hands its queue to the keys' new owners) ---- */

/* An item taken out of a sender. */
struct hs_sender_moved {
    void *item;         /* in memory: the item (the taker owns it); NULL with storage */
    const uint8_t *rec; /* with storage: the record's bytes, borrowed during the call */
    size_t rec_len;
    size_t bytes;        /* as counted against queue_bytes */
    uint32_t count;      /* items (spans, profiles) in the parts not yet settled */
    uint32_t parts;      /* requests of the item */
    uint32_t first_part; /* the first not yet settled (an /ingest item cut short) */
    uint64_t key;        /* as given to hs_sender_submit_keyed */
    /* Set by the taker when it could not take the item (its store cannot write): with storage
     * the record then stays in this sender's file, for the next start; in memory the item is
     * dropped and counted ("not_rerouted"). */
    bool kept;
};
typedef void (*hs_sender_move_fn)(void *ud, struct hs_sender_moved *m);

/* Takes everything out of the sender for good: every queued item, and every one waiting to be
 * retried, is handed to fn now; one in flight when its attempt fails (a success settles it as
 * usual; an /ingest item's remaining parts are handed on once its current part is answered).
 * With storage a handed record is deleted from this sender's store after fn returns, unless
 * kept. From then on the sender takes nothing; shut it down next: its done fires once the last
 * attempt in flight has ended, and with storage its file is removed when no record is left. */
void hs_sender_evict(struct hs_sender *s, hs_sender_move_fn fn, void *ud);
/* Queues an item another sender handed over (m->item is taken), beyond the capacity: it was
 * acknowledged upstream, so it is never refused for room. With storage the record is written to
 * this sender's store first. Returns 0, or HS_EAGAIN when the store cannot write or the sender
 * has finished or is evicting (the caller then sets m->kept). */
int hs_sender_adopt(struct hs_sender *s, struct hs_sender_moved *m);
/* Stops accepting; calls done(ud) once every held item is settled and every handle closed.
 * With storage it does not wait for the queue to drain: requests in flight are let finish
 * (one attempt each), the rest stays on disk for the next start. Safe before start (done at
 * once) and twice (the second call does nothing). */
void hs_sender_shutdown(struct hs_sender *s, void (*done)(void *ud), void *ud);
/* Frees the sender, releasing what it still holds. Only before start or after done. */
void hs_sender_free(struct hs_sender *s);

#endif
