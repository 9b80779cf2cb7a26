/* json.c: the pull reader of json.h: one token per call, as views into the text; the grammar of
 * RFC 8259 kept by a small state and one bit per open container. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

/* What the reader expects next. */
enum {
    S_VALUE,        /* a value: at the top, after ':' or after ',' in an array */
    S_VALUE_OR_END, /* after '[' */
    S_KEY,          /* after ',' in an object */
    S_KEY_OR_END,   /* after '{' */
    S_AFTER_VALUE,  /* ',' or the container's end */
    S_DONE,         /* the top-level value is complete: only whitespace may follow */
    S_FAILED,       /* an error was reported; every later call repeats it */
};

void hs_json_reader_init(struct hs_json_reader *r, const char *text, size_t len, uint32_t max_depth,
                         bool allow_nul)
{
    memset(r, 0, sizeof(*r));
    r->text = r->p = text ? text : "";
    r->end = r->text + (text ? len : 0);
    r->max_depth = max_depth && max_depth < HS_JSON_MAX_DEPTH ? max_depth : HS_JSON_MAX_DEPTH;
    r->allow_nul = allow_nul;
    r->state = S_VALUE;
}

size_t hs_json_where(const struct hs_json_reader *r, const char *at, char *out, size_t outlen)
{
    unsigned line = 1, col = 1;
    for (const char *c = r->text; c < at && c < r->end; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else if ((*c & 0xC0) != 0x80) { /* characters, not bytes */
            col++;
        }
    }
    int n = snprintf(out, outlen, "line %u col %u: ", line, col);
    return n < 0 ? 0 : (size_t)n >= outlen ? outlen - 1 : (size_t)n;
}

__attribute__((format(printf, 4, 5))) static int fail(struct hs_json_reader *r, const char *at,
                                                      int code, const char *fmt, ...)
{
    size_t n = hs_json_where(r, at, r->err, sizeof(r->err));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, sizeof(r->err) - n, fmt, ap);
    va_end(ap);
    r->state = S_FAILED;
    r->rc = code;
    return code;
}

/* The character at p for a message: 'x', byte 0x01, or the end. */
static const char *describe(const struct hs_json_reader *r, const char *p, char buf[16])
{
    if (p >= r->end)
        return "end of text";
    unsigned char c = (unsigned char)*p;
    snprintf(buf, 16, c >= 0x20 && c < 0x7f ? "'%c'" : "byte 0x%02x", c);
    return buf;
}

static bool in_object(const struct hs_json_reader *r)
{
    uint32_t d = r->depth - 1;
    return r->depth && (r->is_object[d / 8] >> (d % 8) & 1);
}

static void after_value(struct hs_json_reader *r)
{
    r->state = r->depth ? S_AFTER_VALUE : S_DONE;
}

/* Length of the valid UTF-8 sequence at p (2..4 bytes; ASCII is the caller's), or 0 if it is not
 * one: overlong forms, surrogates and code points past U+10FFFF are not. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
    size_t n = (size_t)(end - p);
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0))
            return 0;
        return 3;
    }
    if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

static bool hex4(const char *p, const char *end, uint32_t *out)
{
    if (end - p < 4)
        return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return true;
}

/* The escape at *q (a backslash), checked and stepped over. */
static int check_escape(struct hs_json_reader *r, const char **q)
{
    const char *e = *q;
    if (r->end - e < 2)
        return fail(r, e, HS_EINVAL, "unterminated string");
    switch (e[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        *q = e + 2;
        return 0;
    case 'u':
        break;
    default: {
        char d[16];
        return fail(r, e, HS_EINVAL, "invalid escape: backslash before %s", describe(r, e + 1, d));
    }
    }
    uint32_t u, lo;
    if (!hex4(e + 2, r->end, &u))
        return fail(r, e, HS_EINVAL, "invalid \\u escape (four hex digits must follow)");
    if (u >= 0xDC00 && u <= 0xDFFF)
        return fail(r, e, HS_EINVAL, "invalid \\u%04X: a low surrogate without its high half",
                    (unsigned)u);
    if (u >= 0xD800 && u <= 0xDBFF) {
        if (r->end - e < 12 || e[6] != '\\' || e[7] != 'u' || !hex4(e + 8, r->end, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF)
            return fail(r, e, HS_EINVAL, "invalid \\u%04X: a high surrogate without its low half",
                        (unsigned)u);
        *q = e + 12;
        return 0;
    }
    if (u == 0 && !r->allow_nul)
        return fail(r, e, HS_EINVAL, "\\u0000 is not allowed in this document");
    *q = e + 6;
    return 0;
}

static int read_string(struct hs_json_reader *r, struct hs_json_token *t, enum hs_json_type type)
{
    const char *s = r->p + 1, *q = s;
    bool escaped = false;
    for (;;) {
        while (q < r->end && (unsigned char)*q >= 0x20 && (unsigned char)*q < 0x80 && *q != '"' &&
               *q != '\\')
            q++;
        if (q >= r->end)
            return fail(r, r->p, HS_EINVAL, "unterminated string");
        unsigned char c = (unsigned char)*q;
        if (c == '"')
            break;
        if (c == '\\') {
            int rc = check_escape(r, &q);
            if (rc)
                return rc;
            escaped = true;
        } else if (c < 0x20) {
            return fail(r, q, HS_EINVAL, "control character 0x%02x in a string (escape it)", c);
        } else {
            size_t n = utf8_len((const unsigned char *)q, (const unsigned char *)r->end);
            if (!n)
                return fail(r, q, HS_EINVAL, "invalid UTF-8 in a string (byte 0x%02x)", c);
            q += n;
        }
    }
    *t = (struct hs_json_token){
        .type = type, .at = r->p, .ptr = s, .len = (size_t)(q - s), .escaped = escaped};
    r->p = q + 1;
    return 0;
}

static bool digit(const char *p, const char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

static int read_number(struct hs_json_reader *r, struct hs_json_token *t)
{
    const char *q = r->p, *end = r->end;
    bool integer = true;
    if (*q == '-')
        q++;
    if (!digit(q, end))
        return fail(r, r->p, HS_EINVAL, "invalid number (a digit must follow '-')");
    if (*q == '0')
        q++;
    else
        while (digit(q, end))
            q++;
    if (q < end && *q == '.') {
        integer = false;
        if (!digit(++q, end))
            return fail(r, r->p, HS_EINVAL, "invalid number (a digit must follow '.')");
        while (digit(q, end))
            q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        integer = false;
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (!digit(q, end))
            return fail(r, r->p, HS_EINVAL, "invalid number (digits must follow the exponent)");
        while (digit(q, end))
            q++;
    }
    *t = (struct hs_json_token){.type = HS_JSON_NUMBER,
                                .at = r->p,
                                .ptr = r->p,
                                .len = (size_t)(q - r->p),
                                .integer = integer};
    r->p = q;
    after_value(r);
    return 0;
}

static int open_container(struct hs_json_reader *r, struct hs_json_token *t, bool object)
{
    if (r->depth >= r->max_depth)
        return fail(r, r->p, HS_E2BIG, "nested deeper than %u levels", r->max_depth);
    uint32_t d = r->depth++;
    if (object)
        r->is_object[d / 8] |= (uint8_t)(1u << (d % 8));
    else
        r->is_object[d / 8] &= (uint8_t) ~(1u << (d % 8));
    *t = (struct hs_json_token){
        .type = object ? HS_JSON_OBJECT : HS_JSON_ARRAY, .at = r->p, .ptr = r->p, .len = 1};
    r->p++;
    r->state = object ? S_KEY_OR_END : S_VALUE_OR_END;
    return 0;
}

static int close_container(struct hs_json_reader *r, struct hs_json_token *t)
{
    bool object = in_object(r);
    *t = (struct hs_json_token){
        .type = object ? HS_JSON_OBJECT_END : HS_JSON_ARRAY_END, .at = r->p, .ptr = r->p, .len = 1};
    r->p++;
    r->depth--;
    after_value(r);
    return 0;
}

static int literal(struct hs_json_reader *r, struct hs_json_token *t, const char *word,
                   enum hs_json_type type)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) {
        char d[16];
        return fail(r, r->p, HS_EINVAL, "unexpected %s (a value is expected)",
                    describe(r, r->p, d));
    }
    *t = (struct hs_json_token){.type = type, .at = r->p, .ptr = r->p, .len = n};
    r->p += n;
    after_value(r);
    return 0;
}

static int read_value(struct hs_json_reader *r, struct hs_json_token *t)
{
    char d[16];
    if (r->p >= r->end)
        return fail(r, r->p, HS_EINVAL, "unexpected end of text (a value is expected)");
    switch (*r->p) {
    case '{':
        return open_container(r, t, true);
    case '[':
        return open_container(r, t, false);
    case '"': {
        int rc = read_string(r, t, HS_JSON_STRING);
        if (rc == 0)
            after_value(r);
        return rc;
    }
    case 't':
        return literal(r, t, "true", HS_JSON_TRUE);
    case 'f':
        return literal(r, t, "false", HS_JSON_FALSE);
    case 'n':
        return literal(r, t, "null", HS_JSON_NULL);
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))
            return read_number(r, t);
        return fail(r, r->p, HS_EINVAL, "unexpected %s (a value is expected)",
                    describe(r, r->p, d));
    }
}

static int read_key(struct hs_json_reader *r, struct hs_json_token *t, bool or_end)
{
    char d[16];
    if (r->p >= r->end || *r->p != '"')
        return fail(r, r->p, HS_EINVAL, "unexpected %s (expected a member name in quotes%s)",
                    describe(r, r->p, d), or_end ? " or '}'" : "");
    int rc = read_string(r, t, HS_JSON_KEY);
    if (rc)
        return rc;
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
    if (r->p >= r->end || *r->p != ':')
        return fail(r, r->p, HS_EINVAL, "unexpected %s (expected ':' after the member name)",
                    describe(r, r->p, d));
    r->p++;
    r->state = S_VALUE;
    return 0;
}

int hs_json_next(struct hs_json_reader *r, struct hs_json_token *t)
{
    char d[16];
    for (;;) {
        while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
            r->p++;
        switch (r->state) {
        case S_VALUE:
            return read_value(r, t);
        case S_VALUE_OR_END:
            if (r->p < r->end && *r->p == ']')
                return close_container(r, t);
            return read_value(r, t);
        case S_KEY:
        case S_KEY_OR_END:
            if (r->state == S_KEY_OR_END && r->p < r->end && *r->p == '}')
                return close_container(r, t);
            return read_key(r, t, r->state == S_KEY_OR_END);
        case S_AFTER_VALUE: {
            char close = in_object(r) ? '}' : ']';
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                r->state = close == '}' ? S_KEY : S_VALUE;
                continue;
            }
            if (r->p < r->end && *r->p == close)
                return close_container(r, t);
            return fail(r, r->p, HS_EINVAL, "unexpected %s (expected ',' or '%c')",
                        describe(r, r->p, d), close);
        }
        case S_DONE:
            if (r->p < r->end)
                return fail(r, r->p, HS_EINVAL, "unexpected %s after the end of the value",
                            describe(r, r->p, d));
            *t = (struct hs_json_token){.type = HS_JSON_END, .at = r->p, .ptr = r->p};
            return 0;
        default:
            return r->rc;
        }
    }
}

int hs_json_skip(struct hs_json_reader *r, const struct hs_json_token *t)
{
    if (t->type != HS_JSON_OBJECT && t->type != HS_JSON_ARRAY)
        return 0;
    uint32_t depth = r->depth; /* t's own level; done when it closes */
    struct hs_json_token x;
    while (r->depth >= depth) {
        int rc = hs_json_next(r, &x);
        if (rc)
            return rc;
    }
    return 0;
}

static size_t put_utf8(char *out, uint32_t u)
{
    unsigned char *o = (unsigned char *)out;
    if (u < 0x80) {
        o[0] = (unsigned char)u;
        return 1;
    }
    if (u < 0x800) {
        o[0] = (unsigned char)(0xC0 | u >> 6);
        o[1] = (unsigned char)(0x80 | (u & 0x3F));
        return 2;
    }
    if (u < 0x10000) {
        o[0] = (unsigned char)(0xE0 | u >> 12);
        o[1] = (unsigned char)(0x80 | (u >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (u & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | u >> 18);
    o[1] = (unsigned char)(0x80 | (u >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (u >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (u & 0x3F));
    return 4;
}

size_t hs_json_unescape(const struct hs_json_token *t, char *out)
{
    if (!t->escaped) {
        memcpy(out, t->ptr, t->len);
        return t->len;
    }
    const char *p = t->ptr, *end = t->ptr + t->len;
    size_t n = 0;
    while (p < end) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t run = (size_t)((bs ? bs : end) - p);
        memcpy(out + n, p, run);
        n += run;
        if (!bs)
            break;
        static const char plain[] = "\"\\/\b\f\n\r\t", names[] = "\"\\/bfnrt";
        const char *k = strchr(names, bs[1]);
        if (bs[1] != 'u' && k) {
            out[n++] = plain[k - names];
            p = bs + 2;
            continue;
        }
        uint32_t u, lo;
        hex4(bs + 2, end, &u); /* checked by the reader */
        p = bs + 6;
        if (u >= 0xD800 && u <= 0xDBFF && hex4(bs + 8, end, &lo)) {
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            p = bs + 12;
        }
        n += put_utf8(out + n, u);
    }
    return n;
}

bool hs_json_string_is(const struct hs_json_token *t, const char *lit)
{
    size_t n = strlen(lit);
    if (!t->escaped)
        return t->len == n && memcmp(t->ptr, lit, n) == 0;
    char buf[256];
    if (t->len > sizeof(buf)) /* decoded, it is at least a sixth of that: longer than lit */
        return false;
    return hs_json_unescape(t, buf) == n && memcmp(buf, lit, n) == 0;
}

bool hs_json_integer(const struct hs_json_token *t, bool *neg, uint64_t *mag)
{
    const char *p = t->ptr, *end = t->ptr + t->len;
    *neg = p < end && *p == '-';
    p += *neg;
    uint64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *mag = v;
    return true;
}

double hs_json_double(const struct hs_json_token *t)
{
    /* strtod wants a terminated string, and the text past the token is not ours to read; a
     * number longer than a line (legal, rare) is copied to the heap, as long as itself */
    char small[64];
    char *s = t->len < sizeof(small) ? small : malloc(t->len + 1);
    if (!s)
        return NAN;
    memcpy(s, t->ptr, t->len);
    s[t->len] = '\0';
    double d = strtod(s, NULL);
    if (s != small)
        free(s);
    return d;
}
