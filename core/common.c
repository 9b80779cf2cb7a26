/* common.c: time and allocation helpers. */
#include "common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

bool hs_str_ieq(struct hs_str a, const char *lit)
{
    size_t n = strlen(lit);
    if (a.len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)a.ptr[i]) != tolower((unsigned char)lit[i]))
            return false;
    return true;
}

bool hs_str_ends_with_name(struct hs_str full, struct hs_str name)
{
    if (name.len == 0 || name.len > full.len ||
        memcmp(full.ptr + full.len - name.len, name.ptr, name.len) != 0)
        return false;
    return name.len == full.len || strchr(".:/$", full.ptr[full.len - name.len - 1]);
}

uint64_t hs_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t hs_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *oom(size_t n)
{
    fprintf(stderr, "hotspan: out of memory allocating %zu bytes\n", n);
    abort();
}

void *hs_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    return p ? p : oom(n);
}

void *hs_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    return p ? p : oom(n * size);
}

char *hs_xstrdup(const char *s)
{
    return hs_xstrndup(s, strlen(s));
}

char *hs_xstrndup(const char *s, size_t n)
{
    char *p = hs_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

bool hs_tenant_valid(const char *s, size_t len)
{
    if (len == 0 || len > 150 || (len == 1 && s[0] == '.') ||
        (len == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr("!-_.*'()", c) != NULL;
        if (!ok || c == '\0')
            return false;
    }
    return true;
}
