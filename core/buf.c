/* buf.c: growable byte buffers. */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

int hs_buf_reserve(struct hs_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len)
        return HS_ENOMEM;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p)
        return HS_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int hs_buf_append(struct hs_buf *b, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    int rc = hs_buf_reserve(b, n);
    if (rc)
        return rc;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int hs_buf_putc(struct hs_buf *b, int c)
{
    int rc = hs_buf_reserve(b, 1);
    if (rc)
        return rc;
    b->data[b->len++] = (uint8_t)c;
    return 0;
}

int hs_buf_vprintf(struct hs_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return HS_EINVAL;
    int rc = hs_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int hs_buf_printf(struct hs_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = hs_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void hs_buf_reset(struct hs_buf *b)
{
    b->len = 0;
}

void hs_buf_free(struct hs_buf *b)
{
    free(b->data);
    *b = (struct hs_buf){0};
}

size_t hs_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

int hs_buf_put_varint(struct hs_buf *b, uint64_t v)
{
    int rc = hs_buf_reserve(b, 10);
    if (rc)
        return rc;
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
    return 0;
}

int hs_buf_put_base64(struct hs_buf *b, const void *data, size_t n)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *p = data;
    if (hs_buf_reserve(b, (n + 2) / 3 * 4) != 0)
        return HS_ENOMEM;
    for (size_t i = 0; i < n; i += 3) {
        size_t left = n - i;
        uint32_t v = (uint32_t)p[i] << 16 | (left > 1 ? (uint32_t)p[i + 1] << 8 : 0) |
                     (left > 2 ? p[i + 2] : 0);
        b->data[b->len++] = (uint8_t)digits[v >> 18];
        b->data[b->len++] = (uint8_t)digits[(v >> 12) & 63];
        b->data[b->len++] = (uint8_t)(left > 1 ? digits[(v >> 6) & 63] : '=');
        b->data[b->len++] = (uint8_t)(left > 2 ? digits[v & 63] : '=');
    }
    return 0;
}

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-') /* the URL-safe alphabet too, as proto3 JSON parsers accept */
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

long hs_base64_decode(const char *s, size_t n, uint8_t *out)
{
    while (n && s[n - 1] == '=' && n % 4 != 1)
        n--;
    if (n % 4 == 1)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64val(s[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            out[o++] = (uint8_t)(acc >> 16);
            out[o++] = (uint8_t)(acc >> 8);
            out[o++] = (uint8_t)acc;
        }
    }
    if (n % 4 == 2) {
        out[o++] = (uint8_t)(acc >> 4);
    } else if (n % 4 == 3) {
        out[o++] = (uint8_t)(acc >> 10);
        out[o++] = (uint8_t)(acc >> 2);
    }
    return (long)o;
}
