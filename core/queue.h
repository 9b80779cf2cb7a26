/* queue.h: the one intrusive list, in the spirit of libuv's src/queue.h (style.md §1): circular
 * and doubly linked, its head a node like the others, so that inserting and unlinking are a few
 * stores with no special case for the ends, and a node unlinks without knowing its list. A
 * struct joins lists by embedding a struct hs_queue per list, and is found from it again with
 * hs_container_of. Walk a list with `for (q = hs_queue_head(h); q != h; q = next)`, reading
 * `next = q->next` first when the walk may unlink q. */
#ifndef HS_QUEUE_H
#define HS_QUEUE_H

#include <stdbool.h>

struct hs_queue {
    struct hs_queue *next, *prev;
};

/* An empty list, or a node in none. */
static inline void hs_queue_init(struct hs_queue *h)
{
    h->next = h;
    h->prev = h;
}

/* True for an empty list, and for a node in none (after hs_queue_init or hs_queue_remove). */
static inline bool hs_queue_empty(const struct hs_queue *h)
{
    return h->next == h;
}

/* The first node, or h itself when the list is empty. */
static inline struct hs_queue *hs_queue_head(const struct hs_queue *h)
{
    return h->next;
}

static inline void hs_queue_insert_head(struct hs_queue *h, struct hs_queue *q)
{
    q->next = h->next;
    q->prev = h;
    q->next->prev = q;
    h->next = q;
}

static inline void hs_queue_insert_tail(struct hs_queue *h, struct hs_queue *q)
{
    q->next = h;
    q->prev = h->prev;
    q->prev->next = q;
    h->prev = q;
}

/* Unlinks q from its list; q is then in none, and removing it again does nothing. */
static inline void hs_queue_remove(struct hs_queue *q)
{
    q->prev->next = q->next;
    q->next->prev = q->prev;
    hs_queue_init(q);
}

#endif
