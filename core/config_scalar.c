/* config_scalar.c: the scalar syntaxes of config values (booleans, decimal numbers, Go-style
 * durations, sizes with SI and IEC units, host:port endpoints, http(s) URLs) and their human
 * spelling for messages. Parsing is exact integer arithmetic: "1.1s" is 1100 ms, not 1099. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "config.h"
#include "config_internal.h"
#include "errors.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int hs_cfg_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (size_t i = 0; i < HS_ARRAY_SIZE(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *out = strcasecmp(s, yes[i]) == 0;
            return 0;
        }
    }
    return HS_EINVAL;
}

int hs_cfg_uint(const char *s, uint64_t *out)
{
    if (!*s)
        return HS_EINVAL;
    uint64_t v = 0;
    bool big = false;
    for (; *s; s++) {
        if (!is_digit(*s))
            return HS_EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            big = true;
        else
            v = v * 10 + d;
    }
    if (big)
        return HS_E2BIG;
    *out = v;
    return 0;
}

int hs_cfg_int(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    uint64_t mag;
    int rc = hs_cfg_uint(s + neg, &mag);
    if (rc)
        return rc;
    if (mag > (uint64_t)INT64_MAX + neg)
        return HS_E2BIG;
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

int hs_cfg_double(const char *s, double *out)
{
    /* Only decimal spellings: strtod would also take hex, "inf" and leading spaces. */
    if (!*s || strspn(s, "0123456789+-.eE") != strlen(s))
        return HS_EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s)
        return HS_EINVAL;
    if (errno == ERANGE || !isfinite(v))
        return HS_E2BIG;
    *out = v;
    return 0;
}

/* `digits[.digits]`, at least one digit in all. */
struct number {
    uint64_t ipart;
    const char *frac;
    size_t nfrac;
    bool dot;
    bool big;
};

static const char *scan_number(const char *s, struct number *n)
{
    *n = (struct number){0};
    const char *p = s;
    for (; is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (n->ipart > (UINT64_MAX - d) / 10)
            n->big = true;
        else
            n->ipart = n->ipart * 10 + d;
    }
    bool any = p > s;
    if (*p == '.') {
        n->dot = true;
        n->frac = ++p;
        while (is_digit(*p))
            p++;
        n->nfrac = (size_t)(p - n->frac);
        any = any || n->nfrac > 0;
    }
    return any ? p : NULL;
}

/* floor(n × unit), flagging a dropped remainder. The fraction is divided by ten digit by digit
 * from the last one; each carry stays below `unit`, so nothing overflows. */
static int scale(const struct number *n, uint64_t unit, uint64_t *out, bool *inexact)
{
    if (n->big || (unit && n->ipart > UINT64_MAX / unit))
        return HS_E2BIG;
    uint64_t carry = 0;
    for (size_t i = n->nfrac; i-- > 0;) {
        uint64_t t = (uint64_t)(n->frac[i] - '0') * unit + carry;
        *inexact = *inexact || t % 10;
        carry = t / 10;
    }
    uint64_t v = n->ipart * unit;
    if (carry > UINT64_MAX - v)
        return HS_E2BIG;
    *out = v + carry;
    return 0;
}

static const struct {
    const char *name;
    uint64_t ns;
} duration_units[] = {
    {"ns", 1},           {"us", 1000},      {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
    {"\xce\xbcs", 1000},                                         /* U+03BC Greek mu */
    {"ms", 1000000},     {"s", 1000000000}, {"m", 60ull * 1000000000}, {"h", 3600ull * 1000000000},
};

int hs_cfg_duration(const char *s, uint64_t *ms)
{
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    if (!*s)
        return HS_EINVAL;
    uint64_t total = 0;
    bool inexact = false;
    while (*s) {
        struct number n;
        const char *p = scan_number(s, &n);
        if (!p)
            return HS_EINVAL;
        size_t ulen = strcspn(p, "0123456789.");
        uint64_t unit = 0;
        for (size_t i = 0; i < HS_ARRAY_SIZE(duration_units); i++)
            if (strlen(duration_units[i].name) == ulen &&
                memcmp(p, duration_units[i].name, ulen) == 0)
                unit = duration_units[i].ns;
        if (!unit)
            return HS_EINVAL;
        uint64_t v;
        int rc = scale(&n, unit, &v, &inexact);
        if (rc)
            return rc;
        if (v > UINT64_MAX - total)
            return HS_E2BIG;
        total += v;
        s = p + ulen;
    }
    /* Sub-millisecond remainders round up so "100us" never becomes "no timeout at all". */
    *ms = total / 1000000 + (total % 1000000 || inexact ? 1 : 0);
    return 0;
}

static const struct {
    const char *name;
    uint64_t mult;
} size_units[] = {
    {"B", 1},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000 * 1000 * 1000},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
};

int hs_cfg_size(const char *s, uint64_t *bytes)
{
    struct number n;
    const char *p = scan_number(s, &n);
    if (!p)
        return HS_EINVAL;
    const char *u = p + strspn(p, " ");
    if (!*u) { /* no unit: whole bytes only, and no dangling space */
        if (n.dot || *p)
            return HS_EINVAL;
        if (n.big)
            return HS_E2BIG;
        *bytes = n.ipart;
        return 0;
    }
    for (size_t i = 0; i < HS_ARRAY_SIZE(size_units); i++) {
        if (strcasecmp(u, size_units[i].name) != 0)
            continue;
        bool inexact = false;
        uint64_t v;
        int rc = scale(&n, size_units[i].mult, &v, &inexact);
        if (rc)
            return rc;
        if (inexact && v == UINT64_MAX)
            return HS_E2BIG;
        *bytes = v + inexact; /* a part of a byte is a whole one */
        return 0;
    }
    return HS_EINVAL;
}

static bool port_ok(const char *s, size_t n, uint16_t *port)
{
    if (n == 0 || n > 5)
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return false;
    if (port)
        *port = (uint16_t)v;
    return true;
}

static bool chars_in(const char *s, size_t n, const char *extra)
{
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr(extra, s[i]))
            return false;
    return true;
}

const char *hs_cfg_endpoint_problem(const char *s, char *host, size_t hostlen, uint16_t *port)
{
    const char *h, *hend, *colon;
    if (s[0] == '[') {
        h = s + 1;
        hend = strchr(h, ']');
        if (!hend)
            return "missing \"]\" after the IPv6 address";
        if (hend[1] != ':')
            return "expected \":port\" after \"]\"";
        if (hend == h || !memchr(h, ':', (size_t)(hend - h)) ||
            !chars_in(h, (size_t)(hend - h), ":.%_-"))
            return "not an IPv6 address between \"[\" and \"]\"";
        colon = hend + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return "expected host:port (or :port to listen on every address)";
        h = s;
        hend = colon;
        if (memchr(h, ':', (size_t)(hend - h)))
            return "an IPv6 address needs brackets, as in [::1]:4318";
        if (!chars_in(h, (size_t)(hend - h), ".-_"))
            return "the host has characters a host name cannot have";
    }
    if (!port_ok(colon + 1, strlen(colon + 1), port))
        return "the port must be a number from 0 to 65535";
    size_t n = (size_t)(hend - h);
    if (host) {
        if (n >= hostlen)
            return "the host name is too long";
        memcpy(host, h, n);
        host[n] = '\0';
    }
    return NULL;
}

int hs_parse_endpoint(const char *s, char *host, size_t hostlen, uint16_t *port)
{
    return s && !hs_cfg_endpoint_problem(s, host, hostlen, port) ? 0 : HS_EINVAL;
}

const char *hs_cfg_url_problem(const char *s)
{
    size_t skip = strncasecmp(s, "http://", 7) == 0    ? 7
                  : strncasecmp(s, "https://", 8) == 0 ? 8
                                                       : 0;
    if (!skip)
        return "expected an absolute http:// or https:// URL";
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return "a URL cannot contain spaces or control characters";
    const char *auth = s + skip;
    const char *end = auth + strcspn(auth, "/?#");
    for (const char *p = end; p > auth; p--) /* user:pass@ is not the host */
        if (p[-1] == '@') {
            auth = p;
            break;
        }
    const char *hend = end;
    if (*auth == '[') {
        const char *close = memchr(auth, ']', (size_t)(end - auth));
        if (!close)
            return "missing \"]\" after the IPv6 address";
        hend = close + 1;
        if (hend < end && *hend != ':')
            return "unexpected characters after \"]\"";
    } else {
        const char *c = memchr(auth, ':', (size_t)(end - auth));
        if (c)
            hend = c;
    }
    if (hend == auth || (*auth == '[' && hend - auth <= 2))
        return "the URL has no host";
    if (hend < end && !port_ok(hend + 1, (size_t)(end - hend - 1), NULL))
        return "the port must be a number from 0 to 65535";
    return NULL;
}

int hs_parse_duration_ms(const char *s, uint64_t *out)
{
    return s && hs_cfg_duration(s, out) == 0 ? 0 : HS_EINVAL;
}

int hs_parse_size(const char *s, uint64_t *out)
{
    return s && hs_cfg_size(s, out) == 0 ? 0 : HS_EINVAL;
}

void hs_cfg_format_duration(uint64_t ms, char *buf, size_t len)
{
    if (ms < 1000) {
        snprintf(buf, len, "%llums", (unsigned long long)ms);
        return;
    }
    unsigned long long h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60;
    unsigned frac = (unsigned)(ms % 1000);
    size_t n = 0;
    if (h)
        n += (size_t)snprintf(buf + n, len - HS_MIN(n, len), "%lluh", h);
    if (m)
        n += (size_t)snprintf(buf + n, len - HS_MIN(n, len), "%llum", m);
    if (s || frac) {
        char f[8] = "";
        if (frac) {
            snprintf(f, sizeof(f), ".%03u", frac);
            size_t i = strlen(f); /* ".250" -> ".25"; the dot is never a zero */
            while (i > 1 && f[i - 1] == '0')
                f[--i] = '\0';
        }
        snprintf(buf + HS_MIN(n, len), len - HS_MIN(n, len), "%llu%ss", s, f);
    }
}

void hs_cfg_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {{"GiB", 1ull << 30}, {"GB", 1000000000},  {"MiB", 1ull << 20},
                 {"MB", 1000000},     {"KiB", 1ull << 10}, {"KB", 1000}};
    for (size_t i = 0; bytes && i < HS_ARRAY_SIZE(units); i++) {
        if (bytes % units[i].mult == 0) {
            snprintf(buf, len, "%llu%s", (unsigned long long)(bytes / units[i].mult),
                     units[i].name);
            return;
        }
    }
    snprintf(buf, len, "%lluB", (unsigned long long)bytes);
}
