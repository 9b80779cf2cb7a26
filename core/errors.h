/* errors.h: one list of error codes (libuv's UV_ERRNO_MAP): negated errno where the system has
 * one, project codes from -4000 down. Retryable or permanent is decided by the code. */
#ifndef HS_ERRORS_H
#define HS_ERRORS_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>

#define HS_ERRNO_MAP(X)                                                                            \
    X(EAGAIN, -EAGAIN, "busy, refused for now: retry later")                                       \
    X(EINVAL, -EINVAL, "invalid input: retrying will not help")                                    \
    X(ENOMEM, -ENOMEM, "out of memory")                                                            \
    X(E2BIG, -E2BIG, "too large")                                                                  \
    X(ENOENT, -ENOENT, "not found")                                                                \
    X(EEXIST, -EEXIST, "already exists")                                                           \
    X(EIO, -EIO, "input/output error")                                                             \
    X(ECANCELED, -ECANCELED, "cancelled")                                                          \
    X(EUNSUPPORTED, -4000, "unsupported")

enum hs_err {
    HS_OK = 0,
#define X(name, value, text) HS_##name = (value),
    HS_ERRNO_MAP(X)
#undef X
};

const char *hs_strerror(int code);
const char *hs_err_name(int code);

/* A list of human-readable error lines, e.g. every config error of a file at once. */
struct hs_error {
    char **lines;
    size_t count;
    size_t cap;
};

void hs_error_addf(struct hs_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hs_error_vaddf(struct hs_error *err, const char *fmt, va_list ap);
void hs_error_free(struct hs_error *err);

#endif
