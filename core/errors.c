/* errors.c: names and texts of error codes; error line lists. */
#include "errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

const char *hs_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define X(name, value, text)                                                                       \
    case value:                                                                                    \
        return text;
        HS_ERRNO_MAP(X)
#undef X
    }
    return code < 0 && code > -4000 ? strerror(-code) : "unknown error";
}

const char *hs_err_name(int code)
{
    switch (code) {
    case 0:
        return "OK";
#define X(name, value, text)                                                                       \
    case value:                                                                                    \
        return #name;
        HS_ERRNO_MAP(X)
#undef X
    }
    return "EUNKNOWN";
}

void hs_error_vaddf(struct hs_error *err, const char *fmt, va_list ap)
{
    if (!err)
        return;
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0) {
        fprintf(stderr, "hotspan: out of memory formatting an error\n");
        abort();
    }
    if (err->count == err->cap) {
        size_t cap = err->cap ? err->cap * 2 : 8;
        char **lines = realloc(err->lines, cap * sizeof(*lines));
        if (!lines) {
            fprintf(stderr, "hotspan: out of memory\n");
            abort();
        }
        err->lines = lines;
        err->cap = cap;
    }
    err->lines[err->count++] = line;
}

void hs_error_addf(struct hs_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hs_error_vaddf(err, fmt, ap);
    va_end(ap);
}

void hs_error_free(struct hs_error *err)
{
    for (size_t i = 0; i < err->count; i++)
        free(err->lines[i]);
    free(err->lines);
    *err = (struct hs_error){0};
}
