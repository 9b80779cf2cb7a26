/* common.h: small helpers every hotspan file may use: byte views, container_of, time. */
#ifndef HS_COMMON_H
#define HS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define hs_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define HS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define HS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A view of bytes owned by someone else (ngx_str_t); never assumed NUL-terminated. */
struct hs_str {
    const char *ptr;
    size_t len;
};

#define HS_STR(lit) ((struct hs_str){(lit), sizeof(lit) - 1})

static inline bool hs_str_eq(struct hs_str a, const char *lit)
{
    size_t n = strlen(lit);
    return a.len == n && memcmp(a.ptr, lit, n) == 0;
}

bool hs_str_ieq(struct hs_str a, const char *lit); /* ASCII case-insensitive */

/* Is `name` the end of the qualified name `full`: equal, or after a '.', ':', '/' or '$'
 * ("findByEmail" of "UserRepository.findByEmail")? How span and function names meet. */
bool hs_str_ends_with_name(struct hs_str full, struct hs_str name);

/* MurmurHash3's 64-bit finalizer: every input bit moves every output bit, so the low bits of
 * the result index a power-of-two table well even for ids that differ only in high bits. */
static inline uint64_t hs_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The value of a hex digit (either case), or -1. */
static inline int hs_hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Monotonic milliseconds and wall-clock nanoseconds. */
uint64_t hs_now_ms(void);
uint64_t hs_wall_ns(void);

/* malloc that aborts on failure: for small, bounded control structures only. Data buffers
 * sized by clients use plain malloc and report HS_ENOMEM. */
void *hs_xmalloc(size_t n);
void *hs_xcalloc(size_t n, size_t size);
char *hs_xstrdup(const char *s);
char *hs_xstrndup(const char *s, size_t n);

/* Is s a tenant id as Cortex, Mimir, Tempo and Pyroscope accept one: 1..150 bytes of
 * [A-Za-z0-9!-_.*'()], and not "." or ".."? */
bool hs_tenant_valid(const char *s, size_t len);

#endif
