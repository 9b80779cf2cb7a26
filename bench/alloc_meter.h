/* alloc_meter.h: counts the heap bytes a stretch of code holds at its peak, for the JSON memory
 * bench and fuzz target. Under ASan through its malloc/free hooks; otherwise by defining malloc
 * and friends in the program, over glibc's __libc_* (include it in one file of a program). */
#ifndef HS_ALLOC_METER_H
#define HS_ALLOC_METER_H

#include <malloc.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__)
#define HS_METER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HS_METER_ASAN 1
#endif
#endif

/* Signed: a block allocated before the meter started may be freed while it runs. */
static int64_t hs_meter_cur, hs_meter_peak;

static inline void hs_meter_add(int64_t n)
{
    hs_meter_cur += n;
    if (hs_meter_cur > hs_meter_peak)
        hs_meter_peak = hs_meter_cur;
}

#ifdef HS_METER_ASAN
/* ASan's own (sanitizer/allocator_interface.h, which gcc does not install) */
size_t __sanitizer_get_allocated_size(const volatile void *p);
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));

static void hs_meter_malloc_hook(const volatile void *p, size_t n)
{
    (void)p;
    hs_meter_add((int64_t)n);
}

static void hs_meter_free_hook(const volatile void *p)
{
    if (p)
        hs_meter_add(-(int64_t)__sanitizer_get_allocated_size((const void *)p));
}

static inline void hs_meter_install(void)
{
    static int done;
    if (!done)
        __sanitizer_install_malloc_and_free_hooks(hs_meter_malloc_hook, hs_meter_free_hook);
    done = 1;
}
#else
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

/* Usable sizes, not requested ones: what the process really holds. */
void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    if (p)
        hs_meter_add((int64_t)malloc_usable_size(p));
    return p;
}

void *calloc(size_t n, size_t m)
{
    void *p = __libc_calloc(n, m);
    if (p)
        hs_meter_add((int64_t)malloc_usable_size(p));
    return p;
}

void *realloc(void *p, size_t n)
{
    int64_t old = p ? (int64_t)malloc_usable_size(p) : 0;
    void *q = __libc_realloc(p, n);
    if (q == p) {
        hs_meter_add((int64_t)malloc_usable_size(q) - old);
    } else if (q || n == 0) {
        /* a moved block exists beside the old one for a moment: that is the peak */
        hs_meter_add(q ? (int64_t)malloc_usable_size(q) : 0);
        hs_meter_add(-old);
    }
    return q;
}

void free(void *p)
{
    if (p)
        hs_meter_add(-(int64_t)malloc_usable_size(p));
    __libc_free(p);
}

static inline void hs_meter_install(void)
{
}
#endif

/* Starts a measurement: the peak is counted from what is held now. */
static inline void hs_meter_start(void)
{
    hs_meter_install();
    hs_meter_cur = 0;
    hs_meter_peak = 0;
}

/* The most bytes held at once since hs_meter_start, beyond what was held then. */
static inline int64_t hs_meter_peak_bytes(void)
{
    return hs_meter_peak;
}

#endif
