/* compress.c: gzip in with zlib's streaming inflate, so a bomb stops at the output limit, and
 * gzip out with libdeflate, which is faster than zlib for whole buffers. */
#include "compress.h"

#include <libdeflate.h>
#include <zlib.h>

#include "buf.h"
#include "common.h"
#include "errors.h"

int hs_gunzip(const uint8_t *in, size_t len, size_t max_out, struct hs_buf *out, const char **msg)
{
    z_stream zs = {0};
    const char *why = NULL;
    int rc = 0;

    if (len < 2 || in[0] != 0x1f || in[1] != 0x8b) {
        *msg = "body is not gzip (bad magic bytes)";
        return HS_EINVAL;
    }
    if (len > UINT32_MAX) { /* bodies are capped far below this */
        *msg = "gzip body too large";
        return HS_E2BIG;
    }
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) /* 16: gzip wrapper only */
        return HS_ENOMEM;
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    for (;;) {
        /* grow geometrically, but never past one byte over the limit */
        if (out->cap - out->len < 4096 &&
            (rc = hs_buf_reserve(out, HS_MIN(HS_MAX(out->len, 65536), max_out + 1 - out->len))))
            break;
        size_t room = HS_MIN(out->cap - out->len, max_out + 1 - out->len);
        zs.next_out = out->data + out->len;
        zs.avail_out = (uInt)HS_MIN(room, (size_t)UINT32_MAX);
        uInt before = zs.avail_out;
        int z = inflate(&zs, Z_NO_FLUSH);
        out->len += before - zs.avail_out;
        if (out->len > max_out) {
            why = "decompressed body exceeds the size limit";
            rc = HS_E2BIG;
            break;
        }
        if (z == Z_STREAM_END) {
            /* a gzip file may hold several members, possibly with zero padding between */
            while (zs.avail_in > 0 && *zs.next_in == 0) {
                zs.next_in++;
                zs.avail_in--;
            }
            if (zs.avail_in == 0)
                break;
            if (inflateReset(&zs) == Z_OK)
                continue;
            z = Z_DATA_ERROR;
        }
        if (z == Z_OK || (z == Z_BUF_ERROR && zs.avail_out == 0)) {
            if (zs.avail_in > 0 || zs.avail_out == 0)
                continue; /* more to do, or only the output was full */
            z = Z_BUF_ERROR;
        }
        if (z == Z_MEM_ERROR) {
            rc = HS_ENOMEM;
            break;
        }
        why = z == Z_BUF_ERROR ? "truncated gzip data (stream ends early)"
                               : zs.msg ? zs.msg : "corrupt gzip data";
        rc = HS_EINVAL;
        break;
    }
    inflateEnd(&zs);
    if (msg)
        *msg = why;
    return rc;
}

int hs_gzip(const uint8_t *in, size_t len, int level, struct hs_buf *out)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (!c)
        return HS_ENOMEM;
    size_t bound = libdeflate_gzip_compress_bound(c, len);
    out->len = 0;
    int rc = hs_buf_reserve(out, bound);
    if (rc == 0) {
        size_t n = libdeflate_gzip_compress(c, in, len, out->data, bound);
        if (n == 0)
            rc = HS_ENOMEM;
        out->len = n;
    }
    libdeflate_free_compressor(c);
    return rc;
}
