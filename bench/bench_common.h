/* bench_common.h: clocks and option parsing shared by the bench programs (static inline, so each
 * program includes what it uses and nothing links twice). */
#ifndef HS_BENCH_COMMON_H
#define HS_BENCH_COMMON_H

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static inline double hs_bench_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of this process (every thread), user and system. */
static inline double hs_bench_cpu_s(void)
{
    return hs_bench_clock(CLOCK_PROCESS_CPUTIME_ID);
}

static inline double hs_bench_mono_s(void)
{
    return hs_bench_clock(CLOCK_MONOTONIC);
}

/* `--name VALUE` at argv[*i]: returns VALUE and steps past it, or NULL if argv[*i] is not
 * `--name`. A missing VALUE is a usage error. */
static inline const char *hs_bench_opt(int argc, char **argv, int *i, const char *name)
{
    if (strcmp(argv[*i], name) != 0)
        return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", argv[0], name);
        exit(2);
    }
    *i += 1;
    return argv[*i];
}

/* A number in [min, max], or exit(2) naming the option. */
static inline double hs_bench_num(const char *opt, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "%s: \"%s\" is not a number in [%g, %g]\n", opt, s, min, max);
        exit(2);
    }
    return v;
}

/* The pace a load generator's threads share: request n is due at t0 + n * interval (interval 0:
 * at once); the run ends at deadline, or after max_requests when that is set. */
struct hs_bench_pace {
    double t0, deadline;
    double interval;       /* seconds between requests in total; 0 = unlimited */
    uint64_t max_requests; /* 0 = until the deadline */
    atomic_uint_fast64_t ticket;
};

/* Takes the next request's ticket; false when the run is over. *due is when to send it. */
/* "host:port" to the first address it resolves to; host gets the host part. 0 or -1. */
static inline int hs_bench_resolve(const char *target, struct sockaddr_storage *addr,
                                   socklen_t *addr_len, char *host, size_t host_cap)
{
    const char *colon = strrchr(target, ':');
    if (!colon || (size_t)(colon - target) >= host_cap)
        return -1;
    memcpy(host, target, (size_t)(colon - target));
    host[colon - target] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        return -1;
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* A blocking TCP connection to addr with Nagle off (requests go out whole) and, when
 * timeout_s > 0, send/receive timeouts (connect included); -1 on failure. */
static inline int hs_bench_connect(const struct sockaddr_storage *addr, socklen_t addr_len,
                                   int timeout_s)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (timeout_s > 0) {
        struct timeval tv = {.tv_sec = timeout_s};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    if (connect(fd, (const struct sockaddr *)addr, addr_len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline bool hs_bench_next_ticket(struct hs_bench_pace *p, double *due)
{
    uint64_t n = atomic_fetch_add(&p->ticket, 1);
    if (p->max_requests && n >= p->max_requests)
        return false;
    *due = p->interval > 0 ? p->t0 + (double)n * p->interval : 0;
    double now = hs_bench_mono_s();
    if (!p->max_requests && (now >= p->deadline || *due >= p->deadline))
        return false;
    return true;
}

/* One connection's latencies (seconds), grown as answers come; a failed growth drops one. */
struct hs_bench_lat {
    double *v;
    size_t n, cap;
};

static inline void hs_bench_lat_add(struct hs_bench_lat *l, double s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        double *p = realloc(l->v, cap * sizeof(*p));
        if (!p)
            return;
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = s;
}

static inline int hs_bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Appends every latency of `from` (one connection's) to `to` (the run's); on a failed growth
 * `to` keeps what it had. */
static inline void hs_bench_lat_extend(struct hs_bench_lat *to, const struct hs_bench_lat *from)
{
    if (to->n + from->n > to->cap) {
        size_t cap = to->n + from->n;
        double *p = realloc(to->v, (cap ? cap : 1) * sizeof(*p));
        if (!p)
            return;
        to->v = p;
        to->cap = cap;
    }
    if (from->n)
        memcpy(to->v + to->n, from->v, from->n * sizeof(*from->v));
    to->n += from->n;
}

static inline void hs_bench_lat_sort(struct hs_bench_lat *l)
{
    if (l->n)
        qsort(l->v, l->n, sizeof(*l->v), hs_bench_cmp_double);
}

/* The q-quantile of sorted latencies, in milliseconds (0 without latencies). */
static inline double hs_bench_lat_ms(const struct hs_bench_lat *l, double q)
{
    return l->n ? l->v[(size_t)((double)(l->n - 1) * q)] * 1e3 : 0.0;
}

/* How long a run lasted: to its last answer, and a timed run at least its duration (--rate
 * may end the answers before the deadline). */
static inline double hs_bench_elapsed(const struct hs_bench_pace *p, double last)
{
    double to_last = last - p->t0;
    return p->max_requests || to_last > p->deadline - p->t0 ? to_last : p->deadline - p->t0;
}

#endif
