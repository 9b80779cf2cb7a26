/* cut.c: the `nats` exporter's messages kept under the server's max_payload. A partition's
 * batch that would not fit one message is cut into several of whole spans (a new batch per
 * piece, through hs_traces_edit, resources and scopes kept) or of whole profiles (ranges of the
 * same batch, no copy). A receiver rebuilds each piece as a batch of its own: spans and profiles
 * need no other piece to be read. One span or profile larger than the limit on its own cannot be
 * sent: it is dropped, counted and logged, the rest of its batch goes. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/metrics.h"
#include "nats_int.h"
#include "pdata/otlp_wire.h"
#include "pdata/profiles.h"
#include "pdata/traces.h"
#include "pdata/traces_edit.h"

/* A span's tag and length prefix around its bytes, at most. */
#define SPAN_FRAMING 8

void hs_nats_exp_item_add(struct nats_item *it, struct nats_part p)
{
    if (it->n == it->cap) {
        it->cap = it->cap ? 2 * it->cap : 4;
        struct nats_part *v = realloc(it->parts, it->cap * sizeof(*v));
        if (!v)
            abort(); /* a few pointers per batch, as hs_xmalloc */
        it->parts = v;
    }
    it->parts[it->n++] = p;
}

static void drop(struct nats_exp *e, const char *what, size_t size, size_t limit, uint32_t n)
{
    hs_metrics_drop(e->base.metrics, e->base.id, "message_too_large", n);
    uint32_t suppressed;
    if (hs_ratelimit_allow(&e->log_rl, hs_now_ms(), &suppressed))
        hs_log_error(e->base.id,
                     "a %s of %zu bytes cannot fit one message of at most %zu bytes: dropped "
                     "(raise nats-server's max_payload and max_message_size; %u similar "
                     "messages suppressed)",
                     what, size, limit, suppressed);
}

struct span_at {
    size_t offset, len;
};

struct span_list {
    struct span_at *v;
    size_t n, cap;
};

static int collect(void *ud, const struct hs_span_view *s)
{
    struct span_list *l = ud;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        struct span_at *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return HS_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (struct span_at){s->offset, s->len};
    return 0;
}

/* spans[0..n) of t as one message, or in halves when that does not fit. */
static int emit_spans(struct nats_exp *e, struct hs_traces *t, const struct span_at *spans,
                      size_t n, size_t limit, uint32_t partition, struct nats_item *it)
{
    struct hs_span_edit *edits = calloc(n, sizeof(*edits));
    if (!edits)
        return HS_ENOMEM;
    for (size_t i = 0; i < n; i++)
        edits[i].offset = spans[i].offset;
    struct hs_traces *piece = NULL;
    int rc = hs_traces_edit(t, edits, n, false, &piece);
    free(edits);
    if (rc != 0)
        return rc;
    if (piece && piece->len > limit) {
        size_t len = piece->len;
        hs_traces_unref(piece);
        if (n == 1) {
            drop(e, "span", len, limit, 1);
            return 0;
        }
        rc = emit_spans(e, t, spans, n / 2, limit, partition, it);
        return rc ? rc : emit_spans(e, t, spans + n / 2, n - n / 2, limit, partition, it);
    }
    if (piece)
        hs_nats_exp_item_add(it, (struct nats_part){piece, partition, piece->spans, 0});
    return 0;
}

static int cut_traces(struct nats_exp *e, struct hs_traces *t, uint32_t partition, size_t limit,
                      struct nats_item *it)
{
    struct span_list l = {0};
    struct hs_otlp_scan scan = {0};
    const struct hs_otlp_limits none = {0};
    int rc = hs_otlp_traces_scan(t->data, t->len, &none, collect, &l, &scan);
    size_t in_spans = 0;
    for (size_t i = 0; i < l.n; i++)
        in_spans += l.v[i].len + SPAN_FRAMING;
    /* every piece may repeat all of the batch's other bytes (resources, scopes) */
    size_t other = t->len > in_spans ? t->len - in_spans : 0;
    size_t budget = limit > 2 * other ? limit - other : limit / 2;
    for (size_t i = 0; rc == 0 && i < l.n;) {
        size_t j = i, acc = 0;
        while (j < l.n && (j == i || acc + l.v[j].len + SPAN_FRAMING <= budget))
            acc += l.v[j++].len + SPAN_FRAMING;
        rc = emit_spans(e, t, l.v + i, j - i, limit, partition, it);
        i = j;
    }
    free(l.v);
    return rc;
}

/* What a profile adds to a message, about: its bytes, labels and details. */
static size_t profile_size(const struct hs_profile *p)
{
    size_t n = p->raw_len + 64;
    for (uint32_t i = 0; i < p->nlabels; i++)
        n += strlen(p->labels[i].name) + strlen(p->labels[i].value) + 8;
    const char *more[] = {p->id, p->spy_name, p->sample_type_config, p->app_name};
    for (size_t i = 0; i < HS_ARRAY_SIZE(more); i++)
        n += more[i] ? strlen(more[i]) + 4 : 0;
    return n;
}

static void cut_profiles(struct nats_exp *e, struct hs_profiles *b, uint32_t partition,
                         size_t limit, struct nats_item *it)
{
    for (uint32_t i = 0; i < b->count;) {
        size_t acc = 0, one;
        uint32_t j = i;
        while (j < b->count && acc + (one = profile_size(b->items[j])) <= limit)
            acc += one, j++;
        if (j == i) { /* alone over the limit */
            drop(e, "profile", profile_size(b->items[i]), limit, 1);
            i++;
            continue;
        }
        hs_nats_exp_item_add(it, (struct nats_part){hs_profiles_ref(b), partition, j - i, i});
        i = j;
    }
}

int hs_nats_exp_cut(struct nats_exp *e, unsigned signal, struct nats_part p, size_t limit,
                    struct nats_item *it)
{
    int rc = 0;
    if (signal == HS_SIGNAL_TRACES) {
        struct hs_traces *t = p.batch;
        if (t->len <= limit) {
            hs_nats_exp_item_add(it, p);
            return 0;
        }
        rc = cut_traces(e, t, p.partition, limit, it);
        hs_traces_unref(t); /* the pieces are copies */
        return rc;
    }
    struct hs_profiles *b = p.batch;
    size_t size = 0;
    for (uint32_t i = 0; i < b->count; i++)
        size += profile_size(b->items[i]);
    if (size <= limit) {
        hs_nats_exp_item_add(it, p);
        return 0;
    }
    cut_profiles(e, b, p.partition, limit, it);
    hs_profiles_unref(b);
    return 0;
}
