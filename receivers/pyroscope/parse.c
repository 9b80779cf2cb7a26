/* parse.c: the text formats of the Pyroscope API the receiver reads before any pprof:
 * query strings, attime values, multipart/form-data bodies, app-name suffixes, push labels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/errors.h"
#include "receivers/pyroscope/pyroscope_int.h"

/* ---- query ------------------------------------------------------------------------------ */

/* Decodes s[0..n) (%XX and '+') to out, NUL-terminated; returns the bytes written or -1 with
 * *bad at the offending offset. out has room for n + 1. */
static long url_decode(const char *s, size_t n, char *out, size_t *bad)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] == '%') {
            if (i + 2 >= n) {
                *bad = i;
                return -1;
            }
            int hi = hs_hexval(s[i + 1]), lo = hs_hexval(s[i + 2]);
            if (hi < 0 || lo < 0) {
                *bad = i;
                return -1;
            }
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return (long)o;
}

int hs_pyro_query_parse(const char *q, size_t len, struct hs_pyro_query *out, char *err,
                        size_t errlen)
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"name", offsetof(struct hs_pyro_query, name)},
        {"from", offsetof(struct hs_pyro_query, from)},
        {"until", offsetof(struct hs_pyro_query, until)},
        {"format", offsetof(struct hs_pyro_query, format)},
        {"sampleRate", offsetof(struct hs_pyro_query, sample_rate)},
        {"spyName", offsetof(struct hs_pyro_query, spy_name)},
        {"units", offsetof(struct hs_pyro_query, units)},
        {"aggregationType", offsetof(struct hs_pyro_query, aggregation_type)},
    };
    *out = (struct hs_pyro_query){0};
    /* each value decodes to at most its own length, plus a NUL per pair: bounded by the query */
    char *st = malloc(len + 1 + len / 2 + 1);
    if (!st)
        return HS_ENOMEM;
    out->storage = st;
    size_t used = 0;
    for (size_t b = 0; b < len;) {
        size_t e = b;
        while (e < len && q[e] != '&')
            e++;
        size_t eq = b;
        while (eq < e && q[eq] != '=')
            eq++;
        char key[32];
        size_t bad = 0;
        /* keys we know are short and plain; a longer key is one we ignore */
        if (eq - b < sizeof(key) && url_decode(q + b, eq - b, key, &bad) >= 0) {
            for (size_t k = 0; k < HS_ARRAY_SIZE(keys); k++) {
                const char **slot = (const char **)((char *)out + keys[k].off);
                if (strcmp(key, keys[k].key) != 0 || *slot)
                    continue;
                size_t vb = eq < e ? eq + 1 : e;
                char *v = st + used;
                long n = url_decode(q + vb, e - vb, v, &bad);
                if (n < 0) {
                    snprintf(err, errlen, "query parameter %s: bad %%-escape at byte %zu", key,
                             vb + bad);
                    hs_pyro_query_free(out);
                    return HS_EINVAL;
                }
                used += (size_t)n + 1;
                *slot = v;
            }
        }
        b = e + 1;
    }
    return 0;
}

void hs_pyro_query_free(struct hs_pyro_query *q)
{
    free(q->storage);
    *q = (struct hs_pyro_query){0};
}

/* ---- attime ----------------------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static bool yyyymmdd(const char *s, int64_t *days)
{
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    unsigned m = (unsigned)((s[4] - '0') * 10 + (s[5] - '0'));
    unsigned d = (unsigned)((s[6] - '0') * 10 + (s[7] - '0'));
    static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
        return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (m == 2 && d == 29 && !leap)
        return false;
    *days = days_from_civil(y, m, d);
    return true;
}

/* "1h", "30m", "15s", "2d" (Pyroscope's relative forms use these units). */
static bool rel_offset(const char *s, int64_t *ns)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 0 || v > 1000000 || end[0] == '\0' || end[1] != '\0')
        return false;
    int64_t unit;
    switch (*end) {
    case 's':
        unit = 1000000000LL;
        break;
    case 'm':
        unit = 60 * 1000000000LL;
        break;
    case 'h':
        unit = 3600 * 1000000000LL;
        break;
    case 'd':
        unit = 86400 * 1000000000LL;
        break;
    default:
        return false;
    }
    *ns = (int64_t)v * unit;
    return true;
}

int64_t hs_pyro_attime(const char *s, int64_t now_ns)
{
    if (!s)
        return now_ns;
    while (*s == ' ')
        s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ')
        n--;
    if (n == 0)
        return now_ns;
    size_t digits = strspn(s, "0123456789");
    if (digits == n) {
        if (n > 19)
            return now_ns;
        int64_t days;
        if (n == 8 && yyyymmdd(s, &days)) /* ns since 1970 reach only the years 1678-2262 */
            return days >= -106751 && days <= 106751 ? days * 86400 * 1000000000LL : now_ns;
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++)
            v = v * 10 + (uint64_t)(s[i] - '0'); /* 19 digits fit in 64 unsigned bits */
        uint64_t mul = n == 13 ? 1000000 : n == 16 ? 1000 : n == 19 ? 1 : 1000000000;
        if (v > (uint64_t)INT64_MAX / mul)
            return now_ns;
        return (int64_t)(v * mul);
    }
    if (n >= 3 && strncmp(s, "now", 3) == 0) {
        char rest[32];
        if (n == 3)
            return now_ns;
        if (n - 4 >= sizeof(rest) || (s[3] != '-' && s[3] != '+'))
            return now_ns;
        memcpy(rest, s + 4, n - 4);
        rest[n - 4] = '\0';
        int64_t off;
        if (!rel_offset(rest, &off))
            return now_ns;
        return s[3] == '-' ? now_ns - off : now_ns + off;
    }
    return now_ns;
}

uint32_t hs_pyro_sample_rate(const char *s, bool *valid)
{
    *valid = true;
    if (!s)
        return 100;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* the period is 1e9/rate ns: a rate above 1e9 would make it 0 */
    if (end == s || *end != '\0' || errno || v < 0 || v > 1000000000) {
        *valid = false;
        return 100;
    }
    return (uint32_t)v;
}

/* ---- multipart -------------------------------------------------------------------------- */

static bool ci_prefix(const char *p, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n >= l && hs_str_ieq((struct hs_str){p, l}, lit);
}

/* The value of parameter `param` in a header value like `form-data; name="profile"` or
 * `multipart/form-data; boundary=xyz`. */
static bool header_param(struct hs_str v, const char *param, struct hs_str *out)
{
    size_t plen = strlen(param);
    size_t i = 0;
    while (i < v.len) {
        while (i < v.len && v.ptr[i] != ';')
            i++;
        if (i >= v.len)
            return false;
        i++;
        while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
            i++;
        if (!ci_prefix(v.ptr + i, v.len - i, param) || i + plen >= v.len || v.ptr[i + plen] != '=')
            continue;
        i += plen + 1;
        if (i < v.len && v.ptr[i] == '"') {
            size_t b = ++i;
            while (i < v.len && v.ptr[i] != '"')
                i++;
            if (i == v.len)
                return false;
            *out = (struct hs_str){v.ptr + b, i - b};
            return true;
        }
        size_t b = i;
        while (i < v.len && v.ptr[i] != ';' && v.ptr[i] != ' ' && v.ptr[i] != '\t')
            i++;
        *out = (struct hs_str){v.ptr + b, i - b};
        return true;
    }
    return false;
}

bool hs_pyro_multipart_boundary(struct hs_str ct, bool *is_multipart, struct hs_str *boundary)
{
    /* Pyroscope's test is strings.Contains(ct, "multipart/form-data") */
    *is_multipart = false;
    for (size_t i = 0; i + 19 <= ct.len && !*is_multipart; i++)
        *is_multipart = hs_str_ieq((struct hs_str){ct.ptr + i, 19}, "multipart/form-data");
    if (!*is_multipart || !header_param(ct, "boundary", boundary))
        return false;
    /* RFC 2046: 1 to 70 characters */
    return boundary->len >= 1 && boundary->len <= 70;
}

static const uint8_t *find(const uint8_t *h, size_t hl, const char *n, size_t nl)
{
    if (nl == 0 || hl < nl)
        return NULL;
    return memmem(h, hl, n, nl);
}

/* The part headers hdr[0..n): its form-data name (Content-Disposition). */
static bool part_name(const uint8_t *hdr, size_t n, struct hs_str *name)
{
    const char *s = (const char *)hdr;
    for (size_t b = 0; b < n;) {
        size_t e = b;
        while (e < n && s[e] != '\n')
            e++;
        size_t le = e > b && s[e - 1] == '\r' ? e - 1 : e;
        if (ci_prefix(s + b, le - b, "content-disposition:"))
            return header_param((struct hs_str){s + b, le - b}, "name", name);
        b = e + 1;
    }
    return false;
}

int hs_pyro_multipart_parse(const uint8_t *body, size_t len, struct hs_str boundary,
                            struct hs_pyro_part *parts, size_t *nparts, char *err, size_t errlen)
{
    char delim[80]; /* "\r\n--" + boundary (<= 70) */
    *nparts = 0;
    if (boundary.len == 0 || boundary.len > 70) {
        snprintf(err, errlen, "multipart: bad boundary");
        return HS_EINVAL;
    }
    memcpy(delim, "\r\n--", 4);
    memcpy(delim + 4, boundary.ptr, boundary.len);
    size_t blen = 2 + boundary.len; /* "--boundary" */
    /* the first boundary opens the body or ends a preamble line */
    const uint8_t *p = NULL, *end = body + len;
    if (len >= blen && memcmp(body, delim + 2, blen) == 0)
        p = body + blen;
    else if ((p = find(body, len, delim + 1, blen + 1)) != NULL)
        p += 1 + blen;
    if (!p) {
        snprintf(err, errlen, "multipart: no boundary \"%.*s\" in the body", (int)boundary.len,
                 boundary.ptr);
        return HS_EINVAL;
    }
    /* As Go's mime/multipart: the first boundary line's ending (CRLF or a bare LF) is the
     * newline of every delimiter after it. */
    const char *dl = NULL;
    size_t dlen = 0;
    for (;;) {
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            return 0; /* the close delimiter; an epilogue is ignored */
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        bool crlf = end - p >= 2 && p[0] == '\r' && p[1] == '\n';
        if (!crlf && (p == end || p[0] != '\n')) {
            snprintf(err, errlen, "multipart: part %zu: %s after the boundary", *nparts,
                     p == end ? "body ends" : "garbage");
            return HS_EINVAL;
        }
        p += crlf ? 2 : 1;
        if (!dl) {
            dl = crlf ? delim : delim + 1;
            dlen = crlf ? blen + 2 : blen + 1;
        }
        const uint8_t *data;
        size_t hlen = 0;
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') {
            data = p + 2; /* a part without headers */
        } else if (p < end && p[0] == '\n') {
            data = p + 1;
        } else {
            const uint8_t *hend = find(p, (size_t)(end - p), "\r\n\r\n", 4);
            size_t hskip = 4;
            const uint8_t *lf = find(p, (size_t)(end - p), "\n\n", 2);
            if (lf && (!hend || lf < hend)) {
                hend = lf;
                hskip = 2;
            }
            if (!hend) {
                snprintf(err, errlen, "multipart: part %zu: headers do not end", *nparts);
                return HS_EINVAL;
            }
            hlen = (size_t)(hend - p);
            data = hend + hskip;
        }
        /* the newline before a delimiter belongs to it: an empty part is "\r\n\r\n\r\n--X" */
        const uint8_t *next = find(data, (size_t)(end - data), dl, dlen);
        if (!next) {
            snprintf(err, errlen, "multipart: part %zu: no closing boundary", *nparts);
            return HS_EINVAL;
        }
        if (*nparts == HS_PYRO_MAX_PARTS) {
            snprintf(err, errlen, "multipart: more than %d parts", HS_PYRO_MAX_PARTS);
            return HS_EINVAL;
        }
        struct hs_pyro_part *part = &parts[(*nparts)++];
        *part = (struct hs_pyro_part){{"", 0}, data, (size_t)(next - data)};
        if (hlen && !part_name(p, hlen, &part->name))
            part->name = (struct hs_str){"", 0};
        p = next + dlen;
    }
}

/* ---- folded ----------------------------------------------------------------------------- */

bool hs_pyro_folded_type(const char *app, struct hs_pyro_folded *out)
{
    /* pkg/ingester/pyroscope/ingest_adapter.go convertMetadata: suffix -> __name__, sample
     * type, unit; cpu and wall (also itimer and the time units) are scaled by sampleRate */
    static const struct hs_pyro_folded known[] = {
        {"cpu", "process_cpu", "samples", "count"},
        {"wall", "wall", "samples", "count"},
        {"inuse_objects", "memory", "inuse_objects", "count"},
        {"inuse_space", "memory", "inuse_space", "bytes"},
        {"alloc_objects", "memory", "alloc_objects", "count"},
        {"alloc_space", "memory", "alloc_space", "bytes"},
        {"goroutines", "goroutine", "goroutines", "count"}, /* sic: Pyroscope's singular */
        {"mutex_count", "mutex", "contentions", "count"},
        {"mutex_duration", "mutex", "delay", "nanoseconds"},
        {"block_count", "block", "contentions", "count"},
        {"block_duration", "block", "delay", "nanoseconds"},
        {"itimer", "process_cpu", "samples", "count"},
        {"alloc_in_new_tlab_objects", "memory", "alloc_in_new_tlab_objects", "count"},
        {"alloc_in_new_tlab_bytes", "memory", "alloc_in_new_tlab_bytes", "bytes"},
        {"alloc_outside_tlab_objects", "memory", "alloc_outside_tlab_objects", "count"},
        {"alloc_outside_tlab_bytes", "memory", "alloc_outside_tlab_bytes", "bytes"},
        {"lock_count", "block", "contentions", "count"},
        {"lock_duration", "block", "delay", "nanoseconds"},
        {"live", "memory", "live", "count"},
        {"exceptions", "exceptions", "samples", "count"},
        {"seconds", "wall", "samples", "count"},
        {"nanoseconds", "wall", "samples", "count"},
        {"microseconds", "wall", "samples", "count"},
        {"milliseconds", "wall", "samples", "count"},
        {"bytes", "memory", "samples", "bytes"},
    };
    const char *dot = strrchr(app, '.');
    const char *sfx = dot ? dot + 1 : "cpu";
    for (size_t i = 0; i < HS_ARRAY_SIZE(known); i++) {
        if (strcmp(sfx, known[i].suffix) != 0)
            continue;
        *out = known[i];
        out->suffix_len = dot ? strlen(dot) : 0;
        return true;
    }
    return false;
}

/* ---- labels ----------------------------------------------------------------------------- */

int hs_pyro_ingest_labels(struct hs_profile *p, const char *service, size_t service_len,
                          const char *spy)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < p->nlabels; i++) /* order is kept: still sorted */
        if (strncmp(p->labels[i].name, "__", 2) != 0 ||
            strcmp(p->labels[i].name, "__session_id__") == 0)
            p->labels[kept++] = p->labels[i];
    p->nlabels = kept;
    int rc = 0;
    if (!hs_profile_label(p, "service_name"))
        rc |= hs_profile_set_label(p, "service_name", 12, service, service_len);
    if (spy)
        rc |= hs_profile_set_label(p, "pyroscope_spy", 13, spy, strlen(spy));
    rc |= hs_profile_set_label(p, "__delta__", 9, "false", 5);
    return rc ? HS_ENOMEM : 0;
}

const char *hs_pyro_push_label_problem(const char *name, size_t name_len, size_t value_len)
{
    if (name_len == 0)
        return "empty label name";
    if (name_len > 1024)
        return "label name longer than 1024 bytes";
    if (value_len > 2048)
        return "label value longer than 2048 bytes";
    for (size_t i = 0; i < name_len; i++) {
        unsigned char c = (unsigned char)name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (i > 0 && ((c >= '0' && c <= '9') || c == '.'));
        if (!ok)
            return "label name is not [a-zA-Z_][a-zA-Z0-9_.]*";
    }
    return NULL;
}
