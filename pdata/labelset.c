/* labelset.c: Pyroscope's `name` query syntax, `app.name{k=v,...}` (wire.md §5.2), parsed into a
 * profile's app name and labels, and formatted back so Pyroscope derives the same series. */
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/common.h"
#include "core/errors.h"
#include "pdata/profiles.h"

/* Pyroscope's own bounds for label names and values (wire.md §6); longer is never accepted
 * downstream, so it is refused here before anything is copied. */
#define NAME_MAX_LEN 1024
#define VALUE_MAX_LEN 2048

/* How much of an offending key or value a message quotes. */
#define SHOW(n) ((int)HS_MIN((n), (size_t)64))

static bool app_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '/';
}

static bool key_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trims [*b, *e) of ASCII white space. */
static void trim(const char *s, size_t *b, size_t *e)
{
    while (*b < *e && is_space(s[*b]))
        (*b)++;
    while (*e > *b && is_space(s[*e - 1]))
        (*e)--;
}

/* Whether p already has the label named s[0..n) (its labels are few: a linear scan). */
static bool has_label(const struct hs_profile *p, const char *s, size_t n)
{
    for (uint32_t i = 0; i < p->nlabels; i++)
        if (strncmp(p->labels[i].name, s, n) == 0 && p->labels[i].name[n] == '\0')
            return true;
    return false;
}

/* One `key=value` pair at s[b..e) (untrimmed); pos is its byte offset for messages. */
static int parse_pair(const char *s, size_t b, size_t e, struct hs_profile *p, char *err,
                      size_t errlen)
{
    size_t eq = b;
    while (eq < e && s[eq] != '=')
        eq++;
    size_t kb = b, ke = eq;
    trim(s, &kb, &ke);
    if (eq == e) {
        snprintf(err, errlen, "label at byte %zu: \"%.*s\" has no '='", b, SHOW(e - b), s + b);
        return HS_EINVAL;
    }
    size_t vb = eq + 1, ve = e;
    trim(s, &vb, &ve);
    if (kb == ke) {
        snprintf(err, errlen, "label at byte %zu: empty key", b);
        return HS_EINVAL;
    }
    if (ke - kb > NAME_MAX_LEN || ve - vb > VALUE_MAX_LEN) {
        snprintf(err, errlen,
                 "label \"%.*s\" at byte %zu: key longer than %d or value longer "
                 "than %d bytes",
                 SHOW(ke - kb), s + kb, kb, NAME_MAX_LEN, VALUE_MAX_LEN);
        return HS_EINVAL;
    }
    for (size_t i = kb; i < ke; i++)
        if (!key_char((unsigned char)s[i])) {
            snprintf(err, errlen,
                     "label key \"%.*s\" at byte %zu: character at byte %zu is "
                     "not one of [A-Za-z0-9_.]",
                     SHOW(ke - kb), s + kb, kb, i);
            return HS_EINVAL;
        }
    if (ke - kb == 8 && memcmp(s + kb, "__name__", 8) == 0) {
        snprintf(err, errlen, "label key \"__name__\" at byte %zu is reserved", kb);
        return HS_EINVAL;
    }
    if (has_label(p, s + kb, ke - kb)) {
        snprintf(err, errlen, "label key \"%.*s\" at byte %zu is duplicated", SHOW(ke - kb), s + kb,
                 kb);
        return HS_EINVAL;
    }
    return hs_profile_set_label(p, s + kb, ke - kb, s + vb, ve - vb);
}

/* The braces' contents s[b..e): pairs split on ','. */
static int parse_pairs(const char *s, size_t b, size_t e, uint32_t max_labels, struct hs_profile *p,
                       char *err, size_t errlen)
{
    size_t tb = b, te = e;
    trim(s, &tb, &te);
    if (tb == te)
        return 0; /* `{}` */
    uint32_t n = 0;
    size_t start = b;
    for (size_t i = b; i <= e; i++) {
        if (i < e && s[i] != ',')
            continue;
        if (++n > max_labels) {
            snprintf(err, errlen, "more than %u labels (the label at byte %zu is one too many)",
                     max_labels, start);
            return HS_E2BIG;
        }
        int rc = parse_pair(s, start, i, p, err, errlen);
        if (rc)
            return rc;
        start = i + 1;
    }
    return 0;
}

int hs_labelset_parse(const char *s, size_t len, uint32_t max_labels, struct hs_profile *p,
                      char *err, size_t errlen)
{
    size_t open = 0;
    while (open < len && s[open] != '{')
        open++;
    size_t ab = 0, ae = open;
    trim(s, &ab, &ae);
    if (ab == ae) {
        snprintf(err, errlen, "empty application name (the part before '{')");
        return HS_EINVAL;
    }
    if (ae - ab > NAME_MAX_LEN) {
        snprintf(err, errlen, "application name longer than %d bytes", NAME_MAX_LEN);
        return HS_EINVAL;
    }
    for (size_t i = ab; i < ae; i++)
        if (!app_char((unsigned char)s[i])) {
            snprintf(err, errlen,
                     "application name \"%.*s\": character at byte %zu is not one "
                     "of [A-Za-z0-9_.-/]",
                     SHOW(ae - ab), s + ab, i);
            return HS_EINVAL;
        }
    if (open < len) {
        size_t close = open + 1;
        while (close < len && s[close] != '}')
            close++;
        if (close == len) {
            snprintf(err, errlen, "'{' at byte %zu is not closed by '}'", open);
            return HS_EINVAL;
        }
        size_t rb = close + 1, re = len;
        trim(s, &rb, &re);
        if (rb != re) {
            snprintf(err, errlen, "unexpected text after '}' at byte %zu", rb);
            return HS_EINVAL;
        }
        int rc = parse_pairs(s, open + 1, close, max_labels, p, err, errlen);
        if (rc)
            return rc;
    }
    p->app_name = hs_profile_strdup(p, s + ab, ae - ab);
    return p->app_name ? 0 : HS_ENOMEM;
}

/* Whether parse would give this label back unchanged. */
static bool representable(const struct hs_label *l)
{
    size_t n = strlen(l->name);
    if (n == 0 || n > NAME_MAX_LEN || strlen(l->value) > VALUE_MAX_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!key_char((unsigned char)l->name[i]))
            return false;
    const char *v = l->value;
    size_t vl = strlen(v);
    if (vl && (is_space(v[0]) || is_space(v[vl - 1])))
        return false; /* trimmed away by parse */
    return strpbrk(v, ",{}") == NULL;
}

int hs_labelset_format(const struct hs_profile *p, struct hs_buf *out)
{
    const char *app = p->app_name ? p->app_name : hs_profile_label(p, "service_name");
    if (!app || !*app)
        return HS_EINVAL;
    for (const char *c = app; *c; c++)
        if (!app_char((unsigned char)*c))
            return HS_EINVAL;
    size_t mark = out->len;
    int rc = hs_buf_printf(out, "%s{", app);
    bool first = true;
    for (uint32_t i = 0; i < p->nlabels && rc == 0; i++) {
        const struct hs_label *l = &p->labels[i]; /* already sorted by name */
        if (strncmp(l->name, "__", 2) == 0)
            continue;
        if (!representable(l)) {
            rc = HS_EINVAL;
            break;
        }
        rc = hs_buf_printf(out, "%s%s=%s", first ? "" : ",", l->name, l->value);
        first = false;
    }
    if (rc == 0)
        rc = hs_buf_putc(out, '}');
    if (rc)
        out->len = mark;
    return rc;
}
