/* buf.h: a growable byte buffer (a length travels with the bytes, as sds does). */
#ifndef HS_BUF_H
#define HS_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct hs_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
};

/* All return 0 or HS_ENOMEM; on failure the buffer is unchanged. */
int hs_buf_reserve(struct hs_buf *b, size_t extra);
int hs_buf_append(struct hs_buf *b, const void *p, size_t n);
int hs_buf_putc(struct hs_buf *b, int c);
int hs_buf_printf(struct hs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hs_buf_vprintf(struct hs_buf *b, const char *fmt, va_list ap);
void hs_buf_reset(struct hs_buf *b); /* len = 0, keeps the memory */
void hs_buf_free(struct hs_buf *b);  /* back to {0} */

/* Standard base64 (RFC 4648, padded) of n bytes: JSON bytes, Basic auth, gRPC binary headers. */
int hs_buf_put_base64(struct hs_buf *b, const void *p, size_t n);
/* Standard or URL-safe base64, padded or not (what proto3 JSON parsers accept for bytes), into
 * out (room for n bytes). Returns the length, or -1 when s is not base64. */
long hs_base64_decode(const char *s, size_t n, uint8_t *out);

/* Protobuf varint and tag writers, used by the wire encoder and tests. */
int hs_buf_put_varint(struct hs_buf *b, uint64_t v);
size_t hs_varint_size(uint64_t v);

#endif
