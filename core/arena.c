/* arena.c: chunked bump allocator. Chunks grow geometrically; everything is freed at once. */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct chunk {
    struct chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

struct hs_arena {
    struct chunk *head;
    size_t total;  /* bytes of chunk data allocated */
    size_t used;   /* bytes handed out */
    size_t limit;  /* 0 = none */
    size_t next_size;
};

static struct chunk *chunk_new(size_t size)
{
    struct chunk *c = malloc(sizeof(*c) + size);
    if (!c)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

struct hs_arena *hs_arena_new(size_t first_chunk, size_t limit)
{
    struct hs_arena *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->limit = limit;
    a->next_size = first_chunk < 256 ? 256 : first_chunk;
    return a;
}

void *hs_arena_alloc(struct hs_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    struct chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = a->next_size;
        while (size < n)
            size *= 2;
        if (a->limit && a->total + size > a->limit) {
            size = n > 4096 ? n : 4096;
            if (a->total + size > a->limit)
                return NULL;
        }
        c = chunk_new(size);
        if (!c)
            return NULL;
        c->next = a->head;
        a->head = c;
        a->total += size;
        if (a->next_size < (64u << 20))
            a->next_size *= 2;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used += n;
    return p;
}

char *hs_arena_strndup(struct hs_arena *a, const char *s, size_t n)
{
    char *p = hs_arena_alloc(a, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

size_t hs_arena_used(const struct hs_arena *a)
{
    return a->used;
}

void hs_arena_reset(struct hs_arena *a)
{
    struct chunk *c = a->head;
    while (c && c->next) {
        struct chunk *next = c->next;
        a->total -= c->size;
        free(c);
        c = next;
    }
    /* keep the oldest (first) chunk, which is last in the list */
    a->head = c;
    if (c)
        c->used = 0;
    a->used = 0;
}

void hs_arena_free(struct hs_arena *a)
{
    if (!a)
        return;
    struct chunk *c = a->head;
    while (c) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

static void *pb_alloc(void *ud, size_t n)
{
    return hs_arena_alloc(ud, n);
}

static void pb_free(void *ud, void *p)
{
    (void)ud;
    (void)p; /* the arena frees everything at once */
}

ProtobufCAllocator hs_arena_pb_allocator(struct hs_arena *a)
{
    return (ProtobufCAllocator){.alloc = pb_alloc, .free = pb_free, .allocator_data = a};
}
