/* stream.c: the `nats` exporter's stream, found or made at start (stream.create) on the thread
 * pool, as JetStream API calls wait for their reply; retried with backoff while the cluster
 * cannot answer (no meta leader during a failover). An existing stream is used as it is and
 * what it does differently from the config is logged, since changing a live stream's retention
 * or replicas is an operator's decision. Publishing does not wait for this: a publish to a
 * stream that does not exist yet fails with no responders and is retried by the queue. */
#include <nats/nats.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "core/log.h"
#include "nats_int.h"
#include "pdata/bus.h"

#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 30000
#define NS_PER_MS 1000000LL

static void fill_config(const struct nats_exp *e, jsStreamConfig *cfg, const char **subjects)
{
    const struct nats_stream_config *c = &e->conf.stream;
    jsStreamConfig_Init(cfg);
    cfg->Name = c->name;
    cfg->Subjects = subjects;
    cfg->SubjectsLen = 1;
    cfg->Retention = strcmp(c->retention, "workqueue") == 0 ? js_WorkQueuePolicy : js_LimitsPolicy;
    cfg->Storage = strcmp(c->storage, "memory") == 0 ? js_MemoryStorage : js_FileStorage;
    cfg->Replicas = c->replicas;
    cfg->MaxAge = (int64_t)c->max_age_ms * NS_PER_MS;
    cfg->MaxBytes = c->max_bytes ? (int64_t)c->max_bytes : -1;
    cfg->Discard = strcmp(c->discard, "old") == 0 ? js_DiscardOld : js_DiscardNew;
    cfg->Duplicates = (int64_t)c->duplicate_window_ms * NS_PER_MS;
}

static void note(char *out, size_t cap, const char *fmt, long long have, long long want)
{
    size_t n = strlen(out);
    if (n + 2 < cap)
        snprintf(out + n, cap - n, fmt, have, want);
}

/* What the existing stream does differently from our config, for the log. */
static void compare(const struct nats_exp *e, const jsStreamConfig *have,
                    const jsStreamConfig *want, char *out, size_t cap)
{
    char subj[HS_BUS_SUBJECT_MAX + 8];
    snprintf(subj, sizeof(subj), "%s.>", e->conf.subject_prefix);
    bool covered = false;
    for (int i = 0; i < have->SubjectsLen; i++)
        covered |= strcmp(have->Subjects[i], subj) == 0 || strcmp(have->Subjects[i], ">") == 0;
    out[0] = '\0';
    if (!covered)
        snprintf(out, cap, "; it may not capture %s (publishes then fail: no responders)", subj);
    if (have->Replicas != want->Replicas)
        note(out, cap, "; replicas %lld, not %lld", have->Replicas, want->Replicas);
    if (have->Retention != want->Retention)
        note(out, cap, "; retention %lld, not %lld (0 limits, 2 workqueue)", have->Retention,
             want->Retention);
    if (have->Duplicates != want->Duplicates)
        note(out, cap, "; duplicate_window %lld ms, not %lld ms", have->Duplicates / NS_PER_MS,
             want->Duplicates / NS_PER_MS);
    if (have->MaxBytes != want->MaxBytes)
        note(out, cap, "; max_bytes %lld, not %lld", have->MaxBytes, want->MaxBytes);
    if (have->Discard != want->Discard)
        note(out, cap, "; discard %lld, not %lld (0 old, 1 new)", have->Discard, want->Discard);
}

/* On a pool thread. */
static int ensure(jsCtx *js, void *arg, char *err, size_t errlen)
{
    struct nats_exp *e = arg;
    char subj[HS_BUS_SUBJECT_MAX + 8];
    snprintf(subj, sizeof(subj), "%s.>", e->conf.subject_prefix);
    const char *subjects[1] = {subj};
    jsStreamConfig want;
    fill_config(e, &want, subjects);
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, e->conf.stream.name, NULL, &jerr);
    e->stream_note[0] = '\0';
    if (s == NATS_OK) {
        compare(e, si->Config, &want, e->stream_note, sizeof(e->stream_note));
        jsStreamInfo_Destroy(si);
        return 0;
    }
    if (s != NATS_NOT_FOUND && jerr != JSStreamNotFoundErr) {
        snprintf(err, errlen, "stream %s: %s", e->conf.stream.name, natsStatus_GetText(s));
        return HS_EIO;
    }
    if (!e->conf.stream.create) {
        snprintf(err, errlen, "stream %s does not exist (stream.create is false)",
                 e->conf.stream.name);
        return HS_ENOENT;
    }
    s = js_AddStream(&si, js, &want, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    if (s == NATS_OK) {
        snprintf(e->stream_note, sizeof(e->stream_note), "created");
        return 0;
    }
    natsStatus st;
    const char *text = nats_GetLastError(&st);
    snprintf(err, errlen, "cannot create stream %s: %s (err_code %d)", e->conf.stream.name,
             text && text[0] ? text : natsStatus_GetText(s), (int)jerr);
    return HS_EIO;
}

static void on_timer(uv_timer_t *t);

static void ensure_done(void *arg, int rc, const char *err)
{
    struct nats_exp *e = arg;
    e->stream_busy = false;
    if (e->closing)
        return;
    const struct nats_stream_config *c = &e->conf.stream;
    if (rc == 0) {
        e->stream_ok = true;
        if (strcmp(e->stream_note, "created") == 0)
            hs_log_info(e->base.id, "stream %s created: %s.>, %u replicas, %s retention, %s",
                        c->name, e->conf.subject_prefix, c->replicas, c->retention, c->storage);
        else if (e->stream_note[0])
            hs_log_warn(e->base.id, "stream %s exists and is used as it is%s", c->name,
                        e->stream_note);
        else
            hs_log_info(e->base.id, "stream %s found, as configured", c->name);
        return;
    }
    uint32_t suppressed;
    if (hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed))
        hs_log_warn(e->base.id, "%s: retrying in %llu ms (%u similar messages suppressed)",
                    rc == HS_ECANCELED ? "stream setup cancelled" : err,
                    (unsigned long long)e->stream_backoff_ms, suppressed);
    uv_timer_start(&e->stream_timer, on_timer, e->stream_backoff_ms, 0);
    e->stream_backoff_ms = HS_MIN(e->stream_backoff_ms * 2, BACKOFF_MAX_MS);
}

static void on_timer(uv_timer_t *t)
{
    hs_nats_exp_stream_start(t->data);
}

void hs_nats_exp_stream_start(struct nats_exp *e)
{
    if (e->closing || e->stream_ok || e->stream_busy ||
        uv_is_active((uv_handle_t *)&e->stream_timer))
        return;
    if (!e->stream_backoff_ms)
        e->stream_backoff_ms = BACKOFF_FIRST_MS;
    if (hs_nats_js_call(e->nc, ensure, ensure_done, e) == 0)
        e->stream_busy = true;
    /* else not connected yet: on_state starts it once the connection is there */
}

static void timer_closed(uv_handle_t *h)
{
    struct nats_exp *e = h->data;
    e->stream_closed(e);
}

void hs_nats_exp_stream_stop(struct nats_exp *e, void (*closed)(struct nats_exp *e))
{
    e->stream_closed = closed;
    uv_close((uv_handle_t *)&e->stream_timer, timer_closed);
}
