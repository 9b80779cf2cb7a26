/* bench_common.h: clocks and option parsing shared by the bench programs (static inline, so each
 * program includes what it uses and nothing links twice). */
#ifndef HS_BENCH_COMMON_H
#define HS_BENCH_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

#endif
