/* nats_spike.c: how libnats (3.4.1) fits hotspan's single-threaded libuv loop, measured against
 * a real 3-node JetStream cluster (bench/nats_spike.mjs starts it and obeys the `CMD kill|restart`
 * lines printed here): connection I/O through the libuv adapter, async publish with ack
 * callbacks marshalled to the loop, a durable pull consumer fetched on its own thread and acked
 * from the loop, and what happens when a node dies mid-run. A spike, not product code: it
 * prints what it sees (docs/nats-notes.md). Usage: nats_spike URL[,URL...] [msgs] [bytes] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uv.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <nats/adapters/libuv.h>
#pragma GCC diagnostic pop

#define STREAM "HOTSPAN_SPIKE"
#define DURABLE "hotspan-spike"
#define PARTITIONS 16
#define MAX_INFLIGHT 4000 /* ours, below libnats' MaxPending so js_PublishMsgAsync never stalls */

enum ev_kind { EV_ACK, EV_PUB_ERR, EV_MSG, EV_CONN };

struct ev {
    enum ev_kind kind;
    natsMsg *msg;
    bool dup;
    natsStatus err;
    const char *what; /* EV_CONN */
};

/* A mutex-protected queue from libnats' threads to the loop, woken by one uv_async_t. */
struct evq {
    uv_mutex_t mu;
    struct ev *v;
    size_t n, cap;
    uv_async_t async;
};

struct seen_thread {
    const char *cb;
    char where[48];
    uint64_t calls;
};

static struct spike {
    uv_loop_t *loop;
    pthread_t loop_thread;
    natsConnection *nc;
    jsCtx *js;
    struct evq q;
    uv_timer_t pub_timer, report_timer;
    int nmsgs, size;
    char *payload;
    int next;       /* next message index to publish */
    int inflight;   /* published, not yet acked or failed */
    uint8_t *acked; /* per message index */
    int acked_unique, server_dups, retries, pub_errs[64];
    bool pub_done, killed_a, killed_b;
    natsMsg **retry; /* failed publishes, resent by retry_timer with backoff */
    int nretry, retry_cap, retry_rounds;
    uint64_t backoff_ms;
    uv_timer_t retry_timer;
    double last_ack, max_ack_gap, last_consumed, max_consume_gap;
    double t_pub0, t_pub1, t_con0, t_con1;
    /* consumer */
    uv_thread_t fetch_thread;
    atomic_bool fetch_stop;
    natsSubscription *sub;
    char consumer_leader[32];
    uint8_t *consumed; /* per stream sequence: 0 none, 1 refused once, 2 acked */
    int consumed_unique, naks, left_unacked, redelivered, dup_after_ack, fetch_errs[64];
    natsStatus fetch_first_err;
    struct seen_thread threads[16];
    int nthreads;
    char connected_url[128];
} S;

static double now_s(void)
{
    return (double)uv_hrtime() / 1e9;
}

/* Where a callback runs: "loop", or the thread's name and id. Kept per callback kind. */
static void note_thread(const char *cb)
{
    char where[48];
    if (pthread_equal(pthread_self(), S.loop_thread)) {
        snprintf(where, sizeof(where), "loop");
    } else {
        char name[16] = "?";
        pthread_getname_np(pthread_self(), name, sizeof(name));
        snprintf(where, sizeof(where), "thread %s/%ld", name, (long)syscall(SYS_gettid));
    }
    uv_mutex_lock(&S.q.mu); /* any lock will do: callbacks come from several threads */
    for (int i = 0; i < S.nthreads; i++)
        if (strcmp(S.threads[i].cb, cb) == 0 && strcmp(S.threads[i].where, where) == 0) {
            S.threads[i].calls++;
            uv_mutex_unlock(&S.q.mu);
            return;
        }
    if (S.nthreads < 16) {
        S.threads[S.nthreads].cb = cb;
        snprintf(S.threads[S.nthreads].where, sizeof(S.threads[0].where), "%s", where);
        S.threads[S.nthreads++].calls = 1;
    }
    uv_mutex_unlock(&S.q.mu);
}

static void push(struct ev e)
{
    uv_mutex_lock(&S.q.mu);
    if (S.q.n == S.q.cap) {
        S.q.cap = S.q.cap ? S.q.cap * 2 : 1024;
        S.q.v = realloc(S.q.v, S.q.cap * sizeof(*S.q.v));
    }
    S.q.v[S.q.n++] = e;
    uv_mutex_unlock(&S.q.mu);
    uv_async_send(&S.q.async);
}

/* --- callbacks on libnats' threads: note the thread, hand over, return ------------------ */

static void on_pub_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
    note_thread(pa ? "jsPubAckHandler (ack)" : "jsPubAckHandler (error)");
    push((struct ev){pa ? EV_ACK : EV_PUB_ERR, msg, pa && pa->Duplicate, pae ? pae->Err : NATS_OK,
                     NULL});
}

static void on_conn_event(natsConnection *nc, void *closure)
{
    note_thread(closure);
    push((struct ev){EV_CONN, .what = closure});
}

static void on_async_err(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    note_thread("natsErrHandler");
    printf("spike: async error: %s\n", natsStatus_GetText(err));
}

/* --- the loop side -------------------------------------------------------------------- */

static int msg_index(natsMsg *m)
{
    const char *id = NULL;
    if (natsMsgHeader_Get(m, "Nats-Msg-Id", &id) != NATS_OK || !id)
        return -1;
    return atoi(id + 2); /* "m-<i>" */
}

static void start_consumer(void);

static void resend(uv_timer_t *t)
{
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 3000;
    natsMsg **v = S.retry;
    int n = S.nretry;
    S.retry = NULL;
    S.nretry = S.retry_cap = 0;
    S.retry_rounds++;
    for (int i = 0; i < n; i++) {
        natsStatus s = js_PublishMsgAsync(S.js, &v[i], &po);
        if (s == NATS_OK) {
            S.retries++;
            S.inflight++;
        } else {
            S.pub_errs[s & 63]++;
            natsMsg_Destroy(v[i]);
        }
    }
    free(v);
    S.backoff_ms = S.backoff_ms * 2 > 2000 ? 2000 : S.backoff_ms * 2;
}

static void on_pub_event(struct ev *e)
{
    int i = msg_index(e->msg);
    S.inflight--;
    if (e->kind == EV_ACK) {
        double t = now_s();
        if (S.last_ack && t - S.last_ack > S.max_ack_gap)
            S.max_ack_gap = t - S.last_ack;
        S.last_ack = t;
        S.backoff_ms = 100;
        S.server_dups += e->dup;
        if (i >= 0 && !S.acked[i]) {
            S.acked[i] = 1;
            S.acked_unique++;
        }
        natsMsg_Destroy(e->msg);
        return;
    }
    S.pub_errs[e->err & 63]++;
    /* an ack timeout is ambiguous (stored or not), no responders means the stream has no
     * leader right now: resend later, with the same Nats-Msg-Id so the stream's duplicate
     * window drops a second copy */
    if (S.nretry == S.retry_cap) {
        S.retry_cap = S.retry_cap ? 2 * S.retry_cap : 1024;
        S.retry = realloc(S.retry, (size_t)S.retry_cap * sizeof(*S.retry));
    }
    S.retry[S.nretry++] = e->msg;
    if (!uv_is_active((uv_handle_t *)&S.retry_timer))
        uv_timer_start(&S.retry_timer, resend, S.backoff_ms, 0);
}

static void on_consumed(natsMsg *m)
{
    jsMsgMetaData *meta = NULL;
    if (natsMsg_GetMetaData(&meta, m) != NATS_OK) {
        natsMsg_Destroy(m);
        return;
    }
    uint64_t seq = meta->Sequence.Stream;
    if (meta->NumDelivered > 1)
        S.redelivered++;
    if (seq >= 1 && seq <= (uint64_t)S.nmsgs) {
        uint8_t *st = &S.consumed[seq - 1];
        if (*st == 2) {
            S.dup_after_ack++;
            natsMsg_Ack(m, NULL);
        } else if (*st == 0 && seq % 97 == 0) { /* the pipeline refuses: redeliver now */
            *st = 1;
            S.naks++;
            natsMsg_Nak(m, NULL);
        } else if (*st == 0 && seq % 89 == 0) { /* lost before acking: redelivered at AckWait */
            *st = 1;
            S.left_unacked++;
        } else {
            double t = now_s();
            if (S.last_consumed && t - S.last_consumed > S.max_consume_gap)
                S.max_consume_gap = t - S.last_consumed;
            S.last_consumed = t;
            *st = 2;
            S.consumed_unique++;
            natsMsg_Ack(m, NULL); /* "the pipeline took it" */
        }
    }
    jsMsgMetaData_Destroy(meta);
    natsMsg_Destroy(m);
    if (!S.killed_b && S.consumed_unique >= S.nmsgs / 3 && S.consumer_leader[0]) {
        S.killed_b = true;
        printf("CMD kill name=%s (consumer leader, at %d of %d consumed)\n", S.consumer_leader,
               S.consumed_unique, S.nmsgs);
        fflush(stdout);
    }
}

static void on_events(uv_async_t *a)
{
    uv_mutex_lock(&S.q.mu);
    struct ev *v = S.q.v;
    size_t n = S.q.n;
    S.q.v = NULL;
    S.q.n = S.q.cap = 0;
    uv_mutex_unlock(&S.q.mu);
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind == EV_MSG)
            on_consumed(v[i].msg);
        else if (v[i].kind == EV_CONN)
            printf("spike: t=%.2fs %s\n", now_s() - S.t_pub0, v[i].what);
        else
            on_pub_event(&v[i]);
    }
    free(v);
    if (!S.pub_done && S.acked_unique == S.nmsgs) {
        S.pub_done = true;
        S.t_pub1 = now_s();
        uv_timer_stop(&S.pub_timer);
        start_consumer();
    }
}

static void publish_some(uv_timer_t *t)
{
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 3000; /* without it an ack lost with a dead node is waited for forever */
    for (int k = 0; k < 400 && S.next < S.nmsgs && S.inflight < MAX_INFLIGHT; k++) {
        int i = S.next;
        if (S.acked[i]) {
            S.next++;
            continue;
        }
        char subj[64], id[24];
        snprintf(subj, sizeof(subj), "hotspan.traces.p%02d", i % PARTITIONS);
        snprintf(id, sizeof(id), "m-%d", i);
        natsMsg *m = NULL;
        natsMsg_Create(&m, subj, NULL, S.payload, S.size);
        natsMsgHeader_Set(m, "Nats-Msg-Id", id);
        natsStatus s = js_PublishMsgAsync(S.js, &m, &po);
        natsMsg_Destroy(m); /* no-op when the library took it */
        if (s != NATS_OK) {
            S.pub_errs[s & 63]++;
            break;
        }
        S.inflight++;
        S.next++;
    }
    if (!S.killed_a && S.acked_unique >= S.nmsgs / 4) {
        S.killed_a = true;
        natsConnection_GetConnectedUrl(S.nc, S.connected_url, sizeof(S.connected_url));
        const char *port = strrchr(S.connected_url, ':');
        printf("CMD kill port=%s (the server we publish through, at %d of %d acked)\n",
               port ? port + 1 : "?", S.acked_unique, S.nmsgs);
        fflush(stdout);
    }
}

static void report(uv_timer_t *t)
{
    printf("spike: t=%.1fs published=%d acked=%d inflight=%d retries=%d | consumed=%d "
           "redelivered=%d dup_after_ack=%d\n",
           now_s() - S.t_pub0, S.next, S.acked_unique, S.inflight, S.retries, S.consumed_unique,
           S.redelivered, S.dup_after_ack);
    fflush(stdout);
}

/* --- the consumer: Fetch blocks, so it runs on its own thread ------------------------- */

static void fetch_main(void *arg)
{
    note_thread("fetch thread (ours)");
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = STREAM;
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = 2000LL * 1000 * 1000; /* ns */
    so.Config.MaxAckPending = 2000;
    so.Config.DeliverPolicy = js_DeliverAll;
    jsErrCode jerr = 0;
    natsStatus s = NATS_ERR;
    /* the consumer is created through the meta leader: while it moves, creation times out */
    for (int attempt = 1; attempt <= 20 && s != NATS_OK; attempt++) {
        double t = now_s();
        s = js_PullSubscribe(&S.sub, S.js, "hotspan.traces.>", DURABLE, NULL, &so, &jerr);
        printf("spike: t=%.2fs js_PullSubscribe attempt %d: %s (jerr %d) after %.0f ms\n",
               now_s() - S.t_pub0, attempt, natsStatus_GetText(s), (int)jerr, (now_s() - t) * 1000);
        fflush(stdout);
    }
    if (s != NATS_OK)
        return;
    jsConsumerInfo *ci = NULL;
    if (natsSubscription_GetConsumerInfo(&ci, S.sub, NULL, &jerr) == NATS_OK && ci->Cluster &&
        ci->Cluster->Leader) {
        printf("spike: consumer %s: replicas %d, leader %s, AckWait 2s, MaxAckPending 2000\n",
               DURABLE, ci->Cluster->ReplicasLen + 1, ci->Cluster->Leader);
        snprintf(S.consumer_leader, sizeof(S.consumer_leader), "%s", ci->Cluster->Leader);
    }
    jsConsumerInfo_Destroy(ci);
    while (!atomic_load(&S.fetch_stop)) {
        natsMsgList list = {0};
        s = natsSubscription_Fetch(&list, S.sub, 200, 500, &jerr);
        if (s == NATS_OK) {
            for (int i = 0; i < list.Count; i++) {
                push((struct ev){EV_MSG, list.Msgs[i]});
                list.Msgs[i] = NULL; /* ours now: natsMsgList_Destroy skips it */
            }
        } else {
            S.fetch_errs[s & 63]++;
            if (s != NATS_TIMEOUT && !S.fetch_first_err) {
                S.fetch_first_err = s;
                printf("spike: t=%.2fs first fetch error: %s (jerr %d)\n", now_s() - S.t_pub0,
                       natsStatus_GetText(s), (int)jerr);
            }
            if (s != NATS_TIMEOUT)
                usleep(100 * 1000); /* e.g. no responders while the leader moves */
        }
        natsMsgList_Destroy(&list);
    }
}

static void final_work(uv_work_t *w)
{
    atomic_store(&S.fetch_stop, true);
    uv_thread_join(&S.fetch_thread);
    jsErrCode jerr = 0;
    jsStreamInfo *si = NULL;
    natsStatus s = js_GetStreamInfo(&si, S.js, STREAM, NULL, &jerr);
    if (s == NATS_OK) {
        printf("spike: stream %s: %llu msgs (published %d distinct), leader %s, %d replicas\n",
               STREAM, (unsigned long long)si->State.Msgs, S.nmsgs,
               si->Cluster ? si->Cluster->Leader : "?",
               si->Cluster ? si->Cluster->ReplicasLen + 1 : 1);
        jsStreamInfo_Destroy(si);
    } else {
        printf("spike: js_GetStreamInfo: %s\n", natsStatus_GetText(s));
    }
    jsConsumerInfo *ci = NULL;
    if (js_GetConsumerInfo(&ci, S.js, STREAM, DURABLE, NULL, &jerr) == NATS_OK) {
        printf("spike: consumer: ack pending %lld, pending %llu, redelivered %lld, ack floor "
               "%llu\n",
               (long long)ci->NumAckPending, (unsigned long long)ci->NumPending,
               (long long)ci->NumRedelivered, (unsigned long long)ci->AckFloor.Stream);
        jsConsumerInfo_Destroy(ci);
    }
}

static void close_cb(uv_handle_t *h)
{
}

static void final_done(uv_work_t *w, int status)
{
    S.t_con1 = now_s();
    printf("spike: publish: %d msgs of %d B acked in %.2fs (%.0f msg/s) through a node kill; "
           "retries %d in %d rounds, server-side duplicates %d, longest gap between acks %.2fs\n",
           S.nmsgs, S.size, S.t_pub1 - S.t_pub0, S.nmsgs / (S.t_pub1 - S.t_pub0), S.retries,
           S.retry_rounds, S.server_dups, S.max_ack_gap);
    for (int i = 0; i < 64; i++)
        if (S.pub_errs[i])
            printf("spike: publish errors %s: %d\n", natsStatus_GetText(i), S.pub_errs[i]);
    printf("spike: consume: %d distinct acked in %.2fs (%.0f msg/s) through a node kill; naks %d, "
           "left unacked %d, redeliveries %d, duplicates after ack %d, longest gap %.2fs\n",
           S.consumed_unique, S.t_con1 - S.t_con0, S.consumed_unique / (S.t_con1 - S.t_con0),
           S.naks, S.left_unacked, S.redelivered, S.dup_after_ack, S.max_consume_gap);
    for (int i = 0; i < 64; i++)
        if (S.fetch_errs[i])
            printf("spike: fetch returned %s: %d times\n", natsStatus_GetText(i), S.fetch_errs[i]);
    for (int i = 0; i < S.nthreads; i++)
        printf("spike: thread: %-24s ran on %s (%llu calls)\n", S.threads[i].cb, S.threads[i].where,
               (unsigned long long)S.threads[i].calls);
    printf("CMD restart name=%s\n", S.consumer_leader);
    fflush(stdout);
    natsSubscription_Destroy(S.sub); /* the durable stays on the server */
    natsConnection_Close(S.nc);      /* detaches from the loop: the adapter closes its handles */
    uv_close((uv_handle_t *)&S.q.async, close_cb);
    uv_close((uv_handle_t *)&S.pub_timer, close_cb);
    uv_close((uv_handle_t *)&S.report_timer, close_cb);
    uv_close((uv_handle_t *)&S.retry_timer, close_cb);
}

static uv_work_t final_req;

static void maybe_finish(uv_timer_t *t)
{
    report(t);
    if (S.pub_done && S.consumed_unique == S.nmsgs && !final_req.data) {
        final_req.data = &S;
        uv_timer_stop(&S.report_timer);
        uv_queue_work(S.loop, &final_req, final_work, final_done);
    }
    if (now_s() - S.t_pub0 > 150) {
        printf("spike: giving up after 150 s\n");
        exit(1);
    }
}

static void start_consumer(void)
{
    printf("spike: t=%.2fs all %d acked; CMD restart port=%s\n", now_s() - S.t_pub0, S.nmsgs,
           strrchr(S.connected_url, ':') ? strrchr(S.connected_url, ':') + 1 : "?");
    printf("CMD restart port=%s\n",
           strrchr(S.connected_url, ':') ? strrchr(S.connected_url, ':') + 1 : "?");
    fflush(stdout);
    S.t_con0 = now_s();
    uv_thread_create(&S.fetch_thread, fetch_main, NULL);
}

/* --- setup: JetStream API calls block on a reply the loop must read: off the loop ------ */

static void setup_work(uv_work_t *w)
{
    note_thread("uv_queue_work (setup)");
    jsErrCode jerr = 0;
    js_DeleteStream(S.js, STREAM, NULL, &jerr);
    const char *subjects[] = {"hotspan.traces.>"};
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    cfg.Storage = js_FileStorage;
    cfg.Duplicates = 120LL * 1000 * 1000 * 1000; /* ns: the Nats-Msg-Id window */
    jsStreamInfo *si = NULL;
    double t = now_s();
    natsStatus s = js_AddStream(&si, S.js, &cfg, NULL, &jerr);
    printf("spike: js_AddStream (R3) off the loop: %s in %.0f ms\n", natsStatus_GetText(s),
           (now_s() - t) * 1000);
    jsStreamInfo_Destroy(si);
}

static void setup_done(uv_work_t *w, int status)
{
    S.t_pub0 = now_s();
    uv_timer_start(&S.pub_timer, publish_some, 0, 2);
    uv_timer_start(&S.report_timer, maybe_finish, 1000, 1000);
}

static natsStatus spike_connect(char *urls)
{
    const char *servers[8];
    int n = 0;
    for (char *u = strtok(urls, ","); u && n < 8; u = strtok(NULL, ","))
        servers[n++] = u;
    natsOptions *o = NULL;
    natsOptions_Create(&o);
    natsOptions_SetServers(o, servers, n);
    natsOptions_SetEventLoop(o, S.loop, natsLibuv_Attach, natsLibuv_Read, natsLibuv_Write,
                             natsLibuv_Detach);
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, 100);
    natsOptions_SetDisconnectedCB(o, on_conn_event, "disconnected cb");
    natsOptions_SetReconnectedCB(o, on_conn_event, "reconnected cb");
    natsOptions_SetClosedCB(o, on_conn_event, "closed cb");
    natsOptions_SetErrorHandler(o, on_async_err, NULL);
    double t = now_s();
    natsStatus s = natsConnection_Connect(&S.nc, o);
    printf("spike: natsConnection_Connect on the loop thread: %s, blocked %.1f ms\n",
           natsStatus_GetText(s), (now_s() - t) * 1000);
    natsOptions_Destroy(o);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL[,URL...] [msgs] [bytes]\n", argv[0]);
        return 2;
    }
    S.nmsgs = argc > 2 ? atoi(argv[2]) : 20000;
    S.size = argc > 3 ? atoi(argv[3]) : 1024;
    S.payload = calloc(1, (size_t)S.size);
    S.acked = calloc((size_t)S.nmsgs, 1);
    S.consumed = calloc((size_t)S.nmsgs, 1);
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the driver as they happen */
    S.loop = uv_default_loop();
    S.loop_thread = pthread_self();
    uv_mutex_init(&S.q.mu);
    uv_async_init(S.loop, &S.q.async, on_events);
    uv_timer_init(S.loop, &S.pub_timer);
    uv_timer_init(S.loop, &S.report_timer);
    uv_timer_init(S.loop, &S.retry_timer);
    S.backoff_ms = 100;
    natsLibuv_Init();
    natsLibuv_SetThreadLocalLoop(S.loop);
    printf("spike: libnats %s, libuv %s; the loop is thread %ld (main)\n", nats_GetVersion(),
           uv_version_string(), (long)syscall(SYS_gettid));
    if (spike_connect(argv[1]) != NATS_OK)
        return 1;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = 2 * MAX_INFLIGHT;
    jo.PublishAsync.AckHandler = on_pub_ack;
    natsConnection_JetStream(&S.js, S.nc, &jo);

    /* the probe: a JetStream API request made on the loop thread, the loop not running */
    jsOptions wait1s;
    jsOptions_Init(&wait1s);
    wait1s.Wait = 1000;
    jsAccountInfo *ai = NULL;
    jsErrCode jerr = 0;
    double t = now_s();
    natsStatus s = js_GetAccountInfo(&ai, S.js, &wait1s, &jerr);
    printf("spike: js_GetAccountInfo on the loop thread: %s after %.0f ms\n", natsStatus_GetText(s),
           (now_s() - t) * 1000);
    jsAccountInfo_Destroy(ai);

    static uv_work_t setup_req;
    uv_queue_work(S.loop, &setup_req, setup_work, setup_done);
    uv_run(S.loop, UV_RUN_DEFAULT);
    jsCtx_Destroy(S.js);
    natsConnection_Destroy(S.nc);
    nats_Close();
    printf("spike: closed; uv_loop_close %s\n", uv_loop_close(S.loop) == 0 ? "ok" : "busy");
    free(S.payload);
    free(S.acked);
    free(S.consumed);
    return 0;
}
