/* arena.h: per-request bump allocation; a decoded request is freed in one call (ngx_pool_t).
 * Also backs protobuf-c through a ProtobufCAllocator whose free does nothing. */
#ifndef HS_ARENA_H
#define HS_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

struct hs_arena;

/* Returns NULL when out of memory. `limit` caps the total bytes (0 = no cap beyond memory). */
struct hs_arena *hs_arena_new(size_t first_chunk, size_t limit);
void *hs_arena_alloc(struct hs_arena *a, size_t n); /* 16-byte aligned; NULL past the limit */
char *hs_arena_strndup(struct hs_arena *a, const char *s, size_t n);
size_t hs_arena_used(const struct hs_arena *a);
void hs_arena_reset(struct hs_arena *a); /* keeps the first chunk */
void hs_arena_free(struct hs_arena *a);

/* A protobuf-c allocator drawing from `a`; valid as long as `a` is. */
ProtobufCAllocator hs_arena_pb_allocator(struct hs_arena *a);

#endif
