/* sender_move.c: items leaving one sender for another (sender.h, hs_sender_evict and
 * hs_sender_adopt): a load_balancing backend that left the resolver's answer hands its queue,
 * in memory or on disk, to the senders of the keys' new owners, so nothing acknowledged is lost
 * with it. */
#include <stdlib.h>

#include "core/errors.h"
#include "core/log.h"
#include "sender_int.h"

/* Takes e out of the sender (it is in no list and no slot any more) and hands it over. */
static void hand_over(struct hs_sender *s, struct entry *e, uint32_t first_part)
{
    if (s->store) {
        hs_sender_store_hand_over(s, e, first_part);
    } else {
        struct hs_sender_moved m = {.item = e->item,
                                    .bytes = e->bytes,
                                    .count = e->count,
                                    .parts = e->parts,
                                    .first_part = first_part,
                                    .key = e->key};
        e->item = NULL; /* the taker's now, even when it drops it */
        s->evict_fn(s->evict_ud, &m);
    }
    s->held--;
    s->held_bytes -= e->bytes;
    s->health.pending = s->held > 0;
    free(e);
}

void hs_sender_slot_hand_over(struct slot *sl)
{
    struct hs_sender *s = sl->s;
    struct entry *e = sl->entry;
    hs_sender_request_free(&sl->req);
    hs_buf_free(&sl->rec);
    sl->entry = NULL;
    hand_over(s, e, sl->part);
}

void hs_sender_evict(struct hs_sender *s, hs_sender_move_fn fn, void *ud)
{
    if (s->evicting)
        return;
    s->evicting = true;
    s->evict_fn = fn;
    s->evict_ud = ud;
    while (s->head) {
        struct entry *e = s->head;
        s->head = e->next;
        hand_over(s, e, e->first_part);
    }
    s->tail = &s->head;
    for (uint32_t i = 0; s->slots && i < s->nslots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->entry && !sl->in_flight) { /* waiting to retry: it goes now */
            uv_timer_stop(&sl->timer);
            hs_sender_slot_hand_over(sl);
        }
    }
}

int hs_sender_adopt(struct hs_sender *s, struct hs_sender_moved *m)
{
    if (s->finishing || s->evicting || (s->opt.queue->storage && !s->store))
        return HS_EAGAIN;
    if (s->store)
        return hs_sender_store_adopt(s, m);
    struct entry *e = hs_xcalloc(1, sizeof(*e));
    e->item = m->item;
    m->item = NULL;
    e->bytes = m->bytes;
    e->count = m->count;
    e->parts = m->parts;
    e->first_part = m->first_part;
    e->key = m->key;
    hs_sender_queue_append(s, e);
    if (s->started)
        hs_sender_pump(s);
    return 0;
}
