/* naming.c: what the correlator calls things: the kind of a profile type (cpu, wall, mutex,
 * ...), the short names functions are displayed by (attributes carry the names as the profiler
 * wrote them), whether a function is the one a span is named after, and why nothing matched. */
#include <string.h>

#include "processors/correlator/correlator_int.h"

/* What the type measures, from its sample type and the profile name in its id (Pyroscope's
 * `mutex`/`block`; both say "contentions"/"delay"), as wire.md §5.3 names them. */
enum corr_kind hs_corr_type_kind(const char *id, const char *type)
{
    if (strcmp(type, "cpu") == 0)
        return CORR_KIND_CPU;
    if (strcmp(type, "wall") == 0)
        return CORR_KIND_WALL;
    if (strncmp(type, "goroutine", 9) == 0)
        return CORR_KIND_GOROUTINES;
    if (strncmp(id, "block", 5) == 0 || strncmp(type, "block", 5) == 0)
        return CORR_KIND_BLOCK;
    if (strncmp(id, "mutex", 5) == 0 || strncmp(type, "mutex", 5) == 0 ||
        strcmp(type, "delay") == 0 || strcmp(type, "contentions") == 0)
        return CORR_KIND_MUTEX;
    if (strstr(type, "alloc_") || strstr(type, "inuse_") || strstr(type, "space") ||
        strstr(type, "objects"))
        return CORR_KIND_ALLOC;
    return CORR_KIND_OTHER;
}

bool hs_corr_kind_waits(int rank)
{
    return rank == CORR_KIND_GOROUTINES || rank == CORR_KIND_MUTEX || rank == CORR_KIND_BLOCK;
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* The name people call a function by, so span names can find it and annotations read well:
 *   Node  "./app.js:findByEmail:54"              -> "findByEmail"   (file:name:line)
 *   Node  "./app.js:(anonymous:L#51:C#51):51"    -> "(anonymous:L#51:C#51)"
 *   Go    "main.(*UserRepository).findByEmail"   -> "UserRepository.findByEmail"
 *   Go    "github.com/x/pg.(*Client).query"      -> "Client.query"
 *   Go    "encoding/json.Marshal"                -> "json.Marshal"
 * Anything else (Java, Python, C) is kept as it is. */
size_t hs_corr_display_name(const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    const char *last = memrchr(name, ':', n);
    if (last && all_digits(last + 1, n - (size_t)(last - name) - 1)) {
        /* an anonymous function's name has colons of its own: "(anonymous:L#51:C#51)" */
        const char *anon = memmem(name, (size_t)(last - name), "(anonymous", 10);
        const char *first = anon ? anon - 1 : memrchr(name, ':', (size_t)(last - name));
        if (first && first + 1 < last) {
            size_t len = HS_MIN((size_t)(last - first - 1), cap - 1);
            memcpy(out, first + 1, len);
            out[len] = '\0';
            return len;
        }
    }
    const char *recv = strstr(name, ".(");
    size_t len = 0;
    if (recv) { /* Go method: drop the package, the parentheses and the '*' */
        for (const char *s = recv + 2; *s && len + 1 < cap; s++)
            if (*s != '(' && *s != ')' && *s != '*')
                out[len++] = *s;
    } else {
        /* Go import path: "encoding/json.Marshal" -> "json.Marshal" */
        const char *slash = memrchr(name, '/', n);
        const char *start = slash && strchr(slash, '.') ? slash + 1 : name;
        len = HS_MIN(n - (size_t)(start - name), cap - 1);
        memcpy(out, start, len);
    }
    out[len] = '\0';
    return len;
}

bool hs_corr_name_matches(const struct corr_name *nm, struct hs_str span_name)
{
    struct hs_str fn = {nm->disp, nm->dlen};
    /* one ends with the other: their last bytes first (matching asks every function of a
     * window, and most differ there) */
    if (!fn.len || !span_name.len || fn.ptr[fn.len - 1] != span_name.ptr[span_name.len - 1])
        return false;
    return hs_str_ends_with_name(fn, span_name) || hs_str_ends_with_name(span_name, fn);
}

static const char *const reason_names[] = {
    [CORR_REASON_NONE] = "",
    [CORR_REASON_NO_PROFILES_FOR_SERVICE] = "no_profiles_for_service",
    [CORR_REASON_NO_PROFILE_IN_WINDOW] = "no_profile_in_window",
    [CORR_REASON_TIMEOUT] = "timeout",
    [CORR_REASON_PARKED_LIMIT] = "parked_limit",
    [CORR_REASON_SHUTDOWN] = "shutdown",
    [CORR_REASON_NO_SAMPLES_OF_SPAN] = "no_samples_of_span",
};

const char *hs_corr_reason_name(enum corr_reason r)
{
    return (size_t)r < HS_ARRAY_SIZE(reason_names) ? reason_names[r] : "";
}
