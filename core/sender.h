/* sender.h: the sending queue every network exporter shares (otelcol's exporterhelper): a
 * bounded in-memory queue, a fixed number of requests in flight, retries with backoff and jitter
 * honouring Retry-After, and the permanent/transient split of wire.md §2 and style.md §5. */
#ifndef HS_SENDER_H
#define HS_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "buf.h"
#include "config.h"
#include "http_client.h"

struct hs_sender;
struct hs_metrics;

/* `sending_queue`: embed in the exporter's config struct as an HS_CFG_SECTION with
 * .sub = hs_sender_queue_fields. */
struct hs_sender_queue_config {
    bool enabled;
    uint32_t num_consumers;
    uint32_t queue_size;
    uint64_t queue_bytes;
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
    /* Spans or profiles this request carries: what is counted sent or failed. Set it before
     * anything can fail, so a failed encode is counted right. */
    uint32_t count;
};

/* Adds a per-request header line. Returns 0, HS_ENOMEM, or HS_E2BIG past
 * HS_SENDER_EXTRA_HEADERS. */
int hs_sender_request_header(struct hs_sender_request *r, const char *name, const char *value);

struct hs_sender_hooks {
    /* Fills req for part `part` (0 .. parts-1) of item; req starts zeroed. Returns 0, or a
     * code: the part is then dropped ("encode_failed", or "out_of_memory") and the next tried. */
    int (*encode)(void *ud, void *item, uint32_t part, struct hs_sender_request *req);
    /* The item is settled: every part sent, dropped or given up on. Also called for items still
     * queued when the sender is freed, and for items refused by hs_sender_submit. */
    void (*release)(void *ud, void *item);
    /* Optional: a 2xx answer. Returns how many of req->count the backend rejected (OTLP
     * partial success); they are counted failed and dropped as "rejected_by_backend". */
    uint32_t (*on_success)(void *ud, void *item, const struct hs_sender_request *req,
                           const struct hs_http_result *res);
};

struct hs_sender_options {
    const char *id;    /* the exporter's id, for logs and metric labels; borrowed */
    const char *items; /* "spans" or "profiles": metric names and log lines */
    unsigned signal;   /* HS_SIGNAL_TRACES or HS_SIGNAL_PROFILES: counter names */
    const struct hs_sender_queue_config *queue; /* borrowed for the sender's lifetime */
    const struct hs_sender_retry_config *retry; /* borrowed */
    uint64_t timeout_ms;                        /* of one request */
    struct hs_sender_hooks hooks;
    void *ud; /* given to the hooks */
};

/* Allocates a sender; no I/O (call from create). Never fails (small control structures). */
struct hs_sender *hs_sender_new(const struct hs_sender_options *opt);
/* Opens the HTTP client and timers, registers the counters and the queue gauges. Items
 * submitted before start wait in the queue. Returns 0 or HS_ENOMEM. */
int hs_sender_start(struct hs_sender *s, uv_loop_t *loop, struct hs_metrics *m);
/* Would an item be accepted now? False once shutting down. */
bool hs_sender_ready(const struct hs_sender *s);
/* Queues item (taken, on success and on error alike: refused items are released at once).
 * `bytes` is counted against queue_bytes, `count` (spans or profiles) is what the counters
 * see, `parts` is how many requests the item makes (1, or one per profile for /ingest; at least
 * 1). Returns 0, or HS_EAGAIN when the queue is full or shutting down (counted as
 * exporter_enqueue_failed_<items>_total). */
int hs_sender_submit(struct hs_sender *s, void *item, size_t bytes, uint32_t count, uint32_t parts);
/* Stops accepting; calls done(ud) once every held item is settled and every handle closed.
 * Safe before start (done at once) and twice (the second call does nothing). */
void hs_sender_shutdown(struct hs_sender *s, void (*done)(void *ud), void *ud);
/* Frees the sender, releasing what it still holds. Only before start or after done. */
void hs_sender_free(struct hs_sender *s);

#endif
