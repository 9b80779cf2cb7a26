/* publish.c: the `nats` exporter's transport for the sending queue (sender.h): a request is a
 * JetStream publish whose reply subject is our inbox (<inbox>.<t|p><seq>), and its answer the
 * stream's ack, read on the loop: 200 when stored (or already stored: a duplicate), the
 * stream's error code otherwise (503: no leader, a full stream; 400: refused for good), and no
 * answer (status 0) when none came within the timeout. We publish with our own reply subject
 * rather than js_PublishMsgAsync so the timeout runs on the loop and libnats holds nothing of a
 * request between the publish and its ack (docs/scale-out.md). */
#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/metrics.h"
#include "nats_int.h"

struct pending {
    struct pending *prev, *next;
    uint64_t seq;
    uint64_t deadline_ms;
    int status;      /* an answer known at send time (the publish failed), else 0 */
    char error[160]; /* its text, or the timeout's */
    hs_http_done_cb done;
    void *done_ud;
};

static void unlink_pending(struct nats_sig *sg, struct pending *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        sg->head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        sg->tail = p->prev;
    p->prev = p->next = NULL;
}

static void on_timer(uv_timer_t *t);

static void arm(struct nats_sig *sg)
{
    uint64_t first = UINT64_MAX;
    for (struct pending *p = sg->head; p; p = p->next)
        first = HS_MIN(first, p->deadline_ms);
    if (first == UINT64_MAX) {
        uv_timer_stop(&sg->timer);
        return;
    }
    uint64_t now = hs_now_ms();
    uv_timer_start(&sg->timer, on_timer, first > now ? first - now : 0, 0);
}

/* Answers p (unlinked) and frees it. done may send again: callers hold no list cursor. */
static void answer(struct pending *p, int status, const char *error)
{
    struct hs_http_result res = {.status = status, .error = error};
    p->done(p->done_ud, &res);
    free(p);
}

/* Fails every request whose deadline has passed (or that failed at send time). */
static void on_timer(uv_timer_t *t)
{
    struct nats_sig *sg = t->data;
    uint64_t now = hs_now_ms();
    struct pending *due = NULL;
    for (struct pending *p = sg->head, *next; p; p = next) {
        next = p->next;
        if (p->deadline_ms > now)
            continue;
        unlink_pending(sg, p);
        p->next = due;
        due = p;
    }
    arm(sg);
    while (due) {
        struct pending *p = due;
        due = p->next;
        answer(p, p->status, p->error);
    }
}

/* ---- the transport ---------------------------------------------------------------------- */

static int pub_open(const struct hs_sender_options *opt, uv_loop_t *loop, void **conn)
{
    struct nats_sig *sg = opt->transport_ud;
    uv_timer_init(loop, &sg->timer);
    sg->timer.data = sg;
    sg->open = true;
    *conn = sg;
    return 0;
}

static int pub_send(void *conn, const struct hs_sender_request *req, const char *const *lines,
                    size_t nlines, uint64_t timeout_ms, hs_http_done_cb done, void *done_ud)
{
    struct nats_sig *sg = conn;
    struct nats_exp *e = sg->e;
    struct pending *p = calloc(1, sizeof(*p));
    if (!p)
        return HS_ENOMEM;
    p->seq = ++e->reply_seq;
    p->done = done;
    p->done_ud = done_ud;
    char reply[96];
    snprintf(reply, sizeof(reply), "%s.%c%llu", hs_nats_inbox(e->nc), sg->kind,
             (unsigned long long)p->seq);
    const char *why = NULL;
    int rc = sg->closing ? HS_ECANCELED
                         : hs_nats_publish(e->nc, req->url, reply, lines, nlines, req->body,
                                           req->body_len, &why);
    p->deadline_ms = hs_now_ms() + (rc == 0 ? timeout_ms : 0);
    if (rc == HS_E2BIG) { /* permanent: the same bytes never fit */
        p->status = 413;
        snprintf(p->error, sizeof(p->error),
                 "message of %zu bytes exceeds the server's max_payload (%lld bytes): raise "
                 "max_payload in nats-server's config",
                 req->body_len, (long long)hs_nats_max_payload(e->nc));
    } else if (rc != 0) {
        snprintf(p->error, sizeof(p->error), "publish to %s: %s", req->url,
                 why ? why : hs_strerror(rc));
    } else {
        snprintf(p->error, sizeof(p->error), "no JetStream ack within %llu ms",
                 (unsigned long long)timeout_ms);
    }
    p->prev = sg->tail;
    if (sg->tail)
        sg->tail->next = p;
    else
        sg->head = p;
    sg->tail = p;
    arm(sg);
    return 0;
}

static void timer_closed(uv_handle_t *h)
{
    struct nats_sig *sg = h->data;
    sg->open = false;
    while (sg->head) { /* what is left in flight ends now, as the sender asked */
        struct pending *p = sg->head;
        unlink_pending(sg, p);
        answer(p, 0, "transport closed");
    }
    sg->closed(sg->closed_ud);
}

static void pub_close(void *conn, void (*closed)(void *ud), void *ud)
{
    struct nats_sig *sg = conn;
    sg->closing = true;
    sg->closed = closed;
    sg->closed_ud = ud;
    uv_close((uv_handle_t *)&sg->timer, timer_closed);
}

const struct hs_sender_transport hs_nats_exp_transport = {
    .open = pub_open,
    .send = pub_send,
    .close = pub_close,
};

/* ---- acks -------------------------------------------------------------------------------- */

/* What the ack says: 200, or the stream's error code (status 0 when unreadable). */
static int ack_status(struct nats_exp *e, natsMsg *msg, char *error, size_t errlen)
{
    const char *st = NULL;
    if (natsMsgHeader_Get(msg, "Status", &st) == NATS_OK && st) {
        const char *desc = NULL;
        natsMsgHeader_Get(msg, "Description", &desc);
        /* 503 with no body: no responders, the stream has no leader right now */
        snprintf(error, errlen, "NATS status %s%s%s", st, desc ? " " : "", desc ? desc : "");
        int code = atoi(st);
        return code == 503 ? 503 : code >= 400 ? 503 : 0;
    }
    json_error_t jerr;
    json_t *root = json_loadb(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), 0, &jerr);
    json_t *err = json_object_get(root, "error");
    int status = 200;
    if (json_is_object(err)) {
        json_int_t code = json_integer_value(json_object_get(err, "code"));
        const char *d = json_string_value(json_object_get(err, "description"));
        snprintf(error, errlen, "JetStream: %s (code %lld, err_code %lld)", d ? d : "error",
                 (long long)code, (long long)json_integer_value(json_object_get(err, "err_code")));
        status = code >= 400 && code < 600 ? (int)code : 503;
    } else if (!json_is_object(root) || !json_is_integer(json_object_get(root, "seq"))) {
        snprintf(error, errlen, "unreadable JetStream ack");
        status = 0;
    } else if (json_is_true(json_object_get(root, "duplicate"))) {
        hs_counter_add(e->duplicates, 1);
    }
    json_decref(root);
    return status;
}

void hs_nats_exp_on_ack(struct nats_exp *e, natsMsg *msg)
{
    const char *subj = natsMsg_GetSubject(msg), *inbox = hs_nats_inbox(e->nc);
    size_t n = strlen(inbox);
    struct nats_sig *sg = NULL;
    uint64_t seq = 0;
    if (strncmp(subj, inbox, n) == 0 && subj[n] == '.') {
        char kind = subj[n + 1];
        sg = kind == 't' ? &e->sig[0] : kind == 'p' ? &e->sig[1] : NULL;
        seq = strtoull(subj + n + 2, NULL, 10);
    }
    struct pending *p = NULL;
    for (p = sg && sg->open ? sg->head : NULL; p && p->seq != seq; p = p->next)
        ;
    if (!p) { /* an ack after its timeout: the retry decides, the stream dedupes */
        natsMsg_Destroy(msg);
        return;
    }
    char error[200] = "";
    int status = ack_status(e, msg, error, sizeof(error));
    natsMsg_Destroy(msg);
    unlink_pending(sg, p);
    arm(sg);
    answer(p, status, status == 200 ? NULL : error);
}
